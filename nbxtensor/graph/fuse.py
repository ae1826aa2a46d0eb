"""Fusion of op chains in a loaded graph into single registry ops.

An exported graph spells a transformers layer op by op: its RMSNorm is eight steps, its rotary embedding
seven per tensor. Each step costs host time on the normal path, so ``fuse`` rewrites the chains that
``PATTERNS`` describes into one step each, after loading (``graph.load(..., fuse=False)`` keeps the graph
as exported). A pattern of one node rewrites a step whose extra outputs nothing reads into the op that
does not make them. A pattern is data: its nodes, matched on the steps' op names and encoded arguments, the
labels whose tensors the fused step defines, and a rule that checks what the op names cannot (dtypes,
shapes) and builds the fused step's arguments. Every fusion computes in float32 what the chain computes
with intermediate roundings, so its result is at least as close to a float32 run as the chain's.

In a node's arguments, ``"@label"`` is the tensor another node of the pattern makes (matched through the
step that makes it), ``"$name"`` captures whatever argument stands there (the same value wherever the
name recurs), and anything else must equal the argument. An optional node may be absent: its label is
then its first argument itself (the casts around transformers' RMSNorm, absent from a float32 export).
Commutative ops match their first two arguments in either order.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from . import calling

_COMMUTATIVE = frozenset(("aten::mul.Tensor", "aten::add.Tensor"))


@dataclass(frozen=True)
class Node:
    label: str
    op: str
    args: tuple
    kwargs: tuple = ()  # (name, pattern) pairs; the step's kwargs must be exactly these
    optional: bool = False


@dataclass(frozen=True)
class Pattern:
    name: str
    nodes: tuple[Node, ...]  # the last is the chain's end, where matching starts
    # labels whose tensors the fused step defines, in its outputs' order; each keeps a planned place even
    # where nothing reads it, since the fused op makes it anyway
    outputs: tuple[str, ...]
    build: Callable  # build(captures, graph) -> (op, args, kwargs), or None where the chain does not qualify


def _tensor(value):
    return value["tensor"] if isinstance(value, dict) and "tensor" in value else None


def _last_dim(graph, value):
    shape = graph.tensors[_tensor(value)]["shape"]
    return shape[-1] if shape and type(shape[-1]) is int else None


def _dtype(graph, value):
    return graph.tensors[_tensor(value)]["dtype"]


def _rms_norm(c, graph):
    x, weight, out = c["$x"], c["$weight"], c["@out"]
    length = _last_dim(graph, x)
    if _tensor(weight) is None or length is None or graph.tensors[_tensor(weight)]["shape"] != [length]:
        return None
    if not _dtype(graph, x) == _dtype(graph, weight) == _dtype(graph, {"tensor": out}):
        return None
    if "cast_in" in c and c["$wide"] != {"dtype": "float32"}:
        return None
    if not isinstance(c["$eps"], (int, float)) or isinstance(c["$eps"], bool):
        return None
    rounded = "cast_out" in c
    if rounded and c["$narrow"] != {"dtype": _dtype(graph, x)}:
        return None
    return "nbx::rms_norm", [x, [length], weight, float(c["$eps"])], {"round_normed": rounded}


def _add_rms_norm(c, graph):
    a, b = c["$a"], c["$b"]
    if _tensor(a) is None or _tensor(b) is None:
        return None
    shapes = {tuple(map(str, graph.tensors[_tensor(t)]["shape"])) for t in (a, b, {"tensor": c["@sum"]})}
    if len(shapes) != 1 or not _dtype(graph, a) == _dtype(graph, b) == _dtype(graph, {"tensor": c["@sum"]}):
        return None
    return "nbx::add_rms_norm", [a, b, c["$shape"], c["$weight"], c["$eps"]], dict(c["$options"])


def _add_layer_norm(c, graph):
    if _add_rms_norm({**c, "$options": {}}, graph) is None:
        return None
    return "nbx::add_layer_norm", [c["$a"], c["$b"], c["$shape"], c["$weight"], c["$bias"], c["$eps"]], {}


def _rotate_half(c, graph):
    x, cos, sin = c["$x"], c["$cos"], c["$sin"]
    if any(_tensor(t) is None for t in (x, cos, sin)):
        return None
    shape = graph.tensors[_tensor(x)]["shape"]
    rank, length = len(shape), _last_dim(graph, x)
    if length is None or length % 2 or c["$half"] != length // 2 or not 1 <= rank <= 4:
        return None
    if not isinstance(c["$end"], int) or c["$end"] < length:
        return None
    if any(d not in (-1, rank - 1) for d in (c["$dim"], c["$dim2"], c["$cat_dim"])):
        return None
    dtypes = {_dtype(graph, t) for t in (x, cos, sin, {"tensor": c["@out"]})}
    for table in (cos, sin):
        other = graph.tensors[_tensor(table)]["shape"]
        if len(other) > rank or any(o != 1 and o != s for o, s in zip(other[::-1], shape[::-1])):
            return None
    if len(dtypes) != 1:
        return None
    return "nbx::rotate_half_embedding", [x, cos, sin], {}


def _shape(graph, value):
    return graph.tensors[_tensor(value)]["shape"]


def _dims(sizes):
    """An op's size list as the graph writes shapes: a symbol's name where the op names ``{"sym": name}``."""
    if not isinstance(sizes, list):
        return None
    return [d["sym"] if isinstance(d, dict) and set(d) == {"sym"} else d for d in sizes]


def _grouped_attention(c, graph):
    """sdpa over keys and values repeated per query group becomes sdpa(enable_gqa=True) on them as they are."""
    q, k, v = c["$q"], c["$k"], c["$v"]
    if any(_tensor(t) is None for t in (q, k, v)):
        return None
    q_shape, k_shape = _shape(graph, q), _shape(graph, k)
    if len(k_shape) != 4 or _shape(graph, v)[:3] != k_shape[:3] or c["$k_dim"] != 2 or c["$v_dim"] != 2:
        return None
    repeats = c["$k_expanded"][2] if len(c["$k_expanded"]) == 5 else None
    for expanded, viewed, source in ((_dims(c["$k_expanded"]), _dims(c["$k_viewed"]), k_shape),
                                     (_dims(c["$v_expanded"]), _dims(c["$v_viewed"]), _shape(graph, v))):
        if expanded is None or viewed is None or len(expanded) != 5 or expanded[:2] != source[:2] or expanded[3:] != source[2:] or expanded[2] != repeats:
            return None
        if len(viewed) != 4 or viewed[0] != source[0] or viewed[2:] != source[2:]:
            return None
    heads = k_shape[1]
    if type(repeats) is not int or type(heads) is not int or len(q_shape) != 4 or q_shape[1] != heads * repeats:
        return None
    kwargs = {name[1:]: c[name] for name in ("$scale", "$is_causal") if name in c}
    return "aten::scaled_dot_product_attention.default", [q, k, v, *([c["$mask"]] if "$mask" in c else [])], \
        {**kwargs, "enable_gqa": True}


def _act_and_mul(activation: str):
    def build(c, graph):
        gate, up = c["$gate"], c["$up"]
        if _tensor(gate) is None or _tensor(up) is None or _shape(graph, gate) != _shape(graph, up):
            return None
        if not _dtype(graph, gate) == _dtype(graph, up) == _dtype(graph, {"tensor": c["@out"]}):
            return None
        return "nbx::act_and_mul", [gate, up], {"activation": activation}
    return build


def _group_norm(c, graph):
    """native_group_norm whose statistics nothing reads: the group norm alone, without their extra pass."""
    return "aten::group_norm.default", [c["$x"], c["$group"], c["$weight"], c["$bias"], c["$eps"]], {}


def _max_pool(nd: int):
    """max_pool{nd}d_with_indices whose indices nothing reads: the values alone, without writing indices."""
    return lambda c, graph: (f"aten::max_pool{nd}d.default", [c[f"${name}"] for name in _POOL_ARGUMENTS
                                                               if f"${name}" in c], {})


# aten::convolution's arguments, in order, and a batch norm's vectors, in the fused op's order
_CONVOLUTION_ARGUMENTS = ("input", "weight", "bias", "stride", "padding", "dilation", "transposed", "output_padding",
                          "groups")
_NORM_VECTORS = ("norm_weight", "norm_bias", "running_mean", "running_var")
_NORM_DTYPES = frozenset(("float32", "float16", "bfloat16"))


def _convolution_batch_norm(c, graph):
    """A convolution whose result only an inference batch norm reads: one step, the norm in its epilogue,
    where the norm's vectors are tensors of one float dtype, one value a channel of the convolution's output."""
    convolved = {"tensor": c["@conv"]}
    shape = _shape(graph, convolved)
    vectors = [c[f"${name}"] for name in _NORM_VECTORS]
    weight = c["$weight"]
    if _tensor(weight) is None or len(shape) != len(_shape(graph, weight)) or type(shape[1]) is not int:
        return None  # an unbatched convolution's dim 1 is not its channels
    if any(_tensor(v) is None for v in vectors):
        return None
    if any(_shape(graph, v) != [shape[1]] for v in vectors) or len({_dtype(graph, v) for v in vectors}) != 1:
        return None
    if (_dtype(graph, vectors[0]) not in _NORM_DTYPES
            or _dtype(graph, convolved) != _dtype(graph, {"tensor": c["@out"]})):
        return None
    eps = c["$eps"]
    if not isinstance(eps, (int, float)) or isinstance(eps, bool):
        return None
    return ("nbx::convolution_batch_norm",
            [*(c[f"${name}"] for name in _CONVOLUTION_ARGUMENTS), *vectors, float(eps)], {"activation": "none"})


def _activated_convolution(activation: str):
    """A fused convolution and batch norm whose result only ``activation`` reads: the activation too."""
    return lambda c, graph: ("nbx::convolution_batch_norm", [c[f"${name}"] for name in _NORMED_ARGUMENTS],
                             {"activation": activation})


_NORMED_ARGUMENTS = (*_CONVOLUTION_ARGUMENTS, *_NORM_VECTORS, "eps")
# the activations the fused convolution applies: (its name there, the op an export writes, its arguments)
_ACTIVATIONS = (("relu", "aten::relu.default", ()), ("silu", "aten::silu.default", ()),
                ("relu6", "aten::hardtanh.default", (0, 6)), ("hardswish", "aten::hardswish.default", ()))
# how an export spells an inference batch norm of ``@conv``: its op and arguments (``False``: training)
_INFERENCE_BATCH_NORMS = (
    ("aten::_native_batch_norm_legit_no_training.default", ("$momentum", "$eps")),
    ("aten::_native_batch_norm_legit.default", (False, "$momentum", "$eps")),
    ("aten::native_batch_norm.default", (False, "$momentum", "$eps")),
    ("aten::batch_norm.default", (False, "$momentum", "$eps", "$cudnn")),
)

# aten::max_pool{1,2,3}d_with_indices's arguments, in order; an export writes those before the last it sets
_POOL_ARGUMENTS = ("x", "kernel_size", "stride", "padding", "dilation", "ceil_mode")


def _repeated(label: str) -> tuple:
    """The nodes of transformers' repeat_kv on ``$label``: unsqueeze, expand, clone, view."""
    return (Node(f"{label}_unsqueezed", "aten::unsqueeze.default", (f"${label}", f"${label}_dim")),
            Node(f"{label}_expanded", "aten::expand.default", (f"@{label}_unsqueezed", f"${label}_expanded")),
            Node(f"{label}_cloned", "aten::clone.default", (f"@{label}_expanded",),
                 (("memory_format", "contiguous_format"),)),
            Node(f"{label}_repeated", "aten::view.default", (f"@{label}_cloned", f"${label}_viewed")))


PATTERNS = (
    # transformers' RMSNorm: weight * (x.to(float32) * rsqrt(mean(x^2) + eps)).to(dtype)
    Pattern("rms_norm", (
        Node("cast_in", "aten::_to_copy.default", ("$x",), (("dtype", "$wide"),), optional=True),
        Node("square", "aten::pow.Tensor_Scalar", ("@cast_in", 2)),
        Node("mean", "aten::mean.dim", ("@square", [-1], True)),
        Node("shifted", "aten::add.Tensor", ("@mean", "$eps")),
        Node("rstd", "aten::rsqrt.default", ("@shifted",)),
        Node("normed", "aten::mul.Tensor", ("@cast_in", "@rstd")),
        Node("cast_out", "aten::_to_copy.default", ("@normed",), (("dtype", "$narrow"),), optional=True),
        Node("out", "aten::mul.Tensor", ("$weight", "@cast_out")),
    ), ("out",), _rms_norm),
    # the residual add before a norm: one pass makes the sum and its norm
    Pattern("add_rms_norm", (
        Node("sum", "aten::add.Tensor", ("$a", "$b")),
        Node("out", "nbx::rms_norm", ("@sum", "$shape", "$weight", "$eps"), (("round_normed", "$round"),)),
    ), ("out", "sum"), lambda c, graph: _add_rms_norm({**c, "$options": {"round_normed": c["$round"]}}, graph)),
    # BERT's residual add and LayerNorm (with and without the trailing cudnn_enable argument)
    *(Pattern("add_layer_norm", (
        Node("sum", "aten::add.Tensor", ("$a", "$b")),
        Node("out", "aten::layer_norm.default", ("@sum", "$shape", "$weight", "$bias", "$eps", *cudnn)),
    ), ("out", "sum"), _add_layer_norm) for cudnn in ((), ("$cudnn",))),
    # transformers' apply_rotary_pos_emb: x * cos + rotate_half(x) * sin, rotate_half(x) = cat(-x2, x1)
    Pattern("rotate_half_embedding", (
        Node("low", "aten::slice.Tensor", ("$x", "$dim", 0, "$half")),
        Node("high", "aten::slice.Tensor", ("$x", "$dim2", "$half", "$end")),
        Node("negated", "aten::neg.default", ("@high",)),
        Node("rotated", "aten::cat.default", (["@negated", "@low"], "$cat_dim")),
        Node("by_sin", "aten::mul.Tensor", ("@rotated", "$sin")),
        Node("by_cos", "aten::mul.Tensor", ("$x", "$cos")),
        Node("out", "aten::add.Tensor", ("@by_cos", "@by_sin")),
    ), ("out",), _rotate_half),
    # the gated MLP's activation(gate) * up (SwiGLU; GeGLU with the tanh gelu)
    Pattern("act_and_mul", (
        Node("act", "aten::silu.default", ("$gate",)),
        Node("out", "aten::mul.Tensor", ("@act", "$up")),
    ), ("out",), _act_and_mul("silu")),
    Pattern("act_and_mul", (
        Node("act", "aten::gelu.default", ("$gate",), (("approximate", "tanh"),)),
        Node("out", "aten::mul.Tensor", ("@act", "$up")),
    ), ("out",), _act_and_mul("gelu_tanh")),
    # grouped-query attention as transformers writes it: keys and values repeated per query group (a copy
    # each), then sdpa; with and without a mask, and the keyword arguments the exporter keeps
    *(Pattern("grouped_attention", (
        *_repeated("k"), *_repeated("v"),
        Node("out", "aten::scaled_dot_product_attention.default", ("$q", "@k_repeated", "@v_repeated", *mask),
             tuple((name, f"${name}") for name in keywords)),
    ), ("out",), _grouped_attention)
      for mask in ((), ("$mask",)) for keywords in ((), ("scale",), ("is_causal",), ("is_causal", "scale"))),
    # what torch.export makes of group_norm and max_pool: ops with outputs for training (statistics,
    # indices) that inference leaves unread; each matches only where they are unread
    Pattern("group_norm", (
        Node("out", "aten::native_group_norm.default",
             ("$x", "$weight", "$bias", "$N", "$C", "$HxW", "$group", "$eps")),
    ), ("out",), _group_norm),
    *(Pattern("max_pool", (
        Node("out", f"aten::max_pool{nd}d_with_indices.default",
             tuple(f"${name}" for name in _POOL_ARGUMENTS[:count])),
    ), ("out",), _max_pool(nd)) for nd in (1, 2, 3) for count in range(2, len(_POOL_ARGUMENTS) + 1)),
    # a convolution, then an inference batch norm (never a training one: its batch statistics need the whole
    # output first), in one step; then the activation (relu, silu, relu6, hardswish) that alone reads it
    *(Pattern("convolution_batch_norm", (
        Node("conv", "aten::convolution.default", tuple(f"${name}" for name in _CONVOLUTION_ARGUMENTS)),
        Node("out", norm, ("@conv", "$norm_weight", "$norm_bias", "$running_mean", "$running_var", *rest)),
    ), ("out",), _convolution_batch_norm) for norm, rest in _INFERENCE_BATCH_NORMS),
    *(Pattern("convolution_batch_norm_activation", (
        Node("normed", "nbx::convolution_batch_norm", tuple(f"${name}" for name in _NORMED_ARGUMENTS),
             (("activation", "none"),)),
        Node("out", op, ("@normed", *arguments)),
    ), ("out",), _activated_convolution(activation)) for activation, op, arguments in _ACTIVATIONS),
)


def _refs(value, found: list) -> list:
    if isinstance(value, dict):
        if "tensor" in value:
            found.append(value["tensor"])
    elif isinstance(value, list):
        for item in value:
            _refs(item, found)
    return found


class _Matcher:
    """Matches one pattern against the steps, backwards from a candidate end step."""

    def __init__(self, pattern: Pattern, steps: list, made_by: dict):
        self.nodes = {node.label: node for node in pattern.nodes}
        self.steps, self.made_by = steps, made_by

    def node(self, label: str, tensor_id: str, bound: dict):
        node = self.nodes[label]
        index = self.made_by.get(tensor_id)
        if index is not None and index not in bound["#steps"]:
            step = self.steps[index]
            if step.aten == node.op and step.outputs[0] == tensor_id:
                orders = [list(step.args)]
                if node.op in _COMMUTATIVE and len(step.args) == 2:
                    orders.append([step.args[1], step.args[0]])
                for args in orders:
                    trial = {**bound, "@" + label: tensor_id, label: index, "#steps": bound["#steps"] | {index}}
                    trial = self.arguments(node, args, step.kwargs, trial)
                    if trial is not None:
                        return trial
        if node.optional:
            return self.value(node.args[0], {"tensor": tensor_id}, {**bound, "@" + label: tensor_id})
        return None

    def arguments(self, node: Node, args: list, kwargs: dict, bound: dict):
        if len(args) != len(node.args) or set(kwargs) != {name for name, _ in node.kwargs}:
            return None
        for want, got in [*zip(node.args, args), *((p, kwargs[name]) for name, p in node.kwargs)]:
            bound = self.value(want, got, bound)
            if bound is None:
                return None
        return bound

    def value(self, want, got, bound: dict):
        if isinstance(want, str) and want.startswith("@"):
            tensor_id = _tensor(got)
            if tensor_id is None:
                return None
            if want in bound:
                return bound if bound[want] == tensor_id else None
            return self.node(want[1:], tensor_id, bound)
        if isinstance(want, str) and want.startswith("$"):
            if want in bound:
                return bound if bound[want] == got else None
            return {**bound, want: got}
        if isinstance(want, list):
            if not isinstance(got, list) or len(got) != len(want):
                return None
            for w, g in zip(want, got):
                bound = self.value(w, g, bound)
                if bound is None:
                    return None
            return bound
        same = type(want) is type(got) or (isinstance(want, (int, float)) and isinstance(got, (int, float))
                                            and not isinstance(got, bool))
        return bound if same and want == got else None


def fuse(graph, steps: list, patterns=PATTERNS) -> tuple[list, dict[str, int]]:
    """``steps`` with every chain that a pattern matches replaced by its fused step, and how many chains
    each pattern fused. ``graph`` gives the tensors' declared shapes and dtypes, and its outputs."""
    counts = {}
    kept = set(graph.outputs)
    for pattern in patterns:
        end = pattern.nodes[-1]
        index, made_by = 0, None
        while index < len(steps):
            if steps[index].aten != end.op:
                index += 1
                continue
            if made_by is None:
                made_by = {out: i for i, step in enumerate(steps) for out in step.outputs if out is not None}
            bound = _Matcher(pattern, steps, made_by).node(end.label, steps[index].outputs[0],
                                                           {"#steps": frozenset()})
            fused = None if bound is None else _fused_step(pattern, bound, steps, kept, graph)
            if fused is None:
                index += 1
                continue
            position, step = fused
            removed = bound["#steps"] - {position}
            steps = [step if i == position else s for i, s in enumerate(steps) if i not in removed]
            counts[pattern.name] = counts.get(pattern.name, 0) + 1
            index, made_by = position - sum(1 for i in removed if i < position) + 1, None
    return steps, counts


def _fused_step(pattern: Pattern, bound: dict, steps: list, kept: set, graph):
    """(position, the fused step) for a match, or None where its intermediates are read outside the chain
    or its rule refuses it."""
    matched = bound["#steps"]
    position = max(matched)
    outputs = [bound["@" + label] for label in pattern.outputs]
    for i in matched:
        for out in steps[i].outputs:
            if out is None or out in outputs:
                continue
            if out in kept:
                return None
    readers: dict[str, list[int]] = {}
    for i, step in enumerate(steps):
        for ref in _refs([*step.args, *step.kwargs.values()], []):
            readers.setdefault(ref, []).append(i)
    for i in matched:
        for out in steps[i].outputs:
            outside = [r for r in readers.get(out, []) if r not in matched]
            if out in outputs and all(r > position for r in outside):
                continue
            if outside:
                return None
    built = pattern.build(bound, graph)
    if built is None:
        return None
    op_name, args, kwargs = built
    last = steps[position]
    return position, replace(last, id=f"{last.id}+{pattern.name}", aten=op_name, op=calling.resolve(op_name),
                             args=args, kwargs=kwargs, outputs=outputs)
