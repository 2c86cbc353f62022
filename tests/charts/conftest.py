"""Fixtures of the charts/pytorchjob-mnist tests: each combination of tests.support.pytorchjob_mnist,
rendered once per Helm binary for every module that inspects it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.paths import WORKLOAD_CHART
from tests.support.pytorchjob_mnist import case_files_in


@pytest.fixture(scope="session")
def case_files(tmp_path_factory) -> dict[str, tuple[Path, ...]]:
    return case_files_in(tmp_path_factory.mktemp("pytorchjob-mnist-values"))


@pytest.fixture(scope="session")
def rendered(helm, case_files) -> dict[str, list[dict]]:
    return {name: helm.render(WORKLOAD_CHART, values_files=files) for name, files in case_files.items()}


@pytest.fixture(scope="session")
def default_docs(rendered) -> list[dict]:
    return rendered["defaults"]
