"""Resuming in-process Trainers from mid-epoch checkpoints, in real gloo process groups."""

import dataclasses
import json
import shutil
import struct

import pytest
import torch
import torch.multiprocessing as mp

from tests.support.gloo import ONE_RANK, run_rank
from trainer import loop, sigterm
from trainer.checkpoint import CheckpointStore
from trainer.config import TrainConfig
from trainer.data import Dataset
from trainer.distributed import DistContext
from trainer.failures import IncompatibleCheckpoint, NonFiniteLoss
from trainer.loop import Trainer, evaluate, read_latest_checkpoint
from trainer.metrics import Reporter
from trainer.model import Net

TRAIN_SIZE = 100  # not a multiple of 2 or 3 ranks times the batch size
CONFIG = TrainConfig(batch_size=8, lr=1e-3, momentum=0.0, checkpoint_every=2, log_interval=1000)


def _resume(trainer: Trainer) -> None:
    """As the CLI does: read the newest checkpoint of the trainer's store, then resume from it."""
    trainer.resume(read_latest_checkpoint(trainer.store, trainer.ctx))


def _numbered_dataset() -> Dataset:
    """Sample i carries i in its first pixel, so a trainer's batches reveal which samples it took."""
    images = torch.zeros(TRAIN_SIZE, 1, 28, 28)
    images[:, 0, 0, 0] = torch.arange(TRAIN_SIZE, dtype=torch.float32)
    labels = torch.arange(TRAIN_SIZE) % 10
    return Dataset("numbered", images, labels, images[:10], labels[:10])


class RecordingTrainer(Trainer):
    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.samples: list[list[int]] = []  # per step, the samples this rank trained on

    def _step(self, part: torch.Tensor, share: float) -> torch.Tensor:
        self.samples.append(self.data.train_images[part, 0, 0, 0].long().tolist())
        return super()._step(part, share)


def _train(ctx: DistContext, checkpoint_dir, out_dir) -> RecordingTrainer:
    torch.manual_seed(CONFIG.seed)
    trainer = RecordingTrainer(
        Net(), _numbered_dataset(), ctx, CONFIG, Reporter(ctx.is_main, None), CheckpointStore(checkpoint_dir, keep=100)
    )
    _resume(trainer)
    trainer.fit()
    (out_dir / f"rank{ctx.rank}.json").write_text(json.dumps(trainer.samples))
    return trainer


def _construct(ctx: DistContext, out_dir) -> None:
    torch.manual_seed(CONFIG.seed)
    net = Net()
    weights, rng = {k: v.clone() for k, v in net.state_dict().items()}, torch.get_rng_state()
    trainer = Trainer(net, _numbered_dataset(), ctx, CONFIG, Reporter(False, None), None)
    untouched = {
        "rng": torch.equal(rng, torch.get_rng_state()),
        "weights": all(torch.equal(weights[k], v) for k, v in net.state_dict().items()),
        "no_grads": all(p.grad is None for p in net.parameters()),
        "no_optimizer_state": not trainer.optimizer.state,
    }
    (out_dir / f"rank{ctx.rank}.json").write_text(json.dumps(untouched))


def test_ddp_warm_up_leaves_weights_optimizer_and_rng_untouched(tmp_path):
    mp.spawn(run_rank, args=(2, tmp_path / "store", _construct, tmp_path), nprocs=2, join=True)
    for rank in range(2):
        assert json.loads((tmp_path / f"rank{rank}.json").read_text()) == {
            "rng": True,
            "weights": True,
            "no_grads": True,
            "no_optimizer_state": True,
        }


def test_onecycle_checkpoints_name_the_world_size_its_length_depends_on():
    ctx = ONE_RANK
    for schedule, expected in (("constant", None), ("onecycle", 1)):
        config = TrainConfig(lr_schedule=schedule)
        trainer = Trainer(Net(), _numbered_dataset(), ctx, config, Reporter(False, None), None)
        assert trainer.settings().get("world_size") == expected


def test_diverged_weights_are_never_checkpointed(tmp_path):
    ctx = ONE_RANK
    net = Net()
    trainer = Trainer(net, _numbered_dataset(), ctx, CONFIG, Reporter(True, None), CheckpointStore(tmp_path, keep=3))
    with torch.no_grad():
        net.fc1.weight[0, 0] = float("inf")
    with pytest.raises(NonFiniteLoss, match="non-finite by step 0, so no checkpoint was written; .* Lower --lr"):
        trainer._checkpoint()
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("epoch,consumed,refused", [(2, 16, True), (2, 0, False), (3, 0, True)])
def test_resume_refuses_fewer_epochs_than_the_checkpoint_trained(tmp_path, epoch, consumed, refused):
    ctx = ONE_RANK
    store = CheckpointStore(tmp_path, keep=3)
    writer = Trainer(Net(), _numbered_dataset(), ctx, CONFIG, Reporter(False, None), store)
    writer.progress.epoch, writer.progress.consumed = epoch, consumed
    writer.progress.history = [{"epoch": e, "accuracy": 0.5, "val_loss": 1.0} for e in range(1, epoch)]
    writer._checkpoint()
    reader = Trainer(Net(), _numbered_dataset(), ctx, CONFIG, Reporter(False, None), store)  # --epochs 1
    if refused:
        with pytest.raises(
            IncompatibleCheckpoint,
            match=f"trained into epoch {epoch - (consumed == 0)}, beyond "
            r"--epochs 1.* Pass --epochs \d+ or more to continue that run",
        ):
            _resume(reader)
    else:
        _resume(reader)
        # Finished: its model is evaluated again, on this run's test set, rather than reported from history.
        assert reader.fit() == evaluate(reader.net, reader.data, ctx, CONFIG.test_batch_size)
        reader.data = reader.data.limited(None, 4)
        assert reader.fit().count == 4


def test_a_checkpoint_that_does_not_fit_the_model_is_refused_as_permanent(tmp_path):
    """Every restart would fail the same way: an IncompatibleCheckpoint (exit 1), not a retried crash."""
    ctx = ONE_RANK
    store = CheckpointStore(tmp_path, keep=3)
    writer = Trainer(Net(), _numbered_dataset(), ctx, CONFIG, Reporter(False, None), store)
    writer._checkpoint()
    path, state = store.load_latest()
    state["model"]["fc1.weight"] = torch.zeros(400, 800)
    reader = Trainer(Net(), _numbered_dataset(), ctx, CONFIG, Reporter(False, None), store)
    with pytest.raises(
        IncompatibleCheckpoint,
        match=f"{path} does not fit this trainer's model or optimizer "
        r"\(Error\(s\) in loading state_dict for Net",
    ):
        reader.resume((path, state))


@pytest.mark.parametrize(
    "schedule, advice",
    [
        ("constant", "a run with more --epochs on this --checkpoint-dir trains on from here."),
        # A onecycle checkpoint records --epochs, so a rerun with more is refused as another run.
        (
            "onecycle",
            "its onecycle schedule spans exactly these epochs, so to train longer start a new run in "
            "another --checkpoint-dir",
        ),
    ],
)
def test_resuming_a_finished_run_says_how_to_train_longer(tmp_path, capsys, schedule, advice):
    ctx = ONE_RANK
    store = CheckpointStore(tmp_path, keep=3)
    config = TrainConfig(batch_size=8, lr_schedule=schedule)
    writer = Trainer(Net(), _numbered_dataset(), ctx, config, Reporter(False, None), store)
    writer.progress.epoch, writer.progress.history = 2, [{"epoch": 1, "accuracy": 0.5, "val_loss": 1.0}]
    writer._checkpoint()
    _resume(Trainer(Net(), _numbered_dataset(), ctx, config, Reporter(True, None), store))
    assert (
        f"finished its 1 epoch (accuracy 0.5000 then), so nothing is left to train; {advice}" in capsys.readouterr().out
    )


def test_resuming_a_finished_run_on_other_ranks_does_not_warn_of_resharding(tmp_path, capsys):
    """Nothing is left to reshard: the run only writes its outputs again."""
    ctx = ONE_RANK
    store = CheckpointStore(tmp_path, keep=3)
    writer = Trainer(Net(), _numbered_dataset(), ctx, CONFIG, Reporter(False, None), store)
    writer.progress.epoch, writer.progress.history = 2, [{"epoch": 1, "accuracy": 0.5, "val_loss": 1.0}]
    writer._checkpoint()
    path, state = store.load_latest()
    Trainer(Net(), _numbered_dataset(), ctx, CONFIG, Reporter(True, None), store).resume(
        (path, {**state, "world_size": 2})
    )
    out = capsys.readouterr().out
    assert "nothing is left to train" in out and "resharded" not in out


@pytest.mark.parametrize("written_in, warned", [("bf16", True), ("fp32", False)])
def test_resuming_in_another_precision_warns(tmp_path, capsys, written_in, warned):
    """Allowed, as another world size is: auto on a GPU resolves by the node a restarted pod lands on."""
    ctx = ONE_RANK
    store = CheckpointStore(tmp_path, keep=3)
    writer = Trainer(
        Net(),
        _numbered_dataset(),
        ctx,
        dataclasses.replace(CONFIG, precision=written_in),
        Reporter(False, None),
        store,
    )
    writer._checkpoint()  # saving runs no bf16 math, so any CPU writes this
    _resume(Trainer(Net(), _numbered_dataset(), ctx, CONFIG, Reporter(True, None), store))
    out = capsys.readouterr().out
    assert "Resumed from" in out
    assert (
        "was written in bf16, this run trains in fp32 (--precision), so the result differs from an "
        "uninterrupted run" in out
    ) is warned


def _scalar_events(log_dir) -> list:
    """The events of the one TensorBoard file in `log_dir` (TFRecord: length, CRC, event, CRC)."""
    from tensorboardX.proto.event_pb2 import Event

    (path,) = log_dir.glob("events.out.tfevents.*")
    content, events, offset = path.read_bytes(), [], 0
    while offset < len(content):
        (length,) = struct.unpack("<Q", content[offset : offset + 8])
        events.append(Event.FromString(content[offset + 12 : offset + 12 + length]))
        offset += 12 + length + 4
    return events


def test_a_resumed_run_hides_the_scalars_it_logs_again(tmp_path):
    """Steps after the checkpoint were logged by the killed run too; TensorBoard purges them from the
    step a SessionLog START names."""
    ctx = ONE_RANK
    config = dataclasses.replace(CONFIG, log_interval=1)
    store = CheckpointStore(tmp_path / "ckpt", keep=100)
    killed = Trainer(Net(), _numbered_dataset(), ctx, config, Reporter(True, tmp_path / "tb1"), store)
    killed.fit()
    killed.reporter.close()
    for path in (tmp_path / "ckpt").glob("checkpoint-*.pt"):
        if int(path.stem.split("-")[1]) > 4:
            path.unlink()  # as if killed after step 4's checkpoint
    resumed = Trainer(Net(), _numbered_dataset(), ctx, config, Reporter(True, tmp_path / "tb2"), store)
    _resume(resumed)
    resumed.fit()
    resumed.reporter.close()
    events = _scalar_events(tmp_path / "tb2")
    assert _purge_steps(events) == [5]
    assert min(e.step for e in events if any(v.tag == "loss" for v in e.summary.value)) == 5
    # A fresh start purges from its first step: an attempt killed before its first checkpoint
    # logged steps this run logs again.
    assert _purge_steps(_scalar_events(tmp_path / "tb1")) == [1]


def test_scalars_logged_before_a_checkpoint_survive_a_kill(tmp_path):
    """A resumed run logs only the steps after its checkpoint, so those before it must be on disk when
    the checkpoint is. tensorboardX's SummaryWriter left some in its queue (seen under load)."""
    ctx = ONE_RANK
    store = CheckpointStore(tmp_path / "ckpt", keep=100)
    killed = Trainer(
        Net(),
        _numbered_dataset(),
        ctx,
        dataclasses.replace(CONFIG, log_interval=1),
        Reporter(True, tmp_path / "tb"),
        store,
    )
    killed.train_epoch()  # not closed, as a SIGKILL leaves it
    checkpointed = max(int(path.stem.split("-")[1]) for path in store.directory.glob("checkpoint-*.pt"))
    logged = {e.step for e in _scalar_events(tmp_path / "tb") if any(v.tag == "loss" for v in e.summary.value)}
    assert checkpointed >= 2 and set(range(1, checkpointed + 1)) <= logged


@pytest.fixture
def sigterm_during_evaluation(monkeypatch):
    """SIGTERM's handler inside sigterm.deferred(), as if the kubelet's signal came while the test set
    was being scored; the request is cleared afterwards."""

    def evaluate_then_signal(*args, **kwargs):
        result = evaluate(*args, **kwargs)
        sigterm._on_sigterm(15, None)
        return result

    monkeypatch.setattr(loop, "evaluate", evaluate_then_signal)
    yield
    sigterm._requested.clear()


def test_sigterm_during_evaluation_stops_after_the_epoch_end_checkpoint(tmp_path, sigterm_during_evaluation):
    """Not at once: the ranks agree after the epoch-end checkpoint, so none stops alone and no step is lost."""
    ctx = ONE_RANK
    store = CheckpointStore(tmp_path, keep=100)
    trainer = Trainer(
        Net(),
        _numbered_dataset(),
        ctx,
        dataclasses.replace(CONFIG, epochs=3, checkpoint_every=0),
        Reporter(False, None),
        store,
    )
    with pytest.raises(SystemExit) as stopped:
        trainer.fit()
    assert stopped.value.code == 143
    (path,) = tmp_path.glob("checkpoint-*.pt")
    saved = torch.load(path, weights_only=False)
    assert (saved["epoch"], saved["consumed"], saved["step"]) == (2, 0, trainer.progress.step)


def test_sigterm_after_the_last_epoch_lets_the_run_finish(tmp_path, sigterm_during_evaluation):
    """Nothing is left to train: the outputs are written rather than a checkpoint that resumes to them."""
    ctx = ONE_RANK
    trainer = Trainer(
        Net(),
        _numbered_dataset(),
        ctx,
        dataclasses.replace(CONFIG, epochs=1),
        Reporter(False, None),
        CheckpointStore(tmp_path, keep=100),
    )
    trainer.fit()  # returns: no SystemExit(143)
    newest = max(tmp_path.glob("checkpoint-*.pt"))
    saved = torch.load(newest, weights_only=False)
    assert (saved["epoch"], saved["consumed"], saved["step"]) == (2, 0, trainer.progress.step), (
        "the epoch-end checkpoint"
    )
    assert trainer.progress.epoch == 2


def _purge_steps(events: list) -> list[int]:
    return [e.step for e in events if e.HasField("session_log") and e.session_log.status == e.session_log.START]


def test_resume_after_the_epochs_last_step_evaluates_without_training(tmp_path):
    # A step checkpoint on the epoch's last batch, then a stop before the epoch-end checkpoint.
    ctx = ONE_RANK
    store = CheckpointStore(tmp_path, keep=3)
    writer = Trainer(Net(), _numbered_dataset(), ctx, CONFIG, Reporter(False, None), store)
    writer.progress.step, writer.progress.consumed = writer.batches_per_epoch, TRAIN_SIZE
    writer._checkpoint()
    reader = RecordingTrainer(Net(), _numbered_dataset(), ctx, CONFIG, Reporter(False, None), store)
    _resume(reader)
    result = reader.fit()
    assert reader.samples == []
    assert result == evaluate(writer.net, _numbered_dataset(), ctx, CONFIG.test_batch_size), (
        "the checkpoint's weights, scored"
    )
    assert reader.progress.epoch == 2 and reader.progress.step == writer.batches_per_epoch


def test_resume_at_another_world_size_trains_each_remaining_sample_once(tmp_path, capsys):
    two_ranks = tmp_path / "two"
    two_ranks.mkdir()
    mp.spawn(run_rank, args=(2, tmp_path / "store", _train, tmp_path / "ckpt", two_ranks), nprocs=2, join=True)
    before = [
        sample
        for rank in range(2)
        for step in json.loads((two_ranks / f"rank{rank}.json").read_text())[:2]
        for sample in step
    ]
    resumed = tmp_path / "resumed"
    resumed.mkdir()
    shutil.copy(tmp_path / "ckpt" / "checkpoint-000000002.pt", resumed)

    single = _train(ONE_RANK, resumed, tmp_path)

    after = [sample for step in single.samples for sample in step]
    assert len(before) == 2 * 2 * CONFIG.batch_size
    # One rank drops no remainder: together the runs train the whole epoch, no sample twice.
    assert sorted(before + after) == list(range(TRAIN_SIZE))
    assert "the rest of epoch 1 is resharded over 1 ranks" in capsys.readouterr().out
