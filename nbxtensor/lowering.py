"""Decisions about how an op's operands reach a kernel, shared by every op family (a layer below ``ops``:
it reads layouts and dtypes only, never a tensor's memory, and imports no op): the one 64-bit-index
decision, the element conversions every op rounds by, the block of elementwise kernels, and a scalar as
the bits of an element (``encode_scalar``, checked as ATen's fill; ``encode_scalar_wrapping``, as ATen casts an
arithmetic operand)."""
from __future__ import annotations

import functools
import math

import ml_dtypes
import numpy as np

from . import shape as S
from .device import backend_for
from .kernels.formats import FORMAT_BOOL, FORMAT_NATIVE, SMALL_FLOAT_FORMATS

# The integer type of each element size, by name (NumPy's and Triton's): an element's bits travel as one.
BITS_TYPE = {1: "int8", 2: "int16", 4: "int32", 8: "int64"}

INT32_LIMIT = 2 ** 31  # the first element count or offset that int32 index arithmetic cannot hold


def needs_index_64(*operands, count: int = 0, reach: int = 0) -> bool:
    """Whether a kernel computes element offsets in 64 bits (its ``INDEX_64`` constexpr): when it indexes
    ``count`` elements or more than int32 holds, or an operand (a tensor, or a (shape, strides) pair) has
    that many elements or reaches an offset, plus ``reach`` elements the kernel addresses past it (a
    complex pair's imaginary part), that int32 does not hold."""
    if count >= INT32_LIMIT:
        return True
    for operand in operands:
        shape, strides = operand if isinstance(operand, tuple) else (operand.shape, operand.stride())
        if S.numel(shape) >= INT32_LIMIT or S.max_offset(shape, strides) + reach >= INT32_LIMIT:
            return True
    return False


def division_magic(d: int) -> tuple:
    """(magic, shift) with n // d == (n * magic) >> shift for every index 0 <= n < INT32_LIMIT: magic is
    ceil(INT32_LIMIT * 2**l / d), l = ceil(log2(d)), under 2**32; n * magic / 2**shift exceeds n / d by under
    n / INT32_LIMIT / d < 1 / d, short of the next integer. Passed as the int32 of its bits
    (``kernels/common.divide``, a multiply and a shift in place of a division's twenty-odd instructions)."""
    l = (d - 1).bit_length()
    magic = -(-(INT32_LIMIT << l) // d)
    return (magic - 2 * INT32_LIMIT if magic >= INT32_LIMIT else magic), INT32_LIMIT.bit_length() - 1 + l


def padded_for_kernel(values, fill=1) -> tuple:
    """``values`` as a kernel's tuple argument, which holds at least one entry (``fill`` for an empty one)."""
    return tuple(values) if len(values) else (fill,)


def elementwise_block(dev) -> int:
    """Elements per program of the device's elementwise kernels (its facts' ``elementwise_block``)."""
    return backend_for(dev).facts["kernels"]["elementwise_block"]


def load_format(dtype) -> int:
    """The format (``kernels/formats.py``'s ``FORMAT_*``) a kernel decodes loaded ``dtype`` elements with
    (``formats.decode``); ``conversion_flags`` gives the one it encodes stored elements with."""
    return FORMAT_BOOL.value if dtype.kind == "bool" else float_format(dtype)


def float_format(dtype) -> int:
    """The format of a kernel operand read as a float where it is one: through its bits for bfloat16 and
    float8, natively otherwise (a bool's byte too, unlike ``load_format``)."""
    return SMALL_FLOAT_FORMATS.get(dtype.name, FORMAT_NATIVE.value)


def conversion_flags(st, dt, dev) -> dict:
    """Kernel settings that convert ``st`` elements to ``dt`` (both real dtypes) as ATen does, on ``dev``.
    bfloat16 is rounded by bit arithmetic unless the device's facts say its own cast rounds to
    nearest-even (GPUs do; Triton's interpreter truncates)."""
    if st is dt:  # bits as they are, but a bool's byte read as 0 or 1 so that copies come out canonical
        return dict(SRC_FORMAT=FORMAT_BOOL.value if st.kind == "bool" else FORMAT_NATIVE.value,
                    DST_FORMAT=FORMAT_NATIVE.value, VIA_F32=False, FLOAT_TO_INT=False)
    native_bf16 = dt.name == "bfloat16" and backend_for(dev).facts["kernels"].get("bf16_cast_rounds", False)
    return dict(
        SRC_FORMAT=load_format(st),
        DST_FORMAT=FORMAT_BOOL.value if dt.kind == "bool" else FORMAT_NATIVE.value if native_bf16
        else float_format(dt),
        # ATen builds Half and BFloat16 from a float: wider sources round to float32 first
        VIA_F32=dt.name == "float16" or native_bf16,
        # into 8- and 16-bit integers through int64, so that negative floats wrap into unsigned types
        # as ATen's casts do; int32 and int64 directly, as the CPU's conversion instructions do
        FLOAT_TO_INT=st.is_floating_point and dt.is_integral and dt.itemsize <= 2,
    )


def _remembered_by_value(convert):
    """``convert(value, dt)`` remembered for Python scalars, since the same few recur: floats keyed by their
    exact text (0.0 == -0.0, and NaN equals nothing), integers and bools by value and type; other values
    converted at each call."""
    floats = functools.lru_cache(maxsize=1024)(lambda text, dt: convert(float.fromhex(text), dt))
    integers = functools.lru_cache(maxsize=1024, typed=True)(convert)

    def remembered(value, dt):
        kind = type(value)
        if kind is float:
            return floats(value.hex(), dt)
        if kind is int or kind is bool:
            return integers(value, dt)
        return convert(value, dt)
    return remembered


def _scalar_to_bits(value, dt, wrap: bool) -> int:
    """The one conversion of a scalar to an element's bits; ``wrap`` chooses between ATen's two policies for a
    value the dtype cannot hold (``encode_scalar`` raises, ``encode_scalar_wrapping`` wraps or rounds)."""
    if hasattr(value, "item"):  # a tensor or a NumPy scalar
        value = value.item()
    if dt.kind == "bool":  # ATen never reports overflow into bool: any nonzero value is True
        return int(bool(value))
    if isinstance(value, complex):
        if value.imag != 0 and not wrap:
            raise _overflow(value, dt)
        value = value.real
    if dt.is_integral:
        info = np.iinfo(dt.numpy)
        if isinstance(value, float):
            # the range check comes before truncation: int8 fill 127.5 raises, fill 2.7 gives 2
            if not (math.isfinite(value) if wrap else info.min <= value <= info.max):
                raise _overflow(value, dt)
            value = int(value)
        value = int(value)
        if wrap:  # any integer ATen's 64-bit Scalar holds, reduced modulo the element's width
            in_range = -(1 << 63) <= value < (1 << 64)
        else:  # a negative integer may still wrap into an unsigned type (uint8 fill -1 gives 255)
            in_range = info.min <= value <= info.max or (dt.kind == "uint" and value < 0 and -value <= info.max)
        if not in_range:
            raise _overflow(value, dt)
        bits = value & ((1 << dt.bits) - 1)
        return bits - (1 << dt.bits) if bits >> (dt.bits - 1) else bits  # the signed integer of the element's size
    value = float(value)
    if not wrap:
        if math.isinf(value) and not _has_infinity(dt):
            raise _overflow(value, dt)
        if math.isfinite(value) and abs(value) > float(_finfo_max(dt)):
            raise _overflow(value, dt)
    # ATen's Scalar holds a double; half, bfloat16 and float8 are built from it through float32. Past the
    # checks above, a float out of range is meant to round to infinity: no overflow warning
    with np.errstate(over="ignore"):
        arr = np.array(value, dtype=np.float64 if dt.itemsize == 8 else np.float32)
        if dt.itemsize < 4:
            arr = arr.astype(dt.numpy)
    return int(arr.view(BITS_TYPE[dt.itemsize]))


encode_scalar = _remembered_by_value(functools.partial(_scalar_to_bits, wrap=False))
encode_scalar.__doc__ = """``value`` (a Python or NumPy scalar, or a one-element tensor) converted to dtype ``dt`` as
ATen's fill does (``checked_convert``: a fill value, a scattered or indexed-in value, a bound), returned as the
signed integer holding the element's bits. A value that the dtype cannot hold raises instead of wrapping, except
that a negative integer may wrap into an unsigned type (uint8 fill -1 gives 255), as in ATen."""

encode_scalar_wrapping = _remembered_by_value(functools.partial(_scalar_to_bits, wrap=True))
encode_scalar_wrapping.__doc__ = """``value`` converted to dtype ``dt`` as ATen converts a Python number that is an
operand of arithmetic (``int8_tensor + 300`` adds 44): an integer wraps modulo the element's width, a float out of
range rounds to infinity, a complex value keeps its real part; only an integer beyond 64 bits or a non-finite float
into an integer type raises. Returned as ``encode_scalar`` returns its bits."""


def _overflow(value, dt) -> RuntimeError:
    return RuntimeError(f"value {value} cannot be converted to type {dt.name} without overflow")


def _has_infinity(dt) -> bool:
    return bool(np.isinf(np.array(np.inf, dtype=np.float32).astype(dt.to_real().numpy)))


@functools.cache
def _finfo_max(dt):
    return ml_dtypes.finfo(dt.numpy).max
