"""Quantized decoders: checkpoints whose linear layers are GPTQ, AWQ, int8 or fp8, and float checkpoints
quantized on load, generate the greedy tokens of the same model run in float32 with the weights those
quantized ones stand for (dequantized here with NumPy and saved as a float checkpoint).

Equal tokens, not close logits: both runs multiply by the same float32 weights (a dequantized weight is exact
in float32), and differ only in the order of the float32 sums, far below the gaps between a random model's
top logits at these scales (weights drawn with a standard deviation of 0.15, as below)."""
import json
import os

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor import census
from nbxtensor.device.facts import load as load_facts
from nbxtensor.io import load_file, save_file
from nbxtensor.llm import load
from nbxtensor.llm.checkpoint import CheckpointError
from nbxtensor.device import backend_for, resolve
from nbxtensor.llm import quantized as Q
from nbxtensor.llm.census import checkpoint_projections, engine_census
from nbxtensor.llm.model import DecoderConfig
from nbxtensor.llm.quantized import write_quantized
from nbxtensor.quant import AWQ_ORDER, unpack_int4_columns

from .conftest import TEST_DEVICE
from .test_quant import _e4m3_rows, _pack_along_n, _pack_gptq_qweight, _reference_int4

CONFIG = {"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 80, "max_position_embeddings": 64,
          "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False, "torch_dtype": "float32",
          "bos_token_id": 1, "eos_token_id": 2}
PROMPT = [5, 17, 3, 44, 9, 30, 61]
NEW_TOKENS = 6
PROJECTIONS = {"self_attn.q_proj": (64, 64), "self_attn.k_proj": (32, 64), "self_attn.v_proj": (32, 64),
               "self_attn.o_proj": (64, 64), "mlp.gate_proj": (96, 64), "mlp.up_proj": (96, 64),
               "mlp.down_proj": (64, 96)}


def _write(directory, tensors: dict, quantization=None, config=CONFIG):
    os.makedirs(directory, exist_ok=True)
    config = dict(config, **({"quantization_config": quantization} if quantization else {}))
    with open(os.path.join(directory, "config.json"), "w") as file:
        json.dump(config, file)
    save_file({name: nbx.tensor(np.ascontiguousarray(a)) for name, a in tensors.items()},
              os.path.join(directory, "model.safetensors"))
    return directory


def _float_weights(rng) -> dict:
    tensors = {"model.embed_tokens.weight": rng.standard_normal((80, 64)), "lm_head.weight": rng.standard_normal((80, 64)) * 0.15,
               "model.norm.weight": 1 + 0.1 * rng.standard_normal(64)}
    for layer in range(2):
        prefix = f"model.layers.{layer}."
        tensors[prefix + "input_layernorm.weight"] = 1 + 0.1 * rng.standard_normal(64)
        tensors[prefix + "post_attention_layernorm.weight"] = 1 + 0.1 * rng.standard_normal(64)
        for name, shape in PROJECTIONS.items():
            tensors[f"{prefix}{name}.weight"] = rng.standard_normal(shape) * 0.15
    return {name: a.astype(np.float32) for name, a in tensors.items()}


@pytest.fixture(scope="module")
def float_checkpoint(tmp_path_factory):
    return _write(tmp_path_factory.mktemp("float"), _float_weights(np.random.default_rng(7)))


def _tokens(directory, quantized=False, **settings):
    llm = load(directory, device=TEST_DEVICE, dtype="float32", **settings)
    assert isinstance(llm.model.layers[1].down, nbx.QuantizedWeight) == quantized
    return llm.generate(PROMPT, max_new_tokens=NEW_TOKENS, temperature=0).tokens


def _dequantized(directory) -> dict:
    """The float32 weights a quantized checkpoint stands for, dequantized here with NumPy."""
    config = json.load(open(os.path.join(directory, "config.json")))["quantization_config"]
    tensors = {n: t.numpy() for n, t in load_file(os.path.join(directory, "model.safetensors"), device="cpu").items()}
    out = {}
    for name in list(tensors):
        if name.endswith((".qweight", ".weight_scale")) or name.endswith(".weight") and tensors[name].dtype.itemsize == 1:
            prefix = name.rsplit(".", 1)[0]
            if prefix + ".weight" in out:
                continue
            if config["quant_method"] == "awq":
                n = tensors[prefix + ".scales"].shape[1]
                q = unpack_int4_columns(tensors[prefix + ".qweight"], n, AWQ_ORDER)
                zeros = unpack_int4_columns(tensors[prefix + ".qzeros"], n, AWQ_ORDER)
                groups = np.arange(q.shape[0]) // config["group_size"]
                w = _reference_int4(q, zeros, tensors[prefix + ".scales"], groups)
            else:  # int8 (nbx) and fp8 (fbgemm_fp8): values times a per-channel scale
                w = tensors[prefix + ".weight"].astype(np.float64) * tensors[prefix + ".weight_scale"].astype(np.float64)
            out[prefix + ".weight"] = w.astype(np.float32)
        elif not name.endswith((".qzeros", ".scales")):
            out[name] = tensors[name]
    return out


@pytest.mark.parametrize("format", ["int8", "int4", "fp8"])
def test_a_written_quantized_checkpoint_generates_its_dequantized_models_tokens(float_checkpoint, tmp_path, format):
    quantized = tmp_path / "quantized"
    write_quantized(float_checkpoint, quantized, format, group_size=32)
    dequantized = _write(tmp_path / "dequantized", _dequantized(quantized))
    expected = _tokens(dequantized)
    assert _tokens(quantized, True) == expected
    if format == "int8":
        # quantizing on load rounds as the writer does: the same weights
        assert _tokens(float_checkpoint, True, quantize="int8") == expected


@pytest.mark.parametrize("format", ["int4", "fp8"])
def test_quantize_on_load_runs_every_format(float_checkpoint, format):
    llm = load(float_checkpoint, device=TEST_DEVICE, dtype="float32", quantize=format)
    # q, k and v quantized apart are joined by output rows into one weight
    qkv = llm.model.layers[0].qkv
    assert isinstance(qkv, nbx.QuantizedWeight) and qkv.format == format
    assert len(llm.generate(PROMPT, max_new_tokens=3, temperature=0).tokens) == 3


def _gptq_act_order(directory) -> tuple:
    """A GPTQ checkpoint with act-order (``g_idx``) in ``directory``/gptq, and the float32 weights it stands for."""
    rng = np.random.default_rng(3)
    tensors, dequantized = {}, {}
    for name, a in _float_weights(rng).items():
        prefix = name[:-len(".weight")]
        if prefix.rsplit(".", 1)[-1] not in {p.rsplit(".", 1)[-1] for p in PROJECTIONS}:
            tensors[name] = dequantized[name] = a
            continue
        n, k = a.shape
        q = rng.integers(0, 16, (k, n)).astype(np.uint8)
        zeros = rng.integers(1, 16, (k // 32, n)).astype(np.uint8)
        scales = (rng.uniform(0.5, 1.5, (k // 32, n)) * 0.02).astype(np.float16)
        g_idx = rng.permutation(np.arange(k) // 32).astype(np.int32)
        tensors.update({prefix + ".qweight": _pack_gptq_qweight(q), prefix + ".qzeros": _pack_along_n(zeros - 1, range(8)),
                        prefix + ".scales": scales, prefix + ".g_idx": g_idx})
        dequantized[name] = _reference_int4(q, zeros, scales, g_idx).astype(np.float32)
    gptq = _write(directory / "gptq", tensors, {"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": True,
                                                "sym": False})
    return gptq, dequantized


def test_a_gptq_checkpoint_with_act_order(tmp_path):
    gptq, dequantized = _gptq_act_order(tmp_path)
    assert _tokens(gptq, True) == _tokens(_write(tmp_path / "float", dequantized))


@pytest.mark.parametrize("form", ["int4", "int8", "fp8", "gptq act-order"])
def test_a_quantized_decode_step_folds_norms_and_activations_into_its_products(float_checkpoint, tmp_path, monkeypatch,
                                                                               form):
    """A one-row decode step over quantized weights computes each layer's add + norm in the qkv and gate_up
    products and the gated activation in the down product, as over float weights: 3 launches a layer fewer
    than the unfused step (and one for the float head). Act-order q, k, v (gate, up) weights stay apart
    (``quant.join_rows``): their norms run alone, the activation still folds. Logits equal the unfused
    step's to the float32 products' rounding; greedy tokens are the same."""
    from nbxtensor.launch import capture
    from nbxtensor.llm import model as model_module
    directory, quantize = (_gptq_act_order(tmp_path)[0], None) if form == "gptq act-order" else (float_checkpoint, form)
    model = load(directory, device=TEST_DEVICE, dtype="float32", quantize=quantize, replay=False)
    decoder = model.model
    cache = decoder.new_cache(64, block_size=4)
    decoder.prefill(cache, 0, PROMPT)
    inputs = {name: nbx.tensor(array, device=TEST_DEVICE)
              for name, array in decoder.decode_inputs(cache, [0], [7]).items()}
    steps = {}
    for fold in (True, False):
        if not fold:  # the norms and the activation launch alone
            monkeypatch.setattr(model_module, "FOLD_MAX_ROWS", 0)
        decoder.decode_from(cache, inputs)  # plans each op (a plan may launch a copy while it is made)
        with capture() as recorded:
            logits = decoder.decode_from(cache, inputs)
        tokens = model.generate(PROMPT, max_new_tokens=NEW_TOKENS, temperature=0).tokens
        steps[fold] = [launch[0].fn.__name__ for launch in recorded.launches], logits.numpy(), tokens
    (folded, folded_logits, folded_tokens), (unfolded, unfolded_logits, unfolded_tokens) = steps[True], steps[False]
    layers = decoder.config.num_layers
    per_layer = 1 if form == "gptq act-order" else 3
    assert isinstance(decoder.layers[0].qkv, list) == (form == "gptq act-order")
    assert len(unfolded) - len(folded) == per_layer * layers + 1
    assert folded.count("quantized_gemv_prologue") == per_layer * layers
    assert folded.count("gemv_prologue") == 1  # the float head behind the final add + norm
    # float32 products of 64 to 192 terms, and their inputs' roundings: a few units of 2^-24 each
    np.testing.assert_allclose(folded_logits, unfolded_logits, rtol=1e-5, atol=1e-5)
    assert (folded_logits.argmax(-1) == unfolded_logits.argmax(-1)).all()
    assert folded_tokens == unfolded_tokens


def test_unsupported_and_inconsistent_quantized_checkpoints_are_refused(float_checkpoint, tmp_path):
    weights = _float_weights(np.random.default_rng(1))
    for spec, message in [({"quant_method": "bitsandbytes"}, "quant_method 'bitsandbytes' is not supported"),
                          ({"quant_method": "gptq", "bits": 8, "group_size": 128}, "bits=8 is not supported"),
                          ({"quant_method": "awq", "bits": 4, "version": "gemv"}, "version 'gemv' is not supported"),
                          ({"quant_method": "fp8", "weight_block_size": [64, 64]}, r"\[64, 64\] is not supported")]:
        directory = _write(tmp_path / spec["quant_method"], weights, spec)
        with pytest.raises(CheckpointError, match=message):
            load(directory, device=TEST_DEVICE)
    # an int8 layer whose scales do not match its rows
    broken = dict(weights)
    broken["model.layers.0.self_attn.q_proj.weight"] = np.zeros((64, 64), np.int8)
    broken["model.layers.0.self_attn.q_proj.weight_scale"] = np.ones((63, 1), np.float32)
    directory = _write(tmp_path / "broken", broken, {"quant_method": "nbx", "format": "int8"})
    with pytest.raises(CheckpointError, match="int8 scales: expected one per output channel"):
        load(directory, device=TEST_DEVICE)
    with pytest.raises(CheckpointError, match="already quantized"):
        load(directory, device=TEST_DEVICE, quantize="int4")
    with pytest.raises(ValueError, match="quantize must be one of int4, int8, fp8"):
        load(float_checkpoint, device=TEST_DEVICE, quantize="int2")


def test_nbx_quantize_and_generate_quantize(float_checkpoint, tmp_path, capsys):
    from nbxtensor.cli import main
    out = tmp_path / "int4"
    assert main(["quantize", str(float_checkpoint), str(out), "--format", "int4", "--group-size", "32"]) == 0
    assert json.load(open(out / "config.json"))["quantization_config"]["group_size"] == 32
    capsys.readouterr()
    prompt = ",".join(map(str, PROMPT))
    assert main(["generate", str(out), "--prompt", prompt, "--max-new-tokens", "3", "--device", TEST_DEVICE,
                 "--dtype", "float32"]) == 0
    from_file = capsys.readouterr().out.split()
    assert main(["generate", str(float_checkpoint), "--prompt", prompt, "--max-new-tokens", "3", "--device",
                 TEST_DEVICE, "--dtype", "float32", "--quantize", "int4", "--group-size", "32"]) == 0
    on_load = capsys.readouterr().out.split()
    assert len(from_file) == len(on_load) == 3
    assert main(["quantize", str(out), str(tmp_path / "again")]) == 2
    assert "already quantized" in capsys.readouterr().err


# more rows than a GEMV takes (16): the prefill's products are GEMMs
LONG_PROMPT = [5, 17, 3, 44, 9, 30, 61, 12, 70, 4, 21, 7, 7, 33, 8, 2, 60, 1, 79, 26]


def _reference_logits(weights: dict, tokens: list, round_rows, config=CONFIG) -> np.ndarray:
    """The logits after each of ``tokens`` of ``config``'s Llama in float64 with ``weights``; with ``round_rows``
    the rows entering each decoder projection are first rounded to e4m3 with a scale each, as
    ``quantized_linear(..., fp8_activations=True)`` rounds them (the head's float weight takes them as they are),
    or as ``round_rows(rows)`` rounds them where it is a function."""
    w = {name: a.astype(np.float64) for name, a in weights.items()}
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    n, dim = len(tokens), config["hidden_size"] // heads
    rounding = round_rows if callable(round_rows) else _e4m3_rows if round_rows else None

    def norm(x, gain):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + config["rms_norm_eps"]) * gain

    def product(x, name):
        return (rounding(x) if rounding else x) @ w[name].T

    angles = np.arange(n)[:, None] * (1.0 / config["rope_theta"] ** (np.arange(0, dim, 2) / dim))[None, :]
    cos, sin = np.cos(angles)[:, None, :], np.sin(angles)[:, None, :]

    def rope(t):
        first, second = t[..., :dim // 2], t[..., dim // 2:]
        return np.concatenate([first * cos - second * sin, second * cos + first * sin], -1)
    causal = np.triu(np.full((n, n), -np.inf), 1)
    x = w["model.embed_tokens.weight"][tokens]
    for layer in range(config["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        h = norm(x, w[p + "input_layernorm.weight"])
        q = rope(product(h, p + "self_attn.q_proj.weight").reshape(n, heads, dim))
        k = np.repeat(rope(product(h, p + "self_attn.k_proj.weight").reshape(n, kv_heads, dim)), heads // kv_heads,
                      axis=1)
        v = np.repeat(product(h, p + "self_attn.v_proj.weight").reshape(n, kv_heads, dim), heads // kv_heads, axis=1)
        scores = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(dim) + causal
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        x = x + product(np.einsum("hqk,khd->qhd", probs, v).reshape(n, heads * dim), p + "self_attn.o_proj.weight")
        h = norm(x, w[p + "post_attention_layernorm.weight"])
        gate, up = product(h, p + "mlp.gate_proj.weight"), product(h, p + "mlp.up_proj.weight")
        x = x + product(gate / (1 + np.exp(-gate)) * up, p + "mlp.down_proj.weight")
    return norm(x, w["model.norm.weight"]) @ w["lm_head.weight"].T


@pytest.fixture(scope="module")
def fp8_checkpoint(float_checkpoint, tmp_path_factory):
    """An fbgemm_fp8 checkpoint (per-channel e4m3 weights) and the float32 weights it stands for."""
    quantized = tmp_path_factory.mktemp("fbgemm_fp8")
    write_quantized(float_checkpoint, quantized, "fp8")
    return quantized, _dequantized(quantized)


@pytest.mark.parametrize("option", [None, True])
def test_fp8_activations_prefill_logits_match_a_float64_model_rounding_the_rows(fp8_checkpoint, option):
    """fbgemm_fp8 quantizes activations per row at run time, so the option defaults to on. The reference
    rounds the rows as the kernel does, from float64 rows rather than the model's float32 ones: the two
    differ by float32's rounding (~1e-7 relative), which moves a row element across an e4m3 rounding
    boundary (2^-4 relative apart) with a chance of ~1e-6, and the float32 sums of 64 or 96 products add
    ~1e-5; 1e-3 of the logits' scale covers both. The reference without rounding is off by the rows' e4m3
    error (~2^-5 relative on every element), well outside it."""
    directory, weights = fp8_checkpoint
    model = load(directory, device=TEST_DEVICE, dtype="float32", fp8_activations=option)
    assert model.model.fp8_activations
    logits = model.logits(LONG_PROMPT).numpy().astype(np.float64)
    expected = _reference_logits(weights, LONG_PROMPT, round_rows=True)
    scale = np.abs(expected).max()
    assert np.abs(logits - expected).max() <= 1e-3 * scale
    assert np.abs(_reference_logits(weights, LONG_PROMPT, round_rows=False) - expected).max() > 1e-2 * scale


def test_fp8_activations_round_prefill_rows_and_keep_decode_weight_only(fp8_checkpoint):
    directory, _ = fp8_checkpoint
    keys = {}
    for option in (True, False):
        model = load(directory, device=TEST_DEVICE, dtype="float32", fp8_activations=option)
        with census.shadow() as formed:
            model.generate(LONG_PROMPT, max_new_tokens=2, temperature=0)
        keys[option] = {key.split("|")[0] for key in formed}
    # the prefill's four decoder products on float8 rows; the one-row decode steps stream the weights
    assert {"fp8_gemm", "quantized_gemv"} <= keys[True] and "quantized_gemm" not in keys[True]
    assert "quantized_gemm" in keys[False] and "fp8_gemm" not in keys[False]


def test_fp8_activations_are_refused_by_name_where_they_cannot_run(float_checkpoint, tmp_path, monkeypatch):
    int8 = tmp_path / "int8"
    write_quantized(float_checkpoint, int8, "int8")
    with pytest.raises(ValueError, match=r"128 x 128 block\); model\.layers\.\d+\..*QuantizedWeight\(int8"):
        load(int8, device=TEST_DEVICE, fp8_activations=True)
    assert not load(int8, device=TEST_DEVICE).model.fp8_activations  # nbx int8 says nothing of activations
    with pytest.raises(ValueError, match="has float weights"):
        load(float_checkpoint, device=TEST_DEVICE, fp8_activations=True)
    assert load(float_checkpoint, device=TEST_DEVICE, quantize="fp8", fp8_activations=True).model.fp8_activations
    with pytest.raises(TypeError, match="fp8_activations must be True, False or None"):
        load(float_checkpoint, device=TEST_DEVICE, fp8_activations="yes")
    assert Q.fp8_matrix_units(load_facts("hopper")) and not Q.fp8_matrix_units(load_facts("ampere"))
    monkeypatch.setattr(Q, "fp8_matrix_units", lambda facts: False)
    fp8 = tmp_path / "fp8"
    write_quantized(float_checkpoint, fp8, "fp8")
    with pytest.raises(ValueError, match="fp8_activations needs float8 matrix units"):
        load(fp8, device=TEST_DEVICE, fp8_activations=True)
    # left to the checkpoint, a device without them keeps the weight-only products
    assert not load(fp8, device=TEST_DEVICE).model.fp8_activations


def test_nbx_generate_fp8_activations(fp8_checkpoint, float_checkpoint, capsys):
    from nbxtensor.cli import main
    directory, _ = fp8_checkpoint
    prompt = ",".join(map(str, LONG_PROMPT))
    common = ["--prompt", prompt, "--max-new-tokens", "1", "--device", TEST_DEVICE, "--dtype", "float32"]
    assert main(["generate", str(directory), *common, "--no-fp8-activations"]) == 0
    assert main(["generate", str(float_checkpoint), *common, "--fp8-activations"]) == 2
    assert "fp8_activations multiplies float8 rows by fp8 weights" in capsys.readouterr().err


@pytest.mark.parametrize("format, option", [("fp8", True), ("fp8", False), ("int8", None), ("int4", None)])
def test_census_of_a_quantized_checkpoint_equals_the_shadow_run(float_checkpoint, tmp_path, format, option):
    directory = tmp_path / format
    write_quantized(float_checkpoint, directory, format, group_size=32)
    counted = _census_and_shadow_run(directory, option)
    assert any(key.startswith("fp8_gemm|") for key in counted) == bool(option)
    # one-row decode steps fold their norms and activations into the quantized products
    assert any(key.startswith("quantized_gemv_rms_norm|") for key in counted)


def _census_and_shadow_run(directory, option=None):
    """The census of a checkpoint's prefill of LONG_PROMPT and one-row decode steps, checked equal to the keys a
    run forms."""
    model = load(directory, device=TEST_DEVICE, dtype="float32", fp8_activations=option)
    with census.shadow() as formed:
        model.generate(LONG_PROMPT, max_new_tokens=2, temperature=0)
    facts = backend_for(resolve(TEST_DEVICE)).facts
    projections = checkpoint_projections(str(directory), json.load(open(directory / "config.json")), "float32", facts,
                                         fp8_activations=option)
    assert projections.fp8_activations == model.model.fp8_activations
    config = DecoderConfig.from_hf(json.load(open(directory / "config.json")), str(directory))
    counted = engine_census(config, "float32", facts, prompts=[len(LONG_PROMPT)], batch_sizes=[1],
                            projections=projections)
    assert set(counted) == set(formed)
    return counted


def test_census_of_an_act_order_checkpoint_equals_the_shadow_run(tmp_path):
    """Act-order q, k, v (gate, up) weights stay apart: their norms form no key, their products the quantized
    GEMV's; the down product folds the activation."""
    counted = _census_and_shadow_run(_gptq_act_order(tmp_path)[0])
    assert not any(key.startswith("quantized_gemv_rms_norm|") for key in counted)
    assert any(key.startswith("quantized_gemv_act_and_mul|") and "|g_idx=1" in key for key in counted)


def test_cli_census_of_an_fp8_checkpoint_lists_fp8_gemm_keys(fp8_checkpoint, capsys):
    from nbxtensor.cli import main
    directory, _ = fp8_checkpoint
    common = ["census", str(directory), "--facts", "hopper", "--batch-sizes", "1", "--context", "40"]
    assert main(common) == 0
    assert "fp8_gemm|" in capsys.readouterr().out  # fbgemm_fp8 on a device with float8 matrix units: on
    assert main([*common, "--no-fp8-activations"]) == 0
    assert "fp8_gemm|" not in capsys.readouterr().out
    assert main(["census", str(directory), "--facts", "ampere", "--fp8-activations"]) == 2
    assert "float8 matrix units, which ampere devices lack" in capsys.readouterr().err
