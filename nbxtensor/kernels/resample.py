"""Resampling over (N, C, D, H, W) with torch's source-coordinate arithmetic, in float32: nearest
(floor(o * scale)), nearest-exact (floor((o + 0.5) * scale)), linear in each dim that resamples, and
bicubic (A = -0.75, taps clamped to the border) in H and W. ``scale_*`` is input/output (or 1/scale_factor,
or (I-1)/(O-1) with align_corners) as the host computed it in float32. As in pool.py, a program of
``resample`` takes tiles of the output in its memory order (``common.output_tile``); the antialiased
kernel takes BLOCK output elements in that order."""
import triton
import triton.language as tl

from .common import output_tile, program_elements, spatial_coordinates, tile_pointers
from .formats import decode, encode

# MODE: the interpolation (the host passes the ``.value``)
MODE_NEAREST = tl.constexpr(0)
MODE_NEAREST_EXACT = tl.constexpr(1)
MODE_LINEAR = tl.constexpr(2)
MODE_CUBIC = tl.constexpr(3)
# antialiased bilinear and bicubic: their own kernel (resample_aa)
MODE_LINEAR_AA = tl.constexpr(4)
MODE_CUBIC_AA = tl.constexpr(5)

CUBIC_A = tl.constexpr(-0.75)


@triton.jit
def _nearest(o, scale, size, EXACT: tl.constexpr):
    if EXACT:
        at = (o.to(tl.float32) + 0.5) * scale
    else:
        at = o.to(tl.float32) * scale
    return tl.minimum(tl.floor(at).to(tl.int32), size - 1)


@triton.jit
def _source(o, scale, ALIGN_CORNERS: tl.constexpr, CUBIC: tl.constexpr):
    """The real source coordinate of output index ``o`` (torch's area_pixel_compute_source_index)."""
    if ALIGN_CORNERS:
        return scale * o.to(tl.float32)
    else:
        at = scale * (o.to(tl.float32) + 0.5) - 0.5
        if CUBIC:
            return at
        else:
            return tl.maximum(at, 0.0)


@triton.jit
def _linear_taps(o, scale, size, ALIGN_CORNERS: tl.constexpr):
    """(first index, second index, weight of the second) of linear interpolation."""
    at = _source(o, scale, ALIGN_CORNERS, False)
    first = at.to(tl.int32)  # at >= 0: truncation is floor
    second = tl.minimum(first + 1, size - 1)
    return first, second, at - first.to(tl.float32)


@triton.jit
def _cubic_weights(t):
    """The four weights of taps -1, 0, 1, 2 at fraction ``t``."""
    w0 = ((CUBIC_A * (t + 1.0) - 5.0 * CUBIC_A) * (t + 1.0) + 8.0 * CUBIC_A) * (t + 1.0) - 4.0 * CUBIC_A
    w1 = ((CUBIC_A + 2.0) * t - (CUBIC_A + 3.0)) * t * t + 1.0
    u = 1.0 - t
    w2 = ((CUBIC_A + 2.0) * u - (CUBIC_A + 3.0)) * u * u + 1.0
    v = 2.0 - t
    w3 = ((CUBIC_A * v - 5.0 * CUBIC_A) * v + 8.0 * CUBIC_A) * v - 4.0 * CUBIC_A
    return w0, w1, w2, w3


@triton.jit
def _load(src, n, c, d, h, w, s_n, s_c, s_d, s_h, s_w, CHANNELS_LAST: tl.constexpr, SRC_FORMAT: tl.constexpr):
    return decode(tl.load(tile_pointers(src, n, c, d, h, w, s_n, s_c, s_d, s_h, s_w, CHANNELS_LAST)),
                  SRC_FORMAT).to(tl.float32)


@triton.jit
def _clamped(i, size):
    return tl.minimum(tl.maximum(i, 0), size - 1)


@triton.jit
def _cubic_row(src, n, c, d, h, iw, IW, t0, t1, t2, t3, s_n, s_c, s_d, s_h, s_w, CHANNELS_LAST: tl.constexpr,
               SRC_FORMAT: tl.constexpr):
    """Cubic interpolation along W of row ``h``: taps iw - 1 .. iw + 2, clamped to the row, weighted t0..t3."""
    return (_load(src, n, c, d, h, _clamped(iw - 1, IW), s_n, s_c, s_d, s_h, s_w, CHANNELS_LAST, SRC_FORMAT) * t0
            + _load(src, n, c, d, h, _clamped(iw, IW), s_n, s_c, s_d, s_h, s_w, CHANNELS_LAST, SRC_FORMAT) * t1
            + _load(src, n, c, d, h, _clamped(iw + 1, IW), s_n, s_c, s_d, s_h, s_w, CHANNELS_LAST, SRC_FORMAT) * t2
            + _load(src, n, c, d, h, _clamped(iw + 2, IW), s_n, s_c, s_d, s_h, s_w, CHANNELS_LAST, SRC_FORMAT) * t3)


@triton.jit
def resample(src, dst, lines, C, ID, IH, IW, OD, OH, OW, col_blocks, magic,
             s_n, s_c, s_d, s_h, s_w, scale_d, scale_h, scale_w,
             MODE: tl.constexpr, ALIGN_CORNERS: tl.constexpr, RESAMPLE_D: tl.constexpr,
             RESAMPLE_H: tl.constexpr, RESAMPLE_W: tl.constexpr, CHANNELS_LAST: tl.constexpr,
             SRC_FORMAT: tl.constexpr, DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr,
             FLOAT_TO_INT: tl.constexpr, EVEN_COLS: tl.constexpr, INDEX_64: tl.constexpr,
             BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr, COL_STEPS: tl.constexpr):
    """RESAMPLE_D/H/W: whether linear interpolation runs in that dim (a dim that does not resample reads
    one tap). Nearest modes copy elements, so integer dtypes pass through them exactly. A program takes
    COL_STEPS tiles of ``common.output_tile`` side by side along the rows (``lines`` their count): each
    dim's source taps and weights are worked out on its row or column vector, an element combines them."""
    for step in tl.static_range(COL_STEPS):
        n, c, od, oh, ow, out_offset, mask = output_tile(lines, C, OD, OH, OW, col_blocks, magic, step,
                                                         CHANNELS_LAST, EVEN_COLS, INDEX_64, BLOCK_ROWS, BLOCK_COLS,
                                                         COL_STEPS)
        _resample_tile(src, dst + out_offset, mask, n, c, od, oh, ow, ID, IH, IW, s_n, s_c, s_d, s_h, s_w,
                       scale_d, scale_h, scale_w, MODE, ALIGN_CORNERS, RESAMPLE_D, RESAMPLE_H, RESAMPLE_W,
                       CHANNELS_LAST, SRC_FORMAT, DST_FORMAT, VIA_F32, FLOAT_TO_INT)


@triton.jit
def _resample_tile(src, out, mask, n, c, od, oh, ow, ID, IH, IW, s_n, s_c, s_d, s_h, s_w, scale_d, scale_h, scale_w,
                   MODE: tl.constexpr, ALIGN_CORNERS: tl.constexpr, RESAMPLE_D: tl.constexpr,
                   RESAMPLE_H: tl.constexpr, RESAMPLE_W: tl.constexpr, CHANNELS_LAST: tl.constexpr,
                   SRC_FORMAT: tl.constexpr, DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr,
                   FLOAT_TO_INT: tl.constexpr):
    """One output tile of ``resample``, written at ``out``."""
    if MODE == MODE_NEAREST or MODE == MODE_NEAREST_EXACT:
        d = _nearest(od, scale_d, ID, MODE == MODE_NEAREST_EXACT)
        h = _nearest(oh, scale_h, IH, MODE == MODE_NEAREST_EXACT)
        w = _nearest(ow, scale_w, IW, MODE == MODE_NEAREST_EXACT)
        tl.store(out, tl.load(tile_pointers(src, n, c, d, h, w, s_n, s_c, s_d, s_h, s_w, CHANNELS_LAST)), mask=mask)
    elif MODE == MODE_LINEAR:
        if RESAMPLE_W:
            w_a, w_b, lw = _linear_taps(ow, scale_w, IW, ALIGN_CORNERS)
        else:
            w_a, w_b, lw = ow, ow, 0.0
        if RESAMPLE_H:
            h_a, h_b, lh = _linear_taps(oh, scale_h, IH, ALIGN_CORNERS)
        else:
            h_a, h_b, lh = oh, oh, 0.0
        if RESAMPLE_D:
            d_a, d_b, ld = _linear_taps(od, scale_d, ID, ALIGN_CORNERS)
            value = _linear_plane(src, n, c, d_a, h_a, h_b, lh, w_a, w_b, lw, s_n, s_c, s_d, s_h, s_w, RESAMPLE_H,
                                  RESAMPLE_W, CHANNELS_LAST, SRC_FORMAT)
            far = _linear_plane(src, n, c, d_b, h_a, h_b, lh, w_a, w_b, lw, s_n, s_c, s_d, s_h, s_w, RESAMPLE_H,
                                RESAMPLE_W, CHANNELS_LAST, SRC_FORMAT)
            value = (1.0 - ld) * value + ld * far
        else:
            value = _linear_plane(src, n, c, od, h_a, h_b, lh, w_a, w_b, lw, s_n, s_c, s_d, s_h, s_w, RESAMPLE_H,
                                  RESAMPLE_W, CHANNELS_LAST, SRC_FORMAT)
        tl.store(out, encode(value, out.dtype.element_ty, DST_FORMAT, VIA_F32, FLOAT_TO_INT), mask=mask)
    else:  # MODE_CUBIC
        real_w = _source(ow, scale_w, ALIGN_CORNERS, True)
        real_h = _source(oh, scale_h, ALIGN_CORNERS, True)
        fw = tl.floor(real_w)
        fh = tl.floor(real_h)
        wt0, wt1, wt2, wt3 = _cubic_weights(real_w - fw)
        ht0, ht1, ht2, ht3 = _cubic_weights(real_h - fh)
        iw = fw.to(tl.int32)
        ih = fh.to(tl.int32)
        value = (_cubic_row(src, n, c, od, _clamped(ih - 1, IH), iw, IW, wt0, wt1, wt2, wt3, s_n, s_c, s_d, s_h, s_w,
                            CHANNELS_LAST, SRC_FORMAT) * ht0
                 + _cubic_row(src, n, c, od, _clamped(ih, IH), iw, IW, wt0, wt1, wt2, wt3, s_n, s_c, s_d, s_h, s_w,
                              CHANNELS_LAST, SRC_FORMAT) * ht1
                 + _cubic_row(src, n, c, od, _clamped(ih + 1, IH), iw, IW, wt0, wt1, wt2, wt3, s_n, s_c, s_d, s_h, s_w,
                              CHANNELS_LAST, SRC_FORMAT) * ht2
                 + _cubic_row(src, n, c, od, _clamped(ih + 2, IH), iw, IW, wt0, wt1, wt2, wt3, s_n, s_c, s_d, s_h, s_w,
                              CHANNELS_LAST, SRC_FORMAT) * ht3)
        tl.store(out, encode(value, out.dtype.element_ty, DST_FORMAT, VIA_F32, FLOAT_TO_INT), mask=mask)


@triton.jit
def _linear_plane(src, n, c, d, h_a, h_b, lh, w_a, w_b, lw, s_n, s_c, s_d, s_h, s_w, RESAMPLE_H: tl.constexpr,
                  RESAMPLE_W: tl.constexpr, CHANNELS_LAST: tl.constexpr, SRC_FORMAT: tl.constexpr):
    """Linear interpolation in H and W of one D plane, rows first as torch orders it."""
    near = _load(src, n, c, d, h_a, w_a, s_n, s_c, s_d, s_h, s_w, CHANNELS_LAST, SRC_FORMAT)
    if RESAMPLE_W:
        near = (1.0 - lw) * near + lw * _load(src, n, c, d, h_a, w_b, s_n, s_c, s_d, s_h, s_w, CHANNELS_LAST,
                                              SRC_FORMAT)
    if RESAMPLE_H:
        far = _load(src, n, c, d, h_b, w_a, s_n, s_c, s_d, s_h, s_w, CHANNELS_LAST, SRC_FORMAT)
        if RESAMPLE_W:
            far = (1.0 - lw) * far + lw * _load(src, n, c, d, h_b, w_b, s_n, s_c, s_d, s_h, s_w, CHANNELS_LAST,
                                                SRC_FORMAT)
        near = (1.0 - lh) * near + lh * far
    return near


@triton.jit
def _aa_filter(x, CUBIC: tl.constexpr):
    """The antialiasing filters: the triangle for bilinear, Keys' cubic (A = -0.5) for bicubic."""
    x = tl.abs(x)
    if CUBIC:
        near = ((-0.5 + 2.0) * x - (-0.5 + 3.0)) * x * x + 1.0
        far = ((-0.5 * x + 2.5) * x - 4.0) * x + 2.0
        return tl.where(x < 1.0, near, tl.where(x < 2.0, far, 0.0))
    else:
        return tl.where(x < 1.0, 1.0 - x, 0.0)


@triton.jit
def _aa_span(o, scale, support, size, MAX: tl.constexpr):
    """(first input, tap count, filter centre) of output ``o``: the inputs within ``support`` of the
    centre scale * (o + 0.5), at most MAX of them."""
    center = scale * (o.to(tl.float32) + 0.5)
    first = tl.maximum(tl.floor(center - support + 0.5), 0.0).to(tl.int32)
    end = tl.minimum((center + support + 0.5).to(tl.int32), size)
    return first, tl.minimum(tl.maximum(end - first, 0), MAX), center


@triton.jit
def _aa_total(first, count, center, invscale, MAX: tl.constexpr, CUBIC: tl.constexpr):
    total = tl.zeros(first.shape, tl.float32)
    for j in range(0, MAX):
        w = _aa_filter(((j + first).to(tl.float32) - center + 0.5) * invscale, CUBIC)
        total += tl.where(j < count, w, 0.0)
    return tl.where(total != 0, total, 1.0)


@triton.jit
def resample_aa(src, dst, total, C, IH, IW, OH, OW, s_n, s_c, s_h, s_w, o_n, o_c, o_h, o_w,
                scale_h, scale_w, support_h, support_w, invscale_h, invscale_w,
                MAX_H: tl.constexpr, MAX_W: tl.constexpr, CUBIC: tl.constexpr, CHANNELS_LAST: tl.constexpr,
                SRC_FORMAT: tl.constexpr, DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr, INDEX_64: tl.constexpr,
                BLOCK: tl.constexpr):
    """Antialiased bilinear / bicubic resampling of H and W (ATen's _upsample_*2d_aa): each output is the
    filter-weighted mean, weights normalised per dim, of the inputs within the filter's support, which
    widens by the scale when downsampling. Rows are filtered along W first, then combined along H."""
    i = program_elements(BLOCK, INDEX_64)
    mask = i < total
    n, c, od, oh, ow = spatial_coordinates(i, C, 1, OH, OW, CHANNELS_LAST)
    base = src + n * s_n + c * s_c
    h0, h_count, h_center = _aa_span(oh, scale_h, support_h, IH, MAX_H)
    w0, w_count, w_center = _aa_span(ow, scale_w, support_w, IW, MAX_W)
    h_total = _aa_total(h0, h_count, h_center, invscale_h, MAX_H, CUBIC)
    w_total = _aa_total(w0, w_count, w_center, invscale_w, MAX_W, CUBIC)
    value = tl.zeros([BLOCK], tl.float32)
    for a in range(0, MAX_H):
        wh = _aa_filter(((a + h0).to(tl.float32) - h_center + 0.5) * invscale_h, CUBIC) / h_total
        row_ok = mask & (a < h_count)
        row = tl.zeros([BLOCK], tl.float32)
        for b in range(0, MAX_W):
            ww = _aa_filter(((b + w0).to(tl.float32) - w_center + 0.5) * invscale_w, CUBIC) / w_total
            ok = row_ok & (b < w_count)
            x = decode(tl.load(base + (a + h0) * s_h + (b + w0) * s_w, mask=ok, other=0), SRC_FORMAT).to(tl.float32)
            row += tl.where(ok, ww * x, 0.0)
        value += tl.where(row_ok, wh * row, 0.0)
    out = dst + n * o_n + c * o_c + oh * o_h + ow * o_w
    tl.store(out, encode(value, dst.dtype.element_ty, DST_FORMAT, VIA_F32, False), mask=mask)
