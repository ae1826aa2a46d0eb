"""Two measurements that set facts and find host costs, for one device call:
1. host time per call of small ops (ours and torch's), with the top of a profile of ours;
2. row-sum tiles: bf16 32768 x 4096 summed over rows for each (reduction_block, reduction_tile,
   reduction_warps) in a grid, against torch in the same run.
Writes a full log to stdout; the short table comes last."""
from __future__ import annotations

import cProfile
import io
import itertools
import os
import pstats
import sys

import nbxtensor as nbx
from nbxtensor.device import backend_for
from nbxtensor.ops.plans import clear_all

sys.path.insert(0, os.path.dirname(__file__))
from timing import gpu_time_ms, host_pair_us, host_time_us  # noqa: E402

import torch  # noqa: E402  (the comparison only)

dev = "cuda"
a, b = nbx.ones((16,), device=dev), nbx.ones((16,), device=dev)
ta, tb = torch.ones(16, device=dev), torch.ones(16, device=dev)
x, w = nbx.ones((1, 4096), device=dev, dtype=nbx.bfloat16), nbx.ones((14336, 4096), device=dev, dtype=nbx.bfloat16)
tx, tw = torch.ones(1, 4096, device=dev, dtype=torch.bfloat16), torch.ones(14336, 4096, device=dev, dtype=torch.bfloat16)
m2, tm2 = nbx.ones((64, 256), device=dev), torch.ones(64, 256, device=dev)
vocab = nbx.ones((64, 152064), device=dev)
tvocab = torch.from_dlpack(vocab)
features = nbx.ones((8, 64, 14, 14), device=dev)
tfeatures = torch.from_dlpack(features)
q = nbx.ones((8, 32, 1, 128), device=dev, dtype=nbx.bfloat16)
kv = nbx.ones((8, 32, 1024, 128), device=dev, dtype=nbx.bfloat16)
tq, tkv = torch.from_dlpack(q), torch.from_dlpack(kv)
F, TF = nbx.nn.functional, torch.nn.functional
cases = {
    "fill_": (lambda: a.fill_(1.0), lambda: ta.fill_(1.0)),
    "copy_": (lambda: a.copy_(b), lambda: ta.copy_(tb)),
    "clone": (lambda: a.clone(), lambda: ta.clone()),
    "empty 1 MiB": (lambda: nbx.empty((262144,), device=dev), lambda: torch.empty(262144, device=dev)),
    "add": (lambda: a + b, lambda: ta + tb),
    "mul scalar": (lambda: a * 2.0, lambda: ta * 2.0),
    "linear 1x4096x14336": (lambda: F.linear(x, w), lambda: TF.linear(tx, tw)),
    "sum row 64x256": (lambda: m2.sum(dim=-1), lambda: tm2.sum(dim=-1)),
    "x.sum(-1) 64x256": (lambda: m2.sum(-1), lambda: tm2.sum(-1)),
    "nbx.sum(x, -1) 64x256": (lambda: nbx.sum(m2, -1), lambda: torch.sum(tm2, -1)),
    "mean (2, 3) 8x64x14x14": (lambda: features.mean((2, 3)), lambda: tfeatures.mean((2, 3))),
    "argmax 64x152064": (lambda: vocab.argmax(-1), lambda: tvocab.argmax(-1)),
    "softmax 64x256": (lambda: nbx.softmax(m2, -1), lambda: torch.softmax(tm2, -1)),
    "x.softmax(-1) 64x256": (lambda: m2.softmax(-1), lambda: tm2.softmax(-1)),
    "F.softmax 64x256": (lambda: F.softmax(m2, -1), lambda: TF.softmax(tm2, -1)),
    "softmax 64x152064": (lambda: vocab.softmax(-1), lambda: tvocab.softmax(-1)),
    "cumsum 64x152064": (lambda: vocab.cumsum(-1), lambda: tvocab.cumsum(-1)),
    "sort 64x256": (lambda: m2.sort(-1), lambda: tm2.sort(-1)),
    "topk 5 of 64x256": (lambda: m2.topk(5), lambda: tm2.topk(5)),
    "topk 50 of 64x152064": (lambda: vocab.topk(50), lambda: tvocab.topk(50)),
    "sdpa decode": (lambda: F.scaled_dot_product_attention(q, kv, kv), lambda: TF.scaled_dot_product_attention(tq, tkv, tkv)),
}
host_rows = []
for name, (ours, theirs) in cases.items():
    # alternated batches, medians: a host's speed drifts within a run (run 2 of the sixth session measured
    # the same add at 13.2 and 9.4 us a minute apart), so each side gets the same moments
    ours_us, theirs_us = host_pair_us(ours, theirs)
    torch.cuda.synchronize()
    host_rows.append((name, ours_us, theirs_us))
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(500):
        ours()
    profile.disable()
    torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(12)
    print(f"==== {name}: ours {ours_us:.1f} us, torch {theirs_us:.1f} us\n{text.getvalue()}")

# Where an add's host time goes: Triton's launcher with and without its Python wrapper, our launch path
# alone, the general path of the op (parse, plan, launch_slots), the whole op (its bound call), the whole
# op with Python's cyclic garbage collector off; and the floor of a launch: a kernel of two arguments
# through Triton's C launcher and through cuda-bindings' cuLaunchKernel with packed parameters.
import ctypes  # noqa: E402
import gc  # noqa: E402

import triton  # noqa: E402
from cuda.bindings import driver  # noqa: E402

import nbxtensor.launch as launch_module  # noqa: E402
import nbxtensor.ops.pointwise as pointwise_module  # noqa: E402
from nbxtensor.ops.pointwise_table import TABLE  # noqa: E402

add_row = next(r for r in TABLE if r.name == "add")
captured = []
# pointwise's general path launches through ``launch.launch_slots`` by the name its own module binds
real_launch_slots = pointwise_module.launch_slots


def capturing(*launch_args):
    captured.append(launch_args)
    real_launch_slots(*launch_args)


pointwise_module.launch_slots = capturing
keep = pointwise_module._run(add_row, (a, b), {})
pointwise_module.launch_slots = real_launch_slots
launch_args = captured[-1]
kernel, grid, device, fixed_args, positions, varying = launch_args[:6]
args = list(fixed_args)
for i, v in zip(positions, varying):
    args[i] = v
backend = backend_for(device)
entry = [v for k, v in launch_module._compiled.items() if k[0] is kernel][-1]
compiled, tail = entry[:2]
values = [x.data_ptr() if isinstance(x, nbx.Tensor) else x for x in args]
stream = backend.current_stream_handle(device.index)
c_launch, cooperative, pdl = launch_module._direct_launcher(compiled)
triton_arguments = [*launch_module._grid3(grid), stream, compiled.function, cooperative, pdl, None, None,
                    compiled.packed_metadata, None, None, None, *values, *tail]
ours = launch_module.bind_launch(entry, grid, backend, values, positions)
ours_new = [values[i] for i in positions]


@triton.jit
def _two_arguments(x_ptr, n):
    pass


for _ in range(2):
    launch_module.launch(_two_arguments, (1,), device, [a, 16])
tiny = [v for k, v in launch_module._compiled.items() if k[0] is _two_arguments][-1]
tiny_launch = launch_module._direct_launcher(tiny[0])[0]
tiny_args = [1, 1, 1, stream, tiny[0].function, 0, 0, None, None, tiny[0].packed_metadata, None, None, None,
             a.data_ptr(), 16]
tiny_ours = launch_module.bind_launch(tiny, (1,), backend, [a.data_ptr(), 16], [0])
tiny_values = [ctypes.c_uint64(a.data_ptr()), ctypes.c_int32(16), ctypes.c_uint64(0), ctypes.c_uint64(0)]
tiny_params = (ctypes.c_void_p * 4)(*[ctypes.addressof(v) for v in tiny_values])
tiny_function, tiny_stream = driver.CUfunction(init_value=tiny[0].function), driver.CUstream(init_value=stream)
tiny_threads, tiny_shared = 32 * tiny[0].metadata.num_warps, tiny[0].metadata.shared


def bindings_launch():
    return driver.cuLaunchKernel(tiny_function, 1, 1, 1, tiny_threads, 1, 1, tiny_shared, tiny_stream,
                                 ctypes.addressof(tiny_params), 0)


try:
    bindings_launch()
    bindings_row = ("2-arg kernel, cuLaunchKernel", host_time_us(bindings_launch))
except Exception as error:  # noqa: BLE001  (a measurement, reported either way)
    bindings_row = (f"2-arg kernel, cuLaunchKernel failed: {error}"[:60], float("nan"))
breakdown = [
    ("Triton launcher alone", host_time_us(lambda: compiled.run(grid[0], 1, 1, stream, compiled.function,
                                                               compiled.packed_metadata, None, None, None,
                                                               *values, *tail))),
    ("Triton C launcher alone", host_time_us(lambda: c_launch(*triton_arguments))),
    ("our bound launcher alone", host_time_us(lambda: ours(stream, *ours_new)) if ours else float("nan")),
    ("2-arg kernel, C launcher", host_time_us(lambda: tiny_launch(*tiny_args))),
    ("2-arg kernel, our launcher", host_time_us(lambda: tiny_ours(stream, a.data_ptr())) if tiny_ours else float("nan")),
    bindings_row,
    ("our launch path", host_time_us(lambda: real_launch_slots(*launch_args))),
    ("add, general path", host_time_us(lambda: pointwise_module._run(add_row, (a, b), {}))),
    ("whole add", host_time_us(lambda: a + b)),
]
gc.disable()
breakdown.append(("whole add, gc off", host_time_us(lambda: a + b)))
gc.enable()
breakdown.append(("empty(16) + free", host_time_us(lambda: nbx.empty((16,), device=dev))))
torch.cuda.synchronize()
print("\nadd of 16 floats, host us:")
for name, us in breakdown:
    print(f"  {name:28s} {us:7.1f}")

facts = backend_for(nbx.device(dev)).facts["kernels"]
saved = {k: facts[k] for k in ("reduction_block", "reduction_tile", "reduction_warps")}
torch.manual_seed(0)
t = torch.randn(32768, 4096, device=dev, dtype=torch.bfloat16)
s = nbx.from_dlpack(t)
theirs = gpu_time_ms(lambda: t.sum(dim=-1))
expected = t.float().sum(dim=-1)
tile_rows = []
for block, tile, warps in itertools.product((128, 256, 512, 1024, 2048), (2048, 4096, 8192), (4, 8)):
    if tile < block:
        continue
    facts.update(reduction_block=block, reduction_tile=tile, reduction_warps=warps)
    clear_all()  # reductions keep plans made under the facts before
    try:
        got = torch.from_dlpack(s.sum(dim=-1)).float()
        err = float((got - expected).abs().max())
        ms = gpu_time_ms(lambda: s.sum(dim=-1))
    except Exception as e:  # noqa: BLE001  (a setting the device refuses is a result too)
        print(f"block {block} tile {tile} warps {warps}: {type(e).__name__}: {str(e)[:200]}")
        continue
    tile_rows.append((block, tile, warps, ms, err))
facts.update(saved)
clear_all()

# elements per program of pointwise kernels (4 warps): heavy bodies like gelu's erf may want more per thread
saved_block = facts["elementwise_block"]
g = torch.randn(256 * 2**20, device=dev, dtype=torch.bfloat16)
gs = nbx.from_dlpack(g)
pointwise_torch = {"gelu": gpu_time_ms(lambda: torch.nn.functional.gelu(g)),
                   "silu": gpu_time_ms(lambda: torch.nn.functional.silu(g)), "add": gpu_time_ms(lambda: g + g)}
ours_pointwise = {"gelu": lambda: nbx.nn.functional.gelu(gs), "silu": lambda: nbx.nn.functional.silu(gs),
                  "add": lambda: gs + gs}
block_rows = []
for block in (512, 1024, 2048, 4096, 8192):
    facts["elementwise_block"] = block
    clear_all()
    block_rows.append((block, {name: gpu_time_ms(fn) for name, fn in ours_pointwise.items()}))
facts["elementwise_block"] = saved_block
clear_all()

print("\nadd of 16 floats, host us: " + ", ".join(f"{name} {us:.1f}" for name, us in breakdown))
print(f"\n{'host: one call of':24s} {'ours us':>8s} {'torch us':>9s} {'ratio':>6s}")
for name, ours_us, theirs_us in host_rows:
    print(f"{name:24s} {ours_us:8.1f} {theirs_us:9.1f} {theirs_us / ours_us:6.2f}")
print(f"\nrow sum bf16 32768x4096: torch {theirs:.3f} ms")
print(f"{'block':>6s} {'tile':>6s} {'warps':>5s} {'ms':>7s} {'ratio':>6s} {'max err':>8s}")
for block, tile, warps, ms, err in sorted(tile_rows, key=lambda r: r[3])[:12]:
    print(f"{block:6d} {tile:6d} {warps:5d} {ms:7.3f} {theirs / ms:6.2f} {err:8.2g}")
print("\npointwise bf16 256M by elements per program (ms; ratio to torch)")
print(f"{'block':>6s} " + " ".join(f"{name:>14s}" for name in pointwise_torch))
print(f"{'torch':>6s} " + " ".join(f"{ms:14.3f}" for ms in pointwise_torch.values()))
for block, times in block_rows:
    print(f"{block:6d} " + " ".join(f"{times[n]:8.3f} {pointwise_torch[n] / times[n]:5.2f}" for n in pointwise_torch))
