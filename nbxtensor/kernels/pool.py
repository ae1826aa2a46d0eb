"""Window pooling over (N, C, D, H, W): max (with the input-plane index of the maximum) and average, with fixed windows (kernel, stride, padding, dilation) or adaptive ones (output cell o of
a dim of I inputs and O outputs covers [floor(o*I/O), ceil((o+1)*I/O))). 1-d and 2-d pooling run as
3-d with unit dims. A program takes a tile of the output in its memory order (``common.output_tile``):
rows by columns in NCDHW order, pixels by channels in channels-last, so both layouts are read and
written in place and a window's start, bounds and offsets are worked out once a row (pixel) or column,
not once an element."""
import triton
import triton.language as tl

from .common import output_tile, tile_pointers
from .formats import decode, encode

# KIND: the kernel compares with the literals (globals it reads must be constexprs)
KIND_MAX = 0
KIND_AVG = 1


@triton.jit
def _window(o, size, kernel, stride, pad, ADAPTIVE: tl.constexpr, out_size):
    """The first input position of output cell ``o``'s window, and for adaptive windows its end."""
    if ADAPTIVE:
        return (o * size) // out_size, ((o + 1) * size + out_size - 1) // out_size
    else:
        start = o * stride - pad
        return start, tl.minimum(start + kernel, size + pad)


@triton.jit
def _tap(start, k, dilation, size, end, ADAPTIVE: tl.constexpr, CLAMPED: tl.constexpr):
    """(position, whether it is read) of tap ``k`` of a window. CLAMPED: a position outside the input
    (or past an adaptive window's end) reads the nearest one inside, a duplicate of a tap of the same
    window, which leaves a maximum and its first index as they are; every tap is read."""
    at = start + k * dilation
    if CLAMPED:
        if ADAPTIVE:
            return tl.minimum(at, end - 1), at == at
        else:
            return tl.minimum(tl.maximum(at, 0), size - 1), at == at
    else:
        ok = (at >= 0) & (at < size)
        if ADAPTIVE:
            ok = ok & (at < end)
        return at, ok


@triton.jit
def pool_window(src, dst, indices, lines, C, ID, IH, IW, OD, OH, OW, col_blocks, magic,
                s_n, s_c, s_d, s_h, s_w, SD, SH, SW, PD, PH, PW, DD, DH, DW, divisor,
                KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr, KIND: tl.constexpr, ADAPTIVE: tl.constexpr,
                CLAMPED: tl.constexpr, UNROLL: tl.constexpr, LOWEST: tl.constexpr, COUNT_PAD: tl.constexpr,
                HAS_DIVISOR: tl.constexpr, INTEGER: tl.constexpr, WITH_INDICES: tl.constexpr,
                CHANNELS_LAST: tl.constexpr, COMPUTE: tl.constexpr, SRC_FORMAT: tl.constexpr,
                DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr, EVEN_COLS: tl.constexpr, INDEX_64: tl.constexpr,
                BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr, COL_STEPS: tl.constexpr):
    """KD, KH, KW: the window's extent (adaptive: the longest window). Max takes a NaN over any number
    and, among equal values, the first; its index is (d * IH + h) * IW + w in the input's plane.
    CLAMPED (max with unit dilation, where every window holds an input): taps read clamped positions,
    unmasked. UNROLL: the window's loops unrolled (a window of few taps). LOWEST: the dtype's least
    value (-inf for floats), where a maximum starts. A program takes COL_STEPS tiles of
    ``common.output_tile`` side by side along the rows (``lines`` their count), which share the rows' work."""
    for step in tl.static_range(COL_STEPS):
        n, c, od, oh, ow, out_offset, mask = output_tile(lines, C, OD, OH, OW, col_blocks, magic, step,
                                                         CHANNELS_LAST, EVEN_COLS, INDEX_64, BLOCK_ROWS, BLOCK_COLS,
                                                         COL_STEPS)
        _pool_tile(src, dst, indices, n, c, od, oh, ow, out_offset, mask, ID, IH, IW, OD, OH, OW,
                   s_n, s_c, s_d, s_h, s_w, SD, SH, SW, PD, PH, PW, DD, DH, DW, divisor, KD, KH, KW, KIND, ADAPTIVE,
                   CLAMPED, UNROLL, LOWEST, COUNT_PAD, HAS_DIVISOR, INTEGER, WITH_INDICES, CHANNELS_LAST, COMPUTE,
                   SRC_FORMAT, DST_FORMAT, VIA_F32, INDEX_64)


@triton.jit
def _pool_tile(src, dst, indices, n, c, od, oh, ow, out_offset, mask, ID, IH, IW, OD, OH, OW,
               s_n, s_c, s_d, s_h, s_w, SD, SH, SW, PD, PH, PW, DD, DH, DW, divisor,
               KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr, KIND: tl.constexpr, ADAPTIVE: tl.constexpr,
               CLAMPED: tl.constexpr, UNROLL: tl.constexpr, LOWEST: tl.constexpr, COUNT_PAD: tl.constexpr,
               HAS_DIVISOR: tl.constexpr, INTEGER: tl.constexpr, WITH_INDICES: tl.constexpr,
               CHANNELS_LAST: tl.constexpr, COMPUTE: tl.constexpr, SRC_FORMAT: tl.constexpr,
               DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr, INDEX_64: tl.constexpr):
    """One output tile of ``pool_window``."""
    d0, d_end = _window(od, ID, KD, SD, PD, ADAPTIVE, OD)
    h0, h_end = _window(oh, IH, KH, SH, PH, ADAPTIVE, OH)
    w0, w_end = _window(ow, IW, KW, SW, PW, ADAPTIVE, OW)
    if KIND == 0:
        if WITH_INDICES:
            best = tl.zeros(mask.shape, COMPUTE)
            best_index = tl.full(mask.shape, -1, tl.int64 if INDEX_64 else tl.int32)
        else:
            best = tl.full(mask.shape, LOWEST, COMPUTE)
    else:
        acc = tl.zeros(mask.shape, COMPUTE)
    for kd in tl.range(0, KD, loop_unroll_factor=KD if UNROLL else 1):
        d, d_ok = _tap(d0, kd, DD, ID, d_end, ADAPTIVE, CLAMPED)
        for kh in tl.range(0, KH, loop_unroll_factor=KH if UNROLL else 1):
            h, h_ok = _tap(h0, kh, DH, IH, h_end, ADAPTIVE, CLAMPED)
            h_ok = h_ok & d_ok
            for kw in tl.range(0, KW, loop_unroll_factor=KW if UNROLL else 1):
                w, w_ok = _tap(w0, kw, DW, IW, w_end, ADAPTIVE, CLAMPED)
                at = tile_pointers(src, n, c, d, h, w, s_n, s_c, s_d, s_h, s_w, CHANNELS_LAST)
                if CLAMPED:
                    x = decode(tl.load(at), SRC_FORMAT).to(COMPUTE)
                else:
                    ok = h_ok & w_ok
                    if KIND == 0 and not WITH_INDICES:
                        x = decode(tl.load(at, mask=ok, other=LOWEST), SRC_FORMAT).to(COMPUTE)
                    else:
                        x = decode(tl.load(at, mask=ok, other=0), SRC_FORMAT).to(COMPUTE)
                if KIND == 0:
                    if WITH_INDICES:
                        take = (x > best) | (x != x) | (best_index < 0)
                        if not CLAMPED:
                            take = take & ok
                        best = tl.where(take, x, best)
                        best_index = tl.where(take, (d * IH + h) * IW + w, best_index)
                    elif INTEGER:
                        best = tl.maximum(best, x)
                    else:
                        best = tl.maximum(best, x, propagate_nan=tl.PropagateNan.ALL)
                else:
                    acc += x
    if KIND == 0:
        tl.store(dst + out_offset, encode(best, dst.dtype.element_ty, DST_FORMAT, VIA_F32, False), mask=mask)
        if WITH_INDICES:
            tl.store(indices + out_offset, best_index.to(tl.int64), mask=mask)
    else:
        if HAS_DIVISOR:
            extent = tl.full(mask.shape, divisor, tl.int32)
        elif ADAPTIVE or COUNT_PAD:  # the window's extent (clipped to the padded input; adaptive: its cells)
            extent = (d_end - d0) * (h_end - h0) * (w_end - w0)
        else:  # the inputs inside it (average pooling has no dilation)
            extent = ((tl.minimum(d_end, ID) - tl.maximum(d0, 0)) * (tl.minimum(h_end, IH) - tl.maximum(h0, 0))
                      * (tl.minimum(w_end, IW) - tl.maximum(w0, 0)))
        if INTEGER:  # torch divides an integer sum by C's truncating division
            value = acc // extent.to(COMPUTE)
        else:
            value = acc / extent.to(COMPUTE)
        tl.store(dst + out_offset, encode(value, dst.dtype.element_ty, DST_FORMAT, VIA_F32, False), mask=mask)
