"""charts/pytorchjob-mnist with `jobKind: TrainJob`, rendered by real Helm 3 and Helm 4: every
combination loads into upstream's own generated models (kubeflow-trainer-api) without a field
dropped, the pod it patches validates against Kubernetes schemas and meets PSS restricted, and each
value lands where a Kubeflow Trainer v2 TrainJob takes it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from kubeflow_trainer_api.models import TrainerV1alpha1TrainJob

from tests.support.helm import by_kind, notes_preview_chart, one, render_notes
from tests.support.k8s import assert_valid_in_every_version
from tests.support.paths import WORKLOAD_CHART
from tests.support.pss import restricted_violations

EXAMPLES = sorted((WORKLOAD_CHART / "examples" / "trainjob").glob("*-values.yaml"))
TORCHRUN = ["python", "-m", "trainer.torchrun", "--module", "trainer"]
MANAGER = "pytorchjob-mnist.github.io/chart"

# Inline combinations on top of examples/trainjob: together they exercise every value a TrainJob reads.
INLINE_CASES: dict[str, dict] = {
    "defaults": {},
    "node-alone-no-persistence": {"workers": 0, "persistence": {"enabled": False}, "shm": {"enabled": False}},
    "three-nodes-two-procs-suspended-deadline": {
        "workers": 2,
        "nprocPerNode": "2",
        "runPolicy": {"suspend": True, "activeDeadlineSeconds": 7200},
    },
    "gpu-two-per-node": {"gpu": 2, "resources": None},
    "placement-and-identity": {
        "tensorboard": {"enabled": True},
        "networkPolicy": {"enabled": True},
        "image": {"digest": "sha256:" + "a" * 64, "pullSecrets": ["regcred"]},
        "serviceAccount": {"name": "mnist-reader"},
        "nodeSelector": {"pool": "training"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}
                    ]
                }
            }
        },
        "labels": {"team": "vision"},
        "annotations": {"example.com/owner": "vision"},
        "podAnnotations": {"sidecar.istio.io/inject": "false"},
        "persistence": {"create": {"accessModes": ["ReadWriteMany"]}},
    },
    "host-path-kueue": {
        "persistence": {"hostPath": {"path": "/data/mnist", "nodeName": "node-a"}},
        "kueue": {"queueName": "team-a"},
    },
    "own-runtime-and-script": {
        "runtimeRef": {"name": "torch-with-sidecar", "kind": "TrainingRuntime"},
        "command": ["torchrun", "/workspace/train.py"],
        "args": ["--epochs=1"],
        "env": [{"name": "NCCL_DEBUG", "value": "INFO"}],
    },
    "wrapped-seed-recipe": {
        "wrapCommand": ["py-spy", "record", "-o", "/tmp/profile.svg", "--"],
        "training": {"recipe": "seed", "batchSize": 64, "lr": 0.01, "momentum": 0.5, "extraArgs": ["--threads", "2"]},
        "scratch": {"cachePath": "/cache"},
    },
    "name-at-the-48-limit": {"fullnameOverride": "a" * 48},
}


@pytest.fixture(scope="module")
def case_files(tmp_path_factory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("trainjob-values")
    cases = {f"examples/trainjob/{f.name}": f for f in EXAMPLES}
    for name, values in INLINE_CASES.items():
        path = directory / f"{name}.yaml"
        path.write_text(yaml.safe_dump({"jobKind": "TrainJob", **values}))
        cases[name] = path
    return cases


@pytest.fixture(scope="module")
def rendered(helm, case_files) -> dict[str, list[dict]]:
    return {name: helm.render(WORKLOAD_CHART, values_files=(path,)) for name, path in case_files.items()}


def render(helm, **values) -> list[dict]:
    return helm.render(WORKLOAD_CHART, set_values={"jobKind": "TrainJob", **values})


def node_patch(job: dict) -> dict:
    """The chart's patch of replicatedJob `node`: its pod template."""
    (patch,) = job["spec"]["runtimePatches"]
    (replicated_job,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    return replicated_job["template"]["spec"]["template"]


def node_pod_spec(job: dict) -> dict:
    """The node pod as the torch runtime builds it: the runtime's container `node` with the trainer's
    image, command, args, env and resources, merged with the chart's patch."""
    trainer = job["spec"]["trainer"]
    spec = dict(node_patch(job)["spec"])
    (container_patch,) = spec.pop("containers")
    container = {
        "name": "node",
        "image": trainer["image"],
        **{key: trainer[key] for key in ("command", "args", "env") if key in trainer},
        "resources": trainer.get("resourcesPerNode", {}),
        **container_patch,
    }
    return {**spec, "containers": [container]}


def flag(args: list[str], name: str) -> str:
    assert name in args, f"{name} missing from {args}"
    return args[args.index(name) + 1]


def test_matrix_has_at_least_eight_combinations(case_files):
    assert len(case_files) >= 8, sorted(case_files)


def test_lint_strict_for_every_trainjob_combination(helm, case_files):
    for name, path in case_files.items():
        result = helm.run("lint", "--strict", str(WORKLOAD_CHART), "-f", str(path), check=False)
        assert result.returncode == 0, f"{name}: {result.stdout}{result.stderr}"
        assert "Fail:" not in result.stderr and "funcMap fail" not in result.stderr, f"{name}: {result.stderr}"


def test_one_trainjob_and_no_pytorchjob(rendered):
    for name, docs in rendered.items():
        assert by_kind(docs, "PyTorchJob") == [], name
        job = one(docs, "TrainJob")
        assert job["apiVersion"] == "trainer.kubeflow.org/v1alpha1", name


def test_every_trainjob_loads_into_upstreams_models_without_losing_a_field(rendered):
    """kubeflow-trainer-api's from_dict keeps only the fields the API has: a misspelt or misplaced
    key (a container `resources` in a patch, say) vanishes from the round trip."""
    for name, docs in rendered.items():
        job = one(docs, "TrainJob")
        assert TrainerV1alpha1TrainJob.from_dict(job).to_dict() == job, name


def test_every_builtin_manifest_validates_against_kubernetes_schemas(rendered):
    for name, docs in rendered.items():
        for doc in docs:
            if doc["kind"] == "TrainJob":
                continue
            assert_valid_in_every_version(doc, f"{name}: {doc['kind']}/{doc['metadata']['name']}")


def test_every_patched_pod_validates_against_kubernetes_schemas(rendered):
    for name, docs in rendered.items():
        job = one(docs, "TrainJob")
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{job['metadata']['name']}-node-0-0-abcde", **node_patch(job)["metadata"]},
            "spec": node_pod_spec(job),
        }
        assert_valid_in_every_version(pod, f"{name}: the node pod")


def test_every_patched_pod_runs_restricted_and_read_only(rendered):
    for name, docs in rendered.items():
        pod_specs = [node_pod_spec(one(docs, "TrainJob")), *(d["spec"] for d in by_kind(docs, "Pod"))]
        pod_specs += [d["spec"]["template"]["spec"] for d in by_kind(docs, "Deployment")]
        for spec in pod_specs:
            assert restricted_violations(spec, name) == []
            for container in spec["containers"]:
                assert container["securityContext"]["readOnlyRootFilesystem"] is True, name
                assert "/tmp" in {m["mountPath"] for m in container["volumeMounts"]}, name


def test_the_patch_names_only_the_torch_runtimes_node_job_and_container(rendered):
    """Trainer v2.3 adds a patched container the runtime lacks as a new, image-less one."""
    for name, docs in rendered.items():
        job = one(docs, "TrainJob")
        (patch,) = job["spec"]["runtimePatches"]
        assert patch["manager"] == MANAGER, name
        assert re.fullmatch(r"[a-z0-9.-]+\.[a-z]+/[a-z0-9/-]+", patch["manager"]), "a domain-prefixed path"
        assert [j["name"] for j in patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]] == ["node"]
        spec = node_patch(job)["spec"]
        assert [c["name"] for c in spec["containers"]] == ["node"], name
        assert "initContainers" not in spec, name
        assert not {"env", "resources", "image"} & set(spec["containers"][0]), "the trainer's, not the patch's"


def test_defaults_are_two_cpu_nodes_of_one_torchrun_process(helm, rendered):
    job = one(rendered["defaults"], "TrainJob")
    spec = job["spec"]
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


def test_trainer_flags_are_the_pytorchjobs_so_outputs_land_in_the_same_places(helm):
    """The data, model, checkpoint and TensorBoard directories of a run are where v1 puts them (the
    run id, and so its checkpoint and event directories, also names the job kind)."""
    v1_args = one(helm.render(WORKLOAD_CHART), "PyTorchJob")["spec"]["pytorchReplicaSpecs"]["Master"]["template"][
        "spec"
    ]["containers"][0]["args"]
    v2_args = one(render(helm), "TrainJob")["spec"]["trainer"]["args"]
    run_specific = {"--run-id", "--checkpoint-dir", "--log-dir"}

    def without_run_flags(args):
        return [a for i, a in enumerate(args) if a not in run_specific and (i == 0 or args[i - 1] not in run_specific)]

    assert without_run_flags(v2_args) == without_run_flags(v1_args)
    for run_flag in ("--checkpoint-dir", "--log-dir"):
        v1_dir, v2_dir = flag(v1_args, run_flag), flag(v2_args, run_flag)
        assert v1_dir.rsplit("/", 1)[0] == v2_dir.rsplit("/", 1)[0] and v2_dir.endswith(flag(v2_args, "--run-id"))
    assert flag(v2_args, "--run-id") != flag(v1_args, "--run-id")


def test_gpus_become_limits_processes_and_the_toleration(rendered):
    job = one(rendered["gpu-two-per-node"], "TrainJob")
    trainer = job["spec"]["trainer"]
    assert trainer["resourcesPerNode"] == {"limits": {"nvidia.com/gpu": 2}}
    assert trainer["numProcPerNode"] == 2
    assert trainer["image"].endswith("-cuda") and flag(trainer["args"], "--backend") == "nccl"
    assert "--no-cuda" not in trainer["args"]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in node_patch(job)["spec"][
        "tolerations"
    ]


def test_gpu_example_runs_four_processes_per_node_on_nccl(rendered):
    trainer = one(rendered["examples/trainjob/gpu-nccl-values.yaml"], "TrainJob")["spec"]["trainer"]
    assert (trainer["numNodes"], trainer["numProcPerNode"]) == (2, 4)
    assert trainer["resourcesPerNode"]["limits"]["nvidia.com/gpu"] == 4
    assert flag(trainer["args"], "--backend") == "nccl"


def test_the_three_storage_modes_reach_the_node_pod(rendered):
    volumes = {
        name: {v["name"]: v for v in node_patch(one(rendered[name], "TrainJob"))["spec"]["volumes"]}
        for name in ("defaults", "examples/trainjob/existing-claim-values.yaml", "host-path-kueue")
    }
    assert volumes["defaults"]["storage"] == {
        "name": "storage",
        "persistentVolumeClaim": {"claimName": "mnist-storage"},
    }
    assert volumes["examples/trainjob/existing-claim-values.yaml"]["storage"]["persistentVolumeClaim"] == {
        "claimName": "tutorial"
    }
    assert volumes["host-path-kueue"]["storage"]["persistentVolumeClaim"] == {"claimName": "mnist-storage"}
    assert one(rendered["host-path-kueue"], "PersistentVolume")["spec"]["hostPath"]["path"] == "/data/mnist"
    assert by_kind(rendered["examples/trainjob/existing-claim-values.yaml"], "PersistentVolumeClaim") == []
    assert volumes["defaults"]["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "1Gi"}
    assert {"tmp", "cache"} <= set(volumes["defaults"])
    mounts = {
        m["mountPath"]
        for m in node_patch(one(rendered["examples/trainjob/existing-claim-values.yaml"], "TrainJob"))["spec"][
            "containers"
        ][0]["volumeMounts"]
    }
    assert mounts == {"/t9k/mnt", "/tmp", "/var/cache/trainer", "/dev/shm"}


def test_without_persistence_the_node_writes_to_an_empty_dir_and_no_test_runs(rendered):
    docs = rendered["node-alone-no-persistence"]
    job = one(docs, "TrainJob")
    volumes = {v["name"]: v for v in node_patch(job)["spec"]["volumes"]}
    assert volumes["storage"] == {"name": "storage", "emptyDir": {}} and "dshm" not in volumes
    assert job["spec"]["trainer"]["numNodes"] == 1
    assert by_kind(docs, "Pod") == [] and by_kind(docs, "PersistentVolumeClaim") == []


def test_placement_identity_labels_and_annotations_reach_the_node_pod(rendered):
    docs = rendered["placement-and-identity"]
    job = one(docs, "TrainJob")
    template = node_patch(job)
    spec = template["spec"]
    assert spec["serviceAccountName"] == "mnist-reader"
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    assert spec["nodeSelector"] == {"pool": "training"}
    assert spec["tolerations"] == [{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}]
    assert "nodeAffinity" in spec["affinity"] and "podAffinity" not in spec["affinity"], "ReadWriteMany spreads"
    assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["fsGroup"] == 1000
    assert template["metadata"]["labels"] == {
        "app.kubernetes.io/name": "pytorchjob-mnist",
        "app.kubernetes.io/instance": "mnist",
        "app.kubernetes.io/component": "trainer",
        "team": "vision",
    }
    assert template["metadata"]["annotations"] == {"sidecar.istio.io/inject": "false"}
    assert job["metadata"]["annotations"] == {"example.com/owner": "vision"}
    assert job["metadata"]["labels"]["team"] == "vision"
    assert job["spec"]["trainer"]["image"].endswith("@sha256:" + "a" * 64)
    # The NetworkPolicy and TensorBoard select the node pods by the labels of the patch.
    policy = next(p for p in by_kind(docs, "NetworkPolicy") if p["metadata"]["name"] == "mnist-trainer")
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= template["metadata"]["labels"].items()


def test_a_single_node_volume_pins_the_node_pods_with_tensorboard_and_the_test(rendered):
    job = one(rendered["defaults"], "TrainJob")
    (term,) = node_patch(job)["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["labelSelector"]["matchLabels"].items() <= node_patch(job)["metadata"]["labels"].items()
    assert (
        one(rendered["defaults"], "Pod")["spec"]["affinity"]["podAffinity"]
        == node_patch(job)["spec"]["affinity"]["podAffinity"]
    )


def test_suspend_and_deadline_map_to_the_trainjobs_own_fields(rendered):
    spec = one(rendered["three-nodes-two-procs-suspended-deadline"], "TrainJob")["spec"]
    assert (spec["suspend"], spec["activeDeadlineSeconds"]) == (True, 7200)
    assert (spec["trainer"]["numNodes"], spec["trainer"]["numProcPerNode"]) == (3, 2)


def test_kueue_gets_the_queue_label_and_owns_suspend(rendered):
    job = one(rendered["host-path-kueue"], "TrainJob")
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert "suspend" not in job["spec"]


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


def test_a_wrapper_goes_before_torchrun_and_the_seed_recipe_is_spelled_out(rendered):
    trainer = one(rendered["wrapped-seed-recipe"], "TrainJob")["spec"]["trainer"]
    assert trainer["command"] == ["py-spy", "record", "-o", "/tmp/profile.svg", "--", *TORCHRUN]
    args = trainer["args"]
    assert (flag(args, "--recipe"), flag(args, "--batch-size"), flag(args, "--lr"), flag(args, "--momentum")) == (
        "seed",
        "64",
        "0.01",
        "0.5",
    )
    assert args[-2:] == ["--threads", "2"]
    assert {"name": "TORCH_HOME", "value": "/cache/torch"} in trainer["env"]


def test_the_fast_recipe_leaves_batch_lr_and_momentum_to_the_trainer(rendered):
    args = one(rendered["defaults"], "TrainJob")["spec"]["trainer"]["args"]
    assert flag(args, "--recipe") == "fast"
    assert not {"--batch-size", "--lr", "--momentum"} & set(args)


def test_the_helm_test_checks_the_trainjobs_run_and_world_size(rendered):
    docs = rendered["three-nodes-two-procs-suspended-deadline"]
    trainer = one(docs, "TrainJob")["spec"]["trainer"]
    test_args = one(docs, "Pod")["spec"]["containers"][0]["args"]
    assert test_args[0] == flag(trainer["args"], "--output-dir")
    assert test_args[3] == flag(trainer["args"], "--run-id")
    assert test_args[4] == "6", "3 nodes × 2 processes"


def test_v1_only_defaults_in_the_guard_are_values_yamls():
    """The guard ignores v1-only values at these defaults and refuses any other value: the two
    lists must agree, or a TrainJob with untouched values would be refused."""
    helpers = (WORKLOAD_CHART / "templates" / "_trainjob.tpl").read_text()
    block = helpers.split('{{- define "pytorchjob-mnist.TrainJob.unsupportedValues" -}}\n', 1)[1].split(
        "{{- end }}", 1
    )[0]
    values = yaml.safe_load((WORKLOAD_CHART / "values.yaml").read_text())
    for path, v1_only in yaml.safe_load(block)["values"].items():
        node = values
        for key in path.split("."):
            node = node[key]
        assert node == v1_only["default"], path


@pytest.fixture(scope="module")
def notes(helm, tmp_path_factory):
    chart = notes_preview_chart(WORKLOAD_CHART, tmp_path_factory.mktemp("trainjob-notes"))
    return lambda *args: render_notes(helm, chart, release="mnist", namespace="ml", extra=args)


def test_notes_give_the_v2_commands(notes):
    text = notes("--set", "jobKind=TrainJob")
    assert "Kubeflow Trainer v2.2 or later" in text
    assert "kubectl get trainjobs mnist -n ml -w" in text
    assert "-l jobset.sigs.k8s.io/jobset-name=mnist,jobset.sigs.k8s.io/replicatedjob-name=node," in text
    assert "batch.kubernetes.io/job-completion-index=0" in text
    assert 'get_job_logs("mnist")' in text and 'KubernetesBackendConfig(namespace="ml")' in text
    assert "kubectl wait trainjob/mnist -n ml --for=condition=Complete" in text
    assert "kubectl delete trainjob mnist -n ml" in text
    assert "backoffLimit" in text and "ignores" in text, "the v1-only values are said to be ignored"
    assert "pytorchjob" not in text.lower().replace("pytorchjob-mnist", "")


def test_notes_warn_that_the_trainjobs_pods_still_get_a_token(notes):
    """serviceAccount.automountToken=false reaches only the test pod and TensorBoard under a TrainJob."""
    warning = "Its pods still get a Kubernetes API token (runtime patches cannot set automountServiceAccountToken)"
    assert "set automountServiceAccountToken: false on ServiceAccount default to drop it" in notes(
        "--set", "jobKind=TrainJob"
    )
    assert "on ServiceAccount reader to drop it" in notes(
        "--set", "jobKind=TrainJob", "--set", "serviceAccount.name=reader"
    )
    assert warning not in notes("--set", "jobKind=TrainJob", "--set", "serviceAccount.automountToken=true")
    assert warning not in notes(), "a PyTorchJob's pods take the chart's automountServiceAccountToken"
