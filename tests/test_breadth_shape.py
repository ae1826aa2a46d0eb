"""Shape and creation breadth (issue #29) against NumPy. Splits, index sets and copies are exact; kron,
cross, diff and tensordot of integers are exact too, and of float64 within 1e-12 (a handful of products
summed)."""
import itertools

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.ops import registry
from tests.conftest import to_nbx


@pytest.fixture
def r():
    return np.random.default_rng(292)


def same(actual, expected):
    a = actual.numpy()
    assert a.shape == np.shape(expected)
    np.testing.assert_array_equal(a, expected)


def test_split_with_sizes_and_tensor_split():
    x = np.arange(24).reshape(4, 6)
    t = to_nbx(x)
    for got, want in zip(t.split_with_sizes([1, 0, 5], 1), np.split(x, [1, 1], 1)):
        same(got, want)
    assert registry.lookup("aten::split_with_sizes.default").name == "split_with_sizes"
    with pytest.raises(RuntimeError, match="sum exactly to 6"):
        nbx.split_with_sizes(t, [2, 2], 1)
    for sections in (1, 4, 5, 7):
        got = nbx.tensor_split(t, sections, -1)
        want = np.array_split(x, sections, -1)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            same(g, w)
    for indices in ([2, 3], [4, 1], [-2], [0, 9]):
        for g, w in zip(t.tensor_split(indices, 1), np.split(x, indices, 1)):
            same(g, w)
    for g, w in zip(nbx.tensor_split(t, to_nbx(np.array([1, 3])), 0), np.split(x, [1, 3], 0)):
        same(g, w)
    with pytest.raises(RuntimeError, match="number of sections must be larger than 0"):
        nbx.tensor_split(t, 0)
    with pytest.raises(RuntimeError, match="at least a 1-dimensional"):
        nbx.tensor_split(to_nbx(np.float32(1)), 2)
    # views: no copy
    assert nbx.tensor_split(t, 2, 1)[1].data_ptr() == t.data_ptr() + 3 * t.element_size()


def test_directional_splits():
    x = np.arange(2 * 4 * 6).reshape(2, 4, 6)
    t = to_nbx(x)
    for name, fn in (("hsplit", np.hsplit), ("vsplit", np.vsplit), ("dsplit", np.dsplit)):
        for arg in (2, [1, 3]):
            for g, w in zip(getattr(nbx, name)(t, arg), fn(x, arg)):
                same(g, w)
    for g, w in zip(nbx.hsplit(to_nbx(np.arange(6)), 3), np.hsplit(np.arange(6), 3)):
        same(g, w)
    with pytest.raises(RuntimeError, match="not divisible by the split_size 3"):
        nbx.hsplit(t, 3)
    with pytest.raises(RuntimeError, match="at least 3 dimensions"):
        nbx.dsplit(to_nbx(x[0]), 2)


def test_broadcast_tensors_ravel_and_hermitian(r):
    a, b = np.arange(3).reshape(3, 1), np.arange(4.0)
    got = nbx.broadcast_tensors(to_nbx(a), to_nbx(b))
    for g, w in zip(got, np.broadcast_arrays(a, b)):
        same(g, w)
    with pytest.raises(RuntimeError, match="broadcast"):
        nbx.broadcast_tensors(to_nbx(np.ones((3, 2))), to_nbx(b))
    x = np.arange(12).reshape(3, 4)
    t = to_nbx(x)
    same(t.T.ravel(), x.T.ravel())
    assert t.ravel().data_ptr() == t.data_ptr()
    z = (r.standard_normal((2, 3)) + 1j * r.standard_normal((2, 3))).astype(np.complex64)
    same(to_nbx(z).H, z.conj().T)
    zb = np.stack([z, z * 2])
    same(to_nbx(zb).mH, np.conj(np.swapaxes(zb, -1, -2)))
    same(to_nbx(x.astype(np.float32)).mH, x.T.astype(np.float32))
    with pytest.raises(RuntimeError, match="only supported on matrices"):
        to_nbx(zb).H


@pytest.mark.parametrize("row,col,offset", [(3, 3, 0), (4, 2, -1), (2, 5, 2), (0, 3, 0), (3, 3, -5)])
def test_triangle_indices(row, col, offset):
    same(nbx.tril_indices(row, col, offset), np.stack(np.tril_indices(row, offset, col)))
    same(nbx.triu_indices(row, col, offset), np.stack(np.triu_indices(row, offset, col)))
    assert nbx.tril_indices(row, col, offset, dtype=nbx.int32).dtype == nbx.int32
    with pytest.raises(RuntimeError, match="must be non-negative"):
        nbx.tril_indices(-1, 3)


def test_cartesian_prod_and_combinations():
    a, b, c = np.array([1, 2]), np.array([3, 4, 5]), np.array([7.5])
    same(nbx.cartesian_prod(to_nbx(a), to_nbx(b), to_nbx(c)), np.array(list(itertools.product(a, b, c))))
    same(nbx.cartesian_prod(to_nbx(a)), a)
    with pytest.raises(RuntimeError, match="Expect a 1D vector"):
        nbx.cartesian_prod(to_nbx(a.reshape(1, 2)), to_nbx(b))
    x = np.array([4, 5, 6, 7])
    for r in (0, 1, 2, 3, 5):
        for replacement in (False, True):
            make = itertools.combinations_with_replacement if replacement else itertools.combinations
            want = np.array(list(make(x, r))).reshape(-1, r) if r else np.zeros((0,), x.dtype)
            same(nbx.combinations(to_nbx(x), r, replacement), want)


def test_block_diag_and_kron(r):
    a, b, c = np.ones((2, 2), np.int64), np.int64(3), np.array([4.0, 5.0])
    want = np.zeros((4, 5))
    want[:2, :2] = 1
    want[2, 2] = 3
    want[3, 3:] = [4, 5]
    got = nbx.block_diag(to_nbx(a), to_nbx(c[:0].reshape(0, 0)), to_nbx(np.array(c.dtype.type(3))), to_nbx(c))
    same(got, want)
    assert got.dtype == nbx.float64
    with pytest.raises(RuntimeError, match="2 or fewer dimensions"):
        nbx.block_diag(to_nbx(np.ones((1, 1, 1))))
    for sa, sb in (((2, 3), (3, 2)), ((2,), (2, 2)), ((2, 1, 2), (3,)), ((), (2,))):
        x, y = r.integers(-5, 5, sa), r.integers(-5, 5, sb)
        same(nbx.kron(to_nbx(x), to_nbx(y)), np.kron(x, y))


@pytest.mark.parametrize("dims", [2, 0, 1, ([1, 0], [0, 1]), ([2], [-3])])
def test_tensordot(r, dims):
    # float32 (matrix products take no float64): at most 12 products summed, so 1e-5 relative
    shape = {"2": (3, 4, 5), "1": (4, 2), "([2], [-3])": (4, 2, 2)}.get(str(dims), (3, 2, 4))
    a = r.standard_normal((2, 3, 4)).astype(np.float32)
    b = r.standard_normal(shape).astype(np.float32)
    got = nbx.tensordot(to_nbx(a), to_nbx(b), dims)
    np.testing.assert_allclose(got.numpy(), np.tensordot(a.astype(np.float64), b, dims), rtol=1e-5, atol=1e-5)
    same(nbx.tensordot(to_nbx(np.arange(6).reshape(2, 3)), to_nbx(np.arange(6).reshape(3, 2)), 1),
         np.arange(6).reshape(2, 3) @ np.arange(6).reshape(3, 2))
    with pytest.raises(RuntimeError, match="contracted dimensions need to match"):
        nbx.tensordot(to_nbx(a), to_nbx(a), ([0], [1]))


def test_cross(r):
    a, b = r.integers(-9, 9, (2, 3, 4)), r.integers(-9, 9, (1, 3, 4))
    same(nbx.cross(to_nbx(a), to_nbx(b), dim=1), np.cross(a, b, axis=1))
    same(nbx.cross(to_nbx(a), to_nbx(b)), np.cross(a, b, axis=1))  # the first dim of size 3
    c, d = r.standard_normal((4, 3)), r.standard_normal((4, 3))
    np.testing.assert_allclose(nbx.linalg.cross(to_nbx(c), to_nbx(d)).numpy(), np.cross(c, d), rtol=1e-12, atol=1e-12)
    with pytest.raises(RuntimeError, match="must have length 3"):
        nbx.linalg.cross(to_nbx(a), to_nbx(b))


def test_diff(r):
    x = r.integers(-9, 9, (3, 5))
    for n in (0, 1, 2, 5, 7):
        same(nbx.diff(to_nbx(x), n), np.diff(x, n))
    same(to_nbx(x).diff(dim=0), np.diff(x, axis=0))
    pre, app = r.integers(-9, 9, (3, 2)), r.integers(-9, 9, (3, 1))
    same(nbx.diff(to_nbx(x), 2, -1, to_nbx(pre), to_nbx(app)), np.diff(x, 2, -1, pre, app))
    same(nbx.diff(to_nbx(x), 1, 1, to_nbx(np.array(4))), np.diff(x, 1, 1, prepend=4))
    flags = np.array([True, True, False, True])
    same(nbx.diff(to_nbx(flags)), flags[1:] != flags[:-1])
    with pytest.raises(RuntimeError, match="at least one-dimensional"):
        nbx.diff(to_nbx(np.array(1.0)))


def test_isin(r):
    x = r.integers(0, 10, (3, 4))
    tests = np.array([7, 2, 2, 9])
    same(nbx.isin(to_nbx(x), to_nbx(tests)), np.isin(x, tests))
    same(nbx.isin(to_nbx(x), to_nbx(tests), invert=True), np.isin(x, tests, invert=True))
    same(nbx.isin(to_nbx(x), 3), np.isin(x, 3))
    same(nbx.isin(5, to_nbx(tests)), np.isin(5, tests))
    same(nbx.isin(to_nbx(x), to_nbx(tests[:0])), np.zeros(x.shape, bool))
    same(nbx.isin(to_nbx(x.astype(np.float32) + 0.5), to_nbx(np.array([2.5, 3]))), np.isin(x + 0.5, [2.5, 3]))


def test_diagonal_scatter(r):
    x = r.standard_normal((3, 4))
    for offset in (0, 1, -2):
        src = r.standard_normal(len(np.diagonal(x, offset)))
        want = x.copy()
        idx = np.arange(len(src))
        want[idx + max(-offset, 0), idx + max(offset, 0)] = src
        same(nbx.diagonal_scatter(to_nbx(x), to_nbx(src), offset), want)
    y = r.standard_normal((2, 3, 3))
    src = r.standard_normal((2, 3))
    want = y.copy()
    for i in range(3):
        want[:, i, i] = src[:, i]
    same(to_nbx(y).diagonal_scatter(to_nbx(src), 0, 1, 2), want)
    with pytest.raises(RuntimeError, match="equal to the diagonal"):
        nbx.diagonal_scatter(to_nbx(x), to_nbx(np.zeros(4)))


def test_meta_rules_match():
    x = to_nbx(np.arange(6.0, dtype=np.float32).reshape(2, 3))
    cases = [("kron", (x, x)), ("tensordot", (x, x.T, 1)), ("cross", (x.reshape(3, 2).T.contiguous(),) * 2),
             ("diff", (x,)), ("isin", (x, x)), ("block_diag", (x, x)), ("combinations", (x[0],)),
             ("cartesian_prod", (x[0], x[1])), ("diagonal_scatter", (x, x[:, 0]))]
    for name, args in cases:
        op = registry.get(name)
        out, meta = op.impl(*args), op.meta(*args)
        assert (tuple(out.shape), out.dtype) == (tuple(meta.shape), meta.dtype), name
        op.cost(*args)
