"""Matrix products on a CUDA GPU against torch on the same inputs (shared through DLPack), in the same
run. The first call of each shape tunes its launch key (cached under NBX_TUNING_DIR); timing starts after.
Prints a check list, then a table: our ms, torch ms, ratio (torch / ours), and TFLOP/s with the fraction
of 720 TFLOP/s for products, or TB/s with the fraction of 4.1 TB/s for decode GEMV rows.

Before the checks, a sweep table for each product shape below (the bf16 targets, the fp32 products of
the MiniLM encoder and the fp32 4096^3): every tuning candidate of its launch key timed on its own,
fastest first, with its result checked against torch in float64, the tuner's choice marked '*'. The fp32
sweeps also time settings of emulated float32 (tf32x3, bf16x6) that are never tuning candidates, marked
'x', to show what they would gain (MATMUL_SWEEP_WS=1 adds warp-specialised bf16 settings likewise). All settings are compiled first in parallel worker processes (the
Triton cache on disk then serves the tuner and the sweep); MATMUL_SWEEP=0 skips sweeps and workers.
The sweeps also go to gpu_matmul.json ("sweeps")."""
from __future__ import annotations

import concurrent.futures
import json
import multiprocessing
import os
import sys
import time

import nbxtensor as nbx

sys.path.insert(0, os.path.dirname(__file__))
from gemm_sweep import gemm_sweep  # noqa: E402
from timing import gpu_time_ms, graph_times_ms, print_checks  # noqa: E402

from nbxtensor.ops import matmul as MM  # noqa: E402

SWEEP = os.environ.get("MATMUL_SWEEP", "1") != "0"
SWEEP_DEVICE = os.environ.get("MATMUL_SWEEP_DEVICE", "cuda")  # "cpu" smoke-tests precompile() without a GPU
# (name, m, n, k, dtype name, bias): the shapes swept, in order of interest
SWEPT = [
    ("mm bf16 4096^3", 4096, 4096, 4096, "bfloat16", False),
    ("mm bf16 8192^3", 8192, 8192, 8192, "bfloat16", False),
    ("mm bf16 2048x14336x4096", 2048, 14336, 4096, "bfloat16", False),
    ("linear fp32 4096x384x384 +bias", 4096, 384, 384, "float32", True),
    ("linear fp32 4096x1536x384 +bias", 4096, 1536, 384, "float32", True),
    ("linear fp32 4096x384x1536 +bias", 4096, 384, 1536, "float32", True),
    ("mm fp32 4096^3 (ieee)", 4096, 4096, 4096, "float32", False),
]
# emulated float32 on the matrix units: timed in the fp32 sweeps for comparison, never tuning candidates
EMULATED = [dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=32, num_stages=st, num_warps=w, GROUP_M=MM.GROUP_M, PRECISION=p,
                 **flags)
            for p in ("tf32x3", "bf16x6")
            for bm, bn, st, w, flags in ((128, 128, 3, 4, {}), (128, 256, 3, 8, {}),
                                         (128, 128, 3, 4, dict(PERSISTENT=True, TMA=True)))]
# MATMUL_SWEEP_WS=1: the bf16 sweeps also time Triton's automatic warp specialisation (Blackwell-only by
# Triton 3.6's documentation; compiles for sm_90, unproven there, so off by default: a hang stalls the run)
BF16_EXTRA = MM.GEMM_WARP_SPECIALIZED if os.environ.get("MATMUL_SWEEP_WS") == "1" else []


def extra_for(dtype_name):
    return EMULATED if dtype_name == "float32" else BF16_EXTRA


def sweep_operands(m, n, k, dtype_name, with_bias, fill=None):
    """linear's GEMM operands as nbx tensors: rows (m, k), the (n, k) weight read transposed, the bias
    over the rows (stride 0), as ``linear`` plans them; ``fill`` (torch tensors) or uninitialised."""
    if fill is None:
        x = nbx.empty(m, k, dtype=dtype_name, device=SWEEP_DEVICE)
        w = nbx.empty(n, k, dtype=dtype_name, device=SWEEP_DEVICE)
        bias = nbx.zeros(n, dtype=dtype_name, device=SWEEP_DEVICE) if with_bias else None
    else:
        x, w, bias = (None if t is None else nbx.from_dlpack(t) for t in fill)
    return x, w.transpose(0, 1), None if bias is None else bias.expand(m, n)


def _compile_jobs(job):
    """Worker: compile one setting (and run it once) on each of its products; Triton keeps the compiled
    kernels on disk, so the tuner and the sweep in the main process load them instead."""
    config, products = job
    MM.backends.cuda.matmul.float32_planes = False  # the swept float32 settings are those of the FMA path
    errors = []
    for name, m, n, k, dtype_name, with_bias in products:
        a, b, bias = sweep_operands(m, n, k, dtype_name, with_bias)
        rows = gemm_sweep("linear", a, b, bias, 1, 1 if with_bias else 0, configs=[config], timed=False)["rows"]
        errors += [f"{name}: {describe(config)}: {r['error']}" for r in rows if r["error"]]
    return errors


def precompile():
    """Every swept setting compiled in parallel worker processes before anything is timed: one job per
    setting, over every product that has it (the first compiles, the others find it)."""
    jobs = {}
    MM.backends.cuda.matmul.float32_planes = False  # float32 sweeps list the FMA path's settings
    for shape in SWEPT:
        name, m, n, k, dtype_name, with_bias = shape
        a, b, bias = sweep_operands(m, n, k, dtype_name, with_bias)
        listed = gemm_sweep("linear", a, b, bias, 1, 1 if with_bias else 0, configs=[], timed=False)
        for config in listed["candidates"] + extra_for(dtype_name):
            jobs.setdefault((dtype_name, json.dumps(config, sort_keys=True)), (config, []))[1].append(shape)
        del a, b, bias
    MM.backends.cuda.matmul.float32_planes = True
    start = time.perf_counter()
    workers = min(len(jobs), max(1, (os.cpu_count() or 2) - 1))
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
        errors = [e for found in pool.map(_compile_jobs, list(jobs.values())) for e in found]
    print(f"precompiled {len(jobs)} settings in {time.perf_counter() - start:.1f} s with {workers} workers; "
          f"{len(errors)} product x setting pairs failed to build or run", flush=True)
    for error in errors:
        print(f"  {error}", flush=True)


def describe(config):
    flags = "".join(f" {short}" for flag, short in (("PERSISTENT", "persistent"), ("TMA", "tma"),
                                                     ("FLATTEN", "flatten"), ("WARP_SPECIALIZE", "warpspec"))
                    if config.get(flag))
    precision = f" {config['PRECISION']}" if "PRECISION" in config else ""
    return (f"{config['BLOCK_M']}x{config['BLOCK_N']}x{config['BLOCK_K']} s{config['num_stages']} "
            f"w{config['num_warps']}{flags}{precision}")


def sweep_table(name, m, n, k, dtype_name, with_bias, torch_ms):
    torch.manual_seed(0)
    tdtype = getattr(torch, dtype_name)
    a = torch.randn(m, k, device="cuda", dtype=tdtype)
    weight = torch.randn(n, k, device="cuda", dtype=tdtype)
    bias = torch.randn(n, device="cuda", dtype=tdtype) if with_bias else None
    ref = a.double() @ weight.double().T + (bias.double() if with_bias else 0)
    scale = float(ref.abs().max())

    def check(out):
        return float((torch.from_dlpack(out).double() - ref).abs().max()) / scale
    x, b, flat_bias = sweep_operands(m, n, k, dtype_name, with_bias, fill=(a, weight, bias))
    swept = gemm_sweep("linear", x, b, flat_bias, 1, 1 if with_bias else 0, check=check,
                          extra=extra_for(dtype_name))
    flops = 2 * m * n * k
    print(f"\nsweep {name}: key {swept['key']}; torch {torch_ms:.3f} ms; "
          f"tuner chose {describe(swept['chosen']) if swept['chosen'] else '(not tuned)'}", flush=True)
    print(f"    {'ms':>8s} {'TFLOP/s':>8s} {'torch/x':>7s} {'max rel diff':>12s}  setting")
    for r in swept["rows"]:
        mark = "*" if r["config"] == swept["chosen"] else "x" if r["extra"] else " "
        if r["ms"] is None:
            print(f"  {mark} {'failed':>8s} {'':8s} {'':7s} {'':12s}  {describe(r['config'])}: {r['error']}")
            continue
        print(f"  {mark} {r['ms']:8.3f} {flops / r['ms'] / 1e9:8.1f} {torch_ms / r['ms']:7.2f} "
              f"{r['check'] if r['check'] is not None else float('nan'):12.3g}  {describe(r['config'])}"
              + (f" ({r['error']})" if r["error"] else ""), flush=True)
    sweeps.append(dict(name=name, key=swept["key"], torch_ms=torch_ms, chosen=swept["chosen"],
                       rows=[dict(r, extra=r["extra"]) for r in swept["rows"]]))
    del a, weight, bias, ref, x, b, flat_bias


FLOOR_FLOPS = 720e12
FLOOR_BYTES_PER_S = 4.1e12
out_dir = os.environ.get("OUT", ".")
rows, checks, sweeps = [], [], []
torch = None  # imported by main() only: the compile workers need no torch


def shared(t):
    return nbx.from_dlpack(t)


def check(name, ours, theirs, rtol):
    """max |ours - theirs| relative to max |theirs|."""
    diff = (torch.from_dlpack(ours).double() - theirs.double()).abs().max()
    worst = float(diff / theirs.double().abs().max().clamp_min(1e-30))
    checks.append((name, worst <= rtol, worst))


def bench(name, m, n, k, dtype, gemv=False, bias=False):
    torch.manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    weight = torch.randn(n, k, device="cuda", dtype=dtype)  # (out, in), read transposed as linear reads it
    b = torch.randn(n, device="cuda", dtype=dtype) if bias else None
    x, w, nb = shared(a), shared(weight), None if b is None else shared(b)
    ours_fn = lambda: nbx.nn.functional.linear(x, w, nb)  # noqa: E731
    torch_fn = lambda: torch.nn.functional.linear(a, weight, b)  # noqa: E731
    check(name, ours_fn(), torch_fn(), 2e-2 if dtype != torch.float32 else 1e-5)
    ours, theirs = gpu_time_ms(ours_fn), gpu_time_ms(torch_fn)
    nbytes = (m * k + n * k + m * n) * a.element_size()
    rows.append(dict(name=name, ours_ms=ours, torch_ms=theirs, flops=2 * m * n * k, nbytes=nbytes, gemv=gemv))
    if gemv:
        # a decode step is host-paced when called op by op; in a graph (ours and torch's alike) only the
        # kernels count
        ours_graph, torch_graph = graph_times_ms(ours_fn, torch_fn)
        rows.append(dict(name=name + " (graph)", ours_ms=ours_graph, torch_ms=torch_graph, flops=2 * m * n * k,
                         nbytes=nbytes, gemv=gemv))
    del a, weight, b, x, w, nb


def main():
    global torch
    import torch as imported  # the comparison only; nbxtensor itself never imports torch
    torch = imported
    torch.backends.cuda.matmul.allow_tf32 = False
    if SWEEP:
        precompile()
    bench("mm bf16 4096^3", 4096, 4096, 4096, torch.bfloat16)
    bench("mm bf16 8192^3", 8192, 8192, 8192, torch.bfloat16)
    bench("mm bf16 2048x14336x4096", 2048, 14336, 4096, torch.bfloat16)
    bench("gemv bf16 1x14336x4096", 1, 14336, 4096, torch.bfloat16, gemv=True)
    bench("gemv bf16 16x14336x4096", 16, 14336, 4096, torch.bfloat16, gemv=True)
    # float32: through bfloat16 planes (the default) and on the FMA units; torch with TF32 off (IEEE)
    bench("mm fp32 4096^3", 4096, 4096, 4096, torch.float32)
    # the fp32 products of the MiniLM encoder (32 x 128 tokens, hidden 384): 24 of the first a run, 6 each
    # of the others
    bench("linear fp32 4096x384x384 +bias", 4096, 384, 384, torch.float32, bias=True)
    bench("linear fp32 4096x1536x384 +bias", 4096, 1536, 384, torch.float32, bias=True)
    bench("linear fp32 4096x384x1536 +bias", 4096, 384, 1536, torch.float32, bias=True)
    MM.backends.cuda.matmul.float32_planes = False
    bench("mm fp32 4096^3 (ieee)", 4096, 4096, 4096, torch.float32)
    bench("linear fp32 4096x1536x384 (ieee)", 4096, 1536, 384, torch.float32, bias=True)
    if SWEEP:
        torch_ms = {r["name"]: r["torch_ms"] for r in rows}
        torch_ms.update({name: torch_ms[name.replace(" (ieee)", "")] for name, *_ in SWEPT
                         if name.replace(" (ieee)", "") in torch_ms and name not in torch_ms})
        for swept_shape in SWEPT:
            sweep_table(*swept_shape, torch_ms[swept_shape[0]])
    MM.backends.cuda.matmul.float32_planes = True

    print_checks(checks, "max relative diff {:.3g}")
    print(f"\n{'what':34s} {'ours ms':>8s} {'torch ms':>9s} {'ratio':>6s} {'rate':>14s} {'of floor':>9s}")
    for r in rows:
        r["ratio"] = r["torch_ms"] / r["ours_ms"]
        if r["gemv"]:
            rate = r["nbytes"] / r["ours_ms"] / 1e-3
            r.update(tb_per_s=rate / 1e12, fraction_of_floor=rate / FLOOR_BYTES_PER_S)
            shown = f"{rate / 1e12:8.2f} TB/s"
        else:
            rate = r["flops"] / r["ours_ms"] / 1e-3
            r.update(tflop_per_s=rate / 1e12, fraction_of_floor=rate / FLOOR_FLOPS)
            shown = f"{rate / 1e12:6.1f} TFLOP/s"
        print(f"{r['name']:34s} {r['ours_ms']:8.3f} {r['torch_ms']:9.3f} {r['ratio']:6.2f} {shown:>14s} "
              f"{r['fraction_of_floor']:9.1%}")
    print("\ntuned launch keys:")
    for key, entry in nbx.tuning.entries("cuda").items():
        print(f"  {key}: {entry['config']} ({entry['ms']:.3f} ms)")
    with open(os.path.join(out_dir, "gpu_matmul.json"), "w") as f:
        json.dump({"checks": checks, "rows": rows, "sweeps": sweeps}, f, indent=1)


if __name__ == "__main__":
    main()
