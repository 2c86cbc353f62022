"""Run planned pods as local processes with their controller's restart and completion rules.

The job's kind (kinds/) holds the rules; this runs them alike for every kind:
- a replica that exits non-zero is restarted when the kind restarts that exit code under the pod's
  restartPolicy, else the job fails;
- the job fails when its restarts, counted across all pods, would add up to the kind's backoffLimit (the
  message adds where the controller differs), or when its activeDeadlineSeconds pass;
- a restart the kind makes a new pod starts with empty emptyDirs; a container restarted in its pod keeps
  them;
- the job has succeeded when the kind says so, from its pods' phases; pods still running then get a grace
  period to exit.
Each replica's output is streamed prefixed with its pod name and kept in logs/<pod>.log; its pid
is in pods/<pod>/pid while it runs, so a test (or a curious user) can kill it.
SIGTERM and SIGHUP interrupt the job as Ctrl-C does: every replica is stopped before the runner exits
(another signal meanwhile kills them at once). What a dead replica leaves running (torchrun's workers,
which start their own sessions) is killed, as a container's death would kill it.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from ci.localjob.kinds.base import JobModel
from ci.localjob.pods import LocalPod, empty_dirs, pod_dir
from trainer import failures

POLL_SECONDS = 0.2
RESTART_DELAY_SECONDS = 1.0
STOP_TIMEOUT_SECONDS = 10.0
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
PR_SET_CHILD_SUBREAPER, PR_GET_CHILD_SUBREAPER = 36, 37  # <linux/prctl.h>


def describe(code: int) -> str:
    if code > 128:
        try:
            return f"{code} ({signal.Signals(code - 128).name})"
        except ValueError:
            pass
    return str(code)


@contextmanager
def _signals_handled_by(handler):
    """Route STOP_SIGNALS to `handler` inside the block, except those ignored (nohup's SIGHUP, a
    background job's SIGINT) or set outside Python. Only the main thread may set handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in STOP_SIGNALS if signal.getsignal(s) not in (signal.SIG_IGN, None)}
    for signum in previous:
        signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, restored in previous.items():
            signal.signal(signum, restored)


@contextmanager
def _adopting_orphans():
    """Make this process the reaper of its descendants' orphans inside the block (Linux), so the
    workers of a killed torchrun become its children instead of init's."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except AttributeError:  # no prctl (macOS): orphans go to init and live on
        yield
        return
    prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
    was = ctypes.c_int(0)
    prctl(PR_GET_CHILD_SUBREAPER, ctypes.addressof(was), 0, 0, 0)
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    try:
        yield
    finally:
        prctl(PR_SET_CHILD_SUBREAPER, was.value, 0, 0, 0)


def _children() -> dict[int, str]:
    """This process's children by pid, with their command names, from /proc (none without /proc)."""
    children = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # exited meanwhile
        # pid (comm) state ppid ...: comm may hold spaces and parentheses, so split after the last ")".
        name, _, rest = text.partition("(")[2].rpartition(")")
        if int(rest.split()[1]) == os.getpid():
            children[int(stat.parent.name)] = name
    return children


def _signal_group(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass  # the group is gone already


@dataclass
class JobResult:
    state: str  # the job's success state (Succeeded, Complete) or Failed
    reason: str
    restarts: int
    exit_codes: dict[str, int] = field(default_factory=dict)

    @property
    def succeeded(self) -> bool:
        return self.state != "Failed"


@dataclass
class _Replica:
    pod: LocalPod
    process: subprocess.Popen | None = None
    pump: threading.Thread | None = None
    phase: str = "Pending"  # Running, Succeeded, Failed
    exit_code: int | None = None
    restart_at: float | None = None

    @property
    def alive(self) -> bool:
        """Its process was started and not yet reaped (its phase may not say so after an interrupt)."""
        return self.process is not None and self.process.returncode is None


class JobRunner:
    def __init__(
        self,
        job: JobModel,
        pods: list[LocalPod],
        run_dir: Path,
        *,
        grace_seconds: float = 60.0,
        out: TextIO = sys.stdout,
    ):
        self.job = job
        self.replicas = [_Replica(pod) for pod in pods]
        self.run_dir = run_dir
        self.backoff_limit = job.backoff_limit
        self.active_deadline_seconds = job.active_deadline_seconds
        self.grace_seconds = grace_seconds
        self.out = out
        self.restarts = 0
        self._lock = threading.Lock()
        self._stopping = False
        self._hurried_by: str | None = None  # the signal that cut the stop short
        self._host_children: set[int] = set()

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
        # Its own session, so stopping its process group stops what it spawned; what starts a session
        # of its own (torchrun's workers) is an orphan once the replica dies, and _kill_orphans' job.
        replica.process = subprocess.Popen(
            list(pod.argv),
            env=pod.env,
            cwd=pod.cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        if pod.cpus:
            # Pinned at once, while Python starts up: every thread and process it makes inherits
            # the set. (preexec_fn would do it before exec, but is unsafe beside the pump threads.)
            try:
                os.sched_setaffinity(replica.process.pid, pod.cpus)
            except ProcessLookupError:
                pass  # it exited already; the poll loop reports it
        (own_dir / "pid").write_text(f"{replica.process.pid}\n")
        replica.pump = threading.Thread(
            target=self._pump_output,
            daemon=True,
            args=(pod, replica.process.stdout, self.run_dir / "logs" / f"{pod.name}.log"),
        )
        replica.pump.start()
        replica.phase, replica.exit_code, replica.restart_at = "Running", None, None

    def _stop_all(self) -> None:
        """SIGTERM every live replica's process group at once, SIGKILL what is left after one shared
        STOP_TIMEOUT_SECONDS (or at once on another signal); reaping each kills its orphans."""
        self._stopping = True
        live = [r for r in self.replicas if r.alive]
        for replica in live:
            _signal_group(replica.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
        while self._hurried_by is None and time.monotonic() < deadline and any(r.process.poll() is None for r in live):
            time.sleep(POLL_SECONDS)
        if self._hurried_by:
            self.say(f"{self._hurried_by} while stopping: killing the replicas now")
        self._reap(*live)
        for replica in live:
            replica.phase = "Stopped"

    def _reap(self, *replicas: _Replica) -> None:
        """Wait for the processes and their output, and kill what is left of their process groups and
        their orphans (one /proc sweep finds the orphans of all of them)."""
        for replica in replicas:
            _signal_group(replica.process.pid, signal.SIGKILL)
            replica.process.wait()
        self._kill_orphans()  # before waiting for the output: they hold the replicas' stdout open
        for replica in replicas:
            if replica.pump:  # none when interrupted right after the start
                replica.pump.join(timeout=5)
            (pod_dir(self.run_dir, replica.pod.name) / "pid").unlink(missing_ok=True)

    def _kill_orphans(self) -> None:
        """SIGKILL and reap every child that is no live replica: through the subreaper, what a replica's
        dead processes left running. Repeated, as an orphan's own children become ours when it dies.
        Called when a replica is reaped, not every poll: it scans /proc, which costs milliseconds."""
        while orphans := self._orphans():
            for pid, name in orphans.items():
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    continue  # it had exited already
                os.kill(pid, signal.SIGKILL)
                # This pid only: waitpid(-1) would take the replicas' exit statuses from Popen.
                os.waitpid(pid, 0)
                self.say(f"killed pid {pid} ({name}), which a replica left running")

    def _orphans(self) -> dict[int, str]:
        replicas = {r.process.pid for r in self.replicas if r.alive}
        return {
            pid: name for pid, name in _children().items() if pid not in replicas and pid not in self._host_children
        }

    def _on_signal(self, signum: int, _frame) -> None:
        """The first stop signal interrupts the job; another, while its replicas stop, hurries them."""
        name = signal.Signals(signum).name
        if self._stopping:
            self._hurried_by = name
            return
        self._stopping = True
        raise KeyboardInterrupt(name)

    # -- job rules ---------------------------------------------------------------------------

    def _succeeded(self) -> str | None:
        """Why the job has succeeded, or None while it has not."""
        return self.job.succeeded([(r.pod.role, r.phase) for r in self.replicas])

    def _on_exit(self, replica: _Replica, code: int) -> str | None:
        """Record a replica's exit; returns a failure reason when the job fails because of it."""
        pod = replica.pod
        replica.exit_code = code
        if code == 0:
            replica.phase = "Succeeded"
            self.say(f"{pod.name} succeeded")
            return None
        replica.phase = "Failed"
        if not self.job.restarts(pod.restart_policy, code):
            return f"{pod.name} exited with code {describe(code)} and restartPolicy {pod.restart_policy} does not restart it"
        if self.backoff_limit is not None and self.restarts + 1 >= self.backoff_limit:
            # `restarts` counts the restarts done, as the summary line reports them: one fewer than the failures.
            reason = (
                f"{pod.name} exited with code {describe(code)}; backoffLimit {self.backoff_limit} reached "
                f"at the job's failure {self.restarts + 1}"
            )
            caveat = self.job.backoff_caveat(pod.restart_policy)
            return f"{reason}; {caveat}" if caveat else reason
        self.restarts += 1
        limit = "unlimited" if self.backoff_limit is None else self.backoff_limit
        recreate = self.job.recreates_pod(pod.restart_policy)
        self.say(
            f"{pod.name} exited with code {describe(code)}; {'recreating the pod' if recreate else 'restarting it'} "
            f"(restartPolicy {pod.restart_policy}, job restart {self.restarts}, backoffLimit {limit})"
        )
        if recreate:
            shutil.rmtree(empty_dirs(self.run_dir, pod.name), ignore_errors=True)
        replica.restart_at = time.monotonic() + RESTART_DELAY_SECONDS
        return None

    def run(self) -> JobResult:
        # Children the host process already had (a test's, say) are not a replica's orphans.
        self._host_children = set(_children())
        with _signals_handled_by(self._on_signal), _adopting_orphans():
            failure = self._supervise()
        codes = {r.pod.name: r.exit_code for r in self.replicas if r.exit_code is not None}
        if failure:
            return JobResult("Failed", failure, self.restarts, codes)
        return JobResult(self.job.success_state, self._succeeded(), self.restarts, codes)

    def _supervise(self) -> str | None:
        """Run the job until it succeeds, fails or is interrupted; returns why it failed, if it did."""
        started = time.monotonic()
        failure = None
        try:
            for replica in self.replicas:
                self._start(replica)
            while failure is None and not self._succeeded():
                time.sleep(POLL_SECONDS)
                now = time.monotonic()
                if self.active_deadline_seconds is not None and now - started > self.active_deadline_seconds:
                    failure = f"activeDeadlineSeconds {self.active_deadline_seconds} exceeded"
                    break
                for replica in self.replicas:
                    if replica.phase == "Running" and replica.process.poll() is not None:
                        self._reap(replica)
                        failure = self._on_exit(replica, failures.container_exit_code(replica.process.returncode))
                        if failure:
                            break
                    elif replica.restart_at is not None and now >= replica.restart_at:
                        self._start(replica)
            if failure is None:
                self._let_others_finish()
        except KeyboardInterrupt as interruption:
            if failure is None and not self._succeeded():  # as on a cluster, a finished job stays so
                failure = f"interrupted by {interruption}" if interruption.args else "interrupted"
        finally:
            self._stop_all()
        return failure

    def _let_others_finish(self) -> None:
        """The job is done; replicas still running get a grace period, then are stopped."""
        waiting_for = ", ".join(r.pod.name for r in self.replicas if r.phase == "Running")
        if waiting_for:
            self.say(
                f"{self.job.kind} {self.job.name} {self.job.success_state}; waiting up to {self.grace_seconds:.0f}s for {waiting_for} "
                f"to exit (Ctrl-C stops waiting; the job stays {self.job.success_state})"
            )
        deadline = time.monotonic() + self.grace_seconds
        while time.monotonic() < deadline:
            running = [r for r in self.replicas if r.phase == "Running"]
            if not running:
                return
            for replica in running:
                if replica.process.poll() is not None:
                    self._reap(replica)
                    replica.exit_code = failures.container_exit_code(replica.process.returncode)
                    replica.phase = "Succeeded" if replica.exit_code == 0 else "Failed"
            time.sleep(POLL_SECONDS)
        for replica in self.replicas:
            if replica.phase == "Running":
                self.say(
                    f"{replica.pod.name} still running {self.grace_seconds:.0f}s after the job finished; stopping it"
                )
