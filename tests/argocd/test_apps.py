"""The app of apps under ci/argocd: the root Application follows a release tag of this repository, and
each child Application installs the chart version that release published, rendered here from charts/
(the same files, since a test ties each pin to its Chart.yaml)."""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import tarfile

import pytest
import yaml

from tests.support.helm import by_kind, one
from tests.support.paths import REPO
from tests.support.pytorchjob_mnist import assert_valid_trainjob
from tests.support.version import PROJECT_VERSION

ARGOCD = REPO / "ci" / "argocd"
ROOT_APP = yaml.safe_load((ARGOCD / "root-app.yaml").read_text())
APPS = {p.stem: yaml.safe_load(p.read_text()) for p in sorted((ARGOCD / "apps").glob("*.yaml"))}
# The repository the root app follows, on GitHub: its owner publishes the charts to ghcr.io/<owner>/charts.
OWNER = re.fullmatch(r"https://github\.com/([^/]+)/[^/]+\.git", ROOT_APP["spec"]["source"]["repoURL"]).group(1)


def chart_of(app: dict) -> dict:
    return yaml.safe_load((REPO / "charts" / app["spec"]["source"]["chart"] / "Chart.yaml").read_text())


def test_the_root_app_follows_this_versions_release_tag():
    """A tag `v<pyproject version>` is what the release workflow publishes from (docs/releasing.md)."""
    source = ROOT_APP["spec"]["source"]
    assert source["targetRevision"] == f"v{PROJECT_VERSION}", "a branch would deploy charts no release published"
    assert (REPO / source["path"]) == ARGOCD / "apps"
    assert set(APPS) == {"training-operator", "pytorchjob-mnist"}


@pytest.mark.parametrize("name", APPS)
def test_each_app_pins_the_published_version_of_its_chart(name):
    app = APPS[name]
    assert app["apiVersion"] == "argoproj.io/v1alpha1" and app["kind"] == "Application"
    assert app["metadata"]["namespace"] == "argocd"
    assert "resources-finalizer.argocd.argoproj.io" in app["metadata"]["finalizers"]
    source = app["spec"]["source"]
    # ci/publish-charts.sh pushes to oci://ghcr.io/<owner>/charts; Argo CD names OCI Helm repositories without oci://.
    assert source["repoURL"] == f"ghcr.io/{OWNER}/charts"
    assert "path" not in source, "a chart from the Helm repository, not a directory of git"
    assert chart_of(app)["name"] == source["chart"]
    assert source["targetRevision"] == chart_of(app)["version"], (
        f"{name} pins {source['chart']} {source['targetRevision']}, but charts/{source['chart']}/Chart.yaml is "
        f"{chart_of(app)['version']}: pin the version this release publishes"
    )


@pytest.mark.parametrize(
    "name", [name for name, app in APPS.items() if app["spec"]["source"]["helm"].get("valueFiles")]
)
def test_the_values_files_an_app_names_ship_in_the_chart_package(helm, tmp_path, name):
    """Argo CD reads valueFiles from the chart it pulled: `helm package` must not leave them out (.helmignore)."""
    source = APPS[name]["spec"]["source"]
    helm.run("package", str(REPO / "charts" / source["chart"]), "--destination", str(tmp_path))
    with tarfile.open(tmp_path / f"{source['chart']}-{source['targetRevision']}.tgz") as package:
        packaged = set(package.getnames())
    for values_file in source["helm"]["valueFiles"]:
        assert f"{source['chart']}/{values_file}" in packaged, f"{values_file} is not in the chart package"


@pytest.mark.parametrize("name", APPS)
def test_created_namespaces_enforce_pod_security_restricted(name):
    """CreateNamespace alone makes an unlabelled namespace, where any pod spec is admitted."""
    policy = APPS[name]["spec"]["syncPolicy"]
    assert "CreateNamespace=true" in policy["syncOptions"]
    labels = policy["managedNamespaceMetadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"


def test_the_operator_syncs_before_the_job():
    waves = {name: int(app["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"]) for name, app in APPS.items()}
    assert waves["training-operator"] < waves["pytorchjob-mnist"]


def test_sync_options():
    operator = APPS["training-operator"]["spec"]["syncPolicy"]
    assert {"ServerSideApply=true", "RespectIgnoreDifferences=true"} <= set(operator["syncOptions"])
    job = APPS["pytorchjob-mnist"]["spec"]["syncPolicy"]
    assert "SkipDryRunOnMissingResource=true" in job["syncOptions"]
    assert "ApplyOutOfSyncOnly=true" in job["syncOptions"], "a sync for another object leaves the job alone"
    # Without it a sync would apply the manifest over the fields Kueue writes (ignoreDifferences).
    assert "RespectIgnoreDifferences=true" in job["syncOptions"]
    assert job["retry"]["limit"] > 0 and job["retry"]["backoff"]["factor"] > 1
    assert APPS["pytorchjob-mnist"]["spec"]["source"]["helm"]["skipTests"] is True


def render_application(helm, name: str, **parameters) -> list[dict]:
    """The manifests Argo CD renders for the Application, with some of its Helm parameters changed."""
    app = APPS[name]
    chart = REPO / "charts" / app["spec"]["source"]["chart"]
    helm_source = app["spec"]["source"].get("helm", {})
    app_parameters = {p["name"]: p["value"] for p in helm_source.get("parameters", [])}
    assert set(parameters) <= set(app_parameters), "change only parameters the Application has"
    return helm.render(
        chart,
        values_files=tuple(chart / f for f in helm_source.get("valueFiles", [])),
        set_values=app_parameters | parameters,
        release=helm_source.get("releaseName", name),
        namespace=app["spec"]["destination"]["namespace"],
    )


def test_ignore_differences_match_what_the_operator_chart_renders(helm):
    """The ignored objects exist under those names, and the chart leaves the ignored fields empty."""
    docs = render_application(helm, "training-operator")
    rules = {rule["kind"]: rule for rule in APPS["training-operator"]["spec"]["ignoreDifferences"]}
    assert set(rules) == {"ValidatingWebhookConfiguration", "Secret"}

    webhooks = [
        d
        for d in by_kind(docs, "ValidatingWebhookConfiguration")
        if d["metadata"]["name"] == rules["ValidatingWebhookConfiguration"]["name"]
    ]
    assert len(webhooks) == 1, "the ignored ValidatingWebhookConfiguration is not rendered under that name"
    assert rules["ValidatingWebhookConfiguration"]["jqPathExpressions"] == [".webhooks[]?.clientConfig.caBundle"]
    assert all("caBundle" not in w["clientConfig"] for w in webhooks[0]["webhooks"])

    secrets = [d for d in by_kind(docs, "Secret") if d["metadata"]["name"] == rules["Secret"]["name"]]
    assert len(secrets) == 1, "the ignored webhook Secret is not rendered under that name"
    assert secrets[0]["metadata"]["namespace"] == rules["Secret"]["namespace"]
    assert rules["Secret"]["jsonPointers"] == ["/data"] and "data" not in secrets[0]


def released_image(app: dict, variant: str) -> str:
    """The image the pinned chart runs by default: the one the release that published it pushed."""
    repository = yaml.safe_load((REPO / "charts" / app["spec"]["source"]["chart"] / "values.yaml").read_text())
    return f"{repository['image']['repository']}:{chart_of(app)['appVersion']}-{variant}"


def test_the_workload_application_renders_a_pytorchjob_of_the_released_image(helm):
    jobs = by_kind(render_application(helm, "pytorchjob-mnist"), "PyTorchJob")
    assert len(jobs) == 1
    images = {
        c["image"]
        for spec in jobs[0]["spec"]["pytorchReplicaSpecs"].values()
        for c in spec["template"]["spec"]["containers"]
    }
    assert images == {released_image(APPS["pytorchjob-mnist"], "cpu")}
    assert released_image(APPS["pytorchjob-mnist"], "cpu").startswith(f"ghcr.io/{OWNER}/trainer:")
    assert_never_replaced(jobs[0])
    assert "ttlSecondsAfterFinished" not in jobs[0]["spec"].get("runPolicy", {}), (
        "self-heal would recreate a TTL-deleted job and train forever"
    )


def assert_never_replaced(job: dict) -> None:
    """Replace=true would delete and recreate a job Kueue admitted, as its fields make it differ from
    Git, and RespectIgnoreDifferences would carry them into the new job (a second Kueue runtime patch)."""
    sync_options = job["metadata"]["annotations"]["argocd.argoproj.io/sync-options"].split(",")
    assert sync_options == ["SkipDryRunOnMissingResource=true"]


def test_the_workload_application_deploys_a_trainjob_by_its_jobkind_parameter(helm):
    """Set to TrainJob, the same Application renders one Kubeflow Trainer v2 job instead."""
    docs = render_application(helm, "pytorchjob-mnist", jobKind="TrainJob")
    assert by_kind(docs, "PyTorchJob") == []
    (job,) = by_kind(docs, "TrainJob")
    assert job["spec"]["trainer"]["image"] == released_image(APPS["pytorchjob-mnist"], "cpu")
    assert_never_replaced(job)


# What Kueue v0.19 writes into a job it queues (the chart's kueue.queueName) and admits to a flavor.
KUEUE_PLACEMENT = {
    "nodeSelector": {"cloud.google.com/gke-nodepool": "training"},
    "tolerations": [{"key": "training", "operator": "Exists", "effect": "NoSchedule"}],
}
KUEUE_POD_LABELS = {"kueue.x-k8s.io/podset": "node"}


def kueue_admitted_trainjob(job: dict) -> dict:
    """The live TrainJob: Kueue's webhook appended its runtime patch (manager kueue.x-k8s.io/manager)
    and suspended the job; on admission its controller filled the patch and resumed the job; Trainer's
    webhook stamped each patch's time."""
    live = copy.deepcopy(job)
    for patch in live["spec"]["runtimePatches"]:
        patch["time"] = "2026-11-28T10:00:00Z"
    kueue_patch = {
        "manager": "kueue.x-k8s.io/manager",
        "time": "2026-11-28T10:00:05Z",
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "spec": {
                                    "template": {"metadata": {"labels": KUEUE_POD_LABELS}, "spec": KUEUE_PLACEMENT}
                                }
                            },
                        }
                    ]
                }
            }
        },
    }
    live["spec"]["runtimePatches"].append(kueue_patch)
    live["spec"]["suspend"] = False
    return live


def kueue_admitted_pytorchjob(job: dict) -> dict:
    """The live PyTorchJob: Kueue resumed it and merged the flavor's placement into each replica."""
    live = copy.deepcopy(job)
    live["spec"]["runPolicy"]["suspend"] = False
    for replica in live["spec"]["pytorchReplicaSpecs"].values():
        template = replica["template"]
        template["metadata"]["labels"].update(KUEUE_POD_LABELS)
        template["spec"].setdefault("nodeSelector", {}).update(KUEUE_PLACEMENT["nodeSelector"])
        template["spec"]["tolerations"] = template["spec"].get("tolerations", []) + KUEUE_PLACEMENT["tolerations"]
    return live


def jq(program: str, document: dict) -> object:
    """Run the jq binary (Argo CD runs gojq, the same language)."""
    result = subprocess.run(
        ["jq", "-c", program], input=json.dumps(document), capture_output=True, text=True, check=True
    )
    return json.loads(result.stdout)


def ignore_rule(group: str, kind: str) -> dict:
    (rule,) = [
        r for r in APPS["pytorchjob-mnist"]["spec"]["ignoreDifferences"] if (r["group"], r["kind"]) == (group, kind)
    ]
    return rule


def test_the_ignored_kinds_are_the_charts_jobs(helm):
    """Each rule names the group and kind of a job the chart renders (Argo CD matches them exactly)."""
    rules = {(r["group"], r["kind"]) for r in APPS["pytorchjob-mnist"]["spec"]["ignoreDifferences"]}
    jobs = set()
    for job_kind in ("PyTorchJob", "TrainJob"):
        job = one(render_application(helm, "pytorchjob-mnist", jobKind=job_kind), job_kind)
        jobs.add((job["apiVersion"].split("/")[0], job["kind"]))
    assert rules == jobs
    assert all(
        set(rule) == {"group", "kind", "jqPathExpressions"}
        for rule in APPS["pytorchjob-mnist"]["spec"]["ignoreDifferences"]
    )


@pytest.mark.skipif(shutil.which("jq") is None, reason="needs the jq binary (Debian's jq package) on PATH")
@pytest.mark.parametrize(
    "job_kind, admitted, ignored",
    [
        ("TrainJob", kueue_admitted_trainjob, [["spec", "runtimePatches", 1], ["spec", "suspend"]]),
        (
            "PyTorchJob",
            kueue_admitted_pytorchjob,
            [
                ["spec", "runPolicy", "suspend"],
                ["spec", "pytorchReplicaSpecs", "Master", "template", "spec", "tolerations"],
                ["spec", "pytorchReplicaSpecs", "Worker", "template", "spec", "tolerations"],
            ],
        ),
    ],
)
def test_the_jq_paths_select_exactly_what_kueue_writes(helm, job_kind, admitted, ignored):
    """On a job Kueue admitted, the rules' jq paths select Kueue's runtime patch (not the chart's) and
    suspend; Argo CD deletes them (del(...)) from both sides before diffing."""
    docs = render_application(helm, "pytorchjob-mnist", jobKind=job_kind, **{"kueue.queueName": "team-a"})
    job = one(docs, job_kind)
    live = admitted(job)
    if job_kind == "TrainJob":  # the sample is one Trainer's API takes (the models make `time` a datetime)
        assert_valid_trainjob(jq("del(.spec.runtimePatches[].time)", live), helm)
    expressions = ignore_rule(job["apiVersion"].split("/")[0], job_kind)["jqPathExpressions"]
    selected = [path for expression in expressions for path in jq(f"[path({expression})]", live)]
    assert sorted(selected) == sorted(ignored)
    normalized = live
    for expression in expressions:
        normalized = jq(f"del({expression})", normalized)
    if job_kind == "TrainJob":
        desired = job
        for expression in expressions:
            desired = jq(f"del({expression})", desired)
        assert desired == job, "with a queue the chart renders neither Kueue's patch nor suspend"
        (patch,) = normalized["spec"]["runtimePatches"]
        assert patch["manager"] == job["spec"]["runtimePatches"][0]["manager"], "the chart's patch is still diffed"
    else:
        assert (
            normalized["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["nodeSelector"]
            == (KUEUE_PLACEMENT["nodeSelector"])
        ), "a map: the diff ignores keys the manifest does not have"
