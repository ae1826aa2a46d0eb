"""Text generation with nbxtensor.llm at TinyLlama-1.1B size (22 layers, hidden 2048, GQA 32/4, random bf16
weights saved with save_pretrained; NBX_LLM_SIZE=8b: Llama-3-8B size, 32 layers, hidden 4096, GQA 32/8,
vocabulary 128256), against transformers eager (sdpa) in the same run, batch 1:
- greedy tokens: ours and transformers' for 32 new tokens after a 64-token prompt (random weights give flat
  logits, so bf16 runs may part after a few tokens; the count of equal leading tokens is printed);
- prefill of 512 and 2048 tokens (time to the first token), ours and transformers';
- decode tokens/s at batch 1, 8, 32 and 128 (ours: one batched step per token over the paged cache; the
  weights-over-bandwidth floor printed beside it); transformers' at batch 1;
- (1.1B size) teacher-forced top-1 agreement over 512 positions with an fp32 run of the same weights:
  ours in bf16 (``LLM.logits``) and transformers' in bf16, side by side.
Prints a table last; with OUT set, a host profile of one decode step goes to $OUT/llm_decode_profile.txt."""
from __future__ import annotations

import cProfile
import io
import os
import pstats
import tempfile
import time

import nbxtensor as nbx
from nbxtensor import llm

import torch  # noqa: E402  (the reference; nbxtensor.llm never imports it)
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

from timing import print_tuned  # noqa: E402

LAYERS = int(os.environ.get("NBX_LLAMA_LAYERS", "22"))
# datasheet bandwidths (bytes/s): H100 SXM HBM3, H200 HBM3e
BANDWIDTH = 3.35e12 if "H100" in torch.cuda.get_device_name() else 4.8e12


SIZES = {
    "1b": dict(vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=LAYERS,
               num_attention_heads=32, num_key_value_heads=4, max_position_embeddings=4096, rope_theta=10000.0),
    "8b": dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
               num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=8192, rope_theta=500000.0),
}
SIZE = os.environ.get("NBX_LLM_SIZE", "1b")


def checkpoint(directory: str) -> LlamaForCausalLM:
    """Random bf16 weights saved with save_pretrained, and transformers' model read back from them as a user
    loads it (``from_pretrained``): a module cast with ``.to(bfloat16)`` would also round its rotary inverse
    frequencies to bf16, which a loaded model keeps in fp32."""
    config = LlamaConfig(**SIZES[SIZE], rms_norm_eps=1e-5, tie_word_embeddings=False, torch_dtype="bfloat16")
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(config).to(torch.bfloat16).eval()
    model.save_pretrained(directory)
    del model
    torch.cuda.empty_cache()
    return LlamaForCausalLM.from_pretrained(directory, torch_dtype=torch.bfloat16, attn_implementation="sdpa").cuda().eval()


def teacher_forced_agreement(ours, reference, directory: str, vocab: int, positions: int = 512) -> tuple:
    """Top-1 agreement with an fp32 run of the same weights (the checkpoint read in fp32) over
    ``positions`` teacher-forced positions: ours in bf16 and transformers' in bf16, each against the fp32
    run (random weights give flat logits, so two bf16 runs are compared with the fp32 one side by side,
    never with each other)."""
    ids = [int(t) for t in torch.randint(0, vocab, (positions,), generator=torch.Generator().manual_seed(3))]
    with torch.no_grad():
        tokens = torch.tensor([ids], device="cuda")
        exact_model = LlamaForCausalLM.from_pretrained(directory, torch_dtype=torch.float32,
                                                       attn_implementation="sdpa").cuda().eval()
        exact = exact_model(tokens).logits[0].argmax(-1).cpu().numpy()
        del exact_model
        torch.cuda.empty_cache()
        theirs = reference(tokens).logits[0].argmax(-1).cpu().numpy()
    mine = ours.logits(ids).float().numpy().argmax(-1)
    return (f"teacher-forced top-1 vs fp32, {positions} positions", f"{(mine == exact).mean():.4f}",
            f"{(theirs == exact).mean():.4f}", "ours >= transformers' is the target")


def timed(run, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        torch.cuda.synchronize()
        nbx.cuda.synchronize()
        start = time.perf_counter()
        run()
        torch.cuda.synchronize()
        nbx.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory() as directory:
        reference = checkpoint(directory)
        weight_bytes = sum(p.numel() * p.element_size() for p in reference.parameters())
        ours = llm.load(directory, device="cuda", cache_tokens=32 * 2600)
        vocab = SIZES[SIZE]["vocab_size"]
        prompt = [int(t) for t in torch.randint(0, vocab, (64,), generator=torch.Generator().manual_seed(1))]
        got = ours.generate(prompt, max_new_tokens=32).tokens
        with torch.no_grad():
            want = reference.generate(torch.tensor([prompt], device="cuda"), max_new_tokens=32, do_sample=False,
                                      min_new_tokens=32)[0, 64:].tolist()
        same = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), len(want))
        print(f"checks: greedy 32 tokens, {same} leading tokens equal to transformers' (bf16)")
        # replayed steps launched ahead of their tokens' read-back against op-by-op steps: the same bits
        replayer, ours.engine.replayer = ours.engine.replayer, None
        op_by_op = ours.generate(prompt, max_new_tokens=32).tokens
        ours.engine.replayer = replayer
        print(f"checks: replayed steps run ahead give the op-by-op tokens: {op_by_op == got}")
        # decode batches of up to 16 rows fold norms and activations into the products (model._layers)
        launches = [len(b.recorded.launches) for (rows, _), b in ours.engine.replayer._buckets.items() if rows == 1]
        print(f"checks: a batch-1 decode step launches {launches} kernels")
        for length in (512, 2048):
            ids = [int(t) for t in torch.randint(0, vocab, (length,), generator=torch.Generator().manual_seed(2))]
            ours_s = timed(lambda: ours.generate(ids, max_new_tokens=1))
            with torch.no_grad():
                theirs_s = timed(lambda: reference(torch.tensor([ids], device="cuda")))
            rows.append((f"prefill {length}", ours_s * 1e3, theirs_s * 1e3, "ms"))
        if SIZE == "1b":
            rows.append(teacher_forced_agreement(ours, reference, directory, vocab))
        for batch in (1, 8, 32, 128):
            prompts = [prompt] * batch
            new = 64
            ours_s = timed(lambda: ours.generate(prompts, max_new_tokens=new), repeats=2)
            # decode rate after the prefills: total minus the first token's step
            prefill_s = ours.engine.prefill_seconds
            ours.engine.prefill_seconds = ours.engine.decode_seconds = 0.0
            nbx.cuda.synchronize()
            held = nbx.cuda.memory_allocated()
            nbx.cuda.reset_peak_memory_stats()
            ours.generate(prompts, max_new_tokens=new)
            activations = nbx.cuda.max_memory_allocated() - held
            decode_s = ours.engine.decode_seconds
            rate = batch * (new - 1) / decode_s
            floor = BANDWIDTH / weight_bytes * batch
            theirs = ""
            if batch == 1:
                with torch.no_grad():
                    ids = torch.tensor([prompt], device="cuda")
                    t = timed(lambda: reference.generate(ids, max_new_tokens=new, do_sample=False, min_new_tokens=new),
                              repeats=2)
                theirs = f"{new / t:.1f}"
            rows.append((f"decode batch {batch} tokens/s", f"{rate:.1f}", theirs,
                         f"floor {floor:.0f} ({rate / floor:.0%}); activations {activations / 2**20:.1f} MiB"))
            del prefill_s, ours_s
        # batch 8 with the norms and activations folded into the products (the fold is on for one row only)
        from nbxtensor.llm import model as llm_model
        fold_rows, llm_model.FOLD_MAX_ROWS = llm_model.FOLD_MAX_ROWS, 16
        ours.engine.replayer._buckets.clear()
        timed(lambda: ours.generate([prompt] * 8, max_new_tokens=64), repeats=1)
        ours.engine.prefill_seconds = ours.engine.decode_seconds = 0.0
        ours.generate([prompt] * 8, max_new_tokens=64)
        rows.append(("decode batch 8 tokens/s, folded", f"{8 * 63 / ours.engine.decode_seconds:.1f}", "", ""))
        llm_model.FOLD_MAX_ROWS = fold_rows
        ours.engine.replayer._buckets.clear()
        cache = ours.engine.cache
        cache_bytes = sum(t.numel() * t.element_size() for t in cache.keys + cache.values)
        total = nbx.cuda.mem_get_info()[1]
        rows.append(("memory (GiB)", f"weights {weight_bytes / 2**30:.2f}, KV cache {cache_bytes / 2**30:.2f} "
                     f"({cache.capacity_tokens} tokens)", "", f"device total {total / 2**30:.1f}"))
        if os.environ.get("OUT"):
            profile = cProfile.Profile()
            profile.enable()
            ours.generate(prompt, max_new_tokens=8)
            profile.disable()
            text = io.StringIO()
            pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(40)
            with open(os.path.join(os.environ["OUT"], "llm_decode_profile.txt"), "w") as file:
                file.write(text.getvalue())
    print("what | ours | transformers | note")
    for row in rows:
        print(" | ".join(f"{v:.2f}" if isinstance(v, float) else str(v) for v in row))
    print_tuned(("gemv|M=1|", "gemv_rms_norm|M=1|", "gemv_act_and_mul|M=1|", "quantized_gemv|M=1|",
                 "quantized_gemv_rms_norm|M=1|", "quantized_gemv_act_and_mul|M=1|"))


if __name__ == "__main__":
    main()
