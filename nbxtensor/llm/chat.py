"""Chat prompts: the checkpoint's chat template (``tokenizer_config.json``'s ``chat_template``, else
``chat_template.jinja``, else a multimodal processor's ``chat_template.json``; Jinja)
applied to a conversation, as transformers' ``apply_chat_template(..., add_generation_prompt=True)`` does.

A template is a stranger's program, so it runs in Jinja's immutable sandbox (no attribute access to
Python internals, no mutation of what it is given), with the few names templates expect: the special
tokens, ``raise_exception`` and ``strftime_now``.
"""
from __future__ import annotations

import json
import os
from datetime import datetime

from .checkpoint import MAX_JSON_BYTES, CheckpointError, read_json

__all__ = ["ChatTemplate", "TOKENIZER_CONFIG_FILE", "TemplateError"]

TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
CHAT_TEMPLATE_FILE = "chat_template.jinja"
# a multimodal checkpoint's processor template: {"chat_template": ...}
PROCESSOR_TEMPLATE_FILE = "chat_template.json"


class TemplateError(ValueError):
    """A chat template that does not render: its own raise_exception, or a Jinja error."""


def _token_text(value) -> str:
    """A special token as tokenizer_config.json gives it: a string, or an object with its ``content``."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else ""


def _raise(message):
    raise TemplateError(f"the chat template refused the conversation: {message}")


class ChatTemplate:
    """The chat template of the checkpoint ``directory``; ``render(messages)`` gives the prompt text."""

    def __init__(self, directory: str):
        config = read_json(directory, TOKENIZER_CONFIG_FILE, required=False) or {}
        source = config.get("chat_template")
        if isinstance(source, list):  # named templates: the default one
            named = {t.get("name"): t.get("template") for t in source if isinstance(t, dict)}
            source = named.get("default")
        if source is None and os.path.isfile(os.path.join(directory, CHAT_TEMPLATE_FILE)):
            path = os.path.join(directory, CHAT_TEMPLATE_FILE)
            if os.path.getsize(path) > MAX_JSON_BYTES:
                raise CheckpointError(f"{path}: larger than {MAX_JSON_BYTES} bytes; not a chat template")
            with open(path, encoding="utf-8", errors="replace") as file:
                source = file.read()
        if source is None:
            source = (read_json(directory, PROCESSOR_TEMPLATE_FILE, required=False) or {}).get("chat_template")
        if not isinstance(source, str) or not source:
            raise CheckpointError(f"{directory}: no chat template ({TOKENIZER_CONFIG_FILE} has no chat_template "
                                  f"and there is no {CHAT_TEMPLATE_FILE} or {PROCESSOR_TEMPLATE_FILE}); nbx generate "
                                  "continues plain text")
        try:
            from jinja2 import TemplateError as JinjaError
            from jinja2.sandbox import ImmutableSandboxedEnvironment
        except ImportError:
            raise ImportError("chat templates need the jinja2 package: pip install 'nbxtensor[llm]'") from None
        self._jinja_error = JinjaError
        environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        environment.filters["tojson"] = lambda value, indent=None: json.dumps(value, ensure_ascii=False, indent=indent)
        environment.globals.update(raise_exception=_raise,
                                   strftime_now=lambda fmt: datetime.now().strftime(fmt))
        try:
            self._template = environment.from_string(source)
        except JinjaError as error:
            raise CheckpointError(f"{directory}: the chat template is not valid Jinja ({error})") from None
        self.special = {name: _token_text(config.get(name)) for name in
                        ("bos_token", "eos_token", "unk_token", "pad_token")}

    def render(self, messages: list[dict], add_generation_prompt: bool = True) -> str:
        """The prompt text of ``messages`` ({"role": ..., "content": ...} each), ending where the
        assistant's reply begins."""
        try:
            return self._template.render(messages=messages, add_generation_prompt=add_generation_prompt,
                                         **self.special)
        except TemplateError:
            raise
        except self._jinja_error as error:
            raise TemplateError(f"the chat template failed to render: {error}") from None
