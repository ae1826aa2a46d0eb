"""How a kernel reads and writes an element: the format codes (``tl.constexpr`` globals a kernel compares
its ``*_FORMAT`` constexprs with by name; the host passes their ``.value``, ``lowering.load_format`` and
``lowering.conversion_flags`` choose them) and ``decode``/``encode``, the pair every kernel that loads or
stores elements of any dtype converts them with.

bfloat16 and float8 are converted with integer arithmetic on their bits rather than Triton's casts:
Triton's interpreter truncates float32 to bfloat16 instead of rounding it, misreads float8 NaN, and
the GPU's float8 conversion saturates where ATen's gives NaN (e4m3fn) or infinity (e5m2). The bit
arithmetic gives ATen's results on every device.
"""
import triton
import triton.language as tl

# as Triton's own type, or through bit arithmetic
FORMAT_NATIVE = tl.constexpr(0)
FORMAT_BFLOAT16 = tl.constexpr(1)
FORMAT_E4M3FN = tl.constexpr(2)
FORMAT_E5M2 = tl.constexpr(3)
# bool: read as (byte != 0) and written as 1 for nonzero, 0 for zero. Memory shared with NumPy, a uint8
# view or a DLPack producer may hold any byte for True, so no kernel computes with a bool's raw byte.
FORMAT_BOOL = tl.constexpr(4)

# the format codes of the floats read through their bits, by dtype name, as the host passes them
SMALL_FLOAT_FORMATS = {"bfloat16": FORMAT_BFLOAT16.value, "float8_e4m3fn": FORMAT_E4M3FN.value,
                       "float8_e5m2": FORMAT_E5M2.value}


@triton.jit
def round_shift_right(value, shift):
    """``value >> shift`` (uint32, shift >= 1) rounded to nearest, ties to even."""
    half_minus_one = (tl.full(value.shape, 1, tl.uint32) << (shift - 1)) - 1
    return (value + half_minus_one + ((value >> shift) & 1)) >> shift


@triton.jit
def encode_small_float(x, EXP_BITS: tl.constexpr, MAN_BITS: tl.constexpr, FINITE_ONLY: tl.constexpr,
                        NAN_BITS: tl.constexpr):
    """The bits (uint32, sign included) of float32 ``x`` rounded to nearest-even into a float of
    EXP_BITS exponent and MAN_BITS mantissa bits. Overflow gives infinity; a FINITE_ONLY format (no
    infinity, the all-ones pattern is NaN) saturates at its largest finite value instead, infinity
    included, as ATen's float8_e4m3fn conversion does."""
    bias: tl.constexpr = (1 << (EXP_BITS - 1)) - 1
    drop: tl.constexpr = 23 - MAN_BITS
    bits = x.to(tl.uint32, bitcast=True)
    sign = bits >> 31
    magnitude = bits & 0x7FFFFFFF
    exponent = (magnitude >> 23).to(tl.int32)
    # a normal result: move the exponent to the new bias, round the mantissa (a carry runs into the
    # exponent, which is what rounding up to the next binade means)
    rebiased = magnitude - ((127 - bias) << 23)
    normal = round_shift_right(rebiased, tl.full(x.shape, drop, tl.uint32))
    # a subnormal result: the significand with its leading one, shifted to the subnormal step
    significand = (magnitude & 0x7FFFFF) | tl.where(exponent > 0, 0x800000, 0).to(tl.uint32)
    shift = (151 - bias - MAN_BITS) - tl.maximum(exponent, 1)
    shift = tl.minimum(tl.maximum(shift, 1), 31).to(tl.uint32)
    subnormal = round_shift_right(significand, shift)
    out = tl.where(exponent >= 128 - bias, normal, subnormal)
    if FINITE_ONLY:
        largest: tl.constexpr = (1 << (EXP_BITS + MAN_BITS)) - 2
        out = tl.where(out > largest, largest, out)
    else:
        infinity: tl.constexpr = ((1 << EXP_BITS) - 1) << MAN_BITS
        out = tl.where(out >= infinity, infinity, out)
    out = tl.where(magnitude > 0x7F800000, NAN_BITS, out)
    return out | (sign << (EXP_BITS + MAN_BITS))


@triton.jit
def decode_float8(raw, EXP_BITS: tl.constexpr, MAN_BITS: tl.constexpr, FINITE_ONLY: tl.constexpr):
    """float32 values of float8 elements (any Triton float8 type, read by their bits)."""
    bias: tl.constexpr = (1 << (EXP_BITS - 1)) - 1
    bits = raw.to(tl.uint8, bitcast=True).to(tl.uint32)
    sign = (bits >> (EXP_BITS + MAN_BITS)) << 31
    exponent = (bits >> MAN_BITS) & ((1 << EXP_BITS) - 1)
    mantissa = bits & ((1 << MAN_BITS) - 1)
    normal = ((exponent + (127 - bias)) << 23) | (mantissa << (23 - MAN_BITS))
    # a subnormal m * 2^(1 - bias - MAN_BITS) is 2^(1 - bias) * (1 + m / 2^MAN_BITS) - 2^(1 - bias), exactly
    smallest_normal = ((128 - bias) << 23) + mantissa * 0
    subnormal = ((smallest_normal | (mantissa << (23 - MAN_BITS))).to(tl.float32, bitcast=True)
                 - smallest_normal.to(tl.float32, bitcast=True))
    value = tl.where(exponent == 0, subnormal, normal.to(tl.float32, bitcast=True))
    if FINITE_ONLY:
        special = (bits & 0x7F) == 0x7F
        value = tl.where(special, float("nan"), value)
    else:
        special = exponent == (1 << EXP_BITS) - 1
        value = tl.where(special, tl.where(mantissa == 0, float("inf"), float("nan")), value)
    return (value.to(tl.uint32, bitcast=True) | sign).to(tl.float32, bitcast=True)


@triton.jit
def decode(raw, FORMAT: tl.constexpr):
    """Elements as loaded, bools as 0 or 1, or float32 values for the formats read through their bits."""
    if FORMAT == FORMAT_BFLOAT16:
        return (raw.to(tl.uint16, bitcast=True).to(tl.uint32) << 16).to(tl.float32, bitcast=True)
    elif FORMAT == FORMAT_E4M3FN:
        return decode_float8(raw, 4, 3, True)
    elif FORMAT == FORMAT_E5M2:
        return decode_float8(raw, 5, 2, False)
    elif FORMAT == FORMAT_BOOL:
        return (raw != 0).to(tl.uint8)
    else:
        return raw


@triton.jit
def encode(x, out_type, FORMAT: tl.constexpr, VIA_F32: tl.constexpr, FLOAT_TO_INT: tl.constexpr):
    """``x`` converted to ``out_type``, the destination's element type, as ATen converts."""
    if FORMAT == FORMAT_BOOL:
        return (x != 0).to(tl.uint8)
    elif FORMAT == FORMAT_BFLOAT16:
        return encode_small_float(x.to(tl.float32), 8, 7, False, 0x7FC0).to(tl.uint16).to(out_type, bitcast=True)
    elif FORMAT == FORMAT_E4M3FN:
        return encode_small_float(x.to(tl.float32), 4, 3, True, 0x7F).to(tl.uint8).to(out_type, bitcast=True)
    elif FORMAT == FORMAT_E5M2:
        return encode_small_float(x.to(tl.float32), 5, 2, False, 0x7F).to(tl.uint8).to(out_type, bitcast=True)
    elif VIA_F32:
        return x.to(tl.float32).to(out_type)
    elif FLOAT_TO_INT:
        return x.to(tl.int64).to(out_type)
    else:
        return x.to(out_type)
