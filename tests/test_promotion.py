"""ATen's promotion rules, by example (no torch needed): weak Python scalars, 0-d tensors against
dimensioned ones, categories, can_cast, and the default dtype."""
import pytest

import nbxtensor as nbx
from nbxtensor.promotion import PromotionError
from tests.conftest import TEST_DEVICE


@pytest.fixture
def restore_default_dtype():
    previous = nbx.get_default_dtype()
    yield
    nbx.set_default_dtype(previous)


def dim_tensor(dtype):
    return nbx.empty(3, dtype=dtype, device=TEST_DEVICE)


def zero_dim_tensor(dtype):
    return nbx.empty((), dtype=dtype, device=TEST_DEVICE)


@pytest.mark.parametrize("a, b, expected", [
    ("bool", "bool", "bool"),
    ("bool", "uint8", "uint8"),
    ("bool", "float16", "float16"),
    ("bool", "complex64", "complex64"),
    ("uint8", "int8", "int16"),
    ("uint8", "int16", "int16"),
    ("uint8", "int64", "int64"),
    ("int8", "int32", "int32"),
    ("int64", "float16", "float16"),
    ("int64", "bfloat16", "bfloat16"),
    ("bfloat16", "float16", "float32"),
    ("float16", "float32", "float32"),
    ("bfloat16", "float64", "float64"),
    ("float64", "complex64", "complex128"),
    ("float32", "complex64", "complex64"),
    ("float16", "complex64", "complex64"),
    ("complex64", "complex128", "complex128"),
    ("int64", "complex64", "complex64"),
    ("float8_e4m3fn", "float8_e4m3fn", "float8_e4m3fn"),
])
def test_promote_types(a, b, expected):
    assert nbx.promote_types(a, b) is nbx.get_dtype(expected)
    assert nbx.promote_types(b, a) is nbx.get_dtype(expected)


@pytest.mark.parametrize("other", ["float8_e5m2", "float32", "bool", "int8", "bfloat16"])
def test_float8_promotes_only_with_itself(other):
    with pytest.raises(PromotionError, match="float8_e4m3fn"):
        nbx.promote_types("float8_e4m3fn", other)


def test_promotion_error_is_a_type_error_and_a_runtime_error():
    # TypeError as Python code expects, RuntimeError as torch raises for the same cases
    assert issubclass(PromotionError, TypeError) and issubclass(PromotionError, RuntimeError)


@pytest.mark.parametrize("tensor_dtype, scalar, expected", [
    ("int32", 2, "int32"),  # an int tensor plus 2 stays int
    ("uint8", 300, "uint8"),  # the scalar's value does not matter, only its category
    ("int64", 2.5, "float32"),  # plus 2.5 becomes the default float
    ("bool", 2.5, "float32"),
    ("bool", 2, "int64"),
    ("bool", True, "bool"),
    ("float16", 2.5, "float16"),  # a float16 tensor plus 2.5 stays float16
    ("bfloat16", 2, "bfloat16"),
    ("float64", 2.5, "float64"),
    ("int8", 1j, "complex64"),
    ("float32", 1j, "complex64"),
    ("float64", 1j, "complex128"),
    ("bfloat16", 1j, "complex64"),  # ATen's complex counterpart of bfloat16
    ("complex128", 2.5, "complex128"),
    ("complex64", 1j, "complex64"),
])
def test_result_type_with_weak_python_scalars(tensor_dtype, scalar, expected):
    assert nbx.result_type(dim_tensor(tensor_dtype), scalar) is nbx.get_dtype(expected)
    assert nbx.result_type(scalar, dim_tensor(tensor_dtype)) is nbx.get_dtype(expected)


def test_float16_with_a_python_complex_would_be_complex32_and_raises():
    with pytest.raises(TypeError, match="complex32"):
        nbx.result_type(dim_tensor("float16"), 1j)
    with pytest.raises(TypeError, match="complex32"):
        nbx.result_type(dim_tensor("float16"), zero_dim_tensor("complex128"))


def test_python_scalars_alone():
    assert nbx.result_type(2, 3) is nbx.int64
    assert nbx.result_type(2, 2.5) is nbx.float32
    assert nbx.result_type(True, False) is nbx.bool
    assert nbx.result_type(True, 2) is nbx.int64
    assert nbx.result_type(2.5, 1j) is nbx.complex64


@pytest.mark.parametrize("dimensioned, zero_dim, expected", [
    ("int8", "int64", "int8"),  # same category: the 0-d tensor does not widen
    ("float16", "float64", "float16"),
    ("uint8", "int8", "uint8"),
    ("int32", "float64", "float64"),  # higher category: the 0-d tensor's own dtype wins
    ("int32", "float16", "float16"),
    ("bool", "int8", "int8"),
    ("float32", "complex128", "complex64"),  # complex takes the float's precision
    ("float64", "complex64", "complex128"),
    ("int64", "complex64", "complex64"),
])
def test_zero_dim_tensors_weaker_than_dimensioned(dimensioned, zero_dim, expected):
    assert nbx.result_type(dim_tensor(dimensioned), zero_dim_tensor(zero_dim)) is nbx.get_dtype(expected)
    assert nbx.result_type(zero_dim_tensor(zero_dim), dim_tensor(dimensioned)) is nbx.get_dtype(expected)


def test_zero_dim_tensors_among_themselves_promote_fully():
    assert nbx.result_type(zero_dim_tensor("int8"), zero_dim_tensor("int64")) is nbx.int64
    assert nbx.result_type(zero_dim_tensor("uint8"), zero_dim_tensor("int8")) is nbx.int16
    assert nbx.result_type(zero_dim_tensor("float16"), 2.5) is nbx.float16
    assert nbx.result_type(zero_dim_tensor("int32"), 2.5) is nbx.float32


def test_zero_dim_tensor_beats_python_scalar_of_same_category():
    assert nbx.result_type(dim_tensor("int8"), zero_dim_tensor("float16"), 2.5) is nbx.float16
    assert nbx.result_type(dim_tensor("int8"), zero_dim_tensor("int32"), 2.5) is nbx.float32


def test_dtypes_count_as_dimensioned():
    assert nbx.result_type(nbx.int8, 2.5) is nbx.float32
    assert nbx.result_type(nbx.uint8, nbx.int8) is nbx.int16


def test_result_type_needs_operands_and_rejects_other_objects():
    with pytest.raises(TypeError):
        nbx.result_type()
    with pytest.raises(TypeError, match="str"):
        nbx.result_type(dim_tensor("int8"), "2")


@pytest.mark.parametrize("source, target, allowed", [
    ("float32", "int32", False),
    ("float16", "uint8", False),
    ("complex64", "float64", False),
    ("int64", "bool", False),
    ("float32", "bool", False),
    ("bool", "bool", True),
    ("bool", "uint8", True),
    ("int64", "int8", True),  # same category narrowing is allowed
    ("float64", "float16", True),
    ("int8", "float16", True),
    ("float32", "complex64", True),
    ("complex128", "complex64", True),
    ("float8_e4m3fn", "float32", True),
    ("float8_e4m3fn", "int8", False),
])
def test_can_cast(source, target, allowed):
    assert nbx.can_cast(source, target) is allowed


@pytest.mark.usefixtures("restore_default_dtype")
def test_set_default_dtype_changes_every_float_default():
    nbx.set_default_dtype(nbx.float64)
    assert nbx.get_default_dtype() is nbx.float64
    assert nbx.get_default_complex_dtype() is nbx.complex128
    assert nbx.result_type(dim_tensor("int32"), 2.5) is nbx.float64
    assert nbx.result_type(dim_tensor("int32"), 1j) is nbx.complex128
    assert nbx.result_type(dim_tensor("float32"), 2.5) is nbx.float32
    assert nbx.tensor([1.5], device=TEST_DEVICE).dtype is nbx.float64
    assert nbx.tensor(1j, device=TEST_DEVICE).dtype is nbx.complex128
    assert nbx.zeros(2, device=TEST_DEVICE).dtype is nbx.float64
    assert nbx.full((2,), 0.5, device=TEST_DEVICE).dtype is nbx.float64
    assert nbx.arange(0.5, 2, device=TEST_DEVICE).dtype is nbx.float64
    assert nbx.get_dtype(float) is nbx.float64
    assert nbx.get_dtype(complex) is nbx.complex128


@pytest.mark.usefixtures("restore_default_dtype")
def test_half_precision_defaults():
    nbx.set_default_dtype("bfloat16")
    assert nbx.result_type(dim_tensor("int8"), 2.5) is nbx.bfloat16
    assert nbx.get_default_complex_dtype() is nbx.complex64
    nbx.set_default_dtype("float16")
    assert nbx.result_type(dim_tensor("int8"), 2.5) is nbx.float16
    assert nbx.result_type(dim_tensor("float32"), 1j) is nbx.complex64  # the scalar's default is not needed
    with pytest.raises(TypeError, match="complex32"):
        nbx.result_type(dim_tensor("int8"), 1j)
    with pytest.raises(TypeError, match="complex32"):
        nbx.get_default_complex_dtype()


@pytest.mark.usefixtures("restore_default_dtype")
@pytest.mark.parametrize("bad", ["int32", "complex64", "bool", "float8_e4m3fn"])
def test_set_default_dtype_accepts_only_floats(bad):
    with pytest.raises(TypeError, match="floating-point"):
        nbx.set_default_dtype(bad)
    assert nbx.get_default_dtype() is nbx.float32
