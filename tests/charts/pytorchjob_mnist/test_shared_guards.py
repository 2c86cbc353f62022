"""charts/pytorchjob-mnist's shared `fail` guards under every job kind, each message naming the value and
the fix, what they let through, the schema's refusals, the kinds' unsupported values, and rendering as a
subchart."""

from __future__ import annotations

import pytest
import yaml

from tests.support.helm import SCHEMA_REFUSAL, one, umbrella_chart
from tests.support.paths import WORKLOAD_CHART
from tests.support.pytorchjob_mnist import (
    KINDS,
    flag,
    job_of,
    render_helpers,
    render_with,
    template_error,
    trainer_container,
)

GUARDS = {
    "nccl-without-gpu": ({"backend": "nccl"}, "backend: nccl needs GPUs but gpu is 0"),
    "cpu-image-with-gpu": ({"gpu": 1, "image": {"variant": "cpu"}}, "set image.variant to cuda"),
    # gloo too: the trainer puts each process of a GPU pod on the GPU its LOCAL_RANK numbers.
    "more-processes-than-gpus-on-gloo": (
        {"gpu": 1, "backend": "gloo", "torchrun": {"enabled": True}, "nprocPerNode": "2"},
        "nprocPerNode: 2 is more than gpu: 1, but every process of a GPU replica takes a GPU",
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
    "command-and-wrapper": (
        {"command": ["python", "/app/train.py"], "wrapCommand": ["py-spy", "record", "--"]},
        "command and wrapCommand are both set",
    ),
    # The API server refuses a container with two variables of one name, and the message names neither value.
    "one-env-name-twice": (
        {"env": [{"name": "NCCL_DEBUG", "value": "INFO"}, {"name": "A", "value": "1"}, {"name": "NCCL_DEBUG"}]},
        "env: NCCL_DEBUG is listed twice, and a container's variables must have distinct names; "
        "keep one entry named NCCL_DEBUG in env",
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
    # TensorBoard starts with the job; scheduled first, it would pin the GPU pods to its node.
    "tensorboard-beside-gpus-on-a-single-node-volume": (
        {"gpu": 1, "tensorboard": {"enabled": True}},
        "tensorboard.enabled with gpu > 0 on a single-node volume: TensorBoard starts with the job and, if scheduled "
        "first, would pin the GPU pods to its node, which may have no GPUs. Use a ReadWriteMany claim",
    ),
    "tensorboard-beside-gpus-on-a-host-path": (
        {"gpu": 1, "tensorboard": {"enabled": True}, "persistence": {"hostPath": {"path": "/srv/mnist"}}},
        "on a hostPath volume: TensorBoard starts with the job and, if scheduled first, would pin the GPU pods "
        "to its node, which may have no GPUs. Set persistence.hostPath.nodeName to a GPU node",
    ),
}


@pytest.mark.parametrize(
    "kind, case",
    [
        pytest.param(kind, case, id=f"{kind.name}-{case}")
        for case in sorted(GUARDS)
        for kind in KINDS
        if kind.takes(GUARDS[case][0])
    ],
)
def test_fail_guard_message(helm, tmp_path, kind, case):
    values, message = GUARDS[case]
    assert message in template_error(helm, kind.values(values), tmp_path)


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
