"""``nbx export``: a PyTorch module named on the command line, exported with example inputs built from
their dtypes and shapes (or read from .npy files) and dimensions marked dynamic. Imports torch."""
from __future__ import annotations

import importlib
import importlib.util
import os
import re

import numpy as np
import torch

from .. import graph
from . import export


def _load_factory(spec: str):
    """``package.module:name`` or ``path/to/file.py:name`` to the object it names."""
    target, _, name = spec.rpartition(":")
    if not target or not name:
        raise SystemExit(f"nbx export: expected MODULE:NAME or FILE.py:NAME, got {spec!r}")
    if target.endswith(".py"):
        if not os.path.isfile(target):
            raise SystemExit(f"nbx export: no file {target}")
        loaded = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(target))[0], target)
        module = importlib.util.module_from_spec(loaded)
        loaded.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    if not hasattr(module, name):
        raise SystemExit(f"nbx export: {target} has no {name!r}")
    return getattr(module, name)


def _example_input(spec: str):
    """``NAME=FILE.npy`` or ``NAME=DTYPE[D0,D1,...]``: random normals for float dtypes, zeros otherwise."""
    name, _, value = spec.partition("=")
    if value.endswith(".npy"):
        return name, torch.from_numpy(np.load(value))
    m = re.fullmatch(r"(\w+)\[([\d, ]*)\]", value.strip())
    if not m or not isinstance(getattr(torch, m.group(1), None), torch.dtype):
        raise SystemExit(f"nbx export: --input {spec!r}: write NAME=FILE.npy or NAME=DTYPE[D0,D1,...], "
                         f"e.g. x=float32[2,128]")
    dtype, shape = getattr(torch, m.group(1)), [int(d) for d in m.group(2).split(",") if d.strip()]
    return name, torch.randn(shape, dtype=dtype) if dtype.is_floating_point else torch.zeros(shape, dtype=dtype)


def run(module_spec: str, input_specs, dynamic_specs, out_dir: str) -> int:
    """``nbx export``: the module ``module_spec`` names, called on the example inputs, written to ``out_dir``."""
    factory = _load_factory(module_spec)
    module = factory() if not isinstance(factory, torch.nn.Module) else factory
    torch.manual_seed(0)
    inputs = dict(_example_input(spec) for spec in input_specs)
    dims: dict = {}
    dynamic = {name: {} for name in inputs}
    for spec in dynamic_specs:
        place, _, bounds = spec.partition("=")
        name, _, axis = place.partition(".")
        symbol, low, high = (bounds.split(":") + ["", ""])[:3]
        if name not in inputs or not axis.isdigit() or not symbol:
            raise SystemExit(f"nbx export: --dynamic {spec!r}: write INPUT.AXIS=SYMBOL[:MIN:MAX] for a named --input")
        if symbol not in dims:
            dims[symbol] = torch.export.Dim(symbol, **({"min": int(low)} if low else {}),
                                            **({"max": int(high)} if high else {}))
        dynamic[name][int(axis)] = dims[symbol]
    out = export(module, tuple(inputs.values()), out_dir,
                 dynamic_shapes=tuple(dynamic.values()) if dynamic_specs else None)
    model = graph.load(out, device="cpu")
    print(f"exported {module_spec} to {out}: {len(model.steps)} ops, inputs {model.inputs}, outputs "
          f"{model.outputs}, {model.weight_bytes()} bytes of weights")
    return 0
