"""Render charts with the real Helm binaries that `make tools` installs into .tools/bin."""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.support.paths import REPO

TOOLS_BIN = Path(os.environ.get("TOOLS_BIN", REPO / ".tools" / "bin"))
HELM_NAMES = ("helm3", "helm4")
# What Helm 3 and Helm 4 both print when values.schema.json refuses the values (a template `fail` does not).
SCHEMA_REFUSAL = "values don't meet the specifications of the schema"
# The repository's charts do not change during a test run: each rendering of one (by Helm binary,
# arguments and the values files' contents) runs once per session, and every test that asks for it
# again gets the result, parsed documents as a copy of their own. Charts copied into a test's tmp
# dir may be edited between renderings, so those always run.
_TEMPLATED: dict[tuple, subprocess.CompletedProcess] = {}
_RENDERED: dict[tuple, list[dict]] = {}


def helm_binary(name: str) -> str | None:
    """Path of the pinned Helm binary `name` (helm3 or helm4), or None when not installed."""
    candidate = TOOLS_BIN / name
    if candidate.exists():
        return str(candidate)
    return shutil.which(name)


@dataclass(frozen=True)
class Helm:
    name: str
    path: str

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run([self.path, *args], capture_output=True, text=True, check=check)

    def template(
        self,
        chart: str | Path,
        values_files: tuple[str | Path, ...] = (),
        set_values: dict[str, object] | None = None,
        release: str = "mnist",
        namespace: str = "default",
        extra: tuple[str, ...] = (),
    ) -> subprocess.CompletedProcess:
        """Run `helm template` without raising; inspect returncode, stdout and stderr."""
        args = self._template_args(chart, values_files, set_values, release, namespace, extra)
        key = self._cache_key(chart, values_files, args)
        if key is None:
            return self.run(*args, check=False)
        if key not in _TEMPLATED:
            _TEMPLATED[key] = self.run(*args, check=False)
        return _TEMPLATED[key]

    def render(self, chart: str | Path, **kwargs) -> list[dict]:
        """Render and parse every non-empty document; fail with Helm's message on error."""
        args = self._template_args(chart, **kwargs)
        key = self._cache_key(chart, kwargs.get("values_files", ()), args)
        if key in _RENDERED:
            return copy.deepcopy(_RENDERED[key])
        result = self.template(chart, **kwargs)
        if result.returncode != 0:
            raise AssertionError(f"{self.name} template failed:\n{result.stderr}")
        # The C loader parses the large CRD about ten times faster than pure-Python PyYAML.
        docs = [d for d in yaml.load_all(result.stdout, Loader=yaml.CSafeLoader) if d]
        if key is not None:
            _RENDERED[key] = copy.deepcopy(docs)
        return docs

    @staticmethod
    def _template_args(
        chart: str | Path,
        values_files: tuple[str | Path, ...] = (),
        set_values: dict[str, object] | None = None,
        release: str = "mnist",
        namespace: str = "default",
        extra: tuple[str, ...] = (),
    ) -> list[str]:
        args = ["template", release, str(chart), "--namespace", namespace, *extra]
        for f in values_files:
            args += ["-f", str(f)]
        for key, value in (set_values or {}).items():
            flag = "--set-string" if isinstance(value, str) else "--set"
            args += [flag, f"{key}={_set_literal(value)}"]
        return args

    def _cache_key(self, chart: str | Path, values_files: tuple[str | Path, ...], args: list[str]) -> tuple | None:
        """The session cache's key for a rendering of a chart in the repository, else None."""
        if not Path(chart).resolve().is_relative_to(REPO / "charts"):
            return None
        return (self.path, *args, *(Path(f).read_bytes() for f in values_files))


def _set_literal(value: object) -> str:
    if value is None:
        return "null"  # Helm drops the key, leaving the chart's default out
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "{" + ",".join(_set_literal(v) for v in value) + "}"
    return str(value)


def set_chart_field(chart: Path, key: str, value: str) -> None:
    """Rewrite one top-level field of chart/Chart.yaml in place, leaving the rest of the file as it is."""
    chart_yaml = chart / "Chart.yaml"
    chart_yaml.write_text(re.sub(rf"^{key}: .*$", f"{key}: {value}", chart_yaml.read_text(), flags=re.M))


def umbrella_chart(chart: Path, directory: Path) -> Path:
    """A parent chart in `directory` that depends on `chart` as umbrella charts usually do: optionally,
    under the condition `<name>.enabled`, which Helm then passes to the subchart's values."""
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    parent = directory / "umbrella"
    (parent / "charts").mkdir(parents=True)
    (parent / "Chart.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v2",
                "name": "umbrella",
                "version": "0.1.0",
                "dependencies": [
                    {"name": meta["name"], "version": meta["version"], "condition": f"{meta['name']}.enabled"}
                ],
            }
        )
    )
    shutil.copytree(chart, parent / "charts" / meta["name"])
    return parent


NOTES_PREVIEW = "templates/notes-preview.yaml"


def notes_preview_chart(chart: Path, directory: Path) -> Path:
    """A copy of `chart` in `directory` whose NOTES.txt is a block scalar of an ordinary template,
    for render_notes: `helm template` skips NOTES.txt, and Helm 3 cannot dry-run an install without
    a cluster."""
    copy = directory / chart.name
    shutil.copytree(chart, copy)
    notes = copy / "templates" / "NOTES.txt"
    indented = "".join("  " + line for line in notes.read_text().splitlines(keepends=True))
    (copy / NOTES_PREVIEW).write_text("notes: |\n" + indented)
    notes.unlink()
    return copy


def render_notes(helm: Helm, preview_chart: Path, **template_kwargs) -> str:
    """The NOTES that installing the chart of notes_preview_chart would print."""
    extra = (*template_kwargs.pop("extra", ()), "--show-only", NOTES_PREVIEW)
    (preview,) = helm.render(preview_chart, extra=extra, **template_kwargs)
    return preview["notes"]


def by_kind(docs: list[dict], kind: str) -> list[dict]:
    return [d for d in docs if d.get("kind") == kind]


def one(docs: list[dict], kind: str) -> dict:
    found = by_kind(docs, kind)
    assert len(found) == 1, f"expected exactly one {kind}, got {len(found)}"
    return found[0]
