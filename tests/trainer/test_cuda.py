"""The trainer on an NVIDIA GPU: data resident on the device, bf16 autocast, a one-rank nccl group,
checkpoints and resumes across devices, --compile and --cuda-graphs. They skip without CUDA; `make
gpu-check` (ci/gpu-check.sh) runs them on a GPU machine."""

import copy
import json

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from tests.support.procs import run_trainer
from trainer.config import TrainConfig
from trainer.data import load
from trainer.distributed import DistContext
from trainer.loop import new_trainer
from trainer.metrics import Reporter
from trainer.model import Net
from trainer.runtime import missing_compiler, native_bf16, resolve_precision

GPU = torch.device("cuda", 0)
pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU; `make gpu-check` runs it on one"),
]
QUICK = ["--dataset", "synthetic", "--limit-train", "2048", "--limit-test", "500", "--dir", ""]


def test_the_data_stays_resident_on_the_gpu_and_evaluation_counts_every_sample(tmp_path):
    ctx = DistContext(0, 1, 0, 1, GPU, "nccl")
    data = load("synthetic", tmp_path, download=False).limited(1024, 300)
    config = TrainConfig(precision=resolve_precision("auto", GPU))
    trainer = new_trainer(data, ctx, config, Reporter(False, None), None)
    resident = [
        trainer.data.train_images,
        trainer.data.train_labels,
        trainer.data.test_images,
        trainer.data.test_labels,
    ]
    assert {tensor.device for tensor in resident} | {p.device for p in trainer.net.parameters()} == {GPU}
    trainer.train_epoch()
    result = trainer._evaluate()
    assert result.count == 300 and 0 <= result.accuracy <= 1
    assert trainer.progress.train_images == 1024


@pytest.mark.skipif(not torch.cuda.is_available() or not native_bf16(GPU), reason="needs a GPU with bf16 (Ampere on)")
def test_auto_precision_trains_in_bf16_on_the_gpu_and_saves_fp32_weights(tmp_path):
    result = run_trainer([*QUICK, "--output-dir", "out"], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Device: cuda:0" in result.stdout and "Precision: bf16" in result.stdout
    assert json.loads((tmp_path / "out" / "metrics.json").read_text())["precision"] == "bf16"
    weights = torch.load(tmp_path / "out" / "mnist_cnn.pt", weights_only=True)
    assert {tensor.dtype for tensor in weights.values()} == {torch.float32}
    assert {tensor.device.type for tensor in weights.values()} == {"cpu"}


def test_ddp_over_a_one_rank_nccl_group_steps_as_a_plain_model(tmp_path):
    """The trainer's DDP settings (gradient_as_bucket_view, device_ids) over nccl: one rank averages to itself."""
    dist.init_process_group("nccl", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        torch.manual_seed(0)
        net = Net().to(GPU)
        plain = copy.deepcopy(net)
        ddp = DistributedDataParallel(net, device_ids=[0], gradient_as_bucket_view=True)
        images, labels = torch.randn(64, 1, 28, 28, device=GPU), torch.randint(0, 10, (64,), device=GPU)
        F.nll_loss(ddp(images), labels).backward()
        F.nll_loss(plain(images), labels).backward()
        for ours, reference in zip(net.parameters(), plain.parameters(), strict=True):
            torch.testing.assert_close(ours.grad, reference.grad)
        total = torch.ones(3, device=GPU)
        dist.all_reduce(total)
        assert total.tolist() == [1.0, 1.0, 1.0]
        del ddp
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("first_on", ["cuda", "cpu"])
def test_a_gpu_run_resumes_from_a_checkpoint_written_on_either_device(tmp_path, first_on):
    first = run_trainer(
        [*QUICK, "--epochs", "1", "--checkpoint-dir", "ckpt", *(["--no-cuda"] if first_on == "cpu" else [])], tmp_path
    )
    assert first.returncode == 0, first.stderr[-3000:]
    second = run_trainer([*QUICK, "--epochs", "2", "--checkpoint-dir", "ckpt", "--output-dir", "out"], tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "Device: cuda:0" in second.stdout and "Resumed from" in second.stdout
    history = json.loads((tmp_path / "out" / "metrics.json").read_text())["history"]
    assert [entry["epoch"] for entry in history] == [1, 2]
    assert f"epoch=1 accuracy={history[0]['accuracy']:.4f}" in first.stdout


def test_compile_trains_on_the_gpu_and_saves_plain_keys(tmp_path):
    if lacking := missing_compiler(GPU):
        pytest.skip(f"--compile needs {lacking} on this GPU machine")
    result = run_trainer([*QUICK, "--compile", "--output-dir", "out"], tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Device: cuda:0" in result.stdout
    assert list(torch.load(tmp_path / "out" / "mnist_cnn.pt", weights_only=True))[0] == "conv1.weight"


def _fit_synthetic(cuda_graphs: bool):
    """Two epochs of 1000 samples at a global batch of 128: 7 full steps an epoch, replayed with
    --cuda-graphs once warmed up, and a last one of 104 samples, eager, between the replays."""
    ctx = DistContext(0, 1, 0, 1, GPU, "nccl")
    data = load("synthetic", "unused", download=False).limited(1000, 500)
    config = TrainConfig(
        batch_size=None,
        global_batch_size=128,
        lr=0.05,
        momentum=0.9,
        nesterov=True,
        lr_schedule="onecycle",  # a new learning rate every step, which a replay must read
        epochs=2,
        precision="fp32",
        cuda_graphs=cuda_graphs,
    )
    trainer = new_trainer(data, ctx, config, Reporter(False, None), None)
    # The same kernels for both runs: autotuning (configure_device) might pick others for each.
    with torch.backends.cudnn.flags(enabled=True, benchmark=False, deterministic=True):
        trainer.fit()
    return trainer


def test_cuda_graphs_train_the_same_steps_as_eager_ones():
    eager, graphed = _fit_synthetic(cuda_graphs=False), _fit_synthetic(cuda_graphs=True)
    assert graphed._train_step._graph is not None, "the step was captured"
    assert graphed.progress.step == eager.progress.step == 16
    assert graphed.progress.train_images == 2000
    expected = eager.net.state_dict()
    for key, value in graphed.net.state_dict().items():
        torch.testing.assert_close(value, expected[key], rtol=1e-4, atol=1e-5, msg=key)


def test_cuda_graphs_run_the_fast_recipe_with_checkpoints_of_plain_numbers(tmp_path):
    flags = [
        "--recipe",
        "fast",
        "--cuda-graphs",
        "--epochs",
        "2",
        "--checkpoint-dir",
        "ckpt",
        "--checkpoint-every",
        "5",
    ]
    result = run_trainer([*QUICK, *flags, "--output-dir", "out"], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((tmp_path / "out" / "metrics.json").read_text())["accuracy"] >= 0.9
    newest = sorted((tmp_path / "ckpt").glob("checkpoint-*.pt"))[-1]
    state = torch.load(newest, map_location="cpu", weights_only=True)
    # The graph reads its learning rate from a tensor of its own; checkpoints keep the float.
    assert isinstance(state["optimizer"]["param_groups"][0]["lr"], float)
