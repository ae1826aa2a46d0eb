"""Graphs on a CUDA GPU against torch eager, in the same run:
1. the MiniLM architecture (BERT, 6 layers, hidden 384, random weights from its config, since the real
   weights do not travel), batch 32 x 128 tokens, fp32: latency of our normal path and of its replay
   against torch eager; activation peak (ours measured and planned) against torch's max_memory_allocated;
2. a graph of 200 small pointwise ops: normal path, replay and torch eager.
Prints checks, then a table."""
from __future__ import annotations

import os
import sys
import tempfile

import nbxtensor as nbx
from nbxtensor import graph
from nbxtensor.export import export

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "scripts"))
from timing import gpu_time_ms, kernel_table  # noqa: E402

import torch  # noqa: E402  (the reference and the exporter; nbxtensor's runtime never imports it)
from transformers import BertConfig, BertModel  # noqa: E402

from export_minilm import SentenceEmbedder  # noqa: E402

rows, checks = [], []
torch.backends.cuda.matmul.allow_tf32 = False


def minilm():
    torch.manual_seed(0)
    config = BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                        intermediate_size=1536, max_position_embeddings=512, type_vocab_size=2)
    config._attn_implementation = "sdpa"
    return SentenceEmbedder(BertModel(config, add_pooling_layer=False)).eval()


class SmallOps(torch.nn.Module):
    """200 pointwise ops on a small vector: a graph whose cost is all launch and host time."""

    def forward(self, x):
        for _ in range(100):
            x = x * 1.0001 + 0.001
        return x


def bench(name, ours, replay, theirs, check):
    ok, detail = check()
    checks.append((name, ok, detail))
    rows.append((name, gpu_time_ms(ours), gpu_time_ms(replay), gpu_time_ms(theirs)))


with tempfile.TemporaryDirectory() as scratch, torch.no_grad():
    module = minilm()
    batch, tokens = torch.export.Dim("batch", min=1, max=1024), torch.export.Dim("tokens", min=2, max=512)
    example = (torch.randint(0, 30522, (2, 9)), torch.ones(2, 9, dtype=torch.int64),
               torch.zeros(2, 9, dtype=torch.int64))
    model = graph.load(export(module, example, os.path.join(scratch, "minilm"),
                              dynamic_shapes=tuple({0: batch, 1: tokens} for _ in example)), device="cuda")
    cuda_module = module.to("cuda")
    ids = torch.randint(0, 30522, (32, 128), device="cuda")
    mask = torch.ones(32, 128, dtype=torch.int64, device="cuda")
    mask[::2, 96:] = 0  # padded sentences
    types = torch.zeros(32, 128, dtype=torch.int64, device="cuda")
    inputs = tuple(nbx.from_dlpack(t) for t in (ids, mask, types))

    def minilm_check():
        got = torch.from_dlpack(model(*inputs))
        cosine = float(torch.nn.functional.cosine_similarity(got, cuda_module(ids, mask, types)).min())
        return cosine >= 0.99999, f"min cosine {cosine:.7f}"
    weights = model.weight_bytes()
    model(*inputs)  # the first call of a layout makes its plans (and tunes): not part of a run's peak
    nbx.cuda.synchronize()
    nbx.cuda.reset_peak_memory_stats()
    base = nbx.cuda.memory_allocated()
    model(*inputs)
    ours_peak = nbx.cuda.max_memory_allocated() - base
    planned = model.plan(model.bind([tuple(t.shape) for t in inputs]))
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    torch_base = torch.cuda.memory_allocated()
    cuda_module(ids, mask, types)
    torch_peak = torch.cuda.max_memory_allocated() - torch_base
    model.replay(*inputs)
    model.replay(*inputs)  # the first replay is verified against the normal path
    replay_reason = model._replayer.reason(*inputs)
    bench("MiniLM 32 x 128 fp32", lambda: model(*inputs), lambda: model.replay(*inputs),
          lambda: cuda_module(ids, mask, types), minilm_check)

    small = graph.load(export(SmallOps(), (torch.ones(16),), os.path.join(scratch, "small")), device="cuda")
    x = torch.rand(16, device="cuda")
    xs = nbx.from_dlpack(x)
    small.replay(xs)
    small.replay(xs)

    def small_check():
        got = torch.from_dlpack(small.replay(xs))
        worst = float((got - SmallOps()(x)).abs().max())
        return worst <= 1e-5, f"max |diff| {worst:.3g}"
    bench("200 small ops", lambda: small(xs), lambda: small.replay(xs), lambda: SmallOps()(x), small_check)

if torch.cuda.is_available():
    kernel_table("MiniLM replay (ours)", lambda: model.replay(*inputs))
    kernel_table("MiniLM (torch)", lambda: cuda_module(ids, mask, types))

print("checks:")
for name, ok, detail in checks:
    print(f"  {'ok  ' if ok else 'FAIL'} {name} ({detail})")
def replay_kind(model, reason):
    if reason is not None:
        return "refused: " + reason
    graphs = [c.recorded.device_graph is not None for c in model._replayer._captured.values()]
    return "replays as a CUDA graph" if all(graphs) else "replays launch by launch"


print(f"  replay of MiniLM: {replay_kind(model, replay_reason)}; 200 small ops: {replay_kind(small, None)}")
print(f"\nMiniLM activation peak: ours {ours_peak / 2**20:.1f} MiB measured, {planned.peak_bytes / 2**20:.1f} MiB "
      f"planned (arena and outputs); torch {torch_peak / 2**20:.1f} MiB (weights {weights / 2**20:.1f} MiB, "
      f"not counted)")
print(f"\n{'what':24s} {'ours ms':>8s} {'replay ms':>10s} {'torch ms':>9s} {'torch/ours':>10s} {'torch/replay':>12s}"
      f" {'ours/replay':>11s}")
for name, ours, replayed, theirs in rows:
    print(f"{name:24s} {ours:8.3f} {replayed:10.3f} {theirs:9.3f} {theirs / ours:10.2f} {theirs / replayed:12.2f}"
          f" {ours / replayed:11.2f}")
