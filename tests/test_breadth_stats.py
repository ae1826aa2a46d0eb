"""Order statistics, trapezoid rules, histogram and renorm (issue #29) against NumPy float64.

Order statistics pick elements, so they are exact; quantile interpolates once (one float32 rounding of
a lerp: rtol 1e-6); the trapezoid rules sum a handful of float32 areas (rtol 1e-5); histogram counts are
exact, densities one division (rtol 1e-6); renorm one norm of 4 elements and a scale (rtol 1e-5)."""
import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.ops import registry
from tests.conftest import to_nbx


@pytest.fixture
def r():
    return np.random.default_rng(2929)


def close(actual, expected, rtol=1e-6, atol=1e-7):
    np.testing.assert_allclose(np.asarray(actual.numpy(), np.float64), expected, rtol=rtol, atol=atol)


def lower_median(a, axis):
    s = np.sort(a, axis)
    n = a.shape[axis]
    return np.take(s, (n - 1) // 2, axis)


def test_median_values_and_indices(r):
    x = r.integers(0, 5, (3, 4)).astype(np.float32)
    assert nbx.median(to_nbx(x)).item() == np.sort(x.ravel())[(x.size - 1) // 2]
    for dim in (0, 1, -1):
        values, indices = nbx.median(to_nbx(x), dim)
        np.testing.assert_array_equal(values.numpy(), lower_median(x, dim))
        # the index points at an element equal to the median
        np.testing.assert_array_equal(np.take_along_axis(x, np.expand_dims(indices.numpy(), dim), dim).squeeze(dim),
                                      values.numpy())
    values, indices = to_nbx(x).median(1, keepdim=True)
    assert tuple(values.shape) == (3, 1) and indices.dtype == nbx.int64
    assert nbx.median(to_nbx(np.arange(7))).item() == 3
    assert np.isnan(nbx.median(to_nbx(np.zeros(0, np.float32))).item())
    with pytest.raises(IndexError, match="non-zero size"):
        nbx.median(to_nbx(np.zeros((2, 0), np.float32)), 1)
    assert nbx.median(to_nbx(np.float32(4.0)), 0).values.item() == 4.0


def test_median_nan(r):
    x = np.array([[1.0, np.nan, 3.0, 0.0], [2.0, 1.0, 4.0, 3.0], [np.nan] * 4], np.float32)
    values, indices = nbx.median(to_nbx(x), 1)
    np.testing.assert_array_equal(values.numpy(), [np.nan, 2.0, np.nan])
    assert np.isnan(x[[0, 2], indices.numpy()[[0, 2]]]).all()
    values, indices = nbx.nanmedian(to_nbx(x), 1)
    np.testing.assert_array_equal(values.numpy(), [1.0, 2.0, np.nan])
    assert x[0, indices.numpy()[0]] == 1.0
    assert nbx.nanmedian(to_nbx(x)).item() == np.sort(x[~np.isnan(x)])[(np.sum(~np.isnan(x)) - 1) // 2]


def test_mode(r):
    x = np.array([[1, 3, 3, 2, 2], [5, 5, 5, 0, 0], [4, 1, 2, 3, 0]])
    values, indices = nbx.mode(to_nbx(x))
    # the most frequent value, the smallest of a tie, at its last occurrence
    np.testing.assert_array_equal(values.numpy(), [2, 5, 0])
    np.testing.assert_array_equal(indices.numpy(), [4, 2, 4])
    values, indices = to_nbx(x.astype(np.float32)).mode(0, keepdim=True)
    assert tuple(values.shape) == (1, 5)
    np.testing.assert_array_equal(values.numpy()[0], [1, 1, 2, 0, 0])
    # bools count as torch counts them (False below True); median still refuses them, as torch's does
    flags = np.array([[True, False, True], [False, False, True], [True, False, False]])
    values, indices = nbx.mode(to_nbx(flags), 1)
    np.testing.assert_array_equal(values.numpy(), [True, False, False])
    np.testing.assert_array_equal(indices.numpy(), [2, 1, 2])
    with pytest.raises(RuntimeError, match="\"median\" not implemented for 'bool'"):
        nbx.median(to_nbx(flags))


def _np_method(interpolation):
    return {"nearest": "nearest", "linear": "linear", "lower": "lower", "higher": "higher",
            "midpoint": "midpoint"}[interpolation]


@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantile(r, interpolation):
    x = r.standard_normal((3, 5)).astype(np.float32)
    q = np.array([0.0, 0.3, 0.5, 0.9, 1.0], np.float32)
    for dim in (None, 1, 0):
        got = nbx.quantile(to_nbx(x), to_nbx(q), dim, interpolation=interpolation)
        want = np.quantile(x.astype(np.float64), q.astype(np.float64), axis=dim, method=_np_method(interpolation))
        close(got, want)
    close(nbx.quantile(to_nbx(x), 0.25, 1, keepdim=True, interpolation=interpolation),
          np.quantile(x.astype(np.float64), 0.25, axis=1, keepdims=True, method=_np_method(interpolation)))


def test_nanquantile_and_errors(r):
    x = r.standard_normal((3, 6))
    x[0, 1] = x[1, :] = np.nan
    q = np.array([0.1, 0.5])
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):  # NumPy warns of the all-NaN row
        want = np.nanquantile(x, q, axis=1)
    close(nbx.nanquantile(to_nbx(x), to_nbx(q), 1), want, rtol=1e-12, atol=1e-12)
    got = nbx.quantile(to_nbx(x), 0.5, 1).numpy()
    assert np.isnan(got[:2]).all() and got[2] == np.quantile(x[2], 0.5)
    with pytest.raises(RuntimeError, match=r"q must be in the range \[0, 1\]"):
        nbx.quantile(to_nbx(x), 1.5)
    with pytest.raises(RuntimeError, match="float or double"):
        nbx.quantile(to_nbx(np.arange(3)), 0.5)
    with pytest.raises(RuntimeError, match="same dtype"):
        nbx.quantile(to_nbx(x), to_nbx(np.array([0.5], np.float32)))
    with pytest.raises(RuntimeError, match="non-empty"):
        nbx.quantile(to_nbx(np.zeros(0)), 0.5)
    with pytest.raises(ValueError, match="interpolation must be one of"):
        nbx.quantile(to_nbx(x), 0.5, interpolation="cubic")


def test_trapezoid(r):
    y = r.standard_normal((2, 5)).astype(np.float32)
    x = np.sort(r.standard_normal(5)).astype(np.float32)
    y64 = y.astype(np.float64)
    close(nbx.trapezoid(to_nbx(y)), np.trapezoid(y64), 1e-5, 1e-6)
    close(nbx.trapezoid(to_nbx(y), dx=0.5), np.trapezoid(y64, dx=0.5), 1e-5, 1e-6)
    close(nbx.trapezoid(to_nbx(y), 0.5), np.trapezoid(y64, dx=0.5), 1e-5, 1e-6)
    close(nbx.trapezoid(to_nbx(y), to_nbx(x)), np.trapezoid(y64, x.astype(np.float64)), 1e-5, 1e-6)
    close(nbx.trapz(to_nbx(y), to_nbx(np.stack([x, x])), dim=1), np.trapezoid(y64, x.astype(np.float64)), 1e-5, 1e-6)
    close(nbx.trapezoid(to_nbx(y), dim=0), np.trapezoid(y64, axis=0), 1e-5, 1e-6)
    close(nbx.trapezoid(to_nbx(y[:, :1])), np.zeros(2))
    cumulative = np.cumsum((y64[:, 1:] + y64[:, :-1]) / 2 * np.diff(x.astype(np.float64)), -1)
    close(nbx.cumulative_trapezoid(to_nbx(y), to_nbx(x)), cumulative, 1e-5, 1e-6)
    assert tuple(nbx.cumulative_trapezoid(to_nbx(y[:, :1])).shape) == (2, 0)
    close(nbx.trapezoid(to_nbx(np.arange(4))), 4.5)
    with pytest.raises(RuntimeError, match="one `x` value for each sample point"):
        nbx.trapezoid(to_nbx(y), to_nbx(x[:3]))


def test_histogram(r):
    x = r.standard_normal(20).astype(np.float32)
    x[0] = x.max()  # the right edge belongs to the last bin
    for bins in (1, 4):
        hist, edges = nbx.histogram(to_nbx(x), bins)
        want_hist, want_edges = np.histogram(x.astype(np.float64), bins, range=(x.min(), x.max()))
        np.testing.assert_array_equal(hist.numpy(), want_hist)
        close(edges, want_edges, 1e-6, 1e-6)
    edges = np.array([-1.0, 0.0, 0.5, 2.0], np.float32)
    w = np.abs(r.standard_normal(20)).astype(np.float32)
    hist, _ = nbx.histogram(to_nbx(x), to_nbx(edges), weight=to_nbx(w))
    close(hist, np.histogram(x, edges, weights=w.astype(np.float64))[0], 1e-5, 1e-6)
    hist, _ = to_nbx(x).histogram(3, range=(-1.0, 1.0), density=True)
    close(hist, np.histogram(x.astype(np.float64), 3, range=(-1, 1), density=True)[0], 1e-5, 1e-6)
    with pytest.raises(RuntimeError, match="bins must be > 0"):
        nbx.histogram(to_nbx(x), 0)
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        nbx.histogram(to_nbx(x), 3, range=(1.0, 0.0))


def test_renorm(r):
    x = r.standard_normal((3, 4)).astype(np.float32)
    x64 = x.astype(np.float64)
    for p, dim, maxnorm in ((2.0, 0, 1.0), (1.0, 1, 0.5), (3.0, -1, 100.0)):
        norms = (np.abs(x64) ** p).sum(axis=tuple(i for i in range(2) if i != dim % 2), keepdims=True) ** (1 / p)
        factor = np.where(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0)
        close(nbx.renorm(to_nbx(x), p, dim, maxnorm), x64 * factor, 1e-5, 1e-6)
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        to_nbx(x[0]).renorm(2, 0, 1.0)


def test_meta_rules_match(r):
    x = to_nbx(r.standard_normal((3, 4)).astype(np.float32))
    cases = [("median", (x, 1)), ("nanmedian", (x,)), ("mode", (x, 0)), ("quantile", (x, 0.5, 1)),
             ("nanquantile", (x, to_nbx(np.array([0.5, 0.1], np.float32)), None, True)), ("trapezoid", (x,)),
             ("cumulative_trapezoid", (x,)), ("histogram", (x, 3)), ("renorm", (x, 2, 0, 1.0))]
    for name, args in cases:
        op = registry.get(name)
        out, meta = op.impl(*args), op.meta(*args)
        outs = out if isinstance(out, tuple) else (out,)
        metas = (meta,) if isinstance(meta, registry.TensorMeta) else meta
        assert [(tuple(o.shape), o.dtype) for o in outs] == [(tuple(m.shape), m.dtype) for m in metas], name
        op.cost(*args)
