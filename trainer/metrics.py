"""What rank 0 reports: the seed script's console lines, Katib-parsable metrics, TensorBoard
scalars and a final metrics.json."""
from __future__ import annotations

import json
from pathlib import Path

from trainer.fileio import atomic_write


class Reporter:
    """Prints and logs on the main rank only; every method is a no-op elsewhere."""

    def __init__(self, enabled: bool, log_dir: str | Path | None) -> None:
        self.enabled = enabled
        self._log_dir = log_dir if enabled else None
        self._writer = None  # opened at the first scalar, once a resume has said where it starts
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
        self, epoch: int, batch: int, num_batches: int, samples_done: int, total: int,
        loss: float, step: int, lr: float,
    ) -> None:
        # The seed script's format, for users' log parsers; the numbers cover all ranks (README).
        self.info(
            f"Train Epoch: {epoch} [{samples_done}/{total} ({100.0 * batch / num_batches:.0f}%)]"
            f"\tloss={loss:.4f}"
        )
        self._scalar("loss", loss, step)
        self._scalar("lr", lr, step)

    def evaluation(self, epoch: int, accuracy: float, val_loss: float) -> None:
        # Katib's default StdOut filter reads `name=value`; the braces line is the seeds' format.
        self.info(f"epoch={epoch} accuracy={accuracy:.4f} val_loss={val_loss:.4f}")
        self.info(
            f"{{metricName: accuracy, metricValue: {accuracy:.4f}}};"
            f"{{metricName: loss, metricValue: {val_loss:.4f}}}"
        )
        self._scalar("accuracy", accuracy, epoch)
        self._scalar("val_loss", val_loss, epoch)

    def flush(self) -> None:
        """Write out buffered scalars. Called before each checkpoint: a resumed run logs only the steps
        after it, so scalars still buffered (tensorboardX writes every 2 minutes) when a pod is killed
        would be lost for good."""
        if self._writer is not None:
            self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()

    def _scalar(self, tag: str, value: float, step: int) -> None:
        if not self._log_dir:
            return
        if self._writer is None:
            from tensorboardX import SummaryWriter

            self._writer = SummaryWriter(str(self._log_dir), purge_step=self._purge_step)
        self._writer.add_scalar(tag, value, step)


def write_metrics_json(path: str | Path, metrics: dict) -> Path:
    text = json.dumps(metrics, indent=2, sort_keys=True) + "\n"
    return atomic_write(path, lambda handle: handle.write(text.encode()))
