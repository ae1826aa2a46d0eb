"""torch.fft's transforms against NumPy's float64 FFT (pocketfft, an independent implementation): every
length kind (one stage, two stages, the four-step's two passes, Bluestein), every transform of the table
in one, two and n dims, n and s padding and truncation, norms, layouts, dtypes, round trips, torch's
errors, and the workspace each declares (graph runs on a strict arena).

Tolerance. An FFT's rounding error in a component is a few units of the data's epsilon times log2 n times
the row's 2-norm (the 2-norm of the error vector grows as log n relative to the output's, whose 2-norm is
sqrt(n) times the input's; spread over n components). ``bound`` allows 4 eps log2 n ||x||_2 a component;
the kernel measures below 1.7 eps log2 n ||x||_2 on every length here, in float32 and float64."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import nbxtensor as nbx
from nbxtensor.graph import arena
from nbxtensor.ops import fft as F
from nbxtensor.ops import plans

from .conftest import TEST_DEVICE, cpu_kernels, examples, to_nbx
from .test_stft import _Input, _run_graph


LENGTHS = (1, 2, 3, 5, 7, 8, 12, 16, 17, 30, 64, 97, 100, 128, 255, 256, 1000)
EPS = {"float32": np.finfo(np.float32).eps, "float64": np.finfo(np.float64).eps}


def _random(rng, shape, dtype):
    if np.dtype(dtype).kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(-3, 4, size=shape).astype(dtype)


def assert_close_fft(got, expected, x, n, axes=None):
    """``got`` within 4 eps log2 n of ``expected`` (NumPy's float64) times the input's 2-norm over the
    transformed axes (module docstring), eps the result's component epsilon; shapes and kinds must match."""
    got = got.numpy() if isinstance(got, nbx.Tensor) else got
    assert got.shape == expected.shape, (got.shape, expected.shape)
    assert (got.dtype.kind == "c") == (np.asarray(expected).dtype.kind == "c"), (got.dtype, expected.dtype)
    eps = EPS["float64" if got.dtype in (np.float64, np.complex128) else "float32"]
    x = np.asarray(x, dtype=np.complex128)
    norm = np.sqrt(np.sum(np.abs(x) ** 2, axis=axes)).max() if x.size else 0.0
    bound = 4 * eps * math.log2(max(n, 2)) * max(norm, 1.0)
    np.testing.assert_allclose(got, expected, rtol=0, atol=bound)


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_fft_and_ifft_of_every_length_kind(n, dtype, rng):
    x = _random(rng, (3, n), dtype)
    wide = x.astype(np.complex128)
    assert_close_fft(nbx.fft.fft(to_nbx(x)), np.fft.fft(wide), x, n, axes=-1)
    assert_close_fft(nbx.fft.ifft(to_nbx(x), norm="forward"), np.fft.ifft(wide, norm="forward"), x, n, axes=-1)


@pytest.mark.parametrize("n", [2, 7, 30, 97, 100, 255])
def test_real_transforms_of_every_length_kind(n, rng):
    x = _random(rng, (2, n), "float32")
    wide = x.astype(np.float64)
    spectrum = np.fft.rfft(wide)
    assert_close_fft(nbx.fft.rfft(to_nbx(x)), spectrum, x, n, axes=-1)
    assert_close_fft(nbx.fft.irfft(to_nbx(spectrum.astype(np.complex64)), n=n),
                     np.fft.irfft(spectrum.astype(np.complex64).astype(np.complex128), n=n), spectrum / math.sqrt(n),
                     n, axes=-1)
    assert_close_fft(nbx.fft.hfft(to_nbx(spectrum.astype(np.complex64)), n=n, norm="ortho"),
                     np.fft.hfft(spectrum.astype(np.complex64), n=n, norm="ortho"), spectrum, n, axes=-1)
    assert_close_fft(nbx.fft.ihfft(to_nbx(x)), np.fft.ihfft(wide), x, n, axes=-1)


@pytest.mark.parametrize("n", [1024, 8192, 4099])
def test_long_rows_take_two_passes_or_bluestein(n, rng):
    """1024 is one pass of two 32-point stages, 8192 the four-step's two passes, 4099 (prime) Bluestein's
    convolution of 16384 points in two passes each way; real and one-sided Hermitian rows too."""
    x = _random(rng, (1, n), "complex64")
    assert_close_fft(nbx.fft.fft(to_nbx(x)), np.fft.fft(x.astype(np.complex128)), x, n, axes=-1)
    real = x.real.copy()
    assert_close_fft(nbx.fft.rfft(to_nbx(real)), np.fft.rfft(real.astype(np.float64)), real, n, axes=-1)
    half = x[:, :n // 2 + 1]
    assert_close_fft(nbx.fft.irfft(to_nbx(half), n=n, norm="ortho"),
                     np.fft.irfft(half.astype(np.complex128), n=n, norm="ortho"), half, n, axes=-1)


def test_plans_of_each_length_kind():
    assert F._method(32) == F._Method((32,), 0)
    assert F._method(64).passes == (64,) and F._stages(64) in ((2, 32), (4, 16), (8, 8), (16, 4), (32, 2))
    assert math.prod(F._tile(*F._stages(500))) == 1024  # 500 = 20 x 25 (or 25 x 20): 32 x 32 lanes
    assert F._method(8192).passes == (256, 32) and not F._method(8192).bluestein
    assert F._method(97) == F._Method((256,), 256)
    assert F._method(1 << 20).passes == (1024, 1024)
    assert len(F._method(10 ** 6).passes) == 3 and not F._method(10 ** 6).bluestein  # 1000 has no 32 x 32 split
    assert F._method(16777259).bluestein == 1 << 26
    with pytest.raises(NotImplementedError, match="length 536870923"):
        F._method(536870923)


REPLAYED = [
    ("fft", lambda x: nbx.fft.fft(x), (3, 16), "complex64"),                      # one launch, source to output
    ("rfft of integers", lambda x: nbx.fft.rfft(x), (2, 12), "int32"),          # converted first
    ("fft2 padded", lambda x: nbx.fft.fft2(x, s=(6, 5)), (4, 5), "complex128"),  # a buffer zeroed first
    ("irfft2", lambda x: nbx.fft.irfft2(x, s=(4, 6)), (4, 4), "complex64"),      # a staged buffer, Hermitian
    ("two passes", lambda x: nbx.fft.ifft(x, norm="ortho"), (2, 2048), "complex64"),
    ("bluestein", lambda x: nbx.fft.hfft(x, n=37, dim=0), (19, 3), "complex64"),
    ("primitive", lambda x: F.fft_r2c.impl(x, [0, 1], 2, True), (3, 6), "float64"),
]


@pytest.mark.parametrize("name, call, shape, dtype", REPLAYED, ids=[case[0] for case in REPLAYED])
def test_a_layout_s_later_calls_replay_its_first_call_s_launches(name, call, shape, dtype, monkeypatch, rng):
    """The first call of a layout runs the general path and records it; later calls of that layout, on other
    tensors (one at an offset in its storage), run the recorded launches without it."""
    first = _random(rng, shape, dtype)
    later = _random(rng, (2, *shape), dtype)
    expected = []
    for x in (later[1], first):  # each as a first call computes it, ``first``'s plan kept
        plans.clear_all()
        expected.insert(0, call(to_nbx(x)).numpy())
    monkeypatch.setattr(F, "_execute", lambda plan, x: pytest.fail("a replayed call ran the general path"))
    twice = to_nbx(later)
    for x, want in zip((to_nbx(first), twice[1]), expected):
        got = call(x)
        np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("form", [F.DENSE, F.RADIX])
def test_every_form_of_a_power_of_two_pass_computes_the_transform(form, monkeypatch, rng):
    """A power-of-two pass is timed in both forms on a GPU; the interpreter takes the first: each forced in
    turn, over one-stage, two-stage and two-pass lengths, real, Hermitian and complex rows, both widths."""
    assert [config["FORM"] for config in F._forms(256)] == [F.RADIX, F.DENSE] and F._forms(12) == [{"FORM": F.DENSE}]
    monkeypatch.setattr(F.tuning, "choose_timed", lambda key, facts, candidates, prepare: {"FORM": form})
    stages, issue = [], F.issue_planned

    def recording(kernel, grid, device, args, **constexprs):
        stages.append(constexprs["RADIX_STAGES"])
        issue(kernel, grid, device, args, **constexprs)
    monkeypatch.setattr(F, "issue_planned", recording)
    plans.clear_all()
    for n, dtype in ((16, "complex64"), (1024, "complex128"), (8192, "complex64")):
        x = _random(rng, (2, n), dtype)
        assert_close_fft(nbx.fft.ifft(to_nbx(x)), np.fft.ifft(x.astype(np.complex128)), x, n, axes=-1)
    real = _random(rng, (3, 64), "float64")
    assert_close_fft(nbx.fft.rfft(to_nbx(real)), np.fft.rfft(real), real, 64, axes=-1)
    half = _random(rng, (2, 17), "complex64")
    assert_close_fft(nbx.fft.irfft(to_nbx(half)), np.fft.irfft(half.astype(np.complex128)), half, 32, axes=-1)
    radix = [4, 10, 8, 5, 6, 5]  # the passes' log2 lengths: 8192 = 256 x 32
    assert stages == (radix if form == F.RADIX else [0] * len(radix))
    plans.clear_all()


@pytest.fixture
def small_passes(monkeypatch):
    """Stages of at most 8 points, so passes of at most 64: lengths of a few thousand take three passes."""
    cached = (F._stages, F._passes, F._method)
    for function in cached:
        function.cache_clear()
    monkeypatch.setattr(F, "STAGE_MAX", 8)
    monkeypatch.setattr(F, "PASS_MAX", 64)
    plans.clear_all()  # calls of layouts planned under the usual stages
    yield
    for function in cached:
        function.cache_clear()
    plans.clear_all()


@pytest.mark.parametrize("n", [3000, 2053])
def test_three_passes_and_bluestein_through_them(small_passes, n, rng):
    """3000 = 40 x 15 x 5 takes three passes, the last two on the first's rows (and a one-sided output
    through a whole workspace); the prime 2053 Bluestein's 8192 = 64 x 64 x 2, its tables applied after."""
    method = F._method(n)
    assert len(method.passes) == 3 and bool(method.bluestein) == (n == 2053)
    x = _random(rng, (2, n), "complex64")
    assert_close_fft(nbx.fft.fft(to_nbx(x)), np.fft.fft(x.astype(np.complex128)), x, n, axes=-1)
    real = x.real.copy()
    assert_close_fft(nbx.fft.rfft(to_nbx(real), norm="ortho"), np.fft.rfft(real.astype(np.float64), norm="ortho"),
                     real, n, axes=-1)
    half = x[:, :n // 2 + 1]
    assert_close_fft(nbx.fft.irfft(to_nbx(half), n=n), np.fft.irfft(half.astype(np.complex128), n=n), half, n,
                     axes=-1)


TRANSFORMS_1D = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]


def _input_for(name, rng, shape, dtype=None):
    if dtype is None:
        dtype = "complex64" if name in ("fft", "ifft", "irfft", "hfft") else "float32"
    return _random(rng, shape, dtype)


@pytest.mark.parametrize("name", TRANSFORMS_1D)
@pytest.mark.parametrize("n, dim, norm", [(None, -1, None), (5, 0, "ortho"), (12, 1, "forward"), (3, -1, "backward")])
def test_one_dim_transforms_pad_truncate_and_normalize(name, n, dim, norm, rng):
    x = _input_for(name, rng, (4, 7))
    expected = getattr(np.fft, name)(x.astype(np.complex128 if x.dtype.kind == "c" else np.float64), n=n, axis=dim,
                                     norm=norm)
    got = getattr(nbx.fft, name)(to_nbx(x), n=n, dim=dim, norm=norm)
    assert_close_fft(got, expected, x, max(n or 7, 7), axes=dim)
    assert got.dtype.name == ("float32" if name in ("irfft", "hfft") else "complex64")


def _numpy_several(name, x, s, axes, norm):
    x = x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)
    if name == "hfft":
        head = np.fft.fftn(x, s=s and s[:-1], axes=axes[:-1], norm=norm) if len(axes) > 1 else x
        return np.fft.hfft(head, n=s and s[-1], axis=axes[-1], norm=norm)
    if name == "ihfft":
        last = np.fft.ihfft(x, n=s and s[-1], axis=axes[-1], norm=norm)
        return np.fft.ifftn(last, s=s and s[:-1], axes=axes[:-1], norm=norm) if len(axes) > 1 else last
    return getattr(np.fft, name + "n")(x, s=s, axes=axes, norm=norm)


@pytest.mark.parametrize("name", TRANSFORMS_1D)
@pytest.mark.parametrize("s, dim, norm", [(None, None, None), ((3, 9), (0, 2), "ortho"), ((4, 2, 6), None, "forward"),
                                          (None, (2, 0), None), ((5,), (1,), "backward")])
def test_n_dim_transforms_over_dims_subsets(name, s, dim, norm, rng):
    x = _input_for(name, rng, (3, 4, 5))
    axes = list(dim) if dim is not None else list(range(3 - len(s), 3)) if s is not None else [0, 1, 2]
    expected = _numpy_several(name, x, None if s is None else list(s), axes, norm)
    got = getattr(nbx.fft, name + "n")(to_nbx(x), s=s, dim=dim, norm=norm)
    assert_close_fft(got, expected, x, 64, axes=tuple(axes))


@pytest.mark.parametrize("name", TRANSFORMS_1D)
def test_two_dim_transforms_default_to_the_last_two_dims(name, rng):
    x = _input_for(name, rng, (2, 6, 5))
    assert_close_fft(getattr(nbx.fft, name + "2")(to_nbx(x)), _numpy_several(name, x, None, [1, 2], None), x, 30,
                     axes=(1, 2))
    assert_close_fft(getattr(nbx.fft, name + "2")(to_nbx(x), s=(4, 8), dim=(0, 2), norm="ortho"),
                     _numpy_several(name, x, [4, 8], [0, 2], "ortho"), x, 32, axes=(0, 2))


@pytest.mark.parametrize("layout", ["transposed", "sliced", "negative", "offset"])
@pytest.mark.parametrize("name", ["fft", "rfft", "irfft"])
def test_non_contiguous_and_negative_stride_inputs(layout, name, rng):
    x = _input_for(name, rng, (6, 10))
    view = {"transposed": lambda t: t.T, "sliced": lambda t: t[:, ::2], "negative": lambda t: nbx.flip(t, [0, 1]),
            "offset": lambda t: t[2:, 3:]}[layout]
    array = {"transposed": lambda a: a.T, "sliced": lambda a: a[:, ::2], "negative": lambda a: a[::-1, ::-1],
             "offset": lambda a: a[2:, 3:]}[layout](x)
    got = getattr(nbx.fft, name)(view(to_nbx(x)), dim=0)
    expected = getattr(np.fft, name)(array.astype(np.complex128 if x.dtype.kind == "c" else np.float64), axis=0)
    assert_close_fft(got, expected, array, 16, axes=0)
    got = getattr(nbx.fft, name + "n")(view(to_nbx(x)))
    assert_close_fft(got, _numpy_several(name, array, None, [0, 1], None), array, 64)


@pytest.mark.parametrize("dtype, expected", [("float32", "complex64"), ("float64", "complex128"),
                                             ("complex128", "complex128"), ("int64", "complex64"),
                                             ("int32", "complex64"), ("bool", "complex64"), ("uint8", "complex64")])
def test_dtypes_promote_as_torch(dtype, expected, rng):
    x = _random(rng, (2, 6), dtype) if dtype != "bool" else rng.random((2, 6)) < 0.5
    got = nbx.fft.fft(to_nbx(x))
    assert got.dtype.name == expected
    assert_close_fft(got, np.fft.fft(x.astype(np.complex128)), x, 6, axes=-1)
    real = nbx.fft.irfft(to_nbx(x))
    assert real.dtype.name == {"complex64": "float32", "complex128": "float64"}[expected]


def test_default_float_dtype_decides_integer_promotion():
    x = nbx.tensor(np.arange(5))
    previous = nbx.get_default_dtype()
    try:
        nbx.set_default_dtype(nbx.float64)
        assert nbx.fft.fft(x).dtype is nbx.complex128
    finally:
        nbx.set_default_dtype(previous)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_inputs_are_refused_as_torch_refuses_them_on_the_cpu(dtype):
    x = nbx.ones(8, dtype=getattr(nbx, dtype))
    for name in ("fft", "rfft", "irfft", "fftn", "hfft2"):
        with pytest.raises(RuntimeError, match=f"Unsupported dtype {dtype}"):
            getattr(nbx.fft, name)(x)


def test_round_trips(rng):
    x = _random(rng, (3, 31), "complex64")
    np.testing.assert_allclose(nbx.fft.ifft(nbx.fft.fft(to_nbx(x))).numpy(), x, atol=2e-6)
    np.testing.assert_allclose(nbx.fft.ifftn(nbx.fft.fftn(to_nbx(x), norm="ortho"), norm="ortho").numpy(), x,
                               atol=2e-6)
    real = x.real.copy()
    for n in (30, 31):
        np.testing.assert_allclose(nbx.fft.irfft(nbx.fft.rfft(to_nbx(real[:, :n])), n=n).numpy(), real[:, :n],
                                   atol=2e-6)
    np.testing.assert_allclose(nbx.fft.hfft(nbx.fft.ihfft(to_nbx(real)), n=31).numpy(), real, atol=2e-6)
    np.testing.assert_allclose(nbx.fft.irfft2(nbx.fft.rfft2(to_nbx(real)), s=real.shape).numpy(), real, atol=2e-6)


def test_hermitian_inputs_ignore_the_imaginary_parts_of_their_real_bins(rng):
    """A one-sided spectrum's bins 0 and n / 2 are real in a Hermitian signal: their imaginary parts are
    dropped, as pocketfft and torch drop them."""
    spectrum = _random(rng, (2, 5), "complex64")
    for n in (8, 9):
        assert_close_fft(nbx.fft.irfft(to_nbx(spectrum), n=n), np.fft.irfft(spectrum.astype(np.complex128), n=n),
                         spectrum, n, axes=-1)


def test_empty_and_zero_dim_inputs():
    assert tuple(nbx.fft.fft(nbx.zeros(0, 4)).shape) == (0, 4)
    assert tuple(nbx.fft.rfft(nbx.zeros(3, 0, 4), dim=-1).shape) == (3, 0, 3)
    np.testing.assert_array_equal(nbx.fft.fft(nbx.zeros(0), n=3).numpy(), np.zeros(3, np.complex64))
    assert nbx.fft.fftn(nbx.tensor(2.0)).numpy() == 2
    assert nbx.fft.fftn(nbx.ones(2, 3), dim=()).dtype is nbx.complex64


def test_out_writes_the_result(rng):
    x = _random(rng, (3, 8), "float32")
    out = nbx.empty(3, 5, dtype=nbx.complex64)
    assert nbx.fft.rfft(to_nbx(x), out=out) is out
    assert_close_fft(out, np.fft.rfft(x.astype(np.float64)), x, 8, axes=-1)
    grown = nbx.empty(0, dtype=nbx.complex128)
    nbx.fft.fft2(to_nbx(x.astype(np.float64)), out=grown)
    assert tuple(grown.shape) == (3, 8)


@pytest.mark.parametrize("call, error, message", [
    (lambda x, c: nbx.fft.fft(x, n=0), RuntimeError, r"Invalid number of data points \(0\) specified"),
    (lambda x, c: nbx.fft.fft(x, n=-2), RuntimeError, r"Invalid number of data points \(-2\) specified"),
    (lambda x, c: nbx.fft.fft(x, dim=2), IndexError, "Dimension out of range"),
    (lambda x, c: nbx.fft.fft(x, dim=(0,)), TypeError, "argument 'dim' must be int"),
    (lambda x, c: nbx.fft.fft(nbx.tensor(1.0)), IndexError, "tensor has no dimensions"),
    (lambda x, c: nbx.fft.rfft(c), RuntimeError, "rfft expects a real input tensor, but got complex64"),
    (lambda x, c: nbx.fft.ihfft2(c), RuntimeError, "ihfft2 expects a real-valued input tensor"),
    (lambda x, c: nbx.fft.irfft(c[:, :1]), RuntimeError, r"Invalid number of data points \(0\) specified"),
    (lambda x, c: nbx.fft.hfftn(c[:, :1]), RuntimeError, r"Invalid number of data points \(0\) specified"),
    (lambda x, c: nbx.fft.fft(x, norm="bad"), RuntimeError, 'Invalid normalization mode: "bad"'),
    (lambda x, c: nbx.fft.fftn(x, dim=(0, -2)), RuntimeError, "FFT dims must be unique"),
    (lambda x, c: nbx.fft.fftn(x, s=(2,), dim=(0, 1)), RuntimeError, "dim and shape arguments must have the same"),
    (lambda x, c: nbx.fft.fftn(x, s=(2, 2, 2)), RuntimeError, "Got shape with 3 values but input tensor only has 2"),
    (lambda x, c: nbx.fft.fft2(x, s=(0, 2)), RuntimeError, r"Invalid number of data points \(0\) specified"),
    (lambda x, c: nbx.fft.rfftn(x, dim=()), RuntimeError, "rfftn must transform at least one axis"),
    (lambda x, c: nbx.fft.irfftn(c, dim=[]), RuntimeError, "irfftn must transform at least one axis"),
    (lambda x, c: nbx.fft.rfft2(x[0]), IndexError, "Dimension out of range"),
    (lambda x, c: nbx.fft.fftfreq(-1), RuntimeError, "negative dimension -1"),
    (lambda x, c: nbx.fft.fftfreq(4, dtype=nbx.int64), RuntimeError, "requires a floating point or complex dtype"),
    (lambda x, c: nbx.fft.fftshift(x, dim=3), IndexError, "Dimension out of range"),
    (lambda x, c: nbx.fft.fft(x, n=536870923), NotImplementedError, "an FFT of length 536870923 is not supported"),
])
def test_bad_arguments_raise_torch_errors(call, error, message, rng):
    x, c = nbx.ones(3, 4), nbx.ones(3, 4, dtype=nbx.complex64)
    with pytest.raises(error, match=message):
        call(x, c)


def test_fftfreq_and_rfftfreq():
    for n, d in ((5, 1.0), (8, 0.25), (1, 2.0)):
        np.testing.assert_allclose(nbx.fft.fftfreq(n, d).numpy(), np.fft.fftfreq(n, d), rtol=1e-7)
        np.testing.assert_allclose(nbx.fft.rfftfreq(n, d, dtype=nbx.float64).numpy(), np.fft.rfftfreq(n, d),
                                   rtol=1e-15)
    assert nbx.fft.fftfreq(0).shape == (0,)
    assert np.isnan(nbx.fft.rfftfreq(0).numpy()).all()  # 0 times 1 / 0, as torch computes it
    assert nbx.fft.fftfreq(4, device=TEST_DEVICE, dtype=nbx.complex128).dtype is nbx.complex128


@pytest.mark.parametrize("name", ["fftshift", "ifftshift"])
def test_shifts(name, rng):
    x = _random(rng, (3, 4, 5), "float32")
    for dim in (None, 1, (0, 2), -1):
        np.testing.assert_array_equal(getattr(nbx.fft, name)(to_nbx(x), dim=dim).numpy(),
                                      getattr(np.fft, name)(x, axes=dim))


def test_aten_primitives(rng):
    c = _random(rng, (3, 4, 5), "complex64")
    x = c.real.copy()
    op = nbx.ops.registry.get
    assert_close_fft(op("_fft_c2c").impl(to_nbx(c), [0, 2], 1, False),
                     np.fft.ifftn(c.astype(np.complex128), axes=[0, 2], norm="ortho"), c, 15)
    assert_close_fft(op("_fft_r2c").impl(to_nbx(x), [1, 2], 2, True),
                     np.fft.rfftn(x.astype(np.float64), axes=[1, 2], norm="forward"), x, 20)
    assert_close_fft(op("_fft_r2c").impl(to_nbx(x), [1], 0, False), np.fft.fft(x.astype(np.float64), axis=1), x, 4)
    assert_close_fft(op("_fft_c2r").impl(to_nbx(c), [0, 2], 0, 8),
                     np.fft.irfftn(c.astype(np.complex128), s=[3, 8], axes=[0, 2], norm="forward"), c, 24)
    with pytest.raises(RuntimeError, match="_fft_c2c expects a complex input tensor"):
        op("_fft_c2c").impl(to_nbx(x), [0], 0, True)


@cpu_kernels  # a GPU compiles these kernels for minutes
def test_float32_products_on_bfloat16_parts_keep_float32_accuracy(monkeypatch, rng):
    """Where the facts ask for it the stages multiply float32 tiles as their bfloat16 parts' six products: as
    accurate as float32 FMA (the interpreter runs the same form)."""
    monkeypatch.setattr(F, "_precision", lambda component, device: (
        F.PRECISION_BF16_PARTS.value if component.name == "float32" else "ieee"))
    plans.clear_all()  # calls of these layouts planned in IEEE float32
    for n in (12, 100, 2048):
        x = _random(rng, (2, n), "complex64")
        assert_close_fft(nbx.fft.fft(to_nbx(x)), np.fft.fft(x.astype(np.complex128)), x, n, axes=-1)
    x = _random(rng, (2, 97), "float32")
    assert_close_fft(nbx.fft.rfft(to_nbx(x)), np.fft.rfft(x.astype(np.float64)), x, 97, axes=-1)
    plans.clear_all()


@settings(max_examples=examples(25), deadline=None)
@given(data=st.data())
def test_random_shapes_dims_and_sizes_match_numpy(data):
    ndim = data.draw(st.integers(1, 3))
    shape = tuple(data.draw(st.lists(st.integers(1, 9), min_size=ndim, max_size=ndim)))
    name = data.draw(st.sampled_from(TRANSFORMS_1D))
    dims = data.draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True))
    sizes = data.draw(st.one_of(st.none(), st.lists(st.integers(1, 12), min_size=len(dims), max_size=len(dims))))
    norm = data.draw(st.sampled_from([None, "forward", "ortho"]))
    if name in ("irfft", "hfft") and sizes is None and shape[dims[-1]] == 1:
        sizes = [shape[d] for d in dims[:-1]] + [2]
    x = _input_for(name, np.random.default_rng(data.draw(st.integers(0, 2 ** 16))), shape)
    expected = _numpy_several(name, x, sizes, dims, norm)
    got = getattr(nbx.fft, name + "n")(to_nbx(x), s=sizes, dim=dims, norm=norm)
    assert_close_fft(got, expected, x, 16, axes=tuple(dims))


@pytest.mark.parametrize("overload, n", [("aten::fft_rfft.default", 3000), ("aten::fft_ifft.default", 2053)])
def test_three_pass_graph_steps_stay_inside_their_declared_workspace(tmp_path, monkeypatch, small_passes, overload,
                                                                     n, rng):
    """Three passes: a one-sided output through a whole workspace, Bluestein's tables applied after."""
    monkeypatch.setattr(arena, "strict", True)
    x = to_nbx(rng.standard_normal((2, n)).astype(np.float32))
    op = nbx.ops.registry.lookup(overload)
    expected = op.impl(x)
    got = _run_graph(tmp_path, overload, [x], [_Input(0)], {}, expected.shape, expected.dtype.name)
    np.testing.assert_array_equal(got.numpy(), expected.numpy())


_KEYED_CALLS = [  # (op, its arguments, the input's shape and dtype, the timed passes it forms)
    ("fft.fft", lambda x: (x,), (3, 256), "complex64", 1),      # one pass: radix or dense, timed
    ("fft.ifft", lambda x: (x,), (2, 4096), "complex64", 2),    # two passes of 64
    ("fft.fft", lambda x: (x,), (2, 37), "complex64", 2),       # Bluestein: two transforms of 128
    ("fft.rfft", lambda x: (x, 100), (2, 100), "float32", 0),   # dense stages only: no key
    ("fft.irfft2", lambda x: (x,), (3, 8, 5), "complex128", 2),
    ("stft", lambda x: (x, 512, 128, None, None, True, "reflect", False, None, True), (2, 2000), "float32", 1),
    ("stft", lambda x: (x, 400, 160, None, None, True, "reflect", False, None, True), (2, 2000), "float32", 0),
    ("istft", lambda x: (x, 64), (2, 33, 20), "complex64", 1),
]


@pytest.mark.parametrize("name,arguments,shape,dtype,timed", _KEYED_CALLS,
                         ids=[f"{name}-{'x'.join(map(str, shape))}" for name, _, shape, _, _ in _KEYED_CALLS])
def test_key_rules_name_the_keys_a_call_forms(name, arguments, shape, dtype, timed):
    """A transform's key rule gives, from the shapes alone, the tuned pass keys its call forms (the census and
    certification count on it)."""
    from nbxtensor import census
    from nbxtensor.device import backend_for, resolve
    from nbxtensor.ops import registry
    rng = np.random.default_rng(3)
    values = rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if dtype.startswith("complex") else 0)
    x = to_nbx(values.astype(dtype))
    op = registry.get(name)
    with census.shadow() as formed:
        op.impl(*arguments(x))
    assert len(formed) == timed
    assert op.key(backend_for(resolve(TEST_DEVICE)).facts, *arguments(x)) == list(formed)
