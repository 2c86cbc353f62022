"""charts/pytorchjob-mnist's extras: TensorBoard, the `helm test` pod and the run id it checks, and the
Argo CD example."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

import pytest

from tests.support.helm import by_kind, one
from tests.support.paths import WORKLOAD_CHART
from tests.support.pytorchjob_mnist import flag, render_with, replica_specs, trainer_container


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
    trainer_labels = replica_specs(docs)["Master"]["template"]["metadata"]["labels"]
    assert not selector.items() <= trainer_labels.items(), "the Service must not select trainer pods"
    assert container["image"] == "tensorflow/tensorflow:2.20.0@sha256:" + "b" * 64
    probes = [container[probe]["httpGet"] for probe in ("startupProbe", "livenessProbe", "readinessProbe")]
    assert probes == [{"path": "/", "port": "http"}] * 3
    assert container["startupProbe"]["failureThreshold"] * container["startupProbe"]["periodSeconds"] >= 300


def test_pod_annotations_reach_every_pod_and_leave_the_test_hook_intact(helm, tmp_path):
    """An annotation such as Istio's inject=false must reach the test pod too, or it never completes."""
    annotations = {"sidecar.istio.io/inject": "false", "helm.sh/hook": "post-install"}
    docs = render_with(helm, {"tensorboard": {"enabled": True}, "podAnnotations": annotations}, tmp_path)
    templates = [spec["template"] for spec in replica_specs(docs).values()]
    templates += [one(docs, "Deployment")["spec"]["template"], one(docs, "Pod")]
    assert len(templates) == 4
    for template in templates:
        assert template["metadata"]["annotations"]["sidecar.istio.io/inject"] == "false"
    test_annotations = one(docs, "Pod")["metadata"]["annotations"]
    assert test_annotations["helm.sh/hook"] == "test"
    assert test_annotations["helm.sh/hook-delete-policy"] == "before-hook-creation,hook-succeeded"


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


def test_run_id_changes_with_what_shapes_the_run_and_only_then(helm, tmp_path, default_docs):
    def run_id(values):
        return flag(trainer_container(render_with(helm, values, tmp_path))["args"], "--run-id")

    default = flag(trainer_container(default_docs)["args"], "--run-id")
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
        )
    ]
    assert default not in changed and len(set(changed)) == len(changed)


def test_each_run_keeps_its_checkpoints_and_logs_apart(default_docs, rendered):
    """Restarted pods resume their run; other values start their own instead of meeting checkpoints
    they cannot resume (the trainer refuses those)."""
    run_dir = "/mnt/pytorchjob-mnist/runs/default/mnist"
    for docs in (default_docs, rendered["tensorboard-digest-placement"]):
        args = trainer_container(docs)["args"]
        run_id = flag(args, "--run-id")
        assert flag(args, "--checkpoint-dir") == f"{run_dir}/checkpoints/{run_id}"
        assert flag(args, "--log-dir") == f"{run_dir}/tensorboard/{run_id}"
        assert flag(args, "--output-dir") == f"{run_dir}/model", "the newest finished run's model, at a fixed path"


@pytest.mark.parametrize(
    "values, world_size",
    [
        ({"workers": 2, "torchrun": {"enabled": True}, "nprocPerNode": "2"}, "6"),
        ({"workers": 0}, "1"),
        ({"gpu": 1, "torchrun": {"enabled": True}, "nprocPerNode": "auto"}, ""),
        ({"torchrun": {"enabled": True}, "elasticPolicy": {"enabled": True}}, ""),
    ],
)
def test_helm_test_checks_the_world_size_when_the_values_fix_it(helm, tmp_path, values, world_size):
    assert one(render_with(helm, values, tmp_path), "Pod")["spec"]["containers"][0]["args"][4] == world_size


@pytest.mark.parametrize("custom", [{"args": ["--epochs=1"]}, {"command": ["python", "/app/train.py"]}])
def test_helm_test_accepts_any_finished_run_of_a_custom_command_or_args(helm, tmp_path, custom):
    docs = render_with(helm, custom, tmp_path)
    assert one(docs, "Pod")["spec"]["containers"][0]["args"][3:] == ["", ""]


def test_helm_test_pod_image_can_be_replaced(helm, tmp_path):
    docs = render_with(helm, {"tests": {"image": {"repository": "registry.local/checker", "tag": "1"}}}, tmp_path)
    assert one(docs, "Pod")["spec"]["containers"][0]["image"] == "registry.local/checker:1"


def test_argocd_example_skips_dry_run_and_helm_tests(rendered):
    docs = rendered["examples/argocd-values.yaml"]
    options = one(docs, "PyTorchJob")["metadata"]["annotations"]["argocd.argoproj.io/sync-options"]
    assert "SkipDryRunOnMissingResource=true" in options
    assert not by_kind(docs, "Pod")
