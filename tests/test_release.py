"""The release: .github/workflows/release.yaml and ci/release-charts.sh, which picks the charts a
tag publishes, run on a real git history."""
from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
import yaml
from tests.support.helm import REPO
from tests.support.workflows import WORKFLOWS, lint_problems

WORKFLOW = WORKFLOWS / "release.yaml"
SCRIPT = REPO / "ci" / "release-charts.sh"
CHARTS = ("charts/training-operator", "charts/pytorchjob-mnist")


def test_release_workflow_publishes_the_images_and_charts_of_the_tagged_version(tmp_path):
    text = WORKFLOW.read_text()
    assert not lint_problems(text)
    workflow = yaml.safe_load(text)
    assert workflow[True] == {"push": {"tags": ["v*"]}}  # YAML 1.1 reads the key `on` as true
    check_steps = workflow["jobs"]["check"]["steps"]
    assert check_steps[0]["with"]["fetch-depth"] == 0, "ci/release-charts.sh needs the previous tag"
    assert any(step.get("run") == "bash ci/release-charts.sh" for step in check_steps), "before any image is pushed"
    check = next(step for step in check_steps if "pyproject.toml" in step.get("run", ""))
    assert check["env"]["OWNER"] == "${{ github.repository_owner }}"

    def checked(tag: str, owner: str, root=REPO) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-e", "-c", check["run"]], cwd=root, capture_output=True, text=True,
                              env={**os.environ, "GITHUB_REF_NAME": tag, "OWNER": owner})

    version = re.search(r'^version = "(.+)"$', (REPO / "pyproject.toml").read_text(), re.M).group(1)
    assert checked(f"v{version}", "PyTorchJob-MNIST").returncode == 0, "ghcr.io names are lowercase"
    wrong_tag = checked("v99.0.0", "pytorchjob-mnist")
    assert wrong_tag.returncode == 1 and f"tag v{version}" in wrong_tag.stdout, "the images carry pyproject's version"
    fork = checked(f"v{version}", "someone")
    assert fork.returncode == 1 and "pushes ghcr.io/someone/trainer" in fork.stdout, "the chart must pull what is pushed"
    shutil.copytree(REPO / "charts" / "pytorchjob-mnist", tmp_path / "charts" / "pytorchjob-mnist")
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    chart_yaml = tmp_path / "charts" / "pytorchjob-mnist" / "Chart.yaml"
    chart_yaml.write_text(re.sub(r"^appVersion: .*$", 'appVersion: "9.9.9"', chart_yaml.read_text(), flags=re.M))
    stale = checked(f"v{version}", "pytorchjob-mnist", root=tmp_path)
    assert stale.returncode == 1, "the chart's default image tag is <appVersion>-<variant>"
    assert "appVersion is 9.9.9" in stale.stdout and f'set appVersion: "{version}"' in stale.stdout

    images = workflow["jobs"]["images"]
    assert images["needs"] == "check" and images["permissions"]["packages"] == "write"
    built = {(entry["variant"], entry["platforms"]) for entry in images["strategy"]["matrix"]["include"]}
    assert built == {("cpu", "linux/amd64,linux/arm64"), ("cuda", "linux/amd64")}
    push = next(step["run"] for step in images["steps"] if "make image" in step.get("run", ""))
    assert 'REGISTRY="ghcr.io/${OWNER,,}"' in push and "IMAGE_BUILD_FLAGS=--push" in push
    charts_job = workflow["jobs"]["charts"]
    assert charts_job["needs"] == "images", "no chart release points at images not yet pushed"
    charts = " ".join(step.get("run", "") for step in charts_job["steps"])
    assert "charts=$(bash ci/release-charts.sh)" in charts and '"oci://ghcr.io/${OWNER,,}/charts"' in charts


@pytest.fixture
def history(tmp_path):
    """A clone of this repository whose HEAD is tagged v0.1.0, and a function that commits a change
    to a chart (optionally with a new version), tags it and runs ci/release-charts.sh there."""
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
                chart_yaml = clone / chart / "Chart.yaml"
                chart_yaml.write_text(re.sub(r"^version: .*$", f"version: {version}", chart_yaml.read_text(), flags=re.M))
        subprocess.run([*git, "commit", "--quiet", "--allow-empty", "-am", tag], check=True)
        subprocess.run([*git, "tag", tag], check=True)
        return subprocess.run(["bash", str(SCRIPT)], cwd=clone, capture_output=True, text=True)

    return clone, release


def test_the_first_release_publishes_every_chart(history):
    clone, _ = history
    result = subprocess.run(["bash", str(SCRIPT), "v0.1.0"], cwd=clone, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == list(CHARTS)


def test_a_release_publishes_only_the_charts_that_changed_with_a_new_version(history):
    _, release = history
    result = release("v0.2.0", {"charts/pytorchjob-mnist": "0.2.0"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["charts/pytorchjob-mnist"], "the unchanged operator chart stays published"
    assert release("v0.3.0", {}).stdout == "", "nothing changed, nothing to publish"


def test_a_changed_chart_that_keeps_its_published_version_stops_the_release(history):
    _, release = history
    result = release("v0.2.0", {"charts/training-operator": None})
    assert result.returncode == 1
    assert "charts/training-operator changed since v0.1.0 but keeps version" in result.stderr
    assert "bump version in charts/training-operator/Chart.yaml" in result.stderr
