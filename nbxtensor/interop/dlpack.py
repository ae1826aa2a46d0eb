"""DLPack: hand tensors to other libraries and take theirs, sharing memory, through ``ctypes``.

Producer: ``to_dlpack`` and ``Tensor.__dlpack__`` return a PyCapsule named ``"dltensor_versioned"``
(a ``DLManagedTensorVersioned``, DLPack 1.1) when the consumer passes ``max_version >= (1, 0)``, else
the legacy ``"dltensor"`` (a ``DLManagedTensor``). The export keeps the tensor, and so its storage,
alive until the consumer calls the deleter, or until the capsule dies unconsumed. Strides are in
elements and ``data`` points at the first element.

The capsule, its destructor and the deleter are NumPy's C code, asked to export a NumPy array laid over
the tensor's memory (an array that keeps the tensor alive and never reads the memory, so it works for
device memory too); we then write the fields NumPy cannot know: device, dtype code, version and flags.
Written as ``ctypes`` callbacks they would be unsafe: consumers call the deleter, and Python destroys
the capsule, while an exception is propagating (a failed import, a temporary dropped during
unwinding), and a ``ctypes`` callback run then loses that exception and can crash the interpreter.

Consumer: ``from_dlpack`` takes any object with ``__dlpack__``/``__dlpack_device__`` or a raw capsule
and returns a tensor over the same memory; the producer's deleter runs once, when the last view of
that memory dies.

Choices where the protocol leaves room:

- ``dl_device`` naming another device copies there unless ``copy=False``, which raises ``BufferError``
  (the Array API's "copy only when needed"); only CPU and CUDA devices are accepted as targets.
- Capsules flagged read-only (NumPy exports non-writeable arrays so) are accepted: nbxtensor has no
  read-only tensors, so not writing through such a tensor is the caller's responsibility.
- Negative strides, vector lanes and dtypes or devices nbxtensor lacks are refused with an error that
  names them. ``kDLCUDAHost`` (pinned host) memory becomes a CPU tensor, since the host addresses it.
- CUDA streams: nbxtensor computes on the legacy default stream. A consumer's stream other than that
  one (``None`` and ``1`` name it; ``-1`` asks for no synchronisation) is made to wait on an event
  recorded there, so the consumer never reads before our writes land. As a consumer we ask the producer
  to order its work before the legacy default stream (``stream=1``).
"""
from __future__ import annotations

import ctypes
import enum
import weakref

import numpy as np

from .. import shape as _shape
from ..device import available_backends, backend_for, device
from ..dtypes import from_dlpack_code
from ..device.backend import Buffer
from ..storage import Storage
from ..tensor import Tensor

__all__ = ["from_dlpack", "to_dlpack", "DLDeviceType", "DLPACK_VERSION"]

DLPACK_VERSION = (1, 1)  # 1.1 added the fp8 type codes the dtype table uses
FLAG_IS_COPIED = 1 << 1

LEGACY_STREAM = 1
NO_SYNC_STREAM = -1


class DLDeviceType(enum.IntEnum):
    kDLCPU = 1
    kDLCUDA = 2
    kDLCUDAHost = 3


# ---- the C structures of dlpack.h ------------------------------------------------------------------
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    # the deleter is kept as a bare address: it may be ours or any producer's
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class _DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", _DLPackVersion), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


_Deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


# ---- the PyCapsule C API, typed here rather than on ctypes.pythonapi, which other code shares -------
def _python_api(name: str, restype, *argtypes):
    return ctypes.PYFUNCTYPE(restype, *argtypes)((name, ctypes.pythonapi))


_capsule_is_valid = _python_api("PyCapsule_IsValid", ctypes.c_int, ctypes.py_object, ctypes.c_char_p)
_capsule_get_pointer = _python_api("PyCapsule_GetPointer", ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)
_capsule_set_name = _python_api("PyCapsule_SetName", ctypes.c_int, ctypes.py_object, ctypes.c_char_p)


class _CapsuleKind:
    """One capsule version: its struct and its names."""

    def __init__(self, name: bytes, struct):
        self.struct = struct
        self.fresh_name = name
        # a capsule keeps a pointer to its name: this bytes object lives as long as the module
        self.used_name = b"used_" + name


_VERSIONED = _CapsuleKind(b"dltensor_versioned", _DLManagedTensorVersioned)
_LEGACY = _CapsuleKind(b"dltensor", _DLManagedTensor)


def _is_capsule(obj) -> bool:
    return type(obj).__name__ == "PyCapsule" and type(obj).__module__ == "builtins"


# ---- devices ------------------------------------------------------------------------------------
def dlpack_device(dev: device) -> tuple[DLDeviceType, int]:
    if dev.type == "cpu":
        return DLDeviceType.kDLCPU, 0
    if dev.type == "cuda":
        return DLDeviceType.kDLCUDA, dev.index or 0
    raise BufferError(f"a tensor on {dev} cannot be exported through DLPack; CPU and CUDA tensors can")


def _device_from_dlpack(device_type: int, device_id: int) -> device:
    """The nbxtensor device for a DLPack device; pinned CUDA host memory is CPU memory to us."""
    if device_type in (DLDeviceType.kDLCPU, DLDeviceType.kDLCUDAHost):
        return device("cpu")
    if device_type == DLDeviceType.kDLCUDA:
        if "cuda" not in available_backends():
            raise BufferError(f"DLPack tensor is on CUDA device {device_id}, but this process has no CUDA backend "
                              "(it runs kernels on the CPU); copy it to the host in the producing library first")
        return device("cuda", int(device_id))
    try:
        label = DLDeviceType(device_type).name
    except ValueError:
        label = f"device type {device_type}"
    raise BufferError(f"unsupported DLPack device {label} (id {device_id}); nbxtensor takes kDLCPU (1), "
                      "kDLCUDA (2) and kDLCUDAHost (3)")


def tensor_dlpack_device(self: Tensor) -> tuple[DLDeviceType, int]:
    """``(device type, device id)`` as DLPack numbers them, for ``__dlpack_device__``."""
    return dlpack_device(self.device)


# ---- producing ----------------------------------------------------------------------------------
def to_dlpack(tensor: Tensor, *, max_version=None, stream=None, dl_device=None, copy=None):
    """A DLPack capsule over ``tensor``'s memory (see the module notes for each argument)."""
    if tensor.is_meta:
        raise BufferError("a meta tensor has no data to export through DLPack")
    target = tensor.device if dl_device is None else _device_from_dlpack(*dl_device)
    if target.type == "cuda" and target.index is None:
        target = device("cuda", 0)
    copied = False
    if target != tensor.device:
        if copy is False:
            raise BufferError(f"exporting a tensor on {tensor.device} to {target} needs a copy, and copy=False "
                              "forbids it")
        tensor = tensor.to(target, copy=True)
        copied = True
    elif copy:
        tensor = tensor.clone()
        copied = True
    _order_for_consumer(tensor.device, stream)
    versioned = max_version is not None and tuple(max_version)[0] >= 1
    kind = _VERSIONED if versioned else _LEGACY
    window = _element_window(tensor)
    capsule = window.__dlpack__(max_version=(1, 0)) if versioned else window.__dlpack__()
    managed = kind.struct.from_address(_capsule_get_pointer(capsule, kind.fresh_name))
    # NumPy described the window as host memory of same-size integers; say what it really is
    device_type, device_id = dlpack_device(tensor.device)
    code, bits = tensor.dtype.dlpack
    managed.dl_tensor.device = _DLDevice(device_type, device_id)
    managed.dl_tensor.dtype = _DLDataType(code, bits, 1)
    if versioned:
        managed.version = _DLPackVersion(*DLPACK_VERSION)
        managed.flags = FLAG_IS_COPIED if copied else 0
    return capsule


def _element_window(tensor: Tensor) -> np.ndarray:
    """A NumPy array with the tensor's shape and strides over its memory, on any device (nothing is
    read), whose lifetime keeps the tensor alive. Same-size unsigned integers stand in for the
    elements because NumPy exports those for every itemsize we have."""
    itemsize = tensor.dtype.itemsize
    element = np.dtype(np.complex128) if itemsize == 16 else np.dtype(f"u{itemsize}")
    if tensor.numel() == 0:
        flat = np.empty(0, dtype=element)
    else:
        span = (_shape.max_offset(tensor.shape, tensor.stride()) + 1) * itemsize
        memory = (ctypes.c_uint8 * span).from_address(tensor.data_ptr())
        memory.owner = tensor
        flat = np.frombuffer(memory, dtype=element)
    return np.lib.stride_tricks.as_strided(flat, shape=tensor.shape,
                                           strides=tuple(s * itemsize for s in tensor.stride()))


def tensor_dlpack(self: Tensor, *, stream=None, max_version=None, dl_device=None, copy=None):
    """A DLPack capsule over this tensor's memory, for ``from_dlpack`` of any library."""
    return to_dlpack(self, max_version=max_version, stream=stream, dl_device=dl_device, copy=copy)


def _order_for_consumer(dev: device, stream) -> None:
    """Make the consumer's ``stream`` see every write queued on our stream before the export."""
    if dev.type != "cuda":
        if stream not in (None, NO_SYNC_STREAM):
            raise ValueError(f"stream={stream!r} was passed for a tensor on {dev}; only None is valid there")
        return
    if stream is None or stream in (LEGACY_STREAM, NO_SYNC_STREAM):
        return  # our work is already on the legacy default stream, or the consumer asked for no sync
    if not isinstance(stream, int) or stream < NO_SYNC_STREAM or stream == 0:
        raise ValueError(f"invalid CUDA stream {stream!r} for DLPack: pass None, -1, 1 (legacy default), "
                         "2 (per-thread default) or a stream handle above 2; 0 is ambiguous and not allowed")
    _wait_on_default_stream(dev.index or 0, stream)


def _wait_on_default_stream(index: int, consumer_stream: int) -> None:
    from cuda.bindings import runtime as rt

    from ..device.cuda import _check

    backend = backend_for(device("cuda", index))
    backend._activate(index)
    event = _check(rt.cudaEventCreateWithFlags(rt.cudaEventDisableTiming), "cudaEventCreateWithFlags")
    try:
        _check(rt.cudaEventRecord(event, backend.current_stream_handle(index)), "cudaEventRecord")
        _check(rt.cudaStreamWaitEvent(consumer_stream, event, 0), "cudaStreamWaitEvent")
    finally:
        # destroying a recorded event is legal: the wait queued above still happens
        _check(rt.cudaEventDestroy(event), "cudaEventDestroy")


# ---- consuming ----------------------------------------------------------------------------------
class _ProducerHold:
    """Owns a consumed capsule's managed tensor; the producer's deleter runs once, when this dies."""

    __slots__ = ("__weakref__",)

    def __init__(self, managed_address: int, deleter_address: int | None):
        if deleter_address:
            weakref.finalize(self, _Deleter(deleter_address), managed_address)


def from_dlpack(ext_tensor) -> Tensor:
    """A tensor sharing memory with ``ext_tensor``: anything with ``__dlpack__`` (NumPy, torch, CuPy,
    nbxtensor) or a DLPack capsule not consumed yet."""
    capsule = ext_tensor if _is_capsule(ext_tensor) else _request_capsule(ext_tensor)
    return _consume(capsule)


def _request_capsule(obj):
    if not hasattr(obj, "__dlpack__"):
        raise TypeError(f"from_dlpack needs an object with __dlpack__ or a DLPack capsule, got {type(obj).__name__}")
    device_type, device_id = obj.__dlpack_device__()
    _device_from_dlpack(int(device_type), int(device_id))  # refuse before the producer does any work
    request = {"stream": LEGACY_STREAM} if int(device_type) == DLDeviceType.kDLCUDA else {}
    try:
        return obj.__dlpack__(max_version=DLPACK_VERSION, **request)
    except TypeError:
        return obj.__dlpack__(**request)  # a producer older than DLPack 1.0 knows no max_version


def _consume(capsule) -> Tensor:
    if _capsule_is_valid(capsule, _VERSIONED.fresh_name):
        kind = _VERSIONED
    elif _capsule_is_valid(capsule, _LEGACY.fresh_name):
        kind = _LEGACY
    elif _capsule_is_valid(capsule, _VERSIONED.used_name) or _capsule_is_valid(capsule, _LEGACY.used_name):
        raise BufferError("this DLPack capsule was already consumed; a capsule can be consumed only once")
    else:
        raise TypeError("the capsule is not a DLPack capsule (its name is neither 'dltensor' nor "
                        "'dltensor_versioned')")
    address = _capsule_get_pointer(capsule, kind.fresh_name)
    managed = kind.struct.from_address(address)
    if kind is _VERSIONED and managed.version.major != DLPACK_VERSION[0]:
        raise BufferError(f"DLPack capsule has version {managed.version.major}.{managed.version.minor}; "
                          f"nbxtensor reads major version {DLPACK_VERSION[0]}")
    # everything is read and checked before the rename: until then the capsule still frees itself
    dev, dt, shape, strides, data = _describe(managed.dl_tensor)
    deleter = managed.deleter
    if _capsule_set_name(capsule, kind.used_name) != 0:
        raise BufferError("could not mark the DLPack capsule as consumed")
    hold = _ProducerHold(address, deleter)
    span = _shape.max_offset(shape, strides) + 1 if _shape.numel(shape) else 0
    if span == 0:
        del hold  # nothing to keep: an empty tensor allocates nothing, so the producer is released now
        storage = Storage(dev, 0, None)
    else:
        nbytes = span * dt.itemsize
        storage = Storage(dev, nbytes, Buffer(data, nbytes, hold))
    return Tensor._make(storage, 0, shape, strides, dt)


def _describe(dl: _DLTensor):
    """Device, dtype, shape, strides (in elements) and data address of a DLTensor, or a clear error."""
    dev = _device_from_dlpack(dl.device.device_type, dl.device.device_id)
    code, bits, lanes = dl.dtype.code, dl.dtype.bits, dl.dtype.lanes
    if lanes != 1:
        raise BufferError(f"DLPack dtype with {lanes} lanes (code {code}, {bits} bits) is a vector type; "
                          "nbxtensor takes one lane")
    try:
        dt = from_dlpack_code(code, bits, lanes)
    except TypeError as error:
        raise BufferError(f"{error}; nbxtensor's dtypes are bool, (u)int8-64, float16/32/64, bfloat16, "
                          "complex64/128 and fp8 e4m3fn/e5m2") from None
    ndim = dl.ndim
    if ndim < 0 or ndim > _shape.MAX_RANK:
        raise BufferError(f"DLPack tensor has ndim {ndim}; nbxtensor takes 0 to {_shape.MAX_RANK}")
    shape = tuple(dl.shape[i] for i in range(ndim))
    if any(n < 0 for n in shape):
        raise BufferError(f"DLPack tensor has a negative extent in shape {shape}")
    if ndim and not dl.strides:
        strides = _shape.contiguous_strides(shape)  # a null strides pointer means row-major
    else:
        strides = tuple(dl.strides[i] for i in range(ndim))
    if any(s < 0 for s in strides):
        raise BufferError(f"DLPack tensor has negative strides {strides}; nbxtensor views take non-negative "
                          "strides only (copy it in the producing library first)")
    if not dl.data and _shape.numel(shape):
        raise BufferError(f"DLPack tensor of shape {shape} has a null data pointer")
    data = (dl.data or 0) + dl.byte_offset
    return dev, dt, shape, strides, data

