"""Creation ops: new tensors from shapes, values, ranges, NumPy arrays and Python data."""
from __future__ import annotations

import math
import numbers

import ml_dtypes
import numpy as np
import triton.language as tl

from .. import shape as S
from ..allocation import fresh_tensor_maker, new_tensor
from ..device import backend_for, resolve
from ..dtypes import get_dtype
from ..grad_mode import refuse_requires_grad
from ..interop.dlpack import from_dlpack, tensor_dlpack, tensor_dlpack_device
from ..kernels.ramp import MODE_ARANGE, MODE_LINSPACE, linear_ramp
from ..launch import cdiv, launch, refuse_capture
from ..lowering import conversion_flags, elementwise_block, encode_scalar_wrapping, needs_index_64
from ..promotion import get_default_complex_dtype, get_default_dtype, promote_types
from ..storage import Storage
from ..tensor import Tensor
from .copy import fill_, format_strides
from .plans import PlanCache
from .registry import Cost, TensorMeta, family_samples, nbytes, register, tensor_attribute
from .samples import Sample, Samples, by_name, operand, sample
from .views import as_strided

_I64 = get_dtype("int64")
_BOOL = get_dtype("bool")


def _creation_meta(shape, dtype):
    return TensorMeta(tuple(shape), dtype)


def _factory_strides(op: str, memory_format, shape) -> tuple | None:
    """A new tensor's strides in ``memory_format`` (row-major unless told): there is no input to preserve."""
    if memory_format is None:
        return None
    name = S.memory_format_name(op, memory_format)
    if name == "preserve_format":
        raise RuntimeError(f"{op}: unsupported memory format Preserve (a new tensor has no layout to keep)")
    return None if name == "contiguous_format" else S.channels_last_strides(shape, name)


def _writing_rules(meta, written: bool = True) -> dict:
    """``register``'s meta and cost rules (of bound arguments) of an op that makes one tensor, ``meta`` its meta
    rule; it writes the tensor unless ``written`` is False (it is left uninitialised)."""
    return {"meta": meta, "cost": lambda a: Cost(bytes_written=nbytes(meta(a)) if written else 0), "bound": True}


def _new_meta(size, dtype) -> TensorMeta:
    return TensorMeta(S.normalize_shape(size), get_dtype(dtype) if dtype is not None else get_default_dtype())


_row_major_makers = PlanCache()  # (shape, dtype, device) -> the maker of a fresh row-major tensor


def _factory(name: str, aten, fill):
    """Register ``name(*size, dtype=None, device=None)``; ``fill`` is None (uninitialised) or a value."""
    def impl(*size, dtype=None, device=None, requires_grad=False, pin_memory=False, memory_format=None):
        refuse_requires_grad(requires_grad, name)
        m = _new_meta(size, dtype)
        dev = resolve(device)
        if pin_memory or memory_format is not None or dev.type == "meta":
            out = new_tensor(m.shape, m.dtype, dev, _factory_strides(name, memory_format, m.shape), pinned=pin_memory)
        else:
            key = (m.shape, m.dtype, dev)
            make = _row_major_makers.lookup(key)
            if make is None:
                make = _row_major_makers.get(key, lambda: fresh_tensor_maker(m.shape, m.dtype, dev))
            out = make()
        return out if fill is None else fill_(out, fill)

    impl.__name__ = name
    impl.__doc__ = f"A new tensor of the given size, {'uninitialised' if fill is None else f'filled with {fill}'}."
    return register(name, family="creation", aten=aten,
                    **_writing_rules(lambda a: _new_meta(a.size, a.dtype), written=fill is not None))(impl)


empty = _factory("empty", ["aten::empty.memory_format"], None)
zeros = _factory("zeros", ["aten::zeros.default"], 0)
ones = _factory("ones", ["aten::ones.default"], 1)


def _scalar_dtype(value):
    if isinstance(value, Tensor):
        return value.dtype
    if isinstance(value, (bool, np.bool_)):
        return _BOOL
    if isinstance(value, numbers.Integral):
        return _I64
    if isinstance(value, numbers.Real):
        return get_default_dtype()
    if isinstance(value, numbers.Complex):
        return get_default_complex_dtype()
    raise TypeError(f"fill value must be a number, got {type(value).__name__}")


def _full_meta(size, fill_value, dtype) -> TensorMeta:
    return TensorMeta(S.normalize_shape((size,)), get_dtype(dtype) if dtype is not None else _scalar_dtype(fill_value))


@register("full", family="creation", aten=["aten::full.default"],
          **_writing_rules(lambda a: _full_meta(a.size, a.fill_value, a.dtype)))
def full(size, fill_value, *, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """A tensor of ``size`` filled with ``fill_value``; the dtype follows the value's Python type."""
    refuse_requires_grad(requires_grad, "full")
    m = _full_meta(size, fill_value, dtype)
    return fill_(new_tensor(m.shape, m.dtype, resolve(device), pinned=pin_memory), fill_value)


@register("scalar_tensor", family="creation", aten=["aten::scalar_tensor.default"],
          **_writing_rules(lambda a: _new_meta((), a.dtype)))
def scalar_tensor(s, *, dtype=None, device=None, layout=None, requires_grad=False, pin_memory=False):
    """A 0-d tensor holding ``s``: of the default float dtype unless ``dtype`` says otherwise, as torch's
    (unlike ``full``, the value's Python type does not choose)."""
    refuse_requires_grad(requires_grad, "scalar_tensor")
    m = _new_meta((), dtype)
    return fill_(new_tensor((), m.dtype, resolve(device), pinned=pin_memory), s)


def _like_rules(written: bool) -> dict:
    """The rules of a ``*_like`` op: a tensor shaped like ``x``, written unless ``written`` is False."""
    return _writing_rules(lambda a: TensorMeta(tuple(a.x.shape), a.x.dtype if a.dtype is None else get_dtype(a.dtype)),
                          written)


def like_tensor(op: str, x: Tensor, dtype, device, memory_format) -> Tensor:
    dt = x.dtype if dtype is None else get_dtype(dtype)
    dev = x.device if device is None else resolve(device)
    return new_tensor(x.shape, dt, dev, format_strides(op, memory_format, x.shape, x.stride()))


def _like(name: str, aten, fill):
    def impl(x, *, dtype=None, device=None, requires_grad=False, memory_format=None):
        refuse_requires_grad(requires_grad, name)
        out = like_tensor(name, x, dtype, device, memory_format)
        return out if fill is None else fill_(out, fill)

    impl.__name__ = name
    impl.__doc__ = f"A tensor shaped like ``x``, {'uninitialised' if fill is None else f'filled with {fill}'}."
    return register(name, family="creation", aten=aten, **_like_rules(fill is not None))(impl)


empty_like = _like("empty_like", ["aten::empty_like.default"], None)
zeros_like = _like("zeros_like", ["aten::zeros_like.default"], 0)
ones_like = _like("ones_like", ["aten::ones_like.default"], 1)


@register("full_like", family="creation", aten=["aten::full_like.default"], **_like_rules(True))
def full_like(x, fill_value, *, dtype=None, device=None, requires_grad=False, memory_format=None):
    refuse_requires_grad(requires_grad, "full_like")
    return fill_(like_tensor("full_like", x, dtype, device, memory_format), fill_value)


def _new_methods():
    def new_empty(self, *size, dtype=None, device=None, requires_grad=False):
        refuse_requires_grad(requires_grad, "new_empty")
        return empty(*size, dtype=self.dtype if dtype is None else dtype, device=self.device if device is None else device)

    def new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
        refuse_requires_grad(requires_grad, "new_zeros")
        return zeros(*size, dtype=self.dtype if dtype is None else dtype, device=self.device if device is None else device)

    def new_ones(self, *size, dtype=None, device=None, requires_grad=False):
        refuse_requires_grad(requires_grad, "new_ones")
        return ones(*size, dtype=self.dtype if dtype is None else dtype, device=self.device if device is None else device)

    def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False):
        refuse_requires_grad(requires_grad, "new_full")
        return full(size, fill_value, dtype=self.dtype if dtype is None else dtype,
                    device=self.device if device is None else device)

    def new_tensor(self, data, *, dtype=None, device=None, requires_grad=False):
        refuse_requires_grad(requires_grad, "new_tensor")
        return tensor(data, dtype=self.dtype if dtype is None else dtype, device=self.device if device is None else device)

    for f in (new_empty, new_zeros, new_ones, new_full, new_tensor):
        tensor_attribute(f.__name__, f)


# ---- ranges ----------------------------------------------------------------------------------

def _arange_args(args):
    if len(args) == 1:
        return 0, args[0], 1
    if len(args) == 2:
        return args[0], args[1], 1
    if len(args) == 3:
        return args
    raise TypeError(f"arange takes 1 to 3 positional arguments (end | start, end[, step]), got {len(args)}")


def _is_float_scalar(v) -> bool:
    if isinstance(v, Tensor):
        return v.dtype.is_floating_point
    return isinstance(v, (float, np.floating))


def _check_range(start, end, step) -> None:
    for name, v in (("start", start), ("end", end), ("step", step)):
        if not math.isfinite(v):
            raise ValueError(f"arange: {name} must be finite, got {v}")
    if step == 0:
        raise ValueError("arange: step must be nonzero")
    if (end - start) * step < 0:
        raise ValueError(f"arange: upper bound and larger bound inconsistent with step sign "
                         f"(start={start}, end={end}, step={step})")


def _arange_plan(*args, dtype=None):
    """(length, dtype, start, step) as ATen's arange: an int64 result counts with the bounds and step
    truncated to integers; every other dtype counts with them as given. Integer results hold the
    truncated start plus multiples of the truncated step."""
    start, end, step = (v.item() if isinstance(v, Tensor) else v for v in _arange_args(args))
    if dtype is None:
        dt = get_default_dtype() if any(_is_float_scalar(v) for v in (start, end, step)) else _I64
    else:
        dt = get_dtype(dtype)
    if dt.is_complex or dt.kind == "bool":
        raise TypeError(f"arange does not produce {dt.name} tensors")
    if dt is _I64:
        start, end, step = int(start), int(end), int(step)
        _check_range(start, end, step)
        sign = (step > 0) - (step < 0)
        length = _truncating_div(end - start + step - sign, step)
    else:
        _check_range(start, end, step)
        length = math.ceil((float(end) - float(start)) / float(step))
        if dt.is_integral:
            start, step = int(start), int(step)
    return max(0, int(length)), dt, start, step


def _truncating_div(a: int, b: int) -> int:
    """C++'s integer division, which rounds toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _arange_meta(a):
    n, dt, _, _ = _arange_plan(*a.args, dtype=a.dtype)
    return TensorMeta((n,), dt)


def _run_ramp(out: Tensor, mode, compute: str, start, step, end=0, halfway=0) -> Tensor:
    n = out.numel()
    if n == 0 or out.is_meta:
        return out
    block = elementwise_block(out.device)
    compute_dtype = get_dtype(compute)
    flags = conversion_flags(compute_dtype, out.dtype, out.device)
    launch(linear_ramp, (cdiv(n, block),), out.device,
           [out, n, *(encode_scalar_wrapping(v, compute_dtype) for v in (start, step, end)), halfway],
           MODE=mode, COMPUTE=getattr(tl, compute),
           COMPUTE_BITS=tl.int32 if compute == "float32" else tl.int64, OUT_FORMAT=flags["DST_FORMAT"],
           VIA_F32=flags["VIA_F32"], FLOAT_TO_INT=flags["FLOAT_TO_INT"], INDEX_64=needs_index_64(count=n), BLOCK=block)
    return out


@register("arange", family="creation", aten=["aten::arange.default", "aten::arange.start",
                                             "aten::arange.start_step"], **_writing_rules(_arange_meta))
def arange(*args, dtype=None, device=None, requires_grad=False, **kwargs):
    """``arange(end)``, ``arange(start, end[, step])``; int64 unless a bound or the step is a float."""
    refuse_requires_grad(requires_grad, "arange")
    for key in ("start", "end", "step"):
        if key in kwargs:
            raise TypeError("pass arange's start, end and step positionally")
    n, dt, start, step = _arange_plan(*args, dtype=dtype)
    out = new_tensor((n,), dt, resolve(device))
    # ATen accumulates in int64 for integers, float32 for half types, float64 for float32 and float64
    compute = "int64" if dt.is_integral else "float32" if dt.itemsize <= 2 else "float64"
    return _run_ramp(out, MODE_ARANGE.value, compute, start, step)


def _linspace_meta(steps, dtype) -> TensorMeta:
    return TensorMeta((int(steps),), get_default_dtype() if dtype is None else get_dtype(dtype))


def _integer_bound(value, dt):
    """``value`` converted to integer dtype ``dt`` as ATen's checked Scalar conversion does: a float
    must lie within the type's range and is truncated toward zero; a negative int wraps into an
    unsigned type (down to minus its maximum)."""
    info = np.iinfo(dt.numpy)
    if isinstance(value, numbers.Integral):
        as_int = int(value)
        if info.min <= as_int <= info.max:
            return as_int
        if dt.kind == "uint" and -as_int <= info.max:
            return as_int % (info.max + 1)
    elif info.min <= float(value) <= info.max:
        return int(value)
    raise ValueError(f"linspace: {value} cannot be converted to {dt.name} without overflow")


@register("linspace", family="creation", aten=["aten::linspace.default"],
          **_writing_rules(lambda a: _linspace_meta(a.steps, a.dtype)))
def linspace(start, end, steps: int, *, dtype=None, device=None, requires_grad=False):
    """``steps`` values from ``start`` to ``end`` inclusive; the upper half is counted back from
    ``end`` as ATen does, so both ends are exact."""
    refuse_requires_grad(requires_grad, "linspace")
    start, end = (v.item() if isinstance(v, Tensor) else v for v in (start, end))
    if int(steps) < 0:
        raise ValueError(f"linspace: number of steps must be non-negative, got {steps}")
    m = _linspace_meta(steps, dtype)
    dt = m.dtype
    if dt.is_complex or dt.kind == "bool":
        raise TypeError(f"linspace does not produce {dt.name} tensors")
    out = new_tensor(m.shape, dt, resolve(device))
    steps = int(steps)
    if steps == 1:
        return fill_(out, start)
    if dt.is_integral:
        # ATen converts the ends to the integer type first and steps between them in float64
        start, end = _integer_bound(start, dt), _integer_bound(end, dt)
        compute = "float64"
    else:
        largest = float(ml_dtypes.finfo(dt.numpy).max)
        for v in (start, end):
            if math.isfinite(v) and abs(v) > largest:  # ATen's checked Scalar conversion refuses it too
                raise ValueError(f"linspace: {v} cannot be converted to {dt.name} without overflow")
        # float32 and float64 step in their own precision; half types in float32
        compute = "float64" if dt.name == "float64" else "float32"
    npt = np.float64 if compute == "float64" else np.float32
    with np.errstate(over="ignore", invalid="ignore"):
        s, e = npt(start), npt(end)
        step = (e - s) / npt(steps - 1) if steps > 1 else npt(0)
    return _run_ramp(out, MODE_LINSPACE.value, compute, s, step, e, steps // 2)


def _eye_meta(n, m, dtype) -> TensorMeta:
    return TensorMeta((int(n), int(n if m is None else m)), get_default_dtype() if dtype is None else get_dtype(dtype))


@register("eye", family="creation", aten=["aten::eye.default", "aten::eye.m"],
          **_writing_rules(lambda a: _eye_meta(a.n, a.m, a.dtype)))
def eye(n: int, m: int | None = None, *, dtype=None, device=None, requires_grad=False):
    refuse_requires_grad(requires_grad, "eye")
    meta = _eye_meta(n, m, dtype)
    rows, cols = meta.shape
    if rows < 0 or cols < 0:
        raise ValueError(f"eye: n and m must be non-negative, got n={n}, m={m}")
    out = zeros(rows, cols, dtype=meta.dtype, device=device)
    diagonal = as_strided(out, (min(rows, cols),), (cols + 1,), 0)
    # from out's own start: a graph's arena hands out storage shared with other tensors
    diagonal = as_strided(out, (min(rows, cols),), (cols + 1,), out.storage_offset())
    fill_(diagonal, 1)
    return out


# ---- from host data --------------------------------------------------------------------------

def from_numpy(array: np.ndarray) -> Tensor:
    """A CPU tensor sharing memory with ``array`` (any non-negative strides; 0-d stays 0-d)."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy expects a numpy.ndarray, got {type(array).__name__}")
    if array.dtype.byteorder == ">":
        raise ValueError(f"from_numpy: big-endian arrays ({array.dtype}) are not supported; "
                         "convert with array.astype(array.dtype.newbyteorder('='))")
    dt = get_dtype(array.dtype)
    itemsize = array.itemsize
    if any(s < 0 for s in array.strides):
        raise ValueError(f"from_numpy: negative strides {array.strides} are not supported; "
                         "pass array.copy() or np.ascontiguousarray(array)")
    if any(s % itemsize for s in array.strides):
        raise ValueError(f"from_numpy: strides {array.strides} are not multiples of the element size {itemsize}")
    strides = tuple(s // itemsize for s in array.strides)
    host = backend_for(resolve("cpu"))
    count = S.max_offset(array.shape, strides) + 1 if array.size else 0
    buffer = host.wrap(array, array.ctypes.data, count * itemsize) if count else None
    return Tensor._make(Storage(resolve("cpu"), count * itemsize, buffer), 0, array.shape, strides, dt)


def _infer_python_dtype(data):
    kinds = set()

    def walk(x):
        if isinstance(x, Tensor):
            kinds.add(x.dtype)
        elif isinstance(x, np.ndarray) or isinstance(x, np.generic):
            kinds.add(get_dtype(x.dtype))
        elif isinstance(x, (list, tuple)):
            for item in x:
                walk(item)
        elif isinstance(x, bool):
            kinds.add("bool")
        elif isinstance(x, numbers.Integral):
            kinds.add("int")
        elif isinstance(x, numbers.Real):
            kinds.add("float")
        elif isinstance(x, numbers.Complex):
            kinds.add("complex")
        else:
            raise TypeError(f"cannot build a tensor from {type(x).__name__} ({x!r})")

    walk(data)
    explicit = [k for k in kinds if not isinstance(k, str)]
    if "complex" in kinds or any(k.is_complex for k in explicit):
        return get_default_complex_dtype() if not explicit else _widest(explicit, "complex")
    if "float" in kinds or any(k.is_floating_point for k in explicit):
        return get_default_dtype() if not any(k.is_floating_point for k in explicit) else _widest(explicit, "float")
    if "int" in kinds or any(k.is_integral for k in explicit):
        return _I64 if "int" in kinds or not explicit else _widest(explicit, "int")
    if explicit:
        return explicit[0]
    return _BOOL if kinds else get_default_dtype()


def _widest(dtypes, kind):
    out = dtypes[0]
    for d in dtypes[1:]:
        out = promote_types(out, d)
    return out


def _nested_to_numpy(data, dt) -> np.ndarray:
    def check(x, depth, path):
        if isinstance(x, (list, tuple)):
            return [check(item, depth + 1, path + (i,)) for i, item in enumerate(x)]
        if isinstance(x, Tensor):
            return x.numpy()
        return x

    cleaned = check(data, 0, ())
    try:
        array = np.array(cleaned, dtype=np.float64 if dt.is_floating_point and dt.itemsize <= 2 else dt.numpy)
    except ValueError as e:
        raise ValueError(f"cannot build a tensor from ragged nested sequences: {e}") from None
    return _cast_host(array, dt)


def tensor(data, *, dtype=None, device=None, requires_grad=False, pin_memory=False) -> Tensor:
    """A new tensor holding a copy of ``data`` (nested sequences, scalars, arrays or tensors)."""
    refuse_requires_grad(requires_grad, "tensor")
    dev = resolve(device)
    data = _from_foreign(data)
    if isinstance(data, Tensor):
        return data.to(device=dev, dtype=dtype, copy=True)
    if isinstance(data, (np.ndarray, np.generic)):
        dt = get_dtype(data.dtype) if dtype is None else get_dtype(dtype)
        array = np.asarray(data)
        host = array if array.dtype == dt.numpy and dt.kind != "bool" else _cast_host(array, dt)
    else:
        dt = _infer_python_dtype(data) if dtype is None else get_dtype(dtype)
        host = _nested_to_numpy(data, dt)
    # np.ascontiguousarray would turn a 0-d array into shape (1,)
    return _upload(np.require(host, requirements="C"), dt, dev, pin_memory)


def _from_foreign(data):
    """Another library's array (a torch tensor, a CuPy or JAX array) as a tensor sharing its memory
    through DLPack, which keeps every dtype (bfloat16 too), or as a NumPy array through the array
    protocol; anything else as it is. Duck-typed: no other library is imported."""
    if isinstance(data, (Tensor, np.ndarray, np.generic, list, tuple)) or isinstance(data, numbers.Number):
        return data
    if hasattr(data, "__dlpack__") and hasattr(data, "__dlpack_device__"):
        return from_dlpack(data)
    if hasattr(data, "__array__") or hasattr(data, "__array_interface__"):
        return np.asarray(data)
    return data


def _cast_host(array: np.ndarray, dt) -> np.ndarray:
    """NumPy's cast, except that half, bfloat16 and float8 are reached through float32 as ATen does, and
    bools come out as bytes 0 and 1 even from a bool array holding other bytes for True."""
    if dt.kind == "bool":
        return array != 0
    if dt.is_floating_point and dt.itemsize <= 2 and array.dtype != np.float32 and not (
            array.dtype.kind in "fV" and array.dtype.itemsize <= 2):
        array = array.astype(np.float32)
    return array.astype(dt.numpy)


def _upload(host: np.ndarray, dt, dev, pinned: bool = False) -> Tensor:
    out = new_tensor(host.shape, dt, dev, pinned=pinned)
    if host.size and not out.is_meta:
        refuse_capture("uploads host data")
        backend_for(dev).upload(out.data_ptr(), host.reshape(-1).view(np.uint8), dev.index)
    return out


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """``data`` as a tensor, sharing memory when it already is one (or a CPU NumPy array) of the
    requested dtype and device."""
    data = _from_foreign(data)
    if isinstance(data, Tensor):
        return data.to(device=device if device is not None else data.device, dtype=dtype)
    dev = resolve(device)
    if isinstance(data, np.ndarray) and dev.type == "cpu" and (dtype is None or get_dtype(dtype).numpy == data.dtype):
        try:
            return from_numpy(data)
        except ValueError:
            pass
    return tensor(data, dtype=dtype, device=dev)


_new_methods()
tensor_attribute("__dlpack__", tensor_dlpack)
tensor_attribute("__dlpack_device__", tensor_dlpack_device)


# ---- samples ---------------------------------------------------------------------------------------

def _sized(function):
    """A reference of ``op(*size, dtype=)`` from ``function(shape, dtype)``."""
    def reference(*size, dtype=None, **ignored):
        shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
        return function(shape, np.float64 if dtype is None else dtype.numpy)
    return reference


def _like(function):
    def reference(x, *args, dtype=None, **ignored):
        return function(x.shape, *args).astype(x.dtype if dtype is None else dtype.numpy)
    return reference


def _arange_reference(*args, dtype=None, **ignored):
    values = np.arange(*args)
    return values.astype(dtype.numpy) if dtype is not None else values


_EMPTY = dict(compare="metadata")  # uninitialised memory: shapes and dtypes only
_LIKE = (sample(operand(2, 3)), sample(operand(3, 2, dtype="int64", layout="transposed")), sample(operand()),
         sample(operand(0, 3), dtype=get_dtype("float16")))
_SAMPLES = {
    "empty": Samples((sample(2, 3, **_EMPTY), sample((0, 3), dtype=get_dtype("int64"), **_EMPTY), sample(**_EMPTY))),
    "zeros": Samples((sample(2, 3), sample((0, 3), dtype=get_dtype("int64")), sample(), sample([4], dtype=get_dtype("bool"))),
                     _sized(np.zeros)),
    "ones": Samples((sample(2, 3), sample((0, 3), dtype=get_dtype("int64")), sample(), sample([4], dtype=get_dtype("bfloat16"))),
                    _sized(np.ones)),
    "full": Samples((sample((2, 3), 1.5), sample((0, 3), 2), sample((), True), sample([4], -1.0, dtype=get_dtype("float16")),
                     sample((2,), 7, dtype=get_dtype("int32"))),
                    lambda size, fill_value, dtype=None, **ignored: np.full(size, fill_value)),
    "scalar_tensor": Samples((sample(1.5), sample(2, dtype=get_dtype("int64")), sample(True, dtype=get_dtype("bool"))),
                             lambda s, dtype=None, **ignored: np.asarray(s)),
    "empty_like": Samples(tuple(Sample(case.args, case.kwargs, "metadata") for case in _LIKE)),
    "zeros_like": Samples(_LIKE, _like(np.zeros)),
    "ones_like": Samples(_LIKE, _like(np.ones)),
    "full_like": Samples(tuple(Sample(case.args + (2,), case.kwargs) for case in _LIKE),
                         lambda x, fill_value, dtype=None, **ignored: np.full(
                             x.shape, fill_value).astype(x.dtype if dtype is None else dtype.numpy)),
    "arange": Samples((sample(5), sample(1, 4), sample(0.0, 1.0, 0.25), sample(5, 0, -2), sample(0),
                       sample(3, dtype=get_dtype("float32"))), _arange_reference),
    "linspace": Samples((sample(0.0, 1.0, 5), sample(-1, 1, 1), sample(2.0, -2.0, 4), sample(0, 1, 0),
                         sample(0, 10, 6, dtype=get_dtype("int64"))),
                        lambda start, end, steps, dtype=None, **ignored: np.linspace(start, end, steps)),
    "eye": Samples((sample(3), sample(2, 4), sample(0), sample(3, 1, dtype=get_dtype("int64"))),
                   lambda n, m=None, dtype=None, **ignored: np.eye(n, m)),
}
family_samples("creation", by_name(_SAMPLES))
