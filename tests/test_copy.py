"""copy_, fill_, zero_, clone, contiguous and to(dtype): the one strided copy, checked against NumPy.

Values in the dtype-pair tests are small integers, which every dtype (float8 included) holds exactly,
so the expected result of any conversion is plain: the value itself, or ``value != 0`` for bool.
Conversion corner cases live in test_cast.py.
"""
import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbxtensor as nbx
from tests.conftest import TEST_DEVICE, cpu_kernels, examples, to_nbx

pytestmark = pytest.mark.filterwarnings("ignore:Casting complex values to real")

ALL_DTYPES = [d.name for d in nbx.all_dtypes]
POISON = 96  # written over a destination's storage first; every dtype, float8 included, holds it exactly


def np_dtype(name):
    return nbx.get_dtype(name).numpy


def small_ints(shape, rng, dtype="float64"):
    """Values 0..7: exact in every dtype, nonzero for most elements."""
    return rng.integers(0, 8, size=shape).astype(np_dtype(dtype))


def expected_cast(values: np.ndarray, dst: str) -> np.ndarray:
    """Small-integer ``values`` of any dtype as ``dst`` holds them."""
    if values.dtype.kind == "c":
        values = values.real
    as_float = values.astype(np.float64)
    if dst == "bool":
        return as_float != 0
    return as_float.astype(np_dtype(dst))


def host(t: nbx.Tensor) -> np.ndarray:
    return np.array(t.numpy())


def assert_same(actual: np.ndarray, expected: np.ndarray):
    assert actual.shape == expected.shape
    assert actual.dtype == expected.dtype
    np.testing.assert_array_equal(actual.astype(np.float64) if actual.dtype.kind == "V" else actual, expected)


def base_storage_values(base: nbx.Tensor) -> np.ndarray:
    """Every element of a contiguous base tensor as float64 (bool and float8 included)."""
    return np.array(base.numpy()).astype(np.complex128 if base.dtype.is_complex else np.float64)


# ---- random strided views -----------------------------------------------------------------------

def view_plan(draw, shape):
    """How to reach a view of ``shape`` from a contiguous base: a storage order (permutation), and per
    stored dim a start and a step. Returns (base_shape, slices, perm_back)."""
    rank = len(shape)
    perm = draw(st.permutations(range(rank))) if rank else []
    stored = [shape[p] for p in perm]
    starts = [draw(st.integers(0, 1)) for _ in stored]
    steps = [draw(st.integers(1, 2)) for _ in stored]
    tails = [draw(st.integers(0, 1)) for _ in stored]
    base_shape = tuple(s0 + (n - 1) * k + 1 + t for n, s0, k, t in zip(stored, starts, steps, tails))
    slices = tuple(slice(s0, s0 + (n - 1) * k + 1, k) for n, s0, k in zip(stored, starts, steps))
    perm_back = tuple(int(i) for i in np.argsort(perm)) if rank else ()
    return base_shape, slices, perm_back


def apply_plan(base, slices, perm_back):
    """The same view of a NumPy array or an nbxtensor tensor."""
    v = base[slices] if slices else base
    if isinstance(v, np.ndarray):
        return v.transpose(perm_back) if perm_back else v
    return v.permute(*perm_back) if perm_back else v


shapes = st.lists(st.integers(1, 4), min_size=0, max_size=5).filter(lambda s: int(np.prod(s)) <= 200)


@st.composite
def copy_cases(draw):
    shape = tuple(draw(shapes))
    dst_plan = view_plan(draw, shape)
    # the source: broadcast from a shape with some dims dropped in front or set to 1, then viewed
    lead = draw(st.integers(0, len(shape)))
    src_shape = tuple(1 if draw(st.booleans()) and draw(st.booleans()) else n for n in shape[lead:])
    src_plan = view_plan(draw, src_shape)
    src_dtype = draw(st.sampled_from(ALL_DTYPES))
    dst_dtype = draw(st.sampled_from(ALL_DTYPES))
    seed = draw(st.integers(0, 2 ** 16))
    return shape, dst_plan, src_shape, src_plan, src_dtype, dst_dtype, seed


@settings(max_examples=examples(50), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(copy_cases())
def test_copy_any_strides_broadcast_and_dtypes(case):
    shape, (dst_base_shape, dst_slices, dst_back), src_shape, (src_base_shape, src_slices, src_back), \
        src_dtype, dst_dtype, seed = case
    rng = np.random.default_rng(seed)
    src_base_np = small_ints(src_base_shape, rng, src_dtype)
    src_np = apply_plan(src_base_np, src_slices, src_back)
    assert src_np.shape == src_shape

    dst_base = to_nbx(np.full(dst_base_shape, POISON, dtype=np.float64)).to(dst_dtype)
    before = base_storage_values(dst_base)
    dst = apply_plan(dst_base, dst_slices, dst_back)
    assert tuple(dst.shape) == shape

    out = dst.copy_(apply_plan(to_nbx(src_base_np), src_slices, src_back))
    assert out is dst

    expected = np.broadcast_to(expected_cast(src_np, dst_dtype), shape)
    assert_same(host(dst), expected.astype(np_dtype(dst_dtype)))
    # nothing outside the view changed
    covered = np.zeros(dst_base_shape, dtype=bool)
    apply_plan(covered, dst_slices, dst_back)[...] = True
    after = base_storage_values(dst_base)
    np.testing.assert_array_equal(after[~covered], before[~covered])


@pytest.mark.parametrize("src_dtype,dst_dtype", list(itertools.product(ALL_DTYPES, ALL_DTYPES)))
def test_copy_every_dtype_pair_into_strided_view(src_dtype, dst_dtype):
    """Both sides strided (a transposed source, a sliced and transposed destination), every dtype pair."""
    rng = np.random.default_rng(7)
    src_np = small_ints((3, 4), rng, src_dtype)
    src = to_nbx(src_np.T.copy()).t()  # values src_np, column-major
    base = to_nbx(np.full((5, 6), POISON, np.float64)).to(dst_dtype)
    before = base_storage_values(base)
    dst = base[1:, ::2][:4, :3].t()  # (3, 4): rows 1..4, columns 0, 2, 4, transposed
    dst.copy_(src)
    assert_same(host(dst), expected_cast(src_np, dst_dtype))
    covered = np.zeros((5, 6), bool)
    covered[1:, ::2][:4, :3] = True
    np.testing.assert_array_equal(base_storage_values(base)[~covered], before[~covered])


def test_copy_half_source_into_float_buffer_converts():
    """Lesson: an fp16 source copied into an fp32 buffer was a raw byte copy."""
    src = to_nbx(np.array([1.5, -2.25, 65504.0], np.float16))
    dst = to_nbx(np.zeros(3, np.float32))
    dst.copy_(src)
    np.testing.assert_array_equal(host(dst), np.array([1.5, -2.25, 65504.0], np.float32))


def test_copy_into_strided_destination_writes_the_values():
    """Lesson: copy_ into a strided destination wrote zeros."""
    base = to_nbx(np.zeros((4, 4), np.float32))
    base[:, 1].copy_(to_nbx(np.array([1, 2, 3, 4], np.float32)))
    expected = np.zeros((4, 4), np.float32)
    expected[:, 1] = [1, 2, 3, 4]
    np.testing.assert_array_equal(host(base), expected)


def test_copy_from_zero_dim_broadcasts():
    dst = to_nbx(np.zeros((2, 3), np.int32))
    dst.copy_(to_nbx(np.array(2.75)))
    np.testing.assert_array_equal(host(dst), np.full((2, 3), 2, np.int32))


def test_copy_broadcasts_rows_and_columns():
    dst = to_nbx(np.zeros((3, 4), np.float64))
    dst.copy_(to_nbx(np.arange(4.0)))
    np.testing.assert_array_equal(host(dst), np.broadcast_to(np.arange(4.0), (3, 4)))
    dst.copy_(to_nbx(np.arange(3.0).reshape(3, 1)))
    np.testing.assert_array_equal(host(dst), np.broadcast_to(np.arange(3.0).reshape(3, 1), (3, 4)))


def test_copy_rejects_a_source_that_does_not_broadcast():
    dst = to_nbx(np.zeros((2, 3), np.float32))
    with pytest.raises(RuntimeError):
        dst.copy_(to_nbx(np.zeros((3, 2), np.float32)))
    with pytest.raises(RuntimeError):
        dst.copy_(to_nbx(np.zeros((2, 2, 3), np.float32)))


def test_copy_expects_a_tensor():
    with pytest.raises(TypeError):
        to_nbx(np.zeros(3, np.float32)).copy_(1.0)


@pytest.mark.parametrize("rank", [6, 8, 10])
def test_high_rank_permuted_copy(rank):
    """Lesson: a copy kernel that handled at most 5 dims dropped the rest (6-D patchify, 8-D video VAE).
    Extents alternate so that no two dims merge; rank 10 is beyond what one launch indexes."""
    shape = (2,) * rank if rank == 10 else tuple(2 if i % 2 else 3 for i in range(rank))
    values = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    perm = tuple(range(rank - 1, -1, -1))
    perm = perm[1::2] + perm[0::2]  # a shuffle that keeps no neighbours together
    expected = values.transpose(perm)
    x = to_nbx(values).permute(*perm)
    assert not x.is_contiguous()
    np.testing.assert_array_equal(host(x.contiguous()), expected)
    # a permuted destination too
    reverse = tuple(range(rank - 1, -1, -1))
    out = nbx.empty(expected.transpose(reverse).shape, dtype=nbx.float32, device=TEST_DEVICE)
    out.permute(*reverse).copy_(x)
    np.testing.assert_array_equal(host(out), expected.transpose(reverse))


# ---- overlap and broadcast destinations ----------------------------------------------------------

def test_partially_overlapping_copy_raises():
    x = to_nbx(np.arange(6.0, dtype=np.float32))
    with pytest.raises(RuntimeError, match="single memory location"):
        x[1:].copy_(x[:-1])
    with pytest.raises(RuntimeError, match="single memory location"):
        x[:-1].copy_(x[1:])
    np.testing.assert_array_equal(host(x), np.arange(6.0, dtype=np.float32))


def test_copy_onto_itself_is_allowed():
    x = to_nbx(np.arange(6.0, dtype=np.float32))
    x.copy_(x)
    x[2:4].copy_(x[2:4])
    np.testing.assert_array_equal(host(x), np.arange(6.0, dtype=np.float32))


def test_interleaved_views_of_one_storage_copy():
    """Views of one storage that interleave without sharing an element are fine: ATen judges overlap
    only between dense tensors (x[::2] and x[1::2] share a byte range but no element)."""
    x = to_nbx(np.arange(6.0, dtype=np.float32))
    x[::2].copy_(x[1::2])
    np.testing.assert_array_equal(host(x), np.array([1, 1, 3, 3, 5, 5], np.float32))
    y = to_nbx(np.arange(8.0, dtype=np.float32).reshape(4, 2))
    y[:, 0].copy_(y[:, 1])
    np.testing.assert_array_equal(host(y)[:, 0], np.array([1, 3, 5, 7], np.float32))


def test_copy_into_expanded_tensor_raises():
    x = to_nbx(np.zeros(3, np.float32)).expand(2, 3)
    with pytest.raises(RuntimeError, match="single memory location"):
        x.copy_(to_nbx(np.ones((2, 3), np.float32)))


def test_fill_of_expanded_tensor_is_allowed_as_in_aten():
    """ATen's fill_ and zero_ skip the overlap check: every shared location gets the same value."""
    base = to_nbx(np.zeros(3, np.float32))
    base.expand(2, 3).fill_(4.0)
    np.testing.assert_array_equal(host(base), np.full(3, 4.0, np.float32))
    base.expand(2, 3).zero_()
    np.testing.assert_array_equal(host(base), np.zeros(3, np.float32))


def test_fill_from_zero_dim_view_of_itself():
    """fill_(x, x[2]) reads the value before overwriting it (ATen clones an aliasing value)."""
    x = to_nbx(np.arange(6.0, dtype=np.float32))
    x.fill_(x[2])
    np.testing.assert_array_equal(host(x), np.full(6, 2.0, np.float32))


def test_fill_rejects_a_dimensioned_value_tensor():
    with pytest.raises(RuntimeError):
        to_nbx(np.zeros(3, np.float32)).fill_(to_nbx(np.ones(1, np.float32)))


# ---- fill_ and zero_ -------------------------------------------------------------------------------

STRIDED_VIEWS = {
    "columns": lambda b: b[:, 1::2],
    "transposed_rows": lambda b: b.T[1:3],
    "column": lambda b: b[:, 2],
    "element": lambda b: b[1, 3],
    "inner_block": lambda b: b[1:3, 1:4],
}


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("view", list(STRIDED_VIEWS))
def test_fill_and_zero_touch_only_the_view(dtype, view):
    """Lesson: fill_(0) on a strided view cleared memory outside the view."""
    base = to_nbx(np.full((4, 6), 3.0)).to(dtype)
    before = base_storage_values(base)
    covered = np.zeros((4, 6), bool)
    np_view = STRIDED_VIEWS[view](covered)
    if np_view.ndim:
        np_view[...] = True
    else:
        covered[1, 3] = True
    target = STRIDED_VIEWS[view](base)
    assert target.fill_(5) is target
    expected = before.copy()
    expected[covered] = 1 if dtype == "bool" else 5
    np.testing.assert_array_equal(base_storage_values(base), expected)
    assert STRIDED_VIEWS[view](base).zero_() is not None
    expected[covered] = 0
    np.testing.assert_array_equal(base_storage_values(base), expected)


@pytest.mark.parametrize("dtype,value,expected", [
    ("int32", 2.7, 2),
    ("int32", -2.7, -2),  # truncation toward zero
    ("int8", -128, -128),
    ("int8", 127.0, 127),
    ("uint8", -1, 255),  # ATen lets a negative integer wrap into an unsigned type
    ("uint8", -255, 1),
    ("int64", True, 1),
    ("int32", 3 + 0j, 3),  # a complex value with no imaginary part
    ("bool", 5, True),
    ("bool", 0.1, True),
    ("bool", float("nan"), True),
    ("bool", 1j, True),
    ("bool", 0, False),
    ("float16", 65504.0, 65504.0),
    ("float16", float("inf"), float("inf")),
    ("float16", float("-inf"), float("-inf")),
    ("bfloat16", 1.00390625, 1.0),  # a tie: to even
    ("float32", 0.1, float(np.float32(0.1))),
    ("float64", 0.1, 0.1),
    ("float8_e5m2", float("inf"), float("inf")),
    ("float8_e4m3fn", 448.0, 448.0),
    ("float8_e4m3fn", -0.3, float(np.array(-0.3, np.float32).astype(np_dtype("float8_e4m3fn")))),
    ("complex64", 1.5 - 2j, 1.5 - 2j),
    ("complex128", 3, 3 + 0j),
])
def test_fill_value_conversion(dtype, value, expected):
    x = to_nbx(np.zeros(4)).to(dtype).fill_(value)
    got = x.tolist()
    assert all((g != g and expected != expected) or g == expected for g in got), got


def test_fill_nan_into_float():
    for dtype in ("float16", "bfloat16", "float32", "float64", "float8_e4m3fn", "float8_e5m2"):
        got = np.array(to_nbx(np.zeros(3)).to(dtype).fill_(float("nan")).numpy()).astype(np.float64)
        assert np.isnan(got).all(), dtype


@pytest.mark.parametrize("dtype,value", [
    ("int8", 300),
    ("int8", -129),
    ("int8", 127.5),  # checked before truncation, as ATen does
    ("int8", -128.5),
    ("uint8", 256),
    ("uint8", -256),
    ("uint8", -1.0),  # only integers wrap
    ("int32", float("nan")),
    ("int32", float("inf")),
    ("int64", 2 ** 63),
    ("int64", 9.3e18),
    ("int32", 3 + 1j),
    ("float32", 3 + 1j),
    ("float16", 1e5),
    ("float16", 65504.5),
    ("float16", -70000),
    ("bfloat16", 3.39e38),
    ("float32", 1e39),
    ("float8_e4m3fn", 460.0),
    ("float8_e4m3fn", float("inf")),  # e4m3fn has no infinity
    ("float8_e5m2", 1e5),
    ("complex64", 1e39),
    ("complex64", complex(0, 1e39)),
])
def test_fill_overflow_raises(dtype, value):
    x = to_nbx(np.zeros(3)).to(dtype)
    with pytest.raises(RuntimeError, match="cannot be converted"):
        x.fill_(value)


def test_fill_overflow_leaves_complex_tensor_untouched():
    x = to_nbx(np.zeros(3, np.complex64))
    with pytest.raises(RuntimeError):
        x.fill_(complex(1.0, 1e39))
    np.testing.assert_array_equal(host(x), np.zeros(3, np.complex64))


def test_setitem_scalar_fills_only_the_view():
    x = to_nbx(np.zeros((3, 4), np.float32))
    x[1, ::2] = 7
    expected = np.zeros((3, 4), np.float32)
    expected[1, ::2] = 7
    np.testing.assert_array_equal(host(x), expected)


# ---- clone, contiguous, to -------------------------------------------------------------------------

def test_clone_keeps_strides_of_dense_permuted_input():
    values = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    x = to_nbx(values).permute(2, 0, 1)
    y = x.clone()
    assert y.stride() == x.stride() == (1, 12, 4)
    assert y.data_ptr() != x.data_ptr()
    np.testing.assert_array_equal(host(y), values.transpose(2, 0, 1))


def test_clone_of_non_dense_input_is_dense():
    values = np.arange(24, dtype=np.float32).reshape(4, 6)
    sliced = to_nbx(values)[:, ::2]
    y = sliced.clone()
    assert y.is_contiguous() and y.stride() == (3, 1)
    np.testing.assert_array_equal(host(y), values[:, ::2])
    # a non-dense transposed input keeps its dims' order (ATen's preserve_format)
    z = to_nbx(values).t()[::2].clone()
    assert z.stride() == (1, 3)
    np.testing.assert_array_equal(host(z), values.T[::2])


def test_clone_contiguous_format_and_expanded_input():
    x = to_nbx(np.arange(6, dtype=np.int64).reshape(2, 3)).t()
    y = x.clone(memory_format="contiguous_format")
    assert y.is_contiguous()
    np.testing.assert_array_equal(host(y), np.arange(6).reshape(2, 3).T)
    e = to_nbx(np.arange(3, dtype=np.int16)).expand(4, 3)
    c = e.clone()
    assert c.stride() == (3, 1)
    np.testing.assert_array_equal(host(c), np.broadcast_to(np.arange(3, dtype=np.int16), (4, 3)))
    c[0, 0] = 9  # its own memory
    assert host(e)[1, 0] == 0


def test_clone_of_zero_size_and_zero_dim():
    z = to_nbx(np.zeros((0, 3), np.float32)).clone()
    assert tuple(z.shape) == (0, 3)
    s = to_nbx(np.array(2.5, np.float64)).clone()
    assert s.shape == () and s.item() == 2.5


def test_contiguous_returns_self_when_contiguous():
    x = to_nbx(np.arange(6.0).reshape(2, 3))
    assert x.contiguous() is x
    assert x[1].contiguous() is x[1] or x[1].contiguous().data_ptr() == x[1].data_ptr()
    t = x.t()
    c = t.contiguous()
    assert c is not t and c.is_contiguous()
    np.testing.assert_array_equal(host(c), np.arange(6.0).reshape(2, 3).T)


def test_to_same_dtype_returns_self_unless_copy():
    x = to_nbx(np.arange(4, dtype=np.float32))
    assert x.to(nbx.float32) is x
    assert x.to("float32") is x
    y = x.to(nbx.float32, copy=True)
    assert y is not x and y.data_ptr() != x.data_ptr()
    np.testing.assert_array_equal(host(y), host(x))


METHOD_DTYPES = {
    "float": "float32", "double": "float64", "half": "float16", "bfloat16": "bfloat16", "int": "int32",
    "long": "int64", "short": "int16", "char": "int8", "byte": "uint8", "bool": "bool",
    "cfloat": "complex64", "cdouble": "complex128",
}


@pytest.mark.parametrize("method", list(METHOD_DTYPES))
def test_dtype_methods(method):
    values = np.array([[0, 1, 2], [3, 5, 7]], np.int64)
    x = to_nbx(values).t()
    y = getattr(x, method)()
    assert y.dtype == nbx.get_dtype(METHOD_DTYPES[method])
    assert y.stride() == x.stride()  # preserve_format
    assert_same(host(y), expected_cast(values.T, METHOD_DTYPES[method]))


def test_type_as_and_to_other():
    x = to_nbx(np.array([1.75, -2.5], np.float32))
    other = to_nbx(np.zeros(1, np.int16))
    for y in (x.type_as(other), x.to(other)):
        assert y.dtype == nbx.int16
        np.testing.assert_array_equal(host(y), np.array([1, -2], np.int16))
    assert x.to(dtype=nbx.float64).dtype == nbx.float64
    assert x.to(TEST_DEVICE, nbx.float16).dtype == nbx.float16
    assert x.to(TEST_DEVICE) is x


def test_to_converts_non_dense_input_to_dense():
    values = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = to_nbx(values)[:, 1::2].to(nbx.float64)
    assert y.stride() == (2, 1)
    np.testing.assert_array_equal(host(y), values[:, 1::2].astype(np.float64))


@pytest.mark.parametrize("layout, strides", [("channels_last", (60, 1, 15, 5)), ("transposed", (1, 3)),
                                             ("sliced", (2, 1)), ("sliced_transposed", (1, 2))])
def test_a_move_between_devices_lays_out_as_preserve_format(layout, strides):
    """A tensor moved to another device keeps a dense layout's strides (a channels-last batch stays
    channels-last, as torch's ``to(device)``) and makes a non-dense one dense in its dims' order: host memory
    moved to the test device (on the CPU, by the same path, a copy within host memory)."""
    from nbxtensor.device import resolve
    from nbxtensor.ops.copy import _transfer
    batch = np.arange(120, dtype=np.float32).reshape(2, 5, 4, 3)
    grid = np.arange(12, dtype=np.float32).reshape(3, 4)
    sources = {"channels_last": nbx.from_numpy(np.ascontiguousarray(batch.transpose(0, 2, 3, 1))).permute(0, 3, 1, 2),
               "transposed": nbx.from_numpy(np.ascontiguousarray(grid.T)).t(),
               "sliced": nbx.from_numpy(grid)[:, 1::2],
               "sliced_transposed": nbx.from_numpy(grid)[:, 1::2].t()}
    moved = _transfer(sources[layout], resolve(TEST_DEVICE))
    assert moved.device == resolve(TEST_DEVICE) and moved.stride() == strides
    np.testing.assert_array_equal(host(moved), sources[layout].numpy())


def test_zero_size_copy_and_fill_are_no_ops():
    x = to_nbx(np.zeros((0, 4), np.float32))
    x.copy_(to_nbx(np.zeros((0, 4), np.int32)))
    x.fill_(1)
    x.zero_()
    assert tuple(x.to(nbx.float16).shape) == (0, 4)


def test_fill_values_that_compare_equal_keep_their_own_bits():
    """Fill values are remembered by their exact bits: 0.0 and -0.0 compare equal but differ."""
    t = to_nbx(np.ones(4, np.float32))
    t.fill_(0.0)
    t.fill_(-0.0)
    assert np.signbit(t.numpy()).all()
    t.fill_(True)
    assert t.numpy().tolist() == [1.0] * 4
    t.fill_(float("nan"))
    assert np.isnan(t.numpy()).all()


def test_launch_keys_follow_triton_specialisation_not_values():
    """Launches are cached by what Triton specialises on, so new values reuse a compiled kernel and
    the cache does not grow with every fill value or shape."""
    from nbxtensor.launch import _specialisation
    assert _specialisation(7) == _specialisation(9) != _specialisation(16) != _specialisation(1)
    assert _specialisation(2 ** 40) != _specialisation(7)
    assert _specialisation((3, 5)) == _specialisation((7, 9))
    assert _specialisation(2.5) == _specialisation(-1.0)


def _stand_in_compiled_kernel(monkeypatch, arg_names):
    """(kernel, compiles, runs): the CPU backend told it compiles, and a stand-in for a Triton kernel whose
    generic path records each compilation's arguments and whose compiled form records each launch."""
    import nbxtensor.launch as L
    from nbxtensor.device import backend_for

    compiles, runs = [], []

    class Compiled:
        function, packed_metadata = "function", "metadata"

        def run(self, *args):
            runs.append(args)

    class Kernel:
        def __getitem__(self, grid):
            def generic(*args, **constexprs):
                compiles.append(args)
                return Compiled()
            return generic

    Kernel.arg_names = arg_names
    backend = backend_for(nbx.device("cpu"))
    monkeypatch.setattr(type(backend), "compiles_kernels", True)
    monkeypatch.setattr(type(backend), "current_stream_handle", lambda self, index=None: 0, raising=False)
    monkeypatch.setattr(L, "_compiled", {})
    return Kernel(), compiles, runs


@cpu_kernels
def test_launches_with_fixed_arguments_bind_them_once(monkeypatch):
    """``launch_slots``, driven on the CPU with a stand-in for Triton's compiled kernel: after the first
    launch of a compiled kernel, a call with new tensors and scalars of the same specialisation reaches the
    launcher with exactly the arguments the full path gives it; a tensor of another alignment, a scalar of
    another specialisation class or a capture goes through the full path."""
    import nbxtensor.launch as L

    kernel, _, runs = _stand_in_compiled_kernel(monkeypatch, ["x", "n", "shape", "y", "bits", "BLOCK"])
    bound, fixed = {}, [None, 40, (5, 8), None, None]
    storage = nbx.zeros(64)

    def launch(x, y, bits):
        L.launch_slots(kernel, (2,), x.device, fixed, [0, 3, 4], [x, y, bits], {"BLOCK": 4}, (("BLOCK", 4),), bound)

    def full(x, y, bits):
        L.launch_planned(kernel, (2,), x.device, [x, 40, (5, 8), y, bits], {"BLOCK": 4}, (("BLOCK", 4),))

    launch(storage[0:8], storage[8:16], 7)  # compiles
    launch(storage[0:8], storage[8:16], 7)  # runs, and binds
    assert len(runs) == 1 and len(bound) == 1
    for x, y, bits in [(storage[16:24], storage[32:40], 9), (storage[1:9], storage[8:16], 7),
                       (storage[16:24], storage[32:40], 16)]:
        launch(x, y, bits)  # a new specialisation compiles here, without running
        launch(x, y, bits)
        full(x, y, bits)
        assert runs[-2] == runs[-1] and runs[-1][-6:] == (x.data_ptr(), 40, (5, 8), y.data_ptr(), bits, 4)
    assert len(bound) == 3  # new entries for a misaligned tensor and for a multiple of 16
    with L.capture() as recorded:
        launch(storage[0:8], storage[8:16], 7)
    assert len(recorded.launches) == 1 and len(bound) == 3


@cpu_kernels
def test_the_compiled_launch_path_compiles_once_per_specialisation(monkeypatch):
    """The compiled path, driven on the CPU with a stand-in for Triton's compiled kernel: values of one
    specialisation class reuse an entry (ints by 1 / multiple of 16 / other and width, floats as floats,
    True apart from 1), pointers by dtype and 16-byte alignment; the bound launcher gets the values."""
    import nbxtensor.launch as L

    kernel, compiles, runs = _stand_in_compiled_kernel(monkeypatch, ["x", "n", "scale", "shape", "flag", "BLOCK"])
    x = nbx.ones(8)
    calls = [(7, 2.5, (3, 5), False), (9, -1.0, (7, 9), False), (16, 2.5, (3, 5), False), (1, 2.5, (3, 5), False),
             (2 ** 40, 2.5, (3, 5), False), (7, 2.5, (3, 5), True), (7, 3, (3, 5), False), (11, 0.5, (3, 16), False)]
    for n, scale, shape, flag in calls:
        L.launch_planned(kernel, (1,), x.device, [x, n, scale, shape, flag], {"BLOCK": 4}, (("BLOCK", 4),))
    # compiled: the first, 16, 1, 2**40, True, an int scale, a tuple holding 16; the second call reused the first
    assert len(compiles) == 7 and len(runs) == 1
    assert runs[0][-6:] == (x.data_ptr(), 9, -1.0, (7, 9), False, 4)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128, np.float16, np.int8, np.bool_])
def test_clone_of_every_kind_of_dtype_copies_values_exactly(dtype):
    """clone writes its fresh tensor directly (no copy_ checks): complex pairs, narrow floats, integers and
    bools come back bit for bit, from a strided view too."""
    values = (np.arange(24).reshape(4, 6) * 0.75 - 3).astype(dtype)
    if np.issubdtype(dtype, np.complexfloating):
        values = values + 1j * values[::-1]
    x = to_nbx(values)
    for view, expected in ((x, values), (x.t()[::2], values.T[::2])):
        got = view.clone()
        assert got.dtype == view.dtype and got.shape == view.shape
        np.testing.assert_array_equal(got.numpy(), expected)


def test_fresh_tensor_maker_gives_what_new_tensor_gives():
    """A plan's maker of fresh outputs: each call a tensor of its own memory, laid out as ``new_tensor``
    lays it out, carrying that layout's key; strided and empty layouts too; while a graph runs on its
    arena, the arena serves it."""
    from nbxtensor import allocation as A
    from nbxtensor.tensor import layout_key
    dev = nbx.device(TEST_DEVICE)
    for shape, strides in (((3, 5), None), ((2, 3), (1, 4)), ((0, 4), None)):
        make = A.fresh_tensor_maker(shape, nbx.float32, dev, strides)
        first, second, expected = make(), make(), A.new_tensor(shape, nbx.float32, dev, strides)
        for made in (first, second):
            assert made.shape == expected.shape and made.stride() == expected.stride()
            assert made.dtype == nbx.float32 and made.device == dev
            assert made._layout == layout_key(made.shape, made.stride(), made.dtype, dev)
        if first.numel():
            assert first.data_ptr() != second.data_ptr()
            first.fill_(1.0)
            second.fill_(2.0)
            assert (first.numpy() == 1.0).all() and (second.numpy() == 2.0).all()
    served = A.new_tensor((3, 5), nbx.float32, dev)
    asked = []
    make = A.fresh_tensor_maker((3, 5), nbx.float32, dev)
    try:
        A.arena_service = lambda *request: asked.append(request) or served
        assert make() is served and asked[0][:3] == ((3, 5), (5, 1), nbx.float32)
    finally:
        A.arena_service = None


def test_two_views_share_memory_where_their_bytes_meet():
    """Views of one storage share memory only where the spans of their elements meet (a graph's arena holds
    every intermediate in one storage); a 0-d value read from the tensor it fills is copied first."""
    from nbxtensor.ops.copy import shares_memory
    x = nbx.zeros((4, 6), device=TEST_DEVICE)
    assert not shares_memory(x[:2], x[2:]) and shares_memory(x[1:3], x[2:])
    assert shares_memory(x[:, ::2], x[:, 1::2])  # interleaved: the spans meet
    assert not shares_memory(x, nbx.zeros((4, 6), device=TEST_DEVICE)) and not shares_memory(x[:0], x)
    assert shares_memory(x.view(nbx.int32)[3:], x[3])
    x[1, 2] = 5.0
    x.fill_(x[1, 2])
    assert (x.numpy() == 5.0).all()
