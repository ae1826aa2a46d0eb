"""A Hugging Face checkpoint directory (``config.json`` and safetensors weights, as ``save_pretrained``
writes them) as the exporter's module: the task's model, its token inputs, and their dynamic
dimensions, bounded by the config. Imports torch, and transformers when a checkpoint is read."""
from __future__ import annotations

import inspect
import os
import sys
from dataclasses import dataclass

import torch

from .. import progress
from . import CommandError, first_line

CONFIG_FILE = "config.json"
# The traced sizes: above 1, which torch.export would specialise, and small, so tracing is quick.
TRACE_BATCH, TRACE_TOKENS, TRACE_DECODER_TOKENS = 2, 8, 6


@dataclass(frozen=True)
class Task:
    auto_class: str  # the transformers class that builds the model from its config
    output: str  # the field of the model's output that the graph returns
    decoder_inputs: bool  # takes decoder_input_ids besides input_ids


TASKS = {
    "feature-extraction": Task("AutoModel", "last_hidden_state", decoder_inputs=False),
    "causal-lm": Task("AutoModelForCausalLM", "logits", decoder_inputs=False),
    "seq2seq": Task("AutoModelForSeq2SeqLM", "logits", decoder_inputs=True),
}


class TokenModel(torch.nn.Module):
    """One output of a transformers model called on token ids (and the attention mask when given),
    with its key-value cache off: an inference graph returns tensors only."""

    def __init__(self, model, output: str):
        super().__init__()
        self.model, self.output = model, output
        self.options = {"use_cache": False} if "use_cache" in inspect.signature(model.forward).parameters else {}

    def _call(self, **inputs):
        given = {name: value for name, value in inputs.items() if value is not None}
        return getattr(self.model(**given, **self.options, return_dict=True), self.output)

    def forward(self, input_ids, attention_mask=None):
        return self._call(input_ids=input_ids, attention_mask=attention_mask)


class Seq2SeqTokenModel(TokenModel):
    def forward(self, input_ids, decoder_input_ids, attention_mask=None):
        return self._call(input_ids=input_ids, decoder_input_ids=decoder_input_ids, attention_mask=attention_mask)


def _transformers():
    try:
        import transformers
    except ImportError as missing:
        raise CommandError(f"exporting a checkpoint directory needs transformers: python3 -m pip install "
                           f"transformers ({missing})") from None
    return transformers


def load(directory: str, task_name: str | None):
    """(module, its task, the config) for the checkpoint in ``directory``, read from there only."""
    config_path = os.path.join(directory, CONFIG_FILE)
    if not os.path.isfile(config_path):
        raise CommandError(f"{directory}: no {CONFIG_FILE}; a checkpoint directory is what save_pretrained "
                           f"writes ({CONFIG_FILE} and safetensors weights)")
    if task_name not in TASKS:
        raise CommandError(f"{'unknown task ' + repr(task_name) if task_name else 'a checkpoint needs --task'}; "
                           f"tasks: {', '.join(TASKS)}")
    task = TASKS[task_name]
    transformers = _transformers()
    try:
        config = transformers.AutoConfig.from_pretrained(directory, local_files_only=True)
    except OSError:
        raise CommandError(f"{config_path}: not a config transformers can read (is it JSON?)") from None
    except (ValueError, KeyError):
        raise CommandError(f"{config_path}: its model_type is missing or not one transformers "
                           f"{transformers.__version__} knows") from None
    auto_class = getattr(transformers, task.auto_class)
    if type(config) not in auto_class._model_mapping:
        raise CommandError(f"{directory}: transformers {transformers.__version__} has no {task_name} model "
                           f"({task.auto_class}) for model type {config.model_type!r}")
    try:
        with progress.task(f"loading the {task_name} model with transformers"):
            model, loading = auto_class.from_pretrained(directory, local_files_only=True, output_loading_info=True)
    except (OSError, ValueError, RuntimeError) as error:
        raise CommandError(f"{directory}: transformers could not load the {task_name} model: "
                           f"{first_line(error)}") from None
    missing = sorted(loading.get("missing_keys", ()))
    if missing:
        print(f"nbx export: warning: {len(missing)} weights are not in the checkpoint and were initialised at "
              f"random by transformers: {', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''}", file=sys.stderr)
    wrapper = Seq2SeqTokenModel if task.decoder_inputs else TokenModel
    return wrapper(model.eval(), task.output), task, config


def example_inputs(config, task: Task, with_attention_mask: bool):
    """(inputs by name in forward's order, (input, axis) -> symbol, symbol -> (min, max)): ``batch``
    unbounded, ``seq`` (and ``decoder_seq``) up to the config's position table where it has one."""
    max_tokens = getattr(config, "max_position_embeddings", None)
    if max_tokens is not None and max_tokens < 2:
        raise CommandError(f"max_position_embeddings is {max_tokens}; a dynamic sequence needs at least 2")
    vocab = getattr(config.get_text_config(), "vocab_size", None) or 1
    generator = torch.Generator().manual_seed(0)

    def token_ids(tokens):
        return torch.randint(0, vocab, (TRACE_BATCH, min(tokens, max_tokens or tokens)), generator=generator)

    inputs = {"input_ids": token_ids(TRACE_TOKENS)}
    placed = {("input_ids", 0): "batch", ("input_ids", 1): "seq"}
    bounds = {"batch": (1, None), "seq": (1, max_tokens)}
    if task.decoder_inputs:
        inputs["decoder_input_ids"] = token_ids(TRACE_DECODER_TOKENS)
        placed.update({("decoder_input_ids", 0): "batch", ("decoder_input_ids", 1): "decoder_seq"})
        bounds["decoder_seq"] = (1, max_tokens)
    if with_attention_mask:
        inputs["attention_mask"] = torch.ones_like(inputs["input_ids"])
        placed.update({("attention_mask", 0): "batch", ("attention_mask", 1): "seq"})
    return inputs, placed, bounds
