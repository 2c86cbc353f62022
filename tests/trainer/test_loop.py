"""One training step of the Trainer against the same step written with torch's own SGD and
cross_entropy, for each optimization flag: a flag the loop dropped would leave its step unchanged."""

import copy

import pytest
import torch
import torch.nn.functional as F

from tests.support.gloo import ONE_RANK
from trainer.config import TrainConfig
from trainer.data import Dataset
from trainer.loop import Trainer
from trainer.metrics import Reporter
from trainer.model import Net

BATCH = 16
PLAIN = {"lr": 0.1, "momentum": 0.9}
FLAGS = {
    "weight_decay": {"weight_decay": 0.05},
    "nesterov": {"nesterov": True},
    "label_smoothing": {"label_smoothing": 0.2},
}


def reference_step(net: Net, images, labels, lr, momentum, nesterov=False, weight_decay=0.0, label_smoothing=0.0):
    net = copy.deepcopy(net)
    optimizer = torch.optim.SGD(
        net.parameters(), lr=lr, momentum=momentum, nesterov=nesterov, weight_decay=weight_decay, foreach=False
    )
    F.cross_entropy(net(images), labels, label_smoothing=label_smoothing).backward()
    optimizer.step()
    return net.state_dict()


@pytest.mark.parametrize("flag", sorted(FLAGS))
def test_each_optimization_flag_changes_the_step_as_torch_defines_it(flag):
    torch.manual_seed(0)
    images, labels = torch.randn(BATCH, 1, 28, 28), torch.randint(0, 10, (BATCH,))
    data = Dataset("random", images, labels, images[:4], labels[:4])
    net = Net()
    settings = {**PLAIN, **FLAGS[flag]}
    expected = reference_step(net, images, labels, **settings)
    without_flag = reference_step(net, images, labels, **PLAIN)
    assert not torch.allclose(expected["fc2.weight"], without_flag["fc2.weight"]), f"{flag} must change a step"

    ctx = ONE_RANK
    trainer = Trainer(net, data, ctx, TrainConfig(batch_size=BATCH, **settings), Reporter(False, None), None)
    trainer.train_epoch()  # one step: the whole set, in the epoch's shuffled order
    assert trainer.progress.step == 1
    for key, value in net.state_dict().items():
        torch.testing.assert_close(value, expected[key], rtol=1e-5, atol=1e-6, msg=key)
