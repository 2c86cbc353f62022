"""Exact distributed evaluation, checked in real gloo process groups of 1-3 ranks."""

import json

import pytest
import torch
import torch.multiprocessing as mp

from tests.support.gloo import ONE_RANK, run_rank
from trainer.data import Dataset
from trainer.distributed import DistContext
from trainer.loop import evaluate
from trainer.model import Net

TEST_SIZE = 1001  # divisible by neither 2 nor 3: a padding sampler would double-count


def _dataset() -> Dataset:
    g = torch.Generator().manual_seed(3)
    images = torch.randn(TEST_SIZE, 1, 28, 28, generator=g)
    labels = torch.randint(0, 10, (TEST_SIZE,), generator=g)
    return Dataset("t", images[:1], labels[:1], images, labels)


def _evaluate(ctx: DistContext, out_dir) -> None:
    torch.manual_seed(0)
    result = evaluate(Net(), _dataset(), ctx, batch_size=128)
    (out_dir / f"{ctx.rank}.json").write_text(json.dumps(result.__dict__))


@pytest.fixture(scope="module")
def single_process_result():
    torch.manual_seed(0)
    ctx = ONE_RANK
    return evaluate(Net(), _dataset(), ctx, batch_size=128)


def test_single_process_counts_every_sample(single_process_result):
    assert single_process_result.count == TEST_SIZE


@pytest.mark.parametrize("world", [2, 3])
def test_distributed_evaluation_equals_single_process(tmp_path, world, single_process_result):
    mp.spawn(run_rank, args=(world, tmp_path / "store", _evaluate, tmp_path), nprocs=world, join=True)
    results = [json.loads((tmp_path / f"{r}.json").read_text()) for r in range(world)]
    for result in results:
        assert result["count"] == TEST_SIZE
        assert result["accuracy"] == single_process_result.accuracy
        assert result["loss"] == pytest.approx(single_process_result.loss, rel=1e-6)
