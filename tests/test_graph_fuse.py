"""The fusion pass on hand-written graphs: a matched RMSNorm chain becomes one step computing the same
values; a chain whose intermediate is read elsewhere, or is a graph output, stays as it is."""
import numpy as np

from nbxtensor import graph

from .conftest import TEST_DEVICE, cpu_kernels
from .test_graph_arena import _Builder

pytestmark = cpu_kernels


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
