#!/usr/bin/env bash
# The charts a release tag publishes: those changed since the previous v* tag (every chart on the
# first release), one path a line. A changed chart must have a new `version`: a published version
# is never replaced, since users pinned to it would get other templates. The release workflow runs
# this in its check job (before any image is pushed) and again to pick what to push.
#
#   ci/release-charts.sh [TAG]     (from the repository's root; TAG defaults to HEAD; the clone needs
#                                   the tags: fetch-depth 0)
set -euo pipefail

tag="${1:-HEAD}"
previous=$(git describe --tags --abbrev=0 --match 'v*' "$tag^" 2>/dev/null || true)
chart_version() { sed -n 's/^version: //p'; }

for chart in charts/training-operator charts/pytorchjob-mnist; do
  if [[ -n "$previous" ]]; then
    if git diff --quiet "$previous" "$tag" -- "$chart"; then
      continue  # unchanged: its version is published already
    fi
    old=$(git show "$previous:$chart/Chart.yaml" | chart_version)
    new=$(git show "$tag:$chart/Chart.yaml" | chart_version)
    if [[ "$old" == "$new" ]]; then
      echo "$chart changed since $previous but keeps version $new, which $previous published:" \
        "bump version in $chart/Chart.yaml" >&2
      exit 1
    fi
  fi
  echo "$chart"
done
