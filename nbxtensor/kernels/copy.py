"""The one strided copy: any strides on both sides, a broadcast source (stride 0) or a constant,
and dtype conversion on the store."""
import triton
import triton.language as tl

SOURCE_TENSOR = 0
SOURCE_CONSTANT = 1


@triton.jit
def _offsets(idx, shape, strides_a, strides_b, RANK: tl.constexpr):
    """Element offsets in two layouts of the same row-major index ``idx`` over ``shape``."""
    off_a = idx * 0
    off_b = idx * 0
    rem = idx
    for d in tl.static_range(RANK - 1, -1, -1):
        coord = rem % shape[d]
        rem = rem // shape[d]
        off_a += coord * strides_a[d]
        off_b += coord * strides_b[d]
    return off_a, off_b


@triton.jit
def strided_copy(dst, src, n, constant_bits, shape, dst_strides, src_strides,
                 RANK: tl.constexpr, SOURCE: tl.constexpr, CONSTANT_BITS_TYPE: tl.constexpr,
                 DST_BOOL: tl.constexpr, VIA_F32: tl.constexpr, FLOAT_TO_INT: tl.constexpr,
                 INDEX_64: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if INDEX_64:
        idx = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    else:
        idx = pid * BLOCK + tl.arange(0, BLOCK)
    mask = idx < n
    dst_off, src_off = _offsets(idx, shape, dst_strides, src_strides, RANK)
    if SOURCE == 1:
        x = tl.full([BLOCK], constant_bits, tl.int64).to(CONSTANT_BITS_TYPE)
        x = x.to(dst.dtype.element_ty, bitcast=True)
    else:
        x = tl.load(src + src_off, mask=mask)
    if DST_BOOL:
        y = (x != 0).to(tl.uint8)
    elif VIA_F32:
        y = x.to(tl.float32).to(dst.dtype.element_ty)
    elif FLOAT_TO_INT:
        y = x.to(tl.int64).to(dst.dtype.element_ty)
    else:
        y = x.to(dst.dtype.element_ty)
    tl.store(dst + dst_off, y, mask=mask)
