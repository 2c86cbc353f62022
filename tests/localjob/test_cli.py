"""`python -m ci.localjob` refuses what it cannot run with a message, before starting anything."""
from __future__ import annotations

import io
import socket
from types import SimpleNamespace

import pytest

from ci.localjob.cli import busy_ports, main
from ci.localjob.pods import REPO


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


def test_a_port_whose_last_connection_is_in_time_wait_is_free():
    """Right after a run, its closed connections linger in TIME_WAIT on the port; a rerun must start."""
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as torch's TCPStore listens
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client:
            accepted, _ = server.accept()
            accepted.close()  # the side that closes first keeps the port in TIME_WAIT
            client.recv(1)
    with socket.socket() as plain, pytest.raises(OSError):
        plain.bind(("127.0.0.1", port))  # a bind without SO_REUSEADDR still fails
    pod = SimpleNamespace(injected_env=(("MASTER_PORT", str(port)),))
    assert busy_ports([pod]) == []


def test_suspended_job_is_not_run(tmp_path, capsys):
    assert main(["--run-dir", str(tmp_path), "--set", "runPolicy.suspend=true"]) == 2
    assert "runPolicy.suspend is true" in capsys.readouterr().err


def test_make_run_falls_back_to_digits_unless_the_users_values_say_otherwise(tmp_path):
    """`make run` reads ci/localjob/run-values.yaml before VALUES, so a user's file wins."""
    run_values = str(REPO / "ci/localjob/run-values.yaml")
    strict = tmp_path / "strict.yaml"
    strict.write_text('training:\n  fallbackDataset: ""\n')
    commands = {}
    for name, files in (("default", [run_values]), ("strict", [run_values, str(strict)])):
        out = io.StringIO()
        argv = ["--print-env", "--run-dir", str(tmp_path)] + [arg for f in files for arg in ("-f", f)]
        assert main(argv, out=out) == 0
        commands[name] = out.getvalue()
    assert "--fallback-dataset digits" in commands["default"]
    assert "--fallback-dataset" not in commands["strict"]
