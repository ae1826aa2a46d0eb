"""Quantized mixtures of experts: ``grouped_quantized_linear`` on stacks of experts' int4 (groups of 32, 64 and
128, act-order), int8 and fp8 (per tensor, channel and 128 x 128 block) weights against float64 loops that
dequantize each expert's host arrays here (not through ``QuantizedWeight.dequantize``), whatever ``offs`` holds;
``moe`` on quantized stacks against its float64 reference, captured and replayed with new routing."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor import allocation
from nbxtensor.launch import capture
from nbxtensor.ops import moe as moe_ops
from nbxtensor.ops.moe import moe_reference
from nbxtensor.quant import (QuantizationError, QuantizedWeight, quantize_fp8, quantize_int4, quantize_int8,
                             stack_experts)

from .conftest import TEST_DEVICE, to_nbx
from .test_moe import UNIT, _loops

NUMPY = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16}


def _int4_expert(rng, n, k, group_size, act_order=False):
    """An expert's (n, k) weight as 4-bit values, zero points and scales (inputs in consecutive groups, or in a
    random order of groups with ``act_order``): the QuantizedWeight and the float64 weight it stands for."""
    w = rng.standard_normal((n, k)) * 0.2
    q, scales, zeros = quantize_int4(w, group_size, "float16")
    groups = np.arange(k) // group_size
    g_idx = None
    if act_order:  # the same values, read with each input's group given explicitly, in a permuted order
        g_idx = rng.permutation(groups).astype(np.int32)
        groups = g_idx
    weight = QuantizedWeight.int4(q, scales, zeros, g_idx, group_size=group_size, device=TEST_DEVICE)
    dequantized = (q.astype(np.float64) - zeros[groups].astype(np.float64)) * scales[groups].astype(np.float64)
    return weight, dequantized.T


def _byte_expert(rng, n, k, format, mode="channel"):
    w = rng.standard_normal((n, k)) * 0.2
    if format == "int8":
        q, scales = quantize_int8(w)
        return QuantizedWeight.int8(q, scales, device=TEST_DEVICE), q.astype(np.float64) * scales[:, None]
    q, scales = quantize_fp8(w, mode)
    if mode == "block":
        expanded = np.repeat(np.repeat(scales.astype(np.float64), 128, 0), 128, 1)[:n, :k]
    else:
        expanded = np.broadcast_to(np.reshape(scales.astype(np.float64), (-1, 1)), (n, k))
    return QuantizedWeight.fp8(q, scales, device=TEST_DEVICE), q.astype(np.float64) * expanded


def _stack(made):
    """(the stack, (experts, k, n) float64 matrices) of [(QuantizedWeight, (n, k) float64)] experts."""
    return stack_experts([[w] for w, _ in made]), np.stack([d.T for _, d in made])


def _assert_close(got, a, b, offs, dtype):
    """Within the bound of k float32 products and sums, the dequantized tile's rounding to the dot's type (the
    rows' type, where they are 16-bit), plus the output's rounding to ``dtype``."""
    reference = _loops(a, b, offs)
    magnitudes = _loops(np.abs(a), np.abs(b), offs)
    bound = ((a.shape[1] + 3) * UNIT["float32"] + UNIT[dtype]) * magnitudes + UNIT[dtype] * np.abs(reference)
    error = np.abs(got.float().numpy().astype(np.float64) - reference)
    worst = np.unravel_index(error.argmax(), error.shape)
    assert (error <= bound).all(), f"worst error {error[worst]:.3g} where the bound is {bound[worst]:.3g}"


def _rows(rng, rows, k, dtype):
    a = rng.standard_normal((rows, k)).astype(NUMPY[dtype]).astype(np.float64)
    return a, to_nbx(a.astype(np.float32)).to(dtype)


@pytest.fixture
def row_tiles_of_16(monkeypatch):
    """Tiles of 16 rows (the interpreter's own tile spans every row): groups of several tiles, ragged ends."""
    interpreted = moe_ops.grouped_quantized_candidates

    def short_tiles(facts, rows, n, k):
        return [dict(config, BLOCK_M=16) for config in interpreted(facts, rows, n, k)]
    monkeypatch.setattr(moe_ops, "grouped_quantized_candidates", short_tiles)
    moe_ops._grouped_quantized_plans.clear()
    yield
    moe_ops._grouped_quantized_plans.clear()


# odd N and K throughout; K = 200 splits groups of 64 and 128 raggedly
@pytest.mark.parametrize("group_size, act_order, dtype", [(32, False, "float32"), (64, False, "bfloat16"),
                                                          (128, False, "float32"), (32, True, "float32")],
                         ids=["g32", "g64-bf16", "g128", "g32-act-order"])
def test_int4_experts_match_float64_loops(rng, row_tiles_of_16, group_size, act_order, dtype):
    stack, b = _stack([_int4_expert(rng, 37, 200, group_size, act_order) for _ in range(3)])
    assert (stack.g_idx is not None) == act_order
    a, a_tensor = _rows(rng, 40, 200, dtype)
    offs = [0, 17, 35]  # the first expert empty, rows past the last end
    _assert_close(nbx.grouped_quantized_linear(a_tensor, stack, to_nbx(np.int32(offs))), a, b, offs, dtype)


@pytest.mark.parametrize("format, mode, dtype", [("int8", "channel", "float32"), ("int8", "channel", "bfloat16"),
                                                 ("fp8", "channel", "float32"), ("fp8", "tensor", "bfloat16"),
                                                 ("fp8", "block", "float32")])
def test_int8_and_fp8_experts_match_float64_loops(rng, row_tiles_of_16, format, mode, dtype):
    k = 200 if mode != "block" else 300  # block scales: three K blocks, the last ragged
    stack, b = _stack([_byte_expert(rng, 45, k, format, mode) for _ in range(4)])
    a, a_tensor = _rows(rng, 33, k, dtype)
    offs = [5, 5, 33, 33]
    _assert_close(nbx.grouped_quantized_linear(a_tensor, stack, to_nbx(np.int32(offs))), a, b, offs, dtype)


@pytest.mark.parametrize("offs", [[9, 2, 5], [100, 200, 300], [-7, 3, -1], [2 ** 31 - 1, -2 ** 31, 4]],
                         ids=["decreasing", "past-the-rows", "negative", "extremes"])
def test_hostile_offs_stay_inside_the_rows(rng, guarded_outputs, offs):
    """Rows read from outside the input (the middle of a NaN-filled buffer) or written outside the output (the
    middle of a buffer of 7.0) would show, whatever ``offs`` holds."""
    stack, b = _stack([_int4_expert(rng, 19, 40, 32) for _ in range(3)])
    a = rng.standard_normal((9, 40))
    padded = np.full((13, 40), np.nan, np.float32)
    padded[2:11] = a
    got = nbx.grouped_quantized_linear(to_nbx(padded)[2:11], stack, to_nbx(np.int32(offs)))
    _assert_close(got, a.astype(np.float32).astype(np.float64), b, offs, "float32")
    buffer, rows = guarded_outputs[-1]
    around = buffer.numpy()
    assert (around[:16] == 7.0).all() and (around[16 + rows:] == 7.0).all()


def test_rows_past_the_last_end_are_zero_and_empty_inputs_launch_nothing(rng):
    stack, _ = _stack([_byte_expert(rng, 16, 24, "int8") for _ in range(2)])
    with allocation.poisoned():
        got = nbx.grouped_quantized_linear(to_nbx(rng.standard_normal((9, 24)).astype(np.float32)), stack,
                                           to_nbx(np.int32([2, 5]))).numpy()
    assert (got[5:] == 0).all() and np.isfinite(got).all()
    with capture() as recorded:
        empty = nbx.grouped_quantized_linear(nbx.zeros((0, 24), device=TEST_DEVICE), stack, to_nbx(np.int32([0, 0])))
    assert tuple(empty.shape) == (0, 16) and not recorded.launches


def test_bad_input_is_refused_by_name(rng):
    stack, _ = _stack([_byte_expert(rng, 16, 24, "int8") for _ in range(2)])
    one = stack[0]
    x, offs = nbx.ones((4, 24), device=TEST_DEVICE), to_nbx(np.int32([1, 4]))
    for call, error, message in [
        (lambda: nbx.grouped_quantized_linear(x, one, offs), TypeError, "must be a stack of experts' quantized"),
        (lambda: nbx.grouped_quantized_linear(x, nbx.ones((2, 16, 24)), offs), TypeError, "3-D QuantizedWeight"),
        (lambda: nbx.grouped_quantized_linear(x.double(), stack, offs), TypeError, "float64 input is not supported"),
        (lambda: nbx.grouped_quantized_linear(x[:, :8], stack, offs), RuntimeError, "rows have 8 elements but"),
        (lambda: nbx.grouped_quantized_linear(x, stack, offs.long()), TypeError, "offs must be int32"),
        (lambda: nbx.grouped_quantized_linear(x, stack, offs[:1]), RuntimeError, "one row end per expert"),
        (lambda: nbx.quantized_linear(x, stack), RuntimeError, "grouped_quantized_linear multiplies those"),
        (lambda: stack[2], IndexError, "expert 2 is out of range"),
    ]:
        with pytest.raises(error, match=message):
            call()


def test_stack_experts_refuses_what_does_not_stack(rng):
    int8 = _byte_expert(rng, 16, 24, "int8")[0]
    fp8_block = QuantizedWeight.quantize(rng.standard_normal((130, 24)).astype(np.float32), "fp8", fp8_scales="block")
    int4 = [_int4_expert(rng, 16, 32, 16, act_order=True)[0] for _ in range(2)]
    for experts, message in [
        ([[int8], [_int4_expert(rng, 16, 24, 8)[0]]], "differ in format"),
        ([[int8], [int8, int8]], "the same rows"),
        ([[int8], [nbx.ones((16, 24))]], "2-D QuantizedWeights"),
        ([[fp8_block, fp8_block]], "multiple of 128 rows"),
        ([int4], "must share one g_idx"),
    ]:
        with pytest.raises(QuantizationError, match=message):
            stack_experts(experts)
    # per-tensor fp8 scales joined become one a channel; act-order weights joined by one g_idx stack
    tensor = [QuantizedWeight.fp8(*quantize_fp8(rng.standard_normal((8, 24)), "tensor")) for _ in range(2)]
    joined = stack_experts([tensor, tensor[::-1]])
    assert joined.scale_block_n == 1 and tuple(joined.scales.shape) == (2, 1, 16)
    np.testing.assert_array_equal(joined[1].dequantize(), np.concatenate([w.dequantize() for w in tensor[::-1]]))


def _quantized_experts(rng, experts, hidden, intermediate, format):
    gate_up = [rng.standard_normal((2 * intermediate, hidden)).astype(np.float32) * 0.3 for _ in range(experts)]
    down = [rng.standard_normal((hidden, intermediate)).astype(np.float32) * 0.3 for _ in range(experts)]
    stacks = [stack_experts([[QuantizedWeight.quantize(w, format, group_size=32, device=TEST_DEVICE)]
                             for w in weights]) for weights in (gate_up, down)]
    return stacks, [s.dequantize().astype(np.float64) for s in stacks]


@pytest.mark.parametrize("format", ["int4", "int8", "fp8"])
def test_moe_on_quantized_experts_routes_as_the_float64_reference(rng, format):
    (gate_up, down), dequantized = _quantized_experts(rng, 4, 64, 32, format)
    x = rng.standard_normal((6, 64)).astype(np.float32)
    router = rng.standard_normal((4, 64)).astype(np.float32)
    got = nbx.moe(to_nbx(x), to_nbx(router), gate_up, down, 2, True).numpy()
    want = moe_reference(x, router, *dequantized, 2, True)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_moe_on_quantized_experts_captures_and_replays_with_new_routing(rng):
    (gate_up, down), _ = _quantized_experts(rng, 4, 64, 32, "int4")
    router = to_nbx(rng.standard_normal((4, 64)).astype(np.float32))
    first, second = (rng.standard_normal((3, 64)).astype(np.float32) for _ in range(2))
    x = to_nbx(first)
    nbx.moe(x, router, gate_up, down, 2)
    with capture() as recorded:
        out = nbx.moe(x, router, gate_up, down, 2)
    assert recorded.refused is None
    assert [launch[0].fn.__name__ for launch in recorded.launches].count("grouped_quantized_gemm") == 2
    x.copy_(to_nbx(second))
    recorded.replay()
    expected = nbx.moe(to_nbx(second), router, gate_up, down, 2)
    assert out.numpy().tobytes() == expected.numpy().tobytes()


def test_moe_refuses_a_quantized_router():
    weight = QuantizedWeight.quantize(np.ones((4, 16), np.float32), "int8")
    stack = stack_experts([[QuantizedWeight.quantize(np.ones((16, 16), np.float32), "int8")]] * 4)
    with pytest.raises(TypeError, match="router_weight must be a float tensor"):
        nbx.moe(nbx.ones((2, 16)), weight, stack, stack, 2)


@pytest.mark.skipif(TEST_DEVICE != "cpu", reason="certifies the CPU's device class")
@pytest.mark.parametrize("format", ["int4", "fp8"])
def test_grouped_quantized_keys_certify(rng, monkeypatch, tmp_path, format):
    """The key a call forms is certified against its float64 reference and names the op that forms it."""
    from nbxtensor import certify, tuning
    from nbxtensor.ops import plans
    monkeypatch.setenv("NBX_TUNING_DIR", str(tmp_path))
    plans.clear_all()
    stack, _ = _stack([_int4_expert(rng, 24, 40, 32) if format == "int4" else _byte_expert(rng, 24, 40, format)
                       for _ in range(3)])
    with tuning.recording() as formed:
        nbx.grouped_quantized_linear(to_nbx(rng.standard_normal((20, 40)).astype(np.float32)).bfloat16(), stack,
                                     to_nbx(np.int32([6, 6, 17])))
    (key,) = formed
    assert key.startswith("grouped_quantized_gemm|") and f"|format={format}|" in key
    report = certify.certify_key(key, "cpu")
    assert report["status"] == "certified" and report["op"] == "grouped_quantized_linear"
    plans.clear_all()
