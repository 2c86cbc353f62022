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


# Trainer v2.2.0-v2.3.0's webhook refuses these five in trainer.env (TorchRunReservedEnvNames), which
# its torch plugin sets; the chart refuses every other PET_* too, as torchrun reads them as its flags.
TRAINER_RESERVED = ["PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"]


@pytest.mark.parametrize("name", [*TRAINER_RESERVED, "PET_RDZV_ENDPOINT"])
def test_pet_variables_are_refused_as_the_runtime_or_torchrun_reads_them(helm, tmp_path, name):
    error = refusal(helm, tmp_path, env=[{"name": "NCCL_DEBUG", "value": "INFO"}, {"name": name, "value": "x"}])
    assert f"env: {name} with jobKind TrainJob: " in error and f"remove {name} from env" in error
    assert "Trainer v2 refuses " + ", ".join(TRAINER_RESERVED) + ", which its torch runtime sets" in error
    assert "the chart refuses every other PET_* variable too: torchrun reads them as its flags" in error


@pytest.mark.parametrize(
    "values, path, why",
    [
        ({"restartPolicy": "ExitCode"}, "restartPolicy", "the runtime's Job template sets the pods' restartPolicy"),
        ({"runPolicy": {"backoffLimit": 10}}, "runPolicy.backoffLimit", "the runtime's Job template sets backoffLimit"),
        (
            {"runPolicy": {"cleanPodPolicy": "All"}},
            "runPolicy.cleanPodPolicy",
            "JobSet keeps a Complete job's pods, and deletes the Jobs still running when it fails",
        ),
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
        (
            {"workingDir": "/workspace"},
            "workingDir",
            "neither a TrainJob's trainer nor its runtime patch has a workingDir",
        ),
    ],
)
def test_v1_only_values_off_their_defaults_are_refused(helm, tmp_path, values, path, why):
    error = refusal(helm, tmp_path, **values)
    assert f"{path}: " in error and "with jobKind TrainJob has no TrainJob counterpart: " + why in error
    assert f"leave {path} at its default" in error and "or use jobKind: PyTorchJob" in error


# The values the chart's own TrainingRuntime (trainingRuntime.create) carries, which a runtime patch cannot.
LIFTED_BY_THE_CHARTS_RUNTIME = [
    {"restartPolicy": "ExitCode"},
    {"restartPolicy": "Never"},
    {"runPolicy": {"backoffLimit": 10}},
    {"runPolicy": {"backoffLimit": None}},
    {"schedulerName": "volcano"},
    {"priorityClassName": "high"},
    {"workingDir": "/workspace"},
]


@pytest.mark.parametrize("values", LIFTED_BY_THE_CHARTS_RUNTIME, ids=lambda v: yaml.safe_dump(v).strip())
def test_the_refusal_of_what_the_charts_runtime_carries_names_it(helm, tmp_path, values):
    error = refusal(helm, tmp_path, **values)
    assert ", set trainingRuntime.create=true, or use jobKind: PyTorchJob" in error


@pytest.mark.parametrize("values", LIFTED_BY_THE_CHARTS_RUNTIME, ids=lambda v: yaml.safe_dump(v).strip())
def test_the_charts_runtime_lifts_the_refusal_of_what_it_carries(helm, tmp_path, values):
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump({"jobKind": "TrainJob", "trainingRuntime": {"create": True}, **values}))
    result = helm.template(WORKLOAD_CHART, values_files=(path,))
    assert result.returncode == 0, result.stderr


def test_the_charts_runtime_lifts_nothing_it_does_not_carry(helm, tmp_path):
    error = refusal(helm, tmp_path, trainingRuntime={"create": True}, runPolicy={"cleanPodPolicy": "All"})
    assert "runPolicy.cleanPodPolicy: " in error and "trainingRuntime.create" not in error


@pytest.mark.both_helm_majors
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
    assert "the last node index, 1, has 1 digit;" in error
    assert "set fullnameOverride to a name of at most 48 characters" in error


@pytest.mark.parametrize(
    "workers, longest",
    [(0, 48), (9, 48), (10, 47), (99, 47), (100, 46)],
    ids=lambda v: str(v),
)
def test_the_name_limit_is_jobsets_for_the_last_node_index(helm, tmp_path, workers, longest):
    """JobSet v0.12 refuses a JobSet whose last pod, <name>-node-0-<workers>-<5 characters>, would pass
    63 characters: 49 less the digits of the last index. The longest name renders; one more is refused."""
    values = {"jobKind": "TrainJob", "workers": workers, "fullnameOverride": "a" * longest}
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    result = helm.template(WORKLOAD_CHART, values_files=(path,))
    assert result.returncode == 0, result.stderr
    pod = f"{'a' * longest}-node-0-{workers}-abcde"
    assert len(pod) == 63, "the last pod's name just fits"
    error = refusal(helm, tmp_path, workers=workers, fullnameOverride="a" * (longest + 1))
    assert f"has {longest + 1} characters, the limit is {longest}" in error
    assert f"the last node index, {workers}, has {len(str(workers))} digit" in error
    assert f"set fullnameOverride to a name of at most {longest} characters" in error


def test_the_pytorchjob_name_limit_stays_63_for_its_pods(helm):
    """The 48-character limit is the TrainJob's: a PyTorchJob of 54 characters still renders."""
    result = helm.template(WORKLOAD_CHART, set_values={"fullnameOverride": "a" * 54})
    assert result.returncode == 0, result.stderr


@pytest.mark.both_helm_majors
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
