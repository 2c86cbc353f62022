"""What a chart's values.yaml documents: the key paths with a helm-docs `# --` comment above them."""
from __future__ import annotations

from pathlib import Path

import yaml


def documented_values(chart: Path) -> set[str]:
    """Key paths whose `# --` comment block sits right above them, at any indentation."""
    documented, stack, comments = set(), [], []
    for line in (chart / "values.yaml").read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            comments.append(stripped)
            continue
        indent = len(line) - len(line.lstrip())
        if ":" in stripped and not stripped.startswith("-"):
            while stack and stack[-1][0] >= indent:
                stack.pop()
            stack.append((indent, stripped.split(":", 1)[0]))
            if any(comment.startswith("# --") for comment in comments):
                documented.add(".".join(key for _, key in stack))
        comments = []
    return documented


def leaf_paths(node: object, prefix: str = "") -> set[str]:
    """Dotted paths of the values' leaves (an empty map is a leaf)."""
    if isinstance(node, dict) and node:
        return set().union(*(leaf_paths(v, f"{prefix}{k}.") for k, v in node.items()))
    return {prefix.rstrip(".")}


def values_leaves(chart: Path) -> set[str]:
    return leaf_paths(yaml.safe_load((chart / "values.yaml").read_text()))
