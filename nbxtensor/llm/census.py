"""The census of the LLM engine: every launch key its prefills and decode steps form, from the checkpoint's
config (and its safetensors headers, for a quantized one's scale dtype), the model's dtype and a device
class's facts alone (nothing loaded, allocated or launched).

A step's operands are laid out as meta tensors the way ``model.py`` lays out the real ones (the joined
projections' slices, the heads' permutes, the gathered keys of a chunk past the first) and handed to the
key rules of the ops it calls (``linear``, or ``quantized_linear`` on meta ``QuantizedWeight``s laid out as a
checkpoint's are (``Projections``), ``prefill_attention``, and for one-row decode steps the products, float
or quantized, with a norm or an activation folded in; paged decode attention tunes nothing).
A sparse layer forms its mixture of experts' keys (``moe``'s, on float or quantized stacks of experts, and its
shared expert's products') in place of its MLP's.

``engine_census`` covers given prompt lengths and batch sizes, or, with ``context``, every prompt length up
to it: a key is a function of its extents' buckets, so one length of each run of lengths whose buckets
agree stands for the run.
"""
from __future__ import annotations

import math
import os
from collections import Counter
from dataclasses import dataclass, replace

from ..allocation import new_tensor
from ..device import resolve
from ..dtypes import get_dtype
from ..io.safetensors import safe_open
from ..launch import cdiv
from ..ops import registry
from ..ops.matmul_gemv import GEMV_MAX_ROWS
from ..ops.matmul_prologue import FOLD_MAX_ROWS
from ..quant import FP8_BLOCK, QuantizedWeight
from . import checkpoint
from .checkpoint import CheckpointError
from .model import DEFAULT_PREFILL_CHUNK, DecoderConfig
from .quantized import fp8_activations_of, quantization_of, requested_rounding
from .replay import BATCH_BUCKETS

__all__ = ["Projections", "checkpoint_projections", "prefill_keys", "decode_keys", "engine_census", "prompt_lengths",
           "checkpoint_census"]


@dataclass(frozen=True)
class Projections:
    """How a model holds its decoder layers' projection weights: float (``format`` None) or as ``load_weights``
    makes a quantized checkpoint's (``QuantizedWeight``'s format, its scales' dtype, int4's ``group_size`` and
    act-order, fp8's scales per tensor, channel or block), and whether products of more rows than a GEMV takes
    round them to float8 (``fp8_activations``)."""
    format: str | None = None
    scale_dtype: str = "float32"
    group_size: int = -1
    act_order: bool = False
    fp8_scales: str = "channel"
    fp8_activations: bool = False

    @property
    def joined(self) -> bool:
        """Whether a layer's q, k, v (and gate, up) weights join into one (``quant.join_rows``)."""
        return self.format in (None, "int8") or (self.format == "int4" and not self.act_order) or (
            self.format == "fp8" and self.fp8_scales == "channel")

    def weight(self, outputs: int, inputs: int, dtype):
        """A meta (outputs, inputs) weight in this form, in the model's ``dtype``."""
        if self.format is None:
            return _meta((outputs, inputs), dtype)
        scales = get_dtype(self.scale_dtype)
        if self.format == "int4":
            group = inputs if self.group_size == -1 else self.group_size
            groups = cdiv(inputs, group)
            return QuantizedWeight("int4", (outputs, inputs), dtype, _meta((cdiv(inputs, 8), outputs), "int32"),
                                   _meta((groups, outputs), scales), _meta((groups, outputs), "uint8"),
                                   _meta((inputs,), "int32") if self.act_order else None, group, 1)
        values = _meta((outputs, inputs), "int8" if self.format == "int8" else "float8_e4m3fn")
        if self.format == "fp8" and self.fp8_scales == "block":
            grid = _meta((cdiv(outputs, FP8_BLOCK), cdiv(inputs, FP8_BLOCK)), scales).transpose(0, 1)
            return QuantizedWeight("fp8", (outputs, inputs), dtype, values, grid, None, None, FP8_BLOCK, FP8_BLOCK)
        per_tensor = self.format == "fp8" and self.fp8_scales == "tensor"
        return QuantizedWeight(self.format, (outputs, inputs), dtype, values,
                               _meta((1, 1 if per_tensor else outputs), scales), None, None, inputs,
                               outputs if per_tensor else 1)


    def experts(self, count: int, outputs: int, inputs: int, dtype):
        """A meta stack of ``count`` experts' (outputs, inputs) weights in this form, as ``quant.stack_experts``
        lays them out (fp8 scales per tensor become per channel); float (experts, outputs, inputs) where the
        form is float."""
        if self.format is None:
            return _meta((count, outputs, inputs), dtype)
        one = self.weight(outputs, inputs, dtype)
        block_n = one.scale_block_n
        scales = one.scales
        if self.format == "fp8" and self.fp8_scales == "tensor":
            scales, block_n = scales.expand(1, outputs), 1
        parts = [None if t is None else _meta((count, *t.shape), t.dtype) for t in (one.qweight, scales, one.zeros,
                                                                                  one.g_idx)]
        return QuantizedWeight(self.format, (count, outputs, inputs), dtype, *parts, one.group_size, block_n)


FLOAT = Projections()


def _meta(shape, dtype):
    return new_tensor(tuple(shape), get_dtype(dtype), resolve("meta"))


def _linear(facts, rows: int, inputs: int, outputs: int, dtype, bias: bool, form: Projections = FLOAT) -> list:
    x, b = _meta((rows, inputs), dtype), _meta((outputs,), dtype) if bias else None
    weight = form.weight(outputs, inputs, dtype)
    if form.format is None:
        return registry.get("linear").key(facts, x, weight, b)
    return registry.get("quantized_linear").key(facts, x, weight, b, form.fp8_activations and rows > GEMV_MAX_ROWS)


def _mixture_keys(config: DecoderConfig, facts, rows: int, dtype, form: Projections = FLOAT) -> list:
    """The keys of a mixture-of-experts layer's MLP on ``rows`` normed rows: ``moe``'s (its router and its two
    grouped products, float or quantized as ``form`` says), and its shared expert's products (gate, up and gate's
    row joined, then down; quantized, the gate and up rows joined where they join and the float gate's row
    apart)."""
    c, mixture = config, config.mixture
    experts, size, shared = mixture.experts, mixture.intermediate_size, mixture.shared_size
    keys = registry.get("moe").key(facts, _meta((rows, c.hidden_size), dtype), _meta((experts, c.hidden_size), dtype),
                                   form.experts(experts, 2 * size, c.hidden_size, dtype),
                                   form.experts(experts, c.hidden_size, size, dtype), mixture.top_k)
    if shared and form.format is None:
        keys += _linear(facts, rows, c.hidden_size, 2 * shared + 1, dtype, False)
    elif shared:
        for outputs in [2 * shared] if form.joined else [shared] * 2:
            keys += _linear(facts, rows, c.hidden_size, outputs, dtype, False, form)
        keys += _linear(facts, rows, c.hidden_size, 1, dtype, False)
    if shared:
        keys += _linear(facts, rows, shared, c.hidden_size, dtype, False, form)
    return keys


def _layer_products(config: DecoderConfig, facts, rows: int, dtype, form: Projections = FLOAT,
                    index: int = 0) -> list:
    """The keys of layer ``index``'s products on ``rows`` rows of the residual stream: qkv, o, gate_up and
    down (a mixture of experts' keys in a sparse layer), q, k and v (gate and up) apart where their weights do
    not join."""
    c = config
    q_rows, kv_rows = c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim
    qkv = [q_rows + 2 * kv_rows] if form.joined or c.fused_qkv else [q_rows, kv_rows, kv_rows]
    gate_up = ([c.intermediate_size] if not c.gated else [2 * c.intermediate_size]
               if form.joined or c.fused_gate_up else [c.intermediate_size] * 2)
    keys = []
    for outputs in qkv:
        keys += _linear(facts, rows, c.hidden_size, outputs, dtype, c.attention_bias, form)
    keys += _linear(facts, rows, q_rows, c.hidden_size, dtype, c.output_bias, form)
    if c.mixture_at(index) is not None:
        return keys + _mixture_keys(c, facts, rows, dtype, form)
    for outputs in gate_up:
        keys += _linear(facts, rows, c.hidden_size, outputs, dtype, c.mlp_bias, form)
    return keys + _linear(facts, rows, c.intermediate_size, c.hidden_size, dtype, c.mlp_bias, form)


def _logits(config: DecoderConfig, facts, rows: int, dtype) -> list:
    return _linear(facts, rows, config.hidden_size, config.vocab_size, dtype, config.head_bias)


def prefill_keys(config: DecoderConfig, dtype, facts: dict, length: int, offset: int = 0,
                 logits: bool = True, projections: Projections = FLOAT) -> Counter:
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
    for index, window in enumerate(c.layer_windows):
        counts.update(_layer_products(c, facts, length, dtype, projections, index))
        counts.update(attention(facts, q, k, v, scale=c.attention_scale, softcap=c.attention_softcap, window=window,
                                query_offset=offset))
    if logits:
        counts.update(_logits(c, facts, 1, dtype))
    return counts


def _folded(config: DecoderConfig, facts, rows: int, dtype, projections: Projections) -> Counter:
    """The keys of a decode step whose norms (RMS or LayerNorm) and gated activations fold into the products
    after them (``DecoderModel._layers``): each layer's qkv product behind its add + norm (the first layer's
    behind its norm alone; a post-norm family's products take the stream as it is), its o product, its gate_up
    (a plain MLP's up) product behind an add + norm (a parallel block's behind a norm of the stream its qkv
    product summed), its down product behind a gated activation (a plain one's apart), and the head (float)
    behind the final add + norm. Quantized projections fold alike, but for
    q, k and v (gate and up) weights that do not join: their norm runs apart (and forms no key) before their
    products."""
    c = config
    counts: Counter = Counter()
    qkv_joined, gate_up_joined = projections.joined or c.fused_qkv, projections.joined or c.fused_gate_up

    def key(op, width, inputs, outputs, *between, bias=False, form=projections, **options):
        """The keys of ``op`` on rows ``width`` wide, ``between`` them and its (outputs, inputs) weight."""
        counts.update(registry.get(op).key(facts, _meta((rows, width), dtype), *between,
                                           form.weight(outputs, inputs, dtype),
                                           _meta((outputs,), dtype) if bias else None, **options))

    def apart(inputs, *outputs, bias=False):
        for width in outputs:
            counts.update(_linear(facts, rows, inputs, width, dtype, bias, projections))
    vector = _meta((c.hidden_size,), dtype)
    stream = _meta((rows, c.hidden_size), dtype)
    # a LayerNorm's weight and bias (either may be absent: the norm's own facts do not change the key), an RMS norm's
    # weight
    norm = (vector, vector) if c.layer_norm else (vector,)
    first_op, added_op = ("layer_norm_linear", "add_layer_norm_linear") if c.layer_norm else \
        ("rms_norm_linear", "add_rms_norm_linear")
    q_rows, kv_rows = c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim
    for index in range(c.num_layers):
        if not qkv_joined:
            apart(c.hidden_size, q_rows, kv_rows, kv_rows, bias=c.attention_bias)
        elif c.post_norms:  # the stream feeds its products unnormed (OLMo 2): nothing to fold
            apart(c.hidden_size, q_rows + 2 * kv_rows, bias=c.attention_bias)
        elif index == 0:
            key(first_op, c.hidden_size, c.hidden_size, q_rows + 2 * kv_rows, *norm, bias=c.attention_bias)
        else:
            key(added_op, c.hidden_size, c.hidden_size, q_rows + 2 * kv_rows, stream, *norm,
                bias=c.attention_bias)
        apart(q_rows, c.hidden_size, bias=c.output_bias)
        if c.mixture_at(index) is not None:  # its norm runs alone
            counts.update(_mixture_keys(c, facts, rows, dtype, projections))
            continue
        first_width = (2 if c.gated else 1) * c.intermediate_size
        # a parallel block's MLP norms the stream its attention's product already added to
        mlp_op, mlp_between = (first_op, norm) if c.parallel else (added_op, (stream, *norm))
        if (gate_up_joined or not c.gated) and c.post_norms:
            apart(c.hidden_size, first_width, bias=c.mlp_bias)
        elif gate_up_joined or not c.gated:
            key(mlp_op, c.hidden_size, c.hidden_size, first_width, *mlp_between, bias=c.mlp_bias)
        else:
            apart(c.hidden_size, c.intermediate_size, c.intermediate_size, bias=c.mlp_bias)
        if c.gated:
            key("act_and_mul_linear", 2 * c.intermediate_size, c.intermediate_size, c.hidden_size,
                bias=c.mlp_bias, activation=c.activation)
        else:  # a plain MLP's activation runs alone, then its down product
            apart(c.intermediate_size, c.hidden_size, bias=c.mlp_bias)
    key(added_op, c.hidden_size, c.hidden_size, c.vocab_size, stream, *norm, bias=c.head_bias, form=FLOAT)
    return counts


def decode_keys(config: DecoderConfig, dtype, facts: dict, rows: int, projections: Projections = FLOAT) -> Counter:
    """The keys of one decode step of ``rows`` sequences (padding rows included)."""
    dtype = get_dtype(dtype)
    if rows <= FOLD_MAX_ROWS:
        return _folded(config, facts, rows, dtype, projections)
    counts: Counter = Counter()
    for index in range(config.num_layers):
        counts.update(_layer_products(config, facts, rows, dtype, projections, index))
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
                  prefill_chunk: int = DEFAULT_PREFILL_CHUNK, replay: bool = True,
                  projections: Projections = FLOAT) -> Counter:
    """Launch key -> how many launches form it over a prefill of each prompt length (``prompts``, or every
    length up to ``context``) and a decode step of each batch size (``batch_sizes``; with ``replay``, as the
    engine replays them, padded to their bucket), the layers' weights held as ``projections`` says."""
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
                chunks[chunk] = prefill_keys(config, dtype, facts, *chunk, projections=projections)
            counts.update(chunks[chunk])
    steps = {}
    for size in sorted(set(batch_sizes)):
        if size < 1:
            raise ValueError(f"batch size {size}: expected at least 1")
        rows = next((b for b in BATCH_BUCKETS if b >= size), size) if replay else size
        if rows not in steps:
            steps[rows] = decode_keys(config, dtype, facts, rows, projections)
        counts.update(steps[rows])
    return counts


# each quantized method's scale tensor (its dtype is the launch keys'), and int4's or fp8's layout
_SCALES = {"gptq": "scales", "awq": "scales", "fp8": "weight_scale_inv", "fbgemm_fp8": "weight_scale",
           "compressed-tensors": "weight_scale", "nbx": "weight_scale"}
_FORMATS = {"gptq": "int4", "awq": "int4", "fp8": "fp8", "fbgemm_fp8": "fp8", "compressed-tensors": "fp8",
            "nbx": "int8"}


def _scale_tensor(directory: str, method: str) -> tuple[str, tuple]:
    """The dtype name and shape of the first decoder layer scale tensor in the checkpoint's headers (its
    names under a multimodal checkpoint's prefix too, ``checkpoint.TEXT_DECODERS``)."""
    suffix = _SCALES[method]
    prefixes = tuple(prefix + "model.layers." for prefix in checkpoint.TEXT_PREFIXES)
    for path in checkpoint.weight_files(directory):
        with safe_open(path) as file:
            for name in file.keys():
                if name.startswith(prefixes) and name.endswith("." + suffix):
                    info = file.info(name)
                    return info.dtype.name, tuple(info.shape)
    raise CheckpointError(f"{directory}: quantization_config names {method}, but no layer tensor ends in .{suffix}")


def checkpoint_projections(directory: str, hf_config: dict, dtype, facts: dict, quantize=None,
                           fp8_activations: bool | None = None) -> Projections:
    """The ``Projections`` the checkpoint's layers load as (``quantized.load_weights``), in ``dtype``, with
    ``quantize`` and ``fp8_activations`` as ``llm.load`` takes them, on a device of ``facts``."""
    spec = quantization_of(hf_config, directory)
    quantize, group_size = requested_rounding(directory, spec, quantize)
    if quantize is not None:
        # rounded on load: scales in the model's dtype, fp8's in float32 per channel (``QuantizedWeight.quantize``)
        form = Projections(quantize, "float32" if quantize == "fp8" else get_dtype(dtype).name, group_size)
    elif spec is not None:
        method = spec["method"]
        scale_dtype, scale_shape = _scale_tensor(directory, method)
        fp8_scales = ("block" if method == "fp8" or spec.get("weights") == "block"
                      else "tensor" if math.prod(scale_shape) == 1 else "channel")
        form = Projections(_FORMATS[method], scale_dtype, spec.get("group_size", -1),
                           method == "gptq" and bool(hf_config["quantization_config"].get("desc_act")), fp8_scales)
    else:
        form = FLOAT
    sample = {} if form.format is None else {"model.layers.0.mlp.down_proj.weight": form.weight(
        hf_config["hidden_size"], hf_config["intermediate_size"], get_dtype(dtype))}
    return replace(form, fp8_activations=fp8_activations_of(spec, fp8_activations, sample, facts, directory))


def checkpoint_census(directory, facts: dict, *, dtype=None, batch_sizes=None, context=None,
                      prefill_chunk: int = DEFAULT_PREFILL_CHUNK, quantize=None,
                      fp8_activations: bool | None = None) -> tuple[Counter, dict]:
    """``engine_census`` of the Hugging Face checkpoint ``directory`` (its config.json, and a quantized one's
    headers): in ``dtype`` (default the checkpoint's), every batch size up to the largest replayed bucket (or
    ``batch_sizes``) and every prompt length up to ``context`` (default the model's), its layers' weights as
    ``llm.load(directory, quantize=, fp8_activations=)`` holds them. Also the settings used, for printing."""
    directory = os.fspath(directory)
    hf_config, _ = checkpoint.decoder_config(directory)
    config = DecoderConfig.from_hf(hf_config, directory)
    dtype = dtype or config.dtype
    projections = checkpoint_projections(directory, hf_config, dtype, facts, quantize, fp8_activations)
    context = config.max_positions if context is None else context
    if type(context) is not int or not 1 <= context <= config.max_positions:
        raise ValueError(f"context {context!r}: expected 1 to the model's {config.max_positions} positions")
    batch_sizes = tuple(range(1, BATCH_BUCKETS[-1] + 1)) if batch_sizes is None else tuple(batch_sizes)
    counts = engine_census(config, dtype, facts, batch_sizes=batch_sizes, context=context,
                           prefill_chunk=prefill_chunk, projections=projections)
    return counts, {"dtype": get_dtype(dtype).name, "context": context, "prefill_chunk": prefill_chunk,
                    "batch_sizes": f"{min(batch_sizes)}..{max(batch_sizes)}" if batch_sizes else "none",
                    "weights": projections.format or "float",
                    "fp8_activations": projections.fp8_activations}
