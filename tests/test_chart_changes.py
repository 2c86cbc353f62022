"""Artifact Hub's artifacthub.io/changes, which the release writes into each chart it publishes from
CHANGELOG.md's section for the version (ci/chart_changes.py, run by ci/publish-charts.sh)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import yaml

from tests.support.changelog import CHANGELOG, release_checkout
from tests.support.paths import OPERATOR_CHART, REPO, WORKLOAD_CHART
from tests.support.version import PROJECT_VERSION
from tests.support.workflows import WORKFLOWS

SCRIPT = REPO / "ci" / "chart_changes.py"
PUBLISH = REPO / "ci" / "publish-charts.sh"
HOME = yaml.safe_load((WORKLOAD_CHART / "Chart.yaml").read_text())["home"]
KINDS = ("added", "changed", "deprecated", "removed", "fixed", "security")


def chart_changes(*args: str | Path, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=60
    )


def unreleased_entries() -> list[tuple[str, str]]:
    """(kind, first line) of each entry of CHANGELOG.md's [Unreleased] section, read line by line."""
    body = CHANGELOG.read_text().split("## [Unreleased]", 1)[1].split("\n## ", 1)[0]
    entries, kind = [], None
    for line in body.splitlines():
        if line.startswith("### "):
            kind = line[4:].lower()
        elif line.startswith("- "):
            entries.append((kind, line[2:]))
    return entries


def fake_helm(tmp_path: Path, helm) -> tuple[Path, Path]:
    """A helm that finds nothing published (`show` fails) and pushes into a directory; the rest is Helm's."""
    pushed = tmp_path / "pushed"
    pushed.mkdir()
    script = tmp_path / "helm"
    script.write_text(
        "#!/usr/bin/env bash\n"
        'case "$1" in\n'
        "  show) exit 1 ;;\n"
        f'  push) cp "$2" {pushed}/ ;;\n'
        f'  *) exec {helm.path} "$@" ;;\n'
        "esac\n"
    )
    script.chmod(0o755)
    return script, pushed


def test_publishing_packages_each_chart_with_its_release_changes(helm, tmp_path):
    checkout = tmp_path / "checkout"
    release_checkout(checkout)
    for chart in (OPERATOR_CHART, WORKLOAD_CHART):
        shutil.copytree(chart, checkout / "charts" / chart.name)
    fake, pushed = fake_helm(tmp_path, helm)
    result = subprocess.run(
        ["bash", str(PUBLISH), str(fake), "oci://registry.invalid/charts"],
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    expected = unreleased_entries()
    assert expected and {kind for kind, _ in expected} <= set(KINDS)
    for chart in (OPERATOR_CHART, WORKLOAD_CHART):
        meta = yaml.safe_load((chart / "Chart.yaml").read_text())
        with tarfile.open(pushed / f"{meta['name']}-{meta['version']}.tgz") as archive:
            packed = yaml.safe_load(archive.extractfile(f"{meta['name']}/Chart.yaml").read())
        changes = yaml.safe_load(packed["annotations"].pop("artifacthub.io/changes"))
        assert packed["annotations"] == meta["annotations"], "the other annotations stay as they are"
        assert [change["kind"] for change in changes] == [kind for kind, _ in expected]
        for change, (_, first_line) in zip(changes, expected, strict=True):
            # The entry's first line, its markdown links turned into their text.
            assert change["description"].startswith(re.sub(r"\[([^\]]+)\]\([^)]+\)", r"\1", first_line))
            assert "](" not in change["description"]
            for link in change.get("links", []):
                assert link["url"].startswith("https://"), link
                if link["url"].startswith(HOME):
                    assert link["url"].startswith(f"{HOME}/blob/v{PROJECT_VERSION}/"), "the release's tag"
                    assert (REPO / link["url"].split(f"v{PROJECT_VERSION}/", 1)[1]).exists(), link
    assert (checkout / "charts" / WORKLOAD_CHART.name / "Chart.yaml").read_text() == (
        WORKLOAD_CHART / "Chart.yaml"
    ).read_text(), "the checkout's chart is left as it is"


def test_a_release_without_its_changelog_section_is_stopped_naming_the_fix(helm, tmp_path):
    checkout = tmp_path / "checkout"
    release_checkout(checkout)
    shutil.copy(CHANGELOG, checkout / "CHANGELOG.md")
    shutil.copytree(WORKLOAD_CHART, checkout / "charts" / WORKLOAD_CHART.name)
    shutil.copytree(OPERATOR_CHART, checkout / "charts" / OPERATOR_CHART.name)
    fake, pushed = fake_helm(tmp_path, helm)
    result = subprocess.run(
        ["bash", str(PUBLISH), str(fake), "oci://registry.invalid/charts"], cwd=checkout, capture_output=True, text=True
    )
    assert result.returncode != 0
    assert f"CHANGELOG.md has no section '## [{PROJECT_VERSION}] - <date>'" in result.stderr
    assert "move the [Unreleased] entries" in result.stderr
    assert list(pushed.iterdir()) == [], "nothing pushed"


def test_a_heading_artifact_hub_does_not_know_is_refused(tmp_path):
    changelog = tmp_path / "CHANGELOG.md"
    changelog.write_text("## [1.0.0] - 2026-12-01\n\n### Improved\n\n- faster\n")
    result = chart_changes(changelog, "1.0.0")
    assert result.returncode == 1
    assert "'### Improved' heading" in result.stderr and "Added, Changed, Deprecated" in result.stderr


def test_the_repositorys_unreleased_section_converts():
    """What the next release will publish: every heading a kind, every entry an entry."""
    result = chart_changes(CHANGELOG, "Unreleased")
    assert result.returncode == 0, result.stderr
    assert len(yaml.safe_load(result.stdout)) == len(unreleased_entries())


def test_the_release_checks_the_changelog_before_pushing_anything():
    workflow = yaml.safe_load((WORKFLOWS / "release.yaml").read_text())
    runs = [step.get("run", "") for step in workflow["jobs"]["check"]["steps"]]
    assert any("ci/chart_changes.py CHANGELOG.md" in run for run in runs)
    assert workflow["jobs"]["images"]["needs"] == "check"
