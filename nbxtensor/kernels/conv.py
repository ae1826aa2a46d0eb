"""Convolution kernels over N-d (as 3-d) inputs read through their strides: an implicit GEMM for the
matrix units and a direct convolution for depthwise and small-channel groups.

The implicit GEMM's rows are output positions (batch x output spatial), its columns output channels of
one group; the reduction runs over kernel positions x input channels of that group, input tiles
gathered per kernel position with boundary masks (padding, dilation, stride), so no im2col matrix is
built. Kernel positions are constexpr: unrolled when few, each one's channel loop a pipelined ``for``;
with ``FLAT_K`` (fewer channels than a K tile holds) one K tile spans channels and kernel positions
together, so the tile is not mostly masked. The direct kernel multiplies on the vector units: a program
takes a tile of output positions x output channels and sums its few input channels over the unrolled
window. Transposed forms gather, for each output position, the input positions whose stride lands on it.

With ``STEPPED`` the reduction is one pipelined loop over its steps, each one K tile at one kernel position
(or one flat K tile), so that loads of the next kernel position overlap this one's products where a group's
channels fill one K tile or few. With ``SPLIT`` too (few output tiles for the device's multiprocessors) the
steps are shared out among programs along the grid's third axis: each writes its float32 partial tile to
a workspace, and ``conv_split_sum`` adds the partials in split order, so the bits do not depend on which
program finishes first.

``conv_direct_planes`` is the direct kernel by output planes, for inputs whose columns are adjacent in
memory; ``conv_depthwise_channels_inner`` the depthwise one (a channel a group) for inputs whose channels
are (channels-last): a program takes a tile of rows x columns of one output plane times a block of
channels, channels innermost, so that every tap is one vector load a position. ``conv_stage_channels_inner``
copies an NCHW operand channels-innermost for the kernels' staged settings: 16-bit tiles read in place
from NCHW are gathered element by element, which the compiler cannot turn into asynchronous copies, so the
implicit GEMM's loop is not pipelined; staged, its tiles are (and a depthwise weight, staged, gives each
tap's channel block as one run). Every kernel reads the bias through its stride ``b_s``.

With ``NORM`` the epilogue also applies an inference batch norm and an activation (``norm_epilogue.ACT_*``)
per output channel, on the float32 accumulator before its one rounding to the output's dtype
(``norm_epilogue.py``, shared with the matrix products).
"""
import triton
import triton.language as tl

from .formats import decode, encode
from .norm_epilogue import activated, norm_parameters

# a direct convolution's group channels unrolled up to this many (every small group's), a loop past them
DIRECT_UNROLLED_CHANNELS = tl.constexpr(64)


@triton.jit
def _source_index(o, k, stride, pad, dil, size, TRANSPOSED: tl.constexpr):
    """Input index read by output index ``o`` at kernel index ``k``, and whether it exists."""
    if TRANSPOSED:
        t = o + pad - k * dil
        i = t // stride
        ok = (t >= 0) & (i * stride == t) & (i < size)
    else:
        i = o * stride - pad + k * dil
        ok = (i >= 0) & (i < size)
    return i, ok


@triton.jit
def _output_position(rm, OD, OH, OW):
    """(batch, depth, row, column) of flat output positions ``rm``, laid out batch-major."""
    rest = rm // OW
    return rest // (OH * OD), (rest // OH) % OD, rest % OH, rm % OW


@triton.jit
def _channel_epilogue(acc, c, c_ok, bias, b_s, mean, var, norm_w, norm_b, eps, HAS_BIAS: tl.constexpr,
                      BIAS_FORMAT: tl.constexpr, NORM: tl.constexpr, NORM_FORMAT: tl.constexpr,
                      ACTIVATION: tl.constexpr, ROWS: tl.constexpr):
    """The accumulator (positions x channels ``c``; float32, float64 for float64 operands, which take no norm)
    with the bias, the norm and activation, before its one rounding. ROWS (a SLIDING column's rows): the
    per-channel vectors are loaded as whole ROWS x BLOCK_C tiles, in the accumulator's layout (a row of
    channels alone would be spread over every lane and moved through shared memory)."""
    if ROWS:
        c = c[None, :] + tl.zeros((ROWS, 1), dtype=c.dtype)
        c_ok = tl.broadcast_to(c_ok[None, :], c.shape)
    if HAS_BIAS:
        terms = decode(tl.load(bias + c * b_s, mask=c_ok, other=0), BIAS_FORMAT).to(acc.dtype)
        acc = acc + (terms if ROWS else terms[None, :])
    if NORM:
        n_mean, n_scale, n_shift = norm_parameters(c, c_ok, mean, var, norm_w, norm_b, eps, NORM_FORMAT)
        if ROWS:
            acc = activated((acc - n_mean) * n_scale + n_shift, ACTIVATION)
        else:
            acc = activated((acc - n_mean[None, :]) * n_scale[None, :] + n_shift[None, :], ACTIVATION)
    return acc


@triton.jit
def _store_positions(out, acc, nb, od, oh, ow, c, rows_ok, c_ok, o_sn, o_sc, o_sd, o_sh, o_sw,
                     DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr):
    """The float32 accumulator (output positions (nb, od, oh, ow) x channels ``c``) rounded once to the type
    of ``out``'s elements and stored where ``rows_ok`` and ``c_ok`` hold."""
    value = encode(acc, out.dtype.element_ty, DST_FORMAT, VIA_F32, False)
    o_off = nb * o_sn + od * o_sd + oh * o_sh + ow * o_sw
    tl.store(out + o_off[:, None] + c[None, :] * o_sc, value, mask=rows_ok[:, None] & c_ok[None, :])


@triton.jit
def _window_position(p, KH: tl.constexpr, KW: tl.constexpr):
    """(kd, kh, kw) of the kernel window's flat position ``p``."""
    return p // (KW * KH), (p // KW) % KH, p % KW


@triton.jit
def _row_source(od, oh, ow, m_ok, p, KH: tl.constexpr, KW: tl.constexpr, ID, IH, IW, sd, sh, sw, pd, ph, pw,
                dd, dh, dw, x_sd, x_sh, x_sw, TRANSPOSED: tl.constexpr):
    """(offset, exists) of the input element each output position reads at kernel position ``p``."""
    kd, kh, kw = _window_position(p, KH, KW)
    i_d, ok_d = _source_index(od, kd, sd, pd, dd, ID, TRANSPOSED)
    i_h, ok_h = _source_index(oh, kh, sh, ph, dh, IH, TRANSPOSED)
    i_w, ok_w = _source_index(ow, kw, sw, pw, dw, IW, TRANSPOSED)
    ok = m_ok & ok_d & ok_h & ok_w
    return tl.where(ok, i_d * x_sd + i_h * x_sh + i_w * x_sw, 0), ok


@triton.jit
def _channel_step(acc, a_ptr, b_ptr, row_ok, n_ok, rk, c, CIN_G, x_sc, w_s_in, PRECISION: tl.constexpr,
                  DECODE_BF16: tl.constexpr):
    """``acc`` plus the product of channels c .. c + BLOCK_K at one kernel position."""
    k_ok = c + rk < CIN_G
    a = tl.load(a_ptr + c * x_sc, mask=row_ok[:, None] & k_ok[None, :], other=0)
    b = tl.load(b_ptr + c * w_s_in, mask=k_ok[:, None] & n_ok[None, :], other=0)
    if DECODE_BF16:
        a = decode(a, 1)
        b = decode(b, 1)
    return tl.dot(a, b, acc, input_precision=PRECISION, out_dtype=tl.float32)


@triton.jit
def _position_step(acc, x_base, w_base, od, oh, ow, m_ok, n_ok, rk, p, CIN_G, ID, IH, IW, sd, sh, sw, pd, ph, pw,
                   dd, dh, dw, x_sc, x_sd, x_sh, x_sw, w_s_in, w_sd, w_sh, w_sw, KH: tl.constexpr,
                   KW: tl.constexpr, BLOCK_K: tl.constexpr, TRANSPOSED: tl.constexpr, PRECISION: tl.constexpr,
                   DECODE_BF16: tl.constexpr, NUM_STAGES: tl.constexpr, INTERPRETED: tl.constexpr):
    """``acc`` plus the product over every input channel at kernel position ``p``."""
    row_off, row_ok = _row_source(od, oh, ow, m_ok, p, KH, KW, ID, IH, IW, sd, sh, sw, pd, ph, pw, dd, dh, dw,
                                  x_sd, x_sh, x_sw, TRANSPOSED)
    kd, kh, kw = _window_position(p, KH, KW)
    a_ptr = x_base[:, None] + row_off[:, None] + rk[None, :] * x_sc
    b_ptr = w_base[None, :] + kd * w_sd + kh * w_sh + kw * w_sw + rk[:, None] * w_s_in
    if INTERPRETED:
        # Triton's interpreter cannot iterate a range over runtime bounds (NumPy 2); a GPU needs the for
        # loop, which is what it software-pipelines over NUM_STAGES
        c = 0
        while c < CIN_G:
            acc = _channel_step(acc, a_ptr, b_ptr, row_ok, n_ok, rk, c, CIN_G, x_sc, w_s_in, PRECISION, DECODE_BF16)
            c += BLOCK_K
    else:
        for c in tl.range(0, CIN_G, BLOCK_K, num_stages=NUM_STAGES):
            acc = _channel_step(acc, a_ptr, b_ptr, row_ok, n_ok, rk, c, CIN_G, x_sc, w_s_in, PRECISION, DECODE_BF16)
    return acc


@triton.jit
def _flat_step(acc, x_base, w_base, od, oh, ow, m_ok, n_ok, k0, rk, reduction, ID, IH, IW, sd, sh, sw, pd, ph, pw,
               dd, dh, dw, x_sc, x_sd, x_sh, x_sw, w_s_in, w_sd, w_sh, w_sw, KH: tl.constexpr, KW: tl.constexpr,
               VOLUME: tl.constexpr, TRANSPOSED: tl.constexpr, PRECISION: tl.constexpr, DECODE_BF16: tl.constexpr):
    """``acc`` plus the product over K indices k0 .. k0 + BLOCK_K, each a (channel, kernel position) pair in
    the order of an NCHW weight: channel * VOLUME + position."""
    k = k0 + rk
    k_ok = k < reduction
    c = k // VOLUME
    p = k % VOLUME
    kd, kh, kw = _window_position(p, KH, KW)
    i_d, ok_d = _source_index(od[:, None], kd[None, :], sd, pd, dd, ID, TRANSPOSED)
    i_h, ok_h = _source_index(oh[:, None], kh[None, :], sh, ph, dh, IH, TRANSPOSED)
    i_w, ok_w = _source_index(ow[:, None], kw[None, :], sw, pw, dw, IW, TRANSPOSED)
    a_ok = m_ok[:, None] & k_ok[None, :] & ok_d & ok_h & ok_w
    a_off = tl.where(a_ok, c[None, :] * x_sc + i_d * x_sd + i_h * x_sh + i_w * x_sw, 0)
    a = tl.load(x_base[:, None] + a_off, mask=a_ok, other=0)
    b_off = c * w_s_in + kd * w_sd + kh * w_sh + kw * w_sw
    b = tl.load(w_base[None, :] + b_off[:, None], mask=k_ok[:, None] & n_ok[None, :], other=0)
    if DECODE_BF16:
        a = decode(a, 1)
        b = decode(b, 1)
    return tl.dot(a, b, acc, input_precision=PRECISION, out_dtype=tl.float32)


@triton.jit
def _split_step(acc, x_base, w_base, od, oh, ow, m_ok, n_ok, rk, t, chunks, CIN_G, ID, IH, IW, sd, sh, sw, pd, ph, pw,
                dd, dh, dw, x_sc, x_sd, x_sh, x_sw, w_s_in, w_sd, w_sh, w_sw, KH: tl.constexpr, KW: tl.constexpr,
                BLOCK_K: tl.constexpr, TRANSPOSED: tl.constexpr, PRECISION: tl.constexpr,
                DECODE_BF16: tl.constexpr, POSITIONS_INNER: tl.constexpr):
    """``acc`` plus reduction step ``t``: channels (t % chunks) * BLOCK_K onwards at kernel position
    t // chunks, ``chunks`` K tiles spanning a group's channels. POSITIONS_INNER loads the input tile as
    [BLOCK_K, BLOCK_M], adjacent threads on adjacent positions: an NCHW input's rows are read in runs, where
    the [BLOCK_M, BLOCK_K] tile puts adjacent threads a channel plane apart."""
    p = t // chunks
    c = (t - p * chunks) * BLOCK_K
    row_off, row_ok = _row_source(od, oh, ow, m_ok, p, KH, KW, ID, IH, IW, sd, sh, sw, pd, ph, pw, dd, dh, dw,
                                  x_sd, x_sh, x_sw, TRANSPOSED)
    kd, kh, kw = _window_position(p, KH, KW)
    b_ptr = w_base[None, :] + kd * w_sd + kh * w_sh + kw * w_sw + rk[:, None] * w_s_in
    if POSITIONS_INNER:
        k_ok = c + rk < CIN_G
        a = tl.load(x_base[None, :] + row_off[None, :] + (c + rk)[:, None] * x_sc, mask=k_ok[:, None] & row_ok[None, :],
                    other=0)
        b = tl.load(b_ptr + c * w_s_in, mask=k_ok[:, None] & n_ok[None, :], other=0)
        if DECODE_BF16:
            a = decode(a, 1)
            b = decode(b, 1)
        return tl.dot(tl.trans(a), b, acc, input_precision=PRECISION, out_dtype=tl.float32)
    a_ptr = x_base[:, None] + row_off[:, None] + rk[None, :] * x_sc
    return _channel_step(acc, a_ptr, b_ptr, row_ok, n_ok, rk, c, CIN_G, x_sc, w_s_in, PRECISION, DECODE_BF16)


@triton.jit
def _stepped_step(acc, x_base, w_base, od, oh, ow, m_ok, n_ok, rk, t, chunks, reduction, CIN_G, ID, IH, IW, sd, sh, sw,
                  pd, ph, pw, dd, dh, dw, x_sc, x_sd, x_sh, x_sw, w_s_in, w_sd, w_sh, w_sw, KH: tl.constexpr,
                  KW: tl.constexpr, VOLUME: tl.constexpr, BLOCK_K: tl.constexpr, FLAT_K: tl.constexpr,
                  TRANSPOSED: tl.constexpr, PRECISION: tl.constexpr, DECODE_BF16: tl.constexpr,
                  POSITIONS_INNER: tl.constexpr):
    """``acc`` plus step ``t`` of a stepped reduction: flat K tile ``t``, or ``_split_step``'s step ``t``."""
    if FLAT_K:
        return _flat_step(acc, x_base, w_base, od, oh, ow, m_ok, n_ok, t * BLOCK_K, rk, reduction, ID, IH, IW, sd, sh,
                          sw, pd, ph, pw, dd, dh, dw, x_sc, x_sd, x_sh, x_sw, w_s_in, w_sd, w_sh, w_sw, KH, KW, VOLUME,
                          TRANSPOSED, PRECISION, DECODE_BF16)
    else:
        return _split_step(acc, x_base, w_base, od, oh, ow, m_ok, n_ok, rk, t, chunks, CIN_G, ID, IH, IW, sd, sh, sw,
                           pd, ph, pw, dd, dh, dw, x_sc, x_sd, x_sh, x_sw, w_s_in, w_sd, w_sh, w_sw, KH, KW, BLOCK_K,
                           TRANSPOSED, PRECISION, DECODE_BF16, POSITIONS_INNER)


@triton.jit
def _positions_tile(x_base, od, oh, ow, m_ok, rk, t, chunks, live, CIN_G, ID, IH, IW, sd, sh, sw, pd, ph, pw, dd, dh,
                    dw, x_sc, x_sd, x_sh, x_sw, KH: tl.constexpr, KW: tl.constexpr, BLOCK_K: tl.constexpr,
                    DECODE_BF16: tl.constexpr):
    """The input tile of reduction step ``t`` (``_split_step``'s steps) as [BLOCK_K, BLOCK_M], positions
    innermost; all zeros unless ``live``."""
    p = t // chunks
    c = (t - p * chunks) * BLOCK_K
    row_off, row_ok = _row_source(od, oh, ow, m_ok, p, KH, KW, ID, IH, IW, sd, sh, sw, pd, ph, pw, dd, dh, dw,
                                  x_sd, x_sh, x_sw, False)
    k_ok = (c + rk < CIN_G) & live
    a = tl.load(x_base[None, :] + row_off[None, :] + (c + rk)[:, None] * x_sc, mask=k_ok[:, None] & row_ok[None, :],
                other=0)
    if DECODE_BF16:
        a = decode(a, 1)
    return a


@triton.jit
def _prefetched_step(acc, a, w_base, n_ok, rk, t, chunks, CIN_G, w_s_in, w_sd, w_sh, w_sw, KH: tl.constexpr,
                     KW: tl.constexpr, BLOCK_K: tl.constexpr, PRECISION: tl.constexpr, DECODE_BF16: tl.constexpr):
    """``acc`` plus step ``t`` of ``_split_step``'s steps with its input tile ``a`` ([BLOCK_K, BLOCK_M])
    already loaded."""
    p = t // chunks
    c = (t - p * chunks) * BLOCK_K
    kd, kh, kw = _window_position(p, KH, KW)
    k_ok = c + rk < CIN_G
    b = tl.load(w_base[None, :] + kd * w_sd + kh * w_sh + kw * w_sw + (c + rk)[:, None] * w_s_in,
                mask=k_ok[:, None] & n_ok[None, :], other=0)
    if DECODE_BF16:
        b = decode(b, 1)
    return tl.dot(tl.trans(a), b, acc, input_precision=PRECISION, out_dtype=tl.float32)


@triton.jit
def conv_implicit_gemm(x, w, bias, out, partial, b_s, mean, var, norm_w, norm_b, eps,
                       M, COUT_G, CIN_G, steps_per_split, OD, OH, OW, ID, IH, IW,
                       sd, sh, sw, pd, ph, pw, dd, dh, dw,
                       x_sn, x_sc, x_sd, x_sh, x_sw, w_s_out, w_s_in, w_sg, w_sd, w_sh, w_sw,
                       o_sn, o_sc, o_sd, o_sh, o_sw,
                       KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr, UNROLL: tl.constexpr,
                       FLAT_K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                       NUM_STAGES: tl.constexpr, STEPPED: tl.constexpr, SPLIT: tl.constexpr,
                       POSITIONS_INNER: tl.constexpr, PREFETCH: tl.constexpr,
                       TRANSPOSED: tl.constexpr,
                       HAS_BIAS: tl.constexpr, PRECISION: tl.constexpr, DECODE_BF16: tl.constexpr,
                       BIAS_FORMAT: tl.constexpr, DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr,
                       INTERPRETED: tl.constexpr, NORM: tl.constexpr, NORM_FORMAT: tl.constexpr,
                       ACTIVATION: tl.constexpr):
    """out[n, g * COUT_G + j, o] = bias + sum over c < CIN_G and kernel positions of x * w; program
    (tile, g) takes one BLOCK_M x BLOCK_N tile of group g. STEPPED: program (tile, g, s) takes reduction
    steps s * steps_per_split onwards; with SPLIT it writes partial[s, position, g * COUT_G + j] (float32,
    M x COUT_G * groups a split) instead of the output. PREFETCH (STEPPED, forward, POSITIONS_INNER, not
    FLAT_K): each step's input tile is loaded one step ahead, into registers, so that its gather (which the
    compiler cannot make an asynchronous copy) overlaps the step before's product."""
    pid = tl.program_id(0)
    g = tl.program_id(1)
    tiles_n = tl.cdiv(COUT_G, BLOCK_N)
    rm = (pid // tiles_n) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = (pid % tiles_n) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    m_ok = rm < M
    nb, od, oh, ow = _output_position(rm, OD, OH, OW)
    n_ok = rn < COUT_G
    x_base = x + nb * x_sn + g * CIN_G * x_sc
    w_base = w + g * w_sg + rn * w_s_out
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    VOLUME: tl.constexpr = KD * KH * KW
    if STEPPED:
        # one loop over (kernel position, channel tile) steps, or flat K tiles: a split's share of the
        # reduction need not start at a kernel position
        reduction = CIN_G * VOLUME
        chunks = tl.cdiv(CIN_G, BLOCK_K)
        if FLAT_K:
            steps = tl.cdiv(reduction, BLOCK_K)
        else:
            steps = chunks * VOLUME
        t_begin = tl.program_id(2) * steps_per_split
        t_end = tl.minimum(t_begin + steps_per_split, steps)
        if PREFETCH:
            a = _positions_tile(x_base, od, oh, ow, m_ok, rk, t_begin, chunks, t_begin < t_end, CIN_G, ID, IH, IW,
                                sd, sh, sw, pd, ph, pw, dd, dh, dw, x_sc, x_sd, x_sh, x_sw, KH, KW, BLOCK_K,
                                DECODE_BF16)
            if INTERPRETED:  # no range over runtime bounds in the interpreter (see _position_step)
                t = t_begin
                while t < t_end:
                    ahead = _positions_tile(x_base, od, oh, ow, m_ok, rk, t + 1, chunks, t + 1 < t_end, CIN_G, ID,
                                            IH, IW, sd, sh, sw, pd, ph, pw, dd, dh, dw, x_sc, x_sd, x_sh, x_sw, KH,
                                            KW, BLOCK_K, DECODE_BF16)
                    acc = _prefetched_step(acc, a, w_base, n_ok, rk, t, chunks, CIN_G, w_s_in, w_sd, w_sh, w_sw,
                                           KH, KW, BLOCK_K, PRECISION, DECODE_BF16)
                    a = ahead
                    t += 1
            else:
                for t in tl.range(t_begin, t_end, num_stages=NUM_STAGES):
                    ahead = _positions_tile(x_base, od, oh, ow, m_ok, rk, t + 1, chunks, t + 1 < t_end, CIN_G, ID,
                                            IH, IW, sd, sh, sw, pd, ph, pw, dd, dh, dw, x_sc, x_sd, x_sh, x_sw, KH,
                                            KW, BLOCK_K, DECODE_BF16)
                    acc = _prefetched_step(acc, a, w_base, n_ok, rk, t, chunks, CIN_G, w_s_in, w_sd, w_sh, w_sw,
                                           KH, KW, BLOCK_K, PRECISION, DECODE_BF16)
                    a = ahead
        elif INTERPRETED:  # no range over runtime bounds in the interpreter (see _position_step)
            t = t_begin
            while t < t_end:
                acc = _stepped_step(acc, x_base, w_base, od, oh, ow, m_ok, n_ok, rk, t, chunks, reduction, CIN_G, ID,
                                    IH, IW, sd, sh, sw, pd, ph, pw, dd, dh, dw, x_sc, x_sd, x_sh, x_sw, w_s_in, w_sd,
                                    w_sh, w_sw, KH, KW, VOLUME, BLOCK_K, FLAT_K, TRANSPOSED, PRECISION, DECODE_BF16,
                                    POSITIONS_INNER)
                t += 1
        else:
            for t in tl.range(t_begin, t_end, num_stages=NUM_STAGES):
                acc = _stepped_step(acc, x_base, w_base, od, oh, ow, m_ok, n_ok, rk, t, chunks, reduction, CIN_G, ID,
                                    IH, IW, sd, sh, sw, pd, ph, pw, dd, dh, dw, x_sc, x_sd, x_sh, x_sw, w_s_in, w_sd,
                                    w_sh, w_sw, KH, KW, VOLUME, BLOCK_K, FLAT_K, TRANSPOSED, PRECISION, DECODE_BF16,
                                    POSITIONS_INNER)
    elif FLAT_K:
        reduction = CIN_G * VOLUME
        if INTERPRETED:  # no range over runtime bounds in the interpreter (see _position_step)
            k0 = 0
            while k0 < reduction:
                acc = _flat_step(acc, x_base, w_base, od, oh, ow, m_ok, n_ok, k0, rk, reduction, ID, IH, IW, sd, sh,
                                 sw, pd, ph, pw, dd, dh, dw, x_sc, x_sd, x_sh, x_sw, w_s_in, w_sd, w_sh, w_sw, KH, KW,
                                 VOLUME, TRANSPOSED, PRECISION, DECODE_BF16)
                k0 += BLOCK_K
        else:
            for k0 in tl.range(0, reduction, BLOCK_K, num_stages=NUM_STAGES):
                acc = _flat_step(acc, x_base, w_base, od, oh, ow, m_ok, n_ok, k0, rk, reduction, ID, IH, IW, sd, sh,
                                 sw, pd, ph, pw, dd, dh, dw, x_sc, x_sd, x_sh, x_sw, w_s_in, w_sd, w_sh, w_sw, KH, KW,
                                 VOLUME, TRANSPOSED, PRECISION, DECODE_BF16)
    elif UNROLL:
        for p in tl.static_range(VOLUME):
            acc = _position_step(acc, x_base, w_base, od, oh, ow, m_ok, n_ok, rk, p, CIN_G, ID, IH, IW, sd, sh,
                                 sw, pd, ph, pw, dd, dh, dw, x_sc, x_sd, x_sh, x_sw, w_s_in, w_sd, w_sh, w_sw, KH,
                                 KW, BLOCK_K, TRANSPOSED, PRECISION, DECODE_BF16, NUM_STAGES,
                                 INTERPRETED)
    else:
        for p in range(VOLUME):
            acc = _position_step(acc, x_base, w_base, od, oh, ow, m_ok, n_ok, rk, p, CIN_G, ID, IH, IW, sd, sh,
                                 sw, pd, ph, pw, dd, dh, dw, x_sc, x_sd, x_sh, x_sw, w_s_in, w_sd, w_sh, w_sw, KH,
                                 KW, BLOCK_K, TRANSPOSED, PRECISION, DECODE_BF16, NUM_STAGES,
                                 INTERPRETED)
    co = g * COUT_G + rn
    if SPLIT:
        cout = COUT_G * tl.num_programs(1)
        p_off = tl.program_id(2) * M * cout + rm[:, None] * cout + co[None, :]
        tl.store(partial + p_off, acc, mask=m_ok[:, None] & n_ok[None, :])
    else:
        acc = _channel_epilogue(acc, co, n_ok, bias, b_s, mean, var, norm_w, norm_b, eps, HAS_BIAS, BIAS_FORMAT,
                                NORM, NORM_FORMAT, ACTIVATION, 0)
        _store_positions(out, acc, nb, od, oh, ow, co, m_ok, n_ok, o_sn, o_sc, o_sd, o_sh, o_sw, DST_FORMAT, VIA_F32)


@triton.jit
def conv_split_sum(partial, bias, out, b_s, mean, var, norm_w, norm_b, eps, M, COUT, OD, OH, OW, o_sn, o_sc, o_sd,
                   o_sh, o_sw, SPLITS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_C: tl.constexpr,
                   HAS_BIAS: tl.constexpr, BIAS_FORMAT: tl.constexpr, DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr,
                   NORM: tl.constexpr, NORM_FORMAT: tl.constexpr, ACTIVATION: tl.constexpr):
    """out[position, c] = bias + the SPLITS partial[s, position, c] added in order s = 0, 1, ...; program
    (i, j) takes BLOCK_M positions x BLOCK_C channels."""
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    co = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    ok = (rm < M)[:, None] & (co < COUT)[None, :]
    p_off = rm[:, None] * COUT + co[None, :]
    acc = tl.load(partial + p_off, mask=ok, other=0)
    for s in tl.static_range(1, SPLITS):
        acc += tl.load(partial + s * M * COUT + p_off, mask=ok, other=0)
    acc = _channel_epilogue(acc, co, co < COUT, bias, b_s, mean, var, norm_w, norm_b, eps, HAS_BIAS, BIAS_FORMAT,
                            NORM, NORM_FORMAT, ACTIVATION, 0)
    nb, od, oh, ow = _output_position(rm, OD, OH, OW)
    _store_positions(out, acc, nb, od, oh, ow, co, rm < M, co < COUT, o_sn, o_sc, o_sd, o_sh, o_sw, DST_FORMAT,
                     VIA_F32)


@triton.jit
def _direct_channel(acc, x_at, x_ok, w_at, c_ok, DECODE_BF16: tl.constexpr):
    """``acc`` plus one input channel's values at ``x_at`` (positions x channels) times its weights at ``w_at``,
    in the accumulator's type."""
    xv = tl.load(x_at, mask=x_ok, other=0)
    wv = tl.load(w_at, mask=c_ok, other=0)
    if DECODE_BF16:
        xv = decode(xv, 1)
        wv = decode(wv, 1)
    return acc + xv.to(acc.dtype) * wv.to(acc.dtype)[None, :]


@triton.jit
def _direct_step(acc, x_chan, x_rows, w_chan, od, oh, ow, m_ok, c_ok, p, ID, IH, IW, sd, sh, sw, pd, ph, pw, dd,
                 dh, dw, x_sc, x_sd, x_sh, x_sw, w_s_in, w_sd, w_sh, w_sw, CIN_G: tl.constexpr, KH: tl.constexpr,
                 KW: tl.constexpr, TRANSPOSED: tl.constexpr, DECODE_BF16: tl.constexpr):
    """``acc`` plus every input channel of the group times the weight at kernel position ``p``: the channels
    unrolled up to DIRECT_UNROLLED_CHANNELS (a small group's), a loop past them (a float64 convolution of
    any group takes this kernel)."""
    row_off, row_ok = _row_source(od, oh, ow, m_ok, p, KH, KW, ID, IH, IW, sd, sh, sw, pd, ph, pw, dd, dh, dw,
                                  x_sd, x_sh, x_sw, TRANSPOSED)
    kd, kh, kw = _window_position(p, KH, KW)
    w_pos = w_chan + kd * w_sd + kh * w_sh + kw * w_sw
    x_at = x_chan[None, :] + (x_rows + row_off)[:, None]
    x_ok = row_ok[:, None] & c_ok[None, :]
    if CIN_G <= DIRECT_UNROLLED_CHANNELS:
        for ci in tl.static_range(CIN_G):
            acc = _direct_channel(acc, x_at + ci * x_sc, x_ok, w_pos + ci * w_s_in, c_ok, DECODE_BF16)
    else:
        for ci in range(CIN_G):
            acc = _direct_channel(acc, x_at + ci * x_sc, x_ok, w_pos + ci * w_s_in, c_ok, DECODE_BF16)
    return acc


@triton.jit
def conv_direct(x, w, bias, out, b_s, mean, var, norm_w, norm_b, eps, M, COUT, COUT_G, OD, OH, OW, ID, IH, IW,
                sd, sh, sw, pd, ph, pw, dd, dh, dw,
                x_sn, x_sc, x_sd, x_sh, x_sw, w_s_out, w_s_in, w_sg, w_sd, w_sh, w_sw,
                o_sn, o_sc, o_sd, o_sh, o_sw,
                CIN_G: tl.constexpr, KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr, UNROLL: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_C: tl.constexpr, TRANSPOSED: tl.constexpr, HAS_BIAS: tl.constexpr,
                DECODE_BF16: tl.constexpr, BIAS_FORMAT: tl.constexpr, DST_FORMAT: tl.constexpr,
                VIA_F32: tl.constexpr, INTERPRETED: tl.constexpr, NORM: tl.constexpr, NORM_FORMAT: tl.constexpr,
                ACTIVATION: tl.constexpr, ACC: tl.constexpr):
    """out[n, co, o] = bias + sum over the CIN_G input channels of co's group and the window of x * w, in
    ACC (float32; float64 for float64 operands) on the vector units; program (i, j) takes BLOCK_M output
    positions x BLOCK_C output channels."""
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    co = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    m_ok = rm < M
    c_ok = co < COUT
    nb, od, oh, ow = _output_position(rm, OD, OH, OW)
    g = co // COUT_G
    x_chan = x + g * (CIN_G * x_sc)
    x_rows = nb * x_sn
    w_chan = w + g * w_sg + (co - g * COUT_G) * w_s_out
    acc = tl.zeros((BLOCK_M, BLOCK_C), dtype=ACC)
    VOLUME: tl.constexpr = KD * KH * KW
    if UNROLL:
        for p in tl.static_range(VOLUME):
            acc = _direct_step(acc, x_chan, x_rows, w_chan, od, oh, ow, m_ok, c_ok, p, ID, IH, IW, sd, sh, sw, pd,
                               ph, pw, dd, dh, dw, x_sc, x_sd, x_sh, x_sw, w_s_in, w_sd, w_sh, w_sw, CIN_G, KH, KW,
                               TRANSPOSED, DECODE_BF16)
    else:
        for p in range(VOLUME):
            acc = _direct_step(acc, x_chan, x_rows, w_chan, od, oh, ow, m_ok, c_ok, p, ID, IH, IW, sd, sh, sw, pd,
                               ph, pw, dd, dh, dw, x_sc, x_sd, x_sh, x_sw, w_s_in, w_sd, w_sh, w_sw, CIN_G, KH, KW,
                               TRANSPOSED, DECODE_BF16)
    acc = _channel_epilogue(acc, co, c_ok, bias, b_s, mean, var, norm_w, norm_b, eps, HAS_BIAS, BIAS_FORMAT, NORM,
                            NORM_FORMAT, ACTIVATION, 0)
    _store_positions(out, acc, nb, od, oh, ow, co, m_ok, c_ok, o_sn, o_sc, o_sd, o_sh, o_sw, DST_FORMAT, VIA_F32)


@triton.jit
def _plane_tap(acc, row_ptr, row_ok, ow, kw, w_row, IW, sw, pw, dw, x_sc, x_sw, w_s_in, w_sw, CIN_G: tl.constexpr,
               DECODE_BF16: tl.constexpr):
    """``acc`` plus the group's input channels times the weight at window column ``kw``, for a tile of one
    output plane whose window row starts at ``row_ptr`` (valid rows ``row_ok``)."""
    i_w, ok_w = _source_index(ow, kw, sw, pw, dw, IW, False)
    ok = row_ok[:, None] & ok_w[None, :]
    x_pos = row_ptr + kw * dw * x_sw  # a constant step where the input's columns are adjacent and undilated
    for ci in tl.static_range(CIN_G):
        xv = tl.load(x_pos + ci * x_sc, mask=ok, other=0)
        wv = tl.load(w_row + kw * w_sw + ci * w_s_in)
        if DECODE_BF16:
            xv = decode(xv, 1)
            wv = decode(wv, 1)
        acc += xv.to(tl.float32) * wv.to(tl.float32)
    return acc


@triton.jit
def _plane_row(od, oh, ow, r, x_plane, w_co, ID, IH, sd, sh, sw, pd, ph, pw, dd, dh, x_sd, x_sh, x_sw, w_sd, w_sh,
               KH: tl.constexpr):
    """(window row ``r``'s input pointers at window column 0, its valid rows, its weights) for a tile of one
    output plane: rows ``oh`` x columns ``ow`` at depth ``od``; r = kd * KH + kh."""
    i_d, ok_d = _source_index(od, r // KH, sd, pd, dd, ID, False)
    i_h, ok_h = _source_index(oh, r % KH, sh, ph, dh, IH, False)
    row_ptr = x_plane + i_d * x_sd + i_h[:, None] * x_sh + (ow * sw - pw)[None, :] * x_sw
    return row_ptr, ok_h & ok_d, w_co + (r // KH) * w_sd + (r % KH) * w_sh


@triton.jit
def _plane_tile(OH, OW, OD, BLOCK_H: tl.constexpr, BLOCK_W: tl.constexpr):
    """(plane // OD, od, tile row, tile column) of this program's output tile: programs are numbered by plane,
    whose last factor is the output depth od, then by BLOCK_H x BLOCK_W tile of the OH x OW plane."""
    tiles_w = tl.cdiv(OW, BLOCK_W)
    tiles = tl.cdiv(OH, BLOCK_H) * tiles_w
    plane = tl.program_id(0) // tiles
    tile = tl.program_id(0) - plane * tiles
    return plane // OD, plane % OD, tile // tiles_w, tile % tiles_w


@triton.jit
def conv_direct_planes(x, w, bias, out, b_s, mean, var, norm_w, norm_b, eps, COUT, COUT_G, OD, OH, OW, ID, IH, IW,
                       sd, sh, sw, pd, ph, pw, dd, dh, dw,
                       x_sn, x_sc, x_sd, x_sh, x_sw, w_s_out, w_s_in, w_sg, w_sd, w_sh, w_sw,
                       o_sn, o_sc, o_sd, o_sh, o_sw,
                       CIN_G: tl.constexpr, KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
                       UNROLL: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_W: tl.constexpr, HAS_BIAS: tl.constexpr,
                       DECODE_BF16: tl.constexpr, BIAS_FORMAT: tl.constexpr, DST_FORMAT: tl.constexpr,
                       VIA_F32: tl.constexpr, NORM: tl.constexpr, NORM_FORMAT: tl.constexpr, ACTIVATION: tl.constexpr):
    """``conv_direct`` (forward) by output planes: a program takes BLOCK_H rows x BLOCK_W columns of the
    output plane (n, co, od), programs numbered by plane = (n * COUT + co) * OD + od, then tile. Adjacent
    threads take adjacent columns, so where the input's columns are adjacent in memory (NCHW) each load of
    the window reads runs of a row, and the weight is one value a program and kernel position."""
    rest, od, tile_h, tile_w = _plane_tile(OH, OW, OD, BLOCK_H, BLOCK_W)
    co = rest % COUT
    nb = rest // COUT
    oh = tile_h * BLOCK_H + tl.arange(0, BLOCK_H)
    ow = tile_w * BLOCK_W + tl.arange(0, BLOCK_W)
    g = co // COUT_G
    x_plane = x + nb * x_sn + g * (CIN_G * x_sc)
    w_co = w + g * w_sg + (co - g * COUT_G) * w_s_out
    acc = tl.zeros((BLOCK_H, BLOCK_W), dtype=tl.float32)
    # window rows outside, columns inside: a row's pointers are formed once and each column steps from them
    if UNROLL:
        for r in tl.static_range(KD * KH):
            row_ptr, row_ok, w_row = _plane_row(od, oh, ow, r, x_plane, w_co, ID, IH, sd, sh, sw, pd, ph, pw, dd, dh,
                                                x_sd, x_sh, x_sw, w_sd, w_sh, KH)
            for kw in tl.static_range(KW):
                acc = _plane_tap(acc, row_ptr, row_ok, ow, kw, w_row, IW, sw, pw, dw, x_sc, x_sw, w_s_in, w_sw, CIN_G,
                                 DECODE_BF16)
    else:
        for r in range(KD * KH):
            row_ptr, row_ok, w_row = _plane_row(od, oh, ow, r, x_plane, w_co, ID, IH, sd, sh, sw, pd, ph, pw, dd, dh,
                                                x_sd, x_sh, x_sw, w_sd, w_sh, KH)
            for kw in range(KW):
                acc = _plane_tap(acc, row_ptr, row_ok, ow, kw, w_row, IW, sw, pw, dw, x_sc, x_sw, w_s_in, w_sw, CIN_G,
                                 DECODE_BF16)
    if HAS_BIAS:
        acc = acc + decode(tl.load(bias + co * b_s), BIAS_FORMAT).to(tl.float32)
    if NORM:
        n_mean, n_scale, n_shift = norm_parameters(co, co < COUT, mean, var, norm_w, norm_b, eps, NORM_FORMAT)
        acc = activated((acc - n_mean) * n_scale + n_shift, ACTIVATION)
    value = encode(acc, out.dtype.element_ty, DST_FORMAT, VIA_F32, False)
    o_off = nb * o_sn + co * o_sc + od * o_sd + oh[:, None] * o_sh + ow[None, :] * o_sw
    tl.store(out + o_off, value, mask=(oh < OH)[:, None] & (ow < OW)[None, :])


@triton.jit
def _float32_of(v, DECODE_BF16: tl.constexpr, BF16: tl.constexpr):
    """Loaded elements as float32; bfloat16 ones on a GPU by their bits, two a 32-bit word (the first
    shifted up, the second masked): its own conversion unpacks the second half before shifting it."""
    if DECODE_BF16:
        return decode(v, 1)
    elif BF16:
        return tl.inline_asm_elementwise("shl.b32 $0, $2, 16;\n\tand.b32 $1, $2, 0xFFFF0000;", "=r,=r,r", [v],
                                         dtype=tl.float32, is_pure=True, pack=2)
    else:
        return v.to(tl.float32)


@triton.jit
def _channels_inner_tap(acc, row_ptr, w_row, row_ok, iw, c_ok, kw, IW, dw, x_sw, w_sw, MASKED: tl.constexpr,
                        DECODE_BF16: tl.constexpr, BF16: tl.constexpr):
    """``acc`` plus the tile's inputs at window column ``kw`` of one window row (pointers ``row_ptr`` at
    column 0; MASKED: valid positions ``row_ok``, else every position's input exists) times that tap's
    weights for the channel block."""
    if MASKED:
        i_w = iw + kw * dw
        ok = row_ok & (i_w >= 0) & (i_w < IW)
        xv = tl.load(row_ptr + kw * dw * x_sw, mask=ok[:, None] & c_ok[None, :], other=0)
    else:
        xv = tl.load(row_ptr + kw * dw * x_sw, mask=c_ok[None, :], other=0)
    wv = tl.load(w_row + kw * w_sw, mask=c_ok, other=0)
    return acc + _float32_of(xv, DECODE_BF16, BF16) * _float32_of(wv, DECODE_BF16, BF16)[None, :]


@triton.jit
def _channels_inner_window_row(r, x_tile, w_c, i_d0, ih, out_ok, ID, IH, dd, dh, x_sd, x_sh, w_sd, w_sh,
                               KH: tl.constexpr):
    """(pointers at window column 0, valid positions, weight pointers) of window row ``r`` = kd * KH + kh."""
    i_d = i_d0 + (r // KH) * dd
    i_h = ih + (r % KH) * dh
    row_ok = out_ok & (i_h >= 0) & (i_h < IH) & (i_d >= 0) & (i_d < ID)
    return x_tile + i_d * x_sd + ((r % KH) * dh) * x_sh, row_ok, w_c + (r // KH) * w_sd + (r % KH) * w_sh


@triton.jit
def _channels_inner_window(acc, x_tile, w_c, i_d0, ih, iw, out_ok, c_ok, ID, IH, IW, dd, dh, dw, x_sd, x_sh, x_sw,
                           w_sd, w_sh, w_sw, KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
                           UNROLL: tl.constexpr, UNROLL_COLUMNS: tl.constexpr, MASKED: tl.constexpr,
                           DECODE_BF16: tl.constexpr, BF16: tl.constexpr):
    """``acc`` plus the whole window: rows outside, columns inside, so that a row's pointers and validity
    are formed once and each column steps from them. UNROLL: the window unrolled; else UNROLL_COLUMNS: the
    rows a loop, each row's columns unrolled (less code, fewer loads in flight)."""
    if UNROLL:
        for r in tl.static_range(KD * KH):
            row_ptr, row_ok, w_row = _channels_inner_window_row(r, x_tile, w_c, i_d0, ih, out_ok, ID, IH, dd, dh,
                                                                x_sd, x_sh, w_sd, w_sh, KH)
            for kw in tl.static_range(KW):
                acc = _channels_inner_tap(acc, row_ptr, w_row, row_ok, iw, c_ok, kw, IW, dw, x_sw, w_sw, MASKED,
                                          DECODE_BF16, BF16)
    elif UNROLL_COLUMNS:
        for r in range(KD * KH):
            row_ptr, row_ok, w_row = _channels_inner_window_row(r, x_tile, w_c, i_d0, ih, out_ok, ID, IH, dd, dh,
                                                                x_sd, x_sh, w_sd, w_sh, KH)
            for kw in tl.static_range(KW):
                acc = _channels_inner_tap(acc, row_ptr, w_row, row_ok, iw, c_ok, kw, IW, dw, x_sw, w_sw, MASKED,
                                          DECODE_BF16, BF16)
    else:
        for r in range(KD * KH):
            row_ptr, row_ok, w_row = _channels_inner_window_row(r, x_tile, w_c, i_d0, ih, out_ok, ID, IH, dd, dh,
                                                                x_sd, x_sh, w_sd, w_sh, KH)
            for kw in range(KW):
                acc = _channels_inner_tap(acc, row_ptr, w_row, row_ok, iw, c_ok, kw, IW, dw, x_sw, w_sw, MASKED,
                                          DECODE_BF16, BF16)
    return acc


@triton.jit
def _channels_inner_sliding_row(accs, row_ptr, w_row, row_ok, c_ok, iw0, IW, x_sw, w_sw, KW: tl.constexpr,
                                BLOCK_H: tl.constexpr, BLOCK_W: tl.constexpr, MASKED: tl.constexpr,
                                DECODE_BF16: tl.constexpr, BF16: tl.constexpr):
    """``accs`` (one tile of rows x channels an output column) plus one window row, the window's columns at
    unit stride and dilation: its KW weights loaded once, then each of the BLOCK_W + KW - 1 input columns the
    row reaches (pointers ``row_ptr`` at input column ``iw0``) loaded once and multiplied into every output
    column that reaches it, so that a column's inputs are reused from registers, not reloaded a tap."""
    # the weights loaded as whole tiles (each row the same), so that they take the inputs' layout: a row of
    # BLOCK_C would be spread over all the lanes and then moved through shared memory
    w_tile = w_row[None, :] + tl.zeros((BLOCK_H, 1), dtype=tl.int32)
    weights = ()
    for kw in tl.static_range(KW):
        weights = weights + (_float32_of(tl.load(w_tile + kw * w_sw, mask=c_ok[None, :], other=0), DECODE_BF16,
                                         BF16),)
    for i in tl.static_range(BLOCK_W + KW - 1):
        if MASKED:
            ok = row_ok & (iw0 + i >= 0) & (iw0 + i < IW)
            xv = tl.load(row_ptr + i * x_sw, mask=ok[:, None] & c_ok[None, :], other=0)
        else:
            xv = tl.load(row_ptr + i * x_sw, mask=c_ok[None, :], other=0)
        xf = _float32_of(xv, DECODE_BF16, BF16)
        updated = ()
        for j in tl.static_range(BLOCK_W):
            if i - j >= 0 and i - j < KW:
                updated = updated + (accs[j] + xf * weights[i - j],)
            else:
                updated = updated + (accs[j],)
        accs = updated
    return accs


@triton.jit
def _channels_inner_sliding(x_tile, w_c, i_d0, ih, iw0, rows_ok, c_ok, ID, IH, IW, dd, dh, x_sd, x_sh, x_sw, w_sd,
                            w_sh, w_sw, KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
                            BLOCK_H: tl.constexpr, BLOCK_W: tl.constexpr, BLOCK_C: tl.constexpr,
                            MASKED: tl.constexpr, DECODE_BF16: tl.constexpr, BF16: tl.constexpr):
    """The whole window for BLOCK_W output columns kept apart (a tuple of BLOCK_H x BLOCK_C float32 tiles),
    window rows unrolled, each through ``_channels_inner_sliding_row``."""
    accs = ()
    for j in tl.static_range(BLOCK_W):
        accs = accs + (tl.zeros((BLOCK_H, BLOCK_C), dtype=tl.float32),)
    for r in tl.static_range(KD * KH):
        row_ptr, row_ok, w_row = _channels_inner_window_row(r, x_tile, w_c, i_d0, ih, rows_ok, ID, IH, dd, dh,
                                                            x_sd, x_sh, w_sd, w_sh, KH)
        accs = _channels_inner_sliding_row(accs, row_ptr, w_row, row_ok, c_ok, iw0, IW, x_sw, w_sw, KW, BLOCK_H,
                                           BLOCK_W, MASKED, DECODE_BF16, BF16)
    return accs


@triton.jit
def conv_depthwise_channels_inner(x, w, bias, out, b_s, mean, var, norm_w, norm_b, eps, C, OD, OH, OW, ID, IH, IW,
                                  sd, sh, sw, pd, ph, pw, dd, dh, dw,
                                  x_sn, x_sc, x_sd, x_sh, x_sw, w_sc, w_sd, w_sh, w_sw, o_sn, o_sc, o_sd, o_sh, o_sw,
                                  KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr, UNROLL: tl.constexpr,
                                  UNROLL_COLUMNS: tl.constexpr, SLIDING: tl.constexpr, BLOCK_H: tl.constexpr,
                                  BLOCK_W: tl.constexpr, BLOCK_C: tl.constexpr, EVEN_C: tl.constexpr,
                                  HAS_BIAS: tl.constexpr, DECODE_BF16: tl.constexpr, BF16: tl.constexpr,
                                  BIAS_FORMAT: tl.constexpr, DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr,
                                  INDEX_64: tl.constexpr, NORM: tl.constexpr, NORM_FORMAT: tl.constexpr,
                                  ACTIVATION: tl.constexpr):
    """out[n, c, o] = bias[c] + sum over the window of x[n, c, .] * w[c, 0, .]: a forward depthwise convolution
    (one input and one output channel a group) whose input's channels are adjacent in memory (channels-last).
    Program (t, j) takes output rows x columns BLOCK_H x BLOCK_W of plane (n, od), t = (n * OD + od) * tiles
    + tile, times channels j * BLOCK_C onwards: each tap loads the tile's inputs as rows of BLOCK_C adjacent
    channels (vector loads, the window's overlap served from L1) and the tap's BLOCK_C weights once, and
    accumulates in float32. SLIDING (the width's stride and dilation 1): the BLOCK_W output columns are
    accumulated apart, and each input column a window row reaches is loaded once for all of them
    (``_channels_inner_sliding_row``). A tile whose whole window lies inside the input loads without
    position masks; EVEN_C (BLOCK_C divides C) drops the channel mask; BF16: the elements are bfloat16."""
    nb, od, tile_h, tile_w = _plane_tile(OH, OW, OD, BLOCK_H, BLOCK_W)
    oh0 = tile_h * BLOCK_H
    ow0 = tile_w * BLOCK_W
    if SLIDING:  # the tile's rows; its columns are the accumulators' tuple
        oh = oh0 + tl.arange(0, BLOCK_H)
        ow = ow0
    else:
        p = tl.arange(0, BLOCK_H * BLOCK_W)
        oh = oh0 + p // BLOCK_W
        ow = ow0 + p % BLOCK_W
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    if INDEX_64:
        nb = nb.to(tl.int64)
        od = od.to(tl.int64)
        oh = oh.to(tl.int64)
        ow = ow.to(tl.int64)
        c = c.to(tl.int64)
    if EVEN_C:
        c_ok = tl.full([BLOCK_C], 1, tl.int1)
    else:
        c_ok = c < C
    out_ok = (oh < OH) & (ow < OW)  # SLIDING: the rows inside the plane (ow, the first column, is inside)
    ih = oh * sh - ph
    iw = ow * sw - pw
    i_d0 = od * sd - pd
    # the tile's pointers at window position 0, formed once; each tap adds one scalar step to them
    x_tile = x + nb * x_sn + (ih * x_sh + iw * x_sw)[:, None] + c[None, :] * x_sc
    w_c = w + c * w_sc
    interior = ((oh0 + BLOCK_H <= OH) & (ow0 + BLOCK_W <= OW) & (oh0 * sh - ph >= 0) & (ow0 * sw - pw >= 0)
                & (i_d0 >= 0) & (i_d0 + (KD - 1) * dd < ID) & ((oh0 + BLOCK_H - 1) * sh - ph + (KH - 1) * dh < IH)
                & ((ow0 + BLOCK_W - 1) * sw - pw + (KW - 1) * dw < IW))
    if SLIDING:
        if interior:
            accs = _channels_inner_sliding(x_tile, w_c, i_d0, ih, iw, out_ok, c_ok, ID, IH, IW, dd, dh, x_sd, x_sh,
                                           x_sw, w_sd, w_sh, w_sw, KD, KH, KW, BLOCK_H, BLOCK_W, BLOCK_C, False,
                                           DECODE_BF16, BF16)
        else:
            accs = _channels_inner_sliding(x_tile, w_c, i_d0, ih, iw, out_ok, c_ok, ID, IH, IW, dd, dh, x_sd, x_sh,
                                           x_sw, w_sd, w_sh, w_sw, KD, KH, KW, BLOCK_H, BLOCK_W, BLOCK_C, True,
                                           DECODE_BF16, BF16)
        for j in tl.static_range(BLOCK_W):
            value = encode(_channel_epilogue(accs[j], c, c_ok, bias, b_s, mean, var, norm_w, norm_b, eps, HAS_BIAS,
                                             BIAS_FORMAT, NORM, NORM_FORMAT, ACTIVATION, BLOCK_H),
                           out.dtype.element_ty, DST_FORMAT, VIA_F32, False)
            o_off = nb * o_sn + od * o_sd + oh * o_sh + (ow + j) * o_sw
            tl.store(out + o_off[:, None] + c[None, :] * o_sc, value,
                     mask=(out_ok & (ow + j < OW))[:, None] & c_ok[None, :])
    else:
        acc = tl.zeros((BLOCK_H * BLOCK_W, BLOCK_C), dtype=tl.float32)
        if interior:
            acc = _channels_inner_window(acc, x_tile, w_c, i_d0, ih, iw, out_ok, c_ok, ID, IH, IW, dd, dh, dw, x_sd,
                                         x_sh, x_sw, w_sd, w_sh, w_sw, KD, KH, KW, UNROLL, UNROLL_COLUMNS, False,
                                         DECODE_BF16, BF16)
        else:
            acc = _channels_inner_window(acc, x_tile, w_c, i_d0, ih, iw, out_ok, c_ok, ID, IH, IW, dd, dh, dw, x_sd,
                                         x_sh, x_sw, w_sd, w_sh, w_sw, KD, KH, KW, UNROLL, UNROLL_COLUMNS, True,
                                         DECODE_BF16, BF16)
        acc = _channel_epilogue(acc, c, c_ok, bias, b_s, mean, var, norm_w, norm_b, eps, HAS_BIAS, BIAS_FORMAT,
                                NORM, NORM_FORMAT, ACTIVATION, 0)
        _store_positions(out, acc, nb, od, oh, ow, c, out_ok, c_ok, o_sn, o_sc, o_sd, o_sh, o_sw, DST_FORMAT, VIA_F32)


@triton.jit
def conv_stage_channels_inner(src, dst, R, P, PH, PW, s_b, s_r, s_d, s_h, s_w, BLOCK_R: tl.constexpr,
                              BLOCK_P: tl.constexpr, INDEX_64: tl.constexpr):
    """dst[b, p, r] = src[b, r, p] for an operand (B, R, PD, PH, PW) read through its strides, the P = PD * PH
    * PW positions flattened, into a dense dst with R innermost: an NCHW input (R its channels) or weight
    (R its input channels) copied channels-innermost. A program takes BLOCK_P positions x BLOCK_R channels
    of one b (programs ordered b, channel tile, position tile), read with adjacent threads on adjacent
    positions and written with them on adjacent channels (the compiler transposes through shared memory),
    so both sides move whole sectors."""
    pid = tl.program_id(0)
    tiles_p = tl.cdiv(P, BLOCK_P)
    tiles_r = tl.cdiv(R, BLOCK_R)
    b = pid // (tiles_p * tiles_r)
    rest = pid - b * (tiles_p * tiles_r)
    r = (rest // tiles_p) * BLOCK_R + tl.arange(0, BLOCK_R)
    p = (rest % tiles_p) * BLOCK_P + tl.arange(0, BLOCK_P)
    if INDEX_64:
        b = b.to(tl.int64)
        r = r.to(tl.int64)
        p = p.to(tl.int64)
    ok = (r < R)[:, None] & (p < P)[None, :]
    above = p // PW
    p_off = (above // PH) * s_d + (above % PH) * s_h + (p % PW) * s_w
    tile = tl.load(src + b * s_b + r[:, None] * s_r + p_off[None, :], mask=ok, other=0)
    tl.store(dst + b * (P * R) + p[None, :] * R + r[:, None], tile, mask=ok)
