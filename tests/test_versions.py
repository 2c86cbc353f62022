"""One release number: `make image` tags <pyproject version>-<variant>, and the workload chart's
default image tag is <appVersion>-<variant>, so they must agree or the default image is missing."""
import re

import yaml

import trainer
from tests.support.paths import REPO, WORKLOAD_CHART


def test_pyproject_trainer_and_chart_app_version_agree():
    pyproject = re.search(r'^version = "(.+)"$', (REPO / "pyproject.toml").read_text(), re.M).group(1)
    chart = yaml.safe_load((WORKLOAD_CHART / "Chart.yaml").read_text())
    assert trainer.__version__ == pyproject == chart["appVersion"]
