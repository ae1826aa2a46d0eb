"""Pointwise bodies of ``torch.special``'s functions, in the pointwise table's calling convention
(``body(a, b, c, d, MODE, CATEGORY)``, ``a`` and ``b`` already in the compute dtype).

Where CUDA's libdevice has the function (lgamma, erfcx, normcdf, normcdfinv) the body calls it. The
digamma and the modified Bessel functions are computed here: digamma (in float64) by recurrence up to 10 and the
asymptotic (Bernoulli) series beyond; I0 and I1 by their power series up to |x| = 20 and by their
asymptotic expansions beyond, so the exponentially scaled forms (i0e, i1e) never overflow. Their series run as
loops rather than unrolled (60 and 30 terms unrolled took ptxas half a minute a specialisation), doing the
operations of the sums written out in the same order (an integer divisor converts exactly).
"""
import triton
import triton.language as tl
from triton.language.extra import libdevice

from .pointwise_bodies import _div, _isnan, _ones, _sqrt, _zeros

_PI = tl.constexpr(3.141592653589793)
_SQRT_HALF = tl.constexpr(0.7071067811865476)
_INV_SQRT_2PI = tl.constexpr(0.3989422804014327)
_INF = tl.constexpr(float("inf"))
_NAN = tl.constexpr(float("nan"))
# the power series of I0 and I1 serve |x| up to this; the asymptotic expansions beyond, where their
# smallest term is below float64's resolution
_BESSEL_SERIES_LIMIT = tl.constexpr(20.0)
_BESSEL_SERIES_TERMS = tl.constexpr(60)
_BESSEL_ASYMPTOTIC_TERMS = tl.constexpr(30)
_DIGAMMA_SHIFT = tl.constexpr(10)


@triton.jit
def lgamma(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return libdevice.lgamma(a)


@triton.jit
def digamma_float64(a):
    """psi(a) for float64 ``a``: -inf at 0 (signed as -a), NaN at the negative integers, reflection below 0."""
    negative = a < 0
    # psi(x) = psi(1 - x) - pi / tan(pi x) for x < 0, the tangent's argument reduced exactly by its period
    x = tl.where(negative, 1.0 - a, a)
    reduced = a - libdevice.rint(a)
    reflection = tl.where(negative, _PI / libdevice.tan(reduced * _PI), tl.zeros_like(a))
    result = tl.zeros_like(a)
    for _ in range(_DIGAMMA_SHIFT):
        small = x < _DIGAMMA_SHIFT
        result = result - tl.where(small, 1.0 / x, tl.zeros_like(a))
        x = tl.where(small, x + 1, x)
    # psi(x) ~ log x - 1/(2x) - sum B_2k / (2k x^2k), for x >= 10
    y = 1.0 / (x * x)
    series = y * (1.0 / 12 - y * (1.0 / 120 - y * (1.0 / 252 - y * (1.0 / 240 - y * (1.0 / 132 - y * (
        691.0 / 32760 - y * (1.0 / 12)))))))
    result = result + libdevice.log(x) - 0.5 / x - series - reflection
    pole = a == libdevice.floor(a)
    result = tl.where(negative & pole, tl.zeros_like(a) + _NAN, result)
    # +0 gives -inf and -0 gives +inf, told apart by the sign of 1 / x
    return tl.where(a == 0, tl.where(1.0 / a < 0, tl.zeros_like(a) + _INF, tl.zeros_like(a) - _INF), result)


@triton.jit
def digamma(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """In float64 whatever the input: near the negative poles float32 loses the digits that the
    reflection's large terms cancel."""
    return digamma_float64(a.to(tl.float64)).to(a.dtype)


@triton.jit
def erfcx(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return libdevice.erfcx(a)


@triton.jit
def ndtr(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """The standard normal CDF, 0.5 erfc(-x / sqrt 2): accurate in the lower tail too."""
    return libdevice.erfc(-a * _SQRT_HALF) * 0.5


@triton.jit
def ndtri(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return libdevice.normcdfinv(a)


@triton.jit
def log_ndtr(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """log of the normal CDF: through erfcx in the lower tail (where the CDF underflows), log1p of the
    upper tail's complement elsewhere."""
    t = -a * _SQRT_HALF
    lower = libdevice.log(libdevice.erfcx(t) * 0.5) - t * t
    upper = libdevice.log1p(libdevice.erfc(-t) * -0.5)
    return tl.where(a < -1, lower, upper)


@triton.jit
def entr(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """-x log x: 0 at 0, -inf below 0, NaN kept."""
    positive = -a * libdevice.log(a)
    result = tl.where(a > 0, positive, tl.where(a == 0, _zeros(a), _zeros(a) - _INF))
    return tl.where(_isnan(a), a, result)


@triton.jit
def sinc(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """sin(pi x) / (pi x), 1 at 0."""
    scaled = a * _PI
    return tl.where(a == 0, _ones(a), _div(libdevice.sin(scaled), scaled, CATEGORY))


@triton.jit
def xlog1py(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """x log(1 + y), 0 where x is 0 (unless y is NaN)."""
    return tl.where(_isnan(b), b, tl.where(a == 0, _zeros(a), a * libdevice.log1p(b)))


@triton.jit
def _bessel_scaled(x, ORDER: tl.constexpr, CATEGORY: tl.constexpr):
    """exp(-x) I_ORDER(x) for x >= 0 (ORDER 0 or 1)."""
    one = _ones(x)
    quarter_square = x * x * 0.25
    # power series: I_v(x) = (x/2)^v sum (x^2/4)^k / (k! (k + v)!)
    term = one
    if ORDER == 1:
        term = x * 0.5
    total = term
    for k in range(1, _BESSEL_SERIES_TERMS):
        term = _div(term * quarter_square, one * (k * (k + ORDER)), CATEGORY)
        total = total + term
    series = total * libdevice.exp(-x)
    # asymptotic: I_v(x) ~ e^x / sqrt(2 pi x) sum_k (-1)^k prod_j (4v^2 - (2j - 1)^2) / (k! (8x)^k)
    far = tl.maximum(x, one * _BESSEL_SERIES_LIMIT)
    step = _div(one, far * 8, CATEGORY)
    # the first term apart, without its factors of 1: the compiler drops those from constant code, and
    # the product left may then fuse with the sum, so this keeps the bits of the sum written out in full
    term = step * (1 - 4 * ORDER * ORDER)
    total = one + term
    for k in range(2, _BESSEL_ASYMPTOTIC_TERMS):
        term = term * step * ((2 * k - 1) * (2 * k - 1) - 4 * ORDER * ORDER) / k
        total = total + term
    asymptotic = _div(total * _INV_SQRT_2PI, _sqrt(far, CATEGORY), CATEGORY)
    return tl.where(x > _BESSEL_SERIES_LIMIT, asymptotic, series)


@triton.jit
def i0(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    x = tl.abs(a)
    return _bessel_scaled(x, 0, CATEGORY) * libdevice.exp(x)


@triton.jit
def i0e(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return _bessel_scaled(tl.abs(a), 0, CATEGORY)


@triton.jit
def i1(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    x = tl.abs(a)
    value = _bessel_scaled(x, 1, CATEGORY) * libdevice.exp(x)
    return tl.where(a < 0, -value, value)


@triton.jit
def i1e(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    value = _bessel_scaled(tl.abs(a), 1, CATEGORY)
    return tl.where(a < 0, -value, value)
