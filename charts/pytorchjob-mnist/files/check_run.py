"""`helm test` check: wait for the run to finish, then verify its model and metrics.

Usage: python -c "<this file>" MODEL_DIR MIN_ACCURACY TIMEOUT_SECONDS [RUN_ID [WORLD_SIZE]]
The trainer writes metrics.json last, so its presence means a run finished; with RUN_ID, only a
metrics.json that records that run_id counts, so an earlier run's file on the volume does not.
With WORLD_SIZE, the run must have trained in a process group of that size: pods that lost the
operator's environment each train alone, and their job still succeeds.
"""

import json
import pathlib
import sys
import time

model_dir = pathlib.Path(sys.argv[1])
min_accuracy = float(sys.argv[2])
deadline = time.monotonic() + float(sys.argv[3])
run_id = sys.argv[4] if len(sys.argv) > 4 else ""
world_size = sys.argv[5] if len(sys.argv) > 5 else ""
metrics_path = model_dir / "metrics.json"
model_path = model_dir / "mnist_cnn.pt"


def this_runs_metrics():
    """metrics.json once this run has written it (atomically, so it is never half there), else None."""
    if not metrics_path.exists():
        print(f"waiting for {metrics_path} …", flush=True)
        return None
    metrics = json.loads(metrics_path.read_text())
    recorded = metrics.get("run_id")
    if run_id and recorded != run_id:
        source = f"is from run {recorded}" if recorded else "records no run id (an older trainer wrote it)"
        print(f"waiting for run {run_id}: {metrics_path} {source} …", flush=True)
        return None
    return metrics


while (metrics := this_runs_metrics()) is None:
    if time.monotonic() > deadline:
        run = f" of run {run_id}" if run_id else ""
        sys.exit(
            f"FAIL: {metrics_path}{run} did not appear within {sys.argv[3]}s; is the job still running, or did it fail?"
        )
    time.sleep(10)

accuracy = float(metrics["accuracy"])
print(f"metrics: {json.dumps(metrics, sort_keys=True)}")
if accuracy < min_accuracy:
    hint = ""
    if metrics.get("dataset") == "digits":
        hint = (
            "; digits is small (1,438 training images): one epoch of recipe fast reaches about 0.81 "
            "(0.986 with training.epochs=8), of recipe seed about 0.28 in 2 processes; raise training.epochs"
        )
    sys.exit(
        f"FAIL: accuracy {accuracy:.4f} after {metrics.get('epochs')} epoch(s) on {metrics.get('dataset')} "
        f"is below tests.minAccuracy {min_accuracy}{hint}"
    )
if world_size and metrics.get("world_size") != int(world_size):
    sys.exit(
        f"FAIL: the run trained in a world of {metrics.get('world_size')} processes, but the job has "
        f"{world_size} (pods x nprocPerNode); check that the operator's MASTER_ADDR, WORLD_SIZE "
        "and RANK reach the trainer container"
    )

if not model_path.is_file():
    sys.exit(f"FAIL: {model_path} is missing")
import torch  # noqa: E402  (only needed once the files are there)

state = torch.load(model_path, map_location="cpu", weights_only=True)
if not isinstance(state, dict) or not state:
    sys.exit(f"FAIL: {model_path} is not a non-empty state dict")
trained_in = f"; world size {world_size}" if world_size else ""
print(f"OK: accuracy {accuracy:.4f} >= {min_accuracy}{trained_in}; {model_path} holds {len(state)} tensors")
