"""Conformance of casts, fills and copies with PyTorch on the CPU (the oracle; skipped without torch).

Results are compared bit for bit, except that NaN matches any NaN (ATen's NaN payloads differ between
its scalar and vector paths). Float to integer conversions of NaN, infinities and values outside the
target's range are undefined behaviour in C++; those elements are not compared.
"""
import itertools

import numpy as np
import pytest

import nbxtensor as nbx
from tests.conftest import to_nbx

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.filterwarnings("ignore:Casting complex values to real"),
    pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning"),
    pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning"),
]

ALL_DTYPES = [d.name for d in nbx.all_dtypes]

SPECIALS = [
    float("nan"), -float("nan"), float("inf"), float("-inf"), 0.0, -0.0,
    1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, -2.7, 3.3, -200.7, 127.5, 255.9, -129.0, 300.0, -1000.0,
    448.0, 464.0, 500.0, 57344.0, 61440.0, 65504.0, 65519.0, 65520.0, 1e5, -1e5, 2.0 ** 31, -(2.0 ** 31) - 1,
    1e10, -3e18, 1e20, 3.0e38, 3.4e38, 1e39, 1e300, -1e300,
    1e-3, 6e-8, 6e-5, 2.0 ** -10, 1e-8, 1e-30, 1e-40, 1e-45, 5e-324, -1e-40,
    1.00390625, 1.0 + 3 * 2.0 ** -8, 1.0 + 2.0 ** -11 + 2.0 ** -30, 0.1, 1.0 / 3,
]


def torch_dtype(name):
    return getattr(torch, name)


def torch_source(name: str) -> "torch.Tensor":
    """The special values as torch holds them in dtype ``name``."""
    dt = torch_dtype(name)
    if dt == torch.bool:
        return torch.tensor([True, False, True, False])
    if not dt.is_floating_point and not dt.is_complex:
        info = torch.iinfo(dt)
        edges = {0, 1, -1, 2, 7, 100, -100, 127, 128, 255, 256, -129, 2 ** 24 + 1, 2 ** 31 - 1, 2 ** 53 + 1,
                 info.min, info.max, info.min + 1, info.max - 1}
        return torch.tensor(sorted(v for v in edges if info.min <= v <= info.max), dtype=dt)
    values = torch.tensor(SPECIALS, dtype=torch.float64)
    if dt.is_complex:
        return torch.complex(values, values.roll(7)).to(dt)
    return values.to(dt)


def to_nbx_from_torch(t: "torch.Tensor") -> nbx.Tensor:
    return to_nbx(torch_as_numpy(t))


def torch_as_numpy(t: "torch.Tensor") -> np.ndarray:
    name = str(t.dtype).removeprefix("torch.")
    if t.is_complex() or t.dtype == torch.bool:
        return t.numpy()
    raw = t.clone(memory_format=torch.contiguous_format).view(torch.uint8).numpy()
    return raw.view(nbx.get_dtype(name).numpy).reshape(tuple(t.shape))


def assert_bits_equal(actual: np.ndarray, expected: np.ndarray, where: str = ""):
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, where
    if actual.dtype.kind == "c":
        assert_bits_equal(actual.real.copy(), expected.real.copy(), where + " (real)")
        assert_bits_equal(actual.imag.copy(), expected.imag.copy(), where + " (imag)")
        return
    if actual.dtype.kind in "biu":
        np.testing.assert_array_equal(actual, expected, err_msg=where)
        return
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    nan = np.isnan(a) & np.isnan(e)
    bits = np.dtype(f"u{actual.dtype.itemsize}")
    differ = (actual.view(bits) != expected.view(bits)) & ~nan
    assert not differ.any(), f"{where} at {np.argwhere(differ)[:8].ravel().tolist()}: got {a[differ][:8]}, " \
                             f"expected {e[differ][:8]}"


# Overflow into float8_e4m3fn (which has no infinity) saturates at +-448 in the torch nbxtensor follows
# (2.13); older releases gave NaN. Against an older torch those elements are left out.
E4M3FN_SATURATES = not torch.isnan(torch.tensor([1000.0]).to(torch.float8_e4m3fn).float()).item()


def defined_mask(src: "torch.Tensor", dst: str) -> np.ndarray:
    """Elements whose conversion C++ defines: float to integer needs a finite value whose truncation
    the target holds (uint8 goes through int64 in ATen, so int64's range there)."""
    dt = torch_dtype(dst)
    if dst == "float8_e4m3fn" and not E4M3FN_SATURATES and src.dtype != dt:
        real = (src.real if src.is_complex() else src).to(torch.float64).numpy()
        return ~(np.abs(real) > 464)  # NaN stays in: it converts to NaN either way
    if dt.is_floating_point or dt.is_complex or dt == torch.bool:
        return np.ones(src.shape, bool)
    if not (src.dtype.is_floating_point or src.dtype.is_complex):
        return np.ones(src.shape, bool)
    real = (src.real if src.is_complex() else src).to(torch.float64).numpy()
    info = np.iinfo(nbx.get_dtype(dst).numpy) if dst != "uint8" else np.iinfo(np.int64)
    with np.errstate(invalid="ignore"):
        truncated = np.trunc(real)
        return np.isfinite(real) & (truncated >= info.min) & (truncated < float(info.max) + 1)


@pytest.mark.parametrize("src,dst", list(itertools.product(ALL_DTYPES, ALL_DTYPES)))
def test_cast_matches_torch(src, dst):
    source = torch_source(src)
    expected = torch_as_numpy(source.to(torch_dtype(dst)))
    actual = np.array(to_nbx_from_torch(source).to(dst).numpy())
    keep = defined_mask(source, dst)
    assert_bits_equal(actual[keep], expected[keep], f"{src} -> {dst}")


@pytest.mark.parametrize("src,dst", [("float32", "bfloat16"), ("float64", "float16"), ("bfloat16", "float8_e4m3fn"),
                                     ("complex64", "float16"), ("int64", "bfloat16"), ("float16", "uint8")])
def test_strided_cast_matches_torch(src, dst):
    """The same conversions through strided views on both sides (ATen's non-vectorised path)."""
    source = torch_source(src)
    n = source.numel() // 2 * 2
    source_view = source[:n].reshape(2, n // 2).t()
    expected_base = torch.zeros(n // 2, 3, dtype=torch_dtype(dst))
    expected_base[:, ::2].copy_(source_view)
    actual_base = to_nbx_from_torch(torch.zeros(n // 2, 3, dtype=torch_dtype(dst)))
    actual_base[:, ::2].copy_(to_nbx_from_torch(source[:n]).reshape(2, n // 2).t())
    keep = np.ones((n // 2, 3), bool)
    keep[:, ::2] = defined_mask(source_view, dst)
    assert_bits_equal(np.array(actual_base.numpy())[keep], torch_as_numpy(expected_base)[keep])


FILL_VALUES = [0, 1, -1, 2.7, -2.7, 127, 127.5, 128, -128, -128.5, -129, 255, 256, -255, -256, 300, -1.0, 65504.0,
               65504.5, 1e5, 448.0, 460.0, 57344.0, 3.39e38, 1e39, 2 ** 31, 2 ** 63 - 1, 9.3e18, float("inf"),
               float("-inf"), float("nan"), True, False, 3 + 0j, 1j, 2.5 - 1.5j, complex(1e39, 0), 0.1, 1e-40,
               1.00390625]


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_fill_matches_torch(dtype):
    for value in FILL_VALUES:
        reference = torch.zeros(3, dtype=torch_dtype(dtype))
        try:
            reference.fill_(value)
            torch_error = None
        except RuntimeError as e:
            torch_error = e
        mine = to_nbx_from_torch(torch.zeros(3, dtype=torch_dtype(dtype)))
        if torch_error is not None:
            with pytest.raises(RuntimeError):
                mine.fill_(value)
            continue
        mine.fill_(value)
        assert_bits_equal(np.array(mine.numpy()), torch_as_numpy(reference), f"fill {dtype} with {value!r}")


def test_overlap_rules_match_torch():
    cases = {
        "shifted": lambda x: x[1:].copy_(x[:-1]),
        "shifted back": lambda x: x[:-1].copy_(x[1:]),
        "interleaved": lambda x: x[::2].copy_(x[1::2]),
        "itself": lambda x: x.copy_(x),
        "expanded destination": lambda x: x[:3].expand(2, 3).copy_(x[3:6].reshape(1, 3)),
        "expanded fill": lambda x: x[:3].expand(2, 3).fill_(1.5),
        "expanded zero": lambda x: x[:3].expand(2, 3).zero_(),
        "fill from own element": lambda x: x.fill_(x[4]),
        "disjoint halves": lambda x: x[:4].copy_(x[4:]),
    }
    for name, op in cases.items():
        reference = torch.arange(8, dtype=torch.float32)
        mine = to_nbx(np.arange(8, dtype=np.float32))
        try:
            op(reference)
            torch_error = None
        except RuntimeError as e:
            torch_error = e
        if torch_error is not None:
            with pytest.raises(RuntimeError):
                op(mine)
        else:
            op(mine)
        np.testing.assert_array_equal(np.array(mine.numpy()), reference.numpy(), err_msg=name)


LAYOUTS = {
    "permuted": lambda t: t.permute(2, 0, 1),
    "transposed slice": lambda t: t.transpose(0, 2)[::2],
    "sliced": lambda t: t[:, ::2],
    "expanded": lambda t: t[:, :1].expand(2, 5, 4),
    "unit dims": lambda t: t[:1, :, 1:2],
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_clone_and_to_strides_match_torch(layout):
    values = np.arange(40, dtype=np.float32).reshape(2, 5, 4)
    reference = LAYOUTS[layout](torch.from_numpy(values.copy()))
    mine = LAYOUTS[layout](to_nbx(values))
    assert mine.clone().stride() == reference.clone().stride()
    assert mine.to(nbx.float64).stride() == reference.to(torch.float64).stride()
    assert mine.contiguous().stride() == reference.contiguous().stride()
    np.testing.assert_array_equal(np.array(mine.clone().numpy()), reference.clone().numpy())


def test_cat_matches_torch():
    a = torch.arange(6, dtype=torch.int32).reshape(2, 3)
    b = torch.tensor([[1.5, -2.5, 3.25]], dtype=torch.float16)
    c = torch.zeros(0, dtype=torch.float64)
    for tensors, dim in [((a, b), 0), ((a.t(), b.t()), 1), ((c, a, b), -2), ((a, a.t().t()), 1), ((c, c), 0)]:
        expected = torch.cat(tensors, dim)
        mine = nbx.cat([to_nbx_from_torch(t) for t in tensors], dim)
        assert str(mine.dtype) == str(expected.dtype).replace("torch", "nbxtensor")
        assert tuple(mine.shape) == tuple(expected.shape)
        assert_bits_equal(np.array(mine.numpy()), torch_as_numpy(expected))
