"""The complex pointwise bodies, for ``pointwise.pointwise_complex``: ``(ar, ai, br, bi, MODE) -> (re, im)``,
or the real part and anything for ops whose result is real (abs, angle)."""
import triton
import triton.language as tl
from triton.language.extra import libdevice

from .pointwise_bodies import _ones, _zeros

# complex_eq's MODE
COMPLEX_EQ = tl.constexpr(0)
COMPLEX_NE = tl.constexpr(1)


@triton.jit
def complex_add(ar, ai, br, bi, MODE: tl.constexpr):
    return ar + br, ai + bi


@triton.jit
def complex_sub(ar, ai, br, bi, MODE: tl.constexpr):
    return ar - br, ai - bi


@triton.jit
def complex_mul(ar, ai, br, bi, MODE: tl.constexpr):
    return ar * br - ai * bi, ar * bi + ai * br


@triton.jit
def _cdiv(x, y):
    if x.dtype == tl.float32:
        return tl.div_rn(x, y)
    else:
        return x / y


@triton.jit
def complex_div(ar, ai, br, bi, MODE: tl.constexpr):
    """Smith's scaled division, as c10::complex (and NumPy) divide."""
    abs_r = tl.abs(br)
    abs_i = tl.abs(bi)
    real_larger = abs_r >= abs_i
    both_zero = (abs_r == 0) & (abs_i == 0)
    # |br| >= |bi|
    rat1 = _cdiv(bi, tl.where(both_zero, 1, br))
    scl1 = _cdiv(_ones(ar), br + bi * rat1)
    re1 = (ar + ai * rat1) * scl1
    im1 = (ai - ar * rat1) * scl1
    re1 = tl.where(both_zero, _cdiv(ar, abs_r), re1)
    im1 = tl.where(both_zero, _cdiv(ai, abs_i), im1)
    # |bi| > |br|
    rat2 = _cdiv(br, tl.where(real_larger, 1, bi))
    scl2 = _cdiv(_ones(ar), bi + br * rat2)
    re2 = (ar * rat2 + ai) * scl2
    im2 = (ai * rat2 - ar) * scl2
    return tl.where(real_larger, re1, re2), tl.where(real_larger, im1, im2)


@triton.jit
def complex_abs(ar, ai, br, bi, MODE: tl.constexpr):
    return libdevice.hypot(ar, ai), ai


@triton.jit
def complex_angle(ar, ai, br, bi, MODE: tl.constexpr):
    return libdevice.atan2(ai, ar), ai


@triton.jit
def complex_conj(ar, ai, br, bi, MODE: tl.constexpr):
    return ar, ai * -1.0


@triton.jit
def complex_neg(ar, ai, br, bi, MODE: tl.constexpr):
    return ar * -1.0, ai * -1.0


@triton.jit
def complex_sgn(ar, ai, br, bi, MODE: tl.constexpr):
    """z / |z| by components, and 0 for 0, as ATen's CUDA and vectorised CPU kernels compute it."""
    magnitude = libdevice.hypot(ar, ai)
    zero = magnitude == 0
    safe = tl.where(zero, _ones(magnitude), magnitude)
    return tl.where(zero, _zeros(ar), _cdiv(ar, safe)), tl.where(zero, _zeros(ai), _cdiv(ai, safe))


@triton.jit
def complex_exp(ar, ai, br, bi, MODE: tl.constexpr):
    magnitude = libdevice.exp(ar)
    return magnitude * libdevice.cos(ai), magnitude * libdevice.sin(ai)


@triton.jit
def complex_eq(ar, ai, br, bi, MODE: tl.constexpr):
    """MODE COMPLEX_EQ: equal; COMPLEX_NE: not equal. The result is real (0 or 1)."""
    same = (ar == br) & (ai == bi)
    if MODE == COMPLEX_NE:
        same = same == 0
    return same.to(ar.dtype), ai
