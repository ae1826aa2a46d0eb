"""A Hugging Face checkpoint directory read as a stranger's files: ``config.json``, its safetensors weights
(one file, or shards named by ``model.safetensors.index.json``) and ``generation_config.json``.

A shard is named by its index; only a plain file name inside the directory is taken (no separators, no
``..``). The directory itself may be a snapshot of Hugging Face's cache, whose files are links to blobs
elsewhere: a link is followed because the user named the directory, not because a file asked for it."""
from __future__ import annotations

import json
import math
import os
import re
import stat
from dataclasses import dataclass, field

import numpy as np

from .. import progress
from ..io.safetensors import SafetensorsError, safe_open
from ..ops.creation import tensor as make_tensor

__all__ = ["CheckpointError", "read_json", "decoder_config", "weight_files", "load_weights", "WeightNames",
           "WEIGHT_NAMES", "with_llama_keys"]

CONFIG_FILE = "config.json"
GENERATION_CONFIG_FILE = "generation_config.json"
SINGLE_WEIGHTS_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
# config files are small; a larger one is not a config
MAX_JSON_BYTES = 64 << 20
MAX_SHARDS = 4096


class CheckpointError(ValueError):
    """A checkpoint directory that cannot be read: a missing, malformed or hostile file."""


def _plain_file(directory: str, name, entry: str) -> str:
    """The path of the regular file ``name`` in ``directory``; ``name`` must be a plain file name."""
    if not isinstance(name, str) or not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise CheckpointError(f"{directory}: {entry} names {name!r}, which is not a plain file name in the directory")
    path = os.path.join(directory, name)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise CheckpointError(f"{directory}: {entry}: {name} is missing") from None
    except OSError as error:
        raise CheckpointError(f"{directory}: {entry}: {name} cannot be opened ({type(error).__name__})") from None
    if not stat.S_ISREG(mode):
        raise CheckpointError(f"{directory}: {entry}: {name} is not a regular file")
    return path


def read_json(directory: str, name: str, required: bool = True) -> dict | None:
    """The JSON object in ``directory/name``; None when it is absent and not ``required``."""
    if not required and not os.path.exists(os.path.join(directory, name)):
        return None
    path = _plain_file(directory, name, name)
    if os.path.getsize(path) > MAX_JSON_BYTES:
        raise CheckpointError(f"{path}: larger than {MAX_JSON_BYTES} bytes; not a config file")
    try:
        with open(path, "rb") as file:
            document = json.loads(file.read())
    except (OSError, ValueError) as error:
        raise CheckpointError(f"{path}: not valid JSON ({type(error).__name__})") from None
    if not isinstance(document, dict):
        raise CheckpointError(f"{path}: expected a JSON object at the top")
    return document


# multimodal checkpoints whose text decoder runs alone: architecture -> (the decoder's architecture, the prefix of
# its weights' names); the decoder's config is ``text_config`` (where there is one), with the keys it leaves to the
# top level
TEXT_DECODERS = {"Gemma3ForConditionalGeneration": ("Gemma3ForCausalLM", "language_model."),
                 "Mistral3ForConditionalGeneration": ("MistralForCausalLM", "language_model."),
                 "Qwen2VLForConditionalGeneration": ("Qwen2ForCausalLM", ""),
                 "Qwen2_5_VLForConditionalGeneration": ("Qwen2ForCausalLM", "")}
# the prefixes a decoder's weight names may carry, its own ("") first
TEXT_PREFIXES = tuple(dict.fromkeys(("", *(prefix for _, prefix in TEXT_DECODERS.values()))))
_GPT2_KEYS = {"n_embd": "hidden_size", "n_head": "num_attention_heads", "n_layer": "num_hidden_layers",
              "n_positions": "max_position_embeddings", "n_inner": "intermediate_size",
              "layer_norm_epsilon": "layer_norm_eps", "activation_function": "hidden_act"}
# config keys some families name otherwise, read under the Llama lineage's names
CONFIG_KEYS = {
    "GPT2LMHeadModel": _GPT2_KEYS,
    "GPTBigCodeForCausalLM": _GPT2_KEYS,
    "GPTNeoXForCausalLM": {"rotary_pct": "partial_rotary_factor", "rotary_emb_base": "rope_theta"},
    "Starcoder2ForCausalLM": {"norm_epsilon": "layer_norm_eps"},
    "NemotronForCausalLM": {"norm_eps": "layer_norm_eps"},
    "GPTJForCausalLM": _GPT2_KEYS,
    "FalconForCausalLM": {"layer_norm_epsilon": "layer_norm_eps", "ffn_hidden_size": "intermediate_size",
                          "activation": "hidden_act", "bias": "attention_bias"},
    "OPTForCausalLM": {"ffn_dim": "intermediate_size", "activation_function": "hidden_act",
                       "enable_bias": "attention_bias"},
}
_TOP_LEVEL_KEYS = ("eos_token_id", "bos_token_id", "pad_token_id", "torch_dtype", "dtype", "quantization_config")


def decoder_config(directory: str) -> tuple[dict, str]:
    """(config, prefix): ``config.json`` as the text decoder reads it (a multimodal checkpoint's ``text_config``,
    ``TEXT_DECODERS``) and the prefix its weights' names carry in the checkpoint ("" for a decoder's own)."""
    config = read_json(directory, CONFIG_FILE)
    architectures = config.get("architectures")
    for architecture in architectures if isinstance(architectures, list) else []:
        if architecture in TEXT_DECODERS:
            decoder, prefix = TEXT_DECODERS[architecture]
            # Qwen2-VL's checkpoints written before transformers 5 keep the decoder's keys at the top level
            text = config.get("text_config", config)
            if not isinstance(text, dict):
                raise CheckpointError(f"{directory}: {CONFIG_FILE} of {architecture} has a text_config that is not "
                                      "an object")
            inherited = {key: config[key] for key in _TOP_LEVEL_KEYS if key in config}
            # the whole model ties its head to the embeddings or not, whatever text_config says
            tied = {"tie_word_embeddings": config["tie_word_embeddings"]} if "tie_word_embeddings" in config else {}
            return {**inherited, **text, **tied, "architectures": [decoder]}, prefix
    return with_llama_keys(config), ""


def with_llama_keys(config: dict) -> dict:
    """``config`` with the keys its family names otherwise (``CONFIG_KEYS``) under the Llama lineage's names (a key
    the config also gives under that name keeps the Llama-named value)."""
    architectures = config.get("architectures")
    for architecture in architectures if isinstance(architectures, list) else []:
        if architecture in CONFIG_KEYS:
            aliases = CONFIG_KEYS[architecture]
            return {aliases.get(key, key): value for key, value in config.items()
                    if aliases.get(key, key) == key or aliases[key] not in config}
    return config


def _pairs_apart(dim: int, rotary: int) -> np.ndarray:
    """A head's dims reordered so that rotary pairs of neighbouring dims sit half the rotary width apart: the rotary
    dims' even ones, then their odd ones, then the rest."""
    return np.concatenate([np.arange(0, rotary, 2), np.arange(1, rotary, 2), np.arange(rotary, dim)])


@dataclass(frozen=True)
class WeightNames:
    """How a family's checkpoint names its decoder's weights, read under the Llama lineage's names (the model reads
    those alone): ``outer`` maps whole-model prefixes (embeddings, final norm, head) to Llama's; ``layer`` is the
    pattern of layer i's prefix (one group: i) and ``parts`` maps its modules to Llama's. ``in_out``: Llama
    modules stored (inputs, outputs), transposed as they are read (GPT-2's Conv1D); ``grouped_qkv``: the fused
    q, k, v rows come by kv head, each one's queries then its key and value (GPT-NeoX's a q, k and v a head,
    Falcon's groups), reordered as they are read to all q rows, then k, then v;
    ``interleaved_rope``: the rotary pairs are a head's neighbouring dims (GPT-J's, Cohere's), and each head's q
    and k rows are reordered (the rotary dims' even ones, then their odd ones, then the rest) so that the pairs
    are half a rotary width apart, as the rotary kernel takes them: q and k permuted alike leave every score
    as it was (their per-head norms' weights permuted alike too).
    A name nothing maps is not read. A quantized checkpoint's tensors (``qweight``, ``scales``, ...) are renamed
    alike, but a family whose weights are reordered as they are read (``reorders``) cannot reorder packed ones."""
    outer: dict
    layer: str
    parts: dict
    in_out: tuple = ()
    grouped_qkv: bool = False
    interleaved_rope: bool = False
    _pattern: re.Pattern = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        parts = "|".join(re.escape(part) for part in sorted(self.parts, key=len, reverse=True))
        object.__setattr__(self, "_pattern", re.compile(rf"{self.layer}({parts})\.(\w+)"))

    @property
    def reorders(self) -> bool:
        return bool(self.in_out) or self.grouped_qkv or self.interleaved_rope

    def rename(self, name: str) -> str | None:
        """``name`` as the Llama lineage names that weight, None for a weight the model does not read."""
        found = self._pattern.fullmatch(name)
        if found:
            index, part, kind = found.groups()
            return f"model.layers.{index}.{self.parts[part]}.{kind}"
        for prefix, llama in self.outer.items():
            if name.startswith(prefix) and name[len(prefix):].isidentifier():
                return llama + name[len(prefix):]
        return None

    def reorder(self, name: str, layout):
        """The function that takes the stored array of the weight named ``name`` (a Llama name) to the layout the
        model reads, None where it is read as stored. ``layout``: the model's num_heads, num_kv_heads, head_dim
        and rotary_dim."""
        module = name.rsplit(".", 1)[0].split(".", 3)[-1]
        heads = layout.num_heads
        if module in self.in_out and name.endswith(".weight"):
            return lambda array: array.T
        if self.interleaved_rope and module in ("self_attn.q_norm", "self_attn.k_norm"):
            order = _pairs_apart(layout.head_dim, layout.rotary_dim)

            def dims_apart(array):  # a q or k norm's weights over each head's dims, in the rows' new order
                if array.shape[-1] != layout.head_dim:
                    raise CheckpointError(f"{name}: its last dim {array.shape[-1]} is not the head dim")
                return array[..., order]
            return dims_apart
        if self.interleaved_rope and module in ("self_attn.q_proj", "self_attn.k_proj"):
            dim = layout.head_dim
            order = _pairs_apart(dim, layout.rotary_dim)

            def pairs_apart(array):
                if array.shape[0] % dim:
                    raise CheckpointError(f"{name}: {array.shape[0]} rows are not whole heads of {dim}")
                by_head = array.reshape(array.shape[0] // dim, dim, *array.shape[1:])
                return by_head[:, order].reshape(array.shape)
            return pairs_apart
        if self.grouped_qkv and module == "self_attn.qkv_proj":
            groups, per_group, dim = layout.num_kv_heads, heads // layout.num_kv_heads, layout.head_dim

            def by_projection(array):
                if array.shape[0] != groups * (per_group + 2) * dim:
                    raise CheckpointError(f"{name}: {array.shape[0]} rows are not {groups} groups of {per_group} "
                                          f"queries, a key and a value of {dim}")
                grouped = array.reshape(groups, per_group + 2, dim, *array.shape[1:])
                return np.concatenate([grouped[:, :per_group].reshape(-1, *array.shape[1:]),
                                       grouped[:, per_group].reshape(-1, *array.shape[1:]),
                                       grouped[:, per_group + 1].reshape(-1, *array.shape[1:])])
            return by_projection
        return None


_LLAMA_OUTER = {"model.embed_tokens.": "model.embed_tokens.", "model.norm.": "model.norm.", "lm_head.": "lm_head."}
_LLAMA_QKV = {f"self_attn.{p}_proj": f"self_attn.{p}_proj" for p in "qkv"}
_LLAMA_ATTENTION = {**_LLAMA_QKV, "self_attn.o_proj": "self_attn.o_proj"}
_LLAMA_NORMS = {n: n for n in ("input_layernorm", "post_attention_layernorm")}
_LLAMA_MLP = {f"mlp.{p}_proj": f"mlp.{p}_proj" for p in ("gate", "up", "down")}
# GPT-NeoX's and Falcon's MLP
_DENSE_MLP = {"mlp.dense_h_to_4h": "mlp.up_proj", "mlp.dense_4h_to_h": "mlp.down_proj"}
_GPT2_CONV1D = ("self_attn.qkv_proj", "self_attn.o_proj", "mlp.up_proj", "mlp.down_proj")
_GPT2_OUTER = ({f"{p}{stored}.": llama for p in ("transformer.", "") for stored, llama in
                (("wte", "model.embed_tokens."), ("wpe", "model.embed_positions."), ("ln_f", "model.norm."))}
               | {"lm_head.": "lm_head."})
_GPT2_PARTS = {"ln_1": "input_layernorm", "attn.c_attn": "self_attn.qkv_proj", "attn.c_proj": "self_attn.o_proj",
               "ln_2": "post_attention_layernorm", "mlp.c_fc": "mlp.up_proj", "mlp.c_proj": "mlp.down_proj"}
# Llama's names but one norm a layer, and rotary pairs of neighbouring dims
_COHERE = WeightNames(_LLAMA_OUTER, r"model\.layers\.(\d+)\.",
                      {"input_layernorm": "input_layernorm", **_LLAMA_ATTENTION, **_LLAMA_MLP,
                       "self_attn.q_norm": "self_attn.q_norm", "self_attn.k_norm": "self_attn.k_norm"},
                      interleaved_rope=True)
# Llama's own names, for families that keep them but pair their rotary dims otherwise
_LLAMA_PARTS = {**_LLAMA_NORMS, **_LLAMA_ATTENTION, **_LLAMA_MLP}
# Llama's names with the gate and up rows in one weight, and rotary pairs of neighbouring dims
_GLM_PARTS = {**_LLAMA_NORMS, **_LLAMA_ATTENTION, "mlp.gate_up_proj": "mlp.gate_up_proj",
              "mlp.down_proj": "mlp.down_proj"}
# families that name their weights otherwise than the Llama lineage
WEIGHT_NAMES = {
    "GPT2LMHeadModel": WeightNames(_GPT2_OUTER, r"(?:transformer\.)?h\.(\d+)\.", _GPT2_PARTS, in_out=_GPT2_CONV1D),
    # GPT-2's names, Linear weights; one key and value head (or a q, k and v a head without multi_query)
    "GPTBigCodeForCausalLM": WeightNames(_GPT2_OUTER, r"(?:transformer\.)?h\.(\d+)\.", _GPT2_PARTS,
                                         grouped_qkv=True),
    "GPTNeoXForCausalLM": WeightNames(
        {"gpt_neox.embed_in.": "model.embed_tokens.", "gpt_neox.final_layer_norm.": "model.norm.",
         "embed_out.": "lm_head."},
        r"gpt_neox\.layers\.(\d+)\.",
        {**_LLAMA_NORMS, "attention.query_key_value": "self_attn.qkv_proj", "attention.dense": "self_attn.o_proj",
         **_DENSE_MLP},
        grouped_qkv=True),
    "PhiForCausalLM": WeightNames(
        {**_LLAMA_OUTER, "model.final_layernorm.": "model.norm."},
        r"model\.layers\.(\d+)\.",
        {"input_layernorm": "input_layernorm", **_LLAMA_QKV, "self_attn.dense": "self_attn.o_proj",
         "mlp.fc1": "mlp.up_proj", "mlp.fc2": "mlp.down_proj", "self_attn.q_layernorm": "self_attn.q_norm",
         "self_attn.k_layernorm": "self_attn.k_norm"}),
    "Starcoder2ForCausalLM": WeightNames(
        _LLAMA_OUTER, r"model\.layers\.(\d+)\.",
        {**_LLAMA_NORMS, **_LLAMA_ATTENTION, "mlp.c_fc": "mlp.up_proj", "mlp.c_proj": "mlp.down_proj"}),
    "GPTJForCausalLM": WeightNames(
        {"transformer.wte.": "model.embed_tokens.", "transformer.ln_f.": "model.norm.", "lm_head.": "lm_head."},
        r"transformer\.h\.(\d+)\.",
        {"ln_1": "input_layernorm", **{f"attn.{p}_proj": f"self_attn.{p}_proj" for p in "qkv"},
         "attn.out_proj": "self_attn.o_proj", "mlp.fc_in": "mlp.up_proj", "mlp.fc_out": "mlp.down_proj"},
        interleaved_rope=True),
    "CohereForCausalLM": _COHERE,
    "Cohere2ForCausalLM": _COHERE,
    "HeliumForCausalLM": WeightNames(_LLAMA_OUTER, r"model\.layers\.(\d+)\.", _LLAMA_PARTS, interleaved_rope=True),
    "Ernie4_5ForCausalLM": WeightNames(_LLAMA_OUTER, r"model\.layers\.(\d+)\.", _LLAMA_PARTS,
                                       interleaved_rope=True),
    "GlmForCausalLM": WeightNames(_LLAMA_OUTER, r"model\.layers\.(\d+)\.", _GLM_PARTS, interleaved_rope=True),
    # norms after attention and around the MLP, as Gemma 2 names them
    "Glm4ForCausalLM": WeightNames(
        _LLAMA_OUTER, r"model\.layers\.(\d+)\.",
        {**_GLM_PARTS, "post_self_attn_layernorm": "post_attention_layernorm",
         "post_attention_layernorm": "pre_feedforward_layernorm", "post_mlp_layernorm": "post_feedforward_layernorm"},
        interleaved_rope=True),
    "FalconForCausalLM": WeightNames(
        {"transformer.word_embeddings.": "model.embed_tokens.", "transformer.ln_f.": "model.norm.",
         "lm_head.": "lm_head."},
        r"transformer\.h\.(\d+)\.",
        {**_LLAMA_NORMS, "ln_attn": "input_layernorm", "ln_mlp": "post_attention_layernorm",
         "self_attention.query_key_value": "self_attn.qkv_proj", "self_attention.dense": "self_attn.o_proj",
         **_DENSE_MLP},
        grouped_qkv=True),
    "OPTForCausalLM": WeightNames(
        {"model.decoder.embed_tokens.": "model.embed_tokens.",
         "model.decoder.embed_positions.": "model.embed_positions.",
         "model.decoder.final_layer_norm.": "model.norm.", "lm_head.": "lm_head."},
        r"model\.decoder\.layers\.(\d+)\.",
        {"self_attn_layer_norm": "input_layernorm", **_LLAMA_QKV,
         "self_attn.out_proj": "self_attn.o_proj", "final_layer_norm": "post_attention_layernorm",
         "fc1": "mlp.up_proj", "fc2": "mlp.down_proj"}),
}


def weight_files(directory: str) -> dict[str, str | None]:
    """The safetensors files of the checkpoint: {path: None} for one file, {path: ...} for the shards the
    index names, each path once."""
    if os.path.exists(os.path.join(directory, INDEX_FILE)):
        index = read_json(directory, INDEX_FILE)
        weight_map = index.get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise CheckpointError(f"{directory}: {INDEX_FILE} has no weight_map object")
        shards = sorted(set(weight_map.values()), key=str)
        if len(shards) > MAX_SHARDS:
            raise CheckpointError(f"{directory}: {INDEX_FILE} names {len(shards)} shards, more than {MAX_SHARDS}")
        return {_plain_file(directory, shard, INDEX_FILE): None for shard in shards}
    if os.path.exists(os.path.join(directory, SINGLE_WEIGHTS_FILE)):
        return {_plain_file(directory, SINGLE_WEIGHTS_FILE, "weights"): None}
    raise CheckpointError(f"{directory}: no {SINGLE_WEIGHTS_FILE} or {INDEX_FILE}; the checkpoint's weights must be "
                          f"safetensors")


def load_weights(directory: str, device, wanted, names: WeightNames | None = None, layout=None) -> dict:
    """The tensors of the checkpoint named by ``wanted(name)`` (a predicate), on ``device``, read shard by
    shard under a progress bar of their bytes (the headers, read first, give the total). A name found in
    two files is refused. ``names``: the family's names, each weight read under its Llama name (``wanted`` is
    asked of that name) and laid out as the model reads it (``WeightNames.reorder`` of ``layout``)."""
    files = weight_files(directory)
    rename = names.rename if names is not None else (lambda name: name)
    plan = {}
    for path in files:
        try:
            with safe_open(path) as file:
                plan[path] = {name: math.prod(piece.shape) * piece.dtype.itemsize
                              for name in file.keys() if rename(name) is not None and wanted(rename(name))
                              for piece in (file.get_slice(name),)}
        except SafetensorsError as error:
            raise CheckpointError(f"{path}: {error}") from None
    found = {}
    with progress.task("loading weights", total=sum(sum(sizes.values()) for sizes in plan.values()),
                       unit="bytes") as shown:
        for path, sizes in plan.items():
            try:
                with safe_open(path, device=device) as file:
                    for stored, size in sizes.items():
                        name = rename(stored)
                        if name in found:
                            raise CheckpointError(f"{directory}: weight {name!r} is given twice (in two files, or "
                                                  f"under two names of its family)")
                        found[name] = file.get_tensor(stored)
                        reorder = names.reorder(name, layout) if names is not None else None
                        if reorder is not None:
                            found[name] = make_tensor(np.ascontiguousarray(reorder(found[name].numpy())),
                                                      device=found[name].device)
                        shown.advance(size)
            except SafetensorsError as error:
                raise CheckpointError(f"{path}: {error}") from None
    return found
