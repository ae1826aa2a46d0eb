"""Convolution modules exported by torch.export reach the registry's ops and run in our graph runtime,
matching torch (an oracle only: skipped without torch)."""
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402

import nbxtensor.nn.functional as F  # noqa: E402
from nbxtensor import graph  # noqa: E402
from nbxtensor.export import export  # noqa: E402

from .conftest import cpu_kernels  # noqa: E402

pytestmark = cpu_kernels
torch.manual_seed(0)


class TinyConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, stride=2, padding=1)
        self.depthwise = nn.Conv2d(4, 4, 3, padding=1, groups=4, bias=False)
        self.up = nn.ConvTranspose2d(4, 2, 2, stride=2)
        self.line = nn.Conv1d(2, 3, 3, padding=1)

    def forward(self, x):
        y = self.up(torch.relu(self.depthwise(self.stem(x))))
        return self.line(y.flatten(2))


def test_tiny_conv_model_exports_and_matches_torch(tmp_path):
    module = TinyConvNet().eval()
    x = torch.randn(2, 3, 6, 5)
    export(module, (x,), tmp_path)
    names = {op["op"] for op in json.loads((tmp_path / "graph.json").read_text())["ops"]}
    assert "aten::convolution.default" in names or "aten::conv2d.default" in names
    with torch.no_grad():
        want = module(x).numpy()
    np.testing.assert_allclose(graph.load(tmp_path)(x.numpy()).numpy(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kwargs", [dict(stride=2, padding=1, dilation=2, groups=2), dict(padding="same")])
def test_functional_matches_torch(kwargs):
    x, w, b = torch.randn(1, 4, 7, 6), torch.randn(6, 2 if kwargs.get("groups") else 4, 3, 3), torch.randn(6)
    import nbxtensor as nbx
    got = F.conv2d(nbx.tensor(x.numpy()), nbx.tensor(w.numpy()), nbx.tensor(b.numpy()), **kwargs).numpy()
    np.testing.assert_allclose(got, torch.nn.functional.conv2d(x, w, b, **kwargs).numpy(), rtol=1e-5, atol=1e-5)
