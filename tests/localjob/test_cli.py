"""`python -m ci.localjob` refuses what it cannot run with a message, before starting anything."""

from __future__ import annotations

import io
import socket
from types import SimpleNamespace

import pytest

from ci.localjob.cli import busy_ports, main
from ci.localjob.pods import REPO
from ci.localjob.render import find_helm
from tests.support.procs import free_port


class NothingRuns:
    """Stands in for the supervisor: what main prepares before the run is under test."""

    def __init__(self, *args, **kwargs):
        pass

    def say(self, message: str) -> None:
        pass

    def run(self) -> SimpleNamespace:
        return SimpleNamespace(state="Succeeded", reason="nothing ran", restarts=0, exit_codes={}, succeeded=True)


def test_print_env_shows_every_pod_and_runs_nothing(tmp_path):
    out = io.StringIO()
    assert main(["--print-env", "--run-dir", str(tmp_path), "--set", "workers=2", "--port", "29555"], out=out) == 0
    text = out.getvalue()
    for rank, pod in enumerate(("mnist-master-0", "mnist-worker-0", "mnist-worker-1")):
        assert f"{pod}:" in text and f"RANK={rank} PET_NODE_RANK={rank}" in text
    assert "WORLD_SIZE=3" in text and "MASTER_PORT=29555" in text and "MASTER_ADDR=127.0.0.1" in text
    assert not (tmp_path / "mnist").exists(), "nothing ran"


def test_print_env_shows_a_trainjobs_nodes_with_the_torch_plugins_env_only(tmp_path):
    out = io.StringIO()
    argv = ["--print-env", "--run-dir", str(tmp_path), "--set", "jobKind=TrainJob", "--set", "workers=3"]
    assert main([*argv, "--port", "29555"], out=out) == 0
    text = out.getvalue()
    for rank in range(4):
        assert (
            f"mnist-node-0-{rank}:" in text
            and f"injected env: PET_NNODES=4 PET_NPROC_PER_NODE=1 PET_NODE_RANK={rank} PET_MASTER_ADDR=127.0.0.1 "
            "PET_MASTER_PORT=29555\n"
            in text
        ), text
    assert "MASTER_ADDR=127.0.0.1 PET_MASTER_ADDR" not in text and "WORLD_SIZE" not in text


def test_suspended_trainjob_is_not_run(tmp_path, capsys):
    assert main(["--run-dir", str(tmp_path), "--set", "jobKind=TrainJob", "--set", "runPolicy.suspend=true"]) == 2
    assert "spec.suspend is true, so the Trainer would start no pods" in capsys.readouterr().err


def test_values_refused_by_the_chart_are_reported(tmp_path, capsys):
    assert main(["--run-dir", str(tmp_path), "--set", "wokers=2"]) == 2
    error = capsys.readouterr().err
    assert "helm template failed" in error and "wokers" in error


def test_guard_messages_come_without_helms_hint_at_a_flag_the_runner_lacks(tmp_path, capsys):
    assert main(["--run-dir", str(tmp_path), "--set", "backend=nccl"]) == 2
    error = capsys.readouterr().err
    assert "backend: nccl needs GPUs but gpu is 0; set gpu to the GPUs per replica, or backend to gloo" in error
    assert "--debug" not in error


def test_busy_port_is_reported_with_the_fix(tmp_path, capsys):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        assert main(["--run-dir", str(tmp_path), "--port", str(port)]) == 2
    assert (
        f"port {port} is already in use on this machine; stop what holds it or pass --port N (an "
        "elasticPolicy.rdzvPort of its own moves with --set elasticPolicy.rdzvPort=N instead)"
        in capsys.readouterr().err
    )


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
    assert busy_ports({port}) == []


def test_suspended_job_is_not_run(tmp_path, capsys):
    assert main(["--run-dir", str(tmp_path), "--set", "runPolicy.suspend=true"]) == 2
    assert "runPolicy.suspend is true" in capsys.readouterr().err


def test_make_run_falls_back_to_mnist_then_digits_unless_the_users_values_say_otherwise(tmp_path):
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
    assert "--fallback-dataset mnist,digits" in commands["default"]
    assert "--fallback-dataset" not in commands["strict"]


def test_fresh_starts_over_but_keeps_the_downloaded_datasets(tmp_path, monkeypatch):
    """The trainer's messages advise --fresh; on a cluster one deletes the run's directory, not the datasets."""
    release = tmp_path / "mnist"
    dataset = release / "volumes/mnist-storage/datasets/FashionMNIST/raw/train-images-idx3-ubyte.gz"
    run_state = [
        release / "volumes/mnist-storage/runs/default/mnist/checkpoints/checkpoint-5.pt",
        release / "volumes/hostpath-cache/x",
        release / "pods/mnist-master-0/pid",
        release / "logs/mnist-master-0.log",
    ]
    for path in [dataset, *run_state]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    monkeypatch.setattr("ci.localjob.cli.JobRunner", NothingRuns)
    assert main(["--fresh", "--run-dir", str(tmp_path), "--port", str(free_port())], out=io.StringIO()) == 0
    assert dataset.read_text() == "x"
    assert [path for path in run_state if path.exists()] == []
    assert sorted(p.name for p in (release / "volumes").rglob("*")) == sorted(
        ["mnist-storage", "hostpath-cache", "datasets", "FashionMNIST", "raw", dataset.name]
    )


@pytest.mark.parametrize(
    "option, environment, named",
    [
        (["--helm", "/nonexistent/helm"], {}, "--helm /nonexistent/helm"),
        ([], {"HELM": "helm-not-installed"}, "HELM=helm-not-installed"),
    ],
)
def test_a_helm_that_is_not_found_is_named(tmp_path, capsys, monkeypatch, option, environment, named):
    """Not silently replaced by the pinned Helm."""
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert main([*option, "--print-env", "--run-dir", str(tmp_path)]) == 2
    assert (
        f"localjob: {named}: neither a path nor a command on PATH; name an installed Helm, or leave it out "
        "to use the one `make tools` installs"
    ) in capsys.readouterr().err


def test_a_helm_may_be_named_as_a_command_on_path(tmp_path, monkeypatch):
    helm = tmp_path / "helm3"
    helm.write_text("#!/bin/sh\n")
    helm.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_helm("helm3") == str(helm)
    monkeypatch.setenv("HELM", "helm3")
    assert find_helm() == str(helm)


def test_the_helm_make_tools_links_is_found_in_tools_bin(tmp_path, monkeypatch):
    """TOOLS_BIN, which the Makefile exports, moves the tools for `make run` as for the tests."""
    monkeypatch.delenv("HELM", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("TOOLS_BIN", str(tmp_path))
    helm = tmp_path / "helm"
    helm.write_text("#!/bin/sh\n")
    helm.chmod(0o755)
    assert find_helm() == str(helm)
