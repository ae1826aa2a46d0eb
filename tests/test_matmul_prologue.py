"""The products with a prologue (``ops/matmul_prologue.py``): the RMS norm of the rows (after a residual
add, or alone) or the gated activation computed in the GEMV that consumes them, against NumPy float64
references and against the unfused pair of ops; the decode step that uses them."""
import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.ops import matmul_prologue, plans
from nbxtensor.ops.matmul_prologue import act_and_mul_linear, add_rms_norm_linear, rms_norm_linear
from nbxtensor.ops.normalization import add_rms_norm, rms_norm
from nbxtensor.shape import ShapeError

from .conftest import TEST_DEVICE

F = nbx.nn.functional
UNIT = {"float32": 2.0 ** -24, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}
EPS = 1e-6


def _tensor(rng, shape, dtype):
    """A tensor of ``dtype`` and its exact values in float64."""
    t = nbx.tensor(rng.standard_normal(shape).astype(np.float32), device=TEST_DEVICE).to(dtype)
    return t, _values(t)


def _values(t) -> np.ndarray:
    return t.to("float32").cpu().numpy().astype(np.float64)


def _assert_near(out, rows64, w64, b64, dtype):
    """``out`` against rows64 @ w64.T + b64. Bound: the input rows rounded to the dtype (a few units each:
    the sum, the normed or activated value), K products and sums in float32, the output rounded to the
    dtype, all relative to the magnitudes |rows| @ |w|.T + |b|."""
    k = w64.shape[1]
    reference = rows64 @ w64.T + (0 if b64 is None else b64)
    magnitude = np.abs(rows64) @ np.abs(w64).T + (0 if b64 is None else np.abs(b64))
    bound = (4 * UNIT[dtype] + (k + 4) * UNIT["float32"]) * magnitude
    np.testing.assert_array_less(np.abs(_values(out) - reference), bound + 1e-30)


def _rms_rows(x64, norm64):
    return x64 / np.sqrt(np.mean(x64 * x64, axis=1, keepdims=True) + EPS) * norm64


@pytest.fixture(params=["one split", "split K", "pipelined"])
def splits(request, monkeypatch, first_candidate):
    """Whether K is split: the GEMV's first setting; K split three ways in tiles of 16 (every program still
    norms whole rows); or the first setting with its K loop pipelined (compiled: each step's loads copied ahead
    into shared memory; the same sums in the same order as the unfused product's first setting). The first
    candidate on every device, where a GPU would time them all inside the tests' capture."""
    offered = matmul_prologue.gemv_candidates
    if request.param == "split K":
        monkeypatch.setattr(matmul_prologue, "gemv_candidates",
                            lambda facts, m, n, k: [dict(BLOCK_N=16, BLOCK_K=16, SPLITS=3, num_warps=4)])
    elif request.param == "pipelined":
        monkeypatch.setattr(matmul_prologue, "gemv_candidates",
                            lambda facts, m, n, k: [dict(offered(facts, m, n, k)[0], LOOP_STAGES=3)])
    plans.clear_all()
    yield request.param == "split K"
    plans.clear_all()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("rows", [1, 3, 16])
@pytest.mark.parametrize("residual", [False, True])
def test_rms_norm_linear_matches_float64_and_the_unfused_ops(rng, splits, dtype, rows, residual):
    k, n = 45, 37  # odd: ragged against every tile, several column programs when split
    x, x64 = _tensor(rng, (rows, k), dtype)
    r, r64 = _tensor(rng, (rows, k), dtype)
    norm, norm64 = _tensor(rng, (k,), dtype)
    w, w64 = _tensor(rng, (n, k), dtype)
    b, b64 = _tensor(rng, (n,), dtype)
    if residual:
        with nbx.launch.capture() as recorded:
            out, summed = add_rms_norm_linear(x, r, norm, w, b, EPS)
        kernels = [launch[0].fn.__name__ for launch in recorded.launches]
        assert kernels == ["gemv_prologue"]  # split or not: the last split adds the splits
        h, expected_sum = add_rms_norm(x, r, (k,), norm, EPS)
        # the sum is the unfused add's, bit for bit, written once whatever the programs and splits
        np.testing.assert_array_equal(summed.numpy().view(np.uint8), expected_sum.numpy().view(np.uint8))
        rows64 = _rms_rows(_values(summed), norm64)
    else:
        out = rms_norm_linear(x, norm, w, b, EPS)
        h = rms_norm(x, (k,), norm, EPS)
        rows64 = _rms_rows(x64, norm64)
    assert out.shape == (rows, n) and out.dtype == x.dtype
    _assert_near(out, rows64, w64, b64, dtype)
    if not splits:
        # the same rounded rows through the same GEMV: the unfused pair's bits
        np.testing.assert_array_equal(out.numpy().view(np.uint8), F.linear(h, w, b).numpy().view(np.uint8))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("rows", [1, 5])
@pytest.mark.parametrize("activation", ["silu", "gelu_tanh"])
def test_act_and_mul_linear_matches_float64_and_the_unfused_ops(rng, splits, dtype, rows, activation):
    k, n = 33, 19
    x, x64 = _tensor(rng, (rows, 2 * k), dtype)
    w, w64 = _tensor(rng, (n, k), dtype)
    gate, up = x64[:, :k], x64[:, k:]
    if activation == "silu":
        activated = gate / (1 + np.exp(-gate))
    else:
        activated = 0.5 * gate * (1 + np.tanh(np.sqrt(2 / np.pi) * (gate + 0.044715 * gate ** 3)))
    out = act_and_mul_linear(x, w, activation=activation)
    assert out.shape == (rows, n) and out.dtype == x.dtype
    _assert_near(out, activated * up, w64, None, dtype)
    if not splits:
        unfused = F.linear(F.act_and_mul(x, activation=activation), w)
        np.testing.assert_array_equal(out.numpy().view(np.uint8), unfused.numpy().view(np.uint8))


def test_strided_inputs_are_read_in_place(rng):
    """Rows sliced out of a wider buffer (a joined projection's part) and a transposed weight."""
    k, n = 24, 20
    wide, _ = _tensor(rng, (3, 2 * k), "float32")
    x = wide[:, k:]
    norm, norm64 = _tensor(rng, (k,), "float32")
    w_t, _ = _tensor(rng, (k, n), "float32")
    w = w_t.t()
    _assert_near(rms_norm_linear(x, norm, w, None, EPS), _rms_rows(_values(x), norm64), _values(w), None, "float32")


@pytest.mark.parametrize("call, problem", [
    (lambda t: rms_norm_linear(t(17, 8), t(8), t(4, 8)), "1 to 16 rows"),
    (lambda t: rms_norm_linear(t(2, 8), t(8), t(4, 6)), "does not take 8 input features"),
    (lambda t: rms_norm_linear(t(2, 8), t(7), t(4, 8)), "norm_weight must be a float vector of the 8"),
    (lambda t: rms_norm_linear(t(2, 8), t(8), t(4, 8).to("bfloat16")), "weight is bfloat16 but the input is float32"),
    (lambda t: add_rms_norm_linear(t(2, 8), t(3, 8), t(8), t(4, 8)), "residual has shape [3, 8], expected [2, 8]"),
    (lambda t: rms_norm_linear(t(2, 8), t(8), t(4, 8), t(5)), "bias has shape [5], expected [4]"),
    (lambda t: rms_norm_linear(t(2, 8).to("int32"), t(8), t(4, 8)), "float32, float16 or bfloat16 input"),
    (lambda t: act_and_mul_linear(t(2, 9), t(4, 4)), "9 features are not a gate and an up half"),
    (lambda t: act_and_mul_linear(t(2, 8), t(4, 4), activation="relu"), "activation must be one of"),
])
def test_bad_operands_are_refused_by_name(call, problem):
    def t(*shape):
        return nbx.zeros(shape, device=TEST_DEVICE)
    with pytest.raises((ShapeError, TypeError, ValueError), match=problem.replace("[", r"\[").replace("]", r"\]")):
        call(t)


def test_the_rules_agree_with_the_implementation_and_the_keys_with_the_launches(rng):
    """Meta and cost from metadata alone; the key rule names the key the call forms."""
    from nbxtensor.device import backend_for
    from nbxtensor.ops import registry
    from nbxtensor.tuning.cache import op_of, recording
    x, _ = _tensor(rng, (2, 16), "bfloat16")
    r, _ = _tensor(rng, (2, 16), "bfloat16")
    norm, _ = _tensor(rng, (16,), "bfloat16")
    w, _ = _tensor(rng, (8, 16), "bfloat16")
    facts = backend_for(x.device).facts
    op = registry.get("add_rms_norm_linear")
    out, summed = op.meta(x, r, norm, w)
    assert (out.shape, summed.shape, out.dtype) == ((2, 8), (2, 16), x.dtype)
    assert op.cost(x, r, norm, w).bytes_written == 2 * 8 * 2 + 2 * 16 * 2
    plans.clear_all()
    with recording() as formed:
        add_rms_norm_linear(x, r, norm, w)
    assert formed == op.key(facts, x, r, norm, w)
    assert [op_of(key) for key in formed] == ["add_rms_norm_linear"]

