"""The nbxtensor package's imports form a graph without cycles, whether they sit at module level or inside
functions (which run later but tie the modules as much): the package is layered (docs/architecture.md)."""
from __future__ import annotations

import ast
import pathlib

import nbxtensor

_ROOT = pathlib.Path(nbxtensor.__file__).parent


def _module_name(path: pathlib.Path, root: pathlib.Path) -> str:
    parts = (root.name,) + path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph(everywhere: bool = False, root: pathlib.Path = _ROOT) -> dict[str, set[str]]:
    """Module -> the modules of the package at ``root`` it imports at module level, or with ``everywhere``
    by any import statement in it (inside functions and methods too)."""
    modules = {_module_name(p, root): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree) if everywhere else tree.body:
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


def _circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected sets of more than one module (Tarjan's algorithm, iterative)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in order:
            continue
        work = [(root, iter(sorted(graph[root])))]
        order[root] = low[root] = len(order)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in order:
                    order[succ] = low[succ] = len(order)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph[succ]))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], order[succ])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == order[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(frozenset(component))
    return found


def test_graph_sees_relative_imports():
    graph = _import_graph()
    assert "nbxtensor.dtypes" in graph["nbxtensor.promotion"]


def test_module_imports_are_acyclic():
    cycle = _find_cycle(_import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_graph_everywhere_sees_imports_inside_functions(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text("def f():\n    from . import high\n    return high\n")
    (package / "high.py").write_text("from . import low\n")
    assert _import_graph(root=package)["pkg.low"] == set()
    graph = _import_graph(everywhere=True, root=package)
    assert graph["pkg.low"] == {"pkg.high"} and graph["pkg.high"] == {"pkg.low"}
    assert _circles(graph) == [frozenset({"pkg.low", "pkg.high"})]


def test_circles_finds_each_strongly_connected_set():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": {"d"}, "f": {"a"}}
    assert sorted(map(sorted, _circles(graph))) == [["a", "b", "c"], ["d", "e"]]


def test_imports_anywhere_close_no_circle():
    circles = [sorted(c) for c in _circles(_import_graph(everywhere=True))]
    assert not circles, f"import circles (counting imports inside functions): {circles}"


def test_tensor_and_the_layers_below_the_ops_import_no_op():
    """Tensor gets the methods that need ops from the registry (``registry.bind``); allocation, lowering,
    the device errors, DLPack and the CUDA device layer sit below the ops."""
    graph = _import_graph(everywhere=True)
    below = ("nbxtensor.tensor", "nbxtensor.allocation", "nbxtensor.lowering", "nbxtensor.device.errors",
             "nbxtensor.interop.dlpack", "nbxtensor.device.cuda", "nbxtensor.launch")
    for module in below:
        reached, frontier = set(), [module]
        while frontier:
            for target in graph[frontier.pop()] - reached:
                reached.add(target)
                frontier.append(target)
        assert not {m for m in reached if m.startswith("nbxtensor.ops")}, (module, sorted(reached))


def test_dtypes_promotion_and_the_launch_path_sit_on_no_circle():
    """The dtypes keep the default dtype (promotion reads it from them), and the launch path takes its
    pointer arguments by the protocol ``launch.pointer_argument`` names instead of importing Tensor."""
    graph = _import_graph(everywhere=True)
    on_circles = set().union(*_circles(graph))
    for module in ("nbxtensor.dtypes", "nbxtensor.promotion", "nbxtensor.launch"):
        assert module not in on_circles, module
    assert "nbxtensor.promotion" not in graph["nbxtensor.dtypes"]
    assert "nbxtensor.tensor" not in graph["nbxtensor.launch"]
