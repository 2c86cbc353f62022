"""charts/pytorchjob-mnist rendered by real Helm 3 and Helm 4: lint, and every combination of the matrix
checked against Kubernetes schemas, the PyTorchJob CRD, the operator webhook's rules and the restricted
Pod Security Standard."""

from __future__ import annotations

import re

import pytest

from tests.support.crd import load_pytorchjob_crd, validate_custom_object
from tests.support.helm import one
from tests.support.k8s import assert_valid_in_every_version
from tests.support.paths import WORKLOAD_CHART
from tests.support.pss import restricted_violations
from tests.support.pytorchjob_mnist import all_pod_specs

DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def test_matrix_has_at_least_ten_combinations(case_files):
    assert len(case_files) >= 10, sorted(case_files)


def test_lint_strict_for_defaults_and_every_values_file(helm, case_files):
    for name, files in case_files.items():
        args = ["lint", "--strict", str(WORKLOAD_CHART)]
        for f in files:
            args += ["-f", str(f)]
        result = helm.run(*args, check=False)
        assert result.returncode == 0, f"{name}: {result.stdout}{result.stderr}"
        # Lint logs a tripped `fail` guard on stderr as a mere info line, and passes.
        assert "Fail:" not in result.stderr and "funcMap fail" not in result.stderr, f"{name}: {result.stderr}"


def test_every_builtin_manifest_validates_against_kubernetes_schemas(rendered):
    for name, docs in rendered.items():
        for doc in docs:
            if doc["apiVersion"].startswith("kubeflow.org/"):
                continue
            assert_valid_in_every_version(doc, f"{name}: {doc['kind']}/{doc['metadata']['name']}")


def test_every_pytorchjob_validates_against_the_operator_crd(helm, rendered):
    crd = load_pytorchjob_crd(helm)
    for name, docs in rendered.items():
        try:
            validate_custom_object(crd, one(docs, "PyTorchJob"))
        except AssertionError as error:
            pytest.fail(f"{name}: {error}")


def test_every_rendering_obeys_the_operator_webhook(rendered):
    """pkg/webhooks/pytorch: DNS-1035 name, Master.replicas == 1 explicitly, Worker ≥ 1, only
    Master/Worker, a `pytorch` container with an image in every replica, Worker when elastic."""
    for name, docs in rendered.items():
        job = one(docs, "PyTorchJob")
        job_name = job["metadata"]["name"]
        assert DNS_1035.match(job_name) and len(job_name) <= 63, name
        specs = job["spec"]["pytorchReplicaSpecs"]
        assert set(specs) <= {"Master", "Worker"}, name
        assert specs["Master"]["replicas"] == 1, name
        workers = specs.get("Worker", {}).get("replicas", 0)
        if "Worker" in specs:
            assert workers >= 1, name
        if "elasticPolicy" in job["spec"]:
            assert "Worker" in specs, name
        for replica, spec in specs.items():
            containers = spec["template"]["spec"]["containers"]
            assert any(c["name"] == "pytorch" for c in containers), f"{name}: {replica} has no pytorch container"
            assert all(c.get("image") for c in containers), f"{name}: {replica} container without image"
            pytorch = next(c for c in containers if c["name"] == "pytorch")
            assert {"name": "pytorchjob-port", "containerPort": 23456, "protocol": "TCP"} in pytorch["ports"]
        longest_pod = f"{job_name}-worker-{workers - 1}" if workers else f"{job_name}-master-0"
        assert len(longest_pod) <= 63, f"{name}: {longest_pod}"


def test_every_rendering_runs_restricted_and_read_only(rendered):
    for name, docs in rendered.items():
        for spec in all_pod_specs(docs):
            assert restricted_violations(spec, name) == []
            # No pod calls the Kubernetes API, so none carries a token (checkov CKV_K8S_38).
            assert spec["automountServiceAccountToken"] is False, name
            for container in spec["containers"]:
                assert container["securityContext"]["readOnlyRootFilesystem"] is True, name
                mounts = {m["mountPath"] for m in container["volumeMounts"]}
                assert "/tmp" in mounts, f"{name}: {container['name']} has no writable /tmp"
