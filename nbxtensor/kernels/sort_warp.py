"""Radix sort passes for CUDA GPUs, written in Gluon (Triton's layout-explicit dialect) so that a block's
elements sit one to a lane: a warp then ranks 32 of them at once with vote ballots, where the portable
kernels in ``sort.py`` rank through four 64-bit scans of the block. One warp a program, R elements a lane
(a block of 32 * R), element (r, lane) at r * 32 + lane. Keys of 32-bit kinds; 4-bit digits, the same
passes, hist and offsets layout as ``sort.py``, so a pass's three launches may mix the two.
"""
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

RADIX = gl.constexpr(16)


@gluon.jit
def _ballot(bit):
    """Each lane gets the mask of its warp's lanes whose ``bit`` (0 or 1) is set, register by register."""
    return gl.inline_asm_elementwise("{ .reg .pred p; setp.ne.b32 p, $1, 0; vote.sync.ballot.b32 $0, p, -1; }",
                                     "=r,r", [bit], dtype=gl.int32, is_pure=False, pack=1)


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
def _digit(v, shift, KIND: gl.constexpr, DESCENDING: gl.constexpr):
    """The 4-bit digit ``shift`` bits up the order-preserving key of a 32-bit ``v`` (as ``sort._key_parts``:
    floats by their bits with the sign folded, -0.0 as 0.0, NaN largest; signed with the sign flipped)."""
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
    return ((key >> shift.to(gl.uint32)) & 0xF).to(gl.int32)


@gluon.jit
def _digit_masks(digit, lane):
    """(lanes of the register holding the lane's own digit, lanes holding the digit equal to the lane's
    number) from the four bit ballots of each register."""
    mine = gl.full(digit.shape, -1, gl.int32, digit.type.layout)
    numbered = mine
    for k in gl.static_range(4):
        ballot = _ballot((digit >> k) & 1)
        mine = mine & gl.where(((digit >> k) & 1) != 0, ballot, ~ballot)
        numbered = numbered & gl.where(((lane >> k) & 1) != 0, ballot, ~ballot)
    return mine, numbered


@gluon.jit
def _block(values, row, n, shift, KIND: gl.constexpr, DESCENDING: gl.constexpr, W: gl.constexpr, R: gl.constexpr):
    """The program's W blocks (one a warp), as (warp, register row, lane) tensors."""
    layout: gl.constexpr = gl.BlockedLayout([1, R, 1], [1, 1, 32], [W, 1, 1], [2, 1, 0])
    plane: gl.constexpr = gl.SliceLayout(1, layout)  # (warp, lane)
    warps = gl.arange(0, W, layout=gl.SliceLayout(1, plane))
    regs = gl.arange(0, R, layout=gl.SliceLayout(0, gl.SliceLayout(2, layout)))
    lanes = gl.arange(0, 32, layout=gl.SliceLayout(0, plane))
    blocks = gl.program_id(0) * W + warps
    lane = gl.expand_dims(gl.expand_dims(warps, 1) * 0 + gl.expand_dims(lanes, 0), 1) \
        + gl.expand_dims(gl.expand_dims(regs, 0), 2) * 0
    pos = gl.expand_dims(gl.expand_dims(blocks * (32 * R), 1), 1) + gl.expand_dims(gl.expand_dims(regs, 0), 2) * 32 \
        + gl.expand_dims(gl.expand_dims(lanes, 0), 1)
    valid = pos < n
    v = gl.load(values + row * n + pos, mask=valid)
    # padding lanes come after every real element of the block, so their digit ranks no real one
    digit = gl.where(valid, _digit(v, shift, KIND, DESCENDING), 0)
    mine, numbered = _digit_masks(digit, lane)
    # lane d < 16 of register row r: how many of that row's elements have digit d (padding excluded)
    counts = gl.where(lane < RADIX, _popc(numbered & _ballot(valid.to(gl.int32))), 0)
    lanes_2d = gl.expand_dims(warps, 1) * 0 + gl.expand_dims(lanes, 0)
    blocks_2d = gl.expand_dims(blocks, 1) + lanes_2d * 0
    return blocks_2d, lanes_2d, lane, pos, valid, v, digit, mine, counts


@gluon.jit
def radix_histogram_warp(values, hist, n, n_blocks, shift, KIND: gl.constexpr, DESCENDING: gl.constexpr,
                         W: gl.constexpr, R: gl.constexpr):
    """Program (p, row), warp w: hist[row, d, p * W + w] = how many of that block's elements have digit d."""
    row = gl.program_id(1)
    blocks, lanes, lane, pos, valid, v, digit, mine, counts = _block(values, row, n, shift, KIND, DESCENDING, W, R)
    gl.store(hist + (row * RADIX + lanes) * n_blocks + blocks, gl.sum(counts, 1),
             mask=(lanes < RADIX) & (blocks < n_blocks))


@gluon.jit
def radix_scatter_warp(values, indices, values_out, indices_out, offsets, totals, n, n_blocks, shift,
                       HAS_INDICES: gl.constexpr, KIND: gl.constexpr, DESCENDING: gl.constexpr, W: gl.constexpr,
                       R: gl.constexpr):
    """Program (p, row), warp w moves block p * W + w's elements (and positions) to where ``offsets`` and
    ``totals`` put its digits, plus each one's rank among the block's elements of its digit: the
    elements of its digit in earlier register rows (a scan down the rows, lane d holding digit d's
    counts) and in earlier lanes of its own row (a ballot)."""
    row = gl.program_id(1)
    blocks, lanes, lane, pos, valid, v, digit, mine, counts = _block(values, row, n, shift, KIND, DESCENDING, W, R)
    rank_in_row = _popc(mine & ((1 << lane) - 1))
    earlier_rows = gl.associative_scan(counts, 1, _add) - counts
    is_digit = (lanes < RADIX) & (blocks < n_blocks)
    row_totals = gl.load(totals + row * RADIX + lanes, mask=lanes < RADIX, other=0)
    digit_starts = _lanes_before(row_totals, lanes)
    block_starts = gl.load(offsets + (row * RADIX + lanes) * n_blocks + blocks, mask=is_digit, other=0) + digit_starts
    # lane d of row r: where the row's first element of digit d goes; each element reads its digit's lane
    first_place = gl.expand_dims(block_starts, 1) + earlier_rows
    at = row * n + _from_lane(first_place, digit) + rank_in_row
    if HAS_INDICES:
        index = gl.load(indices + row * n + pos, mask=valid)
    else:
        index = pos
    gl.store(values_out + at, v, mask=valid)
    gl.store(indices_out + at, index, mask=valid)


@gluon.jit
def _shared_store(offset, value, after):
    """st.shared of ``value`` (32 bits) at byte ``offset`` of the kernel's shared memory; returns 0, which
    later accesses take as an input so that they stay after it."""
    return gl.inline_asm_elementwise(
        "{ .reg .u32 a; mov.b32 a, global_smem; add.u32 a, a, $1; st.shared.b32 [a], $2; mov.u32 $0, 0; }",
        "=r,r,r,r", [offset, value, after], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _shared_load(offset, after):
    """bar.warp.sync, then ld.shared of 32 bits at byte ``offset`` of the kernel's shared memory."""
    return gl.inline_asm_elementwise(
        "{ .reg .u32 a; bar.warp.sync -1; mov.b32 a, global_smem; add.u32 a, a, $1; ld.shared.b32 $0, [a]; }",
        "=r,r,r", [offset, after], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def radix_scatter_warp_ordered(values, indices, values_out, indices_out, offsets, totals, n, n_blocks, shift,
                               HAS_INDICES: gl.constexpr, KIND: gl.constexpr, DESCENDING: gl.constexpr,
                               W: gl.constexpr, R: gl.constexpr):
    """``radix_scatter_warp``, but each warp first puts its block in digit order in its own stretch of
    shared memory (a stable local sort: slot = the digit's start in the block + the element's rank), then
    reads it back slot by slot, so that a register row's 32 lanes write a few runs of neighbouring
    addresses instead of sixteen scattered ones (CUB's block-local reorder, a warp a block). The shared
    memory is this kernel's only allocation, so it starts at ``global_smem``; the inline stores and loads
    address it directly (Gluon has no indexed store into shared memory)."""
    row = gl.program_id(1)
    blocks, lanes, lane, pos, valid, v, digit, mine, counts = _block(values, row, n, shift, KIND, DESCENDING, W, R)
    # written once through Gluon, so that Triton allocates it (at offset 0: the kernel's only allocation)
    # and declares ``global_smem``; the barrier keeps that write before the inline stores
    flat: gl.constexpr = gl.BlockedLayout([2 * R], [32], [W], [0])
    stage = gl.allocate_shared_memory(gl.int32, [2 * W * 32 * R], gl.SwizzledSharedLayout(1, 1, 1, [0]),
                                      gl.zeros([2 * W * 32 * R], gl.int32, flat))
    gl.thread_barrier()
    rank_in_row = _popc(mine & ((1 << lane) - 1))
    earlier_rows = gl.associative_scan(counts, 1, _add) - counts
    block_counts = gl.sum(counts, 1)
    local_starts = _lanes_before(block_counts, lanes)
    is_digit = (lanes < RADIX) & (blocks < n_blocks)
    row_totals = gl.load(totals + row * RADIX + lanes, mask=lanes < RADIX, other=0)
    block_starts = gl.load(offsets + (row * RADIX + lanes) * n_blocks + blocks, mask=is_digit, other=0) \
        + _lanes_before(row_totals, lanes)
    block_first = gl.expand_dims(blocks, 1) * (32 * R)
    order = pos - block_first  # the element's place in the block, and the slot its lane reads back
    in_block = gl.minimum(n - block_first, 32 * R)
    # the block's real elements fill slots below in_block; a padding lane (past the row's end, so at or
    # past in_block) stores to its own place, which no real element takes (the inline stores are unmasked)
    slot = gl.where(valid, _from_lane(gl.expand_dims(local_starts, 1) + earlier_rows, digit) + rank_in_row, order)
    # a warp's stretch: 32 * R values, then (after every warp's values) 32 * R positions
    warp_base = gl.expand_dims(blocks % W, 1) * (32 * R * 4)
    positions_base = W * 32 * R * 4
    if HAS_INDICES:
        index = gl.load(indices + row * n + pos, mask=valid)
    else:
        index = pos
    done = _shared_store(warp_base + slot * 4, v.to(gl.int32, bitcast=True), 0)
    done = _shared_store(positions_base + warp_base + slot * 4, index, done)
    ordered = _shared_load(warp_base + order * 4, done).to(v.dtype, bitcast=True)
    ordered_index = _shared_load(positions_base + warp_base + order * 4, done)
    present = order < in_block
    ordered_digit = gl.where(present, _digit(ordered, shift, KIND, DESCENDING), 0)
    # the place of the slot: its digit's start in the row, plus how far the slot is into the digit's run
    at = row * n + _from_lane(gl.expand_dims(block_starts - local_starts, 1) + order * 0, ordered_digit) + order
    gl.store(values_out + at, ordered, mask=present)
    gl.store(indices_out + at, ordered_index, mask=present)
    stage._keep_alive()
