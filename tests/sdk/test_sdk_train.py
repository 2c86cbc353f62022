"""ci/kind/sdk_train.py through the Kubeflow SDK's own Kubernetes backend, stopped where it would call the
API server: the TrainJob it submits is our image's trainer through torchrun, which our trainer accepts and
which, under the torch plugin's env, forms a process group of every node."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from ci.localjob.kinds import job_model
from ci.localjob.pods import plan_pods
from tests.support.paths import REPO
from trainer.cli import parse_args as trainer_parse_args

pytest.importorskip("kubeflow.trainer", reason="the Kubeflow SDK (kubeflow==0.5.0, a test extra) is not installed")

from kubeflow.trainer import TrainerClient  # noqa: E402
from kubeflow.trainer.backends.kubernetes.backend import KubernetesBackend  # noqa: E402
from kubeflow.trainer.types import types  # noqa: E402

IMAGE = "ghcr.io/pytorchjob-mnist/trainer:0.1.0-cpu"


def load_sdk_train():
    """ci/kind has no package: the script runs from a venv that holds only the SDK."""
    spec = importlib.util.spec_from_file_location("sdk_train", REPO / "ci/kind/sdk_train.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class RecordingApi:
    """Stands in for the SDK's CustomObjectsApi: keeps what would be created."""

    def __init__(self):
        self.created: list[tuple[str, dict]] = []

    def create_namespaced_custom_object(self, group, version, namespace, plural, body):
        self.created.append((f"{group}/{version} {plural} in {namespace}", body))


@pytest.fixture
def submitted() -> dict:
    """The TrainJob sdk_train.py submits with --num-nodes 2, as the SDK's backend builds it."""
    backend = KubernetesBackend.__new__(KubernetesBackend)  # no kube config: nothing is sent
    backend.namespace = "ml"
    backend.custom_api = RecordingApi()
    torch_runtime = types.Runtime(
        name="torch-distributed",
        trainer=types.RuntimeTrainer(
            trainer_type=types.TrainerType.CUSTOM_TRAINER, framework="torch", image="pytorch/pytorch"
        ),
        kind=types.RuntimeKind.CLUSTER_TRAINING_RUNTIME,
    )
    backend.get_runtime = lambda name: torch_runtime if name == "torch-distributed" else pytest.fail(name)
    client = TrainerClient.__new__(TrainerClient)
    client.backend = backend
    sdk_train = load_sdk_train()
    name = sdk_train.submit(client, sdk_train.parse_args(["--image", IMAGE, "--namespace", "ml", "--num-nodes", "2"]))
    ((where, body),) = backend.custom_api.created
    assert where == "trainer.kubeflow.org/v1alpha1 trainjobs in ml"
    assert body["metadata"]["name"] == name
    return body


def test_the_sdk_submits_our_image_through_torchrun(submitted):
    spec = submitted["spec"]
    assert submitted["kind"] == "TrainJob" and spec["runtimeRef"]["name"] == "torch-distributed"
    trainer = spec["trainer"]
    assert trainer["image"] == IMAGE and trainer["numNodes"] == 2
    assert trainer["command"] == ["python", "-m", "trainer.torchrun", "--module", "trainer"]
    assert trainer["resourcesPerNode"]["requests"]["cpu"] == "500m"
    assert spec["activeDeadlineSeconds"] == 900
    parsed = trainer_parse_args(trainer["args"])  # our trainer accepts them
    assert (parsed.dataset, parsed.epochs, parsed.output_dir) == ("digits", 1, "/tmp/model")


def test_the_submitted_job_gets_one_process_per_node_and_a_group_of_two(submitted, tmp_path):
    """The torch plugin's env for what the SDK built: the CPU request of 500m rounds up to one process."""
    nodes = plan_pods(job_model(submitted), tmp_path, host_env={"PATH": "/usr/bin"})
    name = submitted["metadata"]["name"]
    assert [dict(node.injected_env) for node in job_model(submitted).pods()] == [
        {
            "PET_NNODES": "2",
            "PET_NPROC_PER_NODE": "1",
            "PET_NODE_RANK": str(rank),
            "PET_MASTER_ADDR": f"{name}-node-0-0.{name}",
            "PET_MASTER_PORT": "29500",
        }
        for rank in range(2)
    ]
    assert nodes[1].argv[:3] == (sys.executable, "-m", "trainer.torchrun")
