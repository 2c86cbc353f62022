"""The Kubeflow SDK's local backends train with our trainer: one node in the LocalProcess backend's venv,
built from our wheel; several nodes in the container backend over our CPU image."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tests.support.procs import free_port

pytest.importorskip("kubeflow.trainer", reason="the Kubeflow SDK (kubeflow==0.5.0, a test extra) is not installed")

from kubeflow.trainer import CustomTrainer, LocalProcessBackendConfig, TrainerClient  # noqa: E402

pytestmark = pytest.mark.slow

# What rank 0 prints after each evaluation.
ACCURACY_LINE = re.compile(r"^epoch=1 accuracy=\d\.\d{4} val_loss=\d+\.\d{4}$", re.MULTILINE)
# The dev venv's torch, which the local wheels hold; the backend runs the venv's own torchrun.
TORCH = "torch==2.14.1"


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
        packages_to_install=[TORCH, f"pytorchjob-mnist @ {our_wheel(tmp_path).as_uri()}"],
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
