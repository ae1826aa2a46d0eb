"""A Llama architecture at TinyLlama-1.1B size (22 layers, hidden 2048, 32 heads, 4 KV heads, random bf16
weights), exported from transformers and run by the graph runtime, against transformers eager (sdpa) in
the same run, prefill of 512 and 2048 tokens, batch 1:
- accuracy: our bf16 logits and transformers' bf16 logits, each against an fp32 run of the same weights
  (random-weight models have flat logits, so two bf16 runs are compared with the fp32 one side by side,
  never with each other): cosine over all logits and top-1 agreement over positions;
- time: our normal path (op by op), our replay and transformers eager, alternating batch by batch;
- activation peak: ours measured and planned, torch's max_memory_allocated, weights not counted.
The graph is exported unfused and fused by ``graph.load`` (RMSNorm, residual add and norm, rotary: see
``graph/fuse.py``); its outputs live in the arena, so the planned peak is the arena. Prints checks, then a table. NBX_LLAMA_LAYERS overrides the depth (a quick look at a smaller model);
with OUT set, the host profile of one normal-path call per prefill is written there (llama_host_TOKENS.txt)."""
from __future__ import annotations

import cProfile
import io
import os
import pstats
import sys
import tempfile
import time

import nbxtensor as nbx
from nbxtensor import graph
from nbxtensor.export import export
from nbxtensor.export.checkpoint import TokenModel

sys.path.insert(0, os.path.dirname(__file__))
from timing import gpu_pair_ms  # noqa: E402

import torch  # noqa: E402  (the reference and the exporter; nbxtensor's runtime never imports it)
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

PREFILLS = (512, 2048)
LAYERS = int(os.environ.get("NBX_LLAMA_LAYERS", "22"))


def tinyllama() -> LlamaForCausalLM:
    config = LlamaConfig(vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=LAYERS,
                         num_attention_heads=32, num_key_value_heads=4, max_position_embeddings=2048,
                         rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False)
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    with torch.device("cuda"):
        return LlamaForCausalLM(config).eval()


def agreement(logits, reference) -> tuple[float, float]:
    got, want = logits.float().flatten(0, -2), reference.float().flatten(0, -2)
    cosine = float(torch.nn.functional.cosine_similarity(got.flatten(), want.flatten(), dim=0))
    top1 = float((got.argmax(-1) == want.argmax(-1)).float().mean())
    return cosine, top1


def peak_bytes(run, stats) -> int:
    reset, allocated, peak = stats
    torch.cuda.synchronize()
    reset()
    base = allocated()
    run()
    torch.cuda.synchronize()
    return peak() - base


def keep_float32_buffers(cast_model, float32_model) -> None:
    """Give a module cast with ``.to(bfloat16)`` back the float32 buffers it computed at construction
    (the rotary inverse frequencies, which the cast rounds): transformers loading a bf16 checkpoint keeps
    them float32, so the bf16 run compared here is the one a user gets."""
    cast = dict(cast_model.named_modules())
    for name, buffer in float32_model.named_buffers():
        if buffer.dtype == torch.float32:
            owner, _, attribute = name.rpartition(".")
            if getattr(cast[owner], attribute).dtype != torch.float32:
                setattr(cast[owner], attribute, buffer.clone())


checks, rows, memory = [], [], []
with tempfile.TemporaryDirectory() as scratch, torch.no_grad():
    start = time.perf_counter()
    fp32_model = tinyllama()
    bf16_model = TokenModel(LlamaForCausalLM(fp32_model.config).to("cuda", torch.bfloat16).eval(), "logits")
    bf16_model.model.load_state_dict({k: v.to(torch.bfloat16) for k, v in fp32_model.state_dict().items()})
    keep_float32_buffers(bf16_model.model, fp32_model)
    fp32_weights = {k: v.float() for k, v in bf16_model.model.state_dict().items()}  # the bf16 weights, exactly
    fp32_model.load_state_dict(fp32_weights)
    fp32_model = TokenModel(fp32_model, "logits")
    print(f"built in {time.perf_counter() - start:.0f} s")
    for tokens in PREFILLS:
        # one static export a prefill length: torch.export cannot prove the causal-mask guards that
        # transformers' Llama forms for a sequence dimension ranging up to the context
        torch.manual_seed(tokens)
        ids = torch.randint(0, 32000, (1, tokens), device="cuda")
        start = time.perf_counter()
        model = graph.load(export(bf16_model, (ids,), os.path.join(scratch, f"llama{tokens}")), device="cuda")
        print(f"exported and loaded in {time.perf_counter() - start:.0f} s: {model}, fused at load: {model.fusions}")
        ours_in = nbx.from_dlpack(ids)
        reference = fp32_model(ids)
        ours_logits = torch.from_dlpack(model(ours_in))
        theirs_logits = bf16_model(ids)
        ours_cos, ours_top1 = agreement(ours_logits, reference)
        theirs_cos, theirs_top1 = agreement(theirs_logits, reference)
        checks.append((f"prefill {tokens}: ours at least as close to fp32 as transformers bf16",
                       ours_cos >= theirs_cos - 1e-5 and ours_top1 >= theirs_top1 - 0.002,
                       f"cosine {ours_cos:.6f} vs {theirs_cos:.6f}, top-1 {ours_top1:.4f} vs {theirs_top1:.4f}"))
        model.replay(ours_in)
        model.replay(ours_in)  # the first replay is verified against the normal path
        replay_logits = torch.from_dlpack(model.replay(ours_in))
        checks.append((f"prefill {tokens}: replay equals the normal path", bool(torch.equal(replay_logits, ours_logits)),
                       "bitwise"))
        ours_ms, torch_ms = gpu_pair_ms(lambda: model(ours_in), lambda: bf16_model(ids), reps=5, rounds=8)
        replay_ms, torch_ms2 = gpu_pair_ms(lambda: model.replay(ours_in), lambda: bf16_model(ids), reps=5, rounds=8)
        rows.append((tokens, ours_ms, replay_ms, torch_ms, torch_ms2))
        if os.environ.get("OUT"):
            profile = cProfile.Profile()
            profile.runcall(model, ours_in)
            text = io.StringIO()
            pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(40)
            with open(os.path.join(os.environ["OUT"], f"llama_host_{tokens}.txt"), "w") as file:
                file.write(text.getvalue())
        planned = model.plan(model.bind([tuple(ours_in.shape)])).peak_bytes  # arena and outputs
        ours_peak = peak_bytes(lambda: model(ours_in), (nbx.cuda.reset_peak_memory_stats, nbx.cuda.memory_allocated,
                                                        nbx.cuda.max_memory_allocated))
        torch_peak = peak_bytes(lambda: bf16_model(ids), (torch.cuda.reset_peak_memory_stats,
                                                          torch.cuda.memory_allocated, torch.cuda.max_memory_allocated))
        memory.append((tokens, ours_peak, planned, torch_peak))
        checks.append((f"prefill {tokens}: activation peak at most torch's", ours_peak <= torch_peak,
                       f"{ours_peak / 2**20:.1f} vs {torch_peak / 2**20:.1f} MiB"))

print("checks:")
for name, ok, detail in checks:
    print(f"  {'ok  ' if ok else 'FAIL'} {name} ({detail})")
print(f"\nLlama {LAYERS} layers, hidden 2048, GQA 32/4, bf16, batch 1 (weights {model.weight_bytes() / 2**30:.2f} GiB)")
print(f"{'prefill':>8s} {'ours ms':>8s} {'replay ms':>10s} {'torch ms':>9s} {'torch/ours':>10s} {'torch/replay':>12s}"
      f" {'peak MiB':>9s} {'planned':>8s} {'torch MiB':>9s}")
for (tokens, ours, replayed, theirs, theirs2), (_, peak, planned, torch_peak) in zip(rows, memory):
    print(f"{tokens:8d} {ours:8.3f} {replayed:10.3f} {theirs:9.3f} {theirs / ours:10.2f} {theirs2 / replayed:12.2f}"
          f" {peak / 2**20:9.1f} {planned / 2**20:8.1f} {torch_peak / 2**20:9.1f}")
