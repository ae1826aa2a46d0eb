"""Sampling at grid points (grid_sampler_2d / _3d) and the affine grids that feed it, with ATen's
coordinate arithmetic: a normalised coordinate g in [-1, 1] maps to ((g + 1) / 2) * (size - 1) with
align_corners, else ((g + 1) * size - 1) / 2; border padding clips it into the input, reflection mirrors it
about the edges (pixel centres with align_corners, else pixel borders) and clips. 2-d sampling runs as
3-d with a unit depth. One program takes BLOCK output elements of the contiguous (N, C, D, H, W) output."""
import triton
import triton.language as tl

from .common import program_elements, spatial_coordinates
from .formats import decode, encode
from .resample import _cubic_weights

# MODE and PADDING: ATen's GridSamplerInterpolation and GridSamplerPadding codes (the host passes their
# ``.value``)
MODE_BILINEAR = tl.constexpr(0)
MODE_NEAREST = tl.constexpr(1)
MODE_BICUBIC = tl.constexpr(2)
PADDING_ZEROS = tl.constexpr(0)
PADDING_BORDER = tl.constexpr(1)
PADDING_REFLECTION = tl.constexpr(2)


@triton.jit
def _unnormalize(g, size, ALIGN: tl.constexpr):
    if ALIGN:
        return (g + 1) / 2 * (size - 1)
    else:
        return ((g + 1) * size - 1) / 2


@triton.jit
def _reflect(x, twice_low, twice_high):
    """``x`` mirrored into [twice_low / 2, twice_high / 2] (ATen's reflect_coordinates); an empty span gives 0."""
    low = twice_low / 2
    span = (twice_high - twice_low) / 2
    at = tl.abs(x - low)
    safe = tl.where(span > 0, span, 1)
    extra = at % safe  # at >= 0: the remainder is fmod's
    flips = tl.floor(at / safe)
    mirrored = tl.where(flips % 2 == 0, extra + low, span - extra + low)
    return tl.where(span > 0, mirrored, 0)


@triton.jit
def _padded(x, size, PADDING: tl.constexpr, ALIGN: tl.constexpr):
    """A source coordinate after the padding mode (ATen's compute_coordinates)."""
    if PADDING == PADDING_BORDER:
        x = tl.minimum(tl.maximum(x, 0), size - 1)
    elif PADDING == PADDING_REFLECTION:
        if ALIGN:
            x = _reflect(x, 0, 2 * (size - 1))
        else:
            x = _reflect(x, -1, 2 * size - 1)
        x = tl.minimum(tl.maximum(x, 0), size - 1)
    return x


@triton.jit
def _round_half_even(x):
    """std::nearbyint under the default rounding mode."""
    r = tl.floor(x + 0.5)
    tie = (r - x) == 0.5
    odd = (r % 2) != 0
    return tl.where(tie & odd, r - 1, r)


@triton.jit
def _tap(base, z, y, x, ID, IH, IW, s_d, s_h, s_w, mask, SRC_FORMAT: tl.constexpr, COMPUTE: tl.constexpr):
    """The input at integral float coordinates (z, y, x), 0 outside the input. Coordinates are tested
    as floats and clamped before the integer conversion, so far-off grid points cannot overflow it."""
    inside = mask & (x >= 0) & (x <= IW - 1) & (y >= 0) & (y <= IH - 1) & (z >= 0) & (z <= ID - 1)
    xi = tl.minimum(tl.maximum(x, 0), IW - 1).to(tl.int32)
    yi = tl.minimum(tl.maximum(y, 0), IH - 1).to(tl.int32)
    zi = tl.minimum(tl.maximum(z, 0), ID - 1).to(tl.int32)
    raw = tl.load(base + zi * s_d + yi * s_h + xi * s_w, mask=inside, other=0)
    return decode(raw, SRC_FORMAT).to(COMPUTE)


@triton.jit
def _cubic_row(base, z, y, x0, tx, ID, IH, IW, s_d, s_h, s_w, mask, PADDING: tl.constexpr, ALIGN: tl.constexpr,
               SRC_FORMAT: tl.constexpr, COMPUTE: tl.constexpr):
    """Cubic interpolation along W of row ``y`` at fraction ``tx`` past column ``x0``; each tap padded
    on its own (ATen's get_value_bounded)."""
    w0, w1, w2, w3 = _cubic_weights(tx)
    y = _padded(y, IH, PADDING, ALIGN)
    v0 = _tap(base, z, y, _padded(x0 - 1, IW, PADDING, ALIGN), ID, IH, IW, s_d, s_h, s_w, mask, SRC_FORMAT, COMPUTE)
    v1 = _tap(base, z, y, _padded(x0, IW, PADDING, ALIGN), ID, IH, IW, s_d, s_h, s_w, mask, SRC_FORMAT, COMPUTE)
    v2 = _tap(base, z, y, _padded(x0 + 1, IW, PADDING, ALIGN), ID, IH, IW, s_d, s_h, s_w, mask, SRC_FORMAT, COMPUTE)
    v3 = _tap(base, z, y, _padded(x0 + 2, IW, PADDING, ALIGN), ID, IH, IW, s_d, s_h, s_w, mask, SRC_FORMAT, COMPUTE)
    return v0 * w0 + v1 * w1 + v2 * w2 + v3 * w3


@triton.jit
def grid_sample(src, grid, dst, total, C, ID, IH, IW, OD, OH, OW,
                s_n, s_c, s_d, s_h, s_w, g_n, g_d, g_h, g_w, g_k,
                MODE: tl.constexpr, PADDING: tl.constexpr, ALIGN: tl.constexpr, IS_3D: tl.constexpr,
                COMPUTE: tl.constexpr, SRC_FORMAT: tl.constexpr, DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr,
                INDEX_64: tl.constexpr, BLOCK: tl.constexpr):
    """Grid point (n, od, oh, ow) holds (x, y[, z]) at g_k steps; bicubic is 2-d only (the host checks)."""
    i = program_elements(BLOCK, INDEX_64)
    mask = i < total
    n, c, od, oh, ow = spatial_coordinates(i, C, OD, OH, OW, False)
    point = grid + n * g_n + od * g_d + oh * g_h + ow * g_w
    gx = decode(tl.load(point, mask=mask, other=0), SRC_FORMAT).to(COMPUTE)
    gy = decode(tl.load(point + g_k, mask=mask, other=0), SRC_FORMAT).to(COMPUTE)
    if IS_3D:
        gz = decode(tl.load(point + 2 * g_k, mask=mask, other=0), SRC_FORMAT).to(COMPUTE)
    else:
        gz = tl.zeros([BLOCK], COMPUTE)
    base = src + n * s_n + c * s_c
    x = _unnormalize(gx, IW, ALIGN)
    y = _unnormalize(gy, IH, ALIGN)
    if IS_3D:
        z = _unnormalize(gz, ID, ALIGN)
    else:
        z = gz
    if MODE == MODE_BICUBIC:
        x0 = tl.floor(x)
        y0 = tl.floor(y)
        tx = x - x0
        ty = y - y0
        r0 = _cubic_row(base, z, y0 - 1, x0, tx, ID, IH, IW, s_d, s_h, s_w, mask, PADDING, ALIGN, SRC_FORMAT, COMPUTE)
        r1 = _cubic_row(base, z, y0, x0, tx, ID, IH, IW, s_d, s_h, s_w, mask, PADDING, ALIGN, SRC_FORMAT, COMPUTE)
        r2 = _cubic_row(base, z, y0 + 1, x0, tx, ID, IH, IW, s_d, s_h, s_w, mask, PADDING, ALIGN, SRC_FORMAT, COMPUTE)
        r3 = _cubic_row(base, z, y0 + 2, x0, tx, ID, IH, IW, s_d, s_h, s_w, mask, PADDING, ALIGN, SRC_FORMAT, COMPUTE)
        h0, h1, h2, h3 = _cubic_weights(ty)
        value = r0 * h0 + r1 * h1 + r2 * h2 + r3 * h3
    else:
        x = _padded(x, IW, PADDING, ALIGN)
        y = _padded(y, IH, PADDING, ALIGN)
        if IS_3D:
            z = _padded(z, ID, PADDING, ALIGN)
        if MODE == MODE_NEAREST:
            value = _tap(base, _round_half_even(z), _round_half_even(y), _round_half_even(x), ID, IH, IW,
                         s_d, s_h, s_w, mask, SRC_FORMAT, COMPUTE)
        else:
            x0 = tl.floor(x)
            y0 = tl.floor(y)
            # ATen's weights: each corner's is the product of its distances to the opposite corner
            wx0 = x0 + 1 - x
            wx1 = x - x0
            wy0 = y0 + 1 - y
            wy1 = y - y0
            if IS_3D:
                z0 = tl.floor(z)
                wz0 = z0 + 1 - z
                wz1 = z - z0
            else:
                z0 = z
                wz0 = tl.full([BLOCK], 1, COMPUTE)
                wz1 = tl.zeros([BLOCK], COMPUTE)
            value = (_tap(base, z0, y0, x0, ID, IH, IW, s_d, s_h, s_w, mask, SRC_FORMAT, COMPUTE) * (wx0 * wy0 * wz0)
                     + _tap(base, z0, y0, x0 + 1, ID, IH, IW, s_d, s_h, s_w, mask, SRC_FORMAT, COMPUTE)
                     * (wx1 * wy0 * wz0)
                     + _tap(base, z0, y0 + 1, x0, ID, IH, IW, s_d, s_h, s_w, mask, SRC_FORMAT, COMPUTE)
                     * (wx0 * wy1 * wz0)
                     + _tap(base, z0, y0 + 1, x0 + 1, ID, IH, IW, s_d, s_h, s_w, mask, SRC_FORMAT, COMPUTE)
                     * (wx1 * wy1 * wz0))
            if IS_3D:
                value += (_tap(base, z0 + 1, y0, x0, ID, IH, IW, s_d, s_h, s_w, mask, SRC_FORMAT, COMPUTE)
                          * (wx0 * wy0 * wz1)
                          + _tap(base, z0 + 1, y0, x0 + 1, ID, IH, IW, s_d, s_h, s_w, mask, SRC_FORMAT, COMPUTE)
                          * (wx1 * wy0 * wz1)
                          + _tap(base, z0 + 1, y0 + 1, x0, ID, IH, IW, s_d, s_h, s_w, mask, SRC_FORMAT, COMPUTE)
                          * (wx0 * wy1 * wz1)
                          + _tap(base, z0 + 1, y0 + 1, x0 + 1, ID, IH, IW, s_d, s_h, s_w, mask, SRC_FORMAT, COMPUTE)
                          * (wx1 * wy1 * wz1))
    out = dst + ((((n * C + c) * OD + od) * OH + oh) * OW + ow)
    tl.store(out, encode(value, dst.dtype.element_ty, DST_FORMAT, VIA_F32, False), mask=mask)


@triton.jit
def _base_coordinate(i, steps, ALIGN: tl.constexpr, COMPUTE: tl.constexpr):
    """Entry ``i`` of linspace(-1, 1, steps) as ATen computes it (from the nearer end), scaled by
    (steps - 1) / steps without align_corners; 0 for a single step."""
    step = 2 / (tl.maximum(steps, 2) - 1).to(COMPUTE)
    f = i.to(COMPUTE)
    value = tl.where(i < steps // 2, -1 + step * f, 1 - step * (steps - 1 - i).to(COMPUTE))
    if not ALIGN:
        value = value * (steps - 1) / steps
    return tl.where(steps > 1, value, 0)


@triton.jit
def affine_grid(theta, dst, total, D, H, W, t_n, t_r, t_c,
                IS_3D: tl.constexpr, ALIGN: tl.constexpr, COMPUTE: tl.constexpr, SRC_FORMAT: tl.constexpr,
                DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr, INDEX_64: tl.constexpr, BLOCK: tl.constexpr):
    """Output (N, [D,] H, W, k): row k of theta (k < 2, or 3 in 3-d) applied to the base point
    (x, y[, z], 1), summed in that order as the product with the base grid sums."""
    i = program_elements(BLOCK, INDEX_64)
    mask = i < total
    if IS_3D:
        k = i % 3
        rest = i // 3
    else:
        k = i % 2
        rest = i // 2
    w = rest % W
    rest = rest // W
    h = rest % H
    rest = rest // H
    d = rest % D
    n = rest // D
    row = theta + n * t_n + k * t_r
    value = decode(tl.load(row, mask=mask, other=0), SRC_FORMAT).to(COMPUTE) * _base_coordinate(w, W, ALIGN, COMPUTE)
    value += decode(tl.load(row + t_c, mask=mask, other=0), SRC_FORMAT).to(COMPUTE) * _base_coordinate(
        h, H, ALIGN, COMPUTE)
    if IS_3D:
        value += decode(tl.load(row + 2 * t_c, mask=mask, other=0), SRC_FORMAT).to(COMPUTE) * _base_coordinate(
            d, D, ALIGN, COMPUTE)
        value += decode(tl.load(row + 3 * t_c, mask=mask, other=0), SRC_FORMAT).to(COMPUTE)
    else:
        value += decode(tl.load(row + 2 * t_c, mask=mask, other=0), SRC_FORMAT).to(COMPUTE)
    tl.store(dst + i, encode(value, dst.dtype.element_ty, DST_FORMAT, VIA_F32, False), mask=mask)
