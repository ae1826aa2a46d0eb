"""The CUDA device through NVIDIA's ``cuda-bindings``, with a Triton driver that never imports torch."""
from __future__ import annotations

import ctypes
import functools
import threading
import warnings

import numpy as np

from ..memory import CachingAllocator, RawOutOfMemory
from ..memory.caching import limit_from_environment
from . import cuda_launcher
from . import facts as _facts
from .backend import Backend, Buffer, KernelPointer


class CudaError(RuntimeError):
    pass


def _check(result, what: str):
    """Unpack a ``cuda-bindings`` result tuple, raising on an error code."""
    err, *rest = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        from cuda.bindings import runtime as rt
        _, name = rt.cudaGetErrorName(err)
        _, text = rt.cudaGetErrorString(err)
        raise CudaError(f"{what} failed: {name.decode() if isinstance(name, bytes) else name}: "
                        f"{text.decode() if isinstance(text, bytes) else text}")
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else tuple(rest)


STAGE_BYTES = 16 << 20  # each of the two pinned staging buffers
STAGE_ABOVE_BYTES = 1 << 20  # smaller uploads go straight from pageable memory


def staged_copy(dst: int, src: int, nbytes: int, stages: list[int], stage_bytes: int, copy_async, record,
                wait) -> None:
    """Copy ``nbytes`` from host memory at ``src`` to ``dst`` a piece at a time through the host buffers
    ``stages`` in turn: ``copy_async(dst, stage, size)`` queues a piece's copy, ``record(slot)`` marks the
    last copy queued from stage ``slot`` and ``wait(slot)`` blocks until it is done, which must happen
    before the host refills that stage. The caller waits for the last copies."""
    for piece, start in enumerate(range(0, nbytes, stage_bytes)):
        slot = piece % len(stages)
        size = min(stage_bytes, nbytes - start)
        if piece >= len(stages):
            wait(slot)
        ctypes.memmove(stages[slot], src + start, size)
        copy_async(dst + start, stages[slot], size)
        record(slot)


class CudaBackend(Backend):
    type = "cuda"
    host_addressable = False
    compiles_kernels = True

    def __init__(self):
        from cuda.bindings import runtime
        self._rt = runtime
        self._count = _check(runtime.cudaGetDeviceCount(), "cudaGetDeviceCount")
        self._local = threading.local()
        self._properties: dict[int, object] = {}
        self._facts: dict[int, dict] = {}
        self._allocators: dict[int, CachingAllocator] = {}
        self._staging = None  # pinned buffers and their events, for uploads from pageable memory
        self._staging_lock = threading.Lock()
        self._launch_address: int | None = None  # cuLaunchKernelEx's, once looked up; 0: unavailable

    # ---- devices ---------------------------------------------------------------------------
    def device_count(self) -> int:
        return self._count

    def current_index(self) -> int:
        return getattr(self._local, "index", 0)

    def set_current(self, index: int) -> None:
        if not 0 <= index < self._count:
            raise ValueError(f"cuda:{index} does not exist; this machine has {self._count} CUDA device(s)")
        _check(self._rt.cudaSetDevice(index), f"cudaSetDevice({index})")
        self._local.index = index

    def _activate(self, index: int | None) -> None:
        index = self.current_index() if index is None else index
        if index != getattr(self._local, "active", None):
            self.set_current(index)
            self._local.active = index

    def properties(self, index: int):
        if index not in self._properties:
            self._properties[index] = _check(self._rt.cudaGetDeviceProperties(index), "cudaGetDeviceProperties")
        return self._properties[index]

    def capability(self, index: int | None = None) -> tuple[int, int]:
        p = self.properties(self.current_index() if index is None else index)
        return (p.major, p.minor)

    @property
    def facts(self) -> dict:
        index = self.current_index()
        found = self._facts.get(index)
        if found is None:  # one facts dict a device, whichever thread made it first
            found = self._facts.setdefault(index, facts_for(self.properties(index)))
        return found

    # ---- memory ----------------------------------------------------------------------------
    def allocator(self, index: int | None = None) -> CachingAllocator:
        index = self.current_index() if index is None else index
        found = self._allocators.get(index)
        if found is None:  # threads racing here all get the allocator published first
            found = self._allocators.setdefault(index, CachingAllocator(
                lambda n, i=index: self._raw_alloc(n, i), lambda p, i=index: self._raw_free(p, i),
                lambda i=index: self._mem_info(i), name=f"cuda:{index}", limit=limit_from_environment()))
        return found

    def parked_buffers(self, index: int):
        return self.allocator(index).parked_buffer

    def _raw_alloc(self, nbytes: int, index: int) -> int:
        self._activate(index)
        err, ptr = self._rt.cudaMalloc(nbytes)
        if err == self._rt.cudaError_t.cudaErrorMemoryAllocation:
            self._rt.cudaGetLastError()  # clear the sticky-free error so the process stays usable
            raise RawOutOfMemory(nbytes)
        return int(_check((err, ptr), f"cudaMalloc({nbytes})"))

    def _raw_free(self, ptr: int, index: int) -> None:
        self._activate(index)
        _check(self._rt.cudaFree(ptr), "cudaFree")

    def _mem_info(self, index: int) -> tuple[int, int]:
        self._activate(index)
        return _check(self._rt.cudaMemGetInfo(), "cudaMemGetInfo")

    def allocate(self, nbytes: int, index: int | None) -> Buffer:
        index = self.current_index() if index is None else index
        allocator = self._allocators.get(index) or self.allocator(index)
        return allocator.buffer(nbytes, self.current_stream_handle(index))

    def allocate_pinned(self, nbytes: int) -> Buffer:
        """Page-locked host memory, which the GPU's copy engines read and write directly."""
        ptr = int(_check(self._rt.cudaMallocHost(nbytes), f"cudaMallocHost({nbytes})"))
        return Buffer(ptr, nbytes, pinned=True, release=functools.partial(self._rt.cudaFreeHost, ptr))

    def upload(self, dst_ptr: int, host: np.ndarray, index: int | None) -> None:
        self.upload_from_host(dst_ptr, host.ctypes.data, host.nbytes, index)

    def upload_from_host(self, dst_ptr: int, src_ptr: int, nbytes: int, index: int | None) -> None:
        """Large copies go through two pinned buffers in turn (the driver's own staging of pageable
        memory runs at a fraction of the bus): the host fills one while the copy engine drains the
        other. The buffers are made on first use and kept; a lock keeps threads from sharing them."""
        h2d = self._rt.cudaMemcpyKind.cudaMemcpyHostToDevice
        if nbytes < STAGE_ABOVE_BYTES:
            self._copy(dst_ptr, src_ptr, nbytes, index, h2d)
            return
        rt = self._rt
        with self._staging_lock:
            self._activate(index)
            stream = self.current_stream_handle(index)
            if self._staging is None:
                buffers = [self.allocate_pinned(STAGE_BYTES) for _ in range(2)]
                events = [_check(rt.cudaEventCreateWithFlags(rt.cudaEventDisableTiming), "cudaEventCreate")
                          for _ in buffers]
                self._staging = buffers, events
            buffers, events = self._staging
            staged_copy(dst_ptr, src_ptr, nbytes, [b.ptr for b in buffers], STAGE_BYTES,
                        copy_async=lambda dst, src, size: _check(rt.cudaMemcpyAsync(dst, src, size, h2d, stream),
                                                                 "cudaMemcpyAsync"),
                        record=lambda slot: _check(rt.cudaEventRecord(events[slot], stream), "cudaEventRecord"),
                        wait=lambda slot: _check(rt.cudaEventSynchronize(events[slot]), "cudaEventSynchronize"))
            _check(rt.cudaStreamSynchronize(stream), "cudaStreamSynchronize")

    def download(self, src_ptr: int, nbytes: int, index: int | None) -> np.ndarray:
        out = np.empty(nbytes, dtype=np.uint8)
        self._copy(out.ctypes.data, src_ptr, nbytes, index, self._rt.cudaMemcpyKind.cudaMemcpyDeviceToHost)
        return out

    def fill_bytes(self, dst_ptr: int, nbytes: int, value: int, index: int | None) -> None:
        if nbytes:
            self._activate(index)
            _check(self._rt.cudaMemsetAsync(dst_ptr, value, nbytes, self.current_stream_handle(index)),
                   "cudaMemsetAsync")

    def copy_raw(self, dst_ptr: int, src_ptr: int, nbytes: int, index: int | None, kind: str,
                 blocking: bool = True) -> None:
        """A byte copy on the current stream; ``kind`` is "h2d", "d2h" or "d2d"."""
        kinds = self._rt.cudaMemcpyKind
        self._copy(dst_ptr, src_ptr, nbytes, index, {"h2d": kinds.cudaMemcpyHostToDevice,
                                                      "d2h": kinds.cudaMemcpyDeviceToHost,
                                                      "d2d": kinds.cudaMemcpyDeviceToDevice}[kind], blocking)

    def _copy(self, dst: int, src: int, nbytes: int, index: int | None, kind, blocking: bool = True) -> None:
        if nbytes == 0:
            return
        self._activate(index)
        stream = self.current_stream_handle(index)
        _check(self._rt.cudaMemcpyAsync(dst, src, nbytes, kind, stream), "cudaMemcpyAsync")
        if blocking:
            _check(self._rt.cudaStreamSynchronize(stream), "cudaStreamSynchronize")

    def synchronize(self, index: int | None = None) -> None:
        self._activate(index)
        _check(self._rt.cudaDeviceSynchronize(), "cudaDeviceSynchronize")

    # ---- launches --------------------------------------------------------------------------
    def bind_launch(self, compiled, grid, values, positions):
        """Our launcher (``cuda_launcher``): the parameters packed once, a call rewrites the varying ones
        and calls ``cuLaunchKernelEx``, for a fraction of Triton's launcher's host time. None where it
        cannot serve the kernel, or cannot be built here (then Triton's launcher serves)."""
        if self._launch_address is None:
            from cuda.bindings import driver
            self._launch_address = 0
            err, address, _ = driver.cuGetProcAddress(
                b"cuLaunchKernelEx", 12000, driver.CUdriverProcAddress_flags.CU_GET_PROC_ADDRESS_DEFAULT)
            if err == driver.CUresult.CUDA_SUCCESS and address:
                try:
                    cuda_launcher.module()
                    self._launch_address = int(address)
                except RuntimeError as e:
                    warnings.warn(f"{e}; kernels launch through Triton's launcher", RuntimeWarning, stacklevel=2)
        if not self._launch_address:
            return None
        return cuda_launcher.bind(compiled, grid, values, positions, self._launch_address)

    def launch_failed(self, error: RuntimeError, index: int) -> None:
        """After a bound launch raised ``error``: make device ``index`` current where the thread had no
        context (the caller then retries once), else raise the error with the driver's name for it."""
        from cuda.bindings import driver
        code = getattr(error, "cuda_result", None)
        if code in (driver.CUresult.CUDA_ERROR_INVALID_CONTEXT, driver.CUresult.CUDA_ERROR_CONTEXT_IS_DESTROYED):
            self._local.active = None
            self._activate(index)
            return
        name = driver.CUresult(code).name if code is not None else "unknown"
        raise RuntimeError(f"cuda:{index}: kernel launch failed: {name} ({code})") from error

    # ---- streams ---------------------------------------------------------------------------
    def current_stream_handle(self, index: int | None = None) -> int:
        streams = getattr(self._local, "streams", None)
        if not streams:
            return 0
        return streams.get(self.current_index() if index is None else index, 0)

    def set_stream_handle(self, index: int, handle: int) -> None:
        streams = getattr(self._local, "streams", None)
        if streams is None:
            streams = self._local.streams = {}
        streams[index] = handle

    # ---- graphs ----------------------------------------------------------------------------
    def record_graph(self, issue, index: int, prepare=None) -> "CudaGraph":
        """Stream capture on a private stream: the launches ``issue()`` makes land in a CUDA graph
        instead of running. Thread-local mode refuses anything in this thread that could not be part of
        a graph (a synchronisation, an allocation from the driver), which ends the recording with an
        error rather than a wrong graph; ``prepare(stream)`` runs on the private stream before capture,
        where memory the launches will need can still be allocated."""
        rt = self._rt
        self._activate(index)
        stream = int(_check(rt.cudaStreamCreateWithFlags(rt.cudaStreamNonBlocking), "cudaStreamCreateWithFlags"))
        previous = self.current_stream_handle(index)
        self.set_stream_handle(index, stream)
        try:
            if prepare is not None:
                prepare(stream)
            _check(rt.cudaStreamBeginCapture(stream, rt.cudaStreamCaptureMode.cudaStreamCaptureModeThreadLocal),
                   "cudaStreamBeginCapture")
            try:
                issue()
            finally:
                graph = _check(rt.cudaStreamEndCapture(stream), "cudaStreamEndCapture")
            try:
                executable = _check(rt.cudaGraphInstantiate(graph, 0), "cudaGraphInstantiate")
            except CudaError:
                rt.cudaGraphDestroy(graph)
                raise
        finally:
            self.set_stream_handle(index, previous)
            rt.cudaStreamDestroy(stream)
        return CudaGraph(self, index, graph, executable)

    def kernel_pointer(self, ptr: int, element_type) -> KernelPointer:
        return KernelPointer(ptr, element_type)

    def describe(self) -> dict:
        return self.describe_index(self.current_index())

    def describe_index(self, index: int) -> dict:
        p = self.properties(index)
        name = p.name.decode() if isinstance(p.name, bytes) else str(p.name)
        try:
            cuda_launcher.module()
            launcher = "nbxtensor's (native/cuda_launch.c) for repeated launches"
        except RuntimeError as e:
            launcher = f"Triton's ({e})"
        return {"type": "cuda", "name": name.rstrip("\x00"), "capability": f"{p.major}.{p.minor}",
                "multiprocessors": p.multiProcessorCount, "memory_gib": round(p.totalGlobalMem / 2 ** 30, 1),
                "facts": self.facts["name"], "launcher": launcher}


class CudaGraph:
    """An instantiated CUDA graph; ``launch()`` runs it on the device's current stream."""

    def __init__(self, backend: CudaBackend, index: int, graph, executable):
        self._backend, self._index, self._graph, self._executable = backend, index, graph, executable

    def launch(self) -> None:
        backend = self._backend
        backend._activate(self._index)
        _check(backend._rt.cudaGraphLaunch(self._executable, backend.current_stream_handle(self._index)),
               "cudaGraphLaunch")

    def __del__(self):
        rt = self._backend._rt
        rt.cudaGraphExecDestroy(self._executable)
        rt.cudaGraphDestroy(self._graph)


def facts_for(props) -> dict:
    """The facts file matching a device's compute capability and name, or facts derived from its
    driver properties when no file matches."""
    name = props.name.decode() if isinstance(props.name, bytes) else str(props.name)
    for candidate in _facts.all_facts():
        match = candidate.get("match", {})
        if match.get("type") != "cuda":
            continue
        if match.get("capability") and [props.major, props.minor] not in match["capability"]:
            continue
        if match.get("name_contains") and not any(s in name for s in match["name_contains"]):
            continue
        return candidate
    derived = dict(_facts.load("generic_cuda"))
    derived.update(name=f"derived from the driver ({name.strip()})", derived=True,
                   shared_memory_per_block_bytes=getattr(props, "sharedMemPerBlockOptin", None)
                   or derived["shared_memory_per_block_bytes"],
                   memory=dict(derived["memory"], bytes=props.totalGlobalMem))
    return derived


def install_triton_driver(backend: CudaBackend) -> None:
    """Make Triton launch on our devices and streams, with no torch behind it."""
    import triton
    from triton.backends.nvidia.driver import CudaDriver, CudaLauncher, CudaUtils

    class NbxCudaDriver(CudaDriver):
        def __init__(self):
            self.utils = CudaUtils()
            self.launcher_cls = CudaLauncher
            self.get_device_capability = backend.capability
            self.get_current_stream = backend.current_stream_handle
            self.get_current_device = backend.current_index
            self.set_current_device = backend.set_current

        @staticmethod
        def is_active():
            return True

        def get_active_torch_device(self):
            raise RuntimeError("nbxtensor's Triton driver has no torch device")

        def get_device_interface(self):
            raise RuntimeError("nbxtensor's Triton driver has no torch device interface")

        def get_empty_cache_for_benchmark(self):
            # device memory that clear_cache overwrites between timed calls, so each starts with a cold L2
            return backend.allocate(256 * 2 ** 20, backend.current_index())

        def clear_cache(self, cache):
            stream = backend.current_stream_handle(backend.current_index())
            _check(backend._rt.cudaMemsetAsync(cache.ptr, 0, cache.nbytes, stream), "cudaMemsetAsync")

    triton.runtime.driver.set_active(NbxCudaDriver())
