"""torch.masked's reductions and normalizations on strided tensors, each composed of registry ops.

A mask (bool, or converted to bool; broadcast to the input's shape, never from more dims) keeps the
elements where it is True. Masked-out elements take the identity of the reduction (0 for sums and
norms, 1 for products, the lowest value for amax/argmax/logsumexp/logaddexp/softmax, the highest for
amin/argmin/softmin, NaN for the median, which takes ``nanmedian``) through ``where``; then the plain op
runs. mean, var and std divide by the count of masked-in elements, so a fully masked-out slice gives NaN;
softmax of a fully masked-out slice is NaN too, as in torch. ``dtype`` is the result's dtype as
torch.masked has it: sum, prod, the scans, the softmaxes, mean, var, std and norm compute in it, the
others convert their result (``argmax`` of a float32 input gives float32 indices unless told otherwise),
and a float input's median ignores it."""
from __future__ import annotations

import builtins
import math

import numpy as np

from .. import shape as S
from ..allocation import scratch_scope
from ..dtypes import get_dtype
from ..promotion import get_default_dtype, promote_types
from ..tensor import Tensor
from .nn_composites import temporaries
from .reductions import _sum_dtype, reduced_dims, reduced_shape
from .registry import Cost, TensorMeta, family_samples, get, nbytes, op_impl, register
from .samples import Samples, by_name, operand, sample

_BOOL, _I64, _F32, _F64 = (get_dtype(name) for name in ("bool", "int64", "float32", "float64"))


# ---- masks and identities ---------------------------------------------------------------------------

def _check_mask(input, mask, op: str, name: str = "mask") -> None:
    """Refuse a ``mask`` that does not broadcast to ``input``'s shape (shapes alone: meta rules call it)."""
    if mask is None:
        return
    if not hasattr(mask, "shape") or not hasattr(mask, "dtype"):
        raise TypeError(f"masked.{op}: {name} must be a tensor, got {type(mask).__name__}")
    shape, target = tuple(mask.shape), tuple(input.shape)
    if len(shape) > len(target):
        raise IndexError(f"masked.{op}: {name} has {len(shape)} dims, more than the input's {len(target)}; it must "
                         f"broadcast to the input's shape {list(target)}")
    if any(m != 1 and m != n for m, n in zip(shape[::-1], target[::-1])):
        raise RuntimeError(f"masked.{op}: {name} of shape {list(shape)} does not broadcast to the input's shape "
                           f"{list(target)}")


def _canonical_mask(input: Tensor, mask, op: str) -> Tensor:
    """``mask`` as a bool tensor of ``input``'s shape (a view where it broadcasts)."""
    if not isinstance(mask, Tensor):
        raise TypeError(f"masked.{op}: a mask must be a tensor, got {type(mask).__name__}")
    if mask.dtype is not _BOOL:
        mask = mask.to(_BOOL)
    return mask if tuple(mask.shape) == tuple(input.shape) else mask.expand(tuple(input.shape))


def _identity(kind: str, dtype, op: str):
    """The value masked-out elements of a ``dtype`` input take: ``kind`` is zero, one, lowest, highest or nan."""
    if kind in ("zero", "one"):
        # as a Python bool for a bool input, which an int would promote to int64
        value = 0 if kind == "zero" else 1
        return bool(value) if dtype.kind == "bool" else value
    if kind == "nan":
        return math.nan
    if dtype.is_floating_point:
        return -math.inf if kind == "lowest" else math.inf
    if dtype.kind == "int":
        return -(2 ** (dtype.bits - 1)) if kind == "lowest" else 2 ** (dtype.bits - 1) - 1
    if dtype.kind == "uint":
        return 0 if kind == "lowest" else 2 ** dtype.bits - 1
    raise NotImplementedError(f"masked.{op}: {op} has no identity on {dtype.name} input to give masked-out elements; "
                              "convert the input to a float or integer dtype")


def _filled(input: Tensor, mask, kind: str, op: str) -> Tensor:
    """``input`` with its masked-out elements replaced by the identity ``kind`` (``input`` itself without a mask)."""
    if mask is None:
        return input
    return op_impl("where")(_canonical_mask(input, mask, op), input, _identity(kind, input.dtype, op))


def _converted(make, made_dtype, dtype) -> Tensor:
    """``make()`` (the op's last step, whose result has ``made_dtype``) converted to ``dtype``: the unconverted
    result is a temporary only when a conversion follows."""
    if made_dtype is dtype:
        return make()
    with scratch_scope():
        made = make()
    return made.to(dtype)


def _out_dtype(dtype, default):
    return default if dtype is None else get_dtype(dtype)


def _masked_count(input: Tensor, mask, dims, keepdim: bool, op: str):
    """How many elements each reduced slice keeps: an int64 tensor with a mask, else the slice's length."""
    if mask is None:
        return math.prod(input.shape[d] for d in dims) if input.ndim else 1
    return op_impl("sum")(_canonical_mask(input, mask, op), dims, keepdim)


def _cost(meta, flops_per_element: int, input_sized: int, result_sized: int = 1):
    """A composite's cost: its reads of the input and masks, its result, and its temporaries, counted in the
    widest real dtype: ``input_sized`` the size of the input or the result, whichever is larger (a mask
    converted to bool, the filled input, intermediates, and three for each inner reduction's split
    partials), ``result_sized`` the size of the result (partial results, counts, a result converted). Both
    rules take bound arguments; every tensor among them is read."""
    def cost(a):
        out = meta(a)
        operands = [value for value in vars(a).values() if hasattr(value, "shape")]
        largest = builtins.max(tuple(a.input.shape), tuple(out.shape), key=S.numel)
        return Cost(flops=flops_per_element * S.numel(largest),
                    bytes_read=builtins.sum(nbytes(t) for t in operands), bytes_written=nbytes(out),
                    workspace=temporaries(input_sized, largest, _F64) + temporaries(result_sized, out.shape, _F64))
    return cost


def _aten(name: str):
    return [f"nbx::masked_{name}"]


# ---- sum, prod, amax, amin, logsumexp -------------------------------------------------------------

# name: (identity of masked-out elements, whether the plain op takes dtype=)
_REDUCTIONS = {
    "sum": ("zero", True),
    "prod": ("one", True),
    "amax": ("lowest", False),
    "amin": ("highest", False),
    "logsumexp": ("lowest", False),
}


def _reduction(name: str, identity: str, takes_dtype: bool):
    def result(input, dim, keepdim, dtype, mask):
        _check_mask(input, mask, name)
        dims = reduced_dims(len(input.shape), dim, f"masked.{name}")
        default = _sum_dtype(input.dtype, None) if takes_dtype else input.dtype
        return TensorMeta(reduced_shape(tuple(input.shape), dims, bool(keepdim)), _out_dtype(dtype, default))

    def impl(input: Tensor, dim=None, *, keepdim: bool = False, dtype=None, mask=None) -> Tensor:
        out = result(input, dim, keepdim, dtype, mask)
        dims = reduced_dims(input.ndim, dim, f"masked.{name}")
        plain = get(name)
        with scratch_scope():
            filled = _filled(input, mask, identity, name)
        if takes_dtype:
            return plain.impl(filled, dims, bool(keepdim), dtype=out.dtype)
        made = plain.meta(filled, dims, bool(keepdim)).dtype
        return _converted(lambda: plain.impl(filled, dims, bool(keepdim)), made, out.dtype)
    impl.__doc__ = (f"torch.masked.{name}: ``{name}`` over ``dim`` (all dims by default) of the elements ``mask`` "
                    f"keeps; the others count as the identity ({identity}).")

    def meta(a):
        return result(a.input, a.dim, a.keepdim, a.dtype, a.mask)

    return register(f"masked.{name}", family="reduction", aten=_aten(name), meta=meta, cost=_cost(meta, 3, 5),
                    bound=True, api=())(impl)


for _name, (_identity_kind, _takes_dtype) in _REDUCTIONS.items():
    globals()[_name] = _reduction(_name, _identity_kind, _takes_dtype)


# ---- argmax, argmin --------------------------------------------------------------------------------

def _arg_reduction(name: str, identity: str):
    def result(input, dim, keepdim, dtype, mask):
        _check_mask(input, mask, name)
        shape = get(name).meta(input, dim, bool(keepdim)).shape
        return TensorMeta(shape, _out_dtype(dtype, input.dtype))

    def impl(input: Tensor, dim=None, *, keepdim: bool = False, dtype=None, mask=None) -> Tensor:
        out = result(input, dim, keepdim, dtype, mask)
        with scratch_scope():
            filled = _filled(input, mask, identity, name)
        return _converted(lambda: op_impl(name)(filled, dim, bool(keepdim)), _I64, out.dtype)
    impl.__doc__ = (f"torch.masked.{name}: the index of the ``{name}`` of the elements ``mask`` keeps (flattened "
                    "when ``dim`` is None), as the input's dtype unless ``dtype`` says otherwise.")

    def meta(a):
        return result(a.input, a.dim, a.keepdim, a.dtype, a.mask)

    return register(f"masked.{name}", family="reduction", aten=_aten(name), meta=meta, cost=_cost(meta, 1, 5),
                    bound=True, api=())(impl)


argmax, argmin = _arg_reduction("argmax", "lowest"), _arg_reduction("argmin", "highest")


# ---- cumsum, cumprod, softmax, log_softmax, softmin --------------------------------------------------

# name: (identity of masked-out elements, family)
_ALONG_DIM = {
    "cumsum": ("zero", "reduction"),
    "cumprod": ("one", "reduction"),
    "softmax": ("lowest", "normalization"),
    "log_softmax": ("lowest", "normalization"),
    "softmin": ("highest", "normalization"),
}


def _along_dim(name: str, identity: str, family: str):
    def result(input, dim, dtype, mask):
        _check_mask(input, mask, name)
        return get(name).meta(input, dim, dtype=_out_dtype(dtype, input.dtype))

    def impl(input: Tensor, dim: int, *, dtype=None, mask=None) -> Tensor:
        out = result(input, dim, dtype, mask)
        with scratch_scope():
            filled = _filled(input, mask, identity, name)
        return op_impl(name)(filled, S.wrap_dim(dim, input.ndim), dtype=out.dtype)
    impl.__doc__ = (f"torch.masked.{name}: ``{name}`` along ``dim`` with the elements ``mask`` drops taken as the "
                    f"identity ({identity}); the result has the input's dtype unless ``dtype`` says otherwise.")

    def meta(a):
        return result(a.input, a.dim, a.dtype, a.mask)

    return register(f"masked.{name}", family=family, aten=_aten(name), meta=meta, cost=_cost(meta, 4, 7),
                    bound=True, api=())(impl)


for _name, (_identity_kind, _family) in _ALONG_DIM.items():
    globals()[_name] = _along_dim(_name, _identity_kind, _family)


# ---- mean, median, norm, normalize ------------------------------------------------------------------

def _mean_result(input, dim, keepdim, dtype, mask):
    _check_mask(input, mask, "mean")
    out = _out_dtype(dtype, input.dtype)
    if not (out.is_floating_point or out.is_complex):
        raise ValueError(f"masked.mean(): could not infer output dtype: {'dtype' if dtype else 'the input dtype'} "
                         f"must be a floating point or complex dtype, got {out.name}")
    dims = reduced_dims(len(input.shape), dim, "masked.mean")
    return TensorMeta(reduced_shape(tuple(input.shape), dims, bool(keepdim)), out)


def _mean_meta(a):
    return _mean_result(a.input, a.dim, a.keepdim, a.dtype, a.mask)


@register("masked.mean", family="reduction", aten=_aten("mean"), meta=_mean_meta, cost=_cost(_mean_meta, 2, 9, 2),
          bound=True, api=())
def mean(input: Tensor, dim=None, *, keepdim: bool = False, dtype=None, mask=None) -> Tensor:
    """torch.masked.mean: the sum of the elements ``mask`` keeps over their count; NaN where it keeps none."""
    out = _mean_result(input, dim, keepdim, dtype, mask)
    dims = reduced_dims(input.ndim, dim, "masked.mean")
    with scratch_scope():
        total = get("masked.sum").impl(input, dims, keepdim=keepdim, dtype=out.dtype, mask=mask)
        count = _masked_count(input, mask, dims, bool(keepdim), "mean")
    return total / count


def _median_result(input, dim, keepdim, dtype, mask):
    _check_mask(input, mask, "median")
    if not isinstance(dim, int) and not hasattr(dim, "__index__"):
        raise TypeError(f"masked.median: dim must be one int, got {dim!r}")
    floating = input.dtype.is_floating_point
    shape = get("nanmedian").meta(TensorMeta(tuple(input.shape), input.dtype if floating else _F32), dim,
                                  bool(keepdim))[0].shape
    # a float input's median keeps its dtype whatever ``dtype`` says, as torch.masked.median does
    return TensorMeta(shape, input.dtype if floating else _out_dtype(dtype, input.dtype))


def _median_meta(a):
    return _median_result(a.input, a.dim, a.keepdim, a.dtype, a.mask)


@register("masked.median", family="sorting", aten=_aten("median"), meta=_median_meta,
          cost=_cost(_median_meta, 16, 16, 4), bound=True, api=())
def median(input: Tensor, dim: int = -1, *, keepdim: bool = False, dtype=None, mask=None) -> Tensor:
    """torch.masked.median: the lower median of the elements ``mask`` keeps along ``dim`` (``nanmedian`` of the
    input with NaN where masked out, so NaN of the input is skipped too); NaN where it keeps none, which an
    integer result cannot hold and refuses."""
    out = _median_result(input, dim, keepdim, dtype, mask)
    if input.dtype.is_floating_point:
        with scratch_scope():
            filled = _filled(input, mask, "nan", "median")
        return op_impl("nanmedian")(filled, dim, bool(keepdim)).values
    with scratch_scope():
        filled = _filled(input.to(_F32), mask, "nan", "median")
        values = op_impl("nanmedian")(filled, dim, bool(keepdim)).values
        if values.isnan().any().item():
            raise ValueError(f"masked.median: a slice whose elements are all masked out has no median in the "
                             f"integer result dtype {out.dtype.name}")
    return values.to(out.dtype)


def _norm_identity(ord) -> str:
    return "highest" if ord == -math.inf else "zero"


def _norm_result(input, ord, dim, keepdim, dtype, mask):
    _check_mask(input, mask, "norm")
    if mask is not None and _norm_identity(ord) == "highest" and not input.dtype.is_floating_point:
        raise TypeError(f"masked.norm: ord=-inf with a mask needs a floating-point input (masked-out elements "
                        f"become inf), got {input.dtype.name}")
    dims = reduced_dims(len(input.shape), dim, "masked.norm")
    return get("linalg.vector_norm").meta(input, ord, dims, bool(keepdim), dtype=_out_dtype(dtype, input.dtype))


def _norm_meta(a):
    return _norm_result(a.input, a.ord, a.dim, a.keepdim, a.dtype, a.mask)


@register("masked.norm", family="reduction", aten=_aten("norm"), meta=_norm_meta, cost=_cost(_norm_meta, 3, 5),
          bound=True, api=())
def norm(input: Tensor, ord=2.0, dim=None, *, keepdim: bool = False, dtype=None, mask=None) -> Tensor:
    """torch.masked.norm: ``linalg.vector_norm`` of order ``ord`` of the elements ``mask`` keeps (masked-out
    ones count as 0, or inf for ord=-inf); computed in ``dtype`` (default: the input's)."""
    out = _norm_result(input, ord, dim, keepdim, dtype, mask)
    dims = reduced_dims(input.ndim, dim, "masked.norm")
    with scratch_scope():
        filled = _filled(input, mask, _norm_identity(ord), "norm")
    return op_impl("linalg.vector_norm")(filled, ord, dims, bool(keepdim), dtype=out.dtype)


def _normalize_result(input, ord, dim, dtype, mask):
    norms = _norm_result(input, ord, dim, True, dtype, mask)
    return TensorMeta(tuple(input.shape), promote_types(input.dtype, norms.dtype))


def _normalize_meta(a):
    return _normalize_result(a.input, a.ord, a.dim, a.dtype, a.mask)


@register("masked.normalize", family="normalization", aten=_aten("normalize"), meta=_normalize_meta,
          cost=_cost(_normalize_meta, 4, 9), bound=True, api=())
def normalize(input: Tensor, ord, dim, *, eps: float = 1e-12, dtype=None, mask=None) -> Tensor:
    """torch.masked.normalize: the elements ``mask`` keeps divided by their ``ord``-norm along ``dim`` (at least
    ``eps``); masked-out elements are 0."""
    _normalize_result(input, ord, dim, dtype, mask)
    with scratch_scope():
        filled = _filled(input, mask, "zero", "normalize")
        norms = get("masked.norm").impl(input, ord, dim, keepdim=True, dtype=dtype, mask=mask)
        denominator = norms.clamp_min(eps)
    return filled / denominator


# ---- var, std -----------------------------------------------------------------------------------------

def _moment_dtypes(input_dtype, dtype):
    """(result dtype before any square root, the dtype sums are taken in)."""
    if dtype is None:
        out = input_dtype if input_dtype.is_floating_point or input_dtype.is_complex else _F32
    else:
        out = get_dtype(dtype)
    return out, out if out.is_floating_point or out.is_complex else _F32


def _correction(unbiased, correction, op: str) -> float:
    if unbiased is not None and correction is not None:
        raise ValueError(f"masked.{op}: pass either unbiased or correction, not both")
    if correction is not None:
        return float(correction)
    return 0.0 if unbiased is False else 1.0


def _moment(name: str, take_sqrt: bool):
    def result(input, dim, unbiased, correction, keepdim, dtype, mask):
        _check_mask(input, mask, name)
        _correction(unbiased, correction, name)
        dims = reduced_dims(len(input.shape), dim, f"masked.{name}")
        out, _ = _moment_dtypes(input.dtype, dtype)
        # the square root of an integer result is in the default float dtype
        out = get_default_dtype() if take_sqrt and not (out.is_floating_point or out.is_complex) else out
        return TensorMeta(reduced_shape(tuple(input.shape), dims, bool(keepdim)), out)

    def impl(input: Tensor, dim=None, unbiased=None, *, correction=None, keepdim: bool = False, dtype=None,
             mask=None) -> Tensor:
        result(input, dim, unbiased, correction, keepdim, dtype, mask)
        corrected = _correction(unbiased, correction, name)
        dims = reduced_dims(input.ndim, dim, f"masked.{name}")
        out, compute = _moment_dtypes(input.dtype, dtype)
        masked_sum = get("masked.sum").impl
        with scratch_scope():
            count = _masked_count(input, mask, dims, True, name)
            centred = input - masked_sum(input, dims, keepdim=True, dtype=out, mask=mask) / count
            squares = masked_sum(centred * centred, dims, keepdim=bool(keepdim), dtype=compute, mask=mask)
            if isinstance(count, Tensor):
                count = count.reshape(tuple(squares.shape))
                if corrected:
                    count = (count.to(compute) - corrected).clamp_min(0)
            elif corrected:
                count = builtins.max(count - corrected, 0.0)
        if not take_sqrt:
            return _converted(lambda: squares / count, compute, out)
        with scratch_scope():
            variance = _converted(lambda: squares / count, compute, out)
        return variance.sqrt()
    impl.__doc__ = (f"torch.masked.{name}: the {'standard deviation' if take_sqrt else 'variance'} of the elements "
                    "``mask`` keeps over ``dim``, their count less ``correction`` (1 by default; 0 for "
                    "unbiased=False) dividing, never below 0; NaN where it keeps none.")

    def meta(a):
        return result(a.input, a.dim, a.unbiased, a.correction, a.keepdim, a.dtype, a.mask)

    return register(f"masked.{name}", family="reduction", aten=_aten(name), meta=meta, cost=_cost(meta, 6, 16, 10),
                    bound=True, api=())(impl)


var, std = _moment("var", False), _moment("std", True)


# ---- logaddexp -------------------------------------------------------------------------------------

def _logaddexp_result(input, other, dtype, input_mask, other_mask):
    _check_mask(input, input_mask, "logaddexp", "input_mask")
    _check_mask(other, other_mask, "logaddexp", "other_mask")
    plain = get("logaddexp").meta(input, other)
    return TensorMeta(tuple(plain.shape), _out_dtype(dtype, input.dtype))


def _logaddexp_meta(a):
    return _logaddexp_result(a.input, a.other, a.dtype, a.input_mask, a.other_mask)


@register("masked.logaddexp", family="pointwise", aten=_aten("logaddexp"), meta=_logaddexp_meta,
          cost=_cost(_logaddexp_meta, 40, 4), bound=True, api=())
def logaddexp(input: Tensor, other: Tensor, *, dtype=None, input_mask=None, other_mask=None) -> Tensor:
    """torch.masked.logaddexp: log(exp(input) + exp(other)) with the elements each mask drops taken as -inf
    (the lowest value), so a position both drop gives -inf; as the input's dtype unless ``dtype`` says otherwise."""
    out = _logaddexp_result(input, other, dtype, input_mask, other_mask)
    with scratch_scope():
        filled_input = _filled(input, input_mask, "lowest", "logaddexp")
        filled_other = _filled(other, other_mask, "lowest", "logaddexp")
    plain = get("logaddexp")
    made = plain.meta(filled_input, filled_other).dtype
    return _converted(lambda: plain.impl(filled_input, filled_other), made, out.dtype)


# ---- samples ---------------------------------------------------------------------------------------

def _masked_reduction(function, identity):
    """A reference of ``masked.<op>(x, dim, keepdim=, mask=)``: ``function`` over the kept elements."""
    def reference(x, dim=None, *, keepdim=False, dtype=None, mask=None):
        kept = np.where(np.ones(x.shape, bool) if mask is None else mask, x, identity)
        axis = None if dim is None else dim
        return function(kept, axis=axis, keepdims=keepdim)
    return reference


def _mask(*shape):
    return operand(*shape, dtype="bool")


# every row keeps an element: a row with none has no value (NaN or the identity, op by op)
_KEEPS_ROWS = operand(2, 3, dtype="bool", values="edge")
_REDUCTIONS = (sample(operand(2, 3), 1, mask=_KEEPS_ROWS), sample(operand(2, 3), mask=_KEEPS_ROWS),
               sample(operand(3, 2, layout="transposed"), 0, keepdim=True, mask=operand(3, 2, dtype="bool", values="edge")),
               sample(operand(2, 3), 1))
_ALONG = (sample(operand(2, 3), 1, mask=_KEEPS_ROWS), sample(operand(3, 2, layout="transposed"), 0),
          sample(operand(2, 3, dtype="float64"), 1, mask=_mask(3)))
_SAMPLES = {
    "masked.sum": Samples(_REDUCTIONS, _masked_reduction(np.sum, 0.0)),
    "masked.prod": Samples(_REDUCTIONS, _masked_reduction(np.prod, 1.0)),
    "masked.amax": Samples(_REDUCTIONS, _masked_reduction(np.max, -np.inf)),
    "masked.amin": Samples(_REDUCTIONS, _masked_reduction(np.min, np.inf)),
    "masked.mean": Samples(_REDUCTIONS, lambda x, dim=None, *, keepdim=False, dtype=None, mask=None: (
        _masked_reduction(np.sum, 0.0)(x, dim, keepdim=keepdim, mask=mask)
        / _masked_reduction(np.sum, 0.0)(np.ones(x.shape), dim, keepdim=keepdim, mask=mask))),
    "masked.logsumexp": Samples(_REDUCTIONS, lambda *args, **kwargs: np.log(_masked_reduction(np.sum, 0.0)(
        np.exp(args[0]), *args[1:], **kwargs))),
    "masked.argmax": Samples(_REDUCTIONS[:1] + _REDUCTIONS[3:]),
    "masked.argmin": Samples(_REDUCTIONS[:1] + _REDUCTIONS[3:]),
    "masked.norm": Samples((sample(operand(2, 3), 2.0, 1, mask=_KEEPS_ROWS), sample(operand(2, 3), 1.0, mask=_KEEPS_ROWS),
                            sample(operand(3, 2, layout="transposed"), math.inf, 0, keepdim=True))),
    "masked.var": Samples(_REDUCTIONS),
    "masked.std": Samples(_REDUCTIONS),
    "masked.median": Samples((sample(operand(2, 3), 1, mask=_KEEPS_ROWS), sample(operand(3, 2, layout="transposed"), 0))),
    "masked.cumsum": Samples(_ALONG, lambda x, dim, *, dtype=None, mask=None: np.cumsum(
        np.where(True if mask is None else mask, x, 0.0), axis=dim)),
    "masked.cumprod": Samples(_ALONG, lambda x, dim, *, dtype=None, mask=None: np.cumprod(
        np.where(True if mask is None else mask, x, 1.0), axis=dim)),
    "masked.softmax": Samples(_ALONG),
    "masked.log_softmax": Samples(_ALONG),
    "masked.softmin": Samples(_ALONG),
    "masked.normalize": Samples((sample(operand(2, 3), 2.0, 1, mask=_KEEPS_ROWS), sample(operand(3, 2, layout="transposed"), 1.0, 0))),
    "masked.logaddexp": Samples((sample(operand(2, 3), operand(2, 3), input_mask=_KEEPS_ROWS, other_mask=_KEEPS_ROWS),
                                 sample(operand(3, 2, layout="transposed"), operand(3, 2)))),
}
for _family in ("reduction", "normalization", "sorting", "pointwise"):
    family_samples(_family, by_name(_SAMPLES))
