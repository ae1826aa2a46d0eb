"""Launching compiled Triton kernels through ``_nbx_cuda_launch``, a small C extension
(``nbxtensor/native/cuda_launch.c``): a ``BoundLaunch`` holds a kernel's parameters packed once, and a call
rewrites only the varying ones before ``cuLaunchKernelEx``. This module builds and loads the extension
and maps a Triton kernel's signature onto the flat parameter list the kernel takes."""
from __future__ import annotations

from typing import NamedTuple

from .. import native


# Triton signature type -> kind code of cuda_launch.c (its module docstring lists the codes).
# Pointer types ("*fp32", "*i8", ...) all map to "p"; i1 travels as int8, as Triton passes it.
KINDS = {
    "i1": "b", "i8": "b", "u1": "B", "u8": "B", "i16": "h", "u16": "H", "i32": "i", "u32": "I",
    "i64": "l", "u64": "L", "fp16": "e", "bf16": "r", "fp32": "f", "f32": "f", "fp64": "d",
}
POINTER = "p"
# Triton appends two pointers to every kernel's own parameters: global scratch, profile scratch.
SCRATCH_KINDS = POINTER * 2


def module():
    """The loaded ``_nbx_cuda_launch`` extension (``nbxtensor/native/cuda_launch.c``), built on first use;
    ``RuntimeError`` saying why when it cannot be built."""
    built = native.module("cuda_launch")
    if set(built.KIND_CODES.decode()) != {POINTER, *KINDS.values()}:
        raise RuntimeError(f"_nbx_cuda_launch knows kind codes {built.KIND_CODES!r}, unlike {__name__}")
    return built


def kind_of(ty: str) -> str:
    """The kind code of one Triton parameter type."""
    if ty.startswith("*"):
        return POINTER
    if ty.startswith("tensordesc") or ty == "nvTmaDesc":
        raise ValueError(f"tensor descriptor parameters ({ty}) are not supported")
    try:
        return KINDS[ty]
    except KeyError:
        raise ValueError(f"unknown Triton parameter type {ty!r}") from None


class Parameters(NamedTuple):
    """How a kernel's Python arguments map onto its flat parameter list.

    ``arguments[a]`` is, for positional argument ``a`` of the kernel (constexprs included, so indices
    line up): ``[]`` for a constexpr argument; ``[k]`` for a scalar argument that is parameter ``k``;
    for a tuple argument, one entry per leaf of the flattened (possibly nested) tuple, in order: the
    leaf's parameter index, or ``None`` for a leaf specialised to a constant. ``kinds`` has one code per
    parameter, the two scratch pointers that follow the kernel's own included."""
    arguments: list[list[int | None]]
    kinds: bytes

    @property
    def global_scratch(self) -> int:
        return len(self.kinds) - 2

    @property
    def profile_scratch(self) -> int:
        return len(self.kinds) - 1


def _leaves(ty, out: list):
    if isinstance(ty, tuple):
        for item in ty:
            _leaves(item, out)
    else:
        out.append(ty)
    return out


def parameters_of_signature(signature: dict) -> Parameters:
    """``Parameters`` from a Triton signature: argument name -> type string, a tuple of types (nested
    tuples allowed) for a tuple argument, ``"constexpr"`` for an argument that is no parameter."""
    arguments, kinds = [], []
    for name, ty in signature.items():
        if ty == "constexpr":
            arguments.append([])
            continue
        places = []
        for leaf in _leaves(ty, []):
            if leaf == "constexpr":
                places.append(None)
                continue
            try:
                kinds.append(kind_of(leaf))
            except ValueError as e:
                raise ValueError(f"argument {name!r}: {e}") from None
            places.append(len(kinds) - 1)
        arguments.append(places)
    return Parameters(arguments, ("".join(kinds) + SCRATCH_KINDS).encode())


def parameters(compiled) -> Parameters:
    """``Parameters`` of a Triton 3.6 ``CompiledKernel`` (what ``kernel[grid](...)`` returns)."""
    meta = getattr(compiled, "metadata", None)
    if getattr(meta, "num_ctas", 1) != 1:
        raise ValueError(f"kernels of num_ctas={meta.num_ctas} are not supported (clusters)")
    if getattr(meta, "tensordesc_meta", None):
        raise ValueError("tensor descriptor parameters are not supported")
    return parameters_of_signature(compiled.src.signature)


def _flatten(value, out: list):
    if isinstance(value, (tuple, list)):
        for item in value:
            _flatten(item, out)
    else:
        out.append(value)
    return out


def parameter_values(layout: Parameters, args, global_scratch: int = 0, profile_scratch: int = 0) -> tuple:
    """The ``values`` tuple of a ``BoundLaunch`` for the kernel's positional arguments ``args``: tuple
    arguments flattened, constant leaves dropped, objects with ``data_ptr()`` (pointer parameters) read."""
    if len(args) != len(layout.arguments):
        raise ValueError(f"the kernel takes {len(layout.arguments)} argument(s), {len(args)} given")
    values = [None] * len(layout.kinds)
    for a, (places, arg) in enumerate(zip(layout.arguments, args)):
        if not places:
            continue
        leaves = _flatten(arg, []) if len(places) > 1 or isinstance(arg, (tuple, list)) else [arg]
        if len(leaves) != len(places):
            raise ValueError(f"argument {a} has {len(leaves)} value(s) where the kernel has {len(places)}")
        for k, leaf in zip(places, leaves):
            if k is not None:
                values[k] = leaf.data_ptr() if layout.kinds[k] == ord(POINTER) and hasattr(leaf, "data_ptr") \
                    else leaf
    values[layout.global_scratch] = global_scratch
    values[layout.profile_scratch] = profile_scratch
    return tuple(values)


def bind(compiled, grid, values, positions, launch_address: int):
    """A ``BoundLaunch`` of ``compiled`` (a Triton ``CompiledKernel``) over ``grid`` with the kernel's
    positional arguments ``values`` (tensors as addresses), whose call ``(stream, *new)`` takes new values
    for the arguments at ``positions`` (scalar arguments; one the kernel took as a constant is passed and
    ignored). None for a kernel this launcher does not serve: one that asks for scratch memory at each
    launch, runs on clusters or takes tensor descriptors, or a tuple among the varying arguments."""
    run = compiled.run
    if run.global_scratch_size or run.profile_scratch_size:
        return None
    try:
        layout = parameters(compiled)
        varying = []
        for p in positions:
            places = layout.arguments[p]
            if len(places) > 1 or isinstance(values[p], tuple):
                return None
            varying.append(places[0] if places else None)
        packed = parameter_values(layout, list(values) + [None] * (len(layout.arguments) - len(values)))
    except ValueError:
        return None
    num_warps, _, shared = compiled.packed_metadata
    return module().BoundLaunch(launch_address, compiled.function, tuple(grid) + (1,) * (3 - len(grid)),
                                32 * num_warps, shared, run.launch_cooperative_grid, run.launch_pdl,
                                layout.kinds, packed, tuple(varying))
