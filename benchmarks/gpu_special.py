"""The special-function bodies with long series on a CUDA GPU: each one's first call (compile included:
run with an empty TRITON_CACHE_DIR), its device time on 16 M elements, and a SHA-256 of its output bits on
an edge-value grid. Writes gpu_special.json to $OUT.

Run it on two trees that must compute the same bits (a change to how a body is written, not to what it
computes) on the same card: every ``bits`` entry must agree."""
from __future__ import annotations

import hashlib
import json
import os
import sys
import time

import numpy as np

import nbxtensor as nbx

sys.path.insert(0, os.path.dirname(__file__))
from timing import gpu_time_ms  # noqa: E402

NAMES = ("i0", "i0e", "i1", "i1e", "digamma")
n = 16 * 2 ** 20
out_dir = os.environ.get("OUT", ".")

# zero, subnormals, both sides of the series' switch at 20, overflow, the infinities and NaN, and a sweep
edges = np.array([0.0, -0.0, 5e-324, 1e-310, 1e-40, 1e-30, 1e-8, 0.5, 1.0, 9.99, 10.0, 19.999, 20.0, 20.001, 88.0,
                  89.5, 700.0, 710.0, 1e8, 4e37, 3e38, 1e300, np.inf, np.nan])
grid = np.concatenate([edges, np.linspace(0, 40, 4001), np.logspace(-6, 4, 2001)])
grid = np.concatenate([grid, -grid])

rows, bits = [], {}
for dtype in (np.float32, np.float64):
    with np.errstate(over="ignore"):
        x_grid = nbx.tensor(grid.astype(dtype), device="cuda")
    x_big = nbx.tensor(np.random.default_rng(0).uniform(0, 40, n).astype(dtype), device="cuda")
    for name in NAMES:
        fn = getattr(nbx.special, name)
        start = time.perf_counter()
        result = fn(x_grid).numpy()
        first_s = time.perf_counter() - start
        bits[f"{name}.{np.dtype(dtype).name}"] = hashlib.sha256(result.tobytes()).hexdigest()
        ms = gpu_time_ms(lambda: fn(x_big))
        rows.append({"op": name, "dtype": np.dtype(dtype).name, "first_call_s": round(first_s, 2),
                     "ms": round(ms, 4), "gelem_per_s": round(n / ms / 1e6, 2)})

print(f"{'op':8s} {'dtype':8s} {'first call s':>12s} {'ms':>9s} {'Gelem/s':>9s}  bits")
for row in rows:
    key = f"{row['op']}.{row['dtype']}"
    print(f"{row['op']:8s} {row['dtype']:8s} {row['first_call_s']:12.2f} {row['ms']:9.4f} {row['gelem_per_s']:9.2f}"
          f"  {bits[key][:16]}")
with open(os.path.join(out_dir, "gpu_special.json"), "w") as f:
    json.dump({"rows": rows, "bits": bits}, f, indent=1)
