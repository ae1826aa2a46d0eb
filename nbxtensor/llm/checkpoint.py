"""A Hugging Face checkpoint directory read as a stranger's files: ``config.json``, its safetensors weights
(one file, or shards named by ``model.safetensors.index.json``) and ``generation_config.json``.

A shard is named by its index; only a plain file name inside the directory is taken (no separators, no
``..``). The directory itself may be a snapshot of Hugging Face's cache, whose files are links to blobs
elsewhere: a link is followed because the user named the directory, not because a file asked for it."""
from __future__ import annotations

import json
import math
import os
import stat

from .. import progress
from ..io.safetensors import SafetensorsError, safe_open

__all__ = ["CheckpointError", "read_json", "decoder_config", "weight_files", "load_weights"]

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
    return config, ""


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


def load_weights(directory: str, device, wanted) -> dict:
    """The tensors of the checkpoint named by ``wanted(name)`` (a predicate), on ``device``, read shard by
    shard under a progress bar of their bytes (the headers, read first, give the total). A name found in
    two files is refused."""
    files = weight_files(directory)
    plan = {}
    for path in files:
        try:
            with safe_open(path) as file:
                plan[path] = {name: math.prod(piece.shape) * piece.dtype.itemsize
                              for name in file.keys() if wanted(name) for piece in (file.get_slice(name),)}
        except SafetensorsError as error:
            raise CheckpointError(f"{path}: {error}") from None
    found = {}
    with progress.task("loading weights", total=sum(sum(sizes.values()) for sizes in plan.values()),
                       unit="bytes") as shown:
        for path, sizes in plan.items():
            try:
                with safe_open(path, device=device) as file:
                    for name, size in sizes.items():
                        if name in found:
                            raise CheckpointError(f"{directory}: weight {name!r} is in two files")
                        found[name] = file.get_tensor(name)
                        shown.advance(size)
            except SafetensorsError as error:
                raise CheckpointError(f"{path}: {error}") from None
    return found
