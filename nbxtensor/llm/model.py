"""Decoder-only language models written with nbxtensor's ops, read from a Hugging Face checkpoint directory.

One forward serves the Llama lineage (Llama 1-3 with 3.1-style RoPE scaling, Mistral with its sliding
window, Qwen2 with its QKV bias, Qwen3 with its per-head q/k norms, Phi-3 with its fused QKV and gate-up
weights), Gemma (embeddings scaled by sqrt(hidden), norms scaling by 1 + weight, a gelu-tanh MLP; Gemma 2
adds norms after attention and around the MLP, soft-capped attention scores and logits, and sliding-window
layers between full ones) and the mixtures of experts (Mixtral; Qwen2-MoE with its shared expert and dense
layers between sparse ones; Qwen3-MoE; OLMoE with its q/k norms over every head's width and clipped q, k
and v), whose sparse layers run ``ops.moe.moe`` in place of the MLP, and the LayerNorm families (GPT-2 with its
learned positions, GPT-NeoX, Phi and Falcon with attention and MLP in parallel, StableLM, Starcoder2, OPT, OLMo,
Nemotron, GPT-J and Cohere with rotary pairs of neighbouring dims, as GLM has), read under the Llama lineage's
weight names (``checkpoint.WEIGHT_NAMES``): the families differ in facts of their config, which
``DecoderConfig.from_hf`` reads once. A prompt runs as a prefill (the flash kernel, causal, in
chunks of at most ``prefill_chunk`` tokens, each attending to the cache so far); every later token of a batch
of sequences as one decode step (the paged decode kernel over ``PagedKVCache``).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ..device import backend_for, resolve
from ..dtypes import get_dtype
from ..nn import functional as F
from ..ops.attention import paged_attention, prefill_attention, rotary_append
from ..ops.copy import cat
from ..ops.creation import empty, tensor as make_tensor
from ..ops.matmul_prologue import (FOLD_MAX_ROWS, act_and_mul_linear, add_layer_norm_linear, add_rms_norm_linear,
                                   layer_norm_linear, rms_norm_linear)
from ..ops.moe import moe
from ..ops.normalization import add_layer_norm, add_rms_norm, rms_norm
from ..quant import QuantizationError, QuantizedWeight, join_rows, stack_experts
from ..tensor import Tensor
from . import checkpoint
from .cache import PagedKVCache
from .checkpoint import CheckpointError
from .quantized import fp8_activations_of, linear, load_weights, quantization_of

__all__ = ["DecoderConfig", "DecoderModel", "MixtureConfig", "SUPPORTED_ARCHITECTURES", "load_model"]

# architectures value -> what its config means beyond the Llama defaults; "experts": how its mixture-of-experts
# layers read (``_EXPERT_FAMILIES``); "defaults": the values transformers gives keys a config leaves out (Gemma 3's
# multimodal checkpoints write few); "global_every": where a config lists no layer_types, every n-th layer attends
# to all keys and the others slide (n: the config's sliding_window_pattern where it gives one); "no_rope_every": where
# a config lists no no_rope_layers, every n-th layer's queries and keys go unrotated (n: no_rope_layer_interval).
# A fact given as a string is the config key that turns it on. "layer_norm": norms that remove the mean and add a
# bias where the checkpoint has one (eps from layer_norm_eps); "norm_plus_one": norms scale by 1 + weight;
# "norm_weights" False: norms without weights; "plain_mlp": up, activation, down (no gate); "mlp_bias",
# "output_bias", "head_bias": biases on the MLP's products, the attention output, the LM head; "parallel": attention
# and the MLP both read the layer's input stream, each through its own norm, "shared_norm": through the one;
# "qk_layer_norm": q and k LayerNormed head by head; "positions": learned absolute position embeddings (their
# table's row offset), no rope; "four_wide": an MLP four times the hidden size where the config gives no width;
# "multi_query": one key and value head where the config's multi_query says so (every head one, or
# num_kv_heads under Falcon's new_decoder_architecture); "falcon": Falcon's norms by its architecture flags;
# "logit_scale": the logits times the config's logit_scale; "rope_sliding_only": the full-attention layers rotate
# nothing where the config gives a window ("windowed_only": it must). Families that name their weights otherwise
# are read under Llama's names (``checkpoint.WEIGHT_NAMES``)
_LAYER_NORM = {"layer_norm": True, "plain_mlp": True, "mlp_bias": True}
SUPPORTED_ARCHITECTURES = {
    "LlamaForCausalLM": {},
    "MistralForCausalLM": {},
    "Qwen2ForCausalLM": {"attention_bias": True},
    "Qwen3ForCausalLM": {"qk_norm": True},
    "Phi3ForCausalLM": {"fused_qkv": True, "fused_gate_up": True, "rerun_past_original": True},
    "GemmaForCausalLM": {"gemma": True},
    "Gemma2ForCausalLM": {"gemma": True, "sandwich": True, "global_every": 2, "defaults": {
        "final_logit_softcapping": 30.0, "attn_logit_softcapping": 50.0, "query_pre_attn_scalar": 256,
        "sliding_window": 4096, "head_dim": 256}},
    "Gemma3ForCausalLM": {"gemma": True, "sandwich": True, "qk_norm": True, "global_every": 6, "defaults": {
        "vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
        "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "query_pre_attn_scalar": 256,
        "sliding_window": 4096, "max_position_embeddings": 131072, "tie_word_embeddings": True}},
    "GraniteForCausalLM": {"multipliers": True},
    # LayerNorms without weights or biases, q, k and v clipped
    "OlmoForCausalLM": {"layer_norm": True, "norm_weights": False, "clip_qkv": True},
    # LayerNorms scaling by 1 + weight, a plain squared-relu MLP
    "NemotronForCausalLM": {**_LAYER_NORM, "norm_plus_one": True, "mlp_bias": "mlp_bias",
                            "defaults": {"hidden_act": "relu2", "partial_rotary_factor": 0.5, "norm_eps": 1e-5,
                                         "tie_word_embeddings": False}},
    # GLM: rotary pairs of neighbouring dims over half of each head (``checkpoint.WEIGHT_NAMES``), q, k and v biases,
    # one gate_up weight; GLM-4 adds norms after attention and around the MLP
    "GlmForCausalLM": {"fused_gate_up": True, "attention_bias": True, "output_bias": False,
                       "defaults": {"partial_rotary_factor": 0.5}},
    "Glm4ForCausalLM": {"fused_gate_up": True, "attention_bias": True, "output_bias": False, "sandwich": True,
                        "defaults": {"partial_rotary_factor": 0.5}},
    "SmolLM3ForCausalLM": {"no_rope_every": 4},
    "MinistralForCausalLM": {},
    # q, k and v biases without an output bias; rotary pairs of neighbouring dims (``checkpoint.WEIGHT_NAMES``)
    "HeliumForCausalLM": {"output_bias": False},
    # a plain squared-relu MLP
    "ArceeForCausalLM": {"plain_mlp": True, "defaults": {"hidden_act": "relu2"}},
    "SeedOssForCausalLM": {"output_bias": "attention_out_bias", "defaults": {"attention_bias": True}},
    # biases on every product as use_bias says; rotary pairs of neighbouring dims
    "Ernie4_5ForCausalLM": {"bias_key": "use_bias", "output_bias": "use_bias", "mlp_bias": "use_bias",
                            "defaults": {"tie_word_embeddings": True}},
    "Olmo2ForCausalLM": {"qk_norm": True, "qk_norm_whole": True, "post_norms": True},
    # OLMo 2's post-norms with q and k normed head by head; where it has sliding-window layers, the full ones
    # rotate nothing
    "Exaone4ForCausalLM": {"qk_norm": True, "post_norms": True, "global_every": 4, "rope_sliding_only": True},
    # OLMo 2 with sliding-window layers, every fourth attending to all keys with its own rope
    "Olmo3ForCausalLM": {"qk_norm": True, "qk_norm_whole": True, "post_norms": True, "global_every": 4},
    "MixtralForCausalLM": {"experts": "mixtral"},
    "Qwen2MoeForCausalLM": {"experts": "qwen2_moe", "attention_bias": True, "bias_key": "qkv_bias"},
    "Qwen3MoeForCausalLM": {"experts": "qwen3_moe", "qk_norm": True},
    "OlmoeForCausalLM": {"experts": "olmoe", "qk_norm": True, "qk_norm_whole": True, "clip_qkv": True},
    "GPT2LMHeadModel": {**_LAYER_NORM, "four_wide": True, "fused_qkv": True, "positions": 0, "attention_bias": True,
                        "output_bias": True, "defaults": {"hidden_act": "gelu_new", "layer_norm_eps": 1e-5,
                                                          "tie_word_embeddings": True}},
    "GPTBigCodeForCausalLM": {**_LAYER_NORM, "four_wide": True, "fused_qkv": True, "positions": 0,
                              "attention_bias": True, "output_bias": True, "multi_query": True,
                              "defaults": {"hidden_act": "gelu_pytorch_tanh", "layer_norm_eps": 1e-5,
                                           "multi_query": True, "tie_word_embeddings": True}},
    "GPTNeoXForCausalLM": {**_LAYER_NORM, "fused_qkv": True, "parallel": "use_parallel_residual",
                           "attention_bias": True,
                           "output_bias": "attention_bias",
                           "defaults": {"hidden_act": "gelu", "use_parallel_residual": True, "rotary_pct": 0.25,
                                        "tie_word_embeddings": False}},
    "PhiForCausalLM": {**_LAYER_NORM, "parallel": True, "shared_norm": True, "attention_bias": True,
                       "qk_layer_norm": "qk_layernorm",
                       "output_bias": True, "head_bias": True,
                       "defaults": {"hidden_act": "gelu_new", "partial_rotary_factor": 0.5,
                                    "tie_word_embeddings": False}},
    "StableLmForCausalLM": {"layer_norm": True, "parallel": "use_parallel_residual",
                            "shared_norm": "use_parallel_residual", "bias_key": "use_qkv_bias",
                            "qk_layer_norm": "qk_layernorm",
                            "defaults": {"partial_rotary_factor": 0.25, "tie_word_embeddings": False}},
    "Starcoder2ForCausalLM": {**_LAYER_NORM, "mlp_bias": "use_bias", "bias_key": "use_bias",
                              "output_bias": "use_bias",
                              "defaults": {"hidden_act": "gelu_pytorch_tanh", "use_bias": True,
                                           "tie_word_embeddings": True}},
    "GPTJForCausalLM": {**_LAYER_NORM, "four_wide": True, "parallel": True, "shared_norm": True, "head_bias": True,
                        "defaults": {"hidden_act": "gelu_new", "rotary_dim": 64, "tie_word_embeddings": False}},
    # LayerNorm without a bias; the logits times logit_scale
    "CohereForCausalLM": {"layer_norm": True, "parallel": True, "shared_norm": True, "logit_scale": True,
                          "qk_layer_norm": "use_qk_norm",
                          "defaults": {"logit_scale": 0.0625, "tie_word_embeddings": True}},
    "Cohere2ForCausalLM": {"layer_norm": True, "parallel": True, "shared_norm": True, "logit_scale": True,
                           "global_every": 4, "rope_sliding_only": "windowed_only",
                           "defaults": {"logit_scale": 0.0625, "tie_word_embeddings": True, "sliding_window": 4096}},
    "FalconForCausalLM": {**_LAYER_NORM, "four_wide": True, "falcon": True, "fused_qkv": True,
                          "multi_query": True, "parallel": "parallel_attn", "mlp_bias": "attention_bias",
                          "output_bias": "attention_bias",
                          "defaults": {"hidden_act": "gelu", "parallel_attn": True, "multi_query": True,
                                       "tie_word_embeddings": True}},
    "OPTForCausalLM": {**_LAYER_NORM, "positions": 2, "mlp_bias": "attention_bias", "output_bias": "attention_bias",
                       "defaults": {"hidden_act": "relu", "attention_bias": True, "tie_word_embeddings": True}},
}
# tensors older checkpoints save beside a layer's weights that hold no weight (rope frequencies, causal masks)
_BUFFERS = (".rotary_emb.inv_freq", ".attn.bias", ".attn.masked_bias", ".attention.bias", ".attention.masked_bias")
# a checkpoint's hidden_act -> the activation as ``act_and_mul`` and ``_activated`` name it
_ACTIVATIONS = {"silu": "silu", "swish": "silu", "gelu": "gelu", "gelu_new": "gelu_tanh",
                "gelu_pytorch_tanh": "gelu_tanh", "relu": "relu", "relu2": "relu2"}
# family options whose values other than these change the math in ways the engine does not compute
_REFUSED_OPTIONS = {"alibi": (False, None),
                    "scale_attn_by_inverse_layer_idx": (False, None),
                    "do_layer_norm_before": (True, None), "_remove_final_layer_norm": (False, None),
                    "layer_norm_elementwise_affine": (True, None)}


@dataclass(frozen=True)
class ExpertFamily:
    """How a family's checkpoint holds its mixture-of-experts layers: the module (``block``) holding the router
    (``gate``) and the experts, each expert's gate, up and down projections' names, the config key of an
    expert's intermediate size, whether the top-k weights are always renormalised (else as the config's
    ``norm_topk_prob`` says), whether a shared expert runs beside the routed ones (its output scaled by the
    sigmoid of ``shared_expert_gate``), and whether ``decoder_sparse_step`` and ``mlp_only_layers`` choose
    the sparse layers (else every layer is one)."""
    block: str
    projections: tuple
    size_key: str
    renormalised: bool = False
    shared: bool = False
    sparse_layers: bool = False


_QWEN_EXPERTS = ("gate_proj", "up_proj", "down_proj")
_EXPERT_FAMILIES = {
    "mixtral": ExpertFamily("block_sparse_moe", ("w1", "w3", "w2"), "intermediate_size", renormalised=True),
    "qwen2_moe": ExpertFamily("mlp", _QWEN_EXPERTS, "moe_intermediate_size", shared=True, sparse_layers=True),
    "qwen3_moe": ExpertFamily("mlp", _QWEN_EXPERTS, "moe_intermediate_size", sparse_layers=True),
    "olmoe": ExpertFamily("mlp", _QWEN_EXPERTS, "intermediate_size"),
}
# routing options of other mixture-of-experts families that change the math, and the values that do not
_ROUTING_OPTIONS = {"scoring_func": ("softmax",), "topk_method": ("greedy",), "routed_scaling_factor": (1, 1.0),
                    "n_group": (1,), "topk_group": (1,), "first_k_dense_replace": (0,), "moe_layer_freq": (1,)}


@dataclass(frozen=True)
class MixtureConfig:
    """A model's mixture-of-experts layers: ``layers[i]`` says whether layer i is one (the others run their
    dense MLP), each of ``experts`` experts of ``intermediate_size``, ``top_k`` of them a token, their weights
    renormalised where ``norm_topk_prob``; ``shared_size``: a shared expert's intermediate size (0: none)."""
    family: ExpertFamily
    experts: int
    top_k: int
    intermediate_size: int
    norm_topk_prob: bool
    shared_size: int
    layers: tuple


# a prompt longer than this prefills in chunks of it unless the model is told otherwise
DEFAULT_PREFILL_CHUNK = 2048
_DTYPES = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16"}


@dataclass(frozen=True)
class DecoderConfig:
    architecture: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    norm_eps: float
    rope_theta: float
    rope_scaling: dict | None
    # the rope parameters of the layers whose type is sliding_attention (Gemma 3: another base, no scaling),
    # None where every layer shares rope_theta and rope_scaling
    sliding_rope: dict | None
    max_positions: int
    tie_embeddings: bool
    attention_bias: bool
    output_bias: bool
    qk_norm: bool
    # q and k LayerNormed head by head before rope (Phi, StableLM, Cohere): one weight (and bias) for every head,
    # or a weight a head
    qk_layer_norm: bool
    fused_qkv: bool  # one qkv_proj weight (Phi-3, GPT-2, GPT-NeoX)
    fused_gate_up: bool  # one gate_up_proj weight (Phi-3)
    # a sequence is run again whole when it first passes LongRoPE's original length, its keys then all rotated
    # by the long factors (Phi-3, as transformers generates it)
    rerun_past_original: bool
    rotary_dim: int
    sliding_window: int | None
    layer_types: tuple  # each layer's attention type: sliding_attention or full_attention, as the config names it
    rotary_layers: tuple  # whether each layer rotates its queries and keys (SmolLM3 leaves some unrotated)
    gemma: bool  # embeddings times sqrt(hidden), norms times (1 + weight), gelu-tanh MLP
    norm_plus_one: bool  # norms scale by 1 + weight (Gemma's, Nemotron's)
    norm_weights: bool  # False: norms without weights or biases (OLMo's)
    sandwich: bool  # norms after attention and after the MLP too (Gemma 2)
    post_norms: bool  # norms after attention and after the MLP only: the stream feeds each product unnormed (OLMo 2)
    attention_scale: float | None  # None: 1 / sqrt(head_dim)
    # Granite's: the embeddings times embedding_multiplier, each branch times residual_multiplier before it joins
    # the residual stream, the logits over logits_scaling (None: 1)
    embedding_multiplier: float | None
    residual_multiplier: float | None
    logits_scaling: float | None
    logit_scale: float | None  # Cohere's: the logits times it
    attention_softcap: float | None
    final_softcap: float | None
    dtype: str
    eos_token_ids: tuple[int, ...]
    bos_token_id: int | None
    qk_norm_whole: bool  # the q and k norms over every head's width at once (OLMoE), not head by head
    clip_qkv: float | None  # q, k and v clamped to [-clip_qkv, clip_qkv] after the norms (OLMoE)
    mixture: MixtureConfig | None
    activation: str  # the MLP's, as ``act_and_mul`` names it (gelu_tanh, silu, gelu, relu)
    layer_norm: bool  # LayerNorm (the mean removed, a bias added where the checkpoint has one), not RMS norm
    gated: bool  # the MLP's gate and up products feed act(gate) * up; else up feeds act(up)
    mlp_bias: bool
    head_bias: bool
    # attention and the MLP read the layer's input stream, each through its own norm (GPT-NeoX) or through the
    # one (Phi: ``shared_norm``), and both join the stream at once
    parallel: bool
    shared_norm: bool
    position_offset: int | None  # learned absolute position embeddings: the table's row of position 0

    @functools.cached_property
    def layer_windows(self) -> tuple:
        """Each layer's sliding window (``sliding_window`` for a sliding_attention layer), None for full
        attention."""
        return tuple(self.sliding_window if kind == "sliding_attention" else None for kind in self.layer_types)

    @property
    def normed_after(self) -> bool:
        """Whether attention and the MLP are normed after they run (Gemma 2's sandwich, OLMo 2's post-norms)."""
        return self.sandwich or self.post_norms

    def mixture_at(self, index: int) -> MixtureConfig | None:
        """The mixture of experts layer ``index`` runs in place of a dense MLP, or None."""
        return self.mixture if self.mixture is not None and self.mixture.layers[index] else None

    @classmethod
    def from_hf(cls, config: dict, where: str) -> "DecoderConfig":
        architectures = config.get("architectures") or []
        known = [a for a in architectures if a in SUPPORTED_ARCHITECTURES]
        if not known:
            raise CheckpointError(f"{where}: architectures {architectures} are not supported; supported: "
                                  f"{', '.join(SUPPORTED_ARCHITECTURES)}")
        architecture = known[0]
        family = SUPPORTED_ARCHITECTURES[architecture]
        config = checkpoint.with_llama_keys({**family.get("defaults", {}), **config})
        for option, computed in _REFUSED_OPTIONS.items():
            if config.get(option) not in computed:
                raise CheckpointError(f"{where}: config {option} = {config[option]!r} is not supported for "
                                      f"{architecture}")
        if config.get("word_embed_proj_dim", config.get("hidden_size")) != config.get("hidden_size"):
            raise CheckpointError(f"{where}: config word_embed_proj_dim {config['word_embed_proj_dim']!r} other than "
                                  f"hidden_size (projected embeddings) is not supported")

        def integer(key, default=None, minimum=1):
            value = config.get(key, default)
            if type(value) is not int or value < minimum:
                raise CheckpointError(f"{where}: config {key} = {value!r} is not an integer >= {minimum}")
            return value

        def flag(option, default=False):
            """A family fact: True or False, or the config key that gives it."""
            value = family.get(option, default)
            return bool(config.get(value, False)) if isinstance(value, str) else value

        heads = integer("num_attention_heads")
        hidden = integer("hidden_size")
        kv_heads = integer("num_key_value_heads", heads)
        shared_norm = flag("shared_norm")
        new_falcon = bool(config.get("new_decoder_architecture"))
        if family.get("multi_query"):  # GPTBigCode's and Falcon's key and value heads
            kv_heads = integer("num_kv_heads", heads) if new_falcon or not config.get("multi_query") else 1
        if family.get("falcon"):  # the new architecture norms twice
            shared_norm = bool(config.get("parallel_attn", True)) and not (
                new_falcon and (config.get("num_ln_in_parallel_attn") or 2) == 2)
        if heads % kv_heads:
            raise CheckpointError(f"{where}: num_attention_heads {heads} is not a multiple of num_key_value_heads "
                                  f"{kv_heads}")
        head_dim = config.get("head_dim") or hidden // heads
        if type(head_dim) is not int or head_dim < 2 or head_dim % 2:
            raise CheckpointError(f"{where}: head_dim {head_dim!r} must be an even integer")
        eos = config.get("eos_token_id")
        eos_ids = tuple(eos) if isinstance(eos, list) else (() if eos is None else (eos,))
        dtype = str(config.get("torch_dtype") or config.get("dtype") or "float32").removeprefix("torch.")
        # transformers 5 writes rope_parameters (the base inside; one set per layer type where they differ);
        # earlier versions rope_theta and rope_scaling (and Gemma 3 rope_local_base_freq)
        rope = config.get("rope_parameters") or config.get("rope_scaling") or {}
        if not isinstance(rope, dict):
            raise CheckpointError(f"{where}: config rope_parameters must be an object")
        sliding_rope = None
        if "full_attention" in rope or "sliding_attention" in rope:
            if not all(isinstance(rope.get(t), dict) for t in ("full_attention", "sliding_attention")):
                raise CheckpointError(f"{where}: config rope_parameters by layer type must give an object for "
                                      "full_attention and sliding_attention")
            rope, sliding_rope = rope["full_attention"], rope["sliding_attention"]
        elif config.get("rope_local_base_freq") is not None:
            sliding_rope = {"rope_type": "default", "rope_theta": config["rope_local_base_freq"]}
        if config.get("original_max_position_embeddings") is not None and rope:
            # Phi-3's checkpoints give the original length beside rope_scaling, not in it
            rope = {"original_max_position_embeddings": config["original_max_position_embeddings"], **rope}
        for parameters in (rope, sliding_rope or {}):
            theta = parameters.get("rope_theta", 10000.0)
            if isinstance(theta, bool) or not isinstance(theta, (int, float)) or not theta > 0:
                raise CheckpointError(f"{where}: config rope_theta = {theta!r} is not a positive number")
        factor = rope.get("partial_rotary_factor", config.get("partial_rotary_factor", 1.0))
        if config.get("rotary_dim") is not None:  # GPT-J gives the rotated dims, not their share
            factor = integer("rotary_dim") / head_dim
        rotary_dim = int(head_dim * float(factor))
        if not 2 <= rotary_dim <= head_dim or rotary_dim % 2:
            raise CheckpointError(f"{where}: partial_rotary_factor {factor!r} gives a rotary dim of {rotary_dim}")
        window = config.get("sliding_window") if config.get("use_sliding_window", True) else None
        window = window if type(window) is int and window > 0 else None
        layers = integer("num_hidden_layers")
        layer_types = config.get("layer_types")
        if layer_types is None and "global_every" in family:
            every = (config.get("sliding_window_pattern") or config.get("_sliding_window_pattern")
                     or family["global_every"])
            if type(every) is not int or every < 1:
                raise CheckpointError(f"{where}: config sliding_window_pattern = {every!r} is not an integer >= 1")
            layer_types = ["full_attention" if (i + 1) % every == 0 else "sliding_attention" for i in range(layers)]
        if layer_types is None:
            layer_types = ["full_attention" if window is None else "sliding_attention"] * layers
        elif window is not None:
            if not isinstance(layer_types, list) or len(layer_types) != layers:
                raise CheckpointError(f"{where}: config layer_types must list one type for each of {layers} layers")
            unknown = sorted(set(layer_types) - {"sliding_attention", "full_attention"})
            if unknown:
                raise CheckpointError(f"{where}: config layer_types {unknown} are not supported (sliding_attention "
                                      f"and full_attention are)")
        elif not isinstance(layer_types, list) or len(layer_types) != layers:
            layer_types = ["full_attention"] * layers  # no window: the types choose only the rope tables
        # learned absolute positions (GPT-2, OPT) rotate nothing
        rotary_layers = (family.get("positions") is None,) * layers
        if family.get("rope_sliding_only") and window is not None:  # the full-attention layers rotate nothing
            rotary_layers = tuple(kind == "sliding_attention" for kind in layer_types)
        elif family.get("rope_sliding_only") == "windowed_only":  # Cohere 2 without a window would rotate nothing
            raise CheckpointError(f"{where}: config sliding_window must be given for {architecture}")
        if "no_rope_every" in family:
            every = integer("no_rope_layer_interval", family["no_rope_every"])
            flags = config.get("no_rope_layers")
            flags = [int((i + 1) % every != 0) for i in range(layers)] if flags is None else flags
            if not isinstance(flags, list) or len(flags) != layers or any(f not in (0, 1) for f in flags):
                raise CheckpointError(f"{where}: config no_rope_layers must list a 0 or 1 for each of {layers} layers")
            rotary_layers = tuple(bool(f) for f in flags)
        gemma = family.get("gemma", False)
        if gemma:
            activation = config.get("hidden_activation") or config.get("hidden_act") or "gelu_pytorch_tanh"
            if activation not in ("gelu_pytorch_tanh", "gelu"):
                raise CheckpointError(f"{where}: hidden_activation {activation!r} is not supported for Gemma "
                                      f"(gelu_pytorch_tanh is)")
            activation = "gelu_tanh"
        else:
            activation = _ACTIVATIONS.get(config.get("hidden_act", "silu"))
            gated_ones = ("silu", "gelu_tanh", "gelu")
            if activation is None or (not family.get("plain_mlp") and activation not in gated_ones):
                known = [a for a, ours in _ACTIVATIONS.items() if family.get("plain_mlp") or ours in gated_ones]
                raise CheckpointError(f"{where}: hidden_act {config['hidden_act']!r} is not supported (of "
                                      f"{', '.join(known)})")

        def positive(key):
            value = config.get(key)
            if value is None:
                return None
            if not isinstance(value, (int, float)) or not value > 0:
                raise CheckpointError(f"{where}: config {key} = {value!r} is not a positive number")
            return float(value)
        sandwich = family.get("sandwich", False)
        pre_scalar = positive("query_pre_attn_scalar") if sandwich else None
        multipliers = family.get("multipliers", False)
        bias_key = family.get("bias_key", "attention_bias")
        layer_norm = family.get("layer_norm", False)
        # GPT-2, GPT-J and Falcon leave their MLP's width out for four times the hidden size
        intermediate = integer("intermediate_size") if config.get("intermediate_size") is not None or \
            not family.get("four_wide") else 4 * hidden
        return cls(architecture=architecture, vocab_size=integer("vocab_size"), hidden_size=hidden,
                   intermediate_size=intermediate, num_layers=layers,
                   num_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim,
                   norm_eps=float(config.get("layer_norm_eps", 1e-5) if layer_norm
                                  else config.get("rms_norm_eps", 1e-6)),
                   rope_theta=float(rope.get("rope_theta", config.get("rope_theta", 10000.0))),
                   rope_scaling=rope or None, sliding_rope=sliding_rope,
                   max_positions=integer("max_position_embeddings", 2048),
                   tie_embeddings=bool(config.get("tie_word_embeddings", gemma)),
                   attention_bias=bool(config.get(bias_key, family.get("attention_bias", False))),
                   output_bias=flag("output_bias", "attention_bias"),
                   qk_norm=family.get("qk_norm", False), qk_layer_norm=flag("qk_layer_norm"),
                   fused_qkv=family.get("fused_qkv", False),
                   fused_gate_up=family.get("fused_gate_up", False),
                   rerun_past_original=family.get("rerun_past_original", False),
                   rotary_dim=rotary_dim,
                   sliding_window=window, layer_types=tuple(layer_types),
                   rotary_layers=rotary_layers, gemma=gemma, norm_plus_one=gemma or family.get("norm_plus_one", False),
                   norm_weights=family.get("norm_weights", True),
                   sandwich=sandwich, post_norms=family.get("post_norms", False),
                   # GPT-2's and GPTBigCode's scale_attn_weights false: the scores unscaled
                   attention_scale=(positive("attention_multiplier") if multipliers else
                                    1.0 if config.get("scale_attn_weights") is False else
                                    None if pre_scalar is None else pre_scalar ** -0.5),
                   embedding_multiplier=positive("embedding_multiplier") if multipliers else None,
                   residual_multiplier=positive("residual_multiplier") if multipliers else None,
                   logits_scaling=positive("logits_scaling") if multipliers else None,
                   logit_scale=positive("logit_scale") if family.get("logit_scale") else None,
                   attention_softcap=positive("attn_logit_softcapping") if sandwich else None,
                   final_softcap=positive("final_logit_softcapping") if sandwich else None,
                   dtype=_DTYPES.get(dtype, "float32"), eos_token_ids=tuple(int(e) for e in eos_ids),
                   bos_token_id=config.get("bos_token_id"), qk_norm_whole=family.get("qk_norm_whole", False),
                   clip_qkv=positive("clip_qkv") if family.get("clip_qkv") else None,
                   mixture=_mixture_of(config, family, where, layers, integer), activation=activation,
                   layer_norm=layer_norm, gated=not family.get("plain_mlp", False),
                   mlp_bias=flag("mlp_bias", "mlp_bias"),
                   head_bias=flag("head_bias"), parallel=flag("parallel"), shared_norm=shared_norm,
                   position_offset=family.get("positions"))


def _mixture_of(config: dict, family: dict, where: str, layers: int, integer) -> MixtureConfig | None:
    """The mixture-of-experts layers of a family that has them, read from its config (``integer(key, default,
    minimum)`` reads a checked integer); routing options that would change the math are refused by name
    (router jitter is left alone: it acts in training only)."""
    if "experts" not in family:
        return None
    experts = _EXPERT_FAMILIES[family["experts"]]
    for option, harmless in _ROUTING_OPTIONS.items():
        if config.get(option) is not None and config[option] not in harmless:
            raise CheckpointError(f"{where}: config {option} = {config[option]!r} is not supported (mixture-of-experts "
                                  f"layers route by softmax then top-k)")
    count = integer("num_local_experts" if "num_local_experts" in config else "num_experts")
    top_k = integer("num_experts_per_tok")
    if top_k > count:
        raise CheckpointError(f"{where}: config num_experts_per_tok {top_k} is more than the {count} experts")
    sparse = [True] * layers
    if experts.sparse_layers:
        step = integer("decoder_sparse_step", 1)
        dense = config.get("mlp_only_layers") or []
        if not isinstance(dense, list) or not all(type(i) is int for i in dense):
            raise CheckpointError(f"{where}: config mlp_only_layers must list layer indices, got {dense!r}")
        sparse = [i not in dense and (i + 1) % step == 0 for i in range(layers)]
    shared = integer("shared_expert_intermediate_size") if experts.shared else 0
    norm = experts.renormalised or config.get("norm_topk_prob", False)
    if type(norm) is not bool:
        raise CheckpointError(f"{where}: config norm_topk_prob = {norm!r} is not true or false")
    return MixtureConfig(experts, count, top_k, integer(experts.size_key), norm, shared, tuple(sparse))


def rope_tables(config: DecoderConfig, positions: int, sliding: bool = False,
                long: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin (positions, rotary_dim / 2) in float32, computed as transformers does (float32 inverse
    frequencies, float32 angles, both times the scaling's attention factor), with 3.1-style ("llama3"), linear,
    YaRN and LongRoPE scaling; ``sliding``: the tables of the sliding-window layers where their parameters are
    their own (``sliding_rope``); ``long``: LongRoPE's long factors (a forward past the original length)."""
    dim = config.rotary_dim
    scaling = (config.sliding_rope if sliding and config.sliding_rope is not None else config.rope_scaling) or {}
    theta = float(scaling.get("rope_theta", config.rope_theta))
    # theta ** (2i / dim), each frequency's wavelength over 2 pi
    powers = (np.float32(theta) ** (np.arange(0, dim, 2, dtype=np.int64).astype(np.float32) / np.float32(dim))
              ).astype(np.float32)
    inv_freq = (1.0 / powers).astype(np.float32)
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    attention_factor = 1.0
    if kind == "mrope":  # Qwen2-VL's: a text token's position is the same on every axis, which is plain rope
        kind = "default"
    if kind == "linear":
        inv_freq = (inv_freq / np.float32(scaling["factor"])).astype(np.float32)
    elif kind == "llama3":
        factor, low, high = (float(scaling[k]) for k in ("factor", "low_freq_factor", "high_freq_factor"))
        original = float(scaling["original_max_position_embeddings"])
        wavelength = 2 * math.pi / inv_freq
        smooth = (original / wavelength - low) / (high - low)
        smoothed = (1 - smooth) * inv_freq / factor + smooth * inv_freq
        inv_freq = np.where(wavelength > original / low, inv_freq / factor,
                            np.where(wavelength < original / high, inv_freq, smoothed)).astype(np.float32)
    elif kind == "yarn":
        inv_freq, attention_factor = _yarn(scaling, theta, dim, powers, config.max_positions)
    elif kind == "longrope":
        inv_freq, attention_factor = _longrope(scaling, dim, powers, config.max_positions, long)
    elif kind != "default":
        raise CheckpointError(f"rope_scaling type {kind!r} is not supported (default, linear, llama3, yarn and "
                              "longrope are)")
    angles = np.arange(positions, dtype=np.float32)[:, None] * inv_freq[None, :]
    return ((np.cos(angles) * np.float32(attention_factor)).astype(np.float32),
            (np.sin(angles) * np.float32(attention_factor)).astype(np.float32))


def _yarn_scale(factor: float, mscale: float = 1.0) -> float:
    """YaRN's attention temperature: 0.1 * mscale * ln(factor) + 1 (1 for no extension)."""
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def _yarn(scaling: dict, theta: float, dim: int, powers, max_positions: int) -> tuple[np.ndarray, float]:
    """YaRN's inverse frequencies and attention factor: each frequency interpolated (divided by ``factor``)
    where it turns fewer than ``beta_slow`` times over the original length, kept where more than ``beta_fast``,
    blended linearly between (the bounds floored and ceiled unless ``truncate`` is false)."""
    original = float(scaling["original_max_position_embeddings"])
    factor = float(scaling.get("factor") or max_positions / original)
    attention = scaling.get("attention_factor")
    if attention is None:
        mscale, mscale_all = scaling.get("mscale"), scaling.get("mscale_all_dim")
        attention = (_yarn_scale(factor, mscale) / _yarn_scale(factor, mscale_all) if mscale and mscale_all
                     else _yarn_scale(factor))
    fast, slow = float(scaling.get("beta_fast") or 32), float(scaling.get("beta_slow") or 1)

    def dimension(rotations):  # the dim index whose frequency turns ``rotations`` times over the original length
        return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(theta))
    low, high = dimension(fast), dimension(slow)
    if scaling.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    kept = (1 - np.clip((np.arange(dim // 2, dtype=np.float32) - np.float32(low)) / np.float32(high - low), 0, 1)
            ).astype(np.float32)
    interpolated = (1.0 / (np.float32(factor) * powers)).astype(np.float32)
    extrapolated = (1.0 / powers).astype(np.float32)
    return (interpolated * (1 - kept) + extrapolated * kept).astype(np.float32), float(attention)


def _longrope(scaling: dict, dim: int, powers, max_positions: int, long: bool) -> tuple[np.ndarray, float]:
    """LongRoPE's inverse frequencies (each divided by its short or long factor) and attention factor
    (sqrt(1 + ln(factor) / ln(original length)), factor the extended over the original length)."""
    original = float(scaling["original_max_position_embeddings"])
    factors = scaling["long_factor" if long else "short_factor"]
    if not isinstance(factors, list) or len(factors) != dim // 2:
        raise CheckpointError(f"rope_scaling {'long' if long else 'short'}_factor must list {dim // 2} numbers (one "
                              f"a frequency of the rotary dim {dim})")
    factor = float(scaling.get("factor") or max_positions / original)
    attention = scaling.get("attention_factor")
    if attention is None:
        attention = 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(original))
    return (1.0 / (np.asarray(factors, np.float32) * powers)).astype(np.float32), float(attention)


def _long_rope_past(config: DecoderConfig) -> int | None:
    """The original length past which a forward takes LongRoPE's long factors, None where no layer's rope is
    LongRoPE."""
    for scaling in (config.rope_scaling, config.sliding_rope):
        if scaling and scaling.get("rope_type", scaling.get("type")) == "longrope":
            return int(scaling["original_max_position_embeddings"])
    return None


class _Layer:
    """One decoder layer's weights. The query, key and value projections are one (q + k + v rows, hidden)
    matrix and the gate and up projections one (2 * intermediate, hidden) matrix, as Phi-3 stores them: a
    decode step then streams each through one product. A mixture-of-experts layer holds its router and its
    experts stacked, every expert's gate and up rows in one (experts, 2 * intermediate, hidden) tensor and its
    down projections in one (experts, hidden, intermediate), as ``ops.moe.moe`` takes them (quantized experts as
    stacks of quantized weights, ``quant.stack_experts``), and a shared expert's gate and up rows joined with its
    gate's row (one product; quantized ones joined apart from the float gate's row). Separate checkpoint weights are
    joined here and taken out of ``weights``, so the originals are freed as each layer is built."""

    def __init__(self, weights: dict, prefix: str, config: DecoderConfig, index: int):
        def take(name, wanted=True):
            """The weight ``name``, which must be there; None, left unread, where the config says the layer has
            none (``wanted`` false)."""
            if not wanted:
                return None
            value = weights.pop(prefix + name, None)
            if value is None:
                raise CheckpointError(f"the checkpoint lacks weight {prefix + name}")
            return value

        def check(name, weight, want):
            shape = [sum(w.shape[0] for w in weight), weight[0].shape[1]] if isinstance(weight, list) \
                else list(weight.shape)
            if shape != list(want):
                raise CheckpointError(f"{prefix}: the {name} weights are {shape}, not {list(want)} as the config "
                                      f"gives")
        self.prefix = prefix
        weightless = not config.norm_weights
        self.input_norm = take("input_layernorm.weight", not (config.post_norms or weightless))
        self.post_norm = take("post_attention_layernorm.weight", not (config.shared_norm or weightless))
        # LayerNorms' biases, where the checkpoint gives them
        self.input_norm_bias, self.post_norm_bias = (
            weights.pop(prefix + name, None) if config.layer_norm else None
            for name in ("input_layernorm.bias", "post_attention_layernorm.bias"))
        hidden = config.hidden_size
        mixture = config.mixture_at(index)
        self.router = self.experts_gate_up = self.experts_down = self.shared_gate_up = self.shared_down = None
        self.qkv = (take("self_attn.qkv_proj.weight") if config.fused_qkv
                    else _joined([take(f"self_attn.{n}_proj.weight") for n in "qkv"]))
        # the MLP's first product: its gate and up rows (a gated MLP), or its up rows, and their bias
        self.first_bias = None
        if mixture is not None:
            self.gate_up = None
        elif not config.gated:
            self.gate_up = take("mlp.up_proj.weight")
            self.first_bias = take("mlp.up_proj.bias", config.mlp_bias)
        elif config.fused_gate_up:
            self.gate_up = take("mlp.gate_up_proj.weight")
            self.first_bias = take("mlp.gate_up_proj.bias", config.mlp_bias)
        else:
            self.gate_up = _joined([take("mlp.gate_proj.weight"), take("mlp.up_proj.weight")])
            self.first_bias = _joined_bias([take(f"mlp.{n}_proj.bias", config.mlp_bias) for n in ("gate", "up")],
                                           self.gate_up)
        check("qkv projection", self.qkv, ((config.num_heads + 2 * config.num_kv_heads) * config.head_dim, hidden))
        self.down_bias = take("mlp.down_proj.bias", config.mlp_bias)
        if mixture is None:
            self.down = take("mlp.down_proj.weight")
            check("gate_up projection" if config.gated else "up projection", self.gate_up,
                  ((2 if config.gated else 1) * config.intermediate_size, hidden))
        else:
            self._experts(take, check, mixture, hidden)
        if config.fused_qkv:
            self.qkv_bias = take("self_attn.qkv_proj.bias", config.attention_bias)
        else:
            self.qkv_bias = _joined_bias([take(f"self_attn.{n}_proj.bias", config.attention_bias) for n in "qkv"],
                                         self.qkv)
        self.o = take("self_attn.o_proj.weight")
        self.o_bias = take("self_attn.o_proj.bias", config.output_bias)
        self.q_norm = take("self_attn.q_norm.weight", config.qk_norm)
        self.k_norm = take("self_attn.k_norm.weight", config.qk_norm)
        self.q_norm_bias = self.k_norm_bias = None
        if config.qk_layer_norm:
            (self.q_norm, self.q_norm_bias), (self.k_norm, self.k_norm_bias) = (
                _head_norm(weights, prefix, which, heads, config.head_dim)
                for which, heads in (("q", config.num_heads), ("k", config.num_kv_heads)))
        if config.qk_norm:  # each head's width, or every head's (OLMoE)
            heads = (config.num_heads, config.num_kv_heads) if config.qk_norm_whole else (1, 1)
            check("q_norm", self.q_norm, (heads[0] * config.head_dim,))
            check("k_norm", self.k_norm, (heads[1] * config.head_dim,))
        self.pre_mlp_norm = take("pre_feedforward_layernorm.weight", config.sandwich)
        self.post_mlp_norm = take("post_feedforward_layernorm.weight", config.normed_after)
        if config.norm_plus_one:
            self.input_norm, self.post_norm, self.pre_mlp_norm, self.post_mlp_norm = (
                _one_plus(w) for w in (self.input_norm, self.post_norm, self.pre_mlp_norm, self.post_mlp_norm))
            if config.qk_norm:
                self.q_norm, self.k_norm = _one_plus(self.q_norm), _one_plus(self.k_norm)

    def _experts(self, take, check, mixture: MixtureConfig, hidden: int) -> None:
        """The router, the experts stacked (float or quantized) and the shared expert of a mixture-of-experts
        layer."""
        block, count = mixture.family.block, mixture.experts
        self.router = take(f"{block}.gate.weight")
        if isinstance(self.router, QuantizedWeight):
            raise CheckpointError(f"{self.prefix}{block}.gate: a quantized router is not supported (routers stay float, "
                                  f"as quantizers leave them)")
        check("router", self.router, (count, hidden))
        first = take(f"{block}.experts.0.{mixture.family.projections[0]}.weight")
        if isinstance(first, QuantizedWeight):
            self._quantized_experts(take, check, mixture, hidden, first)
        else:
            self._float_experts(take, check, mixture, hidden, first)
        if mixture.shared_size:
            shared = [take(f"{block}.shared_expert.{n}.weight") for n in ("gate_proj", "up_proj")]
            gate_row = take(f"{block}.shared_expert_gate.weight")
            if all(isinstance(w, Tensor) for w in shared):
                self.shared_gate_up = cat([*shared, gate_row])
            else:  # quantized gate and up rows (joined where they can be), then the float gate's row
                joined = join_rows(shared)
                self.shared_gate_up = [*(shared if joined is None else [joined]), gate_row]
            check("shared expert gate, up and gate", self.shared_gate_up, (2 * mixture.shared_size + 1, hidden))
            self.shared_down = take(f"{block}.shared_expert.down_proj.weight")
            check("shared expert down", self.shared_down, (hidden, mixture.shared_size))

    @staticmethod
    def _expert_weights(take, check, mixture: MixtureConfig, hidden: int, expert: int, gate) -> tuple:
        """Expert ``expert``'s gate, up and down projections, their shapes checked."""
        gate_name, up_name, down_name = mixture.family.projections
        size = mixture.intermediate_size
        named = f"{mixture.family.block}.experts.{expert}."
        gate = take(named + f"{gate_name}.weight") if gate is None else gate
        up, down = take(named + f"{up_name}.weight"), take(named + f"{down_name}.weight")
        for name, weight, want in ((gate_name, gate, (size, hidden)), (up_name, up, (size, hidden)),
                                   (down_name, down, (hidden, size))):
            check(f"expert {expert} {name}", weight, want)
        return gate, up, down

    def _quantized_experts(self, take, check, mixture: MixtureConfig, hidden: int, first) -> None:
        """Quantized experts stacked (``quant.stack_experts``): each expert's gate and up rows joined, its down
        projection alone."""
        gate_up, down = [], []
        for expert in range(mixture.experts):
            gate, up, projection = self._expert_weights(take, check, mixture, hidden, expert,
                                                        first if expert == 0 else None)
            gate_up.append([gate, up])
            down.append([projection])
        try:
            self.experts_gate_up, self.experts_down = stack_experts(gate_up), stack_experts(down)
        except QuantizationError as error:
            raise CheckpointError(f"{self.prefix}{mixture.family.block}.experts: {error}") from None

    def _float_experts(self, take, check, mixture: MixtureConfig, hidden: int, first) -> None:
        """Float experts stacked, each expert's weights copied in and dropped in turn."""
        size, count = mixture.intermediate_size, mixture.experts
        self.experts_gate_up = empty((count, 2 * size, hidden), dtype=first.dtype, device=first.device)
        self.experts_down = empty((count, hidden, size), dtype=first.dtype, device=first.device)
        for expert in range(count):
            gate, up, down = self._expert_weights(take, check, mixture, hidden, expert, first if expert == 0 else None)
            if not all(isinstance(w, Tensor) for w in (gate, up, down)):
                raise CheckpointError(f"{self.prefix}{mixture.family.block}.experts: expert 0 is float but expert "
                                      f"{expert} is quantized; every expert must be one or the other")
            self.experts_gate_up[expert, :size] = gate
            self.experts_gate_up[expert, size:] = up
            self.experts_down[expert] = down


def _head_norm(weights: dict, prefix: str, which: str, heads: int, dim: int) -> tuple:
    """(weight, bias or None) of a q or k LayerNorm over each head's ``dim``: one (dim,) weight for every head
    (Phi's, under ``self_attn.{which}_norm``), or (heads, dim), one a head (Cohere's; StableLM's kept as a norm a
    head, ``{which}_layernorm.norms.{h}``, stacked here)."""
    name = f"{prefix}self_attn.{which}_norm"
    if name + ".weight" in weights:
        weight = weights.pop(name + ".weight")
    else:
        per_head = [weights.pop(f"{prefix}self_attn.{which}_layernorm.norms.{h}.weight", None) for h in range(heads)]
        if any(w is None for w in per_head):
            raise CheckpointError(f"the checkpoint lacks weight {name}.weight (or one a head)")
        weight = cat(per_head).view(heads, dim)
    if tuple(weight.shape) not in ((dim,), (heads, dim)):
        raise CheckpointError(f"{name}: the norm's weight is {list(weight.shape)}, not [{dim}] or [{heads}, {dim}]")
    return weight, weights.pop(name + ".bias", None)


def _joined(weights: list):
    """Projection weights stacked by output rows into one matrix, so one product computes them all; a list
    of them where quantized ones cannot be joined (``quant.join_rows``)."""
    if all(isinstance(w, Tensor) for w in weights):
        return cat(weights)
    joined = join_rows(weights)
    return weights if joined is None else joined


def _joined_bias(biases: list, joined):
    """The biases of projections ``_joined`` joined into ``joined``: None where they have none, one vector where
    the weights became one, the list where they stayed a list."""
    if biases[0] is None:
        return None
    return biases if isinstance(joined, list) else cat(biases)


def _project(h: Tensor, weight, bias=None, fp8_activations: bool = False) -> Tensor:
    """``h`` times a projection weight from ``_joined`` (one weight, or a list whose products are joined)."""
    if isinstance(weight, list):
        biases = bias if bias is not None else [None] * len(weight)
        return cat([linear(h, w, b, fp8_activations) for w, b in zip(weight, biases)], dim=-1)
    return linear(h, weight, bias, fp8_activations)


def _activated(x: Tensor, activation: str) -> Tensor:
    """``activation`` (as ``DecoderConfig.activation`` names it) of ``x``: a plain MLP's."""
    if activation == "gelu_tanh":
        return F.gelu(x, approximate="tanh")
    if activation == "relu2":
        positive = F.relu(x)
        return positive * positive
    return {"gelu": F.gelu, "relu": F.relu, "silu": F.silu}[activation](x)


def _one_plus(weight):
    """A Gemma norm's weight as the norm multiplies by it: 1 + weight, summed in float32 as transformers
    does (then in the model's dtype, where a float32 model gives the same products)."""
    if weight is None:
        return None
    return (weight.to("float32") + 1.0).to(weight.dtype)


class DecoderModel:
    """A loaded decoder. ``prefill`` runs one prompt into the cache and gives its last position's logits;
    ``decode`` runs one token for each of a batch of sequences. ``fp8_activations``: products of more rows than
    a GEMV takes round them to float8 (``quantized.linear``)."""

    def __init__(self, config: DecoderConfig, weights: dict, device, dtype, prefill_chunk: int = DEFAULT_PREFILL_CHUNK,
                 fp8_activations: bool = False):
        if type(prefill_chunk) is not int or prefill_chunk < 1:
            raise ValueError(f"prefill_chunk must be an integer >= 1, got {prefill_chunk!r}")
        self.config, self.device, self.dtype, self.prefill_chunk = config, device, dtype, prefill_chunk
        self.fp8_activations = fp8_activations
        self.embed = weights["model.embed_tokens.weight"]
        self.norm = weights.get("model.norm.weight")
        if self.norm is None and config.norm_weights:
            raise CheckpointError("the checkpoint lacks weight model.norm.weight")
        self.norm = _one_plus(self.norm) if config.norm_plus_one else self.norm
        self.norm_bias = weights.get("model.norm.bias")
        self.positions = None
        if config.position_offset is not None:
            table = weights.get("model.embed_positions.weight")
            if table is None or table.shape[0] < config.position_offset + config.max_positions:
                raise CheckpointError(f"the checkpoint's position embeddings must hold {config.max_positions} "
                                      f"positions after {config.position_offset} rows")
            self.positions = table[config.position_offset:]
        # Gemma's sqrt(hidden), rounded to the model's dtype as transformers rounds it
        self.embed_scale = (make_tensor(np.asarray(math.sqrt(config.hidden_size), np.float32), device=device).to(dtype)
                            if config.gemma else None)
        self.lm_head = self.embed if config.tie_embeddings else weights.get("lm_head.weight")
        if self.lm_head is None:
            raise CheckpointError("the checkpoint lacks lm_head.weight (and tie_word_embeddings is false)")
        self.head_bias = weights.get("lm_head.bias") if config.head_bias else None
        if config.head_bias and self.head_bias is None:
            raise CheckpointError("the checkpoint lacks lm_head.bias")
        self.layers = [_Layer(weights, f"model.layers.{i}.", config, i) for i in range(config.num_layers)]
        # a layer weight no step reads would be dropped silently: a bias or norm the config does not announce
        unread = sorted(name for name in weights if name.startswith("model.layers.") and not name.endswith(_BUFFERS))
        if unread:
            raise CheckpointError(f"the checkpoint holds {len(unread)} layer weights that {config.architecture} with "
                                  f"this config does not read (the first: {unread[0]}); its config may leave out a "
                                  f"setting (a bias, a norm) the engine does not know")
        # each layer's cos and sin tables: the sliding-window layers' own where their rope differs. LongRoPE's
        # rows follow for the forwards past the original length (``_rope_rows``): rows P on are the long factors'
        positions = config.max_positions
        self.long_rope_past = _long_rope_past(config)

        def tables_of(sliding):
            short = rope_tables(config, positions, sliding)
            if self.long_rope_past is not None:
                long = rope_tables(config, positions, sliding, long=True)
                short = tuple(np.concatenate(pair) for pair in zip(short, long))
            return tuple(make_tensor(t, device=device) for t in short)
        tables = {False: tables_of(False)}
        if config.sliding_rope is not None:
            tables[True] = tables_of(True)
        # a layer that rotates nothing takes tables of angle 0: cos 1 and sin 0 leave every finite value as it is
        rows = positions * (1 if self.long_rope_past is None else 2)
        unrotated = None if all(config.rotary_layers) else tuple(
            make_tensor(np.full((rows, config.rotary_dim // 2), value, np.float32), device=device) for value in (1, 0))
        self.rope = [tables[config.sliding_rope is not None and kind == "sliding_attention"] if rotary else unrotated
                     for kind, rotary in zip(config.layer_types, config.rotary_layers)]
        self._int32 = get_dtype("int32")

    def new_cache(self, tokens: int, block_size: int = 16) -> PagedKVCache:
        c = self.config
        return PagedKVCache(c.num_layers, tokens, block_size, c.num_kv_heads, c.head_dim, self.dtype, self.device)

    def _ints(self, values) -> Tensor:
        return make_tensor(np.asarray(values, dtype=np.int32), device=self.device)

    def _attention_inputs(self, layer: _Layer, qkv: Tensor, positions: Tensor, cache: PagedKVCache, index: int,
                          slots: Tensor):
        """The rotated queries and keys of the projected rows ``qkv`` (rows, q + k + v widths); the keys and
        values also go into layer ``index``'s pages of ``cache`` at ``slots``."""
        c = self.config
        rows = qkv.shape[0]
        q_width, kv_width = c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim
        q, k, v = qkv[:, :q_width], qkv[:, q_width:q_width + kv_width], qkv[:, q_width + kv_width:]
        if c.qk_norm_whole:
            q = rms_norm(q, (q_width,), layer.q_norm, c.norm_eps)
            k = rms_norm(k, (kv_width,), layer.k_norm, c.norm_eps)
        q = q.view(rows, c.num_heads, c.head_dim)
        k, v = (t.view(rows, c.num_kv_heads, c.head_dim) for t in (k, v))
        if c.qk_norm and not c.qk_norm_whole:
            q = rms_norm(q, (c.head_dim,), layer.q_norm, c.norm_eps)
            k = rms_norm(k, (c.head_dim,), layer.k_norm, c.norm_eps)
        if c.qk_layer_norm:
            q, k = (self._head_layer_norm(t, w, b) for t, w, b in ((q, layer.q_norm, layer.q_norm_bias),
                                                                    (k, layer.k_norm, layer.k_norm_bias)))
        if c.clip_qkv is not None:
            q, k, v = (t.clamp(-c.clip_qkv, c.clip_qkv) for t in (q, k, v))
        cos, sin = self.rope[index]
        q, k = rotary_append(q, k, v, cos, sin, positions, cache.keys[index], cache.values[index], slots)
        return q, k, v

    def _head_layer_norm(self, t: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        """The LayerNorm of each head of ``t`` (rows, heads, head_dim): by one weight for every head, or a weight a
        head (rows of ``weight``), its product rounded once more."""
        c = self.config
        if weight.ndim == 1:
            return F.layer_norm(t, (c.head_dim,), weight, bias, c.norm_eps)
        normed = F.layer_norm(t, (c.head_dim,), None, None, c.norm_eps) * weight
        return normed if bias is None else normed + bias

    def _embed(self, tokens: Tensor, positions: Tensor) -> Tensor:
        """The tokens' embeddings, plus their positions' where the family learned them (``positions``: one a row)."""
        x = F.embedding(tokens, self.embed)
        if self.positions is not None:
            x = x + F.embedding(positions.view(-1), self.positions)
        if self.config.embedding_multiplier is not None:
            x = x * self.config.embedding_multiplier
        return x * self.embed_scale if self.embed_scale is not None else x

    def _capped(self, logits: Tensor) -> Tensor:
        """The head's logits as the model gives them: over Granite's logits_scaling, times Cohere's logit_scale,
        soft-capped (Gemma 2)."""
        c = self.config
        if c.logits_scaling is not None:
            logits = logits / c.logits_scaling
        if c.logit_scale is not None:
            logits = logits * c.logit_scale
        return F.tanh(logits / c.final_softcap) * c.final_softcap if c.final_softcap is not None else logits

    def _branch(self, x: Tensor) -> Tensor:
        """An attention or MLP output as it joins the residual stream (times Granite's residual_multiplier)."""
        m = self.config.residual_multiplier
        return x if m is None else x * m

    def _norm(self, x: Tensor, residual: Tensor | None, weight: Tensor, bias: Tensor | None = None):
        """(norm(x + residual), x + residual), or (norm(x), x) where ``residual`` is None: the family's norm, RMS or
        LayerNorm (``bias`` added)."""
        c, hidden = self.config, (self.config.hidden_size,)
        if c.layer_norm:
            if residual is None:
                return F.layer_norm(x, hidden, weight, bias, c.norm_eps), x
            return add_layer_norm(x, residual, hidden, weight, bias, c.norm_eps)
        if residual is None:
            return rms_norm(x, hidden, weight, c.norm_eps), x
        return add_rms_norm(x, residual, hidden, weight, c.norm_eps)

    def _normed_product(self, x: Tensor, residual: Tensor | None, norm: Tensor | None, weight, bias=None,
                        fuse: bool = False, norm_bias: Tensor | None = None, unnormed: bool = False):
        """(norm(x + residual) times ``weight`` plus ``bias``, x + residual): the norm of the new residual
        stream (of ``x`` alone where ``residual`` is None) feeding a projection. With ``fuse`` and one weight,
        float or quantized, one launch computes both (``rms_norm_linear``); otherwise (or for a list of
        quantized weights that ``_joined`` could not join) the norm, then the product. ``unnormed``: the
        stream feeds the product as it is (a post-norm family's, OLMo 2)."""
        c = self.config
        if unnormed:
            h = x if residual is None else residual + x
            return _project(h, weight, bias, self.fp8_activations), h
        if fuse and not isinstance(weight, list) and c.layer_norm:
            if residual is None:
                return layer_norm_linear(x, norm, norm_bias, weight, bias, c.norm_eps), x
            return add_layer_norm_linear(x, residual, norm, norm_bias, weight, bias, c.norm_eps)
        if fuse and not isinstance(weight, list):
            if residual is None:
                return rms_norm_linear(x, norm, weight, bias, c.norm_eps), x
            return add_rms_norm_linear(x, residual, norm, weight, bias, c.norm_eps)
        h, residual = self._norm(x, residual, norm, norm_bias)
        return _project(h, weight, bias, self.fp8_activations), residual

    def _parallel_inputs(self, layer: _Layer, branch: Tensor, residual: Tensor | None, fuse: bool):
        """(qkv, the MLP's first product, the new stream) of a parallel block, whose attention and MLP read the
        stream normed once (a shared norm) or by a norm each. With ``fuse`` each norm runs in its product's
        prologue (the MLP's recomputing the stream's statistics); otherwise the norms run first."""
        c = self.config
        mlp_norm, mlp_norm_bias = ((layer.input_norm, layer.input_norm_bias) if c.shared_norm
                                   else (layer.post_norm, layer.post_norm_bias))
        if fuse:
            qkv, stream = self._normed_product(branch, residual, layer.input_norm, layer.qkv, layer.qkv_bias, True,
                                               layer.input_norm_bias)
            first, _ = self._normed_product(stream, None, mlp_norm, layer.gate_up, layer.first_bias, True,
                                            mlp_norm_bias)
            return qkv, first, stream
        h, stream = self._norm(branch, residual, layer.input_norm, layer.input_norm_bias)
        h_mlp = h if c.shared_norm else self._norm(stream, None, mlp_norm, mlp_norm_bias)[0]
        return (_project(h, layer.qkv, layer.qkv_bias, self.fp8_activations),
                _project(h_mlp, layer.gate_up, layer.first_bias, self.fp8_activations), stream)

    def _mlp(self, layer: _Layer, first: Tensor, fuse: bool) -> Tensor:
        """A dense MLP's output from its first product ``first`` (the gate and up rows, or the up rows of a
        plain MLP): the activation, then the down product; with ``fuse``, a gated activation in the down
        product's prologue (``act_and_mul_linear``)."""
        c = self.config
        if fuse and c.gated:
            return act_and_mul_linear(first, layer.down, layer.down_bias, activation=c.activation)
        if c.gated:
            return linear(F.act_and_mul(first, activation=c.activation), layer.down, layer.down_bias,
                          self.fp8_activations)
        return linear(_activated(first, c.activation), layer.down, layer.down_bias, self.fp8_activations)

    def _layers(self, x: Tensor, positions: Tensor, cache: PagedKVCache, slots: Tensor, attend,
                last: int | None = None) -> Tensor:
        """The logits of the residual stream ``x`` (rows, hidden) after every layer, the final norm and the
        head (of its rows from ``last`` on, where given). Decode batches of at most ``FOLD_MAX_ROWS`` rows (``last``
        None) fold each norm into the product after it and the gated activation into the down
        projection (``matmul_prologue``, float or quantized weights alike; q, k and v or gate and up weights
        that stay a list, act-order or block-scaled ones, take their norm apart): a layer is [add + norm, qkv]
        -> rotary and append -> attention -> [o] -> [add + norm, gate_up] -> [act, down], and the last layer's
        add + norm feeds the head. A mixture-of-experts layer's add + norm runs alone before its experts."""
        c = self.config
        hidden = (c.hidden_size,)
        fuse = last is None and x.shape[0] <= FOLD_MAX_ROWS
        # each norm adds the branch before it to the residual stream (the embeddings start the stream)
        branch, residual = x, None
        for index, layer in enumerate(self.layers):
            if c.parallel:  # attention and the MLP read the same stream; both join it at once
                qkv, first, residual = self._parallel_inputs(layer, branch, residual, fuse)
            else:
                qkv, residual = self._normed_product(branch, residual, layer.input_norm, layer.qkv, layer.qkv_bias,
                                                     fuse, layer.input_norm_bias, c.post_norms)
            q, k, v = self._attention_inputs(layer, qkv, positions, cache, index, slots)
            attended = attend(index, q, k, v).reshape(qkv.shape[0], c.num_heads * c.head_dim)
            out = self._branch(linear(attended, layer.o, layer.o_bias, self.fp8_activations))
            if c.parallel:
                branch = out + self._mlp(layer, first, fuse)
                continue
            if c.normed_after:
                out = rms_norm(out, hidden, layer.post_norm, c.norm_eps)
            mlp_norm = layer.pre_mlp_norm if c.normed_after else layer.post_norm
            if layer.router is not None:
                h, residual = add_rms_norm(out, residual, hidden, mlp_norm, c.norm_eps)
                branch = self._mixture(layer, h)
            else:
                first, residual = self._normed_product(out, residual, mlp_norm, layer.gate_up, layer.first_bias,
                                                       fuse, layer.post_norm_bias, c.post_norms)
                branch = self._mlp(layer, first, fuse)
            if c.normed_after:
                branch = rms_norm(branch, hidden, layer.post_mlp_norm, c.norm_eps)
            branch = self._branch(branch)
        if fuse:
            return self._capped(self._normed_product(branch, residual, self.norm, self.lm_head, self.head_bias, True,
                                                     self.norm_bias)[0])
        h, _ = self._norm(branch, residual, self.norm, self.norm_bias)
        return self._capped(linear(h if last is None else h[last:], self.lm_head, self.head_bias))

    def _mixture(self, layer: _Layer, h: Tensor) -> Tensor:
        """A mixture-of-experts layer's output for the normed rows ``h``: the routed experts' (``moe``), plus a
        shared expert's times the sigmoid of its gate, where the layer has one."""
        c, mixture = self.config, self.config.mixture
        out = moe(h, layer.router, layer.experts_gate_up, layer.experts_down, mixture.top_k, mixture.norm_topk_prob,
                  c.activation)
        if layer.shared_gate_up is None:
            return out
        # the shared expert's gate and up rows, then its gate's row
        joined = _project(h, layer.shared_gate_up, None, self.fp8_activations)
        shared = linear(F.act_and_mul(joined[:, :-1], activation=c.activation), layer.shared_down, None,
                        self.fp8_activations)
        return out.addcmul(F.sigmoid(joined[:, -1:]), shared)

    def reruns_at(self, length: int) -> bool:
        """Whether a sequence of ``length`` cached tokens is run again whole, with its next token, rather than
        decoded (``DecoderConfig.rerun_past_original``): its next forward is the first past the original length."""
        return self.config.rerun_past_original and self.long_rope_past is not None and length == self.long_rope_past

    def _rope_rows(self, positions: np.ndarray, forward_length) -> np.ndarray:
        """The rope table rows of ``positions`` in a forward over ``forward_length`` positions (an array, one a
        row): the positions themselves, or LongRoPE's long rows where the forward runs past the original length,
        as transformers picks the factors by the forward's length (a prompt's whole, a decode step's own)."""
        if self.long_rope_past is None:
            return positions
        long = np.asarray(forward_length) > self.long_rope_past
        return (positions + np.where(long, self.config.max_positions, 0)).astype(np.int32)

    def prefill(self, cache: PagedKVCache, sequence: int, tokens, every_position: bool = False) -> Tensor:
        """Logits (1, vocab) after the prompt ``tokens`` of a fresh cache ``sequence``, run in chunks of at
        most ``prefill_chunk`` tokens; with ``every_position``, (len(tokens), vocab): the logits after each
        token (teacher forcing)."""
        self._check_length(len(tokens))
        chunks = [self._prefill_chunk(cache, sequence, tokens[start:start + self.prefill_chunk], start,
                                      every_position, len(tokens))
                  for start in range(0, len(tokens), self.prefill_chunk)]
        return cat(chunks) if every_position and len(chunks) > 1 else chunks[-1]

    def _prefill_chunk(self, cache: PagedKVCache, sequence: int, tokens, offset: int, every_position: bool,
                       prompt_length: int) -> Tensor:
        """Logits (1, vocab) after ``tokens`` (after each of them with ``every_position``), positions
        ``offset`` on of ``sequence``, whose first ``offset`` are in the cache, of a prompt of ``prompt_length``:
        the chunk's queries attend to those keys (read from its pages) and to its own."""
        c = self.config
        length = len(tokens)
        slots = self._ints(cache.extend(sequence, length))
        positions = self._ints(self._rope_rows(np.arange(offset, offset + length), prompt_length).reshape(length, 1))
        x = self._embed(self._ints(tokens), positions)
        pages = self._ints(cache.block_table([sequence])[0]) if offset else None

        def attend(index, q, k, v):
            if pages is not None:
                k, v = (self._sequence_rows(pool, pages, offset + length) for pool in (cache.keys[index],
                                                                                       cache.values[index]))
            out = prefill_attention(q.permute(1, 0, 2), k.permute(1, 0, 2), v.permute(1, 0, 2),
                                    scale=c.attention_scale, softcap=c.attention_softcap,
                                    window=c.layer_windows[index], query_offset=offset)
            return out.permute(1, 0, 2)
        return self._layers(x, positions, cache, slots, attend, 0 if every_position else length - 1)

    @staticmethod
    def _sequence_rows(pool: Tensor, pages: Tensor, length: int) -> Tensor:
        """(length, kv_heads, head_dim): a sequence's first ``length`` keys or values, gathered from its
        ``pages`` of ``pool`` (num_blocks, block_size, kv_heads, head_dim)."""
        blocks, block_size, heads, dim = pool.shape
        rows = F.embedding(pages, pool.view(blocks, block_size * heads * dim))
        return rows.view(-1, heads, dim)[:length]

    def decode_inputs(self, cache: PagedKVCache, sequences: list[int], tokens, rows: int | None = None,
                      width: int | None = None) -> dict[str, np.ndarray]:
        """The host arrays of one decode step of ``sequences`` (each one token longer after it), padded to
        ``rows`` sequences and ``width`` pages: a padding row appends nowhere (slot -1) and attends to no
        key (length 0)."""
        lengths = [cache.length(s) for s in sequences]
        for length in lengths:
            self._check_length(length + 1)
        rows = rows or len(sequences)
        slots = [cache.extend(s, 1)[0] for s in sequences]
        pages = cache.block_table(sequences)
        width = width or len(pages[0])
        table = np.zeros((rows, width), np.int32)
        for row, page_list in enumerate(pages):
            table[row, :len(page_list)] = page_list
        padding = rows - len(sequences)
        return {"tokens": np.asarray(list(tokens) + [0] * padding, np.int32),
                "positions": self._rope_rows(np.asarray(lengths + [0] * padding, np.int32),
                                             np.asarray([n + 1 for n in lengths] + [0] * padding)).reshape(rows, 1),
                "slots": np.asarray(slots + [-1] * padding, np.int32),
                "table": table, "seq_lens": np.asarray([n + 1 for n in lengths] + [0] * padding, np.int32)}

    def decode_from(self, cache: PagedKVCache, inputs: dict) -> Tensor:
        """Logits (rows, vocab) of a decode step whose inputs are already on the device (``decode_inputs``'s
        arrays as tensors): it reads nothing on the host, so it can be captured and replayed."""
        c = self.config
        x = self._embed(inputs["tokens"], inputs["positions"])

        def attend(index, q, k, v):
            return paged_attention(q, cache.keys[index], cache.values[index], inputs["table"], inputs["seq_lens"],
                                   scale=c.attention_scale, softcap=c.attention_softcap,
                                   window=c.layer_windows[index])
        return self._layers(x, inputs["positions"], cache, inputs["slots"], attend)

    def decode(self, cache: PagedKVCache, sequences: list[int], tokens) -> Tensor:
        """Logits (batch, vocab) after one more token for each of ``sequences``, op by op."""
        arrays = self.decode_inputs(cache, sequences, tokens)
        return self.decode_from(cache, {name: self._ints(a) for name, a in arrays.items()})

    def _check_length(self, length: int) -> None:
        c = self.config
        if length > c.max_positions:
            raise ValueError(f"the sequence reaches {length} tokens, past the model's context of "
                             f"{c.max_positions} (max_position_embeddings)")


def load_model(directory, device=None, dtype=None, prefill_chunk: int = DEFAULT_PREFILL_CHUNK,
               quantize: str | None = None, fp8_activations: bool | None = None) -> DecoderModel:
    """The decoder in the Hugging Face checkpoint ``directory`` on ``device``, in ``dtype`` (default: the
    checkpoint's), prefilling prompts in chunks of at most ``prefill_chunk`` tokens. A quantized checkpoint's
    linear layers stay quantized; ``quantize`` (int4, int8 or fp8) quantizes a float one's on load.
    ``fp8_activations`` (True, False, or None: as the checkpoint says, ``quantized.fp8_activations_of``): fp8
    weights multiply prefill-sized rows rounded to float8 on the float8 matrix units."""
    import os
    directory = os.fspath(directory)
    hf_config, prefix = checkpoint.decoder_config(directory)
    config = DecoderConfig.from_hf(hf_config, directory)
    device = resolve(device)
    dtype = get_dtype(dtype or config.dtype)
    if dtype.name not in _DTYPES:
        raise TypeError(f"a model runs in float32, float16 or bfloat16, not {dtype.name}")
    # a GPU without bfloat16 matrix units (before Ampere) cannot compile bfloat16 products
    if dtype.name == "bfloat16" and backend_for(device).facts.get("native_bf16") is False:
        raise TypeError(f"{device} has no bfloat16 arithmetic (its facts say native_bf16: false); load the model "
                        f"with dtype='float16' or 'float32' (nbx generate --dtype float16)")
    weights = load_weights(directory, device, dtype,
                           lambda name: name.startswith((prefix + "model.", prefix + "lm_head.")), quantize,
                           checkpoint.WEIGHT_NAMES.get(config.architecture), config)
    weights = {name[len(prefix):]: weight for name, weight in weights.items()}
    if "model.embed_tokens.weight" not in weights:
        raise CheckpointError(f"{directory}: the checkpoint lacks weight model.embed_tokens.weight")
    fp8_rows = fp8_activations_of(quantization_of(hf_config, directory), fp8_activations, weights,
                                  backend_for(device).facts, directory)
    return DecoderModel(config, weights, device, dtype, prefill_chunk, fp8_rows)
