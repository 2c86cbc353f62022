"""The kind end-to-end test (ci/e2e-kind.sh) and the static facts it relies on.

The e2e itself runs only with E2E_KIND=1 (`make e2e` runs the script directly) and needs a Docker engine
and kind (GitHub Actions has both). The other tests here run everywhere: they check that the script's
inputs exist and mean what the script assumes.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
import yaml

from tests.support.helm import by_kind
from tests.support.paths import OPERATOR_CHART, REPO, WORKLOAD_CHART
from tests.support.procs import run_stoppable
from tests.support.workflows import WORKFLOWS, lint_problems

E2E_SCRIPT = REPO / "ci" / "e2e-kind.sh"
KIND_CONFIG = REPO / "ci" / "kind" / "cluster.yaml"
PYTORCHJOB_SCRIPT = REPO / "ci" / "kind" / "pytorchjob.sh"
SCRIPT_TEXT = E2E_SCRIPT.read_text()


def script_setting(name: str) -> str:
    """A plain `name=value` assignment of ci/e2e-kind.sh, with $repo, $operator_chart and $workload_chart expanded."""
    match = re.search(rf'^{name}=("?)([^"\n]+)\1$', SCRIPT_TEXT, re.M)
    assert match, f"ci/e2e-kind.sh no longer sets {name}"
    value = match.group(2).replace("$repo", str(REPO))
    for chart_var in ("operator_chart", "workload_chart"):
        if f"${chart_var}" in value:
            value = value.replace(f"${chart_var}", script_setting(chart_var))
    return value


def e2e_skip_reason() -> str | None:
    if os.environ.get("E2E_KIND") != "1":
        return (
            "the kind e2e takes the better part of an hour and runs only when asked: `E2E_KIND=1 make test`, "
            "or `make e2e` alone (the CI workflow's e2e-kind job); it needs Docker and kind"
        )
    if shutil.which("kind") is None or shutil.which("docker") is None:
        return "no container engine / kind here: the kind e2e needs Docker and kind (run `make e2e` where they are)"
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        return "no container engine / kind here: `docker info` fails (no Docker engine running)"
    return None


def e2e_timeout() -> int:
    """Seconds for ci/e2e-kind.sh: above the sum of its own time limits (4 jobs and the SDK's run × JOB_TIMEOUT,
    3 helm tests × 10 min, 5 uninstalls × 7 min, the operator and Trainer v2 installs, cluster, runtime,
    webhook and namespace waits about 35 min), plus 40 min for the image build, pulls, loads and the
    SDK's virtualenv, which have none."""
    job_timeout = int(os.environ.get("JOB_TIMEOUT", "900"))
    return 5 * job_timeout + (30 + 35 + 35 + 40) * 60


# After SIGTERM the script prints its diagnostics and deletes the kind cluster (its EXIT trap).
E2E_CLEANUP_TIMEOUT = 5 * 60


def run_e2e_script(timeout: int) -> tuple[int, str, str]:
    """Run ci/e2e-kind.sh; on timeout (or Ctrl-C), SIGTERM its process group rather than SIGKILL the
    script: a killed script never runs its EXIT trap, and the kind cluster it leaves makes the next
    run's `kind create cluster` fail. The whole group, so that a long helm or kubectl call ends too
    instead of holding off the script's trap."""
    try:
        result = run_stoppable([str(E2E_SCRIPT)], timeout, E2E_CLEANUP_TIMEOUT)
    except subprocess.TimeoutExpired as stopped:
        pytest.fail(
            f"ci/e2e-kind.sh did not finish within {timeout}s (stopped with SIGTERM):\n"
            f"{(stopped.output or '')[-8000:]}\n{(stopped.stderr or '')[-8000:]}"
        )
    return result.returncode, result.stdout, result.stderr


@pytest.mark.slow
def test_kind_e2e():
    reason = e2e_skip_reason()
    if reason:
        pytest.skip(reason)
    returncode, stdout, stderr = run_e2e_script(e2e_timeout())
    assert returncode == 0, f"{stdout[-8000:]}\n{stderr[-8000:]}"
    assert "==> e2e passed" in stdout


@pytest.mark.parametrize("setting", [None, "0", "yes"])
def test_make_test_runs_the_e2e_only_when_asked(monkeypatch, setting):
    """An hour-long e2e that starts by itself wherever Docker and kind answer surprises whoever runs
    `make test`; the skip says how to run it."""
    if setting is None:
        monkeypatch.delenv("E2E_KIND", raising=False)
    else:
        monkeypatch.setenv("E2E_KIND", setting)
    reason = e2e_skip_reason()
    assert reason and "`E2E_KIND=1 make test`" in reason and "`make e2e`" in reason


def test_kind_cluster_has_one_control_plane_and_two_workers():
    config = yaml.safe_load(KIND_CONFIG.read_text())
    assert [node["role"] for node in config["nodes"]] == ["control-plane", "worker", "worker"]


def test_the_values_files_the_e2e_installs_exist():
    for name in ("operator_values", "workload_values", "two_nodes_values", "elastic_values", "trainjob_values"):
        assert os.path.isfile(script_setting(name)), f"{name} = {script_setting(name)} is missing"


def pytorchjob(master_replicas: int) -> dict:
    out = subprocess.run(
        [
            str(PYTORCHJOB_SCRIPT),
            "e2e-check",
            "mnist",
            "localhost/pytorchjob-mnist/trainer:e2e-cpu",
            str(master_replicas),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return yaml.safe_load(out)


def test_webhook_probe_jobs_are_valid_for_the_crd(helm):
    """Both probe jobs pass the CRD schema, so the two-Master job can only be refused by the webhook."""
    from tests.support.crd import load_pytorchjob_crd, validate_custom_object

    crd = load_pytorchjob_crd(helm)
    for replicas in (1, 2):
        job = pytorchjob(replicas)
        validate_custom_object(crd, job)
        assert job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] == replicas
        containers = [
            c for spec in job["spec"]["pytorchReplicaSpecs"].values() for c in spec["template"]["spec"]["containers"]
        ]
        assert {c["name"] for c in containers} == {"pytorch"}, "the webhook wants a container named pytorch"


def test_pytorchjob_script_refuses_wrong_usage():
    result = subprocess.run([str(PYTORCHJOB_SCRIPT), "only-a-name"], capture_output=True, text=True)
    assert result.returncode == 2 and "usage:" in result.stderr


def test_the_webhook_names_the_e2e_expects_are_rendered(helm):
    docs = helm.render(
        OPERATOR_CHART,
        release=script_setting("operator_release"),
        namespace=script_setting("operator_namespace"),
        values_files=(script_setting("operator_values"),),
    )
    [webhook_configuration] = by_kind(docs, "ValidatingWebhookConfiguration")
    assert webhook_configuration["metadata"]["name"] == script_setting("webhook_configuration")
    webhook_names = [w["name"] for w in webhook_configuration["webhooks"]]
    assert f'admission webhook "{webhook_names[0]}" denied the request' in SCRIPT_TEXT
    assert webhook_configuration["webhooks"][0]["failurePolicy"] == "Fail"


@pytest.mark.parametrize(
    "release_setting, values_setting", [("workload_release", "workload_values"), ("elastic_release", "elastic_values")]
)
def test_the_job_is_named_after_the_release(helm, release_setting, values_setting):
    """The script waits on pytorchjob/<release> and checks for the <release>-storage claim."""
    release = script_setting(release_setting)
    docs = helm.render(
        WORKLOAD_CHART,
        release=release,
        namespace=script_setting("workload_namespace"),
        values_files=(script_setting(values_setting),),
    )
    assert [d["metadata"]["name"] for d in by_kind(docs, "PyTorchJob")] == [release]
    claims = by_kind(docs, "PersistentVolumeClaim")
    assert [c["metadata"]["name"] for c in claims] == [f"{release}-storage"]
    assert claims[0]["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"


def test_the_two_node_job_must_spread_its_pods_and_leaves_nothing(helm):
    """The second job has no volume (no single-node affinity, no helm test) and a required
    anti-affinity between its own pods, selected by the label the operator puts on them."""
    release = script_setting("two_nodes_release")
    docs = helm.render(
        WORKLOAD_CHART,
        release=release,
        namespace=script_setting("workload_namespace"),
        values_files=(script_setting("workload_values"), script_setting("two_nodes_values")),
    )
    assert {d["kind"] for d in docs} == {"PyTorchJob", "NetworkPolicy", "ServiceAccount"}, (
        "nothing the uninstall would keep or the test needs"
    )
    for kind in ("NetworkPolicy", "ServiceAccount"):
        assert {d["metadata"]["labels"]["app.kubernetes.io/instance"] for d in by_kind(docs, kind)} == {release}
        assert LEFTOVER_RESOURCE[kind] in leftover_resources(), f"the uninstall check must see a {kind} left behind"
    [job] = by_kind(docs, "PyTorchJob")
    assert job["metadata"]["name"] == release
    for role, spec in job["spec"]["pytorchReplicaSpecs"].items():
        affinity = spec["template"]["spec"]["affinity"]
        assert "podAffinity" not in affinity, role
        [term] = affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert term == {
            "labelSelector": {"matchLabels": {"training.kubeflow.org/job-name": release}},
            "topologyKey": "kubernetes.io/hostname",
        }, role
    assert (
        'uninstall_leaving_only "$two_nodes_release" "$workload_namespace" "training.kubeflow.org/job-name=$two_nodes_release" ""'
        in SCRIPT_TEXT
    )


def test_the_elastic_job_is_searched_for_rank_0_and_keeps_its_claim(helm):
    """The third job: elastic torchrun over 3 pods (WORLD_SIZE 3), whose rank 0 may be in any pod, so
    check_rank0_log reads every pod's log when the job has an elasticPolicy; its claim (named and kept as
    test_the_job_is_named_after_the_release checks) is expected after the uninstall."""
    docs = helm.render(
        WORKLOAD_CHART,
        release=script_setting("elastic_release"),
        namespace=script_setting("workload_namespace"),
        values_files=(script_setting("elastic_values"),),
    )
    [job] = by_kind(docs, "PyTorchJob")
    assert job["spec"]["elasticPolicy"] and job["spec"]["nprocPerNode"] == "1"
    replicas = job["spec"]["pytorchReplicaSpecs"]
    assert (replicas["Master"]["replicas"], replicas["Worker"]["replicas"]) == (1, 2)
    assert 'if [[ -n "$(job_field "$1" \'{.spec.elasticPolicy}\')" ]]; then' in SCRIPT_TEXT
    assert '"persistentvolumeclaim/$elastic_release-storage"' in SCRIPT_TEXT


def test_the_operator_uninstall_leaves_the_crd_the_script_expects(helm):
    """The operator is installed with crds.keep=true, so its uninstall leaves exactly the CRD."""
    install = re.search(r'^helm install "\$operator_release".*?--wait', SCRIPT_TEXT, re.M | re.S).group(0)
    assert "--set crds.keep=true" in install
    docs = helm.render(
        OPERATOR_CHART,
        release=script_setting("operator_release"),
        namespace=script_setting("operator_namespace"),
        values_files=(script_setting("operator_values"),),
        set_values={"crds.keep": True},
    )
    kept = [
        f"{d['kind']}/{d['metadata']['name']}"
        for d in docs
        if d["metadata"].get("annotations", {}).get("helm.sh/resource-policy") == "keep"
    ]
    assert kept == ["CustomResourceDefinition/pytorchjobs.kubeflow.org"]
    assert '"customresourcedefinition.apiextensions.k8s.io/pytorchjobs.kubeflow.org"' in SCRIPT_TEXT


def test_ci_workflow_runs_make_test_and_the_kind_e2e():
    text = (WORKFLOWS / "ci.yaml").read_text()
    problems = lint_problems(text)
    assert not problems, problems
    workflow = yaml.safe_load(text)
    runs = {name: [step.get("run") for step in job["steps"]] for name, job in workflow["jobs"].items()}
    assert "make test" in runs["test"]
    # The e2e step stops the script with SIGTERM (so its traps print the diagnostics and delete the
    # cluster) after its own limits, and before the job's timeout kills it with no cleanup.
    e2e_run = next(run for run in runs["e2e-kind"] if run and run.endswith("make e2e"))
    limit = re.fullmatch(r"timeout --signal=TERM --kill-after=(\d+)m (\d+)m make e2e", e2e_run)
    assert limit, e2e_run
    cleanup, step_minutes = int(limit.group(1)), int(limit.group(2))
    assert step_minutes * 60 >= e2e_timeout()
    assert workflow["jobs"]["e2e-kind"]["timeout-minutes"] >= step_minutes + cleanup + 10, "and ten for the setup steps"
    e2e_job = workflow["jobs"]["e2e-kind"]
    assert set(e2e_job["strategy"]["matrix"]["helm"]) == {"helm3", "helm4"}, "each Helm major against a cluster"
    e2e_env = next(step["env"] for step in e2e_job["steps"] if step.get("run") == e2e_run)
    assert e2e_env["HELM"] == "${{ github.workspace }}/.tools/bin/${{ matrix.helm }}"
    # The runner has Docker and kind: `make test` must not run the e2e a second time there.
    assert workflow["jobs"]["test"].get("env", {}).get("E2E_KIND") != "1"
    kind_steps = [s for s in workflow["jobs"]["e2e-kind"]["steps"] if s.get("uses", "").startswith("helm/kind-action@")]
    assert kind_steps and kind_steps[0]["with"]["install_only"] is True, "the script creates its own cluster"
    assert re.fullmatch(r"v\d+\.\d+\.\d+", kind_steps[0]["with"].get("version", "")), (
        "kind's version pins the node image, i.e. the Kubernetes version under test"
    )


def test_ci_workflow_builds_the_variants_and_platforms_the_e2e_does_not():
    workflow = yaml.safe_load((WORKFLOWS / "ci.yaml").read_text())
    job = workflow["jobs"]["images"]
    built = {(entry["variant"], entry["platform"]) for entry in job["strategy"]["matrix"]["include"]}
    assert {("cuda", "linux/amd64"), ("cpu", "linux/arm64")} <= built
    run = next(step["run"] for step in job["steps"] if step.get("run", "").startswith("make image "))
    # A destination of its own, so build-image.sh adds no --load (a cross-built image would not load).
    assert "IMAGE_BUILD_FLAGS=--output=type=cacheonly" in run
    assert "--output=*" in (REPO / "ci" / "build-image.sh").read_text()
    qemu = [step for step in job["steps"] if step.get("uses", "").startswith("docker/setup-qemu-action@")]
    assert qemu and "linux/amd64" in qemu[0]["if"], "QEMU for the foreign platform"


# What `kubectl get <resource>` in the script's leftovers() finds, per kind the charts render.
LEFTOVER_RESOURCE = {
    "Pod": "all",
    "Service": "all",
    "Deployment": "all",
    "PyTorchJob": "pytorchjobs",
    "TrainJob": "trainjobs",
    "PersistentVolumeClaim": "pvc",
    "ConfigMap": "configmaps",
    "NetworkPolicy": "networkpolicies",
    "Secret": "secrets",
    "ServiceAccount": "serviceaccounts",
    "Role": "roles",
    "RoleBinding": "rolebindings",
    "ClusterRole": "clusterroles",
    "ClusterRoleBinding": "clusterrolebindings",
    "ValidatingWebhookConfiguration": "validatingwebhookconfigurations",
    "CustomResourceDefinition": "customresourcedefinitions",
    "PersistentVolume": "persistentvolumes",
}


def leftover_resources() -> set[str]:
    body = re.search(r"^leftovers\(\) \{\n(.*?)^\}", SCRIPT_TEXT, re.M | re.S).group(1)
    return {r for listing in re.findall(r"kubectl get ([\w.,]+)", body) for r in listing.split(",")}


@pytest.mark.parametrize(
    "chart, release, namespace, values",
    [
        ("training-operator", "operator_release", "operator_namespace", "operator_values"),
        ("pytorchjob-mnist", "workload_release", "workload_namespace", "workload_values"),
        ("pytorchjob-mnist", "elastic_release", "workload_namespace", "elastic_values"),
        ("pytorchjob-mnist", "trainjob_release", "trainjob_namespace", "trainjob_values"),
    ],
)
def test_the_leftover_check_sees_everything_the_charts_install(helm, chart, release, namespace, values):
    """Uninstall is only proven clean if every rendered object is labelled and of a kind the script lists."""
    release_name = script_setting(release)
    docs = helm.render(
        REPO / "charts" / chart,
        release=release_name,
        namespace=script_setting(namespace),
        values_files=(script_setting(values),),
    )
    listed = leftover_resources()
    for doc in docs:
        where = f"{doc['kind']}/{doc['metadata']['name']}"
        assert doc["metadata"].get("labels", {}).get("app.kubernetes.io/instance") == release_name, (
            f"{where} is not labelled"
        )
        assert LEFTOVER_RESOURCE.get(doc["kind"]) in listed, (
            f"{where}: ci/e2e-kind.sh leftovers() does not list its kind"
        )


def test_the_leftover_check_fails_when_any_of_its_queries_does():
    """leftovers() runs in a command substitution, where set -e does not apply: a failed first query
    (cluster-wide) would pass unnoticed unless each query returns on failure."""
    body = re.search(r"^leftovers\(\) \{\n(.*?)^\}", SCRIPT_TEXT, re.M | re.S).group(1)
    queries = re.findall(r"kubectl get (?:[^\n]*\\\n)*[^\n]*", body)
    assert len(queries) == 2
    assert all(query.endswith("|| return 1") for query in queries), queries


def test_the_trainjob_release_is_the_job_the_script_waits_for_and_checks(helm):
    """The script waits on trainjob/<release>, reads the log of container `node` of JobSet's completion
    index 0, and expects the <release>-storage claim (kept) to be all that the uninstall leaves."""
    release, namespace = script_setting("trainjob_release"), script_setting("trainjob_namespace")
    docs = helm.render(
        WORKLOAD_CHART, release=release, namespace=namespace, values_files=(script_setting("trainjob_values"),)
    )
    (job,) = by_kind(docs, "TrainJob")
    assert job["metadata"]["name"] == release and by_kind(docs, "PyTorchJob") == []
    assert job["spec"]["runtimeRef"]["name"] == "torch-distributed", "the runtime the script enables"
    (patch,) = job["spec"]["runtimePatches"]
    (replicated_job,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert [c["name"] for c in replicated_job["template"]["spec"]["template"]["spec"]["containers"]] == ["node"]
    assert "-c node" in SCRIPT_TEXT and "batch.kubernetes.io/job-completion-index=0" in SCRIPT_TEXT
    assert [c["metadata"]["name"] for c in by_kind(docs, "PersistentVolumeClaim")] == [f"{release}-storage"]
    assert by_kind(docs, "Pod"), "a helm test pod for run_helm_test"
    assert (
        "--show-only templates/trainjob.yaml" in SCRIPT_TEXT
        and (WORKLOAD_CHART / "templates" / "trainjob.yaml").is_file()
    )


def test_trainer_v2_comes_from_upstreams_chart_with_the_torch_runtime():
    assert script_setting("trainer_chart") == "oci://ghcr.io/kubeflow/charts/kubeflow-trainer"
    assert script_setting("trainer_chart_version") == "2.3.0"
    assert "--set runtimes.torchDistributed.enabled=true" in SCRIPT_TEXT
    assert "clustertrainingruntime torch-distributed" in SCRIPT_TEXT


def test_the_sdk_run_calls_the_driver_with_the_image_and_namespace():
    """ci/kind/sdk_train.py comes with the local runner's SDK tests; the script installs the SDK it needs."""
    assert re.search(r'ci/kind/sdk_train\.py" --image "\$image" --namespace "\$sdk_namespace"', SCRIPT_TEXT)
    assert re.search(r'pip" install --quiet "kubeflow==\$sdk_version"', SCRIPT_TEXT)
    assert script_setting("sdk_version") == "0.5.0"


def test_the_local_image_falls_back_to_an_archive():
    """`kind load docker-image` fails on some images under Docker's containerd store (kind#3795)."""
    body = re.search(r"^load_image\(\) \{\n(.*?)^\}", SCRIPT_TEXT, re.M | re.S).group(1)
    assert "kind load docker-image" in body and "docker image save" in body and "kind load image-archive" in body
    assert re.search(r'^load_image "\$image"$', SCRIPT_TEXT, re.M)
