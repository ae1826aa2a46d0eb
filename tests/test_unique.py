"""unique, unique_consecutive, bincount and histc against NumPy, exactly."""
import numpy as np
import pytest

import nbxtensor as nbx
from tests.conftest import to_nbx


@pytest.mark.parametrize("dtype", [np.int64, np.float32, np.int8, np.float16, np.bool_], ids=lambda d: np.dtype(d).name)
def test_unique_flat_with_inverse_and_counts(dtype):
    a = np.random.default_rng(0).integers(-4, 5, size=(5, 7)).astype(dtype)
    values, inverse, counts = nbx.unique(to_nbx(a), return_inverse=True, return_counts=True)
    expected, expected_inverse, expected_counts = np.unique(a, return_inverse=True, return_counts=True)
    assert values.dtype == nbx.get_dtype(a.dtype)
    assert np.array_equal(values.numpy(), expected)
    assert np.array_equal(inverse.numpy(), expected_inverse.reshape(a.shape))
    assert np.array_equal(counts.numpy(), expected_counts)
    assert np.array_equal(nbx.unique(to_nbx(a), sorted=False).numpy(), expected)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_unique_along_a_dim(dim):
    a = np.random.default_rng(1).integers(-2, 2, size=(6, 3, 4)).astype(np.int32)
    a[3] = a[0]  # a repeated slice along dim 0
    values, inverse, counts = nbx.unique(to_nbx(a), dim=dim, return_inverse=True, return_counts=True)
    expected, expected_inverse, expected_counts = np.unique(a, axis=dim, return_inverse=True, return_counts=True)
    assert np.array_equal(values.numpy(), expected)
    assert np.array_equal(inverse.numpy(), expected_inverse.reshape(-1))
    assert np.array_equal(counts.numpy(), expected_counts)


def test_unique_consecutive():
    a = np.array([3, 3, 1, 1, 1, 2, 3, 3, 2], np.int64)
    values, inverse, counts = nbx.unique_consecutive(to_nbx(a), return_inverse=True, return_counts=True)
    assert values.tolist() == [3, 1, 2, 3, 2]
    assert inverse.tolist() == [0, 0, 1, 1, 1, 2, 3, 3, 4]
    assert counts.tolist() == [2, 3, 1, 2, 1]
    rows = np.array([[1, 2], [1, 2], [0, 2], [1, 2]])
    assert nbx.unique_consecutive(to_nbx(rows), dim=0).tolist() == [[1, 2], [0, 2], [1, 2]]


def test_unique_of_empty_and_single():
    assert tuple(nbx.unique(to_nbx(np.zeros(0, np.float32))).shape) == (0,)
    values, counts = nbx.unique(to_nbx(np.array([7])), return_counts=True)
    assert values.tolist() == [7] and counts.tolist() == [1]


def test_bincount_with_weights_and_minlength():
    x = np.random.default_rng(2).integers(0, 9, size=40)
    weights = np.random.default_rng(3).random(40)
    assert np.array_equal(nbx.bincount(to_nbx(x)).numpy(), np.bincount(x))
    assert np.array_equal(nbx.bincount(to_nbx(x), minlength=15).numpy(), np.bincount(x, minlength=15))
    got = nbx.bincount(to_nbx(x.astype(np.int32)), weights=to_nbx(weights))
    assert got.dtype == nbx.float64
    np.testing.assert_allclose(got.numpy(), np.bincount(x, weights), rtol=1e-15)
    assert nbx.bincount(to_nbx(x), weights=to_nbx(weights.astype(np.float32))).dtype == nbx.float32
    assert nbx.bincount(to_nbx(np.zeros(0, np.int64)), minlength=3).tolist() == [0, 0, 0]
    with pytest.raises(RuntimeError):
        nbx.bincount(to_nbx(np.array([1, -1])))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_histc_against_numpy(dtype):
    # values away from bin edges, so NumPy's edge search and ATen's arithmetic agree
    x = (np.random.default_rng(4).integers(-20, 20, size=200) + 0.25).astype(dtype)
    got = nbx.histc(to_nbx(x), bins=8, min=-10, max=10)
    assert got.dtype == nbx.get_dtype(np.dtype(dtype))
    assert np.array_equal(got.numpy(), np.histogram(x, bins=8, range=(-10, 10))[0].astype(dtype))
    data_range = nbx.histc(to_nbx(x), bins=5)
    assert np.array_equal(data_range.numpy(), np.histogram(x, bins=5)[0].astype(dtype))
    assert nbx.histc(to_nbx(np.array([2.0, 2.0], dtype)), bins=4).tolist() == [0, 0, 2, 0]  # over [1, 3]
