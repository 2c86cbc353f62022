"""values.yaml, values.schema.json and the chart README agree: every value is documented with a
`# --` comment, listed in the README table and declared in the schema, and the schema declares
nothing the values do not have."""
from __future__ import annotations

import json
import re

import yaml

from tests.support.helm import REPO

CHART = REPO / "charts" / "pytorchjob-mnist"
KEY_LINE = re.compile(r"^(\s*)([A-Za-z0-9_]+):")


def documented_values() -> set[str]:
    """Key paths preceded by a helm-docs `# --` comment."""
    documented, path, pending = set(), [], False
    for line in (CHART / "values.yaml").read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("# --"):
            pending = True
            continue
        match = KEY_LINE.match(line)
        if match:
            path = path[: len(match.group(1)) // 2] + [match.group(2)]
            if pending:
                documented.add(".".join(path))
            pending = False
    return documented


def leaf_paths(node: object, prefix: str = "") -> set[str]:
    if isinstance(node, dict) and node:
        return set().union(*(leaf_paths(v, f"{prefix}{k}.") for k, v in node.items()))
    return {prefix.rstrip(".")}


def schema_paths(node: dict, prefix: str = "") -> set[str]:
    paths = set()
    for name, child in node.get("properties", {}).items():
        paths.add(prefix + name)
        paths |= schema_paths(child, f"{prefix}{name}.")
    return paths


def test_every_value_has_a_doc_comment():
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    documented = documented_values()
    undocumented = {leaf for leaf in leaf_paths(values)
                    if not any(leaf == d or leaf.startswith(d + ".") for d in documented)}
    assert not undocumented, f"values without a `# --` comment: {sorted(undocumented)}"


def test_readme_lists_every_documented_value():
    values_section = (CHART / "README.md").read_text().split("\n## Values\n", 1)[1]
    listed = set(re.findall(r"^\| `([A-Za-z0-9_.]+)` \|", values_section, re.MULTILINE))
    assert listed == documented_values()


def test_schema_and_values_declare_the_same_keys():
    schema = json.loads((CHART / "values.schema.json").read_text())
    declared = schema_paths(schema) - {"global", "enabled"}  # what a parent chart passes
    documented = documented_values()
    assert documented <= declared, f"values missing from the schema: {sorted(documented - declared)}"
    # Below a documented value the schema may describe Kubernetes fields (securityContext, …).
    chart_owned = {p for p in declared if not any(p.startswith(d + ".") for d in documented)}
    values_keys = set()
    for leaf in leaf_paths(yaml.safe_load((CHART / "values.yaml").read_text())):
        parts = leaf.split(".")
        values_keys |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
    assert chart_owned <= values_keys, f"schema keys with no value: {sorted(chart_owned - values_keys)}"


def quick_start() -> str:
    return (CHART / "README.md").read_text().split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]


def test_quick_start_builds_and_uses_the_image_the_makefile_pushes():
    """No registry publishes the default image: the Quick start pushes it with the Makefile and
    points image.repository at it."""
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"^image:", makefile, re.MULTILINE) and re.search(r"^push:", makefile, re.MULTILINE)
    image_name = re.search(r"^IMAGE_NAME \?= (\S+)$", makefile, re.MULTILINE).group(1)
    assert re.search(r"^IMG \?= \$\(REGISTRY\)/\$\(IMAGE_NAME\):", makefile, re.MULTILINE)
    text = quick_start()
    assert "make image push REGISTRY=<your registry>" in text
    assert f"--set image.repository=<your registry>/{image_name}" in text
    assert text.index("make image push") < text.index("helm install mnist")


def test_quick_start_helm_test_outlasts_the_test_pods_wait():
    timeout = yaml.safe_load((CHART / "values.yaml").read_text())["tests"]["timeoutSeconds"]
    assert f"helm test mnist -n ml --timeout {timeout + 60}s" in quick_start()


def test_readme_does_not_promise_what_nothing_does():
    readme = (CHART / "README.md").read_text()
    assert "makes the scheduler keep" not in readme and "scheduled next to" not in readme
    assert "podAffinity" in readme and "Multi-Attach" in readme, "the README explains the RWO co-location"
    assert "chart-testing installs" not in readme, "nothing in the repository runs `ct install`"
    values = (CHART / "values.yaml").read_text()
    assert "makes the scheduler keep" not in values and "scheduled next to" not in values
