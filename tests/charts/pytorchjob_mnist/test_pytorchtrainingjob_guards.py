"""What a T9k PyTorchTrainingJob's guards let through (test_shared_guards.py's table holds their messages);
the schema refuses a t9k block it does not know."""

from __future__ import annotations

import pytest

from tests.support.helm import SCHEMA_REFUSAL
from tests.support.paths import WORKLOAD_CHART
from tests.support.pytorchjob_mnist import PYTORCHTRAININGJOB, render_with, template_error


def refusal(helm, tmp_path, **values) -> str:
    return template_error(helm, PYTORCHTRAININGJOB.values(values), tmp_path)


def test_args_may_start_with_a_script_or_a_module(helm, tmp_path):
    for args in (["-m", "trainer", "--epochs=1"], ["/workspace/train.py", "--epochs=1"]):
        assert render_with(helm, PYTORCHTRAININGJOB.values({"args": args}), tmp_path), args


def test_values_without_a_t9k_counterpart_render_at_their_defaults(helm):
    """A parent chart or --set that repeats a default still renders."""
    result = helm.template(
        WORKLOAD_CHART,
        set_values={"jobKind": "PyTorchTrainingJob", "elasticPolicy.enabled": False, "kueue.queueName": ""},
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    "t9k, key",
    [
        ({"priority": 101}, "priority"),
        ({"priority": -1}, "priority"),
        ({"queue": "Team_A"}, "queue"),
        ({"maxRestarts": -1}, "maxRestarts"),
        ({"restarts": 3}, "restarts"),
    ],
)
def test_the_schema_refuses_what_t9k_would_not_take(helm, tmp_path, t9k, key):
    error = refusal(helm, tmp_path, t9k=t9k)
    assert SCHEMA_REFUSAL in error and key in error, error
