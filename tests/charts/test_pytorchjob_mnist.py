"""charts/pytorchjob-mnist rendered by real Helm 3 and Helm 4: a matrix of value combinations
checked against Kubernetes schemas, the PyTorchJob CRD and the operator webhook's rules, then
each feature, each `fail` guard and each schema refusal on its own."""
from __future__ import annotations

import re
import shutil
from pathlib import Path, PurePosixPath

import pytest
import yaml

from tests.support.crd import load_pytorchjob_crd, validate_custom_object
from tests.support.dockerfile import runtime_env
from tests.support.helm import (SCHEMA_REFUSAL, by_kind, notes_preview_chart, one, render_notes,
                                set_chart_field, umbrella_chart)
from tests.support.k8s import KUBERNETES_VERSIONS, validate_builtin
from tests.support.paths import WORKLOAD_CHART
from tests.support.pss import restricted_violations
from trainer.runtime import CPU_REQUEST_ENV

VALUES_FILES = sorted((WORKLOAD_CHART / "ci").glob("*-values.yaml")) + sorted((WORKLOAD_CHART / "examples").glob("*-values.yaml"))
# The cache variables every trainer container gets, at the default scratch.cachePath.
CACHE_ENV = {"XDG_CACHE_HOME": "/var/cache/trainer", "TORCH_HOME": "/var/cache/trainer/torch",
             "TRITON_HOME": "/var/cache/trainer", "MPLCONFIGDIR": "/var/cache/trainer/matplotlib",
             "CUDA_CACHE_PATH": "/var/cache/trainer/nv"}
CPU_REQUEST = {CPU_REQUEST_ENV: {"resourceFieldRef": {"resource": "requests.cpu", "divisor": "1m"}}}
# The trainer's own env beside the caches: its thread budget, and no working directory (the volume) on sys.path.
TRAINER_ENV = CPU_REQUEST | {"PYTHONSAFEPATH": "1"}
DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")

# Inline combinations on top of the ci/ and examples/ files: together they exercise every value.
INLINE_CASES: dict[str, dict] = {
    "defaults": {},
    "three-workers-exitcode-runpolicy": {
        "workers": 3,
        "restartPolicy": "ExitCode",
        "runPolicy": {"backoffLimit": 0, "cleanPodPolicy": "All", "ttlSecondsAfterFinished": 3600,
                      "activeDeadlineSeconds": 7200, "suspend": True},
    },
    "master-only-no-persistence": {"workers": 0, "persistence": {"enabled": False}, "shm": {"enabled": False}},
    "gang-scheduling-kueue": {
        "schedulerName": "volcano",
        "priorityClassName": "training-high",
        "kueue": {"queueName": "team-a"},
        "runPolicy": {"schedulingPolicy": {"minAvailable": 2, "queue": "research", "priorityClass": "training-high",
                                           "scheduleTimeoutSeconds": 600}},
    },
    "tensorboard-digest-placement": {
        "tensorboard": {"enabled": True, "image": {"digest": "sha256:" + "b" * 64}},
        "image": {"digest": "sha256:" + "a" * 64, "pullSecrets": ["regcred"], "pullPolicy": "Always"},
        "nodeSelector": {"pool": "training"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}]}}},
        "labels": {"team": "vision"},
        "annotations": {"example.com/owner": "vision"},
        "podAnnotations": {"sidecar.istio.io/inject": "false"},
    },
    "network-policies-service-account": {
        "tensorboard": {"enabled": True},
        "networkPolicy": {"enabled": True, "tensorboardFrom": [
            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]},
        "serviceAccount": {"name": "mnist-reader"},
    },
    "bring-your-own-script": {
        "command": ["python", "/workspace/train.py"],
        "args": ["--epochs=1"],
        "workingDir": "/workspace",
        "env": [{"name": "NCCL_DEBUG", "value": "INFO"}],
        "persistence": {"create": {"storageClass": "nfs", "size": "50Gi", "accessModes": ["ReadWriteMany"]}},
    },
    "elastic-custom-rendezvous": {
        "workers": 3,
        "torchrun": {"enabled": True},
        "elasticPolicy": {"enabled": True, "minReplicas": 2, "maxReplicas": 4, "maxRestarts": 5,
                          "rdzvHost": "rdzv.example", "rdzvPort": 29400, "rdzvId": "mnist-run",
                          "rdzvConf": {"join_timeout": 900, "read_timeout": "60"}},
        "training": {"dataset": "synthetic", "checkpointEvery": 0, "extraArgs": ["--threads", "2"]},
    },
    "gpu-two-per-pod-torchrun": {"gpu": 2, "torchrun": {"enabled": True}, "resources": None},  # null clears a map
    "long-name-at-limit": {"fullnameOverride": "a" * 54, "workers": 1},  # a…a-worker-0 = 63 chars
}


def _case_files(tmp_dir: Path) -> dict[str, tuple[Path, ...]]:
    cases = {f"{f.parent.name}/{f.name}": (f,) for f in VALUES_FILES}
    for name, values in INLINE_CASES.items():
        path = tmp_dir / f"{name}.yaml"
        path.write_text(yaml.safe_dump(values))
        cases[name] = (path,)
    return cases


@pytest.fixture(scope="module")
def case_files(tmp_path_factory) -> dict[str, tuple[Path, ...]]:
    return _case_files(tmp_path_factory.mktemp("pytorchjob-mnist-values"))


@pytest.fixture(scope="module")
def rendered(helm, case_files) -> dict[str, list[dict]]:
    return {name: helm.render(WORKLOAD_CHART, values_files=files) for name, files in case_files.items()}


@pytest.fixture(scope="module")
def default_docs(rendered) -> list[dict]:
    return rendered["defaults"]


def render_with(helm, values: dict, tmp_path: Path, **kwargs) -> list[dict]:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    return helm.render(WORKLOAD_CHART, values_files=(path,), **kwargs)


def template_error(helm, values: dict, tmp_path: Path, **kwargs) -> str:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    result = helm.template(WORKLOAD_CHART, values_files=(path,), **kwargs)
    assert result.returncode != 0, f"expected {values} to be refused, but it rendered"
    return result.stderr


def replica_specs(docs: list[dict]) -> dict:
    return one(docs, "PyTorchJob")["spec"]["pytorchReplicaSpecs"]


def trainer_container(docs: list[dict], replica: str = "Master") -> dict:
    containers = replica_specs(docs)[replica]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == "pytorch")


def env_of(docs: list[dict], replica: str) -> dict[str, str | dict]:
    """Each variable's value, or its valueFrom."""
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in trainer_container(docs, replica)["env"]}


def flag(args: list[str], name: str) -> str:
    assert name in args, f"{name} missing from {args}"
    return args[args.index(name) + 1]


# --- lint and the matrix ---------------------------------------------------------------------

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
            for version in KUBERNETES_VERSIONS:
                try:
                    validate_builtin(doc, version)
                except Exception as error:  # kubernetes-validate raises several types
                    pytest.fail(f"{name}: {doc['kind']}/{doc['metadata']['name']} invalid for {version}: {error}")


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


def all_pod_specs(docs: list[dict]) -> list[dict]:
    """The Master's and Workers', TensorBoard's and the helm test pod's."""
    pod_specs = [spec["template"]["spec"] for spec in replica_specs(docs).values()]
    pod_specs += [d["spec"] for d in by_kind(docs, "Pod")]
    return pod_specs + [d["spec"]["template"]["spec"] for d in by_kind(docs, "Deployment")]


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


# --- defaults ----------------------------------------------------------------------------------

def test_defaults_are_the_seeds_cpu_gloo_one_plus_one(default_docs):
    job = one(default_docs, "PyTorchJob")
    assert job["metadata"]["name"] == "mnist"
    specs = job["spec"]["pytorchReplicaSpecs"]
    assert specs["Worker"]["replicas"] == 1
    assert specs["Master"]["restartPolicy"] == specs["Worker"]["restartPolicy"] == "OnFailure"
    assert job["spec"]["nprocPerNode"] == "1"
    assert job["spec"]["runPolicy"] == {"cleanPodPolicy": "None", "suspend": False, "backoffLimit": 3}
    assert "elasticPolicy" not in job["spec"]
    master = trainer_container(default_docs)
    assert "command" not in master, "the image entrypoint (python -m trainer) runs by default"
    assert master["image"] == "ghcr.io/pytorchjob-mnist/trainer:0.1.0-cpu"
    args = master["args"]
    assert flag(args, "--backend") == "gloo"
    assert flag(args, "--dataset") == "fashion-mnist"
    assert "--no-cuda" in args and "--fallback-dataset" not in args
    assert "nvidia.com/gpu" not in master["resources"].get("limits", {})
    assert master == trainer_container(default_docs, "Worker"), "Master and Worker run the same container"


def test_training_values_become_trainer_flags(helm, tmp_path):
    docs = render_with(helm, {"training": {
        "dataset": "fashion-mnist", "fallbackDataset": "mnist,digits", "epochs": 3, "batchSize": 128, "testBatchSize": 500,
        "lr": 0.001, "momentum": 0.9, "seed": 7, "logInterval": 5, "checkpointEvery": 50,
        "keepCheckpoints": 2, "extraArgs": ["--threads", "2"]}}, tmp_path)
    args = trainer_container(docs)["args"]
    expected = {"--dataset": "fashion-mnist", "--fallback-dataset": "mnist,digits", "--epochs": "3", "--batch-size": "128",
                "--test-batch-size": "500", "--lr": "0.001", "--momentum": "0.9", "--seed": "7",
                "--log-interval": "5", "--checkpoint-every": "50", "--keep-checkpoints": "2", "--threads": "2"}
    assert {name: flag(args, name) for name in expected} == expected
    assert args[-2:] == ["--threads", "2"], "extra args come last so they can override"


def test_large_whole_numbers_from_a_values_file_stay_integers(helm, tmp_path):
    """A values file's numbers reach templates as floats, which toString writes as 2.0240101e+07."""
    args = trainer_container(render_with(helm, {"training": {"seed": 20240101, "checkpointEvery": 1000000}},
                                         tmp_path))["args"]
    assert (flag(args, "--seed"), flag(args, "--checkpoint-every")) == ("20240101", "1000000")


def test_decimals_from_set_are_accepted(helm):
    """`--set` hands decimals to the chart as strings; they must still become trainer flags."""
    docs = helm.render(WORKLOAD_CHART, set_values={"training.lr": "0.05", "training.momentum": "0.9", "tests.minAccuracy": "0.7"})
    args = trainer_container(docs)["args"]
    assert (flag(args, "--lr"), flag(args, "--momentum")) == ("0.05", "0.9")
    assert one(docs, "Pod")["spec"]["containers"][0]["args"][1] == "0.7"


@pytest.mark.parametrize("lr", ["1.0", "2.0", "1.0e-2", "0.001", "1e-3", "10"])
def test_positive_lr_strings_from_set_are_accepted(helm, lr):
    assert flag(trainer_container(helm.render(WORKLOAD_CHART, set_values={"training.lr": lr}))["args"], "--lr") == lr


def test_checkpoint_every_zero_still_checkpoints_each_epoch(helm, tmp_path):
    args = trainer_container(render_with(helm, {"training": {"checkpointEvery": 0}}, tmp_path))["args"]
    assert flag(args, "--checkpoint-every") == "0"
    assert flag(args, "--checkpoint-dir") == "/mnt/pytorchjob-mnist/runs/default/mnist/checkpoints/" + flag(args, "--run-id")


def test_command_and_args_replace_the_generated_ones(rendered):
    container = trainer_container(rendered["bring-your-own-script"])
    assert container["command"] == ["python", "/workspace/train.py"]
    assert container["args"] == ["--epochs=1"]
    assert container["workingDir"] == "/workspace"
    names = [e["name"] for e in container["env"]]
    assert names.index("NCCL_DEBUG") > names.index("XDG_CACHE_HOME"), "user env comes after the chart's"


def test_a_command_without_args_gets_no_trainer_flags(helm):
    """A user's own script would die on the trainer's flags ("unrecognized arguments")."""
    container = trainer_container(helm.render(WORKLOAD_CHART, set_values={"command": ["python", "/app/train.py"]}))
    assert container["command"] == ["python", "/app/train.py"]
    assert "args" not in container


@pytest.mark.parametrize("torchrun, trainer", [(False, ["python", "-m", "trainer"]),
                                               (True, ["python", "-m", "trainer.torchrun", "--module", "trainer"])])
def test_a_wrapper_runs_before_the_trainer_which_keeps_its_flags(helm, torchrun, trainer):
    wrapper = ["py-spy", "record", "-o", "/tmp/profile.svg", "--"]
    plain = trainer_container(helm.render(WORKLOAD_CHART, set_values={"torchrun.enabled": torchrun}))
    wrapped = trainer_container(helm.render(WORKLOAD_CHART, set_values={"wrapCommand": wrapper, "torchrun.enabled": torchrun}))
    assert wrapped["command"] == wrapper + trainer
    assert wrapped["args"] == plain["args"] and wrapped["workingDir"] == plain["workingDir"] == "/mnt/pytorchjob-mnist"
    assert wrapped["env"] == plain["env"], "PYTHONSAFEPATH too: python -m still runs from the volume"


def test_the_trainers_relative_paths_land_on_the_volume_not_the_read_only_image(helm):
    """Seed-style `args` (--save-model, the default --data-dir data and --dir logs) write relative to the
    working directory; the image's is on the read-only root filesystem. A custom command keeps the image's."""
    seed_style = trainer_container(helm.render(WORKLOAD_CHART, set_values={"args": ["--epochs=1", "--save-model"]}))
    assert seed_style["workingDir"] == "/mnt/pytorchjob-mnist"
    assert {"name": "storage", "mountPath": "/mnt/pytorchjob-mnist"} in seed_style["volumeMounts"]
    assert seed_style["securityContext"]["readOnlyRootFilesystem"] is True
    assert {"name": "PYTHONSAFEPATH", "value": "1"} in seed_style["env"], "the volume must not shadow packages"
    own_script = trainer_container(helm.render(WORKLOAD_CHART, set_values={"command": ["python", "train.py"]}))
    assert "workingDir" not in own_script
    assert "PYTHONSAFEPATH" not in {e["name"] for e in own_script["env"]}, "train.py may import its neighbours"


def test_user_env_replaces_the_charts_entry_of_the_same_name(helm):
    """env is a keyed list: a duplicate name would make the API server refuse the job."""
    docs = helm.render(WORKLOAD_CHART, set_values={"env[0].name": "TORCH_HOME", "env[0].value": "/models/torch",
                                          "env[1].name": "NCCL_DEBUG", "env[1].value": "INFO"})
    for replica in ("Master", "Worker"):
        env = trainer_container(docs, replica)["env"]
        names = [e["name"] for e in env]
        assert len(names) == len(set(names)), names
        assert names == [name for name in CACHE_ENV | TRAINER_ENV if name != "TORCH_HOME"] + ["TORCH_HOME", "NCCL_DEBUG"]
        assert env_of(docs, replica)["TORCH_HOME"] == "/models/torch"


# --- storage: per-release directories and the three ways of the seeds ---------------------------

def run_dirs(docs: list[dict]) -> dict[str, str]:
    args = trainer_container(docs)["args"]
    return {name: flag(args, name) for name in ("--data-dir", "--output-dir", "--log-dir", "--checkpoint-dir")}


def test_two_releases_never_share_model_checkpoint_or_log_dirs(helm):
    first = run_dirs(helm.render(WORKLOAD_CHART, release="mnist-a", namespace="team"))
    second = run_dirs(helm.render(WORKLOAD_CHART, release="mnist-b", namespace="team"))
    other_namespace = run_dirs(helm.render(WORKLOAD_CHART, release="mnist-a", namespace="other"))
    for name in ("--output-dir", "--log-dir", "--checkpoint-dir"):
        assert len({first[name], second[name], other_namespace[name]}) == 3, name
    assert first["--output-dir"] == "/mnt/pytorchjob-mnist/runs/team/mnist-a/model"
    assert first["--data-dir"] == second["--data-dir"] == "/mnt/pytorchjob-mnist/datasets", "datasets are shared"


def test_default_creates_a_kept_claim_mounted_in_every_replica(default_docs):
    pvc = one(default_docs, "PersistentVolumeClaim")
    assert pvc["metadata"]["name"] == "mnist-storage"
    # Argo CD reads Helm's keep as Delete=false only; Prune=false keeps the claim out of pruning too,
    # and IgnoreExtraneous keeps the unpruned claim from holding the app OutOfSync.
    assert pvc["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep",
                                              "argocd.argoproj.io/sync-options": "Prune=false",
                                              "argocd.argoproj.io/compare-options": "IgnoreExtraneous"}
    assert pvc["spec"]["accessModes"] == ["ReadWriteOnce"] and "storageClassName" not in pvc["spec"]
    assert pvc["spec"]["resources"]["requests"]["storage"] == "5Gi"
    assert not by_kind(default_docs, "PersistentVolume")
    for spec in replica_specs(default_docs).values():
        volumes = {v["name"]: v for v in spec["template"]["spec"]["volumes"]}
        assert volumes["storage"]["persistentVolumeClaim"] == {"claimName": "mnist-storage"}


def test_new_claim_takes_class_size_and_access_modes(rendered):
    pvc = one(rendered["bring-your-own-script"], "PersistentVolumeClaim")
    assert pvc["spec"]["storageClassName"] == "nfs"
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    assert pvc["spec"]["resources"]["requests"]["storage"] == "50Gi"


def test_existing_claim_is_used_and_nothing_is_created(rendered):
    docs = rendered["examples/existing-claim-values.yaml"]
    assert not by_kind(docs, "PersistentVolumeClaim") and not by_kind(docs, "PersistentVolume")
    volumes = {v["name"]: v for v in replica_specs(docs)["Master"]["template"]["spec"]["volumes"]}
    assert volumes["storage"]["persistentVolumeClaim"]["claimName"] == "tutorial"
    mounts = {m["name"]: m["mountPath"] for m in trainer_container(docs)["volumeMounts"]}
    assert mounts["storage"] == "/t9k/mnt"
    assert run_dirs(docs)["--output-dir"] == "/t9k/mnt/runs/default/mnist/model"


def test_host_path_volume_is_reserved_for_its_claim(helm, tmp_path):
    docs = render_with(helm, {"persistence": {"hostPath": {"path": "/srv/mnist", "nodeName": "node-1"}}},
                       tmp_path, namespace="kubeflow")
    pv = one(docs, "PersistentVolume")
    pvc = one(docs, "PersistentVolumeClaim")
    assert pv["metadata"]["name"] == "kubeflow-mnist-storage" and "namespace" not in pv["metadata"]
    assert pv["spec"]["hostPath"] == {"path": "/srv/mnist", "type": "DirectoryOrCreate"}
    assert pv["spec"]["claimRef"] == {"namespace": "kubeflow", "name": "mnist-storage"}
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert pvc["spec"]["volumeName"] == pv["metadata"]["name"]
    assert pvc["spec"]["storageClassName"] == pv["spec"]["storageClassName"] == "manual"
    terms = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][0]["values"] == ["node-1"]


def test_persistence_disabled_uses_an_empty_dir_and_skips_the_test_pod(rendered):
    docs = rendered["master-only-no-persistence"]
    assert not by_kind(docs, "PersistentVolumeClaim") and not by_kind(docs, "Pod")
    volumes = {v["name"]: v for v in replica_specs(docs)["Master"]["template"]["spec"]["volumes"]}
    assert volumes["storage"] == {"name": "storage", "emptyDir": {}}
    assert "dshm" not in volumes, "shm.enabled=false drops the /dev/shm volume"
    assert set(replica_specs(docs)) == {"Master"}, "workers: 0 runs the Master alone"


def test_keep_false_lets_helm_delete_the_claim(helm, tmp_path):
    pvc = one(render_with(helm, {"persistence": {"keep": False}}, tmp_path), "PersistentVolumeClaim")
    assert "annotations" not in pvc["metadata"]


def volume_pods(docs: list[dict]) -> dict[str, dict]:
    """Pod templates of every pod that mounts the chart's volume, by role."""
    pods = {replica: spec["template"] for replica, spec in replica_specs(docs).items()}
    pods.update({f"Deployment/{d['metadata']['name']}": d["spec"]["template"] for d in by_kind(docs, "Deployment")})
    pods.update({f"Pod/{d['metadata']['name']}": d for d in by_kind(docs, "Pod")})
    return pods


def same_node_terms(template: dict) -> list[dict]:
    required = template["spec"].get("affinity", {}).get("podAffinity", {})
    return [t for t in required.get("requiredDuringSchedulingIgnoredDuringExecution", [])
            if t["topologyKey"] == "kubernetes.io/hostname"]


def selects(term: dict, labels: dict) -> bool:
    selector = term["labelSelector"]
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for expression in selector.get("matchExpressions", []):
        assert expression["operator"] == "In", expression
        if labels.get(expression["key"]) not in expression["values"]:
            return False
    return True


def test_read_write_once_volume_keeps_all_its_pods_on_one_node(helm, tmp_path):
    """A ReadWriteOnce volume attaches to one node: every pod that mounts it (Master, Worker,
    TensorBoard, test) needs a required podAffinity that selects all the others."""
    docs = render_with(helm, {"workers": 2, "tensorboard": {"enabled": True}}, tmp_path)
    pods = volume_pods(docs)
    assert set(pods) == {"Master", "Worker", "Deployment/mnist-tensorboard", "Pod/mnist-check-run"}
    for name, template in pods.items():
        assert any(v.get("persistentVolumeClaim", {}).get("claimName") == "mnist-storage"
                   for v in template["spec"]["volumes"]), f"{name} does not mount the claim"
        terms = same_node_terms(template)
        assert len(terms) == 1, f"{name}: {template['spec'].get('affinity')}"
        for other, other_template in pods.items():
            assert selects(terms[0], other_template["metadata"]["labels"]), f"{name} is not kept with {other}"
    other_release = volume_pods(helm.render(WORKLOAD_CHART, release="other"))["Master"]["metadata"]["labels"]
    assert not selects(same_node_terms(pods["Master"])[0], other_release), "another release's pods are not selected"


@pytest.mark.parametrize("values, single_node", [
    ({}, True),
    ({"persistence": {"create": {"accessModes": ["ReadWriteMany"]}}}, False),
    ({"persistence": {"create": {"accessModes": ["ReadWriteMany"]}, "singleNode": True}}, True),
    ({"persistence": {"existingClaim": "data"}}, True),
    ({"persistence": {"existingClaim": "data", "singleNode": False}}, False),
    ({"persistence": {"hostPath": {"path": "/srv/mnist"}}}, True),
    ({"persistence": {"enabled": False}}, False),
])
def test_pods_are_kept_on_one_node_only_for_a_single_node_volume(helm, tmp_path, values, single_node):
    docs = render_with(helm, values, tmp_path)
    for name, template in volume_pods(docs).items():
        assert bool(same_node_terms(template)) is single_node, f"{name} with {values}"
        if not single_node:
            assert "affinity" not in template["spec"], name


def test_same_node_affinity_is_merged_into_the_users_affinity(helm, tmp_path):
    user_term = {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": "topology.kubernetes.io/zone"}
    node_affinity = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}]}}
    docs = render_with(helm, {"tensorboard": {"enabled": True}, "affinity": {
        "nodeAffinity": node_affinity,
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [user_term]}}}, tmp_path)
    for name, template in volume_pods(docs).items():
        affinity = template["spec"]["affinity"]
        assert affinity["nodeAffinity"] == node_affinity, name
        required = affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert required[0] == user_term and len(required) == 2, name
        assert required[1]["topologyKey"] == "kubernetes.io/hostname", name


# --- pod: shm, scratch dirs, GPUs, placement ---------------------------------------------------------

def test_shm_tmp_and_cache_are_writable_empty_dirs(default_docs):
    spec = replica_specs(default_docs)["Master"]["template"]["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "1Gi"}
    assert volumes["tmp"]["emptyDir"] == {"sizeLimit": "1Gi"}
    mounts = {m["name"]: m["mountPath"] for m in spec["containers"][0]["volumeMounts"]}
    assert mounts == {"storage": "/mnt/pytorchjob-mnist", "tmp": "/tmp", "cache": "/var/cache/trainer",
                      "dshm": "/dev/shm"}
    assert env_of(default_docs, "Master") == CACHE_ENV | TRAINER_ENV
    assert spec["securityContext"]["fsGroup"] == 1000, "fsGroup makes the claim writable"


def test_the_chart_sets_every_cache_variable_the_image_does(helm):
    """The image points its caches at /var/cache/trainer (read-only unless mounted); the chart must
    move each one along with scratch.cachePath, or it stays on the read-only root filesystem."""
    image_cache = {name: value for name, value in runtime_env().items() if value.startswith("/var/cache/trainer")}
    assert image_cache == CACHE_ENV
    moved = env_of(helm.render(WORKLOAD_CHART, set_values={"scratch.cachePath": "/scratch"}), "Worker")
    assert {name: moved[name] for name in CACHE_ENV} == {
        name: value.replace("/var/cache/trainer", "/scratch") for name, value in CACHE_ENV.items()}


def test_gpu_goes_to_limits_only_with_toleration_nccl_and_cuda_image(rendered):
    docs = rendered["examples/gpu-nccl-values.yaml"]
    for replica in ("Master", "Worker"):
        container = trainer_container(docs, replica)
        assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
        assert "nvidia.com/gpu" not in container["resources"]["requests"]
        assert flag(container["args"], "--backend") == "nccl"
        assert "--no-cuda" not in container["args"]
        assert container["image"].endswith(":0.1.0-cuda")
        tolerations = replica_specs(docs)[replica]["template"]["spec"]["tolerations"]
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in tolerations
    assert one(docs, "PyTorchJob")["spec"]["nprocPerNode"] == "1"


def test_gpu_limit_is_added_even_without_other_resources(rendered):
    docs = rendered["gpu-two-per-pod-torchrun"]
    assert trainer_container(docs)["resources"] == {"limits": {"nvidia.com/gpu": 2}}
    assert one(docs, "PyTorchJob")["spec"]["nprocPerNode"] == "2", "nprocPerNode follows the GPU count"


def test_user_tolerations_are_kept_next_to_the_gpu_one_on_every_volume_pod(helm, tmp_path):
    """TensorBoard and the test pod share the trainers' tolerations, so on a single-node volume
    they can join the trainers on a tainted GPU node."""
    user = {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}
    docs = render_with(helm, {"gpu": 1, "tolerations": [user], "tensorboard": {"enabled": True},
                              "persistence": {"create": {"accessModes": ["ReadWriteMany"]}}}, tmp_path)
    pods = volume_pods(docs)
    assert len(pods) == 4
    for name, template in pods.items():
        assert template["spec"]["tolerations"] == [
            user, {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}], name


def test_tensorboard_is_refused_beside_gpus_on_a_single_node_volume(helm, tmp_path):
    """TensorBoard starts with the job; scheduled first, it would pin the GPU pods to its node."""
    error = template_error(helm, {"gpu": 1, "tensorboard": {"enabled": True}}, tmp_path)
    assert "tensorboard.enabled with gpu > 0 on a single-node volume" in error
    assert "ReadWriteMany" in error
    host_path = {"gpu": 1, "tensorboard": {"enabled": True}, "persistence": {"hostPath": {"path": "/srv/mnist"}}}
    error = template_error(helm, host_path, tmp_path)
    assert "on a hostPath volume" in error and "Set persistence.hostPath.nodeName to a GPU node" in error
    host_path["persistence"]["hostPath"]["nodeName"] = "gpu-node-1"
    pinned = render_with(helm, host_path, tmp_path)  # let through: the volume places every pod on that node
    (term,) = one(pinned, "PersistentVolume")["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert term["matchExpressions"][0]["values"] == ["gpu-node-1"]


def test_every_pod_can_run_as_a_given_service_account_with_its_token(helm, tmp_path):
    values = {"serviceAccount": {"name": "mnist-reader", "automountToken": True},
              "tensorboard": {"enabled": True}}
    specs = all_pod_specs(render_with(helm, values, tmp_path))
    assert len(specs) == 4, "Master, Worker, TensorBoard, test pod"
    for spec in specs:
        assert spec["serviceAccountName"] == "mnist-reader" and spec["automountServiceAccountToken"] is True


def test_network_policies_let_only_the_jobs_pods_reach_each_other(rendered):
    assert not by_kind(rendered["defaults"], "NetworkPolicy"), "opt-in: the cluster's plugin must enforce them"
    docs = rendered["network-policies-service-account"]
    policies = {p["metadata"]["name"]: p["spec"] for p in by_kind(docs, "NetworkPolicy")}
    trainers = policies["mnist-trainer"]
    pod_labels = {r: spec["template"]["metadata"]["labels"] for r, spec in replica_specs(docs).items()}
    other_pods = [one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"],
                  one(docs, "Pod")["metadata"]["labels"]]
    trainer_term = {"labelSelector": trainers["podSelector"]}
    assert all(selects(trainer_term, labels) for labels in pod_labels.values())
    assert not any(selects(trainer_term, labels) for labels in other_pods), "TensorBoard, the test pod"
    ((rule,),) = [trainers["ingress"]]
    assert "ports" not in rule, "gloo and NCCL connect on ephemeral ports"
    assert [peer["podSelector"] for peer in rule["from"]] == [trainers["podSelector"]]
    tensorboard = policies["mnist-tensorboard"]
    assert selects({"labelSelector": tensorboard["podSelector"]}, other_pods[0])
    (rule,) = tensorboard["ingress"]
    assert rule["from"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    assert rule["ports"] == [{"port": "http", "protocol": "TCP"}]
    assert tensorboard["policyTypes"] == trainers["policyTypes"] == ["Ingress"], "egress stays open"


def test_tensorboard_without_allowed_peers_accepts_no_connection(helm, tmp_path):
    docs = render_with(helm, {"tensorboard": {"enabled": True}, "networkPolicy": {"enabled": True}}, tmp_path)
    (tensorboard,) = [p for p in by_kind(docs, "NetworkPolicy") if p["metadata"]["name"] == "mnist-tensorboard"]
    assert tensorboard["spec"]["ingress"] == []


def test_a_new_release_alone_leaves_a_pinned_pytorchjob_unchanged(helm, tmp_path):
    """Argo CD replaces a changed job (Replace=true): a release that bumps only the chart's versions
    must not restart a running job whose image is pinned, through its helm.sh/chart or
    app.kubernetes.io/version label. Other objects keep the labels."""
    bumped = tmp_path / WORKLOAD_CHART.name
    shutil.copytree(WORKLOAD_CHART, bumped)
    set_chart_field(bumped, "version", "99.0.0")
    set_chart_field(bumped, "appVersion", "99.0.0")
    pinned = {"set_values": {"image.tag": "2026-08-01-cpu"}}
    before, after = helm.render(WORKLOAD_CHART, **pinned), helm.render(bumped, **pinned)
    assert one(before, "PyTorchJob") == one(after, "PyTorchJob")
    labels = one(after, "PersistentVolumeClaim")["metadata"]["labels"]
    assert (labels["helm.sh/chart"], labels["app.kubernetes.io/version"]) == ("pytorchjob-mnist-99.0.0", "99.0.0")


def test_placement_labels_annotations_and_pull_settings(rendered):
    docs = rendered["tensorboard-digest-placement"]
    job = one(docs, "PyTorchJob")
    assert job["metadata"]["labels"]["team"] == "vision"
    assert job["metadata"]["annotations"] == {"example.com/owner": "vision"}
    template = replica_specs(docs)["Worker"]["template"]
    assert template["metadata"]["labels"]["team"] == "vision"
    assert template["metadata"]["annotations"] == {"sidecar.istio.io/inject": "false"}
    spec = template["spec"]
    assert spec["nodeSelector"] == {"pool": "training"}
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    assert "nodeAffinity" in spec["affinity"]
    container = trainer_container(docs, "Worker")
    assert container["image"] == "ghcr.io/pytorchjob-mnist/trainer:0.1.0-cpu@sha256:" + "a" * 64
    assert container["imagePullPolicy"] == "Always"


def test_scheduling_gang_and_kueue(rendered):
    job = one(rendered["gang-scheduling-kueue"], "PyTorchJob")
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert job["spec"]["runPolicy"]["schedulingPolicy"] == {
        "minAvailable": 2, "queue": "research", "priorityClass": "training-high", "scheduleTimeoutSeconds": 600}
    spec = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert spec["schedulerName"] == "volcano" and spec["priorityClassName"] == "training-high"


def test_run_policy_and_restart_policy(rendered):
    job = one(rendered["three-workers-exitcode-runpolicy"], "PyTorchJob")
    assert job["spec"]["runPolicy"] == {"cleanPodPolicy": "All", "suspend": True, "backoffLimit": 0,
                                        "ttlSecondsAfterFinished": 3600, "activeDeadlineSeconds": 7200}
    assert {s["restartPolicy"] for s in job["spec"]["pytorchReplicaSpecs"].values()} == {"ExitCode"}
    assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 3


# --- torchrun and elastic ------------------------------------------------------------------------

def test_torchrun_runs_the_trainer_module_with_processes_per_node(rendered):
    docs = rendered["ci/torchrun-cpu-values.yaml"]
    job = one(docs, "PyTorchJob")
    assert job["spec"]["nprocPerNode"] == "2"
    assert "elasticPolicy" not in job["spec"]
    container = trainer_container(docs)
    assert container["command"] == ["python", "-m", "trainer.torchrun", "--module", "trainer"]
    assert flag(container["args"], "--backend") == "gloo"


def test_t9k_torchrun_example_has_four_processes_and_three_restarts(rendered):
    job = one(rendered["examples/torchrun-values.yaml"], "PyTorchJob")
    assert job["spec"]["nprocPerNode"] == "4"
    assert job["spec"]["elasticPolicy"] == {"minReplicas": 2, "maxReplicas": 2, "maxRestarts": 3,
                                            "rdzvBackend": "c10d"}
    limits = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": 4}


def test_elastic_restarts_get_a_fresh_rendezvous_store_each_round(rendered):
    """torchrun's shared store keeps the last round's gloo/NCCL addresses (pytorch/pytorch#135712);
    only elastic jobs restart the worker group, so only they need the variable."""
    for replica in ("Master", "Worker"):
        assert env_of(rendered["ci/elastic-cpu-values.yaml"], replica)["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"
    assert "TORCH_DISABLE_SHARE_RDZV_TCP_STORE" not in env_of(rendered["ci/torchrun-cpu-values.yaml"], "Master")


def test_user_env_can_turn_the_shared_rendezvous_store_back_on(helm, tmp_path):
    docs = render_with(helm, {"torchrun": {"enabled": True}, "elasticPolicy": {"enabled": True},
                              "env": [{"name": "TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "value": "0"}]}, tmp_path)
    names = [e["name"] for e in trainer_container(docs)["env"]]
    assert names.count("TORCH_DISABLE_SHARE_RDZV_TCP_STORE") == 1, names
    assert env_of(docs, "Master")["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "0"


def test_elastic_policy_renders_every_rendezvous_setting(rendered):
    job = one(rendered["elastic-custom-rendezvous"], "PyTorchJob")
    assert job["spec"]["elasticPolicy"] == {
        "minReplicas": 2, "maxReplicas": 4, "maxRestarts": 5, "rdzvBackend": "c10d", "rdzvHost": "rdzv.example",
        "rdzvPort": 29400, "rdzvId": "mnist-run",
        "rdzvConf": [{"key": "join_timeout", "value": "900"}, {"key": "read_timeout", "value": "60"}]}


# --- extras: TensorBoard, helm test --------------------------------------------------------------

def test_tensorboard_reads_the_releases_runs_read_only(rendered):
    docs = rendered["tensorboard-digest-placement"]
    deployment = one(docs, "Deployment")
    service = one(docs, "Service")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    log_dir = PurePosixPath(flag(trainer_container(docs)["args"], "--log-dir"))
    assert f"--logdir={log_dir.parent}" in container["command"], "this run beside the release's others"
    assert {"name": "storage", "mountPath": "/mnt/pytorchjob-mnist", "readOnly": True} in container["volumeMounts"]
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert service["spec"]["selector"] == selector
    assert selector["app.kubernetes.io/component"] == "tensorboard"
    assert service["spec"]["ports"][0]["port"] == 6006
    trainer_labels = replica_specs(docs)["Master"]["template"]["metadata"]["labels"]
    assert not selector.items() <= trainer_labels.items(), "the Service must not select trainer pods"
    assert container["image"] == "tensorflow/tensorflow:2.20.0@sha256:" + "b" * 64
    probes = [container[probe]["httpGet"] for probe in ("startupProbe", "livenessProbe", "readinessProbe")]
    assert probes == [{"path": "/", "port": "http"}] * 3
    assert container["startupProbe"]["failureThreshold"] * container["startupProbe"]["periodSeconds"] >= 300


def test_pod_annotations_reach_every_pod_and_leave_the_test_hook_intact(helm, tmp_path):
    """An annotation such as Istio's inject=false must reach the test pod too, or it never completes."""
    annotations = {"sidecar.istio.io/inject": "false", "helm.sh/hook": "post-install"}
    docs = render_with(helm, {"tensorboard": {"enabled": True}, "podAnnotations": annotations}, tmp_path)
    templates = [spec["template"] for spec in replica_specs(docs).values()]
    templates += [one(docs, "Deployment")["spec"]["template"], one(docs, "Pod")]
    assert len(templates) == 4
    for template in templates:
        assert template["metadata"]["annotations"]["sidecar.istio.io/inject"] == "false"
    test_annotations = one(docs, "Pod")["metadata"]["annotations"]
    assert test_annotations["helm.sh/hook"] == "test"
    assert test_annotations["helm.sh/hook-delete-policy"] == "before-hook-creation,hook-succeeded"


def test_helm_test_pod_checks_this_runs_model_dir(default_docs):
    pod = one(default_docs, "Pod")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    container = pod["spec"]["containers"][0]
    assert container["command"][:2] == ["python", "-c"]
    assert container["command"][2] == (WORKLOAD_CHART / "files" / "check_run.py").read_text()
    trainer_args = trainer_container(default_docs)["args"]
    assert container["args"] == [flag(trainer_args, "--output-dir"), "0.5", "1800", flag(trainer_args, "--run-id"), "2"]
    assert container["image"] == trainer_container(default_docs)["image"]
    volume = pod["spec"]["volumes"][0]
    assert volume["persistentVolumeClaim"] == {"claimName": "mnist-storage", "readOnly": True}


def test_run_id_changes_with_what_shapes_the_run_and_only_then(helm, tmp_path, default_docs):
    def run_id(values):
        return flag(trainer_container(render_with(helm, values, tmp_path))["args"], "--run-id")

    default = flag(trainer_container(default_docs)["args"], "--run-id")
    assert re.fullmatch(r"[0-9a-f]{16}", default)
    assert run_id({"tensorboard": {"enabled": True}, "tests": {"minAccuracy": 0.9}}) == default
    assert run_id({"training": {"lr": "0.01"}}) == default, "--set passes decimals as strings"
    changed = [run_id(values) for values in ({"training": {"epochs": 2}}, {"workers": 2},
                                             {"image": {"tag": "0.2.0-cpu"}}, {"torchrun": {"enabled": True}})]
    assert default not in changed and len(set(changed)) == len(changed)


def test_each_run_keeps_its_checkpoints_and_logs_apart(default_docs, rendered):
    """Restarted pods resume their run; other values start their own instead of meeting checkpoints
    they cannot resume (the trainer refuses those)."""
    run_dir = "/mnt/pytorchjob-mnist/runs/default/mnist"
    for docs in (default_docs, rendered["tensorboard-digest-placement"]):
        args = trainer_container(docs)["args"]
        run_id = flag(args, "--run-id")
        assert flag(args, "--checkpoint-dir") == f"{run_dir}/checkpoints/{run_id}"
        assert flag(args, "--log-dir") == f"{run_dir}/tensorboard/{run_id}"
        assert flag(args, "--output-dir") == f"{run_dir}/model", "the newest finished run's model, at a fixed path"


@pytest.mark.parametrize("values, world_size", [
    ({"workers": 2, "torchrun": {"enabled": True}, "nprocPerNode": "2"}, "6"),
    ({"workers": 0}, "1"),
    ({"gpu": 1, "torchrun": {"enabled": True}, "nprocPerNode": "auto"}, ""),
    ({"torchrun": {"enabled": True}, "elasticPolicy": {"enabled": True}}, ""),
])
def test_helm_test_checks_the_world_size_when_the_values_fix_it(helm, tmp_path, values, world_size):
    assert one(render_with(helm, values, tmp_path), "Pod")["spec"]["containers"][0]["args"][4] == world_size


@pytest.mark.parametrize("custom", [{"args": ["--epochs=1"]}, {"command": ["python", "/app/train.py"]}])
def test_helm_test_accepts_any_finished_run_of_a_custom_command_or_args(helm, tmp_path, custom):
    docs = render_with(helm, custom, tmp_path)
    assert one(docs, "Pod")["spec"]["containers"][0]["args"][3:] == ["", ""]


def test_helm_test_pod_image_can_be_replaced(helm, tmp_path):
    docs = render_with(helm, {"tests": {"image": {"repository": "registry.local/checker", "tag": "1"}}}, tmp_path)
    assert one(docs, "Pod")["spec"]["containers"][0]["image"] == "registry.local/checker:1"


def test_argocd_example_skips_dry_run_and_helm_tests(rendered):
    docs = rendered["examples/argocd-values.yaml"]
    options = one(docs, "PyTorchJob")["metadata"]["annotations"]["argocd.argoproj.io/sync-options"]
    assert "SkipDryRunOnMissingResource=true" in options
    assert not by_kind(docs, "Pod")


@pytest.fixture(scope="module")
def notes_chart(tmp_path_factory) -> Path:
    return notes_preview_chart(WORKLOAD_CHART, tmp_path_factory.mktemp("notes"))


@pytest.fixture
def notes(helm, notes_chart):
    """NOTES of `helm install mnist -n ml` with these extra flags."""
    return lambda *args: render_notes(helm, notes_chart, release="mnist", namespace="ml", extra=args)


def test_notes_tell_the_user_what_to_run(helm, notes):
    text = notes("--set", "tensorboard.enabled=true")
    for command in ("kubectl get pytorchjobs mnist -n ml", "kubectl logs -f mnist-master-0 -n ml",
                    "kubectl wait pytorchjob/mnist -n ml --for=condition=Succeeded",
                    "helm test mnist -n ml --timeout 1860s",
                    "kubectl logs mnist-check-run -n ml",
                    "kubectl port-forward -n ml svc/mnist-tensorboard 6006:6006",
                    "kubectl delete pvc mnist-storage -n ml"):
        assert command in text, command
    assert "kubectl delete pv " not in text, "a new claim's volume is the provisioner's to delete"
    run_id = flag(trainer_container(helm.render(WORKLOAD_CHART, release="mnist", namespace="ml"))["args"], "--run-id")
    assert f"this run's checkpoints in /mnt/pytorchjob-mnist/runs/ml/mnist/checkpoints/{run_id}." in text
    assert "all 2 pods run on one node" in text and "ReadWriteMany" in text


def test_notes_with_custom_args_say_where_the_test_looks(notes):
    """args replace --output-dir and --checkpoint-dir: the chart's run directory holds nothing then."""
    text = notes("--set", "args={--epochs=1,--save-model}")
    assert "The model and metrics.json land on claim" not in text
    assert "outputs go where they say (relative paths from\n   /mnt/pytorchjob-mnist)" in text
    assert "Your args replace the chart's trainer flags" in text
    assert "(the trainer's\n   --output-dir=/mnt/pytorchjob-mnist/runs/ml/mnist/model)" in text
    assert "--output-dir" not in notes("--set", "args={--epochs=1}", "--set", "tests.enabled=false")
    own_script = notes("--set", "command={python,/app/train.py}")
    assert "Your command and args replace the chart's trainer flags" in own_script
    assert "The model and metrics.json land on claim" not in own_script


def test_notes_of_an_elastic_job_follow_every_pod_for_rank_0(notes):
    text = notes("-f", str(WORKLOAD_CHART / "ci" / "elastic-cpu-values.yaml"))
    assert "kubectl logs -f -n ml -l training.kubeflow.org/job-name=mnist --prefix" in text
    assert "kubectl logs -f mnist-master-0" not in text


def test_notes_warn_when_pods_share_a_node_without_a_cpu_request_or_limit(notes):
    """The trainer sizes its threads to the CPU limit, else the request (the default has one)."""
    warning = "They have no CPU request or limit, so each trainer sizes its threads to the whole node"
    assert warning not in notes()
    assert warning in notes("--set", "resources.requests.cpu=null")
    assert warning not in notes("--set", "resources.requests.cpu=null", "--set", "resources.limits.cpu=2")
    assert warning not in notes("--set", "resources.requests.cpu=null", "--set", "persistence.singleNode=false")


def test_notes_helm_test_timeout_outlasts_the_test_pods_wait(notes):
    """helm test gives up after 5 minutes by default; the test pod waits tests.timeoutSeconds."""
    text = notes("--set", "tests.timeoutSeconds=600")
    # No --logs: Helm 3 deletes a passed test's pod before reading its logs, then fails (helm/helm#9098).
    assert "helm test mnist -n ml --timeout 660s" in text


def test_notes_name_the_kept_host_path_volume_to_delete(notes):
    """A kept hostPath PersistentVolume turns Released; a reinstall's claim stays Pending until it is deleted."""
    text = notes("--set", "persistence.hostPath.path=/srv/mnist")
    assert "kubectl delete pvc mnist-storage -n ml" in text
    assert "kubectl delete pv ml-mnist-storage" in text


def test_notes_do_not_offer_to_delete_an_existing_claim_or_spread_a_lone_master(notes):
    text = notes("--set", "persistence.existingClaim=tutorial", "--set", "workers=0")
    assert "kubectl delete pvc" not in text, "the chart did not create the user's claim"
    assert "run on one node" not in text


def test_notes_warn_that_exit_code_recreations_are_unbounded_without_a_deadline(notes):
    """The operator v1 does not count ExitCode's pod recreations against backoffLimit (kubeflow/trainer#2045)."""
    warning = "Set runPolicy.activeDeadlineSeconds to bound the job"
    assert warning in notes("--set", "restartPolicy=ExitCode")
    assert warning not in notes("--set", "restartPolicy=ExitCode", "--set", "runPolicy.activeDeadlineSeconds=86400")
    assert warning not in notes()


def test_notes_warn_when_backoff_limit_lets_the_job_survive_no_failure(notes):
    """The operator adds up every pod's restarts, and one failure restarts every pod (each loses its peer)."""
    warning = "runPolicy.backoffLimit 3 lets it survive no failure: the operator adds up the restarts of\nall 3 pods"
    assert warning in notes("--set", "workers=2")
    assert "set runPolicy.backoffLimit to 3 × N + 1 (e.g. 10 for three)" in notes("--set", "workers=2")
    assert "survive no failure" not in notes(), "1 Master + 1 Worker: 3 survives one failure (2 restarts)"
    assert "survive no failure" not in notes("--set", "workers=2", "--set", "runPolicy.backoffLimit=0")
    assert "survive no failure" not in notes("--set", "workers=2", "--set", "restartPolicy=ExitCode")


# --- fail guards and schema refusals: each message names the value and the fix ----------------------

GUARDS = {
    "nccl-without-gpu": ({"backend": "nccl"}, "backend: nccl needs GPUs but gpu is 0"),
    "cpu-image-with-gpu": ({"gpu": 1, "image": {"variant": "cpu"}}, "set image.variant to cuda"),
    "two-gpus-without-torchrun": ({"gpu": 2}, "set torchrun.enabled=true"),
    "nproc-without-torchrun": ({"nprocPerNode": "4"}, "nprocPerNode: 4 without torchrun breaks WORLD_SIZE"),
    "torchrun-count-without-torchrun": ({"nprocPerNode": "auto"},
                                        "nprocPerNode: auto is one of torchrun's counts, but without torchrun"),
    # gloo too: the trainer puts each process of a GPU pod on the GPU its LOCAL_RANK numbers.
    "more-processes-than-gpus-on-gloo": ({"gpu": 1, "backend": "gloo", "torchrun": {"enabled": True}, "nprocPerNode": "2"},
                                        "nprocPerNode: 2 is more than gpu: 1, but every process of a GPU replica takes a GPU"),
    "a-process-per-cpu-on-gpus": ({"gpu": 2, "torchrun": {"enabled": True}, "nprocPerNode": "cpu"},
                                  "nprocPerNode: cpu starts a process per CPU core, but with gpu: 2"),
    # torchrun's own counts: "gpu" needs CUDA, "auto" and "cpu" count the node's cores, not the pod's.
    "a-process-per-gpu-without-gpus": ({"torchrun": {"enabled": True}, "nprocPerNode": "gpu"},
                                       'nprocPerNode: gpu counts the pod\'s GPUs, but gpu is 0'),
    "a-process-per-node-core": ({"torchrun": {"enabled": True}, "nprocPerNode": "auto"},
                                "nprocPerNode: auto with gpu: 0 starts a process per CPU core of the node"),
    "elastic-without-torchrun": ({"elasticPolicy": {"enabled": True}}, "elasticPolicy.enabled needs torchrun"),
    "elastic-without-workers": ({"workers": 0, "torchrun": {"enabled": True}, "elasticPolicy": {"enabled": True}},
                                "elasticPolicy.enabled needs at least one Worker"),
    "elastic-min-above-max": ({"torchrun": {"enabled": True},
                               "elasticPolicy": {"enabled": True, "minReplicas": 3, "maxReplicas": 2}},
                              "elasticPolicy.minReplicas (3) is greater than elasticPolicy.maxReplicas (2)"),
    "etcd-without-host": ({"torchrun": {"enabled": True}, "elasticPolicy": {"enabled": True, "rdzvBackend": "etcd"}},
                          "elasticPolicy.rdzvBackend etcd needs an etcd server, but rdzvHost is empty"),
    "more-processes-than-gpus": ({"gpu": 2, "torchrun": {"enabled": True}, "nprocPerNode": "4"},
                                 "set nprocPerNode to at most 2"),
    "claim-and-host-path": ({"persistence": {"existingClaim": "data", "hostPath": {"path": "/srv"}}},
                            "persistence.existingClaim and persistence.hostPath.path are both set"),
    "tensorboard-without-volume": ({"tensorboard": {"enabled": True}, "persistence": {"enabled": False}},
                                   "tensorboard.enabled needs persistence.enabled=true"),
    "name-not-dns-1035": ({"fullnameOverride": "MNIST_run"}, "is not a DNS-1035 label"),
    "tensorboard-service-name-too-long": (
        {"fullnameOverride": "a" * 54, "tensorboard": {"enabled": True}},
        'its TensorBoard Service name "' + "a" * 54 + '-tensorboard" has 66 characters, the limit is 63; '
        "set fullnameOverride to a name of at most 51 characters"),
    "elastic-min-above-pods": ({"torchrun": {"enabled": True}, "elasticPolicy": {"enabled": True, "minReplicas": 3}},
                               "elasticPolicy.minReplicas (3) is more than the job's 2 pods (1 Master + workers: 1)"),
    "elastic-max-below-pods": ({"workers": 3, "torchrun": {"enabled": True},
                                "elasticPolicy": {"enabled": True, "minReplicas": 2, "maxReplicas": 3}},
                               "elasticPolicy.maxReplicas (3) is less than the job's 4 pods (1 Master + workers: 3)"),
    "gpu-in-resource-limits": ({"resources": {"limits": {"nvidia.com/gpu": 1}}},
                               "resources.limits has nvidia.com/gpu; GPUs come from the gpu value"),
    "gpu-in-resource-requests": ({"gpu": 1, "resources": {"requests": {"nvidia.com/gpu": 1}}},
                                 "remove nvidia.com/gpu from resources and set gpu to the GPUs per replica"),
    "suspend-with-kueue": ({"kueue": {"queueName": "team-a"}, "runPolicy": {"suspend": True}},
                           'runPolicy.suspend=true with kueue.queueName "team-a": Kueue owns runPolicy.suspend'),
    "mount-path-on-tmp": ({"persistence": {"mountPath": "/tmp"}},
                          'persistence.mountPath "/tmp" is also the mount path of the chart\'s /tmp emptyDir, and a '
                          "container cannot mount two volumes at one path; set persistence.mountPath to another directory"),
    "mount-path-on-shm": ({"persistence": {"mountPath": "/dev/shm/"}},
                          'persistence.mountPath "/dev/shm" is also the mount path of the /dev/shm emptyDir'),
    "cache-on-volume": ({"scratch": {"cachePath": "/mnt/pytorchjob-mnist"}},
                        'scratch.cachePath "/mnt/pytorchjob-mnist" is also the mount path of persistence.mountPath'),
    "chart-owned-label": ({"labels": {"app.kubernetes.io/component": "ml"}},
                          'labels: "app.kubernetes.io/component" is one of the chart\'s own labels'),
    "queue-label-twice": ({"kueue": {"queueName": "q"}, "labels": {"kueue.x-k8s.io/queue-name": "other"}},
                          'labels: "kueue.x-k8s.io/queue-name" belongs in kueue.queueName'),
    "queue-label-instead-of-kueue-value": ({"labels": {"kueue.x-k8s.io/queue-name": "team-a"}},
                                           "move the queue name there"),
    # The API server refuses such pods: the job would stay Created, the reason only in its events.
    "memory-request-above-limit": ({"resources": {"requests": {"memory": "8Gi"}}},
                                   "resources.requests.memory (8Gi) is more than resources.limits.memory (4Gi), which "
                                   "the API server refuses in every pod; lower the request or raise the limit"),
    "cpu-request-above-limit": ({"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1500m"}}},
                                "resources.requests.cpu (2) is more than resources.limits.cpu (1500m)"),
    "tensorboard-request-above-limit": ({"tensorboard": {"resources": {"requests": {"memory": "2Gi"}}}},
                                        "tensorboard.resources.requests.memory (2Gi) is more than "
                                        "tensorboard.resources.limits.memory (1Gi)"),
    "shm-fills-the-memory-limit": ({"resources": {"requests": {"memory": "512Mi"}, "limits": {"memory": "1Gi"}}},
                                   "shm.sizeLimit (1Gi) is not below resources.limits.memory (1Gi)"),
    # The README's iteration advice tags builds `<sha>-cpu`; on a GPU node that image cannot use the GPU.
    "cpu-tag-with-gpu": ({"gpu": 1, "image": {"tag": "3f2a1bc-cpu"}},
                         "gpu: 1 needs a CUDA image but image.tag 3f2a1bc-cpu is a CPU build"),
    "claim-without-persistence": ({"persistence": {"enabled": False, "existingClaim": "data"}},
                                  "persistence.existingClaim is set but persistence.enabled=false"),
    "host-path-without-persistence": ({"persistence": {"enabled": False, "hostPath": {"path": "/srv"}}},
                                      "or clear persistence.hostPath.path"),
    "gang-larger-than-the-job": ({"runPolicy": {"schedulingPolicy": {"minAvailable": 5}}},
                                 "runPolicy.schedulingPolicy.minAvailable (5) is more than the job's 2 pods"),
    "command-and-wrapper": ({"command": ["python", "/app/train.py"], "wrapCommand": ["py-spy", "record", "--"]},
                            "command and wrapCommand are both set"),
    "name-too-long": ({"fullnameOverride": "a" * 56, "workers": 10},
                      'its pod and Service name "' + "a" * 56 + '-worker-9" has 65 characters, the limit is 63; '
                      "set fullnameOverride to a name of at most 54 characters"),
}


@pytest.mark.parametrize("case", sorted(GUARDS))
def test_fail_guard_message(helm, tmp_path, case):
    values, message = GUARDS[case]
    assert message in template_error(helm, values, tmp_path)


def test_release_name_is_checked_like_fullname_override(helm):
    """Helm allows 53-character release names with dots; the job name must be stricter."""
    dotted = helm.template(WORKLOAD_CHART, release="mnist.v1")
    assert dotted.returncode != 0 and '"mnist.v1"' in dotted.stderr and "DNS-1035" in dotted.stderr
    longest = helm.template(WORKLOAD_CHART, release="x" * 53, set_values={"workers": 101})
    assert longest.returncode != 0
    assert "set fullnameOverride to a name of at most 52 characters" in longest.stderr


SCHEMA_REFUSALS = {
    "unknown-top-level-key": ({"wokers": 2}, ["wokers"]),
    "unknown-nested-key": ({"training": {"epoch": 2}}, ["epoch"]),
    "unknown-security-field": ({"securityContext": {"runAsNonroot": True}}, ["runAsNonroot"]),
    "bad-restart-policy": ({"restartPolicy": "Always"}, ["restartPolicy"]),
    "bad-backend": ({"backend": "mpi"}, ["backend"]),
    "bad-variant": ({"image": {"variant": "rocm"}}, ["variant"]),
    "negative-workers": ({"workers": -1}, ["workers"]),
    "bad-nproc": ({"nprocPerNode": "four"}, ["nprocPerNode"]),
    "bad-dataset": ({"training": {"dataset": "cifar10"}}, ["dataset"]),
    "bad-fallback-in-chain": ({"training": {"fallbackDataset": "mnist,cifar10"}}, ["fallbackDataset"]),
    "fallback-chain-with-spaces": ({"training": {"fallbackDataset": "mnist, digits"}}, ["fallbackDataset"]),
    "relative-mount-path": ({"persistence": {"mountPath": "data"}}, ["mountPath"]),
    "bad-digest": ({"image": {"digest": "latest"}}, ["digest"]),
    "non-numeric-lr": ({"training": {"lr": "fast"}}, ["lr"]),
    "zero-lr-string": ({"training": {"lr": "0.0"}}, ["lr"]),
    "momentum-one": ({"training": {"momentum": 1}}, ["momentum"]),
    "momentum-one-string": ({"training": {"momentum": "1.0"}}, ["momentum"]),
    "momentum-above-one": ({"training": {"momentum": 1.5}}, ["momentum"]),
    "single-node-not-bool": ({"persistence": {"singleNode": "yes"}}, ["singleNode"]),
    "bad-quantity-in-resources": ({"tensorboard": {"resources": {"limits": {"memory": "lots"}}}}, ["memory"]),
    "unknown-resources-key": ({"resources": {"limit": {"cpu": 1}}}, ["limit"]),
    "bad-quantity": ({"shm": {"sizeLimit": "big"}}, ["sizeLimit"]),
    "kilo-is-lower-case": ({"shm": {"sizeLimit": "512K"}}, ["sizeLimit"]),
    "min-accuracy-above-one-string": ({"tests": {"minAccuracy": "1.5"}}, ["minAccuracy"]),
    "name-override-not-a-label-value": ({"nameOverride": "My Trainer!"}, ["nameOverride"]),
    # Negative sizes and counts pass the CRD but fail every pod the operator creates.
    "negative-quantity": ({"shm": {"sizeLimit": "-1Gi"}}, ["sizeLimit"]),
    "negative-number-quantity": ({"resources": {"requests": {"cpu": -1}}}, ["cpu"]),
    # Image references the kubelet cannot pull (InvalidImageName): a tag or digest in the wrong value.
    "tag-in-repository": ({"image": {"repository": "registry.example.com/ml/trainer:0.1.0-cpu"}}, ["repository"]),
    "digest-in-tag": ({"image": {"tag": "sha256:" + "0" * 64}}, ["tag"]),
    "upper-case-repository": ({"image": {"repository": "ghcr.io/MyOrg/trainer"}}, ["repository"]),
    "tag-in-tensorboard-repository": ({"tensorboard": {"image": {"repository": "tensorflow/tensorflow:2.16.1"}}},
                                      ["repository"]),
    # One pod cluster-wide, or no writer: the job's pods could not all use the new claim.
    "read-write-once-pod-claim": ({"persistence": {"create": {"accessModes": ["ReadWriteOncePod"]}}}, ["accessModes"]),
}


@pytest.mark.parametrize("case", sorted(SCHEMA_REFUSALS))
def test_schema_refuses_with_the_field_named(helm, tmp_path, case):
    values, fields = SCHEMA_REFUSALS[case]
    error = template_error(helm, values, tmp_path)
    assert SCHEMA_REFUSAL in error
    for field in fields:
        assert field in error, f"{field} not named in: {error}"


def test_guards_accept_what_they_do_not_refuse(helm, tmp_path):
    """The boundaries of the guards above render: the longest TensorBoard name, elastic min/max
    around the pod count, momentum just below 1, and /dev/shm as a mount path without shm."""
    accepted = [
        {"fullnameOverride": "a" * 51, "tensorboard": {"enabled": True}},
        {"workers": 2, "torchrun": {"enabled": True}, "elasticPolicy": {"enabled": True, "minReplicas": 3, "maxReplicas": 3}},
        {"workers": 2, "torchrun": {"enabled": True}, "elasticPolicy": {"enabled": True, "minReplicas": 1, "maxReplicas": 8}},
        {"training": {"momentum": 0.99}},
        {"training": {"momentum": 0}},
        {"shm": {"enabled": False}, "persistence": {"mountPath": "/dev/shm"}},
        {"persistence": {"mountPath": "/tmp/volume"}},
        {"labels": {"app.kubernetes.io/part-of": "vision"}},
        {"shm": {"sizeLimit": ".5Gi"}, "scratch": {"tmpSizeLimit": "512k"}},
        # Equal requests and limits in other units, and a limit the shm fits below.
        {"resources": {"requests": {"cpu": "1", "memory": "1536Mi"}, "limits": {"cpu": "1000m", "memory": "1.5Gi"}}},
        {"resources": {"requests": {"memory": "4e9"}, "limits": {"memory": "4G"}}, "shm": {"sizeLimit": "3999M"}},
        {"resources": {"requests": {"memory": "2Gi"}, "limits": None}, "shm": {"sizeLimit": "8Gi"}},  # no limit to fill
        {"gpu": 1, "image": {"tag": "3f2a1bc-cuda", "repository": "localhost:5000/ml/trainer"}},
        {"runPolicy": {"schedulingPolicy": {"minAvailable": 2}}},
        {"persistence": {"enabled": False}},
    ]
    for values in accepted:
        docs = render_with(helm, values, tmp_path)
        assert one(docs, "PyTorchJob"), values
    docs = render_with(helm, {"persistence": {"existingClaim": "data.v2"}, "tests": {"minAccuracy": "0.95"},
                              "training": {"extraArgs": None}}, tmp_path)
    assert one(docs, "Pod")["spec"]["containers"][0]["args"][1] == "0.95"
    assert one(docs, "Pod")["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == "data.v2"
    args = trainer_container(helm.render(WORKLOAD_CHART, set_values={"training.momentum": "0.95"}))["args"]
    assert flag(args, "--momentum") == "0.95", "decimal strings below 1 from --set still pass"


def test_renders_as_an_optional_subchart(helm, tmp_path):
    """Helm hands a subchart its `global` map and the parent's condition key; the closed schema takes both."""
    parent = umbrella_chart(WORKLOAD_CHART, tmp_path)
    docs = helm.render(parent, set_values={"pytorchjob-mnist.enabled": True, "global.imageRegistry": "mirror.local"})
    assert one(docs, "PyTorchJob")
    assert helm.render(parent, set_values={"pytorchjob-mnist.enabled": False}) == []


def test_names_that_look_like_numbers_stay_strings(helm, tmp_path):
    docs = render_with(helm, {"kueue": {"queueName": "123"}, "runPolicy": {"schedulingPolicy": {"queue": "007"}},
                              "persistence": {"hostPath": {"path": "/srv/mnist", "nodeName": "1234"}}}, tmp_path)
    job = one(docs, "PyTorchJob")
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "123"
    assert job["spec"]["runPolicy"]["schedulingPolicy"]["queue"] == "007"
    terms = one(docs, "PersistentVolume")["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][0]["values"] == ["1234"]


def test_kueue_queue_leaves_suspend_to_kueue(rendered):
    """Kueue suspends a queued job and resumes it on admission; a rendered `suspend: false` would
    be reverted by Argo CD self-heal or helm upgrade."""
    run_policy = one(rendered["gang-scheduling-kueue"], "PyTorchJob")["spec"]["runPolicy"]
    assert "suspend" not in run_policy
    assert run_policy["backoffLimit"] == 3, "the rest of runPolicy is still rendered"
    assert one(rendered["defaults"], "PyTorchJob")["spec"]["runPolicy"]["suspend"] is False
