"""charts/pytorchjob-mnist's NOTES of a TrainJob: Trainer v2's commands and versions, the values it
ignores, the token its pods still get, the State column, what an upgrade cannot change, and the
chart's own runtime."""

from __future__ import annotations

import pytest

from tests.support.pytorchjob_mnist import TRAINJOB


@pytest.fixture
def kind():
    return TRAINJOB


def test_notes_give_the_v2_commands(notes):
    text = notes()
    assert text.startswith("TrainJob mnist (2 nodes × 1 torchrun process(es), backend gloo, recipe fast, ")
    assert "Kubeflow Trainer v2.2.0–v2.3.0 (checked)" in text
    assert "Kubernetes 1.31 or later" in text, "upstream's kubeflow-trainer chart 2.3.0 needs it"
    assert "kubectl get trainjobs mnist -n ml -w" in text
    assert "-l jobset.sigs.k8s.io/jobset-name=mnist,jobset.sigs.k8s.io/replicatedjob-name=node," in text
    assert "batch.kubernetes.io/job-completion-index=0" in text
    assert 'get_job_logs("mnist")' in text and 'KubernetesBackendConfig(namespace="ml")' in text
    assert "kubectl wait trainjob/mnist -n ml --for=condition=Complete" in text
    assert "kubectl delete trainjob mnist -n ml" in text
    assert "backoffLimit" in text and "ignores" in text, "the v1-only values are said to be ignored"
    assert "pytorchjob" not in text.lower().replace("pytorchjob-mnist", "")


def test_notes_warn_that_the_trainjobs_pods_may_get_a_token_from_a_given_service_account(notes):
    """A runtime patch cannot set automountServiceAccountToken, so a TrainJob's pods take the
    ServiceAccount's: the chart's own says false, a given one may not."""
    warning = "Its pods still get a Kubernetes API token unless ServiceAccount"
    reader = " ".join(notes("--set", "serviceAccount.name=reader").split())
    assert "unless ServiceAccount reader sets automountServiceAccountToken: false" in reader
    assert warning not in notes(), "the chart's own ServiceAccount mounts no token"
    assert warning not in notes("--set", "serviceAccount.name=reader", "--set", "serviceAccount.automountToken=true")
    assert warning not in notes("--set", "serviceAccount.name=reader", "--set", "trainingRuntime.create=true")


def test_notes_name_the_charts_runtime_and_what_uninstall_leaves(notes):
    text = notes("--set", "trainingRuntime.create=true")
    assert "recipe fast, TrainingRuntime mnist of this release) was submitted" in text
    assert "kubectl delete trainingruntime mnist -n ml" in text, "a hook, which helm uninstall leaves"
    assert "and that runtime" not in text and "ignores those values" not in text
    assert "ClusterTrainingRuntime torch-distributed) was submitted" in notes()


def test_the_state_column_reads_suspended_after_a_resume(notes):
    """kubectl's State column is the last condition's type, and resuming (Kueue's admission too) only
    sets Suspended to False (Trainer v2.3.0's setSuspendedCondition)."""
    assert "State column: empty while it runs, then Complete or Failed" in notes()
    for flags in (("--set", "kueue.queueName=team-a"), ("--set", "runPolicy.suspend=true")):
        text = notes(*flags)
        assert "Suspended while it waits and still\n   after it is resumed or Kueue admits it" in text
        assert "empty while it runs" not in text


def test_notes_say_what_an_upgrade_cannot_change(notes):
    text = " ".join(notes().split())
    assert "Its trainer, runtimeRef, activeDeadlineSeconds and managedBy are immutable" in text
    assert "volumes, mounts, security contexts, service account and pull secrets for good" in text
    assert "placement, labels and annotations unless the job is suspended" in text
    assert "delete it first (kubectl delete trainjob mnist -n ml), or suspend it" in text
