"""Safetensors files: read zero-copy through a memory map, validated before any tensor is built, and
written with every tensor aligned to its element size.

The format: 8 bytes holding the header length N (unsigned, little-endian), N bytes of UTF-8 JSON
mapping each tensor name to ``{"dtype", "shape", "data_offsets"}`` (plus an optional
``"__metadata__"`` object of strings), then the data buffer. Offsets count from the buffer's start;
tensors are stored row-major and little-endian, and together they cover the buffer exactly.

CPU tensors view the mapped file; the mapping is private (copy-on-write), so writing to such a tensor
changes this process's copy only, never the file, and the mapping lives as long as any tensor that
views it. Tensors for another device are read from the mapping into pinned host buffers, in turn, while
the copy engine moves the previous piece to the device (the backend's ``upload_from_host``).

A file that another process truncates while it is mapped can still fault on access (SIGBUS), as with
any memory-mapped reader; ``save_file`` never does this to files it replaces (see there).
"""
from __future__ import annotations

import json
import math
import mmap
import os
import struct
import sys
import uuid
from dataclasses import dataclass

import numpy as np

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

def _parse(raw: np.ndarray, source: str) -> _Header:
    """Validate the header of the safetensors image ``raw`` (a flat uint8 array) against its size.
    Only the length prefix and the header bytes are read; nothing is read past ``raw``'s end."""
    total = raw.size
    if total < _LENGTH_PREFIX.size:
        raise SafetensorsError(f"{source}: {total} bytes is too short for a safetensors file "
                               f"(the header length alone takes {_LENGTH_PREFIX.size})")
    (header_length,) = _LENGTH_PREFIX.unpack(raw[:_LENGTH_PREFIX.size].tobytes())
    if header_length > MAX_HEADER_BYTES:
        raise SafetensorsError(f"{source}: the header length its first 8 bytes give exceeds the limit of "
                               f"{MAX_HEADER_BYTES} bytes; the file is not safetensors")
    buffer_start = _LENGTH_PREFIX.size + header_length
    if buffer_start > total:
        raise SafetensorsError(f"{source}: the header length its first 8 bytes give runs past the end of "
                               f"the file ({total} bytes); the file is truncated or not safetensors")
    document = _decode_json(raw[_LENGTH_PREFIX.size:buffer_start].tobytes(), source)
    if not isinstance(document, dict):
        raise SafetensorsError(f"{source}: the header must be a JSON object, got {type(document).__name__}")
    metadata = _check_metadata(document.pop(METADATA_KEY, None), source)
    buffer_length = total - buffer_start
    tensors = {name: _check_entry(name, entry, buffer_length, source) for name, entry in document.items()}
    _check_coverage(tensors.values(), buffer_length, source)
    return _Header(tensors, metadata, buffer_start)


def _decode_json(header: bytes, source: str):
    try:
        text = header.decode("utf-8")
    except UnicodeDecodeError as error:
        raise SafetensorsError(f"{source}: the header is not valid UTF-8 (at its byte {error.start})") from None
    try:
        return json.loads(text, object_pairs_hook=_refuse_duplicate_keys)
    except _DuplicateKey as error:
        raise SafetensorsError(f"{source}: the header names {error.args[0]!r} twice") from None
    except (ValueError, RecursionError) as error:
        # ValueError covers malformed JSON and integers too long to convert; RecursionError deep nesting
        raise SafetensorsError(f"{source}: the header is not valid JSON ({error})") from None


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
        raise SafetensorsError(f"{source}: {METADATA_KEY} must be an object of strings, got "
                               f"{type(metadata).__name__}")
    for key, value in metadata.items():
        if not isinstance(value, str):
            raise SafetensorsError(f"{source}: {METADATA_KEY} value for {key!r} must be a string, got "
                                   f"{type(value).__name__}")
    return metadata


def _is_int(value) -> bool:
    return type(value) is int  # JSON true/false arrive as bool, a subclass of int; refuse them


def _check_entry(name: str, entry, buffer_length: int, source: str) -> TensorInfo:
    where = f"{source}: tensor {name!r}"
    if not isinstance(entry, dict):
        raise SafetensorsError(f"{where}: the entry must be an object, got {type(entry).__name__}")
    if entry.keys() != _ENTRY_KEYS:
        missing, extra = _ENTRY_KEYS - entry.keys(), entry.keys() - _ENTRY_KEYS
        problems = ([f"missing {', '.join(sorted(missing))}"] if missing else []) + \
                   ([f"unexpected {', '.join(sorted(extra))}"] if extra else [])
        raise SafetensorsError(f"{where}: the entry must have exactly dtype, shape and data_offsets "
                               f"({'; '.join(problems)})")
    code, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if not isinstance(code, str):
        raise SafetensorsError(f"{where}: dtype must be a string, got {type(code).__name__}")
    try:
        dt = from_safetensors_code(code)
    except TypeError:
        raise SafetensorsError(f"{where}: unknown dtype {code!r}; known: {_KNOWN_CODES}") from None
    if not isinstance(shape, list) or not all(_is_int(n) and n >= 0 for n in shape):
        raise SafetensorsError(f"{where}: shape must be a list of non-negative integers, got {shape!r:.200}")
    if len(shape) > _MAX_RANK:
        raise SafetensorsError(f"{where}: {len(shape)} dimensions exceed the limit of {_MAX_RANK}")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_int(n) for n in offsets)):
        raise SafetensorsError(f"{where}: data_offsets must be a list of two integers, got {offsets!r:.200}")
    begin, end = offsets
    if not 0 <= begin <= end <= buffer_length:
        raise SafetensorsError(f"{where}: data_offsets [{begin}, {end}] do not lie within the data buffer "
                               f"[0, {buffer_length}]")
    expected = math.prod(shape) * dt.itemsize
    if end - begin != expected:
        raise SafetensorsError(f"{where}: data_offsets [{begin}, {end}] span {end - begin} bytes, but shape "
                               f"{shape} of {code} needs {expected}")
    return TensorInfo(name, dt, tuple(shape), begin, end)


def _check_coverage(tensors, buffer_length: int, source: str) -> None:
    """The tensors must tile the buffer: no overlaps, no holes, nothing left over at the end."""
    covered, previous = 0, None
    for info in sorted(tensors, key=lambda t: (t.begin, t.end)):
        if info.begin < covered:
            raise SafetensorsError(f"{source}: tensor {info.name!r} (bytes [{info.begin}, {info.end}]) overlaps "
                                   f"tensor {previous.name!r} (bytes [{previous.begin}, {previous.end}])")
        if info.begin > covered:
            raise SafetensorsError(f"{source}: bytes [{covered}, {info.begin}] of the data buffer, before tensor "
                                   f"{info.name!r}, belong to no tensor")
        covered, previous = info.end, info
    if covered != buffer_length:
        raise SafetensorsError(f"{source}: bytes [{covered}, {buffer_length}] at the end of the data buffer "
                               "belong to no tensor")


def _host_array(buffer: np.ndarray, info: TensorInfo) -> np.ndarray:
    """The tensor's elements, viewing ``buffer`` (no copy)."""
    return buffer[info.begin:info.end].view(info.dtype.numpy).reshape(info.shape)


def _tensor_from_host(array: np.ndarray, dev: _device) -> Tensor:
    """``array`` as a tensor on ``dev``: a view on the CPU, shapes only on meta, else an upload."""
    if dev.type == "meta":
        return Tensor._meta(array.shape, array.dtype)
    if any(stride < 0 for stride in array.strides):
        array = np.ascontiguousarray(array)  # a reversing slice; tensors have non-negative strides
    host_tensor = from_numpy(array)
    return host_tensor if dev.type == "cpu" else host_tensor.to(dev)


class TensorSlice:
    """A tensor of an open file, read lazily: index it (``f.get_slice(name)[0:4, :]``) to load only that
    part, which on a device uploads only the selected elements."""

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
        return self._owner._finish(self._owner._host_array(self._info)[index])

    def __repr__(self) -> str:
        return f"TensorSlice({self._info.name!r}, shape={list(self._info.shape)}, dtype={self._info.dtype.name})"


class safe_open:
    """An open safetensors file::

        with nbx.io.safe_open("model.safetensors", device="cuda") as f:
            for name in f.keys():
                weight = f.get_tensor(name)

    ``framework`` is ``"nbx"`` (tensors) or ``"numpy"`` (arrays viewing the file, CPU only). Tensors
    handed out stay valid after the file is closed."""

    def __init__(self, path, framework: str = "nbx", device="cpu"):
        if framework not in _FRAMEWORKS:
            raise ValueError(f"safe_open: unknown framework {framework!r}; use 'nbx' or 'numpy'")
        self._as_numpy = framework in ("np", "numpy")
        self._device = resolve(device)
        if self._as_numpy and self._device.type != "cpu":
            raise ValueError(f"safe_open: NumPy arrays live on the CPU, not {self._device}")
        self._source = os.fspath(path)
        self._buffer, self._header = _map_file(self._source)

    @classmethod
    def _from_image(cls, image: np.ndarray, device, source: str) -> "safe_open":
        opened = object.__new__(cls)
        opened._as_numpy, opened._device, opened._source = False, resolve(device), source
        opened._buffer, opened._header = image, _parse(image, source)
        return opened

    def __enter__(self) -> "safe_open":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        """Drop this handle's reference to the mapping; tensors already returned keep it alive."""
        self._buffer = None

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
        info = self.info(name)
        return self._finish(self._host_array(info))

    def get_slice(self, name: str) -> TensorSlice:
        return TensorSlice(self, self.info(name))

    def _host_array(self, info: TensorInfo) -> np.ndarray:
        if self._buffer is None:
            raise ValueError(f"{self._source}: the file is closed")
        return _host_array(self._buffer[self._header.buffer_start:], info)

    def _finish(self, array: np.ndarray):
        return array if self._as_numpy else _tensor_from_host(array, self._device)


def _map_file(path: str) -> tuple[np.ndarray, _Header]:
    """The whole file mapped copy-on-write as a uint8 array, and its validated header."""
    _require_little_endian_host()
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        if size < _LENGTH_PREFIX.size:
            raise SafetensorsError(f"{path}: {size} bytes is too short for a safetensors file "
                                   f"(the header length alone takes {_LENGTH_PREFIX.size})")
        mapping = mmap.mmap(file.fileno(), size, access=mmap.ACCESS_COPY)
    image = np.frombuffer(mapping, dtype=np.uint8)
    return image, _parse(image, path)


def load_file(path, device=None) -> dict[str, Tensor]:
    """Every tensor of the file at ``path``, on ``device`` (default: nbxtensor's default device). On
    the CPU the tensors view the memory-mapped file, so loading reads no data until it is used."""
    with safe_open(path, device=device) as file:
        return {name: file.get_tensor(name) for name in file.keys()}


def load(data: bytes, device=None) -> dict[str, Tensor]:
    """Every tensor of a safetensors image held in memory; CPU tensors share one private copy of it."""
    _require_little_endian_host()
    image = np.frombuffer(bytearray(data), dtype=np.uint8)  # a writable copy: tensors must not alias ``data``
    with safe_open._from_image(image, device, "<bytes>") as file:
        return {name: file.get_tensor(name) for name in file.keys()}


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
