"""``grouped_mm`` against torch's ``_grouped_mm`` where torch's build runs it (its CPU kernel takes rows
and matrices whose strides are multiples of 16 bytes). Rows past ``offs[-1]``, which torch leaves
unwritten, are not compared."""
from __future__ import annotations

import numpy as np
import pytest

import nbxtensor as nbx

from .conftest import TEST_DEVICE, to_nbx

torch = pytest.importorskip("torch")

# float32 sums of 32 products in different orders, then each dtype's rounding of the output
TOLERANCES = {"float32": 1e-5, "bfloat16": 2e-2, "float16": 2e-3}


def _torch_runs_grouped_mm() -> str | None:
    """Why torch cannot be the oracle here, or None."""
    if not hasattr(torch, "_grouped_mm"):
        return "this torch has no _grouped_mm"
    try:
        torch._grouped_mm(torch.ones(4, 8), torch.ones(2, 8, 8), torch.tensor([2, 4], dtype=torch.int32))
    except (RuntimeError, NotImplementedError) as error:
        return f"torch's build refuses _grouped_mm: {error}"
    return None


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("offs, transposed", [([3, 3, 10, 17], False), ([0, 17, 17, 17], False),
                                              ([5, 9, 12, 14], True)])
def test_grouped_mm_matches_torch(dtype, offs, transposed):
    why = _torch_runs_grouped_mm()
    if why is not None:
        pytest.skip(why)
    generator = torch.Generator().manual_seed(len(offs) + offs[0])
    a = torch.randn(17, 32, generator=generator).to(getattr(torch, dtype))
    b = torch.randn(4, 16, 32, generator=generator).to(getattr(torch, dtype))
    b = b.transpose(1, 2) if transposed else b.transpose(1, 2).contiguous()
    ends = torch.tensor(offs, dtype=torch.int32)
    theirs = torch._grouped_mm(a, b, ends).float().numpy()[:offs[-1]]
    ours = nbx.grouped_mm(nbx.tensor(a).to(TEST_DEVICE), nbx.tensor(b).to(TEST_DEVICE),
                          to_nbx(np.int32(offs))).float().numpy()[:offs[-1]]
    np.testing.assert_allclose(ours, theirs, rtol=TOLERANCES[dtype], atol=TOLERANCES[dtype] * np.abs(theirs).max())
