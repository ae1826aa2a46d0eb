"""The process-wide kernel mode, settled before Triton is imported.

Triton decides at import whether ``@triton.jit`` compiles for a GPU or runs kernels through its
interpreter, and its own library functions (``tl.sum``...) are made at that moment, so a process
cannot switch later. nbxtensor settles it once: kernels are compiled when a CUDA GPU is present
and ``NBX_DEVICE`` does not ask for the CPU; otherwise they run interpreted on host memory.
"""
from __future__ import annotations

import os
import sys

INTERPRETED = "interpreted"
COMPILED = "compiled"


def cuda_device_count() -> int:
    """Number of CUDA devices the driver reports; 0 without ``cuda-bindings`` or a driver."""
    if os.environ.get("NBX_DEVICE", "").strip().lower().startswith("cpu"):
        return 0
    try:
        from cuda.bindings import driver
    except ImportError:
        return 0
    (err,) = driver.cuInit(0)
    if err != driver.CUresult.CUDA_SUCCESS:
        return 0
    err, count = driver.cuDeviceGetCount()
    return count if err == driver.CUresult.CUDA_SUCCESS else 0


def _decide() -> str:
    if os.environ.get("TRITON_INTERPRET", "") == "1":
        return INTERPRETED
    return COMPILED if cuda_device_count() > 0 else INTERPRETED


KERNEL_MODE = _decide()
if KERNEL_MODE == INTERPRETED:
    if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
        raise ImportError(
            "nbxtensor needs Triton's interpreter here (no CUDA GPU, or NBX_DEVICE=cpu), but triton was "
            "imported first without it; import nbxtensor before triton, or set TRITON_INTERPRET=1")
    os.environ["TRITON_INTERPRET"] = "1"
