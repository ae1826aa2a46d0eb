"""Mixture-of-experts decoders in ``nbxtensor.llm`` against transformers: Mixtral, Qwen2-MoE (a shared expert,
a dense layer after a sparse one), Qwen3-MoE (a dense layer before a sparse one) and OLMoE (q/k norms over
every head's width, clipped q, k and v). Each family's float32 logits after every position of a prompt equal
transformers' forward's, its greedy tokens transformers' generate's, and its decode steps replay to the bits
of the op-by-op step (the replayer checks each bucket's first replay byte for byte)."""
from __future__ import annotations

import json

import pytest

from nbxtensor import census as C
from nbxtensor import llm
from nbxtensor.device import backend_for, resolve
from nbxtensor.device.facts import load as load_facts
from nbxtensor.launch import capture
from nbxtensor.llm.census import checkpoint_census, engine_census
from nbxtensor.llm.model import DecoderConfig

from .conftest import TEST_DEVICE, to_nbx
from .test_llm import PROMPTS, _checkpoint, _matches_transformers, _reference

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

EXPERTS = dict(num_experts_per_tok=2)
FAMILIES = {
    "mixtral": ("MixtralConfig", "MixtralForCausalLM", dict(EXPERTS, num_local_experts=4, intermediate_size=32)),
    "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM",
                  dict(EXPERTS, num_experts=4, moe_intermediate_size=32, shared_expert_intermediate_size=48,
                       mlp_only_layers=[1])),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                  dict(EXPERTS, num_experts=4, moe_intermediate_size=32, head_dim=32, norm_topk_prob=True,
                       decoder_sparse_step=2)),
    # a bound that clips: the normed queries and keys are of order 1
    "olmoe": ("OlmoeConfig", "OlmoeForCausalLM", dict(EXPERTS, num_experts=4, intermediate_size=32, clip_qkv=0.5)),
}
SPARSE_LAYERS = {"mixtral": 2, "qwen2_moe": 1, "qwen3_moe": 1, "olmoe": 2}


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_a_mixture_of_experts_family_matches_transformers(tmp_path_factory, name):
    # experts of 32 to 96 inputs and softmax routing weights: logits agree as the dense families' do
    ours = _matches_transformers(*_checkpoint(tmp_path_factory, name, FAMILIES), cache_tokens=256)
    replayer = ours.engine.replayer
    assert replayer._buckets and not replayer.refused and all(b.verified for b in replayer._buckets.values())
    # a one-row step: the dense layers fold their norms and activation, the sparse ones run two grouped products
    model_ = ours.model
    cache = model_.new_cache(64)
    model_.prefill(cache, 0, PROMPTS[1])
    inputs = {key: to_nbx(array) for key, array in model_.decode_inputs(cache, [0], [7]).items()}
    model_.decode_from(cache, inputs)
    with capture() as recorded:
        model_.decode_from(cache, inputs)
    kernels = [launch[0].fn.__name__ for launch in recorded.launches]
    assert kernels.count("grouped_gemm") == 2 * SPARSE_LAYERS[name]
    # each qkv product and the head behind their norms, a dense layer's gate_up and down too
    assert kernels.count("gemv_prologue") == 3 + 2 * (2 - SPARSE_LAYERS[name])


def test_a_batch_decodes_the_tokens_each_prompt_gets_alone(tmp_path_factory):
    """Three prompts of different lengths decode together (steps of three rows, none folded), the dense
    layer's and the sparse one's rows together."""
    model, directory = _checkpoint(tmp_path_factory, "qwen2_moe", FAMILIES)
    ours = llm.load(directory, device=TEST_DEVICE, cache_tokens=256, block_size=4)
    assert [g.tokens for g in ours.generate(PROMPTS, max_new_tokens=6)] == [_reference(model, p, 6) for p in PROMPTS]


def test_the_census_names_the_keys_a_mixture_of_experts_run_forms(tmp_path_factory):
    """Prefill in chunks and two-row decode steps: the keys of the router's, the experts' grouped and the
    shared expert's products, as a real run forms them on the test device; on Hopper's facts too, the float32
    grouped products on bfloat16 parts."""
    _, directory = _checkpoint(tmp_path_factory, "qwen2_moe", FAMILIES)
    ours = llm.load(directory, device=TEST_DEVICE, cache_tokens=256, block_size=4, prefill_chunk=4)
    with C.shadow() as formed:
        for prompt in PROMPTS[:2]:
            ours.engine.add(prompt, llm.SamplingParams(max_new_tokens=3))
        while ours.engine.busy:
            ours.engine.step()
    config = DecoderConfig.from_hf(json.loads((directory / "config.json").read_text()), str(directory))
    keys = engine_census(config, config.dtype, backend_for(resolve(TEST_DEVICE)).facts, prompts=[len(p) for p in PROMPTS[:2]],
                         batch_sizes=[2], prefill_chunk=4)
    assert set(keys) == set(formed) and any(key.startswith("grouped_gemm|") for key in keys)
    hopper, _ = checkpoint_census(directory, load_facts("hopper"), batch_sizes=[1], context=16)
    grouped = [key for key in hopper if key.startswith("grouped_gemm|")]
    assert grouped and all(key.endswith("|bf16_parts=1") for key in grouped)


def test_unsupported_mixture_settings_are_refused_by_name(tmp_path_factory, tmp_path):
    _, directory = _checkpoint(tmp_path_factory, "mixtral", FAMILIES)
    config = json.loads((directory / "config.json").read_text())
    (tmp_path / "model.safetensors").symlink_to(directory / "model.safetensors")
    for change, message in [({"scoring_func": "sigmoid"}, "scoring_func = 'sigmoid' is not supported"),
                            ({"num_experts_per_tok": 5}, "num_experts_per_tok 5 is more than the 4 experts"),
                            ({"router_jitter_noise": 0.1}, None)]:
        (tmp_path / "config.json").write_text(json.dumps({**config, **change}))
        if message is None:  # jitter acts in training only
            llm.load(tmp_path, device=TEST_DEVICE, replay=False)
            continue
        with pytest.raises(llm.CheckpointError, match=message):
            llm.load(tmp_path, device=TEST_DEVICE)
