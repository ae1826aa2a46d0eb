"""View ops: new metadata over the same storage, never a copy (``reshape`` and ``flatten`` copy only
when ATen would). Their meta rules run the same code on a tensor that has no memory."""
from __future__ import annotations

import functools
import math

import numpy as np

from .. import shape as S
from ..dtypes import get_dtype
from ..tensor import Tensor
from .aten_calls import drop_keywords
from .registry import MAYBE_VIEW, VIEW, Cost, TensorMeta, accepting_aliases, family_samples, register, tensor_attribute
from .samples import Samples, by_name, operand, sample

NO_COST = Cost()


def _as_meta(x) -> Tensor:
    if isinstance(x, Tensor):
        return Tensor._meta(x.shape, x.dtype, x.stride())
    return Tensor._meta(x.shape, x.dtype)


def meta_of(out):
    if isinstance(out, Tensor):
        return TensorMeta(tuple(out.shape), out.dtype)
    return tuple(meta_of(o) for o in out)


def view_op(name: str, aten, methods=(), api=None, aliases=VIEW, adapters=None):
    """Register a view op (``aliases``: ``MAYBE_VIEW`` for one that copies where no view can be made);
    its meta rule is the op itself applied to a memoryless tensor."""
    def wrap(impl):
        def meta(x, *args, **kwargs):
            return meta_of(impl(_as_meta(x), *args, **kwargs))
        return register(name, family="view", aten=aten, meta=meta, cost=lambda *a, **k: NO_COST,
                        methods=methods, api=api, aliases=aliases, adapters=adapters)(impl)
    return wrap


def _dims(args, what: str = "dims") -> tuple:
    """``f(2, 3)`` and ``f((2, 3))`` alike; ``f()`` is a missing argument, as in torch (``f(())`` is not)."""
    if not args:
        raise TypeError(f'missing 1 required positional argument: "{what}"')
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return tuple(args)


def _describe(x: Tensor) -> str:
    return f"shape {tuple(x.shape)} and strides {x.stride()}"


@view_op("view", ["aten::view.default", "aten::_unsafe_view.default"], methods=("view",), api=())
def view(x: Tensor, *shape) -> Tensor:
    """A view with a new shape, or a reinterpretation as another dtype (``view(dtype)``)."""
    if len(shape) == 1 and not isinstance(shape[0], (int, tuple, list)) and not hasattr(shape[0], "__index__"):
        return _view_dtype(x, get_dtype(shape[0]))
    if len(shape) == 1 and isinstance(shape[0], str):
        return _view_dtype(x, get_dtype(shape[0]))
    new_shape, strides = _view_layout(tuple(x._shape), x._strides, tuple([int(s) for s in _dims(shape, "size")]))
    if strides is None:
        raise RuntimeError(f"view size {new_shape} is not compatible with input tensor's size and stride "
                           f"({_describe(x)}): at least one dimension spans across two contiguous subspaces; "
                           "use .reshape(...) instead")
    return x._view(new_shape, strides)


@functools.lru_cache(maxsize=4096)
def _view_layout(shape: tuple, strides: tuple, requested: tuple) -> tuple:
    """(shape, strides or None) of ``view(requested)`` of a tensor laid out as (``shape``, ``strides``):
    kept, since a model views the same layouts call after call."""
    new_shape = S.infer_size(requested, math.prod(shape))
    return new_shape, S.view_strides(shape, strides, new_shape)


def _view_dtype(x: Tensor, dt) -> Tensor:
    if dt.itemsize == x.dtype.itemsize:
        return x._view(x.shape, x.stride(), dtype=dt)
    if x.ndim == 0:
        raise RuntimeError(f"cannot view a 0-d {x.dtype.name} tensor as {dt.name}: the element sizes differ")
    if x.stride(-1) != 1:
        raise RuntimeError(f"viewing {x.dtype.name} as {dt.name} needs a last dimension of stride 1, "
                           f"got {_describe(x)}")
    if dt.itemsize > x.dtype.itemsize:
        ratio = dt.itemsize // x.dtype.itemsize
        if x.shape[-1] % ratio or x.storage_offset() % ratio or any(s % ratio for s in x.stride()[:-1]):
            raise RuntimeError(f"cannot view {x.dtype.name} {_describe(x)} as {dt.name}: the last extent, "
                               f"the offset and the other strides must be multiples of {ratio}")
        return x._view((*x.shape[:-1], x.shape[-1] // ratio), (*(s // ratio for s in x.stride()[:-1]), 1),
                       offset=x.storage_offset() // ratio, dtype=dt)
    ratio = x.dtype.itemsize // dt.itemsize
    return x._view((*x.shape[:-1], x.shape[-1] * ratio), (*(s * ratio for s in x.stride()[:-1]), 1),
                   offset=x.storage_offset() * ratio, dtype=dt)


@view_op("reshape", ["aten::reshape.default"], methods=("reshape",), aliases=MAYBE_VIEW)
def reshape(x: Tensor, *shape) -> Tensor:
    new_shape = S.infer_size([int(s) for s in _dims(shape, "shape")], x.numel())
    strides = S.view_strides(x.shape, x.stride(), new_shape)
    if strides is not None:
        return x._view(new_shape, strides)
    return view(x.contiguous(), new_shape)


def view_as(x: Tensor, other) -> Tensor:
    return view(x, tuple(other.shape))


def reshape_as(x: Tensor, other) -> Tensor:
    return reshape(x, tuple(other.shape))


@view_op("flatten", ["aten::flatten.using_ints"], methods=("flatten",), aliases=MAYBE_VIEW)
def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    start, end = S.wrap_dim(start_dim, x.ndim), S.wrap_dim(end_dim, x.ndim)
    if start > end:
        raise S.ShapeError(f"flatten() has invalid args: start_dim {start_dim} cannot come after end_dim {end_dim}")
    if x.ndim == 0:
        return reshape(x, (1,))
    if start == end:
        return x
    new_shape = (*x.shape[:start], math.prod(x.shape[start:end + 1]), *x.shape[end + 1:])
    return reshape(x, new_shape)


@view_op("unflatten", ["aten::unflatten.int"], methods=("unflatten",), aliases=MAYBE_VIEW)
def unflatten(x: Tensor, dim: int, sizes) -> Tensor:
    if x.ndim == 0:
        raise RuntimeError("unflatten() cannot be applied to a 0-dim tensor")
    d = S.wrap_dim(dim, x.ndim)
    if not len(sizes):
        raise RuntimeError("unflatten: sizes must be non-empty")
    sizes = S.infer_size(list(sizes), x.shape[d])
    return view(x, (*x.shape[:d], *sizes, *x.shape[d + 1:]))


@view_op("permute", ["aten::permute.default"], methods=("permute",))
def permute(x: Tensor, *dims) -> Tensor:
    shape, strides = tuple(x._shape), x._strides
    ndim = len(shape)
    dims = [S.wrap_dim(d, ndim) for d in _dims(dims)]
    if sorted(dims) != list(range(ndim)):
        raise RuntimeError(f"permute(dims={_dims(dims)}): dims must be a permutation of 0..{ndim - 1} "
                           f"for a tensor of shape {shape}")
    return x._view([shape[d] for d in dims], [strides[d] for d in dims])


@view_op("transpose", ["aten::transpose.int"], methods=("transpose", "swapaxes", "swapdims"),
         api=("transpose", "swapaxes", "swapdims"))
def transpose(x: Tensor, dim0: int, dim1: int) -> Tensor:
    if x.ndim == 0:
        S.wrap_dim(dim0, 0), S.wrap_dim(dim1, 0)
        return x
    a, b = S.wrap_dim(dim0, x.ndim), S.wrap_dim(dim1, x.ndim)
    order = list(range(x.ndim))
    order[a], order[b] = order[b], order[a]
    return permute(x, order)


@view_op("t", ["aten::t.default"], methods=("t",))
def t(x: Tensor) -> Tensor:
    if x.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but got {x.ndim}; use transpose or mT")
    return x if x.ndim < 2 else transpose(x, 0, 1)


def _T(x: Tensor) -> Tensor:
    return permute(x, list(range(x.ndim - 1, -1, -1)))


def _mT(x: Tensor) -> Tensor:
    if x.ndim == 0:  # ATen lets a 0-d tensor through
        return x._view((), ())
    if x.ndim < 2:
        raise RuntimeError(f"mT needs a tensor of at least 2 dimensions, got {x.ndim}")
    return transpose(x, -2, -1)


@view_op("expand", ["aten::expand.default"], methods=("expand",),
         adapters={"aten::expand.default": drop_keywords("implicit")})
def expand(x: Tensor, *sizes) -> Tensor:
    sizes = [int(s) for s in _dims(sizes, "size")]
    if len(sizes) < x.ndim:
        raise RuntimeError(f"expand: the number of sizes provided ({len(sizes)}) must be at least the number "
                           f"of dimensions of the tensor ({x.ndim})")
    lead = len(sizes) - x.ndim
    target = []
    for i, s in enumerate(sizes):
        if s == -1:
            if i < lead:
                raise RuntimeError(f"expand: -1 is not allowed in a new leading dimension (position {i})")
            s = x.shape[i - lead]
        elif s < 0:
            raise RuntimeError(f"expand: invalid size {s} at position {i}")
        target.append(s)
    return x._view(target, S.broadcast_strides(x.shape, x.stride(), target))


def expand_as(x: Tensor, other) -> Tensor:
    return expand(x, tuple(other.shape))


@view_op("broadcast_to", ["aten::broadcast_to.default"], methods=("broadcast_to",))
def broadcast_to(x: Tensor, shape) -> Tensor:
    return expand(x, tuple(shape))


@view_op("squeeze", ["aten::squeeze.default", "aten::squeeze.dim", "aten::squeeze.dims"], methods=("squeeze",))
def squeeze(x: Tensor, dim=None) -> Tensor:
    if dim is None:
        keep = [i for i in range(x.ndim) if x.shape[i] != 1]
    else:
        dims = {S.wrap_dim(d, x.ndim) for d in ((dim,) if isinstance(dim, int) else dim)}
        keep = [i for i in range(x.ndim) if not (i in dims and x.shape[i] == 1)]
    return x._view([x.shape[i] for i in keep], [x.stride(i) for i in keep])


@view_op("unsqueeze", ["aten::unsqueeze.default"], methods=("unsqueeze",))
def unsqueeze(x: Tensor, dim: int) -> Tensor:
    d = S.wrap_dim(dim, x.ndim, allow_end=True)
    stride = x.stride(d) * x.shape[d] if d < x.ndim else 1
    return x._view((*x.shape[:d], 1, *x.shape[d:]), (*x.stride()[:d], stride, *x.stride()[d:]))


@view_op("select", ["aten::select.int"], methods=("select",))
def select(x: Tensor, dim: int, index: int) -> Tensor:
    if x.ndim == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor")
    d = S.wrap_dim(dim, x.ndim)
    size = x.shape[d]
    index = int(index)
    if not -size <= index < size:
        raise IndexError(f"index {index} is out of bounds for dimension {d} with size {size}")
    if index < 0:
        index += size
    return x._view((*x.shape[:d], *x.shape[d + 1:]), (*x.stride()[:d], *x.stride()[d + 1:]),
                   offset=x.storage_offset() + index * x.stride(d))


def _slice_geometry(size: int, start, stop, step):
    if step is None:
        step = 1
    step = int(step)
    if step <= 0:
        raise ValueError(f"slice step must be positive, got {step}; for a reversed copy use flip()")
    start, stop, _ = slice(None if start is None else int(start), None if stop is None else int(stop),
                           step).indices(size)
    length = max(0, -(-(stop - start) // step))
    return start, length, step


@view_op("slice", ["aten::slice.Tensor"], methods=(), api=())
def slice_(x: Tensor, dim: int = 0, start=None, end=None, step: int = 1) -> Tensor:
    d = S.wrap_dim(dim, x.ndim)
    begin, length, step = _slice_geometry(x.shape[d], start, end, step)
    shape = list(x.shape)
    strides = list(x.stride())
    shape[d] = length
    offset = x.storage_offset() + begin * strides[d]
    strides[d] *= step
    return x._view(shape, strides, offset=offset)


@view_op("narrow", ["aten::narrow.default"], methods=("narrow",))
def narrow(x: Tensor, dim: int, start: int, length: int) -> Tensor:
    if x.ndim == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor")
    d = S.wrap_dim(dim, x.ndim)
    size = x.shape[d]
    start = int(start)
    if not -size <= start <= size:
        raise IndexError(f"narrow: start {start} is out of range for dimension {d} of size {size}")
    if start < 0:
        start += size
    if length < 0 or start + length > size:
        raise RuntimeError(f"narrow: start ({start}) + length ({length}) exceeds dimension {d} of size {size}")
    return slice_(x, d, start, start + length)


@view_op("unfold", ["aten::unfold.default"], methods=("unfold",))
def unfold(x: Tensor, dimension: int, size: int, step: int) -> Tensor:
    d = S.wrap_dim(dimension, x.ndim)
    extent = x.shape[d] if x.ndim else 1
    stride = x.stride(d) if x.ndim else 1
    if size < 0 or size > extent:
        raise RuntimeError(f"unfold: size {size} exceeds the extent {extent} of dimension {d}")
    if step <= 0:
        raise RuntimeError(f"unfold: step must be positive, got {step}")
    count = (extent - size) // step + 1
    if x.ndim == 0:
        return x._view((size,), (1,))
    shape = (*x.shape[:d], count, *x.shape[d + 1:], size)
    strides = (*x.stride()[:d], stride * step, *x.stride()[d + 1:], stride)
    return x._view(shape, strides)


@view_op("as_strided", ["aten::as_strided.default"], methods=("as_strided",))
def as_strided(x: Tensor, size, stride, storage_offset: int | None = None) -> Tensor:
    """The one view built from geometry the caller chooses, so the one view op that checks it against
    the storage; every other view op derives its geometry from an in-bounds tensor and stays inside it
    (see ``Tensor._make``)."""
    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise RuntimeError(f"as_strided: size {size} and stride {stride} have different lengths")
    if any(s < 0 for s in stride):
        raise RuntimeError(f"as_strided: negative strides are not supported, got {stride}")
    offset = x.storage_offset() if storage_offset is None else int(storage_offset)
    S.check_view_in_storage(size, stride, offset, x.dtype.itemsize,
                            None if x._storage is None else x._storage.nbytes, "as_strided")
    return x._view(size, stride, offset=offset)


@view_op("movedim", ["aten::movedim.int", "aten::movedim.intlist"], methods=("movedim", "moveaxis"),
         api=("movedim", "moveaxis"))
def movedim(x: Tensor, source, destination) -> Tensor:
    src = [S.wrap_dim(d, x.ndim) for d in ((source,) if isinstance(source, int) else source)]
    dst = [S.wrap_dim(d, x.ndim) for d in ((destination,) if isinstance(destination, int) else destination)]
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: source {source} and destination {destination} differ in length")
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise RuntimeError(f"movedim: repeated dims in source {source} or destination {destination}")
    if x.ndim == 0:
        return x._view((), ())
    order = [None] * x.ndim
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(i for i in range(x.ndim) if i not in src)
    order = [next(rest) if o is None else o for o in order]
    return permute(x, order)


@view_op("split", ["aten::split.Tensor"], methods=("split",))
def split(x: Tensor, split_size_or_sections, dim: int = 0):
    if x.ndim == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    d = S.wrap_dim(dim, x.ndim)
    size = x.shape[d]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step < 0 or (step == 0 and size > 0):
            raise RuntimeError(f"split expects split_size to be positive (or 0 for an empty dimension), "
                               f"got {step} for dimension {d} of size {size}")
        sections = [min(step, size - i) for i in range(0, size, step)] if size else [0]
    else:
        sections = [int(s) for s in split_size_or_sections]
        if any(n < 0 for n in sections) or sum(sections) != size:
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {size} "
                               f"(input tensor's size at dimension {d}), but got split_sizes={sections}")
    out, start = [], 0
    for n in sections:
        out.append(narrow(x, d, start, n))
        start += n
    return tuple(out)


@view_op("chunk", ["aten::chunk.default"], methods=("chunk",))
def chunk(x: Tensor, chunks: int, dim: int = 0):
    if x.ndim == 0:
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    d = S.wrap_dim(dim, x.ndim)
    step = -(-x.shape[d] // chunks) if x.shape[d] else 0
    if step == 0:
        return tuple(narrow(x, d, 0, 0) for _ in range(chunks if x.shape[d] == 0 else 1))
    return split(x, step, d)


@view_op("unbind", ["aten::unbind.int"], methods=("unbind",))
def unbind(x: Tensor, dim: int = 0):
    if x.ndim == 0:
        raise IndexError("unbind() cannot be applied to a 0-dim tensor")
    d = S.wrap_dim(dim, x.ndim)
    return tuple(select(x, d, i) for i in range(x.shape[d]))


@view_op("view_as_real", ["aten::view_as_real.default"])
def view_as_real(x: Tensor) -> Tensor:
    if not x.dtype.is_complex:
        raise RuntimeError(f"view_as_real is only supported for complex tensors, got {x.dtype.name}")
    return x._view((*x.shape, 2), (*(s * 2 for s in x.stride()), 1), offset=x.storage_offset() * 2,
                   dtype=x.dtype.to_real())


@view_op("view_as_complex", ["aten::view_as_complex.default"])
def view_as_complex(x: Tensor) -> Tensor:
    if x.dtype.name == "float16":
        raise TypeError("view_as_complex: a float16 tensor views as complex32 (torch's chalf), a dtype nbxtensor does "
                        "not support; convert to float32 first (x.float()) to view it as complex64")
    if x.dtype.name not in ("float32", "float64"):
        raise RuntimeError(f"view_as_complex is only supported for float32 and float64 tensors, got {x.dtype.name}")
    if x.ndim == 0 or x.shape[-1] != 2 or x.stride(-1) != 1:
        raise RuntimeError(f"view_as_complex needs a last dimension of size 2 and stride 1, got {_describe(x)}")
    if x.storage_offset() % 2 or any(s % 2 for s in x.stride()[:-1]):
        raise RuntimeError(f"view_as_complex needs even strides and offset, got {_describe(x)} "
                           f"and offset {x.storage_offset()}")
    return x._view(x.shape[:-1], tuple(s // 2 for s in x.stride()[:-1]), offset=x.storage_offset() // 2,
                   dtype=x.dtype.to_complex())


@view_op("real", ["aten::real.default"])
def real(x: Tensor) -> Tensor:
    return select(view_as_real(x), -1, 0) if x.dtype.is_complex else x


@view_op("imag", ["aten::imag.default"])
def imag(x: Tensor) -> Tensor:
    if not x.dtype.is_complex:
        raise RuntimeError(f"imag is not implemented for tensors with non-complex dtypes ({x.dtype.name})")
    return select(view_as_real(x), -1, 1)


def is_integer_index(item) -> bool:
    """An int, a NumPy integer or a 0-d integer tensor: a select. Bools, bool and uint8 tensors are
    masks to ATen (advanced indexing), never integers."""
    if isinstance(item, Tensor):
        return item.ndim == 0 and item.dtype.kind == "int"
    if isinstance(item, (np.ndarray, np.generic)):  # arrays have __index__ too, which fails unless 0-d
        return item.ndim == 0 and item.dtype.kind in "iu"
    return not isinstance(item, bool) and hasattr(item, "__index__")


def advanced_item_in(index) -> bool:
    """Whether ``index`` (one item or a tuple of them) holds an integer or boolean tensor, list or array:
    advanced indexing (``ops.advanced_indexing``), which copies. An item that is no index raises."""
    for item in index if isinstance(index, tuple) else (index,):
        if item is None or item is Ellipsis or isinstance(item, slice) or is_integer_index(item):
            continue
        if isinstance(item, (float, str)) or (isinstance(item, Tensor) and item.dtype.kind not in ("int", "uint", "bool")):
            kind = f"{item.dtype.name} tensor" if isinstance(item, Tensor) else type(item).__name__
            raise IndexError(f"only integers, slices, None, ..., and integer or boolean tensors, lists or arrays "
                             f"are valid indices, got {kind}")
        return True
    return False


def basic_index(x: Tensor, index) -> Tensor:
    """``x[index]`` for an index of ints, slices (positive steps), ``...`` and ``None`` only (no
    ``advanced_item_in`` it), a view built as ATen's ``applySlicing`` builds it, one item after the other."""
    items = index if isinstance(index, tuple) else (index,)
    consuming = sum(1 for i in items if i is not None and i is not Ellipsis)
    ellipses = sum(1 for i in items if i is Ellipsis)
    if ellipses > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if consuming > x.ndim:
        raise IndexError(f"too many indices for tensor of dimension {x.ndim}")
    shape, strides = [], []
    offset = x.storage_offset()
    dim = 0  # the next dim of x that an index item consumes
    for item in items:
        if item is None:
            # unsqueeze in front of x's next dim, with the stride that dim has before it is indexed
            shape.append(1)
            strides.append(x.shape[dim] * x.stride(dim) if dim < x.ndim else 1)
        elif item is Ellipsis:
            skip = x.ndim - consuming
            shape.extend(x.shape[dim:dim + skip])
            strides.extend(x.stride()[dim:dim + skip])
            dim += skip
        elif isinstance(item, slice):
            begin, length, step = _slice_geometry(x.shape[dim], item.start, item.stop, item.step)
            offset += begin * x.stride(dim)
            shape.append(length)
            strides.append(x.stride(dim) * step)
            dim += 1
        else:
            i = item.__index__()
            size = x.shape[dim]
            if not -size <= i < size:
                raise IndexError(f"index {i} is out of bounds for dimension {dim} with size {size}")
            offset += (i + size if i < 0 else i) * x.stride(dim)
            dim += 1
    shape.extend(x.shape[dim:])
    strides.extend(x.stride()[dim:])
    return x._view(shape, strides, offset=offset)


def become(x: Tensor, view: Tensor) -> Tensor:
    """``x`` itself given ``view``'s geometry over the same storage, as torch's in-place view ops change
    the tensor they are called on."""
    x._shape, x._strides, x._offset, x._layout = view._shape, view._strides, view._offset, None
    return x


def unsqueeze_(x: Tensor, dim: int) -> Tensor:
    return become(x, unsqueeze(x, dim))


def squeeze_(x: Tensor, dim=None) -> Tensor:
    return become(x, squeeze(x, dim))


def transpose_(x: Tensor, dim0: int, dim1: int) -> Tensor:
    return become(x, transpose(x, dim0, dim1))


def t_(x: Tensor) -> Tensor:
    return become(x, t(x))


def as_strided_(x: Tensor, size, stride, storage_offset: int | None = None) -> Tensor:
    return become(x, as_strided(x, size, stride, storage_offset))


for _in_place in (unsqueeze_, squeeze_, transpose_, t_, as_strided_):
    tensor_attribute(_in_place.__name__, accepting_aliases(_in_place))
tensor_attribute("swapdims_", transpose_)
tensor_attribute("swapaxes_", transpose_)
tensor_attribute("T", property(_T))
tensor_attribute("mT", property(_mT))
tensor_attribute("real", property(real.impl))
tensor_attribute("imag", property(imag.impl))
tensor_attribute("view_as", view_as)
tensor_attribute("reshape_as", reshape_as)
tensor_attribute("expand_as", expand_as)


# ---- samples ---------------------------------------------------------------------------------------

def _split_reference(x, split_size_or_sections, dim=0):
    size = x.shape[dim]
    if isinstance(split_size_or_sections, int):
        cuts = list(range(split_size_or_sections, size, split_size_or_sections))
    else:
        cuts = list(np.cumsum(split_size_or_sections)[:-1])
    return tuple(np.split(x, cuts, axis=dim))


def _chunk_reference(x, chunks, dim=0):
    if x.shape[dim] == 0:  # as ATen: every chunk of an empty dim is empty
        return tuple(x for _ in range(chunks))
    return _split_reference(x, -(-x.shape[dim] // chunks), dim)


def _slice_reference(x, dim=0, start=None, end=None, step=1):
    index = [slice(None)] * x.ndim
    index[dim] = slice(start, end, step)
    return x[tuple(index)]


def _unfold_reference(x, dimension, size, step):
    if x.ndim == 0:
        return np.reshape(x, (1,))
    windows = np.lib.stride_tricks.sliding_window_view(np.atleast_1d(x), size, axis=dimension if x.ndim else 0)
    index = [slice(None)] * windows.ndim
    index[dimension if x.ndim else 0] = slice(None, None, step)
    return windows[tuple(index)]


def _sizes(sizes) -> tuple:
    """Sizes given as separate ints or as one sequence."""
    return tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else sizes


def _expand_reference(x, *sizes):
    sizes = _sizes(sizes)
    old = (1,) * (len(sizes) - x.ndim) + x.shape
    return np.broadcast_to(x, tuple(o if n == -1 else n for o, n in zip(old, sizes)))


def _as_strided_reference(x, size, stride, storage_offset=None):
    """``x``'s elements (a contiguous sample: its storage) read with ``size`` and ``stride``."""
    flat = np.ascontiguousarray(x).reshape(-1)[storage_offset or 0:]
    return np.lib.stride_tricks.as_strided(flat, tuple(size), tuple(s * flat.itemsize for s in stride)).copy()


def _squeeze_reference(x, dim=None):
    if dim is None:
        return np.squeeze(x)
    dims = tuple(d % max(x.ndim, 1) for d in (dim if isinstance(dim, (tuple, list)) else (dim,)))
    return np.squeeze(x, tuple(d for d in dims if x.ndim and x.shape[d] == 1))


_MATRIX, _TRANSPOSED = operand(2, 3), operand(3, 2, layout="transposed")
_SAMPLES = {
    "view": Samples((sample(_MATRIX, 3, 2), sample(_MATRIX, -1), sample(operand(), 1, 1),
                     sample(operand(0, 3), 3, 0), sample(operand(2, 4, dtype="int64", layout="broadcast"), 2, 4)),
                    lambda x, *shape: np.reshape(x, _sizes(shape))),
    "reshape": Samples((sample(_MATRIX, 3, 2), sample(_TRANSPOSED, -1), sample(operand(), ()),
                        sample(operand(0, 3), 3, 0), sample(operand(2, 4, dtype="int64", layout="sliced"), (4, 2))),
                       lambda x, *shape: np.reshape(x, _sizes(shape))),
    "flatten": Samples((sample(operand(2, 3, 2)), sample(operand(2, 3, 2), 1), sample(operand()),
                        sample(operand(0, 3)), sample(operand(2, 4, dtype="int64", layout="sliced"), 0, 0)),
                       lambda x, start_dim=0, end_dim=-1: np.reshape(x, x.shape[:start_dim % max(x.ndim, 1)] + (-1,)
                                                                     + x.shape[end_dim % max(x.ndim, 1) + 1:])
                       if x.ndim else np.reshape(x, (1,))),
    "unflatten": Samples((sample(operand(2, 6), 1, (2, 3)), sample(_TRANSPOSED, 0, (3, 1)), sample(operand(0, 4), 1, (2, -1)),
                          sample(operand(4, dtype="int64", layout="sliced"), 0, (2, 2))),
                         lambda x, dim, sizes: np.reshape(x, x.shape[:dim % x.ndim] + tuple(
                             s if s != -1 else x.shape[dim] // -np.prod(sizes) for s in sizes) + x.shape[dim % x.ndim + 1:])),
    "permute": Samples((sample(operand(2, 3, 2), 2, 0, 1), sample(_TRANSPOSED, (1, 0)), sample(operand(), ()),
                        sample(operand(0, 3), 1, 0), sample(operand(2, 4, dtype="int64", layout="sliced"), -1, 0)),
                       lambda x, *dims: np.transpose(x, _sizes(dims))),
    "transpose": Samples((sample(_MATRIX, 0, 1), sample(operand(2, 3, 2), -1, 0), sample(operand(), 0, -1),
                          sample(operand(0, 3), 0, 1), sample(operand(2, 4, dtype="int64", layout="sliced"), 1, 1)),
                         lambda x, dim0, dim1: np.swapaxes(x, dim0, dim1) if x.ndim else x),
    "t": Samples((sample(_MATRIX), sample(_TRANSPOSED), sample(operand(3)), sample(operand()), sample(operand(0, 3)),
                  sample(operand(2, 4, dtype="int64", layout="broadcast"))), np.transpose),
    "expand": Samples((sample(operand(3), 2, 3), sample(operand(3, 1, layout="transposed"), -1, 4), sample(operand(), 2, 2),
                       sample(operand(1, 3), 0, 3), sample(operand(2, 1, dtype="int64"), (3, 2, 5))),
                      _expand_reference),
    "broadcast_to": Samples((sample(operand(3), (2, 3)), sample(operand(3, 1, layout="transposed"), (2, 3, 4)),
                             sample(operand(), (0,)), sample(operand(2, 1, dtype="int64", layout="sliced"), (2, 5))),
                            np.broadcast_to),
    "squeeze": Samples((sample(operand(2, 1, 3)), sample(operand(2, 1, 3), 1), sample(operand(1, 3, 1), (0, 2)),
                        sample(operand()), sample(operand(0, 1)), sample(operand(4, 1, dtype="int64", layout="sliced"), 0)),
                       _squeeze_reference),
    "unsqueeze": Samples((sample(_MATRIX, 0), sample(_TRANSPOSED, -1), sample(operand(), 0), sample(operand(0, 3), 1),
                          sample(operand(2, 4, dtype="int64", layout="sliced"), 2)), np.expand_dims),
    "select": Samples((sample(_MATRIX, 0, 1), sample(_TRANSPOSED, 1, -1), sample(operand(0, 3), 1, 2),
                       sample(operand(2, 4, dtype="int64", layout="sliced"), -1, 3)),
                      lambda x, dim, index: np.take(x, index, axis=dim)),
    "slice": Samples((sample(_MATRIX, 1, 0, 2), sample(_TRANSPOSED, 0, 1, None, 2), sample(operand(0, 3), 1, -2),
                      sample(operand(5, dtype="int64", layout="sliced"), 0, -10, 10, 3), sample(_MATRIX, 1, 3, 5)),
                     _slice_reference),
    "narrow": Samples((sample(_MATRIX, 1, 0, 2), sample(_TRANSPOSED, 0, 1, 2), sample(operand(0, 3), 1, 1, 0),
                       sample(operand(5, dtype="int64", layout="sliced"), -1, -3, 2)),
                      lambda x, dim, start, length: np.take(x, range(start % x.shape[dim], start % x.shape[dim] + length),
                                                            axis=dim)),
    "unfold": Samples((sample(operand(2, 5), 1, 2, 1), sample(operand(5, 2, layout="transposed"), 0, 3, 2),
                       sample(operand(), 0, 1, 1), sample(operand(0, 3), 1, 2, 1),
                       sample(operand(6, dtype="int64", layout="sliced"), 0, 2, 3)), _unfold_reference),
    "as_strided": Samples((sample(operand(2, 3), (2, 2), (1, 2)), sample(operand(6), (3,), (2,), 1),
                           sample(operand(2, 3), (0, 2), (1, 1)), sample(operand(4, dtype="int64"), (2, 2), (0, 1))),
                          _as_strided_reference),
    "movedim": Samples((sample(operand(2, 3, 2), 0, -1), sample(_TRANSPOSED, (0, 1), (1, 0)), sample(operand(), 0, 0),
                        sample(operand(0, 3), 1, 0), sample(operand(2, 4, dtype="int64", layout="sliced"), -1, 0)),
                       lambda x, source, destination: np.moveaxis(x, source, destination) if x.ndim else x),
    "split": Samples((sample(operand(5, 2), 2), sample(_TRANSPOSED, [1, 2], 0), sample(operand(0, 3), 2, 1),
                      sample(operand(2, 4, dtype="int64", layout="sliced"), 3, -1)), _split_reference),
    "chunk": Samples((sample(operand(5, 2), 2), sample(_TRANSPOSED, 3, 1), sample(operand(2, 0), 2, 1),
                      sample(operand(2, 4, dtype="int64", layout="sliced"), 3, -1)),
                     _chunk_reference),
    "unbind": Samples((sample(_MATRIX), sample(_TRANSPOSED, 1), sample(operand(0, 3), 1),
                       sample(operand(2, 4, dtype="int64", layout="sliced"), -1)),
                      lambda x, dim=0: tuple(np.moveaxis(x, dim, 0))),
    "view_as_real": Samples((sample(operand(2, 3, dtype="complex64")), sample(operand(dtype="complex64")),
                             sample(operand(0, 3, dtype="complex128"))),
                            lambda x: np.stack([x.real, x.imag], -1)),
    "view_as_complex": Samples((sample(operand(3, 2)), sample(operand(2, 3, 2, dtype="float64")), sample(operand(0, 2))),
                               lambda x: x[..., 0] + 1j * x[..., 1]),
    "real": Samples((sample(operand(2, 3, dtype="complex64")), sample(_MATRIX), sample(operand(0, 3, dtype="complex128"))),
                    np.real),
    "imag": Samples((sample(operand(2, 3, dtype="complex64")), sample(operand(dtype="complex64")),
                     sample(operand(0, 3, dtype="complex128"))), np.imag),
}
family_samples("view", by_name(_SAMPLES))
