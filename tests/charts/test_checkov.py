"""checkov, a static analyser of Kubernetes manifests, finds nothing unexplained in any rendering of either
chart: each job kind with its defaults, TensorBoard and its NetworkPolicy, a GPU and pinned digests, and
the operator's defaults, high-availability, namespaced and tuned values. checkov cannot see inside a job
(a PyTorchJob, a TrainJob), so the trainer's pods, as the kind's controller will run them, are checked as
Pods too. A check that does not fit by design is skipped by an annotation on the object, with its reason,
and the chart README's Security section lists every check so skipped.

checkov is heavy and pulls in much that the project does not use, so it lives in a virtual environment
of its own: the test runs the one that CHECKOV names, else `checkov` on PATH, and skips without either."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import tomllib
import yaml

from tests.support.paths import OPERATOR_CHART, REPO, WORKLOAD_CHART
from tests.support.pytorchjob_mnist import KINDS, job_of

# The pin of pyproject's checkov group, which make test installs.
[CHECKOV_VERSION] = [
    pin.split("==")[1] for pin in tomllib.loads((REPO / "pyproject.toml").read_text())["dependency-groups"]["checkov"]
]
DIGEST = "sha256:" + "c" * 64
WORKLOAD_CASES = {
    "defaults": {},
    "tensorboard": {
        "tensorboard": {"enabled": True},
        "networkPolicy": {"tensorboardFrom": [{"namespaceSelector": {"matchLabels": {"team": "ml"}}}]},
    },
    "gpu": {"gpu": 1},
    "pinned": {
        "image": {"digest": DIGEST},
        "tensorboard": {"enabled": True, "image": {"digest": DIGEST}, "resources": {"limits": {"cpu": "1"}}},
        "resources": {"limits": {"cpu": "1"}},
    },
}
OPERATOR_CASES = {
    "defaults": (),
    **{path.stem: (path,) for path in sorted((OPERATOR_CHART / "ci").glob("*-values.yaml"))},
}


def checkov_binary() -> str:
    found = os.environ.get("CHECKOV") or shutil.which("checkov")
    if not found:
        pytest.skip(
            f"checkov is not installed: pip install checkov=={CHECKOV_VERSION} into a virtual environment of its own "
            "and set CHECKOV to its bin/checkov"
        )
    version = subprocess.run([found, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    assert version == CHECKOV_VERSION, (
        f"{found} is checkov {version}; the checks and skips here are {CHECKOV_VERSION}'s"
    )
    return found


def trainer_pods_as_pods(docs: list[dict], kind) -> list[dict]:
    job = job_of(docs)
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                **template["metadata"],
                "name": f"{job['metadata']['name']}-{role.lower()}-0",
                "namespace": job["metadata"]["namespace"],
            },
            "spec": template["spec"],
        }
        for role, template in kind.trainer_pods(docs).items()
    ]


def renderings(helm, directory: Path) -> dict[str, str]:
    """Every rendering, written to `directory` as one file each; chart name by file name. Each has a release
    of its own, so no NetworkPolicy selects another rendering's pods."""
    charts, index = {}, 0
    for kind in KINDS:
        for case, values in WORKLOAD_CASES.items():
            values_file = directory / f"values-{kind.name}-{case}.yaml"
            values_file.write_text(yaml.safe_dump(kind.values(values)))
            docs = helm.render(WORKLOAD_CHART, values_files=(values_file,), release=f"mnist{index}", namespace="ml")
            index += 1
            custom = {kind.name, *kind.other_custom_kinds}
            manifests = [doc for doc in docs if doc["kind"] not in custom] + trainer_pods_as_pods(docs, kind)
            name = f"{kind.name}-{case}.yaml"
            (directory / "manifests" / name).write_text(yaml.safe_dump_all(manifests))
            charts[name] = WORKLOAD_CHART.name
    for case, files in OPERATOR_CASES.items():
        docs = helm.render(
            OPERATOR_CHART, values_files=files, release=f"training-operator{index}", namespace="kubeflow"
        )
        index += 1
        name = f"operator-{case}.yaml"
        (directory / "manifests" / name).write_text(yaml.safe_dump_all(docs))
        charts[name] = OPERATOR_CHART.name
    return charts


def readme_skips(chart: Path) -> set[str]:
    """The checks the README's Security section names as skipped."""
    text = (chart / "README.md").read_text()
    section = re.search(r"^(#+) Security\n(.*?)(?=^\1 |\Z)", text, re.M | re.S)
    assert section, f"{chart.name}/README.md has no Security section"
    return set(re.findall(r"\bCKV2?_K8S_\d+\b", section.group(2)))


def test_checkov_finds_nothing_unexplained(helm, tmp_path):
    checkov = checkov_binary()
    (tmp_path / "manifests").mkdir()
    charts = renderings(helm, tmp_path)
    result = subprocess.run(
        [checkov, "-d", str(tmp_path / "manifests"), "--framework", "kubernetes", "-o", "json", "--skip-download"],
        capture_output=True,
        text=True,
        check=False,
    )
    report = json.loads(result.stdout)
    results = report["results"]
    assert not results["parsing_errors"], results["parsing_errors"]
    failed = [f"{c['file_path']}: {c['resource']}: {c['check_id']} {c['check_name']}" for c in results["failed_checks"]]
    assert not failed, "checkov findings without a reason:\n" + "\n".join(failed)
    assert report["summary"]["passed"] > 1000, report["summary"]
    skipped: dict[str, set[str]] = {chart: set() for chart in charts.values()}
    for check in results["skipped_checks"]:
        reason = check["check_result"]["suppress_comment"]
        assert reason and reason != "No comment provided", check
        skipped[charts[Path(check["file_path"]).name]].add(check["check_id"])
    for chart in (WORKLOAD_CHART, OPERATOR_CHART):
        assert readme_skips(chart) == skipped[chart.name], f"{chart.name}/README.md's Security section"
    for kind in KINDS:
        pinned = {
            c["check_id"] for c in results["skipped_checks"] if c["file_path"].endswith(f"{kind.name}-pinned.yaml")
        }
        assert not pinned & {"CKV_K8S_11", "CKV_K8S_15", "CKV_K8S_43"}, "a digest and a CPU limit pass those checks"


def skip_annotations(objects: list[dict]) -> list[str]:
    return [
        value
        for item in objects
        for key, value in (item["metadata"].get("annotations") or {}).items()
        if key.startswith("checkov.io/skip")
    ]


def test_every_skip_names_a_check_the_readme_lists_and_a_reason(helm):
    """Without checkov too. checkov splits an annotation at "=", so a reason may hold none."""
    found = {WORKLOAD_CHART: [], OPERATOR_CHART: skip_annotations(helm.render(OPERATOR_CHART))}
    for kind in KINDS:
        docs = helm.render(WORKLOAD_CHART, set_values=kind.values({"tensorboard.enabled": True}))
        found[WORKLOAD_CHART] += skip_annotations([*docs, *kind.trainer_pods(docs).values()])
    for chart, skips in found.items():
        for skip in skips:
            assert re.fullmatch(r"CKV2?_K8S_\d+=[^=]+", skip), skip
        assert {skip.split("=")[0] for skip in skips} <= readme_skips(chart), chart.name
