import platform
import subprocess
import sys

import pytest
import torch

from tests.support.paths import REPO
from trainer import runtime
from trainer.failures import LaunchError
from trainer.runtime import autocast_for, configure_device, missing_compiler


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt tuning is glibc-only")
def test_heap_tuning_applies_on_glibc():
    # In a child, so the test session's own allocator keeps its defaults.
    probe = (
        "from trainer.runtime import retain_freed_memory; raise SystemExit(0 if retain_freed_memory() is True else 3)"
    )
    assert subprocess.run([sys.executable, "-c", probe], cwd=REPO).returncode == 0


@pytest.fixture
def heap_tuning_calls(monkeypatch):
    calls = []
    monkeypatch.setattr(runtime, "retain_freed_memory", lambda: calls.append(1))
    # Saved and restored by hand: torch.backends.cuda.matmul's attributes are computed, which
    # monkeypatch cannot restore.
    flags = [
        (torch.backends.cuda.matmul, "allow_tf32"),
        (torch.backends.cudnn, "allow_tf32"),
        (torch.backends.cudnn, "benchmark"),
    ]
    saved = [getattr(module, flag) for module, flag in flags]
    for module, flag in flags:
        setattr(module, flag, False)
    yield calls
    for (module, flag), value in zip(flags, saved, strict=True):
        setattr(module, flag, value)


def test_cpu_runs_keep_freed_memory_and_leave_cuda_settings_alone(heap_tuning_calls):
    configure_device(torch.device("cpu"))
    assert heap_tuning_calls == [1]
    assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
    assert not torch.backends.cudnn.benchmark


def test_gpu_runs_return_freed_host_memory_and_use_tf32(heap_tuning_calls):
    # The dataset's host copies are freed once it is on the GPU; a heap that keeps them would
    # hold that memory against the pod's limit for the whole run.
    configure_device(torch.device("cuda", 0))
    assert heap_tuning_calls == []
    assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
    assert torch.backends.cudnn.benchmark


@pytest.mark.parametrize("native", [True, False])
def test_native_bf16_means_bf16_hardware_not_emulation(monkeypatch, native):
    # A T4 (sm_75) reports bf16 as supported when emulation counts; it has no bf16 convolutions.
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: including_emulation or native)
    assert runtime.native_bf16(torch.device("cuda", 0)) is native
    # AVX-512 alone (Skylake) converts to and from bf16 but has no bf16 dot products.
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: native)
    assert runtime.native_bf16(torch.device("cpu")) is native


@pytest.mark.parametrize(
    "device,requested,hardware,resolved",
    [
        ("cuda", "auto", True, "bf16"),
        ("cuda", "auto", False, "fp32"),
        ("cuda", "fp32", True, "fp32"),
        ("cuda", "bf16", True, "bf16"),
        ("cpu", "auto", True, "fp32"),  # CPU nodes differ: auto must not make the numbers depend on the node
        ("cpu", "fp32", False, "fp32"),
        ("cpu", "bf16", True, "bf16"),
    ],
)
def test_precision_resolves_by_request_and_hardware(monkeypatch, device, requested, hardware, resolved):
    monkeypatch.setattr(runtime, "native_bf16", lambda _: hardware)
    assert runtime.resolve_precision(requested, torch.device(device)) == resolved


@pytest.mark.parametrize("device,hardware", [("cpu", "CPU"), ("cuda", "GPU")])
def test_bf16_without_bf16_hardware_is_refused(monkeypatch, device, hardware):
    monkeypatch.setattr(runtime, "native_bf16", lambda _: False)
    with pytest.raises(LaunchError, match=f"--precision bf16 needs bf16 hardware, which this node's {hardware} lacks"):
        runtime.resolve_precision("bf16", torch.device(device))


@pytest.mark.filterwarnings("ignore:CUDA is not available:UserWarning")  # no GPU here
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_bf16_autocasts_on_the_model_device_and_fp32_does_not(device):
    context = autocast_for(torch.device(device), "bf16")
    assert isinstance(context, torch.autocast) and (context.device, context.fast_dtype) == (device, torch.bfloat16)
    assert not isinstance(autocast_for(torch.device(device), "fp32"), torch.autocast)


def test_compile_finds_the_compiler_each_device_needs(tmp_path):
    for name in ("clang", "c++-14"):
        (tmp_path / name).write_text("#!/bin/sh\n")
        (tmp_path / name).chmod(0o755)
    path = {"PATH": str(tmp_path)}
    assert missing_compiler(torch.device("cuda", 0), path) is None  # Triton takes clang when gcc is absent
    assert missing_compiler(torch.device("cpu"), path) == "a C++ compiler for Inductor (g++, or set CXX)"
    assert missing_compiler(torch.device("cpu"), {**path, "CXX": "c++-14"}) is None
    assert missing_compiler(torch.device("cuda", 0), {**path, "CC": "gcc-12"}) == (
        "a C compiler for Triton (gcc or clang, or set CC)"
    )
