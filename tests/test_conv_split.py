"""Convolutions starved of programs: the split reduction (partials added in a fixed order by a second launch)
and the 1x1 form that leaves the matrix product for it, against test_convolution's NumPy float64 reference.

The CPU's facts name no multiprocessors, so nothing is starved there: these tests raise the threshold
(``split_below_programs``). Tolerances as test_convolution's: a split adds the same float32 products in
another grouping (partials of K / splits terms, then the splits in order), within the same K * 2^-24 bound
for float32; float16 and bfloat16 round once to the output type.

On every device (``TEST_DEVICE``) a tuned launch takes its first candidate (``first_candidate``); a starved
convolution's first asks for as many splits as the shape allows, as the interpreter's one setting does (a
GPU's first setting does not split).
"""
import numpy as np
import pytest

import nbxtensor.nn.functional as F
from nbxtensor import tuning
from nbxtensor.kernels import conv as K
from nbxtensor.launch import capture
from nbxtensor.ops import convolution, plans
from nbxtensor.ops.registry import get
from tests.test_conv_routes import _channels_last
from tests.test_convolution import _check, _rounded, _to, reference

pytestmark = pytest.mark.usefixtures("first_candidate")


def candidates_with(monkeypatch, **flags):
    """Every convolution setting offered from now on (the interpreter's one among them) with ``flags`` set."""
    listed = convolution._Setting.candidates
    monkeypatch.setattr(convolution._Setting, "candidates", lambda self, facts, dtype: [
        dict(config, **flags) for config in listed(self, facts, dtype)])


@pytest.fixture
def starved(monkeypatch):
    """Every convolution counts as starved of programs, and its settings split it as far as its shape
    allows; ``starved(most)`` also bounds the splits."""
    monkeypatch.setattr(convolution, "split_below_programs", lambda facts: 1 << 30)
    candidates_with(monkeypatch, SPLITS=convolution._SPLIT_MAX)
    plans.clear_all()

    def most_splits(most):
        monkeypatch.setattr(convolution, "_SPLIT_MAX", most)
    yield most_splits
    plans.clear_all()


def _conv(x, w, b, dims, transposed, **kwargs):
    name = f"conv_transpose{dims}d" if transposed else f"conv{dims}d"
    return getattr(F, name)(x, w, b, **kwargs)


def _split_run(xs, wsh, kwargs, dtype, channels_last, rng, bias=True, transposed=False):
    """(output, its float64 reference, reduction terms, launches' (kernel, grid, constexprs), operands) of one
    call."""
    x = _rounded(rng.standard_normal(xs), dtype)
    w = _rounded(rng.standard_normal(wsh), dtype)
    groups = kwargs.get("groups", 1)
    cout = wsh[1] * groups if transposed else wsh[0]
    b = _rounded(rng.standard_normal(cout), dtype) if bias else None
    dims = len(wsh) - 2
    xt = _channels_last(x, dtype) if channels_last else _to(x, dtype)
    wt, bt = _to(w, dtype), None if b is None else _to(b, dtype)
    with capture() as captured:
        got = _conv(xt, wt, bt, dims, transposed, **kwargs)
    batched = x if len(xs) == dims + 2 else x[None]
    want = reference(batched, w, b, kwargs.get("stride", 1), kwargs.get("padding", 0), kwargs.get("dilation", 1),
                     groups, transposed)
    if len(xs) == dims + 1:
        want = want[0]
    k_terms = int(np.prod(wsh[1:])) * (xs[1] if transposed else 1)
    launches = [(kernel, grid, constexprs) for kernel, grid, _, _, constexprs, _ in captured.launches]
    return got, want, k_terms, launches, (xt, wt, bt)


SPLIT = [
    # (x shape, w shape, conv keyword arguments, transposed, bias): a K tile a kernel position (16
    # channels), channel tiles that split inside a position (80 channels: two K tiles of 64), flat K (3
    # positions: two K tiles of 64), groups, stride, dilation, padding, transposed, 1-D, 3-D and an unbatched input
    ((1, 16, 5, 6), (8, 16, 3, 3), dict(padding=1), False, True),
    ((1, 80, 4, 5), (12, 80, 3, 3), dict(padding=1, stride=(1, 2)), False, False),
    ((2, 3, 7, 6), (32, 3, 5, 5), dict(padding=2, dilation=2), False, True),
    ((1, 36, 5, 6), (24, 12, 3, 3), dict(stride=2, padding=1, groups=3), False, True),
    ((1, 16, 4, 3), (16, 9, 2, 3), dict(stride=2), True, True),
    ((2, 20, 9), (8, 20, 3), dict(padding=2, dilation=2), False, False),
    ((1, 18, 3, 4, 3), (8, 18, 3, 3, 3), dict(padding=1), False, True),
    ((16, 5, 6), (8, 16, 3, 3), dict(padding=1), False, True),
]


@pytest.mark.parametrize("most", [2, 16])
@pytest.mark.parametrize("case", SPLIT)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("channels_last", [False, True])
def test_split_reduction_matches_the_reference(case, dtype, channels_last, most, starved, rng):
    xs, wsh, kwargs, transposed, bias = case
    if channels_last and len(xs) not in (4, 5):
        pytest.skip("channels-last is a 4-D and 5-D layout")
    starved(most)
    got, want, k_terms, launches, _ = _split_run(xs, wsh, kwargs, dtype, channels_last, rng, bias=bias,
                                                 transposed=transposed)
    (main, grid, _), (second, _, _) = launches
    assert main is K.conv_implicit_gemm and second is K.conv_split_sum
    assert 1 < grid[2] <= most
    if channels_last:
        assert got.stride()[1] == 1  # channels-last in, channels-last out (torch's rule)
    _check(got, want, dtype, k_terms)


@pytest.mark.parametrize("channels_last", [False, True])
def test_split_reduction_is_deterministic(channels_last, starved, rng):
    starved(3)  # 9 steps of one K tile a kernel position, 3 a split
    got, want, k_terms, launches, (x, w, b) = _split_run((1, 16, 5, 6), (8, 16, 3, 3), dict(padding=1), "float32",
                                                         channels_last, rng)
    assert launches[0][1][2] == 3
    again = [F.conv2d(x, w, b, padding=1).numpy() for _ in range(2)]
    assert all(a.tobytes() == got.numpy().tobytes() for a in again)
    _check(got, want, "float32", k_terms)


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_starved_one_by_one_leaves_the_product_for_the_split(channels_last, bias, starved, rng):
    starved(16)
    with tuning.recording() as keys:
        got, want, k_terms, launches, _ = _split_run((2, 80, 3, 4), (8, 80, 1, 1), {}, "bfloat16", channels_last,
                                                     rng, bias=bias)
    assert [k.split("|")[0] for k in keys] == ["conv"]
    assert [kernel for kernel, _, _ in launches] == [K.conv_implicit_gemm, K.conv_split_sum]
    _check(got, want, "bfloat16", k_terms)


def test_a_setting_tuned_elsewhere_splits_no_more_than_this_output_allows(starved, monkeypatch, rng):
    # a key's setting may come from a larger-K shape of its bucket: the plan keeps to this shape's steps
    starved(16)
    candidates_with(monkeypatch, SPLITS=64)
    got, want, k_terms, launches, _ = _split_run((1, 16, 4, 4), (8, 16, 3, 3), dict(padding=1), "float32", False,
                                                 rng)
    assert launches[0][1][2] == 9  # one K tile at each of 9 kernel positions
    _check(got, want, "float32", k_terms)


def test_key_rule_follows_the_starved_route(starved, rng):
    starved(16)
    x = _to(rng.standard_normal((1, 32, 3, 3)))
    w = _to(rng.standard_normal((8, 32, 1, 1)))
    with tuning.recording() as formed:
        F.conv2d(x, w)
    assert [k.split("|")[0] for k in formed] == ["conv"]
    assert get("conv2d").key(tuning._facts(), x, w) == formed


def test_hopper_facts_starve_late_stages_only():
    from nbxtensor.device import facts
    from nbxtensor.ops.convolution import _Setting
    import nbxtensor as nbx
    hopper = facts.load("hopper")

    def starved(xs, wsh, padding):
        x, w = (nbx.empty(s, device="meta", dtype="bfloat16") for s in (xs, wsh))
        return _Setting("conv2d", x, w, None, 1, padding, 1, False, 0, 1, hopper).starved
    assert starved((1, 512, 7, 7), (512, 512, 3, 3), 1)  # 49 positions x 512 channels
    assert starved((1, 256, 56, 56), (64, 256, 1, 1), 0)  # 25 tiles of 128 x 128
    assert not starved((32, 64, 56, 56), (64, 64, 3, 3), 1)  # 784 tiles


def test_starved_candidates_add_splits_and_small_tiles_unstaged():
    from nbxtensor.device import facts
    from nbxtensor.ops.convolution import _Setting
    import nbxtensor as nbx
    hopper = facts.load("hopper")
    x = nbx.empty((1, 512, 7, 7), device="meta", dtype="bfloat16")
    w = nbx.empty((512, 512, 3, 3), device="meta", dtype="bfloat16")
    setting = _Setting("conv2d", x, w, None, 1, 1, 1, False, 0, 1, hopper)
    configs = setting.candidates(hopper, x.dtype)
    split = [c for c in configs if c.get("SPLITS", 1) > 1]
    assert split and not any(c.get("STAGE") for c in split)
    assert any(c["BLOCK_M"] == 32 and "SPLITS" not in c for c in configs)
    for c in split:  # 72 steps (8 channel tiles x 9 positions) over 8 output tiles of 64 channels
        splits, per_split = setting.split_steps(c)
        assert (splits - 1) * per_split < 72 <= splits * per_split and splits <= 16


@pytest.mark.parametrize("case", SPLIT)
@pytest.mark.parametrize("channels_last", [False, True])
def test_one_loop_form_matches_the_reference(case, channels_last, monkeypatch, rng):
    # the interpreter takes the first candidate: make it the one-loop form, unsplit
    xs, wsh, kwargs, transposed, bias = case
    if channels_last and len(xs) not in (4, 5):
        pytest.skip("channels-last is a 4-D and 5-D layout")
    candidates_with(monkeypatch, STEPPED=True)
    plans.clear_all()
    got, want, k_terms, launches, _ = _split_run(xs, wsh, kwargs, "bfloat16", channels_last, rng, bias=bias,
                                                 transposed=transposed)
    plans.clear_all()
    [(kernel, grid, constexprs)] = launches
    assert kernel is K.conv_implicit_gemm and constexprs["STEPPED"] and grid[2] == 1
    _check(got, want, "bfloat16", k_terms)


@pytest.mark.parametrize("case", [SPLIT[0], SPLIT[1], SPLIT[3], SPLIT[4], SPLIT[5], SPLIT[6], SPLIT[7]])
@pytest.mark.parametrize("split", [False, True])
def test_positions_inner_tiles_match_the_reference(case, split, starved, monkeypatch, rng):
    # NCHW inputs of 16-bit types, flat K aside (its tiles span channels and window); first candidate as
    # the interpreter takes it, split or not
    xs, wsh, kwargs, transposed, bias = case
    starved(2 if split else 1)
    candidates_with(monkeypatch, STEPPED=True, POSITIONS_INNER=True)
    got, want, k_terms, launches, _ = _split_run(xs, wsh, kwargs, "float16", False, rng, bias=bias,
                                                 transposed=transposed)
    assert launches[0][2]["POSITIONS_INNER"] and (launches[0][1][2] > 1) == split
    _check(got, want, "float16", k_terms)


def test_positions_inner_candidates_for_nchw_half_inputs_only():
    from nbxtensor.device import facts
    from nbxtensor.ops.convolution import _Setting
    import nbxtensor as nbx
    hopper = facts.load("hopper")
    w = nbx.empty((256, 256, 3, 3), device="meta", dtype="bfloat16")
    shape = (1, 256, 14, 14)
    for strides, expected in (((50176, 196, 14, 1), True), ((50176, 1, 3584, 256), False)):
        x = nbx.empty(shape, device="meta", dtype="bfloat16").as_strided(shape, strides)
        configs = _Setting("conv2d", x, w, None, 1, 1, 1, False, 0, 1, hopper).candidates(hopper, x.dtype)
        inner = [c for c in configs if c.get("POSITIONS_INNER")]
        assert bool(inner) == expected
        assert all(c.get("STEPPED") or c.get("SPLITS") for c in inner)
        assert not any(c.get("STAGE") for c in inner)


@pytest.mark.parametrize("case", [SPLIT[0], SPLIT[1], SPLIT[5], SPLIT[6], SPLIT[7],
                                  ((1, 32, 5, 6), (24, 16, 3, 3), dict(stride=2, padding=1, groups=2), False, True)])
@pytest.mark.parametrize("split", [False, True])
def test_prefetched_input_tiles_match_the_reference(case, split, starved, monkeypatch, rng):
    # forward NCHW 16-bit inputs gathered a step ahead: unsplit with the weight alone staged (as the
    # candidates offer it), split over the input's own weight (the last step of each split loads nothing)
    xs, wsh, kwargs, transposed, bias = case
    starved(2 if split else 1)
    candidates_with(monkeypatch, STEPPED=True, POSITIONS_INNER=True, PREFETCH=True, STAGE_WEIGHT=not split)
    got, want, k_terms, launches, _ = _split_run(xs, wsh, kwargs, "bfloat16", False, rng, bias=bias)
    kernels = [kernel for kernel, _, _ in launches]
    staged = [] if split else [K.conv_stage_channels_inner]
    assert kernels[:len(staged) + 1] == staged + [K.conv_implicit_gemm]
    assert launches[len(staged)][2]["PREFETCH"] and (launches[len(staged)][1][2] > 1) == split
    _check(got, want, "bfloat16", k_terms)


def test_prefetch_candidates_for_forward_nchw_half_inputs():
    from nbxtensor.device import facts
    from nbxtensor.ops.convolution import _Setting
    import nbxtensor as nbx
    hopper = facts.load("hopper")
    w = nbx.empty((256, 256, 3, 3), device="meta", dtype="bfloat16")
    shape = (32, 256, 14, 14)
    for strides, transposed, expected in (((50176, 196, 14, 1), False, True), ((50176, 196, 14, 1), True, False),
                                          ((50176, 1, 3584, 256), False, False)):
        x = nbx.empty(shape, device="meta", dtype="bfloat16").as_strided(shape, strides)
        configs = _Setting("conv2d", x, w, None, 1, 1, 1, transposed, 0, 1, hopper).candidates(hopper, x.dtype)
        ahead = [c for c in configs if c.get("PREFETCH")]
        assert bool(ahead) == expected
        assert all(c["STEPPED"] and c["POSITIONS_INNER"] and c["STAGE_WEIGHT"] and "SPLITS" not in c for c in ahead)
