"""The op registry: one declaration per op, used by the Python API, the graph executor, the
planner and the tuner alike.

An op is declared once, by ``@register(name, ...)`` on its implementation; everything else about it is
read from that declaration (its ``OpDef``):

``family``
    the op family (``"pointwise"``, ``"reduction"`` ...), for listings and the census.
``aten``
    the ATen overloads it implements (``"aten::add.Tensor"``; ``"nbx::..."`` for ops of its own).
``adapters``
    ``{overload: adapt}`` for the overloads whose ATen arguments differ from the implementation's:
    ``adapt(args, kwargs) -> (args, kwargs)``, applied alike to meta rule, cost rule and implementation
    (``ops/aten_calls.py`` builds the common ones).
``meta``, ``cost``
    the meta rule (output shapes and dtypes from input metadata, no device) and the cost rule (FLOPs,
    bytes read and written, workspace from metadata alone). Both are called with the op's arguments,
    every tensor replaced by anything that has ``shape`` and ``dtype`` (a real tensor does). With
    ``bound=True`` the registry binds those arguments once to the implementation's signature and hands
    each rule the result, one object whose attributes are the parameters, defaults filled in
    (``def meta(a): return TensorMeta(a.input.shape, a.dtype or a.input.dtype)``): a rule restates neither
    the signature nor its defaults. ``OpDef.meta`` and ``OpDef.cost`` take the op's arguments either way;
    ``OpDef.bound`` says whether its rules (or those of the op it is a variant of) were declared bound.
``key``
    for an op that tunes its launches: the launch keys (``tuning``) a call forms, from ``facts`` first and
    then the arguments with tensors as ones that have strides too (a meta tensor: ``device="meta"``).
``api``, ``methods``, ``functional``
    its names in ``nbxtensor`` (default: its own name), as Tensor methods, and in
    ``nbxtensor.nn.functional`` (``True``: its own name). ``functional_form``: the function those
    ``nn.functional`` names call where torch's functional takes other arguments than the op.
``aliases``
    ``VIEW``: its outputs share its first tensor argument's memory (a view); ``MAYBE_VIEW``: a view when
    the layout allows, a copy otherwise; ``None``: outputs of their own.
``variants``
    the forms the registry derives from this declaration. ``OUT``: the op takes ``out=`` (a tensor, or a
    tuple of them for a tuple result), written as ATen writes results into ``out`` (the result type must
    cast to its dtype; an empty ``out`` is resized, another of the wrong shape refused); the rules and the
    implementation never see it. ``OUT_EXACT``: ``OUT`` whose tensors must have the result's dtypes
    exactly, as ATen's ops with fixed output dtypes demand (frexp's int32 exponent). ``INPLACE`` on ``x``
    taking ``inplace=``: the op ``x_``, the call (and its rules') with ``inplace=True``. ``OUT_OF_PLACE`` on
    an in-place ``x_``: the op ``x``, the call on a clone of the first argument, its meta rule the in-place
    op's and its cost that plus the copy. A derived op's ATen overloads, names in ``nbxtensor``, methods and
    ``nn.functional`` names follow from this op's (``aten::x_.src`` and ``aten::x.src``). Pointwise ops take
    their in-place forms and ``out=`` from their table rows (``ops/pointwise.py``).
``samples``
    the op's sample inputs (``samples(op)`` -> ``ops/samples.py``'s ``Samples``); by default its family's
    (``family_samples``), read through ``samples_of``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
import functools
import inspect
from types import MappingProxyType, SimpleNamespace
from typing import Callable, Mapping, NamedTuple

from ..allocation import workspace_bytes
from ..promotion import can_cast
from ..shape import ShapeError, numel

__all__ = ["Cost", "TensorMeta", "OpDef", "register", "get", "lookup", "aten_adapter", "all_ops", "nbytes",
           "workspace_bytes", "public_function", "accepting_aliases", "KEYWORD_ALIASES", "tensor_attribute", "VIEW",
           "MAYBE_VIEW", "OUT", "OUT_EXACT", "INPLACE", "OUT_OF_PLACE", "family_samples", "samples_of"]


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


# ``OpDef.aliases``: what an op's outputs share with its first tensor argument
VIEW = "view"
MAYBE_VIEW = "maybe view"
# ``register(variants=)``: the forms derived from a declaration
OUT = "out"
OUT_EXACT = "out of the result's dtypes"
INPLACE = "inplace"
OUT_OF_PLACE = "out of place"


@dataclass(frozen=True, eq=False)  # an op is itself: equal and hashed by identity
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
    functional: tuple[str, ...] = ()
    functional_form: Callable | None = None
    key: Callable | None = None
    aliases: str | None = None
    adapters: Mapping[str, Callable] = field(default_factory=lambda: MappingProxyType({}))
    samples: Callable | None = None
    bound: bool = False

    def __call__(self, *args, **kwargs):
        return self.impl(*args, **kwargs)


_VARIANT_NAMES = (OUT, OUT_EXACT, INPLACE, OUT_OF_PLACE)
_OUT_VARIANTS = (OUT, OUT_EXACT)
_BY_NAME: dict[str, OpDef] = {}
_BY_ATEN: dict[str, OpDef] = {}
_FUNCTIONAL: dict[str, OpDef] = {}


def register(name: str, *, family: str, aten: tuple[str, ...] | list[str], meta: Callable, cost: Callable,
             api: tuple[str, ...] | None = None, methods: tuple[str, ...] = (), functional: bool | tuple[str, ...] = (),
             functional_form: Callable | None = None, key: Callable | None = None, aliases: str | None = None,
             adapters: Mapping[str, Callable] | None = None, variants: tuple[str, ...] = (),
             bound: bool = False, samples: Callable | None = None):
    """Declare op ``name``; used as a decorator on its implementation. The fields are the module's
    docstring's."""
    def wrap(impl: Callable) -> OpDef:
        for variant in variants:
            if variant not in _VARIANT_NAMES:
                raise ValueError(f"op {name!r}: variants are OUT, OUT_EXACT, INPLACE and OUT_OF_PLACE, not "
                                 f"{variant!r}")
            if variant not in _OUT_VARIANTS and (variant == OUT_OF_PLACE) != name.endswith("_"):
                raise ValueError(f"op {name!r}: OUT_OF_PLACE is the variant of an in-place op (a name ending in "
                                 f"'_'), INPLACE of one that is not")
        if OUT in variants and OUT_EXACT in variants:
            raise ValueError(f"op {name!r}: OUT and OUT_EXACT are two forms of one out=, not both")
        if INPLACE in variants:
            _inplace_signature(name, impl)
        if aliases not in (None, VIEW, MAYBE_VIEW):
            raise ValueError(f"op {name!r}: aliases must be None, VIEW or MAYBE_VIEW, not {aliases!r}")
        if functional_form is not None and not functional:
            raise ValueError(f"op {name!r} has a functional_form but no nn.functional name")
        unclaimed = set(adapters or ()) - set(aten)
        if unclaimed:
            raise ValueError(f"op {name!r} adapts ATen overloads it does not implement: {sorted(unclaimed)}")
        if "<locals>" in impl.__qualname__:  # Python names the qualname in argument errors: say the op's name
            impl.__qualname__ = name
        rules = (meta, cost)
        if bound:
            bind = arguments_binder(name, impl)
            rules = tuple(_on_bound_arguments(rule, bind) for rule in rules)
        out_variant = next((variant for variant in variants if variant in _OUT_VARIANTS), None)
        if out_variant is not None:
            impl = _taking_out(name, impl, exact_dtypes=out_variant == OUT_EXACT)
            rules = tuple(map(_ignoring_out, rules))
        op = _record(OpDef(name=name, family=family, aten=tuple(aten), meta=rules[0], cost=rules[1], impl=impl,
                           doc=impl.__doc__ or "", api=(name,) if api is None else tuple(api), methods=tuple(methods),
                           functional=(name,) if functional is True else tuple(functional or ()),
                           functional_form=functional_form, key=key, aliases=aliases,
                           adapters=MappingProxyType(dict(adapters or {})), samples=samples, bound=bound))
        for variant in variants:
            if variant not in _OUT_VARIANTS:
                _declare_variant(op, variant)
        return op
    return wrap


def _record(op: OpDef) -> OpDef:
    """``op`` recorded under its name, ATen overloads and ``nn.functional`` names; every claim is checked
    before any is recorded, so a refused declaration leaves no trace."""
    if op.name in _BY_NAME:
        raise ValueError(f"op {op.name!r} is declared twice")
    for overload in op.aten:
        if overload in _BY_ATEN:
            raise ValueError(f"ATen overload {overload!r} is claimed by {_BY_ATEN[overload].name!r} and {op.name!r}")
    for functional_name in op.functional:
        if functional_name in _FUNCTIONAL:
            raise ValueError(f"nn.functional.{functional_name} is claimed by {_FUNCTIONAL[functional_name].name!r} "
                             f"and {op.name!r}")
    _BY_ATEN.update(dict.fromkeys(op.aten, op))
    _FUNCTIONAL.update(dict.fromkeys(op.functional, op))
    _BY_NAME[op.name] = op
    return op


def arguments_binder(name: str, impl: Callable) -> Callable:
    """``bind(*args, **kwargs)``: a call's arguments as one object whose attributes are ``impl``'s parameters,
    defaults filled in (a ``*args`` parameter a tuple, a ``**kwargs`` one a dict); a call ``impl`` would
    refuse raises the same ``TypeError``. Built as a Python function of the same parameters, so binding
    costs one call."""
    parameters = list(inspect.signature(impl).parameters.values())
    written, keyword_only = [], False
    for parameter in parameters:
        if parameter.kind is parameter.VAR_POSITIONAL:
            written.append("*" + parameter.name)
            keyword_only = True
        elif parameter.kind is parameter.VAR_KEYWORD:
            written.append("**" + parameter.name)
        else:
            if parameter.kind is parameter.KEYWORD_ONLY and not keyword_only:
                written.append("*")
                keyword_only = True
            written.append(parameter.name)
            if parameter.kind is parameter.POSITIONAL_ONLY and (
                    parameter is parameters[-1] or parameters[parameters.index(parameter) + 1].kind
                    is not parameter.POSITIONAL_ONLY):
                written.append("/")
    fields = ", ".join(f"{p.name}={p.name}" for p in parameters)
    namespace = {"_Arguments": SimpleNamespace}
    exec(f"def {_BINDER}({', '.join(written)}):\n    return _Arguments({fields})\n", namespace)
    bind = namespace[_BINDER]
    bind.__defaults__ = tuple(p.default for p in parameters if p.default is not p.empty and
                              p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)) or None
    bind.__kwdefaults__ = {p.name: p.default for p in parameters
                           if p.default is not p.empty and p.kind is p.KEYWORD_ONLY} or None
    bind.__name__ = bind.__qualname__ = name  # argument errors name the op
    return bind


# the binder's name while it is compiled, a name no parameter takes
_BINDER = "_bind_arguments"


def _on_bound_arguments(rule: Callable, bind: Callable) -> Callable:
    """``rule`` of one bound-arguments object, called with the op's arguments."""
    def on_arguments(*args, **kwargs):
        return rule(bind(*args, **kwargs))
    on_arguments.__name__, on_arguments.__qualname__ = rule.__name__, rule.__qualname__
    on_arguments.__doc__ = rule.__doc__
    return on_arguments


def _taking_out(name: str, impl: Callable, exact_dtypes: bool) -> Callable:
    """``impl`` taking ``out=``: its result written into ``out`` (whose dtypes must be the result's where
    ``exact_dtypes``)."""
    signature = inspect.signature(impl)
    if "out" in signature.parameters:
        raise ValueError(f"op {name!r}: an OUT variant adds out= to an implementation that has none")
    parameters = list(signature.parameters.values())
    keywords_end = len(parameters) - (1 if parameters and parameters[-1].kind is inspect.Parameter.VAR_KEYWORD else 0)
    out = inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, default=None)

    def with_out(*args, out=None, **kwargs):
        result = impl(*args, **kwargs)
        return result if out is None else _write_out(name, result, out, exact_dtypes)
    with_out.__name__, with_out.__qualname__, with_out.__doc__ = impl.__name__, impl.__qualname__, impl.__doc__
    with_out.__signature__ = signature.replace(parameters=[*parameters[:keywords_end], out,
                                                           *parameters[keywords_end:]])
    return with_out


def _ignoring_out(rule: Callable) -> Callable:
    """A meta or cost rule called as the implementation is: ``out=`` changes no result's metadata, and its
    bytes are the result's."""
    @functools.wraps(rule)
    def without_out(*args, out=None, **kwargs):
        return rule(*args, **kwargs)
    return without_out


def _write_out(name: str, result, out, exact_dtypes: bool):
    """``result`` (a tensor or a tuple of them) written into ``out``, as ATen writes an ``out=`` argument."""
    if isinstance(result, tuple):
        if not isinstance(out, (tuple, list)) or len(out) != len(result):
            raise TypeError(f"{name}: out must be a tuple of {len(result)} tensors, got {type(out).__name__}")
        parts = getattr(result, "_fields", None) or [f"out[{i}]" for i in range(len(result))]
        for part, made, given in zip(parts, result, out):
            _check_out(name, part, made, given, exact_dtypes)
        written = [_write_one(made, given) for made, given in zip(result, out)]
        return type(result)(*written) if hasattr(result, "_fields") else tuple(written)
    _check_out(name, "out", result, out, exact_dtypes)
    return _write_one(result, out)


def _check_out(name: str, part: str, result, out, exact_dtypes: bool) -> None:
    """Refuse ``out`` (the result's ``part``) before anything is written, as ATen checks every output first."""
    if type(out) is not type(result):
        raise TypeError(f"{name}: out must be a Tensor, got {type(out).__name__}")
    if exact_dtypes and out.dtype is not result.dtype:
        raise RuntimeError(f"{name}() expects {part} to have dtype {result.dtype.name} but got {out.dtype.name}")
    if not can_cast(result.dtype, out.dtype):
        raise RuntimeError(f"{name}: result type {result.dtype.name} can't be cast to the desired output type "
                           f"{out.dtype.name}")
    if tuple(out.shape) != tuple(result.shape) and numel(out.shape):
        raise ShapeError(f"{name}: output with shape {tuple(out.shape)} doesn't match the result's shape "
                         f"{tuple(result.shape)}")


def _write_one(result, out):
    """``result`` copied into ``out`` (checked by ``_check_out``), an empty ``out`` resized first."""
    if tuple(out.shape) != tuple(result.shape):
        get("resize_").impl(out, tuple(result.shape))
    return get("copy_").impl(out, result)


def _declare_variant(op: OpDef, variant: str) -> OpDef:
    """The op ``variant`` of ``op`` (``register(variants=)``), declared."""
    if variant == INPLACE:
        name, renamed = op.name + "_", (lambda n: n + "_")
        impl, meta, cost = (_inplace_call(op.name, function) for function in (op.impl, op.meta, op.cost))
        api = tuple(map(renamed, op.api))
    else:
        name, renamed, impl, meta, cost = (op.name[:-1], (lambda n: n[:-1]), _out_of_place_call(op), op.meta,
                                           _out_of_place_cost(op))
        api = (op.name[:-1],)
    prefix = f"::{op.name}."
    aten = [overload.replace(prefix, f"::{name}.") for overload in op.aten if prefix in overload]
    adapters = {overload.replace(prefix, f"::{name}."): adapt for overload, adapt in op.adapters.items()
                if prefix in overload}
    return _record(OpDef(name=name, family=op.family, aten=tuple(aten), meta=meta, cost=cost, impl=impl,
                         doc=impl.__doc__, api=api, methods=tuple(map(renamed, op.methods)),
                         functional=tuple(map(renamed, op.functional)), adapters=MappingProxyType(adapters),
                         bound=op.bound))


def _inplace_signature(name: str, impl: Callable) -> inspect.Signature:
    """``impl``'s signature without ``inplace``; ``ValueError`` unless it takes ``inplace=`` and every other
    argument by name."""
    parameters = list(inspect.signature(impl).parameters.values())
    if any(p.kind in (p.POSITIONAL_ONLY, p.VAR_POSITIONAL) for p in parameters) or \
            "inplace" not in [p.name for p in parameters]:
        raise ValueError(f"op {name!r}: an INPLACE variant needs an implementation taking inplace= and every "
                         f"other argument by name")
    return inspect.Signature([p for p in parameters if p.name != "inplace"])


def _inplace_call(name: str, function: Callable) -> Callable:
    """``function`` (op ``name``'s implementation or one of its rules) called with ``inplace=True``, the
    ``inplace`` parameter gone from the implementation's signature."""
    signature = _inplace_signature(name, _BY_NAME[name].impl)
    var_keyword = next((p.name for p in signature.parameters.values() if p.kind is p.VAR_KEYWORD), None)

    def inplace_call(*args, **kwargs):
        # every argument by name: ``inplace`` may stand between positional parameters
        arguments = signature.bind(*args, **kwargs).arguments
        extra = arguments.pop(var_keyword, {}) if var_keyword else {}
        return function(**arguments, **extra, inplace=True)
    inplace_call.__name__ = inplace_call.__qualname__ = name + "_"
    inplace_call.__signature__ = signature
    inplace_call.__doc__ = f"``{name}`` in place: ``inplace=True``."
    return inplace_call


def _out_of_place_call(op: OpDef) -> Callable:
    """``op`` on a clone of its first argument."""
    def out_of_place_call(x, *args, **kwargs):
        return op.impl(get("clone").impl(x), *args, **kwargs)
    out_of_place_call.__name__ = out_of_place_call.__qualname__ = op.name[:-1]
    out_of_place_call.__signature__ = inspect.signature(op.impl)
    out_of_place_call.__doc__ = f"``{op.name}`` on a copy of its first argument."
    return out_of_place_call


def _out_of_place_cost(op: OpDef) -> Callable:
    """``op``'s cost and the copy of its first argument."""
    def cost(x, *args, **kwargs):
        inplace = op.cost(x, *args, **kwargs)
        return Cost(flops=inplace.flops, bytes_read=inplace.bytes_read + nbytes(x),
                    bytes_written=inplace.bytes_written + nbytes(x), workspace=inplace.workspace)
    return cost


def get(name: str) -> OpDef:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"no op named {name!r}; families: {', '.join(families())}") from None


def op_impl(name: str):
    """The implementation of registry op ``name``: how a composite calls the ops it is built of."""
    return get(name).impl


def lookup(aten_name: str) -> OpDef:
    """The op implementing an ATen overload such as ``aten::add.Tensor``; a bare ``aten::add``
    means its ``.default`` overload."""
    op = _BY_ATEN.get(aten_name) or _BY_ATEN.get(aten_name + ".default")
    if op is None:
        raise KeyError(f"no op implements {aten_name!r}; families that exist: {', '.join(families())}")
    return op


def aten_adapter(aten_name: str) -> Callable | None:
    """The adapter the op implementing exactly ``aten_name`` declares for it, None where it declares none."""
    op = _BY_ATEN.get(aten_name)
    return None if op is None else op.adapters.get(aten_name)


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


_TENSOR_ATTRIBUTES: dict[str, object] = {}


def tensor_attribute(name: str, value) -> None:
    """Declare a Tensor attribute that is no op's method (an operator, a property, a method that takes its
    arguments in an order of its own); ``bind`` sets it with the ops' methods."""
    if name in _TENSOR_ATTRIBUTES:
        raise ValueError(f"Tensor attribute {name!r} is declared twice")
    _TENSOR_ATTRIBUTES[name] = value


def bind(namespace: dict, tensor_class: type) -> None:
    """Expose every op under its API names in ``namespace`` and as methods of ``tensor_class``, and set the
    declared ``tensor_attribute``s: the only place Tensor gains attributes after its class body."""
    for name, value in _TENSOR_ATTRIBUTES.items():
        setattr(tensor_class, name, value)
    for op in _BY_NAME.values():
        function = public_function(op)
        for api_name in op.api:
            namespace[api_name] = function
        for method in op.methods:
            if method in _TENSOR_ATTRIBUTES:
                raise ValueError(f"Tensor attribute {method!r} is declared by op {op.name!r} and on its own")
            setattr(tensor_class, method, function)


def bind_functional(namespace: dict) -> list[str]:
    """Expose every op under its ``nn.functional`` names in ``namespace`` (the implementation, or its
    ``functional_form``); returns the names, sorted."""
    for functional_name, op in _FUNCTIONAL.items():
        namespace[functional_name] = op.impl if op.functional_form is None else op.functional_form
    return sorted(_FUNCTIONAL)
