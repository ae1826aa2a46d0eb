"""Running a graph on its planned arena.

The planner gives every intermediate that owns memory an offset in one arena (``planner.py``). While a
step runs, the first allocation its op makes with the dtype and byte size of one of the step's planned
outputs is served from that output's place in the arena (an op may allocate in another shape and view); every other allocation (an op's scratch, a
graph output, which the caller keeps) comes from the device's allocator as usual. After the step, an
output that did not land in its place but lies in the arena (an op that returned another step's memory
unchanged) is copied into its place, because the arena's reuse follows the plan's lifetimes, not
references. An output from the allocator is kept as it is: correct, only unplanned.

A run serves the allocations of its own thread only: while any thread runs on an arena, the service
installed for allocations (``ops.copy.arena_service``) looks up the calling thread's run.
"""
from __future__ import annotations

import threading

from .. import shape as S
from ..ops import copy as _copy
from ..ops.registry import nbytes
from ..storage import Storage
from ..tensor import Tensor


_thread_run = threading.local()  # the ArenaRun this thread is in, if any
_runs_open = 0  # in all threads
_runs_open_lock = threading.Lock()


def _serve_this_threads_run(shape, strides, dtype, device, nbytes):
    run = getattr(_thread_run, "run", None)
    return None if run is None else run._serve(shape, strides, dtype, device, nbytes)


class ArenaRun:
    """One run's arena: ``expect(step_outputs)`` before a step, ``settle(outputs)`` after it."""

    def __init__(self, plan, device):
        self.plan = plan
        self.device = device
        self.storage = Storage(device, plan.arena_bytes) if plan.arena_bytes else None
        self._expected: list = []  # (dtype, bytes, byte offset, slot bytes) of this step's planned outputs
        self.served = 0
        self.copied = 0

    def __enter__(self) -> "ArenaRun":
        global _runs_open
        if getattr(_thread_run, "run", None) is not None:
            raise RuntimeError("graph runs on an arena do not nest")
        _thread_run.run = self
        with _runs_open_lock:
            _runs_open += 1
            _copy.arena_service = _serve_this_threads_run
        return self

    def __exit__(self, *exc_info) -> None:
        global _runs_open
        _thread_run.run = None
        with _runs_open_lock:
            _runs_open -= 1
            if not _runs_open:
                _copy.arena_service = None

    def expect(self, expected) -> None:
        """``expected``: (dtype, bytes, byte offset, room) of each of the step's outputs that own planned
        memory (``expectations``)."""
        self._expected = list(expected) if self.storage is not None else []

    @staticmethod
    def expectations(plan, outputs) -> list:
        """What ``expect`` takes for ``outputs``, (tensor id, meta) of a step's outputs placed by ``plan``."""
        return [(meta.dtype, nbytes(meta), plan.offsets[tensor_id], plan.placement(tensor_id)[1])
                for tensor_id, meta in outputs]

    def _serve(self, shape, strides, dtype, device, nbytes):
        if device != self.device:
            return None
        for i, (want_dtype, want_bytes, offset, room) in enumerate(self._expected):
            # by dtype and size, not shape: an op may allocate its output in another shape and view it
            if want_dtype is dtype and nbytes == want_bytes <= room and offset % dtype.itemsize == 0:
                del self._expected[i]
                self.served += 1
                return Tensor._make(self.storage, offset // dtype.itemsize, shape, strides, dtype)
        return None

    def settle(self, result: Tensor, offset: int, room: int) -> Tensor:
        """``result``, an output of the step just run that owns the planned place (``offset``, ``room``
        bytes: ``plan.placement``), moved into that place when it lies elsewhere in the arena."""
        self._expected = []  # nothing more is served for this step
        if not self._holds(result):
            return result
        begin = result._offset * result._dtype.itemsize  # the arena's storage starts at its offset 0
        if offset <= begin and begin + self._extent(result) <= offset + room:
            return result
        self.copied += 1
        place = Tensor._make(self.storage, offset // result.dtype.itemsize, tuple(result.shape),
                             S.contiguous_strides(tuple(result.shape)), result.dtype)
        return _copy.copy_(place, result)

    def release(self, result: Tensor) -> Tensor:
        """A graph output, out of the arena (the caller keeps it; the arena is the run's alone)."""
        return result.clone() if self._holds(result) else result

    def _holds(self, t: Tensor) -> bool:
        return self.storage is not None and t._storage is self.storage

    @staticmethod
    def _extent(t: Tensor) -> int:
        shape = tuple(t._shape)
        strides, count = _copy._contiguous_layout(shape)
        if t._strides == strides:
            return count * t._dtype.itemsize
        return (S.max_offset(shape, t._strides) + 1) * t._dtype.itemsize if count else 0
