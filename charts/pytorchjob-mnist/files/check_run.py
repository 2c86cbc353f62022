"""`helm test` check: wait for the run to finish, then verify its model and metrics.

Usage: python -c "<this file>" MODEL_DIR MIN_ACCURACY TIMEOUT_SECONDS
The trainer writes metrics.json last, so its presence means the run finished.
"""
import json
import pathlib
import sys
import time

model_dir = pathlib.Path(sys.argv[1])
min_accuracy = float(sys.argv[2])
deadline = time.monotonic() + float(sys.argv[3])
metrics_path = model_dir / "metrics.json"
model_path = model_dir / "mnist_cnn.pt"

while not metrics_path.exists():
    if time.monotonic() > deadline:
        sys.exit(f"FAIL: {metrics_path} did not appear within {sys.argv[3]}s; is the PyTorchJob still running or Failed?")
    print(f"waiting for {metrics_path} …", flush=True)
    time.sleep(10)

metrics = json.loads(metrics_path.read_text())
accuracy = float(metrics["accuracy"])
print(f"metrics: {json.dumps(metrics, sort_keys=True)}")
if accuracy < min_accuracy:
    sys.exit(f"FAIL: accuracy {accuracy:.4f} is below tests.minAccuracy {min_accuracy}")

if not model_path.is_file():
    sys.exit(f"FAIL: {model_path} is missing")
import torch  # noqa: E402  (only needed once the files are there)

state = torch.load(model_path, map_location="cpu", weights_only=True)
if not isinstance(state, dict) or not state:
    sys.exit(f"FAIL: {model_path} is not a non-empty state dict")
print(f"OK: accuracy {accuracy:.4f} >= {min_accuracy}; {model_path} holds {len(state)} tensors")
