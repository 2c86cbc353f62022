"""The benchmark runs end to end and prints every side, the time-to-accuracy ratio, the world-size line
and the throughput lines (no timing asserted), here on a small stand-in for MNIST: scikit-learn's digits in MNIST's files."""

import re
import subprocess
import sys

import pytest
import torch

from tests.support.idx import write_idx_dataset
from tests.support.procs import trainer_env
from trainer.data import load
from trainer.runtime import native_bf16


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


@pytest.mark.slow
def test_benchmark_prints_time_to_accuracy_and_throughput(tmp_path):
    write_idx_dataset(tmp_path / "data", load("digits", tmp_path, download=False), "mnist")
    quick = ["--seed-epochs", "2", "--ours-epochs", "2", "--target", "0.5", "--steps", "4", "--threads", "1"]
    result = benchmark("--data-dir", str(tmp_path / "data"), *quick, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert re.search(
        r"seed pipeline \(its defaults, batch 64\): epoch 1: \d+\.\d s, accuracy 0\.\d{4}; "
        r"epoch 2: \d+\.\d s, accuracy 0\.\d{4}\n",
        out,
    )
    for recipe in ("seed", "fast"):
        assert re.search(
            rf"this trainer --recipe {recipe}: (0\.\d{{4}} at \d+\.\d s \(epoch \d\)|0\.5 not reached in \d epoch)", out
        )
    assert re.search(r"ours to 0\.5 / the seed's first epoch: (\d+\.\d\d|not reached) \(goal: <= 0\.30\)", out)
    # One run per world size, as pods of one job, on one line.
    assert re.search(
        r"--recipe fast at world sizes 1, 2, 4 \(its global batch split among the processes\), threads per "
        r"process 1, 1, 1: 1 process: 0\.\d{4} at \d+\.\d s(, 0\.5 not reached)?; 2 processes: 0\.\d{4} at "
        r"\d+\.\d s(, 0\.5 not reached)?; 4 processes: 0\.\d{4} at \d+\.\d s(, 0\.5 not reached)?\n",
        out,
    )
    assert re.search(r"seed pipeline .*batch 64: +\d+ images/s", out)
    assert re.search(r"this trainer .*batch 64: +\d+ images/s", out)
    assert re.search(r"speedup at batch 64: \d+\.\d\dx \(retired goal: >= 3x\)", out)
    assert re.search(r"= \d+% of the GEMM peak \(retired goal: >= 60%\)", out)
    assert re.search(
        r"kernel floor .*batch 64: \d+ images/s = \d+\.\d\dx the seed; batch 256: \d+% of the GEMM peak", out
    )
    if native_bf16(torch.device("cpu")):
        assert re.search(
            r"with --precision bf16 .*batch 64: \d+ images/s = \d+\.\d\dx the seed; batch 256: \d+ "
            r"images/s = \d+\.\d GFLOP/s = \d+% of the bf16 GEMM peak \(\d+\.\d GFLOP/s\)",
            out,
        )
    else:
        assert "--precision bf16: not measured, this CPU has no bf16 hardware" in out
