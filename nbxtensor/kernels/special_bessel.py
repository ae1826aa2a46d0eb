"""Pointwise bodies of torch.special's Bessel and Airy functions, in the pointwise table's calling convention
(``body(a, b, c, d, MODE, CATEGORY)``).

Every body computes in float64 whatever the input's dtype and rounds once on return: the series below
cancel (their terms grow to about e^|x| / |x| before the sum settles), which float32 could not absorb.

- J0, J1, Y0, Y1: their power series (DLMF 10.2.2, 10.8.1) up to |x| = 13, Hankel's asymptotic expansion
  (DLMF 10.17.3-4) beyond, where its smallest term (about e^-2x) is below float32's resolution by far.
- K0, K1 (and their e^x-scaled forms): the power series (DLMF 10.31.1) up to x = 2; beyond, the integral
  e^x K_v(x) = int_0^inf exp(-x (cosh t - 1)) cosh(v t) dt (DLMF 10.32.9) by the trapezoidal rule in
  s = t sqrt(x), which converges geometrically for an integrand analytic in a strip and, in s, is close to
  a unit Gaussian for every x >= 2 (so one step serves all of them).
- Ai: its Maclaurin series (DLMF 9.4.1) on -6.87 <= x <= 2; K_1/3 by the integral above for x > 2
  (Ai(x) = sqrt(x / 3) K_1/3(zeta) / pi, DLMF 9.6.1); Hankel's expansion with v = 1/3 for x < -6.87
  (DLMF 9.7.9), where zeta = (2/3)|x|^1.5 passes 12.

The series run as loops rather than unrolled: unrolled float64 bodies of this length take ptxas minutes.
"""
import triton
import triton.language as tl
from triton.language.extra import libdevice

from .special import _INF, _NAN, _PI, _SQRT_HALF

# bessel_jy's and bessel_k's MODE, bits: the order (0 or 1), and the second kind Y (bessel_jy) or the
# e^x-scaled form (bessel_k); under the interpreter MODE is a plain int, so the constexpr comes first
BESSEL_ORDER_1 = tl.constexpr(1)
BESSEL_SECOND_KIND = tl.constexpr(2)
BESSEL_SCALED = tl.constexpr(2)

_EULER_GAMMA = tl.constexpr(0.5772156649015329)
# J and Y: the power series serve |x| up to this, with this many terms (the last below 1e-17 of the largest)
_SERIES_LIMIT = tl.constexpr(13.0)
_SERIES_TERMS = tl.constexpr(40)
# Hankel's expansion: its terms fall until about k = 2x, so this many serve every x past the limits above
_HANKEL_TERMS = tl.constexpr(24)
# K: the power series up to this x, then the trapezoidal rule with this step and this many nodes a side
# (exp(-s^2 / 2) bounds the integrand, below 1e-21 at the last node)
_K_SERIES_LIMIT = tl.constexpr(2.0)
_K_STEP = tl.constexpr(0.5)
_K_NODES = tl.constexpr(20)
# Ai(0) and -Ai'(0) (DLMF 9.2.3-4); the Maclaurin series serves zeta up to 12 below 0, x up to 2 above
_AIRY_AI0 = tl.constexpr(0.3550280538878172)
_AIRY_DAI0 = tl.constexpr(0.2588194037928068)
_AIRY_ZETA_LIMIT = tl.constexpr(12.0)
_AIRY_SERIES_TERMS = tl.constexpr(40)


@triton.jit
def _series(x, ORDER: tl.constexpr, SIGN: tl.constexpr):
    """(J_ORDER(x) or I_ORDER(x), the harmonic sum of their logarithmic companions) for x in float64:
    with t_k = (SIGN x^2 / 4)^k / (k! (k + ORDER)!), the value is (x/2)^ORDER sum t_k and the sum is
    sum H_k t_k (ORDER 0) or sum (H_k + H_k+1) t_k (ORDER 1), H_k the harmonic numbers."""
    step = x * x * 0.25 * SIGN
    one = tl.zeros_like(x) + 1.0
    term = one
    total = term
    # a float64 block: a Python float carried through the loop would be rounded to float32
    harmonic = tl.zeros_like(x)
    weighted = tl.zeros_like(x)
    if ORDER == 1:
        weighted = term  # H_0 + H_1
    for k in range(1, _SERIES_TERMS):
        term = term * step / (k * (k + ORDER))
        harmonic = harmonic + one / k
        total = total + term
        if ORDER == 0:
            weighted = weighted + term * harmonic
        else:
            weighted = weighted + term * (2.0 * harmonic + one / (k + 1))
    if ORDER == 1:
        total = total * x * 0.5
    return total, weighted


@triton.jit
def _hankel(x, FOUR_NU_SQUARED: tl.constexpr):
    """Hankel's P and Q for x >= 12: P = sum (-1)^k a_2k / x^2k, Q = sum (-1)^k a_2k+1 / x^2k+1, with
    a_k = prod_{j <= k} (4 v^2 - (2j - 1)^2) / (k! 8^k)."""
    step = 1.0 / (x * 8.0)
    term = tl.zeros_like(x) + 1.0
    p = term
    q = tl.zeros_like(x)
    # four terms a round, one of each sign and kind; the index in float64 keeps 4 v^2 - (2k - 1)^2 exact
    for group in range(_HANKEL_TERMS // 4):
        k = tl.zeros_like(x) + (4 * group + 1)
        term = term * step * (FOUR_NU_SQUARED - (2.0 * k - 1.0) * (2.0 * k - 1.0)) / k
        q = q + term
        term = term * step * (FOUR_NU_SQUARED - (2.0 * k + 1.0) * (2.0 * k + 1.0)) / (k + 1.0)
        p = p - term
        term = term * step * (FOUR_NU_SQUARED - (2.0 * k + 3.0) * (2.0 * k + 3.0)) / (k + 2.0)
        q = q - term
        term = term * step * (FOUR_NU_SQUARED - (2.0 * k + 5.0) * (2.0 * k + 5.0)) / (k + 3.0)
        p = p + term
    return p, q


@triton.jit
def _bessel_jy(a, ORDER: tl.constexpr, SECOND_KIND: tl.constexpr):
    """J_ORDER(a) or Y_ORDER(a) (ORDER 0 or 1) in float64."""
    x = tl.abs(a)
    near = tl.minimum(x, _SERIES_LIMIT)
    value, weighted = _series(near, ORDER, -1.0)
    if SECOND_KIND:
        log_term = (libdevice.log(near * 0.5) + _EULER_GAMMA) * value * (2.0 / _PI)
        if ORDER == 0:
            series = log_term - weighted * (2.0 / _PI)
        else:
            series = log_term - 2.0 / (_PI * near) - weighted * near / (2.0 * _PI)
    else:
        series = value
    far = tl.maximum(x, _SERIES_LIMIT)
    p, q = _hankel(far, 4.0 * ORDER * ORDER)
    # the phase far - (ORDER / 2 + 1/4) pi, by its sine and cosine from far's own
    sine, cosine = libdevice.sin(far), libdevice.cos(far)
    if ORDER == 0:
        cos_phase = (cosine + sine) * _SQRT_HALF
        sin_phase = (sine - cosine) * _SQRT_HALF
    else:
        cos_phase = (sine - cosine) * _SQRT_HALF
        sin_phase = -(sine + cosine) * _SQRT_HALF
    amplitude = tl.sqrt(2.0 / (_PI * far))
    if SECOND_KIND:
        asymptotic = amplitude * (p * sin_phase + q * cos_phase)
    else:
        asymptotic = amplitude * (p * cos_phase - q * sin_phase)
    result = tl.where(x > _SERIES_LIMIT, asymptotic, series)
    result = tl.where(x == _INF, tl.zeros_like(x), result)
    if SECOND_KIND:
        result = tl.where(x == 0, tl.zeros_like(x) - _INF, result)
        result = tl.where(a < 0, tl.zeros_like(x) + _NAN, result)
    elif ORDER == 1:
        result = tl.where(a < 0, -result, result)
    # a GPU's minimum and maximum return the number beside a NaN, so near and far hold no NaN to carry
    return tl.where(a != a, a, result)


@triton.jit
def _scaled_k_integral(x, NU: tl.constexpr):
    """e^x K_NU(x) for x >= 2 (float64), by the trapezoidal rule in s = t sqrt(x); x(cosh t - 1) is
    2x sinh^2(t/2), which keeps its digits where t is small."""
    root = tl.sqrt(x)
    total = tl.zeros_like(x) + 0.5  # the node at 0 counts half
    for j in range(1, _K_NODES + 1):
        t = (j * _K_STEP) / root
        half = libdevice.sinh(t * 0.5)
        node = libdevice.exp(-2.0 * x * half * half)
        if NU != 0.0:
            node = node * libdevice.cosh(t * NU)
        total = total + node
    return total * _K_STEP / root


@triton.jit
def _bessel_k(a, ORDER: tl.constexpr, SCALED: tl.constexpr):
    """K_ORDER(a), or e^a K_ORDER(a) when SCALED, in float64."""
    near = tl.minimum(a, _K_SERIES_LIMIT)
    value, weighted = _series(near, ORDER, 1.0)
    log_term = (libdevice.log(near * 0.5) + _EULER_GAMMA) * value
    if ORDER == 0:
        series = weighted - log_term
    else:
        series = 1.0 / near + log_term - weighted * near * 0.25
    if SCALED:
        series = series * libdevice.exp(near)
    far = tl.where(a > _K_SERIES_LIMIT, a, tl.zeros_like(a) + _K_SERIES_LIMIT)
    integral = _scaled_k_integral(far, ORDER * 1.0)
    if not SCALED:
        integral = integral * libdevice.exp(-far)
    result = tl.where(a > _K_SERIES_LIMIT, integral, series)
    result = tl.where(a == _INF, tl.zeros_like(a), result)
    result = tl.where(a == 0, tl.zeros_like(a) + _INF, result)
    # a NaN too: near, clamped by a GPU's minimum, lost it
    return tl.where((a < 0) | (a != a), tl.zeros_like(a) + _NAN, result)


@triton.jit
def _airy_ai(x):
    """Ai(x) in float64."""
    magnitude = tl.abs(x)
    zeta = magnitude * tl.sqrt(magnitude) * (2.0 / 3.0)
    # Maclaurin: Ai = Ai(0) f - (-Ai'(0)) g, f = sum x^3k prod (3j - 2) / (3k)!, g = sum x^3k+1 prod (3j - 1) / (3k+1)!
    near = tl.where((x <= 2.0) & (zeta <= _AIRY_ZETA_LIMIT), x, tl.zeros_like(x))
    cube = near * near * near
    f_term = tl.zeros_like(x) + 1.0
    g_term = near
    f = f_term
    g = g_term
    for k in range(1, _AIRY_SERIES_TERMS):
        f_term = f_term * cube / ((3 * k - 1) * (3 * k))
        g_term = g_term * cube / ((3 * k) * (3 * k + 1))
        f = f + f_term
        g = g + g_term
    series = _AIRY_AI0 * f - _AIRY_DAI0 * g
    # x > 2: Ai(x) = sqrt(x / 3) e^-zeta (e^zeta K_1/3(zeta)) / pi
    positive_zeta = tl.where(x > 2.0, zeta, tl.zeros_like(x) + _K_SERIES_LIMIT)
    decaying = (tl.sqrt(tl.maximum(x, 2.0) / 3.0) * libdevice.exp(-positive_zeta)
                * _scaled_k_integral(positive_zeta, 1.0 / 3.0) / _PI)
    # x < 0, zeta > 12: Ai(-z) = (P cos(zeta - pi/4) - Q sin(zeta - pi/4)) / (sqrt(pi) z^1/4), P and Q for v = 1/3
    far = tl.maximum(zeta, _AIRY_ZETA_LIMIT)
    p, q = _hankel(far, 4.0 / 9.0)
    sine, cosine = libdevice.sin(far), libdevice.cos(far)
    oscillating = ((p * (cosine + sine) - q * (sine - cosine)) * _SQRT_HALF
                   / (tl.sqrt(_PI * tl.sqrt(magnitude))))
    result = tl.where(x > 2.0, decaying, tl.where(zeta > _AIRY_ZETA_LIMIT, oscillating, series))
    result = tl.where(magnitude == _INF, tl.zeros_like(x), result)
    return tl.where(x != x, x, result)


# the bodies: MODE picks the function of a family, as the table's rows give it

@triton.jit
def airy_ai(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    return _airy_ai(a.to(tl.float64)).to(a.dtype)


@triton.jit
def bessel_jy(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """MODE: BESSEL_ORDER_1 and BESSEL_SECOND_KIND (Y) bits."""
    return _bessel_jy(a.to(tl.float64), BESSEL_ORDER_1 & MODE, BESSEL_SECOND_KIND & MODE).to(a.dtype)


@triton.jit
def bessel_k(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """MODE: BESSEL_ORDER_1 and BESSEL_SCALED (e^x K) bits."""
    return _bessel_k(a.to(tl.float64), BESSEL_ORDER_1 & MODE, BESSEL_SCALED & MODE).to(a.dtype)


@triton.jit
def spherical_bessel_j0(a, b, c, d, MODE: tl.constexpr, CATEGORY: tl.constexpr):
    """sin(x) / x: 1 at 0, 0 at the infinities."""
    x = a.to(tl.float64)
    result = tl.where(x == 0, tl.zeros_like(x) + 1.0, libdevice.sin(x) / x)
    return tl.where(tl.abs(x) == _INF, tl.zeros_like(x), result).to(a.dtype)
