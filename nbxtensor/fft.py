"""``nbxtensor.fft``: torch.fft's functions, each a registry op (``ops/fft.py``)."""
from .ops import fft as _fft
from .ops.registry import public_function as _public

_OPS = {**_fft.TRANSFORMS, **_fft.HELPERS}

globals().update({name: _public(op) for name, op in _OPS.items()})

__all__ = sorted(_OPS)
