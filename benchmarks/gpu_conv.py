"""Convolutions on a CUDA GPU against torch (cuDNN) on the same inputs (shared through DLPack), in the same
run, on shape sets from real models: ResNet-50's stem and stages (3x3 and 1x1, stride 1 and 2, batch 1 and
32), a Stable Diffusion UNet and VAE, ConvNeXt's 7x7 depthwise, ViT's patch embedding, Whisper's and
wav2vec2's conv1d stacks and a 3x3x3 video convolution; bf16 and fp16, NCHW and channels-last (1-d rows
NCHW only). Prints, a row each, our ms, torch ms, the ratio (torch / ours), the fraction of 990 TFLOP/s
(H200 dense half precision), the error against torch and the tile setting the tuner chose (with the
runner-up), then the geometric mean of the ratios, overall and per family; writes every row, with each
candidate's timing, to $OUT/gpu_conv.json when OUT is set. A first call of each layout tunes its launch key
(compiles and times the tile candidates), outside the timed calls; rows left when CONV_SECONDS (default
230) have passed are skipped and counted. CONV_QUICK=1 runs the focus rows (QUICK: ResNet-50's batch-32
late stages, ConvNeXt's depthwise in both layouts, the fp16 conv1d of 8 x 768 x 3000, about 150 s on an
H100 with a cold tuning store); CONV_ONLY=a,b keeps the rows whose name contains one of those words
(CONV_ONLY=dw: the depthwise rows, ConvNeXt's 7x7 and MobileNet's 3x3 at stride 1 and 2), CONV_LAYOUTS=
nchw,channels_last, CONV_DTYPES=bfloat16,float16 and CONV_BATCHES=8,32 the rows of those layouts, dtypes and
batches. CONV_FLUSH=1 times every call alone after an L2 flush and a pause that covers a call's host cost
(device time, as the tuner measures its candidates); by default calls run back to back, so that a row whose
device time is under a call's host cost times the host (on an H100, batch-1 depthwise rows: about 19 us a
torch call, 12-14 us ours)."""
from __future__ import annotations

import json
import math
import os
import sys
import time

import torch

import nbxtensor as nbx
import nbxtensor.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from timing import gpu_pair_ms  # noqa: E402

PEAK_TFLOPS = 990.0
L2_BYTES = 50 * 2 ** 20
HOST_HEADROOM_CYCLES = 100_000  # about 50 us at a GPU's clock: more than a call's host cost
# (name, batch, cin, spatial, cout, kernel, stride, padding, groups)
SHAPES = [
    *[("resnet50 stem 3->64 k7 s2", b, 3, (224, 224), 64, 7, 2, 3, 1) for b in (1, 32)],
    *[(f"resnet50 {c}->{o} k{k} s{s}", b, c, (h, h), o, k, s, k // 2, 1)
      for b in (1, 32) for c, o, k, s, h in ((64, 64, 3, 1, 56), (128, 128, 3, 2, 56), (256, 256, 3, 1, 14),
                                             (512, 512, 3, 1, 7), (256, 64, 1, 1, 56), (1024, 256, 1, 1, 14),
                                             (512, 1024, 1, 2, 28))],
    *[(f"sd-unet {c} {h}x{h}", 2, c, (h, h), c, 3, 1, 1, 1) for c, h in ((320, 64), (640, 32), (1280, 32))],
    *[(f"sd-vae {c} {h}x{h}", 1, c, (h, h), c, 3, 1, 1, 1) for c, h in ((512, 64), (256, 256), (128, 512))],
    *[(f"convnext dw7x7 {c}", b, c, (h, h), c, 7, 1, 3, c) for b in (1, 8, 32)
      for c, h in ((96, 56), (192, 28), (384, 14), (768, 7))],
    *[(f"mobilenet dw3x3 {c} s{s}", b, c, (h, h), c, 3, s, 1, c) for b in (1, 32)
      for c, h, s in ((96, 112, 2), (144, 56, 1), (576, 14, 2), (960, 7, 1))],
    ("vit patch16", 8, 3, (224, 224), 768, 16, 16, 0, 1),
    ("whisper conv1 80->768", 1, 80, (3000,), 768, 3, 1, 1, 1),
    *[("whisper conv2 768 s2", b, 768, (3000,), 768, 3, 2, 1, 1) for b in (1, 8)],
    ("wav2vec2 conv0 1->512 k10 s5", 4, 1, (16000,), 512, 10, 5, 0, 1),
    ("wav2vec2 conv1 512 k3 s2", 4, 512, (3199,), 512, 3, 2, 0, 1),
    ("wav2vec2 conv6 512 k2 s2", 4, 512, (99,), 512, 2, 2, 0, 1),
    ("wav2vec2 pos-conv k128 g16", 4, 768, (49,), 768, 128, 1, 64, 16),
    ("video 3x3x3 64", 2, 64, (8, 56, 56), 64, 3, 1, 1, 1),
]

# CONV_QUICK's rows: (name, batch, dtype, channels_last)
QUICK = [
    ("resnet50 128->128 k3 s2", 32, "bfloat16", False),
    ("resnet50 256->256 k3 s1", 32, "bfloat16", False),
    ("resnet50 128->128 k3 s2", 32, "bfloat16", True),
    ("convnext dw7x7 96", 8, "bfloat16", False),
    ("convnext dw7x7 96", 8, "bfloat16", True),
    ("convnext dw7x7 384", 8, "bfloat16", False),
    ("convnext dw7x7 384", 8, "bfloat16", True),
    ("whisper conv2 768 s2", 8, "float16", False),
]


def _flops(batch, cin, spatial, cout, kernel, stride, padding, groups):
    out = 1
    for size in spatial:
        out *= (size + 2 * padding - kernel) // stride + 1
    return 2 * batch * cout * out * (cin // groups) * kernel ** len(spatial)


def _family(name):
    return "depthwise" if " dw" in name else "1x1" if " k1 " in name else name.split()[0]


def _geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def _rows(quick):
    """(shape, dtype, channels_last) of each row to time, in order."""
    if quick:
        by_name = {(shape[0], shape[1]): shape for shape in SHAPES}
        return [(by_name[(name, batch)], getattr(torch, dtype), cl) for name, batch, dtype, cl in QUICK]
    return [(shape, dtype, cl) for dtype in (torch.bfloat16, torch.float16) for cl in (False, True)
            for shape in SHAPES if not (cl and len(shape[3]) == 1)]


def _timed_candidates():
    """A list that gathers (ms, config) of every candidate the tuner times from now on, fastest first."""
    from nbxtensor.tuning import cache
    gathered, plain = [], cache.time_candidates

    def gathering(key, candidates, measure, rounds=1):
        ranked = plain(key, candidates, measure, rounds)
        gathered.extend(ranked)
        return ranked
    cache.time_candidates = gathering
    return gathered


def _l2_flush():
    """A call that overwrites the L2 cache, then holds the device while the host queues the timed call."""
    scratch = torch.empty(2 * L2_BYTES, dtype=torch.uint8, device="cuda")

    def flush():
        scratch.zero_()
        torch.cuda._sleep(HOST_HEADROOM_CYCLES)
    return flush


def _setting(config):
    return " ".join(f"{k}={v}" for k, v in config.items() if v is not False) if config else "stored"


def main():
    quick = os.environ.get("CONV_QUICK") == "1"
    only = [w for w in os.environ.get("CONV_ONLY", "").split(",") if w]
    layouts = os.environ.get("CONV_LAYOUTS", "nchw,channels_last").split(",")
    dtypes = os.environ.get("CONV_DTYPES", "bfloat16,float16").split(",")
    batches = [int(b) for b in os.environ.get("CONV_BATCHES", "").split(",") if b]
    budget = float(os.environ.get("CONV_SECONDS", "230"))
    flush = _l2_flush() if os.environ.get("CONV_FLUSH") == "1" else None
    timed = _timed_candidates()
    rows, skipped = [], 0
    started = time.perf_counter()
    for (name, batch, cin, spatial, cout, kernel, stride, padding, groups), dtype, channels_last in _rows(quick):
        if (only and not any(w in name for w in only)) or (batches and batch not in batches):
            continue
        if ("channels_last" if channels_last else "nchw") not in layouts or str(dtype).split(".")[-1] not in dtypes:
            continue
        if time.perf_counter() - started > budget:
            skipped += 1
            continue
        dims = len(spatial)
        x = torch.randn(batch, cin, *spatial, device="cuda", dtype=dtype)
        w = torch.randn(cout, cin // groups, *(kernel,) * dims, device="cuda", dtype=dtype) * 0.05
        b = torch.randn(cout, device="cuda", dtype=dtype)
        if channels_last:
            layout = torch.channels_last if dims == 2 else torch.channels_last_3d
            x, w = x.contiguous(memory_format=layout), w.contiguous(memory_format=layout)
        conv_t = getattr(torch.nn.functional, f"conv{dims}d")
        conv_n = getattr(F, f"conv{dims}d")
        xn, wn, bn = nbx.from_dlpack(x), nbx.from_dlpack(w), nbx.from_dlpack(b)
        want = conv_t(x, w, b, stride, padding, 1, groups)
        del timed[:]
        first = time.perf_counter()
        got = torch.from_dlpack(conv_n(xn, wn, bn, stride, padding, 1, groups))
        torch.cuda.synchronize()
        planned_s = time.perf_counter() - first
        error = float((got.double() - want.double()).abs().max() / (want.double().abs().max() + 1))
        ours, theirs = gpu_pair_ms(lambda: conv_n(xn, wn, bn, stride, padding, 1, groups),
                                   lambda: conv_t(x, w, b, stride, padding, 1, groups), reps=5, rounds=5,
                                   flush=flush)
        flops = _flops(batch, cin, spatial, cout, kernel, stride, padding, groups)
        row = dict(name=name, batch=batch, dtype=str(dtype).split(".")[-1], flushed=flush is not None,
                   layout="channels_last" if channels_last else "nchw", ours_ms=ours, torch_ms=theirs,
                   ratio=theirs / ours, peak=flops / (ours * 1e-3) / 1e12 / PEAK_TFLOPS, error=error,
                   planned_s=planned_s, candidates=[dict(ms=ms, **config) for ms, config in timed])
        rows.append(row)
        chosen = " | ".join(f"{_setting(config)} {ms:.3f} ms" for ms, config in timed[:2]) or "stored setting"
        print(f"{name:28s} b{batch:<3d} {row['dtype']:9s} {row['layout']:13s} ours {ours:8.3f} ms  "
              f"torch {theirs:8.3f} ms  ratio {row['ratio']:5.2f}  peak {row['peak']:6.1%}  err {error:.1e}"
              f"  (first call {planned_s:5.1f} s; {chosen})", flush=True)
    families = sorted({_family(r["name"]) for r in rows})
    print(f"geometric mean of torch/ours over {len(rows)} rows: {_geomean([r['ratio'] for r in rows]):.3f}; "
          + ", ".join(f"{f} {_geomean([r['ratio'] for r in rows if _family(r['name']) == f]):.2f}"
                      for f in families) + f"; {time.perf_counter() - started:.0f} s in all, {skipped} rows skipped past CONV_SECONDS")
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "gpu_conv.json"), "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
