"""Small C extensions for the host's hot paths, built from the sources beside this file on first use and
cached on disk (through Triton's builder, which compiles its own launchers the same way, so a machine that
runs Triton kernels can build these).

- ``cuda_launch.c``: a compiled kernel's launch with its parameters packed once (``device/cuda_launcher``).
- ``block_cache.c``: the caching allocator's hot path: parked blocks, their buffers, the counters
  (``memory/caching``)."""
from __future__ import annotations

import os
import subprocess
import threading

_HERE = os.path.dirname(__file__)
_lock = threading.Lock()
_modules: dict = {}
_failures: dict = {}


def _build(name: str):
    import triton
    from triton.runtime.build import compile_module_from_src
    with open(os.path.join(_HERE, name + ".c")) as f:
        source = f.read()
    # cuda.h comes from the headers Triton bundles; nothing is linked (the driver's entry points are
    # handed over at run time), so no CUDA installation is needed to build
    include = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "include")
    return compile_module_from_src(source, "_nbx_" + name, library_dirs=[], include_dirs=[include], libraries=[])


def module(name: str):
    """The extension built from ``<name>.c``, built on first use. Raises ``RuntimeError`` saying why when
    it cannot be built; the outcome is remembered for the process."""
    with _lock:
        if name not in _modules and name not in _failures:
            try:
                _modules[name] = _build(name)
            except subprocess.CalledProcessError as e:
                _failures[name] = f"compiling {name}.c failed (exit status {e.returncode}): {' '.join(map(str, e.cmd))}"
            except Exception as e:  # noqa: BLE001  (no compiler, no Python headers, an unloadable result)
                _failures[name] = f"{type(e).__name__}: {e}"
    if name not in _modules:
        raise RuntimeError(f"cannot build the _nbx_{name} extension: {_failures[name]}")
    return _modules[name]
