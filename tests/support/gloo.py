"""Run test code as one rank of a real gloo process group, started by torch.multiprocessing.spawn."""

from __future__ import annotations

import datetime
from collections.abc import Callable

import torch
import torch.distributed as dist

from trainer.distributed import DistContext, shutdown

# A rank whose work failed leaves its peers at the closing barrier: they give up after this, not
# after the default 30 minutes.
TIMEOUT = datetime.timedelta(seconds=120)

ONE_RANK = DistContext(0, 1, 0, 1, torch.device("cpu"), "gloo")  # a single process: no group needed


def run_rank(rank: int, world: int, store_path, work: Callable[..., None], *args) -> None:
    """Call work(ctx, *args) on this rank, then leave the group as the CLI does.

    Whatever work built (a model, a DDP wrapper) is freed when it returns, and the ranks meet once
    more before the group is destroyed: a DDP wrapper that outlives its group has aborted a rank
    at exit ("terminate called without an active exception", SIGABRT).
    """
    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=world, timeout=TIMEOUT)
    ctx = DistContext(rank, world, 0, 1, torch.device("cpu"), "gloo")
    work(ctx, *args)
    ctx.all_reduce_sum(torch.zeros(1))
    shutdown(ctx)
