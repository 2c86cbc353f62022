"""Bad input fails fast with the flag and the fix; the CLI keeps the seed script's flags."""

import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from tests.support.gloo import ONE_RANK
from tests.support.idx import write_idx_dataset
from tests.support.procs import (
    LONG_RUN,
    children,
    free_port,
    has_trained,
    run_trainer,
    start_pods,
    trainer_env,
    wait_all,
    wait_until,
)
from trainer import data as datasets
from trainer.cli import build_parser, check_outputs_writable, parse_args, shared_settings
from trainer.distributed import STORE_CONNECT_ATTEMPT_SECONDS
from trainer.failures import EXIT_RETRYABLE, LaunchError, PeersUnreachable, StorageFull
from trainer.model import Net
from trainer.runtime import native_bf16

QUICK = ["--dataset", "synthetic", "--limit-train", "256", "--limit-test", "100", "--threads", "1"]


def test_seed_script_flags_and_defaults():
    args = parse_args([])
    assert (
        args.batch_size,
        args.test_batch_size,
        args.epochs,
        args.lr,
        args.momentum,
        args.seed,
        args.log_interval,
        args.save_model,
        args.log_dir,
        args.no_cuda,
    ) == (64, 1000, 1, 0.01, 0.5, 1, 10, False, "logs", False)
    args = build_parser().parse_args(["--epochs=3", "--dir", "tb", "--backend", "gloo", "--save-model", "--no-cuda"])
    assert (args.epochs, args.log_dir, args.backend, args.save_model, args.no_cuda) == (3, "tb", "gloo", True, True)
    assert {build_parser().parse_args(["--backend", b]).backend for b in ("gloo", "nccl", "mpi")} == {
        "gloo",
        "nccl",
        "mpi",
    }


def test_negative_seeds_stay_valid_as_in_the_seed_script():
    assert build_parser().parse_args(["--seed", "-1"]).seed == -1


@pytest.mark.parametrize(
    "flag,named",
    [("--output-dir", "--output-dir"), ("--checkpoint-dir", "--checkpoint-dir"), ("--dir", "--dir/--log-dir")],
)
def test_unwritable_directories_fail_before_training(tmp_path, flag, named):
    """The trainer's exit code and message: tests/trainer/test_cli_bad_input.py."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(LaunchError, match=re.escape(f"{named} {blocker / 'sub'} is not writable")):
        check_outputs_writable(parse_args([flag, str(blocker / "sub")]), ONE_RANK)


def test_only_rank_0_which_writes_them_needs_writable_directories(tmp_path):
    """A worker without the shared volume must not stop and leave rank 0 waiting in the rendezvous."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    args = parse_args(["--checkpoint-dir", str(blocker / "sub"), "--output-dir", str(blocker / "out")])
    check_outputs_writable(args, replace(ONE_RANK, rank=1))


def test_ranks_agree_on_precision_as_given_not_as_resolved():
    """auto resolves by each node's GPU (bf16 on Ampere, fp32 on a T4): same flags, mixed nodes, one job."""
    settings = shared_settings(parse_args(["--dir", ""]))
    assert settings["--precision"] == "auto" and settings["--batch-size"] == 64
    assert "--threads" not in settings and "--run-id" not in settings, "these may differ per rank"


def test_save_model_into_an_unwritable_current_directory_fails_before_training(tmp_path, monkeypatch):
    """Without --output-dir the seed's --save-model writes to the working directory. sysfs takes
    no new files, even from root (who may write into any mode-0555 directory)."""
    monkeypatch.chdir("/sys")
    with pytest.raises(LaunchError) as refused:
        check_outputs_writable(parse_args(["--save-model", "--dir", ""]), ONE_RANK)
    assert "--save-model writes mnist_cnn.pt to the current directory, but /sys is not writable (" in str(refused.value)
    assert str(refused.value).endswith("). Pass --output-dir with a writable directory.")
    check_outputs_writable(parse_args(["--save-model", "--dir", "", "--output-dir", str(tmp_path / "out")]), ONE_RANK)


@pytest.mark.slow
def test_resumed_runs_keep_their_dataset_whichever_downloads_work(tmp_path):
    """End to end: a run that fell back to digits resumes on digits once FashionMNIST's files are there."""
    common = [
        "--dataset",
        "fashion-mnist",
        "--fallback-dataset",
        "digits",
        "--limit-train",
        "256",
        "--limit-test",
        "100",
        "--threads",
        "1",
        "--dir",
        "",
        "--checkpoint-dir",
        "ckpt",
        "--checkpoint-every",
        "2",
    ]
    first = run_trainer([*common, "--data-dir", "empty", "--epochs", "1"], cwd=tmp_path)
    assert first.returncode == 0 and "Training on digits instead" in first.stdout, first.stderr
    write_idx_dataset(
        tmp_path / "data", datasets.load("synthetic", tmp_path, download=False).limited(256, 100), "fashion-mnist"
    )
    again = run_trainer([*common, "--data-dir", "data", "--epochs", "2"], cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "The run being resumed trained on digits (--fallback-dataset), so it goes on with it." in again.stdout
    assert "Dataset: digits" in again.stdout


def test_diverging_loss_stops_the_job_with_a_message(tmp_path):
    result = run_trainer(
        [*QUICK, "--lr", "1e12", "--momentum", "0.9", "--log-interval", "1", "--dir", "", "--output-dir", "out"],
        cwd=tmp_path,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "the model diverged. Lower --lr" in result.stderr
    assert not (tmp_path / "out" / "mnist_cnn.pt").exists()


def test_divergence_in_the_last_step_before_evaluation_stops_the_job_with_a_message(tmp_path):
    result = run_trainer(
        [*QUICK, "--limit-train", "64", "--lr", "1e30", "--dir", "", "--output-dir", "out"], cwd=tmp_path
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "error: test loss became nan after epoch 1; the model diverged. Lower --lr" in result.stderr
    assert "Traceback" not in result.stderr


def test_freed_memory_is_retained_only_once_the_data_is_loaded(tmp_path, monkeypatch):
    """From retain_freed_memory on, freed memory stays with the process: the loading's temporary
    copies must be gone by then (measured on synthetic data: 1.41 GB resident at the end against 0.89)."""
    from trainer import cli, loop

    calls = []
    monkeypatch.setattr(loop, "configure_device", lambda device: calls.append("configure_device"))
    load = datasets.load
    monkeypatch.setattr(datasets, "load", lambda *args, **kwargs: calls.append("load") or load(*args, **kwargs))
    threads = torch.get_num_threads()
    try:
        cli.run(parse_args([*QUICK, "--dir", "", "--output-dir", str(tmp_path)]))
    finally:
        torch.set_num_threads(threads)
    assert calls == ["load", "configure_device"]


def test_the_saved_model_takes_raw_pixels_as_the_seeds_did(tmp_path):
    """Users' seed-era code feeds ToTensor() pixels in [0, 1]; the trainer normalizes them, so the
    saved model must carry that normalization (the reported accuracy, on raw pixels)."""
    result = run_trainer(
        ["--dataset", "digits", "--epochs", "2", "--threads", "1", "--dir", "", "--output-dir", "out"], cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    digits = datasets.load("digits", tmp_path, download=False)
    pixels = digits.test_images * digits.pixel_std + digits.pixel_mean
    assert 0 <= pixels.min() and pixels.max() <= 1
    net = Net()
    net.load_state_dict(torch.load(tmp_path / "out" / "mnist_cnn.pt", weights_only=True))
    with torch.no_grad():
        correct = (net(pixels).argmax(dim=1) == digits.test_labels).sum().item()
    reported = json.loads((tmp_path / "out" / "metrics.json").read_text())["accuracy"]
    assert correct == round(reported * len(digits.test_labels))


def test_seed_style_save_model_writes_the_model_to_the_current_directory(tmp_path):
    """`mnist.py --save-model`: mnist_cnn.pt in the working directory, events under --dir logs."""
    result = run_trainer([*QUICK, "--save-model"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    Net().load_state_dict(torch.load(tmp_path / "mnist_cnn.pt", weights_only=True))
    assert not (tmp_path / "metrics.json").exists(), "metrics.json belongs to --output-dir"
    assert list((tmp_path / "logs").rglob("events.out.tfevents.*"))


def test_run_id_is_recorded_and_killed_writes_are_cleared(tmp_path):
    # Left by an attempt killed while it wrote its outputs; the writer of the next clears them.
    killed_writes = [tmp_path / "out" / ".mnist_cnn.pt.k2j3h4.tmp", tmp_path / "out" / ".metrics.json.x7.tmp"]
    for path in killed_writes:
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"half a file")
    result = run_trainer([*QUICK, "--dir", "", "--output-dir", "out", "--run-id", "abc123"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "out" / "metrics.json").read_text())["run_id"] == "abc123"
    assert not any(path.exists() for path in killed_writes)


def test_missing_dataset_names_the_files(tmp_path):
    result = run_trainer(["--dataset", "mnist", "--data-dir", "d", "--dir", ""], cwd=tmp_path)
    assert result.returncode == 1
    assert f"files not found in {tmp_path / 'd' / 'MNIST' / 'raw'}" in result.stderr
    assert "train-images-idx3-ubyte" in result.stderr


def test_a_launch_a_restart_cannot_fix_exits_1(tmp_path):
    """Under restartPolicy ExitCode, 1 fails the job; 128 would recreate the pod forever."""
    result = run_trainer([*QUICK, "--dir", ""], cwd=tmp_path, PET_NNODES="2", PET_NPROC_PER_NODE="1")
    assert result.returncode == 1, result.stderr
    assert "PET_NNODES=2 makes this pod one of several, but WORLD_SIZE and RANK are not set" in result.stderr
    assert "Add a Master, or start the trainer with torchrun" in result.stderr


@pytest.fixture
def tiny_volume(tmp_path):
    """A real 1 MiB filesystem, too small for one checkpoint (about 3.5 MB)."""
    volume = tmp_path / "volume"
    volume.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(volume)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"mounting a tmpfs needs root with CAP_SYS_ADMIN: {mounted.stderr.strip()}")
    yield volume
    subprocess.run(["umount", str(volume)], check=True)


@pytest.fixture
def full_volume(tiny_volume):
    """tiny_volume with no byte left: even the small TensorBoard event files do not fit."""
    with open(tiny_volume / "filler", "wb") as filler, pytest.raises(OSError, match="No space left"):
        while True:
            filler.write(b"\0" * 65536)
            filler.flush()
    return tiny_volume


def test_a_full_checkpoint_volume_fails_the_job_for_good(tmp_path, tiny_volume):
    """Every restart would retrain to the same checkpoint and fail there again: exit 1, not 138."""
    result = run_trainer([*QUICK, "--dir", "", "--checkpoint-dir", str(tiny_volume)], cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: no space left on the volume of {tiny_volume} to write checkpoint-000000004.pt (No space left on "
        "device). Free space there or give the volume more, then restart the job."
    ), "the epoch end's, step 4"
    assert not list(tiny_volume.iterdir()), "the partial write is removed"


def test_a_full_checkpoint_volume_stops_every_rank_alike(tmp_path, tiny_volume):
    codes = wait_all(
        start_pods(
            [*QUICK, "--dir", "", "--checkpoint-dir", str(tiny_volume)], tmp_path, world_size=2, port=free_port()
        )
    )
    logs = [(tmp_path / f"rank{rank}.log").read_text() for rank in (0, 1)]
    assert codes == [1, 1], logs
    assert f"error: rank 0 could not write: no space left on the volume of {tiny_volume}" in logs[1], logs[1]


def test_events_that_find_the_volume_full_mid_epoch_stop_every_rank_at_the_next_checkpoint(tmp_path, full_volume):
    """Events reach the file in 8 KB blocks: 256 scalars in the epoch's 128 steps (--log-interval 1) fill
    one before its end, and only the epoch-end checkpoint is an agreement of every rank."""
    events = full_volume / "tensorboard"
    run = [
        *QUICK,
        "--limit-train",
        "4096",
        "--batch-size",
        "16",
        "--log-interval",
        "1",
        "--dir",
        str(events),
        "--checkpoint-dir",
        str(tmp_path / "checkpoints"),
        "--checkpoint-every",
        "0",
    ]
    codes = wait_all(start_pods(run, tmp_path, world_size=2, port=free_port()))
    logs = [(tmp_path / f"rank{rank}.log").read_text() for rank in (0, 1)]
    assert codes == [1, 1], logs
    full = f"no space left on the volume of {events} to write TensorBoard events (No space left on device)"
    assert f"error: rank 0 could not write: {full}" in logs[1], logs[1]
    assert "epoch=1 accuracy=" in logs[0], "rank 0 trained on to the epoch's end"


def test_a_full_volume_under_the_tensorboard_events_fails_the_job_for_good(tmp_path, full_volume):
    """The chart puts the events beside the checkpoints; they are flushed before each checkpoint."""
    events = full_volume / "tensorboard"
    result = run_trainer(
        [*QUICK, "--dir", str(events), "--checkpoint-dir", str(full_volume / "checkpoints")], cwd=tmp_path
    )
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: no space left on the volume of {events} to write TensorBoard events (No space left on device). "
        "Free space there or give the volume more, then restart the job."
    )


def test_a_master_whose_last_events_find_the_volume_full_stops_every_rank_alike(tmp_path, full_volume):
    """Without checkpoints the events reach the volume only as the run ends, after training."""
    events = full_volume / "tensorboard"
    codes = wait_all(start_pods([*QUICK, "--dir", str(events)], tmp_path, world_size=2, port=free_port()))
    logs = [(tmp_path / f"rank{rank}.log").read_text() for rank in (0, 1)]
    assert codes == [1, 1], logs
    full = f"no space left on the volume of {events} to write TensorBoard events (No space left on device)"
    assert f"error: {full}" in logs[0], logs[0]
    assert f"error: rank 0 could not write its outputs: {full}" in logs[1], logs[1]


def test_a_failed_run_reports_its_own_failure_and_still_shuts_down(monkeypatch):
    """Closing the events after a failure may fail too (the same full volume): that must neither
    replace the failure on its way out (its exit code) nor skip destroying the process group."""
    from trainer import cli

    class ClosingFails(cli.Reporter):
        def close(self):
            raise StorageFull("the volume is full as well")

    shut = []
    monkeypatch.setattr(cli, "init", lambda *args: ONE_RANK)
    monkeypatch.setattr(cli, "Reporter", ClosingFails)
    monkeypatch.setattr(cli, "shutdown", shut.append)
    monkeypatch.setattr(cli, "_train", lambda *args: (_ for _ in ()).throw(PeersUnreachable("a peer is gone")))
    with pytest.raises(PeersUnreachable, match="a peer is gone"):
        cli.run(parse_args(["--dir", ""]))
    assert shut == [ONE_RANK]


def test_an_unreachable_master_is_named_in_one_line_and_retried(tmp_path):
    """No Master listens (a wrong MASTER_ADDR/PORT, or its pod not started): exit 138, which
    restartPolicy ExitCode retries, with the address in the last line rather than a C++ traceback."""
    port = free_port()
    result = run_trainer(
        [*QUICK, "--dir", "", "--startup-timeout", "10", "--pg-timeout", "2"],
        cwd=tmp_path,
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        WORLD_SIZE="2",
        RANK="1",
    )
    assert result.returncode == EXIT_RETRYABLE, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(
        f"error: rank 1 of 2 could not meet the others at MASTER_ADDR=127.0.0.1 MASTER_PORT={port} (waiting up "
        "to 10 s, the longer of --startup-timeout and --pg-timeout; gave up after "
    ), last
    assert "Traceback" not in result.stderr
    # A TCPStore client alone checks its timeout only between tries that may each take that long.
    waited = int(re.search(r"gave up after (\d+) s", last).group(1))
    assert 10 <= waited <= 10 + STORE_CONNECT_ATTEMPT_SECONDS, last


def test_a_fallback_is_accepted_beside_a_dataset_that_never_needs_it():
    # `make run` (ci/localjob/run-values.yaml) passes --fallback-dataset digits whatever dataset a user's values choose.
    for dataset in ("digits", "synthetic"):
        args = parse_args(["--dataset", dataset, "--fallback-dataset", "digits", "--dir", ""])
        assert (args.dataset, args.fallback_dataset) == (dataset, ("digits",))


def test_fallback_datasets_are_a_comma_separated_chain_of_known_names(capsys):
    assert parse_args(["--fallback-dataset", "mnist,digits"]).fallback_dataset == ("mnist", "digits")
    assert parse_args(["--fallback-dataset", ""]).fallback_dataset == (), "an empty chain is no fallback"
    with pytest.raises(SystemExit):
        parse_args(["--fallback-dataset", "mnist,cifar10"])
    assert "argument --fallback-dataset: 'cifar10': not a dataset; give a comma-separated list of" in (
        capsys.readouterr().err
    )


def test_fallback_dataset_is_announced_first(tmp_path):
    result = run_trainer(
        [
            "--data-dir",
            "d",
            "--fallback-dataset",
            "synthetic",
            "--limit-train",
            "128",
            "--limit-test",
            "64",
            "--dir",
            "",
        ],
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    announce = next(i for i, line in enumerate(lines) if "Training on synthetic instead" in line)
    assert announce < next(i for i, line in enumerate(lines) if line.startswith("Train Epoch"))
    assert "fashion-mnist: files not found" in result.stdout


@pytest.mark.slow
def test_compiled_model_trains_and_saves_plain_keys(tmp_path):
    """--compile (Inductor's C++ backend on CPU) trains, and the saved keys have no _orig_mod prefix."""
    result = run_trainer([*QUICK, "--compile", "--dir", "", "--output-dir", "out"], cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    keys = torch.load(tmp_path / "out" / "mnist_cnn.pt", weights_only=True)
    assert list(keys)[0] == "conv1.weight"


def test_compile_without_a_compiler_stops_before_training(tmp_path):
    result = run_trainer([*QUICK, "--compile", "--dir", ""], cwd=tmp_path, CXX=str(tmp_path / "no-such-g++"))
    assert result.returncode == 1, result.stderr[-3000:]
    assert "--compile needs a C++ compiler for Inductor (g++, or set CXX), and none is on PATH" in result.stderr
    assert "Train Epoch" not in result.stdout


def test_bf16_without_bf16_hardware_stops_before_training(tmp_path):
    # Whatever this machine has, the trainer is told its CPU has no bf16 hardware (as AVX2 CPUs have none).
    no_bf16 = (
        "import sys, trainer.cli as cli, trainer.runtime as runtime; runtime.native_bf16 = lambda device: False; "
        "sys.exit(cli.main(sys.argv[1:]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", no_bf16, *QUICK, "--precision", "bf16", "--dir", ""],
        cwd=tmp_path,
        env=trainer_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1, result.stderr[-3000:]
    assert "--precision bf16 needs bf16 hardware, which this node's CPU lacks" in result.stderr
    assert "Use --precision auto or fp32" in result.stderr
    assert "Train Epoch" not in result.stdout


@pytest.mark.slow
@pytest.mark.skipif(not native_bf16(torch.device("cpu")), reason="--precision bf16 needs an x86 CPU with AVX512_BF16")
def test_bf16_trains_in_bf16_and_saves_fp32_weights_while_auto_stays_fp32_on_cpu(tmp_path):
    weights = {}
    for precision, reported in (("bf16", "bf16"), ("fp32", "fp32"), ("auto", "fp32")):
        result = run_trainer([*QUICK, "--precision", precision, "--dir", "", "--output-dir", precision], cwd=tmp_path)
        assert result.returncode == 0, result.stderr[-3000:]
        assert f"Precision: {reported}" in result.stdout
        assert json.loads((tmp_path / precision / "metrics.json").read_text())["precision"] == reported
        weights[precision] = torch.load(tmp_path / precision / "mnist_cnn.pt", weights_only=True)
    assert {w.dtype for w in weights["bf16"].values()} == {torch.float32}  # master weights stay fp32
    assert not torch.equal(weights["bf16"]["conv2.weight"], weights["fp32"]["conv2.weight"])  # bf16 math ran
    assert all(torch.equal(weights["auto"][key], weights["fp32"][key]) for key in weights["fp32"])


@pytest.mark.slow
def test_restart_resumes_only_a_run_with_the_same_settings(tmp_path):
    first = run_trainer([*QUICK, "--dir", "", "--checkpoint-dir", "ckpt"], cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    again = run_trainer([*QUICK, "--dir", "", "--checkpoint-dir", "ckpt"], cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "That run has finished its 1 epoch (accuracy 0." in again.stdout
    # Evaluated again, in the lines Katib reads, and only those say accuracy=.
    assert again.stdout.count("accuracy=") == 1 and re.search(
        r"^epoch=1 accuracy=0\.\d{4} ", again.stdout, re.MULTILINE
    )
    assert "nothing is left to train; a run with more --epochs on this --checkpoint-dir trains on" in again.stdout
    assert "Train Epoch" not in again.stdout

    other_lr = run_trainer([*QUICK, "--dir", "", "--checkpoint-dir", "ckpt", "--lr", "0.02"], cwd=tmp_path)
    assert other_lr.returncode == 1
    assert "with other settings: lr 0.01 (now 0.02)" in other_lr.stderr
    assert "point --checkpoint-dir at another directory or delete the checkpoints there" in other_lr.stderr

    killed_save = tmp_path / "ckpt" / ".checkpoint-000000099.pt.abc.tmp"
    killed_save.write_bytes(b"half a checkpoint")
    longer = run_trainer([*QUICK, "--dir", "", "--checkpoint-dir", "ckpt", "--epochs", "2"], cwd=tmp_path)
    assert longer.returncode == 0, longer.stderr
    assert re.search(r"Resumed from ckpt/checkpoint-\d+\.pt \(step \d+, the end of epoch 1\)", longer.stdout), (
        longer.stdout
    )
    assert "Train Epoch: 2 " in longer.stdout
    assert not killed_save.exists()


@functools.cache
def _pid_namespaces_work() -> bool:
    return (
        shutil.which("unshare") is not None
        and subprocess.run(
            ["unshare", "--user", "--map-root-user", "--pid", "--fork", "true"], capture_output=True
        ).returncode
        == 0
    )


def _listening(port: int) -> bool:
    """Whether a socket of this network namespace listens on `port` (state 0A in /proc/net/tcp*)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for entry in Path(table).read_text().splitlines()[1:]:
            fields = entry.split()
            local_address, state = fields[1], fields[3]
            if state == "0A" and int(local_address.rsplit(":", 1)[1], 16) == port:
                return True
    return False


@pytest.mark.slow
@pytest.mark.parametrize("as_pid_1", [False, True], ids=["child", "pid-1"])
@pytest.mark.parametrize("stopped_in", ["training", "rendezvous"])
def test_sigterm_stops_the_trainer_with_143(tmp_path, as_pid_1, stopped_in):
    """The kubelet stops a pod with SIGTERM, sent from outside the container's PID namespace. As PID 1
    (the chart's command without torchrun) a process without a handler never sees it, and a Python
    handler alone waits while the main thread is in C++: here a Master waiting for a Worker that never
    comes, for up to --startup-timeout."""
    if as_pid_1 and not _pid_namespaces_work():
        pytest.skip("unshare cannot create a PID namespace here")
    prefix = ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--kill-child"] if as_pid_1 else []
    env, port = {}, free_port()
    if stopped_in == "rendezvous":
        env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": "2", "RANK": "0"}
    log = tmp_path / "trainer.log"
    with open(log, "w") as out:
        started = subprocess.Popen(
            [*prefix, sys.executable, "-m", "trainer", *LONG_RUN],
            cwd=tmp_path,
            env=trainer_env(PYTHONUNBUFFERED="1", **env),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(lambda: has_trained(log) if stopped_in == "training" else _listening(port), started, log)
        trainer_pid = started.pid
        if as_pid_1:  # unshare's child, PID 1 in its namespace
            (trainer_pid,) = children(started.pid)
            (ns_pids,) = [
                line
                for line in Path(f"/proc/{trainer_pid}/status").read_text().splitlines()
                if line.startswith("NSpid:")
            ]
            assert ns_pids.split()[-1] == "1", ns_pids
        os.kill(trainer_pid, signal.SIGTERM)
        assert started.wait(timeout=60) == 128 + signal.SIGTERM, log.read_text()
    finally:
        started.kill()
    assert "Stopped by SIGTERM" in log.read_text()
