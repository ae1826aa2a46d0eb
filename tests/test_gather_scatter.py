"""gather, scatter and their reductions, index_select/add/copy/fill, embedding, take, masks and
nonzero against NumPy; the device-side out-of-range check for each op that follows indices."""
import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.ops import registry
from tests.conftest import to_nbx

DTYPES = [np.float32, np.float64, np.float16, np.int64, np.int32, np.int16, np.uint8, np.bool_]


def values(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    raw = rng.integers(-20, 20, size=shape)
    return (raw > 0) if dtype == np.bool_ else np.abs(raw).astype(dtype) if dtype == np.uint8 else raw.astype(dtype)


def np_gather(a, dim, index):
    return np.take_along_axis(a, index, axis=dim)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather_and_scatter_match_numpy(dtype, dim):
    a = values((3, 4, 5), dtype)
    rng = np.random.default_rng(1)
    index_shape = [2, 3, 4]
    d = dim % 3
    index_shape[d] = 6
    index = rng.integers(0, a.shape[d], size=index_shape)
    x = to_nbx(a).permute(2, 0, 1).permute(1, 2, 0)  # strided input, same values
    got = nbx.gather(x, dim, to_nbx(index))
    window = a[tuple(slice(None) if k == d else slice(0, n) for k, n in enumerate(index.shape))]
    assert np.array_equal(got.numpy(), np_gather(window, d, index))
    # scatter with a permutation along dim: no duplicates, so the result is defined
    perm = np.stack([rng.permutation(a.shape[d]) for _ in range(a.size // a.shape[d])])
    perm = np.moveaxis(perm.reshape(*[n for k, n in enumerate(a.shape) if k != d], a.shape[d]), -1, d)
    src = values(a.shape, dtype, seed=3)
    expected = np.empty_like(a)
    np.put_along_axis(expected, perm, src, axis=d)
    got = nbx.scatter(to_nbx(np.zeros_like(a)), dim, to_nbx(perm), to_nbx(src))
    assert np.array_equal(got.numpy(), expected)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32, np.float16], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_matches_a_loop(dtype, reduce, include_self):
    rng = np.random.default_rng(2)
    base = values((4, 3), dtype, seed=4)
    src = values((5, 3), dtype, seed=5)
    if reduce == "prod":
        base, src = np.clip(base, -2, 2).astype(dtype), np.clip(src, -2, 2).astype(dtype)
    index = rng.integers(0, 4, size=(5, 3))
    expected = base.astype(np.float64).copy()
    hits = {}
    for i in range(5):
        for j in range(3):
            hits.setdefault((index[i, j], j), []).append(float(src[i, j]))
    for (r, c), vals in hits.items():
        pool = ([float(base[r, c])] if include_self else []) + vals
        expected[r, c] = {"sum": sum, "prod": np.prod, "mean": np.mean, "amax": max, "amin": min}[reduce](pool)
        if reduce == "mean" and not np.issubdtype(dtype, np.floating):
            expected[r, c] = np.floor(sum(pool) / len(pool))
    got = nbx.scatter_reduce(to_nbx(base), 0, to_nbx(index), to_nbx(src), reduce, include_self=include_self)
    tol = 2e-3 if dtype == np.float16 else 0
    assert np.allclose(got.numpy().astype(np.float64), expected.astype(dtype).astype(np.float64), rtol=tol, atol=tol)


def test_scatter_add_with_duplicates_is_exact_and_deterministic():
    index = np.array([[0, 1, 0], [0, 0, 0], [1, 1, 0]])
    src = np.arange(9, dtype=np.float32).reshape(3, 3)
    expected = np.zeros((2, 3), np.float32)
    for i in range(3):
        for j in range(3):
            expected[index[i, j], j] += src[i, j]
    first = nbx.scatter_add(to_nbx(np.zeros((2, 3), np.float32)), 0, to_nbx(index), to_nbx(src))
    assert np.array_equal(first.numpy(), expected)
    x = to_nbx(np.zeros((2, 3), np.float32))
    x.scatter_(0, to_nbx(index[:1]), 2.5, reduce="add")
    assert x.tolist() == [[5.0, 2.5, 2.5], [0.0, 0.0, 0.0]] or x.tolist() == [[2.5, 0.0, 2.5], [0.0, 2.5, 0.0]]


def test_index_select_add_copy_fill():
    a = np.arange(20.0).reshape(4, 5)
    x = to_nbx(a)
    idx = np.array([3, 0, 3])
    assert np.array_equal(nbx.index_select(x, 0, to_nbx(idx)).numpy(), a[idx])
    assert np.array_equal(nbx.index_select(x.t(), 1, to_nbx(idx.astype(np.int32))).numpy(), a.T[:, idx])
    assert nbx.index_select(to_nbx(np.array(5.0)), 0, to_nbx(np.array(0))).tolist() == 5.0
    source = np.ones((4, 3))
    expected = a.copy()
    np.add.at(expected, (slice(None), idx), 2 * source)
    assert np.array_equal(x.index_add(1, to_nbx(idx), to_nbx(source), alpha=2).numpy(), expected)
    expected = a.copy()
    expected[[1, 2]] = -1
    assert np.array_equal(x.index_copy(0, to_nbx(np.array([2, 1])), to_nbx(-np.ones((2, 5)))).numpy(), expected)
    expected = a.copy()
    expected[:, [0, 4]] = 9
    assert np.array_equal(x.index_fill(1, to_nbx(np.array([0, -1])), 9).numpy(), expected)
    assert np.array_equal(x.numpy(), a)  # the out-of-place forms leave x alone


def test_embedding_rows_any_index_shape_and_dtype():
    table = np.random.default_rng(0).standard_normal((10, 6)).astype(np.float32)
    w = to_nbx(table)
    for ids in [np.array([[1, 2], [9, 0]]), np.array([4], dtype=np.int32), np.array(3), np.zeros((2, 0), np.int64)]:
        got = nbx.embedding(w, to_nbx(ids))
        assert np.array_equal(got.numpy(), table[ids])
    padded = nbx.embedding(w, to_nbx(np.array([0, 1])), padding_idx=0)
    assert np.array_equal(padded.numpy(), table[[0, 1]])
    bf16 = to_nbx(table).to(nbx.bfloat16)
    assert np.array_equal(nbx.embedding(bf16, to_nbx(np.array([5, 5]))).numpy(), bf16.numpy()[[5, 5]])
    with pytest.raises(NotImplementedError, match="max_norm"):
        from nbxtensor.ops.gather_scatter import embedding_functional
        embedding_functional(to_nbx(np.array([1])), w, max_norm=1.0)


@pytest.mark.parametrize("op,call", [
    ("embedding", lambda x, i: nbx.embedding(x, i)),
    ("index_select", lambda x, i: nbx.index_select(x, 0, i)),
    ("gather", lambda x, i: nbx.gather(x, 0, i.reshape(-1, 1))),
    ("scatter_", lambda x, i: x.scatter_(0, i.reshape(-1, 1), 1.0)),
    ("scatter_add_", lambda x, i: x.scatter_add_(0, i.reshape(-1, 1), nbx.ones(i.numel(), 1, dtype=nbx.float64))),
    ("index_put_", lambda x, i: x.index_put_((i,), nbx.ones(1, dtype=nbx.float64))),
    ("index_add_", lambda x, i: x.index_add_(0, i, nbx.ones(i.numel(), 2, dtype=nbx.float64))),
    ("take", lambda x, i: nbx.take(x, i)),
])
def test_out_of_range_raises_naming_the_op_and_never_writes_outside(op, call):
    guard = to_nbx(np.zeros(12))
    inner = guard[4:8].reshape(2, 2)
    # on a GPU the error surfaces at the next synchronisation: the read of guard
    with pytest.raises(IndexError, match=op):
        call(inner, to_nbx(np.array([0, 5])))
        guard.numpy()
    with pytest.raises(IndexError, match=op):
        call(inner, to_nbx(np.array([-5])))
        guard.numpy()
    assert np.array_equal(guard.numpy()[:4], np.zeros(4)) and np.array_equal(guard.numpy()[8:], np.zeros(4))


def test_negative_indices_wrap_only_where_torch_wraps():
    x = to_nbx(np.arange(4.0))
    assert nbx.take(x, to_nbx(np.array([-1]))).tolist() == [3.0]
    assert x[to_nbx(np.array([-1]))].tolist() == [3.0]
    with pytest.raises(IndexError):
        nbx.gather(x, 0, to_nbx(np.array([-1]))).numpy()
    with pytest.raises(IndexError):
        nbx.index_select(x, 0, to_nbx(np.array([-1]))).numpy()


def test_take_and_take_along_dim():
    a = np.arange(12.0).reshape(3, 4)
    x = to_nbx(a).t()
    idx = np.array([[0, 11], [5, 2]])
    assert np.array_equal(nbx.take(x, to_nbx(idx)).numpy(), np.take(a.T, idx))
    order = np.argsort(-a, axis=1)
    assert np.array_equal(nbx.take_along_dim(to_nbx(a), to_nbx(order), 1).numpy(), np.take_along_axis(a, order, 1))
    row = np.array([[2, 0]])
    assert np.array_equal(nbx.take_along_dim(to_nbx(a), to_nbx(row), 1).numpy(), np.take_along_axis(a, np.repeat(row, 3, 0), 1))
    assert np.array_equal(nbx.take_along_dim(to_nbx(a), to_nbx(np.array([7, 1]))).numpy(), a.reshape(-1)[[7, 1]])


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.bool_, np.complex64], ids=lambda d: np.dtype(d).name)
def test_masked_fill_select_scatter(dtype):
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((3, 4)) * 4).astype(dtype) if dtype != np.bool_ else rng.standard_normal((3, 4)) > 0
    mask = rng.standard_normal((1, 4)) > 0
    x = to_nbx(a)
    filled = x.masked_fill(to_nbx(mask), 1)
    assert np.array_equal(filled.numpy(), np.where(mask, np.array(1).astype(a.dtype), a))
    full_mask = np.broadcast_to(mask, a.shape)
    assert np.array_equal(x.masked_select(to_nbx(mask)).numpy(), a[full_mask])
    source = np.arange(20).astype(a.dtype)
    expected = a.copy()
    expected[full_mask] = source[:full_mask.sum()]
    assert np.array_equal(x.masked_scatter(to_nbx(mask), to_nbx(source)).numpy(), expected)
    x.t().masked_fill_(to_nbx(mask.T), 0)
    assert np.array_equal(x.numpy(), np.where(mask, np.array(0).astype(a.dtype), a))


@pytest.mark.parametrize("shape", [(0,), (5,), (3, 4), (2, 3, 4), (), (2, 1, 3, 1, 2, 1)])
def test_nonzero_argwhere_where(shape):
    rng = np.random.default_rng(6)
    a = rng.integers(0, 3, size=shape).astype(np.float32) * (rng.standard_normal(shape) > 0)
    x = to_nbx(a)
    assert np.array_equal(nbx.nonzero(x).numpy(), np.argwhere(a))
    assert np.array_equal(nbx.argwhere(x).numpy(), np.argwhere(a))
    for got, expected in zip(nbx.nonzero(x, as_tuple=True), np.nonzero(a) if a.ndim else (np.zeros(int(a != 0), np.int64),)):
        assert np.array_equal(got.numpy(), expected)
    where = registry.lookup("aten::where.default")
    assert len(where(x)) == max(a.ndim, 1)


def test_nonzero_spans_many_blocks_in_order():
    a = np.zeros(70000, np.int8)
    a[::7] = 1
    a[-1] = 3
    got = nbx.nonzero(to_nbx(a)[::1]).numpy()
    assert np.array_equal(got[:, 0], np.flatnonzero(a))


def test_meta_rules_describe_shapes():
    w = nbx.empty(10, 4)
    assert registry.get("embedding").meta(w, nbx.empty(2, 3, dtype=nbx.int64)).shape == (2, 3, 4)
    assert registry.get("gather").meta(w, 1, nbx.empty(10, 2, dtype=nbx.int64)).shape == (10, 2)
    assert registry.get("index_select").meta(w, 1, nbx.empty(3, dtype=nbx.int64)).shape == (10, 3)
    assert registry.get("embedding").cost(w, nbx.empty(2, dtype=nbx.int64)).bytes_written == 2 * 4 * 4
