"""Memory for tensors, below the ops: outputs (``new_tensor``), an op's temporaries (``scratch_tensor``,
``scratch_scope``, ``Workspace``), memory that outlives a call (``outside_arena``) and the counters by which
the programs of one launch find the last of them to finish (``arrival_counters``). While a graph runs on
its planned arena, the arena serves them (``arena_service``, installed by graph/arena.py)."""
from __future__ import annotations

import contextlib
import functools
import threading

from . import shape as S
from .device import backend_for, device as _device
from .dtypes import get_dtype
from .storage import Storage
from .tensor import Size, Tensor, layout_key

# Each temporary an op takes from its graph step's workspace starts this many bytes after the last.
SCRATCH_ALIGNMENT = 256

# While a graph runs on its planned arena, this serves every allocation its steps make (see
# graph/arena.py): a step's planned outputs in their places, its temporaries from its planned workspace.
arena_service = None
# Per thread: how deep in ``scratch_scope`` (every allocation an op's temporary, never a planned output)
# and whether in ``outside_arena`` (every allocation from the allocator). A graph runs in one thread, and
# another thread's plan making or scratch must not change how it is served.
_arena_local = threading.local()


def workspace_bytes(*sizes: int) -> int:
    """The workspace of temporaries of these byte sizes, each allocated on its own."""
    return sum(-(-size // SCRATCH_ALIGNMENT) * SCRATCH_ALIGNMENT for size in sizes)


@functools.lru_cache(maxsize=4096)
def contiguous_layout(shape: tuple) -> tuple:
    """(contiguous strides, elements) of ``shape``, kept: every op's outputs repeat a few shapes call after
    call."""
    return S.contiguous_strides(shape), S.numel(shape)


def _strided_layout(shape: tuple, strides) -> tuple:
    """(strides, elements the memory spans) of ``shape`` laid out with ``strides``."""
    strides = tuple(strides)
    return strides, S.max_offset(shape, strides) + 1 if S.numel(shape) else 0


def new_tensor(shape, dtype, dev: _device, strides=None, pinned: bool = False) -> Tensor:
    """Uninitialised memory for a tensor of ``shape`` (contiguous unless ``strides`` are given);
    ``pinned`` asks for page-locked host memory."""
    shape = tuple(shape)
    strides, count = contiguous_layout(shape) if strides is None else _strided_layout(shape, strides)
    if pinned and dev.type != "cpu":
        raise RuntimeError(f"pin_memory applies to CPU tensors, not {dev}")
    if dev.type == "meta":
        return Tensor._meta(shape, dtype, strides)
    return allocate_tensor(shape, strides, dtype, dev, count * dtype.itemsize, pinned)


def scratch_tensor(shape, dtype, dev: _device) -> Tensor:
    """Uninitialised contiguous memory for an op's internal temporary (never its result): inside a graph
    run it comes from the step's planned workspace, which the op's cost rule declares (``Cost.workspace``,
    each temporary counted by ``workspace_bytes``); elsewhere from the allocator."""
    shape = tuple(shape)
    strides, count = contiguous_layout(shape)
    return allocate_tensor(shape, strides, dtype, dev, count * dtype.itemsize, scratch=True)


@contextlib.contextmanager
def scratch_scope():
    """Every allocation made inside is an op's temporary (``scratch_tensor``): for an op that builds its
    result through other ops, around the calls whose results it does not return."""
    _arena_local.scratch_depth = getattr(_arena_local, "scratch_depth", 0) + 1
    try:
        yield
    finally:
        _arena_local.scratch_depth -= 1


@contextlib.contextmanager
def outside_arena():
    """Allocations made inside come from the allocator even while a graph runs: for making an op's plan,
    whose probes and tuning trials belong to the first call of a layout (as compiling does), not to the
    step it runs in."""
    outside = getattr(_arena_local, "outside", False)
    _arena_local.outside = True
    try:
        yield
    finally:
        _arena_local.outside = outside


# Int32 counters a stream's launches share, zero between launches: programs that each store a part of a
# result raise one to find the last of them, which combines the parts in a fixed order and sets it back
# to zero (``kernels/common.last_to_arrive``). Launches on one stream run one after another; another
# stream has counters of its own. A launch needing more counters than this takes two launches instead.
ARRIVAL_COUNTERS = 4096
_arrival_counters: dict = {}  # (device, stream handle) -> the counters


def arrival_counters(dev: _device, stream=None) -> Tensor:
    """The arrival counters (``ARRIVAL_COUNTERS`` int32 zeros) of ``dev``'s ``stream`` (its current stream
    when None), made on first use and kept. Zeroed by the backend's memset, not a kernel: the first use
    may come while launches run nothing (a tuner building its candidates inside ``launch.compiling_ahead``)."""
    backend = backend_for(dev)
    if stream is None:
        stream_of = getattr(backend, "current_stream_handle", None)
        stream = stream_of(dev.index) if stream_of is not None else 0
    counters = _arrival_counters.get((dev, stream))
    if counters is None:
        with outside_arena():  # the stream's for good, not a graph step's
            made = new_tensor((ARRIVAL_COUNTERS,), get_dtype("int32"), dev)
        backend.fill_bytes(made.data_ptr(), made.nbytes, 0, dev.index)
        counters = _arrival_counters.setdefault((dev, stream), made)
    return counters


# open ``poisoned()`` blocks: while any is, memory the allocator hands out starts as POISON_BYTE bytes
_poisoning = 0
_poisoning_lock = threading.Lock()
POISON_BYTE = 0xFF  # NaN in every float format, -1 in every signed integer


@contextlib.contextmanager
def poisoned():
    """Tensors allocated inside start as ``POISON_BYTE`` bytes instead of whatever the memory held, so a
    kernel that leaves part of an output unwritten shows it (certification judges candidates inside: a
    freed output of an earlier, correct candidate must not vouch for a later one)."""
    global _poisoning
    with _poisoning_lock:
        _poisoning += 1
    try:
        yield
    finally:
        with _poisoning_lock:
            _poisoning -= 1


def allocate_tensor(shape: tuple, strides: tuple, dtype, dev: _device, nbytes: int, pinned: bool = False,
                    scratch: bool = False) -> Tensor:
    """``new_tensor`` for callers that know the strides and byte size already (planned ops)."""
    if arena_service is not None and nbytes and not pinned and not getattr(_arena_local, "outside", False):
        # (the arena is not page-locked)
        served = arena_service(shape, strides, dtype, dev, nbytes,
                               scratch or getattr(_arena_local, "scratch_depth", 0) > 0)
        if served is not None:
            return served
    storage = Storage(dev, nbytes, pinned=pinned)
    if _poisoning and nbytes:
        backend_for(dev).fill_bytes(storage.ptr, nbytes, POISON_BYTE, dev.index)
    return Tensor._make(storage, 0, shape, strides, dtype)


def fresh_tensor_maker(shape, dtype, dev: _device, strides=None, scratch: bool = False):
    """``make()``: a fresh tensor laid out as ``new_tensor(shape, dtype, dev, strides)`` makes it, for a
    plan that makes one at every call (``scratch``: an op's temporary, as ``scratch_tensor`` makes it). The
    layout is worked out once and given to each tensor (its ``layout_key``); the memory is a block the
    allocator parked for the current stream where there is one (no Python in the allocator), else the
    allocator's. While a graph runs on its arena, the arena serves the request as it serves
    ``new_tensor``'s (``scratch_tensor``'s)."""
    shape = Size(shape)
    strides, count = contiguous_layout(tuple(shape)) if strides is None else _strided_layout(shape, strides)
    nbytes = count * dtype.itemsize
    backend, index = backend_for(dev), dev.index
    parked, allocate = backend.parked_buffers(index), backend.allocate
    stream_of = getattr(backend, "current_stream_handle", None)
    layout = layout_key(shape, strides, dtype, dev)

    def make() -> Tensor:
        if arena_service is not None or _poisoning or not nbytes:
            made = allocate_tensor(shape, strides, dtype, dev, nbytes, scratch=scratch)
            made._layout = layout
            return made
        # the fields ``Storage(dev, nbytes, buffer)`` and ``Tensor._make`` set, set here directly: this runs for
        # every output of every planned call, and the layout is known to be one they accept
        storage = _new(Storage)
        storage.device, storage.nbytes = dev, nbytes
        storage.buffer = (parked and parked(nbytes, stream_of(index))) or allocate(nbytes, index)
        made = _new(Tensor)
        made._storage, made._offset, made._shape, made._strides, made._dtype, made._layout = \
            storage, 0, shape, strides, dtype, layout
        return made
    return make


_new = object.__new__


class Workspace:
    """An op plan's temporaries, carved at each call from one allocation (one allocator round trip instead
    of one per temporary); each piece starts 16 bytes after the one before it, rounded up. With
    ``counters``, the call's stream's ``arrival_counters`` come too, named "counters"."""

    def __init__(self, pieces: dict, counters: bool = False):
        """``pieces``: name -> (shape, dtype)."""
        self.counters = counters
        self.pieces, offset = [], 0
        for name, (shape, dtype) in pieces.items():
            shape = tuple(shape)
            self.pieces.append((name, shape, S.contiguous_strides(shape), offset, dtype))
            offset += self._piece_bytes(shape, dtype)
        self.nbytes = offset
        self._makers: dict = {}  # device -> the maker of this workspace's buffer there (published whole)

    @staticmethod
    def _piece_bytes(shape, dtype) -> int:
        return -(-S.numel(tuple(shape)) * dtype.itemsize // 16) * 16

    @classmethod
    def bytes_for(cls, pieces) -> int:
        """The workspace bytes a cost rule declares for a ``Workspace`` of ``pieces`` (name -> (shape,
        dtype), or just (shape, dtype) pairs): its one temporary, as ``workspace_bytes`` counts it."""
        pairs = list(pieces.values() if isinstance(pieces, dict) else pieces)
        return workspace_bytes(max(sum(cls._piece_bytes(shape, dtype) for shape, dtype in pairs), 1)) if pairs else 0

    def allocate(self, device, tensors: dict) -> None:
        """Put a fresh tensor for every piece (and the counters) into ``tensors``."""
        if self.pieces:
            self.carve(self.buffer_maker(device)(), tensors)
        if self.counters:
            tensors["counters"] = arrival_counters(device)

    def buffer_maker(self, device):
        """``make()``: a fresh uint8 buffer of this workspace on ``device``, which ``carve`` cuts into its
        pieces (a piece starts ``offset`` bytes past the buffer's start: ``offsets``)."""
        make = self._makers.get(device)
        if make is None:
            make = self._makers[device] = fresh_tensor_maker((max(self.nbytes, 1),), _BYTES, device, scratch=True)
        return make

    @property
    def offsets(self) -> dict:
        """Each piece's name -> its byte offset from the buffer's start."""
        return {name: offset for name, _, _, offset, _ in self.pieces}

    def carve(self, buffer: Tensor, tensors: dict) -> None:
        """Put every piece, a view of ``buffer`` (uint8, at least ``nbytes`` long, starting on 16 bytes in its
        storage), into ``tensors``."""
        for name, shape, strides, offset, dtype in self.pieces:
            start = (buffer._offset + offset) // dtype.itemsize
            tensors[name] = buffer._view(shape, strides, offset=start, dtype=dtype)


_BYTES = get_dtype("uint8")
