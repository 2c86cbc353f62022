"""Rank-0 checkpoints that a restarted pod resumes from, falling back past corrupt files."""

from __future__ import annotations

import math
import re
import warnings
import zipfile
from dataclasses import dataclass, field, fields
from pathlib import Path

import torch

from trainer.failures import IncompatibleCheckpoint
from trainer.fileio import atomic_write, remove_partial_writes

FORMAT_VERSION = 2  # raised when the layout changes: a newer one is refused, an older one set aside
_NAME = re.compile(r"^checkpoint-(\d+)\.pt$")
# A checkpoint's path and state, or (None, None) when there is none to resume.
Checkpoint = tuple[Path, dict] | tuple[None, None]


@dataclass
class Progress:
    """Where training stands; all of it goes into checkpoints."""

    epoch: int = 1  # next epoch to run (1-based)
    # Samples of the epoch's permutation trained on by all ranks together. Ranks interleave, so
    # these are a prefix of it, and a run at any world size can shard the rest.
    consumed: int = 0
    step: int = 0  # optimizer steps taken
    train_images: int = 0  # images trained on by all ranks together
    train_seconds: float = 0.0
    history: list[dict] = field(default_factory=list)  # one evaluation per finished epoch

    @property
    def images_per_second(self) -> float:
        return self.train_images / self.train_seconds if self.train_seconds else 0.0


PROGRESS_KEYS = tuple(f.name for f in fields(Progress))
REQUIRED_KEYS = frozenset(
    {"format", "settings", "model", "optimizer", "world_size", "precision", "rng", *PROGRESS_KEYS}
)
_EVALUATION_KEYS = frozenset({"epoch", "accuracy", "val_loss"})  # each entry of Progress.history


class CheckpointStore:
    """`checkpoint-<step>.pt` files in one directory; the newest `keep` are kept."""

    def __init__(self, directory: str | Path, keep: int) -> None:
        self.directory = Path(directory)
        self.keep = keep

    def paths(self) -> list[Path]:
        """Checkpoint files, newest (highest step) first; temp files are ignored."""
        return [path for _, path in self._by_step()]

    def _by_step(self) -> list[tuple[int, Path]]:
        found = []
        for path in self.directory.glob("checkpoint-*.pt"):
            match = _NAME.match(path.name)
            if match:
                found.append((int(match.group(1)), path))
        return sorted(found, reverse=True)

    def remove_partial_writes(self) -> list[Path]:
        """Delete temp files of saves cut short by a SIGKILL; only the (one) writer may call this."""
        return remove_partial_writes(self.directory, "checkpoint-*.pt")

    def save(self, state: dict, step: int) -> Path:
        path = atomic_write(
            self.directory / f"checkpoint-{step:09d}.pt",
            lambda handle: torch.save({"format": FORMAT_VERSION, **state}, handle),
        )
        # Only this save and older ones count: a newer file is one load_latest could not read just
        # now, and counting it would prune this save.
        this_and_older = [other for saved, other in self._by_step() if saved <= step]
        for stale in this_and_older[self.keep :]:
            stale.unlink(missing_ok=True)
        return path

    def load_latest(self) -> Checkpoint:
        """The newest checkpoint that loads and looks complete; only the writer may call this.

        Each newer one that does not decode is renamed to `<name>.unreadable` with a warning: kept
        for a look, but no longer among the newest `keep`, where it would get every new save
        pruned. One the storage cannot read now (an I/O error) is only skipped.
        """
        for path in self.paths():
            try:
                _check_crcs(path)
                # Checkpoints hold only tensors and primitives, so the safe loader suffices.
                state = torch.load(path, map_location="cpu", weights_only=True)
            except OSError as error:  # the storage failed, maybe for a moment: the file may be fine
                warnings.warn(f"skipping {path}: could not read it ({error})", stacklevel=2)
                continue
            except Exception as error:  # noqa: BLE001 - any undecodable file is set aside alike
                self._set_aside(path, f"unreadable ({error})")
                continue
            written_in = state.get("format") if isinstance(state, dict) else None
            if isinstance(written_in, int) and written_in > FORMAT_VERSION:
                # Kept in place, unlike an unreadable file: the image that wrote it can resume from it.
                raise IncompatibleCheckpoint(
                    f"{path} is a format-{written_in} checkpoint, from a newer trainer than this one (format "
                    f"{FORMAT_VERSION}). Run the image that wrote it, or point --checkpoint-dir at another "
                    "directory to start a new run."
                )
            missing = REQUIRED_KEYS - set(state) if isinstance(state, dict) else REQUIRED_KEYS
            if missing or state.get("format") != FORMAT_VERSION:
                self._set_aside(
                    path,
                    f"not a format-{FORMAT_VERSION} trainer checkpoint "
                    f"(missing {', '.join(sorted(missing)) or 'nothing'})",
                )
                continue
            if malformed := _malformed(state):
                self._set_aside(path, f"not a format-{FORMAT_VERSION} trainer checkpoint ({malformed})")
                continue
            return path, state
        return None, None

    def _set_aside(self, path: Path, reason: str) -> None:
        aside = path.with_name(path.name + ".unreadable")
        try:
            path.replace(aside)
        except OSError as error:  # e.g. a read-only volume: skipping it still resumes correctly
            warnings.warn(f"skipping {path}: {reason}; could not rename it ({error})", stacklevel=3)
            return
        warnings.warn(f"skipping {path}: {reason}; renamed it to {aside.name}", stacklevel=3)


def _check_crcs(path: Path) -> None:
    """Raise if a member of the checkpoint's zip archive fails its CRC-32. torch.save writes the
    checksums but torch.load does not check them, so flipped bits would load as wrong weights."""
    with zipfile.ZipFile(path) as archive:
        damaged = archive.testzip()
    if damaged is not None:
        raise zipfile.BadZipFile(f"{damaged} fails its CRC check")


def _malformed(state: dict) -> str | None:
    """What in a checkpoint that has every key is not what this trainer writes there, or None.

    Resuming reads each of them (the RNG state into torch, the progress into the loop), and a
    wrong one would stop every restart alike with a traceback; the model and optimizer are checked
    against the model when they are loaded (an IncompatibleCheckpoint)."""

    def count(key: str, minimum: int) -> bool:
        return type(state[key]) is int and state[key] >= minimum

    if not isinstance(state["settings"], dict):
        return "settings is not a dict"
    model = state["model"]
    if not isinstance(model, dict) or not all(isinstance(v, torch.Tensor) for v in model.values()):
        return "model is not a state_dict of tensors"
    optimizer = state["optimizer"]
    if not (
        isinstance(optimizer, dict)
        and isinstance(optimizer.get("state"), dict)
        and isinstance(optimizer.get("param_groups"), list)
        and all(isinstance(group, dict) for group in optimizer["param_groups"])
    ):
        return "optimizer is not an optimizer's state_dict"
    if not isinstance(state["precision"], str):
        return "precision is not a name"
    for key, minimum in (("world_size", 1), ("epoch", 1), ("consumed", 0), ("step", 0), ("train_images", 0)):
        if not count(key, minimum):
            return f"{key} is not an integer of at least {minimum}"
    seconds = state["train_seconds"]
    if type(seconds) not in (int, float) or not 0 <= seconds < math.inf:
        return "train_seconds is not a duration"
    history = state["history"]
    if not (
        isinstance(history, list)
        and len(history) == state["epoch"] - 1
        and all(isinstance(entry, dict) and _EVALUATION_KEYS <= entry.keys() for entry in history)
    ):
        return "history is not one evaluation per finished epoch"
    rng = state["rng"]
    try:
        torch.Generator().set_state(rng["torch"])  # a scratch generator: torch checks the state's size and type
    except (TypeError, KeyError, RuntimeError) as error:
        return f"rng is not a torch RNG state ({str(error).strip().splitlines()[0]})"
    return None
