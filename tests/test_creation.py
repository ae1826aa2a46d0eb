"""Creation ops against NumPy and, where installed, torch: dtype inference, arange and linspace values,
eye, the *_like and new_* families, tensor() from Python data, and as_tensor sharing."""
import math

import ml_dtypes
import numpy as np
import pytest

import nbxtensor as nbx
from tests.conftest import TEST_DEVICE, to_nbx

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is the oracle here")
ALL_NAMES = [d.name for d in nbx.all_dtypes]


def host(t):
    return t.cpu().numpy() if not t.is_cpu else t.numpy()


# ---- empty / zeros / ones / full ----------------------------------------------------------------

@pytest.mark.parametrize("name", ALL_NAMES)
def test_zeros_ones_full_of_every_dtype(name):
    d = nbx.get_dtype(name)
    assert nbx.zeros(2, 3, dtype=d, device=TEST_DEVICE).tolist() == np.zeros((2, 3), d.numpy).astype(
        np.complex128 if d.is_complex else float if d.kind == "float" else d.numpy).tolist()
    ones = nbx.ones((4,), dtype=d, device=TEST_DEVICE)
    assert ones.dtype is d and ones.shape == (4,) and all(v == 1 for v in ones.tolist())
    full = nbx.full((3,), 1, dtype=d, device=TEST_DEVICE)
    assert full.dtype is d and all(v == 1 for v in full.tolist())


@pytest.mark.parametrize("size", [(), (0,), (3, 0), (2, 3)])
def test_factory_size_spellings(size):
    for factory in (nbx.zeros, nbx.ones, nbx.empty):
        assert factory(size, device=TEST_DEVICE).shape == size
        assert factory(*size, device=TEST_DEVICE).shape == size
        assert factory(list(size), device=TEST_DEVICE).shape == size
    assert nbx.zeros(size, device=TEST_DEVICE).dtype is nbx.float32


def test_negative_size_is_refused():
    with pytest.raises((ValueError, RuntimeError)):
        nbx.zeros(2, -1, device=TEST_DEVICE)


@pytest.mark.parametrize("value, expected", [(True, "bool"), (3, "int64"), (2.5, "float32"),
                                             (1 + 2j, "complex64"), (np.float16(1), "float32"),
                                             (np.int8(3), "int64")])
def test_full_infers_dtype_from_the_value_kind(value, expected):
    t = nbx.full((2, 2), value, device=TEST_DEVICE)
    assert t.dtype is nbx.get_dtype(expected)
    if torch is not None:
        assert str(torch.full((2, 2), value).dtype) == f"torch.{expected}"


def test_full_values_and_conversion():
    assert nbx.full((3,), -1.5, device=TEST_DEVICE).tolist() == [-1.5] * 3
    assert nbx.full((2,), 7.9, dtype="int32", device=TEST_DEVICE).tolist() == [7, 7]
    assert nbx.full((2,), 0.1, dtype="bfloat16", device=TEST_DEVICE).tolist() == [0.10009765625] * 2
    assert nbx.full((), 2, device=TEST_DEVICE).shape == ()


# ---- *_like and new_* ---------------------------------------------------------------------------

def permuted_dense(dtype="float32"):
    """A dense tensor whose strides are not row-major: (2, 3, 4) seen through permute(2, 0, 1)."""
    return to_nbx(np.arange(24).reshape(2, 3, 4).astype(nbx.get_dtype(dtype).numpy)).permute(2, 0, 1)


@pytest.mark.parametrize("like", ["empty_like", "zeros_like", "ones_like"])
def test_like_keeps_shape_dtype_and_preserves_dense_strides(like):
    x = permuted_dense("int16")
    out = getattr(nbx, like)(x)
    assert out.shape == x.shape == (4, 2, 3) and out.dtype is nbx.int16 and out.device == x.device
    assert out.stride() == x.stride() == (1, 12, 4)  # as torch's preserve_format
    if torch is not None:
        reference = getattr(torch, like)(torch.arange(24, dtype=torch.int16).reshape(2, 3, 4).permute(2, 0, 1))
        assert out.stride() == reference.stride()
    contiguous = getattr(nbx, like)(x, memory_format="contiguous_format")
    assert contiguous.is_contiguous()


def test_like_of_a_non_dense_input_is_contiguous():
    x = to_nbx(np.zeros((4, 6), np.float32))[:, ::2]
    assert nbx.zeros_like(x).is_contiguous() and nbx.zeros_like(x).shape == (4, 3)


def test_like_values_and_dtype_override():
    x = permuted_dense()
    assert np.array_equal(host(nbx.zeros_like(x)), np.zeros((4, 2, 3)))
    assert np.array_equal(host(nbx.ones_like(x)), np.ones((4, 2, 3)))
    full = nbx.full_like(x, 7, dtype="int8")
    assert full.dtype is nbx.int8 and np.array_equal(host(full), np.full((4, 2, 3), 7))
    assert nbx.ones_like(x, dtype=nbx.float64).dtype is nbx.float64
    assert nbx.full_like(x, 2.5).dtype is nbx.float32


def test_new_methods_are_initialised_and_inherit_dtype_and_device():
    # lesson: new_ones returned uninitialised memory
    base = nbx.full((2,), 5, dtype="float16", device=TEST_DEVICE)
    for _ in range(3):  # reuse of freed memory would show garbage if new_* did not write
        garbage = nbx.full((64,), 123.0, dtype="float16", device=TEST_DEVICE)
        del garbage
        ones = base.new_ones(8, 8)
        zeros = base.new_zeros((8, 8))
        assert ones.dtype is nbx.float16 and ones.device == base.device
        assert np.all(host(ones) == 1) and np.all(host(zeros) == 0)
    assert base.new_full((3,), 2).tolist() == [2.0, 2.0, 2.0]
    assert base.new_empty(2, 3).shape == (2, 3) and base.new_empty(2, 3).dtype is nbx.float16
    assert base.new_ones(2, dtype="int32").dtype is nbx.int32
    new = base.new_tensor([1, 2, 3])
    assert new.dtype is nbx.float16 and new.tolist() == [1.0, 2.0, 3.0]


# ---- arange -------------------------------------------------------------------------------------

ARANGE_CASES = [(5,), (0,), (2, 7), (7, 2, -1), (0, 10, 3), (10, 0, -3), (-5, 5, 2), (3, 3), (0.5, 3),
                (0, 1, 0.1), (1, 0, -0.3), (1, 2.5, 0.5), (0, 1, 1 / 3), (-1.0, 1.0, 0.25), (0.5, 3.7, 1.2),
                (-1.5, 3, 1), (2, -7.5, -1.25)]


@pytest.mark.parametrize("args", ARANGE_CASES, ids=str)
def test_arange_length_dtype_and_values_match_numpy(args):
    t = nbx.arange(*args, device=TEST_DEVICE)
    expected = np.arange(*args)
    is_float = any(isinstance(a, float) for a in args)
    assert t.dtype is (nbx.float32 if is_float else nbx.int64)
    assert t.shape == expected.shape
    np.testing.assert_allclose(host(t), expected, rtol=1e-6, atol=1e-7)


@needs_torch
@pytest.mark.parametrize("args", ARANGE_CASES, ids=str)
@pytest.mark.parametrize("name", [None, "int64", "int32", "int8", "uint8", "float16", "bfloat16", "float32",
                                  "float64"])
def test_arange_matches_torch(args, name):
    kwargs = {} if name is None else {"dtype": getattr(torch, name)}
    if name == "int64" and len(args) == 3 and int(args[2]) == 0:
        # a step that truncates to 0: torch 2.11 divides by it (SIGFPE); ATen's later versions raise
        with pytest.raises((ValueError, RuntimeError)):
            nbx.arange(*args, dtype=name, device=TEST_DEVICE)
        return
    try:
        expected = torch.arange(*args, **kwargs)
    except (RuntimeError, ValueError):
        with pytest.raises((ValueError, RuntimeError)):
            nbx.arange(*args, dtype=name, device=TEST_DEVICE)
        return
    t = nbx.arange(*args, dtype=name, device=TEST_DEVICE)
    assert str(expected.dtype) == f"torch.{t.dtype.name}" and t.shape == tuple(expected.shape)
    got = host(t).astype(np.float64)
    want = expected.double().numpy()
    if t.dtype.is_integral:
        assert np.array_equal(got, want)  # integer dtypes: torch's truncation of start and step
    else:
        # torch's CPU kernel rounds vector lanes differently (and contracts to FMA): within a
        # rounding step at the scale of the range
        scale = max(abs(float(a)) for a in args)
        eps = np.finfo(np.float32).eps * 2 ** 16 if name == "bfloat16" else np.finfo(t.dtype.numpy).eps
        assert np.all(np.abs(got - want) <= eps * scale)


def test_arange_integer_dtype_truncates_float_bounds_and_step():
    # ATen: int64 counts with truncated values; narrower integers count with the floats as given
    assert nbx.arange(0, 2.5, 1, dtype="int64", device=TEST_DEVICE).tolist() == [0, 1]
    assert nbx.arange(0, 2.5, 1, dtype="int32", device=TEST_DEVICE).tolist() == [0, 1, 2]
    assert nbx.arange(0, 1, 0.1, dtype="int32", device=TEST_DEVICE).tolist() == [0] * 10
    assert nbx.arange(-1.5, 3, 1, dtype="int8", device=TEST_DEVICE).tolist() == [-1, 0, 1, 2, 3]
    with pytest.raises(ValueError, match="nonzero"):
        nbx.arange(0, 1, 0.1, dtype="int64", device=TEST_DEVICE)


def test_arange_half_types_round_to_nearest():
    # the ramp used Triton's float32 -> bfloat16 cast, which truncates in the interpreter
    assert nbx.arange(0, 1, 0.1, dtype="bfloat16", device=TEST_DEVICE)[1].item() == 0.10009765625
    assert nbx.arange(0, 1, 1 / 3, dtype="bfloat16", device=TEST_DEVICE).tolist() == [0.0, 0.333984375, 0.66796875]


def test_arange_large_step_counts():
    assert nbx.arange(0, 10, 20, device=TEST_DEVICE).tolist() == [0]
    assert nbx.arange(10, 0, -20, device=TEST_DEVICE).tolist() == [10]
    assert nbx.arange(0, 1, 0.3).shape == (4,)  # ceil(1 / 0.3)


@pytest.mark.parametrize("args", [(0, 1, 0), (0, 1, 0.0), (1, 0, 1), (0, 5, -1), (0.0, -1.0, 0.5)])
def test_arange_refuses_zero_step_and_inconsistent_sign(args):
    with pytest.raises(ValueError, match="nonzero|inconsistent"):
        nbx.arange(*args, device=TEST_DEVICE)


@pytest.mark.parametrize("args", [(0, math.inf), (math.nan,), (0, 1, math.inf)])
def test_arange_refuses_non_finite(args):
    with pytest.raises(ValueError, match="finite"):
        nbx.arange(*args, device=TEST_DEVICE)


def test_arange_refuses_bool_and_complex_and_keyword_bounds():
    with pytest.raises(TypeError):
        nbx.arange(3, dtype="bool", device=TEST_DEVICE)
    with pytest.raises(TypeError):
        nbx.arange(3, dtype="complex64", device=TEST_DEVICE)
    with pytest.raises(TypeError):
        nbx.arange(1, 2, 3, 4)


# ---- linspace -----------------------------------------------------------------------------------

LINSPACE_CASES = [(0, 1, 5), (0, 1, 7), (-3.3, 7.1, 11), (1, 0, 4), (2, 2, 3), (0, 1e-3, 9), (-1, 1, 100),
                  (3, -7, 33), (1e6, 1e6 + 1, 6), (-0.5, 0.5, 2)]


@pytest.mark.parametrize("start, end, steps", LINSPACE_CASES, ids=str)
@pytest.mark.parametrize("name", ["float32", "float64"])
def test_linspace_endpoints_exact_and_values_close(start, end, steps, name):
    t = nbx.linspace(start, end, steps, dtype=name, device=TEST_DEVICE)
    d = nbx.get_dtype(name)
    values = host(t)
    assert t.dtype is d and t.shape == (steps,)
    assert values[0] == d.numpy.type(start) and values[-1] == d.numpy.type(end)
    np.testing.assert_allclose(values, np.linspace(start, end, steps), rtol=4 * np.finfo(d.numpy).eps,
                               atol=4 * np.finfo(d.numpy).eps * max(abs(start), abs(end)))


@needs_torch
@pytest.mark.parametrize("start, end, steps", LINSPACE_CASES + [(0, 1, 1), (0, 1, 0), (5, -5, 1)], ids=str)
@pytest.mark.parametrize("name", ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int8", "uint8"])
def test_linspace_matches_torch(start, end, steps, name):
    try:
        expected = torch.linspace(start, end, steps, dtype=getattr(torch, name))
    except (RuntimeError, ValueError):
        with pytest.raises((ValueError, RuntimeError)):
            nbx.linspace(start, end, steps, dtype=name, device=TEST_DEVICE)
        return
    t = nbx.linspace(start, end, steps, dtype=name, device=TEST_DEVICE)
    assert t.shape == tuple(expected.shape) and t.dtype.name == name
    got, want = host(t).astype(np.float64), expected.double().numpy()
    if t.dtype.is_integral:
        assert np.array_equal(got, want)
        return
    if steps:
        assert got[0] == want[0] and got[-1] == want[-1]
    # torch's CPU kernel rounds vector lanes (and half types every operation) its own way: allow a
    # couple of rounding steps at the scale of the larger end
    scale = np.float64(max(abs(start), abs(end)))
    eps = np.finfo(np.float32).eps * 2 ** 16 if name == "bfloat16" else np.finfo(t.dtype.numpy).eps
    same = got == want  # infinities included
    assert np.all(same | (np.abs(got - want) <= 2 * eps * scale))


def test_linspace_default_dtype_and_small_steps():
    assert nbx.linspace(0, 1, 3, device=TEST_DEVICE).dtype is nbx.float32
    assert nbx.linspace(0, 1, 0, device=TEST_DEVICE).shape == (0,)
    assert nbx.linspace(2.5, 7, 1, device=TEST_DEVICE).tolist() == [2.5]
    assert nbx.linspace(0, 1, 2, device=TEST_DEVICE).tolist() == [0.0, 1.0]
    with pytest.raises(ValueError, match="non-negative"):
        nbx.linspace(0, 1, -1, device=TEST_DEVICE)


def test_linspace_integer_dtypes_truncate_the_ends_first():
    # ATen converts start and end to the integer type, then steps in float64 and truncates
    assert nbx.linspace(-3.3, 7.1, 11, dtype="int32", device=TEST_DEVICE).tolist() == list(range(-3, 8))
    assert nbx.linspace(3, -7, 5, dtype="uint8", device=TEST_DEVICE).tolist() == [3, 64, 126, 187, 249]
    assert nbx.linspace(-1, 1, 4, dtype="uint8", device=TEST_DEVICE).tolist() == [255, 170, 85, 1]
    with pytest.raises(ValueError, match="overflow"):
        nbx.linspace(-3.3, 7.1, 11, dtype="uint8", device=TEST_DEVICE)


def test_linspace_half_types_round_to_nearest():
    values = nbx.linspace(0, 1, 7, dtype="bfloat16", device=TEST_DEVICE).tolist()
    expected = np.linspace(0, 1, 7).astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float64).tolist()
    assert values == expected


def test_linspace_refuses_bool_and_complex():
    with pytest.raises(TypeError):
        nbx.linspace(0, 1, 3, dtype="bool", device=TEST_DEVICE)
    with pytest.raises(TypeError):
        nbx.linspace(0, 1, 3, dtype="complex64", device=TEST_DEVICE)


# ---- eye ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("n, m", [(0, None), (1, None), (3, None), (2, 5), (5, 2), (3, 0)])
def test_eye(n, m):
    t = nbx.eye(n, m, device=TEST_DEVICE)
    assert t.dtype is nbx.float32
    assert np.array_equal(host(t), np.eye(n, m))


@pytest.mark.parametrize("name", ["bool", "int8", "bfloat16", "complex64", "float8_e4m3fn"])
def test_eye_dtypes(name):
    t = nbx.eye(3, 4, dtype=name, device=TEST_DEVICE)
    assert t.dtype.name == name
    assert np.array_equal(host(t).astype(np.complex128), np.eye(3, 4))


def test_eye_refuses_negative_sizes():
    with pytest.raises(ValueError):
        nbx.eye(-1, device=TEST_DEVICE)


# ---- tensor() from Python data ------------------------------------------------------------------

@pytest.mark.parametrize("data, expected", [
    (True, "bool"), ([True, False], "bool"), (3, "int64"), ([1, 2], "int64"), ([1, True], "int64"),
    (2.5, "float32"), ([1, 2.5], "float32"), ([[1], [2.0]], "float32"), ([True, 2.5], "float32"),
    (1j, "complex64"), ([1, 2j], "complex64"), ([1.5, 1j, True], "complex64"), ([], "float32"),
    ([[], []], "float32"),
])
def test_tensor_dtype_inference(data, expected):
    t = nbx.tensor(data, device=TEST_DEVICE)
    assert t.dtype is nbx.get_dtype(expected)
    assert t.shape == np.array(data).shape
    if torch is not None:
        assert str(torch.tensor(data).dtype) == f"torch.{expected}"


def test_tensor_values_of_nested_lists():
    data = [[[1, 2], [3, 4]], [[5, 6], [7, 8]]]
    t = nbx.tensor(data, device=TEST_DEVICE)
    assert t.shape == (2, 2, 2) and t.tolist() == data
    assert nbx.tensor([(1.5, -2.0)], device=TEST_DEVICE).tolist() == [[1.5, -2.0]]
    assert nbx.tensor([1, 2j], device=TEST_DEVICE).tolist() == [1 + 0j, 2j]


def test_tensor_of_numpy_scalars_and_tensors():
    assert nbx.tensor(np.float16(1.5), device=TEST_DEVICE).dtype is nbx.float16
    assert nbx.tensor(np.float16(1.5), device=TEST_DEVICE).shape == ()
    inner = nbx.tensor([1.0, 2.0], device=TEST_DEVICE)
    copied = nbx.tensor(inner, device=TEST_DEVICE)
    assert copied.tolist() == [1.0, 2.0] and copied.data_ptr() != inner.data_ptr()


@pytest.mark.parametrize("data", [[[1, 2], [3]], [[1, 2], 3], [1, [2, 3]]])
def test_tensor_refuses_ragged_data(data):
    with pytest.raises(ValueError, match="ragged|sequence"):
        nbx.tensor(data, device=TEST_DEVICE)


def test_tensor_refuses_non_numbers():
    with pytest.raises(TypeError):
        nbx.tensor(["a", "b"], device=TEST_DEVICE)
    with pytest.raises(TypeError):
        nbx.tensor([None], device=TEST_DEVICE)


@pytest.mark.parametrize("data, name, expected", [
    ([1.7, -1.7], "int32", [1, -1]),  # truncation toward zero
    ([0.1], "bfloat16", [0.10009765625]),  # round to nearest
    ([70000.0], "float16", [math.inf]),
    ([1, 0, 2], "bool", [True, False, True]),
    ([300], "float8_e4m3fn", [288.0]),
])
def test_tensor_with_explicit_dtype_converts_as_aten(data, name, expected):
    assert nbx.tensor(data, dtype=name, device=TEST_DEVICE).tolist() == expected


# ---- as_tensor ----------------------------------------------------------------------------------

def test_as_tensor_shares_a_cpu_array_of_the_same_dtype():
    array = np.arange(6, dtype=np.float32)
    t = nbx.as_tensor(array, device="cpu")
    array[0] = 42
    assert t[0].item() == 42
    t2 = nbx.as_tensor(array, device="cpu")
    assert np.shares_memory(t2.numpy(), array)


def test_as_tensor_copies_when_it_must():
    array = np.arange(6, dtype=np.float32)
    converted = nbx.as_tensor(array, dtype="float64", device="cpu")
    array[0] = 42
    assert converted.dtype is nbx.float64 and converted[0].item() == 0
    reversed_view = np.arange(4, dtype=np.int64)[::-1]
    assert nbx.as_tensor(reversed_view, device="cpu").tolist() == [3, 2, 1, 0]
    assert nbx.as_tensor([1, 2], device=TEST_DEVICE).dtype is nbx.int64


def test_as_tensor_of_a_tensor_is_the_same_tensor_when_nothing_changes():
    t = nbx.tensor([1.0, 2.0], device=TEST_DEVICE)
    assert nbx.as_tensor(t) is t or nbx.as_tensor(t).data_ptr() == t.data_ptr()
    assert nbx.as_tensor(t, dtype="float64").dtype is nbx.float64


def test_from_numpy_of_a_zero_dim_array_stays_zero_dim():
    # lesson: from_numpy turned 0-d into shape (1,)
    t = nbx.from_numpy(np.array(7, dtype=np.int16))
    assert t.shape == () and t.item() == 7


def test_scalar_tensor_takes_the_default_float_dtype_as_torch():
    assert nbx.scalar_tensor(3).dtype is nbx.float32 and nbx.scalar_tensor(3).item() == 3.0
    t = nbx.scalar_tensor(7, dtype=nbx.int64, device=TEST_DEVICE)
    assert t.shape == () and t.dtype is nbx.int64 and t.item() == 7
    assert nbx.scalar_tensor(True, dtype=nbx.bool).item() is True
