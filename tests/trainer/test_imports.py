"""The trainer's modules import one another without a cycle, TYPE_CHECKING imports included: each
module's job is one, and a cycle means two modules share one."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter

from tests.support.paths import REPO

PACKAGE = REPO / "trainer"


def trainer_imports(module: str) -> set[str]:
    tree = ast.parse((PACKAGE / f"{module}.py").read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("trainer."):
            imported.add(node.module.split(".")[1])
        elif isinstance(node, ast.ImportFrom) and node.module == "trainer":
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            imported.update(a.name.split(".")[1] for a in node.names if a.name.startswith("trainer."))
    return imported - {module}


def test_trainer_modules_import_each_other_without_a_cycle():
    graph = {path.stem: trainer_imports(path.stem) for path in PACKAGE.glob("*.py")}
    try:
        order = list(TopologicalSorter(graph).static_order())
    except CycleError as error:
        raise AssertionError(f"import cycle among trainer modules: {' -> '.join(error.args[1])}") from None
    assert order.index("config") < order.index("loop") and order.index("metrics") < order.index("loop")
