"""Render the chart with Helm and pick out the job: the one document of a kind the runner runs (kinds/)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import yaml

from ci.localjob.kinds import KINDS
from ci.localjob.pods import REPO

# Helm's last line on a failed template, naming its own --debug flag, which this runner does not take.
HELM_DEBUG_HINT = "Use --debug flag to render out invalid YAML"


class RenderError(RuntimeError):
    """Helm failed or the rendering holds no single job; the message says which."""


def find_helm(explicit: str | None = None) -> str:
    """--helm, else $HELM (a path or a command on PATH), else $TOOLS_BIN/helm, which ci/install-tools.sh
    links to the Helm it prefers (the pinned 4, else 3, else the one on PATH), else `helm` on PATH."""
    for given, named in ((explicit, "--helm {}"), (os.environ.get("HELM"), "HELM={}")):
        if given:
            found = shutil.which(given)
            if found is None:
                raise RenderError(
                    f"{named.format(given)}: neither a path nor a command on PATH; name an installed "
                    "Helm, or leave it out to use the one `make tools` installs"
                )
            return found
    linked = Path(os.environ.get("TOOLS_BIN") or REPO / ".tools" / "bin") / "helm"
    if linked.exists():
        return str(linked)
    found = shutil.which("helm")
    if found is None:
        raise RenderError("no Helm found: run `make tools`, or pass --helm /path/to/helm")
    return found


def render_job(helm: str, chart: Path, release: str, namespace: str, helm_args: list[str]) -> dict:
    """`helm template` with the user's -f/--set arguments; returns the one job of a kind the runner runs."""
    command = [helm, "template", release, str(chart), "--namespace", namespace, "--skip-tests", *helm_args]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        message = "\n".join(line for line in result.stderr.strip().splitlines() if line != HELM_DEBUG_HINT)
        raise RenderError(f"helm template failed:\n{message.strip()}")
    jobs = [d for d in yaml.safe_load_all(result.stdout) if d and d.get("kind") in KINDS]
    if len(jobs) != 1:
        kinds = " or ".join(sorted(KINDS))
        raise RenderError(f"expected exactly one {kinds} in the rendering of {chart}, found {len(jobs)}")
    return jobs[0]
