"""Dim-wise gathers and scatters: ``gather``, ``take_along_dim``, ``take``, the ``scatter`` family
(``scatter_add_``, ``scatter_reduce_``: each element's updates applied in index order, so the result is
deterministic), and the ops along one dim that read or write through an advanced-index plan
(``index_select``, ``embedding``, ``index_add_``, ``index_copy_``, ``index_fill_``)."""
from __future__ import annotations

import math

import numpy as np
import triton.language as tl

from .. import shape as S
from ..allocation import new_tensor
from ..device.errors import after_checked_launch, error_code
from ..dtypes import get_dtype
from ..kernels import indexing as K
from ..launch import cdiv, launch
from ..lowering import BITS_TYPE, elementwise_block, encode_scalar, needs_index_64
from ..tensor import Tensor
from .advanced_indexing import IndexPlan, gather_through, put_through
from .copy import clone, copy_, fill_, has_internal_overlap, shares_memory
from .creation import full
from .index_common import (check_index_dtype, index_status, on_device, out_of_range_message, read_modify_write_flags,
                           real_pairs)
from .registry import OUT_OF_PLACE, Cost, TensorMeta, family_samples, nbytes, register
from .samples import Samples, by_name, index_operand, operand, sample
from .views import expand, reshape

_I32 = get_dtype("int32")


# ---- one dim through an index plan ------------------------------------------------------------

def _dim_plan(x: Tensor, dim: int, index: Tensor, op: str, wrap: bool = False) -> IndexPlan:
    """The plan for ``x.index_select(dim, index)``: a 1-D (or 0-d) index on one dim."""
    check_index_dtype(index, op)
    if index.ndim > 1:
        raise IndexError(f"{op}: index must be a vector (at most 1 dimension), got {index.ndim} dimensions")
    d = S.wrap_dim(dim, max(x.ndim, 1))
    view = x if x.ndim else x._view((1,), (1,))
    vector = on_device(index, x.device)._view((index.numel(),), (index.stride(0) if index.ndim else 1,))
    return IndexPlan(view, [d], [vector], wrap)


def _gathering_rules(meta) -> dict:
    """``register``'s rules, of bound arguments, of an op reading as many elements as it writes, its
    result ``meta``'s."""
    def cost(a):
        out = meta(a)
        return Cost(bytes_read=nbytes(out), bytes_written=nbytes(out))
    return {"meta": meta, "cost": cost, "bound": True}


def _select_meta(x, dim, index):
    if not len(x.shape):
        S.wrap_dim(dim, 1)
        if S.numel(index.shape) != 1:
            raise IndexError(f"index_select: an index into a 0-d tensor must hold exactly 1 value, got "
                             f"{S.numel(index.shape)}")
        return TensorMeta((), x.dtype)
    shape = list(x.shape)
    shape[S.wrap_dim(dim, len(shape))] = S.numel(index.shape)
    return TensorMeta(tuple(shape), x.dtype)


@register("index_select", family="indexing", aten=["aten::index_select.default"], methods=("index_select",),
          **_gathering_rules(lambda a: _select_meta(a.x, a.dim, a.index)))
def index_select(x: Tensor, dim: int, index: Tensor) -> Tensor:
    """The entries of ``x`` at positions ``index`` (a vector) along ``dim``; of a 0-d ``x``, its one
    element (the index holding the one value 0), 0-d as torch gives it."""
    shape = _select_meta(x, dim, index).shape
    out = gather_through(_dim_plan(x, dim, index, "index_select"), "index_select")
    return out if x.ndim else out._view(shape, ())


def _embedding_meta(weight, indices):
    return TensorMeta((*indices.shape, *weight.shape[1:]), weight.dtype)


def embedding_functional(input: Tensor, weight: Tensor, padding_idx=None, max_norm=None, norm_type=2.0,
                         scale_grad_by_freq=False, sparse=False) -> Tensor:
    """``torch.nn.functional.embedding``'s argument order; ``max_norm`` (which rewrites the table)
    is refused."""
    if max_norm is not None:
        raise NotImplementedError("embedding with max_norm renormalises the weight in place; nbxtensor does not "
                                  "support it: renormalise the table once before inference")
    return embedding.impl(weight, input, -1 if padding_idx is None else padding_idx)


@register("embedding", family="indexing", aten=["aten::embedding.default"],
          meta=lambda a: _embedding_meta(a.weight, a.indices), functional=True, functional_form=embedding_functional,
          cost=lambda a: Cost(bytes_read=nbytes(_embedding_meta(a.weight, a.indices)) + nbytes(a.indices),
                              bytes_written=nbytes(_embedding_meta(a.weight, a.indices))), bound=True)
def embedding(weight: Tensor, indices: Tensor, padding_idx: int = -1, scale_grad_by_freq: bool = False,
              sparse: bool = False) -> Tensor:
    """Rows of ``weight`` (num_embeddings, ...) looked up by ``indices`` of any shape (ATen's
    argument order, as ``torch.embedding``). ``padding_idx`` only shapes gradients, so inference
    reads its row like any other; it is still checked to lie in range."""
    check_index_dtype(indices, "embedding")
    if weight.ndim != 2:
        raise RuntimeError(f"embedding: weight must be 2-D (num_embeddings, embedding_dim), got {weight.ndim}-D")
    if padding_idx is not None and not -weight.shape[0] <= padding_idx < max(weight.shape[0], 1):
        raise ValueError(f"embedding: padding_idx {padding_idx} must be within num_embeddings {weight.shape[0]}")
    return gather_through(IndexPlan(weight, [0], [on_device(indices, weight.device)], wrap=False), "embedding")


# ---- gather and scatter along a dim ------------------------------------------------------------

def _check_dim_shapes(x: Tensor, dim: int, index: Tensor, op: str, src: Tensor | None = None) -> int:
    if index.numel():
        # as torch: an empty index addresses nothing, so its dtype is not checked
        check_index_dtype(index, op)
    if index.ndim != x.ndim and not (index.ndim <= 1 and x.ndim <= 1):
        raise RuntimeError(f"{op}: index tensor must have the same number of dimensions as the input tensor "
                           f"({x.ndim}), got {index.ndim}")
    d = S.wrap_dim(dim, max(x.ndim, 1))
    for k in range(index.ndim):
        if k != d and x.ndim and index.shape[k] > x.shape[k]:
            raise RuntimeError(f"{op}: size of index {list(index.shape)} exceeds the input {list(x.shape)} "
                               f"at dimension {k}, which is not the indexed dimension {d}")
        if src is not None and src.ndim and index.shape[k] > src.shape[k]:
            raise RuntimeError(f"{op}: size of index {list(index.shape)} exceeds the source {list(src.shape)} "
                               f"at dimension {k}")
    return d


def _as_nd(t: Tensor, ndim: int) -> Tensor:
    """0-d tensors as 1-D, so dim-wise kernels always have a dim to index."""
    return t._view((1,), (1,)) if t.ndim == 0 and ndim == 1 else t


@register("gather", family="indexing", aten=["aten::gather.default"], methods=("gather",),
          **_gathering_rules(lambda a: TensorMeta(tuple(a.index.shape), a.x.dtype)))
def gather(x: Tensor, dim: int, index: Tensor, *, sparse_grad: bool = False) -> Tensor:
    """``out[c] = x[c with c[dim] replaced by index[c]]``, over the index's shape."""
    return gather_dim(x, dim, index, "gather", wrap=False)


def gather_dim(x: Tensor, dim: int, index: Tensor, op: str, wrap: bool) -> Tensor:
    d = _check_dim_shapes(x, dim, index, op)
    index = on_device(index, x.device)
    out = new_tensor(index.shape, x.dtype, x.device)
    if out.numel() == 0:
        return out
    x1, index1, out1 = _as_nd(x, 1), _as_nd(index, 1), _as_nd(out, 1)
    if x.dtype.is_complex:
        x1, out1 = real_pairs(x1), real_pairs(out1)
        index1 = index1._view((*index1.shape, 2), (*index1.stride(), 0))
    shape = tuple(index1.shape)
    n = math.prod(shape)
    dev = x.device
    block = elementwise_block(dev)
    launch(K.dim_gather, (cdiv(n, block),), dev,
           [out1, x1, index1, n, shape, out1.stride(), x1.stride(), index1.stride(), x1.shape[d], index_status(dev)],
           RANK=len(shape), DIM=d, CODE=error_code(op), WRAP=wrap,
           INDEX_64=needs_index_64(x1, (shape, index1.stride()), count=n), BLOCK=block)
    after_checked_launch(dev, lambda: out_of_range_message(op, index1, x1.shape[d], d, wrap))
    return out


@register("take_along_dim", family="indexing", aten=["aten::take_along_dim.default"],
          meta=lambda a: TensorMeta(tuple(a.indices.shape) if a.dim is None else
                                    tuple(_along_shapes(a.x.shape, a.indices.shape, a.dim)[1]), a.x.dtype),
          cost=lambda a: Cost(bytes_read=nbytes(a.indices), bytes_written=nbytes(a.indices)), bound=True,
          methods=("take_along_dim",))
def take_along_dim(x: Tensor, indices: Tensor, dim: int | None = None) -> Tensor:
    """``gather`` with the input and the indices broadcast against each other outside ``dim``, negative
    indices counting from the end of ``dim``; with no ``dim``, both are flattened (and, as torch, negative
    indices are out of range)."""
    if dim is None:
        return gather.impl(reshape(x, (-1,)), 0, reshape(indices, (-1,)))
    if x.ndim != indices.ndim:
        raise RuntimeError(f"take_along_dim: input and indices should have the same number of dimensions, got "
                           f"{x.ndim} and {indices.ndim}")
    d = S.wrap_dim(dim, x.ndim)
    x_shape, index_shape = _along_shapes(x.shape, indices.shape, d)
    return gather_dim(expand(x, x_shape), d, expand(indices, index_shape), "take_along_dim", wrap=True)


def _along_shapes(x_shape, index_shape, d):
    d = S.wrap_dim(d, len(x_shape))
    outer = S.broadcast_shapes(tuple(1 if k == d else n for k, n in enumerate(x_shape)),
                               tuple(1 if k == d else n for k, n in enumerate(index_shape)))
    x_target = tuple(x_shape[k] if k == d else outer[k] for k in range(len(x_shape)))
    index_target = tuple(index_shape[k] if k == d else outer[k] for k in range(len(x_shape)))
    return x_target, index_target


@register("take", family="indexing", aten=["aten::take.default"], methods=("take",),
          **_gathering_rules(lambda a: TensorMeta(tuple(a.index.shape), a.x.dtype)))
def take(x: Tensor, index: Tensor) -> Tensor:
    """Elements of ``x`` read as a flat row-major vector, at ``index`` (any shape)."""
    check_index_dtype(index, "take")
    flat = reshape(x, (-1,))
    out = gather_dim(flat, 0, reshape(index, (-1,)), "take", wrap=True)
    return reshape(out, tuple(index.shape))


# the rules, of bound arguments, of an op writing into ``x`` in place at ``index``
_SCATTER_RULES = {"meta": lambda a: TensorMeta(tuple(a.x.shape), a.x.dtype),
                  "cost": lambda a: Cost(bytes_read=nbytes(a.x) + nbytes(a.index), bytes_written=nbytes(a.x)),
                  "bound": True}


def scatter_into(out: Tensor, dim: int, index: Tensor, src, op: str) -> Tensor:
    """``out[... index ...] = src`` (a tensor or a scalar) along ``dim``, in place."""
    src_t = src if isinstance(src, Tensor) else None
    d = _check_dim_shapes(out, dim, index, op, src_t)
    if index.numel() == 0:
        return out
    if has_internal_overlap(out):
        raise RuntimeError(f"{op}: unsupported operation: more than one element of the written-to tensor refers "
                           "to a single memory location; clone() the tensor before writing to it")
    index = on_device(index, out.device)
    dev = out.device
    dst1, index1 = _as_nd(out, 1), _as_nd(index, 1)
    if src_t is not None:
        src_t = on_device(src_t, dev)
        if src_t.dtype is not out.dtype or shares_memory(src_t, out):
            src_t = src_t.to(out.dtype, copy=True)
        src1 = _as_nd(src_t, 1)
        bits = 0
    elif out.dtype.is_complex:
        return scatter_into(out, dim, index, full(index.shape, complex(src), dtype=out.dtype, device=dev), op)
    else:
        src1 = dst1
        bits = encode_scalar(src, out.dtype)
    if out.dtype.is_complex:
        dst1, src1 = real_pairs(dst1), real_pairs(src1)
        index1 = index1._view((*index1.shape, 2), (*index1.stride(), 0))
    shape = tuple(index1.shape)
    n = math.prod(shape)
    block = elementwise_block(dev)
    launch(K.dim_scatter, (cdiv(n, block),), dev,
           [dst1, src1, index1, bits, n, shape, dst1.stride(), src1.stride(), index1.stride(), dst1.shape[d],
            index_status(dev)],
           RANK=len(shape), DIM=d, CONSTANT=src_t is None,
           CONSTANT_BITS_TYPE=getattr(tl, BITS_TYPE[out.dtype.to_real().itemsize]), CODE=error_code(op), WRAP=False,
           INDEX_64=needs_index_64(dst1, src1, (shape, index1.stride()), count=n), BLOCK=block)
    after_checked_launch(dev, lambda: out_of_range_message(op, index1, dst1.shape[d], d, False))
    return out


_REDUCE_CODES = {"sum": K.REDUCE_SUM.value, "add": K.REDUCE_SUM.value, "prod": K.REDUCE_PROD.value,
                 "multiply": K.REDUCE_PROD.value, "amax": K.REDUCE_MAX.value, "amin": K.REDUCE_MIN.value,
                 "mean": K.REDUCE_SUM.value}


def _identity(reduce: str, dt):
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dt.is_floating_point:
        return -math.inf if reduce == "amax" else math.inf
    if dt.kind == "bool":
        return reduce == "amin"
    info = np.iinfo(dt.numpy)
    return int(info.min) if reduce == "amax" else int(info.max)


def _scatter_reduce_into(out: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, include_self: bool,
                         op: str) -> Tensor:
    """``out`` combined with ``src`` at ``index`` along ``dim``, in place; each element's updates are
    applied in index order, so the result is deterministic."""
    if reduce not in _REDUCE_CODES:
        raise RuntimeError(f"{op}: reduce argument must be one of sum, prod, mean, amax, amin, got {reduce!r}")
    if not isinstance(src, Tensor):
        raise TypeError(f"{op}: src must be a tensor")
    d = _check_dim_shapes(out, dim, index, op, src)
    if index.numel() == 0:
        return out
    if out.dtype.is_complex and reduce not in ("sum", "add"):
        raise RuntimeError(f"{op}: reduce={reduce!r} is not defined for complex tensors")
    if has_internal_overlap(out):
        raise RuntimeError(f"{op}: unsupported operation: more than one element of the written-to tensor refers "
                           "to a single memory location; clone() the tensor before writing to it")
    dev = out.device
    if reduce == "mean" and not out.is_contiguous():
        work = clone(out, memory_format="contiguous_format")
        _scatter_reduce_into(work, dim, index, src, reduce, include_self, op)
        return copy_(out, work)
    index = on_device(index, dev)
    src = on_device(src, dev)
    if src.dtype is not out.dtype or shares_memory(src, out):
        src = src.to(out.dtype, copy=True)
    if not include_self:
        scatter_into(out, dim, index, _identity(reduce, out.dtype), op)
    dst1, index1, src1 = _as_nd(out, 1), _as_nd(index, 1), _as_nd(src, 1)
    if out.dtype.is_complex:
        dst1, src1 = real_pairs(dst1), real_pairs(src1)
        index1 = index1._view((*index1.shape, 2), (*index1.stride(), 0))
    shape = list(index1.shape)
    dim_n = shape[d]
    shape[d] = 1
    shape = tuple(shape)
    n = math.prod(shape)
    counts = None
    if reduce == "mean":
        counts = fill_(new_tensor(out.shape, _I32, dev), 0)
    block = elementwise_block(dev)
    flags = read_modify_write_flags(out.dtype.to_real())
    launch(K.dim_scatter_reduce, (cdiv(n, block),), dev,
           [dst1, src1, index1, dst1 if counts is None else counts, n, dim_n, shape, dst1.stride(), src1.stride(),
            index1.stride(), dst1.shape[d], index_status(dev)],
           RANK=len(shape), DIM=d, REDUCE=_REDUCE_CODES[reduce], COUNT=counts is not None, CODE=error_code(op),
           WRAP=False, INDEX_64=needs_index_64(dst1, src1, index1), BLOCK=block, **flags)
    after_checked_launch(dev, lambda: out_of_range_message(op, index1, dst1.shape[d], d, False))
    if counts is not None:
        total = out.numel()
        launch(K.divide_by_counts, (cdiv(total, block),), dev,
               [out, counts, total, 1 if include_self else 0],
               FLOOR=not out.dtype.is_floating_point, INDEX_64=needs_index_64(count=total), BLOCK=block, **flags)
    return out


@register("scatter_", family="indexing", aten=["aten::scatter_.src", "aten::scatter_.value",
                                               "aten::scatter_.reduce", "aten::scatter_.value_reduce"],
          api=(), methods=("scatter_",), variants=(OUT_OF_PLACE,), **_SCATTER_RULES)
def scatter_(x: Tensor, dim: int, index: Tensor, src=None, *, value=None, reduce: str | None = None) -> Tensor:
    """``x[... index[c] ...] = src[c]`` along ``dim`` (``src`` a tensor or a scalar ``value``); with
    ``reduce`` ('add' or 'multiply'), combined instead of replaced."""
    if src is None:
        src = value
    if src is None:
        raise TypeError("scatter_ needs src (a tensor) or value (a scalar)")
    if reduce is not None:
        if reduce not in ("add", "multiply"):
            raise RuntimeError(f"scatter_: reduce argument must be either add or multiply, got {reduce!r}")
        if not isinstance(src, Tensor):
            src = full(index.shape, src, dtype=x.dtype, device=x.device)
        return _scatter_reduce_into(x, dim, index, src, reduce, True, "scatter_")
    return scatter_into(x, dim, index, src, "scatter_")


@register("scatter_add_", family="indexing", aten=["aten::scatter_add_.default"], api=(), methods=("scatter_add_",),
          variants=(OUT_OF_PLACE,), **_SCATTER_RULES)
def scatter_add_(x: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """Adds ``src[c]`` into ``x`` at ``c`` with ``c[dim]`` replaced by ``index[c]``; duplicates add
    in index order (deterministic, no atomics)."""
    return _scatter_reduce_into(x, dim, index, src, "sum", True, "scatter_add_")


@register("scatter_reduce_", family="indexing", aten=["aten::scatter_reduce_.two"], api=(),
          methods=("scatter_reduce_",), variants=(OUT_OF_PLACE,), **_SCATTER_RULES)
def scatter_reduce_(x: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,
                    include_self: bool = True) -> Tensor:
    """Reduce (sum, prod, mean, amax, amin) ``src`` into ``x`` along ``dim`` at ``index``; without
    ``include_self`` the original values of the elements hit do not take part."""
    return _scatter_reduce_into(x, dim, index, src, reduce, include_self, "scatter_reduce_")


# ---- index_add, index_copy, index_fill ---------------------------------------------------------------

# the rules, of bound arguments, of an op writing into ``x`` in place along one dim
_INDEX_ALONG_RULES = {"meta": lambda a: TensorMeta(tuple(a.x.shape), a.x.dtype),
                      "cost": lambda a: Cost(bytes_read=nbytes(a.x), bytes_written=nbytes(a.x)), "bound": True}


def _check_source(x: Tensor, d: int, index: Tensor, source: Tensor, op: str) -> None:
    expected = list(x.shape) if x.ndim else [1]
    expected[d] = index.numel()
    got = list(source.shape) if source.ndim else [1]
    if got != expected:
        raise RuntimeError(f"{op}: source of shape {list(source.shape)} does not match the expected shape "
                           f"{expected} (self {list(x.shape)} with dim {d} of the index's length {index.numel()})")


@register("index_add_", family="indexing", aten=["aten::index_add_.default"], api=(), methods=("index_add_",),
          variants=(OUT_OF_PLACE,), **_INDEX_ALONG_RULES)
def index_add_(x: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha=1) -> Tensor:
    """``x[..., index[i], ...] += alpha * source[..., i, ...]`` along ``dim``; duplicate indices add
    up in order."""
    plan = _dim_plan(x, dim, index, "index_add_")
    _check_source(x, plan.positions[0], index, source, "index_add_")
    source = source._view(plan.geometry()[0], S.contiguous_strides(plan.geometry()[0])) if source.ndim == 0 else source
    put_through(plan, source, "index_add_", accumulate=True, alpha=None if alpha == 1 else alpha)
    return x


@register("index_copy_", family="indexing", aten=["aten::index_copy_.default"], api=(), methods=("index_copy_",),
          variants=(OUT_OF_PLACE,), **_INDEX_ALONG_RULES)
def index_copy_(x: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    plan = _dim_plan(x, dim, index, "index_copy_")
    _check_source(x, plan.positions[0], index, source, "index_copy_")
    put_through(plan, source if source.ndim else source._view((1,), (1,)), "index_copy_")
    return x


@register("index_fill_", family="indexing", aten=["aten::index_fill_.int_Scalar", "aten::index_fill_.int_Tensor"],
          api=(), methods=("index_fill_",), variants=(OUT_OF_PLACE,), **_INDEX_ALONG_RULES)
def index_fill_(x: Tensor, dim: int, index: Tensor, value) -> Tensor:
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, got {value.ndim} dimensions")
        value = value.item()
    put_through(_dim_plan(x, dim, index, "index_fill_", wrap=True), value, "index_fill_")
    return x




# ---- samples ---------------------------------------------------------------------------------------

def _along(x, dim, index):
    """NumPy's ``x`` indexed by ``index`` along ``dim`` (gather's rule)."""
    return np.take_along_axis(x, index, axis=dim)


def _scatter_reference(combine=None):
    def reference(x, dim, index, src=None, *, value=None, reduce=None, include_self=True):
        result = np.array(x, copy=True)
        source = np.broadcast_to(value if src is None else src, index.shape) if np.ndim(src) == 0 else src
        positions = list(np.indices(index.shape))
        positions[dim] = index
        where = tuple(positions)
        values = source[tuple(slice(0, n) for n in index.shape)]
        if combine is None:
            result[where] = values
        else:
            combine.at(result, where, values)
        return result
    return reference


def _index_add_reference(x, dim, index, source, *, alpha=1):
    result = np.moveaxis(np.array(x, copy=True), dim, 0)
    np.add.at(result, index, np.moveaxis(source, dim, 0) * alpha)
    return np.moveaxis(result, 0, dim)


def _index_copy_reference(x, dim, index, source):
    result = np.moveaxis(np.array(x, copy=True), dim, 0)
    result[index] = np.moveaxis(source, dim, 0)
    return np.moveaxis(result, 0, dim)


def _index_fill_reference(x, dim, index, value):
    result = np.moveaxis(np.array(x, copy=True), dim, 0)
    result[index] = value
    return np.moveaxis(result, 0, dim)


_MATRIX, _TRANSPOSED = operand(2, 3), operand(3, 2, layout="transposed")
_SAMPLES = {
    "index_select": Samples((sample(_MATRIX, 0, index_operand(2, 3)), sample(_TRANSPOSED, 1, index_operand(2, 4)),
                             sample(operand(), 0, index_operand(1, 1)), sample(operand(0, 3), 1, index_operand(3, 2)),
                             sample(operand(2, 4, dtype="int64", layout="sliced"), -1, index_operand(4, 1))),
                            lambda x, dim, index: np.take(x, index, axis=dim) if np.ndim(x) else x),
    "embedding": Samples((sample(operand(4, 3), index_operand(4, 2, 3)),
                          sample(operand(5, 2, layout="transposed"), index_operand(5, 4)),
                          sample(operand(3, 2), index_operand(3), padding_idx=1), sample(operand(4, 3), index_operand(4, 0))),
                         lambda weight, indices, *ignored, **ignored_too: weight[indices]),
    "gather": Samples((sample(_MATRIX, 1, index_operand(3, 2, 2)), sample(_TRANSPOSED, 0, index_operand(3, 2, 2)),
                       sample(operand(), 0, index_operand(1)), sample(operand(0, 3), 1, index_operand(3, 0, 2)),
                       sample(operand(2, 4, dtype="int64", layout="sliced"), -1, index_operand(4, 2, 5))),
                      lambda x, dim, index, **ignored: _along(x, dim, index) if np.ndim(x) else x.reshape(index.shape)),
    "take_along_dim": Samples((sample(_MATRIX, index_operand(3, 2, 2), 1), sample(_TRANSPOSED, index_operand(6, 4)),
                               sample(operand(2, 4, dtype="int64", layout="sliced"), index_operand(2, 1, 4), 0)),
                              lambda x, indices, dim=None: np.take_along_axis(x.reshape(-1) if dim is None else x, indices,
                                                                              axis=0 if dim is None else dim)),
    "take": Samples((sample(_MATRIX, index_operand(6, 4)), sample(_TRANSPOSED, index_operand(6, 2, 2)),
                     sample(operand(), index_operand(1)),
                     sample(operand(2, 4, dtype="int64", layout="sliced"), index_operand(8, 3))),
                    lambda x, index: np.take(x.reshape(-1), index)),
    # one index along the scattered dim: writes never collide
    "scatter": Samples((sample(operand(3, 3), 0, index_operand(3, 1, 3), operand(2, 3)),
                        sample(_TRANSPOSED, 1, index_operand(2, 3, 1), operand(3, 1)),
                        sample(operand(3, 3), 1, index_operand(3, 2, 1), value=1.5),
                        sample(operand(3, 3), 0, index_operand(3, 2, 3), operand(2, 3), reduce="add")),
                       lambda x, dim, index, src=None, value=None, reduce=None: _scatter_reference(
                           np.add if reduce == "add" else np.multiply if reduce == "multiply" else None)(
                           x, dim, index, src, value=value)),
    "scatter_add": Samples((sample(operand(3, 3), 0, index_operand(3, 2, 3), operand(2, 3)),
                            sample(_TRANSPOSED, 1, index_operand(2, 3, 2), operand(3, 2)),
                            sample(operand(4, dtype="int64"), 0, index_operand(4, 6), operand(6, dtype="int64"))),
                           _scatter_reference(np.add)),
    "scatter_reduce": Samples((sample(operand(3, 3), 0, index_operand(3, 2, 3), operand(2, 3), "sum"),
                               sample(_TRANSPOSED, 1, index_operand(2, 3, 2), operand(3, 2), "amax"),
                               sample(operand(3, 3), 0, index_operand(3, 2, 3), operand(2, 3), "prod", include_self=False),
                               sample(operand(4), 0, index_operand(4, 6), operand(6), "mean"))),
    "index_add": Samples((sample(operand(3, 2), 0, index_operand(3, 4), operand(4, 2)),
                          sample(_TRANSPOSED, 1, index_operand(2, 3), operand(3, 3), alpha=2),
                          sample(operand(4, dtype="int64"), 0, index_operand(4, 2), operand(2, dtype="int64"))),
                         _index_add_reference),
    "index_copy": Samples((sample(operand(3, 2), 0, index_operand(3, 2, distinct=True), operand(2, 2)),
                           sample(_TRANSPOSED, 1, index_operand(2, 1, distinct=True), operand(3, 1))), _index_copy_reference),
    "index_fill": Samples((sample(operand(3, 2), 0, index_operand(3, 2), 1.5), sample(_TRANSPOSED, 1, index_operand(2, 3), -1.0),
                           sample(operand(4, dtype="int64"), 0, index_operand(4, 2), operand(dtype="int64"))),
                          _index_fill_reference),
}
for _name in ("scatter", "scatter_add", "scatter_reduce", "index_add", "index_copy", "index_fill"):
    _SAMPLES[_name + "_"] = _SAMPLES[_name]
family_samples("indexing", by_name(_SAMPLES))
