"""Reductions, softmax and norms on a CUDA GPU against torch on the same inputs (shared through
DLPack), in the same run. Prints a check list, then a table: our ms, torch ms, ratio (torch / ours),
TB/s, fraction of 4.1 TB/s, fraction of our copy bandwidth measured in this run, and the target."""
from __future__ import annotations

import json
import math
import os
import sys

import nbxtensor as nbx

sys.path.insert(0, os.path.dirname(__file__))
from timing import gpu_pair_ms, gpu_time_ms, print_checks  # noqa: E402

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

# ---- shapes real models use (issue 28): families, timed in alternation with torch ------------------
# vocabularies: Llama-2 / Mistral 32000, Llama-3 128256, Qwen2.5 151936, Gemma 256000; decode batches
VOCABULARIES = (32000, 128256, 151936, 256000)
BATCHES = (1, 8, 64)


def measure_family(family, name, ours_fn, torch_fn, nbytes):
    ours, theirs = gpu_pair_ms(ours_fn, torch_fn)
    rows.append(dict(name=name, family=family, ours_ms=ours, torch_ms=theirs, nbytes=nbytes, ratio_target=0.9,
                     copy_fraction_target=None))


def vocabulary_rows(batch, vocab, dtype):
    t = torch.randn(batch, vocab, device="cuda", dtype=dtype) * 4
    return t, shared(t)


# column sums (a reduced leading dim, kept dim adjacent): per-feature sums over tokens and images
for tokens, hidden, dtype in ((4096, 4096, torch.float32), (2048, 4096, torch.bfloat16), (8192, 768, torch.float32),
                              (1000, 5120, torch.bfloat16), (16384, 1024, torch.bfloat16)):
    t = torch.randn(tokens, hidden, device="cuda", dtype=dtype)
    xt = shared(t)
    check(f"column sum {tokens}x{hidden} (relative)", xt.sum(0), t.double().sum(0), 1e-2, scale=1 / tokens ** 0.5)
    measure_family("column sum", f"sum(0) {str(dtype)[6:]} {tokens}x{hidden}", lambda: xt.sum(0), lambda: t.sum(0),
                   t.numel() * t.element_size())
    del t, xt
# means over several dims: batch-norm statistics of ResNet-50 stages ([N, C, H, W] -> [C]), NCHW and
# channels-last; ViT's mean over tokens ([B, 197, 768] -> [B, 768])
for shape in ((32, 256, 56, 56), (32, 512, 28, 28), (32, 1024, 14, 14), (32, 2048, 7, 7), (8, 64, 112, 112)):
    t = torch.randn(*shape, device="cuda", dtype=torch.float32)
    for layout, laid in (("nchw", t), ("nhwc", t.contiguous(memory_format=torch.channels_last))):
        xt = shared(laid)
        check(f"mean (0,2,3) {shape} {layout}", xt.mean((0, 2, 3)), laid.double().mean((0, 2, 3)), 1e-5)
        measure_family("multi-dim mean", f"mean(0,2,3) {layout} {'x'.join(map(str, shape))}",
                       lambda: xt.mean((0, 2, 3)), lambda: laid.mean((0, 2, 3)), t.numel() * 4)
    del t, laid, xt
for batch in (1, 32):
    t = torch.randn(batch, 197, 768, device="cuda", dtype=torch.bfloat16)
    xt = shared(t)
    measure_family("multi-dim mean", f"mean(1) bf16 {batch}x197x768", lambda: xt.mean(1), lambda: t.mean(1),
                   t.numel() * 2)
    del t, xt
# scans over long rows: cumsum of sorted vocabulary probabilities (top-p sampling), long sequences
for batch, length in ((8, 131072), (1, 1 << 20), (64, 32000), (1, 256000), (64, 151936)):
    t = torch.rand(batch, length, device="cuda", dtype=torch.float32)
    xt = shared(t)
    check(f"cumsum {batch}x{length} (relative)", xt.cumsum(1), t.double().cumsum(1), 1e-4, scale=1 / length)
    measure_family("cumsum", f"cumsum fp32 {batch}x{length}", lambda: xt.cumsum(1), lambda: t.cumsum(1),
                   2 * t.numel() * 4)
    del t, xt
# softmax, argmax and top-k (k = 50, sampling) over vocabulary rows in half precision
for dtype in (torch.bfloat16, torch.float16):
    for vocab in VOCABULARIES:
        for batch in BATCHES:
            t, xt = vocabulary_rows(batch, vocab, dtype)
            name = f"{str(dtype)[6:]} {batch}x{vocab}"
            if batch == 8:
                check(f"softmax {name}", F.softmax(xt, -1), TF.softmax(t, -1), 2 ** -8)
            measure_family("vocabulary softmax", f"softmax {name}", lambda: F.softmax(xt, -1),
                           lambda: TF.softmax(t, -1), 2 * t.numel() * 2)
            if dtype is torch.bfloat16:
                if batch == 8:
                    check(f"argmax {name}", xt.argmax(-1), t.argmax(-1), 0)
                    check(f"topk 50 {name} (values)", xt.topk(50).values, t.topk(50).values, 0)
                measure_family("vocabulary argmax", f"argmax {name}", lambda: xt.argmax(-1), lambda: t.argmax(-1),
                               t.numel() * 2)
                measure_family("vocabulary top-k", f"topk 50 {name}", lambda: xt.topk(50), lambda: t.topk(50),
                               t.numel() * 2)
            del t, xt

print(f"\ncopy bandwidth in this run: {copy_bytes_per_s / 1e12:.2f} TB/s (bf16 32768x4096)")
print_checks(checks, "max |diff| {:.3g}")
header = f"{'what':34s} {'ours ms':>8s} {'torch ms':>9s} {'ratio':>6s} {'TB/s':>6s} {'of 4.1':>7s} {'of copy':>8s}  target"
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
    print(f"{r['name']:34s} {r['ours_ms']:8.3f} {r['torch_ms']:9.3f} {ratio:6.2f} {tbs:6.2f} "
          f"{r['fraction_of_floor']:7.1%} {of_copy:8.1%}  {', '.join(goals)}")
print("\nper family (torch / ours): geometric mean, worst row")
for family in dict.fromkeys(r["family"] for r in rows if "family" in r):
    members = [r for r in rows if r.get("family") == family]
    geomean = math.exp(sum(math.log(r["ratio"]) for r in members) / len(members))
    worst = min(members, key=lambda r: r["ratio"])
    print(f"  {family:20s} {geomean:5.2f}  worst {worst['ratio']:5.2f} ({worst['name']})")
with open(os.path.join(out_dir, "gpu_reductions.json"), "w") as f:
    json.dump({"copy_bytes_per_s": copy_bytes_per_s, "checks": checks, "rows": rows}, f, indent=1)
