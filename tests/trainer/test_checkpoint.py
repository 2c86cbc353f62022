import re
import zipfile
from dataclasses import asdict

import pytest
import torch

from trainer.checkpoint import FORMAT_VERSION, REQUIRED_KEYS, CheckpointStore, Progress
from trainer.failures import IncompatibleCheckpoint


def _state(step):
    weights = torch.full((2,), float(step))
    return {
        "settings": {},
        "model": {"w": weights},
        "optimizer": torch.optim.SGD([weights], lr=0.1).state_dict(),
        "world_size": 2,
        "precision": "fp32",
        **asdict(Progress(step=step, consumed=8 * step)),
        "rng": {"torch": torch.get_rng_state()},
    }


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


def _flip_a_byte_of_the_largest_member(path):
    """Bit rot inside the archive: the zip structure stays intact, one tensor's bytes change."""
    with zipfile.ZipFile(path) as archive:
        member = max(archive.infolist(), key=lambda info: info.file_size)
    data = bytearray(path.read_bytes())
    name_and_extra = int.from_bytes(
        data[member.header_offset + 26 : member.header_offset + 28], "little"
    ) + int.from_bytes(data[member.header_offset + 28 : member.header_offset + 30], "little")
    data[member.header_offset + 30 + name_and_extra + member.file_size // 2] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["truncate", "garbage", "foreign", "bitflip"])
def test_damaged_newest_checkpoint_falls_back_with_a_warning(tmp_path, damage):
    store = CheckpointStore(tmp_path, keep=3)
    store.save(_state(1), 1)
    newest = store.save(_state(2), 2)
    if damage == "truncate":
        newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])
    elif damage == "bitflip":
        _flip_a_byte_of_the_largest_member(newest)
        torch.load(newest, weights_only=True)  # still loads: only the CRC check notices
    elif damage == "garbage":
        newest.write_bytes(b"\x00not a checkpoint")
    else:
        torch.save({"weights": torch.zeros(1)}, newest)
    with pytest.warns(UserWarning, match="(?s)skipping .*; renamed it to checkpoint-000000002.pt.unreadable"):
        path, state = store.load_latest()
    assert path.name == "checkpoint-000000001.pt" and state["step"] == 1
    assert (tmp_path / "checkpoint-000000002.pt.unreadable").exists(), "kept for a look"


def test_a_checkpoint_that_cannot_be_read_now_is_skipped_but_kept(tmp_path, monkeypatch):
    """An I/O error may pass (a network volume's hiccup): the file is not set aside."""
    store = CheckpointStore(tmp_path, keep=3)
    store.save(_state(1), 1)
    newest = store.save(_state(2), 2)
    real_load = torch.load

    def flaky_load(path, *args, **kwargs):
        if path == newest:
            raise OSError(5, "Input/output error")
        return real_load(path, *args, **kwargs)

    monkeypatch.setattr(torch, "load", flaky_load)
    with pytest.warns(UserWarning, match="could not read it"):
        path, _ = store.load_latest()
    assert path.name == "checkpoint-000000001.pt" and newest.exists()


def test_an_unreadable_checkpoint_on_a_read_only_volume_is_skipped_with_a_warning(tmp_path, monkeypatch):
    store = CheckpointStore(tmp_path, keep=3)
    store.save(_state(1), 1)
    (tmp_path / "checkpoint-000000002.pt").write_bytes(b"garbage")

    def read_only(self, target):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(type(tmp_path), "replace", read_only)
    with pytest.warns(UserWarning, match="could not rename it"):
        path, _ = store.load_latest()
    assert path.name == "checkpoint-000000001.pt"


def test_a_skipped_checkpoint_no_longer_prunes_new_saves(tmp_path):
    store = CheckpointStore(tmp_path, keep=1)
    store.save(_state(1), 1)
    (tmp_path / "checkpoint-000000999.pt").write_bytes(b"\x00not a checkpoint")
    with pytest.warns(UserWarning, match="unreadable"):
        store.load_latest()
    store.save(_state(2), 2)
    assert [p.name for p in store.paths()] == ["checkpoint-000000002.pt"]


def test_a_save_never_prunes_itself_for_a_newer_checkpoint(tmp_path):
    """A newer checkpoint that load_latest skipped for an I/O error stays (it may read later); the
    run goes on from an older one, and its saves count only themselves and older checkpoints."""
    store = CheckpointStore(tmp_path, keep=1)
    skipped = store.save(_state(300), 300)
    store.save(_state(200), 200)
    saved = store.save(_state(210), 210)
    assert [p.name for p in store.paths()] == [skipped.name, saved.name]


@pytest.mark.parametrize("key", sorted(REQUIRED_KEYS - {"format"}))
def test_checkpoint_missing_a_key_is_skipped_not_a_crash(tmp_path, key):
    store = CheckpointStore(tmp_path, keep=3)
    store.save(_state(1), 1)
    incomplete = {k: v for k, v in _state(2).items() if k != key}
    store.save(incomplete, 2)
    with pytest.warns(UserWarning, match=f"missing {key}"):
        path, _ = store.load_latest()
    assert path.name == "checkpoint-000000001.pt"


def test_a_checkpoint_from_a_newer_trainer_is_refused_and_kept(tmp_path):
    """An image rolled back, or pods on mixed images: skipping it would silently retrain from an older one."""
    store = CheckpointStore(tmp_path, keep=3)
    store.save(_state(1), 1)
    newer = tmp_path / "checkpoint-000000002.pt"
    torch.save({**_state(2), "format": FORMAT_VERSION + 1}, newer)
    with pytest.raises(
        IncompatibleCheckpoint,
        match=f"{newer} is a format-{FORMAT_VERSION + 1} checkpoint, from a "
        "newer trainer .* Run the image that wrote it",
    ):
        store.load_latest()
    assert newer.exists(), "kept for the image that can resume from it"


def test_no_checkpoints_means_a_fresh_start(tmp_path):
    assert CheckpointStore(tmp_path / "empty", keep=1).load_latest() == (None, None)


def test_temp_files_are_not_mistaken_for_checkpoints(tmp_path):
    store = CheckpointStore(tmp_path, keep=3)
    (tmp_path / ".checkpoint-000000009.pt.abc.tmp").write_bytes(b"half")
    store.save(_state(3), 3)
    assert [p.name for p in store.paths()] == ["checkpoint-000000003.pt"]


def test_temp_files_of_a_killed_save_are_removed(tmp_path):
    store = CheckpointStore(tmp_path, keep=3)
    store.save(_state(3), 3)
    (tmp_path / ".checkpoint-000000009.pt.abc.tmp").write_bytes(b"half")
    (tmp_path / ".mnist_cnn.pt.xyz.tmp").write_bytes(b"not ours")
    assert [p.name for p in store.remove_partial_writes()] == [".checkpoint-000000009.pt.abc.tmp"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".mnist_cnn.pt.xyz.tmp", "checkpoint-000000003.pt"]


@pytest.mark.parametrize(
    "key, value, reason",
    [
        ("rng", {"torch": torch.zeros(3, dtype=torch.uint8)}, "rng is not a torch RNG state (Expected a"),
        ("rng", {"torch": "state"}, "rng is not a torch RNG state"),
        ("rng", [], "rng is not a torch RNG state"),
        ("epoch", "2", "epoch is not an integer of at least 1"),
        ("epoch", 0, "epoch is not an integer of at least 1"),
        ("consumed", -8, "consumed is not an integer of at least 0"),
        ("step", 2.5, "step is not an integer of at least 0"),
        ("world_size", 0, "world_size is not an integer of at least 1"),
        ("train_seconds", float("nan"), "train_seconds is not a duration"),
        ("history", [{"epoch": 1, "accuracy": 0.5, "val_loss": 1.0}], "history is not one evaluation per finished"),
        ("settings", ["lr", 0.01], "settings is not a dict"),
        ("model", {"w": [1.0, 2.0]}, "model is not a state_dict of tensors"),
        ("optimizer", {"state": {}}, "optimizer is not an optimizer's state_dict"),
        ("precision", 32, "precision is not a name"),
    ],
)
def test_a_checkpoint_with_every_key_but_wrong_contents_is_set_aside(tmp_path, key, value, reason):
    """Resuming would feed them to torch and the loop, and fail every restart alike with a traceback."""
    store = CheckpointStore(tmp_path, keep=3)
    store.save(_state(1), 1)
    store.save({**_state(2), key: value}, 2)
    with pytest.warns(UserWarning, match=re.escape(f"not a format-{FORMAT_VERSION} trainer checkpoint ({reason}")):
        path, state = store.load_latest()
    assert path.name == "checkpoint-000000001.pt" and state["step"] == 1
    assert (tmp_path / "checkpoint-000000002.pt.unreadable").exists()


def test_what_the_trainer_writes_is_well_formed_after_an_epoch(tmp_path):
    """The checks accept a finished epoch's state: its evaluation in the history."""
    store = CheckpointStore(tmp_path, keep=3)
    history = [{"epoch": 1, "accuracy": 0.5, "val_loss": 1.0}]
    store.save({**_state(4), "epoch": 2, "consumed": 0, "history": history}, 4)
    path, state = store.load_latest()
    assert path.name == "checkpoint-000000004.pt" and state["history"] == history
