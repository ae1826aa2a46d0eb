"""Prefill products of many 16-bit rows: ``quantized_linear`` dequantizes the whole weight once into a
workspace of the rows' type (``dequantize_weight``) and multiplies it by our 16-bit GEMM, for every format.

The reference is ``test_quant.py``'s: its own packing loops and a float64 NumPy product, within its bound
for 16-bit rows (the weight rounded to the rows' type, then the result's rounding, each relative to
sum |x| |w|, plus the float32 sum's error). The dequantized weight itself is checked bit for bit against
NumPy's float32 (value - zero) * scale rounded once to the rows' type, through the product of our GEMM with
that weight.
"""
import numpy as np
import pytest

import nbxtensor as nbx
import nbxtensor.nn.functional as F
from nbxtensor import allocation
from nbxtensor.allocation import workspace_bytes
from nbxtensor.device import backend_for
from nbxtensor.launch import capture
from nbxtensor.ops import quant as quant_ops
from nbxtensor.ops import registry
from nbxtensor.ops.matmul_plans import _product_workspace
from nbxtensor.quant import AWQ_ORDER, QuantizedWeight
from nbxtensor import tuning

from .conftest import TEST_DEVICE, to_nbx
from .test_quant import (NP_DTYPES, _check, _pack_along_n, _pack_gptq_qweight, _random_fp8, _random_int4,
                         _reference_int4)

# past the threshold, and ragged against every tile along M
ROWS = quant_ops.IN_LOOP_MAX_ROWS + 5
HALF = ("float16", "bfloat16")


def _gptq(rng, k, n, group_size, act_order):
    q, zeros, scales, g_idx = _random_int4(rng, k, n, group_size, act_order)
    zeros = np.maximum(zeros, 1)  # GPTQ stores zero - 1
    weight = QuantizedWeight.gptq(_pack_gptq_qweight(q), _pack_along_n(zeros - 1, range(8)), scales, g_idx,
                                  group_size=group_size, device=TEST_DEVICE)
    return weight, (q, zeros, scales, g_idx)


def _launched(x, weight, bias=None) -> list[str]:
    """The kernels a planned call of ``quantized_linear`` launches, in order."""
    nbx.quantized_linear(x, weight, bias)
    with capture() as captured:
        nbx.quantized_linear(x, weight, bias)
    return [launch[0].__name__ for launch in captured.launches]


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("group_size", [32, 64, 128])
@pytest.mark.parametrize("act_order", [False, True])
def test_gptq_prefill(rng, dtype, group_size, act_order):
    weight, (q, zeros, scales, g_idx) = _gptq(rng, 256, 40, group_size, act_order)
    _check(rng.standard_normal((ROWS, 256)), weight, _reference_int4(q, zeros, scales, g_idx), dtype)


@pytest.mark.parametrize("group_size", [32, 64, 128])
def test_awq_prefill_with_bias(rng, group_size):
    k, n = 192, 48
    q, zeros, scales, groups = _random_int4(rng, k, n, group_size, False)
    weight = QuantizedWeight.awq(_pack_along_n(q, AWQ_ORDER), _pack_along_n(zeros, AWQ_ORDER), scales,
                                 group_size=group_size, device=TEST_DEVICE)
    _check(rng.standard_normal((ROWS, k)), weight, _reference_int4(q, zeros, scales, groups), "bfloat16",
           bias=rng.standard_normal(n))


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("act_order", [False, True])
def test_int4_prefill_odd_sizes(rng, dtype, act_order):
    """K and N odd, K not a multiple of the packing or of the group."""
    k, n = 75, 37
    q, zeros, scales, g_idx = _random_int4(rng, k, n, 32, act_order)
    weight = QuantizedWeight.int4(q, scales, zeros, g_idx if act_order else None, group_size=32, device=TEST_DEVICE)
    _check(rng.standard_normal((ROWS, k)), weight, _reference_int4(q, zeros, scales, g_idx), dtype)


@pytest.mark.parametrize("dtype", HALF)
def test_int8_prefill_odd_sizes(rng, dtype):
    n, k = 33, 77
    q = rng.integers(-127, 128, (n, k)).astype(np.int8)
    scales = rng.uniform(0.001, 0.02, n).astype(np.float32)
    weight = QuantizedWeight.int8(q, scales[:, None], device=TEST_DEVICE)
    _check(rng.standard_normal((ROWS, k)), weight, q.astype(np.float64) * scales.astype(np.float64)[:, None], dtype)


@pytest.mark.parametrize("mode", ["tensor", "channel", "block"])
def test_fp8_weight_only_prefill(rng, mode):
    weight, reference = _random_fp8(rng, mode)
    _check(rng.standard_normal((ROWS, reference.shape[1])), weight, reference, "float16")


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("act_order", [False, True])
def test_the_dequantized_weight_is_rounded_once_to_the_rows_type(rng, first_candidate, dtype, act_order):
    """The route's product equals, bit for bit, our GEMM (``linear``) of the weight NumPy dequantizes as
    float32 (q - zero) * scale rounded once to the rows' type: the tile ``quantized_gemm`` meets such rows
    with on the matrix units."""
    k, n = 96, 24
    weight, (q, zeros, scales, g_idx) = _gptq(rng, k, n, 32, act_order)
    dequantized = ((q.astype(np.float32) - zeros[g_idx].astype(np.float32))
                   * scales[g_idx].astype(np.float32)).T.astype(NP_DTYPES[dtype])
    x = to_nbx(rng.standard_normal((ROWS, k)).astype(NP_DTYPES[dtype]))
    bias = to_nbx(rng.standard_normal(n).astype(NP_DTYPES[dtype]))
    got = nbx.quantized_linear(x, weight, bias).numpy()
    expected = F.linear(x, to_nbx(dequantized), bias).numpy()
    assert np.array_equal(got.view(np.uint16), expected.view(np.uint16))


def test_many_rows_launch_the_dequantize_kernel_then_the_gemm(rng, first_candidate):
    weight, _ = _gptq(rng, 128, 32, 64, False)
    ordered, _ = _gptq(rng, 128, 32, 64, True)
    for dtype in (nbx.float16, nbx.bfloat16):
        x = to_nbx(rng.standard_normal((ROWS, 128))).to(dtype)
        assert _launched(x, weight) == ["dequantize_weight", "gemm"]
        assert _launched(x, ordered) == ["dequantize_weight", "gemm"]
        # fewer rows keep dequantizing tiles inside the GEMM's K loop
        assert _launched(x[:quant_ops.IN_LOOP_MAX_ROWS], weight) == ["int4_gemm"]
        assert _launched(x[:quant_ops.IN_LOOP_MAX_ROWS], ordered) == ["quantized_gemm"]
    # float32 rows keep the in-loop GEMM at any count
    assert _launched(to_nbx(rng.standard_normal((ROWS, 128)).astype(np.float32)), weight) == ["int4_gemm"]


def test_the_key_rule_gives_the_gemms_key(rng):
    """The census's keys are the ones the run forms: the 16-bit GEMM's, not a quantized product's."""
    weight, _ = _gptq(rng, 128, 32, 64, False)
    x = to_nbx(rng.standard_normal((ROWS, 128))).to(nbx.bfloat16)
    bias = to_nbx(rng.standard_normal(32)).to(nbx.bfloat16)
    from nbxtensor.ops.plans import clear_all
    clear_all()
    with tuning.recording() as formed:
        nbx.quantized_linear(x, weight, bias)
    keys = registry.get("quantized_linear").key(backend_for(x.device).facts, x, weight, bias)
    assert formed == keys and len(keys) == 1 and not keys[0].startswith("quantized")


def test_the_cost_rule_declares_the_dequantized_weight(rng, monkeypatch):
    weight, _ = _gptq(rng, 128, 32, 64, True)
    op = registry.get("quantized_linear")
    x = to_nbx(rng.standard_normal((ROWS, 128))).to(nbx.float16)
    cost = op.cost(x, weight)
    assert cost.workspace == workspace_bytes(32 * 128 * 2) + _product_workspace(nbx.float16, 1, ROWS, 128, 32)
    assert op.cost(x[:quant_ops.IN_LOOP_MAX_ROWS], weight).workspace == 0
    # every temporary of a call fits the declared workspace
    taken = []
    allocate = allocation.allocate_tensor

    def counted(shape, strides, dtype, dev, nbytes, pinned=False, scratch=False):
        if scratch:
            taken.append(nbytes)
        return allocate(shape, strides, dtype, dev, nbytes, pinned, scratch)
    monkeypatch.setattr(allocation, "allocate_tensor", counted)
    nbx.quantized_linear(x, weight)
    taken.clear()
    nbx.quantized_linear(x, weight)
    assert taken and workspace_bytes(*taken) <= cost.workspace


def test_the_route_threshold_is_a_rung_of_every_rows_ladder():
    """Every rows bucket of a quantized_gemm key then lies on one side of it, so certifying the key at its
    bucket's top rung runs the kernel its smaller rows run."""
    from nbxtensor.device.facts import all_facts
    for facts in all_facts():
        assert quant_ops.IN_LOOP_MAX_ROWS in facts["ladders"]["rows"], facts["name"]
