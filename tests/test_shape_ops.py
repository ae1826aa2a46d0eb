"""flip, roll, repeat, tile, repeat_interleave, tril/triu, diag, diagonal, diag_embed, pad, hstack,
vstack, meshgrid and one_hot against NumPy, on strided inputs and several dtypes."""
import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.ops import registry
from tests.conftest import to_nbx

pad = registry.get("pad")
one_hot = registry.get("one_hot")


def strided(a):
    """A tensor with ``a``'s values whose layout is transposed (not contiguous)."""
    return to_nbx(np.ascontiguousarray(np.swapaxes(a, 0, -1))).transpose(0, -1)


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_, np.float16, np.complex64], ids=lambda d: np.dtype(d).name)
def test_flip_roll_repeat_tile(dtype):
    a = (np.arange(24).reshape(2, 3, 4) % 5).astype(dtype)
    x = strided(a)
    assert np.array_equal(nbx.flip(x, [0, 2]).numpy(), np.flip(a, (0, 2)))
    assert np.array_equal(x.fliplr().numpy(), np.flip(a, 1)) and np.array_equal(nbx.flipud(x).numpy(), np.flip(a, 0))
    assert np.array_equal(nbx.roll(x, [1, -5, 9], [1, 2, 1]).numpy(), np.roll(a, (1, -5, 9), (1, 2, 1)))
    assert np.array_equal(nbx.roll(x, 7).numpy(), np.roll(a, 7))
    assert np.array_equal(x.repeat(2, 1, 1, 3).numpy(), np.tile(a, (2, 1, 1, 3)))
    assert np.array_equal(nbx.tile(x, (2, 1)).numpy(), np.tile(a, (2, 1)))
    assert tuple(x.repeat(1, 0, 1).shape) == (2, 0, 4)


def test_repeat_interleave_forms():
    a = np.arange(6.0).reshape(2, 3)
    x = strided(a)
    assert np.array_equal(nbx.repeat_interleave(x, 2).numpy(), np.repeat(a, 2))
    assert np.array_equal(x.repeat_interleave(3, dim=0).numpy(), np.repeat(a, 3, 0))
    counts = np.array([2, 0, 1])
    assert np.array_equal(nbx.repeat_interleave(x, to_nbx(counts), dim=1).numpy(), np.repeat(a, counts, 1))
    assert nbx.repeat_interleave(to_nbx(counts)).tolist() == [0, 0, 2]


def test_repeat_interleave_counts_place_positions_on_the_device(rng):
    # zero counts first, last and in a run, among random ones; the positions come from the counts'
    # running totals (cumsum, then searchsorted), so every count shape is worth one case
    counts = np.array([0, 3, 0, 0, 1, 2, 0], np.int64)
    assert nbx.repeat_interleave(to_nbx(counts)).tolist() == np.repeat(np.arange(7), counts).tolist()
    counts = rng.integers(0, 4, 40).astype(np.int32)
    assert nbx.repeat_interleave(to_nbx(counts)).tolist() == np.repeat(np.arange(40), counts).tolist()
    a = rng.standard_normal((3, 40)).astype(np.float32)
    got = nbx.repeat_interleave(to_nbx(a), [int(c) for c in counts], dim=1, output_size=int(counts.sum()))
    assert np.array_equal(got.numpy(), np.repeat(a, counts, 1))
    assert nbx.repeat_interleave(to_nbx(np.zeros(0, np.int64))).tolist() == []
    with pytest.raises(RuntimeError, match="repeats must be non-negative"):
        nbx.repeat_interleave(to_nbx(np.array([1, -1])))
    with pytest.raises(RuntimeError, match="repeats must be a 0-d or 1-d int32 or int64 tensor, got a 1-d float32"):
        nbx.repeat_interleave(to_nbx(a), to_nbx(np.ones(40, np.float32)), dim=1)


@pytest.mark.parametrize("diagonal", [-2, 0, 1, 5])
def test_triangles_and_diagonals(diagonal):
    a = np.arange(2 * 4 * 5, dtype=np.float32).reshape(2, 4, 5) + 1
    x = strided(a)
    assert np.array_equal(nbx.tril(x, diagonal).numpy(), np.tril(a, diagonal))
    assert np.array_equal(x.triu(diagonal).numpy(), np.triu(a, diagonal))
    assert np.array_equal(nbx.diagonal(x, diagonal, 1, 2).numpy(), np.diagonal(a, diagonal, 1, 2))
    assert np.array_equal(x.diagonal(diagonal, -1, 0).numpy(), np.diagonal(a, diagonal, -1, 0))
    assert np.array_equal(nbx.diag(x[1], diagonal).numpy(), np.diag(a[1], diagonal))
    assert np.array_equal(nbx.diag(x[0, 0], diagonal).numpy(), np.diag(a[0, 0], diagonal))
    embedded = nbx.diag_embed(x, diagonal, 0, 2).numpy()
    assert embedded.shape == (5 + abs(diagonal), 2, 5 + abs(diagonal), 4)
    for i in range(2):
        for j in range(4):
            assert np.array_equal(embedded[:, i, :, j], np.diag(a[i, j], diagonal))
    complex_tri = nbx.tril(to_nbx(a[0] + 1j * a[0]), diagonal).numpy()
    assert np.array_equal(complex_tri, np.tril(a[0] + 1j * a[0], diagonal))


def test_diagonal_is_a_view():
    x = to_nbx(np.zeros((3, 3)))
    x.diagonal().fill_(1.0)
    assert np.array_equal(x.numpy(), np.eye(3))


@pytest.mark.parametrize("mode,numpy_mode", [("reflect", "reflect"), ("replicate", "edge"), ("circular", "wrap")])
def test_pad_modes(mode, numpy_mode):
    a = np.arange(2 * 3 * 5, dtype=np.float64).reshape(2, 3, 5)
    x = strided(a)
    got = pad(x, (2, 1, 1, 2), mode=mode).numpy()
    assert np.array_equal(got, np.pad(a, ((0, 0), (1, 2), (2, 1)), mode=numpy_mode))


def test_pad_constant_with_value_and_cropping():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    x = strided(a)
    assert np.array_equal(pad(x, (1, 2, 0, 1), value=-1).numpy(), np.pad(a, ((0, 1), (1, 2)), constant_values=-1))
    assert np.array_equal(pad(x, (-1, 2, 1, -2)).numpy(), np.pad(a[:1, 1:], ((1, 0), (0, 2))))
    with pytest.raises(RuntimeError):
        pad(x, (4, 0), mode="reflect")
    with pytest.raises(RuntimeError):
        pad(x, (1,))


def test_hstack_vstack_meshgrid_one_hot():
    a, b = np.arange(3.0), np.arange(3.0, 6.0)
    assert np.array_equal(nbx.hstack([to_nbx(a), to_nbx(b)]).numpy(), np.hstack([a, b]))
    assert np.array_equal(nbx.vstack([to_nbx(a), to_nbx(b)]).numpy(), np.vstack([a, b]))
    m = np.arange(6.0).reshape(2, 3)
    assert np.array_equal(nbx.hstack([to_nbx(m), to_nbx(m)]).numpy(), np.hstack([m, m]))
    for indexing in ("ij", "xy"):
        grids = nbx.meshgrid(to_nbx(a), to_nbx(np.arange(2.0)), to_nbx(np.arange(4.0)), indexing=indexing)
        expected = np.meshgrid(a, np.arange(2.0), np.arange(4.0), indexing=indexing)
        for got, want in zip(grids, expected):
            assert np.array_equal(got.numpy(), want)
    labels = np.array([[0, 3], [2, 2]])
    assert np.array_equal(one_hot(to_nbx(labels)).numpy(), np.eye(4, dtype=np.int64)[labels])
    assert np.array_equal(one_hot(to_nbx(labels), 6).numpy(), np.eye(6, dtype=np.int64)[labels])
    with pytest.raises(IndexError, match="one_hot"):
        one_hot(to_nbx(labels), 3).numpy()


def test_functional_names_reach_pad_one_hot_and_embedding():
    """torch.nn.functional's pad, one_hot and embedding (input first) are reachable under the same names."""
    F = nbx.nn.functional
    x = to_nbx(np.arange(6, dtype=np.float32).reshape(2, 3))
    np.testing.assert_array_equal(F.pad(x, (1, 0), value=-1.0).numpy(), np.pad(np.arange(6.0).reshape(2, 3),
                                                                               ((0, 0), (1, 0)), constant_values=-1))
    np.testing.assert_array_equal(F.one_hot(to_nbx(np.array([2, 0])), 3).numpy(), [[0, 0, 1], [1, 0, 0]])
    np.testing.assert_array_equal(F.embedding(to_nbx(np.array([1, 0])), x).numpy(), [[3, 4, 5], [0, 1, 2]])


@pytest.mark.parametrize("args, index", [((1, 1, 4), np.s_[:, 1:4]), ((0, None, None, 2), np.s_[::2]),
                                         ((1, -3, None), np.s_[:, -3:]), ((), np.s_[:])])
def test_slice_scatter_writes_src_over_a_copy(args, index):
    a = np.arange(4 * 5, dtype=np.float32).reshape(4, 5)
    src = -np.ones_like(a[index])
    x = strided(a)
    got = nbx.slice_scatter(x, to_nbx(src), *args)
    want = a.copy()
    want[index] = src
    np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_array_equal(x.numpy(), a)  # the input is left as it was


def test_select_scatter_and_a_wrong_src_shape():
    a = np.arange(12, dtype=np.int64).reshape(3, 4)
    got = nbx.select_scatter(to_nbx(a), to_nbx(np.array([7, 8, 9])), 1, 2)
    want = a.copy()
    want[:, 2] = [7, 8, 9]
    np.testing.assert_array_equal(got.numpy(), want)
    with pytest.raises(RuntimeError, match="src to have a size equal to the slice"):
        nbx.slice_scatter(to_nbx(a), to_nbx(np.zeros((3, 2), np.int64)), 1, 0, 3)


@pytest.mark.parametrize("mode,numpy_mode", [("reflect", "reflect"), ("replicate", "edge"), ("circular", "wrap")])
def test_pad_modes_over_three_spatial_dims(mode, numpy_mode):
    a = np.arange(1 * 2 * 3 * 4 * 5, dtype=np.float32).reshape(1, 2, 3, 4, 5)
    got = pad(to_nbx(a), (1, 2, 2, 1, 1, 1), mode=mode).numpy()
    assert np.array_equal(got, np.pad(a, ((0, 0), (0, 0), (1, 1), (2, 1), (1, 2)), mode=numpy_mode))
