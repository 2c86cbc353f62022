"""The OCI metadata of a pushed image: ci/build-image.sh labels the base image's name and digest apart,
and a buildx push annotates the image index with every label, which is what GHCR shows for a multi-arch
image (it reads no platform's labels)."""

from __future__ import annotations

import itertools
import re

from tests.images.test_build_script import build, make_recording_tool
from tests.support.paths import REPO

DOCKERFILE = REPO / "docker" / "Dockerfile"
(DEFAULT_BASE,) = re.findall(r"^ARG BASE_IMAGE=(\S+)$", DOCKERFILE.read_text(), re.M)


def recorded(tmp_path, *flags: str, **env: str) -> tuple[dict[str, str], dict[str, str]]:
    """The labels and the index annotations of a build, each as key (without the OCI prefix) to value."""
    tool, record = make_recording_tool(tmp_path, "fake-docker")
    result = build(tool, *flags, IMG="example.com/trainer:1-cuda", VARIANT="cuda", **env)
    assert result.returncode == 0, result.stderr
    pairs = list(itertools.pairwise(record.read_text().splitlines()))
    prefix = "org.opencontainers.image."

    def collect(flag: str, strip: str) -> dict[str, str]:
        items = (b.removeprefix(strip).split("=", 1) for a, b in pairs if a == flag and b.startswith(strip))
        return {key.removeprefix(prefix): value for key, value in items}

    return collect("--label", prefix), collect("--annotation", "index:")


def test_the_base_images_name_and_digest_are_labels_of_their_own(tmp_path):
    labels, annotations = recorded(tmp_path)
    name, digest = DEFAULT_BASE.split("@")
    assert labels["base.name"] == name and "@" not in name
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", labels["base.digest"]) and labels["base.digest"] == digest
    assert annotations == {}, "only a pushed index is annotated"
    undigested, _ = recorded(tmp_path, "--build-arg", "BASE_IMAGE=localhost/base:offline")
    assert undigested["base.name"] == "localhost/base:offline" and "base.digest" not in undigested


def test_a_buildx_push_annotates_the_index_with_every_label(tmp_path):
    labels, annotations = recorded(tmp_path, "--push", ALLOW_UNCOMMITTED="1", GITHUB_REPOSITORY="someone/fork")
    static = dict(re.findall(r'org\.opencontainers\.image\.([a-z.]+)="([^"]*)"', DOCKERFILE.read_text()))
    assert {"description", "licenses", "source"} <= static.keys(), "what GHCR reads"
    assert annotations["description"] == static["description"].replace("${VARIANT}", "cuda")
    assert annotations["licenses"] == static["licenses"]
    assert annotations["source"] == "https://github.com/someone/fork", "the fork's own, as its labels"
    assert annotations == {**{k: v.replace("${VARIANT}", "cuda") for k, v in static.items()}, **labels}
    assert {"version", "revision", "created", "base.name", "base.digest"} <= annotations.keys()
