"""charts/pytorchjob-mnist with `jobKind: TrainJob`: where each value lands in a Kubeflow Trainer v2
TrainJob (spec.trainer, the runtime patch of the torch runtime's `node`, spec.suspend and the deadline).
The shared checks (tests/charts/pytorchjob_mnist/test_shared_*.py) load every combination into
upstream's models and check the node pod as the runtime builds it. The chart's own TrainingRuntime
(trainingRuntime.create) goes through the same models here."""

from __future__ import annotations

import re

import pytest

from tests.support.helm import by_kind, one
from tests.support.paths import WORKLOAD_CHART
from tests.support.pytorchjob_mnist import (
    GPU_TOLERATION,
    TORCHRUN,
    TRAINJOB,
    assert_valid_training_runtime,
    flag,
    trainer_container,
    trainer_pods,
    trainjob_patch,
)

MANAGER = "pytorchjob-mnist.github.io/chart"


@pytest.fixture
def kind():
    return TRAINJOB


def render(helm, **values) -> list[dict]:
    return helm.render(WORKLOAD_CHART, set_values=TRAINJOB.values(values))


def test_the_patch_names_only_the_torch_runtimes_node_job_and_container(rendered):
    """Trainer v2.3 adds a patched container the runtime lacks as a new, image-less one."""
    for name, docs in rendered.items():
        job = one(docs, "TrainJob")
        (patch,) = job["spec"]["runtimePatches"]
        assert patch["manager"] == MANAGER, name
        assert re.fullmatch(r"[a-z0-9.-]+\.[a-z]+/[a-z0-9/-]+", patch["manager"]), "a domain-prefixed path"
        assert [j["name"] for j in patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]] == ["node"]
        spec = trainjob_patch(job)["spec"]
        assert [c["name"] for c in spec["containers"]] == ["node"], name
        assert "initContainers" not in spec, name
        assert not {"env", "resources", "image"} & set(spec["containers"][0]), "the trainer's, not the patch's"


def test_defaults_are_two_cpu_nodes_of_one_torchrun_process(rendered):
    spec = one(rendered["defaults"], "TrainJob")["spec"]
    assert spec["runtimeRef"] == {
        "apiGroup": "trainer.kubeflow.org",
        "kind": "ClusterTrainingRuntime",
        "name": "torch-distributed",
    }
    assert spec["suspend"] is False and "activeDeadlineSeconds" not in spec
    trainer = spec["trainer"]
    assert (trainer["numNodes"], trainer["numProcPerNode"]) == (2, 1)
    assert trainer["image"] == "ghcr.io/pytorchjob-mnist/trainer:0.1.0-cpu"
    assert trainer["command"] == TORCHRUN, "v2 starts the command as it is: torchrun forms the process group"
    assert trainer["resourcesPerNode"] == {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "4Gi"}}
    assert not any(e["name"].startswith("PET_") for e in trainer["env"])


def test_gpus_become_resources_per_node_and_processes(rendered):
    job = one(rendered["gpu-two-per-pod-torchrun"], "TrainJob")
    trainer = job["spec"]["trainer"]
    assert trainer["resourcesPerNode"] == {"limits": {"nvidia.com/gpu": 2}}
    assert trainer["numProcPerNode"] == 2
    assert GPU_TOLERATION in trainjob_patch(job)["spec"]["tolerations"]


def test_gpu_example_runs_four_processes_per_node_on_nccl(rendered):
    trainer = one(rendered["examples/trainjob/gpu-nccl-values.yaml"], "TrainJob")["spec"]["trainer"]
    assert (trainer["numNodes"], trainer["numProcPerNode"]) == (2, 4)
    assert trainer["resourcesPerNode"]["limits"]["nvidia.com/gpu"] == 4
    assert flag(trainer["args"], "--backend") == "nccl"


def test_the_existing_claim_example_reaches_the_node_pod(rendered):
    patch = trainjob_patch(one(rendered["examples/trainjob/existing-claim-values.yaml"], "TrainJob"))
    volumes = {v["name"]: v for v in patch["spec"]["volumes"]}
    assert volumes["storage"]["persistentVolumeClaim"] == {"claimName": "tutorial"}
    assert {m["mountPath"] for m in patch["spec"]["containers"][0]["volumeMounts"]} == {
        "/t9k/mnt",
        "/tmp",
        "/var/cache/trainer",
        "/dev/shm",
    }


def test_workers_zero_is_one_node(rendered):
    assert one(rendered["one-pod-no-persistence"], "TrainJob")["spec"]["trainer"]["numNodes"] == 1


def test_suspend_and_deadline_map_to_the_trainjobs_own_fields(rendered):
    spec = one(rendered["three-pods-two-procs-suspended-deadline"], "TrainJob")["spec"]
    assert (spec["suspend"], spec["activeDeadlineSeconds"]) == (True, 7200)
    assert (spec["trainer"]["numNodes"], spec["trainer"]["numProcPerNode"]) == (3, 2)


def test_kueue_owns_suspend(rendered):
    assert "suspend" not in one(rendered["wrapped-kueue-no-shm"], "TrainJob")["spec"]


def test_own_runtime_command_and_env(rendered):
    spec = one(rendered["own-runtime-and-script"], "TrainJob")["spec"]
    assert spec["runtimeRef"]["kind"] == "TrainingRuntime" and spec["runtimeRef"]["name"] == "torch-with-sidecar"
    assert spec["trainer"]["command"] == ["torchrun", "/workspace/train.py"]
    assert spec["trainer"]["args"] == ["--epochs=1"]
    names = [e["name"] for e in spec["trainer"]["env"]]
    assert names.index("NCCL_DEBUG") > names.index("XDG_CACHE_HOME") and "PYTHONSAFEPATH" not in names


def test_args_alone_replace_the_flags_but_keep_torchrun(helm):
    trainer = one(render(helm, args=["--epochs=2", "--dataset=digits"]), "TrainJob")["spec"]["trainer"]
    assert trainer["command"] == TORCHRUN and trainer["args"] == ["--epochs=2", "--dataset=digits"]


def test_a_wrapper_goes_before_torchrun(rendered):
    trainer = one(rendered["wrapped-kueue-no-shm"], "TrainJob")["spec"]["trainer"]
    assert trainer["command"] == ["py-spy", "record", "-o", "/tmp/profile.svg", "--", *TORCHRUN]


def test_no_runtime_of_its_own_unless_asked(rendered):
    for name, docs in rendered.items():
        runtimes = by_kind(docs, "TrainingRuntime")
        assert len(runtimes) == name.startswith("chart-runtime-"), name


def test_every_charts_runtime_is_one_upstreams_models_accept(rendered):
    """The same round trip as the TrainJob's (kubeflow-trainer-api 2.3.0), under Helm 3 and 4."""
    runtimes = [runtime for docs in rendered.values() for runtime in by_kind(docs, "TrainingRuntime")]
    assert len(runtimes) == 2
    for runtime in runtimes:
        assert_valid_training_runtime(runtime)


def test_the_charts_runtime_is_upstreams_torch_runtime_and_the_job_runs_on_it(rendered):
    docs = rendered["chart-runtime-defaults"]
    job, runtime = one(docs, "TrainJob"), one(docs, "TrainingRuntime")
    assert runtime["metadata"]["name"] == job["metadata"]["name"] == "mnist"
    assert runtime["metadata"]["namespace"] == job["metadata"]["namespace"]
    assert job["spec"]["runtimeRef"] == {"apiGroup": "trainer.kubeflow.org", "kind": "TrainingRuntime", "name": "mnist"}
    assert runtime["metadata"]["labels"]["trainer.kubeflow.org/framework"] == "torch", "the SDK lists runtimes by it"
    # Helm creates unknown kinds alphabetically (TrainJob first), and Trainer refuses a TrainJob whose
    # runtime does not exist yet: the runtime is a hook that runs before the release's objects.
    assert runtime["metadata"]["annotations"] == {
        "helm.sh/hook": "pre-install,pre-upgrade",
        "helm.sh/hook-delete-policy": "before-hook-creation",
    }
    spec = runtime["spec"]
    assert spec["mlPolicy"] == {"numNodes": 2, "torch": {}}
    (replicated_job,) = spec["template"]["spec"]["replicatedJobs"]
    assert replicated_job["name"] == "node", "the name the chart's patch and Trainer's torch plugin use"
    # Trainer's webhook and builder find the trainer step by this label, and its container by the name `node`.
    assert replicated_job["template"]["metadata"]["labels"] == {
        "trainer.kubeflow.org/trainjob-ancestor-step": "trainer"
    }
    pod = replicated_job["template"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container == {
        "name": "node",
        "image": job["spec"]["trainer"]["image"],
        "imagePullPolicy": "IfNotPresent",
        "workingDir": "/mnt/pytorchjob-mnist",
    }
    assert pod["automountServiceAccountToken"] is False
    assert pod["restartPolicy"] == "OnFailure" and "podFailurePolicy" not in replicated_job["template"]["spec"]
    assert "backoffLimit" not in replicated_job["template"]["spec"], "null: Kubernetes' default"


def test_the_charts_runtime_carries_what_a_runtime_patch_cannot(rendered):
    docs = rendered["chart-runtime-exitcode-multikueue"]
    (replicated_job,) = one(docs, "TrainingRuntime")["spec"]["template"]["spec"]["replicatedJobs"]
    job_spec = replicated_job["template"]["spec"]
    assert job_spec["backoffLimit"] == 7
    # ExitCode as a Job can have it: 1-127 fail the job at once, anything else makes a new pod.
    (rule,) = job_spec["podFailurePolicy"]["rules"]
    assert rule == {
        "action": "FailJob",
        "onExitCodes": {"containerName": "node", "operator": "In", "values": list(range(1, 128))},
    }
    (pod,) = trainer_pods(docs).values()
    spec = pod["spec"]
    assert spec["restartPolicy"] == "Never", "a pod failure policy needs it"
    assert (spec["schedulerName"], spec["priorityClassName"]) == ("volcano", "training-high")
    assert spec["automountServiceAccountToken"] is False and spec["serviceAccountName"] == "mnist-reader"
    container = trainer_container(docs)
    assert (container["imagePullPolicy"], container["workingDir"]) == ("Always", "/workspace")


def test_the_charts_runtime_mounts_the_token_when_asked(helm):
    docs = render(helm, **{"trainingRuntime.create": True, "serviceAccount.automountToken": True})
    (pod,) = trainer_pods(docs).values()
    assert pod["spec"]["automountServiceAccountToken"] is True


def test_multikueue_sets_the_trainjobs_managed_by(rendered):
    spec = one(rendered["chart-runtime-exitcode-multikueue"], "TrainJob")["spec"]
    assert spec["managedBy"] == "kueue.x-k8s.io/multikueue"
    assert "suspend" not in spec, "Kueue's"
    assert "managedBy" not in one(rendered["defaults"], "TrainJob")["spec"], "Trainer's default controller"
