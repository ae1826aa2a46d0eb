"""The one strided copy: any strides on both sides, a broadcast source (stride 0) or a constant,
and dtype conversion on the store (``formats.encode``).
"""
import triton
import triton.language as tl

from .common import program_elements, strided_offset
from .formats import FORMAT_BOOL, decode, encode

SOURCE_TENSOR = tl.constexpr(0)
SOURCE_CONSTANT = tl.constexpr(1)

# complex data as (re, im) pairs of components: a complex source read for its real part (and, for a
# bool destination, its imaginary part); a complex destination written with a zero imaginary part
PAIRS_NONE = tl.constexpr(0)
PAIRS_SOURCE = tl.constexpr(1)
PAIRS_DESTINATION = tl.constexpr(2)


@triton.jit
def strided_copy(dst, src, n, constant_bits, shape, dst_strides, src_strides,
                 RANK: tl.constexpr, SOURCE: tl.constexpr, CONSTANT_BITS_TYPE: tl.constexpr,
                 SRC_FORMAT: tl.constexpr, DST_FORMAT: tl.constexpr, PAIRS: tl.constexpr,
                 VIA_F32: tl.constexpr, FLOAT_TO_INT: tl.constexpr,
                 INDEX_64: tl.constexpr, BLOCK: tl.constexpr):
    idx = program_elements(BLOCK, INDEX_64)
    mask = idx < n
    dst_off = strided_offset(idx, shape, dst_strides, RANK)
    src_off = strided_offset(idx, shape, src_strides, RANK)
    out_type = dst.dtype.element_ty
    if SOURCE == SOURCE_CONSTANT:
        x = tl.full([BLOCK], constant_bits, tl.int64).to(CONSTANT_BITS_TYPE)
        y = x.to(out_type, bitcast=True)
    else:
        x = decode(tl.load(src + src_off, mask=mask), SRC_FORMAT)
        if PAIRS == PAIRS_SOURCE and DST_FORMAT == FORMAT_BOOL:
            imag = decode(tl.load(src + src_off + 1, mask=mask), SRC_FORMAT)
            y = ((x != 0) | (imag != 0)).to(tl.uint8)
        else:
            y = encode(x, out_type, DST_FORMAT, VIA_F32, FLOAT_TO_INT)
    tl.store(dst + dst_off, y, mask=mask)
    if PAIRS == PAIRS_DESTINATION:
        tl.store(dst + dst_off + 1, tl.zeros([BLOCK], out_type), mask=mask)
