"""The Makefile runs from the repository only: its paths are relative to it."""

from __future__ import annotations

import ast
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from tests.support.paths import REPO

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="GNU make is not installed")


def test_make_from_another_directory_stops_before_any_recipe(tmp_path):
    """`make -f <repo>/Makefile clean` from elsewhere would delete that directory's build/."""
    (tmp_path / "build").mkdir()
    result = subprocess.run(
        ["make", "-f", str(REPO / "Makefile"), "clean"], cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 2
    assert f"run make in {REPO.resolve()}, or as make -C {REPO.resolve()}" in result.stderr
    assert (tmp_path / "build").is_dir()


def test_make_dash_c_runs_from_anywhere(tmp_path):
    result = subprocess.run(["make", "-C", str(REPO), "help"], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "Run every test that can run on this machine" in result.stdout


def test_make_runs_in_a_checkout_whose_path_has_spaces(tmp_path):
    """make splits paths at spaces: a guard built on $(realpath $(CURDIR)) refused every target there."""
    checkout = tmp_path / "My Projects" / "pytorchjob-mnist"
    checkout.mkdir(parents=True)
    for name in ("Makefile", "ci/install-tools.sh"):
        (checkout / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, checkout / name)
    result = subprocess.run(["make", "help"], cwd=checkout, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "Run every test that can run on this machine" in result.stdout


def test_the_dev_venv_refuses_a_python_older_than_3_11(tmp_path):
    """The tests read TOML with tomllib (3.11); on 3.10, pytest would stop at collection instead."""
    checkout = tmp_path / "checkout"
    for name in ("Makefile", "ci/install-tools.sh", "pyproject.toml"):
        (checkout / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, checkout / name)
    # A Python 3.10 stand-in: this interpreter, reporting 3.10 to the version check.
    python310 = tmp_path / "python3.10"
    python310.write_text(
        f'#!/bin/sh\nexec {sys.executable} -c "import sys; sys.version_info = (3, 10, 14); '
        f'sys.version = \'3.10.14\'; exec(sys.argv[1])" "$2"\n'
    )
    python310.chmod(0o755)
    result = subprocess.run(["make", "venv", f"PYTHON={python310}"], cwd=checkout, capture_output=True, text=True)
    assert result.returncode == 2
    assert "the dev venv needs Python 3.11 or newer, and" in result.stderr and "is 3.10.14" in result.stderr
    assert not (checkout / ".venv").exists()


def test_offline_images_get_the_release_name_only_when_asked():
    """An offline CPU image cannot load torchvision: under make image's release name by default,
    a later `make push` would publish it as the release's image."""

    def offline_build(*args: str, **env: str) -> str:
        result = subprocess.run(
            ["make", "-n", "image-offline", *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            env={k: v for k, v in os.environ.items() if k != "IMG"} | env,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    assert "IMG=" not in offline_build(), "build-offline.sh's own localhost/...:dev-<variant> applies"
    assert "IMG=registry.example.com/ml/trainer:dev" in offline_build("IMG=registry.example.com/ml/trainer:dev")
    assert "IMG=registry.example.com/ml/trainer:env" in offline_build(IMG="registry.example.com/ml/trainer:env")


# The chart targets and the script each runs: they must build no torch venv (issue 30).
CHART_TARGETS = {"docs": "ci/values_docs.py", "crds": "ci/gen_crd.py"}


def dependency_group(name: str) -> set[str]:
    """The project names a pyproject dependency group installs, include-group entries expanded."""
    groups = tomllib.loads((REPO / "pyproject.toml").read_text())["dependency-groups"]
    names = set()
    for entry in groups[name]:
        names |= dependency_group(entry["include-group"]) if isinstance(entry, dict) else {canonical(entry)}
    return names


def canonical(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0]).lower()


def third_party_imports(script: Path) -> set[str]:
    tree = ast.parse(script.read_text())
    modules = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    modules |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level == 0}
    return {m.split(".")[0] for m in modules} - set(sys.stdlib_module_names) - {"__future__"}


@pytest.mark.parametrize("target", CHART_TARGETS)
def test_chart_targets_install_their_dependency_group_and_no_torch(tmp_path, target):
    """`make docs` in a fresh clone must not build the 5.5 GB dev venv: its recipe, as make would run it
    with neither venv present, installs one pyproject dependency group into the chart venv."""
    chart_venv, dev_venv = tmp_path / "charts-venv", tmp_path / "dev-venv"
    result = subprocess.run(
        ["make", "-n", target, f"CHART_VENV={chart_venv}", f"VENV={dev_venv}"], cwd=REPO, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    commands = result.stdout
    assert f"{chart_venv}/bin/python {CHART_TARGETS[target]}" in commands.splitlines()
    assert str(dev_venv) not in commands and "torch" not in commands and "[test]" not in commands, commands
    [group] = re.findall(r"pip install --quiet --group (\S+)$", commands, re.M)
    # Every third-party module the script imports comes from that group (trainer and torch would not).
    installed_by = importlib.metadata.packages_distributions()
    for module in sorted(third_party_imports(REPO / CHART_TARGETS[target])):
        distributions = {canonical(d) for d in installed_by.get(module, [f"<{module}: not installed here>"])}
        assert distributions & dependency_group(group), (
            f"{CHART_TARGETS[target]} imports {module} ({', '.join(sorted(distributions))}), "
            f"which dependency group {group} in pyproject.toml does not install"
        )


def test_the_dev_venv_installs_what_the_chart_scripts_import():
    """The tests run ci/values_docs.py and ci/gen_crd.py in the dev venv."""
    recipe = subprocess.run(["make", "-n", "venv", "VENV=/nonexistent/venv"], cwd=REPO, capture_output=True, text=True)
    assert recipe.returncode == 0, recipe.stderr
    assert "-e '.[test]' --group chart-crds" in recipe.stdout
    assert dependency_group("chart-docs") <= dependency_group("chart-crds")
