"""charts/pytorchjob-mnist with `jobKind: PyTorchJob`: the operator webhook's rules over the matrix, and
where each value lands in a kubeflow.org/v1 PyTorchJob (replicas, run and restart policies, gang
scheduling, torchrun and elastic, a user's own script, the examples)."""

from __future__ import annotations

import re

import pytest

from tests.support.helm import by_kind, one
from tests.support.paths import WORKLOAD_CHART
from tests.support.pytorchjob_mnist import (
    GPU_TOLERATION,
    PYTORCHJOB,
    TORCHRUN,
    env_of,
    flag,
    render_with,
    trainer_container,
)

DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


@pytest.fixture
def kind():
    return PYTORCHJOB


def replica_specs(docs: list[dict]) -> dict:
    return one(docs, "PyTorchJob")["spec"]["pytorchReplicaSpecs"]


def test_every_rendering_obeys_the_operator_webhook(rendered):
    """pkg/webhooks/pytorch: DNS-1035 name, Master.replicas == 1 explicitly, Worker ≥ 1, only
    Master/Worker, a `pytorch` container with an image in every replica, Worker when elastic."""
    for name, docs in rendered.items():
        job = one(docs, "PyTorchJob")
        job_name = job["metadata"]["name"]
        assert DNS_1035.match(job_name) and len(job_name) <= 63, name
        specs = job["spec"]["pytorchReplicaSpecs"]
        assert set(specs) <= {"Master", "Worker"}, name
        assert specs["Master"]["replicas"] == 1, name
        workers = specs.get("Worker", {}).get("replicas", 0)
        if "Worker" in specs:
            assert workers >= 1, name
        if "elasticPolicy" in job["spec"]:
            assert "Worker" in specs, name
        for replica, spec in specs.items():
            containers = spec["template"]["spec"]["containers"]
            assert any(c["name"] == "pytorch" for c in containers), f"{name}: {replica} has no pytorch container"
            assert all(c.get("image") for c in containers), f"{name}: {replica} container without image"
            pytorch = next(c for c in containers if c["name"] == "pytorch")
            assert {"name": "pytorchjob-port", "containerPort": 23456, "protocol": "TCP"} in pytorch["ports"]
        longest_pod = f"{job_name}-worker-{workers - 1}" if workers else f"{job_name}-master-0"
        assert len(longest_pod) <= 63, f"{name}: {longest_pod}"


def test_defaults_are_the_seeds_cpu_gloo_one_plus_one(default_docs):
    job = one(default_docs, "PyTorchJob")
    assert job["metadata"]["name"] == "mnist"
    specs = job["spec"]["pytorchReplicaSpecs"]
    assert specs["Worker"]["replicas"] == 1
    assert specs["Master"]["restartPolicy"] == specs["Worker"]["restartPolicy"] == "OnFailure"
    assert job["spec"]["nprocPerNode"] == "1"
    assert job["spec"]["runPolicy"] == {"cleanPodPolicy": "None", "suspend": False, "backoffLimit": 3}
    assert "elasticPolicy" not in job["spec"]
    master = trainer_container(default_docs)
    assert "command" not in master, "the image entrypoint (python -m trainer) runs by default"
    assert master["image"] == "ghcr.io/pytorchjob-mnist/trainer:0.1.0-cpu"
    args = master["args"]
    assert flag(args, "--backend") == "gloo"
    assert flag(args, "--dataset") == "fashion-mnist"
    assert "--no-cuda" in args and "--fallback-dataset" not in args
    assert "nvidia.com/gpu" not in master["resources"].get("limits", {})
    assert master == trainer_container(default_docs, "Worker"), "Master and Worker run the same container"


def test_gpu_example_runs_one_nccl_process_per_pod_on_the_cuda_image(rendered):
    docs = rendered["examples/gpu-nccl-values.yaml"]
    for replica in ("Master", "Worker"):
        container = trainer_container(docs, replica)
        assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
        assert "nvidia.com/gpu" not in container["resources"]["requests"]
        assert flag(container["args"], "--backend") == "nccl"
        assert "--no-cuda" not in container["args"]
        assert container["image"].endswith(":0.1.0-cuda")
        assert GPU_TOLERATION in replica_specs(docs)[replica]["template"]["spec"]["tolerations"]
    assert one(docs, "PyTorchJob")["spec"]["nprocPerNode"] == "1"


def test_nproc_per_node_follows_the_gpu_count_under_torchrun(rendered):
    assert one(rendered["gpu-two-per-pod-torchrun"], "PyTorchJob")["spec"]["nprocPerNode"] == "2"
    job = one(rendered["three-pods-two-procs-suspended-deadline"], "PyTorchJob")
    assert (job["spec"]["nprocPerNode"], job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"]) == ("2", 2)
    assert (job["spec"]["runPolicy"]["suspend"], job["spec"]["runPolicy"]["activeDeadlineSeconds"]) == (True, 7200)


def test_existing_claim_example_mounts_the_t9k_path(rendered):
    docs = rendered["examples/existing-claim-values.yaml"]
    assert not by_kind(docs, "PersistentVolumeClaim") and not by_kind(docs, "PersistentVolume")
    volumes = {v["name"]: v for v in replica_specs(docs)["Master"]["template"]["spec"]["volumes"]}
    assert volumes["storage"]["persistentVolumeClaim"]["claimName"] == "tutorial"
    mounts = {m["name"]: m["mountPath"] for m in trainer_container(docs)["volumeMounts"]}
    assert mounts["storage"] == "/t9k/mnt"
    assert flag(trainer_container(docs)["args"], "--output-dir") == "/t9k/mnt/runs/default/mnist/model"


def test_workers_zero_runs_the_master_alone(rendered):
    assert set(replica_specs(rendered["one-pod-no-persistence"])) == {"Master"}


def test_pull_policy_reaches_the_trainer(rendered):
    container = trainer_container(rendered["tensorboard-digest-placement"], "Worker")
    assert container["imagePullPolicy"] == "Always"


def test_scheduling_gang_and_kueue(rendered):
    job = one(rendered["gang-scheduling-kueue-multikueue"], "PyTorchJob")
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert job["spec"]["runPolicy"]["schedulingPolicy"] == {
        "minAvailable": 2,
        "queue": "research",
        "priorityClass": "training-high",
        "scheduleTimeoutSeconds": 600,
    }
    spec = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert spec["schedulerName"] == "volcano" and spec["priorityClassName"] == "training-high"


def test_kueue_queue_leaves_suspend_to_kueue(rendered):
    """Kueue suspends a queued job and resumes it on admission; a rendered `suspend: false` would
    be reverted by Argo CD self-heal or helm upgrade."""
    run_policy = one(rendered["gang-scheduling-kueue-multikueue"], "PyTorchJob")["spec"]["runPolicy"]
    assert "suspend" not in run_policy
    assert run_policy["backoffLimit"] == 3, "the rest of runPolicy is still rendered"
    assert one(rendered["defaults"], "PyTorchJob")["spec"]["runPolicy"]["suspend"] is False


def test_multikueue_sets_the_run_policys_managed_by(rendered):
    """The training-operator v1.9.4 leaves a job managed by kueue.x-k8s.io/multikueue to Kueue, which
    dispatches it (the CRD check of every case is test_shared_matrix.py's)."""
    run_policy = one(rendered["gang-scheduling-kueue-multikueue"], "PyTorchJob")["spec"]["runPolicy"]
    assert run_policy["managedBy"] == "kueue.x-k8s.io/multikueue"
    assert "managedBy" not in one(rendered["defaults"], "PyTorchJob")["spec"]["runPolicy"]


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


def test_command_and_args_replace_the_generated_ones(rendered):
    container = trainer_container(rendered["bring-your-own-script"])
    assert container["command"] == ["python", "/workspace/train.py"]
    assert container["args"] == ["--epochs=1"]
    assert container["workingDir"] == "/workspace"
    names = [e["name"] for e in container["env"]]
    assert names.index("NCCL_DEBUG") > names.index("XDG_CACHE_HOME"), "user env comes after the chart's"


@pytest.mark.parametrize("torchrun, trainer", [(False, ["python", "-m", "trainer"]), (True, TORCHRUN)])
def test_a_wrapper_runs_before_the_trainer_which_keeps_its_flags(helm, torchrun, trainer):
    wrapper = ["py-spy", "record", "-o", "/tmp/profile.svg", "--"]
    plain = trainer_container(helm.render(WORKLOAD_CHART, set_values={"torchrun.enabled": torchrun}))
    wrapped = trainer_container(
        helm.render(WORKLOAD_CHART, set_values={"wrapCommand": wrapper, "torchrun.enabled": torchrun})
    )
    assert wrapped["command"] == wrapper + trainer
    assert wrapped["args"] == plain["args"] and wrapped["workingDir"] == plain["workingDir"] == "/mnt/pytorchjob-mnist"
    assert wrapped["env"] == plain["env"], "PYTHONSAFEPATH too: python -m still runs from the volume"


def test_the_trainers_relative_paths_land_on_the_volume_not_the_read_only_image(helm):
    """Seed-style `args` (--save-model, the default --data-dir data and --dir logs) write relative to the
    working directory; the image's is on the read-only root filesystem. A custom command keeps the image's."""
    seed_style = trainer_container(helm.render(WORKLOAD_CHART, set_values={"args": ["--epochs=1", "--save-model"]}))
    assert seed_style["workingDir"] == "/mnt/pytorchjob-mnist"
    assert {"name": "storage", "mountPath": "/mnt/pytorchjob-mnist"} in seed_style["volumeMounts"]
    assert seed_style["securityContext"]["readOnlyRootFilesystem"] is True
    assert {"name": "PYTHONSAFEPATH", "value": "1"} in seed_style["env"], "the volume must not shadow packages"
    own_script = trainer_container(helm.render(WORKLOAD_CHART, set_values={"command": ["python", "train.py"]}))
    assert "workingDir" not in own_script


def test_torchrun_runs_the_trainer_module_with_processes_per_node(rendered):
    docs = rendered["ci/torchrun-cpu-values.yaml"]
    job = one(docs, "PyTorchJob")
    assert job["spec"]["nprocPerNode"] == "2"
    assert "elasticPolicy" not in job["spec"]
    container = trainer_container(docs)
    assert container["command"] == TORCHRUN
    assert flag(container["args"], "--backend") == "gloo"


def test_t9k_torchrun_example_has_four_processes_and_three_restarts(rendered):
    job = one(rendered["examples/torchrun-values.yaml"], "PyTorchJob")
    assert job["spec"]["nprocPerNode"] == "4"
    assert job["spec"]["elasticPolicy"] == {"minReplicas": 2, "maxReplicas": 2, "maxRestarts": 3, "rdzvBackend": "c10d"}
    limits = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": 4}


def test_elastic_restarts_get_a_fresh_rendezvous_store_each_round(rendered):
    """torchrun's shared store keeps the last round's gloo/NCCL addresses (pytorch/pytorch#135712);
    only elastic jobs restart the worker group, so only they need the variable."""
    for replica in ("Master", "Worker"):
        assert env_of(rendered["ci/elastic-cpu-values.yaml"], replica)["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"
    assert "TORCH_DISABLE_SHARE_RDZV_TCP_STORE" not in env_of(rendered["ci/torchrun-cpu-values.yaml"], "Master")


def test_user_env_can_turn_the_shared_rendezvous_store_back_on(helm, tmp_path):
    docs = render_with(
        helm,
        {
            "torchrun": {"enabled": True},
            "elasticPolicy": {"enabled": True},
            "env": [{"name": "TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "value": "0"}],
        },
        tmp_path,
    )
    names = [e["name"] for e in trainer_container(docs)["env"]]
    assert names.count("TORCH_DISABLE_SHARE_RDZV_TCP_STORE") == 1, names
    assert env_of(docs, "Master")["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "0"


def test_elastic_policy_renders_every_rendezvous_setting(rendered):
    job = one(rendered["elastic-custom-rendezvous"], "PyTorchJob")
    assert job["spec"]["elasticPolicy"] == {
        "minReplicas": 2,
        "maxReplicas": 4,
        "maxRestarts": 5,
        "rdzvBackend": "c10d",
        "rdzvHost": "rdzv.example",
        "rdzvPort": 29400,
        "rdzvId": "mnist-run",
        "rdzvConf": [{"key": "join_timeout", "value": "900"}, {"key": "read_timeout", "value": "60"}],
    }


@pytest.mark.parametrize(
    "values",
    [
        {"gpu": 1, "torchrun": {"enabled": True}, "nprocPerNode": "auto"},
        {"torchrun": {"enabled": True}, "elasticPolicy": {"enabled": True}},
    ],
)
def test_helm_test_checks_no_world_size_where_the_values_leave_it_open(helm, tmp_path, values):
    """nprocPerNode auto/cpu/gpu and an elastic job have no fixed world size."""
    assert one(render_with(helm, values, tmp_path), "Pod")["spec"]["containers"][0]["args"][4] == ""


def test_argocd_example_skips_dry_run_and_helm_tests(rendered):
    docs = rendered["examples/argocd-values.yaml"]
    options = one(docs, "PyTorchJob")["metadata"]["annotations"]["argocd.argoproj.io/sync-options"]
    assert "SkipDryRunOnMissingResource=true" in options
    assert "Replace=true" not in options, "a replace would recreate a job Kueue admitted (ci/argocd/README.md)"
    assert not by_kind(docs, "Pod")
