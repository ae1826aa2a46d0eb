"""Plans keyed by a call's layout: shapes, strides, dtypes, device and options.

A model calls each op with the same layouts step after step, so the host work of choosing tiles,
merging dims, building constexprs and tuning is done for the first call of a layout and reused after;
a plan holds no tensors, only what the layout decided. The cache is bounded: past ``limit`` entries it
starts over (a workload of that many layouts is rare, and re-planning is correct, only slower).
Plans read the device's facts when made: whoever changes facts in a running process calls
``clear_all()``."""
from __future__ import annotations

from ..allocation import outside_arena
from ..launch import launch_slots

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


def clear_all() -> None:
    """Forget every plan (after a change of facts or tuning that plans were made under)."""
    for cache in _all_caches:
        cache.clear()


class PlanCache:
    def __init__(self, limit: int = 4096):
        self._plans: dict = {}
        self._limit = limit
        _all_caches.append(self)

    def get(self, key, make):
        """The plan for ``key``, made by ``make()`` the first time."""
        plan = self._plans.get(key)
        if plan is None:
            with outside_arena():
                plan = make()
            self.put(key, plan)
        return plan

    def lookup(self, key):
        """The plan for ``key``, or None."""
        return self._plans.get(key)

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
        self.key = tuple(constexprs.items())
        self.bound: dict = {}  # the compiled kernel and argument values, once known (``launch_slots``)

    def __call__(self, device, tensors: dict) -> None:
        launch_slots(self.kernel, self.grid, device, self.args, self.positions, [tensors[n] for n in self.names],
                     self.constexprs, self.key, self.bound)


def run_launches(device, launches, workspace, tensors: dict) -> None:
    """Carve ``workspace`` (an ``allocation.Workspace``) into ``tensors`` and run the planned launches."""
    workspace.allocate(device, tensors)
    for planned in launches:
        planned(device, tensors)
