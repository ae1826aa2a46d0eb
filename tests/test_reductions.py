"""Reductions and scans against NumPy float64 references.

Tolerances: a float32 result of a sum over n elements (fp32 accumulation, each element passing
through at most n additions) is within n * eps32 * sum(|x|) of the exact sum (Wilkinson's bound);
half-precision inputs accumulate in float32 too, and their output adds one rounding of the output
dtype (eps of that dtype, relative). Max, min, arg ops, counts and integer sums are exact.
"""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbxtensor as nbx
from nbxtensor.device import backend_for
from nbxtensor.kernels.reduce import _lane_sum

import triton  # noqa: E402  (after nbxtensor, which settles Triton's mode)
import triton.language as tl  # noqa: E402

from .conftest import cpu_kernels, examples, to_nbx

EPS = {"float32": np.finfo(np.float32).eps, "float64": np.finfo(np.float64).eps,
       "float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}


def sum_tolerance(a64, axis, out_dtype):
    """Absolute tolerance for a sum of ``a64`` over ``axis``, following the module docstring."""
    n = max(1, a64.size // max(1, np.asarray(a64.sum(axis=axis)).size))
    magnitude = np.abs(a64).sum(axis=axis)
    acc_eps = EPS["float64"] if out_dtype == "float64" else EPS["float32"]
    return n * acc_eps * magnitude + EPS[out_dtype] * np.abs(a64.sum(axis=axis)) + 1e-300


@pytest.fixture
def split_rows(set_kernel_facts):
    """Make rows longer than 64 elements take the split (two-pass) path, in chunks of >= 16."""
    set_kernel_facts(reduction_split_length=64, reduction_column_split_length=64, reduction_split_chunks=4,
                     reduction_block=16, reduction_split_block=16, reduction_tile=256)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("dim", [None, 0, 1, -1, (0, 2), (2, 0)])
def test_sum_mean_float(rng, dtype, dim):
    a = rng.standard_normal((4, 5, 7)).astype(nbx.get_dtype(dtype).numpy)
    a64 = a.astype(np.float64)
    x = to_nbx(a)
    axis = dim if dim is None or isinstance(dim, int) else tuple(dim)
    got = x.sum(dim).numpy().astype(np.float64)
    assert got.dtype == np.float64 and x.sum(dim).dtype.name == dtype
    np.testing.assert_array_less(np.abs(got - a64.sum(axis=axis)), sum_tolerance(a64, axis, dtype) * 2)
    n = a64.size // np.asarray(a64.sum(axis=axis)).size
    got_mean = x.mean(dim).numpy().astype(np.float64)
    np.testing.assert_array_less(np.abs(got_mean - a64.mean(axis=axis)),
                                 sum_tolerance(a64, axis, dtype) * 2 / n + 1e-7)


def test_keepdim_and_dtype_argument(rng):
    a = rng.standard_normal((3, 4, 5)).astype(np.float32)
    x = to_nbx(a)
    assert x.sum((0, 2), keepdim=True).shape == (1, 4, 1)
    assert x.amax(1, keepdim=True).shape == (3, 1, 5)
    assert nbx.sum(x, dtype=nbx.float64).dtype == nbx.float64
    np.testing.assert_allclose(nbx.sum(x, 1, dtype=nbx.float64).numpy(), a.astype(np.float64).sum(1), rtol=1e-12)
    # a narrowing dtype= converts the input first, as ATen does
    half = nbx.sum(x, 1, dtype=nbx.float16).numpy()
    np.testing.assert_allclose(half.astype(np.float64), a.astype(np.float16).astype(np.float64).sum(1),
                               rtol=4 * EPS["float16"])


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "int64", "bool"])
def test_integer_sums_promote_to_int64(rng, dtype):
    a = rng.integers(0, 2 if dtype == "bool" else 100, (5, 6)).astype(dtype)
    x = to_nbx(a)
    assert x.sum().dtype == nbx.int64 and x.sum(0).dtype == nbx.int64 and x.prod(1).dtype == nbx.int64
    assert x.sum().item() == int(a.astype(np.int64).sum())
    assert x.sum(0).tolist() == a.astype(np.int64).sum(0).tolist()
    assert x.prod(1).tolist() == a.astype(np.int64).prod(1).tolist()
    assert x.cumsum(1).dtype == nbx.int64
    assert x.cumsum(1).tolist() == np.cumsum(a.astype(np.int64), 1).tolist()


def test_int8_sum_does_not_wrap():
    x = to_nbx(np.full(300, 127, np.int8))
    assert x.sum().item() == 127 * 300


def test_empty_reductions(device):
    e = to_nbx(np.zeros((0, 3), np.float32))
    assert e.sum().item() == 0 and e.prod().item() == 1
    assert e.sum(0).tolist() == [0, 0, 0] and e.prod(0).tolist() == [1, 1, 1]
    assert math.isnan(e.mean().item())
    assert e.any().item() is False and e.all().item() is True and e.count_nonzero().item() == 0
    assert e.logsumexp(0).tolist() == [-math.inf] * 3
    assert e.sum(1).shape == (0,) and e.amax(1).shape == (0,)  # no rows: nothing to reduce, no error
    with pytest.raises(IndexError, match="max"):
        e.max()
    with pytest.raises(IndexError, match="reduction dim 0"):
        e.max(0)
    with pytest.raises(IndexError, match="amax"):
        e.amax(0)
    with pytest.raises(IndexError, match="argmax"):
        e.argmax()


def test_zero_dim_input():
    x = to_nbx(np.array(2.5, np.float32))
    assert x.sum().item() == 2.5 and x.sum(0).item() == 2.5 and x.amax(-1).item() == 2.5
    assert x.argmax().item() == 0 and x.max(0).indices.item() == 0
    assert x.cumsum(0).item() == 2.5


def test_bad_dims_are_named():
    x = to_nbx(np.ones((2, 3), np.float32))
    with pytest.raises(IndexError, match=r"sum: Dimension out of range .*got 2"):
        x.sum(2)
    with pytest.raises(RuntimeError, match="dim 1 appears multiple times"):
        x.sum((1, -1))
    with pytest.raises(RuntimeError, match="mean.*Long|mean.*int64"):
        to_nbx(np.ones(3, np.int64)).mean()
    with pytest.raises(RuntimeError, match="var"):
        to_nbx(np.ones(3, np.int32)).var()
    with pytest.raises(TypeError, match="complex"):
        to_nbx(np.ones(3, np.complex64)).sum()


def test_nan_propagation_and_ties():
    a = np.array([[1.0, np.nan, 3.0, np.nan], [2.0, 5.0, 5.0, -1.0], [-np.inf, -np.inf, -np.inf, -np.inf]],
                 np.float32)
    x = to_nbx(a)
    assert np.isnan(x.amax(1).numpy()[0]) and np.isnan(x.amin(1).numpy()[0])
    assert math.isnan(x.max().item()) and math.isnan(x.min().item())
    values, indices = x.max(1)
    assert indices.tolist() == [1, 1, 0] and values.numpy()[1] == 5
    assert x.min(1).indices.tolist() == [1, 3, 0]
    assert x.argmax(1).tolist() == [1, 1, 0] and x.argmin(1).tolist() == [1, 3, 0]
    assert x.argmax().item() == 1
    assert np.isnan(x.sum(1).numpy()[0]) and x.nansum(1).numpy()[0] == 4.0
    assert x.nanmean(1).numpy()[0] == 2.0
    lo, hi = nbx.aminmax(x, dim=1)
    assert np.isnan(lo.numpy()[0]) and hi.numpy()[1] == 5 and lo.numpy()[1] == -1


def test_ties_first_occurrence_across_lanes(split_rows):
    """Equal maxima far apart (different lanes and, with split rows, different chunks)."""
    a = np.zeros(200, np.float32)
    a[[37, 150, 199]] = 7
    x = to_nbx(a)
    assert x.argmax().item() == 37 and x.max(0).indices.item() == 37
    assert to_nbx(-a).argmin().item() == 37
    b = a.copy()
    b[160] = np.nan
    assert to_nbx(b).argmax().item() == 160 and math.isnan(to_nbx(b).amax().item())


def test_large_int64_extremes_are_exact():
    """A NaN check that mixed a float constant into integer maxima rounded them to float32."""
    a = np.array([[2 ** 40 + 1, 5, -(2 ** 50) - 3], [2 ** 62 + 7, 2 ** 62 + 9, 0]], np.int64)
    x = to_nbx(a)
    assert x.amax(1).tolist() == a.max(1).tolist() and x.amin(1).tolist() == a.min(1).tolist()
    assert x.max(1).values.tolist() == a.max(1).tolist() and x.argmax(1).tolist() == [0, 1]
    assert nbx.aminmax(x).max.item() == 2 ** 62 + 9


def test_integer_and_bool_extremes():
    a = np.array([[3, -7, 9, 9], [-128, 0, 127, -128]], np.int8)
    x = to_nbx(a)
    assert x.amax(1).tolist() == [9, 127] and x.amin(1).tolist() == [-7, -128] and x.amax(1).dtype == nbx.int8
    assert x.argmax(1).tolist() == [2, 2] and x.argmin(1).tolist() == [1, 0]
    b = to_nbx(np.array([[True, False], [False, False]]))
    assert b.amax(1).tolist() == [True, False] and b.any(1).tolist() == [True, False]
    assert b.all().item() is False and b.any().dtype == nbx.bool
    u = to_nbx(np.array([0, 3], np.uint8))
    assert u.any().dtype == nbx.uint8 and u.all().item() == 0  # ATen keeps uint8 for any/all
    assert to_nbx(np.array([0.0, np.nan], np.float32)).all().item() is False
    assert to_nbx(np.array([np.nan], np.float32)).any().item() is True


@pytest.mark.parametrize("correction", [0, 1, 2])
def test_var_std(rng, correction):
    a = (rng.standard_normal((6, 50)) * 3 + 1000).astype(np.float32)  # a large mean: Welford keeps precision
    x = to_nbx(a)
    ref = a.astype(np.float64).var(1, ddof=correction)
    np.testing.assert_allclose(x.var(1, correction=correction).numpy(), ref, rtol=1e-4)
    np.testing.assert_allclose(x.std(1, correction=correction).numpy(), np.sqrt(ref), rtol=1e-4)
    v, m = nbx.var_mean(x, 1, correction=correction)
    np.testing.assert_allclose(m.numpy(), a.astype(np.float64).mean(1), rtol=1e-6)
    s, m = nbx.std_mean(x, (0, 1), correction=correction)
    np.testing.assert_allclose(s.numpy(), a.astype(np.float64).std(ddof=correction), rtol=1e-4)
    np.testing.assert_allclose(x.var(1, False).numpy(), a.astype(np.float64).var(1), rtol=1e-4)
    assert math.isnan(to_nbx(np.ones(1, np.float32)).var().item())


@pytest.mark.parametrize("p", [0, 1, 2, 3, 0.5, -1.5, math.inf, -math.inf, "fro"])
def test_vector_norms(rng, p):
    a = rng.standard_normal((5, 9)).astype(np.float32)
    a[0, 3] = 0
    x = to_nbx(a)
    order = 2 if p == "fro" else p
    for dim in (1, None):
        got = nbx.linalg.vector_norm(x, order, dim).numpy()
        flat = np.abs(a.astype(np.float64)).reshape(5, 9) if dim == 1 else np.abs(a.astype(np.float64)).reshape(1, 45)
        if order == 0:
            ref = (flat != 0).sum(1)
        elif order == math.inf:
            ref = flat.max(1)
        elif order == -math.inf:
            ref = flat.min(1)
        else:
            with np.errstate(divide="ignore"):
                ref = (flat ** order).sum(1) ** (1 / order)
        np.testing.assert_allclose(got.reshape(-1), ref, rtol=2e-5)
    np.testing.assert_allclose(x.norm(p, 1).numpy(), nbx.linalg.vector_norm(x, order, 1).numpy())


def test_logsumexp(rng):
    a = (rng.standard_normal((4, 30)) * 50).astype(np.float32)
    a[1] = -np.inf
    a[2, 4] = np.inf
    x = to_nbx(a)
    got = x.logsumexp(1).numpy()
    a64 = a.astype(np.float64)
    np.testing.assert_allclose(got[[0, 3]], np.logaddexp.reduce(a64[[0, 3]], axis=1), rtol=1e-6)
    assert got[1] == -np.inf and got[2] == np.inf
    assert to_nbx(np.arange(4)).logsumexp(0).dtype == nbx.float32


def test_count_nonzero(rng):
    a = rng.integers(-1, 2, (4, 5, 6)).astype(np.float32)
    x = to_nbx(a)
    assert x.count_nonzero().item() == np.count_nonzero(a)
    assert x.count_nonzero((0, 2)).tolist() == np.count_nonzero(a, axis=(0, 2)).tolist()


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scans(rng, dim):
    a = rng.standard_normal((4, 37)).astype(np.float32)
    a64 = a.astype(np.float64)
    x = to_nbx(a)
    np.testing.assert_allclose(x.cumsum(dim).numpy(), np.cumsum(a64, dim), atol=40 * EPS["float32"] * 40)
    small = to_nbx(a * 0.5 + 1)
    np.testing.assert_allclose(small.cumprod(dim).numpy(), np.cumprod(a64 * 0.5 + 1, dim), rtol=40 * EPS["float32"])
    # m + log(s) cancels near zero: absolute error of a few eps times the running max (|x| < 5 here)
    np.testing.assert_allclose(x.logcumsumexp(dim).numpy(), np.logaddexp.accumulate(a64, dim), rtol=1e-5,
                               atol=8 * 5 * EPS["float32"])
    values, indices = x.cummax(dim)
    np.testing.assert_array_equal(values.numpy(), np.maximum.accumulate(a, dim))
    values, indices = x.cummin(dim)
    np.testing.assert_array_equal(values.numpy(), np.minimum.accumulate(a, dim))


def test_cummax_indices_follow_aten():
    """ATen's cummax keeps the last index among equal maxima; NaN sticks and takes each new NaN's index."""
    a = np.array([1, 3, 3, 2, np.nan, 5, np.nan], np.float32)
    values, indices = to_nbx(a).cummax(0)
    assert indices.tolist() == [0, 1, 2, 2, 4, 4, 6]
    assert np.isnan(values.numpy()[4:]).all()
    assert to_nbx(np.array([2, 1, 1, 3], np.int32)).cummin(0).indices.tolist() == [0, 1, 2, 2]


def test_long_rows_split_path(rng, split_rows):
    a = rng.standard_normal((3, 1000)).astype(np.float32)
    a64 = a.astype(np.float64)
    x = to_nbx(a)
    np.testing.assert_array_less(np.abs(x.sum(1).numpy() - a64.sum(1)), sum_tolerance(a64, 1, "float32") * 2)
    np.testing.assert_allclose(x.var(1).numpy(), a64.var(1, ddof=1), rtol=1e-5)
    np.testing.assert_allclose(x.logsumexp(1).numpy(), np.logaddexp.reduce(a64, 1), rtol=1e-6)
    assert x.argmax(1).tolist() == a.argmax(1).tolist() and x.amin(1).tolist() == a.min(1).tolist()
    near_one = 1 + a * 1e-3
    np.testing.assert_allclose(to_nbx(near_one).prod(1).numpy(), np.prod(near_one.astype(np.float64), 1), rtol=1e-4)
    np.testing.assert_allclose(x.T.sum(0).numpy(), a64.sum(1), rtol=1e-5)  # column layout, split as well


def test_column_layout(rng):
    a = rng.standard_normal((50, 6, 3)).astype(np.float32)
    a64 = a.astype(np.float64)
    x = to_nbx(a)
    np.testing.assert_allclose(x.sum(0).numpy(), a64.sum(0), rtol=1e-5, atol=1e-5)
    assert x.argmax(0).tolist() == a.argmax(0).tolist()
    np.testing.assert_allclose(x.var(0).numpy(), a64.var(0, ddof=1), rtol=1e-5)


def test_deterministic_bits(rng):
    a = rng.standard_normal((8, 3000)).astype(np.float32)
    x = to_nbx(a)
    for op in (lambda t: t.sum(1), lambda t: t.var(1), lambda t: t.logsumexp(1), lambda t: t.norm(2, 1),
               lambda t: t.sum()):
        first, second = op(x).numpy(), op(x).numpy()
        assert first.tobytes() == second.tobytes()


@pytest.mark.parametrize("long_rows", [False, True])
def test_batch_independence(rng, long_rows, request):
    """A row reduced alone gives the same bits as the same row reduced inside a batch."""
    if long_rows:
        request.getfixturevalue("split_rows")
    # rows of 301 float32: split in 3 chunks under split_rows, and most rows start off 16-byte alignment
    a = rng.standard_normal((9, 301)).astype(np.float32)
    x = to_nbx(a)
    ops = [lambda t: t.sum(-1), lambda t: t.mean(-1), lambda t: t.var(-1), lambda t: t.logsumexp(-1),
           lambda t: t.norm(3, -1), lambda t: t.prod(-1), lambda t: t.cumsum(-1)]
    for op in ops:
        batch = op(x).numpy()
        for i in (0, 8):
            assert op(x[i:i + 1]).numpy().tobytes() == batch[i:i + 1].tobytes()
            assert op(x[i]).numpy().tobytes() == batch[i].tobytes()
    columns = x.T  # rows of the column layout
    batch = columns.sum(0).numpy()
    assert columns[:, 3:4].sum(0).numpy().tobytes() == batch[3:4].tobytes()


@pytest.mark.parametrize("long_rows", [False, True])
def test_cumsum_of_long_rows(rng, long_rows, request):
    """cumsum of rows past the split length scans their chunks in parallel from the totals of the chunks
    before (split_rows: 301 elements in chunks of 128): integers exactly; float32 within the bound of
    301 float32 additions; a single row, rows along a strided dim, and a length just past a chunk."""
    if long_rows:
        request.getfixturevalue("split_rows")
    ints = rng.integers(-1000, 1000, (4, 301)).astype(np.int32)
    assert to_nbx(ints).cumsum(1).tolist() == np.cumsum(ints.astype(np.int64), 1).tolist()
    assert to_nbx(ints[:, :129]).cumsum(1).tolist() == np.cumsum(ints[:, :129].astype(np.int64), 1).tolist()
    assert to_nbx(ints.T.copy()).cumsum(0).tolist() == np.cumsum(ints.T.astype(np.int64), 0).tolist()
    floats = rng.standard_normal(301).astype(np.float32)
    exact = np.cumsum(floats.astype(np.float64))
    bound = 301 * EPS["float32"] * np.cumsum(np.abs(floats.astype(np.float64)))
    assert np.all(np.abs(to_nbx(floats).cumsum(0).numpy() - exact) <= bound)


def test_meta_and_cost_rules():
    from nbxtensor.ops import registry
    from nbxtensor.ops.registry import TensorMeta
    m = TensorMeta((4, 6), nbx.bfloat16)
    assert registry.get("sum").meta(m, 1) == TensorMeta((4,), nbx.bfloat16)
    assert registry.get("sum").meta(TensorMeta((4, 6), nbx.int32), None) == TensorMeta((), nbx.int64)
    assert registry.get("max").meta(m, 0, True) == (TensorMeta((1, 6), nbx.bfloat16), TensorMeta((1, 6), nbx.int64))
    assert registry.get("sum").cost(m, 1).bytes_read == 48
    for name in ("sum", "amax", "var", "logsumexp", "any", "cumsum", "linalg.vector_norm"):
        op = registry.get(name)
        x = to_nbx(np.ones((4, 6), np.float32))
        out = op(x, 1) if name != "linalg.vector_norm" else op(x, 2, 1)
        meta = op.meta(TensorMeta((4, 6), nbx.float32), 1) if name != "linalg.vector_norm" else \
            op.meta(TensorMeta((4, 6), nbx.float32), 2, 1)
        assert (tuple(out.shape), out.dtype) == (tuple(meta.shape), meta.dtype), name


@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=4), data=st.data())
def test_hypothesis_strided_sum_and_max(shape, data):
    rng = np.random.default_rng(len(shape))
    base = rng.standard_normal([2 * s for s in shape]).astype(np.float32)
    x = to_nbx(base)
    view = x[tuple(slice(None, None, 2) for _ in shape)]
    ref = base[tuple(slice(None, None, 2) for _ in shape)]
    perm = data.draw(st.permutations(range(len(shape))))
    view, ref = view.permute(*perm), ref.transpose(perm)
    dims = tuple(sorted(data.draw(st.sets(st.integers(0, len(shape) - 1), min_size=1))))
    keepdim = data.draw(st.booleans())
    a64 = ref.astype(np.float64)
    np.testing.assert_allclose(view.sum(dims, keepdim).numpy(), a64.sum(dims, keepdims=keepdim), rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_array_equal(view.amax(dims, keepdim).numpy(), ref.max(dims, keepdims=keepdim))
    d = dims[0]
    assert view.argmax(d).tolist() == ref.argmax(d).tolist()
    np.testing.assert_allclose(view.cumsum(d).numpy(), np.cumsum(a64, d), rtol=1e-5, atol=1e-5)


@triton.jit
def lane_sums(src, perm, out, LANES: tl.constexpr):
    rows = tl.arange(0, 2)
    lanes = tl.load(perm + tl.arange(0, LANES))
    tl.store(out + rows, _lane_sum(tl.load(src + rows[:, None] * LANES + lanes[None, :])))


@cpu_kernels
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_lane_sums_do_not_depend_on_the_order_of_lanes(dtype):
    """The lane combine of float sums gives the same bits whatever order a compiled kernel's layout adds
    lanes in (it can differ between batchings of the same row). It first adds neighbouring lanes in a
    tree the code fixes (256 lanes: groups of 4, ((a + b) + (c + d))), then the 64 group sums in an order
    that does not matter; so the groups are shuffled here. The plain pairwise sum of the interpreter
    does depend on the order, so this catches a final combine that adds floats."""
    def run(values, order):
        held = [to_nbx(values, device="cpu"), to_nbx(order.astype(np.int32), device="cpu"),
                nbx.empty(2, dtype=dtype, device="cpu")]  # alive while the kernel reads their memory
        lane_sums[(1,)](*[t._kernel_pointer(backend_for(t.device)) for t in held], LANES=256)
        return held[2].numpy()

    rng = np.random.default_rng(11)
    values = (rng.standard_normal((2, 256)) * np.exp2(rng.integers(-20, 20, (2, 256)))).astype(dtype)
    values[1, :7] = [1e30, -1e30, 3.0, 1e-30, -2.5, 7e10, -7e10]  # cancellation around a large lane
    exact = [math.fsum(row) for row in values.astype(np.float64)]
    results = set()
    for seed in range(6):
        groups = np.arange(64) if seed == 0 else np.random.default_rng(seed).permutation(64)
        got = run(values, (groups[:, None] * 4 + np.arange(4)[None, :]).ravel())
        results.add(got.tobytes())
        # two rounded additions per group, then each of 64 = 2^6 group sums keeps 54 bits below the
        # largest one's magnitude
        groups_abs = np.abs(values.astype(np.float64)).reshape(2, 64, 4).sum(axis=2)
        bound = (np.finfo(dtype).eps * (np.abs(exact) + 2 * groups_abs.sum(axis=1))
                 + groups_abs.max(axis=1) * 2.0 ** -50)
        assert np.all(np.abs(got - exact) <= bound)
    assert len(results) == 1
    values[0, 5], values[1, 9] = np.inf, np.nan
    got = run(values, np.arange(256))
    assert got[0] == np.inf and np.isnan(got[1])
    # rows of float32 subnormals (normal in the float64 the lanes are scaled in) sum exactly
    if dtype != "float32":
        return
    tiny = np.finfo(dtype).smallest_subnormal
    values = (rng.integers(-1000, 1000, (2, 256)) * tiny).astype(dtype)
    got = run(values, np.random.default_rng(3).permutation(256))
    assert got.tolist() == [float(np.sum(row.astype(np.float64))) for row in values]


def test_simple_reductions_plan_once_per_layout_and_recheck_bad_calls(rng):
    """sum and friends keep one plan per (layout, dims, keepdim, dtype): new tensors of a seen layout
    reduce correctly, a list of dims is a key like its tuple, and a bad dim raises every time."""
    from nbxtensor.ops import reductions as R
    R._simple_plans.clear()
    for _ in range(3):
        a = rng.standard_normal((4, 6, 5)).astype(np.float32)
        x = to_nbx(a)
        np.testing.assert_allclose(x.sum([0, 2]).numpy(), a.astype(np.float64).sum((0, 2)), rtol=1e-5)
        np.testing.assert_allclose(nbx.mean(x, (0, 2), keepdim=True).numpy(),
                                   a.astype(np.float64).mean((0, 2), keepdims=True), rtol=1e-5)
    assert len(R._simple_plans) == 2
    for _ in range(2):
        with pytest.raises(IndexError, match="sum"):
            x.sum(3)
