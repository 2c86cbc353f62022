#!/usr/bin/env bash
# Build a Debian bookworm base image with python3 + python3-venv from Debian's mirror and import it into
# podman, for hosts that reach Debian's packages but no container registry. Prints the image name with
# its digest (name:tag@sha256:…), the form docker/Dockerfile's default base takes, so the offline build
# resolves a digest-pinned BASE_IMAGE as a release build does.
#
# The tag is a hash of this script, so the ~40 s debootstrap runs once per content change:
#   BASE_IMAGE=$(ci/podman/offline-base.sh)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export CONTAINERS_CONF="${CONTAINERS_CONF:-$here/containers.conf}"

suite=bookworm
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# Python 3.11 (bookworm's) matches the default python:3.11-slim-bookworm base and the cp311 wheels.
packages=python3,python3-venv,ca-certificates
content_hash=$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-12)
image="localhost/pytorchjob-mnist-base:${suite}-${content_hash}"

if ! podman image exists "$image"; then
  rootfs=$(mktemp -d)
  trap 'rm -rf "$rootfs"' EXIT
  echo "debootstrap $suite ($packages) into $rootfs" >&2
  debootstrap --variant=minbase --include="$packages" "$suite" "$rootfs" "$mirror" >&2
  # apt lists and caches are ~40 MB nobody needs in a base layer.
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb
  tar -C "$rootfs" -c . | podman import \
    --change 'CMD ["/bin/bash"]' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8' \
    - "$image" >&2
fi
echo "$image@$(podman image inspect --format '{{.Digest}}' "$image")"
