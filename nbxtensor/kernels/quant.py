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
def _weight_tile(q, scales, zeros, g_idx, kk, rn, k_mask, group_size, scale_block_n, q_sk, q_sn, s_sg, s_sn, z_sg,
                 z_sn, WEIGHT: tl.constexpr, SCALE_FORMAT: tl.constexpr, HAS_G_IDX: tl.constexpr):
    """The float32 [BLOCK_K, BLOCK_N] tile of the weight, transposed (input kk by output rn), dequantized;
    inputs past K (``k_mask`` false) give zeros. Loads use indices clamped into range, so none is masked
    (a masked float8 load has no zero to fill with in the interpreter)."""
    kk_in = tl.where(k_mask, kk, 0)
    if WEIGHT == WEIGHT_INT4:
        words = tl.load(q + (kk_in // 8)[:, None] * q_sk + rn[None, :] * q_sn)
        values = ((words >> ((kk_in % 8) * 4)[:, None]) & 0xF).to(tl.float32)
    elif WEIGHT == WEIGHT_INT8:
        values = tl.load(q + kk_in[:, None] * q_sk + rn[None, :] * q_sn).to(tl.float32)
    else:
        values = _decode(tl.load(q + kk_in[:, None] * q_sk + rn[None, :] * q_sn), E4M3)
    if HAS_G_IDX:
        group = tl.load(g_idx + kk_in)
    else:
        group = kk_in // group_size
    scale = _decode(tl.load(scales + group[:, None] * s_sg + (rn // scale_block_n)[None, :] * s_sn), SCALE_FORMAT)
    if WEIGHT == WEIGHT_INT4:
        zero = tl.load(zeros + group[:, None] * z_sg + rn[None, :] * z_sn).to(tl.float32)
        values = values - zero
    return tl.where(k_mask[:, None], values * scale.to(tl.float32), 0.0)


@triton.jit
def _rows_step(acc, x, q, scales, zeros, g_idx, rm_load, rn_load, kk, K, group_size, scale_block_n, x_sm, x_sk,
               q_sk, q_sn, s_sg, s_sn, z_sg, z_sn, BLOCK_M: tl.constexpr, WEIGHT: tl.constexpr,
               SCALE_FORMAT: tl.constexpr, HAS_G_IDX: tl.constexpr, DOT: tl.constexpr, PRECISION: tl.constexpr,
               DECODE_BF16: tl.constexpr):
    """acc plus the rows' products with the weight's inputs ``kk`` (those below K)."""
    k_mask = kk < K
    w_tile = _weight_tile(q, scales, zeros, g_idx, kk, rn_load, k_mask, group_size, scale_block_n, q_sk, q_sn,
                          s_sg, s_sn, z_sg, z_sn, WEIGHT, SCALE_FORMAT, HAS_G_IDX)
    if BLOCK_M == 1:
        # one row: products gather in a [BLOCK_K, BLOCK_N] accumulator, summed over K once at the end
        x_row = _operand(tl.load(x + kk * x_sk, mask=k_mask, other=0), DECODE_BF16).to(tl.float32)
        return acc + x_row[:, None] * w_tile
    else:
        # the dequantized tile in the rows' type (a GPU's half-precision matrix units), float32 otherwise
        x_tile = _operand(tl.load(x + rm_load[:, None] * x_sm + kk[None, :] * x_sk, mask=k_mask[None, :], other=0),
                          DECODE_BF16)
        return tl.dot(x_tile.to(DOT), w_tile.to(DOT), acc, input_precision=PRECISION, out_dtype=tl.float32)


@triton.jit
def quantized_gemv(x, q, scales, zeros, g_idx, bias, out, partial, M, N, K, k_per_split, group_size, scale_block_n,
                   x_sm, x_sk, q_sk, q_sn, s_sg, s_sn, z_sg, z_sn, bias_sn, out_sm, out_sn,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT: tl.constexpr,
                   WEIGHT: tl.constexpr, SCALE_FORMAT: tl.constexpr, HAS_G_IDX: tl.constexpr, DOT: tl.constexpr,
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
            acc = _rows_step(acc, x, q, scales, zeros, g_idx, rm_load, rn_load, k_start + k0 + rk, k_stop, group_size,
                             scale_block_n, x_sm, x_sk, q_sk, q_sn, s_sg, s_sn, z_sg, z_sn, BLOCK_M, WEIGHT,
                             SCALE_FORMAT, HAS_G_IDX, DOT, PRECISION, DECODE_BF16)
            k0 += BLOCK_K
    else:
        for k0 in range(0, k_per_split, BLOCK_K):
            acc = _rows_step(acc, x, q, scales, zeros, g_idx, rm_load, rn_load, k_start + k0 + rk, k_stop, group_size,
                             scale_block_n, x_sm, x_sk, q_sk, q_sn, s_sg, s_sn, z_sg, z_sn, BLOCK_M, WEIGHT,
                             SCALE_FORMAT, HAS_G_IDX, DOT, PRECISION, DECODE_BF16)
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
                   WEIGHT: tl.constexpr, SCALE_FORMAT: tl.constexpr, HAS_G_IDX: tl.constexpr, DOT: tl.constexpr,
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
            acc = _rows_step(acc, x, q, scales, zeros, g_idx, rm_load, rn_load, k0 + rk, K, group_size, scale_block_n,
                             x_sm, x_sk, q_sk, q_sn, s_sg, s_sn, z_sg, z_sn, BLOCK_M, WEIGHT, SCALE_FORMAT, HAS_G_IDX,
                             DOT, PRECISION, DECODE_BF16)
            k0 += BLOCK_K
    else:
        for k0 in range(0, K, BLOCK_K):
            acc = _rows_step(acc, x, q, scales, zeros, g_idx, rm_load, rn_load, k0 + rk, K, group_size, scale_block_n,
                             x_sm, x_sk, q_sk, q_sn, s_sg, s_sn, z_sg, z_sn, BLOCK_M, WEIGHT, SCALE_FORMAT, HAS_G_IDX,
                             DOT, PRECISION, DECODE_BF16)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    _epilogue(acc, bias, 0, 0, bias_sn, rm, rn, mask, 1.0, 1.0, out, 0, out_sm, out_sn, HAS_BIAS, False,
              BIAS_FORMAT, DST_FORMAT, VIA_F32)
