"""Plans keyed by a call's layout: shapes, strides, dtypes, device and options.

A model calls each op with the same layouts step after step, so the host work of choosing tiles,
merging dims, building constexprs and tuning is done for the first call of a layout and reused after;
a plan holds no tensors, only what the layout decided. The cache is bounded: past ``limit`` entries it
starts over (a workload of that many layouts is rare, and re-planning is correct, only slower).
Plans read the device's facts when made: whoever changes facts in a running process calls
``clear_all()``."""
from __future__ import annotations

import itertools
from operator import itemgetter

from .. import dtypes as _dtypes
from .. import launch as _launch
from ..allocation import Workspace, arrival_counters, outside_arena
from ..device import backend_for
from ..launch import bind_slots, issue, launch_slots
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
    float, and which arguments are one tensor passed again (``x * x``), so that a call bound from its
    arguments' places reads the same places at every call of its key. A plan that is a function of these
    serves every call with an equal key. A tensor goes as its layout key (an int, see ``tensor.layout_key``),
    a scalar as its type and value or as a string, so one argument's items never read as another's."""
    if len(args) == 2:  # two tensors whose layout keys are known: the usual binary call, built directly
        x, y = args
        if type(x) is Tensor and type(y) is Tensor:
            layout_x, layout_y = x._layout, y._layout
            if layout_x is not None and layout_y is not None:
                return (_dtypes._default_float, layout_x, layout_y if x is not y else (_PASSED_AGAIN, 0))
    key = [_dtypes._default_float]
    tensors = []
    for a in args:
        kind = type(a)
        if kind is Tensor:
            layout = a._layout
            if layout is None:
                layout = a._layout_key()
                if layout is None:
                    return None
            for place, seen in enumerate(tensors):
                if seen is a:
                    layout = (_PASSED_AGAIN, place)
                    break
            tensors.append(a)
            key.append(layout)
        elif kind is float:
            key.append(a.hex())
        elif kind is int or kind is bool:
            key += (kind, a)
        else:
            return None
    return tuple(key)


def key_argument(value):
    """A call's argument as a plan key holds it: a number, a string or None as it is, any other sequence
    (a list, a tuple, a torch.Size) as a tuple."""
    return value if value is None or isinstance(value, (int, float, str)) else tuple(value)


# in a plan key, in place of a tensor's layout: (this, k), the k-th tensor argument passed again
_PASSED_AGAIN = "passed again"


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


# A kernel compiles on its first launch and binds on its second: a ``LaunchCall`` tries to bind its launches
# on this many calls where kernels compile, then keeps the general path (a kernel that needs Triton's own
# launcher never binds)
_BIND_TRIES = 4


class LaunchCall:
    """The planned launches of one call of a layout from one input tensor (a reduction, a scan, a row op, a
    selection), as a function of that tensor, returning the call's outputs as a tuple: ``launches`` in
    order, each slot naming the ``source`` (the input), an output (``outputs``: (slot names, ``make``) in
    the order returned; a ``make`` of None returns None and fills no slot) or a piece of the ``workspace``.

    Where kernels compile, a call also binds every launch (``PlannedLaunch.bind``); once all are bound
    (``launchers``), ``bound`` gives the call's bound form, which takes the addresses of the call's tensors
    straight to the bound launchers."""

    __slots__ = ("device", "launches", "workspace", "source", "outputs", "launchers", "_backend", "_itemsize",
                 "_tries")

    def __init__(self, device, launches, workspace, source: str, outputs: list):
        self.device, self.launches, self.workspace = device, list(launches), workspace
        self.source, self.outputs = source, [(tuple(names), make) for names, make in outputs]
        self.launchers = None  # per launch, its bound launcher (published whole)
        self._backend = backend_for(device)
        self._itemsize = None  # of the source's elements, known once bound
        self._tries = _BIND_TRIES

    def __call__(self, x: Tensor) -> tuple:
        named = {self.source: x}
        made = []
        for names, make in self.outputs:
            out = None if make is None else make()
            made.append(out)
            for name in names:
                named[name] = out
        run_launches(self.device, self.launches, self.workspace, named)
        if self.launchers is None and self._tries and self._backend.compiles_kernels:
            self._tries -= 1
            self._bind(named)
        return tuple(made)

    def _bind(self, named: dict) -> None:
        launchers = []
        for planned in self.launches:
            found = planned.bind(self.device, [named[name] for name in planned.names], range(len(planned.names)))
            if found is None:
                return
            launchers.append(found[0])
        self._itemsize = named[self.source]._dtype.itemsize
        self.launchers = tuple(launchers)

    def bound(self, pick, general):
        """The bound form of a call once ``launchers`` are known: ``call(x)`` returning the outputs' item
        ``pick`` (an int) or ``pick(*outputs)``, fresh outputs (and workspace) made as the general path makes
        them and every launch issued by its bound launcher on the current stream. ``general(x)`` (returning
        what ``call`` returns) serves the calls it does not: inside a capture (which records launches) and
        where an address is off Triton's 16-byte specialisation."""
        device, backend = self.device, self._backend
        # each slot's place among the call's addresses: source, outputs, pieces, counters
        sources = {self.source: 0}
        makers, places = [], []
        for place, (names, make) in enumerate(self.outputs):
            if make is not None:
                makers.append(make)
                places.append(place)
                sources.update(dict.fromkeys(names, len(makers)))
        pieces = self.workspace.offsets
        sources.update((name, 1 + len(makers) + i) for i, name in enumerate(pieces))
        workspace = self.workspace.buffer_maker(device) if pieces else None
        offsets = tuple(pieces.values())
        counters = self.workspace.counters
        counters_at: dict = {}  # stream -> the address of its arrival counters (kept for good)
        if counters:
            sources["counters"] = 1 + len(makers) + len(pieces)
        steps = []
        for launcher, planned in zip(self.launchers, self.launches):
            places_read = [sources[name] for name in planned.names]
            steps.append((launcher, itemgetter(*places_read) if len(places_read) > 1 else
                          (lambda addresses, i=places_read[0]: (addresses[i],))))
        itemsize = self._itemsize
        if places == [pick] and workspace is None and not counters and len(steps) == 1:
            return _bound_one(steps[0], itemsize, makers[0], general, backend, device)
        if type(pick) is int:
            finish = itemgetter(places.index(pick))
        elif len(places) == len(self.outputs):
            def finish(made):
                return pick(*made)
        else:
            def finish(made):
                full = [None] * len(self.outputs)
                for place, out in zip(places, made):
                    full[place] = out
                return pick(*full)
        stream_of, index = backend.current_stream_handle, device.index

        def call(x):
            source = _bound_source(x, itemsize)
            if source is None:
                return general(x)
            addresses = [source]
            made = []
            aligned = 0
            for make in makers:
                out = make()
                made.append(out)
                ptr = out._storage.buffer.ptr + out._offset * out._dtype.itemsize
                aligned |= ptr
                addresses.append(ptr)
            if workspace is not None:
                buffer = workspace()
                start = buffer._storage.buffer.ptr + buffer._offset
                aligned |= start
                addresses += [start + offset for offset in offsets]
            if aligned & 15:  # an output a graph's arena placed off 16 bytes
                return general(x)
            stream = stream_of(index)
            if counters:
                address = counters_at.get(stream)
                if address is None:
                    address = counters_at[stream] = arrival_counters(device, stream).data_ptr()
                addresses.append(address)
            for launcher, arguments in steps:
                issue(launcher, backend, device, stream, arguments(addresses))
            return finish(made)
        return call


def _bound_source(x: Tensor, itemsize: int):
    """``x``'s address for a bound call, or None where the general path must take the call: inside a capture
    (which records launches) or off Triton's 16-byte specialisation."""
    if _launch._captures_open:
        return None
    source = x._storage.buffer.ptr + x._offset * itemsize
    return None if source & 15 else source


def _bound_one(step, itemsize: int, make, general, backend, device):
    """``LaunchCall.bound`` of one launch from the source to one output, the usual reduction or row op."""
    launcher, arguments = step
    stream_of, index = backend.current_stream_handle, device.index

    def call(x):
        source = _bound_source(x, itemsize)
        if source is None:
            return general(x)
        out = make()
        target = out._storage.buffer.ptr + out._offset * out._dtype.itemsize
        if target & 15:  # an output a graph's arena placed off 16 bytes
            return general(x)
        issue(launcher, backend, device, stream_of(index), arguments((source, target)))
        return out
    return call


def binding_run(cache: PlanCache, key, execute, pick, general=None):
    """The entry of ``key`` in ``cache`` (a call-level plan) for calls that run ``execute(x)``, a ``LaunchCall``
    or any function returning a tuple of outputs, and return its item ``pick`` (an int) or
    ``pick(*outputs)``; ``general``, where given, is that call with checks of its own. Once a call has bound
    a ``LaunchCall``'s launches, the entry becomes its bound form (``LaunchCall.bound``); ``key`` None (a call
    planned for itself alone) publishes nothing."""
    if general is None:
        general = (lambda x: execute(x)[pick]) if type(pick) is int else (lambda x: pick(*execute(x)))
    if key is None or not isinstance(execute, LaunchCall):
        return general

    def run(x):
        result = general(x)
        if execute.launchers is not None:
            cache.put(key, execute.bound(pick, general))
        return result
    return run


_NO_WORKSPACE = Workspace({})


def one_launch_run(cache: PlanCache, key, device, launch: PlannedLaunch, source: str, outputs: list, pick):
    """``binding_run`` of a call that is one planned launch reading ``source`` and writing ``outputs`` (as
    ``LaunchCall`` takes them), with no workspace: a pool, a resample, a row op."""
    return binding_run(cache, key, LaunchCall(device, [launch], _NO_WORKSPACE, source, outputs), pick)
