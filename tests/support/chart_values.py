"""A chart's values.yaml walked key by key beside its values.schema.json, for the tests that set one
value at a time (tests/charts/test_injection.py, test_fuzz_values.py), and how Helm's refusals name a key."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import yaml

from tests.support.paths import OPERATOR_CHART, WORKLOAD_CHART

# A key path into the values: map keys, and list indices as ints.
Path_ = tuple[str | int, ...]


@dataclass(frozen=True)
class Key:
    """One key of values.yaml: its path, its default and the schema that checks it."""

    path: Path_
    default: object
    schema: dict

    @property
    def name(self) -> str:
        return ".".join(str(part) for part in self.path)

    def types(self) -> set[str]:
        """The JSON types the schema allows here (every type where it names none)."""
        declared = self.schema.get("type")
        if declared is None:
            return {"string", "number", "integer", "boolean", "object", "array", "null"}
        return set(declared) if isinstance(declared, list) else {declared}


class ChartValues:
    def __init__(self, chart: Path):
        self.chart = chart
        self.defaults = yaml.safe_load((chart / "values.yaml").read_text())
        self.schema = json.loads((chart / "values.schema.json").read_text())
        self._validator = jsonschema.Draft7Validator(self.schema)

    def resolve(self, node: dict) -> dict:
        """`node` with its $ref followed."""
        while "$ref" in node:
            target = self.schema
            for part in node["$ref"].removeprefix("#/").split("/"):
                target = target[part]
            node = target
        return node

    def child(self, node: dict, part: str | int) -> dict:
        """The schema of `part` below `node` ({} where the schema says nothing of it)."""
        node = self.resolve(node)
        if isinstance(part, int):
            return self.resolve(node.get("items", {}))
        if part in node.get("properties", {}):
            return self.resolve(node["properties"][part])
        extra = node.get("additionalProperties", {})
        return self.resolve(extra) if isinstance(extra, dict) else {}

    def schema_at(self, path: Path_) -> dict:
        node = self.schema
        for part in path:
            node = self.child(node, part)
        return node

    def keys(self) -> Iterator[Key]:
        """Every key of values.yaml, at every depth, down into the chart's own maps and into the maps and
        lists users fill (labels, env, resources, …), but not below a Kubernetes object the schema
        passes through unchecked."""

        def walk(node: object, path: Path_) -> Iterator[Key]:
            schema = self.schema_at(path)
            if path:
                yield Key(path, node, schema)
            if isinstance(node, dict) and ("properties" in schema or "additionalProperties" in schema or not path):
                for key, value in node.items():
                    yield from walk(value, (*path, key))
            elif isinstance(node, list) and "items" in schema:
                for index, value in enumerate(node):
                    yield from walk(value, (*path, index))

        yield from walk(self.defaults, ())

    def is_valid(self, values: dict) -> bool:
        """Whether the schema (as Python's jsonschema reads it) accepts the defaults with `values` over them."""
        return self._validator.is_valid(merged(self.defaults, values))


def nested(path: Path_, value: object) -> dict:
    """The values that set the key at `path` (whose list indices are 0: the first entry) to `value`."""
    for part in reversed(path):
        value = [value] if isinstance(part, int) else {part: value}
    return value


def merged(base: dict, override: dict) -> dict:
    """`override` over `base` as Helm coalesces values files: maps merge, anything else replaces."""
    result = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merged(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def names_key(stderr: str, path: Path_) -> bool:
    """Whether Helm's refusal names the key at `path`: Helm 3's schema errors and the charts' `fail`
    messages write it dotted (persistence.mountPath, env.0.name), Helm 4's as a JSON pointer; a required
    key left out (a null drops it) is named beside its parent."""
    if _dotted(path) in stderr or f"'{_pointer(path)}'" in stderr:
        return True
    parent, last = path[:-1], path[-1]
    helm3 = f"- {_dotted(parent) or '(root)'}: {last} is required"
    helm4 = f"at '{_pointer(parent) if parent else ''}': missing property '{last}'"
    return helm3 in stderr or helm4 in stderr


def _dotted(path: Path_) -> str:
    return ".".join(str(part) for part in path)


def _pointer(path: Path_) -> str:
    return "/" + "/".join(str(part).replace("~", "~0").replace("/", "~1") for part in path)


# Each chart with its optional templates switched on, so that most values are read; the operator's CRD,
# large and slow to parse, only for the keys that reach it. A key under a path of READ_WITH is read
# only with those values too (a job kind that refuses them has no use for the key).
BASES = {
    WORKLOAD_CHART: {"tensorboard": {"enabled": True}, "persistence": {"create": {"accessModes": ["ReadWriteMany"]}}},
    OPERATOR_CHART: {
        "crds": {"enabled": False},
        "replicaCount": 2,
        "leaderElection": {"enabled": True},
        "watchNamespace": "ml",
        "podDisruptionBudget": {"enabled": True},
        "metrics": {"serviceMonitor": {"enabled": True}},
    },
}
READ_WITH = {
    WORKLOAD_CHART: {
        ("persistence", "hostPath"): {"persistence": {"hostPath": {"path": "/data/mnist"}}},
        ("elasticPolicy",): {"torchrun": {"enabled": True}, "elasticPolicy": {"enabled": True}},
    },
    OPERATOR_CHART: {("crds",): {"crds": {"enabled": True}}},
}


def reading_base(chart: Path, path: Path_, base: dict) -> dict:
    """`base` plus what the key at `path` needs to be read (READ_WITH); a case's own values go over it."""
    for prefix, needed in READ_WITH[chart].items():
        if path[: len(prefix)] == prefix:
            base = merged(base, needed)
    return base


def strings(node: object) -> list[str]:
    """Every string in a parsed document, map keys included."""
    if isinstance(node, dict):
        return [s for key, value in node.items() for s in [str(key), *strings(value)]]
    if isinstance(node, list):
        return [s for value in node for s in strings(value)]
    return [node] if isinstance(node, str) else []
