"""What rank 0 reports: the seed script's console lines, Katib-parsable metrics, TensorBoard
scalars and a final metrics.json."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from trainer.failures import StorageFull
from trainer.fileio import atomic_write, full_volume_is_final
from trainer.model import TRAIN_FLOPS_PER_IMAGE

if TYPE_CHECKING:
    from tensorboardX.event_file_writer import EventsWriter

    from trainer.checkpoint import Progress
    from trainer.config import TrainConfig


@dataclass(frozen=True)
class Evaluation:
    accuracy: float
    loss: float
    count: int


class Reporter:
    """Prints and logs on the main rank only; every method is a no-op elsewhere."""

    def __init__(self, enabled: bool, log_dir: str | Path | None) -> None:
        self.enabled = enabled
        self._log_dir = log_dir if enabled else None
        self._events: EventsWriter | None = None  # opened at the first scalar, once a resume has said where it starts
        # A write that found the volume full. Raised at the next flush (a checkpoint) or close (the
        # end), where every rank learns of it: raised at once, it would stop rank 0 alone, and the
        # others would fail as for a lost peer.
        self._full: StorageFull | None = None
        # A fresh start hides whatever an attempt killed before its first checkpoint logged here.
        self._purge_step = 1

    def resume_after(self, step: int) -> None:
        """Hide from TensorBoard the per-step scalars an interrupted run logged after `step`: this
        run logs those steps again, and readers would otherwise see each twice. The per-epoch ones
        (logged against the epoch, as the seed script does) repeat only if a run stopped between an
        evaluation and the epoch-end checkpoint right after it."""
        self._purge_step = step + 1

    def info(self, message: str) -> None:
        if self.enabled:
            print(message, flush=True)

    def train_progress(
        self,
        epoch: int,
        batch: int,
        num_batches: int,
        samples_done: int,
        total: int,
        loss: float,
        step: int,
        lr: float,
    ) -> None:
        # The seed script's format, for users' log parsers; the numbers cover all ranks (README).
        self.info(
            f"Train Epoch: {epoch} [{samples_done}/{total} ({100.0 * batch / num_batches:.0f}%)]\tloss={loss:.4f}"
        )
        self._scalar("loss", loss, step)
        self._scalar("lr", lr, step)

    def evaluation(self, epoch: int, accuracy: float, val_loss: float) -> None:
        # Katib's default StdOut filter reads `name=value`; the braces line is the seeds' format.
        self.info(f"epoch={epoch} accuracy={accuracy:.4f} val_loss={val_loss:.4f}")
        self.info(
            f"{{metricName: accuracy, metricValue: {accuracy:.4f}}};{{metricName: loss, metricValue: {val_loss:.4f}}}"
        )
        self._scalar("accuracy", accuracy, epoch)
        self._scalar("val_loss", val_loss, epoch)

    def flush(self) -> None:
        """Hand the scalars logged so far to the OS. Called before each checkpoint: a resumed run logs only
        the steps after it, so scalars still in this process when a pod is killed would be lost for good."""
        self._raise_if_full()
        if self._events is not None:
            with self._writing():
                self._events.flush()

    def close(self) -> None:
        events, self._events = self._events, None  # once, even if closing fails
        if events is not None:
            with self._writing():
                events.close()
        self._raise_if_full()

    def _raise_if_full(self) -> None:
        if self._full is not None:
            raise self._full

    def _writing(self):
        return full_volume_is_final(self._log_dir, "TensorBoard events")

    def _scalar(self, tag: str, value: float, step: int) -> None:
        if not self._log_dir or self._full is not None:
            return
        # tensorboardX's event file written in this thread: its SummaryWriter queues events for a thread
        # of its own, whose flush() leaves those still queued unwritten.
        from tensorboardX.event_file_writer import EventsWriter
        from tensorboardX.proto.event_pb2 import Event, SessionLog
        from tensorboardX.summary import scalar

        try:
            with self._writing():
                if self._events is None:
                    Path(self._log_dir).mkdir(parents=True, exist_ok=True)
                    self._events = EventsWriter(str(Path(self._log_dir) / "events"))
                    # TensorBoard hides the scalars of earlier attempts from this step on.
                    self._events.write_event(
                        Event(
                            wall_time=time.time(),
                            step=self._purge_step,
                            session_log=SessionLog(status=SessionLog.START),
                        )
                    )
                self._events.write_event(Event(wall_time=time.time(), step=step, summary=scalar(tag, value)))
        except StorageFull as error:
            self._full = error


def final_metrics(
    run_id: str | None, dataset: str, config: TrainConfig, world_size: int, result: Evaluation, progress: Progress
) -> dict:
    """metrics.json's content: the final evaluation, and the throughput over the whole run."""
    return {
        "run_id": run_id,
        "dataset": dataset,
        "epochs": config.epochs,
        "world_size": world_size,
        "precision": config.precision,
        "batch_size": -(-config.global_batch(world_size) // world_size),  # per process; the largest rank's part
        "global_batch_size": config.global_batch(world_size),
        "accuracy": result.accuracy,
        "val_loss": result.loss,
        "test_samples": result.count,
        "steps": progress.step,
        "train_images": progress.train_images,
        "train_seconds": progress.train_seconds,
        "images_per_second": progress.images_per_second,
        "model_tflops_per_second": progress.images_per_second * TRAIN_FLOPS_PER_IMAGE / 1e12,
        "history": progress.history,
    }


def write_metrics_json(path: str | Path, metrics: dict) -> Path:
    text = json.dumps(metrics, indent=2, sort_keys=True) + "\n"
    return atomic_write(path, lambda handle: handle.write(text.encode()))
