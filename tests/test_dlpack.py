"""DLPack with NumPy as the independent side: memory is shared both ways for every dtype NumPy has,
views keep their strides, and each export's memory lives exactly as long as its last user. The capsule
structs below are written from dlpack.h for the tests, independently of the library's."""
import ctypes
import gc
import weakref

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.interop import dlpack as nbx_dlpack
from tests.conftest import to_nbx

NUMPY_DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64",
                "complex64", "complex128"]
IS_COPIED = 1 << 1


def _values(dtype: str, shape=(3, 4)) -> np.ndarray:
    values = np.arange(int(np.prod(shape))).reshape(shape)
    if dtype == "bool":
        return values % 3 == 0
    if dtype.startswith("complex"):
        return (values + 1j * (values + 1)).astype(dtype)
    return values.astype(dtype)


def _host_tensor(array: np.ndarray):
    """A CPU tensor holding a copy of ``array`` (NumPy takes host memory only)."""
    return nbx.tensor(array, device="cpu")


# ---- dlpack.h, for capsules this test file produces ----------------------------------------------
class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


Deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", Deleter)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p), ("deleter", Deleter),
                ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_New", ctypes.pythonapi))
_capsule_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", ctypes.pythonapi))
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))


class CountingProducer:
    """A producer over a NumPy array whose capsule has no destructor (the test consumes it) and whose
    deleter counts its calls."""

    def __init__(self, array, *, versioned=True, code=None, bits=None, lanes=1, strides=None, device_type=1):
        self.array = array
        self.deleter_calls = 0
        self.versioned = versioned
        self._shape = (ctypes.c_int64 * max(array.ndim, 1))(*array.shape)
        element_strides = strides if strides is not None else [s // array.itemsize for s in array.strides]
        self._strides = (ctypes.c_int64 * max(array.ndim, 1))(*element_strides)
        self._deleter = Deleter(self._count)
        self.managed = DLManagedTensorVersioned() if versioned else DLManagedTensor()
        dl = self.managed.dl_tensor
        dl.data = array.ctypes.data
        dl.device = DLDevice(device_type, 0)
        dl.ndim = array.ndim
        default_code, default_bits = nbx.get_dtype(array.dtype).dlpack
        dl.dtype = DLDataType(default_code if code is None else code, default_bits if bits is None else bits, lanes)
        dl.shape = ctypes.cast(self._shape, ctypes.POINTER(ctypes.c_int64))
        dl.strides = ctypes.cast(self._strides, ctypes.POINTER(ctypes.c_int64))
        self.managed.deleter = self._deleter
        if versioned:
            self.managed.version = DLPackVersion(1, 0)

    def _count(self, _managed_address):
        self.deleter_calls += 1

    def capsule(self):
        name = b"dltensor_versioned" if self.versioned else b"dltensor"
        return _capsule_new(ctypes.addressof(self.managed), name, None)


def _managed(capsule):
    name = _capsule_name(capsule)
    struct = DLManagedTensorVersioned if name == b"dltensor_versioned" else DLManagedTensor
    return struct.from_address(_capsule_pointer(capsule, name))


# ---- sharing with NumPy ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_numpy_reads_and_writes_our_memory(dtype):
    values = _values(dtype)
    t = _host_tensor(values)
    array = np.from_dlpack(t)
    assert array.dtype == np.dtype(dtype) and array.shape == values.shape
    assert array.ctypes.data == t.data_ptr()
    np.testing.assert_array_equal(array, values)
    array[0, 1] = values[2, 3]
    assert t.numpy()[0, 1] == values[2, 3]
    t.numpy()[1, 0] = values[0, 0]
    assert array[1, 0] == values[0, 0]


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_we_read_and_write_numpy_memory(dtype):
    values = _values(dtype)
    array = values.copy()
    t = nbx.from_dlpack(array)
    assert t.dtype == nbx.get_dtype(dtype) and tuple(t.shape) == values.shape and t.device == "cpu"
    assert t.data_ptr() == array.ctypes.data
    np.testing.assert_array_equal(t.numpy(), values)
    array[2, 2] = values[0, 0]
    assert t.numpy()[2, 2] == values[0, 0]
    t.numpy()[0, 3] = values[1, 1]
    assert array[0, 3] == values[1, 1]


def test_views_keep_their_strides_both_ways():
    base = np.arange(60, dtype=np.float32).reshape(5, 12)
    view = base[1:, 2::3].T
    t = nbx.from_dlpack(view)
    assert t.stride() == tuple(s // 4 for s in view.strides)
    assert t.data_ptr() == view.ctypes.data
    np.testing.assert_array_equal(t.numpy(), view)

    ours = _host_tensor(base)[1:, 2::3].transpose(0, 1)
    array = np.from_dlpack(ours)
    assert array.strides == tuple(s * 4 for s in ours.stride())
    assert array.ctypes.data == ours.data_ptr()
    np.testing.assert_array_equal(array, view)


def test_zero_dim_and_empty():
    scalar = _host_tensor(np.array(2.5))
    assert np.from_dlpack(scalar).shape == () and np.from_dlpack(scalar)[()] == 2.5
    back = nbx.from_dlpack(np.array(7, dtype=np.int16))
    assert back.shape == () and back.item() == 7 and back.dtype == nbx.int16

    empty = _host_tensor(np.zeros((0, 3), dtype=np.float32))
    assert np.from_dlpack(empty).shape == (0, 3)
    taken = nbx.from_dlpack(np.zeros((2, 0, 4), dtype=np.int64))
    assert tuple(taken.shape) == (2, 0, 4) and taken.numel() == 0 and taken.numpy().shape == (2, 0, 4)


def test_capsule_versions_and_fields():
    t = _host_tensor(_values("float32"))[1:]
    versioned = t.__dlpack__(max_version=(1, 0))
    assert _capsule_name(versioned) == b"dltensor_versioned"
    managed = _managed(versioned)
    assert (managed.version.major, managed.version.minor) == nbx_dlpack.DLPACK_VERSION
    assert managed.flags == 0
    dl = managed.dl_tensor
    assert (dl.data or 0) + dl.byte_offset == t.data_ptr()
    assert (dl.device.device_type, dl.device.device_id) == (1, 0)
    assert (dl.dtype.code, dl.dtype.bits, dl.dtype.lanes) == (2, 32, 1)
    assert [dl.shape[i] for i in range(dl.ndim)] == [2, 4]
    assert [dl.strides[i] for i in range(dl.ndim)] == [4, 1]

    legacy = t.__dlpack__()
    assert _capsule_name(legacy) == b"dltensor"
    taken = nbx.from_dlpack(legacy)
    assert _capsule_name(legacy) == b"used_dltensor"
    assert taken.data_ptr() == t.data_ptr()
    assert t.__dlpack_device__() == (1, 0)


def test_capsule_is_consumed_once():
    capsule = _host_tensor(np.ones(3, dtype=np.float32)).__dlpack__(max_version=(1, 0))
    nbx.from_dlpack(capsule)
    assert _capsule_name(capsule) == b"used_dltensor_versioned"
    with pytest.raises(BufferError, match="already consumed"):
        nbx.from_dlpack(capsule)


def test_copy_and_device_requests():
    t = to_nbx(np.arange(4, dtype=np.float32))
    copied = t.__dlpack__(max_version=(1, 0), copy=True)
    assert _managed(copied).flags & IS_COPIED
    taken = nbx.from_dlpack(copied)
    assert taken.data_ptr() != t.data_ptr()
    np.testing.assert_array_equal(taken.numpy(), t.numpy())

    same = nbx.from_dlpack(t.__dlpack__(max_version=(1, 0), copy=False, dl_device=t.__dlpack_device__()))
    assert same.data_ptr() == t.data_ptr()

    other = (1, 0) if t.device.type == "cuda" else (2, 0)
    with pytest.raises(BufferError):
        t.__dlpack__(max_version=(1, 0), dl_device=other, copy=False)
    with pytest.raises(BufferError, match="unsupported DLPack device"):
        t.__dlpack__(dl_device=(4, 0))


def test_cpu_export_takes_no_stream():
    t = _host_tensor(np.ones(2, dtype=np.float32))
    with pytest.raises(ValueError, match="stream"):
        t.__dlpack__(stream=5)


def test_meta_tensor_and_foreign_objects_are_refused():
    with pytest.raises(BufferError, match="meta"):
        nbx_dlpack.to_dlpack(nbx.Tensor._meta((2,), "float32"))
    with pytest.raises(TypeError, match="__dlpack__"):
        nbx.from_dlpack([1, 2, 3])


# ---- lifetimes ------------------------------------------------------------------------------------
def test_producer_gone_before_consumer():
    array = np.arange(6, dtype=np.float64)
    t = nbx.from_dlpack(array)
    del array
    gc.collect()
    np.testing.assert_array_equal(t.numpy(), np.arange(6, dtype=np.float64))

    ours = _host_tensor(np.arange(5, dtype=np.int32))
    theirs = np.from_dlpack(ours)
    del ours
    gc.collect()
    np.testing.assert_array_equal(theirs, np.arange(5, dtype=np.int32))


def test_our_export_lives_exactly_as_long_as_its_consumer():
    t = _host_tensor(np.arange(4, dtype=np.float32))
    storage = weakref.ref(t._storage)
    theirs = np.from_dlpack(t)
    del t
    gc.collect()
    assert storage() is not None
    del theirs
    gc.collect()
    assert storage() is None


@pytest.mark.parametrize("versioned", [True, False])
def test_unconsumed_capsule_releases_the_tensor(versioned):
    t = _host_tensor(np.arange(4, dtype=np.float32))
    storage = weakref.ref(t._storage)
    capsule = t.__dlpack__(max_version=(1, 0) if versioned else None)
    del t
    gc.collect()
    assert storage() is not None
    del capsule
    gc.collect()
    assert storage() is None


@pytest.mark.parametrize("versioned", [True, False])
def test_producer_deleter_runs_once_when_our_last_view_dies(versioned):
    producer = CountingProducer(np.arange(12, dtype=np.float32).reshape(3, 4), versioned=versioned)
    capsule = producer.capsule()
    t = nbx.from_dlpack(capsule)
    view = t[1:]
    del t, capsule
    gc.collect()
    assert producer.deleter_calls == 0
    np.testing.assert_array_equal(view.numpy(), producer.array[1:])
    del view
    gc.collect()
    assert producer.deleter_calls == 1


def test_empty_import_releases_the_producer_at_once():
    producer = CountingProducer(np.zeros((0, 2), dtype=np.float32))
    t = nbx.from_dlpack(producer.capsule())
    assert producer.deleter_calls == 1 and tuple(t.shape) == (0, 2)


@pytest.mark.parametrize("fields, message", [
    (dict(lanes=4), "lanes"),
    (dict(code=3, bits=32), "code=3"),
    (dict(strides=[-4, 1]), "negative strides"),
    (dict(device_type=4), "unsupported DLPack device"),
])
def test_unsupported_imports_are_refused_and_left_to_the_producer(fields, message):
    producer = CountingProducer(np.zeros((3, 4), dtype=np.float32), **fields)
    capsule = producer.capsule()
    with pytest.raises(BufferError, match=message):
        nbx.from_dlpack(capsule)
    assert _capsule_name(capsule) == b"dltensor_versioned"
    assert producer.deleter_calls == 0


def test_a_null_data_pointer_is_refused_and_left_to_the_producer():
    producer = CountingProducer(np.zeros((3, 4), dtype=np.float32))
    producer.managed.dl_tensor.data = None
    capsule = producer.capsule()
    with pytest.raises(BufferError, match="null data pointer"):
        nbx.from_dlpack(capsule)
    assert producer.deleter_calls == 0
    empty = CountingProducer(np.zeros((0, 4), dtype=np.float32))
    empty.managed.dl_tensor.data = None
    assert tuple(nbx.from_dlpack(empty.capsule()).shape) == (0, 4)


def test_read_only_arrays_are_accepted():
    array = np.arange(3, dtype=np.float32)
    array.flags.writeable = False
    t = nbx.from_dlpack(array)
    assert t.data_ptr() == array.ctypes.data


def test_exceptions_in_flight_survive_export_teardown():
    t = _host_tensor(np.arange(4, dtype=np.float32))
    storage = weakref.ref(t._storage)
    # the consumer's array is a temporary dropped while ZeroDivisionError propagates
    with pytest.raises(ZeroDivisionError):
        print(np.from_dlpack(t), 1 / 0)
    del t
    gc.collect()
    assert storage() is None

    # NumPy has no bfloat16 in DLPack: it refuses our capsule and drops it with its error set
    bf16 = _host_tensor(np.zeros(2, dtype=nbx.bfloat16.numpy))
    storage = weakref.ref(bf16._storage)
    with pytest.raises(Exception) as refused:
        np.from_dlpack(bf16)
    assert not isinstance(refused.value, SystemError)
    del bf16
    gc.collect()
    assert storage() is None
