"""`python -m trainer.torchrun`, the chart's launcher with torchrun: the trainer's exit codes, not
torchrun's 1 for everything, so restartPolicy ExitCode tells a retryable failure from a permanent one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.support.procs import LONG_RUN, free_port, has_trained, spawn, torchrun_workers, trainer_env, wait_until
from trainer.failures import EXIT_RETRYABLE

ONE_WORKER = ["--standalone", "--nproc-per-node", "1", "--max-restarts", "0", "--module", "trainer"]


def launch(launcher: str, args: list[str], cwd: Path) -> subprocess.Popen:
    with open(cwd / f"{launcher}.log", "w") as log:
        return spawn(
            [sys.executable, "-m", launcher, *args],
            cwd=cwd,
            env=trainer_env(PYTHONUNBUFFERED="1"),
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def training(launcher: subprocess.Popen, log: Path) -> int:
    """The pid of the launcher's worker, once it has trained a step."""
    wait_until(lambda: has_trained(log), launcher, log)
    (worker,) = torchrun_workers(launcher.pid)
    return worker


def test_a_permanent_error_keeps_the_trainers_exit_code(tmp_path):
    """Invalid flags exit 2 (fail the job under ExitCode); torchrun itself would say 1."""
    codes = {
        launcher: launch(launcher, [*ONE_WORKER, "--epochs", "-1"], tmp_path).wait(timeout=120)
        for launcher in ("trainer.torchrun", "torch.distributed.run")
    }
    log = (tmp_path / "trainer.torchrun.log").read_text()
    assert codes == {"trainer.torchrun": 2, "torch.distributed.run": 1}, log
    assert "--epochs: must be a positive integer" in log
    assert "exitcode  : 2" in log, "torchrun's failure summary is still printed"


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA, where torchrun's GPU count fails")
def test_torchrun_setup_that_cannot_work_is_permanent(tmp_path):
    """Only a lost or late peer is worth a retry; `--nproc-per-node gpu` without CUDA fails alike every time."""
    code = launch(
        "trainer.torchrun", ["--standalone", "--nproc-per-node", "gpu", "--module", "trainer"], tmp_path
    ).wait(timeout=120)
    log = (tmp_path / "trainer.torchrun.log").read_text()
    assert code == 1, log
    assert "Cuda is not available" in log


def test_a_worker_killed_by_a_signal_exits_128_plus_the_signal(tmp_path):
    """A SIGKILLed worker (an OOM kill) exits 137, which restartPolicy ExitCode retries."""
    log = tmp_path / "trainer.torchrun.log"
    launcher = launch("trainer.torchrun", [*ONE_WORKER, *LONG_RUN], tmp_path)
    os.kill(training(launcher, log), signal.SIGKILL)
    assert launcher.wait(timeout=60) == 128 + signal.SIGKILL, log.read_text()
    assert "Signal 9 (SIGKILL)" in log.read_text()


def test_a_stopped_pod_exits_128_plus_the_signal(tmp_path):
    """SIGTERM to the launcher (the kubelet stopping the pod) stops the workers and exits 143, as the
    trainer alone does; torchrun itself exits 1."""
    log = tmp_path / "trainer.torchrun.log"
    launcher = launch("trainer.torchrun", [*ONE_WORKER, *LONG_RUN], tmp_path)
    worker = training(launcher, log)
    launcher.send_signal(signal.SIGTERM)
    assert launcher.wait(timeout=60) == 128 + signal.SIGTERM, log.read_text()
    assert not Path(f"/proc/{worker}").exists(), "the worker was stopped with the launcher"


def test_a_peer_that_never_joins_is_retryable(tmp_path):
    """A rendezvous timeout (a lost or late pod) exits with the trainer's retryable 138, not 1."""
    alone = [
        "--nnodes",
        "2",
        "--nproc-per-node",
        "1",
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        f"127.0.0.1:{free_port()}",
        "--rdzv-conf",
        "join_timeout=3",
        "--module",
        "trainer",
    ]
    code = launch("trainer.torchrun", alone, tmp_path).wait(timeout=120)
    log = (tmp_path / "trainer.torchrun.log").read_text()
    assert code == EXIT_RETRYABLE, log
    assert "RendezvousTimeoutError" in log
