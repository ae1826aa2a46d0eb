"""A convolution with an inference batch norm and an activation in its epilogue (``convolution_batch_norm``)
on every route, against test_convolution's NumPy float64 reference; the unfused ops; and the graph pass that
makes it of a convolution, a batch norm and a ReLU or SiLU.

Tolerance, element by element: the fused op rounds once, so its error is the float32 error of the
convolution (K rounded products, about K * 2^-24 of the sum of |products|) times the norm's |scale|, a few
float32 roundings of the norm's terms (|y - mean| * |scale| and |shift|), and one rounding to the output's
dtype (half its unit roundoff u times |result|).

The tensors live on ``TEST_DEVICE``; every tuned launch takes its first candidate (``first_candidate``), and a
test that asks for a route a GPU would not take by its facts forces it, so that each route's epilogue runs on
every device."""
import numpy as np
import pytest

import nbxtensor.nn.functional as F
from nbxtensor import allocation, graph
from nbxtensor.kernels import conv as K
from nbxtensor.kernels import matmul as MK
from nbxtensor.launch import capture
from nbxtensor.ops import convolution, matmul_gemv, matmul_plans, plans
from nbxtensor.ops.registry import get
from tests.conftest import TEST_DEVICE, to_nbx
from tests.test_conv_routes import _channels_last
from tests.test_conv_split import candidates_with
from tests.test_convolution import _rounded, _to, reference
from tests.test_graph_arena import _Builder

pytestmark = pytest.mark.usefixtures("first_candidate")


@pytest.fixture(autouse=True)
def nothing_starved(monkeypatch):
    """Shapes this small starve a GPU of programs (its facts name multiprocessors; the CPU's name none), which
    would take a 1x1 convolution off the product and give its first setting a split: every device routes them
    as the CPU does, and the split test starves them itself."""
    monkeypatch.setattr(convolution, "split_below_programs", lambda facts: 0)

_DTYPES = ["float32", "float16", "bfloat16"]
# unit roundoff of each output dtype: one rounding moves a value by at most u * |value|
_UNIT = {"float32": 2.0 ** -24, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}
_F32 = 2.0 ** -24
_EPS = 1e-5
_ACTIVATIONS = ("relu", "silu", "none", "relu6", "hardswish")

fused_op = get("convolution_batch_norm").impl

# (x shape, w shape, stride, padding, dilation, groups, transposed, the kernel the route launches)
ROUTES = {
    "implicit_gemm": ((2, 16, 6, 5), (24, 16, 3, 3), 1, 1, 1, 1, False, K.conv_implicit_gemm),
    "flat_k": ((1, 3, 7, 6), (24, 3, 5, 5), 2, 1, 1, 1, False, K.conv_implicit_gemm),
    "direct": ((1, 4, 6, 5), (8, 1, 3, 3), 1, 1, 1, 4, False, K.conv_direct),
    "depthwise": ((2, 6, 7, 5), (6, 1, 3, 3), 1, 1, 1, 6, False, None),  # channels-last: its own kernel
    "transposed": ((1, 16, 4, 3), (16, 20, 3, 3), 2, 1, 1, 1, True, K.conv_implicit_gemm),
    "conv1d": ((2, 16, 9), (20, 16, 3), 1, 2, 2, 1, False, K.conv_implicit_gemm),
    "product": ((2, 8, 4, 3), (12, 8, 1, 1), 1, 0, 1, 1, False, MK.gemm),  # the 1x1 product, norm in its epilogue
}


def _norm_vectors(channels, dtype, rng):
    """(weight, bias, running mean, running variance), rounded to ``dtype``: means and shifts of the size of
    the convolution's outputs, variances away from zero."""
    vectors = (rng.standard_normal(channels) * 0.5 + 1, rng.standard_normal(channels),
               rng.standard_normal(channels), rng.random(channels) + 0.25)
    return [_rounded(v, dtype) for v in vectors]


def _activate(y, activation):
    if activation == "relu":
        return np.maximum(y, 0)
    if activation == "silu":
        return y / (1 + np.exp(-y))
    if activation == "relu6":
        return np.clip(y, 0, 6)
    if activation == "hardswish":
        return y * np.clip(y + 3, 0, 6) / 6
    return y


def _operands(case, dtype, rng, bias=True):
    xs, wsh, stride, padding, dilation, groups, transposed, _ = case
    x, w = _rounded(rng.standard_normal(xs), dtype), _rounded(rng.standard_normal(wsh), dtype)
    cout = wsh[1] * groups if transposed else wsh[0]
    b = _rounded(rng.standard_normal(cout), dtype) if bias else None
    return x, w, b, _norm_vectors(cout, dtype, rng)


def _expected(x, w, b, vectors, case, activation):
    """(the float64 result, the bound on a fused result's error before its last rounding), element by
    element."""
    _, wsh, stride, padding, dilation, groups, transposed, _ = case
    weight, shift, mean, var = (np.asarray(v, np.float64).reshape(-1, *(1,) * (len(wsh) - 2)) for v in vectors)
    convolved = reference(x, w, b, stride, padding, dilation, groups, transposed)
    magnitude = reference(np.abs(x), np.abs(w), None if b is None else np.abs(b), stride, padding, dilation, groups,
                          transposed)
    scale = weight / np.sqrt(var + _EPS)
    normed = (convolved - mean) * scale + shift
    k_terms = int(np.prod(wsh[1:])) * (x.shape[1] if transposed else 1) + 1
    # the norm's float32 terms and the activation's own work (silu's exp and division, hardswish's product
    # and division) a few roundings each; their slopes (silu's below 1.1, hardswish's at most 1.5) carry the
    # error before them
    float32_error = (k_terms * _F32 * magnitude * np.abs(scale)
                     + 8 * _F32 * (np.abs(convolved - mean) * np.abs(scale) + np.abs(shift) + np.abs(mean * scale)))
    slope = {"silu": 1.1, "hardswish": 1.5}.get(activation, 1)
    float32_error = slope * float32_error
    return _activate(normed, activation), float32_error


def _arguments(case, operands, dtype, channels_last, activation):
    """The fused op's arguments, its tensors on the test device (their conversions launch copies)."""
    xs, wsh, stride, padding, dilation, groups, transposed, _ = case
    x, w, b, vectors = operands
    dims = len(xs) - 2
    xt = _channels_last(x, dtype) if channels_last else _to(x, dtype)
    output_padding = (0,) * dims
    return (xt, _to(w, dtype), None if b is None else _to(b, dtype), (stride,) * dims, (padding,) * dims,
            (dilation,) * dims, transposed, output_padding, groups, *(_to(v, dtype) for v in vectors), _EPS,
            activation)


def _call(case, operands, dtype, channels_last, activation):
    return fused_op(*_arguments(case, operands, dtype, channels_last, activation))


def _captured_call(case, operands, dtype, channels_last, activation):
    """The fused op's result on fresh plans and the launches it made (its operands made before, plans dropped
    after)."""
    arguments = _arguments(case, operands, dtype, channels_last, activation)
    plans.clear_all()
    with capture() as captured:
        got = fused_op(*arguments)
    plans.clear_all()
    return got, captured.launches


def _check(got, want, float32_error, dtype):
    got = got.to("float32").numpy().astype(np.float64)
    assert got.shape == want.shape
    # one rounding to the dtype of the float32 result (itself float32_error from want); half of float16's
    # subnormal spacing (2^-24) covers results rounded among its subnormals
    bound = _UNIT[dtype] * (np.abs(want) + float32_error) + float32_error + 2.0 ** -25
    excess = np.abs(got - want) - bound
    assert excess.max() <= 0, f"worst element off by {excess.max()} past its bound"


def _channels_inner_first(monkeypatch):
    """A depthwise convolution read channels-last takes its own kernel's settings first (a GPU lists the
    direct kernel's before them; the interpreter lists only one of them)."""
    listed = convolution._Setting.candidates
    monkeypatch.setattr(convolution._Setting, "candidates", lambda self, facts, dtype: sorted(
        listed(self, facts, dtype), key=lambda config: not config.get("CHANNELS_INNER")))


@pytest.mark.parametrize("route", sorted(ROUTES))
@pytest.mark.parametrize("dtype", _DTYPES)
@pytest.mark.parametrize("channels_last", [False, True])
def test_fused_matches_the_float64_reference(route, dtype, channels_last, monkeypatch, rng):
    case = ROUTES[route]
    if channels_last and len(case[0]) not in (4, 5):
        pytest.skip("channels-last is a 4-D and 5-D layout")
    activation = _ACTIVATIONS[(sorted(ROUTES).index(route) + _DTYPES.index(dtype)) % len(_ACTIVATIONS)]
    if route == "depthwise" and channels_last:
        _channels_inner_first(monkeypatch)
    got, launches = _captured_call(case, operands := _operands(case, dtype, rng), dtype, channels_last, activation)
    kernels = [launch[0] for launch in launches]
    if case[-1] is not None:
        assert case[-1] in kernels
    if route == "depthwise" and channels_last:
        assert K.conv_depthwise_channels_inner in kernels
    if route == "product":  # the product's one launch: no batch norm or activation after it
        assert kernels == [MK.gemm]
    if channels_last:
        assert got.stride()[1] == 1
    _check(got, *_expected(*operands, case, activation), dtype)


@pytest.mark.parametrize("route", ["implicit_gemm", "flat_k", "transposed"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_split_reduction_applies_the_norm_when_it_sums(route, dtype, monkeypatch, rng):
    """A starved convolution's partials are summed by conv_split_sum, whose epilogue takes the norm. Its first
    setting splits as far as the shape allows (the interpreter's one setting does; a GPU's first does not)."""
    monkeypatch.setattr(convolution, "split_below_programs", lambda facts: 1 << 30)
    candidates_with(monkeypatch, SPLITS=convolution._SPLIT_MAX)
    case = ROUTES[route]
    operands = _operands(case, dtype, rng)
    got, launches = _captured_call(case, operands, dtype, False, "relu")
    assert K.conv_split_sum in [launch[0] for launch in launches]
    _check(got, *_expected(*operands, case, "relu"), dtype)


@pytest.mark.parametrize("dtype", _DTYPES)
def test_the_plane_kernel_applies_the_norm(dtype, monkeypatch, rng):
    """An NCHW grouped convolution by output planes (a GPU candidate, forced here)."""
    monkeypatch.setattr(convolution._Setting, "candidates",
                        lambda self, facts, dtype: [dict(PLANES=True, BLOCK_H=h, BLOCK_W=w, num_warps=n)
                                                    for h, w, n in self.plane_tiles()][:1])
    case = ROUTES["direct"]
    operands = _operands(case, dtype, rng)
    got, launches = _captured_call(case, operands, dtype, False, "silu")
    assert K.conv_direct_planes in [launch[0] for launch in launches]
    _check(got, *_expected(*operands, case, "silu"), dtype)


def _tiles(**flags):
    """A GEMM setting of 16 x 16 tiles (several a product here, ragged at its edges) with ``flags``."""
    return dict(BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, num_stages=1, num_warps=1, GROUP_M=2, **flags)


def _force_gemm(monkeypatch, config):
    monkeypatch.setattr(matmul_plans, "gemm_candidates", lambda *args, **kwargs: [dict(config)])


def _force_gemv_split(monkeypatch):
    monkeypatch.setattr(matmul_gemv, "gemv_candidates",
                        lambda facts, m, n, k: [dict(BLOCK_N=16, BLOCK_K=16, SPLITS=3, num_warps=1)])


def _float32_planes(memory):
    """Float32 products on bfloat16 parts whatever the device: split in the GEMM's registers, or (``memory``)
    planes in memory in K chunks of 64 (no floor on their workspace), the norm in the last chunk's product."""
    def force(monkeypatch):
        monkeypatch.setattr(matmul_plans, "_by_planes", lambda dtype, facts: dtype.name == "float32")
        if memory:
            listed = matmul_plans.gemm_candidates
            monkeypatch.setattr(matmul_plans, "gemm_candidates",
                                lambda *args, parts=False, **kwargs: [] if parts else listed(*args, **kwargs))
            monkeypatch.setattr(matmul_plans, "_PLANE_WORKSPACE_FLOOR", 0)
    return force


# each path a 1x1 convolution's product may take: (input shape, output channels, setting forced, the dtypes it
# serves, its launches). Input channels are a multiple of 8 and 20 positions and 20 output channels make
# 16-wide tiles ragged along rows and columns (but the GEMV's); 512 input channels make a half-precision
# product split-worthy (``split_max``).
_WIDE, _GEMV_SHAPE = (1, 512, 4, 5), (1, 48, 3, 3)
PRODUCT_PATHS = {
    "gemm": ((2, 8, 4, 5), 20, None, _DTYPES, [MK.gemm]),
    # 12 output channels (NCHW, one image) or 9 positions (channels-last): a GEMV's rows; K split in three
    "gemv": (_GEMV_SHAPE, 12, None, _DTYPES, [MK.gemv]),
    "gemv_split": (_GEMV_SHAPE, 12, _force_gemv_split, _DTYPES, [MK.gemv]),
    "split": (_WIDE, 20, lambda mp: _force_gemm(mp, _tiles(SPLITS=3)), ["float16", "bfloat16"],
              [MK.gemm, MK.gemv_combine]),
    "tiles": (_WIDE, 20, lambda mp: _force_gemm(mp, _tiles(PERSISTENT=True, TMA=True)), _DTYPES, [MK.gemm_tiles]),
    # 4 tiles on 3 SMs: the last one cut into K pieces
    "wave_split": (_WIDE, 20, lambda mp: _force_gemm(mp, _tiles(PERSISTENT=True, SPLITS=8)), ["float16", "bfloat16"],
                   [MK.gemm_tiles]),
    "batches": ((2, 8, 4, 5), 20, lambda mp: _force_gemm(mp, _tiles(PROGRAMS_PER_SM=2)), _DTYPES,
                [MK.gemm_batches]),
    "planes_in_registers": ((1, 40, 4, 5), 20, _float32_planes(False), ["float32"], [MK.gemm]),
    # 150 input channels: K chunks of 64, 64 and 22, each both operands' planes then their product
    "planes_in_memory": ((1, 150, 4, 5), 20, _float32_planes(True), ["float32"],
                         [MK.split_bf16_planes, MK.split_bf16_planes, MK.gemm] * 3),
}


@pytest.mark.parametrize("path", sorted(PRODUCT_PATHS))
@pytest.mark.parametrize("dtype", _DTYPES)
@pytest.mark.parametrize("channels_last", [False, True])
def test_the_1x1_product_applies_the_norm_on_every_path(path, dtype, channels_last, monkeypatch, rng):
    """A 1x1 convolution runs as the product, whose epilogue applies the norm and the activation (one an
    output channel: a row of the NCHW form's matrices, a column of the channels-last one's) on whichever
    path its setting takes: the product's launches alone, no temporary, one rounding."""
    x_shape, cout, force, dtypes, launches = PRODUCT_PATHS[path]
    if dtype not in dtypes:
        pytest.skip(f"{path} serves {', '.join(dtypes)}")
    monkeypatch.setattr(matmul_plans, "multiprocessors", lambda dev: 3)  # a wave split's last wave on 3 SMs
    monkeypatch.setattr(allocation, "_arrival_counters", {})
    if force is not None:
        force(monkeypatch)
    case = (x_shape, (cout, x_shape[1], 1, 1), 1, 0, 1, 1, False, None)
    activation = _ACTIVATIONS[(sorted(PRODUCT_PATHS).index(path) + _DTYPES.index(dtype)) % len(_ACTIVATIONS)]
    got, launched = _captured_call(case, operands := _operands(case, dtype, rng), dtype, channels_last, activation)
    assert [launch[0] for launch in launched] == launches
    if path in ("split", "wave_split"):
        assert launched[0][4]["SPLIT"]
    _check(got, *_expected(*operands, case, activation), dtype)
    if path == "wave_split":
        assert not allocation.arrival_counters(got.device).numpy().any()


def test_the_1x1_product_route_declares_no_temporary_for_the_norm():
    """The fused op's workspace is the convolution's own (the product's temporaries, where a device may take
    them, declared), nothing for a norm after it: a 1x1 expansion's output (ResNet-50's 64 -> 256 channels at batch
    32), four times its input, would outgrow them."""
    import nbxtensor as nbx
    meta = "meta"
    x, w = nbx.empty((32, 64, 56, 56), device=meta), nbx.empty((256, 64, 1, 1), device=meta)
    vectors = [nbx.empty((256,), device=meta) for _ in range(4)]
    arguments = (x, w, None, (1, 1), (0, 0), (1, 1), False, (0, 0), 1)
    fused = get("convolution_batch_norm").cost(*arguments, *vectors, _EPS, "relu")
    plain = get("convolution").cost(*arguments)
    assert fused.workspace == plain.workspace
    # the product's own temporaries are declared (a float32 product's bfloat16 planes, where a device takes them)
    assert plain.workspace >= matmul_plans._product_workspace(nbx.float32, 1, 32 * 56 * 56, 64, 256) > 0
    assert fused.bytes_written == plain.bytes_written == 32 * 256 * 56 * 56 * 4


def test_a_product_route_without_the_epilogue_refuses_a_norm(rng):
    """Integer products (summed exactly by the wide product, another kernel) have no norm in their epilogue:
    asked for one, the plan says so rather than leave it out."""
    a = to_nbx(rng.integers(-5, 5, (3, 4)).astype(np.int64))
    norm = matmul_gemv.ProductNorm(per_row=True, eps=_EPS, activation=0, dtype=a.dtype)
    with pytest.raises(RuntimeError, match="a product routed 'wide' takes no batch norm in its epilogue"):
        matmul_plans.planned_product("matmul", a, a.transpose(0, 1), a.dtype, norm=norm)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_fused_is_within_the_unfused_ops_roundings(dtype, rng):
    """The unfused ops round the convolution's result and the norm's: the fused result lies within those
    two roundings (u of |convolution| * |scale| and u of |norm|) and its own one of the unfused result."""
    case = ROUTES["implicit_gemm"]
    operands = _operands(case, dtype, rng)
    x, w, b, (weight, shift, mean, var) = operands
    fused = _call(case, operands, dtype, False, "relu").to("float32").numpy()
    convolved = F.conv2d(_to(x, dtype), _to(w, dtype), _to(b, dtype), padding=1)
    unfused = F.relu(F.batch_norm(convolved, *(_to(v, dtype) for v in (mean, var, weight, shift)), eps=_EPS))
    unfused = unfused.to("float32").numpy().astype(np.float64)
    scale = np.abs(weight / np.sqrt(var.astype(np.float64) + _EPS)).reshape(-1, 1, 1)
    u = _UNIT[dtype]
    bound = u * np.abs(convolved.to("float32").numpy()) * scale + 2 * u * np.abs(unfused) + 1e-3 * u
    assert np.all(np.abs(fused - unfused) <= bound)
    assert np.any(fused != unfused)  # the two do round differently somewhere


@pytest.mark.parametrize("route", ["implicit_gemm", "product"])
def test_strided_norm_vectors_are_read_through_their_strides(route, rng):
    """Norm vectors that are every other element of longer ones (a strided view) give what their dense copies
    give; the cost rule declares the copies it makes of them."""
    case = ROUTES[route]
    x, w, b, vectors = _operands(case, "float32", rng)
    wider = [np.repeat(v, 2) for v in vectors]  # element 2i of each is the vector's element i
    strided = [_to(v)[::2] for v in wider]
    arguments = list(_arguments(case, (x, w, b, vectors), "float32", False, "relu"))
    arguments[9:13] = strided
    got = fused_op(*arguments)
    _check(got, *_expected(x, w, b, vectors, case, "relu"), "float32")
    dense = get("convolution_batch_norm").cost(*_arguments(case, (x, w, b, vectors), "float32", False, "relu"))
    assert get("convolution_batch_norm").cost(*arguments).workspace >= dense.workspace + 4 * 8 * 4


def test_bad_norm_arguments_are_named(rng):
    x, w = _to(rng.standard_normal((1, 2, 4, 4))), _to(rng.standard_normal((3, 2, 3, 3)))
    good = [_to(np.ones(3)) for _ in range(4)]
    conv = ((1, 1), (1, 1), (1, 1), False, (0, 0), 1)
    with pytest.raises(RuntimeError, match=r"running_mean of size \[3\]"):
        fused_op(x, w, None, *conv, good[0], good[1], _to(np.ones(4)), good[3], _EPS)
    with pytest.raises(RuntimeError, match="norm_bias is required"):
        fused_op(x, w, None, *conv, good[0], None, good[2], good[3], _EPS)
    with pytest.raises(TypeError, match="one dtype"):
        fused_op(x, w, None, *conv, good[0], good[1], good[2], good[3].to("float16"), _EPS)
    with pytest.raises(ValueError, match="unknown activation 'gelu'"):
        fused_op(x, w, None, *conv, *good, _EPS, "gelu")
    with pytest.raises(ValueError, match="eps must be a non-negative number"):
        fused_op(x, w, None, *conv, *good, -1.0)
    with pytest.raises(RuntimeError, match="expected a batched input"):
        fused_op(x[0], w, None, *conv, *good, _EPS)


def _conv_norm_graph(g, x, cout, training, activation, weights, dtype="float32"):
    """convolution -> batch_norm (training or not) -> activation in ``g``."""
    conv = g.op("aten::convolution.default", [x, g.param("w", weights["w"]), None, [1, 1], [1, 1], [1, 1], False,
                                              [0, 0], 1], [2, cout, 5, 4], dtype)
    vectors = [g.param(name, weights[name]) for name in ("weight", "bias", "mean", "var")]
    normed = g.op("aten::batch_norm.default", [conv, *vectors, training, 0.1, _EPS, True], [2, cout, 5, 4], dtype)
    if activation is None:
        return normed
    if activation == "relu6":  # as torch.export writes nn.ReLU6
        return g.op("aten::hardtanh.default", [normed, 0.0, 6.0], [2, cout, 5, 4], dtype)
    return g.op(f"aten::{activation}.default", [normed], [2, cout, 5, 4], dtype)


def _graph_weights(cin, cout, rng):
    weight, shift, mean, var = _norm_vectors(cout, "float32", rng)
    return {"w": rng.standard_normal((cout, cin, 3, 3)).astype(np.float32), "weight": weight.astype(np.float32),
            "bias": shift.astype(np.float32), "mean": mean.astype(np.float32), "var": var.astype(np.float32)}


@pytest.mark.parametrize("activation", ["relu", "silu", "relu6", "hardswish", None])
def test_a_graph_folds_the_norm_and_activation_into_the_convolution(activation, tmp_path, rng):
    """convolution, inference batch_norm and relu/silu/relu6/hardswish load as one step; its launch keys are the
    convolution's (the census's); values within the fused op's bound."""
    cin, cout = 16, 24
    weights = _graph_weights(cin, cout, rng)
    g = _Builder({})
    x = g.input("x", [2, cin, 5, 4])
    out = _conv_norm_graph(g, x, cout, False, activation, weights)
    directory = g.write(tmp_path, [x], [out])
    model = graph.load(directory, device=TEST_DEVICE)
    expected_fusions = {"convolution_batch_norm": 1}
    if activation:
        expected_fusions["convolution_batch_norm_activation"] = 1
    assert model.fusions == expected_fusions
    assert [(s.aten, s.kwargs) for s in model.steps] == [("nbx::convolution_batch_norm",
                                                          {"activation": activation or "none"})]
    value = rng.standard_normal((2, cin, 5, 4)).astype(np.float32)
    case = ((2, cin, 5, 4), (cout, cin, 3, 3), 1, 1, 1, 1, False, None)
    vectors = [weights[name] for name in ("weight", "bias", "mean", "var")]
    want, float32_error = _expected(value, weights["w"], None, vectors, case, activation)
    _check(model(value), want, float32_error, "float32")


def test_a_training_batch_norm_is_never_folded(tmp_path, rng):
    """A batch norm in training mode normalises by the batch's statistics, which need the whole output:
    the steps stay as they are."""
    weights = _graph_weights(4, 6, rng)
    g = _Builder({})
    x = g.input("x", [2, 4, 5, 4])
    out = _conv_norm_graph(g, x, 6, True, "relu", weights)
    model = graph.load(g.write(tmp_path, [x], [out]), device=TEST_DEVICE)
    assert model.fusions == {}
    assert [s.aten for s in model.steps] == ["aten::convolution.default", "aten::batch_norm.default",
                                             "aten::relu.default"]


def test_a_convolution_read_elsewhere_keeps_its_norm_apart(tmp_path, rng):
    """The convolution's own result is a graph output too: nothing fuses."""
    weights = _graph_weights(4, 6, rng)
    g = _Builder({})
    x = g.input("x", [2, 4, 5, 4])
    out = _conv_norm_graph(g, x, 6, False, None, weights)
    conv = {"tensor": g.ops[0]["outputs"][0]}
    model = graph.load(g.write(tmp_path, [x], [out, conv]), device=TEST_DEVICE)
    assert model.fusions == {}
