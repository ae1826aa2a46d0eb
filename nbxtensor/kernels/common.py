"""Pieces every elementwise kernel shares."""
import triton
import triton.language as tl


@triton.jit
def program_elements(BLOCK: tl.constexpr, INDEX_64: tl.constexpr):
    """This program's BLOCK consecutive element indices: 32-bit unless an extent or offset can
    reach 2^31 (64-bit index arithmetic is slower on some GPUs)."""
    pid = tl.program_id(0)
    if INDEX_64:
        return pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    else:
        return pid * BLOCK + tl.arange(0, BLOCK)
