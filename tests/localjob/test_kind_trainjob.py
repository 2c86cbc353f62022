"""The runner's TrainJob pods: what Trainer v2's torch plugin injects (trainer-v2.md §3), the node pod that
spec.trainer and the runtime patches make, and that pod made local; for hand-written TrainJobs of the
chart's shape and for the chart's own renderings."""

from __future__ import annotations

import copy
import re
import sys

import pytest

from ci.localjob.kinds import job_model
from ci.localjob.kinds import trainjob as te
from ci.localjob.pods import plan_pods, pod_named
from tests.support.helm import one
from tests.support.paths import WORKLOAD_CHART
from trainer.runtime import CPU_REQUEST_ENV

HOST_ENV = {"PATH": "/usr/bin", "RANK": "7", "MASTER_ADDR": "elsewhere", "PET_NNODES": "9"}
# The training-operator v1's variables: a TrainJob's pods get none of them.
V1_ONLY = {"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "PYTHONUNBUFFERED"}


def trainjob(
    nodes: int | None = 2,
    nproc: int | None = 1,
    resources: dict | None = None,
    env: list[dict] | None = None,
    node_container: dict | None = None,
    replicated_job: str = "node",
    name: str = "mnist",
) -> dict:
    """A TrainJob of the chart's shape: the trainer through torchrun, the volumes in a runtime patch."""
    trainer = {
        "image": "ghcr.io/pytorchjob-mnist/trainer:0.1.0-cpu",
        "command": ["python", "-m", "trainer.torchrun", "--module", "trainer"],
        "args": ["--dataset", "digits", "--output-dir", "/mnt/claim/model"],
        "env": env if env is not None else [{"name": "XDG_CACHE_HOME", "value": "/var/cache/trainer"}],
        "resourcesPerNode": resources if resources is not None else {"requests": {"cpu": "1", "memory": "2Gi"}},
    }
    if nodes is not None:
        trainer["numNodes"] = nodes
    if nproc is not None:
        trainer["numProcPerNode"] = nproc
    container = node_container or {
        "name": "node",
        "securityContext": {"readOnlyRootFilesystem": True},
        "volumeMounts": [
            {"name": "storage", "mountPath": "/mnt/claim"},
            {"name": "cache", "mountPath": "/var/cache/trainer"},
            {"name": "dshm", "mountPath": "/dev/shm"},
        ],
    }
    pod_spec = {
        "securityContext": {"runAsUser": 1000},
        "volumes": [
            {"name": "storage", "persistentVolumeClaim": {"claimName": "mnist-storage"}},
            {"name": "cache", "emptyDir": {}},
            {"name": "dshm", "emptyDir": {"medium": "Memory"}},
        ],
        "containers": [container],
    }
    patch = {
        "manager": "pytorchjob-mnist.github.io/chart",
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [{"name": replicated_job, "template": {"spec": {"template": {"spec": pod_spec}}}}]
                }
            }
        },
    }
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": trainer, "runtimePatches": [patch]},
    }


def injected(job: dict) -> list[dict[str, str]]:
    return [dict(pod.injected_env) for pod in job_model(job).pods()]


@pytest.mark.parametrize("nodes, nproc", [(2, 1), (4, 1), (2, 2)])
def test_the_torch_plugins_variables_and_nothing_else(nodes, nproc):
    pods = job_model(trainjob(nodes=nodes, nproc=nproc)).pods()
    assert [pod.name for pod in pods] == [f"mnist-node-0-{i}" for i in range(nodes)]
    assert [dict(pod.injected_env) for pod in pods] == [
        {
            "PET_NNODES": str(nodes),
            "PET_NPROC_PER_NODE": str(nproc),
            "PET_NODE_RANK": str(rank),
            "PET_MASTER_ADDR": "mnist-node-0-0.mnist",
            "PET_MASTER_PORT": "29500",
        }
        for rank in range(nodes)
    ]
    assert {pod.restart_policy for pod in pods} == {"OnFailure"}, "JobSet's default; a TrainJob cannot set it"


def test_every_pod_restarts_in_place_under_the_jobs_backoff_limit_and_every_node_must_succeed():
    model = job_model(trainjob())
    assert model.restarts(te.RESTART_POLICY, 1) and not model.recreates_pod(te.RESTART_POLICY)
    assert model.backoff_limit == 6 and model.success_state == "Complete"
    assert model.succeeded([("node", "Succeeded"), ("node", "Running")]) is None
    assert model.succeeded([("node", "Succeeded"), ("node", "Succeeded")]) == "every node succeeded"
    assert model.ports() == {29500} and job_model(trainjob(), port=29533).ports() == {29533}


@pytest.mark.parametrize(
    "resources, expected",
    [
        ({}, "1"),
        ({"requests": {"cpu": "500m"}}, "1"),
        ({"requests": {"cpu": "1500m"}}, "2"),
        ({"requests": {"cpu": 3}, "limits": {"cpu": 4}}, "3"),
        ({"limits": {"cpu": "4"}}, "4"),
        ({"limits": {"nvidia.com/gpu": 1}, "requests": {"cpu": "8"}}, "auto"),
        ({"requests": {"amd.com/gpu": 1}}, "auto"),
    ],
)
def test_processes_per_node_default_to_the_cpus_or_auto_for_gpus(resources, expected):
    (node,) = injected(trainjob(nodes=1, nproc=None, resources=resources))
    assert node["PET_NPROC_PER_NODE"] == expected


def test_num_proc_per_node_wins_and_num_nodes_defaults_to_the_runtimes_one():
    (node,) = injected(trainjob(nodes=None, nproc=2, resources={"limits": {"nvidia.com/gpu": 4}}))
    assert node["PET_NPROC_PER_NODE"] == "2" and node["PET_NNODES"] == "1"


def test_a_cpu_quantity_that_is_no_number_names_the_field():
    with pytest.raises(ValueError, match=re.escape("spec.trainer.resourcesPerNode: CPU quantity 'lots' is not")):
        injected(trainjob(nproc=None, resources={"requests": {"cpu": "lots"}}))


@pytest.mark.parametrize(
    "job, message",
    [
        (
            trainjob(env=[{"name": "PET_NNODES", "value": "3"}]),
            "spec.trainer.env[0]: PET_NNODES is set by the torch plugin and refused by Trainer's webhook; drop it",
        ),
        (
            trainjob(node_container={"name": "trainer", "volumeMounts": []}),
            "containers[name=trainer]: the runtime's container is named node; Trainer v2.3.0 would add trainer as a "
            "second container without an image",
        ),
        (
            trainjob(replicated_job="launcher"),
            "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[name=launcher]: the "
            "torch-distributed runtime has only replicatedJob node",
        ),
        (
            trainjob(node_container={"name": "node", "env": [{"name": "A", "value": "1"}]}),
            "containers[name=node].env: refused by the Trainer; use spec.trainer.env",
        ),
        (
            trainjob(node_container={"name": "node", "resources": {"limits": {"cpu": 1}}}),
            "containers[name=node]: resources cannot be patched; use spec.trainer",
        ),
    ],
)
def test_what_the_trainer_refuses_or_gets_wrong_is_named(job, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        job_model(job).pods()


def test_a_manager_without_a_domain_is_refused():
    job = trainjob()
    job["spec"]["runtimePatches"][0]["manager"] = "chart"
    with pytest.raises(ValueError, match=re.escape("spec.runtimePatches[0].manager: needs a domain-prefixed path")):
        job_model(job).pods()


def test_later_patches_add_volumes_and_replace_mounts_by_path():
    job = trainjob()
    second = copy.deepcopy(job["spec"]["runtimePatches"][0])
    second["manager"] = "example.com/extra"
    second_pod = second["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    second_pod["spec"] = {
        "volumes": [{"name": "scratch", "emptyDir": {}}],
        "containers": [{"name": "node", "volumeMounts": [{"name": "scratch", "mountPath": "/var/cache/trainer"}]}],
    }
    job["spec"]["runtimePatches"].append(second)
    (pod, _) = job_model(job).pods()
    assert [v["name"] for v in pod.pod_spec["volumes"]] == ["storage", "cache", "dshm", "scratch"]
    assert {m["mountPath"]: m["name"] for m in pod.container["volumeMounts"]}["/var/cache/trainer"] == "scratch"


def test_node_pods_run_locally_with_the_patches_volumes_and_no_v1_variables(tmp_path):
    rank0, rank1 = plan_pods(job_model(trainjob()), tmp_path, host_env=HOST_ENV)
    assert rank0.argv[:5] == (sys.executable, "-m", "trainer.torchrun", "--module", "trainer")
    claim = tmp_path / "volumes/mnist-storage"
    assert rank0.argv[-1] == str(claim / "model"), "the claim's mount path in the args maps to its directory"
    assert rank1.env["XDG_CACHE_HOME"] == str(tmp_path / "pods/mnist-node-0-1/volumes/cache"), "emptyDirs per pod"
    assert "/dev/shm" not in dict(rank0.mounts)
    for rank, pod in enumerate((rank0, rank1)):
        assert pod.env["PET_MASTER_ADDR"] == "127.0.0.1" and pod.env["PET_NODE_RANK"] == str(rank)
        assert not V1_ONLY & set(pod.env), "neither the controller's nor the shell's v1 variables"
        assert [name for name, _ in pod.injected_env] == list(te.INJECTED)


def test_the_downward_cpu_request_reads_the_resources_per_node(tmp_path):
    job = trainjob(
        env=[{"name": "CPUS", "valueFrom": {"resourceFieldRef": {"resource": "requests.cpu", "divisor": "1m"}}}],
        resources={"requests": {"cpu": "1500m"}},
    )
    assert plan_pods(job_model(job), tmp_path, host_env=HOST_ENV)[0].env["CPUS"] == "1500"


def test_port_override_moves_the_master_port_only(tmp_path):
    for pod in plan_pods(job_model(trainjob(), port=29533), tmp_path, host_env=HOST_ENV):
        assert pod.env["PET_MASTER_PORT"] == "29533" and "MASTER_PORT" not in pod.env


@pytest.mark.parametrize(
    "host, pod",
    [
        ("mnist-node-0-0.mnist", "mnist-node-0-0"),
        ("mnist-node-0-1.mnist.ml", "mnist-node-0-1"),
        ("mnist-node-0-0.mnist.ml.svc", "mnist-node-0-0"),
        ("mnist-node-0-0.mnist.ml.svc.cluster.local", "mnist-node-0-0"),
        ("mnist-node-0-0", None),  # no Service of its own: the job's headless Service is the subdomain
        ("mnist-node-0-0.other", None),
        ("mnist-node-0-0.mnist.other", None),
    ],
)
def test_node_hostnames_resolve_under_the_jobs_subdomain(host, pod):
    assert pod_named(host, {"mnist-node-0-0", "mnist-node-0-1"}, "ml", subdomain="mnist") == pod


@pytest.mark.parametrize(
    "values, nodes, nproc",
    [({"workers": 1}, 2, "1"), ({"workers": 3}, 4, "1"), ({"workers": 1, "nprocPerNode": "2"}, 2, "2")],
)
def test_the_charts_trainjob_gets_the_torch_plugins_env(helm, tmp_path, values, nodes, nproc):
    job = one(helm.render(WORKLOAD_CHART, set_values={"jobKind": "TrainJob", **values}), "TrainJob")
    pods = plan_pods(job_model(job), tmp_path, host_env=HOST_ENV)
    assert [dict(pod.injected_env) for pod in pods] == [
        {
            "PET_NNODES": str(nodes),
            "PET_NPROC_PER_NODE": nproc,
            "PET_NODE_RANK": str(rank),
            "PET_MASTER_ADDR": "127.0.0.1",
            "PET_MASTER_PORT": "29500",
        }
        for rank in range(nodes)
    ]
    assert [dict(pod.injected_env) for pod in job_model(job).pods()][0]["PET_MASTER_ADDR"] == "mnist-node-0-0.mnist"
    rank0 = pods[0]
    assert rank0.env[CPU_REQUEST_ENV] == "1000", "the chart's requests.cpu through the downward API"
    args = list(rank0.argv)
    assert args[args.index("--output-dir") + 1].startswith(str(tmp_path / "volumes" / "mnist-storage")), (
        "the chart's claim, mounted through its runtime patch"
    )
