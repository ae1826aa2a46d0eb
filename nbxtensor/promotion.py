"""Type promotion as ATen does it, with weak Python scalars.

Categories rank bool < integer < floating < complex. Within a category, ``promote_types`` picks the
wider type; uint8 with a signed integer gives the next signed type that holds both; float16 with
bfloat16 gives float32. A Python scalar (a "wrapped number") and a 0-d tensor only take part when
they belong to a higher category than the dimensioned tensors.
"""
from __future__ import annotations

from .dtypes import (PromotionError, all_dtypes, dtype, get_default_complex_dtype, get_default_dtype, get_dtype,
                     set_default_dtype)

__all__ = ["PromotionError", "promote_types", "result_type", "can_cast", "get_default_dtype",
           "set_default_dtype", "get_default_complex_dtype"]

_D = {d.name: d for d in all_dtypes}
_CATEGORY = {"bool": 0, "uint": 1, "int": 1, "float": 2, "complex": 3}
_FP8 = ("float8_e4m3fn", "float8_e5m2")


def promote_types(a, b) -> dtype:
    """The smallest dtype both ``a`` and ``b`` convert to without leaving their category."""
    a, b = get_dtype(a), get_dtype(b)
    if a is b:
        return a
    if a.name in _FP8 or b.name in _FP8:
        raise PromotionError(f"promotion of {a.name} with {b.name} is not defined (float8 types promote only "
                        "with themselves); cast explicitly")
    if a.kind == "bool":
        return b
    if b.kind == "bool":
        return a
    ca, cb = _CATEGORY[a.kind], _CATEGORY[b.kind]
    if ca != cb:
        hi, lo = (a, b) if ca > cb else (b, a)
        if hi.is_complex and lo.is_floating_point:
            return _D["complex128"] if (hi.name == "complex128" or lo.name == "float64") else _D["complex64"]
        return hi
    if a.is_integral:
        if a.kind == b.kind:
            return a if a.itemsize >= b.itemsize else b
        unsigned, signed = (a, b) if a.kind == "uint" else (b, a)
        if signed.itemsize > unsigned.itemsize:
            return signed
        return _D["int16"]  # uint8 with int8
    if a.is_floating_point:
        if {a.name, b.name} == {"float16", "bfloat16"}:
            return _D["float32"]
        return a if a.itemsize >= b.itemsize else b
    return a if a.itemsize >= b.itemsize else b  # complex


def _is_tensor(x) -> bool:
    return hasattr(x, "dtype") and hasattr(x, "shape") and not isinstance(x, (bool, int, float, complex))


def _wrapped_dtype(x, complex_dtype: dtype) -> dtype:
    if isinstance(x, bool):
        return _D["bool"]
    if isinstance(x, int):
        return _D["int64"]
    if isinstance(x, float):
        return get_default_dtype()
    if isinstance(x, complex):
        return complex_dtype
    raise TypeError(f"expected a tensor or a Python scalar, got {type(x).__name__}")


def _combine_categories(higher: dtype | None, lower: dtype | None) -> dtype | None:
    if higher is None:
        return lower
    if lower is None:
        return higher
    if higher.is_complex:
        return higher
    if lower.is_complex:
        if not higher.is_floating_point:
            return lower
        try:
            return higher.to_complex()
        except TypeError as e:
            raise PromotionError(str(e)) from None
    if higher.is_floating_point:
        return higher
    if higher.kind == "bool" or lower.is_floating_point:
        return promote_types(higher, lower)
    return higher


def result_type(*operands) -> dtype:
    """The dtype of a pointwise op over ``operands`` (tensors, dtypes or Python scalars), as ATen
    computes it: dimensioned tensors first, then 0-d tensors, then Python scalars, each group
    raising the result only when it belongs to a higher category."""
    if not operands:
        raise TypeError("result_type needs at least one operand")
    try:
        default_complex = get_default_complex_dtype()
    except PromotionError:
        # With a float16 default there is no default complex dtype, and torch only fails when a Python
        # complex decides the result; if either complex dtype gives the same answer, it did not.
        as_complex64 = _result_type(operands, _D["complex64"])
        if as_complex64 is _result_type(operands, _D["complex128"]):
            return as_complex64
        raise
    return _result_type(operands, default_complex)


def _result_type(operands, complex_scalar_dtype: dtype) -> dtype:
    dim_result = zero_result = wrapped_result = None
    for x in operands:
        if isinstance(x, dtype):
            dim_result = x if dim_result is None else promote_types(dim_result, x)
        elif _is_tensor(x):
            d = get_dtype(x.dtype)
            if len(x.shape) == 0:
                zero_result = d if zero_result is None else promote_types(zero_result, d)
            else:
                dim_result = d if dim_result is None else promote_types(dim_result, d)
        else:
            d = _wrapped_dtype(x, complex_scalar_dtype)
            wrapped_result = d if wrapped_result is None else promote_types(wrapped_result, d)
    return _combine_categories(dim_result, _combine_categories(zero_result, wrapped_result))


def can_cast(from_, to) -> bool:
    """Whether an in-place op may write a ``from_`` result into a ``to`` tensor (ATen's canCast)."""
    f, t = get_dtype(from_), get_dtype(to)
    if f.is_complex and not t.is_complex:
        return False
    if f.is_floating_point and t.is_integral:
        return False
    if f.kind != "bool" and t.kind == "bool":
        return False
    return True
