"""Run planned pods as local processes with the operator's restart and completion rules.

- restartPolicy OnFailure restarts a replica on any non-zero exit; ExitCode only on exit codes
  ≥ 128 (signals such as SIGKILL/OOM = 137), failing the job on 1–127; Never fails the job.
- runPolicy.backoffLimit fails the job when its restarts would add up to it (the operator fails
  it once the pods' restart counts reach it, but does not count ExitCode's recreations: here the
  limit applies to them too, and the message says the cluster differs); activeDeadlineSeconds caps
  its runtime.
- ExitCode restarts by recreating the pod, so its emptyDirs start empty; OnFailure restarts the
  container in the same pod, whose emptyDirs survive.
- With a Master the job Succeeds when the Master succeeds; without one, when every Worker does
  (elastic: when any Worker does).
Each replica's output is streamed prefixed with its pod name and kept in logs/<pod>.log; its pid
is in pods/<pod>/pid while it runs, so a test (or a curious user) can kill it.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from ci.localjob.pods import LocalPod, empty_dirs, pod_dir

POLL_SECONDS = 0.2
RESTART_DELAY_SECONDS = 1.0
STOP_TIMEOUT_SECONDS = 10.0


def exit_code(returncode: int) -> int:
    """A container's exit code: a process killed by signal N exits with 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def describe(code: int) -> str:
    if code > 128:
        try:
            return f"{code} ({signal.Signals(code - 128).name})"
        except ValueError:
            pass
    return str(code)


def retryable(policy: str, code: int) -> bool:
    if policy in ("OnFailure", "Always"):
        return True
    if policy == "ExitCode":
        return code >= 128
    return False


@dataclass
class JobResult:
    state: str          # Succeeded or Failed
    reason: str
    restarts: int
    exit_codes: dict[str, int] = field(default_factory=dict)

    @property
    def succeeded(self) -> bool:
        return self.state == "Succeeded"


@dataclass
class _Replica:
    pod: LocalPod
    process: subprocess.Popen | None = None
    pump: threading.Thread | None = None
    phase: str = "Pending"   # Running, Succeeded, Failed
    exit_code: int | None = None
    restart_at: float | None = None


class JobRunner:
    def __init__(self, job_name: str, pods: list[LocalPod], run_dir: Path, *, backoff_limit: int | None,
                 active_deadline_seconds: int | None = None, elastic: bool = False,
                 grace_seconds: float = 60.0, out: TextIO = sys.stdout):
        self.job_name = job_name
        self.replicas = [_Replica(pod) for pod in pods]
        self.run_dir = run_dir
        self.backoff_limit = backoff_limit
        self.active_deadline_seconds = active_deadline_seconds
        self.elastic = elastic
        self.grace_seconds = grace_seconds
        self.out = out
        self.restarts = 0
        self._lock = threading.Lock()

    # -- output -----------------------------------------------------------------------------

    def say(self, message: str) -> None:
        with self._lock:
            self.out.write(f"[localjob] {message}\n")
            self.out.flush()

    def _pump_output(self, pod: LocalPod, stream, log_path: Path) -> None:
        with log_path.open("a", encoding="utf-8") as log:
            for raw in stream:
                line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                with self._lock:
                    self.out.write(f"[{pod.name}] {line}\n")
                    self.out.flush()
                log.write(line + "\n")
                log.flush()

    # -- processes --------------------------------------------------------------------------

    def _start(self, replica: _Replica) -> None:
        pod = replica.pod
        own_dir = pod_dir(self.run_dir, pod.name)
        for directory in [own_dir, pod.cwd, *(local for _, local in pod.mounts)]:
            directory.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "logs").mkdir(parents=True, exist_ok=True)
        # Its own session, so stopping a replica also stops what it spawned (torchrun's workers).
        replica.process = subprocess.Popen(list(pod.argv), env=pod.env, cwd=pod.cwd, stdin=subprocess.DEVNULL,
                                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        if pod.cpus:
            # Pinned at once, while Python starts up: every thread and process it makes inherits
            # the set. (preexec_fn would do it before exec, but is unsafe beside the pump threads.)
            try:
                os.sched_setaffinity(replica.process.pid, pod.cpus)
            except ProcessLookupError:
                pass  # it exited already; the poll loop reports it
        (own_dir / "pid").write_text(f"{replica.process.pid}\n")
        replica.pump = threading.Thread(target=self._pump_output, daemon=True,
                                        args=(pod, replica.process.stdout, self.run_dir / "logs" / f"{pod.name}.log"))
        replica.pump.start()
        replica.phase, replica.exit_code, replica.restart_at = "Running", None, None

    def _stop(self, replica: _Replica) -> None:
        """SIGTERM the replica's process group, SIGKILL it after STOP_TIMEOUT_SECONDS."""
        try:
            os.killpg(replica.process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            replica.process.wait(STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            pass
        self._reap(replica)
        replica.phase = "Stopped"

    def _reap(self, replica: _Replica) -> None:
        """Wait for the process and its output, and kill what is left of its process group."""
        try:
            os.killpg(replica.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        replica.process.wait()
        replica.pump.join(timeout=5)
        (pod_dir(self.run_dir, replica.pod.name) / "pid").unlink(missing_ok=True)

    # -- job rules ---------------------------------------------------------------------------

    def _succeeded(self) -> bool:
        masters = [r for r in self.replicas if r.pod.replica_type == "Master"]
        if masters:
            return all(r.phase == "Succeeded" for r in masters)
        workers = [r.phase == "Succeeded" for r in self.replicas]
        return any(workers) if self.elastic else all(workers)

    def _on_exit(self, replica: _Replica, code: int) -> str | None:
        """Record a replica's exit; returns a failure reason when the job fails because of it."""
        pod = replica.pod
        replica.exit_code = code
        if code == 0:
            replica.phase = "Succeeded"
            self.say(f"{pod.name} succeeded")
            return None
        replica.phase = "Failed"
        if not retryable(pod.restart_policy, code):
            return f"{pod.name} exited with code {describe(code)} and restartPolicy {pod.restart_policy} does not restart it"
        if self.backoff_limit is not None and self.restarts + 1 >= self.backoff_limit:
            reason = (f"{pod.name} exited with code {describe(code)}; backoffLimit {self.backoff_limit} reached "
                      f"(restart {self.restarts + 1} of the job)")
            if pod.restart_policy == "ExitCode":
                until = ("until runPolicy.activeDeadlineSeconds" if self.active_deadline_seconds is not None
                         else "forever; set runPolicy.activeDeadlineSeconds to bound it")
                reason += ("; on a cluster the training-operator v1 does not count ExitCode's pod recreations "
                           f"(kubeflow/trainer#2045) and would recreate it {until}")
            return reason
        self.restarts += 1
        limit = "unlimited" if self.backoff_limit is None else self.backoff_limit
        recreate = pod.restart_policy == "ExitCode"
        self.say(f"{pod.name} exited with code {describe(code)}; {'recreating the pod' if recreate else 'restarting it'} "
                 f"(restartPolicy {pod.restart_policy}, job restart {self.restarts}, backoffLimit {limit})")
        if recreate:
            shutil.rmtree(empty_dirs(self.run_dir, pod.name), ignore_errors=True)
        replica.restart_at = time.monotonic() + RESTART_DELAY_SECONDS
        return None

    def run(self) -> JobResult:
        started = time.monotonic()
        for replica in self.replicas:
            self._start(replica)
        failure = None
        try:
            while failure is None and not self._succeeded():
                time.sleep(POLL_SECONDS)
                now = time.monotonic()
                if self.active_deadline_seconds is not None and now - started > self.active_deadline_seconds:
                    failure = f"activeDeadlineSeconds {self.active_deadline_seconds} exceeded"
                    break
                for replica in self.replicas:
                    if replica.phase == "Running" and replica.process.poll() is not None:
                        self._reap(replica)
                        failure = self._on_exit(replica, exit_code(replica.process.returncode))
                        if failure:
                            break
                    elif replica.restart_at is not None and now >= replica.restart_at:
                        self._start(replica)
            if failure is None:
                self._let_others_finish()
        except KeyboardInterrupt:
            failure = "interrupted"
        finally:
            for replica in self.replicas:
                if replica.phase == "Running":
                    self._stop(replica)
        codes = {r.pod.name: r.exit_code for r in self.replicas if r.exit_code is not None}
        if failure:
            return JobResult("Failed", failure, self.restarts, codes)
        return JobResult("Succeeded", "the Master succeeded" if any(r.pod.replica_type == "Master" for r in self.replicas)
                         else "the Workers succeeded", self.restarts, codes)

    def _let_others_finish(self) -> None:
        """The job is done; replicas still running get a grace period, then are stopped."""
        deadline = time.monotonic() + self.grace_seconds
        while time.monotonic() < deadline:
            running = [r for r in self.replicas if r.phase == "Running"]
            if not running:
                return
            for replica in running:
                if replica.process.poll() is not None:
                    self._reap(replica)
                    replica.exit_code = exit_code(replica.process.returncode)
                    replica.phase = "Succeeded" if replica.exit_code == 0 else "Failed"
            time.sleep(POLL_SECONDS)
        for replica in self.replicas:
            if replica.phase == "Running":
                self.say(f"{replica.pod.name} still running {self.grace_seconds:.0f}s after the job finished; stopping it")
