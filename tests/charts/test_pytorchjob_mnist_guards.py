"""charts/pytorchjob-mnist's `fail` guards and schema refusals, each message naming the value and the
fix, what they let through, and rendering as a subchart."""

from __future__ import annotations

import pytest

from tests.support.helm import SCHEMA_REFUSAL, one, umbrella_chart
from tests.support.paths import WORKLOAD_CHART
from tests.support.pytorchjob_mnist import flag, render_with, template_error, trainer_container

GUARDS = {
    "nccl-without-gpu": ({"backend": "nccl"}, "backend: nccl needs GPUs but gpu is 0"),
    "cpu-image-with-gpu": ({"gpu": 1, "image": {"variant": "cpu"}}, "set image.variant to cuda"),
    "two-gpus-without-torchrun": ({"gpu": 2}, "set torchrun.enabled=true"),
    "nproc-without-torchrun": ({"nprocPerNode": "4"}, "nprocPerNode: 4 without torchrun breaks WORLD_SIZE"),
    "torchrun-count-without-torchrun": (
        {"nprocPerNode": "auto"},
        "nprocPerNode: auto is one of torchrun's counts, but without torchrun",
    ),
    # gloo too: the trainer puts each process of a GPU pod on the GPU its LOCAL_RANK numbers.
    "more-processes-than-gpus-on-gloo": (
        {"gpu": 1, "backend": "gloo", "torchrun": {"enabled": True}, "nprocPerNode": "2"},
        "nprocPerNode: 2 is more than gpu: 1, but every process of a GPU replica takes a GPU",
    ),
    "a-process-per-cpu-on-gpus": (
        {"gpu": 2, "torchrun": {"enabled": True}, "nprocPerNode": "cpu"},
        "nprocPerNode: cpu starts a process per CPU core, but with gpu: 2",
    ),
    # torchrun's own counts: "gpu" needs CUDA, "auto" and "cpu" count the node's cores, not the pod's.
    "a-process-per-gpu-without-gpus": (
        {"torchrun": {"enabled": True}, "nprocPerNode": "gpu"},
        "nprocPerNode: gpu counts the pod's GPUs, but gpu is 0",
    ),
    "a-process-per-node-core": (
        {"torchrun": {"enabled": True}, "nprocPerNode": "auto"},
        "nprocPerNode: auto with gpu: 0 starts a process per CPU core of the node",
    ),
    "elastic-without-torchrun": ({"elasticPolicy": {"enabled": True}}, "elasticPolicy.enabled needs torchrun"),
    "elastic-without-workers": (
        {"workers": 0, "torchrun": {"enabled": True}, "elasticPolicy": {"enabled": True}},
        "elasticPolicy.enabled needs at least one Worker",
    ),
    "elastic-min-above-max": (
        {"torchrun": {"enabled": True}, "elasticPolicy": {"enabled": True, "minReplicas": 3, "maxReplicas": 2}},
        "elasticPolicy.minReplicas (3) is greater than elasticPolicy.maxReplicas (2)",
    ),
    "etcd-without-host": (
        {"torchrun": {"enabled": True}, "elasticPolicy": {"enabled": True, "rdzvBackend": "etcd"}},
        "elasticPolicy.rdzvBackend etcd needs an etcd server, but rdzvHost is empty",
    ),
    "more-processes-than-gpus": (
        {"gpu": 2, "torchrun": {"enabled": True}, "nprocPerNode": "4"},
        "set nprocPerNode to at most 2",
    ),
    "claim-and-host-path": (
        {"persistence": {"existingClaim": "data", "hostPath": {"path": "/srv"}}},
        "persistence.existingClaim and persistence.hostPath.path are both set",
    ),
    "tensorboard-without-volume": (
        {"tensorboard": {"enabled": True}, "persistence": {"enabled": False}},
        "tensorboard.enabled needs persistence.enabled=true",
    ),
    "name-not-dns-1035": ({"fullnameOverride": "MNIST_run"}, "is not a DNS-1035 label"),
    "tensorboard-service-name-too-long": (
        {"fullnameOverride": "a" * 54, "tensorboard": {"enabled": True}},
        'its TensorBoard Service name "' + "a" * 54 + '-tensorboard" has 66 characters, the limit is 63; '
        "set fullnameOverride to a name of at most 51 characters",
    ),
    "elastic-min-above-pods": (
        {"torchrun": {"enabled": True}, "elasticPolicy": {"enabled": True, "minReplicas": 3}},
        "elasticPolicy.minReplicas (3) is more than the job's 2 pods (1 Master + workers: 1)",
    ),
    "elastic-max-below-pods": (
        {
            "workers": 3,
            "torchrun": {"enabled": True},
            "elasticPolicy": {"enabled": True, "minReplicas": 2, "maxReplicas": 3},
        },
        "elasticPolicy.maxReplicas (3) is less than the job's 4 pods (1 Master + workers: 3)",
    ),
    "gpu-in-resource-limits": (
        {"resources": {"limits": {"nvidia.com/gpu": 1}}},
        "resources.limits has nvidia.com/gpu; GPUs come from the gpu value",
    ),
    "gpu-in-resource-requests": (
        {"gpu": 1, "resources": {"requests": {"nvidia.com/gpu": 1}}},
        "remove nvidia.com/gpu from resources and set gpu to the GPUs per replica",
    ),
    "suspend-with-kueue": (
        {"kueue": {"queueName": "team-a"}, "runPolicy": {"suspend": True}},
        'runPolicy.suspend=true with kueue.queueName "team-a": Kueue owns runPolicy.suspend',
    ),
    "mount-path-on-tmp": (
        {"persistence": {"mountPath": "/tmp"}},
        'persistence.mountPath "/tmp" is also the mount path of the chart\'s /tmp emptyDir, and a '
        "container cannot mount two volumes at one path; set persistence.mountPath to another directory",
    ),
    "mount-path-on-shm": (
        {"persistence": {"mountPath": "/dev/shm/"}},
        'persistence.mountPath "/dev/shm" is also the mount path of the /dev/shm emptyDir',
    ),
    "cache-on-volume": (
        {"scratch": {"cachePath": "/mnt/pytorchjob-mnist"}},
        'scratch.cachePath "/mnt/pytorchjob-mnist" is also the mount path of persistence.mountPath',
    ),
    "chart-owned-label": (
        {"labels": {"app.kubernetes.io/component": "ml"}},
        'labels: "app.kubernetes.io/component" is one of the chart\'s own labels',
    ),
    "queue-label-twice": (
        {"kueue": {"queueName": "q"}, "labels": {"kueue.x-k8s.io/queue-name": "other"}},
        'labels: "kueue.x-k8s.io/queue-name" belongs in kueue.queueName',
    ),
    "queue-label-instead-of-kueue-value": (
        {"labels": {"kueue.x-k8s.io/queue-name": "team-a"}},
        "move the queue name there",
    ),
    # The README's iteration advice tags builds `<sha>-cpu`; on a GPU node that image cannot use the GPU.
    "cpu-tag-with-gpu": (
        {"gpu": 1, "image": {"tag": "3f2a1bc-cpu"}},
        "gpu: 1 needs a CUDA image but image.tag 3f2a1bc-cpu is a CPU build",
    ),
    "claim-without-persistence": (
        {"persistence": {"enabled": False, "existingClaim": "data"}},
        "persistence.existingClaim is set but persistence.enabled=false",
    ),
    "host-path-without-persistence": (
        {"persistence": {"enabled": False, "hostPath": {"path": "/srv"}}},
        "or clear persistence.hostPath.path",
    ),
    "gang-larger-than-the-job": (
        {"runPolicy": {"schedulingPolicy": {"minAvailable": 5}}},
        "runPolicy.schedulingPolicy.minAvailable (5) is more than the job's 2 pods",
    ),
    "command-and-wrapper": (
        {"command": ["python", "/app/train.py"], "wrapCommand": ["py-spy", "record", "--"]},
        "command and wrapCommand are both set",
    ),
    # The default recipe's Nesterov momentum: the trainer would exit 2 in every pod.
    "zero-momentum-with-fast-recipe": (
        {"training": {"momentum": 0}},
        "training.momentum: 0 with training.recipe: fast: the fast recipe uses Nesterov momentum",
    ),
    "zero-momentum-string-with-fast-recipe": (
        {"training": {"momentum": "0.0"}},
        "set training.momentum above 0 (or null for the recipe's 0.9), or training.recipe: seed",
    ),
    "name-too-long": (
        {"fullnameOverride": "a" * 56, "workers": 10},
        'its pod and Service name "' + "a" * 56 + '-worker-9" has 65 characters, the limit is 63; '
        "set fullnameOverride to a name of at most 54 characters",
    ),
}


@pytest.mark.one_helm_major
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
    "tag-in-tensorboard-repository": (
        {"tensorboard": {"image": {"repository": "tensorflow/tensorflow:2.16.1"}}},
        ["repository"],
    ),
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
    around the pod count, momentum just below 1 and 0 without Nesterov, and /dev/shm as a mount path without shm."""
    accepted = [
        {"fullnameOverride": "a" * 51, "tensorboard": {"enabled": True}},
        {
            "workers": 2,
            "torchrun": {"enabled": True},
            "elasticPolicy": {"enabled": True, "minReplicas": 3, "maxReplicas": 3},
        },
        {
            "workers": 2,
            "torchrun": {"enabled": True},
            "elasticPolicy": {"enabled": True, "minReplicas": 1, "maxReplicas": 8},
        },
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
        {"runPolicy": {"schedulingPolicy": {"minAvailable": 2}}},
        {"persistence": {"enabled": False}},
    ]
    for values in accepted:
        docs = render_with(helm, values, tmp_path)
        assert one(docs, "PyTorchJob"), values
    docs = render_with(
        helm,
        {
            "persistence": {"existingClaim": "data.v2"},
            "tests": {"minAccuracy": "0.95"},
            "training": {"extraArgs": None},
        },
        tmp_path,
    )
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
    docs = render_with(
        helm,
        {
            "kueue": {"queueName": "123"},
            "runPolicy": {"schedulingPolicy": {"queue": "007"}},
            "persistence": {"hostPath": {"path": "/srv/mnist", "nodeName": "1234"}},
        },
        tmp_path,
    )
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
