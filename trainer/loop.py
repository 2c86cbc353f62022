"""The training loop: sharded steps over resident tensors, exact evaluation, resumable state."""

from __future__ import annotations

import math
import time
from contextlib import nullcontext
from dataclasses import asdict
from pathlib import Path
from typing import NoReturn

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from trainer import sigterm
from trainer.checkpoint import PROGRESS_KEYS, Checkpoint, CheckpointStore, Progress
from trainer.config import TrainConfig
from trainer.cuda_graph import GraphedStep
from trainer.data import Dataset, epoch_batches, eval_shard
from trainer.distributed import DistContext
from trainer.failures import EXIT_SIGTERM, IncompatibleCheckpoint, LaunchError, NonFiniteLoss, StorageFull
from trainer.metrics import Evaluation, Reporter
from trainer.model import MEMORY_FORMAT, Net
from trainer.runtime import autocast_for, configure_device

STOP_CHECK_STEPS = 10  # how often the ranks agree on whether one got SIGTERM
ONECYCLE_WARMUP = 0.15  # fraction of all steps spent warming up from lr/10


def lr_at(config: TrainConfig, step: int, total_steps: int) -> float:
    if config.lr_schedule == "constant":
        return config.lr
    warmup = max(1, int(total_steps * ONECYCLE_WARMUP))
    if step < warmup:
        return config.lr * (0.1 + 0.9 * step / warmup)
    return config.lr * max(0.0, (total_steps - step) / max(1, total_steps - warmup))


def read_latest_checkpoint(store: CheckpointStore | None, ctx: DistContext) -> Checkpoint:
    """The newest valid checkpoint, read by rank 0 and sent to every rank, so workers need no
    shared volume; (None, None) when there is none."""
    if store is None:
        return None, None
    latest: Checkpoint = (None, None)
    refusal: str | None = None
    if ctx.is_main:
        store.remove_partial_writes()  # rank 0 writes every checkpoint, and none is under way
        try:
            latest = store.load_latest()
        except IncompatibleCheckpoint as error:
            refusal = str(error)  # sent on, so that every rank stops with the reason, not a lost peer
    latest, refusal = ctx.broadcast_from_main((latest, refusal))
    if refusal:
        raise IncompatibleCheckpoint(refusal)
    return latest


def _epochs(count: int) -> str:
    return "its 1 epoch" if count == 1 else f"all {count} epochs"


@torch.inference_mode()
def evaluate(net: nn.Module, data: Dataset, ctx: DistContext, batch_size: int, precision: str = "fp32") -> Evaluation:
    """Exact accuracy and mean loss over the whole test set, whatever the world size.

    Each rank scores a disjoint, unpadded slice; sums of correct, count and loss are
    all-reduced, so no sample is counted twice (DistributedSampler pads, this does not).
    The unwrapped module is used so uneven slice lengths cannot hang a DDP collective.
    """
    net.eval()
    totals = torch.zeros(3, dtype=torch.float64, device=ctx.device)
    indices = eval_shard(len(data.test_labels), ctx.rank, ctx.world_size).to(ctx.device)
    with autocast_for(ctx.device, precision):
        for batch in indices.split(batch_size):
            output = net(data.test_images[batch])
            target = data.test_labels[batch]
            totals[0] += (output.argmax(dim=1) == target).sum()
            totals[1] += len(batch)
            totals[2] += F.nll_loss(output, target, reduction="sum")
    ctx.all_reduce_sum(totals)
    correct, count, loss_sum = totals.tolist()
    if int(count) != len(data.test_labels):
        raise AssertionError(f"evaluated {int(count)} samples, test set has {len(data.test_labels)}")
    return Evaluation(correct / count, loss_sum / count, int(count))


class Trainer:
    def __init__(
        self,
        net: nn.Module,
        data: Dataset,
        ctx: DistContext,
        config: TrainConfig,
        reporter: Reporter,
        store: CheckpointStore | None,
    ) -> None:
        self.net = net
        self.data = data
        self.ctx = ctx
        self.config = config
        self.reporter = reporter
        self.store = store
        self.global_batch = config.global_batch(ctx.world_size)
        if self.global_batch < ctx.world_size:  # only a --global-batch-size can be
            raise LaunchError(
                f"--global-batch-size {self.global_batch} is smaller than the world size {ctx.world_size}, so "
                f"some processes would train on nothing; give {ctx.world_size} or more, or run fewer processes"
            )
        self.optimizer = torch.optim.SGD(
            net.parameters(),
            lr=config.lr,
            momentum=config.momentum,
            nesterov=config.nesterov,
            weight_decay=config.weight_decay,
            fused=True,  # one kernel per step instead of a pass per operation (half the time on CPU)
        )
        # (part, share) -> loss: one optimizer step on this rank's part of a step's batch.
        self._train_step = (
            GraphedStep(self._step, self.optimizer, ctx, config, self.global_batch)
            if config.cuda_graphs
            else self._step
        )
        module: nn.Module = net
        if ctx.distributed:
            module = DistributedDataParallel(
                net,
                device_ids=[ctx.device.index] if ctx.device.type == "cuda" else None,
                # Averaged grads are read from the allreduce buckets, not copied back out (each
                # backward still copies fresh grads in, as zero_grad drops the views; see _step).
                gradient_as_bucket_view=True,
            )
            self._settle_buckets(module)
        self.module = torch.compile(module) if config.compile else module
        self.batches_per_epoch = len(
            epoch_batches(
                len(data.train_labels), config.seed, 1, self.global_batch, ctx.world_size, torch.device("cpu")
            )
        )
        self.total_steps = self.batches_per_epoch * config.epochs
        self.progress = Progress()

    def _settle_buckets(self, ddp: DistributedDataParallel) -> None:
        """Run one zero-loss forward/backward so that every real step uses the same buckets.

        DDP's first backward uses its initial bucket layout and then rebuilds the buckets in the
        order gradients arrived. Without this, a resumed run would take its first step in the
        initial layout where the uninterrupted run had the rebuilt one, and gloo would sum in
        another order (different bits from 3 ranks on). The loss is zero and the gradients are
        dropped, so parameters, optimizer state and the RNG stay untouched.
        """
        (ddp(self.data.train_images[:1]).sum() * 0).backward()
        self.optimizer.zero_grad(set_to_none=True)

    # -- checkpoints ---------------------------------------------------------------------------

    def settings(self) -> dict:
        """What a checkpoint must share with this run to be resumed: data, batches, optimizer."""
        c = self.config
        settings = {
            "dataset": self.data.name,
            "train_samples": len(self.data.train_labels),
            "batch_size": c.batch_size,
            "global_batch_size": c.global_batch_size,
            "seed": c.seed,
            "lr": c.lr,
            "momentum": c.momentum,
            "nesterov": c.nesterov,
            "weight_decay": c.weight_decay,
            "label_smoothing": c.label_smoothing,
            "lr_schedule": c.lr_schedule,
        }
        if c.lr_schedule != "constant":
            # The schedule spans every step of the run: constant LR may be extended or resharded,
            # but this one's length depends on the epochs and (steps per epoch) the world size.
            settings["epochs"] = c.epochs
            settings["world_size"] = self.ctx.world_size
        return settings

    def state(self) -> dict:
        p = self.progress
        return {
            "settings": self.settings(),
            "model": self.net.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            **asdict(p),
            "world_size": self.ctx.world_size,
            "precision": self.config.precision,
            "rng": {"torch": torch.get_rng_state()},
        }

    def resume(self, latest: Checkpoint) -> None:
        """Continue from `latest`, read_latest_checkpoint's answer (read before the data, whose choice
        it decides when the run had fallen back)."""
        path, state = latest
        if path is None or state is None:  # both or neither
            return
        progress = Progress(**{key: state[key] for key in PROGRESS_KEYS})
        self._refuse_other_settings(path, state["settings"])
        self._refuse_more_epochs(path, progress)
        self._load(path, state)
        self.progress = progress
        self._warn_of_another_runtime(path, state)
        where = f"in epoch {progress.epoch}" if progress.consumed else f"the end of epoch {progress.epoch - 1}"
        self.reporter.info(f"Resumed from {path} (step {progress.step}, {where})")
        self.reporter.resume_after(progress.step)
        if progress.epoch > self.config.epochs:
            self._say_finished()

    def _refuse_other_settings(self, path: Path, written: dict) -> None:
        changed = [
            f"{key} {written.get(key)!r} (now {value!r})"
            for key, value in self.settings().items()
            if written.get(key) != value
        ]
        if changed:
            raise IncompatibleCheckpoint(
                f"{path} was written by a run with other settings: {', '.join(changed)}. A restarted "
                "run resumes only with the same settings; to start a new run, point --checkpoint-dir "
                "at another directory or delete the checkpoints there."
            )

    def _refuse_more_epochs(self, path: Path, progress: Progress) -> None:
        """A run that trained into a later epoch than --epochs no longer has that epoch's weights."""
        trained_into = progress.epoch if progress.consumed else progress.epoch - 1
        if trained_into > self.config.epochs:
            raise IncompatibleCheckpoint(
                f"{path} has trained into epoch {trained_into}, beyond --epochs {self.config.epochs}, "
                f"so its weights are not epoch {self.config.epochs}'s. Pass --epochs {trained_into} or "
                "more to continue that run, or point --checkpoint-dir at "
                "another directory to start a new one."
            )

    def _load(self, path: Path, state: dict) -> None:
        """The weights, optimizer and RNG; refused when they do not fit this trainer's model."""
        try:
            self.net.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
        except (RuntimeError, ValueError, KeyError) as error:
            raise IncompatibleCheckpoint(
                f"{path} does not fit this trainer's model or optimizer ({str(error).strip().splitlines()[0]}). "
                "Run the image that wrote it, or point --checkpoint-dir at another directory to start a new run."
            ) from error
        torch.set_rng_state(state["rng"]["torch"])

    def _warn_of_another_runtime(self, path: Path, state: dict) -> None:
        """Another world size or precision is allowed (a restarted GPU pod may land on a node without
        bf16 hardware), but the result then differs from an uninterrupted run's."""
        epoch = self.progress.epoch
        if state["world_size"] != self.ctx.world_size and epoch <= self.config.epochs:
            self.reporter.info(
                f"warning: {path} was written with world size {state['world_size']}, now "
                f"{self.ctx.world_size}; the rest of epoch {epoch} is resharded over "
                f"{self.ctx.world_size} ranks, so the result differs from an uninterrupted run"
            )
        if state["precision"] != self.config.precision:
            self.reporter.info(
                f"warning: {path} was written in {state['precision']}, this run trains in {self.config.precision} "
                "(--precision), so the result differs from an uninterrupted run"
            )

    def _say_finished(self) -> None:
        if "epochs" not in self.settings():  # a resume may extend the run (see settings())
            more = "a run with more --epochs on this --checkpoint-dir trains on from here."
        else:
            more = (
                f"its {self.config.lr_schedule} schedule spans exactly these epochs, so to train longer "
                "start a new run in another --checkpoint-dir."
            )
        last = self.progress.history[-1]
        self.reporter.info(
            f"That run has finished {_epochs(self.config.epochs)} (accuracy {last['accuracy']:.4f} then), so "
            f"nothing is left to train; {more}"
        )

    def _checkpoint(self) -> None:
        if self.store is None:
            return
        # Every rank checks (the weights are identical), so all stop together. A checkpoint of
        # diverged weights would make every restart fail again.
        if not bool(torch.stack([param.isfinite().all() for param in self.net.parameters()]).all()):  # one sync
            raise self._diverged(
                f"the weights became non-finite by step {self.progress.step}, so no checkpoint was written"
            )
        # A full volume stops every rank alike (exit 1), not rank 0 alone.
        with self.ctx.main_failure_stops_all("could not write", StorageFull):
            if self.ctx.is_main:
                self.reporter.flush()
                self.store.save(self.state(), self.progress.step)

    # -- training ------------------------------------------------------------------------------

    def fit(self) -> Evaluation:
        p = self.progress
        if p.epoch > self.config.epochs:
            # A finished run, resumed: its model on this run's test set (--limit-test may differ).
            result = self._evaluate()
            self.reporter.evaluation(p.epoch - 1, result.accuracy, result.loss)
            return result
        # With checkpoints, SIGTERM stops the job where the ranks next agree to (train_epoch, and
        # after each epoch-end checkpoint), once that step is checkpointed: no step is trained twice.
        with sigterm.deferred() if self.store else nullcontext():
            while p.epoch <= self.config.epochs:
                self.train_epoch()
                result = self._evaluate()
                if not math.isfinite(result.loss):
                    raise self._diverged(f"test loss became {result.loss} after epoch {p.epoch}")
                self.reporter.evaluation(p.epoch, result.accuracy, result.loss)
                p.history.append({"epoch": p.epoch, "accuracy": result.accuracy, "val_loss": result.loss})
                p.epoch, p.consumed = p.epoch + 1, 0
                self._checkpoint()
                # After the last epoch the outputs are written instead: that run has nothing left to train.
                if p.epoch <= self.config.epochs and self._stop_agreed():
                    self._stop()
        last = p.history[-1]
        return Evaluation(last["accuracy"], last["val_loss"], len(self.data.test_labels))

    def train_epoch(self) -> None:
        p, config, ctx = self.progress, self.config, self.ctx
        labels = self.data.train_labels
        batches = epoch_batches(
            len(labels), config.seed, p.epoch, self.global_batch, ctx.world_size, ctx.device, start=p.consumed
        )
        # Batches of this epoch run before a resume (exact unless the global batch changed), so
        # progress lines and log intervals continue where they were.
        first = p.consumed // self.global_batch
        num_batches = first + len(batches)
        window_loss = torch.zeros((), device=ctx.device)
        window_steps = 0
        self.net.train()
        started = time.perf_counter()
        for index, batch in enumerate(batches, start=first):
            lr = lr_at(config, p.step, self.total_steps)
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            part = batch[ctx.rank :: ctx.world_size]
            loss = self._train_step(part, ctx.world_size * len(part) / len(batch))
            window_loss += loss.detach()
            window_steps += 1
            p.step += 1
            taken = len(batch)
            p.consumed += taken
            p.train_images += taken
            if index % config.log_interval == 0:
                mean_loss = self._window_mean(window_loss, window_steps, p.epoch, index)
                self.reporter.train_progress(
                    p.epoch,
                    index,
                    num_batches,
                    p.consumed - taken,
                    len(labels),
                    mean_loss,
                    p.step,
                    lr,
                )
                window_loss.zero_()
                window_steps = 0
            # An epoch's last step is checkpointed after its evaluation, and fit() agrees on a stop there.
            last = index == num_batches - 1
            stopping = not last and p.step % STOP_CHECK_STEPS == 0 and self._stop_agreed()
            due = bool(config.checkpoint_every) and p.step % config.checkpoint_every == 0 and not last
            if due or stopping:
                if window_steps:
                    self._window_mean(window_loss, window_steps, p.epoch, index)
                p.train_seconds += self._elapsed(started)
                self._checkpoint()
                started = time.perf_counter()
            if stopping:
                self._stop()
        if window_steps:
            self._window_mean(window_loss, window_steps, p.epoch, num_batches - 1)
        p.train_seconds += self._elapsed(started)

    def _step(self, part: torch.Tensor, share: float) -> torch.Tensor:
        """One optimizer step on this rank's `part` of a step's batch. `share` is its part of the batch
        (world size x its samples / the batch's), by which its mean loss is weighted: DDP averages the
        ranks' gradients, and where their parts differ in size, every sample then still counts alike."""
        # None rather than zeroed: then every DDP backward, a resumed run's first included, takes
        # the same path into the buckets (zeroed bucket views take another, which rounds
        # differently at 3+ ranks). Measured no slower.
        self.optimizer.zero_grad(set_to_none=True)
        with autocast_for(self.ctx.device, self.config.precision):
            output = self.module(self.data.train_images[part])
        # The net ends in log_softmax, so cross_entropy on its output equals nll_loss and adds
        # label smoothing (log_softmax of log-probabilities is the identity).
        loss = F.cross_entropy(output, self.data.train_labels[part], label_smoothing=self.config.label_smoothing)
        if share != 1:  # an exact 1 where the ranks' parts are equal: the step keeps its bits
            loss = loss * share
        loss.backward()
        self.optimizer.step()
        return loss

    def _evaluate(self) -> Evaluation:
        return evaluate(self.net, self.data, self.ctx, self.config.test_batch_size, self.config.precision)

    def _stop_agreed(self) -> bool:
        """Whether any rank got SIGTERM, asked of all ranks at the same step (one small allreduce);
        always False without checkpoints, where SIGTERM stops a rank at once."""
        return self.store is not None and not self.ctx.all_true(not sigterm.stop_requested())

    def _stop(self) -> NoReturn:
        """Ends this rank after the checkpoint of the step all ranks stop at."""
        self.reporter.info(
            f"Stopped by SIGTERM after step {self.progress.step}, checkpointed: a restarted pod resumes from there"
        )
        raise SystemExit(EXIT_SIGTERM)

    def _window_mean(self, loss_sum: torch.Tensor, steps: int, epoch: int, batch: int) -> float:
        """Mean training loss over recent steps on all ranks; stops the job if it is not finite."""
        totals = self.ctx.all_reduce_sum(torch.stack([loss_sum, torch.tensor(float(steps), device=loss_sum.device)]))
        mean = (totals[0] / totals[1]).item()
        if not math.isfinite(mean):
            raise self._diverged(f"training loss became {mean} in epoch {epoch} near batch {batch}")
        return mean

    def _diverged(self, what: str) -> NonFiniteLoss:
        return NonFiniteLoss(
            f"{what}; the model diverged. Lower --lr (now {self.config.lr}) or --momentum, then rerun."
        )

    def _elapsed(self, started: float) -> float:
        if self.ctx.device.type == "cuda":
            torch.cuda.synchronize(self.ctx.device)
        return time.perf_counter() - started


def new_trainer(
    data: Dataset, ctx: DistContext, config: TrainConfig, reporter: Reporter, store: CheckpointStore | None
) -> Trainer:
    """A Trainer of a fresh Net, with the data and the model in the device's layout and the same
    initial weights on every rank (config.seed)."""
    data = data.to(ctx.device, MEMORY_FORMAT)
    # After the data is loaded: from here on freed memory stays with the process, and the loading's
    # temporary copies (about 0.6 GB) would stay with it.
    configure_device(ctx.device)
    torch.manual_seed(config.seed)
    net = Net().to(ctx.device, memory_format=MEMORY_FORMAT)  # type: ignore[call-overload]  # torch's stubs lack it
    return Trainer(net, data, ctx, config, reporter, store)
