#!/usr/bin/env bash
# Build the trainer image from docker/Dockerfile with OCI labels filled in. `make image` calls this;
# so do ci/podman/build-offline.sh and ci/e2e-kind.sh. Extra arguments go to `<tool> build` as-is.
#
#   VARIANT=cpu|cuda  IMG=<name:tag>  CONTAINER_TOOL=docker|podman  PLATFORMS=linux/amd64[,linux/arm64]
#   [ALLOW_UNCOMMITTED=1]  ci/build-image.sh [--build-arg KEY=VALUE ...]
# Several PLATFORMS need a destination for the multi-arch result, which no single local tag can
# hold: `--push` with docker, `--manifest <name>` with podman; without one the build is refused.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
variant="${VARIANT:-cpu}"
tool="${CONTAINER_TOOL:-docker}"
case "$variant" in
  cpu|cuda) ;;
  *) echo "VARIANT must be cpu or cuda, got '$variant'" >&2; exit 2 ;;
esac
require_img "$variant"

version="${VERSION:-$(project_version "$repo")}"
# The commit built, with -dirty when the image's build inputs have uncommitted edits (ci/lib.sh).
revision="${REVISION:-$(image_revision "$repo")}"
# The created label: SOURCE_DATE_EPOCH when set (a release pipeline's fixed date), else now.
created="${CREATED:-$(date -u ${SOURCE_DATE_EPOCH:+-d "@$SOURCE_DATE_EPOCH"} +%Y-%m-%dT%H:%M:%SZ)}"

# docker: `buildx build` runs on the builder `docker buildx use` selected; plain `docker build`
# always takes the engine's default builder, which cannot build several platforms.
# podman, even installed as `docker`, has no buildx.
build=(build)
if [[ "$(basename "$tool")" == *docker* ]] && ! is_podman "$tool"; then
  build=(buildx build)
fi
if [[ "${build[0]}" == buildx ]] && ! "$tool" buildx version >/dev/null 2>&1; then
  echo "docker buildx is not installed, and the Dockerfile needs BuildKit: install the buildx plugin" \
    "(docker-buildx-plugin from Docker's repository, docker-buildx on Debian/Ubuntu), or use CONTAINER_TOOL=podman." >&2
  exit 2
fi
destination="" push=""
for arg in "$@"; do
  case "$arg" in
    --push) destination="$arg" push=1 ;;
    --load|-o|--output|--output=*|--manifest|--manifest=*) destination="$arg" ;;
  esac
done
if [[ "${build[0]}" == build && -n "$push" ]]; then
  echo "--push is a docker buildx flag that \`$tool build\` does not take: build with" \
    "IMAGE_BUILD_FLAGS='--manifest <name>', then \`$tool manifest push <name> <registry>/<image>:<tag>\`." >&2
  exit 2
fi
if [[ "$revision" == *-dirty ]]; then
  uncommitted=$(uncommitted_build_inputs "$repo" | paste -sd ' ' -)
  # --push publishes straight from the build, past make push's check that the image is this commit's.
  if [[ -n "$push" && "${ALLOW_UNCOMMITTED:-}" != 1 ]]; then
    echo "--push would publish uncommitted edits to the image's build inputs: ${uncommitted}. Commit them" \
      "first, or set ALLOW_UNCOMMITTED=1 to publish them anyway." >&2
    exit 2
  fi
  echo "Building uncommitted edits to the image's build inputs (${uncommitted}): make push will refuse" \
    "this image until they are committed and it is built again." >&2
elif [[ -n "$push" && "$revision" == unknown && "${ALLOW_UNCOMMITTED:-}" != 1 ]]; then
  echo "--push would publish a build of no git commit: build from a git checkout, or set" \
    "ALLOW_UNCOMMITTED=1 to publish it anyway." >&2
  exit 2
fi
if [[ "${PLATFORMS:-}" == *,* && -z "$destination" ]]; then
  echo "PLATFORMS=$PLATFORMS builds one image per platform, which the local tag $IMG cannot hold." >&2
  echo "Add IMAGE_BUILD_FLAGS=--push (docker) or IMAGE_BUILD_FLAGS='--manifest <name>' (podman, then" \
    "\`podman manifest push <name>\`), or build one platform." >&2
  exit 2
fi

# The base image: a --build-arg BASE_IMAGE=…, else the Dockerfile's default; name and digest are OCI labels
# of their own (base.name is the reference without the digest).
base=$(sed -n 's/^ARG BASE_IMAGE=//p' "$repo/docker/Dockerfile")
previous=""
for arg in "$@"; do
  if [[ "$previous" == --build-arg && "$arg" == BASE_IMAGE=* ]]; then base="${arg#BASE_IMAGE=}"; fi
  previous="$arg"
done
# The labels this script sets, key=value (indexed arrays: macOS's bash 3.2 has no associative ones).
labels=("version=$version" "revision=$revision" "created=$created" "base.name=${base%@*}")
if [[ "$base" == *@* ]]; then labels+=("base.digest=${base#*@}"); fi
args=("${build[@]}" --file "$repo/docker/Dockerfile" --build-arg "VARIANT=$variant")
# buildx pushes several platforms to the tag; podman puts them in the --manifest, and would tag
# only one of them as $IMG, which `make push` would then publish as if it were all.
if [[ "${build[0]}" == buildx || "${PLATFORMS:-}" != *,* ]]; then
  args+=(--tag "$IMG")
fi
# In GitHub Actions, a fork's images link to the fork (GHCR shows and permits by the source label);
# elsewhere the Dockerfile's upstream project labels stay.
if [[ -n "${GITHUB_REPOSITORY:-}" ]]; then
  project="${GITHUB_SERVER_URL:-https://github.com}/$GITHUB_REPOSITORY"
  labels+=("source=$project" "url=$project" "documentation=$project/blob/main/docker/README.md")
fi
for label in "${labels[@]}"; do
  args+=(--label "org.opencontainers.image.$label")
done
# A pushed build is an image index (several platforms, or one with BuildKit's attestations), whose
# annotations are what registries show for a multi-arch image (GHCR: description, source, licenses),
# since they do not read one platform's labels: every label, the Dockerfile's static ones included.
if [[ "${build[0]}" == buildx && -n "$push" ]]; then
  while IFS='=' read -r key value; do
    # shellcheck disable=SC2016  # the Dockerfile's literal ${VARIANT}, replaced by the variant built
    [[ " ${labels[*]%%=*} " == *" $key "* ]] || labels+=("$key=${value//'${VARIANT}'/$variant}")
  done < <(sed -n 's/^\(LABEL \)\{0,1\} *org\.opencontainers\.image\.\([a-z.]*\)="\([^"]*\)".*/\2=\3/p' "$repo/docker/Dockerfile")
  for label in "${labels[@]}"; do
    args+=(--annotation "index:org.opencontainers.image.$label")
  done
fi
if [[ -n "${PLATFORMS:-}" ]]; then
  args+=(--platform "$PLATFORMS")
fi
if [[ "${build[0]}" == buildx && -z "$destination" ]]; then
  # A docker-container builder keeps its result in its own cache; `make push` and `kind load` read
  # the engine's images.
  args+=(--load)
fi
set -x
"$tool" "${args[@]}" "$@" "$repo"
