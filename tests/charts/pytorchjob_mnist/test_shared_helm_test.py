"""charts/pytorchjob-mnist's extras under every job kind: TensorBoard, the `helm test` pod and the run id
and world size it checks."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

import pytest

from tests.support.helm import one
from tests.support.paths import WORKLOAD_CHART
from tests.support.pytorchjob_mnist import flag, kinds_taking, render_with, trainer_container, trainer_pods


def helm_test_args(docs: list[dict]) -> list[str]:
    return one(docs, "Pod")["spec"]["containers"][0]["args"]


def test_tensorboard_reads_the_releases_runs_read_only(rendered):
    docs = rendered["tensorboard-digest-placement"]
    deployment = one(docs, "Deployment")
    service = one(docs, "Service")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    log_dir = PurePosixPath(flag(trainer_container(docs)["args"], "--log-dir"))
    assert f"--logdir={log_dir.parent}" in container["command"], "this run beside the release's others"
    assert {"name": "storage", "mountPath": "/mnt/pytorchjob-mnist", "readOnly": True} in container["volumeMounts"]
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert service["spec"]["selector"] == selector
    assert selector["app.kubernetes.io/component"] == "tensorboard"
    assert service["spec"]["ports"][0]["port"] == 6006
    for template in trainer_pods(docs).values():
        assert not selector.items() <= template["metadata"]["labels"].items(), "the Service must not select trainers"
    assert container["image"] == "tensorflow/tensorflow:2.20.0@sha256:" + "b" * 64
    probes = [container[probe]["httpGet"] for probe in ("startupProbe", "livenessProbe", "readinessProbe")]
    assert probes == [{"path": "/", "port": "http"}] * 3
    assert container["startupProbe"]["failureThreshold"] * container["startupProbe"]["periodSeconds"] >= 300


def test_helm_test_pod_checks_this_runs_model_dir(default_docs):
    pod = one(default_docs, "Pod")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    container = pod["spec"]["containers"][0]
    assert container["command"][:2] == ["python", "-c"]
    assert container["command"][2] == (WORKLOAD_CHART / "files" / "check_run.py").read_text()
    trainer_args = trainer_container(default_docs)["args"]
    assert container["args"] == [flag(trainer_args, "--output-dir"), "0.5", "1800", flag(trainer_args, "--run-id"), "2"]
    assert container["image"] == trainer_container(default_docs)["image"]
    volume = pod["spec"]["volumes"][0]
    assert volume["persistentVolumeClaim"] == {"claimName": "mnist-storage", "readOnly": True}


def test_the_helm_test_checks_the_runs_output_run_id_and_world_size(rendered):
    docs = rendered["three-pods-two-procs-suspended-deadline"]
    trainer_args = trainer_container(docs)["args"]
    args = helm_test_args(docs)
    assert args[0] == flag(trainer_args, "--output-dir")
    assert args[3] == flag(trainer_args, "--run-id")
    assert args[4] == "6", "3 pods × 2 processes"
    assert helm_test_args(rendered["gpu-two-per-pod-torchrun"])[4] == "4", "2 pods × one process per GPU"


def test_run_id_changes_with_what_shapes_the_run_and_only_then(helm, tmp_path):
    def run_id(values):
        return flag(trainer_container(render_with(helm, values, tmp_path))["args"], "--run-id")

    default = run_id({})
    assert re.fullmatch(r"[0-9a-f]{16}", default)
    assert run_id({"tensorboard": {"enabled": True}, "tests": {"minAccuracy": 0.9}}) == default
    assert run_id({"training": {"lr": "0.01"}}) == run_id({"training": {"lr": 0.01}}), (
        "--set passes decimals as strings"
    )
    changed = [
        run_id(values)
        for values in (
            {"training": {"epochs": 2}},
            {"workers": 2},
            {"image": {"tag": "0.2.0-cpu"}},
            {"torchrun": {"enabled": True}},
            {"jobKind": "TrainJob"},
        )
    ]
    assert default not in changed and len(set(changed)) == len(changed)


def test_each_run_keeps_its_checkpoints_and_logs_apart(rendered):
    """Restarted pods resume their run; other values start their own instead of meeting checkpoints
    they cannot resume (the trainer refuses those)."""
    run_dir = "/mnt/pytorchjob-mnist/runs/default/mnist"
    for docs in (rendered["defaults"], rendered["tensorboard-digest-placement"]):
        args = trainer_container(docs)["args"]
        run_id = flag(args, "--run-id")
        assert flag(args, "--checkpoint-dir") == f"{run_dir}/checkpoints/{run_id}"
        assert flag(args, "--log-dir") == f"{run_dir}/tensorboard/{run_id}"
        assert flag(args, "--output-dir") == f"{run_dir}/model", "the newest finished run's model, at a fixed path"


@pytest.mark.parametrize(
    "values, world_size",
    [({"workers": 2, "torchrun": {"enabled": True}, "nprocPerNode": "2"}, "6"), ({"workers": 0}, "1")],
)
def test_helm_test_checks_the_world_size_when_the_values_fix_it(helm, tmp_path, kind, values, world_size):
    assert helm_test_args(render_with(helm, kind.values(values), tmp_path))[4] == world_size


def test_helm_test_accepts_any_finished_run_of_custom_args(helm, tmp_path, kind):
    custom = {"args": [*kind.args_prefix, "--epochs=1"]}
    assert helm_test_args(render_with(helm, kind.values(custom), tmp_path))[3:] == ["", ""]


@pytest.mark.parametrize("kind", kinds_taking("command"))
def test_helm_test_accepts_any_finished_run_of_a_custom_command(helm, tmp_path, kind):
    custom = {"command": ["python", "/app/train.py"]}
    assert helm_test_args(render_with(helm, kind.values(custom), tmp_path))[3:] == ["", ""]


def test_helm_test_pod_image_can_be_replaced(helm, tmp_path):
    docs = render_with(helm, {"tests": {"image": {"repository": "registry.local/checker", "tag": "1"}}}, tmp_path)
    assert one(docs, "Pod")["spec"]["containers"][0]["image"] == "registry.local/checker:1"
    docs = render_with(helm, {"tests": {"image": {"tag": "1"}}, "image": {"digest": "sha256:" + "a" * 64}}, tmp_path)
    image = one(docs, "Pod")["spec"]["containers"][0]["image"]
    assert image == "ghcr.io/pytorchjob-mnist/trainer:1", "the trainer's digest pins the trainer's tag only"


def test_helm_test_pod_image_can_be_pinned_by_digest(helm, tmp_path):
    digest = "sha256:" + "d" * 64
    docs = render_with(helm, {"tests": {"image": {"repository": "registry.local/checker", "digest": digest}}}, tmp_path)
    assert one(docs, "Pod")["spec"]["containers"][0]["image"] == f"registry.local/checker:0.1.0-cpu@{digest}"
    docs = render_with(
        helm, {"tests": {"image": {"digest": digest}}, "image": {"digest": "sha256:" + "a" * 64}}, tmp_path
    )
    image = one(docs, "Pod")["spec"]["containers"][0]["image"]
    assert image == f"ghcr.io/pytorchjob-mnist/trainer:0.1.0-cpu@{digest}", "its own digest, not the trainer's"
