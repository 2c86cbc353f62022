"""Rank-0 checkpoints that a restarted pod resumes from, falling back past corrupt files."""
from __future__ import annotations

import re
import warnings
from pathlib import Path

import torch

from trainer.fileio import atomic_write

FORMAT_VERSION = 1
REQUIRED_KEYS = frozenset({"format", "settings", "model", "optimizer", "epoch", "batch", "step", "rng"})
_NAME = re.compile(r"^checkpoint-(\d+)\.pt$")


class CheckpointStore:
    """`checkpoint-<step>.pt` files in one directory; the newest `keep` are kept."""

    def __init__(self, directory: str | Path, keep: int) -> None:
        self.directory = Path(directory)
        self.keep = keep

    def paths(self) -> list[Path]:
        """Checkpoint files, newest (highest step) first; temp files are ignored."""
        found = []
        for path in self.directory.glob("checkpoint-*.pt"):
            match = _NAME.match(path.name)
            if match:
                found.append((int(match.group(1)), path))
        return [path for _, path in sorted(found, reverse=True)]

    def save(self, state: dict, step: int) -> Path:
        path = atomic_write(
            self.directory / f"checkpoint-{step:09d}.pt",
            lambda handle: torch.save({"format": FORMAT_VERSION, **state}, handle),
        )
        for stale in self.paths()[self.keep :]:
            stale.unlink(missing_ok=True)
        return path

    def load_latest(self) -> tuple[Path, dict] | tuple[None, None]:
        """The newest checkpoint that loads and looks complete; warns about each one skipped."""
        for path in self.paths():
            try:
                # Checkpoints hold only tensors and primitives, so the safe loader suffices.
                state = torch.load(path, map_location="cpu", weights_only=True)
            except Exception as error:  # noqa: BLE001 - any unreadable file is skipped alike
                warnings.warn(f"skipping unreadable checkpoint {path}: {error}", stacklevel=2)
                continue
            missing = REQUIRED_KEYS - set(state) if isinstance(state, dict) else REQUIRED_KEYS
            if missing or state.get("format") != FORMAT_VERSION:
                warnings.warn(
                    f"skipping {path}: not a format-{FORMAT_VERSION} trainer checkpoint "
                    f"(missing {', '.join(sorted(missing)) or 'nothing'})",
                    stacklevel=2,
                )
                continue
            return path, state
        return None, None
