"""sort, argsort, msort, topk, kthvalue, searchsorted and bucketize against NumPy: stability, NaN
order, every dim, and the top-k lessons (no rounding through fp16, no padding lanes read)."""
import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.ops import sorting
from tests.conftest import to_nbx

DTYPES = [np.float32, np.float64, np.float16, np.int64, np.int32, np.int8, np.uint8, np.bool_]


def sample(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.standard_normal(shape) > 0
    if np.issubdtype(dtype, np.floating):
        return (rng.integers(-4, 4, size=shape) / 2).astype(dtype)  # many ties
    return rng.integers(0 if dtype == np.uint8 else -50, 50, size=shape).astype(dtype)


def stable_argsort(a, axis, descending):
    if descending:
        # a stable descending order: NaN first (ahead of inf), ties in their original order
        key = -a.astype(np.float64) if a.dtype != np.bool_ else ~a
        order = np.argsort(key, axis=axis, kind="stable")
        if np.issubdtype(key.dtype, np.floating):
            not_nan = ~np.isnan(np.take_along_axis(key, order, axis))
            order = np.take_along_axis(order, np.argsort(not_nan, axis=axis, kind="stable"), axis)
        return order
    return np.argsort(a, axis=axis, kind="stable")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("dim,descending", [(0, True), (1, False), (-1, True)])
def test_sort_is_stable_along_any_dim(dtype, dim, descending):
    a = sample((3, 4, 5), dtype)
    values, indices = nbx.sort(to_nbx(a), dim=dim, descending=descending)
    order = stable_argsort(a, dim, descending)
    assert np.array_equal(indices.numpy(), order)
    assert np.array_equal(values.numpy(), np.take_along_axis(a, order, dim))
    assert np.array_equal(nbx.argsort(to_nbx(a), dim, descending).numpy(), order)


def test_nan_sorts_last_ascending_and_first_descending_and_zero_signs_tie():
    a = np.array([2.0, np.nan, -0.0, 1.0, 0.0, np.nan, -np.inf, np.inf], np.float32)
    assert nbx.sort(to_nbx(a)).indices.tolist() == [6, 2, 4, 3, 0, 7, 1, 5]
    assert nbx.sort(to_nbx(a), descending=True).indices.tolist() == [1, 5, 7, 0, 3, 2, 4, 6]
    assert nbx.sort(to_nbx(a.astype(np.float64))).indices.tolist() == [6, 2, 4, 3, 0, 7, 1, 5]


def test_msort_and_zero_dim_and_empty():
    a = sample((4, 3), np.float32)
    assert np.array_equal(nbx.msort(to_nbx(a)).numpy(), np.sort(a, 0))
    assert nbx.sort(to_nbx(np.array(3.0))).values.item() == 3.0
    assert tuple(nbx.sort(to_nbx(np.zeros((0, 3)))).indices.shape) == (0, 3)


@pytest.mark.parametrize("k", [1, 3, 5, 7, 13])
@pytest.mark.parametrize("largest", [True, False])
def test_topk_k_not_a_power_of_two_never_returns_padding(k, largest):
    # negative scores: padding lanes read as zeros would win a largest top-k
    a = -1.0 - np.random.default_rng(k).random((4, 13)).astype(np.float32)
    result = nbx.topk(to_nbx(a), k, largest=largest)
    order = np.argsort(-a if largest else a, axis=1, kind="stable")[:, :k]
    assert np.array_equal(result.indices.numpy(), order)
    assert np.array_equal(result.values.numpy(), np.take_along_axis(a, order, 1))


def test_topk_of_float32_is_not_rounded_through_float16():
    a = np.array([[1.0001, 1.0002, 1.0003, 1.0, 70000.5, 70000.25]], np.float32)
    result = nbx.topk(to_nbx(a), 4)
    assert result.values.numpy()[0].tolist() == a[0, [4, 5, 2, 1]].tolist()
    assert result.indices.tolist() == [[4, 5, 2, 1]]


def test_topk_of_rows_longer_than_a_segment(monkeypatch):
    monkeypatch.setattr(sorting, "SEGMENT_LIMIT", 64)
    rng = np.random.default_rng(7)
    a = rng.standard_normal((3, 300)).astype(np.float32)
    a[1, 299] = np.nan
    a[2, :] = 0.5  # all ties: the first positions win, in order
    result = nbx.topk(to_nbx(a), 10)
    order = stable_argsort(a, 1, True)[:, :10]
    assert np.array_equal(result.indices.numpy(), order)
    smallest = nbx.topk(to_nbx(a[:, :130]), 32, dim=1, largest=False)
    assert np.array_equal(smallest.indices.numpy(), np.argsort(a[:, :130], 1, kind="stable")[:, :32])
    # k up to a segment takes the radix select; past it, the whole row is sorted
    for k in (33, 64, 65, 300):
        result = nbx.topk(to_nbx(a), k)
        order = stable_argsort(a, 1, True)[:, :k]
        assert np.array_equal(result.indices.numpy(), order)
        assert np.array_equal(result.values.numpy(), np.take_along_axis(a, order, 1), equal_nan=True)


def test_topk_along_a_leading_dim_and_kthvalue():
    a = sample((6, 4), np.int32, seed=3)
    result = nbx.topk(to_nbx(a), 2, dim=0)
    order = stable_argsort(a, 0, True)[:2]
    assert np.array_equal(result.indices.numpy(), order)
    values, indices = nbx.kthvalue(to_nbx(a), 3, dim=0, keepdim=True)
    assert np.array_equal(values.numpy(), np.sort(a, 0)[2:3])
    assert np.array_equal(np.take_along_axis(a, indices.numpy(), 0), values.numpy())
    with pytest.raises(RuntimeError):
        nbx.topk(to_nbx(a), 7, dim=0)


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.float64, np.int16], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_and_bucketize(dtype, right):
    rng = np.random.default_rng(8)
    seq = np.sort(rng.integers(-10, 10, size=9)).astype(dtype)
    values = rng.integers(-12, 12, size=(3, 5)).astype(dtype)
    side = "right" if right else "left"
    assert np.array_equal(nbx.searchsorted(to_nbx(seq), to_nbx(values), right=right).numpy(),
                          np.searchsorted(seq, values, side=side))
    assert np.array_equal(nbx.bucketize(to_nbx(values), to_nbx(seq), right=right).numpy(),
                          np.searchsorted(seq, values, side=side))
    rows = np.sort(rng.integers(-10, 10, size=(3, 6)), axis=1).astype(dtype)
    got = nbx.searchsorted(to_nbx(rows), to_nbx(values), side=side, out_int32=True)
    assert got.dtype == nbx.int32
    assert np.array_equal(got.numpy(), np.stack([np.searchsorted(r, v, side=side) for r, v in zip(rows, values)]))
    assert nbx.searchsorted(to_nbx(seq), 0).item() == np.searchsorted(seq, 0)


@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_with_a_sorter_reads_the_sequence_in_its_order(right):
    """``sorter`` gives the order of an unsorted sequence (NumPy's and torch's meaning): results are
    positions in that order, per row for a 2-D sequence; a sorter of another shape or dtype is refused, and
    an index out of range is reported naming searchsorted."""
    rng = np.random.default_rng(9)
    side = "right" if right else "left"
    seq = rng.permutation(np.arange(-8, 8) * 1.5).astype(np.float32)
    values = rng.uniform(-14, 14, size=(2, 7)).astype(np.float32)
    sorter = np.argsort(seq, kind="stable")
    got = nbx.searchsorted(to_nbx(seq), to_nbx(values), side=side, sorter=to_nbx(sorter))
    assert np.array_equal(got.numpy(), np.searchsorted(seq, values, side=side, sorter=sorter))
    rows = rng.integers(-10, 10, size=(2, 6)).astype(np.int64)
    row_sorters = np.argsort(rows, axis=1, kind="stable")
    got = nbx.searchsorted(to_nbx(rows), to_nbx(values.astype(np.int64)), side=side, sorter=to_nbx(row_sorters))
    expected = [np.searchsorted(r, v, side=side, sorter=o) for r, v, o in zip(rows, values.astype(np.int64), row_sorters)]
    assert np.array_equal(got.numpy(), np.stack(expected))
    with pytest.raises(RuntimeError, match="same shape"):
        nbx.searchsorted(to_nbx(seq), to_nbx(values), sorter=to_nbx(sorter[:-1]))
    with pytest.raises(RuntimeError, match="int64"):
        nbx.searchsorted(to_nbx(seq), to_nbx(values), sorter=to_nbx(sorter.astype(np.int32)))
    bad = sorter.copy()
    bad[3] = 99
    with pytest.raises(IndexError, match="searchsorted"):
        nbx.searchsorted(to_nbx(seq), to_nbx(values), sorter=to_nbx(bad)).numpy()


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int8", "uint8"])
@pytest.mark.parametrize("largest", [True, False])
def test_radix_select_over_long_rows_with_many_ties(monkeypatch, dtype, largest):
    """Rows longer than a segment take the radix select: keys are found 8 bits at a time, so values that
    share leading digits (a small alphabet, -0.0 and 0.0, NaN) must still give ATen's stable order. Each
    row spreads over three chunks (programs), whose counts and positions must join up in order."""
    monkeypatch.setattr(sorting, "SEGMENT_LIMIT", 64)
    monkeypatch.setattr(sorting, "SELECT_CHUNK_INTERPRETED", 256)
    monkeypatch.setattr(sorting, "SELECT_BLOCK_INTERPRETED", 128)
    rng = np.random.default_rng(17)
    alphabet = np.array([-3, -1, 0, 1, 2, 100, 101], np.float64)
    a = alphabet[rng.integers(0, len(alphabet), (4, 700))]
    if dtype.startswith(("float", "bfloat")):
        a[0, ::50] = -0.0
        a[1, 123] = np.nan
        a[3] = rng.standard_normal(700) * 1e-3  # distinct values close together: the low digits decide
    elif dtype == "uint8":
        a = np.abs(a)
    x = to_nbx(a.astype(np.float32)).to(getattr(nbx, dtype)) if dtype == "bfloat16" else to_nbx(a.astype(dtype))
    values = x.float().numpy().astype(np.float64) if dtype == "bfloat16" else x.numpy().astype(np.float64)
    for k in (1, 7, 64):
        result = nbx.topk(x, k, largest=largest)
        expected = stable_argsort(values, 1, largest)[:, :k]
        assert np.array_equal(result.indices.numpy(), expected)
