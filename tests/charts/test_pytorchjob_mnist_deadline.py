"""runPolicy.activeDeadlineSeconds with cleanPodPolicy None: the training-operator v1.9.4 leaves the
pods of a job its deadline failed running, so NOTES warns and suggests `Running`."""

from __future__ import annotations

import pytest

from tests.support.helm import notes_preview_chart, render_notes
from tests.support.paths import WORKLOAD_CHART

WARNING = "runPolicy.activeDeadlineSeconds is set with runPolicy.cleanPodPolicy None"


@pytest.fixture(scope="module")
def notes_chart(tmp_path_factory):
    return notes_preview_chart(WORKLOAD_CHART, tmp_path_factory.mktemp("notes"))


@pytest.fixture
def notes(helm, notes_chart):
    """NOTES of `helm install mnist -n ml` with these extra flags."""
    return lambda *args: render_notes(helm, notes_chart, release="mnist", namespace="ml", extra=args)


def test_a_deadline_with_clean_pod_policy_none_warns_and_suggests_running(notes):
    text = notes("--set", "runPolicy.activeDeadlineSeconds=7200", "--set", "runPolicy.cleanPodPolicy=None")
    assert WARNING in text
    assert "Set runPolicy.cleanPodPolicy=Running" in text
    assert "only when the job or its pods change" in text, "it says the deadline is checked late"


@pytest.mark.parametrize(
    "flags",
    [
        (),  # no deadline, the default cleanPodPolicy None
        ("--set", "runPolicy.activeDeadlineSeconds=7200", "--set", "runPolicy.cleanPodPolicy=Running"),
        ("--set", "runPolicy.activeDeadlineSeconds=7200", "--set", "runPolicy.cleanPodPolicy=All"),
    ],
    ids=["no-deadline", "running", "all"],
)
def test_no_warning_without_a_deadline_or_with_pods_cleaned(notes, flags):
    assert WARNING not in notes(*flags)
