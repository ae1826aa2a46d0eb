"""Text generation from Hugging Face decoder checkpoints, torch-free.

    from nbxtensor import llm
    model = llm.load("path/to/checkpoint")            # config.json, safetensors, tokenizer.json
    print(model.generate("Once upon a time", max_new_tokens=32).text)
    for piece in model.stream("Once upon a time", temperature=0.8, seed=1):
        print(piece, end="")

``Engine`` serves many requests at once: requests join and leave between steps (continuous batching);
each step prefills the requests that joined and decodes one token for every running one in one batch,
replayed from a capture per batch-size bucket (``replay.py``). While every running request decodes
plain greedy, the engine launches each step before it reads the previous step's tokens (the step's tokens
are the previous choice, still on the device): the device works on step t + 1 while the host takes step
t's tokens, so a step costs its device time alone. A request that a token stops has one step computed
past it, which is dropped.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, replace

from .. import cuda as _cuda
from .cache import CacheFull, PagedKVCache
from .chat import ChatTemplate, TemplateError
from .checkpoint import CheckpointError, read_json
from .model import DEFAULT_PREFILL_CHUNK, SUPPORTED_ARCHITECTURES, DecoderConfig, DecoderModel, load_model
from .replay import DecodeReplayer, TokenReadback
from .sampling import Sampler, SamplingParams

__all__ = ["load", "LLM", "Engine", "Request", "Generation", "SamplingParams", "Sampler", "PagedKVCache", "CacheFull",
           "CheckpointError", "TemplateError", "DecoderConfig", "DecoderModel", "SUPPORTED_ARCHITECTURES"]

TOKENIZER_FILE = "tokenizer.json"
# the share of free device memory the KV cache takes when no size is given
DEFAULT_MEMORY_FRACTION = 0.5
# a host device's cache budget: its memory is the machine's, which nothing here measures
HOST_CACHE_BYTES = 1 << 30


@dataclass
class Request:
    id: int
    prompt: list[int]
    params: SamplingParams
    sampler: Sampler
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    text: str = ""
    finish_reason: str | None = None


@dataclass
class _InFlight:
    """A launched decode step whose tokens the host has not read: its requests, in row order, the choice
    on the device, and ``tokens()`` that waits for the read-back."""
    batch: list[Request]
    chosen: object
    tokens: object


@dataclass(frozen=True)
class Generation:
    prompt_tokens: list[int]
    tokens: list[int]
    text: str
    finish_reason: str
    logprobs: list[float] | None
    prefill_seconds: float
    decode_seconds: float


def _load_tokenizer(directory: str):
    path = os.path.join(directory, TOKENIZER_FILE)
    if not os.path.exists(path):
        return None
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise ImportError("reading tokenizer.json needs the tokenizers package: pip install tokenizers") from None
    try:
        return Tokenizer.from_file(path)
    except Exception as error:  # noqa: BLE001  (tokenizers raises its own exception type for a bad file)
        raise CheckpointError(f"{path}: not a tokenizer file ({type(error).__name__})") from None


def _cache_tokens(model: DecoderModel, memory_fraction: float) -> int:
    c = model.config
    per_token = 2 * c.num_layers * c.num_kv_heads * c.head_dim * model.dtype.itemsize
    if model.device.type == "cuda":
        free, _ = _cuda.mem_get_info(model.device)
        budget = int(free * memory_fraction)
    else:
        budget = HOST_CACHE_BYTES
    return max(1, min(budget // per_token, c.max_positions * 64))


class Engine:
    """Requests in, tokens out, a step at a time, over one model and one paged KV cache."""

    def __init__(self, model: DecoderModel, cache_tokens: int | None = None, memory_fraction: float = DEFAULT_MEMORY_FRACTION,
                 block_size: int = 16, tokenizer=None, replay: bool = True):
        if not 0 < memory_fraction <= 1:
            raise ValueError(f"memory_fraction must be in (0, 1], got {memory_fraction}")
        self.model, self.tokenizer = model, tokenizer
        self.cache = model.new_cache(cache_tokens or _cache_tokens(model, memory_fraction), block_size)
        # replay=False decodes op by op (the reference the replays are checked against)
        self.replayer = DecodeReplayer(model, self.cache) if replay else None
        self.readback = TokenReadback(model.device) if replay else None
        self._inflight: _InFlight | None = None
        self.waiting: list[Request] = []
        self.running: list[Request] = []
        self._next_id = 0
        self.prefill_seconds = 0.0
        self.decode_seconds = 0.0

    def add(self, prompt: list[int], params: SamplingParams) -> Request:
        self.check_prompt(prompt)
        request = Request(self.new_sequence(), list(prompt), params, Sampler(params, self.model.device))
        self.waiting.append(request)
        return request

    def check_prompt(self, prompt: list[int]) -> None:
        if not prompt:
            raise ValueError("a prompt needs at least one token")
        if len(prompt) >= self.model.config.max_positions:
            raise ValueError(f"the prompt has {len(prompt)} tokens; the model's context is "
                             f"{self.model.config.max_positions} (max_position_embeddings)")
        vocab = self.model.config.vocab_size
        bad = [t for t in prompt if not 0 <= t < vocab]
        if bad:
            raise ValueError(f"prompt token {bad[0]} is outside the vocabulary of {vocab}")

    def new_sequence(self) -> int:
        """A sequence id no request or other user of the cache has."""
        self._next_id += 1
        return self._next_id - 1

    @property
    def busy(self) -> bool:
        return bool(self.waiting or self.running or self._inflight)

    def _runs_ahead(self, batch: list[Request]) -> bool:
        """Whether the step after the one making the batch's next token may start before that token is
        read: every request decodes plain greedy and stays unfinished by length through that step."""
        limit = self.model.config.max_positions
        return self.replayer is not None and all(
            r.finish_reason is None and r.params.plain_greedy and len(r.tokens) + 2 <= r.params.max_new_tokens
            and len(r.prompt) + len(r.tokens) + 2 < limit
            and not any(self.model.reruns_at(len(r.prompt) + len(r.tokens) + k) for k in (-1, 0, 1)) for r in batch)

    def _launch(self, batch: list[Request], logits) -> _InFlight:
        chosen = logits.argmax(dim=-1)
        return _InFlight(batch, chosen, self.readback.start(chosen))

    def _land(self, inflight: _InFlight) -> list[tuple[Request, int]]:
        """The tokens of a launched step, taken by its requests that are still unfinished."""
        return [(r, self._take(r, None, token)) for r, token in zip(inflight.batch, inflight.tokens())
                if r.finish_reason is None]

    def step(self) -> list[tuple[Request, int]]:
        """Prefill every waiting request, then decode one token for the running ones: the (request, token)
        pairs made this step. Finished requests leave the batch and free their pages."""
        made = []
        inflight, self._inflight = self._inflight, None
        if inflight is not None and (self.waiting or not self._runs_ahead(inflight.batch)):
            made += self._land(inflight)
            inflight = None
        start = time.perf_counter()
        for request in self.waiting:
            if request.params.max_new_tokens == 0:
                request.finish_reason = "length"
                continue
            logits = self.model.prefill(self.cache, request.id, request.prompt)
            made.append((request, self._take(request, logits[0])))
            self.running.append(request)
        self.waiting = []
        self.prefill_seconds += time.perf_counter() - start
        start = time.perf_counter()
        if inflight is not None:
            # the running batch is the in-flight step's: its next step starts from the device's choice
            self._inflight = self._ahead(inflight)
            made += self._land(inflight)
        else:
            made += self._decode([r for r in self.running if r.finish_reason is None and not any(r is m for m, _ in made)])
        self.decode_seconds += time.perf_counter() - start
        computing = self._inflight.batch if self._inflight is not None else ()
        for request in [r for r in self.running if r.finish_reason is not None and not any(r is c for c in computing)]:
            self.cache.release(request.id)
        self.running = [r for r in self.running if r.finish_reason is None or any(r is c for c in computing)]
        return made

    def _ahead(self, inflight: _InFlight) -> _InFlight | None:
        logits = self.replayer.ahead([r.id for r in inflight.batch], inflight.chosen)
        return self._launch(inflight.batch, logits) if logits is not None else None

    def _decode(self, batch: list[Request]) -> list[tuple[Request, int]]:
        rerun = [r for r in batch if self.model.reruns_at(self.cache.length(r.id))]
        if rerun:
            made = [(r, self._take(r, self._rerun(r))) for r in rerun]
            return made + self._decode([r for r in batch if not any(r is x for x in rerun)])
        if not batch:
            return []
        sequences, tokens = [r.id for r in batch], [r.tokens[-1] for r in batch]
        logits = (self.replayer(sequences, tokens) if self.replayer is not None
                  else self.model.decode(self.cache, sequences, tokens))
        if self._runs_ahead(batch):
            current = self._launch(batch, logits[:len(batch)])
            self._inflight = self._ahead(current)
            return self._land(current)
        # the batch's plain greedy rows take their tokens from one argmax and one read-back
        greedy = [row for row, r in enumerate(batch) if r.params.plain_greedy]
        picked = dict(zip(greedy, logits[:len(batch)].argmax(dim=-1).tolist())) if greedy else {}
        return [(r, self._take(r, logits[row], picked.get(row))) for row, r in enumerate(batch)]

    def _rerun(self, request: Request):
        """The logits after a request's tokens so far, its whole sequence prefilled again in place of its
        pages (``DecoderModel.reruns_at``)."""
        self.cache.release(request.id)
        return self.model.prefill(self.cache, request.id, request.prompt + request.tokens)[0]

    def _take(self, request: Request, logits, token: int | None = None) -> int:
        """Appends the request's next token (``token`` when already chosen, as a plain greedy one) and
        decides whether the request is finished."""
        p = request.params
        logprob = None
        if token is None:
            token, logprob = request.sampler.choose(logits, request.prompt + request.tokens)
        request.tokens.append(token)
        if p.logprobs:
            request.logprobs.append(logprob)
        if self.tokenizer is not None:
            request.text = self.tokenizer.decode(request.tokens, skip_special_tokens=True)
        if token in p.stop_token_ids:
            request.finish_reason = "stop"
        elif p.stop_strings and any(s in request.text for s in p.stop_strings):
            request.finish_reason = "stop"
            cut = min(request.text.find(s) for s in p.stop_strings if s in request.text)
            request.text = request.text[:cut]
        elif len(request.tokens) >= p.max_new_tokens:
            request.finish_reason = "length"
        elif len(request.prompt) + len(request.tokens) >= self.model.config.max_positions:
            request.finish_reason = "context"
        return token


class LLM:
    """A decoder checkpoint with its tokenizer and generation defaults, ready to generate."""

    def __init__(self, directory, device=None, dtype=None, cache_tokens: int | None = None,
                 memory_fraction: float = DEFAULT_MEMORY_FRACTION, block_size: int = 16, replay: bool = True,
                 prefill_chunk: int = DEFAULT_PREFILL_CHUNK, quantize: str | None = None,
                 fp8_activations: bool | None = None):
        self.directory = directory = os.fspath(directory)
        self.model = load_model(directory, device, dtype, prefill_chunk, quantize, fp8_activations)
        self._chat_template = None
        self.tokenizer = _load_tokenizer(directory)
        self.defaults = self._generation_defaults(read_json(directory, "generation_config.json", required=False) or {})
        self.engine = Engine(self.model, cache_tokens, memory_fraction, block_size, self.tokenizer, replay)

    def _generation_defaults(self, config: dict) -> SamplingParams:
        eos = config.get("eos_token_id", list(self.model.config.eos_token_ids))
        eos = tuple(eos) if isinstance(eos, list) else (eos,) if isinstance(eos, int) else ()
        values = {"stop_token_ids": tuple(int(e) for e in eos)}
        if config.get("do_sample"):
            values.update(temperature=float(config.get("temperature", 1.0)), top_k=int(config.get("top_k", 50)),
                          top_p=float(config.get("top_p", 1.0)), min_p=float(config.get("min_p") or 0.0))
        if config.get("repetition_penalty"):
            values["repetition_penalty"] = float(config["repetition_penalty"])
        if isinstance(config.get("max_new_tokens"), int):
            values["max_new_tokens"] = config["max_new_tokens"]
        return SamplingParams(**values)

    def params(self, **settings) -> SamplingParams:
        """The checkpoint's defaults with ``settings`` (SamplingParams fields; None keeps a default)."""
        given = {k: v for k, v in settings.items() if v is not None}
        if given.get("temperature") and "top_k" not in given and self.defaults.greedy:
            given["top_k"] = 0
        return replace(self.defaults, **given)

    def encode(self, prompt) -> list[int]:
        if isinstance(prompt, str):
            if self.tokenizer is None:
                raise CheckpointError(f"the checkpoint has no {TOKENIZER_FILE}; pass the prompt as token ids")
            return self.tokenizer.encode(prompt).ids
        return [int(t) for t in prompt]

    def chat_prompt(self, messages: list[dict]) -> list[int]:
        """The token ids of ``messages`` ({"role", "content"} each) through the checkpoint's chat template,
        ready for the assistant's reply; the template writes its own special tokens."""
        if self.tokenizer is None:
            raise CheckpointError(f"{self.directory}: the checkpoint has no {TOKENIZER_FILE}; chat needs one")
        if self._chat_template is None:
            self._chat_template = ChatTemplate(self.directory)
        return self.tokenizer.encode(self._chat_template.render(messages), add_special_tokens=False).ids

    def logits(self, prompt):
        """The logits (len(prompt), vocab) after each token of ``prompt`` (text or token ids) in one
        prefill: position i's row scores the token after the first i + 1 (teacher forcing, perplexity)."""
        tokens = self.encode(prompt)
        self.engine.check_prompt(tokens)
        sequence = self.engine.new_sequence()
        try:
            return self.model.prefill(self.engine.cache, sequence, tokens, every_position=True)
        finally:
            self.engine.cache.release(sequence)

    def generate(self, prompts, **settings):
        """One Generation per prompt (text or token ids); a single prompt gives a single Generation."""
        single = isinstance(prompts, str) or (len(prompts) > 0 and isinstance(prompts[0], int))
        requests = [self.engine.add(self.encode(p), self.params(**settings)) for p in ([prompts] if single else prompts)]
        before = (self.engine.prefill_seconds, self.engine.decode_seconds)
        while self.engine.busy:
            self.engine.step()
        prefill = self.engine.prefill_seconds - before[0]
        decode = self.engine.decode_seconds - before[1]
        results = [Generation(r.prompt, r.tokens, r.text, r.finish_reason, r.logprobs if r.params.logprobs else None,
                              prefill, decode) for r in requests]
        return results[0] if single else results

    def stream(self, prompt, **settings):
        """The continuation of one prompt, a piece of text at a time (token ids without a tokenizer)."""
        request = self.engine.add(self.encode(prompt), self.params(**settings))
        shown = ""
        while request.finish_reason is None and self.engine.busy:
            for made, token in self.engine.step():
                if made is not request:
                    continue
                if self.tokenizer is None:
                    yield token
                elif request.text.startswith(shown) and len(request.text) > len(shown):
                    yield request.text[len(shown):]
                    shown = request.text


def load(directory, device=None, dtype=None, **settings) -> LLM:
    """``LLM(directory, ...)``: the checkpoint's model, tokenizer and generation defaults."""
    return LLM(directory, device, dtype, **settings)
