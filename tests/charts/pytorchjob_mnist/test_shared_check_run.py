"""The chart's `helm test` check (files/check_run.py) passes a finished run and names what is
wrong otherwise. The e2e test in tests/localjob runs it on a real run's output."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import torch

from tests.support.paths import REPO, WORKLOAD_CHART

SCRIPT = (WORKLOAD_CHART / "files" / "check_run.py").read_text()


def check(model_dir, min_accuracy="0.5", timeout="0", run_id="run-b", world_size="2") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, str(model_dir), min_accuracy, timeout, run_id, world_size],
        capture_output=True,
        text=True,
    )


@pytest.fixture
def finished_run(tmp_path):
    (tmp_path / "metrics.json").write_text(
        json.dumps(
            {
                "run_id": "run-b",
                "accuracy": 0.9,
                "val_loss": 0.3,
                "world_size": 2,
                "dataset": "fashion-mnist",
                "epochs": 1,
            }
        )
    )
    torch.save(torch.nn.Linear(2, 2).state_dict(), tmp_path / "mnist_cnn.pt")
    return tmp_path


def test_a_finished_run_passes(finished_run):
    result = check(finished_run)
    assert result.returncode == 0, result.stderr
    assert "OK: accuracy 0.9000 >= 0.5; world size 2;" in result.stdout and "holds 2 tensors" in result.stdout


def test_a_run_in_another_world_size_fails(finished_run):
    """Pods that did not get the operator's environment each train alone, and their job succeeds."""
    result = check(finished_run, world_size="4")
    assert result.returncode == 1
    assert "the run trained in a world of 2 processes, but the job has 4 (pods x nprocPerNode)" in result.stderr


def test_without_a_world_size_any_size_passes(finished_run):
    """Elastic jobs and nprocPerNode auto/cpu/gpu have no fixed size, so the chart passes an empty one."""
    result = check(finished_run, world_size="")
    assert result.returncode == 0, result.stderr


def test_low_accuracy_fails(finished_run):
    result = check(finished_run, min_accuracy="0.95")
    assert result.returncode == 1
    assert "accuracy 0.9000 after 1 epoch(s) on fashion-mnist is below tests.minAccuracy 0.95" in result.stderr
    assert "digits" not in result.stderr


def test_low_accuracy_on_digits_says_how_many_epochs_it_needs(finished_run):
    """The seed recipe's one epoch on the offline fallback reaches about 0.28, below the default bar."""
    metrics = json.loads((finished_run / "metrics.json").read_text())
    (finished_run / "metrics.json").write_text(json.dumps({**metrics, "dataset": "digits", "accuracy": 0.28}))
    result = check(finished_run)
    assert result.returncode == 1 and "digits is small" in result.stderr and "raise training.epochs" in result.stderr


def test_the_digits_hint_quotes_the_figures_measured_in_docs_running_locally():
    """The check runs in the cluster, far from the docs, so its hint quotes accuracies on digits; their
    home is docs/running-locally.md, and each figure quoted must be one measured there, rounded."""
    hint = SCRIPT[SCRIPT.index("digits is small") : SCRIPT.index("raise training.epochs")]
    docs = (REPO / "docs" / "running-locally.md").read_text()
    measured = re.findall(r"\b0\.\d+", docs[docs.index("On `digits`") :].split("\n\n", 1)[0])
    quoted = re.findall(r"\b0\.\d+", hint)
    assert quoted, hint
    for figure in quoted:
        places = len(figure) - 2
        assert any(f"{float(m):.{places}f}" == figure for m in measured), f"{figure} is not among {measured}"


def test_missing_model_fails(finished_run):
    (finished_run / "mnist_cnn.pt").unlink()
    result = check(finished_run)
    assert result.returncode == 1 and "mnist_cnn.pt is missing" in result.stderr


def test_unfinished_run_times_out_with_a_hint(tmp_path):
    result = check(tmp_path, timeout="0")
    assert result.returncode == 1
    assert (
        "metrics.json of run run-b did not appear within 0s; is the job still running, or did it fail?" in result.stderr
    )


def test_the_check_waits_for_a_run_that_finishes_later(finished_run, tmp_path_factory):
    """`helm test` right after the install: the pod polls until the run writes its results."""
    model_dir = tmp_path_factory.mktemp("model")
    waiting = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(model_dir), "0.5", "120", "run-b", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert waiting.stdout.readline() == f"waiting for {model_dir / 'metrics.json'} …\n"
        for name in ("mnist_cnn.pt", "metrics.json"):  # the trainer's order: metrics.json last
            (model_dir / name).write_bytes((finished_run / name).read_bytes())
        output, errors = waiting.communicate(timeout=60)
    finally:
        waiting.kill()
    assert waiting.returncode == 0, errors
    assert "OK: accuracy 0.9000 >= 0.5; world size 2;" in output


def test_an_earlier_runs_metrics_do_not_pass(finished_run):
    """After `kubectl delete pytorchjob` and `helm upgrade`, the old run's file is still on the volume."""
    result = check(finished_run, run_id="run-c")
    assert result.returncode == 1
    assert "waiting for run run-c: " in result.stdout and "is from run run-b" in result.stdout
    assert "metrics.json of run run-c did not appear within 0s" in result.stderr


def test_without_a_run_id_any_finished_run_passes(finished_run):
    """Custom `args` may not pass --run-id to the trainer, so the chart passes an empty one."""
    result = check(finished_run, run_id="")
    assert result.returncode == 0, result.stderr


def test_metrics_without_a_run_id_are_named_as_such(finished_run):
    metrics = finished_run / "metrics.json"
    metrics.write_text(json.dumps({"accuracy": 0.9, "val_loss": 0.3}))
    result = check(finished_run)
    assert result.returncode == 1 and "records no run id (an older trainer wrote it)" in result.stdout
