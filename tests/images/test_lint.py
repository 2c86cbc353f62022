"""Static checks of the Dockerfiles: hadolint, and the RUN --mount that older buildah breaks.
tests/test_shell_scripts.py lints the CI scripts."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.support.linters import venv_tool
from tests.support.paths import REPO

DOCKERFILES = sorted({*(REPO / "docker").glob("*Dockerfile"), *(REPO / "docker").glob("Dockerfile*")})


def test_the_dockerfile_is_found():
    assert REPO / "docker" / "Dockerfile" in DOCKERFILES


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
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
