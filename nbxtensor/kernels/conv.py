"""Convolution kernels: an implicit GEMM over N-d (as 3-d) inputs read through their strides.

Rows of the product are output positions (batch x output spatial), columns output channels of one group,
and the reduction runs over kernel positions x input channels of that group; input tiles are gathered
per kernel position with boundary masks (padding, dilation, stride), so no im2col matrix is built. The
transposed form gathers, for each output position, the input positions whose stride lands on it.
"""
import triton
import triton.language as tl

from .copy import _decode, _encode


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
def conv_implicit_gemm(x, w, bias, out, M, COUT_G, CIN_G, OD, OH, OW, ID, IH, IW, KD, KH, KW,
                       sd, sh, sw, pd, ph, pw, dd, dh, dw,
                       x_sn, x_sc, x_sd, x_sh, x_sw, w_s_out, w_s_in, w_sg, w_sd, w_sh, w_sw,
                       o_sn, o_sc, o_sd, o_sh, o_sw,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                       TRANSPOSED: tl.constexpr, HAS_BIAS: tl.constexpr, PRECISION: tl.constexpr,
                       DECODE_BF16: tl.constexpr, BIAS_FORMAT: tl.constexpr, DST_FORMAT: tl.constexpr,
                       VIA_F32: tl.constexpr, INTERPRETED: tl.constexpr):
    """out[n, g * COUT_G + j, o] = bias + sum over c < CIN_G and kernel positions of x * w; program
    (tile, g) takes one BLOCK_M x BLOCK_N tile of group g."""
    pid = tl.program_id(0)
    g = tl.program_id(1)
    tiles_n = tl.cdiv(COUT_G, BLOCK_N)
    rm = (pid // tiles_n) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = (pid % tiles_n) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    m_ok = rm < M
    ow = rm % OW
    rest = rm // OW
    oh = rest % OH
    rest = rest // OH
    od = rest % OD
    nb = rest // OD
    n_ok = rn < COUT_G
    x_base = x + nb * x_sn + g * CIN_G * x_sc
    w_base = w + g * w_sg + rn * w_s_out
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    positions = KD * KH * KW
    p = 0
    while p < positions:
        kw = p % KW
        kh = (p // KW) % KH
        kd = p // (KW * KH)
        i_d, ok_d = _source_index(od, kd, sd, pd, dd, ID, TRANSPOSED)
        i_h, ok_h = _source_index(oh, kh, sh, ph, dh, IH, TRANSPOSED)
        i_w, ok_w = _source_index(ow, kw, sw, pw, dw, IW, TRANSPOSED)
        row_ok = m_ok & ok_d & ok_h & ok_w
        row_off = tl.where(row_ok, i_d * x_sd + i_h * x_sh + i_w * x_sw, 0)
        w_pos = w_base + kd * w_sd + kh * w_sh + kw * w_sw
        c = 0
        while c < CIN_G:
            ck = c + rk
            k_ok = ck < CIN_G
            a = tl.load(x_base[:, None] + row_off[:, None] + ck[None, :] * x_sc,
                        mask=row_ok[:, None] & k_ok[None, :], other=0)
            b = tl.load(w_pos[None, :] + ck[:, None] * w_s_in, mask=k_ok[:, None] & n_ok[None, :], other=0)
            if DECODE_BF16:
                a = _decode(a, 1)
                b = _decode(b, 1)
            acc = tl.dot(a, b, acc, input_precision=PRECISION, out_dtype=tl.float32)
            c += BLOCK_K
        p += 1
    co = g * COUT_G + rn
    if HAS_BIAS:
        bv = _decode(tl.load(bias + co, mask=n_ok, other=0), BIAS_FORMAT).to(tl.float32)
        acc = acc + bv[None, :]
    value = _encode(acc, out.dtype.element_ty, DST_FORMAT, VIA_F32, False)
    o_off = nb * o_sn + od * o_sd + oh * o_sh + ow * o_sw
    tl.store(out + o_off[:, None] + co[None, :] * o_sc, value, mask=m_ok[:, None] & n_ok[None, :])
