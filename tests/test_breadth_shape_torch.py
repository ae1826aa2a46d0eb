"""Shape and creation breadth (issue #29) against torch as an oracle: exact (integer data)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import nbxtensor as nbx  # noqa: E402
from tests.conftest import to_nbx  # noqa: E402


def same(ours, theirs):
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    assert tuple(ours.shape) == tuple(theirs.shape)


def pieces(ours, theirs):
    assert len(ours) == len(theirs)
    for o, t in zip(ours, theirs):
        same(o, t)


def test_against_torch():
    rng = np.random.default_rng(29)
    x = rng.integers(-9, 9, (3, 4, 6))
    a, t = to_nbx(x), torch.from_numpy(x)
    for arg in (2, 4, [1, 5], [5, 1, -1], [0, 0]):
        pieces(nbx.tensor_split(a, arg, 2), torch.tensor_split(t, arg, 2))
    pieces(nbx.hsplit(a, [1, 3]), torch.hsplit(t, [1, 3]))
    pieces(nbx.dsplit(a, 3), torch.dsplit(t, 3))
    same(nbx.cross(a[:, :3], a[:, 1:4], dim=1), torch.cross(t[:, :3], t[:, 1:4], dim=1))
    same(nbx.cross(a[:, :3], a[:, 1:4]), torch.cross(t[:, :3], t[:, 1:4], dim=0))
    for n in (1, 2, 3):
        same(nbx.diff(a, n, 1), torch.diff(t, n, 1))
    same(nbx.isin(a, a[0, 0]), torch.isin(t, t[0, 0]))
    v, tv = a[0, 0], t[0, 0]
    same(nbx.combinations(v, 3, True), torch.combinations(tv, 3, True))
    same(nbx.cartesian_prod(v, v[:2]), torch.cartesian_prod(tv, tv[:2]))
    same(nbx.block_diag(a[0], v, a[1, 0, 0]), torch.block_diag(t[0], tv, t[1, 0, 0]))
    same(nbx.kron(a[0], a[1, :2]), torch.kron(t[0], t[1, :2]))
    same(nbx.tensordot(a, a[0], ([1, 2], [0, 1])), torch.tensordot(t, t[0], ([1, 2], [0, 1])))
    same(nbx.tril_indices(4, 3, -1), torch.tril_indices(4, 3, -1))
    same(nbx.triu_indices(3, 5, 1), torch.triu_indices(3, 5, 1))
    same(nbx.diagonal_scatter(a, a[0, :, :3], 1, 0, 2), torch.diagonal_scatter(t, t[0, :, :3], 1, 0, 2))
