"""One pass of a discrete Fourier transform: every program transforms ROWS rows of one length held whole in
registers, in one of two forms (``ops/fft.py`` plans the passes, says why, and times the forms against each
other on a GPU): one or two stages of small dense DFTs, or for a power-of-two length radix-2 stages.

A row of length n1 * n2 is the tile t[j2, j1] = x[n2 * j1 + j2]; stage one multiplies it by the n1-point DFT
matrix along j1, the twiddles w_n^(j2 k1) follow elementwise, and stage two multiplies by the n2-point DFT
matrix along j2, giving X[k1 + n1 * k2] (Cooley-Tukey's four steps, the transposes done by the tile's permute
and the store's addresses). A single stage (P2 == 1) is a direct DFT. Padded lanes (each stage's extent
rounded to the power of two P1 or P2) hold zeros and meet zero matrix entries.

The radix form (RADIX_STAGES = log2 n > 0, the tile [ROWS, 1, n]) splits the row into real and imaginary
parts and runs Pease's constant-geometry radix-2 stages on them (``_radix2_stages``): about five operations
an element a stage instead of a dense stage's 4 P multiply-adds, paid for by a permute of the tile a stage;
its result is bit-reversed, which the store's addresses undo.

Complex values stay interleaved (real, imaginary) in a trailing axis of 2 from load to store, one vector
load or store a pair; a stage is one real product (``tl.dot``) of the tile's rows, [real, imaginary] pairs
side by side, by the DFT matrix written as a real one of twice the size (entry (2j + s, 2k + t) the real
part of w^(jk) where s = t, its imaginary part signed where not): a real input takes its even rows, a real
output its even columns. Strides count elements, complex or real. A side's signal index i is the row's
element index, or with IN_GROUPED / OUT_GROUPED
``row + element * inner_rows`` (the rows of a four-step's first pass are a signal's residues), and its
address ``base + i * stride``. Reads past ``in_count`` are zeros (padding), writes past ``out_count`` are
dropped (a one-sided spectrum). A Hermitian input reads X[i] for i <= signal_length / 2 and the
conjugate of X[signal_length - i] above. ``pre`` multiplies input element i by a table's entry i (a window, a
chirp); ``post`` multiplies output q of row r by the complex table's entry r * post_group_stride + q *
post_stride (a four-step's twiddles, or a chirp), and SCALED every output by the float whose bits are
``scale_bits`` (the norm).

FRAME (an stft's frames read straight from the unpadded signals): input element i of a frame is the
signal's position ``frame_start + i - frame_pad``, where ``frame_start`` is the frame's first position
(``in_outer_positions`` and ``in_row_position`` give it as the strides give the address, the element
strides of the frames' dims being 0), mapped into [0, source_length) as torch's center padding maps it
(reflected, replicated, wrapped, or zero outside: FRAME_ZEROS, also a frame that never leaves the signal);
the address is ``base + mapped position * in_stride``. Elements outside [window_start, window_start +
window_count) are zeros (a window shorter than the frame, centred), and ``pre`` holds the window's own
entries (entry i - window_start). The loads convert to the tables' type (the transform's).

``overlap_add`` is istft's end after its transform's pass: the frames windowed, summed and divided by the
window's squared envelope in one pass.
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
# how a pass reads an stft's frames from the unpadded signal (``fft_pass``): not at all (rows as they are), or
# the center padding's positions mapped as torch's pad modes map them
FRAME_NONE = tl.constexpr(0)
FRAME_ZEROS = tl.constexpr(1)
FRAME_REFLECT = tl.constexpr(2)
FRAME_REPLICATE = tl.constexpr(3)
FRAME_CIRCULAR = tl.constexpr(4)


@triton.jit
def _product(a, b, acc, PRECISION: tl.constexpr, PARTS_IN_F32: tl.constexpr):
    """acc plus a @ b, exact to the data's type: float64 and IEEE float32 on the FMA units, float32 as the
    six products of its bfloat16 parts on a matrix unit (PARTS_IN_F32: the interpreter's form)."""
    if PRECISION == PRECISION_BF16_PARTS:
        return _parts_dot(a, b, acc, PARTS_IN_F32)
    else:
        return tl.dot(a, b, acc, input_precision=PRECISION, out_dtype=acc.dtype)


@triton.jit
def _stage(a, w, P: tl.constexpr, REAL_IN: tl.constexpr, REAL_OUT: tl.constexpr, PRECISION: tl.constexpr,
           PARTS_IN_F32: tl.constexpr):
    """The rows of ``a`` (pairs side by side, or real values where REAL_IN) times the P-point DFT matrix,
    real-valued 2P x 2P and row-major at ``w``: the result's pairs (their real parts where REAL_OUT)."""
    rows = tl.arange(0, (2 - REAL_IN) * P) * (1 + REAL_IN)
    columns = tl.arange(0, (2 - REAL_OUT) * P) * (1 + REAL_OUT)
    matrix = tl.load(w + rows[:, None] * (2 * P) + columns[None, :])
    return _product(a, matrix, tl.zeros((a.shape[0], (2 - REAL_OUT) * P), a.dtype), PRECISION, PARTS_IN_F32)


@triton.jit
def _radix2_stages(x_r, x_i, twiddles, ROWS: tl.constexpr, N: tl.constexpr, STAGES: tl.constexpr):
    """The N-point DFTs (N = 2^STAGES) of rows [ROWS, N] given as real and imaginary parts, by Pease's
    constant-geometry radix-2 decimation in frequency: each stage pairs element p of the row's first half
    with element p of its second (a reshape, a permute and a split), and joins the butterflies' sum and
    twiddled difference as adjacent elements, so every stage has the same shape. Stage s twiddles by
    w_N^e, e = p with its low s bits cleared (``twiddles``: w_N^e for e < N / 2, pairs). Element f of the
    result is X[bit reversal of f]."""
    HALF: tl.constexpr = N // 2
    p = tl.arange(0, HALF)
    for s in tl.static_range(STAGES):
        a_r, b_r = tl.split(tl.permute(tl.reshape(x_r, (ROWS, 2, HALF)), (0, 2, 1)))
        a_i, b_i = tl.split(tl.permute(tl.reshape(x_i, (ROWS, 2, HALF)), (0, 2, 1)))
        e = (p >> s) << s
        w_r = tl.load(twiddles + 2 * e)[None, :]
        w_i = tl.load(twiddles + 2 * e + 1)[None, :]
        d_r = a_r - b_r
        d_i = a_i - b_i
        x_r = tl.reshape(tl.join(a_r + b_r, d_r * w_r - d_i * w_i), (ROWS, N))
        x_i = tl.reshape(tl.join(a_i + b_i, d_r * w_i + d_i * w_r), (ROWS, N))
    return x_r, x_i


@triton.jit
def _bit_reversed(k, BITS: tl.constexpr):
    """k with its low BITS bits in reverse order."""
    r = k * 0
    for b in tl.static_range(BITS):
        r = r | (((k >> b) & 1) << (BITS - 1 - b))
    return r


@triton.jit
def _times(pairs, t_r, t_i):
    """Complex pairs (a trailing axis of 2) times t_r + i t_i."""
    x_r, x_i = tl.split(pairs)
    return tl.join(x_r * t_r - x_i * t_i, x_r * t_i + x_i * t_r)


@triton.jit
def _pair_offsets(offset):
    """Component offsets of the complex elements at element offsets ``offset`` (a 3-d tile): a trailing
    axis of the two parts."""
    return (2 * offset)[:, :, :, None] + tl.arange(0, 2)[None, None, None, :]


@triton.jit
def _rows_side(outer, row, local, inner_rows, outer_shape, outer_strides, row_stride, OUTER_RANK: tl.constexpr,
               GROUPED: tl.constexpr):
    """(base offset, signal index) of elements ``local`` of rows ``row`` of the outer row ``outer`` on one
    side: the index grouped with the row, or the row's base moved by its stride."""
    base = strided_offset(outer, outer_shape, outer_strides, OUTER_RANK)
    if GROUPED:
        return base, row + local * inner_rows
    else:
        return base + row * row_stride, local + row * 0


@triton.jit
def _signal_position(position, length, FRAME: tl.constexpr):
    """A padded signal's position as a position of the signal of ``length`` (``fft_pass``'s FRAME): outside
    [0, length) reflected about the end elements, clamped to them, or wrapped; FRAME_ZEROS leaves it (the
    caller zeros what falls outside)."""
    if FRAME == FRAME_REFLECT:
        position = tl.where(position < 0, -position, position)
        position = tl.where(position >= length, 2 * (length - 1) - position, position)
    elif FRAME == FRAME_REPLICATE:
        position = tl.minimum(tl.maximum(position, 0), length - 1)
    elif FRAME == FRAME_CIRCULAR:
        position = position % length
        position = tl.where(position < 0, position + length, position)
    return position


@triton.jit
def fft_pass(src, dst, tables, pre, post, inner_rows, inner_blocks, n1, n2, signal_length, in_count, out_count,
             in_row_stride, in_stride, out_row_stride, out_stride, outer_shape, in_outer_strides, out_outer_strides,
             post_group_stride, post_stride, scale_bits, in_outer_positions, in_row_position, frame_pad,
             source_length, window_start, window_count,
             INPUT: tl.constexpr, OUTPUT: tl.constexpr, IN_GROUPED: tl.constexpr, OUT_GROUPED: tl.constexpr,
             PRE: tl.constexpr, POST: tl.constexpr, FRAME: tl.constexpr, SCALED: tl.constexpr, OUTER_RANK: tl.constexpr,
             ROWS: tl.constexpr, P1: tl.constexpr, P2: tl.constexpr, PRECISION: tl.constexpr,
             PARTS_IN_F32: tl.constexpr, INDEX_64: tl.constexpr, RADIX_STAGES: tl.constexpr):
    """Rows ``inner_rows`` of each of the outer index's rows (a flat index over ``outer_shape``), ROWS at a
    time, each of length n1 * n2 (module docstring). ``tables`` holds the stage-one DFT matrix (2 P1 x 2 P1),
    the stage-two one (2 P2 x 2 P2) and the twiddles (P2 x P1 pairs), zero past n1 and n2. RADIX_STAGES > 0:
    the radix form instead, a row of n1 = P1 = 2^RADIX_STAGES (n2 = P2 = 1) by radix-2 stages, ``tables``
    their twiddles (``_radix2_stages``)."""
    pid = tl.program_id(0)
    if INDEX_64:
        pid = pid.to(tl.int64)
    outer = pid // inner_blocks
    rows = (pid - outer * inner_blocks) * ROWS + tl.arange(0, ROWS)
    row = rows[:, None, None]
    row_ok = row < inner_rows

    # the input tile [ROWS, P2, P1] (and its pairs' axis): element n2 * j1 + j2 of each row
    j2 = tl.arange(0, P2)[None, :, None]
    j1 = tl.arange(0, P1)[None, None, :]
    base, index = _rows_side(outer, row, n2 * j1 + j2, inner_rows, outer_shape, in_outer_strides, in_row_stride,
                             OUTER_RANK, IN_GROUPED)
    ok = row_ok & (j1 < n1) & (j2 < n2)
    pre_index = index
    read_index = index
    if FRAME != FRAME_NONE:
        start = strided_offset(outer, outer_shape, in_outer_positions, OUTER_RANK)
        if not IN_GROUPED:
            start += row * in_row_position
        position = _signal_position(start + index - frame_pad, source_length, FRAME)
        ok = ok & (index >= window_start) & (index < window_start + window_count)
        if FRAME == FRAME_ZEROS:
            ok = ok & (position >= 0) & (position < source_length)
        read_index = position
        pre_index = index - window_start
    if INPUT == INPUT_HERMITIAN:
        mirrored = 2 * index > signal_length
        read = tl.where(mirrored, signal_length - index, index)
        ok = ok & (index < signal_length) & (read < in_count)
        x = tl.load(src + _pair_offsets(base + read * in_stride), mask=ok[:, :, :, None], other=0.0)
        conjugated = mirrored[:, :, :, None] & (tl.arange(0, 2)[None, None, None, :] == 1)
        x = tl.where(conjugated, -x, x)
    else:
        ok = ok & (index < in_count)
        if INPUT == INPUT_COMPLEX:
            x = tl.load(src + _pair_offsets(base + read_index * in_stride), mask=ok[:, :, :, None], other=0.0)
        else:
            x = tl.load(src + base + read_index * in_stride, mask=ok, other=0.0)
        if FRAME != FRAME_NONE:
            x = x.to(tables.dtype.element_ty)
    if PRE == PRE_REAL:
        factor = tl.load(pre + pre_index, mask=ok, other=0.0)
        if FRAME != FRAME_NONE:
            factor = factor.to(tables.dtype.element_ty)
        x = x * factor[:, :, :, None] if INPUT != INPUT_REAL else x * factor
    elif PRE == PRE_COMPLEX:
        factor_r, factor_i = tl.split(tl.load(pre + _pair_offsets(pre_index), mask=ok[:, :, :, None], other=0.0))
        if FRAME != FRAME_NONE:
            factor_r = factor_r.to(tables.dtype.element_ty)
            factor_i = factor_i.to(tables.dtype.element_ty)
        if INPUT == INPUT_REAL:
            x = tl.join(x * factor_r, x * factor_i)
        else:
            x = _times(x, factor_r, factor_i)
    real_input: tl.constexpr = INPUT == INPUT_REAL and PRE != PRE_COMPLEX
    real_output: tl.constexpr = OUTPUT == OUTPUT_REAL and not POST

    if RADIX_STAGES > 0:
        # the radix form: the row as real and imaginary parts, [ROWS, P1], its result bit-reversed
        if real_input:
            x_r = tl.reshape(x, (ROWS, P1))
            x_i = tl.zeros((ROWS, P1), x_r.dtype)
        else:
            x_r, x_i = tl.split(tl.reshape(x, (ROWS, P1, 2)))
        x_r, x_i = _radix2_stages(x_r, x_i, tables, ROWS, P1, RADIX_STAGES)
        if real_output:
            d = tl.reshape(x_r, (ROWS, P1, 1))
        else:
            d = tl.reshape(tl.join(x_r, x_i), (ROWS, P1, 1, 2))
    else:
        # stage one along j1, then the twiddles and stage two along j2: d[r, k1, k2] = X[k1 + n1 * k2]
        b = _stage(tl.reshape(x, (ROWS * P2, (2 - real_input) * P1)), tables, P1, real_input, P2 == 1 and real_output,
                   PRECISION, PARTS_IN_F32)
        if P2 == 1:
            d = tl.reshape(b, (ROWS, P1, 1) if real_output else (ROWS, P1, 1, 2))
        else:
            twiddles = tl.load(tables + 4 * (P1 * P1 + P2 * P2) + 2 * (tl.arange(0, P2)[:, None, None] * P1 +
                                                                   tl.arange(0, P1)[None, :, None])
                               + tl.arange(0, 2)[None, None, :])
            twiddle_r, twiddle_i = tl.split(twiddles)
            c = _times(tl.reshape(b, (ROWS, P2, P1, 2)), twiddle_r[None, :, :], twiddle_i[None, :, :])
            d = _stage(tl.reshape(tl.permute(c, (0, 2, 1, 3)), (ROWS * P1, 2 * P2)), tables + 4 * P1 * P1, P2, False,
                       real_output, PRECISION, PARTS_IN_F32)
            d = tl.reshape(d, (ROWS, P1, P2) if real_output else (ROWS, P1, P2, 2))

    k1 = tl.arange(0, P1)
    if RADIX_STAGES > 0:
        k1 = _bit_reversed(k1, RADIX_STAGES)
    k1 = k1[None, :, None]
    k2 = tl.arange(0, P2)[None, None, :]
    q = k1 + n1 * k2
    base, index = _rows_side(outer, row, q, inner_rows, outer_shape, out_outer_strides, out_row_stride, OUTER_RANK,
                             OUT_GROUPED)
    ok = row_ok & (k1 < n1) & (k2 < n2) & (index < out_count)
    if POST:
        factor = tl.load(post + _pair_offsets(row * post_group_stride + q * post_stride), mask=ok[:, :, :, None],
                         other=0.0)
        factor_r, factor_i = tl.split(factor)
        d = _times(d, factor_r, factor_i)
    if SCALED:
        if d.dtype == tl.float64:
            d = d * tl.full((1,), scale_bits, tl.int64).to(tl.float64, bitcast=True)
        else:
            d = d * tl.full((1,), scale_bits, tl.int32).to(tl.float32, bitcast=True)
    if OUTPUT == OUTPUT_COMPLEX:
        tl.store(dst + _pair_offsets(base + index * out_stride), d, mask=ok[:, :, :, None])
    elif POST:
        tl.store(dst + base + index * out_stride, tl.split(d)[0], mask=ok)
    else:
        tl.store(dst + base + index * out_stride, d, mask=ok)


@triton.jit
def overlap_add(frames, window, out, lowest, count, n_fft, hop, start, kept, out_length, window_start, window_count,
                frames_batch_stride, out_batch_stride, blocks,
                COMPLEX: tl.constexpr, WINDOW: tl.constexpr, OVERLAPS: tl.constexpr, BLOCK: tl.constexpr,
                INDEX_64: tl.constexpr):
    """istft's end in one pass: BLOCK output positions t of one signal (program ``pid``: signal pid // blocks)
    are the sum, over the frames f covering position p = start + t, of frame element j = p - f * hop times
    the window's entry (``window`` holds entries j - window_start for j in [window_start, window_start +
    window_count), zero elsewhere; WINDOW: none (ones there), real (PRE_REAL) or complex (PRE_COMPLEX)),
    divided by the sum of the window's squares there (the envelope, complex for a complex window); zeros from
    ``kept`` on. ``frames`` are (signal, frame, n_fft) rows; OVERLAPS is the most frames a position meets.
    ``lowest[pid]`` gets the least |envelope| among the program's kept positions (the caller checks it as
    torch does)."""
    pid = tl.program_id(0)
    if INDEX_64:
        pid = pid.to(tl.int64)
    signal_index = pid // blocks
    t = (pid - signal_index * blocks) * BLOCK + tl.arange(0, BLOCK)
    keep = t < kept
    p = start + t
    dtype = out.dtype.element_ty
    total_r = tl.zeros((BLOCK,), dtype)
    total_i = tl.zeros((BLOCK,), dtype)
    envelope_r = tl.zeros((BLOCK,), dtype)
    envelope_i = tl.zeros((BLOCK,), dtype)
    for k in tl.static_range(OVERLAPS):
        f = p // hop - k
        j = p - f * hop
        ok = keep & (f >= 0) & (f < count) & (j < n_fft) & (j >= window_start) & (j < window_start + window_count)
        w_i = tl.zeros((BLOCK,), dtype)
        if WINDOW == PRE_REAL:
            w_r = tl.load(window + j - window_start, mask=ok, other=0.0).to(dtype)
        elif WINDOW == PRE_COMPLEX:
            w_r = tl.load(window + 2 * (j - window_start), mask=ok, other=0.0).to(dtype)
            w_i = tl.load(window + 2 * (j - window_start) + 1, mask=ok, other=0.0).to(dtype)
        else:
            w_r = tl.where(ok, 1.0, 0.0).to(dtype)
        offset = signal_index * frames_batch_stride + f * n_fft + j
        if COMPLEX:
            x_r = tl.load(frames + 2 * offset, mask=ok, other=0.0).to(dtype)
            x_i = tl.load(frames + 2 * offset + 1, mask=ok, other=0.0).to(dtype)
        else:
            x_r = tl.load(frames + offset, mask=ok, other=0.0).to(dtype)
            x_i = tl.zeros((BLOCK,), dtype)
        total_r += x_r * w_r - x_i * w_i
        total_i += x_r * w_i + x_i * w_r
        envelope_r += w_r * w_r - w_i * w_i
        envelope_i += 2 * w_r * w_i
    magnitude = tl.sqrt(envelope_r * envelope_r + envelope_i * envelope_i)
    tl.store(lowest + pid, tl.min(tl.where(keep, magnitude, float("inf")), axis=0))
    # the quotient total / envelope (complex only for a complex window); zeros past ``kept``
    if WINDOW == PRE_COMPLEX:
        divisor = tl.where(keep, envelope_r * envelope_r + envelope_i * envelope_i, 1.0)
        y_r = tl.where(keep, (total_r * envelope_r + total_i * envelope_i) / divisor, 0.0)
        y_i = tl.where(keep, (total_i * envelope_r - total_r * envelope_i) / divisor, 0.0)
    else:
        divisor = tl.where(keep, envelope_r, 1.0)
        y_r = tl.where(keep, total_r / divisor, 0.0)
        y_i = tl.where(keep, total_i / divisor, 0.0)
    written = t < out_length
    if COMPLEX:
        target = out + 2 * (signal_index * out_batch_stride + t)
        tl.store(target, y_r, mask=written)
        tl.store(target + 1, y_i, mask=written)
    else:
        tl.store(out + signal_index * out_batch_stride + t, y_r, mask=written)
