"""Both charts document every value with a `# --` comment, their README values tables are what
`make docs` (ci/values_docs.py) writes from those comments, and values.schema.json declares every
documented value and nothing the values lack."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import yaml

from ci import values_docs
from tests.support.paths import OPERATOR_CHART, REPO, WORKLOAD_CHART

CHARTS = [OPERATOR_CHART, WORKLOAD_CHART]


def documented_values(chart) -> set[str]:
    return {doc.path for doc in values_docs.parse_comments((chart / "values.yaml").read_text())}


def values_leaves(chart) -> list[str]:
    return values_docs.leaf_paths(yaml.safe_load((chart / "values.yaml").read_text()))


@pytest.mark.parametrize("chart", CHARTS, ids=lambda chart: chart.name)
def test_every_value_has_a_doc_comment(chart):
    documented = documented_values(chart)
    undocumented = {
        leaf for leaf in values_leaves(chart) if not any(leaf == d or leaf.startswith(d + ".") for d in documented)
    }
    assert not undocumented, f"add a `# --` comment above these values: {sorted(undocumented)}"


@pytest.mark.parametrize("chart", CHARTS, ids=lambda chart: chart.name)
def test_readme_values_table_is_what_make_docs_writes(chart):
    assert (chart / "README.md").read_text() == values_docs.render_readme(chart), (
        f"{chart.name}/README.md's values table differs from values.yaml's `# --` comments: run `make docs`"
    )


def test_make_docs_check_fails_on_a_stale_table_and_names_it(tmp_path, monkeypatch):
    """The command line, on a copy of a chart whose README has a row the comments do not."""
    chart = tmp_path / "charts" / "demo"
    chart.mkdir(parents=True)
    (chart / "values.yaml").write_text("# -- Replicas.\nreplicas: 1\n")
    readme = "# demo\n\n<!-- values:start -->\n| `replicas` | int | `2` | Stale. |\n<!-- values:end -->\n\nEnd.\n"
    (chart / "README.md").write_text(readme)
    monkeypatch.setattr(values_docs, "REPO", tmp_path)
    monkeypatch.setattr(values_docs, "CHARTS", tmp_path / "charts")
    monkeypatch.setattr(sys, "argv", ["values_docs.py", "--check"])
    assert values_docs.main() == 1
    assert (chart / "README.md").read_text() == readme, "--check writes nothing"
    monkeypatch.setattr(sys, "argv", ["values_docs.py"])
    assert values_docs.main() == 0
    written = (chart / "README.md").read_text()
    assert "| `replicas` | int | `1` | Replicas. |" in written and "Stale" not in written
    assert written.startswith("# demo\n\n") and written.endswith("<!-- values:end -->\n\nEnd.\n"), (
        "prose outside the markers is kept"
    )


def test_make_docs_runs_the_generator_in_check_mode_cleanly():
    result = subprocess.run(
        [sys.executable, "ci/values_docs.py", "--check"], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert re.search(
        r"^docs:.*\n\t\$\(CHART_VENV\)/bin/python ci/values_docs\.py$", (REPO / "Makefile").read_text(), re.MULTILINE
    ), "`make docs` runs the generator"


def parse(text: str) -> dict[str, values_docs.Doc]:
    return {doc.path: doc for doc in values_docs.parse_comments(text)}


def test_comment_blocks_in_helm_docs_style():
    docs = parse(
        "# Not documentation: a section comment.\n"
        "image:\n"
        "  # A note for maintainers.\n"
        "  # -- Image tag,\n"
        "  # continued here.\n"
        "  # @default -- the chart's appVersion\n"
        "  tag: ''\n"
        "  # -- (int) Port, typed by the comment.\n"
        "  port: null\n"
        "\n"
        "# -- Separated by a blank line: documents nothing.\n"
        "\n"
        "undocumented: 1\n"
        "annotations:\n"
        "  # -- A key with dots.\n"
        "  example.com/name: x\n"
    )
    assert set(docs) == {"image.tag", "image.port", "annotations.example.com/name"}
    assert docs["image.tag"] == values_docs.Doc(
        "image.tag", "Image tag, continued here.", None, "the chart's appVersion"
    )
    assert docs["image.port"].type == "int" and docs["image.port"].description == "Port, typed by the comment."


def test_types_come_from_the_comment_then_the_schema_then_the_value(tmp_path):
    chart = tmp_path / "demo"
    chart.mkdir()
    (chart / "values.yaml").write_text(
        "# -- (seconds) Typed by the comment.\nwait: 5\n"
        "# -- Typed by the schema.\nlimit: null\n"
        "# -- Typed by its value.\nname: x\n"
        "# -- A map, documented as a whole.\nresources:\n  requests:\n    cpu: 1\n"
    )
    schema = {
        "properties": {"limit": {"$ref": "#/definitions/count"}},
        "definitions": {"count": {"type": ["integer", "null"]}},
    }
    (chart / "values.schema.json").write_text(json.dumps(schema))
    rows = values_docs.table(chart).splitlines()[-4:]
    assert rows == [
        "| `wait` | seconds | `5` | Typed by the comment. |",
        "| `limit` | int or null | `null` | Typed by the schema. |",
        '| `name` | string | `"x"` | Typed by its value. |',
        '| `resources` | object | `{"requests": {"cpu": 1}}` | A map, documented as a whole. |',
    ]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ("# -- Documented.\na: 1\nb: 2\n", "add a `# --` comment right above b"),
        ("# -- No type anywhere.\nlimit: null\n", "limit defaults to null and values.schema.json gives it no type"),
        ("# -- A list.\nlist:\n  - name: x\n    # -- Inside a list.\n    value: 1\n", "documents no value"),
    ],
)
def test_bad_values_are_refused_naming_the_key_and_the_fix(tmp_path, values, message):
    chart = tmp_path / "demo"
    chart.mkdir()
    (chart / "values.yaml").write_text(values)
    with pytest.raises(values_docs.ValuesDocError, match=re.escape(message)):
        values_docs.table(chart)


def test_a_readme_without_markers_is_refused(tmp_path):
    chart = tmp_path / "demo"
    chart.mkdir()
    (chart / "values.yaml").write_text("# -- A.\na: 1\n")
    (chart / "README.md").write_text("# demo\n")
    with pytest.raises(values_docs.ValuesDocError, match="values:start"):
        values_docs.render_readme(chart)


def test_pipes_in_descriptions_are_escaped(tmp_path):
    chart = tmp_path / "demo"
    chart.mkdir()
    (chart / "values.yaml").write_text("# -- One | two.\na: 1\n")
    assert values_docs.table(chart).splitlines()[-1] == "| `a` | int | `1` | One \\| two. |"


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
