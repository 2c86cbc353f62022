"""What Artifact Hub and `helm lint` read from both charts' Chart.yaml: the artifacthub.io annotations
(category, license, images, links), the icon and the maintainers, and the schemas' one `$schema` URI.
artifacthub.io/changes is the release's (tests/test_chart_changes.py)."""

from __future__ import annotations

import json

import pytest
import tomllib
import yaml

from tests.support.paths import OPERATOR_CHART, REPO, WORKLOAD_CHART

CHARTS = (OPERATOR_CHART, WORKLOAD_CHART)
META = {chart.name: yaml.safe_load((chart / "Chart.yaml").read_text()) for chart in CHARTS}
HOME = META[WORKLOAD_CHART.name]["home"]
# A file of the repository's main branch, as GitHub serves it raw.
RAW_MAIN = HOME.replace("https://github.com/", "https://raw.githubusercontent.com/") + "/main/"
LICENSE = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["license"]
# What each chart's images annotation must list: every image of these renders.
IMAGE_RENDERS = {
    OPERATOR_CHART.name: [{}],
    WORKLOAD_CHART.name: [{}, {"gpu": 1}, {"tensorboard.enabled": True}],
}
by_name = pytest.mark.parametrize("chart", CHARTS, ids=lambda chart: chart.name)


def annotation(chart, key: str):
    """An artifacthub.io annotation: a YAML document in a string, parsed."""
    return yaml.safe_load(META[chart.name]["annotations"][f"artifacthub.io/{key}"])


def images_in(node) -> set[str]:
    """Every container image of the documents, and the operator's init-container image flag."""
    found = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("containers", "initContainers"):
                found |= {container["image"] for container in value}
            found |= images_in(value)
    elif isinstance(node, list):
        for item in node:
            found |= images_in(item)
    elif isinstance(node, str) and node.startswith("--pytorch-init-container-image="):
        found.add(node.split("=", 1)[1])
    return found


@by_name
def test_artifact_hub_reads_the_category_and_the_projects_license(chart):
    annotations = META[chart.name]["annotations"]
    assert annotations["artifacthub.io/category"] == "ai-machine-learning"
    assert annotations["artifacthub.io/license"] == LICENSE
    assert "category" not in annotations, "Bitnami's key, which Artifact Hub ignores"


@by_name
def test_the_images_annotation_lists_every_image_the_chart_runs(helm, chart):
    listed = annotation(chart, "images")
    assert len({image["name"] for image in listed}) == len(listed), "names are unique"
    rendered = set()
    for values in IMAGE_RENDERS[chart.name]:
        docs = helm.render(chart, set_values=values)
        rendered |= images_in([doc for doc in docs if doc["kind"] != "CustomResourceDefinition"])
    assert {image["image"] for image in listed} == rendered


@by_name
def test_the_links_are_named_and_those_into_the_repository_exist(chart):
    links = annotation(chart, "links")
    assert links and all(link["name"] and link["url"].startswith("https://") for link in links)
    for link in links:
        for kind in ("blob", "tree"):
            prefix = f"{HOME}/{kind}/main/"
            if link["url"].startswith(prefix):
                target = REPO / link["url"].removeprefix(prefix)
                assert target.is_file() if kind == "blob" else target.is_dir(), link


@by_name
def test_the_icon_is_a_file_of_the_repository_and_helm_lint_is_silent(helm, chart):
    icon = META[chart.name]["icon"]
    assert icon.startswith(RAW_MAIN) and (REPO / icon.removeprefix(RAW_MAIN)).is_file()
    result = helm.run("lint", str(chart))
    assert [line for line in result.stdout.splitlines() if line.startswith("[")] == [], result.stdout


def test_both_charts_name_the_same_maintainers_and_schema_uri():
    maintainers = [META[chart.name].get("maintainers") for chart in CHARTS]
    assert maintainers[0] and maintainers[0] == maintainers[1]
    schemas = {json.loads((chart / "values.schema.json").read_text())["$schema"] for chart in CHARTS}
    assert schemas == {"https://json-schema.org/draft-07/schema#"}


@by_name
def test_the_changes_annotation_is_left_to_the_release(chart):
    """CHANGELOG.md is the one place for a release's changes; ci/publish-charts.sh writes them in."""
    assert "artifacthub.io/changes" not in META[chart.name]["annotations"]
