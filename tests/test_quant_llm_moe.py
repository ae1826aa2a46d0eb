"""Quantized mixture-of-experts decoders (``test_quant_llm.py``'s pattern for the dense ones): tiny Mixtral and
Qwen2-MoE models made from transformers configs with seeded random weights, their experts (and attention and
shared expert) quantized, against the same model run in float32 with the weights the quantized ones stand for
(dequantized here with NumPy and saved as a float checkpoint).

int8 (written as ``nbx``, and rounded on load): greedy tokens equal the dequantized model's. AWQ int4, fbgemm
fp8 and GPTQ act-order int4: logits after every position of a prompt within 2e-5 of the dequantized model's
(logits of order 1; both runs multiply the same float32 weights, in sums of other orders)."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor import census as C
from nbxtensor.device import backend_for, resolve
from nbxtensor.io import load_file
from nbxtensor.llm import load
from nbxtensor.llm.census import checkpoint_projections, engine_census
from nbxtensor.llm.checkpoint import CheckpointError
from nbxtensor.llm.model import DecoderConfig
from nbxtensor.llm.quantized import QUANTIZABLE, write_quantized
from nbxtensor.quant import quantize_int8

from .conftest import TEST_DEVICE
from .test_quant import _pack_along_n, _pack_gptq_qweight, _reference_int4
from .test_quant_llm import _dequantized, _write

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

COMMON = dict(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=128, num_experts_per_tok=2)
FAMILIES = {"mixtral": ("MixtralConfig", "MixtralForCausalLM", dict(num_local_experts=4, intermediate_size=32)),
            # a shared expert, and a dense layer after the sparse one
            "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM",
                          dict(num_experts=4, moe_intermediate_size=32, shared_expert_intermediate_size=48,
                               mlp_only_layers=[1]))}
PROMPT = [5, 17, 3, 44, 9, 30, 61]
NEW_TOKENS = 5


def _float_checkpoint(tmp_path_factory, name: str):
    """The float checkpoint's directory of a model of family ``name`` whose weights are drawn with a standard
    deviation of 0.15 (norms about 1): its greedy tokens vary, with wide gaps between the top logits."""
    config_name, model_name, extra = FAMILIES[name]
    config = getattr(transformers, config_name)(**{**COMMON, **extra})
    torch.manual_seed(0)
    model = getattr(transformers, model_name)(config).eval()
    with torch.no_grad():
        for parameter_name, parameter in model.named_parameters():
            parameter.normal_(0.0, 0.1 if parameter.ndim == 1 else 0.15)
            if "norm" in parameter_name:
                parameter.add_(1.0)
    directory = tmp_path_factory.mktemp(name)
    model.save_pretrained(directory)
    return directory


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family(request, tmp_path_factory):
    """(name, the float checkpoint's directory) of each family."""
    return request.param, _float_checkpoint(tmp_path_factory, request.param)


# the tests below run one family each to keep the suite short: the int8 tokens and the act-order stack are the
# same for both (both families' quantized experts are compared by their logits above them), and the family with
# a shared expert and a dense layer forms every kind of key
@pytest.fixture(scope="module")
def mixtral(tmp_path_factory):
    return _float_checkpoint(tmp_path_factory, "mixtral")


@pytest.fixture(scope="module")
def qwen2_moe(tmp_path_factory):
    return _float_checkpoint(tmp_path_factory, "qwen2_moe")


def _config(directory) -> dict:
    config = json.load(open(os.path.join(directory, "config.json")))
    config.pop("quantization_config", None)
    return config


def _dequantized_checkpoint(quantized, directory):
    """The float32 checkpoint that quantized one stands for, in ``directory``."""
    return _write(directory, _dequantized(quantized), config=_config(quantized))


def _run(directory, **settings):
    return load(directory, device=TEST_DEVICE, dtype="float32", cache_tokens=128, **settings)


def _tokens(directory, quantized=False, replay=False, **settings):
    llm = _run(directory, replay=replay, **settings)
    sparse = llm.model.layers[0]
    assert isinstance(sparse.experts_gate_up, nbx.QuantizedWeight) == quantized
    assert isinstance(sparse.experts_down, nbx.QuantizedWeight) == quantized
    tokens = llm.generate(PROMPT, max_new_tokens=NEW_TOKENS, temperature=0).tokens
    if replay:  # the decode steps were captured and their first replays checked byte for byte
        replayer = llm.engine.replayer
        assert replayer._buckets and not replayer.refused and all(b.verified for b in replayer._buckets.values())
    return tokens


def test_int8_experts_generate_the_dequantized_models_tokens(mixtral, tmp_path):
    """Written as ``nbx`` int8 and rounded on load alike: the same weights, the same tokens; decode steps of
    quantized experts replay."""
    directory = mixtral
    quantized = tmp_path / "int8"
    write_quantized(directory, quantized, "int8")
    expected = _tokens(_dequantized_checkpoint(quantized, tmp_path / "dequantized"))
    assert len(set(expected)) > 1
    assert _tokens(quantized, True, replay=True) == expected
    assert _tokens(directory, True, quantize="int8") == expected
    # a checkpoint whose router is quantized too is refused by name
    tensors = {n: t.numpy() for n, t in load_file(os.path.join(quantized, "model.safetensors"), device="cpu").items()}
    router = "model.layers.0.block_sparse_moe.gate."
    q, scales = quantize_int8(tensors.pop(router + "weight"))
    tensors.update({router + "weight": q, router + "weight_scale": scales[:, None]})
    routed = _write(tmp_path / "router", tensors, {"quant_method": "nbx", "format": "int8"}, _config(quantized))
    with pytest.raises(CheckpointError, match="a quantized router is not supported"):
        _run(routed)


@pytest.mark.parametrize("format", ["int4", "fp8"])
def test_int4_and_fp8_experts_give_the_dequantized_models_logits(family, tmp_path, format):
    name, directory = family
    quantized = tmp_path / format
    write_quantized(directory, quantized, format, group_size=32)
    want = _run(_dequantized_checkpoint(quantized, tmp_path / "dequantized")).logits(PROMPT).numpy()
    llm = _run(quantized, fp8_activations=False)
    assert llm.model.layers[0].experts_gate_up.format == format
    np.testing.assert_allclose(llm.logits(PROMPT).numpy(), want, rtol=0, atol=2e-5)


def _gptq_act_order(directory, out) -> tuple:
    """A GPTQ act-order checkpoint in ``out``/gptq of the float checkpoint ``directory``'s shapes, and the
    float32 checkpoint it stands for: random 4-bit values, zero points and scales in groups of 32 inputs, read
    in a random order of groups, one order an expert's gate and up projections share (GPTQ orders the
    inputs of the one input they read alike)."""
    rng = np.random.default_rng(3)
    float_tensors = {n: t.numpy() for n, t in load_file(os.path.join(directory, "model.safetensors"),
                                                        device="cpu").items()}
    tensors, dequantized, orders = {}, {}, {}
    for name, a in float_tensors.items():
        if not QUANTIZABLE.fullmatch(name):
            tensors[name] = dequantized[name] = a
            continue
        prefix = name[:-len(".weight")]
        n, k = a.shape
        shared_input = prefix.rsplit(".", 1)[0] if prefix.endswith(("gate_proj", "up_proj", "w1", "w3")) else prefix
        order = orders.setdefault((shared_input, k), rng.permutation(np.arange(k) // 32).astype(np.int32))
        q = rng.integers(0, 16, (k, n)).astype(np.uint8)
        zeros = rng.integers(1, 16, (k // 32, n)).astype(np.uint8)
        scales = (rng.uniform(0.5, 1.5, (k // 32, n)) * 0.02).astype(np.float16)
        tensors.update({prefix + ".qweight": _pack_gptq_qweight(q), prefix + ".qzeros": _pack_along_n(zeros - 1, range(8)),
                        prefix + ".scales": scales, prefix + ".g_idx": order})
        dequantized[name] = _reference_int4(q, zeros, scales, order).astype(np.float32)
    config = _config(directory)
    gptq = _write(out / "gptq", tensors, {"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": True,
                                          "sym": False}, config)
    return gptq, _write(out / "dequantized", dequantized, config=config)


def test_act_order_experts_give_the_dequantized_models_logits(mixtral, tmp_path):
    gptq, dequantized = _gptq_act_order(mixtral, tmp_path)
    llm = _run(gptq)
    assert llm.model.layers[0].experts_gate_up.g_idx is not None
    want = _run(dequantized).logits(PROMPT).numpy()
    np.testing.assert_allclose(llm.logits(PROMPT).numpy(), want, rtol=0, atol=2e-5)
    # an expert whose gate and up projections order their inputs differently is refused by name
    tensors = {n: t.numpy() for n, t in load_file(os.path.join(gptq, "model.safetensors"), device="cpu").items()}
    g_idx = tensors["model.layers.0.block_sparse_moe.experts.1.w1.g_idx"]
    tensors["model.layers.0.block_sparse_moe.experts.1.w1.g_idx"] = g_idx[::-1].copy()
    broken = _write(tmp_path / "broken", tensors, json.load(open(os.path.join(gptq, "config.json")))["quantization_config"],
                    _config(gptq))
    with pytest.raises(CheckpointError, match="must share one g_idx"):
        _run(broken)


def test_the_census_names_the_keys_a_quantized_mixture_of_experts_run_forms(qwen2_moe):
    """Prefill in chunks and two-row decode steps of a model quantized on load to int4: the quantized experts'
    grouped keys, the float router's and the quantized shared expert's beside its float gate's."""
    directory = qwen2_moe
    llm = load(directory, device=TEST_DEVICE, dtype="float32", cache_tokens=128, block_size=4, prefill_chunk=4,
               quantize="int4")
    with C.shadow() as formed:
        for prompt in (PROMPT, PROMPT[:3]):
            llm.engine.add(prompt, nbx.llm.SamplingParams(max_new_tokens=3))
        while llm.engine.busy:
            llm.engine.step()
    hf_config = json.loads((directory / "config.json").read_text())
    config = DecoderConfig.from_hf(hf_config, str(directory))
    facts = backend_for(resolve(TEST_DEVICE)).facts
    projections = checkpoint_projections(str(directory), hf_config, "float32", facts, quantize="int4")
    keys = engine_census(config, "float32", facts, prompts=[len(PROMPT), 3], batch_sizes=[2], prefill_chunk=4,
                         projections=projections)
    assert set(keys) == set(formed)
    assert any(key.startswith("grouped_quantized_gemm|") and key.endswith("|format=int4|g_idx=0") for key in keys)
