"""Atomic file writes: readers see the old file or the new one, never a partial one."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable


def atomic_write(path: str | Path, write: Callable[[BinaryIO], None]) -> Path:
    """Write through `write` into a temp file in the same directory, fsync, then rename.

    The temp file shares the target's directory because a rename across filesystems is a
    copy, which is not atomic.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    _fsync_directory(path.parent)
    return path


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def ensure_writable_dir(path: str | Path, flag: str) -> Path:
    """Create `path` and prove it is writable, so a bad mount fails before training starts."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as error:
        raise NotWritableError(
            f"{flag} {path} is not writable ({error.strerror or error}). Point {flag} at a "
            "writable directory, e.g. a mounted volume."
        ) from error
    return path


class NotWritableError(OSError):
    pass
