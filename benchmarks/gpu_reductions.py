"""Reductions, softmax and norms on a CUDA GPU against torch on the same inputs (shared through
DLPack), in the same run. Prints a check list, then a table: our ms, torch ms, ratio (torch / ours),
TB/s, fraction of 4.1 TB/s, fraction of our copy bandwidth measured in this run, and the target."""
from __future__ import annotations

import json
import os
import sys

import nbxtensor as nbx

sys.path.insert(0, os.path.dirname(__file__))
from timing import gpu_time_ms  # noqa: E402

import torch  # noqa: E402  (the comparison only; nbxtensor itself never imports torch)

TF = torch.nn.functional
F = nbx.nn.functional
FLOOR_BYTES_PER_S = 4.1e12
out_dir = os.environ.get("OUT", ".")
rows, checks = [], []


def shared(t: "torch.Tensor"):
    """The same memory as an nbxtensor tensor."""
    return nbx.from_dlpack(t)


def check(name, ours, theirs, atol, scale=1.0):
    """max |ours - theirs| * scale against ``atol``; NaN where either is NaN counts as a miss."""
    diff = (torch.from_dlpack(ours).double() - theirs.double()).abs() * scale
    worst = float(torch.nan_to_num(diff, nan=float("inf")).max())
    checks.append((name, worst <= atol, worst))


def measure(name, ours_fn, torch_fn, nbytes, ratio_target=None, copy_fraction_target=None):
    ours = gpu_time_ms(ours_fn)
    theirs = gpu_time_ms(torch_fn)
    rows.append(dict(name=name, ours_ms=ours, torch_ms=theirs, nbytes=nbytes, ratio_target=ratio_target,
                     copy_fraction_target=copy_fraction_target))


torch.manual_seed(0)
M, N = 32768, 4096
t = torch.randn(M, N, device="cuda", dtype=torch.bfloat16)
tw = torch.randn(N, device="cuda", dtype=torch.bfloat16)
tb = torch.randn(N, device="cuda", dtype=torch.bfloat16)
x, w, b = shared(t), shared(tw), shared(tb)
matrix_bytes = M * N * 2

# copy bandwidth of this GPU in this run: the ceiling every bandwidth-bound op is held to
copy_dst = nbx.empty_like(x)
copy_ms = gpu_time_ms(lambda: copy_dst.copy_(x))
copy_bytes_per_s = 2 * matrix_bytes / copy_ms / 1e-3
del copy_dst

check("softmax bf16", F.softmax(x, -1), TF.softmax(t, -1), 2 ** -8)
check("layer_norm bf16", F.layer_norm(x, (N,), w, b), TF.layer_norm(t, (N,), tw, tb), 0.125)
check("rms_norm bf16", F.rms_norm(x, (N,), w, 1e-6), TF.rms_norm(t, (N,), tw, 1e-6), 0.125)
check("row sum bf16", x.sum(-1), t.sum(-1), 0.5)
check("row sum deterministic", x.sum(-1), torch.from_dlpack(x.sum(-1)), 0.0)
measure("softmax bf16 32768x4096", lambda: F.softmax(x, -1), lambda: TF.softmax(t, -1), 2 * matrix_bytes, 2.0, 0.8)
measure("layer_norm bf16 32768x4096", lambda: F.layer_norm(x, (N,), w, b), lambda: TF.layer_norm(t, (N,), tw, tb),
        2 * matrix_bytes, 1.2, 0.8)
measure("rms_norm bf16 32768x4096", lambda: F.rms_norm(x, (N,), w, 1e-6), lambda: TF.rms_norm(t, (N,), tw, 1e-6),
        2 * matrix_bytes, 1.0, 0.8)
measure("row sum bf16 32768x4096", lambda: x.sum(-1), lambda: t.sum(-1), matrix_bytes + M * 2, 1.0, 0.8)
del t, x, tw, tb, w, b

big = torch.rand(1 << 30, device="cuda", dtype=torch.float32)
xb = shared(big)
check("full sum fp32 1G (relative)", xb.sum(), big.double().sum(), 1e-5, scale=1 / (1 << 29))
measure("full sum fp32 1G", lambda: xb.sum(), lambda: big.sum(), 4 << 30, None, 0.85)
del big, xb

row = torch.randn(1, 16 << 20, device="cuda", dtype=torch.float32)
xr = shared(row)
check("softmax one row of 16M (x 16M)", F.softmax(xr, -1), TF.softmax(row, -1), 1e-3, scale=16 << 20)
measure("softmax fp32 1x16M", lambda: F.softmax(xr, -1), lambda: TF.softmax(row, -1), 2 * row.numel() * 4)
del row, xr

print(f"\ncopy bandwidth in this run: {copy_bytes_per_s / 1e12:.2f} TB/s (bf16 32768x4096)")
print("\nchecks:")
for name, ok, worst in checks:
    print(f"  {'ok  ' if ok else 'FAIL'} {name} (max |diff| {worst:.3g})")
header = f"{'what':28s} {'ours ms':>8s} {'torch ms':>9s} {'ratio':>6s} {'TB/s':>6s} {'of 4.1':>7s} {'of copy':>8s}  target"
print("\n" + header)
for r in rows:
    tbs = r["nbytes"] / r["ours_ms"] / 1e9
    ratio = r["torch_ms"] / r["ours_ms"]
    of_copy = r["nbytes"] / r["ours_ms"] / 1e-3 / copy_bytes_per_s
    goals = []
    if r["ratio_target"] is not None:
        goals.append(f"ratio>={r['ratio_target']} {'ok' if ratio >= r['ratio_target'] else 'MISS'}")
    if r["copy_fraction_target"] is not None:
        goals.append(f"copy>={r['copy_fraction_target']:.0%} {'ok' if of_copy >= r['copy_fraction_target'] else 'MISS'}")
    r.update(tb_per_s=tbs, ratio=ratio, fraction_of_floor=tbs * 1e12 / FLOOR_BYTES_PER_S, fraction_of_copy=of_copy)
    print(f"{r['name']:28s} {r['ours_ms']:8.3f} {r['torch_ms']:9.3f} {ratio:6.2f} {tbs:6.2f} "
          f"{r['fraction_of_floor']:7.1%} {of_copy:8.1%}  {', '.join(goals)}")
with open(os.path.join(out_dir, "gpu_reductions.json"), "w") as f:
    json.dump({"copy_bytes_per_s": copy_bytes_per_s, "checks": checks, "rows": rows}, f, indent=1)
