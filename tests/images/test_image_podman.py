"""Build the CPU and CUDA images with rootful podman (ci/podman/build-offline.sh) and run a 2-replica
DDP job in each.

The job is what the training-operator makes of the chart's default PyTorchJob, minus Kubernetes: a
`<job>-master-0` and a `<job>-worker-0` container on one user-created network that resolve each other
by name, the operator's env contract (MASTER_ADDR, MASTER_PORT=23456, WORLD_SIZE=2, RANK,
PYTHONUNBUFFERED), the image's numeric user, read-only root filesystem with tmpfs at /tmp and the cache
dir, and a host directory as the "PVC".

It runs wherever rootful podman and debootstrap are installed (`.ci/run` installs them on Debian) and
skips, saying what is missing, elsewhere; PODMAN_SMOKE=0 opts out. Measured on the 2-core
sandbox (shared with other jobs): debootstrap base 2.1 min (then cached as an image tag until
ci/podman/offline-base.sh changes), CPU image build 3.6 min cold / 2-3 min after a trainer change (torch's
layer cached) / 40 s when nothing changed, DDP run 0.7 min: about 6.5 min cold, 1.5-3.7 min warm.
The CUDA image (about 4.2 GB, its wheels from PyPI) adds about 5.5 min cold, build and job, so it is built
only on a machine with a GPU or with CUDA_IMAGE_SMOKE=1 (`make test` skips it elsewhere, saying so).

This sandbox cannot reach download.pytorch.org, so the CPU build takes torch from the local CPU wheel
and torchvision from PyPI, whose Linux build is linked against CUDA torch and cannot load beside it.
That job trains on `digits` (scikit-learn's data file, which the image carries without scikit-learn); the
trainer imports torchvision only to download missing files; the published CPU image gets torchvision's
CPU build from the PyTorch index.
The CUDA image is PyPI's torch and torchvision as published; with no GPU here it trains on the CPU,
and its job reads FashionMNIST IDX files from a mounted directory.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.dockerfile import runtime_user, source_revision
from tests.support.idx import write_idx_dataset
from tests.support.paths import REPO
from tests.support.podman import PODMAN_DIR, podman, podman_env, podman_unusable
from tests.support.procs import run_stoppable
from tests.support.version import PROJECT_VERSION
from trainer.data import load

# Each session tags its own build, so two test runs sharing one podman store (a developer's and CI's)
# never inspect each other's image; CACHE_ANCHOR keeps each variant's newest build for the next run's cache.
CACHE_ANCHOR = "localhost/pytorchjob-mnist/trainer:smoke-{variant}"
# The CUDA build holds its venv in a build stage and in the image, beside pip's cache of the wheels.
CUDA_BUILD_FREE_BYTES = 25 * 2**30
CACHE_DIR = "/var/cache/trainer"  # the chart's scratch.cachePath and the image's XDG_CACHE_HOME
UID, GID = runtime_user()
# The chart's pod: its user (the image's), a read-only root filesystem, and writable /tmp and cache directories.
AS_THE_CHART_RUNS_IT = (
    "--user",
    f"{UID}:{GID}",
    "--read-only",
    "--tmpfs",
    "/tmp",
    "--tmpfs",
    f"{CACHE_DIR}:rw,mode=1777",
)

pytestmark = pytest.mark.slow


def podman_missing() -> str | None:
    if os.environ.get("PODMAN_SMOKE") == "0":
        return "PODMAN_SMOKE=0 opts out of building the images with podman and running DDP jobs in them"
    if shutil.which("podman") is None:
        return (
            "podman is not installed (apt-get install -y podman runc debootstrap); it builds and runs the images here"
        )
    if os.geteuid() != 0:
        return "needs rootful podman (run as root): rootless podman cannot debootstrap or import the offline base"
    if shutil.which("debootstrap") is None:
        return "debootstrap is not installed: it makes the offline base image (no registry here)"
    return podman_unusable(rootful=True)


def cpu_build_missing() -> str | None:
    if not os.environ.get("TORCH_WHEEL") and not list(Path("/opt/wheels").glob("torch-*+cpu-*.whl")):
        return "no local CPU torch wheel (/opt/wheels or TORCH_WHEEL): the offline CPU build needs one"
    return None


def cuda_build_missing() -> str | None:
    if os.environ.get("CUDA_IMAGE_SMOKE") != "1" and not Path("/dev/nvidia0").exists():
        return (
            "the CUDA image (4.2 GB) is built only where a GPU is (/dev/nvidia0) or CUDA_IMAGE_SMOKE=1 asks for it "
            "(before a release): without a GPU its job trains on the CPU, as the CPU image's does"
        )
    store = podman("info", "--format", "{{.Store.GraphRoot}}").stdout.strip()
    free = shutil.disk_usage(store).free
    if free < CUDA_BUILD_FREE_BYTES:
        return (
            f"the CUDA image build needs {CUDA_BUILD_FREE_BYTES / 2**30:.0f} GiB free in podman's store "
            f"{store}, which has {free / 2**30:.1f} GiB"
        )
    return None


def built_image(variant: str, missing: Callable[[], str | None]) -> Iterator[str]:
    """Build `variant` for this test session; afterwards its tag becomes the variant's cache anchor."""
    reason = podman_missing() or missing()
    if reason:
        pytest.skip(reason)
    anchor = CACHE_ANCHOR.format(variant=variant)
    tag = f"{anchor}-{uuid.uuid4().hex[:8]}"
    # Stopped with SIGTERM, so that the script's trap removes the torch wheel it links into docker/wheels/.
    build = run_stoppable(
        [str(PODMAN_DIR / "build-offline.sh")], 2400, 60, env={**podman_env(), "IMG": tag, "VARIANT": variant}
    )
    assert build.returncode == 0, f"{variant} image build failed:\n{build.stdout[-4000:]}\n{build.stderr[-4000:]}"
    yield tag
    previous = podman("image", "inspect", "--format", "{{.Id}}", anchor, check=False).stdout.strip()
    podman("tag", tag, anchor, check=False)
    podman("untag", tag, tag, check=False)
    # The anchor's previous build is now untagged: remove it, or every run leaves its layers behind.
    if previous and previous != podman("image", "inspect", "--format", "{{.Id}}", anchor, check=False).stdout.strip():
        podman("rmi", previous, check=False)


@pytest.fixture(scope="module")
def image() -> Iterator[str]:
    yield from built_image("cpu", cpu_build_missing)


@pytest.fixture(scope="module")
def cuda_image() -> Iterator[str]:
    yield from built_image("cuda", cuda_build_missing)


@pytest.fixture(scope="module")
def offline_base() -> str:
    """The debootstrapped base image alone (no torch wheel, no image build), for builds that stop early."""
    reason = podman_missing()
    if reason:
        pytest.skip(reason)
    base = run_stoppable([str(PODMAN_DIR / "offline-base.sh")], 1200, 60, env=podman_env())
    assert base.returncode == 0, f"offline base failed:\n{base.stdout[-4000:]}\n{base.stderr[-4000:]}"
    return base.stdout.strip()


def test_dockerfile_refuses_an_unknown_variant(offline_base: str):
    """`docker build --build-arg VARIANT=gpu` bypasses ci/build-image.sh; the Dockerfile itself says what is wrong."""
    result = podman(
        "build",
        "--file",
        str(REPO / "docker" / "Dockerfile"),
        "--build-arg",
        "VARIANT=gpu",
        "--build-arg",
        f"BASE_IMAGE={offline_base}",
        str(REPO),
        check=False,
    )
    assert result.returncode != 0
    assert "build arg VARIANT must be cpu or cuda, got 'gpu'" in result.stdout + result.stderr


def test_image_metadata(image: str):
    config = json.loads(podman("image", "inspect", image).stdout)[0]["Config"]
    assert config["User"] == f"{UID}:{GID}", "numeric non-root user, so runAsNonRoot can verify it"
    assert config["Entrypoint"] == ["python", "-m", "trainer"]
    env = dict(item.split("=", 1) for item in config["Env"])
    assert env["PYTHONUNBUFFERED"] == "1" and env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert env["XDG_CACHE_HOME"] == CACHE_DIR and env["TORCH_HOME"].startswith(CACHE_DIR + "/")
    assert env["CUDA_CACHE_PATH"].startswith(CACHE_DIR + "/"), "CUDA's JIT cache, not the read-only $HOME/.nv"
    labels = config["Labels"]
    assert labels["org.opencontainers.image.version"] == PROJECT_VERSION
    assert labels["org.opencontainers.image.revision"] == source_revision()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", labels["org.opencontainers.image.created"])


def python_in(image: str, code: str) -> subprocess.CompletedProcess[str]:
    """Run Python code in the image, in place of its entrypoint."""
    return podman("run", "--rm", "--entrypoint", "python", image, "-c", code)


def test_image_has_the_cpu_torch_build(image: str):
    probe = python_in(
        image,
        "import torch, trainer; print(torch.__version__, torch.cuda.is_available())",
    )
    version, cuda = probe.stdout.split()
    assert version.endswith("+cpu") and cuda == "False", probe.stdout


def test_the_image_holds_what_the_trainer_loads_and_its_user(image: str):
    """The user has its passwd entry; pip, scikit-learn with SciPy, Triton and torch's headers and test
    binaries stay out (docker/Dockerfile), the digits file comes in."""
    probe = python_in(
        image,
        "import getpass, importlib.util, os, pathlib, torch, trainer.data as data; "
        "print(os.getuid(), os.getgid(), getpass.getuser()); "
        "print(*[m for m in ('pip', 'sklearn', 'scipy', 'triton') if importlib.util.find_spec(m)]); "
        "root = pathlib.Path(torch.__file__).parent; "
        "print(*[p for p in ('include', 'test', 'bin/test_api') if (root / p).exists()]); "
        "print(data.digits_file())",
    )
    ids, modules, torch_parts, digits = probe.stdout.splitlines()
    assert ids == f"{UID} {GID} trainer"
    assert modules == "" and torch_parts == "", probe.stdout
    assert digits.endswith("/site-packages/trainer/digits.csv.gz")


def run_ddp_job(image: str, output: Path, *trainer_args: str, volumes: tuple[str, ...] = ()) -> tuple[str, Path]:
    """Run the 2-replica job to the end; returns the master's log and its model directory."""
    job = f"smoke-{uuid.uuid4().hex[:8]}"
    network = f"{job}-net"
    output.mkdir()
    os.chown(output, UID, GID)
    replicas = {f"{job}-master-0": 0, f"{job}-worker-0": 1}
    podman("network", "create", network)
    try:
        for name, rank in replicas.items():
            podman(
                "run",
                "--detach",
                "--name",
                name,
                "--network",
                network,
                *AS_THE_CHART_RUNS_IT,
                "--volume",
                f"{output}:/pvc",
                *(arg for volume in volumes for arg in ("--volume", volume)),
                # What the training-operator injects for a 1 Master + 1 Worker PyTorchJob.
                "--env",
                f"MASTER_ADDR={job}-master-0",
                "--env",
                "MASTER_PORT=23456",
                "--env",
                "WORLD_SIZE=2",
                "--env",
                f"RANK={rank}",
                "--env",
                "PYTHONUNBUFFERED=1",
                image,
                *trainer_args,
                "--epochs",
                "5",
                "--threads",
                "1",
                "--pg-timeout",
                "120",
                "--output-dir",
                f"/pvc/{name}/model",
                "--log-dir",
                f"/pvc/{name}/logs",
                "--checkpoint-dir",
                f"/pvc/{name}/checkpoints",
            )
        exit_codes = {name: podman("wait", name, timeout=600).stdout.strip() for name in replicas}
        logs = {name: podman("logs", name).stdout + podman("logs", name).stderr for name in replicas}
        assert exit_codes == dict.fromkeys(replicas, "0"), "\n".join(
            f"== {n}\n{log[-3000:]}" for n, log in logs.items()
        )
    finally:
        for name in replicas:
            podman("rm", "--force", name, check=False)
        podman("network", "rm", "--force", network, check=False)

    master, worker = replicas
    master_log = logs[master]
    assert re.search(r"^Train Epoch: 1 \[\d+/\d+ \(\d+%\)\]\tloss=\d", master_log, re.M)
    assert re.search(r"^epoch=5 accuracy=0\.\d+ val_loss=\d", master_log, re.M), "Katib StdOut metric line"
    assert "{metricName: accuracy, metricValue:" in master_log
    assert list((output / master / "checkpoints").glob("checkpoint-*.pt")), "rank 0 checkpoints"
    # Only rank 0 writes the model.
    assert not (output / worker / "model" / "mnist_cnn.pt").exists()
    model_dir = output / master / "model"
    assert (model_dir / "mnist_cnn.pt").stat().st_size > 1_000_000  # 431,080 float32 parameters
    return master_log, model_dir


def test_ddp_job_with_the_operator_env_contract(image: str, tmp_path: Path):
    _, model_dir = run_ddp_job(image, tmp_path / "pvc", "--dataset", "digits")
    metrics = json.loads((model_dir / "metrics.json").read_text())
    assert metrics["world_size"] == 2 and metrics["dataset"] == "digits" and metrics["epochs"] == 5
    assert metrics["accuracy"] > 0.5, "5 epochs on digits learn something; chance is 0.1"


def test_the_charts_torchrun_launcher_runs_in_the_image(image: str):
    """torchrun.enabled's command (`python -m trainer.torchrun --module trainer`), as the chart runs the
    container: two processes train, and a worker's own exit code (2, a bad flag) is the container's."""

    def torchrun(*trainer_args: str) -> subprocess.CompletedProcess:
        return podman(
            "run",
            "--rm",
            *AS_THE_CHART_RUNS_IT,
            "--entrypoint",
            "python",
            image,
            "-m",
            "trainer.torchrun",
            "--standalone",
            "--nproc-per-node",
            "2",
            "--module",
            "trainer",
            *trainer_args,
            check=False,
        )

    trained = torchrun("--dataset", "digits", "--epochs", "1", "--threads", "1", "--dir", "")
    assert trained.returncode == 0, trained.stdout[-3000:] + trained.stderr[-3000:]
    assert "World Size: 2. Rank: 0." in trained.stdout
    refused = torchrun("--epochs", "-1")
    assert refused.returncode == 2, refused.stdout[-3000:] + refused.stderr[-3000:]


def test_cuda_image_has_the_cuda_torch_build(cuda_image: str):
    probe = python_in(
        cuda_image,
        "import importlib.util, torch, torch.distributed as dist, torchvision, trainer; "
        "print(torch.version.cuda, torch.backends.cudnn.version(), dist.is_nccl_available(), "
        "importlib.util.find_spec('triton') is None)",
    )
    cuda, cudnn, nccl, no_triton = probe.stdout.split()
    assert cuda != "None" and cudnn != "None" and nccl == "True", probe.stdout
    assert no_triton == "True", "only torch.compile loads Triton, and the image has no compiler for it"


def test_cuda_image_ddp_job_reads_fashion_mnist_files(cuda_image: str, tmp_path: Path):
    """The image reads FashionMNIST's IDX files from a volume, made here from `digits` (no download here)."""
    data = tmp_path / "data"
    write_idx_dataset(data, load("digits", tmp_path, download=False))
    log, model_dir = run_ddp_job(
        cuda_image, tmp_path / "pvc", "--dataset", "fashion-mnist", "--data-dir", "/data", volumes=(f"{data}:/data:ro",)
    )
    assert "Device: cpu" in log, "no GPU here: the CUDA build falls back to the CPU"
    metrics = json.loads((model_dir / "metrics.json").read_text())
    assert metrics["dataset"] == "fashion-mnist" and metrics["test_samples"] == 359  # digits' test split
    assert metrics["accuracy"] > 0.5, "5 epochs on digits learn something; chance is 0.1"


def test_the_seed_guides_command_runs_in_the_image(cuda_image: str, tmp_path: Path):
    """The seed guides' simple.yaml with only its image swapped runs `python3 /opt/pytorch-mnist/mnist.py
    --epochs=1`: this trainer answers it with the seed's settings. In the CUDA image, whose torchvision loads
    here (see above), on FashionMNIST files made from `digits` where the seed's default --data-dir looks."""
    data = tmp_path / "data"
    write_idx_dataset(data, load("digits", tmp_path, download=False))
    result = podman(
        "run",
        "--rm",
        "--volume",
        f"{data}:/home/trainer/data:ro",
        "--entrypoint",
        "python3",
        cuda_image,
        "/opt/pytorch-mnist/mnist.py",
        "--epochs=1",
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Recipe: seed. Settings: --batch-size 64 --lr 0.01 --momentum 0.5 --no-nesterov" in result.stdout
    assert "Dataset: fashion-mnist, 1438 train / 359 test images" in result.stdout
    assert re.search(r"^epoch=1 accuracy=0\.\d+ val_loss=\d", result.stdout, re.M)
