"""Process-group setup from the training-operator's or torchrun's environment.

Three launch modes are supported:
- the training-operator's contract without torchrun: MASTER_ADDR, MASTER_PORT, WORLD_SIZE and
  RANK (the pod's replica index), one process per pod;
- torchrun, which rewrites RANK/WORLD_SIZE per process and adds LOCAL_RANK/LOCAL_WORLD_SIZE;
- no environment at all: a single process with no process group.
"""

from __future__ import annotations

import gc
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import TypeVar, cast

import torch
import torch.distributed as dist

from trainer.failures import LaunchError, PeersUnreachable

T = TypeVar("T")

BACKENDS = ("auto", "gloo", "nccl", "mpi")
# The longest single try to reach rank 0's store while it is not up yet; see _connect_store.
STORE_CONNECT_ATTEMPT_SECONDS = 5.0


# The fix for a bad rank variable, which the user rarely sets directly.
_SET_BY_LAUNCHER = (
    "The training-operator and torchrun set RANK, WORLD_SIZE and LOCAL_* themselves: don't override "
    "them in the pod spec, and when launching by hand set them consistently for every process."
)


@dataclass(frozen=True)
class DistContext:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    device: torch.device
    backend: str
    # A gloo group whose collectives wait up to the startup timeout, not the process group's short
    # one: for waits as long as a download. None for a single process, and with mpi (no timeouts).
    startup_group: dist.ProcessGroup | None = None

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    def all_reduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """Sum `tensor` over all ranks in place (a no-op for a single process)."""
        if self.distributed:
            dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor

    def all_true(self, flag: bool, patient: bool = False) -> bool:
        """True only if `flag` is true on every rank; `patient` waits up to the startup timeout."""
        group = self.startup_group if patient else None
        value = torch.tensor([1.0 if flag else 0.0], device="cpu" if group is not None else self.device)
        if self.distributed:
            dist.all_reduce(value, op=dist.ReduceOp.MIN, group=group)
        return bool(value.item())

    def gather(self, obj: object) -> list:
        """Every rank's `obj` on every rank, in rank order (pickled; for small objects)."""
        if not self.distributed:
            return [obj]
        gathered: list[object] = [None] * self.world_size
        dist.all_gather_object(gathered, obj)
        return gathered

    def broadcast_from_main(self, obj: T) -> T:
        """Rank 0's `obj` on every rank (pickled; used for small state such as checkpoints)."""
        if not self.distributed:
            return obj
        holder = [obj]
        dist.broadcast_object_list(holder, src=0, device=self.device)
        return holder[0]

    @contextmanager
    def main_failure_stops_all(self, what: str, *kinds: type[Exception]) -> Iterator[None]:
        """Run the block, whose work is rank 0's, then raise an error of `kinds` it raised there on
        every rank: elsewhere as the same kind of error, saying "rank 0 `what`: …". So all ranks stop
        together with one exit code, not the others at their next collective as for a lost peer."""
        failure = None
        try:
            yield
        except kinds as error:
            failure = error
        failure_on_main = self.broadcast_from_main(failure)
        if failure is not None:
            raise failure
        if failure_on_main is not None:
            raise type(failure_on_main)(f"rank 0 {what}: {failure_on_main}")


@dataclass(frozen=True)
class LaunchEnv:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    master_addr: str = ""  # set when world_size > 1
    master_port: int = 0


def read_launch_env(env: dict[str, str] | None = None) -> LaunchEnv:
    """Rank and world size from the environment, validated with actionable messages."""
    env = dict(os.environ if env is None else env)
    world_size = _int_var(env, "WORLD_SIZE", default=1, minimum=1)
    if world_size > 1 and not env.get("RANK"):
        # Defaulting to 0 would make every process rank 0 and fail later on a busy port or a timeout.
        raise LaunchError(f"WORLD_SIZE={world_size} but RANK is not set. {_SET_BY_LAUNCHER}")
    rank = _int_var(env, "RANK", default=0, minimum=0)
    if rank >= world_size:
        raise LaunchError(f"RANK={rank} must be smaller than WORLD_SIZE={world_size}. {_SET_BY_LAUNCHER}")
    under_torchrun = "LOCAL_RANK" in env
    local_rank = _int_var(env, "LOCAL_RANK", default=0, minimum=0)
    local_world_size = _int_var(env, "LOCAL_WORLD_SIZE", default=1, minimum=1)
    nproc = env.get("PET_NPROC_PER_NODE", "")
    if not under_torchrun and nproc.isdigit() and int(nproc) > 1:
        raise LaunchError(
            f"nprocPerNode is {nproc}, so WORLD_SIZE={world_size} counts {nproc} processes per "
            "pod, but this process was not started by torchrun. Start the trainer with torchrun "
            "(chart value torchrun.enabled=true) or set nprocPerNode to 1."
        )
    nnodes = env.get("PET_NNODES", "")
    if not under_torchrun and "WORLD_SIZE" not in env and nnodes.rpartition(":")[2] not in ("", "1"):
        # Each such pod would otherwise train alone as rank 0, all writing the same outputs.
        raise LaunchError(
            f"PET_NNODES={nnodes} makes this pod one of several, but WORLD_SIZE and RANK are not set: the "
            "training-operator sets them only for a PyTorchJob with a Master replica. Add a Master, or start "
            "the trainer with torchrun (chart value torchrun.enabled=true), which reads PET_NNODES."
        )
    if world_size == 1:
        return LaunchEnv(rank, world_size, local_rank, local_world_size)
    missing = [name for name in ("MASTER_ADDR", "MASTER_PORT") if not env.get(name)]
    if missing:
        raise LaunchError(
            f"WORLD_SIZE={world_size} but {' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set; the "
            "training-operator sets both, or use torchrun for local multi-process runs."
        )
    master_port = _int_var(env, "MASTER_PORT", default=0, minimum=1, maximum=65535)
    return LaunchEnv(rank, world_size, local_rank, local_world_size, env["MASTER_ADDR"], master_port)


def _int_var(env: dict[str, str], name: str, default: int, minimum: int, maximum: int | None = None) -> int:
    raw = env.get(name, "")
    if raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise LaunchError(f"{name}={raw!r} is not an integer. {_SET_BY_LAUNCHER}") from None
    if value < minimum:
        raise LaunchError(f"{name}={value} must be at least {minimum}")
    if maximum is not None and value > maximum:
        raise LaunchError(f"{name}={value} must be at most {maximum}")
    return value


def resolve_backend(requested: str, use_cuda: bool) -> str:
    """auto means nccl on CUDA and gloo otherwise; nccl without a GPU, and mpi without a PyTorch
    built with MPI, are refused, in a single process too."""
    if requested == "auto":
        return "nccl" if use_cuda else "gloo"
    if requested == "nccl" and not use_cuda:
        raise LaunchError(
            "--backend nccl needs a CUDA GPU, but none is available to this process"
            f"{_cuda_build_hint()}. Use --backend gloo or --backend auto on CPU."
        )
    if requested == "mpi" and not dist.is_mpi_available():
        raise LaunchError(
            "--backend mpi needs a PyTorch built with MPI, and this one is not (the official wheels never "
            "are). Use --backend gloo (or auto) instead."
        )
    return requested


def _cuda_build_hint() -> str:
    if torch.version.cuda is None:
        return "; this torch is a CPU build"
    return (
        f"; this torch is built for CUDA {torch.version.cuda}, so the node's driver must support "
        "that release, and the GPU's architecture must be in torch.cuda.get_arch_list()"
    )


def cuda_device(local_rank: int, visible_gpus: int) -> torch.device:
    """The GPU of this pod that LOCAL_RANK selects; more processes than GPUs is refused, since
    CUDA would only say "invalid device ordinal" and the pod would be retried."""
    if local_rank >= visible_gpus:
        raise LaunchError(
            f"LOCAL_RANK={local_rank} needs GPU {local_rank}, but this pod sees {visible_gpus}. Run at "
            "most one process per GPU (chart: nprocPerNode no larger than gpu), request more GPUs, "
            "or pass --no-cuda."
        )
    return torch.device("cuda", local_rank)


def init(requested_backend: str, use_cuda: bool, timeout_seconds: float, startup_seconds: float) -> DistContext:
    """Join the process group. Collectives time out after `timeout_seconds`, so a dead peer fails
    the pod instead of hanging it; joining may take up to `startup_seconds`, as pods start apart
    (image pulls, scheduling)."""
    launch = read_launch_env()
    backend = resolve_backend(requested_backend, use_cuda)
    if use_cuda:
        device = cuda_device(launch.local_rank, torch.cuda.device_count())
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    if launch.world_size == 1:
        return DistContext(launch.rank, 1, launch.local_rank, launch.local_world_size, device, backend)
    timeout, startup = timedelta(seconds=timeout_seconds), timedelta(seconds=max(startup_seconds, timeout_seconds))
    # torchrun (which always sets this variable) has gathered every node in its own rendezvous
    # before starting the trainer, so torch's env:// store stays; mpi uses none.
    own_store = backend != "mpi" and "TORCHELASTIC_USE_AGENT_STORE" not in os.environ
    store = _rendezvous_store(launch, startup) if own_store else None
    dist.init_process_group(backend, rank=launch.rank, world_size=launch.world_size, timeout=timeout, store=store)
    if store is not None:
        store.set_timeout(timeout)
    check_group_matches(launch, dist.get_rank(), dist.get_world_size())
    # A gloo group needs the default group's store, which mpi lacks.
    # Every rank is in it, so new_group returns the group (not the non-member marker).
    startup_group = (
        None if backend == "mpi" else cast(dist.ProcessGroup, dist.new_group(backend="gloo", timeout=startup))
    )
    return DistContext(
        launch.rank, launch.world_size, launch.local_rank, launch.local_world_size, device, backend, startup_group
    )


def _rendezvous_store(launch: LaunchEnv, timeout: timedelta) -> dist.TCPStore:
    """The store env:// would make from MASTER_ADDR/MASTER_PORT, once every rank has joined it.

    Every rank waits up to `timeout` for rank 0 to listen and for all the others to check in, so the
    process group's own joining, bound by the short collective timeout, finds them all there. A key
    per rank, not a count, so that a restarted rank is not counted twice.
    """
    deadline = time.monotonic() + timeout.total_seconds()
    try:
        store = _connect_store(launch, deadline)
        store.set(f"trainer/joined/{launch.rank}", "1")
        store.wait(
            [f"trainer/joined/{rank}" for rank in range(launch.world_size)],
            timedelta(seconds=max(deadline - time.monotonic(), 1.0)),
        )
        store.set_timeout(timeout)
    except (dist.DistError, OSError) as error:
        waited = timeout.total_seconds() - (deadline - time.monotonic())
        reason = str(error).strip().splitlines()[0] or type(error).__name__
        raise PeersUnreachable(
            f"rank {launch.rank} of {launch.world_size} could not meet the others at MASTER_ADDR={launch.master_addr} "
            f"MASTER_PORT={launch.master_port} (waiting up to {timeout.total_seconds():.0f} s, the longer of "
            f"--startup-timeout and --pg-timeout; gave up after {waited:.0f} s): {reason}"
        ) from error
    return store


def _connect_store(launch: LaunchEnv, deadline: float) -> dist.TCPStore:
    """Rank 0 listens; the others connect to it once it answers, by the monotonic `deadline`.

    The others first wait for the port with plain sockets: a TCPStore client checks its timeout only
    between tries that may each take that long (about twice the time in all), and logs a C++ stack
    trace for every failed try.
    """
    if launch.rank != 0:
        _wait_for_listener(launch.master_addr, launch.master_port, deadline)
    return dist.TCPStore(
        launch.master_addr,
        launch.master_port,
        launch.world_size,
        is_master=launch.rank == 0,
        timeout=timedelta(seconds=max(deadline - time.monotonic(), 1.0)),
        wait_for_workers=False,
    )


def _wait_for_listener(host: str, port: int, deadline: float) -> None:
    """Return once `host:port` accepts a connection; OSError (the last try's) at the deadline. The
    name may not resolve yet either: the Master's Service exists before its pod has an address."""
    while True:
        try:
            socket.create_connection(
                (host, port), timeout=min(max(deadline - time.monotonic(), 0.1), STORE_CONNECT_ATTEMPT_SECONDS)
            ).close()
            return
        except OSError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(min(1.0, max(deadline - time.monotonic(), 0.0)))


def check_group_matches(launch: LaunchEnv, group_rank: int, group_size: int) -> None:
    """Refuse a process group whose ranks differ from RANK/WORLD_SIZE, which sharding and rank 0's
    duties rely on. Only mpi can differ: MPI assigns ranks itself and ignores the ones given."""
    if (group_rank, group_size) != (launch.rank, launch.world_size):
        raise LaunchError(
            f"the process group made this rank {group_rank} of {group_size}, but RANK={launch.rank} "
            f"and WORLD_SIZE={launch.world_size}. With --backend mpi, start every process with mpirun "
            "and set RANK and WORLD_SIZE to the ranks it assigns, or use --backend gloo (or auto)."
        )


def check_same_settings(ctx: DistContext, settings: dict[str, object]) -> None:
    """Refuse, on every rank alike, a job whose ranks were started with different `settings`.

    A PyTorchJob's Master and Workers have pod templates of their own. Ranks that differ in what
    shapes training drift apart silently (DDP never re-syncs parameters), and ranks that differ in
    which collectives they take (a checkpoint directory, the log interval) hang until --pg-timeout.
    """
    gathered = ctx.gather(settings)
    differences = [
        f"{name} is {gathered[0].get(name)} on rank 0 but {theirs.get(name)} on rank {rank}"
        for name in settings
        for rank, theirs in enumerate(gathered)
        if theirs.get(name) != gathered[0].get(name)
    ]
    if differences:
        raise LaunchError(
            f"the ranks were started with different settings: {'; '.join(differences)}. Every process of the "
            "job must get the same trainer flags (the chart gives the Master and the Workers the same ones): "
            "start them alike."
        )


def shutdown(ctx: DistContext) -> None:
    if ctx.distributed and dist.is_initialized():
        # Whatever still holds the group (a DDP wrapper kept by a reference cycle) is freed before
        # it, not during interpreter exit, where gloo's threads have aborted a process at exit
        # ("terminate called without an active exception").
        gc.collect()
        dist.destroy_process_group()
