"""`make push` (ci/push-image.sh) against a real registry: Debian's docker-registry (the CNCF
distribution registry) on loopback, with rootful podman. The images are tiny imports carrying the
revision label ci/build-image.sh sets, so no image build is needed."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator

import pytest

from tests.support.paths import REPO
from tests.support.podman import podman, podman_env, podman_unusable
from tests.support.registry import MISSING as REGISTRY_MISSING
from tests.support.registry import serve_registry

REVISION_LABEL = "org.opencontainers.image.revision"
HEAD = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


def push_setup_missing() -> str | None:
    if not HEAD:
        return "not a git checkout: make push compares the image's revision label with HEAD"
    if shutil.which("podman") is None:
        return "podman is not installed (apt-get install -y podman runc)"
    if REGISTRY_MISSING:
        return REGISTRY_MISSING
    return podman_unusable(rootful=False)


pytestmark = pytest.mark.skipif(push_setup_missing() is not None, reason=str(push_setup_missing()))


@pytest.fixture(scope="module")
def registry(tmp_path_factory) -> Iterator[tuple[str, dict[str, str]]]:
    """host:port of a registry serving plain HTTP, and an env whose podman may push to it."""
    root = tmp_path_factory.mktemp("registry")
    with serve_registry(root) as host:
        registries = root / "registries.conf"
        registries.write_text(f'[[registry]]\nlocation = "{host}"\ninsecure = true\n')
        try:
            yield host, {**podman_env(), "CONTAINERS_REGISTRIES_CONF": str(registries)}
        finally:
            # The images pushed and pulled back by digest, which removing their tags leaves in the store.
            pushed = podman("images", "--quiet", "--filter", f"reference={host}/*/*", check=False).stdout.split()
            if pushed:
                podman("rmi", "--force", *set(pushed), check=False)


@pytest.fixture
def labelled_image(registry, tmp_path) -> Iterator:
    """Imports an empty image with the given revision label under a tag of the test registry."""
    host, _ = registry
    tags = []

    def make(revision: str, name: str) -> str:
        archive = tmp_path / "empty.tar"
        subprocess.run(["tar", "-cf", str(archive), "--files-from", "/dev/null"], check=True)
        tag = f"{host}/pytorchjob-mnist/{name}:0.1.0-cpu"
        podman("import", "--change", f"LABEL {REVISION_LABEL}={revision}", str(archive), tag)
        tags.append(tag)
        return tag

    yield make
    for tag in tags:
        podman("rmi", "--force", tag, check=False)


def make_push(img: str, env: dict[str, str], **extra: str) -> subprocess.CompletedProcess:
    """`make push IMG=img` with podman, or the CONTAINER_TOOL in `extra`."""
    settings = [f"{key}={value}" for key, value in {"IMG": img, "CONTAINER_TOOL": "podman", **extra}.items()]
    return subprocess.run(["make", "push", *settings], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("tool_name", ["podman", "docker"], ids=["podman", "podman-as-docker"])
def test_pushes_an_image_of_this_commit_and_prints_the_digest_to_pin(registry, labelled_image, tmp_path, tool_name):
    """Also under the name docker, as the podman-docker package installs it (`docker info` answers)."""
    host, env = registry
    img = labelled_image(HEAD, "trainer")  # as make image labels a build of a clean checkout
    tool = tmp_path / tool_name
    tool.write_text(f'#!/bin/sh\nexec {shutil.which("podman")} "$@"\n')
    tool.chmod(0o755)
    result = make_push(img, env, CONTAINER_TOOL=str(tool))
    assert result.returncode == 0, result.stderr
    pushed = re.search(rf"^Pushed {re.escape(img)} as (sha256:[0-9a-f]{{64}})\.$", result.stdout, re.M)
    assert pushed, result.stdout
    digest = pushed.group(1)
    assert f"--set image.digest={digest}" in result.stdout
    # The printed digest is the registry's (a push may convert the manifest): it pulls by it.
    pulled = subprocess.run(
        ["podman", "pull", f"{host}/pytorchjob-mnist/trainer@{digest}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert pulled.returncode == 0, pulled.stderr


@pytest.mark.parametrize(
    ("revision", "reason"),
    [
        ("0123456789abcdef0123456789abcdef01234567-dirty", "was built from uncommitted edits"),
        ("0123456789abcdef0123456789abcdef01234567", "not this checkout's HEAD"),
    ],
)
def test_refuses_an_image_of_other_sources_and_names_the_override(registry, labelled_image, revision, reason):
    _, env = registry
    img = labelled_image(revision, "stale")
    result = make_push(img, env)
    assert result.returncode != 0
    assert reason in result.stderr
    assert "make image again" in result.stderr and "ALLOW_UNCOMMITTED=1" in result.stderr
    assert "Pushed" not in result.stdout
    assert make_push(img, env, ALLOW_UNCOMMITTED="0").returncode != 0, "only 1 overrides"
    forced = make_push(img, env, ALLOW_UNCOMMITTED="1")
    assert forced.returncode == 0, forced.stderr
    assert f"Pushed {img} as sha256:" in forced.stdout


def test_refuses_a_missing_image_with_the_build_command(registry):
    host, env = registry
    result = make_push(f"{host}/pytorchjob-mnist/never-built:0.1.0-cpu", env)
    assert result.returncode != 0
    assert "There is no local image" in result.stderr and "make image" in result.stderr
