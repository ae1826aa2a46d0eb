"""Calling a registry op with the arguments of an ATen overload.

Registry implementations take torch's Python signatures; for most overloads that is the ATen schema
too. The few that differ get an adapter here, applied alike to the meta rule, the cost rule and the
implementation so the three always see the same call."""
from __future__ import annotations

import inspect
from functools import cache

from ..dtypes import get_dtype
from ..ops.registry import OpDef, lookup


def _softmax_from_aten(args, kwargs):
    # aten::_softmax(self, dim, half_to_float): half_to_float asks for a float32 result from half input
    x, dim, *rest = args
    half_to_float = rest[0] if rest else kwargs.get("half_to_float", False)
    return (x, dim), ({"dtype": get_dtype("float32")} if half_to_float else {})


def _drop_kwargs(*names):
    def adapt(args, kwargs):
        return args, {k: v for k, v in kwargs.items() if k not in names}
    return adapt


def _to_copy_from_aten(args, kwargs):
    # aten::_to_copy(self, *, dtype, layout, device, pin_memory, non_blocking, memory_format) always copies;
    # the graph runs on one device, so only the dtype matters
    return args[:1], {"dtype": kwargs.get("dtype"), "copy": True}


_ADAPTERS = {
    "aten::_softmax.default": _softmax_from_aten,
    "aten::_log_softmax.default": _softmax_from_aten,
    "aten::expand.default": _drop_kwargs("implicit"),
    "aten::_to_copy.default": _to_copy_from_aten,
    "aten::clone.default": _drop_kwargs("memory_format"),
    "aten::contiguous.default": _drop_kwargs("memory_format"),
}

# ops that make tensors from nothing need to be told where
_PLACED_FAMILIES = ("creation", "random")


@cache
def _takes_device(op: OpDef) -> bool:
    try:
        return "device" in inspect.signature(op.impl).parameters
    except (TypeError, ValueError):
        return False


def resolve(aten_name: str) -> OpDef:
    return lookup(aten_name)


def adapter(aten_name: str):
    """``adapt(args tuple, kwargs dict) -> (args, kwargs)`` from an ATen overload's arguments to the
    registry op's, or None where they are the same."""
    return _ADAPTERS.get(aten_name)


def placed(op: OpDef) -> bool:
    """Whether ``op`` makes tensors from nothing and must be told the device."""
    return op.family in _PLACED_FAMILIES and _takes_device(op)


def adapt(aten_name: str, args, kwargs):
    """Positional and keyword arguments for the registry op's rules and implementation."""
    adapt_arguments = adapter(aten_name)
    return (tuple(args), dict(kwargs)) if adapt_arguments is None else adapt_arguments(tuple(args), dict(kwargs))
