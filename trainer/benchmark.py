"""`python -m trainer.benchmark` (`make bench`): what users get from this trainer and from the seed
script, side by side on real MNIST, on one machine with the same thread count, in one run.

Time to accuracy comes first, each side a process of its own timed from its start, as a job's pod
would run it: the seed script's pipeline with its own defaults (torchvision's MNIST read from IDX
files, a PIL image and ToTensor per sample, a DataLoader with a DistributedSampler, the model in DDP
inside a one-rank group, SGD at lr 0.01 and momentum 0.5, batch 64), with its wall time and test
accuracy after each of its first epochs; and `mnist-train --recipe seed` and `--recipe fast`, with
the wall time to their first evaluation at or above --target (0.99). Evaluations are those the
trainer makes, one per epoch (docs/benchmark.md says why). The headline is the ratio of our time to
the target over the seed's first epoch. A line follows with `--recipe fast` at 1, 2 and 4
processes, started as a job's pods would be (on CPU).

Throughput follows as secondary lines: both training loops in images/s at the same batch size (on
CPU, the model FLOP utilization against a GEMM peak and a kernel floor: the model's convolutions and
matmuls alone; on CUDA, at batch 64 and 512, eager, with --compile and with --cuda-graphs).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from trainer.checkpoint import Progress
from trainer.config import TrainConfig
from trainer.data import IDX_FILES, Dataset, load, raw_folder
from trainer.distributed import DistContext
from trainer.loop import new_trainer
from trainer.metrics import Reporter
from trainer.model import MEMORY_FORMAT, TRAIN_FLOPS_PER_IMAGE, Net
from trainer.runtime import native_bf16, resolve_precision

SEED_BATCH_SIZE = 64
MFU_BATCH_SIZE = 256
CUDA_BATCH_SIZES = (SEED_BATCH_SIZE, 512)
WARMUP_STEPS = 5
TARGET_ACCURACY = 0.99
WORLD_SIZES = (1, 2, 4)  # of the world-size line
# The evaluation lines of mnist-train (metrics.Reporter) and of the seed side below.
EVALUATION = re.compile(r"^epoch=(\d+) accuracy=([0-9.]+)")


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


def seed_pipeline(
    data_dir: Path, device: torch.device, epochs: int = 0, steps: int = 0, batch_size: int = SEED_BATCH_SIZE
) -> float:
    """The seed script's training, step for step (its logging and TensorBoard I/O left out), on MNIST.

    With `steps`, the images/s of that many steps after WARMUP_STEPS; else `epochs` epochs, each
    followed by the seed's test, printed as an evaluation line. On CUDA the group is nccl, as the
    seed script advises there; elsewhere gloo, its default.
    """
    import torch.distributed as dist

    with tempfile.TemporaryDirectory() as store:
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend, init_method=f"file://{store}/store", rank=0, world_size=1)
        try:
            return _seed_main(data_dir, device, epochs, steps, batch_size)  # frees its DDP wrapper before the group
        finally:
            dist.destroy_process_group()


def _seed_main(data_dir: Path, device: torch.device, epochs: int, steps: int, batch_size: int) -> float:
    from torch.utils.data import DataLoader, DistributedSampler
    from torchvision import datasets, transforms

    torch.manual_seed(1)
    model = torch.nn.parallel.DistributedDataParallel(Net().to(device))
    to_tensor = transforms.Compose([transforms.ToTensor()])
    train_ds = datasets.MNIST(str(data_dir), train=True, download=False, transform=to_tensor)
    train_loader = DataLoader(train_ds, batch_size=batch_size, sampler=DistributedSampler(train_ds))
    if steps:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.5)
        batches = itertools.chain.from_iterable(itertools.repeat(train_loader))  # epoch after epoch: large batches
        for batch_idx in range(WARMUP_STEPS + steps):
            if batch_idx == WARMUP_STEPS:
                _synchronize(device)
                started = time.perf_counter()
            data, target = next(batches)
            _seed_step(model, optimizer, data, target, device, batch_idx)
        _synchronize(device)
        return steps * batch_size / (time.perf_counter() - started)
    test_ds = datasets.MNIST(str(data_dir), train=False, download=False, transform=to_tensor)
    test_loader = DataLoader(test_ds, batch_size=1000, sampler=DistributedSampler(test_ds))
    for epoch in range(1, epochs + 1):
        model.train()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.5)  # anew each epoch, as the seed's
        for batch_idx, (data, target) in enumerate(train_loader):
            _seed_step(model, optimizer, data, target, device, batch_idx)
        model.eval()
        correct = 0
        with torch.no_grad():
            for data, target in test_loader:
                data, target = data.to(device), target.to(device)
                correct += (model(data).argmax(dim=1) == target).sum().item()
        print(f"epoch={epoch} accuracy={correct / len(test_ds):.4f}", flush=True)
    return 0.0


def _seed_step(model, optimizer, data, target, device: torch.device, batch_idx: int) -> None:
    data, target = data.to(device), target.to(device)
    optimizer.zero_grad()
    loss = F.nll_loss(model(data), target)
    loss.backward()
    optimizer.step()
    if batch_idx % 10 == 0:  # the seed's log interval: its loss.item() waits for the step
        loss.item()


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def trainer_images_per_second(
    data: Dataset,
    device: torch.device,
    batch_size: int,
    steps: int,
    precision: str,
    compile: bool = False,
    cuda_graphs: bool = False,
) -> float:
    """This trainer's epoch loop, as `mnist-train --precision PRECISION [--compile] [--cuda-graphs]` sets
    it up, over `steps` batches."""
    ctx = DistContext(0, 1, 0, 1, device, "nccl" if device.type == "cuda" else "gloo")
    precision = resolve_precision(precision, device)
    config = TrainConfig(batch_size=batch_size, precision=precision, compile=compile, cuda_graphs=cuda_graphs)
    trainer = new_trainer(data.limited(batch_size * steps, None), ctx, config, Reporter(False, None), None)
    # The epoch's last WARMUP_STEPS batches warm up, compile (--compile) and capture (--cuda-graphs),
    # on the same data: a captured graph reads the tensors it was captured with.
    trainer.progress.consumed = batch_size * max(0, steps - WARMUP_STEPS)
    trainer.train_epoch()
    trainer.progress = Progress()
    trainer.train_epoch()
    return trainer.progress.images_per_second


@dataclass(frozen=True)
class Evaluated:
    epoch: int
    seconds: float  # from the process's start
    accuracy: float


def timed_evaluations(command: list[str], env: dict[str, str], stop_at: float | None = None) -> list[Evaluated]:
    """Run `command`, timing each evaluation line it prints from its start; with `stop_at`, stop it at
    the first evaluation at or above that accuracy."""
    evaluations: list[Evaluated] = []
    stopped = False
    with tempfile.TemporaryFile("w+") as stderr:
        started = time.perf_counter()
        proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True)
        assert proc.stdout is not None  # stdout=PIPE
        for line in proc.stdout:
            if match := EVALUATION.match(line):
                evaluations.append(Evaluated(int(match[1]), time.perf_counter() - started, float(match[2])))
                if stop_at is not None and evaluations[-1].accuracy >= stop_at:
                    proc.send_signal(signal.SIGTERM)
                    stopped = True
                    break
        proc.stdout.close()
        if proc.wait() != 0 and not stopped:
            stderr.seek(0)
            raise RuntimeError(f"{' '.join(command)} exited {proc.returncode}:\n{stderr.read()[-3000:]}")
    return evaluations


def _measure(args: argparse.Namespace) -> float:
    device = torch.device(args.device)
    if args.side == "gemm":
        return gemm_peak_flops(torch.bfloat16 if args.precision == "bf16" else torch.float32)
    if args.side == "floor":
        return kernel_floor_images_per_second(args.batch_size)
    if args.side == "seed":
        return seed_pipeline(args.data_dir, device, steps=args.steps, batch_size=args.batch_size)
    if args.side == "seed-epochs":
        return seed_pipeline(args.data_dir, device, epochs=args.seed_epochs)
    data = load("mnist", args.data_dir, download=False)
    return trainer_images_per_second(
        data, device, args.batch_size, args.steps, args.precision, args.compile, args.cuda_graphs
    )


class Bench:
    """Starts every side as a child process with the same device, data and thread count."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.env = os.environ | {"OMP_NUM_THREADS": str(args.threads), "PYTHONUNBUFFERED": "1"}

    def _side(self, side: str, *flags: str) -> list[str]:
        a = self.args
        return [sys.executable, "-m", "trainer.benchmark", "--side", side, "--device", a.device] + [
            "--data-dir",
            str(a.data_dir),
            "--threads",
            str(a.threads),
            *flags,
        ]

    def measure(self, side: str, batch_size: int = 0, steps: int = 0, precision: str = "fp32", *options: str) -> float:
        """One side's figure; `options` are --compile and --cuda-graphs for the trainer side."""
        flags = ["--batch-size", str(batch_size), "--steps", str(steps), "--precision", precision]
        command = self._side(side, *flags, *options)
        result = subprocess.run(command, env=self.env, capture_output=True, text=True)
        if result.returncode:
            raise RuntimeError(f"{' '.join(command)} exited {result.returncode}:\n{result.stderr[-3000:]}")
        return json.loads(result.stdout.strip().splitlines()[-1])["value"]

    def seed_epochs(self) -> list[Evaluated]:
        return timed_evaluations(self._side("seed-epochs", "--seed-epochs", str(self.args.seed_epochs)), self.env)

    def ours(self, recipe: str, epochs: int, *flags: str, world_size: int = 1) -> tuple[list[Evaluated], dict | None]:
        """mnist-train's timed evaluations, and its metrics.json unless it was stopped at --target first.
        With a `world_size` above 1, as that many pods of a job, sharing the threads (at least one each)."""
        a = self.args
        threads = max(1, a.threads // world_size)
        with tempfile.TemporaryDirectory() as output_dir, tempfile.TemporaryFile("w+") as peers_stderr:
            command = [sys.executable, "-m", "trainer", "--dataset", "mnist", "--data-dir", str(a.data_dir)]
            command += ["--recipe", recipe, "--epochs", str(epochs), "--threads", str(threads), "--dir", ""]
            command += ["--output-dir", output_dir, *flags, *(["--no-cuda"] if a.device == "cpu" else [])]
            env = self.env | {"OMP_NUM_THREADS": str(threads)}
            peers = []
            if world_size > 1:  # the training-operator's contract; rank 0 is timed, and reports
                env |= {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()), "WORLD_SIZE": str(world_size)}
                peers = [
                    subprocess.Popen(
                        command, env=env | {"RANK": str(rank)}, stdout=subprocess.DEVNULL, stderr=peers_stderr
                    )
                    for rank in range(1, world_size)
                ]
                env |= {"RANK": "0"}
            try:
                # A run in its last epoch goes on to write its metrics.json.
                evaluations = timed_evaluations(command, env, a.target if epochs > 1 else None)
            except BaseException:
                for peer in peers:  # they would wait for rank 0 until --pg-timeout
                    peer.kill()
                    peer.wait()
                raise
            if any(peer.wait() != 0 for peer in peers):
                peers_stderr.seek(0)
                raise RuntimeError(f"a peer of {' '.join(command)} failed:\n{peers_stderr.read()[-3000:]}")
            metrics = Path(output_dir, "metrics.json")
            return evaluations, json.loads(metrics.read_text()) if metrics.exists() else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _reached(evaluations: list[Evaluated], target: float) -> Evaluated | None:
    return next((e for e in evaluations if e.accuracy >= target), None)


def time_to_accuracy(bench: Bench) -> None:
    a = bench.args
    print(
        f"time to accuracy on MNIST ({a.data_dir}), device {a.device}, {a.threads} threads per side, "
        "wall time from each process's start:"
    )
    seed = bench.seed_epochs()
    epochs = "; ".join(f"epoch {e.epoch}: {e.seconds:.1f} s, accuracy {e.accuracy:.4f}" for e in seed)
    print(f"  seed pipeline (its defaults, batch {SEED_BATCH_SIZE}): {epochs}")
    runs: list[tuple[str, tuple]] = [("--recipe seed", ("seed", a.ours_epochs)), ("--recipe fast", ("fast", 1))]
    if a.device == "cuda":
        runs.append(("--recipe fast --compile", ("fast", 1, "--compile")))
        runs.append(("--recipe fast --cuda-graphs", ("fast", 1, "--cuda-graphs")))
    best, fast = None, None
    for name, run in runs:
        try:
            evaluations, metrics = bench.ours(*run)
        except RuntimeError as error:  # the other runs still count
            print(f"  this trainer {name}: failed: {error}")
            continue
        if name == "--recipe fast":
            fast = evaluations
        # The training alone, without start-up and evaluation, of a run that went to its end.
        trained = (
            f"; its {metrics['epochs']} epoch(s) trained in {metrics['train_seconds']:.2f} s, "
            f"{metrics['images_per_second']:.0f} images/s, precision {metrics['precision']}"
            if metrics
            else ""
        )
        if reached := _reached(evaluations, a.target):
            print(
                f"  this trainer {name}: {reached.accuracy:.4f} at {reached.seconds:.1f} s (epoch {reached.epoch})"
                + trained
            )
            best = reached if best is None or reached.seconds < best.seconds else best
        else:
            last = evaluations[-1]
            print(
                f"  this trainer {name}: {a.target} not reached in {len(evaluations)} epoch(s) "
                f"({last.accuracy:.4f} at {last.seconds:.1f} s){trained}"
            )
    if best is None:
        print(f"ours to {a.target} / the seed's first epoch: not reached (goal: <= 0.30)")
    else:
        print(f"ours to {a.target} / the seed's first epoch: {best.seconds / seed[0].seconds:.2f} (goal: <= 0.30)")
    world_sizes(bench, fast)


def world_sizes(bench: Bench, one_process: list[Evaluated] | None) -> None:
    """--recipe fast at each of WORLD_SIZES, as pods of one job: the one-process run is time_to_accuracy's."""
    a = bench.args
    sizes = ", ".join(map(str, WORLD_SIZES))
    head = f"--recipe fast at world sizes {sizes} (its global batch split among the processes)"
    if a.device == "cuda":
        print(f"{head}: not measured on the GPU, where each process needs a GPU of its own (make bench runs it on CPU)")
        return
    outcomes = []
    for size in WORLD_SIZES:
        if size == 1:
            evaluations, why = one_process, "the run above"
        else:
            try:
                evaluations, why = bench.ours("fast", 1, world_size=size)[0], "no evaluation"
            except RuntimeError as error:  # the other sizes still count
                evaluations, why = None, str(error).splitlines()[0]
        processes = f"{size} process" + ("es" if size > 1 else "")
        if not evaluations:
            outcomes.append(f"{processes}: failed ({why})")
            continue
        last = evaluations[-1]
        reached = "" if last.accuracy >= a.target else f", {a.target} not reached"
        outcomes.append(f"{processes}: {last.accuracy:.4f} at {last.seconds:.1f} s{reached}")
    threads = ", ".join(f"{max(1, a.threads // size)}" for size in WORLD_SIZES)
    print(f"{head}, threads per process {threads}: " + "; ".join(outcomes))


def cpu_throughput(bench: Bench) -> None:
    a = bench.args
    mfu_steps = max(20, a.steps // 4)
    with_bf16 = native_bf16(torch.device("cpu"))
    seed, ours, ours_mfu, peaks, floors, floors_mfu = [], [], [], [], [], []
    bf16, bf16_mfu, bf16_peaks = [], [], []
    for _ in range(a.runs):  # alternating, so that background load hits every side alike
        seed.append(bench.measure("seed", SEED_BATCH_SIZE, a.steps))
        ours.append(bench.measure("trainer", SEED_BATCH_SIZE, a.steps))
        ours_mfu.append(bench.measure("trainer", MFU_BATCH_SIZE, mfu_steps))
        peaks.append(bench.measure("gemm"))
        floors.append(bench.measure("floor", SEED_BATCH_SIZE))
        floors_mfu.append(bench.measure("floor", MFU_BATCH_SIZE))
        if with_bf16:
            bf16.append(bench.measure("trainer", SEED_BATCH_SIZE, a.steps, "bf16"))
            bf16_mfu.append(bench.measure("trainer", MFU_BATCH_SIZE, mfu_steps, "bf16"))
            bf16_peaks.append(bench.measure("gemm", precision="bf16"))

    seed_ips, ours_ips, mfu_ips = (statistics.median(r) for r in (seed, ours, ours_mfu))
    peak, floor_ips, floor_mfu_ips = max(peaks), max(floors), max(floors_mfu)
    achieved = mfu_ips * TRAIN_FLOPS_PER_IMAGE
    print(
        f"throughput (secondary), runs per side: {a.runs} (medians); "
        f"timed steps: {a.steps} at batch {SEED_BATCH_SIZE}, {mfu_steps} at batch {MFU_BATCH_SIZE}"
    )
    print(f"seed pipeline (DataLoader + ToTensor + DDP), batch {SEED_BATCH_SIZE}: {seed_ips:8.0f} images/s")
    print(f"this trainer (resident tensors),            batch {SEED_BATCH_SIZE}: {ours_ips:8.0f} images/s")
    print(f"speedup at batch {SEED_BATCH_SIZE}: {ours_ips / seed_ips:.2f}x (retired goal: >= 3x)")
    print(f"fp32 GEMM peak (4096x4096 matmul, best of {a.runs} runs): {peak / 1e9:.1f} GFLOP/s")
    print(
        f"this trainer, batch {MFU_BATCH_SIZE}: {mfu_ips:.0f} images/s x {TRAIN_FLOPS_PER_IMAGE / 1e6:.2f} MFLOP "
        f"= {achieved / 1e9:.1f} GFLOP/s = {100 * achieved / peak:.0f}% of the GEMM peak (retired goal: >= 60%)"
    )
    print(
        f"kernel floor (only the convolution and matmul kernels, each at its best alone): "
        f"batch {SEED_BATCH_SIZE}: {floor_ips:.0f} images/s = {floor_ips / seed_ips:.2f}x the seed; "
        f"batch {MFU_BATCH_SIZE}: {100 * floor_mfu_ips * TRAIN_FLOPS_PER_IMAGE / peak:.0f}% of the GEMM peak"
    )
    if not with_bf16:
        print("--precision bf16: not measured, this CPU has no bf16 hardware (AVX512_BF16)")
        return
    bf16_ips, bf16_mfu_ips, bf16_peak = statistics.median(bf16), statistics.median(bf16_mfu), max(bf16_peaks)
    bf16_achieved = bf16_mfu_ips * TRAIN_FLOPS_PER_IMAGE
    print(
        f"this trainer with --precision bf16 (opt-in), batch {SEED_BATCH_SIZE}: "
        f"{bf16_ips:.0f} images/s = {bf16_ips / seed_ips:.2f}x the seed; batch {MFU_BATCH_SIZE}: {bf16_mfu_ips:.0f} "
        f"images/s = {bf16_achieved / 1e9:.1f} GFLOP/s = {100 * bf16_achieved / bf16_peak:.0f}% of the bf16 GEMM "
        f"peak ({bf16_peak / 1e9:.1f} GFLOP/s)"
    )


def cuda_throughput(bench: Bench) -> None:
    a = bench.args
    print(f"throughput (secondary) on {torch.cuda.get_device_name()}, {a.steps} timed steps per side, precision auto:")
    for batch_size in CUDA_BATCH_SIZES:
        seed = bench.measure("seed", batch_size, a.steps)
        for name, options in (
            ("this trainer", ()),
            ("with --compile", ("--compile",)),
            ("with --cuda-graphs", ("--cuda-graphs",)),
        ):
            try:
                ours = bench.measure("trainer", batch_size, a.steps, "auto", *options)
            except RuntimeError as error:  # the other figures still count
                print(f"  batch {batch_size}: {name}: failed: {error}")
                continue
            print(
                f"  batch {batch_size}: {name} {ours:.0f} images/s, seed pipeline {seed:.0f} images/s: "
                f"{ours / seed:.1f}x (paper goal: >= 20x)"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer.benchmark", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path("data"),
        help="a --data-dir with real MNIST, as `make data` fetches it (default: data)",
    )
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where every side runs (default: cpu)")
    parser.add_argument(
        "--seed-epochs", type=int, default=2, help="epochs of the seed pipeline, each timed and tested (default: 2)"
    )
    parser.add_argument(
        "--ours-epochs",
        type=int,
        default=3,
        help="most epochs of --recipe seed, stopped once at --target (default: 3); --recipe fast trains its 1",
    )
    parser.add_argument(
        "--target", type=float, default=TARGET_ACCURACY, help=f"the accuracy to time (default: {TARGET_ACCURACY})"
    )
    parser.add_argument(
        "--steps", type=int, default=150, help="timed steps per throughput run at batch 64 (default: 150)"
    )
    parser.add_argument(
        "--runs", type=int, default=1, help="alternating throughput runs per side; 0 skips throughput (default: 1)"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=len(os.sched_getaffinity(0)),
        help="CPU threads for every side (default: all usable CPUs)",
    )
    parser.add_argument(
        "--only", choices=("accuracy", "throughput"), help="measure time to accuracy or throughput only (default: both)"
    )
    parser.add_argument("--side", choices=("seed", "seed-epochs", "trainer", "gemm", "floor"), help=argparse.SUPPRESS)
    parser.add_argument("--batch-size", type=int, default=SEED_BATCH_SIZE, help=argparse.SUPPRESS)
    parser.add_argument("--precision", choices=("auto", "fp32", "bf16"), default="fp32", help=argparse.SUPPRESS)
    parser.add_argument("--compile", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cuda-graphs", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.side:
        print(json.dumps({"value": _measure(args)}))
        return 0
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device is available here")
    missing = [name for name in IDX_FILES if not (raw_folder("mnist", args.data_dir) / name).is_file()]
    if missing:
        parser.error(
            f"--data-dir: real MNIST is not in {raw_folder('mnist', args.data_dir)} (missing {', '.join(missing)}); "
            "run `make data`, or pass the --data-dir that holds it"
        )
    bench = Bench(args)
    if args.only != "throughput":
        time_to_accuracy(bench)
    if args.runs and args.only != "accuracy":
        (cuda_throughput if args.device == "cuda" else cpu_throughput)(bench)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
