"""The one launch path: every kernel goes to its device through here.

On a compiling backend the first launch of a kernel for a given specialisation goes through Triton's
generic path, which compiles it; the compiled kernel is then cached under a key we compute ourselves
(the kernel, the device, the constexprs, and for every other argument exactly what Triton specialises
on), and later launches call it directly with bound arguments. That skips Triton's per-launch binding
and keying, which cost more host time than the rest of an op. The interpreter has no compiled form:
it always takes the generic path.

``capture()`` records the launches of a stretch of work so that ``Capture.replay()`` can issue them
again, on the same tensors, without the ops' Python; work that a replay could not repeat faithfully
(host reads, host data, random draws) marks the capture refused, with the reason. A capture belongs to
the thread that opened it: launches other threads make meanwhile run as usual and are not recorded.

Threads: Triton's interpreter keeps the grid being run, and its patches of ``triton.language``, in
process-wide state, so interpreted launches take ``_interpreter_lock`` and run one at a time. The caches
here are filled by publishing a finished entry in one assignment; any entry a racing thread overwrites
is an equal one.
"""
from __future__ import annotations

import contextlib
import json
import os
import threading

import numpy as np

from .device import backend_for, multiprocessors
from .storage import Storage

_ALIGN_MASK = 15  # Triton specialises pointers on 16-byte alignment
_compiled: dict = {}
# shapes, strides and sizes recur from call to call: their specialisations are remembered (by type, since
# 1 == 1.0 == True as dict keys)
_int_specialisations: dict = {}
_tuple_specialisations: dict = {}
_MAX_REMEMBERED = 4096
_interpreter_lock = threading.Lock()  # interpreted launches never nest: a kernel body launches nothing

# The class of the arguments that travel to kernels as pointers to their first element: the tensor
# class, which names itself (``pointer_argument``) so that this layer imports none. Of such an argument
# the launch path reads ``_dtype`` (its element type), ``_storage.buffer.ptr`` and ``_offset`` (its
# address, in elements past the buffer's start) and ``_kernel_pointer(backend)`` (what the interpreter
# takes); compared by identity, as cheap as naming the class here.
_Pointer: type | None = None


def pointer_argument(cls: type) -> type:
    """Class decorator: ``cls``'s instances go to kernels as pointers (see ``_Pointer``)."""
    global _Pointer
    _Pointer = cls
    return cls


# Set, interpreted launches are written to this file (one JSON line each) for the compile check, which
# compiles every recorded specialisation for a GPU target on a machine that has none.
_RECORD_PATH = os.environ.get("NBX_RECORD_LAUNCHES")


# Programmatic dependent launch (``kernels/dependent_launch.py``): a launch whose ``PDL`` constexpr is true
# carries the attribute that lets it start before the kernel ahead of it has finished, and no other launch
# does, since only a kernel that waits first may. Ops set ``PDL`` from ``dependent_launch(device)``.
PDL = "PDL"
# ``NBX_PDL=1`` turns it on where the device's facts allow it (off by default until measured on a GPU)
_PDL_SETTING = os.environ.get("NBX_PDL", "0").strip() or "0"
if _PDL_SETTING not in ("0", "1"):
    raise ValueError(f"NBX_PDL must be 0 or 1, got {_PDL_SETTING!r}")
_PDL_ON = _PDL_SETTING == "1"


# Compiling ahead (``compiling_ahead``): tuning builds every candidate's kernels at once on a pool of
# threads before it times any (Triton's compiles run mostly outside Python's global lock, in its passes and
# in ptxas), instead of one after another as each is first timed. ``NBX_COMPILE_AHEAD=0`` turns it off.
_AHEAD_SETTING = os.environ.get("NBX_COMPILE_AHEAD", "1").strip() or "1"
if _AHEAD_SETTING not in ("0", "1"):
    raise ValueError(f"NBX_COMPILE_AHEAD must be 0 or 1, got {_AHEAD_SETTING!r}")
_ahead = threading.local()
_ahead_open = 0  # blocks open in any thread: launches look at their thread's only when one is


def compiling_ahead_active() -> bool:
    """Whether this thread is inside ``compiling_ahead``: its launches compile and run nothing."""
    return bool(_ahead_open) and getattr(_ahead, "mode", None) is not None


@contextlib.contextmanager
def compiling_ahead(workers: int | None = None):
    """Inside, this thread's launches of kernels not yet compiled hand their compilation to a pool of
    ``workers`` threads (default: one a core, at most 16) and no launch runs: outputs are left as they
    were. Leaving waits for every compilation (a kernel that failed to build fails again, named, when it
    is first launched). Where kernels do not compile, or ``NBX_COMPILE_AHEAD=0``, or the Triton in use
    has no asynchronous compile mode, the block does nothing and its launches run as usual."""
    try:
        from triton.runtime._async_compile import AsyncCompileMode
    except ImportError:
        AsyncCompileMode = None
    if AsyncCompileMode is None or _AHEAD_SETTING == "0" or compiling_ahead_active():
        yield False
        return
    from concurrent.futures import ThreadPoolExecutor
    global _ahead_open
    with ThreadPoolExecutor(max_workers=workers or min(16, os.cpu_count() or 1)) as pool:
        mode = AsyncCompileMode(pool, ignore_errors=True)
        _ahead.mode = mode
        _ahead_open += 1
        try:
            with mode:
                yield True
        finally:
            _ahead_open -= 1
            _ahead.mode = None


def dependent_launch(device) -> bool:
    """The ``PDL`` constexpr for kernels launched on ``device``: true where kernels compile, the device's
    class supports programmatic dependent launch (its facts say ``programmatic_dependent_launch``) and
    ``NBX_PDL`` turns it on."""
    if not _PDL_ON:
        return False
    backend = backend_for(device)
    return backend.compiles_kernels and bool(backend.facts["kernels"].get("programmatic_dependent_launch"))


def _log_for_compile_check(kernel, args, constexprs: dict) -> None:
    def plain(v):  # a value kernels keep as ``tl.constexpr`` (a module constant) is recorded as its value
        return v.value if type(v).__name__ == "constexpr" else v

    def describe(a):
        if type(a) is _Pointer:
            return {"pointer": str(a._dtype.triton), "aligned": a.data_ptr() & _ALIGN_MASK == 0}
        if isinstance(a, tuple):
            return {"tuple": [describe(v) for v in a]}
        return {"value": plain(a)}

    def constant(v):
        v = plain(v)
        if hasattr(v, "primitive_bitwidth"):
            return {"dtype": str(v)}
        if hasattr(v, "fn"):
            return {"function": [v.fn.__module__, v.fn.__name__]}
        return v
    line = {"module": kernel.fn.__module__, "kernel": kernel.fn.__name__, "args": [describe(a) for a in args],
            "constexprs": {k: constant(v) for k, v in constexprs.items()}}
    with open(_RECORD_PATH, "a") as f:
        f.write(json.dumps(line) + "\n")


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def spread_block(block: int, smallest: int, total: int, dev) -> int:
    """Elements a program of ``total``: ``block``, halved (not under ``smallest``) while the launch would give
    fewer than two programs a multiprocessor of ``dev``, so that a small tensor still spreads over the device
    rather than leaving most of it idle while each thread works through many elements in turn."""
    wanted = 2 * multiprocessors(dev)
    while block > smallest and cdiv(total, block) < wanted:
        block //= 2
    return block


def next_pow2(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1): Triton's block shapes are powers of two."""
    return 1 << max(0, (int(n) - 1).bit_length())


def _specialisation(value):
    """What Triton's specialiser sees in a non-pointer argument: an integer's type, whether it is 1
    and whether it divides by 16; a float's type; a tuple element by element."""
    kind = type(value)
    if kind is int:
        width = 0 if -0x80000000 <= value <= 0x7FFFFFFF else 1 if value < 0x8000000000000000 else 2
        return (value == 1, value & _ALIGN_MASK == 0, width)
    if kind is tuple:
        return tuple(_specialisation(v) for v in value)
    if kind is float:
        return float
    return value


class Capture:
    """The launches of a stretch of work, holding the tensors they use (so their memory, and so every
    address, stays as it was), and why the work cannot be replayed, if it cannot. Once recorded into the
    device's own graph (``record_device_graph``), a replay is one launch of that graph."""

    def __init__(self):
        self.launches: list = []
        self.after: list = []  # host work to redo after each replay (checks that need no host read first)
        self.refused: str | None = None
        self.device_graph = None
        self.scratch: list = []  # the global scratch its device graph's launches use, kept with it

    def replay(self) -> None:
        if self.refused is not None:
            raise RuntimeError(f"this capture cannot be replayed: it {self.refused}")
        if self.device_graph is not None:
            self.device_graph.launch()
        else:
            self._issue()
        for work in self.after:
            work()

    def _issue(self) -> None:
        for kernel, grid, device, args, constexprs, key in self.launches:
            launch_planned(kernel, grid, device, args, constexprs, key)

    def record_device_graph(self) -> str | None:
        """Record the launches into the device's graph (a CUDA graph) for later replays. Returns why
        replays stay launch by launch, or None when recorded or when the device has no graphs. Every
        kernel must have run once (compiled and loaded) before: recording cannot compile."""
        devices = {(device.type, device.index) for _, _, device, _, _, _ in self.launches}
        if len(devices) != 1:
            return "its launches are on several devices" if devices else None
        device = self.launches[0][2]
        size, alignment = 0, 1
        for kernel, grid, _, args, _, key in self.launches:
            entry = _compiled.get((kernel, device.index, key, _specialised(args)[0]))
            if entry is not None:
                need, align = _scratch_need(entry, grid)
                size, alignment = max(size, need), max(alignment, align)
        streams = []

        def prepare(stream):
            streams.append(stream)
            if size:
                _scratch.reserve(device, stream, size, alignment)
        try:
            self.device_graph = backend_for(device).record_graph(self._issue, device.index, prepare)
        except Exception as error:  # any failure leaves replays launch by launch, which verification covers
            return f"its launches could not be recorded as a device graph ({error})"
        finally:
            self.scratch = [_scratch.detach(device, stream) for stream in streams]
        return None


class _LaunchScratch:
    """Global scratch memory for kernels that ask for it at each launch (Triton's allocator protocol;
    device-side tensor descriptors are written there, 128 bytes a program). One buffer per device and
    stream, grown when a launch needs more and never freed while its stream may use it: launches on one
    stream run one after another, so they can share it. A recording into a device graph cannot allocate,
    so ``reserve`` sets aside the recording stream's buffer before capture begins and ``detach`` hands it
    to the recording, which keeps it for as long as its graph replays."""

    def __init__(self):
        self._serving = threading.local()  # the device of the launch this thread is making
        self._lock = threading.Lock()  # threads on one device's default stream share its buffer
        self._held: dict = {}
        self._kept: list = []

    @property
    def device(self):
        """The device whose launch this thread is making."""
        return getattr(self._serving, "device", None)

    @device.setter
    def device(self, device) -> None:
        self._serving.device = device

    def __call__(self, size: int, alignment: int, stream):
        held = self.reserve(self.device, stream, size, alignment)
        return _Address(held[0])

    def reserve(self, device, stream, size: int, alignment: int) -> tuple:
        key = (device, stream)
        with self._lock:
            held = self._held.get(key)
            if held is None or held[1] < size or held[0] % alignment:
                storage = Storage(device, size + alignment)
                address = -(-storage.ptr // alignment) * alignment
                if held is not None:
                    self._kept.append(held)  # launches already issued may still use it
                held = self._held[key] = (address, size, storage)
            return held

    def detach(self, device, stream):
        with self._lock:
            return self._held.pop((device, stream), None)


class _Address:
    __slots__ = ("address",)

    def __init__(self, address: int):
        self.address = address

    def data_ptr(self) -> int:
        return self.address


_scratch = _LaunchScratch()


def _use_scratch(device) -> None:
    """Make ``_scratch`` serve Triton's launches on ``device`` in this thread (Triton keeps its allocator
    per context), unless another allocator was set."""
    from triton.runtime import _allocation
    if isinstance(_allocation._allocator.get(), _allocation.NullAllocator):
        _allocation._allocator.set(_scratch)
    _scratch.device = device


def _scratch_need(entry, grid) -> tuple[int, int]:
    """(bytes, alignment) of the global scratch a launch of the compiled ``entry`` over ``grid`` asks for."""
    metadata = getattr(entry[0], "metadata", None)
    size = getattr(metadata, "global_scratch_size", 0) or 0
    if not size:
        return 0, 1
    g0, g1, g2 = _grid3(grid)
    return g0 * g1 * g2 * getattr(metadata, "num_ctas", 1) * size, metadata.global_scratch_align


# captures open in all threads: while none is, a launch need not look up its thread's capture
_captures_open = 0
_captures_open_lock = threading.Lock()
_thread_capture = threading.local()


@contextlib.contextmanager
def capture():
    """Record every launch this thread makes inside the ``with`` block into the yielded ``Capture``."""
    global _captures_open
    if current_capture() is not None:
        raise RuntimeError("captures do not nest")
    _thread_capture.capture = recorded = Capture()
    with _captures_open_lock:
        _captures_open += 1
    try:
        yield recorded
    finally:
        _thread_capture.capture = None
        with _captures_open_lock:
            _captures_open -= 1


def current_capture() -> Capture | None:
    """The capture this thread has open, or None."""
    return getattr(_thread_capture, "capture", None) if _captures_open else None


def refuse_capture(reason: str) -> None:
    """Called by work a replay would not repeat (``reason`` completes "it ..."); the first one counts."""
    recording = current_capture()
    if recording is not None and recording.refused is None:
        recording.refused = reason


def _remember(remembered: dict, value):
    if len(remembered) >= _MAX_REMEMBERED:
        remembered.clear()
    known = remembered[value] = _specialisation(value)
    return known


def launch(kernel, grid, device, args, **constexprs) -> None:
    """Run ``kernel`` over ``grid`` on ``device``. Tensor arguments travel as pointers to their
    first element; anything else goes as it is. Constexprs come by keyword, after every positional
    parameter of the kernel."""
    launch_planned(kernel, grid, device, args, constexprs, tuple(constexprs.items()))


def launch_planned(kernel, grid, device, args, constexprs: dict, constexpr_key: tuple):
    """``launch`` for callers that keep their constexprs, and their key, from one call to the next.
    Returns (compiled entry, argument values, backend) when it ran an already compiled kernel, else None
    (interpreted, or compiled just now)."""
    if _captures_open:
        recording = current_capture()
        if recording is not None:
            recording.launches.append((kernel, grid, device, list(args), constexprs, constexpr_key))
    backend = backend_for(device)
    if not backend.compiles_kernels:
        backend.check_kernels()
        if _RECORD_PATH:
            _log_for_compile_check(kernel, args, constexprs)
        # the interpreter computes with NumPy, which warns where IEEE arithmetic gives inf or NaN (masked
        # lanes, -inf - -inf); a GPU does not
        with np.errstate(all="ignore"), _interpreter_lock:
            kernel[grid](*[a._kernel_pointer(backend) if type(a) is _Pointer else a for a in args], **constexprs)
        return None
    spec, values = _specialised(args)
    key = (kernel, device.index, constexpr_key, spec)
    entry = _compiled.get(key)
    if _ahead_open and getattr(_ahead, "mode", None) is not None:
        if entry is None:
            kernel.warmup(*[a._kernel_pointer(backend) if type(a) is _Pointer else a for a in args], grid=grid,
                          **constexprs, launch_pdl=constexprs.get(PDL) is True)
        return None
    if entry is None:
        _use_scratch(device)  # a kernel may ask for global scratch on its first launch
        compiled = kernel[grid](*[a._kernel_pointer(backend) if type(a) is _Pointer else a for a in args],
                                **constexprs, launch_pdl=constexprs.get(PDL) is True)
        _compiled[key] = (compiled, _constexpr_values(kernel, len(args), constexprs), _direct_launcher(compiled))
        return None
    _run_compiled(entry, grid, backend, device, values)
    return entry, values, backend


def _constexpr_values(kernel, positional: int, constexprs: dict) -> list:
    """The values of ``kernel``'s parameters after its ``positional`` ones, in order, as a compiled launch
    passes them: given by keyword, or the kernel's default for a constexpr a launch leaves out."""
    defaults = {p.name: p.default for p in getattr(kernel, "params", ()) if p.has_default}
    values = []
    for name in kernel.arg_names[positional:]:
        if name not in constexprs and name not in defaults:
            raise TypeError(f"{getattr(kernel, '__name__', kernel)}: launched without constexpr {name}, which has "
                            "no default")
        values.append(constexprs[name] if name in constexprs else defaults[name])
    return values


def _specialised(args) -> tuple[tuple, list]:
    """What Triton specialises on in ``args`` (pointers by dtype and alignment, integers by their class),
    so that one cache entry never stands for two compilations and new values reuse an entry; and the
    values the launcher takes (tensors as addresses)."""
    spec = []
    values = []
    add_spec, add_value = spec.append, values.append
    for a in args:
        kind = type(a)
        if kind is _Pointer:
            storage = a._storage  # ``data_ptr()`` inlined: a launch reads several tensors' addresses
            buffer = None if storage is None else storage.buffer
            ptr = 0 if buffer is None else buffer.ptr + a._offset * a._dtype.itemsize
            add_spec((a._dtype, ptr & _ALIGN_MASK == 0))
            add_value(ptr)
            continue
        if kind is int:
            known = _int_specialisations.get(a)
            if known is None:
                known = _remember(_int_specialisations, a)
        elif kind is float:
            known = float
        elif kind is tuple:
            known = _tuple_specialisations.get(a)
            if known is None:
                known = _remember(_tuple_specialisations, a)
        else:
            known = _specialisation(a)
        add_spec(known)
        add_value(a)
    return tuple(spec), values


def _grid3(grid) -> tuple[int, int, int]:
    return grid[0], grid[1] if len(grid) > 1 else 1, grid[2] if len(grid) > 2 else 1


def _direct_launcher(compiled):
    """Triton's C launcher of ``compiled`` with the two flags its Python wrapper passes, when that wrapper
    adds nothing else (it allocates scratch memory per launch for kernels that ask for it); else None.
    Calling the C function directly saves the wrapper's Python on every launch."""
    runner = getattr(compiled, "run", None)
    c_launch = getattr(runner, "launch", None)
    if c_launch is None or getattr(runner, "global_scratch_size", 1) or getattr(runner, "profile_scratch_size", 1):
        return None
    return c_launch, runner.launch_cooperative_grid, runner.launch_pdl


def _run_compiled(entry, grid, backend, device, values) -> None:
    compiled, tail, direct = entry
    g0, g1, g2 = _grid3(grid)
    stream = backend.current_stream_handle(device.index)
    if direct is None:
        _use_scratch(device)  # Triton's wrapper allocates the kernel's global scratch, if it asks for any
        compiled.run(g0, g1, g2, stream, compiled.function, compiled.packed_metadata, None, None, None,
                     *values, *tail)
    else:
        c_launch, cooperative, pdl = direct
        c_launch(g0, g1, g2, stream, compiled.function, cooperative, pdl, None, None,
                 compiled.packed_metadata, None, None, None, *values, *tail)


def bind_launch(entry, grid, backend, values, positions):
    """The backend's launcher of the compiled ``entry`` over ``grid`` with ``values``, for callers that keep
    it and pass, at each call, the stream and new values for the arguments at ``positions`` (each keeping
    its specialisation): ``launcher(stream, *new)``. None when the kernel needs Triton's Python wrapper or
    the backend has no launcher of its own for it."""
    compiled, _, direct = entry
    if direct is None:
        return None
    return backend.bind_launch(compiled, grid, values, positions)


def issue(launcher, backend, device, stream, values) -> None:
    """``launcher(stream, *values)``, a bound launch; where it fails, the backend makes the device current (a
    thread that had no context) and the launch is tried once more; any other failure is raised, named."""
    try:
        launcher(stream, *values)
    except RuntimeError as error:
        backend.launch_failed(error, device.index)
        launcher(stream, *values)


def _launch_bound(launcher, backend, device, new) -> None:
    """``launcher(stream, *new)`` on the device's current stream."""
    issue(launcher, backend, device, backend.current_stream_handle(device.index), new)


def bind_slots(grid, device, positions, values, bound: dict, varying) -> tuple | None:
    """The bound form of a launch that ``launch_slots`` compiled and bound (``bound``): the backend's
    launcher with every argument fixed as at this call (``values`` at ``positions``) except those at the
    indices ``varying`` of ``positions``, each an aligned tensor of its dtype here; (launcher, backend),
    called as ``launcher(stream, *addresses)`` with addresses on Triton's 16-byte specialisation. None
    while no launch of what Triton specialises on in ``values`` was compiled and bound, for a varying value
    that is not an aligned tensor, or where the backend has no launcher of its own for the kernel."""
    spec, current = _specialised(values)
    found = bound.get((device.index, spec))
    if found is None or not all(type(values[i]) is _Pointer and spec[i][1] for i in varying):
        return None
    entry, fixed, backend, _ = found
    filled = fixed.copy()
    for i, v in zip(positions, current):
        filled[i] = v
    launcher = bind_launch(entry, grid, backend, filled, [positions[i] for i in varying])
    return None if launcher is None else (launcher, backend)


_ALIGNED_TENSORS = "aligned tensors"  # ``launch_slots``' key for its launch of tensors only, all aligned


def launch_slots(kernel, grid, device, args, positions, values, constexprs: dict, constexpr_key: tuple,
                 bound: dict) -> None:
    """``launch_planned`` for a launch whose arguments are fixed except those at ``positions`` in ``args``,
    which take ``values`` (tensors or scalars) at this call. Once the kernel is compiled, ``bound`` (kept
    by the caller, empty at first) holds it with every argument's value, per device and what Triton
    specialises on in ``values`` (and the backend's bound launcher, ``bind_launch``, where it has one for
    the kernel), so a call looks at its varying arguments only. When every varying argument is a tensor on
    Triton's 16-byte specialisation, ``bound`` also keeps that launcher under ``_ALIGNED_TENSORS``: a later
    call whose tensors have the same dtypes and aligned addresses goes straight to it."""
    if not _captures_open:  # else through ``launch_planned``, which records it if this thread captures
        fast = bound.get(_ALIGNED_TENSORS)
        if fast is not None and fast[0] == device.index:
            _, dtypes, launcher, backend = fast
            addresses = []
            offsets = 0
            for v, dtype in zip(values, dtypes):
                if type(v) is not _Pointer or v._dtype is not dtype:
                    break
                storage = v._storage  # ``data_ptr()`` inlined, as in ``_specialised``
                buffer = None if storage is None else storage.buffer
                ptr = 0 if buffer is None else buffer.ptr + v._offset * dtype.itemsize
                offsets |= ptr
                addresses.append(ptr)
            else:
                if not offsets & _ALIGN_MASK:
                    _launch_bound(launcher, backend, device, addresses)
                    return
        spec, varying = _specialised(values)
        key = (device.index, spec)
        found = bound.get(key)
        if found is not None:
            entry, fixed, backend, launcher = found
            if launcher is None:
                filled = fixed.copy()
                for i, v in zip(positions, varying):
                    filled[i] = v
                _run_compiled(entry, grid, backend, device, filled)
                return
            _launch_bound(launcher, backend, device, varying)
            return
    full = list(args)
    for i, v in zip(positions, values):
        full[i] = v
    launched = launch_planned(kernel, grid, device, full, constexprs, constexpr_key)
    if launched is not None and not _captures_open:
        entry, fixed, backend = launched
        launcher = bind_launch(entry, grid, backend, fixed, positions)
        bound[key] = (entry, fixed, backend, launcher)
        if launcher is not None and _ALIGNED_TENSORS not in bound \
                and all(type(v) is _Pointer and known[1] for v, known in zip(values, spec)):
            bound[_ALIGNED_TENSORS] = (device.index, tuple(v._dtype for v in values), launcher, backend)
