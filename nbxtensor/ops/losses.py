"""torch.nn.functional's losses, each ATen's definition composed of registry ops (pointwise terms, one
reduction): the intermediates are the op's temporaries (``scratch_scope``), declared by its cost rule.
``reduction`` is torch's string or ATen's enum (0 none, 1 mean, 2 sum); ``size_average`` and ``reduce``
keep their legacy meaning."""
from __future__ import annotations

import warnings

import numpy as np

from .. import shape as S
from ..allocation import scratch_scope
from ..tensor import Tensor
from .aten_calls import positional_as_keywords
from .nn_composites import _float_dtype, temporaries
from .registry import Cost, TensorMeta, family_samples, get, nbytes, register
from .samples import Samples, by_name, operand, sample

_ENUM = {0: "none", 1: "mean", 2: "sum"}


def _aten_losses(overloads, *names):
    """Adapters for ATen loss overloads: their positional arguments after ``self`` and ``target`` passed by
    these names, since the losses take torch's legacy arguments in those places, and ATen's reduction enum
    by name."""
    return {overload: positional_as_keywords(2, *names) for overload in overloads}


def _op(name):
    return get(name).impl


def reduction_name(reduction, size_average=None, reduce=None, allowed=("none", "mean", "sum")) -> str:
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        return "none" if not reduce else ("mean" if size_average else "sum")
    if isinstance(reduction, int) and not isinstance(reduction, bool) and reduction in _ENUM:
        return _ENUM[reduction]
    if reduction not in allowed:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


def _reduced(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.mean()


def _reduced_meta(shape, dtype, reduction: str) -> TensorMeta:
    return TensorMeta(tuple(shape) if reduction == "none" else (), dtype)


def _check_float(x, op: str) -> None:
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"{op}: expected a floating-point input, got {x.dtype.name}")


# ---- pointwise losses ------------------------------------------------------------------------------

def _pointwise_shape(input, target, warn: bool):
    if tuple(target.shape) != tuple(input.shape) and warn:
        warnings.warn(f"Using a target size ({tuple(target.shape)}) that is different to the input size "
                      f"({tuple(input.shape)}). This will likely lead to incorrect results due to broadcasting. "
                      "Please ensure they have the same size.", stacklevel=4)
    return S.broadcast_shapes(tuple(input.shape), tuple(target.shape))


def _pointwise_terms(input, target, weight):
    """(shape, dtype) of a pointwise loss's elementwise terms; a weight must have the input's size."""
    shape = _pointwise_shape(input, target, False)
    if weight is not None and tuple(weight.shape) != tuple(input.shape):
        raise ValueError("Weights and input must have the same size.")
    return shape, _float_dtype(input.dtype, target.dtype)


def _pointwise_rules(flops: int) -> dict:
    """``register``'s meta and cost rules, of bound arguments, of a pointwise loss taking ``reduction`` (and
    torch's legacy ``size_average``/``reduce`` where it has them) and maybe ``weight``."""
    def terms(a):
        arguments = vars(a)
        reduction = reduction_name(a.reduction, arguments.get("size_average"), arguments.get("reduce"))
        return (*_pointwise_terms(a.input, a.target, arguments.get("weight")), reduction)

    def meta(a):
        return _reduced_meta(*terms(a))

    def cost(a):
        shape, dtype, reduction = terms(a)
        return Cost(flops=flops * S.numel(shape), bytes_read=nbytes(a.input) + nbytes(a.target),
                    bytes_written=nbytes(_reduced_meta(shape, dtype, reduction)),
                    workspace=temporaries(4, shape, dtype))
    return {"meta": meta, "cost": cost, "bound": True}


def _pointwise_loss(name: str, term, input, target, reduction: str, weight, weighted_mean: str, **parameters):
    """``term(input, target, **parameters)`` elementwise, times ``weight``, reduced; the weighted mean divides
    by ``weighted_mean``: 'weight' (sum of weights) or 'count' (number of elements), as torch's for that loss."""
    _check_float(input, name)
    shape = _pointwise_shape(input, target, True)
    _, dtype = _pointwise_terms(input, target, weight)
    with scratch_scope():
        loss = term(input.expand(shape).to(dtype), target.expand(shape).to(dtype), **parameters)
        if weight is not None:
            loss = loss * weight
    if weight is not None and reduction == "mean" and weighted_mean == "weight":
        with scratch_scope():
            total = loss.sum()
        return total / weight.sum()
    return _reduced(loss, reduction)


def _mse(x, y):
    d = x - y
    return d * d


def _l1(x, y):
    return (x - y).abs()


def _smooth_l1(x, y, beta):
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    d = (x - y).abs()
    if beta == 0:
        return d
    return _op("where")(d < beta, d * d * (0.5 / beta), d - 0.5 * beta)


def _huber(x, y, delta):
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    d = (x - y).abs()
    return _op("where")(d < delta, d * d * 0.5, (d - 0.5 * delta) * delta)


@register("mse_loss", family="loss", aten=["aten::mse_loss.default"], api=(), functional=True,
          adapters=_aten_losses(["aten::mse_loss.default"], "reduction"), **_pointwise_rules(flops=3))
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """``nn.functional.mse_loss``: (input - target)^2, reduced."""
    return _pointwise_loss("mse_loss", _mse, input, target, reduction_name(reduction, size_average, reduce), weight,
                           "weight")


@register("l1_loss", family="loss", aten=["aten::l1_loss.default"], api=(), functional=True,
          adapters=_aten_losses(["aten::l1_loss.default"], "reduction"), **_pointwise_rules(flops=2))
def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """``nn.functional.l1_loss``: |input - target|, reduced."""
    return _pointwise_loss("l1_loss", _l1, input, target, reduction_name(reduction, size_average, reduce), weight,
                           "weight")


@register("smooth_l1_loss", family="loss", aten=["aten::smooth_l1_loss.default"], api=(), functional=True,
          adapters=_aten_losses(["aten::smooth_l1_loss.default"], "reduction", "beta"), **_pointwise_rules(flops=6))
def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """``nn.functional.smooth_l1_loss``: 0.5 d^2 / beta where d = |input - target| < beta, d - 0.5 beta
    elsewhere."""
    return _pointwise_loss("smooth_l1_loss", _smooth_l1, input, target, reduction_name(reduction, size_average, reduce),
                           None, "count", beta=beta)


@register("huber_loss", family="loss", aten=["aten::huber_loss.default"], api=(), functional=True,
          adapters=_aten_losses(["aten::huber_loss.default"], "reduction", "delta"), **_pointwise_rules(flops=6))
def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """``nn.functional.huber_loss``: 0.5 d^2 where d = |input - target| < delta, delta (d - 0.5 delta)
    elsewhere."""
    return _pointwise_loss("huber_loss", _huber, input, target, reduction_name(reduction), weight, "count", delta=delta)


# ---- kl_div, binary cross entropy -----------------------------------------------------------------------

def _kl_reduction(reduction, size_average, reduce) -> str:
    if reduction == "batchmean" and size_average is None and reduce is None:
        return "batchmean"
    return reduction_name(reduction, size_average, reduce, ("none", "mean", "sum", "batchmean"))


def _kl_meta(a):
    shape = S.broadcast_shapes(tuple(a.input.shape), tuple(a.target.shape))
    return _reduced_meta(shape, _float_dtype(a.input.dtype, a.target.dtype),
                         _kl_reduction(a.reduction, a.size_average, a.reduce))


def _kl_cost(a):
    shape = S.broadcast_shapes(tuple(a.input.shape), tuple(a.target.shape))
    dtype = _float_dtype(a.input.dtype, a.target.dtype)
    return Cost(flops=25 * S.numel(shape), bytes_read=nbytes(a.input) + nbytes(a.target),
                bytes_written=nbytes(_kl_meta(a)), workspace=temporaries(3, shape, dtype))


@register("kl_div", family="loss", aten=["aten::kl_div.default"], meta=_kl_meta, cost=_kl_cost, bound=True, api=(),
          functional=True, adapters=_aten_losses(["aten::kl_div.default"], "reduction"))
def kl_div(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction="mean",
           log_target: bool = False) -> Tensor:
    """target * (log target - input) with input as log-probabilities (0 where target is 0), or
    exp(target) * (target - input) when ``log_target``; 'batchmean' divides the sum by the batch size."""
    reduction = _kl_reduction(reduction, size_average, reduce)
    _check_float(input, "kl_div")
    with scratch_scope():
        if log_target:
            loss = target.exp() * (target - input)
        else:
            loss = _op("xlogy")(target, target) - target * input
    if reduction == "batchmean":
        if input.ndim == 0:
            return loss.sum()
        with scratch_scope():
            total = loss.sum()
        return total / input.shape[0]
    return _reduced(loss, reduction)


def _bce_meta_for(logits: bool):
    def meta(a):
        input, target = a.input, a.target
        if tuple(target.shape) != tuple(input.shape):
            if logits:
                raise ValueError(f"Target size ({tuple(target.shape)}) must be the same as input size "
                                 f"({tuple(input.shape)})")
            raise ValueError(f"Using a target size ({tuple(target.shape)}) that is different to the input size "
                             f"({tuple(input.shape)}) is deprecated. Please ensure they have the same size.")
        reduction = reduction_name(a.reduction, a.size_average, a.reduce)
        return _reduced_meta(input.shape, _float_dtype(input.dtype, target.dtype), reduction)
    return meta


def _bce_cost_for(logits: bool):
    meta = _bce_meta_for(logits)

    def cost(a):
        out = meta(a)
        return Cost(flops=30 * S.numel(a.input.shape), bytes_read=nbytes(a.input) + nbytes(a.target),
                    bytes_written=nbytes(out), workspace=temporaries(6, a.input.shape, out.dtype))
    return cost


@register("binary_cross_entropy", family="loss", aten=["aten::binary_cross_entropy.default"],
          meta=_bce_meta_for(False), cost=_bce_cost_for(False), bound=True, api=(), functional=True,
          adapters=_aten_losses(["aten::binary_cross_entropy.default"], "weight", "reduction"))
def binary_cross_entropy(input: Tensor, target: Tensor, weight=None, size_average=None, reduce=None,
                         reduction="mean") -> Tensor:
    """-weight (target log(input) + (1 - target) log(1 - input)), each log clamped at -100 as torch's. The
    probabilities are checked on the host: a value outside [0, 1] raises."""
    meta = binary_cross_entropy.meta(input, target, weight, size_average, reduce, reduction)
    reduction = reduction_name(reduction, size_average, reduce)
    _check_float(input, "binary_cross_entropy")
    if input.numel() and ((input < 0) | (input > 1)).any().item():
        raise RuntimeError("all elements of input should be between 0 and 1")
    with scratch_scope():
        x = input.to(meta.dtype)
        y = target.to(meta.dtype)
        log_x = x.log().clamp_min(-100)
        log_1mx = (1 - x).log().clamp_min(-100)
        loss = -(y * log_x + (1 - y) * log_1mx)
        if weight is not None:
            loss = loss * weight
    return _reduced(loss, reduction)


@register("binary_cross_entropy_with_logits", family="loss", aten=["aten::binary_cross_entropy_with_logits.default"],
          meta=_bce_meta_for(True), cost=_bce_cost_for(True), bound=True, api=("binary_cross_entropy_with_logits",),
          functional=True, adapters=_aten_losses(["aten::binary_cross_entropy_with_logits.default"],
                                                 "weight", "pos_weight", "reduction"))
def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None) -> Tensor:
    """(1 - target) x - log_sigmoid(x) (1 + (pos_weight - 1) target), times ``weight``: the stable form
    of the cross entropy of sigmoid(x), as ATen writes it."""
    meta = binary_cross_entropy_with_logits.meta(input, target, weight, size_average, reduce, reduction, pos_weight)
    reduction = reduction_name(reduction, size_average, reduce)
    _check_float(input, "binary_cross_entropy_with_logits")
    with scratch_scope():
        x = input.to(meta.dtype)
        y = target.to(meta.dtype)
        log_sigmoid = get("logsigmoid").impl(x)
        if pos_weight is not None:
            log_sigmoid = log_sigmoid * ((pos_weight - 1) * y + 1)
        loss = (1 - y) * x - log_sigmoid
        if weight is not None:
            loss = loss * weight
    return _reduced(loss, reduction)


# ---- nll_loss, cross_entropy -------------------------------------------------------------------------

def _class_layout(input, target, weight, op: str):
    """The class dim of ``input`` after checking ``target`` (class indices) and ``weight`` against it."""
    ndim = len(input.shape)
    if ndim < 1:
        raise ValueError(f"Expected input to have at least 1 dimension (the classes), got 0 ({op})")
    class_dim = 1 if ndim >= 2 else 0
    classes = input.shape[class_dim]
    expected = tuple(input.shape[:1]) + tuple(input.shape[2:]) if ndim >= 2 else ()
    if ndim >= 2 and (len(target.shape) == 0 or target.shape[0] != input.shape[0]):
        raise ValueError(f"Expected input batch_size ({input.shape[0]}) to match target batch_size "
                         f"({target.shape[0] if len(target.shape) else 0}).")
    if tuple(target.shape) != expected:
        raise RuntimeError(f"{op}: expected target of shape {list(expected)} for input of shape {list(input.shape)}, "
                           f"got {list(target.shape)}")
    if weight is not None and (len(weight.shape) != 1 or weight.shape[0] != classes):
        raise RuntimeError(f"weight tensor should be defined either for all {classes} classes or no classes but got "
                           f"weight tensor of shape: {list(weight.shape)}")
    return class_dim, classes


def _check_indices(target, op: str) -> None:
    if not target.dtype.is_integral or target.dtype.name == "bool":
        raise RuntimeError(f"{op}: expected target of an integer dtype (class indices), got {target.dtype.name}")


def _nll_parts(logp: Tensor, target: Tensor, weight, ignore_index: int, class_dim: int):
    """Per-sample -w[t] logp[t] (0 where ignored) and the per-sample weight w[t] (0 where ignored)."""
    ignored = target == ignore_index
    safe = _op("where")(ignored, 0, target).to("int64")
    picked = logp.gather(class_dim, safe.unsqueeze(class_dim)).squeeze(class_dim)
    if weight is None:
        sample_weight = (~ignored).to(logp.dtype)
    else:
        sample_weight = _op("where")(ignored, 0, weight.to(logp.dtype).index_select(0, safe.reshape(-1))
                                     .reshape(tuple(target.shape)))
    return -(picked * sample_weight), sample_weight


def _nll_meta(a):
    _class_layout(a.input, a.target, a.weight, "nll_loss")
    return _reduced_meta(a.target.shape, a.input.dtype, reduction_name(a.reduction, a.size_average, a.reduce))


def _nll_cost(a):
    out, target = _nll_meta(a), a.target
    return Cost(flops=4 * S.numel(target.shape), bytes_read=nbytes(target) * 2 + nbytes(out),
                bytes_written=nbytes(out), workspace=temporaries(8, target.shape, a.input.dtype)
                + temporaries(4, target.shape, target.dtype))


_NLL_OVERLOADS = ["aten::nll_loss.default", "aten::nll_loss_nd.default", "aten::nll_loss2d.default"]


@register("nll_loss", family="loss", aten=_NLL_OVERLOADS, meta=_nll_meta, cost=_nll_cost, bound=True, api=(),
          functional=True,
          adapters=_aten_losses(_NLL_OVERLOADS, "weight", "reduction", "ignore_index"))
def nll_loss(input: Tensor, target: Tensor, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
             reduction="mean") -> Tensor:
    """-weight[t] input[n, t] for each target class t; 'mean' divides by the summed weights of the targets
    that are not ``ignore_index``. A target outside [0, C) raises."""
    meta = nll_loss.meta(input, target, weight, size_average, ignore_index, reduce, reduction)
    reduction = reduction_name(reduction, size_average, reduce)
    _check_float(input, "nll_loss")
    _check_indices(target, "nll_loss")
    class_dim, _ = _class_layout(input, target, weight, "nll_loss")
    with scratch_scope():
        loss, sample_weight = _nll_parts(input, target, weight, ignore_index, class_dim)
    if reduction == "none":
        return loss.to(meta.dtype) if loss.dtype is not meta.dtype else loss
    if reduction == "sum":
        return loss.sum()
    with scratch_scope():
        total = loss.sum()
        weights = sample_weight.sum()
    return total / weights


def _ce_meta(a):
    input, target, weight, label_smoothing = a.input, a.target, a.weight, a.label_smoothing
    reduction = reduction_name(a.reduction, a.size_average, a.reduce)
    if target.dtype.is_floating_point:
        if tuple(target.shape) != tuple(input.shape):
            raise RuntimeError(f"cross_entropy: expected target of class probabilities to have the input's shape "
                               f"{list(input.shape)}, got {list(target.shape)}")
        class_dim = 1 if len(input.shape) >= 2 else 0
        shape = tuple(n for i, n in enumerate(input.shape) if i != class_dim)
        if weight is not None and (len(weight.shape) != 1 or weight.shape[0] != input.shape[class_dim]):
            raise RuntimeError(f"weight tensor should be defined either for all {input.shape[class_dim]} classes or "
                               f"no classes but got weight tensor of shape: {list(weight.shape)}")
    else:
        _class_layout(input, target, weight, "cross_entropy")
        shape = tuple(target.shape)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    return _reduced_meta(shape, input.dtype, reduction)


def _ce_cost(a):
    out, input, target = _ce_meta(a), a.input, a.target
    return Cost(flops=30 * S.numel(input.shape), bytes_read=nbytes(input) + nbytes(target),
                bytes_written=nbytes(out), workspace=temporaries(4, input.shape, input.dtype)
                + temporaries(10, target.shape, input.dtype))


@register("cross_entropy", family="loss", aten=["aten::cross_entropy_loss.default"], meta=_ce_meta, cost=_ce_cost,
          bound=True, api=(), functional=True, adapters=_aten_losses(["aten::cross_entropy_loss.default"], "weight", "reduction",
                                                          "ignore_index", "label_smoothing"))
def cross_entropy(input: Tensor, target: Tensor, weight=None, size_average=None, ignore_index: int = -100,
                  reduce=None, reduction="mean", label_smoothing: float = 0.0) -> Tensor:
    """nll_loss of log_softmax over the classes (dim 1, or 0 for an unbatched input) for class-index
    targets; for class-probability targets -sum(weight * target * log_softmax) over the classes, 'mean'
    dividing by the number of samples. ``label_smoothing`` mixes in the uniform distribution, as ATen's."""
    cross_entropy.meta(input, target, weight, size_average, ignore_index, reduce, reduction, label_smoothing)  # checks
    reduction = reduction_name(reduction, size_average, reduce)
    _check_float(input, "cross_entropy")
    class_dim = 1 if input.ndim >= 2 else 0
    classes = input.shape[class_dim]
    shaped_weight = None if weight is None else weight.reshape((-1,) + (1,) * (input.ndim - class_dim - 1))
    with scratch_scope():
        logp = input.log_softmax(class_dim)
    if target.dtype.is_floating_point:
        with scratch_scope():
            probabilities = target if label_smoothing == 0 else target * (1 - label_smoothing) + label_smoothing / classes
            terms = logp * probabilities
            if shaped_weight is not None:
                terms = terms * shaped_weight
            if reduction != "none":
                total = terms.sum()
        if reduction == "none":
            return -terms.sum(class_dim)
        if reduction == "sum":
            return -total
        return -total / (input.numel() // classes) if input.numel() else total * float("nan")
    _check_indices(target, "cross_entropy")
    with scratch_scope():
        loss, sample_weight = _nll_parts(logp, target, weight, ignore_index, class_dim)
        if label_smoothing > 0:
            weighted = logp if shaped_weight is None else logp * shaped_weight
            smooth = _op("where")(target == ignore_index, 0, -weighted.sum(class_dim))
        if reduction != "none":
            divisor = sample_weight.sum() if reduction == "mean" else None
            loss = loss.sum()
            if label_smoothing > 0:
                smooth = smooth.sum()
    if label_smoothing > 0:
        with scratch_scope():
            mixed = loss * (1 - label_smoothing) + smooth * (label_smoothing / classes)
        return mixed / divisor if reduction == "mean" else mixed
    return loss / divisor if reduction == "mean" else loss



# ---- samples ---------------------------------------------------------------------------------------

def _pair(kind="normal"):
    return operand(2, 3), operand(2, 3, values=kind)


def _reductions(input, target, **kwargs):
    """A loss's samples: each reduction, a transposed input, a 0-d pair."""
    return (sample(input, target, **kwargs), sample(input, target, reduction="sum", **kwargs),
            sample(input, target, reduction="none", **kwargs),
            sample(operand(3, 2, layout="transposed", values=input.values), operand(3, 2, values=target.values), **kwargs))


_CLASSES = operand(2, dtype="int64", values="index", domain=(0, 3))
_SAMPLES = {
    "mse_loss": Samples(_reductions(*_pair()), lambda x, y, reduction="mean", **ignored: _reduced_loss((x - y) ** 2, reduction)),
    "l1_loss": Samples(_reductions(*_pair()), lambda x, y, reduction="mean", **ignored: _reduced_loss(np.abs(x - y), reduction)),
    "smooth_l1_loss": Samples(_reductions(*_pair()) + (sample(*_pair(), beta=0.5),),
                              lambda x, y, reduction="mean", beta=1.0, **ignored: _reduced_loss(np.where(
                                  np.abs(x - y) < beta, 0.5 * (x - y) ** 2 / beta, np.abs(x - y) - 0.5 * beta), reduction)),
    "huber_loss": Samples(_reductions(*_pair()) + (sample(*_pair(), delta=0.5),),
                          lambda x, y, reduction="mean", delta=1.0, **ignored: _reduced_loss(np.where(
                              np.abs(x - y) < delta, 0.5 * (x - y) ** 2, delta * (np.abs(x - y) - 0.5 * delta)), reduction)),
    "kl_div": Samples(_reductions(operand(2, 3), operand(2, 3, values="unit")) + (
        sample(operand(2, 3), operand(2, 3), log_target=True, reduction="batchmean"),)),
    "binary_cross_entropy": Samples(_reductions(operand(2, 3, values="unit"), operand(2, 3, values="unit")) + (
        sample(operand(2, 3, values="unit"), operand(2, 3, values="unit"), operand(3, values="positive")),),
        lambda x, y, weight=None, size_average=None, reduce=None, reduction="mean": _reduced_loss(
            (1 if weight is None else weight) * -(y * np.log(x) + (1 - y) * np.log1p(-x)), reduction)),
    "binary_cross_entropy_with_logits": Samples(_reductions(operand(2, 3), operand(2, 3, values="unit")) + (
        sample(operand(2, 3), operand(2, 3, values="unit"), pos_weight=operand(3, values="positive")),),
        lambda x, y, weight=None, size_average=None, reduce=None, reduction="mean", pos_weight=None: _reduced_loss(
            (1 if weight is None else weight) * -((1 if pos_weight is None else pos_weight) * y * -np.logaddexp(0, -x)
                                                  + (1 - y) * -np.logaddexp(0, x)), reduction)),
    "nll_loss": Samples((sample(operand(2, 3), _CLASSES), sample(operand(2, 3), _CLASSES, reduction="none"),
                         sample(operand(2, 3), _CLASSES, operand(3, values="positive")),
                         sample(operand(2, 3, 2), operand(2, 2, dtype="int64", values="index", domain=(0, 3))),
                         sample(operand(2, 3), _CLASSES, ignore_index=1))),
    "cross_entropy": Samples((sample(operand(2, 3), _CLASSES), sample(operand(2, 3), _CLASSES, reduction="sum"),
                              sample(operand(2, 3), operand(2, 3, values="unit")),
                              sample(operand(2, 3), _CLASSES, label_smoothing=0.1),
                              sample(operand(2, 3, 2), operand(2, 2, dtype="int64", values="index", domain=(0, 3))))),
}
family_samples("loss", by_name(_SAMPLES))


def _reduced_loss(losses, reduction):
    return {"mean": np.mean, "sum": np.sum}.get(reduction, np.asarray)(losses)
