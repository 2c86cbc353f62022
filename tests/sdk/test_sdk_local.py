"""The Kubeflow SDK's local backends train with our trainer: one node in the LocalProcess backend's venv,
built from our wheel; several nodes in the container backend over our CPU image."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import tomllib

from tests.support.paths import REPO
from tests.support.podman import PODMAN_DIR, podman, podman_env, podman_unusable
from tests.support.procs import free_port

pytest.importorskip("kubeflow.trainer", reason="the Kubeflow SDK (kubeflow==0.5.0, a test extra) is not installed")

from kubeflow.trainer import CustomTrainer, LocalProcessBackendConfig, TrainerClient  # noqa: E402

pytestmark = pytest.mark.slow

# What rank 0 prints after each evaluation.
ACCURACY_LINE = re.compile(r"^epoch=1 accuracy=\d\.\d{4} val_loss=\d+\.\d{4}$", re.MULTILINE)
# The backend's fresh venv runs its own torchrun. The version whose CPU build this machine keeps on disk
# (as the CPU image takes it): it unpacks in seconds, the dev venv's CUDA build in over a minute. pip
# takes the torchvision that pins it from PyPI; the trainer never imports torchvision on `digits`.
TORCH = "torch==2.13.0"
# The CPU image's tag that tests/images/test_image_podman.py leaves for the next run's build cache.
CPU_IMAGE = "localhost/pytorchjob-mnist/trainer:smoke-cpu"


def train_digits(parameters):
    """Runs in the SDK's venv under torchrun, from a file of its own: everything it needs is imported here."""
    import sys

    from trainer.cli import main

    out = parameters["out"]
    sys.exit(
        main(
            [
                "--dataset",
                "digits",
                "--epochs",
                "1",
                "--no-cuda",
                "--data-dir",
                f"{out}/data",
                "--output-dir",
                f"{out}/model",
            ]
        )
    )


def our_wheel(directory: Path) -> Path:
    """The trainer package as a wheel, built from a copy so that the checkout gets no build directories."""
    source = directory / "src"
    shutil.copytree(REPO / "trainer", source / "trainer", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, source / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", directory, source],
        check=True,
    )
    (wheel,) = directory.glob("pytorchjob_mnist-*.whl")
    return wheel


def test_one_node_trains_in_the_local_process_backend(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the backend's job thread changes the process's working directory
    client = TrainerClient(LocalProcessBackendConfig())
    trainer = CustomTrainer(
        func=train_digits,
        func_args={"out": str(tmp_path)},
        # A direct reference: the backend parses a name out of each entry, which a bare path lacks.
        packages_to_install=[TORCH, f"pytorchjob-mnist[digits] @ {our_wheel(tmp_path).as_uri()}"],
        # The backend's process gets this env alone; torchrun's store takes a port of its own, not 29500.
        env={"PET_MASTER_PORT": str(free_port()), "PATH": os.environ["PATH"]},
    )
    name = client.train(runtime="torch-distributed", trainer=trainer)
    job = client.wait_for_job_status(name, status={"Complete", "Failed"}, timeout=900)
    logs = "\n".join(client.get_job_logs(name))
    assert job.status == "Complete", logs[-5000:]
    assert ACCURACY_LINE.search(logs), logs[-5000:]
    assert (tmp_path / "model/metrics.json").exists() and (tmp_path / "model/mnist_cnn.pt").stat().st_size > 0
    client.delete_job(name)


def container_backend_missing() -> str | None:
    """Why the container backend cannot run our CPU image here, or None."""
    if shutil.which("podman") is None:
        return "podman is not installed (apt-get install -y podman runc); the SDK's container backend needs it"
    if importlib.util.find_spec("podman") is None:  # the SDK's adapter, kubeflow[podman]
        return "the podman Python client (pip install 'kubeflow[podman]==0.5.0') is not installed"
    if reason := podman_unusable(rootful=True):
        return reason
    if podman("image", "exists", CPU_IMAGE, check=False).returncode != 0:
        return f"{CPU_IMAGE} is not in podman's store: tests/images/test_image_podman.py builds it (make image-offline)"
    return None


def train_digits_in_the_image():
    """The image's python runs this under the backend's torchrun, one container per node."""
    import sys

    from trainer.cli import main

    # The image's working directory is read-only for its user: every output goes to /tmp.
    sys.exit(
        main(["--dataset", "digits", "--epochs", "1", "--no-cuda", "--data-dir", "/tmp/data", "--dir", "/tmp/logs"])
    )


def fit_the_sandbox(client: TrainerClient) -> None:
    """Two things the SDK's podman adapter leaves to the engine, which this machine and our image need.

    - rlimits: podman's API service, unlike its CLI, does not apply containers.conf's default_ulimits,
      and its own defaults exceed this sandbox's hard limits ("error setting rlimit type 7", then 6);
      the adapter's containers.run passes none, so each run gets ci/podman/containers.conf's.
    - the entrypoint: the adapter passes the SDK's command as the container's CMD, which our image's
      ENTRYPOINT (python -m trainer) would take as trainer flags; Kubernetes' `command` replaces the
      ENTRYPOINT, so each run does the same.
    """
    conf = tomllib.loads((PODMAN_DIR / "containers.conf").read_text())
    ulimits = []
    for limit in conf["containers"]["default_ulimits"]:
        name, values = limit.split("=")
        soft, hard = values.split(":")
        ulimits.append({"Name": name, "Soft": int(soft), "Hard": int(hard)})
    containers = client.backend._adapter.client.containers
    run = containers.run

    def run_like_kubernetes(*, command, **kwargs):
        return run(entrypoint=command[:1], command=command[1:], ulimits=ulimits, **kwargs)

    containers.run = run_like_kubernetes


def test_two_nodes_train_in_the_container_backend_over_our_image(tmp_path):
    if reason := container_backend_missing():
        pytest.skip(reason)
    from kubeflow.trainer import ContainerBackendConfig, TrainingRuntimeSource

    socket = tmp_path / "podman.sock"
    service = subprocess.Popen(
        ["podman", "system", "service", "--time", "0", f"unix://{socket}"], env=podman_env(), start_new_session=True
    )
    try:
        for _ in range(100):
            if socket.exists():
                break
            time.sleep(0.1)
        client = TrainerClient(
            ContainerBackendConfig(
                container_runtime="podman",
                container_host=f"unix://{socket}",
                pull_policy="Never",
                runtime_source=TrainingRuntimeSource(sources=[]),  # the SDK's built-in runtimes: no network here
            )
        )
        fit_the_sandbox(client)
        trainer = CustomTrainer(func=train_digits_in_the_image, image=CPU_IMAGE, num_nodes=2)
        name = client.train(runtime="torch-distributed", trainer=trainer)
        job = client.wait_for_job_status(name, status={"Complete", "Failed"}, timeout=900)
        # The SDK's podman adapter hands back podman-py's log generator unread (its repr, not the lines),
        # so node 0's log comes from podman itself.
        logs = podman("logs", f"{name}-node-0").stdout
        assert job.status == "Complete", logs[-5000:]
        assert ACCURACY_LINE.search(logs) and "World Size: 2. Rank: 0." in logs, logs[-5000:]
        client.delete_job(name)
    finally:
        service.terminate()
        service.wait(timeout=30)
