"""`python -m trainer.benchmark` (`make bench`): this trainer against the seed script's
pipeline, side by side in one process tree, on the same data, model, batch size and threads.

The seed side re-creates the Kubeflow example faithfully: torchvision's FashionMNIST read from
IDX files (a PIL image and ToTensor per sample), a DataLoader with a DistributedSampler, the
model in DDP inside a one-rank gloo group, and SGD. Each side runs in its own child process,
set up as its program would be (this trainer applies its runtime tuning, the seed script none).
Runs alternate between the sides so background load hits both alike; medians are reported.
A kernel floor (the model's convolutions and matmuls alone) shows how far either goal can go on
PyTorch's CPU kernels. On CPUs with bf16 hardware, the trainer's opt-in --precision bf16 is
measured too, against the seed and against a bf16 GEMM peak; the goals stay fp32's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from trainer.data import IDX_FILES, IMAGE_SIZE, Dataset, load, raw_folder
from trainer.distributed import DistContext
from trainer.loop import TrainConfig, new_trainer
from trainer.metrics import Reporter
from trainer.model import MEMORY_FORMAT, TRAIN_FLOPS_PER_IMAGE, Net
from trainer.runtime import native_bf16

SEED_BATCH_SIZE = 64
MFU_BATCH_SIZE = 256
WARMUP_STEPS = 5


def _best_seconds(run, calls: int = 1, repeats: int = 5) -> float:
    """Fastest mean time of `calls` back-to-back runs, over `repeats` tries after one warm-up."""
    run()
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(calls):
            run()
        best = min(best, (time.perf_counter() - started) / calls)
    return best


def gemm_peak_flops(dtype: torch.dtype, size: int = 4096) -> float:
    """Best matrix-multiply rate in `dtype` with the current thread count: the CPU's practical peak."""
    a, b = torch.randn(size, size, dtype=dtype), torch.randn(size, size, dtype=dtype)
    return 2 * size**3 / _best_seconds(lambda: a @ b)


def kernel_floor_images_per_second(batch_size: int) -> float:
    """Images/s if a training step ran nothing but its convolution and matmul kernels (forward,
    input and weight gradients), each timed alone at its best. No trainer built on PyTorch's CPU
    kernels can be faster: pooling, activations, loss and optimizer only add to them."""
    net = Net().to(memory_format=MEMORY_FORMAT)
    images = torch.randn(batch_size, 1, 28, 28).contiguous(memory_format=MEMORY_FORMAT)
    seen = []  # (layer, its input, its output), in forward order
    hooks = [
        layer.register_forward_hook(lambda layer, args, output: seen.append((layer, args[0], output)))
        for layer in net.modules()
        if isinstance(layer, (nn.Conv2d, nn.Linear))
    ]
    kernels = []
    with torch.no_grad():
        net(images)
        for hook in hooks:
            hook.remove()
        for layer, inputs, output in seen:
            grad, weight = torch.randn_like(output), layer.weight
            input_grad = inputs is not images  # the pixels need none
            if isinstance(layer, nn.Conv2d):
                kernels.append(partial(F.conv2d, inputs, weight, None, layer.stride, layer.padding))
                kernels.append(
                    partial(
                        torch.ops.aten.convolution_backward,
                        grad,
                        inputs,
                        weight,
                        [layer.out_channels],
                        layer.stride,
                        layer.padding,
                        layer.dilation,
                        False,
                        [0, 0],
                        layer.groups,
                        [input_grad, True, False],
                    )
                )
            else:
                kernels.append(partial(torch.mm, inputs, weight.t()))
                kernels.append(partial(torch.mm, grad.t(), inputs))
                if input_grad:
                    kernels.append(partial(torch.mm, grad, weight))
        calls = max(4, 2048 // batch_size)
        return batch_size / sum(_best_seconds(kernel, calls) for kernel in kernels)


def write_idx_dataset(root: Path, data: Dataset, name: str = "fashion-mnist") -> None:
    """Store `data` as IDX files (rescaled to bytes) where torchvision's loader of `name` reads them."""
    raw = raw_folder(name, root)
    raw.mkdir(parents=True, exist_ok=True)
    train_images, train_labels, test_images, test_labels = IDX_FILES
    for images_file, labels_file, images, labels in (
        (train_images, train_labels, data.train_images, data.train_labels),
        (test_images, test_labels, data.test_images, data.test_labels),
    ):
        pixels = images[:, 0]
        pixels = ((pixels - pixels.min()) / (pixels.max() - pixels.min()) * 255).to(torch.uint8)
        (raw / images_file).write_bytes(
            struct.pack(">IIII", 2051, len(labels), IMAGE_SIZE, IMAGE_SIZE) + pixels.numpy().tobytes()
        )
        (raw / labels_file).write_bytes(
            struct.pack(">II", 2049, len(labels)) + labels.to(torch.uint8).numpy().tobytes()
        )


def seed_images_per_second(root: Path, steps: int) -> float:
    """The Kubeflow example's training loop, step for step (its logging I/O left out)."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{root}/store", rank=0, world_size=1)
    try:
        return _seed_training_loop(root, steps)  # which frees its DDP wrapper before the group goes
    finally:
        dist.destroy_process_group()


def _seed_training_loop(root: Path, steps: int) -> float:
    from torch.utils.data import DataLoader, DistributedSampler
    from torchvision import datasets, transforms

    train_ds = datasets.FashionMNIST(
        str(root), train=True, download=False, transform=transforms.Compose([transforms.ToTensor()])
    )
    loader = DataLoader(train_ds, batch_size=SEED_BATCH_SIZE, sampler=DistributedSampler(train_ds))
    torch.manual_seed(1)
    model = torch.nn.parallel.DistributedDataParallel(Net())
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.5)
    batches = iter(loader)
    for batch_idx in range(WARMUP_STEPS + steps):
        if batch_idx == WARMUP_STEPS:
            started = time.perf_counter()
        data, target = next(batches)
        optimizer.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        optimizer.step()
        if batch_idx % 10 == 0:
            loss.item()
    return steps * SEED_BATCH_SIZE / (time.perf_counter() - started)


def trainer_images_per_second(data: Dataset, batch_size: int, steps: int, precision: str) -> float:
    """This trainer's epoch loop, as `mnist-train --precision PRECISION` sets it up, over `steps` batches."""
    ctx = DistContext(0, 1, 0, 1, torch.device("cpu"), "gloo")
    config = TrainConfig(batch_size=batch_size, precision=precision)
    for limit in (WARMUP_STEPS, steps):
        trainer = new_trainer(data.limited(batch_size * limit, None), ctx, config, Reporter(False, None), None)
        trainer.train_epoch()
    return trainer.progress.images_per_second


def _measure(side: str, batch_size: int, steps: int, root: Path, precision: str) -> float:
    if side == "gemm":
        return gemm_peak_flops(torch.bfloat16 if precision == "bf16" else torch.float32)
    if side == "seed":
        return seed_images_per_second(root, steps)
    if side == "floor":
        return kernel_floor_images_per_second(batch_size)
    return trainer_images_per_second(load("synthetic", root, download=False), batch_size, steps, precision)


def _child(side: str, batch_size: int, steps: int, root: Path, threads: int, precision: str = "fp32") -> float:
    command = [
        sys.executable,
        "-m",
        "trainer.benchmark",
        "--side",
        side,
        "--batch-size",
        str(batch_size),
        "--steps",
        str(steps),
        "--root",
        str(root),
        "--threads",
        str(threads),
        "--precision",
        precision,
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])["value"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer.benchmark", description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=150, help="timed steps per run at batch 64 (default: 150)")
    parser.add_argument("--runs", type=int, default=3, help="alternating runs per side (default: 3)")
    parser.add_argument(
        "--threads",
        type=int,
        default=len(os.sched_getaffinity(0)),
        help="CPU threads for every side (default: all usable CPUs)",
    )
    parser.add_argument("--side", choices=("seed", "trainer", "gemm", "floor"), help=argparse.SUPPRESS)
    parser.add_argument("--batch-size", type=int, default=SEED_BATCH_SIZE, help=argparse.SUPPRESS)
    parser.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.side:
        print(json.dumps({"value": _measure(args.side, args.batch_size, args.steps, args.root, args.precision)}))
        return 0

    mfu_steps = max(20, args.steps // 4)
    with_bf16 = native_bf16(torch.device("cpu"))
    seed, ours, ours_mfu, peaks, floors, floors_mfu = [], [], [], [], [], []
    bf16, bf16_mfu, bf16_peaks = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_idx_dataset(root, load("synthetic", root, download=False))
        for _ in range(args.runs):
            seed.append(_child("seed", SEED_BATCH_SIZE, args.steps, root, args.threads))
            ours.append(_child("trainer", SEED_BATCH_SIZE, args.steps, root, args.threads))
            ours_mfu.append(_child("trainer", MFU_BATCH_SIZE, mfu_steps, root, args.threads))
            peaks.append(_child("gemm", 0, 0, root, args.threads))
            floors.append(_child("floor", SEED_BATCH_SIZE, 0, root, args.threads))
            floors_mfu.append(_child("floor", MFU_BATCH_SIZE, 0, root, args.threads))
            if with_bf16:
                bf16.append(_child("trainer", SEED_BATCH_SIZE, args.steps, root, args.threads, "bf16"))
                bf16_mfu.append(_child("trainer", MFU_BATCH_SIZE, mfu_steps, root, args.threads, "bf16"))
                bf16_peaks.append(_child("gemm", 0, 0, root, args.threads, "bf16"))

    seed_ips, ours_ips, mfu_ips = (statistics.median(r) for r in (seed, ours, ours_mfu))
    peak, floor_ips, floor_mfu_ips = max(peaks), max(floors), max(floors_mfu)
    achieved = mfu_ips * TRAIN_FLOPS_PER_IMAGE
    print(
        f"threads per side: {args.threads}; runs per side: {args.runs} (medians); "
        f"timed steps: {args.steps} at batch {SEED_BATCH_SIZE}, {mfu_steps} at batch {MFU_BATCH_SIZE}"
    )
    print(f"seed pipeline (DataLoader + ToTensor + DDP), batch {SEED_BATCH_SIZE}: {seed_ips:8.0f} images/s")
    print(f"this trainer (resident tensors),            batch {SEED_BATCH_SIZE}: {ours_ips:8.0f} images/s")
    print(f"speedup at batch {SEED_BATCH_SIZE}: {ours_ips / seed_ips:.2f}x (goal: >= 3x)")
    print(f"fp32 GEMM peak (4096x4096 matmul, best of {args.runs} runs): {peak / 1e9:.1f} GFLOP/s")
    print(
        f"this trainer, batch {MFU_BATCH_SIZE}: {mfu_ips:.0f} images/s x {TRAIN_FLOPS_PER_IMAGE / 1e6:.2f} MFLOP "
        f"= {achieved / 1e9:.1f} GFLOP/s = {100 * achieved / peak:.0f}% of the GEMM peak (goal: >= 60%)"
    )
    print(
        f"kernel floor (only the convolution and matmul kernels, each at its best alone): "
        f"batch {SEED_BATCH_SIZE}: {floor_ips:.0f} images/s = {floor_ips / seed_ips:.2f}x the seed; "
        f"batch {MFU_BATCH_SIZE}: {100 * floor_mfu_ips * TRAIN_FLOPS_PER_IMAGE / peak:.0f}% of the GEMM peak"
    )
    if not with_bf16:
        print("--precision bf16: not measured, this CPU has no bf16 hardware (AVX512_BF16)")
        return 0
    bf16_ips, bf16_mfu_ips, bf16_peak = statistics.median(bf16), statistics.median(bf16_mfu), max(bf16_peaks)
    bf16_achieved = bf16_mfu_ips * TRAIN_FLOPS_PER_IMAGE
    print(
        f"this trainer with --precision bf16 (opt-in; the goals are fp32's), batch {SEED_BATCH_SIZE}: "
        f"{bf16_ips:.0f} images/s = {bf16_ips / seed_ips:.2f}x the seed; batch {MFU_BATCH_SIZE}: {bf16_mfu_ips:.0f} "
        f"images/s = {bf16_achieved / 1e9:.1f} GFLOP/s = {100 * bf16_achieved / bf16_peak:.0f}% of the bf16 GEMM "
        f"peak ({bf16_peak / 1e9:.1f} GFLOP/s)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
