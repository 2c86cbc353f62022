"""Offline validation of rendered manifests against Kubernetes' published JSON schemas."""

from __future__ import annotations

import json
import re

import kubernetes_validate
import pytest
import yaml

from tests.support.paths import OPERATOR_CHART, WORKLOAD_CHART


def _oldest_kubernetes() -> str:
    """X.Y of the charts' `kubeVersion: ">=X.Y.0-0"`, which both must declare alike: the tests
    validate both charts against the same releases."""
    floors = set()
    for chart in (OPERATOR_CHART, WORKLOAD_CHART):
        declared = yaml.safe_load((chart / "Chart.yaml").read_text())["kubeVersion"]
        match = re.fullmatch(r">=(\d+\.\d+)\.0-0", declared)
        assert match, f"{chart.name}/Chart.yaml: kubeVersion {declared!r} is not the >=X.Y.0-0 the tests read"
        floors.add(match.group(1))
    assert len(floors) == 1, f"the charts' kubeVersion floors differ: {sorted(floors)}"
    return floors.pop()


# The oldest Kubernetes release the charts support (their kubeVersion) and the newest one kubernetes-validate knows.
OLDEST_KUBERNETES = _oldest_kubernetes()
NEWEST_KUBERNETES = kubernetes_validate.latest_version()
KUBERNETES_VERSIONS = (OLDEST_KUBERNETES, NEWEST_KUBERNETES)
# Documents that validated, by content and release: Helm 3 and Helm 4 mostly render the same objects,
# and many tests validate the same renderings; each is checked once per session.
_VALID: set[tuple[str, str]] = set()


def validate_builtin(doc: dict, version: str) -> None:
    """Raise if `doc` (a built-in kind) does not validate against Kubernetes `version` schemas.

    Custom resources (e.g. PyTorchJob) are not known to kubernetes-validate; validate them
    against our own CRD instead.
    """
    key = (json.dumps(doc, sort_keys=True, default=repr), version)
    if key not in _VALID:
        kubernetes_validate.validate(doc, version, strict=True)
        _VALID.add(key)


def assert_valid_in_every_version(doc: dict, what: str) -> None:
    """Fail the test, naming `what`, unless `doc` validates against every release in KUBERNETES_VERSIONS."""
    for version in KUBERNETES_VERSIONS:
        try:
            validate_builtin(doc, version)
        except Exception as error:  # kubernetes-validate raises several types
            pytest.fail(f"{what} is invalid for {version}: {error}")
