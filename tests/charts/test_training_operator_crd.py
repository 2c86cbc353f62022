"""The generated PyTorchJob CRD: reproducible, structural, small enough for client-side apply,
and strict enough that real PyTorchJobs validate while broken ones are refused."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from tests.support.crd import (
    CustomObjectInvalid,
    load_gen_crd,
    load_pytorchjob_crd,
    served_schema,
    structural_schema_problems,
    validate_custom_object,
)
from tests.support.paths import REPO

# kubectl's client-side apply stores the whole object in one annotation, capped at 256 KiB.
LAST_APPLIED_ANNOTATION_LIMIT = 262_144


gen_crd = load_gen_crd()


@pytest.fixture(scope="module")
def crd(helm) -> dict:
    return load_pytorchjob_crd(helm)


@pytest.fixture(scope="module")
def schema(crd) -> dict:
    return served_schema(crd, "v1")


def test_committed_crd_is_what_the_generator_writes():
    assert gen_crd.OUTPUT.read_text() == gen_crd.render(), "stale CRD template: run `python ci/gen_crd.py`"


def test_generator_reads_a_pinned_kubernetes_version():
    assert gen_crd.DEFINITIONS.is_file(), f"kubernetes-validate no longer ships {gen_crd.DEFINITIONS}"
    assert f"Kubernetes {gen_crd.KUBERNETES_SCHEMA_VERSION} OpenAPI" in gen_crd.OUTPUT.read_text()


def test_generated_template_is_gated_by_crds_enabled():
    text = gen_crd.OUTPUT.read_text()
    assert text.startswith("{{- if .Values.crds.enabled }}\n") and text.endswith("{{- end }}\n")


@pytest.mark.parametrize("chart", ["pytorchjob-mnist", "training-operator"])
def test_charts_check_quantities_as_the_crd_does_less_negative_ones(chart):
    """Both charts' schemas refuse the quantities the API server would (`512K`), and negative ones,
    which the CRD admits but no pod's size or count may be."""
    quantity = json.loads((REPO / "charts" / chart / "values.schema.json").read_text())["definitions"]["quantity"]
    sign = "^(\\+|-)?"
    assert gen_crd.QUANTITY_PATTERN.startswith(sign)
    assert quantity["pattern"] == "^\\+?" + gen_crd.QUANTITY_PATTERN.removeprefix(sign)
    assert quantity["minimum"] == 0, "a pattern does not apply to numbers"


def test_crd_identity(crd):
    spec = crd["spec"]
    assert crd["metadata"]["name"] == "pytorchjobs.kubeflow.org"
    assert (spec["group"], spec["scope"]) == ("kubeflow.org", "Namespaced")
    assert spec["names"] == {
        "kind": "PyTorchJob",
        "listKind": "PyTorchJobList",
        "plural": "pytorchjobs",
        "singular": "pytorchjob",
    }
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1", True, True)
    columns = {c["name"]: c for c in version["additionalPrinterColumns"]}
    assert columns["State"]["jsonPath"] == ".status.conditions[-1:].type"
    assert columns["Age"] == {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
    assert version["subresources"]["status"] == {}
    assert version["subresources"]["scale"] == {
        "specReplicasPath": ".spec.pytorchReplicaSpecs.Worker.replicas",
        "statusReplicasPath": ".status.replicaStatuses.Worker.active",
        "labelSelectorPath": ".status.replicaStatuses.Worker.selector",
    }


def test_crd_covers_the_v1_api(schema):
    spec = schema["properties"]["spec"]
    assert spec["required"] == ["pytorchReplicaSpecs"]
    assert set(spec["properties"]) == {"elasticPolicy", "nprocPerNode", "pytorchReplicaSpecs", "runPolicy"}
    assert spec["properties"]["nprocPerNode"]["type"] == "string"
    assert set(spec["properties"]["runPolicy"]["properties"]) == {
        "activeDeadlineSeconds",
        "backoffLimit",
        "cleanPodPolicy",
        "managedBy",
        "schedulingPolicy",
        "suspend",
        "ttlSecondsAfterFinished",
    }
    assert set(spec["properties"]["elasticPolicy"]["properties"]) == {
        "maxReplicas",
        "maxRestarts",
        "metrics",
        "minReplicas",
        "nProcPerNode",
        "rdzvBackend",
        "rdzvConf",
        "rdzvHost",
        "rdzvId",
        "rdzvPort",
        "standalone",
    }
    replica = spec["properties"]["pytorchReplicaSpecs"]["additionalProperties"]
    assert set(replica["properties"]) == {"replicas", "restartPolicy", "template"}
    assert set(schema["properties"]["status"]["properties"]) == {
        "completionTime",
        "conditions",
        "lastReconcileTime",
        "replicaStatuses",
        "startTime",
    }


def test_pod_template_is_validated_not_preserved(schema):
    template = schema["properties"]["spec"]["properties"]["pytorchReplicaSpecs"]["additionalProperties"]["properties"][
        "template"
    ]
    pod_spec = template["properties"]["spec"]
    assert pod_spec["required"] == ["containers"]
    container = pod_spec["properties"]["containers"]["items"]
    assert {"image", "resources", "securityContext", "env", "volumeMounts"} <= set(container["properties"])
    assert set(template["properties"]["metadata"]["properties"]) >= {"labels", "annotations"}
    assert "x-kubernetes-preserve-unknown-fields" not in json.dumps(schema)


def test_crd_is_a_structural_schema(schema):
    assert structural_schema_problems(schema) == []


def test_structural_check_catches_violations():
    """The checker itself must fail on the mistakes it is there to catch."""
    broken = {
        "type": "object",
        "properties": {
            "untyped": {"description": "no type"},
            "ref": {"$ref": "#/definitions/x", "type": "object"},
            "ports": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["protocol"],
                "items": {"type": "object", "properties": {"protocol": {"type": "string"}}},
            },
        },
    }
    problems = "\n".join(structural_schema_problems(broken))
    assert "untyped: no type" in problems
    assert "$ref" in problems
    assert "'protocol' must be required or have a default" in problems


def test_crd_serialized_size_fits_client_side_apply(crd):
    compact = json.dumps(crd, separators=(",", ":"))
    assert len(compact.encode()) < LAST_APPLIED_ANNOTATION_LIMIT, f"{len(compact):,} bytes"


def test_descriptions_are_trimmed(schema):
    descriptions = []

    def collect(node):
        if isinstance(node, dict):
            if isinstance(node.get("description"), str):
                descriptions.append(node["description"])
            for key, value in node.items():
                if key != "description":
                    collect(value)
        elif isinstance(node, list):
            for value in node:
                collect(value)

    collect(schema)
    assert descriptions
    assert not [d for d in descriptions if "\n" in d or "More info:" in d]


# --- PyTorchJobs that must validate ------------------------------------------------------------

SIMPLE = """
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: mnist-simple, namespace: kubeflow}
spec:
  pytorchReplicaSpecs:
    Master: &replica
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - name: pytorch
              image: registry.example.com/mnist:1.0
              imagePullPolicy: Always
              command: [python3, -m, trainer, --epochs=1]
    Worker: *replica
"""

# A shared claim mounted on both replicas, plus the status the operator writes when it is done.
WITH_VOLUME_AND_STATUS = """
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: mnist-pvc}
spec:
  pytorchReplicaSpecs:
    Master: &replica
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          volumes:
            - name: models
              persistentVolumeClaim: {claimName: mnist-models}
          containers:
            - name: pytorch
              image: registry.example.com/mnist:1.0
              volumeMounts: [{mountPath: /opt/mnist/models, name: models}]
    Worker: *replica
status:
  startTime: "2026-01-01T10:00:00Z"
  completionTime: "2026-01-01T10:20:00Z"
  conditions:
    - {type: Created, status: "True", reason: PyTorchJobCreated, message: created,
       lastTransitionTime: "2026-01-01T10:00:00Z", lastUpdateTime: "2026-01-01T10:00:00Z"}
    - {type: Succeeded, status: "True", reason: PyTorchJobSucceeded, message: done,
       lastTransitionTime: "2026-01-01T10:20:00Z", lastUpdateTime: "2026-01-01T10:20:00Z"}
  replicaStatuses:
    Master: {succeeded: 1, selector: "training.kubeflow.org/job-name=mnist-pvc,training.kubeflow.org/replica-type=master"}
    Worker: {succeeded: 1, labelSelector: {matchLabels: {training.kubeflow.org/replica-type: worker}}}
"""

GPU = """
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: mnist-gpu}
spec:
  nprocPerNode: "1"
  runPolicy:
    cleanPodPolicy: Running
    backoffLimit: 3
    activeDeadlineSeconds: 3600
    ttlSecondsAfterFinished: 600
    suspend: false
    managedBy: kubeflow.org/training-operator
    schedulingPolicy: {minAvailable: 3, queue: gpu, minResources: {nvidia.com/gpu: 3, cpu: "1500m"}}
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: ExitCode
      template:
        metadata:
          labels: {app: mnist}
          annotations: {sidecar.istio.io/inject: "false"}
        spec:
          nodeSelector: {nvidia.com/gpu.present: "true"}
          tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
          securityContext:
            runAsNonRoot: true
            runAsUser: 1000
            fsGroup: 1000
            seccompProfile: {type: RuntimeDefault}
          volumes:
            - name: dshm
              emptyDir: {medium: Memory, sizeLimit: 2Gi}
          containers:
            - name: pytorch
              image: registry.example.com/mnist:1.0-cuda
              args: [--backend, nccl]
              ports: [{name: pytorchjob-port, containerPort: 23456}]
              env: [{name: NCCL_DEBUG, value: INFO}]
              resources:
                limits: {nvidia.com/gpu: 1, memory: 8Gi}
                requests: {cpu: 2, memory: 4Gi}
              securityContext:
                allowPrivilegeEscalation: false
                capabilities: {drop: [ALL]}
              volumeMounts: [{name: dshm, mountPath: /dev/shm}]
    Worker:
      replicas: 2
      restartPolicy: ExitCode
      template:
        spec:
          containers:
            - name: pytorch
              image: registry.example.com/mnist:1.0-cuda
              args: [--backend, nccl]
              resources:
                limits: {nvidia.com/gpu: 1}
"""

ELASTIC = """
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: mnist-elastic}
spec:
  nprocPerNode: auto
  elasticPolicy:
    rdzvBackend: c10d
    rdzvId: mnist
    rdzvPort: 29400
    rdzvConf: [{key: join_timeout, value: "300"}]
    minReplicas: 1
    maxReplicas: 4
    maxRestarts: 10
    standalone: false
    metrics:
      - type: Resource
        resource:
          name: cpu
          target: {type: Utilization, averageUtilization: 80}
  pytorchReplicaSpecs:
    Worker:
      replicas: 2
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - name: pytorch
              image: registry.example.com/mnist:1.0
              command: [torchrun, -m, trainer]
"""

VALID_JOBS = {"simple": SIMPLE, "volume-and-status": WITH_VOLUME_AND_STATUS, "gpu": GPU, "elastic": ELASTIC}


@pytest.mark.parametrize("manifest", VALID_JOBS.values(), ids=VALID_JOBS.keys())
def test_valid_pytorchjobs_validate(crd, manifest):
    validate_custom_object(crd, yaml.safe_load(manifest))


# --- PyTorchJobs that must be refused, each with the field the error must name ------------------


def _broken(mutate):
    # A JSON round trip unshares the YAML alias, so breaking the Worker leaves the Master intact.
    job = json.loads(json.dumps(yaml.safe_load(SIMPLE)))
    mutate(job)
    return job


def _worker(job):
    return job["spec"]["pytorchReplicaSpecs"]["Worker"]


def _container(job):
    return _worker(job)["template"]["spec"]["containers"][0]


BROKEN_JOBS = {
    "missing containers": (
        lambda j: _worker(j)["template"]["spec"].pop("containers"),
        "pytorchReplicaSpecs.Worker.template.spec: 'containers' is a required property",
    ),
    "replicas not an integer": (
        lambda j: _worker(j).update(replicas="two"),
        "pytorchReplicaSpecs.Worker.replicas: 'two' is not of type 'integer'",
    ),
    "unknown replica field": (lambda j: _worker(j).update(replica=1), "'replica' was unexpected"),
    "unknown container field": (
        lambda j: _container(j).update(imagePullPolcy="Always"),
        "'imagePullPolcy' was unexpected",
    ),
    "unknown restartPolicy": (
        lambda j: _worker(j).update(restartPolicy="Sometimes"),
        "pytorchReplicaSpecs.Worker.restartPolicy",
    ),
    "container without name": (lambda j: _container(j).pop("name"), "'name' is a required property"),
    "duplicate container names": (
        lambda j: _worker(j)["template"]["spec"]["containers"].append(copy.deepcopy(_container(j))),
        "containers: duplicate entry",
    ),
    "bad quantity": (lambda j: _container(j).update(resources={"limits": {"cpu": "lots"}}), "resources.limits.cpu"),
    "command not a list": (lambda j: _container(j).update(command="python3 -m trainer"), "command"),
    "no replica specs": (
        lambda j: j["spec"].pop("pytorchReplicaSpecs"),
        "'pytorchReplicaSpecs' is a required property",
    ),
    "unknown cleanPodPolicy": (
        lambda j: j["spec"].update(runPolicy={"cleanPodPolicy": "Everything"}),
        "runPolicy.cleanPodPolicy",
    ),
    "nprocPerNode as a number": (lambda j: j["spec"].update(nprocPerNode=4), "nprocPerNode: 4 is not of type 'string'"),
    "negative backoffLimit": (lambda j: j["spec"].update(runPolicy={"backoffLimit": -1}), "runPolicy.backoffLimit"),
    "wrong kind": (lambda j: j.update(kind="TFJob"), "does not belong to CRD"),
}


@pytest.mark.parametrize(("mutate", "expected"), BROKEN_JOBS.values(), ids=BROKEN_JOBS.keys())
def test_broken_pytorchjobs_are_refused(crd, mutate, expected):
    with pytest.raises(CustomObjectInvalid) as refused:
        validate_custom_object(crd, _broken(mutate))
    assert expected in str(refused.value)
