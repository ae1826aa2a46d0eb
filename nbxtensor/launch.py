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
from .tensor import Tensor

_ALIGN_MASK = 15  # Triton specialises pointers on 16-byte alignment
_compiled: dict = {}


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def launch(kernel, grid, device, args, **constexprs) -> None:
    """Run ``kernel`` over ``grid`` on ``device``. Tensor arguments travel as pointers to their
    first element; anything else goes as it is. Constexprs come by keyword, after every positional
    parameter of the kernel."""
    launch_planned(kernel, grid, device, args, constexprs, tuple(constexprs.items()))


def launch_planned(kernel, grid, device, args, constexprs: dict, constexpr_key: tuple) -> None:
    """``launch`` for callers that keep their constexprs, and their key, from one call to the next."""
    backend = backend_for(device)
    if not backend.compiles_kernels:
        backend.check_kernels()
        kernel[grid](*[a._kernel_pointer(backend) if type(a) is Tensor else a for a in args], **constexprs)
        return
    # The key holds every value Triton could specialise on (ints and tuples by value, pointers by
    # dtype and alignment), so one entry never stands for two different compilations.
    spec = []
    values = []
    for a in args:
        if type(a) is Tensor:
            ptr = a.data_ptr()
            spec.append((a._dtype, ptr & _ALIGN_MASK == 0))
            values.append(ptr)
        else:
            spec.append(a)
            values.append(a)
    key = (kernel, device.index, constexpr_key, tuple(spec))
    entry = _compiled.get(key)
    if entry is None:
        compiled = kernel[grid](*[a._kernel_pointer(backend) if type(a) is Tensor else a for a in args],
                                **constexprs)
        _compiled[key] = (compiled, [constexprs[name] for name in kernel.arg_names[len(args):]])
        return
    compiled, tail = entry
    g1 = grid[1] if len(grid) > 1 else 1
    g2 = grid[2] if len(grid) > 2 else 1
    compiled.run(grid[0], g1, g2, backend.current_stream_handle(device.index), compiled.function,
                 compiled.packed_metadata, None, None, None, *values, *tail)
