"""The job kinds as plug-ins: each module of ci/localjob/kinds is a kind, found without a list to edit; the
runner's own modules name none; and the trainer's exit codes mean what trainer/failures.py says to every
kind's ExitCode rule."""

from __future__ import annotations

import pkgutil
import re
import sys

import pytest

from ci.localjob import kinds
from ci.localjob.kinds import KINDS, job_model
from tests.support.paths import REPO
from trainer.failures import EXIT_PERMANENT, EXIT_RETRYABLE, EXIT_SIGTERM

# The modules that run every kind alike.
KIND_FREE = ("cli", "pods", "supervisor", "render")
# What only a kind may know: its name, its replica roles, its controller's variables and restart policies.
KIND_WORDS = re.compile(rf"\b(?:Master|Worker|ExitCode|OnFailure|Never|Always|{'|'.join(KINDS)})\b|PET_")

NEW_KIND = """
from ci.localjob.kinds.pytorchjob import PyTorchJobModel


class MPIJobModel(PyTorchJobModel):
    kind = "MPIJob"
"""


def test_every_module_is_a_kind():
    modules = {module.name for module in pkgutil.iter_modules(kinds.__path__)} - {"base"}
    assert {model.__module__.rpartition(".")[2] for model in KINDS.values()} == modules
    assert set(KINDS) == {"PyTorchJob", "TrainJob", "PyTorchTrainingJob"}


def test_a_new_module_is_a_new_kind(tmp_path, monkeypatch):
    (tmp_path / "mpijob.py").write_text(NEW_KIND)
    monkeypatch.setattr(kinds, "__path__", [*kinds.__path__, str(tmp_path)])
    monkeypatch.delitem(sys.modules, "ci.localjob.kinds.mpijob", raising=False)
    try:
        found = kinds._discover()
    finally:
        sys.modules.pop("ci.localjob.kinds.mpijob", None)
    assert set(found) == {*KINDS, "MPIJob"}


def test_an_unknown_kind_names_those_that_run():
    with pytest.raises(ValueError, match="kind MPIJob: the local runner runs PyTorchJob, PyTorchTrainingJob, TrainJob"):
        job_model({"kind": "MPIJob", "metadata": {"name": "x"}, "spec": {}})


@pytest.mark.parametrize("module", KIND_FREE)
def test_the_runners_modules_name_no_kind(module):
    named = sorted(set(KIND_WORDS.findall((REPO / "ci" / "localjob" / f"{module}.py").read_text())))
    assert named == [], f"ci/localjob/{module}.py names {named}: that belongs in its kind's module"


@pytest.mark.parametrize("kind", ["PyTorchJob", "PyTorchTrainingJob"])
def test_the_trainers_exit_codes_mean_to_each_exit_code_policy_what_it_says(kind):
    """trainer/failures.py: EXIT_RETRYABLE is retried by every ExitCode policy, EXIT_PERMANENT by none."""
    model = KINDS[kind]({"kind": kind, "metadata": {"name": "x"}, "spec": {}})
    assert model.restarts("ExitCode", EXIT_RETRYABLE) and model.restarts("ExitCode", EXIT_SIGTERM)
    assert not model.restarts("ExitCode", EXIT_PERMANENT)
