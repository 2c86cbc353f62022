"""charts/pytorchjob-mnist's trainer container under every job kind: values that become trainer flags, a
command, args or wrapper of the user's, and env; and the facts the chart shares with the trainer (its
schema's lists, and the guards that refuse what the trainer would), checked against trainer/ itself."""

from __future__ import annotations

import json
import re

import pytest

from tests.support.helm import one
from tests.support.paths import WORKLOAD_CHART
from tests.support.pytorchjob_mnist import (
    CACHE_ENV,
    TRAINER_ENV,
    env_of,
    flag,
    kinds_taking,
    render_helpers,
    render_with,
    template_error,
    trainer_container,
    trainer_pods,
)
from trainer import cli
from trainer.config import RECIPES
from trainer.data import DATASETS
from trainer.distributed import BACKENDS

# The trainer's backends that the chart does not offer, and why.
BACKENDS_LEFT_OUT = {"mpi": "the images' torch is built without MPI"}


def test_the_schemas_lists_are_the_trainers():
    """The schema refuses what the trainer would refuse in every pod, and nothing the trainer takes."""
    training = json.loads((WORKLOAD_CHART / "values.schema.json").read_text())["properties"]
    schema = training["training"]["properties"]
    assert sorted(schema["recipe"]["enum"]) == sorted(RECIPES)
    assert schema["dataset"]["enum"] == list(DATASETS)
    chain = re.fullmatch(r"\^\(\(([-a-z|]+)\)\(,\(\1\)\)\*\)\?\$", schema["fallbackDataset"]["pattern"])
    assert chain and chain.group(1).split("|") == list(DATASETS), schema["fallbackDataset"]["pattern"]
    assert training["backend"]["enum"] == [b for b in BACKENDS if b not in BACKENDS_LEFT_OUT]


# Guards that restate a check of the trainer's own: values, the chart's message, the trainer's.
TRAINER_CHECKS = {
    "zero-momentum-with-fast-recipe": (
        {"training": {"momentum": 0}},
        "training.momentum: 0 with training.recipe: fast",
        "--recipe fast's Nesterov momentum needs --momentum > 0",
    ),
    "nccl-without-gpu": (
        {"backend": "nccl"},
        "backend: nccl needs GPUs but gpu is 0",
        "--backend nccl needs CUDA, which --no-cuda turns off",
    ),
}


def trainer_refusal(args: list[str], capsys) -> str:
    """The trainer's argument error for `args`, as every pod would print it."""
    with pytest.raises(SystemExit) as refused:
        cli.parse_args(args)
    assert refused.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("case", sorted(TRAINER_CHECKS))
def test_a_guard_refuses_what_the_trainer_would_refuse(helm, helpers_chart, tmp_path, capsys, kind, case):
    """The chart's guard and the trainer's check agree: the flags the chart would have generated for the
    refused values are refused by the trainer's own argument validation, in process."""
    values, chart_says, trainer_says = TRAINER_CHECKS[case]
    assert chart_says in template_error(helm, kind.values(values), tmp_path)
    args = render_helpers(helm, helpers_chart, kind.values(values), tmp_path)["trainerArgs"]
    assert trainer_says in trainer_refusal(args, capsys)


def test_no_nesterov_in_extra_args_passes_the_guard_and_the_trainer(helm, helpers_chart, tmp_path, capsys, kind):
    values = kind.values({"training": {"momentum": 0, "extraArgs": ["--no-nesterov"]}})
    args = trainer_container(render_with(helm, values, tmp_path))["args"][len(kind.args_prefix) :]
    parsed = cli.parse_args(args)
    assert (parsed.momentum, parsed.nesterov) == (0, False)
    assert args == render_helpers(helm, helpers_chart, values, tmp_path)["trainerArgs"], "the preview's are the job's"
    assert "needs --momentum > 0" in trainer_refusal(args[:-1], capsys), "without it the trainer refuses"


def test_the_trainer_takes_every_flag_the_chart_generates(rendered, kind):
    for name, docs in rendered.items():
        args = trainer_container(docs).get("args", [])[len(kind.args_prefix) :]
        if "--run-id" not in args:
            continue  # a user's own args
        try:
            cli.parse_args(args)
        except SystemExit:
            pytest.fail(f"{name}: the trainer refuses {args}")


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


@pytest.mark.both_helm_majors
def test_numbers_and_booleans_in_extra_args_and_args_become_strings(helm, tmp_path, kind):
    """`--set training.extraArgs={--limit-train,3000}` hands the chart the number 3000, and a values file
    `true` a boolean; container args are strings. The run id does not depend on how they were written."""
    words = ["--limit-train", "3000", "--eval", "true"]
    from_set = trainer_container(helm.render(WORKLOAD_CHART, set_values=kind.values({"training.extraArgs": words})))
    typed = ["--limit-train", 3000, "--eval", True]
    from_file = trainer_container(render_with(helm, kind.values({"training": {"extraArgs": typed}}), tmp_path))
    as_strings = trainer_container(render_with(helm, kind.values({"training": {"extraArgs": words}}), tmp_path))
    for container in (from_set, from_file):
        assert container["args"][-4:] == words
        assert flag(container["args"], "--run-id") == flag(as_strings["args"], "--run-id")
    prefix = list(kind.args_prefix)
    values_file_numbers = [*prefix, "--max", 1000000, "--ratio", 0.25]
    args = trainer_container(render_with(helm, kind.values({"args": values_file_numbers}), tmp_path))["args"]
    assert args == [*prefix, "--max", "1000000", "--ratio", "0.25"], "a values file's whole numbers are floats"
    set_args = kind.values({"args": [*prefix, "--epochs", "2"]})
    assert trainer_container(helm.render(WORKLOAD_CHART, set_values=set_args))["args"] == [*prefix, "--epochs", "2"]


@pytest.mark.both_helm_majors
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


def test_the_fast_recipe_leaves_batch_lr_and_momentum_to_the_trainer(default_docs):
    args = trainer_container(default_docs)["args"]
    assert flag(args, "--recipe") == "fast"
    assert not {"--batch-size", "--lr", "--momentum"} & set(args)


@pytest.mark.parametrize("kind", kinds_taking("wrapCommand"))
def test_a_wrapper_goes_before_the_trainer(rendered):
    container = trainer_container(rendered["wrapped-kueue-no-shm"])
    assert container["command"][:5] == ["py-spy", "record", "-o", "/tmp/profile.svg", "--"]
    assert container["command"][5:] in (
        ["python", "-m", "trainer"],
        ["python", "-m", "trainer.torchrun", "--module", "trainer"],
    )
    assert container["args"] == trainer_container(rendered["defaults"])["args"], "the trainer keeps its flags"


def test_the_seed_recipe_is_spelled_out_and_the_caches_follow_their_path(rendered):
    container = trainer_container(rendered["seed-recipe-own-cache-path"])
    args = container["args"]
    assert (flag(args, "--recipe"), flag(args, "--batch-size"), flag(args, "--lr"), flag(args, "--momentum")) == (
        "seed",
        "64",
        "0.01",
        "0.5",
    )
    assert args[-2:] == ["--threads", "2"]
    assert {"name": "TORCH_HOME", "value": "/cache/torch"} in container["env"]


@pytest.mark.parametrize("kind", kinds_taking("command"))
def test_a_command_without_args_gets_no_trainer_flags(helm, kind):
    """A user's own script would die on the trainer's flags ("unrecognized arguments")."""
    docs = helm.render(WORKLOAD_CHART, set_values=kind.values({"command": ["python", "/app/train.py"]}))
    container = trainer_container(docs)
    assert container["command"] == ["python", "/app/train.py"]
    assert "args" not in container
    assert "PYTHONSAFEPATH" not in env_of(docs), "the script may import its neighbours"


def test_user_env_replaces_the_charts_entry_of_the_same_name(helm, kind):
    """env is a keyed list: a duplicate name would make the API server refuse the job."""
    docs = helm.render(
        WORKLOAD_CHART,
        set_values=kind.values(
            {
                "env[0].name": "TORCH_HOME",
                "env[0].value": "/models/torch",
                "env[1].name": "NCCL_DEBUG",
                "env[1].value": "INFO",
            }
        ),
    )
    for role in trainer_pods(docs):
        env = trainer_container(docs, role)["env"]
        names = [e["name"] for e in env]
        assert len(names) == len(set(names)), names
        assert names == [name for name in CACHE_ENV | TRAINER_ENV if name != "TORCH_HOME"] + [
            "TORCH_HOME",
            "NCCL_DEBUG",
        ]
        assert env_of(docs, role)["TORCH_HOME"] == "/models/torch"
