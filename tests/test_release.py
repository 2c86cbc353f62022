"""The release: .github/workflows/release.yaml; ci/check-chart-versions.sh run on a real git
history, and ci/publish-charts.sh against a real registry."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support.helm import set_chart_field
from tests.support.paths import REPO, WORKLOAD_CHART
from tests.support.registry import MISSING as REGISTRY_MISSING
from tests.support.registry import serve_registry
from tests.support.version import PROJECT_VERSION
from tests.support.workflows import WORKFLOWS, lint_problems

WORKFLOW = WORKFLOWS / "release.yaml"
CHECK = REPO / "ci" / "check-chart-versions.sh"
PUBLISH = REPO / "ci" / "publish-charts.sh"
CHARTS = ("charts/training-operator", "charts/pytorchjob-mnist")


def test_release_workflow_publishes_the_images_and_charts_of_the_tagged_version(tmp_path):
    text = WORKFLOW.read_text()
    assert not lint_problems(text)
    workflow = yaml.safe_load(text)
    assert workflow[True] == {"push": {"tags": ["v*"]}}  # YAML 1.1 reads the key `on` as true
    check_steps = workflow["jobs"]["check"]["steps"]
    assert check_steps[0]["with"]["fetch-depth"] == 0, "ci/check-chart-versions.sh needs the previous tag"
    assert any(step.get("run") == "bash ci/check-chart-versions.sh" for step in check_steps), "before any push"
    check = next(step for step in check_steps if "pyproject.toml" in step.get("run", ""))
    assert check["env"]["OWNER"] == "${{ github.repository_owner }}"

    def checked(tag: str, owner: str, root=REPO) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["bash", "-e", "-c", check["run"]],
            cwd=root,
            capture_output=True,
            text=True,
            env={**os.environ, "GITHUB_REF_NAME": tag, "OWNER": owner},
        )

    assert checked(f"v{PROJECT_VERSION}", "PyTorchJob-MNIST").returncode == 0, "ghcr.io names are lowercase"
    wrong_tag = checked("v99.0.0", "pytorchjob-mnist")
    assert wrong_tag.returncode == 1 and f"tag v{PROJECT_VERSION}" in wrong_tag.stdout, (
        "the images carry pyproject's version"
    )
    fork = checked(f"v{PROJECT_VERSION}", "someone")
    assert fork.returncode == 1 and "pushes ghcr.io/someone/trainer" in fork.stdout, (
        "the chart must pull what is pushed"
    )
    shutil.copytree(WORKLOAD_CHART, tmp_path / "charts" / "pytorchjob-mnist")
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    set_chart_field(tmp_path / "charts" / "pytorchjob-mnist", "appVersion", '"9.9.9"')
    stale = checked(f"v{PROJECT_VERSION}", "pytorchjob-mnist", root=tmp_path)
    assert stale.returncode == 1, "the chart's default image tag is <appVersion>-<variant>"
    assert "appVersion is 9.9.9" in stale.stdout and f'set appVersion: "{PROJECT_VERSION}"' in stale.stdout

    images = workflow["jobs"]["images"]
    assert images["needs"] == "check" and images["permissions"]["packages"] == "write"
    built = {(entry["variant"], entry["platforms"]) for entry in images["strategy"]["matrix"]["include"]}
    assert built == {("cpu", "linux/amd64,linux/arm64"), ("cuda", "linux/amd64")}
    push = next(step["run"] for step in images["steps"] if "make image" in step.get("run", ""))
    assert 'REGISTRY="ghcr.io/${OWNER,,}"' in push and "IMAGE_BUILD_FLAGS=--push" in push
    charts_job = workflow["jobs"]["charts"]
    assert charts_job["needs"] == "images", "no chart release points at images not yet pushed"
    charts = " ".join(step.get("run", "") for step in charts_job["steps"])
    assert 'bash ci/publish-charts.sh "$helm" "oci://ghcr.io/${OWNER,,}/charts"' in charts


@pytest.fixture
def history(tmp_path):
    """A clone of this repository whose HEAD is tagged v0.1.0, and a function that commits a change
    to a chart (optionally with a new version), tags it and runs ci/check-chart-versions.sh there."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
    git = ["git", "-C", str(clone), "-c", "user.name=test", "-c", "user.email=test@example.com"]
    subprocess.run([*git, "tag", "v0.1.0"], check=True)

    def release(tag: str, changes: dict[str, str | None]) -> subprocess.CompletedProcess:
        for chart, version in changes.items():
            with open(clone / chart / "values.yaml", "a") as values:
                values.write(f"# changed for {tag}\n")
            if version:
                set_chart_field(clone / chart, "version", version)
        subprocess.run([*git, "commit", "--quiet", "--allow-empty", "-am", tag], check=True)
        subprocess.run([*git, "tag", tag], check=True)
        return subprocess.run(["bash", str(CHECK)], cwd=clone, capture_output=True, text=True)

    return clone, release


def test_the_first_release_and_charts_changed_with_a_new_version_pass(history):
    clone, release = history
    first = subprocess.run(["bash", str(CHECK), "v0.1.0"], cwd=clone, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    bumped = release("v0.2.0", {"charts/pytorchjob-mnist": "0.2.0"})
    assert bumped.returncode == 0, bumped.stderr
    assert release("v0.3.0", {}).returncode == 0, "nothing changed"


def test_a_changed_chart_that_keeps_its_published_version_stops_the_release(history):
    _, release = history
    result = release("v0.2.0", {"charts/training-operator": None})
    assert result.returncode == 1
    assert "charts/training-operator changed since v0.1.0 but keeps version" in result.stderr
    assert "bump version in charts/training-operator/Chart.yaml" in result.stderr


@pytest.mark.skipif(REGISTRY_MISSING is not None, reason=str(REGISTRY_MISSING))
def test_publishing_pushes_each_chart_version_the_registry_lacks(helm, tmp_path):
    """Asking the registry, not git, also publishes what a failed release left unpushed."""
    checkout = tmp_path / "checkout"
    for chart in CHARTS:
        shutil.copytree(REPO / chart, checkout / chart)
    (tmp_path / "registry").mkdir()

    def publish(destination: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["bash", str(PUBLISH), helm.path, destination, "--plain-http"],
            cwd=checkout,
            capture_output=True,
            text=True,
            timeout=120,
        )

    def published(destination: str, name: str, version: str) -> bool:
        return (
            helm.run(
                "show", "chart", f"{destination}/{name}", "--version", version, "--plain-http", check=False
            ).returncode
            == 0
        )

    with serve_registry(tmp_path / "registry") as host:
        destination = f"oci://{host}/charts"
        versions = {
            Path(chart).name: yaml.safe_load((REPO / chart / "Chart.yaml").read_text())["version"] for chart in CHARTS
        }
        first = publish(destination)
        assert first.returncode == 0, first.stderr
        assert all(published(destination, name, version) for name, version in versions.items())

        again = publish(destination)
        assert again.returncode == 0, again.stderr
        assert again.stdout.splitlines() == [
            f"{name} {version} is published already" for name, version in versions.items()
        ]

        set_chart_field(checkout / "charts" / "pytorchjob-mnist", "version", "99.0.0")
        bumped = publish(destination)
        assert bumped.returncode == 0, bumped.stderr
        assert (
            bumped.stdout.splitlines()[0] == f"training-operator {versions['training-operator']} is published already"
        )
        assert published(destination, "pytorchjob-mnist", "99.0.0")
