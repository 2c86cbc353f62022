"""What a Kubeflow Trainer v2 TrainJob cannot do is refused by name, with the reason and the fix;
the schema refuses a runtime reference it does not know."""

from __future__ import annotations

import pytest
import yaml

from tests.support.helm import SCHEMA_REFUSAL
from tests.support.paths import WORKLOAD_CHART


def refusal(helm, tmp_path, **values) -> str:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump({"jobKind": "TrainJob", **values}))
    result = helm.template(WORKLOAD_CHART, values_files=(path,))
    assert result.returncode != 0, f"expected {values} to be refused, but it rendered"
    return result.stderr


def test_elastic_is_refused_as_removed_in_v2(helm, tmp_path):
    error = refusal(helm, tmp_path, elasticPolicy={"enabled": True})
    assert "elasticPolicy.enabled with jobKind TrainJob: Trainer v2 removed elastic training" in error
    assert "set elasticPolicy.enabled=false, or jobKind: PyTorchJob" in error


@pytest.mark.parametrize("nproc", ["auto", "cpu", "gpu"])
def test_torchruns_named_counts_are_refused_as_numproc_is_an_integer(helm, tmp_path, nproc):
    error = refusal(helm, tmp_path, nprocPerNode=nproc, gpu=1)
    assert (
        f"nprocPerNode: {nproc} with jobKind TrainJob: trainer.numProcPerNode is an integer since Trainer v2.2" in error
    )


@pytest.mark.parametrize("name", ["PET_NNODES", "PET_MASTER_ADDR", "PET_RDZV_ENDPOINT"])
def test_pet_variables_are_refused_as_the_runtime_sets_them(helm, tmp_path, name):
    error = refusal(helm, tmp_path, env=[{"name": "NCCL_DEBUG", "value": "INFO"}, {"name": name, "value": "x"}])
    assert f"env: {name} with jobKind TrainJob: Trainer v2 refuses PET_* variables" in error
    assert f"remove {name} from env" in error


@pytest.mark.parametrize(
    "values, path, why",
    [
        ({"restartPolicy": "ExitCode"}, "restartPolicy", "the runtime's Job template sets the pods' restartPolicy"),
        ({"runPolicy": {"backoffLimit": 10}}, "runPolicy.backoffLimit", "the runtime's Job template sets backoffLimit"),
        ({"runPolicy": {"cleanPodPolicy": "All"}}, "runPolicy.cleanPodPolicy", "a TrainJob keeps its finished pods"),
        ({"runPolicy": {"ttlSecondsAfterFinished": 60}}, "runPolicy.ttlSecondsAfterFinished", "a TrainJob has no TTL"),
        (
            {"runPolicy": {"schedulingPolicy": {"minAvailable": 2}}},
            "runPolicy.schedulingPolicy.minAvailable",
            "gang scheduling is the runtime's podGroupPolicy",
        ),
        (
            {"runPolicy": {"schedulingPolicy": {"queue": "research"}}},
            "runPolicy.schedulingPolicy.queue",
            "gang scheduling is the runtime's podGroupPolicy",
        ),
        ({"schedulerName": "volcano"}, "schedulerName", "runtimePatches cannot set a pod's schedulerName"),
        ({"priorityClassName": "high"}, "priorityClassName", "runtimePatches cannot set a pod's priorityClassName"),
        ({"workingDir": "/workspace"}, "workingDir", "a TrainJob's trainer has no workingDir"),
    ],
)
def test_v1_only_values_off_their_defaults_are_refused(helm, tmp_path, values, path, why):
    error = refusal(helm, tmp_path, **values)
    assert f"{path}: " in error and "with jobKind TrainJob has no TrainJob counterpart: " + why in error
    assert f"leave {path} at its default" in error and "or use jobKind: PyTorchJob" in error


def test_v1_only_values_at_their_defaults_render(helm):
    """A parent chart or --set that repeats a default (as an integer, not the file's float) still renders."""
    result = helm.template(
        WORKLOAD_CHART,
        set_values={"jobKind": "TrainJob", "runPolicy.backoffLimit": 3, "restartPolicy": "OnFailure"},
    )
    assert result.returncode == 0, result.stderr


def test_a_name_over_48_characters_is_refused_for_jobsets_pod_names(helm, tmp_path):
    error = refusal(helm, tmp_path, fullnameOverride="a" * 49)
    assert "TrainJob name" in error and "has 49 characters, the limit is 48" in error
    assert "JobSet names its pods <name>-node-0-<index>-<5 characters> within 63" in error
    assert "set fullnameOverride to a name of at most 48 characters" in error


def test_the_pytorchjob_name_limit_stays_63_for_its_pods(helm):
    """The 48-character limit is the TrainJob's: a PyTorchJob of 54 characters still renders."""
    result = helm.template(WORKLOAD_CHART, set_values={"fullnameOverride": "a" * 54})
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    "values, key",
    [
        ({"jobKind": "TrainJob", "runtimeRef": {"kind": "JobSet"}}, "kind"),
        ({"jobKind": "TrainJob", "runtimeRef": {"name": "Torch_Distributed"}}, "name"),
        ({"jobKind": "TrainJob", "runtimeRef": {"apiGroup": "trainer.kubeflow.org"}}, "apiGroup"),
    ],
)
def test_the_schema_refuses_unknown_runtime_references(helm, tmp_path, values, key):
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    result = helm.template(WORKLOAD_CHART, values_files=(path,))
    assert result.returncode != 0 and SCHEMA_REFUSAL in result.stderr and key in result.stderr, result.stderr
