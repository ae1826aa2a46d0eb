"""The decode step's folded products against the unfused pairs they replace, at TinyLlama-1.1B size in
bfloat16, rows 1 and 8: [norm, qkv] (the first layer's), [add + norm, qkv], [add + norm, gate_up],
[act_and_mul, down] and [add + norm, head]. Device time of each over back-to-back calls (launch gaps
included, as a decode step meets them), fused and unfused in alternation; the weights (10 to 131 MB) are
read past L2 only in part, so the ratio, not the absolute time, is the figure. Then the same three layer
pairs over int4 weights (groups of 128) at Llama-3-8B size, one row: the quantized GEMV with the norm or the
activation in its prologue against the op and ``quantized_linear``. End to end, gpu_llm.py's decode rows run
the folded step."""
from __future__ import annotations

import numpy as np

import nbxtensor as nbx
from nbxtensor.nn import functional as F
from nbxtensor.ops.matmul_prologue import act_and_mul_linear, add_rms_norm_linear, rms_norm_linear
from nbxtensor.ops.normalization import add_rms_norm, rms_norm
from nbxtensor.quant import QuantizedWeight

from timing import gpu_pair_ms

HIDDEN, INTERMEDIATE, QKV, VOCAB = 2048, 5632, 2560, 32000
# Llama-3-8B's projections, int4 in groups of 128
HIDDEN_8B, INTERMEDIATE_8B, QKV_8B = 4096, 14336, 6144
EPS = 1e-5


def main() -> None:
    rng = np.random.default_rng(0)

    def t(*shape, scale=1.0):
        return nbx.tensor((rng.standard_normal(shape) * scale).astype(np.float32), device="cuda").to("bfloat16")
    norm = t(HIDDEN)
    weights = {"qkv": t(QKV, HIDDEN, scale=0.02), "gate_up": t(2 * INTERMEDIATE, HIDDEN, scale=0.02),
               "down": t(HIDDEN, INTERMEDIATE, scale=0.02), "head": t(VOCAB, HIDDEN, scale=0.02)}
    print(f"{nbx.cuda.get_device_name()}; bf16, device time per call in us (fused | unfused | ratio)", flush=True)
    for rows in (1, 8):
        x, residual, gate_up = t(rows, HIDDEN), t(rows, HIDDEN), t(rows, 2 * INTERMEDIATE)
        cases = {
            "norm + qkv": (lambda: rms_norm_linear(x, norm, weights["qkv"], None, EPS),
                           lambda: F.linear(rms_norm(x, (HIDDEN,), norm, EPS), weights["qkv"])),
            "add + norm + qkv": (lambda: add_rms_norm_linear(x, residual, norm, weights["qkv"], None, EPS),
                                 lambda: F.linear(add_rms_norm(x, residual, (HIDDEN,), norm, EPS)[0], weights["qkv"])),
            "add + norm + gate_up": (
                lambda: add_rms_norm_linear(x, residual, norm, weights["gate_up"], None, EPS),
                lambda: F.linear(add_rms_norm(x, residual, (HIDDEN,), norm, EPS)[0], weights["gate_up"])),
            "act + down": (lambda: act_and_mul_linear(gate_up, weights["down"]),
                           lambda: F.linear(F.act_and_mul(gate_up), weights["down"])),
            "add + norm + head": (
                lambda: add_rms_norm_linear(x, residual, norm, weights["head"], None, EPS),
                lambda: F.linear(add_rms_norm(x, residual, (HIDDEN,), norm, EPS)[0], weights["head"])),
        }
        for name, (fused, unfused) in cases.items():
            ours, theirs = gpu_pair_ms(fused, unfused)
            print(f"rows {rows} {name} | {ours * 1e3:.1f} | {theirs * 1e3:.1f} | {ours / theirs:.2f}", flush=True)
    quantized(rng)


def quantized(rng) -> None:
    def t(*shape):
        return nbx.tensor(rng.standard_normal(shape).astype(np.float32), device="cuda").to("bfloat16")

    def int4(n, k):
        return QuantizedWeight.quantize((rng.standard_normal((n, k)) * 0.02).astype(np.float32), "int4",
                                        group_size=128, device="cuda", dtype="bfloat16")
    norm = t(HIDDEN_8B)
    weights = {"qkv": int4(QKV_8B, HIDDEN_8B), "gate_up": int4(2 * INTERMEDIATE_8B, HIDDEN_8B),
               "down": int4(HIDDEN_8B, INTERMEDIATE_8B)}
    x, residual, gate_up = t(1, HIDDEN_8B), t(1, HIDDEN_8B), t(1, 2 * INTERMEDIATE_8B)
    print("int4 (groups of 128), Llama-3-8B size, 1 row; device time per call in us (fused | unfused | ratio)",
          flush=True)

    def normed(weight):
        return nbx.quantized_linear(add_rms_norm(x, residual, (HIDDEN_8B,), norm, EPS)[0], weight)
    cases = {
        "add + norm + qkv": (lambda: add_rms_norm_linear(x, residual, norm, weights["qkv"], None, EPS),
                             lambda: normed(weights["qkv"])),
        "add + norm + gate_up": (lambda: add_rms_norm_linear(x, residual, norm, weights["gate_up"], None, EPS),
                                 lambda: normed(weights["gate_up"])),
        "act + down": (lambda: act_and_mul_linear(gate_up, weights["down"]),
                       lambda: nbx.quantized_linear(F.act_and_mul(gate_up), weights["down"])),
    }
    for name, (fused, unfused) in cases.items():
        ours, theirs = gpu_pair_ms(fused, unfused)
        print(f"int4 rows 1 {name} | {ours * 1e3:.1f} | {theirs * 1e3:.1f} | {ours / theirs:.2f}", flush=True)


if __name__ == "__main__":
    main()
