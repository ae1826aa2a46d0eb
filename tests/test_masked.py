"""nbx.masked (torch.masked's reductions and normalizations) against NumPy float64 references.

Masked-out elements take the reduction's identity, so each reference is the plain NumPy reduction of
``np.where(mask, x, identity)``; mean, var and std divide by the kept count. Tolerances: sums, products
and norms of at most 24 float32 elements round a few ulps (rtol 1e-6, atol 1e-6 where a sum cancels);
exp/log (logsumexp, softmax, logaddexp) add a few ulps more (rtol 1e-5); var/std take two passes with a
subtraction (rtol 1e-5). Extremes, indices, medians and integer results are exact."""
import math

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.ops import registry
from tests.conftest import TEST_DEVICE, to_nbx


@pytest.fixture
def data():
    rng = np.random.default_rng(2929)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    mask = rng.random((3, 4)) > 0.4
    mask[1] = False  # a fully masked-out row
    mask[0, 0] = mask[2, 3] = True
    return x, mask


def close(actual, expected, rtol=1e-6, atol=1e-6):
    np.testing.assert_allclose(np.asarray(actual.numpy(), np.float64), expected, rtol=rtol, atol=atol)


def filled(x, mask, identity):
    return np.where(mask, x.astype(np.float64), identity)


REDUCTIONS = [
    # name, NumPy reduction, identity, rtol
    ("sum", np.sum, 0.0, 1e-6),
    ("prod", np.prod, 1.0, 1e-6),
    ("amax", np.max, -np.inf, 0),
    ("amin", np.min, np.inf, 0),
    ("logsumexp", lambda a, axis, keepdims: np.log(np.sum(np.exp(a), axis=axis, keepdims=keepdims)), -np.inf, 1e-5),
]


@pytest.mark.parametrize("name,reduce,identity,rtol", REDUCTIONS, ids=[r[0] for r in REDUCTIONS])
def test_reductions(data, name, reduce, identity, rtol):
    x, mask = data
    op = getattr(nbx.masked, name)
    with np.errstate(divide="ignore"):
        for dim, keepdim in ((1, False), (0, True), ((0, 1), False), (None, False)):
            axis = tuple(dim) if isinstance(dim, tuple) else dim
            expected = reduce(filled(x, mask, identity), axis=axis, keepdims=keepdim)
            got = op(to_nbx(x), dim, keepdim=keepdim, mask=to_nbx(mask))
            assert got.dtype == nbx.float32
            close(got, expected, rtol=rtol)
        # no mask: the plain reduction
        close(op(to_nbx(x), 1), reduce(x.astype(np.float64), axis=1, keepdims=False), rtol=rtol)
    # the fully masked-out row gives the identity (logsumexp: log 0)
    row = op(to_nbx(x), 1, mask=to_nbx(mask)).numpy()[1]
    assert row == identity


def test_broadcast_and_non_bool_masks(data):
    x, _ = data
    columns = np.array([True, False, True, False])
    expected = filled(x, np.broadcast_to(columns, x.shape), 0).sum(1)
    close(nbx.masked.sum(to_nbx(x), 1, mask=to_nbx(columns)), expected)
    close(nbx.masked.sum(to_nbx(x), 1, mask=to_nbx(columns[None, :])), expected)
    # a mask of another dtype counts its nonzero elements as kept
    close(nbx.masked.sum(to_nbx(x), 1, mask=to_nbx(columns.astype(np.int64) * 3)), expected)


def test_integer_inputs_and_dtype(data):
    x, mask = data
    ints = np.arange(-6, 6, dtype=np.int32).reshape(3, 4)
    total = nbx.masked.sum(to_nbx(ints), 1, mask=to_nbx(mask))
    # integers and bool sum and multiply in int64, as torch.sum does
    assert total.dtype == nbx.int64
    np.testing.assert_array_equal(total.numpy(), np.where(mask, ints, 0).sum(1))
    np.testing.assert_array_equal(nbx.masked.prod(to_nbx(ints), 0, mask=to_nbx(mask)).numpy(),
                                  np.where(mask, ints, 1).astype(np.int64).prod(0))
    # the integer extremes are the identities of amax and amin
    np.testing.assert_array_equal(nbx.masked.amax(to_nbx(ints), 1, mask=to_nbx(mask)).numpy(),
                                  np.where(mask, ints, np.iinfo(np.int32).min).max(1))
    np.testing.assert_array_equal(nbx.masked.amin(to_nbx(ints.astype(np.uint8) + 10), 1, mask=to_nbx(mask)).numpy(),
                                  np.where(mask, ints.astype(np.uint8) + 10, 255).min(1))
    assert nbx.masked.sum(to_nbx(x), 1, dtype=nbx.float64, mask=to_nbx(mask)).dtype == nbx.float64
    flags = x > 0
    np.testing.assert_array_equal(nbx.masked.sum(to_nbx(flags), 1, mask=to_nbx(mask)).numpy(), (flags & mask).sum(1))
    np.testing.assert_array_equal(nbx.masked.prod(to_nbx(flags), 1, mask=to_nbx(mask)).numpy(),
                                  (flags | ~mask).all(1).astype(np.int64))
    # dtype= converts the result of the others, which keep the input's dtype
    widest = nbx.masked.amax(to_nbx(x), 1, dtype=nbx.float64, mask=to_nbx(mask))
    assert widest.dtype == nbx.float64
    close(widest[[0, 2]], filled(x, mask, -np.inf).max(1)[[0, 2]], rtol=0)
    with pytest.raises(NotImplementedError, match="masked.amax: amax has no identity on bool"):
        nbx.masked.amax(to_nbx(mask), 1, mask=to_nbx(mask))


def test_argmax_argmin(data):
    x, mask = data
    for name, identity, pick in (("argmax", -np.inf, np.argmax), ("argmin", np.inf, np.argmin)):
        op = getattr(nbx.masked, name)
        got = op(to_nbx(x), 1, mask=to_nbx(mask))
        # torch.masked gives the indices in the input's dtype
        assert got.dtype == nbx.float32
        expected = pick(filled(x, mask, identity), 1)
        np.testing.assert_array_equal(got.numpy(), expected)
        assert got.numpy()[1] == 0  # a fully masked-out row: the first of equal identities
        flat = op(to_nbx(x), mask=to_nbx(mask), dtype=nbx.int64)
        assert flat.dtype == nbx.int64 and flat.item() == pick(filled(x, mask, identity))
        kept = op(to_nbx(x), 0, keepdim=True, mask=to_nbx(mask))
        assert tuple(kept.shape) == (1, 4)


def test_mean(data):
    x, mask = data
    with np.errstate(invalid="ignore"):
        expected = filled(x, mask, 0).sum(1) / mask.sum(1)
    got = nbx.masked.mean(to_nbx(x), 1, mask=to_nbx(mask))
    close(got, expected)
    assert np.isnan(got.numpy()[1])
    close(nbx.masked.mean(to_nbx(x), (0, 1), keepdim=True, mask=to_nbx(mask)),
          filled(x, mask, 0).sum(keepdims=True) / mask.sum())
    close(nbx.masked.mean(to_nbx(x), 0), x.astype(np.float64).mean(0))
    ints = np.arange(12).reshape(3, 4)
    assert nbx.masked.mean(to_nbx(ints), 1, dtype=nbx.float64).dtype == nbx.float64
    with pytest.raises(ValueError, match="floating point or complex dtype, got int64"):
        nbx.masked.mean(to_nbx(ints), 1)


@pytest.mark.parametrize("name", ["var", "std"])
def test_var_std(data, name):
    x, mask = data
    op = getattr(nbx.masked, name)

    def reference(correction, axis, keepdims=False):
        count = mask.sum(axis, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            centred = filled(x, mask, 0) - filled(x, mask, 0).sum(axis, keepdims=True) / count
            squares = np.where(mask, centred ** 2, 0).sum(axis, keepdims=keepdims)
            result = squares / np.maximum(count.reshape(squares.shape) - correction, 0)
        return np.sqrt(result) if name == "std" else result

    close(op(to_nbx(x), 1, mask=to_nbx(mask)), reference(1, 1), rtol=1e-5)
    close(op(to_nbx(x), 1, False, mask=to_nbx(mask)), reference(0, 1), rtol=1e-5)
    close(op(to_nbx(x), 0, correction=2, keepdim=True, mask=to_nbx(mask)), reference(2, 0, True), rtol=1e-5)
    close(op(to_nbx(x), None, mask=to_nbx(mask)), reference(1, None), rtol=1e-5)
    assert np.isnan(op(to_nbx(x), 1, mask=to_nbx(mask)).numpy()[1])
    plain = np.var(x.astype(np.float64), 1, ddof=1)
    close(op(to_nbx(x), 1), np.sqrt(plain) if name == "std" else plain, rtol=1e-5)
    # integers give float32
    ints = np.arange(12).reshape(3, 4)
    got = op(to_nbx(ints), 1, mask=to_nbx(mask))
    assert got.dtype == nbx.float32
    with pytest.raises(ValueError, match="either unbiased or correction"):
        op(to_nbx(x), 1, True, correction=1)


def test_median(data):
    x, mask = data
    got = nbx.masked.median(to_nbx(x), 1, mask=to_nbx(mask))
    for row in range(3):
        kept = np.sort(x[row][mask[row]])
        expected = kept[(kept.size - 1) // 2] if kept.size else np.nan
        np.testing.assert_array_equal(got.numpy()[row], expected)
    # NaN in the input is skipped too (nanmedian), and a float input ignores dtype=, as torch does
    with_nan = x.copy()
    with_nan[0, 0] = np.nan
    got = nbx.masked.median(to_nbx(with_nan), 1, dtype=nbx.float64)
    assert got.dtype == nbx.float32
    assert got.numpy()[0] == np.sort(with_nan[0, 1:])[1]
    ints = np.arange(12).reshape(3, 4)
    full = np.ones((3, 4), bool)
    np.testing.assert_array_equal(nbx.masked.median(to_nbx(ints), 0, keepdim=True, mask=to_nbx(full)).numpy(),
                                  [[4, 5, 6, 7]])
    with pytest.raises(ValueError, match="all masked out has no median in the integer result dtype int64"):
        nbx.masked.median(to_nbx(ints), 1, mask=to_nbx(mask))


def test_norm_and_normalize(data):
    x, mask = data
    for ord in (2.0, 1.0, 3.0, math.inf, 0):
        absolute = np.abs(filled(x, mask, 0))
        expected = {0: (absolute != 0).sum(1), math.inf: absolute.max(1)}.get(ord)
        if expected is None:
            expected = (absolute ** ord).sum(1) ** (1 / ord)
        close(nbx.masked.norm(to_nbx(x), ord, 1, mask=to_nbx(mask)), expected)
    # ord=-inf takes the smallest |x|: masked-out elements are inf
    got = nbx.masked.norm(to_nbx(x), -math.inf, 1, mask=to_nbx(mask))
    np.testing.assert_array_equal(got.numpy(), np.abs(filled(x, mask, np.inf)).min(1).astype(np.float32))
    with pytest.raises(TypeError, match="ord=-inf with a mask needs a floating-point input"):
        nbx.masked.norm(to_nbx(np.arange(4)), -math.inf, mask=to_nbx(np.ones(4, bool)))
    norms = np.sqrt((filled(x, mask, 0) ** 2).sum(1, keepdims=True))
    close(nbx.masked.normalize(to_nbx(x), 2.0, 1, mask=to_nbx(mask)), filled(x, mask, 0) / np.maximum(norms, 1e-12))
    # the fully masked-out row is 0 / eps
    assert (nbx.masked.normalize(to_nbx(x), 2.0, 1, mask=to_nbx(mask)).numpy()[1] == 0).all()


def _softmax(a, axis):
    with np.errstate(invalid="ignore"):
        shifted = np.exp(a - a.max(axis, keepdims=True))
        return shifted / shifted.sum(axis, keepdims=True)


def test_softmax_family(data):
    x, mask = data
    for dim in (0, 1):
        expected = _softmax(filled(x, mask, -np.inf), dim)
        close(nbx.masked.softmax(to_nbx(x), dim, mask=to_nbx(mask)), expected, rtol=1e-5)
        with np.errstate(divide="ignore"):
            close(nbx.masked.log_softmax(to_nbx(x), dim, mask=to_nbx(mask)), np.log(expected), rtol=1e-5)
        close(nbx.masked.softmin(to_nbx(x), dim, mask=to_nbx(mask)), _softmax(-filled(x, mask, np.inf), dim),
              rtol=1e-5)
    # a fully masked-out row is NaN, as in torch
    assert np.isnan(nbx.masked.softmax(to_nbx(x), 1, mask=to_nbx(mask)).numpy()[1]).all()
    wide = nbx.masked.softmax(to_nbx(x), 1, dtype=nbx.float64, mask=to_nbx(mask))
    assert wide.dtype == nbx.float64


def test_cumsum_cumprod(data):
    x, mask = data
    close(nbx.masked.cumsum(to_nbx(x), 1, mask=to_nbx(mask)), np.cumsum(filled(x, mask, 0), 1))
    close(nbx.masked.cumprod(to_nbx(x), -1, mask=to_nbx(mask)), np.cumprod(filled(x, mask, 1), 1))
    ints = np.arange(1, 13, dtype=np.int32).reshape(3, 4)
    # unlike torch.cumsum, torch.masked keeps the input's dtype unless told otherwise
    got = nbx.masked.cumsum(to_nbx(ints), 0, mask=to_nbx(mask))
    assert got.dtype == nbx.int32
    np.testing.assert_array_equal(got.numpy(), np.cumsum(np.where(mask, ints, 0), 0))
    assert nbx.masked.cumprod(to_nbx(ints), 0, dtype=nbx.int64).dtype == nbx.int64


def test_logaddexp(data):
    x, mask = data
    other = x[::-1].copy()
    other_mask = mask[:, ::-1].copy()
    got = nbx.masked.logaddexp(to_nbx(x), to_nbx(other), input_mask=to_nbx(mask), other_mask=to_nbx(other_mask))
    with np.errstate(divide="ignore"):
        expected = np.logaddexp(filled(x, mask, -np.inf), filled(other, other_mask, -np.inf))
    close(got, expected, rtol=1e-5)
    # a position both masks drop is -inf
    assert (got.numpy()[~mask & ~other_mask] == -np.inf).all()
    close(nbx.masked.logaddexp(to_nbx(x), to_nbx(other)), np.logaddexp(x.astype(np.float64), other), rtol=1e-5)


def test_empty_dims():
    empty = np.zeros((2, 0), np.float32)
    np.testing.assert_array_equal(nbx.masked.sum(to_nbx(empty), 1, mask=to_nbx(np.zeros((2, 0), bool))).numpy(), [0, 0])
    np.testing.assert_array_equal(nbx.masked.prod(to_nbx(empty), 1).numpy(), [1, 1])
    assert np.isnan(nbx.masked.mean(to_nbx(empty), 1).numpy()).all()
    assert tuple(nbx.masked.cumsum(to_nbx(empty), 1).shape) == (2, 0)
    with pytest.raises(IndexError, match="non-zero size"):
        nbx.masked.amax(to_nbx(empty), 1)


def test_scalar_inputs():
    scalar = to_nbx(np.float32(2.5))
    assert nbx.masked.sum(scalar, mask=to_nbx(np.array(False))).item() == 0
    assert nbx.masked.amax(scalar, 0, keepdim=True, mask=to_nbx(np.array(True))).item() == 2.5
    assert nbx.masked.argmax(scalar, mask=to_nbx(np.array(False))).item() == 0


def test_bad_masks_and_dims(data):
    x, mask = data
    with pytest.raises(IndexError, match="mask has 3 dims, more than the input's 2"):
        nbx.masked.sum(to_nbx(x), mask=to_nbx(mask[None]))
    with pytest.raises(RuntimeError, match=r"mask of shape \[3\] does not broadcast to the input's shape \[3, 4\]"):
        nbx.masked.amax(to_nbx(x), mask=to_nbx(np.ones(3, bool)))
    with pytest.raises(TypeError, match="masked.sum: mask must be a tensor, got list"):
        nbx.masked.sum(to_nbx(x), mask=[True])
    with pytest.raises(TypeError, match="masked.prod: a mask must be a tensor, got ndarray"):
        nbx.masked.prod(to_nbx(x), mask=mask)
    with pytest.raises(IndexError):
        nbx.masked.sum(to_nbx(x), 2, mask=to_nbx(mask))
    with pytest.raises(RuntimeError, match="appears multiple times"):
        nbx.masked.mean(to_nbx(x), (1, -1), mask=to_nbx(mask))
    with pytest.raises(RuntimeError, match="other_mask of shape"):
        nbx.masked.logaddexp(to_nbx(x), to_nbx(x), other_mask=to_nbx(np.ones(5, bool)))


# each op's arguments as (input, args, kwargs) for the meta and cost rules
CALLS = {
    "sum": ((1,), {"keepdim": True}), "prod": ((0,), {}), "amax": (((0, 1),), {}), "amin": ((), {}),
    "logsumexp": ((1,), {"dtype": nbx.float64}), "argmax": ((1,), {}), "argmin": ((), {"dtype": nbx.int64}),
    "cumsum": ((1,), {}), "cumprod": ((0,), {"dtype": nbx.float64}), "softmax": ((1,), {}),
    "log_softmax": ((0,), {}), "softmin": ((1,), {}), "mean": ((1,), {}), "median": ((0,), {"keepdim": True}),
    "norm": ((1.0, 1), {}), "normalize": ((2.0, 1), {}), "var": ((1,), {"correction": 0}), "std": ((), {}),
}


@pytest.mark.parametrize("name", sorted(CALLS) + ["logaddexp"])
def test_meta_and_cost_rules_match(data, name):
    x, mask = data
    op = registry.get(f"masked.{name}")
    if name == "logaddexp":
        args, kwargs, masks = (to_nbx(x),), {}, {"input_mask": to_nbx(mask), "other_mask": to_nbx(mask[0])}
    else:
        args, kwargs = CALLS[name]
        masks = {"mask": to_nbx(np.ones(4, bool))}
    out = op.impl(to_nbx(x), *args, **kwargs, **masks)
    metas = [registry.TensorMeta(tuple(a.shape), a.dtype) if isinstance(a, nbx.Tensor) else a for a in args]
    mask_metas = {key: registry.TensorMeta(tuple(m.shape), m.dtype) for key, m in masks.items()}
    meta = op.meta(registry.TensorMeta(x.shape, nbx.float32), *metas, **kwargs, **mask_metas)
    assert (tuple(out.shape), out.dtype) == (tuple(meta.shape), meta.dtype)
    cost = op.cost(registry.TensorMeta(x.shape, nbx.float32), *metas, **kwargs, **mask_metas)
    assert cost.bytes_written == out.numel() * out.dtype.itemsize and cost.bytes_read >= x.nbytes
    assert getattr(nbx.masked, name) is op.impl


# op, its arguments after the input, keywords, result shape (of a (3, 12) input)
GRAPH_CALLS = [
    ("sum", [1], {}, [3]), ("prod", [0], {"keepdim": True}, [1, 12]), ("amax", [1], {}, [3]), ("amin", [], {}, []),
    ("logsumexp", [1], {}, [3]), ("argmax", [1], {}, [3]), ("argmin", [], {}, []), ("mean", [1], {}, [3]),
    ("median", [1], {}, [3]), ("norm", [2.0, 1], {}, [3]), ("var", [1], {}, [3]),
    ("std", [0], {"keepdim": True}, [1, 12]), ("cumsum", [1], {}, [3, 12]), ("cumprod", [0], {}, [3, 12]),
    ("softmax", [1], {}, [3, 12]), ("log_softmax", [0], {}, [3, 12]), ("softmin", [1], {}, [3, 12]),
    ("normalize", [2.0, 1], {}, [3, 12]),
]


@pytest.mark.parametrize("name,args,kwargs,shape", GRAPH_CALLS, ids=[c[0] for c in GRAPH_CALLS])
def test_graph_runs_stay_on_declared_memory(tmp_path, monkeypatch, set_kernel_facts, name, args, kwargs, shape):
    # an int64 mask (converted to bool) and rows split into chunks take the most temporaries there are
    from nbxtensor import graph
    from nbxtensor.graph import arena

    from .test_graph_arena import _Builder
    monkeypatch.setattr(arena, "strict", True)
    set_kernel_facts(reduction_split_length=8, reduction_split_block=4, reduction_split_chunks=2)
    rng = np.random.default_rng(29)
    x_value = rng.standard_normal((3, 12)).astype(np.float32)
    mask_value = (rng.random((3, 12)) > 0.3).astype(np.int64)
    builder = _Builder({})
    x, mask = builder.input("x", [3, 12]), builder.input("mask", [3, 12], "int64")
    out = builder.op(f"nbx::masked_{name}", [x] + args, shape, "float32", {**kwargs, "mask": mask})
    model = graph.load(builder.write(str(tmp_path), [x, mask], [out]), device=TEST_DEVICE)
    got = model(x_value, mask_value)
    expected = getattr(nbx.masked, name)(to_nbx(x_value), *args, **kwargs, mask=to_nbx(mask_value))
    np.testing.assert_array_equal(got.numpy(), expected.numpy())
