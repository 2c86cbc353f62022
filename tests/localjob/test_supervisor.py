"""The runner's restart and completion rules, with tiny Python processes standing in for replicas."""

from __future__ import annotations

import io
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ci.localjob.kinds.base import JobModel
from ci.localjob.kinds.pytorchjob import PyTorchJobModel
from ci.localjob.kinds.pytorchtrainingjob import PyTorchTrainingJobModel
from ci.localjob.kinds.trainjob import TrainJobModel
from ci.localjob.pods import LocalPod
from ci.localjob.supervisor import JobRunner
from tests.support.paths import REPO
from trainer.failures import container_exit_code

# Exits with the first code of CODES not yet used; a marker file per attempt counts attempts.
SCRIPT = """
import os, pathlib, signal, sys, time
codes = sys.argv[1].split(",")
attempts = pathlib.Path("attempts")
attempts.mkdir(exist_ok=True)
n = len(list(attempts.iterdir()))
(attempts / str(n)).touch()
print(f"attempt {n}", flush=True)
code = codes[min(n, len(codes) - 1)]
if code == "sleep":
    time.sleep(600)
if code.startswith("in3s:"):  # exits with the code after it, 3 s on
    time.sleep(3)
    code = code.removeprefix("in3s:")
if code == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
if code == "pid":
    pid_file = pathlib.Path(sys.argv[2])
    sys.exit(0 if pid_file.read_text().strip() == str(os.getpid()) else 5)
sys.exit(int(code))
"""


# Writes its pid to "started" and runs until SIGKILLed; a SIGTERM only leaves a "sigterm" file. Once
# it has had one, it writes "saw-all" if every job-worker-* beside it has had one too (replicas stopped
# together, not one after the other).
STUBBORN = """
import os, pathlib, signal, time
signal.signal(signal.SIGTERM, lambda *_: pathlib.Path("sigterm").touch())
pathlib.Path("started").write_text(str(os.getpid()))
while True:
    if pathlib.Path("sigterm").exists() and all((p / "sigterm").exists() for p in pathlib.Path("..").glob("job-worker-*")):
        pathlib.Path("saw-all").touch()
    time.sleep(0.05)
"""

# Starts a child in a new session, as torchrun starts its workers, writes the child's pid to
# "child", then ends as sys.argv[1] says.
SPAWNER = """
import os, pathlib, signal, subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
pathlib.Path("child.tmp").write_text(str(child.pid))
os.replace("child.tmp", "child")
if sys.argv[1] == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
"""

# Exits 0 once the process whose pid is in the file sys.argv[1] is gone (a zombie counts as alive),
# 3 if it is still there 60 s after the start (ample on a loaded machine; a pass returns at once).
WATCHER = """
import os, pathlib, sys, time
pid_file, deadline = pathlib.Path(sys.argv[1]), time.monotonic() + 60
while not pid_file.exists() and time.monotonic() < deadline:
    time.sleep(0.05)
pid = int(pid_file.read_text())
while time.monotonic() < deadline:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        sys.exit(0)
    time.sleep(0.05)
sys.exit(3)
"""

# Runs the pickled pods in sys.argv[1] with STOP_TIMEOUT_SECONDS sys.argv[2], as the CLI would
# from a terminal (the stop signals at their defaults, whatever pytest's were).
DRIVER = """
import pickle, signal, sys
from pathlib import Path
from ci.localjob import supervisor
from ci.localjob.kinds.pytorchjob import PyTorchJobModel
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.signal(signal.SIGHUP, signal.SIG_DFL)
supervisor.STOP_TIMEOUT_SECONDS = float(sys.argv[2])
pods = pickle.loads(Path(sys.argv[1]).read_bytes())
job = PyTorchJobModel({"kind": "PyTorchJob", "metadata": {"name": "job"}, "spec": {}})
result = supervisor.JobRunner(job, pods, Path(sys.argv[1]).parent / "run").run()
print(f"{result.state}: {result.reason}", flush=True)
"""


def pod(
    tmp_path: Path,
    name: str,
    codes: str,
    replica_type: str = "Master",
    policy: str = "OnFailure",
    extra: tuple[str, ...] = (),
    script: str = SCRIPT,
) -> LocalPod:
    cwd = tmp_path / name
    return LocalPod(
        name, replica_type, 0, (sys.executable, "-c", script, codes, *extra), {"PATH": "/usr/bin"}, (), cwd, policy, ()
    )


def pytorchjob(
    backoff_limit: int | None = 3, active_deadline_seconds: int | None = None, elastic: bool = False
) -> PyTorchJobModel:
    """A PyTorchJob named job with these run settings (the pods are given to the runner apart)."""
    run_policy = {"backoffLimit": backoff_limit, "activeDeadlineSeconds": active_deadline_seconds}
    spec = {"runPolicy": {k: v for k, v in run_policy.items() if v is not None}}
    if elastic:
        spec["elasticPolicy"] = {}
    return PyTorchJobModel({"kind": "PyTorchJob", "metadata": {"name": "job"}, "spec": spec})


def trainjob(**spec) -> TrainJobModel:
    return TrainJobModel({"kind": "TrainJob", "metadata": {"name": "job"}, "spec": spec})


def run(tmp_path: Path, pods: list[LocalPod], grace_seconds: float = 0, job: JobModel | None = None, **run_settings):
    out = io.StringIO()
    job = job or pytorchjob(**run_settings)
    result = JobRunner(job, pods, tmp_path / "run", grace_seconds=grace_seconds, out=out).run()
    return result, out.getvalue()


def attempts(tmp_path: Path, name: str) -> int:
    return len(list((tmp_path / name / "attempts").iterdir()))


def test_a_signal_is_reported_as_the_kubelet_reports_it():
    assert container_exit_code(-9) == 137 and container_exit_code(3) == 3


def test_on_failure_restarts_until_success(tmp_path):
    result, out = run(tmp_path, [pod(tmp_path, "job-master-0", "1,1,0")])
    assert result.state == "Succeeded" and result.restarts == 2
    assert attempts(tmp_path, "job-master-0") == 3
    assert "[job-master-0] attempt 2" in out
    assert (
        "job-master-0 exited with code 1; restarting it (restartPolicy OnFailure, job restart 1, backoffLimit 3)" in out
    )
    assert (tmp_path / "run/logs/job-master-0.log").read_text() == "attempt 0\nattempt 1\nattempt 2\n"


@pytest.mark.parametrize("limit, failures", [(0, 1), (1, 1), (3, 3)])
def test_backoff_limit_fails_the_job_when_the_restarts_reach_it(tmp_path, limit, failures):
    """As the operator: it fails the job once the pods' restart counts add up to backoffLimit."""
    result, _ = run(tmp_path, [pod(tmp_path, "job-master-0", "1")], backoff_limit=limit)
    assert result.state == "Failed" and f"backoffLimit {limit} reached" in result.reason
    assert result.reason.endswith(f"backoffLimit {limit} reached at the job's failure {failures}")
    assert attempts(tmp_path, "job-master-0") == failures and result.restarts == failures - 1


def test_exit_code_backoff_says_the_operator_would_not_stop(tmp_path):
    result, _ = run(tmp_path, [pod(tmp_path, "job-master-0", "kill", policy="ExitCode")], backoff_limit=1)
    assert result.state == "Failed" and "backoffLimit 1 reached" in result.reason
    assert "training-operator v1 does not count ExitCode's pod recreations" in result.reason
    assert result.reason.endswith("would recreate it forever; set runPolicy.activeDeadlineSeconds to bound it")


def test_exit_code_policy_restarts_a_killed_replica_but_not_an_error(tmp_path):
    killed, out = run(tmp_path, [pod(tmp_path, "job-master-0", "kill,0", policy="ExitCode")])
    assert killed.state == "Succeeded" and "exited with code 137 (SIGKILL); recreating the pod" in out
    errored, _ = run(tmp_path, [pod(tmp_path, "job-worker-0", "3", policy="ExitCode")])
    assert errored.state == "Failed"
    assert errored.reason == "job-worker-0 exited with code 3 and restartPolicy ExitCode does not restart it"


def test_never_fails_on_the_first_error(tmp_path):
    result, _ = run(
        tmp_path,
        [
            pod(tmp_path, "job-master-0", "0", policy="OnFailure"),
            pod(tmp_path, "job-worker-0", "2,0", "Worker", policy="Never"),
        ],
    )
    assert result.state == "Failed" and "job-worker-0 exited with code 2" in result.reason


def test_master_success_decides_and_stragglers_are_stopped(tmp_path):
    result, out = run(tmp_path, [pod(tmp_path, "job-master-0", "0"), pod(tmp_path, "job-worker-0", "sleep", "Worker")])
    assert result.state == "Succeeded" and result.reason == "the Master succeeded"
    assert "job-worker-0 still running 0s after the job finished; stopping it" in out


def test_a_worker_that_exits_within_the_grace_period_keeps_its_exit_code(tmp_path):
    """The job is Succeeded once the Master is; a Worker ending within grace_seconds is reaped, not stopped."""
    result, out = run(
        tmp_path,
        [pod(tmp_path, "job-master-0", "0"), pod(tmp_path, "job-worker-0", "in3s:3", "Worker")],
        grace_seconds=120,
    )
    assert result.state == "Succeeded" and result.exit_codes == {"job-master-0": 0, "job-worker-0": 3}
    assert "waiting up to 120s for job-worker-0" in out and "still running" not in out


@pytest.mark.parametrize("elastic", [True, False])
def test_without_master_every_worker_must_succeed_unless_elastic(tmp_path, elastic):
    """One Worker done, the other still running: enough only for an elastic job."""
    workers = [pod(tmp_path, "job-worker-0", "0", "Worker"), pod(tmp_path, "job-worker-1", "sleep", "Worker")]
    # The deadline ends the job that must fail; for the one that succeeds it is far off, so a slow start cannot race it.
    deadline = 60 if elastic else 3
    result, _ = run(tmp_path, workers, elastic=elastic, active_deadline_seconds=deadline)
    if elastic:
        assert result.state == "Succeeded" and result.reason == "the Workers succeeded"
    else:
        assert result.state == "Failed" and result.reason == "activeDeadlineSeconds 3 exceeded"


def test_active_deadline_fails_the_job(tmp_path):
    result, _ = run(tmp_path, [pod(tmp_path, "job-master-0", "sleep")], active_deadline_seconds=0)
    assert result.state == "Failed" and result.reason == "activeDeadlineSeconds 0 exceeded"


def test_pid_file_names_the_running_replica(tmp_path):
    pid_file = tmp_path / "run/pods/job-master-0/pid"
    result, _ = run(tmp_path, [pod(tmp_path, "job-master-0", "pid", policy="Never", extra=(str(pid_file),))])
    assert result.state == "Succeeded", "the replica found its own pid in pods/<pod>/pid"
    assert not pid_file.exists(), "removed once the replica exited"


@pytest.mark.parametrize("policy, kept", [("OnFailure", True), ("ExitCode", False)])
def test_only_a_recreated_pod_loses_its_empty_dirs(tmp_path, policy, kept):
    scratch = tmp_path / "run/pods/job-master-0/volumes/scratch/checkpoint.pt"
    scratch.parent.mkdir(parents=True)
    scratch.write_text("from the first attempt")
    result, _ = run(tmp_path, [pod(tmp_path, "job-master-0", "kill,0", policy=policy)])
    assert result.state == "Succeeded" and scratch.exists() == kept


@pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs CPU affinity (Linux) and at least 2 CPUs",
)
def test_each_pod_runs_on_its_own_cpus(tmp_path):
    first, second = sorted(os.sched_getaffinity(0))[:2]
    check = "import os, sys; sys.exit(0 if os.sched_getaffinity(0) == {%d} else 7)"
    pods = [
        LocalPod(
            name,
            kind,
            0,
            (sys.executable, "-c", check % cpu),
            {"PATH": "/usr/bin"},
            (),
            tmp_path / name,
            "Never",
            (),
            (cpu,),
        )
        for name, kind, cpu in (("job-master-0", "Master", first), ("job-worker-0", "Worker", second))
    ]
    result, _ = run(tmp_path, pods)
    assert result.state == "Succeeded", result.reason


def stubborn_pods(tmp_path: Path, count: int) -> list[LocalPod]:
    return [pod(tmp_path, f"job-worker-{i}", "", "Worker", script=STUBBORN) for i in range(count)]


def wait_for(condition, what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"no {what} after {timeout}s"
        time.sleep(0.05)


def alive(pid: int) -> bool:
    """Whether the process exists and is no zombie (an unreaped one still answers kill(pid, 0))."""
    state = subprocess.run(["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True).stdout.strip()
    return bool(state) and not state.startswith("Z")


@pytest.fixture
def stray_pids():
    """Pids a test expects gone; those that are not (the defect under test) are killed afterwards."""
    pids = []
    yield pids
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def start_driver(tmp_path: Path, pods: list[LocalPod], stop_timeout: float, stray_pids: list[int]) -> subprocess.Popen:
    """The runner in its own process, once every pod wrote its "started" file."""
    (tmp_path / "pods.pickle").write_bytes(pickle.dumps(pods))
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(tmp_path / "pods.pickle"), str(stop_timeout)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    started = [p.cwd / "started" for p in pods]
    wait_for(lambda: all(f.exists() and f.read_text() for f in started), "replica start")
    stray_pids += [int(f.read_text()) for f in started]
    return driver


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_stop_signal_stops_every_replica_before_the_runner_exits(tmp_path, stray_pids, signum):
    """`timeout make run` sends SIGTERM, a closed terminal SIGHUP: replicas must not outlive the runner."""
    pods = stubborn_pods(tmp_path, 2)
    driver = start_driver(tmp_path, pods, 1, stray_pids)
    driver.send_signal(signum)
    output, _ = driver.communicate(timeout=30)
    assert not any(alive(pid) for pid in stray_pids), f"replicas outlived the runner:\n{output}"
    assert all((p.cwd / "sigterm").exists() for p in pods), "each replica got SIGTERM before SIGKILL"
    assert f"Failed: interrupted by {signum.name}" in output, output


def test_replicas_are_stopped_against_one_shared_deadline(tmp_path, stray_pids):
    stop_timeout = 5
    pods = stubborn_pods(tmp_path, 3)
    driver = start_driver(tmp_path, pods, stop_timeout, stray_pids)
    driver.send_signal(signal.SIGINT)
    stopping = time.monotonic()
    output, _ = driver.communicate(timeout=60)
    assert all((p.cwd / "saw-all").exists() for p in pods), (
        f"a replica was killed before the others got SIGTERM:\n{output}"
    )
    # Not a speed goal: one deadline for all ends after one stop timeout (5 s), a deadline each after
    # three (15 s); the bound sits between them with room for a loaded machine.
    assert time.monotonic() - stopping < 2.5 * stop_timeout, (
        f"the replicas' stop timeouts ran one after another:\n{output}"
    )
    assert not any(alive(pid) for pid in stray_pids)


def test_a_second_interrupt_while_stopping_kills_the_replicas_at_once(tmp_path, stray_pids):
    pods = stubborn_pods(tmp_path, 2)
    driver = start_driver(tmp_path, pods, 60, stray_pids)
    driver.send_signal(signal.SIGINT)
    wait_for(lambda: (pods[0].cwd / "sigterm").exists(), "SIGTERM to the replica")
    driver.send_signal(signal.SIGINT)
    output, _ = driver.communicate(timeout=10)
    assert "SIGINT while stopping: killing the replicas now" in output and "Traceback" not in output, output
    assert not any(alive(pid) for pid in stray_pids), "no replica abandoned"


def test_a_replica_that_cannot_start_does_not_leave_the_others_running(tmp_path, stray_pids, monkeypatch):
    class RecordedPopen(subprocess.Popen):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            stray_pids.append(self.pid)

    monkeypatch.setattr(subprocess, "Popen", RecordedPopen)
    unstartable = LocalPod(
        "job-worker-0",
        "Worker",
        0,
        (str(tmp_path / "no-such-command"),),
        {},
        (),
        tmp_path / "job-worker-0",
        "Never",
        (),
    )
    with pytest.raises(FileNotFoundError):
        run(tmp_path, [pod(tmp_path, "job-master-0", "sleep"), unstartable])
    assert len(stray_pids) == 1 and not alive(stray_pids[0]), "the Master, started first, was stopped"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc and prctl (Linux)")
@pytest.mark.parametrize("ending", ["kill", "exit"])
def test_what_a_dead_replica_started_in_its_own_session_is_killed(tmp_path, stray_pids, ending):
    """As torchrun's workers when torchrun is SIGKILLed: the Master succeeds only if the Worker's
    child is gone while the job still runs."""
    child_file = tmp_path / "job-worker-0/child"
    result, out = run(
        tmp_path,
        [
            pod(tmp_path, "job-master-0", str(child_file), policy="Never", script=WATCHER),
            pod(tmp_path, "job-worker-0", ending, "Worker", script=SPAWNER),
        ],
        backoff_limit=None,
    )
    stray_pids.append(int(child_file.read_text()))
    assert result.state == "Succeeded", result.reason
    assert f"killed pid {stray_pids[0]} (python" in out and not alive(stray_pids[0])


def test_children_the_host_process_had_are_left_alone(tmp_path):
    """A test's own subprocess, say, is no replica's orphan."""
    host_child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        result, _ = run(tmp_path, [pod(tmp_path, "job-master-0", "0")])
        assert result.state == "Succeeded" and host_child.poll() is None
    finally:
        host_child.kill()
        host_child.wait()


class _InterruptOnce(io.StringIO):
    """Output that sends this process SIGINT when a line containing `cue` is written."""

    def __init__(self, cue: str):
        super().__init__()
        self.cue = cue

    def write(self, text: str) -> int:
        written = super().write(text)
        if self.cue in text:
            self.cue = "\0"  # once
            os.kill(os.getpid(), signal.SIGINT)
        return written


def test_ctrl_c_while_waiting_for_stragglers_keeps_the_job_succeeded(tmp_path):
    out = _InterruptOnce("waiting up to")
    result = JobRunner(
        pytorchjob(),
        [pod(tmp_path, "job-master-0", "0"), pod(tmp_path, "job-worker-0", "sleep", "Worker")],
        tmp_path / "run",
        grace_seconds=30,
        out=out,
    ).run()
    assert "PyTorchJob job Succeeded; waiting up to 30s for job-worker-0 to exit" in out.getvalue()
    assert result.state == "Succeeded" and result.reason == "the Master succeeded"


def test_a_trainjob_is_complete_once_every_node_succeeded(tmp_path):
    """Node 0 done first does not end it, unlike a PyTorchJob's Master: the Indexed Job needs every index."""
    nodes = [pod(tmp_path, "job-node-0-0", "0", "node"), pod(tmp_path, "job-node-0-1", "in3s:0", "node")]
    result, out = run(tmp_path, nodes, job=trainjob())
    assert result.state == "Complete" and result.reason == "every node succeeded", out
    assert result.exit_codes == {"job-node-0-0": 0, "job-node-0-1": 0}


def test_a_trainjob_fails_at_the_jobs_default_backoff_limit(tmp_path):
    """The torch runtime's Job sets no backoffLimit: Kubernetes' 6 counts every node's failures together."""
    nodes = [pod(tmp_path, "job-node-0-0", "1", "node"), pod(tmp_path, "job-node-0-1", "sleep", "node")]
    result, out = run(tmp_path, nodes, job=trainjob())
    assert result.state == "Failed" and result.restarts == 5, out
    assert "backoffLimit 6 reached at the job's failure 6" in result.reason
    assert "on a cluster the training-operator" not in result.reason


def test_a_trainjobs_active_deadline_fails_it(tmp_path):
    result, _ = run(tmp_path, [pod(tmp_path, "job-node-0-0", "sleep", "node")], job=trainjob(activeDeadlineSeconds=1))
    assert result.state == "Failed" and result.reason == "activeDeadlineSeconds 1 exceeded"


def pytorchtrainingjob(**run_policy) -> PyTorchTrainingJobModel:
    return PyTorchTrainingJobModel(
        {"kind": "PyTorchTrainingJob", "metadata": {"name": "job"}, "spec": {"runPolicy": run_policy}}
    )


def test_a_pytorchtrainingjob_succeeds_with_its_first_pod_whatever_the_others_do(tmp_path):
    nodes = [pod(tmp_path, "job-node-0", "0", "node"), pod(tmp_path, "job-node-1", "sleep", "node")]
    result, out = run(tmp_path, nodes, job=pytorchtrainingjob())
    assert result.state == "Succeeded" and result.reason == "the first pod succeeded", out
    assert "job-node-1 still running 0s after the job finished; stopping it" in out


def test_a_pytorchtrainingjobs_exit_code_policy_retries_only_t9ks_codes_by_recreating_the_pod(tmp_path):
    """Under T9k a trainer's code reaches the controller through torchrun (1 for any worker failure); the rule
    itself retries 130, 137, 138 and 143 only, always in a new pod."""
    scratch = tmp_path / "run/pods/job-node-0/volumes/scratch/checkpoint.pt"
    scratch.parent.mkdir(parents=True)
    scratch.write_text("from the first attempt")
    retried, out = run(
        tmp_path, [pod(tmp_path, "job-node-0", "138,kill,0", "node", policy="ExitCode")], job=pytorchtrainingjob()
    )
    assert retried.state == "Succeeded" and retried.restarts == 2, out
    assert (
        "job-node-0 exited with code 137 (SIGKILL); recreating the pod (restartPolicy ExitCode, job restart 2, backoffLimit 3)"
        in out
    )
    assert not scratch.exists(), "a recreated pod starts with empty emptyDirs"
    failed, _ = run(tmp_path, [pod(tmp_path, "job-node-1", "1", "node", policy="ExitCode")], job=pytorchtrainingjob())
    assert failed.reason == "job-node-1 exited with code 1 and restartPolicy ExitCode does not restart it"


def test_a_pytorchtrainingjob_fails_at_its_default_backoff_limit(tmp_path):
    result, _ = run(tmp_path, [pod(tmp_path, "job-node-0", "1", "node")], job=pytorchtrainingjob())
    assert result.state == "Failed" and result.reason.endswith("backoffLimit 3 reached at the job's failure 3")
    assert attempts(tmp_path, "job-node-0") == 3
