"""What a run trains with: TrainConfig, and the recipes that fill in its settings."""

from __future__ import annotations

from dataclasses import dataclass

LR_SCHEDULES = ("constant", "onecycle")


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = 1
    # A step's batch: per process, as in the seed script's DistributedSampler loader, or global, over all
    # processes together and split among them (global_batch). One of the two is set, the other None.
    batch_size: int | None = 64
    global_batch_size: int | None = None
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
    cuda_graphs: bool = False

    def global_batch(self, world_size: int) -> int:
        """The samples of one optimizer step over all `world_size` processes."""
        if self.global_batch_size is not None:
            return self.global_batch_size
        assert self.batch_size is not None, "one of batch_size and global_batch_size is set"
        return self.batch_size * world_size


# The training settings that --recipe sets, unless their own flags are given.
RECIPE_FIELDS = (
    "batch_size",
    "global_batch_size",
    "lr",
    "momentum",
    "nesterov",
    "weight_decay",
    "lr_schedule",
    "label_smoothing",
)
# Either one sets the batch; given, it sets aside the recipe's other (see recipe_settings).
BATCH_FIELDS = ("batch_size", "global_batch_size")
# seed: the seed script's (TrainConfig's defaults). fast: the best test accuracy on MNIST after one epoch
# that we measured (docs/benchmark.md), at a batch size that keeps CPU throughput high. Its batch is
# global, so that a job trains the same steps, and reaches the same accuracy, at any world size.
RECIPES: dict[str, dict[str, object]] = {
    "seed": {},
    "fast": {
        "batch_size": None,
        "global_batch_size": 128,
        "lr": 0.1,
        "momentum": 0.9,
        "nesterov": True,
        "lr_schedule": "onecycle",
        "label_smoothing": 0.1,
    },
}


def recipe_settings(recipe: str, given: dict[str, object] | None = None) -> dict[str, object]:
    """Every RECIPE_FIELDS value of `recipe`, with the settings `given` in its place. A batch size
    given either way (BATCH_FIELDS) replaces the recipe's, whichever way that one counts."""
    defaults = TrainConfig()
    settings = {name: getattr(defaults, name) for name in RECIPE_FIELDS} | RECIPES[recipe]
    given = given or {}
    if given.keys() & set(BATCH_FIELDS):
        settings |= dict.fromkeys(BATCH_FIELDS)
    return settings | given
