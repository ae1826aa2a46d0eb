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

from .copy import _decode

KEY_FLOAT = 0  # any float of at most 32 bits, read through FORMAT
KEY_SIGNED = 1  # signed integers of at most 32 bits
KEY_UNSIGNED = 2  # unsigned integers and bool
KEY_FLOAT64 = 3
KEY_INT64 = 4


@triton.jit
def _key_parts(v, KIND: tl.constexpr, FORMAT: tl.constexpr, DESCENDING: tl.constexpr):
    """(high, low) uint32 halves of the order-preserving key of ``v`` (low is 0 for 32-bit kinds)."""
    if KIND == 0:
        f = _decode(v, FORMAT).to(tl.float32) + 0.0
        bits = f.to(tl.uint32, bitcast=True)
        key = tl.where((bits >> 31) != 0, bits ^ 0xFFFFFFFF, bits | 0x80000000)
        high = tl.where(f != f, 0xFFFFFFFF, key).to(tl.uint32)
        low = high * 0
    elif KIND == 1:
        high = v.to(tl.int32).to(tl.uint32, bitcast=True) ^ 0x80000000
        low = high * 0
    elif KIND == 2:
        high = v.to(tl.uint32)
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
def sort_segments(src, perm_in, index_out, values_out, src_row_len, m, out_row_len,
                  SEGMENT: tl.constexpr, LENGTH: tl.constexpr, K_OUT: tl.constexpr, HAS_PERM: tl.constexpr,
                  KIND: tl.constexpr, FORMAT: tl.constexpr, DESCENDING: tl.constexpr, WRITE_VALUES: tl.constexpr,
                  INDEX_64: tl.constexpr):
    """Program (row, seg) sorts entries seg*SEGMENT .. of the row's list of ``m`` candidates (the
    row's positions 0..m-1, or ``perm_in``'s entries, -1 meaning none) by the values of ``src`` at
    those positions, and writes the first K_OUT positions (-1 past the end) to ``index_out`` at
    seg*K_OUT of the row, and their values to ``values_out`` when WRITE_VALUES."""
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
    pos = tl.where(valid, pos, 0)
    src_row = src + row * src_row_len
    high, low = _key_parts(tl.load(src_row + pos, mask=valid), KIND, FORMAT, DESCENDING)
    if KIND >= 3:
        first = _stable_order(low, valid, lane, False)
        pos_first = tl.gather(pos, first, 0)
        valid_first = tl.gather(valid.to(tl.int32), first, 0) != 0
        high_first, _ = _key_parts(tl.load(src_row + pos_first, mask=valid_first), KIND, FORMAT, DESCENDING)
        second = _stable_order(high_first, valid_first, lane, False)
        order = tl.gather(first, second, 0)
    else:
        order = _stable_order(high, valid, lane, False)
    chosen = tl.gather(pos, order, 0)
    chosen_valid = tl.gather(valid.to(tl.int32), order, 0) != 0
    keep = (lane < K_OUT) & (seg * K_OUT + lane < out_row_len)  # a row's last segment may be short
    out_at = row * out_row_len + seg * K_OUT + lane
    tl.store(index_out + out_at, tl.where(chosen_valid, chosen, -1).to(tl.int64), mask=keep)
    if WRITE_VALUES:
        tl.store(values_out + out_at, tl.load(src_row + chosen, mask=keep & chosen_valid), mask=keep)


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
# launches: ``radix_histogram`` (program (row, chunk): its chunk's histogram of the digit among the
# elements that share the digits found so far) and ``radix_choose`` (program row: the digit of the k-th
# key, from the sum of its chunks' histograms). Then ``radix_count`` counts, per chunk, the elements
# below the k-th key and equal to it, and ``radix_gather`` writes their positions, in position order.

CHUNKS_PER_STEP = tl.constexpr(16)  # chunks' histograms or counts one step of a sum over chunks reads


@triton.jit
def _row_and_chunk(INDEX_64: tl.constexpr):
    row = tl.program_id(0)
    chunk = tl.program_id(1)
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
    """Program (row, chunk): hist[row, chunk] counts, by digit LEVEL, the chunk's elements whose higher
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
    row, _ = _row_and_chunk(INDEX_64)
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
    """Program (row, chunk): counts[row, chunk] = (elements of the chunk below the k-th key, equal to it)."""
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
    """Program (row, chunk) writes to ``candidates`` (k per row) the positions of its chunk's elements
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
# 32-bit keys, 16 for 64-bit). ``radix_sort_totals`` reads the keys once, before the passes, and counts
# every digit at every position a pass will read: totals[row, position, digit]. Then each pass is one
# launch of ``radix_sort_scatter``, its bit offset ``shift`` an ordinary argument (one compiled kernel
# serves every pass). A program of a pass takes a ticket, which names its block of BLOCK elements (so
# blocks start in order along the row), ranks its elements among the block's of the same digit, finds
# how many elements of each digit the row's earlier blocks hold by decoupled look-back over their status
# words, and moves every element to its digit's start in the row (the totals of the lower digits), plus
# that count, plus its rank. Each pass is stable, so the sort is.
RADIX = tl.constexpr(16)
STATUS_COUNT_BITS = tl.constexpr(48)  # a status word: its tag above a count of 48 bits
STATUS_COUNT_MASK = tl.constexpr((1 << STATUS_COUNT_BITS.value) - 1)
LOOK_BACK = tl.constexpr(16)  # earlier blocks' status words a look-back step reads at once


@triton.constexpr_function
def digit_positions(kind):
    """How many 4-bit digits a key of ``kind`` has: 8 (32-bit kinds) or 16 (64-bit)."""
    return 16 if kind >= KEY_FLOAT64 else 8


@triton.jit
def _radix_digit(high, low, shift, KIND: tl.constexpr):
    """The 4-bit digit ``shift`` bits up the key (high, low) (a 64-bit key's low word holds shifts
    0..28, its high word 32..60)."""
    if KIND >= 3:
        word = tl.where(shift < 32, low, high)
    else:
        word = high
    return ((word >> tl.cast(shift % 32, tl.uint32)) & 0xF).to(tl.int32)


@triton.jit
def _digit_counts(digits, valid):
    """How many of the ``valid`` lanes hold each digit ([RADIX] int32; digits 0..15, a multiple of 8
    lanes). Each lane's digit d becomes a one in nibble d of a 64-bit word; eight lanes' words are summed
    (a nibble counts to 15; which eight does not matter, so the compiler may take a thread's own), then
    the nibbles are unpacked and summed: 2.5 times fewer instructions than tl.histogram's ballots (PTX
    for sm_90)."""
    one_hot = tl.where(valid, tl.full(digits.shape, 1, tl.uint64) << (4 * digits).to(tl.uint64), 0)
    eights = tl.sum(tl.reshape(one_hot.to(tl.uint64), [digits.shape[0] // 8, 8], can_reorder=True), 1)
    nibbles = (4 * tl.arange(0, RADIX)).to(tl.uint64)
    return tl.sum(((eights[:, None] >> nibbles[None, :]) & 0xF).to(tl.int32), 0)


@triton.jit
def radix_sort_totals(values, totals, n, chunk_len, n_chunks, position_mask, KIND: tl.constexpr, FORMAT: tl.constexpr,
                      DESCENDING: tl.constexpr, BLOCK: tl.constexpr, INDEX_64: tl.constexpr):
    """Program p counts chunk p % n_chunks (chunk_len elements, BLOCK a step, a multiple of 8) of row
    p // n_chunks: for each digit position d set in ``position_mask`` (the digit 4 d bits up the key), it
    adds its elements of each digit to totals[row, d, digit] (int64, zeroed before). Integer atomic sums
    are exact in any order, so the totals are the same from run to run."""
    program = tl.program_id(0)
    if INDEX_64:
        program = program.to(tl.int64)
    row = program // n_chunks
    start, stop = _chunk_bounds(program % n_chunks, chunk_len, n)
    DIGITS: tl.constexpr = digit_positions(KIND)
    lines = tl.arange(0, DIGITS)
    bins = tl.arange(0, RADIX)
    lanes = tl.arange(0, BLOCK)
    counts = tl.zeros([DIGITS, RADIX], tl.int64)
    while start < stop:
        pos = start + lanes
        valid = pos < stop
        high, low = _key_parts(tl.load(values + row * n + pos, mask=valid), KIND, FORMAT, DESCENDING)
        for digit_position in tl.static_range(DIGITS):
            if ((position_mask >> digit_position) & 1) != 0:  # positions no pass reads are skipped
                here = _digit_counts(_radix_digit(high, low, 4 * digit_position, KIND), valid)
                counts += tl.where(lines[:, None] == digit_position, here[None, :], 0)
        start += BLOCK
    wanted = ((position_mask >> lines) & 1) != 0
    tl.atomic_add(totals + (row * DIGITS + lines[:, None]) * RADIX + bins[None, :], counts,
                  mask=tl.broadcast_to(wanted[:, None], [DIGITS, RADIX]), sem="relaxed")


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
def _look_back(status_row, block, counts, aggregate_tag):
    """How many elements of each digit the row's blocks before ``block`` hold, by decoupled look-back.
    The block first publishes its own ``counts`` in its sixteen status words (tagged ``aggregate_tag``;
    block 0 tags them inclusive, ``aggregate_tag + 1``: nothing comes before it). Then each digit's lane
    reads the words of the LOOK_BACK blocks before the nearest one it has not yet counted, at once: it
    adds the run of published words nearest to it, up to and including the nearest inclusive word (the
    counts of that block and all before it), which ends its walk; a word not yet published in this pass
    (another tag) stops the run there, and the lane reads again from it. Earlier blocks took earlier
    tickets, so they are running and publish without waiting on later ones. Last, the block publishes
    its inclusive counts. A word holds tag and count together, so each read sees a whole one and no
    order between words is needed; the reads are volatile, so a read in the loop goes to memory each
    time (not to a stale cache line, nor hoisted out of the loop)."""
    bins = tl.arange(0, RADIX)
    steps = tl.arange(0, LOOK_BACK)[:, None]  # 0: the nearest block not yet counted
    counts = counts.to(tl.int64)
    inclusive_tag = aggregate_tag + 1
    mine = status_row + block * RADIX + bins
    first_tag = tl.where(block == 0, inclusive_tag, aggregate_tag).to(tl.int64)
    tl.atomic_xchg(mine, (first_tag << STATUS_COUNT_BITS) | counts, sem="relaxed")
    prefix = tl.zeros([RADIX], tl.int64)
    nearest = block - 1 + bins * 0  # per digit lane: the nearest block it has not counted yet
    walking = nearest >= 0
    while tl.reduce(walking.to(tl.int32), 0, tl.standard._elementwise_max) != 0:  # tl.max's combine: see _bitonic
        look = nearest[None, :] - steps
        inside = walking[None, :] & (look >= 0)
        word = tl.load(status_row + look * RADIX + bins[None, :], mask=inside, other=0, volatile=True)
        tag = word >> STATUS_COUNT_BITS
        unpublished = inside & (tag != aggregate_tag) & (tag != inclusive_tag)
        first_gap = tl.min(tl.where(unpublished, steps, LOOK_BACK), 0)
        first_inclusive = tl.min(tl.where(inside & (tag == inclusive_tag), steps, LOOK_BACK), 0)
        ends = first_inclusive < first_gap
        taken = tl.where(ends, first_inclusive + 1, first_gap)
        prefix += tl.sum(tl.where(inside & (steps < taken[None, :]), word & STATUS_COUNT_MASK, 0), 0)
        nearest = nearest - taken
        walking = walking & (ends == 0)
    if block > 0:
        tl.atomic_xchg(mine, (inclusive_tag.to(tl.int64) << STATUS_COUNT_BITS) | (prefix + counts), sem="relaxed")
    return prefix


@triton.jit
def radix_sort_scatter(values, indices, values_out, indices_out, totals, status, tickets, n, n_blocks, shift,
                       HAS_INDICES: tl.constexpr, KIND: tl.constexpr, FORMAT: tl.constexpr,
                       DESCENDING: tl.constexpr, BLOCK: tl.constexpr, INDEX_64: tl.constexpr):
    """The pass over the digit ``shift`` bits up the key. A program takes the pass's next ticket t
    (``tickets`` holds a counter per digit position, zeroed before the sort), which names block
    t % n_blocks of row t // n_blocks, and moves the block's elements (and their positions in the
    unsorted row: ``indices``, or with no HAS_INDICES the positions themselves) to their digit's start
    (``totals``), plus the elements of that digit in the row's earlier blocks (look-back over ``status``,
    a word per row, block and digit, which every pass reuses: its tags name the pass), plus their ranks
    among the block's elements of the same digit."""
    digit_position = shift // 4
    ticket = tl.atomic_add(tickets + digit_position, 1, sem="relaxed")
    if not INDEX_64:
        ticket = ticket.to(tl.int32)
    row = ticket // n_blocks
    block = ticket % n_blocks
    pos = block * BLOCK + tl.arange(0, BLOCK)
    valid = pos < n
    v = tl.load(values + row * n + pos, mask=valid)
    high, low = _key_parts(v, KIND, FORMAT, DESCENDING)
    digit = _radix_digit(high, low, shift, KIND)
    # the block's counts go out first, so that later blocks' look-backs can pass over this one early;
    # the ranks come after the look-back: fewer registers live across its loop (72 against 96, sm_90)
    before = _look_back(status + row * n_blocks * RADIX, block, _digit_counts(digit, valid), 2 * digit_position + 1)
    bins = tl.arange(0, RADIX)
    row_totals = tl.load(totals + (row * digit_positions(KIND) + digit_position) * RADIX + bins)
    starts = (before + tl.cumsum(row_totals, 0) - row_totals).to(pos.dtype)
    rank = _rank_among_equal_digits(tl.where(valid, digit, RADIX))
    at = row * n + tl.gather(starts, digit, 0) + rank
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
