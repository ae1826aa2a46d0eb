"""Plans keyed by a call's layout: shapes, strides, dtypes, device and options.

A model calls each op with the same layouts step after step, so the host work of choosing tiles,
merging dims, building constexprs and tuning is done for the first call of a layout and reused after;
a plan holds no tensors, only what the layout decided. The cache is bounded: past ``limit`` entries it
starts over (a workload of that many layouts is rare, and re-planning is correct, only slower).
Plans read the device's facts when made: whoever changes facts in a running process calls
``clear_all()``."""
from __future__ import annotations

import itertools

from .. import dtypes as _dtypes
from ..allocation import outside_arena
from ..launch import bind_slots, launch_slots
from ..tensor import Tensor

_all_caches: list = []


def layout_key(t):
    """What a plan may depend on of a tensor operand (or None): its dtype, shape, strides and device, as
    the int ``tensor.layout_key`` names them (kept on the tensor once asked); a tensor with no storage
    (meta) by the tuple itself."""
    if t is None:
        return None
    layout = t._layout
    if layout is None:
        layout = t._layout_key()
        if layout is None:
            return (t._dtype, t.shape, t.stride(), t.device)
    return layout


def positional_key(args):
    """The plan key of a call by positional tensors and Python scalars alone, or None: every tensor's layout
    and device, every scalar's type and value (floats by their exact text, since 0.0 == -0.0), the default
    float. A plan that is a function of these serves every call with an equal key. A tensor goes as its
    layout key (an int, see ``tensor.layout_key``), a scalar as its type and value or as a string, so one
    argument's items never read as another's."""
    if len(args) == 2:  # two tensors whose layout keys are known: the usual binary call, built directly
        x, y = args
        if type(x) is Tensor and type(y) is Tensor:
            layout_x, layout_y = x._layout, y._layout
            if layout_x is not None and layout_y is not None:
                return (_dtypes._default_float, layout_x, layout_y)
    key = [_dtypes._default_float]
    for a in args:
        kind = type(a)
        if kind is Tensor:
            layout = a._layout
            if layout is None:
                layout = a._layout_key()
                if layout is None:
                    return None
            key.append(layout)
        elif kind is float:
            key.append(a.hex())
        elif kind is int or kind is bool:
            key += (kind, a)
        else:
            return None
    return tuple(key)


def clear_all() -> None:
    """Forget every plan (after a change of facts or tuning that plans were made under)."""
    for cache in _all_caches:
        cache.clear()


class PlanCache:
    def __init__(self, limit: int = 4096):
        self._plans: dict = {}
        self._limit = limit
        self.lookup = self._plans.get  # ``lookup(key)``: the plan for ``key``, or None (the dict's own method)
        _all_caches.append(self)

    def get(self, key, make):
        """The plan for ``key``, made by ``make()`` the first time."""
        plan = self._plans.get(key)
        if plan is None:
            with outside_arena():
                plan = make()
            self.put(key, plan)
        return plan

    def put(self, key, plan) -> None:
        if len(self._plans) >= self._limit:
            self._plans.clear()
        self._plans[key] = plan

    def clear(self) -> None:
        self._plans.clear()

    def values(self):
        return self._plans.values()

    def __len__(self) -> int:
        return len(self._plans)


class Slot:
    """A tensor argument of a planned launch, named, and supplied at each call."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name


class PlannedLaunch:
    """One kernel launch whose arguments are all fixed except the tensors that ``Slot``s name."""

    __slots__ = ("kernel", "grid", "args", "positions", "names", "constexprs", "key", "bound")

    def __init__(self, kernel, grid, args, constexprs: dict):
        self.kernel, self.grid, self.args = kernel, grid, list(args)
        self.positions = [i for i, a in enumerate(self.args) if isinstance(a, Slot)]
        self.names = [self.args[i].name for i in self.positions]
        self.constexprs = constexprs
        self.key = constexpr_id(constexprs)
        self.bound: dict = {}  # the compiled kernel and argument values, once known (``launch_slots``)

    def __call__(self, device, tensors: dict) -> None:
        launch_slots(self.kernel, self.grid, device, self.args, self.positions, [tensors[n] for n in self.names],
                     self.constexprs, self.key, self.bound)

    def launch(self, device, values) -> None:
        """The launch with ``values``, one per slot in the order of ``args``."""
        launch_slots(self.kernel, self.grid, device, self.args, self.positions, values, self.constexprs, self.key,
                     self.bound)

    def bind(self, device, values, varying) -> tuple | None:
        """The bound form of this launch once compiled (``launch.bind_slots``): (launcher, backend), where
        ``launcher(stream, *addresses)`` launches with the slots at the indices ``varying`` at those
        addresses and every other slot as in ``values``; None where the launch has no bound form yet."""
        return bind_slots(self.grid, device, self.positions, values, self.bound, varying)


_constexpr_ids: dict = {}
_fresh_ids = itertools.count()  # ``next`` is atomic: racing threads never draw one id for two sets


def constexpr_id(constexprs: dict) -> int:
    """A small integer standing for one set of constexprs in the launch cache's key: hashing the set
    itself (jitted bodies, Triton dtypes) on every launch costs more than the rest of the key."""
    items = tuple(constexprs.items())
    known = _constexpr_ids.get(items)
    return known if known is not None else _constexpr_ids.setdefault(items, next(_fresh_ids))


def run_launches(device, launches, workspace, tensors: dict) -> None:
    """Carve ``workspace`` (an ``allocation.Workspace``) into ``tensors`` and run the planned launches."""
    workspace.allocate(device, tensors)
    for planned in launches:
        planned(device, tensors)
