"""What torch.export emits for ops nbxtensor implements reaches their implementations: layouts that a
memory format asks for, and the decomposed group and batch norms."""
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import nbxtensor as nbx  # noqa: E402
from nbxtensor import graph  # noqa: E402
from nbxtensor.export import export  # noqa: E402
from nbxtensor.graph import calling  # noqa: E402
from nbxtensor.ops import registry  # noqa: E402

from .conftest import cpu_kernels  # noqa: E402

pytestmark = cpu_kernels
torch.manual_seed(0)


class HeadsMerge(nn.Module):
    """Attention's head merge as transformers writes it: transpose, a contiguous clone, then a view."""

    def __init__(self):
        super().__init__()
        self.project = nn.Linear(8, 8)

    def forward(self, x):
        batch, seq, _ = x.shape
        heads = self.project(x).view(batch, seq, 2, 4).transpose(1, 2)
        return heads.clone(memory_format=torch.contiguous_format).view(batch, 2, seq * 4)


class Norms(nn.Module):
    """GroupNorm and BatchNorm1d over (N, C, L); linear layers stand in for convolutions."""

    def __init__(self):
        super().__init__()
        self.mix = nn.Linear(6, 6)
        self.group = nn.GroupNorm(2, 4)
        self.batch = nn.BatchNorm1d(4)
        self.out = nn.Linear(6, 3)
        with torch.no_grad():
            self.batch.running_mean.uniform_(-1, 1)
            self.batch.running_var.uniform_(0.5, 2)
            self.group.weight.uniform_(0.5, 1.5)
            self.group.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return self.out(self.batch(self.group(self.mix(x))))


class Activations(nn.Module):
    """The activations that torch's decompositions would spell as several full-size temporaries."""

    def forward(self, x):
        return F.silu(x) + F.hardswish(x) + F.hardsigmoid(x) + F.mish(x) + F.softplus(x, beta=2.0, threshold=3.0)


def _check(module, example, tmp_path, runs, dims):
    module.eval()
    export(module, (example,), tmp_path, dynamic_shapes=(dims,))
    model = graph.load(tmp_path)
    for shape in runs:
        x = torch.randn(*shape)
        with torch.no_grad():
            want = module(x).numpy()
        np.testing.assert_allclose(model(x.numpy()).numpy(), want, rtol=1e-5, atol=1e-5)
    return json.loads((tmp_path / "graph.json").read_text())


def test_contiguous_clone_keeps_its_memory_format_and_the_view_works(tmp_path):
    batch, seq = torch.export.Dim("batch", min=1, max=8), torch.export.Dim("seq", min=2, max=16)
    document = _check(HeadsMerge(), torch.randn(2, 5, 8), tmp_path, [(2, 5, 8), (3, 7, 8)], {0: batch, 1: seq})
    clones = [op for op in document["ops"] if op["op"] == "aten::clone.default"]
    assert clones and all(op["kwargs"] == {"memory_format": "contiguous_format"} for op in clones)


def test_group_norm_and_batch_norm_reach_the_registry(tmp_path):
    batch = torch.export.Dim("batch", min=1, max=8)
    document = _check(Norms(), torch.randn(2, 4, 6), tmp_path, [(2, 4, 6), (5, 4, 6)], {0: batch})
    names = {op["op"] for op in document["ops"]}
    assert {"aten::native_group_norm.default", "aten::_native_batch_norm_legit_no_training.default"} <= names


def test_native_group_norm_statistics_match_numpy():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    weight, bias = rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    op = registry.lookup("aten::native_group_norm.default")
    arguments = (nbx.tensor(x), nbx.tensor(weight), nbx.tensor(bias), 3, 4, 5, 2, 1e-5)
    out, mean, rstd = op.impl(*arguments)
    assert [m.shape for m in op.meta(*arguments)] == [(3, 4, 5), (3, 2), (3, 2)]
    groups = x.astype(np.float64).reshape(3, 2, 10)
    want_mean, want_rstd = groups.mean(-1), 1 / np.sqrt(groups.var(-1) + 1e-5)
    normed = ((groups - want_mean[..., None]) * want_rstd[..., None]).reshape(3, 4, 5)
    np.testing.assert_allclose(out.numpy(), normed * weight[:, None] + bias[:, None], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(mean.numpy(), want_mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rstd.numpy(), want_rstd, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("aten_name", ["aten::batch_norm.default",
                                       "aten::_native_batch_norm_legit_no_training.default"])
def test_aten_batch_norm_arguments_in_schema_order(aten_name):
    """ATen's batch norms take weight and bias before the running statistics (torch's Python one after)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    weight, bias, mean = (rng.standard_normal(3).astype(np.float32) for _ in range(3))
    var = rng.uniform(0.5, 2, 3).astype(np.float32)
    tensors = [nbx.tensor(a) for a in (x, weight, bias, mean, var)]
    schema_tail = (False, 0.1, 1e-5, True) if aten_name == "aten::batch_norm.default" else (0.1, 1e-5)
    args, kwargs = calling.adapt(aten_name, (*tensors, *schema_tail), {})
    result = registry.lookup(aten_name).impl(*args, **kwargs)
    out = result[0] if isinstance(result, tuple) else result
    c = (slice(None), None)
    want = (x - mean[c]) / np.sqrt(var[c].astype(np.float64) + 1e-5) * weight[c] + bias[c]
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)


def test_activations_stay_whole(tmp_path):
    batch = torch.export.Dim("batch", min=1, max=8)
    document = _check(Activations(), torch.randn(2, 6) * 4, tmp_path, [(2, 6), (5, 6)], {0: batch})
    names = [op["op"] for op in document["ops"]]
    for whole in ("silu", "hardswish", "hardsigmoid", "mish", "softplus"):
        assert f"aten::{whole}.default" in names
    assert "aten::sigmoid.default" not in names and "aten::_to_copy.default" not in names
