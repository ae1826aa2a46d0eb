"""Window pooling over (N, C, D, H, W): max (with the input-plane index of the maximum) and average, with fixed windows (kernel, stride, padding, dilation) or adaptive ones (output cell o of
a dim of I inputs and O outputs covers [floor(o*I/O), ceil((o+1)*I/O))). 1-d and 2-d pooling run as
3-d with unit dims. One program takes BLOCK output elements in the output's memory order (channels
innermost for channels-last), so both layouts are read and written in place."""
import triton
import triton.language as tl

from .common import program_elements, spatial_coordinates
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
def pool_window(src, dst, indices, total, C, ID, IH, IW, OD, OH, OW,
                s_n, s_c, s_d, s_h, s_w, o_n, o_c, o_d, o_h, o_w,
                SD, SH, SW, PD, PH, PW, DD, DH, DW, divisor,
                KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr, KIND: tl.constexpr, ADAPTIVE: tl.constexpr,
                COUNT_PAD: tl.constexpr, HAS_DIVISOR: tl.constexpr, INTEGER: tl.constexpr,
                WITH_INDICES: tl.constexpr, CHANNELS_LAST: tl.constexpr, COMPUTE: tl.constexpr,
                SRC_FORMAT: tl.constexpr, DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr,
                INDEX_64: tl.constexpr, BLOCK: tl.constexpr):
    """KD, KH, KW: the window's extent (adaptive: the longest window). Max takes a NaN over any number
    and, among equal values, the first; its index is (d * IH + h) * IW + w in the input's plane."""
    i = program_elements(BLOCK, INDEX_64)
    mask = i < total
    n, c, od, oh, ow = spatial_coordinates(i, C, OD, OH, OW, CHANNELS_LAST)
    d0, d_end = _window(od, ID, KD, SD, PD, ADAPTIVE, OD)
    h0, h_end = _window(oh, IH, KH, SH, PH, ADAPTIVE, OH)
    w0, w_end = _window(ow, IW, KW, SW, PW, ADAPTIVE, OW)
    base = src + n * s_n + c * s_c
    if KIND == 0:
        best = tl.zeros([BLOCK], COMPUTE)
        best_index = tl.full([BLOCK], -1, tl.int64)
    else:
        acc = tl.zeros([BLOCK], COMPUTE)
        count = tl.zeros([BLOCK], tl.int32)
    for kd in range(0, KD):
        d = d0 + kd * DD
        d_ok = (d >= 0) & (d < ID)
        if ADAPTIVE:
            d_ok = d_ok & (d < d_end)
        for kh in range(0, KH):
            h = h0 + kh * DH
            h_ok = d_ok & (h >= 0) & (h < IH)
            if ADAPTIVE:
                h_ok = h_ok & (h < h_end)
            for kw in range(0, KW):
                w = w0 + kw * DW
                ok = mask & h_ok & (w >= 0) & (w < IW)
                if ADAPTIVE:
                    ok = ok & (w < w_end)
                x = decode(tl.load(base + d * s_d + h * s_h + w * s_w, mask=ok, other=0), SRC_FORMAT).to(COMPUTE)
                if KIND == 0:
                    take = ok & ((x > best) | (x != x) | (best_index < 0))
                    best = tl.where(take, x, best)
                    best_index = tl.where(take, ((d * IH + h) * IW + w).to(tl.int64), best_index)
                else:
                    acc += tl.where(ok, x, 0)
                    count += ok.to(tl.int32)
    out_offset = n * o_n + c * o_c + od * o_d + oh * o_h + ow * o_w
    if KIND == 0:
        tl.store(dst + out_offset, encode(best, dst.dtype.element_ty, DST_FORMAT, VIA_F32, False), mask=mask)
        if WITH_INDICES:
            tl.store(indices + out_offset, best_index, mask=mask)
    else:
        if HAS_DIVISOR:
            extent = tl.zeros([BLOCK], tl.int32) + divisor
        elif ADAPTIVE or COUNT_PAD:  # the window's extent (clipped to the padded input; adaptive: its cells)
            extent = (d_end - d0) * (h_end - h0) * (w_end - w0)
        else:
            extent = count
        if INTEGER:  # torch divides an integer sum by C's truncating division
            value = acc // extent.to(COMPUTE)
        else:
            value = acc / extent.to(COMPUTE)
        tl.store(dst + out_offset, encode(value, dst.dtype.element_ty, DST_FORMAT, VIA_F32, False), mask=mask)
