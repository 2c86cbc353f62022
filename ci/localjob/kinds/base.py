"""What every job kind hands the runner: its pods as its controller would create them, and the rules its
controller restarts them and finishes the job by. pods and supervisor work from these alone.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection
from dataclasses import dataclass
from typing import ClassVar


class UnsupportedPod(ValueError):
    """The pod uses something that has no local equivalent; the message names it."""


@dataclass(frozen=True)
class PodTemplate:
    """One pod the controller would create, before it is made local."""

    name: str
    role: str  # the replica type (Master, Worker) or the replicated job (node)
    index: int
    pod_spec: dict  # its volumes
    container: dict  # the training container as the controller runs it: command, args, env, resources, volumeMounts, workingDir
    injected_env: list[tuple[str, str]]  # what the controller appends to the container's env
    restart_policy: str
    notes: tuple[
        str, ...
    ] = ()  # what --print-env adds about the pod: values the runner chose where the controller's are unknown


class JobModel(ABC):
    """A rendered job of one kind. A subclass in a module of this package is a kind the runner runs."""

    kind: ClassVar[str]
    success_state: ClassVar[str] = "Succeeded"  # the state a finished job reaches
    port_help: ClassVar[str]  # what the runner's --port replaces, for its help
    port_hint: ClassVar[str] = ""  # what a busy port's message adds to `pass --port N`

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

    @property
    def rendezvous_endpoint(self) -> str | None:
        """`host:port` of the torchrun c10d store the controller points every pod at, or None: on a cluster only
        the pod the host names serves it."""
        return None

    @property
    def warnings(self) -> list[str]:
        """What the controller would silently ignore in this job."""
        return []

    @abstractmethod
    def pods(self) -> list[PodTemplate]:
        """Every pod, in the order the controller creates them (rank 0 first)."""

    @abstractmethod
    def describe(self) -> str:
        """The pods at a glance, for the runner's first line."""

    @abstractmethod
    def ports(self) -> set[int]:
        """The ports the pods listen on (their hosts are 127.0.0.1 here)."""

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

    # The exit codes the controller's restartPolicy ExitCode restarts a pod for.
    exit_codes_retried: ClassVar[Collection[int]] = ()

    def restarts(self, restart_policy: str, exit_code: int) -> bool:
        """Whether the controller restarts a pod of this restartPolicy that exited with this non-zero code."""
        if restart_policy == "ExitCode":
            return exit_code in self.exit_codes_retried
        return restart_policy in ("OnFailure", "Always")

    @abstractmethod
    def recreates_pod(self, restart_policy: str) -> bool:
        """Whether a restart is a new pod (its emptyDirs start empty) rather than its container restarted in place."""

    def backoff_caveat(self, restart_policy: str) -> str:
        """How the controller differs from the runner once backoffLimit is reached, "" where it does not."""
        return ""

    @abstractmethod
    def succeeded(self, phases: list[tuple[str, str]]) -> str | None:
        """Given each pod's (role, phase) in pod order, why the job has succeeded, or None while it has not."""
