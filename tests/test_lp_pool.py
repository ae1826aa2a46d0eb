"""lp_pool1d/2d/3d against a NumPy float64 loop over windows: (sum of x^p)^(1/p), NaN where a sum of
odd powers is negative as in torch; and against torch where installed. float32: the kernel takes
the mean of at most 8 float32 powers and the root scales relative errors by 1/p, so 1e-5 relative."""
import numpy as np
import pytest

import nbxtensor as nbx

from .conftest import to_nbx

F = nbx.nn.functional


def ref_lp_pool(x, p, k, s, ceil_mode):
    x = x.astype(np.float64)
    spatial = x.shape[2:]
    out_sizes = []
    for i, kk, ss in zip(spatial, k, s):
        o = (i - kk + (ss - 1 if ceil_mode else 0)) // ss + 1
        if ceil_mode and (o - 1) * ss >= i:
            o -= 1
        out_sizes.append(o)
    out = np.zeros((*x.shape[:2], *out_sizes))
    for pos in np.ndindex(*out_sizes):
        window = tuple(slice(o * ss, min(o * ss + kk, i)) for o, ss, kk, i in zip(pos, s, k, spatial))
        total = (x[(slice(None), slice(None), *window)] ** p).sum(axis=tuple(range(2, x.ndim)))
        # avg_pool's divisor is the clipped window, which the multiply by the full window undoes only
        # where the window is whole: torch's formula, kept as is
        count = np.prod([w.stop - w.start for w in window])
        total = total / count * np.prod(k)
        with np.errstate(invalid="ignore"):  # a negative sum of odd powers has no real root: NaN, as torch
            out[(slice(None), slice(None), *pos)] = np.power(total, 1.0 / p)
    return out


@pytest.mark.parametrize("nd, p, k, s, ceil_mode", [
    (1, 2, (3,), (2,), False), (1, 3, (2,), (2,), True), (2, 2, (2, 2), (2, 2), False),
    (2, 1.5, (3, 2), (1, 2), True), (3, 2, (2, 2, 2), (2, 2, 2), False),
])
def test_lp_pool(rng, nd, p, k, s, ceil_mode):
    shape = (2, 3, *(5, 7, 6)[:nd])
    x = rng.uniform(0.1, 2, shape).astype(np.float32) if p % 1 else rng.standard_normal(shape).astype(np.float32)
    out = getattr(F, f"lp_pool{nd}d")(to_nbx(x), p, k if nd > 1 else k[0], s, ceil_mode=ceil_mode)
    np.testing.assert_allclose(out.numpy(), ref_lp_pool(x, p, k, s, ceil_mode), rtol=1e-5, atol=1e-6)


def test_lp_pool_default_stride(rng):
    x = rng.standard_normal((1, 2, 4, 4)).astype(np.float32)
    np.testing.assert_allclose(F.lp_pool2d(to_nbx(x), 2, 2).numpy(), ref_lp_pool(x, 2, (2, 2), (2, 2), False),
                               rtol=1e-5, atol=1e-6)


def test_lp_pool_too_small():
    with pytest.raises(RuntimeError, match="Output size is too small"):
        F.lp_pool2d(to_nbx(np.zeros((1, 2, 4, 4), np.float32)), 2, 5)


@pytest.mark.parametrize("nd, kwargs", [(1, dict(norm_type=2, kernel_size=3, stride=2)),
                                        (2, dict(norm_type=3, kernel_size=(2, 3), ceil_mode=True)),
                                        (3, dict(norm_type=2, kernel_size=2))])
def test_lp_pool_torch(nd, kwargs):
    torch = pytest.importorskip("torch")
    x = torch.randn(2, 3, *(7, 6, 5)[:nd])
    want = getattr(torch.nn.functional, f"lp_pool{nd}d")(x, **kwargs)
    got = getattr(F, f"lp_pool{nd}d")(to_nbx(x.numpy()), **kwargs)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
