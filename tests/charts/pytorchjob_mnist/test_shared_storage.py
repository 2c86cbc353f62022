"""charts/pytorchjob-mnist's storage under every job kind: per-release run directories, a new, existing or
hostPath claim, and keeping the pods of a single-node volume on one node."""

from __future__ import annotations

import pytest

from tests.support.helm import by_kind, one
from tests.support.paths import WORKLOAD_CHART
from tests.support.pytorchjob_mnist import (
    flag,
    kinds_taking,
    render_with,
    same_node_terms,
    selects,
    trainer_container,
    trainer_pods,
    volume_pods,
)


def run_dirs(docs: list[dict]) -> dict[str, str]:
    args = trainer_container(docs)["args"]
    return {name: flag(args, name) for name in ("--data-dir", "--output-dir", "--log-dir", "--checkpoint-dir")}


def storage_volumes(docs: list[dict]) -> list[dict]:
    """The `storage` volume of each trainer pod."""
    return [
        next(v for v in template["spec"]["volumes"] if v["name"] == "storage")
        for template in trainer_pods(docs).values()
    ]


def test_two_releases_never_share_model_checkpoint_or_log_dirs(helm, kind):
    def dirs(release, namespace):
        return run_dirs(helm.render(WORKLOAD_CHART, release=release, namespace=namespace, set_values=kind.values({})))

    first, second, other_namespace = dirs("mnist-a", "team"), dirs("mnist-b", "team"), dirs("mnist-a", "other")
    for name in ("--output-dir", "--log-dir", "--checkpoint-dir"):
        assert len({first[name], second[name], other_namespace[name]}) == 3, name
    assert first["--output-dir"] == "/mnt/pytorchjob-mnist/runs/team/mnist-a/model"
    assert first["--data-dir"] == second["--data-dir"] == "/mnt/pytorchjob-mnist/datasets", "datasets are shared"


def test_default_creates_a_kept_claim_mounted_in_every_trainer_pod(default_docs):
    pvc = one(default_docs, "PersistentVolumeClaim")
    assert pvc["metadata"]["name"] == "mnist-storage"
    # Argo CD reads Helm's keep as Delete=false only; Prune=false keeps the claim out of pruning too,
    # and IgnoreExtraneous keeps the unpruned claim from holding the app OutOfSync.
    assert pvc["metadata"]["annotations"] == {
        "helm.sh/resource-policy": "keep",
        "argocd.argoproj.io/sync-options": "Prune=false",
        "argocd.argoproj.io/compare-options": "IgnoreExtraneous",
    }
    assert pvc["spec"]["accessModes"] == ["ReadWriteOnce"] and "storageClassName" not in pvc["spec"]
    assert pvc["spec"]["resources"]["requests"]["storage"] == "5Gi"
    assert not by_kind(default_docs, "PersistentVolume")
    for volume in storage_volumes(default_docs):
        assert volume == {"name": "storage", "persistentVolumeClaim": {"claimName": "mnist-storage"}}


def test_new_claim_takes_class_size_and_access_modes(helm, tmp_path):
    values = {"persistence": {"create": {"storageClass": "nfs", "size": "50Gi", "accessModes": ["ReadWriteMany"]}}}
    pvc = one(render_with(helm, values, tmp_path), "PersistentVolumeClaim")
    assert pvc["spec"]["storageClassName"] == "nfs"
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    assert pvc["spec"]["resources"]["requests"]["storage"] == "50Gi"


def test_an_existing_claim_is_mounted_and_nothing_is_created(helm, tmp_path, kind):
    docs = render_with(
        helm, kind.values({"persistence": {"existingClaim": "tutorial", "mountPath": "/t9k/mnt"}}), tmp_path
    )
    assert not by_kind(docs, "PersistentVolumeClaim") and not by_kind(docs, "PersistentVolume")
    for volume in storage_volumes(docs):
        assert volume["persistentVolumeClaim"] == {"claimName": "tutorial"}
    mounts = {m["mountPath"] for m in trainer_container(docs)["volumeMounts"]}
    assert mounts == {"/t9k/mnt", "/tmp", "/var/cache/trainer", "/dev/shm"}
    assert run_dirs(docs)["--output-dir"] == "/t9k/mnt/runs/default/mnist/model"


def test_a_host_path_volume_is_reserved_for_its_claim_and_mounted(rendered):
    docs = rendered["host-path"]
    pv = one(docs, "PersistentVolume")
    assert pv["spec"]["hostPath"] == {"path": "/data/mnist", "type": "DirectoryOrCreate"}
    for volume in storage_volumes(docs):
        assert volume["persistentVolumeClaim"] == {"claimName": "mnist-storage"}


def test_host_path_volume_is_reserved_for_its_claim(helm, tmp_path):
    docs = render_with(
        helm,
        {"persistence": {"hostPath": {"path": "/srv/mnist", "nodeName": "node-1"}}},
        tmp_path,
        namespace="kubeflow",
    )
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
    docs = rendered["one-pod-no-persistence"]
    assert not by_kind(docs, "PersistentVolumeClaim") and not by_kind(docs, "Pod")
    for template in trainer_pods(docs).values():
        volumes = {v["name"]: v for v in template["spec"]["volumes"]}
        assert volumes["storage"] == {"name": "storage", "emptyDir": {}}


@pytest.mark.parametrize("kind", kinds_taking("shm.enabled"))
def test_shm_disabled_drops_the_dev_shm_volume(rendered):
    docs = rendered["wrapped-kueue-no-shm"]
    for role, template in trainer_pods(docs).items():
        assert "dshm" not in {v["name"] for v in template["spec"]["volumes"]}, role
        assert "/dev/shm" not in {m["mountPath"] for m in trainer_container(docs, role)["volumeMounts"]}, role


def test_keep_false_lets_helm_delete_the_claim(helm, tmp_path):
    pvc = one(render_with(helm, {"persistence": {"keep": False}}, tmp_path), "PersistentVolumeClaim")
    assert "annotations" not in pvc["metadata"]


def test_read_write_once_volume_keeps_all_its_pods_on_one_node(helm, tmp_path, kind):
    """A ReadWriteOnce volume attaches to one node: every pod that mounts it (the trainers, TensorBoard,
    test) needs a required podAffinity that selects all the others."""
    docs = render_with(helm, kind.values({"workers": 2, "tensorboard": {"enabled": True}}), tmp_path)
    pods = volume_pods(docs)
    assert set(pods) == set(trainer_pods(docs)) | {"Deployment/mnist-tensorboard", "Pod/mnist-check-run"}
    for name, template in pods.items():
        assert any(
            v.get("persistentVolumeClaim", {}).get("claimName") == "mnist-storage" for v in template["spec"]["volumes"]
        ), f"{name} does not mount the claim"
        terms = same_node_terms(template)
        assert len(terms) == 1, f"{name}: {template['spec'].get('affinity')}"
        for other, other_template in pods.items():
            assert selects(terms[0], other_template["metadata"]["labels"]), f"{name} is not kept with {other}"
    other_release = helm.render(WORKLOAD_CHART, release="other", set_values=kind.values({}))
    other_labels = next(iter(trainer_pods(other_release).values()))["metadata"]["labels"]
    first_trainer = next(iter(trainer_pods(docs).values()))
    assert not selects(same_node_terms(first_trainer)[0], other_labels), "another release's pods are not selected"


@pytest.mark.parametrize(
    "values, single_node",
    [
        ({}, True),
        ({"persistence": {"create": {"accessModes": ["ReadWriteMany"]}}}, False),
        ({"persistence": {"create": {"accessModes": ["ReadWriteMany"]}, "singleNode": True}}, True),
        ({"persistence": {"existingClaim": "data"}}, True),
        ({"persistence": {"existingClaim": "data", "singleNode": False}}, False),
        ({"persistence": {"hostPath": {"path": "/srv/mnist"}}}, True),
        ({"persistence": {"enabled": False}}, False),
    ],
)
def test_pods_are_kept_on_one_node_only_for_a_single_node_volume(helm, tmp_path, kind, values, single_node):
    docs = render_with(helm, kind.values(values), tmp_path)
    for name, template in volume_pods(docs).items():
        assert bool(same_node_terms(template)) is single_node, f"{name} with {values}"
        if not single_node:
            assert "affinity" not in template["spec"], name


def test_same_node_affinity_is_merged_into_the_users_affinity(helm, tmp_path, kind):
    user_term = {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": "topology.kubernetes.io/zone"}
    node_affinity = {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}
            ]
        }
    }
    values = {
        "tensorboard": {"enabled": True},
        "affinity": {
            "nodeAffinity": node_affinity,
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [user_term]},
        },
    }
    for name, template in volume_pods(render_with(helm, kind.values(values), tmp_path)).items():
        affinity = template["spec"]["affinity"]
        assert affinity["nodeAffinity"] == node_affinity, name
        required = affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert required[0] == user_term and len(required) == 2, name
        assert required[1]["topologyKey"] == "kubernetes.io/hostname", name
