"""Ahead-of-time tuning with certification: each launch key of a census tuned, among the candidates whose
output matches a float64 reference.

A key names its kernel, its extents' buckets, dtypes and layout flags, so operands that form it can be made
from the key alone: its representative shapes are each bucket's top rung and the smallest extent of the
bucket (ragged against every tile). For each candidate setting the family's op runs on those operands with
the setting forced, and its output is compared with a reference computed independently in float64 with
NumPy (the certifier checks the kernels, so it cannot share them) within the error bound of the dtypes'
rounding. A candidate outside the bound, or one that fails to run, is refused and kept in the entry with
its reason; the setting stored is the fastest certified candidate (under Triton's interpreter, where
nothing can be timed, the first).
"""
from __future__ import annotations

import functools
import json
import math
import threading
from dataclasses import dataclass
from typing import Callable

import numpy as np

import nbxtensor as nbx

from . import progress
from .allocation import poisoned
from .census import census
from .device import backend_for, resolve
from .dtypes import get_dtype
from .nn import functional as F
from .ops.attention import prefill_attention
from .ops.convolution import _DIRECT_MAX_GROUP_MATRIX, _DIRECT_SHAPES, convolution
from .ops.matmul import _product
from .ops.matmul_prologue import (act_and_mul_linear, add_layer_norm_linear, add_rms_norm_linear, layer_norm_linear,
                                  rms_norm_linear)
from .ops.moe import grouped_mm, grouped_quantized_linear, grouped_reference
from .ops.plans import clear_all
from .ops.quant import quantized_linear
from .quant import FP8_BLOCK, QuantizedWeight, stack_experts
from .tuning.cache import bucket, cache_for, certifications, op_of, recording, time_candidates

__all__ = ["certify_key", "certify_keys", "certify_graph", "parse_key", "MalformedKey", "CERTIFIERS"]


class MalformedKey(ValueError):
    """A launch key that is not one ``launch_key`` writes: a part missing or not of its form."""


def parse_key(key: str) -> tuple[str, dict, tuple, dict]:
    """(kernel, extents, dtype names, flags) of a launch key as ``launch_key`` writes it."""
    parts = key.split("|")
    plain = [i for i, part in enumerate(parts) if "=" not in part and i > 0]
    if not plain:
        raise MalformedKey(f"launch key {key!r}: no dtypes part (kernel|NAME=extent...|dtypes|flag=value...)")
    split = plain[0]
    extents = {}
    for part in parts[1:split]:
        name, _, value = part.partition("=")
        if not value.isdigit():
            raise MalformedKey(f"launch key {key!r}: extent {part!r} is not NAME=integer")
        extents[name] = int(value)
    flags = dict(part.partition("=")[::2] for part in parts[split + 1:])
    return parts[0], extents, tuple(d for d in parts[split].split(",") if d), flags


@dataclass(frozen=True)
class Case:
    """One representative call: ``run()`` computes the output; ``reference`` and ``bound`` are float64."""
    shape: tuple
    run: Callable
    reference: np.ndarray
    bound: np.ndarray


@dataclass(frozen=True)
class Certifier:
    rows: tuple  # the extents bucketed on the rows ladder (the others on the cols ladder)
    cases: Callable  # (extents, dtypes, flags, device) -> [Case] (none: no operands form the key)


_UNIT_ROUNDOFF = {"float64": 2.0 ** -53, "float32": 2.0 ** -24, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}


def _output_rounding(dtype_name: str) -> float:
    """The relative rounding of a result stored in ``dtype_name`` after float32 accumulation."""
    unit = _UNIT_ROUNDOFF.get(dtype_name, 0.0)
    return unit if unit > _UNIT_ROUNDOFF["float32"] else 0.0


def _gamma(terms: int, unit: float) -> float:
    """The classic bound on the relative error of a sum of ``terms`` rounded products, in any order."""
    return terms * unit / (1 - terms * unit)


def _operand(rng, shape, dtype_name: str, device, transposed: bool):
    """A tensor of ``dtype_name`` of ``shape`` (its last two dims stored transposed when asked), and its
    exact values in float64."""
    stored = (*shape[:-2], shape[-1], shape[-2]) if transposed else tuple(shape)
    if dtype_name.startswith(("int", "uint")):
        values = rng.integers(-8 if dtype_name.startswith("int") else 0, 8, stored).astype(np.int32)
    else:
        values = rng.standard_normal(stored).astype(np.float32)
    tensor = nbx.tensor(values, device=device).to(getattr(nbx, dtype_name))
    if transposed:
        tensor = tensor.transpose(-1, -2)
    return tensor, _exact(tensor)


def _exact(tensor) -> np.ndarray:
    """A tensor's values in float64 (half floats widened on the device first: float32 holds them exactly)."""
    if tensor.dtype.kind == "float" and tensor.dtype.itemsize < 4:
        tensor = tensor.to(nbx.float32)
    with np.errstate(invalid="ignore"):  # a wrong candidate's output may hold anything
        return tensor.cpu().numpy().astype(np.float64)


def _product_cases(extents, dtypes, flags, device) -> list[Case]:
    """GEMM and GEMV keys: ``matmul``'s product (the same route a linear layer takes) on operands with the
    key's dtypes and layouts. Bound: float accumulation of K products, then rounding to the output."""
    rng = np.random.default_rng(0)
    in_name, out_name = dtypes
    out_dtype = get_dtype(out_name)
    batches, m, n, k = extents.get("B"), extents["M"], extents["N"], extents["K"]
    lead = () if batches is None else (batches,)
    a, a64 = _operand(rng, (*lead, m, k), in_name, device, transposed=flags.get("a_k_unit") == "0")
    b, b64 = _operand(rng, (*lead, k, n), in_name, device, transposed=flags.get("b_n_unit") == "0")
    reference = np.matmul(a64, b64)
    if out_dtype.kind == "int":
        bound = np.zeros_like(reference)
    else:
        accumulate = _UNIT_ROUNDOFF["float32"]
        rounded = _output_rounding(out_name)
        # K products and sums plus the two operands' conversions to the accumulator, then the output's rounding
        bound = _gamma(k + 3, accumulate) * np.matmul(np.abs(a64), np.abs(b64)) + rounded * np.abs(reference)
    return [Case((*lead, m, n, k), lambda: _product("matmul", a, b, lambda: out_dtype), reference, bound)]


def _grouped_cases(extents, dtypes, flags, device) -> list[Case]:
    """``grouped_gemm`` keys: ``grouped_mm`` on rows shared out unevenly among the key's experts (of several,
    the first takes none and the last more than the others; an eighth of the rows, past the last end, stay
    zero), its stack of matrices laid out as the key's flag says. Bound: the product's, row by row against its
    expert's matrix."""
    rng = np.random.default_rng(0)
    (in_name, _), rows, n, k, experts = dtypes, extents["M"], extents["N"], extents["K"], extents["E"]
    a, a64 = _operand(rng, (rows, k), in_name, device, transposed=flags.get("a_k_unit") == "0")
    b, b64 = _operand(rng, (experts, k, n), in_name, device, transposed=flags.get("b_n_unit") == "0")
    ends = np.minimum(np.arange(experts) * rows // experts, rows - rows // 8)
    ends[-1] = rows - rows // 8
    reference, magnitudes = grouped_reference(a64, b64, ends), grouped_reference(np.abs(a64), np.abs(b64), ends)
    bound = _gamma(k + 3, _UNIT_ROUNDOFF["float32"]) * magnitudes + _output_rounding(in_name) * np.abs(reference)
    offs = nbx.tensor(ends.astype(np.int32), device=device)
    return [Case((rows, n, k, experts), lambda: grouped_mm(a, b, offs), reference, bound)]


def _prologue_cases(kernel: str, extents, dtypes, flags, device) -> list[Case]:
    """Keys of the products with a prologue (``ops/matmul_prologue.py``), on a contiguous input, weight
    (out_features, K) and bias. ``gemv_rms_norm``: the rows' RMS norm (of x + residual with the key's
    residual flag) times a norm weight; its bound adds to the product's the input rows' error: the sum's and
    the normed value's roundings to the dtype, the norm's own float32 roundings (its K squares).
    ``gemv_layer_norm``: the same of a LayerNorm with a bias, its bound also the mean's rounding carried by
    every centered value. And
    ``gemv_act_and_mul``: act(gate) * up of the key's activation; its bound adds the activation's value
    rounded to the dtype before and after the product with up, and float32's few ulps in exp or tanh (of
    the gate's size: 1 + tanh cancels). The ``quantized_`` kernels: the same of a weight rounded to nearest
    in the key's format, as ``_quantized_cases`` makes and bounds it."""
    quantized = kernel.startswith("quantized_")
    if quantized and flags.get("g_idx") == "1":
        return []  # act-order weights come only from GPTQ checkpoints: no rounding here makes one
    rng = np.random.default_rng(0)
    name, _ = dtypes
    m, n, k = extents["M"], extents["N"], extents["K"]
    unit, accumulate = max(_UNIT_ROUNDOFF.get(name, 0.0), _UNIT_ROUNDOFF["float32"]), _UNIT_ROUNDOFF["float32"]
    if quantized:
        weight = QuantizedWeight.quantize(rng.standard_normal((n, k)).astype(np.float32) * 0.05, flags["format"],
                                          group_size=min(128, k), device=device, dtype=name)
        w64 = weight.dequantize().astype(np.float64)
        dequantized = unit + accumulate
    else:
        weight, w64 = _operand(rng, (n, k), name, device, transposed=False)
        dequantized = 0.0
    bias, b64 = _operand(rng, (n,), name, device, transposed=False)
    if kernel.endswith("gemv_rms_norm") or kernel.endswith("gemv_layer_norm"):
        x, x64 = _operand(rng, (m, k), name, device, transposed=False)
        norm, norm64 = _operand(rng, (k,), name, device, transposed=False)
        shift, shift64 = _operand(rng, (k,), name, device, transposed=False)
        layer = kernel.endswith("gemv_layer_norm")
        eps = 1e-5 if layer else 1e-6
        residual, r64 = _operand(rng, (m, k), name, device, transposed=False)

        def run():
            if layer and flags.get("residual") == "1":
                return add_layer_norm_linear(x, residual, norm, shift, weight, bias, eps)[0]
            if layer:
                return layer_norm_linear(x, norm, shift, weight, bias, eps)
            if flags.get("residual") == "1":
                return add_rms_norm_linear(x, residual, norm, weight, bias, eps)[0]
            return rms_norm_linear(x, norm, weight, bias, eps)
        if flags.get("residual") == "1":
            x64 = x64 + r64
        if layer:
            # the mean's float32 sum of K terms shifts every centered value by up to gamma(K) of the row's size
            centered = x64 - np.mean(x64, axis=1, keepdims=True)
            inverse = 1 / np.sqrt(np.mean(centered * centered, axis=1, keepdims=True) + eps)
            rows = centered * inverse * norm64 + shift64
            row_error = ((3 * unit + _gamma(2 * k + 8, accumulate)) * np.abs(rows)
                         + _gamma(k + 4, accumulate) * np.abs(x64).max(axis=1, keepdims=True) * inverse
                         * np.abs(norm64))
        else:
            rows = x64 / np.sqrt(np.mean(x64 * x64, axis=1, keepdims=True) + eps) * norm64
            row_error = (3 * unit + _gamma(k + 4, accumulate)) * np.abs(rows)
    else:
        activation = flags.get("activation", "silu")
        x, x64 = _operand(rng, (m, 2 * k), name, device, transposed=False)
        gate, up = x64[:, :k], x64[:, k:]
        activated = {"silu": lambda g: g / (1 + np.exp(-g)),
                     "gelu_tanh": lambda g: 0.5 * g * (1 + np.tanh(np.sqrt(2 / np.pi) * (g + 0.044715 * g ** 3))),
                     "gelu": lambda g: 0.5 * g * (1 + _erf(g / np.sqrt(2)))}[activation](gate)
        rows = activated * up
        row_error = (2 * unit + 8 * accumulate) * np.abs(rows) + 8 * accumulate * np.abs(gate * up)

        def run():
            return act_and_mul_linear(x, weight, bias, activation)
    reference = rows @ w64.T + b64
    bound = (_gamma(k + 4, accumulate) * (np.abs(rows) @ np.abs(w64).T + np.abs(b64)) + row_error @ np.abs(w64).T
             + dequantized * (np.abs(rows) @ np.abs(w64).T) + _output_rounding(name) * np.abs(reference))
    return [Case((m, n, k), run, reference, bound)]


def _erf(values: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(values)


_HEADS = 2  # prefill operands' heads: a head past the first catches a wrong head stride


def _softmax_rows(scores: np.ndarray) -> np.ndarray:
    peak = np.max(scores, axis=-1, keepdims=True)
    weights = np.exp(scores - np.where(np.isfinite(peak), peak, 0.0))
    return weights / np.sum(weights, axis=-1, keepdims=True)


def _attention_reference(q64, k64, v64, allowed, additive, softcap, dtype_name: str) -> tuple:
    """(softmax(softcap(q k^T / sqrt(E)) + additive, over the ``allowed`` keys) v, its bound), both float64,
    for (H, L, E) queries and keys and values broadcast to their heads. Bound, per output row: the scores'
    error (E rounded products, the scale, the cap's tanh) moves each weight by about that much relatively,
    the weights rounded to the input dtype for the second product and its S terms add theirs, all times the
    largest value; a factor of 4 covers the exponential's own few ulps and the online rescaling's roundings."""
    dim = q64.shape[-1]
    scale = 1.0 / np.sqrt(dim)
    scores = np.matmul(q64, np.swapaxes(k64, -1, -2)) * scale
    magnitudes = np.matmul(np.abs(q64), np.swapaxes(np.abs(k64), -1, -2)) * scale
    accumulate = _UNIT_ROUNDOFF["float32"]
    score_error = _gamma(dim + 2, accumulate) * magnitudes + 2 * accumulate * np.abs(scores)
    if softcap is not None:  # the cap's slope is at most 1: it shrinks errors, and adds its tanh's
        scores = softcap * np.tanh(scores / softcap)
        score_error = score_error + 4 * accumulate * softcap
    if additive is not None:
        scores = scores + additive
    scores = np.where(allowed, scores, -np.inf)
    reference = np.matmul(_softmax_rows(scores), v64)
    weights_unit = max(_UNIT_ROUNDOFF.get(dtype_name, accumulate), accumulate)
    row_error = np.max(np.where(allowed, score_error, 0.0), axis=-1, keepdims=True)
    largest = np.max(np.abs(v64), axis=(-2, -1), keepdims=True)
    rounded = _output_rounding(dtype_name)
    bound = 4 * (2 * row_error + 2 * weights_unit + _gamma(k64.shape[-2] + 2, accumulate)) * largest \
        + rounded * np.abs(reference)
    return reference, np.broadcast_to(bound, reference.shape)


def _attention_mask(rng, flags, length, keys, dtype_name, device):
    """The mask the key's ``mask`` flag names (0 none, 1 bool, 2 additive), (L, S) broadcast over heads: the
    tensor and (allowed, additive) in float64."""
    kind = flags.get("mask", "0")
    if kind == "0":
        return None, np.ones((length, keys), dtype=bool), None
    if kind == "1":
        allowed = rng.random((length, keys)) < 0.7
        allowed[:, 0] = True  # every row attends somewhere
        return nbx.tensor(allowed, device=device), allowed, None
    if kind == "2":
        mask, mask64 = _operand(rng, (length, keys), dtype_name, device, transposed=False)
        return mask, np.ones((length, keys), dtype=bool), mask64
    raise ValueError(f"mask kind {kind!r}")


def _prefill_cases(extents, dtypes, flags, device) -> list[Case]:
    """Prefill attention keys: plain ones through ``scaled_dot_product_attention``; those naming a cap, a
    window or a query offset (a prompt's chunk past its first) through ``prefill_attention``, the op that
    takes them, with the offset that makes the queries the keys' last positions; so too one causal row."""
    rng = np.random.default_rng(0)
    length, keys, dim = extents["L"], extents["S"], extents["E"]
    (name,) = dtypes
    shape = (length, keys, dim)
    flagged = "softcap" in flags or "window" in flags
    if flagged or (length == 1 and flags.get("causal") == "1" and flags.get("mask") == "0"):
        # one causal query row (a one-token prompt) sees one key: the public op would decode it instead
        keys = keys if flagged else length
        shape, offset = (length, keys, dim), keys - length
        if offset < 0:
            return []
        softcap = 2.0 if flags.get("softcap") == "1" else None
        window = max(1, keys // 2) if flags.get("window") == "1" else None
        q, q64 = _operand(rng, (_HEADS, length, dim), name, device, transposed=False)
        k, k64 = _operand(rng, (1, keys, dim), name, device, transposed=False)
        v, v64 = _operand(rng, (1, keys, dim), name, device, transposed=False)
        position = offset + np.arange(length)[:, None]
        seen = np.arange(keys)[None, :]
        allowed = (seen <= position) & ((seen > position - window) if window else True)
        reference, bound = _attention_reference(q64, np.broadcast_to(k64, (_HEADS, keys, dim)),
                                                np.broadcast_to(v64, (_HEADS, keys, dim)), allowed, None, softcap, name)
        return [Case(shape, lambda: prefill_attention(q, k, v, softcap=softcap, window=window, query_offset=offset),
                     reference, bound)]
    q, q64 = _operand(rng, (1, _HEADS, length, dim), name, device, transposed=False)
    k, k64 = _operand(rng, (1, _HEADS, keys, dim), name, device, transposed=False)
    v, v64 = _operand(rng, (1, _HEADS, keys, dim), name, device, transposed=False)
    mask, allowed, additive = _attention_mask(rng, flags, length, keys, name, device)
    causal = flags.get("causal") == "1"
    if causal:
        allowed = allowed & np.tril(np.ones((length, keys), dtype=bool))  # top-left aligned: query i sees j <= i
    reference, bound = _attention_reference(q64, k64, v64, allowed, additive, None, name)
    return [Case(shape, lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal),
                 reference, bound)]


def _decode_cases(extents, dtypes, flags, device) -> list[Case]:
    """Decode attention keys: one query row of G heads sharing one key head."""
    rng = np.random.default_rng(0)
    group, keys, dim = extents["G"], extents["S"], extents["E"]
    (name,) = dtypes
    q, q64 = _operand(rng, (1, group, 1, dim), name, device, transposed=False)
    k, k64 = _operand(rng, (1, 1, keys, dim), name, device, transposed=False)
    v, v64 = _operand(rng, (1, 1, keys, dim), name, device, transposed=False)
    mask, allowed, additive = _attention_mask(rng, flags, 1, keys, name, device)
    reference, bound = _attention_reference(q64, np.broadcast_to(k64, (1, group, keys, dim)),
                                            np.broadcast_to(v64, (1, group, keys, dim)), allowed, additive, None, name)
    return [Case((group, keys, dim), lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                                                            enable_gqa=group > 1), reference, bound)]


def _quantized_cases(extents, dtypes, flags, device) -> list[Case]:
    """Quantized GEMM and GEMV keys: ``quantized_linear`` of an input with the key's dtype and a weight
    rounded to nearest in the key's format (its scales in the key's scale dtype, checked by the key the call
    forms). Reference: the input times the dequantized weight (``QuantizedWeight.dequantize``, on the host),
    in float64. Bound: the product's, plus the dequantized weight's rounding to the dot's input dtype
    (the kernel dequantizes tiles in registers) and to float32 (the host's dequantized copy)."""
    if flags.get("g_idx") == "1":
        return []  # act-order weights come only from GPTQ checkpoints: no rounding here makes one
    rng = np.random.default_rng(0)
    m, n, k = extents["M"], extents["N"], extents["K"]
    in_name, _ = dtypes
    x, x64 = _operand(rng, (m, k), in_name, device, transposed=False)
    weight = QuantizedWeight.quantize(rng.standard_normal((n, k)).astype(np.float32) * 0.05, flags["format"],
                                      group_size=min(128, k), device=device, dtype=in_name)
    w64 = weight.dequantize().astype(np.float64)
    reference = x64 @ w64.T
    accumulate = _UNIT_ROUNDOFF["float32"]
    dequantized = max(_UNIT_ROUNDOFF.get(in_name, accumulate), accumulate) + accumulate
    rounded = _output_rounding(in_name)
    bound = (_gamma(k + 3, accumulate) + dequantized) * (np.abs(x64) @ np.abs(w64).T) + rounded * np.abs(reference)
    return [Case((m, n, k), lambda: quantized_linear(x, weight), reference, bound)]


def _grouped_quantized_cases(extents, dtypes, flags, device) -> list[Case]:
    """``grouped_quantized_gemm`` keys: ``grouped_quantized_linear`` of rows shared out as ``_grouped_cases``
    shares them, against a stack of the key's experts' weights each rounded to nearest in the key's format (as
    ``_quantized_cases`` makes and bounds one, its scales in the key's scale dtype, which may differ from the
    rows'; act-order keys alike have no rounding to make them). Reference: each expert's rows times its
    dequantized weight, in float64."""
    if flags.get("g_idx") == "1":
        return []
    rng = np.random.default_rng(0)
    (in_name, scale_name), rows, n, k, experts = dtypes, extents["M"], extents["N"], extents["K"], extents["E"]
    x, x64 = _operand(rng, (rows, k), in_name, device, transposed=False)
    weight = stack_experts([[QuantizedWeight.quantize(rng.standard_normal((n, k)).astype(np.float32) * 0.05,
                                                      flags["format"], group_size=min(128, k), device=device,
                                                      dtype=scale_name)] for _ in range(experts)])
    w64 = weight.dequantize().astype(np.float64).transpose(0, 2, 1)
    ends = np.minimum(np.arange(experts) * rows // experts, rows - rows // 8)
    ends[-1] = rows - rows // 8
    reference, magnitudes = grouped_reference(x64, w64, ends), grouped_reference(np.abs(x64), np.abs(w64), ends)
    accumulate = _UNIT_ROUNDOFF["float32"]
    dequantized = max(_UNIT_ROUNDOFF.get(in_name, accumulate), accumulate) + accumulate
    bound = (_gamma(k + 3, accumulate) + dequantized) * magnitudes + _output_rounding(in_name) * np.abs(reference)
    offs = nbx.tensor(ends.astype(np.int32), device=device)
    return [Case((rows, n, k, experts), lambda: grouped_quantized_linear(x, weight, offs), reference, bound)]


def _conv_reference(x64, w64, b64, stride, padding, groups: int, transposed: bool, out_spatial) -> np.ndarray:
    """The convolution (dilation 1) of 5-d ``x64`` (N, C, D, H, W) by ``w64`` in float64, one kernel position
    at a time, each a batch of matrix products (positions by a group's input channels, times its weight):
    forward, every output position gathers the inputs its window covers; transposed, every input position
    scatters into the outputs its window covers, then the padding is cropped (output padding reaches past
    what was scattered: zeros)."""
    n, cin = x64.shape[:2]
    window, spatial = w64.shape[2:], x64.shape[2:]
    # channels innermost: (N, groups, D, H, W, C_in / groups)
    inputs = np.moveaxis(x64.reshape(n, groups, cin // groups, *spatial), 2, -1)
    if transposed:  # weight (C_in, C_out / groups, *window): a group's (C_in / groups, C_out / groups)
        weights = w64.reshape(groups, cin // groups, *w64.shape[1:])
        cout = w64.shape[1] * groups
        reached = [max((i - 1) * s + k, p + o) for i, s, k, p, o in zip(spatial, stride, window, padding, out_spatial)]
        out = np.zeros((n, groups, *reached, cout // groups))
        for position in np.ndindex(*window):
            hit = tuple(slice(k, k + (i - 1) * s + 1, s) for k, i, s in zip(position, spatial, stride))
            out[(slice(None), slice(None), *hit)] += _group_products(inputs, weights[(..., *position)])
        out = out[(slice(None), slice(None), *(slice(p, p + o) for p, o in zip(padding, out_spatial)))]
    else:  # weight (C_out, C_in / groups, *window): a group's (C_in / groups, C_out / groups) transposed
        cout = w64.shape[0]
        weights = np.swapaxes(w64.reshape(groups, cout // groups, *w64.shape[1:]), 1, 2)
        padded = np.pad(inputs, [(0, 0), (0, 0), *((p, p) for p in padding), (0, 0)])
        out = np.zeros((n, groups, *out_spatial, cout // groups))
        for position in np.ndindex(*window):
            seen = tuple(slice(k, k + (o - 1) * s + 1, s) for k, o, s in zip(position, out_spatial, stride))
            out += _group_products(padded[(slice(None), slice(None), *seen)], weights[(..., *position)])
    out = np.moveaxis(out, -1, 2).reshape(n, cout, *out_spatial)
    return out if b64 is None else out + b64.reshape(1, cout, 1, 1, 1)


def _group_products(inputs, weights) -> np.ndarray:
    """(N, groups, *S, C_in / groups) inputs times (groups, C_in / groups, C_out / groups) weights: one matrix
    product a batch element and group, its positions as rows."""
    rows = inputs.reshape(*inputs.shape[:2], -1, inputs.shape[-1])
    return np.matmul(rows, weights).reshape(*inputs.shape[:-1], weights.shape[-1])


def _near_square(count: int, parts: int) -> tuple:
    """``count`` as a product of ``parts`` factors, each the largest divisor up to the root of what is left."""
    factors = []
    for left in range(parts, 1, -1):
        root = max(1, round(count ** (1 / left)))
        factor = max(f for f in range(1, root + 1) if count % f == 0)
        factors.append(factor)
        count //= factor
    return (*factors, count)


def _conv_channels(route: str, cout_g: int, cin_g: int, ladder, least_cin_g: int) -> tuple | None:
    """(C_out, C_in) of a group, each kept in its bucket of the cols ``ladder``, that take ``route``: moved
    as little as they must from (``cout_g``, ``cin_g``) (a key's top rungs may ask for a group too wide for
    the direct kernel, its smallest extents for one too narrow for the implicit GEMM), or None where none
    do. The implicit GEMM widens the outputs first, so that a ragged key keeps few input channels (its
    flat-K form)."""
    (out_low, out_top), (in_low, in_top) = ((_smallest_in_bucket(bucket(e, ladder), ladder), bucket(e, ladder))
                                            for e in (cout_g, cin_g))
    in_low = max(in_low, least_cin_g)
    if in_low > in_top:
        return None
    cin_g = max(cin_g, in_low)
    if route == "direct":
        if cout_g * cin_g > _DIRECT_MAX_GROUP_MATRIX:
            cin_g = max(in_low, min(cin_g, _DIRECT_MAX_GROUP_MATRIX // cout_g))
        if cout_g * cin_g > _DIRECT_MAX_GROUP_MATRIX:
            cout_g = max(out_low, _DIRECT_MAX_GROUP_MATRIX // cin_g)
        return (cout_g, cin_g) if cout_g * cin_g <= _DIRECT_MAX_GROUP_MATRIX else None
    for inputs in range(cin_g, in_top + 1):  # the fewest input channels with enough outputs in their bucket
        outputs = max(cout_g, _DIRECT_MAX_GROUP_MATRIX // inputs + 1)
        if outputs <= out_top:
            return outputs, inputs
    return None


def _conv_operand(rng, shape, dtype_name: str, device, channels_last: bool, strided: bool):
    """A tensor of ``shape`` (N, C, *S), its channels innermost in memory when asked, read in place from a
    buffer one column wider when ``strided`` (a layout no view reshapes densely), and its exact values in
    float64."""
    dims = len(shape) - 2
    stored = (shape[0], *shape[2:], shape[1]) if channels_last else tuple(shape)
    columns = dims if channels_last else dims + 1  # the last spatial dim's place in ``stored``
    buffer = tuple(e + 1 if d == columns and strided else e for d, e in enumerate(stored))
    values = rng.standard_normal(buffer).astype(np.float32)
    tensor = nbx.tensor(values, device=device).to(getattr(nbx, dtype_name))
    if strided:
        tensor = tensor[(slice(None),) * columns + (slice(0, stored[columns]),)]
    if channels_last:
        tensor = tensor.permute(0, dims + 1, *range(1, dims + 1))
    return tensor, _exact(tensor)


def _key_flag(flags: dict, name: str) -> str:
    if name not in flags:
        raise MalformedKey(f"convolution launch key: no {name!r} flag (window, stride, channels_last, transposed, "
                         "groups)")
    return flags[name]


def _key_extents_3d(flags: dict, name: str) -> tuple:
    """A DxHxW flag of a convolution key (its window or stride) as three positive integers."""
    parts = _key_flag(flags, name).split("x")
    if len(parts) != 3 or not all(part.isdigit() and int(part) > 0 for part in parts):
        raise MalformedKey(f"convolution launch key: {name}={flags[name]!r} is not three positive extents DxHxW")
    return tuple(int(part) for part in parts)


def _conv_cases(route: str, extents, dtypes, flags, device) -> list[Case]:
    """Convolution keys (``conv``: the implicit GEMM, ``direct_conv``: the direct kernel, ``depthwise_conv``:
    a forward depthwise one read channels-innermost): ``convolution`` with groups of the key's channels
    (moved within their buckets where the route asks, see ``_conv_channels``; one input and one output
    channel a group for ``depthwise_conv``), its window and stride (2-d unless the depth has a window or a
    stride), padding about half the window (borders read zeros), the stride - 1 trailing inputs a stride
    skips, dilation 1, grouped when the key says so (3 groups for the implicit GEMM; for the direct kernel,
    more output channels than its widest tile; for ``depthwise_conv``, the key's N, its channel count, whose
    bucket's smallest is ragged against the channels-inner kernel's blocks), the input channels-last when the
    key says so, the weight contiguous as a module holds it (STAGE candidates copy it), a bias, and the M
    output positions as a batch of 2 (M even) and output extents about square. A 1x1 stride-1 ungrouped forward key is formed only by an input
    no view reshapes into the product's operand: the input is read in place from a wider buffer.
    Bound: the product's, γ(K+3)·(|x|*|w|) for the K = C_in/groups * window products of an output, one
    more term for the bias, then the output's rounding."""
    rng = np.random.default_rng(0)
    if len(dtypes) != 1 or set(extents) != {"M", "N", "K"}:
        raise MalformedKey(f"convolution launch key: extents {sorted(extents)} and dtypes {list(dtypes)}, expected "
                         "M, N, K and one dtype")
    (name,) = dtypes
    window, stride = _key_extents_3d(flags, "window"), _key_extents_3d(flags, "stride")
    channels_last, transposed, grouped = (_key_flag(flags, f) == "1" for f in ("channels_last", "transposed",
                                                                               "groups"))
    if route == "depthwise":
        if not channels_last or transposed or not grouped:
            raise MalformedKey("convolution launch key: a depthwise_conv key is a forward, grouped, channels-last "
                               f"convolution's, got channels_last={flags['channels_last']}, transposed="
                               f"{flags['transposed']}, groups={flags['groups']}")
        channels = (1, 1)  # a group's; the key's N groups (2 at least: one channel is not read channels-last)
    else:
        channels = _conv_channels(route, extents["N"], extents["K"], backend_for(device).facts["ladders"]["cols"],
                                  least_cin_g=2 if channels_last and not grouped else 1)
    if channels is None:
        return []
    cout_g, cin_g = channels
    widest_tile = max(c for _, c, _ in _DIRECT_SHAPES)
    groups = (1 if not grouped else 3 if route == "gemm" else max(2, extents["N"]) if route == "depthwise"
              else max(3, widest_tile // cout_g + 1))
    cin, cout = cin_g * groups, cout_g * groups
    dims = 3 if window[0] > 1 or stride[0] > 1 else 2
    m = extents["M"]
    batch = 2 if m % 2 == 0 else 1
    out_spatial = _near_square(m // batch, dims)
    window, stride = window[3 - dims:], stride[3 - dims:]
    if transposed:  # out = (in - 1) * stride - 2 * padding + window + output_padding
        padding = tuple(k // 2 for k in window)
        reach = [o - k + 2 * p for o, k, p in zip(out_spatial, window, padding)]
        output_padding = tuple(r % s for r, s in zip(reach, stride))
        in_spatial = tuple((r - q) // s + 1 for r, q, s in zip(reach, output_padding, stride))
        weight_shape = (cin, cout_g, *window)
    else:  # out = (in + 2 * padding - window) // stride + 1, the stride - 1 last inputs skipped
        output_padding = (0,) * dims
        for padding in (tuple((k - 1) // 2 for k in window), (0,) * dims):
            in_spatial = tuple((o - 1) * s + k - 2 * p + s - 1
                               for o, s, k, p in zip(out_spatial, stride, window, padding))
            if channels_last or np.prod(in_spatial) > 1:
                break  # else an input of one position would be read as channels-last: no padding widens it
        weight_shape = (cout, cin_g, *window)
    strided = not (transposed or grouped or any(k != 1 for k in window) or any(s != 1 for s in stride))
    x, x64 = _conv_operand(rng, (batch, cin, *in_spatial), name, device, channels_last, strided)
    w, w64 = _conv_operand(rng, weight_shape, name, device, channels_last=False, strided=False)
    b, b64 = _operand(rng, (cout,), name, device, transposed=False)
    unit = (1,) * (3 - dims)

    def as_3d(array):
        return array.reshape(*array.shape[:2], *unit, *array.shape[2:])

    geometry = dict(stride=(*unit, *stride), padding=((0,) * (3 - dims)) + padding, groups=groups,
                    transposed=transposed, out_spatial=(*unit, *out_spatial))
    reference = _conv_reference(as_3d(x64), as_3d(w64), b64, **geometry)
    magnitudes = _conv_reference(as_3d(np.abs(x64)), as_3d(np.abs(w64)), np.abs(b64), **geometry)
    reference, magnitudes = (a.reshape(batch, cout, *out_spatial) for a in (reference, magnitudes))
    terms = cin_g * int(np.prod(window))
    rounded = _output_rounding(name)
    bound = _gamma(terms + 4, _UNIT_ROUNDOFF["float32"]) * magnitudes + rounded * np.abs(reference)
    return [Case((m, cout_g, cin_g), lambda: convolution(x, w, b, stride, padding, 1, transposed, output_padding,
                                                         groups), reference, bound)]


def _fp8_activation_cases(fp8_scales: str, extents, dtypes, flags, device) -> list[Case]:
    """``fp8_gemm`` and ``fp8_block_gemm`` keys: ``quantized_linear(..., fp8_activations=True)`` of an input with
    the key's dtype and an fp8 weight scaled per channel, or per 128 x 128 block (``fp8_scales``). Reference:
    the unrounded input times the dequantized weight, in float64. Bound: the product's, plus the rows' rounding
    to e4m3 (half a step: 2^-4 of an element, or 2^-10 of its scale, a row's or its 1 x 128 block's, below
    e4m3's normals) and the output's rounding."""
    rng = np.random.default_rng(0)
    m, n, k = extents["M"], extents["N"], extents["K"]
    in_name, _ = dtypes
    x, x64 = _operand(rng, (m, k), in_name, device, transposed=False)
    weight = QuantizedWeight.quantize(rng.standard_normal((n, k)).astype(np.float32) * 0.05, "fp8",
                                      fp8_scales=fp8_scales, device=device, dtype=in_name)
    w64 = weight.dequantize().astype(np.float64)
    reference = x64 @ w64.T
    block = FP8_BLOCK if fp8_scales == "block" else k
    blocks = -(-k // block)
    padded_x, padded_w = np.zeros((m, blocks * block)), np.zeros((n, blocks * block))
    padded_x[:, :k], padded_w[:, :k] = np.abs(x64), np.abs(w64)
    block_scales = padded_x.reshape(m, blocks, block).max(axis=2) / 448
    below_normals = block_scales @ padded_w.reshape(n, blocks, block).sum(axis=2).T
    magnitudes = np.abs(x64) @ np.abs(w64).T
    bound = ((_gamma(k + 3, _UNIT_ROUNDOFF["float32"]) + 2.0 ** -4) * magnitudes + 2.0 ** -10 * below_normals
             + _output_rounding(in_name) * np.abs(reference))
    return [Case((m, n, k), lambda: quantized_linear(x, weight, fp8_activations=True), reference, bound)]


CERTIFIERS: dict[str, Certifier] = {
    "gemm": Certifier(("B", "M"), _product_cases),
    "gemv": Certifier(("M",), _product_cases),
    "gemv_rms_norm": Certifier(("M",), functools.partial(_prologue_cases, "gemv_rms_norm")),
    "gemv_act_and_mul": Certifier(("M",), functools.partial(_prologue_cases, "gemv_act_and_mul")),
    "quantized_gemv_rms_norm": Certifier(("M",), functools.partial(_prologue_cases, "quantized_gemv_rms_norm")),
    "gemv_layer_norm": Certifier(("M",), functools.partial(_prologue_cases, "gemv_layer_norm")),
    "quantized_gemv_layer_norm": Certifier(("M",), functools.partial(_prologue_cases, "quantized_gemv_layer_norm")),
    "quantized_gemv_act_and_mul": Certifier(("M",), functools.partial(_prologue_cases, "quantized_gemv_act_and_mul")),
    "attention": Certifier(("L",), _prefill_cases),
    "attention_decode": Certifier(("G",), _decode_cases),
    "quantized_gemm": Certifier(("M",), _quantized_cases),
    "quantized_gemv": Certifier(("M",), _quantized_cases),
    "fp8_gemm": Certifier(("M",), functools.partial(_fp8_activation_cases, "channel")),
    "fp8_block_gemm": Certifier(("M",), functools.partial(_fp8_activation_cases, "block")),
    "conv": Certifier(("M",), functools.partial(_conv_cases, "gemm")),
    "direct_conv": Certifier(("M",), functools.partial(_conv_cases, "direct")),
    "depthwise_conv": Certifier(("M",), functools.partial(_conv_cases, "depthwise")),
    "grouped_gemm": Certifier(("M",), _grouped_cases),
    "grouped_quantized_gemm": Certifier(("M",), _grouped_quantized_cases),
}


def representative_extents(kernel: str, extents: dict, facts: dict) -> list[dict]:
    """The key's extents at each bucket's top rung, then at each bucket's smallest extent."""
    rows = CERTIFIERS[kernel].rows
    smallest = {name: _smallest_in_bucket(top, facts["ladders"]["rows" if name in rows else "cols"])
                for name, top in extents.items()}
    return [dict(extents)] + ([smallest] if smallest != extents else [])


def _smallest_in_bucket(top: int, ladder) -> int:
    """The smallest extent whose bucket on ``ladder`` is ``top``."""
    lower = max([int(r) for r in ladder if r < top], default=0)
    if top > max(int(r) for r in ladder):  # past the ladder: the buckets are powers of two
        lower = top // 2
    return lower + 1 if bucket(lower + 1, ladder) == top else top


class _CertificationFailed(RuntimeError):
    """Every candidate of a key was refused."""


class _Captured(BaseException):
    """Stops a call once its key's candidates are known (not an Exception: no fallback of the op may take
    it for a failure)."""


class _Certification:
    """The tuning of one key in progress: ``choose`` hands its decision here (``cache.certifications``)."""

    def __init__(self, key: str, facts_name: str):
        self.key, self.facts_name = key, facts_name
        self.candidates: list | None = None
        self.capturing = True
        self.forced: dict | None = None
        self.refused: dict[str, str] = {}
        self.shapes: list = []

    def decide(self, candidates, measure, interpreted: bool, rounds: int) -> dict:
        if self.forced is not None:
            return self.forced
        if self.capturing:  # a call that only names the candidates: it stops here, launching nothing
            if self.candidates is None:  # the top rung's: the shape the setting is chosen on
                self.candidates = [dict(c) for c in candidates]
            raise _Captured
        accepted = [c for c in candidates if _name(c) not in self.refused]
        if interpreted:
            ranked = [(None, c) for c in accepted]
        else:
            ranked = time_candidates(self.key, accepted, measure, rounds)
        refused = [{"config": dict(c), "reason": self.refused[_name(c)]} for c in candidates
                   if _name(c) in self.refused]
        chosen_ms, chosen = ranked[0] if ranked else (None, None)
        cache_for(self.facts_name).store(self.key, {
            "config": dict(chosen) if chosen is not None else None, "ms": chosen_ms, "candidates": len(candidates),
            "certified": chosen is not None, "refused": refused, "shapes": [list(s) for s in self.shapes]})
        if chosen is None:
            raise _CertificationFailed(f"every one of {len(candidates)} candidates was refused")
        return chosen


def _name(config: dict) -> str:
    return json.dumps(config, sort_keys=True)


def _verdict(case: Case) -> str | None:
    """None when the case's output is within its bound of the reference, else why not."""
    try:
        with poisoned():  # only what the candidate writes counts, not what its output's memory held
            out = _exact(case.run())
    except Exception as error:  # noqa: BLE001  (a setting that cannot run is refused, not fatal)
        said = " ".join(str(error).split())[:200]  # one printable line: a store file holds it
        return f"failed to run on shape {list(case.shape)}: {type(error).__name__}: {said}"
    if out.shape != case.reference.shape:
        return f"output shape {list(out.shape)} on shape {list(case.shape)}, expected {list(case.reference.shape)}"
    error = np.abs(out - case.reference)
    wrong = ~(error <= case.bound)  # NaN counts as wrong
    if not wrong.any():
        return None
    worst = np.unravel_index(np.argmax(np.where(wrong, np.nan_to_num(error, nan=np.inf), -1)), error.shape)
    return (f"{int(wrong.sum())} of {error.size} outputs outside the float64 reference's bound on shape "
            f"{list(case.shape)} (worst: error {error[worst]:.3g}, bound {case.bound[worst]:.3g})")


def certify_key(key: str, device=None, *, again: bool = False) -> dict:
    """Tune and certify ``key`` on ``device`` (default: the default device) unless it holds a certified
    entry of these versions (``again``: certify anyway). A report: key, op, status (``kept``, ``certified``,
    ``refused``: every candidate refused, or ``uncertifiable``), config and the refused candidates."""
    dev = resolve(device)
    facts = backend_for(dev).facts
    cache = cache_for(facts["name"])
    kernel, extents, dtypes, flags = parse_key(key)
    report = {"key": key, "op": op_of(key), "config": None, "refused": []}
    entry, _ = cache.current(key)
    if entry is not None and entry.get("certified") and not again:
        return {**report, "status": "kept", "config": entry["config"], "refused": entry.get("refused", [])}
    certifier = CERTIFIERS.get(kernel)
    if certifier is None:
        return {**report, "status": "uncertifiable", "why": f"no certifier for kernel {kernel!r}"}
    try:
        cases = [case for shape in representative_extents(kernel, extents, facts)
                 for case in certifier.cases(shape, dtypes, flags, dev)]
    except MalformedKey:
        raise
    except KeyError as missing:
        raise MalformedKey(f"launch key {key!r}: no extent {missing} (its kernel's operands need it)") from None
    except ValueError as error:  # a part of the wrong arity (dtypes) found while reading the operands off it
        raise MalformedKey(f"launch key {key!r}: {error}") from None
    if not cases:
        return {**report, "status": "uncertifiable",
                "why": "no operands made here form it (an act-order weight, or a query offset past the keys)"}
    certification = _Certification(key, facts["name"])
    claim = (threading.get_ident(), key)  # this thread's calls only: another thread's run keeps its own path
    certifications[claim] = certification
    try:
        checked = []
        for case in cases:  # a ragged shape whose layout forms another key certifies nothing here
            clear_all()
            with recording() as formed:
                try:
                    case.run()
                except _Captured:
                    pass
            if key in formed and certification.candidates is not None:
                checked.append(case)
        if not checked or checked[0] is not cases[0]:
            return {**report, "status": "uncertifiable", "why": "its representative operands do not form it"}
        certification.capturing = False
        certification.shapes = [case.shape for case in checked]
        for config in certification.candidates:
            certification.forced = config
            for case in checked:
                clear_all()
                why = _verdict(case)
                if why is not None:
                    certification.refused[_name(config)] = why
                    break
        certification.forced = None
        clear_all()
        try:
            cases[0].run()
        except _CertificationFailed:
            pass
    finally:
        del certifications[claim]
        clear_all()
    stored = cache.entries()[key]
    return {**report, "status": "certified" if stored["certified"] else "refused", "config": stored["config"],
            "refused": stored["refused"]}


def certify_keys(keys, device=None, *, again: bool = False) -> list[dict]:
    """``certify_key`` of each key, under a progress bar."""
    return [certify_key(key, device, again=again) for key in progress.track(sorted(keys), "certifying launch keys")]


def certify_graph(model, values: dict | None = None, device=None, *, again: bool = False) -> list[dict]:
    """Certify every launch key the census of ``model`` (a loaded graph) names for ``values`` on ``device``."""
    return certify_keys(census(model, values, backend_for(resolve(device)).facts), device, again=again)
