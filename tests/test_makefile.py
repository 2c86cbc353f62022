"""The Makefile runs from the repository only: its paths are relative to it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.support.paths import REPO

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="GNU make is not installed")


def test_make_from_another_directory_stops_before_any_recipe(tmp_path):
    """`make -f <repo>/Makefile clean` from elsewhere would delete that directory's build/."""
    (tmp_path / "build").mkdir()
    result = subprocess.run(
        ["make", "-f", str(REPO / "Makefile"), "clean"], cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 2
    assert f"run make in {REPO.resolve()}, or as make -C {REPO.resolve()}" in result.stderr
    assert (tmp_path / "build").is_dir()


def test_make_dash_c_runs_from_anywhere(tmp_path):
    result = subprocess.run(["make", "-C", str(REPO), "help"], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "Run every test that can run on this machine" in result.stdout


def test_make_runs_in_a_checkout_whose_path_has_spaces(tmp_path):
    """make splits paths at spaces: a guard built on $(realpath $(CURDIR)) refused every target there."""
    checkout = tmp_path / "My Projects" / "pytorchjob-mnist"
    checkout.mkdir(parents=True)
    for name in ("Makefile", "ci/install-tools.sh"):
        (checkout / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, checkout / name)
    result = subprocess.run(["make", "help"], cwd=checkout, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "Run every test that can run on this machine" in result.stdout


def test_the_dev_venv_refuses_a_python_older_than_3_11(tmp_path):
    """The tests read TOML with tomllib (3.11); on 3.10, pytest would stop at collection instead."""
    checkout = tmp_path / "checkout"
    for name in ("Makefile", "ci/install-tools.sh", "pyproject.toml"):
        (checkout / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, checkout / name)
    # A Python 3.10 stand-in: this interpreter, reporting 3.10 to the version check.
    python310 = tmp_path / "python3.10"
    python310.write_text(
        f'#!/bin/sh\nexec {sys.executable} -c "import sys; sys.version_info = (3, 10, 14); '
        f'sys.version = \'3.10.14\'; exec(sys.argv[1])" "$2"\n'
    )
    python310.chmod(0o755)
    result = subprocess.run(["make", "venv", f"PYTHON={python310}"], cwd=checkout, capture_output=True, text=True)
    assert result.returncode == 2
    assert "the dev venv needs Python 3.11 or newer, and" in result.stderr and "is 3.10.14" in result.stderr
    assert not (checkout / ".venv").exists()


def test_offline_images_get_the_release_name_only_when_asked():
    """An offline CPU image cannot load torchvision: under make image's release name by default,
    a later `make push` would publish it as the release's image."""

    def offline_build(*args: str, **env: str) -> str:
        result = subprocess.run(
            ["make", "-n", "image-offline", *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            env={k: v for k, v in os.environ.items() if k != "IMG"} | env,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    assert "IMG=" not in offline_build(), "build-offline.sh's own localhost/...:dev-<variant> applies"
    assert "IMG=registry.example.com/ml/trainer:dev" in offline_build("IMG=registry.example.com/ml/trainer:dev")
    assert "IMG=registry.example.com/ml/trainer:env" in offline_build(IMG="registry.example.com/ml/trainer:env")
