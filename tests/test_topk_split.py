"""A short top-k of a long row (a vocabulary row) in two launches: each segment of the row keeps its k
first, then one program sorts the candidates. Exact against a stable order computed in Python: the k
first by key, NaN the largest, equal keys (-0.0 and 0.0 among them) in position order, as a stable sort
of the whole row gives them. Segment lengths are shrunk so that rows of 300 take the path."""
import math

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.ops import registry, sorting
from nbxtensor.ops.registry import TensorMeta

from .conftest import to_nbx


@pytest.fixture
def short_segments(monkeypatch):
    monkeypatch.setattr(sorting, "SEGMENT_LIMIT", 64)
    monkeypatch.setattr(sorting, "CANDIDATE_SEGMENT_MIN", 16)


def stable_first(row, k, largest):
    """Positions of the k first of ``row`` (float64 values) in a stable order, NaN largest."""
    def key(i):
        v = row[i]
        nan = math.isnan(v)
        return (not nan, -v if not nan else 0.0, i) if largest else (nan, v if not nan else 0.0, i)
    return sorted(range(len(row)), key=key)[:k]


def test_candidate_segments():
    """The shortest segment whose candidates fit one; none where k is too large for the row."""
    assert sorting.candidate_segment(32000, 50) == 512
    assert sorting.candidate_segment(262144, 50) == 4096
    assert sorting.candidate_segment(262144, 64) == 4096
    assert sorting.candidate_segment(262144, 100) is None
    assert sorting.candidate_segment(4096, 1) is None  # one segment: sorted by one program
    # long segments only while their programs fit one wave (the H200: 4 a SM over 132), else radix select
    assert sorting.candidate_segment(262144, 50, count=8, programs=528) == 4096
    assert sorting.candidate_segment(262144, 50, count=64, programs=528) is None
    assert sorting.candidate_segment(32000, 50, count=64, programs=528) == 512


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64", "int32", "uint8"])
@pytest.mark.parametrize("largest", [True, False])
def test_split_topk_is_a_stable_head(rng, short_segments, dtype, largest):
    alphabet = np.array([-3, -1, 0, 1, 2, 100, 101], np.float64)
    a = alphabet[rng.integers(0, len(alphabet), (4, 300))]
    if dtype.startswith(("float", "bfloat")):
        a[0, ::40] = -0.0
        a[1, [17, 250]] = np.nan
        a[3] = rng.standard_normal(300)
    elif dtype == "uint8":
        a = np.abs(a)
    x = to_nbx(a.astype(np.float32)).to(nbx.bfloat16) if dtype == "bfloat16" else to_nbx(a.astype(dtype))
    values = x.float().numpy().astype(np.float64) if dtype == "bfloat16" else x.numpy().astype(np.float64)
    for k in (1, 5, 12):
        assert sorting.candidate_segment(300, k) is not None
        result = nbx.topk(x, k, largest=largest)
        expected = [stable_first(row, k, largest) for row in values]
        assert result.indices.tolist() == expected
        got = result.values.float().numpy() if dtype == "bfloat16" else result.values.numpy()
        np.testing.assert_array_equal(got.astype(np.float64), np.take_along_axis(values, np.array(expected), 1))


def test_split_topk_of_a_short_last_segment_and_kthvalue(rng, short_segments):
    """Rows whose last segment holds fewer than k elements (its missing candidates are -1), along a
    leading dim; kthvalue through the same path."""
    a = rng.standard_normal((130, 2)).astype(np.float32)
    result = nbx.topk(to_nbx(a), 5, dim=0)
    expected = np.array([stable_first(col, 5, True) for col in a.T.astype(np.float64)]).T
    assert result.indices.tolist() == expected.tolist()
    values, indices = nbx.kthvalue(to_nbx(a[:, 0]), 4)
    assert indices.item() == stable_first(a[:, 0].astype(np.float64), 4, False)[-1]
    assert values.item() == np.sort(a[:, 0])[3]


def test_topk_cost_declares_the_candidates():
    """The candidates (int64, k per segment per row) of a vocabulary row's top-k, and the radix select's
    temporaries where k is too large for them."""
    meta = TensorMeta((8, 32000), nbx.float32)
    assert registry.get("topk").cost(meta, 50).workspace >= 8 * 63 * 50 * 8
    assert registry.get("topk").cost(TensorMeta((8, 262144), nbx.float32), 100).workspace >= 8 * 100 * 8
    assert registry.get("topk").cost(TensorMeta((8, 100), nbx.float32), 5).workspace == 0


@pytest.mark.parametrize("dtype", ["float64", "int64", "float32"])
def test_split_topk_selects_at_the_threshold(rng, short_segments, dtype):
    """The selection's edge cases, against a stable order: every element equal (the k first positions);
    more NaN than k in a segment (NaN the largest); keys that differ only in their lowest bits (64-bit
    keys searched through their low word); k half a segment (the most candidates a segment gives)."""
    n, k = 120, 16
    assert sorting.candidate_segment(n, k) == 32
    base = np.float64(1.0) if dtype == "float64" else (1 << 40 if dtype == "int64" else np.float32(1.0))
    rows = [np.full(n, base)]
    if dtype != "int64":
        with_nan = rng.standard_normal(n)
        with_nan[:20] = np.nan  # 20 NaN in the first segment of 32, and 4 more later
        with_nan[rng.choice(np.arange(40, n), 4, replace=False)] = np.nan
        rows.append(with_nan)
    if dtype == "float64":
        rows.append(1.0 + rng.integers(0, 8, n) * 2.0 ** -52)  # the last mantissa bits decide
    elif dtype == "int64":
        rows.append((1 << 40) + rng.integers(0, 8, n))
    else:
        rows.append(rng.integers(0, 3, n).astype(np.float64))
    a = np.stack(rows).astype(dtype)
    for largest in (True, False):
        result = nbx.topk(to_nbx(a), k, largest=largest)
        values = a.astype(np.float64) if dtype != "int64" else a
        expected = [stable_first(list(row), k, largest) for row in values]
        assert result.indices.tolist() == expected
        np.testing.assert_array_equal(result.values.numpy(), np.take_along_axis(a, np.array(expected), 1))
