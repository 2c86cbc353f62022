"""The GitHub workflows in .github/workflows, linted as yamllint's default rules with GitHub's style."""

from __future__ import annotations

from yamllint import config as yamllint_config
from yamllint import linter

from tests.support.paths import REPO

WORKFLOWS = REPO / ".github" / "workflows"
# GitHub's own examples start with no `---`, run past 80 columns and use the key `on`.
_LINT = yamllint_config.YamlLintConfig(
    "{extends: default, rules: {document-start: disable, line-length: {max: 120}, truthy: {check-keys: false}}}"
)


def lint_problems(text: str) -> list[str]:
    return [f"{p.line}:{p.column} {p.message}" for p in linter.run(text, _LINT)]
