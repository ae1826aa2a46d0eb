"""Memory formats against torch (an oracle only: skipped without torch): the strides every maker gives, the
formats convolution and pooling give their outputs, and a channels-last model exported and run."""
import itertools
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402

import nbxtensor as nbx  # noqa: E402
import nbxtensor.nn.functional as F  # noqa: E402
from nbxtensor import graph  # noqa: E402
from nbxtensor.export import export  # noqa: E402

from .conftest import cpu_kernels  # noqa: E402

pytestmark = cpu_kernels
FORMATS = [("contiguous_format", torch.contiguous_format), ("channels_last", torch.channels_last),
           ("channels_last_3d", torch.channels_last_3d), ("preserve_format", torch.preserve_format)]


def _pairs(shape):
    """(nbx, torch) views of one array, for every order of its dims in memory."""
    for order in itertools.permutations(range(len(shape))):
        base = np.arange(np.prod(shape), dtype=np.float32).reshape([shape[d] for d in order])
        inverse = [order.index(d) for d in range(len(shape))]
        yield nbx.tensor(base).permute(*inverse), torch.from_numpy(base).permute(*inverse)


def _same_outcome(ours, theirs):
    try:
        want = theirs()
    except RuntimeError:
        with pytest.raises(RuntimeError):
            ours()
        return None
    got = ours()
    if isinstance(want, bool):
        assert got is want
    else:
        assert got.stride() == want.stride()
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    return got, want


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (2, 1, 4, 5), (2, 3, 1, 1), (1, 3, 2, 4, 5), (2, 3, 4)])
@pytest.mark.parametrize("name, fmt", FORMATS)
def test_makers_and_checks_give_torchs_strides(shape, name, fmt):
    for x, t in _pairs(shape):
        _same_outcome(lambda: x.is_contiguous(memory_format=name), lambda: t.is_contiguous(memory_format=fmt))
        _same_outcome(lambda: x.clone(memory_format=name), lambda: t.clone(memory_format=fmt))
        _same_outcome(lambda: nbx.empty_like(x, memory_format=name).copy_(x),
                      lambda: torch.empty_like(t, memory_format=fmt).copy_(t))
        _same_outcome(lambda: x.to(nbx.float64, memory_format=name), lambda: t.to(torch.float64, memory_format=fmt))
        if name != "preserve_format":
            pair = _same_outcome(lambda: x.contiguous(memory_format=name),
                                 lambda: t.contiguous(memory_format=fmt))
            if pair is not None:
                assert (pair[0] is x) == (pair[1] is t)
        pair = _same_outcome(lambda: x.to(memory_format=name), lambda: t.to(memory_format=fmt))
        if pair is not None:
            assert (pair[0] is x) == (pair[1] is t)


def test_torchs_own_constants_are_taken():
    x = nbx.zeros(2, 3, 4, 5)
    assert x.contiguous(memory_format=torch.channels_last).stride() == (60, 1, 15, 3)
    assert x.to(memory_format=torch.channels_last).is_contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize("input_last, weight_last", [(True, False), (False, True), (True, True), (False, False)])
def test_convolution_output_format_follows_torch(input_last, weight_last):
    torch.manual_seed(0)
    x, w, b = torch.randn(2, 4, 7, 6), torch.randn(6, 4, 3, 3), torch.randn(6)
    if input_last:
        x = x.contiguous(memory_format=torch.channels_last)
    if weight_last:
        w = w.contiguous(memory_format=torch.channels_last)
    want = torch.nn.functional.conv2d(x, w, b, padding=1)
    ours = [nbx.tensor(t.contiguous().numpy()) for t in (x, w, b)]
    if input_last:
        ours[0] = ours[0].contiguous(memory_format=nbx.channels_last)
    if weight_last:
        ours[1] = ours[1].contiguous(memory_format=nbx.channels_last)
    got = F.conv2d(*ours, padding=1)
    assert got.stride() == want.stride()
    # float32 sums of 36 products of unit-size values, in another order than torch's
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("pool", [
    lambda f, x: f.max_pool2d(x, 2), lambda f, x: f.avg_pool2d(x, 3, stride=2, padding=1),
    lambda f, x: f.adaptive_avg_pool2d(x, (2, 3)), lambda f, x: f.interpolate(x, scale_factor=2, mode="nearest"),
])
def test_pooling_and_resampling_keep_channels_last_as_torch(pool):
    values = np.random.default_rng(0).standard_normal((2, 3, 6, 6)).astype(np.float32)
    want = pool(torch.nn.functional, torch.from_numpy(values).contiguous(memory_format=torch.channels_last))
    got = pool(F, nbx.tensor(values).contiguous(memory_format=nbx.channels_last))
    assert got.stride() == want.stride()
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)  # one rounding each


class ChannelsLastNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Conv2d(8, 4, 1)

    def forward(self, x):
        x = x.contiguous(memory_format=torch.channels_last)
        return self.head(self.pool(torch.relu(self.conv(x)))).mean((2, 3))


def test_a_channels_last_model_exports_and_matches_torch(tmp_path):
    torch.manual_seed(0)
    module = ChannelsLastNet().eval().to(memory_format=torch.channels_last)
    x = torch.randn(2, 3, 8, 8)
    export(module, (x,), tmp_path)
    ops = json.loads((tmp_path / "graph.json").read_text())["ops"]
    assert any("channels_last" in json.dumps(op) for op in ops)
    with torch.no_grad():
        want = module(x).numpy()
    got = graph.load(tmp_path)(x.numpy())
    got = (got[0] if isinstance(got, tuple) else got).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)  # as above: 27- and 8-term float32 sums
