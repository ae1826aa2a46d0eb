"""Whole-tensor comparisons that answer with a Python bool, as torch's ``allclose`` and ``equal``."""
from __future__ import annotations

from ..tensor import Tensor
from .registry import get, tensor_attribute

__all__ = ["allclose", "equal"]


def allclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    """Whether ``|input - other| <= atol + rtol * |other|`` everywhere (``isclose``, broadcast; the
    dtypes must match, as torch's)."""
    return bool(get("isclose").impl(input, other, rtol, atol, equal_nan).all().item())


def equal(input: Tensor, other: Tensor) -> bool:
    """Whether both have the same shape and equal elements (compared after type promotion; NaN is
    never equal)."""
    if not isinstance(other, Tensor):
        raise TypeError(f"equal(): other must be a Tensor, not {type(other).__name__}")
    if input.shape != other.shape:
        return False
    return bool(get("eq").impl(input, other).all().item())


tensor_attribute("allclose", allclose)
tensor_attribute("equal", equal)
