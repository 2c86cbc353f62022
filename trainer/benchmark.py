"""`python -m trainer.benchmark` (`make bench`): this trainer against the seed script's input
pipeline, side by side in one process on the same data, model and thread count.

The seed pipeline is re-created faithfully: a torchvision FashionMNIST dataset read from IDX
files (per-sample PIL image + ToTensor), a DataLoader with a DistributedSampler, the model
wrapped in DDP inside a one-rank gloo group, and SGD. Both sides are timed over the same number
of steps after a warm-up, alternating runs so background load hits both alike; the median of
the runs is reported.
"""
from __future__ import annotations

import argparse
import os
import statistics
import struct
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F

from trainer.data import Dataset, load
from trainer.distributed import DistContext
from trainer.loop import TrainConfig, Trainer
from trainer.metrics import Reporter
from trainer.model import TRAIN_FLOPS_PER_IMAGE, Net

SEED_BATCH_SIZE = 64
MFU_BATCH_SIZE = 256
WARMUP_STEPS = 5


def gemm_peak_flops(size: int = 4096, repeats: int = 5) -> float:
    """Best fp32 matrix-multiply rate with the current thread count: the CPU's practical peak."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    best = 0.0
    for _ in range(repeats):
        started = time.perf_counter()
        a @ b
        best = max(best, 2 * size**3 / (time.perf_counter() - started))
    return best


def write_idx_dataset(root: Path, data: Dataset) -> None:
    """Store images as FashionMNIST IDX files, so torchvision's own loader reads them."""
    raw = root / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    for prefix, images, labels in (("train", data.train_images, data.train_labels),
                                   ("t10k", data.test_images, data.test_labels)):
        pixels = images[:, 0]
        pixels = ((pixels - pixels.min()) / (pixels.max() - pixels.min()) * 255).to(torch.uint8)
        count = len(labels)
        (raw / f"{prefix}-images-idx3-ubyte").write_bytes(
            struct.pack(">IIII", 2051, count, 28, 28) + pixels.numpy().tobytes())
        (raw / f"{prefix}-labels-idx1-ubyte").write_bytes(
            struct.pack(">II", 2049, count) + labels.to(torch.uint8).numpy().tobytes())


def seed_pipeline_images_per_second(root: Path, steps: int) -> float:
    """The Kubeflow example's training loop, step for step (logging I/O left out)."""
    from torch.utils.data import DataLoader, DistributedSampler
    from torchvision import datasets, transforms

    train_ds = datasets.FashionMNIST(str(root), train=True, download=False,
                                     transform=transforms.Compose([transforms.ToTensor()]))
    loader = DataLoader(train_ds, batch_size=SEED_BATCH_SIZE, sampler=DistributedSampler(train_ds))
    torch.manual_seed(1)
    model = torch.nn.parallel.DistributedDataParallel(Net())
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.5)
    batches = iter(loader)
    started = None
    for batch_idx in range(WARMUP_STEPS + steps):
        if batch_idx == WARMUP_STEPS:
            started = time.perf_counter()
        data, target = next(batches)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        if batch_idx % 10 == 0:
            loss.item()
    return steps * SEED_BATCH_SIZE / (time.perf_counter() - started)


def trainer_images_per_second(data: Dataset, batch_size: int, steps: int) -> float:
    """This trainer's epoch loop over `steps` batches (after a warm-up epoch)."""
    ctx = DistContext(0, 1, 0, 1, torch.device("cpu"), "gloo")
    torch.manual_seed(1)
    config = TrainConfig(batch_size=batch_size, log_interval=10)
    limited = data.limited(batch_size * steps, None)
    warmup = Trainer(Net(), data.limited(batch_size * WARMUP_STEPS, None), ctx, config, Reporter(False, None), None)
    warmup.train_epoch()
    trainer = Trainer(Net(), limited, ctx, config, Reporter(False, None), None)
    trainer.train_epoch()
    return trainer.progress.train_images / trainer.progress.train_seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer.benchmark", description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=150, help="timed steps per run (default: 150)")
    parser.add_argument("--runs", type=int, default=3, help="alternating runs per side (default: 3)")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="CPU threads for both sides")
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    data = load("synthetic", "unused", download=False)
    seed_runs, trainer_runs, mfu_runs = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        # The seed script always creates a process group, even for one process.
        dist.init_process_group("gloo", init_method=f"file://{tmp}/store", rank=0, world_size=1)
        write_idx_dataset(Path(tmp), data)
        peak = gemm_peak_flops()
        for _ in range(args.runs):
            seed_runs.append(seed_pipeline_images_per_second(Path(tmp), args.steps))
            trainer_runs.append(trainer_images_per_second(data, SEED_BATCH_SIZE, args.steps))
            mfu_runs.append(trainer_images_per_second(data, MFU_BATCH_SIZE, max(20, args.steps // 4)))
        peak = max(peak, gemm_peak_flops())
        dist.destroy_process_group()

    seed, ours, ours_256 = (statistics.median(r) for r in (seed_runs, trainer_runs, mfu_runs))
    achieved = ours_256 * TRAIN_FLOPS_PER_IMAGE
    print(f"threads: {args.threads}, timed steps per run: {args.steps}, runs per side: {args.runs} (medians below)")
    print(f"seed pipeline (DataLoader + ToTensor + DDP), batch {SEED_BATCH_SIZE}: {seed:9.0f} images/s")
    print(f"this trainer (resident tensors),            batch {SEED_BATCH_SIZE}: {ours:9.0f} images/s")
    print(f"speedup at batch {SEED_BATCH_SIZE}: {ours / seed:.2f}x (goal: >= 3x)")
    print(f"fp32 GEMM peak (4096x4096 matmul, same threads): {peak / 1e9:.1f} GFLOP/s")
    print(f"this trainer, batch {MFU_BATCH_SIZE}: {ours_256:.0f} images/s = {achieved / 1e9:.1f} GFLOP/s "
          f"= {100 * achieved / peak:.0f}% of GEMM peak (goal: >= 60%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
