"""torch.nn.functional's margin, embedding and likelihood losses, each ATen's (or torch's Python)
definition composed of registry ops; the intermediates are the op's temporaries (``scratch_scope``),
declared by its cost rule. Every loss binds its arguments by torch's signature (as the registry binds its
rules'), checks them in its meta rule (shapes, dtypes, options), then reduces the per-element or per-sample
loss as ``reduction`` says."""
from __future__ import annotations

import functools
import inspect
import math

from .. import shape as S
from ..allocation import scratch_scope
from ..tensor import Tensor
from .losses import _reduced, _reduced_meta, reduction_name
from .nn_composites import _float_dtype, temporaries
from .registry import Cost, arguments_binder, family_samples, nbytes, op_impl, register
from .samples import Samples, by_name, operand, sample


def _tensors(arguments: dict) -> list:
    return [v for v in arguments.values() if hasattr(v, "shape") and hasattr(v, "dtype")]


def _loss(name: str, *, aten, shape_rule, flops: int, temps: int):
    """Register the decorated ``impl(**torch's arguments)`` as loss ``name``. ``shape_rule(arguments)``
    checks the bound arguments and gives (unreduced shape, dtype); the widest input sizes the cost's
    ``flops`` per element and ``temps`` temporaries."""
    def wrap(impl):
        def with_reduction(a) -> dict:
            """The bound arguments ``a`` as a dict, ``reduction`` resolved from the legacy arguments too."""
            values = dict(vars(a))
            values["reduction"] = reduction_name(values["reduction"], values.get("size_average"), values.get("reduce"))
            return values

        def meta(a):
            values = with_reduction(a)
            shape, dtype = shape_rule(values)
            return _reduced_meta(shape, dtype, values["reduction"])

        def cost(a):
            values = with_reduction(a)
            shape, dtype = shape_rule(values)
            tensors = _tensors(values)
            widest = max([S.numel(shape), *(S.numel(t.shape) for t in tensors)])
            return Cost(flops=flops * widest, bytes_read=sum(nbytes(t) for t in tensors),
                        bytes_written=nbytes(_reduced_meta(shape, dtype, values["reduction"])),
                        workspace=temporaries(temps, (widest,), dtype))

        def checked(*args, **kwargs):
            values = with_reduction(bind(*args, **kwargs))
            shape_rule(values)
            return impl(**values)
        checked.__name__ = checked.__qualname__ = impl.__name__
        checked.__doc__, checked.__signature__ = impl.__doc__, inspect.signature(impl)
        # the implementation binds its arguments as the registry binds its rules' (``bound=True``)
        bind = arguments_binder(name, impl)
        return register(name, family="loss", aten=aten, meta=meta, cost=cost, bound=True, api=(),
                        functional=True)(checked)
    return wrap


def _margin(value, x: Tensor) -> Tensor:
    """The float ``value`` as a 0-d tensor of the dtype it gives against ``x``: ATen adds a Scalar margin
    in the tensor's float dtype, so a bfloat16 loss rounds its margin to bfloat16 first, and an integer one
    computes in the default float dtype."""
    return op_impl("full")((), float(value), dtype=_float_dtype(x.dtype), device=x.device)


def _check_float(x, op: str) -> None:
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"{op}: expected a floating-point input, got {x.dtype.name}")


def _broadcast(op: str, *tensors):
    try:
        return S.broadcast_shapes(*(tuple(t.shape) for t in tensors))
    except Exception as error:
        raise RuntimeError(f"{op}: the inputs' shapes {[list(t.shape) for t in tensors]} do not broadcast") from error


# ---- margin_ranking_loss, hinge_embedding_loss, soft_margin_loss -------------------------------------

def _margin_ranking_shape(a):
    input1, input2, target = a["input1"], a["input2"], a["target"]
    if not len(input1.shape) == len(input2.shape) == len(target.shape):
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension but got sizes: "
                           f"input1: {list(input1.shape)}, input2: {list(input2.shape)}, target: {list(target.shape)} ")
    return _broadcast("margin_ranking_loss", input1, input2, target), _float_dtype(input1.dtype, input2.dtype,
                                                                                   target.dtype)


@_loss("margin_ranking_loss", aten=["aten::margin_ranking_loss.default"], shape_rule=_margin_ranking_shape, flops=4,
       temps=3)
def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0, size_average=None,
                        reduce=None, reduction="mean") -> Tensor:
    """max(0, margin - target (input1 - input2)), reduced."""
    with scratch_scope():
        difference = target * (input1 - input2)
        loss = (_margin(margin, difference) - difference).clamp_min(0)
    return _reduced(loss, reduction)


def _hinge_shape(a):
    return _broadcast("hinge_embedding_loss", a["input"], a["target"]), _float_dtype(a["input"].dtype,
                                                                                     a["target"].dtype)


@_loss("hinge_embedding_loss", aten=["aten::hinge_embedding_loss.default"], shape_rule=_hinge_shape, flops=6,
       temps=5)
def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0, size_average=None, reduce=None,
                         reduction="mean") -> Tensor:
    """input where target is 1, max(0, margin - input) where it is -1 (ATen's sum of the two terms, each
    taken where the target is not the other label)."""
    where = op_impl("where")
    with scratch_scope():
        loss = where(target != 1, (_margin(margin, input) - input).clamp_min(0), 0) + where(target != -1, input, 0)
    return _reduced(loss, reduction)


def _soft_margin_shape(a):
    _check_float(a["input"], "soft_margin_loss")
    return _broadcast("soft_margin_loss", a["input"], a["target"]), _float_dtype(a["input"].dtype, a["target"].dtype)


@_loss("soft_margin_loss", aten=["aten::soft_margin_loss.default"], shape_rule=_soft_margin_shape, flops=25,
       temps=3)
def soft_margin_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction="mean") -> Tensor:
    """log(1 + exp(-target input)), reduced."""
    with scratch_scope():
        loss = (-(input * target)).exp().log1p()
    return _reduced(loss, reduction)


# ---- cosine_embedding_loss ---------------------------------------------------------------------------

def _cosine_embedding_shape(a):
    input1, input2, target = a["input1"], a["input2"], a["target"]
    if tuple(input1.shape) != tuple(input2.shape):
        raise RuntimeError(f"cosine_embedding_loss(): input1 and input2 should have the same size, got "
                           f"{list(input1.shape)} and {list(input2.shape)}")
    rank = len(target.shape)
    if rank > 1 or len(input1.shape) != rank + 1:
        raise RuntimeError(f"cosine_embedding_loss(): a {rank}D target expects {rank + 1}D inputs (0D target: 1D "
                           f"inputs, 1D target: 2D inputs), got inputs of size {list(input1.shape)}")
    if rank == 1 and target.shape[0] != input1.shape[0]:
        raise RuntimeError(f"cosine_embedding_loss(): the target's size {target.shape[0]} is not the inputs' batch "
                           f"size {input1.shape[0]}")
    return tuple(target.shape), _float_dtype(input1.dtype, input2.dtype, target.dtype)


@_loss("cosine_embedding_loss", aten=["aten::cosine_embedding_loss.default"], shape_rule=_cosine_embedding_shape,
       flops=8, temps=6)
def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0, size_average=None,
                          reduce=None, reduction="mean") -> Tensor:
    """1 - cos(input1, input2) where target is 1, max(0, cos - margin) where it is -1, the cosine over the
    last dim with 1e-12 added to each squared magnitude (ATen's). Integer and bool inputs compute in the
    default float dtype."""
    where = op_impl("where")
    dim = input1.ndim - 1
    eps = 1e-12
    dtype = _float_dtype(input1.dtype, input2.dtype, target.dtype)
    with scratch_scope():
        input1, input2, target = input1.to(dtype), input2.to(dtype), target.to(dtype)
        dot = (input1 * input2).sum(dim)
        squares1 = (input1 * input1).sum(dim) + eps
        squares2 = (input2 * input2).sum(dim) + eps
        cosine = dot / (squares1 * squares2).sqrt()
        below_margin = (cosine - _margin(margin, cosine)).clamp_min(0)
        loss = where(target == 1, 1 - cosine, 0) + where(target == -1, below_margin, 0)
    return _reduced(loss, reduction)


# ---- poisson_nll_loss, gaussian_nll_loss ---------------------------------------------------------------

def _poisson_shape(a):
    return _broadcast("poisson_nll_loss", a["input"], a["target"]), _float_dtype(a["input"].dtype, a["target"].dtype)


@_loss("poisson_nll_loss", aten=["aten::poisson_nll_loss.default"], shape_rule=_poisson_shape, flops=30, temps=6)
def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool = True, full: bool = False, size_average=None,
                     eps: float = 1e-8, reduce=None, reduction="mean") -> Tensor:
    """exp(input) - target input (``log_input``), else input - target log(input + eps); ``full`` adds
    Stirling's term target log(target) - target + log(2 pi target) / 2 where target > 1. Integer inputs
    compute in the default float dtype."""
    where = op_impl("where")
    dtype = _float_dtype(input.dtype, target.dtype)
    with scratch_scope():
        input, target = input.to(dtype), target.to(dtype)
        loss = input.exp() - target * input if log_input else input - target * (input + eps).log()
        if full:
            stirling = op_impl("xlogy")(target, target) - target + (target * (2 * math.pi)).log() * 0.5
            loss = loss + where(target > 1, stirling, 0)
    return _reduced(loss, reduction)


def _gaussian_var_shape(input, var) -> tuple:
    """The shape ``var`` takes against ``input``: its own, or with the last dim restored."""
    shape, var_shape = tuple(input.shape), tuple(var.shape)
    if var_shape == shape:
        return var_shape
    if var_shape == shape[:-1]:
        return var_shape + (1,)
    if len(var_shape) == len(shape) and sum(v for i, v in zip(shape, var_shape) if i != v) == 1:
        return var_shape  # heteroscedastic: one dim of size 1 shared
    raise ValueError("var is of incorrect size")


def _gaussian_shape(a):
    input, target, var = a["input"], a["target"], a["var"]
    _check_float(input, "gaussian_nll_loss")
    if isinstance(var, (int, float)):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        return _broadcast("gaussian_nll_loss", input, target), _float_dtype(input.dtype, target.dtype)
    var_shape = _gaussian_var_shape(input, var)
    shape = S.broadcast_shapes(tuple(input.shape), tuple(target.shape), var_shape)
    return shape, _float_dtype(input.dtype, target.dtype, var.dtype)


@_loss("gaussian_nll_loss", aten=["nbx::gaussian_nll_loss"], shape_rule=_gaussian_shape, flops=10, temps=5)
def gaussian_nll_loss(input: Tensor, target: Tensor, var, full: bool = False, eps: float = 1e-6,
                      reduction="mean") -> Tensor:
    """(log(var) + (input - target)^2 / var) / 2, var clamped below at ``eps``; ``full`` adds log(2 pi) / 2.
    A negative var raises (checked on the host)."""
    if isinstance(var, Tensor):
        if var.numel() and (var < 0).any().item():
            raise ValueError("var has negative entry/entries")
        var = var.reshape(_gaussian_var_shape(input, var))
    with scratch_scope():
        clamped = var.clamp_min(eps) if isinstance(var, Tensor) else max(float(var), eps)
        difference = input - target
        loss = ((clamped.log() if isinstance(clamped, Tensor) else math.log(clamped))
                + difference * difference / clamped) * 0.5
        if full:
            loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduced(loss, reduction)


# ---- multi_margin_loss, multilabel_margin_loss, multilabel_soft_margin_loss ---------------------------

def _class_rows(input, op: str) -> tuple:
    """(samples, classes) of an (N, C), (C,) or 0D (one class) input."""
    if len(input.shape) > 2 or S.numel(input.shape) == 0:
        raise RuntimeError(f"{op}: expected a non-empty 0D, 1D or 2D input (C or N, C), got shape {list(input.shape)}")
    return (input.shape[0] if len(input.shape) == 2 else 1), (input.shape[-1] if input.shape else 1)


def _multi_margin_shape(a):
    input, target, weight, p = a["input"], a["target"], a["weight"], a["p"]
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    _check_float(input, "multi_margin_loss")
    samples, classes = _class_rows(input, "multi_margin_loss")
    if not target.dtype.is_integral or target.dtype.kind == "bool":
        raise RuntimeError(f"multi_margin_loss: expected target of an integer dtype (class indices), got "
                           f"{target.dtype.name}")
    if len(target.shape) > 1 or S.numel(target.shape) != samples:
        raise RuntimeError(f"multi_margin_loss: inconsistent target size: {list(target.shape)} for input of size: "
                           f"{list(input.shape)}")
    if weight is not None:
        if len(weight.shape) != 1:
            raise ValueError("weight must be one-dimensional")
        if weight.shape[0] != classes:
            raise RuntimeError(f"multi_margin_loss: inconsistent weight size, expected {classes} but got "
                               f"{list(weight.shape)}")
    return tuple(target.shape), input.dtype


def _check_targets_in_range(target: Tensor, classes: int, op: str, allowed_below: int = 0) -> None:
    """Class indices are checked on the host, as ATen checks them: one outside the classes raises."""
    if target.numel() and ((target < allowed_below) | (target >= classes)).any().item():
        raise IndexError(f"{op}: target index out of range for {classes} classes")


@_loss("multi_margin_loss", aten=["aten::multi_margin_loss.default"], shape_rule=_multi_margin_shape, flops=6,
       temps=6)
def multi_margin_loss(input: Tensor, target: Tensor, p: int = 1, margin: float = 1.0, weight=None, size_average=None,
                      reduce=None, reduction="mean") -> Tensor:
    """Per sample, the sum over classes i other than the target y of weight[y] max(0, margin - x[y] + x[i])^p,
    divided by the number of classes."""
    classes = input.shape[-1] if input.ndim else 1
    _check_targets_in_range(target, classes, "multi_margin_loss")
    rows = input.reshape(-1, classes)
    labels = target.reshape(-1, 1).to("int64")
    with scratch_scope():
        picked = rows.gather(1, labels)
        hinge = (margin - picked + rows).clamp_min(0)
        if p == 2:
            hinge = hinge * hinge
        if weight is not None:
            hinge = hinge * weight.to(input.dtype).index_select(0, labels.reshape(-1)).unsqueeze(1)
        others = labels != op_impl("arange")(classes, device=input.device).unsqueeze(0)
        loss = (op_impl("where")(others, hinge, 0).sum(1) / classes).reshape(tuple(target.shape))
    return _reduced(loss, reduction)


def _multilabel_margin_shape(a):
    input, target = a["input"], a["target"]
    _check_float(input, "multilabel_margin_loss")
    if len(input.shape) not in (0, 1, 2):
        raise RuntimeError(f"multilabel_margin_loss: expected a 0D, 1D or 2D input, got shape {list(input.shape)}")
    if tuple(target.shape) != tuple(input.shape):
        raise RuntimeError(f"multilabel_margin_loss: inconsistent target size: {list(target.shape)} for input of "
                           f"size: {list(input.shape)}")
    if target.dtype.name != "int64":
        raise RuntimeError(f"multilabel_margin_loss: expected target of dtype int64, got {target.dtype.name}")
    return tuple(input.shape[:-1]) if len(input.shape) == 2 else (), input.dtype


@_loss("multilabel_margin_loss", aten=["aten::multilabel_margin_loss.default"], shape_rule=_multilabel_margin_shape,
       flops=8, temps=8)
def multilabel_margin_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction="mean") -> Tensor:
    """Per sample, the sum over its target classes j (``target``'s entries before the first negative one)
    and the non-target classes i of max(0, 1 - (x[j] - x[i])), divided by the number of classes."""
    classes = input.shape[-1] if input.ndim else 1
    rows, labels = input.reshape(-1, classes), target.reshape(-1, classes)
    where = op_impl("where")
    with scratch_scope():
        valid = (labels < 0).to("int64").cumsum(1) == 0  # the targets end at the first negative entry
        listed = where(valid, labels, 0)
        _check_targets_in_range(listed, classes, "multilabel_margin_loss")
        class_ids = op_impl("arange")(classes, device=input.device)
        is_target = ((listed.unsqueeze(2) == class_ids) & valid.unsqueeze(2)).any(1)
        picked = rows.gather(1, listed)
        hinge = (1 - picked.unsqueeze(2) + rows.unsqueeze(1)).clamp_min(0)
        counted = valid.unsqueeze(2) & ~is_target.unsqueeze(1)
        loss = (where(counted, hinge, 0).sum((1, 2)) / classes).reshape(tuple(input.shape[:-1])
                                                                         if input.ndim == 2 else ())
    return _reduced(loss, reduction)


def _multilabel_soft_shape(a):
    input, target, weight = a["input"], a["target"], a["weight"]
    _check_float(input, "multilabel_soft_margin_loss")
    if len(input.shape) == 0:
        raise RuntimeError("multilabel_soft_margin_loss: expected an input with a class dim, got a 0D input")
    shape = _broadcast("multilabel_soft_margin_loss", input, target, *([weight] if weight is not None else []))
    if shape != tuple(input.shape):
        raise ValueError(f"multilabel_soft_margin_loss: target {list(target.shape)} does not broadcast to the input's "
                         f"shape {list(input.shape)}")
    return shape[:-1], _float_dtype(input.dtype, target.dtype)


@_loss("multilabel_soft_margin_loss", aten=["nbx::multilabel_soft_margin_loss"], shape_rule=_multilabel_soft_shape,
       flops=40, temps=6)
def multilabel_soft_margin_loss(input: Tensor, target: Tensor, weight=None, size_average=None, reduce=None,
                                reduction="mean") -> Tensor:
    """-(target log_sigmoid(x) + (1 - target) log_sigmoid(-x)) times ``weight``, averaged over the classes
    (the last dim), then reduced over the samples."""
    log_sigmoid = op_impl("logsigmoid")
    with scratch_scope():
        loss = -(target * log_sigmoid(input) + (1 - target) * log_sigmoid(-input))
        if weight is not None:
            loss = loss * weight
        loss = loss.sum(input.ndim - 1) / input.shape[-1]
    return _reduced(loss, reduction)


# ---- triplet_margin_loss, triplet_margin_with_distance_loss -----------------------------------------

def _triplet_shape(a, op: str):
    anchor, positive, negative = a["anchor"], a["positive"], a["negative"]
    if not len(anchor.shape) == len(positive.shape) == len(negative.shape):
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {len(anchor.shape)}D, positive {len(positive.shape)}D, and "
                           f"negative {len(negative.shape)}D inputs")
    shape = _broadcast(op, anchor, positive, negative)
    return shape[:-1], _float_dtype(anchor.dtype, positive.dtype, negative.dtype)


def _triplet(distance, anchor, positive, negative, margin, swap, reduction):
    with scratch_scope():
        to_positive = distance(anchor, positive)
        to_negative = distance(anchor, negative)
        if swap:
            to_negative = op_impl("minimum")(to_negative, distance(positive, negative))
        loss = (_margin(margin, to_positive) + to_positive - to_negative).clamp_min(0)
    return _reduced(loss, reduction)


@_loss("triplet_margin_loss", aten=["aten::triplet_margin_loss.default"],
       shape_rule=lambda a: _triplet_shape(a, "triplet_margin_loss"), flops=15, temps=8)
def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0, p: float = 2,
                        eps: float = 1e-6, swap: bool = False, size_average=None, reduce=None,
                        reduction="mean") -> Tensor:
    """max(0, margin + d(anchor, positive) - d(anchor, negative)) with d the p-norm pairwise_distance;
    ``swap`` takes the smaller of d(anchor, negative) and d(positive, negative)."""
    distance = functools.partial(op_impl("pairwise_distance"), p=p, eps=eps)
    return _triplet(distance, anchor, positive, negative, margin, swap, reduction)


def _triplet_distance_shape(a):
    if a["margin"] <= 0:
        raise ValueError(f"margin must be greater than 0, got {a['margin']}")
    return _triplet_shape(a, "triplet_margin_with_distance_loss")


@_loss("triplet_margin_with_distance_loss", aten=["nbx::triplet_margin_with_distance_loss"],
       shape_rule=_triplet_distance_shape, flops=15, temps=8)
def triplet_margin_with_distance_loss(anchor: Tensor, positive: Tensor, negative: Tensor, *, distance_function=None,
                                      margin: float = 1.0, swap: bool = False, reduction="mean") -> Tensor:
    """triplet_margin_loss with ``distance_function(x, y)`` (any callable of nbxtensor tensors; default
    pairwise_distance) as the distance."""
    distance = distance_function if distance_function is not None else op_impl("pairwise_distance")
    return _triplet(distance, anchor, positive, negative, margin, swap, reduction)



# ---- samples ---------------------------------------------------------------------------------------

_ONES = operand(2, 3, values="domain", domain=(1, 1))
_LABELS = operand(2, dtype="int64", values="index", domain=(0, 3))
_SAMPLES = {
    "margin_ranking_loss": Samples((sample(operand(3), operand(3), operand(3, values="domain", domain=(-1, -1))),
                                    sample(operand(3), operand(3), operand(3, values="domain", domain=(1, 1)), 0.5,
                                           reduction="sum"))),
    "hinge_embedding_loss": Samples((sample(operand(2, 3), _ONES), sample(operand(2, 3), _ONES, 0.5, reduction="none"))),
    "soft_margin_loss": Samples((sample(operand(2, 3), _ONES), sample(operand(2, 3), _ONES, reduction="sum"))),
    "cosine_embedding_loss": Samples((sample(operand(2, 3), operand(2, 3), operand(2, values="domain", domain=(1, 1))),
                                      sample(operand(2, 3), operand(2, 3), operand(2, values="domain", domain=(-1, -1)),
                                             0.2, reduction="none"))),
    "poisson_nll_loss": Samples((sample(operand(2, 3), operand(2, 3, values="positive")),
                                 sample(operand(2, 3, values="positive"), operand(2, 3, values="positive"), False, True))),
    "gaussian_nll_loss": Samples((sample(operand(2, 3), operand(2, 3), operand(2, 3, values="positive")),
                                  sample(operand(2, 3), operand(2, 3), operand(2, 1, values="positive"), True,
                                         reduction="sum"))),
    "multi_margin_loss": Samples((sample(operand(2, 3), _LABELS), sample(operand(2, 3), _LABELS, 2, 0.5, reduction="none"),
                                  sample(operand(2, 3), _LABELS, weight=operand(3, values="positive")))),
    "multilabel_margin_loss": Samples((sample(operand(2, 3), operand(2, 3, dtype="int64", values="domain", domain=(-1, -1))),
                                       sample(operand(3), operand(3, dtype="int64", values="index", domain=(0, 3))))),
    "multilabel_soft_margin_loss": Samples((sample(operand(2, 3), operand(2, 3, values="unit")),
                                            sample(operand(2, 3), operand(2, 3, values="unit"), operand(3, values="positive")))),
    "triplet_margin_loss": Samples((sample(operand(2, 3), operand(2, 3), operand(2, 3)),
                                    sample(operand(2, 3), operand(2, 3), operand(2, 3), 0.5, 1, swap=True, reduction="none"))),
    "triplet_margin_with_distance_loss": Samples((sample(operand(2, 3), operand(2, 3), operand(2, 3)),
                                                  sample(operand(2, 3), operand(2, 3), operand(2, 3), margin=0.5, swap=True))),
}
family_samples("loss", by_name(_SAMPLES))
