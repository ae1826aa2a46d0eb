"""FFTs and STFTs of real uses on a CUDA GPU against torch (cuFFT) on the same inputs, shared through DLPack, in
the same run: Whisper's log-mel STFT (n_fft 400, hop 160, 30 s of 16 kHz audio, batch 1 and 8), audio
spectrograms (n_fft 512, 1024, 2048), 2-D FFTs of 256^2 and 1024^2 complex images (batch 8), long 1-D rffts
(2^20 and 10^6 points) and FNet's fft2 over (batch 8, 512 tokens, 768 hidden). Prints the checks, then a table:
our ms, torch ms, ratio (torch / ours), the bytes a transform must move (its input read and its output written
once) per second, and that floor's time as a fraction of ours at the copy bandwidth measured in this run. A few
cases run again under other settings: the stages' float32 products as the six products of bfloat16 parts on
the matrix units (``parts`` rows) instead of IEEE float32 on the FMA units (``fft_float32_parts`` in the
facts), programs of other sizes (``tile N`` rows: the facts' ``fft_tile_elements``).

``--dry-run`` needs no GPU: it lists each case's shapes, the plan of every one-dim transform (passes, Bluestein)
and the floor's bytes, from metadata and the plans alone."""
from __future__ import annotations

import json
import math
import os
import sys
from typing import Callable, NamedTuple

import nbxtensor as nbx
from nbxtensor.device import backend_for
from nbxtensor.ops import fft as F

sys.path.insert(0, os.path.dirname(__file__))

out_dir = os.environ.get("OUT", ".")
SECONDS, RATE = 30, 16000  # Whisper's 30 s window of 16 kHz audio


class Case(NamedTuple):
    name: str
    shape: tuple          # the input's
    dtype: str            # the input's (torch's name)
    lengths: tuple        # the one-dim transforms' lengths, for the plan column
    ours: Callable        # (nbx input, nbx window or None) -> result
    theirs: Callable      # (torch input, torch window or None) -> result
    window: int | None    # a Hann window's length, where the case takes one
    out_bytes: int        # the result's bytes
    variants: tuple = ()  # other settings it is also timed under: (label, facts' kernel settings)


def _stft_case(name, batch, samples, n_fft, hop):
    frames = 1 + samples // hop
    kwargs = dict(n_fft=n_fft, hop_length=hop, return_complex=True)
    return Case(name, (batch, samples), "float32", (n_fft,),
                lambda x, w: nbx.stft(x, window=w, **kwargs), lambda x, w: _torch().stft(x, window=w, **kwargs),
                n_fft, batch * (n_fft // 2 + 1) * frames * 8)


def _fft2_case(name, shape, dtype, variants=()):
    complex_bytes = 8 * math.prod(shape)
    return Case(name, shape, dtype, shape[-2:], lambda x, w: nbx.fft.fft2(x), lambda x, w: _torch().fft.fft2(x),
                None, complex_bytes, variants)


def _rfft_case(name, n):
    return Case(name, (1, n), "float32", (n,), lambda x, w: nbx.fft.rfft(x), lambda x, w: _torch().fft.rfft(x),
                None, (n // 2 + 1) * 8)


CASES = [
    _stft_case("whisper stft b1 n400 h160", 1, SECONDS * RATE, 400, 160),
    _stft_case("whisper stft b8 n400 h160", 8, SECONDS * RATE, 400, 160),
    *[_stft_case(f"spectrogram b8 n{n} h{n // 4}", 8, 10 * RATE, n, n // 4) for n in (512, 1024, 2048)],
    _fft2_case("fft2 c64 8x256x256", (8, 256, 256), "complex64", (("parts", {"fft_float32_parts": True}),)),
    _fft2_case("fft2 c64 8x1024x1024", (8, 1024, 1024), "complex64",
               (("tile 2048", {"fft_tile_elements": 2048}), ("tile 8192", {"fft_tile_elements": 8192}))),
    _rfft_case("rfft 2^20", 1 << 20),
    _rfft_case("rfft 10^6", 10 ** 6),
    _fft2_case("fnet fft2 f32 8x512x768", (8, 512, 768), "float32"),
]


def _torch():
    import torch  # the comparison only; nbxtensor itself never imports torch
    return torch


def _plan_text(lengths) -> str:
    parts = []
    for n in lengths:
        method = F._method(n)
        passes = "x".join(map(str, method.passes))
        parts.append(f"{n}: bluestein {method.bluestein} ({passes})" if method.bluestein else f"{n}: {passes}")
    return "; ".join(parts)


def _in_bytes(case: Case) -> int:
    return math.prod(case.shape) * (8 if case.dtype == "complex64" else 4)


def dry_run() -> None:
    """Each case's shapes, plans and floor bytes, and its cost rule's figures, with no device."""
    print(f"{'case':32s} {'input':>16s} {'floor MB':>9s} {'cost MB':>8s} {'GFLOP':>7s} {'work MB':>8s}  plans")
    for case in CASES:
        x = nbx.empty(case.shape, dtype=getattr(nbx, case.dtype), device="meta")
        window = None if case.window is None else nbx.empty(case.window, device="meta")
        if case.window is None:
            op = nbx.ops.registry.get("fft.fft2" if "fft2" in case.name else "fft.rfft")
            made, cost = op.meta(x), op.cost(x)
        else:
            op = nbx.ops.registry.get("stft")
            kwargs = dict(n_fft=case.lengths[0], hop_length=int(case.name.rsplit("h", 1)[1]), window=window,
                          return_complex=True)
            made, cost = op.meta(x, **kwargs), op.cost(x, **kwargs)
        assert math.prod(made.shape) * made.dtype.itemsize == case.out_bytes, (case.name, made)
        print(f"{case.name:32s} {'x'.join(map(str, case.shape)):>16s} {(_in_bytes(case) + case.out_bytes) / 1e6:9.1f} "
              f"{(cost.bytes_read + cost.bytes_written) / 1e6:8.1f} {cost.flops / 1e9:7.2f} {cost.workspace / 1e6:8.1f}"
              f"  {_plan_text(case.lengths)}")


def _copy_bandwidth(torch, gpu_time_ms) -> float:
    """Bytes a second our copy moves (read and written) on this GPU in this run: the floor's rate."""
    probe = torch.empty(1 << 28, device="cuda", dtype=torch.uint8)
    source = nbx.from_dlpack(probe)
    target = nbx.empty_like(source)
    return 2 * probe.numel() / gpu_time_ms(lambda: target.copy_(source)) / 1e-3


def _measure(case: Case, torch, gpu_pair_ms, copy_bytes_per_s) -> tuple:
    """(check, rows) of one case: our result against torch's, and the timed variants."""
    dtype = getattr(torch, case.dtype)
    theirs_input = torch.randn(case.shape, device="cuda", dtype=dtype)
    ours_input = nbx.from_dlpack(theirs_input)
    theirs_window = None if case.window is None else torch.hann_window(case.window, device="cuda")
    ours_window = None if theirs_window is None else nbx.from_dlpack(theirs_window)
    expected = case.theirs(theirs_input, theirs_window)
    got = torch.from_dlpack(case.ours(ours_input, ours_window))
    worst = float((got - expected).abs().max() / expected.abs().max())
    check = (case.name, tuple(got.shape) == tuple(expected.shape) and worst <= 2e-5, worst)
    rows = []
    facts = backend_for(ours_input.device).facts["kernels"]
    for label, settings in (("", {}), *case.variants):
        kept = {name: facts.get(name) for name in settings}
        facts.update(settings)
        try:
            ours_ms, torch_ms = gpu_pair_ms(lambda: case.ours(ours_input, ours_window),
                                            lambda: case.theirs(theirs_input, theirs_window))
        finally:
            facts.update(kept)
        floor = _in_bytes(case) + case.out_bytes
        rows.append(dict(name=f"{case.name} {label}".strip(), ours_ms=ours_ms, torch_ms=torch_ms, floor_bytes=floor,
                         ratio=torch_ms / ours_ms, tb_per_s=floor / ours_ms / 1e9,
                         of_floor=floor / copy_bytes_per_s / (ours_ms * 1e-3), plans=_plan_text(case.lengths),
                         variant=label or None))
    return check, rows


def run() -> None:
    torch = _torch()
    from timing import gpu_pair_ms, gpu_time_ms, print_checks

    torch.manual_seed(0)
    copy_bytes_per_s = _copy_bandwidth(torch, gpu_time_ms)
    checks, rows = [], []
    for case in CASES:
        check, timed = _measure(case, torch, gpu_pair_ms, copy_bytes_per_s)
        checks.append(check)
        rows += timed
        print(f"{case.name}: {timed[0]['ours_ms']:.3f} ms, torch {timed[0]['torch_ms']:.3f} ms", flush=True)

    print(f"\ncopy bandwidth in this run: {copy_bytes_per_s / 1e12:.2f} TB/s")
    print_checks(checks, "max |diff| / max |torch| {:.2g}")
    print(f"\n{'what':36s} {'ours ms':>8s} {'torch ms':>9s} {'ratio':>6s} {'TB/s':>6s} {'of floor':>9s}  plans")
    for r in rows:
        print(f"{r['name']:36s} {r['ours_ms']:8.3f} {r['torch_ms']:9.3f} {r['ratio']:6.2f} {r['tb_per_s']:6.2f} "
              f"{r['of_floor']:9.1%}  {r['plans']}")
    plain = [r for r in rows if r.get("variant") is None]
    geomean = math.exp(sum(math.log(r["ratio"]) for r in plain) / len(plain))
    print(f"\ntorch / ours, geometric mean over the cases: {geomean:.2f}")
    with open(os.path.join(out_dir, "gpu_fft.json"), "w") as f:
        json.dump({"copy_bytes_per_s": copy_bytes_per_s, "checks": checks, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    dry_run() if "--dry-run" in sys.argv[1:] else run()
