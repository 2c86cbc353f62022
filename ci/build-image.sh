#!/usr/bin/env bash
# Build the trainer image from docker/Dockerfile with OCI labels filled in. `make image` calls this;
# so do ci/podman/build-offline.sh and ci/e2e-kind.sh. Extra arguments go to `<tool> build` as-is.
#
#   VARIANT=cpu|cuda  IMG=<name:tag>  CONTAINER_TOOL=docker|podman  PLATFORMS=linux/amd64[,linux/arm64]
#   ci/build-image.sh [--build-arg KEY=VALUE ...]
# Several PLATFORMS need a destination for the multi-arch result: `--push` with docker buildx,
# `--manifest <name>` with podman.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
variant="${VARIANT:-cpu}"
tool="${CONTAINER_TOOL:-docker}"
case "$variant" in
  cpu|cuda) ;;
  *) echo "VARIANT must be cpu or cuda, got '$variant'" >&2; exit 2 ;;
esac
if [[ -z "${IMG:-}" ]]; then
  echo "IMG is not set: pass the image name, e.g. IMG=ghcr.io/pytorchjob-mnist/trainer:0.1.0-$variant" >&2
  exit 2
fi

version="${VERSION:-$(sed -n 's/^version = "\(.*\)"$/\1/p' "$repo/pyproject.toml")}"
revision="${REVISION:-$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)}"
# SOURCE_DATE_EPOCH (reproducible builds) wins over "now".
created="${CREATED:-$(date -u ${SOURCE_DATE_EPOCH:+-d "@$SOURCE_DATE_EPOCH"} +%Y-%m-%dT%H:%M:%SZ)}"

args=(build --file "$repo/docker/Dockerfile" --tag "$IMG"
  --build-arg "VARIANT=$variant"
  --label "org.opencontainers.image.version=$version"
  --label "org.opencontainers.image.revision=$revision"
  --label "org.opencontainers.image.created=$created")
if [[ -n "${PLATFORMS:-}" ]]; then
  args+=(--platform "$PLATFORMS")
fi
set -x
"$tool" "${args[@]}" "$@" "$repo"
