"""Pointwise bodies of the gamma family: the Hurwitz zeta function, polygamma, the regularized incomplete
gamma functions and the multivariate log-gamma, in the pointwise table's calling convention
(``body(a, b, c, d, MODE, CATEGORY)``). Each computes in float64 and rounds once on return.

- zeta(s, q) = sum_k (q + k)^-s: the terms below q + k = 10 summed, the rest by Euler-Maclaurin
  (DLMF 25.11.5 with N = 0 at the shifted q), whose remainder after the B_24 term is below float64's
  resolution there. A negative q is summed up from (only integer s make its powers real), with at most
  ``_MAX_TERMS`` terms: below q = -8182 the result is NaN rather than a partial sum.
- polygamma(n, x) = (-1)^(n+1) n! zeta(n + 1, x) for n >= 1, digamma for n = 0.
- P(a, x) and Q(a, x): the power series of P for x <= a + 1, Legendre's continued fraction for Q beyond
  (DLMF 8.7.1 and 8.9.2, the fraction evaluated by modified Lentz); for x <= 1.1 Q is taken from the
  series of gamma(a, x) (DLMF 8.7.3) as 1 - x^a / Gamma(a + 1) plus the rest, which keeps Q's digits when
  P is close to 1. Both loops run until their terms fall below float64's resolution on every element of
  the block, at most ``_MAX_TERMS`` times; an element that would need more (a and x past about 10^6 and
  close) is NaN rather than a truncated value.
"""
import triton
import triton.language as tl
from triton.language.extra import libdevice

from .special import digamma_float64

# polygamma's MODE: digamma (order 0) or a higher order ``b``
POLYGAMMA_DIGAMMA = tl.constexpr(0)
POLYGAMMA_HIGHER = tl.constexpr(1)

# incomplete_gamma's MODE: the lower P(a, x) (igamma) or the upper Q(a, x) (igammac)
GAMMA_LOWER = tl.constexpr(0)
GAMMA_UPPER = tl.constexpr(1)

_INF = tl.constexpr(float("inf"))
_NAN = tl.constexpr(float("nan"))
_EPS = tl.constexpr(1.1102230246251565e-16)
_TINY = tl.constexpr(1e-300)
_LOG_PI = tl.constexpr(1.1447298858494002)
# zeta: terms are summed up to this q + k, and at most this many of them
_ZETA_SHIFT = tl.constexpr(10.0)
_MAX_TERMS = tl.constexpr(8192)
_SMALL_X = tl.constexpr(1.1)


def _bernoulli_over_factorial(count):
    """B_2j / (2j)! for j = 1..count, the Bernoulli numbers from sum_{k <= m} C(m + 1, k) B_k = 0 (m >= 1)
    in exact fractions."""
    from fractions import Fraction
    from math import comb, factorial
    bernoulli = [Fraction(1)]
    for m in range(1, 2 * count + 1):
        bernoulli.append(-sum(comb(m + 1, k) * bernoulli[k] for k in range(m)) / (m + 1))
    return tuple(float(bernoulli[2 * j] / factorial(2 * j)) for j in range(1, count + 1))


_EULER_MACLAURIN_TERMS = tl.constexpr(12)
_EULER_MACLAURIN = tl.constexpr(_bernoulli_over_factorial(_EULER_MACLAURIN_TERMS))


@triton.jit
def _any(flags):
    """Whether any element of a block (of any rank) is set, as a scalar."""
    return tl.max(tl.ravel(flags.to(tl.int32)), axis=0) > 0


@triton.jit
def _zeta(s, q):
    """The Hurwitz zeta function of float64 s and q."""
    total = tl.zeros_like(q)
    shifted = q
    count = 0
    # a negative q is summed up from through its poles only for an integer s (q^-s is complex otherwise)
    summable = (s > 1) & ((q > 0) | ((s == libdevice.floor(s)) & (q != libdevice.floor(q))))
    pending = summable & (shifted < _ZETA_SHIFT)
    while _any(pending) & (count < _MAX_TERMS):
        total = total + tl.where(pending, libdevice.pow(shifted, -s), tl.zeros_like(q))
        shifted = tl.where(pending, shifted + 1.0, shifted)
        pending = pending & (shifted < _ZETA_SHIFT)
        count += 1
    w = tl.where(summable & (shifted >= _ZETA_SHIFT), shifted, tl.zeros_like(q) + _ZETA_SHIFT)
    power = libdevice.pow(w, -s)
    total = total + w * power / (s - 1.0) + 0.5 * power
    # the Euler-Maclaurin terms B_2j / (2j)! s (s + 1) ... (s + 2j - 2) w^(-s - 2j + 1)
    inverse_square = 1.0 / (w * w)
    factor = s * power / w
    for j in tl.static_range(_EULER_MACLAURIN_TERMS):
        if j > 0:
            factor = factor * (s + (2 * j - 1)) * (s + 2 * j) * inverse_square
        total = total + _EULER_MACLAURIN[j] * factor
    total = tl.where(q == _INF, tl.zeros_like(q), total)
    # NaN: s < 1 or NaN, q NaN, q^-s complex, or a negative q too large to sum up from
    total = tl.where(summable & (q == q) & (pending == 0), total, tl.zeros_like(q) + _NAN)
    pole = (s == 1.0) | ((s > 1.0) & (q <= 0) & (q == libdevice.floor(q)))
    return tl.where(pole, tl.zeros_like(q) + _INF, total)


@triton.jit
def zeta(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return _zeta(a.to(tl.float64), b.to(tl.float64)).to(a.dtype)


@triton.jit
def polygamma(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """``a`` the input, ``b`` the order n (a whole number >= 0); MODE POLYGAMMA_DIGAMMA is n = 0."""
    x = a.to(tl.float64)
    if MODE == POLYGAMMA_DIGAMMA:
        result = digamma_float64(x)
    else:
        n = b.to(tl.float64)
        odd = n - 2.0 * libdevice.floor(n * 0.5)
        sign = 2.0 * odd - 1.0
        result = sign * libdevice.exp(libdevice.lgamma(n + 1.0)) * _zeta(n + 1.0, x)
    return result.to(a.dtype)


@triton.jit
def _incomplete_gamma(a, x, UPPER: tl.constexpr):
    """P(a, x), or Q(a, x) when UPPER, for float64 a > 0 and 0 < x < inf."""
    log_prefix = a * libdevice.log(x) - x - libdevice.lgamma(a)
    use_series = x <= a + 1.0
    small_x = x <= _SMALL_X
    # P = x^a e^-x / Gamma(a + 1) sum_k x^k / ((a + 1) ... (a + k)), while x <= a + 1
    term = tl.zeros_like(x) + 1.0
    series = term
    # gamma(a, x) series: sum_{n >= 1} (-x)^n / ((a + n) n!)
    alternating_term = tl.zeros_like(x) + 1.0
    alternating = tl.zeros_like(x)
    # Legendre's fraction for Q, by modified Lentz: 1 / (x + 1 - a - 1 (1 - a) / (x + 3 - a - ...))
    b_k = x + 1.0 - a
    fraction_c = tl.zeros_like(x) + 1.0 / _TINY
    fraction_d = 1.0 / tl.where(b_k == 0, tl.zeros_like(x) + _TINY, b_k)
    fraction = fraction_d
    pending = tl.zeros_like(x) == 0
    k = 1
    while _any(pending) & (k < _MAX_TERMS):
        # finished elements keep their sums: later terms of the fraction may overflow
        term = tl.where(pending, term * x / (a + k), term)
        series = series + tl.where(pending, term, tl.zeros_like(x))
        alternating_term = tl.where(pending, alternating_term * -x / k, alternating_term)
        alternating = alternating + tl.where(pending, alternating_term / (a + k), tl.zeros_like(x))
        coefficient = -k * (k - a)
        b_k = b_k + 2.0
        fraction_d = b_k + coefficient * fraction_d
        fraction_d = 1.0 / tl.where(tl.abs(fraction_d) < _TINY, tl.zeros_like(x) + _TINY, fraction_d)
        fraction_c = b_k + coefficient / fraction_c
        fraction_c = tl.where(tl.abs(fraction_c) < _TINY, tl.zeros_like(x) + _TINY, fraction_c)
        change = tl.where(pending, fraction_c * fraction_d, tl.zeros_like(x) + 1.0)
        fraction = fraction * change
        series_pending = tl.abs(term) > series * _EPS
        fraction_pending = tl.abs(change - 1.0) > _EPS
        alternating_pending = tl.abs(alternating_term) > _EPS * (a + k) * tl.abs(alternating)
        pending = pending & tl.where(use_series, series_pending | (small_x & alternating_pending), fraction_pending)
        k += 1
    lower = libdevice.exp(log_prefix - libdevice.log(a)) * series
    upper_fraction = libdevice.exp(log_prefix) * fraction
    # Q = (1 - x^a / Gamma(a + 1)) - x^a / Gamma(a + 1) a sum_{n >= 1} (-x)^n / ((a + n) n!)
    log_power = a * libdevice.log(x) - libdevice.lgamma(a + 1.0)
    upper_small = -libdevice.expm1(log_power) - libdevice.exp(log_power) * a * alternating
    if UPPER:
        result = tl.where(use_series, tl.where(small_x, upper_small, 1.0 - lower), upper_fraction)
    else:
        result = tl.where(use_series, lower, 1.0 - upper_fraction)
    return tl.where(pending, tl.zeros_like(x) + _NAN, result)


@triton.jit
def incomplete_gamma(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """``a`` the shape, ``b`` the point; MODE GAMMA_LOWER, P(a, x) (igamma), or GAMMA_UPPER, Q(a, x) (igammac).
    At the domain's edges: NaN below 0; a = 0 gives the limit of the x > 0 values (NaN at x = 0); x = 0
    and x = inf give 0 and 1 (swapped for Q); an infinite a gives P = 0 (NaN when x is infinite too)."""
    shape = a.to(tl.float64)
    x = b.to(tl.float64)
    inside = (shape > 0) & (x > 0) & (shape < _INF) & (x < _INF)
    value = _incomplete_gamma(tl.where(inside, shape, tl.zeros_like(x) + 1.0),
                              tl.where(inside, x, tl.zeros_like(x) + 1.0), MODE == GAMMA_UPPER)
    # P at the edges; Q is 1 - P there
    edge = tl.where(shape == 0, tl.where(x > 0, tl.zeros_like(x) + 1.0, tl.zeros_like(x) + _NAN),
                    tl.where(x == 0, tl.zeros_like(x),
                             tl.where(shape == _INF, tl.where(x == _INF, tl.zeros_like(x) + _NAN, tl.zeros_like(x)),
                                      tl.zeros_like(x) + 1.0)))
    if MODE == GAMMA_UPPER:
        edge = 1.0 - edge
    result = tl.where(inside, value, edge)
    result = tl.where((shape < 0) | (x < 0) | (shape != shape) | (x != x), tl.zeros_like(x) + _NAN, result)
    return result.to(a.dtype)


@triton.jit
def mvlgamma(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """log of the multivariate gamma function of dimension MODE: MODE (MODE - 1) / 4 log pi plus
    sum_{j < MODE} lgamma(x - j / 2)."""
    x = a.to(tl.float64)
    result = tl.zeros_like(x) + MODE * (MODE - 1) * 0.25 * _LOG_PI
    for j in range(MODE):
        result = result + libdevice.lgamma(x - j * 0.5)
    return result.to(a.dtype)
