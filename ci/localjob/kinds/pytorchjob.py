"""The Kubeflow training-operator v1's PyTorchJob: what the operator does to its pods, and how it restarts
them and finishes the job.

Mirrors the operator's pkg/controller.v1/pytorch/{envvar,master,elastic}.go, its API defaulting
(pytorch_defaults.go) and pkg/util/status.go, release-1.9 (shared/reference/training-operator-v1.md
§2-3): pod names `<job>-<master|worker>-<index>`, each with its own headless Service; the environment
appended to every container; the replica restart policies (ExitCode recreates the pod for exit codes
128-255 and fails the job on 1-127); success when the Master succeeds, or without one when every Worker
does (any Worker, when elastic). The functions are pure, so tests can check them against the contract's
worked examples.
"""

from __future__ import annotations

import copy
import re

from ci.localjob.kinds.base import JobModel, PodTemplate, UnsupportedPod

CONTAINER_NAME = "pytorch"
PORT_NAME = "pytorchjob-port"
DEFAULT_PORT = 23456
DEFAULT_RESTART_POLICY = "OnFailure"
REPLICA_TYPES = ("Master", "Worker")
# ExitCode recreates the pod for these exit codes (a signal's 128 + N among them) and fails the job on 1-127.
EXIT_CODE_RETRIED = range(128, 256)
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


def rdzv_endpoint(job: dict) -> str | None:
    """PET_RDZV_ENDPOINT of an elastic job: rdzvHost (worker-0) and rdzvPort (the Worker's port); None unless elastic."""
    elastic = job["spec"].get("elasticPolicy")
    if elastic is None:
        return None
    specs = replica_specs(job)
    if "Worker" not in specs:
        raise ValueError("elasticPolicy needs a Worker replica spec (the rendezvous runs on worker-0)")
    host = elastic.get("rdzvHost") or pod_name(job, "Worker", 0)
    return f"{host}:{elastic.get('rdzvPort') or container_port(specs['Worker'])}"


def _elastic_env(job: dict, elastic: dict, specs: dict[str, dict]) -> list[tuple[str, str]]:
    endpoint = rdzv_endpoint(job)  # first: it refuses a job without Workers
    low, high = _elastic_min_max(elastic, replica_count(specs["Worker"]))
    env = [
        ("PET_RDZV_ENDPOINT", endpoint),
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


class PyTorchJobModel(JobModel):
    kind = "PyTorchJob"
    exit_codes_retried = EXIT_CODE_RETRIED
    port_help = f"the Master's {PORT_NAME} ({DEFAULT_PORT} unless the job sets it)"
    port_hint = " (an elasticPolicy.rdzvPort of its own moves with --set elasticPolicy.rdzvPort=N instead)"

    def __init__(self, manifest: dict, port: int | None = None):
        super().__init__(manifest if port is None else _with_container_port(manifest, port), port)

    def pods(self) -> list[PodTemplate]:
        specs = replica_specs(self.manifest)
        templates = []
        for replica_type, index in pods(self.manifest):
            name = pod_name(self.manifest, replica_type, index)
            pod_spec = specs[replica_type]["template"]["spec"]
            templates.append(
                PodTemplate(
                    name,
                    replica_type,
                    index,
                    pod_spec,
                    training_container(pod_spec, name),
                    operator_env(self.manifest, replica_type, index),
                    restart_policy(self.manifest, replica_type),
                )
            )
        return templates

    def describe(self) -> str:
        counts = {t: replica_count(spec) for t, spec in replica_specs(self.manifest).items()}
        return f"{sum(counts.values())} pods ({', '.join(f'{t} ×{n}' for t, n in counts.items())})"

    @property
    def rendezvous_endpoint(self) -> str | None:
        return rdzv_endpoint(self.manifest)

    def ports(self) -> set[int]:
        specs = replica_specs(self.manifest)
        ports = {container_port(specs["Master"])} if "Master" in specs else set()
        if endpoint := self.rendezvous_endpoint:
            ports.add(int(endpoint.rpartition(":")[2]))
        return ports

    @property
    def _run_policy(self) -> dict:
        return self.spec.get("runPolicy") or {}

    @property
    def suspended(self) -> str | None:
        if self._run_policy.get("suspend"):
            return "runPolicy.suspend is true, so the operator would start no pods; set runPolicy.suspend=false"
        return None

    @property
    def backoff_limit(self) -> int | None:
        return self._run_policy.get("backoffLimit")

    @property
    def active_deadline_seconds(self) -> int | None:
        return self._run_policy.get("activeDeadlineSeconds")

    def recreates_pod(self, restart_policy: str) -> bool:
        """ExitCode: the operator deletes the pod and creates it again; otherwise the kubelet restarts the container."""
        return restart_policy == "ExitCode"

    def backoff_caveat(self, restart_policy: str) -> str:
        if restart_policy != "ExitCode":
            return ""
        until = (
            "until runPolicy.activeDeadlineSeconds"
            if self.active_deadline_seconds is not None
            else "forever; set runPolicy.activeDeadlineSeconds to bound it"
        )
        return (
            "on a cluster the training-operator v1 does not count ExitCode's pod recreations "
            f"(kubeflow/trainer#2045) and would recreate it {until}"
        )

    def succeeded(self, phases: list[tuple[str, str]]) -> str | None:
        """With a Master, when it succeeds; without, when every Worker does (elastic: any Worker)."""
        masters = [phase for role, phase in phases if role == "Master"]
        if masters:
            return "the Master succeeded" if all(phase == "Succeeded" for phase in masters) else None
        done = [phase == "Succeeded" for _, phase in phases]
        return "the Workers succeeded" if (any(done) if "elasticPolicy" in self.spec else all(done)) else None


def _with_container_port(job: dict, port: int) -> dict:
    """A copy of `job` whose pytorch containers listen on `port`."""
    job = copy.deepcopy(job)
    for spec in replica_specs(job).values():
        container = next(c for c in spec["template"]["spec"]["containers"] if c["name"] == CONTAINER_NAME)
        ports = [p for p in container.get("ports") or [] if p.get("name") != PORT_NAME]
        container["ports"] = ports + [{"name": PORT_NAME, "containerPort": port, "protocol": "TCP"}]
    return job


def training_container(pod_spec: dict, pod: str) -> dict:
    """The pod's one container, the operator's `pytorch`: sidecars and init containers cannot run here."""
    container = next((c for c in pod_spec["containers"] if c["name"] == CONTAINER_NAME), None)
    if container is None:
        raise UnsupportedPod(f"{pod}: no container named {CONTAINER_NAME} (the operator's webhook refuses this)")
    if len(pod_spec["containers"]) > 1 or pod_spec.get("initContainers"):
        raise UnsupportedPod(f"{pod}: only the {CONTAINER_NAME} container can run locally")
    return container
