"""More breadth against NumPy float64 references. Copies, stacks and selections are exact; float
pointwise composites are compared within 1e-12 on float64 inputs unless a test says otherwise."""
import numpy as np
import pytest

import nbxtensor as nbx
from tests.conftest import to_nbx
from tests.test_breadth_shape import same


@pytest.fixture
def r():
    return np.random.default_rng(2929)


def close(actual, expected, tol=1e-12):
    a = actual.numpy()
    assert a.shape == np.shape(expected)
    np.testing.assert_allclose(a, expected, rtol=tol, atol=tol)


# ---- *_copy ----------------------------------------------------------------------------------------

def test_copy_views_are_fresh_row_major_copies(r):
    x = r.standard_normal((2, 3, 4))
    t = to_nbx(x)
    cases = [
        (nbx.alias_copy(t), x),
        (nbx.as_strided_copy(t, (3, 2), (1, 3)), np.lib.stride_tricks.as_strided(x.ravel(), (3, 2), (8, 24))),
        (nbx.diagonal_copy(t, 1, 1, 2), np.diagonal(x, 1, 1, 2)),
        (nbx.expand_copy(t[:, :1], (2, 3, 4)), np.broadcast_to(x[:, :1], (2, 3, 4))),
        (nbx.narrow_copy(t, 2, 1, 2), x[:, :, 1:3]),
        (nbx.permute_copy(t, (2, 0, 1)), x.transpose(2, 0, 1)),
        (nbx.squeeze_copy(t[:, :1], 1), x[:, 0]),
        (nbx.t_copy(t[0]), x[0].T),
        (nbx.transpose_copy(t, 0, 2), x.swapaxes(0, 2)),
        (nbx.unsqueeze_copy(t, 1), x[:, None]),
        (nbx.view_copy(t, (6, 4)), x.reshape(6, 4)),
        (nbx.unfold_copy(t, 2, 2, 1), np.stack([x[:, :, i:i + 2] for i in range(3)], 2)),
    ]
    for got, want in cases:
        same(got, want)
        assert got.is_contiguous()
    for got, want in zip(nbx.unbind_copy(t, 1), [x[:, i] for i in range(3)]):
        same(got, want)
    for got, want in zip(nbx.split_with_sizes_copy(t, [1, 3], 2), [x[:, :, :1], x[:, :, 1:]]):
        same(got, want)
        assert got.is_contiguous()


def test_copy_shares_no_storage():
    t = to_nbx(np.zeros((2, 2)))
    c = nbx.t_copy(t)
    c[0, 0] = 5.0
    assert t.numpy()[0, 0] == 0.0


# ---- group 2 ---------------------------------------------------------------------------------------

def test_atleast_and_stacks(r):
    s, v, m = np.float64(2.0), r.standard_normal(3), r.standard_normal((2, 3))
    for fn, ref in ((nbx.atleast_1d, np.atleast_1d), (nbx.atleast_2d, np.atleast_2d), (nbx.atleast_3d, np.atleast_3d)):
        for a in (s, v, m):
            same(fn(to_nbx(np.asarray(a))), ref(a))
        got = fn(to_nbx(v), to_nbx(m))
        assert isinstance(got, tuple) and len(got) == 2
    same(nbx.column_stack([to_nbx(v[:2]), to_nbx(m[:, :2])]), np.column_stack([v[:2], m[:, :2]]))
    same(nbx.dstack([to_nbx(m), to_nbx(m)]), np.dstack([m, m]))


def test_rot90_diagflat_unsafe(r):
    x = r.standard_normal((2, 3, 4))
    for k in range(-1, 5):
        for dims in ((0, 1), (2, 0)):
            same(nbx.rot90(to_nbx(x), k, dims), np.rot90(x, k, dims))
    m = r.standard_normal((2, 2))
    same(nbx.diagflat(to_nbx(m), 1), np.diagflat(m, 1))
    for got, want in zip(nbx.unsafe_chunk(to_nbx(x), 2, 2), np.split(x, 2, 2)):
        same(got, want)
    for got, want in zip(nbx.unsafe_split(to_nbx(x), 2, 1), np.split(x, [2], 1)):
        same(got, want)


def test_identities():
    t = to_nbx(np.arange(3.0))
    assert nbx.positive(t) is t and nbx.resolve_conj(t) is t and nbx.resolve_neg(t) is t
    with pytest.raises(RuntimeError):
        nbx.positive(to_nbx(np.array([True])))


def test_pointwise_composites(r):
    x, y = r.standard_normal((3, 4)) * 50, r.standard_normal((1, 4)) * 50
    close(nbx.deg2rad(to_nbx(x)), np.deg2rad(x))
    close(nbx.rad2deg(to_nbx(x)), np.rad2deg(x), 1e-11)
    assert nbx.deg2rad(to_nbx(np.arange(3))).dtype is nbx.float32
    close(nbx.logaddexp2(to_nbx(x), to_nbx(y)), np.logaddexp2(x, y))
    inf = np.array([np.inf, -np.inf, 1.0])
    close(nbx.logaddexp2(to_nbx(inf), to_nbx(inf)), np.logaddexp2(inf, inf))
    h = np.array([-1.5, 0.0, 2.0, np.nan])
    same(nbx.heaviside(to_nbx(h), to_nbx(np.full(4, 0.25))), np.where(np.isnan(h), 0.0, np.heaviside(h, 0.25)))  # NaN steps to 0, as torch
    same(nbx.isreal(to_nbx(x)), np.ones(x.shape, bool))
    # float_power of float32 inputs is computed in float64: exact against NumPy's float64 power
    a, b = np.abs(r.standard_normal(5)).astype(np.float32), r.standard_normal(5).astype(np.float32)
    got = nbx.float_power(to_nbx(a), to_nbx(b))
    assert got.dtype is nbx.float64
    close(got, np.power(a.astype(np.float64), b.astype(np.float64)))
    close(nbx.float_power(to_nbx(a), 2), a.astype(np.float64) ** 2)


def test_reductions_and_products(r):
    m = r.standard_normal((3, 4))
    close(nbx.trace(to_nbx(m)), np.trace(m))
    same(nbx.trace(to_nbx(np.arange(9).reshape(3, 3))), np.int64(12))
    # float32 products (the library's matmul has no float64): sums of 4 products, within 1e-5
    a, b = r.standard_normal((2, 4)).astype(np.float32), r.standard_normal((3, 4)).astype(np.float32)
    close(nbx.inner(to_nbx(a), to_nbx(b)), np.inner(a.astype(np.float64), b.astype(np.float64)), 1e-5)
    close(nbx.inner(to_nbx(np.array(2.0)), to_nbx(m)), 2 * m)
    n = r.standard_normal((3, 4))
    for p in (1, 2, 3.5, np.inf):
        close(nbx.dist(to_nbx(m), to_nbx(n), p), np.linalg.norm((m - n).ravel(), p))


# ---- nn.functional ---------------------------------------------------------------------------------

def test_functional_shrinks_and_softmin(r):
    F = nbx.nn.functional
    x = np.array([-1.0, -0.5, -0.3, 0.0, 0.2, 0.5, 0.9, np.nan])
    t = to_nbx(x)
    same(F.hardshrink(t), np.where((x >= -0.5) & (x <= 0.5), 0.0, x))
    same(F.softshrink(t, 0.25), np.where(x > 0.25, x - 0.25, np.where(x < -0.25, x + 0.25, x * 0)))
    close(F.tanhshrink(t), x - np.tanh(x))
    m = r.standard_normal((2, 5))
    e = np.exp(-m - (-m).max(1, keepdims=True))
    close(F.softmin(to_nbx(m), 1), e / e.sum(1, keepdims=True))


def test_functional_upsample():
    F = nbx.nn.functional
    x = np.arange(6.0, dtype=np.float32).reshape(1, 1, 2, 3)
    same(F.upsample_nearest(to_nbx(x), scale_factor=2), x.repeat(2, 2).repeat(2, 3))
    # align_corners=True: output i samples input at i * (in - 1) / (out - 1); float32 within 1e-6
    rows, cols = np.linspace(0, 1, 3), np.linspace(0, 2, 5)
    expected = (rows[:, None] * 3 + cols[None, :])[None, None]
    close(F.upsample_bilinear(to_nbx(x), size=(3, 5)), expected, 1e-6)
