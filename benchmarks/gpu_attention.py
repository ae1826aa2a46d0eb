"""Attention on a CUDA GPU against torch on the same inputs (shared through DLPack), in the same run:
fused SDPA prefill (TFLOP/s, fraction of torch and of 720 TFLOP/s) and split-K decode attention with
grouped-query heads (TB/s of K/V read, fraction of torch and of 4.1 TB/s). Every attention launch key is
tuned afresh; prints each key's candidates with their times (best first, the chosen one starred), then a
check list, then the table; writes gpu_attention.json under $OUT."""
from __future__ import annotations

import json
import os
import statistics
import sys

import nbxtensor as nbx

sys.path.insert(0, os.path.dirname(__file__))
from timing import gpu_pair_ms, graph_times_ms, kernel_table, print_checks  # noqa: E402

import torch  # noqa: E402  (the comparison only; nbxtensor itself never imports torch)

import nbxtensor.tuning as tuning  # noqa: E402
from nbxtensor.tuning import timing  # noqa: E402

# every attention launch key is tuned afresh in this run (a tuning cache left by an earlier run would hide
# candidates added since), and the tuner's own measurements are kept for the sweep lines printed before the
# checks: each candidate's median over the tuner's rounds
os.environ["NBX_TUNING_DIR"] = os.path.join(os.environ.get("OUT", "."), "attention_tuning")
sweeps = {}
_choose_timed = tuning.choose_timed
_device_time_ms = timing.device_time_ms


def _sweeping(key, facts, candidates, prepare):
    if not key.startswith("attention"):
        return _choose_timed(key, facts, candidates, prepare)
    configs = candidates() if callable(candidates) else candidates
    config_of, times = {}, {}

    def recording_prepare(config):
        fn = prepare(config)
        config_of[id(fn)] = config
        return fn

    def recording_time(fn, **kwargs):
        try:
            ms = _device_time_ms(fn, **kwargs)
        except Exception as error:  # noqa: BLE001  (a candidate the device refuses: shown, not chosen)
            times.setdefault(id(config_of[id(fn)]), []).append(type(error).__name__)
            raise
        times.setdefault(id(config_of[id(fn)]), []).append(ms)
        return ms
    timing.device_time_ms = recording_time
    try:
        chosen = _choose_timed(key, facts, configs, recording_prepare)
    finally:
        timing.device_time_ms = _device_time_ms
    timed = []
    for config in configs:
        measured = times.get(id(config), [])
        numbers = [t for t in measured if isinstance(t, float)]
        if len(numbers) == len(measured) and numbers:
            timed.append((statistics.median(numbers), config))
        else:
            errors = [t for t in measured if not isinstance(t, float)]
            timed.append((float("inf"), dict(config, error=errors[0] if errors else "not run")))
    sweeps[key] = (sorted(timed, key=lambda t: t[0]), chosen)
    return chosen


tuning.choose_timed = _sweeping


def _short(config):
    if config.get("KERNEL") == "wgmma_ws":
        text = f"ws {config['BLOCK_M']}x{config['BLOCK_N']} s{config['STAGES']}"
    elif config.get("KERNEL") == "wgmma":
        text = (f"wgmma {config['BLOCK_M']}x{config['BLOCK_N']} w{config['num_warps']} s{config['STAGES']}"
                f"{' q-regs' if config['Q_IN_REGISTERS'] else ''}")
    elif "BLOCK_M" in config:
        text = f"{config['BLOCK_M']}x{config['BLOCK_N']} w{config['num_warps']} s{config['num_stages']}"
    else:
        text = f"n{config['BLOCK_N']} splits{config['SPLITS']} w{config['num_warps']} s{config['num_stages']}"
    return text + (f" ({config['error']})" if "error" in config else "")

TF = torch.nn.functional
F = nbx.nn.functional
FLOOR_FLOPS = 720e12
FLOOR_BYTES_PER_S = 4.1e12
out_dir = os.environ.get("OUT", ".")
rows, checks = [], []


def shared(t):
    return nbx.from_dlpack(t)


def check(name, ours, theirs, atol):
    diff = (torch.from_dlpack(ours).double() - theirs.double()).abs()
    worst = float(torch.nan_to_num(diff, nan=float("inf")).max())
    checks.append((name, worst <= atol, worst))


def prefill(batch, heads, length, head_dim, causal):
    torch.manual_seed(0)
    q, k, v = (torch.randn(batch, heads, length, head_dim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    nq, nk, nv = shared(q), shared(k), shared(v)
    name = f"SDPA bf16 B{batch} H{heads} S{length} D{head_dim}{' causal' if causal else ''}"
    check(name, F.scaled_dot_product_attention(nq, nk, nv, is_causal=causal),
          TF.scaled_dot_product_attention(q, k, v, is_causal=causal), 2e-2)
    ours, theirs = gpu_pair_ms(lambda: F.scaled_dot_product_attention(nq, nk, nv, is_causal=causal),
                               lambda: TF.scaled_dot_product_attention(q, k, v, is_causal=causal))
    flops = 4 * batch * heads * length * length * head_dim // (2 if causal else 1)
    rows.append(dict(name=name, ours_ms=ours, torch_ms=theirs, flops=flops, nbytes=None))


def decode(batch, q_heads, kv_heads, keys, head_dim):
    torch.manual_seed(0)
    q = torch.randn(batch, q_heads, 1, head_dim, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(batch, kv_heads, keys, head_dim, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    nq, nk, nv = shared(q), shared(k), shared(v)
    name = f"decode bf16 B{batch} {q_heads}q/{kv_heads}kv S{keys} D{head_dim}"
    ours_out = F.scaled_dot_product_attention(nq, nk, nv, enable_gqa=True)
    check(name, ours_out, TF.scaled_dot_product_attention(q, k, v, enable_gqa=True), 2e-2)
    check(name + " deterministic", ours_out, torch.from_dlpack(F.scaled_dot_product_attention(nq, nk, nv,
                                                                                              enable_gqa=True)), 0.0)
    ours, theirs = gpu_pair_ms(lambda: F.scaled_dot_product_attention(nq, nk, nv, enable_gqa=True),
                               lambda: TF.scaled_dot_product_attention(q, k, v, enable_gqa=True))
    nbytes = 2 * k.numel() * 2 + 2 * q.numel() * 2
    rows.append(dict(name=name, ours_ms=ours, torch_ms=theirs, flops=None, nbytes=nbytes))
    # one decode step is short enough for the host to pace it; in a graph only the kernels count
    ours_graph, torch_graph = graph_times_ms(lambda: F.scaled_dot_product_attention(nq, nk, nv, enable_gqa=True),
                                             lambda: TF.scaled_dot_product_attention(q, k, v, enable_gqa=True))
    rows.append(dict(name=name + " (graph)", ours_ms=ours_graph, torch_ms=torch_graph, flops=None, nbytes=nbytes))
    kernel_table(name + " (ours)", lambda: F.scaled_dot_product_attention(nq, nk, nv, enable_gqa=True))
    kernel_table(name + " (torch)", lambda: TF.scaled_dot_product_attention(q, k, v, enable_gqa=True))


prefill(4, 32, 4096, 128, True)
prefill(4, 32, 4096, 128, False)
prefill(16, 16, 1024, 64, False)
decode(8, 32, 8, 8192, 128)

print("\nwhat the tuner timed per launch key, best first (ms; * the one it chose):")
for key, (timed, chosen) in sweeps.items():
    shown = ", ".join(f"{ms:.3f} {_short(config)}{'*' if config == chosen else ''}" for ms, config in timed)
    print(f"  {key}: {shown}")
print_checks(checks, "max |diff| {:.3g}")
print(f"\n{'what':50s} {'ours ms':>8s} {'torch ms':>9s} {'of torch':>9s}  rate")
for r in rows:
    ratio = r["torch_ms"] / r["ours_ms"]
    if r["flops"] is not None:
        rate = r["flops"] / r["ours_ms"] / 1e-3
        torch_rate = r["flops"] / r["torch_ms"] / 1e-3
        shown = f"{rate / 1e12:6.1f} TFLOP/s (torch {torch_rate / 1e12:.1f}, {rate / FLOOR_FLOPS:.1%} of 720)"
    else:
        rate = r["nbytes"] / r["ours_ms"] / 1e-3
        torch_rate = r["nbytes"] / r["torch_ms"] / 1e-3
        shown = f"{rate / 1e12:6.2f} TB/s (torch {torch_rate / 1e12:.2f}, {rate / FLOOR_BYTES_PER_S:.1%} of 4.1)"
    r.update(ratio=ratio, rate=rate, torch_rate=torch_rate)
    print(f"{r['name']:50s} {r['ours_ms']:8.3f} {r['torch_ms']:9.3f} {ratio:9.2f}  {shown}")
with open(os.path.join(out_dir, "gpu_attention.json"), "w") as f:
    json.dump({"checks": checks, "rows": rows,
               "sweeps": {key: {"timed": [[ms, config] for ms, config in timed], "chosen": chosen}
                          for key, (timed, chosen) in sweeps.items()}}, f, indent=1, default=str)
