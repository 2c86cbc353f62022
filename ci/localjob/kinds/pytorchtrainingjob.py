"""T9k's PyTorchTrainingJob (batch.tensorstack.dev/v1beta1) in torchrun mode: how T9k's job controller starts
its pods, restarts them and decides the job. T9k's controller is closed and publishes no CRD schema: these
are the facts of its manuals and examples (shared/reference/t9k.md, which tags each as documented, seen in
an example, inferred or unknown).

- Pods: `replicas` (default 1) of each spec.replicaSpecs[] entry, in order, named `<job>-<type>-<index>`
  here. T9k adds a random 5-hex part, `<job>-<hex>-<type>-<index>`, which a local run has no use for.
- The training container is the one named `python`, else the first (locally, the pod's only one). In
  torchrun mode T9k ignores its `command` and runs `torchrun <flags> <args>`. Which flags is not
  documented; these follow spec.torchrunConfig's fields: --nnodes (every pod), --nproc-per-node
  (procPerNode), --max-restarts (maxRestarts), --rdzv-backend (rdzvBackend, c10d), --rdzv-endpoint, then
  extraOptions. torchrun's rendezvous then gives the trainer RANK, LOCAL_RANK, WORLD_SIZE and
  MASTER_ADDR/PORT (the host of the node that became rank 0, a free port there).
- T9k documents no environment and no rendezvous address: the runner injects nothing and picks the
  endpoint itself, the first pod at RDZV_PORT (or --port), and each pod's notes say it is the runner's
  choice.
- Restarts: T9k forces the pods' own restartPolicy to Never and recreates a failed pod by its replica
  spec's restartPolicy: OnFailure and Always on any failure, Never on none, ExitCode only on exit codes
  130, 137, 138 and 143. backoffLimit (3 unless set) counts the restarts of all replicas together;
  activeDeadlineSeconds caps the runtime.
- The pod's process is torchrun, which exits 1 when a worker fails, whatever the worker's code, and also
  when it is stopped by SIGTERM (torch's handler raises an exception): the trainer's retryable 138 reaches
  T9k as 1, so under ExitCode only a pod whose torchrun is killed (137) is retried.
- The job has Succeeded once its first pod has, whatever the others do; the runner stops those after its
  grace period. runMode.pause holds the pods back, as a suspended job's do.
"""

from __future__ import annotations

from ci.localjob.kinds.base import JobModel, PodTemplate, UnsupportedPod

RESTART_POLICIES = ("OnFailure", "Always", "ExitCode", "Never")
EXIT_CODE_RETRIED = frozenset({130, 137, 138, 143})
DEFAULT_BACKOFF_LIMIT = 3
DEFAULT_RDZV_BACKEND = "c10d"
# The runner's choice, torch's default master port: T9k documents no rendezvous port.
RDZV_PORT = 29500


def replica_specs(job: dict) -> list[dict]:
    specs = job["spec"].get("replicaSpecs") or []
    if not specs:
        raise ValueError("spec.replicaSpecs: a PyTorchTrainingJob needs at least one replica spec")
    for position, spec in enumerate(specs):
        where = f"spec.replicaSpecs[{position}]"
        if not spec.get("type"):
            raise ValueError(f"{where}.type: required, e.g. node")
        if spec.get("restartPolicy") not in RESTART_POLICIES:
            raise ValueError(
                f"{where}.restartPolicy: {spec.get('restartPolicy')!r}; set one of {', '.join(RESTART_POLICIES)} "
                "(T9k's default is not documented)"
            )
    return specs


def replica_count(spec: dict) -> int:
    replicas = spec.get("replicas")
    return 1 if replicas is None else int(replicas)


def pod_name(job_name: str, replica_type: str, index: int) -> str:
    """`<job>-<type>-<index>`: T9k's pod name without its random part."""
    return f"{job_name}-{replica_type}-{index}"


def pods(job: dict) -> list[tuple[int, str, int]]:
    """(replica spec position, type, index) of every pod, in T9k's order: the first is the job's first pod."""
    return [
        (position, spec["type"], index)
        for position, spec in enumerate(replica_specs(job))
        for index in range(replica_count(spec))
    ]


def torchrun_config(job: dict) -> dict:
    """spec.torchrunConfig, refusing the modes the runner does not run."""
    spec = job["spec"]
    config = spec.get("torchrunConfig") or {}
    if config.get("enabled") is not True:
        raise ValueError("spec.torchrunConfig.enabled: the local runner runs T9k's torchrun mode only; set it to true")
    if (spec.get("elastic") or {}).get("enabled"):
        raise ValueError("spec.elastic.enabled: an elastic job does not run locally; set it to false")
    if ((spec.get("runMode") or {}).get("debug") or {}).get("enabled"):
        raise ValueError("spec.runMode.debug.enabled: debug mode does not run locally; set it to false")
    return config


def torchrun_command(job: dict, endpoint: str) -> list[str]:
    """What T9k runs in place of the container's command; the container's args follow it."""
    config = torchrun_config(job)
    flags = [f"--nnodes={len(pods(job))}"]
    if config.get("procPerNode") is not None:
        flags.append(f"--nproc-per-node={config['procPerNode']}")
    if config.get("maxRestarts") is not None:
        flags.append(f"--max-restarts={config['maxRestarts']}")
    flags += [f"--rdzv-backend={config.get('rdzvBackend') or DEFAULT_RDZV_BACKEND}", f"--rdzv-endpoint={endpoint}"]
    return ["torchrun", *flags, *(str(option) for option in config.get("extraOptions") or [])]


def training_container(pod_spec: dict, pod: str) -> dict:
    """The pod's one container: sidecars and init containers cannot run here."""
    containers = pod_spec.get("containers") or []
    if len(containers) != 1 or pod_spec.get("initContainers"):
        raise UnsupportedPod(
            f"{pod}: only one container can run locally, the training container (T9k's is the one named python, "
            "else the first)"
        )
    return containers[0]


class PyTorchTrainingJobModel(JobModel):
    kind = "PyTorchTrainingJob"
    exit_codes_retried = EXIT_CODE_RETRIED
    port_help = f"the rendezvous port the runner picks for T9k ({RDZV_PORT})"

    @property
    def _first_pod(self) -> str:
        _, replica_type, index = pods(self.manifest)[0]
        return pod_name(self.name, replica_type, index)

    @property
    def _port(self) -> int:
        return RDZV_PORT if self.port is None else self.port

    @property
    def rendezvous_endpoint(self) -> str:
        return f"{self._first_pod}:{self._port}"

    def pods(self) -> list[PodTemplate]:
        specs = replica_specs(self.manifest)
        command = torchrun_command(self.manifest, self.rendezvous_endpoint)
        note = f"--rdzv-endpoint={self.rendezvous_endpoint} (runner's choice: T9k does not document this)"
        templates = []
        for position, replica_type, index in pods(self.manifest):
            name = pod_name(self.name, replica_type, index)
            pod_spec = specs[position]["template"]["spec"]
            container = {**training_container(pod_spec, name), "command": command}
            templates.append(
                PodTemplate(
                    name, replica_type, index, pod_spec, container, [], specs[position]["restartPolicy"], (note,)
                )
            )
        return templates

    @property
    def warnings(self) -> list[str]:
        ignored = []
        for position, spec in enumerate(replica_specs(self.manifest)):
            container = training_container(spec["template"]["spec"], f"spec.replicaSpecs[{position}]")
            if container.get("command"):
                ignored.append(
                    f"spec.replicaSpecs[{position}].template.spec.containers[name={container.get('name')}].command "
                    "is ignored: in torchrun mode T9k runs torchrun with the container's args; drop it"
                )
        return ignored

    def describe(self) -> str:
        counts = {spec["type"]: replica_count(spec) for spec in replica_specs(self.manifest)}
        nproc = torchrun_config(self.manifest).get("procPerNode", 1)  # torchrun's default
        pods_by_type = ", ".join(f"{t} ×{n}" for t, n in counts.items())
        return f"{sum(counts.values())} pods ({pods_by_type}), torchrun --nproc-per-node={nproc} in each"

    def ports(self) -> set[int]:
        return {self._port}

    @property
    def _run_policy(self) -> dict:
        return self.spec.get("runPolicy") or {}

    @property
    def suspended(self) -> str | None:
        if ((self.spec.get("runMode") or {}).get("pause") or {}).get("enabled"):
            return "spec.runMode.pause.enabled is true, so T9k would start no pods; set it to false"
        return None

    @property
    def backoff_limit(self) -> int | None:
        return self._run_policy.get("backoffLimit", DEFAULT_BACKOFF_LIMIT)

    @property
    def active_deadline_seconds(self) -> int | None:
        return self._run_policy.get("activeDeadlineSeconds")

    def recreates_pod(self, restart_policy: str) -> bool:
        """Always: the pods' own restartPolicy is Never, so T9k restarts one by creating it again."""
        return True

    def succeeded(self, phases: list[tuple[str, str]]) -> str | None:
        """When the first pod succeeds, as T9k's docs define success."""
        return "the first pod succeeded" if phases[0][1] == "Succeeded" else None
