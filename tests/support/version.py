"""The project's version as pyproject.toml declares it, which the image tags and labels, the trainer
and the workload chart's appVersion all repeat."""

from __future__ import annotations

import tomllib

from tests.support.paths import REPO

PROJECT_VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
