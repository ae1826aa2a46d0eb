"""float8 checkpoints as their formats leave activations: fbgemm_fp8's ``activation_scale_ub``, compressed-tensors'
float8 schemes (FP8-dynamic, static input scales, and those refused by name), and 128 x 128 block-scaled weights
(DeepSeek-V3's ``fp8``, compressed-tensors' block strategy) multiplied by rows rounded in 1 x 128 blocks.

The checkpoints are written here from random float weights; the reference is ``test_quant_llm``'s float64 Llama
with the weights they stand for (dequantized here with NumPy) and each projection's rows rounded to e4m3 as the
format says (``test_quant._e4m3_rows``). Tolerance: 1e-3 of the logits' scale, for the reasons
``test_quant_llm.test_fp8_activations_prefill_logits_match_a_float64_model_rounding_the_rows`` gives (float32
rows against float64 ones cross an e4m3 rounding boundary with a chance of ~1e-6 an element; float32 sums of at
most 288 products add ~1e-5), and a reference rounding the rows otherwise (not at all, without the bound, per
whole row) lies well outside it."""
import json

import ml_dtypes
import numpy as np
import pytest

from nbxtensor import census
from nbxtensor.device import backend_for, resolve
from nbxtensor.llm import load
from nbxtensor.llm.census import checkpoint_projections, engine_census
from nbxtensor.llm.checkpoint import CheckpointError
from nbxtensor.llm.model import DecoderConfig
from nbxtensor.llm.quantized import QUANTIZABLE

from .conftest import TEST_DEVICE
from .test_quant import _e4m3_rows
from .test_quant_llm import CONFIG, LONG_PROMPT, _reference_logits, _tokens, _write

# every K (192, 288) and N (96, 192, 288) of the decoder's products leaves a ragged 128-block
BLOCK_CONFIG = dict(CONFIG, hidden_size=192, intermediate_size=288)
FP8_DYNAMIC = {"quant_method": "compressed-tensors", "format": "float-quantized", "quantization_status": "compressed",
               "ignore": ["lm_head"], "kv_cache_scheme": None,
               "config_groups": {"group_0": {
                   "targets": ["Linear"], "output_activations": None,
                   "weights": {"num_bits": 8, "type": "float", "symmetric": True, "dynamic": False,
                               "strategy": "channel", "group_size": None, "block_structure": None},
                   "input_activations": {"num_bits": 8, "type": "float", "symmetric": True, "dynamic": True,
                                         "strategy": "token", "group_size": None, "block_structure": None}}}}


def _scheme(weights=None, activations="keep", **spec):
    """FP8_DYNAMIC with its weights' and input activations' settings updated (activations None: weight-only)."""
    group = json.loads(json.dumps(FP8_DYNAMIC["config_groups"]["group_0"]))
    group["weights"].update(weights or {})
    if activations is None:
        group["input_activations"] = None
    elif activations != "keep":
        group["input_activations"].update(activations)
    return dict(FP8_DYNAMIC, config_groups={"group_0": group}, **spec)


def _random_weights(rng, config) -> dict:
    """Float32 weights of ``config``'s Llama, each projection's drawn with a standard deviation of 1.2 / sqrt(its
    inputs) (0.15 at 64 inputs, as ``test_quant_llm``'s)."""
    h, inner, vocab = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    kv = config["num_key_value_heads"] * h // config["num_attention_heads"]
    shapes = {"self_attn.q_proj": (h, h), "self_attn.k_proj": (kv, h), "self_attn.v_proj": (kv, h),
              "self_attn.o_proj": (h, h), "mlp.gate_proj": (inner, h), "mlp.up_proj": (inner, h),
              "mlp.down_proj": (h, inner)}
    tensors = {"model.embed_tokens.weight": rng.standard_normal((vocab, h)),
               "lm_head.weight": rng.standard_normal((vocab, h)) * 1.2 / np.sqrt(h),
               "model.norm.weight": 1 + 0.1 * rng.standard_normal(h)}
    for layer in range(config["num_hidden_layers"]):
        prefix = f"model.layers.{layer}."
        tensors[prefix + "input_layernorm.weight"] = 1 + 0.1 * rng.standard_normal(h)
        tensors[prefix + "post_attention_layernorm.weight"] = 1 + 0.1 * rng.standard_normal(h)
        for name, shape in shapes.items():
            tensors[f"{prefix}{name}.weight"] = rng.standard_normal(shape) * 1.2 / np.sqrt(shape[1])
    return {name: a.astype(np.float32) for name, a in tensors.items()}


def _e4m3(w, scales: str):
    """(N, K) ``w`` as e4m3 values and float32 scales per ``scales``: tensor ((1,)), channel ((N, 1)) or 128 x 128
    block ((ceil(N / 128), ceil(K / 128))), each its part's largest magnitude over 448; and the weight they stand
    for, in float64."""
    n, k = w.shape
    part_n, part_k = {"tensor": (n, k), "channel": (1, k), "block": (128, 128)}[scales]
    rows, cols = -(-n // part_n), -(-k // part_k)
    padded = np.zeros((rows * part_n, cols * part_k))
    padded[:n, :k] = np.abs(w)
    grid = (padded.reshape(rows, part_n, cols, part_k).max(axis=(1, 3)) / 448).astype(np.float32)
    expanded = np.repeat(np.repeat(grid.astype(np.float64), part_n, 0), part_k, 1)[:n, :k]
    q = (w / expanded).astype(ml_dtypes.float8_e4m3fn)
    return q, grid.reshape(1) if scales == "tensor" else grid, q.astype(np.float64) * expanded


def _fp8_checkpoint(directory, quantization, scales: str, scale_name="weight_scale", config=CONFIG, seed=11,
                    input_scale=None):
    """A checkpoint of ``config``'s Llama whose decoder projections are e4m3 with ``scale_name`` per ``scales``
    (tensor, channel or block), and ``input_scale`` each where given; and the float32 weights it stands for."""
    tensors, dequantized = {}, {}
    for name, w in _random_weights(np.random.default_rng(seed), config).items():
        if not QUANTIZABLE.fullmatch(name):
            tensors[name] = dequantized[name] = w
            continue
        if input_scale is not None:
            tensors[name[:-len("weight")] + "input_scale"] = np.array([input_scale], np.float32)
        q, tensors[name[:-len("weight")] + scale_name], w64 = _e4m3(w, scales)
        tensors[name], dequantized[name] = q, w64.astype(np.float32)
    return _write(directory, tensors, quantization, config), dequantized


def _assert_logits(model, weights, rounding, wrong_rounding, config=CONFIG):
    logits = model.logits(LONG_PROMPT).numpy().astype(np.float64)
    expected = _reference_logits(weights, LONG_PROMPT, rounding, config)
    scale = np.abs(expected).max()
    assert np.abs(logits - expected).max() <= 1e-3 * scale
    assert np.abs(_reference_logits(weights, LONG_PROMPT, wrong_rounding, config) - expected).max() > 1e-2 * scale


def _census_equals_the_shadow_run(model, directory, fp8_activations, config=CONFIG) -> set:
    with census.shadow() as formed:
        model.generate(LONG_PROMPT, max_new_tokens=2, temperature=0)
    facts = backend_for(resolve(TEST_DEVICE)).facts
    projections = checkpoint_projections(str(directory), config | {"quantization_config": json.load(
        open(directory / "config.json"))["quantization_config"]}, "float32", facts, fp8_activations=fp8_activations)
    assert projections.fp8_activations == model.model.fp8_activations
    counted = engine_census(DecoderConfig.from_hf(config, str(directory)), "float32", facts,
                            prompts=[len(LONG_PROMPT)], batch_sizes=[1], projections=projections)
    assert set(counted) == set(formed)
    return {key.split("|")[0] for key in formed}


# ---- fbgemm_fp8 ------------------------------------------------------------------------------------------
def test_fbgemm_activation_scale_ub_clamps_the_rows_scales(tmp_path):
    """A bound under most rows' largest magnitudes (the normed rows reach ~3): their scales are bound / 448 and
    their larger values saturate at 448 scales, as fbgemm's quantize_fp8_per_row rounds them."""
    directory, weights = _fp8_checkpoint(tmp_path / "fbgemm", {"quant_method": "fbgemm_fp8",
                                                               "activation_scale_ub": 1.5}, "channel")
    model = load(directory, device=TEST_DEVICE, dtype="float32")
    assert model.model.fp8_activations and model.model.layers[0].down.activation_scale_ub == 1.5
    _assert_logits(model, weights, lambda x: _e4m3_rows(x, scale_ub=1.5), True)


def test_fbgemm_activation_scale_ub_default_and_refusals(tmp_path):
    directory, _ = _fp8_checkpoint(tmp_path / "default", {"quant_method": "fbgemm_fp8"}, "channel")
    # transformers' FbgemmFp8Config default
    assert load(directory, device=TEST_DEVICE).model.layers[1].qkv.activation_scale_ub == 1200.0
    for bound in (0, -2.0, "1200", None, float("inf")):
        config = json.load(open(directory / "config.json"))
        config["quantization_config"]["activation_scale_ub"] = bound
        json.dump(config, open(directory / "config.json", "w"))
        with pytest.raises(CheckpointError, match="activation_scale_ub must be a positive finite number"):
            load(directory, device=TEST_DEVICE)


# ---- compressed-tensors ----------------------------------------------------------------------------------
@pytest.mark.parametrize("scales", ["channel", "tensor"])
def test_compressed_tensors_fp8_dynamic(tmp_path, scales):
    """FP8-dynamic: weight-only by default (the tokens of the model with the dequantized weights, which the
    weight-only product multiplies by exactly), per-token float8 rows on the float8 units when asked for."""
    spec = _scheme({"strategy": scales})
    directory, weights = _fp8_checkpoint(tmp_path / "dynamic", spec, scales)
    assert _tokens(directory, True) == _tokens(_write(tmp_path / "float", weights))
    assert not load(directory, device=TEST_DEVICE).model.fp8_activations
    model = load(directory, device=TEST_DEVICE, dtype="float32", fp8_activations=True)
    _assert_logits(model, weights, True, False)
    kernels = _census_equals_the_shadow_run(model, directory, True)
    assert "fp8_gemm" in kernels and "quantized_gemm" not in kernels


STATIC_SCALE = 2.0 / 448  # under most rows' largest magnitudes (the normed rows reach ~3): those saturate


def _static_rows(x):
    """Rows rounded to e4m3 by the one fixed scale: x / scale in float32, saturated at 448, times the scale."""
    scale = np.float32(STATIC_SCALE)
    rounded = np.clip(x.astype(np.float32) / scale, -448, 448).astype(ml_dtypes.float8_e4m3fn)
    return rounded.astype(np.float64) * np.float64(scale)


def test_compressed_tensors_fp8_static_input_scales(tmp_path):
    """FP8 with static per-tensor input scales (an ``input_scale`` a layer): weight-only by default; with
    fp8_activations every row is divided by its layer's scale (values past 448 saturate), not by its own."""
    spec = _scheme({"strategy": "tensor"}, {"strategy": "tensor", "dynamic": False})
    directory, weights = _fp8_checkpoint(tmp_path / "static", spec, "tensor", input_scale=STATIC_SCALE)
    assert _tokens(directory, True) == _tokens(_write(tmp_path / "float", weights))
    model = load(directory, device=TEST_DEVICE, dtype="float32", fp8_activations=True)
    assert model.model.layers[0].down.activation_scale == np.float32(STATIC_SCALE)
    _assert_logits(model, weights, _static_rows, True)
    kernels = _census_equals_the_shadow_run(model, directory, True)
    assert "fp8_gemm" in kernels and "quantized_gemm" not in kernels
    # a static scheme's layer without its input_scale, and a dynamic one's with one
    without, _ = _fp8_checkpoint(tmp_path / "without", spec, "tensor")
    with pytest.raises(CheckpointError, match="static input_activations give every quantized layer one"):
        load(without, device=TEST_DEVICE)
    stray, _ = _fp8_checkpoint(tmp_path / "stray", FP8_DYNAMIC, "channel", input_scale=STATIC_SCALE)
    with pytest.raises(CheckpointError, match="input_activations are not static"):
        load(stray, device=TEST_DEVICE)


def test_compressed_tensors_weight_only_fp8(tmp_path):
    directory, weights = _fp8_checkpoint(tmp_path / "w8a16", _scheme(activations=None), "channel")
    assert _tokens(directory, True) == _tokens(_write(tmp_path / "float", weights))


@pytest.mark.parametrize("spec, message", [
    (_scheme(activations={"strategy": "token", "dynamic": False}), "static input_activations with strategy 'token'"),
    (_scheme(activations={"symmetric": False}), "input_activations .* are not supported"),
    (_scheme(format="pack-quantized"), "format 'pack-quantized' is not supported"),
    (_scheme(kv_cache_scheme={"num_bits": 8, "type": "float", "strategy": "tensor"}), "kv_cache_scheme"),
    (_scheme({"type": "int"}), "weights .* are not supported"),
    (_scheme({"strategy": "group", "group_size": 128}), "weights .* are not supported"),
    (_scheme({"strategy": "block", "block_structure": [64, 64]}), "weights .* are not supported"),
    (_scheme({"strategy": "block", "block_structure": [128, 128]}), "strategy 'token' against weights per block"),
    (_scheme(activations={"strategy": "tensor"}), "strategy 'tensor' against weights per channel"),
    (dict(FP8_DYNAMIC, config_groups={"group_0": FP8_DYNAMIC["config_groups"]["group_0"],
                                      "group_1": _scheme({"strategy": "tensor"})["config_groups"]["group_0"]}),
     "different schemes")])
def test_compressed_tensors_schemes_not_read_are_refused_by_name(tmp_path, spec, message):
    directory, _ = _fp8_checkpoint(tmp_path / "refused", spec, "channel")
    with pytest.raises(CheckpointError, match=message):
        load(directory, device=TEST_DEVICE)


# ---- 128 x 128 blocks --------------------------------------------------------------------------------------
BLOCK_SCHEMES = {
    "fp8": ({"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3", "weight_block_size": [128, 128]},
            "weight_scale_inv"),
    "compressed-tensors": (_scheme({"strategy": "block", "block_structure": [128, 128]},
                                   {"strategy": "group", "group_size": 128}), "weight_scale")}


@pytest.mark.parametrize("method", list(BLOCK_SCHEMES))
def test_block_scaled_fp8_with_float8_rows_in_blocks(tmp_path, method):
    """DeepSeek-V3's scheme: weight-only by default, as before; with fp8_activations the prefill's rows are
    rounded in 1 x 128 blocks and each K block's product scaled inside ``fp8_block_gemm``. A reference rounding
    whole rows is off: a row's blocks differ in range."""
    spec, scale_name = BLOCK_SCHEMES[method]
    directory, weights = _fp8_checkpoint(tmp_path / "block", spec, "block", scale_name, BLOCK_CONFIG)
    assert not load(directory, device=TEST_DEVICE).model.fp8_activations
    model = load(directory, device=TEST_DEVICE, dtype="float32", fp8_activations=True)
    _assert_logits(model, weights, lambda x: _e4m3_rows(x, block=128), True, BLOCK_CONFIG)
    kernels = _census_equals_the_shadow_run(model, directory, True, BLOCK_CONFIG)
    assert {"fp8_block_gemm", "quantized_gemv"} <= kernels and "quantized_gemm" not in kernels
