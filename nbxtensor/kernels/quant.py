"""Products with quantized weights (``nbxtensor/quant.py`` gives the layouts): rows of ``x`` times the
(N, K) weight that 4-bit, int8 or float8 values and their scales stand for. Weight tiles are dequantized
in registers as they are loaded, so the packed weights are read once (int8 and float8 tiles of several rows
convert exactly to the dot's type and scale the product instead, ``_byte_rows_step``); for prefill products
of many rows ``dequantize_weight`` writes the whole weight out once in the rows' type, for the float GEMM.

``quantized_gemv`` (decode, up to 16 rows) streams the weight with split K as ``kernels/matmul.py``'s
``gemv`` does (its ``gemv_combine`` adds the partials); ``quantized_gemm`` (prefill) tiles the output and
multiplies on the matrix units; ``grouped_quantized_gemm`` multiplies row groups by a stack of experts'
quantized weights with ``quantized_gemm``'s weight tiles, as ``kernels/matmul.py``'s ``grouped_gemm`` multiplies
them by float matrices (groups found from ``offs`` on the device). Float8 rows: ``fp8_rows`` rounds them to e4m3 (a scale per row or per 1 x 128
block), ``fp8_gemm`` and ``fp8_block_gemm`` multiply them by e4m3 weights on the float8 matrix units, as does
``fp8_gemm_tiles`` for either scaling, walking the tiles as ``kernels/matmul.py``'s ``gemm_tiles`` does.
"""
import triton
import triton.language as tl

from .formats import FORMAT_E4M3FN, FORMAT_NATIVE, decode, encode
from .dependent_launch import await_predecessors
from .matmul import _epilogue, _gemv_program, _gemv_write, _grouped_tile, _operand, _tile_indices, grouped_tile_indices

WEIGHT_INT4 = tl.constexpr(0)
WEIGHT_INT8 = tl.constexpr(1)
WEIGHT_FP8 = tl.constexpr(2)
E4M3 = tl.constexpr(FORMAT_E4M3FN)


@triton.jit
def _int8_as(values, TYPE: tl.constexpr):
    """int8 ``values`` in float32 or float16 by their bits rather than I2F (a quarter of the float units'
    rate): a byte's bits XOR 0x80 are v + 128, which in the mantissa of a float whose ulp is 1 (2^23 in float32,
    2^10 in float16) reads as that power plus 128 + v, and taking the power plus 128 off is exact. Other types
    convert as usual."""
    if TYPE == tl.float32:
        biased = values.to(tl.uint8, bitcast=True).to(tl.uint32) ^ 0x4B000080
        return biased.to(tl.float32, bitcast=True) - 8388736.0
    elif TYPE == tl.float16:
        biased = values.to(tl.uint8, bitcast=True).to(tl.uint16) ^ 0x6480
        return biased.to(tl.float16, bitcast=True) - 1152.0
    else:
        return values.to(TYPE)


@triton.jit
def _byte_weight(raw, WEIGHT: tl.constexpr, TYPE: tl.constexpr):
    """int8 or e4m3 weight elements as loaded, in TYPE, exactly (every int8 and e4m3 value is exact in float32,
    float16 and bfloat16). e4m3 read through a float8 pointer converts natively; read as bytes (on a device whose
    facts name no float8 conversions, ``native_fp8``, and in the interpreter: ``Backend.kernel_element_type``)
    it is decoded by its bits, as the copy kernel decodes it."""
    if WEIGHT == WEIGHT_INT8:
        return _int8_as(raw, TYPE)
    elif raw.dtype == tl.uint8:
        return decode(raw, E4M3).to(TYPE)
    else:
        return raw.to(TYPE)


@triton.jit
def _per_input(tile, GROUPS: tl.constexpr, BLOCK_K: tl.constexpr):
    """A [GROUPS, BLOCK_N] tile of per-group values broadcast to the [BLOCK_K, BLOCK_N] inputs of the K tile
    (GROUPS equal runs of inputs); one group stays [1, BLOCK_N] and broadcasts in the arithmetic."""
    if GROUPS == 1:
        return tile
    else:
        runs = tl.broadcast_to(tile[:, None, :], (GROUPS, BLOCK_K // GROUPS, tile.shape[1]))
        return tl.reshape(runs, (BLOCK_K, tile.shape[1]))


@triton.jit
def _group_tile(ptr, k_base, k_stop, group_size, rn_group, s_sg, s_sn, GROUPS: tl.constexpr):
    """The [GROUPS, BLOCK_N] per-group values of the groups that start the K tile at ``k_base`` (groups past
    ``k_stop`` read row 0: their inputs are masked)."""
    rg = k_base // group_size + tl.arange(0, GROUPS)
    rg = tl.where(rg * group_size < k_stop, rg, 0)
    return tl.load(ptr + rg[:, None] * s_sg + rn_group[None, :] * s_sn)


@triton.jit
def _weight_tile(q, scales, zeros, g_idx, k_base, kk, rn, rn_words, N, k_mask, k_stop, group_size, scale_block_n,
                 q_sk, q_sn, s_sg, s_sn, z_sg, z_sn, BLOCK_K: tl.constexpr, WEIGHT: tl.constexpr,
                 SCALE_FORMAT: tl.constexpr, HAS_G_IDX: tl.constexpr, GROUPS_IN_TILE: tl.constexpr):
    """The float32 [BLOCK_K, BLOCK_N] tile of the weight, transposed (inputs kk = k_base + 0.. by outputs rn),
    dequantized; inputs past ``k_stop`` (``k_mask`` false) give zeros. Scales and zero points are read at
    indices clamped into range.

    int4 words are read once each as a [BLOCK_K // 8, BLOCK_N] tile (contiguous along N: vector loads) and
    split into their 8 nibbles in registers. With GROUPS_IN_TILE > 0 the K tile holds that many whole groups
    (or lies inside one), so scales and zero points are read once per group and broadcast; 0 (act-order, or
    groups that do not align with the tile) reads them per input."""
    kk_in = tl.where(k_mask, kk, 0)
    if WEIGHT == WEIGHT_INT4:
        rw = k_base // 8 + tl.arange(0, BLOCK_K // 8)
        rw = tl.where(rw * 8 < k_stop, rw, 0)
        # masked by column rather than clamped, so that the loads keep the columns' contiguity (vector loads)
        words = tl.load(q + rw[:, None] * q_sk + rn_words[None, :] * q_sn, mask=(rn_words < N)[None, :], other=0)
        nibbles = (words[:, None, :] >> (tl.arange(0, 8) * 4)[None, :, None]) & 0xF
        values = tl.reshape(nibbles, (BLOCK_K, words.shape[1])).to(tl.float32)
    else:
        # masked rather than clamped, so that the loads keep their contiguity along K (vector loads of bytes)
        raw = tl.load(q + kk[:, None] * q_sk + rn[None, :] * q_sn, mask=k_mask[:, None],
                      other=0.0 if WEIGHT == WEIGHT_FP8 else 0)
        values = _byte_weight(raw, WEIGHT, tl.float32)
    if GROUPS_IN_TILE > 0:
        scale = _per_input(decode(_group_tile(scales, k_base, k_stop, group_size, rn // scale_block_n, s_sg, s_sn,
                                               GROUPS_IN_TILE), SCALE_FORMAT).to(tl.float32), GROUPS_IN_TILE, BLOCK_K)
        if WEIGHT == WEIGHT_INT4:
            zero = _group_tile(zeros, k_base, k_stop, group_size, rn, z_sg, z_sn, GROUPS_IN_TILE).to(tl.float32)
            values = values - _per_input(zero, GROUPS_IN_TILE, BLOCK_K)
    else:
        if HAS_G_IDX:
            group = tl.load(g_idx + kk_in)
        else:
            group = kk_in // group_size
        scale = decode(tl.load(scales + group[:, None] * s_sg + (rn // scale_block_n)[None, :] * s_sn),
                        SCALE_FORMAT).to(tl.float32)
        if WEIGHT == WEIGHT_INT4:
            values = values - tl.load(zeros + group[:, None] * z_sg + rn[None, :] * z_sn).to(tl.float32)
    weight = values * scale
    if WEIGHT == WEIGHT_INT4:
        # bytes past k_stop are zeros already (masked loads); their scales, read at clamped groups, are the
        # product's own (a non-finite one makes the sum non-finite either way)
        weight = tl.where(k_mask[:, None], weight, 0.0)
    return weight


@triton.jit
def _byte_rows_step(acc, x, q, scales, rm_load, rn_load, k_base, K, group_size, scale_block_n, x_sm, x_sk, q_sk,
                    q_sn, s_sg, s_sn, BLOCK_K: tl.constexpr, WEIGHT: tl.constexpr, SCALE_FORMAT: tl.constexpr,
                    GROUPS_IN_TILE: tl.constexpr, DOT: tl.constexpr, PRECISION: tl.constexpr,
                    DECODE_BF16: tl.constexpr):
    """``_rows_step`` for an int8 or float8 weight whose K tile holds whole groups of scales (or lies inside one):
    the bytes are read as vectors along K and converted straight to the dot's type (every int8 and e4m3 value
    is exact in either 16-bit type), each group's part multiplies on the matrix units with float32
    accumulation, and its product meets the group's per-column scales once rather than every weight. A group
    is all of K or a 128-input block, so each dot's K stays at least ``MIN_CONVERTED_DOT_K``."""
    GROUP_K: tl.constexpr = BLOCK_K // GROUPS_IN_TILE
    for group in tl.static_range(GROUPS_IN_TILE):
        group_base = k_base + group * GROUP_K
        kk = group_base + tl.arange(0, GROUP_K)
        k_mask = kk < K
        # masked rather than clamped, so that the loads keep their contiguity along K (vector loads)
        raw = tl.load(q + kk[:, None] * q_sk + rn_load[None, :] * q_sn, mask=k_mask[:, None],
                      other=0.0 if WEIGHT == WEIGHT_FP8 else 0)
        x_tile = _operand(tl.load(x + rm_load[:, None] * x_sm + kk[None, :] * x_sk, mask=k_mask[None, :], other=0),
                          DECODE_BF16)
        weight = _byte_weight(raw, WEIGHT, DOT)
        product = tl.dot(x_tile.to(DOT), weight, input_precision=PRECISION, out_dtype=tl.float32)
        scale = decode(_group_tile(scales, group_base, K, group_size, rn_load // scale_block_n, s_sg, s_sn, 1),
                       SCALE_FORMAT).to(tl.float32)
        acc += product * scale
    return acc


@triton.jit
def _rows_step(acc, x, q, scales, zeros, g_idx, rm_load, rn_load, rn, N, k_base, rk, K, group_size, scale_block_n,
               x_sm, x_sk, q_sk, q_sn, s_sg, s_sn, z_sg, z_sn, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr,
               WEIGHT: tl.constexpr, SCALE_FORMAT: tl.constexpr, HAS_G_IDX: tl.constexpr,
               GROUPS_IN_TILE: tl.constexpr, DOT: tl.constexpr, PRECISION: tl.constexpr, DECODE_BF16: tl.constexpr):
    """acc plus the rows' products with the weight's inputs k_base + ``rk`` (those below K)."""
    kk = k_base + rk
    k_mask = kk < K
    if BLOCK_M > 1 and WEIGHT != WEIGHT_INT4 and GROUPS_IN_TILE > 0:
        return _byte_rows_step(acc, x, q, scales, rm_load, rn_load, k_base, K, group_size, scale_block_n, x_sm, x_sk,
                               q_sk, q_sn, s_sg, s_sn, BLOCK_K, WEIGHT, SCALE_FORMAT, GROUPS_IN_TILE, DOT, PRECISION,
                               DECODE_BF16)
    w_tile = _weight_tile(q, scales, zeros, g_idx, k_base, kk, rn_load, rn, N, k_mask, K, group_size, scale_block_n,
                          q_sk, q_sn, s_sg, s_sn, z_sg, z_sn, BLOCK_K, WEIGHT, SCALE_FORMAT, HAS_G_IDX, GROUPS_IN_TILE)
    if BLOCK_M == 1:
        # one row: products gather in a [BLOCK_K, BLOCK_N] accumulator, summed over K once at the end
        x_row = _operand(tl.load(x + kk * x_sk, mask=k_mask, other=0), DECODE_BF16).to(tl.float32)
        return acc + x_row[:, None] * w_tile
    else:
        # the dequantized tile in the rows' type: half-precision rows multiply on the matrix units in their
        # own type (float32 accumulation), float32 rows in float32
        x_tile = _operand(tl.load(x + rm_load[:, None] * x_sm + kk[None, :] * x_sk, mask=k_mask[None, :], other=0),
                          DECODE_BF16)
        return tl.dot(x_tile.to(DOT), w_tile.to(DOT), acc, input_precision=PRECISION, out_dtype=tl.float32)


@triton.jit
def quantized_gemv(x, q, scales, zeros, g_idx, bias, out, partial, counters, M, N, K, k_per_split, group_size,
                   scale_block_n, x_sm, x_sk, q_sk, q_sn, s_sg, s_sn, z_sg, z_sn, bias_sn, out_sm, out_sn,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT: tl.constexpr,
                   COMBINE: tl.constexpr,
                   WEIGHT: tl.constexpr, SCALE_FORMAT: tl.constexpr, HAS_G_IDX: tl.constexpr,
                   GROUPS_IN_TILE: tl.constexpr, DOT: tl.constexpr,
                   PRECISION: tl.constexpr, DECODE_BF16: tl.constexpr, HAS_BIAS: tl.constexpr,
                   BIAS_FORMAT: tl.constexpr, DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr,
                   INDEX_64: tl.constexpr, INTERPRETED: tl.constexpr, LOOP_STAGES: tl.constexpr):
    """out = x @ w.T + bias for M <= BLOCK_M <= 16 rows of ``x``: program (i, s) reads output columns
    [i * BLOCK_N, ...) of the weight's inputs in split s of K, so the weight is streamed once. With SPLIT,
    float32 partial sums go to ``partial`` (split, M, N), added in a fixed order as ``gemv``'s are (COMBINE).
    LOOP_STAGES as ``kernels/matmul.gemv``'s."""
    split, rm, rn, rk, k_start, k_stop, rm_load, rn_load, acc = _gemv_program(M, N, K, k_per_split, BLOCK_M, BLOCK_N,
                                                                              BLOCK_K, tl.float32, INDEX_64)
    if INTERPRETED:
        # Triton's interpreter cannot iterate a range over runtime bounds; a GPU pipelines the for loop
        k0 = 0
        while k0 < k_per_split:
            acc = _rows_step(acc, x, q, scales, zeros, g_idx, rm_load, rn_load, rn, N, k_start + k0, rk, k_stop,
                             group_size, scale_block_n, x_sm, x_sk, q_sk, q_sn, s_sg, s_sn, z_sg, z_sn, BLOCK_M,
                             BLOCK_K, WEIGHT, SCALE_FORMAT, HAS_G_IDX, GROUPS_IN_TILE, DOT, PRECISION, DECODE_BF16)
            k0 += BLOCK_K
    else:
        for k0 in tl.range(0, k_per_split, BLOCK_K, num_stages=LOOP_STAGES):
            acc = _rows_step(acc, x, q, scales, zeros, g_idx, rm_load, rn_load, rn, N, k_start + k0, rk, k_stop,
                             group_size, scale_block_n, x_sm, x_sk, q_sk, q_sn, s_sg, s_sn, z_sg, z_sn, BLOCK_M,
                             BLOCK_K, WEIGHT, SCALE_FORMAT, HAS_G_IDX, GROUPS_IN_TILE, DOT, PRECISION, DECODE_BF16)
    _gemv_write(acc, rm, rn, M, N, partial, split, bias, 0, bias_sn, 1.0, 1.0, out, out_sm, out_sn, BLOCK_M, SPLIT,
                HAS_BIAS, False, BIAS_FORMAT, DST_FORMAT, VIA_F32, counters=counters, COMBINE=COMBINE)


@triton.jit
def _store_tile(acc, bias, out, rm, rn, M, N, bias_sn, out_sm, out_sn, HAS_BIAS: tl.constexpr,
                BIAS_FORMAT: tl.constexpr, DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr):
    """The float32 output tile ``acc`` (rows rm, columns rn) plus the bias, rounded once and stored within M x N."""
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    _epilogue(acc, bias, 0, 0, bias_sn, rm, rn, mask, 1.0, 1.0, out, 0, out_sm, out_sn, HAS_BIAS, False,
              BIAS_FORMAT, DST_FORMAT, VIA_F32)


@triton.jit
def _row_and_column_scaled(acc, row_scales, scales, rm_load, rn_load, scale_block_n, s_sn,
                           SCALE_FORMAT: tl.constexpr):
    """An fp8 x fp8 tile's float32 products times its rows' scales and its columns' (``scale_block_n`` columns
    share one), once a tile."""
    row_scale = tl.load(row_scales + rm_load)
    scale = decode(tl.load(scales + (rn_load // scale_block_n) * s_sn), SCALE_FORMAT).to(tl.float32)
    return acc * row_scale[:, None] * scale[None, :]


@triton.jit
def quantized_gemm(x, q, scales, zeros, g_idx, bias, out, M, N, K, group_size, scale_block_n,
                   x_sm, x_sk, q_sk, q_sn, s_sg, s_sn, z_sg, z_sn, bias_sn, out_sm, out_sn,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                   WEIGHT: tl.constexpr, SCALE_FORMAT: tl.constexpr, HAS_G_IDX: tl.constexpr,
                   GROUPS_IN_TILE: tl.constexpr, DOT: tl.constexpr,
                   PRECISION: tl.constexpr, DECODE_BF16: tl.constexpr, HAS_BIAS: tl.constexpr,
                   BIAS_FORMAT: tl.constexpr, DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr,
                   INDEX_64: tl.constexpr, INTERPRETED: tl.constexpr):
    """out = x @ w.T + bias for any number of rows: one BLOCK_M x BLOCK_N output tile per program, in
    ``gemm``'s grouped order (programs running together share weight tiles in L2)."""
    tile_m, tile_n = _grouped_tile(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    rm, rn, rk, rm_load, rn_load = _tile_indices(tile_m, tile_n, M, N, BLOCK_M, BLOCK_N, BLOCK_K, INDEX_64)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if INTERPRETED:
        k0 = 0
        while k0 < K:
            acc = _rows_step(acc, x, q, scales, zeros, g_idx, rm_load, rn_load, rn, N, k0, rk, K, group_size,
                             scale_block_n, x_sm, x_sk, q_sk, q_sn, s_sg, s_sn, z_sg, z_sn, BLOCK_M, BLOCK_K, WEIGHT,
                             SCALE_FORMAT, HAS_G_IDX, GROUPS_IN_TILE, DOT, PRECISION, DECODE_BF16)
            k0 += BLOCK_K
    else:
        for k0 in range(0, K, BLOCK_K):
            acc = _rows_step(acc, x, q, scales, zeros, g_idx, rm_load, rn_load, rn, N, k0, rk, K, group_size,
                             scale_block_n, x_sm, x_sk, q_sk, q_sn, s_sg, s_sn, z_sg, z_sn, BLOCK_M, BLOCK_K, WEIGHT,
                             SCALE_FORMAT, HAS_G_IDX, GROUPS_IN_TILE, DOT, PRECISION, DECODE_BF16)
    _store_tile(acc, bias, out, rm, rn, M, N, bias_sn, out_sm, out_sn, HAS_BIAS, BIAS_FORMAT, DST_FORMAT, VIA_F32)


@triton.jit
def grouped_quantized_gemm(x, q, scales, zeros, g_idx, offs, out, total_rows, N, K, experts, group_size, scale_block_n,
                           x_sm, x_sk, q_se, q_sk, q_sn, s_se, s_sg, s_sn, z_se, z_sg, z_sn, g_se, out_sm, out_sn,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_E: tl.constexpr,
                           WEIGHT: tl.constexpr, SCALE_FORMAT: tl.constexpr, HAS_G_IDX: tl.constexpr,
                           GROUPS_IN_TILE: tl.constexpr, DOT: tl.constexpr, PRECISION: tl.constexpr,
                           DECODE_BF16: tl.constexpr, DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr,
                           INDEX_64: tl.constexpr, INTERPRETED: tl.constexpr):
    """out[rows of group e] = x[rows of group e] @ w[e].T for a stack of quantized (N, K) weights, each expert's
    parts ``*_se`` elements after the previous one's: ``kernels/matmul.py``'s ``grouped_gemm`` with the weight
    tiles of ``quantized_gemm`` (``_rows_step``, dequantized in registers as they are loaded). Groups come from
    ``offs`` on the device (``grouped_tile_indices``), so the grid (cdiv(total_rows, BLOCK_M) + ``experts`` slots) is
    fixed by the shapes; the rows past the last end are written as zeros."""
    group, rm, rm_load, rn, rn_load, rk, expert, row_end = grouped_tile_indices(
        offs, experts, total_rows, N, BLOCK_M, BLOCK_N, BLOCK_K, BLOCK_E, INDEX_64)
    if group <= experts:
        q_expert, scales_expert = q + expert * q_se, scales + expert * s_se
        zeros_expert, g_idx_expert = zeros + expert * z_se, g_idx + expert * g_se
        # the group past the experts multiplies nothing: its rows stay zero
        k_end = tl.where(group < experts, K, 0)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        if INTERPRETED:
            k0 = 0
            while k0 < k_end:
                acc = _rows_step(acc, x, q_expert, scales_expert, zeros_expert, g_idx_expert, rm_load, rn_load, rn, N,
                                 k0, rk, K, group_size, scale_block_n, x_sm, x_sk, q_sk, q_sn, s_sg, s_sn, z_sg, z_sn,
                                 BLOCK_M, BLOCK_K, WEIGHT, SCALE_FORMAT, HAS_G_IDX, GROUPS_IN_TILE, DOT, PRECISION,
                                 DECODE_BF16)
                k0 += BLOCK_K
        else:
            for k0 in range(0, k_end, BLOCK_K):
                acc = _rows_step(acc, x, q_expert, scales_expert, zeros_expert, g_idx_expert, rm_load, rn_load, rn, N,
                                 k0, rk, K, group_size, scale_block_n, x_sm, x_sk, q_sk, q_sn, s_sg, s_sn, z_sg, z_sn,
                                 BLOCK_M, BLOCK_K, WEIGHT, SCALE_FORMAT, HAS_G_IDX, GROUPS_IN_TILE, DOT, PRECISION,
                                 DECODE_BF16)
        _store_tile(acc, out, out, rm, rn, row_end, N, 0, out_sm, out_sn, False, FORMAT_NATIVE, DST_FORMAT, VIA_F32)


@triton.jit
def dequantize_weight(q, scales, zeros, g_idx, out, N, K, group_size, scale_block_n, q_sk, q_sn, s_sg, s_sn, z_sg,
                      z_sn, out_sn, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, WEIGHT: tl.constexpr,
                      SCALE_FORMAT: tl.constexpr, HAS_G_IDX: tl.constexpr, GROUPS_IN_TILE: tl.constexpr,
                      DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr, INDEX_64: tl.constexpr):
    """out[n, k] = the weight's (n, k) element, the float32 (value - zero) * scale of ``_weight_tile`` rounded
    once to out's type: the tile ``quantized_gemm`` meets rows of that type with. Program (i, j) writes inputs
    [i * BLOCK_K, ...) of outputs [j * BLOCK_N, ...) (for int4 a [BLOCK_K / 8, BLOCK_N] tile of words), so
    every packed word is read once and every element written once."""
    k_base = tl.program_id(0) * BLOCK_K
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    kk = k_base + tl.arange(0, BLOCK_K)
    if INDEX_64:
        rn = rn.to(tl.int64)
        kk = kk.to(tl.int64)
    k_mask = kk < K
    rn_in = tl.where(rn < N, rn, 0)
    tile = _weight_tile(q, scales, zeros, g_idx, k_base, kk, rn_in, rn, N, k_mask, K, group_size, scale_block_n,
                        q_sk, q_sn, s_sg, s_sn, z_sg, z_sn, BLOCK_K, WEIGHT, SCALE_FORMAT, HAS_G_IDX, GROUPS_IN_TILE)
    tl.store(out + rn[None, :] * out_sn + kk[:, None], encode(tile, out.dtype.element_ty, DST_FORMAT, VIA_F32, False),
             mask=k_mask[:, None] & (rn < N)[None, :])


# ---- int4 with groups of whole words ----------------------------------------------------------------------
# When every word's 8 inputs share a group (no act-order, groups a multiple of 8), a word's nibbles become
# float32 by their bits: a value v below 2^23 in the mantissa of 2^23 reads as 2^23 + v. Nibbles 0..4 are
# masked in place (v = nibble * 16^e, e their index), nibbles 5..7 from the word shifted right by 12 (e =
# 2..4), so a word costs one shift and two ORs (2^23's bits), a weight one AND and one multiply-add:
# (2^23 + v) * 16^-e - (2^(23 - 4e) + zero) = nibble - zero, every step exact.
MANTISSA_BASE = tl.constexpr(0x4B000000)  # float32 2^23


@triton.jit
def _nibble_values(low, high, zero, I: tl.constexpr):
    """Nibble I of each word minus its zero point, float32, exact. ``low`` is words | 2^23's bits, ``high``
    (words >> 12) | 2^23's bits: a nibble is one AND away (the mask keeps the exponent's bits)."""
    if I < 5:
        bits = low & (MANTISSA_BASE | (0xF << (4 * I)))
    else:
        bits = high & (MANTISSA_BASE | (0xF << (4 * (I - 3))))
    # e = I - 3 * (I // 5); one expression for the nibbles sharing e
    return (bits.to(tl.float32, bitcast=True) * (1.0 / (1 << (4 * (I - 3 * (I // 5)))))
            - (zero + (1 << (23 - 4 * (I - 3 * (I // 5))))))


# ---- one row of 16-bit rows: nibbles as 16 + n ------------------------------------------------------------
# 16 + n is a float32 whose mantissa's top four bits hold n (bits 0x41800000 | n << 19), exact; one row sums
# x_i (16 + n_i) over a word's 8 inputs and subtracts (16 + zero) * sum x_i once a word, sum x_i shared by the
# program's columns. With inline PTX (INLINE_ASM) a word's nibbles are spread to the top of its bytes (two
# shifts and two ``lop3``s, the exponent's low bit set) and each becomes a float by one ``prmt`` that places
# its byte under the exponent's other bits; the portable path shifts, masks and ORs each nibble. Both give the
# same floats, so the same float32 arithmetic after gives the same bits. The sum's terms reach 31 |x_i| rather
# than 15 |x_i| and the subtraction rounds once more: a word's error stays under 2^-19 of sum |x_i| (2^-21 for
# n - zero summed directly, ``_nibble_values``, which float32 rows keep), far under a 16-bit result's rounding.
SIXTEEN = tl.constexpr(16.0)
SIXTEEN_BITS = tl.constexpr(0x41800000)


def _sixteen_plus_nibbles_ptx() -> str:
    """PTX of ``_sixteen_plus_nibbles``: outputs $0..$7 the floats 16 + nibble 0..7 of word $8."""
    lines = ["{", ".reg .b32 low, high, top;", "shl.b32 low, $8, 3;", "shr.u32 high, $8, 1;",
             # nibble 2j at bits 3-6 of byte j of low, nibble 2j + 1 of high, bit 7 the exponent's low bit
             "lop3.b32 low, low, 0x78787878, 0x80808080, 0xea;", "lop3.b32 high, high, 0x78787878, 0x80808080, 0xea;",
             f"mov.b32 top, {SIXTEEN_BITS.value & 0xFF000000:#x};"]
    for j in range(4):
        # bytes 0, 1 and 3 from ``top`` (0, 0, the exponent's high bits), byte 2 byte j of low or high
        lines += [f"prmt.b32 ${2 * j}, low, top, {0x7054 | j << 8:#x};",
                  f"prmt.b32 ${2 * j + 1}, high, top, {0x7054 | j << 8:#x};"]
    return "\n".join(lines + ["}"])


SIXTEEN_PLUS_NIBBLES = tl.constexpr(_sixteen_plus_nibbles_ptx())


@triton.jit
def _sixteen_plus_nibble(words, I: tl.constexpr):
    """16 + nibble I of each word as float32, by integer arithmetic on its bits."""
    return (((words >> (4 * I)) & 0xF) << 19 | SIXTEEN_BITS).to(tl.float32, bitcast=True)


@triton.jit
def _sixteen_plus_nibbles(words, INLINE_ASM: tl.constexpr):
    """The 8 float32 tiles 16 + nibble i of ``words``, i = 0..7 (by inline PTX where INLINE_ASM)."""
    if INLINE_ASM:
        return tl.inline_asm_elementwise(SIXTEEN_PLUS_NIBBLES, "=r,=r,=r,=r,=r,=r,=r,=r,r", [words],
                                         dtype=(tl.float32,) * 8, is_pure=True, pack=1)
    else:
        return (_sixteen_plus_nibble(words, 0), _sixteen_plus_nibble(words, 1), _sixteen_plus_nibble(words, 2),
                _sixteen_plus_nibble(words, 3), _sixteen_plus_nibble(words, 4), _sixteen_plus_nibble(words, 5),
                _sixteen_plus_nibble(words, 6), _sixteen_plus_nibble(words, 7))


@triton.jit
def _int4_groups(scales, zeros, rw, rn, N, k_base, k_stop, group_size, s_sg, s_sn, z_sg, z_sn,
                 SCALE_FORMAT: tl.constexpr, ONE_GROUP: tl.constexpr, BY_ROW: tl.constexpr):
    """float32 scales and zero points of the word rows ``rw`` (in range) by columns ``rn`` (those below N).
    ONE_GROUP: the K tile lies inside one group (a tile past ``k_stop`` reads the last one), read once as
    [1, BLOCK_N], or with BY_ROW as [rows, BLOCK_N] alike; else [rows, BLOCK_N], a group per word row. The
    [rows, BLOCK_N] loads are masked by column as the words are, so that they take the words' layout (vector
    loads, no conversion through shared memory)."""
    if ONE_GROUP:
        g = tl.minimum(k_base, k_stop - 1) // group_size
    else:
        g = rw * 8 // group_size
    if ONE_GROUP and not BY_ROW:
        rn_in = tl.where(rn < N, rn, 0)
        scale = decode(tl.load(scales + g * s_sg + rn_in * s_sn), SCALE_FORMAT).to(tl.float32)[None, :]
        zero = tl.load(zeros + g * z_sg + rn_in * z_sn).to(tl.float32)[None, :]
    else:
        rows = (g + tl.zeros_like(rw))[:, None]
        in_n = (rn < N)[None, :]
        scale = decode(tl.load(scales + rows * s_sg + rn[None, :] * s_sn, mask=in_n, other=0),
                       SCALE_FORMAT).to(tl.float32)
        zero = tl.load(zeros + rows * z_sg + rn[None, :] * z_sn, mask=in_n, other=0).to(tl.float32)
    return scale, zero


@triton.jit
def _prefetch(pointers):
    """Starts bringing the lines at ``pointers`` into L1 and returns 0 without waiting (compiled CUDA only)."""
    return tl.inline_asm_elementwise("prefetch.global.L1 [$1]; mov.u32 $0, 0;", "=r,l", [pointers], dtype=tl.int32,
                                     is_pure=False, pack=1)


@triton.jit
def _prefetch_group(scales, zeros, rn, N, k_base, k_stop, group_size, s_sg, s_sn, z_sg, z_sn):
    """Starts bringing into L1 the scales and zero points of columns ``rn`` of the group holding input
    ``k_base`` (the last group past ``k_stop``), which ``_int4_groups`` reads as one group a K tile."""
    g = tl.minimum(k_base, k_stop - 1) // group_size
    rn_in = tl.where(rn < N, rn, 0)
    _prefetch(scales + g * s_sg + rn_in * s_sn)
    _prefetch(zeros + g * z_sg + rn_in * z_sn)


@triton.jit
def _nibble_tile(low, high, zero, scale, I: tl.constexpr, DOT: tl.constexpr, SCALED: tl.constexpr):
    """Nibble I's values for ``_int4_tile``, in the dot's type."""
    value = _nibble_values(low, high, zero, I)
    if SCALED:
        value = value * scale
    return value.to(DOT)


@triton.jit
def _in_k_order(pairs):
    """The [8 * rows, BLOCK_N] tile in the K order of the inputs (input 8r + i is nibble i of word row r) of
    ``pairs``, [rows, BLOCK_N, 2, 2, 2] by (bit 0, bit 1, bit 2) of i."""
    return tl.reshape(tl.permute(pairs, (0, 4, 3, 2, 1)), (pairs.shape[0] * 8, pairs.shape[1]))


@triton.jit
def _int4_tile(low, high, zero, scale, DOT: tl.constexpr, SCALED: tl.constexpr):
    """The [8 * rows, BLOCK_N] tile of nibble - zero (times scale with SCALED: the weight itself) in the K
    order of the inputs, in the dot's type."""
    v0 = _nibble_tile(low, high, zero, scale, 0, DOT, SCALED)
    v1 = _nibble_tile(low, high, zero, scale, 1, DOT, SCALED)
    v2 = _nibble_tile(low, high, zero, scale, 2, DOT, SCALED)
    v3 = _nibble_tile(low, high, zero, scale, 3, DOT, SCALED)
    v4 = _nibble_tile(low, high, zero, scale, 4, DOT, SCALED)
    v5 = _nibble_tile(low, high, zero, scale, 5, DOT, SCALED)
    v6 = _nibble_tile(low, high, zero, scale, 6, DOT, SCALED)
    v7 = _nibble_tile(low, high, zero, scale, 7, DOT, SCALED)
    return _in_k_order(tl.join(tl.join(tl.join(v0, v1), tl.join(v2, v3)), tl.join(tl.join(v4, v5), tl.join(v6, v7))))


# ---- int4 to 16-bit floats by inline PTX, two a register (compiled CUDA targets) --------------------------
# A nibble n masked into the mantissa of a 16-bit float whose exponent field holds the "magic" 2^10 (float16,
# bits 0x6400) or 2^7 (bfloat16, 0x4300), where the ulp is 1, reads as magic + n; one packed fused
# multiply-add by 1 of -(magic + zero) leaves n - zero. A register holds two neighbours along K (nibbles 2j and
# 2j + 1 of a word: byte j of the word and of the word shifted right by 4, gathered by one ``prmt``), the
# pairs a dot operand is made of, so a pair costs a ``prmt``, a ``lop3`` and the multiply-add (one more, the
# scale, where the tile is scaled). Every step is exact (|n - zero| < 16); a scale of the dot's type then
# multiplies, rounded once. The portable path (``_int4_tile``) forms the same exact n - zero in float32,
# multiplies it by the same scale there (exact: at most 5 + 11 significant bits) and rounds once to the
# dot's type, so the two give the same bits.
_BYTE_OF_TWO_WORDS = tl.constexpr((0x4400, 0x5511, 0x6622, 0x7733))  # prmt: byte j of $a and $b to halves 0, 1


def _nibbles_ptx(magic: int, kind: str, scaled: bool) -> str:
    """PTX of ``_int4_tile_packed``'s asm: outputs $0..$3 the low nibble of byte 0..3 of words $4 and $5, as
    16-bit floats (``kind`` f16x2 or bf16x2, ``magic`` the bits of 2^10 or 2^7) less zero: $6 holds -(magic +
    zero) of both; with ``scaled``, times the scales $7."""
    one = {"f16x2": 0x3C00, "bf16x2": 0x3F80}[kind]
    # packed half operands take registers, not immediates; -0 added keeps a zero product's sign, as a multiply
    lines = ["{", ".reg .b32 byte, nibble, one, negative_zero;", f"mov.b32 one, {one * 0x10001:#x};",
             "mov.b32 negative_zero, 0x80008000;"]
    for j in range(4):
        lines += [f"prmt.b32 byte, $4, $5, {_BYTE_OF_TWO_WORDS.value[j]:#x};",
                  f"lop3.b32 nibble, byte, 0x000f000f, {magic * 0x10001:#x}, 0xea;",  # (byte & mask) | magic
                  f"fma.rn.{kind} ${j}, nibble, one, $6;"]
        if scaled:
            lines.append(f"fma.rn.{kind} ${j}, ${j}, $7, negative_zero;")
    return "\n".join(lines + ["}"])


F16_MAGIC = tl.constexpr(1024.0)
BF16_MAGIC = tl.constexpr(128.0)
F16_NIBBLES = tl.constexpr(_nibbles_ptx(0x6400, "f16x2", False))
F16_NIBBLES_SCALED = tl.constexpr(_nibbles_ptx(0x6400, "f16x2", True))
BF16_NIBBLES = tl.constexpr(_nibbles_ptx(0x4300, "bf16x2", False))
BF16_NIBBLES_SCALED = tl.constexpr(_nibbles_ptx(0x4300, "bf16x2", True))


@triton.jit
def _int4_tile_packed(words, zero, scale, DOT: tl.constexpr, SCALED: tl.constexpr):
    """``_int4_tile`` for a DOT of float16 or bfloat16 by inline PTX (``_nibbles_ptx``): ``words`` the
    [rows, BLOCK_N] words, ``zero`` and ``scale`` their float32 zero points and scales (broadcast; scales
    of the dot's type where SCALED)."""
    # [rows, BLOCK_N, 2]: the words, and the words shifted so that byte j's low nibble is nibble 2j + 1
    halves = tl.join(words, words >> 4)
    bias = (-(zero + (BF16_MAGIC if DOT == tl.bfloat16 else F16_MAGIC))).to(DOT)[:, :, None]
    if SCALED:
        t0, t1, t2, t3 = tl.inline_asm_elementwise(
            BF16_NIBBLES_SCALED if DOT == tl.bfloat16 else F16_NIBBLES_SCALED, "=r,=r,=r,=r,r,r,r,r",
            [halves, bias, scale.to(DOT)[:, :, None]], dtype=(bias.dtype,) * 4, is_pure=True, pack=2)
    else:
        t0, t1, t2, t3 = tl.inline_asm_elementwise(BF16_NIBBLES if DOT == tl.bfloat16 else F16_NIBBLES,
                                                   "=r,=r,=r,=r,r,r,r", [halves, bias], dtype=(bias.dtype,) * 4,
                                                   is_pure=True, pack=2)
    return _in_k_order(tl.join(tl.join(t0, t1), tl.join(t2, t3)))


@triton.jit
def _int4_dot_tile(words, low, high, zero, scale, SCALE_TYPE: tl.constexpr, DOT: tl.constexpr,
                   SCALED: tl.constexpr, INLINE_ASM: tl.constexpr):
    """``_int4_tile``, by inline PTX where INLINE_ASM allows it: a 16-bit dot type, and scales of that type
    where they multiply the tile (SCALED), so that the scale multiplies exactly as in float32."""
    if INLINE_ASM and (DOT == tl.float16 or DOT == tl.bfloat16) and (not SCALED or SCALE_TYPE == DOT):
        return _int4_tile_packed(words, zero, scale, DOT, SCALED)
    else:
        return _int4_tile(low, high, zero, scale, DOT, SCALED)


@triton.jit
def _rows_load(pointers, in_k, EVEN_K: tl.constexpr):
    """The rows' elements at ``pointers``, zeros where ``in_k`` is false unless EVEN_K (all inside)."""
    if EVEN_K:
        return tl.load(pointers)
    else:
        return tl.load(pointers, mask=in_k, other=0)


@triton.jit
def _int4_words(q, scales, zeros, rn, N, k_base, lanes, k_stop, group_size, q_sk, q_sn, s_sg, s_sn, z_sg, z_sn,
                SCALE_FORMAT: tl.constexpr, ONE_GROUP: tl.constexpr, BY_ROW: tl.constexpr, EVEN_K: tl.constexpr):
    """(rw, words, low, high, scale, zero) of the K tile at k_base: its word rows k_base // 8 + ``lanes``, their
    [rows, BLOCK_N] words of columns ``rn`` (those below N), the words as ``_nibble_values`` takes them, and
    their float32 scales and zero points (``_int4_groups``). EVEN_K: every K tile lies below k_stop."""
    rw = k_base // 8 + lanes
    if EVEN_K:
        rw_in = rw
    else:
        rw_in = tl.where(rw * 8 < k_stop, rw, 0)
    # masked by column rather than clamped, so that the loads keep the columns' contiguity (vector loads)
    words = tl.load(q + rw_in[:, None] * q_sk + rn[None, :] * q_sn, mask=(rn < N)[None, :], other=0)
    low = words | MANTISSA_BASE
    high = (words >> 12) | MANTISSA_BASE
    scale, zero = _int4_groups(scales, zeros, rw_in, rn, N, k_base, k_stop, group_size, s_sg, s_sn, z_sg, z_sn,
                               SCALE_FORMAT, ONE_GROUP, BY_ROW)
    return rw, words, low, high, scale, zero


@triton.jit
def _int4_row(acc, x_words, words, low, high, zero, scale, ROWS_F32: tl.constexpr, INLINE_ASM: tl.constexpr):
    """acc ([rows, BLOCK_N]) plus one row's products with a K tile of int4 words (``_int4_words``): ``x_words``
    the row's float32 inputs as [rows, 8] (input 8r + i is nibble i of word row r). Each word's 8 products
    gather in registers and meet its scale once: float32 rows (ROWS_F32) as nibble - zero
    (``_nibble_values``), 16-bit ones as 16 + nibble with (16 + zero) * sum x taken off once a word."""
    x_words = tl.reshape(x_words, (x_words.shape[0], 2, 2, 2))
    x_0123, x_4567 = tl.split(tl.permute(x_words, (0, 2, 3, 1)))
    x_01, x_23 = tl.split(tl.permute(x_0123, (0, 2, 1)))
    x_45, x_67 = tl.split(tl.permute(x_4567, (0, 2, 1)))
    x_0, x_1 = tl.split(x_01)
    x_2, x_3 = tl.split(x_23)
    x_4, x_5 = tl.split(x_45)
    x_6, x_7 = tl.split(x_67)
    if ROWS_F32:
        products = x_0[:, None] * _nibble_values(low, high, zero, 0)
        products += x_1[:, None] * _nibble_values(low, high, zero, 1)
        products += x_2[:, None] * _nibble_values(low, high, zero, 2)
        products += x_3[:, None] * _nibble_values(low, high, zero, 3)
        products += x_4[:, None] * _nibble_values(low, high, zero, 4)
        products += x_5[:, None] * _nibble_values(low, high, zero, 5)
        products += x_6[:, None] * _nibble_values(low, high, zero, 6)
        products += x_7[:, None] * _nibble_values(low, high, zero, 7)
    else:
        # 16-bit rows: sum x_i (16 + nibble i), then take (16 + zero) * sum x_i off once a word
        # (``_sixteen_plus_nibbles``)
        v0, v1, v2, v3, v4, v5, v6, v7 = _sixteen_plus_nibbles(words, INLINE_ASM)
        products = x_0[:, None] * v0
        products += x_1[:, None] * v1
        products += x_2[:, None] * v2
        products += x_3[:, None] * v3
        products += x_4[:, None] * v4
        products += x_5[:, None] * v5
        products += x_6[:, None] * v6
        products += x_7[:, None] * v7
        x_sum = ((x_0 + x_1) + (x_2 + x_3)) + ((x_4 + x_5) + (x_6 + x_7))
        products -= (zero + SIXTEEN) * x_sum[:, None]
    return acc + products * scale


@triton.jit
def _int4_step(acc, x, q, scales, zeros, rm_load, rn, rn_load, N, k_base, lanes, k_stop, group_size,
               x_sm, x_sk, q_sk, q_sn, s_sg, s_sn, z_sg, z_sn, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr,
               SCALE_FORMAT: tl.constexpr, ONE_GROUP: tl.constexpr, FACTORED: tl.constexpr, SWAPPED: tl.constexpr,
               DOT: tl.constexpr, PRECISION: tl.constexpr, DECODE_BF16: tl.constexpr, INLINE_ASM: tl.constexpr,
               EVEN_K: tl.constexpr):
    """acc plus the rows' products with the int4 weight's inputs k_base + 0.. (those below k_stop); ``lanes``
    is arange(BLOCK_K // 8), the K tile's word rows. EVEN_K: every K tile lies below k_stop, so loads along
    K take no mask (vector loads of the rows).

    One row: acc is [BLOCK_K // 8, BLOCK_N] (``_int4_row``). Several rows: the tile goes through ``tl.dot``;
    FACTORED (the K tile inside one group) multiplies the tile's product by the scales rather than every
    weight, and with SWAPPED takes the weight tile as the dot's wide first operand and the rows as its narrow
    second (acc is then [BLOCK_N, BLOCK_M]: on Hopper a ``wgmma`` of BLOCK_N x 16). INLINE_ASM: the tile is
    built by inline PTX (``_int4_dot_tile``)."""
    # one row of 16-bit rows reads them a word row each even inside one group: [rows, BLOCK_N] loads in the
    # words' layout cost fewer instructions than one [BLOCK_N] load brought into it through shared memory
    # (float32 rows form their per-nibble offsets from the zero points once a group instead)
    rw, words, low, high, scale, zero = _int4_words(q, scales, zeros, rn, N, k_base, lanes, k_stop, group_size, q_sk,
                                                    q_sn, s_sg, s_sn, z_sg, z_sn, SCALE_FORMAT, ONE_GROUP,
                                                    BLOCK_M == 1 and x.dtype.element_ty != tl.float32, EVEN_K)
    if BLOCK_M == 1:
        # the K tile's inputs as [rows, 8] (one vector load a word row)
        kk = rw[:, None] * 8 + tl.arange(0, 8)[None, :]
        x_words = _operand(_rows_load(x + kk * x_sk, kk < k_stop, EVEN_K), DECODE_BF16).to(tl.float32)
        return _int4_row(acc, x_words, words, low, high, zero, scale, x.dtype.element_ty == tl.float32, INLINE_ASM)
    else:
        if INLINE_ASM and FACTORED:
            # the compiler pipelines the loads of the words and the rows (they feed the dot) but not the scales'
            # and zero points', whose latency each GEMV step would wait for twice (the zero points load after the
            # scales' barrier); two K tiles ahead, they arrive in L1 before the step that reads them
            _prefetch_group(scales, zeros, rn, N, k_base + 2 * BLOCK_K, k_stop, group_size, s_sg, s_sn, z_sg, z_sn)
        kk = k_base + tl.arange(0, BLOCK_K)
        if FACTORED:
            # the tile holds nibble - zero, exact in any float type
            tile = _int4_dot_tile(words, low, high, zero, scale, scales.dtype.element_ty, DOT, False, INLINE_ASM)
            if SWAPPED:
                rows_t = _operand(_rows_load(x + rm_load[None, :] * x_sm + kk[:, None] * x_sk,
                                             (kk < k_stop)[:, None], EVEN_K), DECODE_BF16)
                product = tl.dot(tl.trans(tile), rows_t.to(DOT), input_precision=PRECISION, out_dtype=tl.float32)
                return acc + product * tl.trans(scale)
            else:
                x_tile = _operand(_rows_load(x + rm_load[:, None] * x_sm + kk[None, :] * x_sk,
                                             (kk < k_stop)[None, :], EVEN_K), DECODE_BF16)
                product = tl.dot(x_tile.to(DOT), tile, input_precision=PRECISION, out_dtype=tl.float32)
                return acc + product * scale
        else:
            x_tile = _operand(_rows_load(x + rm_load[:, None] * x_sm + kk[None, :] * x_sk, (kk < k_stop)[None, :],
                                         EVEN_K), DECODE_BF16)
            return tl.dot(x_tile.to(DOT), _int4_dot_tile(words, low, high, zero, scale, scales.dtype.element_ty,
                                                         DOT, True, INLINE_ASM), acc,
                          input_precision=PRECISION, out_dtype=tl.float32)


@triton.jit
def int4_gemv(x, q, scales, zeros, bias, out, partial, counters, M, N, K, k_per_split,
              x_sm, x_sk, q_sk, q_sn, s_sg, s_sn, z_sg, z_sn, bias_sn, out_sm, out_sn,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT: tl.constexpr,
              COMBINE: tl.constexpr,
              GROUP_SIZE: tl.constexpr, SCALE_FORMAT: tl.constexpr, ONE_GROUP: tl.constexpr, DOT: tl.constexpr,
              PRECISION: tl.constexpr, DECODE_BF16: tl.constexpr, HAS_BIAS: tl.constexpr, BIAS_FORMAT: tl.constexpr,
              DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr, INDEX_64: tl.constexpr, INTERPRETED: tl.constexpr,
              INLINE_ASM: tl.constexpr, EVEN_K: tl.constexpr, PDL: tl.constexpr, SWAPPED: tl.constexpr,
              LOOP_STAGES: tl.constexpr):
    """``quantized_gemv`` for int4 weights whose words each lie in one group (``_int4_step``); the group size
    is a constant of the compiled kernel (its group index then costs a shift or a multiply, not a division).
    SWAPPED (several rows, a K tile inside one group): the product is taken transposed, out.T = w @ x.T.
    LOOP_STAGES as ``kernels/matmul.gemv``'s: pipelined, a step's words, scales, zero points and rows are all
    copied ahead."""
    await_predecessors(PDL)
    # one row accumulates per word: [BLOCK_K // 8, BLOCK_N]
    split, rm, rn, lanes, k_start, k_stop, rm_load, rn_load, acc = _gemv_program(M, N, K, k_per_split, BLOCK_M,
                                                                                 BLOCK_N, BLOCK_K // 8, tl.float32,
                                                                                 INDEX_64)
    TRANSPOSED: tl.constexpr = SWAPPED and BLOCK_M > 1 and ONE_GROUP
    if TRANSPOSED:
        acc = tl.zeros((BLOCK_N, BLOCK_M), tl.float32)
    if INTERPRETED:
        k0 = 0
        while k0 < k_per_split:
            acc = _int4_step(acc, x, q, scales, zeros, rm_load, rn, rn_load, N, k_start + k0, lanes, k_stop,
                             GROUP_SIZE, x_sm, x_sk, q_sk, q_sn, s_sg, s_sn, z_sg, z_sn, BLOCK_M, BLOCK_K,
                             SCALE_FORMAT, ONE_GROUP, ONE_GROUP, TRANSPOSED, DOT, PRECISION, DECODE_BF16,
                             INLINE_ASM, EVEN_K)
            k0 += BLOCK_K
    else:
        for k0 in tl.range(0, k_per_split, BLOCK_K, num_stages=LOOP_STAGES):
            acc = _int4_step(acc, x, q, scales, zeros, rm_load, rn, rn_load, N, k_start + k0, lanes, k_stop,
                             GROUP_SIZE, x_sm, x_sk, q_sk, q_sn, s_sg, s_sn, z_sg, z_sn, BLOCK_M, BLOCK_K,
                             SCALE_FORMAT, ONE_GROUP, ONE_GROUP, TRANSPOSED, DOT, PRECISION, DECODE_BF16,
                             INLINE_ASM, EVEN_K)
    if TRANSPOSED:
        acc = tl.trans(acc)
    _gemv_write(acc, rm, rn, M, N, partial, split, bias, 0, bias_sn, 1.0, 1.0, out, out_sm, out_sn, BLOCK_M, SPLIT,
                HAS_BIAS, False, BIAS_FORMAT, DST_FORMAT, VIA_F32, counters=counters, COMBINE=COMBINE)


@triton.jit
def int4_gemm(x, q, scales, zeros, bias, out, M, N, K,
              x_sm, x_sk, q_sk, q_sn, s_sg, s_sn, z_sg, z_sn, bias_sn, out_sm, out_sn,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
              GROUP_SIZE: tl.constexpr, SCALE_FORMAT: tl.constexpr, ONE_GROUP: tl.constexpr, DOT: tl.constexpr,
              PRECISION: tl.constexpr, DECODE_BF16: tl.constexpr, HAS_BIAS: tl.constexpr, BIAS_FORMAT: tl.constexpr,
              DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr, INDEX_64: tl.constexpr, INTERPRETED: tl.constexpr,
              INLINE_ASM: tl.constexpr, EVEN_K: tl.constexpr):
    """``quantized_gemm`` for int4 weights whose words each lie in one group: the tile is dequantized with its
    scales (the accumulator stays on the matrix unit across K)."""
    tile_m, tile_n = _grouped_tile(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    rm, rn, lanes, rm_load, rn_load = _tile_indices(tile_m, tile_n, M, N, BLOCK_M, BLOCK_N, BLOCK_K // 8, INDEX_64)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if INTERPRETED:
        k0 = 0
        while k0 < K:
            acc = _int4_step(acc, x, q, scales, zeros, rm_load, rn, rn_load, N, k0, lanes, K, GROUP_SIZE, x_sm, x_sk,
                             q_sk, q_sn, s_sg, s_sn, z_sg, z_sn, BLOCK_M, BLOCK_K, SCALE_FORMAT, ONE_GROUP, False,
                             False, DOT, PRECISION, DECODE_BF16, INLINE_ASM, EVEN_K)
            k0 += BLOCK_K
    else:
        for k0 in range(0, K, BLOCK_K):
            acc = _int4_step(acc, x, q, scales, zeros, rm_load, rn, rn_load, N, k0, lanes, K, GROUP_SIZE, x_sm, x_sk,
                             q_sk, q_sn, s_sg, s_sn, z_sg, z_sn, BLOCK_M, BLOCK_K, SCALE_FORMAT, ONE_GROUP, False,
                             False, DOT, PRECISION, DECODE_BF16, INLINE_ASM, EVEN_K)
    _store_tile(acc, bias, out, rm, rn, M, N, bias_sn, out_sm, out_sn, HAS_BIAS, BIAS_FORMAT, DST_FORMAT, VIA_F32)


# ---- float8 x float8 ---------------------------------------------------------------------------------------
FP8_MAX = tl.constexpr(448.0)  # e4m3's largest finite value
SMALLEST_NORMAL = tl.constexpr(1.1754943508222875e-38)
# how ``fp8_rows`` scales a group of inputs: by its largest magnitude over 448; by that magnitude clamped at the
# given bound first (fbgemm's ``activation_scale_ub``); by the given scale itself (a static ``input_scale``)
SCALE_DYNAMIC = tl.constexpr(0)
SCALE_BOUNDED = tl.constexpr(1)
SCALE_STATIC = tl.constexpr(2)


@triton.jit
def _e4m3(v, out_type):
    """float32 ``v`` rounded to e4m3 to nearest even, saturating at 448: into a float8 ``out_type``, Triton's
    cast, one ``cvt.rn.satfinite`` for two values; into bytes (e4m3 tensors where the device has no float8
    conversions, the interpreter's included: ``Backend.kernel_element_type``) ``encode``, which rounds the same
    by the bits (finite overflow and infinity to 448; only a NaN's sign bit may differ)."""
    if out_type == tl.uint8:
        return encode(v, out_type, E4M3, False, False)
    else:
        return v.to(out_type)


@triton.jit
def _group_scale(largest, given, SCALING: tl.constexpr):
    """The scale of groups whose largest magnitudes are ``largest``, as SCALING says."""
    if SCALING == SCALE_STATIC:
        return tl.zeros_like(largest) + given
    if SCALING == SCALE_BOUNDED:
        largest = tl.minimum(largest, given)
    # divisions rounded as IEEE's (a GPU's plain float32 ``/`` is approximate): a bfloat16 row often lands
    # exactly between two e4m3 values, where an ulp decides the rounding
    return tl.div_rn(tl.maximum(largest, SMALLEST_NORMAL), FP8_MAX)


@triton.jit
def fp8_rows(x, out, row_scales, given, K, k_padded, group_k, x_sm, x_sk, BLOCK: tl.constexpr,
             SCALING: tl.constexpr, DECODE_BF16: tl.constexpr, INTERPRETED: tl.constexpr):
    """Group g of row m's inputs (``group_k`` of them from g * group_k: the whole padded row, or 1 x 128 blocks)
    as e4m3 values and the scale they multiply by: the group's largest magnitude over 448 (dynamic scaling, as
    torch's ``_scaled_mm`` callers quantize activations), that magnitude first clamped at ``given``
    (SCALE_BOUNDED), or ``given`` itself (SCALE_STATIC); values past 448 scales saturate, as ``encode`` rounds to
    e4m3. out[m, k] = e4m3(x[m, k] / scale) for k < K, 0 up to k_padded, so the product reads whole K tiles
    without masks; row_scales[m, g] = scale. For rows longer than ``fp8_rows_whole`` holds at once."""
    m = tl.program_id(0)
    g = tl.program_id(1)
    start = g * group_k
    stop = start + group_k
    rk = tl.arange(0, BLOCK)
    largest = tl.zeros([BLOCK], tl.float32)
    if SCALING != SCALE_STATIC:
        reach = tl.minimum(stop, K)
        if INTERPRETED:
            k0 = start
            while k0 < reach:
                kk = k0 + rk
                v = _operand(tl.load(x + m * x_sm + kk * x_sk, mask=kk < K, other=0), DECODE_BF16).to(tl.float32)
                largest = tl.maximum(largest, tl.abs(v))
                k0 += BLOCK
        else:
            for k0 in range(start, reach, BLOCK):
                kk = k0 + rk
                v = _operand(tl.load(x + m * x_sm + kk * x_sk, mask=kk < K, other=0), DECODE_BF16).to(tl.float32)
                largest = tl.maximum(largest, tl.abs(v))
    scale = _group_scale(tl.max(largest, axis=0), given, SCALING)
    if INTERPRETED:
        k0 = start
        while k0 < stop:
            kk = k0 + rk
            v = _operand(tl.load(x + m * x_sm + kk * x_sk, mask=kk < K, other=0), DECODE_BF16).to(tl.float32)
            tl.store(out + m * k_padded + kk, _e4m3(tl.div_rn(v, scale), out.dtype.element_ty),
                     mask=kk < stop)
            k0 += BLOCK
    else:
        for k0 in range(start, stop, BLOCK):
            kk = k0 + rk
            v = _operand(tl.load(x + m * x_sm + kk * x_sk, mask=kk < K, other=0), DECODE_BF16).to(tl.float32)
            tl.store(out + m * k_padded + kk, _e4m3(tl.div_rn(v, scale), out.dtype.element_ty),
                     mask=kk < stop)
    tl.store(row_scales + m * tl.num_programs(1) + g, scale)


@triton.jit
def fp8_rows_whole(x, out, row_scales, given, K, k_padded, group_k, groups, x_sm, x_sk, GROUPS: tl.constexpr,
                   BLOCK: tl.constexpr, SCALING: tl.constexpr, DECODE_BF16: tl.constexpr, INTERPRETED: tl.constexpr):
    """``fp8_rows`` for a row whose ``groups`` groups fit one GROUPS x BLOCK tile: the row read once, every
    load in flight together (the looping form reads a row twice, a block at a time)."""
    m = tl.program_id(0)
    rg = tl.arange(0, GROUPS)
    rj = tl.arange(0, BLOCK)
    kk = rg[:, None] * group_k + rj[None, :]
    inside = (rg[:, None] < groups) & (rj[None, :] < group_k)
    v = _operand(tl.load(x + m * x_sm + kk * x_sk, mask=inside & (kk < K), other=0), DECODE_BF16).to(tl.float32)
    scale = _group_scale(tl.max(tl.abs(v), axis=1), given, SCALING)
    tl.store(out + m * k_padded + kk, _e4m3(tl.div_rn(v, scale[:, None]), out.dtype.element_ty),
             mask=inside)
    tl.store(row_scales + m * groups + rg, scale, mask=rg < groups)


@triton.jit
def _e4m3_dot(acc, a_tile, b_tile, INTERPRETED: tl.constexpr):
    """acc plus the product of two e4m3 tiles on the float8 matrix units, summed in float32; the interpreter,
    which has no float8 arithmetic, multiplies their float32 values (exact products)."""
    if INTERPRETED:
        return tl.dot(decode(a_tile, E4M3), decode(b_tile, E4M3), acc, input_precision="ieee",
                      out_dtype=tl.float32)
    else:
        return tl.dot(a_tile, b_tile, acc, out_dtype=tl.float32)


@triton.jit
def _fp8_step(acc, a, q, rm_load, rn_load, k0, rk, K, k_padded, q_sk, q_sn, EVEN_K: tl.constexpr,
              INTERPRETED: tl.constexpr):
    """acc plus the e4m3 rows' K tile at k0 times the e4m3 weight's (inputs past K: the rows' zeros meet
    the weight's last input, read in place of a masked load)."""
    a_tile = tl.load(a + rm_load[:, None] * k_padded + (k0 + rk)[None, :])
    if EVEN_K:
        kk = k0 + rk
    else:
        kk = tl.minimum(k0 + rk, K - 1)
    b_tile = tl.load(q + kk[:, None] * q_sk + rn_load[None, :] * q_sn)
    return _e4m3_dot(acc, a_tile, b_tile, INTERPRETED)


@triton.jit
def fp8_gemm(a, q, row_scales, scales, bias, out, M, N, K, k_padded, scale_block_n, q_sk, q_sn, s_sn, bias_sn,
             out_sm, out_sn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
             GROUP_M: tl.constexpr, EVEN_K: tl.constexpr, SCALE_FORMAT: tl.constexpr, HAS_BIAS: tl.constexpr,
             BIAS_FORMAT: tl.constexpr, DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr, INDEX_64: tl.constexpr,
             INTERPRETED: tl.constexpr):
    """out = (a @ q.T) * row_scales[m] * scales[n] + bias on the float8 matrix units: ``a`` the rows as
    ``fp8_rows`` wrote them (k_padded a multiple of BLOCK_K), ``q`` the (N, K) e4m3 weight, its scales one
    for the tensor or one a channel (``scale_block_n`` outputs share one)."""
    tile_m, tile_n = _grouped_tile(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    rm, rn, rk, rm_load, rn_load = _tile_indices(tile_m, tile_n, M, N, BLOCK_M, BLOCK_N, BLOCK_K, INDEX_64)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if INTERPRETED:
        k0 = 0
        while k0 < k_padded:
            acc = _fp8_step(acc, a, q, rm_load, rn_load, k0, rk, K, k_padded, q_sk, q_sn, EVEN_K, INTERPRETED)
            k0 += BLOCK_K
    else:
        for k0 in range(0, k_padded, BLOCK_K):
            acc = _fp8_step(acc, a, q, rm_load, rn_load, k0, rk, K, k_padded, q_sk, q_sn, EVEN_K, INTERPRETED)
    acc = _row_and_column_scaled(acc, row_scales, scales, rm_load, rn_load, scale_block_n, s_sn, SCALE_FORMAT)
    _store_tile(acc, bias, out, rm, rn, M, N, bias_sn, out_sm, out_sn, HAS_BIAS, BIAS_FORMAT, DST_FORMAT, VIA_F32)


@triton.jit
def _block_scaled(acc, product, row_scales, scales, rm_load, rn_load, k0, groups, group_k, scale_block_n, s_sk, s_sn,
                  SCALE_FORMAT: tl.constexpr):
    """acc plus the K tile at k0's ``product`` scaled by its block's scales: the rows' (one a row for the tile's
    1 x group_k block) and the weight's (one for each scale_block_n x group_k block)."""
    g = k0 // group_k
    row_scale = tl.load(row_scales + rm_load * groups + g)
    scale = decode(tl.load(scales + g * s_sk + (rn_load // scale_block_n) * s_sn), SCALE_FORMAT).to(tl.float32)
    return acc + product * (row_scale[:, None] * scale[None, :])


@triton.jit
def _fp8_block_step(acc, a, q, row_scales, scales, rm_load, rn_load, k0, rk, K, k_padded, groups, group_k,
                    scale_block_n, q_sk, q_sn, s_sk, s_sn, EVEN_K: tl.constexpr, SCALE_FORMAT: tl.constexpr,
                    INTERPRETED: tl.constexpr):
    """acc plus the K tile at k0 of the e4m3 rows times the e4m3 weight, scaled by its block's scales."""
    product = _fp8_step(tl.zeros_like(acc), a, q, rm_load, rn_load, k0, rk, K, k_padded, q_sk, q_sn, EVEN_K,
                        INTERPRETED)
    return _block_scaled(acc, product, row_scales, scales, rm_load, rn_load, k0, groups, group_k, scale_block_n,
                         s_sk, s_sn, SCALE_FORMAT)


@triton.jit
def fp8_block_gemm(a, q, row_scales, scales, bias, out, M, N, K, k_padded, group_k, scale_block_n, q_sk, q_sn, s_sk,
                   s_sn, bias_sn, out_sm, out_sn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr, SCALE_FORMAT: tl.constexpr,
                   HAS_BIAS: tl.constexpr, BIAS_FORMAT: tl.constexpr, DST_FORMAT: tl.constexpr,
                   VIA_F32: tl.constexpr, INDEX_64: tl.constexpr, INTERPRETED: tl.constexpr):
    """out = sum over K blocks of (a @ q.T) * row_scales[m, block] * scales[block, n // scale_block_n] + bias on
    the float8 matrix units: ``a`` the rows as ``fp8_rows`` wrote them in 1 x group_k blocks (their scales
    (M, k_padded / group_k)), ``q`` the (N, K) e4m3 weight with a scale per group_k x scale_block_n block
    (DeepSeek-V3's 128 x 128), each K tile's product scaled by its blocks' scales before it joins the float32
    sum (BLOCK_K divides group_k, so a tile lies in one block)."""
    tile_m, tile_n = _grouped_tile(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    rm, rn, rk, rm_load, rn_load = _tile_indices(tile_m, tile_n, M, N, BLOCK_M, BLOCK_N, BLOCK_K, INDEX_64)
    groups = k_padded // group_k
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if INTERPRETED:
        k0 = 0
        while k0 < k_padded:
            acc = _fp8_block_step(acc, a, q, row_scales, scales, rm_load, rn_load, k0, rk, K, k_padded, groups,
                                  group_k, scale_block_n, q_sk, q_sn, s_sk, s_sn, EVEN_K, SCALE_FORMAT, INTERPRETED)
            k0 += BLOCK_K
    else:
        for k0 in range(0, k_padded, BLOCK_K):
            acc = _fp8_block_step(acc, a, q, row_scales, scales, rm_load, rn_load, k0, rk, K, k_padded, groups,
                                  group_k, scale_block_n, q_sk, q_sn, s_sk, s_sn, EVEN_K, SCALE_FORMAT, INTERPRETED)
    _store_tile(acc, bias, out, rm, rn, M, N, bias_sn, out_sm, out_sn, HAS_BIAS, BIAS_FORMAT, DST_FORMAT, VIA_F32)


@triton.jit
def _fp8_described_step(acc, a_desc, q_desc, off_m, off_n, k0, INTERPRETED: tl.constexpr):
    """acc plus the K tile at k0 of the e4m3 rows times the e4m3 weight, both read through tensor descriptors:
    the weight as the (N, K) matrix it is stored as, transposed in shared memory (K-major, as the float8
    ``wgmma`` takes both operands); inputs past K and rows past M read as zeros."""
    a_tile = a_desc.load([off_m, k0])
    b_tile = tl.trans(q_desc.load([off_n, k0]))
    return _e4m3_dot(acc, a_tile, b_tile, INTERPRETED)


@triton.jit
def _fp8_tile_step(acc, a, q, a_desc, q_desc, row_scales, scales, off_m, off_n, rm_load, rn_load, k0, rk, K,
                   k_padded, groups, group_k, scale_block_n, q_sk, q_sn, s_sk, s_sn, TMA: tl.constexpr,
                   BLOCKED: tl.constexpr, EVEN_K: tl.constexpr, SCALE_FORMAT: tl.constexpr,
                   INTERPRETED: tl.constexpr):
    """acc plus the K tile at k0 of the product (BLOCKED: scaled by its blocks' scales before it joins acc)."""
    if BLOCKED:
        start = tl.zeros_like(acc)
    else:
        start = acc
    if TMA:
        product = _fp8_described_step(start, a_desc, q_desc, off_m, off_n, k0, INTERPRETED)
    else:
        product = _fp8_step(start, a, q, rm_load, rn_load, k0, rk, K, k_padded, q_sk, q_sn, EVEN_K, INTERPRETED)
    if BLOCKED:
        return _block_scaled(acc, product, row_scales, scales, rm_load, rn_load, k0, groups, group_k, scale_block_n,
                             s_sk, s_sn, SCALE_FORMAT)
    else:
        return product


@triton.jit
def _fp8_output_tile(a, q, a_desc, q_desc, row_scales, scales, bias, out, tile, tiles_m, tiles_n, M, N, K, k_padded,
                     groups, group_k, scale_block_n, q_sk, q_sn, s_sk, s_sn, bias_sn, out_sm, out_sn,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                     TMA: tl.constexpr, BLOCKED: tl.constexpr, EVEN_K: tl.constexpr, SCALE_FORMAT: tl.constexpr,
                     HAS_BIAS: tl.constexpr, BIAS_FORMAT: tl.constexpr, DST_FORMAT: tl.constexpr,
                     VIA_F32: tl.constexpr, INTERPRETED: tl.constexpr):
    """Output tile ``tile`` of ``fp8_gemm_tiles`` (in grouped order): its product, scales and epilogue."""
    tile_m, tile_n = _grouped_tile(tile, tiles_m, tiles_n, GROUP_M)
    rm, rn, rk, rm_load, rn_load = _tile_indices(tile_m, tile_n, M, N, BLOCK_M, BLOCK_N, BLOCK_K, False)
    off_m = tile_m * BLOCK_M
    off_n = tile_n * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if INTERPRETED:
        k0 = 0
        while k0 < k_padded:
            acc = _fp8_tile_step(acc, a, q, a_desc, q_desc, row_scales, scales, off_m, off_n, rm_load, rn_load, k0,
                                 rk, K, k_padded, groups, group_k, scale_block_n, q_sk, q_sn, s_sk, s_sn, TMA, BLOCKED,
                                 EVEN_K, SCALE_FORMAT, INTERPRETED)
            k0 += BLOCK_K
    else:
        for k0 in range(0, k_padded, BLOCK_K):
            acc = _fp8_tile_step(acc, a, q, a_desc, q_desc, row_scales, scales, off_m, off_n, rm_load, rn_load, k0,
                                 rk, K, k_padded, groups, group_k, scale_block_n, q_sk, q_sn, s_sk, s_sn, TMA, BLOCKED,
                                 EVEN_K, SCALE_FORMAT, INTERPRETED)
    if not BLOCKED:
        acc = _row_and_column_scaled(acc, row_scales, scales, rm_load, rn_load, scale_block_n, s_sn, SCALE_FORMAT)
    _store_tile(acc, bias, out, rm, rn, M, N, bias_sn, out_sm, out_sn, HAS_BIAS, BIAS_FORMAT, DST_FORMAT, VIA_F32)


@triton.jit
def fp8_gemm_tiles(a, q, row_scales, scales, bias, out, M, N, K, k_padded, group_k, scale_block_n, q_sk, q_sn, s_sk,
                   s_sn, bias_sn, out_sm, out_sn, programs, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, TMA: tl.constexpr, FLATTEN: tl.constexpr,
                   BLOCKED: tl.constexpr, EVEN_K: tl.constexpr, SCALE_FORMAT: tl.constexpr, HAS_BIAS: tl.constexpr,
                   BIAS_FORMAT: tl.constexpr, DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr,
                   INTERPRETED: tl.constexpr):
    """``fp8_gemm`` (BLOCKED: ``fp8_block_gemm``, ``group_k`` inputs a scale) as ``kernels/matmul.py``'s
    ``gemm_tiles`` walks a matrix: ``programs`` programs (the grid) take the output tiles in grouped order,
    program p tiles p, p + programs, ... (one program per SM: persistent, a program's next tile loading while
    its last one's epilogue runs, with FLATTEN pipelined as one loop; one per tile: each takes one).

    TMA: the rows (M, k_padded) and the weight (N, K), K contiguous, through device-side tensor descriptors
    (16-byte aligned bases and row strides; the caller checks), which fill shared memory by the copy engine.
    Indices fit in int32."""
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    groups = k_padded // group_k
    if TMA:
        a_desc = tl.make_tensor_descriptor(a, shape=[M, k_padded], strides=[k_padded, 1],
                                           block_shape=[BLOCK_M, BLOCK_K])
        q_desc = tl.make_tensor_descriptor(q, shape=[N, K], strides=[q_sn, 1], block_shape=[BLOCK_N, BLOCK_K])
    else:
        a_desc = a
        q_desc = q
    if INTERPRETED:
        tile = pid
        while tile < tiles_m * tiles_n:
            _fp8_output_tile(a, q, a_desc, q_desc, row_scales, scales, bias, out, tile, tiles_m, tiles_n, M, N, K,
                             k_padded, groups, group_k, scale_block_n, q_sk, q_sn, s_sk, s_sn, bias_sn, out_sm, out_sn,
                             BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, TMA, BLOCKED, EVEN_K, SCALE_FORMAT, HAS_BIAS,
                             BIAS_FORMAT, DST_FORMAT, VIA_F32, INTERPRETED)
            tile += programs
    else:
        for tile in tl.range(pid, tiles_m * tiles_n, programs, flatten=FLATTEN):
            _fp8_output_tile(a, q, a_desc, q_desc, row_scales, scales, bias, out, tile, tiles_m, tiles_n, M, N, K,
                             k_padded, groups, group_k, scale_block_n, q_sk, q_sn, s_sk, s_sn, bias_sn, out_sm, out_sn,
                             BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, TMA, BLOCKED, EVEN_K, SCALE_FORMAT, HAS_BIAS,
                             BIAS_FORMAT, DST_FORMAT, VIA_F32, INTERPRETED)
