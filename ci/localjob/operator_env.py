"""What the Kubeflow training-operator v1 does to a PyTorchJob's pods, as pure functions.

Mirrors the operator's pkg/controller.v1/pytorch/{envvar,master,elastic}.go and its API defaulting
(pytorch_defaults.go), release-1.9: pod names, the environment appended to every container, and
the replica restart policy.
Nothing here touches the machine, so tests can check it against the contract's worked examples.
"""

from __future__ import annotations

import re

CONTAINER_NAME = "pytorch"
PORT_NAME = "pytorchjob-port"
DEFAULT_PORT = 23456
DEFAULT_RESTART_POLICY = "OnFailure"
REPLICA_TYPES = ("Master", "Worker")
# strconv.Atoi accepts an optional sign and decimal digits, nothing else.
_ATOI = re.compile(r"^[+-]?[0-9]+$")


def replica_specs(job: dict) -> dict[str, dict]:
    """The replica specs keyed Master/Worker (the operator camel-cases the keys), Master first."""
    specs: dict[str, dict] = {}
    for key, spec in job["spec"]["pytorchReplicaSpecs"].items():
        canonical = next((t for t in REPLICA_TYPES if t.lower() == key.lower()), None)
        if canonical is None:
            raise ValueError(f"pytorchReplicaSpecs.{key}: only Master and Worker replicas exist")
        specs[canonical] = spec
    return {t: specs[t] for t in REPLICA_TYPES if t in specs}


def replica_count(spec: dict) -> int:
    """`replicas`, defaulted to 1 like the operator does."""
    replicas = spec.get("replicas")
    return 1 if replicas is None else int(replicas)


def pod_name(job: dict, replica_type: str, index: int) -> str:
    """`<job>-<replica type in lowercase>-<index>`, also the name of the pod's headless Service."""
    return f"{job['metadata']['name']}-{replica_type.lower()}-{index}"


def pods(job: dict) -> list[tuple[str, int]]:
    """Every (replica type, index) the operator creates a pod for, Master first."""
    return [(t, i) for t, spec in replica_specs(job).items() for i in range(replica_count(spec))]


def restart_policy(job: dict, replica_type: str) -> str:
    return replica_specs(job)[replica_type].get("restartPolicy") or DEFAULT_RESTART_POLICY


def _pytorch_container(spec: dict) -> dict:
    containers = spec["template"]["spec"]["containers"]
    # Port defaulting falls back to the first container when none is named pytorch.
    return next((c for c in containers if c.get("name") == CONTAINER_NAME), containers[0])


def container_port(spec: dict) -> int:
    """The `pytorchjob-port` of the pytorch container (defaulting adds 23456 when it is missing)."""
    for port in _pytorch_container(spec).get("ports") or []:
        if port.get("name") == PORT_NAME:
            return int(port["containerPort"])
    return DEFAULT_PORT


def nproc_per_node(job: dict) -> str | None:
    """spec.nprocPerNode after defaulting: "auto" unless set, or unless the deprecated
    elasticPolicy.nProcPerNode is used instead."""
    spec = job["spec"]
    if spec.get("nprocPerNode") is not None:
        return str(spec["nprocPerNode"])
    elastic = spec.get("elasticPolicy")
    if elastic is None or elastic.get("nProcPerNode") is None:
        return "auto"
    return None


def _nproc_as_int(value: str | None) -> int:
    """The operator's strconv.Atoi with fallback: 1 for nil and for auto/cpu/gpu."""
    return int(value) if value is not None and _ATOI.match(value) else 1


def _elastic_min_max(elastic: dict, worker_replicas: int) -> tuple[int, int]:
    low, high = elastic.get("minReplicas"), elastic.get("maxReplicas")
    if low is None and high is None:
        return worker_replicas, worker_replicas
    return (high if low is None else low), (low if high is None else high)


def _elastic_env(job: dict, elastic: dict, specs: dict[str, dict]) -> list[tuple[str, str]]:
    if "Worker" not in specs:
        raise ValueError("elasticPolicy needs a Worker replica spec (the rendezvous runs on worker-0)")
    host = elastic.get("rdzvHost") or pod_name(job, "Worker", 0)
    port = elastic.get("rdzvPort") or container_port(specs["Worker"])
    low, high = _elastic_min_max(elastic, replica_count(specs["Worker"]))
    env = [
        ("PET_RDZV_ENDPOINT", f"{host}:{port}"),
        ("PET_RDZV_BACKEND", elastic.get("rdzvBackend") or "c10d"),
        ("PET_NNODES", f"{low}:{high}"),
    ]
    if elastic.get("maxRestarts") is not None:
        env.append(("PET_MAX_RESTARTS", str(elastic["maxRestarts"])))
    if elastic.get("nProcPerNode") is not None:
        env.append(("PET_NPROC_PER_NODE", str(elastic["nProcPerNode"])))
    if elastic.get("rdzvId"):
        env.append(("PET_RDZV_ID", str(elastic["rdzvId"])))
    if elastic.get("rdzvConf"):
        env.append(("PET_RDZV_CONF", ",".join(f"{kv['key']}={kv['value']}" for kv in elastic["rdzvConf"])))
    if elastic.get("standalone"):
        env.append(("PET_STANDALONE", ""))
    return env


def operator_env(job: dict, replica_type: str, index: int) -> list[tuple[str, str]]:
    """The variables the operator appends to every container of pod (replica_type, index),
    in the operator's order. They come after the container's own env, so they win."""
    specs = replica_specs(job)
    total_replicas = sum(replica_count(spec) for spec in specs.values())
    nproc = nproc_per_node(job)
    env = [("PYTHONUNBUFFERED", "1")]
    if "Master" in specs:
        port = str(container_port(specs["Master"]))
        master = pod_name({"metadata": {"name": job["metadata"]["name"].replace("/", "-")}}, "Master", 0)
        # RANK is the pod's node rank: Master 0, Worker i → i + 1.
        rank = str(index + 1 if replica_type == "Worker" else index)
        env += [
            ("MASTER_PORT", port),
            ("PET_MASTER_PORT", port),
            ("MASTER_ADDR", master),
            ("PET_MASTER_ADDR", master),
            ("WORLD_SIZE", str(total_replicas * _nproc_as_int(nproc))),
            ("RANK", rank),
            ("PET_NODE_RANK", rank),
        ]
    if nproc is not None:
        env.append(("PET_NPROC_PER_NODE", nproc))
    elastic = job["spec"].get("elasticPolicy")
    if elastic is None:
        env.append(("PET_NNODES", str(total_replicas)))
    else:
        env += _elastic_env(job, elastic, specs)
    return env
