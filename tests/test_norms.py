"""softmax and the normalisations against NumPy float64 references.

Tolerances: float32 results are within a few eps32 relative of the exact value (one exp, one sum
over n < 2^10 elements accumulated in float32: n * eps32 * sum, and sum >= 1 after the max shift);
half-precision outputs add one rounding of their own dtype, so they are held to 2 eps of that dtype.
"""
import math

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.device.facts import load as load_facts
from nbxtensor.launch import capture
from nbxtensor.ops import registry
from nbxtensor.ops.normalization import _softmax_split
from nbxtensor.ops.registry import TensorMeta

from .conftest import to_nbx

F = nbx.nn.functional
EPS = {"float32": 2.0 ** -23, "float16": 2.0 ** -10, "bfloat16": 2.0 ** -7, "float64": 2.0 ** -52}


def tolerance(dtype, n):
    return 2 * EPS[dtype] + 4 * n * EPS["float32"] if dtype != "float64" else 4 * n * EPS["float64"]


def ref_softmax(a, dim):
    a = a.astype(np.float64)
    e = np.exp(a - a.max(dim, keepdims=True))
    return e / e.sum(dim, keepdims=True)


@pytest.fixture
def long_rows(set_kernel_facts):
    """Rows over 32 elements are not held in registers (softmax's: split in about 4 chunks, 16 elements a
    step); over 64 they are split in chunks of 16."""
    set_kernel_facts(row_resident_max=32, softmax_resident_max=32, reduction_split_length=64,
                     reduction_split_chunks=4, reduction_block=16, reduction_split_block=16, reduction_tile=256)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_softmax(rng, dtype, dim):
    a = (rng.standard_normal((5, 6, 21)) * 4).astype(nbx.get_dtype(dtype).numpy)
    x = to_nbx(a)
    n = a.shape[dim]
    got = F.softmax(x, dim)
    assert got.dtype.name == dtype
    np.testing.assert_allclose(got.numpy().astype(np.float64), ref_softmax(a, dim), rtol=tolerance(dtype, n),
                               atol=tolerance(dtype, n) * 1e-3)
    log = F.log_softmax(x, dim).numpy().astype(np.float64)
    ref_log = np.log(ref_softmax(a, dim))
    np.testing.assert_allclose(log, ref_log, rtol=tolerance(dtype, n), atol=tolerance(dtype, n) * 4)


def test_softmax_special_rows():
    a = np.array([[-np.inf] * 4, [0, -np.inf, 1, -np.inf], [1, np.nan, 2, 3], [np.inf, 0, 1, 2]], np.float32)
    got = to_nbx(a).softmax(-1).numpy()
    assert np.isnan(got[0]).all()  # all -inf: NaN, as torch
    np.testing.assert_allclose(got[1], ref_softmax(a[1:2], -1)[0], rtol=1e-6)
    assert np.isnan(got[2]).all()
    assert np.isnan(got[3]).any()  # +inf: inf - inf, as torch
    assert F.softmax(to_nbx(np.zeros((0, 3), np.float32)), 1).shape == (0, 3)
    assert to_nbx(np.array(3.0, np.float32)).softmax(0).item() == 1.0


def test_softmax_dtype_argument(rng):
    a = rng.standard_normal((3, 8)).astype(nbx.bfloat16.numpy)
    got = F.softmax(to_nbx(a), -1, dtype=nbx.float32)
    assert got.dtype == nbx.float32
    np.testing.assert_allclose(got.numpy(), ref_softmax(a, -1), rtol=1e-6)
    with pytest.raises(TypeError, match="floating-point"):
        F.softmax(to_nbx(np.arange(4)), 0)


@pytest.mark.parametrize("length", [40, 300])
def test_softmax_long_rows(rng, long_rows, length):
    a = (rng.standard_normal((3, length)) * 3).astype(np.float32)
    x = to_nbx(a)
    np.testing.assert_allclose(F.softmax(x, 1).numpy(), ref_softmax(a, 1), rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(F.log_softmax(x, 1).numpy(), np.log(ref_softmax(a, 1)), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(F.softmax(x.T, 0).numpy(), ref_softmax(a.T, 0), rtol=1e-5, atol=1e-9)
    batch = F.softmax(x, 1).numpy()
    assert F.softmax(x[1:2], 1).numpy().tobytes() == batch[1:2].tobytes()
    row = np.full((1, length), -np.inf, np.float32)
    assert np.isnan(F.softmax(to_nbx(row), 1).numpy()).all()


def test_softmax_rows_on_hopper_split_in_few_one_block_chunks():
    """Hopper holds a softmax row of up to 16384 elements in registers (64 x 16032, a vocabulary shard of
    tensor parallel 8: one program a row, one launch); a longer row splits in chunks of one 4096-wide block,
    so that every program of the sweep combines few chunk states (13 for 50257, 38 for 152064), a very
    long one in about ``reduction_split_chunks`` chunks; the cost rule declares every chunk's state."""
    hopper = load_facts("hopper")["kernels"]
    assert _softmax_split(16032, hopper) == (16032, 1)
    assert _softmax_split(16385, hopper) == (4096, 5)
    assert _softmax_split(50257, hopper) == (4096, 13)
    assert _softmax_split(152064, hopper) == (4096, 38)
    assert _softmax_split(1 << 24, hopper) == (16384, 1024)
    assert registry.get("softmax").cost(TensorMeta((64, 50257), nbx.float32), -1).workspace >= 2 * 4 * 64 * 13


def test_vocabulary_rows_under_hopper_facts(rng, set_kernel_facts):
    """Planned as on Hopper: a bfloat16 row of 16032 in one program of 16 warps (32 elements a thread), a
    float32 row of 50257 in 13 chunks of 4096 over two launches of one block a program; both against
    float64 within two roundings and the float32 sum of the row."""
    set_kernel_facts(**load_facts("hopper")["kernels"])
    shard = (rng.standard_normal((2, 16032)) * 3).astype(nbx.bfloat16.numpy)
    with capture() as captured:
        got = nbx.softmax(to_nbx(shard), -1).numpy().astype(np.float64)
    assert [(grid, c["RESIDENT"], c["BLOCK_R"], c["num_warps"]) for _, grid, _, _, c, _ in captured.launches] == \
        [((2,), True, 16384, 16)]
    np.testing.assert_allclose(got, ref_softmax(shard, 1), rtol=2 * EPS["bfloat16"] + 16032 * EPS["float32"],
                               atol=1e-38)
    vocabulary = (rng.standard_normal((2, 50257)) * 3).astype(np.float32)
    with capture() as captured:
        got = nbx.softmax(to_nbx(vocabulary), -1).numpy()
    assert [(grid, c["ONE_STEP"], c["BLOCK_R"]) for _, grid, _, _, c, _ in captured.launches] == \
        [((2, 13), True, 4096)] * 2
    np.testing.assert_allclose(got, ref_softmax(vocabulary, 1), rtol=2 * EPS["float32"] + 50257 * EPS["float32"],
                               atol=1e-38)


@pytest.mark.parametrize("dtype,shape", [("float32", (9, 197)), ("float16", (6, 257)), ("bfloat16", (3, 5, 41)),
                                         ("float32", (5, 1024)), ("float64", (7, 33))])
def test_short_rows_take_a_warp_each(rng, set_kernel_facts, dtype, shape):
    """Rows of 32 to 1024 elements that one warp's vector loads do not cover, under ``softmax_warp_rows`` (GPU
    facts): one warp a row, 4 rows a program, the row as [BLOCK_R // 32, 32] (197 and 257 are ViT's and CLIP's
    attention rows; 1024 float32 is past a warp's 128-element vectors). Against float64 within two roundings
    and the float32 sum of the row; log_softmax; a row alone gives the bits it has in the batch; a row of -inf
    is NaN and a NaN spreads over its row only."""
    set_kernel_facts(softmax_warp_rows=4)
    a = (rng.standard_normal(shape) * 3).astype(nbx.get_dtype(dtype).numpy)
    n = shape[-1]
    x = to_nbx(a)
    with capture() as captured:
        got = nbx.softmax(x, -1).numpy()
    rows = a.size // n
    assert [(grid, c["WARP_ROWS"], c["BLOCK_ROWS"], c["num_warps"], c["BLOCK_R"])
            for _, grid, _, _, c, _ in captured.launches] == [((-(-rows // 4),), True, 4, 4, 1 << (n - 1).bit_length())]
    bound = tolerance(dtype, n)
    np.testing.assert_allclose(got.astype(np.float64), ref_softmax(a, -1), rtol=bound, atol=bound * 1e-3)
    np.testing.assert_allclose(nbx.log_softmax(x, -1).numpy().astype(np.float64), np.log(ref_softmax(a, -1)),
                               rtol=bound, atol=bound * 4)
    flat, rows_got = a.reshape(rows, n), got.reshape(rows, n)
    for i in (0, rows - 1):
        assert nbx.softmax(to_nbx(flat[i:i + 1]), -1).numpy().tobytes() == rows_got[i:i + 1].tobytes()
    special = flat[:3].copy()
    special[0] = -np.inf
    special[1, n // 2] = np.nan
    out = nbx.softmax(to_nbx(special), -1).numpy()
    assert np.isnan(out[:2]).all() and not np.isnan(out[2]).any()


@pytest.mark.parametrize("block,chunks", [(64, 64), (16, 4)], ids=["one-block chunks", "chunks of 8 blocks"])
def test_a_split_softmax_sweeps_the_chunks_its_first_pass_cut(rng, set_kernel_facts, block, chunks):
    """Rows of 301 past the resident length: in 5 chunks of one 64-wide block, 4 rows a program (the sweep
    loads its block before it combines the chunk states), or, where a row would take more than
    ``reduction_split_chunks`` blocks, in 3 chunks of 128 stepped through 16 at a time. Against float64
    within two roundings and the float32 sum of 301 terms; a row alone gives the bits it gets in the
    batch; log_softmax too; a row of -inf is NaN as in torch."""
    set_kernel_facts(softmax_resident_max=32, reduction_split_block=block, reduction_split_chunks=chunks,
                     reduction_tile=256)
    a = (rng.standard_normal((9, 301)) * 3).astype(np.float32)
    x = to_nbx(a)
    with capture() as captured:
        got = nbx.softmax(x, -1).numpy()
    one_block = block == 64
    assert [(grid[1], constexprs["ONE_STEP"]) for _, grid, _, _, constexprs, _ in captured.launches] == \
        [(5 if one_block else 3, one_block)] * 2
    bound = 2 * EPS["float32"] + 301 * EPS["float32"]
    ref = ref_softmax(a, 1)
    np.testing.assert_allclose(got, ref, rtol=bound, atol=1e-38)
    np.testing.assert_allclose(nbx.log_softmax(x, -1).numpy(), np.log(ref), rtol=bound, atol=bound)
    for i in (0, 4, 8):
        assert nbx.softmax(x[i:i + 1], -1).numpy().tobytes() == got[i:i + 1].tobytes()
    assert np.isnan(nbx.softmax(to_nbx(np.full((2, 301), -np.inf, np.float32)), -1).numpy()).all()


def ref_layer_norm(a, n_dims, w=None, b=None, eps=1e-5):
    axes = tuple(range(a.ndim - n_dims, a.ndim))
    a = a.astype(np.float64)
    y = (a - a.mean(axes, keepdims=True)) / np.sqrt(a.var(axes, keepdims=True) + eps)
    if w is not None:
        y = y * w.astype(np.float64)
    if b is not None:
        y = y + b.astype(np.float64)
    return y


def ref_rms_norm(a, w=None, eps=1e-6):
    a = a.astype(np.float64)
    y = a / np.sqrt((a * a).mean(-1, keepdims=True) + eps)
    return y if w is None else y * w.astype(np.float64)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("resident", [True, False])
def test_layer_norm_and_rms_norm(rng, dtype, resident, request):
    if not resident:
        request.getfixturevalue("long_rows")
    npdt = nbx.get_dtype(dtype).numpy
    a = (rng.standard_normal((4, 3, 48)) * 2 + 5).astype(npdt)
    w = rng.standard_normal(48).astype(npdt)
    b = rng.standard_normal(48).astype(npdt)
    x = to_nbx(a)
    tol = tolerance(dtype, 48) * 8  # |y| reaches a few units: relative output rounding times that
    got = F.layer_norm(x, (48,), to_nbx(w), to_nbx(b)).numpy().astype(np.float64)
    np.testing.assert_allclose(got, ref_layer_norm(a, 1, w, b), rtol=tol, atol=tol)
    got = F.layer_norm(x, (3, 48)).numpy().astype(np.float64)
    np.testing.assert_allclose(got, ref_layer_norm(a, 2), rtol=tol, atol=tol)
    got = F.rms_norm(x, (48,), to_nbx(w), eps=1e-6).numpy().astype(np.float64)
    np.testing.assert_allclose(got, ref_rms_norm(a, w), rtol=tol, atol=tol)


def test_rms_norm_default_eps_is_dtype_eps():
    x = to_nbx(np.full((1, 4), 1e-3, np.float16))
    expected = 1e-3 / math.sqrt(1e-6 + 2.0 ** -10)
    assert abs(F.rms_norm(x, (4,)).numpy().astype(np.float64)[0, 0] - expected) < 1e-2 * expected


@pytest.mark.parametrize("resident", [True, False])
def test_fused_residual_norms(rng, resident, request):
    if not resident:
        request.getfixturevalue("long_rows")
    bf16 = nbx.bfloat16.numpy
    a = rng.standard_normal((5, 40)).astype(bf16)
    r = rng.standard_normal((5, 40)).astype(bf16)
    w = rng.standard_normal(40).astype(bf16)
    x, res, weight = to_nbx(a), to_nbx(r), to_nbx(w)
    h = (a.astype(np.float32) + r.astype(np.float32)).astype(bf16)  # the unfused add, rounded to bf16
    out, summed = F.add_rms_norm(x, res, (40,), weight, eps=1e-6)
    assert summed.numpy().tobytes() == h.tobytes()
    np.testing.assert_allclose(out.numpy().astype(np.float64), ref_rms_norm(h, w), rtol=2 ** -7, atol=2 ** -6)
    out, summed = F.add_layer_norm(x, res, (40,), weight, weight)
    assert summed.numpy().tobytes() == h.tobytes()
    np.testing.assert_allclose(out.numpy().astype(np.float64), ref_layer_norm(h, 1, w, w), rtol=2 ** -7, atol=2 ** -5)


@pytest.mark.parametrize("resident", [True, False])
def test_group_norm(rng, resident, request):
    if not resident:
        request.getfixturevalue("long_rows")
    a = rng.standard_normal((2, 6, 5, 3)).astype(np.float32)
    w = rng.standard_normal(6).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    got = F.group_norm(to_nbx(a), 3, to_nbx(w), to_nbx(b)).numpy()
    g = a.astype(np.float64).reshape(2, 3, -1)
    ref = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5)).reshape(a.shape)
    ref = ref * w[None, :, None, None] + b[None, :, None, None]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="6 channels do not split into 4 groups"):
        F.group_norm(to_nbx(a), 4)


def test_batch_norm_inference(rng):
    a = rng.standard_normal((2, 4, 3, 5)).astype(np.float32)
    mean, var = rng.standard_normal(4).astype(np.float32), rng.random(4).astype(np.float32) + 0.5
    w, b = rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    got = F.batch_norm(to_nbx(a), to_nbx(mean), to_nbx(var), to_nbx(w), to_nbx(b), eps=1e-3).numpy()
    c = (slice(None), None, None)
    ref = (a - mean[c]) / np.sqrt(var[c].astype(np.float64) + 1e-3) * w[c] + b[c]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    with pytest.raises(NotImplementedError, match="training"):
        F.batch_norm(to_nbx(a), to_nbx(mean), to_nbx(var), training=True)


def test_norm_errors_name_the_problem():
    x = to_nbx(np.ones((2, 4), np.float32))
    with pytest.raises(ValueError, match="normalized_shape \\[3\\] must be the trailing dims"):
        F.layer_norm(x, (3,))
    with pytest.raises(ValueError, match="weight has 3 elements, expected 4"):
        F.rms_norm(x, (4,), to_nbx(np.ones(3, np.float32)))


def test_strided_input_rows(rng):
    a = rng.standard_normal((6, 20)).astype(np.float32)
    x = to_nbx(a)[::2, 2:18]
    ref = a[::2, 2:18]
    np.testing.assert_allclose(F.layer_norm(x, (16,)).numpy(), ref_layer_norm(ref, 1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(F.softmax(x, 1).numpy(), ref_softmax(ref, 1), rtol=1e-5)


@pytest.mark.parametrize("resident", [True, False])
@pytest.mark.parametrize("length", [301, 304])
def test_a_row_normalises_to_the_same_bits_alone_or_in_a_batch(rng, resident, length, request):
    """Softmax, log_softmax, layer_norm and rms_norm (plain, weighted, with a residual) of a row do not
    depend on the rows around it, nor on where its buffer starts: a row alone, a row whose start is not
    16-byte aligned (which a compiler may load differently; copied to an aligned buffer first) and a
    whole batch held one float into its buffer all give the bits the row gets in the aligned batch of 9.
    Rows of 301 floats are loaded one by one, rows of 304 by 16-byte vectors."""
    if not resident:
        request.getfixturevalue("long_rows")
    a = rng.standard_normal((9, length)).astype(np.float32)
    w = rng.standard_normal(length).astype(np.float32)
    x, weight, residual = to_nbx(a), to_nbx(w), to_nbx(a[::-1].copy())

    def shifted(array):
        """``array``'s values in a view that starts 4 bytes into its buffer."""
        return to_nbx(np.concatenate([[0], array.ravel()]).astype(array.dtype))[1:].reshape(array.shape)
    F = nbx.nn.functional
    ops = [lambda t, w, r: nbx.softmax(t, -1), lambda t, w, r: nbx.log_softmax(t, -1),
           lambda t, w, r: F.layer_norm(t, (length,)), lambda t, w, r: F.rms_norm(t, (length,)),
           lambda t, w, r: F.layer_norm(t, (length,), w, w), lambda t, w, r: F.rms_norm(t, (length,), w),
           lambda t, w, r: F.add_rms_norm(t, r, (length,), w)[0]]
    for op in ops:
        batch = op(x, weight, residual).numpy()
        assert op(shifted(a), shifted(w), shifted(a[::-1])).numpy().tobytes() == batch.tobytes()
        for i in (0, 3, 8):  # row 3 of 301 starts 3 * 301 * 4 bytes in: not a multiple of 16
            alone = op(x[i:i + 1], weight, residual[i:i + 1]).numpy()
            assert alone.tobytes() == batch[i:i + 1].tobytes()


def test_softmax_of_a_transposed_input_is_contiguous_like_torch(rng):
    """torch returns softmax contiguous whatever the input's strides (code then views it freely); the
    columns of a transposed batch are read along a unit stride and written along a strided one."""
    a = rng.standard_normal((9, 304)).astype(np.float32)
    x = to_nbx(a).T
    out = nbx.softmax(x, 0)
    assert out.is_contiguous() and tuple(out.shape) == (304, 9)
    np.testing.assert_allclose(out.numpy(), ref_softmax(a.T, 0), rtol=tolerance("float32", 304))
    alone = nbx.softmax(x[:, 3:4], 0)
    assert alone.numpy().tobytes() == out[:, 3:4].contiguous().numpy().tobytes()


def test_rms_norm_of_a_transposed_dense_view_keeps_its_layout(rng):
    """An RMS norm over the trailing dim of a dense view in another order (a head-wise q norm of
    (batch, seq, heads, dim) projections transposed to (batch, heads, seq, dim)) returns its result in the
    input's layout, as the pointwise ops transformers' RMSNorm is written in do: a graph exported from them views
    the result's transpose as (batch, seq, heads * dim). Bits as the contiguous input's; the residual form keeps
    both results so; layer_norm returns contiguous results whatever the input (ATen's native_layer_norm)."""
    a = rng.standard_normal((2, 7, 4, 8)).astype(np.float32)
    r = rng.standard_normal((2, 7, 4, 8)).astype(np.float32)
    w = to_nbx(rng.standard_normal(8).astype(np.float32))
    x, res = to_nbx(a).transpose(1, 2), to_nbx(r).transpose(1, 2)
    out = nbx.rms_norm(x, (8,), w, 1e-6)
    assert out.stride() == x.stride()
    assert out.numpy().tobytes() == nbx.rms_norm(x.contiguous(), (8,), w, 1e-6).numpy().tobytes()
    assert tuple(out.transpose(1, 2).view(2, 7, 32).shape) == (2, 7, 32)
    normed, summed = F.add_rms_norm(x, res, (8,), w, eps=1e-6)
    assert normed.stride() == summed.stride() == x.stride()
    assert summed.numpy().tobytes() == (x.contiguous() + res.contiguous()).numpy().tobytes()
    assert nbx.layer_norm(x, (8,)).is_contiguous()


def _transformers_rms_norm(a, w, eps):
    """transformers' RMSNorm in float32 as it runs it: the normalised value rounded to the input's dtype,
    then multiplied by the weight (and rounded again)."""
    h = a.astype(np.float32)
    normed = h * (np.float32(1) / np.sqrt((h * h).mean(-1, keepdims=True) + np.float32(eps)))
    return (w.astype(np.float32) * normed.astype(a.dtype).astype(np.float32)).astype(a.dtype)


@pytest.mark.parametrize("resident", [True, False])
def test_rms_norm_rounding_the_normalised_value_first(rng, resident, request):
    """``round_normed`` rounds as transformers does. The kernel sums in another order than NumPy, so a
    value just at a bfloat16 rounding boundary may land one unit (2^-7 relative) away; without the
    rounding before the weight, about a third of the values would differ."""
    from nbxtensor.ops.normalization import add_rms_norm, rounded_rms_norm
    if not resident:
        request.getfixturevalue("long_rows")
    bf16 = nbx.bfloat16.numpy
    a = rng.standard_normal((16, 40)).astype(bf16)
    r = rng.standard_normal((16, 40)).astype(bf16)
    w = (rng.standard_normal(40) * 3).astype(bf16)
    h = (a.astype(np.float32) + r.astype(np.float32)).astype(bf16)
    for got, source in ((rounded_rms_norm(to_nbx(a), (40,), to_nbx(w), 1e-6, round_normed=True), a),
                        (add_rms_norm(to_nbx(a), to_nbx(r), (40,), to_nbx(w), 1e-6, round_normed=True)[0], h)):
        got, want = got.numpy(), _transformers_rms_norm(source, w, 1e-6)
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=2 ** -7, atol=0)
        assert np.mean(got.view(np.uint16) == want.view(np.uint16)) >= 0.97
    x32 = rng.standard_normal((3, 40)).astype(np.float32)  # float32: nothing to round, the plain rms_norm
    np.testing.assert_array_equal(rounded_rms_norm(to_nbx(x32), (40,), None, 1e-6, round_normed=True).numpy(),
                                  F.rms_norm(to_nbx(x32), (40,), eps=1e-6).numpy())
