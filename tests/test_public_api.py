"""The public names stay as they are while the package's insides move: every ``nbxtensor`` name and every
Tensor attribute (with its kind: function, property ...) as pinned in ``public_api.json``. Submodules may
be added (a new layer is a new module), never lost."""
from __future__ import annotations

import ast
import inspect
import json
import pathlib
import types

import nbxtensor as nbx

_PINNED = json.loads((pathlib.Path(__file__).parent / "public_api.json").read_text())


def test_tensor_attributes_are_pinned():
    found = {name: type(inspect.getattr_static(nbx.Tensor, name)).__name__ for name in dir(nbx.Tensor)}
    assert found == _PINNED["Tensor"]


def test_namespace_names_are_pinned():
    public = [name for name in dir(nbx) if not name.startswith("_")]
    names = sorted(n for n in public if not isinstance(getattr(nbx, n), types.ModuleType))
    modules = {n for n in public if isinstance(getattr(nbx, n), types.ModuleType)}
    assert names == _PINNED["nbxtensor"]
    assert set(_PINNED["modules"]) <= modules


def test_the_namespace_is_the_same_in_every_kernel_mode():
    """Names that ``nbxtensor/__init__.py`` binds under a condition (a compiling process's CUDA backend) are
    private: a GPU process and an interpreting one list the same public names."""
    tree = ast.parse((pathlib.Path(nbx.__file__)).read_text())
    bound = []
    for statement in tree.body:
        if isinstance(statement, ast.If):
            for node in ast.walk(statement):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    bound += [alias.asname or alias.name.split(".")[0] for alias in node.names]
                elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    bound.append(node.id)
    assert bound and [name for name in bound if not name.startswith("_")] == []


def test_only_the_registry_adds_tensor_attributes():
    """Tensor's attributes beyond its class body come from ``registry.bind`` alone (op ``methods=`` and
    ``registry.tensor_attribute``): no module assigns to Tensor or calls ``setattr`` on it."""
    root = pathlib.Path(nbx.__file__).parent
    found = []
    for path in root.rglob("*.py"):
        if path == root / "ops" / "registry.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            targets = node.targets if isinstance(node, ast.Assign) else []
            assigned = [t for t in targets if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                        and t.value.id == "Tensor"]
            is_setattr = (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr"
                          and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id == "Tensor")
            if assigned or is_setattr:
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    assert not found, found
