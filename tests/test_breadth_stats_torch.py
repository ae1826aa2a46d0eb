"""Order statistics, trapezoid rules, histogram and renorm (issue #29) against torch as an oracle: values
exact for the order statistics (they pick elements), 1e-12 for float64 arithmetic over a few elements."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import nbxtensor as nbx  # noqa: E402
from tests.conftest import to_nbx  # noqa: E402


def same(ours, theirs, tol=0.0):
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=tol, atol=tol)


def both(a):
    return to_nbx(a), torch.from_numpy(np.ascontiguousarray(a))


def test_order_statistics():
    rng = np.random.default_rng(7)
    x = rng.integers(0, 4, (4, 7)).astype(np.float64)
    x[1, 2] = x[3, 0] = np.nan
    a, t = both(x)
    same(nbx.median(a), torch.median(t))
    same(nbx.nanmedian(a), torch.nanmedian(t))
    for fn in ("median", "nanmedian"):
        for dim in (0, 1):
            ours, theirs = getattr(nbx, fn)(a, dim), getattr(torch, fn)(t, dim)
            same(ours.values, theirs.values)
            # an index is any position holding the value: NaN positions and ties may differ from torch's choice
            picked = np.take_along_axis(x, np.expand_dims(ours.indices.numpy(), dim), dim).squeeze(dim)
            np.testing.assert_array_equal(picked, ours.values.numpy())
    y = rng.integers(0, 3, (3, 9))
    b, u = both(y)
    for dim in (0, 1):
        ours, theirs = nbx.mode(b, dim), torch.mode(u, dim)
        same(ours.values, theirs.values)
        same(ours.indices, theirs.indices)
    q = np.array([0.0, 0.2, 0.5, 0.75, 1.0])
    (qa, qt) = both(q)
    for interpolation in ("linear", "lower", "higher", "midpoint", "nearest"):
        for dim in (None, 1):
            same(nbx.quantile(a, qa, dim, interpolation=interpolation),
                 torch.quantile(t, qt, dim, interpolation=interpolation), 1e-12)
            same(nbx.nanquantile(a, qa, dim, interpolation=interpolation),
                 torch.nanquantile(t, qt, dim, interpolation=interpolation), 1e-12)


def test_integrals_histogram_renorm():
    rng = np.random.default_rng(8)
    (y, ty), (x, tx) = both(rng.standard_normal((3, 5))), both(np.sort(rng.standard_normal(5)))
    same(nbx.trapezoid(y, x), torch.trapezoid(ty, tx), 1e-12)
    same(nbx.trapezoid(y, dx=0.3, dim=0), torch.trapezoid(ty, dx=0.3, dim=0), 1e-12)
    same(nbx.cumulative_trapezoid(y, x), torch.cumulative_trapezoid(ty, tx), 1e-12)
    same(nbx.cumulative_trapezoid(y, dx=2.0, dim=0), torch.cumulative_trapezoid(ty, dx=2.0, dim=0), 1e-12)
    (v, tv) = both(rng.standard_normal(30))
    (w, tw) = both(np.abs(rng.standard_normal(30)))
    for args, kwargs in (((4,), {}), ((3,), {"range": (-1.0, 0.5), "weight": w, "density": True})):
        tk = {k: (tw if k == "weight" else val) for k, val in kwargs.items()}
        ours, theirs = nbx.histogram(v, *args, **kwargs), torch.histogram(tv, *args, **tk)
        same(ours.hist, theirs.hist, 1e-12)
        same(ours.bin_edges, theirs.bin_edges, 1e-12)
    same(nbx.renorm(y, 1.5, 1, 0.8), torch.renorm(ty, 1.5, 1, 0.8), 1e-12)
