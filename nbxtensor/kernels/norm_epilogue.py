"""An inference batch norm and an activation applied to a float32 accumulator before its one rounding: the
epilogue that the convolution kernels and the matrix products (a 1x1 convolution's route) share.

The norm maps y to (y - mean) * scale + shift per output channel, scale = weight / sqrt(var + eps) formed
from the running statistics per tile, correctly rounded; the activation is the pointwise ops' own body, so
the fused step computes what the unfused activation would."""
import triton
import triton.language as tl

from .formats import decode
from .ieee import div, sqrt
from .pointwise_bodies import hardswish, hardtanh, relu, silu
from .pointwise_codes import CAT_FLOAT32

# the activation after a fused batch norm
ACT_NONE = tl.constexpr(0)
ACT_RELU = tl.constexpr(1)
ACT_SILU = tl.constexpr(2)
ACT_RELU6 = tl.constexpr(3)
ACT_HARDSWISH = tl.constexpr(4)


@triton.jit
def norm_parameters(c, c_ok, mean, var, weight, shift, eps, NORM_FORMAT: tl.constexpr):
    """(mean, scale, shift) of output channels ``c`` as float32: the norm maps y to (y - mean) * scale +
    shift, scale = weight / sqrt(var + eps)."""
    m = decode(tl.load(mean + c, mask=c_ok, other=0), NORM_FORMAT).to(tl.float32)
    v = decode(tl.load(var + c, mask=c_ok, other=1), NORM_FORMAT).to(tl.float32)
    w = decode(tl.load(weight + c, mask=c_ok, other=1), NORM_FORMAT).to(tl.float32)
    b = decode(tl.load(shift + c, mask=c_ok, other=0), NORM_FORMAT).to(tl.float32)
    return m, div(w, sqrt(v + eps)), b


@triton.jit
def activated(y, ACTIVATION: tl.constexpr):
    """``y`` (float32) through ACTIVATION: the pointwise ops' own bodies."""
    if ACTIVATION == ACT_RELU:
        return relu(y, 0, 0, 0, 0, CAT_FLOAT32)
    elif ACTIVATION == ACT_SILU:
        return silu(y, 0, 0, 0, 0, CAT_FLOAT32)
    elif ACTIVATION == ACT_RELU6:
        return hardtanh(y, 0.0, 6.0, 0, 0, CAT_FLOAT32)
    elif ACTIVATION == ACT_HARDSWISH:
        return hardswish(y, 0, 0, 0, 0, CAT_FLOAT32)
    else:
        return y
