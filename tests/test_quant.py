"""Quantized weights and ``nbx.quantized_linear`` against a float64 reference that dequantizes with NumPy.

The reference is written here, apart from the library: HF-format tensors (GPTQ, AWQ) are packed by the
loops below from random 4-bit values, and the reference multiplies by (q - zero) * scale computed from those
values, so a packing, layout or kernel error shows up as a wrong product.

Tolerances: every dequantized weight is exact in float32 (a 4-bit difference times a float16 scale, or an
int8 or e4m3 value times a scale: at most 24 significant bits, or one rounding), so a float32 product is off
by at most the float32 sum's error, K * 2^-24 * sum |x| |w| (``_bound``). Half-precision rows add the
result's rounding and, on a GPU, the weight tile rounded to their type where the scales multiply the tile
rather than the dot's product (2^-11 each for float16, 2^-8 for bfloat16), relative to the same sum.
"""
import ml_dtypes
import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.ops import plans, registry
from nbxtensor.ops import quant as quant_ops
from nbxtensor.quant import (AWQ_ORDER, QuantizationError, QuantizedWeight, join_rows, pack_int4_columns,
                             pack_int4_rows, quantize_fp8, quantize_int4, quantize_int8, unpack_int4_columns,
                             unpack_int4_rows)

from .conftest import TEST_DEVICE, to_nbx

DECODE_ROWS = (1, 2, 5, 16)
PREFILL_ROWS = (17, 40)
RELATIVE = {"float32": 0.0, "float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}
NP_DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


# ---- the reference: packing by loops, dequantizing in float64 -----------------------------------------
def _pack_gptq_qweight(q):
    """(K, N) nibbles -> (K / 8, N) int32, nibble i of word r holding row 8r + i."""
    k, n = q.shape
    words = np.zeros((k // 8, n), np.uint32)
    for row in range(k):
        words[row // 8] |= q[row].astype(np.uint32) << np.uint32(4 * (row % 8))
    return words.view(np.int32)


def _pack_along_n(values, order):
    """(R, N) nibbles -> (R, N / 8) int32, nibble i of word c holding column 8c + order[i]."""
    r, n = values.shape
    words = np.zeros((r, n // 8), np.uint32)
    for c in range(n // 8):
        for i in range(8):
            words[:, c] |= values[:, 8 * c + order[i]].astype(np.uint32) << np.uint32(4 * i)
    return words.view(np.int32)


def _reference_int4(q, zeros, scales, groups):
    """(N, K) float64 weight of (K, N) nibbles, (G, N) zero points and scales, and the group of each input."""
    return ((q.astype(np.float64) - zeros[groups].astype(np.float64)) * scales[groups].astype(np.float64)).T


def _random_int4(rng, k, n, group_size, act_order):
    groups = -(-k // group_size)
    q = rng.integers(0, 16, (k, n)).astype(np.uint8)
    zeros = rng.integers(0, 16, (groups, n)).astype(np.uint8)
    scales = (rng.uniform(0.5, 2.0, (groups, n)) / 16).astype(np.float16)
    g_idx = np.arange(k) // group_size
    if act_order:
        g_idx = rng.permutation(g_idx)
    return q, zeros, scales, g_idx.astype(np.int32)


def _bound(x, w, k, dtype):
    """Elementwise error bound of x @ w.T (module docstring)."""
    magnitude = np.abs(x) @ np.abs(w).T
    return (4 * k * 2.0 ** -24 + RELATIVE[dtype]) * magnitude + 1e-30


def _check(x, weight, reference_w, dtype="float32", bias=None):
    held = x.astype(NP_DTYPES[dtype]).astype(np.float64)
    out = nbx.quantized_linear(to_nbx(x.astype(NP_DTYPES[dtype])), weight,
                               None if bias is None else to_nbx(bias.astype(NP_DTYPES[dtype])))
    assert out.dtype.name == dtype and tuple(out.shape) == (*x.shape[:-1], reference_w.shape[0])
    expected = held @ reference_w.T
    bound = _bound(held, reference_w, reference_w.shape[1], dtype)
    if bias is not None:
        expected = expected + bias.astype(NP_DTYPES[dtype]).astype(np.float64)
        bound = bound + RELATIVE[dtype] * np.abs(expected)
    got = out.numpy().astype(np.float64)
    excess = np.abs(got - expected) - bound
    assert excess.max() <= 0, f"worst error beyond the bound: {excess.max()}"


# ---- packing ------------------------------------------------------------------------------------------
def test_packing_matches_the_checkpoint_layouts(rng):
    q = rng.integers(0, 16, (24, 16)).astype(np.uint8)
    assert np.array_equal(pack_int4_rows(q), _pack_gptq_qweight(q))
    assert np.array_equal(pack_int4_columns(q), _pack_along_n(q, range(8)))
    assert np.array_equal(pack_int4_columns(q, AWQ_ORDER), _pack_along_n(q, AWQ_ORDER))
    # nibble i of an AWQ word holds column AWQ_ORDER[i]: columns 0..7 holding 0..7 pack as 0x75316420
    assert pack_int4_columns(np.arange(8, dtype=np.uint8)[None], AWQ_ORDER).view(np.uint32)[0, 0] == 0x75316420
    assert pack_int4_rows(np.arange(8, dtype=np.uint8)[:, None]).view(np.uint32)[0, 0] == 0x76543210


@pytest.mark.parametrize("shape", [(8, 8), (13, 5), (1, 17), (40, 33)])
def test_packing_round_trips(rng, shape):
    q = rng.integers(0, 16, shape).astype(np.uint8)
    assert np.array_equal(unpack_int4_rows(pack_int4_rows(q), shape[0]), q)
    for order in (range(8), AWQ_ORDER):
        assert np.array_equal(unpack_int4_columns(pack_int4_columns(q, order), shape[1], order), q)


def test_packing_refuses_values_past_four_bits():
    with pytest.raises(QuantizationError, match="0..15"):
        pack_int4_rows(np.array([[16]]))
    with pytest.raises(QuantizationError, match="int32 words"):
        unpack_int4_rows(np.zeros((2, 3), np.int32), 24)


# ---- rounding to nearest --------------------------------------------------------------------------------
@pytest.mark.parametrize("group_size", [32, 64, 128])
def test_quantize_int4_rounds_to_nearest(rng, group_size):
    w = rng.standard_normal((9, 150))
    q, scales, zeros = quantize_int4(w, group_size)
    groups = np.arange(150) // group_size
    error = np.abs(_reference_int4(q, zeros, scales, groups) - w)
    # within half a step, plus float16's rounding of the scale over at most 15 steps
    assert (error <= scales[groups].T.astype(np.float64) * (0.5 + 15 * 2.0 ** -11)).all()


def test_quantize_int8_and_fp8_round_to_nearest(rng):
    w = rng.standard_normal((7, 300))
    q, scales = quantize_int8(w)
    assert q.dtype == np.int8 and scales.shape == (7,)
    assert (np.abs(q * scales.astype(np.float64)[:, None] - w) <= scales[:, None] * (0.5 + 1e-6)).all()
    for mode in ("tensor", "channel", "block"):
        q, scales = quantize_fp8(w, mode)
        expanded = {"tensor": lambda s: s, "channel": lambda s: s[:, None],
                    "block": lambda s: np.repeat(np.repeat(s, 128, 0), 128, 1)[:7, :300]}[mode](scales.astype(np.float64))
        # e4m3 keeps 3 mantissa bits: half a step is 2^-4 of the magnitude (subnormals: 2^-10 absolute)
        error = np.abs(q.astype(np.float64) * expanded - w)
        assert (error <= (2.0 ** -4 * np.abs(w) + 2.0 ** -10 * expanded) * (1 + 1e-6)).all(), mode


# ---- products -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("group_size", [32, 64, 128])
@pytest.mark.parametrize("act_order", [False, True])
@pytest.mark.parametrize("rows", DECODE_ROWS + PREFILL_ROWS)
def test_gptq_product(rng, group_size, act_order, rows):
    k, n = 256, 40
    q, zeros, scales, g_idx = _random_int4(rng, k, n, group_size, act_order)
    # the original GPTQ format stores zero - 1 (zeros here start at 1, as such a checkpoint's can)
    zeros = np.maximum(zeros, 1)
    weight = QuantizedWeight.gptq(_pack_gptq_qweight(q), _pack_along_n(zeros - 1, range(8)), scales, g_idx,
                                  group_size=group_size, device=TEST_DEVICE)
    assert (weight.g_idx is not None) == act_order and weight.shape == (n, k)
    _check(rng.standard_normal((rows, k)), weight, _reference_int4(q, zeros, scales, g_idx))


@pytest.mark.parametrize("group_size", [32, 64, 128])
@pytest.mark.parametrize("rows", [1, 7, 24])
def test_awq_product(rng, group_size, rows):
    k, n = 192, 48
    q, zeros, scales, groups = _random_int4(rng, k, n, group_size, False)
    weight = QuantizedWeight.awq(_pack_along_n(q, AWQ_ORDER), _pack_along_n(zeros, AWQ_ORDER), scales,
                                 group_size=group_size, device=TEST_DEVICE)
    _check(rng.standard_normal((rows, k)), weight, _reference_int4(q, zeros, scales, groups))


@pytest.mark.parametrize("rows", [1, 3, 16, 21])
def test_int4_odd_sizes(rng, rows):
    """K and N odd, K not a multiple of the packing or of the group."""
    k, n = 75, 37
    q, zeros, scales, g_idx = _random_int4(rng, k, n, 32, True)
    weight = QuantizedWeight.int4(q, scales, zeros, g_idx, group_size=32, device=TEST_DEVICE)
    _check(rng.standard_normal((rows, k)), weight, _reference_int4(q, zeros, scales, g_idx))


@pytest.mark.parametrize("rows", DECODE_ROWS + PREFILL_ROWS)
@pytest.mark.parametrize("shape", [(40, 96), (33, 77)])
def test_int8_product(rng, rows, shape):
    n, k = shape
    q = rng.integers(-127, 128, (n, k)).astype(np.int8)
    scales = rng.uniform(0.001, 0.02, n).astype(np.float32)
    weight = QuantizedWeight.int8(q, scales[:, None], device=TEST_DEVICE)
    _check(rng.standard_normal((rows, k)), weight, q.astype(np.float64) * scales.astype(np.float64)[:, None])


def _random_fp8(rng, mode):
    """An e4m3 weight of 131 x 260 (blocks of 128 with ragged edges along both) scaled per tensor, channel or
    128 x 128 block, and its values in float64."""
    n, k = 131, 260
    q = rng.standard_normal((n, k)).astype(ml_dtypes.float8_e4m3fn)
    shape = {"tensor": (1,), "channel": (n,), "block": (2, 3)}[mode]
    scales = rng.uniform(0.01, 0.1, shape).astype(np.float32)
    if mode == "block":
        expanded = np.repeat(np.repeat(scales, 128, 0), 128, 1)[:n, :k]
    else:
        expanded = np.broadcast_to(scales[:, None] if mode == "channel" else scales, (n, k))
    return QuantizedWeight.fp8(q, scales, device=TEST_DEVICE), q.astype(np.float64) * expanded.astype(np.float64)


@pytest.mark.parametrize("mode", ["tensor", "channel", "block"])
@pytest.mark.parametrize("rows", [1, 4, 16, 20])
def test_fp8_product(rng, mode, rows):
    weight, reference = _random_fp8(rng, mode)
    _check(rng.standard_normal((rows, reference.shape[1])), weight, reference)


def _e4m3_rows(x, scale_ub=None, block=None):
    """Rows rounded to e4m3 with one float32 scale each (largest magnitude over 448, that magnitude clamped at
    ``scale_ub`` first, the values then clamped to +-448 as fbgemm's quantize_fp8_per_row does), or one each
    ``block`` inputs of a row (1 x 128 blocks against 128 x 128 weight blocks), as float64 values."""
    x = x.astype(np.float32)
    rows, k = x.shape
    block = block or k
    blocks = -(-k // block)
    grouped = np.zeros((rows, blocks * block), np.float32)
    grouped[:, :k] = x
    grouped = grouped.reshape(rows, blocks, block)
    largest = np.abs(grouped).max(axis=2, keepdims=True)
    if scale_ub is not None:
        largest = np.minimum(largest, np.float32(scale_ub))
    scales = np.maximum(largest, np.finfo(np.float32).tiny) / np.float32(448)
    q = np.clip(grouped / scales, -448, 448).astype(ml_dtypes.float8_e4m3fn)
    return (q.astype(np.float64) * scales.astype(np.float64)).reshape(rows, -1)[:, :k]


@pytest.mark.parametrize("mode", ["tensor", "channel"])
@pytest.mark.parametrize("rows", [1, 5, 20])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_fp8_activations(rng, mode, rows, dtype):
    """Rows rounded to e4m3 per row, times the e4m3 weight: the reference rounds the rows as the module
    docstring of ``kernels/quant.py`` says (float32 scale, round to nearest even), then multiplies in float64;
    the product of two e4m3 values is exact in float32, so the float32 sum's bound holds (and the result's
    rounding for bfloat16 rows). K = 200 leaves a ragged K tile."""
    n, k = 24, 200
    q = rng.standard_normal((n, k)).astype(ml_dtypes.float8_e4m3fn)
    scales = rng.uniform(0.01, 0.1, (n,) if mode == "channel" else (1,)).astype(np.float32)
    weight = QuantizedWeight.fp8(q, scales, device=TEST_DEVICE)
    w = q.astype(np.float64) * (scales[:, None] if mode == "channel" else scales).astype(np.float64)
    x = rng.standard_normal((rows, k)).astype(NP_DTYPES[dtype])
    bias = rng.standard_normal(n).astype(NP_DTYPES[dtype])
    out = nbx.quantized_linear(to_nbx(x), weight, to_nbx(bias), fp8_activations=True)
    assert out.dtype.name == dtype and tuple(out.shape) == (rows, n)
    held = _e4m3_rows(x.astype(np.float64))
    expected = held @ w.T + bias.astype(np.float64)
    bound = _bound(held, w, k, "float32") + RELATIVE[dtype] * np.abs(expected)
    assert (np.abs(out.numpy().astype(np.float64) - expected) <= bound).all()
    # the rows really were rounded: the product of the unrounded rows lies outside the bound somewhere
    assert (np.abs(x.astype(np.float64) @ w.T + bias.astype(np.float64) - expected) > bound).any()


@pytest.mark.parametrize("form", ["fp8_gemm", "fp8_gemm_tiles"])
@pytest.mark.parametrize("k", [64, 192])
def test_fp8_products_read_no_weight_input_past_k(rng, monkeypatch, first_candidate, form, k):
    """The rows are padded with zeros to a multiple of 128 inputs and the K loop runs over all of them; with
    64-input K tiles and K a multiple of 64 but not of 128 (Llama's 64-wide heads, tiny models), the last tile
    lies wholly past K. Its weight loads must stay inside the weight (the last input read again, meeting the
    rows' zeros): read past it, they took the next rows' bytes or memory past the weight, whose e4m3 NaN (0x7f)
    made the product NaN on an H100 (0 x NaN). The launch is checked for the clamped form (the interpreter
    reads stray memory as it happens to be), and the product against float64. The forced setting is taken
    on every device (``first_candidate``: a compiling one would otherwise take its stored tuning)."""
    n = 24
    q = rng.standard_normal((n, k)).astype(ml_dtypes.float8_e4m3fn)
    scales = rng.uniform(0.01, 0.1, (1,)).astype(np.float32)
    weight = QuantizedWeight.fp8(q, scales, device=TEST_DEVICE)
    config = dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=64, num_stages=1, num_warps=4)
    if form == "fp8_gemm_tiles":
        config["PERSISTENT"] = True
    monkeypatch.setattr(quant_ops, "fp8_candidates", lambda *args, **kwargs: [config])
    plans.clear_all()
    x = rng.standard_normal((20, k)).astype(np.float32)
    with nbx.launch.capture() as recorded:
        out = nbx.quantized_linear(to_nbx(x), weight, fp8_activations=True)
    products = [launch for launch in recorded.launches if launch[0].fn.__name__ == form]
    assert products and all(launch[4]["EVEN_K"] is False for launch in products)
    w = q.astype(np.float64) * np.float64(scales[0])
    held = _e4m3_rows(x.astype(np.float64))
    expected = held @ w.T
    assert (np.abs(out.numpy().astype(np.float64) - expected) <= _bound(held, w, k, "float32")).all()
    plans.clear_all()


@pytest.mark.parametrize("rows", [3, 20])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_fp8_activations_clamp_row_scales_at_the_weights_bound(rng, rows, dtype):
    """fbgemm's ``activation_scale_ub``: a row's scale is min(largest magnitude, bound) / 448 and values past
    448 saturate. Rows scaled to either side of the bound; the reference clamps as the kernel should, and the
    reference without the bound is off by far more than the float32 sum's bound somewhere (the clamped rows'
    large values lose everything past 448 scales)."""
    n, k = 16, 200
    q = rng.standard_normal((n, k)).astype(ml_dtypes.float8_e4m3fn)
    scales = rng.uniform(0.01, 0.1, n).astype(np.float32)
    bound_ub = 2.5
    weight = QuantizedWeight.fp8(q, scales, activation_scale_ub=bound_ub, device=TEST_DEVICE)
    w = q.astype(np.float64) * scales.astype(np.float64)[:, None]
    x = rng.standard_normal((rows, k)) * np.where(np.arange(rows) % 2, 4.0, 0.3)[:, None]
    x = x.astype(NP_DTYPES[dtype])
    out = nbx.quantized_linear(to_nbx(x), weight, fp8_activations=True).numpy().astype(np.float64)
    held = _e4m3_rows(x.astype(np.float64), scale_ub=bound_ub)
    expected = held @ w.T
    bound = _bound(held, w, k, "float32") + RELATIVE[dtype] * np.abs(expected)
    assert (np.abs(out - expected) <= bound).all()
    unbounded = _e4m3_rows(x.astype(np.float64)) @ w.T
    assert (np.abs(unbounded - expected) > bound).any()
    # rows whose largest magnitude lies under the bound round as they would without it
    small = np.abs(x.astype(np.float64)).max(axis=1) < bound_ub
    assert small.any() and np.array_equal(_e4m3_rows(x.astype(np.float64), bound_ub)[small],
                                          _e4m3_rows(x.astype(np.float64))[small])


@pytest.mark.parametrize("rows", [5, 20])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_fp8_activations_against_block_scaled_weights(rng, rows, dtype):
    """128 x 128 weight blocks (DeepSeek-V3's): the rows are rounded in 1 x 128 blocks, a scale each, and each K
    block's product is scaled by its two blocks' scales. N = 131 and K = 260 leave ragged blocks along both. One
    input is 64 times its row's others, so a row-wide scale would round the other blocks far more coarsely:
    the reference rounding whole rows lies outside the bound somewhere."""
    n, k = 131, 260
    q = rng.standard_normal((n, k)).astype(ml_dtypes.float8_e4m3fn)
    scales = rng.uniform(0.01, 0.1, (2, 3)).astype(np.float32)
    weight = QuantizedWeight.fp8(q, scales, device=TEST_DEVICE)
    w = q.astype(np.float64) * np.repeat(np.repeat(scales, 128, 0), 128, 1)[:n, :k].astype(np.float64)
    x = rng.standard_normal((rows, k))
    x[:, 140] *= 64
    x = x.astype(NP_DTYPES[dtype])
    bias = rng.standard_normal(n).astype(NP_DTYPES[dtype])
    out = nbx.quantized_linear(to_nbx(x), weight, to_nbx(bias), fp8_activations=True)
    assert out.dtype.name == dtype and tuple(out.shape) == (rows, n)
    held = _e4m3_rows(x.astype(np.float64), block=128)
    expected = held @ w.T + bias.astype(np.float64)
    # each K block's float32 product is scaled (two float32 roundings) before the float32 sum: within the bound
    # of K float32 steps
    bound = _bound(held, w, k, "float32") + RELATIVE[dtype] * np.abs(expected)
    assert (np.abs(out.numpy().astype(np.float64) - expected) <= bound).all()
    whole_rows = _e4m3_rows(x.astype(np.float64)) @ w.T + bias.astype(np.float64)
    assert (np.abs(whole_rows - expected) > bound).any()


@pytest.mark.parametrize("scaling", ["dynamic", "bounded", "static", "block"])
def test_fp8_rows_whole_and_looped_forms_round_alike(rng, monkeypatch, scaling):
    """Rows that fit one tile are rounded by ``fp8_rows_whole`` (each row read once), longer ones by ``fp8_rows``
    (a program a group, looping over it). With the whole-row limit lowered under these rows, the looping form
    takes them and the products come out bit for bit as the whole-row form's: both divide by the same correctly
    rounded scale and round each quotient once. K = 260 leaves ragged
    128-blocks."""
    from nbxtensor.ops import quant as quant_ops
    n, k = 131, 260
    q = rng.standard_normal((n, k)).astype(ml_dtypes.float8_e4m3fn)
    scales = rng.uniform(0.01, 0.1, (2, 3) if scaling == "block" else (n,)).astype(np.float32)
    options = {"bounded": dict(activation_scale_ub=1.5),
               "static": dict(activation_scale=np.array([2.0 / 448], np.float32))}.get(scaling, {})
    weight = QuantizedWeight.fp8(q, scales, device=TEST_DEVICE, **options)
    x = to_nbx((rng.standard_normal((7, k)) * 2).astype(np.float32))

    def product(whole_limit):
        monkeypatch.setattr(quant_ops, "FP8_ROWS_WHOLE_MAX", whole_limit)
        quant_ops._plans.clear()
        launch = quant_ops._fp8_rows_launch(x, 7, k, 384, 3 if scaling == "block" else 1, quant_ops.K.SCALE_DYNAMIC,
                                            0.0, True)
        return launch.kernel, nbx.quantized_linear(x, weight, fp8_activations=True).numpy()

    whole_kernel, whole = product(quant_ops.FP8_ROWS_WHOLE_MAX)
    looped_kernel, looped = product(32)
    quant_ops._plans.clear()
    assert whole_kernel is quant_ops.K.fp8_rows_whole and looped_kernel is quant_ops.K.fp8_rows
    assert np.array_equal(whole.view(np.uint32), looped.view(np.uint32))


@pytest.mark.parametrize("rows", [3, 20])
def test_fp8_activations_with_a_static_scale(rng, rows):
    """A static input scale (compressed-tensors' ``input_scale``): every row divided by the one scale, values past
    448 of it saturating; the reference scaling each row by its own largest magnitude lies outside the bound."""
    n, k = 16, 200
    q = rng.standard_normal((n, k)).astype(ml_dtypes.float8_e4m3fn)
    scales = rng.uniform(0.01, 0.1, 1).astype(np.float32)
    static = np.float32(2.0 / 448)
    weight = QuantizedWeight.fp8(q, scales, activation_scale=np.array([static]), device=TEST_DEVICE)
    w = q.astype(np.float64) * np.float64(scales[0])
    x = (rng.standard_normal((rows, k)) * np.where(np.arange(rows) % 2, 3.0, 0.2)[:, None]).astype(np.float32)
    out = nbx.quantized_linear(to_nbx(x), weight, fp8_activations=True).numpy().astype(np.float64)
    held = np.clip(x / static, -448, 448).astype(ml_dtypes.float8_e4m3fn).astype(np.float64) * np.float64(static)
    expected = held @ w.T
    bound = _bound(held, w, k, "float32")
    assert (np.abs(out - expected) <= bound).all()
    assert (np.abs(_e4m3_rows(x.astype(np.float64)) @ w.T - expected) > bound).any()


def test_fp8_activations_refuse_other_weights(rng):
    x = to_nbx(np.ones((2, 128), np.float32))
    for format in ("int8", "int4"):
        weight = QuantizedWeight.quantize(rng.standard_normal((8, 128)).astype(np.float32), format, device=TEST_DEVICE)
        with pytest.raises(RuntimeError, match="fp8_activations takes an fp8 weight"):
            nbx.quantized_linear(x, weight, fp8_activations=True)
    q = np.zeros((4, 8), ml_dtypes.float8_e4m3fn)
    for bad in (0.0, -1.0, float("inf"), float("nan"), "1200", True, np.ones(2, np.float32)):
        for option in ("activation_scale", "activation_scale_ub"):
            with pytest.raises(QuantizationError, match=f"{option}: expected a positive finite number"):
                QuantizedWeight.fp8(q, np.ones(4, np.float32), **{option: bad})
    with pytest.raises(QuantizationError, match="exclude each other"):
        QuantizedWeight.fp8(q, np.ones(4, np.float32), activation_scale=0.5, activation_scale_ub=100.0)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("rows", [1, 6, 18])
@pytest.mark.parametrize("format", ["int4", "int8", "fp8"])
def test_half_precision_rows_with_bias(rng, dtype, rows, format):
    n, k = 36, 128
    w = rng.standard_normal((n, k)) * 0.1
    weight = QuantizedWeight.quantize(w.astype(NP_DTYPES[dtype]), format, group_size=64, device=TEST_DEVICE)
    assert weight.dtype.name == dtype
    _check(rng.standard_normal((rows, k)), weight, weight.dequantize().astype(np.float64), dtype,
           bias=rng.standard_normal(n))


def test_dequantize_agrees_with_the_reference(rng):
    q, zeros, scales, g_idx = _random_int4(rng, 64, 16, 32, True)
    weight = QuantizedWeight.int4(q, scales, zeros, g_idx, group_size=32, device=TEST_DEVICE)
    assert np.array_equal(weight.dequantize(), _reference_int4(q, zeros, scales, g_idx).astype(np.float32))


def test_batched_and_strided_inputs(rng):
    k, n = 64, 24
    q, zeros, scales, groups = _random_int4(rng, k, n, 32, False)
    weight = QuantizedWeight.int4(q, scales, zeros, group_size=32, device=TEST_DEVICE)
    reference = _reference_int4(q, zeros, scales, groups)
    x = rng.standard_normal((2, 3, k))
    _check(x, weight, reference)
    # a transposed input whose rows do not merge into one matrix view
    wide = rng.standard_normal((3, k, 2))
    out = nbx.quantized_linear(to_nbx(wide.astype(np.float32)).transpose(1, 2), weight)
    expected = wide.transpose(0, 2, 1) @ reference.T
    assert np.allclose(out.numpy(), expected, rtol=0, atol=_bound(np.abs(wide).max() * np.ones((1, k)), reference, k,
                                                                  "float32").max())
    # a 1-D input and zero rows
    assert tuple(nbx.quantized_linear(to_nbx(x[0, 0].astype(np.float32)), weight).shape) == (n,)
    assert tuple(nbx.quantized_linear(to_nbx(np.zeros((0, k), np.float32)), weight).shape) == (0, n)


@pytest.mark.parametrize("format", ["int4", "int8", "fp8"])
def test_row_slices_are_views_of_the_weight(rng, format):
    """A fused projection (q, k, v stacked) is read as row blocks of one quantized weight."""
    w = rng.standard_normal((256, 128))
    options = dict(fp8_scales="block") if format == "fp8" else dict(group_size=32)
    weight = QuantizedWeight.quantize(w.astype(np.float32), format, device=TEST_DEVICE, **options)
    full = weight.dequantize().astype(np.float64)
    x = rng.standard_normal((3, 128))
    for rows in (slice(0, 128), slice(128, 256)):
        part = weight[rows]
        assert part.shape == (128, 128) and part.qweight.data_ptr() >= weight.qweight.data_ptr()
        _check(x, part, full[rows])
    if format == "fp8":
        with pytest.raises(QuantizationError, match="block"):
            weight[0:100]


@pytest.mark.parametrize("format", ["int4", "int8", "fp8"])
def test_joined_rows_stack_the_weights(rng, format):
    """q, k and v (or gate and up) quantized apart and joined by output rows are one weight whose rows are
    theirs, so one product computes all three; act-order weights (each its own input permutation) and
    block scales stay apart."""
    options = dict(fp8_scales="channel") if format == "fp8" else dict(group_size=32)
    parts = [QuantizedWeight.quantize(rng.standard_normal((n, 64)).astype(np.float32), format, device=TEST_DEVICE,
                                      **options) for n in (32, 16, 16)]
    joined = join_rows(parts)
    assert joined.shape == (64, 64) and joined.format == format
    np.testing.assert_array_equal(joined.dequantize(), np.vstack([p.dequantize() for p in parts]))
    x = rng.standard_normal((2, 64))
    _check(x, joined, joined.dequantize().astype(np.float64))
    if format == "fp8":
        blocked = [QuantizedWeight.quantize(rng.standard_normal((128, 128)).astype(np.float32), "fp8",
                                            fp8_scales="block", device=TEST_DEVICE) for _ in range(2)]
        assert join_rows(blocked) is None
        bounded = [QuantizedWeight.fp8(p.qweight.numpy(), p.scales.numpy().T, activation_scale_ub=ub,
                                       device=TEST_DEVICE) for p, ub in zip(parts, (100.0, 100.0, 200.0))]
        assert join_rows(bounded[:2]).activation_scale_ub == 100.0 and join_rows(bounded) is None
        static = [QuantizedWeight.fp8(p.qweight.numpy(), p.scales.numpy().T, activation_scale=scale,
                                      device=TEST_DEVICE) for p, scale in zip(parts, (0.01, 0.01, 0.02))]
        assert join_rows(static[:2]).activation_scale == np.float32(0.01) and join_rows(static) is None
    if format == "int4":
        q, zeros, scales, g_idx = _random_int4(rng, 64, 16, 32, True)
        ordered = QuantizedWeight.int4(q, scales, zeros, g_idx, group_size=32, device=TEST_DEVICE)
        assert join_rows([ordered, ordered]) is None


# ---- the registry and refusals --------------------------------------------------------------------------
def test_meta_and_cost_rules(rng):
    q, zeros, scales, g_idx = _random_int4(rng, 256, 64, 128, True)
    weight = QuantizedWeight.int4(q, scales, zeros, g_idx, group_size=128, device=TEST_DEVICE)
    # packed values (256 / 8 words per column), float16 scales and uint8 zero points per group, int32 g_idx
    assert weight.nbytes == 32 * 64 * 4 + 2 * 64 * 2 + 2 * 64 + 256 * 4
    op = registry.get("quantized_linear")
    assert registry.lookup("nbx::quantized_linear") is op
    x = registry.TensorMeta((3, 5, 256), nbx.float16)
    assert op.meta(x, weight) == registry.TensorMeta((3, 5, 64), nbx.float16)
    cost = op.cost(x, weight)
    assert cost.flops == 2 * 15 * 64 * 256
    assert cost.bytes_read == 15 * 256 * 2 + weight.nbytes and cost.bytes_written == 15 * 64 * 2


def test_bad_inputs_are_refused_by_name(rng):
    q, zeros, scales, g_idx = _random_int4(rng, 64, 16, 32, False)
    weight = QuantizedWeight.int4(q, scales, zeros, group_size=32, device=TEST_DEVICE)
    with pytest.raises(RuntimeError, match="last dim must be 64"):
        nbx.quantized_linear(to_nbx(np.zeros((2, 63), np.float32)), weight)
    with pytest.raises(RuntimeError, match=r"bias must have shape \(16,\)"):
        nbx.quantized_linear(to_nbx(np.zeros((2, 64), np.float32)), weight, to_nbx(np.zeros(15, np.float32)))
    with pytest.raises(TypeError, match="QuantizedWeight"):
        nbx.quantized_linear(to_nbx(np.zeros((2, 64), np.float32)), to_nbx(np.zeros((16, 64), np.float32)))
    with pytest.raises(TypeError, match="int32"):
        nbx.quantized_linear(to_nbx(np.zeros((2, 64), np.int32)), weight)
    with pytest.raises(QuantizationError, match="group indices must lie in 0..1"):
        QuantizedWeight.int4(q, scales, zeros, np.full(64, 2, np.int32), group_size=32)
    with pytest.raises(QuantizationError, match=r"int4 scales: expected shape \(2, 16\)"):
        QuantizedWeight.int4(q, scales[:1], zeros, group_size=32)
    with pytest.raises(QuantizationError, match="qzeros: expected shape"):
        QuantizedWeight.gptq(_pack_gptq_qweight(q), np.zeros((2, 1), np.int32), scales, group_size=32)
    with pytest.raises(QuantizationError, match="past 4 bits"):
        QuantizedWeight.gptq(_pack_gptq_qweight(q), _pack_along_n(np.full((2, 16), 15), range(8)), scales,
                             group_size=32)
    with pytest.raises(QuantizationError, match="int8 scales: expected one per output channel"):
        QuantizedWeight.int8(np.zeros((4, 8), np.int8), np.ones(8, np.float32))
    with pytest.raises(QuantizationError, match="fp8 scales: shape"):
        QuantizedWeight.fp8(np.zeros((4, 8), ml_dtypes.float8_e4m3fn), np.ones(3, np.float32))
    with pytest.raises(QuantizationError, match="formats are int4, int8, fp8, not 'int3'"):
        QuantizedWeight.quantize(np.ones((4, 8), np.float32), "int3")
    with pytest.raises(QuantizationError, match="inf or NaN"):
        QuantizedWeight.quantize(np.full((4, 8), np.inf, np.float32), "int8")
