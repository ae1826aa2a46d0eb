"""The fusion pass on hand-written graphs, loaded on the test device: a matched RMSNorm chain becomes one step
computing the same values; a chain whose intermediate is read elsewhere, or is a graph output, stays as it is."""
import numpy as np

from nbxtensor import graph

from .conftest import TEST_DEVICE
from .test_graph_arena import _Builder


def _rms_chain(g, x, weight, extra_output=False):
    square = g.op("aten::pow.Tensor_Scalar", [x, 2], ["s", 8])
    mean = g.op("aten::mean.dim", [square, [-1], True], ["s", 1])
    shifted = g.op("aten::add.Tensor", [mean, 1e-6], ["s", 1])
    rstd = g.op("aten::rsqrt.default", [shifted], ["s", 1])
    normed = g.op("aten::mul.Tensor", [x, rstd], ["s", 8])
    return g.op("aten::mul.Tensor", [weight, normed], ["s", 8]), rstd


def _reference(x, w):
    x = x.astype(np.float64)
    return w * x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)


def test_an_rms_norm_chain_becomes_one_step(tmp_path):
    rng = np.random.default_rng(0)
    w = rng.standard_normal(8).astype(np.float32)
    g = _Builder({"s": {"min": 1, "max": 8, "trace": 3}})
    x = g.input("x", ["s", 8])
    out, _ = _rms_chain(g, x, g.param("w", w))
    directory = g.write(tmp_path, [x], [out])
    fused, unfused = graph.load(directory, device=TEST_DEVICE), graph.load(directory, device=TEST_DEVICE, fuse=False)
    assert fused.fusions == {"rms_norm": 1} and [s.aten for s in fused.steps] == ["nbx::rms_norm"]
    assert len(unfused.steps) == 6 and unfused.fusions == {}
    x_value = rng.standard_normal((3, 8)).astype(np.float32)
    # float32: sums of 8 squares and one division each way, a few eps32 apart
    np.testing.assert_allclose(fused(x_value).numpy(), _reference(x_value, w), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(unfused(x_value).numpy(), _reference(x_value, w), rtol=1e-5, atol=1e-6)


def test_a_chain_whose_intermediate_is_read_elsewhere_stays(tmp_path):
    w = np.ones(8, np.float32)
    g = _Builder({"s": {"min": 1, "max": 8, "trace": 3}})
    x = g.input("x", ["s", 8])
    out, rstd = _rms_chain(g, x, g.param("w", w))
    also = g.op("aten::neg.default", [rstd], ["s", 1])
    model = graph.load(g.write(tmp_path / "read", [x], [out, also]), device=TEST_DEVICE)
    assert model.fusions == {} and len(model.steps) == 7
    g = _Builder({"s": {"min": 1, "max": 8, "trace": 3}})
    x = g.input("x", ["s", 8])
    out, rstd = _rms_chain(g, x, g.param("w", w))
    model = graph.load(g.write(tmp_path / "output", [x], [out, rstd]), device=TEST_DEVICE)
    assert model.fusions == {}


def test_silu_times_up_becomes_act_and_mul(tmp_path):
    """SwiGLU's silu(gate) * up is one act_and_mul step giving the very bits of the two ops."""
    g = _Builder({"s": {"min": 1, "max": 8, "trace": 3}})
    gate, up = g.input("gate", ["s", 8]), g.input("up", ["s", 8])
    act = g.op("aten::silu.default", [gate], ["s", 8])
    out = g.op("aten::mul.Tensor", [up, act], ["s", 8])  # either order: mul commutes
    directory = g.write(tmp_path, [gate, up], [out])
    fused, unfused = graph.load(directory, device=TEST_DEVICE), graph.load(directory, device=TEST_DEVICE, fuse=False)
    assert fused.fusions == {"act_and_mul": 1} and [s.aten for s in fused.steps] == ["nbx::act_and_mul"]
    rng = np.random.default_rng(1)
    values = [rng.standard_normal((3, 8)).astype(np.float32) for _ in range(2)]
    assert fused(*values).numpy().tobytes() == unfused(*values).numpy().tobytes()
    # float32 activation and product: a few eps32 from float64
    g64, u64 = (v.astype(np.float64) for v in values)
    np.testing.assert_allclose(fused(*values).numpy(), g64 / (1 + np.exp(-g64)) * u64, rtol=1e-6, atol=1e-6)


def _repeat_kv(g, kv, heads, groups, length, dim):
    unsqueezed = g.op("aten::unsqueeze.default", [kv, 2], [1, heads, 1, length, dim])
    expanded = g.op("aten::expand.default", [unsqueezed, [1, heads, groups, length, dim]],
                    [1, heads, groups, length, dim])
    cloned = g.op("aten::clone.default", [expanded], [1, heads, groups, length, dim],
                  kwargs={"memory_format": "contiguous_format"})
    return g.op("aten::view.default", [cloned, [1, heads * groups, length, dim]], [1, heads * groups, length, dim])


def test_repeated_keys_and_values_become_grouped_attention(tmp_path):
    """transformers' repeat_kv (unsqueeze, expand, clone, view) of keys and values before sdpa is dropped for
    sdpa(enable_gqa=True) over them as they are: no copies, the same attention."""
    heads, groups, length, dim = 2, 3, 5, 8
    g = _Builder({})
    q = g.input("q", [1, heads * groups, length, dim])
    k, v = g.input("k", [1, heads, length, dim]), g.input("v", [1, heads, length, dim])
    out = g.op("aten::scaled_dot_product_attention.default",
               [q, _repeat_kv(g, k, heads, groups, length, dim), _repeat_kv(g, v, heads, groups, length, dim)],
               [1, heads * groups, length, dim], kwargs={"is_causal": True, "scale": 0.5})
    directory = g.write(tmp_path, [q, k, v], [out])
    fused, unfused = graph.load(directory, device=TEST_DEVICE), graph.load(directory, device=TEST_DEVICE, fuse=False)
    assert fused.fusions == {"grouped_attention": 1} and len(fused.steps) == 1
    assert fused.steps[0].kwargs == {"is_causal": True, "scale": 0.5, "enable_gqa": True}
    rng = np.random.default_rng(2)
    values = [rng.standard_normal(shape).astype(np.float32)
              for shape in ((1, heads * groups, length, dim), (1, heads, length, dim), (1, heads, length, dim))]
    qv, kv, vv = (x.astype(np.float64) for x in values)
    keys, vals = np.repeat(kv, groups, axis=1), np.repeat(vv, groups, axis=1)
    scores = qv @ keys.transpose(0, 1, 3, 2) * 0.5 + np.triu(np.full((length, length), -np.inf), 1)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    expected = weights / weights.sum(-1, keepdims=True) @ vals
    # float32 softmax over 5 keys and an 8-term product: far below 1e-5
    for model in (fused, unfused):
        np.testing.assert_allclose(model(*values).numpy(), expected, rtol=1e-5, atol=1e-6)
