"""File writes that never leave a partial file, checks that a directory is writable, and a full
volume reported as a failure that no restart fixes."""

from __future__ import annotations

import errno
import os
import secrets
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from trainer.failures import NotWritableError, StorageFull

_TEMP_SUFFIX = ".tmp"


def _temp_prefix(name: str) -> str:
    """Temp files of writes to `name` are hidden files beginning with this."""
    return f".{name}."


def atomic_write(path: str | Path, write: Callable[[BinaryIO], object]) -> Path:
    """Write through `write` into a temp file in the same directory, fsync, then rename.

    The temp file shares the target's directory because a rename across filesystems is a
    copy, which is not atomic.
    """
    path = Path(path)
    with full_volume_is_final(path.parent, path.name):
        return _write_then_rename(path, write)


@contextmanager
def full_volume_is_final(directory: str | Path, what: str) -> Iterator[None]:
    """Raise StorageFull for a write of `what` into `directory` that finds its volume full, so the
    job fails for good instead of being restarted into the same full volume."""
    try:
        yield
    except BaseException as error:
        if full := _storage_full(error):
            raise StorageFull(
                f"no space left on the volume of {directory} to write {what} ({full.strerror}). "
                "Free space there or give the volume more, then restart the job."
            ) from error
        raise


def _write_then_rename(path: Path, write: Callable[[BinaryIO], object]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{_temp_prefix(path.name)}{secrets.token_hex(6)}{_TEMP_SUFFIX}")
    # The mode open() gives (0666 less the umask), not mkstemp's 0600: other readers of a shared
    # volume (a serving pod, the fsGroup) load the model.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_directory(path.parent)
    return path


def _storage_full(error: BaseException | None) -> OSError | None:
    """The out-of-space error behind `error`, if any: torch.save wraps it in a RuntimeError."""
    while error is not None:
        if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
            return error
        error = error.__cause__ or error.__context__
    return None


def remove_partial_writes(directory: str | Path, name_pattern: str) -> list[Path]:
    """Delete the temp files of atomic writes to `name_pattern` (a glob) whose process was killed
    before it could clean up; call it only where no such write is in progress."""
    stale = sorted(Path(directory).glob(f"{_temp_prefix(name_pattern)}*{_TEMP_SUFFIX}"))
    for path in stale:
        path.unlink(missing_ok=True)
    return stale


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def ensure_writable_dir(path: str | Path, flag: str, fix: str = "") -> Path:
    """Create `path` and prove it is writable, so a bad mount fails before training starts."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as error:
        fix = fix or f"Point {flag} at a writable directory, e.g. a mounted volume."
        raise NotWritableError(f"{flag} {path} is not writable ({error.strerror or error}). {fix}") from error
    return path
