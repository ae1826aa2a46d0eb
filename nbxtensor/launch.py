"""The one launch path: every kernel goes to its device through here.

On a compiling backend the first launch of a kernel for a given specialisation goes through Triton's
generic path, which compiles it; the compiled kernel is then cached under a key we compute ourselves
(the kernel, the device, the constexprs, and for every other argument exactly what Triton specialises
on), and later launches call it directly with bound arguments. That skips Triton's per-launch binding
and keying, which cost more host time than the rest of an op. The interpreter has no compiled form:
it always takes the generic path.
"""
from __future__ import annotations

from .device import backend_for

_ALIGN = 16
_compiled: dict = {}


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _specialisation(arg):
    """What Triton's specialiser keys on for one non-constexpr argument."""
    if hasattr(arg, "_kernel_pointer"):
        return (arg._dtype.name, arg.data_ptr() % _ALIGN == 0)
    if isinstance(arg, bool):
        return ("i1", arg)
    if isinstance(arg, int):
        return ("i32" if -2 ** 31 <= arg < 2 ** 31 else "i64", arg == 1, arg % _ALIGN == 0)
    if isinstance(arg, float):
        return ("fp32",)
    if isinstance(arg, tuple):
        return tuple(_specialisation(a) for a in arg)
    raise TypeError(f"unsupported kernel argument of type {type(arg).__name__}")


def launch(kernel, grid, device, args, **constexprs) -> None:
    """Run ``kernel`` over ``grid`` on ``device``. Tensor arguments travel as pointers to their
    first element; anything else goes as it is. Constexprs come by keyword."""
    backend = backend_for(device)
    if not backend.compiles_kernels:
        backend.check_kernels()
        kernel[grid](*[a._kernel_pointer(backend) if hasattr(a, "_kernel_pointer") else a for a in args],
                     **constexprs)
        return
    key = (kernel, device.index, tuple(constexprs.items()), tuple(_specialisation(a) for a in args))
    entry = _compiled.get(key)
    if entry is None:
        compiled = kernel[grid](*[a._kernel_pointer(backend) if hasattr(a, "_kernel_pointer") else a
                                  for a in args], **constexprs)
        names = kernel.arg_names
        constexpr_slots = [(names.index(k), v) for k, v in constexprs.items()]
        _compiled[key] = (compiled, len(names), constexpr_slots)
        return
    compiled, count, constexpr_slots = entry
    bound = [None] * count
    for i, a in enumerate(args):
        bound[i] = a.data_ptr() if hasattr(a, "_kernel_pointer") else a
    for slot, value in constexpr_slots:
        bound[slot] = value
    g0 = grid[0]
    g1 = grid[1] if len(grid) > 1 else 1
    g2 = grid[2] if len(grid) > 2 else 1
    compiled.run(g0, g1, g2, backend.current_stream_handle(device.index), compiled.function,
                 compiled.packed_metadata, None, None, None, *bound)
