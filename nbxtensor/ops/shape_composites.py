"""Splitting, broadcasting and combining: the split family and ``broadcast_tensors`` as views; index
sets (``tril_indices``, ``combinations``) computed from sizes alone on the host and uploaded; products
and differences (``kron``, ``tensordot``, ``cross``, ``diff``), ``block_diag``, ``isin`` and
``diagonal_scatter`` composed of registry ops, their intermediates the op's temporaries."""
from __future__ import annotations

import itertools

import numpy as np

from .. import shape as S
from ..allocation import new_tensor, scratch_scope
from ..dtypes import get_dtype
from ..promotion import result_type
from ..tensor import Tensor
from .creation import tensor
from .nn_composites import temporaries
from .registry import (Cost, OUT, TensorMeta, VIEW, family_samples, nbytes, op_impl, register, tensor_attribute,
                       workspace_bytes)
from .samples import Samples, by_name, operand, sample, unary_samples
from .views import NO_COST, narrow, reshape, view_op

_I64 = get_dtype("int64")


def _meta_tensor(x) -> Tensor:
    return Tensor._meta(tuple(x.shape), x.dtype)


# ---- the split family, broadcast_tensors, ravel ---------------------------------------------------

@view_op("split_with_sizes", ["aten::split_with_sizes.default"], methods=("split_with_sizes",))
def split_with_sizes(x: Tensor, split_sizes, dim: int = 0):
    """Views of ``x`` along ``dim`` of the given sizes, which must sum to its size there."""
    return op_impl("split")(x, [int(n) for n in split_sizes], dim)


def _tensor_split_bounds(size: int, indices_or_sections) -> list[int]:
    if isinstance(indices_or_sections, Tensor):
        if indices_or_sections.dtype is not _I64 or indices_or_sections.ndim > 1:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to be a zero-dimensional or "
                               f"one-dimensional tensor of dtype long, but got a {indices_or_sections.ndim}-D tensor "
                               f"of dtype {indices_or_sections.dtype.name}")
        indices_or_sections = indices_or_sections.tolist()
    if isinstance(indices_or_sections, int):
        sections = indices_or_sections
        if sections <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {sections}")
        small, extra = divmod(size, sections)
        bounds, start = [], 0
        for i in range(sections - 1):
            start += small + (1 if i < extra else 0)
            bounds.append(start)
        return bounds
    return [int(i) for i in indices_or_sections]


@view_op("tensor_split", ["aten::tensor_split.sections", "aten::tensor_split.indices",
                          "aten::tensor_split.tensor_indices_or_sections"], methods=("tensor_split",))
def tensor_split(x: Tensor, indices_or_sections, dim: int = 0):
    """Views of ``x`` along ``dim``: ``n`` sections as equal as can be (the first size % n one longer), or
    the slices between consecutive given indices (x[i:j] as Python slices it: empty where j <= i)."""
    if x.ndim == 0:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims")
    d = S.wrap_dim(dim, x.ndim)
    size = x.shape[d]
    pieces, start = [], 0
    for bound in _tensor_split_bounds(size, indices_or_sections) + [size]:
        stop = min(max(bound if bound >= 0 else bound + size, 0), size)
        pieces.append(narrow(x, d, min(start, stop), max(stop - start, 0)))
        start = stop
    return tuple(pieces)


def _directional_split(name: str, dim_of, min_ndim: int):
    def impl(x: Tensor, indices_or_sections):
        if x.ndim < min_ndim:
            raise RuntimeError(f"torch.{name} requires a tensor with at least {min_ndim} dimension"
                               f"{'s' if min_ndim > 1 else ''}, but got a tensor with {x.ndim} dimensions!")
        d = dim_of(x.ndim)
        if isinstance(indices_or_sections, int):
            if indices_or_sections == 0 or x.shape[d] % indices_or_sections:
                raise RuntimeError(f"torch.{name} attempted to split along dimension {d}, but the size of the "
                                   f"dimension {x.shape[d]} is not divisible by the split_size {indices_or_sections}!")
        return tensor_split.impl(x, indices_or_sections, d)
    impl.__doc__ = f"``tensor_split`` along dim {dim_of(3)}{' (0 for 1-D tensors)' if name == 'hsplit' else ''}; " \
                   "a number of sections must divide the size."
    return view_op(name, [f"aten::{name}.int", f"aten::{name}.array"], methods=(name,))(impl)


hsplit = _directional_split("hsplit", lambda ndim: 1 if ndim > 1 else 0, 1)
vsplit = _directional_split("vsplit", lambda ndim: 0, 2)
dsplit = _directional_split("dsplit", lambda ndim: 2, 3)


def _tensor_list(tensors):
    # a TensorMeta (a named tuple) stands for one tensor
    return list(tensors[0]) if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) \
        and not isinstance(tensors[0], TensorMeta) else list(tensors)


@register("broadcast_tensors", family="view", aten=["aten::broadcast_tensors.default"], aliases=VIEW,
          meta=lambda a: tuple(TensorMeta(S.broadcast_shapes(*[tuple(x.shape) for x in _tensor_list(a.tensors)]),
                                          x.dtype) for x in _tensor_list(a.tensors)),
          cost=lambda a: NO_COST, bound=True)
def broadcast_tensors(*tensors):
    """Each tensor as a broadcast view of the common shape."""
    tensors = _tensor_list(tensors)
    shape = S.broadcast_shapes(*[tuple(t.shape) for t in tensors])
    return tuple(t.expand(shape) for t in tensors)


@view_op("ravel", ["aten::ravel.default"], methods=("ravel",))
def ravel(x: Tensor) -> Tensor:
    """``x`` flattened: a view where the strides allow, else a contiguous copy."""
    return reshape(x, (-1,))


def _hermitian(x: Tensor, batched: bool) -> Tensor:
    if not batched and x.ndim not in (0, 2):
        raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got {x.ndim}-D tensor.")
    flipped = x.mT if batched else x.T
    return op_impl("conj")(flipped) if x.dtype.is_complex else flipped


tensor_attribute("H", property(lambda x: _hermitian(x, False)))
tensor_attribute("mH", property(lambda x: _hermitian(x, True)))
tensor_attribute("adjoint", lambda x: _hermitian(x, True))


# ---- index sets ------------------------------------------------------------------------------------

def _check_sides(row, col) -> None:
    if row < 0 or col < 0:
        raise RuntimeError(f"row must be non-negative, got {row}" if row < 0 else f"col must be non-negative, got {col}")


def _index_set_rules(indices) -> dict:
    """tril_indices' or triu_indices' rules (``indices`` NumPy's function of the triangle)."""
    def meta(a):
        _check_sides(a.row, a.col)
        return TensorMeta((2, int(indices(a.row, a.offset, a.col)[0].size)), get_dtype(a.dtype or "int64"))
    return {"meta": meta, "cost": lambda a: Cost(bytes_written=nbytes(meta(a))), "bound": True}


def _index_set(rows_cols, dtype, device) -> Tensor:
    dt = get_dtype(dtype or "int64")
    if dt.name not in ("int32", "int64"):
        raise RuntimeError(f"\"tril_indices\" not implemented for '{dt.name}': the indices are int32 or int64")
    return tensor(np.stack(rows_cols).astype(dt.numpy), dtype=dt, device=device)


@register("tril_indices", family="creation", aten=["aten::tril_indices.default"], **_index_set_rules(np.tril_indices))
def tril_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None, layout=None, pin_memory=False):
    """The (row, column) coordinates of the lower triangle of a row x col matrix (diagonal ``offset``), a
    2 x N tensor in row-major order."""
    _check_sides(row, col)
    return _index_set(np.tril_indices(row, offset, col), dtype, device)


@register("triu_indices", family="creation", aten=["aten::triu_indices.default"], **_index_set_rules(np.triu_indices))
def triu_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None, layout=None, pin_memory=False):
    """The (row, column) coordinates of the upper triangle of a row x col matrix (diagonal ``offset``)."""
    _check_sides(row, col)
    return _index_set(np.triu_indices(row, offset, col), dtype, device)


def _cartesian_result(tensors) -> TensorMeta:
    for t in tensors:
        if len(t.shape) != 1:
            raise RuntimeError(f"Expect a 1D vector, but got shape {list(t.shape)}")
    dtype = result_type(*[_meta_tensor(t) for t in tensors])
    if len(tensors) == 1:
        return TensorMeta(tuple(tensors[0].shape), dtype)
    return TensorMeta((S.numel([t.shape[0] for t in tensors]), len(tensors)), dtype)


def _cartesian_cost(a):
    meta = _cartesian_result(a.tensors)
    return Cost(bytes_written=nbytes(meta), workspace=temporaries(len(a.tensors), meta.shape[:1], meta.dtype))


@register("cartesian_prod", family="shape", aten=["nbx::cartesian_prod"],
          meta=lambda a: _cartesian_result(a.tensors), cost=_cartesian_cost, bound=True)
def cartesian_prod(*tensors) -> Tensor:
    """Every combination of one element from each 1-D tensor, one per row, the last varying fastest."""
    meta = _cartesian_result(tensors)
    if len(tensors) == 1:
        return tensors[0]
    with scratch_scope():
        grids = [g.reshape(-1).to(meta.dtype) for g in op_impl("meshgrid")(*tensors, indexing="ij")]
    return op_impl("stack")(grids, 1)


def _combination_rows(n: int, r: int, with_replacement: bool) -> np.ndarray:
    make = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    return np.array(list(make(range(n), r)), dtype=np.int64).reshape(-1, r)


def _combinations_result(input, r, with_replacement) -> TensorMeta:
    if len(input.shape) != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return TensorMeta((0,), input.dtype)
    return TensorMeta((len(_combination_rows(input.shape[0], r, with_replacement)), r), input.dtype)


def _combinations_meta(a):
    return _combinations_result(a.input, a.r, a.with_replacement)


def _combinations_cost(a):
    meta = _combinations_meta(a)
    return Cost(bytes_written=nbytes(meta), workspace=temporaries(1, meta.shape, _I64))


@register("combinations", family="shape", aten=["aten::combinations.default"], meta=_combinations_meta,
          cost=_combinations_cost, bound=True)
def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:
    """The length-``r`` combinations of the elements of a 1-D tensor, one per row, in itertools' order."""
    meta = _combinations_result(input, r, with_replacement)
    if r == 0:
        return new_tensor((0,), input.dtype, input.device)
    rows = _combination_rows(input.shape[0], r, with_replacement)
    with scratch_scope():
        index = tensor(rows.reshape(-1), dtype=_I64, device=input.device)
    return op_impl("index_select")(input, 0, index).reshape(meta.shape)


# ---- block_diag, kron, tensordot, cross, diff -------------------------------------------------------------

def _as_matrix(shape):
    if len(shape) > 2:
        raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input has "
                           f"{len(shape)} dimensions")
    return (1, 1) if len(shape) == 0 else ((1, shape[0]) if len(shape) == 1 else tuple(shape))


def _block_diag_result(tensors) -> TensorMeta:
    shapes = [_as_matrix(tuple(t.shape)) for t in tensors]
    dtype = result_type(*[_meta_tensor(t) for t in tensors]) if tensors else get_dtype("float32")
    return TensorMeta((sum(s[0] for s in shapes), sum(s[1] for s in shapes)), dtype)


@register("block_diag", family="shape", aten=["aten::block_diag.default"], meta=lambda a: _block_diag_result(a.tensors),
          cost=lambda a: Cost(bytes_read=sum(nbytes(x) for x in a.tensors),
                              bytes_written=nbytes(_block_diag_result(a.tensors))), bound=True)
def block_diag(*tensors) -> Tensor:
    """The tensors (each taken as a matrix: 0-d as 1 x 1, 1-D as a row) along the diagonal, zeros elsewhere."""
    meta = _block_diag_result(tensors)
    device = tensors[0].device if tensors else None
    out = op_impl("zeros")(meta.shape, dtype=meta.dtype, device=device)
    row = col = 0
    for t in tensors:
        rows, cols = _as_matrix(tuple(t.shape))
        out[row:row + rows, col:col + cols] = t.reshape(rows, cols)
        row, col = row + rows, col + cols
    return out


def _kron_shapes(a, b):
    ndim = max(len(a.shape), len(b.shape))
    sa = (1,) * (ndim - len(a.shape)) + tuple(a.shape)
    sb = (1,) * (ndim - len(b.shape)) + tuple(b.shape)
    return sa, sb


def _kron_result(input, other) -> TensorMeta:
    sa, sb = _kron_shapes(input, other)
    return TensorMeta(tuple(x * y for x, y in zip(sa, sb)), result_type(_meta_tensor(input), _meta_tensor(other)))


def _kron_cost(a):
    meta = _kron_result(a.input, a.other)
    return Cost(flops=S.numel(meta.shape), bytes_read=nbytes(a.input) + nbytes(a.other), bytes_written=nbytes(meta))


@register("kron", family="shape", aten=["aten::kron.default"], meta=lambda a: _kron_result(a.input, a.other),
          cost=_kron_cost, bound=True)
def kron(input: Tensor, other: Tensor) -> Tensor:
    """The Kronecker product: blocks input[i] * other, laid out as one product of broadcast views."""
    meta = _kron_result(input, other)
    sa, sb = _kron_shapes(input, other)
    a = input.reshape(tuple(v for n in sa for v in (n, 1)))
    b = other.reshape(tuple(v for n in sb for v in (1, n)))
    return (a * b).reshape(meta.shape)


def _tensordot_dims(a, b, dims):
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > min(len(a.shape), len(b.shape)):
            raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}")
        return list(range(len(a.shape) - dims, len(a.shape))), list(range(dims))
    dims_a, dims_b = dims
    dims_a = [dims_a] if isinstance(dims_a, int) else list(dims_a)
    dims_b = [dims_b] if isinstance(dims_b, int) else list(dims_b)
    if len(dims_a) != len(dims_b):
        raise RuntimeError(f"both dimension lists should have same length, got {len(dims_a)} and {len(dims_b)}")
    dims_a = [S.wrap_dim(d, len(a.shape)) for d in dims_a]
    dims_b = [S.wrap_dim(d, len(b.shape)) for d in dims_b]
    for da, db in zip(dims_a, dims_b):
        if a.shape[da] != b.shape[db] and 1 not in (a.shape[da], b.shape[db]):
            raise RuntimeError(f"contracted dimensions need to match, but first has size {a.shape[da]} in dim {da} "
                               f"and second has size {b.shape[db]} in dim {db}")
    return dims_a, dims_b


def _tensordot_result(a, b, dims) -> TensorMeta:
    dims_a, dims_b = _tensordot_dims(a, b, dims)
    keep_a = [a.shape[i] for i in range(len(a.shape)) if i not in dims_a]
    keep_b = [b.shape[i] for i in range(len(b.shape)) if i not in dims_b]
    return TensorMeta((*keep_a, *keep_b), result_type(_meta_tensor(a), _meta_tensor(b)))


def _tensordot_meta(call):
    return _tensordot_result(call.a, call.b, call.dims)


def _tensordot_cost(call):
    a, b = call.a, call.b
    meta = _tensordot_result(a, b, call.dims)
    dims_a, dims_b = _tensordot_dims(a, b, call.dims)
    inner = S.numel([min(a.shape[da], b.shape[db]) for da, db in zip(dims_a, dims_b)])
    # each side's sum over broadcast contracted dims, then its permuted copy
    return Cost(flops=2 * S.numel(meta.shape) * inner, bytes_read=nbytes(a) + nbytes(b), bytes_written=nbytes(meta),
                workspace=temporaries(2, a.shape, a.dtype) + temporaries(2, b.shape, b.dtype))


def _summed_to_one(x: Tensor, dims: list) -> Tensor:
    return op_impl("sum")(x, dims, True, dtype=x.dtype) if dims else x


def _tensordot_from_aten(args, kwargs):
    # aten::tensordot(self, other, dims_self, dims_other): the two dim lists are torch's ``dims`` pair
    return (*args[:2], (args[2], args[3])), kwargs


@register("tensordot", family="matmul", aten=["aten::tensordot.default"], meta=_tensordot_meta, cost=_tensordot_cost,
          bound=True, variants=(OUT,), adapters={"aten::tensordot.default": _tensordot_from_aten})
def tensordot(a: Tensor, b: Tensor, dims=2) -> Tensor:
    """The sum of products over ``dims`` (the last n of ``a`` with the first n of ``b``, or two lists):
    both operands permuted to matrices and multiplied once."""
    meta = _tensordot_result(a, b, dims)
    dims_a, dims_b = _tensordot_dims(a, b, dims)
    free_a = [i for i in range(a.ndim) if i not in dims_a]
    free_b = [i for i in range(b.ndim) if i not in dims_b]
    with scratch_scope():
        # a contracted dim of size 1 broadcasts against the other side's, which is summed down to 1
        a = _summed_to_one(a, [da for da, db in zip(dims_a, dims_b) if a.shape[da] != b.shape[db] == 1])
        b = _summed_to_one(b, [db for da, db in zip(dims_a, dims_b) if b.shape[db] != a.shape[da] == 1])
        inner = S.numel([a.shape[d] for d in dims_a])
        left = a.permute(free_a + dims_a).reshape(S.numel([a.shape[i] for i in free_a]), inner)
        right = b.permute(dims_b + free_b).reshape(inner, S.numel([b.shape[i] for i in free_b]))
    return op_impl("matmul")(left.to(meta.dtype), right.to(meta.dtype)).reshape(meta.shape)


def _cross_dim(shape, dim, op):
    if dim is None:
        for i, n in enumerate(shape):
            if n == 3:
                return i
        raise RuntimeError("no dimension of size 3 in input")
    d = S.wrap_dim(dim, len(shape))
    if shape[d] != 3:
        raise RuntimeError(f"{op}: inputs dimension {dim} must have length 3. Got {shape[d]} and {shape[d]}")
    return d


def _cross_result(op: str, input, other, dim) -> TensorMeta:
    if len(input.shape) != len(other.shape):
        raise RuntimeError(f"{op}: inputs must have the same number of dimensions.")
    shape = S.broadcast_shapes(tuple(input.shape), tuple(other.shape))
    _cross_dim(shape, dim, op)
    return TensorMeta(shape, result_type(_meta_tensor(input), _meta_tensor(other)))


def _cross_impl(op: str, default):
    def impl(input: Tensor, other: Tensor, dim=default) -> Tensor:
        meta = _cross_result(op, input, other, dim)
        d = _cross_dim(meta.shape, dim, op)
        a, b = input.expand(meta.shape), other.expand(meta.shape)
        with scratch_scope():
            ax, ay, az = (narrow(a, d, i, 1) for i in range(3))
            bx, by, bz = (narrow(b, d, i, 1) for i in range(3))
            parts = [ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx]
        return op_impl("cat")(parts, d).to(meta.dtype)
    impl.__doc__ = "The cross product of 3-vectors along ``dim``, after broadcasting."
    return impl


def _cross_cost(a):
    input, other = a.input, a.other
    shape = S.broadcast_shapes(tuple(input.shape), tuple(other.shape))
    dtype = result_type(_meta_tensor(input), _meta_tensor(other))
    return Cost(flops=3 * S.numel(shape), bytes_read=nbytes(input) + nbytes(other),
                bytes_written=S.numel(shape) * dtype.itemsize,
                workspace=temporaries(9, shape[:-1] + (1,), input.dtype))


cross = register("cross", family="pointwise", aten=["aten::cross.default"],
                 meta=lambda a: _cross_result("cross", a.input, a.other, a.dim), cost=_cross_cost, bound=True,
                 methods=("cross",), variants=(OUT,))(_cross_impl("cross", None))
linalg_cross = register("linalg.cross", family="pointwise", aten=["aten::linalg_cross.default"],
                        meta=lambda a: _cross_result("linalg.cross", a.input, a.other, a.dim), cost=_cross_cost,
                        bound=True, api=(), variants=(OUT,))(
    _cross_impl("linalg.cross", -1))


def _diff_result(input, n, dim, prepend, append) -> TensorMeta:
    if len(input.shape) == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    d = S.wrap_dim(dim, len(input.shape))
    length = input.shape[d] + sum(0 if t is None else (t.shape[d] if len(t.shape) else 1) for t in (prepend, append))
    shape = list(input.shape)
    shape[d] = max(length - n, 0)
    return TensorMeta(tuple(shape), input.dtype)


def _diff_meta(a):
    return _diff_result(a.input, a.n, a.dim, a.prepend, a.append)


def _diff_cost(a):
    x = a.input
    return Cost(flops=a.n * S.numel(x.shape), bytes_read=nbytes(x), bytes_written=nbytes(_diff_meta(a)),
                workspace=temporaries(2 * max(a.n, 1), x.shape, x.dtype))


@register("diff", family="shape", aten=["aten::diff.default"], meta=_diff_meta, cost=_diff_cost, bound=True,
          methods=("diff",))
def diff(input: Tensor, n: int = 1, dim: int = -1, prepend=None, append=None) -> Tensor:
    """The n-th forward difference along ``dim`` (``prepend`` and ``append`` joined first); for bool
    tensors a difference is ``!=``, as torch's."""
    meta = _diff_result(input, n, dim, prepend, append)
    d = S.wrap_dim(dim, input.ndim)
    if n == 0:
        return input.clone()
    with scratch_scope():
        pieces = []
        for t in (prepend, input, append):
            if t is None:
                continue
            if t.ndim == 0:
                shape = list(input.shape)
                shape[d] = 1
                t = t.expand(shape)
            pieces.append(t)
        x = op_impl("cat")(pieces, d) if len(pieces) > 1 else input
    for step in range(n):
        length = x.shape[d]
        if length <= 1:
            return new_tensor(meta.shape, meta.dtype, input.device)
        ahead, behind = narrow(x, d, 1, length - 1), narrow(x, d, 0, length - 1)
        if step < n - 1:
            with scratch_scope():
                x = ahead != behind if x.dtype.name == "bool" else ahead - behind
        else:
            x = ahead != behind if x.dtype.name == "bool" else ahead - behind
    return x


# ---- isin, diagonal_scatter --------------------------------------------------------------------------

def _isin_meta(a):
    return TensorMeta(tuple(a.elements.shape) if hasattr(a.elements, "shape") else (), get_dtype("bool"))


def _isin_cost(a):
    elements, test_elements = a.elements, a.test_elements
    count = S.numel(elements.shape) if hasattr(elements, "shape") else 1
    tests = S.numel(test_elements.shape) if hasattr(test_elements, "shape") else 1
    return Cost(flops=count * max(tests, 1).bit_length() + tests * max(tests, 1).bit_length(),
                bytes_read=8 * (count + tests), bytes_written=count,
                workspace=workspace_bytes(*[8 * count] * 4, *[8 * tests] * 4))


@register("isin", family="sorting", aten=["aten::isin.Tensor_Tensor", "aten::isin.Tensor_Scalar",
                                          "aten::isin.Scalar_Tensor"], meta=_isin_meta, cost=_isin_cost,
          bound=True)
def isin(elements, test_elements, *, assume_unique: bool = False, invert: bool = False) -> Tensor:
    """Whether each element is among ``test_elements``: the tests sorted once, each element looked up by
    binary search (searchsorted), so n elements against m tests cost O((n + m) log m)."""
    if not isinstance(elements, Tensor):
        device = test_elements.device
        elements = tensor(elements, device=device)
    if not isinstance(test_elements, Tensor):
        test_elements = tensor([test_elements], device=elements.device)
    common = result_type(elements, test_elements)
    if common.is_complex:
        raise RuntimeError("isin: complex tensors are not supported (there is no order to search)")
    count = S.numel(test_elements.shape)
    if count == 0:
        return op_impl("full")(tuple(elements.shape), invert, dtype="bool", device=elements.device)
    with scratch_scope():
        ordered = test_elements.reshape(-1).to(common).sort().values
        values = elements.to(common).reshape(-1)
        position = op_impl("searchsorted")(ordered, values).clamp_max(count - 1)
        nearest = ordered.index_select(0, position)
    found = nearest != values if invert else nearest == values
    return found.reshape(tuple(elements.shape))


def _diagonal_scatter_result(input, src, offset, dim1, dim2) -> TensorMeta:
    expected = tuple(op_impl("diagonal")(_meta_tensor(input), offset, dim1, dim2).shape)
    if tuple(src.shape) != expected:
        raise RuntimeError(f"diagonal_scatter: expected src to have a size equal to the diagonal of the input, "
                           f"{list(expected)}, but got {list(src.shape)}")
    return TensorMeta(tuple(input.shape), input.dtype)


@register("diagonal_scatter", family="shape", aten=["aten::diagonal_scatter.default"],
          meta=lambda a: _diagonal_scatter_result(a.input, a.src, a.offset, a.dim1, a.dim2),
          cost=lambda a: Cost(bytes_read=nbytes(a.input) + nbytes(a.src), bytes_written=nbytes(a.input)), bound=True,
          methods=("diagonal_scatter",))
def diagonal_scatter(input: Tensor, src: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """A copy of ``input`` with the diagonal (``offset``, ``dim1``, ``dim2``) replaced by ``src``."""
    _diagonal_scatter_result(input, src, offset, dim1, dim2)
    out = input.clone()
    op_impl("diagonal")(out, offset, dim1, dim2).copy_(src)
    return out


# ---- samples ---------------------------------------------------------------------------------------

def _diff_reference(x, n=1, dim=-1, prepend=None, append=None):
    parts = [p if np.ndim(p) else np.full(x.shape[:dim % x.ndim] + (1,) + x.shape[dim % x.ndim + 1:], p)
             for p in (prepend, x, append) if p is not None]
    return np.diff(np.concatenate(parts, axis=dim), n, axis=dim)


def _diagonal_scatter_reference(x, src, offset=0, dim1=0, dim2=1):
    result = np.moveaxis(x.copy(), (dim1, dim2), (-2, -1))
    rows = np.arange(src.shape[-1]) + max(-offset, 0)
    result[..., rows, rows + offset] = src
    return np.moveaxis(result, (-2, -1), (dim1, dim2))


def _block_diag_reference(*tensors):
    blocks = [np.reshape(t, (1, -1)) if np.ndim(t) < 2 else t for t in tensors]
    result = np.zeros((sum(b.shape[0] for b in blocks), sum(b.shape[1] for b in blocks)),
                      np.result_type(*blocks))
    row = column = 0
    for block in blocks:
        result[row:row + block.shape[0], column:column + block.shape[1]] = block
        row, column = row + block.shape[0], column + block.shape[1]
    return result


def _combinations_reference(x, r=2, with_replacement=False):
    chosen = (itertools.combinations_with_replacement if with_replacement else itertools.combinations)(x, r)
    return np.array(list(chosen), dtype=x.dtype).reshape(-1, r)


_MATRIX, _TRANSPOSED = operand(2, 3), operand(3, 2, layout="transposed")
_INTS = operand(2, 4, dtype="int64", layout="sliced")
_SAMPLES = {
    "split_with_sizes": Samples((sample(operand(5, 2), [2, 3]), sample(_TRANSPOSED, [1, 1], 1), sample(operand(0, 3), [1, 2], 1),
                                 sample(_INTS, [4], -1)),
                                lambda x, sizes, dim=0: tuple(np.split(x, np.cumsum(sizes)[:-1], axis=dim))),
    "tensor_split": Samples((sample(operand(5, 2), 2), sample(_TRANSPOSED, [1], 1), sample(operand(0, 3), 2),
                             sample(_INTS, (1, 3), -1)),
                            lambda x, sections, dim=0: tuple(np.array_split(x, sections, axis=dim))),
    "hsplit": Samples((sample(operand(2, 4), 2), sample(operand(6), [2, 4]), sample(operand(0, 4), [1])),
                      lambda x, sections: tuple(np.hsplit(x, sections))),
    "vsplit": Samples((sample(operand(4, 2), 2), sample(_TRANSPOSED, [1]), sample(operand(2, 0), 2)),
                      lambda x, sections: tuple(np.vsplit(x, sections))),
    "dsplit": Samples((sample(operand(1, 2, 4), 2), sample(operand(2, 1, 3), [1])),
                      lambda x, sections: tuple(np.dsplit(x, sections))),
    "broadcast_tensors": Samples((sample(_MATRIX, operand(3)), sample(_TRANSPOSED, operand(3, 1, dtype="int64")),
                                  sample(operand(), operand(0, 1)), sample(operand(2, 4, layout="broadcast"))),
                                 lambda *xs: tuple(np.broadcast_arrays(*xs))),
    "ravel": Samples(unary_samples(("float32", "int64")), np.ravel),
    "tril_indices": Samples((sample(3, 3), sample(2, 4, 1), sample(4, 2, -1), sample(0, 3)),
                            lambda row, col, offset=0, **ignored: np.stack(np.tril_indices(row, offset, col))),
    "triu_indices": Samples((sample(3, 3), sample(2, 4, 1), sample(4, 2, -1), sample(0, 3)),
                            lambda row, col, offset=0, **ignored: np.stack(np.triu_indices(row, offset, col))),
    "cartesian_prod": Samples((sample(operand(2), operand(3)), sample(operand(3)), sample(operand(2), operand(0)),
                               sample(operand(2, dtype="int64"), operand(2, dtype="int64"), operand(1, dtype="int64"))),
                              lambda *xs: np.stack([g.ravel() for g in np.meshgrid(*xs, indexing="ij")], -1)
                              if len(xs) > 1 else xs[0]),
    "combinations": Samples((sample(operand(4)), sample(operand(3), 3), sample(operand(3, dtype="int64"), with_replacement=True),
                             sample(operand(1), 2)), _combinations_reference),
    "block_diag": Samples((sample(_MATRIX, operand(2, 2)), sample(operand(3), operand()),
                           sample(operand(0, 3), _TRANSPOSED), sample(operand(2, 2, dtype="int64"), operand(1, 2))),
                          _block_diag_reference),
    "kron": Samples((sample(_MATRIX, operand(2, 2)), sample(operand(3), operand(2)), sample(_TRANSPOSED, operand(1, 2, 2)),
                     sample(operand(0, 3), _MATRIX), sample(_INTS, operand(2, dtype="int64"))), np.kron),
    "tensordot": Samples((sample(operand(2, 3, 4), operand(3, 4, 2)), sample(_TRANSPOSED, operand(2, 3), 1),
                          sample(_MATRIX, operand(3, 2), ([1], [0])), sample(operand(0, 3), operand(3), ([1], [0]))),
                         lambda a, b, dims=2, out=None: np.tensordot(a, b, dims)),
    "cross": Samples((sample(operand(2, 3), operand(2, 3)), sample(operand(3, 2, layout="transposed"), operand(3, 2), 0),
                      sample(operand(0, 3), operand(1, 3)), sample(operand(2, 3, dtype="int64"), operand(1, 3, dtype="int64"))),
                     lambda a, b, dim=None, **ignored: np.cross(a, b, axis=-1 if dim is None and a.shape[-1] == 3
                                                                else (0 if dim is None else dim))),
    "linalg.cross": Samples((sample(operand(2, 3), operand(2, 3)), sample(operand(3, 2, layout="transposed"), operand(3, 2), dim=0),
                             sample(operand(0, 3), operand(1, 3)),
                             sample(operand(2, 3, dtype="int64"), operand(1, 3, dtype="int64"))),
                            lambda a, b, dim=-1, **ignored: np.cross(a, b, axis=dim)),
    "diff": Samples((sample(_MATRIX), sample(_TRANSPOSED, 2, 0), sample(operand(4), 1, 0, operand(2), operand(1)),
                     sample(operand(0, 3)), sample(_INTS, 1, -1, None, operand(2, 1, dtype="int64"))), _diff_reference),
    "isin": Samples((sample(operand(2, 3, dtype="int64"), operand(4, dtype="int64")),
                     sample(operand(3, 2, dtype="int64", layout="transposed"), 2, invert=True),
                     sample(operand(0, 3), operand(3)), sample(operand(4, layout="sliced"), operand(2, 2), invert=False)),
                    lambda elements, test_elements, assume_unique=False, invert=False:
                    np.isin(elements, test_elements, invert=invert)),
    "diagonal_scatter": Samples((sample(operand(3, 3), operand(3)), sample(_TRANSPOSED, operand(2), -1),
                                 sample(operand(2, 3, 2), operand(3, 2), 0, 0, 2),
                                 sample(operand(0, 3), operand(0)), sample(_INTS, operand(2, dtype="int64"), 1)),
                                _diagonal_scatter_reference),
}
for _family in ("view", "shape", "creation", "matmul", "pointwise", "sorting"):
    family_samples(_family, by_name(_SAMPLES))
