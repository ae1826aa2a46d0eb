"""The nbxtensor package's module-level imports form a graph without cycles (layering, issue 25)."""
from __future__ import annotations

import ast
import pathlib

import nbxtensor

_ROOT = pathlib.Path(nbxtensor.__file__).parent


def _module_name(path: pathlib.Path) -> str:
    parts = ("nbxtensor",) + path.relative_to(_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports at module level (imports inside functions are lazy)."""
    modules = {_module_name(p): p for p in _ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.parse(path.read_text()).body:
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[:len(anchor) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                # `from .x import y` imports x, and y too when y is a submodule.
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                # A submodule may read names from a package above it, which finishes importing first.
                if target and target != name and not name.startswith(target + "."):
                    graph[name].add(target)
    return graph


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for succ in sorted(graph[node]):
            if state.get(succ) == 1:
                return stack[stack.index(succ):] + [succ]
            if succ not in state and (found := visit(succ)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_graph_sees_relative_imports():
    graph = _import_graph()
    assert "nbxtensor.dtypes" in graph["nbxtensor.promotion"]


def test_module_imports_are_acyclic():
    cycle = _find_cycle(_import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)
