"""Decisions about how an op's operands reach a kernel, shared by every op family (a layer below ``ops``:
it reads layouts only, never a tensor's memory, and imports no op)."""
from __future__ import annotations

from . import shape as S

INT32_LIMIT = 2 ** 31  # the first element count or offset that int32 index arithmetic cannot hold


def needs_index_64(*operands, count: int = 0, reach: int = 0) -> bool:
    """Whether a kernel computes element offsets in 64 bits (its ``INDEX_64`` constexpr): when it indexes
    ``count`` elements or more than int32 holds, or an operand (a tensor, or a (shape, strides) pair) has
    that many elements or reaches an offset, plus ``reach`` elements the kernel addresses past it (a
    complex pair's imaginary part), that int32 does not hold."""
    if count >= INT32_LIMIT:
        return True
    for operand in operands:
        shape, strides = operand if isinstance(operand, tuple) else (operand.shape, operand.stride())
        if S.numel(shape) >= INT32_LIMIT or S.max_offset(shape, strides) + reach >= INT32_LIMIT:
            return True
    return False
