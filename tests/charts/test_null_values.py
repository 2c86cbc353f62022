"""A value set to null (in YAML, a key with nothing after the colon) either means "none" or is
refused by the schema with the key named; it never ends in a Go template trace."""

from __future__ import annotations

import copy

import pytest
import yaml

from tests.support.helm import SCHEMA_REFUSAL
from tests.support.paths import REPO

# Each chart with its optional templates switched on, so that every value is read somewhere. The
# base must render: a base a guard refuses would hide every other error behind its message.
CHARTS = {
    "training-operator": {
        "replicaCount": 2,
        "leaderElection": {"enabled": True},
        "watchNamespace": "ml",
        "podDisruptionBudget": {"enabled": True},
        "networkPolicy": {"enabled": True, "metricsFrom": [{"podSelector": {}}]},
        "metrics": {"serviceMonitor": {"enabled": True}},
    },
    "pytorchjob-mnist": {
        "gpu": 1,
        "tensorboard": {"enabled": True},
        "networkPolicy": {"enabled": True},
        "persistence": {"create": {"accessModes": ["ReadWriteMany"]}},
    },
}


def value_paths(node: dict, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every key path of the values, down into the chart's own maps (not Kubernetes objects)."""
    paths = []
    for key, value in node.items():
        paths.append(prefix + (key,))
        if isinstance(value, dict) and value and not key.endswith("ecurityContext"):
            paths += value_paths(value, prefix + (key,))
    return paths


def with_null(values: dict, path: tuple[str, ...]) -> dict:
    values = copy.deepcopy(values)
    node = values
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = None
    return values


@pytest.mark.both_helm_majors
@pytest.mark.parametrize("chart", sorted(CHARTS))
def test_a_null_value_means_none_or_is_refused_by_name(helm, tmp_path, chart):
    chart_dir = REPO / "charts" / chart
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump(CHARTS[chart]))
    base = helm.template(chart_dir, values_files=(values_file,))
    assert base.returncode == 0, f"the base values must render: {base.stderr}"
    failures = []
    for path in value_paths(yaml.safe_load((chart_dir / "values.yaml").read_text())):
        values_file.write_text(yaml.safe_dump(with_null(CHARTS[chart], path)))
        result = helm.template(chart_dir, values_files=(values_file,))
        refused_by_name = SCHEMA_REFUSAL in result.stderr and path[-1] in result.stderr
        if result.returncode != 0 and not refused_by_name:
            failures.append(f"{'.'.join(path)}: {result.stderr.strip().splitlines()[-2:]}")
    assert not failures, (
        "null values that neither render nor are refused by the schema with the key named "
        "(add them to the schema's required):\n" + "\n".join(failures)
    )
