"""stft and istft against NumPy framing references (``ops/stft.py``'s samples: frames gathered by index,
windowed, NumPy's float64 transform; overlap-add one frame at a time), their errors in torch's words, and
the FFT ops' declared workspace: graph runs of one step on a strict arena (every temporary inside what the
cost rule declares)."""
import contextlib
import json

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor import graph
from nbxtensor.graph import arena
from nbxtensor.ops.stft import _istft_reference, _stft_reference

from .conftest import TEST_DEVICE, to_nbx


# float32 frames of at most 67 points: a few eps times log2 n of the frame's norm (tests/test_fft.py)
ATOL = 4e-6


def _close(got, expected, scale=1.0):
    got = got.numpy()
    assert got.shape == expected.shape, (got.shape, expected.shape)
    np.testing.assert_allclose(got, expected, rtol=0, atol=ATOL * scale)


@pytest.mark.parametrize("n_fft, hop, win, center, pad_mode, normalized, onesided", [
    (16, None, None, True, "reflect", False, None),
    (30, 7, 24, True, "constant", True, None),
    (25, 5, 25, True, "replicate", False, False),
    (12, 3, 10, False, "reflect", False, True),
    (20, 6, 20, True, "circular", False, None),
    (67, 9, 60, True, "reflect", False, None),  # a prime frame: Bluestein's convolution, the window in its chirp
])
def test_stft_matches_numpy_framing(n_fft, hop, win, center, pad_mode, normalized, onesided, rng):
    x = rng.standard_normal((2, 160)).astype(np.float32)
    window = np.hanning(win or n_fft).astype(np.float32) + 0.1
    kwargs = dict(hop_length=hop, win_length=win, center=center, pad_mode=pad_mode, normalized=normalized,
                  onesided=onesided, return_complex=True)
    got = nbx.stft(to_nbx(x), n_fft, window=to_nbx(window), **kwargs)
    expected = _stft_reference(x.astype(np.float64), n_fft, window=window.astype(np.float64), **kwargs)
    _close(got, expected, np.sqrt(n_fft))
    assert got.dtype is nbx.complex64


def test_stft_layout_dtypes_and_forms(rng):
    x = rng.standard_normal(100).astype(np.float32)
    spectrum = nbx.stft(to_nbx(x), 16, return_complex=True)
    assert tuple(spectrum.shape) == (9, 26) and spectrum.stride() == (1, 9)  # frames innermost, as torch lays it
    as_real = nbx.Tensor.stft(to_nbx(x), 16, return_complex=False)
    assert tuple(as_real.shape) == (9, 26, 2) and as_real.dtype is nbx.float32
    _close(as_real, _stft_reference(x.astype(np.float64), 16, return_complex=False), 4)
    wide = nbx.stft(to_nbx(x), 16, window=nbx.ones(16, dtype=nbx.float64), return_complex=True)
    assert wide.dtype is nbx.complex128
    z = (rng.standard_normal((2, 40)) + 1j * rng.standard_normal((2, 40))).astype(np.complex64)
    two_sided = nbx.stft(to_nbx(z), 8)
    assert tuple(two_sided.shape) == (2, 8, 21)
    _close(two_sided, _stft_reference(z.astype(np.complex128), 8), 4)


@pytest.mark.parametrize("window_length", [12, 16])  # padded to the frame, or read as it is
def test_stft_s_later_calls_replay_the_transform_s_launches(window_length, monkeypatch, rng):
    """A layout's first call plans the transform; later calls, with other signals and windows (one padded to
    the frame, or read as it is), replay its launches."""
    from nbxtensor.ops import plans, stft as stft_module
    plans.clear_all()
    kwargs = dict(n_fft=16, hop_length=5, win_length=window_length, return_complex=True)
    signals = rng.standard_normal((2, 2, 70)).astype(np.float32)
    windows = rng.uniform(0.5, 1.0, (2, window_length)).astype(np.float32)
    nbx.stft(to_nbx(signals[0]), window=to_nbx(windows[0]), **kwargs)
    monkeypatch.setattr(stft_module, "transform", lambda *a, **k: pytest.fail("a replayed call planned again"))
    got = nbx.stft(to_nbx(signals[1]), window=to_nbx(windows[1]), **kwargs)
    _close(got, _stft_reference(signals[1].astype(np.float64), window=windows[1].astype(np.float64), **kwargs), 4)


# frames read straight from the unpadded signal: every pad mode, center or not, odd and even frames (one pass,
# two passes, Bluestein's), hops that do not divide, windows shorter than the frame, 1-D and batched signals,
# float32/float64/complex inputs and windows of another dtype
@pytest.mark.parametrize("shape, dtype, n_fft, hop, win, center, pad_mode, window_dtype", [
    ((2, 90), "float32", 16, 5, 11, True, "reflect", "float32"),
    ((75,), "float32", 21, 4, 21, True, "constant", "float32"),
    ((3, 61), "float64", 20, 7, 15, True, "replicate", "float64"),
    ((2, 50), "float32", 15, 6, 10, True, "circular", None),
    ((2, 70), "complex64", 12, 5, 12, False, "reflect", "float32"),
    ((80,), "float32", 13, 3, 9, True, "reflect", "float64"),          # a float32 signal read as float64
    ((2, 300), "float32", 64, 50, 40, True, "replicate", "complex64"),
    ((1, 120), "float32", 37, 11, 30, True, "circular", None),         # Bluestein: the window of ones padded
    ((2, 1200), "float32", 1024, 300, 1000, True, "reflect", "float32"),
    ((1, 2500), "float32", 2048, 700, 2000, True, "constant", "float32"),  # two passes: the frame index grouped
    ((1700,), "float64", 1500, 170, 1500, True, "replicate", None),         # two passes of an even non-power
])
@pytest.mark.filterwarnings("ignore:A window was not provided")
def test_stft_reads_frames_from_the_unpadded_signal(shape, dtype, n_fft, hop, win, center, pad_mode, window_dtype,
                                                    rng):
    torch = pytest.importorskip("torch")
    x = rng.standard_normal(shape)
    if dtype.startswith("complex"):
        x = x + 1j * rng.standard_normal(shape)
    x = x.astype(dtype)
    window = None
    if window_dtype is not None:
        window = np.hanning(win + 2)[1:-1] + (0.3j if window_dtype.startswith("complex") else 0)
        window = window.astype(window_dtype)
    kwargs = dict(hop_length=hop, win_length=win, center=center, pad_mode=pad_mode, return_complex=True)
    got = nbx.stft(to_nbx(x), n_fft, window=None if window is None else to_nbx(window), **kwargs)
    expected = torch.stft(torch.from_numpy(x), n_fft, window=None if window is None else torch.from_numpy(window),
                          **kwargs)
    assert tuple(got.shape) == tuple(expected.shape) and got.stride() == expected.stride()
    assert got.dtype.name == str(expected.dtype).removeprefix("torch.")
    if len(shape) == 2 and window is not None:  # a transposed signal and a strided window read the same
        strided = nbx.stft(to_nbx(np.ascontiguousarray(x.T)).T, n_fft, window=to_nbx(np.repeat(window, 2))[::2],
                           **kwargs)
        np.testing.assert_array_equal(strided.numpy(), got.numpy())
    reference = _stft_reference(x.astype(np.complex128 if np.iscomplexobj(x) else np.float64), n_fft,
                                window=None if window is None else window.astype(np.complex128 if
                                                                                 np.iscomplexobj(window) else
                                                                                 np.float64), **kwargs)
    # float32's bound, or float64's as many of its eps; torch's own error as large again
    scale = np.sqrt(n_fft) * (np.finfo(np.float64).eps / np.finfo(np.float32).eps if got.dtype is nbx.complex128 else 1)
    _close(got, reference, scale)
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=0, atol=2 * ATOL * scale)


@contextlib.contextmanager
def _replays_only(monkeypatch):
    """Inside: an op run or a transform planned by the stft module fails the test; yields the kernels launched."""
    from nbxtensor.ops import plans, stft as stft_module
    with monkeypatch.context() as patched:
        patched.setattr(stft_module, "_op", lambda name: pytest.fail(f"a replayed call ran {name}"))
        patched.setattr(stft_module, "transform", lambda *a, **k: pytest.fail("a replayed call planned again"))
        issued = []
        launch_slots = plans.launch_slots
        patched.setattr(plans, "launch_slots", lambda *a: issued.append(a[0]) or launch_slots(*a))
        yield issued


def test_a_repeated_stft_is_its_launches_only(monkeypatch, rng):
    """A layout's later calls run no op and plan nothing: the one launch of a single-pass frame, and the two
    of a two-pass one."""
    from nbxtensor.ops import plans
    plans.clear_all()
    for n_fft, launches in ((400, 1), (2048, 2)):
        window = to_nbx(np.hanning(n_fft).astype(np.float32))
        signals = rng.standard_normal((2, 2, 3000)).astype(np.float32)
        nbx.stft(to_nbx(signals[0]), n_fft, 160, window=window, return_complex=True)
        with _replays_only(monkeypatch) as issued:
            got = nbx.stft(to_nbx(signals[1]), n_fft, 160, window=window, return_complex=True)
        assert len(issued) == launches
        expected = _stft_reference(signals[1].astype(np.float64), n_fft, 160, window=window.numpy().astype(np.float64),
                                   return_complex=True)
        _close(got, expected, np.sqrt(n_fft))


def test_a_repeated_istft_is_its_launches_and_the_envelope_check(monkeypatch, rng):
    """istft's later calls: the transform's pass and the overlap-add pass, no op; the envelope still checked."""
    from nbxtensor.ops import plans
    plans.clear_all()
    window = to_nbx(np.hanning(16).astype(np.float32) + 0.1)
    spectra = _spectra(rng, 2, 2, 9, 12)
    nbx.istft(to_nbx(spectra[0]), 16, 4, window=window, length=50)
    with _replays_only(monkeypatch) as issued:
        got = nbx.istft(to_nbx(spectra[1]), 16, 4, window=window, length=50)
        assert len(issued) == 2
        with pytest.raises(RuntimeError, match="window overlap add min"):
            nbx.istft(to_nbx(spectra[1]), 16, 4, window=nbx.zeros(16), length=50)
    expected = _istft_reference(spectra[1].astype(np.complex128), 16, 4, window=window.numpy().astype(np.float64),
                                length=50)
    _close(got, expected, 10)


@pytest.mark.parametrize("call, message", [
    (lambda x: nbx.stft(x, 16), "requires the return_complex parameter"),
    (lambda x: nbx.stft(x, 0, return_complex=True), r"expected 0 < n_fft < 100, but got n_fft=0"),
    (lambda x: nbx.stft(x, 101, center=False, return_complex=True), r"expected 0 < n_fft < 100"),
    (lambda x: nbx.stft(x, 16, hop_length=0, return_complex=True), "expected hop_length > 0"),
    (lambda x: nbx.stft(x, 16, win_length=17, return_complex=True), "expected 0 < win_length <= n_fft"),
    (lambda x: nbx.stft(x, 16, window=nbx.ones(15), return_complex=True), "window with size \\[15\\]"),
    (lambda x: nbx.stft(x.reshape(1, 2, 50), 16, return_complex=True), "expected a 1D or 2D tensor"),
    (lambda x: nbx.stft(x.long(), 16, return_complex=True), "floating point or complex values"),
    (lambda x: nbx.stft(x, 16, pad_mode="bogus", return_complex=True), "Unrecognised padding mode bogus"),
    (lambda x: nbx.stft(x[:8], 32, return_complex=True), "reflect padding"),
    (lambda x: nbx.stft(x.to(nbx.complex64), 16, onesided=True), "Cannot have onesided output"),
    (lambda x: nbx.stft(x.half(), 16, return_complex=True), "Unsupported dtype float16"),
])
def test_stft_errors(call, message):
    with pytest.raises((RuntimeError, NotImplementedError), match=message):
        call(nbx.ones(100))


def _spectra(rng, *shape, dtype=np.complex64):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


@pytest.mark.parametrize("n_fft, hop, win, center, normalized, length, onesided, return_complex", [
    (16, None, None, True, False, None, None, False),
    (16, 4, 12, True, True, 30, None, False),
    (16, 8, None, False, False, None, None, False),
    (12, 3, None, True, False, 60, None, False),
    (8, 2, None, True, False, None, False, True),
    (8, 2, 6, True, False, 18, False, False),
])
def test_istft_matches_numpy_overlap_add(n_fft, hop, win, center, normalized, length, onesided, return_complex, rng):
    frequencies = n_fft if onesided is False else n_fft // 2 + 1
    spectra = _spectra(rng, 2, frequencies, 9)
    window = np.hanning(win or n_fft).astype(np.float32) + 0.2
    kwargs = dict(hop_length=hop, win_length=win, center=center, normalized=normalized, length=length,
                  onesided=onesided, return_complex=return_complex)
    got = nbx.istft(to_nbx(spectra), n_fft, window=to_nbx(window), **kwargs)
    expected = _istft_reference(spectra.astype(np.complex128), n_fft, window=window.astype(np.float64), **kwargs)
    _close(got, expected, 10)


@pytest.mark.parametrize("spectra_dtype, window_dtype, strided, return_complex", [
    ("complex64", "float64", False, False),    # float32 frames summed in float64
    ("complex128", "float32", True, False),    # a strided window
    ("complex64", "complex64", False, True),   # a complex window: its envelope complex, by ops
])
def test_istft_windows_of_every_kind(spectra_dtype, window_dtype, strided, return_complex, rng):
    spectra = _spectra(rng, 9, 7, dtype=spectra_dtype) if return_complex else _spectra(rng, 2, 9, 7,
                                                                                         dtype=spectra_dtype)
    n_fft = 9 if return_complex else 16
    window = (np.hanning(14)[1:-1] + (0.2j if window_dtype.startswith("complex") else 0.2)).astype(window_dtype)
    ours = to_nbx(np.repeat(window, 2))[::2] if strided else to_nbx(window)
    kwargs = dict(hop_length=3, win_length=12, onesided=False if return_complex else None, length=22,
                  return_complex=return_complex)
    if return_complex:
        kwargs.update(win_length=8, hop_length=2, length=15)
        window, ours = window[:8], to_nbx(window[:8])
    got = nbx.istft(to_nbx(spectra), n_fft, window=ours, **kwargs)
    expected = _istft_reference(spectra.astype(np.complex128), n_fft, window=window.astype(
        np.complex128 if window_dtype.startswith("complex") else np.float64), **kwargs)
    assert got.dtype.name == {("complex64", "float64"): "float64", ("complex128", "float32"): "float64",
                              ("complex64", "complex64"): "complex64"}[spectra_dtype, window_dtype]
    _close(got, expected, 10)


def test_istft_inverts_stft(rng):
    x = rng.standard_normal((3, 120)).astype(np.float32)
    window = nbx.tensor(np.hanning(32).astype(np.float32) + 0.1)
    spectra = nbx.stft(to_nbx(x), 32, 8, window=window, return_complex=True)
    np.testing.assert_allclose(nbx.istft(spectra, 32, 8, window=window, length=120).numpy(), x, atol=2e-5)
    one = nbx.Tensor.istft(spectra[0], 32, 8, window=window)
    assert tuple(one.shape) == (120,)
    complex_x = (x + 1j * x[::-1]).astype(np.complex64)
    spectra = nbx.stft(to_nbx(complex_x), 16, 4, return_complex=True)
    np.testing.assert_allclose(nbx.istft(spectra, 16, 4, return_complex=True, length=120).numpy(), complex_x,
                               atol=2e-5)


@pytest.mark.parametrize("call, message", [
    (lambda s: nbx.istft(s.real.contiguous(), 16), "requires a complex-valued input"),
    (lambda s: nbx.istft(s[:, :0], 16), "input tensor cannot be empty"),
    (lambda s: nbx.istft(s.reshape(1, 2, 9, 5), 16), "expected a tensor with 2 or 3 dimensions"),
    (lambda s: nbx.istft(s, 16, onesided=False), "to match n_fft when onesided=False, but got 9"),
    (lambda s: nbx.istft(s, 18), "to match n_fft / 2 \\+ 1 when onesided=True, but got 9"),
    (lambda s: nbx.istft(s, 16, hop_length=17), "expected 0 < hop_length <= win_length"),
    (lambda s: nbx.istft(s, 16, win_length=17, hop_length=4), "expected 0 < win_length <= n_fft"),
    (lambda s: nbx.istft(s, 16, window=nbx.ones(3)), "Invalid window shape"),
    (lambda s: nbx.istft(s, 16, return_complex=True), "Cannot have onesided output"),
    (lambda s: nbx.istft(s, 16, window=nbx.ones(16, dtype=nbx.complex64)), "Complex windows are incompatible"),
    (lambda s: nbx.istft(s, 16, window=nbx.zeros(16)), "window overlap add min"),
])
def test_istft_errors(call, message, rng):
    with pytest.raises(RuntimeError, match=message):
        call(to_nbx(_spectra(rng, 2, 9, 5)))


# ---- declared workspace: one-step graphs on a strict arena ----------------------------------------

def _run_graph(tmp_path, overload, inputs, args, kwargs, shape, dtype):
    """``overload`` as a one-step graph over the tensors ``inputs`` (named in ``args`` as their index)."""
    names = [f"input::a{i}" for i in range(len(inputs))]

    def encode(value):
        return {"tensor": names[value.index]} if isinstance(value, _Input) else value
    document = {
        "format": "nbxtensor.graph", "version": 1, "symbols": {}, "inputs": names, "outputs": ["out"],
        "tensors": {**{n: {"shape": list(t.shape), "dtype": t.dtype.name} for n, t in zip(names, inputs)},
                    "out": {"shape": list(shape), "dtype": dtype}},
        "ops": [{"id": "step", "op": overload, "args": [encode(a) for a in args],
                 "kwargs": {k: encode(v) for k, v in kwargs.items()}, "outputs": ["out"]}],
    }
    (tmp_path / "graph.json").write_text(json.dumps(document))
    return graph.load(str(tmp_path), device=TEST_DEVICE)(*inputs)


class _Input:
    def __init__(self, index):
        self.index = index


@pytest.mark.parametrize("overload, shape_in, args, kwargs", [
    ("aten::fft_fft.default", (2, 8192), [], {}),                       # two passes through a workspace
    ("aten::fft_rfft.default", (3, 97), [], {}),                        # Bluestein
    ("aten::fft_irfftn.default", (3, 4, 5), [[6, 4, 9]], {"norm": "ortho"}),  # padding, a staged buffer
    ("aten::fft_hfft2.default", (4, 4100), [], {}),                     # staged, Bluestein along the last dim
    ("aten::fft_fftn.default", (3, 4), [[5, 7]], {}),                   # a zeroed output
    ("aten::stft.center", (2, 300), [67, 9], {"return_complex": True}),  # padding, Bluestein with a window
    ("aten::istft.default", (2, 9, 12), [16, 4], {"length": 50}),
])
def test_graph_steps_stay_inside_their_declared_workspace(tmp_path, monkeypatch, overload, shape_in, args, kwargs,
                                                          rng):
    monkeypatch.setattr(arena, "strict", True)
    complex_input = overload in ("aten::fft_irfftn.default", "aten::fft_hfft2.default", "aten::istft.default")
    x = to_nbx(_spectra(rng, *shape_in) if complex_input else rng.standard_normal(shape_in).astype(np.float32))
    op = nbx.ops.registry.lookup(overload)
    expected = op.impl(x, *args, **kwargs)
    got = _run_graph(tmp_path, overload, [x], [_Input(0), *args], kwargs, expected.shape, expected.dtype.name)
    np.testing.assert_array_equal(got.numpy(), expected.numpy())

