"""F.unfold / F.fold against torch (CPU), and a patch-embedding-style module exported with
torch.export reaching im2col / col2im (the exporter keeps them whole). fold sums at most 9 float32
terms of unit scale, so 1e-6 absolute."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as TF  # noqa: E402

import nbxtensor as nbx  # noqa: E402

from .conftest import cpu_kernels, exported_run, to_nbx  # noqa: E402

F = nbx.nn.functional
torch.manual_seed(0)
KWARGS = [dict(kernel_size=2), dict(kernel_size=(3, 2), dilation=(1, 2), padding=1, stride=(2, 1)),
          dict(kernel_size=3, padding=1, stride=2)]


@pytest.mark.parametrize("kwargs", KWARGS)
def test_unfold(kwargs):
    x = torch.randn(2, 3, 7, 6)
    np.testing.assert_array_equal(F.unfold(to_nbx(x.numpy()), **kwargs).numpy(), TF.unfold(x, **kwargs).numpy())


@pytest.mark.parametrize("kwargs", KWARGS)
def test_fold(kwargs):
    cols = TF.unfold(torch.randn(2, 3, 7, 6), **kwargs)
    want = TF.fold(cols, (7, 6), **kwargs)
    np.testing.assert_allclose(F.fold(to_nbx(cols.numpy()), (7, 6), **kwargs).numpy(), want.numpy(), atol=1e-6)


class Blocks(nn.Module):
    def __init__(self):
        super().__init__()
        self.unfold = nn.Unfold(3, padding=1, stride=2)
        self.fold = nn.Fold((6, 5), 3, padding=1, stride=2)

    def forward(self, x):
        return self.fold(self.unfold(x) * 2)


@cpu_kernels
def test_export_reaches_the_registry(tmp_path):
    got, want, names = exported_run(Blocks().eval(), torch.randn(2, 3, 6, 5), tmp_path)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    assert any("im2col" in n for n in names) and any("col2im" in n for n in names), names
