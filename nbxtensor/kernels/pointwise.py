"""The pointwise kernels: one strided, broadcasting N-ary skeleton (``pointwise``), its tiled form
(``pointwise_tiled``) and its complex form (``pointwise_complex``). The bodies live in
``pointwise_bodies.py`` (real) and ``pointwise_complex.py``, the codes the kernels and the host share in
``pointwise_codes.py``; this module is the family's one namespace (``ops/pointwise_table.py`` names every
body as an attribute of it).

How the family is generated. Every op of ``ops/pointwise_table.py`` names a body; the skeleton receives
that body as a ``tl.constexpr`` argument (Triton 3 accepts jitted functions as constexprs and keys its
compile cache on their source hash). A launch therefore compiles exactly the one body it uses, inlined into
the shared skeleton: no source generation, no giant kernel with a branch per op, and compile time and code
size per specialisation are those of a hand-written kernel.

The skeleton reads up to four operands, each absent, a strided tensor (any strides, stride 0 for a
broadcast dim or a 0-d device tensor) or a scalar passed by its bits as a kernel argument (no host to
device copy), converts them to the compute type and hands them to the body; the result is converted to
the output dtype on the store with the copy kernel's ``_encode``, so every op rounds as ``copy_`` does.
Half-precision operands are computed in float32 and rounded once on the store, as ATen does.

``pointwise_complex`` is the same skeleton for complex64/complex128: operands are read as (re, im)
pairs (a real operand has im 0), and its bodies return a pair, or the real part only for ops whose
result is real (abs, angle).
"""
import triton
import triton.language as tl

from .common import program_elements
from .formats import decode, encode
from .dependent_launch import await_predecessors
from .pointwise_bodies import *  # noqa: F401,F403  (the bodies and their mode codes, by name, for the table)
from .pointwise_codes import (CAT_BOOL, CAT_FLOAT32, CAT_FLOAT64, CAT_INT, CAT_UINT,  # noqa: F401
                              OPERAND_ABSENT, OPERAND_COMPLEX_TENSOR, OPERAND_SCALAR, OPERAND_TENSOR)
from .pointwise_complex import *  # noqa: F401,F403


# ---- the skeleton -----------------------------------------------------------------------------

@triton.jit
def _operand(ptr, off, bits, mask, KIND: tl.constexpr, FORMAT: tl.constexpr, BITS_TYPE: tl.constexpr,
             COMPUTE: tl.constexpr, CATEGORY: tl.constexpr, BLOCK: tl.constexpr):
    """One operand in the compute type: loaded through its strides, or a scalar made from its bits. Lanes
    past the end read 0, so that bodies reducing over their block (a loop's trip count) see no garbage."""
    if KIND == OPERAND_TENSOR:
        return decode(tl.load(ptr + off, mask=mask, other=0), FORMAT).to(COMPUTE)
    else:
        raw = tl.full([BLOCK], bits, tl.int64).to(BITS_TYPE)
        if CATEGORY == CAT_BOOL:
            return raw != 0
        else:
            return raw.to(COMPUTE, bitcast=True)


@triton.jit
def _offsets(idx, shape, out_strides, strides0, strides1, strides2, strides3,
             K0: tl.constexpr, K1: tl.constexpr, K2: tl.constexpr, K3: tl.constexpr, RANK: tl.constexpr):
    """Element offsets of the output and of each tensor operand for the row-major index ``idx``. The
    outermost dim needs no modulo: ``idx < n`` bounds its coordinate already."""
    out_off = idx * 0
    off0 = idx * 0
    off1 = idx * 0
    off2 = idx * 0
    off3 = idx * 0
    rem = idx
    for d in tl.static_range(RANK - 1, -1, -1):
        if d == 0:
            coord = rem
        else:
            coord = rem % shape[d]
            rem = rem // shape[d]
        out_off += coord * out_strides[d]
        if K0 == OPERAND_TENSOR or K0 == OPERAND_COMPLEX_TENSOR:
            off0 += coord * strides0[d]
        if K1 == OPERAND_TENSOR or K1 == OPERAND_COMPLEX_TENSOR:
            off1 += coord * strides1[d]
        if K2 == OPERAND_TENSOR or K2 == OPERAND_COMPLEX_TENSOR:
            off2 += coord * strides2[d]
        if K3 == OPERAND_TENSOR or K3 == OPERAND_COMPLEX_TENSOR:
            off3 += coord * strides3[d]
    return out_off, off0, off1, off2, off3


@triton.jit
def pointwise(out, n, shape, out_strides,
              x0, x1, x2, x3, strides0, strides1, strides2, strides3, bits0, bits1, bits2, bits3,
              BODY: tl.constexpr, MODE: tl.constexpr, COMPUTE: tl.constexpr, CATEGORY: tl.constexpr,
              K0: tl.constexpr, K1: tl.constexpr, K2: tl.constexpr, K3: tl.constexpr,
              F0: tl.constexpr, F1: tl.constexpr, F2: tl.constexpr, F3: tl.constexpr,
              BITS_TYPE: tl.constexpr, OUT_FORMAT: tl.constexpr, VIA_F32: tl.constexpr,
              FLOAT_TO_INT: tl.constexpr, RANK: tl.constexpr, INDEX_64: tl.constexpr, BLOCK: tl.constexpr,
              PDL: tl.constexpr):
    await_predecessors(PDL)
    idx = program_elements(BLOCK, INDEX_64)
    mask = idx < n
    out_off, off0, off1, off2, off3 = _offsets(idx, shape, out_strides, strides0, strides1, strides2, strides3,
                                               K0, K1, K2, K3, RANK)
    a = _operand(x0, off0, bits0, mask, K0, F0, BITS_TYPE, COMPUTE, CATEGORY, BLOCK)
    if K1 == OPERAND_ABSENT:
        b = a
    else:
        b = _operand(x1, off1, bits1, mask, K1, F1, BITS_TYPE, COMPUTE, CATEGORY, BLOCK)
    if K2 == OPERAND_ABSENT:
        c = a
    else:
        c = _operand(x2, off2, bits2, mask, K2, F2, BITS_TYPE, COMPUTE, CATEGORY, BLOCK)
    if K3 == OPERAND_ABSENT:
        d = a
    else:
        d = _operand(x3, off3, bits3, mask, K3, F3, BITS_TYPE, COMPUTE, CATEGORY, BLOCK)
    y = BODY(a, b, c, d, MODE, CATEGORY)
    tl.store(out + out_off, encode(y, out.dtype.element_ty, OUT_FORMAT, VIA_F32, FLOAT_TO_INT), mask=mask)


@triton.jit
def _tile_operand(ptr, off, bits, mask, KIND: tl.constexpr, FORMAT: tl.constexpr, BITS_TYPE: tl.constexpr,
                  COMPUTE: tl.constexpr, CATEGORY: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """``_operand`` for a [BLOCK_M, BLOCK_N] tile."""
    if KIND == OPERAND_TENSOR:
        return decode(tl.load(ptr + off, mask=mask, other=0), FORMAT).to(COMPUTE)
    else:
        raw = tl.full([BLOCK_M, BLOCK_N], bits, tl.int64).to(BITS_TYPE)
        if CATEGORY == CAT_BOOL:
            return raw != 0
        else:
            return raw.to(COMPUTE, bitcast=True)


@triton.jit
def _tile_offset(base, rows, cols, strides, RANK: tl.constexpr):
    return base + rows[:, None] * strides[RANK - 2] + cols[None, :] * strides[RANK - 1]


@triton.jit
def pointwise_tiled(out, n, shape, out_strides,
                    x0, x1, x2, x3, strides0, strides1, strides2, strides3, bits0, bits1, bits2, bits3,
                    BODY: tl.constexpr, MODE: tl.constexpr, COMPUTE: tl.constexpr, CATEGORY: tl.constexpr,
                    K0: tl.constexpr, K1: tl.constexpr, K2: tl.constexpr, K3: tl.constexpr,
                    F0: tl.constexpr, F1: tl.constexpr, F2: tl.constexpr, F3: tl.constexpr,
                    BITS_TYPE: tl.constexpr, OUT_FORMAT: tl.constexpr, VIA_F32: tl.constexpr,
                    FLOAT_TO_INT: tl.constexpr, RANK: tl.constexpr, INDEX_64: tl.constexpr,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """``pointwise`` over [BLOCK_M, BLOCK_N] tiles of the last two dims, for operands whose fastest
    dims differ (``a + b.T``): each load and the store index the same tile, and the compiler lays each
    out along its own contiguous dim, converting between them on chip, so no side reads or writes
    with a stride. Axis 1 of the grid runs over the dims before the last two."""
    tiles_n = tl.cdiv(shape[RANK - 1], BLOCK_N)
    pid = tl.program_id(0)
    batch = tl.program_id(1)
    rows = (pid // tiles_n) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = (pid % tiles_n) * BLOCK_N + tl.arange(0, BLOCK_N)
    if INDEX_64:
        rows = rows.to(tl.int64)
        cols = cols.to(tl.int64)
        batch = batch.to(tl.int64)
    out_base = batch * 0
    base0 = batch * 0
    base1 = batch * 0
    base2 = batch * 0
    base3 = batch * 0
    rem = batch
    for d in tl.static_range(RANK - 3, -1, -1):
        coord = rem % shape[d]
        rem = rem // shape[d]
        out_base += coord * out_strides[d]
        base0 += coord * strides0[d]
        base1 += coord * strides1[d]
        base2 += coord * strides2[d]
        base3 += coord * strides3[d]
    mask = (rows[:, None] < shape[RANK - 2]) & (cols[None, :] < shape[RANK - 1])
    out_off = _tile_offset(out_base, rows, cols, out_strides, RANK)
    a = _tile_operand(x0, _tile_offset(base0, rows, cols, strides0, RANK), bits0, mask, K0, F0, BITS_TYPE,
                      COMPUTE, CATEGORY, BLOCK_M, BLOCK_N)
    if K1 == OPERAND_ABSENT:
        b = a
    else:
        b = _tile_operand(x1, _tile_offset(base1, rows, cols, strides1, RANK), bits1, mask, K1, F1, BITS_TYPE,
                          COMPUTE, CATEGORY, BLOCK_M, BLOCK_N)
    if K2 == OPERAND_ABSENT:
        c = a
    else:
        c = _tile_operand(x2, _tile_offset(base2, rows, cols, strides2, RANK), bits2, mask, K2, F2, BITS_TYPE,
                          COMPUTE, CATEGORY, BLOCK_M, BLOCK_N)
    if K3 == OPERAND_ABSENT:
        d = a
    else:
        d = _tile_operand(x3, _tile_offset(base3, rows, cols, strides3, RANK), bits3, mask, K3, F3, BITS_TYPE,
                          COMPUTE, CATEGORY, BLOCK_M, BLOCK_N)
    y = BODY(a, b, c, d, MODE, CATEGORY)
    tl.store(out + out_off, encode(y, out.dtype.element_ty, OUT_FORMAT, VIA_F32, FLOAT_TO_INT), mask=mask)


@triton.jit
def _complex_operand(ptr, off, re_bits, im_bits, mask, KIND: tl.constexpr, COMPUTE: tl.constexpr,
                     BITS_TYPE: tl.constexpr, BLOCK: tl.constexpr):
    """(re, im) of one operand: a complex tensor's pair, a real tensor with im 0, or a scalar."""
    if KIND == OPERAND_COMPLEX_TENSOR:
        return tl.load(ptr + off, mask=mask).to(COMPUTE), tl.load(ptr + off + 1, mask=mask).to(COMPUTE)
    elif KIND == OPERAND_TENSOR:
        re = tl.load(ptr + off, mask=mask).to(COMPUTE)
        return re, tl.zeros_like(re)
    else:
        re = tl.full([BLOCK], re_bits, tl.int64).to(BITS_TYPE).to(COMPUTE, bitcast=True)
        im = tl.full([BLOCK], im_bits, tl.int64).to(BITS_TYPE).to(COMPUTE, bitcast=True)
        return re, im


@triton.jit
def pointwise_complex(out, n, shape, out_strides, x0, x1, strides0, strides1, bits0, bits1, bits2, bits3,
                      BODY: tl.constexpr, MODE: tl.constexpr, COMPUTE: tl.constexpr,
                      K0: tl.constexpr, K1: tl.constexpr, BITS_TYPE: tl.constexpr, COMPLEX_OUT: tl.constexpr,
                      RANK: tl.constexpr, INDEX_64: tl.constexpr, BLOCK: tl.constexpr):
    """Complex operands and output are given as their real components (``view_as_real`` then select
    0): strides count components, and each imaginary part sits one element after its real part."""
    idx = program_elements(BLOCK, INDEX_64)
    mask = idx < n
    out_off, off0, off1, _, _ = _offsets(idx, shape, out_strides, strides0, strides1, strides0, strides1,
                                         K0, K1, OPERAND_ABSENT, OPERAND_ABSENT, RANK)
    ar, ai = _complex_operand(x0, off0, bits0, bits1, mask, K0, COMPUTE, BITS_TYPE, BLOCK)
    if K1 == OPERAND_ABSENT:
        br = ar
        bi = ai
    else:
        br, bi = _complex_operand(x1, off1, bits2, bits3, mask, K1, COMPUTE, BITS_TYPE, BLOCK)
    re, im = BODY(ar, ai, br, bi, MODE)
    out_type = out.dtype.element_ty
    tl.store(out + out_off, re.to(out_type), mask=mask)
    if COMPLEX_OUT:
        tl.store(out + out_off + 1, im.to(out_type), mask=mask)
