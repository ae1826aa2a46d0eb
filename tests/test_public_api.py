"""The public names stay as they are while the package's insides move: every ``nbxtensor`` name and every
Tensor attribute (with its kind: function, property ...) as pinned in ``public_api.json``. Submodules may
be added (a new layer is a new module), never lost."""
from __future__ import annotations

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
