"""The seed guides' command, `python3 /opt/pytorch-mnist/mnist.py --epochs=1`, as the image answers it
(docker/pytorch-mnist/mnist.py), run here with the venv's python; test_image_podman runs it in the image."""

import subprocess
import sys

from tests.support.idx import write_idx_dataset
from tests.support.paths import REPO
from tests.support.procs import trainer_env
from trainer.data import load

SEED_ENTRY = REPO / "docker" / "pytorch-mnist" / "mnist.py"


def test_the_seed_command_trains_with_the_seed_scripts_settings(tmp_path):
    # The seed's dataset, FashionMNIST, where its default --data-dir looks; made from digits (no download here).
    write_idx_dataset(tmp_path / "data", load("digits", tmp_path, download=False))
    result = subprocess.run(
        [sys.executable, str(SEED_ENTRY), "--epochs=1"],
        cwd=tmp_path,
        env=trainer_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert "Using distributed PyTorch with gloo backend" in lines
    assert (
        "Recipe: seed. Settings: --batch-size 64 --lr 0.01 --momentum 0.5 --no-nesterov --weight-decay 0.0 "
        "--lr-schedule constant --label-smoothing 0.0"
    ) in lines
    assert any(line.startswith("Dataset: fashion-mnist, ") for line in lines)
    assert any(line.startswith("epoch=1 accuracy=") for line in lines)
    assert list((tmp_path / "logs").glob("events*")), "TensorBoard events in logs/, the seed's --dir"
