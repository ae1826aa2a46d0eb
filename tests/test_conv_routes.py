"""The convolution routes (direct kernel, implicit GEMM in its unrolled, counted and flat-K forms, 1x1 as a
matrix product) against test_convolution's NumPy float64 reference, and the launch keys each declares.

Tolerances as test_convolution's: float32 accumulates K = Cin/groups * window terms in float32 (about
K * 2^-24 of the sum of |products|); float16 and bfloat16 inputs are exact in float32 and round once to
the output type.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import nbxtensor as nbx
import nbxtensor.nn.functional as F
from nbxtensor import tuning
from nbxtensor.ops import plans
from nbxtensor.ops.registry import get
from tests.conftest import examples
from tests.test_convolution import _check, _rounded, _to, reference

_DTYPES = ["float32", "float16", "bfloat16"]

# every route in its first tuning candidate, on every device: a GPU would compile and time all of a key's
# candidates in each test (its plans are cleared), which bounds nothing a test here checks
pytestmark = pytest.mark.usefixtures("first_candidate")


def _channels_last(a, dtype):
    """``a`` (N, C, *S) as an nbx tensor laid out channels-last (N, *S, C in memory)."""
    dims = a.ndim - 2
    stored = _to(np.ascontiguousarray(np.moveaxis(a, 1, -1)), dtype)
    return stored.permute(0, dims + 1, *range(1, dims + 1))


def _recording_call(names):
    """PlannedLaunch.__call__ that also appends each launched kernel's name to ``names``."""
    call = plans.PlannedLaunch.__call__

    def recording(self, device, tensors):
        names.append(self.kernel.fn.__name__)
        return call(self, device, tensors)
    return recording


def _run(xs, wsh, stride, padding, dilation, groups, dtype, channels_last, rng, bias=True, transposed=False):
    x = _rounded(rng.standard_normal(xs), dtype)
    w = _rounded(rng.standard_normal(wsh), dtype)
    cout = wsh[1] * groups if transposed else wsh[0]
    b = _rounded(rng.standard_normal(cout), dtype) if bias else None
    dims = len(xs) - 2
    xt = _channels_last(x, dtype) if channels_last else _to(x, dtype)
    bt = None if b is None else _to(b, dtype)
    with tuning.recording() as keys:
        plans.clear_all()
        if transposed:
            got = getattr(F, f"conv_transpose{dims}d")(xt, _to(w, dtype), bt, stride=stride, padding=padding,
                                                       groups=groups, dilation=dilation)
        else:
            got = getattr(F, f"conv{dims}d")(xt, _to(w, dtype), bt, stride=stride, padding=padding,
                                             dilation=dilation, groups=groups)
    if channels_last:
        assert got.stride()[1] == 1  # channels-last in, channels-last out (torch's rule)
    k_terms = int(np.prod(wsh[1:])) * (xs[1] if transposed else 1)
    _check(got, reference(x, w, b, stride, padding, dilation, groups, transposed), dtype, k_terms)
    return keys


DEPTHWISE = [
    # (x shape, w shape, stride, padding, dilation, groups): multipliers 1-3, odd sizes, strides, dilations
    ((2, 5, 13), (5, 1, 7), 1, 3, 1, 5),
    ((1, 4, 11), (12, 1, 3), 2, 2, 2, 4),
    ((2, 6, 7, 9), (6, 1, 7, 7), 1, 3, 1, 6),
    ((1, 3, 9, 8), (6, 1, 3, 3), 2, 1, (2, 1), 3),
    ((1, 4, 5, 6, 5), (8, 1, 3, 3, 3), (1, 2, 1), 1, 1, 4),
    ((1, 6, 7, 5), (6, 2, 3, 2), (1, 2), (1, 0), 1, 3),  # two input channels a group
]


@pytest.mark.parametrize("case", DEPTHWISE)
@pytest.mark.parametrize("dtype", _DTYPES)
@pytest.mark.parametrize("channels_last", [False, True])
def test_depthwise_and_small_groups_take_the_direct_kernel(case, dtype, channels_last, rng):
    if channels_last and len(case[0]) == 3:
        pytest.skip("channels-last is a 4-D and 5-D layout")
    keys = _run(*case, dtype, channels_last, rng)
    xs, wsh, groups = case[0], case[1], case[-1]
    # a depthwise one (a channel a group) read channels-innermost has a key of its own, its candidates the
    # channels-inner kernel's too
    depthwise = channels_last and xs[1] == wsh[0] == groups
    assert [k.split("|")[0] for k in keys] == ["depthwise_conv" if depthwise else "direct_conv"]


def _planes_first(monkeypatch):
    """Candidates led by the plane kernel's where it applies (the first, taken on every device)."""
    from nbxtensor.ops.convolution import _Setting
    plain = _Setting.candidates

    def planes_first(self, facts, dtype):
        planes = [dict(PLANES=True, BLOCK_H=h, BLOCK_W=w, num_warps=n) for h, w, n in self.plane_tiles()]
        return planes + plain(self, facts, dtype)
    monkeypatch.setattr(_Setting, "candidates", planes_first)


@pytest.mark.parametrize("case", DEPTHWISE)
@pytest.mark.parametrize("dtype", _DTYPES)
def test_depthwise_by_output_planes(case, dtype, rng, monkeypatch):
    _planes_first(monkeypatch)
    launched = []
    monkeypatch.setattr(plans.PlannedLaunch, "__call__", _recording_call(launched))
    _run(*case, dtype, False, rng, bias=dtype != "float16")
    assert launched == ["conv_direct_planes"]


def test_planes_read_strided_inputs(rng, monkeypatch):
    # columns adjacent but rows and channels sliced: the plane kernel reads through the strides; a
    # channels-last input has no plane candidates (its columns are a channel row apart)
    from nbxtensor.ops.convolution import _Setting
    _planes_first(monkeypatch)
    wide = rng.standard_normal((2, 9, 12, 7)).astype(np.float32)
    w = rng.standard_normal((6, 1, 3, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    plans.clear_all()
    got = F.conv2d(_to(wide)[:, 1:7, ::2], _to(w), _to(b), padding=(0, 2), dilation=(1, 2), stride=(2, 1), groups=6)
    _check(got, reference(wide[:, 1:7, ::2], w, b, (2, 1), (0, 2), (1, 2), 6), "float32", 9)
    x = _channels_last(wide[:, :6], "float32")
    assert not _Setting("conv2d", x, _to(w), None, 1, 1, 1, False, 0, 6).plane_tiles()


def test_planes_counted_window(rng, monkeypatch):
    # more window positions times group channels than are unrolled: the window's rows and columns are loops
    _planes_first(monkeypatch)
    launched = []
    monkeypatch.setattr(plans.PlannedLaunch, "__call__", _recording_call(launched))
    _run((1, 4, 40), (4, 2, 37), 1, 18, 1, 2, "bfloat16", False, rng)
    assert launched == ["conv_direct_planes"]


GEMM = [
    # 3 input channels (flat K spanning channels and window), 16 (a K tile a position, unrolled window),
    # a 1-D window of 67 positions (counted loop), grouped, 3-D
    ((2, 3, 11, 10), (24, 3, 5, 5), 2, 2, 1, 1),
    ((1, 16, 7, 6), (20, 16, 3, 3), 1, 1, (1, 2), 1),
    ((1, 16, 80), (17, 16, 67), 1, 0, 1, 1),
    ((1, 36, 5, 6), (24, 12, 3, 3), 2, 1, 1, 3),
    ((1, 18, 4, 5, 3), (16, 18, 3, 3, 3), (2, 1, 1), 1, 1, 1),
]


@pytest.mark.parametrize("case", GEMM)
@pytest.mark.parametrize("dtype", _DTYPES)
@pytest.mark.parametrize("channels_last", [False, True])
def test_implicit_gemm_forms(case, dtype, channels_last, rng):
    if channels_last and len(case[0]) == 3:
        pytest.skip("channels-last is a 4-D and 5-D layout")
    keys = _run(*case, dtype, channels_last, rng)
    assert [k.split("|")[0] for k in keys] == ["conv"]


@pytest.mark.parametrize("case", [((1, 3, 4, 5), (3, 1, 3, 3), 2, 1, 1, 3),  # depthwise, direct
                                  ((1, 16, 3, 4), (16, 9, 2, 3), 2, 0, 1, 1)])  # implicit GEMM
@pytest.mark.parametrize("channels_last", [False, True])
def test_transposed_routes(case, channels_last, rng):
    xs, wsh, stride, padding, dilation, groups = case
    keys = _run(xs, wsh, stride, padding, dilation, groups, "float32", channels_last, rng, transposed=True)
    assert len(keys) == 1


ONE_BY_ONE = [
    # (x shape, channels_last, bias)
    ((2, 5, 4, 3), False, True),
    ((2, 5, 4, 3), True, True),
    ((1, 6, 3, 2), True, False),
    ((3, 4, 7), False, False),
    ((2, 3, 2, 3, 2), True, True),
    ((2, 3, 2, 3, 2), False, True),
]


@pytest.mark.parametrize("case", ONE_BY_ONE)
@pytest.mark.parametrize("dtype", _DTYPES)
def test_one_by_one_runs_as_a_matrix_product(case, dtype, rng):
    xs, channels_last, bias = case
    keys = _run(xs, (7, xs[1], *(1,) * (len(xs) - 2)), 1, 0, 1, 1, dtype, channels_last, rng, bias=bias)
    assert keys and all(k.split("|")[0] in ("gemm", "gemv") for k in keys)


def test_one_by_one_unbatched_and_strided_input(rng):
    x = rng.standard_normal((4, 3, 5)).astype(np.float32)
    w = rng.standard_normal((6, 4, 1, 1)).astype(np.float32)
    _check(F.conv2d(_to(x), _to(w)), reference(x[None], w, None, 1, 0, 1, 1)[0], "float32", 4)
    # a sliced input is no view of a product operand: the implicit GEMM reads it in place
    wide = rng.standard_normal((1, 4, 3, 10)).astype(np.float32)
    _check(F.conv2d(_to(wide)[:, :, :, ::2], _to(w)), reference(wide[:, :, :, ::2], w, None, 1, 0, 1, 1),
           "float32", 4)


@pytest.mark.parametrize("case", [
    ("conv2d", (2, 6, 5, 5), (6, 1, 3, 3), dict(padding=1, groups=6), True),
    ("conv2d", (2, 16, 5, 5), (8, 16, 3, 3), dict(stride=2), False),
    ("conv2d", (2, 16, 5, 5), (8, 16, 1, 1), {}, True),
    ("conv2d", (2, 16, 5, 5), (8, 16, 1, 1), {}, False),
    ("conv1d", (2, 16, 9), (8, 16, 1), {}, False),
])
def test_key_rule_names_the_keys_a_call_forms(case, rng):
    name, xs, wsh, kwargs, channels_last = case
    x = nbx.tensor(rng.standard_normal(xs).astype(np.float32))
    w = nbx.tensor(rng.standard_normal(wsh).astype(np.float32))
    b = nbx.tensor(rng.standard_normal(wsh[0]).astype(np.float32))
    if channels_last:
        x = x.to(memory_format=nbx.channels_last)
    with tuning.recording() as formed:
        plans.clear_all()
        getattr(F, name)(x, w, b, **kwargs)
    meta = [nbx.empty(t.shape, device="meta").as_strided(t.shape, t.stride()) for t in (x, w, b)]
    with tuning.recording():
        declared = get(name).key(tuning._facts(), *meta, **kwargs)
    assert declared == formed


@pytest.mark.parametrize("dtype", _DTYPES)
def test_candidates_fit_the_device_limits(dtype):
    from nbxtensor.ops.convolution import _Setting
    facts = dict(tuning._facts(), kernels={}, tiles=dict(max_block_m=256, max_block_n=256, max_block_k=128,
                                                         max_stages=4, max_warps=8))
    x = nbx.empty((2, 64, 8, 8), device="meta", dtype=dtype)
    for wsh, groups in (((64, 64, 3, 3), 1), ((64, 1, 7, 7), 64), ((64, 4, 3, 3), 16)):
        setting = _Setting("conv2d", x, nbx.empty(wsh, device="meta", dtype=dtype), None, 1, 1, 1, False, 0,
                           groups)
        configs = setting.candidates(facts, x.dtype)
        assert configs and len({tuple(sorted(c.items())) for c in configs}) == len(configs)
        for c in configs:
            assert c["num_warps"] <= 8 and c.get("BLOCK_M", 0) <= 256


@pytest.mark.parametrize("case", [DEPTHWISE[2], DEPTHWISE[4], GEMM[0], GEMM[1], GEMM[2]])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_staged_candidates_copy_channels_innermost_first(case, dtype, rng, monkeypatch):
    # the first candidate runs: put the staged ones first
    from nbxtensor.ops.convolution import _Setting
    plain = _Setting.candidates

    def staged_first(self, facts, dtype):
        configs = plain(self, facts, dtype)
        return [dict(c, STAGE=True) for c in configs] if self.stages() else configs
    monkeypatch.setattr(_Setting, "candidates", staged_first)
    _run(*case, dtype, False, rng)


@pytest.mark.parametrize("case", [GEMM[1], GEMM[4]])
def test_staging_copies_only_the_operand_not_channels_innermost(case, rng, monkeypatch):
    # a channels-last input beside an NCHW weight: the weight alone is staged
    from nbxtensor.ops.convolution import _Setting
    plain = _Setting.candidates
    monkeypatch.setattr(_Setting, "candidates",
                        lambda self, facts, dtype: [dict(c, STAGE=True) for c in plain(self, facts, dtype)])
    names = []
    monkeypatch.setattr(plans.PlannedLaunch, "__call__", _recording_call(names))
    _run(*case, "bfloat16", True, rng)
    assert names == ["conv_stage_channels_inner", "conv_implicit_gemm"]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_staging_reads_strided_operands(dtype, rng, monkeypatch):
    # the staging copy merges an operand's spatial dims only where they are contiguous: a sliced input
    # (every other column, a channel window) and a weight stored with its window transposed are read as
    # positions that are no single run
    from nbxtensor.ops.convolution import _Setting
    plain = _Setting.candidates
    monkeypatch.setattr(_Setting, "candidates",
                        lambda self, facts, dtype: [dict(c, STAGE=True) for c in plain(self, facts, dtype)])
    wide = _rounded(rng.standard_normal((2, 20, 5, 12)), dtype)
    w = _rounded(rng.standard_normal((18, 17, 3, 2)), dtype)
    x = _to(wide, dtype)[:, 2:19, :, ::2]
    wt = _to(np.ascontiguousarray(w.transpose(0, 1, 3, 2)), dtype).transpose(2, 3)
    plans.clear_all()
    got = F.conv2d(x, wt, None, padding=1)
    _check(got, reference(wide[:, 2:19, :, ::2], w, None, 1, 1, 1, 1), dtype, 17 * 6)


def test_cost_declares_the_staging_workspace():
    x = nbx.empty((2, 8, 5, 5), device="meta")
    w = nbx.empty((8, 8, 3, 3), device="meta")
    # one allocation, rounded up to the scratch alignment (256 bytes): the staged input (400 float32) and
    # weight (576), or the float32 partials of the most splits (16) of the 2 x 8 x 3 x 3 output
    assert get("conv2d").cost(x, w).workspace == -(-max(1600 + 2304, 16 * 144 * 4) // 256) * 256
    # a transposed convolution stages nothing: its partials alone (a 2 x 8 x 7 x 7 output)
    assert get("conv_transpose2d").cost(x, w).workspace == -(-(16 * 784 * 4) // 256) * 256


@settings(max_examples=examples(12), deadline=None)
@given(n=st.integers(1, 2), groups=st.integers(1, 3), cig=st.sampled_from([1, 2, 5, 17]),
       cog=st.sampled_from([1, 3, 18]), h=st.integers(3, 6), w=st.integers(3, 6), kh=st.integers(1, 3),
       kw=st.integers(1, 3), stride=st.integers(1, 2), padding=st.integers(0, 1), dilation=st.integers(1, 2),
       channels_last=st.booleans())
def test_conv2d_routes_property(n, groups, cig, cog, h, w, kh, kw, stride, padding, dilation, channels_last):
    if min(h, w) + 2 * padding < dilation * (max(kh, kw) - 1) + 1:
        return
    rng = np.random.default_rng(h * 31 + w * 7 + kh)
    _run((n, cig * groups, h, w), (cog * groups, cig, kh, kw), stride, padding, dilation, groups, "float32",
         channels_last, rng, bias=bool(groups % 2))


@pytest.mark.parametrize("route", ["direct", "planes", "depthwise channels-last", "implicit GEMM", "split",
                                   "transposed"])
def test_a_strided_bias_is_read_through_its_stride(route, rng, monkeypatch):
    # every other element of a wider buffer: each kernel that adds the bias steps through it
    from nbxtensor.ops import convolution
    xs, wsh, kwargs = ((1, 6, 5, 7), (6, 1, 3, 3), dict(padding=1, groups=6))
    if route == "planes":
        _planes_first(monkeypatch)
    elif route in ("implicit GEMM", "split", "transposed"):
        xs, wsh, kwargs = ((1, 16, 5, 6), (8, 16, 3, 3), dict(padding=1))
    if route == "split":  # every convolution starved of programs: its partials summed by a second launch
        monkeypatch.setattr(convolution, "split_below_programs", lambda facts: 1 << 30)
    transposed = route == "transposed"
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(wsh if not transposed else (16, 8, 3, 3)).astype(np.float32)
    wide = rng.standard_normal(32).astype(np.float32)
    cout = w.shape[1] if transposed else w.shape[0]
    xt = _channels_last(x, "float32") if route == "depthwise channels-last" else _to(x)
    plans.clear_all()
    call = F.conv_transpose2d if transposed else F.conv2d
    launched = []
    monkeypatch.setattr(plans.PlannedLaunch, "__call__", _recording_call(launched))
    got = call(xt, _to(w), _to(wide)[:2 * cout:2], **kwargs)
    plans.clear_all()
    assert launched[-1] == {"direct": "conv_direct", "planes": "conv_direct_planes",
                            "depthwise channels-last": "conv_depthwise_channels_inner", "split": "conv_split_sum"}.get(
                                route, "conv_implicit_gemm")
    groups = kwargs.get("groups", 1)
    k_terms = int(np.prod(w.shape[1:])) * (xs[1] if transposed else 1)
    _check(got, reference(x, w, wide[:2 * cout:2], 1, kwargs["padding"], 1, groups, transposed), "float32", k_terms)
