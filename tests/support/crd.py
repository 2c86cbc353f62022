"""Validate custom objects (e.g. a rendered PyTorchJob) against a CRD's openAPIV3Schema, offline.

The API server validates a custom resource against the CRD's structural schema and, with
kubectl's default `--validate=strict`, rejects unknown fields. `validate_custom_object` mirrors
that: types, required fields, enums, int-or-string, nullable, unknown fields (except under
`x-kubernetes-preserve-unknown-fields`) and duplicate keys in `x-kubernetes-list-type: map|set`
lists. CEL rules (`x-kubernetes-validations`) are not evaluated here; they need a real API
server (the kind e2e).
"""

from __future__ import annotations

import copy
import functools
import importlib.util
from pathlib import Path

import jsonschema

from tests.support.helm import Helm
from tests.support.paths import OPERATOR_CHART, REPO

PYTORCHJOB_CRD_NAME = "pytorchjobs.kubeflow.org"


def load_gen_crd():
    """ci/gen_crd.py (not a package) as a module, for the tests of the CRD it generates."""
    spec = importlib.util.spec_from_file_location("gen_crd", REPO / "ci" / "gen_crd.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class CustomObjectInvalid(AssertionError):
    """A custom object does not match its CRD; the message lists every offending field path."""


@functools.cache
def _render_pytorchjob_crd(helm: Helm, chart: str) -> dict:
    docs = helm.render(chart, release="training-operator", namespace="kubeflow")
    crds = [
        d for d in docs if d.get("kind") == "CustomResourceDefinition" and d["metadata"]["name"] == PYTORCHJOB_CRD_NAME
    ]
    assert len(crds) == 1, f"{chart} must render exactly one {PYTORCHJOB_CRD_NAME} CRD with default values"
    return crds[0]


def load_pytorchjob_crd(helm: Helm, chart: str | Path = OPERATOR_CHART) -> dict:
    """The PyTorchJob CRD as the operator chart renders it with default values (cached per Helm)."""
    return copy.deepcopy(_render_pytorchjob_crd(helm, str(chart)))


def served_schema(crd: dict, version: str) -> dict:
    """The openAPIV3Schema of `version` in `crd`; fails if that version is not served."""
    for entry in crd["spec"]["versions"]:
        if entry["name"] == version:
            assert entry.get("served"), f"{crd['metadata']['name']}: version {version} is not served"
            return entry["schema"]["openAPIV3Schema"]
    names = [v["name"] for v in crd["spec"]["versions"]]
    raise CustomObjectInvalid(f"{crd['metadata']['name']} has no version {version!r} (has {names})")


def validate_custom_object(crd: dict, obj: dict) -> None:
    """Raise CustomObjectInvalid naming every bad field if `obj` would be refused by `crd`.

    Checks apiVersion/kind against the CRD, then the object against the served version's schema
    with strict unknown-field handling (what `kubectl apply` does by default).
    """
    spec = crd["spec"]
    label = f"{obj.get('kind')}/{(obj.get('metadata') or {}).get('name', '<no name>')}"
    group, _, version = str(obj.get("apiVersion", "")).rpartition("/")
    if group != spec["group"] or obj.get("kind") != spec["names"]["kind"]:
        raise CustomObjectInvalid(
            f"{label}: apiVersion/kind {obj.get('apiVersion')}/{obj.get('kind')} does not belong to "
            f"CRD {crd['metadata']['name']} ({spec['group']}, kind {spec['names']['kind']})"
        )
    validator = _strict_validator(served_schema(crd, version))
    problems = sorted(f"{_field_path(error.absolute_path)}: {error.message}" for error in validator.iter_errors(obj))
    if problems:
        raise CustomObjectInvalid(f"{label} does not match CRD {crd['metadata']['name']}:\n  " + "\n  ".join(problems))


def _field_path(path) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "<root>"


def to_strict_json_schema(node: dict) -> dict:
    """Translate an OpenAPI v3 structural schema into JSON Schema that rejects unknown fields."""
    out = {key: value for key, value in node.items() if not key.startswith("x-kubernetes-") and key != "nullable"}
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    if node.get("x-kubernetes-int-or-string") and "anyOf" not in out:
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if "properties" in node:
        out["properties"] = {name: to_strict_json_schema(child) for name, child in node["properties"].items()}
        if "additionalProperties" not in node and not node.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
    if isinstance(node.get("additionalProperties"), dict):
        out["additionalProperties"] = to_strict_json_schema(node["additionalProperties"])
    if "items" in node:
        out["items"] = to_strict_json_schema(node["items"])
    for combinator in ("anyOf", "allOf", "oneOf"):
        if combinator in node:
            out[combinator] = [to_strict_json_schema(child) for child in node[combinator]]
    if node.get("x-kubernetes-list-type") in ("map", "set"):
        out["kubernetesListType"] = {
            "type": node["x-kubernetes-list-type"],
            "keys": node.get("x-kubernetes-list-map-keys", []),
        }
    return out


def _unique_list_entries(validator, rule, instance, schema):
    """The API server refuses duplicate keys in map lists and duplicate items in set lists."""
    if not validator.is_type(instance, "array"):
        return
    seen = set()
    for index, item in enumerate(instance):
        if rule["type"] == "map":
            if not isinstance(item, dict):
                continue
            key = tuple((k, repr(item.get(k))) for k in rule["keys"])
        else:
            key = repr(item)
        if key in seen:
            described = {k: item.get(k) for k in rule["keys"]} if rule["type"] == "map" else item
            yield jsonschema.ValidationError(f"duplicate entry at index {index}: {described}")
        seen.add(key)


_StrictValidator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator, {"kubernetesListType": _unique_list_entries}
)


# The API server accepts these at the root of every object, declared in the schema or not.
_ROOT_FIELDS = {"apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"}}


def _strict_validator(schema: dict):
    root = to_strict_json_schema(schema)
    root["properties"] = {**_ROOT_FIELDS, **root.get("properties", {})}
    return _StrictValidator(root)


def structural_schema_problems(node: dict, path: str = "openAPIV3Schema") -> list[str]:
    """Rules the API server enforces for a structural schema (apiextensions.k8s.io/v1).

    Every node is typed (or int-or-string / preserve-unknown-fields); no $ref; properties and
    additionalProperties never together; list-type markers consistent; map keys are scalar
    properties that are required or defaulted; anyOf/allOf/oneOf carry no types of their own
    except the int-or-string pattern.
    """
    problems: list[str] = []
    if "$ref" in node:
        problems.append(f"{path}: $ref is not allowed in a CRD schema")
    int_or_string = node.get("x-kubernetes-int-or-string") is True
    preserve = node.get("x-kubernetes-preserve-unknown-fields") is True
    if "type" not in node and not int_or_string and not preserve:
        problems.append(f"{path}: no type (and neither x-kubernetes-int-or-string nor preserve-unknown-fields)")
    if int_or_string and "type" in node:
        problems.append(f"{path}: x-kubernetes-int-or-string must not also set type")
    if "properties" in node and "additionalProperties" in node:
        problems.append(f"{path}: properties and additionalProperties are mutually exclusive")
    if node.get("additionalProperties") is False:
        problems.append(f"{path}: additionalProperties: false is not allowed (unknown fields are pruned)")
    for key in ("properties", "additionalProperties", "items"):
        expected_type = "array" if key == "items" else "object"
        if key in node and node.get("type") != expected_type:
            problems.append(f"{path}: {key} requires type {expected_type}")
    if node.get("type") == "array" and "items" not in node:
        problems.append(f"{path}: arrays must declare items")
    list_type = node.get("x-kubernetes-list-type")
    map_keys = node.get("x-kubernetes-list-map-keys")
    if list_type not in (None, "atomic", "set", "map"):
        problems.append(f"{path}: unknown x-kubernetes-list-type {list_type!r}")
    if (list_type == "map") != bool(map_keys):
        problems.append(f"{path}: x-kubernetes-list-map-keys must be set exactly when list-type is map")
    if list_type == "map" and map_keys:
        item = node.get("items", {})
        for key in map_keys:
            prop = item.get("properties", {}).get(key)
            if prop is None:
                problems.append(f"{path}: map key {key!r} is not a property of the items")
            elif prop.get("type") in ("object", "array"):
                problems.append(f"{path}: map key {key!r} must be a scalar")
            elif key not in item.get("required", []) and "default" not in prop:
                problems.append(f"{path}: map key {key!r} must be required or have a default")
    if list_type == "set" and node.get("items", {}).get("type") in ("object", "array"):
        problems.append(f"{path}: list-type set needs scalar items")
    for combinator in ("anyOf", "allOf", "oneOf"):
        for index, child in enumerate(node.get(combinator, [])):
            allowed_type = int_or_string and combinator == "anyOf"
            if "type" in child and not allowed_type:
                problems.append(f"{path}.{combinator}[{index}]: types belong on the parent node")
    for name, child in node.get("properties", {}).items():
        problems += structural_schema_problems(child, f"{path}.{name}")
    if isinstance(node.get("additionalProperties"), dict):
        problems += structural_schema_problems(node["additionalProperties"], f"{path}.<key>")
    if "items" in node:
        problems += structural_schema_problems(node["items"], f"{path}[]")
    return problems
