"""One release number: `make image` tags <pyproject version>-<variant>, and the workload chart's
default image tag is <appVersion>-<variant>, so they must agree or the default image is missing."""

import yaml

import trainer
from tests.support.paths import WORKLOAD_CHART
from tests.support.version import PROJECT_VERSION


def test_pyproject_trainer_and_chart_app_version_agree():
    chart = yaml.safe_load((WORKLOAD_CHART / "Chart.yaml").read_text())
    assert trainer.__version__ == PROJECT_VERSION == chart["appVersion"]
