import os
import re
import time

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from tests.support.procs import free_port
from trainer.distributed import (
    check_group_matches,
    cuda_device,
    init,
    read_launch_env,
    resolve_backend,
    shutdown,
)
from trainer.failures import LaunchError
from trainer.runtime import CPU_REQUEST_ENV, cpu_quota, omp_threads_set_by_user, thread_count


def test_no_environment_means_one_process():
    launch = read_launch_env({})
    assert (launch.rank, launch.world_size, launch.local_rank, launch.local_world_size) == (0, 1, 0, 1)


def test_operator_contract_for_a_worker_pod():
    env = {
        "MASTER_ADDR": "job-master-0",
        "MASTER_PORT": "23456",
        "WORLD_SIZE": "4",
        "RANK": "2",
        "PET_NPROC_PER_NODE": "auto",
        "PET_NNODES": "4",
        "PYTHONUNBUFFERED": "1",
    }
    launch = read_launch_env(env)
    assert (launch.rank, launch.world_size, launch.local_rank) == (2, 4, 0)


def test_torchrun_environment_supplies_local_ranks():
    env = {
        "MASTER_ADDR": "a",
        "MASTER_PORT": "1",
        "WORLD_SIZE": "16",
        "RANK": "9",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "4",
        "PET_NPROC_PER_NODE": "4",
    }
    launch = read_launch_env(env)
    assert (launch.rank, launch.world_size, launch.local_rank, launch.local_world_size) == (9, 16, 1, 4)


def test_nproc_per_node_without_torchrun_is_refused_with_the_fix():
    env = {"MASTER_ADDR": "a", "MASTER_PORT": "1", "WORLD_SIZE": "8", "RANK": "1", "PET_NPROC_PER_NODE": "4"}
    with pytest.raises(LaunchError, match="torchrun.enabled=true"):
        read_launch_env(env)


def test_a_worker_only_job_without_torchrun_is_refused_with_the_fix():
    """Without a Master the operator sets no WORLD_SIZE or RANK, only PET_NNODES: each pod would train alone."""
    for nnodes in ("2", "1:3"):
        with pytest.raises(LaunchError, match=f"PET_NNODES={nnodes} makes this pod one of several.*Add a Master"):
            read_launch_env({"PET_NNODES": nnodes, "PET_NPROC_PER_NODE": "1"})
    assert read_launch_env({"PET_NNODES": "1"}).world_size == 1
    assert read_launch_env({"PET_NNODES": "2", "LOCAL_RANK": "0", "WORLD_SIZE": "1"}).world_size == 1, "torchrun's own"


@pytest.mark.parametrize(
    "env,message",
    [
        ({"WORLD_SIZE": "2", "RANK": "2", "MASTER_ADDR": "a", "MASTER_PORT": "1"}, "RANK=2 must be smaller"),
        ({"WORLD_SIZE": "two"}, "WORLD_SIZE='two' is not an integer"),
        ({"WORLD_SIZE": "0"}, "WORLD_SIZE=0 must be at least 1"),
        # Else a TypeError from the store, and exit 138: retried for a setting no restart fixes.
        (
            {"WORLD_SIZE": "2", "RANK": "1", "MASTER_ADDR": "a", "MASTER_PORT": "70000"},
            "MASTER_PORT=70000 must be at most 65535",
        ),
        ({"WORLD_SIZE": "2", "RANK": "0"}, "MASTER_ADDR and MASTER_PORT are not set"),
    ],
)
def test_bad_environment_is_named(env, message):
    with pytest.raises(LaunchError, match=message):
        read_launch_env(env)


@pytest.mark.parametrize(
    "env",
    [
        {"WORLD_SIZE": "2", "RANK": "2", "MASTER_ADDR": "a", "MASTER_PORT": "1"},
        {"WORLD_SIZE": "2", "MASTER_ADDR": "a", "MASTER_PORT": "1"},
        {"LOCAL_RANK": "first"},
    ],
)
def test_bad_rank_variables_say_who_sets_them(env):
    with pytest.raises(LaunchError, match="training-operator and torchrun set RANK.*don't override them"):
        read_launch_env(env)


def test_backend_auto_and_nccl_without_gpu():
    assert resolve_backend("auto", use_cuda=False) == "gloo"
    assert resolve_backend("auto", use_cuda=True) == "nccl"
    assert resolve_backend("gloo", use_cuda=True) == "gloo"
    with pytest.raises(LaunchError, match="--backend nccl needs a CUDA GPU"):
        resolve_backend("nccl", use_cuda=False)


def test_nccl_without_gpu_names_the_cuda_release_the_driver_must_support(monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    with pytest.raises(LaunchError, match="built for CUDA 13.0, so the node's driver must support"):
        resolve_backend("nccl", use_cuda=False)
    monkeypatch.setattr(torch.version, "cuda", None)
    with pytest.raises(LaunchError, match="this torch is a CPU build"):
        resolve_backend("nccl", use_cuda=False)


def test_each_local_rank_gets_its_own_gpu_and_no_more_processes_than_gpus():
    assert cuda_device(1, visible_gpus=2) == torch.device("cuda", 1)
    with pytest.raises(
        LaunchError, match="LOCAL_RANK=2 needs GPU 2, but this pod sees 2.*nprocPerNode no larger than gpu"
    ):
        cuda_device(2, visible_gpus=2)


@pytest.mark.skipif(dist.is_mpi_available(), reason="this PyTorch has MPI, so mpi would start")
@pytest.mark.parametrize("world_size", ["1", "2"], ids=["single-process", "distributed"])
def test_mpi_backend_without_mpi_support_is_a_launch_error_with_the_fix(monkeypatch, world_size):
    """A single process would otherwise say it uses mpi, and train without it."""
    for name, value in {"WORLD_SIZE": world_size, "RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(LaunchError, match="--backend mpi needs a PyTorch built with MPI.* Use --backend gloo"):
        init("mpi", use_cuda=False, timeout_seconds=5, startup_seconds=5)


def test_a_process_group_with_other_ranks_than_the_env_is_refused():
    """MPI assigns ranks itself: pods started without mpirun would each be rank 0 of 1."""
    launch = read_launch_env({"WORLD_SIZE": "2", "RANK": "1", "MASTER_ADDR": "mnist-master-0", "MASTER_PORT": "23456"})
    check_group_matches(launch, 1, 2)
    with pytest.raises(LaunchError, match=r"rank 0 of 1, but RANK=1 and WORLD_SIZE=2\. With --backend mpi"):
        check_group_matches(launch, 0, 1)


def test_cgroup_v2_quota(tmp_path):
    (tmp_path / "cpu.max").write_text("250000 100000\n")
    assert cpu_quota(tmp_path) == 2.5
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert cpu_quota(tmp_path) is None


def test_cgroup_v1_quota(tmp_path):
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("150000\n")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert cpu_quota(tmp_path) == 1.5
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    assert cpu_quota(tmp_path) is None


def test_threads_are_the_quota_divided_by_local_processes(tmp_path, monkeypatch):
    monkeypatch.setattr("trainer.runtime.os.sched_getaffinity", lambda pid: set(range(64)))
    (tmp_path / "cpu.max").write_text("800000 100000\n")
    assert thread_count(1, tmp_path) == 8
    assert thread_count(4, tmp_path) == 2
    assert thread_count(16, tmp_path) == 1  # never zero
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert thread_count(2, tmp_path, env={}) == 32


def test_without_a_cpu_limit_threads_follow_the_cpu_request(tmp_path, monkeypatch):
    """Two pods without a limit on one node (a ReadWriteOnce volume puts them there) would each run a
    thread per core; the chart passes requests.cpu, which the quota still overrides."""
    monkeypatch.setattr("trainer.runtime.os.sched_getaffinity", lambda pid: set(range(64)))
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert thread_count(1, tmp_path, env={CPU_REQUEST_ENV: "1000"}) == 1
    assert thread_count(1, tmp_path, env={CPU_REQUEST_ENV: "2500"}) == 2
    assert thread_count(2, tmp_path, env={CPU_REQUEST_ENV: "8000"}) == 4
    assert thread_count(1, tmp_path, env={CPU_REQUEST_ENV: "500"}) == 1  # never zero
    assert thread_count(1, tmp_path, env={CPU_REQUEST_ENV: "0"}) == 64, "0: the pod requested no CPU"
    (tmp_path / "cpu.max").write_text("400000 100000\n")
    assert thread_count(1, tmp_path, env={CPU_REQUEST_ENV: "1000"}) == 4, "a limit is what the pod may use"


@pytest.mark.parametrize("value", ["2.5", "500m", "-1"])
def test_a_cpu_request_that_is_not_millicores_is_refused(tmp_path, value):
    """Only a user's own env entry can set it so; ignoring it would size the threads to the whole node."""
    (tmp_path / "cpu.max").write_text("max 100000\n")
    with pytest.raises(
        LaunchError, match=re.escape(f"{CPU_REQUEST_ENV}={value!r} is not a whole number of millicores")
    ):
        thread_count(1, tmp_path, env={CPU_REQUEST_ENV: value})


@pytest.mark.parametrize(
    "env,local_world_size,by_user",
    [
        ({}, 1, False),
        ({"OMP_NUM_THREADS": "1"}, 1, True),
        ({"OMP_NUM_THREADS": "1", "TORCHELASTIC_RUN_ID": "x"}, 2, False),  # torchrun's default
        ({"OMP_NUM_THREADS": "1", "TORCHELASTIC_RUN_ID": "x"}, 1, True),  # torchrun sets none for one process
        ({"OMP_NUM_THREADS": "3", "TORCHELASTIC_RUN_ID": "x"}, 2, True),
        ({"OMP_NUM_THREADS": "1", "LOCAL_WORLD_SIZE": "2"}, 2, True),  # not torchrun: the user's 1
    ],
)
def test_torchruns_default_omp_threads_do_not_override_the_quota(env, local_world_size, by_user):
    assert omp_threads_set_by_user(env, local_world_size) is by_user


def _wait_for_a_slow_rank(rank: int, port: int, out_dir) -> None:
    """Rank 2 joins 3 s late and rank 0 then "downloads" for 3 s; the collectives' timeout is 1 s.
    Three ranks, so that an early worker (rank 1) must wait for a late one too, not only rank 0."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="3", RANK=str(rank))
    if rank == 2:
        time.sleep(3)
    ctx = init("gloo", use_cuda=False, timeout_seconds=1, startup_seconds=60)
    if rank == 0:
        time.sleep(3)
    agreed = ctx.all_true(True, patient=True)
    (out_dir / f"rank{rank}").write_text(str(agreed))
    shutdown(ctx)


def test_startup_and_patient_waits_outlast_the_collective_timeout(tmp_path):
    """Pods start minutes apart (image pulls), and peers wait out rank 0's download; neither may
    be cut short by --pg-timeout, which exists to fail a dead peer fast."""
    mp.spawn(_wait_for_a_slow_rank, args=(free_port(), tmp_path), nprocs=3, join=True)
    assert [(tmp_path / f"rank{rank}").read_text() for rank in range(3)] == ["True"] * 3
