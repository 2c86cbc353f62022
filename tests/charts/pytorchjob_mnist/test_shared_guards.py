"""charts/pytorchjob-mnist's `fail` guards, one table for every job kind, each message naming the value and
the fix; what the shared guards let through, the schema's refusals, the kinds' unsupported values, and rendering as a
subchart."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import yaml

from tests.support.chart_values import nested
from tests.support.helm import SCHEMA_REFUSAL, one, umbrella_chart
from tests.support.paths import WORKLOAD_CHART
from tests.support.pytorchjob_mnist import (
    KINDS,
    PYTORCHJOB,
    PYTORCHTRAININGJOB,
    TRAINJOB,
    TRAINJOB_RUNTIME_VALUES,
    Kind,
    flag,
    job_of,
    render_helpers,
    render_with,
    template_error,
    trainer_container,
)


@dataclass(frozen=True)
class Guard:
    """A `fail` guard's refusal: the values it refuses, the value its message names (`key`), the fix it gives,
    and the job kinds it refuses them under (by default every kind that takes the values)."""

    values: dict
    key: str
    fix: str
    kinds: tuple[Kind, ...] | None = None

    def refusing_kinds(self) -> list[Kind]:
        return list(self.kinds) if self.kinds else [kind for kind in KINDS if kind.takes(self.values)]


def without_a_counterpart(kind: Kind, values: dict, path: str) -> Guard:
    """A value the kind has no field for, set off its default (the kind's unsupportedValues hook)."""
    return Guard(values, path, f"leave {path} at its default", (kind,))


def named_count(kind: Kind, nproc: str, gpu: int) -> Guard:
    """One of torchrun's named process counts, where the kind's job takes a number."""
    fix = "set nprocPerNode to a number of processes per pod, or leave it empty (one per GPU, else 1)"
    return Guard({"nprocPerNode": nproc, "gpu": gpu}, f"nprocPerNode: {nproc}", fix, (kind,))


GUARDS: dict[str, Guard] = {
    "nccl-without-gpu": Guard({"backend": "nccl"}, "backend", "set gpu to the GPUs per replica, or backend to gloo"),
    "cpu-image-with-gpu": Guard({"gpu": 1, "image": {"variant": "cpu"}}, "image.variant", "set image.variant to cuda"),
    # gloo too: the trainer puts each process of a GPU pod on the GPU its LOCAL_RANK numbers.
    "more-processes-than-gpus-on-gloo": Guard(
        {"gpu": 1, "backend": "gloo", "torchrun": {"enabled": True}, "nprocPerNode": "2"},
        "nprocPerNode: 2",
        "set nprocPerNode to at most 1",
    ),
    "more-processes-than-gpus": Guard(
        {"gpu": 2, "torchrun": {"enabled": True}, "nprocPerNode": "4"},
        "nprocPerNode: 4",
        "set nprocPerNode to at most 2",
    ),
    "claim-and-host-path": Guard(
        {"persistence": {"existingClaim": "data", "hostPath": {"path": "/srv"}}},
        "persistence.existingClaim and persistence.hostPath.path",
        "pick one: the existing claim, or a hostPath volume the chart creates",
    ),
    "tensorboard-without-volume": Guard(
        {"tensorboard": {"enabled": True}, "persistence": {"enabled": False}},
        "tensorboard.enabled",
        "needs persistence.enabled=true",
    ),
    "name-not-dns-1035": Guard({"fullnameOverride": "MNIST_run"}, '"MNIST_run"', "set fullnameOverride to such a name"),
    "gpu-in-resource-limits": Guard(
        {"resources": {"limits": {"nvidia.com/gpu": 1}}},
        "resources.limits has nvidia.com/gpu",
        "remove nvidia.com/gpu from resources and set gpu to the GPUs per replica",
    ),
    "gpu-in-resource-requests": Guard(
        {"gpu": 1, "resources": {"requests": {"nvidia.com/gpu": 1}}},
        "resources.requests has nvidia.com/gpu",
        "remove nvidia.com/gpu from resources and set gpu to the GPUs per replica",
    ),
    "suspend-with-kueue": Guard(
        {"kueue": {"queueName": "team-a"}, "runPolicy": {"suspend": True}},
        "runPolicy.suspend=true",
        "leave runPolicy.suspend false, or clear kueue.queueName",
    ),
    "mount-path-on-tmp": Guard(
        {"persistence": {"mountPath": "/tmp"}}, 'persistence.mountPath "/tmp"', "set persistence.mountPath to another"
    ),
    "mount-path-on-shm": Guard(
        {"persistence": {"mountPath": "/dev/shm/"}},
        'persistence.mountPath "/dev/shm"',
        "set persistence.mountPath to another directory",
    ),
    "cache-on-volume": Guard(
        {"scratch": {"cachePath": "/mnt/pytorchjob-mnist"}},
        'scratch.cachePath "/mnt/pytorchjob-mnist"',
        "set scratch.cachePath to another directory",
    ),
    "chart-owned-label": Guard(
        {"labels": {"app.kubernetes.io/component": "ml"}},
        'labels: "app.kubernetes.io/component"',
        "remove it from labels, or use another key",
    ),
    "queue-label-twice": Guard(
        {"kueue": {"queueName": "q"}, "labels": {"kueue.x-k8s.io/queue-name": "other"}},
        'labels: "kueue.x-k8s.io/queue-name"',
        "move the queue name there",
    ),
    "queue-label-instead-of-kueue-value": Guard(
        {"labels": {"kueue.x-k8s.io/queue-name": "team-a"}},
        'labels: "kueue.x-k8s.io/queue-name" belongs in kueue.queueName',
        "move the queue name there",
    ),
    # The README's iteration advice tags builds `<sha>-cpu`; on a GPU node that image cannot use the GPU.
    "cpu-tag-with-gpu": Guard(
        {"gpu": 1, "image": {"tag": "3f2a1bc-cpu"}}, "image.tag 3f2a1bc-cpu", "set image.tag to its -cuda build"
    ),
    "claim-without-persistence": Guard(
        {"persistence": {"enabled": False, "existingClaim": "data"}},
        "persistence.existingClaim",
        "set persistence.enabled=true to use it, or clear persistence.existingClaim",
    ),
    "host-path-without-persistence": Guard(
        {"persistence": {"enabled": False, "hostPath": {"path": "/srv"}}},
        "persistence.hostPath.path",
        "set persistence.enabled=true to use it, or clear persistence.hostPath.path",
    ),
    "command-and-wrapper": Guard(
        {"command": ["python", "/app/train.py"], "wrapCommand": ["py-spy", "record", "--"]},
        "command and wrapCommand",
        "put the wrapper into command, or clear command",
    ),
    # The API server refuses a container with two variables of one name, and the message names neither value.
    "one-env-name-twice": Guard(
        {"env": [{"name": "NCCL_DEBUG", "value": "INFO"}, {"name": "A", "value": "1"}, {"name": "NCCL_DEBUG"}]},
        "env: NCCL_DEBUG is listed twice",
        "keep one entry named NCCL_DEBUG in env",
    ),
    # The default recipe's Nesterov momentum: the trainer would exit 2 in every pod.
    "zero-momentum-with-fast-recipe": Guard(
        {"training": {"momentum": 0}},
        "training.momentum: 0",
        "set training.momentum above 0 (or null for the recipe's 0.9), or training.recipe: seed",
    ),
    "zero-momentum-string-with-fast-recipe": Guard(
        {"training": {"momentum": "0.0"}},
        "training.momentum: 0.0",
        "set training.momentum above 0 (or null for the recipe's 0.9), or training.recipe: seed",
    ),
    # TensorBoard starts with the job; scheduled first, it would pin the GPU pods to its node.
    "tensorboard-beside-gpus-on-a-single-node-volume": Guard(
        {"gpu": 1, "tensorboard": {"enabled": True}},
        "tensorboard.enabled with gpu > 0 on a single-node volume",
        "Use a ReadWriteMany claim",
    ),
    "tensorboard-beside-gpus-on-a-host-path": Guard(
        {"gpu": 1, "tensorboard": {"enabled": True}, "persistence": {"hostPath": {"path": "/srv/mnist"}}},
        "tensorboard.enabled with gpu > 0 on a hostPath volume",
        "Set persistence.hostPath.nodeName to a GPU node",
    ),
    # A PyTorchJob's own: processes without torchrun, elastic rendezvous, gang scheduling, pod names.
    "two-gpus-without-torchrun": Guard({"gpu": 2}, "gpu: 2", "set torchrun.enabled=true", (PYTORCHJOB,)),
    "nproc-without-torchrun": Guard(
        {"nprocPerNode": "4"}, "nprocPerNode: 4", "set torchrun.enabled=true, or nprocPerNode to 1", (PYTORCHJOB,)
    ),
    "torchrun-count-without-torchrun": Guard(
        {"nprocPerNode": "auto"},
        "nprocPerNode: auto",
        "set torchrun.enabled=true, or leave nprocPerNode empty",
        (PYTORCHJOB,),
    ),
    "a-process-per-cpu-on-gpus": Guard(
        {"gpu": 2, "torchrun": {"enabled": True}, "nprocPerNode": "cpu"},
        "nprocPerNode: cpu",
        "leave nprocPerNode empty (one per GPU), or set gpu: 0",
        (PYTORCHJOB,),
    ),
    # torchrun's own counts: "gpu" needs CUDA, "auto" and "cpu" count the node's cores, not the pod's.
    "a-process-per-gpu-without-gpus": Guard(
        {"torchrun": {"enabled": True}, "nprocPerNode": "gpu"},
        "nprocPerNode: gpu",
        "or gpu to the GPUs per replica",
        (PYTORCHJOB,),
    ),
    "a-process-per-node-core": Guard(
        {"torchrun": {"enabled": True}, "nprocPerNode": "auto"},
        "nprocPerNode: auto with gpu: 0",
        "set nprocPerNode to a number of processes per pod",
        (PYTORCHJOB,),
    ),
    "elastic-without-torchrun": Guard(
        {"elasticPolicy": {"enabled": True}}, "elasticPolicy.enabled", "set torchrun.enabled=true", (PYTORCHJOB,)
    ),
    "elastic-without-workers": Guard(
        {"workers": 0, "torchrun": {"enabled": True}, "elasticPolicy": {"enabled": True}},
        "elasticPolicy.enabled",
        "set workers to 1 or more",
        (PYTORCHJOB,),
    ),
    "elastic-min-above-max": Guard(
        {"torchrun": {"enabled": True}, "elasticPolicy": {"enabled": True, "minReplicas": 3, "maxReplicas": 2}},
        "elasticPolicy.minReplicas (3)",
        "lower minReplicas or raise maxReplicas",
        (PYTORCHJOB,),
    ),
    "etcd-without-host": Guard(
        {"torchrun": {"enabled": True}, "elasticPolicy": {"enabled": True, "rdzvBackend": "etcd"}},
        "elasticPolicy.rdzvBackend etcd",
        "set rdzvHost (and rdzvPort) to your etcd server, or rdzvBackend to c10d",
        (PYTORCHJOB,),
    ),
    "elastic-min-above-pods": Guard(
        {"torchrun": {"enabled": True}, "elasticPolicy": {"enabled": True, "minReplicas": 3}},
        "elasticPolicy.minReplicas (3) is more than the job's 2 pods",
        "set minReplicas to at most 2, or raise workers",
        (PYTORCHJOB,),
    ),
    "elastic-max-below-pods": Guard(
        {
            "workers": 3,
            "torchrun": {"enabled": True},
            "elasticPolicy": {"enabled": True, "minReplicas": 2, "maxReplicas": 3},
        },
        "elasticPolicy.maxReplicas (3) is less than the job's 4 pods",
        "set maxReplicas to at least 4, or lower workers",
        (PYTORCHJOB,),
    ),
    "gang-larger-than-the-job": Guard(
        {"runPolicy": {"schedulingPolicy": {"minAvailable": 5}}},
        "runPolicy.schedulingPolicy.minAvailable (5) is more than the job's 2 pods",
        "set minAvailable to at most 2, or raise workers",
        (PYTORCHJOB,),
    ),
    "tensorboard-service-name-too-long": Guard(
        {"fullnameOverride": "a" * 54, "tensorboard": {"enabled": True}},
        'TensorBoard Service name "' + "a" * 54 + '-tensorboard" has 66 characters, the limit is 63',
        "set fullnameOverride to a name of at most 51 characters",
        (PYTORCHJOB,),
    ),
    "name-too-long": Guard(
        {"fullnameOverride": "a" * 56, "workers": 10},
        'pod and Service name "' + "a" * 56 + '-worker-9" has 65 characters, the limit is 63',
        "set fullnameOverride to a name of at most 54 characters",
        (PYTORCHJOB,),
    ),
    # A TrainJob's: what Trainer v2 has no field for, or refuses.
    "trainjob-elastic": Guard(
        {"elasticPolicy": {"enabled": True}},
        "elasticPolicy.enabled with jobKind TrainJob: Trainer v2 removed elastic training",
        "set elasticPolicy.enabled=false, or jobKind: PyTorchJob",
        (TRAINJOB,),
    ),
    **{f"trainjob-nproc-{nproc}": named_count(TRAINJOB, nproc, 1) for nproc in ("auto", "cpu", "gpu")},
    # Trainer v2.2.0-v2.3.0's webhook refuses the first five in trainer.env (TorchRunReservedEnvNames), which its
    # torch plugin sets; the chart refuses every other PET_* too, as torchrun reads them as its flags.
    **{
        f"trainjob-env-{name}": Guard(
            {"env": [{"name": "NCCL_DEBUG", "value": "INFO"}, {"name": name, "value": "x"}]},
            f"env: {name} with jobKind TrainJob",
            f"remove {name} from env",
            (TRAINJOB,),
        )
        for name in (
            "PET_NNODES",
            "PET_NPROC_PER_NODE",
            "PET_NODE_RANK",
            "PET_MASTER_ADDR",
            "PET_MASTER_PORT",
            "PET_RDZV_ENDPOINT",
        )
    },
    **{
        f"trainjob-{path}": without_a_counterpart(TRAINJOB, values, path)
        for values, path in (
            ({"runPolicy": {"cleanPodPolicy": "All"}}, "runPolicy.cleanPodPolicy"),
            ({"runPolicy": {"ttlSecondsAfterFinished": 60}}, "runPolicy.ttlSecondsAfterFinished"),
            ({"runPolicy": {"schedulingPolicy": {"minAvailable": 2}}}, "runPolicy.schedulingPolicy.minAvailable"),
            ({"runPolicy": {"schedulingPolicy": {"queue": "research"}}}, "runPolicy.schedulingPolicy.queue"),
        )
    },
    # What the chart's own TrainingRuntime (trainingRuntime.create) carries, which a runtime patch cannot.
    **{
        f"trainjob-{path}-{value}": Guard(
            nested(tuple(path.split(".")), value),
            path,
            "set trainingRuntime.create=true, or use jobKind: PyTorchJob",
            (TRAINJOB,),
        )
        for path, value in TRAINJOB_RUNTIME_VALUES
    },
    "trainjob-name-over-48": Guard(
        {"fullnameOverride": "a" * 49},
        "TrainJob name",
        "set fullnameOverride to a name of at most 48 characters",
        (TRAINJOB,),
    ),
    # A T9k PyTorchTrainingJob's: what T9k's torchrun mode runs, and what T9k has no field for.
    "t9k-command": Guard(
        {"command": ["python", "/workspace/train.py"]},
        "command with jobKind PyTorchTrainingJob",
        "put your script and its flags in args (e.g. [/workspace/train.py, --epochs=1]) and clear command",
        (PYTORCHTRAININGJOB,),
    ),
    "t9k-wrap-command": Guard(
        {"wrapCommand": ["py-spy", "record", "--"]},
        "wrapCommand with jobKind PyTorchTrainingJob",
        "clear wrapCommand, or use jobKind: PyTorchJob",
        (PYTORCHTRAININGJOB,),
    ),
    "t9k-args-without-a-script": Guard(
        {"args": ["--epochs=1"]},
        "args: --epochs=1 comes first with jobKind PyTorchTrainingJob",
        "start args with your script (or -m trainer), then its flags",
        (PYTORCHTRAININGJOB,),
    ),
    "t9k-no-shm": Guard(
        {"shm": {"enabled": False}},
        "shm.enabled=false with jobKind PyTorchTrainingJob",
        "leave shm.enabled=true (shm.sizeLimit sets its size)",
        (PYTORCHTRAININGJOB,),
    ),
    **{
        f"t9k-nproc-{nproc}": named_count(PYTORCHTRAININGJOB, nproc, gpu)
        for nproc, gpu in (("auto", 1), ("cpu", 0), ("gpu", 1))
    },
    "t9k-priority-without-queue": Guard(
        {"t9k": {"priority": 0}},
        "t9k.priority: 0 without t9k.queue",
        "set t9k.queue to a queue of the cluster, or clear t9k.priority",
        (PYTORCHTRAININGJOB,),
    ),
    **{
        f"t9k-{path}": without_a_counterpart(PYTORCHTRAININGJOB, values, path)
        for values, path in (
            ({"elasticPolicy": {"enabled": True}}, "elasticPolicy.enabled"),
            ({"runPolicy": {"ttlSecondsAfterFinished": 60}}, "runPolicy.ttlSecondsAfterFinished"),
            ({"runPolicy": {"schedulingPolicy": {"minAvailable": 2}}}, "runPolicy.schedulingPolicy.minAvailable"),
            ({"runPolicy": {"schedulingPolicy": {"queue": "research"}}}, "runPolicy.schedulingPolicy.queue"),
            (
                {"runPolicy": {"schedulingPolicy": {"priorityClass": "high"}}},
                "runPolicy.schedulingPolicy.priorityClass",
            ),
            (
                {"runPolicy": {"schedulingPolicy": {"scheduleTimeoutSeconds": 60}}},
                "runPolicy.schedulingPolicy.scheduleTimeoutSeconds",
            ),
            ({"kueue": {"queueName": "team-a"}}, "kueue.queueName"),
        )
    },
    **{
        f"t9k-name-over-{limit}-with-{workers}-workers": Guard(
            {"fullnameOverride": "a" * (limit + 1), "workers": workers},
            f'PyTorchTrainingJob name "{"a" * (limit + 1)}" has {limit + 1} characters, the limit is {limit}',
            f"set fullnameOverride to a name of at most {limit} characters",
            (PYTORCHTRAININGJOB,),
        )
        for workers, limit in ((1, 50), (10, 49))
    },
}


@pytest.mark.parametrize(
    "kind, case",
    [
        pytest.param(kind, case, id=f"{kind.name}-{case}")
        for case, guard in sorted(GUARDS.items())
        for kind in guard.refusing_kinds()
    ],
)
def test_a_guard_names_the_value_and_the_fix(helm, tmp_path, kind, case):
    guard = GUARDS[case]
    error = template_error(helm, kind.values(guard.values), tmp_path)
    assert guard.key in error and guard.fix in error, error


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
    "bad-recipe": ({"training": {"recipe": "slow"}}, ["recipe"]),
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
    "tag-in-tensorboard-repository": (
        {"tensorboard": {"image": {"repository": "tensorflow/tensorflow:2.16.1"}}},
        ["repository"],
    ),
    # One pod cluster-wide, or no writer: the job's pods could not all use the new claim.
    "read-write-once-pod-claim": ({"persistence": {"create": {"accessModes": ["ReadWriteOncePod"]}}}, ["accessModes"]),
    "unknown-job-kind": ({"jobKind": "MPIJob"}, ["jobKind"]),
}


@pytest.mark.both_helm_majors
@pytest.mark.parametrize("case", sorted(SCHEMA_REFUSALS))
def test_schema_refuses_with_the_field_named(helm, tmp_path, case):
    values, fields = SCHEMA_REFUSALS[case]
    error = template_error(helm, values, tmp_path)
    assert SCHEMA_REFUSAL in error
    for field in fields:
        assert field in error, f"{field} not named in: {error}"


def test_guards_accept_what_they_do_not_refuse(helm, tmp_path, kind):
    """The boundaries of the guards above render: momentum just below 1 and 0 without Nesterov,
    /dev/shm as a mount path without shm, and resources in every unit."""
    accepted = [
        {"training": {"momentum": 0.99}},
        {"training": {"momentum": 0, "recipe": "seed"}},
        {"training": {"momentum": "0.0", "extraArgs": ["--no-nesterov"]}},
        {"shm": {"enabled": False}, "persistence": {"mountPath": "/dev/shm"}},
        {"persistence": {"mountPath": "/tmp/volume"}},
        {"labels": {"app.kubernetes.io/part-of": "vision"}},
        {"shm": {"sizeLimit": ".5Gi"}, "scratch": {"tmpSizeLimit": "512k"}},
        # Equal requests and limits in other units, and a limit the shm fits below.
        {"resources": {"requests": {"cpu": "1", "memory": "1536Mi"}, "limits": {"cpu": "1000m", "memory": "1.5Gi"}}},
        {"resources": {"requests": {"memory": "4e9"}, "limits": {"memory": "4G"}}, "shm": {"sizeLimit": "3999M"}},
        {"resources": {"requests": {"memory": "2Gi"}, "limits": None}, "shm": {"sizeLimit": "8Gi"}},  # no limit to fill
        {"gpu": 1, "image": {"tag": "3f2a1bc-cuda", "repository": "localhost:5000/ml/trainer"}},
        {"persistence": {"enabled": False}},
        # A pinned hostPath volume places every pod on its node: TensorBoard cannot pin the GPU pods elsewhere.
        {
            "gpu": 1,
            "tensorboard": {"enabled": True},
            "persistence": {"hostPath": {"path": "/srv", "nodeName": "gpu-1"}},
        },
    ]
    for values in filter(kind.takes, accepted):
        assert job_of(render_with(helm, kind.values(values), tmp_path)), values
    docs = render_with(
        helm,
        kind.values(
            {
                "persistence": {"existingClaim": "data.v2"},
                "tests": {"minAccuracy": "0.95"},
                "training": {"extraArgs": None},
            }
        ),
        tmp_path,
    )
    assert one(docs, "Pod")["spec"]["containers"][0]["args"][1] == "0.95"
    assert one(docs, "Pod")["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == "data.v2"
    args = trainer_container(helm.render(WORKLOAD_CHART, set_values=kind.values({"training.momentum": "0.95"})))["args"]
    assert flag(args, "--momentum") == "0.95", "decimal strings below 1 from --set still pass"


def test_unsupported_values_defaults_are_values_yamls(helm, helpers_chart, tmp_path, kind):
    """The shared guard ignores a kind's unsupported values at their defaults and refuses any other
    value by name (test_<kind>_guards.py): the defaults must be values.yaml's, or a job of untouched
    values would be refused."""
    unsupported = render_helpers(helm, helpers_chart, kind.values({}), tmp_path)["unsupportedValues"]
    values = yaml.safe_load((WORKLOAD_CHART / "values.yaml").read_text())
    for path, entry in unsupported.get("values", {}).items():
        node = values
        for key in path.split("."):
            node = node[key]
        assert node == entry["default"], path
        assert entry["why"], path
    if unsupported.get("values"):
        assert unsupported["alternative"], "the guard's message says what to do instead"
    assert set(unsupported.get("values", {})) <= kind.refuses, "the tests leave them out of the kind's shared checks"


@pytest.mark.both_helm_majors
def test_renders_as_an_optional_subchart(helm, tmp_path):
    """Helm hands a subchart its `global` map and the parent's condition key; the closed schema takes both."""
    parent = umbrella_chart(WORKLOAD_CHART, tmp_path)
    docs = helm.render(parent, set_values={"pytorchjob-mnist.enabled": True, "global.imageRegistry": "mirror.local"})
    assert job_of(docs)
    assert helm.render(parent, set_values={"pytorchjob-mnist.enabled": False}) == []


def test_every_kind_is_a_value_the_schema_takes(helm):
    for kind in KINDS:
        assert job_of(helm.render(WORKLOAD_CHART, set_values=kind.values({})))["kind"] == kind.name


def test_multikueue_sets_the_field_the_kind_dispatches_on_or_is_refused_by_name(helm, tmp_path, kind):
    """kueue.multiKueue sets the job's managedBy to MultiKueue's manager, where the kind's API has one;
    a kind without one refuses it as an unsupported value."""
    values = kind.values({"kueue": {"queueName": "team-a", "multiKueue": True}})
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    result = helm.template(WORKLOAD_CHART, values_files=(path,))
    if result.returncode:
        assert "kueue.multiKueue: true with jobKind" in result.stderr, result.stderr
        return
    docs = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
    managed_by = [
        value
        for key, value in _walk(job_of(docs)["spec"])
        if key == "managedBy"  # a TrainJob's spec.managedBy, a PyTorchJob's spec.runPolicy.managedBy
    ]
    assert managed_by == ["kueue.x-k8s.io/multikueue"]
    error = template_error(helm, kind.values({"kueue": {"multiKueue": True}}), tmp_path)
    assert "kueue.multiKueue=true without kueue.queueName" in error and "set kueue.queueName to a LocalQueue" in error


def _walk(node):
    """Every (key, value) of a nested object."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield key, value
            yield from _walk(value)
    elif isinstance(node, list):
        for item in node:
            yield from _walk(item)
