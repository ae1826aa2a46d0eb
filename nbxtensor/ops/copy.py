"""Copy, cast and fill: every one of them is the one strided copy kernel."""
from __future__ import annotations

import contextlib
import functools
import math
import threading
import warnings

import numpy as np
import triton.language as tl

from .. import shape as S
from ..device import backend_for, device as _device
from ..dtypes import get_dtype
from ..kernels.copy import (FORMAT_BOOL, FORMAT_NATIVE, PAIRS_DESTINATION, PAIRS_NONE, PAIRS_SOURCE,
                            SMALL_FLOAT_FORMATS, SOURCE_CONSTANT, SOURCE_TENSOR, load_format, strided_copy)
from ..launch import cdiv, launch_slots, refuse_capture
from ..lowering import needs_index_64
from ..promotion import result_type
from ..storage import Storage
from ..tensor import Size, Tensor
from ..tensor import layout_key as tensor_layout_key
from .plans import PlanCache, layout_key
from .registry import Cost, TensorMeta, family_samples, nbytes, register, workspace_bytes
from .samples import Samples, by_name, operand, sample, unary_samples

# Dims the copy kernel indexes directly; a copy of more dims (after merging) loops over the rest.
KERNEL_MAX_RANK = 8
_BITS_TYPE = {1: "int8", 2: "int16", 4: "int32", 8: "int64"}


# While a graph runs on its planned arena, this serves every allocation its steps make (see
# graph/arena.py): a step's planned outputs in their places, its temporaries from its planned workspace.
arena_service = None
# Per thread: how deep in ``scratch_scope`` (every allocation an op's temporary, never a planned output)
# and whether in ``outside_arena`` (every allocation from the allocator). A graph runs in one thread, and
# another thread's plan making or scratch must not change how it is served.
_arena_local = threading.local()


@functools.lru_cache(maxsize=4096)
def _contiguous_layout(shape: tuple) -> tuple:
    """(contiguous strides, elements) of ``shape``, kept: every op's outputs repeat a few shapes call after
    call."""
    return S.contiguous_strides(shape), S.numel(shape)


def _strided_layout(shape: tuple, strides) -> tuple:
    """(strides, elements the memory spans) of ``shape`` laid out with ``strides``."""
    strides = tuple(strides)
    return strides, S.max_offset(shape, strides) + 1 if S.numel(shape) else 0


def new_tensor(shape, dtype, dev: _device, strides=None, pinned: bool = False) -> Tensor:
    """Uninitialised memory for a tensor of ``shape`` (contiguous unless ``strides`` are given);
    ``pinned`` asks for page-locked host memory."""
    shape = tuple(shape)
    strides, count = _contiguous_layout(shape) if strides is None else _strided_layout(shape, strides)
    if pinned and dev.type != "cpu":
        raise RuntimeError(f"pin_memory applies to CPU tensors, not {dev}")
    if dev.type == "meta":
        return Tensor._meta(shape, dtype, strides)
    return allocate_tensor(shape, strides, dtype, dev, count * dtype.itemsize, pinned)


def scratch_tensor(shape, dtype, dev: _device) -> Tensor:
    """Uninitialised contiguous memory for an op's internal temporary (never its result): inside a graph
    run it comes from the step's planned workspace, which the op's cost rule declares (``Cost.workspace``,
    each temporary counted by ``registry.workspace_bytes``); elsewhere from the allocator."""
    shape = tuple(shape)
    strides, count = _contiguous_layout(shape)
    return allocate_tensor(shape, strides, dtype, dev, count * dtype.itemsize, scratch=True)


@contextlib.contextmanager
def scratch_scope():
    """Every allocation made inside is an op's temporary (``scratch_tensor``): for an op that builds its
    result through other ops, around the calls whose results it does not return."""
    _arena_local.scratch_depth = getattr(_arena_local, "scratch_depth", 0) + 1
    try:
        yield
    finally:
        _arena_local.scratch_depth -= 1


@contextlib.contextmanager
def outside_arena():
    """Allocations made inside come from the allocator even while a graph runs: for making an op's plan,
    whose probes and tuning trials belong to the first call of a layout (as compiling does), not to the
    step it runs in."""
    outside = getattr(_arena_local, "outside", False)
    _arena_local.outside = True
    try:
        yield
    finally:
        _arena_local.outside = outside


def allocate_tensor(shape: tuple, strides: tuple, dtype, dev: _device, nbytes: int, pinned: bool = False,
                    scratch: bool = False) -> Tensor:
    """``new_tensor`` for callers that know the strides and byte size already (planned ops)."""
    if arena_service is not None and nbytes and not pinned and not getattr(_arena_local, "outside", False):
        # (the arena is not page-locked)
        served = arena_service(shape, strides, dtype, dev, nbytes,
                               scratch or getattr(_arena_local, "scratch_depth", 0) > 0)
        if served is not None:
            return served
    return Tensor._make(Storage(dev, nbytes, pinned=pinned), 0, shape, strides, dtype)


def fresh_tensor_maker(shape, dtype, dev: _device, strides=None):
    """``make()``: a fresh tensor laid out as ``new_tensor(shape, dtype, dev, strides)`` makes it, for a
    plan that makes one at every call. The layout is worked out once and given to each tensor (its
    ``layout_key``); the memory is a block the allocator parked for the current stream where there is
    one (no Python in the allocator), else the allocator's. While a graph runs on its arena, the arena
    serves the request as it serves ``new_tensor``'s."""
    shape = Size(shape)
    strides, count = _contiguous_layout(tuple(shape)) if strides is None else _strided_layout(shape, strides)
    nbytes = count * dtype.itemsize
    backend, index = backend_for(dev), dev.index
    parked, allocate = backend.parked_buffers(index), backend.allocate
    stream_of = getattr(backend, "current_stream_handle", None)
    layout = tensor_layout_key(shape, strides, dtype, dev)

    def make() -> Tensor:
        if arena_service is not None or not nbytes:
            made = allocate_tensor(shape, strides, dtype, dev, nbytes)
        else:
            buffer = (parked and parked(nbytes, stream_of(index))) or allocate(nbytes, index)
            made = Tensor._make(Storage(dev, nbytes, buffer), 0, shape, strides, dtype)
        made._layout = layout
        return made
    return make


class Workspace:
    """An op plan's temporaries, carved at each call from one allocation (one allocator round trip instead
    of one per temporary); each piece starts 16 bytes after the one before it, rounded up."""

    def __init__(self, pieces: dict):
        """``pieces``: name -> (shape, dtype)."""
        self.pieces, offset = [], 0
        for name, (shape, dtype) in pieces.items():
            shape = tuple(shape)
            self.pieces.append((name, shape, S.contiguous_strides(shape), offset, dtype))
            offset += self._piece_bytes(shape, dtype)
        self.nbytes = offset

    @staticmethod
    def _piece_bytes(shape, dtype) -> int:
        return -(-S.numel(tuple(shape)) * dtype.itemsize // 16) * 16

    @classmethod
    def bytes_for(cls, pieces) -> int:
        """The workspace bytes a cost rule declares for a ``Workspace`` of ``pieces`` (name -> (shape,
        dtype), or just (shape, dtype) pairs): its one temporary, as ``workspace_bytes`` counts it."""
        pairs = list(pieces.values() if isinstance(pieces, dict) else pieces)
        return workspace_bytes(max(sum(cls._piece_bytes(shape, dtype) for shape, dtype in pairs), 1)) if pairs else 0

    def allocate(self, device, tensors: dict) -> None:
        """Put a fresh tensor for every piece into ``tensors``."""
        if self.pieces:
            self.carve(scratch_tensor((max(self.nbytes, 1),), _BYTES, device), tensors)

    def carve(self, buffer: Tensor, tensors: dict) -> None:
        """Put every piece, a view of ``buffer`` (uint8, at least ``nbytes`` long, starting on 16 bytes in its
        storage), into ``tensors``."""
        for name, shape, strides, offset, dtype in self.pieces:
            start = (buffer._offset + offset) // dtype.itemsize
            tensors[name] = buffer._view(shape, strides, offset=start, dtype=dtype)


_BYTES = get_dtype("uint8")


def _check_data(t: Tensor, op: str) -> None:
    if t.is_meta:
        raise RuntimeError(f"{op}: a meta tensor has no data")


def _elementwise_block(dev: _device) -> int:
    return backend_for(dev).facts["kernels"]["elementwise_block"]


def _conversion_flags(st, dt, dev: _device) -> dict:
    """Kernel settings that convert ``st`` elements to ``dt`` (both real dtypes) as ATen does, on ``dev``.
    bfloat16 is rounded by bit arithmetic unless the device's facts say its own cast rounds to
    nearest-even (GPUs do; Triton's interpreter truncates)."""
    if st is dt:  # bits as they are, but a bool's byte read as 0 or 1 so that copies come out canonical
        return dict(SRC_FORMAT=FORMAT_BOOL if st.kind == "bool" else FORMAT_NATIVE, DST_FORMAT=FORMAT_NATIVE,
                    VIA_F32=False, FLOAT_TO_INT=False)
    native_bf16 = dt.name == "bfloat16" and backend_for(dev).facts["kernels"].get("bf16_cast_rounds", False)
    return dict(
        SRC_FORMAT=load_format(st),
        DST_FORMAT=FORMAT_BOOL if dt.kind == "bool" else FORMAT_NATIVE if native_bf16
        else SMALL_FLOAT_FORMATS.get(dt.name, FORMAT_NATIVE),
        # ATen builds Half and BFloat16 from a float: wider sources round to float32 first
        VIA_F32=dt.name == "float16" or native_bf16,
        # into 8- and 16-bit integers through int64, so that negative floats wrap into unsigned types
        # as ATen's casts do; int32 and int64 directly, as the CPU's conversion instructions do
        FLOAT_TO_INT=st.is_floating_point and dt.is_integral and dt.itemsize <= 2,
    )


class _CopyPlan:
    """What one geometry of copy needs besides its pointers and its constant: worked out once. ``args``
    are the kernel's arguments with None where a call's destination, source and constant go
    (``_VARYING``; a copy from a tensor has constant 0, fixed, and varies in its two tensors alone, so
    that its launch can go straight to the bound launcher); ``bound`` is what ``launch_slots`` keeps of
    the compiled kernel."""

    __slots__ = ("grid", "args", "constexprs", "constexpr_key", "bound")

    def __init__(self, grid, n, shape, dst_strides, src_strides, constexprs, from_tensor: bool):
        self.grid = grid
        self.args = [None, None, n, 0 if from_tensor else None, shape, dst_strides, src_strides]
        self.constexprs = constexprs
        self.constexpr_key = tuple(constexprs.items())
        self.bound = {}


_VARYING = [0, 1, 3]  # strided_copy's destination, source and constant bits
_VARYING_TENSORS = [0, 1]  # a copy from a tensor: destination and source


_SPLIT = object()  # a plan marker: more dims than the kernel indexes, copied one leading index at a time
_copy_plans = PlanCache()


def _plan_copy(dst: Tensor, src: Tensor | None, pairs: int):
    n = dst.numel()
    src_strides = src.stride() if src is not None else (0,) * dst.ndim
    shape, (dst_strides, src_strides) = S.coalesce(dst.shape, dst.stride(), src_strides)
    if len(shape) > KERNEL_MAX_RANK:
        return _SPLIT
    if not shape:
        shape, dst_strides, src_strides = (1,), (0,), (0,)
    # the imaginary component of a pair sits one element past the offsets the strides reach
    extra = 1 if pairs != PAIRS_NONE else 0
    index_64 = needs_index_64((shape, dst_strides), (shape, src_strides), count=n, reach=extra)
    dt = dst.dtype
    if src is None:
        flags = dict(SOURCE=SOURCE_CONSTANT, SRC_FORMAT=FORMAT_NATIVE, DST_FORMAT=FORMAT_NATIVE,
                     VIA_F32=False, FLOAT_TO_INT=False)
    else:
        flags = dict(SOURCE=SOURCE_TENSOR, **_conversion_flags(src.dtype, dt, dst.device))
    block = _elementwise_block(dst.device)
    constexprs = dict(RANK=len(shape), SOURCE=flags.pop("SOURCE"),
                      CONSTANT_BITS_TYPE=getattr(tl, _BITS_TYPE[dt.itemsize]), **flags, PAIRS=pairs,
                      INDEX_64=index_64, BLOCK=block)
    return _CopyPlan((cdiv(n, block),), n, shape, dst_strides, src_strides, constexprs, src is not None)


def _run_copy(dst: Tensor, src: Tensor | None, constant_bits: int = 0, pairs: int = PAIRS_NONE) -> None:
    """One launch of the copy kernel writing all of ``dst``; ``src`` already broadcast to ``dst``.
    With ``pairs``, the complex side is given as its real components (``view_as_real`` then select
    0), the imaginary component one element after each."""
    if dst.numel() == 0:
        return
    key = (dst._shape, dst._strides, dst._dtype, dst.device,
           None if src is None else (src._strides, src._dtype), pairs)
    plan = _copy_plans.get(key, lambda: _plan_copy(dst, src, pairs))
    if plan is _SPLIT:
        for i in range(dst.shape[0]):
            _run_copy(dst[i], None if src is None else src[i], constant_bits, pairs)
        return
    if src is None:
        launch_slots(strided_copy, plan.grid, dst.device, plan.args, _VARYING, [dst, dst, constant_bits],
                     plan.constexprs, plan.constexpr_key, plan.bound)
    else:
        launch_slots(strided_copy, plan.grid, dst.device, plan.args, _VARYING_TENSORS, [dst, src], plan.constexprs,
                     plan.constexpr_key, plan.bound)


def _has_internal_overlap(t: Tensor) -> bool:
    """A broadcast (stride 0) dim: several elements share one memory location. An empty tensor has no
    elements to share one (ATen counts it dense)."""
    return t.numel() != 0 and any(st == 0 and n > 1 for n, st in zip(t.shape, t.stride()))


def _check_overlap(dst: Tensor, src: Tensor) -> None:
    """ATen's checks before a write: ``dst`` may not be broadcast, and ``src`` may not partially
    overlap it. As in ATen, overlap is judged only when both are non-overlapping and dense; for
    other layouts (``x[::2]`` against ``x[1::2]``) it is too hard to tell, and the copy goes ahead."""
    if _has_internal_overlap(dst):
        raise RuntimeError("unsupported operation: more than one element of the written-to tensor refers to a "
                           "single memory location; clone() the tensor before writing to it")
    if src._storage is not dst._storage or src.numel() == 0 or dst.numel() == 0:
        return
    if not (S.is_non_overlapping_and_dense(dst.shape, dst.stride())
            and S.is_non_overlapping_and_dense(src.shape, src.stride())):
        return
    dst_begin, src_begin = dst.data_ptr(), src.data_ptr()
    dst_end, src_end = dst_begin + dst.nbytes, src_begin + src.nbytes
    if (dst_begin, dst_end) == (src_begin, src_end):
        if dst.stride() == src.stride():
            return
    elif not (dst_begin < src_end and src_begin < dst_end):
        return
    raise RuntimeError("unsupported operation: some elements of the input tensor and the written-to tensor "
                       "refer to a single memory location; clone() the source first")


def _copy_meta(dst, src, non_blocking=False):
    S.broadcast_strides(src.shape, S.contiguous_strides(src.shape), dst.shape)
    return TensorMeta(tuple(dst.shape), dst.dtype)


def _copy_cost(dst, src, non_blocking=False):
    return Cost(bytes_read=nbytes(src), bytes_written=nbytes(dst))


@register("copy_", family="copy", aten=["aten::copy_.default", "aten::copy.default"], meta=_copy_meta,
          cost=_copy_cost, api=(), methods=("copy_",))
def copy_(dst: Tensor, src, non_blocking: bool = False) -> Tensor:
    """Write ``src`` (broadcast to ``dst``'s shape, converted to its dtype) into ``dst``."""
    if not isinstance(src, Tensor):
        raise TypeError(f"copy_ expects a Tensor source, got {type(src).__name__}; use fill_ for a scalar")
    _check_data(dst, "copy_")
    _check_data(src, "copy_")
    _check_overlap(dst, src)
    if src._shape != dst._shape:
        src = src._view(dst.shape, S.broadcast_strides(src.shape, src.stride(), dst.shape))
    if src.device != dst.device:
        if src.dtype is dst.dtype and dst.is_contiguous() and src.is_contiguous():
            _bytes_between(dst, src, blocking=not non_blocking)
            return dst
        src = _transfer(src, dst.device)
    if dst.dtype.is_complex or src.dtype.is_complex:
        _copy_complex(dst, src)
    else:
        _run_copy(dst, src)
    return dst


def _copy_complex(dst: Tensor, src: Tensor) -> None:
    from .views import select, view_as_real
    if dst.dtype.is_complex and src.dtype.is_complex:
        _run_copy(view_as_real(dst), view_as_real(src))
    elif dst.dtype.is_complex:
        _run_copy(select(view_as_real(dst), -1, 0), src, pairs=PAIRS_DESTINATION)
    else:
        if dst.dtype.kind != "bool":
            warnings.warn("Casting complex values to real discards the imaginary part", UserWarning, stacklevel=4)
        _run_copy(dst, select(view_as_real(src), -1, 0), pairs=PAIRS_SOURCE)


def _transfer(src: Tensor, dev: _device) -> Tensor:
    """The same values, same dtype, contiguous, on ``dev``."""
    out = new_tensor(src.shape, src.dtype, dev)
    if src.numel():
        _bytes_between(out, _dense(src))
    return out


def _dense(t: Tensor) -> Tensor:
    """``t`` or a contiguous copy of it; host memory is rearranged on the host, so this works for CPU
    tensors in a process whose kernels are compiled for a GPU."""
    if t.is_contiguous():
        return t
    if backend_for(t.device).host_addressable:
        from .creation import from_numpy
        return from_numpy(np.ascontiguousarray(t.numpy()))
    return contiguous(t)


def _bytes_between(dst: Tensor, src: Tensor, blocking: bool = True) -> None:
    """Copy the bytes of contiguous ``src`` into contiguous ``dst`` (same dtype and size) across
    devices. A copy that does not wait for the GPU is honoured only from or to pinned memory."""
    nbytes = src.nbytes
    if nbytes == 0:
        return
    refuse_capture("copies between devices")
    host_dst, host_src = backend_for(dst.device).host_addressable, backend_for(src.device).host_addressable
    if host_dst and host_src:
        backend_for(dst.device).copy_raw(dst.data_ptr(), src.data_ptr(), nbytes, None, "h2h")
    elif host_src and not src._storage.pinned:
        backend_for(dst.device).upload_from_host(dst.data_ptr(), src.data_ptr(), nbytes, dst.device.index)
    elif host_src:
        backend_for(dst.device).copy_raw(dst.data_ptr(), src.data_ptr(), nbytes, dst.device.index, "h2d", blocking)
    elif host_dst:
        backend_for(src.device).copy_raw(dst.data_ptr(), src.data_ptr(), nbytes, src.device.index, "d2h",
                                         blocking or not dst._storage.pinned)
    else:
        backend_for(dst.device).copy_raw(dst.data_ptr(), src.data_ptr(), nbytes, dst.device.index, "d2d", blocking)


def constant_bits(value, dt) -> int:
    """``value`` as the bits of a ``dt`` element; Python scalars are remembered, since the same few
    fill values recur."""
    if type(value) is float:  # keyed by its exact text: 0.0 == -0.0, and NaN equals nothing
        return _float_bits(value.hex(), dt)
    if type(value) in (bool, int):
        return _integer_bits(value, dt)
    return _constant_bits(value, dt)


@functools.lru_cache(maxsize=1024)
def _float_bits(text: str, dt) -> int:
    return _constant_bits(float.fromhex(text), dt)


@functools.lru_cache(maxsize=1024, typed=True)
def _integer_bits(value, dt) -> int:
    return _constant_bits(value, dt)


def _constant_bits(value, dt) -> int:
    """``value`` converted to dtype ``dt`` as ATen's fill does (``checked_convert``), returned as the
    integer holding its bits. A value that the dtype cannot hold raises instead of wrapping, except
    that a negative integer may wrap into an unsigned type (uint8 fill -1 gives 255), as in ATen."""
    if isinstance(value, Tensor):
        value = value.item()
    if isinstance(value, np.generic):
        value = value.item()
    if dt.kind == "bool":  # ATen never reports overflow into bool: any nonzero value is True
        return int(bool(value))
    if isinstance(value, complex):
        if value.imag != 0:
            raise _overflow(value, dt)
        value = value.real
    if dt.is_integral:
        info = np.iinfo(dt.numpy)
        if isinstance(value, float):
            # the range check comes before truncation: int8 fill 127.5 raises, fill 2.7 gives 2
            if not info.min <= value <= info.max:
                raise _overflow(value, dt)
            value = int(value)
        value = int(value)
        wraps = dt.kind == "uint" and value < 0 and -value <= info.max
        if not (info.min <= value <= info.max or wraps):
            raise _overflow(value, dt)
        return int(np.array(value % (1 << dt.bits) if wraps else value, dtype=dt.numpy).view(_BITS_TYPE[dt.itemsize]))
    value = float(value)
    if math.isinf(value) and not _has_infinity(dt):
        raise _overflow(value, dt)
    if math.isfinite(value) and abs(value) > float(_finfo_max(dt)):
        raise _overflow(value, dt)
    # ATen's Scalar holds a double; half, bfloat16 and float8 are built from it through float32
    arr = np.array(value, dtype=np.float64 if dt.itemsize == 8 else np.float32)
    if dt.itemsize < 4:
        arr = arr.astype(dt.numpy)
    return int(arr.view(_BITS_TYPE[dt.itemsize]))


def _overflow(value, dt) -> RuntimeError:
    return RuntimeError(f"value {value} cannot be converted to type {dt.name} without overflow")


def _has_infinity(dt) -> bool:
    return bool(np.isinf(np.array(np.inf, dtype=np.float32).astype(dt.to_real().numpy)))


@functools.cache
def _finfo_max(dt):
    import ml_dtypes
    return ml_dtypes.finfo(dt.numpy).max


def _fill_meta(x, value):
    return TensorMeta(tuple(x.shape), x.dtype)


def _fill_cost(x, value):
    return Cost(bytes_written=nbytes(x))


@register("fill_", family="copy", aten=["aten::fill_.Scalar", "aten::fill.Scalar"], meta=_fill_meta,
          cost=_fill_cost, api=(), methods=("fill_",))
def fill_(x: Tensor, value) -> Tensor:
    """Set every element of ``x`` (whatever its strides) to ``value``; a meta tensor has no elements to set."""
    if x.is_meta:
        return x
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise RuntimeError(f"fill_ only supports a 0-dimension value tensor, got {value.ndim} dimensions")
        if value.device != x.device:
            value = value.item()
        else:
            # a value that is a view of x is read before x is written
            return copy_(x, clone(value) if value._storage is x._storage else value)
    # no check for a broadcast x: writing one value to a shared location is well defined (ATen agrees)
    if x.dtype.is_complex:
        from .views import select, view_as_real
        value = complex(value)
        component = x.dtype.to_real()
        real_bits, imag_bits = constant_bits(value.real, component), constant_bits(value.imag, component)
        pairs = view_as_real(x)
        _run_copy(select(pairs, -1, 0), None, real_bits)
        _run_copy(select(pairs, -1, 1), None, imag_bits)
        return x
    _run_copy(x, None, constant_bits(value, x.dtype))
    return x


def zero_(x: Tensor) -> Tensor:
    return fill_(x, 0)


def _clone_meta(x, memory_format=None):
    return TensorMeta(tuple(x.shape), x.dtype)


def _clone_cost(x, memory_format=None):
    return Cost(bytes_read=nbytes(x), bytes_written=nbytes(x))


_converted_outputs = PlanCache()  # (input layout, dtype, whether strides are preserved) -> the output's maker


def format_strides(op: str, memory_format, shape, strides) -> tuple | None:
    """Strides of a fresh tensor of ``shape`` made in ``memory_format`` (None is ``preserve_format``) from one
    laid out with ``strides``; None for row-major. ``preserve_format`` keeps a dense layout's strides."""
    name = S.memory_format_name(op, memory_format)
    if name == "preserve_format":
        return S.dense_strides_like(shape, strides)
    if name == "contiguous_format":
        return None
    return S.channels_last_strides(shape, name)


@register("clone", family="copy", aten=["aten::clone.default"], meta=_clone_meta, cost=_clone_cost,
          methods=("clone",))
def clone(x: Tensor, memory_format=None) -> Tensor:
    """A copy with its own storage; a dense input keeps its strides (``preserve_format``), ``contiguous_format``
    makes them row-major and the channels-last formats put the channel dim innermost."""
    _check_data(x, "clone")
    return _converted(x, x.dtype, memory_format)


def _converted(x: Tensor, dt, memory_format) -> Tensor:
    """A fresh tensor of ``x``'s shape on its device holding its values as ``dt``, laid out in
    ``memory_format``. Its output's maker is kept per (layout, dtype, format); the output is fresh, so none
    of ``copy_``'s checks apply."""
    name = S.memory_format_name("to", memory_format)
    out = _converted_outputs.get((layout_key(x), dt, name), lambda: fresh_tensor_maker(
        x.shape, dt, x.device, format_strides("to", name, x.shape, x.stride())))()
    if x.dtype.is_complex or dt.is_complex:
        _copy_complex(out, x)
    else:
        _run_copy(out, x)
    return out


@register("contiguous", family="copy", aten=["aten::contiguous.default"], meta=_clone_meta, cost=_clone_cost,
          api=(), methods=("contiguous",))
def contiguous(x: Tensor, memory_format=None) -> Tensor:
    """``x`` itself where it is already laid out in ``memory_format`` (row-major unless told), else a copy
    that is."""
    name = "contiguous_format" if memory_format is None else S.memory_format_name("contiguous", memory_format)
    if name == "preserve_format":
        raise RuntimeError("preserve memory format is unsupported by the contiguous operator")
    if x.is_contiguous(memory_format=name):
        return x
    strides = None if name == "contiguous_format" else S.channels_last_strides(x.shape, name)
    return copy_(new_tensor(x.shape, x.dtype, x.device, strides), x)


def _to_meta(x, device=None, dtype=None, copy=False, memory_format=None):
    return TensorMeta(tuple(x.shape), x.dtype if dtype is None else get_dtype(dtype))


def _to_cost(x, device=None, dtype=None, copy=False, memory_format=None):
    out = _to_meta(x, device, dtype)
    return Cost(bytes_read=nbytes(x), bytes_written=nbytes(out))


@register("to", family="copy", aten=["aten::_to_copy.default", "aten::to.dtype", "aten::to.device",
                                     "aten::to.dtype_layout"], meta=_to_meta, cost=_to_cost, api=())
def to(x: Tensor, device=None, dtype=None, copy: bool = False, memory_format=None) -> Tensor:
    """``x`` on ``device`` as ``dtype``; ``x`` itself when nothing changes, no copy is asked and, as in
    ATen, ``memory_format`` is the one ATen suggests for ``x``'s strides (contiguous unless they look like
    channels_last), whether or not ``x`` is contiguous."""
    dev = x.device if device is None else _resolve(device)
    dt = x.dtype if dtype is None else get_dtype(dtype)
    name = S.memory_format_name("to", memory_format)
    if dev.type == "meta":  # shapes only: nothing to copy
        return Tensor._meta(x.shape, dt, format_strides("to", name, x.shape, x.stride()))
    _check_data(x, "to")
    if dev == x.device and dt is x.dtype and not copy and name in ("preserve_format", _suggested_format(x)):
        return x
    if dev == x.device:
        return _converted(x, dt, name)
    if name != "preserve_format":
        return contiguous(to(x, dev, dt), memory_format=name)
    if dt is x.dtype:
        return _transfer(x, dev)
    if _can_compute(x.device):
        return _transfer(to(x, dtype=dt), dev)
    return to(_transfer(x, dev), dtype=dt)


def _suggested_format(x: Tensor) -> str:
    """ATen's ``suggest_memory_format``: the channels-last format where the strides look like one."""
    if S.strides_like_channels_last(x.shape, x.stride()):
        return "channels_last" if x.ndim == 4 else "channels_last_3d"
    return "contiguous_format"


def _resolve(dev) -> _device:
    from ..device import resolve
    return resolve(dev)


def _can_compute(dev: _device) -> bool:
    try:
        backend_for(dev).check_kernels()
    except RuntimeError:
        return False
    return True


def _cat_meta(tensors, dim=0):
    return _cat_geometry(tensors, dim)[0]


def _cat_geometry(tensors, dim):
    tensors = list(tensors)
    if not tensors:
        raise S.ShapeError("cat expects a non-empty list of tensors")
    for i, t in enumerate(tensors):
        if len(t.shape) == 0:
            raise S.ShapeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated")
    live = [(i, t) for i, t in enumerate(tensors) if tuple(t.shape) != (0,)]
    if not live:
        return TensorMeta((0,), result_type(*tensors)), 0, []
    ref_i, ref = live[0]
    d = S.wrap_dim(dim, len(ref.shape))
    total = 0
    for i, t in live:
        if len(t.shape) != len(ref.shape):
            raise S.ShapeError(f"tensors must have the same number of dimensions: tensor {ref_i} has "
                             f"{len(ref.shape)}, tensor {i} has {len(t.shape)}")
        for k, (a, b) in enumerate(zip(t.shape, ref.shape)):
            if k != d and a != b:
                raise S.ShapeError(f"sizes of tensors must match except in dimension {d}: expected size {b} but "
                                 f"got size {a} for tensor number {i} in the list (dimension {k})")
        total += t.shape[d]
    shape = list(ref.shape)
    shape[d] = total
    return TensorMeta(tuple(shape), result_type(*[t.dtype for t in tensors])), d, live


def _cat_cost(tensors, dim=0):
    out = _cat_meta(tensors, dim)
    return Cost(bytes_read=sum(nbytes(t) for t in tensors), bytes_written=nbytes(out))


@register("cat", family="copy", aten=["aten::cat.default"], meta=_cat_meta, cost=_cat_cost,
          api=("cat", "concat", "concatenate"))
def cat(tensors, dim: int = 0) -> Tensor:
    """Join tensors along ``dim`` (promoting dtypes); 1-D empty tensors are skipped as ATen does."""
    tensors = list(tensors)
    out_meta, d, live = _cat_geometry(tensors, dim)
    devices = {t.device for t in tensors}
    if len(devices) > 1:
        raise RuntimeError(f"cat expects all tensors on one device, got {', '.join(sorted(map(str, devices)))}")
    out = new_tensor(out_meta.shape, out_meta.dtype, tensors[0].device)
    start = 0
    from .views import narrow
    for _, t in live:
        n = t.shape[d]
        copy_(narrow(out, d, start, n), t)
        start += n
    return out


def _stack_meta(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise S.ShapeError("stack expects a non-empty list of tensors")
    ref = tuple(tensors[0].shape)
    for i, t in enumerate(tensors):
        if tuple(t.shape) != ref:
            raise S.ShapeError(f"stack expects each tensor to be equal size, but got {ref} at entry 0 and "
                             f"{tuple(t.shape)} at entry {i}")
    d = S.wrap_dim(dim, len(ref), allow_end=True)
    return TensorMeta((*ref[:d], len(tensors), *ref[d:]), result_type(*[t.dtype for t in tensors]))


def _stack_cost(tensors, dim=0):
    return Cost(bytes_read=sum(nbytes(t) for t in tensors), bytes_written=nbytes(_stack_meta(tensors, dim)))


@register("stack", family="copy", aten=["aten::stack.default"], meta=_stack_meta, cost=_stack_cost)
def stack(tensors, dim: int = 0) -> Tensor:
    tensors = list(tensors)
    meta = _stack_meta(tensors, dim)
    d = S.wrap_dim(dim, tensors[0].ndim, allow_end=True)
    from .views import select
    out = new_tensor(meta.shape, meta.dtype, tensors[0].device)
    for i, t in enumerate(tensors):
        copy_(select(out, d, i), t)
    return out


Tensor.zero_ = zero_


# ---- samples ---------------------------------------------------------------------------------------

def _copy_into(dst, src, non_blocking=False):
    return np.broadcast_to(src, dst.shape).astype(dst.dtype)


_COPY_SAMPLES = {
    "copy_": Samples((sample(operand(2, 3), operand(3, dtype="int64")),
                      sample(operand(3, 2, layout="transposed"), operand(3, 2, layout="sliced")),
                      sample(operand(dtype="int64"), operand(values="positive")), sample(operand(0, 3), operand(0, 3)),
                      sample(operand(2, 4, dtype="bfloat16", layout="sliced"), operand(2, 4, layout="broadcast")),
                      sample(operand(12, dtype="float64"), operand(12, values="edge"))), _copy_into),
    "fill_": Samples((sample(operand(2, 3), 1.5), sample(operand(3, 2, dtype="int64", layout="transposed"), 3),
                      sample(operand(), operand(dtype="float64")), sample(operand(0, 3), 2.0),
                      sample(operand(2, 4, dtype="bool", layout="sliced"), True)),
                     lambda x, value: np.full(x.shape, value).astype(x.dtype)),
    "clone": Samples(unary_samples(("float32", "int64")), np.copy),
    "contiguous": Samples(unary_samples(("float32", "int64")), np.copy),
    "to": Samples((sample(operand(2, 3), dtype=get_dtype("float16")), sample(operand(3, 2, layout="transposed"), copy=True),
                   sample(operand(), dtype=get_dtype("int64")), sample(operand(0, 3), dtype=get_dtype("bfloat16")),
                   sample(operand(2, 4, dtype="int64", layout="sliced"), dtype=get_dtype("float32")),
                   sample(operand(12, values="edge"), dtype=get_dtype("bfloat16"))),
                  lambda x, device=None, dtype=None, **ignored: x if dtype is None else x.astype(dtype.numpy)),
    "cat": Samples((sample([operand(2, 3), operand(1, 3)]), sample([operand(3, 2, layout="transposed"), operand(3, 1)], 1),
                    sample([operand(0, 3), operand(2, 3, dtype="int64")]), sample([operand(0), operand(2, 3)], -1),
                    sample([operand(2, 4, dtype="int64", layout="sliced"), operand(2, 4, layout="broadcast")])),
                   lambda tensors, dim=0: np.concatenate([t for t in tensors if t.shape != (0,)], axis=dim)),
    "stack": Samples((sample([operand(2, 3), operand(2, 3)]), sample([operand(3, 2, layout="transposed"), operand(3, 2)], 2),
                      sample([operand(), operand(dtype="int64")]), sample([operand(0, 3)], 1),
                      sample([operand(2, 4, dtype="int64", layout="sliced"), operand(2, 4, layout="broadcast")], -1)),
                     lambda tensors, dim=0: np.stack(tensors, axis=dim)),
}
family_samples("copy", by_name(_COPY_SAMPLES))
