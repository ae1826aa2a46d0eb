"""The int4 tiles built by inline PTX (``kernels/quant.py``, ``_int4_tile_packed``) against the portable
float32 path, bit for bit, on a GPU: both form the exact nibble - zero and round once to the rows' type
after the same scale, so every output must have the same bits (no tolerance). The interpreter runs no PTX,
so the file is skipped unless the suite runs on CUDA (``NBX_TEST_DEVICE=cuda``).
"""
import ml_dtypes
import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.device import backend_for
from nbxtensor.ops import quant as quant_ops
from nbxtensor.ops.plans import PlanCache
from nbxtensor.quant import QuantizedWeight

from .conftest import TEST_DEVICE, to_nbx
from .test_quant import _random_int4

pytestmark = pytest.mark.skipif(not str(TEST_DEVICE).startswith("cuda"), reason="inline PTX runs only on CUDA")

NP_DTYPES = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
# (rows, settings): one row and the GEMV's several rows (a K tile inside one group of 64 and 128 inputs,
# factored; across two groups of 32, scaled tiles), and a prefill GEMM
CASES = [(1, dict(BLOCK_N=64, BLOCK_K=64, SPLITS=2, num_warps=4)),
         (4, dict(BLOCK_N=64, BLOCK_K=64, SPLITS=2, num_warps=4)),
         (16, dict(BLOCK_N=128, BLOCK_K=64, SPLITS=1, num_warps=4)),
         (16, dict(BLOCK_N=64, BLOCK_K=128, SPLITS=2, num_warps=4)),
         (40, dict(BLOCK_M=32, BLOCK_N=64, BLOCK_K=64, num_stages=2, num_warps=4))]


def _run(monkeypatch, x, weight, settings, inline):
    monkeypatch.setattr(quant_ops.tuning, "choose_timed", lambda key, facts, candidates, prepare: settings)
    monkeypatch.setattr(quant_ops, "inline_nibbles", lambda facts, dtype: inline)
    monkeypatch.setattr(quant_ops, "_plans", PlanCache())
    return nbx.quantized_linear(x, weight).numpy()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("group_size", [32, 64, 128])
@pytest.mark.parametrize("rows, settings", CASES)
@pytest.mark.parametrize("scales_like_rows", [True, False])
def test_inline_nibbles_give_the_portable_bits(rng, monkeypatch, dtype, group_size, rows, settings,
                                               scales_like_rows):
    """Odd N; every nibble against every zero point (random); scales of the rows' type (the PTX scales the
    tile) or float32 (the PTX leaves scaled tiles to the portable path, factored ones it still builds)."""
    facts = backend_for(nbx.device(TEST_DEVICE)).facts
    assert quant_ops.inline_nibbles(facts, dtype), "the inline PTX path is not taken on this device"
    k, n = 256, 77
    q, zeros, scales, g_idx = _random_int4(rng, k, n, group_size, False)
    scales = scales.astype(NP_DTYPES[dtype] if scales_like_rows else np.float32)
    weight = QuantizedWeight.int4(q, scales, zeros, group_size=group_size, device=TEST_DEVICE, dtype=dtype)
    x = to_nbx(rng.standard_normal((rows, k)).astype(NP_DTYPES[dtype]))
    inline = _run(monkeypatch, x, weight, settings, True)
    portable = _run(monkeypatch, x, weight, settings, False)
    assert np.isfinite(portable.astype(np.float32)).all()
    np.testing.assert_array_equal(inline.view(np.uint16), portable.view(np.uint16))
