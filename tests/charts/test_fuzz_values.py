"""A values fuzz of charts/pytorchjob-mnist under every job kind. Each key of values.yaml, at every depth,
is mutated in turn: a wrong type, -1, 1e20, empty, unicode, a 10,000-character string, null, and an
unknown key beside it. Every case ends one of two ways: refused with the key named (by the schema or a
`fail` guard), or rendered into objects that the Kubernetes schemas accept (kubernetes-validate for the
built-in kinds and the trainer's pods, the job kind's own check for its job), with the mutated value in
the output wherever the output changed.

Each key meets each mutation once, under one job kind in turn, so that every key meets every kind; a
mutation of a type the key's schema refuses is left out when an earlier one of that type was refused
already (for a string key, 1e20 after -1). The newest Helm major renders every case, both majors every
SUBSET-th."""

from __future__ import annotations

import collections
from dataclasses import dataclass

import pytest
import yaml

from tests.support.chart_values import BASES, ChartValues, Key, merged, names_key, nested, reading_base, strings
from tests.support.k8s import KUBERNETES_VERSIONS, validate_builtin
from tests.support.paths import OPERATOR_CHART, WORKLOAD_CHART
from tests.support.pytorchjob_mnist import KINDS, Kind, assert_valid_training_runtime

UNKNOWN_KEY = "unknownKey"
WRONG_TYPES = ({"unexpected": 1}, ["unexpected"], True, "unexpected", 7)
SUBSET = 10
# What a refusal that does not come from the schema or a guard looks like: output that is not YAML, a
# template that broke on a value (nil pointer, wrong type for a function), Helm's own parsing.
UNCLEAR = ("YAML parse error", "error converting YAML", "error calling", "runtime error", "wrong type for value")
# The custom kinds a job kind renders beside its job, and how to check each.
CUSTOM_KINDS = {"TrainingRuntime": assert_valid_training_runtime}


@dataclass(frozen=True)
class Case:
    path: tuple  # the key mutated, or for "unknown key" the map that gets one
    mutation: str
    value: object
    kind: Kind

    @property
    def key(self) -> tuple:
        """The key the refusal must name."""
        return (*self.path, UNKNOWN_KEY) if self.mutation == "unknown key" else self.path

    def values(self) -> dict:
        if self.mutation == "unknown key":
            return nested(self.path, {UNKNOWN_KEY: "x"}) if self.path else {UNKNOWN_KEY: "x"}
        return nested(self.path, self.value)

    def __str__(self) -> str:
        return f"{self.kind.name}: {'.'.join(map(str, self.key))} = {self.mutation}"


def json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "integer" if float(value).is_integer() else "number"
    return {str: "string", list: "array", dict: "object"}[type(value)]


def fits(value: object, key: Key) -> bool:
    kind = json_type(value)
    return kind in key.types() or (kind == "integer" and "number" in key.types())


def mutations(key: Key) -> dict[str, object]:
    wrong = next((value for value in WRONG_TYPES if not fits(value, key)), None)
    empty = {list: [], dict: {}}.get(type(key.default), "")
    found = {"negative": -1, "huge": 1e20, "empty": empty, "unicode": "ünïcødé-名前-🚀", "long": "a" * 10000}
    return ({"wrong type": wrong} if wrong is not None else {}) | found | {"null": None}


def cases(chart: ChartValues) -> list[Case]:
    found, parents = [], set()
    for index, key in enumerate(chart.keys()):
        refused_types = set()
        for offset, (mutation, value) in enumerate(mutations(key).items()):
            if value is not None and not fits(value, key):
                if json_type(value) in refused_types:
                    continue
                refused_types.add(json_type(value))
            found.append(Case(key.path, mutation, value, KINDS[(index + offset) % len(KINDS)]))
        if key.path[:-1] not in parents and not isinstance(key.path[-1], int):
            parents.add(key.path[:-1])
            found.append(Case(key.path[:-1], "unknown key", None, KINDS[index % len(KINDS)]))
    return found


def appears(case: Case, docs: list[dict]) -> bool:
    """Whether the mutated value is in the output (as a string, or a number written any way Helm writes it)."""
    texts = [text for doc in docs for text in strings(doc)]
    if case.mutation == "unknown key":
        return UNKNOWN_KEY in texts
    value = case.value
    if isinstance(value, str):
        return any(value in text for text in texts)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        written = {str(value), str(int(value)) if float(value).is_integer() else str(value), f"{value:g}"}
        return any(w in text for w in written for text in texts) or any(n == value for n in numbers(docs))
    return True  # booleans, null, empty containers: nothing to look for


def numbers(node: object) -> list:
    if isinstance(node, dict):
        return [n for value in node.values() for n in numbers(value)]
    if isinstance(node, list):
        return [n for value in node for n in numbers(value)]
    return [node] if isinstance(node, (int, float)) and not isinstance(node, bool) else []


def invalid(docs: list[dict], kind: Kind, helm) -> list[str]:
    """Why Kubernetes (or the job's API) would refuse these documents, if it would."""
    problems = []
    checks = [(f"{doc['kind']}/{doc['metadata']['name']}", doc) for doc in docs]
    job_name = next(doc["metadata"]["name"] for doc in docs if doc["kind"] == kind.name)
    for role, template in kind.trainer_pods(docs).items():
        metadata = {"name": f"{job_name[:40]}-{role.lower()}-0", **template["metadata"]}
        checks.append(
            (f"the {role} pod", {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]})
        )
    for what, doc in checks:
        try:
            if doc["kind"] == kind.name:
                kind.assert_valid(doc, helm)
            elif doc["kind"] in CUSTOM_KINDS:
                CUSTOM_KINDS[doc["kind"]](doc)
            else:
                for version in KUBERNETES_VERSIONS:
                    validate_builtin(doc, version)
        except Exception as error:  # kubernetes-validate, jsonschema and the models raise several types
            problems.append(f"{what}: {str(error).splitlines()[0][:300]}")
    return problems


class Fuzz:
    """Renders cases with one Helm binary, each kind's bases once."""

    def __init__(self, helm, tmp_path):
        self.helm, self.tmp_path, self.chart = helm, tmp_path, ChartValues(WORKLOAD_CHART)

    def template(self, values: dict):
        path = self.tmp_path / "values.yaml"
        path.write_text(yaml.safe_dump(values, allow_unicode=True))
        return self.helm.template(WORKLOAD_CHART, values_files=(path,))

    def base(self, case: Case) -> dict:
        """The values the case mutates: BASES under its kind, with what its key needs to be read,
        unless the kind refuses that (a TrainJob has no elasticPolicy)."""
        plain = case.kind.values(BASES[WORKLOAD_CHART])
        reading = reading_base(WORKLOAD_CHART, case.path, plain)
        return reading if self.template(reading).returncode == 0 else plain

    def judge(self, case: Case) -> tuple[str, str | None]:
        """The case's outcome, and what is wrong with it (None when nothing is)."""
        base = self.base(case)
        result = self.template(merged(base, case.values()))
        if result.returncode != 0:
            if any(sign in result.stderr for sign in UNCLEAR):
                return "refused unclearly", result.stderr.strip()
            named = names_key(result.stderr, case.key) or (
                case.mutation == "unknown key" and UNKNOWN_KEY in result.stderr
            )
            return ("refused", None) if named else ("refused without the key", result.stderr.strip())
        if any(line.startswith(("coalesce.go", "warning")) for line in result.stderr.splitlines()):
            return "rendered with a Helm warning", result.stderr.strip()
        docs = [doc for doc in yaml.load_all(result.stdout, Loader=yaml.CSafeLoader) if doc]
        problems = invalid(docs, case.kind, self.helm)
        if problems:
            return "rendered invalid", "; ".join(problems)
        base_docs = [doc for doc in yaml.load_all(self.template(base).stdout, Loader=yaml.CSafeLoader) if doc]
        if docs == base_docs:
            return "rendered as the base", None  # a value equal to the default, or one these values never read
        if not appears(case, docs):
            return "rendered without the value", "the output changed, but the value is nowhere in it"
        return "rendered valid", None

    def run(self, selected: list[Case]) -> tuple[collections.Counter, list[str]]:
        outcomes, problems = collections.Counter(), []
        for case in selected:
            outcome, problem = self.judge(case)
            outcomes[outcome] += 1
            if problem:
                problems.append(f"{case}: {outcome}: {problem}")
        return outcomes, problems


def test_every_mutation_of_every_key_is_refused_by_name_or_renders_valid(helm, tmp_path):
    fuzz = Fuzz(helm, tmp_path)
    all_cases = cases(fuzz.chart)
    assert {case.kind.name for case in all_cases} == {kind.name for kind in KINDS}
    outcomes, problems = fuzz.run(all_cases)
    assert not problems, f"{dict(outcomes)}\n" + "\n".join(problems)
    assert outcomes["refused"] and outcomes["rendered valid"], dict(outcomes)


@pytest.mark.both_helm_majors
def test_a_subset_of_the_mutations_under_both_helm_majors(helm, tmp_path):
    """Helm 3 and Helm 4 check the schema with different validators, which word their errors apart."""
    fuzz = Fuzz(helm, tmp_path)
    outcomes, problems = fuzz.run(cases(fuzz.chart)[::SUBSET])
    assert not problems, f"{dict(outcomes)}\n" + "\n".join(problems)


@pytest.mark.both_helm_majors
@pytest.mark.parametrize("number", [".nan", ".inf", "-.inf"])
def test_nan_and_infinity_never_reach_the_chart(helm, tmp_path, number):
    """Helm refuses a values file holding one before it reads the chart, naming the file (JSON, which
    values become, has no NaN or infinity); `--set` passes the same words as strings, which the schema
    refuses by name. So no template ever meets one."""
    values_file = tmp_path / "values.yaml"
    values_file.write_text(f"workers: {number}\n")
    from_file = helm.template(WORKLOAD_CHART, values_files=(values_file,))
    assert from_file.returncode != 0 and f"failed to parse {values_file}" in from_file.stderr, from_file.stderr
    from_flag = helm.template(WORKLOAD_CHART, extra=("--set", f"workers={number}"))
    assert from_flag.returncode != 0 and names_key(from_flag.stderr, ("workers",)), from_flag.stderr


def integers(node: object, path: str = "") -> list[tuple[str, dict]]:
    """Every schema node that admits an integer, by where it is."""
    found = []
    if isinstance(node, dict):
        types = node.get("type", [])
        if "integer" in (types if isinstance(types, list) else [types]):
            found.append((path, node))
        for key, value in node.items():
            found += integers(value, f"{path}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += integers(value, f"{path}/{index}")
    return found


@pytest.mark.parametrize("chart", [WORKLOAD_CHART, OPERATOR_CHART], ids=lambda chart: chart.name)
def test_every_integer_has_bounds_a_values_file_holds_exactly(chart):
    """A values file's numbers are floats, which Helm's int turns into int64: with a maximum below 2^53
    no value can wrap around (workers: 1e20 once rendered a Master-only job)."""
    found = integers(ChartValues(chart).schema)
    assert len(found) > 10
    for path, node in found:
        assert "minimum" in node and "maximum" in node, path
        assert -(2**53) <= node["minimum"] <= node["maximum"] <= 2**53, path
        assert node.get("description"), f"{path}: say why the bounds are what they are"


def test_the_pod_count_bounds_agree():
    """elasticPolicy's node counts and the gang's minimum count the Master and the workers."""
    schema = ChartValues(WORKLOAD_CHART).schema["properties"]
    pods = schema["workers"]["maximum"] + 1
    elastic = schema["elasticPolicy"]["properties"]
    gang = schema["runPolicy"]["properties"]["schedulingPolicy"]["properties"]
    assert elastic["minReplicas"]["maximum"] == elastic["maxReplicas"]["maximum"] == pods
    assert gang["minAvailable"]["maximum"] == pods
