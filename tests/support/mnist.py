"""Where the tests find real MNIST, which `make data` fetches and no test downloads."""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.paths import REPO
from trainer.data import IDX_FILES, raw_folder

# A --data-dir that holds MNIST's IDX files; MNIST_DATA_DIR names another one.
MNIST_DATA_DIR = Path(os.environ.get("MNIST_DATA_DIR", REPO / "data"))


def real_mnist_missing() -> str | None:
    """Why real MNIST cannot be had here, or None when its files are in MNIST_DATA_DIR."""
    raw = raw_folder("mnist", MNIST_DATA_DIR)
    absent = [name for name in IDX_FILES if not (raw / name).is_file()]
    if absent:
        return f"real MNIST is not in {raw} (missing {', '.join(absent)}): run `make data`, or set MNIST_DATA_DIR"
    return None
