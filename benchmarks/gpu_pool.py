"""Pooling and resampling on a CUDA GPU against torch on the same inputs, at model shapes: the ResNet
stem's 3x3/2 max pool, a classifier head's global average pool, a diffusion UNet's nearest 2x upsample
and a bilinear resize of 224 images; bf16 and fp16, NCHW and channels-last. Prints ours/torch/ratio and
the fraction of the memory floor (input read once, output written once, at the device's copy
bandwidth); correctness checks first. The full log goes to $OUT/gpu_pool.log when OUT is set."""
from __future__ import annotations

import io
import os
import sys

import nbxtensor as nbx
from nbxtensor.device import backend_for

sys.path.insert(0, os.path.dirname(__file__))
from timing import gpu_time_ms  # noqa: E402

import torch  # noqa: E402  (the comparison only; nbxtensor itself never imports torch)
import torch.nn.functional as TF  # noqa: E402

F = nbx.nn.functional
out_dir = os.environ.get("OUT")
dev = nbx.device("cuda", 0)
bandwidth = backend_for(dev).facts.get("bandwidth_bytes_per_s", {})
floor_bw = bandwidth.get("measured_h200_copy") or max(bandwidth.values(), default=1e12)
log = io.StringIO()
rows, checks = [], []


def say(line=""):
    print(line)
    log.write(line + "\n")


def case(name, shape, dtype, channels_last, ours, theirs, tolerance):
    x = torch.randn(*shape, device="cuda", dtype=dtype)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    ours_x = nbx.from_dlpack(x)
    got, want = torch.from_dlpack(ours(ours_x)), theirs(x)
    checks.append((name, torch.allclose(got.float(), want.float(), atol=tolerance, rtol=tolerance),
                   got.stride() == want.stride()))
    ours_ms, theirs_ms = gpu_time_ms(lambda: ours(ours_x)), gpu_time_ms(lambda: theirs(x))
    floor_ms = (x.numel() + want.numel()) * x.element_size() / floor_bw * 1e3
    rows.append((name, ours_ms, theirs_ms, theirs_ms / ours_ms, floor_ms / ours_ms))


for dtype, dname in ((torch.bfloat16, "bf16"), (torch.float16, "fp16")):
    tol = 1e-2 if dtype is torch.bfloat16 else 2e-3
    for cl in (False, True):
        fmt = "NHWC" if cl else "NCHW"
        for batch in (1, 32):
            case(f"maxpool 3x3/2 64x112x112 b{batch} {dname} {fmt}", (batch, 64, 112, 112), dtype, cl,
                 lambda x: F.max_pool2d(x, 3, 2, 1), lambda x: TF.max_pool2d(x, 3, 2, 1), 0)
        case(f"adaptive avg 1x1 2048x7x7 b32 {dname} {fmt}", (32, 2048, 7, 7), dtype, cl,
             lambda x: F.adaptive_avg_pool2d(x, 1), lambda x: TF.adaptive_avg_pool2d(x, 1), tol)
        for channels, side in ((640, 64), (1280, 32)):
            case(f"nearest 2x {channels}x{side}x{side} b2 {dname} {fmt}", (2, channels, side, side), dtype, cl,
                 lambda x: F.interpolate(x, scale_factor=2.0), lambda x: TF.interpolate(x, scale_factor=2.0), 0)
        case(f"bilinear 224->320 3ch b32 {dname} {fmt}", (32, 3, 224, 224), dtype, cl,
             lambda x: F.interpolate(x, size=(320, 320), mode="bilinear"),
             lambda x: TF.interpolate(x, size=(320, 320), mode="bilinear"), tol)

say("checks (values, output strides as torch's):")
for name, ok, same_strides in checks:
    say(f"  {'ok  ' if ok else 'FAIL'} {'strides ok' if same_strides else 'strides differ'}  {name}")
say(f"\n{'case':<48} {'ours ms':>9} {'torch ms':>9} {'ratio':>7} {'floor':>7}")
for name, ours_ms, theirs_ms, ratio, fraction in rows:
    say(f"{name:<48} {ours_ms:9.4f} {theirs_ms:9.4f} {ratio:7.2f} {fraction:7.2f}")
if out_dir:
    with open(os.path.join(out_dir, "gpu_pool.log"), "w") as f:
        f.write(log.getvalue())
