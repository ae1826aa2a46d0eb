"""torch.special's Bessel, Airy and gamma-family functions (#29) against references written here: the
power series in 80-digit decimals (so their cancellation costs nothing), integral and closed forms, sums
in float64, and the identities that tie the functions together (Wronskians, P + Q = 1).

Tolerances: the bodies compute in float64 and round once, so a float32 result is its reference rounded
to float32 (half an ulp, 6e-8 relative) plus the float64 error, which is largest where series cancel or
an asymptotic expansion is cut off: about 1e-12 absolute for J, Y and Ai, 1e-10 relative for K (its series
cancel near x = 2), 1e-11 for the incomplete gamma functions (their loops stop at float64's resolution,
each term a rounding)."""
import math
from decimal import Decimal, localcontext

import numpy as np
import pytest

import nbxtensor as nbx
from tests.conftest import to_nbx

PI = Decimal("3.14159265358979323846264338327950288419716939937510582097494459")
EULER_GAMMA = Decimal("0.57721566490153286060651209008240243104215933593992359880576723")
# Ai(0) and -Ai'(0), DLMF 9.2.3-4
AIRY_AI0 = Decimal("0.35502805388781723926006318600418317639797917419917724058332651")
AIRY_DAI0 = Decimal("0.25881940379280679840518356018920396347909113835493458221000181")
DIGITS = 80
F32_RTOL = 1.2e-7  # one float32 rounding, with room for the float64 error under it


def bessel_series(x: float, order: int, modified: bool, second_kind: bool) -> float:
    """J, Y, I or K of order 0 or 1 at x > 0 from their power series (DLMF 10.2.2, 10.8.1, 10.25.2,
    10.31.1), in decimals."""
    with localcontext() as context:
        context.prec = DIGITS
        z = Decimal(x)
        quarter = z * z / 4 * (1 if modified else -1)
        term = Decimal(1) / math.factorial(order)
        value, weighted, harmonic = term, term * (order and 1), Decimal(0)
        for k in range(1, 400):
            term = term * quarter / (k * (k + order))
            harmonic += Decimal(1) / k
            value += term
            weighted += term * (harmonic if order == 0 else 2 * harmonic + Decimal(1) / (k + 1))
            if abs(term) < Decimal(10) ** -(DIGITS - 5) and k > z:
                break
        if order == 1:
            value *= z / 2
        if not second_kind:
            return float(value)
        log_term = ((z / 2).ln() + EULER_GAMMA) * value
        if modified:
            return float(weighted - log_term if order == 0 else 1 / z + log_term - weighted * z / 4)
        if order == 0:
            return float((log_term - weighted) * 2 / PI)
        return float(log_term * 2 / PI - 2 / (PI * z) - weighted * z / (2 * PI))


def airy_series(x: float) -> float:
    """Ai(x) from its Maclaurin series (DLMF 9.4.1), in decimals."""
    with localcontext() as context:
        context.prec = DIGITS
        z = Decimal(x)
        cube = z ** 3
        f_term, g_term = Decimal(1), z
        f, g = f_term, g_term
        for k in range(1, 400):
            f_term = f_term * cube / ((3 * k - 1) * (3 * k))
            g_term = g_term * cube / ((3 * k) * (3 * k + 1))
            f, g = f + f_term, g + g_term
            if abs(f_term) + abs(g_term) < Decimal(10) ** -(DIGITS - 5):
                break
        return float(AIRY_AI0 * f - AIRY_DAI0 * g)


def hurwitz_zeta(s: float, q: float, terms: int = 20000) -> float:
    """sum_k (q + k)^-s, the terms past ``terms`` by the integral and two Euler-Maclaurin corrections."""
    k = np.arange(terms, dtype=np.float64)
    head = np.sum((q + k) ** -s)
    w = q + terms
    return float(head + w ** (1 - s) / (s - 1) + w ** -s / 2 + s * w ** (-s - 1) / 12)


def polygamma_reference(n: int, x: float) -> float:
    """psi^(n)(x): for n >= 1 through the zeta function at x shifted above 1 by the recurrence
    psi^(n)(x + 1) = psi^(n)(x) + (-1)^n n! x^-(n+1); digamma by its series -gamma + sum (1/(k+1) - 1/(k+x))."""
    shift = max(0, math.ceil(1 - x))
    if n == 0:
        k = np.arange(2_000_000, dtype=np.float64)
        y = x + shift
        value = -float(EULER_GAMMA) + float(np.sum(1 / (k + 1) - 1 / (k + y))) + (y - 1) / (2_000_000 + y / 2)
    else:
        value = (-1) ** (n + 1) * math.factorial(n) * hurwitz_zeta(n + 1, x + shift)
    for j in range(shift):
        value -= (-1) ** n * math.factorial(n) / (x + j) ** (n + 1)
    return value


def _call(function, values, dtype=np.float64):
    return function(to_nbx(np.asarray(values, dtype))).numpy().astype(np.float64)


BESSEL = {  # name: (order, modified, second kind, points)
    "bessel_j0": (0, False, False, [1e-3, 0.7, 2.404825557695773, 5.5, 12.9, 13.1, 20.0, 27.3]),
    "bessel_j1": (1, False, False, [1e-3, 0.7, 3.8317059702075125, 5.5, 12.9, 13.1, 20.0, 27.3]),
    "bessel_y0": (0, False, True, [1e-6, 0.2, 0.8935769662791675, 4.0, 12.9, 13.1, 20.0, 27.3]),
    "bessel_y1": (1, False, True, [1e-6, 0.2, 2.197141326031017, 4.0, 12.9, 13.1, 20.0, 27.3]),
    "modified_bessel_k0": (0, True, True, [1e-6, 0.3, 1.0, 1.99, 2.01, 3.5, 8.0, 25.0]),
    "modified_bessel_k1": (1, True, True, [1e-6, 0.3, 1.0, 1.99, 2.01, 3.5, 8.0, 25.0]),
    "modified_bessel_i0": (0, True, False, [1e-3, 0.3, 1.0, 4.0, 12.0, 19.0, 25.0]),
    "modified_bessel_i1": (1, True, False, [1e-3, 0.3, 1.0, 4.0, 12.0, 19.0, 25.0]),
}


@pytest.mark.parametrize("name", sorted(BESSEL))
def test_bessel_against_series(name):
    order, modified, second_kind, points = BESSEL[name]
    points = np.array(points)
    want = np.array([bessel_series(x, order, modified, second_kind) for x in points])
    function = getattr(nbx.special, name)
    # J and Y are O(1) and cancel near their zeros: their error is absolute; I and K's relative
    atol = 0.0 if modified else 1e-12
    np.testing.assert_allclose(_call(function, points), want, rtol=1e-10, atol=atol)
    # float32: the reference at the float32 point
    want32 = [bessel_series(float(x), order, modified, second_kind) for x in points.astype(np.float32)]
    # the I rows keep the float32 series they had as i0 and i1 (existing bodies): 1e-6 relative in float32
    np.testing.assert_allclose(_call(function, points, np.float32), want32,
                               rtol=1e-6 if name.startswith("modified_bessel_i") else F32_RTOL, atol=atol)
    if not second_kind:  # J0 and I0 are even, J1 and I1 odd
        sign = -1.0 if order else 1.0
        np.testing.assert_allclose(_call(function, -points), sign * want, rtol=1e-11, atol=atol)


def test_scaled_k_and_large_arguments():
    x = np.array([0.5, 1.5, 2.5, 6.0, 25.0])
    for order in (0, 1):
        want = np.array([bessel_series(v, order, True, True) for v in x]) * np.exp(x)
        np.testing.assert_allclose(_call(getattr(nbx.special, f"scaled_modified_bessel_k{order}"), x), want,
                                   rtol=1e-11)
    # far out, the leading asymptotic terms: e^x K_v(x) ~ sqrt(pi / 2x) (1 + (4v^2 - 1) / 8x)
    far = np.array([1e4, 1e8, 1e30])
    for order in (0, 1):
        want = np.sqrt(np.pi / (2 * far)) * (1 + (4 * order * order - 1) / (8 * far))
        np.testing.assert_allclose(_call(getattr(nbx.special, f"scaled_modified_bessel_k{order}"), far), want,
                                   rtol=1e-8)
    # J0 and Y0 far out: Hankel's first two terms, sqrt(2 / (pi x)) (cos w + sin w / 8x) and
    # (sin w - cos w / 8x), w = x - pi/4, the rest O(1/x^2) relative
    x = np.array([1e4, 3e5])
    amplitude, phase = np.sqrt(2 / (np.pi * x)), x - np.pi / 4
    np.testing.assert_allclose(_call(nbx.special.bessel_j0, x), amplitude * (np.cos(phase) + np.sin(phase) / (8 * x)),
                               atol=1e-8 * amplitude.max())
    np.testing.assert_allclose(_call(nbx.special.bessel_y0, x), amplitude * (np.sin(phase) - np.cos(phase) / (8 * x)),
                               atol=1e-8 * amplitude.max())


def test_wronskians():
    """J1 Y0 - J0 Y1 = 2 / (pi x) and I0 K1 + I1 K0 = 1 / x (DLMF 10.5.2, 10.28.2), across every
    method's range."""
    x = np.array([1e-3, 0.5, 1.9, 2.1, 7.0, 12.99, 13.01, 40.0, 300.0])
    j0, j1, y0, y1 = (_call(getattr(nbx.special, n), x) for n in ("bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1"))
    np.testing.assert_allclose(j1 * y0 - j0 * y1, 2 / (np.pi * x), rtol=1e-10)
    x = x[x < 100]
    i0, i1, k0, k1 = (_call(getattr(nbx.special, n), x) for n in
                      ("modified_bessel_i0", "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1"))
    np.testing.assert_allclose(i0 * k1 + i1 * k0, 1 / x, rtol=1e-10)


def test_airy_ai():
    x = np.array([-12.0, -7.0, -6.8, -3.3, -1.0, 0.0, 0.4, 1.9, 2.1, 4.0, 8.0])
    want = np.array([airy_series(v) for v in x])
    np.testing.assert_allclose(_call(nbx.special.airy_ai, x), want, rtol=1e-10, atol=1e-13)
    want32 = [airy_series(float(v)) for v in x.astype(np.float32)]
    np.testing.assert_allclose(_call(nbx.special.airy_ai, x, np.float32), want32, rtol=F32_RTOL, atol=1e-13)
    # far out, the expansions' first two terms (DLMF 9.7.5, 9.7.9): Ai(x) ~ e^-zeta / (2 sqrt(pi) x^1/4)
    # (1 - u1 / zeta) and Ai(-z) ~ (sin(zeta + pi/4) + u1 sin(zeta - pi/4) / zeta) / (sqrt(pi) z^1/4), u1 = 5/72
    far = np.array([30.0, 100.0])
    zeta = 2 / 3 * far ** 1.5
    np.testing.assert_allclose(_call(nbx.special.airy_ai, far),
                               np.exp(-zeta) / (2 * np.sqrt(np.pi) * far ** 0.25) * (1 - 5 / (72 * zeta)), rtol=1e-5)
    amplitude = 1 / (np.sqrt(np.pi) * far ** 0.25)
    np.testing.assert_allclose(_call(nbx.special.airy_ai, -far),
                               amplitude * (np.sin(zeta + np.pi / 4) + 5 / (72 * zeta) * np.sin(zeta - np.pi / 4)),
                               atol=1e-5 * amplitude.max())


def test_spherical_bessel_j0():
    x = np.array([-30.0, -1.0, -1e-20, 0.0, 1e-20, 0.5, 3.0, 1e30])
    want = np.where(x == 0, 1.0, np.sin(x) / np.where(x == 0, 1.0, x))
    np.testing.assert_allclose(_call(nbx.special.spherical_bessel_j0, x), want, rtol=1e-15)


def test_bessel_edge_values():
    special = nbx.special
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -2.0])
    j0_at_2 = _call(special.bessel_j0, [2.0])[0]
    np.testing.assert_array_equal(_call(special.bessel_j0, edges), [1, 1, 0, 0, np.nan, j0_at_2])
    np.testing.assert_array_equal(_call(special.bessel_j1, edges)[:5], [0, 0, 0, 0, np.nan])
    np.testing.assert_array_equal(_call(special.bessel_y0, edges), [-np.inf, -np.inf, 0, np.nan, np.nan, np.nan])
    np.testing.assert_array_equal(_call(special.bessel_y1, edges), [-np.inf, -np.inf, 0, np.nan, np.nan, np.nan])
    for name in ("modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1"):
        np.testing.assert_array_equal(_call(getattr(special, name), edges), [np.inf, np.inf, 0, np.nan, np.nan, np.nan])
    np.testing.assert_array_equal(_call(special.airy_ai, [np.inf, -np.inf, np.nan]), [0, 0, np.nan])
    np.testing.assert_array_equal(_call(special.spherical_bessel_j0, [np.inf, -np.inf, np.nan]), [0, 0, np.nan])


def test_zeta():
    np.testing.assert_allclose(_call(lambda s: nbx.special.zeta(s, 1.0), [2.0, 4.0]), [np.pi ** 2 / 6, np.pi ** 4 / 90],
                               rtol=1e-14)
    s = np.array([1.5, 2.0, 3.0, 7.5, 30.0, 3.0, 4.0, 2.0])
    q = np.array([0.3, 1e-3, 12.0, 2.0, 0.9, -2.5, -7.3, 1e6])
    # a negative q by the recurrence zeta(s, q) = q^-s + zeta(s, q + 1), integer s only
    want = []
    for si, qi in zip(s, q):
        shift = max(0, math.ceil(-qi))
        want.append(hurwitz_zeta(si, qi + shift) + sum((qi + j) ** -si for j in range(shift)))
    got = nbx.special.zeta(to_nbx(s), to_nbx(q)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # s = 1 is a pole, s < 1 outside the domain, q a pole at 0, -1, ...; non-integer s has no real negative-q value
    s = np.array([1.0, 0.5, -2.0, 3.0, 3.0, 2.5, 2.0, np.nan, 2.0, 2.0])
    q = np.array([2.0, 2.0, 2.0, 0.0, -4.0, -1.5, np.inf, 1.0, np.nan, -np.inf])
    np.testing.assert_array_equal(nbx.special.zeta(to_nbx(s), to_nbx(q)).numpy(),
                                  [np.inf, np.nan, np.nan, np.inf, np.inf, np.nan, 0.0, np.nan, np.nan, np.inf])


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5])
def test_polygamma(n):
    x = np.array([-7.95, -3.97, -0.5, 1e-3, 0.5, 1.0, 3.7, 25.0])
    want = np.array([polygamma_reference(n, v) for v in x])
    np.testing.assert_allclose(nbx.polygamma(n, to_nbx(x)).numpy(), want, rtol=1e-11)
    got32 = nbx.special.polygamma(n, to_nbx(x.astype(np.float32))).numpy()
    want32 = np.array([polygamma_reference(n, float(v)) for v in x.astype(np.float32)])
    np.testing.assert_allclose(got32, want32, rtol=F32_RTOL)


def test_polygamma_closed_forms_and_poles():
    zeta3 = 1.2020569031595942854
    np.testing.assert_allclose([nbx.polygamma(1, to_nbx(np.array(1.0))).item(),
                                nbx.polygamma(1, to_nbx(np.array(0.5))).item(),
                                nbx.polygamma(2, to_nbx(np.array(1.0))).item(),
                                nbx.polygamma(3, to_nbx(np.array(1.0))).item()],
                               [np.pi ** 2 / 6, np.pi ** 2 / 2, -2 * zeta3, np.pi ** 4 / 15], rtol=1e-14)
    poles = to_nbx(np.array([0.0, -1.0, -3.0]))
    np.testing.assert_array_equal(nbx.polygamma(1, poles).numpy(), [np.inf] * 3)
    np.testing.assert_array_equal(nbx.polygamma(2, poles).numpy(), [-np.inf] * 3)
    np.testing.assert_array_equal(nbx.polygamma(0, poles).numpy(), [-np.inf, np.nan, np.nan])


def test_digamma_float32_near_negative_poles():
    """The OpInfo samples that float32 arithmetic got wrong by 1e-5: now the float64 value, rounded."""
    x = np.array([-7.950587, -3.973022, -3.0336847, -0.9999, -5.0001], np.float32)
    want = np.array([polygamma_reference(0, float(v)) for v in x])
    np.testing.assert_allclose(nbx.digamma(to_nbx(x)).numpy(), want, rtol=F32_RTOL)


def test_incomplete_gamma_closed_forms():
    x = np.array([1e-4, 0.3, 1.0, 2.5, 7.0, 30.0, 120.0])
    for n in (1, 2, 5, 40):  # Q(n, x) = e^-x sum_{k < n} x^k / k!
        upper = np.array([math.exp(-v) * sum(v ** k / math.factorial(k) for k in range(n)) for v in x])
        got_upper = nbx.igammac(to_nbx(np.full_like(x, n)), to_nbx(x)).numpy()
        got_lower = nbx.special.gammainc(to_nbx(np.full_like(x, n)), to_nbx(x)).numpy()
        np.testing.assert_allclose(got_upper, upper, rtol=1e-11, atol=1e-300)
        np.testing.assert_allclose(got_lower + got_upper, 1.0, rtol=1e-14)
    # Q(1/2, x) = erfc(sqrt x); P(3/2, x) = erf(sqrt x) - 2 sqrt(x / pi) e^-x
    root = np.sqrt(x)
    np.testing.assert_allclose(nbx.special.gammaincc(to_nbx(np.full_like(x, 0.5)), to_nbx(x)).numpy(),
                               [math.erfc(r) for r in root], rtol=1e-11)
    lower = np.array([math.erf(r) for r in root]) - 2 * np.sqrt(x / np.pi) * np.exp(-x)
    np.testing.assert_allclose(nbx.igamma(to_nbx(np.full_like(x, 1.5)), to_nbx(x)).numpy(), lower, rtol=1e-10)
    # a tiny shape: Q keeps its digits, about a E1(x) (E1(2) = 0.04890051070806112)
    tiny_shape = nbx.igammac(to_nbx(np.array([1e-30])), to_nbx(np.array([2.0]))).item()
    assert tiny_shape == pytest.approx(4.890051070806112e-32, rel=1e-9)


def test_incomplete_gamma_edges():
    a = np.array([0.0, 0.0, 2.0, 2.0, np.inf, np.inf, -1.0, 2.0, np.nan, 2.0])
    x = np.array([1.0, 0.0, 0.0, np.inf, 2.0, np.inf, 1.0, -1.0, 1.0, np.nan])
    lower = nbx.igamma(to_nbx(a), to_nbx(x)).numpy()
    upper = nbx.igammac(to_nbx(a), to_nbx(x)).numpy()
    np.testing.assert_array_equal(lower, [1, np.nan, 0, 1, 0, np.nan, np.nan, np.nan, np.nan, np.nan])
    np.testing.assert_array_equal(upper, [0, np.nan, 1, 0, 1, np.nan, np.nan, np.nan, np.nan, np.nan])


def test_incomplete_gamma_large_shapes_near_their_mean():
    """Near x = a the series and the fraction take about sqrt(a) terms: the loops run until every element
    has converged. Reference: P + Q = 1, and the normal limit P(a, a) -> 1/2 + 1 / (3 sqrt(2 pi a))."""
    a = np.array([1e3, 1e4])
    lower = nbx.igamma(to_nbx(a), to_nbx(a)).numpy()
    upper = nbx.igammac(to_nbx(a), to_nbx(a)).numpy()
    np.testing.assert_allclose(lower + upper, 1.0, rtol=1e-12)
    np.testing.assert_allclose(lower, 0.5 + 1 / (3 * np.sqrt(2 * np.pi * a)), rtol=1e-4)


def test_mvlgamma():
    x = np.array([2.5, 3.0, 7.25, 40.0])
    for p in (1, 2, 3, 5):
        want = [p * (p - 1) / 4 * math.log(math.pi) + sum(math.lgamma(v - j / 2) for j in range(p)) for v in x]
        np.testing.assert_allclose(nbx.mvlgamma(to_nbx(x), p).numpy(), want, rtol=1e-14)
        np.testing.assert_allclose(nbx.special.multigammaln(to_nbx(x), p=p).numpy(), want, rtol=1e-14)


def test_dtypes_methods_and_out():
    ints = to_nbx(np.array([1, 2, 3]))
    for function in (nbx.special.bessel_j0, nbx.special.airy_ai, nbx.special.modified_bessel_k1):
        assert function(ints).dtype == nbx.float32
        assert function(to_nbx(np.array([True, False]))).dtype == nbx.float32
    half = nbx.special.bessel_y1(to_nbx(np.array([1.0, 2.0], np.float16)))
    assert half.dtype == nbx.float16
    assert nbx.polygamma(1, ints).dtype == nbx.float32
    assert nbx.special.zeta(ints, 2.0).dtype == nbx.float32
    assert nbx.special.zeta(3, to_nbx(np.array([2.0]))).dtype == nbx.float64
    assert nbx.igamma(to_nbx(np.array([2.0], np.float32)), to_nbx(np.array([2.0]))).dtype == nbx.float64
    # broadcasting: a column of shapes against a row of points
    grid = nbx.igamma(to_nbx(np.array([[1.0], [2.0]])), to_nbx(np.array([0.5, 1.0, 3.0])))
    assert tuple(grid.shape) == (2, 3)
    np.testing.assert_allclose(grid.numpy()[0], 1 - np.exp(-np.array([0.5, 1.0, 3.0])), rtol=1e-14)

    x = to_nbx(np.array([0.5, 2.0]))
    np.testing.assert_allclose(x.polygamma(1).numpy(), nbx.polygamma(1, x).numpy(), rtol=0)
    np.testing.assert_allclose(x.igamma(x).numpy(), nbx.igamma(x, x).numpy(), rtol=0)
    np.testing.assert_allclose(x.igammac(x).numpy(), nbx.igammac(x, x).numpy(), rtol=0)
    np.testing.assert_allclose(x.mvlgamma(1).numpy(), [math.lgamma(0.5), 0.0], rtol=1e-14, atol=1e-15)
    out = to_nbx(np.zeros(2))
    assert nbx.special.bessel_j1(x, out=out) is out
    np.testing.assert_allclose(out.numpy(), [bessel_series(v, 1, False, False) for v in (0.5, 2.0)], rtol=1e-12)
    y = to_nbx(np.array([1.0, 2.0]))
    y.polygamma_(1)
    np.testing.assert_allclose(y.numpy(), [np.pi ** 2 / 6, np.pi ** 2 / 6 - 1], rtol=1e-14)
    y.mvlgamma_(1)
    y.igamma_(to_nbx(np.array([1.0, 1.0])))
    assert nbx.special.gammaln is not None and nbx.special.psi is nbx.special.digamma


def test_errors():
    x = to_nbx(np.array([1.0, 2.0]))
    with pytest.raises(RuntimeError, match="negative n"):
        nbx.polygamma(-1, x)
    with pytest.raises(TypeError, match="int"):
        nbx.polygamma(1.5, x)
    with pytest.raises(RuntimeError, match="p has to be greater than or equal to 1"):
        nbx.mvlgamma(x, 0)
    with pytest.raises(TypeError, match="int"):
        x.mvlgamma(2.0)
    with pytest.raises(NotImplementedError, match="int64"):
        nbx.igamma(to_nbx(np.array([1, 2])), to_nbx(np.array([1, 2])))
    with pytest.raises(NotImplementedError, match="complex"):
        nbx.special.bessel_j0(to_nbx(np.array([1 + 1j])))
    with pytest.raises(TypeError, match="tensor"):
        nbx.special.zeta(2.0, 3.0)
    with pytest.raises(RuntimeError, match="broadcast|shape"):
        nbx.special.zeta(to_nbx(np.ones(3)), to_nbx(np.ones(2)))


def test_against_scipy_on_a_grid():
    """A wider sweep than the references above afford, where SciPy is installed (not a dependency)."""
    special = pytest.importorskip("scipy.special")
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-40, 40, 200), rng.uniform(0, 4, 50)])
    positive = np.abs(x) + 1e-3
    cases = [(nbx.special.bessel_j0, special.j0, x), (nbx.special.bessel_y1, special.y1, positive),
             (nbx.special.modified_bessel_k0, special.k0, positive), (nbx.special.scaled_modified_bessel_k1,
                                                                     special.k1e, positive),
             (nbx.special.airy_ai, lambda v: special.airy(v)[0], x)]
    for ours, theirs, points in cases:
        np.testing.assert_allclose(_call(ours, points), theirs(points), rtol=1e-9, atol=1e-12)
    a, points = rng.uniform(0, 50, 200), rng.uniform(0, 60, 200)
    np.testing.assert_allclose(nbx.igamma(to_nbx(a), to_nbx(points)).numpy(), special.gammainc(a, points),
                               rtol=1e-10, atol=1e-300)
    np.testing.assert_allclose(nbx.igammac(to_nbx(a), to_nbx(points)).numpy(), special.gammaincc(a, points),
                               rtol=1e-10, atol=1e-300)
