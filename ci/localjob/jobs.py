"""A job model per kind: what a rendered PyTorchJob (training-operator v1) or TrainJob (Trainer v2,
torch-distributed runtime) asks of its pods, and the rules it finishes by. pods turns the pods into
local processes and supervisor runs them alike for both kinds; only what differs lives here.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from dataclasses import dataclass

from ci.localjob import operator_env as op
from ci.localjob import trainer_env as te


class UnsupportedPod(ValueError):
    """The pod uses something that has no local equivalent; the message names it."""


@dataclass(frozen=True)
class PodTemplate:
    """One pod the controller would create, before it is made local."""

    name: str
    role: str  # the replica type (Master, Worker) or the replicated job (node)
    index: int
    pod_spec: dict  # its volumes
    container: dict  # the training container: command, args, env, resources, volumeMounts, workingDir
    injected_env: list[tuple[str, str]]  # what the controller appends to the container's env
    restart_policy: str


class JobModel(ABC):
    kind: str
    success_state: str  # the condition a finished job reaches: Succeeded (v1) or Complete (v2)
    # What a busy port's message adds to `pass --port N`.
    port_hint = ""

    def __init__(self, manifest: dict, port: int | None = None):
        self.manifest = manifest
        self.port = port  # the runner's --port, replacing the job's rendezvous port

    @property
    def name(self) -> str:
        return self.manifest["metadata"]["name"]

    @property
    def spec(self) -> dict:
        return self.manifest["spec"]

    @property
    def subdomain(self) -> str:
        """The domain every pod's hostname is under (`<pod>.<subdomain>`), "" when each pod has its own Service."""
        return ""

    @abstractmethod
    def pods(self) -> list[PodTemplate]:
        """Every pod, in the order the controller creates them (rank 0 first)."""

    @abstractmethod
    def describe(self) -> str:
        """The pods at a glance, for the runner's first line."""

    @property
    @abstractmethod
    def suspended(self) -> str | None:
        """Why no pod would start (the job is suspended), or None."""

    @property
    @abstractmethod
    def backoff_limit(self) -> int | None:
        """Failures (counted across pods) that fail the job; None for no limit."""

    @property
    @abstractmethod
    def active_deadline_seconds(self) -> int | None: ...

    @abstractmethod
    def succeeded(self, phases: list[tuple[str, str]]) -> str | None:
        """Given each pod's (role, phase), why the job has succeeded, or None while it has not."""


class PyTorchJobModel(JobModel):
    kind = "PyTorchJob"
    success_state = "Succeeded"
    port_hint = " (an elasticPolicy.rdzvPort of its own moves with --set elasticPolicy.rdzvPort=N instead)"

    def __init__(self, manifest: dict, port: int | None = None):
        super().__init__(manifest if port is None else _with_container_port(manifest, port), port)

    def pods(self) -> list[PodTemplate]:
        specs = op.replica_specs(self.manifest)
        templates = []
        for replica_type, index in op.pods(self.manifest):
            name = op.pod_name(self.manifest, replica_type, index)
            pod_spec = specs[replica_type]["template"]["spec"]
            templates.append(
                PodTemplate(
                    name,
                    replica_type,
                    index,
                    pod_spec,
                    _pytorch_container(pod_spec, name),
                    op.operator_env(self.manifest, replica_type, index),
                    op.restart_policy(self.manifest, replica_type),
                )
            )
        return templates

    def describe(self) -> str:
        counts = {t: op.replica_count(spec) for t, spec in op.replica_specs(self.manifest).items()}
        return f"{sum(counts.values())} pods ({', '.join(f'{t} ×{n}' for t, n in counts.items())})"

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

    def succeeded(self, phases: list[tuple[str, str]]) -> str | None:
        """With a Master, when it succeeds; without, when every Worker does (elastic: any Worker)."""
        masters = [phase for role, phase in phases if role == "Master"]
        if masters:
            return "the Master succeeded" if all(phase == "Succeeded" for phase in masters) else None
        done = [phase == "Succeeded" for _, phase in phases]
        return "the Workers succeeded" if (any(done) if "elasticPolicy" in self.spec else all(done)) else None


class TrainJobModel(JobModel):
    kind = "TrainJob"
    success_state = "Complete"

    @property
    def subdomain(self) -> str:
        return self.name  # the JobSet's headless Service

    def pods(self) -> list[PodTemplate]:
        pod_spec, container = te.node_pod(self.manifest)
        if pod_spec.get("initContainers"):
            raise UnsupportedPod(f"{self.name}: initContainers cannot run locally, only the {te.NODE} container")
        port = te.MASTER_PORT if self.port is None else self.port
        return [
            PodTemplate(
                te.pod_name(self.name, index),
                te.NODE,
                index,
                pod_spec,
                container,
                te.torch_env(self.manifest, index, port),
                te.RESTART_POLICY,
            )
            for index in range(te.num_nodes(self.manifest))
        ]

    def describe(self) -> str:
        nodes = te.num_nodes(self.manifest)
        text = f"{nodes} node{'s' * (nodes != 1)}, PET_NPROC_PER_NODE={te.nproc_per_node(self.manifest)}"
        runtime = (self.spec.get("runtimeRef") or {}).get("name")
        if runtime != te.RUNTIME:
            # A custom runtime may differ (backoffLimit, restartPolicy): the runner only knows this one.
            text += f"; runtime {runtime} run by {te.RUNTIME}'s rules"
        return text

    @property
    def suspended(self) -> str | None:
        if self.spec.get("suspend"):
            return "spec.suspend is true, so the Trainer would start no pods; set runPolicy.suspend=false"
        return None

    @property
    def backoff_limit(self) -> int | None:
        return te.JOB_BACKOFF_LIMIT

    @property
    def active_deadline_seconds(self) -> int | None:
        return self.spec.get("activeDeadlineSeconds")

    def succeeded(self, phases: list[tuple[str, str]]) -> str | None:
        """The Indexed Job completes when every index has, and the JobSet and TrainJob with it."""
        return "every node succeeded" if all(phase == "Succeeded" for _, phase in phases) else None


MODELS = {model.kind: model for model in (PyTorchJobModel, TrainJobModel)}


def job_model(manifest: dict, port: int | None = None) -> JobModel:
    """The model of a rendered job, by its kind; `port` replaces its rendezvous port (the runner's --port)."""
    kind = manifest.get("kind")
    if kind not in MODELS:
        raise ValueError(f"kind {kind}: the local runner runs {' and '.join(MODELS)} only")
    return MODELS[kind](manifest, port)


def _with_container_port(job: dict, port: int) -> dict:
    """A copy of `job` whose pytorch containers listen on `port`."""
    job = copy.deepcopy(job)
    for spec in op.replica_specs(job).values():
        container = next(c for c in spec["template"]["spec"]["containers"] if c["name"] == op.CONTAINER_NAME)
        ports = [p for p in container.get("ports") or [] if p.get("name") != op.PORT_NAME]
        container["ports"] = ports + [{"name": op.PORT_NAME, "containerPort": port, "protocol": "TCP"}]
    return job


def _pytorch_container(pod_spec: dict, pod: str) -> dict:
    """The pod's one container, the operator's `pytorch`: sidecars and init containers cannot run here."""
    container = next((c for c in pod_spec["containers"] if c["name"] == op.CONTAINER_NAME), None)
    if container is None:
        raise UnsupportedPod(f"{pod}: no container named {op.CONTAINER_NAME} (the operator's webhook refuses this)")
    if len(pod_spec["containers"]) > 1 or pod_spec.get("initContainers"):
        raise UnsupportedPod(f"{pod}: only the {op.CONTAINER_NAME} container can run locally")
    return container
