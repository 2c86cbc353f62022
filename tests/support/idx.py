"""IDX files made from any dataset, where the trainer (and torchvision) read a dataset from disk: the
tests' and the GPU check's stand-in for a download."""

from __future__ import annotations

import struct
from pathlib import Path

import torch

from trainer.data import IDX_FILES, IMAGE_SIZE, Dataset, raw_folder


def write_idx_dataset(root: Path, data: Dataset, name: str = "fashion-mnist") -> None:
    """Store `data` as IDX files (rescaled to bytes) where torchvision's loader of `name` reads them."""
    raw = raw_folder(name, root)
    raw.mkdir(parents=True, exist_ok=True)
    train_images, train_labels, test_images, test_labels = IDX_FILES
    for images_file, labels_file, images, labels in (
        (train_images, train_labels, data.train_images, data.train_labels),
        (test_images, test_labels, data.test_images, data.test_labels),
    ):
        pixels = images[:, 0]
        pixels = ((pixels - pixels.min()) / (pixels.max() - pixels.min()) * 255).to(torch.uint8)
        (raw / images_file).write_bytes(
            struct.pack(">IIII", 2051, len(labels), IMAGE_SIZE, IMAGE_SIZE) + pixels.numpy().tobytes()
        )
        (raw / labels_file).write_bytes(
            struct.pack(">II", 2049, len(labels)) + labels.to(torch.uint8).numpy().tobytes()
        )
