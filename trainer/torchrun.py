"""`python -m trainer.torchrun`: torchrun (same arguments), exiting with its failed worker's code.

torchrun itself exits with 1 whenever a worker fails, so under restartPolicy ExitCode a pod could not
tell a lost peer (the trainer's retryable 128) or an OOM kill (137) from bad settings (1), and every
failure ended the job without a retry.
"""
from __future__ import annotations

import sys

from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.run import main as torchrun


def worker_exit_code(error: ChildFailedError) -> int:
    """The first failed worker's exit code; a signal as the kubelet reports one (128 + signal)."""
    _, failure = error.get_first_failure()
    return 128 - failure.exitcode if failure.exitcode < 0 else failure.exitcode


def main() -> None:
    try:
        torchrun()
    except ChildFailedError as error:
        print(error, file=sys.stderr, flush=True)  # torchrun's summary: the failed ranks and their codes
        sys.exit(worker_exit_code(error))


if __name__ == "__main__":
    main()
