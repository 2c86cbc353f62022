"""Chaos: the chart's default job (Master + 1 Worker) under `python -m ci.localjob`, its pods
SIGKILLed at random 20 times (at start-up, mid-training, and mid-way through writing a checkpoint)
and once stopped with SIGTERM as a preemption would, still Succeeds with the same final weights,
bit for bit, as an undisturbed run of the same values. Under restartPolicy ExitCode, which fails the job
on any exit code below 128: each rank that loses its peer exits with the trainer's retryable code, and
every rank stops at the step the preempted one checkpointed. The suite's one kill-and-resume run of the
runner and the trainer's real DDP (tests/trainer/test_ddp.py keeps the cases this one does not reach).

The schedule comes from one seed, printed at the start: CHAOS_SEED=<seed> replays it (the moments
land where the machine's speed puts them, but the order, targets and kinds of the kills repeat)."""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from tests.support.paths import REPO
from tests.support.procs import children, free_port, spawn
from trainer.failures import EXIT_RETRYABLE, EXIT_SIGTERM

pytestmark = pytest.mark.slow

PODS = ("mnist-master-0", "mnist-worker-0")
WRITER = "mnist-master-0"  # rank 0 writes every checkpoint
# digits (1,438 images) trains 6 steps an epoch on two ranks; a checkpoint every 2 steps gives the
# kills many writes to land in. 30 epochs (180 steps) leave room for the progress the blows let
# through (about 50 steps in the runs measured).
VALUES = {
    "training.dataset": "digits",
    "training.epochs": 30,
    "training.checkpointEvery": 2,
    "runPolicy.backoffLimit": "null",  # unlimited: every kill costs a restart of each pod
    "restartPolicy": "ExitCode",  # a rank exiting 1-127 (not a retryable failure) fails the job
}
RUN_SUBDIR = Path("mnist/volumes/mnist-storage/runs/default/mnist")
SIGKILLS = 20
DURING_WRITES = 3  # of the SIGKILLs
JOB_TIMEOUT_SECONDS = 900


@dataclass(frozen=True)
class Blow:
    signum: signal.Signals
    pod: str
    when: str  # "start-up", "training" or "checkpoint write"
    delay: float  # seconds after the moment


def schedule(seed: int) -> list[Blow]:
    chance = random.Random(seed)
    whens = ["checkpoint write"] * DURING_WRITES + [
        chance.choice(("start-up", "training")) for _ in range(SIGKILLS - DURING_WRITES)
    ]
    blows = [
        Blow(signal.SIGKILL, WRITER if when == "checkpoint write" else chance.choice(PODS), when, chance.uniform(0, 1))
        for when in whens
    ]
    blows.append(Blow(signal.SIGTERM, chance.choice(PODS), "training", chance.uniform(0, 1)))
    chance.shuffle(blows)
    return blows


class Job:
    """A `python -m ci.localjob` run, and what its run dir shows of its pods and checkpoints."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.log = run_dir / "runner.log"
        values = [arg for key, value in VALUES.items() for arg in ("--set", f"{key}={value}")]
        run_dir.mkdir(parents=True, exist_ok=True)
        with self.log.open("w") as out:  # a file, not a pipe that would fill while the test kills
            self.runner = spawn(
                [sys.executable, "-m", "ci.localjob", "--run-dir", str(run_dir), "--port", str(free_port()), *values],
                cwd=REPO,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.checkpoints = run_dir / RUN_SUBDIR / "checkpoints"

    def output(self) -> str:
        return self.log.read_text()

    def wait(self) -> str:
        self.runner.wait(timeout=JOB_TIMEOUT_SECONDS)
        return self.output()

    def running(self) -> None:
        assert self.runner.poll() is None, f"the job ended before the chaos did:\n{self.output()[-5000:]}"

    def pid(self, pod: str) -> int | None:
        """The pod's live process: one of the runner's children (never a reused pid), not a zombie."""
        try:
            pid = int((self.run_dir / "mnist" / "pods" / pod / "pid").read_text())
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        except (OSError, ValueError):
            return None
        return pid if state != "Z" and pid in children(self.runner.pid) else None

    def saved_steps(self) -> int:
        """How many checkpoints have been completed so far (their names, highest step last)."""
        return max((int(p.name[11:20]) for p in self.checkpoints.glob("*/checkpoint-*.pt")), default=0)

    def partial_writes(self) -> set[Path]:
        return set(self.checkpoints.glob("*/.checkpoint-*.pt.*.tmp"))


def poll(job: Job, ready, seconds: float = 0.001):
    """ready()'s first true answer, asked every `seconds` while the job runs."""
    while not (found := ready()):
        job.running()
        time.sleep(seconds)
    return found


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except OSError:
        return True


def deliver(job: Job, pid: int, signum: signal.Signals) -> None:
    """Signal a live pod process and wait until it is gone. Alive until then, it exits by the signal
    (137 for SIGKILL), whatever it was about to do."""
    os.kill(pid, signum)
    poll(job, lambda: pid not in children(job.runner.pid) or _zombie(pid))


def strike(job: Job, blow: Blow, stale: set[Path]) -> str:
    """Wait for the blow's moment and deliver it; what happened."""
    if blow.when == "start-up":
        poll(job, lambda: all(job.pid(pod) for pod in PODS), 0.01)
        time.sleep(blow.delay)
    elif blow.when == "training":
        # Two new checkpoints: the ranks have met again since the last blow (a Master may finish
        # one more checkpoint after its peer died, not two).
        saved = job.saved_steps()
        poll(job, lambda: job.saved_steps() > saved, 0.005)
        saved = job.saved_steps()
        poll(job, lambda: job.saved_steps() > saved, 0.005)
        time.sleep(blow.delay / 5)  # mid-step, mid-evaluation or mid-checkpoint: a few steps at most
    else:
        # Freeze the writer once a checkpoint's temp file appears: one still there while it is frozen
        # is one it is writing, so the kill lands mid-write (else it goes on, and this tries again).
        while True:
            new = poll(job, lambda: job.partial_writes() - stale)
            writer = job.pid(WRITER)
            if writer is None:
                continue
            os.kill(writer, signal.SIGSTOP)
            if left := {path for path in new if path.exists()}:
                deliver(job, writer, signal.SIGKILL)
                assert all(path.exists() for path in left), "a killed write's temp file stays until the next Master"
                stale.update(left)
                return f"SIGKILL {WRITER} while it wrote {', '.join(sorted(p.name for p in left))}"
            os.kill(writer, signal.SIGCONT)
    deliver(job, poll(job, lambda: job.pid(blow.pod), 0.01), blow.signum)
    return f"{blow.signum.name} {blow.pod} at {blow.when} (+{blow.delay:.2f} s)"


def final_weights(run_dir: Path) -> dict[str, torch.Tensor]:
    return torch.load(run_dir / RUN_SUBDIR / "model" / "mnist_cnn.pt", weights_only=True)


def test_random_kills_and_a_preemption_leave_the_weights_of_an_undisturbed_run(tmp_path):
    seed = int(os.environ.get("CHAOS_SEED", random.SystemRandom().randrange(2**32)))
    print(f"chaos seed {seed}: CHAOS_SEED={seed} replays this schedule")
    started = time.monotonic()

    undisturbed = Job(tmp_path / "undisturbed")
    output = undisturbed.wait()
    assert undisturbed.runner.returncode == 0 and "(restarts: 0," in output, output[-5000:]

    chaos = Job(tmp_path / "chaos")
    stale: set[Path] = set()
    try:
        for number, blow in enumerate(schedule(seed), 1):
            print(f"{time.monotonic() - started:6.1f} s  {number:2d}. {strike(chaos, blow, stale)}", flush=True)
    except BaseException:
        print(chaos.output()[-5000:])
        raise
    output = chaos.wait()
    print(f"{time.monotonic() - started:6.1f} s  the job ended")

    assert chaos.runner.returncode == 0, f"seed {seed}:\n{output[-5000:]}"
    assert "PyTorchJob mnist Succeeded: the Master succeeded" in output
    exits = [int(code) for code in re.findall(r"exited with code (\d+)[^;]*; recreating the pod", output)]
    assert exits.count(137) >= SIGKILLS, output[-5000:]
    assert set(exits) <= {137, EXIT_RETRYABLE, EXIT_SIGTERM}, "a lost peer is a retryable failure, not a permanent one"
    assert exits.count(EXIT_SIGTERM) == len(PODS), "the preempted pod and its peer both stop, at one step"
    preempted = re.search(r"Stopped by SIGTERM after step (\d+), checkpointed", output)
    assert preempted, "the preempted pod checkpointed where the ranks agreed to stop"
    step = int(preempted.group(1))
    assert re.search(rf"\] Resumed from .*checkpoint-0*{step}\.pt \(step {step},", output), "and the job went on there"
    assert stale and not chaos.partial_writes(), "the Master removed the writes its predecessors left"
    expected, got = final_weights(undisturbed.run_dir), final_weights(chaos.run_dir)
    assert expected.keys() == got.keys()
    differing = [name for name in expected if not torch.equal(expected[name], got[name])]
    assert not differing, f"seed {seed}: weights differ from the undisturbed run's in {differing}"
