"""`python -m ci.localjob` end to end on the chart's default values (1 Master + 1 Worker, gloo),
with the real trainer on the small bundled digits dataset: undisturbed, elastic with a trainer and a pod
SIGKILLed, and the other job kinds. (tests/localjob/test_chaos.py kills and resumes the default job.)"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.paths import REPO, WORKLOAD_CHART
from tests.support.procs import free_port, spawn, torchrun_workers

pytestmark = pytest.mark.slow

# Where the chart's paths land under the runner's run dir for release mnist in namespace default.
RUN_SUBDIR = Path("volumes/mnist-storage/runs/default/mnist")
KATIB_LINE = re.compile(r"^epoch=\d+ accuracy=\d\.\d{4} val_loss=\d+\.\d{4}$", re.MULTILINE)
SMALL_DATA = {"training.dataset": "digits", "training.checkpointEvery": 5}
UNDISTURBED = {**SMALL_DATA, "training.epochs": 5}


def start_runner(run_dir: Path, *args: str) -> subprocess.Popen:
    small_data = [arg for key, value in SMALL_DATA.items() for arg in ("--set", f"{key}={value}")]
    command = [
        sys.executable,
        "-m",
        "ci.localjob",
        "--run-dir",
        str(run_dir),
        "--port",
        str(free_port()),
        *small_data,
        *args,
    ]
    return spawn(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(runner: subprocess.Popen) -> str:
    output, _ = runner.communicate(timeout=1200)
    return output


@pytest.fixture(scope="module")
def undisturbed_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("localjob-e2e")
    runner = start_runner(run_dir, "--set", f"training.epochs={UNDISTURBED['training.epochs']}")
    output = finish(runner)
    return runner.returncode, output, run_dir / "mnist"


def test_default_job_succeeds(undisturbed_run):
    returncode, output, run_dir = undisturbed_run
    assert returncode == 0, output
    assert "[localjob] PyTorchJob mnist Succeeded: the Master succeeded (restarts: 0" in output
    assert output.rstrip().endswith(f"[localjob] the model and metrics.json are in {run_dir / RUN_SUBDIR / 'model'}")


def test_runner_prints_the_operator_environment_with_local_hosts(undisturbed_run):
    _, output, _ = undisturbed_run
    assert re.search(
        r"mnist-worker-0: PYTHONUNBUFFERED=1 MASTER_PORT=(\d+) PET_MASTER_PORT=\1 MASTER_ADDR=127.0.0.1 "
        r"PET_MASTER_ADDR=127.0.0.1 WORLD_SIZE=2 RANK=1 PET_NODE_RANK=1 PET_NPROC_PER_NODE=1 PET_NNODES=2",
        output,
    ), output


def test_each_replica_logs_with_its_pod_name(undisturbed_run):
    _, output, run_dir = undisturbed_run
    assert "[mnist-master-0] World Size: 2. Rank: 0." in output
    prefixes = {line.split("] ", 1)[0] + "]" for line in output.splitlines()}
    assert prefixes <= {"[localjob]", "[mnist-master-0]", "[mnist-worker-0]"}, prefixes
    assert (run_dir / "logs/mnist-worker-0.log").exists(), "the worker (quiet, not rank 0) has its log too"
    master_log = (run_dir / "logs/mnist-master-0.log").read_text()
    assert len(KATIB_LINE.findall(master_log)) == 5, "one Katib metrics line per epoch in the master log"
    assert "{metricName: accuracy, metricValue: " in master_log


def test_model_and_metrics_are_on_the_claim(undisturbed_run):
    _, _, run_dir = undisturbed_run
    model_dir = run_dir / RUN_SUBDIR / "model"
    metrics = json.loads((model_dir / "metrics.json").read_text())
    assert metrics["world_size"] == 2 and metrics["dataset"] == "digits" and metrics["epochs"] == 5
    assert metrics["accuracy"] == metrics["history"][-1]["accuracy"]
    master_log = (run_dir / "logs/mnist-master-0.log").read_text()
    assert f"epoch=5 accuracy={metrics['accuracy']:.4f} val_loss={metrics['val_loss']:.4f}" in master_log, (
        "metrics.json holds what the last evaluation printed"
    )
    assert (model_dir / "mnist_cnn.pt").stat().st_size > 0
    assert sorted((run_dir / RUN_SUBDIR / "checkpoints" / metrics["run_id"]).glob("checkpoint-*.pt")), (
        "the run's checkpoints on the claim, under its id"
    )


def assert_helm_test_passes(helm, values: dict, model_dir: Path) -> None:
    """The chart's `helm test` pod, as rendered for `values`, run against what the job left in `model_dir`
    on the claim: it finds this run's id and world size in metrics.json."""
    check = next(d for d in helm.render(WORKLOAD_CHART, set_values=values) if d["kind"] == "Pod")["spec"]["containers"][
        0
    ]
    _, min_accuracy, _, run_id, world_size = check["args"]
    assert json.loads((model_dir / "metrics.json").read_text())["run_id"] == run_id
    result = subprocess.run(
        [sys.executable, "-c", check["command"][2], str(model_dir), min_accuracy, "1", run_id, world_size],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "OK: accuracy" in result.stdout and f"world size {world_size};" in result.stdout


def test_the_helm_test_check_passes_on_the_result(undisturbed_run, helm):
    _, _, run_dir = undisturbed_run
    assert_helm_test_passes(helm, UNDISTURBED, run_dir / RUN_SUBDIR / "model")


def wait_for_a_checkpoint(runner: subprocess.Popen, run_dir: Path, seen: set[Path]) -> set[Path]:
    """Wait until the job writes a checkpoint not in `seen`; every checkpoint there then."""
    checkpoints = run_dir / "mnist" / RUN_SUBDIR / "checkpoints"
    while not (found := set(checkpoints.glob("*/checkpoint-*.pt"))) - seen:
        assert runner.poll() is None, f"the job ended before its next checkpoint:\n{finish(runner)}"
        time.sleep(0.05)
    return found


def test_elastic_job_restarts_a_worker_group_in_its_pod_and_survives_losing_a_pod(tmp_path):
    """ci/elastic-cpu-values.yaml: torchrun in all three pods, c10d rendezvous on worker-0 (→ 127.0.0.1).
    A trainer process SIGKILLed under elastic torchrun: its agent restarts the worker group in the same
    pods (no pod restart), which joins a new rendezvous round and resumes. Then worker-1's pod is
    SIGKILLed: on a cluster only worker-0, which the rendezvous endpoint names, serves torchrun's c10d
    store; here every pod is 127.0.0.1, and a store that landed in worker-1 went down with it for every pod."""
    runner = start_runner(
        tmp_path, "-f", str(WORKLOAD_CHART / "ci/elastic-cpu-values.yaml"), "--set", "training.epochs=6"
    )
    seen = wait_for_a_checkpoint(runner, tmp_path, set())
    (trainer,) = torchrun_workers(int((tmp_path / "mnist/pods/mnist-worker-0/pid").read_text()))
    os.kill(trainer, signal.SIGKILL)
    wait_for_a_checkpoint(runner, tmp_path, seen)
    os.kill(int((tmp_path / "mnist/pods/mnist-worker-1/pid").read_text()), signal.SIGKILL)
    output = finish(runner)
    assert runner.returncode == 0, output
    assert re.search(
        r"mnist-worker-1: .*PET_RDZV_ENDPOINT=127\.0\.0\.1:\d+ PET_RDZV_BACKEND=c10d PET_NNODES=3:3 "
        r"PET_MAX_RESTARTS=3",
        output,
    ), output
    # The rendezvous, not the pod, decides which process is global rank 0.
    assert re.search(r"^\[mnist-(master|worker)-\d\] World Size: 3\. Rank: 0\.", output, re.MULTILINE), output
    assert "Gloo connectFullMesh failed" not in output
    assert re.search(r"\[mnist-(master|worker)-\d\] Resumed from .*checkpoint-\d+\.pt", output), output
    assert "mnist-worker-1 exited with code 137 (SIGKILL); restarting it" in output
    # One pod restart, worker-1's: worker-0's agent restarted its trainer in the pod.
    assert "PyTorchJob mnist Succeeded: the Master succeeded (restarts: 1," in output
    assert json.loads((tmp_path / "mnist" / RUN_SUBDIR / "model/metrics.json").read_text())["epochs"] == 6


def test_divergence_fails_at_once_under_restart_policy_exit_code(tmp_path):
    """Every restart would diverge again: the trainer's permanent exit code ends the job without one."""
    runner = start_runner(
        tmp_path,
        "--set",
        "restartPolicy=ExitCode",
        "--set-string",
        "training.lr=1e12",
        "--set",
        "training.momentum=0.9",
    )
    output = finish(runner)
    assert runner.returncode == 1, output
    assert "the model diverged. Lower --lr" in output
    assert re.search(
        r"PyTorchJob mnist Failed: mnist-(master|worker)-0 exited with code 1 and restartPolicy "
        r"ExitCode does not restart it",
        output,
    ), output


def test_other_values_train_a_run_of_their_own_and_the_same_values_resume_theirs(tmp_path):
    """As when Argo CD replaces a finished job whose values changed in Git: the new values do not
    meet the finished run's checkpoints, which the trainer would refuse to resume."""

    def run(*values: str) -> str:
        runner = start_runner(tmp_path, "--set", "training.epochs=1", *values)
        output = finish(runner)
        assert runner.returncode == 0, output
        return output

    run()
    other_lr = run("--set-string", "training.lr=0.02")
    assert "Resumed from" not in other_lr and "Train Epoch: 1" in other_lr
    again = run("--set-string", "training.lr=0.02")
    assert "nothing is left to train" in again and "Train Epoch" not in again
    assert len(list((tmp_path / "mnist" / RUN_SUBDIR / "checkpoints").iterdir())) == 2, "one directory per run"


def test_trainjob_one_plus_one_completes_with_the_torch_plugins_env(tmp_path):
    """`make run RUN_FLAGS="--set jobKind=TrainJob"`: two nodes through torchrun, which reads only PET_*."""
    runner = start_runner(tmp_path, "--set", "jobKind=TrainJob", "--set", "training.epochs=2")
    output = finish(runner)
    run_dir = tmp_path / "mnist"
    assert runner.returncode == 0, output
    for rank in range(2):
        assert re.search(
            rf"^\[localjob\] mnist-node-0-{rank}: PET_NNODES=2 PET_NPROC_PER_NODE=1 PET_NODE_RANK={rank} "
            r"PET_MASTER_ADDR=127\.0\.0\.1 PET_MASTER_PORT=\d+$",
            output,
            re.MULTILINE,
        ), output
    assert "[mnist-node-0-0] World Size: 2. Rank: 0." in output
    prefixes = {line.split("] ", 1)[0] + "]" for line in output.splitlines()}
    assert prefixes <= {"[localjob]", "[mnist-node-0-0]", "[mnist-node-0-1]"}, prefixes
    assert "[localjob] TrainJob mnist Complete: every node succeeded (restarts: 0" in output
    model_dir = run_dir / RUN_SUBDIR / "model"
    assert output.rstrip().endswith(f"[localjob] the model and metrics.json are in {model_dir}")
    metrics = json.loads((model_dir / "metrics.json").read_text())
    assert metrics["world_size"] == 2 and metrics["epochs"] == 2 and metrics["dataset"] == "digits"
    assert (model_dir / "mnist_cnn.pt").stat().st_size > 0
    assert f"epoch=2 accuracy={metrics['accuracy']:.4f}" in (run_dir / "logs/mnist-node-0-0.log").read_text()


def test_pytorchtrainingjob_of_three_pods_succeeds_through_t9ks_torchrun(tmp_path, helm):
    """`make run RUN_FLAGS="--set jobKind=PyTorchTrainingJob --set workers=2"`: T9k's torchrun mode, in which
    three pods' torchruns meet at the runner's rendezvous on the first pod, and the first pod's success is
    the job's; the chart's `helm test` check passes on what it left."""
    values = {"jobKind": "PyTorchTrainingJob", "workers": 2, "training.epochs": 2}
    runner = start_runner(tmp_path, *(arg for key, value in values.items() for arg in ("--set", f"{key}={value}")))
    output = finish(runner)
    run_dir = tmp_path / "mnist"
    assert runner.returncode == 0, output
    assert "[localjob] PyTorchTrainingJob mnist: 3 pods (node ×3), torchrun --nproc-per-node=1 in each;" in output
    for pod in range(3):
        assert re.search(
            rf"^\[localjob\] mnist-node-{pod}: --rdzv-endpoint=mnist-node-0:\d+ \(runner's choice", output, re.M
        ), output
    assert re.search(r"^\[mnist-node-\d\] World Size: 3\. Rank: 0\.", output, re.MULTILINE), output
    prefixes = {line.split("] ", 1)[0] + "]" for line in output.splitlines()}
    assert prefixes <= {"[localjob]", "[mnist-node-0]", "[mnist-node-1]", "[mnist-node-2]"}, prefixes
    assert "[localjob] PyTorchTrainingJob mnist Succeeded: the first pod succeeded (restarts: 0," in output
    model_dir = run_dir / RUN_SUBDIR / "model"
    metrics = json.loads((model_dir / "metrics.json").read_text())
    assert (metrics["world_size"], metrics["epochs"], metrics["dataset"]) == (3, 2, "digits")
    assert f"epoch=2 accuracy={metrics['accuracy']:.4f}" in output
    assert_helm_test_passes(helm, {**SMALL_DATA, **values}, model_dir)
