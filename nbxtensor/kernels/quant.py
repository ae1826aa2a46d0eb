"""Products with quantized weights (``nbxtensor/quant.py`` gives the layouts): rows of ``x`` times the
(N, K) weight that 4-bit, int8 or float8 values and their scales stand for. Weight tiles are dequantized
to float32 in registers as they are loaded, so the packed weights are read once and never written out
dequantized.

``quantized_gemv`` (decode, up to 16 rows) streams the weight with split K as ``kernels/matmul.py``'s
``gemv`` does (its ``gemv_combine`` adds the partials); ``quantized_gemm`` (prefill) tiles the output and
multiplies on the matrix units.
"""
import triton
import triton.language as tl

from .copy import FORMAT_E4M3FN, _decode
from .matmul import _epilogue, _gemv_program, _gemv_rows, _grouped_tile, _operand, _tile_indices

WEIGHT_INT4 = tl.constexpr(0)
WEIGHT_INT8 = tl.constexpr(1)
WEIGHT_FP8 = tl.constexpr(2)
E4M3 = tl.constexpr(FORMAT_E4M3FN)


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
                 SCALE_FORMAT: tl.constexpr, HAS_G_IDX: tl.constexpr, GROUPS_IN_TILE: tl.constexpr,
                 INTERPRETED: tl.constexpr):
    """The float32 [BLOCK_K, BLOCK_N] tile of the weight, transposed (inputs kk = k_base + 0.. by outputs rn),
    dequantized; inputs past ``k_stop`` (``k_mask`` false) give zeros. Loads use indices clamped into range
    (a masked float8 load has no zero to fill with in the interpreter), except the int4 words'.

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
    elif WEIGHT == WEIGHT_INT8:
        values = tl.load(q + kk_in[:, None] * q_sk + rn[None, :] * q_sn).to(tl.float32)
    else:
        raw = tl.load(q + kk_in[:, None] * q_sk + rn[None, :] * q_sn)
        if INTERPRETED:
            values = _decode(raw, E4M3)  # the interpreter has no float8 arithmetic
        else:
            values = raw.to(tl.float32)
    if GROUPS_IN_TILE > 0:
        scale = _per_input(_decode(_group_tile(scales, k_base, k_stop, group_size, rn // scale_block_n, s_sg, s_sn,
                                               GROUPS_IN_TILE), SCALE_FORMAT).to(tl.float32), GROUPS_IN_TILE, BLOCK_K)
        if WEIGHT == WEIGHT_INT4:
            zero = _group_tile(zeros, k_base, k_stop, group_size, rn, z_sg, z_sn, GROUPS_IN_TILE).to(tl.float32)
            values = values - _per_input(zero, GROUPS_IN_TILE, BLOCK_K)
    else:
        if HAS_G_IDX:
            group = tl.load(g_idx + kk_in)
        else:
            group = kk_in // group_size
        scale = _decode(tl.load(scales + group[:, None] * s_sg + (rn // scale_block_n)[None, :] * s_sn),
                        SCALE_FORMAT).to(tl.float32)
        if WEIGHT == WEIGHT_INT4:
            values = values - tl.load(zeros + group[:, None] * z_sg + rn[None, :] * z_sn).to(tl.float32)
    return tl.where(k_mask[:, None], values * scale, 0.0)


@triton.jit
def _rows_step(acc, x, q, scales, zeros, g_idx, rm_load, rn_load, rn, N, k_base, rk, K, group_size, scale_block_n,
               x_sm, x_sk, q_sk, q_sn, s_sg, s_sn, z_sg, z_sn, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr,
               WEIGHT: tl.constexpr, SCALE_FORMAT: tl.constexpr, HAS_G_IDX: tl.constexpr,
               GROUPS_IN_TILE: tl.constexpr, DOT: tl.constexpr, PRECISION: tl.constexpr, DECODE_BF16: tl.constexpr,
               INTERPRETED: tl.constexpr):
    """acc plus the rows' products with the weight's inputs k_base + ``rk`` (those below K)."""
    kk = k_base + rk
    k_mask = kk < K
    w_tile = _weight_tile(q, scales, zeros, g_idx, k_base, kk, rn_load, rn, N, k_mask, K, group_size, scale_block_n,
                          q_sk, q_sn, s_sg, s_sn, z_sg, z_sn, BLOCK_K, WEIGHT, SCALE_FORMAT, HAS_G_IDX, GROUPS_IN_TILE,
                          INTERPRETED)
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
def quantized_gemv(x, q, scales, zeros, g_idx, bias, out, partial, M, N, K, k_per_split, group_size, scale_block_n,
                   x_sm, x_sk, q_sk, q_sn, s_sg, s_sn, z_sg, z_sn, bias_sn, out_sm, out_sn,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT: tl.constexpr,
                   WEIGHT: tl.constexpr, SCALE_FORMAT: tl.constexpr, HAS_G_IDX: tl.constexpr,
                   GROUPS_IN_TILE: tl.constexpr, DOT: tl.constexpr,
                   PRECISION: tl.constexpr, DECODE_BF16: tl.constexpr, HAS_BIAS: tl.constexpr,
                   BIAS_FORMAT: tl.constexpr, DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr,
                   INDEX_64: tl.constexpr, INTERPRETED: tl.constexpr):
    """out = x @ w.T + bias for M <= BLOCK_M <= 16 rows of ``x``: program (i, s) reads output columns
    [i * BLOCK_N, ...) of the weight's inputs in split s of K, so the weight is streamed once. With SPLIT,
    float32 partial sums go to ``partial`` (split, M, N) for ``gemv_combine`` (a fixed order, no atomics)."""
    split, rm, rn, rk, k_start, k_stop, rm_load, rn_load, acc = _gemv_program(M, N, K, k_per_split, BLOCK_M, BLOCK_N,
                                                                              BLOCK_K, tl.float32, INDEX_64)
    if INTERPRETED:
        # Triton's interpreter cannot iterate a range over runtime bounds; a GPU pipelines the for loop
        k0 = 0
        while k0 < k_per_split:
            acc = _rows_step(acc, x, q, scales, zeros, g_idx, rm_load, rn_load, rn, N, k_start + k0, rk, k_stop,
                             group_size, scale_block_n, x_sm, x_sk, q_sk, q_sn, s_sg, s_sn, z_sg, z_sn, BLOCK_M,
                             BLOCK_K, WEIGHT, SCALE_FORMAT, HAS_G_IDX, GROUPS_IN_TILE, DOT, PRECISION, DECODE_BF16,
                             INTERPRETED)
            k0 += BLOCK_K
    else:
        for k0 in range(0, k_per_split, BLOCK_K):
            acc = _rows_step(acc, x, q, scales, zeros, g_idx, rm_load, rn_load, rn, N, k_start + k0, rk, k_stop,
                             group_size, scale_block_n, x_sm, x_sk, q_sk, q_sn, s_sg, s_sn, z_sg, z_sn, BLOCK_M,
                             BLOCK_K, WEIGHT, SCALE_FORMAT, HAS_G_IDX, GROUPS_IN_TILE, DOT, PRECISION, DECODE_BF16,
                             INTERPRETED)
    acc2, mask = _gemv_rows(acc, rm, rn, M, N, BLOCK_M)
    if SPLIT:
        tl.store(partial + (split * M + rm[:, None]) * N + rn[None, :], acc2, mask=mask)
    else:
        _epilogue(acc2, bias, 0, 0, bias_sn, rm, rn, mask, 1.0, 1.0, out, 0, out_sm, out_sn, HAS_BIAS, False,
                  BIAS_FORMAT, DST_FORMAT, VIA_F32)


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
                             SCALE_FORMAT, HAS_G_IDX, GROUPS_IN_TILE, DOT, PRECISION, DECODE_BF16, INTERPRETED)
            k0 += BLOCK_K
    else:
        for k0 in range(0, K, BLOCK_K):
            acc = _rows_step(acc, x, q, scales, zeros, g_idx, rm_load, rn_load, rn, N, k0, rk, K, group_size,
                             scale_block_n, x_sm, x_sk, q_sk, q_sn, s_sg, s_sn, z_sg, z_sn, BLOCK_M, BLOCK_K, WEIGHT,
                             SCALE_FORMAT, HAS_G_IDX, GROUPS_IN_TILE, DOT, PRECISION, DECODE_BF16, INTERPRETED)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    _epilogue(acc, bias, 0, 0, bias_sn, rm, rn, mask, 1.0, 1.0, out, 0, out_sm, out_sn, HAS_BIAS, False,
              BIAS_FORMAT, DST_FORMAT, VIA_F32)
