"""Sorting kernels: one program sorts a short row (or segment) in registers; longer rows sort by LSD
radix passes over many programs, and their k first elements are found by a radix select.

Values become order-preserving unsigned keys (floats by their bits with the sign folded, NaN
largest, -0.0 equal to 0.0; signed integers with the sign bit flipped; descending by inverting),
packed above a validity bit and a tie-breaking rank, so an ascending sort of the packed words is a
stable sort that puts padding lanes after every real element. 64-bit keys take two stable passes
(low half, then high half). The sorting network is bitonic, built from min/max over pairs (which
Triton's interpreter runs as whole-array operations, unlike ``tl.sort``'s xor reductions).
"""
import triton
import triton.language as tl

from .formats import decode

KEY_FLOAT = 0  # any float of at most 32 bits, read through FORMAT
KEY_SIGNED = 1  # signed integers of at most 32 bits
KEY_UNSIGNED = 2  # unsigned integers and bool
KEY_FLOAT64 = 3
KEY_INT64 = 4


@triton.jit
def _key_parts(v, KIND: tl.constexpr, FORMAT: tl.constexpr, DESCENDING: tl.constexpr):
    """(high, low) uint32 halves of the order-preserving key of ``v`` (low is 0 for 32-bit kinds)."""
    if KIND == 0:
        f = decode(v, FORMAT).to(tl.float32) + 0.0
        bits = f.to(tl.uint32, bitcast=True)
        key = tl.where((bits >> 31) != 0, bits ^ 0xFFFFFFFF, bits | 0x80000000)
        high = tl.where(f != f, 0xFFFFFFFF, key).to(tl.uint32)
        low = high * 0
    elif KIND == 1:
        high = v.to(tl.int32).to(tl.uint32, bitcast=True) ^ 0x80000000
        low = high * 0
    elif KIND == 2:
        high = decode(v, FORMAT).to(tl.uint32)
        low = high * 0
    elif KIND == 3:
        f = v + 0.0
        bits = f.to(tl.uint64, bitcast=True)
        key = tl.where((bits >> 63) != 0, bits ^ 0xFFFFFFFFFFFFFFFF, bits | 0x8000000000000000)
        key = tl.where(f != f, 0xFFFFFFFFFFFFFFFF, key).to(tl.uint64)
        high = (key >> 32).to(tl.uint32)
        low = (key & 0xFFFFFFFF).to(tl.uint32)
    else:
        key = v.to(tl.uint64, bitcast=True) ^ 0x8000000000000000
        high = (key >> 32).to(tl.uint32)
        low = (key & 0xFFFFFFFF).to(tl.uint32)
    if DESCENDING:
        high = high ^ 0xFFFFFFFF
        low = low ^ 0xFFFFFFFF
    return high, low


@triton.constexpr_function
def _log2(n):
    return n.bit_length() - 1


@triton.constexpr_function
def _pow2(exponent):
    return 1 << exponent


@triton.jit
def _bitonic(x, MERGE_ONLY: tl.constexpr):
    """``x`` (1-D, a power of two long) in ascending order. MERGE_ONLY: ``x`` already rises then
    falls, so the last stage suffices. Step ``step`` of stage ``stage`` swaps elements
    2^(stage-1-step) apart into order, ascending in runs of 2^stage elements at even multiples of that
    and descending in the odd ones (pair block ``o`` lies in run ``o >> step``). The steps are written
    inline, and reduce with the combine functions behind tl.min/tl.max directly, because the
    interpreter pays per nested jit call (and runs those two combines as NumPy reductions)."""
    LENGTH: tl.constexpr = x.shape[0]
    LOG: tl.constexpr = _log2(LENGTH)
    FIRST_STAGE: tl.constexpr = LOG if MERGE_ONLY else 1
    for stage in tl.static_range(FIRST_STAGE, LOG + 1):
        for step in tl.static_range(stage):
            # Inline constexpr arithmetic: names bound inside an unrolled loop cannot stay constexpr.
            pairs = tl.reshape(x, [LENGTH // _pow2(stage - step), 2, _pow2(stage - 1 - step)])
            smaller = tl.reduce(pairs, 1, tl.standard._elementwise_min, keep_dims=True)
            larger = tl.reduce(pairs, 1, tl.standard._elementwise_max, keep_dims=True)
            second = tl.arange(0, 2)[None, :, None] == 1
            descending = ((tl.arange(0, LENGTH // _pow2(stage - step)) >> step) & 1)[:, None, None] == 1
            x = tl.reshape(tl.where(second != descending, larger, smaller), [LENGTH])
    return x


@triton.jit
def _stable_order(key, valid, rank, BITONIC_INPUT: tl.constexpr):
    """The ranks (distinct, below 2^31) in the ascending order of (``key``, rank), invalid lanes
    last. BITONIC_INPUT: the packed words already rise then fall, so a merge suffices."""
    key = tl.where(valid, key, tl.full(key.shape, 0xFFFFFFFF, tl.uint32))
    packed = (key.to(tl.uint64) << 32) | ((valid == 0).to(tl.uint64) << 31) | rank.to(tl.uint64)
    packed = _bitonic(packed, BITONIC_INPUT)
    return (packed & 0x7FFFFFFF).to(tl.int32)


@triton.jit
def _key_order(src_row, pos, valid, lane, KIND: tl.constexpr, FORMAT: tl.constexpr, DESCENDING: tl.constexpr):
    """The lanes of ``pos`` (positions in ``src_row``) in the stable ascending order of their keys, invalid
    lanes last. 64-bit keys take two stable passes, low half then high half."""
    high, low = _key_parts(tl.load(src_row + pos, mask=valid), KIND, FORMAT, DESCENDING)
    if KIND >= 3:
        first = _stable_order(low, valid, lane, False)
        pos_first = tl.gather(pos, first, 0)
        valid_first = tl.gather(valid.to(tl.int32), first, 0) != 0
        high_first, _ = _key_parts(tl.load(src_row + pos_first, mask=valid_first), KIND, FORMAT, DESCENDING)
        second = _stable_order(high_first, valid_first, lane, False)
        return tl.gather(first, second, 0)
    else:
        return _stable_order(high, valid, lane, False)


@triton.jit
def _segment_entries(perm_in, m, SEGMENT: tl.constexpr, LENGTH: tl.constexpr, HAS_PERM: tl.constexpr,
                     INDEX_64: tl.constexpr):
    """Program (row, seg)'s entries of its row's list of ``m`` candidates: (row, seg, lane, positions,
    valid), positions 0..m-1 or ``perm_in``'s entries (-1 meaning none), invalid lanes at position 0."""
    row = tl.program_id(0)
    seg = tl.program_id(1)
    if INDEX_64:
        row = row.to(tl.int64)
        seg = seg.to(tl.int64)
    lane = tl.arange(0, LENGTH)
    local = seg * SEGMENT + lane
    valid = (lane < SEGMENT) & (local < m)
    if HAS_PERM:
        pos = tl.load(perm_in + row * m + local, mask=valid, other=-1)
        valid = valid & (pos >= 0)
    else:
        pos = local.to(tl.int64)
    return row, seg, lane, tl.where(valid, pos, 0), valid


@triton.jit
def sort_segments(src, perm_in, index_out, values_out, src_row_len, m, out_row_len,
                  SEGMENT: tl.constexpr, LENGTH: tl.constexpr, K_OUT: tl.constexpr, HAS_PERM: tl.constexpr,
                  KIND: tl.constexpr, FORMAT: tl.constexpr, DESCENDING: tl.constexpr, WRITE_VALUES: tl.constexpr,
                  INDEX_64: tl.constexpr):
    """Program (row, seg) sorts entries seg*SEGMENT .. of the row's list of ``m`` candidates (the
    row's positions 0..m-1, or ``perm_in``'s entries, -1 meaning none) by the values of ``src`` at
    those positions, and writes the first K_OUT positions (-1 past the end) to ``index_out`` at
    seg*K_OUT of the row, and their values to ``values_out`` when WRITE_VALUES."""
    row, seg, lane, pos, valid = _segment_entries(perm_in, m, SEGMENT, LENGTH, HAS_PERM, INDEX_64)
    src_row = src + row * src_row_len
    order = _key_order(src_row, pos, valid, lane, KIND, FORMAT, DESCENDING)
    chosen = tl.gather(pos, order, 0)
    chosen_valid = tl.gather(valid.to(tl.int32), order, 0) != 0
    keep = (lane < K_OUT) & (seg * K_OUT + lane < out_row_len)  # a row's last segment may be short
    out_at = row * out_row_len + seg * K_OUT + lane
    tl.store(index_out + out_at, tl.where(chosen_valid, chosen, -1).to(tl.int64), mask=keep)
    if WRITE_VALUES:
        tl.store(values_out + out_at, tl.load(src_row + chosen, mask=keep & chosen_valid), mask=keep)


@triton.jit
def _kth_key(key, valid, need, KEY_BITS: tl.constexpr):
    """The smallest key T with at least ``need`` valid keys at or below it, found bit by bit from the top:
    a count over the tile a bit, no sort."""
    threshold = tl.full([], 0, key.dtype)
    bit = tl.full([], 1, key.dtype) << (KEY_BITS - 1)
    for _ in tl.static_range(KEY_BITS):
        # bit clear and every lower bit set: the largest key the threshold could be with this bit clear
        at_most = tl.sum((valid & (key <= (threshold | (bit - 1)))).to(tl.int32), 0)
        threshold = tl.where(at_most >= need, threshold, threshold | bit)
        bit = bit >> 1
    return threshold


@triton.jit
def select_segments(src, perm_in, index_out, values_out, src_row_len, m, out_row_len,
                    SEGMENT: tl.constexpr, LENGTH: tl.constexpr, K_OUT: tl.constexpr, K_LENGTH: tl.constexpr,
                    HAS_PERM: tl.constexpr, SORT_OUT: tl.constexpr, KIND: tl.constexpr, FORMAT: tl.constexpr,
                    DESCENDING: tl.constexpr, INDEX_64: tl.constexpr):
    """Program (row, seg) finds the K_OUT first, by key, of entries seg*SEGMENT .. of the row's list of
    ``m`` candidates (positions 0..m-1, or ``perm_in``'s entries, -1 meaning none) without sorting them:
    the K_OUT-th key by a bitwise search, then every key below it and the first of those equal to it,
    in list order. Their positions go to ``index_out`` at seg*K_OUT of the row in list order (-1 past
    the valid ones). SORT_OUT (one segment a row): those K_OUT are then sorted by key, stably (list order
    is position order), and written with their values: the row's top k."""
    row, seg, lane, pos, valid = _segment_entries(perm_in, m, SEGMENT, LENGTH, HAS_PERM, INDEX_64)
    src_row = src + row * src_row_len
    high, low = _key_parts(tl.load(src_row + pos, mask=valid), KIND, FORMAT, DESCENDING)
    if KIND >= 3:
        key = (high.to(tl.uint64) << 32) | low.to(tl.uint64)
        threshold = _kth_key(key, valid, tl.minimum(tl.sum(valid.to(tl.int32), 0), K_OUT), 64)
    else:
        key = high
        threshold = _kth_key(key, valid, tl.minimum(tl.sum(valid.to(tl.int32), 0), K_OUT), 32)
    below = valid & (key < threshold)
    equal = valid & (key == threshold)
    room = K_OUT - tl.sum(below.to(tl.int32), 0)  # taken from the equal keys, first positions first
    chosen = below | (equal & (tl.cumsum(equal.to(tl.int32), 0) <= room))
    slot = tl.cumsum(chosen.to(tl.int32), 0) - 1
    taken = tl.sum(chosen.to(tl.int32), 0)
    out_row = index_out + row * out_row_len + seg * K_OUT
    tl.store(out_row + slot, pos, mask=chosen)
    k_lane = tl.arange(0, K_LENGTH)
    inside = (k_lane < K_OUT) & (seg * K_OUT + k_lane < out_row_len)  # a row's last segment may be short
    tl.store(out_row + k_lane, tl.full([K_LENGTH], -1, tl.int64), mask=inside & (k_lane >= taken))
    if SORT_OUT:
        # every thread's stores are seen by the whole program past the barrier
        tl.debug_barrier()
        first = tl.load(out_row + k_lane, mask=inside, other=-1)
        first_valid = first >= 0
        first = tl.where(first_valid, first, 0)
        order = _key_order(src_row, first, first_valid, k_lane, KIND, FORMAT, DESCENDING)
        chosen_pos = tl.gather(first, order, 0)
        chosen_valid = tl.gather(first_valid.to(tl.int32), order, 0) != 0
        tl.debug_barrier()
        tl.store(out_row + k_lane, tl.where(chosen_valid, chosen_pos, -1).to(tl.int64), mask=inside)
        tl.store(values_out + row * out_row_len + k_lane, tl.load(src_row + chosen_pos, mask=inside & chosen_valid),
                 mask=inside)


@triton.jit
def _digit_of(high, low, LEVEL: tl.constexpr):
    """Digit LEVEL (8 bits, most significant first) of the key (high, low)."""
    if LEVEL < 4:
        return ((high >> (24 - 8 * LEVEL)) & 0xFF).to(tl.int32)
    else:
        return ((low >> (56 - 8 * LEVEL)) & 0xFF).to(tl.int32)


@triton.jit
def _matches_prefix(high, low, prefix_high, prefix_low, LEVEL: tl.constexpr):
    """Whether the key's digits above LEVEL equal the prefix found so far."""
    if LEVEL == 0:
        return high == high
    elif LEVEL < 4:
        return (high >> (32 - 8 * LEVEL)) == prefix_high
    elif LEVEL == 4:
        return high == prefix_high
    else:
        return (high == prefix_high) & ((low >> (64 - 8 * LEVEL)) == prefix_low)


# The k first elements of long rows, by a radix select spread over many programs per row. A row's state
# (four int64: the key digits found so far, high and low words, and how many elements lie below every
# key still in the running) lives in ``state``. Each 8-bit digit, most significant first, takes two
# launches: ``radix_histogram`` (program (chunk, row): its chunk's histogram of the digit among the
# elements that share the digits found so far) and ``radix_choose`` (program row: the digit of the k-th
# key, from the sum of its chunks' histograms). Then ``radix_count`` counts, per chunk, the elements
# below the k-th key and equal to it, and ``radix_gather`` writes their positions, in position order.

CHUNKS_PER_STEP = tl.constexpr(16)  # chunks' histograms or counts one step of a sum over chunks reads


@triton.jit
def _row_and_chunk(INDEX_64: tl.constexpr):
    """(row, chunk or block) of a program of a grid (chunks, rows): the chunks of a long row may pass the
    65535 a grid's second dimension allows; the caller launches at most that many rows at once."""
    chunk = tl.program_id(0)
    row = tl.program_id(1)
    if INDEX_64:
        row = row.to(tl.int64)
        chunk = chunk.to(tl.int64)
    return row, chunk


@triton.jit
def _prefix(state, row):
    """The digits of the row's k-th key found so far: (high word, low word) from ``state``."""
    return tl.load(state + row * 4).to(tl.uint32), tl.load(state + row * 4 + 1).to(tl.uint32)


@triton.jit
def _chunk_bounds(chunk, chunk_len, n):
    start = chunk * chunk_len
    return start, tl.minimum(n, start + chunk_len)


@triton.jit
def radix_histogram(src, hist, state, src_row_len, n, chunk_len, n_chunks, LEVEL: tl.constexpr, KIND: tl.constexpr,
                    FORMAT: tl.constexpr, DESCENDING: tl.constexpr, BLOCK: tl.constexpr, INDEX_64: tl.constexpr):
    """Program (chunk, row): hist[row, chunk] counts, by digit LEVEL, the chunk's elements whose higher
    digits are the row's prefix so far. Past the first level, the chunk's bin of the last digit chosen
    (its own entry of the level before) says how many are still in the running: a chunk with none
    skips its elements, which after a few levels is nearly every chunk."""
    row, chunk = _row_and_chunk(INDEX_64)
    prefix_high, prefix_low = _prefix(state, row)
    src_row = src + row * src_row_len
    lanes = tl.arange(0, BLOCK)
    counts = tl.zeros([256], tl.int32)
    hist_at = hist + (row * n_chunks + chunk) * 256
    start, stop = _chunk_bounds(chunk, chunk_len, n)
    if LEVEL > 0:
        if LEVEL <= 4:
            last_digit = prefix_high & 0xFF
        else:
            last_digit = prefix_low & 0xFF
        if tl.load(hist_at + last_digit) == 0:
            stop = start
    while start < stop:
        pos = start + lanes
        valid = pos < stop
        high, low = _key_parts(tl.load(src_row + pos, mask=valid), KIND, FORMAT, DESCENDING)
        alive = valid & _matches_prefix(high, low, prefix_high, prefix_low, LEVEL)
        counts += tl.histogram(_digit_of(high, low, LEVEL), 256, mask=alive)
        start += BLOCK
    tl.store(hist_at + tl.arange(0, 256), counts)


@triton.jit
def radix_choose(hist, state, k, n_chunks, LEVEL: tl.constexpr, INDEX_64: tl.constexpr):
    """Program row: digit LEVEL of the row's k-th key, from its chunks' histograms added in chunk order;
    the prefix gains the digit and ``below`` the elements of the bins before it. (The first level's
    histograms read the state but use none of it.)"""
    row = tl.program_id(0)
    if INDEX_64:
        row = row.to(tl.int64)
    bins = tl.arange(0, 256)
    counts = tl.zeros([256], tl.int32)
    first = tl.full([], 0, tl.int32)  # not from ``n_chunks``, which may arrive as the constant 1
    while first < n_chunks:  # integer sums: any grouping of the chunks gives the same counts
        chunks = first + tl.arange(0, CHUNKS_PER_STEP)
        block = tl.load(hist + (row * n_chunks + chunks)[:, None] * 256 + bins[None, :],
                        mask=(chunks < n_chunks)[:, None], other=0)
        counts += tl.sum(block, 0)
        first += CHUNKS_PER_STEP
    if LEVEL == 0:  # the first level starts the row's state: nothing needs it zeroed before
        below = tl.full([], 0, tl.int32)
    else:
        below = tl.load(state + row * 4 + 2).to(tl.int32)
    passed = below + tl.cumsum(counts, 0) < k  # bins wholly before the k-th key
    digit = tl.sum(passed.to(tl.int32), 0).to(tl.int64)
    tl.store(state + row * 4 + 2, (below + tl.sum(tl.where(passed, counts, 0), 0)).to(tl.int64))
    word = state + row * 4 + LEVEL // 4  # levels 0-3 fill the high word, 4-7 the low one
    if LEVEL % 4 == 0:  # a word's first digit starts it
        tl.store(word, digit)
    else:
        tl.store(word, ((tl.load(word) << 8) | digit) & 0xFFFFFFFF)
    if LEVEL == 0:
        tl.store(state + row * 4 + 1, digit * 0)


@triton.jit
def _below_and_equal(src_row, pos, stop, prefix_high, prefix_low, KIND: tl.constexpr, FORMAT: tl.constexpr,
                     DESCENDING: tl.constexpr):
    """Which of the row's elements at ``pos`` (those before ``stop``) have keys below the k-th key
    (prefix_high, prefix_low), and which equal it."""
    valid = pos < stop
    high, low = _key_parts(tl.load(src_row + pos, mask=valid), KIND, FORMAT, DESCENDING)
    if KIND >= 3:
        below = valid & ((high < prefix_high) | ((high == prefix_high) & (low < prefix_low)))
        equal = valid & (high == prefix_high) & (low == prefix_low)
    else:  # a 32-bit key: ``low`` carries nothing (descending flips it to all ones)
        below = valid & (high < prefix_high)
        equal = valid & (high == prefix_high)
    return below, equal


@triton.jit
def radix_count(src, counts, state, src_row_len, n, chunk_len, n_chunks, KIND: tl.constexpr, FORMAT: tl.constexpr,
                DESCENDING: tl.constexpr, BLOCK: tl.constexpr, INDEX_64: tl.constexpr):
    """Program (chunk, row): counts[row, chunk] = (elements of the chunk below the k-th key, equal to it)."""
    row, chunk = _row_and_chunk(INDEX_64)
    prefix_high, prefix_low = _prefix(state, row)
    src_row = src + row * src_row_len
    lanes = tl.arange(0, BLOCK)
    below_count = tl.full([], 0, tl.int32)
    equal_count = tl.full([], 0, tl.int32)
    start, stop = _chunk_bounds(chunk, chunk_len, n)
    while start < stop:
        pos = start + lanes
        below, equal = _below_and_equal(src_row, pos, stop, prefix_high, prefix_low, KIND, FORMAT, DESCENDING)
        below_count += tl.sum(below.to(tl.int32), 0)
        equal_count += tl.sum(equal.to(tl.int32), 0)
        start += BLOCK
    at = (row * n_chunks + chunk) * 2
    tl.store(counts + at, below_count)
    tl.store(counts + at + 1, equal_count)


@triton.jit
def radix_gather(src, counts, state, candidates, src_row_len, n, k, chunk_len, n_chunks, KIND: tl.constexpr,
                 FORMAT: tl.constexpr, DESCENDING: tl.constexpr, BLOCK: tl.constexpr, INDEX_64: tl.constexpr):
    """Program (chunk, row) writes to ``candidates`` (k per row) the positions of its chunk's elements
    among the row's k first in key order: every element below the k-th key, then the first elements (by
    position) equal to it; both in position order, after those of the chunks before. A chunk with none
    of them (``counts`` from radix_count), nearly every chunk when k is small, reads nothing more, and a
    step with none skips the scans that rank them."""
    row, chunk = _row_and_chunk(INDEX_64)
    prefix_high, prefix_low = _prefix(state, row)
    below_total = tl.load(state + row * 4 + 2).to(tl.int32)
    taken_below = tl.full([], 0, tl.int32)
    seen_equal = tl.full([], 0, tl.int32)
    first = tl.full([], 0, tl.int32)
    start, stop = _chunk_bounds(chunk, chunk_len, n)
    mine = (row * n_chunks + chunk) * 2
    if tl.load(counts + mine) + tl.load(counts + mine + 1) == 0:
        first = chunk
        stop = start
    while first < chunk:
        before = first + tl.arange(0, CHUNKS_PER_STEP)
        at = (row * n_chunks + before) * 2
        taken_below += tl.sum(tl.load(counts + at, mask=before < chunk, other=0), 0)
        seen_equal += tl.sum(tl.load(counts + at + 1, mask=before < chunk, other=0), 0)
        first += CHUNKS_PER_STEP
    src_row = src + row * src_row_len
    out_row = candidates + row * k
    lanes = tl.arange(0, BLOCK)
    while start < stop:
        pos = start + lanes
        below, equal = _below_and_equal(src_row, pos, stop, prefix_high, prefix_low, KIND, FORMAT, DESCENDING)
        below_here = tl.sum(below.to(tl.int32), 0)
        equal_here = tl.sum(equal.to(tl.int32), 0)
        if below_here + equal_here > 0:
            below_rank = taken_below + tl.cumsum(below.to(tl.int32), 0) - 1
            equal_rank = seen_equal + tl.cumsum(equal.to(tl.int32), 0) - 1
            tl.store(out_row + below_rank, pos.to(tl.int64), mask=below)
            tl.store(out_row + below_total + equal_rank, pos.to(tl.int64),
                     mask=equal & (equal_rank < k - below_total))
        taken_below += below_here
        seen_equal += equal_here
        start += BLOCK


# Long rows sort by LSD radix passes over 4-bit digits of the order-preserving key (at most 8 passes for
# 32-bit keys, 16 for 64-bit), the pass's bit offset ``shift`` an ordinary argument (one compiled kernel
# serves every pass). Program (block, row) of a pass handles BLOCK consecutive elements:
# ``radix_sort_histogram`` counts its digits into hist[row, digit, block]; ``radix_sort_offsets`` scans a
# digit's counts across the blocks, a segment of them a program (after ``radix_sort_segment_totals``;
# both take the number of digit values, so they serve the wider digits of ``sort_warp.py`` too);
# ``radix_sort_scatter`` moves every element to its digit's start in the row (the counts of the lower
# digits), plus its block's start among that digit's elements, plus its rank among the block's elements
# of that digit. Each pass is stable, so the sort is.
RADIX = tl.constexpr(16)


@triton.jit
def _radix_digit(v, shift, KIND: tl.constexpr, FORMAT: tl.constexpr, DESCENDING: tl.constexpr):
    """The 4-bit digit ``shift`` bits up the order-preserving key of ``v`` (a 64-bit key's low word
    holds shifts 0..28, its high word 32..60)."""
    high, low = _key_parts(v, KIND, FORMAT, DESCENDING)
    if KIND >= 3:
        word = tl.where(shift < 32, low, high)
    else:
        word = high
    return ((word >> (shift % 32).to(tl.uint32)) & 0xF).to(tl.int32)


@triton.jit
def radix_sort_histogram(values, hist, n, n_blocks, shift, KIND: tl.constexpr, FORMAT: tl.constexpr,
                         DESCENDING: tl.constexpr, BLOCK: tl.constexpr, INDEX_64: tl.constexpr):
    """Program (block, row): hist[row, d, block] = how many of the block's elements have digit d."""
    row, block = _row_and_chunk(INDEX_64)
    pos = block * BLOCK + tl.arange(0, BLOCK)
    valid = pos < n
    digits = _radix_digit(tl.load(values + row * n + pos, mask=valid), shift, KIND, FORMAT, DESCENDING)
    counts = tl.histogram(digits, RADIX, mask=valid)
    tl.store(hist + (row * RADIX + tl.arange(0, RADIX)) * n_blocks + block, counts)


@triton.jit
def radix_sort_segment_totals(hist, segment_totals, n_blocks, n_segments, BLOCK: tl.constexpr,
                              DIGITS: tl.constexpr, INDEX_64: tl.constexpr):
    """Program (d * n_segments + s, row): segment_totals[row, d, s] = the row's elements of digit d in
    blocks s * BLOCK up to (s + 1) * BLOCK."""
    row, program = _row_and_chunk(INDEX_64)
    digit = program // n_segments
    segment = program % n_segments
    at = segment * BLOCK + tl.arange(0, BLOCK)
    counts = tl.load(hist + (row * DIGITS + digit) * n_blocks + at, mask=at < n_blocks, other=0)
    tl.store(segment_totals + (row * DIGITS + digit) * n_segments + segment,
             tl.sum(counts.to(segment_totals.dtype.element_ty), 0))


@triton.jit
def radix_sort_offsets(hist, segment_totals, offsets, totals, n_blocks, n_segments, BLOCK: tl.constexpr,
                       SEGMENTS: tl.constexpr, DIGITS: tl.constexpr, INDEX_64: tl.constexpr):
    """Program (d * n_segments + s, row): offsets[row, d, b] = the row's elements of digit d in the blocks
    before b, for the BLOCK blocks of segment s: the digit's totals of the segments before s
    (``radix_sort_segment_totals``; SEGMENTS >= n_segments) plus a scan of the segment's own counts. The
    last segment's program writes totals[row, d]. Every segment's scan runs at once, not one after
    another in a program a digit."""
    row, program = _row_and_chunk(INDEX_64)
    digit = program // n_segments
    segment = program % n_segments
    earlier = tl.arange(0, SEGMENTS)
    carry = tl.sum(tl.load(segment_totals + (row * DIGITS + digit) * n_segments + earlier, mask=earlier < segment,
                           other=0).to(offsets.dtype.element_ty), 0)
    line = (row * DIGITS + digit) * n_blocks
    at = segment * BLOCK + tl.arange(0, BLOCK)
    inside = at < n_blocks
    counts = tl.load(hist + line + at, mask=inside, other=0).to(offsets.dtype.element_ty)
    tl.store(offsets + line + at, carry + tl.cumsum(counts, 0) - counts, mask=inside)
    if segment == n_segments - 1:
        tl.store(totals + row * DIGITS + digit, carry + tl.sum(counts, 0))


@triton.jit
def _rank_among_equal_digits(digits):
    """For each lane, how many lanes before it hold its digit (RADIX: none). The running counts of all
    sixteen digits ride in four scans, four digits to a 64-bit word in 16-bit fields (blocks of up to
    65535 elements), so the rank costs a few operations a lane rather than a sort of the block."""
    rank = digits * 0
    field = ((digits % 4) * 16).to(tl.uint64)
    for group in tl.static_range(4):
        mine = digits // 4 == group
        running = tl.cumsum(tl.where(mine, tl.full(digits.shape, 1, tl.uint64) << field, 0).to(tl.uint64), 0)
        rank = tl.where(mine, ((running >> field) & 0xFFFF).to(tl.int32) - 1, rank)
    return rank


@triton.jit
def radix_sort_scatter(values, indices, values_out, indices_out, offsets, totals, n, n_blocks, shift,
                       HAS_INDICES: tl.constexpr, KIND: tl.constexpr, FORMAT: tl.constexpr,
                       DESCENDING: tl.constexpr, BLOCK: tl.constexpr, INDEX_64: tl.constexpr):
    """Program (block, row) moves its elements (and their positions in the unsorted row: ``indices``, or
    with no HAS_INDICES the positions themselves) to where ``offsets`` and ``totals`` put its digits,
    plus their ranks among the block's elements of the same digit."""
    row, block = _row_and_chunk(INDEX_64)
    pos = block * BLOCK + tl.arange(0, BLOCK)
    valid = pos < n
    v = tl.load(values + row * n + pos, mask=valid)
    digits = tl.where(valid, _radix_digit(v, shift, KIND, FORMAT, DESCENDING), RADIX)
    bins = tl.arange(0, RADIX)
    row_totals = tl.load(totals + row * RADIX + bins)
    starts = tl.load(offsets + (row * RADIX + bins) * n_blocks + block) + tl.cumsum(row_totals, 0) - row_totals
    at = row * n + tl.gather(starts, tl.where(valid, digits, 0), 0) + _rank_among_equal_digits(digits)
    if HAS_INDICES:
        index = tl.load(indices + row * n + pos, mask=valid)
    else:
        index = pos
    tl.store(values_out + at, v, mask=valid)
    tl.store(indices_out + at, index, mask=valid)


@triton.jit
def search_sorted(sorted_seq, values, out, n_values, seq_len, values_per_row, seq_row_stride,
                  KIND: tl.constexpr, FORMAT: tl.constexpr, RIGHT: tl.constexpr, STEPS: tl.constexpr,
                  INDEX_64: tl.constexpr, BLOCK: tl.constexpr):
    """For each value, the insertion point in its row of the ascending ``sorted_seq``: the first
    position whose element is >= the value (> with RIGHT), by binary search over the keys."""
    pid = tl.program_id(0)
    if INDEX_64:
        idx = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    else:
        idx = pid * BLOCK + tl.arange(0, BLOCK)
    valid = idx < n_values
    row = idx // values_per_row
    base = sorted_seq + row * seq_row_stride
    v_high, v_low = _key_parts(tl.load(values + idx, mask=valid), KIND, FORMAT, False)
    lo = idx * 0
    hi = idx * 0 + seq_len
    for _ in tl.static_range(STEPS):
        active = lo < hi
        mid = (lo + hi) // 2
        e_high, e_low = _key_parts(tl.load(base + mid, mask=valid & active), KIND, FORMAT, False)
        if RIGHT:
            go_right = (e_high < v_high) | ((e_high == v_high) & (e_low <= v_low))
        else:
            go_right = (e_high < v_high) | ((e_high == v_high) & (e_low < v_low))
        lo = tl.where(active & go_right, mid + 1, lo)
        hi = tl.where(active & (go_right == 0), mid, hi)
    tl.store(out + idx, lo.to(tl.int64), mask=valid)
