"""`make push` (ci/push-image.sh) against a real registry: Debian's docker-registry (the CNCF
distribution registry) on loopback, with rootful podman. The images are tiny imports carrying the
revision label ci/build-image.sh sets (ci/lib.sh's image_revision), so no image build is needed."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.dockerfile import CHECKOUT_FILES, make_checkout, source_revision
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


def push_from(repo: Path, img: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """`repo`'s ci/push-image.sh (what `make push` runs) with podman."""
    return subprocess.run(
        [str(repo / "ci" / "push-image.sh")],
        env={**env, "IMG": img, "CONTAINER_TOOL": "podman"},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_uncommitted_edits_block_only_within_the_images_build_inputs(registry, labelled_image, tmp_path):
    """A chart's values are not in the image: an edit there leaves the build pushable. An edit to trainer/
    makes it -dirty, and make push names the file."""
    _, env = registry
    repo, _ = make_checkout(tmp_path / "repo", CHECKOUT_FILES)
    (repo / "charts/pytorchjob-mnist/values.yaml").write_text("workers: 2\n")
    img = labelled_image(source_revision(repo), "chart-edit")
    pushed = push_from(repo, img, env)
    assert pushed.returncode == 0, pushed.stderr
    assert f"Pushed {img} as sha256:" in pushed.stdout

    (repo / "trainer/cli.py").write_text("main = 1\n")
    img = labelled_image(source_revision(repo), "trainer-edit")
    refused = push_from(repo, img, env)
    assert refused.returncode == 2
    assert "was built from uncommitted edits to its build inputs" in refused.stderr
    assert "uncommitted now: trainer/cli.py)" in refused.stderr and "Pushed" not in refused.stdout


def test_an_earlier_commits_image_is_pushed_while_its_build_inputs_are_heads(registry, labelled_image, tmp_path):
    """Committing a chart edit after `make image` needs no rebuild; committing a trainer edit does, named."""
    _, env = registry
    repo, git = make_checkout(tmp_path / "repo", CHECKOUT_FILES)
    built = source_revision(repo)
    img = labelled_image(built, "earlier")
    (repo / "charts/pytorchjob-mnist/values.yaml").write_text("workers: 2\n")
    subprocess.run([*git, "commit", "-q", "-am", "chart"], check=True)
    pushed = push_from(repo, img, env)
    assert pushed.returncode == 0, pushed.stderr
    assert f"{img} was built from {built}, whose build inputs are the same as HEAD's" in pushed.stdout

    (repo / "trainer/cli.py").write_text("main = 1\n")
    subprocess.run([*git, "commit", "-q", "-am", "trainer"], check=True)
    refused = push_from(repo, img, env)
    assert refused.returncode == 2
    assert "and these build inputs differ: trainer/cli.py. Run make image again." in refused.stderr
