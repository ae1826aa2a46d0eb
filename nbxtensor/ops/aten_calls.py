"""ATen's calling conventions where an overload's arguments differ from the implementation's torch
signature: builders of the adapters an op declares with ``register(adapters={overload: adapt})``.
``adapt(args tuple, kwargs dict) -> (args, kwargs)`` is applied alike to the meta rule, the cost rule and
the implementation (``graph/calling.py``), so the three always see the same call."""
from __future__ import annotations


def drop_keywords(*names: str):
    """ATen passes these keywords; the implementation has no use for them."""
    def adapt(args, kwargs):
        return args, {k: v for k, v in kwargs.items() if k not in names}
    return adapt


def positional_as_keywords(position: int, *names: str):
    """ATen passes these arguments by position, from ``position`` on, where the implementation takes them
    by keyword."""
    def adapt(args, kwargs):
        return args[:position], {**dict(zip(names, args[position:])), **kwargs}
    return adapt
