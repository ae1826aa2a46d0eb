"""Pointwise ops on a CUDA GPU: correctness spot checks against NumPy, then bandwidth against torch on
the same inputs in the same run (bf16 add and mul, an fp32 -> bf16 cast, an add with a transposed
input, gelu and silu in bf16), and the host cost of one small op. Prints a table last and writes
gpu_pointwise.json to $OUT.

Targets: >= 0.95x torch and >= 85% of our copy bandwidth for the contiguous rows; the transposed add
>= 70% of the contiguous add's rate."""
from __future__ import annotations

import json
import math
import os
import sys

import numpy as np

import nbxtensor as nbx
import nbxtensor.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from timing import gpu_time_ms, host_pair_us, print_checks  # noqa: E402

PEAK_TBPS = 4.1  # measured H200 copy bandwidth class (device facts: measured_h200_copy 4.14e12)
out_dir = os.environ.get("OUT", ".")
checks, rows = [], []


def check(name, ok):
    checks.append((name, bool(ok)))


# --- correctness on the GPU ------------------------------------------------------------------
rng = np.random.default_rng(0)
a = rng.standard_normal((37, 53)).astype(np.float32)
b = rng.standard_normal((53,)).astype(np.float32)
x, y = nbx.tensor(a, device="cuda"), nbx.tensor(b, device="cuda")
check("add broadcast", np.array_equal((x + y).numpy(), a + b))
check("div correctly rounded", np.array_equal((x / y).numpy(), a / b))
check("transposed mul", np.array_equal((x.T * 2).numpy(), a.T * 2))
check("tanh", np.allclose(nbx.tanh(x).numpy(), np.tanh(a), rtol=4e-6, atol=4e-6))
erf = np.vectorize(math.erf)
check("gelu", np.allclose(F.gelu(x).numpy(), 0.5 * a * (1 + erf(a / math.sqrt(2))), rtol=4e-6, atol=4e-6))
check("silu bf16", np.allclose(F.silu(x.bfloat16()).numpy().astype(np.float32),
                               (a / (1 + np.exp(-a))).astype(nbx.bfloat16.numpy).astype(np.float32), rtol=1e-2, atol=1e-2))
check("pow square", np.array_equal((x ** 2).numpy(), a * a))
ints = nbx.tensor(np.array([7, -7, -2 ** 63], np.int64), device="cuda")
check("int floor div", (ints // nbx.tensor(np.array([2, 2, -1]), device="cuda")).tolist() == [3, -4, -2 ** 63])
check("int remainder", (ints % 3).tolist() == [1, 2, 1])
check("~bool", (~nbx.tensor(np.array([True, False]), device="cuda")).tolist() == [False, True])
zero_d = nbx.tensor(np.array(3.0, np.float32), device="cuda")
check("0-d device operand", np.array_equal((x * zero_d).numpy(), a * 3))
check("complex mul", np.allclose((x.cfloat() * 1j).numpy(), a * 1j))

# --- bandwidth against torch ------------------------------------------------------------------
import torch  # noqa: E402  (the comparison only; nbxtensor itself never imports torch)

n = 256 * 2 ** 20  # 256 M elements
bf16_a = nbx.full((n,), 1.25, dtype=nbx.bfloat16, device="cuda")
bf16_b = nbx.full((n,), -0.5, dtype=nbx.bfloat16, device="cuda")
t_a = torch.full((n,), 1.25, dtype=torch.bfloat16, device="cuda")
t_b = torch.full((n,), -0.5, dtype=torch.bfloat16, device="cuda")


def add_row(name, ours_fn, torch_fn, nbytes):
    ours = gpu_time_ms(ours_fn)
    theirs = gpu_time_ms(torch_fn)
    rows.append({"what": name, "ours_ms": ours, "torch_ms": theirs, "ratio": theirs / ours,
                 "ours_tbps": nbytes / ours / 1e9, "torch_tbps": nbytes / theirs / 1e9})
    return ours


copy_dst = nbx.empty((n,), dtype=nbx.bfloat16, device="cuda")
t_copy_dst = torch.empty_like(t_a)
copy_ms = add_row("copy bf16 256M (reference)", lambda: copy_dst.copy_(bf16_a), lambda: t_copy_dst.copy_(t_a), 4 * n)
del copy_dst, t_copy_dst
add_ms = add_row("add bf16 256M", lambda: bf16_a + bf16_b, lambda: t_a + t_b, 6 * n)
add_row("mul bf16 256M", lambda: bf16_a * bf16_b, lambda: t_a * t_b, 6 * n)
add_row("gelu bf16 256M", lambda: F.gelu(bf16_a), lambda: torch.nn.functional.gelu(t_a), 4 * n)
add_row("silu bf16 256M", lambda: F.silu(bf16_a), lambda: torch.nn.functional.silu(t_a), 4 * n)
del bf16_b, t_b

f32 = nbx.full((n,), 1.5, dtype=nbx.float32, device="cuda")
t_f32 = torch.full((n,), 1.5, dtype=torch.float32, device="cuda")
add_row("cast f32->bf16 256M", lambda: f32.to(nbx.bfloat16), lambda: t_f32.to(torch.bfloat16), 6 * n)
del f32, t_f32, bf16_a, t_a

m = 16384  # 16k x 16k bf16: the first operand read transposed decides the output layout, as in ATen
sq_a = nbx.full((m, m), 1.0, dtype=nbx.bfloat16, device="cuda")
sq_b = nbx.full((m, m), 2.0, dtype=nbx.bfloat16, device="cuda")
t_sq_a = torch.full((m, m), 1.0, dtype=torch.bfloat16, device="cuda")
t_sq_b = torch.full((m, m), 2.0, dtype=torch.bfloat16, device="cuda")
transposed_ms = add_row("add bf16 16k^2, one input transposed", lambda: sq_a.T + sq_b, lambda: t_sq_a.T + t_sq_b,
                        6 * m * m)
check("transposed add values", (sq_a.T + sq_b)[:2, :2].tolist() == [[3.0, 3.0], [3.0, 3.0]])
del sq_a, sq_b, t_sq_a, t_sq_b

# --- host cost of one small op ----------------------------------------------------------------
small_a = nbx.full((1024,), 1.0, device="cuda")
small_b = nbx.full((1024,), 2.0, device="cuda")
t_small_a = torch.full((1024,), 1.0, device="cuda")
t_small_b = torch.full((1024,), 2.0, device="cuda")
host_ours, host_torch = host_pair_us(lambda: small_a + small_b, lambda: t_small_a + t_small_b)
torch.cuda.synchronize()

# --- report -----------------------------------------------------------------------------------
print_checks(checks)
print(f"\n{'what':40s} {'ours ms':>9s} {'torch ms':>9s} {'ratio':>6s} {'TB/s':>6s} {'of 4.1':>7s} {'of copy':>8s}")
copy_tbps = rows[0]["ours_tbps"]
for r in rows:
    print(f"{r['what']:40s} {r['ours_ms']:9.3f} {r['torch_ms']:9.3f} {r['ratio']:6.2f} {r['ours_tbps']:6.2f} "
          f"{r['ours_tbps'] / PEAK_TBPS:7.1%} {r['ours_tbps'] / copy_tbps:8.1%}")
contiguous_tbps = 6 * n / add_ms / 1e9
transposed_tbps = 6 * m * m / transposed_ms / 1e9
print(f"\ntransposed add at {transposed_tbps / contiguous_tbps:.1%} of the contiguous add's rate (target 70%)")
print(f"host cost of one 1024-element add: ours {host_ours:.1f} us, torch {host_torch:.1f} us "
      f"(ratio {host_torch / host_ours:.2f})")
ratio_column = "ratio = torch ms / ours ms: above 1 means ours is faster"
print(ratio_column)
with open(os.path.join(out_dir, "gpu_pointwise.json"), "w") as f:
    json.dump({"checks": checks, "rows": rows, "host_us": {"ours": host_ours, "torch": host_torch},
               "transposed_fraction_of_contiguous": transposed_tbps / contiguous_tbps}, f, indent=1)
