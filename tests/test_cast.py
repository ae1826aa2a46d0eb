"""Dtype conversions (``to(dtype)``, ``copy_`` between dtypes) against an independent reference:
NumPy and ml_dtypes, arranged to follow ATen's conventions.

ATen's conventions, as the reference below applies them:
- to bool: nonzero is True (NaN is nonzero); a complex value is True when either part is nonzero.
- complex to real keeps the real part; real to complex has a zero imaginary part.
- float to integer truncates toward zero. Into uint8 (and the other narrow integers) the value goes
  through int64 first, so a negative float wraps (-1.5 gives 255). NaN, infinity and values out of the
  target's range are undefined behaviour in C++; they are not compared here.
- half, bfloat16 and float8 are built from a float32: a float64 or int64 source rounds to float32
  first (two roundings, as ATen does), then to the narrow type, round-to-nearest-even.
- float32 to float16 beyond the float16 range gives +-inf (ATen does not saturate): 65520 and above
  become inf; 65519.99 rounds to 65504.
- float8_e4m3fn has no infinity: ATen saturates anything beyond +-448, infinities included, to +-448;
  NaN stays NaN. float8_e5m2 overflows to +-inf.
"""
import itertools

import ml_dtypes
import numpy as np
import pytest

import nbxtensor as nbx
from tests.conftest import to_nbx

pytestmark = [
    pytest.mark.filterwarnings("ignore:Casting complex values to real"),
    # Triton's interpreter casts with NumPy, which warns about the out-of-range values tested here
    pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning"),
    pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning"),
]

ALL_DTYPES = [d.name for d in nbx.all_dtypes]
NARROW_FLOATS = ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")
FLOAT_DTYPES = [d.name for d in nbx.all_dtypes if d.is_floating_point]
INT_DTYPES = [d.name for d in nbx.all_dtypes if d.is_integral]


def np_dtype(name):
    return nbx.get_dtype(name).numpy


def cast(values: np.ndarray, dst: str) -> np.ndarray:
    """Convert with nbxtensor: values uploaded as they are, converted on the test device."""
    return np.array(to_nbx(values).to(dst).numpy())


def reference_cast(values: np.ndarray, dst: str) -> np.ndarray:
    """ATen's conversion of ``values`` to ``dst``, from NumPy and ml_dtypes."""
    src_kind = values.dtype.kind
    if dst == "bool":
        return values != 0 if src_kind == "c" else values.astype(np.float64) != 0
    if nbx.get_dtype(dst).is_complex:
        component = np_dtype(dst).type(0).real.dtype
        return reference_cast(values, component.name).astype(np_dtype(dst)) if src_kind != "c" \
            else values.astype(np_dtype(dst))
    if src_kind == "c":
        values = values.real
    name = values.dtype.name
    if name in NARROW_FLOATS:
        values = values.astype(np.float32)
    if dst in NARROW_FLOATS:
        return values.astype(np.float32).astype(np_dtype(dst))
    if nbx.get_dtype(dst).is_integral and values.dtype.kind == "f":
        return np.trunc(values).astype(np.int64).astype(np_dtype(dst))
    return values.astype(np_dtype(dst))


def defined(values: np.ndarray, dst: str) -> np.ndarray:
    """Elements whose conversion ATen defines (float to integer: finite and in range; into the
    narrow integers through int64, so in int64's range)."""
    if not nbx.get_dtype(dst).is_integral or values.dtype.kind in "biu":
        return np.ones(values.shape, bool)
    real = (values.real if values.dtype.kind == "c" else values).astype(np.float64)
    info = np.iinfo(np_dtype(dst))
    with np.errstate(invalid="ignore"):
        truncated = np.trunc(real)
        if nbx.get_dtype(dst).itemsize <= 2:
            return np.isfinite(real) & (truncated >= -2.0 ** 63) & (truncated < 2.0 ** 63)
        return np.isfinite(real) & (truncated >= info.min) & (truncated <= info.max)


def assert_bits_equal(actual: np.ndarray, expected: np.ndarray):
    """Equal bit for bit, except that any NaN matches any NaN (ATen's NaN payloads vary by path)."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if actual.dtype.kind == "c":
        assert_bits_equal(actual.real.copy(), expected.real.copy())
        assert_bits_equal(actual.imag.copy(), expected.imag.copy())
        return
    if actual.dtype.kind in "biu":
        np.testing.assert_array_equal(actual, expected)
        return
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    nan = np.isnan(a) & np.isnan(e)
    bits = np.dtype(f"u{actual.dtype.itemsize}")
    differ = (actual.view(bits) != expected.view(bits)) & ~nan
    assert not differ.any(), f"at {np.argwhere(differ)[:8].tolist()}: got {a[differ][:8]}, expected {e[differ][:8]}"


SPECIAL_FLOATS = [0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.7, 3.75, 7.0, 100.25, -100.75, 127.0, -128.0, 255.0,
                  -1000.5, 3000.25, 65504.0, 1e-3, -1e-6, 1e-30, float("nan"), float("inf"), float("-inf")]


def source_values(name: str) -> np.ndarray:
    """A spread of values held by dtype ``name``: specials for floats, edges for integers."""
    dt = nbx.get_dtype(name)
    if dt.kind == "bool":
        return np.array([True, False, True, True])
    if dt.is_integral:
        info = np.iinfo(dt.numpy)
        return np.array(sorted({0, 1, 2, 7, 100, info.min, info.max, info.min + 1, info.max - 1, info.max // 3}),
                        dtype=dt.numpy)
    if dt.is_complex:
        out = np.empty(len(SPECIAL_FLOATS), dt.numpy)
        out.real, out.imag = SPECIAL_FLOATS, np.roll(SPECIAL_FLOATS, 3)
        return out
    with np.errstate(over="ignore", invalid="ignore"):
        return np.array(SPECIAL_FLOATS, np.float32).astype(dt.numpy)


@pytest.mark.parametrize("src,dst", list(itertools.product(ALL_DTYPES, ALL_DTYPES)))
def test_every_dtype_pair_matches_reference(src, dst):
    values = source_values(src)
    with np.errstate(over="ignore", invalid="ignore"):
        expected = reference_cast(values, dst)
    if src == "float8_e4m3fn" or (dst == "float8_e4m3fn" and src != dst):
        # ml_dtypes turns e4m3fn overflow into NaN where ATen saturates: compare in range only here
        in_range = np.abs((values.real if values.dtype.kind == "c" else values).astype(np.float64)) <= 448
        in_range |= np.isnan(values.astype(np.complex128).real) if values.dtype.kind in "fcV" else False
        keep = in_range & defined(values, dst)
    else:
        keep = defined(values, dst)
    actual = cast(values, dst)
    assert_bits_equal(actual[keep], expected[keep])


@pytest.mark.parametrize("src", FLOAT_DTYPES)
@pytest.mark.parametrize("dst", INT_DTYPES)
def test_float_to_int_truncates_toward_zero(src, dst):
    values = np.array([2.5, -2.5, 0.5, -0.5, 1.5, -1.5, 3.5, -3.5], np.float32).astype(np_dtype(src))
    expected = np.array([2, -2, 0, 0, 1, -1, 3, -3])
    if dst == "uint8":
        expected = expected % 256  # negatives wrap through int64
    np.testing.assert_array_equal(cast(values, dst), expected.astype(np_dtype(dst)))


@pytest.mark.parametrize("src", FLOAT_DTYPES)
def test_negative_float_to_uint8_wraps_through_int64(src):
    values = np.array([-1.5, -2.0, -100.0, -200.0], np.float32).astype(np_dtype(src))
    expected = (np.trunc(values.astype(np.float64)).astype(np.int64) % 256).astype(np.uint8)
    np.testing.assert_array_equal(cast(values, "uint8"), expected)


@pytest.mark.parametrize("src", FLOAT_DTYPES + ["complex64", "complex128"])
def test_to_bool_is_nonzero_and_nan_is_true(src):
    values = np.array([0.0, -0.0, float("nan"), 1e-30, -3.0, float("inf")], np.float32).astype(np_dtype(src))
    tiny_survives = bool(values[3] != 0)  # 1e-30 underflows to 0 in float16 and float8
    expected = np.array([False, False, True, tiny_survives, True, True])
    np.testing.assert_array_equal(cast(values, "bool"), expected)


def test_complex_to_bool_looks_at_both_parts():
    values = np.array([0j, 1j, 1 + 0j, complex(0, float("nan")), -0.0 - 0.0j], np.complex64)
    np.testing.assert_array_equal(cast(values, "bool"), [False, True, True, True, False])


@pytest.mark.parametrize("dst", [n for n in ALL_DTYPES if n != "bool"])
def test_bool_to_anything_is_zero_or_one(dst):
    actual = cast(np.array([True, False, True]), dst)
    np.testing.assert_array_equal(actual.astype(np.complex128), [1, 0, 1])


def test_float32_to_float16_overflows_to_infinity():
    """ATen (and IEEE) rounding: beyond the float16 range a value becomes inf, it does not saturate.
    65519.996 is below the halfway point to the next binade and rounds to 65504."""
    values = np.array([65504.0, 65519.996, 65520.0, 1e5, -1e5, 3.4e38, -65520.0], np.float32)
    expected = np.array([65504.0, 65504.0, np.inf, np.inf, -np.inf, np.inf, -np.inf], np.float16)
    with np.errstate(over="ignore"):
        assert_bits_equal(cast(values, "float16"), expected)
        assert_bits_equal(cast(values.astype(np.float64), "float16"), expected)


def test_float32_minimum_mask_becomes_minus_infinity_in_half():
    """Lesson: a mask filled with the float32 minimum became -inf in fp16 (ATen does the same)."""
    mask = to_nbx(np.array([0.0, np.finfo(np.float32).min], np.float32))
    assert np.array(mask.half().numpy()).tolist() == [0.0, -np.inf]
    # the float32 minimum lies past the midpoint between bfloat16's minimum and -2^128, so -inf too
    assert np.array(mask.bfloat16().numpy()).astype(np.float64).tolist() == [0.0, -np.inf]


@pytest.mark.parametrize("dst,ulp_bits", [("bfloat16", 8), ("float16", 11)])
def test_float64_to_narrow_float_rounds_through_float32(dst, ulp_bits):
    """1 + half an ulp + a tiny bit: rounded once it goes up; through float32 the tiny bit is lost,
    leaving a tie that goes to even (1.0). ATen builds half and bfloat16 from a float32."""
    value = 1.0 + 2.0 ** -ulp_bits + 2.0 ** -30  # above the tie: one rounding gives 1 + 2^(1 - ulp_bits)
    via_float32 = np.array([value]).astype(np.float32).astype(np_dtype(dst))
    assert float(via_float32[0]) == 1.0
    assert_bits_equal(cast(np.array([value]), dst), via_float32)


def test_int64_to_narrow_float_rounds_through_float32():
    value = np.array([2 ** 24 + 1 + 2 ** 40, 16_777_217, -(2 ** 53) - 1], np.int64)
    for dst in ("float16", "bfloat16", "float32"):
        with np.errstate(over="ignore"):
            expected = value.astype(np.float32).astype(np_dtype(dst))
        assert_bits_equal(cast(value, dst), expected)


def test_bfloat16_rounds_to_nearest_even():
    values = np.array([
        1.0 + 2.0 ** -8,  # tie, 1.0 is even
        1.0 + 3 * 2.0 ** -8,  # tie, rounds up to the even 1 + 2^-6
        1.0 + 2.0 ** -8 + 2.0 ** -20,  # above the tie
        1.0 + 2.0 ** -8 - 2.0 ** -20,  # below the tie
        -(1.0 + 2.0 ** -8 + 2.0 ** -20),
        3.3895313892515355e38,  # the largest bfloat16
        3.3961775292304957e38,  # rounds past it: inf
        1e-40, -1e-42,  # float32 subnormals
        2.0 ** -133 * 1.5,  # the smallest bfloat16 subnormal and a half: tie to even
    ], np.float32)
    expected = values.astype(ml_dtypes.bfloat16)
    assert expected.astype(np.float64)[:2].tolist() == [1.0, 1.0 + 2.0 ** -6]
    assert_bits_equal(cast(values, "bfloat16"), expected)


def test_float32_to_bfloat16_random_bits():
    rng = np.random.default_rng(11)
    values = rng.integers(0, 2 ** 32, size=4096, dtype=np.uint64).astype(np.uint32).view(np.float32)
    assert_bits_equal(cast(values, "bfloat16"), values.astype(ml_dtypes.bfloat16))


def test_every_bfloat16_to_float32():
    values = np.arange(2 ** 16, dtype=np.uint16).view(ml_dtypes.bfloat16)
    assert_bits_equal(cast(values, "float32"), values.astype(np.float32))


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2"])
def test_every_float8_to_float32(name):
    values = np.arange(256, dtype=np.uint8).view(np_dtype(name))
    assert_bits_equal(cast(values, "float32"), values.astype(np.float32))
    assert_bits_equal(cast(values, "float64"), values.astype(np.float64))
    assert_bits_equal(cast(values, "float16"), values.astype(np.float32).astype(np.float16))
    assert_bits_equal(cast(values, "bfloat16"), values.astype(np.float32).astype(ml_dtypes.bfloat16))


@pytest.mark.parametrize("name,limit", [("float8_e4m3fn", 448.0), ("float8_e5m2", 57344.0)])
def test_float_to_float8_matches_ml_dtypes_in_range(name, limit):
    rng = np.random.default_rng(5)
    magnitudes = np.exp(rng.uniform(np.log(2.0 ** -20), np.log(limit), size=2000))
    values = (magnitudes * rng.choice([-1.0, 1.0], size=2000)).astype(np.float32)
    grid = np.arange(256, dtype=np.uint8).view(np_dtype(name)).astype(np.float32)
    grid = grid[np.isfinite(grid)]
    # exact values, the ties between neighbours, and their float32 neighbours
    ties = (np.sort(grid)[1:] + np.sort(grid)[:-1]) / 2
    edges = np.concatenate([grid, ties, np.nextafter(ties, np.float32(np.inf)), np.nextafter(ties, -np.inf)])
    values = np.concatenate([values, edges.astype(np.float32), [0.0, -0.0, np.nan]]).astype(np.float32)
    assert_bits_equal(cast(values, name), values.astype(np_dtype(name)))
    assert_bits_equal(cast(values.astype(np.float64), name), values.astype(np_dtype(name)))


def test_float8_e4m3fn_saturates_and_e5m2_overflows_to_infinity():
    values = np.array([448.0, 463.0, 464.0, 470.0, 1e5, np.inf, -np.inf, -1e30, np.nan], np.float32)
    e4m3 = cast(values, "float8_e4m3fn").astype(np.float64)
    assert e4m3[:-1].tolist() == [448.0, 448.0, 448.0, 448.0, 448.0, 448.0, -448.0, -448.0]
    assert np.isnan(e4m3[-1])
    values = np.array([57344.0, 61439.0, 61440.0, 1e5, np.inf, -np.inf, np.nan], np.float32)
    e5m2 = cast(values, "float8_e5m2").astype(np.float64)
    assert e5m2[:-1].tolist() == [57344.0, 57344.0, np.inf, np.inf, np.inf, -np.inf]
    assert np.isnan(e5m2[-1])


def test_float8_to_float8_and_to_integers():
    values = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e5m2)
    as_float32 = values.astype(np.float32)
    expected = np.where(np.abs(as_float32) > 448, np.sign(as_float32) * 448, as_float32)
    expected = np.where(np.isnan(as_float32), np.nan, expected).astype(np.float32).astype(ml_dtypes.float8_e4m3fn)
    assert_bits_equal(cast(values, "float8_e4m3fn"), expected)
    e4m3 = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn)
    finite = np.isfinite(e4m3.astype(np.float32))
    truncated = np.trunc(e4m3.astype(np.float32)[finite]).astype(np.int32)
    np.testing.assert_array_equal(cast(e4m3, "int32")[finite], truncated)


def test_complex_to_real_takes_the_real_part():
    values = np.array([1.5 - 2j, -3.25 + 4j, complex(np.nan, 1), complex(1, np.nan)], np.complex128)
    for dst in ("float32", "float64", "float16", "bfloat16", "int64", "int16"):
        keep = np.isfinite(values.real) | (dst not in INT_DTYPES)
        assert_bits_equal(cast(values, dst)[keep], reference_cast(values, dst)[keep])
    assert cast(values, "float64")[:2].tolist() == [1.5, -3.25]


@pytest.mark.parametrize("dst", ["complex64", "complex128"])
def test_real_to_complex_has_zero_imaginary_part(dst):
    for src in ("float32", "float64", "int32", "float16", "bfloat16", "uint8", "bool"):
        values = np.array([1, 0, 3, 7], np.float32).astype(np_dtype(src))
        out = cast(values, dst)
        assert out.dtype == np_dtype(dst)
        np.testing.assert_array_equal(out.real, values.astype(np.float64))
        assert_bits_equal(out.imag.copy(), np.zeros(4, out.real.dtype))


def test_complex64_and_complex128_convert_both_ways():
    wide = np.array([1 / 3 + 2j / 3, complex(1e300, -1e-300), complex(np.inf, -np.inf)], np.complex128)
    with np.errstate(over="ignore", under="ignore"):
        assert_bits_equal(cast(wide, "complex64"), wide.astype(np.complex64))
    narrow = wide.astype(np.complex64)
    assert_bits_equal(cast(narrow, "complex128"), narrow.astype(np.complex128))


def test_integer_conversions_wrap():
    values = np.array([-1, 255, 256, -129, 2 ** 31, -(2 ** 40) + 3], np.int64)
    for dst in ("uint8", "int8", "int16", "int32"):
        np.testing.assert_array_equal(cast(values, dst), values.astype(np_dtype(dst)))
    np.testing.assert_array_equal(cast(np.array([-1, -128], np.int8), "uint8"), np.array([255, 128], np.uint8))
    np.testing.assert_array_equal(cast(np.array([255, 128], np.uint8), "int64"), np.array([255, 128]))


def test_copy_between_dtypes_into_strided_destination_converts():
    base = to_nbx(np.zeros((3, 4), np.float16))
    base.t()[1:3].copy_(to_nbx(np.array([[1.5, -2.7, 1e5], [0.1, 3.0, -65520.0]], np.float64)))
    expected = np.zeros((3, 4), np.float16)
    with np.errstate(over="ignore"):
        expected.T[1:3] = np.array([[1.5, -2.7, 1e5], [0.1, 3.0, -65520.0]]).astype(np.float32).astype(np.float16)
    assert_bits_equal(np.array(base.numpy()), expected)
