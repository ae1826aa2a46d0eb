"""scaled_dot_product_attention against torch.nn.functional.scaled_dot_product_attention (CPU, where
installed): causal, bool and additive masks, grouped-query heads, fully masked rows, one query row."""
import numpy as np
import pytest

import nbxtensor as nbx
from tests.conftest import to_nbx

torch = pytest.importorskip("torch")
F = nbx.nn.functional


def _both(rng, q_shape, k_shape, v_shape):
    arrays = [rng.standard_normal(s).astype(np.float32) for s in (q_shape, k_shape, v_shape)]
    return [to_nbx(a) for a in arrays], [torch.from_numpy(a) for a in arrays]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("mask_kind", [None, "bool", "additive"])
@pytest.mark.parametrize("length", [1, 13])
def test_matches_torch(rng, causal, mask_kind, length):
    ours, theirs = _both(rng, (2, 4, length, 48), (2, 4, 17, 48), (2, 4, 17, 48))
    mask = None
    if mask_kind == "bool":
        mask = rng.random((length, 17)) < 0.6
        mask[0] = False  # a fully masked row: torch returns zeros there
    elif mask_kind == "additive":
        mask = rng.standard_normal((2, 1, length, 17)).astype(np.float32)
    kwargs = dict(is_causal=causal, scale=0.2)
    got = F.scaled_dot_product_attention(*ours, attn_mask=None if mask is None else to_nbx(mask), **kwargs)
    want = torch.nn.functional.scaled_dot_product_attention(
        *theirs, attn_mask=None if mask is None else torch.from_numpy(mask), **kwargs)
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize("length", [1, 9])
def test_gqa_matches_torch(rng, length):
    ours, theirs = _both(rng, (1, 8, length, 32), (1, 2, 21, 32), (1, 2, 21, 32))
    got = F.scaled_dot_product_attention(*ours, enable_gqa=True)
    want = torch.nn.functional.scaled_dot_product_attention(*theirs, enable_gqa=True)
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=2e-5, rtol=2e-5)


def test_bf16_matches_torch(rng):
    ours, theirs = _both(rng, (1, 2, 11, 64), (1, 2, 30, 64), (1, 2, 30, 64))
    ours = [t.to(nbx.bfloat16) for t in ours]
    theirs = [t.to(torch.bfloat16) for t in theirs]
    got = F.scaled_dot_product_attention(*ours, is_causal=True)
    want = torch.nn.functional.scaled_dot_product_attention(*theirs, is_causal=True)
    np.testing.assert_allclose(got.to(nbx.float32).numpy(), want.float().numpy(), atol=2e-2, rtol=2e-2)


def test_output_layout_follows_the_query_as_atens():
    """ATen's fused attention lays its output out in the query's dim order; exported graphs view the
    transpose of a query-shaped output without a copy, so the strides must agree."""
    projected = torch.randn(2, 9, 12, 32)  # (B, L, H, E), as a model's projection leaves it
    q = projected.transpose(1, 2)
    expected = torch.nn.functional.scaled_dot_product_attention(q, q, q)
    ours_q = to_nbx(projected.numpy()).transpose(1, 2)
    ours = nbx.nn.functional.scaled_dot_product_attention(ours_q, ours_q, ours_q)
    assert ours.stride() == expected.stride()
    assert ours.transpose(1, 2).is_contiguous()
    dense = torch.randn(2, 12, 9, 32)
    assert nbx.nn.functional.scaled_dot_product_attention(*(to_nbx(dense.numpy()),) * 3).stride() == \
        torch.nn.functional.scaled_dot_product_attention(dense, dense, dense).stride()
