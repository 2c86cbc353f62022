"""The podman the image tests build, run and push with, configured by ci/podman/containers.conf."""

from __future__ import annotations

import os
import subprocess

from tests.support.paths import REPO

PODMAN_DIR = REPO / "ci" / "podman"


def podman_env() -> dict[str, str]:
    return {**os.environ, "CONTAINERS_CONF": os.environ.get("CONTAINERS_CONF", str(PODMAN_DIR / "containers.conf"))}


def podman(*args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["podman", *args], capture_output=True, text=True, env=podman_env(), check=check, timeout=timeout
    )


def podman_unusable(rootful: bool) -> str | None:
    """Why the installed podman cannot run here (or, with `rootful`, cannot run rootful); None if it can."""
    info = podman("info", "--format", "{{.Host.Security.Rootless}}", check=False)
    if info.returncode != 0 or (rootful and info.stdout.strip() != "false"):
        return f"podman is not usable{' rootful' if rootful else ''}: {info.stderr.strip() or info.stdout.strip()}"
    return None
