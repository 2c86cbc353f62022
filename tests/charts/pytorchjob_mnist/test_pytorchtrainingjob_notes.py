"""charts/pytorchjob-mnist's NOTES of a T9k PyTorchTrainingJob: T9k's commands, that the kind has not run
on a T9k cluster, and what restartPolicy ExitCode does under T9k's torchrun."""

from __future__ import annotations

import pytest

from tests.support.pytorchjob_mnist import PYTORCHTRAININGJOB

EXIT_CODE_WARNING = "restartPolicy is ExitCode, but a pod exits with torchrun's code, which is 1 when a worker fails"


@pytest.fixture
def kind():
    return PYTORCHTRAININGJOB


def test_notes_give_t9ks_commands(notes):
    text = notes()
    assert text.startswith(
        "PyTorchTrainingJob mnist (2 pods × 1 torchrun process(es), backend gloo, recipe fast) was submitted"
    )
    assert "It needs T9k's job controller." in text
    assert "it has not been run on a T9k cluster (see the chart README)" in text
    for command in (
        "kubectl get pj mnist -n ml -w",
        "kubectl get pods -n ml -l tensorstack.dev/owner-name=mnist",
        "kubectl logs -f -n ml -l tensorstack.dev/owner-name=mnist --prefix --tail=-1 --max-log-requests 2",
        "kubectl wait pj/mnist -n ml --for=jsonpath='{.status.phase}'=Succeeded --timeout=30m",
        "kubectl delete pj mnist -n ml",
    ):
        assert command in text, command
    assert "training-operator" not in text and "pytorchjobs" not in text


def test_notes_follow_every_pod_as_rank_0_may_be_in_any(notes):
    text = notes("--set", "workers=3")
    assert "torchrun's rendezvous may give rank 0 to any pod" in text
    assert "--max-log-requests 4" in text


def test_notes_warn_that_exit_code_retries_only_a_killed_pod(notes):
    text = notes("--set", "restartPolicy=ExitCode")
    assert EXIT_CODE_WARNING in text
    assert "T9k retries only a pod killed outright\n(137). Set restartPolicy=OnFailure" in text
    assert EXIT_CODE_WARNING not in notes()
