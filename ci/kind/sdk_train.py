"""Train with the trainer image through the Kubeflow Python SDK (`kubeflow` 0.5.0) on a cluster running
Kubeflow Trainer v2, as docs/kubeflow-sdk.md shows: submit a TrainJob, follow node 0's log, wait for
Complete, check the accuracy line, delete the job.

    python ci/kind/sdk_train.py --image ghcr.io/pytorchjob-mnist/trainer:0.1.0-cpu --namespace ml

Needs only the SDK (a venv with `pip install kubeflow==0.5.0`), not this repository's packages; the kube
context is KUBECONFIG's current one. Exits 0 when the job completed with an accuracy line, 1 otherwise.
"""

from __future__ import annotations

import argparse
import re
import sys

from kubeflow.trainer import CustomTrainerContainer, KubernetesBackendConfig, TrainerClient
from kubeflow.trainer.options import ActiveDeadlineSeconds, TrainerArgs, TrainerCommand

# The runtime runs the command as it is: torchrun (through the trainer's wrapper, which keeps the trainer's
# exit codes) reads the PET_* variables Trainer v2 injects, which plain `python -m trainer` would ignore.
COMMAND = ["python", "-m", "trainer.torchrun", "--module", "trainer"]
# What rank 0 prints after each evaluation (the Katib metrics line's neighbour).
ACCURACY_LINE = re.compile(r"^epoch=\d+ accuracy=(\d\.\d{4}) val_loss=\d+\.\d{4}$", re.MULTILINE)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--image", required=True, help="the trainer image, e.g. ghcr.io/pytorchjob-mnist/trainer:0.1.0-cpu"
    )
    parser.add_argument("--namespace", default="default", help="namespace of the TrainJob (default: default)")
    parser.add_argument(
        "--runtime", default="torch-distributed", help="(Cluster)TrainingRuntime to run on (default: torch-distributed)"
    )
    parser.add_argument("--num-nodes", type=int, default=2, help="training nodes, one pod each (default: 2)")
    parser.add_argument("--epochs", type=int, default=1, help="epochs on the bundled digits dataset (default: 1)")
    parser.add_argument("--cpu", default="500m", help="CPU per node, also its process count rounded up (default: 500m)")
    parser.add_argument("--timeout", type=int, default=900, help="seconds the job may take (default: 900)")
    parser.add_argument("--keep", action="store_true", help="leave the TrainJob for inspection instead of deleting it")
    return parser.parse_args(argv)


def trainer_args(epochs: int) -> list[str]:
    """Small data that needs no download and no volume: the pods' /tmp is writable without our chart's mounts."""
    return [
        "--dataset",
        "digits",
        "--epochs",
        str(epochs),
        "--no-cuda",
        "--data-dir",
        "/tmp/data",
        "--output-dir",
        "/tmp/model",
    ]


def submit(client: TrainerClient, args: argparse.Namespace) -> str:
    return client.train(
        runtime=args.runtime,
        trainer=CustomTrainerContainer(
            image=args.image,
            num_nodes=args.num_nodes,
            resources_per_node={"cpu": args.cpu, "memory": "2Gi"},
        ),
        options=[
            TrainerCommand(command=COMMAND),
            TrainerArgs(args=trainer_args(args.epochs)),
            ActiveDeadlineSeconds(args.timeout),
        ],
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    client = TrainerClient(KubernetesBackendConfig(namespace=args.namespace))
    name = submit(client, args)
    print(f"TrainJob {args.namespace}/{name} submitted ({args.num_nodes} nodes of {args.image})", flush=True)
    try:
        # Node 0's log exists once its pod runs; a job that fails first is reported below.
        client.wait_for_job_status(name, status={"Running", "Complete", "Failed"}, timeout=args.timeout)
        log = []
        for line in client.get_job_logs(name, follow=True):
            print(f"[{name}-node-0] {line}", flush=True)
            log.append(line)
        job = client.wait_for_job_status(name, status={"Complete", "Failed"}, timeout=args.timeout)
        accuracy = ACCURACY_LINE.findall("\n".join(log))
        print(f"TrainJob {name} {job.status}; accuracy {accuracy[-1] if accuracy else 'not logged'}", flush=True)
        return 0 if job.status == "Complete" and accuracy else 1
    finally:
        if not args.keep:
            client.delete_job(name)


if __name__ == "__main__":
    sys.exit(main())
