"""Pooling and resampling against torch (CPU) as the oracle for its conventions: window arithmetic,
ceil_mode, indices, source coordinates of every interpolate mode; and what torch.export emits for the
vision modules reaches the registry and runs through the graph runtime. Float32 tolerances: a sum of
at most 16 float32 terms (bicubic), so 1e-5 absolute on unit-scale data."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as TF  # noqa: E402

import nbxtensor as nbx  # noqa: E402

from .conftest import cpu_kernels, exported_run, to_nbx  # noqa: E402
from .test_pooling import channels_last  # noqa: E402

F = nbx.nn.functional
torch.manual_seed(0)


@pytest.mark.parametrize("kwargs", [
    dict(kernel_size=3, stride=2, padding=1), dict(kernel_size=2, ceil_mode=True),
    dict(kernel_size=(3, 2), stride=(1, 2), padding=(1, 1), dilation=(2, 1), ceil_mode=True),
])
def test_max_pool2d(kwargs):
    x = torch.randn(2, 3, 9, 8)
    want, want_i = TF.max_pool2d(x, return_indices=True, **kwargs)
    got, got_i = F.max_pool2d(channels_last(x.numpy()), return_indices=True, **kwargs)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_array_equal(got_i.numpy(), want_i.numpy())


@pytest.mark.parametrize("kwargs", [dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
                                    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
                                    dict(kernel_size=2, divisor_override=3)])
def test_avg_pool3d(kwargs):
    x = torch.randn(1, 2, 5, 6, 7)
    np.testing.assert_allclose(F.avg_pool3d(to_nbx(x.numpy()), **kwargs).numpy(), TF.avg_pool3d(x, **kwargs).numpy(),
                               atol=1e-6)


@pytest.mark.parametrize("size, scale, mode, align", [
    ((7, 9), None, "nearest", None), (None, 1.3, "nearest", None), (None, (0.7, 2.5), "nearest-exact", None),
    ((11, 4), None, "bilinear", False), (None, 1.6, "bilinear", True), (None, 0.45, "bilinear", False),
    ((9, 13), None, "bicubic", False), (None, 1.7, "bicubic", True), (None, 0.5, "bicubic", False),
    ((3, 2), None, "area", None), (None, 0.5, "area", None),
])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
def test_interpolate_2d(size, scale, mode, align, layout):
    x = torch.randn(2, 3, 6, 5)
    want = TF.interpolate(x, size=size, scale_factor=scale, mode=mode, align_corners=align)
    source = channels_last(x.numpy()) if layout == "channels_last" else to_nbx(x.numpy())
    got = F.interpolate(source, size=size, scale_factor=scale, mode=mode, align_corners=align)
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-5, rtol=0)


@pytest.mark.parametrize("recompute", [None, True])
@pytest.mark.parametrize("mode, shape, scale", [("linear", (2, 3, 7), 1.7), ("nearest", (2, 3, 7), 2.3),
                                                ("trilinear", (1, 2, 3, 4, 5), 1.4), ("nearest", (1, 2, 3, 4, 5), 1.5)])
def test_interpolate_1d_3d(mode, shape, scale, recompute):
    x = torch.randn(*shape)
    want = TF.interpolate(x, scale_factor=scale, mode=mode, recompute_scale_factor=recompute)
    got = F.interpolate(to_nbx(x.numpy()), scale_factor=scale, mode=mode, recompute_scale_factor=recompute)
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-5, rtol=0)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("size, scale", [((4, 3), None), ((20, 5), None), (None, 0.3), (None, 1.5), ((1, 1), None)])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
def test_interpolate_antialias(mode, align, size, scale, layout):
    x = torch.randn(2, 3, 13, 11)
    want = TF.interpolate(x, size=size, scale_factor=scale, mode=mode, align_corners=align, antialias=True)
    source = channels_last(x.numpy()) if layout == "channels_last" else to_nbx(x.numpy())
    got = F.interpolate(source, size=size, scale_factor=scale, mode=mode, align_corners=align, antialias=True)
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-5, rtol=0)


class Vision(nn.Module):
    """A ResNet-style stem's pooling, a UNet's upsampling and a classifier head's global pool."""

    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool2d(3, 2, 1)
        self.avg = nn.AvgPool2d(2, ceil_mode=True)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.head = nn.AdaptiveAvgPool2d(1)

    def forward(self, x):
        y = self.up(self.avg(self.pool(x)))
        z = TF.interpolate(y, size=(5, 7), mode="bilinear", align_corners=False)
        small = TF.interpolate(z, size=(3, 4), mode="bicubic", antialias=True)
        return self.head(z) + z.mean() + TF.interpolate(small, size=(5, 7), mode="bilinear", antialias=True)


@cpu_kernels
def test_export_reaches_the_registry(tmp_path):
    got, want, names = exported_run(Vision().eval(), torch.randn(2, 3, 12, 10), tmp_path)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert any("max_pool2d" in n for n in names) and any("upsample" in n for n in names), names
    assert any("bicubic2d_aa" in n for n in names) and any("bilinear2d_aa" in n for n in names), names
