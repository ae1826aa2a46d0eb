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


def lighten_nested_calls() -> None:
    """Under Triton's interpreter, every call of a nested ``@triton.jit`` function re-patches the language
    modules its globals hold (an ``inspect.getmembers`` walk of ``triton.language``, about 0.3 ms a call;
    a kernel with a dozen helpers paid more for it than for its arithmetic). Within one kernel run those
    modules stay patched once patched (Triton undoes only the run's own patch, at its end), so here a run
    remembers which modules it has patched and a nested call patches only the ones its run has not."""
    if KERNEL_MODE != INTERPRETED:
        return
    import inspect
    import threading

    import triton.language as tl
    from triton.runtime import interpreter

    needs = ("_patch_lang", "GridExecutor", "InterpretedFunction", "InterpreterError")
    if not all(hasattr(interpreter, name) for name in needs) or not hasattr(interpreter.InterpretedFunction,
                                                                            "rewrite"):
        return  # a Triton whose interpreter is laid out otherwise runs as it ships, only slower
    run_kernel = interpreter.GridExecutor.__call__
    state = threading.local()
    language = (tl, tl.core)
    known: dict = {}  # function -> ids of the language modules its globals hold

    def modules_of(fn) -> frozenset:
        found = known.get(fn)
        if found is None:
            found = known[fn] = frozenset(id(v) for v in fn.__globals__.values()
                                          if inspect.ismodule(v) and v in language)
        return found

    def run(self, *args, **kwargs):
        outer = getattr(state, "patched", None)
        state.patched = set(modules_of(self.fn))  # the run patches these before its first program
        try:
            return run_kernel(self, *args, **kwargs)
        finally:
            state.patched = outer

    def call_nested(self, *args, **kwargs):
        patched = getattr(state, "patched", None)
        needed = modules_of(self.fn)
        if patched is None or not needed <= patched:
            interpreter._patch_lang(self.fn)
            if patched is not None:
                patched |= needed
        fn = self.rewrite()
        try:
            return fn(*args, **kwargs)
        except Exception as error:
            raise interpreter.InterpreterError(repr(error)) from error

    interpreter.GridExecutor.__call__ = run
    interpreter.InterpretedFunction.__call__ = call_nested



def drop_unasserted_overflow_checks() -> None:
    """Under Triton's interpreter every integer ``+``, ``-`` and ``*`` below 64 bits (index arithmetic:
    offsets, strides, masks) redoes itself in int64, compares the result with the type's bounds and hands
    the verdict to ``device_assert``, which does nothing unless the interpreter's options say debug. With
    debug off those checks cost about a third of a kernel's run and cannot change anything it does, so they
    are switched off then; with debug on they stay."""
    if KERNEL_MODE != INTERPRETED:
        return
    import dataclasses

    from triton.runtime import interpreter

    builder = getattr(interpreter, "interpreter_builder", None)
    options = getattr(builder, "options", None)
    if options is None or not dataclasses.is_dataclass(options) or not hasattr(options, "sanitize_overflow"):
        return  # a Triton whose interpreter is laid out otherwise runs as it ships, only slower
    if not getattr(options, "debug", False):
        builder.options = dataclasses.replace(options, sanitize_overflow=False)
