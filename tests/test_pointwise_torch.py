"""Pointwise ops against PyTorch (an oracle only): result dtypes under promotion with scalars and 0-d
tensors, and special values (NaN, ±inf, -0.0, integer corners) for every op that takes them.

Tolerance for special-value comparisons: float32 results within 4 ulp-ish relative (2e-6) where
both are finite, identical NaN and infinity positions, and identical signs of zeros for the ops
whose result can be a signed zero."""
import itertools
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import nbxtensor as nbx  # noqa: E402
import nbxtensor.nn.functional as F  # noqa: E402
from tests.conftest import to_nbx  # noqa: E402


def as_torch(a):
    a = np.array(a, order="C")  # ascontiguousarray would make a 0-d array 1-d
    if a.dtype == nbx.bfloat16.numpy:
        return torch.from_numpy(a.astype(np.float32)).to(torch.bfloat16)
    return torch.from_numpy(a)


DTYPES = ["bool", "uint8", "int8", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
SCALARS = [2, -1, 2.5, True]


def _make(dtype, shape=(2,)):
    return np.ones(shape, dtype=nbx.get_dtype(dtype).numpy)


def _torch_dtype_name(t):
    return str(t.dtype).replace("torch.", "")


BINARY_PROMOTION = ["add", "mul", "div", "maximum", "atan2", "eq", "logical_and", "pow", "remainder", "hypot",
                    "copysign", "fmax"]


@pytest.mark.parametrize("op", BINARY_PROMOTION)
def test_binary_promotion_matches_torch(op):
    pairs = list(itertools.product(DTYPES, DTYPES))[::3]
    for a_dtype, b_dtype in pairs:
        a, b = _make(a_dtype), _make(b_dtype, ())
        for b_is_0d in (False, True):
            bb = b if b_is_0d else _make(b_dtype)
            try:
                expected = getattr(torch, op)(as_torch(a), as_torch(bb))
            except (RuntimeError, NotImplementedError):
                with pytest.raises((RuntimeError, NotImplementedError, TypeError)):
                    getattr(nbx, op)(to_nbx(a), to_nbx(bb))
                continue
            got = getattr(nbx, op)(to_nbx(a), to_nbx(bb))
            assert got.dtype.name == _torch_dtype_name(expected), (op, a_dtype, b_dtype, b_is_0d)
        for scalar in SCALARS:
            try:
                expected = getattr(torch, op)(as_torch(a), scalar)
            except (RuntimeError, NotImplementedError, TypeError):
                continue
            got = getattr(nbx, op)(to_nbx(a), scalar)
            assert got.dtype.name == _torch_dtype_name(expected), (op, a_dtype, scalar)


UNARY_PROMOTION = ["sqrt", "rsqrt", "sin", "exp", "abs", "neg", "sign", "floor", "round", "sigmoid", "isnan",
                   "signbit", "square", "reciprocal", "logical_not", "bitwise_not", "nan_to_num", "erfinv"]


@pytest.mark.parametrize("op", UNARY_PROMOTION)
def test_unary_dtype_matches_torch(op):
    for dtype in DTYPES:
        a = _make(dtype)
        try:
            expected = getattr(torch, op)(as_torch(a))
        except (RuntimeError, NotImplementedError):
            with pytest.raises((RuntimeError, NotImplementedError)):
                getattr(nbx, op)(to_nbx(a))
            continue
        got = getattr(nbx, op)(to_nbx(a))
        assert got.dtype.name == _torch_dtype_name(expected), (op, dtype)


SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 1e-30, -1e30, 100.0], np.float32)

UNARY_SPECIAL = {
    "abs": nbx.abs, "neg": nbx.neg, "sign": nbx.sign, "exp": nbx.exp, "expm1": nbx.expm1, "log": nbx.log,
    "log1p": nbx.log1p, "sqrt": nbx.sqrt, "rsqrt": nbx.rsqrt, "reciprocal": nbx.reciprocal, "sin": nbx.sin,
    "tanh": nbx.tanh, "atan": nbx.atan, "asinh": nbx.asinh, "erf": nbx.erf, "erfc": nbx.erfc, "floor": nbx.floor,
    "ceil": nbx.ceil, "round": nbx.round, "trunc": nbx.trunc, "frac": nbx.frac, "sigmoid": nbx.sigmoid,
    "nan_to_num": nbx.nan_to_num, "isfinite": nbx.isfinite, "signbit": nbx.signbit, "angle": nbx.angle,
}
ACTIVATION_SPECIAL = {
    "relu": F.relu, "relu6": F.relu6, "leaky_relu": F.leaky_relu, "elu": F.elu, "celu": F.celu, "selu": F.selu,
    "gelu": F.gelu, "silu": F.silu, "mish": F.mish, "softplus": F.softplus, "softsign": F.softsign,
    "hardsigmoid": F.hardsigmoid, "hardswish": F.hardswish, "hardtanh": F.hardtanh, "logsigmoid": F.logsigmoid,
}


def _assert_same_special(got, expected, signed_zeros=True):
    got = np.asarray(got, np.float64)
    expected = np.asarray(expected, np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    np.testing.assert_array_equal(np.isinf(got) * np.sign(got), np.isinf(expected) * np.sign(expected))
    finite = np.isfinite(expected)
    np.testing.assert_allclose(got[finite], expected[finite], rtol=2e-6, atol=1e-37)
    if signed_zeros:
        zeros = expected == 0
        np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(expected[zeros]))


@pytest.mark.parametrize("name", list(UNARY_SPECIAL))
def test_unary_special_values_match_torch(name):
    expected = getattr(torch, name)(as_torch(SPECIAL)).numpy()
    got = UNARY_SPECIAL[name](to_nbx(SPECIAL)).numpy()
    _assert_same_special(got, expected, signed_zeros=name not in ("sign",))


@pytest.mark.parametrize("name", list(ACTIVATION_SPECIAL))
def test_activation_special_values_match_torch(name):
    values = SPECIAL
    if name == "gelu":  # torch's CPU gelu gives NaN at ±inf (its vectorised erf path); ours gives ±inf and 0
        values = values[np.isfinite(values) | np.isnan(values)]
    expected = getattr(torch.nn.functional, name)(as_torch(values)).numpy()
    got = ACTIVATION_SPECIAL[name](to_nbx(values)).numpy()
    # ATen's relu-family picks either zero for -0.0; values and NaN/inf positions must match
    _assert_same_special(got, expected, signed_zeros=False)


BINARY_SPECIAL = ["add", "sub", "mul", "div", "floor_divide", "remainder", "fmod", "pow", "atan2", "hypot",
                  "maximum", "minimum", "fmax", "fmin", "copysign", "xlogy", "logaddexp", "eq", "lt", "ge"]


@pytest.mark.parametrize("name", BINARY_SPECIAL)
def test_binary_special_values_match_torch(name):
    a = np.repeat(SPECIAL, len(SPECIAL))
    b = np.tile(SPECIAL, len(SPECIAL))
    if name in ("remainder", "fmod"):
        # torch's CPU fmod computes a - trunc(a / b) * b, NaN when a / b overflows; C's fmod (ours,
        # and ATen's CUDA kernels) is exact there
        with np.errstate(all="ignore"):
            keep = ~np.isinf(a.astype(np.float32) / b.astype(np.float32)) | np.isinf(a)
        a, b = a[keep], b[keep]
    expected = getattr(torch, name)(as_torch(a), as_torch(b)).numpy()
    got = getattr(nbx, name)(to_nbx(a), to_nbx(b)).numpy()
    if expected.dtype == bool:
        np.testing.assert_array_equal(got, expected)
        return
    # pow and floor_divide of huge operands may differ in the last ulp; hypot and atan2 by libm's ulp
    # fmax and friends may return either zero of a (0.0, -0.0) pair, as C's fmax may
    _assert_same_special(got, expected, signed_zeros=name not in ("pow", "floor_divide", "fmax", "fmin",
                                                                   "maximum", "minimum"))


INT_BINARY = ["add", "sub", "mul", "floor_divide", "remainder", "fmod", "bitwise_and", "bitwise_xor",
              "bitwise_left_shift", "bitwise_right_shift", "maximum", "pow"]


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8"])
@pytest.mark.parametrize("name", INT_BINARY)
def test_integer_corners_match_torch(name, dtype):
    info = np.iinfo(nbx.get_dtype(dtype).numpy)
    candidates = {info.min, info.min + 1, -7, -1, 1, 2, 7, info.max}
    values = np.array(sorted(v for v in candidates if info.min <= v <= info.max), dtype=nbx.get_dtype(dtype).numpy)
    a = np.repeat(values, len(values))
    b = np.tile(values, len(values))
    if name in ("floor_divide", "remainder", "fmod"):
        keep = (b != 0) & ~((a == info.min) & (b == -1))  # torch on the CPU traps on INT_MIN / -1
        a, b = a[keep], b[keep]
    if name == "pow":
        keep = (b >= 0) & (b < 20)
        a, b = a[keep], b[keep]
    if name.startswith("bitwise_") and "shift" in name:
        b = np.abs(b.astype(np.int64)) % (info.bits + 3)
        b = b.astype(a.dtype)
    expected = getattr(torch, name)(as_torch(a), as_torch(b)).numpy()
    got = getattr(nbx, name)(to_nbx(a), to_nbx(b)).numpy()
    np.testing.assert_array_equal(got, expected)


def test_activations_parameters_match_torch():
    x = np.linspace(-4, 4, 33).astype(np.float32)
    tx, nx = as_torch(x), to_nbx(x)
    pairs = [
        (F.leaky_relu(nx, 0.2), torch.nn.functional.leaky_relu(tx, 0.2)),
        (F.elu(nx, 0.7), torch.nn.functional.elu(tx, 0.7)),
        (F.celu(nx, 1.5), torch.nn.functional.celu(tx, 1.5)),
        (F.softplus(nx, 2.0, 3.0), torch.nn.functional.softplus(tx, 2.0, 3.0)),
        (F.hardtanh(nx, -2.0, 0.5), torch.nn.functional.hardtanh(tx, -2.0, 0.5)),
        (F.threshold(nx, 0.3, -1.0), torch.nn.functional.threshold(tx, 0.3, -1.0)),
        (F.gelu(nx, approximate="tanh"), torch.nn.functional.gelu(tx, approximate="tanh")),
        (nbx.logit(nx.sigmoid(), eps=0.05), torch.logit(tx.sigmoid(), eps=0.05)),
        (nbx.lerp(nx, nx * 2, 0.7), torch.lerp(tx, tx * 2, 0.7)),
        (nbx.clamp(nx, -1, 2), torch.clamp(tx, -1, 2)),
        (nbx.round(nx, decimals=1), torch.round(tx, decimals=1)),
    ]
    for got, expected in pairs:
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=2e-6, atol=2e-6)
    glu_in = np.linspace(-2, 2, 24).astype(np.float32).reshape(4, 6)
    np.testing.assert_allclose(F.glu(to_nbx(glu_in), 0).numpy(), torch.nn.functional.glu(as_torch(glu_in), 0).numpy(),
                               rtol=2e-6)


def test_half_precision_results_match_torch():
    rng = np.random.default_rng(3)
    for dtype in ("float16", "bfloat16"):
        a = rng.standard_normal(257).astype(np.float32)
        b = rng.standard_normal(257).astype(np.float32)
        ta = torch.from_numpy(a).to(getattr(torch, dtype))
        tb = torch.from_numpy(b).to(getattr(torch, dtype))
        na = to_nbx(a).to(getattr(nbx, dtype))
        nb = to_nbx(b).to(getattr(nbx, dtype))
        for got, expected in ((na + nb, ta + tb), (na * nb, ta * tb), (na / nb, ta / tb), (na * 0.1, ta * 0.1),
                              (nbx.exp(na), torch.exp(ta)), (F.silu(na), torch.nn.functional.silu(ta))):
            assert got.dtype.name == dtype
            g = np.asarray(got.numpy(), np.float64)
            e = expected.to(torch.float64).numpy()
            # exactly rounded ops agree bit for bit; transcendental ones within one unit of the half type
            ulp = 2.0 ** -10 if dtype == "float16" else 2.0 ** -7
            np.testing.assert_allclose(g, e, rtol=ulp, atol=1e-6)
        np.testing.assert_array_equal(np.asarray((na + nb).numpy(), np.float64), (ta + tb).to(torch.float64).numpy())
        np.testing.assert_array_equal(np.asarray((na * nb).numpy(), np.float64), (ta * tb).to(torch.float64).numpy())


def test_complex_matches_torch():
    rng = np.random.default_rng(4)
    a = (rng.standard_normal(16) + 1j * rng.standard_normal(16)).astype(np.complex64)
    b = (rng.standard_normal(16) + 1j * rng.standard_normal(16)).astype(np.complex64)
    a[0], b[0] = 1 + 1j, 0
    ta, tb, na, nb = as_torch(a), as_torch(b), to_nbx(a), to_nbx(b)
    for got, expected in ((na / nb, ta / tb), (na * nb, ta * tb), (nbx.exp(na), torch.exp(ta)),
                          (nbx.abs(na), torch.abs(ta)), (nbx.angle(na), torch.angle(ta))):
        g, e = got.numpy(), expected.numpy()
        assert g.dtype == e.dtype
        finite = np.isfinite(e)
        np.testing.assert_allclose(g[finite], e[finite], rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(np.isfinite(g), finite)
    assert math.isclose(abs(complex(nbx.abs(to_nbx(np.array([3 + 4j], np.complex64))).item())), 5.0)


def test_sgn_of_complex_matches_torch():
    inf, nan = math.inf, math.nan
    for dtype in (np.complex64, np.complex128):
        z = np.array([3 + 4j, 1 + 1j, 0.1 + 0.7j, 0j, complex(-0.0, 0.0), complex(inf, 1), complex(nan, 0),
                      complex(1e30, -1e30), -2j], dtype)
        got = nbx.sgn(to_nbx(z)).numpy()
        magnitude = np.abs(z)
        with np.errstate(all="ignore"):
            reference = np.where(magnitude == 0, 0, (z.real / magnitude) + 1j * (z.imag / magnitude)).astype(dtype)
        assert got.dtype == reference.dtype
        # |z| from hypot, within an ulp on every device; NaN where the reference has NaN, exact zeros
        np.testing.assert_allclose(got, reference, rtol=2 * np.finfo(dtype).eps, atol=0)
        assert np.array_equal(got == 0, reference == 0)
        # torch's CPU kernel divides directly in its vector loop and by complex division in its tail, so
        # its last bit depends on an element's position: compared within an ulp
        expected = torch.sgn(as_torch(z)).numpy()
        finite = np.isfinite(expected)
        np.testing.assert_allclose(got[finite], expected[finite], rtol=2 * np.finfo(dtype).eps)


@pytest.mark.parametrize("dtype", DTYPES + ["complex64"])
def test_masked_fill_matches_torch(dtype):
    rng = np.random.default_rng(7)
    a = (rng.standard_normal((3, 4)) * 3).astype(nbx.get_dtype(dtype).numpy)
    mask = rng.standard_normal((1, 4)) > 0
    values = [2, -1, 2.5, True, 0.0, np.array(3.5, np.float32), np.array(-2, np.int64)]
    if dtype == "complex64":
        values.append(1 - 2j)
    for value in values:
        t_value = as_torch(value) if isinstance(value, np.ndarray) else value
        n_value = to_nbx(value) if isinstance(value, np.ndarray) else value
        try:
            expected = as_torch(a).masked_fill(as_torch(mask), t_value)
        except RuntimeError:
            with pytest.raises(RuntimeError):
                to_nbx(a).masked_fill(to_nbx(mask), n_value)
            continue
        got = to_nbx(a).masked_fill(to_nbx(mask), n_value)
        assert got.dtype.name == _torch_dtype_name(expected), (dtype, value)
        e = expected.to(torch.float32).numpy() if dtype == "bfloat16" else expected.numpy()
        np.testing.assert_array_equal(np.asarray(got.numpy(), e.dtype), e)
        inplace = to_nbx(a)
        assert inplace.masked_fill_(to_nbx(mask), n_value) is inplace
        np.testing.assert_array_equal(np.asarray(inplace.numpy(), e.dtype), e)


def test_masked_fill_errors_match_torch():
    x, mask = np.zeros(3, np.float32), np.array([True, False, True])
    cases = [
        (x.astype(np.int8), mask, 300),                 # overflow of the value
        (x, mask.astype(np.int64), 1),                  # a mask that is not bool
        (x, mask, np.array([1.0], np.float32)),         # a value tensor with dims
        (x, np.ones((2, 3), bool), 1.0),                # in place: the mask broadcasts to the input only
        (x, mask, 1 + 2j),                              # a complex value for a real tensor
    ]
    for a, m, value in cases:
        t_value = as_torch(value) if isinstance(value, np.ndarray) else value
        n_value = to_nbx(value) if isinstance(value, np.ndarray) else value
        with pytest.raises(RuntimeError):
            as_torch(a).masked_fill_(as_torch(m), t_value)
        with pytest.raises(RuntimeError):
            to_nbx(a).masked_fill_(to_nbx(m), n_value)
    grown = to_nbx(x).masked_fill(to_nbx(np.ones((2, 3), bool)), 1.0)
    assert tuple(grown.shape) == (2, 3) and grown.numpy().tolist() == [[1.0] * 3] * 2


def test_where_of_complex_matches_torch():
    rng = np.random.default_rng(8)
    cond = rng.standard_normal((2, 3)) > 0
    z = (rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3))).astype(np.complex64)
    r = rng.standard_normal((1, 3)).astype(np.float64)
    for other, n_other in ((as_torch(r), to_nbx(r)), (1 - 1j, 1 - 1j), (2, 2)):
        expected = torch.where(as_torch(cond), as_torch(z), other)
        got = nbx.where(to_nbx(cond), to_nbx(z), n_other)
        assert got.dtype.name == _torch_dtype_name(expected)
        np.testing.assert_array_equal(got.numpy(), expected.numpy())
        expected = torch.where(as_torch(cond), other, as_torch(z).T.contiguous().T)
        got = nbx.where(to_nbx(cond), n_other, to_nbx(z))
        np.testing.assert_array_equal(got.numpy(), expected.numpy())
