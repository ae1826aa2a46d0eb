"""Choosing the next token from a row of logits, on the device: greedy, or a draw after the repetition
penalty, temperature, top-k, top-p and min-p, in transformers' order. A draw is the Gumbel-max of the kept
logits with noise from the request's own seeded generator, so a seed gives the same tokens on every run;
only the chosen token id (and its log-probability, when asked) comes back to the host."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..dtypes import get_dtype
from ..ops.creation import tensor as make_tensor
from ..ops.random import Generator

__all__ = ["SamplingParams", "Sampler"]


@dataclass(frozen=True)
class SamplingParams:
    """How one request picks its tokens and when it stops. ``temperature`` 0 is greedy."""
    max_new_tokens: int = 32
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    seed: int | None = None
    stop_token_ids: tuple[int, ...] = ()
    stop_strings: tuple[str, ...] = ()
    logprobs: bool = False

    def __post_init__(self):
        checks = (("max_new_tokens", self.max_new_tokens >= 0), ("temperature", self.temperature >= 0),
                  ("top_k", self.top_k >= 0), ("top_p", 0 < self.top_p <= 1), ("min_p", 0 <= self.min_p <= 1),
                  ("repetition_penalty", self.repetition_penalty > 0))
        for name, good in checks:
            if not good:
                raise ValueError(f"sampling: {name}={getattr(self, name)!r} is out of range")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @property
    def plain_greedy(self) -> bool:
        """Greedy with nothing to change the logits or to report: the token is the logits' argmax."""
        return self.greedy and self.repetition_penalty == 1.0 and not self.logprobs


class Sampler:
    """One request's choices: its settings, its generator and the tokens it has seen."""

    def __init__(self, params: SamplingParams, device):
        self.params = params
        self.generator = None
        if not params.greedy:
            self.generator = Generator(device)
            if params.seed is not None:
                self.generator.manual_seed(params.seed)
            else:
                self.generator.seed()
        self.device = device

    def choose(self, logits, seen: list[int]) -> tuple[int, float | None]:
        """The next token after ``logits`` (vocab,) and its log-probability under the processed
        distribution (None unless asked)."""
        p = self.params
        row = self._penalised(logits, seen)
        if p.greedy:
            token = int(row.argmax().item())
            return token, (float(row.log_softmax(0)[token].item()) if p.logprobs else None)
        values, order = self._kept(row)
        noise = -(-values.new_empty(values.shape).uniform_(generator=self.generator).clamp(min=1e-20).log()).log()
        choice = int((values + noise).argmax().item())
        token = int(order[choice].item())
        logprob = float(values.log_softmax(0)[choice].item()) if p.logprobs else None
        return token, logprob

    def distribution(self, logits, seen: list[int]) -> np.ndarray:
        """The probabilities (vocab,) that ``choose`` draws from (a sampling request's)."""
        values, order = self._kept(self._penalised(logits, seen))
        probabilities = np.zeros(logits.shape[0], np.float64)
        probabilities[order.numpy()] = values.softmax(0).numpy()
        return probabilities

    def _penalised(self, logits, seen: list[int]):
        p = self.params
        row = logits.to(get_dtype("float32"))
        if p.repetition_penalty != 1.0 and seen:
            ids = make_tensor(np.unique(np.asarray(seen, dtype=np.int64)), device=self.device)
            picked = row.gather(0, ids)
            # as transformers: a positive logit is divided by the penalty, a negative one multiplied
            penalised = (picked * p.repetition_penalty).where(picked < 0, picked / p.repetition_penalty)
            row = row.scatter(0, ids, penalised)
        return row

    def _kept(self, row):
        """(logits, token ids) after temperature, top-k, top-p and min-p, the likeliest first; a dropped
        token's logit is -inf."""
        p = self.params
        row = row / p.temperature
        if p.top_k and p.top_k < row.shape[0]:
            values, order = row.topk(p.top_k)
        else:
            values, order = row.sort(descending=True)
        probs = values.softmax(0)
        drop = None
        if p.top_p < 1.0:
            # a token is dropped once the mass before it already reaches top_p: the first always stays
            drop = (probs.cumsum(0) - probs) > p.top_p
        if p.min_p > 0.0:
            below = probs < probs[0] * p.min_p
            drop = below if drop is None else drop | below
        if drop is not None:
            values = values.masked_fill(drop, -math.inf)
        return values, order
