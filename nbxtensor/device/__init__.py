"""Devices and the backends behind them.

A backend owns one kind of memory and knows how to move bytes in and out of it and how to hand a
buffer to a Triton kernel. Op code never names a backend: it asks a tensor's device for its backend.
"""
from __future__ import annotations

import os

from .backend import Backend, Buffer

__all__ = ["device", "Backend", "Buffer", "backend_for", "register_backend", "default_device",
           "set_default_device", "available_backends"]

_BACKENDS: dict[str, Backend] = {}


class device:
    """A device: a type (``"cpu"``, ``"cuda"``) and, where there are several, an index."""

    __slots__ = ("type", "index")

    def __init__(self, spec, index: int | None = None):
        if isinstance(spec, device):
            self.type, self.index = spec.type, spec.index if index is None else index
            return
        if isinstance(spec, int):
            spec, index = "cuda", spec
        if not isinstance(spec, str):
            if type(spec).__module__ == "torch":
                spec = str(spec)
            else:
                raise TypeError(f"expected a device string such as 'cpu' or 'cuda:0', got {spec!r}")
        kind, _, idx = spec.strip().partition(":")
        if idx:
            if index is not None:
                raise ValueError(f"device {spec!r} already has an index; do not pass index={index}")
            if not idx.isdigit():
                raise ValueError(f"invalid device string {spec!r}: the index must be a non-negative integer")
            index = int(idx)
        if kind not in ("cpu", "cuda", "meta"):
            raise ValueError(f"unknown device type {kind!r} in {spec!r}; known: cpu, cuda, meta")
        if kind in ("cpu", "meta") and index not in (None, 0):
            raise ValueError(f"the {kind} device has no index {index}")
        self.type = kind
        self.index = None if kind in ("cpu", "meta") else index

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            try:
                other = device(other)
            except (ValueError, TypeError):
                return False
        return isinstance(other, device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        return f"device(type={self.type!r}" + ("" if self.index is None else f", index={self.index}") + ")"

    def __reduce__(self):
        return (device, (str(self),))


def register_backend(backend: Backend) -> None:
    _BACKENDS[backend.type] = backend


def available_backends() -> dict[str, Backend]:
    return dict(_BACKENDS)


def backend_for(dev: device) -> Backend:
    found = _BACKENDS.get(dev.type)
    if found is None and dev.type == "meta":
        raise RuntimeError("the meta device has no memory: a meta tensor carries only a shape, strides and a "
                           "dtype, so no op computes values on it")
    if found is None:
        raise RuntimeError(f"no backend for device {dev} in this process; available: "
                           f"{', '.join(sorted(_BACKENDS))}")
    return found


def multiprocessors(dev: device) -> int:
    """Programs that run at once on ``dev`` at one a multiprocessor: its SM count (a few under the
    interpreter, so that persistent programs each walk several items there too)."""
    properties = getattr(backend_for(dev), "properties", None)
    if properties is None:
        return 3
    return int(properties(dev.index or 0).multiProcessorCount)


def resolve(spec) -> device:
    """A concrete device: a CUDA device without an index becomes the current one."""
    if type(spec) is device and (spec.index is not None or spec.type != "cuda"):
        return spec  # concrete already (devices are immutable): a tensor's device, passed on to a factory
    d = default_device() if spec is None else device(spec)
    if d.type in ("cpu", "meta"):
        return d
    backend = backend_for(d)
    return device(d.type, backend.current_index() if d.index is None else d.index)


_default: device | None = None


def default_device() -> device:
    """``NBX_DEVICE`` if set, else the GPU when this process compiles kernels for one, else the CPU."""
    global _default
    if _default is None:
        env = os.environ.get("NBX_DEVICE", "").strip()
        if env:
            _default = device(env)
        else:
            _default = device("cuda") if "cuda" in _BACKENDS else device("cpu")
    return _default


def set_default_device(spec) -> None:
    global _default
    _default = None if spec is None else device(spec)
