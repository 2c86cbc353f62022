"""One release number, pyproject.toml's: `make image` tags <version>-<variant>, and the workload chart's
default image tag is <appVersion>-<variant>, so they must agree or the default image is missing."""

import shutil
import subprocess

import pytest
import yaml

from tests.support.paths import REPO, WORKLOAD_CHART
from tests.support.version import PROJECT_VERSION


def test_the_chart_app_version_is_pyprojects_version():
    chart = yaml.safe_load((WORKLOAD_CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == PROJECT_VERSION


@pytest.mark.skipif(shutil.which("make") is None, reason="GNU make is not installed")
def test_make_image_tags_pyprojects_version():
    """The Makefile reads the version from pyproject.toml rather than holding a copy."""
    result = subprocess.run(
        ["make", "-n", "image", "CONTAINER_TOOL=docker", "VARIANT=cpu"], cwd=REPO, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert f"IMG=ghcr.io/pytorchjob-mnist/trainer:{PROJECT_VERSION}-cpu " in result.stdout


def test_the_trainer_package_holds_no_copy_of_the_version():
    """A __version__ in trainer/ would be a second copy that nothing compares (it had no reader)."""
    assert "__version__" not in (REPO / "trainer" / "__init__.py").read_text()
