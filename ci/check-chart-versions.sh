#!/usr/bin/env bash
# Every chart changed since the previous v* tag must have a new `version`: a published version is
# never replaced, since users pinned to it would get other templates. The release workflow runs
# this before any image is pushed; ci/publish-charts.sh then pushes the versions the registry lacks.
#
#   ci/check-chart-versions.sh [TAG]   (from the repository's root; TAG defaults to HEAD; the clone
#                                       needs the tags: fetch-depth 0)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

tag="${1:-HEAD}"
previous=$(git describe --tags --abbrev=0 --match 'v*' "$tag^" 2>/dev/null || true)
[[ -n "$previous" ]] || exit 0  # the first release

for chart in "${CHARTS[@]}"; do
  if git diff --quiet "$previous" "$tag" -- "$chart"; then
    continue
  fi
  old=$(git show "$previous:$chart/Chart.yaml" | chart_field version)
  new=$(git show "$tag:$chart/Chart.yaml" | chart_field version)
  if [[ "$old" == "$new" ]]; then
    echo "$chart changed since $previous but keeps version $new, which $previous published:" \
      "bump version in $chart/Chart.yaml" >&2
    exit 1
  fi
done
