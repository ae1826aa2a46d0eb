"""Convolutions on a CUDA GPU against torch (cuDNN) on the same inputs (shared through DLPack), in the same
run, on shape sets from real models: ResNet-50 stages, a Stable Diffusion UNet, ConvNeXt's 7x7 depthwise,
ViT's patch embedding and Whisper's conv1d stem; bf16 and fp16, NCHW and channels-last. Prints a table of
our ms, torch ms, ratio (torch / ours) and the fraction of 990 TFLOP/s (H200 dense half precision);
writes every row to $OUT/gpu_conv.json when OUT is set. CONV_QUICK=1 keeps one dtype and layout."""
from __future__ import annotations

import json
import os
import sys

import torch

import nbxtensor as nbx
import nbxtensor.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from timing import gpu_pair_ms  # noqa: E402

PEAK_TFLOPS = 990.0
# (name, batch, cin, spatial, cout, kernel, stride, padding, groups)
SHAPES = [
    *[(f"resnet50 {c}->{o} k{k} s{s}", b, c, (h, h), o, k, s, k // 2, 1)
      for b in (1, 32) for c, o, k, s, h in ((64, 64, 3, 1, 56), (128, 128, 3, 2, 56), (256, 256, 3, 1, 14),
                                             (512, 512, 3, 1, 7), (256, 64, 1, 1, 56), (1024, 256, 1, 1, 14),
                                             (512, 1024, 1, 2, 28))],
    *[(f"sd-unet {c} {h}x{h}", 2, c, (h, h), c, 3, 1, 1, 1) for c, h in ((320, 64), (640, 32), (1280, 32))],
    ("convnext dw7x7 96", 8, 96, (56, 56), 96, 7, 1, 3, 96),
    ("convnext dw7x7 384", 8, 384, (14, 14), 384, 7, 1, 3, 384),
    ("vit patch16", 8, 3, (224, 224), 768, 16, 16, 0, 1),
    ("whisper conv1 80->768", 1, 80, (3000,), 768, 3, 1, 1, 1),
    ("whisper conv2 768 s2", 1, 768, (3000,), 768, 3, 2, 1, 1),
]


def _flops(batch, cin, spatial, cout, kernel, stride, padding, groups):
    out = 1
    for size in spatial:
        out *= (size + 2 * padding - kernel) // stride + 1
    return 2 * batch * cout * out * (cin // groups) * kernel ** len(spatial)


def main():
    quick = os.environ.get("CONV_QUICK") == "1"
    rows = []
    for dtype in (torch.bfloat16,) if quick else (torch.bfloat16, torch.float16):
        for channels_last in (False,) if quick else (False, True):
            for name, batch, cin, spatial, cout, kernel, stride, padding, groups in SHAPES:
                if channels_last and len(spatial) != 2:
                    continue
                x = torch.randn(batch, cin, *spatial, device="cuda", dtype=dtype)
                w = torch.randn(cout, cin // groups, *(kernel,) * len(spatial), device="cuda", dtype=dtype) * 0.05
                b = torch.randn(cout, device="cuda", dtype=dtype)
                if channels_last:
                    x, w = x.contiguous(memory_format=torch.channels_last), w.contiguous(
                        memory_format=torch.channels_last)
                conv_t = torch.nn.functional.conv1d if len(spatial) == 1 else torch.nn.functional.conv2d
                conv_n = F.conv1d if len(spatial) == 1 else F.conv2d
                xn, wn, bn = nbx.from_dlpack(x), nbx.from_dlpack(w), nbx.from_dlpack(b)
                want = conv_t(x, w, b, stride, padding, 1, groups)
                got = torch.from_dlpack(conv_n(xn, wn, bn, stride, padding, 1, groups))
                error = float((got.double() - want.double()).abs().max() / (want.double().abs().max() + 1))
                ours, theirs = gpu_pair_ms(lambda: conv_n(xn, wn, bn, stride, padding, 1, groups),
                                           lambda: conv_t(x, w, b, stride, padding, 1, groups), reps=5, rounds=5)
                flops = _flops(batch, cin, spatial, cout, kernel, stride, padding, groups)
                row = dict(name=name, batch=batch, dtype=str(dtype).split(".")[-1],
                           layout="channels_last" if channels_last else "nchw", ours_ms=ours, torch_ms=theirs,
                           ratio=theirs / ours, peak=flops / (ours * 1e-3) / 1e12 / PEAK_TFLOPS, error=error)
                rows.append(row)
                print(f"{name:26s} b{batch:<3d} {row['dtype']:9s} {row['layout']:13s} ours {ours:8.3f} ms  "
                      f"torch {theirs:8.3f} ms  ratio {row['ratio']:5.2f}  peak {row['peak']:6.1%}  err {error:.1e}",
                      flush=True)
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "gpu_conv.json"), "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
