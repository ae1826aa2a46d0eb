"""libdevice under Triton's interpreter.

The pointwise bodies call ``triton.language.extra.libdevice`` (CUDA's math library when compiled).
Those functions are stubs that only a GPU backend's compiler fills in; Triton's interpreter has no
implementation for them. In an interpreted process this module gives each stub the NumPy function
with the same meaning, applied to the interpreter's NumPy-backed values, so the CPU device runs the
very same kernel source. Compiled processes never call ``install``.
"""
from __future__ import annotations

import math

import numpy as np

_erf = np.vectorize(math.erf, otypes=[np.float64])
_erfc = np.vectorize(math.erfc, otypes=[np.float64])


def _erfinv(y):
    """Inverse error function in float64: Giles' single-precision approximation refined by Newton
    steps on math.erf, which converge to float64 accuracy well inside three steps."""
    y = np.asarray(y, dtype=np.float64)
    with np.errstate(all="ignore"):
        w = -np.log((1.0 - y) * (1.0 + y))
        central = w < 5.0
        wc = w - 2.5
        pc = 2.81022636e-08
        for coef in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
                     -0.00417768164, 0.246640727, 1.50140941):
            pc = coef + pc * wc
        wt = np.sqrt(w) - 3.0
        pt = -0.000200214257
        for coef in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
                     0.00943887047, 1.00167406, 2.83297682):
            pt = coef + pt * wt
        x = np.where(central, pc, pt) * y
        for _ in range(3):
            x = x - (_erf(x) - y) / (2.0 / math.sqrt(math.pi) * np.exp(-x * x))
        x = np.where(np.abs(y) == 1.0, np.copysign(np.inf, y), x)
        return np.where(np.abs(y) > 1.0, np.nan, x)


_FUNCTIONS = {
    "exp": np.exp, "exp2": np.exp2, "expm1": np.expm1, "log": np.log, "log2": np.log2, "log10": np.log10,
    "log1p": np.log1p, "rsqrt": lambda x: 1.0 / np.sqrt(x), "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh,
    "tanh": np.tanh, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh, "erf": _erf,
    "erfc": _erfc, "erfinv": _erfinv, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "rint": np.rint,
    "atan2": np.arctan2, "hypot": np.hypot, "fmod": np.fmod, "copysign": np.copysign, "pow": np.power,
}


def _numpy_elementwise(fn):
    from triton.language import core
    from triton.runtime.interpreter import TensorHandle

    def apply(*args, _semantic=None):
        first = args[0]
        dtype = first.handle.data.dtype
        with np.errstate(all="ignore"):
            data = fn(*[a.handle.data for a in args])
        return core.tensor(TensorHandle(np.asarray(data).astype(dtype), first.dtype.scalar), first.type)

    return apply


def install() -> None:
    from triton.language.extra import libdevice
    for name, fn in _FUNCTIONS.items():
        setattr(libdevice, name, _numpy_elementwise(fn))
