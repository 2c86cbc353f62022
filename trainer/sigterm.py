"""SIGTERM, the kubelet's stop, ends the trainer with 143 (128 + SIGTERM, what the kubelet reports
for it, so restartPolicy ExitCode retries) within seconds, wherever the main thread is.

Two cases need more than Python's default: as a container's PID 1 (the chart's command without
torchrun) the kernel drops signals that have no handler, and a Python handler runs only once the
main thread is back in Python, which a rendezvous or a collective waiting for a lost peer delays
for up to their timeouts. So the handler unwinds the main thread (closing the TensorBoard writer
and the process group), and a watcher thread ends the process if that has not happened shortly.
Checkpoints and outputs are written atomically, so stopping anywhere corrupts none.

Inside `deferred()` (training with checkpoints) the handler only records the request: the ranks
agree on it at a step, write a checkpoint there and exit with the same code, so a restarted pod
loses no steps. The watcher then allows longer, still inside the grace period.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from trainer.failures import EXIT_SIGTERM

UNWIND_SECONDS = 5.0  # well inside the kubelet's default grace period of 30 s
# Room for the ranks to reach their next agreed step and write a checkpoint, still inside it.
DEFERRED_SECONDS = 20.0

_deferring = False
_requested = threading.Event()


def _on_sigterm(signum: int, frame) -> None:
    if _deferring:
        _requested.set()
    else:
        raise SystemExit(EXIT_SIGTERM)


def _watch(wakeups: int) -> None:
    # Python's C-level handler writes each signal's number to the wakeup fd from whichever thread
    # the kernel picked, even while the main thread is blocked in C++.
    while os.read(wakeups, 1) != bytes([signal.SIGTERM]):
        pass  # another signal with a Python handler (SIGINT): not ours
    os.write(2, b"Stopped by SIGTERM\n")
    threading.Event().wait(DEFERRED_SECONDS if _deferring else UNWIND_SECONDS)
    os._exit(EXIT_SIGTERM)


@contextmanager
def deferred() -> Iterator[None]:
    """Inside, SIGTERM only makes stop_requested() true. One arriving after the ranks' last agreement
    does not stop this rank alone on the way out: the outputs follow, and the watcher ends the process
    if they take too long."""
    global _deferring
    _deferring = True
    try:
        yield
    finally:
        _deferring = False


def stop_requested() -> bool:
    return _requested.is_set()


def exit_on_sigterm() -> None:
    """Install the handler and its watcher; call once, from the main thread."""
    wakeups, wakeup_writer = os.pipe()
    os.set_blocking(wakeup_writer, False)
    signal.set_wakeup_fd(wakeup_writer, warn_on_full_buffer=False)
    signal.signal(signal.SIGTERM, _on_sigterm)
    threading.Thread(target=_watch, args=(wakeups,), name="sigterm-watcher", daemon=True).start()
