"""Foundation checks and figures on a CUDA GPU: copy/cast/fill correctness against NumPy, copy
bandwidth against torch, and the host cost of one small launch. Prints a table last."""
from __future__ import annotations

import json
import os
import sys

import numpy as np

import nbxtensor as nbx

sys.path.insert(0, os.path.dirname(__file__))
from timing import gpu_time_ms, print_checks  # noqa: E402

out_dir = os.environ.get("OUT", ".")
rows, checks = [], []


def check(name, ok):
    checks.append((name, bool(ok)))


rng = np.random.default_rng(0)
# --- correctness on the GPU ------------------------------------------------------------------
a = rng.standard_normal((37, 53)).astype(np.float32)
x = nbx.tensor(a, device="cuda")
check("transpose contiguous", np.array_equal(x.T.contiguous().numpy(), a.T))
cast_refs = {
    "float16": a.astype(np.float16), "bfloat16": a.astype(nbx.bfloat16.numpy),
    "float8_e4m3fn": a.astype(nbx.float8_e4m3fn.numpy), "float64": a.astype(np.float64),
    "int32": a.astype(np.int32), "int8": a.astype(np.int8), "uint8": a.astype(np.int64).astype(np.uint8),
    "bool": a != 0, "complex64": a.astype(np.complex64),
}
for dt, ref in cast_refs.items():
    got = x.to(getattr(nbx, dt)).numpy()
    check(f"cast float32->{dt}", np.array_equal(got.view(np.uint8), np.ascontiguousarray(ref).view(np.uint8)))
check("arange", np.array_equal(nbx.arange(1000, device="cuda").numpy(), np.arange(1000)))
check("linspace ends", nbx.linspace(-1, 1, 101, device="cuda").numpy()[[0, -1]].tolist() == [-1.0, 1.0])
y = nbx.zeros(8, 8, device="cuda")
y[:, 1::3] = 5
ref = np.zeros((8, 8), np.float32)
ref[:, 1::3] = 5
check("strided fill", np.array_equal(y.numpy(), ref))
big8 = rng.standard_normal((2, 3, 2, 2, 3, 2, 2, 3)).astype(np.float32)
t8 = nbx.tensor(big8, device="cuda").permute(7, 6, 5, 4, 3, 2, 1, 0).contiguous()
check("8-D permuted copy", np.array_equal(t8.numpy(), big8.transpose(7, 6, 5, 4, 3, 2, 1, 0)))
c = nbx.cat([x, x.half()], 1)
check("cat promotes", c.dtype == nbx.float32 and np.allclose(c.numpy()[:, 53:], a.astype(np.float16)))

# --- bandwidth against torch ------------------------------------------------------------------
import torch  # noqa: E402  (the comparison only; nbxtensor itself never imports torch)

n = 256 * 2 ** 20  # 256 M bf16 elements = 512 MiB
src = nbx.empty(n, dtype=nbx.bfloat16, device="cuda")
src.copy_(nbx.arange(n, dtype=nbx.float32, device="cuda").to(nbx.bfloat16))
dst = nbx.empty_like(src)
tsrc = torch.randn(n, device="cuda", dtype=torch.bfloat16)
tdst = torch.empty_like(tsrc)
ours = gpu_time_ms(lambda: dst.copy_(src))
theirs = gpu_time_ms(lambda: tdst.copy_(tsrc))
nbytes = 2 * n * 2
rows.append(("copy bf16 256M", ours, theirs, nbytes / ours / 1e6, nbytes / theirs / 1e6))

f32 = nbx.empty(n, dtype=nbx.float32, device="cuda")
f32.fill_(1.5)
tf32 = torch.randn(n, device="cuda")
ours = gpu_time_ms(lambda: dst.copy_(f32))
theirs = gpu_time_ms(lambda: tdst.copy_(tf32))
nbytes = n * 6
rows.append(("cast f32->bf16 256M", ours, theirs, nbytes / ours / 1e6, nbytes / theirs / 1e6))

m = 16384
sq = nbx.empty(m, m, dtype=nbx.bfloat16, device="cuda")
sq.fill_(1)
sqo = nbx.empty(m, m, dtype=nbx.bfloat16, device="cuda")
tsq = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
tsqo = torch.empty_like(tsq)
ours = gpu_time_ms(lambda: sqo.copy_(sq.T))
theirs = gpu_time_ms(lambda: tsqo.copy_(tsq.T))
nbytes = m * m * 4
rows.append(("transpose copy bf16 16k^2", ours, theirs, nbytes / ours / 1e6, nbytes / theirs / 1e6))

ours = gpu_time_ms(lambda: dst.fill_(0.5))
theirs = gpu_time_ms(lambda: tdst.fill_(0.5))
nbytes = n * 2
rows.append(("fill bf16 256M", ours, theirs, nbytes / ours / 1e6, nbytes / theirs / 1e6))
del src, dst, f32, sq, sqo, tsrc, tdst, tf32, tsq, tsqo

print_checks(checks)
print(f"\n{'what':28s} {'ours ms':>9s} {'torch ms':>9s} {'ratio':>6s} {'ours GB/s':>10s} {'torch GB/s':>10s}")
for name, o, t, gbo, gbt in rows:
    print(f"{name:28s} {o:9.3f} {t:9.3f} {t / o:6.2f} {gbo:10.0f} {gbt:10.0f}")
with open(os.path.join(out_dir, "gpu_foundation.json"), "w") as f:
    json.dump({"checks": checks, "rows": rows}, f, indent=1)
