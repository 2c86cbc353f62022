"""mypy, pinned in the test extras and configured in pyproject.toml ([tool.mypy]: trainer/ at mypy's default
strictness), finds no type error in the trainer."""

from __future__ import annotations

import subprocess

import tomllib

from tests.support.linters import venv_tool
from tests.support.paths import REPO

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def test_mypy_is_pinned_and_checks_the_trainer():
    assert any(d.startswith("mypy==") for d in PYPROJECT["project"]["optional-dependencies"]["test"])
    assert PYPROJECT["tool"]["mypy"]["files"] == ["trainer"]


def test_mypy_finds_no_type_error_in_the_trainer():
    result = subprocess.run([venv_tool("mypy")], capture_output=True, text=True, cwd=REPO, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
