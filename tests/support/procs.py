"""The processes the tests start: trainers launched the way the training-operator (or torchrun) would,
with their environment and a free port; scripts stopped at a timeout so that their traps still clean
up; the processes below a launcher; waiting until a trainer trains; and the reaper (tests/conftest.py)
that stops whatever a test left running."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.support.paths import REPO

# Inherited by every trainer process: deterministic single-threaded math, and no network
# reachable through urllib (torchvision downloads fail at once instead of timing out).
BASE_ENV = {
    "OMP_NUM_THREADS": "1",
    "http_proxy": "http://127.0.0.1:9",
    "https_proxy": "http://127.0.0.1:9",
    "no_proxy": "",
    "NO_PROXY": "",
}  # a no_proxy of the environment would bypass the dead proxy


# Every process spawn() started, so that the reaper (tests/conftest.py) stops what a test left running.
_spawned: list[subprocess.Popen] = []
# Above the local runner's stop timeout (10 s): on SIGTERM it stops its replicas within that.
STOP_SECONDS = 15


def spawn(command: list[str], **kwargs) -> subprocess.Popen:
    """Popen in a process group of its own, which the reaper stops when the test ends, passed or not:
    a failed assert would otherwise leave a long training run holding one of the CI's two cores."""
    proc = subprocess.Popen(command, start_new_session=True, **kwargs)
    _spawned.append(proc)
    return proc


def children(pid: int) -> list[int]:
    """The processes pid (any of its threads) has started and not yet reaped."""
    found = []
    for listing in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            found += [int(child) for child in listing.read_text().split()]
        except OSError:  # the thread ended meanwhile
            pass
    return found


def descendants(pid: int) -> list[int]:
    """pid's children, their children and so on, those in sessions of their own included (torchrun's
    workers, the local runner's replicas)."""
    found, parents = [], [pid]
    while parents:
        pids = children(parents.pop())
        found += pids
        parents += pids
    return found


def stop_spawned(stop_seconds: float = STOP_SECONDS) -> None:
    """Stop every spawned process as a pod's stop would: SIGTERM to each group, so that torchrun and
    the local runner stop their workers and replicas themselves, then, `stop_seconds` later for all
    of them together, SIGKILL to each group and to every descendant seen at the start. Descendants
    are held by pidfd, so a pid reused meanwhile is never hit; an interrupt skips to the SIGKILLs."""
    spawned = _spawned[:]
    _spawned.clear()
    family = []
    for proc in spawned:
        for pid in descendants(proc.pid):
            try:
                family.append(os.pidfd_open(pid))
            except ProcessLookupError:
                pass
    try:
        for proc in spawned:
            if proc.poll() is None:
                _signal_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + stop_seconds
        for proc in spawned:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
    finally:
        for proc in spawned:
            _signal_group(proc, signal.SIGKILL)  # the group outlives its leader while a child runs
            proc.wait()
        for pidfd in family:
            try:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.close(pidfd)


def _signal_group(proc: subprocess.Popen, signum: int) -> None:
    try:
        os.killpg(proc.pid, signum)
    except ProcessLookupError:
        pass


def run_stoppable(
    command: list[str], timeout: float, cleanup_seconds: float = 300, **kwargs
) -> subprocess.CompletedProcess:
    """Run `command` to the end in a process group of its own. After `timeout` seconds (or Ctrl-C)
    the group gets SIGTERM, so that a script's EXIT trap still cleans up, where subprocess.run's
    SIGKILL would end the script alone and leave its children and files behind; SIGKILL follows
    `cleanup_seconds` later. A stopped run raises subprocess.TimeoutExpired with its output."""
    proc = spawn(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except (subprocess.TimeoutExpired, KeyboardInterrupt) as stop:
        _signal_group(proc, signal.SIGTERM)
        try:
            stdout, stderr = proc.communicate(timeout=cleanup_seconds)
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGKILL)
            stdout, stderr = proc.communicate()
        if isinstance(stop, KeyboardInterrupt):
            raise
        raise subprocess.TimeoutExpired(command, timeout, output=stdout, stderr=stderr) from None
    return subprocess.CompletedProcess(command, proc.returncode, stdout, stderr)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def trainer_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env.update(BASE_ENV)
    env["PYTHONPATH"] = str(REPO)
    env.update(extra)
    return env


def run_trainer(args: list[str], cwd: Path, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trainer", *args],
        cwd=cwd,
        env=trainer_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def start_pods(
    args: list[str],
    cwd: Path,
    world_size: int,
    port: int,
    more_args: dict[int, list[str]] | None = None,
    ranks: list[int] | None = None,
) -> list[subprocess.Popen]:
    """One process per 'pod' with the operator's env contract (RANK = replica index); `more_args`
    adds flags for some ranks only; `ranks` starts only those (default: all)."""
    procs = []
    for rank in range(world_size) if ranks is None else ranks:
        log = open(cwd / f"rank{rank}.log", "ab")
        procs.append(
            spawn(
                [sys.executable, "-m", "trainer", *args, *(more_args or {}).get(rank, [])],
                cwd=cwd,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=trainer_env(
                    MASTER_ADDR="127.0.0.1",
                    MASTER_PORT=str(port),
                    WORLD_SIZE=str(world_size),
                    RANK=str(rank),
                    PYTHONUNBUFFERED="1",
                ),
            )
        )
        log.close()
    return procs


def wait_all(procs: list[subprocess.Popen], timeout: float = 300) -> list[int]:
    return [p.wait(timeout=timeout) for p in procs]


# Trainer flags for a run that outlasts any test and logs every step, for tests that stop it midway.
LONG_RUN = ["--dataset", "synthetic", "--epochs", "100", "--threads", "1", "--dir", "", "--log-interval", "1"]


def wait_until(ready: Callable[[], bool], proc: subprocess.Popen, log: Path, timeout: float = 120) -> None:
    """Poll until `ready()` holds; fail with the output `proc` wrote to `log` if it exits or `timeout`
    seconds pass first."""
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline and proc.poll() is None, log.read_text()
        time.sleep(0.1)


def has_trained(log: Path) -> bool:
    """Whether the trainer writing `log` has logged a training step."""
    return "Train Epoch" in log.read_text()


def torchrun_workers(launcher_pid: int) -> list[int]:
    """The trainer processes a torchrun launcher has started (its children running `-m trainer`)."""
    return [
        child
        for child in children(launcher_pid)
        if b"trainer" in Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
    ]
