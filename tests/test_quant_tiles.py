"""The quantized products' tile layouts, with the settings forced rather than tuned: K split into several
tiles and splits, int4 words expanded in registers, scales read once per group (a tile holding several
groups or lying inside one) or per input (act-order, groups that straddle tiles), odd K and N.

The reference is ``test_quant.py``'s: its own packing loops and a float64 NumPy product; the tolerance is
its float32 bound (every dequantized weight is exact in float32, so only the float32 sum errs).
"""
import ml_dtypes
import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.device import multiprocessors, resolve
from nbxtensor.ops import quant as quant_ops
from nbxtensor.ops.plans import PlanCache
from nbxtensor.quant import QuantizedWeight

from .conftest import TEST_DEVICE, to_nbx
from .test_quant import _bound, _check, _pack_gptq_qweight, _pack_along_n, _random_int4, _reference_int4

ROWS = (1, 4, 16, 24)  # decode GEMV (one row, several), and a prefill GEMM


@pytest.fixture
def forced(monkeypatch):
    """``force(block_k, splits)``: later products run with these settings (small tiles along N and M; several
    16-bit rows take K tiles of at least ``quant_ops.MIN_CONVERTED_DOT_K``)."""
    def force(block_k, splits):
        def chosen(key, facts, candidates, prepare):
            if key.startswith("quantized_gemv"):
                return dict(BLOCK_N=16, BLOCK_K=block_k, SPLITS=splits, num_warps=4)
            return dict(BLOCK_M=16, BLOCK_N=16, BLOCK_K=block_k, num_stages=1, num_warps=4)
        monkeypatch.setattr(quant_ops.tuning, "choose_timed", chosen)
        monkeypatch.setattr(quant_ops, "_plans", PlanCache())
    return force


@pytest.mark.parametrize("group_size, block_k", [(32, 16), (32, 64), (64, 32), (128, 32), (128, 64), (48, 32)])
@pytest.mark.parametrize("rows", ROWS)
def test_gptq_groups_against_tiles(rng, forced, group_size, block_k, rows):
    k, n = 256, 40
    forced(block_k, 3)
    q, zeros, scales, g_idx = _random_int4(rng, k, n, group_size, False)
    zeros = np.maximum(zeros, 1)
    weight = QuantizedWeight.gptq(_pack_gptq_qweight(q), _pack_along_n(zeros - 1, range(8)), scales, g_idx,
                                  group_size=group_size, device=TEST_DEVICE)
    expected = {(32, 16): 1, (32, 64): 2, (64, 32): 1, (128, 32): 1, (128, 64): 1, (48, 32): 0}
    assert quant_ops._groups_in_tile(weight, k, block_k) == expected[group_size, block_k]
    _check(rng.standard_normal((rows, k)), weight, _reference_int4(q, zeros, scales, g_idx))


@pytest.mark.parametrize("group_size", [32, 64, 128])
@pytest.mark.parametrize("rows", ROWS)
def test_act_order_across_tiles(rng, forced, group_size, rows):
    k, n = 256, 24
    forced(32, 2)
    q, zeros, scales, g_idx = _random_int4(rng, k, n, group_size, True)
    weight = QuantizedWeight.int4(q, scales, zeros, g_idx, group_size=group_size, device=TEST_DEVICE)
    assert quant_ops._groups_in_tile(weight, k, 32) == 0
    _check(rng.standard_normal((rows, k)), weight, _reference_int4(q, zeros, scales, g_idx))


@pytest.mark.parametrize("group_size, block_k", [(32, 64), (32, 16), (64, 64)])
@pytest.mark.parametrize("rows", ROWS)
def test_int4_odd_sizes_across_tiles(rng, forced, group_size, block_k, rows):
    """K not a multiple of 8, of the group or of the tile; N odd; the last split short."""
    k, n = 203, 37
    forced(block_k, 3)
    q, zeros, scales, g_idx = _random_int4(rng, k, n, group_size, False)
    weight = QuantizedWeight.int4(q, scales, zeros, None, group_size=group_size, device=TEST_DEVICE)
    _check(rng.standard_normal((rows, k)), weight, _reference_int4(q, zeros, scales, g_idx))


@pytest.mark.parametrize("rows", ROWS)
def test_int8_across_tiles(rng, forced, rows):
    n, k = 33, 77
    forced(16, 2)
    q = rng.integers(-127, 128, (n, k)).astype(np.int8)
    scales = rng.uniform(0.001, 0.02, n).astype(np.float32)
    weight = QuantizedWeight.int8(q, scales[:, None], device=TEST_DEVICE)
    assert quant_ops._groups_in_tile(weight, k, 16) == 1
    _check(rng.standard_normal((rows, k)), weight, q.astype(np.float64) * scales.astype(np.float64)[:, None])


@pytest.mark.parametrize("mode", ["channel", "block"])
@pytest.mark.parametrize("rows", ROWS)
def test_fp8_across_tiles(rng, forced, mode, rows):
    n, k = 131, 260  # 128 x 128 blocks with ragged edges; K tiles of 32 lie inside a block
    forced(32, 3)
    q = rng.standard_normal((n, k)).astype(ml_dtypes.float8_e4m3fn)
    scales = rng.uniform(0.01, 0.1, (n,) if mode == "channel" else (2, 3)).astype(np.float32)
    weight = QuantizedWeight.fp8(q, scales, device=TEST_DEVICE)
    assert quant_ops._groups_in_tile(weight, k, 32) == 1
    if mode == "block":
        expanded = np.repeat(np.repeat(scales, 128, 0), 128, 1)[:n, :k]
    else:
        expanded = np.broadcast_to(scales[:, None], (n, k))
    _check(rng.standard_normal((rows, k)), weight, q.astype(np.float64) * expanded.astype(np.float64))


@pytest.mark.parametrize("block_k, splits", [(16, 1), (64, 3)])
@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_int4_every_nibble_and_zero_point(rng, forced, block_k, splits, rows, dtype):
    """Every 4-bit value against every zero point, in every nibble of a word: the kernels read a nibble's value
    through the bits of a float (module docstring of ``kernels/quant.py``; 16-bit rows as 16 + value at one
    row), so each (value, zero, position) is checked once. Unit inputs make each output a plain sum of
    (value - zero) * scale, exact in every rows' type."""
    k, n = 16 * 8, 16
    forced(block_k, splits)
    q = np.tile(np.arange(16, dtype=np.uint8).repeat(8)[:, None], (1, n))  # input 8v + i holds value v, nibble i
    zeros = np.tile(np.arange(16, dtype=np.uint8)[None, :], (k // 32, 1))  # column c has zero point c
    scales = np.full((k // 32, n), 0.5, np.float16)
    weight = QuantizedWeight.int4(q, scales, zeros, group_size=32, device=TEST_DEVICE)
    reference = _reference_int4(q, zeros, scales, np.arange(k) // 32)
    eye = np.zeros((rows, k))
    eye[np.arange(rows), (np.arange(rows) * 37) % k] = 1.0  # each row picks one (value, nibble) of every column
    _check(eye, weight, reference, dtype)
    _check(rng.standard_normal((rows, k)), weight, reference, dtype)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("rows", ROWS)
def test_int4_half_precision_rows_inside_groups(rng, forced, dtype, rows):
    """K tiles inside one group: up to 16 rows multiply the tile of nibble - zero in the rows' type and scale
    the product after the dot; the tile stays within float16's range."""
    k, n = 256, 24
    forced(32, 2)
    q, zeros, scales, g_idx = _random_int4(rng, k, n, 64, False)
    weight = QuantizedWeight.int4(q, scales, zeros, group_size=64, device=TEST_DEVICE)
    assert quant_ops._groups_in_tile(weight, k, 32) == 1
    _check(rng.standard_normal((rows, k)), weight, _reference_int4(q, zeros, scales, g_idx), dtype)


def _rows_settings(rows, n, k, group_size):
    """The first int4 GEMV setting offered on an H100 for ``rows`` rows (``_GEMV_INT4_ROWS_SHAPES``: K tiles
    inside one group, split K), and the first swapped one (the weight tile the dot's first operand)."""
    from nbxtensor.device.facts import load as load_facts
    offered = quant_ops.decode_candidates(load_facts("hopper"), rows, n, k, "int4", group_size)
    return [offered[0], next(config for config in offered if config.get("SWAPPED"))]


@pytest.mark.parametrize("group_size", [32, 64, 128])
@pytest.mark.parametrize("rows", (2, 4, 7, 16))
@pytest.mark.parametrize("dtype, k", [("float32", 384), ("bfloat16", 384), ("float16", 203)])
def test_int4_rows_at_the_offered_rows_settings(rng, monkeypatch, group_size, rows, dtype, k):
    """2-16 rows at the settings an H100 times first, odd N: the factored form (a K tile inside one group, the
    product scaled after the dot; compiled, the kernel prefetches each tile's scales and zero points), plain
    and swapped (the product taken transposed), and with act-order the same settings through the per-input
    form. K odd (203) leaves a short last group and K tile."""
    n = 77
    for settings in _rows_settings(rows, n, k, group_size):
        monkeypatch.setattr(quant_ops.tuning, "choose_timed", lambda key, facts, candidates, prepare: settings)
        monkeypatch.setattr(quant_ops, "_plans", PlanCache())
        for act_order in (False, True):
            q, zeros, scales, g_idx = _random_int4(rng, k, n, group_size, act_order)
            weight = QuantizedWeight.int4(q, scales, zeros, g_idx if act_order else None, group_size=group_size,
                                          device=TEST_DEVICE)
            assert quant_ops._groups_in_tile(weight, k, settings["BLOCK_K"]) == (0 if act_order else 1)
            _check(rng.standard_normal((rows, k)), weight, _reference_int4(q, zeros, scales, g_idx), dtype)


@pytest.mark.parametrize("dtype, k, group_size", [("bfloat16", 512, 128), ("float16", 300, 32), ("float32", 256, 64)])
def test_int4_one_row_at_the_offered_pipelined_settings(rng, monkeypatch, dtype, k, group_size):
    """One row at every setting an H100 times with the K loop pipelined (``LOOP_STAGES``: compiled, each
    step's words, scales, zero points and row copied ahead into shared memory; the float GEMV's pipelined
    settings too), odd N; K 300 leaves a short last tile. The interpreter runs the same steps unpipelined, so on the CPU this checks the settings' split
    and tile arithmetic, and on a GPU the pipelined loops."""
    from nbxtensor.device.facts import load as load_facts
    n = 77
    offered = [config for config in quant_ops.decode_candidates(load_facts("hopper"), 1, n, k, "int4", group_size)
               if config.get("LOOP_STAGES")]
    assert len(offered) >= 5  # some coincide once clamped to a short K
    int4_only = [config for config in offered if config not in quant_ops.decode_candidates(
        load_facts("hopper"), 1, n, k, "int4", group_size, whole_words=False)]
    assert int4_only  # ``_GEMV_INT4_ONE_ROW_PIPELINED``, offered only where every word lies in one group
    q, zeros, scales, g_idx = _random_int4(rng, k, n, group_size, False)
    weight = QuantizedWeight.int4(q, scales, zeros, group_size=group_size, device=TEST_DEVICE)
    reference = _reference_int4(q, zeros, scales, g_idx)
    for settings in offered:
        monkeypatch.setattr(quant_ops.tuning, "choose_timed", lambda key, facts, candidates, prepare: settings)
        monkeypatch.setattr(quant_ops, "_plans", PlanCache())
        _check(rng.standard_normal((1, k)), weight, reference, dtype)


@pytest.mark.parametrize("group_size", [16, 32, 48, 64, 96, 128, 4096])
def test_int4_rows_settings_take_k_tiles_inside_one_group(group_size):
    """Offered for 2-16 rows first: K tiles of a power of two dividing the group (any, where one group is all of
    K) and at least MIN_CONVERTED_DOT_K, so that the factored form runs; where no such tile exists (groups of 16
    or 48) the float GEMV's settings lead as before. One row's settings keep their order."""
    from nbxtensor.device.facts import load as load_facts
    from nbxtensor.ops.matmul_gemv import gemv_candidates
    facts = load_facts("hopper")
    k, n = 4096, 28672
    offered = quant_ops.decode_candidates(facts, 4, n, k, "int4", group_size)
    assert len({tuple(sorted(config.items())) for config in offered}) == len(offered)
    leading = offered[:offered.index(gemv_candidates(facts, 4, n, k)[0])]
    assert bool(leading) == (group_size not in (16, 48))
    for config in leading:
        assert config["BLOCK_K"] >= quant_ops.MIN_CONVERTED_DOT_K
        assert group_size >= k or group_size % config["BLOCK_K"] == 0
    assert quant_ops.decode_candidates(facts, 1, n, k, "int4", group_size)[0] == gemv_candidates(facts, 1, n, k)[0]


def _every_byte(format, n):
    """(n, 256) int8 or e4m3 values holding every byte at input b (e4m3's two NaNs as zero) and their float64
    values."""
    codes = np.arange(256, dtype=np.uint8)
    if format == "int8":
        q = codes.view(np.int8)
    else:
        q = np.where((codes & 0x7F) == 0x7F, 0, codes).astype(np.uint8).view(ml_dtypes.float8_e4m3fn)
    q = np.tile(q[None, :], (n, 1))
    return q, q.astype(np.float64)


@pytest.mark.parametrize("format", ["int8", "fp8"])
@pytest.mark.parametrize("block_k, splits", [(32, 3), (64, 2)])
@pytest.mark.parametrize("rows", (2, 4, 16))
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_byte_weights_every_value_at_several_rows(rng, forced, format, block_k, splits, rows, dtype):
    """int8 and e4m3 weights at 2-16 rows, the K tile inside one group of scales: the bytes convert straight to
    the rows' type and the tile's product meets the per-column scales after the dot. Every byte value is
    checked through unit rows (each output one value times a power-of-two scale, exact in every rows' type),
    then random rows against the float64 bound."""
    n = 24
    forced(block_k, splits)
    q, values = _every_byte(format, n)
    scales = np.exp2(rng.integers(-3, 1, n)).astype(np.float32)
    weight = (QuantizedWeight.int8(q, scales[:, None], device=TEST_DEVICE) if format == "int8"
              else QuantizedWeight.fp8(q, scales, device=TEST_DEVICE))
    assert quant_ops._groups_in_tile(weight, q.shape[1], block_k) == 1
    reference = values * scales.astype(np.float64)[:, None]
    eye = np.zeros((rows, q.shape[1]))
    eye[np.arange(rows), (np.arange(rows) * 37) % q.shape[1]] = 1.0
    _check(eye, weight, reference, dtype)
    _check(rng.standard_normal((rows, q.shape[1])), weight, reference, dtype)


@pytest.mark.parametrize("format", ["int8", "fp8"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_byte_weights_every_value_at_one_row(rng, forced, format, dtype):
    """One row of int8 and e4m3 weights, K odd (the last tile's bytes masked): output n of a unit row is byte n
    of input 0 times its power-of-two scale, exact, so every byte value's conversion is checked (compiled, int8
    becomes a float by its bits, not I2F); then random rows against the float64 bound."""
    k = 37
    forced(32, 2)
    q, values = _every_byte(format, k)
    q, values = np.ascontiguousarray(q.T), np.ascontiguousarray(values.T)  # (256, k): output n holds byte n
    scales = np.exp2(rng.integers(-3, 1, 256)).astype(np.float32)
    weight = (QuantizedWeight.int8(q, scales[:, None], device=TEST_DEVICE) if format == "int8"
              else QuantizedWeight.fp8(q, scales, device=TEST_DEVICE))
    reference = values * scales.astype(np.float64)[:, None]
    unit = np.zeros((1, k))
    unit[0, 0] = 1.0
    _check(unit, weight, reference, dtype)
    _check(rng.standard_normal((1, k)), weight, reference, dtype)


@pytest.mark.parametrize("mode, block_k", [("tensor", 32), ("channel", 32), ("block", 32), ("block", 256)])
@pytest.mark.parametrize("rows", (3, 16))
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_fp8_half_precision_rows_odd_sizes(rng, forced, mode, block_k, rows, dtype):
    """16-bit rows by an e4m3 weight of odd N and K (ragged 128 x 128 blocks, a short last split), the K tile
    inside one block or holding two (a dot and a scaling each): the masked inputs past K read as zeros."""
    n, k = 131, 260
    forced(block_k, 3 if block_k == 32 else 2)
    q = rng.standard_normal((n, k)).astype(ml_dtypes.float8_e4m3fn)
    scales = rng.uniform(0.01, 0.1, {"tensor": (1,), "channel": (n,), "block": (2, 3)}[mode]).astype(np.float32)
    weight = QuantizedWeight.fp8(q, scales, device=TEST_DEVICE)
    assert quant_ops._groups_in_tile(weight, k, block_k) == (2 if block_k == 256 else 1)
    if mode == "block":
        expanded = np.repeat(np.repeat(scales, 128, 0), 128, 1)[:n, :k]
    else:
        expanded = np.broadcast_to(scales[:, None] if mode == "channel" else scales, (n, k))
    _check(rng.standard_normal((rows, k)), weight, q.astype(np.float64) * expanded.astype(np.float64), dtype)


# ``fp8_gemm_tiles``' forms (``ops/quant.py``'s _FP8_TILE_VARIANTS): one program a tile or a persistent walk
# (three programs under the interpreter, so each walks several tiles), through pointers or descriptors, the
# loops flattened
TILE_FORMS = [dict(PERSISTENT=True, TMA=True), dict(PERSISTENT=True, TMA=True, FLATTEN=True), dict(TMA=True),
              dict(PERSISTENT=True)]


@pytest.mark.parametrize("flags", TILE_FORMS, ids=lambda flags: "+".join(flags))
@pytest.mark.parametrize("mode", ["channel", "block"])
def test_fp8_activations_through_the_tile_walk(rng, monkeypatch, flags, mode):
    """Rows rounded to e4m3 times an fp8 weight through each ``fp8_gemm_tiles`` form, forced with small tiles
    (3 x 5 of them; K = 272 leaves a ragged K tile and 128-block, its rows 16-byte aligned so descriptors take
    the weight), against ``test_quant``'s float64 reference of the rounded rows: each product of two e4m3
    values is exact in float32, so only the float32 sum errs (the block form scales each K tile's product in
    float32 first, two roundings more a tile, within the same bound at these depths)."""
    from .test_quant import _e4m3_rows
    n, k, rows = 131, 272, 40
    launched = []

    class Recorded(quant_ops.PlannedLaunch):
        def __init__(self, kernel, grid, args, constexprs):
            launched.append((kernel.__name__, grid, constexprs.get("TMA")))
            super().__init__(kernel, grid, args, constexprs)

    def chosen(key, facts, candidates, prepare):
        return dict(BLOCK_M=16, BLOCK_N=32, BLOCK_K=64, num_stages=1, num_warps=4, **flags)
    monkeypatch.setattr(quant_ops.tuning, "choose_timed", chosen)
    monkeypatch.setattr(quant_ops, "_plans", PlanCache())
    monkeypatch.setattr(quant_ops, "PlannedLaunch", Recorded)
    q = rng.standard_normal((n, k)).astype(ml_dtypes.float8_e4m3fn)
    scales = rng.uniform(0.01, 0.1, (n,) if mode == "channel" else (2, 3)).astype(np.float32)
    weight = QuantizedWeight.fp8(q, scales, device=TEST_DEVICE)
    if mode == "block":
        expanded = np.repeat(np.repeat(scales, 128, 0), 128, 1)[:n, :k]
    else:
        expanded = np.broadcast_to(scales[:, None], (n, k))
    w = q.astype(np.float64) * expanded.astype(np.float64)
    x = rng.standard_normal((rows, k)).astype(np.float32)
    out = nbx.quantized_linear(to_nbx(x), weight, fp8_activations=True).numpy().astype(np.float64)
    held = _e4m3_rows(x.astype(np.float64), block=128 if mode == "block" else None)
    expected = held @ w.T
    assert (np.abs(out - expected) <= _bound(held, w, k, "float32")).all()
    tiles = 3 * 5
    programs = min(tiles, multiprocessors(resolve(TEST_DEVICE))) if flags.get("PERSISTENT") else tiles
    assert ("fp8_gemm_tiles", (programs,), bool(flags.get("TMA"))) in launched


@pytest.mark.parametrize("name", ["hopper", "ada"])
@pytest.mark.parametrize("group_k", [None, 128])
def test_fp8_candidates_fit_the_device(name, group_k):
    """Every float8 setting offered stages its tiles within the facts' shared memory (one byte an element, the
    rows' and the weight's tile a stage, and a flattened walk's output tile), takes K tiles dividing a
    block-scaled weight's 128 inputs, reads through descriptors only where the matrix unit is ``wgmma``, and
    walks tiles (``fp8_gemm_tiles``) only with int32 indices."""
    from nbxtensor.device.facts import load as load_facts
    facts = load_facts(name)
    offered = quant_ops.fp8_candidates(facts, 4096, 4096, 4096, group_k, blocked=group_k is not None)
    for config in offered:
        staged = (config["BLOCK_M"] + config["BLOCK_N"]) * config["BLOCK_K"] * config["num_stages"]
        staged += 2 * config["BLOCK_M"] * config["BLOCK_N"] if config.get("FLATTEN") else 0
        assert staged <= facts["shared_memory_per_block_bytes"]
        assert group_k is None or group_k % config["BLOCK_K"] == 0
    assert any(config.get("TMA") for config in offered) == (facts["matrix_unit"]["instruction"] == "wgmma")
    assert any(config.get("PERSISTENT") for config in offered)
    narrow = quant_ops.fp8_candidates(facts, 4096, 4096, 4096, group_k, tiles=False, blocked=group_k is not None)
    assert narrow and not any(config.get(flag) for config in narrow for flag in quant_ops._FP8_TILE_FLAGS)


@pytest.mark.parametrize("rows", [1, 4, 16])
@pytest.mark.parametrize("k, group_size", [(256, 32), (256, 128), (4096, 128), (200, 8)])
def test_int4_decode_settings_fit_the_declared_workspace(rng, rows, k, group_size):
    """Every int4 GEMV setting offered on an H100 splits K into no more partials than the cost rule's workspace
    holds (float32 partials a split, m x n each): a short K split four ways by 64-input tiles once asked for
    twice what was declared."""
    from nbxtensor.device.facts import load as load_facts
    from nbxtensor.ops.matmul_gemv import split_k
    n = 64
    q, zeros, scales, _ = _random_int4(rng, k, n, group_size, False)
    weight = QuantizedWeight.int4(q, scales, zeros, group_size=group_size)
    rows_meta = nbx.empty((rows, k), dtype="bfloat16", device="meta")
    declared = quant_ops._cost(rows_meta, weight).workspace
    for config in quant_ops.decode_candidates(load_facts("hopper"), rows, n, k, "int4", group_size):
        block_k = quant_ops._dot_block_k(config["BLOCK_K"], "bfloat16", rows > 1)
        splits = split_k(k, dict(config, BLOCK_K=block_k))[1]
        assert splits == 1 or splits * rows * n * 4 <= declared, config


@pytest.mark.parametrize("rows", (1, 4))
def test_split_quantized_gemv_adds_its_splits_in_its_launch(rng, forced, monkeypatch, rows):
    """A quantized GEMV in 3 splits: the last split of each column block adds the partial sums in its launch,
    with the bits of the second launch that adds them where the column blocks outnumber the arrival
    counters; int4 whose words lie in one group (``int4_gemv``) and int8 (``quantized_gemv``), a bias."""
    from nbxtensor.launch import capture
    from nbxtensor.ops import matmul_gemv
    k, n = 96, 40
    q, zeros, scales, _ = _random_int4(rng, k, n, 32, False)
    weights = [QuantizedWeight.int4(q, scales, zeros, None, group_size=32, device=TEST_DEVICE),
               QuantizedWeight.quantize(rng.standard_normal((n, k)).astype(np.float32), "int8", device=TEST_DEVICE)]
    x = to_nbx(rng.standard_normal((rows, k)).astype(np.float32))
    bias = to_nbx(rng.standard_normal(n).astype(np.float32))
    for weight in weights:
        results = []
        for counters in (matmul_gemv.ARRIVAL_COUNTERS, 0):
            monkeypatch.setattr(matmul_gemv, "ARRIVAL_COUNTERS", counters)
            forced(16, 3)
            nbx.quantized_linear(x, weight, bias)  # planned outside the capture
            with capture() as recorded:
                results.append(nbx.quantized_linear(x, weight, bias).numpy())
            assert len(recorded.launches) == (1 if counters else 2)
        assert results[0].tobytes() == results[1].tobytes()
