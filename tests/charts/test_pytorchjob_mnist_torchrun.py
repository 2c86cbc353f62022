"""charts/pytorchjob-mnist with torchrun and an elastic policy."""

from __future__ import annotations

from tests.support.helm import one
from tests.support.pytorchjob_mnist import env_of, flag, render_with, trainer_container


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
    assert job["spec"]["elasticPolicy"] == {"minReplicas": 2, "maxReplicas": 2, "maxRestarts": 3, "rdzvBackend": "c10d"}
    limits = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": 4}


def test_elastic_restarts_get_a_fresh_rendezvous_store_each_round(rendered):
    """torchrun's shared store keeps the last round's gloo/NCCL addresses (pytorch/pytorch#135712);
    only elastic jobs restart the worker group, so only they need the variable."""
    for replica in ("Master", "Worker"):
        assert env_of(rendered["ci/elastic-cpu-values.yaml"], replica)["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"
    assert "TORCH_DISABLE_SHARE_RDZV_TCP_STORE" not in env_of(rendered["ci/torchrun-cpu-values.yaml"], "Master")


def test_user_env_can_turn_the_shared_rendezvous_store_back_on(helm, tmp_path):
    docs = render_with(
        helm,
        {
            "torchrun": {"enabled": True},
            "elasticPolicy": {"enabled": True},
            "env": [{"name": "TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "value": "0"}],
        },
        tmp_path,
    )
    names = [e["name"] for e in trainer_container(docs)["env"]]
    assert names.count("TORCH_DISABLE_SHARE_RDZV_TCP_STORE") == 1, names
    assert env_of(docs, "Master")["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "0"


def test_elastic_policy_renders_every_rendezvous_setting(rendered):
    job = one(rendered["elastic-custom-rendezvous"], "PyTorchJob")
    assert job["spec"]["elasticPolicy"] == {
        "minReplicas": 2,
        "maxReplicas": 4,
        "maxRestarts": 5,
        "rdzvBackend": "c10d",
        "rdzvHost": "rdzv.example",
        "rdzvPort": 29400,
        "rdzvId": "mnist-run",
        "rdzvConf": [{"key": "join_timeout", "value": "900"}, {"key": "read_timeout", "value": "60"}],
    }
