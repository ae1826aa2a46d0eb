"""Indexing and sorting on a CUDA GPU against torch on the same inputs: embedding lookup, gather,
index_select, sort and top-k. Prints ours/torch/ratio and the fraction of the memory floor (bytes
that must move at the device's measured copy bandwidth) each reaches; correctness checks first."""
from __future__ import annotations

import itertools
import json
import os
import sys

import numpy as np

import nbxtensor as nbx
from nbxtensor.device import backend_for
from nbxtensor.ops import sorting

sys.path.insert(0, os.path.dirname(__file__))
from timing import gpu_time_ms, kernel_table, print_checks  # noqa: E402

import torch  # noqa: E402  (the comparison only; nbxtensor itself never imports torch)

out_dir = os.environ.get("OUT", ".")
dev = nbx.device("cuda", 0)
facts = backend_for(dev).facts
bandwidth = facts.get("bandwidth_bytes_per_s", {})
floor_bw = bandwidth.get("measured_h200_copy") or max(bandwidth.values(), default=1e12)
rows, checks = [], []


def check(name, ok):
    checks.append((name, bool(ok)))


def both(array):
    return nbx.tensor(array, device="cuda"), torch.from_numpy(np.ascontiguousarray(array)).cuda()


def record(name, ours_fn, torch_fn, nbytes):
    ours, theirs = gpu_time_ms(ours_fn), gpu_time_ms(torch_fn)
    floor_ms = nbytes / floor_bw * 1e3
    rows.append((name, ours, theirs, theirs / ours, floor_ms / ours))


rng = np.random.default_rng(0)

# --- embedding: 32768 tokens from a 128k x 4096 bf16 table --------------------------------------
vocab, width, tokens = 131072, 4096, 32768
table = nbx.empty(vocab, width, dtype=nbx.bfloat16, device="cuda")
table.copy_(nbx.arange(vocab * width, dtype=nbx.float32, device="cuda").reshape(vocab, width).to(nbx.bfloat16))
ttable = torch.from_dlpack(table)
ids_np = rng.integers(0, vocab, size=tokens)
ids, tids = both(ids_np)
check("embedding bf16", torch.equal(torch.from_dlpack(nbx.embedding(table, ids)), torch.nn.functional.embedding(tids, ttable)))
moved = tokens * width * 2 * 2 + tokens * 8
record("embedding 32k x 4096 bf16", lambda: nbx.embedding(table, ids), lambda: torch.nn.functional.embedding(tids, ttable), moved)
record("index_select dim0 (same)", lambda: nbx.index_select(table, 0, ids), lambda: torch.index_select(ttable, 0, tids), moved)
del table, ttable

# --- gather along the last dim of a 8192 x 8192 fp32 matrix ----------------------------------------
m = 8192
src_np = rng.standard_normal((m, m)).astype(np.float32)
src, tsrc = both(src_np)
gidx_np = rng.integers(0, m, size=(m, 1024))
gidx, tgidx = both(gidx_np)
check("gather fp32", torch.equal(torch.from_dlpack(nbx.gather(src, 1, gidx)), torch.gather(tsrc, 1, tgidx)))
record("gather dim1 8192x1024 of 8192^2 f32", lambda: nbx.gather(src, 1, gidx), lambda: torch.gather(tsrc, 1, tgidx),
       m * 1024 * (4 + 4 + 8))
cols_np = rng.integers(0, m, size=2048)
cols, tcols = both(cols_np)
check("index_select dim1", torch.equal(torch.from_dlpack(nbx.index_select(src, 1, cols)), torch.index_select(tsrc, 1, tcols)))
record("index_select dim1 2048 of 8192^2 f32", lambda: nbx.index_select(src, 1, cols),
       lambda: torch.index_select(tsrc, 1, tcols), m * 2048 * 8)
del src, tsrc

# --- top-k(50) over 64 rows of a 152k vocabulary; sort of 16 M keys --------------------------------
logits_np = rng.standard_normal((64, 152064)).astype(np.float32)
logits, tlogits = both(logits_np)
ours_k, theirs_k = nbx.topk(logits, 50), torch.topk(tlogits, 50)
check("topk values", torch.equal(torch.from_dlpack(ours_k.values), theirs_k.values))
check("topk indices", torch.equal(torch.from_dlpack(ours_k.indices), theirs_k.indices))
record("topk k=50 64 x 152064 f32", lambda: nbx.topk(logits, 50), lambda: torch.topk(tlogits, 50), logits_np.nbytes)
kernel_table("topk k=50 (ours)", lambda: nbx.topk(logits, 50))
kernel_table("topk k=50 (torch)", lambda: torch.topk(tlogits, 50))
try:
    keys_np = rng.standard_normal(16 * 2 ** 20).astype(np.float32)
    keys, tkeys = both(keys_np)
    ours_sorted, theirs_sorted = nbx.sort(keys), torch.sort(tkeys, stable=True)
    check("sort 16M", torch.equal(torch.from_dlpack(ours_sorted.values), theirs_sorted.values))
    check("sort 16M indices (stable)", torch.equal(torch.from_dlpack(ours_sorted.indices), theirs_sorted.indices))
    del ours_sorted, theirs_sorted
    record("sort 16M f32", lambda: nbx.sort(keys), lambda: torch.sort(tkeys), keys_np.nbytes * 2 * 3)
    kernel_table("sort 16M f32 (ours)", lambda: nbx.sort(keys))
    keys16, tkeys16 = keys.to(nbx.bfloat16), tkeys.to(torch.bfloat16)
    check("sort 16M bf16 indices (stable)",
          torch.equal(torch.from_dlpack(nbx.sort(keys16).indices), torch.sort(tkeys16, stable=True).indices))
    record("sort 16M bf16 (4 radix passes)", lambda: nbx.sort(keys16), lambda: torch.sort(tkeys16),
           keys_np.nbytes // 2 * 3 + keys_np.nbytes * 2)
    kernel_table("sort 16M f32 (torch)", lambda: torch.sort(tkeys))
    names = ("SORT_WARP_BITS", "SORT_WARP_HIST_BLOCKS", "SORT_WARP_WARPS", "SORT_WARP_SCATTER_REGISTERS")
    saved = [getattr(sorting, name) for name in names]
    print("\nsort 16M f32 by the warp passes' digit bits, histogram blocks a warp, warps a program, scatter "
          "registers (ms)")
    for setting in ((4, 2, 4, 64), (4, 2, 4, 72), (4, 2, 4, 255), (4, 1, 4, 64), (4, 2, 8, 64), (5, 2, 4, 64)):
        for name, value in zip(names, setting):
            setattr(sorting, name, value)
        print(f"  bits {setting[0]} hist blocks {setting[1]} warps {setting[2]} registers {setting[3]}: "
              f"{gpu_time_ms(lambda: nbx.sort(keys)):.3f}", flush=True)
    for name, value in zip(names, saved):
        setattr(sorting, name, value)
    warp_passes = sorting._warp_passes
    sorting._warp_passes = lambda rows, flags: False
    saved = (sorting.SORT_BLOCK, sorting.SORT_WARPS)
    print("\nsort 16M f32 through the portable passes, by elements and warps a program takes (ms)")
    for block, warps in itertools.product((256, 512), (2, 4)):
        sorting.SORT_BLOCK, sorting.SORT_WARPS = block, warps
        print(f"  block {block:6d} warps {warps:2d}: {gpu_time_ms(lambda: nbx.sort(keys)):.3f}")
    sorting.SORT_BLOCK, sorting.SORT_WARPS = saved
    sorting._warp_passes = warp_passes
except NotImplementedError as e:
    rows.append((f"sort 16M f32: {e}"[:60], float("nan"), float("nan"), float("nan"), float("nan")))

print_checks(checks)
print(f"\n{'what':40s} {'ours ms':>9s} {'torch ms':>9s} {'ratio':>6s} {'of floor':>8s}")
for name, o, t, ratio, frac in rows:
    print(f"{name:40s} {o:9.3f} {t:9.3f} {ratio:6.2f} {frac:8.2f}")
with open(os.path.join(out_dir, "gpu_indexing.json"), "w") as f:
    json.dump({"checks": checks, "rows": rows}, f, indent=1)
