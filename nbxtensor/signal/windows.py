"""``nbxtensor.signal.windows``: torch.signal.windows' window functions, each a registry op (an ``nbx::``
name, as ATen has none) composed of ``linspace`` and pointwise ops.

Every window samples its formula on a ramp: ``M`` evenly spaced points from ``start`` by ``step``, where
a symmetric window (``sym=True``) spans ``M - 1`` intervals and a periodic one ``M``. Their parameters
are checked as torch checks them, with its errors: a negative length, a dtype other than float32 or
float64, a non-positive ``std`` or ``tau``, a negative ``beta``, empty cosine coefficients.
"""
from __future__ import annotations

import inspect
import math
from typing import Callable, NamedTuple

import numpy as np

from .. import shape as S
from ..allocation import scratch_scope
from ..dtypes import get_dtype
from ..grad_mode import refuse_requires_grad
from ..ops.nn_composites import temporaries
from ..ops.registry import Cost, TensorMeta, arguments_binder, family_samples, get, nbytes, register
from ..ops.samples import Samples, sample
from ..promotion import get_default_dtype

_FLOAT_DTYPES = ("float32", "float64")
_COMMON = {"sym": True, "dtype": None, "layout": None, "device": None, "requires_grad": False}


def _op(name):
    return get(name).impl


def _intervals(M: int, sym: bool) -> int:
    """The intervals a window's period spans: M - 1 for a symmetric window, M for a periodic one."""
    return M - 1 if sym else M


def _ramp(start: float, step: float, M: int, dtype, device):
    return _op("linspace")(start, start + (M - 1) * step, M, dtype=dtype, device=device)


def _bartlett(M, sym, dtype, device):
    with scratch_scope():
        distance = _op("abs")(_ramp(-1.0, 2 / _intervals(M, sym), M, dtype, device))
    return _op("rsub")(distance, 1)


def _cosine(M, sym, dtype, device):
    step = math.pi / (M + 1 if not sym and M > 1 else M)
    with scratch_scope():
        angles = _ramp(0.5 * step, step, M, dtype, device)
    return _op("sin")(angles)


def _check_exponential(sym, center, tau):
    if tau <= 0:
        raise ValueError(f"Tau must be positive, got: {tau} instead.")
    if sym and center is not None:
        raise ValueError("Center must be None for symmetric windows")


def _exponential(M, sym, dtype, device, center, tau):
    if center is None:
        center = (M if not sym and M > 1 else M - 1) / 2.0
    with scratch_scope():
        decay = _op("neg")(_op("abs")(_ramp(-center / tau, 1 / tau, M, dtype, device)))
    return _op("exp")(decay)


def _check_gaussian(sym, std):
    if std <= 0:
        raise ValueError(f"Standard deviation must be positive, got: {std} instead.")


def _gaussian(M, sym, dtype, device, std):
    scale = 1 / (std * math.sqrt(2))
    start = -(M if not sym and M > 1 else M - 1) / 2.0
    with scratch_scope():
        exponent = _op("neg")(_op("square")(_ramp(start * scale, scale, M, dtype, device)))
    return _op("exp")(exponent)


def _check_kaiser(sym, beta):
    if beta < 0:
        raise ValueError(f"beta must be non-negative, got: {beta} instead.")


def _kaiser(M, sym, dtype, device, beta):
    """I0(beta sqrt(1 - k^2)) / I0(beta) for k from -1 to 1, written as I0(sqrt(beta^2 - (beta k)^2)). The
    ramp's ends are worked out in the window's dtype, as torch holds beta in a tensor of it."""
    real = np.dtype(dtype.numpy).type
    beta = real(beta)
    step = real(2.0) * beta / real(_intervals(M, sym))
    end = min(beta, -beta + real(M - 1) * step)
    with scratch_scope():
        k = _op("linspace")(float(-beta), float(end), M, dtype=dtype, device=device)
        radius = _op("sqrt")(_op("rsub")(_op("square")(k), float(beta * beta)))
        numerator = _op("i0")(radius)
        denominator = _op("i0")(_op("full")((), float(beta), dtype=dtype, device=device))
    return _op("div")(numerator, denominator)


def _general_cosine(M, sym, dtype, device, a):
    """sum_i (-1)^i a_i cos(i x), x from 0 by 2 pi / (M - 1) (symmetric) or 2 pi / M (periodic)."""
    if isinstance(a, (str, bytes)) or not hasattr(a, "__iter__"):
        raise TypeError("Coefficients must be a list/tuple")
    coefficients = [(-1) ** i * float(w) for i, w in enumerate(a)]
    if not coefficients:
        raise ValueError("Coefficients cannot be empty")
    with scratch_scope():
        x = _ramp(0.0, 2 * math.pi / _intervals(M, sym), M, dtype, device)
        cosines = [_op("cos")(_op("mul")(x, float(i))) for i in range(len(coefficients))]
        total = None
        for coefficient, cosine in zip(coefficients[:-1], cosines):
            term = _op("mul")(cosine, coefficient)
            total = term if total is None else _op("add")(total, term)
        last = None if total is None else _op("mul")(cosines[-1], coefficients[-1])
    if total is None:
        return _op("mul")(cosines[-1], coefficients[-1])
    return _op("add")(total, last)


class Window(NamedTuple):
    values: Callable      # values(M, sym, dtype, device, **params) for M >= 1 (M >= 2 where ones_at_one)
    params: dict          # the window's own keywords and their defaults (``inspect.Parameter.empty``: required)
    ones_at_one: bool     # a length-1 window is [1] without evaluating the formula (torch's shortcut)
    terms: int            # pointwise ops per element, for the cost rule
    check: Callable | None = None  # check(sym, **params): the parameter checks torch makes before any length


def _cosine_sum(coefficients: Callable) -> Callable:
    """A window that is ``general_cosine`` with the coefficients its parameters give."""
    def values(M, sym, dtype, device, **params):
        return _general_cosine(M, sym, dtype, device, coefficients(**params))
    return values


WINDOWS = {
    "bartlett": Window(_bartlett, {}, True, 2),
    "blackman": Window(_cosine_sum(lambda: [0.42, 0.5, 0.08]), {}, True, 9),
    "cosine": Window(_cosine, {}, False, 1),
    "exponential": Window(_exponential, {"center": None, "tau": 1.0}, False, 3, _check_exponential),
    "gaussian": Window(_gaussian, {"std": 1.0}, False, 3, _check_gaussian),
    "general_cosine": Window(_general_cosine, {"a": inspect.Parameter.empty}, True, 12),  # a is required
    "general_hamming": Window(_cosine_sum(lambda alpha: [alpha, 1.0 - alpha]), {"alpha": 0.54}, True, 6),
    "hamming": Window(_cosine_sum(lambda: [0.54, 1.0 - 0.54]), {}, True, 6),
    "hann": Window(_cosine_sum(lambda: [0.5, 1.0 - 0.5]), {}, True, 6),
    "kaiser": Window(_kaiser, {"beta": 12.0}, True, 8, _check_kaiser),
    "nuttall": Window(_cosine_sum(lambda: [0.3635819, 0.4891775, 0.1365995, 0.0106411]), {}, True, 12),
}


def _check(name: str, M, dtype, layout, requires_grad):
    if isinstance(M, bool) or not isinstance(M, (int, np.integer)):
        raise TypeError(f"{name}: the window length M must be an int, got {type(M).__name__}")
    if M < 0:
        raise ValueError(f"{name} requires non-negative window length, got M={M}")
    if layout is not None and str(layout).removeprefix("torch.") != "strided":
        raise ValueError(f"{name} is implemented for strided tensors only, got: {layout}")
    dtype = get_default_dtype() if dtype is None else dtype
    if dtype.name not in _FLOAT_DTYPES:
        raise ValueError(f"{name} expects float32 or float64 dtypes, got: {dtype.name}")
    refuse_requires_grad(requires_grad, f"signal.windows.{name}")
    return dtype


def _build(name: str, window: Window):
    keywords = {**window.params, **_COMMON}
    signature = inspect.Signature(
        [inspect.Parameter("M", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        + [inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=v) for k, v in keywords.items()])

    def checked_dtype(a):
        """The window's dtype, the call (bound arguments ``a``) checked."""
        dtype = _check(name, a.M, a.dtype, a.layout, a.requires_grad)
        if window.check is not None:
            window.check(a.sym, **{k: getattr(a, k) for k in window.params})
        return dtype

    def meta(a):
        return TensorMeta((int(a.M),), checked_dtype(a))

    def cost(a):
        made = meta(a)
        return Cost(flops=window.terms * S.numel(made.shape), bytes_written=nbytes(made),
                    workspace=temporaries(window.terms, made.shape, made.dtype))

    def impl(*args, **kwargs):
        a = bind(*args, **kwargs)
        dtype, M, device = checked_dtype(a), int(a.M), a.device
        if M == 0:
            return _op("empty")((0,), dtype=dtype, device=device)
        if M == 1 and window.ones_at_one:
            return _op("ones")((1,), dtype=dtype, device=device)
        return window.values(M, bool(a.sym), dtype, device, **{k: getattr(a, k) for k in window.params})

    impl.__name__ = impl.__qualname__ = name
    impl.__signature__ = signature
    impl.__doc__ = f"torch.signal.windows.{name}: a length-M window in float32 or float64."
    # the implementation binds its arguments as the registry binds its rules' (``bound=True``)
    bind = arguments_binder(name, impl)
    return register(f"signal_windows_{name}", family="creation", aten=[f"nbx::signal_windows_{name}"], meta=meta,
                    cost=cost, bound=True, api=())(impl)


globals().update({name: _build(name, window).impl for name, window in WINDOWS.items()})

__all__ = sorted(WINDOWS)


# ---- samples ---------------------------------------------------------------------------------------

def _cosine_sum(M, a):
    """Sum of (-1)^k a[k] cos(2 pi k n / (M - 1)): the general cosine window."""
    n = np.arange(M)
    return sum((-1) ** k * coefficient * np.cos(2 * np.pi * k * n / max(M - 1, 1)) for k, coefficient in enumerate(a))


# symmetric windows of length M in NumPy (a periodic one is the symmetric one of M + 1, truncated)
_REFERENCES = {"bartlett": np.bartlett, "blackman": np.blackman, "hamming": np.hamming, "hann": np.hanning,
               "kaiser": lambda M, beta=12.0: np.kaiser(M, beta),
               "cosine": lambda M: np.sin(np.pi * (np.arange(M) + 0.5) / M),
               "exponential": lambda M, center=None, tau=1.0: np.exp(
                   -np.abs(np.arange(M) - ((M - 1) / 2 if center is None else center)) / tau),
               "gaussian": lambda M, std=1.0: np.exp(-0.5 * ((np.arange(M) - (M - 1) / 2) / std) ** 2),
               "general_cosine": _cosine_sum,
               "general_hamming": lambda M, alpha=0.54: _cosine_sum(M, [alpha, 1 - alpha]),
               "nuttall": lambda M: _cosine_sum(M, [0.3635819, 0.4891775, 0.1365995, 0.0106411])}
_ARGUMENTS = {"general_cosine": dict(a=[0.5, 0.5]), "exponential": dict(tau=2.0), "gaussian": dict(std=0.7),
              "general_hamming": dict(alpha=0.6), "kaiser": dict(beta=5.0)}


def _window_samples(op):
    name = op.name.removeprefix("signal_windows_")
    if name not in WINDOWS:
        return None
    extra = _ARGUMENTS.get(name, {})
    cases = (sample(5, **extra), sample(4, sym=False, **extra), sample(1, **extra), sample(0, **extra),
             sample(6, dtype=get_dtype("float64"), **extra))
    reference = _REFERENCES.get(name)
    return Samples(cases, None if reference is None else
                   lambda M, sym=True, dtype=None, **kwargs: np.ones(M) if M <= 1
                   else reference(M + (not sym), **kwargs)[:M])


family_samples("creation", _window_samples)
