"""One pass of a discrete Fourier transform: every program transforms ROWS rows of one length held whole in
registers, as one or two stages of small dense DFTs (``ops/fft.py`` plans the passes and says why).

A row of length n1 * n2 is the tile t[j2, j1] = x[n2 * j1 + j2]; stage one multiplies it by the n1-point DFT
matrix along j1 (``tl.dot``), the twiddles w_n^(j2 k1) follow elementwise, and stage two multiplies by the
n2-point DFT matrix along j2, giving X[k1 + n1 * k2] (Cooley-Tukey's four steps, the transposes done by
the tile's permute and the store's addresses). A single stage (P2 == 1) is a direct DFT. Padded lanes
(each stage's extent rounded to the power of two P1 or P2) hold zeros and meet zero matrix entries.

Complex data is interleaved (real, imaginary) and reached through the component type: strides come in
components. A side's signal index i is the row's element index, or with IN_GROUPED / OUT_GROUPED
``row + element * inner_rows`` (the rows of a four-step's first pass are a signal's residues), and its
address ``base + i * stride``. Reads past ``in_count`` are zeros (padding), writes past ``out_count`` are
dropped (a one-sided spectrum). A Hermitian input reads X[i] for i <= signal_length / 2 and the
conjugate of X[signal_length - i] above. ``pre`` multiplies input element i by a table's entry i (a window, a
chirp); ``post`` multiplies output q of row r by the complex table's entry r * post_group_stride + q *
post_stride (a four-step's twiddles, or a chirp), and SCALED every output by the float whose bits are
``scale_bits`` (the norm).
"""
import triton
import triton.language as tl

from .common import strided_offset
from .matmul import PRECISION_BF16_PARTS, _parts_dot

# what a pass reads: real elements, complex ones, or the one-sided half of a Hermitian signal
INPUT_REAL = tl.constexpr(0)
INPUT_COMPLEX = tl.constexpr(1)
INPUT_HERMITIAN = tl.constexpr(2)
# what it writes: complex elements, or their real parts
OUTPUT_COMPLEX = tl.constexpr(0)
OUTPUT_REAL = tl.constexpr(1)
# the table ``pre`` multiplies input elements by: none, real entries (a window), complex ones (a chirp)
PRE_NONE = tl.constexpr(0)
PRE_REAL = tl.constexpr(1)
PRE_COMPLEX = tl.constexpr(2)


@triton.jit
def _product(a, b, acc, PRECISION: tl.constexpr, PARTS_IN_F32: tl.constexpr):
    """acc plus a @ b, exact to the data's type: float64 and IEEE float32 on the FMA units, float32 as the
    six products of its bfloat16 parts on a matrix unit (PARTS_IN_F32: the interpreter's form)."""
    if PRECISION == PRECISION_BF16_PARTS:
        return _parts_dot(a, b, acc, PARTS_IN_F32)
    else:
        return tl.dot(a, b, acc, input_precision=PRECISION, out_dtype=acc.dtype)


@triton.jit
def _complex_product(a_r, a_i, w, size, P: tl.constexpr, REAL_LEFT: tl.constexpr, REAL_ONLY: tl.constexpr,
                     PRECISION: tl.constexpr, PARTS_IN_F32: tl.constexpr):
    """(a_r + i a_i) @ (W_r + i W_i) for the P x P matrix W at ``w`` (real plane, then imaginary plane, each
    row-major at stride P); REAL_LEFT: a_i is zero; REAL_ONLY: only the real part is wanted (the imaginary
    part returned is a_i, unused)."""
    lanes = tl.arange(0, P)
    entries = w + lanes[:, None] * P + lanes[None, :]
    w_r = tl.load(entries)
    w_i = tl.load(entries + size)
    zero = tl.zeros(a_r.shape, a_r.dtype)
    out_r = _product(a_r, w_r, zero, PRECISION, PARTS_IN_F32)
    if not REAL_LEFT:
        out_r = _product(a_i, -w_i, out_r, PRECISION, PARTS_IN_F32)
    if REAL_ONLY:
        return out_r, a_i
    out_i = _product(a_r, w_i, zero, PRECISION, PARTS_IN_F32)
    if not REAL_LEFT:
        out_i = _product(a_i, w_r, out_i, PRECISION, PARTS_IN_F32)
    return out_r, out_i


@triton.jit
def _times(x_r, x_i, t_r, t_i):
    return x_r * t_r - x_i * t_i, x_r * t_i + x_i * t_r


@triton.jit
def fft_pass(src, dst, tables, pre, post, inner_rows, inner_blocks, n1, n2, signal_length, in_count, out_count,
             in_row_stride, in_stride, out_row_stride, out_stride, outer_shape, in_outer_strides, out_outer_strides,
             post_group_stride, post_stride, scale_bits,
             INPUT: tl.constexpr, OUTPUT: tl.constexpr, IN_GROUPED: tl.constexpr, OUT_GROUPED: tl.constexpr,
             PRE: tl.constexpr, POST: tl.constexpr, SCALED: tl.constexpr, OUTER_RANK: tl.constexpr, ROWS: tl.constexpr, P1: tl.constexpr,
             P2: tl.constexpr, PRECISION: tl.constexpr, PARTS_IN_F32: tl.constexpr, INDEX_64: tl.constexpr):
    """Rows ``inner_rows`` of each of the outer index's rows (a flat index over ``outer_shape``), ROWS at a
    time, each of length n1 * n2 (module docstring). ``tables`` holds the stage-one DFT matrix (P1 x P1,
    real plane then imaginary plane), the stage-two one (P2 x P2) and the twiddles (P2 x P1), zero past
    n1 and n2."""
    pid = tl.program_id(0)
    if INDEX_64:
        pid = pid.to(tl.int64)
    outer = pid // inner_blocks
    rows = (pid - outer * inner_blocks) * ROWS + tl.arange(0, ROWS)
    row = rows[:, None, None]
    row_ok = row < inner_rows

    # the input tile [ROWS, P2, P1]: element n2 * j1 + j2 of each row
    j2 = tl.arange(0, P2)[None, :, None]
    j1 = tl.arange(0, P1)[None, None, :]
    local = n2 * j1 + j2
    base = strided_offset(outer, outer_shape, in_outer_strides, OUTER_RANK)
    if IN_GROUPED:
        index = row + local * inner_rows
    else:
        index = local + row * 0
        base = base + row * in_row_stride
    ok = row_ok & (j1 < n1) & (j2 < n2)
    if INPUT == INPUT_HERMITIAN:
        mirrored = 2 * index > signal_length
        read = tl.where(mirrored, signal_length - index, index)
        ok = ok & (index < signal_length) & (read < in_count)
        address = src + base + read * in_stride
        x_r = tl.load(address, mask=ok, other=0.0)
        x_i = tl.load(address + 1, mask=ok, other=0.0)
        x_i = tl.where(mirrored, -x_i, x_i)
    else:
        ok = ok & (index < in_count)
        address = src + base + index * in_stride
        x_r = tl.load(address, mask=ok, other=0.0)
        if INPUT == INPUT_COMPLEX:
            x_i = tl.load(address + 1, mask=ok, other=0.0)
        else:
            x_i = tl.zeros(x_r.shape, x_r.dtype)
    if PRE == PRE_REAL:
        factor = tl.load(pre + index, mask=ok, other=0.0)
        x_r = x_r * factor
        x_i = x_i * factor
    elif PRE == PRE_COMPLEX:
        factor = pre + 2 * index
        x_r, x_i = _times(x_r, x_i, tl.load(factor, mask=ok, other=0.0), tl.load(factor + 1, mask=ok, other=0.0))

    # stage one along j1, then the twiddles and stage two along j2: d[r, k1, k2] = X[k1 + n1 * k2]
    b_r, b_i = _complex_product(tl.reshape(x_r, (ROWS * P2, P1)), tl.reshape(x_i, (ROWS * P2, P1)), tables,
                                P1 * P1, P1, INPUT == INPUT_REAL and PRE != PRE_COMPLEX,
                                P2 == 1 and OUTPUT == OUTPUT_REAL and not POST, PRECISION, PARTS_IN_F32)
    if P2 == 1:
        d_r = tl.reshape(b_r, (ROWS, P1, 1))
        d_i = tl.reshape(b_i, (ROWS, P1, 1))
    else:
        twiddles = tables + 2 * (P1 * P1 + P2 * P2) + tl.arange(0, P2)[:, None] * P1 + tl.arange(0, P1)[None, :]
        c_r, c_i = _times(tl.reshape(b_r, (ROWS, P2, P1)), tl.reshape(b_i, (ROWS, P2, P1)),
                          tl.load(twiddles)[None, :, :], tl.load(twiddles + P2 * P1)[None, :, :])
        d_r, d_i = _complex_product(tl.reshape(tl.permute(c_r, (0, 2, 1)), (ROWS * P1, P2)),
                                    tl.reshape(tl.permute(c_i, (0, 2, 1)), (ROWS * P1, P2)), tables + 2 * P1 * P1,
                                    P2 * P2, P2, False, OUTPUT == OUTPUT_REAL and not POST, PRECISION, PARTS_IN_F32)
        d_r = tl.reshape(d_r, (ROWS, P1, P2))
        d_i = tl.reshape(d_i, (ROWS, P1, P2))

    k1 = tl.arange(0, P1)[None, :, None]
    k2 = tl.arange(0, P2)[None, None, :]
    q = k1 + n1 * k2
    base = strided_offset(outer, outer_shape, out_outer_strides, OUTER_RANK)
    if OUT_GROUPED:
        index = row + q * inner_rows
    else:
        index = q + row * 0
        base = base + row * out_row_stride
    ok = row_ok & (k1 < n1) & (k2 < n2) & (index < out_count)
    if POST:
        factor = post + 2 * (row * post_group_stride + q * post_stride)
        d_r, d_i = _times(d_r, d_i, tl.load(factor, mask=ok, other=0.0), tl.load(factor + 1, mask=ok, other=0.0))
    if SCALED:
        if d_r.dtype == tl.float64:
            scale = tl.full((1, 1, 1), scale_bits, tl.int64).to(tl.float64, bitcast=True)
        else:
            scale = tl.full((1, 1, 1), scale_bits, tl.int32).to(tl.float32, bitcast=True)
        d_r = d_r * scale
        d_i = d_i * scale
    address = dst + base + index * out_stride
    tl.store(address, d_r, mask=ok)
    if OUTPUT == OUTPUT_COMPLEX:
        tl.store(address + 1, d_i, mask=ok)
