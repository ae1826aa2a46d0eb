"""Matrix products against NumPy float64.

Tolerances follow from the dtype and the inner extent K: a float32 product accumulated in float32 errs
by about K * eps32 (eps32 = 2^-24 per rounding) relative to sum |a||b|; half-precision inputs are
multiplied exactly and accumulated in float32, so the error is the single rounding of the result to the
output type (2^-8 relative for bfloat16, 2^-11 for float16) plus the float32 accumulation. Inputs are
made in the low-precision dtype first and the reference multiplies those very values in float64.
"""
from pathlib import Path

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor import allocation
from nbxtensor.kernels import matmul as K
from nbxtensor.ops import matmul as MM
from nbxtensor.ops import matmul_gemv as MG
from nbxtensor.ops import matmul_plans as MP
from nbxtensor.ops.plans import clear_all

from .conftest import to_nbx

EPS = {"float32": 2.0 ** -24, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}


def _inputs(rng, shape, dtype):
    if dtype == "int8":
        return to_nbx(rng.integers(-128, 128, shape).astype(np.int8))
    return to_nbx(rng.standard_normal(shape).astype(np.float32)).to(dtype)


# the references' own conversions, which launch copies, are not the product's launches
_checking = [0]


def _f64(x):
    _checking[0] += 1
    try:
        return x.to("float64").numpy() if x.dtype.name != "int32" else x.numpy().astype(np.float64)
    finally:
        _checking[0] -= 1


def assert_product_close(ours, a64, b64, k, dtype, bias_scale=None):
    """|ours - ref| <= tol * (|a| @ |b|) elementwise, tol from the dtype's rounding and K."""
    ref = np.matmul(a64, b64)
    scale = np.matmul(np.abs(a64), np.abs(b64))
    if bias_scale is not None:
        ref, scale = ref + bias_scale[0], scale + np.abs(bias_scale[0])
    got = _f64(ours)
    assert got.shape == ref.shape
    if dtype == "int8":
        np.testing.assert_array_equal(got, ref)
        return
    # accumulation in float32 (K roundings) plus one rounding into the output type
    tol = 2 * k * EPS["float32"] + 2 * EPS[dtype]
    assert np.all(np.abs(got - ref) <= tol * scale + 1e-30), np.max(np.abs(got - ref) / (scale + 1e-30))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int8"])
@pytest.mark.parametrize("m,k,n", [(37, 45, 29), (3, 70, 33), (1, 130, 20), (64, 16, 80)])
def test_mm_dtypes(rng, dtype, m, k, n):
    a, b = _inputs(rng, (m, k), dtype), _inputs(rng, (k, n), dtype)
    out = nbx.mm(a, b)
    assert out.dtype == (nbx.int32 if dtype == "int8" else a.dtype)
    assert_product_close(out, _f64(a), _f64(b), k, dtype)


MATMUL_SHAPES = [
    ((7,), (7,)), ((5, 7), (7,)), ((7,), (7, 4)), ((5, 7), (7, 4)),
    ((3, 5, 7), (7,)), ((7,), (3, 7, 4)), ((3, 5, 7), (7, 4)), ((5, 7), (3, 7, 4)),
    ((3, 5, 7), (3, 7, 4)), ((2, 1, 5, 7), (3, 7, 4)), ((2, 3, 5, 7), (1, 7, 4)), ((1, 5, 7), (2, 3, 7, 4)),
    ((2, 1, 3, 1, 5, 7), (1, 2, 1, 2, 7, 4)), ((0, 5, 7), (7, 4)), ((5, 0), (0, 4)),
]


@pytest.mark.parametrize("a_shape,b_shape", MATMUL_SHAPES, ids=[f"{a}@{b}" for a, b in MATMUL_SHAPES])
def test_matmul_ranks_and_broadcasting(rng, a_shape, b_shape):
    a, b = _inputs(rng, a_shape, "float32"), _inputs(rng, b_shape, "float32")
    out = nbx.matmul(a, b)
    ref = np.matmul(a.numpy().astype(np.float64), b.numpy().astype(np.float64))
    assert tuple(out.shape) == ref.shape
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal((a @ b).numpy(), out.numpy())


def test_transposed_and_strided_operands_read_in_place(rng):
    base_a = _inputs(rng, (40, 60), "float32")
    base_b = _inputs(rng, (50, 90), "float32")
    a = base_a.transpose(0, 1)[::2]          # 30 x 40, no unit stride along K
    b = base_b[:, ::3].transpose(0, 1)[:, 5:45]  # 30 x 40 viewed as K x N after .T below
    out = nbx.mm(a, b.transpose(0, 1))
    assert_product_close(out, a.numpy().astype(np.float64), b.numpy().astype(np.float64).T, 40, "float32")
    batched = _inputs(rng, (4, 20, 24), "bfloat16").transpose(1, 2)  # 4 x 24 x 20, K-major rows
    other = _inputs(rng, (4, 20, 12), "bfloat16")[:, :, ::2]
    assert_product_close(nbx.bmm(batched, other), _f64(batched), _f64(other), 20, "bfloat16")


@pytest.mark.parametrize("rows", [1, 2, 5, 16])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32", "int8"])
def test_decode_rows_take_the_gemv_kernel_with_a_transposed_weight(rng, rows, dtype):
    x = _inputs(rng, (rows, 96), dtype)
    weight = _inputs(rng, (72, 96), dtype)  # (out_features, in_features): read transposed, in place
    out = nbx.matmul(x, weight.transpose(0, 1))
    assert_product_close(out, _f64(x), _f64(weight).T, 96, dtype)


@pytest.mark.parametrize("rows", [1, 5])
def test_gemv_over_several_programs_and_k_steps(rng, monkeypatch, rows):
    """Under the interpreter a GEMV takes one wide tile (few programs); small tiles here cover the
    programs past the first along N and the steps along K that GPU settings take, unsplit."""
    monkeypatch.setattr(MG, "gemv_candidates", lambda facts, m, n, k: [dict(BLOCK_N=32, BLOCK_K=32, SPLITS=1,
                                                                            num_warps=1)])
    x, weight = _inputs(rng, (rows, 100), "float32"), _inputs(rng, (72, 100), "float32")
    assert_product_close(nbx.nn.functional.linear(x, weight), _f64(x), _f64(weight).T, 100, "float32")


@pytest.mark.parametrize("settings", [dict(SPLITS=1, LOOP_STAGES=3), dict(SPLITS=2, LOOP_STAGES=4)])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_one_row_gemv_with_its_k_loop_pipelined(rng, monkeypatch, settings, dtype):
    """One row at a pipelined setting (``LOOP_STAGES``: compiled, each step's weight tile copied ahead into
    shared memory), several programs and K steps, a short last step; the interpreter runs the same steps
    unpipelined."""
    monkeypatch.setattr(MG, "gemv_candidates",
                        lambda facts, m, n, k: [dict(BLOCK_N=16, BLOCK_K=32, num_warps=4, **settings)])
    x, weight = _inputs(rng, (1, 200), dtype), _inputs(rng, (40, 200), dtype)
    assert_product_close(nbx.nn.functional.linear(x, weight), _f64(x), _f64(weight).T, 200, dtype)


@pytest.mark.parametrize("rows", [1, 3])
def test_gemv_split_over_k_adds_partials_in_order(rng, monkeypatch, rows):
    """The split path runs only when tuning picks it; a 3-way split forced: the last split of each column
    block adds the splits' partial sums in its launch, with the bits of the second launch that adds them
    where the column blocks outnumber the arrival counters, and leaves the counters at zero."""
    def split_first(facts, m, n, k):
        return [dict(BLOCK_N=32, BLOCK_K=16, SPLITS=3, num_warps=1)]
    monkeypatch.setattr(MG, "gemv_candidates", split_first)
    x, w, bias = _inputs(rng, (rows, 100), "float32"), _inputs(rng, (100, 40), "float32"), _inputs(rng, (40,), "float32")
    results = []
    for counters in (allocation.ARRIVAL_COUNTERS, 0):
        monkeypatch.setattr(MG, "ARRIVAL_COUNTERS", counters)
        clear_all()
        with nbx.launch.capture() as recorded:
            results.append(nbx.addmm(bias, x, w, beta=0.5, alpha=2.0).numpy())
        assert [launch[0] for launch in recorded.launches] == ([K.gemv] if counters else [K.gemv, K.gemv_combine])
    clear_all()
    assert results[0].tobytes() == results[1].tobytes()
    assert not allocation.arrival_counters(x.device).numpy().any()
    assert_product_close(to_nbx(results[0]), 2 * x.numpy().astype(np.float64), w.numpy().astype(np.float64), 100,
                         "float32", bias_scale=(0.5 * bias.numpy().astype(np.float64),))


def test_addmm_baddbmm_alpha_beta(rng):
    a, b = _inputs(rng, (20, 30), "float32"), _inputs(rng, (30, 18), "float32")
    bias = _inputs(rng, (18,), "float32")
    a64, b64, c64 = (t.numpy().astype(np.float64) for t in (a, b, bias))
    np.testing.assert_allclose(nbx.addmm(bias, a, b).numpy(), c64 + a64 @ b64, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(nbx.addmm(bias, a, b, beta=0.5, alpha=-2).numpy(), 0.5 * c64 - 2 * a64 @ b64,
                               rtol=1e-5, atol=1e-5)
    # beta=0 ignores the input entirely, NaN included, as torch does
    nan_bias = to_nbx(np.full((20, 18), np.nan, dtype=np.float32))
    np.testing.assert_allclose(nbx.addmm(nan_bias, a, b, beta=0).numpy(), a64 @ b64, rtol=1e-5, atol=1e-5)
    x, y = _inputs(rng, (3, 20, 30), "bfloat16"), _inputs(rng, (3, 30, 17), "bfloat16")
    c = _inputs(rng, (3, 1, 17), "bfloat16")
    out = nbx.baddbmm(c, x, y, beta=2.0, alpha=0.5)
    assert_product_close(out, 0.5 * _f64(x), _f64(y), 30, "bfloat16", bias_scale=(2.0 * _f64(c),))


def test_vector_products(rng):
    m, v, w = _inputs(rng, (9, 21), "float32"), _inputs(rng, (21,), "float32"), _inputs(rng, (9,), "float32")
    m64, v64, w64 = (t.numpy().astype(np.float64) for t in (m, v, w))
    close = dict(rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(nbx.mv(m, v).numpy(), m64 @ v64, **close)
    np.testing.assert_allclose(nbx.addmv(w, m, v, beta=2, alpha=3).numpy(), 2 * w64 + 3 * (m64 @ v64), **close)
    d = nbx.dot(v, v)
    assert d.shape == () and np.isclose(float(d.numpy()), v64 @ v64, rtol=1e-5)
    assert np.isclose(float(nbx.vdot(v, v).numpy()), v64 @ v64, rtol=1e-5)
    np.testing.assert_allclose(nbx.outer(w, v).numpy(), np.outer(w64, v64), **close)
    np.testing.assert_allclose(nbx.addr(m, w, v, alpha=2).numpy(), m64 + 2 * np.outer(w64, v64), **close)


def test_linear_with_and_without_bias(rng):
    x, weight, bias = _inputs(rng, (2, 3, 24), "float16"), _inputs(rng, (10, 24), "float16"), _inputs(rng, (10,), "float16")
    out = nbx.nn.functional.linear(x, weight, bias)
    assert out.shape == (2, 3, 10) and out.dtype == nbx.float16
    assert_product_close(out, _f64(x), _f64(weight).T, 24, "float16", bias_scale=(_f64(bias),))
    assert_product_close(nbx.nn.functional.linear(x, weight), _f64(x), _f64(weight).T, 24, "float16")


def test_linear_reuses_its_plan_on_new_tensors_of_the_same_layout(rng):
    """linear plans the views it multiplies once per layout; each later call rebuilds them on its own
    tensors (a stale pointer would repeat the first call's result). Rows that do not fold into one matrix
    (a transposed batch) take the general path, the bias broadcasting over every row either way."""
    MM._linear_plans.clear()
    for _ in range(3):
        x, weight, bias = (_inputs(rng, shape, "float32") for shape in ((2, 3, 24), (10, 24), (10,)))
        assert_product_close(nbx.nn.functional.linear(x, weight, bias), _f64(x), _f64(weight).T, 24, "float32",
                             bias_scale=(_f64(bias),))
        unfolded = x.transpose(0, 1)  # (3, 2, 24) whose rows do not merge into one stride
        assert_product_close(nbx.nn.functional.linear(unfolded, weight, bias), _f64(unfolded), _f64(weight).T, 24,
                             "float32", bias_scale=(_f64(bias),))
    assert len(MM._linear_plans) == 2
    with pytest.raises(RuntimeError, match="dim 1 of the weight"):
        nbx.nn.functional.linear(x, _inputs(rng, (10, 23), "float32"))


def test_products_look_their_plan_up_before_the_meta_rule(rng, monkeypatch):
    """A call whose layouts are planned goes to its plan without running the op's meta rule (the plan was
    made for a checked call of that layout); a new layout runs it, and a bad call still raises its error."""
    calls = []
    rules = ("_mm_meta", "_matmul_meta", "_addmm_meta", "_mv_meta", "_outer_meta", "_addr_meta", "_einsum_meta")
    for name in rules:
        rule = getattr(MM, name)
        monkeypatch.setattr(MM, name, lambda *args, _rule=rule, _name=name, **kw: calls.append(_name)
                            or _rule(*args, **kw))
    clear_all()
    first = None
    for _ in range(3):
        a, b, c, bias, vec = (_inputs(rng, shape, "float32") for shape in ((5, 7), (7, 6), (2, 5, 7), (6,), (7,)))
        assert_product_close(nbx.mm(a, b), _f64(a), _f64(b), 7, "float32")
        assert_product_close(nbx.matmul(c, b), _f64(c), _f64(b), 7, "float32")
        assert_product_close(nbx.addmm(bias, a, b), _f64(a), _f64(b), 7, "float32", bias_scale=(_f64(bias),))
        assert_product_close(nbx.mv(a, vec), _f64(a), _f64(vec), 7, "float32")
        # products of an inner extent of 1 are exact in float32 but for the output's rounding
        np.testing.assert_allclose(nbx.outer(vec, bias).numpy(), np.outer(_f64(vec), _f64(bias)), rtol=1e-6)
        np.testing.assert_allclose(nbx.addr(a[:, :6], vec[:5], bias).numpy(),
                                   _f64(a)[:, :6] + np.outer(_f64(vec)[:5], _f64(bias)), rtol=1e-6, atol=1e-6)
        assert_product_close(nbx.einsum("bik,kj->bij", c, b), _f64(c), _f64(b), 7, "float32")
        first = first or list(calls)
        assert calls == first
    assert set(first) == set(rules)
    assert_product_close(nbx.mm(b.transpose(0, 1), a.transpose(0, 1)), _f64(b).T, _f64(a).T, 7, "float32")
    assert calls[len(first):] == ["_mm_meta"]
    with pytest.raises(RuntimeError, match="mm"):
        nbx.mm(a, a)


def test_tf32_is_opt_in():
    assert nbx.get_float32_matmul_precision() == "highest" and not nbx.backends.cuda.matmul.allow_tf32
    assert MP._dot_precision(nbx.float32) == "ieee"
    try:
        nbx.backends.cuda.matmul.allow_tf32 = True
        assert nbx.get_float32_matmul_precision() == "high" and MP._dot_precision(nbx.float32) == "tf32"
        assert MP._dot_precision(nbx.bfloat16) == "ieee"
    finally:
        nbx.set_float32_matmul_precision("highest")
    with pytest.raises(ValueError, match="highest"):
        nbx.set_float32_matmul_precision("fast")


def test_errors_name_shapes_dims_and_dtypes():
    a, b = nbx.zeros(2, 3), nbx.zeros(4, 5)
    with pytest.raises(RuntimeError, match=r"2x3 and 4x5.*dim -1 of the first \(3\).*dim -2 of the second \(4\)"):
        nbx.mm(a, b)
    with pytest.raises(RuntimeError, match=r"2x3 and 4x5"):
        nbx.matmul(a, b)
    with pytest.raises(RuntimeError, match=r"same dtype.*float32 and float16"):
        nbx.mm(nbx.zeros(2, 3), nbx.zeros(3, 2, dtype=nbx.float16))
    with pytest.raises(TypeError, match="complex64 operands are not supported"):
        nbx.mm(nbx.zeros(2, 3, dtype=nbx.complex64), nbx.zeros(3, 2, dtype=nbx.complex64))
    with pytest.raises(RuntimeError, match="mat2 must be a matrix"):
        nbx.mm(a, nbx.zeros(3))
    with pytest.raises(RuntimeError, match=r"batch sizes differ.*\(2\).*\(3\)"):
        nbx.bmm(nbx.zeros(2, 3, 4), nbx.zeros(3, 4, 5))
    with pytest.raises(RuntimeError, match=r"batch dims of 2x3x4 and 3x4x5 do not broadcast"):
        nbx.matmul(nbx.zeros(2, 3, 4), nbx.zeros(3, 4, 5))
    with pytest.raises(RuntimeError, match=r"input of shape 3 does not broadcast.*2x5"):
        nbx.addmm(nbx.zeros(3), nbx.zeros(2, 4), nbx.zeros(4, 5))
    with pytest.raises(RuntimeError, match=r"dim -1 of the input \(4\) must equal dim 1 of the weight \(5\)"):
        nbx.nn.functional.linear(nbx.zeros(2, 4), nbx.zeros(3, 5))
    with pytest.raises(RuntimeError, match="same number of elements.*3 and 4"):
        nbx.dot(nbx.zeros(3), nbx.zeros(4))


def test_meta_and_cost_rules_need_no_device():
    from nbxtensor.ops.registry import TensorMeta, get
    a, b = TensorMeta((8, 4096), nbx.bfloat16), TensorMeta((4096, 14336), nbx.bfloat16)
    assert get("mm").meta(a, b) == TensorMeta((8, 14336), nbx.bfloat16)
    cost = get("mm").cost(a, b)
    assert cost.flops == 2 * 8 * 4096 * 14336 and cost.bytes_written == 8 * 14336 * 2
    assert get("matmul").meta(TensorMeta((2, 1, 5, 7), nbx.int8), TensorMeta((3, 7, 4), nbx.int8)) == \
        TensorMeta((2, 3, 5, 4), nbx.int32)
    assert get("linear").meta(TensorMeta((2, 3, 24), nbx.float16), TensorMeta((10, 24), nbx.float16)).shape == (2, 3, 10)


EINSUMS = [("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("bhqd,bhkd->bhqk", [(2, 3, 5, 8), (2, 3, 6, 8)]),
           ("bhqk,bhkd->bqhd", [(2, 3, 5, 6), (2, 3, 6, 8)]), ("ij->ji", [(3, 4)]),
           ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]), ("ij,jk", [(3, 4), (4, 5)]),
           ("i,j->ij", [(3,), (4,)]), ("bsd,od->bso", [(2, 3, 4), (5, 4)])]


@pytest.mark.parametrize("equation,shapes", EINSUMS, ids=[e for e, _ in EINSUMS])
def test_einsum_contractions_and_permutations(rng, equation, shapes):
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    out = nbx.einsum(equation, *[to_nbx(x) for x in arrays])
    ref = np.einsum(equation, *[x.astype(np.float64) for x in arrays])
    assert tuple(out.shape) == ref.shape
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("equation,operands", [("i,i,i->", 3), ("ij,jk,kl->il", 3)])
def test_einsum_other_forms_name_the_equation(equation, operands):
    with pytest.raises(NotImplementedError, match=f"einsum {equation!r}"):
        nbx.einsum(equation, *[nbx.zeros(3, 3) if "j" in equation else nbx.zeros(3)] * operands)


# ---- gemm_tiles: persistent programs and tensor-descriptor (TMA) loads ---------------------------------
TILE_VARIANTS = [dict(PERSISTENT=True), dict(TMA=True), dict(PERSISTENT=True, TMA=True),
                 dict(PERSISTENT=True, TMA=True, FLATTEN=True)]


@pytest.fixture
def force_gemm_config(monkeypatch, first_candidate):
    """``force_gemm_config(config)``: products plan with this one GEMM setting, first in every list of
    candidates (a float32 product on parts adds its planes form and true float32 settings after it)."""
    def force(config):
        monkeypatch.setattr(MP, "gemm_candidates", lambda *args, **kwargs: [dict(config)])
    return force


def _tile_config(variant, **tiles):
    return dict(dict(BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, num_stages=1, num_warps=1, GROUP_M=2), **tiles, **variant)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int8"])
def test_small_tiles_of_the_batched_kernel(rng, force_gemm_config, dtype):
    """Under the interpreter a product takes one wide tile; 16-wide tiles here cover the programs past
    the first, the K steps and the ragged edges that GPU settings take, batched with broadcasting."""
    force_gemm_config(_tile_config({}, BLOCK_K=32) if dtype == "int8" else _tile_config({}))  # int8 MMA: K 32
    x, y = _inputs(rng, (3, 37, 45), dtype), _inputs(rng, (1, 45, 29), dtype)
    assert_product_close(nbx.matmul(x, y), _f64(x), _f64(y), 45, dtype)
    a, b = _inputs(rng, (70, 40), dtype), _inputs(rng, (24, 40), dtype)
    assert_product_close(nbx.matmul(a, b.transpose(0, 1)), _f64(a), _f64(b).T, 40, dtype)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_split_k_adds_its_pieces_in_order(rng, force_gemm_config, monkeypatch, dtype):
    """A split setting: K in whole-step pieces along grid axis 2 (790 = 272 + 272 + 246, the last ragged),
    their float32 partials added by ``gemv_combine`` over several row and column blocks, a bias with alpha
    and beta applied once; a weight read transposed; the same bits every call. A shape whose partials
    would outgrow the declared workspace splits less (here not at all)."""
    force_gemm_config(_tile_config({}, SPLITS=3))
    x, b, bias = _inputs(rng, (40, 790), dtype), _inputs(rng, (790, 70), dtype), _inputs(rng, (70,), dtype)
    kernels = _launched_kernels(monkeypatch)
    out = nbx.addmm(bias, x, b, beta=0.5, alpha=2.0)
    assert kernels == [K.gemm, K.gemv_combine] and MP.split_max(40, 70, 790, 2) == 3
    assert_product_close(out, 2 * _f64(x), _f64(b), 790, dtype, bias_scale=(0.5 * _f64(bias),))
    np.testing.assert_array_equal(nbx.addmm(bias, x, b, beta=0.5, alpha=2.0).numpy(), out.numpy())
    weight = _inputs(rng, (36, 790), dtype)
    assert_product_close(nbx.nn.functional.linear(x, weight), _f64(x), _f64(weight).T, 790, dtype)
    square = _inputs(rng, (40, 300), dtype)
    kernels.clear()
    assert_product_close(nbx.mm(square, square.transpose(0, 1)), _f64(square), _f64(square).T, 300, dtype)
    assert kernels == [K.gemm]


def test_short_m_products_on_hopper_offer_narrow_tiles_and_split_k():
    """A 128-row chunk against a 4096 x 14336 weight forms 32 tiles of 128 x 128 on 132 SMs: its candidates
    add narrow tiles and split settings filling one or two waves, their partials within the workspace the
    cost rule declares; a product whose tiles fill the SMs keeps its list, and a batch never splits."""
    from nbxtensor.device.facts import load as load_facts
    from nbxtensor.ops.registry import get
    hopper = load_facts("hopper")
    m, n, k = 128, 4096, 14336
    listed = MM.gemm_candidates(hopper, m, n, k, nbx.bfloat16, single=True)
    split = [c for c in listed if c.get("SPLITS") and not c.get("PERSISTENT")]
    assert split and any(c["BLOCK_N"] <= 64 and not c.get("SPLITS") for c in listed)
    for c in split:
        programs = -(-m // c["BLOCK_M"]) * -(-n // c["BLOCK_N"]) * c["SPLITS"]
        assert programs <= 2 * hopper["multiprocessors_max"] and not any(c.get(f) for f in MP._TILE_FLAGS)
    x, w = MP._meta((m, k), nbx.bfloat16), MP._meta((n, k), nbx.bfloat16)
    declared = get("linear").cost(x, w).workspace
    assert max(c["SPLITS"] for c in split) * m * n * 4 <= declared
    assert not any(c.get("SPLITS") for c in MM.gemm_candidates(hopper, 4096, 4096, 4096, nbx.bfloat16, single=True))
    assert not any(c.get("SPLITS") for c in MM.gemm_candidates(hopper, m, n, k, nbx.bfloat16))
    assert get("linear").cost(MP._meta((4096, 4096), nbx.bfloat16), MP._meta((4096, 4096), nbx.bfloat16)).workspace == 0


WAVE_SPLIT_VARIANTS = [dict(PERSISTENT=True), dict(PERSISTENT=True, TMA=True), dict(TMA=True)]


@pytest.mark.parametrize("variant", WAVE_SPLIT_VARIANTS, ids=lambda v: "+".join(sorted(v)))
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_wave_split_sums_its_pieces_in_one_launch(rng, force_gemm_config, monkeypatch, tmp_path, variant,
                                                  dtype):
    """``gemm_tiles`` with SPLITS on 3 programs (the interpreter's; a GPU is told it has 3 SMs): a 130 x 24
    output of 32 x 16 tiles is 10 tiles, 9 taken whole and the last cut into 3 K pieces (792 = 272 + 272 +
    248, the last ragged); a 32 x 16 output is one tile, split. One launch; every whole tile has the bits of
    the unsplit kernel and every split tile those of the two-launch split, whose combine adds the same
    pieces in the same order (so no arrival order shows); a bias with alpha and beta applied once; the
    counters left at zero; the same bits every call. Rows of 792 half-precision elements are 16-byte aligned,
    so the TMA variants read through descriptors (zeros past K in the last piece)."""
    monkeypatch.setattr(MP, "multiprocessors", lambda dev: 3)
    monkeypatch.setattr(allocation, "_arrival_counters", {})  # the counters stay this test's
    counters = allocation.arrival_counters(to_nbx(np.zeros(1, np.float32)).device)
    x, b, bias = _inputs(rng, (130, 792), dtype), _inputs(rng, (792, 24), dtype), _inputs(rng, (24,), dtype)
    tiles = dict(BLOCK_M=32, BLOCK_N=16)
    assert MP._wave_split(_tile_config(variant, SPLITS=8, **tiles), 10, 3, 130, 24, 792, 2) == (9, 3, 272)
    assert MP._wave_split(_tile_config(variant, SPLITS=8, **tiles), 1, 3, 32, 16, 792, 2) == (0, 3, 272)
    from nbxtensor.ops import plans
    launched, real = [], plans.launch_slots

    def noted(kernel, grid, device, args, positions, values, constexprs, *rest):
        launched.append((kernel, constexprs.get("TMA"), constexprs.get("SPLIT")))
        return real(kernel, grid, device, args, positions, values, constexprs, *rest)
    monkeypatch.setattr(plans, "launch_slots", noted)
    results = {}
    for name, config in (("wave", _tile_config(variant, SPLITS=8, **tiles)), ("whole", _tile_config(variant, **tiles)),
                         ("two_launches", _tile_config({}, SPLITS=3, **tiles))):
        monkeypatch.setenv("NBX_TUNING_DIR", str(tmp_path / name))
        clear_all()
        force_gemm_config(config)
        launched.clear()
        results[name] = [nbx.addmm(bias, x, b, beta=0.5, alpha=2.0), nbx.mm(x[:32], b[:, :16])]
        if name == "wave":
            assert launched == [(K.gemm_tiles, bool(variant.get("TMA")), True)] * 2
            assert not counters.numpy().any()
            again = nbx.addmm(bias, x, b, beta=0.5, alpha=2.0)
            np.testing.assert_array_equal(again.numpy(), results[name][0].numpy())
    assert_product_close(results["wave"][0], 2 * _f64(x), _f64(b), 792, dtype, bias_scale=(0.5 * _f64(bias),))
    assert_product_close(results["wave"][1], _f64(x[:32]), _f64(b[:, :16]), 792, dtype)
    wave, whole, two = ([r.numpy() for r in results[name]] for name in ("wave", "whole", "two_launches"))
    # tiles in grouped order (GROUP_M = 2): the last of the 10 is rows 128..129, columns 16..23
    np.testing.assert_array_equal(wave[0][:128], whole[0][:128])
    np.testing.assert_array_equal(wave[0][128:, :16], whole[0][128:, :16])
    np.testing.assert_array_equal(wave[0][128:, 16:], two[0][128:, 16:])
    np.testing.assert_array_equal(wave[1], two[1])


def test_arrival_counters_start_at_zero_without_a_kernel(monkeypatch):
    """A stream's arrival counters may first be asked for while launches run nothing (a tuner builds its
    candidates inside ``launch.compiling_ahead``) and memory starts as poison (certification): they are
    zeroed by the backend's memset, never by a kernel, and made once a device and stream."""
    from nbxtensor import launch
    from nbxtensor.ops import plans
    dev = to_nbx(np.zeros(1, np.float32)).device
    monkeypatch.setattr(allocation, "_arrival_counters", {})

    def refused(*args, **kwargs):
        raise AssertionError("a kernel launched")
    monkeypatch.setattr(plans, "launch_slots", refused)
    monkeypatch.setattr(launch, "launch_planned", refused)
    with allocation.poisoned():
        counters = allocation.arrival_counters(dev)
    assert counters.dtype == nbx.int32 and counters.numpy().tolist() == [0] * allocation.ARRIVAL_COUNTERS
    assert allocation.arrival_counters(dev) is counters


def test_wave_split_candidates_fill_the_last_wave_on_hopper():
    """128 x 37888 x 3584 (296 tiles of 128 x 128 on 132 SMs: 2 whole waves and 32 tiles) and 128 x 4096
    x 4096 (32 tiles) offer persistent descriptor settings that split the last wave into at most one wave
    of pieces, their float32 blocks within the workspace the cost rule declares; 4096 x 4096 x 4096 (1024
    tiles, a last wave of 100) and a batch offer none."""
    from nbxtensor.device.facts import load as load_facts
    from nbxtensor.ops.registry import get
    hopper = load_facts("hopper")
    sms = hopper["multiprocessors_max"]
    for m, n, k in ((128, 37888, 3584), (128, 4096, 4096), (128, 4096, 14336)):
        waved = [c for c in MM.gemm_candidates(hopper, m, n, k, nbx.bfloat16, single=True)
                 if c.get("SPLITS") and c.get("PERSISTENT")]
        assert waved and all(c.get("TMA") for c in waved)
        declared = get("linear").cost(MP._meta((m, k), nbx.bfloat16), MP._meta((n, k), nbx.bfloat16)).workspace
        for c in waved:
            tiles = -(-m // c["BLOCK_M"]) * -(-n // c["BLOCK_N"])
            whole, splits, depth = MP._wave_split(c, tiles, sms, m, n, k, 2)
            assert splits == c["SPLITS"] > 1 and whole % sms == 0 and (tiles - whole) * splits <= sms
            assert depth % c["BLOCK_K"] == 0 and (splits - 1) * depth < k <= splits * depth
            assert (tiles - whole) * splits * c["BLOCK_M"] * c["BLOCK_N"] * 4 <= declared
        if n == 37888:
            assert any(c["BLOCK_M"] == c["BLOCK_N"] == 128 and c["SPLITS"] == 4 for c in waved)
    assert not any(c.get("SPLITS") for c in MM.gemm_candidates(hopper, 4096, 4096, 4096, nbx.bfloat16, single=True))
    assert not any(c.get("SPLITS") for c in MM.gemm_candidates(hopper, 128, 37888, 3584, nbx.bfloat16))
    assert not any(c.get("SPLITS") for c in MM.gemm_candidates(hopper, 128, 37888, 3584, nbx.float32, single=True))


@pytest.mark.parametrize("variant", TILE_VARIANTS, ids=lambda v: "+".join(sorted(v)))
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_gemm_tiles_variants(rng, force_gemm_config, variant, dtype):
    """Several tiles a program (a persistent grid is a few programs under the interpreter), ragged edges
    in M, N and K (descriptors read zeros past the edge; pointers mask), b read K-major (a linear layer's
    weight) and N-major, a bias with alpha and beta; strides descriptors cannot take (a row of 45 floats
    is not a multiple of 16 bytes) and an operand off a 16-byte boundary read through pointers instead."""
    force_gemm_config(_tile_config(variant))
    x, weight = _inputs(rng, (70, 40), dtype), _inputs(rng, (24, 40), dtype)
    assert_product_close(nbx.nn.functional.linear(x, weight), _f64(x), _f64(weight).T, 40, dtype)
    b = _inputs(rng, (40, 24), dtype)
    assert_product_close(nbx.mm(x, b), _f64(x), _f64(b), 40, dtype)
    bias = _inputs(rng, (24,), dtype)
    out = nbx.addmm(bias, x, b, beta=0.5, alpha=2.0)
    assert_product_close(out, 2 * _f64(x), _f64(b), 40, dtype, bias_scale=(0.5 * _f64(bias),))
    odd, odd_b = _inputs(rng, (33, 45), dtype), _inputs(rng, (45, 19), dtype)
    assert_product_close(nbx.mm(odd, odd_b), _f64(odd), _f64(odd_b), 45, dtype)
    # the same layout as x, one element into its buffer: 2 or 4 bytes off the descriptors' alignment
    shifted = _inputs(rng, (70 * 40 + 8,), dtype)[1:70 * 40 + 1].view(70, 40)
    assert_product_close(nbx.mm(shifted, b), _f64(shifted), _f64(b), 40, dtype)


def test_tile_variants_are_candidates_on_hopper_only():
    from nbxtensor.device.facts import load as load_facts
    hopper = load_facts("hopper")
    plain = MM.gemm_candidates(hopper, 4096, 4096, 4096, nbx.bfloat16)
    single = MM.gemm_candidates(hopper, 4096, 4096, 4096, nbx.bfloat16, single=True)
    assert not any(c.get("TMA") or c.get("PERSISTENT") for c in plain)
    # a single half-precision matrix on Hopper: four plain tiles as the fallback, then the variants
    assert all(c in plain for c in single[:4]) and len(single) < len(plain) + 4
    assert all(c.get("PERSISTENT") or c.get("TMA") for c in single[4:])
    assert any(c.get("TMA") and c.get("PERSISTENT") and c["BLOCK_N"] == 256 for c in single)
    fp32 = MM.gemm_candidates(hopper, 4096, 384, 384, nbx.float32, single=True)
    assert any(c.get("PERSISTENT") for c in fp32) and any(c["BLOCK_K"] == 16 for c in fp32)
    for c in single + fp32:
        assert (c["BLOCK_M"] + c["BLOCK_N"]) * c["BLOCK_K"] * 4 * c["num_stages"] <= 2 * 232448
    ampere = MM.gemm_candidates(load_facts("ampere"), 4096, 4096, 4096, nbx.bfloat16, single=True)
    assert any(c.get("PERSISTENT") for c in ampere) and not any(c.get("TMA") for c in ampere)
    assert MM.gemm_candidates(load_facts("cpu"), 64, 64, 64, nbx.bfloat16, single=True) == \
        MM.gemm_candidates(load_facts("cpu"), 64, 64, 64, nbx.bfloat16)


def test_gemm_sweep_runs_each_setting_and_reports_failures(rng, monkeypatch):
    """The benchmark's sweep (untimed here: the interpreter has no device clock): every given setting runs
    on the product's operands, a setting that cannot build is reported with its error, not raised."""
    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "benchmarks"))
    from gemm_sweep import gemm_sweep
    x, weight = _inputs(rng, (40, 32), "float32"), _inputs(rng, (24, 32), "float32")
    bias = _inputs(rng, (24,), "float32")
    good = _tile_config(dict(PERSISTENT=True, TMA=True))
    bad = dict(good, BLOCK_M=24)  # not a power of two: tl.arange refuses it
    results = []

    def check(out):
        results.append(out.numpy().copy())
        return len(results)
    swept = gemm_sweep("linear", x, weight.transpose(0, 1), bias.expand(40, 24), 1, 1, configs=[good, bad],
                          check=check, timed=False)
    assert swept["key"].startswith("gemm|") and swept["candidates"]
    assert [r["error"] is None for r in swept["rows"]] == [True, False] and swept["rows"][1]["config"] == bad
    assert len(results) == 1
    assert_product_close(to_nbx(results[0]), _f64(x), _f64(weight).T, 32, "float32", bias_scale=(_f64(bias),))


@pytest.fixture(params=["registers", "memory"])
def float32_planes(request, monkeypatch, first_candidate):
    """Float32 products on bfloat16 parts whatever the device (the CPU's facts name no matrix unit, so it
    keeps them on the IEEE path otherwise), in either form: the parts split in the GEMM's registers (the
    first candidate, taken on every device) or planes in memory (the one candidate left)."""
    monkeypatch.setattr(MP, "_by_planes",
                        lambda dtype, facts: dtype.name == "float32" and MM.backends.cuda.matmul.float32_planes)
    if request.param == "memory":
        listed = MM.gemm_candidates
        monkeypatch.setattr(MP, "gemm_candidates",
                            lambda *args, parts=False, **kwargs: [] if parts else listed(*args, **kwargs))
    clear_all()
    yield request.param
    clear_all()


@pytest.mark.parametrize("m,k,n", [(37, 45, 29), (64, 130, 24), (20, 7, 33)])
def test_float32_planes_are_as_accurate_as_float32(rng, float32_planes, m, k, n):
    """The parts of each operand sum to it exactly and the dropped part products are below 2^-24 of the
    product, so the float32 tolerance (K roundings of the accumulation) holds."""
    a, b = _inputs(rng, (m, k), "float32"), _inputs(rng, (k, n), "float32")
    assert_product_close(a @ b, _f64(a), _f64(b), k, "float32")


def test_float32_planes_take_k_in_chunks_with_the_epilogue(rng, float32_planes, monkeypatch):
    """With a small workspace K goes in three chunks, each chunk's product added to the last through the
    epilogue; alpha, beta and a broadcast bias apply once; a linear weight is read transposed in place."""
    monkeypatch.setattr(MP, "_PLANE_WORKSPACE_FLOOR", 0)
    kernels = _launched_kernels(monkeypatch)
    a, b, bias = (_inputs(rng, s, "float32") for s in ((24, 300), (300, 9), (9,)))
    got = nbx.addmm(bias, a, b, beta=0.5, alpha=-2.0)
    if float32_planes == "memory":
        # chunks of 128, 128 and 44 (multiples of 64 but the last), two operands split each
        assert kernels.count(K.split_bf16_planes) == 6
    else:
        assert kernels == [K.gemm]  # split in registers: no planes, no chunks
    a64, b64, bias64 = _f64(a), _f64(b), _f64(bias)
    assert_product_close(got, -2.0 * a64, b64, 300, "float32", bias_scale=(0.5 * bias64,))
    weight = _inputs(rng, (9, 300), "float32")
    assert_product_close(nbx.nn.functional.linear(a, weight, bias), a64, _f64(weight).T, 300, "float32",
                         bias_scale=(bias64,))


def test_float32_planes_carry_special_values_as_ieee(float32_planes):
    """inf times a finite value stays inf (not inf * 0 = NaN from a zero part), NaN spreads, inf * 0 is NaN,
    and values past bfloat16's largest split without overflow: the pattern of NaN and inf is float32's."""
    a = np.array([[np.inf, 1.0, 0.0], [1.0, np.nan, 2.0], [3.4e38, 1.0, 1.0], [1.0, 2.0, 3.0],
                  [-np.inf, 0.0, 1.0]] * 4, np.float32)  # 20 rows: more than the GEMV path takes
    b = np.array([[1.0, 0.0, 1.5], [2.0, 1.0, -1.0], [1.0, 1.0, 1.0]], np.float32)
    got = (to_nbx(a) @ to_nbx(b)).numpy()
    with np.errstate(all="ignore"):
        expected = a @ b
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    np.testing.assert_array_equal(np.isinf(got) & (got > 0), np.isinf(expected) & (expected > 0))
    finite = np.isfinite(expected)
    np.testing.assert_allclose(got[finite], expected[finite], rtol=1e-6)


def test_float32_plane_parts_sum_to_their_value_exactly():
    """high + mid + low == x for every finite float32 (8 significant bits a part, by truncation); the parts
    of inf and NaN put the value in high and zeros elsewhere."""
    from nbxtensor.launch import launch
    values = np.array([1.0, -1.0, 3.4028235e38, -3.3e38, 1.1754944e-38, 1e-30, np.pi, -np.e, 0.1, 65504.0,
                       123456.789, -7.0e-20, np.inf, -np.inf, np.nan, 0.0], np.float32)
    x = to_nbx(values.reshape(1, -1))
    n = values.size
    planes = nbx.empty((1, 6 * n), dtype=nbx.bfloat16, device=x.device)  # the kernel writes six planes
    parts = (K.PART_HIGH, K.PART_MID, K.PART_LOW, K.PART_HIGH_FINITE)
    launch(K.split_bf16_planes, (1,), x.device, [x, planes, 1, n, *x.stride(), 6 * n, n],
           P0=parts[0], P1=parts[1], P2=parts[2], P3=parts[3], P4=parts[3], P5=parts[3], BLOCK=32, INDEX_64=False)
    high, mid, low, high_finite = planes.to("float64").numpy().reshape(6, n)[:4]
    finite = np.isfinite(values)
    np.testing.assert_array_equal(high[finite] + mid[finite] + low[finite], values[finite].astype(np.float64))
    np.testing.assert_array_equal(high_finite[finite], high[finite])
    assert np.isposinf(high[12]) and np.isneginf(high[13]) and np.isnan(high[14])
    assert not np.any(mid[~finite]) and not np.any(low[~finite]) and not np.any(high_finite[~finite])


def test_float32_planes_are_a_switch(rng, float32_planes, monkeypatch):
    """The switch takes effect on the next call, whatever plans were made before it (it clears them)."""
    kernels = _launched_kernels(monkeypatch)
    a, b = _inputs(rng, (20, 30), "float32"), _inputs(rng, (30, 20), "float32")
    precisions = _launched_precisions(monkeypatch)
    a @ b
    assert K.split_bf16_planes in kernels or precisions == [K.PRECISION_BF16_PARTS.value]
    try:
        MM.backends.cuda.matmul.float32_planes = False
        kernels.clear()
        precisions.clear()
        assert_product_close(a @ b, _f64(a), _f64(b), 30, "float32")
        assert kernels and K.split_bf16_planes not in kernels
        assert K.PRECISION_BF16_PARTS.value not in precisions
    finally:
        MM.backends.cuda.matmul.float32_planes = True


def _launched_kernels(monkeypatch) -> list:
    """The kernels planned launches run from here on, in order."""
    from nbxtensor.ops import plans
    kernels, real = [], plans.launch_slots

    def recorded(kernel, *args):
        if not _checking[0]:
            kernels.append(kernel)
        return real(kernel, *args)
    monkeypatch.setattr(plans, "launch_slots", recorded)
    return kernels


def _launched_precisions(monkeypatch) -> list:
    """The ``PRECISION`` of the planned GEMM launches made from here on, in order."""
    from nbxtensor.ops import plans
    precisions, real = [], plans.launch_slots

    def noted(kernel, grid, device, args, positions, values, constexprs, *rest):
        if "PRECISION" in constexprs:
            precisions.append(constexprs["PRECISION"])
        return real(kernel, grid, device, args, positions, values, constexprs, *rest)
    monkeypatch.setattr(plans, "launch_slots", noted)
    return precisions


def test_float32_products_declare_their_planes_workspace():
    """A float32 product's cost declares the workspace of its bfloat16 planes (the largest K chunk's planes,
    and the previous chunk's sum when K is chunked), so a graph's memory plan counts it; decode rows declare
    the split-K partials of their GEMV instead; half types take none."""
    from nbxtensor.ops.registry import TensorMeta, get
    linear = get("linear").cost
    x, w = TensorMeta((32, 128, 384), nbx.float32), TensorMeta((1536, 384), nbx.float32)
    assert linear(x, w).workspace == 12 * 384 * (4096 + 1536)  # one chunk: six bfloat16 planes of each
    wide = TensorMeta((4096, 1536), nbx.float32)
    narrow_w = TensorMeta((384, 1536), nbx.float32)
    width = MP._plane_chunk_width(4096, 384, 1536)
    assert width < 1536 and width % 64 == 0
    assert linear(wide, narrow_w).workspace == 12 * width * (4096 + 384) + 4 * 4096 * 384
    # the GEMV settings split K = 384 at most three ways (tiles of 128): float32 partials of 16 x 1536 each
    assert linear(TensorMeta((16, 384), nbx.float32), w).workspace == 3 * 16 * 1536 * 4
    assert linear(TensorMeta((1, 384), nbx.float32), w).workspace == 3 * 1536 * 4
    assert linear(TensorMeta((4096, 384), nbx.bfloat16), TensorMeta((1536, 384), nbx.bfloat16)).workspace == 0


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("k", [12, 20, 30, 33])
def test_products_with_row_strides_off_16_elements(rng, dtype, k):
    """Attention-shaped batches whose rows are 12, 20, 30 or 33 elements apart (K off the K tile, row starts
    off 16 bytes): a @ b, a @ a^T's layout and an output of the same odd width, against float64."""
    cast = nbx.get_dtype(dtype).numpy
    a = rng.standard_normal((3, 9, k)).astype(cast)
    b = rng.standard_normal((3, k, k)).astype(cast)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    # float32 accumulation over k terms, then one rounding to the dtype
    eps = 2.0 ** -10 if dtype == "float16" else 2.0 ** -23
    for got, want, magnitude in [
            (nbx.bmm(to_nbx(a), to_nbx(b)), a64 @ b64, np.abs(a64) @ np.abs(b64)),
            (nbx.bmm(to_nbx(a), to_nbx(a).transpose(1, 2)), a64 @ a64.transpose(0, 2, 1),
             np.abs(a64) @ np.abs(a64).transpose(0, 2, 1))]:
        error = np.abs(got.numpy().astype(np.float64) - want)
        assert np.all(error <= k * 2.0 ** -23 * magnitude + eps * np.abs(want) + 1e-30)


def test_products_without_tile_edges_load_rows_and_columns_as_they_are(rng, monkeypatch):
    """Where m and n are multiples of the blocks no tile has an edge: EVEN_M / EVEN_N drop the guard on the
    rows and columns loaded (which hid b's contiguous columns from Triton: element loads, no pipelined K
    loop on a GPU). The products are the same bits with the guard forced back."""
    a = to_nbx(rng.standard_normal((3, 32, 40)).astype(np.float32))
    b = to_nbx(rng.standard_normal((3, 40, 64)).astype(np.float32))
    seen = []
    even_edges = MP._even_edges
    monkeypatch.setattr(MP, "_even_edges", lambda config, m, n: seen.append(even_edges(config, m, n)) or seen[-1])
    clear_all()
    plain = nbx.bmm(a, b).numpy()
    ragged = nbx.bmm(a[:, :31], b[:, :, :63]).numpy()
    assert dict(EVEN_M=True, EVEN_N=True) in seen and dict(EVEN_M=False, EVEN_N=False) in seen
    monkeypatch.setattr(MP, "_even_edges", lambda config, m, n: dict(EVEN_M=False, EVEN_N=False))
    clear_all()
    assert nbx.bmm(a, b).numpy().tobytes() == plain.tobytes()
    assert nbx.bmm(a[:, :31], b[:, :, :63]).numpy().tobytes() == ragged.tobytes()
    np.testing.assert_allclose(plain, a.numpy().astype(np.float64) @ b.numpy().astype(np.float64), rtol=1e-5,
                               atol=1e-4)
    clear_all()


def test_float64_products_sum_in_float64():
    """float64 operands take the FMA units' wide product (``gemm_wide``) in float64: every product form (mm,
    a GEMV's few rows, transposed operands read in place, matmul broadcasting batches, addmm and baddbmm with
    alpha and beta that float32 cannot hold, linear with a bias, mv, dot, einsum, K = 0). Against NumPy's
    float64 products: a sum of K products rounded in float64 is within about K ulps of the sum of the
    products' magnitudes, so the bound is (K + 2) * 2^-52 * (|a| @ |b| + |the added term|); alpha = 0.1 passed
    as float32 would miss by about 1e-9 of the product."""
    rng = np.random.default_rng(5)

    def close(got, want, a, b, added=0.0):
        assert got.dtype is nbx.float64
        scale = np.abs(a) @ np.abs(b) + np.abs(added)
        assert np.all(np.abs(got.numpy() - want) <= (a.shape[-1] + 2) * 2.0 ** -52 * scale)

    a, b, c = rng.standard_normal((37, 45)), rng.standard_normal((45, 29)), rng.standard_normal((37, 29))
    close(nbx.mm(to_nbx(a), to_nbx(b)), a @ b, a, b)
    close(nbx.mm(to_nbx(a[:3]), to_nbx(b)), a[:3] @ b, a[:3], b)
    close(nbx.mm(to_nbx(a.T.copy()).t(), to_nbx(b.T.copy()).t()), a @ b, a, b)
    close(nbx.addmm(to_nbx(c), to_nbx(a), to_nbx(b), beta=0.1, alpha=-1.7), 0.1 * c - 1.7 * (a @ b), 1.7 * a, b,
          0.1 * c)
    x, y = rng.standard_normal((3, 1, 6, 45)), rng.standard_normal((2, 45, 5))
    close(nbx.matmul(to_nbx(x), to_nbx(y)), x @ y, x, y)
    x, y, z = rng.standard_normal((4, 7, 9)), rng.standard_normal((4, 9, 3)), rng.standard_normal((4, 7, 3))
    alpha = 3 * 2.0 ** -30 + 2.0 ** -60
    close(nbx.baddbmm(to_nbx(z), to_nbx(x), to_nbx(y), beta=0.3, alpha=alpha), 0.3 * z + alpha * (x @ y), alpha * x,
          y, 0.3 * z)
    w, bias = rng.standard_normal((29, 45)), rng.standard_normal(29)
    close(nbx.nn.functional.linear(to_nbx(a), to_nbx(w), to_nbx(bias)), a @ w.T + bias, a, w.T, bias)
    close(nbx.mv(to_nbx(a), to_nbx(b[:, 0])), a @ b[:, 0], a, b[:, 0])
    close(nbx.dot(to_nbx(a[0]), to_nbx(b[:, 0])), a[0] @ b[:, 0], a[0], b[:, 0])
    close(nbx.einsum("ij,jk->ik", to_nbx(a), to_nbx(b)), a @ b, a, b)
    empty = nbx.mm(to_nbx(a[:, :0]), to_nbx(b[:0]))
    assert empty.dtype is nbx.float64 and empty.shape == (37, 29) and not empty.numpy().any()
