"""Matrix products on a CUDA GPU against torch on the same inputs (shared through DLPack), in the same
run. The first call of each shape tunes its launch key (cached under NBX_TUNING_DIR); timing starts after.
Prints a check list, then a table: our ms, torch ms, ratio (torch / ours), and TFLOP/s with the fraction
of 720 TFLOP/s for products, or TB/s with the fraction of 4.1 TB/s for decode GEMV rows."""
from __future__ import annotations

import json
import os
import sys

import nbxtensor as nbx

sys.path.insert(0, os.path.dirname(__file__))
from timing import gpu_time_ms, graph_times_ms  # noqa: E402

import torch  # noqa: E402  (the comparison only; nbxtensor itself never imports torch)

FLOOR_FLOPS = 720e12
FLOOR_BYTES_PER_S = 4.1e12
out_dir = os.environ.get("OUT", ".")
rows, checks = [], []
torch.backends.cuda.matmul.allow_tf32 = False


def shared(t):
    return nbx.from_dlpack(t)


def check(name, ours, theirs, rtol):
    """max |ours - theirs| relative to max |theirs|."""
    diff = (torch.from_dlpack(ours).double() - theirs.double()).abs().max()
    worst = float(diff / theirs.double().abs().max().clamp_min(1e-30))
    checks.append((name, worst <= rtol, worst))


def bench(name, m, n, k, dtype, gemv=False):
    torch.manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    weight = torch.randn(n, k, device="cuda", dtype=dtype)  # (out, in), read transposed as linear reads it
    x, w = shared(a), shared(weight)
    ours_fn = lambda: nbx.nn.functional.linear(x, w)  # noqa: E731
    torch_fn = lambda: torch.nn.functional.linear(a, weight)  # noqa: E731
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
    del a, weight, x, w


bench("mm bf16 4096^3", 4096, 4096, 4096, torch.bfloat16)
bench("mm bf16 8192^3", 8192, 8192, 8192, torch.bfloat16)
bench("mm bf16 2048x14336x4096", 2048, 14336, 4096, torch.bfloat16)
bench("gemv bf16 1x14336x4096", 1, 14336, 4096, torch.bfloat16, gemv=True)
bench("gemv bf16 16x14336x4096", 16, 14336, 4096, torch.bfloat16, gemv=True)
bench("mm fp32 4096^3 (ieee)", 4096, 4096, 4096, torch.float32)

print("\nchecks:")
for name, ok, worst in checks:
    print(f"  {'ok  ' if ok else 'FAIL'} {name} (max relative diff {worst:.3g})")
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
    json.dump({"checks": checks, "rows": rows}, f, indent=1)
