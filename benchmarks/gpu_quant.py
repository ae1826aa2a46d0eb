"""Quantized-weight products on the GPU (issue #30's figures), against our bf16 products and torch's in the
same run:
- decode rows 1, 4 and 16 over Llama-2-7B and Llama-3-8B projection shapes: bf16 (ours, torch) and ours
  with int4 (groups of 128), int8 (per channel) and fp8 (per channel) weights; int4's speedup over our bf16
  GEMV and its share of the floor (packed weights, scales and zero points over 4.1 TB/s, the issue's
  figure); every call replayed from a CUDA graph (a decode step's form), so no host path paces it;
- prefill 2048 rows: int4 and fp8 (weight only, and fp8 x fp8: rows rounded to e4m3 per row,
  ``fp8_activations``) against our bf16 GEMM (and torch's);
- square fp8 products at 4096 and 8192 against our bf16 ones; fp8 x fp8 also split into its two launches, the
  rows' rounding and the product alone;
- end to end (NBX_QUANT_E2E=0 skips it): Llama-3-8B size, int4 (a GPTQ checkpoint of random words written
  here), batch 1 decode tokens/s and the weights' memory;
- fp8 prefill (section ``fp8e2e``): Llama-3-8B's layer shapes, 8 layers, an fbgemm_fp8 checkpoint of random
  e4m3 values written here, a 2048-token prefill with ``llm.load(fp8_activations=True)`` against False;
- 128 x 128 block-scaled fp8 (section ``fp8block``, DeepSeek-V3's and Qwen3-FP8's weights): the prefill and
  square products of ``prefill`` with rows rounded in 1 x 128 blocks (``fp8_block_gemm``), against the same
  values scaled per channel (``fp8_gemm``), the block weights dequantized (weight only) and our bf16 GEMM.
NBX_QUANT_SECTIONS (comma-separated, default decode,prefill,e2e,fp8e2e,fp8block) picks the sections; each
prints its seconds. NBX_INT4_INLINE_ASM=0 times int4 through the portable float32 tile forms instead of the
inline PTX ones (``ops.quant.inline_nibbles``; the same bits), for a before/after in one session.
NBX_QUANT_IN_LOOP_MAX_ROWS=N moves the rows past which 16-bit products dequantize the whole weight and run our
GEMM on it (``ops.quant.IN_LOOP_MAX_ROWS``; 8192 times prefill's in-loop GEMM instead). NBX_QUANT_FOLD=0 runs
the end-to-end decode steps with their norms and gated activations apart from the int4 products (``llm.model``'s
``FOLD_MAX_ROWS`` 0), for the folds' before and after in one session.
Prints a table last."""
from __future__ import annotations

import json
import os
import tempfile
import time

import numpy as np

import nbxtensor as nbx
from nbxtensor import launch, llm
from nbxtensor.llm import model as llm_model
from nbxtensor.nn import functional as F
from nbxtensor.ops import matmul_prologue, quant as quant_ops
from nbxtensor.quant import QuantizedWeight

import torch  # noqa: E402  (the reference)

from timing import gpu_pair_ms, gpu_time_ms, graph_times_ms, print_tuned

FLOOR_BANDWIDTH = 4.1e12  # the bandwidth for the int4 GEMV floor
# (name, out_features, in_features) of Llama-2-7B and Llama-3-8B projections (q/k/v and gate/up joined)
SHAPES = [("llama2-7b qkv", 12288, 4096), ("llama2-7b o", 4096, 4096), ("llama2-7b gate_up", 22016, 4096),
          ("llama2-7b down", 4096, 11008), ("llama3-8b qkv", 6144, 4096), ("llama3-8b gate_up", 28672, 4096),
          ("llama3-8b down", 4096, 14336)]
ROWS = (1, 4, 16)


_WEIGHTS: dict = {}


def random_quantized(n: int, k: int, seed: int, device: str = "cuda") -> dict:
    """{format: QuantizedWeight} of an (n, k) weight made from random stored values (GPTQ int4 words in groups
    of 128 with bfloat16 scales, as ``nbx quantize`` writes a bfloat16 model's; int8 and fp8 e4m3 per channel),
    scales about 0.02 / level: rounding a float weight on the host takes seconds at these sizes, and a product's
    time does not depend on its values."""
    import ml_dtypes
    rng = np.random.default_rng(seed)
    groups = -(-k // 128)
    words = rng.integers(-2**31, 2**31, (k // 8, n), dtype=np.int64).astype(np.int32)
    int4 = QuantizedWeight.gptq(words, np.full((groups, n // 8), 0x77777777, np.int32),
                                np.full((groups, n), 0.02 / 8, ml_dtypes.bfloat16), group_size=128, device=device,
                                dtype="bfloat16")
    int8 = QuantizedWeight.int8(rng.integers(-127, 128, (n, k), dtype=np.int8), np.full(n, 0.02 / 127, np.float32),
                                device=device, dtype="bfloat16")
    # bytes of finite e4m3 values: 0x7f and 0xff are NaN
    raw = rng.integers(0, 256, (n, k), dtype=np.uint8)
    raw[(raw & 0x7F) == 0x7F] = 0x3F
    fp8 = QuantizedWeight.fp8(raw.view(ml_dtypes.float8_e4m3fn), np.full(n, 0.02 / 448, np.float32), device=device,
                              dtype="bfloat16")
    return {"int4": int4, "int8": int8, "fp8": fp8}


def block_scaled(fp8: QuantizedWeight, device: str = "cuda") -> QuantizedWeight:
    """``fp8``'s e4m3 values with a scale per 128 x 128 block (all about 0.02 / 448, as the channels' are)."""
    n, k = fp8.shape
    scales = np.random.default_rng(n + k).uniform(0.5, 1.5, (-(-n // 128), -(-k // 128))) * 0.02 / 448
    return QuantizedWeight.fp8(fp8.qweight.numpy(), scales.astype(np.float32), device=device, dtype="bfloat16")


def weights(n: int, k: int) -> tuple:
    """(bf16 ours, bf16 torch's, {format: quantized}) for an (n, k) weight, made once."""
    if (n, k) not in _WEIGHTS:
        w = torch.randn(n, k, device="cuda", generator=torch.Generator("cuda").manual_seed(n + k)) * 0.02
        w = w.bfloat16()
        _WEIGHTS[(n, k)] = (nbx.from_dlpack(w), w, random_quantized(n, k, n + k))
    return _WEIGHTS[(n, k)]


def activations(rows: int, k: int) -> tuple:
    x = np.random.default_rng(rows + k).standard_normal((rows, k), dtype=np.float32)
    return nbx.tensor(x, device="cuda").to(nbx.bfloat16), torch.from_numpy(x).cuda().bfloat16()


def check(x, qw: QuantizedWeight, what: str, whole: bool = False, **options) -> None:
    """A quantized product against the float64 product of the dequantized weight (on the host), on 4 rows
    (rows rounded to e4m3 with ``fp8_activations``: each element within 2^-4, the sum well within 5e-2);
    ``whole``: the product of all of x's rows (the route their count takes), its first 4 compared."""
    reference = x[:4].float().numpy().astype(np.float64) @ qw.dequantize().astype(np.float64).T
    got = nbx.quantized_linear(x if whole else x[:4], qw, **options)[:4].float().numpy()
    error = float(np.abs(got - reference).max() / np.abs(reference).max())
    assert error < (5e-2 if options else 2e-2), f"{what}: relative error {error}"


def kernel_rows() -> list[tuple]:
    rows = []
    for name, n, k in SHAPES:
        w_bf16, w_t, formats = weights(n, k)
        for m in ROWS:
            x, x_t = activations(m, k)
            if m == ROWS[-1] and n * k <= 6144 * 4096:  # dequantizing on the host takes seconds past this
                for fmt, qw in formats.items():
                    check(x, qw, f"{fmt} {name}")
            # each call replayed from a CUDA graph, as a decode step runs it: a 10-30 us kernel timed back to back
            # through the op would be paced by its host path (one or two launches) instead
            torch_linear = lambda: torch.nn.functional.linear(x_t, w_t)  # noqa: E731
            ours_bf16, torch_bf16 = graph_times_ms(lambda: F.linear(x, w_bf16), torch_linear)
            times = {fmt: graph_times_ms(lambda: nbx.quantized_linear(x, qw), torch_linear)[0]
                     for fmt, qw in formats.items()}
            floor_ms = (formats["int4"].nbytes + m * k * 2 + m * n * 2) / FLOOR_BANDWIDTH * 1e3
            rows.append((f"{name} {n}x{k} rows {m}", torch_bf16 * 1e3, ours_bf16 * 1e3, times["int4"] * 1e3,
                         times["int8"] * 1e3, times["fp8"] * 1e3, f"{ours_bf16 / times['int4']:.2f}x",
                         f"{floor_ms / times['int4']:.0%}"))
            print(*rows[-1], sep=" | ", flush=True)
    return rows


def fp8_stages_us(x, qw: QuantizedWeight) -> tuple:
    """The two launches of ``quantized_linear(x, qw, fp8_activations=True)`` timed apart (us): the rows rounded
    to e4m3 (``fp8_rows``) and the product alone (``fp8_gemm``, ``fp8_gemm_tiles`` or ``fp8_block_gemm`` at
    the key's tuned setting), each replayed from a capture of one call, which holds its operands."""
    nbx.quantized_linear(x, qw, fp8_activations=True)
    with launch.capture() as captured:
        nbx.quantized_linear(x, qw, fp8_activations=True)
    rounding, product = captured.launches
    return tuple(gpu_time_ms(lambda: launch.launch_planned(*recorded)) * 1e3 for recorded in (rounding, product))


def prefill_rows() -> list[tuple]:
    rows = []
    cases = [(name, n, k, 2048) for name, n, k in SHAPES if "8b" in name]
    cases += [(f"square {s}", s, s, s) for s in (4096, 8192)]
    for name, n, k, m in cases:
        w_bf16, w_t, formats = weights(n, k)
        x, x_t = activations(m, k)
        ours_bf16, torch_bf16 = gpu_pair_ms(lambda: F.linear(x, w_bf16), lambda: torch.nn.functional.linear(x_t, w_t))
        flops = 2 * m * n * k
        out = [f"{name} {m}x{n}x{k}", torch_bf16 * 1e3, ours_bf16 * 1e3]
        if n * k <= 6144 * 4096:  # dequantizing on the host takes seconds past this
            check(x, formats["fp8"], f"fp8 x fp8 {name}", fp8_activations=True)
            for fmt in ("int4", "fp8"):
                check(x, formats[fmt], f"{fmt} {name} {m} rows", whole=True)
        for fmt, options in (("int4", {}), ("fp8", {}), ("fp8", {"fp8_activations": True})):
            qw = formats[fmt]
            ms = gpu_time_ms(lambda: nbx.quantized_linear(x, qw, **options))
            out += [ms * 1e3, f"{ours_bf16 / ms:.2f}x"]
        rounding_us, product_us = fp8_stages_us(x, formats["fp8"])
        out += [rounding_us, product_us, f"{ours_bf16 * 1e3 / product_us:.2f}x",
                f"{flops / (product_us * 1e-6) / 1e12:.0f} TF/s"]
        out.append(f"{flops / (ours_bf16 * 1e-3) / 1e12:.0f} TF/s bf16")
        rows.append(tuple(out))
        print(*out, sep=" | ", flush=True)
    return rows


def block_rows() -> list[tuple]:
    """``prefill``'s cases with 128 x 128 block-scaled fp8 weights: rows in 1 x 128 blocks on the float8 units
    (``fp8_block_gemm``), the block weights dequantized (``quantized_gemm``), and ``fp8_gemm`` (per channel)
    as the scales-per-row baseline; each against our bf16 GEMM."""
    rows = []
    cases = [(name, n, k, 2048) for name, n, k in SHAPES if "8b" in name]
    cases += [(f"square {s}", s, s, s) for s in (4096, 8192)]
    for name, n, k, m in cases:
        w_bf16, _, formats = weights(n, k)
        blocked = block_scaled(formats["fp8"])
        x, _ = activations(m, k)
        if n * k <= 6144 * 4096:  # dequantizing on the host takes seconds past this
            check(x, blocked, f"fp8 x fp8 blocks {name}", fp8_activations=True)
        ours_bf16 = gpu_time_ms(lambda: F.linear(x, w_bf16))
        out = [f"{name} {m}x{n}x{k}", ours_bf16 * 1e3]
        for qw, options in ((formats["fp8"], {"fp8_activations": True}), (blocked, {"fp8_activations": True}),
                            (blocked, {})):
            ms = gpu_time_ms(lambda: nbx.quantized_linear(x, qw, **options))
            out += [ms * 1e3, f"{ours_bf16 / ms:.2f}x"]
        rows.append(tuple(out))
        print(*out, sep=" | ", flush=True)
    return rows


EIGHT_B = dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
               num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=8192)


def write_gptq_checkpoint(directory: str, config: dict, group_size: int = 128, method: str = "gptq") -> None:
    """A Llama checkpoint whose decoder linears are GPTQ int4 words (``method`` gptq) or fbgemm_fp8 e4m3 values
    per channel (fbgemm_fp8) drawn at random (scales small enough to keep activations finite), embeddings and
    norms in bf16."""
    from safetensors.numpy import save_file
    import ml_dtypes
    rng = np.random.default_rng(0)
    h, inter, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
    heads, kv = config["num_attention_heads"], config["num_key_value_heads"]
    d = h // heads
    linears = {"self_attn.q_proj": (heads * d, h), "self_attn.k_proj": (kv * d, h), "self_attn.v_proj": (kv * d, h),
               "self_attn.o_proj": (h, heads * d), "mlp.gate_proj": (inter, h), "mlp.up_proj": (inter, h),
               "mlp.down_proj": (h, inter)}

    def bf16(shape, scale):
        return (rng.standard_normal(shape, dtype=np.float32) * scale).astype(ml_dtypes.bfloat16)

    shard = {"model.embed_tokens.weight": bf16((config["vocab_size"], h), 0.02),
             "lm_head.weight": bf16((config["vocab_size"], h), 0.02), "model.norm.weight": np.ones(h, ml_dtypes.bfloat16)}
    files, index = [], {}
    for layer in range(layers):
        prefix = f"model.layers.{layer}."
        shard[prefix + "input_layernorm.weight"] = np.ones(h, ml_dtypes.bfloat16)
        shard[prefix + "post_attention_layernorm.weight"] = np.ones(h, ml_dtypes.bfloat16)
        for module, (n, k) in linears.items():
            if method == "fbgemm_fp8":
                raw = rng.integers(0, 256, (n, k), dtype=np.uint8)
                raw[(raw & 0x7F) == 0x7F] = 0x3F  # 0x7f and 0xff are NaN
                shard[prefix + module + ".weight"] = raw.view(ml_dtypes.float8_e4m3fn)
                shard[prefix + module + ".weight_scale"] = np.full((n, 1), 0.02 / 448, np.float32)
                continue
            groups = k // group_size
            shard[prefix + module + ".qweight"] = rng.integers(-2**31, 2**31, (k // 8, n), dtype=np.int64).astype(np.int32)
            shard[prefix + module + ".qzeros"] = np.full((groups, n // 8), 0x77777777, np.int32)
            shard[prefix + module + ".scales"] = np.full((groups, n), 0.02 / 8, np.float16)
        if layer % 4 == 3 or layer == layers - 1:
            name = f"model-{len(files):05d}.safetensors"
            save_file(shard, os.path.join(directory, name))
            index.update({key: name for key in shard})
            files.append(name)
            shard = {}
    with open(os.path.join(directory, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": index}, f)
    quantization = ({"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0} if method == "fbgemm_fp8" else
                    {"quant_method": "gptq", "bits": 4, "group_size": group_size, "desc_act": False, "sym": False,
                     "checkpoint_format": "gptq"})
    full = dict(config, architectures=["LlamaForCausalLM"], model_type="llama", rms_norm_eps=1e-5, rope_theta=500000.0,
                torch_dtype="bfloat16", tie_word_embeddings=False, hidden_act="silu",
                quantization_config=quantization)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(full, f)


def end_to_end_rows(config: dict = EIGHT_B, device: str = "cuda", new: int = 64) -> list[tuple]:
    rows = []
    with tempfile.TemporaryDirectory() as directory:
        start = time.perf_counter()
        write_gptq_checkpoint(directory, config)
        written = time.perf_counter() - start
        nbx.cuda.reset_peak_memory_stats()
        before = nbx.cuda.memory_allocated()
        start = time.perf_counter()
        model = llm.load(directory, device=device, cache_tokens=8 * 1024)
        loaded = time.perf_counter() - start
        weights = nbx.cuda.memory_allocated() - before
        prompt = list(range(1, 65))
        for batch in (1, 8):
            # a first run tunes the batch's keys and captures its replayed steps, outside the timing
            model.generate([prompt] * batch, max_new_tokens=8)
            model.engine.prefill_seconds = model.engine.decode_seconds = 0.0
            model.generate([prompt] * batch, max_new_tokens=new)
            rate = batch * (new - 1) / model.engine.decode_seconds
            rows.append((f"8B int4 decode batch {batch}", f"{rate:.1f} tokens/s",
                         f"allocated after load {weights / 2**30:.2f} GiB (weights + cache)",
                         f"write {written:.0f} s, load {loaded:.0f} s"))
    return rows


def fp8_prefill_rows(config: dict = dict(EIGHT_B, num_hidden_layers=8), length: int = 2048) -> list[tuple]:
    """A prefill of ``length`` tokens of an fbgemm_fp8 checkpoint, rows rounded to float8 or not (median of 3
    after a first, tuning, run)."""
    rows = []
    with tempfile.TemporaryDirectory() as directory:
        write_gptq_checkpoint(directory, config, method="fbgemm_fp8")
        prompt = [int(t) for t in np.random.default_rng(1).integers(3, config["vocab_size"], length)]
        for option in (False, True):
            model = llm.load(directory, device="cuda", cache_tokens=4 * length, fp8_activations=option)
            times = []
            for _ in range(4):
                model.engine.prefill_seconds = 0.0
                model.generate(prompt, max_new_tokens=1)
                times.append(model.engine.prefill_seconds)
            rows.append((f"8B shapes, {config['num_hidden_layers']} layers, prefill {length}",
                         "fp8 x fp8" if option else "fp8 weight only", sorted(times[1:])[1] * 1e3))
            del model
    return rows


def table(title: str, header: str, rows: list[tuple]) -> None:
    print(f"\n{title}\n{header}")
    for row in rows:
        print(" | ".join(f"{v:.1f}" if isinstance(v, float) else str(v) for v in row))


def timed_section(name: str, run) -> list[tuple]:
    sections = os.environ.get("NBX_QUANT_SECTIONS", "decode,prefill,e2e,fp8e2e,fp8block").split(",")
    if name not in sections or (name == "e2e" and os.environ.get("NBX_QUANT_E2E", "1") == "0"):
        return []
    start = time.perf_counter()
    rows = run()
    print(f"{name}: {time.perf_counter() - start:.0f} s", flush=True)
    return rows


def main() -> None:
    inline_asm = os.environ.get("NBX_INT4_INLINE_ASM", "1") != "0"
    if not inline_asm:
        # the quantized GEMVs and those with a norm or activation in their prologue (the e2e decode steps)
        quant_ops.inline_nibbles = matmul_prologue.inline_nibbles = lambda facts, dtype: False
    quant_ops.IN_LOOP_MAX_ROWS = int(os.environ.get("NBX_QUANT_IN_LOOP_MAX_ROWS", quant_ops.IN_LOOP_MAX_ROWS))
    if os.environ.get("NBX_QUANT_FOLD", "1") == "0":
        llm_model.FOLD_MAX_ROWS = 0
    print(f"{nbx.cuda.get_device_name()}, torch {torch.__version__}, int4 inline PTX {'on' if inline_asm else 'off'}, "
          f"whole weight dequantized past {quant_ops.IN_LOOP_MAX_ROWS} rows, decode folds up to "
          f"{llm_model.FOLD_MAX_ROWS} row", flush=True)
    kernels = timed_section("decode", kernel_rows)
    if kernels:
        print_tuned(("quantized_gemv", "gemv"))
    prefill = timed_section("prefill", prefill_rows)
    e2e = timed_section("e2e", end_to_end_rows)
    if e2e:  # one-row decode steps fold their norms and activations into the int4 products
        print_tuned(("quantized_gemv_rms_norm|M=1|", "quantized_gemv_act_and_mul|M=1|"))
    fp8_prefill = timed_section("fp8e2e", fp8_prefill_rows)
    blocks = timed_section("fp8block", block_rows)
    table("decode rows (us)", "shape | torch bf16 | ours bf16 | int4 | int8 | fp8 | int4 vs our bf16 | int4 of floor",
          kernels)
    table("prefill and square products (us)", "case | torch bf16 | ours bf16 | int4 | int4 vs bf16 | fp8 | fp8 vs bf16 "
          "| fp8 x fp8 | fp8 x fp8 vs bf16 | its rounding | its product alone | product vs bf16 | product rate | bf16 rate",
          prefill)
    if e2e:
        table("end to end", "what | rate | memory | time", e2e)
    if fp8_prefill:
        table("fp8 checkpoint prefill (ms)", "model | products | ms", fp8_prefill)
    if blocks:
        table("128 x 128 block-scaled fp8 (us)", "case | ours bf16 | fp8 x fp8 per channel | vs bf16 | fp8 x fp8 "
              "blocks | vs bf16 | blocks weight only | vs bf16", blocks)


if __name__ == "__main__":
    main()
