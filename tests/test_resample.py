"""Resampling against NumPy float64 references of torch's coordinate rules (nearest, nearest-exact,
bilinear); pixel shuffle exactly. The kernel computes coordinates in float32 as ATen does; the
reference uses the same float32 scale, so nearest results are exact and linear ones are within a few
eps32 of the float64 interpolation of the float32 inputs (three products and sums of weights <= 1)."""
import numpy as np
import pytest

import nbxtensor as nbx

from .conftest import to_nbx
from .test_pooling import channels_last, strided

F = nbx.nn.functional
EPS32 = 2.0 ** -23


def scale_of(i, o, scale, align):
    if align:
        return np.float32(i - 1) / np.float32(o - 1) if o > 1 else np.float32(0)
    return np.float32(1.0 / scale) if scale else np.float32(i) / np.float32(o)


def ref_nearest_index(i, o, scale, exact):
    sc = scale_of(i, o, scale, False)
    at = (np.arange(o, dtype=np.float32) + np.float32(0.5 if exact else 0)) * sc
    return np.minimum(np.floor(at).astype(np.int64), i - 1)


def ref_linear_weights(i, o, scale, align):
    sc = scale_of(i, o, scale, align)
    dst = np.arange(o, dtype=np.float32)
    src = sc * dst if align else np.maximum(sc * (dst + np.float32(0.5)) - np.float32(0.5), np.float32(0))
    first = src.astype(np.int64)
    return first, np.minimum(first + 1, i - 1), (src - first).astype(np.float64)


@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
@pytest.mark.parametrize("size, scale", [((10, 14), None), ((3, 4), None), (None, 1.7), (None, 0.6), (None, 2.0)])
def test_nearest(rng, mode, size, scale, layout):
    a = rng.standard_normal((2, 3, 5, 7)).astype(np.float32)
    x = channels_last(a) if layout == "channels_last" else to_nbx(a)
    out = F.interpolate(x, size=size, scale_factor=scale, mode=mode)
    oh, ow = size or (int(5 * scale), int(7 * scale))
    hi = ref_nearest_index(5, oh, scale, mode == "nearest-exact")
    wi = ref_nearest_index(7, ow, scale, mode == "nearest-exact")
    np.testing.assert_array_equal(out.numpy(), a[:, :, hi][:, :, :, wi])
    if layout == "channels_last":
        assert out.stride()[1] == 1


def test_nearest_integers(rng):
    a = rng.integers(0, 255, (1, 2, 3, 4)).astype(np.uint8)
    out = F.interpolate(to_nbx(a), scale_factor=2)
    np.testing.assert_array_equal(out.numpy(), a.repeat(2, 2).repeat(2, 3))


@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("size, scale", [((9, 11), None), ((3, 2), None), (None, 1.3), (None, 2.0)])
def test_bilinear(rng, align, size, scale, layout):
    a = rng.standard_normal((2, 3, 5, 7)).astype(np.float32)
    x = channels_last(a) if layout == "channels_last" else to_nbx(a)
    out = F.interpolate(x, size=size, scale_factor=scale, mode="bilinear", align_corners=align)
    oh, ow = size or (int(5 * scale), int(7 * scale))
    h0, h1, lh = ref_linear_weights(5, oh, scale, align)
    w0, w1, lw = ref_linear_weights(7, ow, scale, align)
    b = a.astype(np.float64)
    rows = lambda h: b[:, :, h][:, :, :, w0] * (1 - lw) + b[:, :, h][:, :, :, w1] * lw  # noqa: E731
    ref = rows(h0) * (1 - lh)[:, None] + rows(h1) * lh[:, None]
    np.testing.assert_allclose(out.numpy(), ref, rtol=0, atol=8 * EPS32 * np.abs(b).max())


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_bilinear_half(rng, dtype):
    dt = nbx.get_dtype(dtype)
    a = rng.standard_normal((1, 2, 4, 5)).astype(dt.numpy)
    out = F.interpolate(to_nbx(a), scale_factor=2, mode="bilinear")
    ref = F.interpolate(to_nbx(a.astype(np.float32)), scale_factor=2, mode="bilinear").numpy()
    eps = 2.0 ** (-10 if dtype == "float16" else -7)
    np.testing.assert_allclose(out.numpy().astype(np.float32), ref, rtol=eps, atol=eps)


def test_pixel_shuffle_round_trip(rng):
    a = rng.standard_normal((2, 8, 3, 2)).astype(np.float32)
    out = F.pixel_shuffle(to_nbx(a), 2)
    ref = a.reshape(2, 2, 2, 2, 3, 2).transpose(0, 1, 4, 2, 5, 3).reshape(2, 2, 6, 4)
    np.testing.assert_array_equal(out.numpy(), ref)
    np.testing.assert_array_equal(F.pixel_unshuffle(out, 2).numpy(), a)


@pytest.mark.parametrize("call, error, message", [
    (lambda x: F.interpolate(x, scale_factor=2, align_corners=True), ValueError, "align_corners option"),
    (lambda x: F.interpolate(x, size=(2, 2), scale_factor=2), ValueError, "only one of size or scale_factor"),
    (lambda x: F.interpolate(x), ValueError, "either size or scale_factor"),
    (lambda x: F.interpolate(x, size=(2,)), ValueError, "same number of spatial dimensions"),
    (lambda x: F.interpolate(x, scale_factor=2, mode="linear"), NotImplementedError, "linear mode needs 3D input"),
    (lambda x: F.interpolate(x, scale_factor=2, mode="bad"), NotImplementedError, "got bad"),
    (lambda x: F.interpolate(x, size=(0, 2)), RuntimeError, "sizes should be greater than 0"),
    (lambda x: F.interpolate(x, size=(3, 3), recompute_scale_factor=True), ValueError, "not meaningful"),
    (lambda x: F.interpolate(x.to(nbx.int32), scale_factor=2, mode="bilinear"), NotImplementedError, "int32"),
    (lambda x: F.pixel_shuffle(x, 3), RuntimeError, "divisible by the square of upscale_factor"),
    (lambda x: F.pixel_unshuffle(x, 3), RuntimeError, "height to be divisible by downscale_factor"),
])
def test_errors(call, error, message):
    x = to_nbx(np.zeros((1, 2, 4, 4), np.float32))
    with pytest.raises(error, match=message):
        call(x)


def ref_aa_weights(i, o, scale, align, cubic):
    """(O, I) float64 matrix of antialiased weights from the definition: a filter centred on
    scale * (o + 0.5), stretched by the scale when downsampling, cut to its support and normalised."""
    sc = float(scale_of(i, o, scale, align))
    stretch = max(sc, 1.0)
    support = (2.0 if cubic else 1.0) * stretch

    def filt(t):
        t = abs(t)
        if cubic:
            a = -0.5
            return ((a + 2) * t - (a + 3)) * t * t + 1 if t < 1 else (((a * t - 5 * a) * t + 8 * a) * t - 4 * a
                                                                       if t < 2 else 0.0)
        return max(1.0 - t, 0.0)
    m = np.zeros((o, i))
    for k in range(o):
        center = sc * (k + 0.5)
        lo, hi = max(int(center - support + 0.5), 0), min(int(center + support + 0.5), i)
        for j in range(lo, hi):
            m[k, j] = filt((j - center + 0.5) / stretch)
        if m[k].sum():
            m[k] /= m[k].sum()
    return m


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("size, scale", [((4, 3), None), ((2, 9), None), (None, 0.4), (None, 1.6)])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
def test_antialias(rng, mode, align, size, scale, layout):
    a = rng.standard_normal((2, 2, 9, 8)).astype(np.float32)
    x = channels_last(a) if layout == "channels_last" else to_nbx(a)
    out = F.interpolate(x, size=size, scale_factor=scale, mode=mode, align_corners=align, antialias=True)
    oh, ow = size or (int(9 * scale), int(8 * scale))
    mh = ref_aa_weights(9, oh, scale, align, mode == "bicubic")
    mw = ref_aa_weights(8, ow, scale, align, mode == "bicubic")
    ref = np.einsum("ph,nchw,qw->ncpq", mh, a.astype(np.float64), mw)
    # a sum of up to 13 x 13 float32 products, weights summing to at most 1.5 in magnitude per dim
    np.testing.assert_allclose(out.numpy(), ref, rtol=0, atol=64 * EPS32 * np.abs(a).max())
    if layout == "channels_last":
        assert out.stride()[1] == 1


def test_antialias_errors():
    x = to_nbx(np.zeros((1, 2, 4, 4), np.float32))
    with pytest.raises(ValueError, match="Anti-alias option is restricted to bilinear and bicubic"):
        F.interpolate(x, size=2, mode="nearest", antialias=True)
    with pytest.raises(ValueError, match="requires a 4-D tensor"):
        F.interpolate(to_nbx(np.zeros((1, 2, 4), np.float32)), size=2, mode="linear", antialias=True)
    with pytest.raises(NotImplementedError, match="int32"):
        F.interpolate(x.to(nbx.int32), size=2, mode="bilinear", antialias=True)


@pytest.mark.parametrize("block", [64, 512])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "strided"])
@pytest.mark.parametrize("channels, size", [(3, (9, 37)), (130, (4, 3)), (2, (7, 70))])
def test_resample_tiles(rng, set_kernel_facts, block, layout, channels, size):
    """Programs of ``block`` output elements, so a launch takes many tiles, some partial: output rows of
    37, 3 and 70 (not a multiple of a tile's columns), channels-last pixels of 3 channels (a thread takes a
    pixel's) and of 130 (several column blocks), a batch of 1, a strided input. Nearest and bilinear
    against the references; bicubic, trilinear and nearest-exact of bytes as the one-program launch."""
    a = rng.standard_normal((1, channels, 5, 7)).astype(np.float32)
    x = strided(a) if layout == "strided" else channels_last(a) if layout == "channels_last" else to_nbx(a)
    x3 = to_nbx(np.stack([a, a[:, :, ::-1]], 2))  # (1, C, 2, 5, 7)
    x3 = channels_last(x3.numpy()) if layout == "channels_last" else x3
    u8 = to_nbx((np.abs(a) * 60).astype(np.uint8))
    u8 = channels_last(u8.numpy()) if layout == "channels_last" else u8
    whole = [F.interpolate(x, size=size, mode="bicubic", align_corners=False),
             F.interpolate(x3, size=(3, *size), mode="trilinear", align_corners=True),
             F.interpolate(u8, size=size, mode="nearest-exact")]
    set_kernel_facts(elementwise_block=block)
    out = F.interpolate(x, size=size, mode="nearest")
    hi, wi = ref_nearest_index(5, size[0], None, False), ref_nearest_index(7, size[1], None, False)
    np.testing.assert_array_equal(out.numpy(), a[:, :, hi][:, :, :, wi])
    out = F.interpolate(x, size=size, mode="bilinear", align_corners=False)
    h0, h1, lh = ref_linear_weights(5, size[0], None, False)
    w0, w1, lw = ref_linear_weights(7, size[1], None, False)
    b = a.astype(np.float64)
    rows = lambda h: b[:, :, h][:, :, :, w0] * (1 - lw) + b[:, :, h][:, :, :, w1] * lw  # noqa: E731
    ref = rows(h0) * (1 - lh)[:, None] + rows(h1) * lh[:, None]
    np.testing.assert_allclose(out.numpy(), ref, rtol=0, atol=8 * EPS32 * np.abs(b).max())
    tiled = [F.interpolate(x, size=size, mode="bicubic", align_corners=False),
             F.interpolate(x3, size=(3, *size), mode="trilinear", align_corners=True),
             F.interpolate(u8, size=size, mode="nearest-exact")]
    for one, many in zip(whole, tiled):  # each element's arithmetic does not depend on the tiling
        np.testing.assert_array_equal(many.numpy(), one.numpy())
        assert many.stride() == one.stride()


@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
def test_resample_tiles_in_64_bits(rng, monkeypatch, set_kernel_facts, layout):
    """The launches' 64-bit index form (asked for on a small input) gives the 32-bit form's values."""
    from nbxtensor.ops import resample
    a = rng.standard_normal((2, 3, 5, 7)).astype(np.float32)
    x = channels_last(a) if layout == "channels_last" else to_nbx(a)

    def run():
        return [F.interpolate(x, size=(9, 37), mode=mode).numpy() for mode in ("nearest", "bilinear", "bicubic")]
    narrow = run()
    monkeypatch.setattr(resample, "needs_index_64", lambda *operands, **kwargs: True)
    set_kernel_facts(elementwise_block=64)  # forgets the 32-bit plans
    for got, want in zip(run(), narrow):
        np.testing.assert_array_equal(got, want)


def test_interpolate_goes_to_the_plan_its_upsample_op_makes(rng):
    """A repeated interpolate skips its dispatch and checks by keying its upsample op's plan directly: that
    key must be the one the op itself makes, else every layout would hold two plans."""
    from nbxtensor.ops import resample
    from nbxtensor.ops.registry import get
    x = to_nbx(rng.standard_normal((1, 2, 4, 6)).astype(np.float32))
    calls = [
        (lambda: F.interpolate(x, scale_factor=2.0), lambda: get("upsample_nearest2d").impl(x, None, [2.0, 2.0])),
        (lambda: F.interpolate(x, size=[8, 9], mode="bilinear", align_corners=True),
         lambda: get("upsample_bilinear2d").impl(x, [8, 9], True, None)),
        (lambda: F.interpolate(x, size=(3, 3), mode="bicubic", antialias=True),
         lambda: get("upsample_bicubic2d_aa").impl(x, [3, 3], False, None)),
        (lambda: F.interpolate(x, scale_factor=(1.5, 0.5), mode="nearest-exact", recompute_scale_factor=True),
         lambda: get("upsample_nearest_exact2d").impl(x, [6, 3], None)),
    ]
    for through_interpolate, through_op in calls:
        resample._plans.clear()
        first = through_interpolate().numpy()
        again = through_interpolate().numpy()
        planned = len(resample._plans)
        direct = through_op().numpy()
        assert planned == len(resample._plans) == 1
        np.testing.assert_array_equal(first, direct)
        np.testing.assert_array_equal(again, direct)
