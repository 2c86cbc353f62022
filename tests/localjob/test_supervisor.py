"""The runner's restart and completion rules, with tiny Python processes standing in for replicas."""
from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import pytest

from ci.localjob.pods import LocalPod
from ci.localjob.supervisor import JobRunner, exit_code, retryable

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
if code == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
if code == "pid":
    pid_file = pathlib.Path(sys.argv[2])
    sys.exit(0 if pid_file.read_text().strip() == str(os.getpid()) else 5)
sys.exit(int(code))
"""


def pod(tmp_path: Path, name: str, codes: str, replica_type: str = "Master", policy: str = "OnFailure",
        extra: tuple[str, ...] = ()) -> LocalPod:
    cwd = tmp_path / name
    return LocalPod(name, replica_type, 0, (sys.executable, "-c", SCRIPT, codes, *extra), {"PATH": "/usr/bin"}, (),
                    cwd, policy, ())


def run(tmp_path: Path, pods: list[LocalPod], backoff_limit: int | None = 3, **kwargs):
    out = io.StringIO()
    result = JobRunner("job", pods, tmp_path / "run", backoff_limit=backoff_limit, grace_seconds=0,
                       out=out, **kwargs).run()
    return result, out.getvalue()


def attempts(tmp_path: Path, name: str) -> int:
    return len(list((tmp_path / name / "attempts").iterdir()))


def test_exit_codes_and_retry_rules():
    assert exit_code(-9) == 137 and exit_code(3) == 3
    assert retryable("OnFailure", 1) and retryable("ExitCode", 137)
    assert not retryable("ExitCode", 1) and not retryable("Never", 137)


def test_on_failure_restarts_until_success(tmp_path):
    result, out = run(tmp_path, [pod(tmp_path, "job-master-0", "1,1,0")])
    assert result.state == "Succeeded" and result.restarts == 2
    assert attempts(tmp_path, "job-master-0") == 3
    assert "[job-master-0] attempt 2" in out
    assert "job-master-0 exited with code 1; restarting it (restartPolicy OnFailure, job restart 1, backoffLimit 3)" in out
    assert (tmp_path / "run/logs/job-master-0.log").read_text() == "attempt 0\nattempt 1\nattempt 2\n"


@pytest.mark.parametrize("limit, failures", [(0, 1), (1, 1), (3, 3)])
def test_backoff_limit_fails_the_job_when_the_restarts_reach_it(tmp_path, limit, failures):
    """As the operator: it fails the job once the pods' restart counts add up to backoffLimit."""
    result, _ = run(tmp_path, [pod(tmp_path, "job-master-0", "1")], backoff_limit=limit)
    assert result.state == "Failed" and f"backoffLimit {limit} reached" in result.reason
    assert attempts(tmp_path, "job-master-0") == failures


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
    result, _ = run(tmp_path, [pod(tmp_path, "job-master-0", "0", policy="OnFailure"),
                               pod(tmp_path, "job-worker-0", "2,0", "Worker", policy="Never")])
    assert result.state == "Failed" and "job-worker-0 exited with code 2" in result.reason


def test_master_success_decides_and_stragglers_are_stopped(tmp_path):
    result, out = run(tmp_path, [pod(tmp_path, "job-master-0", "0"), pod(tmp_path, "job-worker-0", "sleep", "Worker")])
    assert result.state == "Succeeded" and result.reason == "the Master succeeded"
    assert "job-worker-0 still running 0s after the job finished; stopping it" in out


def test_without_master_every_worker_must_succeed_unless_elastic(tmp_path):
    workers = [pod(tmp_path, "job-worker-0", "0", "Worker"), pod(tmp_path, "job-worker-1", "sleep", "Worker")]
    result, _ = run(tmp_path, workers, elastic=True)
    assert result.state == "Succeeded" and result.reason == "the Workers succeeded"


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


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs CPU affinity (Linux) and at least 2 CPUs")
def test_each_pod_runs_on_its_own_cpus(tmp_path):
    first, second = sorted(os.sched_getaffinity(0))[:2]
    check = "import os, sys; sys.exit(0 if os.sched_getaffinity(0) == {%d} else 7)"
    pods = [LocalPod(name, kind, 0, (sys.executable, "-c", check % cpu), {"PATH": "/usr/bin"}, (),
                     tmp_path / name, "Never", (), (cpu,))
            for name, kind, cpu in (("job-master-0", "Master", first), ("job-worker-0", "Worker", second))]
    result, _ = run(tmp_path, pods)
    assert result.state == "Succeeded", result.reason
