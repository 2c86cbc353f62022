from __future__ import annotations

import pytest

from tests.support.helm import HELM_NAMES, Helm, helm_binary
from tests.support.procs import stop_spawned


@pytest.fixture(scope="session", params=HELM_NAMES)
def helm(request) -> Helm:
    """Each chart test runs once with Helm 3 and once with Helm 4."""
    path = helm_binary(request.param)
    if path is None:
        pytest.skip(f"{request.param} is not installed: run `make tools` (ci/install-tools.sh)")
    return Helm(request.param, path)


@pytest.fixture(autouse=True)
def reap_spawned_processes():
    """Stop what the test started with tests.support.procs.spawn and left running."""
    yield
    stop_spawned()
