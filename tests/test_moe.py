"""Mixture-of-experts ops: ``grouped_mm`` against float64 loops written here (every row's group found by
walking the ends), whatever ``offs`` holds, and ``moe``'s routing against a float64 reference; both capture
and replay with the routing changing between replays."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor import allocation
from nbxtensor.launch import capture
from nbxtensor.ops import moe as moe_ops
from nbxtensor.ops.moe import moe_reference

from .conftest import TEST_DEVICE, to_nbx

# unit roundoff of each dtype: the products accumulate in float32 and round once to the output
UNIT = {"float32": 2.0 ** -24, "bfloat16": 2.0 ** -8, "float16": 2.0 ** -11}
NUMPY = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}


def _loops(a, b, offs) -> np.ndarray:
    """Row by row: a row belongs to the first group whose end (clamped to the rows, never below an earlier
    end) lies past it, rows past every end are zero."""
    rows, groups = a.shape[0], b.shape[0]
    out = np.zeros((rows, b.shape[2]))
    ends, highest = [], 0
    for end in offs:
        highest = max(highest, min(max(int(end), 0), rows))
        ends.append(highest)
    for row in range(rows):
        group = next((g for g in range(groups) if ends[g] > row), None)
        if group is not None:
            for column in range(b.shape[2]):
                out[row, column] = sum(float(a[row, i]) * float(b[group, i, column]) for i in range(a.shape[1]))
    return out


def _operands(rng, rows, k, n, groups, dtype, stored_transposed=False):
    """(a, b) as float64 arrays of values exact in ``dtype``, and as tensors; b stored (groups, n, k) and
    viewed (groups, k, n) where asked."""
    a = rng.standard_normal((rows, k)).astype(NUMPY[dtype]).astype(np.float64)
    b = rng.standard_normal((groups, k, n)).astype(NUMPY[dtype]).astype(np.float64)
    b_tensor = to_nbx(np.ascontiguousarray(b.transpose(0, 2, 1))).to(dtype).transpose(1, 2) if stored_transposed \
        else to_nbx(b).to(dtype)
    return a, b, to_nbx(a).to(dtype), b_tensor


def _assert_close(got, a, b, offs, dtype):
    """Within the bound of k float32 products and sums (and the operands' exact conversions), plus the
    output's rounding to ``dtype``."""
    reference = _loops(a, b, offs)
    magnitudes = _loops(np.abs(a), np.abs(b), offs)
    bound = (a.shape[1] + 2) * UNIT["float32"] * magnitudes + UNIT[dtype] * np.abs(reference)
    error = np.abs(got.float().numpy().astype(np.float64) - reference)
    worst = np.unravel_index(error.argmax(), error.shape)
    assert (error <= bound).all(), f"worst error {error[worst]:.3g} where the bound is {bound[worst]:.3g}"


@pytest.fixture
def row_tiles_of_16(monkeypatch):
    """Grouped products in tiles of 16 rows (the interpreter's own tile spans every row): groups of several
    tiles, ragged last tiles."""
    interpreted = moe_ops.grouped_candidates

    def short_tiles(facts, rows, n, k, dtype, parts=False):
        return [dict(config, BLOCK_M=16) for config in interpreted(facts, rows, n, k, dtype, parts)]
    monkeypatch.setattr(moe_ops, "grouped_candidates", short_tiles)
    moe_ops._grouped_plans.clear()
    yield
    moe_ops._grouped_plans.clear()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("offs", [[0, 17, 17, 40], [40, 40, 40, 40], [9, 9, 31, 35]],
                         ids=["first-and-third-empty", "all-in-one", "rows-past-the-end"])
def test_grouped_mm_matches_float64_loops(rng, row_tiles_of_16, dtype, offs):
    a, b, a_tensor, b_tensor = _operands(rng, 40, 24, 20, 4, dtype)
    _assert_close(nbx.grouped_mm(a_tensor, b_tensor, to_nbx(np.int32(offs))), a, b, offs, dtype)


def test_float32_on_bfloat16_parts_is_as_accurate(rng, monkeypatch):
    """Where the device's matrix unit takes bfloat16 (forced here), float32 rows and matrices multiply as
    their bfloat16 parts' products, under a key of their own, within the float32 bound."""
    from nbxtensor import tuning
    monkeypatch.setattr(moe_ops, "_by_planes", lambda dtype, facts: dtype.name == "float32")
    moe_ops._grouped_plans.clear()
    a, b, a_tensor, b_tensor = _operands(rng, 21, 40, 24, 3, "float32", stored_transposed=True)
    with tuning.recording() as formed:
        got = nbx.grouped_mm(a_tensor, b_tensor, to_nbx(np.int32([4, 4, 19])))
    moe_ops._grouped_plans.clear()
    assert [key.endswith("|bf16_parts=1") for key in formed] == [True]
    _assert_close(got, a, b, [4, 4, 19], "float32")


def test_a_weight_stored_by_outputs_is_read_in_place(rng):
    """A (groups, n, k) weight passed as ``w.transpose(1, 2)`` takes the one launch, no copy."""
    a, b, a_tensor, b_tensor = _operands(rng, 13, 24, 20, 3, "bfloat16", stored_transposed=True)
    offs = to_nbx(np.int32([5, 5, 13]))
    nbx.grouped_mm(a_tensor, b_tensor, offs)
    with capture() as recorded:
        got = nbx.grouped_mm(a_tensor, b_tensor, offs)
    assert [launch[0].fn.__name__ for launch in recorded.launches] == ["grouped_gemm"]
    _assert_close(got, a, b, [5, 5, 13], "bfloat16")


def test_rows_past_the_last_end_are_written_zero(rng):
    """torch leaves them unwritten; here every output row is written, the memory starting as NaN."""
    a, b, a_tensor, b_tensor = _operands(rng, 9, 8, 16, 2, "float32")
    with allocation.poisoned():
        got = nbx.grouped_mm(a_tensor, b_tensor, to_nbx(np.int32([2, 5]))).numpy()
    assert (got[5:] == 0).all() and np.isfinite(got).all()


@pytest.mark.parametrize("offs", [[9, 2, 5], [100, 200, 300], [-7, 3, -1], [2 ** 31 - 1, -2 ** 31, 4]],
                         ids=["decreasing", "past-the-rows", "negative", "extremes"])
def test_hostile_offs_stay_inside_the_rows(rng, guarded_outputs, offs):
    """Ends are clamped to the rows and never fall below an earlier one: the rows a group gets are inside the
    input and output whatever ``offs`` holds. ``a`` is the middle of a NaN-filled buffer, so a row read from
    outside it would show, and the output the middle of a buffer of 7.0, so would a row written outside it."""
    a, b, _, b_tensor = _operands(rng, 9, 8, 16, 3, "float32")
    padded = np.full((13, 8), np.nan)
    padded[2:11] = a
    a_tensor = to_nbx(padded.astype(np.float32))[2:11]
    _assert_close(nbx.grouped_mm(a_tensor, b_tensor, to_nbx(np.int32(offs))), a, b, offs, "float32")
    buffer, rows = guarded_outputs[-1]
    around = buffer.numpy()
    assert (around[:16] == 7.0).all() and (around[16 + rows:] == 7.0).all()


def test_no_rows_and_no_groups(rng):
    _, _, _, b_tensor = _operands(rng, 0, 8, 16, 3, "float32")
    empty = nbx.grouped_mm(nbx.zeros((0, 8), device=TEST_DEVICE), b_tensor, to_nbx(np.int32([0, 0, 0])))
    assert tuple(empty.shape) == (0, 16)
    none = nbx.grouped_mm(nbx.ones((4, 8), device=TEST_DEVICE), nbx.zeros((0, 8, 16), device=TEST_DEVICE),
                          to_nbx(np.zeros(0, np.int32)))
    assert tuple(none.shape) == (4, 16) and (none.numpy() == 0).all()


def test_bad_input_is_refused_by_name():
    a, b, offs = nbx.ones((6, 4)), nbx.ones((2, 4, 3)), to_nbx(np.int32([3, 6]))
    cases = [
        (lambda: nbx.grouped_mm(a, a, offs), RuntimeError, "2-D x 3-D form"),
        (lambda: nbx.grouped_mm(b, b, offs), RuntimeError, "input must be a matrix"),
        (lambda: nbx.grouped_mm(a, b.half(), offs), RuntimeError, "input is float32 but mat2 is float16"),
        (lambda: nbx.grouped_mm(a.double(), b.double(), offs), TypeError, "float64 operands are not supported"),
        (lambda: nbx.grouped_mm(a, b, offs.long()), TypeError, "offs must be int32, got int64"),
        (lambda: nbx.grouped_mm(a, b, offs[:1]), RuntimeError, r"one row end per matrix of mat2, shape \(2,\)"),
        (lambda: nbx.grouped_mm(a, b), RuntimeError, "offs is required"),
        (lambda: nbx.grouped_mm(a[:, :3], b, offs), RuntimeError, "the contraction dims must match"),
        (lambda: nbx.grouped_mm(a, b, offs, bias=nbx.ones((2, 3))), NotImplementedError, "bias is not supported"),
        (lambda: nbx.grouped_mm(a, b, offs, out_dtype=nbx.bfloat16), RuntimeError, "out_dtype bfloat16 differs"),
        (lambda: nbx.grouped_mm(a, b.to("meta"), offs), RuntimeError, "expected all tensors on one device"),
    ]
    for call, error, message in cases:
        with pytest.raises(error, match=message):
            call()


def _experts(rng, hidden, experts, intermediate, dtype="float32"):
    """Router, stacked gate and up, and down weights as float64 arrays exact in ``dtype``, and as tensors."""
    arrays = [rng.standard_normal(shape).astype(NUMPY[dtype]).astype(np.float64) * scale
              for shape, scale in (((experts, hidden), 1.0), ((experts, 2 * intermediate, hidden), 0.3),
                                   ((experts, hidden, intermediate), 0.3))]
    return arrays, [to_nbx(w).to(dtype) for w in arrays]


@pytest.mark.parametrize("top_k, norm_topk_prob, activation", [(2, True, "silu"), (3, False, "silu"),
                                                               (1, False, "gelu_tanh")])
def test_moe_routes_as_the_float64_reference(rng, top_k, norm_topk_prob, activation):
    """Eleven tokens over five experts (some get none): float32 products of at most 16 terms, a softmax and a
    weighted sum of at most three outputs, within a few units of float32's roundoff of values of order 1."""
    x = rng.standard_normal((11, 16))
    arrays, weights = _experts(rng, 16, 5, 8)
    got = nbx.moe(to_nbx(x.astype(np.float32)), *weights, top_k, norm_topk_prob, activation).numpy()
    want = moe_reference(x.astype(np.float32), *arrays, top_k, norm_topk_prob, activation)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_moe_in_bfloat16_rounds_once_from_float32_sums(rng):
    """Every expert chosen (so no routing choice hangs on the router's rounding): the bfloat16 products,
    activations and expert outputs are each rounded once, three roundings of 2^-8 on values of order 1."""
    x = rng.standard_normal((6, 16)).astype(ml_dtypes.bfloat16)
    arrays, weights = _experts(rng, 16, 3, 8, "bfloat16")
    got = nbx.moe(to_nbx(x.astype(np.float32)).bfloat16(), *weights, 3, True).float().numpy()
    want = moe_reference(x.astype(np.float64), *arrays, 3, True)
    np.testing.assert_allclose(got, want, rtol=4 * 2.0 ** -8, atol=4 * 2.0 ** -8 * np.abs(want).max())


def test_moe_captures_and_replays_with_new_routing(rng):
    """A captured call replays on new rows, which route elsewhere, to the bits of the op-by-op call: the
    grids depend on the shapes only and nothing is read on the host."""
    _, weights = _experts(rng, 16, 4, 8)
    first, second = (rng.standard_normal((7, 16)).astype(np.float32) for _ in range(2))
    x = to_nbx(first)
    nbx.moe(x, *weights, 2, True)
    with capture() as recorded:
        out = nbx.moe(x, *weights, 2, True)
    assert recorded.refused is None
    x.copy_(to_nbx(second))
    recorded.replay()
    expected = nbx.moe(to_nbx(second), *weights, 2, True)
    assert out.numpy().tobytes() == expected.numpy().tobytes()
    assert not np.array_equal(expected.numpy(), nbx.moe(to_nbx(first), *weights, 2, True).numpy())


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_moe_runs_in_a_graph_on_the_workspace_its_cost_rule_declares(rng, tmp_path, monkeypatch, dtype):
    """A graph step of ``nbx::moe`` takes every temporary from its declared workspace (``arena.strict``
    raises otherwise) and gives the eager call's bits."""
    from nbxtensor.graph import arena
    from .test_samples import _run_one_op_graph
    monkeypatch.setattr(arena, "strict", True)
    _, weights = _experts(rng, 16, 5, 8, dtype)
    x = to_nbx(rng.standard_normal((9, 16)).astype(np.float32)).to(dtype)
    tensors = {f"input::a{i}": t for i, t in enumerate([x, *weights])}
    expected = nbx.moe(x, *weights, 2, True)
    (got,) = _run_one_op_graph(tmp_path, "nbx::moe", tensors, [*({"tensor": name} for name in tensors), 2],
                               {"norm_topk_prob": True}, [expected])
    assert got.numpy().tobytes() == expected.numpy().tobytes()


def test_moe_refuses_mismatched_weights_by_name(rng):
    _, (router, gate_up, down) = _experts(rng, 16, 4, 8)
    x = nbx.ones((3, 16), device=TEST_DEVICE)
    with pytest.raises(RuntimeError, match=r"gate_up must be \(4, 2 \* intermediate, 16\)"):
        nbx.moe(x, router, gate_up[:, :, :8], down, 2)
    with pytest.raises(RuntimeError, match=r"down must be \(4, 16, 8\)"):
        nbx.moe(x, router, gate_up, down.transpose(1, 2), 2)
    with pytest.raises(ValueError, match="top_k must be an integer from 1 to the 4 experts"):
        nbx.moe(x, router, gate_up, down, 5)
    with pytest.raises(RuntimeError, match="router_weight is bfloat16 but input is float32"):
        nbx.moe(x, router.bfloat16(), gate_up, down, 2)


@pytest.mark.skipif(TEST_DEVICE != "cpu", reason="certifies the CPU's device class")
def test_grouped_keys_certify_refuse_a_wrong_candidate_and_serve_certified_only(rng, monkeypatch, tmp_path):
    """A candidate whose launch writes nothing (memory poisoned while it is judged) is refused, though it
    comes first; the one certified serves a certified-only run."""
    from nbxtensor import certify, tuning
    from nbxtensor.ops import plans
    monkeypatch.setenv("NBX_TUNING_DIR", str(tmp_path))
    plans.clear_all()
    usual = moe_ops.grouped_candidates

    def candidates(facts, rows, n, k, dtype, parts=False):
        good = usual(facts, rows, n, k, dtype, parts)[0]
        return [dict(good, num_stages=2), good]  # the first marked by its stages, which the interpreter ignores

    def launch(kernel, grid, args, constexprs):
        planned = plans.PlannedLaunch(kernel, grid, args, constexprs)
        return (lambda dev, tensors: None) if constexprs["num_stages"] == 2 else planned
    monkeypatch.setattr(moe_ops, "grouped_candidates", candidates)
    monkeypatch.setattr(moe_ops, "PlannedLaunch", launch)
    a, b, a_tensor, b_tensor = _operands(rng, 20, 40, 24, 3, "bfloat16", stored_transposed=True)
    offs = to_nbx(np.int32([6, 6, 17]))
    with tuning.recording() as formed:  # free to tune, the interpreter takes the first candidate: the wrong one
        nbx.grouped_mm(a_tensor, b_tensor, offs)
    (key,) = formed
    report = certify.certify_key(key, "cpu")
    assert report["status"] == "certified" and report["op"] == "grouped_mm"
    (refused,) = report["refused"]
    assert "outside the float64 reference's bound" in refused["reason"]
    plans.clear_all()
    with tuning.certified_only():
        _assert_close(nbx.grouped_mm(a_tensor, b_tensor, offs), a, b, [6, 6, 17], "bfloat16")
    plans.clear_all()
