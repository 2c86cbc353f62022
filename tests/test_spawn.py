"""The test suite's own process reaper: what a failed test started does not outlive it."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from tests.support.procs import kill_spawned, run_stoppable, spawn

# Starts a grandchild, as torchrun and the local runner do, then waits.
PARENT = ("import subprocess, sys, time; "
          "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
          "print('started', flush=True); time.sleep(600)")


def group_gone(pgid: int) -> bool:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def test_the_reaper_kills_a_spawned_process_and_its_children():
    parent = spawn([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    assert parent.stdout.readline() == "started\n"
    kill_spawned()
    assert parent.returncode == -signal.SIGKILL
    assert group_gone(parent.pid), "the grandchild survived"


def test_a_stopped_run_gets_sigterm_so_its_exit_trap_cleans_up(tmp_path):
    """subprocess.run's timeout would SIGKILL the script, whose trap then never runs."""
    leftover = tmp_path / "staged"
    script = f"touch {leftover}; trap 'rm -f {leftover}' EXIT; sleep 600"
    try:
        run_stoppable(["bash", "-c", script], timeout=2, cleanup_seconds=30)
    except subprocess.TimeoutExpired as stopped:
        assert stopped.timeout == 2
    else:
        raise AssertionError("the run was not stopped")
    assert not leftover.exists()
