"""The GitHub workflows: the CI workflow lints both charts with chart-testing's `ct lint`, as chart
users do, with the repository's ct.yaml and the Helm 3 that ci/install-tools.sh pins
(tests/e2e/test_kind.py checks its test and e2e jobs); every workflow pins its actions by commit,
gives each job only the token scopes it uses and passes zizmor; Dependabot keeps the pins current."""

from __future__ import annotations

import re
import subprocess
from collections import defaultdict

import pytest
import yaml

from tests.support.linters import venv_tool
from tests.support.paths import REPO
from tests.support.workflows import WORKFLOW_FILES, WORKFLOWS, action_of, lint_problems, uses

DEPENDABOT = REPO / ".github" / "dependabot.yml"
# The token scopes a job may write with, by workflow and job: everything else reads at most.
WRITE_SCOPES = {
    ("release.yaml", "images"): {"packages"},
    ("release.yaml", "charts"): {"packages"},
    ("release.yaml", "sign"): {"packages", "id-token"},
}


def test_ci_workflow_runs_ct_lint_on_every_chart():
    text = (WORKFLOWS / "ci.yaml").read_text()
    assert not lint_problems(text), lint_problems(text)
    steps = yaml.safe_load(text)["jobs"]["chart-lint"]["steps"]
    actions = [action_of(step) for step in steps]
    assert "helm/chart-testing-action" in actions, "the official action"
    lint = [i for i, step in enumerate(steps) if step.get("run", "").startswith("ct lint ")]
    assert lint, "a `ct lint` step"
    assert actions.index("helm/chart-testing-action") < lint[0], "ct is installed before it runs"
    run = steps[lint[0]]["run"]
    assert "--config ct.yaml" in run and "--all" in run
    assert (REPO / "ct.yaml").is_file() and "lint-conf: ci/lintconf.yaml" in (REPO / "ct.yaml").read_text()
    # ct lints with the helm on PATH: the version the tests render with.
    helm_pin = re.search(
        r'^HELM3_VERSION="\$\{HELM3_VERSION:-(v[\d.]+)\}"$', (REPO / "ci" / "install-tools.sh").read_text(), re.M
    )
    setup_helm = next(step for step in steps if action_of(step) == "azure/setup-helm")
    assert setup_helm["with"]["version"] == helm_pin.group(1)
    assert "actions/setup-python" in actions, "yamllint and Yamale need Python"


def test_the_workflows_are_found():
    assert [path.name for path in WORKFLOW_FILES] == ["ci.yaml", "release.yaml"]


def test_every_action_is_pinned_by_commit_with_its_version_beside_it():
    """A tag can be moved to other code; a commit cannot. Dependabot updates the commit and the
    comment together, and one action repository is at one commit in every workflow."""
    pins = defaultdict(set)
    for path in WORKFLOW_FILES:
        text = path.read_text()
        found = uses(text)
        steps = [step for job in yaml.safe_load(text)["jobs"].values() for step in job["steps"]]
        assert len(found) == sum("uses" in step for step in steps), f"{path.name}: a `uses:` line the reader missed"
        for use in found:
            where = f"{path.name}:{use.line} {use.action}@{use.ref}"
            assert re.fullmatch(r"[0-9a-f]{40}", use.ref), f"{where}: pin a full commit SHA, not a tag or branch"
            assert re.fullmatch(r"v\d+\.\d+\.\d+", use.comment or ""), f"{where}: add the release, `# vX.Y.Z`"
            pins["/".join(use.action.split("/")[:2])].add((use.ref, use.comment))
    assert {"actions/checkout", "sigstore/cosign-installer", "anchore/scan-action"} <= pins.keys()
    inconsistent = {repository: found for repository, found in pins.items() if len(found) > 1}
    assert not inconsistent, inconsistent


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_each_job_gets_only_the_token_scopes_it_uses(path):
    workflow = yaml.safe_load(path.read_text())
    assert workflow["permissions"] == {}, "no scope by default: each job names its own"
    for name, job in workflow["jobs"].items():
        permissions = job.get("permissions")
        assert isinstance(permissions, dict) and permissions, f"{path.name} {name}: give it a permissions block"
        writes = {scope for scope, access in permissions.items() if access == "write"}
        assert writes == WRITE_SCOPES.get((path.name, name), set()), f"{path.name} {name}: {permissions}"
        assert set(permissions.values()) <= {"read", "write"}
    assert {job for (file, job), scopes in WRITE_SCOPES.items() if "id-token" in scopes} == {"sign"}


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_every_run_script_passes_shellcheck(path):
    """GitHub runs each `run:` with bash; an expression is substituted before it runs (zizmor
    checks that none lands in a script unquoted), so each stands as one word here."""
    problems = []
    for name, job in yaml.safe_load(path.read_text())["jobs"].items():
        for step in job["steps"]:
            if "run" in step:
                script = re.sub(r"\$\{\{.*?\}\}", "expression", step["run"])
                result = subprocess.run(
                    [venv_tool("shellcheck"), "--shell=bash", "--severity=style", "-"],
                    input=script,
                    capture_output=True,
                    text=True,
                )
                if result.returncode:
                    problems.append(f"{name}: {step.get('name', step['run'][:40])}\n{result.stdout}")
    assert not problems, "\n".join(problems)


def test_zizmor_finds_nothing_of_medium_or_high_severity():
    """zizmor's offline audits of the workflows and the Dependabot config (template injection,
    unpinned actions, cache poisoning in a release, excessive permissions, credentials persisted
    by checkout, a Dependabot without cooldown, ...)."""
    result = subprocess.run(
        [venv_tool("zizmor"), "--offline", "--no-progress", "--min-severity", "medium", str(REPO / ".github")],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No findings to report" in result.stdout, result.stdout


def test_dependabot_updates_the_actions_the_python_packages_and_the_base_image():
    text = DEPENDABOT.read_text()
    assert not lint_problems(text), lint_problems(text)
    config = yaml.safe_load(text)
    assert config["version"] == 2
    watched = defaultdict(set)
    for update in config["updates"]:
        directories = update.get("directories") or [update["directory"]]
        watched[update["package-ecosystem"]].update(directories)
        assert update["schedule"]["interval"] == "weekly"
        assert update["cooldown"]["default-days"] >= 7, "a compromised release is usually pulled within days"
    assert watched == {"github-actions": {"/"}, "pip": {"/", "/docker"}, "docker": {"/docker"}}
    # What each directory holds for its ecosystem (a moved file would silently go unwatched).
    assert (REPO / "pyproject.toml").is_file() and (REPO / "docker" / "constraints.txt").is_file()
    assert re.search(r"^FROM ", (REPO / "docker" / "Dockerfile").read_text(), re.M)
