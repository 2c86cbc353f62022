"""The Argo CD health checks (run in Lua 5.1, the dialect of Argo CD's gopher-lua), the argocd-cm patch
that carries them, and yamllint of every YAML file under ci/argocd/ (tests/argocd/test_apps.py checks
the Applications)."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import yaml
from lupa import lua51
from yamllint import config as yamllint_config
from yamllint import linter

from tests.support.paths import REPO

ARGOCD = REPO / "ci" / "argocd"
CUSTOMIZATIONS = ARGOCD / "resource_customizations"
PYTORCHJOB_CHECK = CUSTOMIZATIONS / "kubeflow.org" / "PyTorchJob"
TRAINJOB_CHECK = CUSTOMIZATIONS / "trainer.kubeflow.org" / "TrainJob"
T9K_CHECK = CUSTOMIZATIONS / "batch.tensorstack.dev" / "PyTorchTrainingJob"
APPLICATION_CHECK = CUSTOMIZATIONS / "argoproj.io" / "Application"
CM_PATCH = ARGOCD / "argocd-cm-patch.yaml"
# Every condition type the training-operator v1 sets on a job (pkg/util/status.go).
PYTORCHJOB_CONDITION_TYPES = {"Created", "Running", "Restarting", "Succeeded", "Suspended", "Failed"}
# Every condition type Kubeflow Trainer v2 sets on a TrainJob.
TRAINJOB_CONDITION_TYPES = {"Suspended", "Complete", "Failed"}
# The phases and condition types T9k's manuals list for a PyTorchTrainingJob (shared/reference/t9k.md).
T9K_PHASES = {"Pending", "Running", "Paused", "Resuming", "Succeeded", "Failed", "Unknown"}
T9K_CONDITION_TYPES = {"Initialized", "Running", "ReplicaFailure", "Completed", "Failed", "Paused"}
# chart-testing's lintconf, but strict about line length: these files are read by people.
YAMLLINT = yamllint_config.YamlLintConfig("""
extends: default
rules:
  document-start: disable
  indentation: {spaces: consistent, indent-sequences: whatever}
  line-length: {max: 160}
  truthy: {check-keys: false}
  comments: {min-spaces-from-content: 1}
""")


def run_health_check(script: str, obj: dict) -> dict:
    """Evaluate an Argo CD health script the way Argo CD does: `obj` is a global, the chunk returns hs."""
    lua = lua51.LuaRuntime(unpack_returned_tuples=True)
    lua.globals().obj = lua.table_from(obj, recursive=True)
    result = lua.execute(script)
    return {"status": result["status"], "message": result["message"]}


def health_cases(check_dir: Path) -> list[tuple[Path, dict, dict]]:
    spec = yaml.safe_load((check_dir / "health_test.yaml").read_text())
    return [
        (
            check_dir / case["inputPath"],
            yaml.safe_load((check_dir / case["inputPath"]).read_text()),
            case["healthStatus"],
        )
        for case in spec["tests"]
    ]


ALL_CASES = [
    pytest.param(check_dir, obj, expected, id=f"{check_dir.name}/{path.stem}")
    for check_dir in (PYTORCHJOB_CHECK, TRAINJOB_CHECK, T9K_CHECK, APPLICATION_CHECK)
    for path, obj, expected in health_cases(check_dir)
]


@pytest.mark.parametrize("check_dir, obj, expected", ALL_CASES)
def test_health_check_gives_the_expected_status(check_dir: Path, obj: dict, expected: dict):
    script = (check_dir / "health.lua").read_text()
    assert run_health_check(script, obj) == expected


@pytest.mark.parametrize(
    "check_dir", [PYTORCHJOB_CHECK, TRAINJOB_CHECK, T9K_CHECK, APPLICATION_CHECK], ids=lambda p: p.name
)
def test_every_testdata_object_is_a_case(check_dir: Path):
    used = {path.name for path, _, _ in health_cases(check_dir)}
    present = {p.name for p in (check_dir / "testdata").glob("*.yaml")}
    assert present == used, f"testdata files without a case in health_test.yaml: {sorted(present - used)}"


def test_pytorchjob_cases_cover_every_condition_type_and_health_status():
    cases = health_cases(PYTORCHJOB_CHECK)
    true_types = {
        c["type"] for _, obj, _ in cases for c in obj.get("status", {}).get("conditions", []) if c["status"] == "True"
    }
    assert true_types == PYTORCHJOB_CONDITION_TYPES
    assert {"Healthy", "Degraded", "Progressing", "Suspended"} == {e["status"] for _, _, e in cases}
    assert any("status" not in obj for _, obj, _ in cases), "a job the operator has not seen yet"


def test_pytorchjob_testdata_are_valid_pytorchjobs(helm):
    """Full objects, as Argo CD would read them: accepted by the operator chart's own CRD."""
    from tests.support.crd import load_pytorchjob_crd, validate_custom_object

    crd = load_pytorchjob_crd(helm)
    for _, obj, _ in health_cases(PYTORCHJOB_CHECK):
        validate_custom_object(crd, obj)


def test_trainjob_cases_cover_every_condition_type_and_health_status():
    cases = health_cases(TRAINJOB_CHECK)
    true_types = {
        c["type"] for _, obj, _ in cases for c in obj.get("status", {}).get("conditions", []) if c["status"] == "True"
    }
    assert true_types == TRAINJOB_CONDITION_TYPES
    assert {"Healthy", "Degraded", "Progressing", "Suspended"} == {e["status"] for _, _, e in cases}
    assert any("status" not in obj for _, obj, _ in cases), "a job Trainer has not seen yet"
    assert any("conditions" not in obj.get("status", {"conditions": []}) for _, obj, _ in cases), (
        "a running job: Trainer v2 sets no Running condition"
    )


def test_trainjob_testdata_are_valid_trainjobs():
    """Full objects, as Argo CD would read them: upstream's generated models keep every field."""
    from kubeflow_trainer_api.models import TrainerV1alpha1TrainJob

    for path, obj, _ in health_cases(TRAINJOB_CHECK):
        model = TrainerV1alpha1TrainJob.from_dict(obj)
        assert model.model_dump(mode="json", by_alias=True, exclude_none=True) == obj, path.name


# Upstream's condition messages, by reason: JobSet v0.12 (constants.go, failure_policy.go's
# messageWithFirstFailedJob; Trainer copies the JobSet's Completed and Failed conditions) and Trainer
# v2.3.0 (pkg/constants: the deadline, suspend and resume messages).
TRAINJOB_MESSAGES = {
    "AllJobsCompleted": "jobset completed successfully",
    "FailedJobs": "jobset failed due to one or more job failures (first failed job: {name}-node-0)",
    "DeadlineExceeded": "TrainJob exceeded its active deadline",
    "Suspended": "TrainJob is suspended",
    "Resumed": "TrainJob is resumed",
}


def test_trainjob_testdata_carry_upstreams_messages():
    reasons = set()
    for path, obj, _ in health_cases(TRAINJOB_CHECK):
        for condition in obj.get("status", {}).get("conditions", []):
            if condition["message"]:  # one case has none, for the fallback to the reason
                expected = TRAINJOB_MESSAGES[condition["reason"]].format(name=obj["metadata"]["name"])
                assert condition["message"] == expected, path.name
                reasons.add(condition["reason"])
    assert reasons == set(TRAINJOB_MESSAGES)


@pytest.mark.parametrize("check_dir", [PYTORCHJOB_CHECK, TRAINJOB_CHECK, T9K_CHECK], ids=lambda p: p.name)
def test_a_condition_without_message_falls_back_to_its_reason(check_dir: Path):
    script = (check_dir / "health.lua").read_text()
    job = {"status": {"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}}
    assert run_health_check(script, job) == {"status": "Degraded", "message": "BackoffLimitExceeded"}


@pytest.mark.parametrize("check_dir", [PYTORCHJOB_CHECK, TRAINJOB_CHECK, T9K_CHECK], ids=lambda p: p.name)
def test_unknown_condition_types_do_not_break_the_check(check_dir: Path):
    script = (check_dir / "health.lua").read_text()
    job = {"status": {"conditions": [{"type": "SomethingNew", "status": "True"}]}}
    assert run_health_check(script, job)["status"] == "Progressing"


def test_t9k_cases_cover_every_phase_condition_type_and_health_status():
    cases = health_cases(T9K_CHECK)
    true_types = {
        c["type"] for _, obj, _ in cases for c in obj.get("status", {}).get("conditions", []) if c["status"] == "True"
    }
    assert true_types == T9K_CONDITION_TYPES
    assert {obj["status"]["phase"] for _, obj, _ in cases if "status" in obj} == T9K_PHASES
    assert {"Healthy", "Degraded", "Progressing", "Suspended"} == {e["status"] for _, _, e in cases}
    assert any("status" not in obj for _, obj, _ in cases), "a job T9k has not seen yet"


@pytest.mark.parametrize(
    "status, expected",
    [
        # A phase without conditions decides alone.
        ({"phase": "Succeeded"}, {"status": "Healthy", "message": "The PyTorchTrainingJob is Succeeded"}),
        ({"phase": "Failed"}, {"status": "Degraded", "message": "The PyTorchTrainingJob is Failed"}),
        ({"phase": "Paused"}, {"status": "Suspended", "message": "The PyTorchTrainingJob is Paused"}),
        # A job being resumed is Progressing, even while its Paused condition is still True.
        (
            {"phase": "Resuming", "conditions": [{"type": "Paused", "status": "True", "message": "paused"}]},
            {"status": "Progressing", "message": "The PyTorchTrainingJob is Resuming"},
        ),
        # A final condition wins over the phase not yet updated.
        (
            {"phase": "Running", "conditions": [{"type": "Failed", "status": "True", "message": "backoffLimit 3"}]},
            {"status": "Degraded", "message": "backoffLimit 3"},
        ),
        ({"phase": "SomethingNew"}, {"status": "Progressing", "message": "The PyTorchTrainingJob is SomethingNew"}),
        ({}, {"status": "Progressing", "message": "T9k has not reported a phase yet"}),
    ],
)
def test_t9k_precedence_between_phase_and_conditions(status, expected):
    assert run_health_check((T9K_CHECK / "health.lua").read_text(), {"status": status}) == expected


def test_t9k_testdata_are_jobs_the_local_runner_runs():
    """T9k publishes no schema to validate them against: their spec is at least the shape the local runner
    (ci/localjob/kinds/pytorchtrainingjob.py) reads, as the chart renders it."""
    from ci.localjob.kinds import job_model

    for path, obj, _ in health_cases(T9K_CHECK):
        assert (obj["apiVersion"], obj["kind"]) == ("batch.tensorstack.dev/v1beta1", "PyTorchTrainingJob"), path.name
        assert [pod.name for pod in job_model(obj).pods()] == ["mnist-node-0", "mnist-node-1"], path.name


# --- argocd-cm patch --------------------------------------------------------------------------


@functools.cache
def cm_patch() -> dict:
    return yaml.safe_load(CM_PATCH.read_text())


@pytest.mark.parametrize(
    "key, check_dir",
    [
        ("resource.customizations.health.kubeflow.org_PyTorchJob", PYTORCHJOB_CHECK),
        ("resource.customizations.health.trainer.kubeflow.org_TrainJob", TRAINJOB_CHECK),
        ("resource.customizations.health.batch.tensorstack.dev_PyTorchTrainingJob", T9K_CHECK),
        ("resource.customizations.health.argoproj.io_Application", APPLICATION_CHECK),
    ],
)
def test_cm_patch_embeds_the_health_lua_verbatim(key: str, check_dir: Path):
    embedded = cm_patch()["data"].get(key)
    assert embedded is not None, f"{CM_PATCH.name} lacks data[{key!r}]"
    assert embedded == (check_dir / "health.lua").read_text(), (
        f"{CM_PATCH.name} data[{key!r}] differs from {check_dir.relative_to(REPO)}/health.lua: paste the file again"
    )


def test_cm_patch_targets_argocd_cm():
    patch = cm_patch()
    assert (patch["kind"], patch["metadata"]["name"], patch["metadata"]["namespace"]) == (
        "ConfigMap",
        "argocd-cm",
        "argocd",
    )
    assert set(patch["data"]) == {
        "resource.customizations.health.kubeflow.org_PyTorchJob",
        "resource.customizations.health.trainer.kubeflow.org_TrainJob",
        "resource.customizations.health.batch.tensorstack.dev_PyTorchTrainingJob",
        "resource.customizations.health.argoproj.io_Application",
    }


# --- Applications -----------------------------------------------------------------------------


def yaml_files() -> list[Path]:
    return sorted(p for p in ARGOCD.rglob("*.yaml"))


@pytest.mark.parametrize("path", yaml_files(), ids=lambda p: str(p.relative_to(ARGOCD)))
def test_yamllint(path: Path):
    problems = list(linter.run(path.read_text(), YAMLLINT, str(path)))
    assert not problems, "\n".join(f"{path.name}:{p.line}:{p.column} {p.message}" for p in problems)
