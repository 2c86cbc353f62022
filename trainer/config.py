"""What a run trains with: TrainConfig, and the recipes that fill in its settings."""

from __future__ import annotations

from dataclasses import dataclass

LR_SCHEDULES = ("constant", "onecycle")


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = 1
    batch_size: int = 64  # per process, as in the seed script's DistributedSampler loader
    test_batch_size: int = 1000
    lr: float = 0.01
    momentum: float = 0.5
    nesterov: bool = False
    weight_decay: float = 0.0
    lr_schedule: str = "constant"
    label_smoothing: float = 0.0
    seed: int = 1
    log_interval: int = 10
    checkpoint_every: int = 500  # steps; 0 checkpoints at epoch ends only
    compile: bool = False
    precision: str = "fp32"  # or bf16 (autocast); runtime.resolve_precision turns --precision into one


# The training settings that --recipe sets, unless their own flags are given.
RECIPE_FIELDS = ("batch_size", "lr", "momentum", "nesterov", "weight_decay", "lr_schedule", "label_smoothing")
# seed: the seed script's (TrainConfig's defaults). fast: the best test accuracy on MNIST after one epoch
# that we measured (docs/benchmark.md), at a batch size that keeps CPU throughput high.
RECIPES: dict[str, dict[str, object]] = {
    "seed": {},
    "fast": {
        "batch_size": 128,
        "lr": 0.1,
        "momentum": 0.9,
        "nesterov": True,
        "lr_schedule": "onecycle",
        "label_smoothing": 0.1,
    },
}


def recipe_settings(recipe: str) -> dict[str, object]:
    """Every RECIPE_FIELDS value of `recipe`."""
    defaults = TrainConfig()
    return {name: getattr(defaults, name) for name in RECIPE_FIELDS} | RECIPES[recipe]
