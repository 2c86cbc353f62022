"""shellcheck on every script under ci/."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.linters import venv_tool
from tests.support.paths import REPO

SHELL_SCRIPTS = sorted((REPO / "ci").rglob("*.sh"))


def test_the_scripts_are_found():
    assert REPO / "ci" / "build-image.sh" in SHELL_SCRIPTS


@pytest.mark.parametrize("script", SHELL_SCRIPTS, ids=lambda p: str(p.relative_to(REPO)))
def test_shellcheck_passes(script: Path):
    result = subprocess.run(
        [venv_tool("shellcheck"), "--severity=style", "--external-sources", str(script)],
        capture_output=True,
        text=True,
        cwd=script.parent,
    )
    assert result.returncode == 0, result.stdout + result.stderr
