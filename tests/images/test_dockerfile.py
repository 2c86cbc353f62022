"""What docker/Dockerfile promises about layer caching and the runtime environment, read from the file
itself (no build): these hold for docker and podman alike and run everywhere."""

from __future__ import annotations

import re

import tomllib
from packaging.requirements import Requirement

from tests.support.dockerfile import DOCKERFILE, copies, env, runtime_env, runtime_user, stages
from tests.support.paths import REPO


def test_the_dependency_install_sees_only_the_requirement_list():
    """A pyproject.toml edit that keeps the dependencies (a version bump) must leave the dependency
    install cached: re-run, it rewrites the runtime's 0.8-4 GB venv layer (pip stamps install-time mtimes),
    which every node then pulls again. So the stages that build /opt/venv copy nothing from the build
    context; the list comes from a stage that reads pyproject.toml."""
    all_stages = stages()
    runtime = list(all_stages)[-1]
    venv_sources = [source for source, arguments in copies(all_stages[runtime][1]) if "/opt/venv" in arguments]
    assert venv_sources and venv_sources[0] in all_stages, "the runtime copies /opt/venv from a build stage"
    chain, name = [], venv_sources[0]
    while name in all_stages:  # the venv's stage and the stages it is built FROM
        chain.append(name)
        name = all_stages[name][0]
    from_context = [
        (stage, arguments) for stage in chain for source, arguments in copies(all_stages[stage][1]) if source is None
    ]
    assert not from_context, f"stages building /opt/venv copy from the build context: {from_context}"
    lists = [
        source for stage in chain for source, arguments in copies(all_stages[stage][1]) if "requirements" in arguments
    ]
    assert lists, "the venv's stages copy the requirement list from another stage"
    assert any("pyproject.toml" in arguments for _, arguments in copies(all_stages[lists[0]][1])), (
        f"stage {lists[0]} derives the list from pyproject.toml"
    )


def test_the_images_other_packages_are_pinned_within_pyprojects_ranges():
    """Two builds of one commit get the same numpy, tensorboardX… and digits file (from scikit-learn's wheel,
    pyproject's `digits` extra); torch comes from build args."""
    pins = dict(
        re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)$", (REPO / "docker" / "constraints.txt").read_text(), re.MULTILINE)
    )
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    dependencies = [Requirement(d) for d in (*project["dependencies"], *project["optional-dependencies"]["digits"])]
    for requirement in dependencies:
        if requirement.name in ("torch", "torchvision"):
            continue
        assert requirement.name in pins, f"docker/constraints.txt does not pin {requirement.name}"
        assert requirement.specifier.contains(pins[requirement.name]), (
            f"{requirement.name}=={pins[requirement.name]} is outside {requirement}"
        )
    installs = [line for line in (REPO / "docker" / "Dockerfile").read_text().split("RUN ") if "--requirement" in line]
    assert len(installs) == 1 and "--constraint /tmp/constraints.txt" in installs[0]
    assert "!docker/constraints.txt" in (REPO / ".dockerignore").read_text().splitlines()


def test_the_runtime_env_suits_gpu_nodes_and_a_read_only_root():
    all_stages = stages()
    runtime = runtime_env()
    # GKE's device plugin mounts the driver libraries here without ldconfig (PyTorch's images set the same).
    assert {"/usr/local/nvidia/lib", "/usr/local/nvidia/lib64"} <= set(runtime["LD_LIBRARY_PATH"].split(":"))
    assert set(runtime["NVIDIA_DRIVER_CAPABILITIES"].split(",")) == {"compute", "utility"}
    assert not any("NVIDIA_VISIBLE_DEVICES" in env(steps) for _, steps in all_stages.values()), (
        "the device plugin chooses the GPUs; an image default would expose all of them where no plugin runs"
    )
    # CUDA's JIT cache defaults to $HOME/.nv, read-only under the chart: it belongs in the cache volume.
    assert runtime["CUDA_CACHE_PATH"].startswith(runtime["XDG_CACHE_HOME"] + "/")


def test_the_image_runs_as_a_user_no_host_account_takes():
    """Numeric (runAsNonRoot can check it) and above 10000, clear of the UIDs hosts give their own users: a
    process with a host user's UID acts as that user on whatever host files it reaches (a hostPath volume)."""
    uid, gid = runtime_user()
    assert uid > 10000 and gid > 10000


def test_the_default_base_image_is_pinned_by_digest():
    """A rebuild of one commit starts from the same base, whatever the tag points at later."""
    (default,) = re.findall(r"^ARG BASE_IMAGE=(\S+)$", DOCKERFILE.read_text(), re.MULTILINE)
    assert re.fullmatch(r"docker\.io/library/python:3\.11-slim-bookworm@sha256:[0-9a-f]{64}", default)
