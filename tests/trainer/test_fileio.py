"""Atomic writes: the old file or the new one, never a partial one; a full volume fails for good."""

import os
import stat

import pytest
import torch

from trainer.failures import StorageFull
from trainer.fileio import atomic_write


def test_a_full_device_is_reported_as_such_and_leaves_no_temp(tmp_path):
    """torch.save turns the kernel's ENOSPC (/dev/full's, a real one) into a RuntimeError."""
    target = tmp_path / "checkpoint-000000001.pt"

    def save_to_a_full_device(handle):
        with open("/dev/full", "wb") as full:
            torch.save({"model": torch.zeros(1024)}, full)

    with pytest.raises(StorageFull, match=f"no space left on the volume of {tmp_path} to write {target.name}"):
        atomic_write(target, save_to_a_full_device)
    assert not list(tmp_path.iterdir())


def test_failed_write_leaves_the_old_file_and_no_temp(tmp_path):
    target = tmp_path / "model.pt"
    atomic_write(target, lambda f: f.write(b"old"))

    def explode(handle):
        handle.write(b"partial")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        atomic_write(target, explode)
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["model.pt"]


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_written_files_get_the_mode_open_would_give_them(tmp_path, umask):
    """Not mkstemp's 0600: other users of a shared volume read the model."""
    previous = os.umask(umask)
    try:
        target = atomic_write(tmp_path / "model.pt", lambda f: f.write(b"weights"))
    finally:
        os.umask(previous)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask
