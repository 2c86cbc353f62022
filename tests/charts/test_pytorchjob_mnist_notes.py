"""charts/pytorchjob-mnist's NOTES.txt, as `helm install` would print it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.helm import notes_preview_chart, render_notes
from tests.support.paths import WORKLOAD_CHART
from tests.support.pytorchjob_mnist import flag, trainer_container


@pytest.fixture(scope="module")
def notes_chart(tmp_path_factory) -> Path:
    return notes_preview_chart(WORKLOAD_CHART, tmp_path_factory.mktemp("notes"))


@pytest.fixture
def notes(helm, notes_chart):
    """NOTES of `helm install mnist -n ml` with these extra flags."""
    return lambda *args: render_notes(helm, notes_chart, release="mnist", namespace="ml", extra=args)


def test_notes_tell_the_user_what_to_run(helm, notes):
    text = notes("--set", "tensorboard.enabled=true")
    for command in (
        "kubectl get pytorchjobs mnist -n ml",
        "kubectl logs -f mnist-master-0 -n ml",
        "kubectl wait pytorchjob/mnist -n ml --for=condition=Succeeded",
        "helm test mnist -n ml --timeout 1860s",
        "kubectl logs mnist-check-run -n ml",
        "kubectl port-forward -n ml svc/mnist-tensorboard 6006:6006",
        "kubectl delete pvc mnist-storage -n ml",
    ):
        assert command in text, command
    assert "kubectl delete pv " not in text, "a new claim's volume is the provisioner's to delete"
    run_id = flag(trainer_container(helm.render(WORKLOAD_CHART, release="mnist", namespace="ml"))["args"], "--run-id")
    assert f"this run's checkpoints in /mnt/pytorchjob-mnist/runs/ml/mnist/checkpoints/{run_id}." in text
    assert "all 2 pods run on one node" in text and "ReadWriteMany" in text


def test_notes_with_custom_args_say_where_the_test_looks(notes):
    """args replace --output-dir and --checkpoint-dir: the chart's run directory holds nothing then."""
    text = notes("--set", "args={--epochs=1,--save-model}")
    assert "The model and metrics.json land on claim" not in text
    assert "outputs go where they say (relative paths from\n   /mnt/pytorchjob-mnist)" in text
    assert "Your args replace the chart's trainer flags" in text
    assert "(the trainer's\n   --output-dir=/mnt/pytorchjob-mnist/runs/ml/mnist/model)" in text
    assert "--output-dir" not in notes("--set", "args={--epochs=1}", "--set", "tests.enabled=false")
    own_script = notes("--set", "command={python,/app/train.py}")
    assert "Your command and args replace the chart's trainer flags" in own_script
    assert "The model and metrics.json land on claim" not in own_script


def test_notes_of_an_elastic_job_follow_every_pod_for_rank_0(notes):
    text = notes("-f", str(WORKLOAD_CHART / "ci" / "elastic-cpu-values.yaml"))
    assert "kubectl logs -f -n ml -l training.kubeflow.org/job-name=mnist --prefix" in text
    assert "kubectl logs -f mnist-master-0" not in text


def test_notes_warn_when_pods_share_a_node_without_a_cpu_request_or_limit(notes):
    """The trainer sizes its threads to the CPU limit, else the request (the default has one)."""
    warning = "They have no CPU request or limit, so each trainer sizes its threads to the whole node"
    assert warning not in notes()
    assert warning in notes("--set", "resources.requests.cpu=null")
    assert warning not in notes("--set", "resources.requests.cpu=null", "--set", "resources.limits.cpu=2")
    assert warning not in notes("--set", "resources.requests.cpu=null", "--set", "persistence.singleNode=false")


def test_notes_helm_test_timeout_outlasts_the_test_pods_wait(notes):
    """helm test gives up after 5 minutes by default; the test pod waits tests.timeoutSeconds."""
    text = notes("--set", "tests.timeoutSeconds=600")
    # No --logs: Helm 3 deletes a passed test's pod before reading its logs, then fails (helm/helm#9098).
    assert "helm test mnist -n ml --timeout 660s" in text


def test_notes_name_the_kept_host_path_volume_to_delete(notes):
    """A kept hostPath PersistentVolume turns Released; a reinstall's claim stays Pending until it is deleted."""
    text = notes("--set", "persistence.hostPath.path=/srv/mnist")
    assert "kubectl delete pvc mnist-storage -n ml" in text
    assert "kubectl delete pv ml-mnist-storage" in text


def test_notes_do_not_offer_to_delete_an_existing_claim_or_spread_a_lone_master(notes):
    text = notes("--set", "persistence.existingClaim=tutorial", "--set", "workers=0")
    assert "kubectl delete pvc" not in text, "the chart did not create the user's claim"
    assert "run on one node" not in text


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
