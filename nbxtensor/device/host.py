"""The CPU device: host memory, with the Triton kernels run by Triton's interpreter."""
from __future__ import annotations

import ctypes

import numpy as np

from .. import _runtime
from ..memory.caching import OutOfMemoryError, _fmt
from . import facts as _facts
from .backend import Backend, Buffer, KernelPointer

_ALIGN = 64


def _host_bytes(nbytes: int) -> np.ndarray:
    """``nbytes`` of uninitialised host memory, or ``OutOfMemoryError`` saying why there is none."""
    try:
        return np.empty(nbytes, dtype=np.uint8)
    except (MemoryError, ValueError):  # ValueError: more bytes than NumPy can index
        raise _host_out_of_memory(nbytes) from None


def _host_out_of_memory(nbytes: int) -> OutOfMemoryError:
    try:
        with open("/proc/meminfo") as meminfo:
            fields = dict(line.split(":", 1) for line in meminfo)
        available = f"{_fmt(int(fields['MemAvailable'].split()[0]) * 1024)} available on the host"
    except (OSError, KeyError, ValueError):
        available = "host memory available unknown"
    limit = ""
    try:
        import resource
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            limit = f"; this process may address at most {_fmt(soft)} (its RLIMIT_AS, ulimit -v)"
    except (ImportError, OSError, ValueError):
        pass
    return OutOfMemoryError(
        f"cpu: out of memory asking for {_fmt(nbytes)} of host memory; {available}{limit}; nbxtensor caches "
        "no host memory, so there is nothing of its own to release. To fit: free tensors you no longer need "
        "(del them), use smaller batches or a narrower dtype, or raise the process's memory limit.")


class HostPointer(KernelPointer):
    """A kernel argument pointing into host memory.

    Triton's interpreter copies every pointer argument to the host and back through a small part of
    torch's tensor interface. Host memory needs no copy, so each of those calls answers with the
    pointer itself.
    """

    __slots__ = ()

    def untyped_storage(self):
        return self

    def cpu(self):
        return self

    def new_empty(self, *_args, **_kwargs):
        return self

    def set_(self, *_args):
        return self

    def storage_offset(self) -> int:
        return 0

    def size(self):
        return (0,)

    def stride(self):
        return (1,)

    def copy_(self, _other):
        return self


class HostBackend(Backend):
    type = "cpu"
    host_addressable = True

    @property
    def facts(self) -> dict:
        return _facts.load("cpu")

    def device_count(self) -> int:
        return 1

    def allocate(self, nbytes: int, index=None, pinned: bool = False) -> Buffer:
        if pinned:
            from . import available_backends
            gpu = available_backends().get("cuda")
            if gpu is None:
                raise RuntimeError("pinned host memory needs a CUDA device in this process")
            return gpu.allocate_pinned(nbytes)
        raw = _host_bytes(nbytes + _ALIGN)
        shift = (-raw.ctypes.data) % _ALIGN
        return Buffer(raw.ctypes.data + shift, nbytes, raw)

    def wrap(self, array: np.ndarray, ptr: int, nbytes: int) -> Buffer:
        """A buffer over memory owned by a NumPy array, kept alive by the buffer."""
        return Buffer(ptr, nbytes, array)

    def upload(self, dst_ptr: int, host: np.ndarray, index=None) -> None:
        if host.nbytes:
            ctypes.memmove(dst_ptr, host.ctypes.data, host.nbytes)

    def download(self, src_ptr: int, nbytes: int, index=None) -> np.ndarray:
        out = _host_bytes(nbytes)
        if nbytes:
            ctypes.memmove(out.ctypes.data, src_ptr, nbytes)
        return out

    def host_view(self, ptr: int, nbytes: int, owner) -> np.ndarray:
        if nbytes == 0:
            return np.empty(0, dtype=np.uint8)
        window = (ctypes.c_uint8 * nbytes).from_address(ptr)
        window.owner = owner  # the array below keeps the window, and so the storage, alive
        return np.frombuffer(window, dtype=np.uint8)

    def fill_bytes(self, dst_ptr: int, nbytes: int, value: int, index=None) -> None:
        if nbytes:
            ctypes.memset(dst_ptr, value, nbytes)

    def copy_raw(self, dst_ptr: int, src_ptr: int, nbytes: int, index=None, kind: str = "h2h",
                 blocking: bool = True) -> None:
        if nbytes:
            ctypes.memmove(dst_ptr, src_ptr, nbytes)

    def synchronize(self, index=None) -> None:
        return None

    def kernel_pointer(self, ptr: int, element_type) -> HostPointer:
        return HostPointer(ptr, element_type)

    def check_kernels(self) -> None:
        if _runtime.KERNEL_MODE != _runtime.INTERPRETED:
            raise RuntimeError(
                "this process compiles kernels for the GPU, so CPU tensors hold data but cannot run ops "
                "(Triton interprets kernels only process-wide); move the tensor with .to('cuda'), or "
                "start the process with NBX_DEVICE=cpu to compute on the CPU")

    def describe(self) -> dict:
        return {"type": "cpu", "kernels": "Triton interpreter" if _runtime.KERNEL_MODE == _runtime.INTERPRETED
                else "unavailable in this process (kernels are compiled for the GPU)"}
