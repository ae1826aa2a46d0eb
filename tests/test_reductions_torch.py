"""Reductions, scans, softmax and norms against PyTorch (CPU) as an oracle: dtypes, index choices
and special values must agree exactly; float values within float32 accumulation error."""
import numpy as np
import pytest

import nbxtensor as nbx

from .conftest import to_nbx

torch = pytest.importorskip("torch")
TF = torch.nn.functional
F = nbx.nn.functional


def both(a):
    return to_nbx(a), torch.from_numpy(np.ascontiguousarray(a))


def same(ours, theirs, rtol=1e-5, atol=1e-6):
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_allclose(ours.numpy().astype(np.float64), theirs.double().numpy(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8, np.bool_])
def test_dtypes_and_values_match(rng, dtype):
    a = (rng.standard_normal((3, 4, 5)) * 3).astype(dtype)
    x, t = both(a)
    for name in ("sum", "prod", "amax", "amin", "count_nonzero"):
        same(getattr(x, name)(1), getattr(t, name)(1))
    same(x.any(2), t.any(2))
    same(x.all(0, keepdim=True), t.all(0, keepdim=True))
    if dtype == np.bool_:
        with pytest.raises(RuntimeError, match="does not support bool"):
            x.argmax(1)
    else:
        same(x.argmax(1), t.argmax(1))
        same(x.argmin(), t.argmin())
    same(x.cumsum(2), t.cumsum(2))
    if dtype == np.float32:
        same(x.logsumexp((0, 2)), t.logsumexp((0, 2)))
        same(x.var(1), t.var(1), rtol=1e-4)
        same(x.std(2, correction=0, keepdim=True), t.std(2, correction=0, keepdim=True), rtol=1e-4)
        same(nbx.linalg.vector_norm(x, 3, (0, 1)), torch.linalg.vector_norm(t, 3, (0, 1)))
        same(x.logcumsumexp(1), t.logcumsumexp(1))


def test_ties_and_nan_indices_match():
    a = np.array([[2, 7, 7, np.nan, 1, np.nan], [5, 5, 1, 1, 5, 1], [0, -0.0, 0, 3, 3, -1]], np.float32)
    x, t = both(a)
    for dim in (0, 1):
        assert x.max(dim).indices.tolist() == t.max(dim).indices.tolist()
        assert x.min(dim).indices.tolist() == t.min(dim).indices.tolist()
        assert x.argmax(dim).tolist() == t.argmax(dim).tolist()
        assert x.cummax(dim).indices.tolist() == t.cummax(dim).indices.tolist()
        assert x.cummin(dim).indices.tolist() == t.cummin(dim).indices.tolist()


def test_softmax_and_norms_match(rng):
    a = (rng.standard_normal((4, 3, 24)) * 3).astype(np.float32)
    a[0, 0] = -np.inf
    x, t = both(a)
    np.testing.assert_array_equal(np.isnan(F.softmax(x, -1).numpy()), np.isnan(TF.softmax(t, -1).numpy()))
    same(F.softmax(x, 1), TF.softmax(t, 1))
    same(F.log_softmax(x, 0), TF.log_softmax(t, 0), atol=1e-5)
    w = rng.standard_normal(24).astype(np.float32)
    xw, tw = both(w)
    same(F.layer_norm(x, (24,), xw, xw), TF.layer_norm(t, (24,), tw, tw), atol=1e-5)
    same(F.rms_norm(x[1:], (24,), xw), TF.rms_norm(t[1:], (24,), tw), atol=1e-5)
    g = rng.standard_normal(3).astype(np.float32)
    xg, tg = both(g)
    same(F.group_norm(x[1:], 3, xg, xg), TF.group_norm(t[1:], 3, tg, tg), atol=1e-5)
