"""Pointwise bodies of torch.special's orthogonal polynomials and of the integer and float-bits ops
(gcd, lcm, nextafter, ldexp), in the pointwise table's calling convention (``body(a, b, c, d, MODE,
CATEGORY)``, ``a`` and ``b`` already in the compute dtype); and frexp's kernel, which writes two outputs.

A polynomial's degree is the truncated ``n``; NaN, the infinities and values past int64's range count as
negative (torch's conversion makes them int64's minimum), giving 0. The three-term recurrences run in a
loop that lasts while some lane of the block still has a degree to reach and a value that is not NaN
(an overflowed recurrence stays NaN), so a block of low degrees costs a few steps. The Chebyshev kinds
take their trigonometric forms inside (-1, 1) above a small degree, and their closed forms at +-1, as
torch does; Hermite degrees past torch's limit (128 in float32, 512 in float64) are NaN as there.
"""
import triton
import triton.language as tl
from triton.language.extra import libdevice

from .common import program_elements
from .pointwise_bodies import _div, _isnan, _ones, _zeros
from .pointwise_codes import CAT_FLOAT32

# the polynomial families: the body's MODE
CHEBYSHEV_T, CHEBYSHEV_U, CHEBYSHEV_V, CHEBYSHEV_W = (tl.constexpr(k) for k in range(4))
SHIFTED = tl.constexpr(4)  # added to a Chebyshev kind: the polynomial of 2x - 1
HERMITE_H, HERMITE_HE, LAGUERRE_L, LEGENDRE_P = (tl.constexpr(k) for k in range(8, 12))

# nextafter's MODE: the format whose neighbour is wanted, when the compute dtype is wider than it
NEXT_NATIVE, NEXT_BFLOAT16, NEXT_FLOAT16 = (tl.constexpr(k) for k in range(3))

_INT64_RANGE = tl.constexpr(9.223372036854775807e18)
_NAN = tl.constexpr(float("nan"))
# Euclid's algorithm takes at most this many division steps on 64-bit operands (Lame: the worst case
# is consecutive Fibonacci numbers, and F(93) exceeds 2^63)
_EUCLID_STEPS = tl.constexpr(92)


@triton.jit
def _any(condition):
    return tl.max(tl.ravel(condition.to(tl.int32)), axis=0) > 0


@triton.jit
def _recurrence(x, y, n, first, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """P_n from P_0 = 1 and P_1 = ``first`` for the lanes whose ``n`` exceeds 1 (others keep ``first``)."""
    previous = _ones(x)
    current = first
    degree = 1
    more = _any((n > degree) & (current == current))
    while more:
        k = _zeros(x) + degree
        if MODE < HERMITE_H:
            following = (y + y) * current - previous
        elif MODE == HERMITE_H:
            following = (x + x) * current - (k + k) * previous
        elif MODE == HERMITE_HE:
            following = x * current - k * previous
        elif MODE == LAGUERRE_L:
            following = _div((k + k + (1 - x)) * current - k * previous, k + 1, CATEGORY)
        else:
            following = _div((k + k + 1) * x * current - k * previous, k + 1, CATEGORY)
        step = n > k
        previous = tl.where(step, current, previous)
        current = tl.where(step, following, current)
        degree += 1
        more = _any((n > degree) & (current == current))
    return current


@triton.jit
def _chebyshev_trigonometric(y, n, sign, KIND: tl.constexpr, CATEGORY: tl.constexpr):
    """The Chebyshev kinds inside (-1, 1) through theta = acos(y), with their limits where the
    denominator's half-angle form rounds to its endpoint value."""
    theta = libdevice.acos(y)
    if KIND == CHEBYSHEV_T:
        value = libdevice.cos(n * theta)
    elif KIND == CHEBYSHEV_U:
        sine = libdevice.sin(theta)
        value = tl.where(sine != 0, _div(libdevice.sin((n + 1) * theta), sine, CATEGORY),
                         _div((n + 1) * libdevice.cos((n + 1) * theta), y, CATEGORY))
    elif KIND == CHEBYSHEV_V:
        half = theta * 0.5
        value = tl.where(libdevice.sin(half) != 1,
                         _div(libdevice.cos((n + 0.5) * theta), libdevice.cos(half), CATEGORY), sign * (n + n + 1))
    else:
        half = theta * 0.5
        value = tl.where(libdevice.cos(half) != 1,
                         _div(libdevice.sin((n + 0.5) * theta), libdevice.sin(half), CATEGORY), n + n + 1)
    return value


@triton.jit
def _chebyshev(x, n, sign, KIND: tl.constexpr, IS_SHIFTED: tl.constexpr, CATEGORY: tl.constexpr):
    one = _ones(x)
    if IS_SHIFTED:
        y = x + x - 1
    else:
        y = x
    if KIND == CHEBYSHEV_T:
        first, at_plus_one, at_minus_one = y, one, sign
    elif KIND == CHEBYSHEV_U:
        first, at_plus_one, at_minus_one = y + y, n + 1, sign * (n + 1)
    elif KIND == CHEBYSHEV_V:
        first, at_plus_one, at_minus_one = y + y - 1, one, sign * (n + n + 1)
    else:
        first, at_plus_one, at_minus_one = y + y + 1, n + n + 1, sign
    # the degree above which torch takes the trigonometric form
    if IS_SHIFTED:
        if KIND == CHEBYSHEV_W:
            trigonometric_above = 4
        else:
            trigonometric_above = 6
    else:
        if KIND == CHEBYSHEV_T:
            trigonometric_above = 6
        else:
            trigonometric_above = 8
    endpoint = tl.abs(y) == 1
    trigonometric = (tl.abs(y) < 1) & (n > trigonometric_above)
    recurring = tl.where(endpoint | trigonometric, one, n)
    value = _recurrence(x, y, recurring, first, KIND, CATEGORY)
    value = tl.where(trigonometric, _chebyshev_trigonometric(y, n, sign, KIND, CATEGORY), value)
    return tl.where(endpoint, tl.where(y > 0, at_plus_one, at_minus_one), value)


@triton.jit
def orthogonal_polynomial(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """The degree-``b`` polynomial of the family MODE at ``a``."""
    x = a
    zero = _zeros(x)
    one = zero + 1
    n = libdevice.trunc(b)
    n = tl.where(tl.abs(n) < _INT64_RANGE, n, -one)  # NaN fails the comparison too
    sign = tl.where(n - 2 * libdevice.floor(n * 0.5) == 1, -one, one)  # (-1)^n
    if MODE < HERMITE_H:
        value = _chebyshev(x, n, sign, MODE & 3, MODE >= SHIFTED, CATEGORY)  # kind, shifted
    elif MODE == LAGUERRE_L:
        value = _recurrence(x, x, tl.where(x == 0, one, n), 1 - x, MODE, CATEGORY)
        value = tl.where(x == 0, one, value)
    elif MODE == LEGENDRE_P:
        endpoint = tl.abs(x) == 1
        value = _recurrence(x, x, tl.where(endpoint, one, n), x, MODE, CATEGORY)
        value = tl.where(endpoint, tl.where(x > 0, one, sign), value)
    else:
        if CATEGORY == CAT_FLOAT32:
            limit = 128
        else:
            limit = 512
        if MODE == HERMITE_H:
            first = x + x
        else:
            first = x
        beyond = n > limit
        value = _recurrence(x, x, tl.where(beyond, one, n), first, MODE, CATEGORY)
        value = tl.where(beyond, zero + _NAN, value)
    value = tl.where(n == 0, one, value)
    return tl.where(n < 0, zero, value)


@triton.jit
def _gcd(a, b):
    """Euclid's algorithm on |a| and |b|, until every lane's remainder is 0 (lanes that get there early
    hold their result). A loop with a dynamic end rather than a counted one, which the GPU compiler would
    unroll into minutes of compiling."""
    x = tl.abs(a)
    y = tl.abs(b)
    steps = 0
    more = _any(y != 0)
    while more:
        going = y != 0
        remainder = x % tl.where(going, y, 1)
        x = tl.where(going, y, x)
        y = tl.where(going, remainder, y)
        steps += 1
        more = _any(y != 0) & (steps < _EUCLID_STEPS)
    return x


@triton.jit
def gcd(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return _gcd(a, b)


@triton.jit
def lcm(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """|a / gcd * b|, 0 where both are 0 (the division is exact, so its rounding does not matter)."""
    divisor = _gcd(a, b)
    quotient = a // tl.where(divisor == 0, 1, divisor)
    return tl.where(divisor == 0, _zeros(a), tl.abs(quotient * b))


@triton.jit
def _next_toward(x, y, BITS: tl.constexpr, STEP: tl.constexpr):
    """The neighbour of ``x`` toward ``y`` in the format whose last bit is STEP in ``x``'s bits."""
    bits = x.to(BITS, bitcast=True)
    away_from_zero = (y > x) == (x > 0)
    moved = tl.where(away_from_zero, bits + STEP, bits - STEP).to(x.dtype, bitcast=True)
    smallest = (tl.zeros_like(bits) + STEP).to(x.dtype, bitcast=True)
    result = tl.where(x == 0, tl.where(y > 0, smallest, -smallest), moved)
    result = tl.where(x == y, y, result)
    return tl.where(_isnan(x) | _isnan(y), x + y, result)


@triton.jit
def nextafter(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """The next representable value after ``a`` toward ``b``: in float16 or bfloat16 when those are the
    operands' format (computed in float32, where a bfloat16 step is 2^16 in float32's bits)."""
    if MODE == NEXT_FLOAT16:
        return _next_toward(a.to(tl.float16), b.to(tl.float16), tl.int16, 1).to(tl.float32)
    elif MODE == NEXT_BFLOAT16:
        return _next_toward(a, b, tl.int32, 1 << 16)
    elif CATEGORY == CAT_FLOAT32:
        return _next_toward(a, b, tl.int32, 1)
    else:
        return _next_toward(a, b, tl.int64, 1)


@triton.jit
def ldexp(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return a * libdevice.exp2(b)


@triton.jit
def frexp_kernel(x_ptr, mantissa_ptr, exponent_ptr, n, COMPUTE: tl.constexpr, BITS: tl.constexpr,
                 FRACTION_BITS: tl.constexpr, EXPONENT_MASK: tl.constexpr, BIAS: tl.constexpr,
                 SUBNORMAL_SHIFT: tl.constexpr, INDEX_64: tl.constexpr, BLOCK: tl.constexpr):
    """x = mantissa * 2^exponent with |mantissa| in [0.5, 1), read off the bits; subnormals are scaled
    by 2^SUBNORMAL_SHIFT into the normal range first. Zeros, infinities and NaN give themselves and 0."""
    idx = program_elements(BLOCK, INDEX_64)
    mask = idx < n
    x = tl.load(x_ptr + idx, mask=mask, other=0).to(COMPUTE)
    smallest_normal = (tl.zeros_like(x).to(BITS) + (1 << FRACTION_BITS)).to(COMPUTE, bitcast=True)
    subnormal = tl.abs(x) < smallest_normal
    scaled = tl.where(subnormal, x * (1 << SUBNORMAL_SHIFT), x)
    bits = scaled.to(BITS, bitcast=True)
    field = (bits >> FRACTION_BITS) & EXPONENT_MASK
    exponent = field - (BIAS - 1) - tl.where(subnormal, SUBNORMAL_SHIFT, 0)
    # the exponent field of 0.5 in place of the number's, sign and fraction kept
    fraction = bits & ~(tl.zeros_like(bits) + (EXPONENT_MASK << FRACTION_BITS))
    mantissa = (fraction | ((BIAS - 1) << FRACTION_BITS)).to(COMPUTE, bitcast=True)
    special = (x == 0) | _isnan(x) | (tl.abs(x) == float("inf"))
    tl.store(mantissa_ptr + idx, tl.where(special, x, mantissa), mask=mask)
    tl.store(exponent_ptr + idx, tl.where(special, 0, exponent).to(tl.int32), mask=mask)
