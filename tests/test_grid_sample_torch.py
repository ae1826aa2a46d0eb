"""grid_sample and affine_grid against torch (CPU) as the oracle; a spatial-transformer module exported
with torch.export reaches grid_sampler_2d and affine_grid_generator in the registry. Float32
tolerances: bicubic sums 16 products of unit-scale data, so 1e-5 absolute (torch's CPU kernel
vectorises the same arithmetic in another order)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as TF  # noqa: E402

import nbxtensor as nbx  # noqa: E402

from .conftest import cpu_kernels, exported_run, to_nbx  # noqa: E402

F = nbx.nn.functional
torch.manual_seed(0)


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_grid_sample_2d(mode, padding, align):
    x, grid = torch.randn(2, 3, 5, 6), torch.rand(2, 4, 7, 2) * 2.6 - 1.3
    want = TF.grid_sample(x, grid, mode=mode, padding_mode=padding, align_corners=align)
    got = F.grid_sample(to_nbx(x.numpy()), to_nbx(grid.numpy()), mode=mode, padding_mode=padding, align_corners=align)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=0, atol=1e-5)


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_grid_sample_3d(mode, padding, align):
    x, grid = torch.randn(1, 2, 3, 4, 5), torch.rand(1, 2, 3, 4, 3) * 2.6 - 1.3
    want = TF.grid_sample(x, grid, mode=mode, padding_mode=padding, align_corners=align)
    got = F.grid_sample(to_nbx(x.numpy()), to_nbx(grid.numpy()), mode=mode, padding_mode=padding, align_corners=align)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=0, atol=1e-5)


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("size", [(2, 3, 4, 5), (2, 1, 3, 4, 5), (1, 2, 1, 6)])
def test_affine_grid(size, align):
    nd = len(size) - 2
    theta = torch.randn(size[0], nd, nd + 1)
    with pytest.warns() if align and 1 in size[2:] else _nothing():
        want = TF.affine_grid(theta, size, align_corners=align)
    got = F.affine_grid(to_nbx(theta.numpy()), size, align_corners=align)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=0, atol=1e-6)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class Transformer(nn.Module):
    """A spatial transformer's sampling: a predicted affine map, its grid, bilinear sampling."""

    def __init__(self):
        super().__init__()
        self.loc = nn.Linear(2 * 6 * 5, 6)

    def forward(self, x):
        theta = self.loc(x.flatten(1)).view(-1, 2, 3)
        grid = TF.affine_grid(theta, list(x.shape), align_corners=False)
        return TF.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)


@cpu_kernels
def test_export_reaches_the_registry(tmp_path):
    got, want, names = exported_run(Transformer().eval(), torch.randn(2, 2, 6, 5), tmp_path)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert any("grid_sampler_2d" in n for n in names) and any("affine_grid_generator" in n for n in names), names
