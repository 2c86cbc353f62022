"""charts/pytorchjob-mnist's `fail` guards of a PyTorchJob (its own and the shared ones only it can
trip: processes without torchrun, elastic rendezvous, gang scheduling, pod names), and what they let through."""

from __future__ import annotations

import pytest

from tests.support.helm import one
from tests.support.paths import WORKLOAD_CHART
from tests.support.pytorchjob_mnist import PYTORCHJOB, render_with, template_error


@pytest.fixture
def kind():
    return PYTORCHJOB


GUARDS = {
    "two-gpus-without-torchrun": ({"gpu": 2}, "set torchrun.enabled=true"),
    "nproc-without-torchrun": ({"nprocPerNode": "4"}, "nprocPerNode: 4 without torchrun breaks WORLD_SIZE"),
    "torchrun-count-without-torchrun": (
        {"nprocPerNode": "auto"},
        "nprocPerNode: auto is one of torchrun's counts, but without torchrun",
    ),
    "a-process-per-cpu-on-gpus": (
        {"gpu": 2, "torchrun": {"enabled": True}, "nprocPerNode": "cpu"},
        "nprocPerNode: cpu starts a process per CPU core, but with gpu: 2",
    ),
    # torchrun's own counts: "gpu" needs CUDA, "auto" and "cpu" count the node's cores, not the pod's.
    "a-process-per-gpu-without-gpus": (
        {"torchrun": {"enabled": True}, "nprocPerNode": "gpu"},
        "nprocPerNode: gpu counts the pod's GPUs, but gpu is 0",
    ),
    "a-process-per-node-core": (
        {"torchrun": {"enabled": True}, "nprocPerNode": "auto"},
        "nprocPerNode: auto with gpu: 0 starts a process per CPU core of the node",
    ),
    "elastic-without-torchrun": ({"elasticPolicy": {"enabled": True}}, "elasticPolicy.enabled needs torchrun"),
    "elastic-without-workers": (
        {"workers": 0, "torchrun": {"enabled": True}, "elasticPolicy": {"enabled": True}},
        "elasticPolicy.enabled needs at least one Worker",
    ),
    "elastic-min-above-max": (
        {"torchrun": {"enabled": True}, "elasticPolicy": {"enabled": True, "minReplicas": 3, "maxReplicas": 2}},
        "elasticPolicy.minReplicas (3) is greater than elasticPolicy.maxReplicas (2)",
    ),
    "etcd-without-host": (
        {"torchrun": {"enabled": True}, "elasticPolicy": {"enabled": True, "rdzvBackend": "etcd"}},
        "elasticPolicy.rdzvBackend etcd needs an etcd server, but rdzvHost is empty",
    ),
    "elastic-min-above-pods": (
        {"torchrun": {"enabled": True}, "elasticPolicy": {"enabled": True, "minReplicas": 3}},
        "elasticPolicy.minReplicas (3) is more than the job's 2 pods (1 Master + workers: 1)",
    ),
    "elastic-max-below-pods": (
        {
            "workers": 3,
            "torchrun": {"enabled": True},
            "elasticPolicy": {"enabled": True, "minReplicas": 2, "maxReplicas": 3},
        },
        "elasticPolicy.maxReplicas (3) is less than the job's 4 pods (1 Master + workers: 3)",
    ),
    "gang-larger-than-the-job": (
        {"runPolicy": {"schedulingPolicy": {"minAvailable": 5}}},
        "runPolicy.schedulingPolicy.minAvailable (5) is more than the job's 2 pods",
    ),
    "tensorboard-service-name-too-long": (
        {"fullnameOverride": "a" * 54, "tensorboard": {"enabled": True}},
        'its TensorBoard Service name "' + "a" * 54 + '-tensorboard" has 66 characters, the limit is 63; '
        "set fullnameOverride to a name of at most 51 characters",
    ),
    "name-too-long": (
        {"fullnameOverride": "a" * 56, "workers": 10},
        'its pod and Service name "' + "a" * 56 + '-worker-9" has 65 characters, the limit is 63; '
        "set fullnameOverride to a name of at most 54 characters",
    ),
}


@pytest.mark.parametrize("case", sorted(GUARDS))
def test_fail_guard_message(helm, tmp_path, case):
    values, message = GUARDS[case]
    assert message in template_error(helm, values, tmp_path)


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
