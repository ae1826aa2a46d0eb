"""Convolution modules exported by torch.export reach the registry's ops and run in our graph runtime,
matching torch (an oracle only: skipped without torch)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402

import nbxtensor.nn.functional as F  # noqa: E402

from .conftest import exported_run, to_nbx  # noqa: E402

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
    got, want, names = exported_run(TinyConvNet().eval(), torch.randn(2, 3, 6, 5), tmp_path)
    assert "aten::convolution.default" in names or "aten::conv2d.default" in names
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kwargs", [dict(stride=2, padding=1, dilation=2, groups=2), dict(padding="same")])
def test_functional_matches_torch(kwargs):
    x, w, b = torch.randn(1, 4, 7, 6), torch.randn(6, 2 if kwargs.get("groups") else 4, 3, 3), torch.randn(6)
    got = F.conv2d(to_nbx(x.numpy()), to_nbx(w.numpy()), to_nbx(b.numpy()), **kwargs).numpy()
    np.testing.assert_allclose(got, torch.nn.functional.conv2d(x, w, b, **kwargs).numpy(), rtol=1e-5, atol=1e-5)


class PaddedModes(nn.Module):
    """Every padding mode and an even 'same' kernel with dilation, as modules declare them."""

    def __init__(self, dims):
        super().__init__()
        conv = getattr(nn, f"Conv{dims}d")
        self.layers = nn.ModuleList([conv(2, 2, 3, padding=(1, 2, 1)[:dims] if dims > 1 else 2, padding_mode=mode)
                                     for mode in ("zeros", "reflect", "replicate", "circular")])
        self.same = conv(2, 3, 2, padding="same", dilation=3)

    def forward(self, x):
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return self.same(x)


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_padding_modes_and_even_same_export_and_match_torch(dims, tmp_path):
    torch.manual_seed(dims)
    got, want, _ = exported_run(PaddedModes(dims).eval(), torch.randn(1, 2, *(6, 5, 4)[:dims]), tmp_path)
    # float32 sums of at most 54 products of values below 1, in another order than torch's, over 5 layers
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("call", [
    lambda m, f: f.conv2d(m.zeros(1, 3, 5, 5), m.zeros(4, 2, 3, 3), groups=2),
    lambda m, f: f.conv2d(m.zeros(1, 3, 5, 5), m.zeros(3, 3, 3, 3), groups=2),
    lambda m, f: f.conv2d(m.zeros(1, 3, 2, 2), m.zeros(4, 3, 3, 3)),
    lambda m, f: f.conv_transpose2d(m.zeros(1, 2, 1, 1), m.zeros(2, 1, 1, 1), padding=1),
    lambda m, f: f.conv1d(m.zeros(1, 3, 5), m.zeros(4, 3, 3), padding=-1),
    lambda m, f: m.convolution(m.zeros(1, 3, 5), m.zeros(4, 3), None, [1], [0], [1], False, [0], 1),
])
def test_error_words_are_torchs(call):
    """The sentence torch raises for a bad convolution is in ours."""
    import re

    import nbxtensor as nbx

    def words(error):  # torch writes some sizes in double brackets
        return re.sub(r"[\[\]]", "", re.sub(r"\s+", " ", str(error.value).splitlines()[0]))
    with pytest.raises(RuntimeError) as theirs:
        call(torch, torch.nn.functional)
    with pytest.raises(RuntimeError) as ours:
        call(nbx, F)
    assert words(theirs).split(". Output size")[0].split(". Kernel")[0] in words(ours)
