"""charts/pytorchjob-mnist's job kinds and, for each, every combination of its matrix rendered by real
Helm 3 and Helm 4: lint, one job of the kind, valid for its API, every other manifest and the trainer's
pods valid for Kubernetes, and the restricted Pod Security Standard."""

from __future__ import annotations

import json

import pytest

from tests.support.helm import by_kind
from tests.support.k8s import assert_valid_in_every_version
from tests.support.paths import WORKLOAD_CHART
from tests.support.pss import restricted_violations
from tests.support.pytorchjob_mnist import (
    KINDS,
    SHARED_CASES,
    all_pod_specs,
    flag,
    job_of,
    template_error,
    trainer_container,
)


def test_the_kinds_are_the_schemas():
    """Every job kind the chart offers has its entry in KINDS, and so every shared check."""
    schema = json.loads((WORKLOAD_CHART / "values.schema.json").read_text())
    assert [kind.name for kind in KINDS] == schema["properties"]["jobKind"]["enum"]


def test_a_kind_refuses_the_shared_cases_it_leaves_out_by_the_values_it_refuses(helm, tmp_path, kind):
    for name, values in SHARED_CASES.items():
        if not kind.takes(values):
            error = template_error(helm, kind.values(values), tmp_path)
            assert any(path in error for path in kind.refused_in(values)), f"{name}: {error}"


@pytest.mark.both_helm_majors
def test_lint_strict_for_every_combination(helm, case_files, kind):
    for name, files in case_files[kind.name].items():
        args = ["lint", "--strict", str(WORKLOAD_CHART)]
        for f in files:
            args += ["-f", str(f)]
        result = helm.run(*args, check=False)
        assert result.returncode == 0, f"{name}: {result.stdout}{result.stderr}"
        # Lint logs a tripped `fail` guard on stderr as a mere info line, and passes.
        assert "Fail:" not in result.stderr and "funcMap fail" not in result.stderr, f"{name}: {result.stderr}"


def test_one_job_of_the_kind_and_no_other(rendered, kind):
    for name, docs in rendered.items():
        for other in KINDS:
            assert len(by_kind(docs, other.name)) == (other == kind), f"{name}: {other.name}"
        assert job_of(docs)["apiVersion"] == kind.api_version, name


def test_every_job_is_one_its_api_accepts(helm, rendered, kind):
    for name, docs in rendered.items():
        try:
            kind.assert_valid(job_of(docs), helm)
        except AssertionError as error:
            pytest.fail(f"{name}: {error}")


def test_every_builtin_manifest_validates_against_kubernetes_schemas(rendered, kind):
    for name, docs in rendered.items():
        for doc in docs:
            if doc["kind"] in (kind.name, *kind.other_custom_kinds):
                continue
            assert_valid_in_every_version(doc, f"{name}: {doc['kind']}/{doc['metadata']['name']}")


def test_every_trainer_pod_validates_against_kubernetes_schemas(rendered, kind):
    for name, docs in rendered.items():
        for role, template in kind.trainer_pods(docs).items():
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{job_of(docs)['metadata']['name'][:40]}-{role.lower()}-0",
                    **template["metadata"],
                },
                "spec": template["spec"],
            }
            assert_valid_in_every_version(pod, f"{name}: the {role} pod")


def test_every_pod_runs_restricted_and_read_only(rendered, kind):
    for name, docs in rendered.items():
        trainer_specs = [template["spec"] for template in kind.trainer_pods(docs).values()]
        for spec in all_pod_specs(docs):
            assert restricted_violations(spec, name) == []
            # No pod calls the Kubernetes API, so none carries a token (checkov CKV_K8S_38).
            if kind.sets_automount_token(docs) or spec not in trainer_specs:
                assert spec["automountServiceAccountToken"] is False, name
            for container in spec["containers"]:
                assert container["securityContext"]["readOnlyRootFilesystem"] is True, name
                mounts = {m["mountPath"] for m in container["volumeMounts"]}
                assert "/tmp" in mounts, f"{name}: {container['name']} has no writable /tmp"


def test_every_kind_runs_the_trainer_with_the_same_flags(rendered_kinds):
    """The data, model, checkpoint and TensorBoard directories of a run are the same whatever the kind
    (the run id, and so its checkpoint and event directories, also names the job kind)."""
    run_specific = {"--run-id", "--checkpoint-dir", "--log-dir"}

    def without_run_flags(args):
        return [a for i, a in enumerate(args) if a not in run_specific and (i == 0 or args[i - 1] not in run_specific)]

    first, *others = [
        trainer_container(rendered_kinds(kind)["defaults"])["args"][len(kind.args_prefix) :] for kind in KINDS
    ]
    for args in others:
        assert without_run_flags(args) == without_run_flags(first)
        for run_flag in ("--checkpoint-dir", "--log-dir"):
            first_dir, other_dir = flag(first, run_flag), flag(args, run_flag)
            assert first_dir.rsplit("/", 1)[0] == other_dir.rsplit("/", 1)[0]
            assert other_dir.endswith(flag(args, "--run-id"))
        assert flag(args, "--run-id") != flag(first, "--run-id")
