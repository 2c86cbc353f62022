"""Fast rendering: parse `helm template` output with libyaml (the CRD alone is ~380 KB of YAML,
which the pure-Python parser needs over a second for)."""
from __future__ import annotations

from pathlib import Path

import yaml

from tests.support.helm import Helm

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def render_documents(helm: Helm, chart: str | Path, **template_kwargs) -> list[dict]:
    """Like Helm.render (same arguments), with the C YAML parser when PyYAML has it."""
    result = helm.template(chart, **template_kwargs)
    if result.returncode != 0:
        raise AssertionError(f"{helm.name} template failed:\n{result.stderr}")
    return [doc for doc in yaml.load_all(result.stdout, Loader=_Loader) if doc]
