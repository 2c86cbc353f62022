#!/usr/bin/env bash
# Push each chart whose version the registry lacks, as an OCI artifact. Asking the registry rather
# than git also publishes what an earlier release left unpushed (its run failed after the tag);
# a version already there is left as it is. Each chart is packaged from a copy that carries Artifact
# Hub's artifacthub.io/changes, written from CHANGELOG.md's section for pyproject.toml's version
# (ci/chart_changes.py), which must exist.
#
#   ci/publish-charts.sh HELM oci://REGISTRY/PATH [helm registry flags, e.g. --plain-http]
#   (from the repository's root, logged in to the registry)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

helm=$1 destination=$2
shift 2
packages=$(mktemp -d)
trap 'rm -rf "$packages"' EXIT
release=$(project_version .)

for chart in "${CHARTS[@]}"; do
  name=$(chart_field name <"$chart/Chart.yaml")
  version=$(chart_field version <"$chart/Chart.yaml")
  if "$helm" show chart "$destination/$name" --version "$version" "$@" >/dev/null 2>&1; then
    echo "$name $version is published already"
    continue
  fi
  staged="$packages/charts/$name"
  mkdir -p "$packages/charts"
  cp -R "$chart" "$staged"
  python3 "$(dirname "${BASH_SOURCE[0]}")/chart_changes.py" CHANGELOG.md "$release" "$staged/Chart.yaml"
  "$helm" package "$staged" --destination "$packages"
  "$helm" push "$packages/$name-$version.tgz" "$destination" "$@"
done
