"""The project's version: pyproject.toml holds it, the only copy the tools cannot read from there being
the workload chart's appVersion (tests/test_versions.py compares them). The Makefile's image tag, the
image's labels and the release's tag check all read pyproject.toml."""

from __future__ import annotations

import tomllib

from tests.support.paths import REPO

PROJECT_VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
