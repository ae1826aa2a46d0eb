"""The interface every device backend implements."""
from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np


class KernelPointer:
    """A kernel argument pointing into device memory: Triton reads ``data_ptr()`` and ``dtype``."""

    __slots__ = ("_ptr", "dtype")

    def __init__(self, ptr: int, element_type):
        self._ptr = ptr
        self.dtype = element_type

    def data_ptr(self) -> int:
        return self._ptr


class Buffer:
    """A block of device memory. ``ptr`` is its address. ``release``, if given, is called once when
    the buffer is collected (a backend may give the memory back to a cache rather than the system)."""

    __slots__ = ("ptr", "nbytes", "_owner", "pinned", "_release", "__weakref__")

    def __init__(self, ptr: int, nbytes: int, owner=None, pinned: bool = False, release=None):
        self.ptr = ptr
        self.nbytes = nbytes
        self._owner = owner
        self.pinned = pinned  # page-locked host memory that a GPU's copy engines reach directly
        self._release = release

    def __del__(self):
        release = self._release
        if release is not None:
            self._release = None
            try:
                release()
            except Exception:  # noqa: BLE001  (at interpreter exit the device may already be gone)
                pass


class Backend(ABC):
    """One kind of memory and the means to run kernels on it."""

    type: str = ""
    host_addressable: bool = False  # the host can read and write this memory directly
    compiles_kernels: bool = False  # kernels are compiled (and their launches cached), not interpreted

    @property
    @abstractmethod
    def facts(self) -> dict:
        """The facts of the device class this backend drives (see ``device/facts``)."""

    def kernel_element_type(self, dtype):
        """The Triton type kernels on this device read and write ``dtype``'s elements as: float8 e4m3 as its
        bytes (uint8) where the facts name no float8 conversions (``native_fp8``: Triton refuses the e4m3 type
        when compiling for such a GPU, and its interpreter misreads e4m3 NaN), kernels then converting it by
        its bits (``kernels/formats.py``); any other dtype as its own Triton type."""
        if dtype.name == "float8_e4m3fn" and not self.facts.get("native_fp8"):
            import triton.language as tl
            return tl.uint8
        return dtype.triton

    def current_index(self) -> int:
        return 0

    @abstractmethod
    def device_count(self) -> int: ...

    @abstractmethod
    def allocate(self, nbytes: int, index: int | None) -> Buffer: ...

    @abstractmethod
    def upload(self, dst_ptr: int, host: np.ndarray, index: int | None) -> None:
        """Copy the bytes of the C-contiguous array ``host`` to ``dst_ptr``."""

    def fill_bytes(self, dst_ptr: int, nbytes: int, value: int, index: int | None) -> None:
        """Set ``nbytes`` bytes at ``dst_ptr`` to ``value``, in order with the current stream's work."""
        self.upload(dst_ptr, np.full(nbytes, value, np.uint8), index)

    def upload_from_host(self, dst_ptr: int, src_ptr: int, nbytes: int, index: int | None) -> None:
        """Copy ``nbytes`` from ordinary (pageable) host memory at ``src_ptr`` to ``dst_ptr``, waiting for
        the copy. Devices whose copy engines read only page-locked memory stage it there."""
        self.copy_raw(dst_ptr, src_ptr, nbytes, index, "h2d")

    @abstractmethod
    def download(self, src_ptr: int, nbytes: int, index: int | None) -> np.ndarray:
        """A fresh host uint8 array holding ``nbytes`` bytes from ``src_ptr``."""

    @abstractmethod
    def copy_raw(self, dst_ptr: int, src_ptr: int, nbytes: int, index: int | None, kind: str,
                 blocking: bool = True) -> None:
        """Copy bytes; ``kind`` is "h2d", "d2h" or "d2d" as seen from this backend's device."""

    @abstractmethod
    def synchronize(self, index: int | None) -> None: ...

    @abstractmethod
    def kernel_pointer(self, ptr: int, element_type):
        """The object a Triton kernel receives for a pointer to ``element_type`` at ``ptr``."""

    def host_view(self, ptr: int, nbytes: int, owner) -> np.ndarray | None:
        """A host uint8 array over device memory where the host can address it directly, else None."""
        return None

    def check_kernels(self) -> None:
        """Raise a clear error when this process cannot run kernels on this backend."""

    def parked_buffers(self, index: int):
        """A function ``(nbytes, stream) -> buffer or None`` that hands out a cached buffer of that size on
        device ``index`` without Python where one is ready (else None, and ``allocate`` serves); None where
        the backend keeps no such cache."""
        return None

    def bind_launch(self, compiled, grid, values, positions):
        """A callable ``(stream, *new)`` that launches the compiled kernel ``compiled`` over ``grid`` with
        the kernel's positional arguments ``values`` (tensors as addresses), the arguments at ``positions``
        taking the call's ``new`` values; None where this backend has no such launcher for it (then
        launches go through Triton's)."""
        return None

    def launch_failed(self, error: RuntimeError, index: int) -> None:
        """After a launcher from ``bind_launch`` raised ``error`` on device ``index``: put right what a retry
        can fix and return (the caller retries once), else raise."""
        raise error

    def record_graph(self, issue, index: int, prepare=None):
        """The device's own graph of the launches that ``issue()`` makes on device ``index``, recorded
        without running them, as an object whose ``launch()`` runs them all on the current stream; None
        where the device has no such graphs (its replays issue the launches one by one). ``prepare(stream)``
        is called with the recording stream before recording starts (when memory can still be allocated)."""
        return None

    def describe(self) -> dict:
        return {"type": self.type}
