"""The test suite's own process reaper: what a test started does not outlive it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.support.procs import descendants, run_stoppable, spawn, stop_spawned

# Starts a grandchild, in the parent's session or in one of its own (as torchrun starts its workers
# and the local runner its replicas), prints its pid, then waits, ignoring SIGTERM when told to.
PARENT = """
import signal, subprocess, sys, time
if sys.argv[2] == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=sys.argv[1] == "own")
print(child.pid, flush=True)
time.sleep(600)
"""


def gone(pid: int) -> bool:
    """True once pid has ended (its zombie reaped by whoever adopted it)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("session", ["shared", "own"])
@pytest.mark.parametrize("parent", ["stops-on-sigterm", "stubborn"])
def test_the_reaper_ends_a_spawned_process_and_every_descendant(session, parent):
    started = spawn([sys.executable, "-c", PARENT, session, parent], stdout=subprocess.PIPE, text=True)
    grandchild = int(started.stdout.readline())
    assert descendants(started.pid) == [grandchild]
    stop_spawned(stop_seconds=2)
    expected = -signal.SIGKILL if parent == "stubborn" else -signal.SIGTERM
    assert started.returncode == expected, "SIGTERM first, SIGKILL for what ignores it"
    assert gone(grandchild), f"the grandchild in a {session} session outlived the test"


def test_a_stopped_run_gets_sigterm_so_its_exit_trap_cleans_up(tmp_path):
    """subprocess.run's timeout would SIGKILL the script, whose trap then never runs."""
    leftover = tmp_path / "staged"
    script = f"touch {leftover}; trap 'rm -f {leftover}' EXIT; sleep 600"
    with pytest.raises(subprocess.TimeoutExpired):
        run_stoppable(["bash", "-c", script], timeout=2, cleanup_seconds=30)
    assert not leftover.exists()


def test_the_reaper_ends_what_an_exited_process_left_in_its_group():
    """A crashed launcher's workers outlive it; its group still holds them."""
    started = spawn(["bash", "-c", "sleep 600 & echo $!"], stdout=subprocess.PIPE, text=True)
    orphan = int(started.stdout.readline())
    started.wait()
    stop_spawned(stop_seconds=2)
    assert gone(orphan)
