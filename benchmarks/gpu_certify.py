"""Ahead-of-time tuning with certification, at TinyLlama-1.1B size (22 layers, hidden 2048, GQA 32/4,
vocabulary 32000; random float16 weights written here without torch, run in bfloat16) and on a ResNet-ish
convolutional graph (written here without torch: a 7x7 stride-2 stem and max pool, a basic block, a
downsampling block with its 1x1 shortcut, a 7x7 depthwise and 1x1 pointwise pair; float16, batch 8 of
224x224 images, biases standing for folded batch norms):
- the census of the LLM engine over its buckets (every prompt length up to a 2048 context, batch sizes 1 to
  256), host only, for the hopper class and the CPU's (runs on any machine);
- on a GPU, for each model, in fresh processes on one Triton compile cache (warmed first by a run whose
  settings are thrown away, so that compiling costs the same everywhere): the first call (the LLM: a
  64-token prompt and 8 new tokens; the graph: one batch) of a cold run that tunes as it goes;
  certification of the keys that call forms; the first call of a certified-only run from the certified
  store; and each run's later, steady calls (the kernel times, which must agree).
NBX_CERTIFY_SIZE=tiny runs the same on a 2-layer LLM of hidden 64 and the graph at an eighth of its widths
on 2 images of 32x32 (the CPU's interpreter: seconds). NBX_CERTIFY_MODELS=llm or conv times one of them.
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
# the convolutional graph: (batch, image side, stem channels)
CONV_SIZES = {"1b": (8, 224, 64), "tiny": (2, 32, 8)}


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


def write_conv_graph(directory: str) -> None:
    """graph.json and float16 weights (He-scaled, so activations keep their size) of the ResNet-ish graph."""
    from nbxtensor import io, tensor
    batch, side, width = CONV_SIZES[SIZE]
    rng = np.random.default_rng(0)
    tensors, ops, weights = {"input::x": {"shape": ["b", 3, side, side], "dtype": "float16"}}, [], {}

    def param(name, *shape):
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 0
        values = rng.standard_normal(shape) * (np.sqrt(2 / fan_in) if fan_in else 0.1)
        weights[name] = tensor(values.astype(np.float16), device="cpu")
        tensors[f"param::{name}"] = {"shape": list(shape), "dtype": "float16", "weight": name}
        return {"tensor": f"param::{name}"}

    def op(aten, args, shape):
        name = f"t{len(ops)}"
        tensors[name] = {"shape": ["b", *shape], "dtype": "float16"}
        ops.append({"id": name, "op": aten, "args": args, "kwargs": {}, "outputs": [name]})
        return {"tensor": name}

    def conv(x, name, cin, cout, side_out, window, stride=1, groups=1):
        pad = window // 2
        return op("aten::conv2d.default", [x, param(name, cout, cin // groups, window, window),
                                           param(f"{name}_bias", cout), [stride, stride], [pad, pad], [1, 1],
                                           groups], [cout, side_out, side_out])

    def relu(x, channels, side_out):
        return op("aten::relu.default", [x], [channels, side_out, side_out])

    def add(x, y, channels, side_out):
        return op("aten::add.Tensor", [x, y], [channels, side_out, side_out])
    x = {"tensor": "input::x"}
    half, quarter, eighth, wide = side // 2, side // 4, side // 8, 2 * width
    h = relu(conv(x, "stem", 3, width, half, 7, stride=2), width, half)
    h = op("aten::max_pool2d.default", [h, [3, 3], [2, 2], [1, 1]], [width, quarter, quarter])
    inner = relu(conv(h, "block1_a", width, width, quarter, 3), width, quarter)
    h = relu(add(conv(inner, "block1_b", width, width, quarter, 3), h, width, quarter), width, quarter)
    inner = relu(conv(h, "block2_a", width, wide, eighth, 3, stride=2), wide, eighth)
    shortcut = conv(h, "block2_shortcut", width, wide, eighth, 1, stride=2)
    h = relu(add(conv(inner, "block2_b", wide, wide, eighth, 3), shortcut, wide, eighth), wide, eighth)
    inner = conv(h, "depthwise", wide, wide, eighth, 7, groups=wide)
    h = relu(add(conv(inner, "pointwise", wide, wide, eighth, 1), h, wide, eighth), wide, eighth)
    document = {"format": "nbxtensor.graph", "version": 1, "symbols": {"b": {"min": 1, "max": 64, "trace": batch}},
                "inputs": ["input::x"], "outputs": [h["tensor"]], "tensors": tensors, "ops": ops}
    with open(os.path.join(directory, "graph.json"), "w") as f:
        json.dump(document, f)
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


def _images():
    batch, side, _ = CONV_SIZES[SIZE]
    return np.random.default_rng(1).standard_normal((batch, 3, side, side)).astype(np.float16)


def _graph_first_and_steady(directory: str, name: str) -> dict:
    """A fresh graph's first call, then its steady calls (seconds); its output saved beside the graph as
    NAME.npy."""
    import nbxtensor as nbx
    from nbxtensor import graph
    start = time.perf_counter()
    model = graph.load(directory)
    images = nbx.tensor(_images(), device=model.device)
    loaded = time.perf_counter()

    def call():
        out = model(images)
        if model.device.type == "cuda":
            nbx.cuda.synchronize()
        return out
    out = call()
    done = time.perf_counter()
    steady = []
    for _ in range(STEADY_CALLS):
        begin = time.perf_counter()
        call()
        steady.append(time.perf_counter() - begin)
    np.save(os.path.join(directory, f"{name}.npy"), out.float().numpy())
    return {"load_s": loaded - start, "first_s": done - loaded, "steady_s": statistics.median(steady)}


def phase(name: str, directory: str) -> dict:
    """One measured phase, run in this (fresh) process."""
    from nbxtensor import certify, tuning
    if name.startswith("conv-"):
        if name == "conv-certify":
            from nbxtensor import graph
            start = time.perf_counter()
            reports = certify.certify_graph(graph.load(directory, weights=False), {"b": CONV_SIZES[SIZE][0]})
            return _certified(reports, time.perf_counter() - start)
        if name == "conv-certified-only":
            with tuning.certified_only():
                return _graph_first_and_steady(directory, name)
        return _graph_first_and_steady(directory, name)
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
        return _certified(reports, time.perf_counter() - start)
    with tuning.certified_only():
        return _first_and_steady(directory)


def _certified(reports, seconds: float) -> dict:
    return {"certify_s": seconds, "keys": len(reports), "certified": sum(r["status"] == "certified" for r in reports),
            "refused_candidates": sum(len(r["refused"]) for r in reports),
            "not_certified": [r["key"] for r in reports if r["status"] not in ("certified", "kept")]}


def run_phase(name: str, directory: str, store: str) -> dict:
    env = dict(os.environ, NBX_TUNING_DIR=store, NBX_PROGRESS="0")
    done = subprocess.run([sys.executable, __file__, "--phase", name, directory], env=env, capture_output=True,
                          text=True)
    if done.returncode:
        raise SystemExit(f"phase {name} failed:\n{done.stderr[-4000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    # each phase's figures as soon as it ends: a run cut short by a time limit still reports them
    print(f"phase {name}: {json.dumps({k: v for k, v in result.items() if k != 'tokens'})}", file=sys.stderr,
          flush=True)
    return result


def _timed_rows(model: str, warm: dict, cold: dict, certified: dict, served: dict) -> list[tuple]:
    rows = [
        (f"{model}: compile warm-up run: first call (tunes and compiles)", f"{warm['first_s']:.2f} s", ""),
        (f"{model}: cold run, tuning as it goes: first call", f"{cold['first_s']:.2f} s",
         f"steady {cold['steady_s'] * 1e3:.1f} ms"),
        (f"{model}: certification of the call's keys (ahead of time)", f"{certified['certify_s']:.2f} s",
         f"{certified['certified']}/{certified['keys']} certified, {certified['refused_candidates']} refused"),
        (f"{model}: certified-only run: first call", f"{served['first_s']:.2f} s",
         f"steady {served['steady_s'] * 1e3:.1f} ms"),
        (f"{model}: first call's tuning time (cold - certified-only)", f"{cold['first_s'] - served['first_s']:.2f} s",
         ""),
    ]
    if certified["not_certified"]:
        rows.append((f"{model}: keys not certified", ", ".join(certified["not_certified"]), ""))
    return rows


def main() -> None:
    models = os.environ.get("NBX_CERTIFY_MODELS", "llm,conv").split(",")
    rows = []
    with tempfile.TemporaryDirectory() as work:
        if "llm" in models:
            rows += [(f"census, {SIZE} LLM, context {SIZES[SIZE]['max_position_embeddings']}, batch 1-256, {name} "
                      "facts", f"{seconds * 1e3:.1f} ms", f"{keys} keys") for name, seconds, keys in census_seconds()]
            checkpoint = os.path.join(work, "checkpoint")
            os.makedirs(checkpoint)
            start = time.perf_counter()
            write_checkpoint(checkpoint)
            print(f"checkpoint written in {time.perf_counter() - start:.1f} s", file=sys.stderr)
            warm = run_phase("warm", checkpoint, os.path.join(work, "scratch"))  # compiles; settings dropped
            cold = run_phase("cold", checkpoint, os.path.join(work, "cold"))
            store = os.path.join(work, "certified")
            certified = run_phase("certify", checkpoint, store)
            served = run_phase("certified-only", checkpoint, store)
            rows += _timed_rows(f"{SIZE} LLM", warm, cold, certified, served)
            rows.append(("same tokens, cold and certified-only", str(cold["tokens"] == served["tokens"]), ""))
        if "conv" in models:
            directory = os.path.join(work, "conv")
            os.makedirs(directory)
            write_conv_graph(directory)
            warm = run_phase("conv-warm", directory, os.path.join(work, "conv-scratch"))
            cold = run_phase("conv-cold", directory, os.path.join(work, "conv-cold"))
            store = os.path.join(work, "conv-certified")
            certified = run_phase("conv-certify", directory, store)
            served = run_phase("conv-certified-only", directory, store)
            batch, side, width = CONV_SIZES[SIZE]
            rows += _timed_rows(f"ResNet-ish graph, width {width}, {batch}x{side}x{side}", warm, cold, certified,
                                served)
            cold_out, served_out = (np.load(os.path.join(directory, f"{name}.npy")) for name in
                                    ("conv-cold", "conv-certified-only"))
            # both float16, each setting summing in its own order: a few of the output's ulps apart
            rows.append(("largest difference, cold and certified-only output",
                         f"{np.abs(cold_out - served_out).max():.3g}", f"largest output {np.abs(cold_out).max():.3g}"))
    width = max(len(r[0]) for r in rows)
    print(f"{'what':<{width}}  {'time':>10}  note")
    for what, value, note in rows:
        print(f"{what:<{width}}  {value:>10}  {note}")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--phase":
        print(json.dumps(phase(sys.argv[2], sys.argv[3])))
    else:
        main()
