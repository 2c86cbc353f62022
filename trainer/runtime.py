"""How the process runs on its device: thread counts sized to the container, a heap that keeps
memory on CPU, TF32 and cuDNN autotuning on GPU, the precision (bf16 autocast), and what
--compile needs."""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import os
import shutil
from collections.abc import Mapping
from contextlib import nullcontext
from pathlib import Path

import torch

from trainer.failures import LaunchError

CGROUP_ROOT = Path("/sys/fs/cgroup")
# The container's requests.cpu in millicores, which the chart passes through the downward API: the
# one CPU figure a pod without a CPU limit (and so without a quota) has.
CPU_REQUEST_ENV = "TRAINER_CPU_REQUEST_MILLICORES"
# glibc mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4


def cpu_quota(cgroup_root: Path = CGROUP_ROOT) -> float | None:
    """CPUs allowed by the container's CFS quota (cgroup v2 or v1), or None when unlimited."""
    v2 = cgroup_root / "cpu.max"
    if v2.exists():
        quota, _, period = v2.read_text().strip().partition(" ")
        if quota == "max":
            return None
        return int(quota) / int(period or 100_000)
    v1_quota = cgroup_root / "cpu" / "cpu.cfs_quota_us"
    v1_period = cgroup_root / "cpu" / "cpu.cfs_period_us"
    if v1_quota.exists() and v1_period.exists():
        quota_us = int(v1_quota.read_text())
        return None if quota_us <= 0 else quota_us / int(v1_period.read_text())
    return None


def cpu_request(env: Mapping[str, str]) -> float | None:
    """CPUs the pod requested (CPU_REQUEST_ENV), or None when it is unset or 0 (no request)."""
    millicores = env.get(CPU_REQUEST_ENV, "")
    if millicores and not millicores.isdigit():
        # Only a user's own env entry can get here; ignoring it would give every core of the node.
        raise LaunchError(
            f"{CPU_REQUEST_ENV}={millicores!r} is not a whole number of millicores (the chart sets "
            "it from requests.cpu); drop that env entry, or set it to e.g. 2500 for 2.5 CPUs"
        )
    return int(millicores) / 1000 if millicores and int(millicores) > 0 else None


def thread_count(local_world_size: int, cgroup_root: Path = CGROUP_ROOT, env: Mapping[str, str] | None = None) -> int:
    """Intra-op threads per process: usable CPUs over local processes. Usable are the CPUs of the
    affinity mask, capped by the CFS quota (limits.cpu), or without one by requests.cpu.

    PyTorch otherwise sizes its pool from the host's cores, not the pod's: a throttled pod runs many
    times slower, and pods without a limit that share a node each run a thread per core.
    """
    cpus = len(os.sched_getaffinity(0))
    budget = cpu_quota(cgroup_root)
    if budget is None:
        budget = cpu_request(os.environ if env is None else env)
    if budget is not None:
        cpus = min(cpus, max(1, math.floor(budget)))
    return max(1, cpus // local_world_size)


def configure_threads(requested: int, local_world_size: int) -> int:
    """Apply --threads, else respect the user's OMP_NUM_THREADS, else size from the CPU quota or
    request (thread_count)."""
    if requested > 0:
        threads = requested
    elif omp_threads_set_by_user(os.environ, local_world_size):
        threads = torch.get_num_threads()
    else:
        threads = thread_count(local_world_size)
    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass  # already fixed by earlier parallel work in this process; harmless
    return threads


def omp_threads_set_by_user(env: Mapping[str, str], local_world_size: int) -> bool:
    """Whether OMP_NUM_THREADS is the user's choice rather than torchrun's default.

    torchrun with several local processes sets OMP_NUM_THREADS=1 when it is unset, and its
    children cannot tell that from a user's 1. So under torchrun (TORCHELASTIC_RUN_ID) a 1 counts
    as the default; --threads 1 still forces one thread.
    """
    value = env.get("OMP_NUM_THREADS", "")
    torchrun_default = value == "1" and "TORCHELASTIC_RUN_ID" in env and local_world_size > 1
    return value != "" and not torchrun_default


def retain_freed_memory() -> bool:
    """Keep freed blocks in glibc's heap instead of returning them to the kernel.

    Every training step frees and re-allocates the same multi-megabyte activations; by default
    glibc serves those with mmap and unmaps them on free, so each step page-faults them back in
    (measured: about 20% of CPU step time for this model). Returns False where this is not glibc.
    """
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))


def configure_device(device: torch.device) -> None:
    """Tune the process for the device the model trains on."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        torch.backends.cudnn.benchmark = True  # static shapes: pick the fastest kernels once
    else:
        # Not on GPU runs: nothing is freed and re-allocated each step there, and freed host memory
        # would stay in the process's for good. Call this once the data is loaded, for that reason.
        retain_freed_memory()


PRECISIONS = ("auto", "fp32", "bf16")


def native_bf16(device: torch.device) -> bool:
    """Whether `device` computes in bf16 natively: GPUs from Ampere on, x86 CPUs with AVX512_BF16
    (AMX CPUs have it too). Elsewhere bf16 is emulated and slower than fp32 (a T4 also has no bf16
    cuDNN convolutions)."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported(including_emulation=False)
    return torch.cpu._is_avx512_bf16_supported()


def resolve_precision(requested: str, device: torch.device) -> str:
    """The precision the model runs in, fp32 or bf16 (autocast), for --precision `requested`.

    auto takes bf16 on GPUs with bf16 hardware only: CPU nodes of one pool differ, and a job's
    numbers should not depend on the node its pods land on. bf16 without the hardware is refused.
    """
    if requested == "auto":
        return "bf16" if device.type == "cuda" and native_bf16(device) else "fp32"
    if requested == "bf16" and not native_bf16(device):
        hardware = "GPU" if device.type == "cuda" else "CPU"
        raise LaunchError(
            f"--precision bf16 needs bf16 hardware, which this node's {hardware} lacks: there bf16 is emulated, "
            "slower than fp32 (GPUs have it from Ampere on, x86 CPUs with AVX512_BF16). Use --precision auto "
            "or fp32, or schedule the pods onto such nodes."
        )
    return requested


def autocast_for(device: torch.device, precision: str):
    """The context the model runs in for `precision` (resolve_precision's fp32 or bf16).

    Without autocast's cache of bf16 weights: each weight is used once a forward, so it saves
    nothing here, and a CUDA graph's capture (--cuda-graphs) must not keep its casts."""
    if precision != "bf16":
        return nullcontext()
    return torch.autocast(device.type, dtype=torch.bfloat16, cache_enabled=False)


def missing_compiler(device: torch.device, env: Mapping[str, str] | None = None) -> str | None:
    """What torch.compile lacks to build kernels for `device`, or None when a compiler is there:
    Inductor's C++ compiler on CPU, Triton's C compiler on GPU (looked up as they look)."""
    env = os.environ if env is None else env
    candidates: tuple[str, ...]
    if device.type == "cuda":
        variable, candidates, what = "CC", ("gcc", "clang"), "a C compiler for Triton (gcc or clang, or set CC)"
    else:
        variable, candidates, what = "CXX", ("g++",), "a C++ compiler for Inductor (g++, or set CXX)"
    if variable in env:
        candidates = (env[variable],)
    path = env.get("PATH", os.defpath)
    return None if any(shutil.which(name, path=path) for name in candidates) else what
