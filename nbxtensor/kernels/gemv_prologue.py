"""GEMVs whose prologue computes their input rows from the op that would have produced them, so a decode
step launches one kernel where it launched two: the RMS norm or LayerNorm of the rows (optionally of
``x + residual``, the sum written out once as the new residual stream) times the norm's weight (plus its
bias), or a gated MLP's ``act(gate) * up``. Each value is rounded to the activation dtype before the product,
as the unfused op's output would be stored, so results match the unfused pair to the product's own rounding.

The weight streaming, splits and epilogue are ``gemv``'s (``kernels/matmul.py``); every program
recomputes the row statistics over the whole of K (decode rows are a few thousand values, read from L2),
so K may still be split over programs. ``quantized_gemv_prologue`` is the same for one row and a quantized
weight, its weight tiles dequantized as ``kernels/quant.py``'s one-row GEMVs dequantize them.
"""
import triton
import triton.language as tl

from .formats import decode, encode
from .dependent_launch import await_predecessors
from .matmul import _gemv_program, _gemv_write, _operand
from .pointwise_bodies import act_and_mul
from .pointwise_codes import CAT_FLOAT32
from .quant import _int4_row, _int4_words, _weight_tile

PROLOGUE_RMS_NORM = tl.constexpr(1)
PROLOGUE_ACT_AND_MUL = tl.constexpr(2)
PROLOGUE_LAYER_NORM = tl.constexpr(3)


@triton.jit
def _summed_rows(x, res, res_out, rm, kk, mask, K, x_sm, x_sk, res_sm, res_sk, write, HAS_RESIDUAL: tl.constexpr,
                 X_FORMAT: tl.constexpr, ACT_FORMAT: tl.constexpr, ACT_VIA_F32: tl.constexpr):
    """Rows ``rm`` of x at columns ``kk`` in float32, plus the residual's rounded to the activation dtype
    as an unfused add would store it (and stored to res_out, densely, where ``write``)."""
    values = decode(tl.load(x + rm[:, None] * x_sm + kk[None, :] * x_sk, mask=mask, other=0),
                     X_FORMAT).to(tl.float32)
    if HAS_RESIDUAL:
        r = decode(tl.load(res + rm[:, None] * res_sm + kk[None, :] * res_sk, mask=mask, other=0),
                    X_FORMAT).to(tl.float32)
        h = encode(values + r, res_out.dtype.element_ty, ACT_FORMAT, ACT_VIA_F32, False)
        tl.store(res_out + rm[:, None] * K + kk[None, :], h, mask=mask & write)
        values = decode(h, X_FORMAT).to(tl.float32)
    return values


@triton.jit
def _row_moment(x, res, res_out, rm, row_mask, K, center, x_sm, x_sk, res_sm, res_sk, write, POWER: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, HAS_RESIDUAL: tl.constexpr, X_FORMAT: tl.constexpr,
                ACT_FORMAT: tl.constexpr, ACT_VIA_F32: tl.constexpr, INTERPRETED: tl.constexpr):
    """The mean of (row - center) ** POWER (1 or 2) of each row over all of K (the residual added first),
    BLOCK_K columns at a time: decode rows are short, so a wide block reads them in one or two steps before the
    weight streams."""
    rk = tl.arange(0, BLOCK_K)
    total = tl.zeros((BLOCK_M, BLOCK_K), dtype=tl.float32)
    if INTERPRETED:
        k0 = 0
        while k0 < K:
            total += _moment_terms(x, res, res_out, rm, row_mask, k0 + rk, K, center, x_sm, x_sk, res_sm, res_sk, write,
                                   POWER, HAS_RESIDUAL, X_FORMAT, ACT_FORMAT, ACT_VIA_F32)
            k0 += BLOCK_K
    else:
        for k0 in range(0, K, BLOCK_K):
            total += _moment_terms(x, res, res_out, rm, row_mask, k0 + rk, K, center, x_sm, x_sk, res_sm, res_sk, write,
                                   POWER, HAS_RESIDUAL, X_FORMAT, ACT_FORMAT, ACT_VIA_F32)
    return tl.sum(total, 1) / K


@triton.jit
def _moment_terms(x, res, res_out, rm, row_mask, kk, K, center, x_sm, x_sk, res_sm, res_sk, write, POWER: tl.constexpr,
                  HAS_RESIDUAL: tl.constexpr, X_FORMAT: tl.constexpr, ACT_FORMAT: tl.constexpr,
                  ACT_VIA_F32: tl.constexpr):
    """(row - center) ** POWER at columns ``kk`` (zero past K or a padding row)."""
    mask = row_mask[:, None] & (kk < K)[None, :]
    values = _summed_rows(x, res, res_out, rm, kk, mask, K, x_sm, x_sk, res_sm, res_sk, write, HAS_RESIDUAL, X_FORMAT,
                          ACT_FORMAT, ACT_VIA_F32)
    values = tl.where(mask, values - center[:, None], 0.0)
    if POWER == 2:
        values = values * values
    return values


@triton.jit
def _row_statistics(x, res, res_out, rm, row_mask, K, eps, x_sm, x_sk, res_sm, res_sk, write, PROLOGUE: tl.constexpr,
                    BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, HAS_RESIDUAL: tl.constexpr, X_FORMAT: tl.constexpr,
                    ACT_FORMAT: tl.constexpr, ACT_VIA_F32: tl.constexpr, INTERPRETED: tl.constexpr):
    """(center, scale) of each row as its norm takes it, (row - center) * scale: (0, 1 / sqrt(mean(row^2) + eps))
    for an RMS norm; (mean, 1 / sqrt(variance + eps)) for a LayerNorm, the variance a second pass over the
    centered row; the residual sum written out by the first pass alone."""
    zero = tl.zeros((BLOCK_M,), dtype=tl.float32)
    if PROLOGUE == PROLOGUE_LAYER_NORM:
        mean = _row_moment(x, res, res_out, rm, row_mask, K, zero, x_sm, x_sk, res_sm, res_sk, write, 1, BLOCK_M,
                           BLOCK_K, HAS_RESIDUAL, X_FORMAT, ACT_FORMAT, ACT_VIA_F32, INTERPRETED)
        variance = _row_moment(x, res, res_out, rm, row_mask, K, mean, x_sm, x_sk, res_sm, res_sk, False, 2, BLOCK_M,
                               BLOCK_K, HAS_RESIDUAL, X_FORMAT, ACT_FORMAT, ACT_VIA_F32, INTERPRETED)
        return mean, 1.0 / tl.sqrt(variance + eps)
    else:
        squares = _row_moment(x, res, res_out, rm, row_mask, K, zero, x_sm, x_sk, res_sm, res_sk, write, 2, BLOCK_M,
                              BLOCK_K, HAS_RESIDUAL, X_FORMAT, ACT_FORMAT, ACT_VIA_F32, INTERPRETED)
        return zero, 1.0 / tl.sqrt(squares + eps)


@triton.jit
def _prologue_tile(x, res, res_out, norm_w, norm_b, rm, kk, row_mask, k_stop, K, center, scale, x_sm, x_sk, res_sm,
                   res_sk, nw_sk, nb_sk, PROLOGUE: tl.constexpr, HAS_RESIDUAL: tl.constexpr, ACT_MODE: tl.constexpr,
                   HAS_NORM_WEIGHT: tl.constexpr, HAS_NORM_BIAS: tl.constexpr, X_FORMAT: tl.constexpr,
                   NW_FORMAT: tl.constexpr, ACT_FORMAT: tl.constexpr, ACT_VIA_F32: tl.constexpr):
    """The (BLOCK_M, BLOCK_K) input tile at columns ``kk`` in the activation dtype (zero from ``k_stop`` on,
    where this split's part of K ends): the normed rows ((row - center) * scale) times the norm weight plus its
    bias (each where the norm has one), or act(gate) * up of the gate (columns kk) and up (columns K + kk)
    halves."""
    mask = row_mask[:, None] & (kk < k_stop)[None, :]
    if PROLOGUE == PROLOGUE_RMS_NORM or PROLOGUE == PROLOGUE_LAYER_NORM:
        values = _summed_rows(x, res, res_out, rm, kk, mask, K, x_sm, x_sk, res_sm, res_sk, False, HAS_RESIDUAL,
                              X_FORMAT, ACT_FORMAT, ACT_VIA_F32)
        values = (values - center[:, None]) * scale[:, None]
        if HAS_NORM_WEIGHT:
            weight = decode(tl.load(norm_w + kk * nw_sk, mask=kk < k_stop, other=0), NW_FORMAT).to(tl.float32)
            values = values * weight[None, :]
        if HAS_NORM_BIAS:
            shift = decode(tl.load(norm_b + kk * nb_sk, mask=kk < k_stop, other=0), NW_FORMAT).to(tl.float32)
            values = values + shift[None, :]
        values = tl.where(mask, values, 0.0)
    else:
        gate = decode(tl.load(x + rm[:, None] * x_sm + kk[None, :] * x_sk, mask=mask, other=0),
                       X_FORMAT).to(tl.float32)
        up = decode(tl.load(x + rm[:, None] * x_sm + (K + kk)[None, :] * x_sk, mask=mask, other=0),
                     X_FORMAT).to(tl.float32)
        values = act_and_mul(gate, up, 0, 0, ACT_MODE, CAT_FLOAT32)
    return encode(values, x.dtype.element_ty, ACT_FORMAT, ACT_VIA_F32, False)


@triton.jit
def _accumulate(acc, tile, w, rn_load, kk, k_stop, w_sk, w_sn, BLOCK_M: tl.constexpr, ACC: tl.constexpr,
                PRECISION: tl.constexpr, X_FORMAT: tl.constexpr, DECODE_BF16: tl.constexpr):
    """acc plus the input tile's products with the weight rows ``kk`` (those below ``k_stop``), as ``gemv``
    accumulates them."""
    w_tile = _operand(tl.load(w + kk[:, None] * w_sk + rn_load[None, :] * w_sn, mask=(kk < k_stop)[:, None],
                              other=0), DECODE_BF16)
    if BLOCK_M == 1:
        # one row: the tile's single row as a column, its products gathered as ``gemv`` gathers them
        row = tl.sum(decode(tile, X_FORMAT).to(ACC), 0)
        return acc + row[:, None] * w_tile.to(ACC)
    else:
        return tl.dot(_operand(tile, DECODE_BF16), w_tile, acc, input_precision=PRECISION, out_dtype=ACC)


@triton.jit
def _prologue_step(acc, x, res, res_out, norm_w, norm_b, w, rm, rn_load, kk, row_mask, k_stop, K, center, scale, x_sm,
                   x_sk, res_sm, res_sk, nw_sk, nb_sk, w_sk, w_sn, PROLOGUE: tl.constexpr, HAS_RESIDUAL: tl.constexpr,
                   ACT_MODE: tl.constexpr, HAS_NORM_WEIGHT: tl.constexpr, HAS_NORM_BIAS: tl.constexpr,
                   BLOCK_M: tl.constexpr, ACC: tl.constexpr, PRECISION: tl.constexpr, DECODE_BF16: tl.constexpr,
                   X_FORMAT: tl.constexpr, NW_FORMAT: tl.constexpr, ACT_FORMAT: tl.constexpr,
                   ACT_VIA_F32: tl.constexpr):
    """One K step: the prologue's input tile at columns ``kk``, then its products with the weight rows."""
    tile = _prologue_tile(x, res, res_out, norm_w, norm_b, rm, kk, row_mask, k_stop, K, center, scale, x_sm, x_sk,
                          res_sm, res_sk, nw_sk, nb_sk, PROLOGUE, HAS_RESIDUAL, ACT_MODE, HAS_NORM_WEIGHT,
                          HAS_NORM_BIAS, X_FORMAT, NW_FORMAT, ACT_FORMAT, ACT_VIA_F32)
    return _accumulate(acc, tile, w, rn_load, kk, k_stop, w_sk, w_sn, BLOCK_M, ACC, PRECISION, X_FORMAT, DECODE_BF16)


@triton.jit
def gemv_prologue(x, res, res_out, norm_w, norm_b, w, bias, out, partial, counters, M, N, K, k_per_split, eps,
                  x_sm, x_sk, res_sm, res_sk, nw_sk, nb_sk, w_sk, w_sn, bias_sm, bias_sn, out_sm, out_sn,
                  PROLOGUE: tl.constexpr, HAS_RESIDUAL: tl.constexpr, ACT_MODE: tl.constexpr,
                  HAS_NORM_WEIGHT: tl.constexpr, HAS_NORM_BIAS: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, STATS_BLOCK_K: tl.constexpr,
                  SPLIT: tl.constexpr, COMBINE: tl.constexpr, ACC: tl.constexpr, PRECISION: tl.constexpr,
                  DECODE_BF16: tl.constexpr, HAS_BIAS: tl.constexpr, X_FORMAT: tl.constexpr, NW_FORMAT: tl.constexpr,
                  BIAS_FORMAT: tl.constexpr,
                  DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr, INDEX_64: tl.constexpr, INTERPRETED: tl.constexpr,
                  PDL: tl.constexpr, LOOP_STAGES: tl.constexpr):
    """``gemv`` of the rows the PROLOGUE computes from ``x`` (M rows, M <= BLOCK_M <= 16) by the K x N
    weight ``w``. PROLOGUE_RMS_NORM: rms_norm(x (+ res)) * norm_w (statistics STATS_BLOCK_K columns a step);
    PROLOGUE_LAYER_NORM: layer_norm(x (+ res)) * norm_w + norm_b (each where HAS_NORM_WEIGHT, HAS_NORM_BIAS);
    the sum written to res_out (dense rows of K) by program (0, 0) alone and read by no program (each adds x
    and res itself).
    PROLOGUE_ACT_AND_MUL: act(x[:, :K]) * x[:, K:], ACT_MODE as ``act_and_mul``'s MODE. The output's dtype is
    the activation's (x's): DST_FORMAT and VIA_F32 round both. LOOP_STAGES as ``gemv``'s."""
    await_predecessors(PDL)
    split, rm, rn, rk, k_start, k_stop, rm_load, rn_load, acc = _gemv_program(M, N, K, k_per_split, BLOCK_M, BLOCK_N,
                                                                              BLOCK_K, ACC, INDEX_64)
    row_mask = rm < M
    if PROLOGUE == PROLOGUE_ACT_AND_MUL:
        center = tl.zeros((BLOCK_M,), dtype=tl.float32)
        scale = center
    else:
        write = (tl.program_id(0) == 0) & (split == 0)
        center, scale = _row_statistics(x, res, res_out, rm, row_mask, K, eps, x_sm, x_sk, res_sm, res_sk, write,
                                        PROLOGUE, BLOCK_M, STATS_BLOCK_K, HAS_RESIDUAL, X_FORMAT, DST_FORMAT, VIA_F32,
                                        INTERPRETED)
    if INTERPRETED:
        k0 = 0
        while k0 < k_per_split:
            acc = _prologue_step(acc, x, res, res_out, norm_w, norm_b, w, rm, rn_load, k_start + k0 + rk, row_mask,
                                 k_stop, K, center, scale, x_sm, x_sk, res_sm, res_sk, nw_sk, nb_sk, w_sk, w_sn,
                                 PROLOGUE, HAS_RESIDUAL, ACT_MODE, HAS_NORM_WEIGHT, HAS_NORM_BIAS, BLOCK_M, ACC,
                                 PRECISION, DECODE_BF16, X_FORMAT, NW_FORMAT, DST_FORMAT, VIA_F32)
            k0 += BLOCK_K
    else:
        for k0 in tl.range(0, k_per_split, BLOCK_K, num_stages=LOOP_STAGES):
            acc = _prologue_step(acc, x, res, res_out, norm_w, norm_b, w, rm, rn_load, k_start + k0 + rk, row_mask,
                                 k_stop, K, center, scale, x_sm, x_sk, res_sm, res_sk, nw_sk, nb_sk, w_sk, w_sn,
                                 PROLOGUE, HAS_RESIDUAL, ACT_MODE, HAS_NORM_WEIGHT, HAS_NORM_BIAS, BLOCK_M, ACC,
                                 PRECISION, DECODE_BF16, X_FORMAT, NW_FORMAT, DST_FORMAT, VIA_F32)
    _gemv_write(acc, rm, rn, M, N, partial, split, bias, bias_sm, bias_sn, 1.0, 1.0, out, out_sm, out_sn, BLOCK_M,
                SPLIT, HAS_BIAS, False, BIAS_FORMAT, DST_FORMAT, VIA_F32, counters=counters, COMBINE=COMBINE)


@triton.jit
def _quantized_prologue_step(acc, x, res, res_out, norm_w, norm_b, q, scales, zeros, g_idx, rm, rn, rn_load, lanes, rk,
                             k_base, row_mask, N, k_stop, K, center, scale, group_size, scale_block_n, x_sm, x_sk,
                             res_sm, res_sk, nw_sk, nb_sk, q_sk, q_sn, s_sg, s_sn, z_sg, z_sn, PROLOGUE: tl.constexpr,
                             HAS_RESIDUAL: tl.constexpr, ACT_MODE: tl.constexpr, HAS_NORM_WEIGHT: tl.constexpr,
                             HAS_NORM_BIAS: tl.constexpr, BLOCK_K: tl.constexpr,
                             WHOLE_WORDS: tl.constexpr, WEIGHT: tl.constexpr, SCALE_FORMAT: tl.constexpr,
                             HAS_G_IDX: tl.constexpr, GROUPS_IN_TILE: tl.constexpr, GROUP_SIZE: tl.constexpr,
                             ONE_GROUP: tl.constexpr, INLINE_ASM: tl.constexpr, EVEN_K: tl.constexpr,
                             X_FORMAT: tl.constexpr, NW_FORMAT: tl.constexpr, ACT_FORMAT: tl.constexpr,
                             ACT_VIA_F32: tl.constexpr):
    """One K step of one row: the prologue's inputs k_base + ``rk`` (rounded to the activation dtype), then
    their products with the quantized weight's tile, as ``int4_gemv`` (WHOLE_WORDS) or ``quantized_gemv``
    takes them at one row."""
    tile = _prologue_tile(x, res, res_out, norm_w, norm_b, rm, k_base + rk, row_mask, k_stop, K, center, scale, x_sm,
                          x_sk, res_sm, res_sk, nw_sk, nb_sk, PROLOGUE, HAS_RESIDUAL, ACT_MODE, HAS_NORM_WEIGHT,
                          HAS_NORM_BIAS, X_FORMAT, NW_FORMAT, ACT_FORMAT, ACT_VIA_F32)
    row = tl.reshape(decode(tile, X_FORMAT).to(tl.float32), (BLOCK_K,))
    if WHOLE_WORDS:
        rw, words, low, high, scale, zero = _int4_words(q, scales, zeros, rn, N, k_base, lanes, k_stop, GROUP_SIZE,
                                                        q_sk, q_sn, s_sg, s_sn, z_sg, z_sn, SCALE_FORMAT, ONE_GROUP,
                                                        x.dtype.element_ty != tl.float32, EVEN_K)
        return _int4_row(acc, tl.reshape(row, (BLOCK_K // 8, 8)), words, low, high, zero, scale,
                         x.dtype.element_ty == tl.float32, INLINE_ASM)
    else:
        kk = k_base + rk
        w_tile = _weight_tile(q, scales, zeros, g_idx, k_base, kk, rn_load, rn, N, kk < k_stop, k_stop, group_size,
                              scale_block_n, q_sk, q_sn, s_sg, s_sn, z_sg, z_sn, BLOCK_K, WEIGHT, SCALE_FORMAT,
                              HAS_G_IDX, GROUPS_IN_TILE)
        return acc + row[:, None] * w_tile


@triton.jit
def quantized_gemv_prologue(x, res, res_out, norm_w, norm_b, q, scales, zeros, g_idx, bias, out, partial, counters, M,
                            N, K, k_per_split, eps, group_size, scale_block_n, x_sm, x_sk, res_sm, res_sk, nw_sk, nb_sk,
                            q_sk, q_sn, s_sg, s_sn, z_sg, z_sn, bias_sn, out_sm, out_sn, PROLOGUE: tl.constexpr,
                            HAS_RESIDUAL: tl.constexpr, ACT_MODE: tl.constexpr, HAS_NORM_WEIGHT: tl.constexpr,
                            HAS_NORM_BIAS: tl.constexpr, BLOCK_N: tl.constexpr,
                            BLOCK_K: tl.constexpr, STATS_BLOCK_K: tl.constexpr, SPLIT: tl.constexpr,
                            COMBINE: tl.constexpr, WHOLE_WORDS: tl.constexpr, WEIGHT: tl.constexpr,
                            SCALE_FORMAT: tl.constexpr, HAS_G_IDX: tl.constexpr,
                            GROUPS_IN_TILE: tl.constexpr, GROUP_SIZE: tl.constexpr, ONE_GROUP: tl.constexpr,
                            INLINE_ASM: tl.constexpr, EVEN_K: tl.constexpr, HAS_BIAS: tl.constexpr,
                            X_FORMAT: tl.constexpr, NW_FORMAT: tl.constexpr, BIAS_FORMAT: tl.constexpr,
                            DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr, INDEX_64: tl.constexpr,
                            INTERPRETED: tl.constexpr, PDL: tl.constexpr, LOOP_STAGES: tl.constexpr):
    """``gemv_prologue`` for one row (M = 1) and a quantized (N, K) weight: WHOLE_WORDS, int4 whose words each lie
    in one group, as ``int4_gemv`` reads it (the group size the constant GROUP_SIZE; ONE_GROUP, INLINE_ASM and
    EVEN_K as there); else int4, int8 or float8 as ``quantized_gemv`` reads them (WEIGHT, ``group_size``,
    GROUPS_IN_TILE, HAS_G_IDX as there). The PROLOGUE, the residual sum's one writer and LOOP_STAGES are
    ``gemv_prologue``'s."""
    await_predecessors(PDL)
    # one row accumulates per word (int4 words) or per input: [BLOCK_K // 8 or BLOCK_K, BLOCK_N]
    if WHOLE_WORDS:
        LANES: tl.constexpr = BLOCK_K // 8
    else:
        LANES: tl.constexpr = BLOCK_K
    split, rm, rn, lanes, k_start, k_stop, rm_load, rn_load, acc = _gemv_program(M, N, K, k_per_split, 1, BLOCK_N,
                                                                                 LANES, tl.float32, INDEX_64)
    rk = tl.arange(0, BLOCK_K)
    if INDEX_64:
        rk = rk.to(tl.int64)
    row_mask = rm < M
    if PROLOGUE == PROLOGUE_ACT_AND_MUL:
        center = tl.zeros((1,), dtype=tl.float32)
        scale = center
    else:
        write = (tl.program_id(0) == 0) & (split == 0)
        center, scale = _row_statistics(x, res, res_out, rm, row_mask, K, eps, x_sm, x_sk, res_sm, res_sk, write,
                                        PROLOGUE, 1, STATS_BLOCK_K, HAS_RESIDUAL, X_FORMAT, DST_FORMAT, VIA_F32,
                                        INTERPRETED)
    if INTERPRETED:
        k0 = 0
        while k0 < k_per_split:
            acc = _quantized_prologue_step(acc, x, res, res_out, norm_w, norm_b, q, scales, zeros, g_idx, rm, rn,
                                           rn_load, lanes, rk, k_start + k0, row_mask, N, k_stop, K, center, scale,
                                           group_size, scale_block_n, x_sm, x_sk, res_sm, res_sk, nw_sk, nb_sk, q_sk,
                                           q_sn, s_sg, s_sn, z_sg, z_sn, PROLOGUE, HAS_RESIDUAL, ACT_MODE,
                                           HAS_NORM_WEIGHT, HAS_NORM_BIAS, BLOCK_K, WHOLE_WORDS, WEIGHT,
                                           SCALE_FORMAT, HAS_G_IDX, GROUPS_IN_TILE, GROUP_SIZE, ONE_GROUP, INLINE_ASM,
                                           EVEN_K, X_FORMAT, NW_FORMAT, DST_FORMAT, VIA_F32)
            k0 += BLOCK_K
    else:
        for k0 in tl.range(0, k_per_split, BLOCK_K, num_stages=LOOP_STAGES):
            acc = _quantized_prologue_step(acc, x, res, res_out, norm_w, norm_b, q, scales, zeros, g_idx, rm, rn,
                                           rn_load, lanes, rk, k_start + k0, row_mask, N, k_stop, K, center, scale,
                                           group_size, scale_block_n, x_sm, x_sk, res_sm, res_sk, nw_sk, nb_sk, q_sk,
                                           q_sn, s_sg, s_sn, z_sg, z_sn, PROLOGUE, HAS_RESIDUAL, ACT_MODE,
                                           HAS_NORM_WEIGHT, HAS_NORM_BIAS, BLOCK_K, WHOLE_WORDS, WEIGHT,
                                           SCALE_FORMAT, HAS_G_IDX, GROUPS_IN_TILE, GROUP_SIZE, ONE_GROUP, INLINE_ASM,
                                           EVEN_K, X_FORMAT, NW_FORMAT, DST_FORMAT, VIA_F32)
    _gemv_write(acc, rm, rn, M, N, partial, split, bias, 0, bias_sn, 1.0, 1.0, out, out_sm, out_sn, 1, SPLIT, HAS_BIAS,
                False, BIAS_FORMAT, DST_FORMAT, VIA_F32, counters=counters, COMBINE=COMBINE)
