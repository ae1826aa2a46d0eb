"""Compile recorded kernel launches for a GPU target on a machine without a GPU.

Triton's interpreter runs kernels that the GPU compiler refuses (a global that is not a constexpr, a
constexpr rebound in an unrolled loop, a tile shape an MMA cannot take), so the CPU suite alone does not
prove a kernel compiles. Record the launches of any run with ``NBX_RECORD_LAUNCHES=FILE`` (interpreted),
then compile each distinct specialisation here:

    NBX_RECORD_LAUNCHES=/tmp/launches.jsonl python3 -m pytest -q tests/test_sorting.py
    python3 scripts/compile_check.py /tmp/launches.jsonl [--target 90] [--jobs 2] [--limit-per-kernel N]
                                     [--ptx-dir DIR]

Interpreter-only switches (``INTERPRETED``, ``DECODE_BF16``, ``INLINE_ASM``) are compiled as a GPU would set
them, and so is ``PDL`` (programmatic dependent launch, ``kernels/dependent_launch.py``): true where the facts file of
the target's class names ``programmatic_dependent_launch``. Pointers to float8 e4m3 tensors are compiled as
pointers to bytes for a target whose class has no float8 conversions (facts ``native_fp8``), as such a GPU
passes them (``Backend.kernel_element_type``). A specialisation compiled with ``PDL`` true
must wait (``griddepcontrol.wait``) before its PTX touches global memory or branches, and signal its
dependents; one that does not is a failure. A record made with ``DECODE_BF16`` true (bfloat16 rows the
interpreter widens) compiles with the bfloat16 ``DOT`` a GPU takes where the kernel has one.
Every specialisation's TTGIR is also checked for MMA v2 dot operands whose K tile is shorter than 4 x kWidth
(``short_dot_operands``): Triton 3.6 lowers those (a tile converted in registers from narrower integers or floats
gets kWidth 8) to an ``mma.m16n8k16`` that reads half of the K inputs twice, silently wrong on the GPU.
Prints one line per failure and a summary; exits 1 when any specialisation fails to compile. With
``--ptx-dir``, each specialisation's PTX is written there, named by its kernel and a hash of the launch
record, so that two runs over the same records (before and after a change to kernel code that must not
change what it compiles to) can be compared file by file.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import importlib
import json
import os
import re
import sys
import time
import traceback
from pathlib import Path

import yaml

_GPU_SETTINGS = {"INTERPRETED": False, "DECODE_BF16": False, "INLINE_ASM": True}
_PDL = "PDL"
_FACTS = Path(__file__).resolve().parents[1] / "nbxtensor" / "device" / "facts"
# PTX lines that may reach global memory (a load, store, atomic, copy or prefetch not named as one of the
# parameter, shared, local or constant spaces), that leave the entry block, and the labels branches jump to
_MEMORY_ACCESS = re.compile(r"^\s*(@!?%\w+\s+)?(ld|ldu|st|atom|red|cp|prefetch|multimem)\b"
                            r"(?!\.(param|shared|local|const)\b)")
_CONTROL_FLOW = re.compile(r"^\s*(@!?%\w+\s+)?(bra|ret|exit)\b")
_LABEL = re.compile(r"^\s*([$\w]+):")
_BRANCH_TARGET = re.compile(r"\bbra(?:\.uni)?\s+([$\w]+)\s*;")
_LAYOUT_DEFINITION = re.compile(r"^(#\w+) = (#ttg\.\w+<.*>)$", re.M)
_DOT_OPERAND = re.compile(r"tensor<((?:\d+x)+)(\w+), #ttg\.dot_op<\{opIdx = (\d), parent = (#\w+), kWidth = (\d+)\}>>")
_DOT_OP = re.compile(r"= tt\.dot ")
# MMA v2 spreads an operand's K tile over 4 threads of kWidth inputs each
_THREADS_ALONG_K = 4


def _target_facts(capability: int) -> dict:
    """The facts file of the class of compute ``capability``, or ``generic_cuda``'s, which a GPU no file
    matches derives its facts from. Read directly: importing nbxtensor here would settle Triton's mode."""
    major, minor = divmod(capability, 10)
    for path in sorted(_FACTS.glob("*.yaml")):
        facts = yaml.safe_load(path.read_text())
        match = facts.get("match", {})
        if match.get("type") == "cuda" and [major, minor] in match.get("capability", []):
            return facts
    return yaml.safe_load((_FACTS / "generic_cuda.yaml").read_text())


def target_settings(capability: int) -> dict:
    """The constexprs a GPU of compute ``capability`` sets where the interpreter set others (module
    docstring)."""
    dependent_launch = bool(_target_facts(capability)["kernels"].get("programmatic_dependent_launch"))
    return {**_GPU_SETTINGS, _PDL: dependent_launch}


def target_pointer_types(capability: int) -> dict:
    """The element types a GPU of compute ``capability`` passes pointers to tensors of a recorded type as, where
    they differ (``Backend.kernel_element_type``): e4m3 as bytes where its class has no float8 conversions."""
    return {} if _target_facts(capability).get("native_fp8") else {"fp8e4nv": "uint8"}


def dependent_launch_problem(ptx: str) -> str | None:
    """Why a kernel compiled with ``PDL`` true breaks the rule that its launch attribute relies on (it
    waits first, in the entry block, before any global memory access, and signals its dependents), or
    None when it keeps it."""
    for instruction in ("griddepcontrol.wait", "griddepcontrol.launch_dependents"):
        if instruction not in ptx:
            return f"has no {instruction}"
    targets = set(_BRANCH_TARGET.findall(ptx))
    for line in ptx[ptx.index(".entry"):].splitlines():
        if "griddepcontrol.wait" in line:
            return None
        if _MEMORY_ACCESS.match(line):
            return f"touches global memory before griddepcontrol.wait: {line.strip()!r}"
        label = _LABEL.match(line)
        if _CONTROL_FLOW.match(line) or (label and label.group(1) in targets):
            return f"branches before griddepcontrol.wait: {line.strip()!r}"
    return None


def short_dot_operands(ttgir: str) -> list[tuple[int, str, int, int]]:
    """(opIdx, element type, K tile, kWidth) of each distinct MMA v2 dot operand in ``ttgir`` whose K tile is
    shorter than 4 x kWidth: threads along K then repeat inputs and the lowered MMA counts half the tile twice."""
    parents = dict(_LAYOUT_DEFINITION.findall(ttgir))
    # the operands' types on the dots themselves: a tile broadcast along K (a row's scale) may hold a dot
    # operand layout over a K of 1 before it is widened, which the matrix unit never reads
    operand_types = " ".join(line.split(" : ", 1)[-1] for line in ttgir.splitlines() if _DOT_OP.search(line))
    short = set()
    for dims, element, operand, parent, width in _DOT_OPERAND.findall(operand_types):
        if "versionMajor = 2" not in parents.get(parent, ""):
            continue
        shape = [int(d) for d in dims.rstrip("x").split("x")]
        k = shape[-1] if operand == "0" else shape[-2]
        if k < _THREADS_ALONG_K * int(width):
            short.add((int(operand), element, k, int(width)))
    return sorted(short)


def _representative(described: dict, pointer_types: dict | None = None) -> dict:
    """An argument that Triton specialises as it does ``described``: integers by whether they equal 1,
    divide by 16 and fit 32 bits; floats as floats; tuples element by element; pointers to the element type
    that ``pointer_types`` maps the recorded one to, if any."""
    if "tuple" in described:
        return {"tuple": [_representative(v, pointer_types) for v in described["tuple"]]}
    if "pointer" in described:
        return dict(described, pointer=(pointer_types or {}).get(described["pointer"], described["pointer"]))
    value = described.get("value")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return described
    if isinstance(value, float):
        return {"value": 1.5}
    wide = not -2 ** 31 <= value < 2 ** 31
    if value == 1:
        return {"value": 1}
    return {"value": (2 ** 36 if wide else 16) if value % 16 == 0 else (2 ** 36 + 3 if wide else 3)}


def distinct_launches(path: str, limit_per_kernel: int | None, all_arguments: bool = False,
                      settings: dict = _GPU_SETTINGS, pointer_types: dict | None = None) -> list[dict]:
    """The recorded launches, one per (kernel, constexprs) in first-seen order, or with ``all_arguments``
    one per (kernel, constexprs, argument specialisation); with ``limit_per_kernel``, at most that many
    constexpr sets of each kernel. Constexprs named in ``settings`` take its values, pointers the element
    types ``pointer_types`` maps theirs to."""
    seen, per_kernel, out = set(), {}, []
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            record["args"] = [_representative(a, pointer_types) for a in record["args"]]
            if record["constexprs"].get("DECODE_BF16") is True and "DOT" in record["constexprs"]:
                record["constexprs"]["DOT"] = {"dtype": "bf16"}
            for name, value in settings.items():
                if name in record["constexprs"]:
                    record["constexprs"][name] = value
            marker = json.dumps(record if all_arguments else [record["module"], record["kernel"],
                                                              record["constexprs"]], sort_keys=True)
            if marker in seen:
                continue
            seen.add(marker)
            kernel = (record["module"], record["kernel"])
            shapes = per_kernel.setdefault(kernel, set())
            constexprs = json.dumps(record["constexprs"], sort_keys=True)
            if limit_per_kernel is not None and constexprs not in shapes and len(shapes) >= limit_per_kernel:
                continue
            shapes.add(constexprs)
            out.append(record)
    return out


def _install_compile_only_driver(capability: int) -> None:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.driver import CudaDriver

    class CompileOnlyDriver(CudaDriver):
        def __init__(self):  # no CUDA utilities: nothing is loaded or launched
            self.target = GPUTarget("cuda", capability, 32)

        @staticmethod
        def is_active():
            return True

        def get_current_target(self):
            return self.target

        def get_current_device(self):
            return 0

        def get_current_stream(self, device=None):
            return 0

    triton.runtime.driver.set_active(CompileOnlyDriver())


def _arguments(record: dict):
    import triton.language as tl
    from nbxtensor.device.backend import KernelPointer

    def build(described):
        if "pointer" in described:
            return KernelPointer(0 if described["aligned"] else 8, tl.dtype(described["pointer"]))
        if "tuple" in described:
            return tuple(build(v) for v in described["tuple"])
        return described["value"]

    def constant(value):
        if isinstance(value, dict) and "dtype" in value:
            return tl.dtype(value["dtype"])
        if isinstance(value, dict) and "function" in value:
            module, name = value["function"]
            return getattr(importlib.import_module(module), name)
        return value
    return [build(a) for a in record["args"]], {k: constant(v) for k, v in record["constexprs"].items()}


def _compile(record: dict) -> tuple[str, float | None, str | None, str | None]:
    """(kernel name, seconds to compile or None for a kernel its module lists as never launched on a GPU
    (``INTERPRETER_ONLY``), the failure or None, the PTX or None). Runs in a worker, whose Triton compiles:
    importing the kernels' modules in the parent would settle it, and the workers forked from it, as
    interpreted."""
    module = importlib.import_module(record["module"])
    kernel = getattr(module, record["kernel"])
    name = f"{record['module'].rsplit('.', 1)[-1]}.{record['kernel']}"
    if record["kernel"] in getattr(module, "INTERPRETER_ONLY", ()):
        return name, None, None, None
    start = time.perf_counter()
    try:
        args, constexprs = _arguments(record)
        dependent = constexprs.get(_PDL) is True
        compiled = kernel.warmup(*args, grid=(1,), **constexprs, launch_pdl=dependent)
        problem = dependent_launch_problem(compiled.asm["ptx"]) if dependent else None
        if problem is not None:
            raise RuntimeError(f"compiled with PDL, it {problem}")
        short = short_dot_operands(compiled.asm["ttgir"])
        if short:
            raise RuntimeError("MMA v2 dot operands with a K tile under 4 x kWidth (opIdx, type, K, kWidth), "
                               f"wrong on the GPU: {short}")
    except Exception as e:  # noqa: BLE001  (every failure is reported, with what was compiled)
        root = e
        while root.__cause__ is not None:  # Triton wraps the real error once per nested jit call
            root = root.__cause__
        reason = "".join(traceback.format_exception_only(type(root), root)).strip().splitlines()[-1]
        settings = {k: v for k, v in record["constexprs"].items() if not isinstance(v, dict)}
        return name, time.perf_counter() - start, f"{reason[:400]} [constexprs {settings}]", None
    return name, time.perf_counter() - start, None, compiled.asm["ptx"]


def ptx_file_name(name: str, record: dict) -> str:
    """The file a specialisation's PTX is written to: its kernel's name and a hash of its launch record."""
    digest = hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()[:16]
    return f"{name}.{digest}.ptx"


def _worker_init(capability: int) -> None:
    os.environ["NBX_KERNEL_MODE"] = "compile-only"
    os.environ.pop("TRITON_INTERPRET", None)
    import nbxtensor  # noqa: F401  (settles the kernel mode before Triton is imported)
    _install_compile_only_driver(capability)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records")
    parser.add_argument("--target", type=int, default=90, help="compute capability, e.g. 90 for Hopper")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--limit-per-kernel", type=int, default=None)
    parser.add_argument("--all-arguments", action="store_true",
                        help="also compile each specialisation of the non-constexpr arguments")
    parser.add_argument("--ptx-dir", type=Path, default=None,
                        help="write each specialisation's PTX into this folder (compare two runs with diff -r)")
    args = parser.parse_args(argv)
    records = distinct_launches(args.records, args.limit_per_kernel, args.all_arguments, target_settings(args.target),
                                target_pointer_types(args.target))
    failures, timings, interpreter_only = [], [], 0
    if args.ptx_dir is not None:
        args.ptx_dir.mkdir(parents=True, exist_ok=True)
    with concurrent.futures.ProcessPoolExecutor(args.jobs, initializer=_worker_init,
                                                initargs=(args.target,)) as pool:
        for record, (name, seconds, error, ptx) in zip(records, pool.map(_compile, records)):
            if seconds is None:
                interpreter_only += 1
                continue
            if ptx is not None and args.ptx_dir is not None:
                (args.ptx_dir / ptx_file_name(name, record)).write_text(ptx)
            timings.append((seconds, name))
            if error:
                failures.append(f"{name}: {error}")
                print(f"FAIL {name}: {error}", flush=True)
    slowest = ", ".join(f"{n} {s:.1f}s" for s, n in sorted(timings, reverse=True)[:5])
    dependent = sum(record["constexprs"].get(_PDL) is True for record in records)
    print(f"compiled {len(timings) - len(failures)} of {len(timings)} specialisations for sm_{args.target} "
          f"({dependent} with programmatic dependent launch); {len(failures)} failed; "
          f"{interpreter_only} interpreter-only skipped; slowest: {slowest}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
