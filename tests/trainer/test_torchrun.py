"""`python -m trainer.torchrun`, the chart's launcher with torchrun: a failed worker's exit code, not
torchrun's 1, so restartPolicy ExitCode tells a retryable failure from a permanent one."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support.procs import trainer_env

ONE_WORKER = ["--standalone", "--nproc-per-node", "1", "--max-restarts", "0", "--module", "trainer"]


def launch(launcher: str, trainer_args: list[str], cwd: Path) -> subprocess.Popen:
    log = open(cwd / f"{launcher}.log", "w")
    with log:
        return subprocess.Popen([sys.executable, "-m", launcher, *ONE_WORKER, *trainer_args], cwd=cwd,
                                env=trainer_env(PYTHONUNBUFFERED="1"), stdout=log, stderr=subprocess.STDOUT)


def test_a_permanent_error_keeps_the_trainers_exit_code(tmp_path):
    """Invalid flags exit 2 (fail the job under ExitCode); torchrun itself would say 1."""
    codes = {launcher: launch(launcher, ["--epochs", "-1"], tmp_path).wait(timeout=120)
             for launcher in ("trainer.torchrun", "torch.distributed.run")}
    log = (tmp_path / "trainer.torchrun.log").read_text()
    assert codes == {"trainer.torchrun": 2, "torch.distributed.run": 1}, log
    assert "--epochs: must be a positive integer" in log
    assert "exitcode  : 2" in log, "torchrun's failure summary is still printed"


def test_a_worker_killed_by_a_signal_exits_128_plus_the_signal(tmp_path):
    """A SIGKILLed worker (an OOM kill) exits 137, which restartPolicy ExitCode retries."""
    launcher = launch("trainer.torchrun", ["--dataset", "synthetic", "--epochs", "100", "--threads", "1",
                                           "--dir", "", "--log-interval", "1"], tmp_path)
    children = Path(f"/proc/{launcher.pid}/task/{launcher.pid}/children")
    deadline = time.monotonic() + 120
    while "Train Epoch" not in (tmp_path / "trainer.torchrun.log").read_text():
        assert time.monotonic() < deadline and launcher.poll() is None, (tmp_path / "trainer.torchrun.log").read_text()
        time.sleep(0.1)
    (worker,) = (int(pid) for pid in children.read_text().split()
                 if b"trainer" in Path(f"/proc/{pid}/cmdline").read_bytes())
    os.kill(worker, signal.SIGKILL)
    assert launcher.wait(timeout=60) == 128 + signal.SIGKILL, (tmp_path / "trainer.torchrun.log").read_text()
    assert "Signal 9 (SIGKILL)" in (tmp_path / "trainer.torchrun.log").read_text()
