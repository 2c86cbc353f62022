"""`python -m trainer.torchrun`: torchrun (same arguments), exiting with the trainer's exit codes.

torchrun itself exits with 1 whenever a worker fails, is signalled or misses its peers, so under
restartPolicy ExitCode a pod could not tell a lost peer or an OOM kill from bad settings (1), and every
failure ended the job without a retry.
"""

from __future__ import annotations

import sys
import traceback

from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.run import main as torchrun

from trainer.failures import EXIT_PERMANENT, EXIT_RETRYABLE, container_exit_code, signal_exit_code

# torchrun's own setup refusing its settings: no CUDA for --nproc-per-node gpu, a bad --nnodes range,
# no etcd module for the etcd backend (an ImportError). A retry fails alike.
SETUP_ERRORS = (ValueError, TypeError, ImportError)


def worker_exit_code(error: ChildFailedError) -> int:
    """The first failed worker's exit code; a signal as the kubelet reports one (128 + signal)."""
    _, failure = error.get_first_failure()
    return container_exit_code(failure.exitcode)


def main() -> int:
    try:
        torchrun()
    except ChildFailedError as error:
        print(error, file=sys.stderr, flush=True)  # torchrun's summary: the failed ranks and their codes
        return worker_exit_code(error)
    except SignalException as error:  # the pod is being stopped (eviction, deletion)
        print(error, file=sys.stderr, flush=True)
        return signal_exit_code(error.sigval)
    except SETUP_ERRORS:
        traceback.print_exc()
        return EXIT_PERMANENT
    except Exception:  # e.g. a rendezvous timeout or a refused connection (a lost or late peer): a retry may fix it
        traceback.print_exc()
        return EXIT_RETRYABLE
    return 0


if __name__ == "__main__":
    sys.exit(main())
