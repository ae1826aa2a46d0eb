"""The CUDA device layer on a GPU: host cost of a launch (ours, Triton's generic path, torch eager),
pinned host<->device copies of 1 GiB, and allocation through the caching allocator, each against torch
in the same run. Prints a table last."""
from __future__ import annotations

import json
import os
import sys

import numpy as np
import triton.language as tl

import nbxtensor as nbx
from nbxtensor.device import backend_for
from nbxtensor.kernels.copy import PAIRS_NONE, SOURCE_CONSTANT, strided_copy
from nbxtensor.kernels.formats import FORMAT_NATIVE

sys.path.insert(0, os.path.dirname(__file__))
from timing import host_time_us  # noqa: E402

import torch  # noqa: E402  (the comparison only; nbxtensor itself never imports torch)

out_dir = os.environ.get("OUT", ".")
rows = []

# --- host cost of one small launch --------------------------------------------------------------
small = nbx.empty(16, device="cuda")
tsmall = torch.empty(16, device="cuda")
pointer = backend_for(small.device).kernel_pointer(small.data_ptr(), tl.float32)
bits = int(np.array(1.0, np.float32).view(np.int32))


def triton_generic():
    strided_copy[(1,)](pointer, pointer, 16, bits, (16,), (1,), (1,), RANK=1, SOURCE=SOURCE_CONSTANT.value,
                       CONSTANT_BITS_TYPE=tl.int32, SRC_FORMAT=FORMAT_NATIVE.value, DST_FORMAT=FORMAT_NATIVE.value,
                       PAIRS=PAIRS_NONE.value, VIA_F32=False, FLOAT_TO_INT=False, INDEX_64=False, BLOCK=1024)


a = nbx.ones(16, device="cuda")
ta = torch.ones(16, device="cuda")
rows.append(("host: fill_ of 16 floats (us)", host_time_us(lambda: small.fill_(1.0)),
             host_time_us(lambda: tsmall.fill_(1.0))))
rows.append(("host: copy_ of 16 floats (us)", host_time_us(lambda: small.copy_(a)), host_time_us(lambda: tsmall.copy_(ta))))
rows.append(("host: clone of 16 floats (us)", host_time_us(lambda: a.clone()), host_time_us(lambda: ta.clone())))
generic = host_time_us(triton_generic)
torch.cuda.synchronize()
nbx.cuda.synchronize()
fill_ok = small.numpy().tolist() == [1.0] * 16

# --- pinned copies of 1 GiB -----------------------------------------------------------------------
n = 1 << 30
pinned = nbx.empty(n, dtype=nbx.uint8, device="cpu", pin_memory=True)
pinned.numpy()[:] = 7
dev = nbx.empty(n, dtype=nbx.uint8, device="cuda")
tpinned = torch.empty(n, dtype=torch.uint8).pin_memory()
tdev = torch.empty(n, dtype=torch.uint8, device="cuda")


def wall_gbps(fn, reps=5):
    import time
    fn()
    nbx.cuda.synchronize()
    torch.cuda.synchronize()
    best = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        nbx.cuda.synchronize()
        torch.cuda.synchronize()
        best.append(time.perf_counter() - t0)
    best.sort()
    return n / best[len(best) // 2] / 1e9


rows.append(("pinned host->device 1 GiB (GB/s)", wall_gbps(lambda: dev.copy_(pinned)), wall_gbps(lambda: tdev.copy_(tpinned))))
rows.append(("pinned device->host 1 GiB (GB/s)", wall_gbps(lambda: pinned.copy_(dev)), wall_gbps(lambda: tpinned.copy_(tdev))))
pageable = nbx.from_numpy(np.full(n, 3, np.uint8))
tpageable = torch.from_numpy(np.full(n, 3, np.uint8))
rows.append(("pageable host->device 1 GiB (GB/s)", wall_gbps(lambda: dev.copy_(pageable)), wall_gbps(lambda: tdev.copy_(tpageable))))
copy_ok = int(dev.numpy()[12345]) == 3
del pinned, dev, tpinned, tdev, pageable, tpageable

# a 1 GiB safetensors file (in the page cache after the first read) loaded to the GPU
import tempfile  # noqa: E402

from safetensors.torch import load_file as torch_load_file  # noqa: E402

with tempfile.TemporaryDirectory() as scratch:
    path = os.path.join(scratch, "weights.safetensors")
    nbx.io.save_file({f"w{i}": nbx.from_numpy(np.full(1 << 26, i, np.float32)) for i in range(4)}, path)
    rows.append(("safetensors 1 GiB file -> device (GB/s)", wall_gbps(lambda: nbx.io.load_file(path, device="cuda")),
                 wall_gbps(lambda: torch_load_file(path, device="cuda"))))
    copy_ok = copy_ok and float(nbx.io.load_file(path, device="cuda")["w3"].numpy()[-1]) == 3.0

# --- allocation -------------------------------------------------------------------------------------
rows.append(("host: empty(1 MiB) + free (us)", host_time_us(lambda: nbx.empty(1 << 18, device="cuda")),
             host_time_us(lambda: torch.empty(1 << 18, device="cuda"))))
base = nbx.cuda.memory_allocated()
x = nbx.ones(64, device="cuda")
for _ in range(10_000):
    y = x.clone()
del x, y
baseline_ok = nbx.cuda.memory_allocated() == base
free, total = nbx.cuda.mem_get_info()
try:
    nbx.empty(2 * total, dtype=nbx.uint8, device="cuda")
    oom_text = "no error"
except nbx.OutOfMemoryError as e:
    oom_text = str(e)
after_oom_ok = nbx.ones(8, device="cuda").numpy().sum() == 8

print(f"\nTriton's generic launch path for the same fill kernel: {generic:.1f} us")
print(f"checks: cached-launch fill {fill_ok}, copies {copy_ok}, 10k ops back to baseline {baseline_ok}, "
      f"usable after OOM {after_oom_ok}")
print(f"OOM message: {oom_text}")
print(f"\n{'what':40s} {'ours':>9s} {'torch':>9s}")
for name, ours, theirs in rows:
    print(f"{name:40s} {ours:9.1f} {theirs:9.1f}")
with open(os.path.join(out_dir, "gpu_device.json"), "w") as f:
    json.dump({"rows": rows, "triton_generic_us": generic, "oom": oom_text,
               "checks": {"fill": bool(fill_ok), "copy": bool(copy_ok), "baseline": bool(baseline_ok),
                          "after_oom": bool(after_oom_ok)}}, f,
              indent=1)
