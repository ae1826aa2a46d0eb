"""``nbx export``: a PyTorch module named on the command line, exported with example inputs built from
their dtypes and shapes (or read from .npy files), or a Hugging Face checkpoint directory exported for
a task with token inputs; dimensions marked dynamic either way. Imports torch."""
from __future__ import annotations

import contextlib
import importlib
import importlib.util
import logging
import os
import re

import numpy as np
import torch

from .. import graph
from . import CommandError, TraceError, checkpoint, export


def _load_factory(spec: str):
    """``package.module:name`` or ``path/to/file.py:name`` to the object it names."""
    target, _, name = spec.rpartition(":")
    if not target or not name:
        raise CommandError(f"expected a checkpoint directory, MODULE:NAME or FILE.py:NAME, got {spec!r}")
    if target.endswith(".py"):
        if not os.path.isfile(target):
            raise CommandError(f"no file {target}")
        loaded = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(target))[0], target)
        module = importlib.util.module_from_spec(loaded)
        loaded.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(target)
        except ModuleNotFoundError as missing:
            if missing.name is None or not (target == missing.name or target.startswith(missing.name + ".")):
                raise  # the module exists; one it imports is missing, which its traceback shows best
            raise CommandError(f"no module named {missing.name!r}: install it or put it on PYTHONPATH, or name "
                               f"a file as path/to/file.py:{name}") from None
    if not hasattr(module, name):
        raise CommandError(f"{target} has no {name!r}")
    return getattr(module, name)


def _example_input(spec: str):
    """``NAME=FILE.npy`` or ``NAME=DTYPE[D0,D1,...]``: random normals for float dtypes, zeros otherwise."""
    name, _, value = spec.partition("=")
    if value.endswith(".npy"):
        if not os.path.isfile(value):
            raise CommandError(f"--input {spec!r}: no file {value}; write NAME=FILE.npy for an existing file or "
                               f"NAME=DTYPE[D0,D1,...]")
        return name, torch.from_numpy(np.load(value))
    m = re.fullmatch(r"(\w+)\[([\d, ]*)\]", value.strip())
    if not m or not isinstance(getattr(torch, m.group(1), None), torch.dtype):
        raise CommandError(f"--input {spec!r}: write NAME=FILE.npy or NAME=DTYPE[D0,D1,...], e.g. x=float32[2,128]")
    dtype, shape = getattr(torch, m.group(1)), [int(d) for d in m.group(2).split(",") if d.strip()]
    return name, torch.randn(shape, dtype=dtype) if dtype.is_floating_point else torch.zeros(shape, dtype=dtype)


def _place_dynamic(specs, inputs: dict, placed: dict, bounds: dict) -> None:
    """Apply ``--dynamic INPUT.AXIS=SYMBOL[:MIN:MAX]`` specs to ``placed`` ((input, axis) -> symbol) and
    ``bounds`` (symbol -> (min, max), None for torch's default). A spec on a place that already has a
    symbol renames that symbol wherever it appears, keeping its bounds unless the spec gives new ones."""
    for spec in specs:
        place, _, given = spec.partition("=")
        name, _, axis = place.partition(".")
        symbol, low, high = (given.split(":") + ["", ""])[:3]
        if name not in inputs or not axis.isdigit() or not symbol.isidentifier() \
                or not all(bound.isdigit() for bound in (low, high) if bound):
            raise CommandError(f"--dynamic {spec!r}: write INPUT.AXIS=SYMBOL[:MIN:MAX] for an input among "
                               f"{', '.join(inputs) or 'none'}")
        axis = int(axis)
        if axis >= inputs[name].dim():
            raise CommandError(f"--dynamic {spec!r}: {name} has {inputs[name].dim()} dimensions")
        previous = placed.get((name, axis))
        if previous is not None and previous != symbol:
            for where, placed_symbol in list(placed.items()):
                if placed_symbol == previous:
                    placed[where] = symbol
        placed[(name, axis)] = symbol
        old_low, old_high = bounds.pop(previous, None) or bounds.get(symbol) or (None, None)
        bounds[symbol] = (int(low) if low else old_low, int(high) if high else old_high)


def _dynamic_shapes(inputs: dict, placed: dict, bounds: dict):
    """torch.export's dynamic_shapes, one Dim per symbol, or None when nothing is dynamic."""
    if not placed:
        return None
    dims = {}
    for symbol in dict.fromkeys(placed.values()):
        low, high = bounds.get(symbol, (None, None))
        dims[symbol] = torch.export.Dim(symbol, **({} if low is None else {"min": low}),
                                        **({} if high is None else {"max": high}))
    return tuple({axis: dims[symbol] for (where, axis), symbol in placed.items() if where == name}
                 for name in inputs)


def _report(label: str, out: str) -> None:
    model = graph.load(out, device="cpu")

    def describe(tensor_id):
        entry = model.tensors[tensor_id]
        return f"{tensor_id} {entry['dtype']}[{', '.join(map(str, entry['shape']))}]"

    print(f"exported {label} to {out}: {len(model.steps)} ops, {model.weight_bytes()} bytes of weights")
    print(f"  inputs: {', '.join(map(describe, model.inputs))}")
    print(f"  outputs: {', '.join(map(describe, model.outputs))}")
    if model.symbols:
        print("  symbols: " + ", ".join(f"{s.name} in [{s.min}, {'inf' if s.max is None else s.max}] (traced {s.trace})"
                                        for s in model.symbols.values()))
    traced = model.trace_values()
    if len(traced) == len(model.symbols):
        shapes = ", ".join(f"{name}={value}" for name, value in traced.items()) or "fixed shapes"
        print(f"  planned activation peak ({shapes}): {model.plan(traced).arena_bytes} bytes; "
              f"other sizes: nbx plan {out} --dim SYMBOL=VALUE")


def run(target: str, input_specs, dynamic_specs, out_dir: str, task=None, with_attention_mask=False) -> int:
    """``nbx export``: the module ``target`` names, or the checkpoint directory it is, written to ``out_dir``."""
    if os.path.isdir(target):
        if input_specs:
            raise CommandError("a checkpoint directory takes no --input: its token inputs come from the task")
        module, task_spec, config = checkpoint.load(target, task)
        inputs, placed, bounds = checkpoint.example_inputs(config, task_spec, with_attention_mask)
        label = f"{target} ({config.model_type}, {task})"
    else:
        if task is not None or with_attention_mask:
            raise CommandError(f"--task and --with-attention-mask go with a checkpoint directory; "
                               f"{target} is not a directory")
        factory = _load_factory(target)
        module = factory() if not isinstance(factory, torch.nn.Module) else factory
        torch.manual_seed(0)
        inputs, placed, bounds = dict(_example_input(spec) for spec in input_specs), {}, {}
        label = target
    _place_dynamic(dynamic_specs, inputs, placed, bounds)
    remedy = ("this model type may not trace with torch.export" if os.path.isdir(target) else
              "check that each --input has the dtype and shape forward takes, in forward's order, and that "
              "every --dynamic range holds the example's size")
    try:
        with _torch_logs_quiet():
            out = export(module, tuple(inputs.values()), out_dir,
                         dynamic_shapes=_dynamic_shapes(inputs, placed, bounds))
    except TraceError as error:
        raise CommandError(f"{error}; {remedy}") from None
    _report(label, out)
    return 0


@contextlib.contextmanager
def _torch_logs_quiet():
    """torch logs a failed trace, with a traceback, before raising it; the command reports the raised error
    in one line, so torch's records below CRITICAL are not printed meanwhile."""
    logger = logging.getLogger("torch")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)
