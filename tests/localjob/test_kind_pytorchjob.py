"""The PyTorchJob kind: the runner's operator environment equals the training-operator v1 contract (the
reference's §2 worked examples), for hand-written jobs and for the chart's own renderings; and the
operator's restart and success rules (§3)."""

from __future__ import annotations

import pytest

from ci.localjob.kinds import pytorchjob as op
from tests.support.helm import one
from tests.support.paths import WORKLOAD_CHART


def job(
    workers: int | None = 1,
    nproc: str | None = None,
    elastic: dict | None = None,
    master: bool = True,
    port: int | None = None,
    name: str = "mnist",
) -> dict:
    """A minimal PyTorchJob as the API server would store it (before operator defaulting)."""
    ports = [] if port is None else [{"name": "pytorchjob-port", "containerPort": port}]
    template = {"spec": {"containers": [{"name": "pytorch", "image": "trainer", "ports": ports}]}}
    specs = {}
    if master:
        specs["Master"] = {"replicas": 1, "template": template}
    if workers is not None:
        specs["Worker"] = {"replicas": workers, "template": template}
    spec = {"pytorchReplicaSpecs": specs}
    if nproc is not None:
        spec["nprocPerNode"] = nproc
    if elastic is not None:
        spec["elasticPolicy"] = elastic
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name}, "spec": spec}


def env_of(pytorchjob: dict, replica_type: str, index: int) -> dict[str, str]:
    pairs = op.operator_env(pytorchjob, replica_type, index)
    assert len(pairs) == len(dict(pairs)), f"duplicate variables in {pairs}"
    return dict(pairs)


def test_one_master_one_worker():
    example = job(workers=1, nproc="1")
    master, worker = env_of(example, "Master", 0), env_of(example, "Worker", 0)
    assert master == {
        "PYTHONUNBUFFERED": "1",
        "MASTER_PORT": "23456",
        "PET_MASTER_PORT": "23456",
        "MASTER_ADDR": "mnist-master-0",
        "PET_MASTER_ADDR": "mnist-master-0",
        "WORLD_SIZE": "2",
        "RANK": "0",
        "PET_NODE_RANK": "0",
        "PET_NPROC_PER_NODE": "1",
        "PET_NNODES": "2",
    }
    assert worker == {**master, "RANK": "1", "PET_NODE_RANK": "1"}


def test_variables_come_in_the_operators_order():
    names = [name for name, _ in op.operator_env(job(), "Worker", 0)]
    assert names == [
        "PYTHONUNBUFFERED",
        "MASTER_PORT",
        "PET_MASTER_PORT",
        "MASTER_ADDR",
        "PET_MASTER_ADDR",
        "WORLD_SIZE",
        "RANK",
        "PET_NODE_RANK",
        "PET_NPROC_PER_NODE",
        "PET_NNODES",
    ]


def test_one_master_three_workers_with_four_processes_per_node():
    example = job(workers=3, nproc="4")
    envs = [env_of(example, t, i) for t, i in op.pods(example)]
    assert [e["RANK"] for e in envs] == ["0", "1", "2", "3"]
    assert [e["PET_NODE_RANK"] for e in envs] == ["0", "1", "2", "3"]
    for env in envs:
        assert env["WORLD_SIZE"] == "16" and env["PET_NNODES"] == "4" and env["PET_NPROC_PER_NODE"] == "4"
        assert env["MASTER_ADDR"] == "mnist-master-0" and env["MASTER_PORT"] == "23456"


@pytest.mark.parametrize("nproc, expected", [(None, "auto"), ("auto", "auto"), ("gpu", "gpu"), ("cpu", "cpu")])
def test_non_integer_nproc_counts_as_one(nproc, expected):
    env = env_of(job(workers=3, nproc=nproc), "Worker", 2)
    assert env["WORLD_SIZE"] == "4" and env["PET_NPROC_PER_NODE"] == expected and env["RANK"] == "3"


def test_elastic_adds_rendezvous_variables_instead_of_a_plain_node_count():
    example = job(
        workers=2,
        elastic={
            "maxRestarts": 3,
            "rdzvId": "run-1",
            "rdzvConf": [{"key": "join_timeout", "value": "900"}, {"key": "read_timeout", "value": "60"}],
        },
    )
    env = env_of(example, "Worker", 1)
    assert env["PET_RDZV_ENDPOINT"] == "mnist-worker-0:23456"
    assert env["PET_RDZV_BACKEND"] == "c10d"
    assert env["PET_NNODES"] == "2:2", "defaulting fills min and max from the Worker replicas"
    assert env["PET_MAX_RESTARTS"] == "3" and env["PET_RDZV_ID"] == "run-1"
    assert env["PET_RDZV_CONF"] == "join_timeout=900,read_timeout=60"
    assert env["PET_NPROC_PER_NODE"] == "auto" and env["RANK"] == "2" and env["WORLD_SIZE"] == "3"
    assert "PET_STANDALONE" not in env


def test_elastic_min_max_host_port_and_deprecated_nproc():
    example = job(
        workers=2,
        elastic={
            "minReplicas": 1,
            "rdzvHost": "rdzv",
            "rdzvPort": 29400,
            "rdzvBackend": "etcd",
            "nProcPerNode": 2,
            "standalone": True,
        },
    )
    env = env_of(example, "Master", 0)
    assert env["PET_RDZV_ENDPOINT"] == "rdzv:29400" and env["PET_RDZV_BACKEND"] == "etcd"
    assert env["PET_NNODES"] == "1:1", "a missing max is filled from min"
    assert env["PET_NPROC_PER_NODE"] == "2", "only the deprecated elasticPolicy.nProcPerNode sets it"
    assert env["PET_STANDALONE"] == ""


def test_elastic_without_worker_is_an_error():
    with pytest.raises(ValueError, match="Worker"):
        op.operator_env(job(workers=None, elastic={}), "Master", 0)


def test_worker_only_job_gets_no_master_variables():
    env = env_of(job(workers=2, master=False), "Worker", 1)
    assert env == {"PYTHONUNBUFFERED": "1", "PET_NPROC_PER_NODE": "auto", "PET_NNODES": "2"}


def test_port_and_names_follow_the_job():
    example = job(port=29500, name="team/run")
    env = env_of(example, "Master", 0)
    assert env["MASTER_PORT"] == env["PET_MASTER_PORT"] == "29500"
    assert env["MASTER_ADDR"] == "team-run-master-0"


def test_pods_restart_policy_and_camel_cased_replica_types():
    example = job(workers=2)
    example["spec"]["pytorchReplicaSpecs"] = {k.lower(): v for k, v in example["spec"]["pytorchReplicaSpecs"].items()}
    example["spec"]["pytorchReplicaSpecs"]["worker"]["restartPolicy"] = "ExitCode"
    assert op.pods(example) == [("Master", 0), ("Worker", 0), ("Worker", 1)]
    assert op.pod_name(example, "Worker", 1) == "mnist-worker-1"
    assert op.restart_policy(example, "Master") == "OnFailure"
    assert op.restart_policy(example, "Worker") == "ExitCode"
    example["spec"]["pytorchReplicaSpecs"]["Chief"] = {}
    with pytest.raises(ValueError, match="Chief"):
        op.pods(example)


@pytest.mark.parametrize(
    "policy, restarted, not_restarted",
    [
        ("OnFailure", [1, 2, 137], []),
        ("Always", [1, 137], []),
        ("ExitCode", [128, 130, 137, 138, 143, 255], [1, 2, 127]),
        ("Never", [], [1, 137, 143]),
    ],
)
def test_restart_rule_per_restart_policy(policy, restarted, not_restarted):
    model = op.PyTorchJobModel(job())
    assert [code for code in restarted + not_restarted if model.restarts(policy, code)] == restarted
    assert model.recreates_pod(policy) == (policy == "ExitCode"), "only ExitCode deletes and recreates the pod"


def test_only_exit_code_warns_that_the_operator_would_not_count_its_recreations():
    bounded = job()
    bounded["spec"]["runPolicy"] = {"activeDeadlineSeconds": 600}
    assert op.PyTorchJobModel(job()).backoff_caveat("OnFailure") == ""
    assert (
        op.PyTorchJobModel(job())
        .backoff_caveat("ExitCode")
        .endswith("would recreate it forever; set runPolicy.activeDeadlineSeconds to bound it")
    )
    assert (
        op.PyTorchJobModel(bounded)
        .backoff_caveat("ExitCode")
        .endswith("would recreate it until runPolicy.activeDeadlineSeconds")
    )


def test_the_master_decides_success_and_without_one_every_worker_or_any_when_elastic():
    with_master = op.PyTorchJobModel(job(workers=1))
    assert with_master.succeeded([("Master", "Succeeded"), ("Worker", "Running")]) == "the Master succeeded"
    assert with_master.succeeded([("Master", "Running"), ("Worker", "Succeeded")]) is None
    workers = [("Worker", "Succeeded"), ("Worker", "Running")]
    assert op.PyTorchJobModel(job(workers=2, master=False)).succeeded(workers) is None
    assert op.PyTorchJobModel(job(workers=2, master=False, elastic={})).succeeded(workers) == "the Workers succeeded"


def test_ports_are_the_masters_and_the_rendezvous():
    assert op.PyTorchJobModel(job(port=29501)).ports() == {29501}
    elastic = op.PyTorchJobModel(job(workers=2, elastic={"rdzvPort": 29400}))
    assert elastic.ports() == {23456, 29400} and elastic.rendezvous_endpoint == "mnist-worker-0:29400"
    assert op.PyTorchJobModel(job(port=29501), port=29600).ports() == {29600}, "--port moves it"


# --- the chart's renderings -----------------------------------------------------------------------


def chart_job(helm, **set_values) -> dict:
    return one(helm.render(WORKLOAD_CHART, set_values=set_values), "PyTorchJob")


def test_chart_default_is_the_one_plus_one_example(helm):
    rendered = chart_job(helm)
    expected = job(workers=1, nproc="1")
    for pod in op.pods(expected):
        assert op.operator_env(rendered, *pod) == op.operator_env(expected, *pod)


def test_chart_torchrun_one_plus_three_four_processes(helm):
    rendered = chart_job(helm, **{"workers": 3, "torchrun.enabled": True, "nprocPerNode": "4"})
    expected = job(workers=3, nproc="4")
    assert op.pods(rendered) == op.pods(expected)
    for pod in op.pods(expected):
        assert op.operator_env(rendered, *pod) == op.operator_env(expected, *pod)


def test_chart_elastic_counts_the_master_as_a_node(helm):
    rendered = chart_job(helm, **{"workers": 2, "torchrun.enabled": True, "elasticPolicy.enabled": True})
    env = env_of(rendered, "Worker", 0)
    assert env["PET_NNODES"] == "3:3" and env["PET_MAX_RESTARTS"] == "3"
    assert env["PET_RDZV_ENDPOINT"] == "mnist-worker-0:23456" and env["PET_RDZV_BACKEND"] == "c10d"
    assert env["PET_NPROC_PER_NODE"] == "1" and env["WORLD_SIZE"] == "3"
