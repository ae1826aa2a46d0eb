"""The process-wide kernel mode, settled before Triton is imported.

Triton decides at import whether ``@triton.jit`` compiles for a GPU or runs kernels through its
interpreter, and its own library functions (``tl.sum``...) are made at that moment, so a process
cannot switch later. nbxtensor settles it once: kernels are compiled when a CUDA GPU is present
and ``NBX_DEVICE`` does not ask for the CPU; otherwise they run interpreted on host memory.
``NBX_KERNEL_MODE=compile-only`` is for the compile check (``scripts/compile_check.py``): kernels are
Triton's compilable functions, and no device runs them.
"""
from __future__ import annotations

import os
import sys

INTERPRETED = "interpreted"
COMPILED = "compiled"
COMPILE_ONLY = "compile-only"  # kernels compile for a GPU target with no GPU present; nothing runs


def cuda_device_count() -> int:
    """Number of CUDA devices the driver reports; 0 without ``cuda-bindings`` or a driver."""
    if os.environ.get("NBX_DEVICE", "").strip().lower().startswith("cpu"):
        return 0
    try:
        from cuda.bindings import driver
    except ImportError:
        return 0
    try:
        (err,) = driver.cuInit(0)
    except (RuntimeError, OSError):  # cuda-bindings present, but no NVIDIA driver library to load
        return 0
    if err != driver.CUresult.CUDA_SUCCESS:
        return 0
    err, count = driver.cuDeviceGetCount()
    return count if err == driver.CUresult.CUDA_SUCCESS else 0


def _decide() -> str:
    if os.environ.get("NBX_KERNEL_MODE", "") == COMPILE_ONLY:
        return COMPILE_ONLY
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


class _RefuseTorch:
    """An import hook that makes ``import torch`` fail, used for one call below."""

    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("nbxtensor keeps torch out of Triton's argument specialisation")
        return None


def keep_triton_off_torch() -> None:
    """Triton's argument specialiser imports torch on its first call, when torch is installed, to
    recognise torch tensors; it remembers the outcome. Making that first call with torch refused keeps
    a process that uses nbxtensor free of torch. A process that imported torch already is left alone."""
    if "torch" in sys.modules:
        return
    import triton.language as tl
    from triton.runtime.jit import mangle_type

    class _Pointer:
        dtype = tl.uint8

        def data_ptr(self):
            return 0

    hook = _RefuseTorch()
    sys.meta_path.insert(0, hook)
    try:
        mangle_type(_Pointer())
    finally:
        sys.meta_path.remove(hook)
