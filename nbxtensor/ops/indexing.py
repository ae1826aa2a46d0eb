"""Advanced indexing, gather/scatter, embedding, masked ops and nonzero.

Every index read from memory is checked on the device: an out-of-range index is never followed, and
the kernel stores its op's code in the device's status buffer (``device/errors.py``), which the host
reads at its next synchronisation with the device.

Advanced indexing follows ATen: ints, slices, ``None`` and ``...`` first make a view; then the
indexed dims of that view are replaced by the broadcast shape of the index tensors, in place when
those dims are adjacent and in front otherwise. Boolean masks become the coordinates of their True
elements.
"""
from __future__ import annotations

import math

import numpy as np
import triton.language as tl

from .. import shape as S
from ..allocation import new_tensor, outside_arena, scratch_tensor
from ..device import backend_for
from ..device.errors import after_checked_launch, error_code, status_buffer
from ..dtypes import get_dtype
from ..kernels import indexing as K
from ..kernels.copy import FORMAT_BOOL, FORMAT_NATIVE, SMALL_FLOAT_FORMATS
from ..launch import cdiv, launch, next_pow2
from ..lowering import BITS_TYPE, constant_bits, elementwise_block, needs_index_64
from ..tensor import Tensor
from .copy import clone, copy_, fill_, has_internal_overlap
from .creation import full, tensor
from .plans import PlanCache, PlannedLaunch, Slot, layout_key
from .registry import (OUT_OF_PLACE, Cost, TensorMeta, family_samples, get, nbytes, register, tensor_attribute,
                       workspace_bytes)
from .samples import Samples, by_name, operand, sample
from .views import (advanced_item_in, basic_index, expand, is_integer_index, narrow, reshape, select, view_as_complex,
                    view_as_real)

_I64 = get_dtype("int64")
_I32 = get_dtype("int32")
_BOOL = get_dtype("bool")
_F32 = get_dtype("float32")


# ---- the device-side error status ------------------------------------------------------------

def report_on_device(flag: Tensor, op: str, error: type, message: str) -> None:
    """Make ``flag`` (a 0-d bool on the device) being true an error of ``op``, raised with ``message`` at
    the next check of the device's status (at once on the CPU), without reading it now."""
    dev = flag.device
    status = _status(dev)
    copy_(status, get("where").impl(flag, error_code(op, (error, message)), status))
    after_checked_launch(dev)


def _status(dev) -> Tensor:
    return status_buffer(dev, lambda: _zero_status(dev))


def _zero_status(dev) -> Tensor:
    with outside_arena():  # the device's for good, not a graph step's
        return fill_(new_tensor((1,), _I32, dev), 0)


def _out_of_range(op: str, index: Tensor, size: int, dim: int, wrap: bool) -> str | None:
    """torch's message for the first entry of ``index`` (on a device the host reads) outside a dim of
    ``size``, or None when every entry is in range."""
    values = index.numpy()
    bad = (values < (-size if wrap else 0)) | (values >= size)
    if not bad.any():
        return None
    prefix = "" if op == "index" else f"{op}: "
    return f"{prefix}index {int(values[bad].flat[0])} is out of bounds for dimension {dim} with size {size}"


# ---- shared helpers --------------------------------------------------------------------------

def _block(dev) -> int:
    return elementwise_block(dev)


def padded_for_kernel(values, fill=1) -> tuple:
    """Kernels take at least one entry per tuple."""
    return tuple(values) if len(values) else (fill,)


def _arith_flags(dt) -> dict:
    """How a read-modify-write kernel computes in ``dt``: half types in float32, bool as int32
    stored back as 0/1, the rest natively; rounding on the store as the copy kernel rounds."""
    if dt.kind == "bool":
        return dict(COMPUTE=tl.int32, FORMAT=FORMAT_BOOL, VIA_F32=False)
    if dt.name == "float16":
        return dict(COMPUTE=tl.float32, FORMAT=FORMAT_NATIVE, VIA_F32=True)
    if dt.name in SMALL_FLOAT_FORMATS:
        return dict(COMPUTE=tl.float32, FORMAT=SMALL_FLOAT_FORMATS[dt.name], VIA_F32=False)
    return dict(COMPUTE=dt.triton, FORMAT=FORMAT_NATIVE, VIA_F32=False)


def _check_index_dtype(t: Tensor, op: str) -> None:
    if t.dtype.kind not in ("int", "uint") or t.dtype.name == "uint8":
        raise IndexError(f"{op}: indices must be an int64 or int32 tensor, got {t.dtype.name}")


def _on(t: Tensor, dev) -> Tensor:
    return t if t.device == dev else t.to(dev)


def _real_pair(t: Tensor) -> Tensor:
    """A complex tensor as its (re, im) components, a trailing dim of 2."""
    return view_as_real(t) if t.dtype.is_complex else t


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
        return _on(item, dev)
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


class _Plan:
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
            message = _out_of_range(op, index, self.view.shape[position], dim, self.wrap)
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


def _plan(x: Tensor, index) -> _Plan | None:
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
            _check_index_dtype(t, "index")

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
    return _Plan(basic_index(x, tuple(basic_items)), positions, indices, dims=dims)


def _index_rows(plan: _Plan) -> Tensor:
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


def _gather(plan: _Plan, op: str) -> Tensor:
    view = plan.view
    if view.dtype.is_complex:
        return view_as_complex(_gather(_Plan(_real_pair(view), plan.positions, plan.indices, plan.wrap, plan.dims), op))
    key = (op, layout_key(view), tuple(plan.positions), tuple(layout_key(t) for t in plan.indices), plan.wrap)
    return _gather_plans.get(key, lambda: _plan_gather(plan, op))(plan)


def _plan_gather(plan: _Plan, op: str):
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
        block = min(next_pow2(inner_n), 4 * _block(dev))
        rows_n = math.prod(outer_shape) * n_b
        launch = PlannedLaunch(
            K.gather_rows, (rows_n, cdiv(inner_n, block)),
            [out, data, rows, n_b, inner_n, padded_for_kernel(outer_shape), padded_for_kernel(outer_strides, 0), sizes, index_strides,
             inner_strides[0], status],
            dict(OUTER_RANK=len(outer_shape), K=len(sizes), CODE=error_code(op), WRAP=plan.wrap, INDEX_64=index_64,
                 BLOCK=block, **_warps(dev, block)))
    else:
        n = math.prod(shape)
        block = _block(dev)
        launch = PlannedLaunch(
            K.advanced_index, (cdiv(n, block),),
            [data, out, rows, 0, n, n_b, tuple(shape), tuple(data_strides), S.contiguous_strides(shape), sizes,
             index_strides, status],
            dict(RANK=len(shape), B_START=b_start, B_END=b_end, K=len(sizes), MODE=K.MODE_GATHER,
                 CONSTANT_BITS_TYPE=tl.int8, CODE=error_code(op), WRAP=plan.wrap, INDEX_64=index_64, BLOCK=block))

    def execute(plan):
        result = new_tensor(shape, dtype, dev)
        launch(dev, {"data": plan.view, "out": result, "rows": _index_rows(plan), "status": _status(dev)})
        after_checked_launch(dev, lambda: plan.out_of_range(op))
        return result
    return execute


def _warps(dev, block: int) -> dict:
    if backend_for(dev).facts["kernels"].get("interpreted", False):
        return {}
    return {"num_warps": 8 if block >= 2048 else 4}


def _value_for(plan: _Plan, value, op: str):
    """``value`` (a tensor or a Python scalar) ready to be written through ``plan``: a tensor
    converted to the view's dtype and device and broadcast to the indexed shape."""
    view = plan.view
    shape = plan.geometry()[0]
    if not isinstance(value, Tensor):
        if view.dtype.is_complex:
            value = tensor(complex(value), dtype=view.dtype, device=view.device)
        else:
            return constant_bits(value, view.dtype)
    value = _on(value, view.device)
    if value.dtype is not view.dtype or value._storage is view._storage:
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


def _put(plan: _Plan, value, op: str, accumulate: bool = False, alpha=None) -> None:
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
        plan = _Plan(_real_pair(view), plan.positions, plan.indices, plan.wrap, plan.dims)
        view, value = plan.view, _real_pair(value)
        shape, data_strides, b_start, b_end = plan.geometry()
    rows = _index_rows(plan)
    n_b = math.prod(plan.index_shape)
    sizes = tuple(view.shape[p] for p in plan.positions)
    index_strides = tuple(view.stride(p) for p in plan.positions)
    dev = view.device
    status = _status(dev)
    data = view
    value_strides = value.stride() if isinstance(value, Tensor) else (0,) * len(shape)
    index_64 = needs_index_64(view, *([(shape, value_strides)] if isinstance(value, Tensor) else []),
                              count=math.prod(shape))
    block = _block(dev)
    if accumulate:
        rest = [d for d in range(len(shape)) if not b_start <= d < b_end]
        rest_shape = [shape[d] for d in rest]
        n = math.prod(rest_shape)
        b_shape = shape[b_start:b_end]
        b_strides = value_strides[b_start:b_end]
        flags = _arith_flags(view.dtype)
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
               MODE=K.MODE_PUT_CONSTANT if constant else K.MODE_PUT,
               CONSTANT_BITS_TYPE=getattr(tl, BITS_TYPE[view.dtype.itemsize]), CODE=error_code(op),
               WRAP=plan.wrap, INDEX_64=index_64, BLOCK=block)
    after_checked_launch(dev, lambda: plan.out_of_range(op))


def advanced_get(x: Tensor, index) -> Tensor | None:
    """``x[index]`` when ``index`` holds an advanced item (else None): always a copy."""
    plan = _plan(x, index)
    if plan is None:
        return None
    return _gather(plan, "index")


def advanced_set(x: Tensor, index, value) -> bool:
    """``x[index] = value`` when ``index`` holds an advanced item; False when it is basic."""
    plan = _plan(x, index)
    if plan is None:
        return False
    _put(plan, value, "index_put_")
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


def where_method(self: Tensor, condition, other) -> Tensor:
    """``self`` where ``condition`` holds, else ``other`` (torch's method order)."""
    return get("where").impl(condition, self, other)


tensor_attribute("__getitem__", subscript)
tensor_attribute("__setitem__", set_index)
tensor_attribute("where", where_method)


def _dim_plan(x: Tensor, dim: int, index: Tensor, op: str, wrap: bool = False) -> _Plan:
    """The plan for ``x.index_select(dim, index)``: a 1-D (or 0-d) index on one dim."""
    _check_index_dtype(index, op)
    if index.ndim > 1:
        raise IndexError(f"{op}: index must be a vector (at most 1 dimension), got {index.ndim} dimensions")
    d = S.wrap_dim(dim, max(x.ndim, 1))
    view = x if x.ndim else x._view((1,), (1,))
    return _Plan(view, [d], [_on(index, x.device)._view((index.numel(),), (index.stride(0) if index.ndim else 1,))],
                 wrap)


# ---- registered ops: advanced indexing -----------------------------------------------------------

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


def _copy_cost_of(meta_fn):
    def cost(*args, **kwargs):
        out = meta_fn(*args, **kwargs)
        return Cost(bytes_read=nbytes(out), bytes_written=nbytes(out))
    return cost


def _index_rows_workspace(indices) -> int:
    """The workspace of ``_index_rows`` for ATen's list of ``indices`` (None for a whole dim): the int64
    rows it builds (declared even where the one index could be used as it is: only its layout decides)."""
    tensors = [i for i in indices if i is not None]
    return workspace_bytes(len(tensors) * S.numel(S.broadcast_shapes(*[tuple(t.shape) for t in tensors])) * 8) \
        if tensors else 0


def _index_cost(x, indices):
    out = _index_meta(x, indices)
    return Cost(bytes_read=nbytes(out), bytes_written=nbytes(out), workspace=_index_rows_workspace(indices))


@register("index", family="indexing", aten=["aten::index.Tensor"], meta=_index_meta,
          cost=_index_cost, api=())
def index(x: Tensor, indices) -> Tensor:
    """``x[indices]`` with ATen's argument form: a list of index tensors, None for a whole dim."""
    items = tuple(slice(None) if i is None else i for i in indices)
    out = advanced_get(x, items)
    if out is None:
        return clone(basic_index(x, items))
    return out


def _index_put_meta(x, indices, values, accumulate=False):
    return TensorMeta(tuple(x.shape), x.dtype)


def _index_put_cost(x, indices, values, accumulate=False):
    return Cost(bytes_read=nbytes(values) * (2 if accumulate else 1), bytes_written=nbytes(values),
                workspace=_index_rows_workspace(indices))


def _index_put_impl_from_aten(args, kwargs):
    # aten::_index_put_impl_(self, indices, values, accumulate, unsafe): unsafe only skips index checks
    return args[:4], {k: v for k, v in kwargs.items() if k != "unsafe"}


@register("index_put_", family="indexing", aten=["aten::index_put_.default", "aten::_index_put_impl_.default"],
          meta=_index_put_meta, cost=_index_put_cost, api=(), methods=("index_put_",),
          adapters={"aten::_index_put_impl_.default": _index_put_impl_from_aten}, variants=(OUT_OF_PLACE,))
def index_put_(x: Tensor, indices, values, accumulate: bool = False) -> Tensor:
    """``x[indices] = values`` (or ``+=`` with ``accumulate``, where duplicate indices all add,
    in a fixed order); ``indices`` is a tuple of index tensors, None for a whole dim."""
    items = tuple(slice(None) if i is None else i for i in indices)
    plan = _plan(x, items)
    if plan is None:
        if accumulate:
            raise RuntimeError("index_put_ with accumulate needs at least one index tensor")
        basic_index(x, items).copy_(values if isinstance(values, Tensor) else values)
        return x
    _put(plan, values, "index_put_", accumulate=accumulate)
    return x


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


@register("index_select", family="indexing", aten=["aten::index_select.default"], meta=_select_meta,
          cost=_copy_cost_of(_select_meta), methods=("index_select",))
def index_select(x: Tensor, dim: int, index: Tensor) -> Tensor:
    """The entries of ``x`` at positions ``index`` (a vector) along ``dim``; of a 0-d ``x``, its one
    element (the index holding the one value 0), 0-d as torch gives it."""
    shape = _select_meta(x, dim, index).shape
    out = _gather(_dim_plan(x, dim, index, "index_select"), "index_select")
    return out if x.ndim else out._view(shape, ())


def _embedding_meta(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    return TensorMeta((*indices.shape, *weight.shape[1:]), weight.dtype)


def embedding_functional(input: Tensor, weight: Tensor, padding_idx=None, max_norm=None, norm_type=2.0,
                         scale_grad_by_freq=False, sparse=False) -> Tensor:
    """``torch.nn.functional.embedding``'s argument order; ``max_norm`` (which rewrites the table)
    is refused."""
    if max_norm is not None:
        raise NotImplementedError("embedding with max_norm renormalises the weight in place; nbxtensor does not "
                                  "support it: renormalise the table once before inference")
    return embedding.impl(weight, input, -1 if padding_idx is None else padding_idx)


@register("embedding", family="indexing", aten=["aten::embedding.default"], meta=_embedding_meta,
          functional=True, functional_form=embedding_functional,
          cost=lambda weight, indices, *a, **k: Cost(
              bytes_read=nbytes(_embedding_meta(weight, indices)) + nbytes(indices),
              bytes_written=nbytes(_embedding_meta(weight, indices))))
def embedding(weight: Tensor, indices: Tensor, padding_idx: int = -1, scale_grad_by_freq: bool = False,
              sparse: bool = False) -> Tensor:
    """Rows of ``weight`` (num_embeddings, ...) looked up by ``indices`` of any shape (ATen's
    argument order, as ``torch.embedding``). ``padding_idx`` only shapes gradients, so inference
    reads its row like any other; it is still checked to lie in range."""
    _check_index_dtype(indices, "embedding")
    if weight.ndim != 2:
        raise RuntimeError(f"embedding: weight must be 2-D (num_embeddings, embedding_dim), got {weight.ndim}-D")
    if padding_idx is not None and not -weight.shape[0] <= padding_idx < max(weight.shape[0], 1):
        raise ValueError(f"embedding: padding_idx {padding_idx} must be within num_embeddings {weight.shape[0]}")
    return _gather(_Plan(weight, [0], [_on(indices, weight.device)], wrap=False), "embedding")


# ---- dim-wise gather and scatter ---------------------------------------------------------------

def _gather_meta(x, dim, index, sparse_grad=False):
    return TensorMeta(tuple(index.shape), x.dtype)


def _check_dim_shapes(x: Tensor, dim: int, index: Tensor, op: str, src: Tensor | None = None) -> int:
    if index.numel():
        # as torch: an empty index addresses nothing, so its dtype is not checked
        _check_index_dtype(index, op)
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


@register("gather", family="indexing", aten=["aten::gather.default"], meta=_gather_meta,
          cost=_copy_cost_of(_gather_meta), methods=("gather",))
def gather(x: Tensor, dim: int, index: Tensor, *, sparse_grad: bool = False) -> Tensor:
    """``out[c] = x[c with c[dim] replaced by index[c]]``, over the index's shape."""
    return gather_dim(x, dim, index, "gather", wrap=False)


def gather_dim(x: Tensor, dim: int, index: Tensor, op: str, wrap: bool) -> Tensor:
    d = _check_dim_shapes(x, dim, index, op)
    index = _on(index, x.device)
    out = new_tensor(index.shape, x.dtype, x.device)
    if out.numel() == 0:
        return out
    x1, index1, out1 = _as_nd(x, 1), _as_nd(index, 1), _as_nd(out, 1)
    if x.dtype.is_complex:
        x1, out1 = _real_pair(x1), _real_pair(out1)
        index1 = index1._view((*index1.shape, 2), (*index1.stride(), 0))
    shape = tuple(index1.shape)
    n = math.prod(shape)
    dev = x.device
    block = _block(dev)
    launch(K.dim_gather, (cdiv(n, block),), dev,
           [out1, x1, index1, n, shape, out1.stride(), x1.stride(), index1.stride(), x1.shape[d], _status(dev)],
           RANK=len(shape), DIM=d, CODE=error_code(op), WRAP=wrap,
           INDEX_64=needs_index_64(x1, (shape, index1.stride()), count=n), BLOCK=block)
    after_checked_launch(dev, lambda: _out_of_range(op, index1, x1.shape[d], d, wrap))
    return out


@register("take_along_dim", family="indexing", aten=["aten::take_along_dim.default"],
          meta=lambda x, indices, dim=None: TensorMeta(
              tuple(indices.shape) if dim is None else tuple(_along_shapes(x.shape, indices.shape, dim)[1]), x.dtype),
          cost=lambda x, indices, dim=None: Cost(bytes_read=nbytes(indices), bytes_written=nbytes(indices)),
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


@register("take", family="indexing", aten=["aten::take.default"],
          meta=lambda x, index: TensorMeta(tuple(index.shape), x.dtype),
          cost=lambda x, index: Cost(bytes_read=nbytes(index), bytes_written=nbytes(index)), methods=("take",))
def take(x: Tensor, index: Tensor) -> Tensor:
    """Elements of ``x`` read as a flat row-major vector, at ``index`` (any shape)."""
    _check_index_dtype(index, "take")
    flat = reshape(x, (-1,))
    out = gather_dim(flat, 0, reshape(index, (-1,)), "take", wrap=True)
    return reshape(out, tuple(index.shape))


def _scatter_meta(x, dim, index, src=None, *args, **kwargs):
    return TensorMeta(tuple(x.shape), x.dtype)


def _scatter_cost(x, dim, index, src=None, *args, **kwargs):
    return Cost(bytes_read=nbytes(x) + nbytes(index), bytes_written=nbytes(x))


def scatter_into(out: Tensor, dim: int, index: Tensor, src, op: str) -> Tensor:
    """``out[... index ...] = src`` (a tensor or a scalar) along ``dim``, in place."""
    src_t = src if isinstance(src, Tensor) else None
    d = _check_dim_shapes(out, dim, index, op, src_t)
    if index.numel() == 0:
        return out
    if has_internal_overlap(out):
        raise RuntimeError(f"{op}: unsupported operation: more than one element of the written-to tensor refers "
                           "to a single memory location; clone() the tensor before writing to it")
    index = _on(index, out.device)
    dev = out.device
    dst1, index1 = _as_nd(out, 1), _as_nd(index, 1)
    if src_t is not None:
        src_t = _on(src_t, dev)
        if src_t.dtype is not out.dtype or src_t._storage is out._storage:
            src_t = src_t.to(out.dtype, copy=True)
        src1 = _as_nd(src_t, 1)
        bits = 0
    elif out.dtype.is_complex:
        return scatter_into(out, dim, index, full(index.shape, complex(src), dtype=out.dtype, device=dev), op)
    else:
        src1 = dst1
        bits = constant_bits(src, out.dtype)
    if out.dtype.is_complex:
        dst1, src1 = _real_pair(dst1), _real_pair(src1)
        index1 = index1._view((*index1.shape, 2), (*index1.stride(), 0))
    shape = tuple(index1.shape)
    n = math.prod(shape)
    block = _block(dev)
    launch(K.dim_scatter, (cdiv(n, block),), dev,
           [dst1, src1, index1, bits, n, shape, dst1.stride(), src1.stride(), index1.stride(), dst1.shape[d],
            _status(dev)],
           RANK=len(shape), DIM=d, CONSTANT=src_t is None,
           CONSTANT_BITS_TYPE=getattr(tl, BITS_TYPE[out.dtype.to_real().itemsize]), CODE=error_code(op), WRAP=False,
           INDEX_64=needs_index_64(dst1, src1, (shape, index1.stride()), count=n), BLOCK=block)
    after_checked_launch(dev, lambda: _out_of_range(op, index1, dst1.shape[d], d, False))
    return out


_REDUCE_CODES = {"sum": K.REDUCE_SUM, "add": K.REDUCE_SUM, "prod": K.REDUCE_PROD, "multiply": K.REDUCE_PROD,
                 "amax": K.REDUCE_MAX, "amin": K.REDUCE_MIN, "mean": K.REDUCE_SUM}


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
    index = _on(index, dev)
    src = _on(src, dev)
    if src.dtype is not out.dtype or src._storage is out._storage:
        src = src.to(out.dtype, copy=True)
    if not include_self:
        scatter_into(out, dim, index, _identity(reduce, out.dtype), op)
    dst1, index1, src1 = _as_nd(out, 1), _as_nd(index, 1), _as_nd(src, 1)
    if out.dtype.is_complex:
        dst1, src1 = _real_pair(dst1), _real_pair(src1)
        index1 = index1._view((*index1.shape, 2), (*index1.stride(), 0))
    shape = list(index1.shape)
    dim_n = shape[d]
    shape[d] = 1
    shape = tuple(shape)
    n = math.prod(shape)
    counts = None
    if reduce == "mean":
        counts = fill_(new_tensor(out.shape, _I32, dev), 0)
    block = _block(dev)
    flags = _arith_flags(out.dtype.to_real())
    launch(K.dim_scatter_reduce, (cdiv(n, block),), dev,
           [dst1, src1, index1, dst1 if counts is None else counts, n, dim_n, shape, dst1.stride(), src1.stride(),
            index1.stride(), dst1.shape[d], _status(dev)],
           RANK=len(shape), DIM=d, REDUCE=_REDUCE_CODES[reduce], COUNT=counts is not None, CODE=error_code(op),
           WRAP=False, INDEX_64=needs_index_64(dst1, src1, index1), BLOCK=block, **flags)
    after_checked_launch(dev, lambda: _out_of_range(op, index1, dst1.shape[d], d, False))
    if counts is not None:
        total = out.numel()
        launch(K.divide_by_counts, (cdiv(total, block),), dev,
               [out, counts, total, 1 if include_self else 0],
               FLOOR=not out.dtype.is_floating_point, INDEX_64=needs_index_64(count=total), BLOCK=block, **flags)
    return out


@register("scatter_", family="indexing", aten=["aten::scatter_.src", "aten::scatter_.value",
                                               "aten::scatter_.reduce", "aten::scatter_.value_reduce"],
          meta=_scatter_meta, cost=_scatter_cost, api=(), methods=("scatter_",), variants=(OUT_OF_PLACE,))
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


@register("scatter_add_", family="indexing", aten=["aten::scatter_add_.default"], meta=_scatter_meta,
          cost=_scatter_cost, api=(), methods=("scatter_add_",), variants=(OUT_OF_PLACE,))
def scatter_add_(x: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """Adds ``src[c]`` into ``x`` at ``c`` with ``c[dim]`` replaced by ``index[c]``; duplicates add
    in index order (deterministic, no atomics)."""
    return _scatter_reduce_into(x, dim, index, src, "sum", True, "scatter_add_")


@register("scatter_reduce_", family="indexing", aten=["aten::scatter_reduce_.two"], meta=_scatter_meta,
          cost=_scatter_cost, api=(), methods=("scatter_reduce_",), variants=(OUT_OF_PLACE,))
def scatter_reduce_(x: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,
                    include_self: bool = True) -> Tensor:
    """Reduce (sum, prod, mean, amax, amin) ``src`` into ``x`` along ``dim`` at ``index``; without
    ``include_self`` the original values of the elements hit do not take part."""
    return _scatter_reduce_into(x, dim, index, src, reduce, include_self, "scatter_reduce_")


# ---- index_add, index_copy, index_fill ---------------------------------------------------------------

def _same_meta(x, *args, **kwargs):
    return TensorMeta(tuple(x.shape), x.dtype)


def _index_along_cost(x, dim, index, *args, **kwargs):
    return Cost(bytes_read=nbytes(x), bytes_written=nbytes(x))


def _check_source(x: Tensor, d: int, index: Tensor, source: Tensor, op: str) -> None:
    expected = list(x.shape) if x.ndim else [1]
    expected[d] = index.numel()
    got = list(source.shape) if source.ndim else [1]
    if got != expected:
        raise RuntimeError(f"{op}: source of shape {list(source.shape)} does not match the expected shape "
                           f"{expected} (self {list(x.shape)} with dim {d} of the index's length {index.numel()})")


@register("index_add_", family="indexing", aten=["aten::index_add_.default"], meta=_same_meta,
          cost=_index_along_cost, api=(), methods=("index_add_",), variants=(OUT_OF_PLACE,))
def index_add_(x: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha=1) -> Tensor:
    """``x[..., index[i], ...] += alpha * source[..., i, ...]`` along ``dim``; duplicate indices add
    up in order."""
    plan = _dim_plan(x, dim, index, "index_add_")
    _check_source(x, plan.positions[0], index, source, "index_add_")
    source = source._view(plan.geometry()[0], S.contiguous_strides(plan.geometry()[0])) if source.ndim == 0 else source
    _put(plan, source, "index_add_", accumulate=True, alpha=None if alpha == 1 else alpha)
    return x


@register("index_copy_", family="indexing", aten=["aten::index_copy_.default"], meta=_same_meta,
          cost=_index_along_cost, api=(), methods=("index_copy_",), variants=(OUT_OF_PLACE,))
def index_copy_(x: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    plan = _dim_plan(x, dim, index, "index_copy_")
    _check_source(x, plan.positions[0], index, source, "index_copy_")
    _put(plan, source if source.ndim else source._view((1,), (1,)), "index_copy_")
    return x


@register("index_fill_", family="indexing", aten=["aten::index_fill_.int_Scalar", "aten::index_fill_.int_Tensor"],
          meta=_same_meta, cost=_index_along_cost, api=(), methods=("index_fill_",), variants=(OUT_OF_PLACE,))
def index_fill_(x: Tensor, dim: int, index: Tensor, value) -> Tensor:
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, got {value.ndim} dimensions")
        value = value.item()
    _put(_dim_plan(x, dim, index, "index_fill_", wrap=True), value, "index_fill_")
    return x


# ---- masks ---------------------------------------------------------------------------------------

def _check_mask(mask: Tensor, op: str) -> None:
    if mask.dtype.kind != "bool":
        raise RuntimeError(f"{op}: expected a boolean mask, got {mask.dtype.name}")


@register("masked_select", family="indexing", aten=["aten::masked_select.default"],
          meta=lambda x, mask: TensorMeta((None,), x.dtype),
          cost=lambda x, mask: Cost(bytes_read=nbytes(x) + nbytes(mask), bytes_written=nbytes(x)),
          methods=("masked_select",))
def masked_select(x: Tensor, mask: Tensor) -> Tensor:
    """The elements of ``x`` where ``mask`` is True (both broadcast), as a 1-D tensor in row-major
    order. Its length depends on the mask, so this waits for the device."""
    _check_mask(mask, "masked_select")
    shape = S.broadcast_shapes(tuple(x.shape), tuple(mask.shape))
    return advanced_get(expand(x, shape), (expand(_on(mask, x.device), shape),)) if len(shape) else \
        advanced_get(x, (_on(mask, x.device),))


@register("masked_scatter_", family="indexing", aten=["aten::masked_scatter_.default"], meta=_same_meta,
          cost=lambda x, mask, source: Cost(bytes_read=nbytes(mask) + nbytes(x), bytes_written=nbytes(x)),
          api=(), methods=("masked_scatter_",))
def masked_scatter_(x: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """Copies consecutive elements of ``source`` into ``x`` where ``mask`` (broadcast) is True."""
    _check_mask(mask, "masked_scatter_")
    mask = expand(_on(mask, x.device), tuple(x.shape))
    plan = _plan(x, (mask,))
    count = math.prod(plan.index_shape)
    flat = reshape(source, (-1,))
    if flat.numel() < count:
        raise RuntimeError(f"masked_scatter_: the mask selects {count} elements, more than the source's {flat.numel()}")
    _put(plan, narrow(flat, 0, 0, count), "masked_scatter_")
    return x


@register("masked_scatter", family="indexing", aten=["aten::masked_scatter.default"],
          meta=lambda x, mask, source: TensorMeta(S.broadcast_shapes(tuple(x.shape), tuple(mask.shape)), x.dtype),
          cost=lambda x, mask, source: Cost(bytes_read=nbytes(mask) + nbytes(x), bytes_written=nbytes(x)),
          methods=("masked_scatter",))
def masked_scatter(x: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    shape = S.broadcast_shapes(tuple(x.shape), tuple(mask.shape))
    out = new_tensor(shape, x.dtype, x.device)
    copy_(out, expand(x, shape))
    return masked_scatter_.impl(out, mask, source)


# ---- nonzero -------------------------------------------------------------------------------------

def _nonzero_meta(x, as_tuple=False):
    if as_tuple:
        return tuple(TensorMeta((None,), _I64) for _ in range(max(len(x.shape), 1)))
    return TensorMeta((None, len(x.shape)), _I64)


@register("nonzero", family="indexing", aten=["aten::nonzero.default"], meta=_nonzero_meta,
          cost=lambda x, as_tuple=False: Cost(bytes_read=nbytes(x), bytes_written=S.numel(x.shape) * 8 * len(x.shape)),
          methods=("nonzero",))
def nonzero(x: Tensor, *, as_tuple: bool = False):
    """Coordinates of the nonzero elements, one row each in row-major order ((count, ndim) int64),
    or one vector per dim with ``as_tuple``. The count depends on the data, so this waits for the
    device: a block count, a scan on the host, then a compaction."""
    if x.dtype.is_complex:
        pairs = view_as_real(x)
        flags = new_tensor(x.shape, _BOOL, x.device)
        copy_(flags, pairs[..., 0])
        flags.masked_fill_(_as_flags(pairs[..., 1]), True)
        return nonzero.impl(flags, as_tuple=as_tuple)
    dev = x.device
    n = x.numel()
    rank = x.ndim
    shape, strides = (tuple(x.shape), x.stride()) if rank else ((1,), (0,))
    block = min(_block(dev), 4096)
    blocks = cdiv(n, block)
    if n == 0:
        out = new_tensor((0, rank), _I64, dev)
    else:
        counts = new_tensor((blocks,), _I32, dev)
        index_64 = needs_index_64((shape, strides), count=n)
        launch(K.nonzero_count, (blocks,), dev, [x, counts, n, shape, strides],
               RANK=len(shape), INDEX_64=index_64, BLOCK=block)
        per_block = counts.numpy().astype(np.int64)
        starts = np.concatenate([[0], np.cumsum(per_block)[:-1]]).astype(np.int64)
        total = int(per_block.sum())
        out = new_tensor((total, len(shape)), _I64, dev)
        if total:
            launch(K.nonzero_write, (blocks,), dev, [x, tensor(starts, device=dev), out, n, shape, strides],
                   RANK=len(shape), INDEX_64=index_64, BLOCK=block)
        if rank == 0:
            out = out._view((total, 0), (1, 1))
    if as_tuple:
        if rank == 0:
            return (new_tensor((out.shape[0],), _I64, dev).fill_(0),)
        return tuple(select(out, 1, d) for d in range(rank))
    return out


def _as_flags(t: Tensor) -> Tensor:
    flags = new_tensor(t.shape, _BOOL, t.device)
    return copy_(flags, t)


@register("argwhere", family="indexing", aten=["aten::argwhere.default"], meta=lambda x: _nonzero_meta(x),
          cost=lambda x: Cost(bytes_read=nbytes(x)), methods=("argwhere",))
def argwhere(x: Tensor) -> Tensor:
    return nonzero.impl(x)


@register("where_condition", family="indexing", aten=["aten::where.default"],
          meta=lambda condition: _nonzero_meta(condition, as_tuple=True),
          cost=lambda condition: Cost(bytes_read=nbytes(condition)), api=())
def where_condition(condition: Tensor):
    """``torch.where(condition)``: ``nonzero(condition, as_tuple=True)``."""
    return nonzero.impl(condition, as_tuple=True)


# ---- samples ---------------------------------------------------------------------------------------

def _index_of(count: int, *shape, distinct=False):
    return operand(*shape, dtype="int64", values="distinct" if distinct else "index", domain=(0, count))


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
    "index": Samples((sample(_MATRIX, [_index_of(2, 4)]), sample(_TRANSPOSED, [None, _index_of(2, 2, 2)]),
                      sample(_MATRIX, [_index_of(2, 3), _index_of(3, 3)]),
                      sample(operand(0, 3), [None, _index_of(3, 2)])),
                     lambda x, indices: x[tuple(slice(None) if i is None else i for i in indices)]),
    "index_put": Samples((sample(_MATRIX, [_index_of(2, 2, distinct=True)], operand(3)),
                          sample(_TRANSPOSED, [_index_of(3, 4), _index_of(2, 4)], operand(4), True),
                          sample(_MATRIX, [operand(2, 3, dtype="bool")], operand()),
                          sample(operand(4, dtype="int64"), [_index_of(4, 3, distinct=True)], operand(3, dtype="int64"))),
                         _index_put_reference),
    "index_select": Samples((sample(_MATRIX, 0, _index_of(2, 3)), sample(_TRANSPOSED, 1, _index_of(2, 4)),
                             sample(operand(), 0, _index_of(1, 1)), sample(operand(0, 3), 1, _index_of(3, 2)),
                             sample(operand(2, 4, dtype="int64", layout="sliced"), -1, _index_of(4, 1))),
                            lambda x, dim, index: np.take(x, index, axis=dim) if np.ndim(x) else x),
    "embedding": Samples((sample(operand(4, 3), _index_of(4, 2, 3)), sample(operand(5, 2, layout="transposed"), _index_of(5, 4)),
                          sample(operand(3, 2), _index_of(3), padding_idx=1), sample(operand(4, 3), _index_of(4, 0))),
                         lambda weight, indices, *ignored, **ignored_too: weight[indices]),
    "gather": Samples((sample(_MATRIX, 1, _index_of(3, 2, 2)), sample(_TRANSPOSED, 0, _index_of(3, 2, 2)),
                       sample(operand(), 0, _index_of(1)), sample(operand(0, 3), 1, _index_of(3, 0, 2)),
                       sample(operand(2, 4, dtype="int64", layout="sliced"), -1, _index_of(4, 2, 5))),
                      lambda x, dim, index, **ignored: _along(x, dim, index) if np.ndim(x) else x.reshape(index.shape)),
    "take_along_dim": Samples((sample(_MATRIX, _index_of(3, 2, 2), 1), sample(_TRANSPOSED, _index_of(6, 4)),
                               sample(operand(2, 4, dtype="int64", layout="sliced"), _index_of(2, 1, 4), 0)),
                              lambda x, indices, dim=None: np.take_along_axis(x.reshape(-1) if dim is None else x, indices,
                                                                              axis=0 if dim is None else dim)),
    "take": Samples((sample(_MATRIX, _index_of(6, 4)), sample(_TRANSPOSED, _index_of(6, 2, 2)), sample(operand(), _index_of(1)),
                     sample(operand(2, 4, dtype="int64", layout="sliced"), _index_of(8, 3))),
                    lambda x, index: np.take(x.reshape(-1), index)),
    # one index along the scattered dim: writes never collide
    "scatter": Samples((sample(operand(3, 3), 0, _index_of(3, 1, 3), operand(2, 3)),
                        sample(_TRANSPOSED, 1, _index_of(2, 3, 1), operand(3, 1)),
                        sample(operand(3, 3), 1, _index_of(3, 2, 1), value=1.5),
                        sample(operand(3, 3), 0, _index_of(3, 2, 3), operand(2, 3), reduce="add")),
                       lambda x, dim, index, src=None, value=None, reduce=None: _scatter_reference(
                           np.add if reduce == "add" else np.multiply if reduce == "multiply" else None)(
                           x, dim, index, src, value=value)),
    "scatter_add": Samples((sample(operand(3, 3), 0, _index_of(3, 2, 3), operand(2, 3)),
                            sample(_TRANSPOSED, 1, _index_of(2, 3, 2), operand(3, 2)),
                            sample(operand(4, dtype="int64"), 0, _index_of(4, 6), operand(6, dtype="int64"))),
                           _scatter_reference(np.add)),
    "scatter_reduce": Samples((sample(operand(3, 3), 0, _index_of(3, 2, 3), operand(2, 3), "sum"),
                               sample(_TRANSPOSED, 1, _index_of(2, 3, 2), operand(3, 2), "amax"),
                               sample(operand(3, 3), 0, _index_of(3, 2, 3), operand(2, 3), "prod", include_self=False),
                               sample(operand(4), 0, _index_of(4, 6), operand(6), "mean"))),
    "index_add": Samples((sample(operand(3, 2), 0, _index_of(3, 4), operand(4, 2)),
                          sample(_TRANSPOSED, 1, _index_of(2, 3), operand(3, 3), alpha=2),
                          sample(operand(4, dtype="int64"), 0, _index_of(4, 2), operand(2, dtype="int64"))),
                         _index_add_reference),
    "index_copy": Samples((sample(operand(3, 2), 0, _index_of(3, 2, distinct=True), operand(2, 2)),
                           sample(_TRANSPOSED, 1, _index_of(2, 1, distinct=True), operand(3, 1))), _index_copy_reference),
    "index_fill": Samples((sample(operand(3, 2), 0, _index_of(3, 2), 1.5), sample(_TRANSPOSED, 1, _index_of(2, 3), -1.0),
                           sample(operand(4, dtype="int64"), 0, _index_of(4, 2), operand(dtype="int64"))),
                          _index_fill_reference),
    "masked_select": Samples((sample(_MATRIX, operand(2, 3, dtype="bool")), sample(_TRANSPOSED, operand(2, dtype="bool")),
                              sample(operand(0, 3), operand(3, dtype="bool"))),
                             lambda x, mask: np.broadcast_to(x, np.broadcast_shapes(x.shape, mask.shape))[
                                 np.broadcast_to(mask, np.broadcast_shapes(x.shape, mask.shape))]),
    "masked_scatter": Samples((sample(_MATRIX, operand(2, 3, dtype="bool"), operand(6)),
                               sample(_TRANSPOSED, operand(2, dtype="bool"), operand(2, 3))), _masked_scatter_reference),
    "nonzero": Samples((sample(operand(2, 3, dtype="int64", values="index", domain=(0, 2))),
                        sample(operand(4, dtype="bool"), as_tuple=True), sample(operand(0, 3)), sample(operand(dtype="bool"))),
                       lambda x, as_tuple=False: tuple(np.nonzero(x)) if as_tuple else np.argwhere(x)),
    "argwhere": Samples((sample(operand(2, 3, dtype="int64", values="index", domain=(0, 2))), sample(operand(4, dtype="bool")),
                         sample(operand(0, 3))), np.argwhere),
    "where_condition": Samples((sample(operand(2, 3, dtype="bool")), sample(operand(4, dtype="int64", values="index",
                                                                                  domain=(0, 2)))),
                               lambda condition: tuple(np.nonzero(condition))),
}
for _name in ("index_put", "scatter", "scatter_add", "scatter_reduce", "index_add", "index_copy", "index_fill",
              "masked_scatter"):
    _SAMPLES[_name + "_"] = _SAMPLES[_name]
family_samples("indexing", by_name(_SAMPLES))
