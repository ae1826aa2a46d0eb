"""More breadth against NumPy float64 references. Copies, stacks and selections are exact; float
pointwise composites are compared within 1e-12 on float64 inputs unless a test says otherwise."""
import numpy as np
import pytest

import nbxtensor as nbx
from tests.conftest import to_nbx


@pytest.fixture
def r():
    return np.random.default_rng(2929)


def same(actual, expected):
    a = actual.numpy()
    assert a.shape == np.shape(expected)
    np.testing.assert_array_equal(a, expected)


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
