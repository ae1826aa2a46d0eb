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
