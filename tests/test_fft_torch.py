"""torch.fft, stft and istft as an oracle: the same calls give the same shapes, dtypes and values (within
the FFT bound of ``test_fft.py``), and the same calls raise."""
import numpy as np
import pytest

import nbxtensor as nbx

from .conftest import to_nbx
from .test_fft import assert_close_fft

torch = pytest.importorskip("torch")



def _pair(rng, shape, dtype):
    if dtype.startswith("complex"):
        array = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    else:
        array = rng.standard_normal(shape).astype(dtype)
    return to_nbx(array), torch.from_numpy(array.copy()), array


CALLS = [
    ("fft", {}), ("fft", {"n": 5, "dim": 0, "norm": "ortho"}), ("ifft", {"n": 11}), ("rfft", {"norm": "forward"}),
    ("irfft", {"n": 9}), ("hfft", {}), ("ihfft", {"dim": 0}), ("fft2", {"s": (3, 5)}), ("ifft2", {"dim": (0, 2)}),
    ("rfft2", {}), ("irfft2", {"s": (4, 7)}), ("hfft2", {"norm": "ortho"}), ("ihfft2", {"s": (2, 6)}),
    ("fftn", {}), ("ifftn", {"s": (2, -1), "dim": (2, 0)}), ("rfftn", {"dim": (0, 1)}), ("irfftn", {}),
    ("hfftn", {"s": (3, 3, 6)}), ("ihfftn", {"norm": "forward"}),
]


@pytest.mark.parametrize("name, kwargs", CALLS, ids=[f"{name}-{i}" for i, (name, _) in enumerate(CALLS)])
@pytest.mark.parametrize("dtype", ["float32", "complex64", "float64"])
def test_transforms_match_torch(name, kwargs, dtype, rng):
    ours, theirs, array = _pair(rng, (3, 4, 6), dtype)
    try:
        expected = getattr(torch.fft, name)(theirs, **kwargs)
    except RuntimeError:
        with pytest.raises(RuntimeError):
            getattr(nbx.fft, name)(ours, **kwargs)
        return
    got = getattr(nbx.fft, name)(ours, **kwargs)
    assert got.dtype.name == str(expected.dtype).removeprefix("torch.")
    assert_close_fft(got, expected.resolve_conj().numpy(), array, 64)


@pytest.mark.parametrize("call", [
    lambda f, x: f.fft.fft(x, n=0), lambda f, x: f.fft.irfft(x[:, :1]), lambda f, x: f.fft.fftn(x, dim=(0, 0)),
    lambda f, x: f.fft.fft(x.half()), lambda f, x: f.fft.rfft(x.bfloat16()), lambda f, x: f.fft.rfftn(x, dim=()),
    lambda f, x: f.fft.fft2(x, s=(1, 2, 3)), lambda f, x: f.fft.fft(x, norm="nope"),
    lambda f, x: f.stft(x, 4), lambda f, x: f.istft(x, 4),
])
def test_the_same_calls_raise(call, rng):
    ours, theirs, _ = _pair(rng, (3, 4), "float32")
    with pytest.raises(Exception) as theirs_raised:
        call(torch, theirs)
    with pytest.raises(type(theirs_raised.value)):
        call(nbx, ours)


def test_frequencies_match_torch_bit_for_bit():
    for n in (0, 1, 6, 7):
        for d in (1.0, 0.1):
            for name in ("fftfreq", "rfftfreq"):
                np.testing.assert_array_equal(getattr(nbx.fft, name)(n, d).numpy(),
                                              getattr(torch.fft, name)(n, d).numpy())


@pytest.mark.parametrize("kwargs", [
    dict(n_fft=400, hop_length=160, window="hann"),                                    # Whisper's features
    dict(n_fft=64, hop_length=16, win_length=48, window="hann", normalized=True),
    dict(n_fft=32, center=False, onesided=False),
    dict(n_fft=50, pad_mode="constant", window="hann"),
])
def test_stft_and_istft_match_torch(kwargs, rng):
    kwargs = dict(kwargs)
    window = kwargs.pop("window", None)
    if window is not None:
        theirs_window = torch.hann_window(kwargs.get("win_length", kwargs["n_fft"]))
        ours_window = to_nbx(theirs_window.numpy())
    else:
        theirs_window = ours_window = None
    ours, theirs, _ = _pair(rng, (2, 1600), "float32")
    expected = torch.stft(theirs, window=theirs_window, return_complex=True, **kwargs)
    got = nbx.stft(ours, window=ours_window, return_complex=True, **kwargs)
    assert tuple(got.shape) == tuple(expected.shape) and got.stride() == expected.stride()
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=0, atol=2e-4)
    inverse = {k: v for k, v in kwargs.items() if k != "pad_mode"}
    if kwargs.get("onesided") is False:
        inverse["return_complex"] = True
    expected = torch.istft(torch.from_numpy(got.numpy()), window=theirs_window, length=1600, **inverse)
    got = nbx.istft(got, window=ours_window, length=1600, **inverse)
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=0, atol=2e-5)
