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


def _lgamma_scalar(x: float) -> float:
    try:
        return math.lgamma(x)
    except ValueError:  # the poles at 0, -1, -2, ...
        return math.inf


_lgamma = np.vectorize(_lgamma_scalar, otypes=[np.float64])


def _erfcx(x):
    """exp(x^2) erfc(x) in float64: directly while exp(x^2) is finite, by erfcx(-x) = 2 exp(x^2) - erfcx(x)
    below 0, and by the asymptotic series 1 / (x sqrt(pi)) sum (-1)^k (2k - 1)!! / (2x^2)^k beyond 25,
    where its eighth term is below float64's resolution."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        far = np.maximum(np.abs(x), 25.0)
        term = np.ones_like(far)
        series = np.ones_like(far)
        for k in range(1, 9):
            term = term * -(2 * k - 1) / (2 * far * far)
            series = series + term
        asymptotic = series / (far * math.sqrt(math.pi))
        near = np.exp(x * x) * _erfc(x)
        positive = np.where(np.abs(x) < 25.0, near, asymptotic)
        return np.where(x < -25.0, 2 * np.exp(x * x) - positive, positive)


def _normcdfinv(p):
    """The normal quantile in float64: a start from erfinv (or the tail's -sqrt(-2 log p)), then Newton
    steps on log CDF - log p, where the lower tail's CDF 0.5 erfc(-x / sqrt 2) is accurate relative to p
    and the logarithm keeps the steps from overshooting; p > 0.5 by symmetry (1 - p is exact there)."""
    p = np.asarray(p, dtype=np.float64)
    with np.errstate(all="ignore"):
        lower = np.minimum(p, 1.0 - p)
        x = np.where(lower > 1e-3, math.sqrt(2.0) * _erfinv(2.0 * lower - 1.0), -np.sqrt(-2.0 * np.log(lower)))
        for _ in range(12):
            cdf = 0.5 * _erfc(-x / math.sqrt(2.0))
            density = np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
            step = (np.log(cdf) - np.log(lower)) * cdf / density
            x = np.where(np.isfinite(step), x - step, x)
        x = np.where(p > 0.5, -x, x)
        x = np.where(p == 0.0, -np.inf, np.where(p == 1.0, np.inf, x))
        return np.where((p < 0) | (p > 1) | np.isnan(p), np.nan, x)


_FUNCTIONS = {
    "exp": np.exp, "exp2": np.exp2, "expm1": np.expm1, "log": np.log, "log2": np.log2, "log10": np.log10,
    "log1p": np.log1p, "rsqrt": lambda x: 1.0 / np.sqrt(x), "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh,
    "tanh": np.tanh, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh, "erf": _erf,
    "erfc": _erfc, "erfinv": _erfinv, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "rint": np.rint,
    "atan2": np.arctan2, "hypot": np.hypot, "fmod": np.fmod, "copysign": np.copysign, "pow": np.power,
    "lgamma": _lgamma, "erfcx": _erfcx, "normcdfinv": _normcdfinv,
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
