"""charts/pytorchjob-mnist's defaults and the trainer container: values that become trainer flags,
a command, args or wrapper of the user's, and env."""

from __future__ import annotations

import pytest

from tests.support.helm import one
from tests.support.paths import WORKLOAD_CHART
from tests.support.pytorchjob_mnist import CACHE_ENV, TRAINER_ENV, env_of, flag, render_with, trainer_container


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
    docs = render_with(
        helm,
        {
            "training": {
                "dataset": "fashion-mnist",
                "fallbackDataset": "mnist,digits",
                "epochs": 3,
                "batchSize": 128,
                "testBatchSize": 500,
                "lr": 0.001,
                "momentum": 0.9,
                "seed": 7,
                "logInterval": 5,
                "checkpointEvery": 50,
                "keepCheckpoints": 2,
                "extraArgs": ["--threads", "2"],
            }
        },
        tmp_path,
    )
    args = trainer_container(docs)["args"]
    expected = {
        "--dataset": "fashion-mnist",
        "--fallback-dataset": "mnist,digits",
        "--epochs": "3",
        "--batch-size": "128",
        "--test-batch-size": "500",
        "--lr": "0.001",
        "--momentum": "0.9",
        "--seed": "7",
        "--log-interval": "5",
        "--checkpoint-every": "50",
        "--keep-checkpoints": "2",
        "--threads": "2",
    }
    assert {name: flag(args, name) for name in expected} == expected
    assert args[-2:] == ["--threads", "2"], "extra args come last so they can override"


def test_large_whole_numbers_from_a_values_file_stay_integers(helm, tmp_path):
    """A values file's numbers reach templates as floats, which toString writes as 2.0240101e+07."""
    args = trainer_container(render_with(helm, {"training": {"seed": 20240101, "checkpointEvery": 1000000}}, tmp_path))[
        "args"
    ]
    assert (flag(args, "--seed"), flag(args, "--checkpoint-every")) == ("20240101", "1000000")


def test_decimals_from_set_are_accepted(helm):
    """`--set` hands decimals to the chart as strings; they must still become trainer flags."""
    docs = helm.render(
        WORKLOAD_CHART, set_values={"training.lr": "0.05", "training.momentum": "0.9", "tests.minAccuracy": "0.7"}
    )
    args = trainer_container(docs)["args"]
    assert (flag(args, "--lr"), flag(args, "--momentum")) == ("0.05", "0.9")
    assert one(docs, "Pod")["spec"]["containers"][0]["args"][1] == "0.7"


@pytest.mark.parametrize("lr", ["1.0", "2.0", "1.0e-2", "0.001", "1e-3", "10"])
def test_positive_lr_strings_from_set_are_accepted(helm, lr):
    assert flag(trainer_container(helm.render(WORKLOAD_CHART, set_values={"training.lr": lr}))["args"], "--lr") == lr


def test_checkpoint_every_zero_still_checkpoints_each_epoch(helm, tmp_path):
    args = trainer_container(render_with(helm, {"training": {"checkpointEvery": 0}}, tmp_path))["args"]
    assert flag(args, "--checkpoint-every") == "0"
    assert flag(args, "--checkpoint-dir") == "/mnt/pytorchjob-mnist/runs/default/mnist/checkpoints/" + flag(
        args, "--run-id"
    )


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


@pytest.mark.parametrize(
    "torchrun, trainer",
    [(False, ["python", "-m", "trainer"]), (True, ["python", "-m", "trainer.torchrun", "--module", "trainer"])],
)
def test_a_wrapper_runs_before_the_trainer_which_keeps_its_flags(helm, torchrun, trainer):
    wrapper = ["py-spy", "record", "-o", "/tmp/profile.svg", "--"]
    plain = trainer_container(helm.render(WORKLOAD_CHART, set_values={"torchrun.enabled": torchrun}))
    wrapped = trainer_container(
        helm.render(WORKLOAD_CHART, set_values={"wrapCommand": wrapper, "torchrun.enabled": torchrun})
    )
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
    docs = helm.render(
        WORKLOAD_CHART,
        set_values={
            "env[0].name": "TORCH_HOME",
            "env[0].value": "/models/torch",
            "env[1].name": "NCCL_DEBUG",
            "env[1].value": "INFO",
        },
    )
    for replica in ("Master", "Worker"):
        env = trainer_container(docs, replica)["env"]
        names = [e["name"] for e in env]
        assert len(names) == len(set(names)), names
        assert names == [name for name in CACHE_ENV | TRAINER_ENV if name != "TORCH_HOME"] + [
            "TORCH_HOME",
            "NCCL_DEBUG",
        ]
        assert env_of(docs, replica)["TORCH_HOME"] == "/models/torch"
