"""charts/pytorchjob-mnist's pods under every job kind: shm, scratch and cache dirs, GPUs, tolerations,
service account, network policies, labels, annotations and placement."""

from __future__ import annotations

import shutil

import pytest

from tests.support.dockerfile import runtime_env, runtime_user
from tests.support.helm import by_kind, one, set_chart_field
from tests.support.paths import WORKLOAD_CHART
from tests.support.pytorchjob_mnist import (
    CACHE_ENV,
    GPU_TOLERATION,
    TRAINER_ENV,
    all_pod_specs,
    env_of,
    flag,
    job_of,
    kinds_taking,
    render_with,
    selects,
    trainer_container,
    trainer_pods,
    volume_pods,
)


def own_annotations(template: dict) -> dict:
    """A pod template's annotations but the chart's checkov skips (test_checkov.py checks those)."""
    return {k: v for k, v in template["metadata"]["annotations"].items() if not k.startswith("checkov.io/skip")}


def test_shm_tmp_and_cache_are_writable_empty_dirs(default_docs):
    for role, template in trainer_pods(default_docs).items():
        spec = template["spec"]
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "1Gi"}
        assert volumes["tmp"]["emptyDir"] == {"sizeLimit": "1Gi"}
        assert volumes["cache"]["emptyDir"] == {"sizeLimit": "2Gi"}
        mounts = {m["name"]: m["mountPath"] for m in trainer_container(default_docs, role)["volumeMounts"]}
        assert mounts == {
            "storage": "/mnt/pytorchjob-mnist",
            "tmp": "/tmp",
            "cache": "/var/cache/trainer",
            "dshm": "/dev/shm",
        }
        assert env_of(default_docs, role) == CACHE_ENV | TRAINER_ENV
        context = spec["securityContext"]
        assert (context["runAsUser"], context["runAsGroup"]) == runtime_user(), "the image's own user"
        assert context["fsGroup"] == runtime_user()[1], "fsGroup makes the claim writable"


def test_the_chart_sets_every_cache_variable_the_image_does(helm, kind):
    """The image points its caches at /var/cache/trainer (read-only unless mounted); the chart must
    move each one along with scratch.cachePath, or it stays on the read-only root filesystem."""
    image_cache = {name: value for name, value in runtime_env().items() if value.startswith("/var/cache/trainer")}
    assert image_cache == CACHE_ENV
    moved = env_of(helm.render(WORKLOAD_CHART, set_values=kind.values({"scratch.cachePath": "/scratch"})))
    assert {name: moved[name] for name in CACHE_ENV} == {
        name: value.replace("/var/cache/trainer", "/scratch") for name, value in CACHE_ENV.items()
    }


def test_gpus_become_limits_the_toleration_nccl_and_the_cuda_image(rendered):
    docs = rendered["gpu-two-per-pod-torchrun"]
    for role, template in trainer_pods(docs).items():
        container = trainer_container(docs, role)
        assert container["resources"] == {"limits": {"nvidia.com/gpu": 2}}, "limits only, even without other resources"
        assert container["image"].endswith(":0.1.0-cuda")
        assert flag(container["args"], "--backend") == "nccl" and "--no-cuda" not in container["args"]
        assert GPU_TOLERATION in template["spec"]["tolerations"]


def test_user_tolerations_are_kept_next_to_the_gpu_one_on_every_volume_pod(helm, tmp_path, kind):
    """TensorBoard and the test pod share the trainers' tolerations, so on a single-node volume
    they can join the trainers on a tainted GPU node."""
    user = {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}
    values = {
        "gpu": 1,
        "tolerations": [user],
        "tensorboard": {"enabled": True},
        "persistence": {"create": {"accessModes": ["ReadWriteMany"]}},
    }
    docs = render_with(helm, kind.values(values), tmp_path)
    pods = volume_pods(docs)
    assert len(pods) == len(trainer_pods(docs)) + 2, "the trainers, TensorBoard, the test pod"
    for name, template in pods.items():
        assert template["spec"]["tolerations"] == [user, GPU_TOLERATION], name


def test_every_pod_can_run_as_a_given_service_account(helm, tmp_path, kind):
    values = {"serviceAccount": {"name": "mnist-reader", "automountToken": True}, "tensorboard": {"enabled": True}}
    docs = render_with(helm, kind.values(values), tmp_path)
    trainers = [template["spec"] for template in trainer_pods(docs).values()]
    for spec in all_pod_specs(docs):
        assert spec["serviceAccountName"] == "mnist-reader"
        if kind.sets_automount_token(docs) or spec not in trainers:
            assert spec["automountServiceAccountToken"] is True


def test_every_pod_runs_under_the_releases_own_service_account_which_mounts_no_token(rendered):
    """Also a TrainJob's pods, whose runtime patch cannot set automountServiceAccountToken: the
    ServiceAccount's setting is theirs."""
    docs = rendered["tensorboard-digest-placement"]
    (account,) = by_kind(docs, "ServiceAccount")
    assert account["metadata"]["name"] == "mnist-workload", "never the namespace's `default`, whatever the release"
    assert account["automountServiceAccountToken"] is False
    assert not {"secrets", "imagePullSecrets"} & set(account), "nothing but its identity"
    assert len(all_pod_specs(docs)) == len(trainer_pods(docs)) + 2
    for spec in all_pod_specs(docs):
        assert spec["serviceAccountName"] == "mnist-workload"
    assert not by_kind(rendered["placement-and-identity"], "ServiceAccount"), "a given one is used as it is"


def test_network_policies_let_only_the_jobs_pods_reach_each_other(rendered, helm, tmp_path, kind):
    defaults = {p["metadata"]["name"] for p in by_kind(rendered["defaults"], "NetworkPolicy")}
    assert defaults == {"mnist-trainer", "mnist-check-run"}, "on by default"
    assert not by_kind(render_with(helm, kind.values({"networkPolicy": {"enabled": False}}), tmp_path), "NetworkPolicy")
    docs = rendered["network-policies-service-account"]
    policies = {p["metadata"]["name"]: p["spec"] for p in by_kind(docs, "NetworkPolicy")}
    trainers = policies["mnist-trainer"]
    pod_labels = [template["metadata"]["labels"] for template in trainer_pods(docs).values()]
    other_pods = [
        one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"],
        one(docs, "Pod")["metadata"]["labels"],
    ]
    trainer_term = {"labelSelector": trainers["podSelector"]}
    assert all(selects(trainer_term, labels) for labels in pod_labels)
    assert not any(selects(trainer_term, labels) for labels in other_pods), "TensorBoard, the test pod"
    ((rule,),) = [trainers["ingress"]]
    assert "ports" not in rule, "gloo and NCCL connect on ephemeral ports"
    assert [peer["podSelector"] for peer in rule["from"]] == [trainers["podSelector"]]
    tensorboard = policies["mnist-tensorboard"]
    assert selects({"labelSelector": tensorboard["podSelector"]}, other_pods[0])
    (rule,) = tensorboard["ingress"]
    assert rule["from"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    assert rule["ports"] == [{"port": "http", "protocol": "TCP"}]
    assert tensorboard["policyTypes"] == trainers["policyTypes"] == ["Ingress"], "egress stays open"
    test_pod = policies["mnist-check-run"]
    assert selects({"labelSelector": test_pod["podSelector"]}, other_pods[1])
    assert not any(selects({"labelSelector": test_pod["podSelector"]}, labels) for labels in pod_labels)
    assert test_pod["ingress"] == [] and test_pod["policyTypes"] == ["Ingress"], "the test pod accepts nothing"


def test_tensorboard_without_allowed_peers_accepts_no_connection(helm, tmp_path):
    docs = render_with(helm, {"tensorboard": {"enabled": True}, "networkPolicy": {"enabled": True}}, tmp_path)
    (tensorboard,) = [p for p in by_kind(docs, "NetworkPolicy") if p["metadata"]["name"] == "mnist-tensorboard"]
    assert tensorboard["spec"]["ingress"] == []


def test_a_new_release_alone_leaves_a_pinned_job_unchanged(helm, tmp_path, kind):
    """A release that bumps only the chart's versions must not change a job whose image is pinned,
    through its helm.sh/chart or app.kubernetes.io/version label: Argo CD would show it OutOfSync, and
    Replace=true would restart it. Other objects keep the labels."""
    bumped = tmp_path / WORKLOAD_CHART.name
    shutil.copytree(WORKLOAD_CHART, bumped)
    set_chart_field(bumped, "version", "99.0.0")
    set_chart_field(bumped, "appVersion", "99.0.0")
    pinned = {"set_values": kind.values({"image.tag": "2026-08-01-cpu"})}
    before, after = helm.render(WORKLOAD_CHART, **pinned), helm.render(bumped, **pinned)
    assert job_of(before) == job_of(after)
    labels = one(after, "PersistentVolumeClaim")["metadata"]["labels"]
    assert (labels["helm.sh/chart"], labels["app.kubernetes.io/version"]) == ("pytorchjob-mnist-99.0.0", "99.0.0")


def test_placement_identity_labels_and_annotations_reach_the_trainer_pods(rendered):
    docs = rendered["placement-and-identity"]
    job = job_of(docs)
    assert job["metadata"]["annotations"] == {"example.com/owner": "vision"}
    assert job["metadata"]["labels"]["team"] == "vision"
    for role, template in trainer_pods(docs).items():
        spec = template["spec"]
        assert spec["serviceAccountName"] == "mnist-reader"
        assert spec["imagePullSecrets"] == [{"name": "regcred"}]
        assert spec["nodeSelector"] == {"pool": "training"}
        assert spec["tolerations"] == [{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}]
        assert "nodeAffinity" in spec["affinity"] and "podAffinity" not in spec["affinity"], "ReadWriteMany spreads"
        assert (
            spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["fsGroup"] == runtime_user()[1]
        )
        assert template["metadata"]["labels"] == {
            "app.kubernetes.io/name": "pytorchjob-mnist",
            "app.kubernetes.io/instance": "mnist",
            "app.kubernetes.io/component": "trainer",
            "team": "vision",
        }
        assert own_annotations(template) == {"sidecar.istio.io/inject": "false"}
        assert trainer_container(docs, role)["image"].endswith("@sha256:" + "a" * 64)
    # The NetworkPolicy and TensorBoard select the trainer pods by these labels.
    policy = next(p for p in by_kind(docs, "NetworkPolicy") if p["metadata"]["name"] == "mnist-trainer")
    for template in trainer_pods(docs).values():
        assert policy["spec"]["podSelector"]["matchLabels"].items() <= template["metadata"]["labels"].items()


def test_placement_labels_annotations_and_digest_beside_tensorboard(rendered):
    docs = rendered["tensorboard-digest-placement"]
    job = job_of(docs)
    assert job["metadata"]["labels"]["team"] == "vision"
    assert job["metadata"]["annotations"] == {"example.com/owner": "vision"}
    for role, template in trainer_pods(docs).items():
        assert template["metadata"]["labels"]["team"] == "vision"
        assert own_annotations(template) == {"sidecar.istio.io/inject": "false"}
        spec = template["spec"]
        assert spec["nodeSelector"] == {"pool": "training"}
        assert spec["imagePullSecrets"] == [{"name": "regcred"}]
        assert "nodeAffinity" in spec["affinity"]
        image = trainer_container(docs, role)["image"]
        assert image == "ghcr.io/pytorchjob-mnist/trainer:0.1.0-cpu@sha256:" + "a" * 64


def test_pod_annotations_reach_every_pod_and_leave_the_test_hook_intact(helm, tmp_path, kind):
    """An annotation such as Istio's inject=false must reach the test pod too, or it never completes."""
    annotations = {"sidecar.istio.io/inject": "false", "helm.sh/hook": "post-install"}
    docs = render_with(helm, kind.values({"tensorboard": {"enabled": True}, "podAnnotations": annotations}), tmp_path)
    templates = volume_pods(docs)
    assert len(templates) == len(trainer_pods(docs)) + 2
    for template in templates.values():
        assert template["metadata"]["annotations"]["sidecar.istio.io/inject"] == "false"
    test_annotations = one(docs, "Pod")["metadata"]["annotations"]
    assert test_annotations["helm.sh/hook"] == "test"
    assert test_annotations["helm.sh/hook-delete-policy"] == "before-hook-creation,hook-succeeded"


@pytest.mark.parametrize("kind", kinds_taking("kueue.queueName"))
def test_kueue_gets_the_queue_label(rendered):
    assert job_of(rendered["wrapped-kueue-no-shm"])["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert "kueue.x-k8s.io/queue-name" not in job_of(rendered["defaults"])["metadata"]["labels"]
