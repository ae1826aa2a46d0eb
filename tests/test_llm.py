"""Text generation from Hugging Face checkpoints (nbxtensor.llm), against transformers' own generate.

Tiny random models are saved with save_pretrained and read back by nbxtensor with no torch on its side.
Greedy tokens must be identical to transformers' in fp32: both compute the same fp32 products with
different summation orders (differences near 1e-6 relative), far below the gaps between a random model's
top logits, so a flipped token would be a real defect."""
from __future__ import annotations

import json
import math
import textwrap
import os

import numpy as np
import pytest

from nbxtensor import llm
from nbxtensor.llm.cache import CacheFull, PagedKVCache
from nbxtensor.device.facts import load as load_facts
from nbxtensor.io.safetensors import safe_open
from nbxtensor.llm.census import checkpoint_census
from nbxtensor.llm.chat import ChatTemplate
from nbxtensor.llm.checkpoint import CheckpointError
from nbxtensor.llm.quantized import write_quantized
from nbxtensor.quant import QuantizedWeight
from nbxtensor.llm.model import rope_tables, DecoderConfig

from .conftest import TEST_DEVICE, to_nbx

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

COMMON = dict(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=128, eos_token_id=None, bos_token_id=None,
              pad_token_id=None)
FAMILIES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", {}),
    "llama3.1-rope": ("LlamaConfig", "LlamaForCausalLM",
                      {"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                        "high_freq_factor": 4.0, "original_max_position_embeddings": 16}}),
    "llama-mha-tied": ("LlamaConfig", "LlamaForCausalLM", {"num_key_value_heads": 4, "tie_word_embeddings": True}),
    # a window of 8: prompts and their 16 new tokens run far past it
    "mistral": ("MistralConfig", "MistralForCausalLM", {"sliding_window": 8}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {}),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {"head_dim": 32}),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", {}),
    "phi3-partial-rotary": ("Phi3Config", "Phi3ForCausalLM", {"partial_rotary_factor": 0.5}),
    # LongRoPE past an original length of 16: every prompt's 16 new tokens cross it, where transformers runs
    # the sequence again whole with the long factors
    "phi3-longrope": ("Phi3Config", "Phi3ForCausalLM", {
        "original_max_position_embeddings": 16,
        "rope_scaling": {"type": "longrope", "short_factor": [1.0 + 0.1 * i for i in range(8)],
                         "long_factor": [1.5 + 0.5 * i for i in range(8)]}}),

    "gemma": ("GemmaConfig", "GemmaForCausalLM", {"head_dim": 16}),
    # caps small enough to bend these scores (a cap of 50 barely touches a random model's), a scalar other
    # than the head dim, layer 0 sliding over 8 keys and layer 1 full
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", {"head_dim": 16, "query_pre_attn_scalar": 24,
                                                     "sliding_window": 8, "attn_logit_softcapping": 0.5,
                                                     "final_logit_softcapping": 2.0}),
    # q and k normed head by head by (1 + weight); layer 0 sliding over 8 keys with its own rope base, layer 1
    # full with linearly scaled rope
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM", {
        "head_dim": 16, "query_pre_attn_scalar": 24, "sliding_window": 8,
        "layer_types": ["sliding_attention", "full_attention"],
        "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
                            "full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}}}),
}
# families whose differences from the ones above change no step of the engine: their logits at every position
# and a short greedy run are checked (``test_a_variant_family_matches_transformers``)
VARIANTS = {
    # the second layer (every 2nd) attends with unrotated queries and keys
    "smollm3": ("SmolLM3Config", "SmolLM3ForCausalLM", {"no_rope_layer_interval": 2}),
    # embeddings, branches, attention scores and logits each scaled by its multiplier
    "granite": ("GraniteConfig", "GraniteForCausalLM", {"embedding_multiplier": 3.0, "residual_multiplier": 0.5,
                                                       "attention_multiplier": 0.2, "logits_scaling": 2.5}),
    # norms after attention and after the MLP only, q and k normed over every head's width
    "olmo2": ("Olmo2Config", "Olmo2ForCausalLM", {}),
    # LayerNorms without weights, q, k and v clipped (a bound of the order of the projections)
    "olmo": ("OlmoConfig", "OlmoForCausalLM", {"clip_qkv": 0.5}),
    # rotary pairs of neighbouring dims over half of each head, q, k and v biases, one gate_up weight; GLM-4 norms
    # after attention and around the MLP too
    "glm": ("GlmConfig", "GlmForCausalLM", {"head_dim": 16}),
    "glm4": ("Glm4Config", "Glm4ForCausalLM", {"head_dim": 16}),
    # layer 0 slides over 8 keys, layer 1 attends to all with its own linear rope scaling
    "olmo3": ("Olmo3Config", "Olmo3ForCausalLM", {"sliding_window": 8, "layer_types": ["sliding_attention",
                                                                                      "full_attention"],
                                                  "rope_parameters": {"sliding_attention": {"rope_type": "default"},
                                                                      "full_attention": {"rope_type": "linear",
                                                                                         "factor": 2.0}}}),
    "ministral": ("MinistralConfig", "MinistralForCausalLM", {"sliding_window": 8, "head_dim": 16}),
    # post-norms, q and k normed head by head; layer 0 slides over 8 keys with rope, layer 1 attends to all without
    "exaone4": ("Exaone4Config", "Exaone4ForCausalLM", {"sliding_window": 8, "head_dim": 16,
                                                        "layer_types": ["sliding_attention", "full_attention"]}),
    # rotary pairs of neighbouring dims with q, k, v biases (Helium) or biases everywhere (ERNIE 4.5)
    "helium": ("HeliumConfig", "HeliumForCausalLM", {"head_dim": 16, "attention_bias": True, "mlp_bias": True}),
    "ernie4_5": ("Ernie4_5Config", "Ernie4_5ForCausalLM", {"head_dim": 16, "use_bias": True}),
    # a plain squared-relu MLP with biases; biases on q, k, v, o and the gated MLP
    "arcee": ("ArceeConfig", "ArceeForCausalLM", {"mlp_bias": True}),
    "seed_oss": ("SeedOssConfig", "SeedOssForCausalLM", {"head_dim": 16, "attention_out_bias": True,
                                                         "mlp_bias": True}),
    # biases on every product (Llama's attention_bias and mlp_bias): folded one-row steps add them too
    "llama-biases": ("LlamaConfig", "LlamaForCausalLM", {"attention_bias": True, "mlp_bias": True}),
    "qwen2-yarn": ("Qwen2Config", "Qwen2ForCausalLM", {
        "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32}}),
}
# LayerNorm families, each named its own way (read under Llama's names): GPT-2 (learned positions, Conv1D weights
# stored (in, out), a fused qkv), GPT-NeoX (q, k, v rows interleaved head by head; attention and MLP in parallel,
# each through its norm; a quarter of each head rotated), Phi (parallel through one norm, biases everywhere, the
# head's too), StableLM (a gated MLP after LayerNorm; sequential, then parallel), Starcoder2 (a plain gelu MLP, a
# window), OPT (learned positions two rows on, relu), GPT-J, Cohere and Falcon. Configs without grouped heads name
# every head a kv head
LAYER_NORM_FAMILIES = {
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", {"n_inner": 96, "num_key_value_heads": 4}),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", {"num_key_value_heads": 4}),
    "gpt_neox-sequential": ("GPTNeoXConfig", "GPTNeoXForCausalLM", {"num_key_value_heads": 4,
                                                                    "use_parallel_residual": False}),
    "phi": ("PhiConfig", "PhiForCausalLM", {}),
    "stablelm": ("StableLmConfig", "StableLmForCausalLM", {"use_qkv_bias": True}),
    "stablelm-parallel": ("StableLmConfig", "StableLmForCausalLM", {"use_parallel_residual": True}),
    # q and k LayerNormed head by head: a norm for every head with a bias (Phi), a norm a head (StableLM, Cohere)
    "phi-qk-norm": ("PhiConfig", "PhiForCausalLM", {"qk_layernorm": True}),
    "stablelm-qk-norm": ("StableLmConfig", "StableLmForCausalLM", {"qk_layernorm": True}),
    "cohere-qk-norm": ("CohereConfig", "CohereForCausalLM", {"use_qk_norm": True}),
    "starcoder2": ("Starcoder2Config", "Starcoder2ForCausalLM", {"sliding_window": 8}),
    # one key and value head (StarCoder, SantaCoder), then a q, k and v a head with unscaled scores
    "gpt_bigcode": ("GPTBigCodeConfig", "GPTBigCodeForCausalLM", {"n_inner": 96}),
    "gpt_bigcode-mha": ("GPTBigCodeConfig", "GPTBigCodeForCausalLM", {"n_inner": 96, "multi_query": False,
                                                                      "scale_attn_weights": False}),
    "opt": ("OPTConfig", "OPTForCausalLM", {"ffn_dim": 96, "word_embed_proj_dim": 64, "num_key_value_heads": 4}),
    # LayerNorms scaling by 1 + weight, a squared-relu MLP with biases
    "nemotron": ("NemotronConfig", "NemotronForCausalLM", {"mlp_bias": True, "head_dim": 16}),
    # rotary pairs of neighbouring dims (read with each head's q and k rows reordered): GPT-J rotating 8 of 16
    # dims, Cohere every dim, with its LayerNorm without bias and a logit scale that bends the logits
    "gptj": ("GPTJConfig", "GPTJForCausalLM", {"rotary_dim": 8, "n_inner": 96, "num_key_value_heads": 4}),
    "cohere": ("CohereConfig", "CohereForCausalLM", {"logit_scale": 0.5}),
    # Cohere 2: layer 0 slides over 8 keys with rope, layer 1 attends to all without
    "cohere2": ("Cohere2Config", "Cohere2ForCausalLM", {"logit_scale": 0.5, "sliding_window": 8,
                                                       "layer_types": ["sliding_attention", "full_attention"]}),
    # Falcon's three layouts of fused qkv rows: one key and value head (7B), kv groups with two norms in
    # parallel (40B, 180B), and a q, k and v a head, sequential, with biases
    "falcon": ("FalconConfig", "FalconForCausalLM", {"ffn_hidden_size": 96}),
    "falcon-grouped": ("FalconConfig", "FalconForCausalLM", {"ffn_hidden_size": 96, "new_decoder_architecture": True,
                                                             "num_kv_heads": 2}),
    "falcon-sequential": ("FalconConfig", "FalconForCausalLM", {"ffn_hidden_size": 96, "multi_query": False,
                                                                "parallel_attn": False, "bias": True}),
}
PROMPTS = [[5, 17, 3, 44, 9], [8, 2, 60], [1, 90, 33, 33, 12, 70, 4, 21]]


def _checkpoint(tmp_path_factory, family: str, families: dict = FAMILIES, **overrides):
    """A tiny model of ``family`` (one of ``families``: its config class, model class and settings) with
    seeded random weights, saved: (the transformers model, its directory)."""
    config_name, model_name, extra = families[family]
    config = getattr(transformers, config_name)(**{**COMMON, **extra, **overrides})
    # the eager attention is transformers' reference: its sdpa path of some versions drops Gemma 2's soft
    # cap (the reference then parts from ours at the first token on the GPU machine's transformers 5.17)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = getattr(transformers, model_name)(config).eval()
    with torch.no_grad():  # every weight random, biases and norm weights too, so each one is exercised
        for name, parameter in model.named_parameters():
            parameter.normal_(0.0, 0.3 if parameter.ndim == 1 else 0.05)
            if "norm" in name:
                parameter.add_(1.0)
    directory = tmp_path_factory.mktemp(family)
    model.save_pretrained(directory)
    return model, directory


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family(request, tmp_path_factory):
    return request.param, *_checkpoint(tmp_path_factory, request.param)


def _reference(model, prompt, new_tokens):
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), max_new_tokens=new_tokens, do_sample=False,
                             min_new_tokens=new_tokens)
    return out[0, len(prompt):].tolist()


def test_greedy_tokens_equal_transformers_alone_and_batched(family):
    name, model, directory = family
    ours = llm.load(directory, device=TEST_DEVICE)
    assert ours.model.config.architecture == model.config.architectures[0]
    expected = [_reference(model, p, 16) for p in PROMPTS]
    alone = ours.generate(PROMPTS[0], max_new_tokens=16)
    assert alone.tokens == expected[0] and alone.finish_reason == "length"
    # prompts of different lengths in one batch: no padding exists to change a sequence's tokens
    batched = ours.generate(PROMPTS, max_new_tokens=16)
    assert [g.tokens for g in batched] == expected
    assert ours.engine.cache.free_tokens == ours.engine.cache.capacity_tokens  # every page came back
    replayer = ours.engine.replayer
    verified = [b.verified for b in replayer._buckets.values()]
    # decode replayed; a LongRoPE run's sequences leave the batch once each to run again whole, so a batch
    # shape may come once, its bucket captured and never replayed
    assert not replayer.refused and any(verified) and (name == "phi3-longrope" or all(verified))


@pytest.mark.parametrize("name", ["qwen2", "qwen3", "gemma2"])
def test_a_decode_step_folds_norms_and_activations_into_its_products(tmp_path_factory, monkeypatch, name):
    """A one-row decode step launches 3 kernels a layer fewer, and one fewer for the head: each
    norm runs in the prologue of the product after it (the add of the residual too) and the gated
    activation in the down projection's. Its logits equal the unfused step's to the products' rounding, for
    biases (Qwen2), q/k norms (Qwen3), and sandwich norms, soft caps and tied embeddings (Gemma 2)."""
    _, directory = _checkpoint(tmp_path_factory, name)
    model, (folded, folded_logits), (unfolded, unfolded_logits) = _folded_and_unfolded_steps(directory, monkeypatch)
    layers = model.config.num_layers
    assert len(unfolded) - len(folded) == 3 * layers + 1
    assert folded.count("gemv_prologue") == 3 * layers + 1
    if name == "qwen2":  # no q/k or sandwich norms: every norm and activation is in a prologue
        assert "norm_rows" not in folded and "pointwise" not in folded
    # float32 products of 64 to 192 terms, and their inputs' roundings: a few units of 2^-24 each
    np.testing.assert_allclose(folded_logits, unfolded_logits, rtol=1e-5, atol=1e-5)
    assert (folded_logits.argmax(-1) == unfolded_logits.argmax(-1)).all()


def _folded_and_unfolded_steps(directory, monkeypatch):
    """(model, (kernel names, logits) of a one-row decode step folded, the same unfolded) of the checkpoint's
    model, two prompts prefilled."""
    from nbxtensor.launch import capture
    from nbxtensor.llm import model as model_module
    model = llm.load(directory, device=TEST_DEVICE, replay=False).model
    cache = model.new_cache(64, block_size=4)
    for sequence, prompt in enumerate(PROMPTS[:2]):
        model.prefill(cache, sequence, prompt)
    inputs = {key: to_nbx(array) for key, array in model.decode_inputs(cache, [0], [7]).items()}
    steps = {}
    for fold in (True, False):
        if not fold:  # the norms and the activation launch alone
            monkeypatch.setattr(model_module, "FOLD_MAX_ROWS", 0)
        # the same inputs write the same cache slots with the same keys and values either way; the first
        # run plans each op (a plan may launch a copy of its operands while it is made)
        model.decode_from(cache, inputs)
        with capture() as recorded:
            logits = model.decode_from(cache, inputs)
        steps[fold] = [launch[0].fn.__name__ for launch in recorded.launches], logits.numpy()
    return model, steps[True], steps[False]


def test_a_decode_step_of_two_rows_folds_nothing(tmp_path_factory):
    """Two to sixteen rows would take the 16-row prologue GEMV, slower than the unfused ops on a GPU: such a
    step launches no prologue product."""
    from nbxtensor.launch import capture
    _, directory = _checkpoint(tmp_path_factory, "qwen2")
    model = llm.load(directory, device=TEST_DEVICE, replay=False).model
    cache = model.new_cache(64, block_size=4)
    for sequence, prompt in enumerate(PROMPTS[:2]):
        model.prefill(cache, sequence, prompt)
    inputs = {key: to_nbx(array) for key, array in model.decode_inputs(cache, [0, 1], [7, 11]).items()}
    model.decode_from(cache, inputs)
    with capture() as recorded:
        model.decode_from(cache, inputs)
    assert "gemv_prologue" not in [launch[0].fn.__name__ for launch in recorded.launches]


@pytest.mark.parametrize("replay", [True, False])
def test_a_request_joining_mid_batch_gets_the_tokens_it_gets_alone(tmp_path_factory, replay):
    model, directory = _checkpoint(tmp_path_factory, "llama")
    ours = llm.load(directory, device=TEST_DEVICE, cache_tokens=256, block_size=4, replay=replay)
    engine = ours.engine
    first = engine.add(PROMPTS[0], llm.SamplingParams(max_new_tokens=10))
    for _ in range(4):
        engine.step()
    late = engine.add(PROMPTS[1], llm.SamplingParams(max_new_tokens=10))
    while engine.busy:
        engine.step()
    assert first.tokens == _reference(model, PROMPTS[0], 10)
    assert late.tokens == _reference(model, PROMPTS[1], 10)


def test_a_batchs_greedy_rows_share_one_argmax(tmp_path_factory, monkeypatch):
    """Plain greedy requests decoding together take their tokens from one argmax over the batch (one
    read-back a step, not one a request); a request whose logits are penalised still chooses alone, and
    every request gets the tokens it gets alone."""
    model, directory = _checkpoint(tmp_path_factory, "llama")
    ours = llm.load(directory, device=TEST_DEVICE, cache_tokens=256, block_size=4, replay=False)
    alone = ours.generate(PROMPTS[2], max_new_tokens=6, repetition_penalty=1.3).tokens
    chosen_alone = []
    choose = llm.Sampler.choose
    monkeypatch.setattr(llm.Sampler, "choose", lambda self, *a: chosen_alone.append(self.params) or choose(self, *a))
    engine = ours.engine
    plain = [engine.add(p, llm.SamplingParams(max_new_tokens=6)) for p in PROMPTS[:2]]
    penalised = engine.add(PROMPTS[2], llm.SamplingParams(max_new_tokens=6, repetition_penalty=1.3))
    while engine.busy:
        engine.step()
    assert [r.tokens for r in plain] == [_reference(model, p, 6) for p in PROMPTS[:2]]
    assert penalised.tokens == alone
    # prefill picks each request's first token alone; decode steps only the penalised one's
    assert sum(not p.plain_greedy for p in chosen_alone) == 6 and sum(p.plain_greedy for p in chosen_alone) == 2


def test_steps_launched_ahead_of_reading_tokens_give_the_op_by_op_tokens(tmp_path_factory, monkeypatch):
    """Plain greedy requests decode with each step launched before the previous step's tokens are read
    (fed from the device): tokens, finish reasons and pages equal an op-by-op run's, for requests of
    different lengths that stop by length and by a stop token while a step past them is in flight, and
    for a request joining while a step is in flight."""
    model, directory = _checkpoint(tmp_path_factory, "llama")
    stop = _reference(model, PROMPTS[1], 12)[4]
    runs = {}
    for replay in (True, False):
        ours = llm.load(directory, device=TEST_DEVICE, cache_tokens=256, block_size=4, replay=replay)
        engine = ours.engine
        ahead = []
        if replay:
            launch = engine.replayer.ahead
            monkeypatch.setattr(engine.replayer, "ahead", lambda *a: ahead.append(launch(*a)) or ahead[-1])
        requests = [engine.add(PROMPTS[0], llm.SamplingParams(max_new_tokens=12)),
                    engine.add(PROMPTS[1], llm.SamplingParams(max_new_tokens=12, stop_token_ids=(stop,))),
                    engine.add(PROMPTS[2], llm.SamplingParams(max_new_tokens=7))]
        for _ in range(3):
            engine.step()
        requests.append(engine.add(PROMPTS[2], llm.SamplingParams(max_new_tokens=5)))
        while engine.busy:
            engine.step()
        runs[replay] = [(r.tokens, r.finish_reason) for r in requests]
        assert engine.cache.free_tokens == engine.cache.capacity_tokens
        if replay:
            assert sum(logits is not None for logits in ahead) >= 3  # steps did run ahead
    assert runs[True] == runs[False]
    assert runs[True][0][0] == _reference(model, PROMPTS[0], 12)
    assert runs[True][1][1] == "stop" and runs[True][2][1] == "length"


@pytest.mark.parametrize("chunk,family", [(64, "qwen2"), (5, "qwen2"), (5, "gemma3")])
def test_logits_at_every_position_equal_transformers(tmp_path_factory, chunk, family):
    """Teacher forcing: ``LLM.logits`` gives each position's logits in one prefill (in chunks of 5 too),
    as transformers' forward does, and leaves the cache as it found it."""
    model, directory = _checkpoint(tmp_path_factory, family)
    ours = llm.load(directory, device=TEST_DEVICE, cache_tokens=256, block_size=4, prefill_chunk=chunk)
    prompt = [(11 * i + 5) % 97 for i in range(13)]
    free = ours.engine.cache.free_tokens
    got = ours.logits(prompt)
    assert tuple(got.shape) == (13, 97) and ours.engine.cache.free_tokens == free
    with torch.no_grad():
        want = model(torch.tensor([prompt])).logits[0].double().numpy()
    # float32 products over a hidden size of 64 and two layers: a few ulp of logits of size ~1
    np.testing.assert_allclose(got.numpy(), want, rtol=0, atol=2e-5)
    with pytest.raises(ValueError, match="outside the vocabulary of 97"):
        ours.logits([1, 200])
    with pytest.raises(ValueError, match="at least one token"):
        ours.logits([])


def _matches_transformers(model, directory, **options):
    """The checkpoint loaded (``options`` as ``llm.load`` takes them), its teacher-forced logits at every position
    and a greedy continuation (op by op, then replayed) checked against ``model``'s. float32 products over a
    hidden size of 64 and two layers: logits of size ~1 agree to a few ulp."""
    ours = llm.load(directory, device=TEST_DEVICE, **options)
    assert ours.model.config.architecture == model.config.architectures[0]
    prompt = [(11 * i + 5) % 97 for i in range(13)]
    with torch.no_grad():
        want = model(torch.tensor([prompt])).logits[0].double().numpy()
    np.testing.assert_allclose(ours.logits(prompt).numpy(), want, rtol=0, atol=2e-5)
    assert ours.generate(PROMPTS[0], max_new_tokens=8).tokens == _reference(model, PROMPTS[0], 8)
    return ours


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_a_variant_family_matches_transformers(tmp_path_factory, name):
    _matches_transformers(*_checkpoint(tmp_path_factory, name, VARIANTS))


@pytest.mark.parametrize("name", sorted(LAYER_NORM_FAMILIES))
def test_a_layer_norm_family_matches_transformers(tmp_path_factory, name):
    model, directory = _checkpoint(tmp_path_factory, name, LAYER_NORM_FAMILIES)
    ours = _matches_transformers(model, directory)
    if name in ("gpt2", "opt", "starcoder2"):
        # a batch of three, its decode steps replayed: learned positions read by row, padding rows too; the last
        # prompt longer than Starcoder2's window
        batched = ours.generate(PROMPTS, max_new_tokens=8)
        assert [g.tokens for g in batched] == [_reference(model, p, 8) for p in PROMPTS]
        assert not ours.engine.replayer.refused


def test_sampling_is_reproducible_per_seed_and_differs_across_seeds(tmp_path_factory):
    _, directory = _checkpoint(tmp_path_factory, "llama")
    ours = llm.load(directory, device=TEST_DEVICE)
    settings = dict(max_new_tokens=12, temperature=1.5, top_k=40, top_p=0.95, repetition_penalty=1.2)
    a = ours.generate(PROMPTS[0], seed=7, **settings).tokens
    b = ours.generate(PROMPTS[0], seed=7, **settings).tokens
    c = ours.generate(PROMPTS[0], seed=8, **settings).tokens
    assert a == b and a != c


def test_stop_tokens_end_a_request(tmp_path_factory):
    model, directory = _checkpoint(tmp_path_factory, "llama")
    ours = llm.load(directory, device=TEST_DEVICE)
    expected = _reference(model, PROMPTS[0], 8)
    stopped = ours.generate(PROMPTS[0], max_new_tokens=8, stop_token_ids=(expected[3],))
    assert stopped.tokens == expected[:expected.index(expected[3]) + 1] and stopped.finish_reason == "stop"


@pytest.mark.parametrize("family", ["llama3.1-rope", "gemma3", "qwen2-yarn", "phi3-longrope"])
def test_rope_tables_follow_transformers(tmp_path_factory, family):
    """cos/sin as transformers makes them (float32 inverse frequencies and angles, times the scaling's attention
    factor), llama3, linear, YaRN and LongRoPE scaling too (LongRoPE's short factors for a forward within the
    original 16 positions, long past them), and Gemma 3's sliding-window layers' tables of their own base."""
    model, directory = _checkpoint(tmp_path_factory, family, {**FAMILIES, **VARIANTS})
    config = DecoderConfig.from_hf(json.loads((directory / "config.json").read_text()), "test")
    rotary = model.model.rotary_emb
    half = config.head_dim // 2
    for layer_type in dict.fromkeys(config.layer_types):
        for positions, long in ((40, True), (12, False)):
            cos, sin = rope_tables(config, positions, layer_type == "sliding_attention", long)
            x = torch.zeros(1, positions, config.head_dim)
            ref_cos, ref_sin = (rotary(x, torch.arange(positions)[None], layer_type) if family == "gemma3"
                                else rotary(x, torch.arange(positions)[None]))
            np.testing.assert_allclose(cos, ref_cos[0, :, :half].numpy(), rtol=0, atol=2e-6)
            np.testing.assert_allclose(sin, ref_sin[0, :, :half].numpy(), rtol=0, atol=2e-6)
    assert (config.sliding_rope is not None) == (family == "gemma3")


def test_phi3_original_length_beside_rope_scaling_is_read():
    """Phi-3's checkpoints write original_max_position_embeddings beside rope_scaling; its LongRoPE reads it
    there, and a factor list of the wrong length is refused by name."""
    config = {"architectures": ["Phi3ForCausalLM"], "vocab_size": 97, "hidden_size": 64, "intermediate_size": 96,
              "num_hidden_layers": 2, "num_attention_heads": 4, "max_position_embeddings": 128,
              "original_max_position_embeddings": 16,
              "rope_scaling": {"type": "longrope", "short_factor": [1.0] * 8, "long_factor": [2.0] * 8}}
    decoder = DecoderConfig.from_hf(config, "test")
    assert decoder.rope_scaling["original_max_position_embeddings"] == 16 and decoder.rerun_past_original
    cos, _ = rope_tables(decoder, 4, long=True)
    assert cos[0, 0] == np.float32(math.sqrt(1 + math.log(8) / math.log(16)))  # the attention factor at angle 0
    config["rope_scaling"]["long_factor"] = [2.0] * 7
    with pytest.raises(CheckpointError, match="long_factor must list 8 numbers"):
        rope_tables(DecoderConfig.from_hf(config, "test"), 4, long=True)


def test_paged_cache_hands_out_and_takes_back_pages():
    cache = PagedKVCache(1, tokens=12, block_size=4, kv_heads=1, head_dim=2, dtype="float32", device="cpu")
    assert cache.extend(0, 3) == [0, 1, 2]
    assert cache.extend(1, 2) == [4, 5]
    assert cache.extend(0, 2) == [3, 8]  # the rest of page 0, then a new page
    assert cache.block_table([0, 1]) == [[0, 2], [1, 0]]
    with pytest.raises(CacheFull, match="free tokens"):
        cache.extend(2, 1)
    cache.release(1)
    assert cache.extend(2, 1) == [4]
    assert cache.free_tokens == 0 and cache.length(0) == 5


def test_unsupported_architecture_and_bad_prompts_are_refused(tmp_path_factory, tmp_path):
    _, directory = _checkpoint(tmp_path_factory, "llama")
    config = json.loads((directory / "config.json").read_text())
    config["architectures"] = ["MambaForCausalLM"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(llm.CheckpointError, match="MambaForCausalLM.*supported: LlamaForCausalLM"):
        llm.load(tmp_path)
    ours = llm.load(directory, device=TEST_DEVICE)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        ours.generate([5, 200])
    with pytest.raises(ValueError, match="context is 128"):
        ours.generate(list(range(90)) * 2)
    with pytest.raises(llm.CheckpointError, match="no tokenizer.json"):
        ours.generate("hello")
    with pytest.raises(ValueError, match="top_p"):
        ours.generate([5], top_p=0.0)


def test_a_shard_index_naming_a_path_outside_the_directory_is_refused(tmp_path_factory, tmp_path):
    _, directory = _checkpoint(tmp_path_factory, "llama")
    for name in ("config.json", "model.safetensors"):
        (tmp_path / name).write_bytes((directory / name).read_bytes())
    os.remove(tmp_path / "model.safetensors")
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"x": "../model.safetensors"}}))
    with pytest.raises(llm.CheckpointError, match="not a plain file name"):
        llm.load(tmp_path)


def test_nbx_generate_streams_the_greedy_continuation(tmp_path_factory, capsys):
    from nbxtensor import cli
    model, directory = _checkpoint(tmp_path_factory, "llama")
    assert cli.main(["generate", str(directory), "--prompt", "5,17,3", "--max-new-tokens", "6",
                     "--device", TEST_DEVICE]) == 0
    out = capsys.readouterr()
    assert [int(t) for t in out.out.split()] == _reference(model, [5, 17, 3], 6)
    assert "3 prompt tokens" in out.err and "decode" in out.err
    assert cli.main(["generate", str(directory / "missing"), "--prompt", "1"]) == 2
    assert "no such directory" in capsys.readouterr().err


def test_generation_runs_where_importing_torch_fails(tmp_path_factory):
    from .test_torch_free import REFUSE_TORCH, run_python
    model, directory = _checkpoint(tmp_path_factory, "qwen2")
    source = REFUSE_TORCH + textwrap.dedent(f"""
        from nbxtensor import llm
        tokens = llm.load({str(directory)!r}, device={TEST_DEVICE!r}).generate([5, 17, 3], max_new_tokens=4).tokens
        import sys
        assert not any(name == "torch" or name.startswith("torch.") for name in sys.modules)
        print(tokens)
    """)
    result = run_python(source)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == str(_reference(model, [5, 17, 3], 4))


def _reference_distribution(logits, seen, temperature, top_k, top_p, min_p, penalty):
    """transformers' processors in float64, written from their definitions: repetition penalty,
    temperature, top-k, top-p (the smallest likeliest set whose mass reaches top_p), min-p."""
    x = np.asarray(logits, np.float64).copy()
    for t in set(seen):
        x[t] = x[t] * penalty if x[t] < 0 else x[t] / penalty
    x = x / temperature
    keep = np.ones_like(x, bool)
    order = np.argsort(-x, kind="stable")
    if top_k:
        keep[order[top_k:]] = False
    p = np.exp(x - x[keep].max()) * keep
    p /= p.sum()
    if top_p < 1:
        sorted_p = p[order]
        before = np.cumsum(sorted_p) - sorted_p
        keep[order[before > top_p]] = False
    if min_p:
        keep &= p >= min_p * p.max()
    q = np.exp(x - x.max()) * keep
    return q / q.sum()


@pytest.mark.parametrize("settings", [
    dict(temperature=0.7, top_k=0, top_p=1.0, min_p=0.0, penalty=1.0),
    dict(temperature=1.3, top_k=5, top_p=1.0, min_p=0.0, penalty=1.0),
    dict(temperature=1.0, top_k=0, top_p=0.8, min_p=0.0, penalty=1.0),
    dict(temperature=1.0, top_k=0, top_p=1.0, min_p=0.2, penalty=1.0),
    dict(temperature=0.9, top_k=8, top_p=0.9, min_p=0.05, penalty=1.3),
])
def test_the_sampled_distribution_follows_the_processors(settings):
    """fp32 softmax against a float64 reference: agreement to 1e-6 absolute on probabilities <= 1."""
    rng = np.random.default_rng(3)
    logits = rng.normal(0, 2, 12).astype(np.float32)
    seen = [1, 4, 4, 9]
    params = llm.SamplingParams(temperature=settings["temperature"], top_k=settings["top_k"], top_p=settings["top_p"],
                                min_p=settings["min_p"], repetition_penalty=settings["penalty"], seed=0)
    sampler = llm.Sampler(params, TEST_DEVICE)
    got = sampler.distribution(to_nbx(logits), seen)
    want = _reference_distribution(logits, seen, settings["temperature"], settings["top_k"], settings["top_p"],
                                   settings["min_p"], settings["penalty"])
    np.testing.assert_allclose(got, want, atol=1e-6, rtol=0)


def test_draws_follow_the_distribution():
    """400 seeded draws over 4 tokens: each token's count within 5 standard deviations of its expectation
    (a fixed seed, so the test is deterministic; the bound only guards against a skewed draw)."""
    logits = np.log(np.array([0.5, 0.3, 0.15, 0.05], np.float32))
    sampler = llm.Sampler(llm.SamplingParams(temperature=1.0, seed=11), TEST_DEVICE)
    counts = np.bincount([sampler.choose(to_nbx(logits), [])[0] for _ in range(400)], minlength=4)
    expected = 400 * np.exp(logits)
    assert np.all(np.abs(counts - expected) <= 5 * np.sqrt(expected * (1 - np.exp(logits)))), counts


def test_text_prompts_go_through_the_checkpoints_tokenizer(tmp_path_factory):
    tokenizers = pytest.importorskip("tokenizers")
    model, directory = _checkpoint(tmp_path_factory, "llama")
    vocab = {f"w{i}": i for i in range(97)}
    tokenizer = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="w0"))
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tokenizer.decoder = tokenizers.decoders.WordPiece(prefix="##")  # joins words with spaces
    tokenizer.save(str(directory / "tokenizer.json"))
    ours = llm.load(directory, device=TEST_DEVICE)
    expected = _reference(model, [5, 17, 3], 6)
    generation = ours.generate("w5 w17 w3", max_new_tokens=6)
    assert generation.prompt_tokens == [5, 17, 3] and generation.tokens == expected
    assert generation.text == " ".join(f"w{t}" for t in expected)
    assert "".join(ours.stream("w5 w17 w3", max_new_tokens=6)) == generation.text
    stopped = ours.generate("w5 w17 w3", max_new_tokens=6, stop_strings=(f"w{expected[2]}",))
    assert stopped.finish_reason == "stop" and f"w{expected[2]}" not in stopped.text


@pytest.mark.parametrize("family_name", ["gemma2"])
def test_chunked_prefill_gives_the_unchunked_tokens(tmp_path_factory, family_name):
    """A 21-token prompt in chunks of 4 (the last one short) past a window of 8: each chunk attends to the
    pages of the ones before; its logits and tokens are those of one prefill, and transformers'."""
    model, directory = _checkpoint(tmp_path_factory, family_name)
    prompt = [(7 * i + 3) % 97 for i in range(21)]
    whole = llm.load(directory, device=TEST_DEVICE, replay=False)
    chunked = llm.load(directory, device=TEST_DEVICE, replay=False, prefill_chunk=4)
    logits = [m.model.prefill(m.engine.cache, 0, prompt).numpy() for m in (whole, chunked)]
    # float32 sums over the keys in other groupings: a few ulp on logits of size ~1
    np.testing.assert_allclose(logits[1], logits[0], rtol=0, atol=1e-5)
    for m in (whole, chunked):
        m.engine.cache.release(0)
    expected = _reference(model, prompt, 6)
    assert chunked.generate(prompt, max_new_tokens=6).tokens == whole.generate(prompt, max_new_tokens=6).tokens \
        == expected
    with pytest.raises(ValueError, match="prefill_chunk"):
        llm.load(directory, device=TEST_DEVICE, prefill_chunk=0)


CHAT_TEMPLATE = ("{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}w1 {{ m['content'] }} "
                 "{% elif m['role'] == 'system' %}w4 {{ m['content'] }} {% else %}w2 {{ m['content'] }} w3 "
                 "{% endif %}{% endfor %}{% if add_generation_prompt %}w2 {% endif %}")


def _word_tokenizer(directory, chat_template=CHAT_TEMPLATE):
    """A word-level tokenizer.json (w0 ... w96, joined with spaces) and a tokenizer_config.json."""
    tokenizers = pytest.importorskip("tokenizers")
    tokenizer = tokenizers.Tokenizer(tokenizers.models.WordLevel({f"w{i}": i for i in range(97)}, unk_token="w0"))
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tokenizer.decoder = tokenizers.decoders.WordPiece(prefix="##")
    tokenizer.add_special_tokens(["w6", "w96"])  # as a checkpoint's are: matched even inside a word ("w6w4")
    tokenizer.save(str(directory / "tokenizer.json"))
    config = {"bos_token": "w6", "eos_token": "w96", **({"chat_template": chat_template} if chat_template else {})}
    (directory / "tokenizer_config.json").write_text(json.dumps(config))


def test_nbx_chat_applies_the_chat_template_and_streams_each_reply(tmp_path_factory, capsys, monkeypatch):
    import io
    from nbxtensor import cli
    model, directory = _checkpoint(tmp_path_factory, "llama")
    _word_tokenizer(directory)
    oracle = transformers.PreTrainedTokenizerFast(tokenizer_file=str(directory / "tokenizer.json"), bos_token="w6",
                                                  eos_token="w96", chat_template=CHAT_TEMPLATE)
    monkeypatch.setattr("sys.stdin", io.StringIO("w5 w17\n\nw9 w10 w11\n"))
    assert cli.main(["chat", str(directory), "--system", "w8", "--max-new-tokens", "5", "--device", TEST_DEVICE]) == 0
    replies = capsys.readouterr().out.splitlines()
    messages = [{"role": "system", "content": "w8"}]
    for line, reply in zip(["w5 w17", "w9 w10 w11"], replies, strict=True):
        messages.append({"role": "user", "content": line})
        ids = oracle.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
        assert ids[:3] == [6, 4, 8]  # the template's own bos, then the system turn
        assert reply == " ".join(f"w{t}" for t in _reference(model, ids, 5))
        messages.append({"role": "assistant", "content": reply})


def test_chat_without_a_template_or_with_a_failing_one_is_refused(tmp_path_factory, capsys, monkeypatch):
    import io
    from nbxtensor import cli
    _, directory = _checkpoint(tmp_path_factory, "llama")
    _word_tokenizer(directory, chat_template=None)
    monkeypatch.setattr("sys.stdin", io.StringIO("w5\n"))
    assert cli.main(["chat", str(directory), "--device", TEST_DEVICE]) == 2
    assert "no chat template" in capsys.readouterr().err
    _word_tokenizer(directory, chat_template="{{ raise_exception('system messages are not supported') }}")
    assert cli.main(["chat", str(directory), "--device", TEST_DEVICE]) == 2
    assert "refused the conversation: system messages are not supported" in capsys.readouterr().err


def test_weights_load_under_a_progress_bar_of_their_bytes(tmp_path_factory, monkeypatch):
    from nbxtensor import progress
    from nbxtensor.llm import checkpoint
    model, directory = _checkpoint(tmp_path_factory, "llama")
    tasks = []

    def recording(label, total=None, unit=None):
        tasks.append(progress.Task(label, total, unit))
        return tasks[-1]
    monkeypatch.setattr(checkpoint.progress, "task", recording)
    llm.load(directory, device=TEST_DEVICE)
    (task,) = tasks
    weights = sum(p.numel() * 4 for p in model.state_dict().values())
    assert task.label == "loading weights" and task.unit == "bytes" and task.total == task.done == weights
    assert "100% [" in task.line(200)


def test_a_missing_weight_and_a_dtype_the_device_cannot_run_are_refused(tmp_path_factory, tmp_path, monkeypatch):
    from nbxtensor.io.safetensors import safe_open, save_file
    from nbxtensor.llm import model as model_module
    _, directory = _checkpoint(tmp_path_factory, "llama")
    (tmp_path / "config.json").write_text((directory / "config.json").read_text())
    with safe_open(str(directory / "model.safetensors")) as file:
        kept = {name: file.get_tensor(name) for name in file.keys() if name != "model.layers.1.mlp.down_proj.weight"}
    save_file(kept, str(tmp_path / "model.safetensors"))
    with pytest.raises(llm.CheckpointError, match="lacks weight model.layers.1.mlp.down_proj.weight"):
        llm.load(tmp_path, device=TEST_DEVICE)
    with pytest.raises(TypeError, match="float32, float16 or bfloat16, not float64"):
        llm.load(directory, device=TEST_DEVICE, dtype="float64")

    class Turing:
        facts = {"native_bf16": False}
    monkeypatch.setattr(model_module, "backend_for", lambda device: Turing())
    with pytest.raises(TypeError, match="no bfloat16 arithmetic.*dtype='float16'"):
        llm.load(directory, device=TEST_DEVICE, dtype="bfloat16")


def _randomized(model):
    """``model`` with every weight random, as ``_checkpoint`` makes them."""
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            parameter.normal_(0.0, 0.3 if parameter.ndim == 1 else 0.05)
            if "norm" in name:
                parameter.add_(1.0)
    return model.eval()


def test_a_gemma2_config_without_layer_types_alternates_its_layers(tmp_path):
    """Gemma 2 checkpoints on the Hub list no layer_types; transformers then slides on every other layer (the
    first of each pair), not on every one: the tokens of a window of 4 over a prompt and 12 new tokens follow."""
    config = transformers.Gemma2Config(**COMMON, head_dim=16, sliding_window=4, query_pre_attn_scalar=24)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    _randomized(transformers.Gemma2ForCausalLM(config)).save_pretrained(tmp_path)
    written = json.loads((tmp_path / "config.json").read_text())
    del written["layer_types"]
    (tmp_path / "config.json").write_text(json.dumps(written))
    reference = transformers.Gemma2ForCausalLM.from_pretrained(tmp_path, attn_implementation="eager").eval()
    ours = llm.load(tmp_path, device=TEST_DEVICE)
    assert list(ours.model.config.layer_types) == reference.config.layer_types == ["sliding_attention",
                                                                                   "full_attention"]
    assert ours.generate(PROMPTS[2], max_new_tokens=12).tokens == _reference(reference, PROMPTS[2], 12)


MULTIMODAL = {
    "gemma3": ("Gemma3Config", "Gemma3ForConditionalGeneration", "Gemma3ForCausalLM",
               dict(head_dim=16, sliding_window=4, query_pre_attn_scalar=24),
               dict(mm_tokens_per_image=4, image_token_index=299, boi_token_index=297, eoi_token_index=298)),
    # its text_config unties the head, the whole model ties it (and saves no lm_head)
    "mistral3": ("Mistral3Config", "Mistral3ForConditionalGeneration", "MistralForCausalLM",
                 dict(head_dim=16, tie_word_embeddings=False), dict(image_token_index=299)),
    # multimodal rope: a text token's position is the same on each of its three axes; weights unprefixed
    "qwen2_5_vl": ("Qwen2_5_VLConfig", "Qwen2_5_VLForConditionalGeneration", "Qwen2ForCausalLM",
                   dict(rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3]}),
                   dict(image_token_id=299, video_token_id=298, vision_start_token_id=297)),
}
VISION = {"qwen2_5_vl": dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=4, out_hidden_size=64,
                             patch_size=14, window_size=28, fullatt_block_indexes=[0])}


@pytest.mark.parametrize("name", sorted(MULTIMODAL))
def test_a_multimodal_checkpoint_runs_its_text_decoder(tmp_path, name):
    """A Gemma3ForConditionalGeneration (gemma-3-4b and up), Mistral3ForConditionalGeneration (Mistral Small
    3.1) or Qwen2_5_VLForConditionalGeneration checkpoint runs its language model alone: the decoder's config is text_config (the head tied as the
    whole model says), its weights those under language_model.; greedy tokens of a text prompt as the whole
    model's."""
    config_name, model_name, decoder, text, extra = MULTIMODAL[name]
    vision = VISION.get(name, dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
                                   image_size=28, patch_size=14, head_dim=8))
    config = getattr(transformers, config_name)(text_config=dict(COMMON, vocab_size=300, **text),
                                                vision_config=vision, **extra)
    config._attn_implementation = config.text_config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = _randomized(getattr(transformers, model_name)(config))
    model.save_pretrained(tmp_path)
    ours = llm.load(tmp_path, device=TEST_DEVICE)
    assert ours.model.config.architecture == decoder
    expected = _reference(model, PROMPTS[2], 12)
    assert ours.generate(PROMPTS[2], max_new_tokens=12).tokens == expected
    if name == "qwen2_5_vl":  # as checkpoints written before transformers 5 give it: the decoder's keys on top
        written = json.loads((tmp_path / "config.json").read_text())
        text = written.pop("text_config")
        (tmp_path / "config.json").write_text(json.dumps({**written, **text}))
        assert llm.load(tmp_path, device=TEST_DEVICE).generate(PROMPTS[2], max_new_tokens=12).tokens == expected


def test_a_sparse_gemma3_text_config_takes_transformers_defaults():
    """gemma-3-4b's text_config names five keys; the rest are Gemma3TextConfig's defaults, every sixth layer
    attending to all keys, the others sliding with their own rope base."""
    sparse = {"hidden_size": 2560, "intermediate_size": 10240, "num_hidden_layers": 34, "sliding_window": 1024,
              "rope_scaling": {"factor": 8.0, "rope_type": "linear"}}
    ours = DecoderConfig.from_hf({"architectures": ["Gemma3ForCausalLM"], **sparse}, "test")
    theirs = transformers.Gemma3TextConfig(**sparse)
    assert (ours.vocab_size, ours.num_heads, ours.num_kv_heads, ours.head_dim, ours.max_positions) == (
        theirs.vocab_size, theirs.num_attention_heads, theirs.num_key_value_heads, theirs.head_dim,
        theirs.max_position_embeddings)
    assert list(ours.layer_types) == theirs.layer_types
    assert ours.attention_scale == theirs.query_pre_attn_scalar ** -0.5 and ours.tie_embeddings
    rope = theirs.rope_parameters
    assert ours.rope_theta == rope["full_attention"]["rope_theta"]
    assert ours.sliding_rope["rope_theta"] == rope["sliding_attention"]["rope_theta"]
    assert ours.rope_scaling["rope_type"] == rope["full_attention"]["rope_type"] == "linear"


def test_a_multimodal_checkpoints_text_decoder_quantizes(tmp_path):
    """int8 on load and ``nbx quantize`` take a multimodal checkpoint's decoder projections (named under
    language_model.), not its vision tower's; both load quantized and generate alike; the census reads the
    written checkpoint's scales."""
    config_name, model_name, _, text, extra = MULTIMODAL["gemma3"]
    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4, image_size=28,
                  patch_size=14)
    config = getattr(transformers, config_name)(text_config=dict(COMMON, vocab_size=300, **text),
                                                vision_config=vision, **extra)
    torch.manual_seed(0)
    _randomized(getattr(transformers, model_name)(config)).save_pretrained(tmp_path / "float")
    on_load = llm.load(tmp_path / "float", device=TEST_DEVICE, quantize="int8")
    write_quantized(tmp_path / "float", tmp_path / "int8", "int8")
    written = llm.load(tmp_path / "int8", device=TEST_DEVICE)
    for ours in (on_load, written):
        assert all(isinstance(w, QuantizedWeight) for w in (ours.model.layers[0].o, ours.model.layers[1].down))
    continuations = [ours.generate(PROMPTS[0], max_new_tokens=6).tokens for ours in (on_load, written)]
    assert continuations[0] == continuations[1]
    with safe_open(str(tmp_path / "int8" / "model.safetensors")) as file:
        assert not any(name.startswith("vision_tower") and name.endswith("weight_scale") for name in file.keys())
    _, settings = checkpoint_census(tmp_path / "int8", load_facts("hopper"), batch_sizes=[1], context=8)
    assert settings["weights"] == "int8"


def test_a_chat_template_from_its_own_files(tmp_path):
    """Checkpoints that keep the template out of tokenizer_config.json: chat_template.jinja (transformers'
    own save), or a multimodal processor's chat_template.json; each renders as the tokenizer_config one."""
    messages = [{"role": "user", "content": "w5"}]
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"bos_token": "w6"}))
    (tmp_path / "chat_template.json").write_text(json.dumps({"chat_template": CHAT_TEMPLATE}))
    assert ChatTemplate(str(tmp_path)).render(messages) == "w6w1 w5 w2 "
    (tmp_path / "chat_template.jinja").write_text("{{ bos_token }}jinja {{ messages[0]['content'] }}")
    assert ChatTemplate(str(tmp_path)).render(messages) == "w6jinja w5"


def test_layer_norm_families_quantize_under_their_own_names(tmp_path_factory, tmp_path):
    """Phi's projections (named dense, fc1, fc2 in its checkpoint) quantize on load and in ``nbx quantize``, whose
    checkpoint keeps Phi's names; both load quantized and generate alike. GPT-NeoX's interleaved qkv rows quantize
    on load (reordered first), but a written or packed checkpoint of such a family is refused by name."""
    _, phi = _checkpoint(tmp_path_factory, "phi", LAYER_NORM_FAMILIES)
    on_load = llm.load(phi, device=TEST_DEVICE, quantize="int8")
    write_quantized(phi, tmp_path / "phi-int8", "int8")
    written = llm.load(tmp_path / "phi-int8", device=TEST_DEVICE)
    for ours in (on_load, written):
        layer = ours.model.layers[1]
        assert all(isinstance(w, QuantizedWeight) for w in (layer.o, layer.gate_up, layer.down))
    assert len({tuple(ours.generate(PROMPTS[0], max_new_tokens=6).tokens) for ours in (on_load, written)}) == 1
    with safe_open(str(tmp_path / "phi-int8" / "model.safetensors")) as file:
        assert "model.layers.0.mlp.fc1.weight_scale" in file.keys()
    model, neox = _checkpoint(tmp_path_factory, "gpt_neox", LAYER_NORM_FAMILIES)
    quantized = llm.load(neox, device=TEST_DEVICE, quantize="int8")
    assert isinstance(quantized.model.layers[0].qkv, QuantizedWeight)
    with torch.no_grad():  # int8 rows per channel: logits within a few hundredths of the float model's
        want = model(torch.tensor([PROMPTS[2]])).logits[0].double().numpy()
    np.testing.assert_allclose(quantized.logits(PROMPTS[2]).numpy(), want, rtol=0, atol=0.05)
    with pytest.raises(CheckpointError, match="cannot be written quantized"):
        write_quantized(neox, tmp_path / "neox-int8", "int8")
    packed = tmp_path / "neox-packed"
    packed.mkdir()
    (packed / "model.safetensors").symlink_to(neox / "model.safetensors")
    config = json.loads((neox / "config.json").read_text())
    (packed / "config.json").write_text(json.dumps({**config, "quantization_config": {"quant_method": "nbx",
                                                                                     "format": "int8"}}))
    with pytest.raises(CheckpointError, match="a quantized checkpoint of this family is not supported"):
        llm.load(packed, device=TEST_DEVICE)


@pytest.mark.parametrize("name, change, message", [
    ("gpt2", {"scale_attn_by_inverse_layer_idx": True}, "scale_attn_by_inverse_layer_idx = True is not supported"),
    ("opt", {"do_layer_norm_before": False}, "do_layer_norm_before = False is not supported"),
    ("opt", {"word_embed_proj_dim": 32}, "word_embed_proj_dim 32 other than hidden_size"),
    ("gpt_neox", {"hidden_act": "gelu_fast"}, "hidden_act 'gelu_fast' is not supported"),
])
def test_layer_norm_family_options_the_engine_does_not_compute_are_refused(tmp_path_factory, tmp_path, name,
                                                                            change, message):
    _, directory = _checkpoint(tmp_path_factory, name, LAYER_NORM_FAMILIES)
    config = json.loads((directory / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, **change}))
    (tmp_path / "model.safetensors").symlink_to(directory / "model.safetensors")
    with pytest.raises(CheckpointError, match=message):
        llm.load(tmp_path, device=TEST_DEVICE)


def test_layer_weights_the_config_does_not_announce_are_refused(tmp_path_factory, tmp_path):
    """A checkpoint whose config leaves out a setting its weights need (here Llama's mlp_bias) would run without
    those weights: it is refused, naming one."""
    _, directory = _checkpoint(tmp_path_factory, "llama-biases", VARIANTS)
    config = json.loads((directory / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "mlp_bias": False}))
    (tmp_path / "model.safetensors").symlink_to(directory / "model.safetensors")
    with pytest.raises(CheckpointError, match=r"6 layer weights that LlamaForCausalLM with this config does not "
                                              r"read \(the first: model.layers.0.mlp.down_proj.bias\)"):
        llm.load(tmp_path, device=TEST_DEVICE)


def test_hostile_renamed_checkpoints_are_refused(tmp_path_factory, tmp_path):
    """A GPT-2 weight given under both of its family's names, and a GPT-NeoX fused qkv whose rows are not whole
    groups of heads, are refused by name rather than read."""
    from nbxtensor.io.safetensors import load_file, save_file
    for name, change, message in [
            ("gpt2", lambda t: {**t, "wte.weight": t["transformer.wte.weight"]}, "given twice"),
            ("gpt_neox", lambda t: {**t, "gpt_neox.layers.0.attention.query_key_value.weight":
                                    t["gpt_neox.layers.0.attention.query_key_value.weight"][:-1]},
             "rows are not 4 groups of 1 queries")]:
        _, directory = _checkpoint(tmp_path_factory, name, LAYER_NORM_FAMILIES)
        hostile = tmp_path / name
        hostile.mkdir()
        (hostile / "config.json").write_text((directory / "config.json").read_text())
        save_file(change(load_file(str(directory / "model.safetensors"), device="cpu")),
                  str(hostile / "model.safetensors"))
        with pytest.raises(CheckpointError, match=message):
            llm.load(hostile, device=TEST_DEVICE)


@pytest.mark.parametrize("name, fewer", [("gpt2", 2), ("olmo", 3), ("phi", 1), ("gpt_neox", 2), ("cohere", 2)])
def test_a_layer_norm_decode_step_folds_its_norms_into_its_products(tmp_path_factory, monkeypatch, name, fewer):
    """A one-row decode step of a LayerNorm family launches ``fewer`` kernels a layer fewer and one fewer for the
    head: each LayerNorm (its bias, and the residual's add) runs in the prologue of the product after it, a gated
    activation in the down product's; a plain MLP's activation still runs alone. GPT-2's norms have weights and
    biases, OLMo's neither; a parallel block's products each norm the stream (Phi's and Cohere's one norm, whose
    launch is saved once; GPT-NeoX's two). Its logits equal the unfused step's to the products' rounding."""
    _, directory = _checkpoint(tmp_path_factory, name, {**LAYER_NORM_FAMILIES, **VARIANTS})
    model, (folded, folded_logits), (unfolded, unfolded_logits) = _folded_and_unfolded_steps(directory, monkeypatch)
    layers = model.config.num_layers
    assert len(unfolded) - len(folded) == fewer * layers + 1
    assert folded.count("gemv_prologue") == (3 if model.config.gated else 2) * layers + 1
    assert "norm_rows" not in folded
    np.testing.assert_allclose(folded_logits, unfolded_logits, rtol=1e-5, atol=1e-5)
