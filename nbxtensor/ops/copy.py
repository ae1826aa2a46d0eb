"""Copy, cast and fill: every one of them is the one strided copy kernel."""
from __future__ import annotations

import warnings

import numpy as np
import triton.language as tl

from .. import shape as S
from ..allocation import fresh_tensor_maker, new_tensor, outside_arena
from ..device import backend_for
from ..device import device as _device
from ..device import resolve
from ..dtypes import dtype as _dtype
from ..dtypes import get_dtype
from ..kernels.copy import PAIRS_DESTINATION, PAIRS_NONE, PAIRS_SOURCE, SOURCE_CONSTANT, SOURCE_TENSOR, strided_copy
from ..kernels.formats import FORMAT_NATIVE
from ..launch import cdiv, launch_slots, refuse_capture
from ..lowering import BITS_TYPE, conversion_flags, elementwise_block, encode_scalar, needs_index_64
from ..promotion import result_type
from ..tensor import Tensor
from .plans import PlanCache, PlannedLaunch, Slot, layout_key
from .registry import MAYBE_VIEW, Cost, TensorMeta, family_samples, nbytes, register, tensor_attribute
from .samples import Samples, by_name, operand, sample, unary_samples
from .views import narrow, select, view_as_real

# Dims the copy kernel indexes directly; a copy of more dims (after merging) loops over the rest.
KERNEL_MAX_RANK = 8



def _check_data(t: Tensor, op: str) -> None:
    if t.is_meta:
        raise RuntimeError(f"{op}: a meta tensor has no data")


# a copy's slots: from a tensor, its destination and source (its constant bits 0, fixed, so that its launch
# can go straight to the bound launcher); from a constant, the destination (twice) and the constant's bits
_COPY_SLOTS = (Slot("dst"), Slot("src"))
_FILL_SLOTS = (Slot("dst"), Slot("dst"), Slot("bits"))


_SPLIT = object()  # a plan marker: more dims than the kernel indexes, copied one leading index at a time
_EMPTY = object()  # a plan marker: no element to write
_copy_plans = PlanCache()


def _plan_copy(dst: Tensor, src: Tensor | None, pairs: int):
    n = dst.numel()
    if n == 0:
        return _EMPTY
    src_strides = src.stride() if src is not None else (0,) * dst.ndim
    shape, (dst_strides, src_strides) = S.coalesce(dst.shape, dst.stride(), src_strides)
    if len(shape) > KERNEL_MAX_RANK:
        return _SPLIT
    if not shape:
        shape, dst_strides, src_strides = (1,), (0,), (0,)
    # the imaginary component of a pair sits one element past the offsets the strides reach
    extra = 1 if pairs != PAIRS_NONE.value else 0
    index_64 = needs_index_64((shape, dst_strides), (shape, src_strides), count=n, reach=extra)
    dt = dst.dtype
    if src is None:
        flags = dict(SOURCE=SOURCE_CONSTANT.value, SRC_FORMAT=FORMAT_NATIVE.value, DST_FORMAT=FORMAT_NATIVE.value,
                     VIA_F32=False, FLOAT_TO_INT=False)
    else:
        flags = dict(SOURCE=SOURCE_TENSOR.value, **conversion_flags(src.dtype, dt, dst.device))
    block = elementwise_block(dst.device)
    constexprs = dict(RANK=len(shape), SOURCE=flags.pop("SOURCE"),
                      CONSTANT_BITS_TYPE=getattr(tl, BITS_TYPE[dt.itemsize]), **flags, PAIRS=pairs,
                      INDEX_64=index_64, BLOCK=block)
    dst_slot, src_slot, bits = (*_COPY_SLOTS, 0) if src is not None else _FILL_SLOTS
    return PlannedLaunch(strided_copy, (cdiv(n, block),),
                         [dst_slot, src_slot, n, bits, shape, dst_strides, src_strides], constexprs)


def _run_copy(dst: Tensor, src: Tensor | None, constant_bits: int = 0, pairs: int = PAIRS_NONE.value) -> None:
    """One launch of the copy kernel writing all of ``dst``; ``src`` already broadcast to ``dst``.
    With ``pairs``, the complex side is given as its real components (``view_as_real`` then select
    0), the imaginary component one element after each."""
    key = (layout_key(dst), None if src is None else layout_key(src), pairs)
    plan = _copy_plans.lookup(key)
    if plan is None:
        plan = _copy_plans.get(key, lambda: _plan_copy(dst, src, pairs))
    if plan is _EMPTY:
        return
    if plan is _SPLIT:
        for i in range(dst.shape[0]):
            _run_copy(dst[i], None if src is None else src[i], constant_bits, pairs)
        return
    # ``plan.launch`` inlined: copies are the most frequent launch, and a call frame is a few percent of one
    launch_slots(strided_copy, plan.grid, dst.device, plan.args, plan.positions,
                 [dst, dst, constant_bits] if src is None else [dst, src], plan.constexprs, plan.key, plan.bound)


def has_internal_overlap(t: Tensor) -> bool:
    """A broadcast (stride 0) dim: several elements share one memory location. An empty tensor has no
    elements to share one (ATen counts it dense)."""
    strides = t._strides
    return 0 in strides and t.numel() != 0 and any(st == 0 and n > 1 for n, st in zip(t._shape, strides))


def shares_memory(a: Tensor, b: Tensor) -> bool:
    """Whether ``a`` and ``b`` may touch a byte of one another: one storage, and the byte spans from their
    first to their last element meet. One storage alone says too little: a graph's arena holds every
    intermediate of a run in one."""
    if a._storage is not b._storage or a.numel() == 0 or b.numel() == 0:
        return False
    a_begin, b_begin = a.storage_offset() * a.element_size(), b.storage_offset() * b.element_size()
    a_end = a_begin + (S.max_offset(a.shape, a.stride()) + 1) * a.element_size()
    b_end = b_begin + (S.max_offset(b.shape, b.stride()) + 1) * b.element_size()
    return a_begin < b_end and b_begin < a_end


def check_overlap(dst: Tensor, src: Tensor) -> None:
    """ATen's checks before a write: ``dst`` may not be broadcast, and ``src`` may not partially
    overlap it. As in ATen, overlap is judged only when both are non-overlapping and dense; for
    other layouts (``x[::2]`` against ``x[1::2]``) it is too hard to tell, and the copy goes ahead."""
    if has_internal_overlap(dst):
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


def _copy_meta(a):
    S.broadcast_strides(a.src.shape, S.contiguous_strides(a.src.shape), a.dst.shape)
    return TensorMeta(tuple(a.dst.shape), a.dst.dtype)


def _copy_cost(a):
    return Cost(bytes_read=nbytes(a.src), bytes_written=nbytes(a.dst))


@register("copy_", family="copy", aten=["aten::copy_.default", "aten::copy.default"], meta=_copy_meta,
          cost=_copy_cost, bound=True, api=(), methods=("copy_",))
def copy_(dst: Tensor, src, non_blocking: bool = False) -> Tensor:
    """Write ``src`` (broadcast to ``dst``'s shape, converted to its dtype) into ``dst``."""
    if not isinstance(src, Tensor):
        raise TypeError(f"copy_ expects a Tensor source, got {type(src).__name__}; use fill_ for a scalar")
    _check_data(dst, "copy_")
    _check_data(src, "copy_")
    check_overlap(dst, src)
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
    if dst.dtype.is_complex and src.dtype.is_complex:
        _run_copy(view_as_real(dst), view_as_real(src))
    elif dst.dtype.is_complex:
        _run_copy(select(view_as_real(dst), -1, 0), src, pairs=PAIRS_DESTINATION.value)
    else:
        if dst.dtype.kind != "bool":
            warnings.warn("Casting complex values to real discards the imaginary part", UserWarning, stacklevel=4)
        _run_copy(dst, select(view_as_real(src), -1, 0), pairs=PAIRS_SOURCE.value)


def _transfer(src: Tensor, dev: _device) -> Tensor:
    """The same values, same dtype, on ``dev``, laid out as ATen's ``preserve_format`` copy lays them out: a
    dense layout's strides kept (a channels-last tensor stays channels-last), another made dense in its
    dims' order."""
    strides = S.dense_strides_like(src.shape, src.stride())
    out = new_tensor(src.shape, src.dtype, dev, strides)
    if src.numel():
        _bytes_between(out, _dense(src, strides))
    return out


def _dense(t: Tensor, strides: tuple) -> Tensor:
    """``t`` or a copy of it laid out with the dense ``strides``; host memory is rearranged on the host, so
    this works for CPU tensors in a process whose kernels are compiled for a GPU."""
    if tuple(t.stride()) == strides:
        return t
    if backend_for(t.device).host_addressable:
        with outside_arena():  # a staging copy, as NumPy's would be: never a graph step's planned memory
            out = new_tensor(t.shape, t.dtype, t.device, strides)
        out.numpy()[...] = t.numpy()
        return out
    return clone(t)  # preserve_format: these strides


def _bytes_between(dst: Tensor, src: Tensor, blocking: bool = True) -> None:
    """Copy the bytes of dense ``src`` into ``dst`` laid out alike (same dtype, shape and dense strides) across
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


@register("fill_", family="copy", aten=["aten::fill_.Scalar", "aten::fill.Scalar"],
          meta=lambda a: TensorMeta(tuple(a.x.shape), a.x.dtype), cost=lambda a: Cost(bytes_written=nbytes(a.x)),
          bound=True, api=(), methods=("fill_",))
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
            return copy_(x, clone(value) if shares_memory(value, x) else value)
    # no check for a broadcast x: writing one value to a shared location is well defined (ATen agrees)
    if x.dtype.is_complex:
        value = complex(value)
        component = x.dtype.to_real()
        real_bits, imag_bits = encode_scalar(value.real, component), encode_scalar(value.imag, component)
        pairs = view_as_real(x)
        _run_copy(select(pairs, -1, 0), None, real_bits)
        _run_copy(select(pairs, -1, 1), None, imag_bits)
        return x
    _run_copy(x, None, encode_scalar(value, x.dtype))
    return x


def zero_(x: Tensor) -> Tensor:
    return fill_(x, 0)


# clone's and contiguous's rules, of bound arguments
_CLONE_RULES = {"meta": lambda a: TensorMeta(tuple(a.x.shape), a.x.dtype),
                "cost": lambda a: Cost(bytes_read=nbytes(a.x), bytes_written=nbytes(a.x)), "bound": True}


_converted_plans = PlanCache()  # (input layout, dtype, memory format) -> ``convert(x)``, see ``_plan_converted``


def format_strides(op: str, memory_format, shape, strides) -> tuple | None:
    """Strides of a fresh tensor of ``shape`` made in ``memory_format`` (None is ``preserve_format``) from one
    laid out with ``strides``; None for row-major. ``preserve_format`` keeps a dense layout's strides."""
    name = S.memory_format_name(op, memory_format)
    if name == "preserve_format":
        return S.dense_strides_like(shape, strides)
    if name == "contiguous_format":
        return None
    return S.channels_last_strides(shape, name)


@register("clone", family="copy", aten=["aten::clone.default"], methods=("clone",), **_CLONE_RULES)
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
    key = (layout_key(x), dt, name)
    convert = _converted_plans.lookup(key)
    if convert is None:
        convert = _converted_plans.get(key, lambda: _plan_converted(x, dt, name))
    return convert(x)


def _plan_converted(x: Tensor, dt, name: str):
    """``convert(x)`` for inputs laid out as ``x`` is: the output's maker and, for a real copy into one
    launch, that launch, both worked out once (the output's layout follows from the input's)."""
    make = fresh_tensor_maker(x.shape, dt, x.device, format_strides("to", name, x.shape, x.stride()))
    if x.dtype.is_complex or dt.is_complex:
        def convert_complex(x):
            out = make()
            _copy_complex(out, x)
            return out
        return convert_complex
    plan = _copy_plans.get((layout_key(make()), layout_key(x), PAIRS_NONE.value),
                           lambda: _plan_copy(make(), x, PAIRS_NONE.value))
    if plan is _EMPTY:
        return lambda x: make()
    if plan is _SPLIT:
        def convert_split(x):
            out = make()
            _run_copy(out, x)
            return out
        return convert_split
    device = x.device

    def convert(x):
        out = make()
        plan.launch(device, [out, x])
        return out
    return convert


@register("contiguous", family="copy", aten=["aten::contiguous.default"], api=(), methods=("contiguous",),
          aliases=MAYBE_VIEW, **_CLONE_RULES)
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


def _to_meta(a):
    return TensorMeta(tuple(a.x.shape), a.x.dtype if a.dtype is None else get_dtype(a.dtype))


def _to_cost(a):
    return Cost(bytes_read=nbytes(a.x), bytes_written=nbytes(_to_meta(a)))


def _to_from_aten(*positional, always_copy=False):
    # aten::to and aten::_to_copy: the graph runs on one device with dense tensors, so of the device,
    # layout, pin_memory and non_blocking nothing matters; the dtype, a copy and the memory format do
    def adapt(args, kwargs):
        named = {**dict(zip(positional, args[1:])), **kwargs}
        return args[:1], {"dtype": named.get("dtype"), "copy": always_copy or named.get("copy", False),
                          "memory_format": named.get("memory_format")}
    return adapt


@register("to", family="copy", aten=["aten::_to_copy.default", "aten::to.dtype", "aten::to.device",
                                     "aten::to.dtype_layout"], meta=_to_meta, cost=_to_cost, bound=True, api=(),
          aliases=MAYBE_VIEW,
          adapters={"aten::_to_copy.default": _to_from_aten(always_copy=True),
                    "aten::to.dtype": _to_from_aten("dtype", "non_blocking", "copy", "memory_format"),
                    "aten::to.device": _to_from_aten("device", "dtype", "non_blocking", "copy", "memory_format"),
                    "aten::to.dtype_layout": _to_from_aten()})
def to(x: Tensor, device=None, dtype=None, copy: bool = False, memory_format=None) -> Tensor:
    """``x`` on ``device`` as ``dtype``; ``x`` itself when nothing changes, no copy is asked and, as in
    ATen, ``memory_format`` is the one ATen suggests for ``x``'s strides (contiguous unless they look like
    channels_last), whether or not ``x`` is contiguous."""
    dev = x.device if device is None else resolve(device)
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


def _can_compute(dev: _device) -> bool:
    try:
        backend_for(dev).check_kernels()
    except RuntimeError:
        return False
    return True


def _cat_meta(a):
    return _cat_geometry(a.tensors, a.dim)[0]


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


def _cat_cost(a):
    return Cost(bytes_read=sum(nbytes(t) for t in a.tensors), bytes_written=nbytes(_cat_meta(a)))


@register("cat", family="copy", aten=["aten::cat.default"], meta=_cat_meta, cost=_cat_cost, bound=True,
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
    for _, t in live:
        n = t.shape[d]
        copy_(narrow(out, d, start, n), t)
        start += n
    return out


def _stack_result(tensors, dim) -> TensorMeta:
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


def _stack_cost(a):
    return Cost(bytes_read=sum(nbytes(t) for t in a.tensors), bytes_written=nbytes(_stack_result(a.tensors, a.dim)))


@register("stack", family="copy", aten=["aten::stack.default"], meta=lambda a: _stack_result(a.tensors, a.dim),
          cost=_stack_cost, bound=True)
def stack(tensors, dim: int = 0) -> Tensor:
    tensors = list(tensors)
    meta = _stack_result(tensors, dim)
    d = S.wrap_dim(dim, tensors[0].ndim, allow_end=True)
    out = new_tensor(meta.shape, meta.dtype, tensors[0].device)
    for i, t in enumerate(tensors):
        copy_(select(out, d, i), t)
    return out


# ---- Tensor's conversion methods ---------------------------------------------------------------

def tensor_to(self: Tensor, *args, **kwargs) -> Tensor:
    """``to(dtype)``, ``to(device)``, ``to(device, dtype)``, ``to(other)``; ``copy=True`` forces a copy;
    ``memory_format`` as torch's (``format_strides``)."""
    memory_format = kwargs.pop("memory_format", None)
    dev, dt, copy = _to_arguments(args, kwargs)
    return to(self, device=dev, dtype=dt, copy=copy, memory_format=memory_format)


def _to_arguments(args, kwargs) -> tuple:
    """(device, dtype, copy) of ``Tensor.to``'s arguments, which torch takes in any of its forms."""
    dev = kwargs.pop("device", None)
    dt = kwargs.pop("dtype", None)
    copy = kwargs.pop("copy", False)
    kwargs.pop("non_blocking", None)
    if kwargs:
        raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
    flags = 0
    for a in args:
        if isinstance(a, Tensor):
            dev, dt = a.device, a.dtype
        elif isinstance(a, _dtype) or (type(a).__name__ == "dtype"):
            dt = a
        elif isinstance(a, str):
            dev, dt = _device_or_dtype(a, dev, dt)
        elif isinstance(a, bool):  # before int, which bool is: torch's positional non_blocking, then copy
            flags += 1
            copy = a if flags == 2 else copy
        elif isinstance(a, (_device, int)):
            dev = a
        else:
            dt = a
    return (None if dev is None else _device(dev)), (None if dt is None else get_dtype(dt)), copy


def _device_or_dtype(name: str, dev, dt):
    """(device, dtype) after ``to(name)``: a dtype name sets the dtype, anything else names a device,
    and a device that is not there is an error about the device."""
    try:
        return dev, get_dtype(name)
    except TypeError:
        pass
    try:
        return _device(name), dt
    except (ValueError, TypeError) as e:
        raise ValueError(f"to({name!r}) names neither a dtype nor a device that is here: {e}") from None


def pin_memory(self: Tensor) -> Tensor:
    """This CPU tensor in page-locked memory, which GPU copies reach directly (a copy unless it
    already is)."""
    if self.is_pinned():
        return self
    if self.device.type != "cpu":
        raise RuntimeError(f"pin_memory applies to CPU tensors, not {self.device} ones")
    out = new_tensor(self.shape, self.dtype, self.device, pinned=True)
    out.numpy()[...] = self.numpy()
    return out


# Tensor methods that are ``to(dtype)`` under torch's short names, each taking ``memory_format`` as torch's do
_DTYPE_SHORTHANDS = {"float": "float32", "double": "float64", "half": "float16", "bfloat16": "bfloat16",
                     "int": "int32", "long": "int64", "short": "int16", "char": "int8", "byte": "uint8",
                     "bool": "bool", "cfloat": "complex64", "cdouble": "complex128"}


def _dtype_shorthand(name: str, dtype_name: str):
    target = get_dtype(dtype_name)

    def cast(self, *, memory_format=None) -> Tensor:
        return self.to(target, memory_format=memory_format)
    cast.__name__ = cast.__qualname__ = name
    cast.__doc__ = f"``self.to({dtype_name})``."
    return cast


tensor_attribute("zero_", zero_)
tensor_attribute("to", tensor_to)
tensor_attribute("pin_memory", pin_memory)
for _name, _dtype_name in _DTYPE_SHORTHANDS.items():
    tensor_attribute(_name, _dtype_shorthand(_name, _dtype_name))
del _name, _dtype_name


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
