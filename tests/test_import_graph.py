"""The nbxtensor package's imports form a graph without cycles (layering, issue 25): those at module level
none at all, and those anywhere (inside functions too, which run later but tie the modules as much) none
but the circles named below, which may shrink and never grow."""
from __future__ import annotations

import ast
import pathlib

import nbxtensor

_ROOT = pathlib.Path(nbxtensor.__file__).parent


def _module_name(path: pathlib.Path) -> str:
    parts = ("nbxtensor",) + path.relative_to(_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


# Circles that imports inside functions still close, by name; each entry is one strongly connected set of
# modules, and the test fails when a circle gains a module, a new one forms, or one shrinks (then shrink
# its entry too).
ALLOWED_CIRCLES = {
    # Tensor methods (copy, indexing, printing) call primitive ops, the primitives call one another
    # (copies make views, views index, indexing creates and copies), creation reads DLPack capsules,
    # whose import reads the CUDA device layer, and that layer's Triton driver makes its benchmark
    # buffer with an op. Taken apart by an allocation module below the ops and methods attached by the
    # registry.
    "tensor and the primitive ops": frozenset({
        "nbxtensor.tensor", "nbxtensor.ops.copy", "nbxtensor.ops.creation", "nbxtensor.ops.indexing",
        "nbxtensor.ops.views", "nbxtensor.ops.plans", "nbxtensor.interop", "nbxtensor.interop.dlpack",
        "nbxtensor.device.cuda"}),
}


def _import_graph(everywhere: bool = False) -> dict[str, set[str]]:
    """Module -> the package modules it imports at module level, or with ``everywhere`` by any import
    statement in it (inside functions and methods too)."""
    modules = {_module_name(p): p for p in _ROOT.rglob("*.py")}
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


def test_graph_everywhere_sees_imports_inside_functions():
    graph = _import_graph(everywhere=True)
    # ``tensor.Tensor.where`` imports the registry when called
    assert "nbxtensor.ops.registry" in graph["nbxtensor.tensor"]
    assert "nbxtensor.ops.registry" not in _import_graph()["nbxtensor.tensor"]


def test_circles_finds_each_strongly_connected_set():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": {"d"}, "f": {"a"}}
    assert sorted(map(sorted, _circles(graph))) == [["a", "b", "c"], ["d", "e"]]


def test_imports_anywhere_close_only_the_named_circles():
    circles = set(_circles(_import_graph(everywhere=True)))
    unexpected = [sorted(c) for c in circles - set(ALLOWED_CIRCLES.values())]
    assert not unexpected, f"import circles not in ALLOWED_CIRCLES: {unexpected}"
    gone = [name for name, c in ALLOWED_CIRCLES.items() if c not in circles]
    assert not gone, f"circles now changed or gone: update their ALLOWED_CIRCLES entries: {gone}"


def test_dtypes_promotion_and_the_launch_path_sit_on_no_circle():
    """The dtypes keep the default dtype (promotion reads it from them), and the launch path takes its
    pointer arguments by the protocol ``launch.pointer_argument`` names instead of importing Tensor."""
    graph = _import_graph(everywhere=True)
    on_circles = set().union(*_circles(graph))
    for module in ("nbxtensor.dtypes", "nbxtensor.promotion", "nbxtensor.launch"):
        assert module not in on_circles, module
    assert "nbxtensor.promotion" not in graph["nbxtensor.dtypes"]
    assert "nbxtensor.tensor" not in graph["nbxtensor.launch"]
