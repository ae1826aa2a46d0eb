"""torch.special's orthogonal polynomials, gcd, lcm, nextafter, ldexp, frexp and nbx.signal.windows against
float64 references written here in NumPy: the polynomials' defining recurrences and closed forms, NumPy's
own polynomial series (Clenshaw sums, independent of a forward recurrence), math.gcd and math.lcm,
np.nextafter and np.frexp, and the windows' formulas written out.

Tolerances: the float64 polynomials take up to a dozen recurrence steps or one trigonometric form, each
step a few roundings on values of magnitude up to max|P_k|, so they match within 1e-12 of that magnitude;
float32 within 2e-5 of it (the same steps at 2^-24, and acos's error times n in the trigonometric forms).
The bit-level ops (gcd, lcm, nextafter, frexp, ldexp by whole powers) are exact. Windows: a ramp, one or
four cosines and a sum, within 1e-13 in float64 and 2e-6 in float32 (values are at most 1); kaiser divides
two I0 series values, 1e-12 and 1e-5 relative."""
import math

import ml_dtypes
import numpy as np
import pytest
from numpy.polynomial import chebyshev, hermite, hermite_e, laguerre, legendre

import nbxtensor as nbx
from tests.conftest import to_nbx

X = np.array([-2.5, -1.0, -0.999, -0.7, -0.3, 0.0, 0.2, 0.5, 0.9, 1.0, 1.3, 3.0])
DEGREES = list(range(0, 13))


def _recurrence(first, step, x, n):
    """P_n from P_0 = 1, P_1 = first and P_{k+1} = step(k, P_k, P_{k-1}), in float64."""
    previous, current = np.ones_like(x), first
    if n == 0:
        return previous
    for k in range(1, n):
        previous, current = current, step(k, current, previous)
    return current


def _unit(n):
    return [0] * n + [1]


def _chebyshev_kind(first_of):
    return lambda y, n: _recurrence(first_of(y), lambda k, q, p: 2 * y * q - p, y, n)


_CHEBYSHEV = {"t": lambda y, n: chebyshev.chebval(y, _unit(n)),
              "u": _chebyshev_kind(lambda y: 2 * y), "v": _chebyshev_kind(lambda y: 2 * y - 1),
              "w": _chebyshev_kind(lambda y: 2 * y + 1)}
REFERENCES = {
    **{f"chebyshev_polynomial_{kind}": f for kind, f in _CHEBYSHEV.items()},
    **{f"shifted_chebyshev_polynomial_{kind}": (lambda f: lambda x, n: f(2 * x - 1, n))(f)
       for kind, f in _CHEBYSHEV.items()},
    "hermite_polynomial_h": lambda x, n: hermite.hermval(x, _unit(n)),
    "hermite_polynomial_he": lambda x, n: hermite_e.hermeval(x, _unit(n)),
    "laguerre_polynomial_l": lambda x, n: laguerre.lagval(x, _unit(n)),
    "legendre_polynomial_p": lambda x, n: legendre.legval(x, _unit(n)),
}
NAMES = sorted(REFERENCES)


def _magnitude(name, x, n):
    """The largest |P_k(x)|, k <= n: the scale of the roundings a recurrence to degree n makes."""
    return max(np.max(np.abs(REFERENCES[name](x, k))) for k in range(n + 1))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype, tolerance", [("float64", 1e-12), ("float32", 2e-5)])
def test_polynomials_match_references(name, dtype, tolerance):
    x = X.astype(dtype)
    n = np.array(DEGREES, dtype=dtype)[:, None]  # every degree against every x, by broadcasting
    got = getattr(nbx.special, name)(to_nbx(x), to_nbx(n))
    assert got.dtype.name == dtype and tuple(got.shape) == (len(DEGREES), len(X))
    for row, degree in enumerate(DEGREES):
        want = REFERENCES[name](x.astype(np.float64), degree)
        scale = _magnitude(name, x.astype(np.float64), degree)
        np.testing.assert_allclose(got.numpy()[row], want, rtol=0, atol=tolerance * scale, err_msg=f"n={degree}")


@pytest.mark.parametrize("name", NAMES)
def test_polynomial_degrees_as_torch_converts_them(name):
    """A degree is truncated; negative, NaN and infinite degrees give 0; a scalar degree or x is taken."""
    f = getattr(nbx.special, name)
    x = np.array([0.3, -0.6, 1.7])
    n = np.array([2.9, -0.5, -1.0, -7.0, np.nan, np.inf, -np.inf])
    got = f(to_nbx(x), to_nbx(n[:, None])).numpy()
    want = np.stack([REFERENCES[name](x, 2), REFERENCES[name](x, 0)] + [np.zeros(3)] * 5)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(f(to_nbx(x), 3).numpy(), REFERENCES[name](x, 3), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(f(0.25, to_nbx(np.array([1, 4]))).numpy(),
                               [REFERENCES[name](np.array(0.25), k) for k in (1, 4)], rtol=1e-6)


def test_polynomial_special_values():
    s = nbx.special
    n = to_nbx(np.array([0.0, 1.0, 2.0, 3.0, 10.0]))
    # the Chebyshev kinds at -1: (-1)^n, (-1)^n (n + 1), (-1)^n (2n + 1), (-1)^n
    signs = np.array([1, -1, 1, -1, 1])
    degrees = np.array([0, 1, 2, 3, 10])
    for name, want in (("t", signs), ("u", signs * (degrees + 1)), ("v", signs * (2 * degrees + 1)), ("w", signs)):
        np.testing.assert_array_equal(getattr(s, f"chebyshev_polynomial_{name}")(-1.0, n).numpy(), want)
        np.testing.assert_array_equal(getattr(s, f"shifted_chebyshev_polynomial_{name}")(0.0, n).numpy(), want)
    np.testing.assert_array_equal(s.laguerre_polynomial_l(0.0, n).numpy(), np.ones(5))
    np.testing.assert_array_equal(s.legendre_polynomial_p(-1.0, n).numpy(), signs)
    # Hermite degrees past torch's limit (128 in float32, 512 in float64) are NaN
    for dtype, limit in (("float32", 128), ("float64", 512)):
        got = s.hermite_polynomial_h(to_nbx(np.array([0.5, 0.5], dtype)), to_nbx(np.array([20, limit + 1], dtype)))
        assert np.isfinite(got.numpy()[0]) and np.isnan(got.numpy()[1])
    # NaN x stays NaN past degree 1 (the recurrence carries it)
    assert np.isnan(s.chebyshev_polynomial_u(to_nbx(np.array([np.nan])), 5).numpy()).all()
    # |x| > 1 grows until it overflows, and inf - inf is then NaN, as torch's recurrence gives
    assert np.isnan(s.chebyshev_polynomial_t(to_nbx(np.array([3.0], np.float32)), 200).numpy()).all()


def test_polynomial_dtypes_out_and_errors():
    f = nbx.special.chebyshev_polynomial_t
    ints = to_nbx(np.array([1, 2]))
    assert f(ints, ints).dtype == nbx.float32                       # integers compute in the default float
    assert f(to_nbx(np.array([0.5], np.float32)), to_nbx(np.array(2.0))).dtype == nbx.float32  # 0-d n is weak
    assert f(to_nbx(np.array([0.5], np.float32)), to_nbx(np.array([2.0]))).dtype == nbx.float64
    assert f(to_nbx(np.array([0.5], np.float32)), 2).dtype == nbx.float32
    out = nbx.empty(2, dtype=nbx.float64)
    assert f(ints, 2, out=out) is out and np.array_equal(out.numpy(), [1.0, 7.0])
    with pytest.raises(NotImplementedError, match="complex"):
        f(nbx.tensor(np.array([1j])), 2)
    with pytest.raises(TypeError, match="at least one tensor"):
        f(0.5, 2)
    with pytest.raises(RuntimeError, match="broadcast|shape"):
        f(to_nbx(np.zeros(3)), to_nbx(np.zeros(2)))
    with pytest.raises(RuntimeError, match="can't be cast"):
        f(ints, 2, out=nbx.empty(2, dtype=nbx.int64))
    assert not hasattr(nbx.Tensor, "chebyshev_polynomial_t")  # torch has no such method either


# ---- gcd and lcm -------------------------------------------------------------------------------------

INTEGER_PAIRS = [(-4, 6), (0, 0), (0, -5), (12, 18), (7, 0), (-9, -6), (2**40 * 3, 2**35 * 9), (832040, 514229),
                 (1, 2**62)]


@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "int8", "uint8"])
def test_gcd_lcm_match_math(dtype):
    info = np.iinfo(dtype)
    pairs = [(a, b) for a, b in INTEGER_PAIRS
             if info.min <= min(a, b) and max(a, b) <= info.max and abs(math.lcm(a, b)) <= info.max]
    a, b = (np.array(column, dtype) for column in zip(*pairs))
    got_gcd = nbx.gcd(to_nbx(a), to_nbx(b))
    got_lcm = to_nbx(a).lcm(to_nbx(b))
    assert got_gcd.dtype.name == dtype and got_lcm.dtype.name == dtype
    np.testing.assert_array_equal(got_gcd.numpy(), [math.gcd(int(x), int(y)) for x, y in pairs])
    np.testing.assert_array_equal(got_lcm.numpy(), [math.lcm(int(x), int(y)) for x, y in pairs])


def test_gcd_broadcasts_promotes_in_place_and_refuses_floats():
    a = to_nbx(np.array([[4], [9]], np.int8))
    b = to_nbx(np.array([6, 15, 0]))
    got = nbx.gcd(a, b)
    assert got.dtype == nbx.int64
    np.testing.assert_array_equal(got.numpy(), [[2, 1, 4], [3, 3, 9]])
    x = to_nbx(np.array([10, 21]))
    assert x.gcd_(to_nbx(np.array([4, 14]))) is x and np.array_equal(x.numpy(), [2, 7])
    assert nbx.lcm_(x, to_nbx(np.array([3, 5]))) is x and np.array_equal(x.numpy(), [6, 35])
    for bad in (np.array([1.0]), np.array([True])):
        with pytest.raises(NotImplementedError, match="gcd is not implemented"):
            nbx.gcd(to_nbx(bad), to_nbx(bad))
    with pytest.raises(NotImplementedError, match="lcm is not implemented"):
        nbx.lcm(to_nbx(np.array([1.0])), to_nbx(np.array([2])))


# ---- nextafter, ldexp, frexp -------------------------------------------------------------------------

NEXT_FROM = [0.0, -0.0, 1.0, -1.0, 1.5, np.inf, -np.inf, np.nan, 3.0, 0.0, 2.0]
NEXT_TOWARD = [1.0, -1.0, 2.0, 0.0, 1.5, 0.0, 0.0, 1.0, np.nan, -0.0, np.inf]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_nextafter_matches_numpy(dtype):
    x, y = np.array(NEXT_FROM, dtype), np.array(NEXT_TOWARD, dtype)
    got = nbx.nextafter(to_nbx(x), to_nbx(y))
    assert got.dtype.name == dtype
    want = np.where(x == y, y, np.nextafter(x, y))  # C99 and torch give y when equal; NumPy's float16 gives x
    np.testing.assert_array_equal(got.numpy().view(f"u{x.itemsize}")[~np.isnan(want)],
                                  want.view(f"u{x.itemsize}")[~np.isnan(want)])
    assert np.array_equal(np.isnan(got.numpy()), np.isnan(want))


def test_nextafter_steps_in_bfloat16():
    """bfloat16's neighbours, from its bits: one unit in the last place of its 16."""
    x = np.array([1.0, 1.0, -2.0, 0.0, 3.0e38], ml_dtypes.bfloat16)
    y = np.array([2.0, 0.0, -3.0, -1.0, np.inf], ml_dtypes.bfloat16)
    got = nbx.nextafter(to_nbx(x), to_nbx(y))
    assert got.dtype == nbx.bfloat16
    bits = x.view(np.uint16).astype(np.int64)
    want_bits = np.array([bits[0] + 1, bits[1] - 1, bits[2] + 1, 0x8001, bits[4] + 1]).astype(np.uint16)
    np.testing.assert_array_equal(got.numpy().view(np.uint16), want_bits)


def test_nextafter_errors():
    with pytest.raises(NotImplementedError, match="nextafter is not implemented for int64"):
        nbx.nextafter(to_nbx(np.array([1])), to_nbx(np.array([2])))
    x = to_nbx(np.array([1.0], np.float32))
    assert x.nextafter_(to_nbx(np.array([2.0], np.float32))) is x and x.numpy()[0] == np.nextafter(np.float32(1), 2)


def test_ldexp():
    x = np.array([1.0, -3.0, 0.75, 5.0])
    e = np.array([3, -2, 10, 0])
    got = nbx.ldexp(to_nbx(x), to_nbx(e))
    assert got.dtype == nbx.float64
    np.testing.assert_array_equal(got.numpy(), x * 2.0 ** e)
    assert nbx.ldexp(to_nbx(e), to_nbx(e)).dtype == nbx.float32                   # integers: the default float
    assert nbx.ldexp(to_nbx(x.astype(ml_dtypes.bfloat16)), to_nbx(e)).dtype == nbx.bfloat16
    assert to_nbx(x).ldexp(to_nbx(e)).numpy()[0] == 8.0
    with pytest.raises(NotImplementedError, match="complex"):
        nbx.ldexp(nbx.tensor(np.array([1j])), to_nbx(e[:1]))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_frexp_matches_numpy(dtype):
    tiny = np.finfo(dtype).smallest_subnormal
    x = np.array([0.0, -0.0, 1.0, -0.3, 3.0, 1e30, tiny, -tiny * 5, np.finfo(dtype).max, np.inf, -np.inf, np.nan],
                 dtype)
    mantissa, exponent = nbx.frexp(to_nbx(x))
    want_mantissa, want_exponent = np.frexp(x)
    assert mantissa.dtype.name == dtype and exponent.dtype == nbx.int32
    np.testing.assert_array_equal(mantissa.numpy(), want_mantissa)
    finite = np.isfinite(x)
    np.testing.assert_array_equal(exponent.numpy()[finite], want_exponent[finite])
    np.testing.assert_array_equal(exponent.numpy()[~finite], 0)  # as torch: 0 for the infinities and NaN


def test_frexp_halves_method_out_and_errors():
    x = np.array([[0.375, -5.0], [1.0, 0.0]], ml_dtypes.bfloat16)
    result = to_nbx(x).frexp()
    assert result.mantissa.dtype == nbx.bfloat16
    want_mantissa, want_exponent = np.frexp(x.astype(np.float32))
    np.testing.assert_array_equal(result.mantissa.numpy().astype(np.float32), want_mantissa)
    np.testing.assert_array_equal(result.exponent.numpy(), want_exponent)
    out = (nbx.empty((2, 2), dtype=nbx.bfloat16), nbx.empty((2, 2), dtype=nbx.int32))
    got = nbx.frexp(to_nbx(x), out=out)
    assert got.mantissa is out[0] and np.array_equal(out[1].numpy(), want_exponent)
    with pytest.raises(RuntimeError, match="only supports floating-point dtypes"):
        nbx.frexp(to_nbx(np.array([1, 2])))
    with pytest.raises(RuntimeError, match="exponent to have dtype int32"):
        nbx.frexp(to_nbx(x), out=(out[0], nbx.empty((2, 2), dtype=nbx.int64)))


# ---- windows -----------------------------------------------------------------------------------------

def _symmetric_or_periodic(formula):
    """A window's formula over n = 0..M-1 with N intervals (M - 1 symmetric, M periodic)."""
    def window(M, sym, **params):
        n = np.arange(M, dtype=np.float64)
        return formula(n, M - 1 if sym else M, **params)
    return window


def _cosine_sum(n, N, a):
    return sum((-1) ** i * c * np.cos(2 * np.pi * i * n / N) for i, c in enumerate(a))


def _center(M, sym):
    return (M - 1 if sym or M == 1 else M) / 2


WINDOW_REFERENCES = {
    "bartlett": (_symmetric_or_periodic(lambda n, N: 1 - np.abs(2 * n / N - 1)), {}),
    "blackman": (_symmetric_or_periodic(lambda n, N: _cosine_sum(n, N, [0.42, 0.5, 0.08])), {}),
    "cosine": (lambda M, sym: np.sin(np.pi * (np.arange(M) + 0.5) / (M if sym or M == 1 else M + 1)), {}),
    "exponential": (lambda M, sym, tau: np.exp(-np.abs(np.arange(M) - _center(M, sym)) / tau), {"tau": 2.5}),
    "gaussian": (lambda M, sym, std: np.exp(-0.5 * ((np.arange(M) - _center(M, sym)) / std) ** 2), {"std": 1.7}),
    "general_cosine": (_symmetric_or_periodic(lambda n, N, a: _cosine_sum(n, N, a)), {"a": [0.46, 0.23, 0.31]}),
    "general_hamming": (_symmetric_or_periodic(lambda n, N, alpha: _cosine_sum(n, N, [alpha, 1 - alpha])),
                        {"alpha": 0.6}),
    "hamming": (_symmetric_or_periodic(lambda n, N: _cosine_sum(n, N, [0.54, 0.46])), {}),
    "hann": (_symmetric_or_periodic(lambda n, N: 0.5 - 0.5 * np.cos(2 * np.pi * n / N)), {}),
    "nuttall": (_symmetric_or_periodic(lambda n, N: _cosine_sum(n, N, [0.3635819, 0.4891775, 0.1365995, 0.0106411])),
                {}),
}


@pytest.mark.parametrize("name", sorted(WINDOW_REFERENCES))
@pytest.mark.parametrize("dtype, tolerance", [("float64", 1e-13), ("float32", 2e-6)])
def test_windows_match_their_formulas(name, dtype, tolerance):
    formula, params = WINDOW_REFERENCES[name]
    window = getattr(nbx.signal.windows, name)
    for M in (2, 7, 8):
        for sym in (True, False):
            got = window(M, sym=sym, dtype=getattr(nbx, dtype), **params)
            assert got.dtype.name == dtype and tuple(got.shape) == (M,)
            np.testing.assert_allclose(got.numpy(), formula(M, sym, **params), rtol=0, atol=tolerance,
                                       err_msg=f"M={M} sym={sym}")


def test_numpy_windows_agree():
    w = nbx.signal.windows
    for M in (5, 8):
        for ours, theirs in ((w.bartlett, np.bartlett), (w.hamming, np.hamming), (w.hann, np.hanning),
                             (w.blackman, np.blackman)):
            np.testing.assert_allclose(ours(M, dtype=nbx.float64).numpy(), theirs(M), atol=1e-13)
        np.testing.assert_allclose(w.kaiser(M, beta=5.0, dtype=nbx.float64).numpy(), np.kaiser(M, 5.0), rtol=1e-12)
        # a periodic window is the symmetric one of M + 1 points less its last
        np.testing.assert_allclose(w.kaiser(M, sym=False, dtype=nbx.float64).numpy(), np.kaiser(M + 1, 12.0)[:-1],
                                   rtol=1e-12)
    np.testing.assert_allclose(w.kaiser(6).numpy(), np.kaiser(6, 12.0), rtol=1e-5)
    assert w.hann(M=6).dtype == nbx.float32  # the default dtype


def test_window_lengths_zero_and_one():
    w = nbx.signal.windows
    for name in sorted(w.__all__):
        kwargs = {"a": [0.5, 0.5]} if name == "general_cosine" else {}
        empty = getattr(w, name)(0, **kwargs)
        assert tuple(empty.shape) == (0,) and empty.dtype == nbx.float32
        np.testing.assert_allclose(getattr(w, name)(1, **kwargs).numpy(), [1.0], err_msg=name)


def test_window_errors():
    w = nbx.signal.windows
    with pytest.raises(ValueError, match="hann requires non-negative window length, got M=-1"):
        w.hann(-1)
    with pytest.raises(ValueError, match="bartlett expects float32 or float64 dtypes, got: float16"):
        w.bartlett(4, dtype=nbx.float16)
    with pytest.raises(ValueError, match="Standard deviation must be positive"):
        w.gaussian(4, std=0.0)
    with pytest.raises(ValueError, match="Tau must be positive"):
        w.exponential(4, tau=-1.0)
    with pytest.raises(ValueError, match="Center must be None for symmetric windows"):
        w.exponential(4, center=1.0)
    with pytest.raises(ValueError, match="beta must be non-negative"):
        w.kaiser(0, beta=-1.0)  # parameters are checked before the length, as torch checks them
    with pytest.raises(ValueError, match="Coefficients cannot be empty"):
        w.general_cosine(4, a=[])
    with pytest.raises(TypeError, match="Coefficients must be a list/tuple"):
        w.general_cosine(4, a=0.5)
    with pytest.raises(TypeError, match="M must be an int"):
        w.hann(4.0)
    with pytest.raises(TypeError):
        w.hann(4, window_length=3)
    with pytest.raises(TypeError, match="'a'"):
        w.general_cosine(4)
    np.testing.assert_allclose(w.exponential(5, sym=False, center=1.0, tau=2.0).numpy(),
                               np.exp(-np.abs(np.arange(5) - 1.0) / 2.0), rtol=1e-6)
