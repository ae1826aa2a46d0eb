"""Shape and stride arithmetic: pure functions of metadata, shared by tensors, meta rules and ops."""
from __future__ import annotations

import math
from typing import Sequence

MAX_RANK = 64


class ShapeError(RuntimeError, ValueError):
    """Shapes that do not fit together. ATen raises RuntimeError for these; being a ValueError too
    keeps callers that catch the Pythonic error working."""


def normalize_shape(args) -> tuple[int, ...]:
    """``(2, 3)``, ``((2, 3),)`` or ``([2, 3],)`` to ``(2, 3)``, checking every extent."""
    if len(args) == 1 and not isinstance(args[0], int) and hasattr(args[0], "__len__"):
        args = args[0]
    shape = []
    for s in args:
        if hasattr(s, "__index__") and not isinstance(s, bool):
            s = s.__index__()
        if not isinstance(s, int) or isinstance(s, bool):
            raise TypeError(f"shape entries must be integers, got {s!r} in {tuple(args)}")
        if s < 0:
            raise ShapeError(f"negative extent {s} in shape {tuple(args)}")
        shape.append(s)
    if len(shape) > MAX_RANK:
        raise ValueError(f"rank {len(shape)} exceeds the maximum of {MAX_RANK}")
    return tuple(shape)


def numel(shape: Sequence[int]) -> int:
    return math.prod(shape)


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides = [0] * len(shape)
    step = 1
    for i in range(len(shape) - 1, -1, -1):
        strides[i] = step
        step *= max(shape[i], 1)
    return tuple(strides)


def wrap_dim(dim: int, ndim: int, *, allow_end: bool = False) -> int:
    """A dimension index in ``[0, ndim)`` (``[0, ndim]`` with ``allow_end``), negatives counted from
    the end, as ATen does: a 0-d tensor accepts dim 0 and -1."""
    if type(dim) is int:  # the common case, without the protocol checks below
        size = max(ndim + (1 if allow_end else 0), 1)
        if -size <= dim < size:
            return dim + size if dim < 0 else dim
    if hasattr(dim, "__index__") and not isinstance(dim, bool):
        dim = dim.__index__()
    else:
        raise TypeError(f"dim must be an integer, got {dim!r}")
    size = ndim + (1 if allow_end else 0)
    size = max(size, 1)
    if not -size <= dim < size:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-size}, {size - 1}], but got {dim})")
    return dim + size if dim < 0 else dim


def is_contiguous(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """ATen's rule: dims of extent 1 impose nothing, and an empty tensor is contiguous."""
    if 0 in shape:
        return True
    expected = 1
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size == 1:
            continue
        if stride != expected:
            return False
        expected *= size
    return True


def is_non_overlapping_and_dense(shape: Sequence[int], strides: Sequence[int]) -> bool:
    if len(shape) == 1:
        return shape[0] < 2 or strides[0] == 1
    order = sorted(range(len(shape)), key=lambda i: (strides[i], shape[i]))
    expected = 1
    for i in order:
        if shape[i] == 1:
            continue
        if strides[i] != expected:
            return False
        expected *= shape[i]
    return True


def dense_strides_like(shape: Sequence[int], strides: Sequence[int]) -> tuple[int, ...]:
    """Strides of a dense tensor of ``shape`` laid out in the order of ``strides`` (ATen's
    ``preserve_format``): a dense input keeps its strides; otherwise the dim of smallest stride goes
    innermost, by a stable insertion sort that leaves zero-stride dims where they are."""
    if is_non_overlapping_and_dense(shape, strides):
        return tuple(strides)

    def should_swap(a, b):  # > 0 when dim a must go outside dim b; zero strides keep their place
        if strides[a] == 0 or strides[b] == 0:
            return 0
        if strides[a] != strides[b]:
            return 1 if strides[a] > strides[b] else -1
        return 1 if shape[a] > shape[b] else 0

    return dense_strides_in_order(shape, should_swap)


def strides_like_channels_last(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether ATen takes a 4-D (5-D) tensor of these strides for channels_last (channels_last_3d), as its
    ``suggest_memory_format`` does: the channel dim innermost, then the spatial dims from the last, then
    the batch; ambiguous layouts (a trivial channel stride, size-1 dims tied with it) count as contiguous."""
    if len(shape) not in (4, 5) or strides[1] == 0:
        return False
    least = 0
    for d in (1, *range(len(shape) - 1, 1, -1), 0):
        if shape[d] == 0 or strides[d] < least or (d == 0 and least == strides[1]):
            return False
        least = strides[d] * shape[d] if shape[d] > 1 else strides[d]
    return True


class memory_format(str):
    """A memory format, as torch's constants name them (``nbx.channels_last`` is ``'channels_last'``)."""

    def __repr__(self) -> str:
        return f"nbxtensor.{str.__str__(self)}"


MEMORY_FORMATS = {name: memory_format(name) for name in
                  ("preserve_format", "contiguous_format", "channels_last", "channels_last_3d")}
# the channels-last formats: the rank each needs and its dims from the innermost out
_CHANNELS_LAST_ORDER = {"channels_last": (1, 3, 2, 0), "channels_last_3d": (1, 4, 3, 2, 0)}


def memory_format_name(op: str, value) -> str:
    """The format ``value`` names: a name, ``nbx.channels_last`` or torch's constant (``torch.channels_last``);
    None is ``preserve_format``."""
    if value is None:
        return "preserve_format"
    name = str(value).removeprefix("torch.")
    if name not in MEMORY_FORMATS:
        raise ValueError(f"{op}: unknown memory_format {value!r}; use one of {', '.join(MEMORY_FORMATS)}")
    return name


def channels_last_strides(shape: Sequence[int], name: str | None = None) -> tuple[int, ...]:
    """Strides of a channels-last (``channels_last_3d``) tensor of ``shape``, as ATen lays it out: the
    channel dim innermost, then the spatial dims from the last, then the batch (sizes as they are, so an
    empty dim gives the dims outside it stride 0, as ATen's do). None names the format of ``shape``'s rank."""
    if name is None:
        name = "channels_last_3d" if len(shape) == 5 else "channels_last"
    order = _CHANNELS_LAST_ORDER[name]
    if len(shape) != len(order):
        raise RuntimeError(f"required rank {len(order)} tensor to use {name} format")
    strides = [0] * len(shape)
    step = 1
    for d in order:
        strides[d] = step
        step *= shape[d]
    return tuple(strides)


def is_channels_last_contiguous(shape: Sequence[int], strides: Sequence[int], name: str) -> bool:
    """Whether the strides are exactly ``name``'s dense layout, size-1 dims' strides free (ATen's
    ``is_contiguous(memory_format=...)``); a tensor of another rank never is."""
    order = _CHANNELS_LAST_ORDER[name]
    if len(shape) != len(order):
        return False
    expected = 1
    for d in order:
        if shape[d] != 1:
            if strides[d] != expected:
                return False
            expected *= shape[d]
    return True


def dense_strides_in_order(shape: Sequence[int], should_swap) -> tuple[int, ...]:
    """Dense strides for ``shape`` with its dims ordered by ATen's stable insertion sort:
    ``should_swap(a, b)`` is positive when dim a belongs outside dim b, negative when inside, and 0
    when it cannot tell (the dims keep their order)."""
    ndim = len(shape)
    perm = list(range(ndim - 1, -1, -1))  # innermost first
    for i in range(1, ndim):
        dim1 = i
        for dim0 in range(i - 1, -1, -1):
            c = should_swap(perm[dim0], perm[dim1])
            if c > 0:
                perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
                dim1 = dim0
            elif c < 0:
                break
    out = [0] * ndim
    step = 1
    for d in perm:
        out[d] = step
        step *= max(shape[d], 1)
    return tuple(out)


def broadcast_shapes(*shapes: Sequence[int] | int) -> tuple[int, ...]:
    """The shape ``shapes`` broadcast to; an int is the shape of one dim, as torch takes it."""
    shapes = [(s,) if isinstance(s, int) else tuple(s) for s in shapes]
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i, size in enumerate(s):
            j = ndim - len(s) + i
            if out[j] == 1:
                out[j] = size
            elif size != 1 and size != out[j]:
                raise ShapeError(f"shapes {' and '.join(str(tuple(x)) for x in shapes)} cannot be broadcast "
                                 f"together: extent {size} against {out[j]} at dimension {j}")
    return tuple(out)


def broadcast_strides(shape: Sequence[int], strides: Sequence[int], target: Sequence[int]) -> tuple[int, ...]:
    """Strides that read a ``shape`` tensor as if it had the broadcast ``target`` shape, as ATen's
    ``inferExpandGeometry`` picks them: a new leading dim of extent 1 gets the stride an unsqueeze
    would give it (extent times stride of the dim after it), any other broadcast dim stride 0."""
    if len(shape) > len(target):
        raise ShapeError(f"cannot expand shape {tuple(shape)} to {tuple(target)}: the target has fewer dims")
    if not shape:
        return (0,) * len(target)
    lead = len(target) - len(shape)
    out = [0] * len(target)
    for i in range(len(target) - 1, -1, -1):
        t = target[i]
        if i < lead:
            out[i] = target[i + 1] * out[i + 1] if t == 1 else 0
            continue
        size, stride = shape[i - lead], strides[i - lead]
        if size == t:
            out[i] = stride
        elif size == 1:
            out[i] = 0
        else:
            raise ShapeError(f"the expanded size of the tensor ({t}) must match the existing size ({size}) "
                             f"at non-singleton dimension {i}; target sizes {tuple(target)}, tensor sizes "
                             f"{tuple(shape)}")
    return tuple(out)


def infer_size(shape: Sequence[int], count: int) -> tuple[int, ...]:
    """Resolve one ``-1`` in ``shape`` so that it holds ``count`` elements."""
    shape = list(shape)
    unknown = [i for i, s in enumerate(shape) if s == -1]
    if len(unknown) > 1:
        raise ShapeError(f"only one dimension can be inferred, got shape {tuple(shape)}")
    for s in shape:
        if s < -1:
            raise ShapeError(f"invalid shape dimension {s} in {tuple(shape)}")
    known = math.prod(s for s in shape if s != -1)
    if unknown:
        if known == 0:
            raise ShapeError(f"cannot reshape a tensor of {count} elements into shape {tuple(shape)}: "
                             "the unspecified dimension is ambiguous with a zero extent")
        if count % known:
            raise ShapeError(f"shape {tuple(shape)} is invalid for input of size {count}")
        shape[unknown[0]] = count // known
    elif known != count:
        raise ShapeError(f"shape {tuple(shape)} is invalid for input of size {count}")
    return tuple(shape)


def view_strides(old_shape: Sequence[int], old_strides: Sequence[int],
                 new_shape: Sequence[int]) -> tuple[int, ...] | None:
    """Strides that let ``new_shape`` view memory laid out as (``old_shape``, ``old_strides``), or
    None when no view exists (ATen's computeStride): runs of old dims that are contiguous with
    each other may be split or merged, nothing else."""
    old_shape, new_shape = tuple(old_shape), tuple(new_shape)  # plain tuples index without ``Size``'s Python
    if numel(old_shape) == 0:
        return tuple(old_strides) if old_shape == new_shape else contiguous_strides(new_shape)
    if len(old_shape) == 0:
        return tuple(1 for _ in new_shape)
    new_strides = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_base_stride = old_strides[-1]
    tensor_numel = 1
    view_numel = 1
    for tensor_d in range(len(old_shape) - 1, -1, -1):
        tensor_numel *= old_shape[tensor_d]
        if tensor_d == 0 or (old_shape[tensor_d - 1] != 1
                             and old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride):
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new_strides[view_d] = view_numel * chunk_base_stride
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base_stride = old_strides[tensor_d - 1]
                tensor_numel = 1
                view_numel = 1
    if view_d != -1:
        return None
    return tuple(new_strides)


def coalesce(shape: Sequence[int], *stride_sets: Sequence[int]) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """Merge neighbouring dims that every stride set walks contiguously, and drop extent-1 dims, so
    kernels index as few dims as possible. Returns the new shape and one stride tuple per set."""
    dims = [i for i, s in enumerate(shape) if s != 1]
    out_shape: list[int] = []
    out_strides: list[list[int]] = [[] for _ in stride_sets]
    for i in dims:
        if out_shape and all(st[-1] == s[i] * shape[i] for st, s in zip(out_strides, stride_sets)):
            out_shape[-1] *= shape[i]
            for st, s in zip(out_strides, stride_sets):
                st[-1] = s[i]
        else:
            out_shape.append(shape[i])
            for st, s in zip(out_strides, stride_sets):
                st.append(s[i])
    return tuple(out_shape), [tuple(st) for st in out_strides]


def max_offset(shape: Sequence[int], strides: Sequence[int]) -> int:
    """The largest element offset a view reaches from its first element (0 when empty)."""
    if 0 in shape:
        return 0
    return sum((n - 1) * s for n, s in zip(shape, strides))


def check_view_in_storage(shape: Sequence[int], strides: Sequence[int], offset: int, itemsize: int,
                          storage_nbytes: int | None, what: str) -> None:
    """Refuse a view whose extents or storage offset are negative, or whose elements, from the lowest
    address any index reaches to the highest, are not all inside a storage of ``storage_nbytes``
    bytes (None: a meta tensor, which has no storage to bound it). An empty view reads nothing, so
    only its signs are checked, as ATen's ``setStorage`` does."""
    if offset < 0:
        raise ShapeError(f"{what}: storage offset {offset} is negative; a view starts at element 0 of its "
                         "storage or later")
    if any(n < 0 for n in shape):
        raise ShapeError(f"{what}: negative extent in sizes {list(shape)}")
    if storage_nbytes is None or 0 in shape:
        return
    lowest = highest = offset
    for n, s in zip(shape, strides):
        if s < 0:
            lowest += (n - 1) * s
        else:
            highest += (n - 1) * s
    if lowest < 0 or (highest + 1) * itemsize > storage_nbytes:
        raise ShapeError(f"{what}: sizes {list(shape)}, strides {list(strides)} and storage offset {offset} "
                         f"reach elements {lowest} to {highest} (itemsize {itemsize}, so bytes {lowest * itemsize} "
                         f"to {(highest + 1) * itemsize}), out of bounds for a storage of {storage_nbytes} bytes")
