#!/usr/bin/env bash
# Build the trainer image with rootful podman on a host that has no container registry and no
# download.pytorch.org, but has PyPI and a CPU torch wheel on disk (this project's sandbox):
#   - base image: a debootstrapped bookworm (ci/podman/offline-base.sh) instead of python:3.11-slim-bookworm;
#   - cpu: torch is the local CPU wheel, hard-linked into docker/wheels/ (git-ignored) for the build,
#     which the Dockerfile prefers to any index; everything else comes from PyPI;
#   - cuda: everything comes from PyPI, whose Linux torch wheels carry CUDA (several GB).
#
#   [VARIANT=cpu|cuda] [IMG=localhost/pytorchjob-mnist/trainer:dev-<variant>] ci/podman/build-offline.sh [--build-arg K=V ...]
#   TORCH_WHEEL=/path/torch-X+cpu-...whl      (cpu; default: the newest /opt/wheels/torch-*+cpu-*.whl)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
export CONTAINERS_CONF="${CONTAINERS_CONF:-$here/containers.conf}"
variant="${VARIANT:-cpu}"
image="${IMG:-localhost/pytorchjob-mnist/trainer:dev-$variant}"

cleanup=()
trap 'rm -f "${cleanup[@]}"' EXIT
variant_args=()
case "$variant" in
  cpu)
    wheel="${TORCH_WHEEL:-$(find /opt/wheels -maxdepth 1 -name 'torch-*+cpu-*.whl' 2>/dev/null | sort -V | tail -n 1)}"
    if [[ -z "$wheel" || ! -f "$wheel" ]]; then
      echo "no CPU torch wheel found: set TORCH_WHEEL=/path/to/torch-<version>+cpu-<tags>.whl" >&2
      exit 2
    fi
    # torch-2.13.0+cpu-cp311-... -> 2.13.0; the Dockerfile pins torch==TORCH_VERSION, which the +cpu wheel satisfies.
    torch_version=$(basename "$wheel" | sed -n 's/^torch-\([0-9.]*\)+cpu-.*/\1/p')
    staged="$repo/docker/wheels/$(basename "$wheel")"
    if [[ ! -e "$staged" ]]; then
      # Staged for this build only: left behind, it would satisfy a later cuda build's torch pin.
      cleanup+=("$staged")
      ln "$wheel" "$staged" 2>/dev/null || cp "$wheel" "$staged"
    fi
    # Each torchvision release requires one torch release: since torch 2.1, torch 2.M.P pairs with
    # torchvision 0.(M+15).P (2.13.0 with 0.28.0).
    IFS=. read -r _ torch_minor torch_patch <<<"$torch_version"
    torchvision_version="0.$((torch_minor + 15)).${torch_patch:-0}"
    # PyTorch's CPU index is unreachable here: ask PyPI for torch (the local +cpu wheel outranks PyPI's
    # CUDA build of the same version) and for the matching torchvision.
    variant_args=(--build-arg "TORCH_VERSION=$torch_version" --build-arg "TORCHVISION_VERSION=$torchvision_version"
                  --build-arg "TORCH_INDEX_URL=https://pypi.org/simple")
    ;;
  cuda) ;;
  *) echo "VARIANT must be cpu or cuda, got '$variant'" >&2; exit 2 ;;
esac

base_image=$("$here/offline-base.sh")
# This sandbox reaches PyPI through a TLS-intercepting proxy whose CA is in the host's bundle: hand both
# to the build as secrets (docker/Dockerfile), so neither lands in an image layer.
ca_bundle="${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
pip_conf=$(mktemp)
cleanup+=("$pip_conf")
printf '[global]\ncert = /run/secrets/ca-bundle\n' > "$pip_conf"

CONTAINER_TOOL=podman VARIANT="$variant" IMG="$image" "$repo/ci/build-image.sh" \
  --build-arg "BASE_IMAGE=$base_image" \
  "${variant_args[@]}" \
  --secret "id=pip.conf,src=$pip_conf" \
  --secret "id=ca-bundle,src=$ca_bundle" \
  "$@"
