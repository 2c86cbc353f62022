"""Real multi-process gloo runs: the operator's env contract, torchrun, kill-and-resume."""

import gc
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel

from tests.support.idx import write_idx_dataset
from tests.support.procs import free_port, run_trainer, start_pods, trainer_env, wait_all
from trainer import cli
from trainer.checkpoint import FORMAT_VERSION
from trainer.data import load
from trainer.failures import EXIT_PERMANENT, EXIT_RETRYABLE
from trainer.runtime import native_bf16

pytestmark = pytest.mark.slow

SMALL = [
    "--dataset",
    "synthetic",
    "--limit-train",
    "2048",
    "--limit-test",
    "500",
    "--threads",
    "1",
    "--lr",
    "0.05",
    "--momentum",
    "0.9",
    "--pg-timeout",
    "60",
]


def _losses(log: str) -> list[float]:
    return [float(x) for x in re.findall(r"^Train Epoch: .*\tloss=([0-9.]+)$", log, re.MULTILINE)]


def _weights(path):
    return torch.load(path, map_location="cpu", weights_only=True)


def assert_same_weights(expected_path, actual_path):
    expected, actual = _weights(expected_path), _weights(actual_path)
    assert expected and expected.keys() == actual.keys(), (sorted(expected), sorted(actual))
    for key in expected:
        assert torch.equal(expected[key], actual[key]), key


def _reference_run_then_pods_once(args, tmp_path, started) -> tuple:
    """Runs `args` on 2 pods to the end in tmp_path/reference, then starts them again in
    tmp_path/interrupted and returns (that directory, its port, its pods) once `started(directory)`."""
    reference, interrupted = tmp_path / "reference", tmp_path / "interrupted"
    reference.mkdir()
    interrupted.mkdir()
    assert wait_all(start_pods(args, reference, 2, free_port())) == [0, 0]
    port = free_port()
    pods = start_pods(args, interrupted, 2, port)
    deadline = time.monotonic() + 240
    while not started(interrupted):
        assert time.monotonic() < deadline and pods[0].poll() is None, (interrupted / "rank0.log").read_text()
        time.sleep(0.01)
    return interrupted, port, pods


def test_two_pods_with_the_operator_contract(tmp_path):
    args = [*SMALL, "--epochs", "2", "--log-interval", "4", "--output-dir", "out", "--dir", "tb"]
    codes = wait_all(start_pods(args, tmp_path, world_size=2, port=free_port()))
    master_log = (tmp_path / "rank0.log").read_text()
    assert codes == [0, 0], master_log + (tmp_path / "rank1.log").read_text()

    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["world_size"] == 2 and metrics["test_samples"] == 500
    assert metrics["global_batch_size"] == 128 and metrics["images_per_second"] > 0
    assert list(_weights(tmp_path / "out" / "mnist_cnn.pt"))[0] == "conv1.weight"
    assert list((tmp_path / "tb").glob("events.out.tfevents.*"))
    losses = _losses(master_log)
    assert losses[-1] < losses[0] / 2
    assert re.search(r"^epoch=2 accuracy=0\.\d{4} val_loss=\d+\.\d{4}$", master_log, re.MULTILINE)
    assert "{metricName: accuracy, metricValue:" in master_log
    # Only rank 0 reports.
    assert "Train Epoch" not in (tmp_path / "rank1.log").read_text()


@pytest.mark.parametrize(
    "worker_flags, difference",
    [
        # Silently wrong: each rank would shard its own permutation and the weights drift apart.
        (
            ["--seed", "2", "--lr", "0.1"],
            "--lr is 0.05 on rank 0 but 0.1 on rank 1; --seed is 1 on rank 0 but 2 on rank 1",
        ),
        # A hang until --pg-timeout: only the ranks with a checkpoint directory take its collectives.
        (["--checkpoint-dir", "checkpoints"], "--checkpoint-dir is not given on rank 0 but given on rank 1"),
    ],
    ids=["training", "collectives"],
)
def test_pods_started_with_different_flags_are_refused_on_every_rank(tmp_path, worker_flags, difference):
    started = time.monotonic()
    pods = start_pods([*SMALL, "--dir", ""], tmp_path, world_size=2, port=free_port(), more_args={1: worker_flags})
    codes = wait_all(pods)
    logs = [(tmp_path / f"rank{rank}.log").read_text() for rank in (0, 1)]
    assert codes == [1, 1], logs
    for log in logs:
        assert f"error: the ranks were started with different settings: {difference}. Every process" in log, log
    assert time.monotonic() - started < 60, "refused before any collective could wait for --pg-timeout"


def test_a_worker_waits_quietly_for_a_master_that_starts_late(tmp_path):
    """Pods start minutes apart when one pulls its image; a TCPStore client would log a C++ stack
    trace for every failed try in the meantime."""
    port = free_port()
    worker = start_pods([*SMALL, "--dir", ""], tmp_path, world_size=2, port=port, ranks=[1])
    time.sleep(8)  # more than one try (STORE_CONNECT_ATTEMPT_SECONDS)
    master = start_pods([*SMALL, "--dir", ""], tmp_path, world_size=2, port=port, ranks=[0])
    assert wait_all(master + worker) == [0, 0]
    log = (tmp_path / "rank1.log").read_text()
    assert "frame #" not in log and "TCPStore" not in log, log


def test_a_master_that_cannot_write_its_outputs_stops_every_rank_at_once(tmp_path):
    """The Worker meets rank 0 first, then both stop: had rank 0 stopped before the rendezvous, the
    Worker would wait for it up to --startup-timeout (30 minutes by default)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    started = time.monotonic()
    pods = start_pods(
        [*SMALL, "--dir", ""],
        tmp_path,
        world_size=2,
        port=free_port(),
        more_args={0: ["--output-dir", str(blocker / "out")]},
    )
    codes = wait_all(pods)
    logs = [(tmp_path / f"rank{rank}.log").read_text() for rank in (0, 1)]
    assert codes == [1, 1], logs
    assert f"error: --output-dir {blocker / 'out'} is not writable" in logs[0], logs[0]
    assert f"error: rank 0 cannot write its outputs: --output-dir {blocker / 'out'} is not writable" in logs[1], logs[1]
    assert time.monotonic() - started < 60


def _diverge_as_a_pod(rank: int, port: int, out_dir) -> None:
    """Run the CLI as one of two pods until its loss diverges, counting the DDP wrappers still alive
    when it destroys the process group."""
    os.environ.update(trainer_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2", RANK=str(rank)))
    destroy = dist.destroy_process_group

    def counting_destroy(*args, **kwargs):
        alive = sum(isinstance(obj, DistributedDataParallel) for obj in gc.get_objects())
        (out_dir / f"rank{rank}.alive").write_text(str(alive))
        destroy(*args, **kwargs)

    dist.destroy_process_group = counting_destroy
    (out_dir / f"rank{rank}.exit").write_text(str(cli.main([*SMALL, "--lr", "1e12", "--dir", ""])))


def test_a_failed_run_frees_its_ddp_wrapper_before_destroying_the_group(tmp_path):
    """The traceback of a failure holds the training's frames: a DDP wrapper that outlives its group
    has aborted a rank at exit (SIGABRT) instead of exiting with the failure's own code."""
    mp.spawn(_diverge_as_a_pod, args=(free_port(), tmp_path), nprocs=2, join=True)
    for rank in (0, 1):
        assert (tmp_path / f"rank{rank}.exit").read_text() == str(EXIT_PERMANENT)
        assert (tmp_path / f"rank{rank}.alive").read_text() == "0"


def test_a_checkpoint_from_a_newer_trainer_stops_every_rank_with_the_reason(tmp_path):
    """Rank 0 reads it; the others must not die as if a peer were lost (exit 138, retried)."""
    newer = tmp_path / "ckpt" / "checkpoint-000000010.pt"
    newer.parent.mkdir()
    torch.save({"format": FORMAT_VERSION + 1}, newer)
    codes = wait_all(start_pods([*SMALL, "--dir", "", "--checkpoint-dir", "ckpt"], tmp_path, 2, free_port()))
    logs = [(tmp_path / f"rank{rank}.log").read_text() for rank in (0, 1)]
    assert codes == [1, 1], logs
    for log in logs:
        assert (
            f"error: {newer.relative_to(tmp_path)} is a format-{FORMAT_VERSION + 1} checkpoint, from a newer" in log
        ), log


def test_two_pods_fall_back_together_when_the_dataset_cannot_be_downloaded(tmp_path):
    """The ranks agree on the fallback: one that went its own way would end the other's collectives."""
    args = [
        "--dataset",
        "fashion-mnist",
        "--data-dir",
        "empty",
        "--fallback-dataset",
        "digits",
        "--epochs",
        "1",
        "--threads",
        "1",
        "--output-dir",
        "out",
        "--dir",
        "",
        "--pg-timeout",
        "60",
    ]
    codes = wait_all(start_pods(args, tmp_path, world_size=2, port=free_port()))
    assert codes == [0, 0], (tmp_path / "rank0.log").read_text() + (tmp_path / "rank1.log").read_text()
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert (metrics["dataset"], metrics["world_size"]) == ("digits", 2)


def test_two_pods_share_a_torchvision_dataset_directory(tmp_path):
    """Rank 0 fetches first, then the other pod finds the files: both train on MNIST."""
    write_idx_dataset(tmp_path / "shared", load("synthetic", tmp_path, download=False).limited(512, 100), "mnist")
    args = ["--dataset", "mnist", "--data-dir", "shared", "--threads", "1", "--output-dir", "out", "--dir", ""]
    assert wait_all(start_pods(args, tmp_path, world_size=2, port=free_port())) == [0, 0], (
        tmp_path / "rank0.log"
    ).read_text() + (tmp_path / "rank1.log").read_text()
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert (metrics["dataset"], metrics["test_samples"]) == ("mnist", 100)


def test_torchrun_two_processes(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            "2",
            "--master-port",
            str(free_port()),
            "-m",
            "trainer",
            *SMALL,
            "--output-dir",
            "out",
            "--dir",
            "",
        ],
        cwd=tmp_path,
        env=trainer_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "World Size: 2. Rank: 0" in result.stdout
    assert json.loads((tmp_path / "out" / "metrics.json").read_text())["world_size"] == 2


@pytest.mark.skipif(not native_bf16(torch.device("cpu")), reason="--precision bf16 needs an x86 CPU with AVX512_BF16")
def test_killed_rank_resumes_in_bf16_to_the_same_weights(tmp_path):
    """In fp32, tests/localjob/test_chaos.py kills and resumes the chart's job; bf16's autocast state resumes too."""
    args = [
        *SMALL,
        "--precision",
        "bf16",
        "--limit-train",
        "4096",
        "--epochs",
        "2",
        "--checkpoint-every",
        "16",
        "--checkpoint-dir",
        "ckpt",
        "--output-dir",
        "out",
        "--dir",
        "",
        "--log-interval",
        "100",
    ]
    interrupted, port, pods = _reference_run_then_pods_once(
        args, tmp_path, lambda directory: list((directory / "ckpt").glob("checkpoint-*.pt"))
    )
    pods[1].send_signal(signal.SIGKILL)
    codes = wait_all(pods, timeout=120)
    assert codes[1] == -signal.SIGKILL
    assert codes[0] == EXIT_RETRYABLE, (
        "the surviving rank must fail, not hang, and ask restartPolicy ExitCode for a retry"
    )
    assert not (interrupted / "out" / "mnist_cnn.pt").exists(), "killed too late to test resume"

    assert wait_all(start_pods(args, interrupted, 2, port)) == [0, 0]
    resumed_log = (interrupted / "rank0.log").read_text()
    assert "Resumed from ckpt/checkpoint-" in resumed_log and "Precision: bf16" in resumed_log
    assert_same_weights(tmp_path / "reference" / "out" / "mnist_cnn.pt", interrupted / "out" / "mnist_cnn.pt")


def test_one_epoch_of_real_mnist_with_the_seeds_settings_reaches_96_percent(tmp_path, mnist_data_dir):
    """The seed script's flags (batch 64, lr 0.01, momentum 0.5, seed 1) on all of MNIST: measured 0.968."""
    result = run_trainer(
        [
            "--dataset",
            "mnist",
            "--data-dir",
            str(mnist_data_dir),
            "--epochs",
            "1",
            "--output-dir",
            "out",
            "--dir",
            "",
            "--log-interval",
            "1000",
        ],
        cwd=tmp_path,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert (metrics["dataset"], metrics["test_samples"], metrics["train_images"]) == ("mnist", 10_000, 60_000)
    assert metrics["accuracy"] >= 0.96, metrics["history"]


def test_three_ranks_resume_from_a_mid_epoch_checkpoint_to_the_same_weights(tmp_path):
    """At 3 ranks gloo's sums depend on DDP's bucket layout, which changes after the first backward:
    a resumed run must not take its first step in another layout than the uninterrupted one."""
    args = [
        *SMALL,
        "--limit-train",
        "1920",
        "--checkpoint-every",
        "4",
        "--keep-checkpoints",
        "10",
        "--checkpoint-dir",
        "ckpt",
        "--output-dir",
        "out",
        "--dir",
        "",
        "--log-interval",
        "100",
    ]
    reference, resumed = tmp_path / "reference", tmp_path / "resumed"
    reference.mkdir()
    (resumed / "ckpt").mkdir(parents=True)
    assert wait_all(start_pods(args, reference, 3, free_port())) == [0, 0, 0], (reference / "rank0.log").read_text()
    shutil.copy(reference / "ckpt" / "checkpoint-000000004.pt", resumed / "ckpt")  # 4 of 10 steps

    assert wait_all(start_pods(args, resumed, 3, free_port())) == [0, 0, 0], (resumed / "rank0.log").read_text()
    assert "Resumed from ckpt/checkpoint-000000004.pt (step 4, in epoch 1)" in (resumed / "rank0.log").read_text()
    assert_same_weights(reference / "out" / "mnist_cnn.pt", resumed / "out" / "mnist_cnn.pt")
