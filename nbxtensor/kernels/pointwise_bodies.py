"""The pointwise bodies: one small jitted function per op of ``ops/pointwise_table.py``, which the
skeletons of ``pointwise.py`` receive as a ``tl.constexpr`` and inline. Bodies see ``(a, b, c, d, MODE,
CATEGORY)``: the operands in the compute type, an op-specific constexpr (a rounding mode, an approximation,
a special exponent; the ``*_`` families below name its values) and the compute category (``CAT_*`` of
``pointwise_codes.py``). Transcendental functions come from libdevice (CUDA's math library, which ATen's
CUDA kernels use too); fp32 division and square root use the IEEE-rounded forms ATen gets from nvcc.
Under Triton's interpreter libdevice has no implementation; ``ops/pointwise_interpreter.py`` supplies
NumPy ones."""
import triton
import triton.language as tl
from triton.language.extra import libdevice

from .formats import encode_small_float
from .pointwise_codes import CAT_BOOL, CAT_FLOAT32, CAT_INT, CAT_UINT

# The MODE families, as ``tl.constexpr`` globals (a body compares MODE with them by name; the host passes their
# ``.value``). Under the interpreter MODE arrives as a plain int, so arithmetic on it keeps the constexpr on
# the side whose operator Triton's constexpr defines (``CLAMP_MIN & MODE``, ``MODE // ACT_KINDS``).

# div's rounding modes
DIV_TRUE = tl.constexpr(0)
DIV_TRUNC = tl.constexpr(1)
DIV_FLOOR = tl.constexpr(2)

# round_to_integer's directions
ROUND_FLOOR = tl.constexpr(0)
ROUND_CEIL = tl.constexpr(1)
ROUND_TRUNC = tl.constexpr(2)

# round's decimals: none, or ``b`` = 10^|decimals| multiplying first (decimals > 0) or dividing first (< 0)
ROUND_DECIMALS_NONE = tl.constexpr(0)
ROUND_DECIMALS_POSITIVE = tl.constexpr(1)
ROUND_DECIMALS_NEGATIVE = tl.constexpr(2)

# add's and sub's alpha (``c``): 1 (not passed) or given
ALPHA_ONE = tl.constexpr(0)
ALPHA_GIVEN = tl.constexpr(1)

# logit's eps (``b``): none, or given (the input clamped to [eps, 1 - eps] first)
LOGIT_UNCLAMPED = tl.constexpr(0)
LOGIT_CLAMPED = tl.constexpr(1)

# gelu's approximation
GELU_ERF = tl.constexpr(0)
GELU_TANH = tl.constexpr(1)

# pow with a scalar exponent: the cases ATen computes without pow()
POW_GENERAL = tl.constexpr(0)
POW_SQUARE = tl.constexpr(1)
POW_CUBE = tl.constexpr(2)
POW_SQRT = tl.constexpr(3)
POW_RSQRT = tl.constexpr(4)
POW_RECIPROCAL = tl.constexpr(5)
POW_RECIPROCAL_SQUARE = tl.constexpr(6)
POW_ZERO = tl.constexpr(7)

# isclose: whether NaN counts as equal to NaN
ISCLOSE_NAN_UNEQUAL = tl.constexpr(0)
ISCLOSE_NAN_EQUAL = tl.constexpr(1)

# clamp's bounds, bits of MODE: a lower bound ``b``, an upper bound ``c``
CLAMP_MIN = tl.constexpr(1)
CLAMP_MAX = tl.constexpr(2)


# ---- shared helpers ---------------------------------------------------------------------------

@triton.jit
def _div(a, b, CATEGORY: tl.constexpr):
    """IEEE-rounded float division (Triton's ``/`` on fp32 is an approximation on NVIDIA GPUs)."""
    if CATEGORY == CAT_FLOAT32:
        return tl.div_rn(a, b)
    else:
        return a / b


@triton.jit
def _sqrt(a, CATEGORY: tl.constexpr):
    if CATEGORY == CAT_FLOAT32:
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
    if CATEGORY == CAT_FLOAT32:
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
    if CATEGORY == CAT_UINT:
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
    if CATEGORY == CAT_UINT:
        return a
    elif CATEGORY == CAT_INT:
        return tl.where(a < 0, 0 - a, a)
    else:
        return tl.abs(a)


@triton.jit
def neg(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if CATEGORY >= CAT_FLOAT32:
        return a * -1.0  # 0 - a would turn 0.0 into +0.0, not -0.0
    else:
        return 0 - a


@triton.jit
def sign(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if CATEGORY == CAT_BOOL:
        return a
    elif CATEGORY == CAT_UINT:
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
    if CATEGORY < CAT_FLOAT32:
        return a
    elif MODE == ROUND_FLOOR:
        return libdevice.floor(a)
    elif MODE == ROUND_CEIL:
        return libdevice.ceil(a)
    else:
        return libdevice.trunc(a)


@triton.jit
def round_(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """Half to even; with decimals, ``b`` is 10^|decimals| and MODE its sign (ATen's formula)."""
    if CATEGORY < CAT_FLOAT32:
        return a
    elif MODE == ROUND_DECIMALS_NONE:
        return libdevice.rint(a)
    elif MODE == ROUND_DECIMALS_POSITIVE:
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
    if MODE == LOGIT_CLAMPED:
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
    if MODE == GELU_ERF:
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


# act_and_mul's MODE: the activation plus ACT_KINDS times ACT_ROUND_*, the half format the activation's value is
# rounded to before the product (an unfused module stores it in its dtype between the two ops)
ACT_SILU = tl.constexpr(0)
ACT_GELU_TANH = tl.constexpr(1)
ACT_GELU = tl.constexpr(2)
ACT_KINDS = tl.constexpr(4)
ACT_ROUND_NONE = tl.constexpr(0)
ACT_ROUND_BF16 = tl.constexpr(1)
ACT_ROUND_F16 = tl.constexpr(2)


@triton.jit
def _round_to_half(x, FORMAT: tl.constexpr):
    """float32 ``x`` rounded to nearest-even in bfloat16 (FORMAT 1) or float16 (2), as float32."""
    if FORMAT == ACT_ROUND_BF16:
        return (encode_small_float(x, 8, 7, False, 0x7FC0) << 16).to(tl.float32, bitcast=True)
    elif FORMAT == ACT_ROUND_F16:
        bits = encode_small_float(x, 5, 10, False, 0x7E00)
        return bits.to(tl.uint16).to(tl.float16, bitcast=True).to(tl.float32)
    else:
        return x


@triton.jit
def act_and_mul(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """activation(a) * b, the gated MLP's product (SwiGLU, GeGLU)."""
    if MODE - MODE // ACT_KINDS * ACT_KINDS == ACT_SILU:
        act = silu(a, b, c, d, 0, CATEGORY)
    elif MODE - MODE // ACT_KINDS * ACT_KINDS == ACT_GELU_TANH:
        act = gelu(a, b, c, d, GELU_TANH, CATEGORY)
    else:
        act = gelu(a, b, c, d, GELU_ERF, CATEGORY)
    return _round_to_half(act, MODE // ACT_KINDS) * b


# ---- binary -----------------------------------------------------------------------------------

@triton.jit
def add(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """a + b, or a + c * b when MODE says an alpha (``c``) is given."""
    if CATEGORY == CAT_BOOL:
        if MODE == ALPHA_GIVEN:
            return a | (b & c)
        else:
            return a | b
    elif MODE == ALPHA_GIVEN:
        return a + c * b
    else:
        return a + b


@triton.jit
def sub(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if MODE == ALPHA_GIVEN:
        return a - c * b
    else:
        return a - b


@triton.jit
def mul(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if CATEGORY == CAT_BOOL:
        return a & b
    else:
        return a * b


@triton.jit
def div(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if CATEGORY >= CAT_FLOAT32:
        if MODE == DIV_TRUE:
            return _div(a, b, CATEGORY)
        elif MODE == DIV_TRUNC:
            return libdevice.trunc(_div(a, b, CATEGORY))
        else:
            return _float_floor_div(a, b, CATEGORY)
    elif MODE == DIV_FLOOR and CATEGORY == CAT_INT:
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
    if CATEGORY >= CAT_FLOAT32:
        mod = libdevice.fmod(a, b)
        return tl.where((mod != 0) & ((b < 0) != (mod < 0)), mod + b, mod)
    elif CATEGORY == CAT_UINT:
        return tl.where(b == 0, a, a % tl.where(b == 0, 1, b))
    else:
        mod = _int_fmod(a, b)
        return tl.where((mod != 0) & ((b < 0) != (mod < 0)), mod + b, mod)


@triton.jit
def fmod(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if CATEGORY >= CAT_FLOAT32:
        return libdevice.fmod(a, b)
    elif CATEGORY == CAT_UINT:
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
        if CATEGORY == CAT_INT:
            e = tl.where(e < 0, 0, e)
    if CATEGORY == CAT_INT:
        odd = (exponent & 1) != 0
        negative_result = tl.where(base == 1, 1, tl.where(base == -1, tl.where(odd, -1, 1), 0)).to(base.dtype)
        result = tl.where(exponent < 0, negative_result, result)
    return result


@triton.jit
def pow_(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """a ** b. Integer exponents of a float base and the special scalar exponents multiply or take
    roots as ATen does; anything else is libdevice's pow (x ** 0 == 1 for every x, NaN included)."""
    if CATEGORY == CAT_BOOL:
        return a | (b == 0)
    elif CATEGORY < CAT_FLOAT32:
        return _int_pow(a, b, CATEGORY)
    elif MODE == POW_SQUARE:
        return a * a
    elif MODE == POW_CUBE:
        return a * a * a
    elif MODE == POW_SQRT:
        return _sqrt(a, CATEGORY)
    elif MODE == POW_RSQRT:
        return libdevice.rsqrt(a)
    elif MODE == POW_RECIPROCAL:
        return _div(_ones(a), a, CATEGORY)
    elif MODE == POW_RECIPROCAL_SQUARE:
        return _div(_ones(a), a * a, CATEGORY)
    elif MODE == POW_ZERO:
        return _ones(a)
    elif CATEGORY == CAT_FLOAT32:
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
    if CATEGORY == CAT_BOOL:
        return a | b
    elif CATEGORY >= CAT_FLOAT32:
        return tl.where(_isnan(b), b, _max_nan(a, b))
    else:
        return tl.where(a > b, a, b)


@triton.jit
def minimum(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if CATEGORY == CAT_BOOL:
        return a & b
    elif CATEGORY >= CAT_FLOAT32:
        return tl.where(_isnan(b), b, _min_nan(a, b))
    else:
        return tl.where(a < b, a, b)


@triton.jit
def fmax(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """max ignoring NaN: NaN only when both are."""
    if CATEGORY == CAT_BOOL:
        return a | b
    return tl.where(_isnan(b) | (a > b), a, b)


@triton.jit
def fmin(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if CATEGORY == CAT_BOOL:
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
    if CATEGORY == CAT_BOOL:
        return (a == 0) & (b != 0)
    else:
        return a < b


@triton.jit
def le(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if CATEGORY == CAT_BOOL:
        return (a == 0) | (b != 0)
    else:
        return a <= b


@triton.jit
def gt(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if CATEGORY == CAT_BOOL:
        return (a != 0) & (b == 0)
    else:
        return a > b


@triton.jit
def ge(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if CATEGORY == CAT_BOOL:
        return (a != 0) | (b == 0)
    else:
        return a >= b


@triton.jit
def isclose(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """ATen's isclose: ``c`` rtol, ``d`` atol; MODE ISCLOSE_NAN_EQUAL counts NaN as equal to NaN."""
    close = a == b
    if CATEGORY >= CAT_FLOAT32:
        if MODE == ISCLOSE_NAN_EQUAL:
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
    if CATEGORY == CAT_BOOL:
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
    if CATEGORY == CAT_UINT:
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
    """MODE's bits: CLAMP_MIN, a lower bound ``b``; CLAMP_MAX, an upper bound ``c``. NaN anywhere propagates,
    and max wins when min > max, as ATen's min(max(a, lo), hi)."""
    y = a
    if CATEGORY >= CAT_FLOAT32:
        if CLAMP_MIN & MODE:
            y = _max_nan(y, b)
            y = tl.where(_isnan(b), b, y)
        if CLAMP_MAX & MODE:
            y = _min_nan(y, c)
            y = tl.where(_isnan(c), c, y)
    else:
        if CLAMP_MIN & MODE:
            y = tl.where(y < b, b, y)
        if CLAMP_MAX & MODE:
            y = tl.where(y > c, c, y)
    return y


@triton.jit
def lerp(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """ATen's two-sided formula: exact at both ends (weight 0 gives a, weight 1 gives b)."""
    diff = b - a
    return tl.where(tl.abs(c) < 0.5, a + c * diff, b - diff * (1 - c))


@triton.jit
def addcmul(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if CATEGORY == CAT_BOOL:
        return a | (d & b & c)
    else:
        return a + d * b * c


@triton.jit
def addcdiv(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return a + d * _div(b, c, CATEGORY)


@triton.jit
def nan_to_num(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """``b`` replaces NaN, ``c`` +inf, ``d`` -inf; integers pass through."""
    if CATEGORY < CAT_FLOAT32:
        return a
    y = tl.where(_isnan(a), b, a)
    y = tl.where(a == float("inf"), c, y)
    return tl.where(a == float("-inf"), d, y)


@triton.jit
def isfinite(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if CATEGORY >= CAT_FLOAT32:
        return tl.abs(a) < float("inf")
    else:
        return a == a


@triton.jit
def isinf(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if CATEGORY >= CAT_FLOAT32:
        return tl.abs(a) == float("inf")
    else:
        return a != a


@triton.jit
def isposinf(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if CATEGORY >= CAT_FLOAT32:
        return a == float("inf")
    else:
        return a != a


@triton.jit
def isneginf(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if CATEGORY >= CAT_FLOAT32:
        return a == float("-inf")
    else:
        return a != a


@triton.jit
def isnan(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return a != a


@triton.jit
def signbit(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    if CATEGORY >= CAT_FLOAT32:
        return _signbit_float(a, CATEGORY)
    elif CATEGORY == CAT_INT:
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
