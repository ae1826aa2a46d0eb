"""The tensor: a view (offset, shape, strides in elements, dtype) over a refcounted storage. Below the ops:
the methods that run ops (indexing, ``to``, arithmetic ...) are attached by ``ops.registry.bind``."""
from __future__ import annotations

import builtins
import itertools
import math

import numpy as np

from . import shape as _shape
from .device import device
from .device.errors import check_device_errors
from .dtypes import dtype as _dtype
from .dtypes import get_default_dtype, get_dtype
from .grad_mode import refuse_requires_grad
from .launch import pointer_argument, refuse_capture
from .storage import Storage

__all__ = ["Tensor", "Size", "is_tensor", "numel", "is_floating_point", "is_complex"]


class Size(tuple):
    """A tensor's shape: a tuple of ints, as ``torch.Size``."""

    def numel(self) -> int:
        return math.prod(self)

    def __repr__(self) -> str:
        return f"nbxtensor.Size({list(self)})"

    def __getitem__(self, item):
        out = tuple.__getitem__(self, item)
        return Size(out) if isinstance(item, slice) else out


# Layouts by id, for cache keys that hash an int instead of nested tuples. Ids are never reused, so an id
# held by a tensor or a cache stays true after the table is cleared at its cap (the layout then gets a new
# id: a cache miss, never a wrong hit).
_LAYOUTS: dict = {}
_MAX_LAYOUTS = 4096
_next_layout = itertools.count().__next__


def layout_key(shape, strides: tuple, dtype: _dtype, dev: device) -> int:
    """An int naming (shape, strides, dtype, device): tensors whose keys are equal have equal layouts on
    one device. ``strides`` is a tuple, as ``Tensor._make`` keeps it."""
    key = (shape, strides, dtype, dev.type, dev.index)
    found = _LAYOUTS.get(key)
    if found is None:
        if len(_LAYOUTS) >= _MAX_LAYOUTS:
            _LAYOUTS.clear()
        found = _LAYOUTS[key] = _next_layout()
    return found


@pointer_argument
class Tensor:
    # ``_layout``: the ``layout_key`` of this tensor, or None until first asked; whatever assigns
    # ``_storage``, ``_shape``, ``_strides`` or ``_dtype`` after ``_make`` sets it back to None
    __slots__ = ("_storage", "_offset", "_shape", "_strides", "_dtype", "_layout", "__weakref__")

    def __init__(self, *_args, **_kwargs):
        raise TypeError("create tensors with nbxtensor.tensor, nbxtensor.empty, nbxtensor.from_numpy and friends")

    @classmethod
    def _make(cls, storage: Storage | None, offset: int, shape, strides, dtype: _dtype) -> "Tensor":
        """A tensor over ``storage``, unchecked: views sit on hot paths, so the bounds are proved where
        geometry enters rather than here. Constructors that allocate, or that wrap foreign memory
        (``from_numpy``, DLPack), size the storage to the layout's own span, and the graph arena places
        a tensor only in the room its plan reserved for that many bytes; the one
        view taking caller-chosen geometry, ``as_strided``, checks it with
        ``shape.check_view_in_storage``; every other view op derives its geometry from an in-bounds
        tensor and stays inside it (validated indices, slices clamped to the extent, reshapes and
        permutations of the same elements, broadcasts of stride 0, dtype views over the same bytes)."""
        t = object.__new__(cls)
        t._storage = storage
        t._offset = offset
        t._shape = shape if type(shape) is Size else Size(shape)
        t._strides = tuple(strides)
        t._dtype = dtype
        t._layout = None
        return t

    @classmethod
    def _meta(cls, shape, dtype, strides=None) -> "Tensor":
        """A tensor with metadata and no memory, for meta rules that run the real view code."""
        shape = tuple(shape)
        return cls._make(None, 0, shape, _shape.contiguous_strides(shape) if strides is None else strides,
                         get_dtype(dtype))

    def _layout_key(self) -> int | None:
        """``layout_key`` of this tensor, kept on it; None for a tensor with no storage (meta)."""
        storage = self._storage
        if storage is None:
            return None
        layout = self._layout = layout_key(self._shape, self._strides, self._dtype, storage.device)
        return layout

    def _view(self, shape, strides, offset: int | None = None, dtype: _dtype | None = None) -> "Tensor":
        return Tensor._make(self._storage, self._offset if offset is None else offset, shape, strides,
                            self._dtype if dtype is None else dtype)

    # ---- attributes -------------------------------------------------------------------------
    @property
    def shape(self) -> Size:
        return self._shape

    @property
    def dtype(self) -> _dtype:
        return self._dtype

    @property
    def device(self) -> device:
        return _META_DEVICE if self._storage is None else self._storage.device

    @property
    def is_meta(self) -> bool:
        return self._storage is None

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def is_cpu(self) -> bool:
        return self.device.type == "cpu"

    @property
    def ndim(self) -> int:
        return len(self._shape)

    def dim(self) -> int:
        return len(self._shape)

    ndimension = dim

    def numel(self) -> int:
        return math.prod(self._shape)

    nelement = numel

    def size(self, dim: int | None = None):
        if dim is None:
            return self._shape
        return self._shape[_shape.wrap_dim(dim, self.ndim)]

    def stride(self, dim: int | None = None):
        if dim is None:
            return self._strides
        return self._strides[_shape.wrap_dim(dim, self.ndim)]

    def storage_offset(self) -> int:
        return self._offset

    def element_size(self) -> int:
        return self._dtype.itemsize

    @property
    def itemsize(self) -> int:
        return self._dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.numel() * self._dtype.itemsize

    def data_ptr(self) -> int:
        if self._storage is None or self._storage.buffer is None:
            return 0
        return self._storage.ptr + self._offset * self._dtype.itemsize

    def is_contiguous(self, memory_format=None) -> bool:
        """Whether the strides are row-major (the default) or the dense layout of the channels-last format
        named; ``preserve_format`` asks about row-major, as in torch."""
        name = "contiguous_format" if memory_format is None else _shape.memory_format_name("is_contiguous",
                                                                                            memory_format)
        if name in ("contiguous_format", "preserve_format"):
            return _shape.is_contiguous(self._shape, self._strides)
        return _shape.is_channels_last_contiguous(self._shape, self._strides, name)

    def is_floating_point(self) -> bool:
        return self._dtype.is_floating_point

    def is_complex(self) -> bool:
        return self._dtype.is_complex

    # ---- gradients: never computed ----------------------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        return False

    @requires_grad.setter
    def requires_grad(self, value) -> None:
        refuse_requires_grad(value, "Tensor.requires_grad")

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        refuse_requires_grad(requires_grad, "Tensor.requires_grad_")
        return self

    @property
    def grad(self) -> None:
        return None

    @property
    def is_leaf(self) -> bool:
        return True

    def detach(self) -> "Tensor":
        """A new tensor object over the same memory, as torch's (there is no graph to leave)."""
        return self._view(self._shape, self._strides)

    def detach_(self) -> "Tensor":
        return self

    @property
    def data(self) -> "Tensor":
        """``detach()``, as torch's ``.data`` reads."""
        return self.detach()

    def _kernel_pointer(self, backend):
        return backend.kernel_pointer(self.data_ptr(), backend.kernel_element_type(self._dtype))

    # ---- host access ------------------------------------------------------------------------
    def numpy(self, *, force: bool = False) -> np.ndarray:
        """The data as a NumPy array: a view sharing memory on the CPU (any strides), a copy from
        any other device. Bools keep the bytes their memory holds; NumPy, like nbxtensor, reads any
        nonzero byte as True, and ``tolist``/``item`` give Python bools."""
        self._require_data("numpy()")
        refuse_capture("reads tensor data on the host (numpy, item, tolist or a Python scalar)")
        if self.numel() == 0:
            return np.empty(self._shape, dtype=self._dtype.numpy)
        itemsize = self._dtype.itemsize
        backend = self._storage.backend
        span = _shape.max_offset(self._shape, self._strides) + 1
        start = self._storage.ptr + self._offset * itemsize
        host = backend.host_view(start, span * itemsize, self._storage)
        if host is None:
            src = self.contiguous()
            raw = backend.download(src.data_ptr(), src.nbytes, src.device.index)
            check_device_errors(self.device)
            return raw.view(self._dtype.numpy).reshape(self._shape)
        # as_strided goes through __array_interface__, whose type string loses ml_dtypes types
        # (float8_e5m2 reads back as '<f1'), so stride over same-size integers and view back.
        flat = host.view(np.dtype(f"u{itemsize}") if itemsize <= 8 else self._dtype.numpy)
        strided = np.lib.stride_tricks.as_strided(
            flat, shape=self._shape, strides=tuple(s * itemsize for s in self._strides))
        return strided.view(self._dtype.numpy)

    def __array__(self, dtype=None, copy=None):
        out = self.numpy()
        return out if dtype is None else out.astype(dtype)

    def item(self):
        if self.numel() != 1:
            raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to a Python scalar")
        return _to_python(self.numpy().reshape(()))

    def tolist(self):
        return _to_python(self.numpy())

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise RuntimeError(f"Boolean value of Tensor with {self.numel()} elements is ambiguous")
        return builtins.bool(self.item())

    def __int__(self) -> int:
        return int(self.item().real if self._dtype.is_complex else self.item())

    def __float__(self) -> float:
        return builtins.float(self.item())

    def __complex__(self) -> complex:
        return builtins.complex(self.item())

    def __index__(self) -> int:
        if self._dtype.kind not in ("int", "uint", "bool") or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __repr__(self) -> str:
        if self._storage is None:
            return f"tensor(..., size={tuple(self._shape)}, device='meta', dtype={self._dtype.name})"
        body = np.array2string(self.numpy().astype(_printable(self._dtype)), separator=", ", prefix="tensor(")
        extras = []
        if self.device.type != "cpu":
            extras.append(f"device='{self.device}'")
        if self.numel() == 0:
            # no elements show the shape or the dtype, so say them as torch does: a shape other than (0,),
            # a dtype other than the default
            if self.ndim != 1:
                extras.append(f"size={tuple(self._shape)}")
            if self._dtype is not get_default_dtype():
                extras.append(f"dtype={self._dtype!r}")
        elif self._dtype.name not in ("float32", "int64", "bool", "complex64"):
            extras.append(f"dtype={self._dtype!r}")
        return f"tensor({body}" + "".join(", " + e for e in extras) + ")"

    def _require_data(self, what: str) -> None:
        if self._storage is None:
            raise RuntimeError(f"{what} needs data, and a meta tensor has none")

    # ---- device and dtype moves ---------------------------------------------------------------
    def is_pinned(self) -> bool:
        return self._storage is not None and self._storage.pinned

    def cpu(self) -> "Tensor":
        return self.to("cpu")

    def cuda(self, index: int | None = None) -> "Tensor":
        return self.to(device("cuda", index))

    def type(self, dtype=None, non_blocking: bool = False, **kwargs):
        """With no dtype, the legacy type name (``'nbxtensor.FloatTensor'``, ``'nbxtensor.cuda.HalfTensor'``
        where torch says ``'torch.…'``); with one (a dtype or such a name, either prefix), this tensor
        cast to it."""
        if dtype is None:
            where = "" if self.device.type == "cpu" else f"{self.device.type}."
            return f"nbxtensor.{where}{_TENSOR_TYPE_NAMES.get(self._dtype.name, _capitalised(self._dtype.name))}Tensor"
        if isinstance(dtype, str) and dtype.endswith("Tensor"):
            return self.to(*_parse_type_name(dtype))
        return self.to(dtype)

    def type_as(self, other: "Tensor") -> "Tensor":
        return self.to(other.dtype)


def is_tensor(obj) -> bool:
    return isinstance(obj, Tensor)


def numel(input: Tensor) -> int:
    return input.numel()


def is_floating_point(input: Tensor) -> bool:
    return input.is_floating_point()


def is_complex(input: Tensor) -> bool:
    return input.is_complex()


_META_DEVICE = device("meta")
_D = {d.name: d for d in __import__("nbxtensor.dtypes", fromlist=["all_dtypes"]).all_dtypes}


# torch's legacy tensor type names, ``torch.<Name>Tensor``
_TENSOR_TYPE_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16",
                      "int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
                      "bool": "Bool", "complex64": "ComplexFloat", "complex128": "ComplexDouble"}
_TYPE_NAME_DTYPES = {name: dtype_name for dtype_name, name in _TENSOR_TYPE_NAMES.items()}


def _capitalised(dtype_name: str) -> str:
    return dtype_name[:1].upper() + dtype_name[1:]


def _parse_type_name(type_name: str) -> tuple:
    """(device, dtype) named by a legacy type name such as ``'torch.cuda.FloatTensor'``."""
    parts = type_name.split(".")
    if len(parts) not in (2, 3) or parts[0] not in ("torch", "nbxtensor") or (len(parts) == 3 and parts[1] != "cuda"):
        raise ValueError(f"invalid tensor type name {type_name!r}; expected e.g. 'nbxtensor.FloatTensor' "
                         "or 'torch.cuda.HalfTensor'")
    name = parts[-1][:-len("Tensor")]
    by_capital = {_capitalised(d.name): d.name for d in _D.values()}
    dtype_name = _TYPE_NAME_DTYPES.get(name) or by_capital.get(name)
    if dtype_name is None:
        raise ValueError(f"invalid tensor type name {type_name!r}: no dtype is called {name!r}")
    return ("cuda" if len(parts) == 3 else "cpu"), _D[dtype_name]


def _printable(d: _dtype):
    if d.name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        return np.float32
    return d.numpy


def _to_python(array: np.ndarray):
    if array.dtype.kind == "V" or array.dtype in (_D["bfloat16"].numpy, _D["float8_e4m3fn"].numpy,
                                                   _D["float8_e5m2"].numpy):
        array = array.astype(np.float64)
    return array.tolist()
