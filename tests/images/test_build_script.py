"""ci/build-image.sh (what `make image` runs) with a stand-in container tool that records its arguments."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import tarfile
import uuid
from pathlib import Path

import pytest

from tests.support.dockerfile import CHECKOUT_FILES, lib_sh, make_checkout, source_revision
from tests.support.paths import REPO
from tests.support.podman import podman, podman_unusable
from tests.support.version import PROJECT_VERSION

BUILD_SCRIPT = REPO / "ci" / "build-image.sh"


def make_recording_tool(
    directory: Path, name: str, buildx: bool = True, version: str = "Docker version 27.5.1"
) -> tuple[Path, Path]:
    """A container tool that records a build's arguments; `buildx version` answers as `buildx` says,
    and `--version` with `version`."""
    record = directory / "args"
    tool = directory / name
    tool.write_text(
        f'#!/bin/sh\nif [ "$1 $2" = "buildx version" ]; then exit {0 if buildx else 1}; fi\n'
        f'if [ "$1" = "--version" ]; then echo "{version}"; exit 0; fi\n'
        f'printf "%s\\n" "$@" > "{record}"\n'
    )
    tool.chmod(0o755)
    return tool, record


@pytest.fixture
def recording_tool(tmp_path: Path) -> tuple[Path, Path]:
    return make_recording_tool(tmp_path, "fake-docker")


@pytest.fixture
def recording_podman(tmp_path: Path) -> tuple[Path, Path]:
    return make_recording_tool(tmp_path, "fake-podman")


def build(tool: Path, *extra: str, script: Path = BUILD_SCRIPT, **env: str) -> subprocess.CompletedProcess:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in {"VARIANT", "IMG", "PLATFORMS", "VERSION", "REVISION", "CREATED", "GITHUB_REPOSITORY"}
    }
    return subprocess.run(
        [str(script), *extra], capture_output=True, text=True, env={**clean, "CONTAINER_TOOL": str(tool), **env}
    )


def test_passes_variant_labels_and_context(recording_tool):
    tool, record = recording_tool
    result = build(
        tool,
        "--build-arg",
        "BASE_IMAGE=debian:bookworm",
        IMG="example.com/trainer:1-cuda",
        VARIANT="cuda",
        SOURCE_DATE_EPOCH="1700000000",
    )
    assert result.returncode == 0, result.stderr
    args = record.read_text().splitlines()
    # buildx build, not build: only it honours the builder `docker buildx use` selected.
    assert args[:2] == ["buildx", "build"] and args[-1] == str(REPO), "context is the repository root"
    assert "--load" in args, "a docker-container builder's result must reach the engine for `make push`"
    pairs = list(itertools.pairwise(args))
    assert ("--file", str(REPO / "docker" / "Dockerfile")) in pairs
    assert ("--tag", "example.com/trainer:1-cuda") in pairs
    build_args = {b for a, b in pairs if a == "--build-arg"}
    assert {"VARIANT=cuda", "BASE_IMAGE=debian:bookworm"} <= build_args
    # Labels, not build args: buildah's cache would keep a previous build's LABEL values.
    labels = dict(b.split("=", 1) for a, b in pairs if a == "--label")
    assert labels == {
        "org.opencontainers.image.version": PROJECT_VERSION,
        "org.opencontainers.image.revision": source_revision(),
        "org.opencontainers.image.created": "2023-11-14T22:13:20Z",
        "org.opencontainers.image.base.name": "debian:bookworm",
    }
    assert "--platform" not in args, "no PLATFORMS: build for the host"


def test_a_fork_built_in_github_actions_labels_its_own_repository(recording_tool):
    tool, record = recording_tool
    assert (
        build(tool, IMG="t:cpu", GITHUB_REPOSITORY="someone/fork", GITHUB_SERVER_URL="https://github.com").returncode
        == 0
    )
    args = record.read_text().splitlines()
    labels = dict(b.split("=", 1) for a, b in itertools.pairwise(args) if a == "--label")
    assert labels["org.opencontainers.image.source"] == "https://github.com/someone/fork"
    assert (
        labels["org.opencontainers.image.documentation"] == "https://github.com/someone/fork/blob/main/docker/README.md"
    )


def test_the_revision_label_marks_uncommitted_edits_to_the_build_inputs_only(tmp_path, recording_tool):
    """-dirty, and a refused --push naming the files, for edits the image would hold (the build context that
    .dockerignore leaves, and the Dockerfile); none for a chart's values, which the image never contains."""
    tool, record = recording_tool
    repo, git = make_checkout(tmp_path / "repo", CHECKOUT_FILES)
    script = repo / "ci" / BUILD_SCRIPT.name
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()

    def revision_label() -> str:
        result = build(tool, script=script, IMG="t:cpu")
        assert result.returncode == 0, result.stderr
        args = record.read_text().splitlines()
        return next(
            b.split("=", 1)[1]
            for a, b in itertools.pairwise(args)
            if b.startswith("org.opencontainers.image.revision=")
        )

    assert revision_label() == commit
    (repo / "charts/pytorchjob-mnist/values.yaml").write_text("workers: 2\n")
    (repo / "charts/pytorchjob-mnist/new-values.yaml").write_text("workers: 3\n")
    assert revision_label() == commit, "chart edits are not in the image"
    assert build(tool, "--push", script=script, IMG="t:cpu").returncode == 0

    for edit in ("trainer/cli.py", "trainer/new.py", "docker/Dockerfile"):
        (repo / edit).write_text("changed = True\n")
        assert revision_label() == commit + "-dirty", edit
        noted = build(tool, script=script, IMG="t:cpu")
        assert f"Building uncommitted edits to the image's build inputs ({edit})" in noted.stderr
        refused = build(tool, "--push", script=script, IMG="t:cpu")
        assert refused.returncode == 2, refused.stderr
        assert f"--push would publish uncommitted edits to the image's build inputs: {edit}." in refused.stderr
        assert build(tool, "--push", script=script, IMG="t:cpu", ALLOW_UNCOMMITTED="1").returncode == 0
        subprocess.run([*git, "checkout", "-q", "--", "."], check=True)
        (repo / "trainer/new.py").unlink(missing_ok=True)
    (repo / "trainer/cli.py").unlink()
    assert revision_label() == commit + "-dirty", "a deleted input is an edit too"


def context_kept_by_podman(context: Path, scratch: Path) -> set[str]:
    """The files a podman build with `context` receives: what `COPY . /context/` puts in an image."""
    containerfile = scratch / "Containerfile"
    containerfile.write_text("FROM scratch\nCOPY . /context/\n")
    tag = f"localhost/context-probe:{uuid.uuid4().hex[:8]}"
    podman("build", "--quiet", "--file", str(containerfile), "--tag", tag, str(context))
    try:
        container = podman("create", tag, "/none").stdout.strip()
        try:
            archive = scratch / "context.tar"
            podman("export", "--output", str(archive), container)
            with tarfile.open(archive) as tar:
                return {
                    m.name.removeprefix("context/")
                    for m in tar.getmembers()
                    if not m.isdir() and m.name.startswith("context/")
                }
        finally:
            podman("rm", container, check=False)
    finally:
        podman("rmi", tag, check=False)


@pytest.mark.skipif(shutil.which("podman") is None, reason="podman is not installed: it decides the build context")
def test_the_build_inputs_are_the_context_podman_sends(tmp_path):
    """ci/lib.sh's build context (its explicit list, which tests/images/test_build_context.py compares with
    .dockerignore), which make push's check rests on, against buildah's reading of .dockerignore."""
    if reason := podman_unusable(rootful=False):
        pytest.skip(reason)
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others"], capture_output=True, check=True
    )
    # The virtualenvs' tens of thousands of files would take ci/lib.sh's matcher most of a minute; they
    # stay covered, as podman's side holds them too if .dockerignore ever lets one in.
    files = [
        name
        for name in listed.stdout.decode().split("\0")
        if name and not name.startswith(".venv") and (REPO / name).is_file()
    ]
    kept = set(lib_sh("in_build_context", REPO, stdin="\0".join(files) + "\0").splitlines())
    assert kept == context_kept_by_podman(REPO, tmp_path)


def test_podman_is_told_how_to_publish_instead_of_push(recording_podman):
    """`--push` is buildx's; podman would fail on it after the whole build setup."""
    tool, record = recording_podman
    for flags in (["--push"], ["--push", "--manifest", "m"]):
        result = build(tool, *flags, IMG="t:cpu", PLATFORMS="linux/amd64,linux/arm64")
        assert result.returncode == 2 and "--manifest <name>" in result.stderr, flags
        assert not record.exists(), "refused before building"


def test_platforms(recording_tool):
    tool, record = recording_tool
    # A committed revision, whatever state this checkout is in: --push refuses uncommitted edits.
    pushed = build(tool, "--push", IMG="t:cpu", PLATFORMS="linux/amd64,linux/arm64", REVISION="0" * 40)
    assert pushed.returncode == 0, pushed.stderr
    args = record.read_text().splitlines()
    assert args[args.index("--platform") + 1] == "linux/amd64,linux/arm64"
    assert "--load" not in args, "a pushed build is not loaded"


def test_podman_builds_with_plain_build_into_a_manifest(recording_podman):
    tool, record = recording_podman
    result = build(tool, "--manifest", "t:multi", IMG="t:cpu", PLATFORMS="linux/amd64,linux/arm64")
    assert result.returncode == 0, result.stderr
    args = record.read_text().splitlines()
    assert args[0] == "build" and "--load" not in args
    assert ("--manifest", "t:multi") in list(itertools.pairwise(args))
    assert "--tag" not in args, "a local t:cpu would hold one platform, which make push would publish as all"


def test_podman_answering_as_docker_builds_with_plain_build(tmp_path):
    """The podman-docker package's `docker` is podman, which has no buildx."""
    tool, record = make_recording_tool(tmp_path, "docker", buildx=False, version="podman version 4.3.1")
    result = build(tool, IMG="example.com/trainer:1-cpu")
    assert result.returncode == 0, result.stderr
    args = record.read_text().splitlines()
    assert args[0] == "build" and "--load" not in args


def test_docker_without_buildx_is_refused_naming_the_plugin(tmp_path):
    tool, record = make_recording_tool(tmp_path, "fake-docker", buildx=False)
    result = build(tool, IMG="t:cpu")
    assert result.returncode == 2 and "docker buildx is not installed" in result.stderr
    assert "docker-buildx-plugin" in result.stderr and not record.exists()


@pytest.mark.parametrize("tool_fixture, hint", [("recording_tool", "--push"), ("recording_podman", "--manifest")])
def test_several_platforms_without_a_destination_are_refused(request, tool_fixture, hint):
    tool, record = request.getfixturevalue(tool_fixture)
    result = build(tool, IMG="t:cpu", PLATFORMS="linux/amd64,linux/arm64")
    assert result.returncode == 2 and "one image per platform" in result.stderr and hint in result.stderr
    assert not record.exists(), "the container tool must not run"


@pytest.mark.parametrize(
    "env, message",
    [
        ({"IMG": "t:gpu", "VARIANT": "gpu"}, "VARIANT must be cpu or cuda, got 'gpu'"),
        ({}, "IMG is not set"),
    ],
)
def test_bad_input_is_refused_before_building(recording_tool, env, message):
    tool, record = recording_tool
    result = build(tool, **env)
    assert result.returncode == 2 and message in result.stderr
    assert not record.exists(), "the container tool must not run"
