"""Softmax and the normalisations over rows. A row that fits in registers is read once and written
once; a longer one is summarised first (per-lane online statistics, or per-chunk states combined in a
fixed order) and then normalised in a second sweep. As in
``reduce.py``, the arithmetic order depends only on the row length, never on the batch."""
import triton
import triton.language as tl

from .common import program_elements
from .formats import decode, encode
from .dependent_launch import await_predecessors
from .reduce import (_extreme_lanes, _lane_sum, _reduce_lanes, load_partials, logsumexp_combine, row_starts,
                     welford_combine)


@triton.jit
def _rows(n_rows, INDEX_64: tl.constexpr, BLOCK_ROWS: tl.constexpr):
    rows = program_elements(BLOCK_ROWS, INDEX_64)
    return rows, rows < n_rows


@triton.jit
def _along(j, stride, UNIT: tl.constexpr):
    """Offsets of elements ``j`` of a row: adjacent (UNIT, which the compiler can then see) or ``stride``
    apart."""
    if UNIT:
        return j
    else:
        return j * stride


@triton.jit
def _row_block(src, src_row, j, length, row_mask, stride, UNIT: tl.constexpr, FORMAT: tl.constexpr,
               COMPUTE: tl.constexpr):
    """The elements ``j`` of each row in ``COMPUTE``, 0 where masked, and the mask."""
    mask = row_mask[:, None] & (j < length)[None, :]
    x = decode(tl.load(src + src_row[:, None] + _along(j, stride, UNIT)[None, :], mask=mask, other=0), FORMAT)
    return mask, x.to(COMPUTE)


@triton.jit
def _chunk_start(chunk_length, INDEX_64: tl.constexpr):
    """The chunk of the row a program of a split softmax takes (grid axis 1), and its first element."""
    chunk = tl.program_id(1)
    if INDEX_64:
        chunk = chunk.to(tl.int64)
    return chunk, chunk * chunk_length


# A row's sums must not depend on the rows around it. ``tl.sum`` adds in an order set by the tile's layout,
# which Triton derives from what it knows of the addresses: their alignment, and the values it specialised
# the row count, shape and strides on. So every pointer arrives 16-byte aligned (the host copies one that
# is not), the row count is not specialised on, and a row's start is computed by ``row_starts`` with
# nothing known of it but the constexpr ROW_ALIGN, a function of the row's length and dtype alone: a row
# alone and the same row in any batch run the same binary and add in the same order, with vector loads
# wherever the length allows them.
@triton.jit(do_not_specialize=["n_rows", "src_red_stride", "dst_red_stride", "opaque_zero"])
def softmax_rows(src, dst, part0, part1, n_rows, opaque_zero, length, chunk_length, n_chunks,
                 row_shape, src_row_strides, dst_row_strides, src_red_stride, dst_red_stride,
                 LOG: tl.constexpr, ROW_RANK: tl.constexpr, RED_UNIT: tl.constexpr, RESIDENT: tl.constexpr,
                 COMPUTE: tl.constexpr, SRC_FORMAT: tl.constexpr, DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr,
                 FLOAT_TO_INT: tl.constexpr, INDEX_64: tl.constexpr, ROW_ALIGN: tl.constexpr,
                 DST_UNIT: tl.constexpr, DST_ALIGN: tl.constexpr, BLOCK_ROWS: tl.constexpr, BLOCK_R: tl.constexpr,
                 CHUNKS: tl.constexpr, CHUNK_BITS: tl.constexpr, STATS: tl.constexpr, ONE_STEP: tl.constexpr,
                 WARP_ROWS: tl.constexpr = False):
    """softmax (or log_softmax with LOG) of rows (RED_UNIT, DST_UNIT: a row's elements are adjacent in
    src, in dst; ROW_ALIGN, DST_ALIGN: what row starts are promised to be multiples of). RESIDENT: a row
    is one block; with WARP_ROWS (unit-stride rows, BLOCK_R of 32 to 1024) one warp a row
    (``_warp_row_softmax``). Otherwise a long row takes two launches over (rows, chunk) programs: STATS writes
    each chunk's (max, sum of exp) state to part0/part1, then each program of the second combines the row's
    states, in an order no layout changes, and writes its chunk (ONE_STEP: the chunk is one block, in
    either launch)."""
    rows, row_mask = _rows(n_rows, INDEX_64, BLOCK_ROWS)
    src_row = row_starts(rows, row_shape, src_row_strides, opaque_zero, ROW_RANK, ROW_ALIGN)
    dst_row = row_starts(rows, row_shape, dst_row_strides, opaque_zero, ROW_RANK, DST_ALIGN)
    lanes = tl.arange(0, BLOCK_R)
    if INDEX_64:
        lanes = lanes.to(tl.int64)
    out_type = dst.dtype.element_ty
    if STATS:
        chunk, start = _chunk_start(chunk_length, INDEX_64)
        if ONE_STEP:
            j = start + lanes
            mask, x = _row_block(src, src_row, j, length, row_mask, src_red_stride, RED_UNIT, SRC_FORMAT, COMPUTE)
            x = tl.where(mask, x, float("-inf"))
            top = _extreme_lanes(x, True)
            # an element equal to the maximum counts 1, so that a chunk of -inf (or of +inf) sums to its
            # count, not NaN, as the states' combination expects
            e = tl.where(x == top[:, None], 1.0, tl.exp(x - top[:, None]))
            total = tl.sum(tl.where(mask, e, 0.0), 1)
        else:
            # per lane, an online (max, sum of exp) over the chunk's blocks
            m = tl.full([BLOCK_ROWS, BLOCK_R], float("-inf"), COMPUTE)
            s = tl.zeros([BLOCK_ROWS, BLOCK_R], COMPUTE)
            stop = start + chunk_length
            while start < stop:
                j = start + lanes
                mask, x = _row_block(src, src_row, j, length, row_mask, src_red_stride, RED_UNIT, SRC_FORMAT,
                                     COMPUTE)
                m, s = logsumexp_combine(m, s, tl.where(mask, x, float("-inf")), mask.to(COMPUTE))
                start += BLOCK_R
            top = _extreme_lanes(m, True)
            total = tl.sum(s * tl.where(m == top[:, None], 1.0, tl.exp(m - top[:, None])), 1)
        tl.store(part0 + rows * n_chunks + chunk, top, mask=row_mask)
        tl.store(part1 + rows * n_chunks + chunk, total, mask=row_mask)
    elif RESIDENT and WARP_ROWS:
        _warp_row_softmax(src, dst, src_row, dst_row, row_mask, length, dst_red_stride, LOG, DST_UNIT, COMPUTE,
                          SRC_FORMAT, DST_FORMAT, VIA_F32, FLOAT_TO_INT, INDEX_64, BLOCK_R)
    elif RESIDENT:
        mask = row_mask[:, None] & (lanes < length)[None, :]
        x = decode(tl.load(src + src_row[:, None] + _along(lanes, src_red_stride, RED_UNIT)[None, :], mask=mask,
                            other=0), SRC_FORMAT)
        x = tl.where(mask, x.to(COMPUTE), float("-inf"))
        top = _extreme_lanes(x, True)
        shifted = x - top[:, None]
        e = tl.exp(shifted)
        total = tl.sum(tl.where(mask, e, 0.0), 1)
        if LOG:
            y = shifted - tl.log(total)[:, None]
        else:
            y = e / total[:, None]
        tl.store(dst + dst_row[:, None] + _along(lanes, dst_red_stride, DST_UNIT)[None, :],
                 encode(y, out_type, DST_FORMAT, VIA_F32, FLOAT_TO_INT), mask=mask)
    else:
        chunk, start = _chunk_start(chunk_length, INDEX_64)
        if ONE_STEP:
            # the block is loaded before the chunk states, so that its latency passes while they combine
            j = start + lanes
            mask, x = _row_block(src, src_row, j, length, row_mask, src_red_stride, RED_UNIT, SRC_FORMAT, COMPUTE)
            top, total, _ = load_partials(part0, part1, part0, rows, row_mask, n_chunks, 9, COMPUTE, float("-inf"),
                                          float("inf"), BLOCK_ROWS, CHUNKS, CHUNK_BITS, "")
            tl.store(dst + dst_row[:, None] + _along(j, dst_red_stride, DST_UNIT)[None, :],
                     encode(_normalised(x, top, total, LOG), out_type, DST_FORMAT, VIA_F32, FLOAT_TO_INT), mask=mask)
        else:
            top, total, _ = load_partials(part0, part1, part0, rows, row_mask, n_chunks, 9, COMPUTE, float("-inf"),
                                          float("inf"), BLOCK_ROWS, CHUNKS, CHUNK_BITS, "")
            stop = start + chunk_length
            while start < stop:
                j = start + lanes
                mask, x = _row_block(src, src_row, j, length, row_mask, src_red_stride, RED_UNIT, SRC_FORMAT,
                                     COMPUTE)
                tl.store(dst + dst_row[:, None] + _along(j, dst_red_stride, DST_UNIT)[None, :],
                         encode(_normalised(x, top, total, LOG), out_type, DST_FORMAT, VIA_F32, FLOAT_TO_INT),
                         mask=mask)
                start += BLOCK_R


@triton.jit
def _warp_row_softmax(src, dst, src_row, dst_row, row_mask, length, dst_red_stride, LOG: tl.constexpr,
                      DST_UNIT: tl.constexpr, COMPUTE: tl.constexpr, SRC_FORMAT: tl.constexpr,
                      DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr, FLOAT_TO_INT: tl.constexpr,
                      INDEX_64: tl.constexpr, BLOCK_R: tl.constexpr):
    """The resident softmax of short unit-stride rows, each in one warp: a row's BLOCK_R elements as
    [BLOCK_R // 32, 32], element 32 e + lane held by its lane, so that its maximum and sum reduce in each
    thread and then across the warp's lanes by shuffles. The [rows, BLOCK_R] tile of the general form spreads
    a row over every warp, and its reductions wait on shared memory and barriers (Triton lays warps along a
    row's length first)."""
    j = tl.arange(0, BLOCK_R // 32)[None, :, None] * 32 + tl.arange(0, 32)[None, None, :]
    if INDEX_64:
        j = j.to(tl.int64)
    mask = row_mask[:, None, None] & (j < length)
    x = decode(tl.load(src + src_row[:, None, None] + j, mask=mask, other=0), SRC_FORMAT)
    x = tl.where(mask, x.to(COMPUTE), float("-inf"))
    top = _extreme_lanes(_extreme_lanes(x, True), True)
    shifted = x - top[:, None, None]
    e = tl.exp(shifted)
    total = tl.sum(tl.sum(tl.where(mask, e, 0.0), 1), 1)
    if LOG:
        y = shifted - tl.log(total)[:, None, None]
    else:
        y = e / total[:, None, None]
    tl.store(dst + dst_row[:, None, None] + _along(j, dst_red_stride, DST_UNIT),
             encode(y, dst.dtype.element_ty, DST_FORMAT, VIA_F32, FLOAT_TO_INT), mask=mask)


@triton.jit
def _normalised(x, top, total, LOG: tl.constexpr):
    """softmax (log_softmax with LOG) of the block ``x`` of rows whose (max, sum of exp) states these are."""
    shifted = x - top[:, None]
    if LOG:
        return shifted - tl.log(total)[:, None]
    else:
        return tl.exp(shifted) / total[:, None]


@triton.jit
def _load_row_block(src, res, res_out, src_row, res_row, out_row, j, mask, COMPUTE: tl.constexpr,
                    HAS_RESIDUAL: tl.constexpr, SRC_FORMAT: tl.constexpr, RES_FORMAT: tl.constexpr,
                    H_FORMAT: tl.constexpr, H_VIA_F32: tl.constexpr):
    """A block of rows, with the residual added (and the sum, rounded to the input's dtype as an
    unfused add would round it, stored to res_out) when HAS_RESIDUAL."""
    x = decode(tl.load(src + src_row[:, None] + j[None, :], mask=mask, other=0), SRC_FORMAT).to(COMPUTE)
    if HAS_RESIDUAL:
        r = decode(tl.load(res + res_row[:, None] + j[None, :], mask=mask, other=0), RES_FORMAT).to(COMPUTE)
        h = encode(x + r, res_out.dtype.element_ty, H_FORMAT, H_VIA_F32, False)
        tl.store(res_out + out_row[:, None] + j[None, :], h, mask=mask)
        x = decode(h, H_FORMAT).to(COMPUTE)
    return tl.where(mask, x, 0.0)


@triton.jit
def _affine(y, weight, bias, rows, j, mask, groups, group_channels, spatial, COMPUTE: tl.constexpr,
            AFFINE: tl.constexpr, HAS_BIAS: tl.constexpr, W_FORMAT: tl.constexpr, B_FORMAT: tl.constexpr):
    """y * weight + bias; AFFINE 1: per element of the row, 2: per channel of a group-norm group."""
    if AFFINE == 0:
        return y
    if AFFINE == 1:
        widx = tl.broadcast_to(j[None, :], y.shape)
    else:
        widx = (rows % groups)[:, None] * group_channels + (j // spatial)[None, :]
    w = decode(tl.load(weight + widx, mask=mask, other=0), W_FORMAT).to(COMPUTE)
    y = y * w
    if HAS_BIAS:
        y = y + decode(tl.load(bias + widx, mask=mask, other=0), B_FORMAT).to(COMPUTE)
    return y


@triton.jit(do_not_specialize=["n_rows", "opaque_zero"])
def norm_rows(src, res, res_out, weight, bias, dst, n_rows, opaque_zero, length, eps, groups, group_channels, spatial,
              row_shape, src_row_strides, res_row_strides,
              RMS: tl.constexpr, AFFINE: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_RESIDUAL: tl.constexpr,
              ROW_RANK: tl.constexpr, RESIDENT: tl.constexpr, COMPUTE: tl.constexpr,
              SRC_FORMAT: tl.constexpr, RES_FORMAT: tl.constexpr, H_FORMAT: tl.constexpr, H_VIA_F32: tl.constexpr,
              W_FORMAT: tl.constexpr, B_FORMAT: tl.constexpr, DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr,
              INDEX_64: tl.constexpr, ROW_ALIGN: tl.constexpr, BLOCK_ROWS: tl.constexpr, BLOCK_R: tl.constexpr,
              LANE_BITS: tl.constexpr, PDL: tl.constexpr, ROUND_NORMED: tl.constexpr = False):
    """layer_norm (RMS false: subtract the mean, divide by the standard deviation) or rms_norm of rows
    whose elements are adjacent; outputs (and the residual sum) are written densely. ROUND_NORMED: the
    normalised value is rounded to the output's dtype before the weight multiplies it (transformers'
    RMSNorm: ``weight * normed.to(dtype)``)."""
    await_predecessors(PDL)
    rows, row_mask = _rows(n_rows, INDEX_64, BLOCK_ROWS)
    src_row = row_starts(rows, row_shape, src_row_strides, opaque_zero, ROW_RANK, ROW_ALIGN)
    res_row = row_starts(rows, row_shape, res_row_strides, opaque_zero, ROW_RANK, ROW_ALIGN)
    out_row = tl.multiple_of(rows * length, ROW_ALIGN)
    lanes = tl.arange(0, BLOCK_R)
    if INDEX_64:
        lanes = lanes.to(tl.int64)
    out_type = dst.dtype.element_ty
    if RESIDENT:
        mask = row_mask[:, None] & (lanes < length)[None, :]
        x = _load_row_block(src, res, res_out, src_row, res_row, out_row, lanes, mask, COMPUTE, HAS_RESIDUAL,
                            SRC_FORMAT, RES_FORMAT, H_FORMAT, H_VIA_F32)
        if RMS:
            rstd = 1.0 / tl.sqrt(tl.sum(x * x, 1) / length + eps)
            y = x * rstd[:, None]
        else:
            mean = tl.sum(x, 1) / length
            centred = tl.where(mask, x - mean[:, None], 0.0)
            rstd = 1.0 / tl.sqrt(tl.sum(centred * centred, 1) / length + eps)
            y = centred * rstd[:, None]
        if ROUND_NORMED:
            y = decode(encode(y, out_type, DST_FORMAT, VIA_F32, False), DST_FORMAT).to(COMPUTE)
        y = _affine(y, weight, bias, rows, lanes, mask, groups, group_channels, spatial, COMPUTE, AFFINE, HAS_BIAS,
                    W_FORMAT, B_FORMAT)
        tl.store(dst + out_row[:, None] + lanes[None, :], encode(y, out_type, DST_FORMAT, VIA_F32, False), mask=mask)
    else:
        count = tl.zeros([BLOCK_ROWS, BLOCK_R], COMPUTE)
        mean_acc = tl.zeros([BLOCK_ROWS, BLOCK_R], COMPUTE)
        m2 = tl.zeros([BLOCK_ROWS, BLOCK_R], COMPUTE)
        start = length * 0
        while start < length:
            j = start + lanes
            mask = row_mask[:, None] & (j < length)[None, :]
            x = _load_row_block(src, res, res_out, src_row, res_row, out_row, j, mask, COMPUTE, HAS_RESIDUAL,
                                SRC_FORMAT, RES_FORMAT, H_FORMAT, H_VIA_F32)
            if RMS:
                m2 += x * x
            else:
                count, mean_acc, m2 = welford_combine(count, mean_acc, m2, mask.to(COMPUTE), x, 0.0)
            start += BLOCK_R
        if RMS:
            rstd = 1.0 / tl.sqrt(_lane_sum(m2) / length + eps)
            mean = rstd * 0
        else:
            _, mean, total_m2 = _reduce_lanes(count, mean_acc, m2, 8, LANE_BITS)
            rstd = 1.0 / tl.sqrt(total_m2 / length + eps)
        start = length * 0
        while start < length:
            j = start + lanes
            mask = row_mask[:, None] & (j < length)[None, :]
            if HAS_RESIDUAL:
                x = decode(tl.load(res_out + out_row[:, None] + j[None, :], mask=mask, other=0), H_FORMAT)
            else:
                x = decode(tl.load(src + src_row[:, None] + j[None, :], mask=mask, other=0), SRC_FORMAT)
            y = (x.to(COMPUTE) - mean[:, None]) * rstd[:, None]
            if ROUND_NORMED:
                y = decode(encode(y, out_type, DST_FORMAT, VIA_F32, False), DST_FORMAT).to(COMPUTE)
            y = _affine(y, weight, bias, rows, j, mask, groups, group_channels, spatial, COMPUTE, AFFINE, HAS_BIAS,
                        W_FORMAT, B_FORMAT)
            tl.store(dst + out_row[:, None] + j[None, :], encode(y, out_type, DST_FORMAT, VIA_F32, False), mask=mask)
            start += BLOCK_R


@triton.jit
def batch_norm_inference(src, dst, mean, var, weight, bias, n, channels, channel_stride, eps,
                         HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr, COMPUTE: tl.constexpr,
                         SRC_FORMAT: tl.constexpr, MEAN_FORMAT: tl.constexpr, VAR_FORMAT: tl.constexpr,
                         W_FORMAT: tl.constexpr, B_FORMAT: tl.constexpr, DST_FORMAT: tl.constexpr,
                         VIA_F32: tl.constexpr, INDEX_64: tl.constexpr, BLOCK: tl.constexpr):
    """(x - mean[c]) / sqrt(var[c] + eps) * weight[c] + bias[c] over a dense tensor whose channel
    dim has stride ``channel_stride`` (the spatial size in NCHW, 1 in channels-last); the per-channel
    vectors, each in its own dtype, are converted to the compute dtype in registers."""
    idx = program_elements(BLOCK, INDEX_64)
    mask = idx < n
    c = (idx // channel_stride) % channels
    x = decode(tl.load(src + idx, mask=mask, other=0), SRC_FORMAT).to(COMPUTE)
    m = decode(tl.load(mean + c, mask=mask, other=0), MEAN_FORMAT).to(COMPUTE)
    v = decode(tl.load(var + c, mask=mask, other=1), VAR_FORMAT).to(COMPUTE)
    y = (x - m) / tl.sqrt(v + eps)
    if HAS_WEIGHT:
        y = y * decode(tl.load(weight + c, mask=mask, other=1), W_FORMAT).to(COMPUTE)
    if HAS_BIAS:
        y = y + decode(tl.load(bias + c, mask=mask, other=0), B_FORMAT).to(COMPUTE)
    tl.store(dst + idx, encode(y, dst.dtype.element_ty, DST_FORMAT, VIA_F32, False), mask=mask)
