"""``nbxtensor.fft``: torch.fft's functions, each a registry op (``ops/fft.py``)."""
from .ops import fft as _fft
from .ops.registry import public_function as _public

_NAMES = [*_fft.TRANSFORMS]

globals().update({name: _public(_fft.TRANSFORMS[name]) for name in _NAMES})

__all__ = sorted(_NAMES)
