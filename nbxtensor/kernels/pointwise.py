"""The pointwise kernels: one strided, broadcasting N-ary skeleton, and one small jitted body per op.

How the family is generated. Every op of ``ops/pointwise_table.py`` names a body below; the skeleton
``pointwise`` receives that body as a ``tl.constexpr`` argument (Triton 3 accepts jitted functions as
constexprs and keys its compile cache on their source hash). A launch therefore compiles exactly the
one body it uses, inlined into the shared skeleton: no source generation, no giant kernel with a
branch per op, and compile time and code size per specialisation are those of a hand-written kernel.

The skeleton reads up to four operands, each absent, a strided tensor (any strides, stride 0 for a
broadcast dim or a 0-d device tensor) or a scalar passed by its bits as a kernel argument (no host to
device copy), converts them to the compute type and hands them to the body; the result is converted to
the output dtype on the store with the copy kernel's ``_encode``, so every op rounds as ``copy_`` does.
Half-precision operands are computed in float32 and rounded once on the store, as ATen does.

Bodies see ``(a, b, c, d, MODE, CATEGORY)``: the operands in the compute type, an op-specific
constexpr (a rounding mode, an approximation, a special exponent), and the compute category
(``CAT_*`` below). Transcendental functions come from libdevice (CUDA's math library, which ATen's
CUDA kernels use too); fp32 division and square root use the IEEE-rounded forms ATen gets from nvcc.
Under Triton's interpreter libdevice has no implementation; ``ops/pointwise_interpreter.py`` supplies
NumPy ones.

``pointwise_complex`` is the same skeleton for complex64/complex128: operands are read as (re, im)
pairs (a real operand has im 0), and its bodies return a pair, or the real part only for ops whose
result is real (abs, angle).
"""
import triton
import triton.language as tl
from triton.language.extra import libdevice

from .common import program_elements
from .copy import _decode, _encode, _encode_small_float
from .dependent_launch import await_predecessors

OPERAND_ABSENT = 0
OPERAND_TENSOR = 1
OPERAND_SCALAR = 2
OPERAND_COMPLEX_TENSOR = 3  # complex kernel only: a (re, im) pair per element

CAT_BOOL = 0
CAT_INT = 1
CAT_UINT = 2
CAT_FLOAT32 = 3
CAT_FLOAT64 = 4

# division rounding modes
DIV_TRUE = 0
DIV_TRUNC = 1
DIV_FLOOR = 2

# round_to_integer's directions
ROUND_FLOOR = 0
ROUND_CEIL = 1
ROUND_TRUNC = 2

# pow with a scalar exponent: the cases ATen computes without pow()
POW_GENERAL = 0
POW_SQUARE = 1
POW_CUBE = 2
POW_SQRT = 3
POW_RSQRT = 4
POW_RECIPROCAL = 5
POW_RECIPROCAL_SQUARE = 6
POW_ZERO = 7


# ---- the skeleton -----------------------------------------------------------------------------

@triton.jit
def _operand(ptr, off, bits, mask, KIND: tl.constexpr, FORMAT: tl.constexpr, BITS_TYPE: tl.constexpr,
             COMPUTE: tl.constexpr, CATEGORY: tl.constexpr, BLOCK: tl.constexpr):
    """One operand in the compute type: loaded through its strides, or a scalar made from its bits. Lanes
    past the end read 0, so that bodies reducing over their block (a loop's trip count) see no garbage."""
    if KIND == 1:
        return _decode(tl.load(ptr + off, mask=mask, other=0), FORMAT).to(COMPUTE)
    else:
        raw = tl.full([BLOCK], bits, tl.int64).to(BITS_TYPE)
        if CATEGORY == 0:
            return raw != 0
        else:
            return raw.to(COMPUTE, bitcast=True)


@triton.jit
def _offsets(idx, shape, out_strides, strides0, strides1, strides2, strides3,
             K0: tl.constexpr, K1: tl.constexpr, K2: tl.constexpr, K3: tl.constexpr, RANK: tl.constexpr):
    """Element offsets of the output and of each tensor operand for the row-major index ``idx``. The
    outermost dim needs no modulo: ``idx < n`` bounds its coordinate already."""
    out_off = idx * 0
    off0 = idx * 0
    off1 = idx * 0
    off2 = idx * 0
    off3 = idx * 0
    rem = idx
    for d in tl.static_range(RANK - 1, -1, -1):
        if d == 0:
            coord = rem
        else:
            coord = rem % shape[d]
            rem = rem // shape[d]
        out_off += coord * out_strides[d]
        if K0 == 1 or K0 == 3:
            off0 += coord * strides0[d]
        if K1 == 1 or K1 == 3:
            off1 += coord * strides1[d]
        if K2 == 1 or K2 == 3:
            off2 += coord * strides2[d]
        if K3 == 1 or K3 == 3:
            off3 += coord * strides3[d]
    return out_off, off0, off1, off2, off3


@triton.jit
def pointwise(out, n, shape, out_strides,
              x0, x1, x2, x3, strides0, strides1, strides2, strides3, bits0, bits1, bits2, bits3,
              BODY: tl.constexpr, MODE: tl.constexpr, COMPUTE: tl.constexpr, CATEGORY: tl.constexpr,
              K0: tl.constexpr, K1: tl.constexpr, K2: tl.constexpr, K3: tl.constexpr,
              F0: tl.constexpr, F1: tl.constexpr, F2: tl.constexpr, F3: tl.constexpr,
              BITS_TYPE: tl.constexpr, OUT_FORMAT: tl.constexpr, VIA_F32: tl.constexpr,
              FLOAT_TO_INT: tl.constexpr, RANK: tl.constexpr, INDEX_64: tl.constexpr, BLOCK: tl.constexpr,
              PDL: tl.constexpr):
    await_predecessors(PDL)
    idx = program_elements(BLOCK, INDEX_64)
    mask = idx < n
    out_off, off0, off1, off2, off3 = _offsets(idx, shape, out_strides, strides0, strides1, strides2, strides3,
                                               K0, K1, K2, K3, RANK)
    a = _operand(x0, off0, bits0, mask, K0, F0, BITS_TYPE, COMPUTE, CATEGORY, BLOCK)
    if K1 == 0:
        b = a
    else:
        b = _operand(x1, off1, bits1, mask, K1, F1, BITS_TYPE, COMPUTE, CATEGORY, BLOCK)
    if K2 == 0:
        c = a
    else:
        c = _operand(x2, off2, bits2, mask, K2, F2, BITS_TYPE, COMPUTE, CATEGORY, BLOCK)
    if K3 == 0:
        d = a
    else:
        d = _operand(x3, off3, bits3, mask, K3, F3, BITS_TYPE, COMPUTE, CATEGORY, BLOCK)
    y = BODY(a, b, c, d, MODE, CATEGORY)
    tl.store(out + out_off, _encode(y, out.dtype.element_ty, OUT_FORMAT, VIA_F32, FLOAT_TO_INT), mask=mask)


@triton.jit
def _tile_operand(ptr, off, bits, mask, KIND: tl.constexpr, FORMAT: tl.constexpr, BITS_TYPE: tl.constexpr,
                  COMPUTE: tl.constexpr, CATEGORY: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """``_operand`` for a [BLOCK_M, BLOCK_N] tile."""
    if KIND == 1:
        return _decode(tl.load(ptr + off, mask=mask, other=0), FORMAT).to(COMPUTE)
    else:
        raw = tl.full([BLOCK_M, BLOCK_N], bits, tl.int64).to(BITS_TYPE)
        if CATEGORY == 0:
            return raw != 0
        else:
            return raw.to(COMPUTE, bitcast=True)


@triton.jit
def _tile_offset(base, rows, cols, strides, RANK: tl.constexpr):
    return base + rows[:, None] * strides[RANK - 2] + cols[None, :] * strides[RANK - 1]


@triton.jit
def pointwise_tiled(out, n, shape, out_strides,
                    x0, x1, x2, x3, strides0, strides1, strides2, strides3, bits0, bits1, bits2, bits3,
                    BODY: tl.constexpr, MODE: tl.constexpr, COMPUTE: tl.constexpr, CATEGORY: tl.constexpr,
                    K0: tl.constexpr, K1: tl.constexpr, K2: tl.constexpr, K3: tl.constexpr,
                    F0: tl.constexpr, F1: tl.constexpr, F2: tl.constexpr, F3: tl.constexpr,
                    BITS_TYPE: tl.constexpr, OUT_FORMAT: tl.constexpr, VIA_F32: tl.constexpr,
                    FLOAT_TO_INT: tl.constexpr, RANK: tl.constexpr, INDEX_64: tl.constexpr,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """``pointwise`` over [BLOCK_M, BLOCK_N] tiles of the last two dims, for operands whose fastest
    dims differ (``a + b.T``): each load and the store index the same tile, and the compiler lays each
    out along its own contiguous dim, converting between them on chip, so no side reads or writes
    with a stride. Axis 1 of the grid runs over the dims before the last two."""
    tiles_n = tl.cdiv(shape[RANK - 1], BLOCK_N)
    pid = tl.program_id(0)
    batch = tl.program_id(1)
    rows = (pid // tiles_n) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = (pid % tiles_n) * BLOCK_N + tl.arange(0, BLOCK_N)
    if INDEX_64:
        rows = rows.to(tl.int64)
        cols = cols.to(tl.int64)
        batch = batch.to(tl.int64)
    out_base = batch * 0
    base0 = batch * 0
    base1 = batch * 0
    base2 = batch * 0
    base3 = batch * 0
    rem = batch
    for d in tl.static_range(RANK - 3, -1, -1):
        coord = rem % shape[d]
        rem = rem // shape[d]
        out_base += coord * out_strides[d]
        base0 += coord * strides0[d]
        base1 += coord * strides1[d]
        base2 += coord * strides2[d]
        base3 += coord * strides3[d]
    mask = (rows[:, None] < shape[RANK - 2]) & (cols[None, :] < shape[RANK - 1])
    out_off = _tile_offset(out_base, rows, cols, out_strides, RANK)
    a = _tile_operand(x0, _tile_offset(base0, rows, cols, strides0, RANK), bits0, mask, K0, F0, BITS_TYPE,
                      COMPUTE, CATEGORY, BLOCK_M, BLOCK_N)
    if K1 == 0:
        b = a
    else:
        b = _tile_operand(x1, _tile_offset(base1, rows, cols, strides1, RANK), bits1, mask, K1, F1, BITS_TYPE,
                          COMPUTE, CATEGORY, BLOCK_M, BLOCK_N)
    if K2 == 0:
        c = a
    else:
        c = _tile_operand(x2, _tile_offset(base2, rows, cols, strides2, RANK), bits2, mask, K2, F2, BITS_TYPE,
                          COMPUTE, CATEGORY, BLOCK_M, BLOCK_N)
    if K3 == 0:
        d = a
    else:
        d = _tile_operand(x3, _tile_offset(base3, rows, cols, strides3, RANK), bits3, mask, K3, F3, BITS_TYPE,
                          COMPUTE, CATEGORY, BLOCK_M, BLOCK_N)
    y = BODY(a, b, c, d, MODE, CATEGORY)
    tl.store(out + out_off, _encode(y, out.dtype.element_ty, OUT_FORMAT, VIA_F32, FLOAT_TO_INT), mask=mask)


@triton.jit
def _complex_operand(ptr, off, re_bits, im_bits, mask, KIND: tl.constexpr, COMPUTE: tl.constexpr,
                     BITS_TYPE: tl.constexpr, BLOCK: tl.constexpr):
    """(re, im) of one operand: a complex tensor's pair, a real tensor with im 0, or a scalar."""
    if KIND == 3:
        return tl.load(ptr + off, mask=mask).to(COMPUTE), tl.load(ptr + off + 1, mask=mask).to(COMPUTE)
    elif KIND == 1:
        re = tl.load(ptr + off, mask=mask).to(COMPUTE)
        return re, tl.zeros_like(re)
    else:
        re = tl.full([BLOCK], re_bits, tl.int64).to(BITS_TYPE).to(COMPUTE, bitcast=True)
        im = tl.full([BLOCK], im_bits, tl.int64).to(BITS_TYPE).to(COMPUTE, bitcast=True)
        return re, im


@triton.jit
def pointwise_complex(out, n, shape, out_strides, x0, x1, strides0, strides1, bits0, bits1, bits2, bits3,
                      BODY: tl.constexpr, MODE: tl.constexpr, COMPUTE: tl.constexpr,
                      K0: tl.constexpr, K1: tl.constexpr, BITS_TYPE: tl.constexpr, COMPLEX_OUT: tl.constexpr,
                      RANK: tl.constexpr, INDEX_64: tl.constexpr, BLOCK: tl.constexpr):
    """Complex operands and output are given as their real components (``view_as_real`` then select
    0): strides count components, and each imaginary part sits one element after its real part."""
    idx = program_elements(BLOCK, INDEX_64)
    mask = idx < n
    out_off, off0, off1, _, _ = _offsets(idx, shape, out_strides, strides0, strides1, strides0, strides1,
                                         K0, K1, 0, 0, RANK)
    ar, ai = _complex_operand(x0, off0, bits0, bits1, mask, K0, COMPUTE, BITS_TYPE, BLOCK)
    if K1 == 0:
        br = ar
        bi = ai
    else:
        br, bi = _complex_operand(x1, off1, bits2, bits3, mask, K1, COMPUTE, BITS_TYPE, BLOCK)
    re, im = BODY(ar, ai, br, bi, MODE)
    out_type = out.dtype.element_ty
    tl.store(out + out_off, re.to(out_type), mask=mask)
    if COMPLEX_OUT:
        tl.store(out + out_off + 1, im.to(out_type), mask=mask)


# ---- shared helpers ---------------------------------------------------------------------------

@triton.jit
def _div(a, b, CATEGORY: tl.constexpr):
    """IEEE-rounded float division (Triton's ``/`` on fp32 is an approximation on NVIDIA GPUs)."""
    if CATEGORY == 3:
        return tl.div_rn(a, b)
    else:
        return a / b


@triton.jit
def _sqrt(a, CATEGORY: tl.constexpr):
    if CATEGORY == 3:
        return tl.sqrt_rn(a)
    else:
        return tl.sqrt(a)


@triton.jit
def _zeros(a):
    """Zeros shaped and typed like ``a`` (``a * 0`` would be NaN where ``a`` is infinite)."""
    return tl.zeros_like(a)


@triton.jit
def _ones(a):
    return tl.zeros_like(a) + 1


@triton.jit
def _all_ones(a):
    """Every bit set, in ``a``'s integer type (``~`` of an unsigned type fails in the interpreter)."""
    return tl.zeros_like(a) - 1


@triton.jit
def _isnan(a):
    return a != a


@triton.jit
def _max_nan(a, b):
    """max that propagates NaN from either side (ATen's maximum, clamp)."""
    return tl.where(_isnan(a) | (a > b), a, b)


@triton.jit
def _min_nan(a, b):
    return tl.where(_isnan(a) | (a < b), a, b)


@triton.jit
def _signbit_float(a, CATEGORY: tl.constexpr):
    if CATEGORY == 3:
        return (a.to(tl.int32, bitcast=True) < 0)
    else:
        return (a.to(tl.int64, bitcast=True) < 0)


@triton.jit
def _sigmoid(a, CATEGORY: tl.constexpr):
    return _div(_ones(a), 1 + libdevice.exp(-a), CATEGORY)


@triton.jit
def _softplus(a, beta, threshold, CATEGORY: tl.constexpr):
    scaled = a * beta
    return tl.where(scaled > threshold, a, _div(libdevice.log1p(libdevice.exp(scaled)), beta, CATEGORY))


@triton.jit
def _int_floor_div(a, b):
    """Integer division rounding toward negative infinity; b == -1 negates (INT_MIN wraps)."""
    safe_b = tl.where((b == 0) | (b == -1), 1, b)
    q = a // safe_b
    r = a - q * safe_b
    q = tl.where((r != 0) & ((r < 0) != (safe_b < 0)), q - 1, q)
    return tl.where(b == -1, 0 - a, tl.where(b == 0, -1, q))


@triton.jit
def _int_trunc_div(a, b, CATEGORY: tl.constexpr):
    if CATEGORY == 2:
        return tl.where(b == 0, _all_ones(a), a // tl.where(b == 0, 1, b))
    else:
        safe_b = tl.where((b == 0) | (b == -1), 1, b)
        return tl.where(b == -1, 0 - a, tl.where(b == 0, -1, a // safe_b))


@triton.jit
def _int_fmod(a, b):
    """C's ``%``: the sign of the dividend; x % 0 gives x, INT_MIN % -1 gives 0."""
    safe_b = tl.where((b == 0) | (b == -1), 1, b)
    return tl.where(b == 0, a, a % safe_b)


# ---- unary math -------------------------------------------------------------------------------

@triton.jit
def abs_(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if CATEGORY == 2:
        return a
    elif CATEGORY == 1:
        return tl.where(a < 0, 0 - a, a)
    else:
        return tl.abs(a)


@triton.jit
def neg(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if CATEGORY >= 3:
        return a * -1.0  # 0 - a would turn 0.0 into +0.0, not -0.0
    else:
        return 0 - a


@triton.jit
def sign(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if CATEGORY == 0:
        return a
    elif CATEGORY == 2:
        return (a > 0).to(a.dtype)
    else:
        return (a > 0).to(a.dtype) - (a < 0).to(a.dtype)


@triton.jit
def exp(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return libdevice.exp(a)


@triton.jit
def exp2(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return libdevice.exp2(a)


@triton.jit
def expm1(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return libdevice.expm1(a)


@triton.jit
def log(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return libdevice.log(a)


@triton.jit
def log2(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return libdevice.log2(a)


@triton.jit
def log10(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return libdevice.log10(a)


@triton.jit
def log1p(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return libdevice.log1p(a)


@triton.jit
def sqrt(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return _sqrt(a, CATEGORY)


@triton.jit
def rsqrt(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return libdevice.rsqrt(a)


@triton.jit
def reciprocal(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return _div(_ones(a), a, CATEGORY)


@triton.jit
def square(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return a * a


@triton.jit
def sin(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return libdevice.sin(a)


@triton.jit
def cos(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return libdevice.cos(a)


@triton.jit
def tan(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return libdevice.tan(a)


@triton.jit
def asin(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return libdevice.asin(a)


@triton.jit
def acos(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return libdevice.acos(a)


@triton.jit
def atan(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return libdevice.atan(a)


@triton.jit
def sinh(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return libdevice.sinh(a)


@triton.jit
def cosh(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return libdevice.cosh(a)


@triton.jit
def tanh(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return libdevice.tanh(a)


@triton.jit
def asinh(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return libdevice.asinh(a)


@triton.jit
def acosh(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return libdevice.acosh(a)


@triton.jit
def atanh(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return libdevice.atanh(a)


@triton.jit
def erf(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return libdevice.erf(a)


@triton.jit
def erfc(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return libdevice.erfc(a)


@triton.jit
def erfinv(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return libdevice.erfinv(a)


@triton.jit
def round_to_integer(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """floor, ceil or trunc (MODE: ROUND_FLOOR, ROUND_CEIL, ROUND_TRUNC); integers are already there."""
    if CATEGORY < 3:
        return a
    elif MODE == 0:
        return libdevice.floor(a)
    elif MODE == 1:
        return libdevice.ceil(a)
    else:
        return libdevice.trunc(a)


@triton.jit
def round_(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """Half to even; with decimals, ``b`` is 10^|decimals| and MODE its sign (ATen's formula)."""
    if CATEGORY < 3:
        return a
    elif MODE == 0:
        return libdevice.rint(a)
    elif MODE == 1:
        return _div(libdevice.rint(a * b), b, CATEGORY)
    else:
        return libdevice.rint(_div(a, b, CATEGORY)) * b


@triton.jit
def frac(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return a - libdevice.trunc(a)


@triton.jit
def sigmoid(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return _sigmoid(a, CATEGORY)


@triton.jit
def logit(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """log(x / (1 - x)), with x clamped to [eps, 1 - eps] first when MODE says an eps (``b``) is given."""
    if MODE == 1:
        a = tl.where(a < b, b, tl.where(a > 1 - b, 1 - b, a))
    return libdevice.log(_div(a, 1 - a, CATEGORY))


# ---- activations ------------------------------------------------------------------------------

@triton.jit
def relu(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return tl.where(a > 0, a, tl.where(_isnan(a), a, _zeros(a)))


@triton.jit
def hardtanh(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """clamp(a, b, c) keeping NaN (relu6 is hardtanh(0, 6))."""
    y = tl.where(a < b, b, a)
    return tl.where(y > c, c, y)


@triton.jit
def leaky_relu(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return tl.where(a > 0, a, a * b)


@triton.jit
def elu(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """ATen's elu: ``b`` alpha, ``c`` scale, ``d`` input_scale (celu and selu are elus)."""
    return tl.where(a <= 0, libdevice.expm1(a * d) * (b * c), a * c)


@triton.jit
def gelu(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if MODE == 0:
        return a * 0.5 * (1 + libdevice.erf(a * 0.7071067811865476))
    else:
        inner = 0.7978845608028654 * (a + 0.044715 * a * a * a)
        return 0.5 * a * (1 + libdevice.tanh(inner))


@triton.jit
def silu(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return _div(a, 1 + libdevice.exp(-a), CATEGORY)


@triton.jit
def mish(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return a * libdevice.tanh(libdevice.log1p(libdevice.exp(a)))


@triton.jit
def softplus(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return _softplus(a, b, c, CATEGORY)


@triton.jit
def softsign(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return _div(a, 1 + tl.abs(a), CATEGORY)


@triton.jit
def hardsigmoid(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return _div(_min_nan(_max_nan(a + 3, _zeros(a)), (_zeros(a) + 6)), (_zeros(a) + 6), CATEGORY)


@triton.jit
def hardswish(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return _div(a * _min_nan(_max_nan(a + 3, _zeros(a)), (_zeros(a) + 6)), (_zeros(a) + 6), CATEGORY)


@triton.jit
def threshold(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return tl.where(a <= b, c, a)


@triton.jit
def logsigmoid(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return _min_nan(a, _zeros(a)) - libdevice.log1p(libdevice.exp(-tl.abs(a)))


@triton.jit
def glu(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return a * _sigmoid(b, CATEGORY)


# act_and_mul's MODE: the activation plus ACT_ROUND_* times 4, the half format the activation's value is
# rounded to before the product (an unfused module stores it in its dtype between the two ops)
ACT_SILU = 0
ACT_GELU_TANH = 1
ACT_GELU = 2
ACT_ROUND_NONE = 0
ACT_ROUND_BF16 = 1
ACT_ROUND_F16 = 2


@triton.jit
def _round_to_half(x, FORMAT: tl.constexpr):
    """float32 ``x`` rounded to nearest-even in bfloat16 (FORMAT 1) or float16 (2), as float32."""
    if FORMAT == 1:
        return (_encode_small_float(x, 8, 7, False, 0x7FC0) << 16).to(tl.float32, bitcast=True)
    elif FORMAT == 2:
        bits = _encode_small_float(x, 5, 10, False, 0x7E00)
        return bits.to(tl.uint16).to(tl.float16, bitcast=True).to(tl.float32)
    else:
        return x


@triton.jit
def act_and_mul(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """activation(a) * b, the gated MLP's product (SwiGLU, GeGLU)."""
    if MODE % 4 == 0:
        act = silu(a, b, c, d, 0, CATEGORY)
    elif MODE % 4 == 1:
        act = gelu(a, b, c, d, 1, CATEGORY)
    else:
        act = gelu(a, b, c, d, 0, CATEGORY)
    return _round_to_half(act, MODE // 4) * b


# ---- binary -----------------------------------------------------------------------------------

@triton.jit
def add(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """a + b, or a + c * b when MODE says an alpha (``c``) is given."""
    if CATEGORY == 0:
        if MODE == 1:
            return a | (b & c)
        else:
            return a | b
    elif MODE == 1:
        return a + c * b
    else:
        return a + b


@triton.jit
def sub(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if MODE == 1:
        return a - c * b
    else:
        return a - b


@triton.jit
def mul(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if CATEGORY == 0:
        return a & b
    else:
        return a * b


@triton.jit
def div(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if CATEGORY >= 3:
        if MODE == 0:
            return _div(a, b, CATEGORY)
        elif MODE == 1:
            return libdevice.trunc(_div(a, b, CATEGORY))
        else:
            return _float_floor_div(a, b, CATEGORY)
    elif MODE == 2 and CATEGORY == 1:
        return _int_floor_div(a, b)
    else:
        return _int_trunc_div(a, b, CATEGORY)


@triton.jit
def _float_floor_div(a, b, CATEGORY: tl.constexpr):
    """ATen's div_floor_floating: (a - fmod(a, b)) / b adjusted to the floor, exact where a / b rounds."""
    mod = libdevice.fmod(a, b)
    quotient = _div(a - mod, b, CATEGORY)
    quotient = tl.where((mod != 0) & ((b < 0) != (mod < 0)), quotient - 1, quotient)
    floored = libdevice.floor(quotient)
    floored = tl.where(quotient - floored > 0.5, floored + 1, floored)
    zero = libdevice.copysign(_zeros(a), _div(a, b, CATEGORY))
    result = tl.where(quotient != 0, floored, zero)
    return tl.where(b == 0, _div(a, b, CATEGORY), result)


@triton.jit
def remainder(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """The sign of the divisor (Python's %)."""
    if CATEGORY >= 3:
        mod = libdevice.fmod(a, b)
        return tl.where((mod != 0) & ((b < 0) != (mod < 0)), mod + b, mod)
    elif CATEGORY == 2:
        return tl.where(b == 0, a, a % tl.where(b == 0, 1, b))
    else:
        mod = _int_fmod(a, b)
        return tl.where((mod != 0) & ((b < 0) != (mod < 0)), mod + b, mod)


@triton.jit
def fmod(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if CATEGORY >= 3:
        return libdevice.fmod(a, b)
    elif CATEGORY == 2:
        return tl.where(b == 0, a, a % tl.where(b == 0, 1, b))
    else:
        return _int_fmod(a, b)


@triton.jit
def _int_pow(base, exponent, CATEGORY: tl.constexpr):
    """Exponentiation by squaring in the integer type (wrapping as ATen's), negative exponents as
    ATen defines them: 1 and -1 keep their magnitude, anything else gives 0."""
    result = _ones(base)
    square_ = base
    e = exponent
    for _ in tl.static_range(64 if base.dtype.primitive_bitwidth == 64 else 32):
        result = tl.where((e & 1) != 0, result * square_, result)
        square_ = square_ * square_
        e = e >> 1
        if CATEGORY == 1:
            e = tl.where(e < 0, 0, e)
    if CATEGORY == 1:
        odd = (exponent & 1) != 0
        negative_result = tl.where(base == 1, 1, tl.where(base == -1, tl.where(odd, -1, 1), 0)).to(base.dtype)
        result = tl.where(exponent < 0, negative_result, result)
    return result


@triton.jit
def pow_(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """a ** b. Integer exponents of a float base and the special scalar exponents multiply or take
    roots as ATen does; anything else is libdevice's pow (x ** 0 == 1 for every x, NaN included)."""
    if CATEGORY == 0:
        return a | (b == 0)
    elif CATEGORY <= 2:
        return _int_pow(a, b, CATEGORY)
    elif MODE == 1:
        return a * a
    elif MODE == 2:
        return a * a * a
    elif MODE == 3:
        return _sqrt(a, CATEGORY)
    elif MODE == 4:
        return libdevice.rsqrt(a)
    elif MODE == 5:
        return _div(_ones(a), a, CATEGORY)
    elif MODE == 6:
        return _div(_ones(a), a * a, CATEGORY)
    elif MODE == 7:
        return _ones(a)
    elif CATEGORY == 3:
        # float32 through float64: libdevice's powf can miss by an ulp where an exact answer exists
        # (2.5 ** 2 gave 6.2499995); the float64 result rounds to the correctly rounded float32
        return libdevice.pow(a.to(tl.float64), b.to(tl.float64)).to(tl.float32)
    else:
        return libdevice.pow(a, b)


@triton.jit
def atan2(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return libdevice.atan2(a, b)


@triton.jit
def hypot(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return libdevice.hypot(a, b)


@triton.jit
def maximum(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if CATEGORY == 0:
        return a | b
    elif CATEGORY >= 3:
        return tl.where(_isnan(b), b, _max_nan(a, b))
    else:
        return tl.where(a > b, a, b)


@triton.jit
def minimum(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if CATEGORY == 0:
        return a & b
    elif CATEGORY >= 3:
        return tl.where(_isnan(b), b, _min_nan(a, b))
    else:
        return tl.where(a < b, a, b)


@triton.jit
def fmax(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """max ignoring NaN: NaN only when both are."""
    if CATEGORY == 0:
        return a | b
    return tl.where(_isnan(b) | (a > b), a, b)


@triton.jit
def fmin(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if CATEGORY == 0:
        return a & b
    return tl.where(_isnan(b) | (a < b), a, b)


@triton.jit
def copysign(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return libdevice.copysign(a, b)


@triton.jit
def xlogy(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return tl.where(_isnan(b), b, tl.where(a == 0, _zeros(a), a * libdevice.log(b)))


@triton.jit
def logaddexp(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    larger = tl.where(_isnan(a) | (a > b), a, b)
    general = larger + libdevice.log1p(libdevice.exp(-tl.abs(a - b)))
    return tl.where((a == b) & (tl.abs(a) == float("inf")), a, general)


# ---- comparisons, logical, bitwise ------------------------------------------------------------

@triton.jit
def eq(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return a == b


@triton.jit
def ne(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return a != b


@triton.jit
def lt(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if CATEGORY == 0:
        return (a == 0) & (b != 0)
    else:
        return a < b


@triton.jit
def le(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if CATEGORY == 0:
        return (a == 0) | (b != 0)
    else:
        return a <= b


@triton.jit
def gt(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if CATEGORY == 0:
        return (a != 0) & (b == 0)
    else:
        return a > b


@triton.jit
def ge(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if CATEGORY == 0:
        return (a != 0) | (b == 0)
    else:
        return a >= b


@triton.jit
def isclose(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """ATen's isclose: ``c`` rtol, ``d`` atol; MODE 1 counts NaN as equal to NaN."""
    close = a == b
    if CATEGORY >= 3:
        if MODE == 1:
            close = close | (_isnan(a) & _isnan(b))
        error = tl.abs(a - b)
        allowed = d + tl.abs(c * b)
        close = close | ((error <= allowed) & (tl.abs(error) != float("inf")))
    return close


@triton.jit
def logical_and(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return (a != 0) & (b != 0)


@triton.jit
def logical_or(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return (a != 0) | (b != 0)


@triton.jit
def logical_xor(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return (a != 0) != (b != 0)


@triton.jit
def logical_not(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return a == 0


@triton.jit
def bitwise_and(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return a & b


@triton.jit
def bitwise_or(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return a | b


@triton.jit
def bitwise_xor(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return a ^ b


@triton.jit
def bitwise_not(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if CATEGORY == 0:
        return a == 0
    else:
        return a ^ _all_ones(a)


@triton.jit
def left_shift(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """ATen's shift: a shift by a negative amount or by the width or more gives 0."""
    width = a.dtype.primitive_bitwidth
    in_range = (b >= 0) & (b < width)
    return tl.where(in_range, a << tl.where(in_range, b, 0), a * 0)


@triton.jit
def right_shift(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """An out-of-range shift fills with the sign (0 or -1), as ATen's does."""
    width = a.dtype.primitive_bitwidth
    in_range = (b >= 0) & (b < width)
    if CATEGORY == 2:
        return tl.where(in_range, a >> tl.where(in_range, b, 0), a * 0)
    else:
        return a >> tl.where(in_range, b, width - 1)


# ---- selection, clamping, ternary -------------------------------------------------------------

@triton.jit
def where(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """``a`` is the condition, given in the compute type (nonzero is true)."""
    return tl.where(a != 0, b, c)


@triton.jit
def clamp(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """MODE bit 0: a lower bound ``b``; bit 1: an upper bound ``c``. NaN anywhere propagates, and
    max wins when min > max, as ATen's min(max(a, lo), hi)."""
    y = a
    if CATEGORY >= 3:
        if MODE & 1:
            y = _max_nan(y, b)
            y = tl.where(_isnan(b), b, y)
        if MODE & 2:
            y = _min_nan(y, c)
            y = tl.where(_isnan(c), c, y)
    else:
        if MODE & 1:
            y = tl.where(y < b, b, y)
        if MODE & 2:
            y = tl.where(y > c, c, y)
    return y


@triton.jit
def lerp(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """ATen's two-sided formula: exact at both ends (weight 0 gives a, weight 1 gives b)."""
    diff = b - a
    return tl.where(tl.abs(c) < 0.5, a + c * diff, b - diff * (1 - c))


@triton.jit
def addcmul(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if CATEGORY == 0:
        return a | (d & b & c)
    else:
        return a + d * b * c


@triton.jit
def addcdiv(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return a + d * _div(b, c, CATEGORY)


@triton.jit
def nan_to_num(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """``b`` replaces NaN, ``c`` +inf, ``d`` -inf; integers pass through."""
    if CATEGORY < 3:
        return a
    y = tl.where(_isnan(a), b, a)
    y = tl.where(a == float("inf"), c, y)
    return tl.where(a == float("-inf"), d, y)


@triton.jit
def isfinite(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if CATEGORY >= 3:
        return tl.abs(a) < float("inf")
    else:
        return a == a


@triton.jit
def isinf(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if CATEGORY >= 3:
        return tl.abs(a) == float("inf")
    else:
        return a != a


@triton.jit
def isposinf(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if CATEGORY >= 3:
        return a == float("inf")
    else:
        return a != a


@triton.jit
def isneginf(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if CATEGORY >= 3:
        return a == float("-inf")
    else:
        return a != a


@triton.jit
def isnan(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return a != a


@triton.jit
def signbit(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if CATEGORY >= 3:
        return _signbit_float(a, CATEGORY)
    elif CATEGORY == 1:
        return a < 0
    else:
        return a != a


@triton.jit
def angle(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """The angle of a real number: pi for negatives, 0 otherwise, NaN kept."""
    pi = 3.141592653589793
    return tl.where(_isnan(a), a, tl.where(a < 0, _zeros(a) + pi, _zeros(a)))


@triton.jit
def conj_real(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return a


# ---- complex bodies: (ar, ai, br, bi, MODE) -> (re, im) ------------------------------------------

@triton.jit
def complex_add(ar, ai, br, bi, MODE: tl.constexpr):
    return ar + br, ai + bi


@triton.jit
def complex_sub(ar, ai, br, bi, MODE: tl.constexpr):
    return ar - br, ai - bi


@triton.jit
def complex_mul(ar, ai, br, bi, MODE: tl.constexpr):
    return ar * br - ai * bi, ar * bi + ai * br


@triton.jit
def _cdiv(x, y):
    if x.dtype == tl.float32:
        return tl.div_rn(x, y)
    else:
        return x / y


@triton.jit
def complex_div(ar, ai, br, bi, MODE: tl.constexpr):
    """Smith's scaled division, as c10::complex (and NumPy) divide."""
    abs_r = tl.abs(br)
    abs_i = tl.abs(bi)
    real_larger = abs_r >= abs_i
    both_zero = (abs_r == 0) & (abs_i == 0)
    # |br| >= |bi|
    rat1 = _cdiv(bi, tl.where(both_zero, 1, br))
    scl1 = _cdiv(_ones(ar), br + bi * rat1)
    re1 = (ar + ai * rat1) * scl1
    im1 = (ai - ar * rat1) * scl1
    re1 = tl.where(both_zero, _cdiv(ar, abs_r), re1)
    im1 = tl.where(both_zero, _cdiv(ai, abs_i), im1)
    # |bi| > |br|
    rat2 = _cdiv(br, tl.where(real_larger, 1, bi))
    scl2 = _cdiv(_ones(ar), bi + br * rat2)
    re2 = (ar * rat2 + ai) * scl2
    im2 = (ai * rat2 - ar) * scl2
    return tl.where(real_larger, re1, re2), tl.where(real_larger, im1, im2)


@triton.jit
def complex_abs(ar, ai, br, bi, MODE: tl.constexpr):
    return libdevice.hypot(ar, ai), ai


@triton.jit
def complex_angle(ar, ai, br, bi, MODE: tl.constexpr):
    return libdevice.atan2(ai, ar), ai


@triton.jit
def complex_conj(ar, ai, br, bi, MODE: tl.constexpr):
    return ar, ai * -1.0


@triton.jit
def complex_neg(ar, ai, br, bi, MODE: tl.constexpr):
    return ar * -1.0, ai * -1.0


@triton.jit
def complex_sgn(ar, ai, br, bi, MODE: tl.constexpr):
    """z / |z| by components, and 0 for 0, as ATen's CUDA and vectorised CPU kernels compute it."""
    magnitude = libdevice.hypot(ar, ai)
    zero = magnitude == 0
    safe = tl.where(zero, _ones(magnitude), magnitude)
    return tl.where(zero, _zeros(ar), _cdiv(ar, safe)), tl.where(zero, _zeros(ai), _cdiv(ai, safe))


@triton.jit
def complex_exp(ar, ai, br, bi, MODE: tl.constexpr):
    magnitude = libdevice.exp(ar)
    return magnitude * libdevice.cos(ai), magnitude * libdevice.sin(ai)


@triton.jit
def complex_eq(ar, ai, br, bi, MODE: tl.constexpr):
    """MODE 0: equal; 1: not equal. The result is real (0 or 1)."""
    same = (ar == br) & (ai == bi)
    if MODE == 1:
        same = same == 0
    return same.to(ar.dtype), ai
