"""Shape and data movement: flip, roll, repeat, tile, repeat_interleave, the triangles, diagonals,
padding, stacking, meshgrid and one_hot. Views where ATen returns views (``diagonal``, ``meshgrid``);
everything else is the copy kernel over a view, or one index-remapping kernel."""
from __future__ import annotations

import numpy as np

from .. import shape as S
from ..allocation import new_tensor
from ..dtypes import get_dtype
from ..kernels import indexing as K
from ..launch import cdiv, launch
from ..lowering import elementwise_block, needs_index_64, padded_for_kernel
from ..tensor import Tensor
from .copy import cat, copy_, fill_, stack
from .creation import tensor
from .gather_scatter import index_select, scatter_into
from .registry import Cost, TensorMeta, family_samples, get, nbytes, register
from .samples import Samples, by_name, operand, sample
from .views import expand, narrow, reshape, select, slice_, unsqueeze, view_as_complex, view_as_real, view_op

_I64 = get_dtype("int64")


def _copying_rules(meta) -> dict:
    """``register``'s rules of an op that reads ``x`` once and writes its result, whose meta rule (of bound
    arguments) is ``meta``."""
    def cost(a):
        return Cost(bytes_read=nbytes(a.x), bytes_written=_known_bytes(meta(a)))
    return {"meta": meta, "cost": cost, "bound": True}


# the rules of an op whose result has ``x``'s shape and dtype
_SAME_AS_X = _copying_rules(lambda a: TensorMeta(tuple(a.x.shape), a.x.dtype))


def _known_bytes(meta) -> int:
    """The bytes of ``meta``; 0 where a size is None (decided by values the rule does not see)."""
    return 0 if None in meta.shape else nbytes(meta)


def _dim_list(dims, ndim: int, op: str) -> list[int]:
    dims = [dims] if isinstance(dims, int) else list(dims)
    wrapped = [S.wrap_dim(d, max(ndim, 1)) for d in dims]
    if len(set(wrapped)) != len(wrapped):
        raise RuntimeError(f"{op}: dims {dims} has a repeated dim")
    return wrapped


def _remap(x: Tensor, flips: list[int], shifts: dict) -> Tensor:
    """A contiguous copy of ``x`` with ``flips`` reversed and dims rolled by ``shifts``."""
    out = new_tensor(x.shape, x.dtype, x.device)
    n = x.numel()
    if n == 0:
        return out
    if x.dtype.is_complex:
        return view_as_complex(_remap(view_as_real(x), flips, shifts))
    shape = padded_for_kernel(x.shape)
    strides = padded_for_kernel(x.stride(), 0)
    flip_bits = sum(1 << d for d in flips)
    shift_values = padded_for_kernel([shifts.get(d, 0) % x.shape[d] if x.shape[d] else 0 for d in range(x.ndim)], 0)
    block = elementwise_block(x.device)
    launch(K.remap_copy, (cdiv(n, block),), x.device, [out, x, n, shape, strides, shift_values],
           FLIPS=flip_bits, RANK=len(shape), INDEX_64=needs_index_64(x, count=n), BLOCK=block)
    return out


@register("flip", family="shape", aten=["aten::flip.default"], methods=("flip",), **_SAME_AS_X)
def flip(x: Tensor, dims) -> Tensor:
    """A copy with the order of ``dims`` reversed."""
    return _remap(x, _dim_list(dims, x.ndim, "flip") if x.ndim else [], {})


@register("fliplr", family="shape", aten=["aten::fliplr.default"], methods=("fliplr",), **_SAME_AS_X)
def fliplr(x: Tensor) -> Tensor:
    if x.ndim < 2:
        raise RuntimeError("fliplr needs a tensor of at least 2 dimensions")
    return flip.impl(x, [1])


@register("flipud", family="shape", aten=["aten::flipud.default"], methods=("flipud",), **_SAME_AS_X)
def flipud(x: Tensor) -> Tensor:
    if x.ndim < 1:
        raise RuntimeError("flipud needs a tensor of at least 1 dimension")
    return flip.impl(x, [0])


@register("roll", family="shape", aten=["aten::roll.default"], methods=("roll",), **_SAME_AS_X)
def roll(x: Tensor, shifts, dims=None) -> Tensor:
    """Elements moved ``shifts`` places along ``dims`` cyclically (the flattened tensor without dims)."""
    shifts = [shifts] if isinstance(shifts, int) else [int(s) for s in shifts]
    if dims is None:
        if len(shifts) != 1:
            raise RuntimeError(f"roll: without dims, shifts must be one value, got {shifts}")
        return reshape(_remap(reshape(x, (-1,)), [], {0: shifts[0]}), tuple(x.shape))
    dims = [dims] if isinstance(dims, int) else list(dims)
    if len(shifts) != len(dims):
        raise RuntimeError(f"roll: shifts ({len(shifts)}) and dims ({len(dims)}) must have the same length")
    total: dict = {}
    for s, d in zip(shifts, dims):
        d = S.wrap_dim(d, x.ndim)
        total[d] = total.get(d, 0) + s
    return _remap(x, [], total)


def _repeat_result(x, sizes) -> TensorMeta:
    reps = [int(r) for r in (sizes[0] if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else sizes)]
    if len(reps) < len(x.shape):
        raise RuntimeError(f"repeat: number of repeat dims ({len(reps)}) can not be smaller than number of dims "
                           f"of the tensor ({len(x.shape)})")
    shape = (1,) * (len(reps) - len(x.shape)) + tuple(x.shape)
    return TensorMeta(tuple(n * r for n, r in zip(shape, reps)), x.dtype)


@register("repeat", family="shape", aten=["aten::repeat.default"], api=(), methods=("repeat",),
          **_copying_rules(lambda a: _repeat_result(a.x, a.sizes)))
def repeat(x: Tensor, *sizes) -> Tensor:
    """``x`` tiled ``sizes[d]`` times along each dim: one copy from a broadcast view."""
    meta = _repeat_result(x, sizes)
    reps = [int(r) for r in (sizes[0] if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else sizes)]
    if any(r < 0 for r in reps):
        raise RuntimeError(f"repeat: repeats must be non-negative, got {reps}")
    base = reshape(x, (1,) * (len(reps) - x.ndim) + tuple(x.shape))
    out = new_tensor(meta.shape, x.dtype, x.device)
    if out.numel() == 0:
        return out
    # out seen as (r0, n0, r1, n1, ...) takes base seen as (1, n0, 1, n1, ...) broadcast
    pairs = [v for r, n in zip(reps, base.shape) for v in (r, n)]
    source_shape = [v for n in base.shape for v in (1, n)]
    copy_(reshape(out, pairs), expand(reshape(base, source_shape), pairs))
    return out


@register("tile", family="shape", aten=["aten::tile.default"], methods=("tile",), **_copying_rules(
    lambda a: _repeat_result(a.x, (1,) * (len(a.x.shape) - len(a.dims)) + tuple(a.dims))))
def tile(x: Tensor, dims) -> Tensor:
    dims = tuple(int(d) for d in dims)
    return repeat.impl(x, (1,) * (x.ndim - len(dims)) + dims)


def _repeat_interleave_meta(a):
    """The result's shape, its repeated dim None where the counts decide it (a tensor of them, no
    ``output_size``)."""
    x, repeats, dim, output_size = a.x, a.repeats, a.dim, a.output_size
    shape = (S.numel(x.shape),) if dim is None else tuple(x.shape) or (1,)
    d = 0 if dim is None else S.wrap_dim(dim, len(shape))
    if isinstance(repeats, int):
        repeated = shape[d] * repeats
    elif output_size is not None:
        repeated = output_size
    else:
        repeated = None
    return TensorMeta(shape[:d] + (repeated,) + shape[d + 1:], x.dtype)


@register("repeat_interleave", family="shape", aten=["aten::repeat_interleave.self_int",
                                                      "aten::repeat_interleave.self_Tensor",
                                                      "aten::repeat_interleave.Tensor"],
          methods=("repeat_interleave",), **_copying_rules(_repeat_interleave_meta))
def repeat_interleave(x: Tensor, repeats=None, dim: int | None = None, *, output_size: int | None = None) -> Tensor:
    """Each element (or slice along ``dim``) repeated ``repeats`` times in place; ``repeats`` an int
    or a tensor with one count per element. Alone, a tensor of counts gives the repeated positions.
    Per-element counts are summed on the device; their total (the output size, unless ``output_size``
    gives it) and their least are read back, as ATen reads them."""
    if repeats is None:
        return _repeated_positions(x, output_size)
    if dim is None:
        x = reshape(x, (-1,))
        dim = 0
    d = S.wrap_dim(dim, max(x.ndim, 1))
    if x.ndim == 0:
        x = reshape(x, (1,))
    if isinstance(repeats, Tensor) and repeats.numel() == 1 and repeats.ndim <= 1:
        repeats = int(repeats.item())
    if isinstance(repeats, int):
        if repeats < 0:
            raise RuntimeError(f"repeat_interleave: repeats must be non-negative, got {repeats}")
        shape = list(x.shape)
        spread = (*shape[:d + 1], repeats, *shape[d + 1:])
        out = new_tensor((*shape[:d], shape[d] * repeats, *shape[d + 1:]), x.dtype, x.device)
        if out.numel():
            copy_(reshape(out, spread), expand(unsqueeze(x, d + 1), spread))
        return out
    counts = repeats if isinstance(repeats, Tensor) else tensor(np.asarray(repeats, dtype=np.int64), device=x.device)
    if counts.numel() != x.shape[d]:
        raise RuntimeError(f"repeat_interleave: repeats must have {x.shape[d]} entries (the size of dim {d}), "
                           f"got {counts.numel()}")
    return index_select.impl(x, d, _repeated_positions(counts, output_size))


def _repeated_positions(counts: Tensor, output_size: int | None) -> Tensor:
    """Position i repeated counts[i] times (int64, on the counts' device): output position j falls where j
    sorts among the counts' running totals."""
    if counts.ndim > 1 or counts.dtype.name not in ("int32", "int64"):
        raise RuntimeError(f"repeat_interleave: repeats must be a 0-d or 1-d int32 or int64 tensor, got a "
                           f"{counts.ndim}-d {counts.dtype.name} one")
    counts = reshape(counts, (-1,))
    if counts.numel() and get("amin").impl(counts).item() < 0:
        raise RuntimeError("repeat_interleave: repeats must be non-negative")
    ends = get("cumsum").impl(counts, 0, dtype=get_dtype("int64"))
    total = output_size if output_size is not None else (int(ends[-1].item()) if counts.numel() else 0)
    outputs = get("arange").impl(total, dtype=get_dtype("int64"), device=counts.device)
    return get("searchsorted").impl(ends, outputs, right=True)


def _triangle(x: Tensor, diagonal: int, upper: bool) -> Tensor:
    if x.ndim < 2:
        raise RuntimeError(f"{'triu' if upper else 'tril'}: input tensor must have at least 2 dimensions")
    out = new_tensor(x.shape, x.dtype, x.device)
    n = x.numel()
    if n == 0:
        return out
    if x.dtype.is_complex:
        pairs = view_as_real(x)
        # the (re, im) pairs become the rows of a 2-column matrix: keep both or neither
        flat = _triangle_pairs(pairs, diagonal, upper)
        return view_as_complex(flat)
    rows, cols = x.shape[-2], x.shape[-1]
    batch = padded_for_kernel(x.shape[:-2])
    batch_strides = padded_for_kernel(x.stride()[:-2], 0)
    block = elementwise_block(x.device)
    launch(K.triangle, (cdiv(n, block),), x.device,
           [out, x, n, rows, cols, diagonal, batch, batch_strides, x.stride(-2), x.stride(-1)],
           BATCH_RANK=len(batch), UPPER=upper, INDEX_64=needs_index_64(x, count=n), BLOCK=block)
    return out


def _triangle_pairs(pairs: Tensor, diagonal: int, upper: bool) -> Tensor:
    real = _triangle(select(pairs, -1, 0), diagonal, upper)
    imag = _triangle(select(pairs, -1, 1), diagonal, upper)
    return stack([real, imag], -1)


@register("tril", family="shape", aten=["aten::tril.default"], methods=("tril",), **_SAME_AS_X)
def tril(x: Tensor, diagonal: int = 0) -> Tensor:
    """The lower triangle of the last two dims (on and below ``diagonal``), zeros above."""
    return _triangle(x, int(diagonal), False)


@register("triu", family="shape", aten=["aten::triu.default"], methods=("triu",), **_SAME_AS_X)
def triu(x: Tensor, diagonal: int = 0) -> Tensor:
    """The upper triangle of the last two dims (on and above ``diagonal``), zeros below."""
    return _triangle(x, int(diagonal), True)


@view_op("diagonal", ["aten::diagonal.default"], methods=("diagonal",))
def diagonal(x: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """A view of the diagonal of dims ``dim1`` and ``dim2`` (offset above when positive), as the
    last dim."""
    a, b = S.wrap_dim(dim1, x.ndim), S.wrap_dim(dim2, x.ndim)
    if a == b:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    offset = int(offset)
    if offset >= 0:
        length = max(0, min(x.shape[a], x.shape[b] - offset))
        start = offset * x.stride(b) if length else 0
    else:
        length = max(0, min(x.shape[a] + offset, x.shape[b]))
        start = -offset * x.stride(a) if length else 0
    keep = [d for d in range(x.ndim) if d not in (a, b)]
    shape = [x.shape[d] for d in keep] + [length]
    strides = [x.stride(d) for d in keep] + [x.stride(a) + x.stride(b)]
    return x._view(shape, strides, offset=x.storage_offset() + start)


def _diag_result(x, diagonal) -> TensorMeta:
    if len(x.shape) == 1:
        n = x.shape[0] + abs(diagonal)
        return TensorMeta((n, n), x.dtype)
    if len(x.shape) != 2:
        raise RuntimeError(f"diag: expected a 1-D or 2-D tensor, got {len(x.shape)}-D")
    rows, cols = x.shape
    length = max(0, min(rows, cols - diagonal) if diagonal >= 0 else min(rows + diagonal, cols))
    return TensorMeta((length,), x.dtype)


@register("diag", family="shape", aten=["aten::diag.default"], methods=("diag",),
          **_copying_rules(lambda a: _diag_result(a.x, a.diagonal)))
def diag(x: Tensor, diagonal: int = 0) -> Tensor:
    """A 1-D tensor as the ``diagonal`` of a square matrix, or a copy of a matrix's diagonal."""
    meta = _diag_result(x, diagonal)
    if x.ndim == 2:
        return diagonal_copy(x, diagonal)
    out = fill_(new_tensor(meta.shape, x.dtype, x.device), 0)
    copy_(_diagonal_view.impl(out, diagonal), x)
    return out


_diagonal_view = diagonal  # diag's argument takes the name


def diagonal_copy(x: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    view = diagonal.impl(x, offset, dim1, dim2)
    return copy_(new_tensor(view.shape, x.dtype, x.device), view)


def _diag_embed_result(x, offset, dim1, dim2) -> TensorMeta:
    ndim = len(x.shape) + 1
    a, b = S.wrap_dim(dim1, ndim), S.wrap_dim(dim2, ndim)
    if a == b:
        raise RuntimeError(f"diag_embed: diagonal dimensions cannot be identical {dim1}, {dim2}")
    n = x.shape[-1] + abs(offset)
    rest = iter(x.shape[:-1])
    return TensorMeta(tuple(n if d in (a, b) else next(rest) for d in range(ndim)), x.dtype)


@register("diag_embed", family="shape", aten=["aten::diag_embed.default"], methods=("diag_embed",),
          **_copying_rules(lambda a: _diag_embed_result(a.x, a.offset, a.dim1, a.dim2)))
def diag_embed(x: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """Matrices (in dims ``dim1``, ``dim2`` of the result) with the last dim of ``x`` on their
    ``offset`` diagonal, zeros elsewhere."""
    meta = _diag_embed_result(x, offset, dim1, dim2)
    out = fill_(new_tensor(meta.shape, x.dtype, x.device), 0)
    copy_(diagonal.impl(out, offset, dim1, dim2), x)
    return out


# ---- padding -------------------------------------------------------------------------------------

def _pad_result(x, pad) -> TensorMeta:
    pad = list(pad)
    if len(pad) % 2 or len(pad) // 2 > len(x.shape):
        raise RuntimeError(f"pad: padding length must be even and at most twice the number of dims, got {len(pad)} "
                           f"for {len(x.shape)} dims")
    shape = list(x.shape)
    for i in range(len(pad) // 2):
        d = len(shape) - 1 - i
        shape[d] += pad[2 * i] + pad[2 * i + 1]
        if shape[d] < 0:
            raise RuntimeError(f"pad: the padded size of dim {d} would be negative ({shape[d]})")
    return TensorMeta(tuple(shape), x.dtype)


@register("pad", family="shape", functional=True, aten=["aten::pad.default"], api=(),
          **_copying_rules(lambda a: _pad_result(a.x, a.pad)))
def pad(x: Tensor, pad, mode: str = "constant", value=None) -> Tensor:
    """``torch.nn.functional.pad``: ``pad`` lists (before, after) amounts from the last dim back.
    'constant' fills with ``value`` (negative amounts crop); 'reflect', 'replicate' and 'circular'
    read the border of ``x``, one gather per padded dim."""
    meta = _pad_result(x, pad)
    amounts = [(len(x.shape) - 1 - i, int(pad[2 * i]), int(pad[2 * i + 1])) for i in range(len(pad) // 2)]
    if mode == "constant":
        out = fill_(new_tensor(meta.shape, x.dtype, x.device), 0 if value is None else value)
        source, target = x, out
        for d, before, after in amounts:
            keep_from, keep_len = max(0, -before), x.shape[d] - max(0, -before) - max(0, -after)
            if keep_len <= 0:
                return out
            source = narrow(source, d, keep_from, keep_len)
            target = narrow(target, d, max(0, before), keep_len)
        copy_(target, source)
        return out
    if mode not in ("reflect", "replicate", "circular"):
        raise NotImplementedError(f"pad: mode {mode!r} is not supported; use constant, reflect, replicate or circular")
    if value is not None and value != 0:
        raise RuntimeError(f"pad: a value only applies to constant padding, not {mode!r}")
    out = x
    for d, before, after in amounts:
        n = x.shape[d]
        positions = np.arange(-before, n + after)
        if mode == "reflect":
            if before >= n or after >= n:
                raise RuntimeError(f"pad: reflect padding ({before}, {after}) must be smaller than the size {n} of dim {d}")
            period = 2 * (n - 1) if n > 1 else 1
            positions = np.abs(positions) % period
            positions = np.where(positions >= n, period - positions, positions)
        elif mode == "replicate":
            if n == 0:
                raise RuntimeError(f"pad: cannot replicate-pad the empty dim {d}")
            positions = np.clip(positions, 0, n - 1)
        else:
            # as torch: negative amounts crop first, and the padding wraps around what is left
            crop_before = max(0, -before)
            kept = n - crop_before - max(0, -after)
            if before > kept or after > kept:
                raise RuntimeError(f"pad: circular padding ({before}, {after}) can be at most the size {kept} of dim "
                                   f"{d} after cropping")
            positions = crop_before + np.arange(-max(0, before), kept + max(0, after)) % max(kept, 1)
        out = index_select.impl(out, d, tensor(positions.astype(np.int64), device=x.device))
    return out


# ---- scatters into views -------------------------------------------------------------------------

def _view_scatter_result(x, src, view, *view_args):
    target = view(Tensor._meta(tuple(x.shape), x.dtype), *view_args)
    if tuple(src.shape) != tuple(target.shape):
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = {list(src.shape)}, "
                           f"slice size = {list(target.shape)}")
    return TensorMeta(tuple(x.shape), x.dtype)


def _view_scatter_cost(a):
    return Cost(bytes_read=nbytes(a.x) + nbytes(a.src), bytes_written=nbytes(a.x) + nbytes(a.src))


def _scattered_into_view(x, src, view, *view_args) -> Tensor:
    """A copy of ``x`` with ``src`` written over ``view(copy, *view_args)``: the functional form of a write
    into a view, as torch.export writes padding and in-place updates."""
    _view_scatter_result(x, src, view, *view_args)
    out = new_tensor(x.shape, x.dtype, x.device)
    copy_(out, x)
    copy_(view(out, *view_args), src)
    return out


@register("slice_scatter", family="copy", aten=["aten::slice_scatter.default"],
          meta=lambda a: _view_scatter_result(a.x, a.src, slice_, a.dim, a.start, a.end, a.step),
          cost=_view_scatter_cost, bound=True, methods=("slice_scatter",))
def slice_scatter(x: Tensor, src: Tensor, dim: int = 0, start=None, end=None, step: int = 1) -> Tensor:
    """``torch.slice_scatter``: a copy of ``x`` whose slice view holds ``src``."""
    return _scattered_into_view(x, src, slice_, dim, start, end, step)


@register("select_scatter", family="copy", aten=["aten::select_scatter.default"],
          meta=lambda a: _view_scatter_result(a.x, a.src, select, a.dim, a.index),
          cost=_view_scatter_cost, bound=True, methods=("select_scatter",))
def select_scatter(x: Tensor, src: Tensor, dim: int, index: int) -> Tensor:
    """``torch.select_scatter``: a copy of ``x`` whose select view holds ``src``."""
    return _scattered_into_view(x, src, select, dim, index)


# ---- stacking and grids --------------------------------------------------------------------------

def _atleast(t: Tensor, ndim: int) -> Tensor:
    if t.ndim >= ndim:
        return t
    if ndim == 1:
        return reshape(t, (1,))
    return reshape(t, (1, -1) if t.ndim <= 1 else tuple(t.shape))


def _atleast_shape(shape: tuple, ndim: int) -> tuple:
    if len(shape) >= ndim:
        return shape
    return (1,) * (ndim - max(len(shape), 1)) + (tuple(shape) or (1,))


def _stack_rules(ndim: int) -> dict:
    """hstack's (``ndim`` 1) or vstack's (2) rules: cat's of the tensors made at least ``ndim``-D."""
    def meta(a):
        shapes = [_atleast_shape(tuple(t.shape), ndim) for t in a.tensors]
        dim = 0 if ndim == 2 or len(shapes[0]) == 1 else 1
        return cat.meta([TensorMeta(shape, t.dtype) for shape, t in zip(shapes, a.tensors)], dim)

    def cost(a):
        return Cost(bytes_read=sum(nbytes(t) for t in a.tensors), bytes_written=nbytes(meta(a)))
    return {"meta": meta, "cost": cost, "bound": True}


@register("hstack", family="shape", aten=["aten::hstack.default"], **_stack_rules(1))
def hstack(tensors) -> Tensor:
    """``cat`` along dim 1, or dim 0 for 1-D tensors (0-d tensors count as 1-D)."""
    tensors = [_atleast(t, 1) for t in tensors]
    return cat.impl(tensors, 0 if tensors[0].ndim == 1 else 1)


@register("vstack", family="shape", aten=["aten::vstack.default"], api=("vstack", "row_stack"), **_stack_rules(2))
def vstack(tensors) -> Tensor:
    """``cat`` along dim 0 of the tensors made at least 2-D (1-D ones as rows)."""
    return cat.impl([_atleast(t, 2) for t in tensors], 0)


@register("meshgrid", family="shape", aten=["aten::meshgrid.default", "aten::meshgrid.indexing"],
          meta=lambda a: tuple(TensorMeta(tuple(_grid_shape(a.tensors, a.indexing)), x.dtype)
                               for x in (a.tensors[0] if len(a.tensors) == 1 and isinstance(a.tensors[0], (list, tuple))
                                         else a.tensors)),
          cost=lambda a: Cost(), bound=True)
def meshgrid(*tensors, indexing: str = "ij"):
    """Coordinate grids (broadcast views, no copy) from 1-D tensors; 'xy' swaps the first two
    output dims as NumPy does."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    for t in tensors:
        if t.ndim > 1:
            raise RuntimeError(f"meshgrid expects 0-D or 1-D tensors, got a {t.ndim}-D one")
    shape = _grid_shape(tensors, indexing)
    swap = indexing == "xy" and len(tensors) >= 2
    out = []
    for i, t in enumerate(tensors):
        axis = (1 - i if i < 2 else i) if swap else i
        view_shape = [1] * len(tensors)
        view_shape[axis] = -1
        out.append(expand(reshape(t, view_shape), shape))
    return tuple(out)


def _grid_shape(tensors, indexing):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    shape = [S.numel(t.shape) for t in tensors]
    if indexing == "xy" and len(shape) >= 2:
        shape[0], shape[1] = shape[1], shape[0]
    return shape


@register("one_hot", family="shape", functional=True, aten=["aten::one_hot.default"],
          api=(), **_copying_rules(
              lambda a: TensorMeta((*a.x.shape, None if a.num_classes < 0 else a.num_classes), _I64)))
def one_hot(x: Tensor, num_classes: int = -1) -> Tensor:
    """``torch.nn.functional.one_hot``: int64 rows with a 1 at each class index. Without
    ``num_classes`` the largest index is read on the host to size the result."""
    if x.dtype is not _I64:
        raise RuntimeError(f"one_hot is only applicable to index tensors (int64), got {x.dtype.name}")
    if num_classes < 0:
        if x.numel() == 0:
            raise RuntimeError("one_hot: cannot infer the number of classes from an empty tensor")
        values = x.numpy()
        if values.min() < 0:
            raise RuntimeError("one_hot: class values must be non-negative")
        num_classes = int(values.max()) + 1
    out = fill_(new_tensor((*x.shape, num_classes), _I64, x.device), 0)
    if x.numel():
        scatter_into(out, -1, unsqueeze(x, -1), 1, "one_hot")
    return out



# ---- samples ---------------------------------------------------------------------------------------

def _scattered(x, src, index):
    result = x.copy()
    result[index] = src
    return result


def _slice_scatter_reference(x, src, dim=0, start=None, end=None, step=1):
    index = [slice(None)] * x.ndim
    index[dim] = slice(start, end, step)
    return _scattered(x, src, tuple(index))


def _select_scatter_reference(x, src, dim, index):
    where = [slice(None)] * x.ndim
    where[dim] = index
    return _scattered(x, src, tuple(where))


def _pad_reference(x, pad, mode="constant", value=None):
    """NumPy's pad of ``pad``'s (before, after) pairs from the last dim back; negative amounts crop."""
    pairs = [(0, 0)] * (x.ndim - len(pad) // 2) + [(pad[2 * i], pad[2 * i + 1]) for i in range(len(pad) // 2)][::-1]
    cropped = x[tuple(slice(max(-before, 0), x.shape[d] - max(-after, 0)) for d, (before, after) in enumerate(pairs))]
    grown = [(max(before, 0), max(after, 0)) for before, after in pairs]
    if mode == "constant":
        return np.pad(cropped, grown, constant_values=0 if value is None else value)
    return np.pad(cropped, grown, {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode])


def _diag_embed_reference(x, offset=0, dim1=-2, dim2=-1):
    n = x.shape[-1] + abs(offset)
    result = np.zeros(x.shape[:-1] + (n, n), x.dtype)
    rows = np.arange(x.shape[-1]) + max(-offset, 0)
    result[..., rows, rows + offset] = x
    return np.moveaxis(result, (-2, -1), (dim1 % (x.ndim + 1), dim2 % (x.ndim + 1)))


_MATRIX, _TRANSPOSED, _INTS = operand(2, 3), operand(3, 2, layout="transposed"), operand(2, 4, dtype="int64", layout="sliced")
_SAMPLES = {
    "flip": Samples((sample(_MATRIX, (0,)), sample(_TRANSPOSED, (0, 1)), sample(operand(), ()), sample(operand(0, 3), (1,)),
                     sample(_INTS, (-1,))), np.flip),
    "fliplr": Samples((sample(_MATRIX), sample(_TRANSPOSED), sample(operand(0, 3)), sample(_INTS)), np.fliplr),
    "flipud": Samples((sample(_MATRIX), sample(_TRANSPOSED), sample(operand(0, 3)), sample(_INTS)), np.flipud),
    "roll": Samples((sample(_MATRIX, 1, 1), sample(_TRANSPOSED, (1, -1), (0, 1)), sample(_MATRIX, 2),
                     sample(operand(0, 3), 1, 1), sample(_INTS, -5, 1)),
                    lambda x, shifts, dims=None: np.roll(x, shifts, dims)),
    "repeat": Samples((sample(_MATRIX, 2, 1), sample(_TRANSPOSED, 1, 2, 1), sample(operand(), 2),
                       sample(operand(0, 3), 1, 2), sample(_INTS, (2, 1))),
                      lambda x, *sizes: np.tile(x, sizes[0] if len(sizes) == 1 and isinstance(sizes[0], (tuple, list))
                                                else sizes)),
    "tile": Samples((sample(_MATRIX, (2,)), sample(_TRANSPOSED, (2, 1, 2)), sample(operand(), (3,)),
                     sample(operand(0, 3), (1, 2)), sample(_INTS, (2, 1))), np.tile),
    "repeat_interleave": Samples((sample(_MATRIX, 2), sample(_TRANSPOSED, 2, 0),
                                  sample(_MATRIX, operand(3, dtype="int64", values="index", domain=(0, 3)), 1),
                                  sample(operand(0, 3), 2, 1), sample(_INTS, 3, -1)),
                                 lambda x, repeats=None, dim=None, **ignored: np.repeat(x, repeats, axis=dim)),
    "tril": Samples((sample(_MATRIX), sample(_TRANSPOSED, 1), sample(operand(2, 3, 2), -1), sample(operand(0, 3)),
                     sample(_INTS, 2)), np.tril),
    "triu": Samples((sample(_MATRIX), sample(_TRANSPOSED, 1), sample(operand(2, 3, 2), -1), sample(operand(0, 3)),
                     sample(_INTS, 2)), np.triu),
    "diagonal": Samples((sample(_MATRIX), sample(_TRANSPOSED, 1), sample(operand(2, 3, 2), -1, 0, 2),
                         sample(operand(0, 3)), sample(_INTS, 0, -1, 0)), np.diagonal),
    "diag": Samples((sample(_MATRIX), sample(operand(3)), sample(_TRANSPOSED, -1), sample(operand(0)),
                     sample(operand(4, dtype="int64", layout="sliced"), 1)), np.diag),
    "diag_embed": Samples((sample(_MATRIX), sample(_TRANSPOSED, 1), sample(operand(3), -1, 0, 1), sample(operand(0, 3)),
                           sample(_INTS)), _diag_embed_reference),
    "pad": Samples((sample(_MATRIX, (1, 2)), sample(_TRANSPOSED, (1, 0, 0, 2), value=1.5),
                    sample(operand(1, 2, 3), (2, 1), "reflect"), sample(operand(1, 2, 3), (1, 2, 1, 0), "replicate"),
                    sample(operand(1, 2, 3), (3, 1), "circular"), sample(_MATRIX, (-1, 1))), _pad_reference),
    "slice_scatter": Samples((sample(operand(4, 3), operand(2, 3), 0, 0, 4, 2), sample(_TRANSPOSED, operand(3, 1), 1, 1),
                              sample(operand(0, 3), operand(0, 1), 1, 2),
                              sample(_INTS, operand(2, 2, dtype="int64", layout="transposed"), 1, 1, None, 2)),
                             _slice_scatter_reference),
    "select_scatter": Samples((sample(_MATRIX, operand(3), 0, 1), sample(_TRANSPOSED, operand(3), 1, -1),
                               sample(operand(0, 3), operand(0), 1, 2), sample(_INTS, operand(2, dtype="int64"), 1, 3)),
                              _select_scatter_reference),
    "hstack": Samples((sample([_MATRIX, operand(2, 1)]), sample([operand(3), operand(2)]),
                       sample([operand(0, 3), operand(0, 2, dtype="int64")]), sample([operand(), operand()])),
                      np.hstack),
    "vstack": Samples((sample([_MATRIX, operand(3)]), sample([_TRANSPOSED, operand(2, 2)]), sample([operand(0, 3), _MATRIX]),
                       sample([_INTS, operand(4, dtype="int32")])), np.vstack),
    "meshgrid": Samples((sample(operand(2), operand(3)), sample(operand(2), operand(3), indexing="xy"),
                         sample([operand(0), operand(2, dtype="int64"), operand(1)])),
                        lambda *xs, indexing="ij": tuple(np.meshgrid(*(xs[0] if len(xs) == 1 else xs), indexing=indexing))),
    "one_hot": Samples((sample(operand(2, 3, dtype="int64", values="index", domain=(0, 4))),
                        sample(operand(3, dtype="int64", values="index", domain=(0, 2)), 5),
                        sample(operand(dtype="int64", values="index", domain=(0, 3)), 3),
                        sample(operand(0, 2, dtype="int64", values="index", domain=(0, 3)), 3)),
                       lambda x, num_classes=-1: np.eye(num_classes if num_classes > 0 else int(x.max()) + 1,
                                                        dtype=np.int64)[x]),
}
for _family in ("shape", "view", "copy"):
    family_samples(_family, by_name(_SAMPLES))
