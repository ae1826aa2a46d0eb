"""The op registry: one declaration per op, used by the Python API, the graph executor, the
planner and the tuner alike.

An op declares its ATen overload names, a meta rule (output shapes and dtypes from input metadata,
no device), a cost rule (FLOPs, bytes read and written, workspace from metadata alone) and its
implementation. An op that tunes its launches also declares a key rule: the launch keys (``tuning``) a
call forms, from its arguments' layouts and a device class's facts alone. Meta and cost rules receive the
op's arguments with every tensor replaced by anything that has ``shape`` and ``dtype`` (a real tensor
does); key rules receive ``facts`` first, then
the arguments with tensors as ones that have strides too (a meta tensor: ``device="meta"``), and return
a list of keys. An op's sample inputs (``ops/samples.py``) come from ``register(samples=)`` or its family's
default (``family_samples``).
"""
from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Callable, NamedTuple

from ..shape import numel

__all__ = ["Cost", "TensorMeta", "OpDef", "register", "get", "lookup", "all_ops", "nbytes", "workspace_bytes",
           "public_function", "accepting_aliases", "KEYWORD_ALIASES", "family_samples", "samples_of"]

# Each temporary an op takes from its graph step's workspace starts this many bytes after the last.
SCRATCH_ALIGNMENT = 256


class TensorMeta(NamedTuple):
    shape: tuple
    dtype: object


@dataclass(frozen=True)
class Cost:
    flops: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    # an upper bound on the bytes of every temporary the op allocates besides its outputs, including the
    # results of other ops it calls, each counted by ``workspace_bytes``
    workspace: int = 0

    @property
    def bytes_moved(self) -> int:
        return self.bytes_read + self.bytes_written


def workspace_bytes(*sizes: int) -> int:
    """The workspace of temporaries of these byte sizes, each allocated on its own."""
    return sum(-(-size // SCRATCH_ALIGNMENT) * SCRATCH_ALIGNMENT for size in sizes)


@dataclass(frozen=True)
class OpDef:
    name: str
    family: str
    aten: tuple[str, ...]
    meta: Callable
    cost: Callable
    impl: Callable
    doc: str = ""
    api: tuple[str, ...] = ()
    methods: tuple[str, ...] = ()
    key: Callable | None = None
    samples: Callable | None = None

    def __call__(self, *args, **kwargs):
        return self.impl(*args, **kwargs)


_BY_NAME: dict[str, OpDef] = {}
_BY_ATEN: dict[str, OpDef] = {}


def register(name: str, *, family: str, aten: tuple[str, ...] | list[str], meta: Callable, cost: Callable,
             api: tuple[str, ...] | None = None, methods: tuple[str, ...] = (), key: Callable | None = None,
             samples: Callable | None = None):
    """Declare op ``name``; used as a decorator on its implementation. ``api`` lists the names it
    takes in the ``nbxtensor`` namespace (default: its own name), ``methods`` its Tensor methods, ``key``
    its key rule (ops that tune), ``samples`` its sample inputs (``samples(op)`` -> ``samples.Samples``; by
    default its family's)."""
    def wrap(impl: Callable) -> OpDef:
        if name in _BY_NAME:
            raise ValueError(f"op {name!r} is declared twice")
        if "<locals>" in impl.__qualname__:  # Python names the qualname in argument errors: say the op's name
            impl.__qualname__ = name
        op = OpDef(name=name, family=family, aten=tuple(aten), meta=meta, cost=cost, impl=impl,
                   doc=impl.__doc__ or "", api=(name,) if api is None else tuple(api), methods=tuple(methods),
                   key=key, samples=samples)
        for overload in op.aten:
            if overload in _BY_ATEN:
                raise ValueError(f"ATen overload {overload!r} is claimed by {_BY_ATEN[overload].name!r} and {name!r}")
            _BY_ATEN[overload] = op
        _BY_NAME[name] = op
        return op
    return wrap


def get(name: str) -> OpDef:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"no op named {name!r}; families: {', '.join(families())}") from None


def lookup(aten_name: str) -> OpDef:
    """The op implementing an ATen overload such as ``aten::add.Tensor``; a bare ``aten::add``
    means its ``.default`` overload."""
    op = _BY_ATEN.get(aten_name) or _BY_ATEN.get(aten_name + ".default")
    if op is None:
        raise KeyError(f"no op implements {aten_name!r}; families that exist: {', '.join(families())}")
    return op


def all_ops() -> list[OpDef]:
    return list(_BY_NAME.values())


def families() -> list[str]:
    return sorted({op.family for op in _BY_NAME.values()})


_FAMILY_SAMPLES: dict[str, list[Callable]] = {}


def family_samples(family: str, samples: Callable) -> None:
    """Add ``samples(op)`` (``samples.Samples`` or None) to the defaults of ``family``'s ops: an op without
    samples of its own takes the first default that gives it some."""
    _FAMILY_SAMPLES.setdefault(family, []).append(samples)


def samples_of(op: OpDef):
    """``op``'s ``samples.Samples``: its own, else its family's; None where neither has any."""
    if op.samples is not None:
        return op.samples(op)
    for samples in _FAMILY_SAMPLES.get(op.family, ()):
        found = samples(op)
        if found is not None:
            return found
    return None


def nbytes(meta) -> int:
    """Bytes of a tensor described by ``meta``."""
    return numel(meta.shape) * meta.dtype.itemsize


# NumPy's keyword names that torch's argument parser takes for its own, in every function it binds
KEYWORD_ALIASES = {"axis": "dim", "keepdims": "keepdim"}
_PUBLIC: dict[str, Callable] = {}


def public_function(op: OpDef) -> Callable:
    """``op.impl`` as the API calls it: taking the ``KEYWORD_ALIASES`` of the keywords it has; the
    implementation itself when it has none of them."""
    found = _PUBLIC.get(op.name)
    if found is None:
        found = _PUBLIC[op.name] = accepting_aliases(op.impl)
    return found


def accepting_aliases(impl: Callable) -> Callable:
    """``impl`` taking the ``KEYWORD_ALIASES`` of the keywords it has (itself when it has none)."""
    try:
        parameters = inspect.signature(impl).parameters
    except (TypeError, ValueError):
        return impl
    aliases = tuple((alias, name) for alias, name in KEYWORD_ALIASES.items()
                    if name in parameters and alias not in parameters)
    if not aliases:
        return impl

    @functools.wraps(impl)
    def with_aliases(*args, **kwargs):
        if kwargs:
            for alias, name in aliases:
                if alias in kwargs:
                    if name in kwargs:
                        raise TypeError(f"{impl.__name__}() got both {name}= and its alias {alias}=")
                    kwargs[name] = kwargs.pop(alias)
        return impl(*args, **kwargs)
    return with_aliases


def bind(namespace: dict, tensor_class: type) -> None:
    """Expose every op under its API names in ``namespace`` and as methods of ``tensor_class``."""
    for op in _BY_NAME.values():
        function = public_function(op)
        for api_name in op.api:
            namespace[api_name] = function
        for method in op.methods:
            setattr(tensor_class, method, function)
