"""Decode products that compute their own input rows (``kernels/gemv_prologue.py``): one launch for what a
decode step otherwise runs as two. ``rms_norm_linear``: ``linear(rms_norm(x) * norm_weight, weight, bias)``;
``add_rms_norm_linear``: the same of ``x + residual``, with the sum (the new residual stream) as a second
output; ``layer_norm_linear`` and ``add_layer_norm_linear``: the same with a LayerNorm (weight and bias
optional); ``act_and_mul_linear``: ``linear(act_and_mul(x), weight, bias)``. Each rounds its input rows to
their dtype before the product, as the unfused op stores them, so results match the unfused pair to the
product's rounding. For decode rows only (1 to ``GEMV_MAX_ROWS``): more rows take the unfused ops, whose
GEMM reads each input row many times. Tuned under launch keys of their own (``gemv_rms_norm``,
``gemv_layer_norm``, ``gemv_act_and_mul``) over the GEMV's candidates.

A ``QuantizedWeight`` (int4, int8, fp8) takes one row (``quantized_gemv_prologue``), its weight read as
``quantized_linear``'s one-row GEMV reads it, under keys ``quantized_gemv_rms_norm`` and
``quantized_gemv_act_and_mul`` (the quantized GEMV's key flags) over that GEMV's candidates."""
from __future__ import annotations

import functools
from types import SimpleNamespace

import numpy as np

from .. import tuning
from ..allocation import fresh_tensor_maker, new_tensor
from ..device import backend_for
from ..dtypes import get_dtype
from ..kernels import gemv_prologue as G
from ..kernels.formats import FORMAT_NATIVE
from ..launch import cdiv, dependent_launch, next_pow2
from ..lowering import float_format, load_format, needs_index_64
from ..quant import QuantizedWeight
from ..shape import ShapeError
from ..tensor import Tensor
from .matmul_gemv import (GEMV_MAX_ROWS, combine_launch, combines_in_launch, gemv_candidates, launch_settings,
                          split_k, split_slots)
from .matmul_plans import _operand_flags, _product_workspace
from .normalization import _rms_eps
from .plans import PlanCache, PlannedLaunch, Slot, layout_key
from .pointwise_table import _ACTIVATION_ROUNDING, _GATED_ACTIVATIONS, _act_and_mul_reference
from .quant import _WEIGHT_FORMATS, _groups_in_tile, _weight_strides, decode_candidates, inline_nibbles, weight_slots, \
    whole_words
from .registry import Cost, TensorMeta, nbytes, register

# Decode steps of at most this many rows fold their norms and gated activations into the products after
# them. Two to sixteen rows take the 16-row GEMV tile, whose every program recomputes the rows' statistics
# over all of K: on an H100 a batch-8 decode step of the 1.1B model ran 2.3x slower folded than unfolded,
# while one row gained 6%.
FOLD_MAX_ROWS = 1
from .samples import Samples, operand, sample

_FLOATS = ("float32", "float16", "bfloat16")


def _check(op: str, x, weight, bias, gated: bool = False, residual=None, norm_weight=None,
           norm_bias=None) -> TensorMeta:
    """The product's output (rows, N) of ``x`` (rows, K), or of its [gate, up] halves (rows, 2K) where
    ``gated``, once the operands agree."""
    if x.dtype.name not in _FLOATS:
        raise TypeError(f"{op}: expected a float32, float16 or bfloat16 input, got {x.dtype.name}")
    if len(x.shape) != 2 or not 1 <= x.shape[0] <= GEMV_MAX_ROWS:
        raise ShapeError(f"{op}: expected an input of 1 to {GEMV_MAX_ROWS} rows (rows, features), got shape "
                         f"{list(x.shape)}; more rows take the unfused ops")
    if gated and x.shape[1] % 2:
        raise ShapeError(f"{op}: the input's {x.shape[1]} features are not a gate and an up half")
    quantized = isinstance(weight, QuantizedWeight)
    if quantized and x.shape[0] != 1:
        raise ShapeError(f"{op}: a quantized weight takes one row, got {x.shape[0]}; more rows take the unfused ops")
    k = x.shape[1] // 2 if gated else x.shape[1]
    if len(weight.shape) != 2 or weight.shape[1] != k or weight.shape[0] < 1:
        raise ShapeError(f"{op}: weight of shape {list(weight.shape)} does not take {k} input features "
                         f"(expected (out_features, {k}))")
    n = weight.shape[0]
    # a quantized weight's dtype is the one it dequantizes to; products take rows of any float dtype
    for name, tensor, shape in (("weight", None if quantized else weight, None), ("bias", bias, (n,)),
                                ("residual", residual, x.shape)):
        if tensor is None:
            continue
        if tensor.dtype != x.dtype:
            raise TypeError(f"{op}: {name} is {tensor.dtype.name} but the input is {x.dtype.name}")
        if shape is not None and tuple(tensor.shape) != tuple(shape):
            raise ShapeError(f"{op}: {name} has shape {list(tensor.shape)}, expected {list(shape)}")
    for name, vector in (("norm_weight", norm_weight), ("norm_bias", norm_bias)):
        if vector is not None and (tuple(vector.shape) != (k,) or vector.dtype.name not in _FLOATS):
            raise ShapeError(f"{op}: {name} must be a float vector of the {k} input features, got "
                             f"{vector.dtype.name} of shape {list(vector.shape)}")
    if norm_weight is not None and norm_bias is not None and norm_bias.dtype != norm_weight.dtype:
        raise TypeError(f"{op}: norm_bias is {norm_bias.dtype.name} but norm_weight is {norm_weight.dtype.name}")
    return TensorMeta((x.shape[0], n), x.dtype)


def _rms_norm_linear_meta(a):
    return _check("rms_norm_linear", a.x, a.weight, a.bias, norm_weight=a.norm_weight)


def _add_rms_norm_linear_meta(a):
    out = _check("add_rms_norm_linear", a.x, a.weight, a.bias, residual=a.residual, norm_weight=a.norm_weight)
    return out, TensorMeta(tuple(a.x.shape), a.x.dtype)


def _layer_norm_linear_meta(a):
    return _check("layer_norm_linear", a.x, a.weight, a.bias, norm_weight=a.norm_weight, norm_bias=a.norm_bias)


def _add_layer_norm_linear_meta(a):
    out = _check("add_layer_norm_linear", a.x, a.weight, a.bias, residual=a.residual, norm_weight=a.norm_weight,
                 norm_bias=a.norm_bias)
    return out, TensorMeta(tuple(a.x.shape), a.x.dtype)


def _act_and_mul_linear_meta(a):
    if a.activation not in _GATED_ACTIVATIONS:
        raise ValueError(f"act_and_mul_linear: activation must be one of {', '.join(_GATED_ACTIVATIONS)}, got "
                         f"{a.activation!r}")
    return _check("act_and_mul_linear", a.x, a.weight, a.bias, gated=True)


def _cost(x, weight, bias, *extra, written=()):
    """A GEMV's flops and bytes (a quantized weight's packed values, scales and zero points), the prologue's
    few flops an input element and what else it reads or writes; its temporaries are the GEMV's split-K
    partials."""
    (m, width), (n, k) = x.shape, weight.shape
    weight_bytes = weight.nbytes if isinstance(weight, QuantizedWeight) else nbytes(weight)
    read = nbytes(x) + weight_bytes + sum(nbytes(t) for t in (bias, *extra) if t is not None)
    return Cost(flops=2 * m * n * k + 8 * m * width, bytes_read=read,
                bytes_written=m * n * x.dtype.itemsize + sum(nbytes(t) for t in written),
                workspace=_product_workspace(x.dtype, 1, m, k, n))


def _rms_norm_linear_cost(a):
    return _cost(a.x, a.weight, a.bias, a.norm_weight)


def _add_rms_norm_linear_cost(a):
    return _cost(a.x, a.weight, a.bias, a.norm_weight, a.residual, written=(a.x,))


def _layer_norm_linear_cost(a):
    return _cost(a.x, a.weight, a.bias, a.norm_weight, a.norm_bias)


def _add_layer_norm_linear_cost(a):
    return _cost(a.x, a.weight, a.bias, a.norm_weight, a.norm_bias, a.residual, written=(a.x,))


def _act_and_mul_linear_cost(a):
    return _cost(a.x, a.weight, a.bias)


def _launch_key(facts: dict, x, weight, residual: bool = False, activation: str | None = None,
                layer: bool = False) -> str:
    """The launch key of a prologue GEMV of ``x``'s rows by ``weight`` (out_features, K): with an
    ``activation``, act_and_mul's; else the RMS norm's (the LayerNorm's where ``layer``), of x + residual where
    ``residual``. A quantized weight's keys are the quantized GEMV's (its scales' dtype, format and act-order)
    under their own kernel."""
    (m, _), (n, k) = x.shape, weight.shape
    kernel, flags = ("gemv_act_and_mul", {"activation": activation}) if activation else \
        ("gemv_layer_norm" if layer else "gemv_rms_norm", {"residual": residual})
    if isinstance(weight, QuantizedWeight):
        return tuning.launch_key("quantized_" + kernel, facts, rows={"M": m}, cols={"N": n, "K": k},
                                 dtypes=(x.dtype, weight.scales.dtype),
                                 flags=dict(flags, format=weight.format, g_idx=weight.g_idx is not None))
    return tuning.launch_key(kernel, facts, rows={"M": m}, cols={"N": n, "K": k}, dtypes=(x.dtype, x.dtype),
                             flags=flags)


def _rms_norm_linear_key(facts, x, norm_weight, weight, bias=None, eps=None):
    return [_launch_key(facts, x, weight)]


def _add_rms_norm_linear_key(facts, x, residual, norm_weight, weight, bias=None, eps=None):
    return [_launch_key(facts, x, weight, residual=True)]


def _layer_norm_linear_key(facts, x, norm_weight, norm_bias, weight, bias=None, eps=1e-5):
    return [_launch_key(facts, x, weight, layer=True)]


def _add_layer_norm_linear_key(facts, x, residual, norm_weight, norm_bias, weight, bias=None, eps=1e-5):
    return [_launch_key(facts, x, weight, residual=True, layer=True)]


def _act_and_mul_linear_key(facts, x, weight, bias=None, activation="silu"):
    return [_launch_key(facts, x, weight, activation=activation)]


_prologue_plans = PlanCache()
# the most input elements a program's row statistics read in one step (16 a thread at 8 warps, 32 at 4)
_STATS_ELEMENTS = 4096


def _run(op: str, x, residual, norm_weight, weight, bias, eps, activation, norm_bias=None):
    """(out, residual sum or None) of the prologue GEMV ``op`` names (a LayerNorm's where it names one), planned
    once per layout."""
    tensors = [t for t in (x, residual, norm_weight, norm_bias, weight, bias) if t is not None]
    if any(t.device != x.device for t in tensors):
        raise RuntimeError(f"{op}: expected all tensors on one device, got "
                           f"{sorted({str(t.device) for t in tensors})}")
    weight_layout = weight.layout_key if isinstance(weight, QuantizedWeight) else layout_key(weight)
    key = (op, *(layout_key(t) for t in (x, residual, norm_weight, norm_bias)), weight_layout, layout_key(bias), eps,
           activation)
    return _prologue_plans.get(key, lambda: _plan(op, x, residual, norm_weight, norm_bias, weight, bias, eps,
                                                  activation))(x, residual, norm_weight, norm_bias, weight, bias)


def _plan(op, x, residual, norm_weight, norm_bias, weight, bias, eps, activation):
    """``execute(x, residual, norm_weight, norm_bias, weight, bias) -> (out, residual sum or None)`` for operands
    laid out as these, its setting tuned under the op's launch key."""
    dev, dtype = x.device, x.dtype
    facts = backend_for(dev).facts
    m = x.shape[0]
    n, k = weight.shape
    layer = "layer_norm" in op
    normed, has_residual, has_bias = activation is None, residual is not None, bias is not None
    norm_vector = norm_weight if norm_weight is not None else norm_bias
    quantized = isinstance(weight, QuantizedWeight)
    launch_key = _launch_key(facts, x, weight, has_residual, activation, layer)
    flags = _operand_flags(dtype, dtype, bias, dev, facts)
    act_mode = 0 if normed else _GATED_ACTIVATIONS[activation] + 4 * _ACTIVATION_ROUNDING.get(dtype.name, 0)
    bias_sn = bias.stride(0) if has_bias else 0
    # the prologue's operands, alike for every weight: x, residual, the norm's weight and bias, and their strides
    prologue_slots = [Slot("x"), Slot("res"), Slot("res_out"), Slot("norm_w"), Slot("norm_b")]
    prologue_strides = [*x.stride(), *(residual.stride() if has_residual else (0, 0)),
                        norm_weight.stride(0) if norm_weight is not None else 0,
                        norm_bias.stride(0) if norm_bias is not None else 0]
    prologue = (G.PROLOGUE_ACT_AND_MUL if not normed else G.PROLOGUE_LAYER_NORM if layer else G.PROLOGUE_RMS_NORM)
    prologue_constexprs = dict(
        PROLOGUE=prologue.value, HAS_RESIDUAL=has_residual, ACT_MODE=act_mode,
        HAS_NORM_WEIGHT=norm_weight is not None, HAS_NORM_BIAS=norm_bias is not None, HAS_BIAS=has_bias,
        X_FORMAT=float_format(dtype),
        NW_FORMAT=float_format(norm_vector.dtype) if norm_vector is not None else FORMAT_NATIVE.value,
        BIAS_FORMAT=flags["BIAS_FORMAT"],
        DST_FORMAT=flags["DST_FORMAT"], VIA_F32=flags["VIA_F32"], INTERPRETED=flags["INTERPRETED"],
        PDL=dependent_launch(dev))
    make_main = _quantized_main if quantized else _float_main
    main_for, candidates = make_main(x, residual, norm_weight, norm_bias, weight, bias, eps, prologue_slots,
                                     prologue_strides, prologue_constexprs, flags, facts)
    weight_tensors = weight_slots if quantized else (lambda weight: {"w": weight})

    def launches_for(config):
        """``run(x, residual, norm_weight, norm_bias, weight, bias, out, res_out)`` for ``config``, its launches
        built once."""
        main, splits = main_for(config)
        combined = combines_in_launch(config, splits, n)
        combine = combine_launch(config, splits, m, n, 1, 1, (0, bias_sn), (n, 1), has_bias, False, flags, dev)

        def run(x, residual, norm_weight, norm_bias, weight, bias, out, res_out):
            tensors = {"x": x, "res": x if residual is None else residual,
                       "res_out": out if res_out is None else res_out,
                       "norm_w": x if norm_weight is None else norm_weight,
                       "norm_b": x if norm_bias is None else norm_bias, **weight_tensors(weight),
                       "bias": out if bias is None else bias, "out": out,
                       **split_slots(splits, combined, m, n, get_dtype("float32"), dev, out)}
            main(dev, tensors)
            if combine is not None:
                combine(dev, tensors)
        return run

    timed_out = new_tensor((m, n), dtype, dev)
    timed_sum = new_tensor((m, k), dtype, dev) if has_residual else None
    config = tuning.choose_timed(launch_key, facts, candidates,
                                 lambda config: functools.partial(launches_for(config), x, residual, norm_weight,
                                                                  norm_bias, weight, bias, timed_out, timed_sum))
    run = launches_for(config)
    fresh_out = fresh_tensor_maker((m, n), dtype, dev)
    fresh_sum = fresh_tensor_maker((m, k), dtype, dev) if has_residual else None

    def execute(x, residual, norm_weight, norm_bias, weight, bias):
        out = fresh_out()
        summed = fresh_sum() if has_residual else None
        run(x, residual, norm_weight, norm_bias, weight, bias, out, summed)
        return out, summed
    return execute


def _float_main(x, residual, norm_weight, norm_bias, weight, bias, eps, prologue_slots, prologue_strides,
                prologue_constexprs, flags, facts):
    """(``main_for(config) -> (launch, splits)``, the candidates) of ``gemv_prologue`` for 1 to ``GEMV_MAX_ROWS``
    rows and a float ``weight``, over the GEMV's candidates."""
    m = x.shape[0]
    n, k = weight.shape
    block_m = 1 if m == 1 else GEMV_MAX_ROWS
    index_64 = needs_index_64(*(t for t in (x, residual, norm_weight, norm_bias, weight, bias) if t is not None))
    # the weight as (K, N), bias and output (dense) strides
    strides = [*prologue_strides, weight.stride(1), weight.stride(0), 0, bias.stride(0) if bias is not None else 0,
               n, 1]

    def main_for(config):
        k_per_split, splits = split_k(k, config)
        return PlannedLaunch(
            G.gemv_prologue, (cdiv(n, config["BLOCK_N"]), splits),
            [*prologue_slots, Slot("w"), Slot("bias"), Slot("out"), Slot("partial"), Slot("counters"), m, n, k,
             k_per_split, float(eps or 0.0), *strides],
            dict(prologue_constexprs, BLOCK_M=block_m, BLOCK_N=config["BLOCK_N"], BLOCK_K=config["BLOCK_K"],
                 STATS_BLOCK_K=max(config["BLOCK_K"], min(next_pow2(k), _STATS_ELEMENTS // block_m)),
                 SPLIT=splits > 1, COMBINE=combines_in_launch(config, splits, n), ACC=flags["ACC"],
                 PRECISION=flags["PRECISION"], DECODE_BF16=flags["DECODE_BF16"],
                 INDEX_64=index_64, **launch_settings(config))), splits

    def candidates():
        return gemv_candidates(facts, m, n, k)
    return main_for, candidates


def _quantized_main(x, residual, norm_weight, norm_bias, weight: QuantizedWeight, bias, eps, prologue_slots,
                    prologue_strides, prologue_constexprs, flags, facts):
    """(``main_for(config) -> (launch, splits)``, the candidates) of ``quantized_gemv_prologue`` for one row
    and a quantized ``weight``: its weight arguments and constexprs as ``quantized_linear``'s one-row GEMV
    takes them (``int4_gemv``'s where the int4 words each lie in one group), over that GEMV's candidates."""
    dtype = x.dtype
    n, k = weight.shape
    whole = whole_words(weight)
    parts = (weight.qweight, weight.scales, weight.zeros, weight.g_idx)
    index_64 = needs_index_64(*(t for t in (x, residual, norm_weight, norm_bias, bias, *parts) if t is not None))
    q_sk, q_sn, z_sg, z_sn = _weight_strides(weight)
    strides = [*prologue_strides, q_sk, q_sn, *weight.scales.stride(), z_sg, z_sn, bias.stride(0) if bias is not None
               else 0, n, 1]
    constexprs = dict(prologue_constexprs, WHOLE_WORDS=whole, WEIGHT=_WEIGHT_FORMATS[weight.format],
                      SCALE_FORMAT=load_format(weight.scales.dtype), HAS_G_IDX=weight.g_idx is not None,
                      GROUP_SIZE=weight.group_size if whole else 0, INLINE_ASM=inline_nibbles(facts, dtype.name),
                      INDEX_64=index_64)

    def main_for(config):
        k_per_split, splits = split_k(k, config)
        block_k = config["BLOCK_K"]
        groups = _groups_in_tile(weight, k, block_k)
        return PlannedLaunch(
            G.quantized_gemv_prologue, (cdiv(n, config["BLOCK_N"]), splits),
            [*prologue_slots, Slot("q"), Slot("scales"), Slot("zeros"), Slot("g_idx"), Slot("bias"), Slot("out"),
             Slot("partial"), Slot("counters"), 1, n, k, k_per_split, float(eps or 0.0), weight.group_size,
             weight.scale_block_n, *strides],
            dict(constexprs, BLOCK_N=config["BLOCK_N"], BLOCK_K=block_k,
                 STATS_BLOCK_K=max(block_k, min(next_pow2(k), _STATS_ELEMENTS)), SPLIT=splits > 1,
                 COMBINE=combines_in_launch(config, splits, n),
                 GROUPS_IN_TILE=groups, ONE_GROUP=groups == 1, EVEN_K=k % k_per_split == 0,
                 **launch_settings(config))), splits

    def candidates():
        return decode_candidates(facts, 1, n, k, weight.format, weight.group_size, whole)
    return main_for, candidates


# ---- samples ---------------------------------------------------------------------------------------

def _rms_rows(x, norm_weight, eps):
    eps = np.finfo(np.float32).eps if eps is None else eps
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * norm_weight


def _linear_reference(rows, weight, bias):
    if isinstance(weight, QuantizedWeight):
        weight = weight.dequantize().astype(np.float64)
    return rows @ weight.T + (0 if bias is None else bias)


def _quantized(format: str, n: int = 8, k: int = 16) -> QuantizedWeight:
    """An (n, k) weight quantized in ``format`` on the host (not an operand: it is made here, on the CPU)."""
    return QuantizedWeight.quantize(np.linspace(-1.0, 1.0, n * k, dtype=np.float32).reshape(n, k), format, group_size=8)


def _rms_norm_linear_samples(op):
    return Samples((sample(operand(2, 8), operand(8), operand(4, 8), None, 1e-6),
                    sample(operand(1, 8, dtype="bfloat16"), operand(8, dtype="bfloat16"),
                           operand(5, 8, dtype="bfloat16"), operand(5, dtype="bfloat16")),
                    sample(operand(1, 16), operand(16), _quantized("int4"), operand(8), 1e-6)),
                   lambda x, norm_weight, weight, bias=None, eps=None: _linear_reference(
                       _rms_rows(x, norm_weight, eps), weight, bias))


def _add_rms_norm_linear_reference(x, residual, norm_weight, weight, bias=None, eps=None):
    summed = x + residual
    return _linear_reference(_rms_rows(summed, norm_weight, eps), weight, bias), summed


def _add_rms_norm_linear_samples(op):
    return Samples((sample(operand(3, 8), operand(3, 8), operand(8), operand(5, 8), None, 1e-6),
                    sample(operand(2, 8, dtype="float16"), operand(2, 8, dtype="float16"), operand(8, dtype="float16"),
                           operand(3, 8, dtype="float16")),
                    sample(operand(1, 16, dtype="float16"), operand(1, 16, dtype="float16"), operand(16, dtype="float16"),
                           _quantized("int8"))),
                   _add_rms_norm_linear_reference)


def _layer_rows(x, norm_weight, norm_bias, eps):
    centered = x - np.mean(x, axis=-1, keepdims=True)
    rows = centered / np.sqrt(np.mean(centered * centered, axis=-1, keepdims=True) + eps)
    return rows * (1 if norm_weight is None else norm_weight) + (0 if norm_bias is None else norm_bias)


def _layer_norm_linear_samples(op):
    return Samples((sample(operand(2, 8), operand(8), operand(8), operand(4, 8), None, 1e-5),
                    sample(operand(1, 8, dtype="bfloat16"), None, None, operand(5, 8, dtype="bfloat16"),
                           operand(5, dtype="bfloat16")),
                    sample(operand(1, 16), operand(16), operand(16), _quantized("int8"), operand(8), 1e-5)),
                   lambda x, norm_weight, norm_bias, weight, bias=None, eps=1e-5: _linear_reference(
                       _layer_rows(x, norm_weight, norm_bias, eps), weight, bias))


def _add_layer_norm_linear_reference(x, residual, norm_weight, norm_bias, weight, bias=None, eps=1e-5):
    summed = x + residual
    return _linear_reference(_layer_rows(summed, norm_weight, norm_bias, eps), weight, bias), summed


def _add_layer_norm_linear_samples(op):
    return Samples((sample(operand(3, 8), operand(3, 8), operand(8), operand(8), operand(5, 8), None, 1e-5),
                    sample(operand(2, 8, dtype="float16"), operand(2, 8, dtype="float16"), operand(8, dtype="float16"),
                           None, operand(3, 8, dtype="float16")),
                    sample(operand(1, 16, dtype="float16"), operand(1, 16, dtype="float16"),
                           operand(16, dtype="float16"), operand(16, dtype="float16"), _quantized("int4"))),
                   _add_layer_norm_linear_reference)


def _act_and_mul_linear_samples(op):
    return Samples((sample(operand(2, 8), operand(3, 4)),
                    sample(operand(3, 8, dtype="bfloat16"), operand(5, 4, dtype="bfloat16"),
                           operand(5, dtype="bfloat16"), "gelu_tanh"),
                    sample(operand(1, 32, dtype="bfloat16"), _quantized("fp8"))),
                   lambda x, weight, bias=None, activation="silu": _linear_reference(
                       _act_and_mul_reference(x, activation=activation), weight, bias))


@register("rms_norm_linear", family="matmul", aten=["nbx::rms_norm_linear"], meta=_rms_norm_linear_meta,
          cost=_rms_norm_linear_cost, bound=True, api=(), key=_rms_norm_linear_key, samples=_rms_norm_linear_samples)
def rms_norm_linear(x: Tensor, norm_weight: Tensor, weight: Tensor, bias=None, eps=None) -> Tensor:
    """``linear(rms_norm(x, weight=norm_weight, eps=eps), weight, bias)`` in one launch, for 1 to
    ``GEMV_MAX_ROWS`` rows ``x`` (rows, K); the normed rows are rounded to x's dtype as ``rms_norm`` stores
    them."""
    _check("rms_norm_linear", x, weight, bias, norm_weight=norm_weight)
    return _run("rms_norm_linear", x, None, norm_weight, weight, bias, _rms_eps(x, eps), None)[0]


@register("layer_norm_linear", family="matmul", aten=["nbx::layer_norm_linear"], meta=_layer_norm_linear_meta,
          cost=_layer_norm_linear_cost, bound=True, api=(), key=_layer_norm_linear_key,
          samples=_layer_norm_linear_samples)
def layer_norm_linear(x: Tensor, norm_weight, norm_bias, weight, bias=None, eps: float = 1e-5) -> Tensor:
    """``linear(layer_norm(x, weight=norm_weight, bias=norm_bias, eps=eps), weight, bias)`` in one launch, for 1
    to ``GEMV_MAX_ROWS`` rows ``x`` (rows, K); the normed rows are rounded to x's dtype as ``layer_norm`` stores
    them. ``norm_weight`` and ``norm_bias`` may each be None (a norm without them)."""
    _check("layer_norm_linear", x, weight, bias, norm_weight=norm_weight, norm_bias=norm_bias)
    return _run("layer_norm_linear", x, None, norm_weight, weight, bias, float(eps), None, norm_bias)[0]


@register("add_layer_norm_linear", family="matmul", aten=["nbx::add_layer_norm_linear"],
          meta=_add_layer_norm_linear_meta, cost=_add_layer_norm_linear_cost, bound=True, api=(),
          key=_add_layer_norm_linear_key, samples=_add_layer_norm_linear_samples)
def add_layer_norm_linear(x: Tensor, residual: Tensor, norm_weight, norm_bias, weight, bias=None, eps: float = 1e-5):
    """(``layer_norm_linear(x + residual, ...)``, x + residual) in one launch: the sum rounded to x's dtype as
    an unfused add stores it, then normed as ``add_layer_norm`` norms it."""
    _check("add_layer_norm_linear", x, weight, bias, residual=residual, norm_weight=norm_weight, norm_bias=norm_bias)
    return _run("add_layer_norm_linear", x, residual, norm_weight, weight, bias, float(eps), None, norm_bias)


@register("add_rms_norm_linear", family="matmul", aten=["nbx::add_rms_norm_linear"],
          meta=_add_rms_norm_linear_meta, cost=_add_rms_norm_linear_cost, bound=True, api=(),
          key=_add_rms_norm_linear_key, samples=_add_rms_norm_linear_samples)
def add_rms_norm_linear(x: Tensor, residual: Tensor, norm_weight: Tensor, weight: Tensor, bias=None, eps=None):
    """(``rms_norm_linear(x + residual, ...)``, x + residual) in one launch: the sum rounded to x's dtype
    as an unfused add stores it, then normed as ``add_rms_norm`` norms it."""
    _check("add_rms_norm_linear", x, weight, bias, residual=residual, norm_weight=norm_weight)
    return _run("add_rms_norm_linear", x, residual, norm_weight, weight, bias, _rms_eps(x, eps), None)


@register("act_and_mul_linear", family="matmul", aten=["nbx::act_and_mul_linear"], meta=_act_and_mul_linear_meta,
          cost=_act_and_mul_linear_cost, bound=True, api=(), key=_act_and_mul_linear_key,
          samples=_act_and_mul_linear_samples)
def act_and_mul_linear(x: Tensor, weight: Tensor, bias=None, activation: str = "silu") -> Tensor:
    """``linear(act_and_mul(x, activation=activation), weight, bias)`` in one launch, for 1 to
    ``GEMV_MAX_ROWS`` rows ``x`` (rows, 2K) = [gate, up]; act(gate) * up rounded to x's dtype as
    ``act_and_mul`` stores it (silu, gelu_tanh or gelu)."""
    _act_and_mul_linear_meta(SimpleNamespace(x=x, weight=weight, bias=bias, activation=activation))
    return _run("act_and_mul_linear", x, None, None, weight, bias, None, activation)[0]
