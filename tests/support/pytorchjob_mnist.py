"""What the tests of charts/pytorchjob-mnist (tests/charts/test_pytorchjob_mnist_*.py) share: the matrix of
value combinations every rendering check runs over, and helpers that pick the trainer's pods apart."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.support.helm import by_kind, one
from tests.support.paths import WORKLOAD_CHART
from trainer.runtime import CPU_REQUEST_ENV

VALUES_FILES = sorted((WORKLOAD_CHART / "ci").glob("*-values.yaml")) + sorted(
    (WORKLOAD_CHART / "examples").glob("*-values.yaml")
)
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

# Inline combinations on top of the ci/ and examples/ files: together they exercise every value.
INLINE_CASES: dict[str, dict] = {
    "defaults": {},
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
    "master-only-no-persistence": {"workers": 0, "persistence": {"enabled": False}, "shm": {"enabled": False}},
    "gang-scheduling-kueue": {
        "schedulerName": "volcano",
        "priorityClassName": "training-high",
        "kueue": {"queueName": "team-a"},
        "runPolicy": {
            "schedulingPolicy": {
                "minAvailable": 2,
                "queue": "research",
                "priorityClass": "training-high",
                "scheduleTimeoutSeconds": 600,
            }
        },
    },
    "tensorboard-digest-placement": {
        "tensorboard": {"enabled": True, "image": {"digest": "sha256:" + "b" * 64}},
        "image": {"digest": "sha256:" + "a" * 64, "pullSecrets": ["regcred"], "pullPolicy": "Always"},
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
    },
    "network-policies-service-account": {
        "tensorboard": {"enabled": True},
        "networkPolicy": {
            "enabled": True,
            "tensorboardFrom": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}],
        },
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
    "gpu-two-per-pod-torchrun": {"gpu": 2, "torchrun": {"enabled": True}, "resources": None},  # null clears a map
    "long-name-at-limit": {"fullnameOverride": "a" * 54, "workers": 1},  # a…a-worker-0 = 63 chars
}


def case_files_in(tmp_dir: Path) -> dict[str, tuple[Path, ...]]:
    cases = {f"{f.parent.name}/{f.name}": (f,) for f in VALUES_FILES}
    for name, values in INLINE_CASES.items():
        path = tmp_dir / f"{name}.yaml"
        path.write_text(yaml.safe_dump(values))
        cases[name] = (path,)
    return cases


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


def all_pod_specs(docs: list[dict]) -> list[dict]:
    """The Master's and Workers', TensorBoard's and the helm test pod's."""
    pod_specs = [spec["template"]["spec"] for spec in replica_specs(docs).values()]
    pod_specs += [d["spec"] for d in by_kind(docs, "Pod")]
    return pod_specs + [d["spec"]["template"]["spec"] for d in by_kind(docs, "Deployment")]


def volume_pods(docs: list[dict]) -> dict[str, dict]:
    """Pod templates of every pod that mounts the chart's volume, by role."""
    pods = {replica: spec["template"] for replica, spec in replica_specs(docs).items()}
    pods.update({f"Deployment/{d['metadata']['name']}": d["spec"]["template"] for d in by_kind(docs, "Deployment")})
    pods.update({f"Pod/{d['metadata']['name']}": d for d in by_kind(docs, "Pod")})
    return pods


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
