"""ct.yaml agrees with what the CI workflow passes to chart-testing, and its Helm timeout covers the
workload chart's `helm test`."""

from __future__ import annotations

import re

import yaml

from tests.support.paths import REPO, WORKLOAD_CHART
from tests.support.workflows import WORKFLOWS

CT_CONFIG = yaml.safe_load((REPO / "ct.yaml").read_text())


def ct_lint_command() -> str:
    steps = yaml.safe_load((WORKFLOWS / "ci.yaml").read_text())["jobs"]["chart-lint"]["steps"]
    [command] = [step["run"] for step in steps if step.get("run", "").startswith("ct lint ")]
    return command


def test_version_increment_check_is_what_ci_passes():
    """A flag in the workflow that contradicts ct.yaml would leave a local `ct lint --config ct.yaml`
    failing (or passing) where CI does not."""
    passed = re.search(r"--check-version-increment=(true|false)\b", ct_lint_command())
    expected = CT_CONFIG["check-version-increment"]
    assert passed is None or (passed.group(1) == "true") == expected, (
        f"ct.yaml says check-version-increment: {str(expected).lower()}, CI passes {passed.group(0)}"
    )


def test_the_helm_timeout_covers_the_workload_charts_test_pod():
    wait = yaml.safe_load((WORKLOAD_CHART / "values.yaml").read_text())["tests"]["timeoutSeconds"]
    timeout = re.fullmatch(r"--timeout (\d+)s", CT_CONFIG["helm-extra-args"])
    assert timeout, CT_CONFIG["helm-extra-args"]
    assert int(timeout.group(1)) >= wait + 60, "helm test must outlast the test pod's wait for the job"
