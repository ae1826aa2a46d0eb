"""Advanced indexing: ``x[index]`` and ``x[index] = value`` with integer and boolean tensors, lists or
arrays among the items (``__getitem__``, ``__setitem__``, ATen's ``index`` and ``index_put_``), and the
boolean-mask ops built on it (``masked_select``, ``masked_scatter``).

Advanced indexing follows ATen: ints, slices, ``None`` and ``...`` first make a view; then the
indexed dims of that view are replaced by the broadcast shape of the index tensors, in place when
those dims are adjacent and in front otherwise. Boolean masks become the coordinates of their True
elements. An ``IndexPlan`` is such an index resolved against its view; ``gather_through`` and
``put_through`` read and write through one (the dim-wise ops of ``gather_scatter`` build on them).
"""
from __future__ import annotations

import math

import numpy as np
import triton.language as tl

from .. import shape as S
from ..allocation import new_tensor, scratch_tensor
from ..device import backend_for
from ..device.errors import after_checked_launch, error_code
from ..dtypes import get_dtype
from ..kernels import indexing as K
from ..launch import cdiv, launch, next_pow2
from ..lowering import BITS_TYPE, elementwise_block, encode_scalar, needs_index_64, padded_for_kernel
from ..tensor import Tensor
from .copy import clone, copy_, has_internal_overlap, shares_memory
from .creation import full, tensor
from .index_common import (check_index_dtype, index_status, on_device, out_of_range_message, read_modify_write_flags,
                           real_pairs)
from .plans import PlanCache, PlannedLaunch, Slot, layout_key
from .registry import (OUT_OF_PLACE, Cost, TensorMeta, family_samples, nbytes, register, tensor_attribute,
                       workspace_bytes)
from .samples import Samples, by_name, index_operand, operand, sample
from .selection import nonzero
from .views import advanced_item_in, basic_index, expand, is_integer_index, narrow, reshape, select, view_as_complex

_I64 = get_dtype("int64")
_BOOL = get_dtype("bool")


# ---- parsing an index --------------------------------------------------------------------------

def _is_basic(item) -> bool:
    return item is None or item is Ellipsis or isinstance(item, slice) or is_integer_index(item)


def _as_index_tensor(item, dev) -> Tensor:
    """A tensor, list, tuple, NumPy array or Python bool used as an advanced index, on ``dev``."""
    if isinstance(item, Tensor):
        if not (item.dtype.kind in ("int", "uint", "bool")):
            raise IndexError(f"tensors used as indices must be long, int, byte or bool tensors, got {item.dtype.name}")
        if item.dtype.name == "uint8":  # a byte tensor is a mask to ATen
            item = item.to(_BOOL)
        return on_device(item, dev)
    if isinstance(item, (bool, np.bool_)):
        return tensor(bool(item), device=dev)
    array = np.asarray(item)
    if array.dtype == object or array.dtype.kind not in "biu":
        if array.size == 0:
            array = array.astype(np.int64)
        else:
            raise IndexError(f"only integers, slices, None, ..., and integer or boolean tensors, lists or arrays "
                             f"are valid indices, got {type(item).__name__} holding {array.dtype}")
    return tensor(array, device=dev)


class IndexPlan:
    """An advanced index resolved against a view: ``view``'s dims ``positions`` are indexed by
    ``indices`` (int tensors, broadcast to ``index_shape``)."""

    def __init__(self, view, positions, indices, wrap: bool = True, dims=None):
        self.wrap = wrap  # negative indices count from the end (indexing) or are out of range (index_select)
        self.view = view
        self.positions = positions
        self.indices = indices
        self.dims = positions if dims is None else dims  # the indexed tensor's dims, for messages
        try:
            self.index_shape = S.broadcast_shapes(*[t.shape for t in indices])
        except Exception:
            shapes = ", ".join(str(list(t.shape)) for t in indices)
            raise IndexError(f"shape mismatch: indexing tensors could not be broadcast together with shapes "
                             f"[{shapes}]") from None
        self.adjacent = positions == list(range(positions[0], positions[0] + len(positions)))

    def out_of_range(self, op: str) -> str | None:
        """The message naming the first index out of range, read on the host; None when all are in range."""
        for position, dim, index in zip(self.positions, self.dims, self.indices):
            message = out_of_range_message(op, index, self.view.shape[position], dim, self.wrap)
            if message is not None:
                return message
        return None

    def geometry(self):
        """(iteration shape, data strides over it, first and end dim of the index block); the
        iteration shape is the shape of ``view[indices]``."""
        view, b = self.view, tuple(self.index_shape)
        rest = [d for d in range(view.ndim) if d not in self.positions]
        if self.adjacent:
            p0, p1 = self.positions[0], self.positions[-1] + 1
            shape = (*view.shape[:p0], *b, *view.shape[p1:])
            strides = (*view.stride()[:p0], *(0,) * len(b), *view.stride()[p1:])
            return shape, strides, p0, p0 + len(b)
        shape = (*b, *(view.shape[d] for d in rest))
        strides = (*(0,) * len(b), *(view.stride(d) for d in rest))
        return shape, strides, 0, len(b)


def plan_index(x: Tensor, index) -> IndexPlan | None:
    """The plan for ``x[index]``, or None when ``index`` is basic."""
    if isinstance(index, list) or not isinstance(index, tuple):
        items = (index,)
    else:
        items = index
    if all(_is_basic(i) for i in items):
        return None
    converted = [i if _is_basic(i) else _as_index_tensor(i, x.device) for i in items]
    for t in converted:
        if isinstance(t, Tensor) and t.dtype.kind != "bool" and not (t.ndim == 0 and t.dtype.kind == "int"):
            check_index_dtype(t, "index")

    def consumed(item):
        if item is None or item is Ellipsis:
            return 0
        if isinstance(item, Tensor) and not _is_basic(item):
            return max(item.ndim, 1) if item.dtype.kind == "bool" and item.ndim else (0 if item.dtype.kind == "bool" else 1)
        return 1

    if sum(1 for i in converted if i is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    total = sum(consumed(i) for i in converted)
    if total > x.ndim:
        raise IndexError(f"too many indices for tensor of dimension {x.ndim}")
    basic_items, positions, indices, dims = [], [], [], []
    view_dim = 0
    source_dim = 0
    for item in converted:
        if item is None:
            basic_items.append(None)
            view_dim += 1
        elif item is Ellipsis:
            basic_items.append(Ellipsis)
            view_dim += x.ndim - total
            source_dim += x.ndim - total
        elif isinstance(item, slice):
            basic_items.append(item)
            view_dim += 1
            source_dim += 1
        elif _is_basic(item):
            basic_items.append(item)
            source_dim += 1
        elif item.dtype.kind == "bool" and item.ndim == 0:
            # a scalar mask adds a dim of 1, kept (True) or emptied (False)
            basic_items.append(None)
            keep = bool(item.item())
            positions.append(view_dim)
            dims.append(source_dim)
            indices.append(tensor([0] if keep else [], dtype="int64", device=x.device))
            view_dim += 1
        elif item.dtype.kind == "bool":
            for j in range(item.ndim):
                if item.shape[j] != x.shape[source_dim + j]:
                    raise IndexError(f"The shape of the mask {list(item.shape)} at index {j} does not match the shape "
                                     f"of the indexed tensor {list(x.shape)} at index {source_dim + j}")
            coordinates = nonzero.impl(item)
            for j in range(item.ndim):
                basic_items.append(slice(None))
                positions.append(view_dim)
                dims.append(source_dim + j)
                indices.append(coordinates[:, j])
                view_dim += 1
            source_dim += item.ndim
        else:
            basic_items.append(slice(None))
            positions.append(view_dim)
            dims.append(source_dim)
            indices.append(item)
            view_dim += 1
            source_dim += 1
    return IndexPlan(basic_index(x, tuple(basic_items)), positions, indices, dims=dims)


def _index_rows(plan: IndexPlan) -> Tensor:
    """The indices as one int64 buffer of K rows of ``prod(index_shape)`` entries."""
    b = tuple(plan.index_shape)
    if len(plan.indices) == 1:
        only = plan.indices[0]
        if tuple(only.shape) == b and only.dtype is _I64 and only.is_contiguous():
            return only
    rows = scratch_tensor((len(plan.indices), *b), _I64, plan.view.device)
    for k, t in enumerate(plan.indices):
        copy_(select(rows, 0, k), expand(t, b))
    return rows


# ---- gathers and puts through a plan -----------------------------------------------------------

_gather_plans = PlanCache()


def gather_through(plan: IndexPlan, op: str) -> Tensor:
    """``plan.view`` indexed by the plan: a new tensor; ``op`` names the op in an out-of-range message."""
    view = plan.view
    if view.dtype.is_complex:
        pairs = IndexPlan(real_pairs(view), plan.positions, plan.indices, plan.wrap, plan.dims)
        return view_as_complex(gather_through(pairs, op))
    key = (op, layout_key(view), tuple(plan.positions), tuple(layout_key(t) for t in plan.indices), plan.wrap)
    return _gather_plans.get(key, lambda: _plan_gather(plan, op))(plan)


def _plan_gather(plan: IndexPlan, op: str):
    """``execute(plan) -> out`` for advanced-index plans laid out as ``plan``."""
    view = plan.view
    dev, dtype = view.device, view.dtype
    shape, data_strides, b_start, b_end = plan.geometry()
    if math.prod(shape) == 0:
        return lambda plan: new_tensor(shape, dtype, dev)
    n_b = math.prod(plan.index_shape)
    sizes = tuple(view.shape[p] for p in plan.positions)
    index_strides = tuple(view.stride(p) for p in plan.positions)
    inner_shape, (inner_strides,) = S.coalesce(shape[b_end:], data_strides[b_end:])
    index_64 = needs_index_64(view, count=math.prod(shape))
    data, out, rows, status = Slot("data"), Slot("out"), Slot("rows"), Slot("status")
    if len(inner_shape) == 1 and inner_shape[0] >= 16:
        outer_shape, (outer_strides,) = S.coalesce(shape[:b_start], data_strides[:b_start])
        inner_n = inner_shape[0]
        block = min(next_pow2(inner_n), 4 * elementwise_block(dev))
        rows_n = math.prod(outer_shape) * n_b
        launch = PlannedLaunch(
            K.gather_rows, (rows_n, cdiv(inner_n, block)),
            [out, data, rows, n_b, inner_n, padded_for_kernel(outer_shape), padded_for_kernel(outer_strides, 0), sizes, index_strides,
             inner_strides[0], status],
            dict(OUTER_RANK=len(outer_shape), K=len(sizes), CODE=error_code(op), WRAP=plan.wrap, INDEX_64=index_64,
                 BLOCK=block, **_warps(dev, block)))
    else:
        n = math.prod(shape)
        block = elementwise_block(dev)
        launch = PlannedLaunch(
            K.advanced_index, (cdiv(n, block),),
            [data, out, rows, 0, n, n_b, tuple(shape), tuple(data_strides), S.contiguous_strides(shape), sizes,
             index_strides, status],
            dict(RANK=len(shape), B_START=b_start, B_END=b_end, K=len(sizes), MODE=K.MODE_GATHER.value,
                 CONSTANT_BITS_TYPE=tl.int8, CODE=error_code(op), WRAP=plan.wrap, INDEX_64=index_64, BLOCK=block))

    def execute(plan):
        result = new_tensor(shape, dtype, dev)
        launch(dev, {"data": plan.view, "out": result, "rows": _index_rows(plan), "status": index_status(dev)})
        after_checked_launch(dev, lambda: plan.out_of_range(op))
        return result
    return execute


def _warps(dev, block: int) -> dict:
    if backend_for(dev).facts["kernels"].get("interpreted", False):
        return {}
    return {"num_warps": 8 if block >= 2048 else 4}


def _value_for(plan: IndexPlan, value, op: str):
    """``value`` (a tensor or a Python scalar) ready to be written through ``plan``: a tensor
    converted to the view's dtype and device and broadcast to the indexed shape."""
    view = plan.view
    shape = plan.geometry()[0]
    if not isinstance(value, Tensor):
        if view.dtype.is_complex:
            value = tensor(complex(value), dtype=view.dtype, device=view.device)
        else:
            return encode_scalar(value, view.dtype)
    value = on_device(value, view.device)
    if value.dtype is not view.dtype or shares_memory(value, view):
        value = value.to(view.dtype, copy=True)
    lead = 0
    while value.ndim - lead > len(shape) and value.shape[lead] == 1:
        lead += 1
    value = value._view(value.shape[lead:], value.stride()[lead:])
    try:
        strides = S.broadcast_strides(value.shape, value.stride(), shape)
    except Exception:
        raise RuntimeError(f"{op}: shape mismatch: value tensor of shape {list(value.shape)} cannot be broadcast "
                           f"to indexing result of shape {list(shape)}") from None
    return value._view(shape, strides)


def put_through(plan: IndexPlan, value, op: str, accumulate: bool = False, alpha=None) -> None:
    """Writes ``value`` (a tensor broadcast to the indexed shape, or a scalar) through the plan into its
    view, or adds ``alpha * value`` with ``accumulate`` (duplicate indices all add, in a fixed order)."""
    view = plan.view
    if has_internal_overlap(view):
        raise RuntimeError(f"{op}: unsupported operation: more than one element of the written-to tensor refers "
                           "to a single memory location; clone() the tensor before writing to it")
    shape, data_strides, b_start, b_end = plan.geometry()
    if math.prod(shape) == 0:
        return
    value = _value_for(plan, value, op)
    if not isinstance(value, Tensor) and accumulate:
        value = _value_for(plan, full((), value, dtype=view.dtype, device=view.device), op)
    if view.dtype.is_complex:
        plan = IndexPlan(real_pairs(view), plan.positions, plan.indices, plan.wrap, plan.dims)
        view, value = plan.view, real_pairs(value)
        shape, data_strides, b_start, b_end = plan.geometry()
    rows = _index_rows(plan)
    n_b = math.prod(plan.index_shape)
    sizes = tuple(view.shape[p] for p in plan.positions)
    index_strides = tuple(view.stride(p) for p in plan.positions)
    dev = view.device
    status = index_status(dev)
    data = view
    value_strides = value.stride() if isinstance(value, Tensor) else (0,) * len(shape)
    index_64 = needs_index_64(view, *([(shape, value_strides)] if isinstance(value, Tensor) else []),
                              count=math.prod(shape))
    block = elementwise_block(dev)
    if accumulate:
        rest = [d for d in range(len(shape)) if not b_start <= d < b_end]
        rest_shape = [shape[d] for d in rest]
        n = math.prod(rest_shape)
        b_shape = shape[b_start:b_end]
        b_strides = value_strides[b_start:b_end]
        flags = read_modify_write_flags(view.dtype)
        # a Python bool reaches Triton as a 1-bit integer, which its arithmetic does not widen: pass 0 or 1
        scale = 1 if alpha is None else int(alpha) if isinstance(alpha, bool) else alpha
        launch(K.advanced_accumulate, (cdiv(n, block),), dev,
               [data, value, rows, scale, n, n_b, padded_for_kernel(rest_shape),
                padded_for_kernel([data_strides[d] for d in rest], 0), padded_for_kernel([value_strides[d] for d in rest], 0),
                padded_for_kernel(b_shape), padded_for_kernel(b_strides, 0), sizes, index_strides, status],
               RANK=len(rest), B_RANK=len(b_shape), K=len(sizes), SCALED=alpha is not None, CODE=error_code(op),
               WRAP=plan.wrap, INDEX_64=index_64, BLOCK=block, **flags)
    else:
        n = math.prod(shape)
        constant = not isinstance(value, Tensor)
        launch(K.advanced_index, (cdiv(n, block),), dev,
               [data, data if constant else value, rows, value if constant else 0, n, n_b, shape, data_strides,
                value_strides, sizes, index_strides, status],
               RANK=len(shape), B_START=b_start, B_END=b_end, K=len(sizes),
               MODE=(K.MODE_PUT_CONSTANT if constant else K.MODE_PUT).value,
               CONSTANT_BITS_TYPE=getattr(tl, BITS_TYPE[view.dtype.itemsize]), CODE=error_code(op),
               WRAP=plan.wrap, INDEX_64=index_64, BLOCK=block)
    after_checked_launch(dev, lambda: plan.out_of_range(op))


def advanced_get(x: Tensor, index) -> Tensor | None:
    """``x[index]`` when ``index`` holds an advanced item (else None): always a copy."""
    plan = plan_index(x, index)
    if plan is None:
        return None
    return gather_through(plan, "index")


def advanced_set(x: Tensor, index, value) -> bool:
    """``x[index] = value`` when ``index`` holds an advanced item; False when it is basic."""
    plan = plan_index(x, index)
    if plan is None:
        return False
    put_through(plan, value, "index_put_")
    return True


def subscript(x: Tensor, index) -> Tensor:
    """``x[index]``: a view for ints, slices, ``...`` and ``None``, a copy when an integer or boolean
    tensor, list or array is among them."""
    return advanced_get(x, index) if advanced_item_in(index) else basic_index(x, index)


def set_index(x: Tensor, index, value) -> None:
    """``x[index] = value``: a tensor is broadcast into the view (leading extent-1 dims of the value
    dropped first, as ATen does), a Python scalar fills it. Advanced indices write through
    ``index_put_``."""
    if advanced_set(x, index, value):
        return
    target = basic_index(x, index)
    if isinstance(value, Tensor):
        lead = 0
        while value.ndim - lead > target.ndim and value.shape[lead] == 1:
            lead += 1
        value = value._view(value.shape[lead:], value.stride()[lead:])
        target.copy_(value)
    else:
        # ATen assigns a scalar by copying a 0-d tensor, so a broadcast target is refused as for copy_
        if any(stride == 0 and n > 1 for n, stride in zip(target.shape, target.stride())):
            raise RuntimeError("unsupported operation: more than one element of the written-to tensor refers "
                               "to a single memory location; clone() the tensor before writing to it")
        target.fill_(value)



tensor_attribute("__getitem__", subscript)
tensor_attribute("__setitem__", set_index)


# ---- registered ops -----------------------------------------------------------------------------

def _index_meta(x, indices):
    items = tuple(slice(None) if i is None else i for i in indices)
    shape = _meta_result_shape(x, items)
    return TensorMeta(shape, x.dtype)


def _meta_result_shape(x, items):
    """The shape of ``x[items]`` for index tensors described by shape and dtype only (no masks)."""
    consumed = sum(0 if i is None or i is Ellipsis else 1 for i in items)
    shape, positions, index_shapes = [], [], []
    dim = 0
    for item in items:
        if item is None:
            shape.append(1)
        elif item is Ellipsis:
            skip = len(x.shape) - consumed
            shape.extend(x.shape[dim:dim + skip])
            dim += skip
        elif isinstance(item, slice):
            start, stop, step = item.indices(x.shape[dim])
            shape.append(len(range(start, stop, step)))
            dim += 1
        elif hasattr(item, "shape"):
            if item.dtype.kind == "bool":
                raise RuntimeError("index: the result shape of a boolean mask depends on its values")
            positions.append(len(shape))
            index_shapes.append(tuple(item.shape))
            shape.append(None)
            dim += 1
        else:
            dim += 1
    shape.extend(x.shape[dim:])
    if not positions:
        return tuple(shape)
    b = S.broadcast_shapes(*index_shapes)
    rest = [s for s in shape if s is not None]
    if positions == list(range(positions[0], positions[0] + len(positions))):
        return tuple(shape[:positions[0]]) + tuple(b) + tuple(shape[positions[-1] + 1:])
    return tuple(b) + tuple(rest)


def _index_rows_workspace(indices) -> int:
    """The workspace of ``_index_rows`` for ATen's list of ``indices`` (None for a whole dim): the int64
    rows it builds (declared even where the one index could be used as it is: only its layout decides)."""
    tensors = [i for i in indices if i is not None]
    return workspace_bytes(len(tensors) * S.numel(S.broadcast_shapes(*[tuple(t.shape) for t in tensors])) * 8) \
        if tensors else 0


def _index_cost(x, indices):
    out = _index_meta(x, indices)
    return Cost(bytes_read=nbytes(out), bytes_written=nbytes(out), workspace=_index_rows_workspace(indices))


@register("index", family="indexing", aten=["aten::index.Tensor"], meta=lambda a: _index_meta(a.x, a.indices),
          cost=lambda a: _index_cost(a.x, a.indices), bound=True, api=())
def index(x: Tensor, indices) -> Tensor:
    """``x[indices]`` with ATen's argument form: a list of index tensors, None for a whole dim."""
    items = tuple(slice(None) if i is None else i for i in indices)
    out = advanced_get(x, items)
    if out is None:
        return clone(basic_index(x, items))
    return out


def _index_put_cost(a):
    return Cost(bytes_read=nbytes(a.values) * (2 if a.accumulate else 1), bytes_written=nbytes(a.values),
                workspace=_index_rows_workspace(a.indices))


def _index_put_impl_from_aten(args, kwargs):
    # aten::_index_put_impl_(self, indices, values, accumulate, unsafe): unsafe only skips index checks
    return args[:4], {k: v for k, v in kwargs.items() if k != "unsafe"}


@register("index_put_", family="indexing", aten=["aten::index_put_.default", "aten::_index_put_impl_.default"],
          meta=lambda a: TensorMeta(tuple(a.x.shape), a.x.dtype), cost=_index_put_cost, bound=True, api=(),
          methods=("index_put_",),
          adapters={"aten::_index_put_impl_.default": _index_put_impl_from_aten}, variants=(OUT_OF_PLACE,))
def index_put_(x: Tensor, indices, values, accumulate: bool = False) -> Tensor:
    """``x[indices] = values`` (or ``+=`` with ``accumulate``, where duplicate indices all add,
    in a fixed order); ``indices`` is a tuple of index tensors, None for a whole dim."""
    items = tuple(slice(None) if i is None else i for i in indices)
    plan = plan_index(x, items)
    if plan is None:
        if accumulate:
            raise RuntimeError("index_put_ with accumulate needs at least one index tensor")
        basic_index(x, items).copy_(values if isinstance(values, Tensor) else values)
        return x
    put_through(plan, values, "index_put_", accumulate=accumulate)
    return x

# ---- masks ---------------------------------------------------------------------------------------

def _check_mask(mask: Tensor, op: str) -> None:
    if mask.dtype.kind != "bool":
        raise RuntimeError(f"{op}: expected a boolean mask, got {mask.dtype.name}")


@register("masked_select", family="indexing", aten=["aten::masked_select.default"],
          meta=lambda a: TensorMeta((None,), a.x.dtype),
          cost=lambda a: Cost(bytes_read=nbytes(a.x) + nbytes(a.mask), bytes_written=nbytes(a.x)), bound=True,
          methods=("masked_select",))
def masked_select(x: Tensor, mask: Tensor) -> Tensor:
    """The elements of ``x`` where ``mask`` is True (both broadcast), as a 1-D tensor in row-major
    order. Its length depends on the mask, so this waits for the device."""
    _check_mask(mask, "masked_select")
    shape = S.broadcast_shapes(tuple(x.shape), tuple(mask.shape))
    return advanced_get(expand(x, shape), (expand(on_device(mask, x.device), shape),)) if len(shape) else \
        advanced_get(x, (on_device(mask, x.device),))


@register("masked_scatter_", family="indexing", aten=["aten::masked_scatter_.default"],
          meta=lambda a: TensorMeta(tuple(a.x.shape), a.x.dtype),
          cost=lambda a: Cost(bytes_read=nbytes(a.mask) + nbytes(a.x), bytes_written=nbytes(a.x)), bound=True,
          api=(), methods=("masked_scatter_",))
def masked_scatter_(x: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """Copies consecutive elements of ``source`` into ``x`` where ``mask`` (broadcast) is True."""
    _check_mask(mask, "masked_scatter_")
    mask = expand(on_device(mask, x.device), tuple(x.shape))
    plan = plan_index(x, (mask,))
    count = math.prod(plan.index_shape)
    flat = reshape(source, (-1,))
    if flat.numel() < count:
        raise RuntimeError(f"masked_scatter_: the mask selects {count} elements, more than the source's {flat.numel()}")
    put_through(plan, narrow(flat, 0, 0, count), "masked_scatter_")
    return x


@register("masked_scatter", family="indexing", aten=["aten::masked_scatter.default"],
          meta=lambda a: TensorMeta(S.broadcast_shapes(tuple(a.x.shape), tuple(a.mask.shape)), a.x.dtype),
          cost=lambda a: Cost(bytes_read=nbytes(a.mask) + nbytes(a.x), bytes_written=nbytes(a.x)), bound=True,
          methods=("masked_scatter",))
def masked_scatter(x: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    shape = S.broadcast_shapes(tuple(x.shape), tuple(mask.shape))
    out = new_tensor(shape, x.dtype, x.device)
    copy_(out, expand(x, shape))
    return masked_scatter_.impl(out, mask, source)




# ---- samples ---------------------------------------------------------------------------------------

def _index_put_reference(x, indices, values, accumulate=False):
    result = np.array(x, copy=True)
    where = tuple(indices)
    if accumulate:
        np.add.at(result, where, values)
    else:
        result[where] = values
    return result


def _masked_scatter_reference(x, mask, source):
    result = np.array(np.broadcast_to(x, np.broadcast_shapes(x.shape, mask.shape)), copy=True)
    chosen = np.broadcast_to(mask, result.shape)
    result[chosen] = source.reshape(-1)[:int(chosen.sum())]
    return result


_MATRIX, _TRANSPOSED = operand(2, 3), operand(3, 2, layout="transposed")
_SAMPLES = {
    "index": Samples((sample(_MATRIX, [index_operand(2, 4)]), sample(_TRANSPOSED, [None, index_operand(2, 2, 2)]),
                      sample(_MATRIX, [index_operand(2, 3), index_operand(3, 3)]),
                      sample(operand(0, 3), [None, index_operand(3, 2)])),
                     lambda x, indices: x[tuple(slice(None) if i is None else i for i in indices)]),
    "index_put": Samples((sample(_MATRIX, [index_operand(2, 2, distinct=True)], operand(3)),
                          sample(_TRANSPOSED, [index_operand(3, 4), index_operand(2, 4)], operand(4), True),
                          sample(_MATRIX, [operand(2, 3, dtype="bool")], operand()),
                          sample(operand(4, dtype="int64"), [index_operand(4, 3, distinct=True)], operand(3, dtype="int64"))),
                         _index_put_reference),
    "masked_select": Samples((sample(_MATRIX, operand(2, 3, dtype="bool")), sample(_TRANSPOSED, operand(2, dtype="bool")),
                              sample(operand(0, 3), operand(3, dtype="bool"))),
                             lambda x, mask: np.broadcast_to(x, np.broadcast_shapes(x.shape, mask.shape))[
                                 np.broadcast_to(mask, np.broadcast_shapes(x.shape, mask.shape))]),
    "masked_scatter": Samples((sample(_MATRIX, operand(2, 3, dtype="bool"), operand(6)),
                               sample(_TRANSPOSED, operand(2, dtype="bool"), operand(2, 3))), _masked_scatter_reference),
}
for _name in ("index_put", "masked_scatter"):
    _SAMPLES[_name + "_"] = _SAMPLES[_name]
family_samples("indexing", by_name(_SAMPLES))
