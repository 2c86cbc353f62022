"""One training step of the Trainer against the same step written with torch's own SGD and
cross_entropy, for each optimization flag: a flag the loop dropped would leave its step unchanged.
And a global batch split over ranks against the same steps in one process, and where --cuda-graphs
is refused (tests/trainer/test_cuda.py runs it on a GPU)."""

import copy

import pytest
import torch
import torch.multiprocessing as mp
import torch.nn.functional as F

from tests.support.gloo import ONE_RANK, run_rank
from trainer.config import TrainConfig
from trainer.data import Dataset
from trainer.distributed import DistContext
from trainer.failures import LaunchError
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


GLOBAL_BATCH = 10  # 3 ranks take 4, 3 and 3 samples of it


def _random_data() -> Dataset:
    generator = torch.Generator().manual_seed(0)
    images, labels = torch.randn(2 * GLOBAL_BATCH, 1, 28, 28, generator=generator), torch.arange(20) % 10
    return Dataset("random", images, labels, images[:4], labels[:4])


def _train_at_global_batch(ctx, out_path=None) -> dict:
    """Two steps at a global batch of GLOBAL_BATCH from the same initial weights; rank 0 saves them."""
    torch.manual_seed(0)
    net = Net()
    config = TrainConfig(batch_size=None, global_batch_size=GLOBAL_BATCH, **PLAIN)
    trainer = Trainer(net, _random_data(), ctx, config, Reporter(False, None), None)
    trainer.train_epoch()
    assert trainer.progress.step == 2 and trainer.progress.consumed == 2 * GLOBAL_BATCH
    if ctx.is_main and out_path:
        torch.save(net.state_dict(), out_path)
    return net.state_dict()


def test_a_global_batch_trains_the_same_steps_on_ranks_of_unequal_parts(tmp_path):
    """3 ranks split each batch 4/3/3; weighting each rank's mean loss by its part keeps every sample
    counting alike, so the weights match one process's, up to the allreduce's rounding."""
    expected = _train_at_global_batch(ONE_RANK)
    mp.spawn(run_rank, args=(3, tmp_path / "store", _train_at_global_batch, tmp_path / "w.pt"), nprocs=3, join=True)
    actual = torch.load(tmp_path / "w.pt", weights_only=True)
    for key, value in expected.items():
        torch.testing.assert_close(actual[key], value, rtol=1e-5, atol=1e-7, msg=key)


def test_a_global_batch_smaller_than_the_world_size_is_refused():
    ctx = DistContext(0, 4, 0, 4, torch.device("cpu"), "gloo")  # refused before any collective
    config = TrainConfig(batch_size=None, global_batch_size=3)
    with pytest.raises(LaunchError, match=r"--global-batch-size 3 is smaller than the world size 4, so some"):
        Trainer(Net(), _random_data(), ctx, config, Reporter(False, None), None)


@pytest.mark.parametrize(
    "ctx, compile, refusal",
    [
        (DistContext(0, 2, 0, 2, torch.device("cpu"), "gloo"), False, "--cuda-graphs runs in a single process"),
        (ONE_RANK, False, "--cuda-graphs needs a CUDA GPU, and this process trains on the CPU"),
        # Refused before anything touches the GPU, so this runs without one.
        (DistContext(0, 1, 0, 1, torch.device("cuda", 0), "nccl"), True, "--cuda-graphs and --compile cannot be"),
    ],
    ids=["ranks", "cpu", "compile"],
)
def test_cuda_graphs_are_refused_where_they_cannot_run(ctx, compile, refusal):
    config = TrainConfig(cuda_graphs=True, compile=compile)
    with pytest.raises(LaunchError, match=refusal):
        Trainer(Net(), _random_data(), ctx, config, Reporter(False, None), None)
