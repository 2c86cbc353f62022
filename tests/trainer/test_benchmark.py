"""The benchmark runs end to end and measures every side (no timing asserted, nor the report's wording), here
on a small stand-in for MNIST: scikit-learn's digits in MNIST's files."""

import subprocess
import sys

import pytest

from tests.support.idx import write_idx_dataset
from tests.support.procs import trainer_env
from trainer.data import load


def benchmark(*flags: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trainer.benchmark", *flags],
        cwd=cwd,
        env=trainer_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_without_mnist_the_benchmark_says_how_to_get_it(tmp_path):
    result = benchmark("--data-dir", str(tmp_path / "none"), cwd=tmp_path)
    assert result.returncode == 2
    assert "--data-dir: real MNIST is not in" in result.stderr
    assert "run `make data`" in result.stderr


# What each measurement's line starts with: the benchmark reports a side that fails as "failed" and goes on.
SIDES = (
    "seed pipeline (its defaults, batch 64): epoch 1:",
    "this trainer --recipe seed: ",
    "this trainer --recipe fast: ",
    "1 process: ",
    "2 processes: ",
    "4 processes: ",
    "speedup at batch 64: ",
)


@pytest.mark.slow
def test_benchmark_measures_every_side(tmp_path):
    write_idx_dataset(tmp_path / "data", load("digits", tmp_path, download=False), "mnist")
    quick = ["--seed-epochs", "1", "--ours-epochs", "1", "--target", "0.5", "--steps", "4", "--threads", "1"]
    result = benchmark("--data-dir", str(tmp_path / "data"), *quick, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "failed" not in result.stdout, result.stdout
    assert [side for side in SIDES if side not in result.stdout] == [], result.stdout
