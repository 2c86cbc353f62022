#!/usr/bin/env python3
"""Write a release's CHANGELOG.md section into a chart as Artifact Hub's `artifacthub.io/changes`.

CHANGELOG.md follows Keep a Changelog: a section `## [<version>]` holds `### Added`, `### Changed`,
`### Deprecated`, `### Removed`, `### Fixed` and `### Security`, whose names are Artifact Hub's change
kinds, each with `- ` entries. Each entry becomes one change: its text, with markdown links turned into
their text, and those links as the change's `links` (relative ones point into the project at the
release's tag; `Unreleased`, a preview, at main). ci/publish-charts.sh runs it on the copy of each chart it packages, so the repository's
Chart.yaml never holds the annotation: CHANGELOG.md is the one place for a release's changes.

    python3 ci/chart_changes.py CHANGELOG.md VERSION                 # print the annotation's value
    python3 ci/chart_changes.py CHANGELOG.md VERSION CHART/Chart.yaml  # add it to that Chart.yaml

Standard library only: the release runs it with the runner's python3.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

KINDS = ("added", "changed", "deprecated", "removed", "fixed", "security")
ANNOTATION = "artifacthub.io/changes"
# The project, whose files a relative link names: the workload chart's `home`.
WORKLOAD_CHART = Path(__file__).resolve().parents[1] / "charts" / "pytorchjob-mnist" / "Chart.yaml"
_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")


class ChangelogError(Exception):
    """CHANGELOG.md cannot give the release's changes; the message says what to fix."""


def section(changelog: str, version: str) -> str:
    """The body of the `## [<version>]` section (up to the next `## ` heading)."""
    heading = re.compile(rf"^## \[{re.escape(version)}\](?: - \d{{4}}-\d{{2}}-\d{{2}})?\s*$", re.M)
    found = heading.search(changelog)
    if found is None:
        raise ChangelogError(
            f"CHANGELOG.md has no section '## [{version}] - <date>': move the [Unreleased] entries into one "
            f"for this release before tagging v{version}"
        )
    following = re.compile(r"^## ", re.M).search(changelog, found.end())
    return changelog[found.end() : following.start() if following else len(changelog)]


def changes(changelog: str, version: str) -> list[dict]:
    """The section's entries as Artifact Hub changes, in the changelog's order."""
    result: list[dict] = []
    kind = None
    entry: list[str] = []

    def flush() -> None:
        if entry:
            result.append(change(kind, " ".join(entry), version))
            entry.clear()

    for line in section(changelog, version).splitlines():
        if line.startswith("### "):
            flush()
            kind = line[4:].strip().lower()
            if kind not in KINDS:
                raise ChangelogError(
                    f"CHANGELOG.md [{version}] has a '{line.strip()}' heading: Keep a Changelog's, which Artifact "
                    f"Hub reads, are {', '.join(k.title() for k in KINDS)}"
                )
        elif line.startswith("- "):
            flush()
            if kind is None:
                raise ChangelogError(f"CHANGELOG.md [{version}] has an entry above its first '### <kind>' heading")
            entry.append(line[2:].strip())
        elif entry and line.strip():
            entry.append(line.strip())
        elif line.strip() and kind is not None:
            raise ChangelogError(f"CHANGELOG.md [{version}] ### {kind.title()}: '{line.strip()}' is not a '- ' entry")
    flush()
    if not result:
        raise ChangelogError(f"CHANGELOG.md [{version}] lists no change")
    return result


def change(kind: str, text: str, version: str) -> dict:
    links = [{"name": name, "url": absolute(url, version)} for name, url in _LINK.findall(text)]
    described = {"kind": kind, "description": _LINK.sub(r"\1", text)}
    return {**described, "links": links} if links else described


def absolute(url: str, version: str) -> str:
    if re.match(r"https?://", url):
        return url
    home = re.search(r"^home: (\S+)$", WORKLOAD_CHART.read_text(), re.M).group(1)
    # The release's tag; a preview of the unreleased section links to main.
    ref = "main" if version == "Unreleased" else f"v{version}"
    return f"{home}/blob/{ref}/{url}"


def annotation(entries: list[dict]) -> str:
    """The annotation's value: YAML, each string written as JSON (a subset of YAML) so that nothing in it
    needs escaping rules of its own."""
    lines = []
    for entry in entries:
        lines.append(f"- kind: {entry['kind']}")
        lines.append(f"  description: {json.dumps(entry['description'], ensure_ascii=False)}")
        if "links" in entry:
            lines.append("  links:")
            for link in entry["links"]:
                lines.append(f"    - name: {json.dumps(link['name'], ensure_ascii=False)}")
                lines.append(f"      url: {json.dumps(link['url'])}")
    return "\n".join(lines) + "\n"


def add_to_chart(chart_yaml: Path, value: str) -> None:
    """Add the annotation right below Chart.yaml's top-level `annotations:` line."""
    text = chart_yaml.read_text()
    if re.search(rf"^\s+{re.escape(ANNOTATION)}:", text, re.M):
        raise ChangelogError(
            f"{chart_yaml} has its own {ANNOTATION}: remove it, the release writes it from CHANGELOG.md"
        )
    block = f"  {ANNOTATION}: |\n" + "".join(f"    {line}\n" for line in value.splitlines())
    text, found = re.subn(r"^annotations:\n", lambda m: m.group(0) + block, text, count=1, flags=re.M)
    if not found:
        raise ChangelogError(f"{chart_yaml} has no top-level 'annotations:' map to add {ANNOTATION} to")
    chart_yaml.write_text(text)


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        value = annotation(changes(Path(argv[0]).read_text(encoding="utf-8"), argv[1]))
        if len(argv) == 3:
            add_to_chart(Path(argv[2]), value)
        else:
            sys.stdout.write(value)
    except ChangelogError as error:
        print(error, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
