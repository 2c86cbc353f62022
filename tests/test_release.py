"""The release: .github/workflows/release.yaml; ci/check-chart-versions.sh run on a real git
history, and ci/publish-charts.sh against a real registry."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.support.changelog import release_checkout
from tests.support.helm import set_chart_field
from tests.support.paths import REPO, WORKLOAD_CHART
from tests.support.registry import MISSING as REGISTRY_MISSING
from tests.support.registry import serve_registry
from tests.support.version import PROJECT_VERSION
from tests.support.workflows import WORKFLOWS, action_of, lint_problems

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


def step_index(steps: list[dict], name: str) -> int:
    """The index of the one step that uses the action `name`, or whose script contains `name`."""
    found = [i for i, step in enumerate(steps) if action_of(step) == name or name in step.get("run", "")]
    assert len(found) == 1, f"one step for {name!r}: {found}"
    return found[0]


def test_each_image_is_scanned_before_anything_is_pushed():
    images = yaml.safe_load(WORKFLOW.read_text())["jobs"]["images"]
    assert images["needs"] == "check", "the tag and chart versions are checked first"
    built = {(entry["variant"], entry["platforms"]) for entry in images["strategy"]["matrix"]["include"]}
    assert built == {("cpu", "linux/amd64,linux/arm64"), ("cuda", "linux/amd64")}
    steps = images["steps"]
    scan, login, push = (step_index(steps, s) for s in ("--fail-on critical", "docker/login-action", "--push"))
    assert step_index(steps, "anchore/scan-action/download-grype") < scan < login < push
    assert step_index(steps, "SOURCE_DATE_EPOCH") < scan, "the scanned build and the pushed one label alike"
    scan_run = steps[scan]["run"]
    assert "for platform in ${PLATFORMS//,/ }; do" in scan_run and 'PLATFORMS="$platform"' in scan_run, "each one"
    assert '"$GRYPE" "docker-archive:$archive" --only-fixed --fail-on critical' in scan_run
    assert steps[scan]["env"]["GRYPE"] == "${{ steps.grype.outputs.cmd }}"
    # The scan builds to an archive, not the engine or the registry (build-image.sh adds no --load then).
    assert 'IMAGE_BUILD_FLAGS="--output=type=docker,dest=$archive"' in scan_run
    assert "--output=*" in (REPO / "ci" / "build-image.sh").read_text()
    push_run = steps[push]["run"]
    assert 'REGISTRY="ghcr.io/${OWNER,,}"' in push_run
    assert "--push --sbom=true --provenance=mode=max" in push_run, "an SPDX SBOM and SLSA provenance"
    # Each leg hands its digest to the sign job under its own name.
    assert steps[push]["id"] == "push" and 'echo "$VARIANT-digest=' in push_run
    variants = {entry["variant"] for entry in images["strategy"]["matrix"]["include"]}
    assert images["outputs"] == {f"{v}-digest": f"${{{{ steps.push.outputs.{v}-digest }}}}" for v in variants}


def test_the_charts_follow_the_images_and_cosign_signs_both_by_digest():
    jobs = yaml.safe_load(WORKFLOW.read_text())["jobs"]
    charts_job = jobs["charts"]
    assert charts_job["needs"] == "images", "no chart release points at images not yet pushed"
    publish = charts_job["steps"][step_index(charts_job["steps"], "ci/publish-charts.sh")]["run"]
    assert (
        'bash ci/publish-charts.sh "$helm" "oci://ghcr.io/${OWNER,,}/charts" 2>&1 | tee "$RUNNER_TEMP/publish.log"'
        in (publish)
    )
    assert "set -o pipefail" in publish, "a failed push fails the step through tee"
    assert charts_job["outputs"] == {"pushed": "${{ steps.pushed.outputs.charts }}"}
    setup_node = next(step for step in charts_job["steps"] if action_of(step) == "actions/setup-node")
    assert setup_node["with"]["package-manager-cache"] is False, "no cache another workflow could have poisoned"

    sign = jobs["sign"]
    assert sign["needs"] == ["images", "charts"]
    assert sign["permissions"] == {"packages": "write", "id-token": "write"}
    assert [job for job in jobs.values() if "id-token" in job.get("permissions", {})] == [sign]
    steps = sign["steps"]
    signing = step_index(steps, "cosign sign")
    assert (
        step_index(steps, "sigstore/cosign-installer") < signing and step_index(steps, "docker/login-action") < signing
    )
    run, env = steps[signing]["run"], steps[signing]["env"]
    assert 'cosign sign --yes "$image@$CPU_DIGEST" "$image@$CUDA_DIGEST" "${charts[@]}"' in run
    assert env["CPU_DIGEST"] == "${{ needs.images.outputs.cpu-digest }}"
    assert env["CUDA_DIGEST"] == "${{ needs.images.outputs.cuda-digest }}"
    assert env["PUSHED_CHARTS"] == "${{ needs.charts.outputs.pushed }}"


def test_the_docs_show_how_to_verify_a_signature_and_read_the_sbom():
    text = (REPO / "docs" / "releasing.md").read_text()
    assert "cosign verify ghcr.io/<owner>/trainer:" in text and "cosign verify ghcr.io/<owner>/charts/" in text
    issuer = "--certificate-oidc-issuer https://token.actions.githubusercontent.com"
    assert text.count(issuer) == 2 and text.count("--certificate-identity-regexp") == 2
    identity = re.search(r"--certificate-identity-regexp '([^']+)'", text).group(1)
    # What Fulcio puts in the certificate of a workflow run for a tag.
    signer = "https://github.com/<owner>/<repo>/.github/workflows/release.yaml@refs/tags/v0.1.0"
    assert re.match(identity, signer) and WORKFLOW.name in identity.replace("\\.", ".")
    assert ".SBOM" in text and "SPDX" in text and ".Provenance.SLSA" in text


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
    """Asking the registry, not git, also publishes what a failed release left unpushed. The
    workflow's next step reads what helm pushed from its output, for the sign job: the digests
    must be the registry's."""
    checkout = tmp_path / "checkout"
    release_checkout(checkout)
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

    workflow = yaml.safe_load(WORKFLOW.read_text())
    read_pushed = next(step["run"] for step in workflow["jobs"]["charts"]["steps"] if step.get("id") == "pushed")

    def signed(published: subprocess.CompletedProcess) -> list[str]:
        """What the sign job gets: the charts step's output from the publish step's log (both streams)."""
        runner_temp = tmp_path / "runner-temp"
        runner_temp.mkdir(exist_ok=True)
        (runner_temp / "publish.log").write_text(published.stdout + published.stderr)
        output = runner_temp / "github-output"
        output.write_text("")
        env = {**os.environ, "RUNNER_TEMP": str(runner_temp), "GITHUB_OUTPUT": str(output)}
        subprocess.run(["bash", "-e", "-c", read_pushed], env=env, check=True)
        (line,) = output.read_text().splitlines()
        assert line.startswith("charts=")
        return line.removeprefix("charts=").split()

    def registry_digest(host: str, name: str, version: str) -> str:
        request = urllib.request.Request(
            f"http://{host}/v2/charts/{name}/manifests/{version}",
            headers={"Accept": "application/vnd.oci.image.manifest.v1+json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return "sha256:" + hashlib.sha256(response.read()).hexdigest()

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
        assert signed(first) == [
            f"{host}/charts/{name}@{registry_digest(host, name, version)}" for name, version in versions.items()
        ]

        again = publish(destination)
        assert again.returncode == 0, again.stderr
        assert again.stdout.splitlines() == [
            f"{name} {version} is published already" for name, version in versions.items()
        ]
        assert signed(again) == [], "nothing pushed, nothing to sign"

        set_chart_field(checkout / "charts" / "pytorchjob-mnist", "version", "99.0.0")
        bumped = publish(destination)
        assert bumped.returncode == 0, bumped.stderr
        assert (
            bumped.stdout.splitlines()[0] == f"training-operator {versions['training-operator']} is published already"
        )
        assert published(destination, "pytorchjob-mnist", "99.0.0")
        assert signed(bumped) == [
            f"{host}/charts/pytorchjob-mnist@{registry_digest(host, 'pytorchjob-mnist', '99.0.0')}"
        ]
