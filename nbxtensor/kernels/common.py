"""Pieces every elementwise kernel shares."""
import triton
import triton.language as tl


@triton.jit
def program_elements(BLOCK: tl.constexpr, INDEX_64: tl.constexpr):
    """This program's BLOCK consecutive element indices: 32-bit unless an extent or offset can
    reach 2^31 (64-bit index arithmetic is slower on some GPUs)."""
    pid = tl.program_id(0)
    if INDEX_64:
        return pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    else:
        return pid * BLOCK + tl.arange(0, BLOCK)


@triton.jit
def strided_offset(idx, shape, strides, RANK: tl.constexpr, SKIP: tl.constexpr = -1):
    """The element offset of row-major index ``idx`` over ``shape`` laid out with ``strides``, dim SKIP
    left out (-1: none; the caller adds that dim's own index). Offsets of one index in several layouts
    share their divisions once the compiler has inlined the calls."""
    if RANK == 1:
        if SKIP != 0:
            return idx * strides[0]
    off = idx * 0
    rem = idx
    for d in tl.static_range(RANK - 1, -1, -1):
        if d != SKIP:
            off += (rem % shape[d]) * strides[d]
        rem = rem // shape[d]
    return off


@triton.jit
def spatial_coordinates(i, C, OD, OH, OW, CHANNELS_LAST: tl.constexpr):
    """(n, c, d, h, w) of flat element ``i`` of an (N, C, D, H, W) output, numbered in NCDHW order or,
    with CHANNELS_LAST, in NDHWC order."""
    if CHANNELS_LAST:
        c = i % C
        rest = i // C
        w = rest % OW
        rest = rest // OW
        h = rest % OH
        rest = rest // OH
        d = rest % OD
        n = rest // OD
    else:
        w = i % OW
        rest = i // OW
        h = rest % OH
        rest = rest // OH
        d = rest % OD
        rest = rest // OD
        c = rest % C
        n = rest // C
    return n, c, d, h, w



@triton.jit
def divide(n, d, magic, shift, INDEX_64: tl.constexpr):
    """(n // d, n % d) of non-negative ``n``: in 32 bits by a multiply and a shift with the host's
    ``magic``, ``shift`` (``lowering.division_magic(d)``) in place of a division's twenty-odd instructions;
    by a division under INDEX_64."""
    if INDEX_64:
        q = n // d
    else:
        wide = n.to(tl.uint32).to(tl.uint64) * magic.to(tl.uint32, bitcast=True).to(tl.uint64)
        q = tl.where(d == 1, n, (wide >> shift).to(n.dtype))  # a d Triton specialised to 1 folds away
    return q, n - q * d


@triton.jit
def output_tile(lines, C, OD, OH, OW, col_blocks, magic, step, CHANNELS_LAST: tl.constexpr, EVEN_COLS: tl.constexpr,
                INDEX_64: tl.constexpr, BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr, COL_STEPS: tl.constexpr):
    """(n, c, d, h, w, out_offset, mask) of this program's output tile of a dense (N, C, D, H, W) output,
    the coordinates each of shape [BLOCK_COLS, 1] (columns) or [1, BLOCK_ROWS] (rows): in NCDHW order
    BLOCK_ROWS rows (n, c, d, h) by BLOCK_COLS columns w, with CHANNELS_LAST BLOCK_ROWS pixels (n, d, h, w)
    by BLOCK_COLS channels. A program takes COL_STEPS such tiles side by side, ``step`` picks one (the
    rows' work, the same for each, is shared once the compiler has inlined them). ``lines`` is the number
    of rows (pixels), ``col_blocks`` the blocks of COL_STEPS * BLOCK_COLS columns a row takes (EVEN_COLS:
    each whole), ``magic`` the (magic, shift) pairs of the three divisors a row
    (pixel) index is split by (OH, OD, C; channels-last OW, OH, OD): the divisions run once a row (pixel),
    the columns are an arange. Lanes past the output's end take its last row (column), so every
    coordinate lies inside it and loads need no mask; ``mask`` is the stores'. Columns are the tile's
    first dim: where loads gather (no dim contiguous), Triton spreads a warp's threads along the first,
    so a warp reads and writes along a row."""
    pid = tl.program_id(0)
    if INDEX_64:
        pid = pid.to(tl.int64)
    row_block = pid // col_blocks
    row = (row_block * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS))[None, :]
    col = ((pid - row_block * col_blocks) * (COL_STEPS * BLOCK_COLS) + step * BLOCK_COLS
           + tl.arange(0, BLOCK_COLS))[:, None]
    across = C if CHANNELS_LAST else OW
    mask = tl.broadcast_to(row < lines, (BLOCK_COLS, BLOCK_ROWS))
    row = tl.minimum(row, lines - 1)
    if not EVEN_COLS:
        mask = mask & (col < across)
        col = tl.minimum(col, across - 1)
    out_offset = row * across + col
    if CHANNELS_LAST:
        rest, w = divide(row, OW, magic[0], magic[1], INDEX_64)
        rest, h = divide(rest, OH, magic[2], magic[3], INDEX_64)
        n, d = divide(rest, OD, magic[4], magic[5], INDEX_64)
        return n, col, d, h, w, out_offset, mask
    else:
        rest, h = divide(row, OH, magic[0], magic[1], INDEX_64)
        rest, d = divide(rest, OD, magic[2], magic[3], INDEX_64)
        n, c = divide(rest, C, magic[4], magic[5], INDEX_64)
        return n, c, d, h, col, out_offset, mask


@triton.jit
def tile_pointers(base, n, c, d, h, w, s_n, s_c, s_d, s_h, s_w, CHANNELS_LAST: tl.constexpr):
    """``base`` offset to element (n, c, d, h, w) of a tile from ``output_tile`` (or coordinates shaped as
    its), the rows' part of the offset summed on the [1, BLOCK_ROWS] vector. In NCDHW order a thread holds
    one column of several rows: its column's pointer is shared, each element adds its row's offset. In
    channels-last a thread holds one pixel's channels (or, where they are not vector loads, one channel
    of several pixels): each element adds one offset."""
    if CHANNELS_LAST:
        return base + ((n * s_n + d * s_d + h * s_h + w * s_w) + c * s_c)
    else:
        return (base + w * s_w) + (n * s_n + c * s_c + d * s_d + h * s_h)


@triton.jit
def last_to_arrive(counters, slot, arrivals):
    """Whether this program is the last of the ``arrivals`` programs that share counter ``slot`` of
    ``counters`` (``allocation.arrival_counters``: zero before the launch) to get here. Every thread's
    stores are made before the count is raised, whose release publishes them to the last program; that
    program (which acquires them: read them past L1, ``cache_modifier=".cg"``, as other multiprocessors
    wrote them) sets the counter back to zero for the next launch."""
    tl.debug_barrier()
    last = tl.atomic_add(counters + slot, 1, sem="acq_rel", scope="gpu") == arrivals - 1
    if last:
        tl.store(counters + slot, 0)
    return last
