"""The pointwise family: one engine that runs every row of ``pointwise_table.TABLE``.

A row says how an op reads its arguments (a parser returning operand slots), how its dtypes are
decided (``Rule``), which kernel body computes it, and which names it takes (``nbx.<name>``, Tensor
methods, in-place ``<name>_``, ``nbx.nn.functional``). ``_build`` turns each row into registry
entries; everything else (promotion, broadcasting, output layout, ``out=`` and in-place checks,
scalars as kernel arguments, the launch) is done once, here, for all of them.

Semantics follow ATen: promotion with weak scalars; integer inputs of float ops compute in the
default float; float16 and bfloat16 compute in float32 and round once on the store; a new output
takes the layout TensorIterator gives (the operands' common stride order); ``out=`` and in-place
results must be castable to the written tensor's dtype. Python scalars travel as kernel arguments
(their bits in the compute type); a 0-d tensor on the op's device is read through a zero stride, so
it never syncs the host; a 0-d tensor on the host is read as a Python scalar.

Integer division and remainder by zero: on the CPU device they raise ``ZeroDivisionError`` (as ATen
CPU does; the divisor is in host memory, so the check costs no sync). On a GPU nothing is checked
(that would need a sync) and the result is defined: quotient -1 (all bits set), remainder the
dividend. ``INT_MIN // -1`` wraps to ``INT_MIN`` and ``INT_MIN % -1`` is 0, on every device.

Host cost: a call is parsed and keyed on its metadata; the first call of a key works out its plan
(dtypes, output layout, the kernel's merged geometry and constexprs), later calls allocate, check what
depends on values and launch (see "running a call" below).

Layouts: operands are read through their strides by one flat skeleton; when an operand reads
contiguously along a dim other than the output's (``a + b.T``), a tiled skeleton covers those two dims
with 2-D tiles so that neither the loads nor the store go with a stride.

Complex: the arithmetic rows, ``exp``, ``abs``, ``angle``, ``sgn``, ``conj`` and comparisons for
equality have complex bodies; ``where`` and ``masked_fill`` select each component with the real
skeleton. Other rows refuse complex inputs.

Deviations from ATen, each deliberate: an ``out=`` tensor of the wrong shape is an error unless it
is empty (ATen resizes it with a warning); ``conj`` of a complex tensor returns a new tensor rather
than a lazy conjugate view; ``masked_fill`` of a real tensor refuses a complex value tensor (ATen
accepts one whose imaginary part is 0, which only a sync could tell), and a device value tensor is
converted as the kernel casts, without ATen's overflow check (which would need its value on the host).
"""
from __future__ import annotations

import inspect
from typing import Any, NamedTuple

import numpy as np

from .. import _runtime
from .. import allocation as _allocation
from .. import launch as _launch_module
from .. import shape as S
from ..allocation import allocate_tensor, new_tensor
from ..device import backend_for
from ..dtypes import get_dtype
from ..kernels import pointwise as K
from ..kernels.formats import FORMAT_NATIVE
from ..launch import cdiv, issue, launch, launch_slots, spread_block
from ..lowering import BITS_TYPE, conversion_flags, encode_scalar_wrapping, load_format, needs_index_64
from ..promotion import can_cast, get_default_dtype, result_type
from ..storage import Storage
from ..tensor import Size, Tensor, layout_key
from .copy import check_overlap
from .plans import PlanCache, PlannedLaunch, Slot, positional_key
from .registry import Cost, TensorMeta, nbytes, register

if _runtime.KERNEL_MODE == _runtime.INTERPRETED:
    from .pointwise_interpreter import install as _install_interpreter_libdevice

    _install_interpreter_libdevice()

KERNEL_MAX_RANK = 8
_D = {name: get_dtype(name) for name in ("bool", "int64", "float32", "float64", "complex64", "complex128")}
_SCALAR_TYPES = (bool, int, float, complex)


class IntegerDivisionByZero(ZeroDivisionError, RuntimeError):
    """Integer division or remainder by zero on the CPU device: a ZeroDivisionError, and a
    RuntimeError as torch raises for it."""


# ---- what a parser returns, and the dtype rules --------------------------------------------------

class Call(NamedTuple):
    """One op call, read by a row's parser. ``slots``: up to four operands (a tensor, a Python
    scalar or None), in the order the kernel body takes them. ``promote``: the slots whose dtypes
    decide the result (the others are parameters, converted to the compute type). ``mode``: the
    body's constexpr. ``rule``: overrides the row's dtype rule for this call."""
    slots: tuple
    promote: tuple
    mode: int = 0
    rule: str | None = None
    inplace: bool = False


# dtype rules: how the common dtype of the promoting slots becomes the compute and result dtypes
PROMOTE = "promote"        # computed and returned in the common dtype
FLOAT = "float"            # integers and bool compute in the default float
COMPARE = "compare"        # computed in the common dtype, returned as bool
COMPARE_FLOAT = "compare_float"  # computed in a float (the default float for integers), returned as bool

# which common dtypes a row accepts
ANY = "any"
NO_BOOL = "no_bool"
FLOATS = "floats"          # floating (and complex, where the row has a complex body)
INTEGERS = "integers"      # integer and bool
INTEGERS_NO_BOOL = "integers_no_bool"
REAL = "real"              # anything but complex


# How ATen names a pointwise op's overloads. Every unary op, and the binary ops ATen added with its
# structured kernels, have ``default`` and ``out``; the older binary ops have one overload for a tensor
# ``other`` and one for a scalar, whose out forms ATen names one of two ways.
OVERLOADS_DEFAULT = ("default", "out")
OVERLOADS_TENSOR_SCALAR = ("Tensor", "Scalar", "out", "Scalar_out")
OVERLOADS_TENSOR_SCALAR_OUT = ("Tensor", "Scalar", "Tensor_out", "Scalar_out")


class Row(NamedTuple):
    name: str
    body: Any
    parse: Any
    rule: str = PROMOTE
    accepts: str = ANY
    flops: int = 1
    aten: tuple | None = None       # ATen overloads when not the ones ``overloads`` names
    overloads: tuple = OVERLOADS_DEFAULT  # ATen's overload names, one of the schemes above
    api: tuple | None = None        # names in nbx (default: the name)
    methods: tuple | None = None    # Tensor methods (default: the name)
    inplace: bool = True            # a ``<name>_`` method
    inplace_api: tuple = ()         # names in nbx for the in-place form (torch.relu_)
    functional: tuple = ()          # names in nbx.nn.functional
    adapters: tuple = ()            # (ATen overload, adapter) pairs (``register(adapters=)``), in-place ones too
    complex_body: Any = None        # body of pointwise_complex, when complex inputs are supported
    complex_mode: int = 0
    check: Any = None               # check(call, common_dtype) raising for refused cases
    result: Any = None              # result(common_dtype) -> result dtype override


# ---- metadata: dtypes and shapes ----------------------------------------------------------------

def _is_tensor(x) -> bool:
    if type(x) is Tensor:
        return True
    return hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, (bool, int, float, complex))


def _is_scalar(x) -> bool:
    if type(x) in _SCALAR_TYPES:
        return True
    return isinstance(x, (bool, int, float, complex, np.generic))


def _python_scalar(x):
    return x.item() if isinstance(x, np.generic) else x


def _compute_dtype(common):
    """The dtype a kernel computes in: float32 for the half types, else the common dtype itself."""
    if common.name in ("float16", "bfloat16"):
        return _D["float32"]
    return common


def _category(compute) -> int:
    if compute.kind == "bool":
        return K.CAT_BOOL.value
    if compute.kind == "int":
        return K.CAT_INT.value
    if compute.kind == "uint":
        return K.CAT_UINT.value
    return K.CAT_FLOAT64.value if compute.itemsize == 8 else K.CAT_FLOAT32.value


class Plan(NamedTuple):
    call: Call
    shape: tuple
    common: Any      # the promoted dtype of the promoting slots
    compute: Any     # the dtype the kernel computes in
    result: Any      # the dtype of a new output


def _plan(row: Row, args, kwargs) -> Plan:
    """Everything about a call that metadata decides: slots, shape, dtypes. No memory is touched."""
    return _plan_call(row, row.parse(*args, **kwargs))


def _plan_call(row: Row, call: Call) -> Plan:
    rule = call.rule or row.rule
    for s in call.slots:
        if s is not None and not _is_tensor(s) and not _is_scalar(s):
            raise TypeError(f"{row.name}: expected a tensor or a number, got {type(s).__name__}")
    if call.promote:
        operands = [_python_scalar(call.slots[i]) for i in call.promote if call.slots[i] is not None]
        common = result_type(*operands)
    else:
        common = _D["bool"]
    _check_accepts(row, common)
    if row.check is not None:
        row.check(call, common)
    if rule in (FLOAT, COMPARE_FLOAT) and not (common.is_floating_point or common.is_complex):
        common_for_compute = get_default_dtype()
    else:
        common_for_compute = common
    compute = _compute_dtype(common_for_compute)
    if rule in (COMPARE, COMPARE_FLOAT):
        result = _D["bool"]
    elif row.result is not None:
        result = row.result(common_for_compute)
    else:
        result = common_for_compute
    tensors = [s for s in call.slots if s is not None and _is_tensor(s)]
    shape = S.broadcast_shapes(*[tuple(t.shape) for t in tensors]) if tensors else ()
    return Plan(call, shape, common, compute, result)


def _check_accepts(row: Row, common) -> None:
    kind = common.kind
    if getattr(common, "storage_only", False):
        raise NotImplementedError(f"{row.name}: {common.name} is a storage-only dtype; convert it to a "
                                  "computing dtype (float16, bfloat16, float32) first")
    if kind == "complex" and row.complex_body is None:
        raise NotImplementedError(f"{row.name} is not implemented for complex tensors ({common.name})")
    refused = ((row.accepts == NO_BOOL and kind == "bool")
               or (row.accepts == FLOATS and kind not in ("float", "complex"))
               or (row.accepts == INTEGERS and kind not in ("bool", "int", "uint"))
               or (row.accepts == INTEGERS_NO_BOOL and kind not in ("int", "uint")))
    if refused:
        raise NotImplementedError(f"{row.name} is not implemented for {common.name} tensors")


def _meta(row: Row, args, kwargs, out=None) -> TensorMeta:
    plan = _plan(row, args, kwargs)
    if out is not None:
        return TensorMeta(plan.shape, out.dtype)
    return TensorMeta(plan.shape, plan.result)


def _cost(row: Row, args, kwargs, out=None) -> Cost:
    plan = _plan(row, args, kwargs)
    numel = S.numel(plan.shape)
    read = sum(nbytes(s) for s in plan.call.slots if s is not None and _is_tensor(s))
    written = numel * (out.dtype if out is not None else plan.result).itemsize
    complex_factor = 4 if plan.compute.is_complex else 1
    return Cost(flops=numel * row.flops * complex_factor, bytes_read=read, bytes_written=written)


# ---- output layout ------------------------------------------------------------------------------

def output_strides(shape, stride_sets) -> tuple:
    """The strides TensorIterator gives a new output of ``shape`` for operands read with
    ``stride_sets`` (already broadcast to ``shape``): contiguous when every operand is; an operand
    layout they all share; otherwise dims ordered by the first operand whose strides decide each
    comparison (broadcast dims abstain), as ATen's ``reorder_dimensions`` does."""
    if all(S.is_contiguous(shape, st) for st in stride_sets):
        return S.contiguous_strides(shape)
    first = stride_sets[0]
    if all(st == first for st in stride_sets) and S.is_non_overlapping_and_dense(shape, first):
        return tuple(first)

    def should_swap(dim0, dim1):
        for st in stride_sets:
            s0, s1 = st[dim0], st[dim1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 != s1:
                return 1 if s0 > s1 else -1
            if shape[dim0] > shape[dim1]:
                return 1
        return 0

    return S.dense_strides_in_order(shape, should_swap)


# ---- running a call -----------------------------------------------------------------------------
#
# A call is parsed, then keyed on everything that decides its plan: the row, the parsed mode, rule and
# promoting slots, the operands' shapes, strides, dtypes and devices, the Python types of its scalars,
# the out tensor's geometry, the in-place flag and the default float. The plan (dtypes, the output's
# layout, the kernel's merged geometry and constexprs) is worked out on the first call of a key; a
# repeated call only checks what depends on values (the row's check, overlap of memory, integer
# division by zero on the CPU), allocates its output and launches with its pointers and scalar bits.

_call_plans = PlanCache()
_HOST_SCALAR = object()  # in a plan's slots: a 0-d host tensor, read as a Python scalar on every call
_DIVISIONS = frozenset(("div", "floor_divide", "remainder", "fmod"))


class _RealLaunch(NamedTuple):
    """The real skeleton's planned launch, and where a call's slots go in it: its slots are the output, one
    pointer per kernel operand, then one scalar's bits per kernel operand."""
    planned: PlannedLaunch
    pointer_slots: tuple   # per kernel operand: the call slot whose tensor it reads, or -1 (the output, unread)
    scalar_slots: tuple    # per kernel operand: the call slot whose scalar it takes, or -1 (bits 0)

    def values(self, out, slots, compute) -> list:
        """The planned launch's slot values for a call writing ``out`` from ``slots``."""
        return [out, *[out if i < 0 else slots[i] for i in self.pointer_slots],
                *[0 if i < 0 else encode_scalar_wrapping(slots[i], compute) for i in self.scalar_slots]]


_OPERAND_POINTERS = tuple(Slot(f"x{k}") for k in range(4))
_OPERAND_BITS = tuple(Slot(f"bits{k}") for k in range(4))


def _launch_of(kernel, grid, n, shape, out_strides, pointer_slots, strides, scalar_slots, constexprs) -> _RealLaunch:
    operands = len(pointer_slots)
    args = [Slot("out"), n, shape, out_strides, *_OPERAND_POINTERS[:operands], *strides, *_OPERAND_BITS[:operands]]
    return _RealLaunch(PlannedLaunch(kernel, grid, args, constexprs), tuple(pointer_slots), tuple(scalar_slots))


class _CallPlan(NamedTuple):
    """Everything one key of call decides; holds no tensor, so it keeps no memory alive."""
    device: Any
    backend: Any
    shape: tuple
    common: Any
    compute: Any
    result: Any
    host_scalar_slots: tuple   # 0-d host tensors read as Python scalars
    new_out: tuple | None      # (strides, bytes) of a new output; None when out is given
    empty: bool
    division_check: bool
    launch: _RealLaunch | None  # None: the general path (complex, or more dims than the kernel indexes)


def _call_key(row: Row, call: Call, out, inplace: bool):
    """The plan key of a parsed call, or None for a call the cache does not hold (an unusual operand)."""
    parts = [row, call.mode, call.rule, call.promote, inplace, get_default_dtype(), len(call.slots), out is None]
    for s in call.slots:
        if type(s) is Tensor:
            storage = s._storage
            parts += (s._shape, s._strides, s._dtype, None if storage is None else storage.device)
        elif s is None or type(s) in _SCALAR_TYPES or isinstance(s, np.generic):
            parts.append(type(s))
        else:
            return None
    if out is not None:
        if type(out) is not Tensor or out._storage is None:
            return None
        parts += (out._shape, out._strides, out._dtype, out._storage.device)
    return tuple(parts)


def _bind_fast_call(plan: _CallPlan, args, slots, out: Tensor):
    """The call of ``plan`` as a function of the positional ``args`` of a later call with the same
    ``positional_key``: it allocates the output and issues the launch in its bound form
    (``PlannedLaunch.bind``), with this call's scalar bits fixed and the stream, the output's and the
    operands' addresses the only arguments that change. Returns None for calls it does not serve (an operand
    that is no argument, a launch with no bound form); the call returns None when an address of a
    later call is off Triton's 16-byte specialisation, and the general path takes over."""
    real = plan.launch
    arg_of = []  # per kernel operand: the argument whose address it takes, or -1 (the output's, unread)
    for i in real.pointer_slots:
        found = [-1] if i < 0 else [j for j, a in enumerate(args) if a is slots[i]]
        if not found:
            return None
        # one tensor in several places (``x * x``): the key says they hold one tensor at every call
        arg_of.append(found[0])
    outputs = [1 + k for k, j in enumerate(arg_of) if j < 0] + [0]  # slots taking the output's address
    read = [(1 + k, j) for k, j in enumerate(arg_of) if j >= 0]  # (slot, argument) of the operands read
    bound = real.planned.bind(plan.device, real.values(out, slots, plan.compute), outputs + [k for k, _ in read])
    if bound is None:
        return None
    launcher, backend = bound
    copies = len(outputs)
    operands = tuple((j, args[j]._dtype.itemsize) for _, j in read)
    shape, result, device = Size(plan.shape), plan.result, plan.device
    strides, nbytes = plan.new_out
    stream_of, index, allocate = backend.current_stream_handle, device.index, backend.allocate
    layout = layout_key(shape, tuple(strides), result, device)  # every output of this call has this layout
    parked = backend.parked_buffers(index) or (lambda nbytes, stream: None)

    def call(args):
        stream = stream_of(index)
        if _allocation.arena_service is None:
            buffer = parked(nbytes, stream) or allocate(nbytes, index)
            made = Tensor._make(Storage(device, nbytes, buffer), 0, shape, strides, result)
            aligned = buffer.ptr
        else:
            made = allocate_tensor(shape, strides, result, device, nbytes)  # a view into a graph's arena
            aligned = made.data_ptr()
        made._layout = layout
        addresses = [aligned] * copies
        for j, itemsize in operands:
            a = args[j]
            ptr = a._storage.buffer.ptr + a._offset * itemsize
            addresses.append(ptr)
            aligned |= ptr
        if aligned & 15:
            return None
        issue(launcher, backend, device, stream, addresses)
        return made
    return call


def _run(row: Row, args, kwargs, out=None, inplace=False, bind_to=None):
    """One call of ``row``. ``bind_to`` (bound calls, key), given for a call by positional arguments alone,
    receives the call's bound form under its ``positional_key`` once its kernel is compiled and bound (see
    ``_bind_fast_call``)."""
    call = row.parse(*args, **kwargs)
    inplace = inplace or call.inplace
    key = _call_key(row, call, out, inplace)
    plan = _call_plans.lookup(key) if key is not None else None
    if plan is None:
        plan, cacheable = _build_call_plan(row, call, out, inplace)
        if key is not None and cacheable:
            _call_plans.put(key, plan)
    elif row.check is not None:
        row.check(call, plan.common)
    slots = call.slots
    if plan.host_scalar_slots:
        slots = list(slots)
        for i in plan.host_scalar_slots:
            slots[i] = slots[i].item()
    if inplace:
        out = call.slots[call.promote[0]]
    if plan.new_out is None:
        for s in slots:
            # overlap is a matter of addresses, checked on every call; ``out`` itself was checked on the first
            if type(s) is Tensor and s._storage is out._storage and s is not out:
                check_overlap(out, s)
    else:
        strides, size = plan.new_out
        out = allocate_tensor(plan.shape, strides, plan.result, plan.device, size)
    if plan.empty:
        return out
    if plan.division_check:
        _check_integer_division(row, call, slots)
    if plan.backend.compiles_kernels:
        _execute(row, call, plan, out, slots)
        if bind_to is not None and plan.launch is not None and plan.new_out is not None and not plan.host_scalar_slots:
            bound_call = _bind_fast_call(plan, args, slots, out)
            if bound_call is not None:
                bind_to[0].put(bind_to[1], bound_call)
    else:
        _execute(row, call, plan, out, slots)
    return out


def _build_call_plan(row: Row, call: Call, out, inplace: bool):
    """The plan of a call, with every check that metadata decides (raising as ATen does), and whether
    it may be cached: not when an empty ``out`` was resized, which happens on its first call only."""
    plan = _plan_call(row, call)
    slots = list(call.slots)
    tensors = [s for s in slots if isinstance(s, Tensor)]
    if inplace:
        target = slots[call.promote[0]]
        if not isinstance(target, Tensor):
            raise TypeError(f"{row.name}_: the tensor written in place must be a Tensor")
        out = target
    dev = _common_device(row, tensors, out)
    # a 0-d tensor held on the host joins a device op as a Python scalar, as ATen's CPU scalars do
    host_scalar_slots = tuple(i for i, s in enumerate(slots)
                              if isinstance(s, Tensor) and s.device != dev and s.ndim == 0)
    for i in host_scalar_slots:
        slots[i] = _HOST_SCALAR
    for t in slots:
        if isinstance(t, Tensor) and t.is_meta:
            raise RuntimeError(f"{row.name}: a meta tensor has no data")
    shape = plan.shape
    cacheable = True
    operand_tensors = [(i, s) for i, s in enumerate(slots) if isinstance(s, Tensor)]
    broadcast = {i: S.broadcast_strides(s.shape, s.stride(), shape) for i, s in operand_tensors}
    if out is not None:
        resizing = tuple(out.shape) != tuple(plan.shape)
        out = _prepare_out(row, plan, out, inplace, dev)
        cacheable = not resizing
        for _, s in operand_tensors:
            check_overlap(out, s)
        out_strides, new_out = out.stride(), None
    else:
        out_strides = (output_strides(shape, list(broadcast.values())) if broadcast
                       else S.contiguous_strides(shape))
        count = S.max_offset(shape, out_strides) + 1 if S.numel(shape) else 0
        new_out = (out_strides, count * plan.result.itemsize)
    out_dtype = out.dtype if out is not None else plan.result
    backend = backend_for(dev)
    numel = S.numel(shape)
    launch_plan = None
    if numel and not plan.compute.is_complex:
        launch_plan = _plan_real_launch(row, call, plan, shape, out_strides, out_dtype, dev, slots, broadcast)
    division_check = (dev.type == "cpu" and plan.compute.is_integral and row.name in _DIVISIONS
                      and not (row.name == "div" and call.mode == 0))
    return _CallPlan(dev, backend, shape, plan.common, plan.compute, plan.result, host_scalar_slots, new_out,
                     numel == 0, division_check, launch_plan), cacheable


def _execute(row: Row, call: Call, plan: _CallPlan, out: Tensor, slots) -> None:
    real = plan.launch
    if real is None:
        shape = plan.shape
        views = [s._view(shape, S.broadcast_strides(s.shape, s.stride(), shape)) if isinstance(s, Tensor) else s
                 for s in slots]
        metadata = Plan(call, shape, plan.common, plan.compute, plan.result)
        launcher = _launch_complex if plan.compute.is_complex else _launch_real
        launcher(row, call, metadata, out, views)
        return
    # a tensor's pointer is that of its first element whatever its view, so slots go as they are;
    # ``real.values`` and ``PlannedLaunch.launch`` inlined, as this is every pointwise call's general path
    compute, planned = plan.compute, real.planned
    values = [out, *[out if i < 0 else slots[i] for i in real.pointer_slots],
              *[0 if i < 0 else encode_scalar_wrapping(slots[i], compute) for i in real.scalar_slots]]
    launch_slots(planned.kernel, planned.grid, plan.device, planned.args, planned.positions, values,
                 planned.constexprs, planned.key, planned.bound)


def _common_device(row: Row, tensors, out):
    devices = {t.device for t in tensors if t.ndim > 0}
    if not devices:
        devices = {t.device for t in tensors}
    if out is not None:
        devices.add(out.device)
    if len(devices) > 1:
        raise RuntimeError(f"{row.name}: expected all tensors on one device, got "
                           f"{', '.join(sorted(map(str, devices)))}")
    if not devices:
        raise TypeError(f"{row.name}: expected at least one tensor argument")
    return devices.pop()


def _prepare_out(row: Row, plan: Plan, out, inplace: bool, dev):
    name = row.name + ("_" if inplace else "")
    if not isinstance(out, Tensor):
        raise TypeError(f"{name}: out must be a Tensor, got {type(out).__name__}")
    if not can_cast(plan.result, out.dtype):
        raise RuntimeError(f"{name}: result type {plan.result.name} can't be cast to the desired output type "
                           f"{out.dtype.name}")
    if tuple(out.shape) != tuple(plan.shape):
        if inplace or out.numel() != 0:
            raise S.ShapeError(f"{name}: output with shape {tuple(out.shape)} doesn't match the broadcast shape "
                               f"{tuple(plan.shape)}")
        fresh = new_tensor(plan.shape, out.dtype, dev)
        out._storage, out._offset, out._shape, out._strides = (fresh._storage, 0, fresh._shape, fresh._strides)
        out._layout = None
    return out


def _check_integer_division(row: Row, call: Call, slots) -> None:
    """ATen CPU raises for integer division and remainder by zero; so do we on the CPU device."""
    divisor = slots[1]
    if isinstance(divisor, Tensor):
        has_zero = bool((divisor.numpy() == 0).any())
    else:
        has_zero = divisor == 0
    if has_zero:
        raise IntegerDivisionByZero("ZeroDivisionError: integer division or remainder by zero")


def _plan_real_launch(row: Row, call: Call, plan, shape, out_strides, out_dtype, dev, slots, broadcast):
    """The real skeleton's launch for ``slots`` (tensors read with their ``broadcast`` strides, scalars,
    None), writing ``out_dtype`` with ``out_strides``; None when the merged dims exceed the kernel's."""
    import triton.language as tl
    tensor_slots = [i for i, s in enumerate(slots) if isinstance(s, Tensor)]
    merged, merged_strides = S.coalesce(shape, out_strides, *[broadcast[i] for i in tensor_slots])
    if len(merged) > KERNEL_MAX_RANK:
        return None
    if not merged:
        merged = (1,)
        merged_strides = [(0,) for _ in merged_strides]
    rank = len(merged)
    n = S.numel(shape)
    index_64 = needs_index_64(*((merged, st) for st in merged_strides), count=n)
    compute = plan.compute
    pointer_slots, strides, scalar_slots, kinds, formats = [], [], [], [], []
    operand_strides = iter(merged_strides[1:])
    for i, v in enumerate(list(slots) + [None] * (4 - len(slots))):
        if isinstance(v, Tensor):
            pointer_slots.append(i)
            strides.append(next(operand_strides))
            scalar_slots.append(-1)
            kinds.append(K.OPERAND_TENSOR.value)
            formats.append(load_format(v.dtype))
        else:
            pointer_slots.append(-1)
            strides.append((0,) * rank)
            scalar_slots.append(-1 if v is None else i)
            kinds.append(K.OPERAND_ABSENT.value if v is None else K.OPERAND_SCALAR.value)
            formats.append(FORMAT_NATIVE.value)
    body_result = _D["bool"] if plan.result.kind == "bool" and row.rule in (COMPARE, COMPARE_FLOAT) else compute
    if compute.kind == "bool":
        body_result = _D["bool"]
    flags = conversion_flags(body_result, out_dtype, dev)
    block = _block(backend_for(dev).facts["kernels"], row.flops >= HEAVY_BODY_FLOPS, n, dev)
    compute_type = tl.int1 if compute.kind == "bool" else compute.triton
    constexprs = dict(BODY=row.body, MODE=call.mode, COMPUTE=compute_type, CATEGORY=_category(compute),
                      K0=kinds[0], K1=kinds[1], K2=kinds[2], K3=kinds[3],
                      F0=formats[0], F1=formats[1], F2=formats[2], F3=formats[3],
                      BITS_TYPE=getattr(tl, BITS_TYPE[max(compute.itemsize, 1)]),
                      OUT_FORMAT=flags["DST_FORMAT"], VIA_F32=flags["VIA_F32"], FLOAT_TO_INT=flags["FLOAT_TO_INT"],
                      RANK=rank, INDEX_64=index_64)
    tile = backend_for(dev).facts["kernels"].get("pointwise_tile", DEFAULT_TILE)
    tiled = _tile_order(merged, merged_strides[0], [st for st, k in zip(strides, kinds) if k == K.OPERAND_TENSOR.value],
                        tile)
    if tiled is not None:
        merged = tuple(merged[d] for d in tiled)
        out_strides = tuple(merged_strides[0][d] for d in tiled)
        strides = [tuple(st[d] for d in tiled) for st in strides]
        grid = (cdiv(merged[-2], tile) * cdiv(merged[-1], tile), S.numel(merged[:-2]))
        constexprs.update(BLOCK_M=tile, BLOCK_N=tile)
        return _launch_of(K.pointwise_tiled, grid, n, merged, out_strides, pointer_slots, strides, scalar_slots,
                          constexprs)
    constexprs.update(BLOCK=block, PDL=_launch_module.dependent_launch(dev))
    return _launch_of(K.pointwise, (cdiv(n, block),), n, merged, merged_strides[0], pointer_slots, strides,
                      scalar_slots, constexprs)


DEFAULT_TILE = 32
HEAVY_BODY_FLOPS = 40  # bodies costing this much per element take the facts' heavy block
MIN_HEAVY_BLOCK = 512


def _block(kernel_facts: dict, heavy: bool, n: int, dev) -> int:
    """Elements a program of ``n``: the facts' block, or for a costly body their heavy block spread over the
    device (``spread_block``, to MIN_HEAVY_BLOCK: 64 x 3072 made 48 programs of 4096 for 132 SMs). The
    interpreter, which runs programs one after another, keeps its one block."""
    if not heavy or kernel_facts.get("interpreted"):
        return kernel_facts["elementwise_block"]
    return spread_block(kernel_facts["elementwise_block_heavy"], MIN_HEAVY_BLOCK, n, dev)


_MAX_GRID_Y = 65535


def _unit_dim(shape, strides):
    """The dim an operand reads contiguously (stride 1, more than one element), if any."""
    for d in range(len(shape) - 1, -1, -1):
        if strides[d] == 1 and shape[d] > 1:
            return d
    return None


def _tile_order(shape, out_strides, operand_strides, tile: int):
    """The dims in the order a tiled launch takes them (the tile's rows and columns last), when an
    operand reads contiguously along a dim other than the output's and both dims span a tile; else None."""
    columns = _unit_dim(shape, out_strides)
    if columns is None or shape[columns] < tile:
        return None
    for strides in operand_strides:
        rows = _unit_dim(shape, strides)
        if rows is not None and rows != columns and shape[rows] >= tile:
            order = [d for d in range(len(shape)) if d not in (rows, columns)] + [rows, columns]
            if S.numel([shape[d] for d in order[:-2]]) > _MAX_GRID_Y:
                return None
            return tuple(order)
    return None


def _launch_real(row: Row, call: Call, plan: Plan, out: Tensor, views) -> None:
    """The real skeleton over ``views`` (already broadcast to ``out``), one leading index at a time
    where the merged dims exceed the kernel's."""
    shape = tuple(out.shape)
    broadcast = {i: v.stride() for i, v in enumerate(views) if isinstance(v, Tensor)}
    real = _plan_real_launch(row, call, plan, shape, out.stride(), out.dtype, out.device, views, broadcast)
    if real is None:
        for i in range(shape[0]):
            _launch_real(row, call, plan, out[i], [v[i] if isinstance(v, Tensor) else v for v in views])
        return
    real.planned.launch(out.device, real.values(out, views, plan.compute))


# a row's complex_body for selections (where, masked_fill): slot 0 is a condition, and each component
# of the result is selected from the same component of the other slots, by the real skeleton
SELECT_COMPONENTWISE = "select_componentwise"


def _launch_selection_componentwise(row: Row, call: Call, plan: Plan, out: Tensor, views) -> None:
    from .views import select, view_as_real
    compute = plan.compute
    component = compute.to_real()
    shape = tuple(out.shape)
    target = out if out.dtype is compute else new_tensor(shape, compute, out.device)
    pairs = view_as_real(target)
    component_plan = Plan(call, shape, component, component, component)
    for k in (0, 1):
        component_views = [views[0]]
        for v in views[1:]:
            if isinstance(v, Tensor):
                # a real tensor's imaginary part is 0
                component_views.append(select(view_as_real(v), -1, k) if v.dtype.is_complex else v if k == 0 else 0)
            elif v is None:
                component_views.append(None)
            else:
                value = complex(_python_scalar(v))
                component_views.append(value.imag if k else value.real)
        _launch_real(row, call, component_plan, select(pairs, -1, k), component_views)
    if target is not out:
        out.copy_(target)


def _launch_complex(row: Row, call: Call, plan: Plan, out: Tensor, views) -> None:
    import triton.language as tl

    from .views import select, view_as_real
    if row.complex_body == SELECT_COMPONENTWISE:
        _launch_selection_componentwise(row, call, plan, out, views)
        return
    compute = plan.compute if plan.compute.is_complex else plan.compute.to_complex()
    component = compute.to_real()
    if len(views) > 2:
        raise NotImplementedError(f"{row.name} is not implemented for complex operands")
    shape = tuple(out.shape)
    operands, kinds, bits = [], [], []
    for v in list(views) + [None] * (2 - len(views)):
        if isinstance(v, Tensor):
            if v.dtype.is_complex:
                if v.dtype is not compute:
                    v = v.to(compute)
                operands.append(select(view_as_real(v), -1, 0))
                kinds.append(K.OPERAND_COMPLEX_TENSOR.value)
            else:
                operands.append(v.to(component) if v.dtype is not component else v)
                kinds.append(K.OPERAND_TENSOR.value)
            bits += [0, 0]
        else:
            operands.append(None)
            kinds.append(K.OPERAND_ABSENT.value if v is None else K.OPERAND_SCALAR.value)
            value = complex(0 if v is None else _python_scalar(v))
            bits += [encode_scalar_wrapping(value.real, component), encode_scalar_wrapping(value.imag, component)]
    complex_out = out.dtype.is_complex and row.result is None and row.rule not in (COMPARE, COMPARE_FLOAT)
    if complex_out:
        target = out if out.dtype is compute else new_tensor(shape, compute, out.device)
        written = select(view_as_real(target), -1, 0)
    else:
        result_dtype = _D["bool"] if row.rule in (COMPARE, COMPARE_FLOAT) else component
        target = out if out.dtype is result_dtype else new_tensor(shape, result_dtype, out.device)
        written = target
    stride_sets = [written.stride()] + [o.stride() for o in operands if o is not None]
    merged, merged_strides = S.coalesce(shape, *stride_sets)
    if len(merged) > KERNEL_MAX_RANK:
        # more dims than the kernel indexes that do not merge: the operands (broadcasts materialised) and
        # the result go through dense copies, whose dims merge into one
        dense_out = out if out.is_contiguous() else new_tensor(shape, out.dtype, out.device)
        _launch_complex(row, call, plan, dense_out, [v.contiguous() if isinstance(v, Tensor) else v for v in views])
        if dense_out is not out:
            out.copy_(dense_out)
        return
    if not merged:
        merged = (1,)
        merged_strides = [(0,) for _ in merged_strides]
    rank = len(merged)
    tensor_strides = iter(merged_strides[1:])
    pointers = [o if o is not None else written for o in operands]
    strides = [next(tensor_strides) if o is not None else (0,) * rank for o in operands]
    n = out.numel()
    index_64 = needs_index_64(*((merged, st) for st in merged_strides), count=n, reach=1)
    block = backend_for(out.device).facts["kernels"]["elementwise_block"]
    launch(K.pointwise_complex, (cdiv(n, block),), out.device,
           [written, n, merged, merged_strides[0], *pointers, *strides, *bits],
           BODY=row.complex_body, MODE=row.complex_mode, COMPUTE=component.triton, K0=kinds[0], K1=kinds[1],
           BITS_TYPE=getattr(tl, BITS_TYPE[component.itemsize]), COMPLEX_OUT=complex_out, RANK=rank,
           INDEX_64=index_64, BLOCK=block)
    if target is not out:
        out.copy_(target)


# ---- building the API from the table ------------------------------------------------------------


def _signature(row: Row, with_out: bool):
    params = list(inspect.signature(row.parse).parameters.values())
    if with_out:
        params.append(inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, default=None))
    return inspect.Signature(params)


def _build(row: Row) -> None:
    fast_calls = PlanCache()
    lookup = fast_calls.lookup

    def impl(*args, out=None, **kwargs):
        if out is None and not kwargs and not _launch_module._captures_open:
            key = positional_key(args)
            if key is not None:
                bound_call = lookup(key)
                if bound_call is None:
                    return _run(row, args, kwargs, bind_to=(fast_calls, key))
                made = bound_call(args)
                if made is not None:
                    return made
        return _run(row, args, kwargs, out=out)

    def inplace_impl(*args, **kwargs):
        return _run(row, args, kwargs, inplace=True)

    def meta(*args, out=None, **kwargs):
        return _meta(row, args, kwargs, out)

    def cost(*args, out=None, **kwargs):
        return _cost(row, args, kwargs, out)

    # in place, the tensor written is the output: a comparison's result takes its dtype
    def inplace_meta(*args, **kwargs):
        return _meta(row, args, kwargs, _written_in_place(row, args, kwargs))

    def inplace_cost(*args, **kwargs):
        return _cost(row, args, kwargs, _written_in_place(row, args, kwargs))

    impl.__name__ = row.name
    impl.__qualname__ = row.name
    impl.__doc__ = f"Pointwise ``{row.name}`` as ATen computes it (see nbxtensor.ops.pointwise)."
    impl.__signature__ = _signature(row, True)
    aten = _default_aten(row) if row.aten is None else row.aten
    api = (row.name,) if row.api is None else row.api
    methods = (row.name,) if row.methods is None else row.methods
    # parsers of activations that torch lets run in place read ``inplace`` themselves
    adapters = dict(row.adapters)
    register(row.name, family="pointwise", aten=[a for a in aten if not _is_inplace_overload(a)],
             meta=meta, cost=cost, api=api, methods=methods,
             functional=tuple(name for name in row.functional if not name.endswith("_")),
             adapters={a: adapt for a, adapt in adapters.items() if not _is_inplace_overload(a)})(impl)
    if row.inplace:
        inplace_impl.__name__ = row.name + "_"
        inplace_impl.__signature__ = _signature(row, False)
        inplace_aten = [a for a in aten if _is_inplace_overload(a)] or [f"aten::{row.name}_.default"]
        register(row.name + "_", family="pointwise", aten=inplace_aten, meta=inplace_meta, cost=inplace_cost,
                 api=row.inplace_api, methods=tuple(m + "_" for m in methods),
                 functional=tuple(name for name in row.functional if name.endswith("_")),
                 adapters={a: adapt for a, adapt in adapters.items() if _is_inplace_overload(a)})(inplace_impl)


def _written_in_place(row: Row, args, kwargs):
    """The operand an in-place call writes: the first that decides the dtype, as ``_build_call_plan`` takes it."""
    call = row.parse(*args, **kwargs)
    return call.slots[call.promote[0]]


def _is_inplace_overload(aten_name: str) -> bool:
    """``aten::add_.Tensor`` is in place; ``aten::__lshift__.Scalar`` is not."""
    base = aten_name.split("::")[1].split(".")[0]
    return base.endswith("_") and not base.endswith("__")


def _default_aten(row: Row) -> tuple:
    names = [f"aten::{row.name}.{overload}" for overload in row.overloads]
    if row.inplace:  # the in-place forms have the functional overloads, without the out ones
        names += [f"aten::{row.name}_.{overload}" for overload in row.overloads if not overload.endswith("out")]
    return tuple(names)


def build_all(table) -> None:
    for row in table:
        _build(row)
