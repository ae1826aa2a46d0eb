"""nbx.special (issue #29) against float64 references: SciPy's special functions (a test dependency) and
closed forms written here in NumPy.

Tolerances: float64 results within 1e-13 relative (each body is a short series or a libdevice call
accurate to a few ulps; digamma's recurrence sums up to ten terms and log_ndtr takes a log of a
product, hence 1e-13 and not 1e-15). float32 results within 1e-6 relative: the Bessel series sum up to 60
positive terms, each a float32 rounding, and error grows like their count times 2^-24; the exceptions are
named where they are checked."""
import math

import numpy as np
import pytest

sp = pytest.importorskip("scipy.special")

import nbxtensor as nbx  # noqa: E402
from nbxtensor.ops import registry  # noqa: E402
from tests.conftest import CPU_RUNS_KERNELS, TEST_DEVICE, to_nbx  # noqa: E402

X = np.array([-30.0, -7.5, -3.5, -1.25, -0.5, -1e-3, 0.0, 1e-3, 0.5, 1.0, 2.5, 9.9, 10.0, 15.0, 19.9, 20.1, 25.0,
              60.0, 700.0])
POSITIVE = np.array([1e-300, 1e-8, 0.25, 1.0, 3.0, 9.99, 10.0, 12.5, 100.0, 1e8])

UNARY = {
    "gammaln": (sp.gammaln, X), "digamma": (sp.digamma, np.concatenate([X, POSITIVE])), "erfcx": (sp.erfcx, X),
    "ndtr": (sp.ndtr, X), "log_ndtr": (sp.log_ndtr, X), "entr": (sp.entr, np.concatenate([X, POSITIVE])),
    "sinc": (np.sinc, X), "i0": (sp.i0, X), "i0e": (sp.i0e, X), "i1": (sp.i1, X), "i1e": (sp.i1e, X),
    "ndtri": (sp.ndtri, np.array([1e-300, 1e-30, 1e-8, 1e-3, 0.02, 0.25, 0.5, 0.75, 0.98, 0.999999])),
}


def compare(got, want, rtol, atol=0.0):
    got = np.asarray(got, np.float64)
    both_inf = np.isinf(want) & (got == want)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want) & ~both_inf
    np.testing.assert_allclose(got[finite], want[finite], rtol=rtol, atol=atol)
    assert np.all(np.isinf(got[np.isinf(want)]))


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_float64(name):
    ref, x = UNARY[name]
    with np.errstate(all="ignore"):
        want = ref(x)
    compare(getattr(nbx.special, name)(to_nbx(x)).numpy(), want, 1e-13)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_float32(name):
    ref, x = UNARY[name]
    x32 = x.astype(np.float32)
    x32 = x32[(x32 != 0) | (x == 0)]  # drop the values float32 flushes to 0
    with np.errstate(all="ignore"):
        want = ref(x32.astype(np.float64))
    got = getattr(nbx.special, name)(to_nbx(x32))
    assert got.dtype == nbx.float32
    with np.errstate(over="ignore"):
        out32 = want.astype(np.float32)
    keep = np.isfinite(out32) & (np.abs(out32) > np.finfo(np.float32).tiny) | ~np.isfinite(want)
    if name == "sinc":
        # sin(pi x) near its zeros: pi x rounded to float32 is off by up to 2^-24 |pi x|, an absolute error
        compare(got.numpy()[keep], want[keep], 1e-6, 3e-7 * np.abs(x32[keep]).max())
    else:
        # log_ndtr's upper tail is log1p of float32 erfc (a few ulps); digamma and gammaln subtract terms
        compare(got.numpy()[keep], want[keep], 1e-6 if name not in ("log_ndtr", "digamma", "gammaln") else 1e-5)


def test_poles_and_special_values():
    assert nbx.special.digamma(to_nbx(np.array([0.0]))).item() == -math.inf
    assert nbx.special.digamma(to_nbx(np.array([-0.0]))).item() == math.inf
    assert math.isnan(nbx.special.digamma(to_nbx(np.array([-2.0]))).item())
    assert nbx.special.gammaln(to_nbx(np.array([-3.0]))).item() == math.inf
    np.testing.assert_array_equal(nbx.special.ndtri(to_nbx(np.array([0.0, 1.0, 1.5]))).numpy(), [-np.inf, np.inf, np.nan])
    np.testing.assert_array_equal(nbx.special.entr(to_nbx(np.array([0.0, -1.0, np.nan]))).numpy(), [0.0, -np.inf, np.nan])
    assert nbx.special.sinc(to_nbx(np.array(0.0))).item() == 1.0


def test_xlog1py():
    x = np.array([0.0, 0.0, 2.0, -1.5, 3.0])
    y = np.array([-1.0, np.nan, 0.5, 1e-10, -0.5])
    with np.errstate(all="ignore"):
        want = np.where(np.isnan(y), np.nan, np.where(x == 0, 0.0, x * np.log1p(y)))
    compare(nbx.special.xlog1py(to_nbx(x), to_nbx(y)).numpy(), want, 1e-15)
    compare(nbx.special.xlog1py(2.0, to_nbx(y[2:])).numpy(), 2 * np.log1p(y[2:]), 1e-15)
    compare(nbx.special.xlog1py(to_nbx(x[:2]), 1.0).numpy(), np.zeros(2), 0)
    assert registry.lookup("aten::special_xlog1py.self_scalar").name == "special_xlog1py"


def test_promotion_shapes_and_aliases():
    ints = to_nbx(np.array([[1, 2], [3, 4]]))
    out = nbx.special.gammaln(ints)
    assert out.dtype == nbx.float32 and tuple(out.shape) == (2, 2)
    compare(out.numpy(), sp.gammaln([[1, 2], [3, 4]]), 1e-6)
    assert tuple(nbx.special.i1e(to_nbx(np.zeros((0, 3)))).shape) == (0, 3)
    assert nbx.special.ndtr(to_nbx(np.array(0.0))).item() == 0.5
    assert nbx.special.psi is nbx.special.digamma
    half = nbx.special.i0(to_nbx(np.array([1.0, 2.0], np.float16)))
    assert half.dtype == nbx.float16
    compare(half.numpy(), sp.i0([1.0, 2.0]).astype(np.float16).astype(np.float64), 1e-3)
    x = to_nbx(np.array([0.5, 1.5]))
    compare(x.lgamma().numpy(), sp.gammaln([0.5, 1.5]), 1e-13)
    compare(x.digamma().numpy(), sp.digamma([0.5, 1.5]), 1e-13)
    compare(nbx.i0(x).numpy(), sp.i0([0.5, 1.5]), 1e-13)
    x.sinc_()
    compare(x.numpy(), np.sinc([0.5, 1.5]), 1e-15)
    compare(nbx.special.expit(to_nbx(np.array([0.0, 2.0]))).numpy(), sp.expit([0.0, 2.0]), 1e-15)
    with pytest.raises(RuntimeError):
        nbx.special.i0e(to_nbx(np.array([1 + 1j])))


def _scaled_bessel_i(x, order):
    """exp(-x) I_order(x) for x >= 0 as the kernel sums it, term by term in its order and in x's dtype: 60
    terms of the power series up to 20, 30 of the asymptotic expansion beyond."""
    real = x.dtype.type
    quarter_square = x * x * real(0.25)
    term = x * real(0.5) if order else np.ones_like(x)
    total = term
    for k in range(1, 60):
        term = term * quarter_square / real(k * (k + order))
        total = total + term
    series = total * np.exp(-x)
    far = np.maximum(x, real(20))
    step = real(1) / (far * real(8))
    term = total = np.ones_like(x)
    for k in range(1, 30):
        term = term * step * real((2 * k - 1) ** 2 - 4 * order * order) / real(k)
        total = total + term
    asymptotic = total * real(0.3989422804014327) / np.sqrt(far)
    return np.where(x > 20, asymptotic, series)


@pytest.mark.skipif(not CPU_RUNS_KERNELS or TEST_DEVICE != "cpu",
                    reason="the interpreter's exp and float32 division are NumPy's; a GPU's differ in the last bit")
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_modified_bessel_i_sums_bit_for_bit(dtype):
    """i0, i0e, i1 and i1e are these sums exactly, operation for operation: their loops neither reorder
    nor regroup a term (edge values: zero, subnormal, both sides of the switch at 20, overflow, inf, NaN)."""
    x = np.array([0.0, -0.0, 1e-310, 1e-30, 1e-3, 0.5, 1.0, 2.0, 7.25, 13.0, 19.99, 20.0, 20.001, 25.0, 88.0,
                  89.5, 700.0, 710.0, 1e8, 3e38, np.inf, np.nan])
    x = np.concatenate([x, -x]).astype(dtype)
    magnitude = np.abs(x)
    with np.errstate(all="ignore"):
        scaled = {order: _scaled_bessel_i(magnitude, order) for order in (0, 1)}
        unscaled = scaled[1] * np.exp(magnitude)
        # Triton negates as 0 - v, which makes -(+0) +0
        want = {"i0e": scaled[0], "i0": scaled[0] * np.exp(magnitude),
                "i1e": np.where(x < 0, dtype(0) - scaled[1], scaled[1]),
                "i1": np.where(x < 0, dtype(0) - unscaled, unscaled)}
    for name, expected in want.items():
        got = getattr(nbx.special, name)(to_nbx(x)).numpy()
        assert got.dtype == dtype
        np.testing.assert_array_equal(np.isnan(got), np.isnan(expected), err_msg=name)
        keep = ~np.isnan(expected)
        np.testing.assert_array_equal(got[keep].view(np.uint8), expected[keep].view(np.uint8), err_msg=name)
