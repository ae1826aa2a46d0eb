"""The channels-last depthwise kernel (``conv_depthwise_channels_inner``) against a NumPy float64 direct
loop written here: strides, dilations, paddings, odd sizes, channel counts that no channel block divides,
1-d to 3-d, every candidate setting the tuner may pick, and the routes around it.

Tolerances: float32 sums K = window products in float32 (about K * 2^-24 of the sum of their magnitudes);
float16 and bfloat16 inputs are exact in float32, sum in float32 and round once to the output type (half an
ulp: 2^-11 and 2^-8).
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import nbxtensor as nbx
import nbxtensor.nn.functional as F
from nbxtensor import tuning
from nbxtensor.allocation import Workspace
from nbxtensor.kernels import conv as K
from nbxtensor.launch import capture
from nbxtensor.ops import plans
from nbxtensor.ops.convolution import _Setting
from nbxtensor.ops.registry import get
from tests.conftest import TEST_DEVICE

_DTYPES = ["float32", "float16", "bfloat16"]
_TOL = {"float32": 2e-6, "float16": 2e-3, "bfloat16": 1.6e-2}


def depthwise_reference(x, w, b, stride, padding, dilation):
    """float64 depthwise convolution of x (N, C, *S) by w (C, 1, *K): for every output position and window
    position, each channel's input times its own weight."""
    dims = x.ndim - 2
    stride, padding, dilation = ((v,) * dims if isinstance(v, int) else tuple(v) for v in (stride, padding, dilation))
    x, w = x.astype(np.float64), w.astype(np.float64)
    window = w.shape[2:]
    out_spatial = [(i + 2 * p - d * (k - 1) - 1) // s + 1
                   for i, p, d, k, s in zip(x.shape[2:], padding, dilation, window, stride)]
    out = np.zeros((*x.shape[:2], *out_spatial))
    for o in np.ndindex(*out_spatial):
        for k in np.ndindex(*window):
            source = [oi * s - p + ki * d for oi, s, p, ki, d in zip(o, stride, padding, k, dilation)]
            if all(0 <= i < n for i, n in zip(source, x.shape[2:])):
                out[(slice(None), slice(None), *o)] += x[(slice(None), slice(None), *source)] * w[(slice(None), 0, *k)]
    if b is not None:
        out += b.astype(np.float64).reshape(1, -1, *(1,) * dims)
    return out


def _values(rng, shape, dtype):
    """Random values of ``shape`` rounded to ``dtype`` (float32 arrays holding them exactly)."""
    return nbx.tensor(rng.standard_normal(shape).astype(np.float32)).to(dtype).to("float32").numpy()


def _case_values(rng, case, dtype):
    """A case's (input shape, window, stride, padding, dilation) as its input, depthwise weight and bias values,
    and its (stride, padding, dilation)."""
    shape, window, *geometry = case
    channels = shape[1]
    return (_values(rng, shape, dtype), _values(rng, (channels, 1, *window), dtype),
            _values(rng, (channels,), dtype), geometry)


def _channels_last(a, dtype):
    """``a`` (N, C, *S) on the test device with its channels innermost in memory."""
    dims = a.ndim - 2
    stored = nbx.tensor(np.ascontiguousarray(np.moveaxis(a, 1, -1)), device=TEST_DEVICE).to(dtype)
    return stored.permute(0, dims + 1, *range(1, dims + 1))


def _check(got, want, dtype, window):
    got = got.to("float32").numpy().astype(np.float64)
    assert got.shape == want.shape
    scale = np.abs(want).max() + 1
    tol = _TOL[dtype] * (window if dtype == "float32" else 1)
    np.testing.assert_allclose(got, want, atol=tol * scale, rtol=_TOL[dtype])


def _launched(monkeypatch):
    """The names of the kernels planned launches run from now on."""
    names, call = [], plans.PlannedLaunch.__call__

    def recording(self, device, tensors):
        names.append(self.kernel.fn.__name__)
        return call(self, device, tensors)
    monkeypatch.setattr(plans.PlannedLaunch, "__call__", recording)
    return names


@pytest.fixture
def channels_inner_chosen(monkeypatch):
    """Every tuned depthwise launch takes its first channels-inner setting, on every device: a compiling device
    would time the key's other candidates too and may store a ``conv_direct`` one for a small shape."""
    def first_channels_inner(key, facts, candidates, prepare):
        candidates = candidates() if callable(candidates) else candidates
        return next((c for c in candidates if c.get("CHANNELS_INNER")), candidates[0])
    monkeypatch.setattr(tuning, "choose_timed", first_channels_inner)
    plans.clear_all()
    yield
    plans.clear_all()


def _convolve(x, w, b, dtype, stride, padding, dilation, channels):
    dims = x.ndim - 2
    bt = None if b is None else nbx.tensor(b, device=TEST_DEVICE).to(dtype)
    plans.clear_all()
    return getattr(F, f"conv{dims}d")(x, nbx.tensor(w, device=TEST_DEVICE).to(dtype), bt, stride=stride,
                                      padding=padding, dilation=dilation, groups=channels)


CASES = [
    # (input shape, window, stride, padding, dilation): the interpreter's tile is 4 x 8 positions x 16 channels
    ((2, 20, 10, 19), (3, 3), 1, 1, 1),          # 20 channels: a second, ragged block; interior and edge tiles
    ((1, 16, 12, 24), (7, 7), 1, 3, 1),          # ConvNeXt's window; channels a whole block; an interior tile
    ((1, 24, 11, 17), (3, 3), 2, 1, 1),          # MobileNet's stride 2, odd extents
    ((1, 12, 13, 21), (3, 3), 1, 2, 2),          # dilated
    ((2, 9, 9, 14), (3, 5), (2, 1), (1, 2), (2, 1)),  # uneven window, stride, padding and dilation
    ((2, 5, 7, 9), (2, 3), 1, 0, 1),             # no padding, an even window, 5 channels
    ((1, 12, 5, 6, 7), (3, 3, 3), (1, 2, 1), 1, 1),  # 3-d, channels_last_3d
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", _DTYPES)
def test_channels_last_depthwise_matches_the_direct_loop(case, dtype, rng, monkeypatch, channels_inner_chosen):
    x, w, b, (stride, padding, dilation) = _case_values(rng, case, dtype)
    channels = x.shape[1]
    launched = _launched(monkeypatch)
    got = _convolve(_channels_last(x, dtype), w, b, dtype, stride, padding, dilation, channels)
    assert launched == ["conv_depthwise_channels_inner"]
    assert got.stride()[1] == 1  # channels-last in, channels-last out (torch's rule)
    _check(got, depthwise_reference(x, w, b, stride, padding, dilation), dtype, int(np.prod(w.shape[2:])))


@settings(max_examples=10, deadline=None)
@given(n=st.integers(1, 2), channels=st.integers(2, 40), h=st.integers(1, 12), w=st.integers(1, 12),
       kh=st.integers(1, 5), kw=st.integers(1, 5), stride=st.integers(1, 2), padding=st.integers(0, 2),
       dilation=st.integers(1, 2))
def test_channels_last_depthwise_property(n, channels, h, w, kh, kw, stride, padding, dilation):
    if min(h + 2 * padding - dilation * (kh - 1), w + 2 * padding - dilation * (kw - 1)) < 1:
        return
    rng = np.random.default_rng(channels * 131 + h * 17 + w)
    x = _values(rng, (n, channels, h, w), "float32")
    wt = _values(rng, (channels, 1, kh, kw), "float32")
    b = _values(rng, (channels,), "float32")
    got = _convolve(_channels_last(x, "float32"), wt, b, "float32", stride, padding, dilation, channels)
    _check(got, depthwise_reference(x, wt, b, stride, padding, dilation), "float32", kh * kw)


def test_channels_innermost_1d_unbatched_and_sliced(rng, monkeypatch, channels_inner_chosen):
    # inputs whose channels are adjacent but that are no dense channels-last tensor: a 1-d (N, L, C)
    # buffer (its output contiguous, as torch lays out 3-d results), an unbatched (H, W, C) one, and a
    # channel window of a wider channels-last tensor; no bias
    launched = _launched(monkeypatch)
    x1 = _values(rng, (2, 12, 19), "float32")
    w1 = _values(rng, (12, 1, 5), "float32")
    got = _convolve(_channels_last(x1, "float32"), w1, None, "float32", 2, 2, 1, 12)
    assert got.is_contiguous()
    _check(got, depthwise_reference(x1, w1, None, 2, 2, 1), "float32", 5)
    x2 = _values(rng, (1, 10, 6, 9), "bfloat16")
    w2 = _values(rng, (10, 1, 3, 3), "bfloat16")
    unbatched = _channels_last(x2, "bfloat16")[0]
    plans.clear_all()
    got = F.conv2d(unbatched, nbx.tensor(w2, device=TEST_DEVICE).to("bfloat16"), padding=1, groups=10)
    _check(got, depthwise_reference(x2, w2, None, 1, 1, 1)[0], "bfloat16", 9)
    wide = _values(rng, (2, 24, 7, 8), "float16")
    w3 = _values(rng, (20, 1, 3, 3), "float16")
    got = _convolve(_channels_last(wide, "float16")[:, 2:22], w3, None, "float16", 1, 1, 1, 20)
    _check(got, depthwise_reference(wide[:, 2:22], w3, None, 1, 1, 1), "float16", 9)
    assert launched == ["conv_depthwise_channels_inner"] * 3


def _gpu_facts():
    return dict(tuning._facts(), kernels={}, tiles=dict(max_block_m=256, max_block_n=256, max_block_k=128,
                                                        max_stages=4, max_warps=8))


def _candidates_of(shape, window, groups, channels_last=True, transposed=False, dtype="bfloat16"):
    x = nbx.empty(shape, device="meta", dtype=dtype)
    if channels_last:
        x = x.to(memory_format=nbx.channels_last)
    w = nbx.empty((shape[1], shape[1] // groups, *window), device="meta", dtype=dtype)
    setting = _Setting("conv2d", x, w, None, 1, tuple(k // 2 for k in window), 1, transposed, 0, groups)
    return setting, setting.candidates(_gpu_facts(), x.dtype)


def test_candidates_of_the_channels_inner_kernel():
    setting, configs = _candidates_of((8, 96, 56, 56), (7, 7), 96)
    inner = [c for c in configs if c.get("CHANNELS_INNER")]
    assert inner and {c.get("STAGE_WEIGHT", False) for c in inner} == {False, True}
    assert {c.get("ROWS_LOOPED", False) for c in inner} == {False, True}
    assert any("BLOCK_M" in c for c in configs)  # the general direct kernel stays a candidate
    for c in inner:  # a vector of 16-bit channels a thread at least, and tiles no larger than the plane
        assert c["BLOCK_H"] * c["BLOCK_W"] * c["BLOCK_C"] >= 32 * c["num_warps"] * 8
        assert c["BLOCK_W"] <= 64 and c["BLOCK_H"] <= 64 and c["BLOCK_C"] <= 128
    # a 7 x 7 plane of many channels: tiles fitted to it, its positions moved from the short side
    setting, configs = _candidates_of((1, 768, 7, 7), (7, 7), 768)
    tiles = setting.channels_inner_tiles([(2, 16, 64, 4)])
    assert tiles == [(4, 8, 64, 4)]
    # a NCHW input, a multiplier of 2 and a transposed form take none
    for groups, channels_last, transposed in ((32, False, False), (16, True, False), (32, True, True)):
        _, configs = _candidates_of((2, 32, 9, 9), (3, 3), groups, channels_last, transposed)
        assert not any(c.get("CHANNELS_INNER") for c in configs)


def _forcing(monkeypatch, configs):
    """Every depthwise launch offered ``configs`` and taking the first, on every device: a compiling device
    would otherwise time them (inside a test's capture too) or take a setting its tuning store holds."""
    monkeypatch.setattr(_Setting, "candidates", lambda self, facts, dtype: configs)
    monkeypatch.setattr(tuning, "choose_timed", lambda key, facts, candidates, prepare: configs[0])


def test_every_candidate_computes_the_convolution(rng, monkeypatch):
    # the interpreter runs the first candidate only: each GPU candidate forced in turn, on 40 channels
    # (no block divides them but 8) and a plane that some tiles cover and others exceed
    x = _values(rng, (1, 40, 9, 13), "bfloat16")
    w = _values(rng, (40, 1, 5, 5), "bfloat16")
    b = _values(rng, (40,), "bfloat16")
    xt = _channels_last(x, "bfloat16")
    setting, configs = _candidates_of((1, 40, 9, 13), (5, 5), 40)
    want = depthwise_reference(x, w, b, 1, 1, 1)
    inner = [c for c in configs if c.get("CHANNELS_INNER")]
    assert len(inner) >= 8
    for config in inner:
        _forcing(monkeypatch, [config])
        launched = _launched(monkeypatch)
        _check(_convolve(xt, w, b, "bfloat16", 1, 1, 1, 40), want, "bfloat16", 25)
        staged = ["conv_stage_channels_inner"] if config.get("STAGE_WEIGHT") else []
        assert launched == staged + ["conv_depthwise_channels_inner"], config


def test_staged_weight_read_through_its_strides_and_declared(rng, monkeypatch):
    # a weight stored with its window transposed is staged as any other; the staged copy is part of the
    # workspace the cost rule declares
    x = _values(rng, (1, 24, 8, 10), "float16")
    w = _values(rng, (24, 1, 3, 5), "float16")
    wt = nbx.tensor(np.ascontiguousarray(w.transpose(0, 1, 3, 2)), device=TEST_DEVICE).to("float16").transpose(2, 3)
    _forcing(monkeypatch, [dict(CHANNELS_INNER=True, BLOCK_H=4, BLOCK_W=8, BLOCK_C=16, num_warps=4,
                                STAGE_WEIGHT=True)])
    launched = _launched(monkeypatch)
    plans.clear_all()
    got = F.conv2d(_channels_last(x, "float16"), wt, None, padding=(1, 2), groups=24)
    assert launched == ["conv_stage_channels_inner", "conv_depthwise_channels_inner"]
    _check(got, depthwise_reference(x, w, None, 1, (1, 2), 1), "float16", 15)
    meta_x = nbx.empty((1, 24, 8, 10), device="meta", dtype="float16").to(memory_format=nbx.channels_last)
    meta_w = nbx.empty((24, 1, 3, 5), device="meta", dtype="float16")
    declared = get("conv2d").cost(meta_x, meta_w, None, 1, (1, 2), 1, 24).workspace
    assert declared >= Workspace.bytes_for({"w_staged": ((24 * 15,), nbx.float16)})


def test_a_depthwise_shape_has_a_key_of_its_own(rng, monkeypatch):
    # a multiplier of 2 and a depthwise convolution have channels in the same buckets, but only the depthwise
    # one's candidates hold the channels-inner kernel's: it forms a key of its own (depthwise_conv), so that no
    # setting tuned (or certified) on one is handed to the other
    x = _values(rng, (1, 8, 6, 7), "float32")
    w = _values(rng, (16, 1, 3, 3), "float32")
    with tuning.recording() as keys:
        plans.clear_all()
        F.conv2d(_channels_last(x, "float32"), nbx.tensor(w[::2], device=TEST_DEVICE), padding=1, groups=8)
        plans.clear_all()
        F.conv2d(_channels_last(x, "float32"), nbx.tensor(w, device=TEST_DEVICE), padding=1, groups=8)
    assert [key.split("|")[0] for key in keys] == ["depthwise_conv", "direct_conv"]
    assert keys[0].split("|")[4:] == keys[1].split("|")[4:]  # the same dtype and flags otherwise
    launched = _launched(monkeypatch)
    got = _convolve(_channels_last(x, "float32"), w, None, "float32", 1, 1, 1, 8)
    assert launched == ["conv_direct"]
    from tests.test_convolution import reference
    _check(got, reference(x, w, None, 1, 1, 1, 8), "float32", 9)


@pytest.mark.parametrize("sliding", [False, True])
def test_offsets_in_64_bits(sliding, rng, monkeypatch, channels_inner_chosen):
    # an operand past 2^31 elements cannot be made here: the 64-bit offsets its launch takes, asked for on a
    # small one, give the same values, in the tile form and the SLIDING one (at unit width stride)
    from nbxtensor.ops import convolution
    monkeypatch.setattr(convolution, "needs_index_64", lambda *operands, **kwargs: True)
    if sliding:
        _forcing(monkeypatch, [dict(CHANNELS_INNER=True, SLIDING=True, BLOCK_H=4, BLOCK_W=3, BLOCK_C=16,
                                    num_warps=1, STAGE_WEIGHT=True)])
    stride = (2, 1) if sliding else 2
    x = _values(rng, (2, 20, 7, 11), "float16")
    w = _values(rng, (20, 1, 3, 3), "float16")
    b = _values(rng, (20,), "float16")
    with capture() as captured:
        got = _convolve(_channels_last(x, "float16"), w, b, "float16", stride, 1, 1, 20)
    assert [(constexprs["INDEX_64"], constexprs["SLIDING"]) for kernel, _, _, _, constexprs, _ in captured.launches
            if kernel is K.conv_depthwise_channels_inner] == [(True, sliding)]
    _check(got, depthwise_reference(x, w, b, stride, 1, 1), "float16", 9)


def _key_of(shape, window=(7, 7)):
    """The launch key of a channels-last depthwise convolution of ``shape`` on an H100 (Hopper's buckets)."""
    from nbxtensor.device.facts import load as load_facts
    x = nbx.empty(shape, device="meta", dtype="bfloat16").to(memory_format=nbx.channels_last)
    w = nbx.empty((shape[1], 1, *window), device="meta", dtype="bfloat16")
    setting = _Setting("conv2d", x, w, None, 1, tuple(k // 2 for k in window), 1, False, 0, shape[1])
    return setting.key(load_facts("hopper"), x.dtype)


def test_a_depthwise_key_names_its_channel_count():
    # ConvNeXt's stages at batches 8 and 32 make the same output positions over 2x or 4x the channels (96 x 56^2
    # at batch 8, 192 x 28^2 at 32): their keys differ in N, the channel count, so that neither takes the tiles
    # the other tuned; positions and channels in the same buckets share one
    batch8, batch32 = _key_of((8, 96, 56, 56)), _key_of((32, 192, 28, 28))
    assert batch8.split("|")[1] == batch32.split("|")[1]  # M: 25088 positions each
    assert batch8.split("|")[2:3] == ["N=128"] and batch32.split("|")[2:3] == ["N=256"]
    assert _key_of((8, 100, 56, 56)) == batch8


SLIDING_CASES = [
    # (input shape, window, stride, padding, dilation): the width's stride and dilation 1
    ((2, 20, 10, 19), (3, 3), 1, 1, 1),          # 20 channels: a ragged channel block; edge and interior tiles
    ((1, 16, 12, 24), (7, 7), 1, 3, 1),          # ConvNeXt's window; some tiles' windows inside the input
    ((1, 12, 13, 21), (3, 3), (2, 1), 2, (2, 1)),  # the height strided and dilated
    ((2, 5, 7, 9), (2, 3), 1, 0, 1),             # no padding, an even window, 5 channels
    ((1, 12, 5, 6, 7), (3, 3, 3), 1, 1, 1),      # 3-d
]


@pytest.mark.parametrize("columns", [3, 7])
@pytest.mark.parametrize("case", SLIDING_CASES)
@pytest.mark.parametrize("dtype", _DTYPES)
def test_sliding_columns_match_the_direct_loop(case, dtype, columns, rng, monkeypatch):
    # SLIDING accumulates BLOCK_W output columns apart and loads each input column a window row reaches once:
    # column counts that divide no plane's width (3) or exceed it (7 > 5 and 6), the weight staged or not
    x, w, b, (stride, padding, dilation) = _case_values(rng, case, dtype)
    channels = x.shape[1]
    want = depthwise_reference(x, w, b, stride, padding, dilation)
    for staged in (False, True):
        _forcing(monkeypatch, [dict(CHANNELS_INNER=True, SLIDING=True, BLOCK_H=4, BLOCK_W=columns, BLOCK_C=16,
                                    num_warps=1, **({"STAGE_WEIGHT": True} if staged else {}))])
        launched = _launched(monkeypatch)
        with capture() as captured:
            got = _convolve(_channels_last(x, dtype), w, b, dtype, stride, padding, dilation, channels)
        assert launched == ["conv_stage_channels_inner"] * staged + ["conv_depthwise_channels_inner"]
        assert [constexprs["SLIDING"] for kernel, _, _, _, constexprs, _ in captured.launches
                if kernel is K.conv_depthwise_channels_inner] == [True]
        _check(got, want, dtype, int(np.prod(w.shape[2:])))


def test_a_sliding_setting_on_a_strided_or_dilated_width_runs_as_tiles(rng, monkeypatch):
    # a key records no dilation, so a SLIDING setting may meet a width it cannot slide over (dilated; a
    # strided width forms another key, forced here): it runs as the tile form, its columns a power of two
    _forcing(monkeypatch, [dict(CHANNELS_INNER=True, SLIDING=True, BLOCK_H=4, BLOCK_W=3, BLOCK_C=16, num_warps=1)])
    x = _values(rng, (1, 12, 9, 13), "float16")
    w = _values(rng, (12, 1, 3, 3), "float16")
    for stride, dilation in ((1, (1, 2)), ((1, 2), 1)):
        with capture() as captured:
            got = _convolve(_channels_last(x, "float16"), w, None, "float16", stride, 2, dilation, 12)
        (constexprs,) = [c for kernel, _, _, _, c, _ in captured.launches if kernel is K.conv_depthwise_channels_inner]
        assert (constexprs["SLIDING"], constexprs["BLOCK_W"]) == (False, 4)
        _check(got, depthwise_reference(x, w, None, stride, 2, dilation), "float16", 9)


def test_sliding_candidates():
    # offered where the width's stride and dilation are 1, each with the weight staged (read in place, a tap's
    # channels lie a window apart), fitted to the plane and channels, a vector of channels a lane at least
    setting, configs = _candidates_of((8, 384, 14, 14), (7, 7), 384)
    sliding = [c for c in configs if c.get("SLIDING")]
    assert sliding and all(c.get("STAGE_WEIGHT") and c["CHANNELS_INNER"] for c in sliding)
    for c in sliding:
        assert c["BLOCK_H"] * c["BLOCK_C"] >= 32 * c["num_warps"] * 8 and c["BLOCK_W"] <= 14
    assert any(c["BLOCK_W"] == 7 for c in sliding)  # seven columns: two a row of the 14 x 14 plane
    setting, configs = _candidates_of((1, 768, 7, 7), (7, 7), 768)
    assert {c["BLOCK_H"] for c in configs if c.get("SLIDING")} <= {2, 4, 8}
    x = nbx.empty((1, 32, 16, 16), device="meta", dtype="bfloat16").to(memory_format=nbx.channels_last)
    w = nbx.empty((32, 1, 3, 3), device="meta", dtype="bfloat16")
    for stride, dilation in ((2, 1), (1, 2), ((2, 1), 1)):
        setting = _Setting("conv2d", x, w, None, stride, 1, dilation, False, 0, 32)
        slides = any(c.get("SLIDING") for c in setting.candidates(_gpu_facts(), x.dtype))
        assert slides == (setting.stride[2] == 1 and setting.dilation[2] == 1), (stride, dilation)


@pytest.mark.parametrize("dtype", _DTYPES)
def test_sliding_columns_apply_the_norm(dtype, rng, monkeypatch):
    # the fused convolution, inference batch norm and activation: each column's accumulator takes the epilogue
    # (test_conv_batch_norm's case, reference and bound)
    from tests.test_conv_batch_norm import ROUTES, _captured_call, _expected, _operands
    from tests.test_conv_batch_norm import _check as check_fused
    _forcing(monkeypatch, [dict(CHANNELS_INNER=True, SLIDING=True, BLOCK_H=4, BLOCK_W=3, BLOCK_C=16, num_warps=1)])
    case = ROUTES["depthwise"]
    operands = _operands(case, dtype, rng)
    got, launches = _captured_call(case, operands, dtype, True, "silu")
    (constexprs,) = [launch[4] for launch in launches if launch[0] is K.conv_depthwise_channels_inner]
    assert constexprs["SLIDING"] and constexprs["NORM"]
    check_fused(got, *_expected(*operands, case, "silu"), dtype)
