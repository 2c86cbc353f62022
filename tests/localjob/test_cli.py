"""`python -m ci.localjob` refuses what it cannot run with a message, before starting anything."""
from __future__ import annotations

import io
import socket

from ci.localjob.cli import main


def test_print_env_shows_every_pod_and_runs_nothing(tmp_path):
    out = io.StringIO()
    assert main(["--print-env", "--run-dir", str(tmp_path), "--set", "workers=2", "--port", "29555"], out=out) == 0
    text = out.getvalue()
    for rank, pod in enumerate(("mnist-master-0", "mnist-worker-0", "mnist-worker-1")):
        assert f"{pod}:" in text and f"RANK={rank} PET_NODE_RANK={rank}" in text
    assert "WORLD_SIZE=3" in text and "MASTER_PORT=29555" in text and "MASTER_ADDR=127.0.0.1" in text
    assert not (tmp_path / "mnist").exists(), "nothing ran"


def test_values_refused_by_the_chart_are_reported(tmp_path, capsys):
    assert main(["--run-dir", str(tmp_path), "--set", "wokers=2"]) == 2
    error = capsys.readouterr().err
    assert "helm template failed" in error and "wokers" in error


def test_busy_port_is_reported_with_the_fix(tmp_path, capsys):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        assert main(["--run-dir", str(tmp_path), "--port", str(port)]) == 2
    assert f"port {port} is already in use on this machine; stop what holds it or pass --port N" in capsys.readouterr().err


def test_suspended_job_is_not_run(tmp_path, capsys):
    assert main(["--run-dir", str(tmp_path), "--set", "runPolicy.suspend=true"]) == 2
    assert "runPolicy.suspend is true" in capsys.readouterr().err
