"""The census of the LLM engine: every launch key its prefills and decode steps form, from the checkpoint's
config, the model's dtype and a device class's facts alone (nothing loaded, allocated or launched).

A step's operands are laid out as meta tensors the way ``model.py`` lays out the real ones (the joined
projections' slices, the heads' permutes, the gathered keys of a chunk past the first) and handed to the
key rules of the ops it calls (``linear``, ``prefill_attention``, and for decode-sized batches the products
with a norm or an activation folded in; paged decode attention tunes nothing).
Every decoder layer forms the same keys, so a layer's keys count ``num_layers`` times.

``engine_census`` covers given prompt lengths and batch sizes, or, with ``context``, every prompt length up
to it: a key is a function of its extents' buckets, so one length of each run of lengths whose buckets
agree stands for the run.
"""
from __future__ import annotations

from collections import Counter

from ..allocation import new_tensor
from ..device import resolve
from ..dtypes import get_dtype
from ..ops import registry
from ..ops.matmul_gemv import GEMV_MAX_ROWS
from .model import DEFAULT_PREFILL_CHUNK, DecoderConfig
from .replay import BATCH_BUCKETS

__all__ = ["prefill_keys", "decode_keys", "engine_census", "prompt_lengths", "checkpoint_census"]


def _meta(shape, dtype):
    return new_tensor(tuple(shape), dtype, resolve("meta"))


def _linear(facts, rows: int, inputs: int, outputs: int, dtype, bias: bool) -> list:
    return registry.get("linear").key(facts, _meta((rows, inputs), dtype), _meta((outputs, inputs), dtype),
                                      _meta((outputs,), dtype) if bias else None)


def _layer_products(config: DecoderConfig, facts, rows: int, dtype) -> list:
    """The keys of a layer's four products on ``rows`` rows of the residual stream."""
    c = config
    qkv_rows = (c.num_heads + 2 * c.num_kv_heads) * c.head_dim
    return (_linear(facts, rows, c.hidden_size, qkv_rows, dtype, c.attention_bias)
            + _linear(facts, rows, c.num_heads * c.head_dim, c.hidden_size, dtype, c.output_bias)
            + _linear(facts, rows, c.hidden_size, 2 * c.intermediate_size, dtype, False)
            + _linear(facts, rows, c.intermediate_size, c.hidden_size, dtype, False))


def _logits(config: DecoderConfig, facts, rows: int, dtype) -> list:
    return _linear(facts, rows, config.hidden_size, config.vocab_size, dtype, False)


def prefill_keys(config: DecoderConfig, dtype, facts: dict, length: int, offset: int = 0,
                 logits: bool = True) -> Counter:
    """The keys of one prefill chunk of ``length`` tokens after ``offset`` cached ones (``logits``: the chunk
    is a prompt's last, whose last position's logits are computed)."""
    c = config
    dtype = get_dtype(dtype)
    counts: Counter = Counter()
    q = _meta((length, c.num_heads, c.head_dim), dtype).permute(1, 0, 2)
    if offset:  # the sequence's keys and values gathered from its pages
        k = _meta((offset + length, c.num_kv_heads, c.head_dim), dtype).permute(1, 0, 2)
        v = k
    else:
        k = _meta((length, c.num_kv_heads, c.head_dim), dtype).permute(1, 0, 2)
        qkv = _meta((length, (c.num_heads + 2 * c.num_kv_heads) * c.head_dim), dtype)
        v = qkv[:, (c.num_heads + c.num_kv_heads) * c.head_dim:].view(length, c.num_kv_heads, c.head_dim) \
            .permute(1, 0, 2)
    attention = registry.get("prefill_attention").key
    for window in c.layer_windows:
        counts.update(_layer_products(c, facts, length, dtype))
        counts.update(attention(facts, q, k, v, scale=c.attention_scale, softcap=c.attention_softcap, window=window,
                                query_offset=offset))
    if logits:
        counts.update(_logits(c, facts, 1, dtype))
    return counts


def _folded(config: DecoderConfig, facts, rows: int, dtype) -> Counter:
    """The keys of a decode step whose norms and gated activations fold into the products after them
    (``DecoderModel._layers``): each layer's qkv product behind its add + norm (the first layer's behind
    its norm alone), its o product, its gate_up product behind an add + norm, its down product behind the
    activation, and the head behind the final add + norm."""
    c = config
    counts: Counter = Counter()

    def key(op, width, inputs, outputs, *between, bias=False, **options):
        """The keys of ``op`` on rows ``width`` wide, ``between`` them and its (outputs, inputs) weight."""
        counts.update(registry.get(op).key(facts, _meta((rows, width), dtype), *between,
                                           _meta((outputs, inputs), dtype), _meta((outputs,), dtype) if bias else None,
                                           **options))
    norm = _meta((c.hidden_size,), dtype)
    stream = _meta((rows, c.hidden_size), dtype)
    qkv_rows = (c.num_heads + 2 * c.num_kv_heads) * c.head_dim
    for index in range(c.num_layers):
        if index == 0:
            key("rms_norm_linear", c.hidden_size, c.hidden_size, qkv_rows, norm, bias=c.attention_bias)
        else:
            key("add_rms_norm_linear", c.hidden_size, c.hidden_size, qkv_rows, stream, norm, bias=c.attention_bias)
        counts.update(_linear(facts, rows, c.num_heads * c.head_dim, c.hidden_size, dtype, c.output_bias))
        key("add_rms_norm_linear", c.hidden_size, c.hidden_size, 2 * c.intermediate_size, stream, norm)
        key("act_and_mul_linear", 2 * c.intermediate_size, c.intermediate_size, c.hidden_size,
            activation=c.activation)
    key("add_rms_norm_linear", c.hidden_size, c.hidden_size, c.vocab_size, stream, norm)
    return counts


def decode_keys(config: DecoderConfig, dtype, facts: dict, rows: int) -> Counter:
    """The keys of one decode step of ``rows`` sequences (padding rows included)."""
    dtype = get_dtype(dtype)
    if rows <= GEMV_MAX_ROWS:
        return _folded(config, facts, rows, dtype)
    counts: Counter = Counter()
    for _ in range(config.num_layers):
        counts.update(_layer_products(config, facts, rows, dtype))
    counts.update(_logits(config, facts, rows, dtype))
    return counts


def _bucket_starts(limit: int, ladders: dict, shift: int = 0) -> list[int]:
    """The lengths x in 1..limit at which the bucket of x on the rows ladder or of x + shift on the cols
    ladder changes (1 included): every length shares both buckets with the largest of these at or below it.
    Past a ladder's top the buckets are powers of two."""
    starts = {1}
    top = limit + shift
    for name, moved in (("rows", 0), ("cols", shift)):
        rungs = [int(r) for r in ladders[name]]
        power = 1 << max(rungs[-1], 1).bit_length()
        while power // 2 <= top:
            rungs.append(power)
            power *= 2
        starts.update(r + 1 - moved for r in rungs if 1 <= r + 1 - moved <= limit)
    return sorted(starts)


def prompt_lengths(facts: dict, context: int, prefill_chunk: int = DEFAULT_PREFILL_CHUNK) -> list[int]:
    """Prompt lengths up to ``context`` standing for every length: each chunk's length and offset buckets."""
    lengths = set()
    for offset in range(0, context, prefill_chunk):
        lengths.update(offset + x for x in _bucket_starts(min(prefill_chunk, context - offset), facts["ladders"],
                                                          offset))
    return sorted(lengths)


def engine_census(config: DecoderConfig, dtype, facts: dict, *, prompts=(), batch_sizes=(), context=None,
                  prefill_chunk: int = DEFAULT_PREFILL_CHUNK, replay: bool = True) -> Counter:
    """Launch key -> how many launches form it over a prefill of each prompt length (``prompts``, or every
    length up to ``context``) and a decode step of each batch size (``batch_sizes``; with ``replay``, as the
    engine replays them, padded to their bucket)."""
    if type(prefill_chunk) is not int or prefill_chunk < 1:
        raise ValueError(f"prefill chunk {prefill_chunk!r}: expected an integer >= 1")
    counts: Counter = Counter()
    lengths = set(prompts) | (set(prompt_lengths(facts, context, prefill_chunk)) if context else set())
    chunks: dict = {}  # (length, offset, logits) -> keys: prompts share their leading chunks
    for length in sorted(lengths):
        if not 1 <= length <= config.max_positions:
            raise ValueError(f"a prompt of {length} tokens: the model's context is 1 to {config.max_positions}")
        for offset in range(0, length, prefill_chunk):
            chunk = (min(prefill_chunk, length - offset), offset, offset + prefill_chunk >= length)
            if chunk not in chunks:
                chunks[chunk] = prefill_keys(config, dtype, facts, *chunk)
            counts.update(chunks[chunk])
    steps = {}
    for size in sorted(set(batch_sizes)):
        if size < 1:
            raise ValueError(f"batch size {size}: expected at least 1")
        rows = next((b for b in BATCH_BUCKETS if b >= size), size) if replay else size
        if rows not in steps:
            steps[rows] = decode_keys(config, dtype, facts, rows)
        counts.update(steps[rows])
    return counts


def checkpoint_census(directory, facts: dict, *, dtype=None, batch_sizes=None, context=None,
                      prefill_chunk: int = DEFAULT_PREFILL_CHUNK) -> tuple[Counter, dict]:
    """``engine_census`` of the Hugging Face checkpoint ``directory`` (its config.json alone): in ``dtype``
    (default the checkpoint's), every batch size up to the largest replayed bucket (or ``batch_sizes``) and
    every prompt length up to ``context`` (default the model's). Also the settings used, for printing."""
    import os

    from .checkpoint import CONFIG_FILE, read_json
    directory = os.fspath(directory)
    config = DecoderConfig.from_hf(read_json(directory, CONFIG_FILE), directory)
    dtype = dtype or config.dtype
    context = config.max_positions if context is None else context
    if type(context) is not int or not 1 <= context <= config.max_positions:
        raise ValueError(f"context {context!r}: expected 1 to the model's {config.max_positions} positions")
    batch_sizes = tuple(range(1, BATCH_BUCKETS[-1] + 1)) if batch_sizes is None else tuple(batch_sizes)
    counts = engine_census(config, dtype, facts, batch_sizes=batch_sizes, context=context,
                           prefill_chunk=prefill_chunk)
    return counts, {"dtype": get_dtype(dtype).name, "context": context, "prefill_chunk": prefill_chunk,
                    "batch_sizes": f"{min(batch_sizes)}..{max(batch_sizes)}" if batch_sizes else "none"}
