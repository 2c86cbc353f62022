"""ci/lib.sh names the image's build context as an explicit list (BUILD_CONTEXT, BUILD_CONTEXT_EXCLUDED), which
make push's check of uncommitted build inputs rests on; .dockerignore must say the same: exclude everything,
keep exactly those paths, then leave those names out anywhere below them."""

from __future__ import annotations

import subprocess

from tests.support.dockerfile import lib_sh
from tests.support.paths import REPO


def lib_sh_list(name: str) -> list[str]:
    return subprocess.run(
        ["bash", "-c", f'source "{REPO / "ci" / "lib.sh"}" && printf "%s\\n" "${{{name}[@]}}"'],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()


def dockerignore() -> list[str]:
    lines = (line.strip() for line in (REPO / ".dockerignore").read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def test_dockerignore_keeps_exactly_lib_shs_list_and_then_excludes_its_names():
    kept, excluded = lib_sh_list("BUILD_CONTEXT"), lib_sh_list("BUILD_CONTEXT_EXCLUDED")
    assert kept and excluded
    # In this order: a later pattern wins, so the exclusions come after every `!` keep.
    assert dockerignore() == ["*", *(f"!{path}" for path in kept), *(f"**/{name}" for name in excluded)]
    # Each names what is there (docker/wheels/, git-ignored, holds the offline builds' wheels when present).
    for path in (path for path in kept if path != "docker/wheels/"):
        assert (REPO / path).is_dir() if path.endswith("/") else (REPO / path).is_file(), path


def test_the_matcher_keeps_the_listed_paths_and_leaves_the_excluded_names_out():
    paths = {
        "pyproject.toml": True,
        "pyproject.toml.bak": False,
        "README.md": True,
        "docs/README.md": False,
        "trainer/cli.py": True,
        "trainer/sub/deep.py": True,
        "trainer/__pycache__/cli.cpython-311.pyc": False,
        "trainer/stale.pyc": False,
        "trainer/module.pyd": False,
        "trainers/cli.py": False,
        "docker/constraints.txt": True,
        "docker/Dockerfile": False,
        "docker/wheels/torch-2.13.0+cpu-cp311-linux_x86_64.whl": True,
        "charts/pytorchjob-mnist/values.yaml": False,
        ".venv/bin/python": False,
    }
    kept = lib_sh("in_build_context", REPO, stdin="\0".join(paths) + "\0").splitlines()
    assert kept == [path for path, expected in paths.items() if expected]
