#!/usr/bin/env bash
# Push the image `make image` built, then print its digest for the chart's image.digest. `make push`
# calls this.
#
#   IMG=<name:tag>  CONTAINER_TOOL=docker|podman  [ALLOW_UNCOMMITTED=1]  ci/push-image.sh
#
# Only an image of what this checkout's commit holds is pushed: its revision label (ci/build-image.sh)
# must be HEAD, or a commit whose build inputs (ci/lib.sh: the Dockerfile and the build context) are
# HEAD's, without -dirty. A tag like <version>-cpu is pulled with IfNotPresent, so a node that cached
# an earlier push keeps it: an image of uncommitted edits, or a stale local one (say, after a
# multi-arch build pushed straight from buildx), would leave a job's pods running different code.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tool="${CONTAINER_TOOL:-docker}"
require_img cpu
label='{{ index .Config.Labels "org.opencontainers.image.revision" }}'
if ! revision=$("$tool" image inspect --format "$label" "$IMG" 2>/dev/null); then
  echo "There is no local image $IMG in $tool's store: build it with make image (the same VARIANT and IMG)." >&2
  exit 2
fi
head=$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo "no git checkout")
refusal=""
if [[ "$revision" == "$head" ]]; then
  :
elif [[ "$revision" == *-dirty ]]; then
  uncommitted=$(uncommitted_build_inputs "$repo" | paste -sd ' ' -)
  refusal="$IMG was built from uncommitted edits to its build inputs (revision $revision${uncommitted:+; uncommitted now: $uncommitted}): commit them and run make image again."
# Another commit (the pattern keeps a label from passing for a git option): its build inputs may be HEAD's.
elif ! [[ "$revision" =~ ^[0-9a-f]{40}$ ]] ||
  ! differences=$(git -C "$repo" diff --no-renames --name-only -z "$revision" HEAD -- 2>/dev/null | build_inputs | paste -sd ' ' -); then
  refusal="$IMG was built from revision '${revision:-none}', not this checkout's HEAD ($head) nor a commit it has: run make image again."
elif [[ -n "$differences" ]]; then
  refusal="$IMG was built from $revision, not this checkout's HEAD ($head), and these build inputs differ: $differences. Run make image again."
else
  echo "$IMG was built from $revision, whose build inputs are the same as HEAD's ($head)."
fi
if [[ -n "$refusal" && "${ALLOW_UNCOMMITTED:-}" != 1 ]]; then
  echo "$refusal" >&2
  echo "To push it anyway (a development tag of your own, say), set ALLOW_UNCOMMITTED=1." >&2
  exit 2
fi

digest_file=$(mktemp)
trap 'rm -f "$digest_file"' EXIT
if is_podman "$tool"; then
  "$tool" push --digestfile "$digest_file" "$IMG"
  digest=$(<"$digest_file")
else
  # docker prints "<tag>: digest: sha256:… size: …" last (its RepoDigests use short names for Docker Hub).
  "$tool" push "$IMG" | tee "$digest_file"
  digest=$(sed -n 's/.*digest: \(sha256:[0-9a-f]*\).*/\1/p' "$digest_file" | tail -n 1)
fi
echo "Pushed $IMG as ${digest:-an unknown digest}."
if [[ -n "$digest" ]]; then
  echo "A tag can be pushed again; to run exactly this image, install the chart with --set image.digest=$digest"
fi
