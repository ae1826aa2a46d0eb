"""Running a graph on its planned arena.

The planner gives every intermediate that owns memory an offset in one arena, and every step whose cost
rule declares a workspace a region of its own there (``planner.py``). While a step runs, the first
allocation its op makes with the dtype and byte size of one of the step's planned outputs is served from
that output's place in the arena (an op may allocate in another shape and view); every other allocation (the op's
temporaries: ``allocation.scratch_tensor``, and the results of ops it calls) is served from the step's
workspace, one after another (``registry.workspace_bytes``). An allocation that finds no room there is an
op allocating more than its cost rule declares: it comes from the allocator and is counted
(``unplanned``), or raises ``WorkspaceOverflow`` where ``strict`` is set (tests). After the step, an
output that did not land in its place but lies in the arena (an op that returned another step's memory
unchanged, or its result built in its workspace) is copied into its place, because the arena's reuse
follows the plan's lifetimes, not references. An output from the allocator is kept as it is: correct,
only unplanned.

The graph's outputs have places in the arena like any intermediate, live to the end of the run, and
are returned as they lie there: the run hands its arena over to them (a run allocates a fresh arena, so
the next run never writes over a result the caller holds; holding a result holds its run's arena).

A run serves the allocations of its own thread only: while any thread runs on an arena, the service
installed for allocations (``allocation.arena_service``) looks up the calling thread's run.
"""
from __future__ import annotations

import threading

from .. import allocation as _allocation
from .. import shape as S
from ..ops import copy as _copy
from ..ops.registry import nbytes, workspace_bytes
from ..storage import Storage
from ..tensor import Tensor

# Raise ``WorkspaceOverflow`` instead of counting an allocation past a step's plan (a debug check).
strict = False


class WorkspaceOverflow(RuntimeError):
    """An op allocated more during a graph run than its planned outputs and declared workspace."""


_thread_run = threading.local()  # the ArenaRun this thread is in, if any
_runs_open = 0  # in all threads
_runs_open_lock = threading.Lock()


def _serve_this_threads_run(shape, strides, dtype, device, nbytes, scratch):
    run = getattr(_thread_run, "run", None)
    return None if run is None else run._serve(shape, strides, dtype, device, nbytes, scratch)


class ArenaRun:
    """One run's arena: ``expect(step, outputs, workspace)`` before a step, ``settle(outputs)`` after it."""

    def __init__(self, plan, device):
        self.plan = plan
        self.device = device
        self.storage = Storage(device, plan.arena_bytes) if plan.arena_bytes else None
        self._expected: list = []  # (dtype, bytes, byte offset, room) of this step's outputs
        self._step = None
        self._cursor = self._end = 0  # the step's workspace region not yet served
        self._workspace = (0, 0)
        self.served = 0
        self.copied = 0
        self.scratch_served = 0
        self.unplanned: list = []  # (step id, bytes) of allocations past a step's plan

    def __enter__(self) -> "ArenaRun":
        global _runs_open
        if getattr(_thread_run, "run", None) is not None:
            raise RuntimeError("graph runs on an arena do not nest")
        _thread_run.run = self
        with _runs_open_lock:
            _runs_open += 1
            _allocation.arena_service = _serve_this_threads_run
        return self

    def __exit__(self, *exc_info) -> None:
        global _runs_open
        _thread_run.run = None
        with _runs_open_lock:
            _runs_open -= 1
            if not _runs_open:
                _allocation.arena_service = None
        self.storage = None  # the run's figures may be kept; its memory goes with the tensors still on it

    def expect(self, step_id: str, expected: list, workspace: tuple[int, int]) -> None:
        """``expected``: (dtype, bytes, byte offset, room) of each of step ``step_id``'s outputs
        (``expectations``); ``workspace``: the (start, end) byte offsets of the step's planned workspace
        (``workspace_region``)."""
        self._step = step_id
        self._expected = expected.copy()
        self._cursor, self._end = self._workspace = workspace

    @staticmethod
    def expectations(plan, outputs) -> list:
        """What ``expect`` takes for ``outputs``, (tensor id, meta) of a step's outputs placed by ``plan``."""
        return [(meta.dtype, nbytes(meta), plan.offsets[tensor_id], plan.placement(tensor_id)[1])
                for tensor_id, meta in outputs]

    @staticmethod
    def workspace_region(placement) -> tuple[int, int]:
        """What ``expect`` takes for a step's workspace placed at ``placement`` (offset, bytes), or None."""
        return (placement[0], placement[0] + placement[1]) if placement else (0, 0)

    def _serve(self, shape, strides, dtype, device, nbytes, scratch):
        if device != self.device or self._step is None:
            return None
        if not scratch:
            for i, (want_dtype, want_bytes, offset, room) in enumerate(self._expected):
                # by dtype and size, not shape: an op may allocate its output in another shape and view it
                if want_dtype is dtype and nbytes == want_bytes and nbytes <= room and offset % dtype.itemsize == 0:
                    del self._expected[i]
                    self.served += 1
                    return Tensor._make(self.storage, offset // dtype.itemsize, shape, strides, dtype)
        size = workspace_bytes(nbytes)
        if self._cursor + size <= self._end:
            # regions and sizes are multiples of the scratch alignment: the cursor suits every dtype
            served = Tensor._make(self.storage, self._cursor // dtype.itemsize, shape, strides, dtype)
            self._cursor += size
            self.scratch_served += 1
            return served
        if strict:
            raise WorkspaceOverflow(
                f"op {self._step!r} allocated {dtype.name}{list(shape)} ({nbytes} bytes) past its planned "
                f"outputs and the {self._workspace[1] - self._workspace[0]} bytes of workspace its cost rule declares "
                f"({self._end - self._cursor} left)")
        self.unplanned.append((self._step, nbytes))
        return None

    def settle(self, result: Tensor, offset: int, room: int) -> Tensor:
        """``result``, an output of the step just run that owns the planned place (``offset``, ``room``
        bytes: ``plan.placement``), moved into that place when it lies elsewhere in the arena."""
        self._expected = []  # nothing more is served for this step
        self._cursor = self._end = 0
        if not self._holds(result):
            return result
        begin = result._offset * result._dtype.itemsize  # the arena's storage starts at its offset 0
        if offset <= begin and begin + self._extent(result) <= offset + room:
            return result
        self.copied += 1
        place = Tensor._make(self.storage, offset // result.dtype.itemsize, tuple(result.shape),
                             S.contiguous_strides(tuple(result.shape)), result.dtype)
        return _copy.copy_(place, result)

    @property
    def peak_bytes(self) -> int:
        """The most bytes this run held at once, at most: the arena (the graph outputs in it) and whatever
        was allocated past the plan (counted as if none of it were freed)."""
        return self.plan.arena_bytes + sum(size for _, size in self.unplanned)

    def _holds(self, t: Tensor) -> bool:
        return self.storage is not None and t._storage is self.storage

    @staticmethod
    def _extent(t: Tensor) -> int:
        shape = tuple(t._shape)
        strides, count = _allocation.contiguous_layout(shape)
        if t._strides == strides:
            return count * t._dtype.itemsize
        return (S.max_offset(shape, t._strides) + 1) * t._dtype.itemsize if count else 0
