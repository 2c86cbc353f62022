"""The PyTorchTrainingJob kind (T9k, torchrun mode; shared/reference/t9k.md): its pods' names, the torchrun
command T9k runs in place of theirs, the runner's own rendezvous choices and how --print-env marks them, its
restart and success rules; and a real 2-pod job from a hand-written manifest trained to Succeeded."""

from __future__ import annotations

import copy
import io
import json
import re
import sys
from pathlib import Path

import pytest
import yaml

from ci.localjob.cli import main
from ci.localjob.kinds import job_model
from ci.localjob.kinds.base import UnsupportedPod
from ci.localjob.kinds.pytorchtrainingjob import RDZV_PORT
from ci.localjob.pods import plan_pods
from ci.localjob.supervisor import JobRunner
from tests.support.procs import free_port

FIXTURE = Path(__file__).parent / "fixtures" / "pytorchtrainingjob.yaml"
HOST_ENV = {"PATH": "/usr/bin", "RANK": "7", "MASTER_ADDR": "elsewhere", "PET_NNODES": "9"}
TORCHRUN = Path(sys.executable).parent / "torchrun"
RUN_SUBDIR = Path("volumes/mnist-storage/runs/default/mnist")


def manifest(**spec) -> dict:
    """The fixture (1 + 1 nodes, OnFailure, digits), with these spec fields replaced."""
    job = yaml.safe_load(FIXTURE.read_text())
    job["spec"].update(copy.deepcopy(spec))
    return job


def node_spec(job: dict, position: int = 0) -> dict:
    return job["spec"]["replicaSpecs"][position]


def container(job: dict, position: int = 0) -> dict:
    return node_spec(job, position)["template"]["spec"]["containers"][0]


def test_pods_are_named_by_type_and_index_the_first_first():
    job = manifest()
    worker = copy.deepcopy(node_spec(job))
    job["spec"]["replicaSpecs"] = [{**node_spec(job), "type": "master", "replicas": 1}, {**worker, "type": "worker"}]
    pods = job_model(job).pods()
    assert [(pod.name, pod.role, pod.index) for pod in pods] == [
        ("mnist-master-0", "master", 0),
        ("mnist-worker-0", "worker", 0),
        ("mnist-worker-1", "worker", 1),
    ]
    assert job_model(job).rendezvous_endpoint == f"mnist-master-0:{RDZV_PORT}", "at the first pod"
    assert all(pod.container["command"][1] == "--nnodes=3" for pod in pods), "every pod of every replica spec"


def test_each_pod_runs_torchrun_with_the_flags_of_torchrun_config_and_its_args():
    job = manifest(torchrunConfig={"enabled": True, "maxRestarts": 2, "procPerNode": "gpu", "rdzvBackend": "c10d"})
    job["spec"]["torchrunConfig"]["extraOptions"] = ["--monitor-interval=1", "--redirects=3"]
    (first, second) = job_model(job).pods()
    assert first.container["command"] == [
        "torchrun",
        "--nnodes=2",
        "--nproc-per-node=gpu",
        "--max-restarts=2",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint=mnist-node-0:{RDZV_PORT}",
        "--monitor-interval=1",
        "--redirects=3",
    ]
    assert second.container["command"] == first.container["command"], "the same command in every pod"
    assert first.container["args"][:2] == ["-m", "trainer"]
    assert first.injected_env == [] and second.injected_env == [], "T9k documents no variables in torchrun mode"


def test_unset_torchrun_fields_leave_torchruns_defaults_and_c10d():
    command = job_model(manifest(torchrunConfig={"enabled": True})).pods()[0].container["command"]
    assert command == ["torchrun", "--nnodes=2", "--rdzv-backend=c10d", f"--rdzv-endpoint=mnist-node-0:{RDZV_PORT}"]


def test_a_container_command_is_ignored_with_a_warning():
    job = manifest()
    container(job)["command"] = ["python", "train.py"]
    model = job_model(job)
    assert model.pods()[0].container["command"][0] == "torchrun"
    assert model.warnings == [
        "spec.replicaSpecs[0].template.spec.containers[name=pytorch].command is ignored: in torchrun mode T9k "
        "runs torchrun with the container's args; drop it"
    ]
    assert job_model(manifest()).warnings == []


def test_local_pods_run_the_venvs_torchrun_at_a_local_endpoint_with_the_store_on_the_first_pod(tmp_path):
    first, second = plan_pods(job_model(manifest()), tmp_path, host_env=HOST_ENV)
    assert first.argv[:6] == (
        str(TORCHRUN),
        "--nnodes=2",
        "--nproc-per-node=1",
        "--max-restarts=0",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint=127.0.0.1:{RDZV_PORT}",
    )
    claim = tmp_path / "volumes/mnist-storage"
    assert first.argv[6:8] == ("-m", "trainer") and str(claim / "runs/default/mnist/model") in first.argv
    assert (first.env["PET_RDZV_CONF"], second.env["PET_RDZV_CONF"]) == ("is_host=true", "is_host=false")
    for pod in (first, second):
        assert not {"RANK", "MASTER_ADDR", "PET_NNODES"} & set(pod.env), "neither T9k nor the shell sets these"
        assert pod.cwd == claim and pod.restart_policy == "OnFailure"
        assert pod.notes[0] == f"--rdzv-endpoint=mnist-node-0:{RDZV_PORT} (runner's choice: T9k does not document this)"


def test_port_moves_the_rendezvous(tmp_path):
    model = job_model(manifest(), port=29533)
    assert model.ports() == {29533}
    assert "--rdzv-endpoint=127.0.0.1:29533" in plan_pods(model, tmp_path, host_env=HOST_ENV)[1].argv


@pytest.mark.parametrize(
    "policy, restarted, not_restarted",
    [
        ("OnFailure", [1, 2, 137, 143], []),
        ("Always", [1, 137], []),
        ("ExitCode", [130, 137, 138, 143], [1, 2, 128, 129, 139, 255]),
        ("Never", [], [1, 137, 143]),
    ],
)
def test_restart_rule_per_restart_policy(policy, restarted, not_restarted):
    model = job_model(manifest())
    assert [code for code in restarted + not_restarted if model.restarts(policy, code)] == restarted
    assert model.recreates_pod(policy), "the pods' own policy is Never: T9k recreates every restarted pod"


def test_backoff_limit_defaults_to_three_and_the_deadline_is_the_run_policys():
    assert (job_model(manifest()).backoff_limit, job_model(manifest()).active_deadline_seconds) == (3, 600)
    assert job_model(manifest(runPolicy={})).backoff_limit == 3
    assert job_model(manifest(runPolicy={"backoffLimit": 0})).backoff_limit == 0


def test_the_first_pod_decides_success():
    model = job_model(manifest())
    assert model.succeeded([("node", "Succeeded"), ("node", "Running")]) == "the first pod succeeded"
    assert model.succeeded([("node", "Running"), ("node", "Succeeded")]) is None
    assert model.success_state == "Succeeded"


def test_a_paused_job_is_suspended():
    assert job_model(manifest(runMode={"pause": {"enabled": True}})).suspended == (
        "spec.runMode.pause.enabled is true, so T9k would start no pods; set it to false"
    )
    assert job_model(manifest()).suspended is None


def without_restart_policy() -> dict:
    job = manifest()
    del node_spec(job)["restartPolicy"]
    return job


def two_containers() -> dict:
    job = manifest()
    node_spec(job)["template"]["spec"]["containers"].append({"name": "sidecar", "image": "busybox"})
    return job


@pytest.mark.parametrize(
    "job, error, message",
    [
        (
            manifest(torchrunConfig={"enabled": False}),
            ValueError,
            "spec.torchrunConfig.enabled: the local runner runs T9k's torchrun mode only; set it to true",
        ),
        (
            manifest(elastic={"enabled": True, "minReplicas": 1, "maxReplicas": 2}),
            ValueError,
            "spec.elastic.enabled: an elastic job does not run locally; set it to false",
        ),
        (
            manifest(runMode={"debug": {"enabled": True}}),
            ValueError,
            "spec.runMode.debug.enabled: debug mode does not run locally; set it to false",
        ),
        (
            without_restart_policy(),
            ValueError,
            "spec.replicaSpecs[0].restartPolicy: None; set one of OnFailure, Always, ExitCode, Never (T9k's default "
            "is not documented)",
        ),
        (manifest(replicaSpecs=[]), ValueError, "spec.replicaSpecs: a PyTorchTrainingJob needs at least one"),
        (
            two_containers(),
            UnsupportedPod,
            "mnist-node-0: only one container can run locally, the training container (T9k's is the one named "
            "python, else the first)",
        ),
    ],
)
def test_what_does_not_run_locally_is_named(job, error, message):
    with pytest.raises(error, match=re.escape(message)):
        job_model(job).pods()


@pytest.fixture
def fixture_chart(tmp_path) -> Path:
    """A chart that renders the fixture as it is, so the CLI runs it as it will run the chart's own."""
    chart = tmp_path / "chart"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: t9k-fixture\nversion: 0.1.0\n")
    (chart / "templates" / "job.yaml").write_text(FIXTURE.read_text())
    return chart


def test_print_env_marks_the_runners_choices(fixture_chart, tmp_path, capsys):
    out = io.StringIO()
    assert main(["--print-env", "--chart", str(fixture_chart), "--run-dir", str(tmp_path)], out=out) == 0
    text = out.getvalue()
    for pod, is_host in (("mnist-node-0", "true"), ("mnist-node-1", "false")):
        assert re.search(
            rf"^{pod}:\n  command: {re.escape(str(TORCHRUN))} --nnodes=2 --nproc-per-node=1 --max-restarts=0 "
            rf"--rdzv-backend=c10d --rdzv-endpoint=127\.0\.0\.1:{RDZV_PORT} -m trainer --backend gloo ",
            text,
            re.MULTILINE,
        ), text
        section = text.split(f"{pod}:\n")[1]
        assert section.index("  injected env: (none)\n") < section.index(
            f"  note: --rdzv-endpoint=mnist-node-0:{RDZV_PORT} (runner's choice: T9k does not document this)\n"
        )
        assert f"  note: is_host={is_host} in PET_RDZV_CONF is the runner's: mnist-node-0, which" in section
    assert capsys.readouterr().err == "", "no warning for a manifest without a command"


@pytest.mark.slow
def test_a_two_pod_job_trains_to_succeeded(tmp_path):
    """The fixture through the runner's machinery (job model, planned pods, JobRunner): two torchrun pods
    that meet at the runner's rendezvous and train the real trainer on digits."""
    run_dir = tmp_path / "mnist"
    model = job_model(yaml.safe_load(FIXTURE.read_text()), port=free_port())
    out = io.StringIO()
    result = JobRunner(model, plan_pods(model, run_dir), run_dir, grace_seconds=120, out=out).run()
    output = out.getvalue()
    assert (result.state, result.reason, result.restarts) == ("Succeeded", "the first pod succeeded", 0), output
    assert re.search(r"^\[mnist-node-\d\] World Size: 2\. Rank: 0\.", output, re.MULTILINE), output
    prefixes = {line.split("] ", 1)[0] + "]" for line in output.splitlines()}
    assert prefixes <= {"[localjob]", "[mnist-node-0]", "[mnist-node-1]"}, prefixes
    metrics = json.loads((run_dir / RUN_SUBDIR / "model/metrics.json").read_text())
    assert metrics["world_size"] == 2 and metrics["epochs"] == 2 and metrics["dataset"] == "digits"
    assert (run_dir / RUN_SUBDIR / "model/mnist_cnn.pt").stat().st_size > 0
