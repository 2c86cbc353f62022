"""charts/pytorchjob-mnist's NOTES of a PyTorchJob: the operator's commands, and its warnings about
ExitCode's unbounded recreations, a backoffLimit that survives no failure and a deadline whose pods
go on running."""

from __future__ import annotations

import pytest

from tests.support.paths import WORKLOAD_CHART
from tests.support.pytorchjob_mnist import PYTORCHJOB

DEADLINE_WARNING = "runPolicy.activeDeadlineSeconds is set with runPolicy.cleanPodPolicy None"


@pytest.fixture
def kind():
    return PYTORCHJOB


def test_notes_give_the_operators_commands(notes):
    text = notes()
    assert text.startswith("PyTorchJob mnist (1 Master + 1 Worker, backend gloo, recipe fast) was submitted")
    assert "It needs a training-operator v1 running in the cluster, such as this project's chart\n" in text
    assert "\noci://ghcr.io/pytorchjob-mnist/charts/training-operator installs." in text
    for command in (
        "kubectl get pytorchjobs mnist -n ml -w",
        "kubectl get pods -n ml -l training.kubeflow.org/job-name=mnist",
        "kubectl logs -f mnist-master-0 -n ml",
        "kubectl wait pytorchjob/mnist -n ml --for=condition=Succeeded",
        "kubectl delete pytorchjob mnist -n ml",
    ):
        assert command in text, command
    assert "torchrun with 2 process(es) per pod" in notes("-f", str(WORKLOAD_CHART / "ci" / "torchrun-cpu-values.yaml"))
    assert "Kubernetes API token" not in text, "a PyTorchJob's pods take the chart's automountServiceAccountToken"


def test_notes_of_custom_args_name_the_working_directory(notes):
    text = notes("--set", "args={--epochs=1,--save-model}")
    assert "outputs go where they say (relative paths from\n   /mnt/pytorchjob-mnist)" in text


def test_notes_of_an_elastic_job_follow_every_pod_for_rank_0(notes):
    text = notes("-f", str(WORKLOAD_CHART / "ci" / "elastic-cpu-values.yaml"))
    assert "kubectl logs -f -n ml -l training.kubeflow.org/job-name=mnist --prefix" in text
    assert "kubectl logs -f mnist-master-0" not in text


def test_notes_warn_that_exit_code_recreations_are_unbounded_without_a_deadline(notes):
    """The operator v1 does not count ExitCode's pod recreations against backoffLimit (kubeflow/trainer#2045)."""
    warning = "Set runPolicy.activeDeadlineSeconds to bound the job"
    assert warning in notes("--set", "restartPolicy=ExitCode")
    assert warning not in notes("--set", "restartPolicy=ExitCode", "--set", "runPolicy.activeDeadlineSeconds=86400")
    assert warning not in notes()


def test_notes_warn_when_backoff_limit_lets_the_job_survive_no_failure(notes):
    """The operator adds up every pod's restarts, and one failure restarts every pod (each loses its peer)."""
    warning = "runPolicy.backoffLimit 3 lets it survive no failure: the operator adds up the restarts of\nall 3 pods"
    assert warning in notes("--set", "workers=2")
    assert "set runPolicy.backoffLimit to 3 × N + 1 (e.g. 10 for three)" in notes("--set", "workers=2")
    assert "survive no failure" not in notes(), "1 Master + 1 Worker: 3 survives one failure (2 restarts)"
    assert "survive no failure" not in notes("--set", "workers=2", "--set", "runPolicy.backoffLimit=0")
    assert "survive no failure" not in notes("--set", "workers=2", "--set", "restartPolicy=ExitCode")


def test_a_deadline_with_clean_pod_policy_none_warns_and_suggests_running(notes):
    """The training-operator v1.9.4 leaves the pods of a job its deadline failed running."""
    text = notes("--set", "runPolicy.activeDeadlineSeconds=7200", "--set", "runPolicy.cleanPodPolicy=None")
    assert DEADLINE_WARNING in text
    assert "Set runPolicy.cleanPodPolicy=Running" in text
    assert "only when the job or its pods change" in text, "it says the deadline is checked late"


@pytest.mark.parametrize(
    "flags",
    [
        (),  # no deadline, the default cleanPodPolicy None
        ("--set", "runPolicy.activeDeadlineSeconds=7200", "--set", "runPolicy.cleanPodPolicy=Running"),
        ("--set", "runPolicy.activeDeadlineSeconds=7200", "--set", "runPolicy.cleanPodPolicy=All"),
    ],
    ids=["no-deadline", "running", "all"],
)
def test_no_deadline_warning_without_a_deadline_or_with_pods_cleaned(notes, flags):
    assert DEADLINE_WARNING not in notes(*flags)
