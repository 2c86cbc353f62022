"""ci/gen_crd.py declares the kubeflow.org/v1 PyTorchJob's own fields by hand, and the chart tests validate
rendered jobs against that CRD: here they are held to upstream's generated models of training-operator 1.9.4
(PyPI's kubeflow-training), struct by struct: the same JSON field names, the same types, the same required
fields, and the Kubernetes types (pod template, label selector, HPA metric, quantity) in the same places."""

from __future__ import annotations

import re

import pytest

from tests.support.crd import load_gen_crd

models = pytest.importorskip(
    "kubeflow.training.models", reason="kubeflow-training 1.9.4 (the test extras) holds upstream's models"
)
gen_crd = load_gen_crd()
K8S = gen_crd.KubernetesSchemas(gen_crd.json.loads(gen_crd.DEFINITIONS.read_text())["$defs"])
# The models' names of Kubernetes types, and the node ci/gen_crd.py must put there.
KUBERNETES_TYPES = {
    "V1PodTemplateSpec": K8S.pod_template,
    "V1LabelSelector": lambda: K8S.named("io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector"),
    "K8sIoApiAutoscalingV2MetricSpec": lambda: K8S.named("io.k8s.api.autoscaling.v2.MetricSpec"),
    "Quantity": lambda: K8S.named("io.k8s.apimachinery.pkg.api.resource.Quantity"),
    "V1ObjectMeta": lambda: {"type": "object"},  # a CRD's metadata is the API server's, left untyped
}
SCALARS = {"int": {"type": "integer"}, "str": {"type": "string"}, "bool": {"type": "boolean"}}


def required_fields(model) -> set[str]:
    """The JSON names of the fields the model refuses to leave unset."""
    dummies = {attr: object() for attr in model.openapi_types}
    required = set()
    for attr in model.openapi_types:
        try:
            model(**{**dummies, attr: None})
        except ValueError:
            required.add(model.attribute_map[attr])
    return required


def compare(model_type: str, node: dict, path: str, problems: list[str]) -> None:
    """Every difference between the model type `model_type` and ci/gen_crd.py's schema `node`, into `problems`."""
    if match := re.fullmatch(r"list\[(.+)\]", model_type):
        if node.get("type") != "array":
            problems.append(f"{path}: the models have a list, gen_crd.py {node.get('type')}")
        else:
            compare(match[1], node["items"], f"{path}[]", problems)
    elif match := re.fullmatch(r"dict\(str, (.+)\)", model_type):
        if node.get("type") != "object" or "additionalProperties" not in node:
            problems.append(
                f"{path}: the models have a map, gen_crd.py {node.get('type')} without additionalProperties"
            )
        else:
            compare(match[1], node["additionalProperties"], f"{path}.*", problems)
    elif model_type == "datetime":
        if (node.get("type"), node.get("format")) != ("string", "date-time"):
            problems.append(f"{path}: the models have a time, gen_crd.py {node.get('type')} {node.get('format')}")
    elif model_type in SCALARS:
        if node.get("type") != SCALARS[model_type]["type"]:
            problems.append(f"{path}: the models have {model_type}, gen_crd.py {node.get('type')}")
    elif model_type in KUBERNETES_TYPES:
        if node != KUBERNETES_TYPES[model_type]():
            problems.append(f"{path}: not the Kubernetes type {model_type}")
    else:
        model = getattr(models, model_type)
        fields = {model.attribute_map[attr]: kind for attr, kind in model.openapi_types.items()}
        properties = node.get("properties", {})
        if set(fields) != set(properties):
            problems.append(
                f"{path} ({model_type}): only the models have {sorted(set(fields) - set(properties))}, "
                f"only gen_crd.py {sorted(set(properties) - set(fields))}"
            )
        if required_fields(model) != set(node.get("required", [])):
            problems.append(
                f"{path}: the models require {sorted(required_fields(model))}, gen_crd.py {node.get('required')}"
            )
        for name in set(fields) & set(properties):
            compare(fields[name], properties[name], f"{path}.{name}", problems)


# The differences there are, each for its reason; any other fails the test.
KNOWN_DIFFERENCES = {
    # openapi-gen, which generates the models, requires a field without `+optional`; upstream's CRD
    # (controller-gen, which reads `omitempty`) requires only pytorchReplicaSpecs, as gen_crd.py does.
    "PyTorchJob.spec: the models require ['pytorchReplicaSpecs', 'runPolicy'], gen_crd.py ['pytorchReplicaSpecs']",
    # gen_crd.py's own rule: a PyTorchJob without a spec has nothing to run (the models, like every
    # top-level Kubernetes model, leave spec optional).
    "PyTorchJob: the models require [], gen_crd.py ['spec']",
}


def test_the_pytorchjob_schema_is_upstreams_models_field_for_field():
    problems: list[str] = []
    compare("KubeflowOrgV1PyTorchJob", gen_crd.pytorchjob_schema(K8S), "PyTorchJob", problems)
    assert set(problems) == KNOWN_DIFFERENCES


def test_the_comparison_finds_a_field_type_and_requirement_that_differ():
    """What the comparison reports, on a schema with one of each difference."""
    schema = gen_crd.pytorchjob_schema(K8S)
    spec = schema["properties"]["spec"]
    spec["properties"]["extra"] = {"type": "string"}
    spec["properties"]["runPolicy"]["properties"]["backoffLimit"]["type"] = "string"
    spec["required"] = []
    del schema["properties"]["status"]["properties"]["conditions"]["items"]["properties"]["reason"]
    problems: list[str] = []
    compare("KubeflowOrgV1PyTorchJob", schema, "PyTorchJob", problems)
    assert set(problems) - KNOWN_DIFFERENCES == set(
        [
            "PyTorchJob.spec (KubeflowOrgV1PyTorchJobSpec): only the models have [], only gen_crd.py ['extra']",
            "PyTorchJob.spec: the models require ['pytorchReplicaSpecs', 'runPolicy'], gen_crd.py []",
            "PyTorchJob.spec.runPolicy.backoffLimit: the models have int, gen_crd.py string",
            "PyTorchJob.status.conditions[] (KubeflowOrgV1JobCondition): only the models have ['reason'], "
            "only gen_crd.py []",
        ]
    )
