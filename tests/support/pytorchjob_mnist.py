"""What the tests of charts/pytorchjob-mnist (tests/charts/pytorchjob_mnist/) share: its job kinds, the one
matrix of value combinations every rendering check runs over (the shared cases under every kind, and
each kind's own), and helpers that pick the trainer's pods apart whatever the kind.

A new job kind gets every shared check by a Kind entry in KINDS: what its job is called, which
combinations only it renders, which values it refuses, how to validate its job and where its trainer pods are."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from kubeflow_trainer_api.models import TrainerV1alpha1TrainingRuntime, TrainerV1alpha1TrainJob

from ci.localjob.kinds import job_model
from ci.localjob.kinds.pytorchtrainingjob import RESTART_POLICIES as T9K_RESTART_POLICIES
from tests.support.crd import load_pytorchjob_crd, validate_custom_object
from tests.support.helm import by_kind, one
from tests.support.paths import WORKLOAD_CHART
from trainer.runtime import CPU_REQUEST_ENV

# The cache variables every trainer container gets, at the default scratch.cachePath.
CACHE_ENV = {
    "XDG_CACHE_HOME": "/var/cache/trainer",
    "TORCH_HOME": "/var/cache/trainer/torch",
    "TRITON_HOME": "/var/cache/trainer",
    "MPLCONFIGDIR": "/var/cache/trainer/matplotlib",
    "CUDA_CACHE_PATH": "/var/cache/trainer/nv",
}
CPU_REQUEST = {CPU_REQUEST_ENV: {"resourceFieldRef": {"resource": "requests.cpu", "divisor": "1m"}}}
# The trainer's own env beside the caches: its thread budget, and no working directory (the volume) on sys.path.
TRAINER_ENV = CPU_REQUEST | {"PYTHONSAFEPATH": "1"}
TORCHRUN = ["python", "-m", "trainer.torchrun", "--module", "trainer"]
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


# Placement, labels and annotations that every pod and the job take (two cases set them).
PLACEMENT_AND_METADATA = {
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
}

# Combinations every kind renders, unless it refuses one of their values (Kind.refuses): together with each kind's
# own cases and values files they exercise every value.
SHARED_CASES: dict[str, dict] = {
    "defaults": {},
    "one-pod-no-persistence": {"workers": 0, "persistence": {"enabled": False}},
    "three-pods-two-procs-suspended-deadline": {
        "workers": 2,
        "torchrun": {"enabled": True},
        "nprocPerNode": "2",
        "runPolicy": {"suspend": True, "activeDeadlineSeconds": 7200},
    },
    "gpu-two-per-pod-torchrun": {"gpu": 2, "torchrun": {"enabled": True}, "resources": None},  # null clears a map
    "tensorboard-digest-placement": {
        "tensorboard": {"enabled": True, "image": {"digest": "sha256:" + "b" * 64}},
        "image": {"digest": "sha256:" + "a" * 64, "pullSecrets": ["regcred"], "pullPolicy": "Always"},
        **PLACEMENT_AND_METADATA,
    },
    "placement-and-identity": {
        "tensorboard": {"enabled": True},
        "networkPolicy": {"enabled": True},
        "image": {"digest": "sha256:" + "a" * 64, "pullSecrets": ["regcred"]},
        "serviceAccount": {"name": "mnist-reader"},
        **PLACEMENT_AND_METADATA,
        "persistence": {"create": {"accessModes": ["ReadWriteMany"]}},
    },
    "network-policies-service-account": {
        "tensorboard": {"enabled": True},
        "networkPolicy": {
            "enabled": True,
            "tensorboardFrom": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}],
        },
        "serviceAccount": {"name": "mnist-reader"},
    },
    "host-path": {"persistence": {"hostPath": {"path": "/data/mnist", "nodeName": "node-a"}}},
    "seed-recipe-own-cache-path": {
        "training": {"recipe": "seed", "batchSize": 64, "lr": 0.01, "momentum": 0.5, "extraArgs": ["--threads", "2"]},
        "scratch": {"cachePath": "/cache"},
    },
    # What T9k's PyTorchTrainingJob refuses: a wrapper before the trainer, Kueue, no /dev/shm.
    "wrapped-kueue-no-shm": {
        "wrapCommand": ["py-spy", "record", "-o", "/tmp/profile.svg", "--"],
        "kueue": {"queueName": "team-a"},
        "shm": {"enabled": False},
    },
}

PYTORCHJOB_CASES: dict[str, dict] = {
    "three-workers-exitcode-runpolicy": {
        "workers": 3,
        "restartPolicy": "ExitCode",
        "runPolicy": {
            "backoffLimit": 0,
            "cleanPodPolicy": "All",
            "ttlSecondsAfterFinished": 3600,
            "activeDeadlineSeconds": 7200,
            "suspend": True,
        },
    },
    "gang-scheduling-kueue-multikueue": {
        "schedulerName": "volcano",
        "priorityClassName": "training-high",
        "kueue": {"queueName": "team-a", "multiKueue": True},
        "runPolicy": {
            "schedulingPolicy": {
                "minAvailable": 2,
                "queue": "research",
                "priorityClass": "training-high",
                "scheduleTimeoutSeconds": 600,
            }
        },
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
        "elasticPolicy": {
            "enabled": True,
            "minReplicas": 2,
            "maxReplicas": 4,
            "maxRestarts": 5,
            "rdzvHost": "rdzv.example",
            "rdzvPort": 29400,
            "rdzvId": "mnist-run",
            "rdzvConf": {"join_timeout": 900, "read_timeout": "60"},
        },
        "training": {"dataset": "synthetic", "checkpointEvery": 0, "extraArgs": ["--threads", "2"]},
    },
    "long-name-at-limit": {"fullnameOverride": "a" * 54, "workers": 1},  # a…a-worker-0 = 63 chars
}

TRAINJOB_CASES: dict[str, dict] = {
    "own-runtime-and-script": {
        "runtimeRef": {"name": "torch-with-sidecar", "kind": "TrainingRuntime"},
        "command": ["torchrun", "/workspace/train.py"],
        "args": ["--epochs=1"],
        "env": [{"name": "NCCL_DEBUG", "value": "INFO"}],
    },
    "name-at-the-48-limit": {"fullnameOverride": "a" * 48},
    "name-at-the-47-limit-of-eleven-nodes": {"fullnameOverride": "a" * 47, "workers": 10},
    # The chart's own TrainingRuntime, with every value it lifts the TrainJob's refusal of, on MultiKueue.
    "chart-runtime-exitcode-multikueue": {
        "trainingRuntime": {"create": True},
        "restartPolicy": "ExitCode",
        "runPolicy": {"backoffLimit": 7},
        "schedulerName": "volcano",
        "priorityClassName": "training-high",
        "workingDir": "/workspace",
        "image": {"pullPolicy": "Always"},
        "serviceAccount": {"name": "mnist-reader"},
        "kueue": {"queueName": "team-a", "multiKueue": True},
    },
    "chart-runtime-defaults": {"trainingRuntime": {"create": True}, "runPolicy": {"backoffLimit": None}},
}

PYTORCHTRAININGJOB_CASES: dict[str, dict] = {
    "three-pods-exitcode-run-policy-queue": {
        "workers": 2,
        "restartPolicy": "ExitCode",
        "runPolicy": {"backoffLimit": 0, "cleanPodPolicy": "Running", "activeDeadlineSeconds": 7200},
        "t9k": {"maxRestarts": 2, "queue": "research", "priority": 80},
    },
    "never-clean-all-t9k-backoff-queue-only": {
        "restartPolicy": "Never",
        "runPolicy": {"backoffLimit": None, "cleanPodPolicy": "All"},
        "t9k": {"queue": "research"},
    },
    "own-script-in-args": {
        "args": ["/workspace/train.py", "--epochs=1"],
        "workingDir": "/workspace",
        "env": [{"name": "NCCL_DEBUG", "value": "INFO"}],
        "schedulerName": "t9k-scheduler",
        "priorityClassName": "training-high",
    },
    "name-at-the-50-limit": {"fullnameOverride": "a" * 50},  # a…a-<5 hex>-node-1 = 63 chars
}


def pytorchjob_pods(docs: list[dict]) -> dict[str, dict]:
    """The Master's and the Workers' pod templates."""
    job = one(docs, "PyTorchJob")
    return {replica: spec["template"] for replica, spec in job["spec"]["pytorchReplicaSpecs"].items()}


def trainjob_patch(job: dict) -> dict:
    """The chart's patch of the torch runtime's replicatedJob `node`: its pod template."""
    (patch,) = job["spec"]["runtimePatches"]
    (replicated_job,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    return replicated_job["template"]["spec"]["template"]


def trainjob_runtime_pod(docs: list[dict]) -> dict:
    """The pod template of the runtime's replicatedJob `node`: the chart's TrainingRuntime's
    (trainingRuntime.create), else upstream's torch-distributed's, which sets only the container's
    image (the trainer's replaces it)."""
    runtimes = by_kind(docs, "TrainingRuntime")
    if not runtimes:
        return {"spec": {"containers": [{"name": "node"}]}}
    (runtime,) = runtimes
    (replicated_job,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    return replicated_job["template"]["spec"]["template"]


def trainjob_pods(docs: list[dict]) -> dict[str, dict]:
    """The node pod as the torch runtime builds it: the runtime's pod with its container `node` given
    the trainer's image, command, args, env and resources, merged with the chart's patch."""
    job = one(docs, "TrainJob")
    trainer = job["spec"]["trainer"]
    patch = trainjob_patch(job)
    runtime_spec = dict(trainjob_runtime_pod(docs)["spec"])
    (runtime_container,) = runtime_spec.pop("containers")
    spec = dict(patch["spec"])
    (container_patch,) = spec.pop("containers")
    container = {
        **runtime_container,
        "image": trainer["image"],
        **{key: trainer[key] for key in ("command", "args", "env") if key in trainer},
        "resources": trainer.get("resourcesPerNode", {}),
        **container_patch,
    }
    return {"node": {"metadata": patch["metadata"], "spec": {**runtime_spec, **spec, "containers": [container]}}}


def pytorchtrainingjob_pods(docs: list[dict]) -> dict[str, dict]:
    """Each replica spec's pod template, by its type (the chart's one is `node`)."""
    job = one(docs, "PyTorchTrainingJob")
    return {spec["type"]: spec["template"] for spec in job["spec"]["replicaSpecs"]}


def assert_valid_pytorchjob(job: dict, helm) -> None:
    """Against the training-operator chart's CRD."""
    validate_custom_object(load_pytorchjob_crd(helm), job)


def assert_valid_trainjob(job: dict, helm) -> None:
    """Through upstream's own generated models (kubeflow-trainer-api), whose from_dict keeps only the
    fields the API has: a misspelt or misplaced key (a container `resources` in a patch, say) vanishes."""
    assert TrainerV1alpha1TrainJob.from_dict(job).to_dict() == job, "fields were lost in the round trip"


def assert_valid_training_runtime(runtime: dict) -> None:
    """The chart's TrainingRuntime through the same models, with the same round trip."""
    assert TrainerV1alpha1TrainingRuntime.from_dict(runtime).to_dict() == runtime, "fields were lost in the round trip"


# The fields of a PyTorchTrainingJob that T9k's API reference documents, by path (shared/reference/t9k.md):
# T9k publishes no schema, so these facts are all a rendered job can be checked against.
T9K_FIELDS = {
    "": {"apiVersion", "kind", "metadata", "spec"},
    "spec": {"replicaSpecs", "torchrunConfig", "elastic", "runPolicy", "runMode", "scheduler", "tensorboardSpec"},
    "spec.replicaSpecs[]": {"type", "replicas", "restartPolicy", "template", "scalingWeight"},
    "spec.torchrunConfig": {"enabled", "maxRestarts", "procPerNode", "rdzvBackend", "extraOptions"},
    "spec.runPolicy": {"backoffLimit", "activeDeadlineSeconds", "cleanUpPolicy"},
    "spec.runMode": {"debug", "pause"},
    "spec.runMode.pause": {"enabled", "resumeSpecs"},
    "spec.scheduler": {"t9kScheduler"},
    "spec.scheduler.t9kScheduler": {"queue", "priority"},
}
T9K_CLEAN_UP_POLICIES = {"None", "All", "Unfinished"}


def assert_valid_pytorchtrainingjob(job: dict, helm) -> None:
    """Against the facts of T9k's API reference (T9K_FIELDS and the values each takes), and read by the
    local runner, which models T9k's controller (ci/localjob/kinds/pytorchtrainingjob.py). The pod
    templates are Kubernetes' and validated as such with every kind's."""
    spec = job["spec"]
    run_mode, scheduler = spec.get("runMode", {}), spec.get("scheduler", {})
    objects = [
        ("", job),
        ("spec", spec),
        ("spec.torchrunConfig", spec["torchrunConfig"]),
        ("spec.runPolicy", spec["runPolicy"]),
        ("spec.runMode", run_mode),
        ("spec.runMode.pause", run_mode.get("pause", {})),
        ("spec.scheduler", scheduler),
        ("spec.scheduler.t9kScheduler", scheduler.get("t9kScheduler", {})),
        *(("spec.replicaSpecs[]", replica) for replica in spec["replicaSpecs"]),
    ]
    for path, fields in objects:
        assert set(fields) <= T9K_FIELDS[path], f"{path}: {sorted(set(fields) - T9K_FIELDS[path])} are not T9k's"
    assert (job["apiVersion"], job["kind"]) == ("batch.tensorstack.dev/v1beta1", "PyTorchTrainingJob")
    config = spec["torchrunConfig"]
    assert config["enabled"] is True and isinstance(config["maxRestarts"], int)
    assert isinstance(config["procPerNode"], str), "procPerNode is a string"
    for replica in spec["replicaSpecs"]:
        assert replica["type"] and isinstance(replica["replicas"], int) and replica["replicas"] >= 1
        assert replica["restartPolicy"] in T9K_RESTART_POLICIES, "a plain string, one of T9k's"
    run_policy = spec["runPolicy"]
    assert run_policy["cleanUpPolicy"] in T9K_CLEAN_UP_POLICIES
    assert all(isinstance(run_policy.get(f, 0), int) for f in ("backoffLimit", "activeDeadlineSeconds"))
    if scheduler:
        assert scheduler["t9kScheduler"]["queue"], "a queue is required when spec.scheduler is set"
        assert 0 <= scheduler["t9kScheduler"].get("priority", 0) <= 100
    if run_mode:
        assert run_mode["pause"]["enabled"] is True, "the chart renders runMode only to pause the job"
    assert job_model(job).pods(), "the local runner reads it"


@dataclass(frozen=True)
class Kind:
    """A value of jobKind, and what the shared checks need to know of the job it renders."""

    name: str
    api_version: str
    # Combinations only this kind renders, beside SHARED_CASES (its values files are found by their jobKind).
    cases: dict[str, dict]
    # The trainer's pod templates as the pods will run, by role, from the rendered documents.
    trainer_pods: Callable[[list[dict]], dict[str, dict]]
    # Raises unless the job is one its API accepts: assert_valid(job, helm).
    assert_valid: Callable[[dict, object], None]
    # The trainer container's name.
    container: str
    # The kinds of custom objects it renders beside the job (validated by the kind's own tests).
    other_custom_kinds: tuple[str, ...] = ()
    # Whether the trainer pods take serviceAccount.automountToken, from the rendered documents (a
    # TrainJob's only on the chart's own TrainingRuntime: a runtime patch cannot set it).
    sets_automount_token: Callable[[list[dict]], bool] = lambda docs: True
    # The values the kind refuses at anything but their default (its validate and unsupportedValues hooks):
    # the shared checks that set one run for the other kinds, and test_<kind>_guards.py checks the refusal.
    refuses: frozenset[str] = frozenset()
    # What custom `args` start with to run the trainer (module or script), before the trainer's flags.
    args_prefix: tuple[str, ...] = ()

    def values(self, values: dict) -> dict:
        """`values` under this kind."""
        return {"jobKind": self.name, **values}

    def refused_in(self, values: dict) -> list[str]:
        """The values the kind refuses that `values` set."""
        return sorted(path for path in self.refuses if _sets(values, path))

    def takes(self, values: dict) -> bool:
        return not self.refused_in(values)


def _sets(values: dict, path: str) -> bool:
    """Whether the nested `values` hold the dotted `path`."""
    for key in path.split("."):
        if not isinstance(values, dict) or key not in values:
            return False
        values = values[key]
    return True


PYTORCHJOB = Kind(
    "PyTorchJob", "kubeflow.org/v1", PYTORCHJOB_CASES, pytorchjob_pods, assert_valid_pytorchjob, "pytorch"
)
# Values each of two kinds refuses.
NO_GANG_SCHEDULING = frozenset(
    f"runPolicy.schedulingPolicy.{field}"
    for field in ("minAvailable", "queue", "priorityClass", "scheduleTimeoutSeconds")
)
TRAINJOB = Kind(
    "TrainJob",
    "trainer.kubeflow.org/v1alpha1",
    TRAINJOB_CASES,
    trainjob_pods,
    assert_valid_trainjob,
    "node",
    other_custom_kinds=("TrainingRuntime",),
    sets_automount_token=lambda docs: bool(by_kind(docs, "TrainingRuntime")),
    refuses=NO_GANG_SCHEDULING
    | {
        "elasticPolicy.enabled",
        "restartPolicy",
        "runPolicy.backoffLimit",
        "runPolicy.cleanPodPolicy",
        "runPolicy.ttlSecondsAfterFinished",
        "schedulerName",
        "priorityClassName",
        "workingDir",
    },
)
PYTORCHTRAININGJOB = Kind(
    "PyTorchTrainingJob",
    "batch.tensorstack.dev/v1beta1",
    PYTORCHTRAININGJOB_CASES,
    pytorchtrainingjob_pods,
    assert_valid_pytorchtrainingjob,
    "pytorch",
    refuses=NO_GANG_SCHEDULING
    | {
        "command",
        "wrapCommand",
        "shm.enabled",
        "elasticPolicy.enabled",
        "runPolicy.ttlSecondsAfterFinished",
        "kueue.queueName",
        "kueue.multiKueue",
    },
    args_prefix=("-m", "trainer"),
)
KINDS = (PYTORCHJOB, TRAINJOB, PYTORCHTRAININGJOB)
# What the chart's own TrainingRuntime (trainingRuntime.create) carries for a TrainJob, which a runtime patch
# cannot: values TRAINJOB refuses without it, by path.
TRAINJOB_RUNTIME_VALUES = [
    ("restartPolicy", "ExitCode"),
    ("restartPolicy", "Never"),
    ("runPolicy.backoffLimit", 10),
    ("runPolicy.backoffLimit", None),
    ("schedulerName", "volcano"),
    ("priorityClassName", "high"),
    ("workingDir", "/workspace"),
]


def kinds_taking(*paths: str) -> list:
    """The kinds that take these values, as parameters of a test that sets them (it replaces the `kind` fixture)."""
    return [pytest.param(kind, id=kind.name) for kind in KINDS if not kind.refuses & set(paths)]


def values_files(kind: Kind) -> list[Path]:
    """The ci/ and examples/ values files that render this kind (by their jobKind, else values.yaml's)."""
    default = yaml.safe_load((WORKLOAD_CHART / "values.yaml").read_text())["jobKind"]
    files = sorted((WORKLOAD_CHART / "ci").glob("*-values.yaml")) + sorted(
        (WORKLOAD_CHART / "examples").rglob("*-values.yaml")
    )
    return [f for f in files if (yaml.safe_load(f.read_text()) or {}).get("jobKind", default) == kind.name]


def case_files_in(tmp_dir: Path) -> dict[str, dict[str, tuple[Path, ...]]]:
    """Each kind's matrix: its values files (by their path in the chart) and the cases, as files in `tmp_dir`."""
    matrix = {}
    for kind in KINDS:
        cases = {str(f.relative_to(WORKLOAD_CHART)): (f,) for f in values_files(kind)}
        for name, values in (SHARED_CASES | kind.cases).items():
            if name not in kind.cases and not kind.takes(values):  # its own cases are written for it
                continue
            path = tmp_dir / f"{kind.name}-{name}.yaml"
            path.write_text(yaml.safe_dump(kind.values(values)))
            cases[name] = (path,)
        matrix[kind.name] = cases
    return matrix


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


def kind_of(docs: list[dict]) -> Kind:
    """The kind of the one job among `docs`."""
    (kind,) = [kind for kind in KINDS if by_kind(docs, kind.name)]
    return kind


def job_of(docs: list[dict]) -> dict:
    return one(docs, kind_of(docs).name)


def trainer_pods(docs: list[dict]) -> dict[str, dict]:
    """The trainer's pod templates, as the pods will run, by role (the PyTorchJob's replicas, the TrainJob's node)."""
    return kind_of(docs).trainer_pods(docs)


def trainer_container(docs: list[dict], role: str | None = None) -> dict:
    """The trainer container of `role`'s pods (by default the first role's: the Master, a TrainJob's node)."""
    pods = trainer_pods(docs)
    spec = pods[role or next(iter(pods))]["spec"]
    return next(c for c in spec["containers"] if c["name"] == kind_of(docs).container)


def env_of(docs: list[dict], role: str | None = None) -> dict[str, str | dict]:
    """Each variable's value, or its valueFrom."""
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in trainer_container(docs, role)["env"]}


def flag(args: list[str], name: str) -> str:
    assert name in args, f"{name} missing from {args}"
    return args[args.index(name) + 1]


def volume_pods(docs: list[dict]) -> dict[str, dict]:
    """Pod templates of every pod that mounts the chart's volume, by role: the trainer's, TensorBoard's, the test's."""
    pods = dict(trainer_pods(docs))
    pods.update({f"Deployment/{d['metadata']['name']}": d["spec"]["template"] for d in by_kind(docs, "Deployment")})
    pods.update({f"Pod/{d['metadata']['name']}": d for d in by_kind(docs, "Pod")})
    return pods


def all_pod_specs(docs: list[dict]) -> list[dict]:
    """The trainer's pod specs, TensorBoard's and the helm test pod's."""
    return [template["spec"] for template in volume_pods(docs).values()]


def same_node_terms(template: dict) -> list[dict]:
    required = template["spec"].get("affinity", {}).get("podAffinity", {})
    return [
        t
        for t in required.get("requiredDuringSchedulingIgnoredDuringExecution", [])
        if t["topologyKey"] == "kubernetes.io/hostname"
    ]


def selects(term: dict, labels: dict) -> bool:
    selector = term["labelSelector"]
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for expression in selector.get("matchExpressions", []):
        assert expression["operator"] == "In", expression
        if labels.get(expression["key"]) not in expression["values"]:
            return False
    return True


HELPERS_PREVIEW = "templates/helpers-preview.yaml"


def helpers_preview_chart(directory: Path) -> Path:
    """A copy of the chart in `directory` whose one template prints, as JSON, what its helpers make of
    the values: the trainer's flags and the job kind's unsupported values. The job templates, which run
    the `fail` guards first, are left out, so values a guard refuses show what the chart would have run."""
    copy = directory / WORKLOAD_CHART.name
    shutil.copytree(WORKLOAD_CHART, copy)
    templates = copy / "templates"
    for path in list(templates.iterdir()):
        if not path.name.startswith("_"):
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    (copy / HELPERS_PREVIEW).write_text(
        'trainerArgs: {{ include "pytorchjob-mnist.trainerArgs" . | fromYamlArray | toJson }}\n'
        'unsupportedValues: {{ include "pytorchjob-mnist.kindHook" (list "unsupportedValues" .) | fromYaml | toJson }}\n'
    )
    return copy


def render_helpers(helm, preview_chart: Path, values: dict, tmp_path: Path) -> dict:
    """What the helpers of helpers_preview_chart make of `values`, whether a guard refuses them or not:
    {"trainerArgs": [...], "unsupportedValues": {...}}."""
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    (preview,) = helm.render(preview_chart, values_files=(path,), extra=("--show-only", HELPERS_PREVIEW))
    return preview
