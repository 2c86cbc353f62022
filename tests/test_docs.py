"""What the front page and the docs say about the repository holds: the files their commands name exist,
the layout table lists every trainer module and job kind, the Kubeflow SDK imports are the SDK's public
names, and `helm test` timeouts outlast the chart's test pod."""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import pytest
import yaml

from tests.support.paths import REPO, WORKLOAD_CHART
from tests.support.version import PROJECT_VERSION

README = (REPO / "README.md").read_text()
# Every document whose commands a reader copies: the front page, docs/ and each README below it.
DOCUMENTS = sorted(
    [REPO / "README.md", *(REPO / "docs").glob("*.md"), *(REPO / "charts").glob("*/README.md")]
    + [REPO / "ci" / "argocd" / "README.md", REPO / "docker" / "README.md"]
)
# A values or manifest file given to helm, kubectl or make: `-f FILE`, `--values FILE`, `VALUES=FILE`, ...
NAMED_FILE = re.compile(r"(?:(?<=\s)(?:-f|--values|--patch-file)[ =]|\bVALUES=)([\w./-]+\.ya?ml)\b")


def layout_row(path: str) -> str:
    [row] = [line for line in README.splitlines() if line.startswith(f"| [`{path}`]")]
    return row


def test_the_layout_table_names_every_trainer_module():
    named = set(re.findall(r"`(\w+)`", layout_row("trainer/")))
    modules = {p.stem for p in (REPO / "trainer").glob("*.py")} - {"__init__", "__main__"}
    assert modules - named == set(), f"README.md's trainer/ row misses {sorted(modules - named)}"


def test_the_layout_table_names_every_job_kind_of_the_workload_chart():
    kinds = json.loads((WORKLOAD_CHART / "values.schema.json").read_text())["properties"]["jobKind"]["enum"]
    row = layout_row("charts/pytorchjob-mnist/")
    assert [kind for kind in kinds if kind not in row] == [], "README.md's charts/pytorchjob-mnist/ row"


def test_the_argocd_paragraph_names_every_job_health_check():
    """ci/argocd/resource_customizations/<group>/<Kind>/ holds a health check per job kind."""
    checks = {
        kind.name
        for kind in (REPO / "ci" / "argocd" / "resource_customizations").glob("*/*")
        if kind.parent.name != "argoproj.io"
    }
    [paragraph] = [p for p in README.split("\n\n") if p.startswith("For GitOps with Argo CD")]
    assert [kind for kind in sorted(checks) if kind not in paragraph] == []


def document_id(path: Path) -> str:
    return str(path.relative_to(REPO))


@pytest.mark.parametrize("document", DOCUMENTS, ids=document_id)
def test_every_file_a_command_names_exists(document):
    """Commands run from the repository's root, so the files they name are relative to it."""
    named = NAMED_FILE.findall(document.read_text())
    assert [name for name in named if not (REPO / name).is_file()] == []


def test_the_file_pattern_finds_what_readers_copy():
    """The pattern above must keep matching the forms the documents use, or the test checks nothing."""
    found = {name for document in DOCUMENTS for name in NAMED_FILE.findall(document.read_text())}
    assert {"charts/pytorchjob-mnist/ci/cpu-gloo-values.yaml", "ci/argocd/root-app.yaml"} <= found
    assert NAMED_FILE.findall("kubectl logs -f mnist-master-0 -n ml") == [], "follow, not a file"


def test_helm_test_timeouts_outlast_the_test_pod():
    """Helm's default is 5 minutes; the test pod may wait tests.timeoutSeconds for the job."""
    wait = yaml.safe_load((WORKLOAD_CHART / "values.yaml").read_text())["tests"]["timeoutSeconds"]
    timeouts = {
        (document_id(d), int(seconds))
        for d in DOCUMENTS
        for seconds in re.findall(r"helm test [^\n]*--timeout (\d+)s", d.read_text())
    }
    assert ("README.md", wait + 60) in timeouts
    assert [t for t in timeouts if t[1] < wait + 60] == []


def test_the_kubeflow_sdk_page_imports_the_sdks_public_names():
    """`from kubeflow.trainer import …` as the SDK exports it (its __all__), so the page's code runs."""
    text = (REPO / "docs" / "kubeflow-sdk.md").read_text()
    imports = re.findall(r"^from (kubeflow[\w.]*) import (.+)$", text, re.M)
    assert imports
    for module_name, names in imports:
        module = importlib.import_module(module_name)
        for name in (n.strip() for n in names.split(",")):
            assert name in getattr(module, "__all__", dir(module)), f"{module_name} does not export {name}"
    assert "kubeflow.common" not in text, "the SDK's public path is kubeflow.trainer"


def test_the_trainer_page_says_which_recipe_is_whose_default():
    """The trainer's default (a drop-in for the seed script) and the chart's (what `make run` trains) differ."""
    from trainer import cli

    chart_recipe = yaml.safe_load((WORKLOAD_CHART / "values.yaml").read_text())["training"]["recipe"]
    assert chart_recipe != cli.DEFAULT_RECIPE, "then the page's distinction has gone stale"
    page = " ".join((REPO / "docs" / "trainer.md").read_text().split())
    assert f"`{cli.DEFAULT_RECIPE}`, the trainer's default" in page
    assert f"`{chart_recipe}`, the default of the chart's `training.recipe`" in page


def test_the_front_page_lists_every_example_values_file():
    """README.md lists the workload chart's examples/ by name: a new or renamed file must show there."""
    examples = WORKLOAD_CHART / "examples"
    [paragraph] = [p for p in README.split("\n\n") if "charts/pytorchjob-mnist/examples/`" in p]
    listed = set(re.findall(r"`([\w.-]+\.yaml)`", paragraph))
    assert listed == {p.name for p in examples.rglob("*.yaml")}


def test_image_tags_in_the_docs_are_this_versions():
    """Examples that pull the released image name pyproject.toml's version, so they run after a release."""
    tags = {
        (document_id(d), tag)
        for d in DOCUMENTS
        for tag in re.findall(r"ghcr\.io/pytorchjob-mnist/trainer:([\w.]+)-(?:cpu|cuda)", d.read_text())
    }
    assert tags, "the pattern finds the SDK page's examples"
    assert [t for t in tags if t[1] != PROJECT_VERSION] == []
