"""Sliding blocks: im2col (F.unfold) copies each (kernel_h x kernel_w) block of an (N, C, H, W) input,
zero outside the input, into a column of (N, C * KH * KW, L); col2im (F.fold) sums those columns back
into (N, C, H, W). col2im gathers: each output pixel visits the kernel positions that land on it, so
the sums need no atomics and their order is fixed. One program takes BLOCK contiguous output elements."""
import triton
import triton.language as tl

from .common import program_elements
from .formats import decode, encode


@triton.jit
def im2col(src, dst, total, C, H, W, OW, L, KH, KW, SH, SW, PH, PW, DH, DW, s_n, s_c, s_h, s_w,
           INDEX_64: tl.constexpr, BLOCK: tl.constexpr):
    i = program_elements(BLOCK, INDEX_64)
    mask = i < total
    l = i % L
    rest = i // L
    rows = C * KH * KW
    row = rest % rows
    n = rest // rows
    c = row // (KH * KW)
    kh = (row // KW) % KH
    kw = row % KW
    h = (l // OW) * SH - PH + kh * DH
    w = (l % OW) * SW - PW + kw * DW
    inside = mask & (h >= 0) & (h < H) & (w >= 0) & (w < W)
    value = tl.load(src + n * s_n + c * s_c + h * s_h + w * s_w, mask=inside, other=0)
    tl.store(dst + i, value, mask=mask)


@triton.jit
def col2im(src, dst, total, C, H, W, OH, OW, SH, SW, PH, PW, DH, DW, s_n, s_r, s_l,
           KH: tl.constexpr, KW: tl.constexpr, COMPUTE: tl.constexpr, SRC_FORMAT: tl.constexpr,
           DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr,
           INDEX_64: tl.constexpr, BLOCK: tl.constexpr):
    """Output pixel (h, w) takes kernel position (kh, kw) of block (oh, ow) where h + PH = oh * SH + kh * DH."""
    i = program_elements(BLOCK, INDEX_64)
    mask = i < total
    w = i % W
    rest = i // W
    h = rest % H
    rest = rest // H
    c = rest % C
    n = rest // C
    acc = tl.zeros([BLOCK], COMPUTE)
    base = src + n * s_n
    for kh in range(0, KH):
        th = h + PH - kh * DH
        oh = th // SH
        h_ok = (th >= 0) & (th % SH == 0) & (oh < OH)
        for kw in range(0, KW):
            tw = w + PW - kw * DW
            ow = tw // SW
            ok = mask & h_ok & (tw >= 0) & (tw % SW == 0) & (ow < OW)
            column = base + ((c * KH + kh) * KW + kw) * s_r + (oh * OW + ow) * s_l
            acc += decode(tl.load(column, mask=ok, other=0), SRC_FORMAT).to(COMPUTE)
    tl.store(dst + i, encode(acc, dst.dtype.element_ty, DST_FORMAT, VIA_F32, False), mask=mask)
