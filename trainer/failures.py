"""Why the trainer stops, and the exit code each reason gives: the one home of both.

The codes are for the controllers' exit-code restart policies: the training-operator v1's `ExitCode`
fails the job on 1-127 and recreates the pod on 128-255; T9k's `ExitCode` retries only 130, 137, 138
and 143 (138 reserved for a program asking to be restarted). The kubelet reports a process killed by
signal N as 128 + N. (ci/localjob/kinds hold each controller's rule; a test checks these codes against them.)
A `Failure` prints one line and exits with its `exit_code`; any other exception prints its
traceback and exits EXIT_RETRYABLE, since it may pass (a lost peer above all: gloo and NCCL raise
plain RuntimeErrors). No torch import here: the local runner (ci/localjob) reads the codes too.
"""

from __future__ import annotations

import signal

EXIT_PERMANENT = 1  # a restart cannot fix it: the job fails
EXIT_RETRYABLE = 138  # retried by both ExitCode policies: v1's (128-255) and T9k's (130, 137, 138, 143)


def signal_exit_code(signum: int) -> int:
    return 128 + signum


EXIT_SIGTERM = signal_exit_code(signal.SIGTERM)  # 143: the pod was stopped, so a recreated one resumes


def container_exit_code(returncode: int) -> int:
    """A process's exit code as the kubelet reports it: a negative returncode (killed by that signal)
    becomes 128 + the signal."""
    return signal_exit_code(-returncode) if returncode < 0 else returncode


class Failure(Exception):
    """A failure with a message that says what to fix; it fails the same way on every restart
    unless a subclass says otherwise."""

    exit_code = EXIT_PERMANENT


class LaunchError(Failure):
    """The environment or flags cannot start this process correctly; the message says why."""


class PeersUnreachable(Failure):
    """The ranks did not all meet in time: a pod not yet started or a wrong address. A restart may fix it."""

    exit_code = EXIT_RETRYABLE


class DatasetUnavailable(Failure):
    """The dataset's files are absent and could not be downloaded, or are there but unreadable."""


class IncompatibleCheckpoint(Failure):
    """The newest checkpoint belongs to another run or another trainer version."""


class NonFiniteLoss(Failure):
    """The model diverged: the same settings diverge again."""


class StorageFull(Failure, OSError):
    """A write found its volume full; a restart on the same volume fails the same way."""


class NotWritableError(Failure, OSError):
    """An output directory cannot be created or written to."""
