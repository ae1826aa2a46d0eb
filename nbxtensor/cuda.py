"""``nbx.cuda``: CUDA devices, streams, events and memory statistics, with torch's names."""
from __future__ import annotations

import contextlib

from .device import available_backends, device as _device
from .device.errors import check_device_errors
from .memory import OutOfMemoryError
from .ops.random import default_generator_for

__all__ = ["is_available", "device_count", "current_device", "set_device", "synchronize", "Stream", "Event",
           "stream", "current_stream", "default_stream", "memory_allocated", "max_memory_allocated",
           "memory_reserved", "max_memory_reserved", "reset_peak_memory_stats", "empty_cache", "memory_stats",
           "set_memory_limit", "get_device_name", "get_device_capability", "mem_get_info", "OutOfMemoryError", "manual_seed",
           "manual_seed_all", "seed", "initial_seed"]


def _backend():
    backend = available_backends().get("cuda")
    if backend is None:
        raise RuntimeError("CUDA is not available in this process: no CUDA device was found, cuda-bindings is "
                           "not installed, or NBX_DEVICE asked for the CPU")
    return backend


def _index(device) -> int:
    if device is None:
        return _backend().current_index()
    if isinstance(device, int):
        return device
    d = _device(device)
    return _backend().current_index() if d.index is None else d.index


def is_available() -> bool:
    return "cuda" in available_backends()


def device_count() -> int:
    return _backend().device_count() if is_available() else 0


def current_device() -> int:
    return _backend().current_index()


def set_device(device) -> None:
    _backend().set_current(_index(device))


def synchronize(device=None) -> None:
    index = _index(device)
    _backend().synchronize(index)
    check_device_errors(_device("cuda", index))


# ---- random streams: as torch.cuda's, a call without CUDA does nothing (seeding code stays portable) ----
def _generator(index: int):
    return default_generator_for(_device("cuda", index))


def manual_seed(seed) -> None:
    """Seed the current GPU's default generator."""
    if is_available():
        _generator(current_device()).manual_seed(seed)


def manual_seed_all(seed) -> None:
    """Seed the default generator of every GPU."""
    for index in range(device_count()):
        _generator(index).manual_seed(seed)


def seed() -> None:
    """Seed the current GPU's default generator from the operating system's entropy."""
    if is_available():
        _generator(current_device()).seed()


def initial_seed() -> int:
    """The seed of the current GPU's default generator."""
    return _generator(current_device()).initial_seed()


def get_device_name(device=None) -> str:
    return _backend().describe_index(_index(device))["name"]


def get_device_capability(device=None) -> tuple[int, int]:
    return _backend().capability(_index(device))


def mem_get_info(device=None) -> tuple[int, int]:
    return _backend()._mem_info(_index(device))


class Stream:
    """A CUDA stream. Work launched inside ``with nbx.cuda.stream(s):`` goes to ``s``."""

    def __init__(self, device=None, priority: int = 0, *, _handle: int | None = None):
        backend = _backend()
        self.device_index = _index(device)
        if _handle is not None:
            self.cuda_stream = _handle
            self._owned = False
        else:
            rt = backend._rt
            backend._activate(self.device_index)
            from .device.cuda import _check
            self.cuda_stream = int(_check(rt.cudaStreamCreateWithPriority(0, priority), "cudaStreamCreate"))
            self._owned = True

    def synchronize(self) -> None:
        from .device.cuda import _check
        _check(_backend()._rt.cudaStreamSynchronize(self.cuda_stream), "cudaStreamSynchronize")

    def query(self) -> bool:
        err, = _backend()._rt.cudaStreamQuery(self.cuda_stream)
        return int(err) == 0

    def wait_event(self, event: "Event") -> None:
        from .device.cuda import _check
        _check(_backend()._rt.cudaStreamWaitEvent(self.cuda_stream, event._event, 0), "cudaStreamWaitEvent")

    def wait_stream(self, other: "Stream") -> None:
        self.wait_event(other.record_event())

    def record_event(self, event: "Event | None" = None) -> "Event":
        event = Event() if event is None else event
        event.record(self)
        return event

    def __eq__(self, other) -> bool:
        return isinstance(other, Stream) and other.cuda_stream == self.cuda_stream

    def __hash__(self) -> int:
        return hash(self.cuda_stream)

    def __repr__(self) -> str:
        return f"<nbx.cuda.Stream device=cuda:{self.device_index} cuda_stream={self.cuda_stream:#x}>"

    def __del__(self):
        if getattr(self, "_owned", False):
            try:
                _backend()._rt.cudaStreamDestroy(self.cuda_stream)
            except Exception:  # noqa: BLE001  (interpreter shutdown may have torn CUDA down)
                pass


class Event:
    def __init__(self, enable_timing: bool = False, blocking: bool = False):
        rt = _backend()._rt
        from .device.cuda import _check
        flags = 0 if enable_timing else rt.cudaEventDisableTiming
        if blocking:
            flags |= rt.cudaEventBlockingSync
        self._event = _check(rt.cudaEventCreateWithFlags(flags), "cudaEventCreate")

    def record(self, stream: Stream | None = None) -> None:
        from .device.cuda import _check
        handle = current_stream().cuda_stream if stream is None else stream.cuda_stream
        _check(_backend()._rt.cudaEventRecord(self._event, handle), "cudaEventRecord")

    def wait(self, stream: Stream | None = None) -> None:
        (current_stream() if stream is None else stream).wait_event(self)

    def synchronize(self) -> None:
        from .device.cuda import _check
        _check(_backend()._rt.cudaEventSynchronize(self._event), "cudaEventSynchronize")

    def query(self) -> bool:
        err, = _backend()._rt.cudaEventQuery(self._event)
        return int(err) == 0

    def elapsed_time(self, end: "Event") -> float:
        """Milliseconds from this event to ``end``."""
        from .device.cuda import _check
        return float(_check(_backend()._rt.cudaEventElapsedTime(self._event, end._event), "cudaEventElapsedTime"))

    def __del__(self):
        try:
            _backend()._rt.cudaEventDestroy(self._event)
        except Exception:  # noqa: BLE001  (interpreter shutdown may have torn CUDA down)
            pass


def current_stream(device=None) -> Stream:
    index = _index(device)
    return Stream(index, _handle=_backend().current_stream_handle(index))


def default_stream(device=None) -> Stream:
    return Stream(_index(device), _handle=0)


@contextlib.contextmanager
def stream(s: Stream | None):
    """Make ``s`` the current stream of its device inside the block."""
    if s is None:
        yield
        return
    backend = _backend()
    previous = backend.current_stream_handle(s.device_index)
    backend.set_stream_handle(s.device_index, s.cuda_stream)
    try:
        yield s
    finally:
        backend.set_stream_handle(s.device_index, previous)


def memory_stats(device=None) -> dict:
    stats = _backend().allocator(_index(device)).stats
    return stats.as_dict()


def memory_allocated(device=None) -> int:
    return _backend().allocator(_index(device)).stats.allocated


def max_memory_allocated(device=None) -> int:
    return _backend().allocator(_index(device)).stats.peak_allocated


def memory_reserved(device=None) -> int:
    return _backend().allocator(_index(device)).stats.reserved


def max_memory_reserved(device=None) -> int:
    return _backend().allocator(_index(device)).stats.peak_reserved


def reset_peak_memory_stats(device=None) -> None:
    _backend().allocator(_index(device)).reset_peak()


def empty_cache() -> None:
    backend = _backend()
    for index in range(backend.device_count()):
        if index in backend._allocators:
            backend.allocator(index).empty_cache()


def set_memory_limit(nbytes: int | None, device=None) -> None:
    """Cap what nbxtensor reserves on a device (None lifts the cap); also ``NBX_CUDA_MEMORY_LIMIT``."""
    _backend().allocator(_index(device)).limit = nbytes
