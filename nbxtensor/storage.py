"""Storage: a refcounted device buffer that tensors view. Zero-size storage allocates nothing."""
from __future__ import annotations

from .device import Buffer, backend_for, device


class Storage:
    __slots__ = ("device", "nbytes", "buffer", "__weakref__")

    def __init__(self, dev: device, nbytes: int, buffer: Buffer | None = None, pinned: bool = False):
        self.device = dev
        self.nbytes = nbytes
        if buffer is None and nbytes > 0:
            backend = backend_for(dev)
            buffer = backend.allocate(nbytes, dev.index, pinned=True) if pinned else backend.allocate(nbytes, dev.index)
        self.buffer = buffer

    @property
    def pinned(self) -> bool:
        return self.buffer is not None and self.buffer.pinned

    @property
    def ptr(self) -> int:
        return 0 if self.buffer is None else self.buffer.ptr

    @property
    def backend(self):
        return backend_for(self.device)
