"""The one decision of 64-bit index arithmetic (``nbxtensor.lowering.needs_index_64``), at its boundary,
from layouts alone: meta tensors and (shape, strides) pairs, nothing allocated; and a scalar as an element's
bits (``encode_scalar``, ``encode_scalar_wrapping``) against NumPy's view of the same element."""
import pathlib
import re

import ml_dtypes
import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.lowering import INT32_LIMIT, encode_scalar, encode_scalar_wrapping, needs_index_64
from tests.conftest import to_nbx

LAST_32 = 2 ** 31 - 1  # the largest offset int32 holds


def _reaching(offset: int):
    """A meta tensor of two elements whose second sits ``offset`` elements past its first."""
    return nbx.empty((2, 2), device="meta").as_strided((2,), (offset,))


def test_the_limit_is_the_first_value_int32_cannot_hold():
    assert INT32_LIMIT == LAST_32 + 1 == 2 ** 31


@pytest.mark.parametrize("offset,wide", [(LAST_32, False), (LAST_32 + 1, True)])
def test_a_tensor_whose_last_offset_is_past_int32_needs_64_bits(offset, wide):
    assert needs_index_64(_reaching(offset)) is wide
    assert needs_index_64(((2,), (offset,))) is wide
    # one narrow operand beside it decides nothing
    assert needs_index_64(_reaching(1), _reaching(offset)) is wide


@pytest.mark.parametrize("count,wide", [(LAST_32, False), (LAST_32 + 1, True)])
def test_element_counts_past_int32_need_64_bits(count, wide):
    assert needs_index_64(count=count) is wide
    # a broadcast layout counts its elements though it reaches no offset
    assert needs_index_64(((count,), (0,))) is wide
    big = nbx.empty((1,), device="meta").expand(count)
    assert needs_index_64(big) is wide


@pytest.mark.parametrize("offset,wide", [(LAST_32 - 1, False), (LAST_32, True)])
def test_elements_addressed_past_the_last_offset_count(offset, wide):
    # a complex pair's imaginary part sits one element past the offset its strides reach
    assert needs_index_64(((2,), (offset,)), reach=1) is wide


def test_empty_and_zero_dim_layouts_are_narrow():
    assert not needs_index_64(((0, 5), (2 ** 40, 1)), ((), ()))
    assert not needs_index_64()


def test_no_module_decides_on_its_own():
    """Every op asks ``needs_index_64``: no other module spells the limit."""
    root = pathlib.Path(nbx.__file__).parent
    limit = re.compile(r"2 \*\* 31|1 << 31|2\*\*31|_INT32_LIMIT|def _(needs_)?index_64")
    found = [f"{p.relative_to(root)}:{n}" for p in root.rglob("*.py") if p.name != "lowering.py"
             for n, line in enumerate(p.read_text().splitlines(), 1) if limit.search(line)]
    assert found == []


# ---- a scalar as an element's bits ---------------------------------------------------------------------

def _bits_of(element) -> int:
    """The signed integer holding a NumPy element's bits (the form both encoders return)."""
    return int(np.asarray(element).view(f"i{np.asarray(element).itemsize}"))


# values every dtype here holds: both conversions agree on them
_HELD = [("float32", 1.5), ("float32", -0.0), ("float64", 0.1), ("float16", 65504.0), ("bfloat16", -2.5),
         ("float8_e4m3fn", 448.0), ("int8", -128), ("int8", 127), ("uint8", 255), ("int16", -3), ("int32", 2 ** 31 - 1),
         ("int64", -(2 ** 63)), ("bool", 0), ("bool", 2.5), ("int32", 2.7), ("int8", -2.7)]


@pytest.mark.parametrize("name,value", _HELD)
def test_a_value_the_dtype_holds_has_the_same_bits_either_way(name, value):
    dt = nbx.get_dtype(name)
    numpy_type = ml_dtypes.bfloat16 if name == "bfloat16" else ml_dtypes.float8_e4m3fn if name == "float8_e4m3fn" \
        else np.dtype(name)
    expected = _bits_of(np.array(int(value) if dt.is_integral else value).astype(numpy_type)) if name != "bool" \
        else int(bool(value))
    assert encode_scalar(value, dt) == encode_scalar_wrapping(value, dt) == expected


def test_half_types_are_built_through_float32_as_aten_builds_them():
    # past bfloat16's halfway point between 1 and its next value in float64, exactly halfway in float32: ties to even
    value = 1 + 2 ** -8 + 2 ** -30
    one = _bits_of(np.array(1.0, dtype=ml_dtypes.bfloat16))
    assert encode_scalar(value, nbx.bfloat16) == encode_scalar_wrapping(value, nbx.bfloat16) == one


@pytest.mark.parametrize("name,value", [("int8", 300), ("int8", -129), ("int16", 70000), ("uint8", 256),
                                        ("int8", 127.5), ("int64", 2 ** 63), ("float16", 1e6), ("bfloat16", 1e300),
                                        ("float8_e4m3fn", float("inf")), ("float32", 1 + 1j)])
def test_the_checked_conversion_refuses_what_the_dtype_cannot_hold(name, value):
    with pytest.raises(RuntimeError, match=f"cannot be converted to type {name} without overflow"):
        encode_scalar(value, nbx.get_dtype(name))


def test_the_checked_conversion_wraps_a_negative_integer_into_an_unsigned_type():
    assert encode_scalar(-1, nbx.uint8) == _bits_of(np.uint8(255))
    assert encode_scalar(-255, nbx.uint8) == _bits_of(np.uint8(1))


@pytest.mark.parametrize("name,value,expected", [
    ("int8", 300, np.int8(44)), ("int8", -129, np.int8(127)), ("int16", 70000, np.int16(4464)),
    ("uint8", 256, np.uint8(0)), ("int64", 2 ** 64 - 1, np.int64(-1)), ("int8", 300.9, np.int8(44)),
    ("float16", 1e6, np.float16(np.inf)), ("float32", -1e300, np.float32(-np.inf)), ("float32", 2 - 3j, np.float32(2))])
def test_the_wrapping_conversion_wraps_integers_and_rounds_floats_out_of_range(name, value, expected):
    assert encode_scalar_wrapping(value, nbx.get_dtype(name)) == _bits_of(expected)


@pytest.mark.parametrize("name,value", [("int64", 2 ** 64), ("int8", -(2 ** 63) - 1), ("int32", float("inf")),
                                        ("int8", float("nan"))])
def test_the_wrapping_conversion_refuses_what_no_64_bit_integer_holds(name, value):
    with pytest.raises(RuntimeError, match="without overflow"):
        encode_scalar_wrapping(value, nbx.get_dtype(name))


def test_ops_take_the_conversion_aten_takes():
    """An arithmetic operand wraps (``int8 + 300`` adds 44, as torch does); a fill value is checked."""
    x = to_nbx(np.array([1, 2], dtype=np.int8))
    assert (x + 300).numpy().tolist() == [45, 46]
    with pytest.raises(RuntimeError, match="without overflow"):
        x.fill_(300)
