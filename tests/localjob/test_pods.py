"""From a rendered PyTorchJob to local process plans: command, env, volumes and host names."""

from __future__ import annotations

import copy
import json
import re
import sys
from pathlib import Path

import pytest

from ci.localjob.kinds import job_model
from ci.localjob.kinds.base import UnsupportedPod
from ci.localjob.pods import IMAGE_ENTRYPOINT, REPO, cpu_shares, map_path, plan_pods
from tests.support.dockerfile import stages
from tests.support.helm import one
from tests.support.paths import WORKLOAD_CHART
from trainer.runtime import CPU_REQUEST_ENV

HOST_ENV = {
    "PATH": "/usr/bin",
    "HOME": "/home/me",
    "RANK": "7",
    "LOCAL_RANK": "3",
    "PET_NNODES": "9",
    "TORCHELASTIC_RUN_ID": "x",
    "PYTHONPATH": "/opt/lib",
}


@pytest.fixture(scope="module")
def default_job(helm) -> dict:
    return one(helm.render(WORKLOAD_CHART), "PyTorchJob")


def test_default_pods_run_the_image_entrypoint_with_this_python(default_job, tmp_path):
    master, worker = plan_pods(job_model(default_job), tmp_path, host_env=HOST_ENV)
    assert (master.name, worker.name) == ("mnist-master-0", "mnist-worker-0")
    assert master.argv[:3] == (sys.executable, "-m", "trainer")
    assert master.argv[3:] == worker.argv[3:]
    assert master.restart_policy == "OnFailure"


def test_the_image_entrypoint_is_the_dockerfiles():
    """A container without a command runs the image's ENTRYPOINT, which the runner restates."""
    runtime_steps = stages()["runtime"][1]
    (entrypoint,) = [json.loads(arguments) for keyword, arguments in runtime_steps if keyword == "ENTRYPOINT"]
    assert tuple(entrypoint) == IMAGE_ENTRYPOINT


def test_volume_paths_in_args_and_env_become_local_directories(default_job, tmp_path):
    master, worker = plan_pods(job_model(default_job), tmp_path, host_env=HOST_ENV)
    args = list(master.argv)
    claim = tmp_path / "volumes" / "mnist-storage"
    assert args[args.index("--output-dir") + 1] == str(claim / "runs/default/mnist/model")
    assert args[args.index("--data-dir") + 1] == str(claim / "datasets")
    assert master.env["XDG_CACHE_HOME"] == str(tmp_path / "pods/mnist-master-0/volumes/cache"), "emptyDirs are per pod"
    assert worker.env["XDG_CACHE_HOME"] == str(tmp_path / "pods/mnist-worker-0/volumes/cache")
    assert dict(master.mounts)["/mnt/pytorchjob-mnist"] == claim == dict(worker.mounts)["/mnt/pytorchjob-mnist"]
    assert "/dev/shm" not in dict(master.mounts), "shared memory stays the host's /dev/shm"
    assert master.cwd == claim == worker.cwd, "the working directory is on the volume too"


def test_env_is_host_env_then_container_env_then_operator_env(default_job, tmp_path):
    job = copy.deepcopy(default_job)  # the fixture is shared by the module
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["env"] += [
        {"name": "WORLD_SIZE", "value": "99"},
        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ]
    worker = plan_pods(job_model(job), tmp_path, namespace="ml", host_env=HOST_ENV)[1]
    assert worker.env["WORLD_SIZE"] == "2", "the operator's variables are appended, so they win"
    assert worker.env["POD"] == "mnist-worker-0"
    assert worker.env["RANK"] == "1" and "LOCAL_RANK" not in worker.env and "TORCHELASTIC_RUN_ID" not in worker.env
    assert worker.env["PATH"] == f"{Path(sys.executable).parent}:/usr/bin", "the image's python first, for shells too"
    assert worker.env["HOME"] == "/home/me"
    assert worker.env["TMPDIR"] == str(tmp_path / "pods/mnist-worker-0/volumes/tmp"), "the pod's /tmp emptyDir"
    assert worker.env["PYTHONPATH"] == f"{REPO}:/opt/lib", "the checkout stands in for the image"
    assert worker.env["MASTER_ADDR"] == worker.env["PET_MASTER_ADDR"] == "127.0.0.1"
    assert dict(worker.injected_env)["MASTER_ADDR"] == "127.0.0.1"


def test_the_cpu_request_reaches_the_trainer_as_the_downward_api_gives_it(default_job, tmp_path):
    """The chart passes requests.cpu in millicores, which sizes the trainer's threads without a CPU limit."""
    assert plan_pods(job_model(default_job), tmp_path, host_env=HOST_ENV)[0].env[CPU_REQUEST_ENV] == "1000"

    def request(cpu: object, divisor: str) -> str:
        resources = {"requests": {"cpu": cpu}} if cpu is not None else {}
        job = pod_spec_job(
            container={
                "resources": resources,
                "env": [
                    {
                        "name": "CPUS",
                        "valueFrom": {"resourceFieldRef": {"resource": "requests.cpu", "divisor": divisor}},
                    }
                ],
            }
        )
        return plan_pods(job_model(job), tmp_path, host_env=HOST_ENV)[0].env["CPUS"]

    assert [request("500m", "1m"), request(2, "1m"), request("1.5", "1m"), request(None, "1m")] == [
        "500",
        "2000",
        "1500",
        "0",
    ]
    only_limit = pod_spec_job(
        container={
            "resources": {"limits": {"cpu": "2"}},
            "env": [{"name": "CPUS", "valueFrom": {"resourceFieldRef": {"resource": "requests.cpu", "divisor": "1m"}}}],
        }
    )
    assert plan_pods(job_model(only_limit), tmp_path, host_env=HOST_ENV)[0].env["CPUS"] == "2000", (
        "the API server's default request"
    )
    assert [request("500m", "1"), request("1.5", "1"), request("2", "1")] == ["1", "2", "2"], (
        "rounded up, as the kubelet does"
    )
    with pytest.raises(UnsupportedPod, match=re.escape("mnist-master-0: CPU quantity 'lots' is not a number")):
        request("lots", "1m")


def test_references_expand_as_the_kubelet_expands_them(default_job, tmp_path):
    """Env values see the variables before them; the command and args see the final env, the
    operator's included; `$$` is a `$`; an undefined reference (HOME is the shell's) stays."""
    job = copy.deepcopy(default_job)
    container = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    container["env"] += [
        {"name": "CLAIM", "value": "/mnt/pytorchjob-mnist"},
        {"name": "NOTE", "value": "$(CLAIM)|$(LATER)|$(RANK)|$$(CLAIM)|$$HOME"},
        {"name": "LATER", "value": "later"},
        {"name": "EXPORTS", "value": "$(CLAIM)/exports"},
    ]
    container["args"] += [
        "--node_rank=$(RANK)",
        "--master_addr=$(MASTER_ADDR)",
        "--export=$(CLAIM)/x",
        "$$HOME",
        "$(HOME)",
    ]
    worker = plan_pods(job_model(job), tmp_path, host_env=HOST_ENV)[1]
    claim = tmp_path / "volumes" / "mnist-storage"
    assert worker.argv[-5:] == ("--node_rank=1", "--master_addr=127.0.0.1", f"--export={claim}/x", "$HOME", "$(HOME)")
    assert worker.env["NOTE"] == "/mnt/pytorchjob-mnist|$(LATER)|$(RANK)|$(CLAIM)|$HOME"
    assert worker.env["EXPORTS"] == f"{claim}/exports", "expanded first, then mapped like any path"


def test_the_shells_machine_wide_settings_are_not_inherited(default_job, tmp_path):
    """No container starts with them: the shell's OMP_NUM_THREADS=8 would run 8 threads in a 1-CPU pod."""
    host_env = {**HOST_ENV, "OMP_NUM_THREADS": "8", "MKL_NUM_THREADS": "8", "CUDA_VISIBLE_DEVICES": "0"}
    job = copy.deepcopy(default_job)
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["env"] += [
        {"name": "OMP_NUM_THREADS", "value": "1"}
    ]
    master, worker = plan_pods(job_model(job), tmp_path, host_env=host_env)
    assert "OMP_NUM_THREADS" not in master.env and "MKL_NUM_THREADS" not in master.env
    assert master.env["CUDA_VISIBLE_DEVICES"] == worker.env["CUDA_VISIBLE_DEVICES"] == "", (
        "pods that request no GPU see none"
    )
    assert worker.env["OMP_NUM_THREADS"] == "1", "the pod's own env still sets them"


def test_port_override(default_job, tmp_path):
    for pod in plan_pods(job_model(default_job, port=29533), tmp_path, host_env=HOST_ENV):
        assert pod.env["MASTER_PORT"] == pod.env["PET_MASTER_PORT"] == "29533"
    assert plan_pods(job_model(default_job), tmp_path, host_env=HOST_ENV)[0].env["MASTER_PORT"] == "23456", (
        "copy, not in place"
    )


def test_torchrun_and_elastic_rendezvous_are_local(helm, tmp_path):
    job = one(
        helm.render(WORKLOAD_CHART, set_values={"torchrun.enabled": True, "elasticPolicy.enabled": True}), "PyTorchJob"
    )
    master, worker = plan_pods(job_model(job), tmp_path, host_env=HOST_ENV)
    assert master.argv[:5] == (sys.executable, "-m", "trainer.torchrun", "--module", "trainer")
    assert master.env["PET_RDZV_ENDPOINT"] == "127.0.0.1:23456"
    # Every pod is 127.0.0.1 here: only worker-0, which the endpoint names, may host the store, as on a cluster.
    assert (master.env["PET_RDZV_CONF"], worker.env["PET_RDZV_CONF"]) == ("is_host=false", "is_host=true")


@pytest.mark.parametrize("host", ["mnist-worker-0.ml", "mnist-worker-0.ml.svc", "mnist-worker-0.ml.svc.cluster.local"])
def test_a_rendezvous_host_named_by_its_service_domain_is_local_too(helm, tmp_path, host):
    job = one(
        helm.render(
            WORKLOAD_CHART,
            set_values={
                "torchrun.enabled": True,
                "elasticPolicy.enabled": True,
                "elasticPolicy.rdzvHost": host,
                "elasticPolicy.rdzvConf.join_timeout": 900,
            },
        ),
        "PyTorchJob",
    )
    master, worker = plan_pods(job_model(job), tmp_path, namespace="ml", host_env=HOST_ENV)
    assert master.env["PET_RDZV_ENDPOINT"] == "127.0.0.1:23456"
    assert worker.env["PET_RDZV_CONF"] == "join_timeout=900,is_host=true", "the user's settings stay"
    external = one(
        helm.render(
            WORKLOAD_CHART,
            set_values={
                "torchrun.enabled": True,
                "elasticPolicy.enabled": True,
                "elasticPolicy.rdzvHost": "mnist-worker-0.other",
            },
        ),
        "PyTorchJob",
    )
    assert (
        plan_pods(job_model(external), tmp_path, namespace="ml", host_env=HOST_ENV)[0].env["PET_RDZV_ENDPOINT"]
        == "mnist-worker-0.other:23456"
    ), "another namespace's pod is not this job's"


@pytest.mark.parametrize(
    "value, expected",
    [
        ("/mnt/data", "/local/claim"),
        ("/mnt/data/runs/x", "/local/claim/runs/x"),
        ("--dir=/mnt/data/logs", "--dir=/local/claim/logs"),
        ("/mnt/database", "/mnt/database"),
        ("/tmp/x", "/local/tmp/x"),
        ("relative/mnt/data", "relative/mnt/data"),
    ],
)
def test_map_path(value, expected):
    mounts = [("/mnt/data", Path("/local/claim")), ("/tmp", Path("/local/tmp"))]
    assert map_path(value, mounts) == expected


def pod_spec_job(workers: int = 0, **pod_spec) -> dict:
    container = {"name": "pytorch", "image": "trainer", **pod_spec.pop("container", {})}
    template = {"spec": {"containers": [container], **pod_spec}}
    specs = {"Master": {"replicas": 1, "template": template}}
    if workers:
        specs["Worker"] = {"replicas": workers, "template": copy.deepcopy(template)}
    return {"kind": "PyTorchJob", "metadata": {"name": "mnist"}, "spec": {"pytorchReplicaSpecs": specs}}


def gpu_limits(job: dict, replica_type: str) -> dict:
    return job["spec"]["pytorchReplicaSpecs"][replica_type]["template"]["spec"]["containers"][0]["resources"]["limits"]


@pytest.mark.parametrize(
    "job, message",
    [
        (
            pod_spec_job(
                volumes=[{"name": "cfg", "configMap": {"name": "c"}}],
                container={"volumeMounts": [{"name": "cfg", "mountPath": "/etc/cfg"}]},
            ),
            "volume cfg (configMap) has no local equivalent",
        ),
        (pod_spec_job(container={"envFrom": [{"secretRef": {"name": "s"}}]}), "envFrom"),
        (
            pod_spec_job(
                container={"env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}
            ),
            "env TOKEN uses valueFrom",
        ),
        (pod_spec_job(initContainers=[{"name": "init", "image": "busybox"}]), "only the pytorch container"),
        (
            pod_spec_job(container={"command": ["no-such-trainer"]}),
            f"mnist-master-0: command no-such-trainer is neither in {Path(sys.executable).parent} nor on PATH; "
            "use python or torchrun (the venv's), or put no-such-trainer on PATH",
        ),
    ],
)
def test_what_cannot_run_locally_is_named(job, message, tmp_path):
    with pytest.raises(UnsupportedPod, match=re.escape(message)):
        plan_pods(job_model(job), tmp_path, host_env=HOST_ENV)


@pytest.mark.parametrize("gpus_here", [0, 1])
def test_gpu_pods_need_as_many_gpus_here(monkeypatch, tmp_path, gpus_here):
    """A GPU example fails once with the fix, not with each replica's CUDA error and restarts."""
    monkeypatch.setattr("ci.localjob.pods.visible_gpus", lambda: gpus_here)
    job = pod_spec_job(container={"resources": {"limits": {"nvidia.com/gpu": 2}}})
    with pytest.raises(
        UnsupportedPod,
        match=re.escape(
            f"1 pod × 2 nvidia.com/gpu = 2, but this machine has {gpus_here} that torch can use; lower workers or "
            'gpu to fit, or add --set gpu=0 (make run RUN_FLAGS="--set gpu=0") to train on its CPUs'
        ),
    ):
        plan_pods(job_model(job), tmp_path, host_env=HOST_ENV)
    monkeypatch.setattr("ci.localjob.pods.visible_gpus", lambda: 2)
    assert [pod.name for pod in plan_pods(job_model(job), tmp_path, host_env=HOST_ENV)] == ["mnist-master-0"]


def test_the_gpus_of_all_pods_must_fit_together(monkeypatch, tmp_path):
    """Two 1-GPU pods on one GPU would share it, and NCCL stops at "Duplicate GPU detected"."""
    monkeypatch.setattr("ci.localjob.pods.visible_gpus", lambda: 1)
    job = pod_spec_job(workers=1, container={"resources": {"limits": {"nvidia.com/gpu": 1}}})
    with pytest.raises(UnsupportedPod, match=re.escape("2 pods × 1 nvidia.com/gpu = 2, but this machine has 1 ")):
        plan_pods(job_model(job), tmp_path, host_env=HOST_ENV)
    monkeypatch.setattr("ci.localjob.pods.visible_gpus", lambda: 3)
    job = pod_spec_job(workers=2, container={"resources": {"limits": {"nvidia.com/gpu": 1}}})
    gpu_limits(job, "Master")["nvidia.com/gpu"] = 2
    with pytest.raises(
        UnsupportedPod, match=re.escape("1 pod × 2 + 2 pods × 1 nvidia.com/gpu = 4, but this machine has 3 ")
    ):
        plan_pods(job_model(job), tmp_path, host_env=HOST_ENV)


def test_gpu_pods_get_gpus_of_their_own_in_pod_order(monkeypatch, tmp_path):
    """As the device plugin hands them out: each pod's cuda:0 is another GPU."""
    monkeypatch.setattr("ci.localjob.pods.visible_gpus", lambda: 4)
    job = pod_spec_job(workers=2, container={"resources": {"limits": {"nvidia.com/gpu": 1}}})
    gpu_limits(job, "Master")["nvidia.com/gpu"] = 2

    def devices(host_env: dict[str, str]) -> list[str]:
        return [pod.env["CUDA_VISIBLE_DEVICES"] for pod in plan_pods(job_model(job), tmp_path, host_env=host_env)]

    assert devices(HOST_ENV) == ["0,1", "2", "3"]
    assert devices({**HOST_ENV, "CUDA_VISIBLE_DEVICES": "4,5,6,7"}) == ["4,5", "6", "7"], "the shell picks the GPUs"


def test_pods_share_the_cpus_equally_and_each_gets_at_least_one():
    assert cpu_shares(2, [0, 1]) == [(0,), (1,)]
    assert cpu_shares(1, [0, 1]) == [(0, 1)]
    assert cpu_shares(2, [0, 1, 2, 3]) == [(0, 1), (2, 3)]
    assert cpu_shares(3, [4, 5]) == [(4,), (5,), (4,)]
