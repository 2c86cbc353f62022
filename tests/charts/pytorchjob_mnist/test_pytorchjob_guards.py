"""What charts/pytorchjob-mnist's `fail` guards of a PyTorchJob (processes without torchrun, elastic rendezvous,
gang scheduling, pod names) let through, and the release name's check; test_shared_guards.py's table holds
their messages."""

from __future__ import annotations

import pytest

from tests.support.helm import one
from tests.support.paths import WORKLOAD_CHART
from tests.support.pytorchjob_mnist import PYTORCHJOB, render_with


@pytest.fixture
def kind():
    return PYTORCHJOB


def test_release_name_is_checked_like_fullname_override(helm):
    """Helm allows 53-character release names with dots; the job name must be stricter."""
    dotted = helm.template(WORKLOAD_CHART, release="mnist.v1")
    assert dotted.returncode != 0 and '"mnist.v1"' in dotted.stderr and "DNS-1035" in dotted.stderr
    longest = helm.template(WORKLOAD_CHART, release="x" * 53, set_values={"workers": 101})
    assert longest.returncode != 0
    assert "set fullnameOverride to a name of at most 52 characters" in longest.stderr


def test_guards_accept_what_they_do_not_refuse(helm, tmp_path):
    """The boundaries of the guards above render: the longest TensorBoard name, elastic min/max
    around the pod count, and a gang as large as the job."""
    accepted = [
        {"fullnameOverride": "a" * 51, "tensorboard": {"enabled": True}},
        {
            "workers": 2,
            "torchrun": {"enabled": True},
            "elasticPolicy": {"enabled": True, "minReplicas": 3, "maxReplicas": 3},
        },
        {
            "workers": 2,
            "torchrun": {"enabled": True},
            "elasticPolicy": {"enabled": True, "minReplicas": 1, "maxReplicas": 8},
        },
        {"runPolicy": {"schedulingPolicy": {"minAvailable": 2}}},
    ]
    for values in accepted:
        assert one(render_with(helm, values, tmp_path), "PyTorchJob"), values


def test_names_that_look_like_numbers_stay_strings(helm, tmp_path):
    docs = render_with(
        helm,
        {
            "kueue": {"queueName": "123"},
            "runPolicy": {"schedulingPolicy": {"queue": "007"}},
            "persistence": {"hostPath": {"path": "/srv/mnist", "nodeName": "1234"}},
        },
        tmp_path,
    )
    job = one(docs, "PyTorchJob")
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "123"
    assert job["spec"]["runPolicy"]["schedulingPolicy"]["queue"] == "007"
    terms = one(docs, "PersistentVolume")["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][0]["values"] == ["1234"]
