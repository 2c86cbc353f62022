"""The Kubeflow PyTorchJob example CNN, unchanged so saved state_dicts load into users' code."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

# The layout oneDNN (CPU) and cuDNN (tensor cores) run these convolutions fastest in.
MEMORY_FORMAT = torch.channels_last
# Training FLOPs per 28x28 image (forward + weight and input gradients), used for MFU.
TRAIN_FLOPS_PER_IMAGE = 13.18e6


class Net(nn.Module):
    """conv 1->20->50 (5x5), fc 800->500->10, log-softmax: 431,080 parameters."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 20, 5, 1)
        self.conv2 = nn.Conv2d(20, 50, 5, 1)
        self.fc1 = nn.Linear(4 * 4 * 50, 500)
        self.fc2 = nn.Linear(500, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # relu(max_pool(x)) == max_pool(relu(x)) because relu is monotonic; pooling first runs
        # relu and its backward on a quarter of the elements.
        x = F.relu(F.max_pool2d(self.conv1(x), 2, 2))
        x = F.relu(F.max_pool2d(self.conv2(x), 2, 2))
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        # fp32 log-probabilities under bf16 autocast too: CUDA's autocast runs log_softmax in fp32,
        # the CPU's keeps bf16. A no-op in fp32.
        return F.log_softmax(self.fc2(x).float(), dim=1)


def fold_input_normalization(state: dict[str, torch.Tensor], mean: float, std: float) -> dict[str, torch.Tensor]:
    """The state of a net that takes raw pixels, from one trained on (pixels - mean) / std.

    conv1 is linear and unpadded, so every output sees a full window and the normalization folds
    into it exactly: W' = W / std, b' = b - (mean / std) * sum(W). The saved model then takes
    torchvision's ToTensor() pixels in [0, 1], as the seed script's did.
    """
    weight, bias = state["conv1.weight"], state["conv1.bias"]
    return {**state, "conv1.weight": weight / std, "conv1.bias": bias - (mean / std) * weight.sum(dim=(1, 2, 3))}


def exported_state(net: nn.Module, pixel_mean: float, pixel_std: float) -> dict[str, torch.Tensor]:
    """What users load: a plain CPU state_dict with the seed's keys (no "module." prefix) that takes
    the seed's raw pixels."""
    state = {k: v.detach().cpu().contiguous() for k, v in net.state_dict().items()}
    return fold_input_normalization(state, pixel_mean, pixel_std)
