"""Where the tests find the repository and its two charts."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OPERATOR_CHART = REPO / "charts" / "training-operator"
WORKLOAD_CHART = REPO / "charts" / "pytorchjob-mnist"
