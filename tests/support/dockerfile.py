"""docker/Dockerfile read as stages and instructions, for tests that check what it promises without a build,
and the revision label ci/build-image.sh gives what it builds."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.support.paths import REPO

DOCKERFILE = REPO / "docker" / "Dockerfile"


def stages() -> dict[str, tuple[str, list[tuple[str, str]]]]:
    """Stage name -> (its FROM, its instructions as (KEYWORD, arguments)), in file order."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    result: dict[str, tuple[str, list[tuple[str, str]]]] = {}
    current: list[tuple[str, str]] | None = None
    for line in (raw.strip() for raw in text.splitlines()):
        if not line or line.startswith("#"):
            continue
        keyword, _, arguments = line.partition(" ")
        if keyword.upper() == "FROM":
            base, *alias = re.sub(r"--\S+\s+", "", arguments).split()
            current = []
            result[alias[-1] if alias else f"stage-{len(result)}"] = (base, current)
        elif current is not None:
            current.append((keyword.upper(), arguments.strip()))
    return result


def copies(steps: list[tuple[str, str]]) -> list[tuple[str | None, str]]:
    """(source stage or None for the build context, arguments) of every COPY/ADD."""
    found = []
    for keyword, arguments in steps:
        if keyword in {"COPY", "ADD"}:
            source = re.search(r"--from=(\S+)", arguments)
            found.append((source.group(1) if source else None, arguments))
    return found


def env(steps: list[tuple[str, str]]) -> dict[str, str]:
    return dict(word.split("=", 1) for keyword, arguments in steps if keyword == "ENV" for word in arguments.split())


def runtime_env() -> dict[str, str]:
    """The ENV of the last (runtime) stage."""
    return env(list(stages().values())[-1][1])


def source_revision(repo: Path = REPO) -> str:
    """The commit checked out, with -dirty when tracked files differ from it; "unknown" outside git."""
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        return "unknown"
    changed = subprocess.run(["git", "-C", str(repo), "diff", "--quiet", "HEAD"]).returncode != 0
    return head.stdout.strip() + ("-dirty" if changed else "")
