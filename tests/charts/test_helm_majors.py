"""Helm 3 and Helm 4 render the same documents from both charts: the workload chart's whole matrix (every
job kind, its values files and cases), the operator chart's defaults and ci/ files, every NOTES case, and
the values sweeps' bases. So the chart tests that render with the newest major only (tests/conftest.py)
speak for both; those marked both_helm_majors check where the majors do differ (lint, schema validation,
values parsing, packaging)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.support.chart_cases import notes_cases
from tests.support.chart_values import BASES, READ_WITH, merged
from tests.support.helm import HELM_NAMES, NOTES_PREVIEW, Helm, helm_binary, notes_preview_chart
from tests.support.paths import OPERATOR_CHART, WORKLOAD_CHART
from tests.support.pytorchjob_mnist import KINDS, case_files_in

# A rendering: what it is, the chart, and Helm.render's keyword arguments.
Rendering = tuple[str, Path, dict]


def majors() -> list[Helm]:
    found = [Helm(name, path) for name in HELM_NAMES if (path := helm_binary(name))]
    if len(found) < len(HELM_NAMES):
        pytest.skip(f"needs every Helm major of {HELM_NAMES} installed (`make tools`); found {[h.name for h in found]}")
    return found


def matrix(tmp_path: Path) -> list[Rendering]:
    cases = case_files_in(tmp_path)
    found = [
        (f"{kind}: {name}", WORKLOAD_CHART, {"values_files": files})
        for kind, by_name in cases.items()
        for name, files in by_name.items()
    ]
    operator_files = [(), *((f,) for f in sorted((OPERATOR_CHART / "ci").glob("*-values.yaml")))]
    found += [
        (f"training-operator: {files[0].name if files else 'defaults'}", OPERATOR_CHART, {"values_files": files})
        for files in operator_files
    ]
    return found


def notes(tmp_path: Path) -> list[Rendering]:
    previews = {chart: notes_preview_chart(chart, tmp_path / "preview") for chart in (WORKLOAD_CHART, OPERATOR_CHART)}
    (tmp_path / "values").mkdir()
    return [
        (
            f"NOTES of {chart.name} {' '.join(flags)}",
            previews[chart],
            {"release": "mnist", "namespace": "ml", "extra": (*flags, "--show-only", NOTES_PREVIEW)},
        )
        for chart, flags in notes_cases(tmp_path / "values")
    ]


def sweep_bases(tmp_path: Path) -> list[Rendering]:
    """chart_values.BASES, alone and with each READ_WITH, under every job kind for the workload chart."""
    found = []
    for chart, base in BASES.items():
        jobs = [{"jobKind": kind.name} for kind in KINDS] if chart == WORKLOAD_CHART else [{}]
        for job in jobs:
            for extra in [{}, *READ_WITH[chart].values()]:
                values = merged(merged(base, job), extra)
                path = tmp_path / f"base-{len(found)}.yaml"
                path.write_text(yaml.safe_dump(values))
                found.append((f"{chart.name}: {values}", chart, {"values_files": (path,)}))
    return found


def outcome(helm: Helm, chart: Path, kwargs: dict) -> list[dict] | str:
    """The documents in a fixed order (Helm 4 puts kinds it does not know, a ServiceMonitor, elsewhere
    than Helm 3), or "refused" (a base that a kind refuses: the majors word refusals apart)."""
    if helm.template(chart, **kwargs).returncode != 0:
        return "refused"
    docs = helm.render(chart, **kwargs)
    return sorted(docs, key=lambda doc: (doc.get("kind", ""), doc.get("metadata", {}).get("name", "")))


@pytest.mark.parametrize("renderings", [matrix, notes, sweep_bases])
def test_every_helm_major_renders_the_same_documents(tmp_path, renderings):
    helms = majors()
    cases = renderings(tmp_path)
    assert cases
    differing = []
    for what, chart, kwargs in cases:
        first, *others = [outcome(helm, chart, kwargs) for helm in helms]
        differing += [f"{what}: {helm.name}" for helm, docs in zip(helms[1:], others, strict=True) if docs != first]
    assert not differing, f"rendered otherwise than by {helms[0].name}:\n" + "\n".join(differing)
