"""Indexing kernels: advanced-index gathers and puts, dim-wise gather/scatter and their reductions,
masked fills, nonzero, and the index remaps behind flip, roll and the triangles.

Every index read from memory is checked against the extent it indexes. An out-of-range index is
never followed: its lanes are masked, and the op's code is stored in a one-element int32 status
buffer (``status``) that the host reads at its next synchronisation.
"""
import triton
import triton.language as tl

from . import ieee
from .common import program_elements, strided_offset

from .formats import decode, encode

# MODE: the data side of a flat advanced-index launch (the host passes the ``.value``, as of REDUCE)
MODE_GATHER = tl.constexpr(0)  # other[...] = data[index]
MODE_PUT = tl.constexpr(1)  # data[index] = other[...]
MODE_PUT_CONSTANT = tl.constexpr(2)  # data[index] = constant

# REDUCE: scatter_reduce's combination
REDUCE_SUM = tl.constexpr(0)
REDUCE_PROD = tl.constexpr(1)
REDUCE_MAX = tl.constexpr(2)
REDUCE_MIN = tl.constexpr(3)


@triton.jit
def _checked(raw, size, valid, status, CODE: tl.constexpr, WRAP: tl.constexpr, INDEX_64: tl.constexpr):
    """``raw`` indices (negative ones counted from the end when WRAP, else out of range) in the kernel's
    index width, int64 with INDEX_64, else int32, and the lanes that may use them; out-of-range lanes
    report CODE."""
    i = raw.to(tl.int64)
    if WRAP:
        i = tl.where(i < 0, i + size, i)
    in_range = (i >= 0) & (i < size)
    bad = valid & (in_range == 0)
    tl.store(status + (i * 0).to(tl.int32), tl.full(i.shape, CODE, tl.int32), mask=bad)
    i = tl.where(valid & in_range, i, 0)
    if not INDEX_64:
        i = i.to(tl.int32)
    return i, valid & in_range


@triton.jit
def advanced_index(data, other, index, constant_bits, n, n_b, shape, data_strides, other_strides,
                   index_sizes, index_strides, status,
                   RANK: tl.constexpr, B_START: tl.constexpr, B_END: tl.constexpr, K: tl.constexpr,
                   MODE: tl.constexpr, CONSTANT_BITS_TYPE: tl.constexpr, CODE: tl.constexpr, WRAP: tl.constexpr,
                   INDEX_64: tl.constexpr, BLOCK: tl.constexpr):
    """One lane per element of the iteration shape, whose dims B_START..B_END-1 run over the
    broadcast index shape (stride 0 in ``data``); ``index`` holds K rows of ``n_b`` int64 indices
    into ``data``'s indexed dims (extents ``index_sizes``, strides ``index_strides``)."""
    idx = program_elements(BLOCK, INDEX_64)
    valid = idx < n
    rem = idx
    data_off = idx * 0
    other_off = idx * 0
    b = idx * 0
    b_scale = idx * 0 + 1
    for d in tl.static_range(RANK - 1, -1, -1):
        coord = rem % shape[d]
        rem = rem // shape[d]
        data_off += coord * data_strides[d]
        other_off += coord * other_strides[d]
        if d >= B_START and d < B_END:
            b += coord * b_scale
            b_scale *= shape[d]
    for k in tl.static_range(K):
        raw = tl.load(index + k * n_b + b, mask=valid, other=0)
        i, valid = _checked(raw, index_sizes[k], valid, status, CODE, WRAP, INDEX_64)
        data_off += i * index_strides[k]
    if MODE == MODE_GATHER:
        tl.store(other + other_off, tl.load(data + data_off, mask=valid), mask=valid)
    elif MODE == MODE_PUT:
        tl.store(data + data_off, tl.load(other + other_off, mask=valid), mask=valid)
    else:  # MODE_PUT_CONSTANT
        value = tl.full([BLOCK], constant_bits, tl.int64).to(CONSTANT_BITS_TYPE)
        tl.store(data + data_off, value.to(data.dtype.element_ty, bitcast=True), mask=valid)


@triton.jit
def gather_rows(out, src, index, n_b, inner_n, outer_shape, outer_strides, index_sizes, index_strides,
                src_inner_stride, status,
                OUTER_RANK: tl.constexpr, K: tl.constexpr, CODE: tl.constexpr, WRAP: tl.constexpr,
                INDEX_64: tl.constexpr, BLOCK: tl.constexpr):
    """A contiguous ``out`` of shape (outer, n_b, inner_n), one row per program along grid axis 0:
    each index row is decoded once, then a block of the row is copied (embedding, index_select)."""
    row = tl.program_id(0)
    col = tl.program_id(1)
    if INDEX_64:
        row = row.to(tl.int64)
        cols = col.to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    else:
        cols = col * BLOCK + tl.arange(0, BLOCK)
    valid = cols < inner_n
    b = row % n_b
    base = strided_offset(row // n_b, outer_shape, outer_strides, OUTER_RANK)
    ok = valid
    for k in tl.static_range(K):
        raw = tl.load(index + k * n_b + b + cols * 0)
        i, ok = _checked(raw, index_sizes[k], ok, status, CODE, WRAP, INDEX_64)
        base += i * index_strides[k]
    values = tl.load(src + base + cols * src_inner_stride, mask=ok)
    tl.store(out + row * inner_n + cols, values, mask=valid)


@triton.jit
def advanced_accumulate(data, other, index, alpha, n, n_b, shape, data_strides, other_strides,
                        b_shape, b_other_strides, index_sizes, index_strides, status,
                        RANK: tl.constexpr, B_RANK: tl.constexpr, K: tl.constexpr,
                        COMPUTE: tl.constexpr, FORMAT: tl.constexpr, VIA_F32: tl.constexpr,
                        SCALED: tl.constexpr, CODE: tl.constexpr, WRAP: tl.constexpr,
                        INDEX_64: tl.constexpr, BLOCK: tl.constexpr):
    """``data[index] += alpha * other`` (``alpha`` only when SCALED), deterministically: lanes run
    over the non-indexed dims (``shape``), and each lane walks the index entries in order, so duplicates add up in a fixed order and no
    two lanes touch one element."""
    idx = program_elements(BLOCK, INDEX_64)
    valid = idx < n
    data_base = strided_offset(idx, shape, data_strides, RANK)
    other_base = strided_offset(idx, shape, other_strides, RANK)
    out_type = data.dtype.element_ty
    # a while loop: the interpreter cannot take a runtime bound in range()
    b = 0
    while b < n_b:
        other_off = other_base + strided_offset(b, b_shape, b_other_strides, B_RANK)
        data_off = data_base
        ok = valid
        for k in tl.static_range(K):
            raw = tl.load(index + k * n_b + b + idx * 0)
            i, ok = _checked(raw, index_sizes[k], ok, status, CODE, WRAP, INDEX_64)
            data_off += i * index_strides[k]
        current = decode(tl.load(data + data_off, mask=ok), FORMAT).to(COMPUTE)
        addend = decode(tl.load(other + other_off, mask=ok), FORMAT).to(COMPUTE)
        if SCALED:
            addend = addend * alpha
        tl.store(data + data_off, encode(current + addend, out_type, FORMAT, VIA_F32, False), mask=ok)
        b += 1


@triton.jit
def _index_lanes(index, n, shape, element_strides, indexed_strides, index_strides, dim_size, status,
                 RANK: tl.constexpr, DIM: tl.constexpr, CODE: tl.constexpr, WRAP: tl.constexpr,
                 INDEX_64: tl.constexpr, BLOCK: tl.constexpr):
    """A program's lanes over the index's shape, for gather and scatter along DIM: which lanes are valid,
    each lane's offset in the tensor that has the index's shape, its offset in the indexed tensor with
    DIM left out, the checked index there and the lanes that may use it."""
    idx = program_elements(BLOCK, INDEX_64)
    valid = idx < n
    element_off = strided_offset(idx, shape, element_strides, RANK)
    index_off = strided_offset(idx, shape, index_strides, RANK)
    indexed_off = strided_offset(idx, shape, indexed_strides, RANK, DIM)
    i, ok = _checked(tl.load(index + index_off, mask=valid, other=0), dim_size, valid, status, CODE, WRAP, INDEX_64)
    return valid, element_off, indexed_off, i, ok


@triton.jit
def dim_gather(out, src, index, n, shape, out_strides, src_strides, index_strides, src_dim_size, status,
               RANK: tl.constexpr, DIM: tl.constexpr, CODE: tl.constexpr, WRAP: tl.constexpr,
               INDEX_64: tl.constexpr, BLOCK: tl.constexpr):
    """``out[c] = src[c with c[DIM] replaced by index[c]]`` over the index's shape."""
    valid, out_off, src_off, i, ok = _index_lanes(index, n, shape, out_strides, src_strides, index_strides,
                                                  src_dim_size, status, RANK, DIM, CODE, WRAP, INDEX_64, BLOCK)
    values = tl.load(src + src_off + i * src_strides[DIM], mask=ok)
    tl.store(out + out_off, values, mask=valid)


@triton.jit
def dim_scatter(dst, src, index, constant_bits, n, shape, dst_strides, src_strides, index_strides,
                dst_dim_size, status,
                RANK: tl.constexpr, DIM: tl.constexpr, CONSTANT: tl.constexpr,
                CONSTANT_BITS_TYPE: tl.constexpr, CODE: tl.constexpr, WRAP: tl.constexpr,
                INDEX_64: tl.constexpr, BLOCK: tl.constexpr):
    """``dst[c with c[DIM] replaced by index[c]] = src[c]`` (or a constant) over the index's shape;
    which of several writes to one element lands is unspecified, as in ATen."""
    valid, src_off, dst_off, i, ok = _index_lanes(index, n, shape, src_strides, dst_strides, index_strides,
                                                  dst_dim_size, status, RANK, DIM, CODE, WRAP, INDEX_64, BLOCK)
    if CONSTANT:
        value = tl.full([BLOCK], constant_bits, tl.int64).to(CONSTANT_BITS_TYPE).to(dst.dtype.element_ty,
                                                                                     bitcast=True)
    else:
        value = tl.load(src + src_off, mask=ok)
    tl.store(dst + dst_off + i * dst_strides[DIM], value, mask=ok)


@triton.jit
def _combine(a, b, REDUCE: tl.constexpr):
    if REDUCE == REDUCE_SUM:
        return a + b
    elif REDUCE == REDUCE_PROD:
        return a * b
    elif REDUCE == REDUCE_MAX:
        # NaN wins, as in ATen's maximum
        return tl.where((a > b) | (a != a), a, b)
    else:  # REDUCE_MIN
        return tl.where((a < b) | (a != a), a, b)


@triton.jit
def dim_scatter_reduce(dst, src, index, counts, n, dim_n, shape, dst_strides, src_strides, index_strides,
                       dst_dim_size, status,
                       RANK: tl.constexpr, DIM: tl.constexpr, REDUCE: tl.constexpr, COUNT: tl.constexpr,
                       COMPUTE: tl.constexpr, FORMAT: tl.constexpr, VIA_F32: tl.constexpr,
                       CODE: tl.constexpr, WRAP: tl.constexpr, INDEX_64: tl.constexpr, BLOCK: tl.constexpr):
    """Lanes over the index's shape with DIM taken out (``shape[DIM]`` is 1); each lane walks the
    ``dim_n`` entries along DIM in order and combines them into ``dst``, so the result does not
    depend on scheduling. With COUNT, ``counts`` (int32, contiguous like ``dst``) counts the hits."""
    idx = program_elements(BLOCK, INDEX_64)
    valid = idx < n
    src_base = strided_offset(idx, shape, src_strides, RANK)
    index_base = strided_offset(idx, shape, index_strides, RANK)
    dst_base = strided_offset(idx, shape, dst_strides, RANK)
    out_type = dst.dtype.element_ty
    t = 0
    while t < dim_n:
        raw = tl.load(index + index_base + t * index_strides[DIM], mask=valid, other=0)
        i, ok = _checked(raw, dst_dim_size, valid, status, CODE, WRAP, INDEX_64)
        dst_off = dst_base + i * dst_strides[DIM]
        current = decode(tl.load(dst + dst_off, mask=ok), FORMAT).to(COMPUTE)
        value = decode(tl.load(src + src_base + t * src_strides[DIM], mask=ok), FORMAT).to(COMPUTE)
        tl.store(dst + dst_off, encode(_combine(current, value, REDUCE), out_type, FORMAT, VIA_F32, False),
                 mask=ok)
        if COUNT:
            count_ptr = counts + dst_off
            tl.store(count_ptr, tl.load(count_ptr, mask=ok) + 1, mask=ok)
        t += 1


@triton.jit
def divide_by_counts(dst, counts, n, extra, FLOOR: tl.constexpr, COMPUTE: tl.constexpr, FORMAT: tl.constexpr,
                     VIA_F32: tl.constexpr, INDEX_64: tl.constexpr, BLOCK: tl.constexpr):
    """The mean of scatter_reduce: a contiguous ``dst`` divided by its hit counts plus ``extra``
    (1 when the element itself took part); elements nobody hit keep their value."""
    idx = program_elements(BLOCK, INDEX_64)
    valid = idx < n
    count = tl.load(counts + idx, mask=valid, other=0)
    divisor = count + extra
    hit = valid & (count > 0) & (divisor > 0)
    divisor = tl.where(hit, divisor, 1)
    value = decode(tl.load(dst + idx, mask=hit), FORMAT).to(COMPUTE)
    if FLOOR:
        d = divisor.to(COMPUTE)
        q = value // d
        # Triton's integer division truncates; ATen's mean of integers floors
        q = tl.where((q * d != value) & ((value < 0) != (d < 0)), q - 1, q)
    else:
        # IEEE-rounded: Triton's plain float32 division is approximate on NVIDIA GPUs
        q = ieee.div(value, divisor.to(COMPUTE))
    tl.store(dst + idx, encode(q, dst.dtype.element_ty, FORMAT, VIA_F32, False), mask=hit)


@triton.jit
def _nonzero_flags(src, idx, n, shape, strides, RANK: tl.constexpr):
    valid = idx < n
    return valid & (tl.load(src + strided_offset(idx, shape, strides, RANK), mask=valid, other=0) != 0)


@triton.jit
def nonzero_count(src, counts, n, shape, strides, RANK: tl.constexpr, INDEX_64: tl.constexpr,
                  BLOCK: tl.constexpr):
    """How many nonzero elements each block of the row-major order holds."""
    idx = program_elements(BLOCK, INDEX_64)
    flags = _nonzero_flags(src, idx, n, shape, strides, RANK)
    tl.store(counts + tl.program_id(0), tl.sum(flags.to(tl.int32), axis=0))


@triton.jit
def nonzero_write(src, counts, ends, out, n, shape, strides, RANK: tl.constexpr, INDEX_64: tl.constexpr,
                  BLOCK: tl.constexpr):
    """The coordinates of each nonzero element, row ``ends[block] - counts[block] + rank in block`` of
    ``out`` (int64, shape (count, RANK)), in row-major order (``ends``: the running sum of ``counts``)."""
    idx = program_elements(BLOCK, INDEX_64)
    flags = _nonzero_flags(src, idx, n, shape, strides, RANK)
    rank = tl.cumsum(flags.to(tl.int32), axis=0) - 1
    block = tl.program_id(0)
    start = tl.load(ends + block).to(tl.int64) - tl.load(counts + block).to(tl.int64)
    row = start + rank.to(tl.int64)
    rem = idx.to(tl.int64)
    for d in tl.static_range(RANK - 1, -1, -1):
        tl.store(out + row * RANK + d, rem % shape[d], mask=flags)
        rem = rem // shape[d]


@triton.jit
def remap_copy(out, src, n, shape, src_strides, shifts, FLIPS: tl.constexpr, RANK: tl.constexpr,
               INDEX_64: tl.constexpr, BLOCK: tl.constexpr):
    """A contiguous ``out`` whose element at c reads ``src`` at c with each dim d mapped: reversed
    where bit d of FLIPS is set, else moved back by ``shifts[d]`` (0 <= shift < extent) cyclically."""
    idx = program_elements(BLOCK, INDEX_64)
    valid = idx < n
    rem = idx
    src_off = idx * 0
    for d in tl.static_range(RANK - 1, -1, -1):
        coord = rem % shape[d]
        rem = rem // shape[d]
        if (FLIPS >> d) & 1:
            coord = shape[d] - 1 - coord
        else:
            coord = coord - shifts[d]
            coord = tl.where(coord < 0, coord + shape[d], coord)
        src_off += coord * src_strides[d]
    tl.store(out + idx, tl.load(src + src_off, mask=valid), mask=valid)


@triton.jit
def triangle(out, src, n, rows, cols, diagonal, batch_shape, src_batch_strides, src_row_stride, src_col_stride,
             BATCH_RANK: tl.constexpr, UPPER: tl.constexpr, INDEX_64: tl.constexpr, BLOCK: tl.constexpr):
    """A contiguous ``out`` holding ``src``'s lower (tril) or upper (triu) triangle, zeros elsewhere."""
    idx = program_elements(BLOCK, INDEX_64)
    valid = idx < n
    col = idx % cols
    row = (idx // cols) % rows
    src_off = row * src_row_stride + col * src_col_stride
    src_off += strided_offset(idx // cols // rows, batch_shape, src_batch_strides, BATCH_RANK)
    if UPPER:
        keep = col - row >= diagonal
    else:
        keep = col - row <= diagonal
    values = tl.load(src + src_off, mask=valid & keep, other=0)
    tl.store(out + idx, tl.where(keep, values, tl.zeros_like(values)), mask=valid)
