"""charts/pytorchjob-mnist's pods: shm, scratch and cache dirs, GPUs, tolerations, service account,
network policies, labels, placement, gang scheduling, Kueue and the run policy."""

from __future__ import annotations

import shutil

from tests.support.dockerfile import runtime_env
from tests.support.helm import by_kind, one, set_chart_field
from tests.support.paths import WORKLOAD_CHART
from tests.support.pytorchjob_mnist import (
    CACHE_ENV,
    TRAINER_ENV,
    all_pod_specs,
    env_of,
    flag,
    render_with,
    replica_specs,
    selects,
    template_error,
    trainer_container,
    volume_pods,
)


def test_shm_tmp_and_cache_are_writable_empty_dirs(default_docs):
    spec = replica_specs(default_docs)["Master"]["template"]["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "1Gi"}
    assert volumes["tmp"]["emptyDir"] == {"sizeLimit": "1Gi"}
    mounts = {m["name"]: m["mountPath"] for m in spec["containers"][0]["volumeMounts"]}
    assert mounts == {
        "storage": "/mnt/pytorchjob-mnist",
        "tmp": "/tmp",
        "cache": "/var/cache/trainer",
        "dshm": "/dev/shm",
    }
    assert env_of(default_docs, "Master") == CACHE_ENV | TRAINER_ENV
    assert spec["securityContext"]["fsGroup"] == 1000, "fsGroup makes the claim writable"


def test_the_chart_sets_every_cache_variable_the_image_does(helm):
    """The image points its caches at /var/cache/trainer (read-only unless mounted); the chart must
    move each one along with scratch.cachePath, or it stays on the read-only root filesystem."""
    image_cache = {name: value for name, value in runtime_env().items() if value.startswith("/var/cache/trainer")}
    assert image_cache == CACHE_ENV
    moved = env_of(helm.render(WORKLOAD_CHART, set_values={"scratch.cachePath": "/scratch"}), "Worker")
    assert {name: moved[name] for name in CACHE_ENV} == {
        name: value.replace("/var/cache/trainer", "/scratch") for name, value in CACHE_ENV.items()
    }


def test_gpu_goes_to_limits_only_with_toleration_nccl_and_cuda_image(rendered):
    docs = rendered["examples/gpu-nccl-values.yaml"]
    for replica in ("Master", "Worker"):
        container = trainer_container(docs, replica)
        assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
        assert "nvidia.com/gpu" not in container["resources"]["requests"]
        assert flag(container["args"], "--backend") == "nccl"
        assert "--no-cuda" not in container["args"]
        assert container["image"].endswith(":0.1.0-cuda")
        tolerations = replica_specs(docs)[replica]["template"]["spec"]["tolerations"]
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in tolerations
    assert one(docs, "PyTorchJob")["spec"]["nprocPerNode"] == "1"


def test_gpu_limit_is_added_even_without_other_resources(rendered):
    docs = rendered["gpu-two-per-pod-torchrun"]
    assert trainer_container(docs)["resources"] == {"limits": {"nvidia.com/gpu": 2}}
    assert one(docs, "PyTorchJob")["spec"]["nprocPerNode"] == "2", "nprocPerNode follows the GPU count"


def test_user_tolerations_are_kept_next_to_the_gpu_one_on_every_volume_pod(helm, tmp_path):
    """TensorBoard and the test pod share the trainers' tolerations, so on a single-node volume
    they can join the trainers on a tainted GPU node."""
    user = {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}
    docs = render_with(
        helm,
        {
            "gpu": 1,
            "tolerations": [user],
            "tensorboard": {"enabled": True},
            "persistence": {"create": {"accessModes": ["ReadWriteMany"]}},
        },
        tmp_path,
    )
    pods = volume_pods(docs)
    assert len(pods) == 4
    for name, template in pods.items():
        assert template["spec"]["tolerations"] == [
            user,
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        ], name


def test_tensorboard_is_refused_beside_gpus_on_a_single_node_volume(helm, tmp_path):
    """TensorBoard starts with the job; scheduled first, it would pin the GPU pods to its node."""
    error = template_error(helm, {"gpu": 1, "tensorboard": {"enabled": True}}, tmp_path)
    assert "tensorboard.enabled with gpu > 0 on a single-node volume" in error
    assert "ReadWriteMany" in error
    host_path = {"gpu": 1, "tensorboard": {"enabled": True}, "persistence": {"hostPath": {"path": "/srv/mnist"}}}
    error = template_error(helm, host_path, tmp_path)
    assert "on a hostPath volume" in error and "Set persistence.hostPath.nodeName to a GPU node" in error
    host_path["persistence"]["hostPath"]["nodeName"] = "gpu-node-1"
    pinned = render_with(helm, host_path, tmp_path)  # let through: the volume places every pod on that node
    (term,) = one(pinned, "PersistentVolume")["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert term["matchExpressions"][0]["values"] == ["gpu-node-1"]


def test_every_pod_can_run_as_a_given_service_account_with_its_token(helm, tmp_path):
    values = {"serviceAccount": {"name": "mnist-reader", "automountToken": True}, "tensorboard": {"enabled": True}}
    specs = all_pod_specs(render_with(helm, values, tmp_path))
    assert len(specs) == 4, "Master, Worker, TensorBoard, test pod"
    for spec in specs:
        assert spec["serviceAccountName"] == "mnist-reader" and spec["automountServiceAccountToken"] is True


def test_network_policies_let_only_the_jobs_pods_reach_each_other(rendered):
    assert not by_kind(rendered["defaults"], "NetworkPolicy"), "opt-in: the cluster's plugin must enforce them"
    docs = rendered["network-policies-service-account"]
    policies = {p["metadata"]["name"]: p["spec"] for p in by_kind(docs, "NetworkPolicy")}
    trainers = policies["mnist-trainer"]
    pod_labels = {r: spec["template"]["metadata"]["labels"] for r, spec in replica_specs(docs).items()}
    other_pods = [
        one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"],
        one(docs, "Pod")["metadata"]["labels"],
    ]
    trainer_term = {"labelSelector": trainers["podSelector"]}
    assert all(selects(trainer_term, labels) for labels in pod_labels.values())
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


def test_tensorboard_without_allowed_peers_accepts_no_connection(helm, tmp_path):
    docs = render_with(helm, {"tensorboard": {"enabled": True}, "networkPolicy": {"enabled": True}}, tmp_path)
    (tensorboard,) = [p for p in by_kind(docs, "NetworkPolicy") if p["metadata"]["name"] == "mnist-tensorboard"]
    assert tensorboard["spec"]["ingress"] == []


def test_a_new_release_alone_leaves_a_pinned_pytorchjob_unchanged(helm, tmp_path):
    """Argo CD replaces a changed job (Replace=true): a release that bumps only the chart's versions
    must not restart a running job whose image is pinned, through its helm.sh/chart or
    app.kubernetes.io/version label. Other objects keep the labels."""
    bumped = tmp_path / WORKLOAD_CHART.name
    shutil.copytree(WORKLOAD_CHART, bumped)
    set_chart_field(bumped, "version", "99.0.0")
    set_chart_field(bumped, "appVersion", "99.0.0")
    pinned = {"set_values": {"image.tag": "2026-08-01-cpu"}}
    before, after = helm.render(WORKLOAD_CHART, **pinned), helm.render(bumped, **pinned)
    assert one(before, "PyTorchJob") == one(after, "PyTorchJob")
    labels = one(after, "PersistentVolumeClaim")["metadata"]["labels"]
    assert (labels["helm.sh/chart"], labels["app.kubernetes.io/version"]) == ("pytorchjob-mnist-99.0.0", "99.0.0")


def test_placement_labels_annotations_and_pull_settings(rendered):
    docs = rendered["tensorboard-digest-placement"]
    job = one(docs, "PyTorchJob")
    assert job["metadata"]["labels"]["team"] == "vision"
    assert job["metadata"]["annotations"] == {"example.com/owner": "vision"}
    template = replica_specs(docs)["Worker"]["template"]
    assert template["metadata"]["labels"]["team"] == "vision"
    assert template["metadata"]["annotations"] == {"sidecar.istio.io/inject": "false"}
    spec = template["spec"]
    assert spec["nodeSelector"] == {"pool": "training"}
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    assert "nodeAffinity" in spec["affinity"]
    container = trainer_container(docs, "Worker")
    assert container["image"] == "ghcr.io/pytorchjob-mnist/trainer:0.1.0-cpu@sha256:" + "a" * 64
    assert container["imagePullPolicy"] == "Always"


def test_scheduling_gang_and_kueue(rendered):
    job = one(rendered["gang-scheduling-kueue"], "PyTorchJob")
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert job["spec"]["runPolicy"]["schedulingPolicy"] == {
        "minAvailable": 2,
        "queue": "research",
        "priorityClass": "training-high",
        "scheduleTimeoutSeconds": 600,
    }
    spec = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert spec["schedulerName"] == "volcano" and spec["priorityClassName"] == "training-high"


def test_run_policy_and_restart_policy(rendered):
    job = one(rendered["three-workers-exitcode-runpolicy"], "PyTorchJob")
    assert job["spec"]["runPolicy"] == {
        "cleanPodPolicy": "All",
        "suspend": True,
        "backoffLimit": 0,
        "ttlSecondsAfterFinished": 3600,
        "activeDeadlineSeconds": 7200,
    }
    assert {s["restartPolicy"] for s in job["spec"]["pytorchReplicaSpecs"].values()} == {"ExitCode"}
    assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 3
