"""What a Kubeflow Trainer v2 TrainJob's guards let through (test_shared_guards.py's table holds their
messages): the chart's TrainingRuntime lifts the refusals of what it carries, the name limit is JobSet's;
the schema refuses a runtime reference it does not know."""

from __future__ import annotations

import pytest
import yaml

from tests.support.chart_values import nested
from tests.support.helm import SCHEMA_REFUSAL
from tests.support.paths import WORKLOAD_CHART
from tests.support.pytorchjob_mnist import TRAINJOB_RUNTIME_VALUES


def refusal(helm, tmp_path, **values) -> str:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump({"jobKind": "TrainJob", **values}))
    result = helm.template(WORKLOAD_CHART, values_files=(path,))
    assert result.returncode != 0, f"expected {values} to be refused, but it rendered"
    return result.stderr


@pytest.mark.parametrize("path, value", TRAINJOB_RUNTIME_VALUES)
def test_the_charts_runtime_lifts_the_refusal_of_what_it_carries(helm, tmp_path, path, value):
    values = {"jobKind": "TrainJob", "trainingRuntime": {"create": True}, **nested(tuple(path.split(".")), value)}
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    result = helm.template(WORKLOAD_CHART, values_files=(values_file,))
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
