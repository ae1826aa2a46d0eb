"""Plans are kept per call layout and reused: a second call with other tensors of the same layout must
use those tensors (never the first call's), and a call whose operands needed copying when planned must
copy again. Each op runs twice on different data, from different places of one buffer."""
import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.ops import matmul, normalization, reductions
from nbxtensor.ops.plans import PlanCache, clear_all

from .conftest import to_nbx


def _two_inputs(rng, shape):
    """Two tensors of one layout at different offsets of one buffer, and their values."""
    size = int(np.prod(shape))
    flat = rng.standard_normal(3 * size).astype(np.float32)
    buffer = to_nbx(flat)
    first, second = buffer[:size].view(*shape), buffer[size + 7:2 * size + 7].view(*shape)
    return (first, flat[:size].reshape(shape)), (second, flat[size + 7:2 * size + 7].reshape(shape))


def _layer_norm(x, weight=None, bias=None, eps=1e-5):
    x = x.astype(np.float64)
    mean = x.mean(-1, keepdims=True)
    out = (x - mean) / np.sqrt(x.var(-1, keepdims=True) + eps)
    return out * (1.0 if weight is None else weight) + (0.0 if bias is None else bias)


OPS = {
    "linear 1 row": (lambda t, w: nbx.nn.functional.linear(t, w), lambda a, w: a @ w.T, (1, 24)),
    "linear 20 rows": (lambda t, w: nbx.nn.functional.linear(t, w), lambda a, w: a @ w.T, (20, 24)),
    "row sum": (lambda t, w: t.sum(-1), lambda a, w: a.sum(-1), (5, 24)),
    "argmax": (lambda t, w: t.argmax(0), lambda a, w: a.argmax(0), (5, 24)),
    "softmax": (lambda t, w: nbx.softmax(t, -1),
                lambda a, w: np.exp(a - a.max(-1, keepdims=True)) / np.exp(a - a.max(-1, keepdims=True)).sum(-1, keepdims=True),
                (5, 24)),
    "layer_norm": (lambda t, w: nbx.nn.functional.layer_norm(t, (24,)), lambda a, w: _layer_norm(a), (5, 24)),
    "layer_norm of a transposed view": (lambda t, w: nbx.nn.functional.layer_norm(t.T, (5,)),
                                        lambda a, w: _layer_norm(a.T), (5, 24)),
    "layer_norm, bias only": (lambda t, w: nbx.nn.functional.layer_norm(t, (24,), None, w[0]),
                              lambda a, w: _layer_norm(a, None, w[0]), (5, 24)),
    "cumsum": (lambda t, w: t.cumsum(-1), lambda a, w: np.cumsum(a, -1), (5, 24)),
    "clone": (lambda t, w: t.clone(), lambda a, w: a, (5, 24)),
    "clone of a transposed view": (lambda t, w: t.T.clone(), lambda a, w: a.T, (5, 24)),
    "conversion to float64": (lambda t, w: t.to(nbx.float64), lambda a, w: a, (5, 24)),
}


@pytest.mark.parametrize("name", list(OPS))
def test_a_reused_plan_reads_the_new_operands(rng, name):
    op, reference, shape = OPS[name]
    clear_all()
    weight_np = rng.standard_normal((16, shape[-1])).astype(np.float32)
    weight = to_nbx(weight_np)
    results = []
    for tensor, values in _two_inputs(rng, shape):
        got = op(tensor, weight).numpy()
        expected = reference(values.astype(np.float64), weight_np.astype(np.float64))
        # float32 results of reductions over at most 24 elements: a few ulps of the operands' scale
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
        results.append(got)
    assert not np.array_equal(results[0], results[1])


def test_one_plan_per_layout():
    clear_all()
    a, b = to_nbx(np.ones((4, 6), np.float32)), to_nbx(np.full((4, 6), 2.0, np.float32))
    for x in (a, b, a):
        x.sum(-1)
    assert len(reductions._reduce_plans) == 1
    a.T.sum(-1)
    assert len(reductions._reduce_plans) == 2
    for cache in (matmul._product_plans, normalization._softmax_plans, normalization._norm_plans):
        assert isinstance(cache, PlanCache)


def test_the_cache_starts_over_past_its_limit():
    cache = PlanCache(limit=2)
    made = []
    for key in ("a", "b", "c", "a"):
        cache.get(key, lambda: made.append(key) or key)
    assert made == ["a", "b", "c", "a"] and len(cache) == 2


def _attention(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    return (weights / weights.sum(-1, keepdims=True)) @ v


@pytest.mark.parametrize("queries", [1, 4])  # the decode path and the fused forward
def test_a_reused_attention_plan_reads_the_new_operands(rng, queries):
    clear_all()
    results = []
    for _ in range(2):
        q, k, v = (rng.standard_normal(shape).astype(np.float32)
                   for shape in ((2, 3, queries, 8), (2, 3, 5, 8), (2, 3, 5, 8)))
        got = nbx.nn.functional.scaled_dot_product_attention(to_nbx(q), to_nbx(k), to_nbx(v)).numpy()
        # float32 softmax over 5 keys and 8-long dot products
        np.testing.assert_allclose(got, _attention(q.astype(np.float64), k.astype(np.float64),
                                                   v.astype(np.float64)), rtol=1e-5, atol=1e-5)
        results.append(got)
    assert not np.array_equal(results[0], results[1])


@pytest.mark.parametrize("queries", [1, 4])
def test_a_reused_attention_plan_copies_the_new_operands(rng, monkeypatch, queries):
    """Rank-5 operands made by ``.transpose(0, 1)`` have leading dims no view merges: the plan copies them
    to its layout at each call. Made once for the layout, it reads each call's own operands."""
    from nbxtensor.ops import attention
    made = []
    plan = attention._plan_sdpa
    monkeypatch.setattr(attention, "_plan_sdpa", lambda *args: made.append(1) or plan(*args))
    clear_all()
    results = []
    for _ in range(3):
        q, k, v = (rng.standard_normal(shape).astype(np.float32)
                   for shape in ((3, 2, 2, queries, 8), (3, 2, 2, 5, 8), (3, 2, 2, 5, 8)))
        got = nbx.nn.functional.scaled_dot_product_attention(
            *(to_nbx(a).transpose(0, 1) for a in (q, k, v))).numpy()
        # float32 softmax over 5 keys and 8-long dot products
        np.testing.assert_allclose(got, _attention(*(a.astype(np.float64).swapaxes(0, 1) for a in (q, k, v))),
                                   rtol=1e-5, atol=1e-5)
        results.append(got)
    assert not np.array_equal(results[0], results[1])
    assert len(made) == 1


def test_a_reused_gather_plan_reads_the_new_indices_and_table(rng):
    clear_all()
    for _ in range(2):
        table = rng.standard_normal((10, 20)).astype(np.float32)
        ids = rng.integers(0, 10, (3, 4))
        np.testing.assert_array_equal(nbx.nn.functional.embedding(to_nbx(ids), to_nbx(table)).numpy(), table[ids])
        np.testing.assert_array_equal(to_nbx(table)[to_nbx(ids[0])].numpy(), table[ids[0]])


@pytest.mark.parametrize("op", [lambda t, d: t.sum(dim=d), lambda t, d: t.mean(dim=d), lambda t, d: t.cumsum(d),
                                lambda t, d: nbx.softmax(t, d)], ids=["sum", "mean", "cumsum", "softmax"])
def test_a_planned_reduction_refuses_what_planning_refuses(op):
    """Plans are found by the call's key, where ``True == 1``: a bool dim, refused when planned, stays refused
    after an int dim planned the same layout."""
    x = to_nbx(np.ones((2, 3), np.float32))
    op(x, 1)
    for dim in (True, [True]):
        with pytest.raises(TypeError, match="dim must be an integer"):
            op(x, dim)


def test_empty_copies_are_planned_as_nothing():
    empty, source = to_nbx(np.zeros((0, 3), np.float32)), to_nbx(np.zeros((0, 3), np.float32))
    for _ in range(2):  # planned, then served by the plan
        assert empty.fill_(1.0).shape == (0, 3)
        assert empty.copy_(source).shape == (0, 3)
        assert empty.clone().shape == (0, 3)


def test_a_float_dim_is_refused_by_name():
    x = to_nbx(np.ones((2, 3), np.float32))
    with pytest.raises(TypeError, match="sum: dim must be an integer or a sequence of integers, got 1.0"):
        x.sum(dim=1.0)
