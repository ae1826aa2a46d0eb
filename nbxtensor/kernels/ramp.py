"""Evenly spaced values: arange and linspace."""
import triton
import triton.language as tl

from .common import program_elements

from .formats import encode

# MODE: which ramp (the host passes the ``.value``)
MODE_ARANGE = tl.constexpr(0)
MODE_LINSPACE = tl.constexpr(1)


@triton.jit
def linear_ramp(out, n, start_bits, step_bits, end_bits, halfway,
                MODE: tl.constexpr, COMPUTE: tl.constexpr, COMPUTE_BITS: tl.constexpr,
                OUT_FORMAT: tl.constexpr, VIA_F32: tl.constexpr, FLOAT_TO_INT: tl.constexpr,
                INDEX_64: tl.constexpr, BLOCK: tl.constexpr):
    """``start + i * step`` (arange); linspace counts the upper half back from ``end`` so that both
    ends are exact. Scalars arrive as the bits of COMPUTE-typed values, so float64 keeps its precision.
    The store converts exactly as the copy kernel does (its bit-level bfloat16 and float8 rounding,
    and float to integer through int64)."""
    idx = program_elements(BLOCK, INDEX_64)
    mask = idx < n
    ones = tl.full([BLOCK], 1, tl.int64)
    start = (ones * start_bits).to(COMPUTE_BITS).to(COMPUTE, bitcast=True)
    step = (ones * step_bits).to(COMPUTE_BITS).to(COMPUTE, bitcast=True)
    i = idx.to(COMPUTE)
    if MODE == MODE_ARANGE:
        value = start + i * step
    else:  # MODE_LINSPACE
        end = (ones * end_bits).to(COMPUTE_BITS).to(COMPUTE, bitcast=True)
        back = (n - 1 - idx).to(COMPUTE)
        value = tl.where(idx < halfway, start + step * i, end - step * back)
    tl.store(out + idx, encode(value, out.dtype.element_ty, OUT_FORMAT, VIA_F32, FLOAT_TO_INT), mask=mask)
