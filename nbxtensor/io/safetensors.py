"""Safetensors files: validated before any tensor is built, read with ordinary file reads into memory
the tensors own (or, on request, viewed through a memory map), and written with every tensor aligned to
its element size.

The format: 8 bytes holding the header length N (unsigned, little-endian), N bytes of UTF-8 JSON
mapping each tensor name to ``{"dtype", "shape", "data_offsets"}`` (plus an optional
``"__metadata__"`` object of strings), then the data buffer. Offsets count from the buffer's start;
tensors are stored row-major and little-endian, and together they cover the buffer exactly.

By default opening a file reads its header only; each tensor asked for is read from its own byte range
(checked against the file's size at that moment) into a host array the tensor owns, or for another
device into host memory that the backend's ``upload_from_host`` moves there. A file truncated or
rewritten after loading therefore never touches loaded tensors, and one truncated between the header
and a tensor's read is refused with ``SafetensorsError``. Bool bytes other than 0 and 1 read as True,
as NumPy and torch count them.

``mmap=True`` views the file instead: CPU tensors share its pages through a private (copy-on-write)
mapping, so loading copies nothing and writing to such a tensor changes this process's copy only. The
risk is the memory-mapped reader's: a file that another process truncates while a tensor views it
kills this process with SIGBUS on the next access (``save_file`` never does this to files it replaces;
see there), and bool bytes are seen as stored.
"""
from __future__ import annotations

import json
import math
import os
import struct
import sys
import threading
import uuid
from dataclasses import dataclass
from mmap import ACCESS_COPY, mmap as _memory_map

import numpy as np

from .. import progress
from ..device import device as _device, resolve
from ..dtypes import all_dtypes, dtype as _dtype, from_safetensors_code
from ..ops.creation import from_numpy
from ..tensor import Tensor

__all__ = ["SafetensorsError", "TensorInfo", "TensorSlice", "load", "load_file", "safe_open", "save",
           "save_file"]

MAX_HEADER_BYTES = 100_000_000  # as the reference implementation; a larger header is refused unread
METADATA_KEY = "__metadata__"
_ENTRY_KEYS = frozenset(("dtype", "shape", "data_offsets"))
_LENGTH_PREFIX = struct.Struct("<Q")
_HEADER_ALIGNMENT = 8  # the buffer then starts 8-aligned, so each tensor sorted by itemsize is aligned
_MAX_RANK = 64  # NumPy's limit; a deeper shape could not be viewed
_MAX_ARRAY_BYTES = 2 ** 63 - 1  # NumPy's, for the product of the nonzero dimensions and the itemsize
_KNOWN_CODES = ", ".join(sorted(d.safetensors for d in all_dtypes if d.safetensors))
_FRAMEWORKS = ("nbx", "nbxtensor", "np", "numpy")


class SafetensorsError(ValueError):
    """A safetensors file (or bytes) that breaks the format, or tensors and metadata that cannot be
    written in it. The message names the file and, where one is at fault, the tensor."""


@dataclass(frozen=True)
class TensorInfo:
    """One validated header entry; ``begin`` and ``end`` are byte offsets into the data buffer."""
    name: str
    dtype: _dtype
    shape: tuple[int, ...]
    begin: int
    end: int


@dataclass(frozen=True)
class _Header:
    tensors: dict[str, TensorInfo]
    metadata: dict[str, str] | None
    buffer_start: int


def _require_little_endian_host() -> None:
    if sys.byteorder != "little":
        raise SafetensorsError("safetensors data is little-endian and nbxtensor supports little-endian hosts only")


# ---- reading ---------------------------------------------------------------------------------

def _quoted(text: str) -> str:
    """A name taken from a header, for a message: escaped by repr and cut to 60 characters."""
    return repr(text) if len(text) <= 60 else f"{text[:60]!r}..."


def _json_kind(value) -> str:
    if isinstance(value, bool):
        return "a boolean"
    return {str: "a string", int: "an integer", float: "a number", list: "an array", dict: "an object"}.get(
        type(value), "null")


def _described(value) -> str:
    """A header value for a message without its text: integers as themselves (when they fit 64 bits),
    arrays by their first elements, anything else by its JSON kind."""
    if _is_int(value):
        return str(value) if abs(value) < 2 ** 64 else "an integer of more than 64 bits"
    if isinstance(value, list):
        shown = [_described(v) if _is_int(v) else _json_kind(v) for v in value[:8]]
        return "[" + ", ".join(shown) + (", ..." if len(value) > 8 else "") + "]"
    return _json_kind(value)


def _check_file_holds(file, stop: int, what: str, source: str) -> None:
    size = os.fstat(file.fileno()).st_size
    if size < stop:
        raise SafetensorsError(f"{source}: {what} ends at byte {stop}, past the end of the file, now {size} "
                               "bytes; the file was truncated after it was opened")


class _MemoryImage:
    """A private copy of a safetensors image held in memory; reads are views of the copy."""
    private = True  # reads may be changed in place: they belong to this reader

    def __init__(self, data: bytes):
        self._array = np.frombuffer(bytearray(data), dtype=np.uint8)  # writable, never aliasing ``data``
        self.size = self._array.size

    def read(self, start: int, stop: int, what: str) -> np.ndarray:
        return self._array[start:stop]

    def close(self) -> None:
        self._array = None


class _FileImage:
    """A file read with ordinary reads: each byte range lands in a fresh array, once its end is checked
    against the file's size at that moment, so a file that shrinks is refused instead of read short."""
    private = True

    def __init__(self, path: str):
        self._source = path
        self._file = open(path, "rb", buffering=0)
        self._lock = threading.Lock()  # threads sharing the handle seek and read as one step
        self.size = os.fstat(self._file.fileno()).st_size

    def read(self, start: int, stop: int, what: str) -> np.ndarray:
        out = np.empty(stop - start, dtype=np.uint8)
        if not out.size:
            return out
        view = memoryview(out)
        with self._lock:
            _check_file_holds(self._file, stop, what, self._source)
            self._file.seek(start)
            filled = 0
            while filled < out.size:
                count = self._file.readinto(view[filled:])
                if not count:
                    raise SafetensorsError(f"{self._source}: {what} ends at byte {stop}, but the file ended at "
                                           f"byte {start + filled} while it was read; it was truncated after it "
                                           "was opened")
                filled += count
        return out

    def close(self) -> None:
        self._file.close()


class _MappedImage:
    """A file mapped copy-on-write; reads are views of the mapping, checked against the file's size at
    the time of the read (a later truncation still faults on access: the risk of ``mmap=True``)."""
    private = False  # writing would copy the pages the mapping shares with the file

    def __init__(self, path: str):
        self._source = path
        self._file = open(path, "rb", buffering=0)
        try:
            self.size = os.fstat(self._file.fileno()).st_size
            mapping = _memory_map(self._file.fileno(), self.size, access=ACCESS_COPY) if self.size else b""
        except BaseException:
            self._file.close()
            raise
        self._array = np.frombuffer(mapping, dtype=np.uint8)

    def read(self, start: int, stop: int, what: str) -> np.ndarray:
        _check_file_holds(self._file, stop, what, self._source)
        return self._array[start:stop]

    def close(self) -> None:
        self._file.close()
        self._array = None  # tensors that view the mapping keep it alive


def _parse(image, source: str) -> _Header:
    """Validate the header of ``image`` against its size. Only the length prefix and the header bytes
    are read, and nothing past the image's end."""
    total = image.size
    if total < _LENGTH_PREFIX.size:
        raise SafetensorsError(f"{source}: {total} bytes is too short for a safetensors file "
                               f"(the header length alone takes {_LENGTH_PREFIX.size})")
    (header_length,) = _LENGTH_PREFIX.unpack(image.read(0, _LENGTH_PREFIX.size, "the header length").tobytes())
    # the field's value is not printed: in a file that is not safetensors it is 8 bytes of its text
    if header_length > MAX_HEADER_BYTES:
        raise SafetensorsError(f"{source}: the header length field exceeds the limit of {MAX_HEADER_BYTES} "
                               "bytes; the file is not safetensors")
    buffer_start = _LENGTH_PREFIX.size + header_length
    if buffer_start > total:
        raise SafetensorsError(f"{source}: the header length field exceeds the file size ({total} bytes); "
                               "the file is truncated or not safetensors")
    document = _decode_json(image.read(_LENGTH_PREFIX.size, buffer_start, "the header").tobytes(), source)
    if not isinstance(document, dict):
        raise SafetensorsError(f"{source}: the header must be a JSON object, got {_json_kind(document)}")
    metadata = _check_metadata(document.pop(METADATA_KEY, None), source)
    buffer_length = total - buffer_start
    tensors = {name: _check_entry(name, entry, buffer_length, source) for name, entry in document.items()}
    _check_coverage(tensors.values(), buffer_length, source)
    return _Header(tensors, metadata, buffer_start)


def _decode_json(header: bytes, source: str):
    try:
        text = header.decode("utf-8")
    except UnicodeDecodeError as error:
        raise SafetensorsError(f"{source}: the header is not valid UTF-8 (at byte {error.start})") from None
    try:
        return json.loads(text, object_pairs_hook=_refuse_duplicate_keys)
    except _DuplicateKey as error:
        raise SafetensorsError(f"{source}: the header names {_quoted(error.args[0])} twice") from None
    except json.JSONDecodeError as error:  # its ``msg`` holds no text of the document
        raise SafetensorsError(f"{source}: the header is not valid JSON ({error.msg} at character "
                               f"{error.pos})") from None
    except ValueError:
        raise SafetensorsError(f"{source}: the header is not valid JSON (an integer in it has too many digits "
                               "to convert)") from None
    except RecursionError:
        raise SafetensorsError(f"{source}: the header is not valid JSON (it nests too deeply)") from None


class _DuplicateKey(Exception):
    pass


def _refuse_duplicate_keys(pairs):
    out = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _check_metadata(metadata, source: str) -> dict[str, str] | None:
    if metadata is None:
        return None
    if not isinstance(metadata, dict):
        raise SafetensorsError(f"{source}: {METADATA_KEY} must be an object of strings, got {_json_kind(metadata)}")
    for key, value in metadata.items():
        if not isinstance(value, str):
            raise SafetensorsError(f"{source}: {METADATA_KEY} value for {_quoted(key)} must be a string, got "
                                   f"{_json_kind(value)}")
    return metadata


def _is_int(value) -> bool:
    return type(value) is int  # JSON true/false arrive as bool, a subclass of int; refuse them


def _check_entry(name: str, entry, buffer_length: int, source: str) -> TensorInfo:
    where = f"{source}: tensor {_quoted(name)}"
    if not isinstance(entry, dict):
        raise SafetensorsError(f"{where}: the entry must be an object, got {_json_kind(entry)}")
    if entry.keys() != _ENTRY_KEYS:
        missing, extra = sorted(_ENTRY_KEYS - entry.keys()), sorted(entry.keys() - _ENTRY_KEYS)
        problems = ([f"missing {', '.join(missing)}"] if missing else []) + \
                   ([f"unexpected {', '.join(map(_quoted, extra[:3]))}{', ...' if len(extra) > 3 else ''}"]
                    if extra else [])
        raise SafetensorsError(f"{where}: the entry must have exactly dtype, shape and data_offsets "
                               f"({'; '.join(problems)})")
    code, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if not isinstance(code, str):
        raise SafetensorsError(f"{where}: dtype must be a string, got {_json_kind(code)}")
    try:
        dt = from_safetensors_code(code)
    except TypeError:
        raise SafetensorsError(f"{where}: unknown dtype {_quoted(code)}; known: {_KNOWN_CODES}") from None
    if not isinstance(shape, list) or not all(_is_int(n) and n >= 0 for n in shape):
        raise SafetensorsError(f"{where}: shape must be a list of non-negative integers, got {_described(shape)}")
    if len(shape) > _MAX_RANK:
        raise SafetensorsError(f"{where}: {len(shape)} dimensions exceed the limit of {_MAX_RANK}")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_int(n) for n in offsets)):
        raise SafetensorsError(f"{where}: data_offsets must be a list of two integers, got {_described(offsets)}")
    begin, end = offsets
    if not 0 <= begin <= end <= buffer_length:
        raise SafetensorsError(f"{where}: data_offsets [{_described(begin)}, {_described(end)}] do not lie within "
                               f"the data buffer [0, {buffer_length}]")
    if math.prod(n for n in shape if n) * dt.itemsize > _MAX_ARRAY_BYTES:  # zero dimensions aside, as NumPy
        raise SafetensorsError(f"{where}: shape {_described(shape)} of {code} is too large for an array (more "
                               f"than {_MAX_ARRAY_BYTES} bytes, not counting its zero dimensions)")
    expected = math.prod(shape) * dt.itemsize
    if end - begin != expected:
        raise SafetensorsError(f"{where}: data_offsets [{begin}, {end}] span {end - begin} bytes, but shape "
                               f"{_described(shape)} of {code} needs {_described(expected)}")
    return TensorInfo(name, dt, tuple(shape), begin, end)


def _check_coverage(tensors, buffer_length: int, source: str) -> None:
    """The tensors must tile the buffer: no overlaps, no holes, nothing left over at the end."""
    covered, previous = 0, None
    for info in sorted(tensors, key=lambda t: (t.begin, t.end)):
        if info.begin < covered:
            raise SafetensorsError(f"{source}: tensor {_quoted(info.name)} (bytes [{info.begin}, {info.end}]) "
                                   f"overlaps tensor {_quoted(previous.name)} (bytes [{previous.begin}, "
                                   f"{previous.end}])")
        if info.begin > covered:
            raise SafetensorsError(f"{source}: bytes [{covered}, {info.begin}] of the data buffer, before tensor "
                                   f"{_quoted(info.name)}, belong to no tensor")
        covered, previous = info.end, info
    if covered != buffer_length:
        raise SafetensorsError(f"{source}: bytes [{covered}, {buffer_length}] at the end of the data buffer "
                               "belong to no tensor")


def _is_basic_index(index: tuple) -> bool:
    """Whether ``index`` selects a view (integers, slices, Ellipsis, None) rather than gathering."""
    return all(part is None or part is Ellipsis or isinstance(part, slice)
               or (isinstance(part, (int, np.integer)) and not isinstance(part, (bool, np.bool_)))
               for part in index)


def _selection(info: TensorInfo, index: tuple) -> tuple[np.ndarray, int]:
    """``index`` (basic) applied to a row-major array of ``info``'s shape that has no bytes behind it,
    and the address of that array's first element. Basic indexing only makes views, so the result's
    shape, strides and byte bounds describe the selection while nothing is ever read through it."""
    itemsize = info.dtype.itemsize
    strides = tuple(itemsize * math.prod(info.shape[axis + 1:]) for axis in range(len(info.shape)))
    # opaque elements of the dtype's size: as_strided rebuilds arrays through the array interface, which
    # loses extension dtypes (bfloat16, float8)
    element = np.zeros(1, np.dtype((np.void, itemsize)))
    layout = np.lib.stride_tricks.as_strided(element, info.shape, strides, writeable=False)
    return layout[index], layout.__array_interface__["data"][0]


def _tensor_from_host(array: np.ndarray, dev: _device) -> Tensor:
    """``array`` as a tensor on ``dev``: a view on the CPU, shapes only on meta, else an upload."""
    if dev.type == "meta":
        return Tensor._meta(array.shape, array.dtype)
    if any(stride < 0 for stride in array.strides):
        array = np.ascontiguousarray(array)  # a reversing slice; tensors have non-negative strides
    host_tensor = from_numpy(array)
    return host_tensor if dev.type == "cpu" else host_tensor.to(dev)


class TensorSlice:
    """A tensor of an open file, read lazily: index it (``f.get_slice(name)[0:4, :]``) to read only the
    bytes from the selection's first element to its last, which on a device uploads only the selected
    elements."""

    def __init__(self, owner: "safe_open", info: TensorInfo):
        self._owner = owner
        self._info = info

    @property
    def dtype(self) -> _dtype:
        return self._info.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self._info.shape

    def get_shape(self) -> list[int]:
        return list(self._info.shape)

    def get_dtype(self) -> str:
        """The safetensors dtype code, e.g. ``"BF16"``."""
        return self._info.dtype.safetensors

    def __getitem__(self, index):
        index = index if isinstance(index, tuple) else (index,)
        if not any(part is Ellipsis for part in index):
            index = (*index, Ellipsis)  # keeps the result an array view even when every axis is indexed
        return self._owner._load(self._info, index)

    def __repr__(self) -> str:
        return f"TensorSlice({self._info.name!r}, shape={list(self._info.shape)}, dtype={self._info.dtype.name})"


class safe_open:
    """An open safetensors file::

        with nbx.io.safe_open("model.safetensors", device="cuda") as f:
            for name in f.keys():
                weight = f.get_tensor(name)

    ``framework`` is ``"nbx"`` (tensors) or ``"numpy"`` (arrays, CPU only). Opening reads the header;
    each tensor is read when asked for, from its own byte range, into memory it owns (or uploaded to
    ``device``), so tensors stay valid after the file is closed, truncated or rewritten.

    ``mmap=True`` reads nothing up front: CPU tensors and arrays view a private (copy-on-write) memory
    map of the file. If another process then truncates the file, touching such a tensor kills this
    process with SIGBUS, and bool bytes other than 0 and 1 are seen as stored; use it for files that
    nothing rewrites in place."""

    def __init__(self, path, framework: str = "nbx", device="cpu", *, mmap: bool = False):
        if framework not in _FRAMEWORKS:
            raise ValueError(f"safe_open: unknown framework {framework!r}; use 'nbx' or 'numpy'")
        self._as_numpy = framework in ("np", "numpy")
        self._device = resolve(device)
        if self._as_numpy and self._device.type != "cpu":
            raise ValueError(f"safe_open: NumPy arrays live on the CPU, not {self._device}")
        _require_little_endian_host()
        self._source = os.fspath(path)
        self._image = None
        image = _MappedImage(self._source) if mmap else _FileImage(self._source)
        try:
            self._header = _parse(image, self._source)
        except BaseException:
            image.close()
            raise
        self._image = image

    @classmethod
    def _from_bytes(cls, data: bytes, device, source: str) -> "safe_open":
        _require_little_endian_host()
        opened = object.__new__(cls)
        opened._as_numpy, opened._device, opened._source = False, resolve(device), source
        opened._image = _MemoryImage(data)
        opened._header = _parse(opened._image, source)
        return opened

    def __enter__(self) -> "safe_open":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        """Close the file; tensors already returned keep their data."""
        if self._image is not None:
            self._image.close()
            self._image = None

    def keys(self) -> list[str]:
        return sorted(self._header.tensors)

    def metadata(self) -> dict[str, str] | None:
        return None if self._header.metadata is None else dict(self._header.metadata)

    def info(self, name: str) -> TensorInfo:
        """Dtype, shape and byte range of ``name``, without reading its data."""
        found = self._header.tensors.get(name)
        if found is None:
            raise KeyError(f"{self._source}: no tensor named {name!r}")
        return found

    def get_tensor(self, name: str):
        return self._load(self.info(name), (Ellipsis,))

    def get_slice(self, name: str) -> TensorSlice:
        return TensorSlice(self, self.info(name))

    def _load(self, info: TensorInfo, index: tuple):
        """``info``'s tensor indexed by ``index``, reading only the bytes the selection spans."""
        if self._image is None:
            raise ValueError(f"{self._source}: the file is closed")
        if not _is_basic_index(index):  # a gather: read the tensor, then index the array
            whole = self._read(info, 0, info.end - info.begin).view(info.dtype.numpy).reshape(info.shape)
            return self._finish(whole[index])
        selected, origin = _selection(info, index)
        if self._device.type == "meta" and not self._as_numpy:
            return Tensor._meta(selected.shape, info.dtype)
        if not selected.size:
            return self._finish(np.empty(selected.shape, info.dtype.numpy))
        low, high = np.lib.array_utils.byte_bounds(selected)
        chunk = self._read(info, low - origin, high - origin)
        array = np.ndarray(selected.shape, info.dtype.numpy, chunk, offset=selected.__array_interface__["data"][0]
                           - low, strides=selected.strides)
        return self._finish(array)

    def _read(self, info: TensorInfo, start: int, stop: int) -> np.ndarray:
        """Bytes [start, stop) of ``info``'s data; bool bytes become 0 or 1 where the reader may change them."""
        first = self._header.buffer_start + info.begin
        chunk = self._image.read(first + start, first + stop, f"tensor {_quoted(info.name)}")
        if info.dtype.kind == "bool" and self._image.private:
            np.minimum(chunk, 1, out=chunk)  # any nonzero byte is True, as NumPy and torch read it
        return chunk

    def _finish(self, array: np.ndarray):
        return array if self._as_numpy else _tensor_from_host(array, self._device)


def load_file(path, device=None, *, mmap: bool = False) -> dict[str, Tensor]:
    """Every tensor of the file at ``path``, on ``device`` (default: nbxtensor's default device), each
    in memory of its own. ``mmap=True`` makes CPU tensors view a memory map of the file instead (no
    copy, but a truncation of the file while they live kills the process; see ``safe_open``)."""
    with safe_open(path, device=device, mmap=mmap) as file:
        return _load_all(file)


def load(data: bytes, device=None) -> dict[str, Tensor]:
    """Every tensor of a safetensors image held in memory; CPU tensors share one private copy of it."""
    with safe_open._from_bytes(data, device, "<bytes>") as file:
        return _load_all(file)


def _load_all(file: safe_open) -> dict[str, Tensor]:
    sizes = {name: file.info(name).end - file.info(name).begin for name in file.keys()}
    return {name: file.get_tensor(name) for name in progress.track(sizes, "loading tensors", size=sizes.__getitem__,
                                                                   total=sum(sizes.values()), unit="bytes")}


# ---- writing ---------------------------------------------------------------------------------

def _plan(tensors: dict, metadata) -> tuple[bytes, list[tuple[str, Tensor]]]:
    """The header (length prefix included, padded) and the tensors in the order their data follows."""
    _require_little_endian_host()
    if not isinstance(tensors, dict):
        raise TypeError(f"save expects a dict of name -> Tensor, got {type(tensors).__name__}")
    header: dict = {}
    if metadata is not None:
        if not isinstance(metadata, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                     for k, v in metadata.items()):
            raise SafetensorsError("metadata must be a dict of strings to strings (convert values with str() "
                                   f"or json.dumps()), got {metadata!r:.200}")
        header[METADATA_KEY] = metadata
    for name, value in tensors.items():
        if not isinstance(name, str):
            raise SafetensorsError(f"tensor names must be strings, got {name!r}")
        if name == METADATA_KEY:
            raise SafetensorsError(f"{METADATA_KEY!r} is reserved for metadata and cannot name a tensor")
        if not isinstance(value, Tensor):
            raise SafetensorsError(f"tensor {name!r}: expected an nbxtensor Tensor, got {type(value).__name__}")
        if value.is_meta:
            raise SafetensorsError(f"tensor {name!r}: a meta tensor has no data to save")
        if value.dtype.safetensors is None:
            raise SafetensorsError(f"tensor {name!r}: safetensors has no code for {value.dtype.name}; "
                                   f"known codes: {_KNOWN_CODES}")
    # widest elements first: with the buffer 8-aligned, every tensor then starts aligned to its itemsize
    ordered = sorted(tensors.items(), key=lambda item: (-item[1].dtype.itemsize, item[0]))
    offset = 0
    for name, value in ordered:
        header[name] = {"dtype": value.dtype.safetensors, "shape": list(value.shape),
                        "data_offsets": [offset, offset + value.nbytes]}
        offset += value.nbytes
    try:
        text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as error:
        raise SafetensorsError(f"a tensor name or metadata string is not valid Unicode ({error})") from None
    text += b" " * (-len(text) % _HEADER_ALIGNMENT)
    return _LENGTH_PREFIX.pack(len(text)) + text, ordered


def _tensor_bytes(value: Tensor) -> memoryview:
    """The tensor's elements, row-major; a copy from a device or of a non-contiguous CPU tensor."""
    array = np.ascontiguousarray(value.numpy())
    return memoryview(array.reshape(-1).view(np.uint8))


def save(tensors: dict, metadata: dict | None = None) -> bytes:
    """``tensors`` (names to tensors on any device) as a safetensors image in memory."""
    header, ordered = _plan(tensors, metadata)
    return b"".join([header, *(_tensor_bytes(value) for _, value in ordered)])


def save_file(tensors: dict, path, metadata: dict | None = None) -> None:
    """Write ``tensors`` (names to tensors on any device) to ``path``, one tensor in host memory at a
    time. The file is written beside ``path`` and renamed over it, so tensors still mapping an older
    file at ``path`` keep their data instead of faulting."""
    header, ordered = _plan(tensors, metadata)
    path = os.fspath(path)
    temporary = f"{path}.{uuid.uuid4().hex}.tmp"
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(header)
            for _, value in ordered:
                file.write(_tensor_bytes(value))
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
