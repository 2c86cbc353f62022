"""Both charts as `helm package` packs them, with Helm 3 and Helm 4: what a chart repository serves stands
alone. Its README (`helm show readme`, Artifact Hub) links only to files inside the package or to absolute
URLs, and the NOTES an install of it prints name no path of the repository's checkout."""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

import pytest
import yaml

from tests.support.chart_cases import notes_cases
from tests.support.helm import notes_preview_chart, render_notes
from tests.support.paths import OPERATOR_CHART, REPO, WORKLOAD_CHART

CHARTS = (OPERATOR_CHART, WORKLOAD_CHART)
# The project's repository: the workload chart's `home`, the one place that names it.
HOME = yaml.safe_load((WORKLOAD_CHART / "Chart.yaml").read_text())["home"]
# A link into the project's repository, as readers of a packaged chart follow it: a file or folder of main.
PROJECT_LINK = re.compile(rf"^{re.escape(HOME)}/(blob|tree)/main/([^#]+)(?:#(.+))?$")
# A markdown link's target, without a title.
LINK = re.compile(r"\]\(([^)\s]+)")
# Where the Argo CD apps install the released charts from (ghcr.io/<owner>/charts), and their names.
APPS = [yaml.safe_load(p.read_text())["spec"]["source"] for p in sorted((REPO / "ci/argocd/apps").glob("*.yaml"))]
PUBLISHED = {f"oci://{app['repoURL']}/{app['chart']}" for app in APPS}
# An oci:// reference to a chart of the project's owner.
PROJECT_CHART = re.compile(rf"oci://{re.escape(APPS[0]['repoURL'].rsplit('/', 1)[0])}/[\w./-]+")
# A path of the checkout, as a command or a sentence would name it (not inside a URL or a longer path).
CHECKOUT_PATH = re.compile(r"(?<![\w./:<>-])(?:charts|ci|docs|docker|tests)/\S*")
# `make` with one of the Makefile's targets: a command only a clone of the repository runs.
MAKE_TARGETS = re.findall(r"^([a-z][\w-]*):", (REPO / "Makefile").read_text(), re.M)
MAKE = re.compile(rf"\bmake (?:{'|'.join(MAKE_TARGETS)})\b")


def unpacked(helm, chart: Path, directory: Path) -> Path:
    """The chart as `helm package` packs it, unpacked in `directory`."""
    helm.run("package", str(chart), "--destination", str(directory))
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    with tarfile.open(directory / f"{meta['name']}-{meta['version']}.tgz") as archive:
        archive.extractall(directory / "unpacked", filter="data")
    return directory / "unpacked" / meta["name"]


def anchors(markdown: str) -> set[str]:
    """The anchors of a markdown file's headings, as GitHub and Artifact Hub make them."""
    headings = re.findall(r"^#+ (.+)$", re.sub(r"^```.*?^```", "", markdown, flags=re.M | re.S), re.M)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


@pytest.mark.both_helm_majors
@pytest.mark.parametrize("chart", CHARTS, ids=lambda chart: chart.name)
def test_the_packaged_readme_links_inside_the_package_or_to_absolute_urls(helm, chart, tmp_path):
    package = unpacked(helm, chart, tmp_path).resolve()
    links = LINK.findall((package / "README.md").read_text())
    assert links, "the pattern finds the README's links"
    outside = []
    for link in links:
        if re.match(r"https?://", link):
            continue
        path, _, anchor = link.partition("#")
        target = (package / path).resolve() if path else package / "README.md"
        if not target.is_relative_to(package) or not target.exists():
            outside.append(link)
        elif anchor and anchor not in anchors(target.read_text()):
            outside.append(link)
    assert outside == [], "links a packaged chart cannot follow"


@pytest.mark.parametrize("chart", CHARTS, ids=lambda chart: chart.name)
def test_links_into_the_repository_name_a_file_of_its_main_branch(chart):
    """Chart.yaml's home, or a file (blob) or folder (tree) of it that exists, at a heading it has."""
    project = HOME.rsplit("/", 1)[0] + "/"
    links = [link for link in LINK.findall((chart / "README.md").read_text()) if link.startswith(project)]
    assert links, "the README sends readers to the repository for what the package lacks"
    broken = []
    for link in (link for link in links if link != HOME):
        match = PROJECT_LINK.match(link)
        if match is None:
            broken.append(link)
            continue
        kind, path, anchor = match.groups()
        target = REPO / path
        if not (target.is_file() if kind == "blob" else target.is_dir()):
            broken.append(link)
        elif anchor and anchor not in anchors(target.read_text()):
            broken.append(link)
    assert broken == []


def test_the_anchor_rule_matches_githubs():
    assert anchors(
        "# A\n## Kubeflow Trainer v2 (TrainJob)\n```sh\n# not a heading\n```\n### v1 → v2 values mapping\n"
    ) == {
        "a",
        "kubeflow-trainer-v2-trainjob",
        "v1--v2-values-mapping",
    }


@pytest.fixture(scope="module")
def install_notes(tmp_path_factory) -> list[tuple[Path, tuple[str, ...]]]:
    return notes_cases(tmp_path_factory.mktemp("values"))


@pytest.mark.both_helm_majors
def test_the_packaged_notes_name_no_path_of_the_checkout(helm, install_notes, tmp_path):
    """Charts, commands and files as a chart repository's user has them: oci:// references where the
    release publishes the charts, the repository by its URL; `make` only in a clone, said so."""
    previews = {
        chart: notes_preview_chart(unpacked(helm, chart, tmp_path / chart.name), tmp_path / "preview" / chart.name)
        for chart in CHARTS
    }
    references = set()
    for chart, flags in install_notes:
        text = render_notes(helm, previews[chart], release="mnist", namespace="ml", extra=flags)
        assert CHECKOUT_PATH.findall(text) == [], f"{chart.name} {flags}"
        for paragraph in text.split("\n\n"):
            if MAKE.search(paragraph):
                assert f"a clone of {HOME}" in " ".join(paragraph.split()), paragraph
        references |= set(PROJECT_CHART.findall(text))
    assert references == PUBLISHED, "each chart sends readers to the other, where the release publishes it"


def test_the_readmes_name_the_charts_where_the_release_publishes_them():
    references = {ref for chart in CHARTS for ref in PROJECT_CHART.findall((chart / "README.md").read_text())}
    assert references == PUBLISHED
