# shellcheck shell=bash
# Helpers the ci/ scripts share; they source it as "$(dirname "${BASH_SOURCE[0]}")/lib.sh".

# The charts, in the order they are checked and published.
# shellcheck disable=SC2034  # read by the scripts that source this file
CHARTS=(charts/training-operator charts/pytorchjob-mnist)

# project_version REPO: pyproject.toml's version, the release's (tag v<version>, image tags <version>-<variant>).
project_version() { sed -n 's/^version = "\(.*\)"$/\1/p' "$1/pyproject.toml"; }

# chart_field FIELD: the top-level FIELD (name, version, ...) of the Chart.yaml on stdin.
chart_field() { sed -n "s/^$1: //p"; }

# require_img VARIANT: exit 2 unless IMG names the image, suggesting a name for VARIANT.
require_img() {
  if [[ -z "${IMG:-}" ]]; then
    echo "IMG is not set: pass the image name, e.g. IMG=ghcr.io/pytorchjob-mnist/trainer:0.1.0-$1" >&2
    exit 2
  fi
}

# is_podman TOOL: whether the container tool TOOL is podman, which also answers as `docker`
# (the podman-docker package), so the tool is asked rather than its name.
is_podman() { "$1" --version 2>/dev/null | grep -qi podman; }

# The image's build context, as /.dockerignore lets it in: it excludes everything (`*`), keeps these paths
# (`!path`; a directory ends with /), then leaves out, anywhere below them, what these names match (`**/name`).
# tests/images/test_build_context.py checks that .dockerignore says exactly this.
# shellcheck disable=SC2034  # read by the tests
BUILD_CONTEXT=(pyproject.toml docker/constraints.txt README.md trainer/ docker/pytorch-mnist/ docker/wheels/)
BUILD_CONTEXT_EXCLUDED=(__pycache__ '*.py[cod]')

# in_build_context: of the paths on stdin (relative to the repository, each ended by a NUL), prints those
# the build context holds, one a line.
in_build_context() {
  local path entry name kept
  local -a names
  while IFS= read -r -d '' path; do
    kept=0
    for entry in "${BUILD_CONTEXT[@]}"; do
      if [[ "$path" == "$entry" || ("$entry" == */ && "$path" == "$entry"*) ]]; then kept=1; fi
    done
    IFS=/ read -ra names <<<"$path"
    for name in "${names[@]}"; do
      for entry in "${BUILD_CONTEXT_EXCLUDED[@]}"; do
        # shellcheck disable=SC2053  # the entry is a glob
        if [[ "$name" == $entry ]]; then kept=0; fi
      done
    done
    if ((kept)); then printf '%s\n' "$path"; fi
  done
}

# build_inputs: of the paths on stdin (relative to the repository, each ended by a NUL), prints those that
# shape the trainer image, one a line: docker/Dockerfile, .dockerignore and what the build context keeps.
build_inputs() {
  local path
  local -a context=()
  while IFS= read -r -d '' path; do
    if [[ "$path" == docker/Dockerfile || "$path" == .dockerignore ]]; then
      printf '%s\n' "$path"
    else
      context+=("$path")
    fi
  done
  ((${#context[@]} == 0)) || printf '%s\0' "${context[@]}" | in_build_context
}

# uncommitted_build_inputs REPO: the build inputs with uncommitted edits (staged or not, deletions too)
# and the untracked ones, one a line. Files git ignores (docker/wheels/, caches) are not looked at.
uncommitted_build_inputs() {
  local entry
  git -C "$1" status --porcelain=v1 -z --untracked-files=all --no-renames |
    while IFS= read -r -d '' entry; do printf '%s\0' "${entry:3}"; done |
    build_inputs
}

# image_revision REPO: the revision label of an image built from REPO now: the commit, with -dirty when
# uncommitted_build_inputs lists anything; "unknown" outside a git checkout.
image_revision() {
  local head
  if ! head=$(git -C "$1" rev-parse --verify --quiet HEAD 2>/dev/null); then
    echo unknown
  elif [[ -n "$(uncommitted_build_inputs "$1")" ]]; then
    echo "$head-dirty"
  else
    echo "$head"
  fi
}
