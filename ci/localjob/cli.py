"""`python -m ci.localjob`: run the chart's job on this machine, no cluster needed.

    python -m ci.localjob [-f my-values.yaml] [--set training.epochs=2] [--port 29500]
    python -m ci.localjob --set jobKind=<a kind in ci/localjob/kinds/, as the chart renders it>

Renders charts/pytorchjob-mnist with Helm, starts every pod of its job as a local process with the
environment its kind's controller would inject, streams their logs prefixed with the pod name, restarts
failed pods as that controller would, and exits 0 when the job succeeded, 1 when it Failed.
State lives in <run-dir>/<release>/: volumes/<claim> (the "PVC"), pods/<pod>/ (emptyDirs, pid),
logs/<pod>.log.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import socket
import sys
from pathlib import Path

from ci.localjob.kinds import KINDS, job_model
from ci.localjob.kinds.base import UnsupportedPod
from ci.localjob.pods import REPO, LocalPod, plan_pods
from ci.localjob.render import RenderError, find_helm, render_job
from ci.localjob.supervisor import JobRunner

DEFAULT_CHART = REPO / "charts" / "pytorchjob-mnist"
# The chart's dataset directory on each volume, shared by its runs: --fresh keeps it, as a
# cluster user starts over by deleting only the run's directory on the claim.
DATASETS = "datasets"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m ci.localjob",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "-f", "--values", action="append", default=[], metavar="FILE", help="Helm values file (repeatable)"
    )
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="Helm --set (repeatable)")
    parser.add_argument(
        "--set-string", action="append", default=[], metavar="KEY=VALUE", help="Helm --set-string (repeatable)"
    )
    parser.add_argument("--release", default="mnist", help="release name, i.e. the job name (default: mnist)")
    parser.add_argument("-n", "--namespace", default="default", help="namespace to render for (default: default)")
    parser.add_argument("--chart", type=Path, default=DEFAULT_CHART, help="chart directory (default: %(default)s)")
    parser.add_argument(
        "--helm",
        help="Helm binary, a path or a command on PATH "
        "(default: $HELM, then $TOOLS_BIN/helm from `make tools`, then helm on PATH)",
    )
    parser.add_argument(
        "--port",
        type=int,
        help="the port the pods meet on, instead of "
        + "; ".join(f"{kind}: {model.port_help}" for kind, model in sorted(KINDS.items())),
    )
    parser.add_argument("--run-dir", type=Path, default=Path(".run"), help="state directory (default: .run)")
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="start over: delete the release's runs on its volumes, pods and logs first, but keep the "
        "downloaded datasets (default: keep the volume, as the chart keeps its claim)",
    )
    parser.add_argument(
        "--grace-seconds",
        type=float,
        default=60.0,
        help="how long replicas may keep running after the job finished (default: 60)",
    )
    parser.add_argument(
        "--print-env", action="store_true", help="print each pod's command and environment, run nothing"
    )
    return parser.parse_args(argv)


def helm_arguments(args: argparse.Namespace) -> list[str]:
    helm_args = []
    for path in args.values:
        helm_args += ["-f", path]
    for item in args.set:
        helm_args += ["--set", item]
    for item in args.set_string:
        helm_args += ["--set-string", item]
    return helm_args


def busy_ports(ports: set[int]) -> list[int]:
    """The ports (that the replicas will listen on) which something else already holds."""
    busy = []
    for port in sorted(ports):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            # As torch's TCPStore binds: a previous run's connections in TIME_WAIT do not hold the port.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                busy.append(port)
    return busy


def delete_run_state(run_dir: Path) -> None:
    """What --fresh deletes: all of the release's state but the volumes' datasets."""
    volumes = run_dir / "volumes"
    doomed = [path for path in run_dir.glob("*") if path != volumes]
    doomed += [path for path in volumes.glob("*/*") if path.name != DATASETS]
    for path in doomed:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def print_plan(pods: list[LocalPod], out) -> None:
    for pod in pods:
        print(f"{pod.name}:", file=out)
        print(f"  command: {shlex.join(pod.argv)}", file=out)
        print(f"  cwd: {pod.cwd}", file=out)
        print(f"  restartPolicy: {pod.restart_policy}", file=out)
        print(f"  injected env: {injected(pod)}", file=out)
        for note in pod.notes:
            print(f"  note: {note}", file=out)
        for container_path, local in pod.mounts:
            print(f"  mount: {container_path} -> {local}", file=out)


def injected(pod: LocalPod) -> str:
    return " ".join(f"{k}={v}" for k, v in pod.injected_env) or "(none)"


def main(argv: list[str] | None = None, out=sys.stdout) -> int:
    args = parse_args(argv)
    run_dir = (args.run_dir / args.release).resolve()
    try:
        manifest = render_job(find_helm(args.helm), args.chart, args.release, args.namespace, helm_arguments(args))
        job = job_model(manifest, args.port)
        pods = plan_pods(job, run_dir, args.namespace)
    except (RenderError, UnsupportedPod, ValueError) as error:
        print(f"localjob: {error}", file=sys.stderr)
        return 2
    for warning in job.warnings:
        print(f"localjob: warning: {warning}", file=sys.stderr)
    if args.print_env:
        print_plan(pods, out)
        return 0
    if job.suspended:
        print(f"localjob: {job.suspended}", file=sys.stderr)
        return 2
    busy = busy_ports(job.ports())
    if busy:
        print(
            f"localjob: port {', '.join(map(str, busy))} is already in use on this machine; "
            f"stop what holds it or pass --port N{job.port_hint}",
            file=sys.stderr,
        )
        return 2
    if args.fresh:
        delete_run_state(run_dir)
    for stale in ("pods", "logs"):
        shutil.rmtree(run_dir / stale, ignore_errors=True)

    runner = JobRunner(job, pods, run_dir, grace_seconds=args.grace_seconds, out=out)
    runner.say(f"{job.kind} {job.name}: {job.describe()}; state in {run_dir}")
    runner.say(f"pod names resolve to 127.0.0.1; claims are directories in {run_dir / 'volumes'}")
    for pod in pods:
        runner.say(f"{pod.name}: {injected(pod)}")
        for note in pod.notes:
            runner.say(f"{pod.name}: {note}")
    result = runner.run()
    runner.say(
        f"{job.kind} {job.name} {result.state}: {result.reason} "
        f"(restarts: {result.restarts}, exit codes: {result.exit_codes})"
    )
    if result.succeeded and (outputs := _output_dir(pods[0])):
        runner.say(f"the model and metrics.json are in {outputs}")
    return 0 if result.succeeded else 1


def _output_dir(rank0: LocalPod) -> str | None:
    """The trainer's --output-dir (a local path now), unless custom args leave it out."""
    argv = list(rank0.argv)
    return argv[argv.index("--output-dir") + 1] if "--output-dir" in argv[:-1] else None
