"""Mixture-of-experts layers of real models on a CUDA GPU against torch on the same inputs (shared through
DLPack), in the same run: Mixtral-8x7B (8 experts, top 2, 14336 wide), Qwen1.5-MoE-A2.7B (60, top 4, 1408),
OLMoE-1B-7B (64, top 8, 1024) and Qwen3-30B-A3B (128, top 8, 768), bf16, at decode rows (1, 8, 64) and
prefill rows (512, 2048).

Two tables: ``grouped_mm`` alone (the experts' gate-and-up product of one layer, rows grouped by a random
routing) against ``torch._grouped_mm``, and the whole block (``nbx.moe``: routing, sort, two grouped products
around the gated activation, weighted sum) against the same block written with torch ops around
``torch._grouped_mm`` (the fastest eager form torch has). Columns: our ms, torch's, the ratio (torch / ours),
and the fraction of the memory floor (the routed experts' weights read once, at the bandwidth given by
``NBX_FLOOR_TBPS``, default 3.35 for an H100 SXM; 4.8 for an H200) that our time reaches. Checks first: each
result against torch's within bf16 rounding (the block's on the rows whose k-th and next router logits differ)."""
from __future__ import annotations

import os
import sys

import numpy as np

import nbxtensor as nbx

sys.path.insert(0, os.path.dirname(__file__))
from timing import gpu_pair_ms, print_checks  # noqa: E402

import torch  # noqa: E402

MODELS = {  # hidden, expert width, experts, top_k, norm_topk_prob
    "mixtral-8x7b": (4096, 14336, 8, 2, True),
    "qwen1.5-moe-a2.7b": (2048, 1408, 60, 4, False),
    "olmoe-1b-7b": (2048, 1024, 64, 8, False),
    "qwen3-30b-a3b": (2048, 768, 128, 8, True),
}
ROWS = (1, 8, 64, 512, 2048)
FLOOR_BYTES_PER_S = float(os.environ.get("NBX_FLOOR_TBPS", "3.35")) * 1e12


def _ours(t: torch.Tensor) -> nbx.Tensor:
    return nbx.from_dlpack(t)


def torch_moe(x, router, gate_up, down, top_k, norm):
    """The block in torch ops as transformers' Qwen and Mixtral blocks route: the router's logits in the input's
    dtype, softmax in float32, pairs sorted by expert, two ``_grouped_mm`` around silu * up."""
    scores = torch.softmax((x @ router.T).float(), dim=-1)
    weights, experts = torch.topk(scores, top_k, dim=-1)
    if norm:
        weights = weights / weights.sum(-1, keepdim=True)
    flat = experts.flatten()
    order = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=gate_up.shape[0])
    offs = torch.cumsum(counts, 0).to(torch.int32)
    rows = x[order // top_k]
    gated = torch._grouped_mm(rows, gate_up.transpose(-2, -1), offs=offs)
    gate, up = gated.chunk(2, dim=-1)
    hidden = torch._grouped_mm(torch.nn.functional.silu(gate) * up, down.transpose(-2, -1), offs=offs)
    out = torch.zeros(x.shape[0] * top_k, x.shape[1], dtype=torch.float32, device=x.device)
    out[order] = hidden.float()
    return (out.view(x.shape[0], top_k, -1) * weights[..., None]).sum(1).to(x.dtype)


def _routing_offs(rows: int, top_k: int, experts: int, generator) -> torch.Tensor:
    chosen = torch.stack([torch.randperm(experts, generator=generator)[:top_k] for _ in range(rows)])
    counts = torch.bincount(chosen.flatten(), minlength=experts)
    return torch.cumsum(counts, 0).to(torch.int32).cuda()


def _relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got.float() - want.float()).abs().max() / want.float().abs().max().clamp_min(1e-30))


def main() -> None:
    generator = torch.Generator().manual_seed(0)
    checks, grouped_rows, block_rows = [], [], []
    for name, (hidden, width, experts, top_k, norm) in MODELS.items():
        gate_up = (torch.randn(experts, 2 * width, hidden, generator=generator) * hidden ** -0.5).bfloat16().cuda()
        down = (torch.randn(experts, hidden, width, generator=generator) * width ** -0.5).bfloat16().cuda()
        router = (torch.randn(experts, hidden, generator=generator) * hidden ** -0.5).bfloat16().cuda()
        ours_gate_up, ours_down, ours_router = _ours(gate_up), _ours(down), _ours(router)
        expert_bytes = 3 * width * hidden * 2
        for m in ROWS:
            x = torch.randn(m, hidden, generator=generator).bfloat16().cuda()
            ours_x = _ours(x)
            # grouped_mm alone: the m * top_k routed rows against the experts' gate-and-up weights
            offs = _routing_offs(m, top_k, experts, generator)
            pairs = torch.randn(m * top_k, hidden, generator=generator).bfloat16().cuda()
            ours_pairs, ours_offs = _ours(pairs), _ours(offs)
            weight = gate_up.transpose(-2, -1)
            ours_weight = ours_gate_up.transpose(1, 2)
            want = torch._grouped_mm(pairs, weight, offs=offs)
            got = torch.from_dlpack(nbx.grouped_mm(ours_pairs, ours_weight, ours_offs))
            error = _relative_error(got, want)
            checks.append((f"grouped_mm {name} rows {m}", error < 2e-2, error))
            ours_ms, torch_ms = gpu_pair_ms(lambda: nbx.grouped_mm(ours_pairs, ours_weight, ours_offs),
                                            lambda: torch._grouped_mm(pairs, weight, offs=offs), reps=5, rounds=6)
            used = int((torch.diff(offs, prepend=offs.new_zeros(1)) > 0).sum())
            floor_ms = used * 2 * width * hidden * 2 / FLOOR_BYTES_PER_S * 1e3
            grouped_rows.append((f"{name} rows {m} ({used} experts)", ours_ms, torch_ms, torch_ms / ours_ms,
                                 floor_ms / ours_ms))
            print("grouped", *grouped_rows[-1], sep=" | ", flush=True)
            # the whole block
            want = torch_moe(x, router, gate_up, down, top_k, norm)
            got = torch.from_dlpack(nbx.moe(ours_x, ours_router, ours_gate_up, ours_down, top_k, norm_topk_prob=norm))
            # a row whose k-th and next bf16 router logits are equal may take either expert (torch.topk leaves the
            # order of ties unspecified; ours takes the lower index): compared on the other rows
            ranked = torch.sort((x @ router.T).float(), dim=-1, descending=True).values
            untied = ranked[:, top_k - 1] != ranked[:, top_k]
            error = _relative_error(got[untied], want[untied])
            checks.append((f"moe {name} rows {m} ({int((~untied).sum())} tied rows left out)", error < 3e-2, error))
            ours_ms, torch_ms = gpu_pair_ms(
                lambda: nbx.moe(ours_x, ours_router, ours_gate_up, ours_down, top_k, norm_topk_prob=norm),
                lambda: torch_moe(x, router, gate_up, down, top_k, norm), reps=5, rounds=6)
            used = min(experts, m * top_k)
            floor_ms = used * expert_bytes / FLOOR_BYTES_PER_S * 1e3
            block_rows.append((f"{name} rows {m}", ours_ms, torch_ms, torch_ms / ours_ms, floor_ms / ours_ms))
            print("block", *block_rows[-1], sep=" | ", flush=True)
    print_checks(checks, "max relative error {:.2g}")
    for title, rows in (("grouped_mm (gate and up) vs torch._grouped_mm", grouped_rows),
                        ("moe block vs torch ops around _grouped_mm", block_rows)):
        print(f"\n{title}\ncase | ours ms | torch ms | ratio | of floor")
        for case, ours_ms, torch_ms, ratio, floor in rows:
            print(f"{case} | {ours_ms:.4f} | {torch_ms:.4f} | {ratio:.2f} | {floor:.0%}")
    ratios = np.array([row[3] for row in grouped_rows + block_rows])
    print(f"\ngeometric mean of ratios: grouped {np.exp(np.log([r[3] for r in grouped_rows]).mean()):.2f}, "
          f"block {np.exp(np.log([r[3] for r in block_rows]).mean()):.2f}, all {np.exp(np.log(ratios).mean()):.2f}")


if __name__ == "__main__":
    main()
