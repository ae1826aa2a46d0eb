"""Row reductions: one kernel family for every reduction, chosen by a constexpr ``OP``.

A reduction reads "rows": each output element reduces ``length`` input elements. Rows are found
by strides (kept dims), elements within a row by strides (reduced dims), so no input is copied.
Two layouts of the program tile ``[BLOCK_ROWS, BLOCK_R]``:

- ROW: a program takes BLOCK_ROWS whole rows; used when the reduced elements are adjacent in memory
  (or when nothing is), so loads run along the row.
- COLUMN: the innermost kept dim has unit stride; a program takes BLOCK_ROWS neighbouring rows of one
  outer index, so loads run across rows and reduced elements are walked with their stride.

Every op keeps up to three state tensors per lane (element ``j`` of a row goes to lane
``j % BLOCK_R``), folds each block of elements into them, and combines the lanes at the end. The
order of that arithmetic depends only on the row length and the layout (the launch settings are a
function of those), never on the number of rows or on which program handles a row, so a row gives
the same bits alone or in any batch. A row too long for one program is split into fixed chunks
whose partial states are written out and combined, in a fixed order, by the last program of a row's chunks
to finish (``last_to_arrive``) or, where a launch has more programs of rows than there are arrival
counters, by a second launch (``combine_partials``): the same arithmetic either way.
"""
import triton
import triton.language as tl

from . import ieee

from .common import last_to_arrive, strided_offset
from .formats import decode, encode

OP_SUM = 0
OP_NANSUM = 1
OP_MEAN = 2
OP_NANMEAN = 3
OP_PROD = 4
OP_AMAX = 5
OP_AMIN = 6
OP_ARGMAX = 7
OP_ARGMIN = 8
OP_AMINMAX = 9
OP_VAR = 10
OP_STD = 11
OP_LOGSUMEXP = 12
OP_ANY = 13
OP_ALL = 14
OP_COUNT_NONZERO = 15
OP_NORM_0 = 16
OP_NORM_1 = 17
OP_NORM_2 = 18
OP_NORM_INF = 19
OP_NORM_NEG_INF = 20
OP_NORM_P = 21

# how lane states combine
KIND_ADD = 0
KIND_MUL = 1
KIND_MAX = 2
KIND_MIN = 3
KIND_ARGMAX = 4
KIND_ARGMIN = 5
KIND_MINMAX = 6
KIND_SUM_COUNT = 7
KIND_WELFORD = 8
KIND_LOGSUMEXP = 9

KIND_OF = {
    OP_SUM: KIND_ADD, OP_NANSUM: KIND_ADD, OP_MEAN: KIND_ADD, OP_NANMEAN: KIND_SUM_COUNT, OP_PROD: KIND_MUL,
    OP_AMAX: KIND_MAX, OP_AMIN: KIND_MIN, OP_ARGMAX: KIND_ARGMAX, OP_ARGMIN: KIND_ARGMIN,
    OP_AMINMAX: KIND_MINMAX, OP_VAR: KIND_WELFORD, OP_STD: KIND_WELFORD, OP_LOGSUMEXP: KIND_LOGSUMEXP,
    OP_ANY: KIND_MAX, OP_ALL: KIND_MIN, OP_COUNT_NONZERO: KIND_ADD, OP_NORM_0: KIND_ADD, OP_NORM_1: KIND_ADD,
    OP_NORM_2: KIND_ADD, OP_NORM_INF: KIND_MAX, OP_NORM_NEG_INF: KIND_MIN, OP_NORM_P: KIND_ADD,
}

# the index a padding lane carries: larger than any real one, so real elements win ties
NO_INDEX = 2 ** 62


@triton.jit
def row_starts(rows, row_shape, row_strides, opaque_zero, ROW_RANK: tl.constexpr, ROW_ALIGN: tl.constexpr):
    """The offsets of ``rows``' first elements. Triton specialises the elements of a tuple argument
    whatever ``do_not_specialize`` says (a shape of 1, a stride of 0 or 16 would become facts the compiler
    builds layouts on); adding ``opaque_zero``, an unspecialised 0, leaves it knowing only ROW_ALIGN."""
    size = row_shape[ROW_RANK - 1] + opaque_zero
    off = (rows % size) * (row_strides[ROW_RANK - 1] + opaque_zero)
    rem = rows // size
    for d in tl.static_range(ROW_RANK - 2, -1, -1):
        size = row_shape[d] + opaque_zero
        off += (rem % size) * (row_strides[d] + opaque_zero)
        rem = rem // size
    # the hint marks the last operation, which (unlike an addition to a zero start) is never folded away
    return tl.multiple_of(off, ROW_ALIGN)


@triton.jit
def max_propagating_nan(a, b):
    return tl.where((a > b) | (a != a), a, b)


@triton.jit
def min_propagating_nan(a, b):
    return tl.where((a < b) | (a != a), a, b)


@triton.jit
def _argmax_combine(va, ia, vb, ib):
    """The larger value, NaN above everything, the first index among equals."""
    nan_a = va != va
    nan_b = vb != vb
    first = (va > vb) | (nan_a & ~nan_b) | (((va == vb) | (nan_a & nan_b)) & (ia < ib))
    return tl.where(first, va, vb), tl.where(first, ia, ib)


@triton.jit
def _argmin_combine(va, ia, vb, ib):
    nan_a = va != va
    nan_b = vb != vb
    first = (va < vb) | (nan_a & ~nan_b) | (((va == vb) | (nan_a & nan_b)) & (ia < ib))
    return tl.where(first, va, vb), tl.where(first, ia, ib)


@triton.jit
def _minmax_combine(min_a, max_a, min_b, max_b):
    return min_propagating_nan(min_a, min_b), max_propagating_nan(max_a, max_b)


@triton.jit
def welford_combine(count_a, mean_a, m2_a, count_b, mean_b, m2_b):
    """Chan et al.'s merge of two (count, mean, sum of squared deviations) states."""
    count = count_a + count_b
    ratio = count_b / tl.where(count == 0, 1, count)
    delta = mean_b - mean_a
    return count, mean_a + delta * ratio, m2_a + m2_b + delta * delta * count_a * ratio


@triton.jit
def logsumexp_combine(max_a, sum_a, max_b, sum_b):
    """Merge (running max, sum of exp(x - max)) states; infinite maxima need no rescaling."""
    top = max_propagating_nan(max_a, max_b)
    scale_a = tl.where(max_a == top, 1.0, tl.exp(max_a - top))
    scale_b = tl.where(max_b == top, 1.0, tl.exp(max_b - top))
    return top, sum_a * scale_a + sum_b * scale_b


@triton.jit
def _fold(s0, s1, s2, t0, t1, t2, KIND: tl.constexpr):
    """Combine state (s0, s1, s2) with state (t0, t1, t2) elementwise."""
    if KIND == 0:
        return s0 + t0, s1, s2
    elif KIND == 1:
        return s0 * t0, s1, s2
    elif KIND == 2:
        return max_propagating_nan(s0, t0), s1, s2
    elif KIND == 3:
        return min_propagating_nan(s0, t0), s1, s2
    elif KIND == 4:
        v, i = _argmax_combine(s0, s1, t0, t1)
        return v, i, s2
    elif KIND == 5:
        v, i = _argmin_combine(s0, s1, t0, t1)
        return v, i, s2
    elif KIND == 6:
        lo, hi = _minmax_combine(s0, s1, t0, t1)
        return lo, hi, s2
    elif KIND == 7:
        return s0 + t0, s1 + t1, s2
    elif KIND == 8:
        return welford_combine(s0, s1, s2, t0, t1, t2)
    else:
        m, s = logsumexp_combine(s0, s1, t0, t1)
        return m, s, s2


@triton.jit
def _extreme_lanes(x, LARGEST: tl.constexpr):
    """Largest (or smallest) value along axis 1, NaN when any is NaN (Triton's own max and min skip NaN
    on GPUs)."""
    best = tl.max(x, 1) if LARGEST else tl.min(x, 1)
    if x.dtype.is_floating():
        has_nan = tl.max((x != x).to(tl.int32), 1) > 0
        return tl.where(has_nan, float("nan"), best).to(x.dtype)
    else:
        # no NaN to look for; a float constant in the select would round large integers
        return best


@triton.constexpr_function
def _fraction_bits(lanes):
    """Bits each lane keeps below the largest lane's magnitude so that the total of ``lanes`` lanes
    stays below 2^62."""
    return 61 - (lanes - 1).bit_length()


@triton.constexpr_function
def _halvings_to(lanes, target):
    """How many pairwise halvings take ``lanes`` down to at most ``target``."""
    return max(0, (lanes - 1).bit_length() - (target - 1).bit_length())


@triton.jit
def _pairwise(x, TIMES: tl.constexpr, PRODUCT: tl.constexpr):
    """``x`` [rows, lanes] with lanes 2k and 2k + 1 combined (added, or multiplied with PRODUCT), TIMES
    times over: an order the code fixes, whatever the tile's layout."""
    for _ in tl.static_range(TIMES):
        left, right = tl.split(tl.reshape(x, [x.shape[0], x.shape[1] // 2, 2]))
        if PRODUCT:
            x = left * right
        else:
            x = left + right
    return x


@triton.jit
def _lane_sum(x):
    """The sum over axis 1 of a [rows, lanes] tile, bit-identical whatever the compiler's layout of the
    tile. ``tl.sum`` adds floats in an order that follows the layout, and the layout follows what Triton
    specialises on (a row's alignment, say), so the same row could round differently in another batch.
    Floats are summed instead in 64-bit fixed point scaled to the row's largest lane: converting each
    lane is elementwise and integer addition is exact, so the order no longer matters. Each lane keeps
    about 50 bits below the largest lane's magnitude (fewer for wider tiles, so that the total stays
    below 2^62), which is finer than a float32 or float64 rounding of the sum. Rows holding inf or NaN
    take the plain sum: its non-finite result does not depend on order."""
    if x.dtype.is_floating():
        # pairs of lanes first (cheap, and in a fixed order): fewer lanes to convert to fixed point
        wide = _pairwise(x, _halvings_to(x.shape[1], 64), False).to(tl.float64)
        plain = tl.sum(wide, 1)
        biased_exponent = (tl.max(tl.abs(wide), 1).to(tl.int64, bitcast=True) >> 52) & 0x7FF
        # the largest lane lies below 2^fraction once scaled
        shift = tl.minimum(tl.maximum(1022 + _fraction_bits(wide.shape[1]) - biased_exponent, -1022), 1023)
        scale = ((shift + 1023) << 52).to(tl.float64, bitcast=True)
        unscale = ((1023 - shift) << 52).to(tl.float64, bitcast=True)
        total = tl.sum((wide * scale[:, None]).to(tl.int64), 1).to(tl.float64) * unscale
        return tl.where(tl.abs(plain) < float("inf"), total, plain).to(x.dtype)
    else:
        return tl.sum(x, 1)


@triton.jit
def _reduce_lanes(s0, s1, s2, KIND: tl.constexpr, LANE_BITS: tl.constexpr):
    """States over axis 1 of a [rows, lanes] tile combined into one state per row. Only Triton's
    built-in reductions are used: a custom combine function runs element by element in Triton's
    interpreter, and these closed forms need none."""
    if KIND == 0:
        return _lane_sum(s0), tl.sum(s1, 1), tl.sum(s2, 1)
    elif KIND == 1:
        prod = _pairwise(s0, LANE_BITS, True)
        return tl.reshape(prod, [prod.shape[0]]), tl.sum(s1, 1), tl.sum(s2, 1)
    elif KIND == 2:
        return _extreme_lanes(s0, True), tl.sum(s1, 1), tl.sum(s2, 1)
    elif KIND == 3:
        return _extreme_lanes(s0, False), tl.sum(s1, 1), tl.sum(s2, 1)
    elif KIND == 4 or KIND == 5:
        # each lane holds its first best index; the row's answer is the smallest index among the
        # lanes whose value equals the best one
        if KIND == 4:
            best = _extreme_lanes(s0, True)
        else:
            best = _extreme_lanes(s0, False)
        both_nan = (s0 != s0) & (best != best)[:, None]
        hit = (s0 == best[:, None]) | both_nan
        return best, tl.min(tl.where(hit, s1, 4611686018427387904), 1), tl.sum(s2, 1)
    elif KIND == 6:
        return _extreme_lanes(s0, False), _extreme_lanes(s1, True), tl.sum(s2, 1)
    elif KIND == 7:
        return _lane_sum(s0), _lane_sum(s1), tl.sum(s2, 1)
    elif KIND == 8:
        # the parallel form of Chan's merge over all lanes at once
        count = _lane_sum(s0)
        mean = _lane_sum(s0 * s1) / tl.where(count == 0, 1, count)
        delta = s1 - mean[:, None]
        return count, mean, _lane_sum(s2) + _lane_sum(s0 * delta * delta)
    else:
        top = _extreme_lanes(s0, True)
        scale = tl.where(s0 == top[:, None], 1.0, tl.exp(s0 - top[:, None]))
        return top, _lane_sum(s1 * scale), tl.sum(s2, 1)


@triton.jit
def _identity(shape, KIND: tl.constexpr, ACC: tl.constexpr, LOWEST: tl.constexpr, HIGHEST: tl.constexpr):
    """The state of no elements. s1 holds indices (int64) for the arg kinds."""
    if KIND == 1:
        s0 = tl.full(shape, 1, ACC)
    elif KIND == 2 or KIND == 4:
        s0 = tl.full(shape, LOWEST, ACC)
    elif KIND == 3 or KIND == 5:
        s0 = tl.full(shape, HIGHEST, ACC)
    elif KIND == 6:
        s0 = tl.full(shape, HIGHEST, ACC)
    elif KIND == 9:
        s0 = tl.full(shape, float("-inf"), ACC)
    else:
        s0 = tl.zeros(shape, ACC)
    if KIND == 4 or KIND == 5:
        s1 = tl.full(shape, 4611686018427387904, tl.int64)
    elif KIND == 6:
        s1 = tl.full(shape, LOWEST, ACC)
    else:
        s1 = tl.zeros(shape, ACC)
    s2 = tl.zeros(shape, ACC)
    return s0, s1, s2


@triton.jit
def _lift(x, j, mask, p, OP: tl.constexpr, KIND: tl.constexpr, ACC: tl.constexpr, LOWEST: tl.constexpr,
          HIGHEST: tl.constexpr):
    """The state of one element ``x`` (already converted to the compute type) at index ``j``;
    the identity where ``mask`` is false."""
    id0, id1, id2 = _identity(x.shape, KIND, ACC, LOWEST, HIGHEST)
    if OP == 1:
        v = tl.where(x != x, 0, x).to(ACC)
    elif OP == 13 or OP == 14 or OP == 15 or OP == 16:
        v = (x != 0).to(ACC)
    elif OP == 17 or OP == 19 or OP == 20:
        v = tl.abs(x).to(ACC)
    elif OP == 18:
        v = (x * x).to(ACC)
    elif OP == 21:
        v = tl.exp2(p * tl.log2(tl.abs(x))).to(ACC)
    else:
        v = x.to(ACC)
    if KIND == 4 or KIND == 5:
        return tl.where(mask, v, id0), tl.where(mask, j.to(tl.int64), id1), id2
    elif KIND == 6:
        return tl.where(mask, v, id0), tl.where(mask, v, id1), id2
    elif KIND == 7:
        valid = mask & (v == v)
        return tl.where(valid, v, 0), valid.to(ACC), id2
    elif KIND == 8:
        return mask.to(ACC), tl.where(mask, v, 0), id2
    elif KIND == 9:
        return tl.where(mask, v, float("-inf")), mask.to(ACC), id2
    else:
        return tl.where(mask, v, id0), id1, id2


@triton.jit
def _finalize(s0, s1, s2, count, p, correction, OP: tl.constexpr):
    """The op's results (first output, second output) from a row's combined state."""
    # IEEE-rounded division and square root: Triton's plain float32 forms are approximate on NVIDIA GPUs
    if OP == 2:
        return ieee.div(s0, s0 * 0 + count), s1
    elif OP == 3:
        return ieee.div(s0, s1), s1
    elif OP == 10 or OP == 11:
        var = ieee.div(s2, tl.maximum(s0 - correction, 0.0))
        if OP == 11:
            var = ieee.sqrt(var)
        # the mean of no elements is NaN, as mean's 0 / 0 is
        return var, tl.where(s0 > 0, s1, float("nan"))
    elif OP == 12:
        return s0 + tl.log(s1), s1
    elif OP == 18:
        return tl.sqrt(s0), s1
    elif OP == 21:
        return tl.exp2(tl.log2(s0) / p), s1
    else:
        return s0, s1


@triton.jit
def _store_results(out0, out1, out_idx, row_mask, s0, s1, s2, count, p, correction,
                   OP: tl.constexpr, KIND: tl.constexpr, OUT_VALUES: tl.constexpr, OUT_SECOND: tl.constexpr,
                   DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr, FLOAT_TO_INT: tl.constexpr):
    first, second = _finalize(s0, s1, s2, count, p, correction, OP)
    if KIND == 4 or KIND == 5:
        # arg kinds: out0 holds values (when OUT_VALUES), out1 the indices
        if OUT_VALUES:
            tl.store(out0 + out_idx, encode(first, out0.dtype.element_ty, DST_FORMAT, VIA_F32, FLOAT_TO_INT),
                     mask=row_mask)
        tl.store(out1 + out_idx, second, mask=row_mask)
    else:
        tl.store(out0 + out_idx, encode(first, out0.dtype.element_ty, DST_FORMAT, VIA_F32, FLOAT_TO_INT),
                 mask=row_mask)
        if OUT_SECOND:
            tl.store(out1 + out_idx, encode(second, out1.dtype.element_ty, DST_FORMAT, VIA_F32, FLOAT_TO_INT),
                     mask=row_mask)


@triton.jit
def _program_rows(pid, lanes, n_rows, n_inner, COLUMN: tl.constexpr, BLOCK_ROWS: tl.constexpr):
    """(output indices, which are real, their rows' outer index, inner index) of program ``pid``'s rows at
    ``lanes`` (of 0..BLOCK_ROWS - 1): COLUMN, neighbouring inner indices of one outer index (a row's input
    offset that outer index's plus the inner one); else whole rows (the inner index 0)."""
    if COLUMN:
        inner_blocks = tl.cdiv(n_inner, BLOCK_ROWS)
        outer = pid // inner_blocks
        inner = (pid % inner_blocks) * BLOCK_ROWS + lanes
        return outer * n_inner + inner, inner < n_inner, outer, inner
    else:
        rows = pid * BLOCK_ROWS + lanes
        return rows, rows < n_rows, rows, 0


@triton.jit
def _row_geometry(n_rows, n_inner, row_shape, row_strides, ROW_RANK: tl.constexpr, COLUMN: tl.constexpr,
                  INDEX_64: tl.constexpr, BLOCK_ROWS: tl.constexpr):
    """(offsets of this program's rows, their output indices, which are real)."""
    pid = tl.program_id(0)
    lanes = tl.arange(0, BLOCK_ROWS)
    if INDEX_64:
        pid = pid.to(tl.int64)
        lanes = lanes.to(tl.int64)
    out_idx, row_mask, outer, inner = _program_rows(pid, lanes, n_rows, n_inner, COLUMN, BLOCK_ROWS)
    return strided_offset(outer, row_shape, row_strides, ROW_RANK) + inner, out_idx, row_mask


# The row count is never specialised: a kernel compiled for one row could contract its arithmetic
# differently from the many-row kernel, and a row must reduce to the same bits in any batch.
@triton.jit(do_not_specialize=["n_rows", "n_inner"])
def reduce_rows(src, out0, out1, part0, part1, part2, counters,
                n_rows, n_inner, length, chunk_length, n_chunks, count, p, correction,
                row_shape, row_strides, red_shape, red_strides,
                OP: tl.constexpr, KIND: tl.constexpr, ACC: tl.constexpr, COMPUTE: tl.constexpr,
                LOWEST: tl.constexpr, HIGHEST: tl.constexpr,
                ROW_RANK: tl.constexpr, RED_RANK: tl.constexpr, RED_UNIT: tl.constexpr, COLUMN: tl.constexpr,
                SPLIT: tl.constexpr, OUT_VALUES: tl.constexpr, OUT_SECOND: tl.constexpr,
                SRC_FORMAT: tl.constexpr, DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr,
                FLOAT_TO_INT: tl.constexpr, INDEX_64: tl.constexpr,
                BLOCK_ROWS: tl.constexpr, BLOCK_R: tl.constexpr, LANE_BITS: tl.constexpr,
                COMBINE: tl.constexpr, COMBINE_ROWS: tl.constexpr, CHUNKS: tl.constexpr, CHUNK_BITS: tl.constexpr):
    """Reduce rows (one chunk of each when SPLIT, writing partial states to part0..2). COMBINE (with SPLIT):
    the last program of a row block's chunks to finish (counter ``program_id(0)`` of ``counters``)
    combines their states and stores the results, COMBINE_ROWS rows at a time, as ``combine_partials``
    would (CHUNKS, CHUNK_BITS as its)."""
    row_off, out_idx, row_mask = _row_geometry(n_rows, n_inner, row_shape, row_strides, ROW_RANK, COLUMN,
                                               INDEX_64, BLOCK_ROWS)
    chunk = tl.program_id(1)
    lanes = tl.arange(0, BLOCK_R)
    if INDEX_64:
        chunk = chunk.to(tl.int64)
        lanes = lanes.to(tl.int64)
    begin = chunk * chunk_length
    s0, s1, s2 = _identity([BLOCK_ROWS, BLOCK_R], KIND, ACC, LOWEST, HIGHEST)
    # chunk lengths are multiples of BLOCK_R, so only the last chunk of a row meets its end. Loops
    # are while loops: Triton's interpreter cannot iterate a range over runtime bounds (NumPy 2).
    start = begin
    while start < begin + chunk_length:
        j = start + lanes
        if RED_UNIT:
            red_off = j
        else:
            red_off = strided_offset(j, red_shape, red_strides, RED_RANK)
        mask = row_mask[:, None] & (j < length)[None, :]
        raw = tl.load(src + row_off[:, None] + red_off[None, :], mask=mask, other=0)
        x = decode(raw, SRC_FORMAT).to(COMPUTE)
        t0, t1, t2 = _lift(x, tl.broadcast_to(j[None, :], [BLOCK_ROWS, BLOCK_R]), mask, p, OP, KIND, ACC,
                           LOWEST, HIGHEST)
        s0, s1, s2 = _fold(s0, s1, s2, t0, t1, t2, KIND)
        start += BLOCK_R
    r0, r1, r2 = _reduce_lanes(s0, s1, s2, KIND, LANE_BITS)
    if SPLIT:
        part_idx = out_idx * n_chunks + chunk
        tl.store(part0 + part_idx, r0, mask=row_mask)
        tl.store(part1 + part_idx, r1, mask=row_mask)
        tl.store(part2 + part_idx, r2, mask=row_mask)
        if COMBINE:
            pid = tl.program_id(0)
            if last_to_arrive(counters, pid, n_chunks):
                if INDEX_64:
                    pid = pid.to(tl.int64)
                for first in range(0, BLOCK_ROWS, COMBINE_ROWS):
                    rows, mask, _, _ = _program_rows(pid, first + tl.arange(0, COMBINE_ROWS), n_rows, n_inner,
                                                     COLUMN, BLOCK_ROWS)
                    c0, c1, c2 = load_partials(part0, part1, part2, rows, mask, n_chunks, KIND, ACC, LOWEST,
                                               HIGHEST, COMBINE_ROWS, CHUNKS, CHUNK_BITS, ".cg")
                    _store_results(out0, out1, rows, mask, c0, c1, c2, count, p, correction, OP, KIND, OUT_VALUES,
                                   OUT_SECOND, DST_FORMAT, VIA_F32, FLOAT_TO_INT)
    else:
        _store_results(out0, out1, out_idx, row_mask, r0, r1, r2, count, p, correction, OP, KIND, OUT_VALUES,
                       OUT_SECOND, DST_FORMAT, VIA_F32, FLOAT_TO_INT)


@triton.jit
def load_partials(part0, part1, part2, rows, row_mask, n_chunks, KIND: tl.constexpr, ACC: tl.constexpr,
                  LOWEST: tl.constexpr, HIGHEST: tl.constexpr, BLOCK_ROWS: tl.constexpr, CHUNKS: tl.constexpr,
                  CHUNK_BITS: tl.constexpr, CACHE: tl.constexpr):
    """The partial states of ``rows`` (all their chunks) combined, in a fixed order, into one per row
    (loaded with the cache modifier CACHE)."""
    chunks = tl.arange(0, CHUNKS)
    mask = row_mask[:, None] & (chunks < n_chunks)[None, :]
    idx = rows[:, None] * n_chunks + chunks[None, :]
    id0, id1, id2 = _identity([BLOCK_ROWS, CHUNKS], KIND, ACC, LOWEST, HIGHEST)
    s0 = tl.where(mask, tl.load(part0 + idx, mask=mask, other=0, cache_modifier=CACHE), id0)
    s1 = tl.where(mask, tl.load(part1 + idx, mask=mask, other=0, cache_modifier=CACHE), id1)
    s2 = tl.where(mask, tl.load(part2 + idx, mask=mask, other=0, cache_modifier=CACHE), id2)
    return _reduce_lanes(s0, s1, s2, KIND, CHUNK_BITS)


@triton.jit(do_not_specialize=["n_rows"])
def combine_partials(part0, part1, part2, out0, out1, n_rows, n_chunks, count, p, correction,
                     OP: tl.constexpr, KIND: tl.constexpr, ACC: tl.constexpr,
                     LOWEST: tl.constexpr, HIGHEST: tl.constexpr,
                     OUT_VALUES: tl.constexpr, OUT_SECOND: tl.constexpr,
                     DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr, FLOAT_TO_INT: tl.constexpr,
                     BLOCK_ROWS: tl.constexpr, CHUNKS: tl.constexpr, CHUNK_BITS: tl.constexpr):
    """The second pass of a split reduction: every row's chunk states combined and finalised."""
    rows = tl.program_id(0).to(tl.int64) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    row_mask = rows < n_rows
    r0, r1, r2 = load_partials(part0, part1, part2, rows, row_mask, n_chunks, KIND, ACC, LOWEST, HIGHEST, BLOCK_ROWS,
                               CHUNKS, CHUNK_BITS, "")
    _store_results(out0, out1, rows, row_mask, r0, r1, r2, count, p, correction, OP, KIND, OUT_VALUES, OUT_SECOND,
                   DST_FORMAT, VIA_F32, FLOAT_TO_INT)


@triton.jit
def _scan_combine_add(a, b):
    return a + b


@triton.jit
def _scan_combine_mul(a, b):
    return a * b


@triton.jit
def _cummax_combine(va, ia, vb, ib):
    """Later operand ``b`` wins when it is NaN, or not below ``a`` while ``a`` is not NaN (ATen's
    cummax keeps the last index among equal maxima)."""
    take_b = (vb != vb) | ((va == va) & (vb >= va))
    return tl.where(take_b, vb, va), tl.where(take_b, ib, ia)


@triton.jit
def _cummin_combine(va, ia, vb, ib):
    take_b = (vb != vb) | ((va == va) & (vb <= va))
    return tl.where(take_b, vb, va), tl.where(take_b, ib, ia)


@triton.jit
def _last_of_row(x, BLOCK_R: tl.constexpr):
    """The last column of a [rows, BLOCK_R] tile, as a [rows, 1] tile."""
    last = tl.arange(0, BLOCK_R)[None, :] == BLOCK_R - 1
    return tl.sum(tl.where(last, x, 0), 1)[:, None]


@triton.jit
def _scan_steps(src, dst, dst_idx, carry, carry_idx, start, stop, rows, row_mask, src_row, dst_row, lanes,
                src_red_stride, dst_red_stride, SCAN: tl.constexpr, ACC: tl.constexpr, COMPUTE: tl.constexpr,
                SRC_FORMAT: tl.constexpr, DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr,
                FLOAT_TO_INT: tl.constexpr, BLOCK_ROWS: tl.constexpr, BLOCK_R: tl.constexpr, STORE: tl.constexpr):
    """(carry, carry_idx) after scanning elements start..stop of the rows, a block at a time, each block joined
    to the carry of those before it; STORE writes the scanned values (and cummax/cummin's indices)."""
    while start < stop:
        j = start + lanes
        mask = row_mask[:, None] & (j < stop)[None, :]
        raw = tl.load(src + src_row[:, None] + (j * src_red_stride)[None, :], mask=mask, other=0)
        x = decode(raw, SRC_FORMAT).to(COMPUTE).to(ACC)
        idx = tl.broadcast_to(j[None, :].to(tl.int64), [BLOCK_ROWS, BLOCK_R])
        if SCAN == 0:
            y = tl.associative_scan(x, 1, _scan_combine_add) + carry
            carry = _last_of_row(y, BLOCK_R)
        elif SCAN == 1:
            y = tl.associative_scan(x, 1, _scan_combine_mul) * carry
            carry = _last_of_row(y, BLOCK_R)
        elif SCAN == 2 or SCAN == 3:
            if SCAN == 2:
                v, i = tl.associative_scan((x, idx), 1, _cummax_combine)
                y, yi = _cummax_combine(carry, carry_idx, v, i)
            else:
                v, i = tl.associative_scan((x, idx), 1, _cummin_combine)
                y, yi = _cummin_combine(carry, carry_idx, v, i)
            carry = _last_of_row(y, BLOCK_R)
            carry_idx = _last_of_row(yi, BLOCK_R)
            if STORE:
                tl.store(dst_idx + dst_row[:, None] + (j * dst_red_stride)[None, :], yi, mask=mask)
        else:
            m, s = tl.associative_scan((x, tl.full(x.shape, 1.0, ACC)), 1, logsumexp_combine)
            m, s = logsumexp_combine(carry, tl.where(carry == float("-inf"), 0.0, 1.0), m, s)
            y = m + tl.log(s)
            carry = _last_of_row(y, BLOCK_R)
        if STORE:
            tl.store(dst + dst_row[:, None] + (j * dst_red_stride)[None, :],
                     encode(y, dst.dtype.element_ty, DST_FORMAT, VIA_F32, FLOAT_TO_INT), mask=mask)
        start += BLOCK_R
    return carry, carry_idx


@triton.jit
def _await_earlier_chunks(flags, chunk, CHUNKS: tl.constexpr):
    """Wait until ``flags`` (one a chunk of the row) are set for every chunk before ``chunk``; acquiring
    them, this program then reads what those chunks published before setting them."""
    earlier = tl.arange(0, CHUNKS) < chunk
    pending = chunk > 0
    while pending:
        seen = tl.atomic_add(flags + tl.arange(0, CHUNKS), 0, mask=earlier, sem="acquire", scope="gpu")
        pending = tl.sum(tl.where(earlier & (seen == 0), 1, 0)) > 0
    tl.debug_barrier()


# Like softmax's rows (kernels/norm.py), a scanned row must not depend on its batch: the row count is not
# specialised on and row starts go through ``row_starts``, promised nothing (ROW_ALIGN 1); the host keeps
# the tile's row count whatever the batch.
@triton.jit(do_not_specialize=["n_rows", "opaque_zero"])
def scan_rows(src, dst, dst_idx, carries, counters, n_rows, opaque_zero, length, chunk_length, n_chunks,
              row_shape, src_row_strides, dst_row_strides, src_red_stride, dst_red_stride,
              SCAN: tl.constexpr, ACC: tl.constexpr, COMPUTE: tl.constexpr, LOWEST: tl.constexpr,
              HIGHEST: tl.constexpr, ROW_RANK: tl.constexpr, PHASE: tl.constexpr,
              SRC_FORMAT: tl.constexpr, DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr,
              FLOAT_TO_INT: tl.constexpr, INDEX_64: tl.constexpr, BLOCK_ROWS: tl.constexpr, BLOCK_R: tl.constexpr,
              CHUNKS: tl.constexpr):
    """Inclusive scans along rows. SCAN: 0 cumsum, 1 cumprod, 2 cummax, 3 cummin, 4 logcumsumexp.
    Each block is scanned and then joined to the carry of the blocks before it. A long cumsum row runs
    as chunks over programs (row block, chunk): PHASE 1 writes each chunk's total to ``carries``
    [row, chunk]; PHASE 2 scans each chunk from the sum of the totals before it (CHUNKS: n_chunks to a
    power of two), which every chunk's program adds up exactly, so in no order that a program could
    change. PHASE 3 does both in one launch where every chunk's program runs at once: each publishes its
    total by setting its flag in ``counters`` (slots row * n_chunks + chunk), waits for the flags of the
    chunks before it, and the row's last program to finish (counter n_rows * n_chunks + row) clears them
    for the next launch; the same sums in the same order as PHASE 1 and 2, so the same bits. PHASE 0:
    whole rows, one program each."""
    pid = tl.program_id(0)
    rows = tl.arange(0, BLOCK_ROWS)
    lanes = tl.arange(0, BLOCK_R)
    if INDEX_64:
        pid = pid.to(tl.int64)
        rows = rows.to(tl.int64)
        lanes = lanes.to(tl.int64)
    rows = pid * BLOCK_ROWS + rows
    row_mask = rows < n_rows
    src_row = row_starts(rows, row_shape, src_row_strides, opaque_zero, ROW_RANK, 1)
    dst_row = row_starts(rows, row_shape, dst_row_strides, opaque_zero, ROW_RANK, 1)
    if SCAN == 1:
        carry = tl.full([BLOCK_ROWS, 1], 1, ACC)
    elif SCAN == 2:
        carry = tl.full([BLOCK_ROWS, 1], LOWEST, ACC)
    elif SCAN == 3:
        carry = tl.full([BLOCK_ROWS, 1], HIGHEST, ACC)
    elif SCAN == 4:
        carry = tl.full([BLOCK_ROWS, 1], float("-inf"), ACC)
    else:
        carry = tl.zeros([BLOCK_ROWS, 1], ACC)
    carry_idx = tl.zeros([BLOCK_ROWS, 1], tl.int64)
    chunk = tl.program_id(1)
    if INDEX_64:
        chunk = chunk.to(tl.int64)
    if PHASE == 0:
        start = length * 0
        stop = length
    else:
        start = chunk * chunk_length
        stop = tl.minimum(start + chunk_length, length)
    if PHASE == 1 or PHASE == 3:
        total, _ = _scan_steps(src, dst, dst_idx, carry, carry_idx, start, stop, rows, row_mask, src_row, dst_row,
                               lanes, src_red_stride, dst_red_stride, SCAN, ACC, COMPUTE, SRC_FORMAT, DST_FORMAT,
                               VIA_F32, FLOAT_TO_INT, BLOCK_ROWS, BLOCK_R, False)
        tl.store(carries + rows[:, None] * n_chunks + chunk, total, mask=row_mask[:, None])
    if PHASE == 3:
        # BLOCK_ROWS is 1 here: the program's row is pid
        flags = counters + pid * n_chunks
        tl.debug_barrier()
        tl.atomic_xchg(flags + chunk, 1, sem="release", scope="gpu")
        _await_earlier_chunks(flags, chunk, CHUNKS)
    if PHASE == 2 or PHASE == 3:  # carries holds the chunk totals: the carry is the sum of those before this chunk
        earlier = tl.arange(0, CHUNKS)
        before = row_mask[:, None] & (earlier < chunk)[None, :]
        carry = _lane_sum(tl.load(carries + rows[:, None] * n_chunks + earlier[None, :], mask=before, other=0,
                                  cache_modifier=".cg").to(ACC))[:, None]
    if PHASE != 1:
        _scan_steps(src, dst, dst_idx, carry, carry_idx, start, stop, rows, row_mask, src_row, dst_row, lanes,
                    src_red_stride, dst_red_stride, SCAN, ACC, COMPUTE, SRC_FORMAT, DST_FORMAT, VIA_F32,
                    FLOAT_TO_INT, BLOCK_ROWS, BLOCK_R, True)
    if PHASE == 3:
        if last_to_arrive(counters, n_rows * n_chunks + pid, n_chunks):
            tl.store(flags + tl.arange(0, CHUNKS), 0, mask=tl.arange(0, CHUNKS) < n_chunks)
