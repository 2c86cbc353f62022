"""charts/pytorchjob-mnist's NOTES.txt under every job kind, as `helm install` would print it: the shared
steps around the kind's own pieces."""

from __future__ import annotations

import re

import pytest
import yaml

from tests.support.paths import REPO, WORKLOAD_CHART
from tests.support.pytorchjob_mnist import flag, kinds_taking, render_with, trainer_container

# Until the first release CHANGELOG.md says so, and values.yaml's image.repository holds no image.
UNRELEASED = "No version has been released yet" in (REPO / "CHANGELOG.md").read_text()
IMAGE_WARNING = "WARNING: image.repository is the default"
HOME = yaml.safe_load((WORKLOAD_CHART / "Chart.yaml").read_text())["home"]


def test_notes_number_the_steps_around_the_kinds_pieces(notes, kind):
    text = notes("--set", "tensorboard.enabled=true")
    steps = re.findall(r"^(\d)\. ", text, re.MULTILINE)
    assert steps == ["1", "2", "3", "4"], text
    assert re.search(r"^1\. Follow the job \(.+\):\n {5}kubectl get ", text, re.MULTILINE)
    assert re.search(r"^2\. Read .+ training log .+\n(   .+\n)* {5}\S", text, re.MULTILINE)
    assert re.search(r"^3\. Wait for it to finish:\n {5}kubectl wait \S+/mnist -n ml ", text, re.MULTILINE)
    assert f"A finished {kind.name} does not run again on `helm upgrade`" in text
    assert text.rstrip().endswith(
        "other changes resume this run, which has nothing left to train once it has finished."
    )
    assert f"{kind.name} mnist (" in text.splitlines()[0] and "was submitted to namespace ml." in text.splitlines()[0]


def test_notes_tell_the_user_what_to_run(helm, notes, kind):
    text = notes("--set", "tensorboard.enabled=true")
    for command in (
        "helm test mnist -n ml --timeout 1860s",
        "kubectl logs mnist-check-run -n ml",
        "kubectl port-forward -n ml svc/mnist-tensorboard 6006:6006",
        "kubectl delete pvc mnist-storage -n ml",
    ):
        assert command in text, command
    assert "kubectl delete pv " not in text, "a new claim's volume is the provisioner's to delete"
    docs = helm.render(WORKLOAD_CHART, release="mnist", namespace="ml", set_values=kind.values({}))
    run_id = flag(trainer_container(docs)["args"], "--run-id")
    assert f"this run's checkpoints in /mnt/pytorchjob-mnist/runs/ml/mnist/checkpoints/{run_id}." in text
    assert "all 2 pods run on one node" in text and "ReadWriteMany" in text


def test_notes_with_custom_args_say_where_the_test_looks(notes, kind):
    """args replace --output-dir and --checkpoint-dir: the chart's run directory holds nothing then."""
    args = ",".join(kind.args_prefix + ("--epochs=1",))
    text = notes("--set", f"args={{{args},--save-model}}")
    assert "The model and metrics.json land on claim" not in text
    assert "Your args replace the chart's trainer flags" in text
    assert "(the trainer's\n   --output-dir=/mnt/pytorchjob-mnist/runs/ml/mnist/model)" in text
    assert "--output-dir" not in notes("--set", f"args={{{args}}}", "--set", "tests.enabled=false")


@pytest.mark.parametrize("kind", kinds_taking("command"))
def test_notes_with_a_custom_command_say_it_replaces_the_flags(notes):
    own_script = notes("--set", "command={python,/app/train.py}")
    assert "Your command and args replace the chart's trainer flags" in own_script
    assert "The model and metrics.json land on claim" not in own_script


def _notes_name_the_working_dir(helm, notes, kind, tmp_path, values):
    docs = render_with(helm, kind.values(values), tmp_path, release="mnist", namespace="ml")
    working_dir = trainer_container(docs).get("workingDir", "the image's working directory")
    text = " ".join(notes("-f", str(tmp_path / "values.yaml")).split())
    assert f"(relative paths from {working_dir})" in text


@pytest.mark.parametrize(
    "values",
    [{"args": ["--epochs=1", "--save-model"]}, {"args": ["--epochs=1"], "trainingRuntime": {"create": True}}],
    ids=["args", "args-on-the-charts-runtime"],
)
def test_notes_say_where_relative_paths_in_custom_args_start(helm, notes, kind, tmp_path, values):
    """The trainer container's workingDir, or the image's where it has none: a TrainJob's only on the
    chart's own runtime."""
    values = {**values, "args": [*kind.args_prefix, *values["args"]]}
    _notes_name_the_working_dir(helm, notes, kind, tmp_path, values)


@pytest.mark.parametrize("kind", kinds_taking("command"))
def test_notes_say_where_relative_paths_in_a_custom_command_start(helm, notes, kind, tmp_path):
    _notes_name_the_working_dir(helm, notes, kind, tmp_path, {"command": ["python", "/app/train.py"]})


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


def test_notes_do_not_offer_to_delete_an_existing_claim_or_spread_a_lone_pod(notes):
    text = notes("--set", "persistence.existingClaim=tutorial", "--set", "workers=0")
    assert "kubectl delete pvc" not in text, "the chart did not create the user's claim"
    assert "run on one node" not in text


def test_notes_say_where_a_multikueue_job_runs(helm, notes, kind):
    """A kind without a managedBy field refuses kueue.multiKueue (test_shared_guards.py)."""
    values = kind.values({"kueue.queueName": "team-a", "kueue.multiKueue": True})
    if helm.template(WORKLOAD_CHART, set_values=values).returncode:
        return
    text = " ".join(notes("--set", "kueue.queueName=team-a", "--set", "kueue.multiKueue=true").split())
    assert "It is handed to MultiKueue (managedBy kueue.x-k8s.io/multikueue)" in text
    assert (
        "which needs namespace ml, LocalQueue team-a, the job's controller and every object the job refers to" in text
    )
    assert "MultiKueue" not in notes()


def test_notes_warn_while_no_release_has_published_the_default_image(helm, notes, kind):
    """A plain install pulls values.yaml's image.repository, which only a release fills: until the first
    (CHANGELOG.md), its pods could only wait in ImagePullBackOff. The warning goes with the first release."""
    assert (IMAGE_WARNING in notes()) == UNRELEASED
    assert IMAGE_WARNING not in notes("--set", "image.repository=registry.example.com/ml/trainer")
    if UNRELEASED:
        text = notes("--set", "gpu=1")
        [warning] = [" ".join(p.split()) for p in text.split("\n\n") if p.startswith(IMAGE_WARNING)]
        docs = helm.render(WORKLOAD_CHART, release="mnist", namespace="ml", set_values=kind.values({"gpu": 1}))
        assert f"ImagePullBackOff for {trainer_container(docs)['image']}." in warning
        assert f"in a clone of {HOME} (make image push REGISTRY=<registry> VARIANT=cuda)" in warning
        assert "helm uninstall mnist -n ml and install again with --set image.repository=<registry>/trainer" in warning
        assert "VARIANT" not in notes(), "make image builds the CPU variant by default"


def test_the_readme_says_whether_a_release_has_published_the_default_image():
    readme = " ".join((WORKLOAD_CHART / "README.md").read_text().split())
    assert ("None has been published yet" in readme) == UNRELEASED
