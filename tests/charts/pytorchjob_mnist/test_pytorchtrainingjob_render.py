"""charts/pytorchjob-mnist with `jobKind: PyTorchTrainingJob`: where each value lands in a T9k
batch.tensorstack.dev/v1beta1 PyTorchTrainingJob in torchrun mode (spec.torchrunConfig, the one `node`
replica spec, spec.runPolicy, spec.runMode, spec.scheduler). T9k publishes no schema: the shared checks
hold every combination to the facts of its API reference and have the local runner read it."""

from __future__ import annotations

import pytest
import yaml

from tests.support.helm import one
from tests.support.paths import WORKLOAD_CHART
from tests.support.pytorchjob_mnist import (
    PYTORCHJOB,
    PYTORCHTRAININGJOB,
    env_of,
    flag,
    pytorchjob_pods,
    trainer_container,
)

LOCALJOB_FIXTURE = WORKLOAD_CHART.parents[1] / "tests" / "localjob" / "fixtures" / "pytorchtrainingjob.yaml"


@pytest.fixture
def kind():
    return PYTORCHTRAININGJOB


def spec_of(docs: list[dict]) -> dict:
    return one(docs, "PyTorchTrainingJob")["spec"]


def render(helm, **values) -> list[dict]:
    return helm.render(WORKLOAD_CHART, set_values=PYTORCHTRAININGJOB.values(values))


def test_defaults_are_two_node_pods_of_one_torchrun_process(rendered):
    docs = rendered["defaults"]
    spec = spec_of(docs)
    assert spec["torchrunConfig"] == {"enabled": True, "procPerNode": "1", "maxRestarts": 0, "rdzvBackend": "c10d"}
    (node,) = spec["replicaSpecs"]
    assert (node["type"], node["replicas"], node["restartPolicy"]) == ("node", 2, "OnFailure")
    assert spec["runPolicy"] == {"backoffLimit": 3, "cleanUpPolicy": "None"}
    assert not {"elastic", "runMode", "scheduler"} & set(spec)
    container = trainer_container(docs)
    assert "command" not in container, "T9k runs torchrun in place of the container's command"
    assert container["args"][:2] == ["-m", "trainer"], "torchrun starts the trainer module"
    assert flag(container["args"], "--backend") == "gloo" and "--no-cuda" in container["args"]
    assert container["image"] == "ghcr.io/pytorchjob-mnist/trainer:0.1.0-cpu"


def test_the_pod_template_is_the_one_every_kind_shares(helm):
    """The same pod as a PyTorchJob's Master, but for the args: T9k's torchrun takes the module first."""
    node = spec_of(render(helm))["replicaSpecs"][0]["template"]
    master = pytorchjob_pods(helm.render(WORKLOAD_CHART, set_values=PYTORCHJOB.values({})))["Master"]
    node_args = node["spec"]["containers"][0].pop("args")
    master_args = master["spec"]["containers"][0].pop("args")
    assert node == master
    run_id = flag(node_args, "--run-id")
    assert node_args[2:] == [arg.replace(flag(master_args, "--run-id"), run_id) for arg in master_args]
    assert run_id != flag(master_args, "--run-id"), "the run id names the job kind"


def test_torchrun_is_implied_whatever_torchrun_enabled_says(helm):
    assert spec_of(render(helm, **{"torchrun.enabled": False})) == spec_of(render(helm, **{"torchrun.enabled": True}))


def test_gpus_become_limits_and_one_process_each(rendered):
    docs = rendered["gpu-two-per-pod-torchrun"]
    assert spec_of(docs)["torchrunConfig"]["procPerNode"] == "2"
    assert trainer_container(docs)["resources"] == {"limits": {"nvidia.com/gpu": 2}}


def test_suspend_pauses_the_job_and_the_deadline_is_the_run_policys(rendered):
    """runPolicy.suspend's counterpart is T9k's pause mode, which holds the job's pods back."""
    spec = spec_of(rendered["three-pods-two-procs-suspended-deadline"])
    assert spec["runMode"] == {"pause": {"enabled": True}}
    assert spec["runPolicy"] == {"backoffLimit": 3, "activeDeadlineSeconds": 7200, "cleanUpPolicy": "None"}
    assert (spec["replicaSpecs"][0]["replicas"], spec["torchrunConfig"]["procPerNode"]) == (3, "2")


def test_restart_and_run_policies_torchrun_restarts_and_the_queue(rendered):
    spec = spec_of(rendered["three-pods-exitcode-run-policy-queue"])
    assert spec["replicaSpecs"][0]["restartPolicy"] == "ExitCode"
    assert spec["replicaSpecs"][0]["replicas"] == 3
    assert spec["runPolicy"] == {"backoffLimit": 0, "activeDeadlineSeconds": 7200, "cleanUpPolicy": "Unfinished"}
    assert spec["torchrunConfig"]["maxRestarts"] == 2
    assert spec["scheduler"] == {"t9kScheduler": {"queue": "research", "priority": 80}}


def test_a_null_backoff_limit_is_t9ks_default_and_a_queue_needs_no_priority(rendered):
    spec = spec_of(rendered["never-clean-all-t9k-backoff-queue-only"])
    assert spec["replicaSpecs"][0]["restartPolicy"] == "Never"
    assert spec["runPolicy"] == {"cleanUpPolicy": "All"}
    assert spec["scheduler"] == {"t9kScheduler": {"queue": "research"}}


@pytest.mark.parametrize(
    "clean_pod_policy, clean_up_policy", [("None", "None"), ("Running", "Unfinished"), ("All", "All")]
)
def test_clean_pod_policy_becomes_t9ks_clean_up_policy(helm, clean_pod_policy, clean_up_policy):
    spec = spec_of(render(helm, **{"runPolicy.cleanPodPolicy": clean_pod_policy}))
    assert spec["runPolicy"]["cleanUpPolicy"] == clean_up_policy


def test_a_script_in_args_runs_with_the_pods_own_fields(rendered):
    docs = rendered["own-script-in-args"]
    container = trainer_container(docs)
    assert container["args"] == ["/workspace/train.py", "--epochs=1"] and "command" not in container
    assert container["workingDir"] == "/workspace"
    names = [e["name"] for e in container["env"]]
    assert names.index("NCCL_DEBUG") > names.index("XDG_CACHE_HOME"), "user env comes after the chart's"
    assert env_of(docs)["PYTHONSAFEPATH"] == "1", "torchrun's python -m would put the volume on sys.path"
    pod = spec_of(docs)["replicaSpecs"][0]["template"]["spec"]
    assert (pod["schedulerName"], pod["priorityClassName"]) == ("t9k-scheduler", "training-high")


def test_a_name_at_the_limit_leaves_room_for_t9ks_pod_names(rendered):
    name = one(rendered["name-at-the-50-limit"], "PyTorchTrainingJob")["metadata"]["name"]
    assert len(f"{name}-0a1b2-node-1") == 63


def test_the_gpu_example_is_t9ks_guide(rendered):
    docs = rendered["examples/pytorchtrainingjob/gpu-nccl-values.yaml"]
    spec = spec_of(docs)
    assert spec["replicaSpecs"][0]["replicas"] == 1
    assert spec["torchrunConfig"] == {"enabled": True, "procPerNode": "4", "maxRestarts": 3, "rdzvBackend": "c10d"}
    container = trainer_container(docs)
    assert container["resources"] == {
        "requests": {"cpu": "4", "memory": "8Gi"},
        "limits": {"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": 4},
    }
    assert flag(container["args"], "--backend") == "nccl" and container["image"].endswith(":0.1.0-cuda")
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert (mounts["storage"], mounts["dshm"]) == ("/t9k/mnt", "/dev/shm")
    volumes = {v["name"]: v for v in spec["replicaSpecs"][0]["template"]["spec"]["volumes"]}
    assert volumes["storage"]["persistentVolumeClaim"] == {"claimName": "tutorial"}
    assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "4Gi"}


def test_the_cpu_example_is_two_pods_on_digits(rendered):
    docs = rendered["examples/pytorchtrainingjob/cpu-values.yaml"]
    assert spec_of(docs)["replicaSpecs"][0]["replicas"] == 2
    assert flag(trainer_container(docs)["args"], "--dataset") == "digits"


def test_the_local_runners_fixture_has_the_charts_shape(rendered):
    """tests/localjob/fixtures/pytorchtrainingjob.yaml was written by hand for the runner ahead of the chart:
    the chart's job has its fields, no more and no fewer."""
    fixture = yaml.safe_load(LOCALJOB_FIXTURE.read_text())["spec"]
    spec = spec_of(rendered["three-pods-exitcode-run-policy-queue"])
    assert set(spec) == set(fixture)
    for field in ("torchrunConfig", "runPolicy", "scheduler"):
        assert set(spec[field]) == set(fixture[field]), field
    assert set(spec["scheduler"]["t9kScheduler"]) == set(fixture["scheduler"]["t9kScheduler"])
    assert set(spec["replicaSpecs"][0]) == set(fixture["replicaSpecs"][0])
    assert spec["replicaSpecs"][0]["type"] == fixture["replicaSpecs"][0]["type"]
