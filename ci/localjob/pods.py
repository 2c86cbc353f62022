"""Turn a job model's pods (kinds/: whatever its kind) into local processes: one per pod, with the
container's command, args and env as the controller makes them, the controller's env appended, and the
pod's volumes mapped to local directories.

Deliberate deviations from a cluster, all because every pod shares this machine:
- pod names (as the kind names them, under the job's subdomain if it has one, in any Service form) in
  the controller's env and in the command resolve to 127.0.0.1; so that only the pod a torchrun
  rendezvous endpoint names serves the store, as on a cluster, that pod alone gets is_host=true;
- the image is this checkout: `python` is the running interpreter, other commands (torchrun)
  come from its bin directory, and the repository root is prepended to PYTHONPATH;
- a claim is a directory shared by all pods, an emptyDir a per-pod directory, and /dev/shm
  the host's own shared memory;
- each pod is pinned to an equal share of this machine's CPUs, as CPU limits would split a node,
  so no trainer sizes its threads to every core (within its share, requests.cpu sizes them, as on
  a cluster: 1 thread with the chart's default);
- GPU pods get disjoint slices of the GPUs torch sees here (the shell's CUDA_VISIBLE_DEVICES
  picks them, if set), in pod order, as their CUDA_VISIBLE_DEVICES (the device plugin's part),
  and other pods an empty one, so they see no GPU;
- the shell's environment is inherited, but not its distributed variables, nor OMP_NUM_THREADS,
  MKL_NUM_THREADS and CUDA_VISIBLE_DEVICES, which size a process for the whole machine.

As the kubelet does, `$(VAR)` in env values is expanded against the variables before it in the
container's env, and in the command and args against its final env (the controller's included);
`$$` is a literal `$`, and a reference to an undefined variable stays as written.
"""

from __future__ import annotations

import itertools
import math
import os
import re
import shutil
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ci.localjob import torchrun
from ci.localjob.kinds.base import JobModel, UnsupportedPod
from ci.localjob.quantity import cpu_millicores

REPO = Path(__file__).resolve().parents[2]
# The trainer image's ENTRYPOINT, used when the container sets no command.
IMAGE_ENTRYPOINT = ("python", "-m", "trainer")
LOCALHOST = "127.0.0.1"
GPU_RESOURCE = "nvidia.com/gpu"
# Variables of the launching shell sized for the whole machine, which no container inherits.
_HOST_MACHINE_ENV = {"OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES"}
# Kubernetes' reference syntax: `$$` (an escaped `$`) or `$(NAME)`.
_REFERENCE = re.compile(r"\$(\$|\(([^)]*)\))")


@dataclass(frozen=True)
class LocalPod:
    name: str
    role: str  # the kind's replica type or replicated job
    index: int
    argv: tuple[str, ...]
    env: dict[str, str]  # the complete process environment
    injected_env: tuple[tuple[str, str], ...]  # what the controller appended (hosts localized)
    cwd: Path
    restart_policy: str
    mounts: tuple[tuple[str, Path], ...]  # (container path, local directory)
    cpus: tuple[int, ...] = ()  # CPUs the process may run on; () for all
    notes: tuple[str, ...] = ()  # the kind's and the runner's choices that --print-env shows


def pod_dir(run_dir: Path, pod: str) -> Path:
    """The pod's own directory: its pid file, working directory and emptyDirs."""
    return run_dir / "pods" / pod


def empty_dirs(run_dir: Path, pod: str) -> Path:
    """Where the pod's emptyDirs live; a recreated pod starts without them."""
    return pod_dir(run_dir, pod) / "volumes"


def pod_named(host: str, pod_names: set[str], namespace: str, subdomain: str = "") -> str | None:
    """The pod that `host` names, as the Services resolve it on a cluster: `<pod>`, `<pod>.<namespace>`,
    `<pod>.<namespace>.svc` or `<pod>.<namespace>.svc.cluster.local` when each pod has a headless Service of
    its own (no subdomain); the same with `.<subdomain>` after `<pod>` when they share the job's."""
    pod, _, domain = host.partition(".")
    if subdomain:
        if domain != subdomain and not domain.startswith(subdomain + "."):
            return None
        domain = domain[len(subdomain) + 1 :]
    if pod in pod_names and domain in ("", namespace, f"{namespace}.svc", f"{namespace}.svc.cluster.local"):
        return pod
    return None


def localize_host(value: str, pod_names: set[str], namespace: str, subdomain: str = "") -> str:
    """`value` with a pod/Service name (alone or as `name:port`, either after a `--flag=` or not) replaced by
    127.0.0.1."""
    prefix, sep, address = value.partition("=") if value.startswith("-") else ("", "", value)
    host, colon, port = address.partition(":")
    return prefix + sep + LOCALHOST + colon + port if pod_named(host, pod_names, namespace, subdomain) else value


def store_host_note(pod: str, store_pod: str) -> str:
    """Why the runner sets is_host: on a cluster only the pod the rendezvous endpoint names matches its address,
    so only it serves torchrun's c10d store. Here every pod's address is 127.0.0.1: each agent would take itself
    for the host, whichever bound first would serve the store, and killing that pod would end every pod's
    rendezvous."""
    return (
        f"is_host={'true' if pod == store_pod else 'false'} in {torchrun.RDZV_CONF_ENV} is the runner's: "
        f"{store_pod}, which the rendezvous endpoint names, alone serves torchrun's store, as on a cluster"
    )


def volume_mounts(pod_spec: dict, container: dict, pod: str, run_dir: Path) -> list[tuple[str, Path]]:
    """(mountPath, local dir) for each mount, longest path first so nested mounts win."""
    volumes = {v["name"]: v for v in pod_spec.get("volumes") or []}
    mounts = []
    for mount in container.get("volumeMounts") or []:
        volume = volumes.get(mount["name"])
        if volume is None:
            raise UnsupportedPod(f"{pod}: volumeMount {mount['name']} has no volume")
        if "persistentVolumeClaim" in volume:
            local = run_dir / "volumes" / volume["persistentVolumeClaim"]["claimName"]
        elif "emptyDir" in volume:
            if mount["mountPath"] == "/dev/shm":
                continue  # shared memory is the host's /dev/shm
            local = empty_dirs(run_dir, pod) / volume["name"]
        elif "hostPath" in volume:
            local = run_dir / "volumes" / f"hostpath-{volume['name']}"
        else:
            kind = next(k for k in volume if k != "name")
            raise UnsupportedPod(f"{pod}: volume {volume['name']} ({kind}) has no local equivalent")
        mounts.append((mount["mountPath"].rstrip("/") or "/", local / mount.get("subPath", "")))
    return sorted(mounts, key=lambda m: len(m[0]), reverse=True)


def map_path(value: str, mounts: list[tuple[str, Path]]) -> str:
    """Rewrite a container path (or `--flag=path`) under a mount to its local directory."""
    prefix, sep, path = value.partition("=") if value.startswith("-") else ("", "", value)
    for mount_path, local in mounts:
        if path == mount_path or path.startswith(mount_path + "/"):
            return prefix + sep + str(local) + path[len(mount_path) :]
    return value


def resolve_executable(name: str, pod: str) -> str:
    """`python` is this interpreter; other commands come from its environment, then PATH."""
    if name in ("python", "python3"):
        return sys.executable
    sibling = Path(sys.executable).parent / name
    if sibling.exists():
        return str(sibling)
    found = shutil.which(name)
    if found is None:
        raise UnsupportedPod(
            f"{pod}: command {name} is neither in {sibling.parent} nor on PATH; "
            f"use python or torchrun (the venv's), or put {name} on PATH"
        )
    return found


def expand_references(value: str, env: dict[str, str]) -> str:
    """`$(NAME)` → env[NAME] (left as written when undefined), `$$` → `$`, as Kubernetes expands."""
    return _REFERENCE.sub(lambda m: "$" if m[1] == "$" else env.get(m[2], m[0]), value)


def expand_env(env: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Each value expanded against the variables defined before it, as the kubelet does."""
    defined: dict[str, str] = {}
    expanded = []
    for name, value in env:
        defined[name] = expand_references(value, defined)
        expanded.append((name, defined[name]))
    return expanded


def container_env(container: dict, pod: str, namespace: str) -> list[tuple[str, str]]:
    if container.get("envFrom"):
        raise UnsupportedPod(f"{pod}: envFrom (ConfigMaps/Secrets) has no local equivalent; use env values")
    env = []
    for var in container.get("env") or []:
        if "valueFrom" not in var:
            env.append((var["name"], str(var.get("value", ""))))
            continue
        field = (var["valueFrom"].get("fieldRef") or {}).get("fieldPath")
        # The downward-API fields a trainer might read, with their local values.
        value = {
            "metadata.name": pod,
            "metadata.namespace": namespace,
            "spec.nodeName": "localhost",
            "status.podIP": LOCALHOST,
            "status.hostIP": LOCALHOST,
        }.get(field)
        if (resource := var["valueFrom"].get("resourceFieldRef")) and resource.get("resource") == "requests.cpu":
            value = str(downward_cpu_request(container, resource.get("divisor", "1"), pod))
        if value is None:
            raise UnsupportedPod(
                f"{pod}: env {var['name']} uses valueFrom {var['valueFrom']}, which has no local value"
            )
        env.append((var["name"], value))
    return env


def downward_cpu_request(container: dict, divisor: str, pod: str) -> int:
    """requests.cpu as the downward API gives it: in units of the divisor (1 or 1m), rounded up; the
    limit when only that is set; 0 if neither is."""

    def millicores(quantity: object):
        try:
            return cpu_millicores(quantity)
        except ValueError as error:
            raise UnsupportedPod(f"{pod}: {error}") from None

    resources = container.get("resources") or {}
    # The API server defaults a missing request to the limit.
    requested = (resources.get("requests") or {}).get("cpu", (resources.get("limits") or {}).get("cpu", 0))
    return math.ceil(millicores(requested) / millicores(divisor))


def pod_argv(
    container: dict, env: dict[str, str], mounts: list[tuple[str, Path]], pod: str, localize: Callable[[str], str]
) -> tuple[str, ...]:
    """The command and args with references expanded, then the executable found here, hosts localized and
    paths mapped."""
    command = list(container.get("command") or IMAGE_ENTRYPOINT) + list(container.get("args") or [])
    command = [expand_references(part, env) for part in command]
    return (resolve_executable(command[0], pod), *(map_path(localize(part), mounts) for part in command[1:]))


def requested_gpus(container: dict) -> int:
    return int(((container.get("resources") or {}).get("limits") or {}).get(GPU_RESOURCE, 0))


def visible_gpus() -> int:
    import torch  # only when a pod asks for GPUs; the import takes a while

    return torch.cuda.device_count()


def visible_gpu_ids(host_env: dict[str, str], count: int) -> list[str]:
    """The ids of the `count` GPUs torch sees here: the shell's CUDA_VISIBLE_DEVICES picks them, if set."""
    chosen = host_env.get("CUDA_VISIBLE_DEVICES")
    ids = [gpu.strip() for gpu in chosen.split(",")] if chosen else [str(gpu) for gpu in range(count)]
    return ids[:count]


def gpu_slices(requests: list[int], host_env: dict[str, str]) -> list[str]:
    """Each pod's CUDA_VISIBLE_DEVICES: GPUs of its own, handed out in pod order as the device plugin
    would (else every pod's cuda:0 is the same GPU), or "" for a pod that requests none."""
    total = sum(requests)
    available = visible_gpus() if total else 0
    if total > available:
        per_pod = Counter(wanted for wanted in requests if wanted)
        demand = " + ".join(f"{pods} pod{'s' * (pods > 1)} × {wanted}" for wanted, pods in per_pod.items())
        raise UnsupportedPod(
            f"{demand} {GPU_RESOURCE} = {total}, but this machine has {available} that torch can use; lower "
            'workers or gpu to fit, or add --set gpu=0 (make run RUN_FLAGS="--set gpu=0") to train on its CPUs'
        )
    ids = visible_gpu_ids(host_env, available)
    return [
        ",".join(ids[end - wanted : end]) for wanted, end in zip(requests, itertools.accumulate(requests), strict=True)
    ]


def cpu_shares(pods: int, cpus: list[int]) -> list[tuple[int, ...]]:
    """An equal share of `cpus` per pod: at least one each, reused in turn when pods outnumber CPUs."""
    per_pod = max(1, len(cpus) // pods)
    return [tuple(cpus[(pod * per_pod + k) % len(cpus)] for k in range(per_pod)) for pod in range(pods)]


def plan_pods(
    job: JobModel, run_dir: Path, namespace: str = "default", host_env: dict[str, str] | None = None
) -> list[LocalPod]:
    """One LocalPod per pod the job's controller would create, rank 0 first."""
    host_env = dict(os.environ if host_env is None else host_env)
    base_env = {
        k: v for k, v in host_env.items() if not torchrun.DISTRIBUTED_ENV.match(k) and k not in _HOST_MACHINE_ENV
    }
    templates = job.pods()
    pod_names = {pod.name for pod in templates}

    def localize(value: str) -> str:
        return localize_host(value, pod_names, namespace, job.subdomain)

    endpoint = job.rendezvous_endpoint
    store_pod = endpoint and pod_named(endpoint.rpartition(":")[0], pod_names, namespace, job.subdomain)
    gpus = gpu_slices([requested_gpus(pod.container) for pod in templates], host_env)
    shares = (
        cpu_shares(len(templates), sorted(os.sched_getaffinity(0)))
        if hasattr(os, "sched_getaffinity")
        else [()] * len(templates)
    )
    planned = []
    for pod, devices, cpus in zip(templates, gpus, shares, strict=True):
        name, container = pod.name, pod.container
        mounts = volume_mounts(pod.pod_spec, container, name, run_dir)
        own = container_env(container, name, namespace)
        # The controller appends its variables to the container's env: they come after its own in expansion too.
        pod_env = expand_env(own + [(k, localize(v)) for k, v in pod.injected_env])
        own, injected = pod_env[: len(own)], pod_env[len(own) :]
        argv = pod_argv(container, dict(pod_env), mounts, name, localize)
        env = {**base_env, "CUDA_VISIBLE_DEVICES": devices}
        env.update((k, map_path(v, mounts)) for k, v in own)
        env.update(injected)
        notes = pod.notes
        if store_pod:
            env.update([torchrun.pin_store_host(env, is_host=name == store_pod)])
            notes += (store_host_note(name, store_pod),)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
        # The image's python first, for commands a shell runs too (`sh -c "python …"`).
        env["PATH"] = os.pathsep.join(p for p in (str(Path(sys.executable).parent), env.get("PATH", "")) if p)
        if tmp := dict(mounts).get("/tmp"):
            env["TMPDIR"] = str(tmp)  # the pod's /tmp emptyDir, where torchrun and compilers write
        working_dir = container.get("workingDir")
        cwd = Path(map_path(working_dir, mounts)) if working_dir else None
        if cwd is None or not str(cwd).startswith(str(run_dir)):
            cwd = pod_dir(run_dir, name) / "workdir"  # the image's directories do not exist here
        planned.append(
            LocalPod(
                name,
                pod.role,
                pod.index,
                argv,
                env,
                tuple(injected),
                cwd,
                pod.restart_policy,
                tuple(mounts),
                cpus,
                notes,
            )
        )
    return planned
