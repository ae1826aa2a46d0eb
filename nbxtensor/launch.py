"""The one launch path: every kernel goes to its device through here."""
from __future__ import annotations

from .device import backend_for


def launch(kernel, grid, device, args, **constexprs) -> None:
    """Run ``kernel`` over ``grid`` on ``device``. Tensor arguments travel as pointers to their
    first element; anything else goes as it is."""
    backend = backend_for(device)
    backend.check_kernels()
    kernel[grid](*[a._kernel_pointer(backend) if hasattr(a, "_kernel_pointer") else a for a in args],
                 **constexprs)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)
