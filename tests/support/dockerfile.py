"""docker/Dockerfile read as stages and instructions, for tests that check what it promises without a build,
and the revision label ci/build-image.sh gives what it builds (ci/lib.sh)."""

from __future__ import annotations

import re
import shutil
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


def runtime_user() -> tuple[int, int]:
    """The runtime stage's numeric USER, as (UID, GID)."""
    (user,) = [arguments for keyword, arguments in list(stages().values())[-1][1] if keyword == "USER"]
    uid, gid = user.split(":")
    return int(uid), int(gid)


def source_revision(repo: Path = REPO) -> str:
    """The revision label ci/build-image.sh gives a build of `repo` now (ci/lib.sh's image_revision): the
    commit, with -dirty when the image's build inputs have uncommitted edits; "unknown" outside git."""
    return lib_sh("image_revision", repo).strip()


def lib_sh(function: str, repo: Path, stdin: str | None = None) -> str:
    """The output of ci/lib.sh's `function` for `repo`, fed `stdin`."""
    return subprocess.run(
        ["bash", "-c", f'source "{REPO / "ci" / "lib.sh"}" && {function} "$1"', "lib.sh", str(repo)],
        input=stdin,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def make_checkout(directory: Path, files: dict[str, str]) -> tuple[Path, list[str]]:
    """A git checkout at `directory` with ci/build-image.sh, ci/push-image.sh, ci/lib.sh, the repository's
    .dockerignore and `files` (path -> content), all committed; returns it and its git command line."""
    for script in ("build-image.sh", "push-image.sh", "lib.sh"):
        target = directory / "ci" / script
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / "ci" / script, target)
    shutil.copy(REPO / ".dockerignore", directory)
    for name, content in files.items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text(content)
    git = ["git", "-C", str(directory), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    for command in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "c"]):
        subprocess.run([*git, *command], check=True)
    return directory, git


# Build inputs (pyproject.toml, trainer/, the Dockerfile) and a file the image never holds (a chart's values).
CHECKOUT_FILES = {
    "pyproject.toml": 'version = "1.2.3"\n',
    "trainer/cli.py": "main = None\n",
    "charts/pytorchjob-mnist/values.yaml": "workers: 1\n",
    "docker/Dockerfile": "FROM scratch\n",
}
