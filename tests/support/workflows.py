"""The GitHub workflows in .github/workflows, linted as yamllint's default rules with GitHub's style,
and the actions they use."""

from __future__ import annotations

import re
from typing import NamedTuple

from yamllint import config as yamllint_config
from yamllint import linter

from tests.support.paths import REPO

WORKFLOWS = REPO / ".github" / "workflows"
WORKFLOW_FILES = sorted(WORKFLOWS.glob("*.yaml"))
# GitHub's own examples start with no `---`, run past 80 columns and use the key `on`.
_LINT = yamllint_config.YamlLintConfig(
    "{extends: default, rules: {document-start: disable, line-length: {max: 120}, truthy: {check-keys: false}}}"
)


def lint_problems(text: str) -> list[str]:
    return [f"{p.line}:{p.column} {p.message}" for p in linter.run(text, _LINT)]


class Use(NamedTuple):
    """One `uses:` line: `action@ref  # comment`."""

    line: int
    action: str
    ref: str
    comment: str


def uses(text: str) -> list[Use]:
    """Every `uses:` line of a workflow, read from its text: YAML parsers drop the comment."""
    return [
        Use(number, *match.groups())
        for number, line in enumerate(text.splitlines(), 1)
        if (match := re.match(r"\s*(?:- )?uses: ([^@\s]+)@(\S+)(?:\s+#\s*(.*))?$", line))
    ]


def action_of(step: dict) -> str:
    """`owner/repo[/path]` of a step's `uses`, without the ref; '' for a `run` step."""
    return step.get("uses", "").split("@")[0]
