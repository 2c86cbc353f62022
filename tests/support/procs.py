"""Launch trainer processes the way the training-operator (or torchrun) would."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from tests.support.helm import REPO

# Inherited by every trainer process: deterministic single-threaded math, and no network
# reachable through urllib (torchvision downloads fail at once instead of timing out).
BASE_ENV = {"OMP_NUM_THREADS": "1", "http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9",
            "no_proxy": "", "NO_PROXY": ""}  # a no_proxy of the environment would bypass the dead proxy


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
        [sys.executable, "-m", "trainer", *args], cwd=cwd, env=trainer_env(**env),
        capture_output=True, text=True, timeout=timeout,
    )


def start_pods(args: list[str], cwd: Path, world_size: int, port: int) -> list[subprocess.Popen]:
    """One process per 'pod' with the operator's env contract (RANK = replica index)."""
    procs = []
    for rank in range(world_size):
        log = open(cwd / f"rank{rank}.log", "ab")
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "trainer", *args], cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
            env=trainer_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(world_size),
                            RANK=str(rank), PYTHONUNBUFFERED="1"),
        ))
        log.close()
    return procs


def wait_all(procs: list[subprocess.Popen], timeout: float = 300) -> list[int]:
    return [p.wait(timeout=timeout) for p in procs]


def torchrun_workers(launcher_pid: int) -> list[int]:
    """The trainer processes a torchrun launcher has started (its children running `-m trainer`)."""
    children = Path(f"/proc/{launcher_pid}/task/{launcher_pid}/children").read_text().split()
    return [int(child) for child in children
            if b"trainer" in Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")]
