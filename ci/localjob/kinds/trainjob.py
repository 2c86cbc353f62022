"""Kubeflow Trainer v2's TrainJob on the `torch-distributed` runtime (a JobSet): pod names, the torch
plugin's environment, the node pod that spec.trainer and the runtime patches make, and how its pods
restart (JobSet's OnFailure, under the Job's default backoffLimit 6) and the job completes (every node).
v2.3.0's rules (shared/reference/trainer-v2.md §1-4); the functions touch nothing on the machine.
"""

from __future__ import annotations

import math

from ci.localjob.kinds.base import JobModel, PodTemplate, UnsupportedPod
from ci.localjob.quantity import cpu_millicores

RUNTIME = "torch-distributed"
# The torch runtime's one replicated job and its one container share this name.
NODE = "node"
MASTER_PORT = 29500
# JobSet's default for a pod template without one; a TrainJob cannot set it.
RESTART_POLICY = "OnFailure"
# The runtime's Job sets no backoffLimit, so Kubernetes' default applies to all its pods together.
JOB_BACKOFF_LIMIT = 6
INJECTED = ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT")
# The only container fields a runtime patch may carry.
PATCHABLE_CONTAINER_FIELDS = {"name", "env", "volumeMounts", "securityContext"}


def trainer(job: dict) -> dict:
    return job["spec"].get("trainer") or {}


def num_nodes(job: dict) -> int:
    """spec.trainer.numNodes, else the runtime's mlPolicy.numNodes (1 for torch-distributed)."""
    nodes = trainer(job).get("numNodes")
    return 1 if nodes is None else int(nodes)


def pod_name(job_name: str, index: int) -> str:
    """The pod's hostname, `<job>-node-0-<index>` (JobSet adds a random suffix to the pod's own name)."""
    return f"{job_name}-{NODE}-0-{index}"


def master_addr(job_name: str) -> str:
    """Node 0 under the job's headless Service, which is the pods' subdomain."""
    return f"{pod_name(job_name, 0)}.{job_name}"


def _resources(job: dict) -> dict:
    return trainer(job).get("resourcesPerNode") or {}


def nproc_per_node(job: dict) -> str:
    """numProcPerNode if set; else `auto` when a resource's name mentions a GPU; else the CPU request (else
    limit) in whole cores, rounded up as Quantity.Value() does, at least 1."""
    spec = trainer(job)
    if spec.get("numProcPerNode") is not None:
        return str(spec["numProcPerNode"])
    resources = _resources(job)
    lists = [resources.get("requests") or {}, resources.get("limits") or {}]
    if any("gpu" in name for listed in lists for name in listed):
        return "auto"
    cpu = next((listed["cpu"] for listed in lists if "cpu" in listed), None)
    try:
        cores = 1 if cpu is None else math.ceil(cpu_millicores(cpu) / 1000)
    except ValueError as error:
        raise ValueError(f"spec.trainer.resourcesPerNode: {error}") from None
    return str(max(1, cores))


def torch_env(job: dict, index: int, port: int = MASTER_PORT) -> list[tuple[str, str]]:
    """The variables the torch plugin adds to container `node` of pod `index`, and nothing else (no
    MASTER_ADDR, RANK, WORLD_SIZE or PYTHONUNBUFFERED: torchrun reads these PET_* as its defaults)."""
    return [
        ("PET_NNODES", str(num_nodes(job))),
        ("PET_NPROC_PER_NODE", nproc_per_node(job)),
        ("PET_NODE_RANK", str(index)),  # the pod's batch.kubernetes.io/job-completion-index
        ("PET_MASTER_ADDR", master_addr(job["metadata"]["name"])),
        ("PET_MASTER_PORT", str(port)),
    ]


def _merge(items: list[dict], patch: list[dict], key: str) -> list[dict]:
    """A strategic merge of two lists keyed on `key`: a patch item replaces the item it names."""
    merged = {item[key]: item for item in items}
    merged.update((item[key], item) for item in patch)
    return list(merged.values())


def node_pod(job: dict) -> tuple[dict, dict]:
    """(pod spec, container `node`) as the runtime patches and spec.trainer make them; ValueError names a
    field that the Trainer would refuse or get wrong."""
    spec = trainer(job)
    for position, var in enumerate(spec.get("env") or []):
        if var["name"] in INJECTED:
            raise ValueError(
                f"spec.trainer.env[{position}]: {var['name']} is set by the torch plugin and refused by "
                "Trainer's webhook; drop it"
            )
    pod_spec: dict = {"volumes": []}
    mounts: list[dict] = []
    for number, patch in enumerate(job["spec"].get("runtimePatches") or []):
        where = f"spec.runtimePatches[{number}]"
        if not str(patch.get("manager", "")).partition("/")[1]:
            raise ValueError(f"{where}.manager: needs a domain-prefixed path such as example.com/chart")
        template = (patch.get("trainingRuntimeSpec") or {}).get("template") or {}
        for replicated in (template.get("spec") or {}).get("replicatedJobs") or []:
            job_where = f"{where}.trainingRuntimeSpec.template.spec.replicatedJobs[name={replicated['name']}]"
            if replicated["name"] != NODE:
                raise ValueError(f"{job_where}: the torch-distributed runtime has only replicatedJob {NODE}")
            patched = ((replicated.get("template") or {}).get("spec") or {}).get("template", {}).get("spec") or {}
            pod_spec.update((k, v) for k, v in patched.items() if k not in ("volumes", "containers"))
            pod_spec["volumes"] = _merge(pod_spec["volumes"], patched.get("volumes") or [], "name")
            for container in patched.get("containers") or []:
                container_where = f"{job_where}.template.spec.template.spec.containers[name={container['name']}]"
                if container["name"] != NODE:
                    raise ValueError(
                        f"{container_where}: the runtime's container is named {NODE}; Trainer v2.3.0 would add "
                        f"{container['name']} as a second container without an image"
                    )
                if container.get("env"):
                    raise ValueError(f"{container_where}.env: refused by the Trainer; use spec.trainer.env")
                if extra := sorted(set(container) - PATCHABLE_CONTAINER_FIELDS):
                    raise ValueError(f"{container_where}: {', '.join(extra)} cannot be patched; use spec.trainer")
                mounts = _merge(mounts, container.get("volumeMounts") or [], "mountPath")
    container = {
        "name": NODE,
        "command": spec.get("command") or [],
        "args": spec.get("args") or [],
        "env": spec.get("env") or [],
        "resources": _resources(job),
        "volumeMounts": mounts,
    }
    return pod_spec, container


class TrainJobModel(JobModel):
    kind = "TrainJob"
    success_state = "Complete"
    port_help = f"node 0's PET_MASTER_PORT ({MASTER_PORT})"

    @property
    def subdomain(self) -> str:
        return self.name  # the JobSet's headless Service

    @property
    def _port(self) -> int:
        return MASTER_PORT if self.port is None else self.port

    def pods(self) -> list[PodTemplate]:
        pod_spec, container = node_pod(self.manifest)
        if pod_spec.get("initContainers"):
            raise UnsupportedPod(f"{self.name}: initContainers cannot run locally, only the {NODE} container")
        return [
            PodTemplate(
                pod_name(self.name, index),
                NODE,
                index,
                pod_spec,
                container,
                torch_env(self.manifest, index, self._port),
                RESTART_POLICY,
            )
            for index in range(num_nodes(self.manifest))
        ]

    def describe(self) -> str:
        nodes = num_nodes(self.manifest)
        text = f"{nodes} node{'s' * (nodes != 1)}, PET_NPROC_PER_NODE={nproc_per_node(self.manifest)}"
        runtime = (self.spec.get("runtimeRef") or {}).get("name")
        if runtime != RUNTIME:
            # A custom runtime may differ (backoffLimit, restartPolicy): the runner only knows this one.
            text += f"; runtime {runtime} run by {RUNTIME}'s rules"
        return text

    def ports(self) -> set[int]:
        return {self._port}

    @property
    def suspended(self) -> str | None:
        if self.spec.get("suspend"):
            return "spec.suspend is true, so the Trainer would start no pods; set runPolicy.suspend=false"
        return None

    @property
    def backoff_limit(self) -> int | None:
        return JOB_BACKOFF_LIMIT

    @property
    def active_deadline_seconds(self) -> int | None:
        return self.spec.get("activeDeadlineSeconds")

    def restarts(self, restart_policy: str, exit_code: int) -> bool:
        """Every pod is OnFailure: the kubelet restarts it whatever the code."""
        return True

    def recreates_pod(self, restart_policy: str) -> bool:
        return False

    def succeeded(self, phases: list[tuple[str, str]]) -> str | None:
        """The Indexed Job completes when every index has, and the JobSet and TrainJob with it."""
        return "every node succeeded" if all(phase == "Succeeded" for _, phase in phases) else None
