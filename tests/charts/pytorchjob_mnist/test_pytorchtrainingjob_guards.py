"""What a T9k PyTorchTrainingJob cannot do is refused by name, with the reason and the fix; the schema
refuses a t9k block it does not know."""

from __future__ import annotations

import pytest

from tests.support.helm import SCHEMA_REFUSAL
from tests.support.paths import WORKLOAD_CHART
from tests.support.pytorchjob_mnist import PYTORCHTRAININGJOB, render_with, template_error


def refusal(helm, tmp_path, **values) -> str:
    return template_error(helm, PYTORCHTRAININGJOB.values(values), tmp_path)


def test_a_command_is_refused_as_t9k_runs_torchrun_in_its_place(helm, tmp_path):
    error = refusal(helm, tmp_path, command=["python", "/workspace/train.py"])
    assert "command with jobKind PyTorchTrainingJob: in torchrun mode T9k ignores the container's command" in error
    assert "put your script and its flags in args (e.g. [/workspace/train.py, --epochs=1]) and clear command" in error


def test_a_wrapper_is_refused_as_nothing_goes_before_t9ks_torchrun(helm, tmp_path):
    error = refusal(helm, tmp_path, wrapCommand=["py-spy", "record", "--"])
    assert "wrapCommand with jobKind PyTorchTrainingJob: T9k starts torchrun itself" in error
    assert "clear wrapCommand, or use jobKind: PyTorchJob" in error


def test_args_must_start_with_a_script_or_a_module(helm, tmp_path):
    error = refusal(helm, tmp_path, args=["--epochs=1"])
    assert "args: --epochs=1 comes first with jobKind PyTorchTrainingJob" in error
    assert "T9k runs torchrun <its flags> <args>, which takes the script's path or -m <module> first" in error
    for args in (["-m", "trainer", "--epochs=1"], ["/workspace/train.py", "--epochs=1"]):
        assert render_with(helm, PYTORCHTRAININGJOB.values({"args": args}), tmp_path), args


def test_no_shm_is_refused_for_the_sigbus_t9ks_guide_saw(helm, tmp_path):
    error = refusal(helm, tmp_path, shm={"enabled": False})
    assert "shm.enabled=false with jobKind PyTorchTrainingJob: T9k's guide saw its job die with SIGBUS" in error
    assert "leave shm.enabled=true (shm.sizeLimit sets its size)" in error


@pytest.mark.parametrize("nproc, gpu", [("auto", 1), ("cpu", 0), ("gpu", 1)])
def test_torchruns_named_counts_are_refused_for_a_number(helm, tmp_path, nproc, gpu):
    error = refusal(helm, tmp_path, nprocPerNode=nproc, gpu=gpu)
    assert (
        f"nprocPerNode: {nproc} with jobKind PyTorchTrainingJob: the chart renders torchrunConfig.procPerNode" in error
    )
    assert "set nprocPerNode to a number of processes per pod, or leave it empty (one per GPU, else 1)" in error


def test_a_priority_without_a_queue_is_refused(helm, tmp_path):
    error = refusal(helm, tmp_path, t9k={"priority": 0})
    assert "t9k.priority: 0 without t9k.queue: a priority is one within a T9k queue" in error
    assert "set t9k.queue to a queue of the cluster, or clear t9k.priority" in error


@pytest.mark.parametrize(
    "values, path, why",
    [
        ({"elasticPolicy": {"enabled": True}}, "elasticPolicy.enabled", "the chart renders no spec.elastic"),
        (
            {"runPolicy": {"ttlSecondsAfterFinished": 60}},
            "runPolicy.ttlSecondsAfterFinished",
            "T9k's runPolicy has no TTL",
        ),
        (
            {"runPolicy": {"schedulingPolicy": {"minAvailable": 2}}},
            "runPolicy.schedulingPolicy.minAvailable",
            "T9k schedules its jobs itself (t9k.queue and t9k.priority)",
        ),
        (
            {"runPolicy": {"schedulingPolicy": {"queue": "research"}}},
            "runPolicy.schedulingPolicy.queue",
            "T9k schedules its jobs itself",
        ),
        (
            {"runPolicy": {"schedulingPolicy": {"priorityClass": "high"}}},
            "runPolicy.schedulingPolicy.priorityClass",
            "T9k schedules its jobs itself",
        ),
        (
            {"runPolicy": {"schedulingPolicy": {"scheduleTimeoutSeconds": 60}}},
            "runPolicy.schedulingPolicy.scheduleTimeoutSeconds",
            "T9k schedules its jobs itself",
        ),
        ({"kueue": {"queueName": "team-a"}}, "kueue.queueName", "Kueue admits no T9k job"),
    ],
)
def test_values_without_a_t9k_counterpart_are_refused_off_their_defaults(helm, tmp_path, values, path, why):
    error = refusal(helm, tmp_path, **values)
    assert (
        f"{path}: " in error
        and "with jobKind PyTorchTrainingJob has no PyTorchTrainingJob counterpart: " + why in error
    )
    assert f"leave {path} at its default" in error and "or use jobKind: PyTorchJob" in error


@pytest.mark.both_helm_majors
def test_values_without_a_t9k_counterpart_render_at_their_defaults(helm):
    """A parent chart or --set that repeats a default still renders."""
    result = helm.template(
        WORKLOAD_CHART,
        set_values={"jobKind": "PyTorchTrainingJob", "elasticPolicy.enabled": False, "kueue.queueName": ""},
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("workers, limit", [(1, 50), (10, 49)])
def test_a_name_too_long_for_t9ks_pod_names_is_refused(helm, tmp_path, workers, limit):
    error = refusal(helm, tmp_path, fullnameOverride="a" * (limit + 1), workers=workers)
    assert f'PyTorchTrainingJob name "{"a" * (limit + 1)}" has {limit + 1} characters, the limit is {limit}' in error
    assert "T9k names its pods <name>-<5 hex>-node-<index> within 63" in error
    assert f"set fullnameOverride to a name of at most {limit} characters" in error


@pytest.mark.parametrize(
    "t9k, key",
    [
        ({"priority": 101}, "priority"),
        ({"priority": -1}, "priority"),
        ({"queue": "Team_A"}, "queue"),
        ({"maxRestarts": -1}, "maxRestarts"),
        ({"restarts": 3}, "restarts"),
    ],
)
def test_the_schema_refuses_what_t9k_would_not_take(helm, tmp_path, t9k, key):
    error = refusal(helm, tmp_path, t9k=t9k)
    assert SCHEMA_REFUSAL in error and key in error, error
