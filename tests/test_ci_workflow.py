"""The CI workflow lints both charts with chart-testing's `ct lint`, as chart users do, with the
repository's ct.yaml and the Helm 3 that ci/install-tools.sh pins (tests/e2e/test_kind.py checks
its test and e2e jobs)."""

from __future__ import annotations

import re

import yaml

from tests.support.paths import REPO
from tests.support.workflows import WORKFLOWS, lint_problems


def test_ci_workflow_runs_ct_lint_on_every_chart():
    text = (WORKFLOWS / "ci.yaml").read_text()
    assert not lint_problems(text), lint_problems(text)
    steps = yaml.safe_load(text)["jobs"]["chart-lint"]["steps"]
    uses = [step.get("uses", "") for step in steps]
    ct_action = next((u for u in uses if u.startswith("helm/chart-testing-action@")), None)
    assert ct_action and re.fullmatch(r"helm/chart-testing-action@v\d+\.\d+\.\d+", ct_action), (
        "the official action, pinned"
    )
    lint = [i for i, step in enumerate(steps) if step.get("run", "").startswith("ct lint ")]
    assert lint, "a `ct lint` step"
    assert uses.index(ct_action) < lint[0], "ct is installed before it runs"
    run = steps[lint[0]]["run"]
    assert "--config ct.yaml" in run and "--all" in run
    assert (REPO / "ct.yaml").is_file() and "lint-conf: ci/lintconf.yaml" in (REPO / "ct.yaml").read_text()
    # ct lints with the helm on PATH: the version the tests render with.
    helm_pin = re.search(
        r'^HELM3_VERSION="\$\{HELM3_VERSION:-(v[\d.]+)\}"$', (REPO / "ci" / "install-tools.sh").read_text(), re.M
    )
    setup_helm = next(step for step in steps if step.get("uses", "").startswith("azure/setup-helm@"))
    assert setup_helm["with"]["version"] == helm_pin.group(1)
    assert any(u.startswith("actions/setup-python@") for u in uses), "yamllint and Yamale need Python"
