# shellcheck shell=bash
# Helpers the ci/ scripts share; they source it as "$(dirname "${BASH_SOURCE[0]}")/lib.sh".

# The charts, in the order they are checked and published.
# shellcheck disable=SC2034  # read by the scripts that source this file
CHARTS=(charts/training-operator charts/pytorchjob-mnist)

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
