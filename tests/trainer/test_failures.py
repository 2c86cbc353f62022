"""The failure taxonomy: each kind exits with its code (trainer/failures.py) through cli.main."""

from __future__ import annotations

import pickle

import pytest

from trainer import cli, failures

PERMANENT = [
    failures.LaunchError,
    failures.DatasetUnavailable,
    failures.IncompatibleCheckpoint,
    failures.NonFiniteLoss,
    failures.StorageFull,
    failures.NotWritableError,
]


@pytest.mark.parametrize(
    "error, code",
    [(kind("the reason"), 1) for kind in PERMANENT]
    + [(failures.PeersUnreachable("the reason"), 138), (RuntimeError("gloo: connection reset by peer"), 138)],
    ids=[kind.__name__ for kind in PERMANENT] + ["PeersUnreachable", "unforeseen"],
)
def test_main_exits_with_the_failures_code(monkeypatch, capsys, error, code):
    monkeypatch.setattr(cli, "exit_on_sigterm", lambda: None)
    monkeypatch.setattr(cli, "run", lambda args: (_ for _ in ()).throw(error))
    assert cli.main(["--dir", ""]) == code
    one_line = f"error: {error}" in capsys.readouterr().err
    assert one_line is isinstance(error, failures.Failure), "a Failure in one line, anything else with its traceback"


@pytest.mark.parametrize("kind", [*PERMANENT, failures.PeersUnreachable], ids=lambda kind: kind.__name__)
def test_a_failure_reaches_the_other_ranks_as_itself(kind):
    """DistContext.main_failure_stops_all pickles rank 0's failure to the others."""
    copy = pickle.loads(pickle.dumps(kind("the reason")))
    assert type(copy) is kind and str(copy) == "the reason" and copy.exit_code == kind.exit_code
