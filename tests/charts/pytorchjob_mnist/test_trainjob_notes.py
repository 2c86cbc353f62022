"""charts/pytorchjob-mnist's NOTES of a TrainJob: Trainer v2's commands, the values it ignores, and the
token its pods still get."""

from __future__ import annotations

import pytest

from tests.support.pytorchjob_mnist import TRAINJOB


@pytest.fixture
def kind():
    return TRAINJOB


def test_notes_give_the_v2_commands(notes):
    text = notes()
    assert text.startswith("TrainJob mnist (2 nodes × 1 torchrun process(es), backend gloo, recipe fast, ")
    assert "Kubeflow Trainer v2.2 or later" in text
    assert "kubectl get trainjobs mnist -n ml -w" in text
    assert "-l jobset.sigs.k8s.io/jobset-name=mnist,jobset.sigs.k8s.io/replicatedjob-name=node," in text
    assert "batch.kubernetes.io/job-completion-index=0" in text
    assert 'get_job_logs("mnist")' in text and 'KubernetesBackendConfig(namespace="ml")' in text
    assert "kubectl wait trainjob/mnist -n ml --for=condition=Complete" in text
    assert "kubectl delete trainjob mnist -n ml" in text
    assert "backoffLimit" in text and "ignores" in text, "the v1-only values are said to be ignored"
    assert "pytorchjob" not in text.lower().replace("pytorchjob-mnist", "")


def test_notes_warn_that_the_trainjobs_pods_still_get_a_token(notes):
    """serviceAccount.automountToken=false reaches only the test pod and TensorBoard under a TrainJob."""
    warning = "Its pods still get a Kubernetes API token (runtime patches cannot set automountServiceAccountToken)"
    assert "set automountServiceAccountToken: false on ServiceAccount default to drop it" in notes()
    assert "on ServiceAccount reader to drop it" in notes("--set", "serviceAccount.name=reader")
    assert warning not in notes("--set", "serviceAccount.automountToken=true")
