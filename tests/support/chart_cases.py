"""The values the NOTES of both charts are read under, for the tests that read every NOTES an install can
print: the packaged charts' (tests/charts/test_packaged.py) and the Helm majors' identity test
(tests/charts/test_helm_majors.py)."""

from __future__ import annotations

from pathlib import Path

from tests.support.paths import OPERATOR_CHART, WORKLOAD_CHART
from tests.support.pytorchjob_mnist import case_files_in


def notes_cases(tmp_dir: Path) -> list[tuple[Path, tuple[str, ...]]]:
    """Each chart with the flags its NOTES are read under: the operator's ci/ files and the settings its
    NOTES turn on, and the workload chart's whole matrix (every job kind, its values files and cases,
    written into `tmp_dir`)."""
    cases = [(OPERATOR_CHART, ())]
    cases += [(OPERATOR_CHART, ("-f", str(f))) for f in sorted((OPERATOR_CHART / "ci").glob("*-values.yaml"))]
    cases += [(OPERATOR_CHART, ("--set", "crds.enabled=false", "--set", "watchNamespace=team-a"))]
    matrix = case_files_in(tmp_dir)
    for files in (files for kind in matrix.values() for files in kind.values()):
        cases.append((WORKLOAD_CHART, tuple(arg for f in files for arg in ("-f", str(f)))))
    return cases
