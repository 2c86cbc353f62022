"""CHANGELOG.md as a release would have it: its [Unreleased] section under the version's heading, for the
tests that run ci/publish-charts.sh, which writes each chart's artifacthub.io/changes from that section."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.support.paths import REPO
from tests.support.version import PROJECT_VERSION

CHANGELOG = REPO / "CHANGELOG.md"


def released_changelog(version: str = PROJECT_VERSION) -> str:
    return CHANGELOG.read_text().replace("## [Unreleased]", f"## [{version}] - 2026-12-01", 1)


def release_checkout(checkout: Path) -> None:
    """Put what ci/publish-charts.sh reads besides the charts into `checkout`: pyproject.toml (the version)
    and a CHANGELOG.md with that version's section."""
    checkout.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "pyproject.toml", checkout / "pyproject.toml")
    (checkout / "CHANGELOG.md").write_text(released_changelog())
