"""Every bad flag or file, as a pod would run the trainer: the documented exit code
(trainer/failures.py; 2 from argparse), a one-line message naming what was wrong, no traceback, and
nothing an earlier run wrote is lost. A permanent error never exits with a retryable code."""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch

from tests.support.idx import write_idx_dataset
from tests.support.procs import free_port, run_trainer
from trainer import cli
from trainer import data as datasets
from trainer.checkpoint import FORMAT_VERSION

EXIT_ARGPARSE = 2
QUICK = ["--dataset", "synthetic", "--limit-train", "256", "--limit-test", "100", "--threads", "1", "--dir", ""]
# The earlier run every case starts beside: its checkpoints and outputs must survive a bad restart.
EARLIER = [*QUICK, "--checkpoint-dir", "ckpt", "--output-dir", "out"]
LAST_CHECKPOINT = "ckpt/checkpoint-000000004.pt"  # 256 samples in batches of 64: the epoch's end is step 4
NEWER = "ckpt/checkpoint-000000099.pt"  # a newer checkpoint than the earlier run's, which resuming reads first
# Downloads refused at once (nothing listens there), so that a missing file fails without the network.
NO_DOWNLOADS = {"http_proxy": "http://127.0.0.1:{port}", "https_proxy": "http://127.0.0.1:{port}"}


def _a_file(run: Path) -> None:
    (run / "a-file").write_text("not a directory")


def _idx_files(damage: Callable[[Path], None] | None = None) -> Callable[[Path], None]:
    def prepare(run: Path) -> None:
        write_idx_dataset(run / "data", datasets.load("synthetic", run, download=False).limited(256, 100))
        if damage:
            damage(datasets.raw_folder("fashion-mnist", run / "data"))

    return prepare


def _truncate(raw: Path) -> None:
    images = raw / "train-images-idx3-ubyte"
    images.write_bytes(images.read_bytes()[:1000])


def _label_past_the_classes(raw: Path) -> None:
    labels = raw / "train-labels-idx1-ubyte"
    content = bytearray(labels.read_bytes())
    content[8] = 200  # the first label, after the magic and the count
    labels.write_bytes(bytes(content))


def _newer_checkpoint(change: Callable[[dict], object]) -> Callable[[Path], None]:
    """The earlier run's last checkpoint, changed, saved as a newer one."""

    def prepare(run: Path) -> None:
        state = torch.load(run / LAST_CHECKPOINT, weights_only=True)
        torch.save(change(state), run / NEWER)

    return prepare


def _garbage(run: Path) -> None:
    (run / NEWER).write_bytes(b"\x00not a checkpoint")


def _truncated_checkpoint(run: Path) -> None:
    content = (run / LAST_CHECKPOINT).read_bytes()
    (run / NEWER).write_bytes(content[: len(content) // 2])


@dataclass(frozen=True)
class Case:
    id: str
    argv: list[str]
    code: int
    message: str  # in the last line of stderr; for a run that goes on (exit 0), in its warning
    prepare: Callable[[Path], None] | None = None
    env: dict[str, str] = field(default_factory=dict)


BEYOND_64_BITS = str(2**70)
CASES = [
    # Sizes, rates and seeds: argparse names the flag and what it takes.
    Case("zero batch", ["--batch-size", "0"], 2, "argument --batch-size: must be a positive integer below 2**63"),
    Case(
        "negative batch", ["--batch-size", "-64"], 2, "--batch-size: must be a positive integer below 2**63, got '-64'"
    ),
    Case("zero test batch", ["--test-batch-size", "0"], 2, "--test-batch-size: must be a positive integer"),
    Case(
        "huge batch",
        ["--batch-size", BEYOND_64_BITS],
        2,
        f"--batch-size: must be a positive integer below 2**63, got '{BEYOND_64_BITS}'",
    ),
    Case("zero epochs", ["--epochs", "0"], 2, "--epochs: must be a positive integer"),
    Case("zero limit", ["--limit-train", "0"], 2, "--limit-train: must be a positive integer"),
    Case("negative log interval", ["--log-interval", "-1"], 2, "--log-interval: must be a positive integer"),
    Case("no checkpoints kept", ["--keep-checkpoints", "0"], 2, "--keep-checkpoints: must be a positive integer"),
    Case(
        "negative checkpoint interval",
        ["--checkpoint-every", "-1"],
        2,
        "--checkpoint-every: must be 0 or more, below 2**63",
    ),
    Case(
        "word for a size",
        ["--batch-size", "many"],
        2,
        "--batch-size: must be a positive integer below 2**63, got 'many'",
    ),
    Case("NaN lr", ["--lr", "nan"], 2, "argument --lr: must be a positive number, got 'nan'"),
    Case("infinite lr", ["--lr", "inf"], 2, "argument --lr: must be a positive number, got 'inf'"),
    Case("zero lr", ["--lr", "0"], 2, "argument --lr: must be a positive number, got '0'"),
    Case("NaN momentum", ["--momentum", "nan"], 2, "argument --momentum: must be in [0, 1), got 'nan'"),
    Case("infinite weight decay", ["--weight-decay", "inf"], 2, "--weight-decay: must be 0 or more, got 'inf'"),
    Case(
        "seed beyond 64 bits",
        ["--seed", BEYOND_64_BITS],
        2,
        f"argument --seed: must be an integer from -2**63 to 2**63 - 1, got '{BEYOND_64_BITS}'",
    ),
    Case(
        "seed below 64 bits",
        ["--seed", str(-(2**63) - 1)],
        2,
        "argument --seed: must be an integer from -2**63 to 2**63 - 1",
    ),
    Case(
        "fractional seed",
        ["--seed", "1.5"],
        2,
        "argument --seed: must be an integer from -2**63 to 2**63 - 1, got '1.5'",
    ),
    Case(
        "thousands of threads", ["--threads", "100000"], 2, "argument --threads: must be 0 (automatic) or at most the"
    ),
    Case(
        "timeout past timedelta",
        ["--pg-timeout", "1e300"],
        2,
        "argument --pg-timeout: must be a positive number of seconds, at most a year",
    ),
    Case(
        "NaN timeout",
        ["--startup-timeout", "nan"],
        2,
        "argument --startup-timeout: must be a positive number of seconds",
    ),
    Case("abbreviated flag", ["--epoch", "2"], 2, "unrecognized arguments: --epoch 2"),
    Case("abbreviated flag with =", ["--batch=32"], 2, "unrecognized arguments: --batch=32"),
    Case("unknown dataset", ["--dataset", "cifar10"], 2, "argument --dataset: invalid choice: 'cifar10'"),
    Case("Nesterov without momentum", ["--nesterov", "--momentum", "0"], 2, "--nesterov needs --momentum > 0"),
    Case(
        "nccl without CUDA",
        ["--backend", "nccl", "--no-cuda"],
        2,
        "--backend nccl needs CUDA, which --no-cuda turns off",
    ),
    # Output directories rank 0 cannot write: before training, for good.
    Case(
        "unwritable output dir",
        ["--output-dir", "a-file/out"],
        1,
        "error: --output-dir a-file/out is not writable",
        _a_file,
    ),
    Case(
        "unwritable checkpoint dir",
        ["--checkpoint-dir", "a-file/ckpt"],
        1,
        "error: --checkpoint-dir a-file/ckpt is not writable",
        _a_file,
    ),
    Case(
        "unwritable event dir", ["--dir", "a-file/tb"], 1, "error: --dir/--log-dir a-file/tb is not writable", _a_file
    ),
    # IDX files: missing, truncated, or holding what training would trip on.
    Case(
        "missing IDX file",
        ["--dataset", "fashion-mnist", "--data-dir", "data"],
        1,
        "files not found in",
        _idx_files(lambda raw: (raw / "t10k-labels-idx1-ubyte").unlink()),
        NO_DOWNLOADS,
    ),
    Case(
        "truncated IDX file",
        ["--dataset", "fashion-mnist", "--data-dir", "data"],
        1,
        "are unreadable (train-images-idx3-ubyte holds 1000 bytes, and its header says",
        _idx_files(_truncate),
    ),
    Case(
        "IDX label past the classes",
        ["--dataset", "fashion-mnist", "--data-dir", "data"],
        1,
        "are unreadable (a label is 200, and there are 10 classes)",
        _idx_files(_label_past_the_classes),
    ),
    # Checkpoints: damaged or foreign ones are set aside (renamed, kept) and the run resumes from the
    # earlier one; one that is this trainer's but cannot continue this run stops it for good.
    Case("garbage checkpoint", ["--checkpoint-dir", "ckpt"], 0, "checkpoint-000000099.pt: unreadable", _garbage),
    Case(
        "truncated checkpoint",
        ["--checkpoint-dir", "ckpt"],
        0,
        "checkpoint-000000099.pt: unreadable",
        _truncated_checkpoint,
    ),
    Case(
        "foreign checkpoint",
        ["--checkpoint-dir", "ckpt"],
        0,
        f"not a format-{FORMAT_VERSION} trainer checkpoint (missing",
        _newer_checkpoint(lambda state: {"weights": state["model"]}),
    ),
    Case(
        "checkpoint with a wrong RNG state",
        ["--checkpoint-dir", "ckpt"],
        0,
        "(rng is not a torch RNG state",
        _newer_checkpoint(lambda state: {**state, "rng": {"torch": torch.zeros(16, dtype=torch.uint8)}}),
    ),
    Case(
        "checkpoint with a wrong epoch",
        ["--checkpoint-dir", "ckpt"],
        0,
        "(epoch is not an integer of at least 1)",
        _newer_checkpoint(lambda state: {**state, "epoch": "two"}),
    ),
    Case(
        "checkpoint of another model",
        ["--checkpoint-dir", "ckpt"],
        1,
        "checkpoint-000000099.pt does not fit this trainer's model or optimizer",
        _newer_checkpoint(lambda state: {**state, "model": {**state["model"], "conv1.weight": torch.zeros(3, 3)}}),
    ),
    Case(
        "checkpoint from a newer trainer",
        ["--checkpoint-dir", "ckpt"],
        1,
        f"is a format-{FORMAT_VERSION + 1} checkpoint, from a newer trainer",
        _newer_checkpoint(lambda state: {**state, "format": FORMAT_VERSION + 1}),
    ),
    Case(
        "checkpoint of other settings",
        ["--checkpoint-dir", "ckpt", "--lr", "0.02"],
        1,
        "with other settings: lr 0.01 (now 0.02)",
    ),
]


@pytest.fixture(scope="module")
def earlier_run(tmp_path_factory) -> Path:
    """A finished run's checkpoints and outputs."""
    run = tmp_path_factory.mktemp("earlier")
    result = run_trainer(EARLIER, cwd=run)
    assert result.returncode == 0, result.stderr
    assert (run / LAST_CHECKPOINT).is_file() and (run / "out" / "mnist_cnn.pt").is_file()
    return run


def _contents(run: Path) -> dict[str, str]:
    return {
        str(path.relative_to(run)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in run.rglob("*")
        if path.is_file()
    }


def test_every_case_is_named_once():
    assert len({case.id for case in CASES}) == len(CASES)


def _refused_by_argparse(argv: list[str], capsys) -> tuple[int, str, str]:
    """argparse refuses before anything else runs (no torch work, no file touched), so those
    cases run in this process: each trainer process would spend seconds importing torch."""
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_bad_input_exits_with_its_code_and_one_line_naming_it(case, request, tmp_path, capsys):
    run = tmp_path / "run"
    if case.code == EXIT_ARGPARSE:
        run.mkdir()
        code, stdout, stderr = _refused_by_argparse([*QUICK, *case.argv], capsys)
    else:
        shutil.copytree(request.getfixturevalue("earlier_run"), run)
    if case.prepare:
        case.prepare(run)
    before = _contents(run)
    if case.code != EXIT_ARGPARSE:
        port = str(free_port())
        result = run_trainer([*QUICK, *case.argv], cwd=run, **{k: v.format(port=port) for k, v in case.env.items()})
        code, stdout, stderr = result.returncode, result.stdout, result.stderr

    assert "Traceback" not in stderr, stderr
    assert code == case.code, stderr
    if case.code:
        last = stderr.strip().splitlines()[-1]
        assert last.startswith(("error: ", "mnist-train: error: ")) and case.message in last, stderr
        assert "Train Epoch" not in stdout, "stopped before training"
    else:
        assert case.message in stderr, stderr
    # Nothing written before is lost: every file is still there, unchanged, or set aside beside itself.
    after = _contents(run)
    for name, digest in before.items():
        assert after.get(name) == digest or after.get(f"{name}.unreadable") == digest, name
