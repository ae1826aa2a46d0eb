"""Order statistics and integrals: median, nanmedian, mode, quantile and nanquantile from one stable
sort along the reduced dim (NaN sorts last, so a row's NaN count says where its valid values end);
trapezoid rules, histogram and renorm composed of registry ops, their intermediates the op's temporaries."""
from __future__ import annotations

import builtins
from collections import namedtuple
import math

import numpy as np

from .. import shape as S
from ..allocation import new_tensor, scratch_scope
from ..dtypes import get_dtype
from ..promotion import get_default_dtype
from ..tensor import Tensor
from .nn_composites import temporaries
from .registry import Cost, OUT, TensorMeta, family_samples, nbytes, op_impl, register
from .samples import Samples, by_name, operand, sample

_I64 = get_dtype("int64")
median_result = namedtuple("median", ["values", "indices"])
nanmedian_result = namedtuple("nanmedian", ["values", "indices"])
mode_result = namedtuple("mode", ["values", "indices"])
histogram_result = namedtuple("histogram", ["hist", "bin_edges"])


def _sort_cost(x, outputs, extra=4):
    return Cost(flops=S.numel(x.shape) * max(1, S.numel(x.shape)).bit_length(), bytes_read=nbytes(x),
                bytes_written=sum(nbytes(o) for o in outputs),
                workspace=temporaries(extra, x.shape, x.dtype) + temporaries(extra, x.shape, _I64))


# ---- median, nanmedian, mode ------------------------------------------------------------------------

def _median_meta_for(op: str, takes_bool: bool = False):
    """``meta(input, dim, keepdim)``: median's, nanmedian's or mode's results."""
    def meta(input, dim, keepdim):
        if input.dtype.is_complex or (input.dtype.name == "bool" and not takes_bool):
            raise RuntimeError(f"\"{op}\" not implemented for '{input.dtype.name}'")
        if dim is None:
            return TensorMeta((), input.dtype)
        d = S.wrap_dim(dim, max(len(input.shape), 1))
        if len(input.shape) and input.shape[d] == 0:
            raise IndexError(f"{op}(): Expected reduction dim {d} to have non-zero size.")
        shape = tuple(n for i, n in enumerate(input.shape) if i != d or keepdim) if input.shape else ()
        if keepdim and input.shape:
            shape = tuple(1 if i == d else n for i, n in enumerate(input.shape))
        return (TensorMeta(shape, input.dtype), TensorMeta(shape, _I64))
    return meta


def _sorted_rows(input: Tensor, dim):
    """(values sorted along the last dim, their original indices, NaN count per row with a trailing 1)."""
    x = input.reshape(-1) if dim is None else input.movedim(dim, -1) if input.ndim else input.reshape(1)
    ordered = x.sort(-1, stable=True)
    nans = x.isnan().sum(-1, keepdim=True) if x.dtype.is_floating_point else None
    return ordered.values, ordered.indices, nans


def _median(input: Tensor, dim, keepdim: bool, ignore_nan: bool, op: str, result):
    meta = _median_meta_for(op)(input, dim, keepdim)
    if dim is None and input.numel() == 0:
        return op_impl("full")((), math.nan, dtype=input.dtype, device=input.device)
    with scratch_scope():
        values, indices, nans = _sorted_rows(input, dim)
        n = values.shape[-1]
        if nans is None:
            pick = op_impl("full")(tuple(values.shape[:-1]) + (1,), (n - 1) // 2, dtype=_I64, device=input.device)
        elif ignore_nan:
            # the lower median of the valid values; an all-NaN row picks its first (NaN) element
            pick = ((n - nans - 1).div(2, rounding_mode="floor")).clamp_min(0)
        else:
            # a row holding NaN gives NaN: the first NaN sits at n - nans
            pick = op_impl("where")(nans > 0, n - nans, (n - 1) // 2)
    if dim is None:
        return values.gather(-1, pick).reshape(())
    shape = meta[0].shape
    picked, where = values.gather(-1, pick).reshape(shape), indices.gather(-1, pick).reshape(shape)
    return result(picked, where)


def _median_rules(op, takes_bool: bool = False, extra: int = 4) -> dict:
    """``register``'s meta and cost rules (of bound arguments) of median, nanmedian or mode; ``extra`` as
    ``_sort_cost``'s."""
    results = _median_meta_for(op, takes_bool)

    def meta(a):
        return results(a.input, a.dim, a.keepdim)

    def cost(a):
        out = meta(a)
        return _sort_cost(a.input, (out,) if isinstance(out, TensorMeta) else out, extra)
    return {"meta": meta, "cost": cost, "bound": True}


@register("median", family="sorting", aten=["aten::median.default", "aten::median.dim"], methods=("median",),
          **_median_rules("median"))
def median(input: Tensor, dim=None, keepdim: bool = False):
    """The lower median (of an even count, the smaller middle value), NaN where the values hold NaN;
    along ``dim``, also where it lies in the input."""
    return _median(input, dim, keepdim, False, "median", median_result)


@register("nanmedian", family="sorting", aten=["aten::nanmedian.default", "aten::nanmedian.dim"],
          methods=("nanmedian",), **_median_rules("nanmedian"))
def nanmedian(input: Tensor, dim=None, keepdim: bool = False):
    """``median`` of the values that are not NaN (NaN where all are)."""
    return _median(input, dim, keepdim, True, "nanmedian", nanmedian_result)


# torch's mode counts bools (True above False); its median refuses them
_mode_meta = _median_meta_for("mode", takes_bool=True)


@register("mode", family="sorting", aten=["aten::mode.default"], methods=("mode",),
          **_median_rules("mode", takes_bool=True, extra=6))
def mode(input: Tensor, dim: int = -1, keepdim: bool = False):
    """The most frequent value along ``dim`` (the smallest of equally frequent ones) and the index of its
    last occurrence. Runs of equal values in the sorted row are measured by a running maximum of their
    start positions."""
    meta = _mode_meta(input, dim, keepdim)
    with scratch_scope():
        values, indices, _ = _sorted_rows(input, dim)
        n = values.shape[-1]
        positions = op_impl("arange")(n, device=input.device).expand(values.shape)
        starts = op_impl("ones")(values.shape, dtype="bool", device=input.device)
        if n > 1:
            starts[..., 1:] = values[..., 1:] != values[..., :-1]
        run_start = op_impl("where")(starts, positions, 0).cummax(-1).values
        # (position - its run's start) peaks at the last element of the longest run; argmax takes the first
        # peak, so of equally long runs the smallest value wins
        ends = (positions - run_start).argmax(-1, keepdim=True)
    shape = meta[0].shape
    return mode_result(values.gather(-1, ends).reshape(shape), indices.gather(-1, ends).reshape(shape))


# ---- quantile, nanquantile ----------------------------------------------------------------------------

_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile_meta_for(op: str):
    """``meta(input, q, dim, keepdim, interpolation)``: quantile's or nanquantile's result."""
    def meta(input, q, dim, keepdim, interpolation):
        if not input.dtype.is_floating_point or input.dtype.name not in ("float32", "float64"):
            raise RuntimeError(f"{op}() input tensor must be either float or double dtype")
        if S.numel(input.shape) == 0:
            raise RuntimeError(f"{op}() input tensor must be non-empty")
        if interpolation not in _INTERPOLATIONS:
            raise ValueError(f"{op}() interpolation must be one of linear, lower, higher, midpoint or nearest. "
                             f"Found {interpolation}")
        q_shape = ()
        if hasattr(q, "shape"):
            if len(q.shape) > 1:
                raise RuntimeError(f"{op}() q must be a scalar or 1D tensor")
            if q.dtype is not input.dtype:
                raise RuntimeError(f"{op}() q tensor must be same dtype as the input tensor")
            q_shape = tuple(q.shape)
        if dim is None:
            rows = (1,) * len(input.shape) if keepdim else ()
        else:
            d = S.wrap_dim(dim, max(len(input.shape), 1))
            rows = tuple(1 if i == d else n for i, n in enumerate(input.shape) if keepdim or i != d)
        return TensorMeta(q_shape + rows, input.dtype)
    return meta


def _quantile(input, q, dim, keepdim, interpolation, ignore_nan, op):
    meta = _quantile_meta_for(op)(input, q, dim, keepdim, interpolation)
    scalar_q = not isinstance(q, Tensor)
    if scalar_q:
        if not 0 <= q <= 1:
            raise RuntimeError(f"{op}() q must be in the range [0, 1] but got {q}")
        q = op_impl("full")((1,), q, dtype=input.dtype, device=input.device)
    elif q.numel() and ((q < 0) | (q > 1)).any().item():
        raise RuntimeError(f"{op}() q values must be in the range [0, 1]")
    with scratch_scope():
        values, _, nans = _sorted_rows(input, dim)
        n = values.shape[-1]
        rows = values.reshape(-1, n)
        nans = nans.reshape(-1, 1)
        qs = q.reshape(-1, 1, 1)
        valid = (n - nans) if ignore_nan else op_impl("full_like")(nans, n)
        rank = qs * (valid - 1).to(input.dtype)
        if interpolation == "nearest":
            rank = rank.round()
        low = rank.floor().clamp(0, n - 1).to("int64")
        high = rank.ceil().clamp(0, n - 1).to("int64")
        grid = rows.expand(qs.shape[0], *rows.shape)
        below, above = grid.gather(-1, low), grid.gather(-1, high)
        if interpolation == "lower" or interpolation == "nearest":
            result = below
        elif interpolation == "higher":
            result = above
        elif interpolation == "midpoint":
            result = below.lerp(above, 0.5)
        else:
            result = below.lerp(above, rank - low.to(input.dtype))
        # a row with NaN gives NaN (quantile), an all-NaN row too (nanquantile)
        undefined = (valid == 0) if ignore_nan else (nans > 0)
    final = op_impl("where")(undefined, math.nan, result).reshape(meta.shape)
    return final


def _quantile_rules(op) -> dict:
    """``register``'s meta and cost rules (of bound arguments) of quantile or nanquantile."""
    result_of = _quantile_meta_for(op)

    def meta(a):
        return result_of(a.input, a.q, a.dim, a.keepdim, a.interpolation)

    def cost(a):
        input, q, result = a.input, a.q, meta(a)
        count = S.numel(q.shape) if hasattr(q, "shape") else 1
        return Cost(flops=S.numel(input.shape) * max(1, S.numel(input.shape)).bit_length(), bytes_read=nbytes(input),
                    bytes_written=nbytes(result), workspace=temporaries(4, input.shape, input.dtype)
                    + temporaries(2, input.shape, _I64) + temporaries(12, result.shape, _I64) + count * 4096)
    return {"meta": meta, "cost": cost, "bound": True}


@register("quantile", family="sorting", aten=["aten::quantile.default", "aten::quantile.scalar"],
          methods=("quantile",), variants=(OUT,), **_quantile_rules("quantile"))
def quantile(input: Tensor, q, dim=None, keepdim: bool = False, *, interpolation: str = "linear"):
    """The ``q``-quantiles along ``dim`` (of all values without one): the value at rank q (n - 1) of the
    sorted values, interpolated as asked; a 1-D ``q`` puts its dim first. NaN where the values hold NaN."""
    return _quantile(input, q, dim, keepdim, interpolation, False, "quantile")


@register("nanquantile", family="sorting", aten=["aten::nanquantile.default", "aten::nanquantile.scalar"],
          methods=("nanquantile",), variants=(OUT,), **_quantile_rules("nanquantile"))
def nanquantile(input: Tensor, q, dim=None, keepdim: bool = False, *, interpolation: str = "linear"):
    """``quantile`` of the values that are not NaN (NaN where all are)."""
    return _quantile(input, q, dim, keepdim, interpolation, True, "nanquantile")


# ---- trapezoid rules --------------------------------------------------------------------------------------

def _trapezoid_parts(y, x, dx, dim, op):
    if x is not None and dx is not None:
        raise RuntimeError(f"{op}: cannot pass both x and dx")
    if len(y.shape) == 0:
        raise IndexError(f"{op}: expected y to have at least one dimension, got 0")
    d = S.wrap_dim(dim, len(y.shape))
    if x is not None and hasattr(x, "shape") and len(x.shape) != 1 and len(x.shape) != len(y.shape):
        raise RuntimeError(f"{op}: There must be one `x` value for each sample point")
    if x is not None and hasattr(x, "shape") and len(x.shape) == 1 and x.shape[0] != y.shape[d]:
        raise RuntimeError(f"{op}: There must be one `x` value for each sample point")
    dtype = y.dtype if y.dtype.is_floating_point else get_default_dtype()
    if x is not None and hasattr(x, "dtype") and x.dtype.is_floating_point and x.dtype.itemsize > dtype.itemsize:
        dtype = x.dtype
    return d, dtype


def _trapezoid_meta(y, x, dx, dim):
    d, dtype = _trapezoid_parts(y, x, dx, dim, "trapezoid")
    return TensorMeta(tuple(n for i, n in enumerate(y.shape) if i != d), dtype)


def _cumulative_meta(y, x, dx, dim):
    d, dtype = _trapezoid_parts(y, x, dx, dim, "cumulative_trapezoid")
    return TensorMeta(tuple(max(n - 1, 0) if i == d else n for i, n in enumerate(y.shape)), dtype)


def _areas(y: Tensor, x, dx, d: int, dtype) -> Tensor:
    """The area of each interval along ``d``: (y[i] + y[i+1]) / 2 times its width."""
    n = y.shape[d]
    heights = y.narrow(d, 1, n - 1).to(dtype) + y.narrow(d, 0, n - 1)
    if x is None or not hasattr(x, "shape"):
        return heights * ((1.0 if dx is None else dx) / 2) if x is None else heights * (x / 2)
    if x.ndim == 1:
        x = x.reshape((n,) + (1,) * (y.ndim - d - 1))
        widths = x.narrow(0, 1, n - 1) - x.narrow(0, 0, n - 1)
    else:
        widths = x.narrow(d, 1, n - 1) - x.narrow(d, 0, n - 1)
    return heights * widths / 2


def _trapezoid_cost(a):
    # the areas (y's size) and the result, which outsizes them where y's integrated dim is empty
    y, result = a.y, _trapezoid_meta(a.y, a.x, a.dx, a.dim)
    return Cost(flops=4 * S.numel(y.shape), bytes_read=nbytes(y) * 2, bytes_written=max(nbytes(y), nbytes(result)),
                workspace=temporaries(4, y.shape, get_dtype("float64")))


@register("trapezoid", family="reduction", aten=["aten::trapezoid.x", "aten::trapezoid.dx"],
          meta=lambda a: _trapezoid_meta(a.y, a.x, a.dx, a.dim), cost=_trapezoid_cost, bound=True,
          api=("trapezoid", "trapz"))
def trapezoid(y: Tensor, x=None, *, dx=None, dim: int = -1) -> Tensor:
    """The trapezoid rule along ``dim``: samples ``y`` at points ``x`` (a tensor, 1-D or as ``y``), or spaced
    ``dx`` apart (a number given as ``x`` or ``dx``; default 1)."""
    meta = _trapezoid_meta(y, x, dx, dim)
    d = S.wrap_dim(dim, y.ndim)
    if y.shape[d] <= 1:
        return op_impl("zeros")(meta.shape, dtype=meta.dtype, device=y.device)
    with scratch_scope():
        areas = _areas(y, x, dx, d, meta.dtype)
    return areas.sum(d)


@register("cumulative_trapezoid", family="reduction", aten=["aten::cumulative_trapezoid.x",
                                                           "aten::cumulative_trapezoid.dx"],
          meta=lambda a: _cumulative_meta(a.y, a.x, a.dx, a.dim), cost=_trapezoid_cost, bound=True)
def cumulative_trapezoid(y: Tensor, x=None, *, dx=None, dim: int = -1) -> Tensor:
    """The running trapezoid-rule integral along ``dim`` (one value fewer than ``y`` has samples)."""
    meta = _cumulative_meta(y, x, dx, dim)
    d = S.wrap_dim(dim, y.ndim)
    if y.shape[d] <= 1:
        return new_tensor(meta.shape, meta.dtype, y.device)
    with scratch_scope():
        areas = _areas(y, x, dx, d, meta.dtype)
    return areas.cumsum(d)


# ---- histogram, renorm -----------------------------------------------------------------------------------

def _histogram_meta(input, bins, weight) -> tuple:
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"torch.histogram: input tensor and bins tensors should have the same dtype, but got "
                           f"input {input.dtype.name} and bins float")
    if isinstance(bins, int):
        if bins <= 0:
            raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
        count = bins
    else:
        if len(bins.shape) != 1:
            raise RuntimeError(f"torch.histogram(): bins tensor should have one dimension, but got {len(bins.shape)} "
                               "dimensions in the bin tensor")
        count = bins.shape[0] - 1
    if weight is not None and tuple(weight.shape) != tuple(input.shape):
        raise RuntimeError("torch.histogram: if weight tensor is provided it should have the same shape as the input "
                           f"tensor excluding its innermost dimension, but got input with shape {list(input.shape)} and "
                           f"weight with shape {list(weight.shape)}")
    return (TensorMeta((count,), input.dtype), TensorMeta((count + 1,), input.dtype))


def equal_bin_edges(values: Tensor, count: int, range, op: str) -> Tensor:
    """The ``count + 1`` edges of equal bins over ``range`` (default: the values' min and max, read on the
    host), an empty range widened by 0.5 each way, as numpy's; in the values' dtype."""
    if range is None:
        low, high = (float(values.min().item()), float(values.max().item())) if values.numel() else (0.0, 0.0)
    else:
        low, high = float(range[0]), float(range[1])
    if low > high:
        raise RuntimeError(f"torch.{op}(): max must be larger than min, but got min {low} max {high}")
    if not (math.isfinite(low) and math.isfinite(high)):
        raise RuntimeError(f"torch.{op}(): range of [{low}, {high}] is not finite")
    if low == high:
        low, high = low - 0.5, high + 0.5
    return op_impl("linspace")(low, high, count + 1, dtype=values.dtype, device=values.device)


def bin_positions(values: Tensor, edges: Tensor) -> Tensor:
    """The bin of each of the 1-D ``values`` between ``edges``: a bin holds [edge, next edge), the last one its
    right edge too; values outside the edges (and NaN) get the bin count, one past the last bin."""
    count = edges.shape[0] - 1
    bin_of = op_impl("searchsorted")(edges, values, right=True) - 1
    bin_of = op_impl("where")(values == edges[count], count - 1, bin_of)
    outside = (bin_of < 0) | (bin_of >= count) | values.isnan()
    return op_impl("where")(outside, count, bin_of)


@register("histogram", family="sorting", aten=["aten::histogram.bins_tensor", "aten::histogram.bin_ct"],
          meta=lambda a: _histogram_meta(a.input, a.bins, a.weight),
          cost=lambda a: Cost(flops=S.numel(a.input.shape) * 8, bytes_read=nbytes(a.input),
                              bytes_written=sum(nbytes(m) for m in _histogram_meta(a.input, a.bins, a.weight)),
                              workspace=temporaries(6, a.input.shape, _I64)),
          bound=True, methods=("histogram",), variants=(OUT,))
def histogram(input: Tensor, bins=100, *, range=None, weight=None, density: bool = False):
    """Counts (or summed ``weight``) of the values in each bin: ``bins`` equal bins over ``range`` (default:
    the values' min and max, read on the host) or the given edges. A bin holds [edge, next edge), the last
    one its right edge too; values outside the edges are not counted. ``density`` divides by the total and
    the bin widths."""
    meta = _histogram_meta(input, bins, weight)
    count = meta[0].shape[0]
    if isinstance(bins, int):
        edges = equal_bin_edges(input, count, range, "histogram")
    else:
        edges = bins.to(input.dtype).contiguous()
    with scratch_scope():
        values = input.reshape(-1)
        bin_of = bin_positions(values, edges)
        amounts = (op_impl("ones")(values.shape, dtype=input.dtype, device=input.device) if weight is None
                   else weight.reshape(-1).to(input.dtype))
        totals = op_impl("zeros")((count + 1,), dtype=input.dtype, device=input.device).index_add_(0, bin_of, amounts)
        if density:
            scale = totals[:count].sum() * (edges[1:] - edges[:-1])
    hist = totals[:count] / scale if density else totals[:count].clone()
    return histogram_result(hist, edges)


def _renorm_meta(input, p, dim, maxnorm):
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    if len(input.shape) <= 1:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {len(input.shape)} dimensions")
    S.wrap_dim(dim, len(input.shape))
    return TensorMeta(tuple(input.shape), input.dtype)


@register("renorm", family="reduction", aten=["aten::renorm.default"],
          meta=lambda a: _renorm_meta(a.input, a.p, a.dim, a.maxnorm),
          cost=lambda a: Cost(flops=4 * S.numel(a.input.shape), bytes_read=2 * nbytes(a.input),
                              bytes_written=nbytes(a.input),
                              workspace=temporaries(3, a.input.shape[:1], a.input.dtype)),
          bound=True, methods=("renorm",))
def renorm(input: Tensor, p: float, dim: int, maxnorm: float) -> Tensor:
    """Each slice along ``dim`` whose p-norm exceeds ``maxnorm`` scaled down to norm ``maxnorm`` (divided by
    its norm plus 1e-7, as ATen's)."""
    _renorm_meta(input, p, dim, maxnorm)
    d = S.wrap_dim(dim, input.ndim)
    others = [i for i in builtins.range(input.ndim) if i != d]
    with scratch_scope():
        norms = op_impl("linalg.vector_norm")(input, p, others, True)
        factor = op_impl("where")(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0).to(input.dtype)
    return input * factor


# ---- samples ---------------------------------------------------------------------------------------

def _median_reference(ignore_nan: bool):
    """torch's median: the lower of the two middle values (not their mean), with its index."""
    def reference(x, dim=None, keepdim=False):
        flat = dim is None
        rows = np.reshape(x, (1, -1)) if flat else np.moveaxis(np.atleast_1d(x), dim if np.ndim(x) else 0, -1)
        order = np.argsort(rows, axis=-1, kind="stable")
        counts = np.sum(~np.isnan(rows), axis=-1, keepdims=True) if ignore_nan else rows.shape[-1]
        middle = (np.maximum(counts, 1) - 1) // 2
        index = np.take_along_axis(order, np.broadcast_to(middle, rows.shape[:-1] + (1,)), axis=-1)[..., 0]
        values = np.take_along_axis(rows, index[..., None], axis=-1)[..., 0]
        if flat:
            return values.reshape(())
        if keepdim and np.ndim(x):
            values, index = np.expand_dims(values, dim), np.expand_dims(index, dim)
        return values.reshape(np.shape(values)), index
    return reference


def _quantile_reference(ignore_nan: bool):
    def reference(x, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
        function = np.nanquantile if ignore_nan else np.quantile
        axis = None if dim is None or np.ndim(x) == 0 else dim
        return function(x, q, axis=axis, keepdims=keepdim, method=interpolation)
    return reference


def _cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    y = np.moveaxis(y, dim, -1)
    widths = np.diff(np.moveaxis(x, dim, -1) if x is not None and np.ndim(x) > 1 else x) if x is not None else (
        1.0 if dx is None else dx)
    areas = (y[..., 1:] + y[..., :-1]) / 2 * widths
    return np.moveaxis(np.cumsum(areas, axis=-1), -1, dim)


def _renorm_reference(x, p, dim, maxnorm):
    """Each slice along ``dim`` scaled to norm ``maxnorm`` where its p-norm exceeds it (ATen's 1e-7 guard)."""
    others = tuple(d for d in range(x.ndim) if d != dim)
    norms = (np.max(np.abs(x), axis=others, keepdims=True) if p == math.inf
             else np.sum(np.abs(x) ** p, axis=others, keepdims=True) ** (1 / p))
    return x * np.where(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0)


_ROWS = (sample(operand(2, 5), 1), sample(operand(5, 2, layout="transposed"), 0, True), sample(operand(), 0),
         sample(operand(2, 4, dtype="float64", layout="sliced"), -1))
_SAMPLES = {
    "median": Samples((sample(operand(2, 5)),) + _ROWS, _median_reference(False)),
    "nanmedian": Samples((sample(operand(2, 5)), sample(operand(12, values="edge"), 0)) + _ROWS, _median_reference(True)),
    "mode": Samples((sample(operand(2, 5, dtype="int64", values="index", domain=(0, 3))),
                     sample(operand(5, 2, dtype="int64", layout="transposed", values="index", domain=(0, 2)), 0, True),
                     sample(operand(dtype="int64"), 0))),
    "quantile": Samples((sample(operand(2, 5), 0.3), sample(operand(5, 2, layout="transposed"), operand(3, values="unit"), 0),
                         sample(operand(2, 5, dtype="float64"), 0.5, 1, True, interpolation="nearest"),
                         sample(operand(4), 0.25, interpolation="midpoint")), _quantile_reference(False)),
    "nanquantile": Samples((sample(operand(2, 5), 0.3), sample(operand(12, values="edge"), 0.5, 0),
                            sample(operand(5, 2, layout="transposed"), operand(3, values="unit"), 0)),
                           _quantile_reference(True)),
    "trapezoid": Samples((sample(operand(2, 5)), sample(operand(5, 2, layout="transposed"), dim=0),
                          sample(operand(2, 4), operand(4), dim=1), sample(operand(3), dx=0.5), sample(operand(2, 0))),
                         lambda y, x=None, *, dx=None, dim=-1: np.trapezoid(y, x, dx=1.0 if dx is None else dx, axis=dim)),
    "cumulative_trapezoid": Samples((sample(operand(2, 5)), sample(operand(5, 2, layout="transposed"), dim=0),
                                     sample(operand(2, 4), operand(4), dim=1), sample(operand(3), dx=0.5)),
                                    _cumulative_trapezoid),
    "histogram": Samples((sample(operand(8), 4), sample(operand(6, dtype="float64"), 3, range=(-1.0, 1.0)),
                          sample(operand(5), operand(3, values="index", domain=(0, 1)), weight=operand(5, values="positive"),
                                 density=True)),
                         lambda x, bins=100, *, range=None, weight=None, density=False, out=None: np.histogram(
                             x, np.sort(bins) if np.ndim(bins) else bins, range=range, weights=weight, density=density)),
    "renorm": Samples((sample(operand(3, 4), 2, 0, 1.0), sample(operand(4, 3, layout="transposed"), 1, 1, 0.5),
                       sample(operand(2, 3, dtype="float64"), math.inf, 0, 2.0)), _renorm_reference),
}
for _family in ("sorting", "reduction"):
    family_samples(_family, by_name(_SAMPLES))
