"""The benchmark runs end to end and prints both sides and the ratios (no timing asserted)."""

import re
import subprocess
import sys

import pytest
import torch

from tests.support.procs import trainer_env
from trainer.runtime import native_bf16

pytestmark = pytest.mark.slow


def test_benchmark_prints_both_throughputs_and_ratios(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "trainer.benchmark", "--steps", "4", "--runs", "1", "--threads", "1"],
        cwd=tmp_path,
        env=trainer_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert re.search(r"seed pipeline .*batch 64: +\d+ images/s", out)
    assert re.search(r"this trainer .*batch 64: +\d+ images/s", out)
    assert re.search(r"speedup at batch 64: \d+\.\d\dx", out)
    assert re.search(r"= \d+% of the GEMM peak", out)
    assert re.search(
        r"kernel floor .*batch 64: \d+ images/s = \d+\.\d\dx the seed; "
        r"batch 256: \d+% of the GEMM peak",
        out,
    )
    if native_bf16(torch.device("cpu")):
        assert re.search(
            r"with --precision bf16 .*batch 64: \d+ images/s = \d+\.\d\dx the seed; batch 256: \d+ "
            r"images/s = \d+\.\d GFLOP/s = \d+% of the bf16 GEMM peak \(\d+\.\d GFLOP/s\)",
            out,
        )
    else:
        assert "--precision bf16: not measured, this CPU has no bf16 hardware" in out
