"""SASS instructions per packed int4 word in the K loop of ``int4_gemv`` and ``int4_gemm`` (and of
``quantized_gemv_prologue``, one row of int4 words behind an RMS norm, an add and RMS norm, or a gated
activation), and per 32-bit word of int8 or float8 bytes (4 weights) in ``quantized_gemv``'s, compiled for a GPU
target on a machine without one (``compile_check.py``'s compile-only driver):

    python3 scripts/int4_sass.py [--target 90] [--portable] [--dump DIR] [--only TEXT]

Each case compiles one specialisation at a representative tuned shape; the loop is the longest range a backward
branch closes, and its instructions are divided by the packed words one thread reads an iteration
(BLOCK_K / 8 * BLOCK_N / (32 * num_warps); BLOCK_K / 4 * ... for bytes). ``--portable`` compiles the float32
tile path (INLINE_ASM false). Each line also counts what a step of the loop waits on (barriers, global loads it
consumes, shared-memory stores of layout exchanges, L1 prefetches) and gives the registers a thread and the
shared memory a program takes.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]

import compile_check  # noqa: E402

# (kernel, rows' type, BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages, one group a K tile): tuned shapes
_SHAPES = [("int4_gemv", "bf16", 1, 128, 128, 4, None, True), ("int4_gemv", "bf16", 1, 256, 64, 4, None, False),
           ("int4_gemv", "fp16", 1, 128, 128, 4, None, True), ("int4_gemv", "bf16", 16, 128, 128, 4, None, True),
           ("int4_gemv", "fp16", 16, 128, 128, 4, None, True), ("int4_gemv", "bf16", 16, 256, 64, 4, None, False),
           ("int4_gemv", "bf16", 16, 64, 128, 4, None, True), ("int4_gemv", "bf16", 16, 128, 128, 8, None, True),
           ("int4_gemm", "bf16", 128, 256, 64, 8, 3, True), ("int4_gemm", "fp16", 128, 256, 64, 8, 3, True)]
# ``int4_gemv``'s swapped form (the weight tile the dot's first operand) at tuned 2-16 rows shapes
_SWAPPED_SHAPES = [("bf16", 128, 128, 4), ("fp16", 128, 128, 4), ("bf16", 64, 128, 4), ("bf16", 256, 128, 8)]
# ``int4_gemv``'s one row with its K loop pipelined (LOOP_STAGES): (rows' type, BLOCK_N, BLOCK_K, warps, stages)
_PIPELINED_SHAPES = [("bf16", 128, 128, 4, 3), ("bf16", 128, 256, 4, 3), ("fp16", 128, 128, 4, 4)]
# (weight format, rows' type, BLOCK_M, BLOCK_N, BLOCK_K, num_warps, scales): tuned shapes of ``quantized_gemv``,
# scales per channel or per 128 x 128 block
_BYTE_SHAPES = [("int8", "bf16", 16, 64, 128, 4, "channel"), ("fp8", "bf16", 16, 64, 128, 4, "channel"),
                ("int8", "bf16", 16, 32, 256, 4, "channel"), ("fp8", "bf16", 16, 32, 256, 4, "channel"),
                ("int8", "fp16", 16, 64, 128, 4, "channel"), ("fp8", "bf16", 16, 32, 256, 4, "block"),
                ("int8", "bf16", 1, 64, 128, 4, "channel"), ("fp8", "bf16", 1, 64, 128, 4, "channel"),
                ("int8", "fp16", 1, 32, 256, 4, "channel")]
_BYTE_TYPES = {"int8": ("int8", 1), "fp8": ("fp8e4nv", 2)}  # pointer type, WEIGHT


def _name(kernel, rows, m, bn, bk, warps, one_group) -> str:
    tile = f"gemm {rows} {m}x{bn}x{bk}" if kernel == "int4_gemm" else f"gemv {m} row{'s' * (m > 1)} {rows} {bn}x{bk}"
    return f"{tile} w{warps} {'one group' if one_group else 'groups of 32'}"


# name: (kernel, rows' and scales' type, constexprs)
CASES = {_name(kernel, rows, m, bn, bk, warps, one_group):
         (kernel, rows, dict(BLOCK_M=m, BLOCK_N=bn, BLOCK_K=bk, num_warps=warps, ONE_GROUP=one_group,
                             **({} if stages is None else {"num_stages": stages})))
         for kernel, rows, m, bn, bk, warps, stages, one_group in _SHAPES}
CASES.update({f"gemv 16 rows {rows} {bn}x{bk} w{warps} one group swapped":
              ("int4_gemv", rows, dict(BLOCK_M=16, BLOCK_N=bn, BLOCK_K=bk, num_warps=warps, ONE_GROUP=True,
                                       SWAPPED=True))
              for rows, bn, bk, warps in _SWAPPED_SHAPES})
CASES.update({f"gemv 1 row {rows} {bn}x{bk} w{warps} one group pipelined {stages}":
              ("int4_gemv", rows, dict(BLOCK_M=1, BLOCK_N=bn, BLOCK_K=bk, num_warps=warps, ONE_GROUP=True,
                                       LOOP_STAGES=stages))
              for rows, bn, bk, warps, stages in _PIPELINED_SHAPES})
CASES.update({f"gemv {m} row{'s' * (m > 1)} {rows} {weight} {bn}x{bk} w{warps} per {scales}":
              ("quantized_gemv", rows, dict(BLOCK_M=m, BLOCK_N=bn, BLOCK_K=bk, num_warps=warps, WEIGHT=weight,
                                            SCALES=scales))
              for weight, rows, m, bn, bk, warps, scales in _BYTE_SHAPES})
# ``quantized_gemv_prologue`` at the one-row int4 shapes above: (rows' type, BLOCK_N, BLOCK_K, warps, stages)
_PROLOGUE_SHAPES = [("bf16", 128, 128, 4, None), ("fp16", 128, 128, 4, None), ("bf16", 128, 128, 4, 3)]
# prologue name: (PROLOGUE, HAS_RESIDUAL)
_PROLOGUES = {"rms norm": (1, False), "add rms norm": (1, True), "act and mul": (2, False)}
CASES.update({f"gemv 1 row {rows} {bn}x{bk} w{warps} one group{f' pipelined {stages}' if stages else ''} prologue "
              f"{prologue}": ("quantized_gemv_prologue", rows,
                              dict(BLOCK_N=bn, BLOCK_K=bk, num_warps=warps, ONE_GROUP=True, LOOP_STAGES=stages,
                                   PROLOGUE=_PROLOGUES[prologue][0], HAS_RESIDUAL=_PROLOGUES[prologue][1]))
              for rows, bn, bk, warps, stages in _PROLOGUE_SHAPES for prologue in _PROLOGUES})
FORMATS = {"fp16": 0, "bf16": 1}  # SCALE_FORMAT as the host passes it on a GPU (``lowering.load_format``)
_INSTRUCTION = re.compile(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);")
_REGISTERS = re.compile(r"REG:(\d+)")


def record(kernel: str, rows: str, constexprs: dict, inline_asm: bool) -> dict:
    """A launch record as ``NBX_RECORD_LAUNCHES`` writes one: Llama-size K and N, 16 rows or 2048."""
    pointer = lambda t: {"pointer": t, "aligned": True}  # noqa: E731
    value = lambda v: {"value": v}  # noqa: E731
    if kernel == "quantized_gemv":
        return byte_record(rows, constexprs, pointer, value)
    if kernel == "quantized_gemv_prologue":
        return prologue_record(rows, constexprs, inline_asm, pointer, value)
    pointers = [pointer(rows), pointer("int32"), pointer(rows), pointer("uint8"), pointer(rows), pointer(rows)]
    strides = [value(4096), value(1)] * 4 + [value(1), value(4096), value(1)]
    if kernel == "int4_gemv":
        # the partial sums (K split in four) and the arrival counters of the last split to finish
        args = pointers + [pointer("fp32"), pointer("int32"), value(16), value(4096), value(4096), value(1024)]
        args += strides
        fixed = dict(PDL=True, SPLIT=True, COMBINE=True, SWAPPED=False, LOOP_STAGES=None)
    else:
        args = pointers + [value(2048), value(4096), value(4096)] + strides
        fixed = dict(GROUP_M=8)
    return {"module": "nbxtensor.kernels.quant", "kernel": kernel, "args": args,
            "constexprs": dict(fixed, SCALE_FORMAT=FORMATS[rows], DOT={"dtype": rows}, PRECISION="ieee",
                               DECODE_BF16=False, HAS_BIAS=False, BIAS_FORMAT=0, DST_FORMAT=0, VIA_F32=True,
                               INDEX_64=False, INTERPRETED=False, INLINE_ASM=inline_asm, EVEN_K=True,
                               GROUP_SIZE=128 if constexprs["ONE_GROUP"] else 32, **constexprs)}


def byte_record(rows: str, constexprs: dict, pointer, value) -> dict:
    """``record`` for ``quantized_gemv``: an (N, K) int8 or float8 weight with float32 scales per channel or
    per 128 x 128 block."""
    constexprs = dict(constexprs)
    q_type, weight = _BYTE_TYPES[constexprs["WEIGHT"]]
    # (group size, scale_block_n, s_sg, s_sn): one group along K, or blocks of 128 along both
    block = constexprs.pop("SCALES") == "block"
    scaling = (128, 128, 32, 1) if block else (4096, 1, 0, 1)
    args = [pointer(rows), pointer(q_type), pointer("fp32"), pointer("fp32"), pointer("fp32"), pointer(rows),
            pointer(rows), pointer("fp32"), pointer("int32"), value(16), value(4096), value(4096), value(1024),
            *map(value, scaling[:2]), value(4096), value(1), value(1), value(4096), *map(value, scaling[2:]),
            value(0), value(0), value(1), value(4096), value(1)]
    return {"module": "nbxtensor.kernels.quant", "kernel": "quantized_gemv", "args": args,
            "constexprs": dict(constexprs, WEIGHT=weight, SPLIT=True, COMBINE=True, SCALE_FORMAT=0, HAS_G_IDX=False,
                               GROUPS_IN_TILE=constexprs["BLOCK_K"] // 128 if block else 1, DOT={"dtype": rows}, PRECISION="ieee", DECODE_BF16=False,
                               HAS_BIAS=False, BIAS_FORMAT=0, DST_FORMAT=0, VIA_F32=True, INDEX_64=False,
                               INTERPRETED=False, LOOP_STAGES=None)}


def prologue_record(rows: str, constexprs: dict, inline_asm: bool, pointer, value) -> dict:
    """``record`` for ``quantized_gemv_prologue``: one row of 4096 inputs (x, residual, norm weight of the rows'
    type) by int4 words in groups of 128, K split in four (as ``int4_gemv``'s records)."""
    from nbxtensor.dtypes import get_dtype
    from nbxtensor.lowering import float_format
    from nbxtensor.ops.pointwise_table import _ACTIVATION_ROUNDING, _GATED_ACTIVATIONS
    dtype = get_dtype({"bf16": "bfloat16", "fp16": "float16"}[rows])
    args = [pointer(rows)] * 4 + [pointer("int32"), pointer(rows), pointer("uint8"), pointer("int32"), pointer(rows),
                                  pointer(rows), pointer("fp32"), pointer("int32")]
    args += [value(1), value(4096), value(4096), value(1024), value(1e-6), value(128), value(1)]
    # x, residual (row, input), norm weight, words (K / 8, N), scales and zero points (group, N), bias, output
    args += [value(v) for v in (4096, 1, 4096, 1, 1, 4096, 1, 4096, 1, 4096, 1, 1, 4096, 1)]
    activation = _GATED_ACTIVATIONS["silu"] + 4 * _ACTIVATION_ROUNDING.get(dtype.name, 0)
    return {"module": "nbxtensor.kernels.gemv_prologue", "kernel": "quantized_gemv_prologue", "args": args,
            "constexprs": dict(constexprs, ACT_MODE=activation if constexprs["PROLOGUE"] == 2 else 0,
                               STATS_BLOCK_K=4096, SPLIT=True, COMBINE=True, WHOLE_WORDS=True, WEIGHT=0,
                               SCALE_FORMAT=FORMATS[rows],
                               HAS_G_IDX=False, GROUPS_IN_TILE=1, GROUP_SIZE=128, INLINE_ASM=inline_asm, EVEN_K=True,
                               HAS_BIAS=False, X_FORMAT=float_format(dtype), NW_FORMAT=float_format(dtype),
                               BIAS_FORMAT=0, DST_FORMAT=0, VIA_F32=True, INDEX_64=False, INTERPRETED=False, PDL=True)}


def loop_body(sass: str) -> list[str]:
    """The instructions of the longest range that a branch back to an earlier label closes."""
    lines = [(int(m.group(1), 16), m.group(2).strip()) for m in _INSTRUCTION.finditer(sass)]
    best = []
    for offset, text in lines:
        branch = re.search(r"\bBRA\b.*\.L_x_(\d+)", text)
        label = sass.find(f".L_x_{branch.group(1)}:") if branch else -1
        if label >= 0:
            target = int(_INSTRUCTION.search(sass, label).group(1), 16)
            body = [t for o, t in lines if target <= o <= offset]
            if target <= offset and len(body) > len(best):
                best = body
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", type=int, default=90)
    parser.add_argument("--portable", action="store_true")
    parser.add_argument("--dump", type=Path, default=None, help="write each case's SASS into this folder")
    parser.add_argument("--only", default="", help="cases whose name contains this text")
    args = parser.parse_args()
    compile_check._worker_init(args.target)
    binaries = Path(__import__("triton").__file__).parent / "backends" / "nvidia" / "bin"
    import importlib
    for name, (kernel, rows, constexprs) in CASES.items():
        if args.only not in name:
            continue
        launch = record(kernel, rows, constexprs, not args.portable)
        positional, named = compile_check._arguments(launch)
        function = getattr(importlib.import_module(launch["module"]), kernel)
        compiled = function.warmup(*positional, grid=(1,), **named, launch_pdl=named.get("PDL") is True)
        with tempfile.TemporaryDirectory() as folder:
            cubin = os.path.join(folder, "kernel.cubin")
            Path(cubin).write_bytes(compiled.asm["cubin"])
            sass = subprocess.run([str(binaries / "nvdisasm"), "-c", cubin], capture_output=True, text=True,
                                  check=True).stdout
            usage = subprocess.run([str(binaries / "cuobjdump"), "-res-usage", cubin], capture_output=True, text=True,
                                   check=True).stdout
        body = loop_body(sass)
        per_word = 4 if kernel == "quantized_gemv" else 8
        words = constexprs["BLOCK_K"] // per_word * constexprs["BLOCK_N"] / (32 * constexprs["num_warps"])
        operations = Counter(re.sub(r"^@!?U?P\w+\s+", "", t).split()[0].split(".")[0] for t in body)
        common = operations.most_common(8)
        # what a step waits for: barriers, global loads it consumes itself (LDG; LDGSTS are the pipelined
        # copies of later steps), the shared-memory exchanges of layouts (STS), and L1 prefetches (CCTL)
        waits = " ".join(f"{op} {operations[op]}" for op in ("BAR", "LDG", "LDGSTS", "STS", "CCTL"))
        print(f"{name}: {len(body) / words:.1f} per word ({len(body)} in the loop, {words:g} words a thread); "
              + " ".join(f"{op} {count}" for op, count in common)
              + f" | {waits} | registers {_REGISTERS.search(usage).group(1)}, shared {compiled.metadata.shared}")
        if args.dump is not None:
            args.dump.mkdir(parents=True, exist_ok=True)
            (args.dump / (name.replace(" ", "_") + ".sass")).write_text(sass)
    return 0


if __name__ == "__main__":
    sys.exit(main())
