"""--cuda-graphs: the training step captured once as a CUDA graph, then replayed.

At batch 128 a step of this model is bound by launching its few dozen kernels, not by their
arithmetic (about 4 ms a step on an H100, docs/benchmark.md); a replay launches them all at once.
A graph replays fixed addresses and shapes, so the step reads its samples through an index tensor
of its own and its learning rate from a tensor on the device. A batch of another size (an epoch's
last, shorter one) runs eagerly, and so do the first steps, which set up what a capture must not
(cuDNN's autotuning, cuBLAS's workspace, SGD's momentum buffers), on a side stream as PyTorch's
CUDA graph notes prescribe.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

from trainer.config import TrainConfig
from trainer.distributed import DistContext
from trainer.failures import LaunchError

WARMUP_STEPS = 3  # eager steps before the capture

Step = Callable[[torch.Tensor, float], torch.Tensor]  # (this rank's part of a batch, its share) -> loss


class Captured(NamedTuple):
    """The graph, and its input, learning rate and output: fixed tensors that replays read and write."""

    graph: torch.cuda.CUDAGraph
    indices: torch.Tensor
    lr: torch.Tensor
    loss: torch.Tensor


class GraphedStep:
    """A drop-in for `step` that replays a graph of it for every batch of `batch_size` samples."""

    def __init__(
        self, step: Step, optimizer: torch.optim.Optimizer, ctx: DistContext, config: TrainConfig, batch_size: int
    ) -> None:
        if ctx.distributed:
            raise LaunchError(
                f"--cuda-graphs runs in a single process (DDP's gradient allreduce is not captured), and this job "
                f"has {ctx.world_size}; drop --cuda-graphs, or run one process"
            )
        if ctx.device.type != "cuda":
            raise LaunchError("--cuda-graphs needs a CUDA GPU, and this process trains on the CPU; drop --cuda-graphs")
        if config.compile:
            raise LaunchError("--cuda-graphs and --compile cannot be combined; give one of them")
        self._step = step
        self._optimizer = optimizer
        self._batch_size = batch_size
        self._warmups_left = WARMUP_STEPS
        self._side_stream = torch.cuda.Stream(ctx.device)
        self._graph: Captured | None = None

    def __call__(self, part: torch.Tensor, share: float) -> torch.Tensor:
        if len(part) != self._batch_size:
            return self._step(part, share)
        if self._warmups_left:
            self._warmups_left -= 1
            return self._on_side_stream(part, share)
        if self._graph is None:
            self._graph = self._capture(part)
        self._graph.indices.copy_(part)
        self._graph.lr.fill_(self._optimizer.param_groups[0]["lr"])  # the float the loop set for this step
        self._graph.graph.replay()
        return self._graph.loss  # overwritten by the next replay

    def _on_side_stream(self, part: torch.Tensor, share: float) -> torch.Tensor:
        main = torch.cuda.current_stream()
        self._side_stream.wait_stream(main)
        with torch.cuda.stream(self._side_stream):
            loss = self._step(part, share)
        main.wait_stream(self._side_stream)
        return loss

    def _capture(self, part: torch.Tensor) -> Captured:
        """Record one step (nothing runs): forward, backward and the optimizer's update, reading
        the graph's index and lr. The param groups keep their float learning rates, so that eager
        steps and checkpoints see plain numbers."""
        index = part.clone()
        groups = self._optimizer.param_groups
        floats = [group["lr"] for group in groups]
        lr = torch.tensor(floats[0], dtype=torch.float32, device=part.device)
        for group in groups:
            group["lr"] = lr
        # Without grads, the captured backward allocates them in the graph's own memory, where
        # every replay writes them anew.
        self._optimizer.zero_grad(set_to_none=True)
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                loss = self._step(index, 1.0)
        finally:
            for group, value in zip(groups, floats, strict=True):
                group["lr"] = value
        return Captured(graph, index, lr, loss)
