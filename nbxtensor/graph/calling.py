"""Calling a registry op with the arguments of an ATen overload.

Registry implementations take torch's Python signatures; for most overloads that is the ATen schema
too. An op whose overloads differ declares an adapter for each (``register(adapters=)``), applied here
alike to the meta rule, the cost rule and the implementation so the three always see the same call."""
from __future__ import annotations

from functools import cache
import inspect

from ..ops.registry import OpDef, aten_adapter, lookup

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
    return aten_adapter(aten_name)


def placed(op: OpDef) -> bool:
    """Whether ``op`` makes tensors from nothing and must be told the device."""
    return op.family in _PLACED_FAMILIES and _takes_device(op)


def adapt(aten_name: str, args, kwargs):
    """Positional and keyword arguments for the registry op's rules and implementation."""
    adapt_arguments = adapter(aten_name)
    return (tuple(args), dict(kwargs)) if adapt_arguments is None else adapt_arguments(tuple(args), dict(kwargs))
