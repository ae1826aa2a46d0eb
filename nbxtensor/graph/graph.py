"""Loading a graph directory (validated before anything runs) and executing it through the registry."""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass

import numpy as np

from .. import progress
from .. import shape as S
from ..allocation import new_tensor
from ..device import resolve
from ..dtypes import get_dtype
from ..io.safetensors import SafetensorsError, safe_open
from ..launch import _ALIGN_MASK
from ..ops.copy import copy_ as _copy_
from ..ops.creation import tensor as _tensor
from ..ops.registry import MAYBE_VIEW, VIEW, Cost, OpDef, TensorMeta, families, nbytes, workspace_bytes
from ..tensor import Tensor
from . import calling
from .arena import ArenaRun
from .fuse import fuse as fuse_steps
from .format import (BUFFER, CONST, DTYPE_NAMES, FORMAT_TAG, FORMAT_VERSION, GRAPH_FILE, INPUT, MAX_TENSOR_BYTES,
                     NAMESPACES, PARAM, WEIGHT_FORMAT_RANKS, WEIGHT_NAMESPACES, WEIGHTS_INDEX_FILE, GraphError,
                     argument_decoder, check_argument, decode_constant, decode_json, evaluate_shape,
                     parse_expression)
from .planner import Block, MemoryPlan, plan as plan_blocks

__all__ = ["Graph", "GraphError", "load"]


@dataclass(frozen=True)
class Step:
    id: str
    aten: str
    op: OpDef
    args: list
    kwargs: dict
    outputs: list  # tensor ids, None where an output of a tuple-returning op is unused


@dataclass(frozen=True)
class Symbol:
    name: str
    min: int
    max: int | None
    trace: int | None


def load(model_dir, device=None, fuse: bool = True, weights: bool = True) -> "Graph":
    """The graph in ``model_dir`` (``graph.json`` and its safetensors weights), validated, with its
    weights on ``device`` (default: nbxtensor's default device); ``fuse``: its op chains that
    ``graph/fuse.py`` knows rewritten into single ops (``Graph.fusions`` counts them); ``weights=False``:
    the graph's metadata alone, no weight read (for the census and pricing: such a graph cannot run)."""
    model_dir = os.fspath(model_dir)
    if not os.path.exists(os.path.join(model_dir, GRAPH_FILE)):
        raise GraphError(f"{model_dir}: no {GRAPH_FILE} here")
    path = _file_inside(model_dir, GRAPH_FILE, "graph file")
    return Graph(_read_json(path), model_dir, resolve(device), fuse=fuse, weights=weights)


def _workspace_block(step: Step) -> str:
    """The planner's name for ``step``'s workspace."""
    return f"{step.id}#workspace"


def _fail(path: str, message: str):
    raise GraphError(f"{path}: {message}")


def _file_inside(model_dir: str, name, entry: str) -> str:
    """The real path of the regular file ``name`` names in ``model_dir``, after following symlinks;
    ``GraphError`` naming ``entry`` (the field that names it) where ``name`` is not a file name, leads out
    of the directory, or is missing or no regular file (a directory, a FIFO that would block a read)."""
    if not isinstance(name, str) or not name:
        _fail(model_dir, f"{entry}: expected a file name, got {type(name).__name__} {name!r}")
    root = os.path.realpath(model_dir)
    try:
        resolved = os.path.realpath(os.path.join(root, name))
        outside = os.path.commonpath([root, resolved]) != root
        mode = None if outside else os.stat(resolved).st_mode
    except FileNotFoundError:
        _fail(model_dir, f"{entry}: {name!r} does not exist")
    except (OSError, ValueError) as error:  # ValueError: a null character in the name
        _fail(model_dir, f"{entry}: {name!r} cannot be opened ({type(error).__name__})")
    if outside:
        _fail(model_dir, f"{entry}: {name!r} leads outside the model directory; a graph reads only its own files")
    if not stat.S_ISREG(mode):
        _fail(model_dir, f"{entry}: {name!r} is not a regular file")
    return resolved


def _read_json(path: str):
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError as error:
        _fail(path, f"cannot be read ({type(error).__name__})")
    return decode_json(data, path)


class _Marker:
    """Where a tensor goes in a step's bound arguments: the slot of the environment that holds it."""
    __slots__ = ("slot",)

    def __init__(self, slot: int):
        self.slot = slot


def _holds_marker(value) -> bool:
    if type(value) is _Marker:
        return True
    if isinstance(value, (list, tuple)):
        return any(_holds_marker(item) for item in value)
    if isinstance(value, dict):
        return any(_holds_marker(item) for item in value.values())
    return False


def _substitute(value, env):
    if type(value) is _Marker:
        return env[value.slot]
    if isinstance(value, (list, tuple)):
        return type(value)(_substitute(item, env) for item in value)
    if isinstance(value, dict):
        return {k: _substitute(v, env) for k, v in value.items()}
    return value


def _deep_binder(args, kwargs):
    """``bound(env)`` for arguments with tensors nested deeper than a list: substituted recursively."""
    return lambda env: (_substitute(args, env), _substitute(kwargs, env))


class Graph:
    """A loaded graph; call it with its inputs (nbxtensor tensors or NumPy arrays) in order. Returns one
    tensor for a graph with one output, else a tuple."""

    def __init__(self, document: dict, model_dir: str, device, fuse: bool = True, weights: bool = True):
        self.model_dir = model_dir
        self.path = os.path.join(model_dir, GRAPH_FILE)
        self.device = device
        self.document = document
        self._read_header(document)
        self.symbols = self._read_symbols(document.get("symbols", {}))
        self.tensors = self._read_tensors(document.get("tensors"))
        self.inputs = self._read_endpoints(document, "inputs")
        self._check_symbols_bound()
        self.outputs = self._read_endpoints(document, "outputs")
        self.steps = self._read_ops(document.get("ops"))
        self._check_outputs_defined()
        self.fusions: dict[str, int] = {}
        if fuse:
            self.steps, self.fusions = fuse_steps(self, self.steps)
        self.weights = self._load_weights() if weights else {}
        self.constants = self._load_constants() if weights else {}
        self._ids = list(self.tensors)  # a run's environment is a list, indexed by a tensor's place here
        self._last_use = self._last_uses()
        self._freed_after = self._frees()
        self._decoders: dict[str, tuple] = {}  # step id -> its arguments' decoders, made at first use
        self._prepared: dict[tuple, tuple] = {}  # symbol values -> ``_runs``
        self._inferred: dict[tuple, dict[str, TensorMeta]] = {}
        self._unused: dict[tuple, dict[str, int]] = {}  # symbol values -> step id -> its unused outputs' bytes
        self._plans: dict[tuple, MemoryPlan] = {}

    # ---- validation -------------------------------------------------------------------------------
    def _read_header(self, document) -> None:
        if not isinstance(document, dict):
            _fail(self.path, "expected a JSON object at the top")
        tag, version = document.get("format"), document.get("version")
        if tag != FORMAT_TAG:
            _fail(self.path, f"format {tag!r} is not {FORMAT_TAG!r}; this is not an nbxtensor graph")
        if type(version) is not int:
            _fail(self.path, f"version {version!r} is not an integer")
        if version != FORMAT_VERSION:
            _fail(self.path, f"{FORMAT_TAG} version {version} is unknown; this nbxtensor reads version {FORMAT_VERSION}")

    def _read_symbols(self, raw) -> dict[str, Symbol]:
        if not isinstance(raw, dict):
            _fail(self.path, "symbols must be an object of name: {min, max, trace}")
        symbols = {}
        for name, entry in raw.items():
            if not name.isidentifier() or not isinstance(entry, dict):
                _fail(self.path, f"symbol {name!r}: expected an identifier mapped to {{min, max, trace}}")
            low, high, trace = entry.get("min", 0), entry.get("max"), entry.get("trace")
            if type(low) is not int or (high is not None and type(high) is not int) or \
                    (trace is not None and type(trace) is not int):
                _fail(self.path, f"symbol {name!r}: min, max and trace must be integers (max may be null)")
            if low < 0:
                _fail(self.path, f"symbol {name!r}: min {low} is negative; a symbol is a size")
            if high is not None and high < low:
                _fail(self.path, f"symbol {name!r}: max {high} is below min {low}")
            symbols[name] = Symbol(name, low, high, trace)
        return symbols

    def _read_tensors(self, raw) -> dict[str, dict]:
        if not isinstance(raw, dict):
            _fail(self.path, "tensors must be an object keyed by tensor id")
        for tensor_id, entry in raw.items():
            where = f"tensor {tensor_id!r}"
            if not isinstance(entry, dict) or not isinstance(entry.get("shape"), list):
                _fail(self.path, f"{where}: expected {{shape: [...], dtype: name}}")
            if not isinstance(entry.get("dtype"), str) or entry["dtype"] not in DTYPE_NAMES:
                _fail(self.path, f"{where}: dtype {entry.get('dtype')!r} is not one of {', '.join(sorted(DTYPE_NAMES))}")
            for dim in entry["shape"]:
                if isinstance(dim, str):
                    try:
                        parse_expression(dim, self.symbols)
                    except ValueError as error:
                        _fail(self.path, f"{where}: {error}")
                elif type(dim) is not int or dim < 0:
                    _fail(self.path, f"{where}: dimension {dim!r} is neither a size nor a symbol expression")
            if tensor_id.startswith(WEIGHT_NAMESPACES):
                if not isinstance(entry.get("weight"), str):
                    _fail(self.path, f"{where}: a parameter or buffer names its safetensors key in 'weight'")
                if not all(type(d) is int for d in entry["shape"]):
                    _fail(self.path, f"{where}: a parameter or buffer has a fixed shape, not {entry['shape']}")
            if tensor_id.startswith(CONST) and not isinstance(entry.get("data"), str) \
                    and not isinstance(entry.get("weight"), str):
                _fail(self.path, f"{where}: a constant carries inline 'data' (base64) or a safetensors 'weight' key")
            if "memory_format" in entry:
                self._check_weight_format(where, entry)
        return raw

    def _check_weight_format(self, where: str, entry: dict) -> None:
        """A weight's ``memory_format`` names a channels-last format of its rank."""
        name, rank = entry["memory_format"], len(entry["shape"])
        if not isinstance(entry.get("weight"), str):
            _fail(self.path, f"{where}: only a tensor read from the weights (with a 'weight' key) has a memory_format")
        if WEIGHT_FORMAT_RANKS.get(name) != rank:
            _fail(self.path, f"{where}: memory_format {name!r} of a rank-{rank} weight is not one of "
                             f"{', '.join(f'{n} (rank {r})' for n, r in WEIGHT_FORMAT_RANKS.items())}")

    def _read_endpoints(self, document, key: str) -> list[str]:
        ids = document.get(key)
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            _fail(self.path, f"{key} must be a list of tensor ids")
        for tensor_id in ids:
            if tensor_id not in self.tensors:
                _fail(self.path, f"{key[:-1]} {tensor_id!r} is not among the tensors")
            if key == "inputs" and not tensor_id.startswith(INPUT):
                _fail(self.path, f"input {tensor_id!r} is not in the {INPUT} namespace")
        return ids

    def _check_symbols_bound(self) -> None:
        """Every symbol takes its value from an input dimension that is exactly that symbol."""
        bound = {dim for t in self.inputs for dim in self.tensors[t]["shape"] if isinstance(dim, str)}
        for name in self.symbols:
            if name not in bound:
                _fail(self.path, f"symbol {name!r}: no input dimension binds it (an input's shape must hold "
                                 f"{name!r} as one of its dimensions)")

    def _read_ops(self, raw) -> list[Step]:
        if not isinstance(raw, list):
            _fail(self.path, "ops must be a list in execution order")
        defined = {t for t in self.tensors if t.startswith(NAMESPACES)}
        seen_ids, steps = set(), []
        for position, entry in enumerate(raw):
            if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
                _fail(self.path, f"op #{position}: expected an object with an 'id'")
            op_id, aten = entry["id"], entry.get("op")
            where = f"op {op_id!r} ({aten})"
            if op_id in seen_ids:
                _fail(self.path, f"op id {op_id!r} appears twice")
            seen_ids.add(op_id)
            try:
                op = calling.resolve(aten)
            except (KeyError, TypeError):
                _fail(self.path, f"op {op_id!r}: {aten!r} is not in the registry; families that exist: "
                                 f"{', '.join(families())}")
            args, kwargs, outputs = entry.get("args", []), entry.get("kwargs", {}), entry.get("outputs")
            if not isinstance(args, list) or not isinstance(kwargs, dict):
                _fail(self.path, f"{where}: args must be a list and kwargs an object")
            if not isinstance(outputs, list) or not outputs:
                _fail(self.path, f"{where}: outputs must be a non-empty list of tensor ids (null for unused)")
            try:
                refs = [r for a in [*args, *kwargs.values()] for r in check_argument(a, self.symbols, where)]
            except ValueError as error:
                _fail(self.path, str(error))
            for ref in refs:
                if ref not in self.tensors:
                    _fail(self.path, f"{where}: reads tensor {ref!r}, which is not among the tensors")
                if ref not in defined:
                    _fail(self.path, f"{where}: reads tensor {ref!r} before any op defines it")
            for out in outputs:
                if out is None:
                    continue
                if not isinstance(out, str) or out not in self.tensors:
                    _fail(self.path, f"{where}: output {out!r} is not among the tensors")
                if out in defined or out.startswith(NAMESPACES):
                    _fail(self.path, f"{where}: output {out!r} is already defined")
                defined.add(out)
            steps.append(Step(op_id, aten, op, args, kwargs, outputs))
        self._defined = defined
        return steps

    def _check_outputs_defined(self) -> None:
        for out in self.outputs:
            if out not in self._defined:
                _fail(self.path, f"output {out!r} is never defined by an op")

    def _weight_files(self) -> dict[str, str]:
        """Safetensors key -> file, from the index when there is one (the document's ``weights_index``,
        else the default name), else from every *.safetensors here. Every file lies inside the directory."""
        named = "weights_index" in self.document
        index_name = self.document.get("weights_index", WEIGHTS_INDEX_FILE)
        if named or os.path.lexists(os.path.join(self.model_dir, index_name)):
            index_path = _file_inside(self.model_dir, index_name, "weights_index" if named else index_name)
            index = _read_json(index_path)
            weight_map = index.get("weight_map") if isinstance(index, dict) else None
            if not isinstance(weight_map, dict):
                _fail(index_path, f"weight_map: expected an object of safetensors key: file name, got "
                                  f"{type(weight_map).__name__}")
            return {key: _file_inside(self.model_dir, name, f"{index_name}: weight_map[{key!r}]")
                    for key, name in weight_map.items()}
        located = {}
        for name in sorted(os.listdir(self.model_dir)):
            if name.endswith(".safetensors"):
                file_path = _file_inside(self.model_dir, name, "weights file")
                with safe_open(file_path, device="cpu") as file:
                    located.update({key: file_path for key in file.keys()})
        return located

    def _load_weights(self) -> dict[str, Tensor]:
        wanted = {t: e for t, e in self.tensors.items()
                  if t.startswith(WEIGHT_NAMESPACES) or (t.startswith(CONST) and "data" not in e)}
        if not wanted:
            return {}
        try:
            located = self._weight_files()
        except SafetensorsError as error:
            raise GraphError(str(error)) from None
        except OSError as error:
            raise GraphError(f"{self.model_dir}: the weights cannot be read ({type(error).__name__})") from None
        by_file: dict[str, list[str]] = {}
        for tensor_id, entry in wanted.items():
            key = entry["weight"]
            if key not in located:
                _fail(self.path, f"tensor {tensor_id!r}: weight {key!r} is in no safetensors file of {self.model_dir}")
            by_file.setdefault(located[key], []).append(tensor_id)
        weights = {}
        declared_bytes = {tensor_id: nbytes(TensorMeta(tuple(entry["shape"]), get_dtype(entry["dtype"])))
                          for tensor_id, entry in wanted.items()}
        with progress.task("loading weights", total=sum(declared_bytes.values()), unit="bytes") as shown:
            for file_path, ids in by_file.items():
                try:
                    with safe_open(file_path, device=self.device) as file:
                        for tensor_id in ids:
                            weights[tensor_id] = self._load_weight(file, file_path, tensor_id)
                            shown.advance(declared_bytes[tensor_id])
                except (SafetensorsError, KeyError, OSError) as error:
                    raise GraphError(f"{file_path}: {error}") from None
        return weights

    def _load_weight(self, file: safe_open, file_path: str, tensor_id: str) -> Tensor:
        entry, key = self.tensors[tensor_id], self.tensors[tensor_id]["weight"]
        info = file.info(key)
        if list(info.shape) != entry["shape"] or info.dtype.name != entry["dtype"]:
            _fail(file_path, f"weight {key!r} for {tensor_id!r} is {info.dtype.name}{list(info.shape)}; "
                             f"{GRAPH_FILE} declares {entry['dtype']}{entry['shape']}")
        weight = file.get_tensor(key)
        if weight.device.type == "cpu" and weight.data_ptr() & _ALIGN_MASK:
            # the file put it off the alignment kernels specialise on, so every op would
            # copy it first: one aligned copy now, for every run of the graph
            weight = _tensor(weight.numpy(), dtype=weight.dtype, device=self.device)
        if "memory_format" in entry:
            # the file holds it row-major; the module had it channels-last, which decides its users' layouts
            # (ATen's strides exactly: a 1x1 convolution's weight is contiguous either way, not alike strided)
            strides = S.channels_last_strides(weight.shape, entry["memory_format"])
            weight = _copy_(new_tensor(weight.shape, weight.dtype, weight.device, strides), weight)
        return weight

    def _load_constants(self) -> dict[str, Tensor]:
        constants = {}
        for tensor_id, entry in self.tensors.items():
            if tensor_id.startswith(CONST) and "data" in entry:
                try:
                    array = decode_constant(entry["data"], tuple(entry["shape"]), entry["dtype"])
                except (ValueError, TypeError) as error:
                    _fail(self.path, f"tensor {tensor_id!r}: {error}")
                constants[tensor_id] = _tensor(array, dtype=get_dtype(entry["dtype"]), device=self.device)
        return constants

    def _last_uses(self) -> dict[str, int]:
        last = {}
        for index, step in enumerate(self.steps):
            for arg in [*step.args, *step.kwargs.values()]:
                for ref in check_argument(arg, self.symbols, step.id):
                    last[ref] = index
        end = len(self.steps)
        for out in self.outputs:
            last[out] = end
        return last

    def _frees(self) -> list[list[str]]:
        """Per step, the intermediates it reads for the last time (freed after it runs)."""
        freed = [[] for _ in self.steps]
        keep = set(self.outputs)
        for ref, index in self._last_use.items():
            if index < len(self.steps) and ref not in keep and not ref.startswith((PARAM, BUFFER, CONST)):
                freed[index].append(ref)
        return freed

    # ---- shapes -----------------------------------------------------------------------------------
    def bind(self, shapes) -> dict[str, int]:
        """Symbol values from the actual input shapes, checked against each symbol's range."""
        if len(shapes) != len(self.inputs):
            raise GraphError(f"{self.path}: the graph takes {len(self.inputs)} inputs "
                             f"({', '.join(self.inputs)}), got {len(shapes)}")
        values: dict[str, int] = {}
        for tensor_id, shape in zip(self.inputs, shapes):
            declared = self.tensors[tensor_id]["shape"]
            if len(shape) != len(declared):
                raise GraphError(f"{self.path}: input {tensor_id!r} has {len(declared)} dimensions {declared}, "
                                 f"got shape {list(shape)}")
            for axis, (want, got) in enumerate(zip(declared, shape)):
                if isinstance(want, str) and want in self.symbols:
                    if values.setdefault(want, got) != got:
                        raise GraphError(f"{self.path}: symbol {want!r} is {values[want]} from an earlier input "
                                         f"but {got} in dimension {axis} of {tensor_id!r}")
        self.check_symbols(values)
        for tensor_id, shape in zip(self.inputs, shapes):
            expected = self._shape(tensor_id, values)
            if tuple(shape) != expected:
                raise GraphError(f"{self.path}: input {tensor_id!r} must have shape {list(expected)} "
                                 f"({self.tensors[tensor_id]['shape']}), got {list(shape)}")
        return values

    def check_symbols(self, values: dict[str, int]) -> None:
        """``values`` give every symbol a value inside its range, and name no other."""
        for name in self.symbols:
            if name not in values:
                raise GraphError(f"{self.path}: symbol {name!r} has no value; values given: "
                                 f"{', '.join(values) or 'none'}")
        for name, value in values.items():
            symbol = self.symbols.get(name)
            if symbol is None:
                raise GraphError(f"{self.path}: no symbol named {name!r}; symbols: {', '.join(self.symbols) or 'none'}")
            if value < symbol.min or (symbol.max is not None and value > symbol.max):
                raise GraphError(f"{self.path}: symbol {name!r} = {value} is outside its range "
                                 f"[{symbol.min}, {'inf' if symbol.max is None else symbol.max}]")

    def trace_values(self) -> dict[str, int]:
        return {name: s.trace for name, s in self.symbols.items() if s.trace is not None}

    def infer(self, values: dict[str, int]) -> dict[str, TensorMeta]:
        """Every tensor's concrete shape and dtype for symbol ``values``, through the ops' meta rules,
        checked against the shapes the file declares."""
        key = tuple(sorted(values.items()))
        if key in self._inferred:
            return self._inferred[key]
        metas = {}
        for tensor_id, entry in self.tensors.items():
            if tensor_id.startswith(NAMESPACES):
                metas[tensor_id] = self._sized(tensor_id, TensorMeta(self._shape(tensor_id, values),
                                                                     get_dtype(entry["dtype"])))
        unused = {}
        for step in self.steps:
            args, kwargs = self._arguments(step, metas.__getitem__, values)
            try:
                produced = step.op.meta(*args, **kwargs)
            except Exception as error:  # a meta rule refusing its arguments: name the op
                raise GraphError(f"{self.path}: op {step.id!r} ({step.aten}): the meta rule refuses its "
                                 f"arguments: {error}") from None
            for out, meta in zip(step.outputs, self._as_list(step, produced)):
                if out is None:
                    if meta is not None and nbytes(meta):
                        unused[step.id] = unused.get(step.id, 0) + workspace_bytes(nbytes(meta))
                    continue
                expected = TensorMeta(self._shape(out, values), get_dtype(self.tensors[out]["dtype"]))
                actual = self._sized(out, TensorMeta(tuple(meta.shape), meta.dtype))
                if actual != expected:
                    raise GraphError(f"{self.path}: op {step.id!r} ({step.aten}) makes {out!r} as "
                                     f"{actual.dtype.name}{list(actual.shape)}; the file declares "
                                     f"{expected.dtype.name}{list(expected.shape)}")
                metas[out] = actual
        self._inferred[key], self._unused[key] = metas, unused
        return metas

    def unused_output_bytes(self, values: dict[str, int]) -> dict[str, int]:
        """Step id -> the bytes of the outputs its op makes that nothing reads (a max pool's indices, a
        group norm's statistics): the op allocates them all the same, so its step's workspace holds them."""
        self.infer(values)
        return self._unused[tuple(sorted(values.items()))]

    def _shape(self, tensor_id: str, values: dict[str, int]) -> tuple[int, ...]:
        """The declared shape of ``tensor_id`` for symbol ``values``."""
        try:
            shape = evaluate_shape(self.tensors[tensor_id]["shape"], values)
        except ValueError as error:
            _fail(self.path, f"tensor {tensor_id!r}: {error}")
        if any(dim < 0 for dim in shape):
            _fail(self.path, f"tensor {tensor_id!r}: shape {self.tensors[tensor_id]['shape']} is {list(shape)} for "
                             f"{values}, a negative size")
        return shape

    def _sized(self, tensor_id: str, meta: TensorMeta) -> TensorMeta:
        """``meta``, refused where its bytes are past what memory can be addressed with."""
        size = nbytes(meta)
        if size > MAX_TENSOR_BYTES:
            _fail(self.path, f"tensor {tensor_id!r}: {meta.dtype.name}{list(meta.shape)} takes {size} bytes, more "
                             f"than the {MAX_TENSOR_BYTES} one tensor may take")
        return meta

    def _as_list(self, step: Step, produced) -> list:
        if produced is None:  # an op writing its operands in place: every output it lists is unused (null)
            if any(out is not None for out in step.outputs):
                raise GraphError(f"{self.path}: op {step.id!r} ({step.aten}) returns nothing; the file names its "
                                 f"outputs {[out for out in step.outputs if out is not None]}")
            return [None] * len(step.outputs)
        # a TensorMeta is itself a tuple, so a single result is told apart by having a shape
        results = [produced] if hasattr(produced, "shape") else list(produced)
        if len(results) < len(step.outputs) or (len(step.outputs) == 1 and len(results) != 1):
            raise GraphError(f"{self.path}: op {step.id!r} ({step.aten}) returns {len(results)} results; "
                             f"the file lists {len(step.outputs)} outputs")
        return results

    def _decoders_of(self, step: Step) -> tuple:
        """(positional, named) decoders of ``step``'s arguments, made at first use."""
        decoders = self._decoders.get(step.id)
        if decoders is None:
            decoders = self._decoders[step.id] = ([argument_decoder(a) for a in step.args],
                                                  {k: argument_decoder(v) for k, v in step.kwargs.items()})
        return decoders

    def _arguments(self, step: Step, tensor_of, values):
        """``step``'s arguments for its op's meta and cost rules (a run adds the device itself: ``_runs``)."""
        positional, named = self._decoders_of(step)
        try:
            args = [decode(tensor_of, values) for decode in positional]
            kwargs = {k: decode(tensor_of, values) for k, decode in named.items()}
        except ValueError as error:  # a symbolic argument that has no value for these symbols
            _fail(self.path, f"op {step.id!r} ({step.aten}): {error}")
        try:
            return calling.adapt(step.aten, args, kwargs)
        except (ValueError, TypeError, IndexError) as error:  # an adapter unpacking too few arguments
            _fail(self.path, f"op {step.id!r} ({step.aten}): the arguments do not fit the overload's schema "
                             f"({error})")

    # ---- pricing and planning ---------------------------------------------------------------------
    def costs(self, values: dict[str, int]) -> list[tuple[Step, Cost]]:
        metas = self.infer(values)
        priced = []
        for step in self.steps:
            args, kwargs = self._arguments(step, metas.__getitem__, values)
            try:
                priced.append((step, step.op.cost(*args, **kwargs)))
            except Exception as error:  # a cost rule refusing its arguments: name the op
                raise GraphError(f"{self.path}: op {step.id!r} ({step.aten}): the cost rule fails: {error}") from None
        return priced

    def plan(self, values: dict[str, int] | None = None) -> MemoryPlan:
        """Lifetimes and arena offsets of every intermediate (and op workspace) for symbol ``values``
        (default: the values seen at export)."""
        values = self.trace_values() if values is None else values
        self.check_symbols(values)
        key = tuple(sorted(values.items()))
        if key not in self._plans:
            self._plans[key] = self._plan(values)
        return self._plans[key]

    def _plan(self, values) -> MemoryPlan:
        metas = self.infer(values)
        root: dict[str, str] = {}  # a view's id -> the block whose memory it shares
        may_share: dict[str, str] = {}  # a maybe-view's id -> the block it may share
        first: dict[str, int] = {}
        last: dict[str, int] = {}

        def extend(block_id, step_index):
            while block_id is not None:  # through every block this one may share memory with
                if block_id in first:
                    last[block_id] = max(last[block_id], step_index)
                block_id = may_share.get(block_id)

        for index, step in enumerate(self.steps):
            source = self._first_tensor(step)
            pure_view = self._is_view(step)
            for out in step.outputs:
                if out is None:
                    continue
                if pure_view:
                    root[out] = root.get(source, source)
                else:
                    root[out] = out
                    first[out], last[out] = index, index
                    # a view when it can be, a copy otherwise: a block of its own, and its input kept alive as
                    # long as it
                    if step.op.aliases == MAYBE_VIEW and source is not None:
                        may_share[out] = root.get(source, source)
        for tensor_id, use in self._last_use.items():
            extend(root.get(tensor_id, tensor_id), use)
        # the graph's outputs are blocks like the rest, live to the end (``_last_uses``): a run returns them
        # where they lie, and an output viewing an intermediate keeps that block alive
        blocks = [Block(t, nbytes(metas[t]), first[t], last[t]) for t in first]
        unused = self.unused_output_bytes(values)
        workspaces = [Block(_workspace_block(step), cost.workspace + unused.get(step.id, 0), i, i)
                      for i, (step, cost) in enumerate(self.costs(values)) if cost.workspace or step.id in unused]
        memory_plan = plan_blocks(blocks, workspaces)
        if memory_plan.peak_bytes > MAX_TENSOR_BYTES:
            _fail(self.path, f"the memory plan for {values} needs {memory_plan.peak_bytes} bytes at its peak "
                             f"(its arena), more than the {MAX_TENSOR_BYTES} a process can address")
        return memory_plan

    def _is_view(self, step: Step) -> bool:
        """Whether ``step``'s outputs share its first tensor argument's memory (no memory of their own)."""
        return step.op.aliases == VIEW and self._first_tensor(step) is not None

    def _first_tensor(self, step: Step) -> str | None:
        for arg in step.args:
            if isinstance(arg, dict) and "tensor" in arg:
                return arg["tensor"]
        return None

    def weight_bytes(self) -> int:
        return sum(nbytes(TensorMeta(tuple(e["shape"]), get_dtype(e["dtype"])))
                   for t, e in self.tensors.items() if t.startswith((PARAM, BUFFER, CONST)))

    # ---- running ----------------------------------------------------------------------------------
    def __call__(self, *inputs):
        """Run the graph. Intermediates and the ops' temporaries live in the arena the planner laid out for
        these shapes (see ``graph/arena.py``), the outputs too: they are returned where they lie, on an arena
        no later run writes to. ``last_run`` keeps the run's figures (temporaries served, allocations past
        the plan, peak bytes)."""
        tensors = [self._as_input(tensor_id, value) for tensor_id, value in zip(self.inputs, inputs)]
        values = self.bind([tuple(t.shape) for t in tensors])
        plan, base, input_slots, runs, output_slots = self._runs(values)
        env = base.copy()
        for slot, tensor in zip(input_slots, tensors):
            env[slot] = tensor
        with ArenaRun(plan, device=self.device) as arena:
            for step, impl, bound, expected, workspace, outputs, freed in runs:
                arena.expect(step.id, expected, workspace)
                args, kwargs = bound(env)
                try:
                    produced = impl(*args, **kwargs)
                except Exception as error:
                    raise GraphError(f"{self.path}: op {step.id!r} ({step.aten}) failed: "
                                     f"{type(error).__name__}: {error}") from error
                for (slot, shape, dtype, place), result in zip(
                        outputs, (produced,) if isinstance(produced, Tensor) else self._as_list(step, produced)):
                    if slot is None:
                        continue
                    if result._dtype is not dtype or result._shape != shape:
                        raise GraphError(f"{self.path}: op {step.id!r} ({step.aten}) made "
                                         f"{self._ids[slot]!r} as {result.dtype.name}{list(result.shape)}, its "
                                         f"meta rule says {dtype.name}{list(shape)}")
                    env[slot] = result if place is None else arena.settle(result, *place)
                for slot in freed:
                    env[slot] = None
            results = tuple(env[slot] for slot in output_slots)
        self.last_run = arena
        return results[0] if len(results) == 1 else results

    def _runs(self, values: dict[str, int]):
        """What a run for symbol ``values`` needs, worked out once: (memory plan, the environment before
        the inputs (a list indexed by tensor slot, weights and constants filled in), the inputs' slots,
        one record a step, the outputs' slots). A step's record: the step, its implementation, its bound
        arguments (``_binder``), its outputs' expected allocations (``ArenaRun.expectations``), its
        workspace (``ArenaRun.workspace_region``), per output (slot, shape, dtype, planned place (offset, room)
        or None), None for one unused or never read, and the slots it reads last."""
        key = tuple(sorted(values.items()))
        found = self._prepared.get(key)
        if found is not None:
            return found
        metas, plan = self.infer(values), self.plan(values)
        slot_of = {tensor_id: slot for slot, tensor_id in enumerate(self._ids)}
        base = [None] * len(self._ids)
        for tensor_id, tensor in {**self.weights, **self.constants}.items():
            base[slot_of[tensor_id]] = tensor
        runs = []
        for index, step in enumerate(self.steps):
            planned = [out for out in step.outputs if out is not None and out in plan.offsets]
            expected = ArenaRun.expectations(plan, [(out, metas[out]) for out in planned])
            workspace = _workspace_block(step)
            workspace = ArenaRun.workspace_region(plan.placement(workspace) if workspace in plan.offsets else None)
            outputs = [(None, None, None, None) if out is None or out not in self._last_use else
                       (slot_of[out], metas[out].shape, metas[out].dtype,
                        plan.placement(out) if out in planned else None) for out in step.outputs]
            runs.append((step, step.op.impl, self._binder(step, values, slot_of), expected, workspace, outputs,
                         tuple(slot_of[ref] for ref in self._freed_after[index])))
        found = self._prepared[key] = (plan, base, [slot_of[t] for t in self.inputs], runs,
                                       [slot_of[t] for t in self.outputs])
        return found

    def _binder(self, step: Step, values: dict[str, int], slot_of: dict[str, int]):
        """``bound(env) -> (args, kwargs)`` for ``step``'s implementation: its arguments decoded and adapted
        once for symbol ``values`` with a marker where each tensor goes, so that a call only puts the
        environment's tensors in their places (the adapters move arguments, never look into tensors)."""
        args, kwargs = self._arguments(step, lambda ref: _Marker(slot_of[ref]), values)
        args, kwargs = list(args), dict(kwargs)
        if calling.placed(step.op):
            kwargs["device"] = self.device
        fills, lists, named = [], [], []
        for i, a in enumerate(args):
            if type(a) is _Marker:
                fills.append((i, a.slot))
            elif isinstance(a, (list, tuple)) and any(type(item) is _Marker for item in a):
                lists.append((i, a, [(j, item.slot) for j, item in enumerate(a) if type(item) is _Marker]))
        for k, v in kwargs.items():
            if type(v) is _Marker:
                named.append((k, v.slot))
        listed = {i for i, _, _ in lists}
        if any(_holds_marker(item) for i, a in enumerate(args) if i in listed for item in a
               if type(item) is not _Marker) or \
                any(_holds_marker(a) for i, a in enumerate(args) if type(a) is not _Marker and i not in listed) or \
                any(_holds_marker(v) for v in kwargs.values() if type(v) is not _Marker):
            return _deep_binder(args, kwargs)
        if not lists and not named:
            def bound(env):
                filled = args.copy()
                for i, slot in fills:
                    filled[i] = env[slot]
                return filled, kwargs
            return bound

        def bound(env):
            filled, filled_kwargs = args.copy(), kwargs.copy()
            for i, slot in fills:
                filled[i] = env[slot]
            for i, template, items in lists:
                inner = list(template)
                for j, slot in items:
                    inner[j] = env[slot]
                filled[i] = inner if isinstance(template, list) else tuple(inner)
            for k, slot in named:
                filled_kwargs[k] = env[slot]
            return filled, filled_kwargs
        return bound

    def replay(self, *inputs):
        """``self(*inputs)``, by replaying the launches captured on the first call with these input
        layouts (see ``graph/replay.py``); runs that cannot be replayed take the normal path."""
        replayer = self.__dict__.get("_replayer")
        if replayer is None:
            from .replay import Replayer
            replayer = self._replayer = Replayer(self)
        return replayer(*inputs)

    def _as_input(self, tensor_id: str, value) -> Tensor:
        entry = self.tensors[tensor_id]
        if isinstance(value, np.ndarray) or np.isscalar(value):
            value = _tensor(np.asarray(value), device=self.device)
        if not isinstance(value, Tensor):
            raise GraphError(f"{self.path}: input {tensor_id!r} must be a tensor or a NumPy array, "
                             f"got {type(value).__name__}")
        if value.dtype.name != entry["dtype"]:
            raise GraphError(f"{self.path}: input {tensor_id!r} must be {entry['dtype']}, got {value.dtype.name}")
        return value

    def __repr__(self) -> str:
        return (f"Graph({self.model_dir!r}, {len(self.steps)} ops, inputs={self.inputs}, "
                f"outputs={self.outputs}, device={self.device})")
