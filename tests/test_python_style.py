"""ruff, configured in pyproject.toml, settles the Python style: lint and format."""

from __future__ import annotations

import subprocess

import pytest

from tests.support.linters import venv_tool
from tests.support.paths import REPO


@pytest.mark.parametrize(
    "args",
    [["check", "--no-cache"], ["format", "--check", "--no-cache"]],
    ids=["lint", "format"],
)
def test_ruff_passes(args: list[str]):
    result = subprocess.run([venv_tool("ruff"), *args, "."], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr
