"""torch.export program -> nbxtensor graph directory. The only module of nbxtensor that imports torch."""
from __future__ import annotations

import inspect
import itertools
import math
import operator
import os

import sympy
import torch
import torch.utils._pytree as pytree
from torch.export.graph_signature import InputKind

from .. import progress
from ..graph.format import (BUFFER, CONST, DTYPE_NAMES, FORMAT_TAG, FORMAT_VERSION, GRAPH_FILE, INPUT, PARAM,
                            WEIGHT_FORMAT_RANKS, WEIGHTS_FILE, dumps, encode_constant, encode_float,
                            parse_expression)
from ..io.safetensors import save_file
from ..ops import registry
from . import ExportError, TraceError, first_line

# High-level ops worth their own kernels: run_decompositions leaves them whole (those torch has). The
# activations among them decompose into several full-size temporaries (silu of bf16 becomes an fp32 copy,
# its sigmoid and their product) where one pointwise launch computes in fp32 and rounds once.
KEEP_WHOLE = ("aten::scaled_dot_product_attention.default", "aten::layer_norm.default", "aten::rms_norm.default",
              "aten::linear.default", "aten::embedding.default", "aten::silu.default", "aten::hardswish.default",
              "aten::hardsigmoid.default", "aten::mish.default", "aten::softplus.default",
              "aten::affine_grid_generator.default", "aten::im2col.default", "aten::col2im.default")
# Arguments that say where a result lives; one graph runs on one device, with dense tensors. A memory
# format is kept: it decides the result's strides, and so whether a later view of it works.
_DROPPED_ARGUMENTS = frozenset(("device", "layout", "pin_memory"))
# Clones that keep the layout of an input that is already row-major.
_LAYOUT_KEEPING_FORMATS = (None, "preserve_format", "contiguous_format")
# Ops that only rename a tensor in a functional graph.
_ALIASES = frozenset(("aten::detach.default", "aten::alias.default", "aten::lift_fresh_copy.default"))
INLINE_CONSTANT_BYTES = 4096


def _aten_name(target) -> str:
    schema = target._schema
    return f"{schema.name}.{target._overloadname or 'default'}"


def _torch_op(aten_name: str):
    namespace_and_name, _, overload = aten_name.partition(".")
    namespace, _, name = namespace_and_name.partition("::")
    packet = getattr(getattr(torch.ops, namespace), name, None)
    return None if packet is None else getattr(packet, overload, None)


def _as_numpy(data):
    """A constant tensor as a NumPy array of its dtype; NumPy has no bfloat16, ml_dtypes does."""
    data = data.cpu().contiguous()
    if data.dtype == torch.bfloat16:
        import ml_dtypes
        return data.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return data.numpy()


def _dtype_name(dtype) -> str:
    name = str(dtype).removeprefix("torch.")
    if name not in DTYPE_NAMES:
        raise ExportError(f"dtype {dtype} has no nbxtensor counterpart")
    return name


def _weight_format(data) -> dict:
    """``{"memory_format": name}`` for a weight laid out channels-last (which the weights file, row-major,
    does not keep), else nothing. Strides decide, not ``is_contiguous``: a 1x1 convolution's weight is
    contiguous in both formats, and its channels-last strides still make its output channels-last."""
    for name, rank in WEIGHT_FORMAT_RANKS.items():
        if data.dim() == rank:
            laid_out = torch.empty(data.shape, memory_format=getattr(torch, name)).stride()
            if data.stride() == laid_out != torch.empty(data.shape).stride():
                return {"memory_format": name}
    return {}


def _is_tensor(value) -> bool:
    return isinstance(value, torch.Tensor)


class _Writer:
    def __init__(self, program, example_args, dim_names=None):
        self.program = program
        self.example_args = example_args
        self.dim_names = dim_names or {}  # (flat input index, axis) -> the name of the Dim given there
        self.symbol_names: dict = {}  # sympy symbol -> its Dim's name, else s0, s1, ...
        self.symbols: dict[str, dict] = {}
        self.tensors: dict[str, dict] = {}
        self.ids: dict[str, str] = {}  # fx node name -> tensor id
        self.ops: list[dict] = []
        self.weights: dict[str, torch.Tensor] = {}
        self.missing: dict[str, list[str]] = {}

    # ---- shapes -----------------------------------------------------------------------------------
    def _name_symbols(self, user_inputs) -> None:
        ranges = self.program.range_constraints
        flat_examples = pytree.tree_flatten(self.example_args)[0]
        # torch's symbols carry no Dim names: a symbol takes the name of the Dim that made it
        unnamed = (f"s{k}" for k in itertools.count() if f"s{k}" not in self.dim_names.values())
        for index, (node, example) in enumerate(zip(user_inputs, flat_examples)):
            value = node.meta.get("val")
            if not _is_tensor(value):
                continue
            for axis, (dim, actual) in enumerate(zip(value.shape, example.shape)):
                if isinstance(dim, torch.SymInt):
                    free = sorted(dim.node.expr.free_symbols, key=str)
                    for symbol in free:
                        if symbol not in self.symbol_names:
                            given = self.dim_names.get((index, axis)) if len(free) == 1 else None
                            name = given or next(unnamed)
                            self.symbol_names[symbol] = name
                            bounds = ranges.get(symbol)
                            upper = None if bounds is None or not math.isfinite(float(bounds.upper)) else int(bounds.upper)
                            lower = 0 if bounds is None else int(bounds.lower)
                            trace = int(actual) if dim.node.expr == symbol else None
                            self.symbols[name] = {"min": lower, "max": upper, "trace": trace}

    def _expression(self, value):
        if isinstance(value, int):
            return value
        expr = value.node.expr
        if expr.is_Integer:
            return int(expr)
        unknown = expr.free_symbols - set(self.symbol_names)
        if unknown:
            raise ExportError(f"the shape expression {expr} uses {', '.join(map(str, unknown))}, which no input "
                              f"dimension defines (data-dependent shapes are not supported)")
        text = str(expr.xreplace({s: sympy.Symbol(n, integer=True, positive=True)
                                  for s, n in self.symbol_names.items()}))
        try:
            parse_expression(text, self.symbols)
        except ValueError as error:
            raise ExportError(f"the shape expression {expr} cannot be written: {error}") from None
        return text

    def _describe(self, value, **extra) -> dict:
        return {"shape": [self._expression(d) for d in value.shape], "dtype": _dtype_name(value.dtype), **extra}

    # ---- arguments --------------------------------------------------------------------------------
    def _encode(self, value):
        if isinstance(value, torch.fx.Node):
            val = value.meta.get("val")
            if _is_tensor(val):
                return {"tensor": self.ids[value.name]}
            if isinstance(val, (torch.SymInt, int)):
                encoded = self._expression(val)
                return encoded if isinstance(encoded, int) else {"sym": encoded}
            raise ExportError(f"argument {value.name} is a {type(val).__name__}, which the format cannot carry")
        if isinstance(value, (list, tuple)):
            return [self._encode(v) for v in value]
        if isinstance(value, bool) or value is None or isinstance(value, str):
            return value
        if isinstance(value, int):
            return value
        if isinstance(value, float):
            return encode_float(value)
        if isinstance(value, torch.SymInt):
            encoded = self._expression(value)
            return encoded if isinstance(encoded, int) else {"sym": encoded}
        if isinstance(value, torch.dtype):
            return {"dtype": _dtype_name(value)}
        if isinstance(value, torch.memory_format):
            return str(value).removeprefix("torch.")
        if isinstance(value, (torch.device, torch.layout)):
            return None
        raise ExportError(f"argument {value!r} of type {type(value).__name__} cannot be written")

    def _arguments(self, node) -> tuple[list, dict]:
        schema = node.target._schema
        args = [self._encode(a) for a in node.args]
        kwargs = {}
        for argument in schema.arguments:  # the schema's order
            if argument.name in node.kwargs and argument.name not in _DROPPED_ARGUMENTS:
                kwargs[argument.name] = self._encode(node.kwargs[argument.name])
        return args, kwargs

    # ---- nodes ------------------------------------------------------------------------------------
    def _placeholders(self, nodes) -> None:
        specs = {spec.arg.name: spec for spec in self.program.graph_signature.input_specs}
        user_inputs = [n for n in nodes if n.op == "placeholder" and specs[n.name].kind == InputKind.USER_INPUT]
        self._name_symbols(user_inputs)
        for node in nodes:
            if node.op != "placeholder":
                continue
            spec, value = specs[node.name], node.meta.get("val")
            if spec.kind == InputKind.USER_INPUT:
                if not _is_tensor(value):
                    raise ExportError(f"input {node.name} is a {type(value).__name__}; graphs take tensors only")
                tensor_id = INPUT + node.name
                self.tensors[tensor_id] = self._describe(value)
            elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
                key = spec.target
                data = self.program.state_dict.get(key)
                if data is None:
                    data = self.program.constants[key]
                data = data.detach()
                if spec.kind == InputKind.CONSTANT_TENSOR and data.numel() * data.element_size() <= INLINE_CONSTANT_BYTES:
                    tensor_id = CONST + key
                    self.tensors[tensor_id] = {"shape": list(data.shape), "dtype": _dtype_name(data.dtype),
                                               "data": encode_constant(_as_numpy(data))}
                else:
                    namespace = {InputKind.PARAMETER: PARAM, InputKind.BUFFER: BUFFER}.get(spec.kind, CONST)
                    tensor_id = namespace + key
                    self.tensors[tensor_id] = {"shape": list(data.shape), "dtype": _dtype_name(data.dtype),
                                               "weight": key, **_weight_format(data)}
                    self.weights[key] = data
            else:
                raise ExportError(f"input {node.name} is a {spec.kind.name}, which inference graphs do not take")
            self.ids[node.name] = tensor_id

    def _call(self, node, getitem_outputs) -> None:
        if node.target is operator.getitem:
            return  # folded into its producer's outputs
        val = node.meta.get("val")
        if not hasattr(node.target, "_schema"):
            if isinstance(val, (torch.SymInt, int)) or val is None:
                return  # shape arithmetic: its users encode the expression itself
            raise ExportError(f"node {node.name} calls {node.target}, which is not an ATen op")
        name = _aten_name(node.target)
        if isinstance(val, (torch.SymInt, int, bool, float)) or val is None:
            return  # sym_size, asserts and other guards: no tensor work
        source = node.args[0] if node.args else None
        # a clone of an op output is an artefact only when that output was already contiguous; a clone
        # of a transposed view is the copy that lets a later view merge its dims
        fresh_clone = (name == "aten::clone.default" and isinstance(source, torch.fx.Node)
                       and source.op == "call_function"
                       and self._encode(node.kwargs.get("memory_format")) in _LAYOUT_KEEPING_FORMATS
                       and getattr(source.meta.get("val"), "is_contiguous", lambda: False)())
        if name in _ALIASES or fresh_clone:
            self.ids[node.name] = self.ids[source.name]
            return
        try:
            registry.lookup(name)
        except KeyError:
            self.missing.setdefault(name, []).append(node.name)
        args, kwargs = self._arguments(node)
        if isinstance(val, (tuple, list)):
            outputs = []
            for index, item in enumerate(val):
                user = getitem_outputs.get((node.name, index))
                if user is None or not _is_tensor(item):
                    outputs.append(None)
                    continue
                self.ids[user.name] = user.name
                self.tensors[user.name] = self._describe(item)
                outputs.append(user.name)
        else:
            self.ids[node.name] = node.name
            self.tensors[node.name] = self._describe(val)
            outputs = [node.name]
        self.ops.append({"id": node.name, "op": name, "args": args, "kwargs": kwargs, "outputs": outputs})

    def document(self) -> dict:
        nodes = list(self.program.graph.nodes)
        self._placeholders(nodes)
        getitem_outputs = {(n.args[0].name, n.args[1]): n for n in nodes
                           if n.op == "call_function" and n.target is operator.getitem and n.users}
        for node in nodes:
            if node.op == "call_function":
                self._call(node, getitem_outputs)
        if self.missing:
            listing = "; ".join(f"{name} (nodes {', '.join(nodes_)})" for name, nodes_ in sorted(self.missing.items()))
            raise ExportError(f"the registry lacks {len(self.missing)} op(s) this model needs: {listing}; write the "
                              f"module with ops nbxtensor has (README.md, What works), or add these to the registry "
                              f"(nbxtensor/ops/registry.py)")
        output_node = next(n for n in nodes if n.op == "output")
        results = pytree.tree_flatten(output_node.args[0])[0]
        outputs = []
        for result in results:
            if not isinstance(result, torch.fx.Node) or not _is_tensor(result.meta.get("val")):
                raise ExportError(f"output {result!r} is not a tensor; graphs return tensors only")
            outputs.append(self.ids[result.name])
        inputs = [t for t in self.tensors if t.startswith(INPUT)]
        return {"format": FORMAT_TAG, "version": FORMAT_VERSION, "symbols": self.symbols, "inputs": inputs,
                "outputs": outputs, "tensors": self.tensors, "ops": self.ops}


def _decomposition_table():
    table = torch.export.default_decompositions()
    for name in KEEP_WHOLE:
        op = _torch_op(name)
        if op is not None:
            table.pop(op, None)
    return table


def _dim_names(module, example_args, dynamic_shapes) -> dict:
    """(flat input index, axis) -> the name of the ``torch.export.Dim`` that ``dynamic_shapes`` puts on
    that axis of a tensor argument (a derived Dim's root name)."""
    if not dynamic_shapes:
        return {}
    if isinstance(dynamic_shapes, dict):  # keyed by forward's parameter names
        arguments = inspect.signature(module.forward).bind(*example_args).arguments
        dynamic_shapes = [dynamic_shapes.get(name) for name in arguments]
    names, index = {}, 0
    for example, spec in zip(example_args, dynamic_shapes):
        if _is_tensor(example) and isinstance(spec, (dict, list, tuple)):
            for axis, dim in spec.items() if isinstance(spec, dict) else enumerate(spec):
                dim = getattr(dim, "root", dim)
                if isinstance(dim, torch.export.Dim) and dim.__name__.isidentifier():
                    names[(index, axis)] = dim.__name__
        index += len(pytree.tree_flatten(example)[0])
    return names


def export(module, example_args, out_dir, dynamic_shapes=None) -> str:
    from .. import from_dlpack

    example_args = tuple(example_args)
    module = module.eval() if hasattr(module, "eval") else module
    with progress.task("exporting: torch.export tracing the module") as shown:
        try:
            program = torch.export.export(module, example_args, dynamic_shapes=dynamic_shapes)
        except Exception as error:  # noqa: BLE001  (whatever torch raises, it is about the module and its inputs)
            raise TraceError(first_line(error)) from error
        shown.label = "exporting: decompositions"
        program = program.run_decompositions(_decomposition_table())
        shown.label = "exporting: writing the graph"
        document = _Writer(program, example_args, _dim_names(module, example_args, dynamic_shapes)).document()
        os.makedirs(out_dir, exist_ok=True)
        writer_weights = {}
        for tensor_id, entry in document["tensors"].items():
            if "weight" in entry:
                writer_weights[entry["weight"]] = None
        state = {**program.state_dict, **program.constants}
        for key in writer_weights:
            writer_weights[key] = from_dlpack(state[key].detach().cpu().contiguous())
        shown.label = "exporting: writing the weights"
        save_file(writer_weights, os.path.join(out_dir, WEIGHTS_FILE), metadata={"format": "nbx"})
        with open(os.path.join(out_dir, GRAPH_FILE), "w", encoding="utf-8") as file:
            file.write(dumps(document))
    return out_dir
