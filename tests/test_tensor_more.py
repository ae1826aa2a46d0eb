"""The tensor ops of issue #29 (``ops/tensor_more.py``) and the tensordot and embedding_bag fixes, against
NumPy float64 references written here.

Tolerances: picking, padding, scattering and counting ops are exact; a float32 result of a few products
summed (addbmm's 12-term dot products, cov over 6 observations) is within a few float32 roundings of
float64 (rtol 1e-5); gradient's differences divide by spacings (rtol 1e-5, atol 1e-5 for near-zero
differences); polar's cos and sin and logspace's powers are one or two float32 roundings (rtol 1e-6)."""
import math

import ml_dtypes
import numpy as np
import pytest

import nbxtensor as nbx
from tests.conftest import TEST_DEVICE, to_nbx


@pytest.fixture
def r():
    return np.random.default_rng(2929)


def close(actual, expected, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(np.asarray(actual.numpy(), np.float64), expected, rtol=rtol, atol=atol)


def f32(r, *shape):
    return r.standard_normal(shape).astype(np.float32)


# ---- addbmm, cov, corrcoef --------------------------------------------------------------------------

def test_addbmm_sums_every_batch_product(r):
    x, b1, b2 = f32(r, 3, 5), f32(r, 4, 3, 3), f32(r, 4, 3, 5)
    expected = 0.5 * x.astype(np.float64) + 2.0 * np.einsum("bij,bjk->ik", b1.astype(np.float64), b2)
    close(nbx.addbmm(to_nbx(x), to_nbx(b1), to_nbx(b2), beta=0.5, alpha=2.0), expected)
    close(to_nbx(x[:1]).addbmm(to_nbx(b1), to_nbx(b2)), x[:1] + np.einsum("bij,bjk->ik", b1, b2))
    ints = r.integers(-5, 5, (2, 2, 3))
    assert nbx.addbmm(to_nbx(np.zeros((2, 2), np.int64)), to_nbx(ints), to_nbx(ints.transpose(0, 2, 1))).tolist() \
        == np.einsum("bij,bkj->ik", ints, ints).tolist()
    with pytest.raises(RuntimeError, match="3D"):
        nbx.addbmm(to_nbx(x), to_nbx(b1[0]), to_nbx(b2))
    with pytest.raises(RuntimeError, match="same number of batches"):
        nbx.addbmm(to_nbx(x), to_nbx(b1), to_nbx(b2[:2]))
    with pytest.raises(RuntimeError, match="Incompatible matrix sizes"):
        nbx.addbmm(to_nbx(x), to_nbx(b1), to_nbx(b2[:, :2]))


def test_cov_with_corrections_and_weights(r):
    x = f32(r, 3, 6)
    fweights = np.array([1, 2, 0, 3, 1, 1])
    aweights = r.uniform(0.5, 2.0, 6).astype(np.float32)
    close(nbx.cov(to_nbx(x)), np.cov(x.astype(np.float64)))
    close(to_nbx(x).cov(correction=0), np.cov(x.astype(np.float64), ddof=0))
    close(nbx.cov(to_nbx(x), fweights=to_nbx(fweights)), np.cov(x.astype(np.float64), fweights=fweights))
    close(nbx.cov(to_nbx(x), aweights=to_nbx(aweights)), np.cov(x.astype(np.float64), aweights=aweights))
    close(nbx.cov(to_nbx(x), correction=2, fweights=to_nbx(fweights), aweights=to_nbx(aweights)),
          np.cov(x.astype(np.float64), ddof=2, fweights=fweights, aweights=aweights))
    one = nbx.cov(to_nbx(x[0]))
    assert one.shape == () and one.dtype == nbx.float32
    close(one, np.cov(x[0].astype(np.float64)))
    ints = nbx.cov(to_nbx(np.array([[1, 2, 4], [0, 5, 1]])))
    assert ints.dtype == nbx.float32
    close(ints, np.cov(np.array([[1, 2, 4], [0, 5, 1]], np.float64)))
    # no degrees of freedom left: ATen divides by zero (clamped), giving infinities and NaN
    assert math.isinf(nbx.cov(to_nbx(np.array([1.0, 2.0], np.float32)), correction=2).item())


def test_cov_refuses_bad_weights(r):
    x = to_nbx(f32(r, 2, 3))
    with pytest.raises(RuntimeError, match="two or fewer dimensions"):
        nbx.cov(to_nbx(f32(r, 2, 2, 2)))
    with pytest.raises(RuntimeError, match="integral dtype"):
        nbx.cov(x, fweights=to_nbx(np.ones(3, np.float32)))
    with pytest.raises(RuntimeError, match="floating point dtype"):
        nbx.cov(x, aweights=to_nbx(np.ones(3, np.int64)))
    with pytest.raises(RuntimeError, match="same numel"):
        nbx.cov(x, fweights=to_nbx(np.ones(2, np.int64)))
    with pytest.raises(RuntimeError, match="one or fewer dimensions"):
        nbx.cov(x, fweights=to_nbx(np.ones((1, 3), np.int64)))
    with pytest.raises(RuntimeError, match="cannot be negative"):
        nbx.cov(x, fweights=to_nbx(np.array([1, -1, 1])))


def test_corrcoef(r):
    x = f32(r, 4, 7)
    close(nbx.corrcoef(to_nbx(x)), np.corrcoef(x.astype(np.float64)))
    assert nbx.corrcoef(to_nbx(x[0])).item() == 1.0
    # perfectly (anti-)correlated rows land on +-1 exactly: clipped, never past it
    line = np.array([[1.0, 2.0, 3.0], [3.0, 1.0, -1.0]], np.float32)
    got = to_nbx(line).corrcoef().numpy()
    assert np.abs(got).max() <= 1.0
    close(nbx.corrcoef(to_nbx(line)), np.corrcoef(line.astype(np.float64)))


# ---- constant_pad_nd, complex, polar, conj_physical ---------------------------------------------------

def test_constant_pad_nd_pads_and_crops(r):
    x = f32(r, 2, 3, 4)
    got = nbx.constant_pad_nd(to_nbx(x), (1, 2, 0, 1), 7.5)
    np.testing.assert_array_equal(got.numpy(), np.pad(x, ((0, 0), (0, 1), (1, 2)), constant_values=7.5))
    np.testing.assert_array_equal(nbx.constant_pad_nd(to_nbx(x), (-1, 1)).numpy(),
                                  np.pad(x[..., 1:], ((0, 0), (0, 0), (0, 1))))
    with pytest.raises(RuntimeError, match="padding length"):
        nbx.constant_pad_nd(to_nbx(x), (1, 2, 3))


def test_complex_and_polar(r):
    re, im = f32(r, 3, 1), f32(r, 4)
    z = nbx.complex(to_nbx(re), to_nbx(im))
    assert z.dtype == nbx.complex64 and z.shape == (3, 4)
    np.testing.assert_array_equal(z.numpy(), re + 1j * im)
    modulus, angle = np.abs(f32(r, 5)), f32(r, 5)
    w = nbx.polar(to_nbx(modulus), to_nbx(angle))
    expected = modulus.astype(np.float64) * np.exp(1j * angle.astype(np.float64))
    np.testing.assert_allclose(w.numpy(), expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(nbx.conj_physical(z).numpy(), np.conj(z.numpy()))
    np.testing.assert_array_equal(to_nbx(re).conj_physical().numpy(), re)
    with pytest.raises(RuntimeError, match="scalar type"):
        nbx.complex(to_nbx(re), to_nbx(im.astype(np.float64)))
    with pytest.raises(RuntimeError, match="Float or Double"):
        nbx.polar(to_nbx(np.ones(2, np.int64)), to_nbx(np.ones(2, np.int64)))


# ---- index_reduce, put, unravel_index -----------------------------------------------------------------

def index_reduce_reference(x, dim, index, source, reduce, include_self):
    out = np.moveaxis(x.astype(np.float64).copy(), dim, 0)
    src = np.moveaxis(source.astype(np.float64), dim, 0)
    for target in set(index.tolist()):
        picked = src[index == target]
        gathered = np.concatenate([out[target][None], picked]) if include_self else picked
        reducer = {"prod": np.prod, "amax": np.max, "amin": np.min, "mean": np.mean}[reduce]
        out[target] = reducer(gathered, axis=0)
    return np.moveaxis(out, 0, dim)


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce(r, reduce, include_self):
    x, source = f32(r, 3, 4), f32(r, 3, 5)
    index = np.array([0, 2, 0, 3, 2])
    got = nbx.index_reduce(to_nbx(x), 1, to_nbx(index), to_nbx(source), reduce, include_self=include_self)
    close(got, index_reduce_reference(x, 1, index, source, reduce, include_self), rtol=1e-6)
    in_place = to_nbx(x)
    assert in_place.index_reduce_(1, to_nbx(index), to_nbx(source), reduce, include_self=include_self) is in_place
    np.testing.assert_array_equal(in_place.numpy(), got.numpy())


def test_index_reduce_integer_mean_floors_and_errors(r):
    x, source = np.array([[1, 2], [3, 4]]), np.array([[2, -7], [6, 5]])
    got = nbx.index_reduce(to_nbx(x), 0, to_nbx(np.array([1, 1])), to_nbx(source), "mean")
    np.testing.assert_array_equal(got.numpy(), [[1, 2], [(3 + 2 + 6) // 3, (4 - 7 + 5) // 3]])
    with pytest.raises(RuntimeError, match="prod, mean, amax or amin"):
        nbx.index_reduce(to_nbx(x), 0, to_nbx(np.array([0, 1])), to_nbx(source), "sum")
    with pytest.raises(RuntimeError, match="same scalar type"):
        nbx.index_reduce(to_nbx(x), 0, to_nbx(np.array([0, 1])), to_nbx(source.astype(np.float32)), "amax")
    with pytest.raises(RuntimeError, match="number of indices"):
        nbx.index_reduce(to_nbx(x), 0, to_nbx(np.array([0])), to_nbx(source), "amax")
    with pytest.raises(IndexError, match="out of bounds|out of range"):
        # a device the host does not read reports the index at the next synchronisation: numpy()
        nbx.index_reduce(to_nbx(x), 0, to_nbx(np.array([0, 2])), to_nbx(source), "amax").numpy()


def test_put(r):
    x, values = f32(r, 3, 4), f32(r, 4)
    index = np.array([1, -1, 5, 5])
    expected = x.copy()
    np.put(expected, index[:3], values[:3])
    np.testing.assert_array_equal(nbx.put(to_nbx(x), to_nbx(index[:3]), to_nbx(values[:3])).numpy(), expected)
    accumulated = x.astype(np.float64).ravel()
    np.add.at(accumulated, index, values)
    close(to_nbx(x).put(to_nbx(index), to_nbx(values), True), accumulated.reshape(3, 4), rtol=1e-6)
    # put_ on a transposed (non-contiguous) tensor indexes its row-major order and writes through
    base = to_nbx(x.copy())
    view = base.t()
    assert view.put_(to_nbx(np.array([1])), to_nbx(np.array([9.0], np.float32))) is view
    assert view.numpy().ravel()[1] == 9.0 and base.numpy()[1, 0] == 9.0


def test_put_errors(r):
    x = to_nbx(f32(r, 2, 3))
    # an index out of range is found on the device, and raised at the next synchronisation: numpy()
    with pytest.raises(IndexError):
        nbx.put(x, to_nbx(np.array([6])), to_nbx(np.array([1.0], np.float32))).numpy()
    with pytest.raises(IndexError):
        nbx.put(x, to_nbx(np.array([-7])), to_nbx(np.array([1.0], np.float32))).numpy()
    with pytest.raises(IndexError, match="long tensor"):
        nbx.put(x, to_nbx(np.array([0], np.int32)), to_nbx(np.array([1.0], np.float32)))
    with pytest.raises(RuntimeError, match="same dtype"):
        nbx.put(x, to_nbx(np.array([0])), to_nbx(np.array([1.0])))
    with pytest.raises(RuntimeError, match="same number of elements"):
        nbx.put(x, to_nbx(np.array([0, 1])), to_nbx(np.array([1.0], np.float32)))
    with pytest.raises(IndexError, match="empty tensor"):
        nbx.put(to_nbx(np.zeros(0, np.float32)), to_nbx(np.array([0])), to_nbx(np.array([1.0], np.float32)))


def test_unravel_index():
    flat = np.array([[3, 8, 13], [0, 5, 19]])
    got = nbx.unravel_index(to_nbx(flat), (4, 5))
    for ours, theirs in zip(got, np.unravel_index(flat, (4, 5))):
        assert ours.dtype == nbx.int64
        np.testing.assert_array_equal(ours.numpy(), theirs)
    assert [t.item() for t in nbx.unravel_index(to_nbx(np.array(7)), 10)] == [7]
    # torch's rule: each coordinate is taken modulo its dim's size, so indices past the end wrap
    assert [t.item() for t in nbx.unravel_index(to_nbx(np.array(21)), (4, 5))] == [0, 1]
    assert [t.item() for t in nbx.unravel_index(to_nbx(np.array(-1)), (4, 5))] == [3, 4]
    with pytest.raises(TypeError, match="integer dtype"):
        nbx.unravel_index(to_nbx(np.array([1.0], np.float32)), (2, 2))
    with pytest.raises(ValueError, match="negative"):
        nbx.unravel_index(to_nbx(np.array([1])), (2, -2))
    with pytest.raises(TypeError, match="sequence of ints"):
        nbx.unravel_index(to_nbx(np.array([1])), (2, 1.5))
    with pytest.raises(RuntimeError, match="no elements"):
        nbx.unravel_index(to_nbx(np.array([1])), (2, 0))


# ---- gradient ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("edge_order", [1, 2])
def test_gradient_uniform_and_coordinates(r, edge_order):
    x = f32(r, 5, 6)
    wide = x.astype(np.float64)
    for ours, theirs in zip(nbx.gradient(to_nbx(x), edge_order=edge_order), np.gradient(wide, edge_order=edge_order)):
        close(ours, theirs, atol=1e-5)
    (ours,) = nbx.gradient(to_nbx(x), spacing=2.0, dim=1, edge_order=edge_order)
    close(ours, np.gradient(wide, 2.0, axis=1, edge_order=edge_order), atol=1e-5)
    got = nbx.gradient(to_nbx(x), spacing=[0.5, 3.0], dim=(1, 0), edge_order=edge_order)
    expected = np.gradient(wide, 0.5, 3.0, axis=(1, 0), edge_order=edge_order)
    for ours, theirs in zip(got, expected):
        close(ours, theirs, atol=1e-5)
    coordinates = np.array([0.0, 0.5, 1.5, 1.75, 3.0], np.float32)
    (ours,) = nbx.gradient(to_nbx(x), spacing=[to_nbx(coordinates)], dim=0, edge_order=edge_order)
    close(ours, np.gradient(wide, coordinates.astype(np.float64), axis=0, edge_order=edge_order), atol=1e-5)


def test_gradient_integers_and_errors():
    x = np.array([1, 4, 9, 16, 25])
    (ours,) = nbx.gradient(to_nbx(x))
    assert ours.dtype == nbx.float32
    close(ours, np.gradient(x.astype(np.float64)))
    with pytest.raises(RuntimeError, match="edge_order=1 and edge_order=2"):
        nbx.gradient(to_nbx(x), edge_order=3)
    with pytest.raises(RuntimeError, match="at least edge_order\\+1"):
        nbx.gradient(to_nbx(x[:2]), edge_order=2)
    with pytest.raises(RuntimeError, match="list of length"):
        nbx.gradient(to_nbx(np.ones((3, 3), np.float32)), spacing=[1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError, match="coordinates tensor"):
        nbx.gradient(to_nbx(x.astype(np.float32)), spacing=[to_nbx(np.arange(4.0, dtype=np.float32))])


# ---- as_strided_scatter, sum_to_size, logspace, nonzero_static ----------------------------------------

def test_as_strided_scatter(r):
    x, src = f32(r, 3, 3), f32(r, 2, 2)
    got = nbx.as_strided_scatter(to_nbx(x), to_nbx(src), (2, 2), (1, 3), 1)
    expected = x.copy().ravel()
    np.lib.stride_tricks.as_strided(expected[1:], (2, 2), (4, 12))[...] = src
    np.testing.assert_array_equal(got.numpy(), expected.reshape(3, 3))
    np.testing.assert_array_equal(to_nbx(x).numpy(), x)  # the input is left alone
    with pytest.raises(RuntimeError, match="src to have a size equal"):
        nbx.as_strided_scatter(to_nbx(x), to_nbx(src), (2, 3), (1, 3))


def test_sum_to_size(r):
    x = f32(r, 2, 3, 4)
    close(to_nbx(x).sum_to_size(3, 1), x.astype(np.float64).sum(axis=(0, 2))[:, None])
    close(to_nbx(x).sum_to_size((1, 3, 4)), x.astype(np.float64).sum(0, keepdims=True))
    same = to_nbx(x)
    assert same.sum_to_size(2, 3, 4) is same
    flags = to_nbx(np.array([True, False, True]))
    assert flags.sum_to_size(()).item() == 2 and flags.sum_to_size(()).dtype == nbx.int64
    with pytest.raises(RuntimeError, match="not expandable"):
        to_nbx(x).sum_to_size(2, 4)


def test_logspace():
    close(nbx.logspace(-3, 1, 5), np.logspace(-3, 1, 5), rtol=1e-6)
    close(nbx.logspace(0.5, 2.5, 7, base=3.0, dtype=nbx.float64), np.logspace(0.5, 2.5, 7, base=3.0), rtol=1e-12)
    # integer results truncate the float64 powers; powers of two are exact
    assert nbx.logspace(0, 10, 11, base=2, dtype=nbx.int64).tolist() == [2 ** k for k in range(11)]
    assert nbx.logspace(nbx.tensor(1), nbx.tensor(3), 3).tolist() == pytest.approx([10.0, 100.0, 1000.0], rel=1e-6)
    assert nbx.logspace(0, 1, 0).shape == (0,)
    with pytest.raises(TypeError, match="bool"):
        nbx.logspace(0, 1, 3, dtype=nbx.bool)


def test_nonzero_static():
    x = np.array([[0, 3, 0], [1, 0, 2]])
    coordinates = np.argwhere(x)
    np.testing.assert_array_equal(nbx.nonzero_static(to_nbx(x), size=2).numpy(), coordinates[:2])
    padded = to_nbx(x).nonzero_static(size=5, fill_value=-9).numpy()
    np.testing.assert_array_equal(padded, np.concatenate([coordinates, np.full((2, 2), -9)]))
    assert nbx.nonzero_static(to_nbx(np.float32(0)), size=2).shape == (2, 0)
    with pytest.raises(RuntimeError, match="non-negative"):
        nbx.nonzero_static(to_nbx(x), size=-1)


# ---- histogramdd ---------------------------------------------------------------------------------------

def test_histogramdd_counts_weights_and_density(r):
    # points on a quarter grid between integer edges, so float32 and float64 edges bin them alike
    points = (r.integers(0, 16, (20, 2)) / 4 + 0.125).astype(np.float32)
    weights = r.uniform(0, 2, 20).astype(np.float32)
    hist, edges = nbx.histogramdd(to_nbx(points), [4, 2], range=[0.0, 4.0, 0.0, 4.0])
    theirs, their_edges = np.histogramdd(points.astype(np.float64), [4, 2], range=[(0, 4), (0, 4)])
    np.testing.assert_array_equal(hist.numpy(), theirs)
    for ours, expected in zip(edges, their_edges):
        np.testing.assert_array_equal(ours.numpy(), expected)
    given = [to_nbx(np.array([0.0, 1.0, 4.0], np.float32)), to_nbx(np.array([1.0, 2.0, 3.0], np.float32))]
    hist, _ = nbx.histogramdd(to_nbx(points), given, weight=to_nbx(weights), density=True)
    theirs, _ = np.histogramdd(points.astype(np.float64), [[0, 1, 4], [1, 2, 3]], weights=weights, density=True)
    close(hist, theirs, rtol=1e-5)
    # default ranges span each column's values; the maxima fall in the last bins
    hist, edges = nbx.histogramdd(to_nbx(points), 3)
    theirs, their_edges = np.histogramdd(points.astype(np.float64), 3)
    assert hist.numpy().sum() == 20 and hist.shape == (3, 3)
    for ours, expected in zip(edges, their_edges):
        close(ours, expected, rtol=1e-6)


def test_histogramdd_errors(r):
    points = to_nbx(f32(r, 4, 2))
    with pytest.raises(RuntimeError, match="floating dtype"):
        nbx.histogramdd(to_nbx(np.ones((2, 2), np.int64)), 2)
    with pytest.raises(RuntimeError, match="2 sequences of bin edges"):
        nbx.histogramdd(points, [2, 2, 2])
    with pytest.raises(RuntimeError, match="bins must be > 0"):
        nbx.histogramdd(points, [2, 0])
    with pytest.raises(RuntimeError, match="range should have 4 elements"):
        nbx.histogramdd(points, 2, range=[0.0, 1.0])
    with pytest.raises(RuntimeError, match="weight"):
        nbx.histogramdd(points, 2, weight=to_nbx(np.ones(3, np.float32)))


# ---- resize_, resize_as_, the strided and permuted factories ----------------------------------------------

def test_resize_keeps_storage_prefix(r):
    x = f32(r, 2, 3)
    t = to_nbx(x)
    assert t.resize_(3, 2) is t and t.shape == (3, 2)
    np.testing.assert_array_equal(t.numpy(), x.reshape(3, 2))
    t.resize_(4)
    np.testing.assert_array_equal(t.numpy(), x.ravel()[:4])
    t.resize_((3, 3))  # grows: the old six elements first, the rest uninitialised
    np.testing.assert_array_equal(t.numpy().ravel()[:6], x.ravel())
    other = to_nbx(np.zeros((1, 2), np.float64))
    assert t.resize_as_(other).shape == (1, 2) and t.dtype == nbx.float32
    with pytest.raises((RuntimeError, ValueError)):
        t.resize_(-1, 2)


def test_empty_strided_and_permuted():
    t = nbx.empty_strided((2, 3), (1, 2), dtype=nbx.float64)
    assert t.shape == (2, 3) and t.stride() == (1, 2) and t.dtype == nbx.float64
    p = nbx.empty_permuted((2, 3, 4), (0, 2, 1))
    assert p.stride() == (12, 1, 3) and p.dtype == nbx.float32
    n = to_nbx(np.zeros(3, np.int64)).new_empty_strided((2, 2), (2, 1))
    assert n.dtype == nbx.int64 and n.stride() == (2, 1)
    with pytest.raises(RuntimeError, match="mismatch in length"):
        nbx.empty_strided((2, 3), (1,))
    with pytest.raises(RuntimeError, match="permutation"):
        nbx.empty_permuted((2, 3), (0, 0))


# ---- the tensordot and embedding_bag fixes ---------------------------------------------------------------

def test_tensordot_sums_a_dim_contracted_against_size_one(r):
    a, b = f32(r, 1, 3, 2), f32(r, 3, 4, 2)
    got = nbx.tensordot(to_nbx(a), to_nbx(b), ([0, 2], [1, 2]))
    # a's size-1 dim broadcasts against b's size-4 dim 1: b is summed over it first
    expected = np.tensordot(a.astype(np.float64), b.astype(np.float64).sum(1, keepdims=True), ([0, 2], [1, 2]))
    close(got, expected)
    with pytest.raises(RuntimeError, match="contracted dimensions need to match"):
        nbx.tensordot(to_nbx(a), to_nbx(b), ([1], [1]))


def test_tensordot_out_is_written_as_aten_writes_out(r):
    a, b = f32(r, 2, 3), f32(r, 3, 4)
    out = nbx.empty(0)
    assert nbx.tensordot(to_nbx(a), to_nbx(b), 1, out=out) is out  # an empty out is resized
    # float32 products of 3 terms: float32 rounding, well inside close's tolerance
    close(out, a.astype(np.float64) @ b)
    with pytest.raises(RuntimeError, match="doesn't match the result's shape"):  # it was filled by broadcasting
        nbx.tensordot(to_nbx(a[0]), to_nbx(b), 1, out=nbx.empty(2, 4))
    with pytest.raises(RuntimeError, match="can't be cast"):
        nbx.tensordot(to_nbx(a), to_nbx(b), 1, out=nbx.empty(2, 4, dtype=nbx.int32))


def test_aten_tensordot_takes_its_two_dim_lists_as_the_dims_pair(r):
    """aten::tensordot(self, other, dims_self, dims_other) as an exported graph calls it: the lists were
    bound as ``dims`` and ``out`` (the second list silently taken for an output)."""
    from nbxtensor.graph import calling
    a, b = f32(r, 2, 3, 4), f32(r, 4, 3, 5)
    args, kwargs = calling.adapt("aten::tensordot.default", (to_nbx(a), to_nbx(b), [1, 2], [1, 0]), {})
    got = calling.resolve("aten::tensordot.default").impl(*args, **kwargs)
    # float32 sums of 12 products: float32 rounding, inside close's tolerance
    close(got, np.tensordot(a.astype(np.float64), b.astype(np.float64), ([1, 2], [1, 0])))


def test_embedding_bag_half_sums_round_once(r):
    weight = r.standard_normal((6, 4)).astype(ml_dtypes.bfloat16)
    indices = np.array([0, 2, 5, 1, 1, 3, 4])
    offsets = np.array([0, 3])
    per_sample = r.standard_normal(7).astype(ml_dtypes.bfloat16)
    got = nbx.nn.functional.embedding_bag(to_nbx(indices), to_nbx(weight), to_nbx(offsets), mode="sum",
                                          per_sample_weights=to_nbx(per_sample))
    rows = weight.astype(np.float64)[indices] * per_sample.astype(np.float64)[:, None]
    exact = np.stack([rows[:3].sum(0), rows[3:].sum(0)])
    # float32 accumulation of 4 products, then one bfloat16 rounding: the exact sum rounded, give or take
    # float32's error (far below bfloat16's half ulp) flipping a tie
    np.testing.assert_allclose(got.numpy().astype(np.float64), exact, rtol=2 ** -8, atol=1e-6)
    assert got.dtype == nbx.bfloat16


# ---- in a graph run the composites stay on the workspace their cost rules declare -------------------------

def test_composites_run_on_their_declared_workspace(tmp_path, monkeypatch, r, first_candidate):
    """On the device under test, each in its first tuning candidate (a GPU timing candidates inside a step
    would allocate for them)."""
    from nbxtensor import graph
    from nbxtensor.graph import arena

    from .test_graph_arena import _Builder
    monkeypatch.setattr(arena, "strict", True)
    g = _Builder({})
    x, b1, b2 = g.input("x", [3, 5]), g.input("b1", [4, 3, 2]), g.input("b2", [4, 2, 5])
    index = g.input("index", [4], "int64")
    added = g.op("aten::addbmm.default", [x, b1, b2], [3, 5], kwargs={"beta": 0.5})
    covariance = g.op("aten::cov.default", [x], [3, 3], kwargs={"correction": 0})
    correlation = g.op("aten::corrcoef.default", [x], [3, 3])
    reduced = g.op("aten::index_reduce.default", [x, 1, index, g.op("aten::slice.Tensor", [x, 1, 0, 4], [3, 4]),
                                                  "amax"], [3, 5], kwargs={"include_self": False})
    column = g.op("aten::select.int", [g.op("aten::select.int", [b2, 2, 0], [4, 2]), 1, 0], [4])
    put = g.op("aten::put.default", [x, index, column], [3, 5])
    summed = g.op("aten::sum_to_size.default", [b1, [3, 1]], [3, 1])
    padded = g.op("aten::constant_pad_nd.default", [x, [1, 1], 2.0], [3, 7])
    outputs = [added, covariance, correlation, reduced, put, summed, padded]
    model = graph.load(g.write(tmp_path, [x, b1, b2, index], outputs), device=TEST_DEVICE)
    xv, b1v, b2v = f32(r, 3, 5), f32(r, 4, 3, 2), f32(r, 4, 2, 5)
    iv = np.array([4, 0, 2, 1])
    got = model(xv, b1v, b2v, iv)
    close(got[0], 0.5 * xv + np.einsum("bij,bjk->ik", b1v.astype(np.float64), b2v))
    close(got[1], np.cov(xv.astype(np.float64), ddof=0))
    close(got[2], np.corrcoef(xv.astype(np.float64)))
    expected = xv.copy()
    expected[:, iv] = xv[:, :4]
    np.testing.assert_array_equal(got[3].numpy(), expected)
    expected = xv.copy()
    np.put(expected, iv, b2v[:, 0, 0])
    np.testing.assert_array_equal(got[4].numpy(), expected)
    close(got[5], b1v.astype(np.float64).sum(axis=(0, 2))[:, None])
    np.testing.assert_array_equal(got[6].numpy(), np.pad(xv, ((0, 0), (1, 1)), constant_values=2.0))


def test_cost_rules_work_from_metadata():
    from nbxtensor.ops.registry import TensorMeta, get
    x, coordinates = TensorMeta((4, 5), nbx.float32), TensorMeta((5,), nbx.float32)
    costs = [get("gradient").cost(x, spacing=[coordinates], dim=1, edge_order=2),
             get("histogramdd").cost(x, [2, 3, 1, 1, 2], weight=TensorMeta((4,), nbx.float32)),
             get("nonzero_static").cost(x, size=3), get("logspace").cost(0, 2, 5),
             get("unravel_index").cost(TensorMeta((3,), nbx.int64), (2, 2)),
             get("index_reduce_").cost(x, 0, TensorMeta((2,), nbx.int64), TensorMeta((2, 5), nbx.float32), "prod"),
             get("as_strided_scatter").cost(x, TensorMeta((2, 2), nbx.float32), (2, 2), (1, 2)),
             get("resize_").cost(x, 30), get("empty_permuted").cost((2, 3), (1, 0))]
    assert all(c.bytes_written >= 0 and c.workspace >= 0 for c in costs)
    assert costs[0].workspace > 0 and costs[1].bytes_written == 4 * 2 * 3 * 2 + 4 * (3 + 4 + 2 + 2 + 3)
