import pytest
import torch

from trainer.checkpoint import CheckpointStore
from trainer.fileio import atomic_write


def _state(step):
    return {"settings": {}, "model": {"w": torch.full((2,), float(step))}, "optimizer": {}, "epoch": 1,
            "batch": step, "step": step, "rng": {"torch": torch.get_rng_state()}}


def test_keeps_only_the_newest_k(tmp_path):
    store = CheckpointStore(tmp_path, keep=2)
    for step in (5, 10, 15):
        store.save(_state(step), step)
    assert [p.name for p in store.paths()] == ["checkpoint-000000015.pt", "checkpoint-000000010.pt"]


def test_resumes_from_the_newest(tmp_path):
    store = CheckpointStore(tmp_path, keep=3)
    store.save(_state(1), 1)
    store.save(_state(2), 2)
    path, state = store.load_latest()
    assert path.name == "checkpoint-000000002.pt" and state["step"] == 2


@pytest.mark.parametrize("damage", ["truncate", "garbage", "foreign"])
def test_damaged_newest_checkpoint_falls_back_with_a_warning(tmp_path, damage):
    store = CheckpointStore(tmp_path, keep=3)
    store.save(_state(1), 1)
    newest = store.save(_state(2), 2)
    if damage == "truncate":
        newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])
    elif damage == "garbage":
        newest.write_bytes(b"\x00not a checkpoint")
    else:
        torch.save({"weights": torch.zeros(1)}, newest)
    with pytest.warns(UserWarning, match="skipping"):
        path, state = store.load_latest()
    assert path.name == "checkpoint-000000001.pt" and state["step"] == 1


def test_no_checkpoints_means_a_fresh_start(tmp_path):
    assert CheckpointStore(tmp_path / "empty", keep=1).load_latest() == (None, None)


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


def test_temp_files_are_not_mistaken_for_checkpoints(tmp_path):
    store = CheckpointStore(tmp_path, keep=3)
    (tmp_path / ".checkpoint-000000009.pt.abc.tmp").write_bytes(b"half")
    store.save(_state(3), 3)
    assert [p.name for p in store.paths()] == ["checkpoint-000000003.pt"]
