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

# in_build_context DIR: of the paths on stdin (relative to DIR, each ended by a NUL), prints those that
# a build with context DIR receives, one a line, as docker and buildah decide it from DIR/.dockerignore:
# the last pattern that matches the path or one of its parent directories wins, and a `!` pattern keeps
# what it matches; `*` and `?` stop at `/`, `**` crosses directories.
in_build_context() {
  local line pattern regex path parent excluded i char
  local -a regexes=() keeps=()
  if [[ -f "$1/.dockerignore" ]]; then
    while IFS= read -r line || [[ -n "$line" ]]; do
      [[ "$line" == \#* ]] && continue
      line="${line#"${line%%[![:space:]]*}"}"
      line="${line%"${line##*[![:space:]]}"}"
      [[ -z "$line" ]] && continue
      if [[ "$line" == '!'* ]]; then keeps+=(1); else keeps+=(0); fi
      pattern="${line#!}"
      pattern="${pattern#"${pattern%%[![:space:]]*}"}"
      while [[ "$pattern" == /* || "$pattern" == ./* ]]; do pattern="${pattern#/}" pattern="${pattern#./}"; done
      while [[ "$pattern" == */ && "$pattern" != / ]]; do pattern="${pattern%/}"; done
      regex=""
      for ((i = 0; i < ${#pattern}; i++)); do
        char="${pattern:i:1}"
        case "$char" in
          '*')
            if [[ "${pattern:i+1:1}" == '*' ]]; then
              ((i += 1))
              [[ "${pattern:i+1:1}" == / ]] && ((i += 1))
              if ((i + 1 == ${#pattern})); then regex+='.*'; else regex+='(.*/)?'; fi
            else
              regex+='[^/]*'
            fi
            ;;
          '?') regex+='[^/]' ;;
          \\) ((i += 1)) && regex+="\\${pattern:i:1}" ;;
          *)
            # What is special to an ERE and not to a pattern is taken literally; `[...]` means the same to both.
            if [[ '.+()|{}$^' == *"$char"* ]]; then regex+="\\$char"; else regex+="$char"; fi
            ;;
        esac
      done
      regexes+=("^$regex\$")
    done <"$1/.dockerignore"
  fi
  while IFS= read -r -d '' path; do
    excluded=0
    for i in "${!regexes[@]}"; do
      # Only a pattern that would change the verdict needs matching.
      [[ "${keeps[i]}" == "$((1 - excluded))" ]] && continue
      parent="$path"
      while :; do
        if [[ "$parent" =~ ${regexes[i]} ]]; then
          excluded=$((1 - keeps[i]))
          break
        fi
        [[ "$parent" == */* ]] || break
        parent="${parent%/*}"
      done
    done
    ((excluded)) || printf '%s\n' "$path"
  done
}

# build_inputs REPO: of the paths on stdin (relative to REPO, each ended by a NUL), prints those that
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
  ((${#context[@]} == 0)) || printf '%s\0' "${context[@]}" | in_build_context "$1"
}

# uncommitted_build_inputs REPO: the build inputs with uncommitted edits (staged or not, deletions too)
# and the untracked ones, one a line. Files git ignores (docker/wheels/, caches) are not looked at.
uncommitted_build_inputs() {
  local entry
  git -C "$1" status --porcelain=v1 -z --untracked-files=all --no-renames |
    while IFS= read -r -d '' entry; do printf '%s\0' "${entry:3}"; done |
    build_inputs "$1"
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
