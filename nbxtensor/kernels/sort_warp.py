"""Radix sort passes for CUDA GPUs, written in Gluon (Triton's layout-explicit dialect) so that a block's
elements sit one to a lane: a warp then ranks 32 of them at once with vote ballots, where the portable
kernels in ``sort.py`` rank through four 64-bit scans of the block. A block is 32 * R elements, R a lane,
element (r, lane) at r * 32 + lane; a program takes NB blocks over its W warps (NB / W a warp, each its
own). Keys of 32-bit kinds in digits of BITS bits (4 or 5: lane d of a register row counts digit d);
hist and offsets are laid out as in ``sort.py`` (DIGITS = 2 ** BITS rows a key row), whose offsets
kernels serve these passes.
"""
from triton.experimental import gluon
from triton.experimental.gluon import language as gl


@gluon.jit
def _ballot(x, bit):
    """Each lane gets the mask of its warp's lanes whose ``x & bit`` is not zero, register by register."""
    return gl.inline_asm_elementwise(
        "{ .reg .pred p; .reg .b32 t; and.b32 t, $1, $2; setp.ne.b32 p, t, 0; vote.sync.ballot.b32 $0, p, -1; }",
        "=r,r,r", [x, gl.full(x.shape, bit, gl.int32, x.type.layout)], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _popc(x):
    return gl.inline_asm_elementwise("popc.b32 $0, $1;", "=r,r", [x], dtype=gl.int32, is_pure=True, pack=1)


@gluon.jit
def _from_lane(x, lane):
    """Each lane gets ``x`` of lane ``lane`` of its warp (same register)."""
    return gl.inline_asm_elementwise("shfl.sync.idx.b32 $0, $1, $2, 0x1f, -1;", "=r,r,r", [x, lane],
                                     dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _add(a, b):
    return a + b


@gluon.jit
def _lanes_before(x, lanes):
    """Each lane gets the sum of ``x`` over the lanes before it (five shuffles up, Kogge-Stone)."""
    running = x
    for k in gl.static_range(5):
        below = gl.inline_asm_elementwise("shfl.sync.up.b32 $0, $1, $2, 0, -1;", "=r,r,r",
                                          [running, gl.full(x.shape, 1 << k, gl.int32, x.type.layout)],
                                          dtype=gl.int32, is_pure=False, pack=1)
        running = gl.where(lanes >= (1 << k), running + below, running)
    return running - x


@gluon.jit
def _key(v, KIND: gl.constexpr, DESCENDING: gl.constexpr):
    """The order-preserving key of a 32-bit ``v``, as int32 bits (as ``sort._key_parts``: floats by their
    bits with the sign folded, -0.0 as 0.0, NaN largest; signed with the sign flipped; unsigned, which
    includes keys already made, as it is)."""
    if KIND == 0:
        f = v + 0.0
        bits = f.to(gl.uint32, bitcast=True)
        key = gl.where((bits >> 31) != 0, bits ^ 0xFFFFFFFF, bits | 0x80000000)
        key = gl.where(f != f, 0xFFFFFFFF, key).to(gl.uint32)
    elif KIND == 1:
        key = v.to(gl.uint32, bitcast=True) ^ 0x80000000
    else:
        key = v.to(gl.uint32, bitcast=True)
    if DESCENDING:
        key = key ^ 0xFFFFFFFF
    return key.to(gl.int32, bitcast=True)


@gluon.jit
def _value(key, KIND: gl.constexpr, DESCENDING: gl.constexpr):
    """(the value whose ``_key`` is ``key``, whether the key stands for more than one value: a float zero
    or NaN, which the key folds)."""
    k = key.to(gl.uint32, bitcast=True)
    if DESCENDING:
        k = k ^ 0xFFFFFFFF
    if KIND == 0:
        value = gl.where((k >> 31) != 0, k & 0x7FFFFFFF, k ^ 0xFFFFFFFF).to(gl.float32, bitcast=True)
        folded = (k == 0x80000000) | (k == 0xFFFFFFFF)
    else:
        value = (k ^ 0x80000000).to(gl.int32, bitcast=True)
        folded = k != k
    return value, folded


@gluon.jit
def _digit(key, shift, BITS: gl.constexpr):
    """The BITS-bit digit ``shift`` bits up a ``_key``."""
    return ((key.to(gl.uint32, bitcast=True) >> shift.to(gl.uint32)) & ((1 << BITS) - 1)).to(gl.int32)


@gluon.jit
def _digit_masks(digit, lane, BITS: gl.constexpr):
    """(lanes of the register holding the lane's own digit, lanes holding the digit equal to the lane's
    number) from the BITS bit ballots of each register. A lane keeps a ballot's bits where its own bit
    is set and the ballot's complement where it is clear: the ballot xor-ed with the bit spread to a
    word (all ones or zeros, by an arithmetic shift), complemented."""
    mine = gl.full(digit.shape, -1, gl.int32, digit.type.layout)
    numbered = mine
    for k in gl.static_range(BITS):
        ballot = _ballot(digit, 1 << k)
        mine = mine & ~(ballot ^ ((digit << (31 - k)) >> 31))
        numbered = numbered & ~(ballot ^ ((lane << (31 - k)) >> 31))
    return mine, numbered


@gluon.jit
def _block(values, row, n, NB: gl.constexpr, W: gl.constexpr, R: gl.constexpr):
    """The program's NB blocks, as (block, register row, lane) tensors: warp w holds blocks w, w + W, ...
    Returns (block, lane) planes of the block numbers and lanes; each element's lane, place in the row,
    and validity; the values."""
    layout: gl.constexpr = gl.BlockedLayout([1, R, 1], [1, 1, 32], [W, 1, 1], [2, 1, 0])
    plane: gl.constexpr = gl.SliceLayout(1, layout)  # (block, lane)
    warps = gl.arange(0, NB, layout=gl.SliceLayout(1, plane))
    regs = gl.arange(0, R, layout=gl.SliceLayout(0, gl.SliceLayout(2, layout)))
    lanes = gl.arange(0, 32, layout=gl.SliceLayout(0, plane))
    blocks = gl.program_id(0) * NB + warps
    lane = gl.expand_dims(gl.expand_dims(warps, 1) * 0 + gl.expand_dims(lanes, 0), 1) \
        + gl.expand_dims(gl.expand_dims(regs, 0), 2) * 0
    pos = gl.expand_dims(gl.expand_dims(blocks * (32 * R), 1), 1) + gl.expand_dims(gl.expand_dims(regs, 0), 2) * 32 \
        + gl.expand_dims(gl.expand_dims(lanes, 0), 1)
    valid = pos < n
    v = gl.load(values + row * n + pos, mask=valid)
    lanes_2d = gl.expand_dims(warps, 1) * 0 + gl.expand_dims(lanes, 0)
    blocks_2d = gl.expand_dims(blocks, 1) + lanes_2d * 0
    return blocks_2d, lanes_2d, lane, pos, valid, v


@gluon.jit
def _ranks(key, valid, lane, shift, BITS: gl.constexpr):
    """(digit of each ``_key``, lanes of each register holding the element's digit, and in lane
    d < 2 ** BITS of each register row the count of that row's elements of digit d)."""
    # padding lanes come after every real element of the block, so their digit ranks no real one
    digit = gl.where(valid, _digit(key, shift, BITS), 0)
    mine, numbered = _digit_masks(digit, lane, BITS)
    counts = gl.where(lane < (1 << BITS), _popc(numbered & _ballot(valid.to(gl.int32), 1)), 0)
    return digit, mine, counts


@gluon.jit
def radix_histogram_warp(values, hist, n, n_blocks, shift, KIND: gl.constexpr, DESCENDING: gl.constexpr,
                         BITS: gl.constexpr, NB: gl.constexpr, W: gl.constexpr, R: gl.constexpr):
    """Program (p, row): hist[row, d, b] = how many of block b's elements have digit d, for its NB blocks
    b = p * NB + i."""
    row = gl.program_id(1)
    blocks, lanes, lane, pos, valid, v = _block(values, row, n, NB, W, R)
    digit, mine, counts = _ranks(_key(v, KIND, DESCENDING), valid, lane, shift, BITS)
    gl.store(hist + (row * (1 << BITS) + lanes) * n_blocks + blocks, gl.sum(counts, 1),
             mask=(lanes < (1 << BITS)) & (blocks < n_blocks))


@gluon.jit
def _prefetch(pointers):
    """Starts bringing the lines at ``pointers`` into L2 and returns 0 without waiting: a load issued
    before the ballots would be moved after them by the assembler (it keeps registers free), so its
    latency would follow theirs instead of overlapping the values' load."""
    return gl.inline_asm_elementwise("prefetch.global.L2 [$1]; mov.u32 $0, 0;", "=r,l", [pointers], dtype=gl.int32,
                                     is_pure=False, pack=1)


@gluon.jit
def _shared_store(offset, value, after):
    """st.shared of ``value`` (32 bits) at byte ``offset`` of the kernel's shared memory; returns 0, which
    later accesses take as an input so that they stay after it."""
    return gl.inline_asm_elementwise(
        "{ .reg .u32 a; mov.b32 a, global_smem; add.u32 a, a, $1; st.shared.b32 [a], $2; mov.u32 $0, 0; }",
        "=r,r,r,r", [offset, value, after], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _shared_load_after(offset, after):
    """ld.shared of 32 bits at byte ``offset`` of the kernel's shared memory, after ``after`` (which a
    program-wide barrier has ordered after every warp's stores)."""
    return gl.inline_asm_elementwise(
        "{ .reg .u32 a; mov.b32 a, global_smem; add.u32 a, a, $1; ld.shared.b32 $0, [a]; }",
        "=r,r,r", [offset, after], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _program_barrier(after):
    """bar.sync of the whole program after ``after`` (one element a thread); returns 0."""
    return gl.inline_asm_elementwise("bar.sync 0; mov.u32 $0, 0;", "=r,r", [after], dtype=gl.int32,
                                     is_pure=False, pack=1)


@gluon.jit
def radix_scatter_warp(values, indices, values_out, indices_out, offsets, totals, original, n, n_blocks, shift,
                       FIRST: gl.constexpr, LAST: gl.constexpr, KIND: gl.constexpr, DESCENDING: gl.constexpr,
                       BITS: gl.constexpr, NB: gl.constexpr, W: gl.constexpr, R: gl.constexpr):
    """Program (p, row) moves its tile of NB blocks (one a warp) to where ``offsets`` and ``totals`` put
    each block's digits, stably. The tile is first put in digit order in shared memory (a stable local
    sort), then read back slot by slot, so that a register row's 32 lanes write runs of neighbouring
    addresses, about TILE / 2 ** BITS elements a digit, instead of scattered ones (CUB's tile reorder;
    writing straight from the ranks measured 1.5x slower on the H200 than a reorder a warp). An
    element's slot: its digit's start in the tile (the blocks' digit counts, exchanged through shared
    memory), plus the earlier blocks' elements of its digit, plus those in earlier register rows of its
    block (a scan down the rows, lane d holding digit d's counts) and earlier lanes of its row (a
    ballot). A block's digits go where ``offsets`` says; since the tile's blocks are consecutive, the
    tile's run of a digit goes where its first block's does. The shared memory is this kernel's only
    allocation, so it starts at ``global_smem``; the inline stores and loads address it directly (Gluon
    has no indexed store into shared memory), the digit counts in the words the keys take later.

    Between passes the elements travel as their ``_key``s: the FIRST pass reads values (of KIND, and
    makes the positions) and writes keys, the LAST writes values back, reading a float the key folds
    (a zero or NaN) from ``original`` at its position, so that every bit comes back."""
    gl.static_assert(NB == W, "the scatter's tile is one block a warp")
    row = gl.program_id(1)
    blocks, lanes, lane, pos, valid, v = _block(values, row, n, NB, W, R)
    if not FIRST:
        _prefetch(indices + row * n + gl.where(valid, pos, 0))
    is_digit = (lanes < (1 << BITS)) & (blocks < n_blocks)
    row_totals = gl.load(totals + row * (1 << BITS) + lanes, mask=lanes < (1 << BITS), other=0)
    block_offsets = gl.load(offsets + (row * (1 << BITS) + lanes) * n_blocks + blocks, mask=is_digit, other=0)
    if FIRST:
        key = _key(v, KIND, DESCENDING)
    else:
        key = v
    digit, mine, counts = _ranks(key, valid, lane, shift, BITS)
    if FIRST:
        index = pos
    else:
        index = gl.load(indices + row * n + pos, mask=valid)
    # written once through Gluon, so that Triton allocates it (at offset 0: the kernel's only allocation)
    # and declares ``global_smem``; the barrier keeps that write before the inline stores
    flat: gl.constexpr = gl.BlockedLayout([2 * R], [32], [W], [0])
    stage = gl.allocate_shared_memory(gl.int32, [2 * NB * 32 * R], gl.SwizzledSharedLayout(1, 1, 1, [0]),
                                      gl.zeros([2 * NB * 32 * R], gl.int32, flat))
    gl.thread_barrier()
    rank_in_row = _popc(mine & ((1 << lane) - 1))
    earlier_rows = gl.associative_scan(counts, 1, _add) - counts
    block_counts = gl.sum(counts, 1)
    warp = blocks % NB
    done = _program_barrier(_shared_store((warp * 32 + lanes) * 4, block_counts, 0))
    tile_counts = block_counts * 0
    before_block = tile_counts
    for j in gl.static_range(NB):
        counts_j = _shared_load_after((j * 32 + lanes) * 4, done)
        tile_counts = tile_counts + counts_j
        before_block = before_block + gl.where(warp > j, counts_j, 0)
    # every warp has read the counts before any overwrites them with keys
    done = _program_barrier(tile_counts + before_block)
    tile_starts = _lanes_before(tile_counts, lanes)
    # where the tile's run of each digit goes in the row, less the run's start in the tile
    runs_at = block_offsets + _lanes_before(row_totals, lanes) - before_block - tile_starts
    TILE: gl.constexpr = NB * 32 * R
    tile_first = gl.expand_dims(blocks - warp, 1) * (32 * R)
    order = pos - tile_first  # the element's place in the tile, and the slot its lane reads back
    in_tile = gl.minimum(n - tile_first, TILE)
    # the tile's real elements fill slots below in_tile; a padding lane (past the row's end, so at or
    # past in_tile) stores to its own place, which no real element takes (the inline stores are unmasked)
    slot = gl.where(valid, _from_lane(gl.expand_dims(tile_starts + before_block, 1) + earlier_rows, digit)
                    + rank_in_row, order)
    stored = _shared_store(slot * 4, key, gl.expand_dims(done, 1) + order * 0)
    stored = _shared_store(TILE * 4 + slot * 4, index, stored)
    done = gl.expand_dims(_program_barrier(gl.max(stored, 1)), 1)
    ordered = _shared_load_after(order * 4, done)
    ordered_index = _shared_load_after(TILE * 4 + order * 4, done)
    present = order < in_tile
    ordered_digit = gl.where(present, _digit(ordered, shift, BITS), 0)
    at = row * n + _from_lane(gl.expand_dims(runs_at, 1) + order * 0, ordered_digit) + order
    if LAST:
        value, folded = _value(ordered, KIND, DESCENDING)
        exact = gl.load(original + row * n + ordered_index, mask=present & folded)
        gl.store(values_out + at, gl.where(folded, exact, value), mask=present)
    else:
        gl.store(values_out + at, ordered, mask=present)
    gl.store(indices_out + at, ordered_index, mask=present)
    stage._keep_alive()
