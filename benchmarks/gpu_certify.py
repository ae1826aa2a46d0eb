"""Ahead-of-time tuning with certification, at TinyLlama-1.1B size (22 layers, hidden 2048, GQA 32/4,
vocabulary 32000; random float16 weights written here without torch, run in bfloat16):
- the census of the LLM engine over its buckets (every prompt length up to a 2048 context, batch sizes 1 to
  256), host only, for the hopper class and the CPU's (runs on any machine);
- on a GPU, in fresh processes on one Triton compile cache (warmed first by a run whose settings are thrown
  away, so that compiling costs the same everywhere): the first call (a 64-token prompt and 8 new tokens) of
  a cold run that tunes as it goes; certification of the keys that call forms; the first call of a
  certified-only run from the certified store; and each run's later, steady calls (the kernel times, which
  must agree).
NBX_CERTIFY_SIZE=tiny runs the same on a 2-layer model of hidden 64 (the CPU's interpreter: seconds).
Prints a table last."""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

SIZES = {
    "1b": dict(vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
               num_attention_heads=32, num_key_value_heads=4, max_position_embeddings=2048),
    "tiny": dict(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=128),
}
SIZE = os.environ.get("NBX_CERTIFY_SIZE", "1b")
PROMPT, NEW_TOKENS, STEADY_CALLS = 64, 8, 5


def write_checkpoint(directory: str) -> None:
    """config.json and random float16 weights (about 0.02 in scale, as a trained model's are) in safetensors."""
    from nbxtensor import io, tensor
    shape = SIZES[SIZE]
    config = dict(shape, architectures=["LlamaForCausalLM"], rms_norm_eps=1e-5, rope_theta=10000.0,
                  tie_word_embeddings=False, torch_dtype="float16")
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f)
    rng = np.random.default_rng(0)
    hidden, inner, vocab = shape["hidden_size"], shape["intermediate_size"], shape["vocab_size"]
    head_dim = hidden // shape["num_attention_heads"]
    kv = shape["num_key_value_heads"] * head_dim
    shapes = {"model.embed_tokens.weight": (vocab, hidden), "model.norm.weight": (hidden,),
              "lm_head.weight": (vocab, hidden)}
    for i in range(shape["num_hidden_layers"]):
        prefix = f"model.layers.{i}."
        shapes.update({prefix + "input_layernorm.weight": (hidden,),
                       prefix + "post_attention_layernorm.weight": (hidden,),
                       prefix + "self_attn.q_proj.weight": (hidden, hidden),
                       prefix + "self_attn.k_proj.weight": (kv, hidden),
                       prefix + "self_attn.v_proj.weight": (kv, hidden),
                       prefix + "self_attn.o_proj.weight": (hidden, hidden),
                       prefix + "mlp.gate_proj.weight": (inner, hidden), prefix + "mlp.up_proj.weight": (inner, hidden),
                       prefix + "mlp.down_proj.weight": (hidden, inner)})
    weights = {}
    for name, dims in shapes.items():
        values = np.ones(dims, np.float16) if name.endswith("norm.weight") else \
            (rng.standard_normal(dims, dtype=np.float32) * 0.02).astype(np.float16)
        weights[name] = tensor(values, device="cpu")
    io.save_file(weights, os.path.join(directory, "model.safetensors"))


def census_seconds() -> list[tuple[str, float, int]]:
    """(facts class, median seconds over 3 runs, keys) of the engine's census over its buckets."""
    from nbxtensor.device.facts import load
    from nbxtensor.llm.census import engine_census
    from nbxtensor.llm.model import DecoderConfig
    shape = SIZES[SIZE]
    config = DecoderConfig.from_hf(dict(shape, architectures=["LlamaForCausalLM"], torch_dtype="bfloat16"), SIZE)
    rows = []
    for name in ("hopper", "cpu"):
        facts, times = load(name), []
        for _ in range(3):
            start = time.perf_counter()
            keys = engine_census(config, "bfloat16", facts, context=shape["max_position_embeddings"],
                                 batch_sizes=range(1, 257))
            times.append(time.perf_counter() - start)
        rows.append((name, statistics.median(times), len(keys)))
    return rows


def _first_and_steady(directory: str) -> dict:
    """A fresh model's first call, then its steady calls (seconds), and the tokens."""
    from nbxtensor import llm
    prompt = [int(t) for t in np.random.default_rng(1).integers(0, SIZES[SIZE]["vocab_size"], PROMPT)]
    start = time.perf_counter()
    model = llm.load(directory, dtype="bfloat16")
    loaded = time.perf_counter()
    first = model.generate(prompt, max_new_tokens=NEW_TOKENS, temperature=0)
    done = time.perf_counter()
    steady = []
    for _ in range(STEADY_CALLS):
        begin = time.perf_counter()
        again = model.generate(prompt, max_new_tokens=NEW_TOKENS, temperature=0)
        steady.append(time.perf_counter() - begin)
    assert again.tokens == first.tokens
    return {"load_s": loaded - start, "first_s": done - loaded, "steady_s": statistics.median(steady),
            "tokens": first.tokens}


def phase(name: str, directory: str) -> dict:
    """One measured phase, run in this (fresh) process."""
    from nbxtensor import certify, tuning
    if name in ("warm", "cold"):
        return _first_and_steady(directory)
    if name == "certify":
        from nbxtensor.device import backend_for, resolve
        from nbxtensor.llm.census import engine_census
        from nbxtensor.llm.model import DecoderConfig
        from nbxtensor.llm.checkpoint import read_json
        config = DecoderConfig.from_hf(read_json(directory, "config.json"), directory)
        keys = engine_census(config, "bfloat16", backend_for(resolve(None)).facts, prompts=[PROMPT], batch_sizes=[1])
        start = time.perf_counter()
        reports = certify.certify_keys(keys, None)
        return {"certify_s": time.perf_counter() - start, "keys": len(reports),
                "certified": sum(r["status"] == "certified" for r in reports),
                "refused_candidates": sum(len(r["refused"]) for r in reports),
                "not_certified": [r["key"] for r in reports if r["status"] not in ("certified", "kept")]}
    with tuning.certified_only():
        return _first_and_steady(directory)


def run_phase(name: str, directory: str, store: str) -> dict:
    env = dict(os.environ, NBX_TUNING_DIR=store, NBX_PROGRESS="0")
    done = subprocess.run([sys.executable, __file__, "--phase", name, directory], env=env, capture_output=True,
                          text=True)
    if done.returncode:
        raise SystemExit(f"phase {name} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    rows = [(f"census, {SIZE} LLM, context {SIZES[SIZE]['max_position_embeddings']}, batch 1-256, {name} facts",
             f"{seconds * 1e3:.1f} ms", f"{keys} keys") for name, seconds, keys in census_seconds()]
    with tempfile.TemporaryDirectory() as work:
        checkpoint = os.path.join(work, "checkpoint")
        os.makedirs(checkpoint)
        start = time.perf_counter()
        write_checkpoint(checkpoint)
        print(f"checkpoint written in {time.perf_counter() - start:.1f} s", file=sys.stderr)
        warm = run_phase("warm", checkpoint, os.path.join(work, "scratch"))  # compiles; its settings are dropped
        cold = run_phase("cold", checkpoint, os.path.join(work, "cold"))
        store = os.path.join(work, "certified")
        certified = run_phase("certify", checkpoint, store)
        served = run_phase("certified-only", checkpoint, store)
    rows += [
        ("compile warm-up run: first call (tunes and compiles)", f"{warm['first_s']:.2f} s", ""),
        ("cold run, tuning as it goes: first call", f"{cold['first_s']:.2f} s",
         f"steady {cold['steady_s'] * 1e3:.1f} ms"),
        ("certification of the call's keys (ahead of time)", f"{certified['certify_s']:.2f} s",
         f"{certified['certified']}/{certified['keys']} certified, {certified['refused_candidates']} refused"),
        ("certified-only run: first call", f"{served['first_s']:.2f} s",
         f"steady {served['steady_s'] * 1e3:.1f} ms"),
        ("first call's tuning time (cold - certified-only)", f"{cold['first_s'] - served['first_s']:.2f} s", ""),
        ("same tokens, cold and certified-only", str(cold["tokens"] == served["tokens"]), ""),
    ]
    if certified["not_certified"]:
        rows.append(("keys not certified", ", ".join(certified["not_certified"]), ""))
    width = max(len(r[0]) for r in rows)
    print(f"{'what':<{width}}  {'time':>10}  note")
    for what, value, note in rows:
        print(f"{what:<{width}}  {value:>10}  {note}")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--phase":
        print(json.dumps(phase(sys.argv[2], sys.argv[3])))
    else:
        main()
