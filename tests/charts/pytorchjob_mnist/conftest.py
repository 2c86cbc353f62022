"""Fixtures of the charts/pytorchjob-mnist tests. `kind` runs a test once for each job kind of
tests.support.pytorchjob_mnist.KINDS; a kind's own test module fixes it instead. `rendered` is that
kind's matrix, each combination rendered once per Helm binary for the session."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.helm import notes_preview_chart, render_notes
from tests.support.paths import WORKLOAD_CHART
from tests.support.pytorchjob_mnist import KINDS, Kind, case_files_in, helpers_preview_chart


@pytest.fixture(params=KINDS, ids=lambda kind: kind.name)
def kind(request) -> Kind:
    return request.param


@pytest.fixture(scope="session")
def case_files(tmp_path_factory) -> dict[str, dict[str, tuple[Path, ...]]]:
    return case_files_in(tmp_path_factory.mktemp("pytorchjob-mnist-values"))


@pytest.fixture(scope="session")
def rendered_kinds(helm, case_files) -> Callable[[Kind], dict[str, list[dict]]]:
    """A kind's matrix rendered, on first use."""
    matrices: dict[str, dict[str, list[dict]]] = {}

    def rendered(kind: Kind) -> dict[str, list[dict]]:
        if kind.name not in matrices:
            matrices[kind.name] = {
                name: helm.render(WORKLOAD_CHART, values_files=files) for name, files in case_files[kind.name].items()
            }
        return matrices[kind.name]

    return rendered


@pytest.fixture
def rendered(rendered_kinds, kind) -> dict[str, list[dict]]:
    return rendered_kinds(kind)


@pytest.fixture
def default_docs(rendered) -> list[dict]:
    return rendered["defaults"]


@pytest.fixture(scope="session")
def notes_chart(tmp_path_factory) -> Path:
    return notes_preview_chart(WORKLOAD_CHART, tmp_path_factory.mktemp("notes"))


@pytest.fixture
def notes(helm, notes_chart, kind) -> Callable[..., str]:
    """NOTES of `helm install mnist -n ml` of this kind with these extra flags."""
    return lambda *args: render_notes(
        helm, notes_chart, release="mnist", namespace="ml", extra=("--set", f"jobKind={kind.name}", *args)
    )


@pytest.fixture(scope="session")
def helpers_chart(tmp_path_factory) -> Path:
    return helpers_preview_chart(tmp_path_factory.mktemp("helpers"))
