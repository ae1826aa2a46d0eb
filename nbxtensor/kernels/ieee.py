"""Correctly rounded division and square root for any float type. Triton's plain float32 ``/`` and
``sqrt`` are approximate on NVIDIA GPUs; its ``div_rn``/``sqrt_rn`` take float32 only; float64's
plain forms are already IEEE."""
import triton
import triton.language as tl


@triton.jit
def div(a, b):
    if a.dtype == tl.float32:
        return tl.div_rn(a, b.to(tl.float32))
    else:
        return a / b


@triton.jit
def sqrt(x):
    if x.dtype == tl.float32:
        return tl.sqrt_rn(x)
    else:
        return tl.sqrt(x)
