"""Datasets as normalized in-memory tensors, how the ranks fetch them, and the per-epoch shards
each rank trains on.

Every image is decoded and normalized once at start-up; batches are then plain tensor
indexing (no DataLoader, no per-sample PIL or transform work).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import torch
import torch.nn.functional as F

from trainer.distributed import DistContext
from trainer.failures import DatasetUnavailable

TORCHVISION_DATASETS = {"fashion-mnist": "FashionMNIST", "mnist": "MNIST"}
GENERATED_DATASETS = ("digits", "synthetic")
DATASETS = (*TORCHVISION_DATASETS, *GENERATED_DATASETS)
IDX_FILES = (
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)
IMAGE_SIZE = 28
NUM_CLASSES = 10
# Generated data is independent of --seed, so every run sees the same train/test split.
GENERATED_DATA_SEED = 0
SYNTHETIC_SIZES = (60_000, 10_000)
# Per socket operation: torchvision's downloads set none, and a stalled mirror would hang rank 0
# forever while its peers time out and restart.
DOWNLOAD_TIMEOUT_SECONDS = 60.0


@dataclass(frozen=True)
class Dataset:
    name: str
    train_images: torch.Tensor  # float32 [N, 1, 28, 28]: (pixels - pixel_mean) / pixel_std
    train_labels: torch.Tensor  # int64 [N]
    test_images: torch.Tensor
    test_labels: torch.Tensor
    # The train set's pixel statistics; pixels as torchvision's ToTensor gives them (in [0, 1]) for
    # the image datasets.
    pixel_mean: float = 0.0
    pixel_std: float = 1.0

    def limited(self, train: int | None, test: int | None) -> Dataset:
        """The first `train`/`test` samples of each split (None keeps the whole split)."""
        return replace(
            self,
            train_images=self.train_images[:train],
            train_labels=self.train_labels[:train],
            test_images=self.test_images[:test],
            test_labels=self.test_labels[:test],
        )

    def to(self, device: torch.device, memory_format: torch.memory_format) -> Dataset:
        def move(images: torch.Tensor) -> torch.Tensor:
            return images.to(device).contiguous(memory_format=memory_format)

        return replace(
            self,
            train_images=move(self.train_images),
            train_labels=self.train_labels.to(device),
            test_images=move(self.test_images),
            test_labels=self.test_labels.to(device),
        )


def raw_folder(name: str, data_dir: str | Path) -> Path:
    """Where torchvision keeps (and looks for) the dataset's IDX files."""
    return Path(data_dir) / TORCHVISION_DATASETS[name] / "raw"


def load(name: str, data_dir: str | Path, download: bool) -> Dataset:
    """Load `name` into memory; torchvision datasets are downloaded first when `download`."""
    if name in TORCHVISION_DATASETS:
        return _load_torchvision(name, data_dir, download)
    if name == "digits":
        return _load_digits()
    if name == "synthetic":
        return _make_synthetic()
    raise ValueError(f"unknown dataset {name!r}; choose one of {', '.join(DATASETS)}")


def load_in_turns(
    ctx: DistContext,
    name: str,
    data_dir: str | Path,
    *,
    fallback: str | None = None,
    resumed_name: str | None = None,
    limit_train: int | None = None,
    limit_test: int | None = None,
    info: Callable[[str], None],
) -> Dataset:
    """Download in turns, then load on every rank.

    Rank 0 downloads first, so pods that share a volume never write the same files at once; then
    the first process of every other pod fetches what its own filesystem lacks (nothing, on a
    shared volume). After each turn all ranks agree on the outcome, so a failed download cannot
    strand a peer at a barrier. A resumed run keeps the dataset its checkpoint trained on
    (`resumed_name`), so whether the download works this time cannot switch it to or from
    `fallback`.
    """

    def read(which: str) -> Dataset:
        return load(which, data_dir, download=False).limited(limit_train, limit_test)

    if resumed_name not in (None, name) and resumed_name == fallback:
        info(f"The run being resumed trained on {resumed_name} (--fallback-dataset), so it goes on with it.")
        return read(resumed_name)
    loaded, failure = None, None
    for my_turn in (ctx.rank == 0, ctx.local_rank == 0 and ctx.rank != 0):
        if my_turn:
            try:
                loaded = load(name, data_dir, download=True)
            except DatasetUnavailable as error:
                failure = error
        # Patient: the others wait here while this turn downloads, which may outlast --pg-timeout.
        if not ctx.all_true(failure is None, patient=True):
            reason = failure or DatasetUnavailable(f"{name} could not be prepared on a peer pod; see its log")
            if fallback is None:
                raise reason
            if resumed_name == name:
                raise DatasetUnavailable(
                    f"{reason}\nThe run being resumed trained on {name}, so it does not fall back to {fallback}."
                )
            info(str(reason))
            info(f"Training on {fallback} instead (--fallback-dataset).")
            return read(fallback)
    return read(name) if loaded is None else loaded.limited(limit_train, limit_test)


def _load_torchvision(name: str, data_dir: str | Path, download: bool) -> Dataset:
    from torchvision import datasets

    cls = getattr(datasets, TORCHVISION_DATASETS[name])
    try:
        with _socket_timeout(DOWNLOAD_TIMEOUT_SECONDS):
            train = cls(str(data_dir), train=True, download=download)
            test = cls(str(data_dir), train=False, download=download)
    # torchvision's IDX parser reports damaged files with asserts and reshape or index errors.
    except (RuntimeError, OSError, ValueError, AssertionError, EOFError, IndexError) as error:
        reason = " ".join(str(error).split()) or type(error).__name__
        raw = raw_folder(name, data_dir).resolve()
        if all((raw / file).is_file() for file in IDX_FILES):
            # torchvision checks the files by name only, and an interrupted extraction leaves a
            # truncated one that every later run would take as present.
            raise DatasetUnavailable(
                f"{name}: the files in {raw} are unreadable ({reason}), e.g. truncated by an interrupted "
                f"download. Delete {', '.join(IDX_FILES)} and their .gz archives there to download them "
                "again, or choose --dataset digits or --dataset synthetic."
            ) from error
        raise DatasetUnavailable(
            f"{name}: files not found in {raw} and could not be "
            f"downloaded ({reason}). Put {', '.join(IDX_FILES)} (or their .gz archives) there, "
            "or choose --dataset digits or --dataset synthetic."
        ) from error
    return _normalized(name, train.data, train.targets, test.data, test.targets)


@contextmanager
def _socket_timeout(seconds: float):
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(seconds)
    try:
        yield
    finally:
        socket.setdefaulttimeout(previous)


def _load_digits() -> Dataset:
    """scikit-learn's bundled 8x8 handwritten digits, placed like MNIST: 20x20 inside 28x28."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    images = torch.as_tensor(bunch.images, dtype=torch.float32).unsqueeze(1) / 16.0
    images = F.interpolate(images, size=(20, 20), mode="bilinear", align_corners=False)
    images = F.pad(images, (4, 4, 4, 4))
    labels = torch.as_tensor(bunch.target, dtype=torch.int64)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(GENERATED_DATA_SEED))
    test_count = len(labels) // 5
    test, train = order[:test_count], order[test_count:]
    return _normalized("digits", images[train], labels[train], images[test], labels[test])


def _make_synthetic() -> Dataset:
    """Ten random binary class patterns plus noise: easy to learn, deterministic and instant."""
    generator = torch.Generator().manual_seed(GENERATED_DATA_SEED)
    prototypes = (torch.rand(NUM_CLASSES, 1, IMAGE_SIZE, IMAGE_SIZE, generator=generator) > 0.5).float()

    def split(count: int) -> tuple[torch.Tensor, torch.Tensor]:
        labels = torch.randint(0, NUM_CLASSES, (count,), generator=generator)
        noise = torch.randn(count, 1, IMAGE_SIZE, IMAGE_SIZE, generator=generator)
        return prototypes[labels] + 0.5 * noise, labels

    train_images, train_labels = split(SYNTHETIC_SIZES[0])
    test_images, test_labels = split(SYNTHETIC_SIZES[1])
    return _normalized("synthetic", train_images, train_labels, test_images, test_labels)


def _normalized(name, train_images, train_labels, test_images, test_labels) -> Dataset:
    train = _as_float_images(train_images)
    test = _as_float_images(test_images)
    mean, std = train.mean(), train.std()
    return Dataset(
        name,
        (train - mean) / std,
        torch.as_tensor(train_labels, dtype=torch.int64),
        (test - mean) / std,
        torch.as_tensor(test_labels, dtype=torch.int64),
        pixel_mean=mean.item(),
        pixel_std=std.item(),
    )


def _as_float_images(images: torch.Tensor) -> torch.Tensor:
    if images.dtype == torch.uint8:
        images = images.float() / 255.0
    if images.dim() == 3:
        images = images.unsqueeze(1)
    return images.float().contiguous()


def epoch_shard(num_samples: int, seed: int, epoch: int, rank: int, world_size: int, start: int = 0) -> torch.Tensor:
    """This rank's sample indices for `epoch`, from position `start` of the epoch's order on.

    All ranks draw the same permutation (seeded with seed + epoch, so the order changes every
    epoch) and take every world_size-th entry of order[start:]. Interleaved like this, k samples
    per rank are together exactly order[start : start + k * world_size], so a resumed run passes
    the samples consumed so far as `start` and shards the rest over its own world size. The
    remainder (< world_size samples) is dropped so every rank runs the same number of steps,
    which DDP's collectives require.
    """
    order = torch.randperm(num_samples, generator=torch.Generator().manual_seed(seed + epoch))[start:]
    per_rank = len(order) // world_size
    return order[rank : per_rank * world_size : world_size]


def eval_shard(num_samples: int, rank: int, world_size: int) -> torch.Tensor:
    """A disjoint, unpadded slice of the test set; the slices of all ranks cover it exactly (a
    rank beyond the last sample gets an empty one)."""
    return torch.arange(num_samples)[rank::world_size]
