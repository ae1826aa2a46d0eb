"""Attention kernels: a fused flash-style forward (online softmax over K/V tiles, float32 state), a split-K
decode kernel for one query token per sequence (dense or paged keys) with a fixed-order combine, a paged
KV-cache append and rotary position embeddings.

Scores are kept in base 2: ``qk * scale * log2(e)`` and ``exp2``, which is exact up to float32 rounding
and cheaper than ``exp`` on a GPU. A row that sees no key at all (every score -inf) yields zeros, as
torch's scaled_dot_product_attention gives.

A float32 forward may multiply on bfloat16 matrix units: with PRECISION ``PRECISION_BF16_PARTS`` both
products (q k^T and p v) split their float32 tiles into exact bfloat16 parts in registers and sum the six
part products that matter, in float32, as ``kernels/matmul.py``'s GEMM does.

Two options serve decoders such as Gemma 2 and Mistral, each a constexpr so that other launches compile
as before: SOFTCAP caps every scaled score s at ``cap * tanh(s / cap)`` (in base 2 as the scores are:
``cap * log2(e)`` is passed, which gives the same value), WINDOW lets the query at position p see only
keys j > p - window. A causal prefill may start at a query offset (its queries at positions offset + i,
continuing a sequence whose first keys are already there).
"""
import triton
import triton.language as tl
from triton.language.extra import libdevice

from .formats import decode, encode
from .dependent_launch import await_predecessors
from .matmul import PRECISION_BF16_PARTS, _parts_dot

LOG2_E = 1.4426950408889634

MASK_NONE = 0
MASK_BOOL = 1  # True (nonzero) = attend
MASK_ADDITIVE = 2

# kernels only Triton's interpreter runs (scripts/compile_check.py does not compile them for a GPU)
INTERPRETER_ONLY = ("attention_forward_heads",)


@triton.jit
def _widen(x, IN_FORMAT: tl.constexpr):
    """Tiles as ``tl.dot`` takes them: bfloat16 read through its bits (float32) where the interpreter has
    no bfloat16 arithmetic, else as loaded."""
    return decode(x, IN_FORMAT)


@triton.jit
def _product(a, b, acc, PRECISION: tl.constexpr, PARTS_IN_F32: tl.constexpr):
    """acc plus a @ b in float32: one ``tl.dot`` at PRECISION, or the six products of the tiles' bfloat16
    parts (PARTS_IN_F32: each part kept in the float32 holding it, for the interpreter, which has no
    bfloat16 arithmetic)."""
    if PRECISION == PRECISION_BF16_PARTS:
        return _parts_dot(a, b, acc, PARTS_IN_F32)
    else:
        return tl.dot(a, b, acc, input_precision=PRECISION, out_dtype=tl.float32)


@triton.jit
def _score_mask(s, rows, cols, mask_ptr, mask_row_stride, mask_col_stride, row_ok, col_ok,
                MASK_KIND: tl.constexpr, MASK_FORMAT: tl.constexpr):
    """Scores (base 2) with the user's mask applied: a boolean mask sets refused pairs to -inf, an
    additive one is added (in base 2 as well)."""
    if MASK_KIND == 1:
        allowed = tl.load(mask_ptr + rows[:, None] * mask_row_stride + cols[None, :] * mask_col_stride,
                          mask=row_ok[:, None] & col_ok[None, :], other=0)
        s = tl.where(allowed != 0, s, float("-inf"))
    elif MASK_KIND == 2:
        bias = tl.load(mask_ptr + rows[:, None] * mask_row_stride + cols[None, :] * mask_col_stride,
                       mask=row_ok[:, None] & col_ok[None, :], other=0)
        s = s + decode(bias, MASK_FORMAT).to(tl.float32) * 1.4426950408889634
    return s


@triton.jit
def _cap(s, softcap, SOFTCAP: tl.constexpr):
    """Scaled scores capped at ``softcap * tanh(s / softcap)`` when SOFTCAP, else as they are."""
    if SOFTCAP:
        s = softcap * libdevice.tanh(s / softcap)
    return s


@triton.jit
def _softmax_step(s, m_i, l_i, qk_scale, FOLD: tl.constexpr):
    """The online softmax's state after scores ``s``: (probabilities, the factor ``alpha`` that rescales
    what came before, new running max, new running sum). ``s`` is in base 2 and scaled, -inf where
    refused; or, FOLD, raw products ``q . k`` with a positive scale and nothing refused: the scale is then
    applied to the row max (the same bits as the max of the scaled scores, rounding being monotonic) and
    inside ``s * scale - max``, which a GPU does as one fused multiply-add per score."""
    if FOLD:
        m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
    else:
        m_new = tl.maximum(m_i, tl.max(s, 1))
    # while a row has seen only -inf, measure from 0 so that -inf - -inf never makes a NaN
    m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = tl.math.exp2(m_i - m_ref)
    if FOLD:
        p = tl.math.exp2(s * qk_scale - m_ref[:, None])
    else:
        p = tl.math.exp2(s - m_ref[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    return p, alpha, m_new, l_i


@triton.jit
def _online_update(acc, m_i, l_i, s, v_tile, qk_scale, PRECISION: tl.constexpr, FOLD: tl.constexpr,
                   PARTS_IN_F32: tl.constexpr):
    """One step of the online softmax: fold scores ``s`` (base 2, -inf where refused; raw products with
    FOLD, see ``_softmax_step``) and their values into the running max ``m_i``, sum ``l_i`` and weighted
    sum ``acc``."""
    p, alpha, m_i, l_i = _softmax_step(s, m_i, l_i, qk_scale, FOLD)
    acc = acc * alpha[:, None]
    acc = _product(p.to(v_tile.dtype), v_tile, acc, PRECISION, PARTS_IN_F32)
    return acc, m_i, l_i


@triton.jit
def _load_tile(ptrs, keys_ok, dims_ok, EDGE: tl.constexpr, FULL_DIMS: tl.constexpr):
    """A key or value tile, masked by key on an EDGE tile and by head dim unless the dims fill it."""
    if EDGE:
        return tl.load(ptrs, mask=keys_ok & dims_ok, other=0)
    elif FULL_DIMS:
        return tl.load(ptrs)
    else:
        return tl.load(ptrs, mask=dims_ok, other=0)


@triton.jit
def _scores(q_tile, k_tile, rm, rn, mask_base, L, col_ok, qk_scale, softcap, mask_sl, mask_ss, MASK_KIND: tl.constexpr,
            MASK_FORMAT: tl.constexpr, IN_FORMAT: tl.constexpr, PRECISION: tl.constexpr, FOLD: tl.constexpr,
            SOFTCAP: tl.constexpr, PARTS_IN_F32: tl.constexpr):
    """A tile's scores: raw products when FOLD (``_softmax_step`` scales them), else scaled, capped and
    masked."""
    s = _product(q_tile, _widen(k_tile, IN_FORMAT), tl.zeros((q_tile.shape[0], k_tile.shape[1]), dtype=tl.float32),
                 PRECISION, PARTS_IN_F32)
    if not FOLD:
        s = _cap(s * qk_scale, softcap, SOFTCAP)
        s = _score_mask(s, rm, rn, mask_base, mask_sl, mask_ss, rm < L, col_ok, MASK_KIND, MASK_FORMAT)
    return s


@triton.jit
def _forward_block(acc, m_i, l_i, q_tile, k_base, v_base, mask_base, start_n, rm, rd, rdv, L, S, qk_scale,
                   softcap, q_offset, window, k_sn, k_sd, v_sn, v_sd, mask_sl, mask_ss,
                   HEAD_DIM: tl.constexpr, VALUE_DIM: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
                   EDGE: tl.constexpr, MASK_KIND: tl.constexpr, MASK_FORMAT: tl.constexpr, IN_FORMAT: tl.constexpr,
                   PRECISION: tl.constexpr, INDEX_64: tl.constexpr, FOLD: tl.constexpr, SOFTCAP: tl.constexpr,
                   WINDOW: tl.constexpr, INTERPRETED: tl.constexpr):
    """Fold the key tile at ``start_n`` into the running softmax. EDGE: the tile may pass the last key,
    (CAUSAL) the diagonal or (WINDOW) the window's start, so its scores are masked; tiles wholly inside
    need no mask. FOLD (inner tiles without a user mask, positive scale): the scale is folded into the
    softmax."""
    rn = start_n + tl.arange(0, BLOCK_N)
    if INDEX_64:
        rn = rn.to(tl.int64)
    col_ok = rn < S
    k_tile = _load_tile(k_base + rn[None, :] * k_sn + rd[:, None] * k_sd, col_ok[None, :], rd[:, None] < HEAD_DIM,
                        EDGE, HEAD_DIM == rd.shape[0])
    s = _scores(q_tile, k_tile, rm, rn, mask_base, L, col_ok, qk_scale, softcap, mask_sl, mask_ss, MASK_KIND,
                MASK_FORMAT, IN_FORMAT, PRECISION, FOLD and not EDGE, SOFTCAP, INTERPRETED)
    if EDGE:
        allowed = col_ok[None, :] & (rm[:, None] >= 0)
        if CAUSAL:
            allowed = allowed & (rn[None, :] <= rm[:, None] + q_offset)
        if WINDOW:
            allowed = allowed & (rn[None, :] > rm[:, None] + q_offset - window)
        s = tl.where(allowed, s, float("-inf"))
    v_tile = _load_tile(v_base + rn[:, None] * v_sn + rdv[None, :] * v_sd, col_ok[:, None],
                        rdv[None, :] < VALUE_DIM, EDGE, VALUE_DIM == rdv.shape[0])
    return _online_update(acc, m_i, l_i, s, _widen(v_tile, IN_FORMAT), qk_scale, PRECISION, FOLD and not EDGE,
                          INTERPRETED)


@triton.jit
def _forward_span(acc, m_i, l_i, first, stop, q_tile, k_base, v_base, mask_base, rm, rd, rdv, L, S, qk_scale,
                  softcap, q_offset, window, k_sn, k_sd, v_sn, v_sd, mask_sl, mask_ss,
                  HEAD_DIM: tl.constexpr, VALUE_DIM: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
                  EDGE: tl.constexpr, MASK_KIND: tl.constexpr, MASK_FORMAT: tl.constexpr, IN_FORMAT: tl.constexpr,
                  PRECISION: tl.constexpr, INDEX_64: tl.constexpr, INTERPRETED: tl.constexpr, FOLD: tl.constexpr,
                  SOFTCAP: tl.constexpr, WINDOW: tl.constexpr):
    """The key tiles from ``first`` up to ``stop``, in order."""
    if INTERPRETED:
        # Triton's interpreter cannot iterate a range over runtime bounds (NumPy 2); a GPU needs the
        # for loop, which is what it software-pipelines over num_stages
        start_n = first
        while start_n < stop:
            acc, m_i, l_i = _forward_block(acc, m_i, l_i, q_tile, k_base, v_base, mask_base, start_n, rm, rd, rdv,
                                           L, S, qk_scale, softcap, q_offset, window, k_sn, k_sd, v_sn, v_sd,
                                           mask_sl, mask_ss, HEAD_DIM, VALUE_DIM, BLOCK_N, CAUSAL, EDGE, MASK_KIND,
                                           MASK_FORMAT, IN_FORMAT, PRECISION, INDEX_64, FOLD, SOFTCAP, WINDOW,
                                           INTERPRETED)
            start_n += BLOCK_N
    else:
        for start_n in range(first, stop, BLOCK_N):
            acc, m_i, l_i = _forward_block(acc, m_i, l_i, q_tile, k_base, v_base, mask_base, start_n, rm, rd, rdv,
                                           L, S, qk_scale, softcap, q_offset, window, k_sn, k_sd, v_sn, v_sd,
                                           mask_sl, mask_ss, HEAD_DIM, VALUE_DIM, BLOCK_N, CAUSAL, EDGE, MASK_KIND,
                                           MASK_FORMAT, IN_FORMAT, PRECISION, INDEX_64, FOLD, SOFTCAP, WINDOW,
                                           INTERPRETED)
    return acc, m_i, l_i


@triton.jit
def attention_forward(q, k, v, mask, out, L, S, heads_per_kv, qk_scale, softcap, q_offset, window,
                      q_sb, q_sh, q_sl, q_sd, k_sb, k_sh, k_sn, k_sd, v_sb, v_sh, v_sn, v_sd,
                      mask_sb, mask_sh, mask_sl, mask_ss, out_sb, out_sh, out_sl, out_sd,
                      HEAD_DIM: tl.constexpr, VALUE_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr, CAUSAL: tl.constexpr,
                      MASK_KIND: tl.constexpr, MASK_FORMAT: tl.constexpr, IN_FORMAT: tl.constexpr,
                      PRECISION: tl.constexpr, DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr,
                      INDEX_64: tl.constexpr, INTERPRETED: tl.constexpr, FOLD_SCALE: tl.constexpr = False,
                      SOFTCAP: tl.constexpr = False, WINDOW: tl.constexpr = False):
    """out[b, h, i] = softmax_j(q[b, h, i] . k[b, h // heads_per_kv, j] * scale + mask) v[...]; one
    BLOCK_M tile of queries per program (axis 0), query head on axis 1, batch on axis 2. Causal programs
    take their tiles last first, so the longest start first and the shortest fill the end of the grid.
    FOLD_SCALE (no user mask, positive scale, no cap): inner tiles fold the scale into the softmax's
    exponent. Causal query i stands at position q_offset + i; WINDOW (causal only) masks every tile from
    the first the window reaches."""
    if CAUSAL:
        tile_m = tl.num_programs(0) - 1 - tl.program_id(0)
    else:
        tile_m = tl.program_id(0)
    head = tl.program_id(1)
    batch = tl.program_id(2)
    if INDEX_64:
        head = head.to(tl.int64)
        batch = batch.to(tl.int64)
    kv_head = head // heads_per_kv
    rm = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rd = tl.arange(0, BLOCK_D)
    rdv = tl.arange(0, BLOCK_DV)
    if INDEX_64:
        rm = rm.to(tl.int64)
    row_ok = rm < L
    q_tile = tl.load(q + batch * q_sb + head * q_sh + rm[:, None] * q_sl + rd[None, :] * q_sd,
                     mask=row_ok[:, None] & (rd[None, :] < HEAD_DIM), other=0)
    q_tile = _widen(q_tile, IN_FORMAT)
    k_base = k + batch * k_sb + kv_head * k_sh
    v_base = v + batch * v_sb + kv_head * v_sh
    mask_base = mask + batch * mask_sb + head * mask_sh
    acc = tl.zeros((BLOCK_M, BLOCK_DV), dtype=tl.float32)
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    # causal (top-left aligned, shifted by q_offset): query i sees keys j <= q_offset + i, so key tiles past
    # this tile's last row are skipped, and those wholly left of its first row need no mask; nor do whole
    # tiles without causality. A window skips the tiles wholly before it and masks all the others.
    first = 0
    if CAUSAL:
        stop = tl.minimum(S, (tile_m + 1) * BLOCK_M + q_offset)
        inner_stop = tl.minimum(S, tile_m * BLOCK_M + q_offset) // BLOCK_N * BLOCK_N
        if WINDOW:
            first = tl.maximum(0, tile_m * BLOCK_M + q_offset - window + 1) // BLOCK_N * BLOCK_N
            inner_stop = first
    else:
        stop = S
        inner_stop = S // BLOCK_N * BLOCK_N
    acc, m_i, l_i = _forward_span(acc, m_i, l_i, first, inner_stop, q_tile, k_base, v_base, mask_base, rm, rd, rdv,
                                  L, S, qk_scale, softcap, q_offset, window, k_sn, k_sd, v_sn, v_sd, mask_sl,
                                  mask_ss, HEAD_DIM, VALUE_DIM, BLOCK_N, CAUSAL, False, MASK_KIND, MASK_FORMAT,
                                  IN_FORMAT, PRECISION, INDEX_64, INTERPRETED, FOLD_SCALE, SOFTCAP, WINDOW)
    acc, m_i, l_i = _forward_span(acc, m_i, l_i, inner_stop, stop, q_tile, k_base, v_base, mask_base, rm, rd, rdv,
                                  L, S, qk_scale, softcap, q_offset, window, k_sn, k_sd, v_sn, v_sd, mask_sl,
                                  mask_ss, HEAD_DIM, VALUE_DIM, BLOCK_N, CAUSAL, True, MASK_KIND, MASK_FORMAT,
                                  IN_FORMAT, PRECISION, INDEX_64, INTERPRETED, False, SOFTCAP, WINDOW)
    result = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
    value = encode(result, out.dtype.element_ty, DST_FORMAT, VIA_F32, False)
    tl.store(out + batch * out_sb + head * out_sh + rm[:, None] * out_sl + rdv[None, :] * out_sd, value,
             mask=row_ok[:, None] & (rdv[None, :] < VALUE_DIM))


@triton.jit
def attention_forward_heads(q, k, v, mask, out, L, S, heads_per_kv, qk_scale, softcap, q_offset, window,
                            q_sb, q_sh, q_sl, q_sd, k_sb, k_sh, k_sn, k_sd, v_sb, v_sh, v_sn, v_sd,
                            mask_sb, mask_sh, mask_sl, mask_ss, out_sb, out_sh, out_sl, out_sd,
                            HEAD_DIM: tl.constexpr, VALUE_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                            BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
                            CAUSAL: tl.constexpr, MASK_KIND: tl.constexpr, MASK_FORMAT: tl.constexpr,
                            IN_FORMAT: tl.constexpr, PRECISION: tl.constexpr, DST_FORMAT: tl.constexpr,
                            VIA_F32: tl.constexpr, INDEX_64: tl.constexpr, HEADS: tl.constexpr,
                            HEAD_COUNT: tl.constexpr, SOFTCAP: tl.constexpr = False, WINDOW: tl.constexpr = False):
    """``attention_forward`` for Triton's interpreter, which pays per program and per operation rather
    than per element: HEADS query heads a program (axis 1; HEAD_COUNT heads in all), each a BLOCK_M tile of
    its queries (axis 0) against all its S <= BLOCK_N keys in one tile. The heads' tiles are stacked into
    one block-diagonal problem, rows by head and then query, columns by head and then key, a pair of
    different heads refused like a masked one; one softmax step over the one key tile gives each row what
    the key-tiled kernel gives it."""
    tile_m = tl.program_id(0)
    first_head = tl.program_id(1) * HEADS
    batch = tl.program_id(2)
    rows = tl.arange(0, HEADS * BLOCK_M)
    cols = tl.arange(0, HEADS * BLOCK_N)
    if INDEX_64:
        first_head = first_head.to(tl.int64)
        batch = batch.to(tl.int64)
        rows = rows.to(tl.int64)
        cols = cols.to(tl.int64)
    row_head = first_head + rows // BLOCK_M
    col_head = first_head + cols // BLOCK_N
    col_kv_head = col_head // heads_per_kv
    # rows of the heads past the last stand at row L, outside the queries, which masks them everywhere
    rm = tl.where(row_head < HEAD_COUNT, tile_m * BLOCK_M + rows % BLOCK_M, L)
    rn = cols % BLOCK_N
    rd = tl.arange(0, BLOCK_D)
    rdv = tl.arange(0, BLOCK_DV)
    row_ok = rm < L
    col_ok = (rn < S) & (col_head < HEAD_COUNT)
    q_tile = tl.load(q + batch * q_sb + (row_head * q_sh + rm * q_sl)[:, None] + rd[None, :] * q_sd,
                     mask=row_ok[:, None] & (rd[None, :] < HEAD_DIM), other=0)
    k_tile = tl.load(k + batch * k_sb + (col_kv_head * k_sh + rn * k_sn)[None, :] + rd[:, None] * k_sd,
                     mask=col_ok[None, :] & (rd[:, None] < HEAD_DIM), other=0)
    mask_rows = mask + batch * mask_sb + (row_head * mask_sh)[:, None]
    s = _scores(_widen(q_tile, IN_FORMAT), k_tile, rm, rn, mask_rows, L, col_ok, qk_scale, softcap, mask_sl,
                mask_ss, MASK_KIND, MASK_FORMAT, IN_FORMAT, PRECISION, False, SOFTCAP, True)
    allowed = col_ok[None, :] & (row_head[:, None] == col_head[None, :])
    if CAUSAL:
        allowed = allowed & (rn[None, :] <= rm[:, None] + q_offset)
    if WINDOW:
        allowed = allowed & (rn[None, :] > rm[:, None] + q_offset - window)
    s = tl.where(allowed, s, float("-inf"))
    v_tile = tl.load(v + batch * v_sb + (col_kv_head * v_sh + rn * v_sn)[:, None] + rdv[None, :] * v_sd,
                     mask=col_ok[:, None] & (rdv[None, :] < VALUE_DIM), other=0)
    acc = tl.zeros((HEADS * BLOCK_M, BLOCK_DV), dtype=tl.float32)
    m_i = tl.full((HEADS * BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((HEADS * BLOCK_M,), dtype=tl.float32)
    acc, m_i, l_i = _online_update(acc, m_i, l_i, s, _widen(v_tile, IN_FORMAT), qk_scale, PRECISION, False, True)
    result = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
    value = encode(result, out.dtype.element_ty, DST_FORMAT, VIA_F32, False)
    tl.store(out + batch * out_sb + (row_head * out_sh + rm * out_sl)[:, None] + rdv[None, :] * out_sd, value,
             mask=row_ok[:, None] & (rdv[None, :] < VALUE_DIM))


# ---- decode: one query token, keys split over programs ---------------------------------------------------
@triton.jit
def _decode_block(acc, m_i, l_i, q_tile, k_base, v_base, mask_base, table_row, rg, group_ok, rd, rdv, rn,
                  key_start, key_stop, qk_scale, softcap, k_sp, k_sn, k_sd, v_sp, v_sn, v_sd, mask_sh, mask_ss,
                  block_size,
                  HEAD_DIM: tl.constexpr, VALUE_DIM: tl.constexpr, PAGED: tl.constexpr,
                  MASK_KIND: tl.constexpr, MASK_FORMAT: tl.constexpr, IN_FORMAT: tl.constexpr,
                  PRECISION: tl.constexpr, INDEX_64: tl.constexpr, SOFTCAP: tl.constexpr):
    """Keys ``rn`` (those from ``key_start`` below ``key_stop``) folded into the state of the group's query
    heads ``rg``."""
    col_ok = (rn < key_stop) & (rn >= key_start)
    if PAGED:
        # key j lives in slot j % block_size of page block_table[j // block_size]
        page = tl.load(table_row + rn // block_size, mask=col_ok, other=0)
        if INDEX_64:
            page = page.to(tl.int64)
        else:
            page = page.to(tl.int32)
        slot = rn % block_size
        k_tile = tl.load(k_base + (page * k_sp + slot * k_sn)[None, :] + rd[:, None] * k_sd,
                         mask=col_ok[None, :] & (rd[:, None] < HEAD_DIM), other=0)
        v_tile = tl.load(v_base + (page * v_sp + slot * v_sn)[:, None] + rdv[None, :] * v_sd,
                         mask=col_ok[:, None] & (rdv[None, :] < VALUE_DIM), other=0)
    else:
        k_tile = tl.load(k_base + rn[None, :] * k_sn + rd[:, None] * k_sd,
                         mask=col_ok[None, :] & (rd[:, None] < HEAD_DIM), other=0)
        v_tile = tl.load(v_base + rn[:, None] * v_sn + rdv[None, :] * v_sd,
                         mask=col_ok[:, None] & (rdv[None, :] < VALUE_DIM), other=0)
    s = _product(q_tile, _widen(k_tile, IN_FORMAT), tl.zeros((q_tile.shape[0], k_tile.shape[1]), dtype=tl.float32),
                 PRECISION, False) * qk_scale
    s = _cap(s, softcap, SOFTCAP)
    s = _score_mask(s, rg, rn, mask_base, mask_sh, mask_ss, group_ok, col_ok, MASK_KIND, MASK_FORMAT)
    s = tl.where(col_ok[None, :] & group_ok[:, None], s, float("-inf"))
    return _online_update(acc, m_i, l_i, s, _widen(v_tile, IN_FORMAT), 1.0, PRECISION, False, False)


@triton.jit
def decode_partial(q, k, v, mask, block_table, seq_lens, part_acc, part_max, part_sum, out,
                   S, heads_per_kv, H_q, keys_per_split, splits, qk_scale, softcap, window, block_size,
                   q_sb, q_sh, q_sd, k_sb, k_sh, k_sn, k_sd, v_sb, v_sh, v_sn, v_sd,
                   mask_sb, mask_sh, mask_ss, table_sb, out_sb, out_sh, out_sd,
                   HEAD_DIM: tl.constexpr, VALUE_DIM: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr, PAGED: tl.constexpr, MASK_KIND: tl.constexpr,
                   MASK_FORMAT: tl.constexpr, IN_FORMAT: tl.constexpr, PRECISION: tl.constexpr,
                   INDEX_64: tl.constexpr, INTERPRETED: tl.constexpr, PDL: tl.constexpr, WHOLE: tl.constexpr,
                   DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr, SOFTCAP: tl.constexpr = False,
                   WINDOW: tl.constexpr = False):
    """The partial (max, sum, weighted sum) of one KV head's group of query heads (axis 0) over one split
    of the keys (axis 1) of one sequence (axis 2). The group shares every K/V tile it loads, which is what
    makes grouped-query decode read the cache once. Dense keys are (b, kv head, key, dim) through strides;
    paged keys are (page, slot, kv head, dim), and then ``k_sb``/``k_sn`` are the page and slot strides.
    The query stands after the last key: WINDOW lets it see the last ``window`` keys only. WHOLE: one split
    holds every key, and its state, normalised, is the output (``out``; DST_FORMAT and VIA_F32 as
    ``decode_combine``'s): the bits ``decode_combine`` gives one state, without its launch."""
    await_predecessors(PDL)
    kv_head = tl.program_id(0)
    split = tl.program_id(1)
    batch = tl.program_id(2)
    if INDEX_64:
        kv_head = kv_head.to(tl.int64)
        batch = batch.to(tl.int64)
    rg = kv_head * heads_per_kv + tl.arange(0, BLOCK_G)
    group_ok = (tl.arange(0, BLOCK_G) < heads_per_kv) & (rg < H_q)
    rd = tl.arange(0, BLOCK_D)
    rdv = tl.arange(0, BLOCK_DV)
    q_tile = tl.load(q + batch * q_sb + rg[:, None] * q_sh + rd[None, :] * q_sd,
                     mask=group_ok[:, None] & (rd[None, :] < HEAD_DIM), other=0)
    q_tile = _widen(q_tile, IN_FORMAT)
    if PAGED:
        key_stop = tl.load(seq_lens + batch).to(tl.int32)
        table_row = block_table + batch * table_sb
        k_base = k + kv_head * k_sh
        v_base = v + kv_head * v_sh
    else:
        key_stop = S
        table_row = block_table
        k_base = k + batch * k_sb + kv_head * k_sh
        v_base = v + batch * v_sb + kv_head * v_sh
    mask_base = mask + batch * mask_sb
    start = split * keys_per_split
    key_start = start
    if WINDOW:
        key_start = tl.maximum(start, key_stop - window)
    key_stop = tl.minimum(key_stop, start + keys_per_split)
    acc = tl.zeros((BLOCK_G, BLOCK_DV), dtype=tl.float32)
    m_i = tl.full((BLOCK_G,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_G,), dtype=tl.float32)
    if INTERPRETED:
        start_n = key_start
        while start_n < key_stop:
            rn = start_n + tl.arange(0, BLOCK_N)
            acc, m_i, l_i = _decode_block(acc, m_i, l_i, q_tile, k_base, v_base, mask_base, table_row, rg, group_ok,
                                          rd, rdv, rn, key_start, key_stop, qk_scale, softcap, k_sb, k_sn, k_sd, v_sb,
                                          v_sn, v_sd, mask_sh, mask_ss, block_size, HEAD_DIM, VALUE_DIM, PAGED,
                                          MASK_KIND, MASK_FORMAT, IN_FORMAT, PRECISION, INDEX_64, SOFTCAP)
            start_n += BLOCK_N
    else:
        for start_n in range(key_start, key_stop, BLOCK_N):
            rn = start_n + tl.arange(0, BLOCK_N)
            acc, m_i, l_i = _decode_block(acc, m_i, l_i, q_tile, k_base, v_base, mask_base, table_row, rg, group_ok,
                                          rd, rdv, rn, key_start, key_stop, qk_scale, softcap, k_sb, k_sn, k_sd, v_sb,
                                          v_sn, v_sd, mask_sh, mask_ss, block_size, HEAD_DIM, VALUE_DIM, PAGED,
                                          MASK_KIND, MASK_FORMAT, IN_FORMAT, PRECISION, INDEX_64, SOFTCAP)
    if WHOLE:
        # decode_combine's merge of one state: weight exp2(0) = 1, or 0 (and a zero state) where no key was seen
        result = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
        tl.store(out + batch * out_sb + rg[:, None] * out_sh + rdv[None, :] * out_sd,
                 encode(result, out.dtype.element_ty, DST_FORMAT, VIA_F32, False),
                 mask=group_ok[:, None] & (rdv[None, :] < VALUE_DIM))
    else:
        # partials are (batch, query head, split) rows, contiguous
        state = (batch * H_q + rg) * splits + split
        tl.store(part_max + state, m_i, mask=group_ok)
        tl.store(part_sum + state, l_i, mask=group_ok)
        tl.store(part_acc + state[:, None] * BLOCK_DV + rdv[None, :], acc, mask=group_ok[:, None])


@triton.jit
def decode_combine(part_acc, part_max, part_sum, out, H_q, splits, out_sb, out_sh, out_sd,
                   VALUE_DIM: tl.constexpr, BLOCK_DV: tl.constexpr, BLOCK_S: tl.constexpr, DST_FORMAT: tl.constexpr,
                   VIA_F32: tl.constexpr, PDL: tl.constexpr):
    """Merges one query head's split states (axis 0: head, axis 1: batch), all BLOCK_S (>= splits) of them
    loaded at once and reduced in a fixed order, so the result's bits do not depend on which program
    finished first."""
    await_predecessors(PDL)
    head = tl.program_id(0)
    batch = tl.program_id(1)
    rdv = tl.arange(0, BLOCK_DV)
    rs = tl.arange(0, BLOCK_S)
    present = rs < splits
    state = (batch * H_q + head) * splits + rs
    m = tl.load(part_max + state, mask=present, other=float("-inf"))
    m_all = tl.max(m, 0)
    # a head none of whose keys was visible has only -inf maxima: measure from 0 (weights 0, result 0)
    weight = tl.math.exp2(m - tl.where(m_all == float("-inf"), 0.0, m_all))
    total = tl.sum(tl.load(part_sum + state, mask=present, other=0.0) * weight, 0)
    acc = tl.load(part_acc + state[:, None] * BLOCK_DV + rdv[None, :], mask=present[:, None], other=0.0)
    result = tl.sum(acc * weight[:, None], 0) / tl.where(total > 0, total, 1.0)
    value = encode(result, out.dtype.element_ty, DST_FORMAT, VIA_F32, False)
    tl.store(out + batch * out_sb + head * out_sh + rdv * out_sd, value, mask=rdv < VALUE_DIM)


# ---- paged KV cache append ----------------------------------------------------------------------------
@triton.jit
def cache_append(src, cache, slots, tokens, heads, block_size, src_st, src_sh, src_sd,
                 cache_sp, cache_ss, cache_sh, cache_sd,
                 DIM: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr, INDEX_64: tl.constexpr):
    """Copies token rows ``src[t, h, :]`` to slot ``slots[t]`` (page slots[t] // block_size, offset
    slots[t] % block_size) of ``cache``; a negative slot marks a padding token and is skipped. Program
    axis 0: a tile of tokens; axis 1: the head."""
    rt = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    head = tl.program_id(1)
    rd = tl.arange(0, BLOCK_D)
    slot = tl.load(slots + rt, mask=rt < tokens, other=-1)
    if INDEX_64:
        slot = slot.to(tl.int64)
        rt = rt.to(tl.int64)
    else:
        slot = slot.to(tl.int32)
    live = (rt < tokens) & (slot >= 0)
    slot = tl.where(live, slot, 0)
    lanes = live[:, None] & (rd[None, :] < DIM)
    rows = tl.load(src + rt[:, None] * src_st + head * src_sh + rd[None, :] * src_sd, mask=lanes)
    target = (slot // block_size) * cache_sp + (slot % block_size) * cache_ss + head * cache_sh
    tl.store(cache + target[:, None] + rd[None, :] * cache_sd, rows, mask=lanes)


# ---- rotary position embedding ------------------------------------------------------------------------
@triton.jit
def _rotary_trig(cos, sin, positions, rr, row_ok, pos_sr, trig_sp, trig_sd, lanes, ri, TRIG_FORMAT: tl.constexpr,
                 INDEX_64: tl.constexpr):
    """cos and sin (rows, BLOCK_HALF) in float32 at each row's position."""
    pos = tl.load(positions + rr * pos_sr, mask=row_ok, other=0)
    if INDEX_64:
        pos = pos.to(tl.int64)
    else:
        pos = pos.to(tl.int32)
    trig = pos[:, None] * trig_sp + ri[None, :] * trig_sd
    c = decode(tl.load(cos + trig, mask=lanes, other=0), TRIG_FORMAT).to(tl.float32)
    s = decode(tl.load(sin + trig, mask=lanes, other=0), TRIG_FORMAT).to(tl.float32)
    return c, s


@triton.jit
def _rotated(x_row, first, second, x_sd, lanes, c, s, IN_FORMAT: tl.constexpr):
    """The pairs (x1, x2) at ``first`` and ``second`` of rows ``x_row`` turned by (c, s): (x1 c - x2 s,
    x2 c + x1 s), in float32."""
    x1 = decode(tl.load(x_row + first[None, :] * x_sd, mask=lanes, other=0), IN_FORMAT).to(tl.float32)
    x2 = decode(tl.load(x_row + second[None, :] * x_sd, mask=lanes, other=0), IN_FORMAT).to(tl.float32)
    return x1 * c - x2 * s, x2 * c + x1 * s


@triton.jit
def rotary(x, out, cos, sin, positions, rows, row_sx, row_so, pos_sr, x_sd, out_sd, trig_sp, trig_sd,
           HALF: tl.constexpr, DIM: tl.constexpr, BLOCK_ROWS: tl.constexpr, BLOCK_HALF: tl.constexpr,
           BLOCK_REST: tl.constexpr, INTERLEAVED: tl.constexpr, IN_FORMAT: tl.constexpr, TRIG_FORMAT: tl.constexpr,
           DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr, INDEX_64: tl.constexpr):
    """Rotates pairs (x1, x2) of each row by the angle of its position: (x1 cos - x2 sin, x2 cos + x1 sin),
    in float32. Rotate-half pairs element i with i + HALF; interleaved pairs 2i with 2i + 1. Elements past
    2 * HALF pass through unchanged (partial rotary)."""
    rr = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    if INDEX_64:
        rr = rr.to(tl.int64)
    ri = tl.arange(0, BLOCK_HALF)
    row_ok = rr < rows
    lanes = row_ok[:, None] & (ri[None, :] < HALF)
    c, s = _rotary_trig(cos, sin, positions, rr, row_ok, pos_sr, trig_sp, trig_sd, lanes, ri, TRIG_FORMAT, INDEX_64)
    if INTERLEAVED:
        first = 2 * ri
        second = 2 * ri + 1
    else:
        first = ri
        second = ri + HALF
    x_row = x + rr[:, None] * row_sx
    out_row = out + rr[:, None] * row_so
    y1, y2 = _rotated(x_row, first, second, x_sd, lanes, c, s, IN_FORMAT)
    out_type = out.dtype.element_ty
    tl.store(out_row + first[None, :] * out_sd, encode(y1, out_type, DST_FORMAT, VIA_F32, False), mask=lanes)
    tl.store(out_row + second[None, :] * out_sd, encode(y2, out_type, DST_FORMAT, VIA_F32, False), mask=lanes)
    if DIM > 2 * HALF:
        rest = 2 * HALF + tl.arange(0, BLOCK_REST)
        rest_lanes = row_ok[:, None] & (rest[None, :] < DIM)
        tl.store(out_row + rest[None, :] * out_sd, tl.load(x_row + rest[None, :] * x_sd, mask=rest_lanes),
                 mask=rest_lanes)


@triton.jit
def _rotate_head_into(src_row, dst_row, cache_row, c, s, ri, row_ok, lanes, HALF: tl.constexpr, DIM: tl.constexpr,
                      BLOCK_REST: tl.constexpr, IN_FORMAT: tl.constexpr, DST_FORMAT: tl.constexpr,
                      VIA_F32: tl.constexpr, TO_CACHE: tl.constexpr, cache_ok):
    """One head of rows ``src_row`` rotated (rotate-half pairs) into ``dst_row`` and, with TO_CACHE, the
    same bits into ``cache_row`` where ``cache_ok``; dims past 2 * HALF copied."""
    y1, y2 = _rotated(src_row, ri, ri + HALF, 1, lanes, c, s, IN_FORMAT)
    out_type = dst_row.dtype.element_ty
    e1 = encode(y1, out_type, DST_FORMAT, VIA_F32, False)
    e2 = encode(y2, out_type, DST_FORMAT, VIA_F32, False)
    tl.store(dst_row + ri[None, :], e1, mask=lanes)
    tl.store(dst_row + HALF + ri[None, :], e2, mask=lanes)
    if TO_CACHE:
        tl.store(cache_row + ri[None, :], e1, mask=lanes & cache_ok[:, None])
        tl.store(cache_row + HALF + ri[None, :], e2, mask=lanes & cache_ok[:, None])
    if DIM > 2 * HALF:
        rest = 2 * HALF + tl.arange(0, BLOCK_REST)
        rest_lanes = row_ok[:, None] & (rest[None, :] < DIM)
        kept = tl.load(src_row + rest[None, :], mask=rest_lanes)
        tl.store(dst_row + rest[None, :], kept, mask=rest_lanes)
        if TO_CACHE:
            tl.store(cache_row + rest[None, :], kept, mask=rest_lanes & cache_ok[:, None])


@triton.jit
def rotary_append(q, k, v, q_out, k_out, key_cache, value_cache, cos, sin, positions, slots, tokens, q_heads,
                  block_size, q_st, q_sh, k_st, k_sh, v_st, v_sh, qo_st, qo_sh, ko_st, ko_sh,
                  kc_sp, kc_ss, kc_sh, vc_sp, vc_ss, vc_sh, pos_st, trig_sp,
                  HALF: tl.constexpr, DIM: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_HALF: tl.constexpr,
                  BLOCK_REST: tl.constexpr, BLOCK_D: tl.constexpr, IN_FORMAT: tl.constexpr,
                  TRIG_FORMAT: tl.constexpr, DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr,
                  INDEX_64: tl.constexpr, PDL: tl.constexpr):
    """A decoder layer's attention inputs in one pass. Program (tile of tokens, head): a head below
    ``q_heads`` rotates that query head into ``q_out``; head ``q_heads + j`` rotates key head j into
    ``k_out`` and into the key cache at each token's slot (page slot // block_size, offset slot %
    block_size), and copies value head j into the value cache there. A negative slot marks a padding token,
    whose cache rows are left alone. Rows are rotate-half pairs of HALF in DIM, the last dims unit-strided."""
    await_predecessors(PDL)
    rt = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    head = tl.program_id(1)
    if INDEX_64:
        rt = rt.to(tl.int64)
    ri = tl.arange(0, BLOCK_HALF)
    row_ok = rt < tokens
    lanes = row_ok[:, None] & (ri[None, :] < HALF)
    c, s = _rotary_trig(cos, sin, positions, rt, row_ok, pos_st, trig_sp, 1, lanes, ri, TRIG_FORMAT, INDEX_64)
    if head < q_heads:
        _rotate_head_into(q + rt[:, None] * q_st + head * q_sh, q_out + rt[:, None] * qo_st + head * qo_sh,
                          q_out, c, s, ri, row_ok, lanes, HALF, DIM, BLOCK_REST, IN_FORMAT, DST_FORMAT, VIA_F32,
                          False, row_ok)
    else:
        kv = head - q_heads
        slot = tl.load(slots + rt, mask=row_ok, other=-1)
        if INDEX_64:
            slot = slot.to(tl.int64)
        else:
            slot = slot.to(tl.int32)
        live = row_ok & (slot >= 0)
        slot = tl.where(live, slot, 0)
        page, offset = slot // block_size, slot % block_size
        _rotate_head_into(k + rt[:, None] * k_st + kv * k_sh, k_out + rt[:, None] * ko_st + kv * ko_sh,
                          key_cache + (page * kc_sp + offset * kc_ss + kv * kc_sh)[:, None], c, s, ri, row_ok,
                          lanes, HALF, DIM, BLOCK_REST, IN_FORMAT, DST_FORMAT, VIA_F32, True, live)
        rd = tl.arange(0, BLOCK_D)
        v_lanes = live[:, None] & (rd[None, :] < DIM)
        values = tl.load(v + rt[:, None] * v_st + kv * v_sh + rd[None, :], mask=v_lanes)
        tl.store(value_cache + (page * vc_sp + offset * vc_ss + kv * vc_sh)[:, None] + rd[None, :], values,
                 mask=v_lanes)


@triton.jit
def rotate_half_rows(x, cos, sin, out, rows, n1, n2, x_s0, x_s1, x_s2, x_sd, c_s0, c_s1, c_s2, c_sd,
                     s_s0, s_s1, s_s2, s_sd, o_s0, o_s1, o_s2, o_sd, HALF: tl.constexpr, BLOCK_ROWS: tl.constexpr, BLOCK_HALF: tl.constexpr,
                     IN_FORMAT: tl.constexpr, DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr,
                     INDEX_64: tl.constexpr):
    """out = x * cos + rotate_half(x) * sin over rows (i0, i1, i2) of x (n1 and n2: the sizes of i1, i2),
    where rotate_half(x) = cat(-x[HALF:], x[:HALF]); cos and sin broadcast to x through zero strides. In
    float32, one rounding to out's dtype."""
    rr = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    if INDEX_64:
        rr = rr.to(tl.int64)
    i2 = rr % n2
    i1 = (rr // n2) % n1
    i0 = rr // (n2 * n1)
    ri = tl.arange(0, BLOCK_HALF)
    lanes = (rr < rows)[:, None] & (ri[None, :] < HALF)
    x_row = x + (i0 * x_s0 + i1 * x_s1 + i2 * x_s2)[:, None]
    c_row = cos + (i0 * c_s0 + i1 * c_s1 + i2 * c_s2)[:, None]
    s_row = sin + (i0 * s_s0 + i1 * s_s1 + i2 * s_s2)[:, None]
    first, second = ri[None, :], ri[None, :] + HALF
    x1 = decode(tl.load(x_row + first * x_sd, mask=lanes, other=0), IN_FORMAT).to(tl.float32)
    x2 = decode(tl.load(x_row + second * x_sd, mask=lanes, other=0), IN_FORMAT).to(tl.float32)
    c1 = decode(tl.load(c_row + first * c_sd, mask=lanes, other=0), IN_FORMAT).to(tl.float32)
    c2 = decode(tl.load(c_row + second * c_sd, mask=lanes, other=0), IN_FORMAT).to(tl.float32)
    s1 = decode(tl.load(s_row + first * s_sd, mask=lanes, other=0), IN_FORMAT).to(tl.float32)
    s2 = decode(tl.load(s_row + second * s_sd, mask=lanes, other=0), IN_FORMAT).to(tl.float32)
    out_row = out + (i0 * o_s0 + i1 * o_s1 + i2 * o_s2)[:, None]
    out_type = out.dtype.element_ty
    tl.store(out_row + first * o_sd, encode(x1 * c1 - x2 * s1, out_type, DST_FORMAT, VIA_F32, False), mask=lanes)
    tl.store(out_row + second * o_sd, encode(x2 * c2 + x1 * s2, out_type, DST_FORMAT, VIA_F32, False), mask=lanes)
