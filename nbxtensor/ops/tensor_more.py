"""More of torch's tensor ops, each composed of registry ops: ``addbmm``, ``cov`` and ``corrcoef``,
``constant_pad_nd``, ``index_reduce``, ``complex`` and ``polar``, ``put``, ``unravel_index``, ``gradient``,
``as_strided_scatter``, ``sum_to_size``, ``logspace``, ``nonzero_static``, ``histogramdd``, the in-place
``resize_`` pair and the strided and permuted ``empty`` factories; their intermediates the op's temporaries."""
from __future__ import annotations

import builtins
from collections import namedtuple
import math
import numbers

import numpy as np

from .. import shape as S
from ..allocation import new_tensor, scratch_scope
from ..device import resolve
from ..dtypes import get_dtype
from ..grad_mode import refuse_requires_grad
from ..promotion import get_default_dtype
from ..tensor import Tensor
from .copy import format_strides
from .nn_composites import _float_dtype, temporaries
from .registry import OUT_OF_PLACE, VIEW, Cost, TensorMeta, family_samples, get, nbytes, register, samples_of
from .samples import Samples, by_name, operand, sample
from .statistics import bin_positions, equal_bin_edges
from .views import become

_I64 = get_dtype("int64")
histogramdd_result = namedtuple("histogramdd", ["hist", "bin_edges"])


def _op(name):
    return get(name).impl


def _copy_cost(meta_rule, flops_per_element: int = 0, temporaries_count: int = 0):
    """A cost rule, of bound arguments, for an op reading its tensor arguments once and writing
    ``meta_rule``'s result (a rule of bound arguments too), with ``temporaries_count`` temporaries the size
    of the result."""
    def cost(a):
        out = meta_rule(a)
        outs = (out,) if isinstance(out, TensorMeta) else out
        read = sum(nbytes(v) for v in vars(a).values() if hasattr(v, "shape") and hasattr(v, "dtype"))
        first = outs[0] if outs else TensorMeta((), _I64)
        return Cost(flops=flops_per_element * S.numel(first.shape), bytes_read=read,
                    bytes_written=sum(nbytes(o) for o in outs),
                    workspace=temporaries(temporaries_count, first.shape, first.dtype))
    return cost


# ---- addbmm ----------------------------------------------------------------------------------------

def _addbmm_operands(batch1, batch2):
    """The metas of ``batch1`` as (n, b*m) and ``batch2`` as (b*m, p): one product sums every batch's."""
    for name, t in (("batch1", batch1), ("batch2", batch2)):
        if len(t.shape) != 3:
            raise RuntimeError(f"{name} must be a 3D tensor, got {len(t.shape)}-D")
    b, n, m = batch1.shape
    if batch2.shape[0] != b:
        raise RuntimeError(f"batch1 and batch2 must have same number of batches, got {b} and {batch2.shape[0]}")
    if batch2.shape[1] != m:
        raise RuntimeError(f"Incompatible matrix sizes for bmm ({n}x{m} and {batch2.shape[1]}x{batch2.shape[2]})")
    return Tensor._meta((n, b * m), batch1.dtype), Tensor._meta((b * m, batch2.shape[2]), batch2.dtype)


def _addbmm_meta(a):
    return get("addmm").meta(a.input, *_addbmm_operands(a.batch1, a.batch2), beta=a.beta, alpha=a.alpha)


def _addbmm_cost(a):
    left, right = _addbmm_operands(a.batch1, a.batch2)
    inner = get("addmm").cost(a.input, left, right, beta=a.beta, alpha=a.alpha)
    return Cost(flops=inner.flops, bytes_read=inner.bytes_read, bytes_written=inner.bytes_written,
                workspace=inner.workspace + temporaries(1, left.shape, left.dtype)
                + temporaries(1, right.shape, right.dtype))


@register("addbmm", family="matmul", aten=["aten::addbmm.default"], meta=_addbmm_meta, cost=_addbmm_cost,
          bound=True, methods=("addbmm",))
def addbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """``beta * input + alpha * sum_b(batch1[b] @ batch2[b])``: the batches laid side by side along the inner
    dimension, so one ``addmm`` sums them in its accumulator."""
    left, right = _addbmm_operands(batch1, batch2)
    with scratch_scope():
        wide = batch1.permute(1, 0, 2).reshape(left.shape)
        tall = batch2.reshape(right.shape)
    return _op("addmm")(input, wide, tall, beta=beta, alpha=alpha)


# ---- cov, corrcoef ---------------------------------------------------------------------------------

def _check_weights(name: str, weights, observations: int, integral: bool) -> None:
    if weights is None:
        return
    if len(weights.shape) > 1:
        raise RuntimeError(f"cov(): expected {name} to have one or fewer dimensions but got {name} with "
                           f"{len(weights.shape)} dimensions")
    if S.numel(weights.shape) != observations:
        raise RuntimeError(f"cov(): expected {name} to have the same numel as there are observations in the input "
                           f"but got {S.numel(weights.shape)} != {observations}")
    if integral and not weights.dtype.is_integral:
        raise RuntimeError(f"cov(): expected fweights to have integral dtype but got fweights with "
                           f"{weights.dtype.name} dtype")
    if not integral and not weights.dtype.is_floating_point:
        raise RuntimeError(f"cov(): expected aweights to have floating point dtype but got aweights with "
                           f"{weights.dtype.name} dtype")


def _cov_meta(input, fweights, aweights):
    if len(input.shape) > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an input with "
                           f"{len(input.shape)} dimensions")
    observations = input.shape[-1] if input.shape else 1
    _check_weights("fweights", fweights, observations, True)
    _check_weights("aweights", aweights, observations, False)
    variables = input.shape[0] if len(input.shape) == 2 else 1
    weights = [w.dtype for w in (fweights, aweights) if w is not None]
    return TensorMeta(() if variables == 1 else (variables, variables), _float_dtype(input.dtype, *weights))


def _cov_temporaries(input, meta) -> int:
    """The converted input, centred and weighted copies, the product; per-observation weights; scalars."""
    variables = meta.shape[0] if meta.shape else 1
    observations = S.numel(input.shape) // variables
    return (temporaries(4, input.shape, meta.dtype) + temporaries(1, (variables, variables), meta.dtype)
            + temporaries(6, (observations,), meta.dtype) + temporaries(2, (variables,), meta.dtype)
            + temporaries(6, (), meta.dtype))


def _cov_cost(input, fweights, aweights):
    meta = _cov_meta(input, fweights, aweights)
    variables = meta.shape[0] if meta.shape else 1
    return Cost(flops=2 * variables * S.numel(input.shape) + 4 * S.numel(input.shape), bytes_read=nbytes(input),
                bytes_written=nbytes(meta), workspace=_cov_temporaries(input, meta))


def _corrcoef_cost(input):
    meta = _cov_meta(input, None, None)
    variables = meta.shape[0] if meta.shape else 1
    # cov's result and its own temporaries, the standard deviations, one scaled copy
    return Cost(flops=_cov_cost(input, None, None).flops + 3 * S.numel(meta.shape), bytes_read=nbytes(input),
                bytes_written=nbytes(meta),
                workspace=_cov_temporaries(input, meta) + temporaries(2, meta.shape, meta.dtype)
                + temporaries(2, (variables,), meta.dtype))


def _refuse_negative(weights, name: str) -> None:
    if weights is not None and weights.numel() and bool((weights < 0).any().item()):
        raise RuntimeError(f"cov(): {name} cannot be negative")


@register("cov", family="reduction", aten=["aten::cov.default"],
          meta=lambda a: _cov_meta(a.input, a.fweights, a.aweights),
          cost=lambda a: _cov_cost(a.input, a.fweights, a.aweights), bound=True, methods=("cov",))
def cov(input: Tensor, *, correction: int = 1, fweights=None, aweights=None) -> Tensor:
    """The covariance matrix of the variables in ``input``'s rows (a 1-D input is one variable), observations
    in its columns, weighted by the frequency (``fweights``) and importance (``aweights``) of each; divided
    by the weights' total less ``correction`` (the effective count with aweights), clamped at zero as ATen's.
    Negative weights are refused, which reads a flag on the host."""
    meta = _cov_meta(input, fweights, aweights)
    _refuse_negative(fweights, "fweights")
    _refuse_negative(aweights, "aweights")
    real = meta.dtype.to_real() if meta.dtype.is_complex else meta.dtype
    with scratch_scope():
        x = (input.reshape(1, -1) if input.ndim < 2 else input).to(meta.dtype)
        weights = None
        for given in (fweights, aweights):
            if given is not None:
                given = given.to(real)
                weights = given if weights is None else weights * given
        if weights is None:
            total = x.shape[1]
            mean = x.mean(1, keepdim=True)
        else:
            total = weights.sum()
            mean = (x * weights).sum(1, keepdim=True) / total
        if aweights is None or correction == 0:
            count = total - correction
        else:
            count = total - correction * (weights * aweights.to(real)).sum() / total
        count = max(count, 0) if isinstance(count, numbers.Number) else _op("clamp_min")(count, 0)
        centred = x - mean
        weighted = centred if weights is None else centred * weights
        product = _op("matmul")(centred, weighted.mT.conj() if meta.dtype.is_complex else weighted.mT)
    return (product / count).reshape(meta.shape)


@register("corrcoef", family="reduction", aten=["aten::corrcoef.default"],
          meta=lambda a: _cov_meta(a.input, None, None), cost=lambda a: _corrcoef_cost(a.input), bound=True,
          methods=("corrcoef",))
def corrcoef(input: Tensor) -> Tensor:
    """Pearson's correlation coefficients of the variables in ``input``'s rows: their covariance over the
    product of their standard deviations, clipped to [-1, 1] (real and imaginary parts alike)."""
    with scratch_scope():
        covariance = _op("cov")(input)
    if covariance.ndim == 0:
        return covariance / covariance
    with scratch_scope():
        spread = covariance.diagonal()
        spread = (spread.real if spread.dtype.is_complex else spread).sqrt()
        scaled = covariance / spread.unsqueeze(1) / spread.unsqueeze(0)
    if scaled.dtype.is_complex:
        return _op("complex")(scaled.real.clamp(-1, 1), scaled.imag.clamp(-1, 1))
    return scaled.clamp(-1, 1)


# ---- constant_pad_nd, complex, polar -----------------------------------------------------------------

@register("constant_pad_nd", family="shape", aten=["aten::constant_pad_nd.default"],
          meta=lambda a: get("pad").meta(a.input, a.pad), cost=lambda a: get("pad").cost(a.input, a.pad), bound=True)
def constant_pad_nd(input: Tensor, pad, value=0) -> Tensor:
    """``input`` padded with ``value`` by the (before, after) amounts in ``pad``, last dim first; negative
    amounts crop."""
    return _op("pad")(input, pad, "constant", value)


def _complex_meta(real, imag):
    if real.dtype is not imag.dtype:
        raise RuntimeError(f"Expected object of scalar type {real.dtype.name} but got scalar type {imag.dtype.name} "
                           "for second argument")
    if real.dtype.name not in ("float32", "float64"):
        raise RuntimeError(f"Expected both inputs to be Float or Double tensors but got {real.dtype.name} and "
                           f"{imag.dtype.name}")
    return TensorMeta(S.broadcast_shapes(tuple(real.shape), tuple(imag.shape)), real.dtype.to_complex())


def _copying_rules(meta, flops_per_element: int = 0, temporaries_count: int = 0) -> dict:
    """``register``'s rules, of bound arguments, of an op whose meta rule is ``meta`` and whose cost is
    ``_copy_cost``'s."""
    return {"meta": meta, "cost": _copy_cost(meta, flops_per_element, temporaries_count), "bound": True}


@register("complex", family="pointwise", aten=["aten::complex.default"],
          **_copying_rules(lambda a: _complex_meta(a.real, a.imag)))
def complex(real: Tensor, imag: Tensor) -> Tensor:
    """The complex tensor ``real + i * imag`` (float32 gives complex64, float64 complex128), broadcast."""
    meta = _complex_meta(real, imag)
    pairs = _op("stack")([real.expand(meta.shape), imag.expand(meta.shape)], -1)
    return _op("view_as_complex")(pairs)


@register("polar", family="pointwise", aten=["aten::polar.default"],
          **_copying_rules(lambda a: _complex_meta(a.abs, a.angle), 4, 2))
def polar(abs: Tensor, angle: Tensor) -> Tensor:
    """The complex tensor of modulus ``abs`` and argument ``angle``: ``abs * (cos(angle) + i sin(angle))``."""
    _complex_meta(abs, angle)
    with scratch_scope():
        real, imag = abs * angle.cos(), abs * angle.sin()
    return _op("complex")(real, imag)


# ---- index_reduce, put, unravel_index -----------------------------------------------------------------

_INDEX_REDUCTIONS = ("prod", "mean", "amax", "amin")


def _index_reduce_meta(input, dim, index, source, reduce):
    if reduce not in _INDEX_REDUCTIONS:
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")
    if len(index.shape) > 1:
        raise IndexError(f"index_reduce_(): Index is supposed to be a vector, got {len(index.shape)}-D")
    if index.dtype.name not in ("int64", "int32"):
        raise IndexError(f"index_reduce_(): Expected dtype int32/int64 for index but got {index.dtype.name}")
    if source.dtype is not input.dtype:
        raise RuntimeError(f"index_reduce_(): self ({input.dtype.name}) and source ({source.dtype.name}) must have "
                           "the same scalar type")
    d = S.wrap_dim(dim, max(len(input.shape), 1))
    self_shape, source_shape = tuple(input.shape) or (1,), tuple(source.shape) or (1,)
    if len(self_shape) != len(source_shape) or S.numel(index.shape) != source_shape[d] or any(
            a != b for i, (a, b) in enumerate(zip(self_shape, source_shape)) if i != d):
        raise RuntimeError(f"index_reduce_(): source {list(source.shape)} must match self {list(input.shape)} "
                           f"except along dim {d}, whose size must be the number of indices {S.numel(index.shape)}")
    return TensorMeta(tuple(input.shape), input.dtype)


def _index_reduce_cost(a):
    input, dim, index, source, reduce = a.input, a.dim, a.index, a.source, a.reduce
    meta = _index_reduce_meta(input, dim, index, source, reduce)
    spread = TensorMeta(tuple(source.shape), _I64)
    scatter = get("scatter_reduce_").cost(input, dim, spread, source, reduce)
    return Cost(flops=2 * S.numel(source.shape), bytes_read=nbytes(input) + nbytes(index) + nbytes(source),
                bytes_written=nbytes(meta), workspace=temporaries(2, source.shape, _I64) + scatter.workspace)


def _index_reduce_into(target: Tensor, dim, index, source, reduce, include_self) -> Tensor:
    _index_reduce_meta(target, dim, index, source, reduce)
    rows = target if target.ndim else target.reshape(1)
    source = source if source.ndim else source.reshape(1)
    d = S.wrap_dim(dim, rows.ndim)
    with scratch_scope():
        along = [1] * rows.ndim
        along[d] = -1
        spread = index.reshape(along).to("int64").expand(source.shape).contiguous()
    _op("scatter_reduce_")(rows, d, spread, source, reduce, include_self=include_self)
    return target


@register("index_reduce_", family="indexing", aten=["aten::index_reduce_.default"],
          meta=lambda a: _index_reduce_meta(a.input, a.dim, a.index, a.source, a.reduce), cost=_index_reduce_cost,
          bound=True, api=(), methods=("index_reduce_",), variants=(OUT_OF_PLACE,))
def index_reduce_(input: Tensor, dim: int, index: Tensor, source: Tensor, reduce: str, *,
                  include_self: bool = True) -> Tensor:
    """Each slice ``source[..., i, ...]`` along ``dim`` reduced (``prod``, ``mean``, ``amax``, ``amin``) into
    ``input``'s slice ``index[i]``, in place; ``include_self`` takes ``input``'s values into each reduction."""
    return _index_reduce_into(input, dim, index, source, reduce, include_self)


def _put_meta(input, index, source):
    if index.dtype is not _I64:
        raise IndexError(f"put_(): Expected a long tensor for index, but got {index.dtype.name}")
    if source.dtype is not input.dtype:
        raise RuntimeError(f"put_(): self and source expected to have the same dtype, but got "
                           f"self.dtype = {input.dtype.name} and source.dtype = {source.dtype.name}")
    if S.numel(index.shape) != S.numel(source.shape):
        raise RuntimeError(f"put_(): Expected source and index to have the same number of elements, but got "
                           f"source.numel() = {S.numel(source.shape)}, index.numel() = {S.numel(index.shape)}")
    if S.numel(input.shape) == 0 and S.numel(index.shape):
        raise IndexError("put_(): Tried to put elements into an empty tensor")
    return TensorMeta(tuple(input.shape), input.dtype)


def _put_cost(a):
    input, index, source = a.input, a.index, a.source
    meta = _put_meta(input, index, source)
    flat = TensorMeta((S.numel(input.shape),), input.dtype)
    scatter = get("index_put_").cost(flat, (TensorMeta((S.numel(index.shape),), _I64),), source, a.accumulate)
    # a non-contiguous input is written through a contiguous copy
    return Cost(flops=S.numel(index.shape), bytes_read=nbytes(input) + nbytes(index) + nbytes(source),
                bytes_written=nbytes(meta), workspace=temporaries(1, input.shape, input.dtype) + scatter.workspace)


def _put_into(target: Tensor, index: Tensor, source: Tensor, accumulate: bool) -> Tensor:
    _put_meta(target, index, source)
    with scratch_scope():
        work = target if target.is_contiguous() else target.contiguous()
        flat_index, flat_source = index.reshape(-1), source.reshape(-1)
    _op("index_put_")(work.reshape(-1), (flat_index,), flat_source, accumulate)
    return target if work is target else target.copy_(work)


_PUT_RULES = {"meta": lambda a: _put_meta(a.input, a.index, a.source), "cost": _put_cost, "bound": True}


@register("put_", family="indexing", aten=["aten::put_.default"], api=(), methods=("put_",), **_PUT_RULES)
def put_(input: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """``source``'s elements written (or added, ``accumulate``) at ``input``'s row-major positions ``index``
    (negative ones count from the end), in place; an index past either end raises ``IndexError``."""
    return _put_into(input, index, source, accumulate)


@register("put", family="indexing", aten=["aten::put.default"], methods=("put",), **_PUT_RULES)
def put(input: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """``put_`` on a copy of ``input``."""
    _put_meta(input, index, source)
    return _put_into(input.clone(), index, source, accumulate)


def _unravel_shape(indices, shape) -> tuple:
    if indices.dtype.is_floating_point or indices.dtype.is_complex or indices.dtype.name == "bool":
        raise TypeError(f"expected 'indices' to be integer dtype, but got {indices.dtype.name}")
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)) or not all(isinstance(n, numbers.Integral) for n in shape):
        raise TypeError(f"expected 'shape' to be int or sequence of ints, but got {shape!r}")
    if any(n < 0 for n in shape):
        raise ValueError(f"'shape' cannot have negative values, but got {tuple(shape)}")
    return tuple(int(n) for n in shape)


def _unravel_meta(indices, shape):
    return tuple(TensorMeta(tuple(indices.shape), _I64) for _ in _unravel_shape(indices, shape))


@register("unravel_index", family="indexing", aten=["nbx::unravel_index"],
          **_copying_rules(lambda a: _unravel_meta(a.indices, a.shape), 2, 1))
def unravel_index(indices: Tensor, shape) -> tuple:
    """The coordinates in a row-major tensor of ``shape`` of each flat index, one int64 tensor per dim, as
    torch's: each coordinate is the index floor-divided by the dim's stride, modulo the dim's size (so an
    index past the end wraps around rather than raising)."""
    shape = _unravel_shape(indices, shape)
    if 0 in shape and indices.numel():
        raise RuntimeError(f"unravel_index: no flat index addresses a tensor of shape {shape}, which has no elements")
    strides = [math.prod(shape[i + 1:]) for i in builtins.range(len(shape))]
    with scratch_scope():
        flat = indices.to("int64")
    return tuple(_op("remainder")(flat.div(stride, rounding_mode="floor"), size)
                 for stride, size in zip(strides, shape))


# ---- gradient ----------------------------------------------------------------------------------------

def _gradient_plan(input, spacing, dim, edge_order):
    """(dims, one spacing per dim: a number or a 1-D coordinates tensor), checked as ATen's."""
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    ndim = len(input.shape)
    dims = list(builtins.range(ndim)) if dim is None else [dim] if isinstance(dim, int) else list(dim)
    dims = [S.wrap_dim(d, ndim) for d in dims]
    if len(set(dims)) != len(dims):
        raise RuntimeError(f"torch.gradient: dim {tuple(dims)} appears more than once")
    if spacing is None:
        spacing = 1
    if isinstance(spacing, (numbers.Number, Tensor)) and not (isinstance(spacing, Tensor) and spacing.ndim):
        spacings = [spacing.item() if isinstance(spacing, Tensor) else spacing] * len(dims)
    else:
        spacings = list(spacing)
        if len(spacings) != len(dims):
            raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar or a list of length "
                               f"equal to the number of dims {len(dims)}, but got a list of length {len(spacings)}")
    for d, step in zip(dims, spacings):
        if input.shape[d] < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least edge_order+1")
        if isinstance(step, Tensor) and (step.ndim != 1 or step.shape[0] != input.shape[d]):
            raise RuntimeError(f"torch.gradient expected each coordinates tensor to be 1-D with as many values as "
                               f"dim {d} has ({input.shape[d]}), got shape {list(step.shape)}")
    return dims, spacings


def _gradient_meta(input, spacing, dim, edge_order):
    dims, spacings = _gradient_plan(input, spacing, dim, edge_order)
    dtype = _float_dtype(input.dtype, *[s.dtype for s in spacings if isinstance(s, Tensor)])
    return tuple(TensorMeta(tuple(input.shape), dtype) for _ in dims)


def _slice(x: Tensor, d: int, start: int, stop: int | None) -> Tensor:
    return x.narrow(d, start, (x.shape[d] if stop is None else stop) - start)


def _along(values: Tensor, d: int, ndim: int) -> Tensor:
    """A 1-D tensor of per-position values shaped to broadcast along dim ``d`` of an ``ndim``-D tensor."""
    shape = [1] * ndim
    shape[d] = -1
    return values.reshape(shape)


def _ends(x: Tensor, d: int) -> list:
    """The samples at 0, 1, 2 and n-3, n-2, n-1 along ``d`` (the dim kept); None for those a dim of 2 lacks."""
    n = x.shape[d]
    return [x.narrow(d, i, 1) if 0 <= i < n else None for i in (0, 1, 2, n - 3, n - 2, n - 1)]


def _uniform_derivative(x: Tensor, d: int, step, edge_order: int):
    """(first, interior, last) differences along ``d`` for samples ``step`` apart."""
    a0, a1, a2, z2, z1, z0 = _ends(x, d)
    interior = (_slice(x, d, 2, None) - _slice(x, d, 0, x.shape[d] - 2)) / step / 2
    if edge_order == 1:
        return (a1 - a0) / step, interior, (z0 - z1) / step
    return (a0 * -1.5 + a1 * 2 + a2 * -0.5) / step, interior, (z2 * 0.5 + z1 * -2 + z0 * 1.5) / step


def _coordinate_derivative(x: Tensor, d: int, coordinates: Tensor, edge_order: int):
    """(first, interior, last) second-order differences along ``d`` for samples at ``coordinates``."""
    a0, a1, a2, z2, z1, z0 = _ends(x, d)
    gaps = coordinates[1:] - coordinates[:-1]
    before, after = _along(gaps[:-1], d, x.ndim), _along(gaps[1:], d, x.ndim)
    interior = (-after / (before * (before + after)) * _slice(x, d, 0, x.shape[d] - 2)
                + (after - before) / (before * after) * _slice(x, d, 1, x.shape[d] - 1)
                + before / (after * (before + after)) * _slice(x, d, 2, None))
    if edge_order == 1:
        return (a1 - a0) / gaps[0], interior, (z0 - z1) / gaps[-1]
    h1, h2 = gaps[0], gaps[1]
    first = -(2 * h1 + h2) / (h1 * (h1 + h2)) * a0 + (h1 + h2) / (h1 * h2) * a1 - h1 / (h2 * (h1 + h2)) * a2
    h1, h2 = gaps[-2], gaps[-1]
    last = h2 / (h1 * (h1 + h2)) * z2 - (h2 + h1) / (h1 * h2) * z1 + (2 * h2 + h1) / (h2 * (h1 + h2)) * z0
    return first, interior, last


def _gradient_cost(a):
    input = a.input
    metas = _gradient_meta(input, a.spacing, a.dim, a.edge_order)
    # per dim: the differences, products and quotients of the three parts, at most a dozen input-sized
    return Cost(flops=12 * S.numel(input.shape) * len(metas), bytes_read=3 * nbytes(input),
                bytes_written=sum(nbytes(m) for m in metas),
                workspace=temporaries(12 * len(metas), input.shape, metas[0].dtype) if metas else 0)


@register("gradient", family="reduction", aten=["aten::gradient.scalarint", "aten::gradient.scalararray",
                                                "aten::gradient.array", "aten::gradient.scalarrayint",
                                                "aten::gradient.scalarrayarray", "aten::gradient.tensorarrayint",
                                                "aten::gradient.tensorarray"],
          meta=lambda a: _gradient_meta(a.input, a.spacing, a.dim, a.edge_order), cost=_gradient_cost, bound=True)
def gradient(input: Tensor, *, spacing=1, dim=None, edge_order: int = 1) -> tuple:
    """The derivative of ``input`` along each of ``dim`` (default: every dim) by central differences inside
    and one-sided ones of order ``edge_order`` at the ends; samples ``spacing`` apart (a number, one per dim)
    or at the given coordinates (one 1-D tensor per dim)."""
    metas = _gradient_meta(input, spacing, dim, edge_order)
    dims, spacings = _gradient_plan(input, spacing, dim, edge_order)
    results = []
    for d, step, meta in zip(dims, spacings, metas):
        with scratch_scope():
            if isinstance(step, Tensor):
                parts = _coordinate_derivative(input, d, step, edge_order)
            else:
                parts = _uniform_derivative(input, d, step, edge_order)
            parts = [p.to(meta.dtype) for p in parts]
        results.append(_op("cat")(parts, d))
    return tuple(results)


# ---- as_strided_scatter, sum_to_size -----------------------------------------------------------------

def _as_strided_scatter_meta(input, src, size):
    if tuple(src.shape) != tuple(size):
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = {list(src.shape)}, "
                           f"slice size = {list(size)}")
    return TensorMeta(tuple(input.shape), input.dtype)


@register("as_strided_scatter", family="copy", aten=["aten::as_strided_scatter.default"],
          methods=("as_strided_scatter",), **_copying_rules(lambda a: _as_strided_scatter_meta(a.input, a.src, a.size)))
def as_strided_scatter(input: Tensor, src: Tensor, size, stride, storage_offset=None) -> Tensor:
    """A copy of ``input`` (its layout kept where dense) with ``src`` written into its ``as_strided`` view."""
    _as_strided_scatter_meta(input, src, size)
    out = input.clone()
    out.as_strided(size, stride, storage_offset).copy_(src)
    return out


def _sum_to_size_dims(shape, size) -> list:
    size = S.normalize_shape(size)
    lead = len(shape) - len(size)
    if lead < 0 or any(n != 1 and n != shape[lead + i] for i, n in enumerate(size)):
        raise RuntimeError(f"size {{{', '.join(map(str, size))}}} is not expandable to size "
                           f"{{{', '.join(map(str, shape))}}}.")
    return list(builtins.range(lead)) + [lead + i for i, n in enumerate(size) if n == 1 and shape[lead + i] != 1]


def _sum_to_size_meta(input, *size):
    # an empty size sums everything, as ATen's sum_to, even a 0-d input (whose dtype the sum may change)
    if S.normalize_shape(size) and not _sum_to_size_dims(tuple(input.shape), size):
        return TensorMeta(tuple(input.shape), input.dtype)
    return TensorMeta(S.normalize_shape(size), get("sum").meta(input).dtype)


@register("sum_to_size", family="reduction", aten=["aten::sum_to_size.default"], api=(), methods=("sum_to_size",),
          **_copying_rules(lambda a: _sum_to_size_meta(a.input, *a.size), 1))
def sum_to_size(input: Tensor, *size) -> Tensor:
    """``input`` summed down to ``size``, a shape it broadcasts from: over its extra leading dims and over
    the dims where ``size`` has 1; ``input`` itself when there is nothing to sum."""
    meta = _sum_to_size_meta(input, *size)
    if not meta.shape:
        return _op("sum")(input)
    dims = _sum_to_size_dims(tuple(input.shape), size)
    return _op("sum")(input, dims, True).reshape(meta.shape) if dims else input


# ---- logspace, nonzero_static --------------------------------------------------------------------------

def _logspace_meta(steps, dtype):
    return TensorMeta((int(steps),), get_default_dtype() if dtype is None else get_dtype(dtype))


@register("logspace", family="creation", aten=["aten::logspace.default", "aten::logspace.Tensor_Tensor",
                                               "aten::logspace.Tensor_Scalar", "aten::logspace.Scalar_Tensor"],
          meta=lambda a: _logspace_meta(a.steps, a.dtype),
          cost=lambda a: Cost(bytes_written=nbytes(_logspace_meta(a.steps, a.dtype))), bound=True)
def logspace(start, end, steps: int, base: float = 10.0, *, dtype=None, device=None,
             requires_grad: bool = False) -> Tensor:
    """``steps`` powers of ``base`` whose exponents run evenly from ``start`` to ``end`` inclusive: the
    exponents in the result's precision (float64 for integer results, as ATen), the powers in float64, then
    rounded to the dtype once."""
    refuse_requires_grad(requires_grad, "logspace")
    meta = _logspace_meta(steps, dtype)
    if meta.dtype.is_complex or meta.dtype.name == "bool":
        raise TypeError(f"logspace does not produce {meta.dtype.name} tensors")
    start, end = (v.item() if isinstance(v, Tensor) else v for v in (start, end))
    exponent_dtype = "float64" if meta.dtype.is_integral or meta.dtype.name == "float64" else "float32"
    with scratch_scope():
        exponents = _op("linspace")(start, end, steps, dtype=exponent_dtype, device=device).to("float64")
        powers = _op("pow")(float(base), exponents)
    return powers.to(meta.dtype)


def _nonzero_static_meta(input, size):
    if size < 0:
        raise RuntimeError(f"nonzero_static: 'size' must be a non-negative integer, got {size}")
    return TensorMeta((int(size), len(input.shape)), _I64)


def _nonzero_static_cost(a):
    input, out = a.input, _nonzero_static_meta(a.input, a.size)
    return Cost(bytes_read=nbytes(input), bytes_written=nbytes(out),
                workspace=get("nonzero").cost(input).workspace
                + temporaries(1, (S.numel(input.shape), len(input.shape)), _I64) + temporaries(1, out.shape, _I64))


@register("nonzero_static", family="indexing", aten=["aten::nonzero_static.default"],
          meta=lambda a: _nonzero_static_meta(a.input, a.size), cost=_nonzero_static_cost, bound=True,
          methods=("nonzero_static",))
def nonzero_static(input: Tensor, *, size: int, fill_value: int = -1) -> Tensor:
    """``nonzero``'s coordinates in exactly ``size`` rows: the first ``size`` of them, or all of them
    followed by rows of ``fill_value``."""
    meta = _nonzero_static_meta(input, size)
    with scratch_scope():
        found = _op("nonzero")(input)
    if found.shape[0] >= meta.shape[0]:
        return found[:meta.shape[0]].contiguous()
    with scratch_scope():
        filler = _op("full")((meta.shape[0] - found.shape[0], meta.shape[1]), fill_value, dtype=_I64,
                             device=input.device)
    return _op("cat")([found, filler], 0)


# ---- histogramdd -------------------------------------------------------------------------------------

def _histogramdd_counts(input, bins) -> list:
    if len(input.shape) < 1:
        raise RuntimeError("torch.histogramdd(): input should have at least 1 dimension")
    columns = input.shape[-1]
    if isinstance(bins, int):
        bins = [bins] * columns
    bins = list(bins)
    if len(bins) != columns:
        raise RuntimeError(f"torch.histogramdd(): expected {columns} sequences of bin edges for each of the "
                           f"{columns} dimensions of the input, but got {len(bins)}")
    counts = []
    for d, b in enumerate(bins):
        if isinstance(b, numbers.Integral):
            if b <= 0:
                raise RuntimeError(f"torch.histogramdd(): bins must be > 0, but got {b} for dimension {d}")
            counts.append(int(b))
        else:
            if len(b.shape) != 1 or b.shape[0] < 1:
                raise RuntimeError(f"torch.histogramdd(): bins tensor should have one dimension and at least one "
                                   f"edge, but got shape {list(b.shape)} for dimension {d}")
            counts.append(b.shape[0] - 1)
    return counts


def _histogramdd_meta(input, bins, range, weight):
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"torch.histogramdd: input tensor should have a floating dtype, got {input.dtype.name}")
    counts = _histogramdd_counts(input, bins)
    if range is not None and len(range) != 2 * len(counts):
        raise RuntimeError(f"torch.histogramdd(): for a {len(counts)}-dimensional histogram range should have "
                           f"{2 * len(counts)} elements, but got {len(range)}")
    if weight is not None and tuple(weight.shape) != tuple(input.shape[:-1]):
        raise RuntimeError(f"torch.histogramdd(): if weight tensor is provided it should have the same shape as the "
                           f"input tensor excluding its innermost dimension, but got input with shape "
                           f"{list(input.shape)} and weight with shape {list(weight.shape)}")
    return (TensorMeta(tuple(counts), input.dtype),
            tuple(TensorMeta((n + 1,), input.dtype) for n in counts))


def _histogramdd_cost(a):
    input = a.input
    hist, edges = _histogramdd_meta(input, a.bins, a.range, a.weight)
    points, columns = S.numel(input.shape[:-1]), len(hist.shape)
    # per column: two copies of it, its bins and their flags; the flat bins, weights, totals and density
    return Cost(flops=10 * S.numel(input.shape), bytes_read=nbytes(input),
                bytes_written=nbytes(hist) + sum(nbytes(e) for e in edges),
                workspace=temporaries(8 * columns + 2, (points,), _I64)
                + temporaries(2 * columns + 1, (points,), input.dtype)
                + temporaries(2 * columns + 3, (S.numel(hist.shape) + 1,), input.dtype)
                + sum(temporaries(2, e.shape, input.dtype) for e in edges))


@register("histogramdd", family="sorting", aten=["aten::histogramdd.default", "aten::histogramdd.int_bins",
                                                  "aten::histogramdd.TensorList_bins"],
          meta=lambda a: _histogramdd_meta(a.input, a.bins, a.range, a.weight), cost=_histogramdd_cost, bound=True)
def histogramdd(input: Tensor, bins=10, range=None, weight=None, density: bool = False):
    """The multi-dimensional histogram of the points in ``input``'s rows (its last dim the coordinates):
    per coordinate ``bins`` equal bins over ``range`` (its min and max, two numbers per coordinate;
    default each column's extent) or the given edges, bins as ``histogram``'s; counts or summed ``weight``,
    ``density`` dividing by the total and each bin's volume."""
    hist_meta, _ = _histogramdd_meta(input, bins, range, weight)
    counts = hist_meta.shape
    points = input.reshape(-1, input.shape[-1]) if input.ndim else input.reshape(1, 1)
    edges = []
    for d, count in enumerate(counts):
        given = bins if isinstance(bins, int) else bins[d]
        if isinstance(given, Tensor):
            edges.append(given.to(input.dtype).contiguous())
        else:
            with scratch_scope():
                column = points[:, d].contiguous()
            edges.append(equal_bin_edges(column, count, None if range is None else range[2 * d:2 * d + 2],
                                         "histogramdd"))
    total_bins = S.numel(counts)
    strides = S.contiguous_strides(counts)
    with scratch_scope():
        flat = None
        outside = None
        for d, count in enumerate(counts):
            bin_of = bin_positions(points[:, d].contiguous(), edges[d])
            miss = bin_of == count
            outside = miss if outside is None else outside | miss
            flat = bin_of * strides[d] if flat is None else flat + bin_of * strides[d]
        flat = _op("where")(outside, total_bins, flat)
        amounts = (_op("ones")((points.shape[0],), dtype=input.dtype, device=input.device) if weight is None
                   else weight.reshape(-1).to(input.dtype))
        totals = _op("zeros")((total_bins + 1,), dtype=input.dtype, device=input.device).index_add_(0, flat, amounts)
        hist = totals[:total_bins].reshape(counts)
        if density:
            hist = hist / hist.sum()
            for d in builtins.range(len(counts)):
                hist = hist / _along(edges[d][1:] - edges[d][:-1], d, len(counts))
    return histogramdd_result(hist.clone(), tuple(edges))


# ---- resize_, resize_as_, the strided and permuted empty factories ------------------------------------

def _resize_meta(input, *size):
    shape = S.normalize_shape(size)
    if any(n < 0 for n in shape):
        raise RuntimeError(f"Trying to create tensor with negative dimension: {list(shape)}")
    return TensorMeta(shape, input.dtype)


def _resize_into(x: Tensor, shape: tuple, memory_format) -> Tensor:
    strides = S.contiguous_strides(shape)
    if memory_format is not None:
        strides = format_strides("resize_", memory_format, shape, strides) or strides
    needed = S.max_offset(shape, strides) + 1 if S.numel(shape) else 0
    available = x._storage.nbytes // x.dtype.itemsize - x.storage_offset() if x._storage is not None else 0
    if needed > available:
        grown = new_tensor((needed,), x.dtype, x.device)
        kept = min(available, needed)
        if kept:
            grown[:kept].copy_(x.as_strided((kept,), (1,), x.storage_offset()))
        x._storage, x._offset = grown._storage, 0
    return become(x, x.as_strided(shape, strides))


@register("resize_", family="view", aten=["aten::resize_.default"], meta=lambda a: _resize_meta(a.input, *a.size),
          cost=lambda a: Cost(bytes_written=nbytes(_resize_meta(a.input, *a.size))), bound=True, aliases=VIEW, api=(),
          methods=("resize_",))
def resize_(input: Tensor, *size, memory_format=None) -> Tensor:
    """``input`` itself, given ``size`` as a row-major layout from its storage offset: its storage kept where
    it is large enough, otherwise replaced by a larger one that begins with the old elements (the rest
    uninitialised), as torch's."""
    meta = _resize_meta(input, *size)
    return _resize_into(input, meta.shape, memory_format)


@register("resize_as_", family="view", aten=["aten::resize_as_.default"], aliases=VIEW,
          meta=lambda a: TensorMeta(tuple(a.other.shape), a.input.dtype),
          cost=lambda a: Cost(bytes_written=S.numel(a.other.shape) * a.input.dtype.itemsize), bound=True,
          methods=("resize_as_",))
def resize_as_(input: Tensor, other: Tensor, *, memory_format=None) -> Tensor:
    """``input.resize_(other.shape)``."""
    return _resize_into(input, tuple(other.shape), memory_format)


def _check_strides(size, stride) -> tuple:
    size, stride = S.normalize_shape((size,)), tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise RuntimeError(f"mismatch in length of strides and shape: {len(size)} sizes and {len(stride)} strides")
    if any(n < 0 for n in size) or any(s < 0 for s in stride):
        raise RuntimeError(f"empty_strided: sizes {list(size)} and strides {list(stride)} must be non-negative")
    return size, stride


def _empty_strided_meta(size, stride, dtype):
    size, _ = _check_strides(size, stride)
    return TensorMeta(size, get_default_dtype() if dtype is None else get_dtype(dtype))


@register("empty_strided", family="creation", aten=["aten::empty_strided.default"],
          meta=lambda a: _empty_strided_meta(a.size, a.stride, a.dtype), cost=lambda a: Cost(), bound=True)
def empty_strided(size, stride, *, dtype=None, device=None, requires_grad: bool = False, pin_memory: bool = False,
                  layout=None) -> Tensor:
    """An uninitialised tensor of ``size`` laid out with ``stride`` over storage just large enough."""
    refuse_requires_grad(requires_grad, "empty_strided")
    meta = _empty_strided_meta(size, stride, dtype)
    return new_tensor(meta.shape, meta.dtype, resolve(device), _check_strides(size, stride)[1], pinned=pin_memory)


@register("new_empty_strided", family="creation", aten=["aten::new_empty_strided.default"],
          meta=lambda a: _empty_strided_meta(a.size, a.stride, a.input.dtype if a.dtype is None else a.dtype),
          cost=lambda a: Cost(), bound=True, api=(), methods=("new_empty_strided",))
def new_empty_strided(input: Tensor, size, stride, *, dtype=None, device=None, requires_grad: bool = False,
                      pin_memory: bool = False, layout=None) -> Tensor:
    """``empty_strided`` with ``input``'s dtype and device unless told otherwise."""
    return empty_strided(size, stride, dtype=input.dtype if dtype is None else dtype,
                         device=input.device if device is None else device, requires_grad=requires_grad,
                         pin_memory=pin_memory)


def _permuted_strides(size, physical_layout) -> tuple:
    size, layout = S.normalize_shape((size,)), [int(d) for d in physical_layout]
    if sorted(layout) != list(builtins.range(len(size))):
        raise RuntimeError(f"empty_permuted: physical_layout {layout} must be a permutation of the {len(size)} dims")
    physical = S.contiguous_strides([size[d] for d in layout])
    strides = [0] * len(size)
    for position, d in enumerate(layout):
        strides[d] = physical[position]
    return size, tuple(strides)


def _empty_permuted_meta(size, physical_layout, dtype):
    size, _ = _permuted_strides(size, physical_layout)
    return TensorMeta(size, get_default_dtype() if dtype is None else get_dtype(dtype))


@register("empty_permuted", family="creation", aten=["aten::empty_permuted.default"],
          meta=lambda a: _empty_permuted_meta(a.size, a.physical_layout, a.dtype), cost=lambda a: Cost(), bound=True)
def empty_permuted(size, physical_layout, *, dtype=None, device=None, requires_grad: bool = False,
                   pin_memory: bool = False, layout=None) -> Tensor:
    """An uninitialised tensor of ``size`` whose dims lie in memory in the order ``physical_layout`` lists
    them (outermost first), densely."""
    refuse_requires_grad(requires_grad, "empty_permuted")
    meta = _empty_permuted_meta(size, physical_layout, dtype)
    return new_tensor(meta.shape, meta.dtype, resolve(device), _permuted_strides(size, physical_layout)[1],
                      pinned=pin_memory)


# ---- samples ---------------------------------------------------------------------------------------

def _index_reduce_reference(x, dim, index, source, reduce, include_self=True):
    result = np.moveaxis(x.copy(), dim, 0)
    source = np.moveaxis(source, dim, 0)
    combine = {"prod": np.multiply, "amax": np.maximum, "amin": np.minimum, "mean": np.add}[reduce]
    for row in np.unique(index):
        chosen = source[index == row]
        gathered = combine.reduce(chosen, axis=0)
        if reduce == "mean":
            count = len(chosen) + include_self
            result[row] = (gathered + (result[row] if include_self else 0)) / count
        else:
            result[row] = combine(result[row], gathered) if include_self else gathered
    return np.moveaxis(result, 0, dim)


def _put_reference(x, index, source, accumulate=False):
    result = x.copy().reshape(-1)
    if accumulate:
        np.add.at(result, index.reshape(-1), source.reshape(-1))
    else:
        result[index.reshape(-1)] = source.reshape(-1)
    return result.reshape(x.shape)


def _gradient_reference(x, spacing=1, dim=None, edge_order=1):
    axes = range(x.ndim) if dim is None else ([dim] if isinstance(dim, int) else dim)
    return tuple(np.gradient(x, spacing, axis=axis, edge_order=edge_order) for axis in axes)


def _sum_to_size_reference(x, *size):
    size = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
    leading = x.ndim - len(size)
    summed = np.sum(x, axis=tuple(range(leading))) if leading else x
    dims = tuple(d for d, n in enumerate(size) if n == 1 and summed.shape[d] != 1)
    return np.sum(summed, axis=dims, keepdims=True) if dims else summed


_MATRIX, _TRANSPOSED = operand(2, 3), operand(3, 2, layout="transposed")
_INDEX = dict(dtype="int64", values="index")
_EMPTY = dict(compare="metadata")  # uninitialised memory: shapes and dtypes only
_SAMPLES = {
    "addbmm": Samples((sample(operand(2, 2), operand(3, 2, 4), operand(3, 4, 2)),
                       sample(operand(2), operand(1, 2, 3), operand(1, 3, 2, layout="transposed"), beta=0.5, alpha=2),
                       sample(operand(2, 2), operand(0, 2, 3), operand(0, 3, 2))),
                      lambda x, a, b, beta=1, alpha=1: beta * x + alpha * np.einsum("bij,bjk->ik", a, b)),
    "cov": Samples((sample(operand(2, 4)), sample(operand(3), correction=0), sample(_TRANSPOSED),
                    sample(operand(2, 4), fweights=operand(4, **_INDEX, domain=(1, 3)), aweights=operand(4, values="positive"))),
                   lambda x, correction=1, fweights=None, aweights=None: np.cov(x, ddof=correction, fweights=fweights,
                                                                                aweights=aweights)),
    "corrcoef": Samples((sample(operand(2, 4)), sample(operand(3)), sample(_TRANSPOSED)), np.corrcoef),
    "constant_pad_nd": Samples((sample(_MATRIX, (1, 2)), sample(_TRANSPOSED, (1, 0, 0, 2), 1.5), sample(_MATRIX, (-1, 1)),
                                sample(operand(0, 3), (1, 1))),
                               lambda x, pad, value=0: samples_of(get("pad")).reference(x, pad, value=value)),
    "complex": Samples((sample(_MATRIX, operand(3)), sample(_TRANSPOSED, operand(3, 2, dtype="float32")),
                        sample(operand(), operand()), sample(operand(0, 3, dtype="float64"), operand(3, dtype="float64"))),
                       lambda real, imag: real + 1j * imag),
    "polar": Samples((sample(operand(2, 3, values="positive"), operand(3)), sample(_TRANSPOSED, operand(3, 2)),
                      sample(operand(0, 3, dtype="float64"), operand(3, dtype="float64"))),
                     lambda r, angle: r * np.cos(angle) + 1j * r * np.sin(angle)),
    "index_reduce": Samples((sample(operand(3, 2), 0, operand(4, **_INDEX, domain=(0, 3)), operand(4, 2), "prod"),
                             sample(_MATRIX, 1, operand(2, **_INDEX, domain=(0, 3)), operand(2, 2), "amax", include_self=False),
                             sample(_MATRIX, 0, operand(3, **_INDEX, domain=(0, 2)), operand(3, 3), "mean"),
                             sample(operand(4, dtype="int64"), 0, operand(2, **_INDEX, domain=(0, 4)),
                                    operand(2, dtype="int64"), "amin")), _index_reduce_reference),
    "put": Samples((sample(_MATRIX, operand(2, **_INDEX, domain=(0, 6)), operand(2)),
                    sample(_TRANSPOSED, operand(4, **_INDEX, domain=(0, 6)), operand(2, 2), True),
                    sample(operand(0, 3), operand(0, **_INDEX, domain=(0, 1)), operand(0))), _put_reference),
    "unravel_index": Samples((sample(operand(4, **_INDEX, domain=(0, 6)), (2, 3)), sample(operand(**_INDEX, domain=(0, 24)), (2, 3, 4)),
                              sample(operand(0, **_INDEX, domain=(0, 1)), (2,))),
                             lambda indices, shape: tuple(np.unravel_index(indices, shape))),
    "gradient": Samples((sample(operand(5)), sample(operand(3, 4), spacing=2.0), sample(operand(4, 3, layout="transposed"), dim=1),
                         sample(operand(5, dtype="float64"), edge_order=2)), _gradient_reference),
    "as_strided_scatter": Samples((sample(_MATRIX, operand(2, 2), (2, 2), (1, 2)), sample(operand(6), operand(3), (3,), (2,), 1),
                                   sample(_MATRIX, operand(0, 2), (0, 2), (1, 1)))),
    "sum_to_size": Samples((sample(_MATRIX, 1, 3), sample(_MATRIX, (3,)), sample(operand(2, 3, 2), 3, 1),
                            sample(operand(0, 3), (1, 3))), _sum_to_size_reference),
    "logspace": Samples((sample(0.0, 2.0, 5), sample(-1, 1, 3, 2.0), sample(1.0, 1.0, 1), sample(0, 3, 0)),
                        lambda start, end, steps, base=10.0, **ignored: np.logspace(start, end, steps, base=base)),
    "nonzero_static": Samples((sample(operand(2, 3, **_INDEX, domain=(0, 2)), size=4),
                               sample(operand(4, dtype="bool"), size=6, fill_value=-2), sample(operand(0, 3), size=2)),
                              lambda x, *, size, fill_value=-1: np.concatenate(
                                  [np.argwhere(x), np.full((size, np.ndim(x)), fill_value)])[:size]),
    "histogramdd": Samples((sample(operand(6, 2), 3), sample(operand(5, 2), [2, 3], range=[-3.0, 3.0, -3.0, 3.0]),
                            sample(operand(4, 1), 2, weight=operand(4, values="positive"), density=True))),
    "resize_": Samples((sample(_MATRIX, 3, 2), sample(_MATRIX, 2, 2), sample(operand(0, 3), 4, **_EMPTY),
                        sample(_MATRIX, (4, 3), **_EMPTY))),
    "resize_as_": Samples((sample(_MATRIX, operand(3, 2)), sample(_MATRIX, operand(2, 2)),
                           sample(_MATRIX, operand(3, 3), **_EMPTY))),
    "empty_strided": Samples((sample((2, 3), (3, 1), **_EMPTY), sample((2, 3), (1, 2), dtype=get_dtype("int64"), **_EMPTY),
                              sample((0, 3), (3, 1), **_EMPTY))),
    "new_empty_strided": Samples((sample(_MATRIX, (2, 3), (3, 1), **_EMPTY), sample(_MATRIX, (2,), (2,), **_EMPTY))),
    "empty_permuted": Samples((sample((2, 3), (1, 0), **_EMPTY), sample((2, 3, 4), (0, 2, 1), **_EMPTY),
                               sample((0, 3), (0, 1), **_EMPTY))),
}
_SAMPLES["index_reduce_"] = _SAMPLES["index_reduce"]
_SAMPLES["put_"] = _SAMPLES["put"]
for _family in ("matmul", "reduction", "shape", "pointwise", "indexing", "copy", "creation", "sorting", "view"):
    family_samples(_family, by_name(_SAMPLES))
