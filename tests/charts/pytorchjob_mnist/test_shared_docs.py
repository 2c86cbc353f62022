"""The chart README's commands and claims match the Makefile, the values and what the chart does
(tests/charts/test_values_docs.py checks its values table)."""

from __future__ import annotations

import re

import yaml

from tests.support.paths import REPO, WORKLOAD_CHART


def quick_start() -> str:
    return (WORKLOAD_CHART / "README.md").read_text().split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]


def test_quick_start_builds_and_uses_the_image_the_makefile_pushes():
    """No registry publishes the default image: the Quick start pushes it with the Makefile and
    points image.repository at it."""
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"^image:", makefile, re.MULTILINE) and re.search(r"^push:", makefile, re.MULTILINE)
    image_name = re.search(r"^IMAGE_NAME \?= (\S+)$", makefile, re.MULTILINE).group(1)
    assert re.search(r"^IMG \?= \$\(REGISTRY\)/\$\(IMAGE_NAME\):", makefile, re.MULTILINE)
    text = quick_start()
    assert "make image push REGISTRY=<your registry>" in text
    assert f"--set image.repository=<your registry>/{image_name}" in text
    assert text.index("make image push") < text.index("helm install mnist")


def test_quick_start_helm_test_outlasts_the_test_pods_wait():
    timeout = yaml.safe_load((WORKLOAD_CHART / "values.yaml").read_text())["tests"]["timeoutSeconds"]
    assert f"helm test mnist -n ml --timeout {timeout + 60}s" in quick_start()


def test_readme_does_not_promise_what_nothing_does():
    readme = (WORKLOAD_CHART / "README.md").read_text()
    assert "makes the scheduler keep" not in readme and "scheduled next to" not in readme
    assert "podAffinity" in readme and "Multi-Attach" in readme, "the README explains the RWO co-location"
    assert "chart-testing installs" not in readme, "nothing in the repository runs `ct install`"
    values = (WORKLOAD_CHART / "values.yaml").read_text()
    assert "makes the scheduler keep" not in values and "scheduled next to" not in values
