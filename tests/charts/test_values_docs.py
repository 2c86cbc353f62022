"""Both charts document every value with a `# --` comment, list exactly those in the README's
values table, and declare them in values.schema.json, which declares nothing the values lack."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from tests.support.paths import OPERATOR_CHART, WORKLOAD_CHART

CHARTS = [OPERATOR_CHART, WORKLOAD_CHART]


def documented_values(chart: Path) -> set[str]:
    """Key paths whose `# --` comment block sits right above them, at any indentation."""
    documented, stack, comments = set(), [], []
    for line in (chart / "values.yaml").read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            comments.append(stripped)
            continue
        indent = len(line) - len(line.lstrip())
        if ":" in stripped and not stripped.startswith("-"):
            while stack and stack[-1][0] >= indent:
                stack.pop()
            stack.append((indent, stripped.split(":", 1)[0]))
            if any(comment.startswith("# --") for comment in comments):
                documented.add(".".join(key for _, key in stack))
        comments = []
    return documented


def leaf_paths(node: object, prefix: str = "") -> set[str]:
    """Dotted paths of the values' leaves (an empty map is a leaf)."""
    if isinstance(node, dict) and node:
        return set().union(*(leaf_paths(v, f"{prefix}{k}.") for k, v in node.items()))
    return {prefix.rstrip(".")}


def values_leaves(chart: Path) -> set[str]:
    return leaf_paths(yaml.safe_load((chart / "values.yaml").read_text()))


@pytest.mark.parametrize("chart", CHARTS, ids=lambda chart: chart.name)
def test_every_value_has_a_doc_comment(chart):
    documented = documented_values(chart)
    undocumented = {leaf for leaf in values_leaves(chart)
                    if not any(leaf == d or leaf.startswith(d + ".") for d in documented)}
    assert not undocumented, f"add a `# --` comment above these values: {sorted(undocumented)}"


@pytest.mark.parametrize("chart", CHARTS, ids=lambda chart: chart.name)
def test_readme_lists_every_documented_value(chart):
    values_section = (chart / "README.md").read_text().split("\n## Values\n", 1)[1]
    listed = set(re.findall(r"^\| `([A-Za-z0-9_.]+)` \|", values_section, re.MULTILINE))
    assert listed == documented_values(chart), "the README's values table and the `# --` comments differ"


def schema_paths(node: dict, prefix: str = "") -> set[str]:
    paths = set()
    for name, child in node.get("properties", {}).items():
        paths.add(prefix + name)
        paths |= schema_paths(child, f"{prefix}{name}.")
    return paths


@pytest.mark.parametrize("chart", CHARTS, ids=lambda chart: chart.name)
def test_schema_and_values_declare_the_same_keys(chart):
    schema = json.loads((chart / "values.schema.json").read_text())
    declared = schema_paths(schema) - {"global", "enabled"}  # what a parent chart passes
    documented = documented_values(chart)
    assert documented <= declared, f"values missing from the schema: {sorted(documented - declared)}"
    # Below a documented value the schema may describe Kubernetes fields (securityContext, …).
    chart_owned = {p for p in declared if not any(p.startswith(d + ".") for d in documented)}
    values_keys = set()
    for leaf in values_leaves(chart):
        parts = leaf.split(".")
        values_keys |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
    assert chart_owned <= values_keys, f"schema keys with no value: {sorted(chart_owned - values_keys)}"
