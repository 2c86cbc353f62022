"""No value of either chart can inject YAML. Every string of values.yaml, and an entry of every list and
map a user fills (labels, annotations, nodeSelector, env, extraArgs, pullSecrets, NetworkPolicy peers, …),
is set in turn to a valid value followed by a payload that would end its YAML scalar: a newline and a
document of the writer's choosing, or a newline and a pod field. Each is refused with the key named, or
renders the objects (kinds and names) that the valid value alone renders, with the payload intact inside
a string: the manifests quote every string from values, or the schema constrains it."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import yaml

from tests.support.chart_values import BASES, ChartValues, Key, merged, names_key, nested, reading_base, strings
from tests.support.paths import OPERATOR_CHART, WORKLOAD_CHART
from tests.support.pytorchjob_mnist import KINDS

PAYLOADS = {
    "document": "\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: injected\n",
    "field": "\nhostNetwork: true",
}
# Valid values to put before a payload, the first that the key's schema accepts: names, paths, flags, quantities, digests.
CLEAN_CANDIDATES = ("x", "/x", "--x", "1", "0.5", "sha256:" + "a" * 64)
# A map entry or object field that the test adds where users fill a map, list or Kubernetes object.
ADDED_KEY = "example.com/injected"

# Where a site's text goes in the values it sets.
PLACEHOLDER = "\0"


@dataclass(frozen=True)
class Site:
    """Where a payload goes: the key it lands in (`path`), and the values that put a text there: `template`,
    the text at PLACEHOLDER, set at key `root`."""

    path: tuple
    what: str  # "value" (the key's own string), "entry" (a list item or map value), "name" (a map key), "field"
    root: tuple
    template: object
    clean: str  # the valid text the payload follows

    def values(self, text: str) -> dict:
        return nested(self.root, substitute(self.template, text))


def substitute(template: object, text: str) -> object:
    if template == PLACEHOLDER:
        return text
    if isinstance(template, dict):
        return {substitute(key, text): substitute(value, text) for key, value in template.items()}
    if isinstance(template, list):
        return [substitute(value, text) for value in template]
    return template


def site(chart: ChartValues, path: tuple, what: str, root: tuple, template: object, schema: dict, default=None) -> Site:
    """A Site whose clean text is the first that the schema accepts there: the default, the key's enum, then
    CLEAN_CANDIDATES; or, where none fits, "x" (the payload is then refused anyway)."""
    enum = [value for value in chart.resolve(schema).get("enum", []) if isinstance(value, str) and value]
    candidates = ([default] if isinstance(default, str) and default else []) + enum + list(CLEAN_CANDIDATES)
    clean = next((c for c in candidates if chart.is_valid(nested(root, substitute(template, c)))), candidates[0])
    return Site(path, what, root, template, clean)


def filler(chart: ChartValues, node: dict) -> object:
    """A valid value for a required field of a list entry the test adds."""
    node = chart.resolve(node)
    if "enum" in node:
        return node["enum"][0]
    types = node.get("type", "string")
    types = types if isinstance(types, list) else [types]
    return node.get("minimum", 1) if "integer" in types else "x"


def sites(chart: ChartValues) -> list[Site]:
    found = []
    for key in chart.keys():
        schema, path = key.schema, key.path
        if isinstance(key.default, str) or ("string" in key.types() and key.default is None):
            found.append(site(chart, path, "value", path, PLACEHOLDER, schema, key.default))
        if isinstance(key.default, dict) and isinstance(schema.get("additionalProperties"), dict):
            found += map_sites(chart, path, schema, path, lambda value: value)
        if isinstance(key.default, dict):
            for field, node in chart.resolve(schema).get("properties", {}).items():
                if field not in key.default:
                    found += unset_sites(chart, (*path, field), node, (*path, field), lambda value: value)
        if isinstance(key.default, list) and not key.default:
            found += unset_sites(chart, path, schema, path, lambda value: value)
    return found


def map_sites(chart: ChartValues, path: tuple, schema: dict, root: tuple, wrap) -> list[Site]:
    """A map users fill: an added entry's value (where it is a string) and its key."""
    entry_schema = chart.child(schema, ADDED_KEY)
    entry = site(chart, (*path, ADDED_KEY), "entry", root, wrap({ADDED_KEY: PLACEHOLDER}), entry_schema)
    name = site(chart, path, "name", root, wrap({PLACEHOLDER: entry.clean}), {}, ADDED_KEY)
    return ([entry] if "string" in Key((), None, entry_schema).types() else []) + [name]


def unset_sites(chart: ChartValues, path: tuple, schema: dict, root: tuple, wrap) -> list[Site]:
    """The strings a key that values.yaml leaves out (or an empty list) can hold, down its schema: `wrap`
    puts a value of `path` where it goes in the values set at `root`, beside its required siblings."""
    node = chart.resolve(schema)
    if node == {}:  # a Kubernetes object the schema lets through unchecked: any content
        return [site(chart, (*path, ADDED_KEY), "field", root, wrap({ADDED_KEY: PLACEHOLDER}), {})]
    types = Key((), None, node).types()
    if "properties" in node:
        found = []
        for field, child in node["properties"].items():
            required = {name: filler(chart, node["properties"][name]) for name in node.get("required", [])}

            def inside(value, field=field, required=required):
                return wrap({**required, field: value})

            found += unset_sites(chart, (*path, field), child, root, inside)
        return found
    if isinstance(node.get("additionalProperties"), dict):
        return map_sites(chart, path, node, root, wrap)
    if "array" in types and "items" in node:
        return unset_sites(chart, (*path, 0), node["items"], root, lambda value: wrap([value]))
    if "string" in types:
        return [site(chart, path, "value" if path == root else "field", root, wrap(PLACEHOLDER), node)]
    return []


def objects(docs: list[dict]) -> list[tuple[str, str]]:
    return sorted((doc["kind"], doc["metadata"]["name"]) for doc in docs)


def injection_problems(helm, chart_dir, tmp_path, jobs: list[dict | None]) -> tuple[list[str], set[tuple]]:
    """Every site of the chart with both payloads, under each of `jobs` (a jobKind's values, or None for
    the operator): what went wrong, and the sites whose payload was refused or rendered (not unread)."""
    chart = ChartValues(chart_dir)
    problems, exercised = [], set()
    values_file = tmp_path / "values.yaml"

    def render(values: dict):
        values_file.write_text(yaml.safe_dump(values))
        return helm.template(chart_dir, values_files=(values_file,))

    for job in jobs:
        base = merged(BASES[chart_dir], job or {})
        for site in sites(chart):
            where = f"{job['jobKind'] if job else chart_dir.name}: {'.'.join(map(str, site.path))} ({site.what})"
            site_base = reading_base(chart_dir, site.path, base)
            for payload_name, payload in PAYLOADS.items():
                text = site.clean + payload
                result = render(merged(site_base, site.values(text)))
                if result.returncode != 0:
                    named = names_key(result.stderr, site.path) or (site.what == "name" and ADDED_KEY in result.stderr)
                    if named and "error converting YAML" not in result.stderr:
                        exercised.add(site.path)
                    elif render(merged(site_base, site.values(site.clean))).returncode == 0:
                        problems.append(f"{where}, {payload_name}: refused without naming the key: {result.stderr}")
                    continue
                clean = render(merged(site_base, site.values(site.clean)))
                if clean.returncode != 0:
                    problems.append(f"{where}, {payload_name}: renders, but its valid value does not: {clean.stderr}")
                    continue
                docs = [d for d in yaml.load_all(result.stdout, Loader=yaml.CSafeLoader) if d]
                clean_docs = [d for d in yaml.load_all(clean.stdout, Loader=yaml.CSafeLoader) if d]
                if objects(docs) != objects(clean_docs):
                    problems.append(
                        f"{where}, {payload_name}: objects {objects(docs)} instead of {objects(clean_docs)}"
                    )
                elif any(text in s for doc in docs for s in strings(doc)):
                    exercised.add(site.path)
                elif docs != clean_docs:
                    problems.append(f"{where}, {payload_name}: the value changed the objects but is nowhere intact")
    return problems, exercised


def test_no_workload_value_injects_yaml(helm, tmp_path):
    chart = ChartValues(WORKLOAD_CHART)
    problems, exercised = injection_problems(helm, WORKLOAD_CHART, tmp_path, [{"jobKind": k.name} for k in KINDS])
    assert not problems, "\n".join(problems)
    unread = sorted(".".join(map(str, s.path)) for s in sites(chart) if s.path not in exercised)
    assert not unread, f"values no kind reads with the test's bases (extend chart_values.BASES or READ_WITH): {unread}"


def test_no_operator_value_injects_yaml(helm, tmp_path):
    chart = ChartValues(OPERATOR_CHART)
    problems, exercised = injection_problems(helm, OPERATOR_CHART, tmp_path, [None])
    assert not problems, "\n".join(problems)
    unread = sorted(".".join(map(str, s.path)) for s in sites(chart) if s.path not in exercised)
    assert not unread, f"values the test's base does not read (extend chart_values.BASES): {unread}"


CLUSTER_ADMIN_BINDING = """
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: injected
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{kind: ServiceAccount, name: default, namespace: default}]
"""


@pytest.mark.both_helm_majors
@pytest.mark.parametrize(
    ("chart_dir", "path", "value"),
    [
        pytest.param(
            WORKLOAD_CHART, ("persistence", "hostPath", "path"), "/srv" + CLUSTER_ADMIN_BINDING, id="hostPath"
        ),
        pytest.param(WORKLOAD_CHART, ("image", "pullSecrets", 0), "regcred\nhostNetwork: true", id="pullSecrets"),
        pytest.param(WORKLOAD_CHART, ("persistence", "mountPath"), "/mnt" + CLUSTER_ADMIN_BINDING, id="mountPath"),
        pytest.param(WORKLOAD_CHART, ("schedulerName",), "volcano\nhostNetwork: true", id="schedulerName"),
        pytest.param(OPERATOR_CHART, ("gangSchedulerName",), "volcano" + CLUSTER_ADMIN_BINDING, id="gangSchedulerName"),
        pytest.param(OPERATOR_CHART, ("image", "registry"), "ghcr.io" + CLUSTER_ADMIN_BINDING, id="registry"),
    ],
)
def test_the_audits_injections_are_refused_by_name(helm, tmp_path, chart_dir, path, value):
    """What the audit rendered on main before the fix (a ClusterRoleBinding to cluster-admin from a
    hostPath, pod fields from a pull secret), and their kin, under both Helm majors."""
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump(nested(path, value)))
    result = helm.template(chart_dir, values_files=(values_file,))
    assert result.returncode != 0, f"rendered:\n{result.stdout}"
    assert names_key(result.stderr, path), result.stderr
