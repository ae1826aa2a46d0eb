"""``nbx::quantized_linear``: x (..., K) times a ``QuantizedWeight`` (N, K), transposed, plus an optional bias,
in x's dtype. Up to 16 rows go through ``kernels/quant.py``'s ``quantized_gemv`` (split K, weights
streamed once), more through ``quantized_gemm``; settings are tuned per launch key as the float GEMV's are.
Past ``IN_LOOP_MAX_ROWS`` 16-bit rows, ``dequantize_weight`` writes the whole weight in the rows' type into a
workspace and matmul's 16-bit GEMM multiplies it (its own launch key).
Products accumulate in float32; on a GPU, half-precision rows meet the weight tile rounded to their own
type on the matrix units (rows of float32 in float32), one row multiplies in float32."""
from __future__ import annotations

import functools

import ml_dtypes
import numpy as np

from .. import shape as S
from .. import tuning
from ..allocation import fresh_tensor_maker, new_tensor, scratch_scope, scratch_tensor
from ..device import backend_for, multiprocessors, resolve
from ..dtypes import get_dtype
from ..kernels import quant as K
from ..kernels.formats import FORMAT_NATIVE
from ..launch import cdiv, dependent_launch, next_pow2
from ..lowering import conversion_flags, float_format, load_format, needs_index_64
from ..quant import FP8_MAX, QuantizedWeight, quantize_fp8
from ..tensor import Tensor
from .matmul import _fold_rows
from .matmul_gemv import (GEMV_MAX_ROWS, _clamp_block, _INTERPRETED_BLOCK_K, _INTERPRETED_BLOCK_M,
                          _INTERPRETED_BLOCK_N, _PIPELINED, _PIPELINED_DEEP, combine_launch, combines_in_launch,
                          gemv_candidates, launch_settings, split_slots)
from .matmul_plans import GROUP_M, _dot_precision, _has_tma, _product_workspace, planned_product, product_keys
from .plans import PlanCache, PlannedLaunch, Slot, layout_key
from .registry import Cost, TensorMeta, family_samples, nbytes, register, workspace_bytes
from .samples import Samples, operand, sample

_FLOATS = ("float32", "float16", "bfloat16")
_WEIGHT_FORMATS = {"int4": K.WEIGHT_INT4.value, "int8": K.WEIGHT_INT8.value, "fp8": K.WEIGHT_FP8.value}
# (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps) of the prefill GEMM: the dequantized float32 weight
# tile lives in registers beside the accumulator, so tiles stay smaller than the float GEMM's
_GEMM_SHAPES = [(64, 128, 64, 3, 4), (128, 128, 64, 3, 8), (64, 64, 64, 3, 4), (128, 64, 32, 4, 4),
                (32, 128, 64, 4, 4), (64, 256, 32, 3, 8), (128, 128, 32, 4, 8), (64, 64, 128, 2, 4)]
# int4 words that lie in one group dequantize a weight element in a few integer and float operations and hold
# the tile in the rows' type, so the float GEMM's large tiles fit (each weight element dequantized once for
# BLOCK_M rows: the larger BLOCK_M, the less the conversion weighs against the matrix unit)
_GEMM_INT4_SHAPES = [(128, 256, 64, 3, 8), (256, 128, 64, 3, 8), (128, 256, 64, 4, 8), (128, 128, 128, 3, 8),
                     (128, 128, 64, 4, 8)]
# (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps) of ``fp8_gemm``: one byte an element, so K tiles twice
# the float GEMM's in the same shared memory
_FP8_GEMM_SHAPES = [(128, 256, 128, 3, 8), (256, 128, 128, 3, 8), (128, 128, 128, 4, 8), (128, 256, 64, 4, 8),
                    (128, 128, 128, 3, 4), (64, 128, 128, 4, 4), (64, 64, 128, 4, 4), (16, 128, 128, 4, 4)]
# ``fp8_gemm_tiles`` forms, as ``ops/matmul_plans.py``'s ``gemm_tiles`` variants for 16-bit products (the same
# bytes a stage at twice the K): (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps, flags), PERSISTENT one program
# a SM walking the tiles in grouped order, TMA operands through tensor descriptors (devices whose matrix unit is
# ``wgmma``), FLATTEN the tile and K loops pipelined as one. None spills registers on sm_90 with per-row scales
# (ptxas; 256 x 128 spills unless flattened)
_FP8_TILE_FLAGS = ("PERSISTENT", "TMA", "FLATTEN")
_FP8_PT = dict(PERSISTENT=True, TMA=True)
_FP8_TILE_VARIANTS = [(128, 256, 128, 3, 8, _FP8_PT), (128, 256, 128, 4, 8, _FP8_PT),
                      (128, 256, 128, 3, 8, dict(_FP8_PT, FLATTEN=True)),
                      (256, 128, 128, 3, 8, dict(_FP8_PT, FLATTEN=True)), (128, 256, 128, 3, 8, dict(TMA=True)),
                      (128, 128, 128, 4, 8, _FP8_PT), (128, 128, 128, 4, 4, _FP8_PT),
                      (128, 128, 128, 4, 4, dict(_FP8_PT, FLATTEN=True)), (128, 256, 128, 3, 8, dict(PERSISTENT=True)),
                      (128, 128, 128, 4, 8, dict(PERSISTENT=True))]

# (BLOCK_N, BLOCK_K, SPLITS, num_warps) of the int4 decode GEMV: a K tile is only BLOCK_K / 8 rows of words,
# so tiles are wide along N (vector loads of the words) and K is split to give every SM several programs
# (at most the float GEMV's 4 splits of one row, which the cost rule's workspace holds)
_GEMV_INT4_SHAPES = [(128, 128, 4, 4), (256, 64, 4, 4), (128, 256, 2, 4), (256, 128, 2, 8), (64, 256, 4, 4),
                     (256, 64, 4, 8), (128, 64, 4, 4), (64, 128, 1, 4), (128, 256, 4, 8), (256, 128, 4, 8)]
# (BLOCK_N, BLOCK_K, SPLITS, num_warps, {LOOP_STAGES}) of the int4 GEMV at one row with its K loop pipelined
# (``int4_gemv``'s LOOP_STAGES): one row takes no dot, so by default each step waits for its loads before its
# arithmetic and a program keeps one step's words in flight; pipelined, LOOP_STAGES - 1 steps' loads run under
# the arithmetic (shared memory: about 10 KB a stage at 128 x 128), so fewer splits (or none: no second
# launch combining partials) can keep the device's memory busy
_GEMV_INT4_ONE_ROW_PIPELINED = [(128, 128, 4, 4, _PIPELINED), (128, 128, 2, 4, _PIPELINED),
                                (128, 128, 1, 4, _PIPELINED_DEEP), (128, 256, 2, 4, _PIPELINED),
                                (128, 256, 1, 4, _PIPELINED), (256, 64, 4, 4, _PIPELINED),
                                (64, 128, 4, 4, _PIPELINED), (64, 256, 1, 4, _PIPELINED),
                                (256, 128, 2, 8, _PIPELINED), (128, 64, 4, 4, _PIPELINED_DEEP)]
# (BLOCK_N, BLOCK_K, SPLITS, num_warps, {num_stages, SWAPPED}) of the int4 GEMV at 2-16 rows, timed first: K
# tiles cut to lie inside one group, whose scales and zero points the kernel then reads as one row each,
# prefetched two steps ahead (``kernels/quant.py``, the factored form); a BLOCK_N under the program's threads (64
# of 128, 128 of 256) loads them straight into the layouts that use them instead of exchanging them through
# shared memory. Splits give Llama's 4096- and 14336-input products several programs an SM. SWAPPED takes the
# weight tile as the dot's wide operand (on sm_90 a ``wgmma`` of BLOCK_N x 16, about a fifth fewer SASS
# instructions a word, but the tile passes through shared memory to be transposed): the GPU's timing decides.
_ROWS_SWAPPED = dict(SWAPPED=True)
_GEMV_INT4_ROWS_SHAPES = [(128, 128, 2, 4, {}), (64, 128, 4, 4, {}), (128, 128, 4, 8, {}), (128, 128, 4, 4, {}),
                          (128, 128, 1, 4, {}), (64, 128, 2, 4, {}), (64, 128, 8, 4, {}), (128, 64, 4, 4, {}),
                          (128, 128, 2, 8, {}), (256, 128, 2, 8, {}), (128, 128, 2, 4, dict(num_stages=4)),
                          (64, 128, 4, 4, dict(num_stages=4)), (128, 128, 2, 4, _ROWS_SWAPPED),
                          (128, 128, 4, 4, _ROWS_SWAPPED), (64, 128, 4, 4, _ROWS_SWAPPED),
                          (256, 128, 2, 8, _ROWS_SWAPPED), (128, 128, 4, 8, _ROWS_SWAPPED)]


# Products of more 16-bit rows than this dequantize the whole weight once, into a workspace of the rows' type,
# and run our 16-bit GEMM on it; up to this many dequantize each weight tile inside the GEMM's K loop. The in-loop
# GEMM dequantizes a weight tile once per BLOCK_M rows and is issue-bound, about twice the 16-bit GEMM's time
# once the matrix units dominate, so its extra time is about one 16-bit GEMM of the same rows; dequantizing the
# whole weight costs the packed bytes read and N * K * 2 bytes written, e.g. Llama-3-8B's gate_up (28672 x 4096)
# 59 + 235 MB over ~2.8 TB/s, ~105 us, which is the 16-bit GEMM of about 300 rows of that shape (~730 us at
# 2048). Both grow as N * K, so the crossing lies near 300 rows for every shape; below it the in-loop GEMM,
# which reads only the packed weight, wins. A rung of the rows ladders, so that every rows bucket of a launch
# key lies on one side (certifying a key runs its bucket's top rung).
IN_LOOP_MAX_ROWS = 256
# (BLOCK_N, BLOCK_K, num_warps) of ``dequantize_weight``: a [BLOCK_K / 8, BLOCK_N] tile of int4 words (or
# BLOCK_K x BLOCK_N bytes) a program, bandwidth-bound
_DEQUANTIZE_TILE = (128, 64, 4)
# float8 activations: rows padded with zeros to a multiple of this (every prefill K tile's, and the 128-input
# block of a block-scaled weight, ``FP8_BLOCK``)
_FP8_K_ALIGN = 128


def _row_blocks(weight: QuantizedWeight) -> int:
    """How many scales each float8 row takes against the fp8 ``weight``: one, or one per block of its
    ``group_size`` inputs (``FP8_BLOCK``, a multiple of ``_FP8_K_ALIGN``) where its scales are per block along K."""
    n, k = weight.shape
    return 1 if weight.group_size >= k else cdiv(k, weight.group_size)


def _fp8_activation_bytes(rows: int, weight: QuantizedWeight) -> int:
    """The e4m3 rows and their float32 scales that ``fp8_activations`` writes before the product."""
    k = weight.shape[1]
    return workspace_bytes(rows * cdiv(k, _FP8_K_ALIGN) * _FP8_K_ALIGN, 4 * rows * _row_blocks(weight))


def fp8_matrix_units(facts: dict) -> bool:
    """Whether a device of these facts multiplies float8 on its matrix units (the interpreter emulates them)."""
    units = facts.get("matrix_unit", {}).get("dtypes", ())
    return bool(facts["kernels"].get("interpreted")) or "float8_e4m3fn" in units


def takes_fp8_activations(weight) -> bool:
    """Whether ``quantized_linear(..., fp8_activations=True)`` takes ``weight``: fp8, its scales per tensor or
    channel (the rows take one scale each) or per 128 x 128 block (one per 1 x 128 block of a row)."""
    return weight.format == "fp8"


def _meta(input, weight, bias=None, fp8_activations=False):
    if not isinstance(weight, QuantizedWeight):
        raise TypeError(f"quantized_linear: weight must be a QuantizedWeight, got {type(weight).__name__} "
                        f"(a float weight goes through nn.functional.linear)")
    if len(weight.shape) != 2:
        raise RuntimeError(f"quantized_linear: weight must be one (out_features, in_features) weight, got a stack of "
                           f"{weight.shape[0]} experts' weights (grouped_quantized_linear multiplies those)")
    if input.dtype.name not in _FLOATS:
        raise TypeError(f"quantized_linear: input must be float32, float16 or bfloat16, got {input.dtype.name}")
    n, k = weight.shape
    if len(input.shape) == 0 or input.shape[-1] != k:
        raise RuntimeError(f"quantized_linear: input of shape {tuple(input.shape)} cannot multiply a weight of "
                           f"shape {weight.shape}: its last dim must be {k}")
    if bias is not None:
        if tuple(bias.shape) != (n,):
            raise RuntimeError(f"quantized_linear: bias must have shape ({n},), got {tuple(bias.shape)}")
        if bias.dtype is not input.dtype:
            raise RuntimeError(f"quantized_linear: bias must have the input's dtype {input.dtype.name}, got "
                               f"{bias.dtype.name}")
    if fp8_activations and not takes_fp8_activations(weight):
        raise RuntimeError(f"quantized_linear: fp8_activations takes an fp8 weight (scales per tensor, channel or "
                           f"128 x 128 block), got {weight!r}")
    return TensorMeta((*input.shape[:-1], n), input.dtype)


def dequantizes_whole_weight(dtype, rows: int, fp8_activations: bool = False) -> bool:
    """Whether ``quantized_linear`` of ``rows`` rows of ``dtype`` dequantizes the whole weight into a workspace
    and multiplies it by the 16-bit GEMM (past ``IN_LOOP_MAX_ROWS``), rather than dequantizing tiles in its K
    loop."""
    return not fp8_activations and dtype.name in ("float16", "bfloat16") and rows > IN_LOOP_MAX_ROWS


def _cost(input, weight, bias=None, fp8_activations=False):
    """Reads the packed weight, its scales and zero points once (``weight.nbytes``); the workspace is a
    decode GEMV's split-K partials, the most any device's settings take, the float8 rows and their
    scales, or the dequantized weight and its GEMM's temporaries."""
    out = _meta(input, weight, bias, fp8_activations)
    n, k = weight.shape
    rows = S.numel(out.shape[:-1])
    if fp8_activations:
        workspace = _fp8_activation_bytes(rows, weight) if rows else 0
    elif dequantizes_whole_weight(out.dtype, rows):
        workspace = workspace_bytes(n * k * out.dtype.itemsize) + _product_workspace(out.dtype, 1, rows, k, n)
    else:
        workspace = _product_workspace(out.dtype, 1, rows, k, n) if rows <= GEMV_MAX_ROWS else 0
    return Cost(flops=2 * rows * n * k, bytes_read=nbytes(input) + weight.nbytes + (nbytes(bias) if bias is not None
                                                                                     else 0),
                bytes_written=nbytes(out), workspace=workspace)


def _launch_key(facts: dict, x, weight: QuantizedWeight, m: int, fp8_activations: bool = False) -> str:
    """The launch key of m rows laid out as ``x`` against ``weight``."""
    n, k = weight.shape
    if fp8_activations:
        return tuning.launch_key("fp8_gemm" if _row_blocks(weight) == 1 else "fp8_block_gemm", facts, rows={"M": m},
                                 cols={"N": n, "K": k}, dtypes=(x.dtype, weight.scales.dtype))
    return tuning.launch_key("quantized_gemv" if m <= GEMV_MAX_ROWS else "quantized_gemm", facts, rows={"M": m},
                             cols={"N": n, "K": k}, dtypes=(x.dtype, weight.scales.dtype),
                             flags={"format": weight.format, "g_idx": weight.g_idx is not None})


def _dequantized_operands(rows, weight: QuantizedWeight, bias, dequantized):
    """(rows, the dequantized (n, k) weight transposed, the bias over the rows): the operands of the 16-bit
    GEMM, views of these, as ``linear`` lays them out."""
    m = rows.shape[0]
    n = weight.shape[0]
    return rows, dequantized.transpose(0, 1), None if bias is None else bias.expand(m, n)


def _key(facts, input, weight, bias=None, fp8_activations=False):
    _meta(input, weight, bias, fp8_activations)
    rows = _fold_rows(input)
    # an input whose rows do not fold runs as a contiguous copy, whose rows do
    m = S.numel(input.shape[:-1]) if rows is None else rows.shape[0]
    if not m:
        return []
    if dequantizes_whole_weight(input.dtype, m, fp8_activations):
        meta = resolve("meta")
        rows = new_tensor((m, weight.shape[1]), input.dtype, meta) if rows is None else rows
        dequantized = new_tensor(weight.shape, input.dtype, meta)
        a, b, flat_bias = _dequantized_operands(rows, weight, None if bias is None else
                                                new_tensor(bias.shape, bias.dtype, meta, bias.stride()), dequantized)
        return product_keys(facts, a, b, input.dtype, flat_bias, 1, 0 if bias is None else 1)
    return [_launch_key(facts, input, weight, m, fp8_activations)]


_plans = PlanCache()


@register("quantized_linear", family="quantized", aten=["nbx::quantized_linear"],
          meta=lambda a: _meta(a.input, a.weight, a.bias, a.fp8_activations),
          cost=lambda a: _cost(a.input, a.weight, a.bias, a.fp8_activations), bound=True, key=_key)
def quantized_linear(input: Tensor, weight: QuantizedWeight, bias: Tensor | None = None,
                     fp8_activations: bool = False) -> Tensor:
    """input @ weight.T + bias for a quantized (out_features, in_features) ``weight``, dequantized as it is
    read (past ``IN_LOOP_MAX_ROWS`` 16-bit rows, once into a workspace for our GEMM); the result has the
    input's dtype. ``fp8_activations`` (an fp8 weight): the rows are rounded to e4m3
    with one scale each (their largest magnitude over 448, clamped at the weight's ``activation_scale_ub``; or
    its static ``activation_scale``) and multiplied on the float8 matrix units, as ``torch._scaled_mm`` is used
    with dynamic per-token scales;
    against 128 x 128 weight blocks, one scale per 1 x 128 block of a row, each K block's product scaled
    by its two blocks' scales inside the GEMM (DeepSeek-V3's scheme)."""
    key = (layout_key(input), weight.layout_key if type(weight) is QuantizedWeight else None, layout_key(bias),
           bool(fp8_activations))
    plan = _plans.lookup(key)
    if plan is None:
        _meta(input, weight, bias, fp8_activations)
        plan = _plans.get(key, lambda: _plan(input, weight, bias, bool(fp8_activations)))
    return plan(input, weight, bias)


def _plan(input: Tensor, weight: QuantizedWeight, bias: Tensor | None, fp8_activations: bool):
    """``execute(input, weight, bias)`` for operands laid out as these are."""
    dtype = input.dtype
    dev = input.device
    for other, what in ((weight, "weight"), (bias, "bias")):
        if other is not None and other.device != dev:
            raise RuntimeError(f"quantized_linear: input is on {dev} but the {what} on {other.device}")
    facts = backend_for(dev).facts
    if fp8_activations and not fp8_matrix_units(facts):
        raise RuntimeError(f"quantized_linear: fp8_activations needs float8 matrix units, which {dev} "
                           f"({facts.get('name', 'this device')}) lacks")
    n, k = weight.shape
    out_shape = (*input.shape[:-1], n)
    out_strides = S.contiguous_strides(out_shape)
    rows = _fold_rows(input)
    if rows is None:
        def dense(input, weight, bias):
            with scratch_scope():
                input = input.contiguous()
            return quantized_linear(input, weight, bias, fp8_activations)
        return dense
    m = rows.shape[0]
    if m == 0:
        return lambda input, weight, bias: new_tensor(out_shape, dtype, dev)
    rows_shape, rows_strides = rows.shape, rows.stride()
    out = new_tensor((m, n), dtype, dev)
    launches = (_fp8_launches if fp8_activations else _dequantized_launches
                if dequantizes_whole_weight(dtype, m) else _launches)
    run = launches(rows, weight, bias, out, m, n, k)
    fresh_output = fresh_tensor_maker((m, n), dtype, dev)

    def execute(input, weight, bias):
        out = fresh_output()
        run(input._view(rows_shape, rows_strides), weight, bias, out)
        return out._view(out_shape, out_strides)
    return execute


def gemm_candidates(facts: dict, m: int, n: int, k: int, whole_words: bool = False) -> list[dict]:
    """Settings worth timing for the prefill GEMM of m rows by an (n, k) quantized weight (``whole_words``:
    int4 read by ``int4_gemm``)."""
    return tile_candidates(facts, m, n, k, (_GEMM_INT4_SHAPES if whole_words else []) + _GEMM_SHAPES)


def tile_candidates(facts: dict, m: int, n: int, k: int, shapes) -> list[dict]:
    """The (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps) ``shapes`` of a dequantizing product of m rows by
    an (n, k) weight, clamped to the facts' ceilings and the problem."""
    if facts["kernels"].get("interpreted"):
        # the interpreter pays per program and operation: one wide tile a program, long K steps (4 warps, which
        # the interpreter ignores, keep the tile compilable when the launch is compile-checked)
        return [dict(BLOCK_M=_clamp_block(_INTERPRETED_BLOCK_M, _INTERPRETED_BLOCK_M, m),
                     BLOCK_N=_clamp_block(_INTERPRETED_BLOCK_N, _INTERPRETED_BLOCK_N, n),
                     BLOCK_K=_clamp_block(_INTERPRETED_BLOCK_K, _INTERPRETED_BLOCK_K, k), num_stages=1, num_warps=4)]
    tiles = facts["tiles"]
    return tuning.distinct_candidates(
        dict(BLOCK_M=_clamp_block(bm, tiles["max_block_m"], m), BLOCK_N=_clamp_block(bn, tiles["max_block_n"], n),
             BLOCK_K=_clamp_block(bk, tiles["max_block_k"], k), num_stages=min(stages, tiles["max_stages"]),
             num_warps=min(warps, tiles["max_warps"]))
        for bm, bn, bk, stages, warps in shapes)


def decode_candidates(facts: dict, m: int, n: int, k: int, format: str, group_size: int | None = None,
                      whole_words: bool = True) -> list[dict]:
    """Settings worth timing for the decode GEMV of m rows by an (n, k) quantized weight: the float GEMV's,
    and for int4 wide tiles with split K besides; for int4 at several rows first K tiles inside one group of
    ``group_size`` inputs (``_GEMV_INT4_ROWS_SHAPES``); at one row, where each word lies in one group
    (``whole_words``: ``int4_gemv``), the pipelined K loops too (``_GEMV_INT4_ONE_ROW_PIPELINED``)."""
    generic = gemv_candidates(facts, m, n, k)
    if format != "int4" or facts["kernels"].get("interpreted"):
        return generic
    ordered = generic + [_int4_gemv_config(facts, n, k, *shape) for shape in _GEMV_INT4_SHAPES]
    if m == 1 and whole_words:
        ordered += [_int4_gemv_config(facts, n, k, *shape) for shape in _GEMV_INT4_ONE_ROW_PIPELINED]
    # several rows: first K tiles inside one group, of a power of two dividing the group's size (or any, where
    # one group is all of K), at least MIN_CONVERTED_DOT_K
    inside = k if group_size is None or group_size >= k else group_size & -group_size
    if m > 1 and inside >= MIN_CONVERTED_DOT_K:
        ordered = [_int4_gemv_config(facts, n, k, bn, min(bk, inside), *rest)
                   for bn, bk, *rest in _GEMV_INT4_ROWS_SHAPES] + ordered
    return tuning.distinct_candidates(ordered)


# the cost rule sizes a decode GEMV's partials by the float GEMV's settings (``matmul_plans._product_workspace``),
# whose most-split ones take K tiles of 128 (8 splits of several rows, 4 of one): no int4 setting splits K into
# shorter runs than that, so their partials fit the declared workspace
_SPLIT_MIN_INPUTS = 128


def _int4_gemv_config(facts: dict, n: int, k: int, block_n: int, block_k: int, splits: int, warps: int,
                      extra: dict | None = None) -> dict:
    """An int4 GEMV setting of ``_GEMV_INT4_SHAPES`` or ``_GEMV_INT4_ROWS_SHAPES`` for an (n, k) weight."""
    block_k = _clamp_block(block_k, block_k, k)
    return dict(BLOCK_N=_clamp_block(block_n, facts["tiles"]["max_block_n"], n), BLOCK_K=block_k,
                SPLITS=max(1, min(splits, cdiv(k, block_k), cdiv(k, _SPLIT_MIN_INPUTS))),
                num_warps=min(warps, facts["tiles"]["max_warps"]), **(extra or {}))


def inline_nibbles(facts: dict, dtype: str) -> bool:
    """Whether int4 tiles for rows of ``dtype`` are built by inline PTX (``kernels/quant.py``): on compiled
    CUDA targets (the interpreter runs no PTX), bfloat16 where the device has its arithmetic."""
    return not facts["kernels"].get("interpreted") and (dtype != "bfloat16" or bool(facts.get("native_bf16")))


# Triton (3.6) lays a 16-bit dot operand converted in registers from narrower integers (the dequantized
# weight tile) out 8 inputs a thread along K, 4 threads deep; the matrix-unit lowering of a 16-input K tile
# then reads the first half of each thread's inputs twice and never the second (compiled CUDA only, silently
# wrong). A product of 16-bit rows on the matrix unit therefore takes K tiles of at least 32 inputs.
MIN_CONVERTED_DOT_K = 32


def _dot_block_k(block_k: int, dtype: str, rows_dot: bool) -> int:
    """The K tile a quantized product takes for tuned ``block_k``: at least MIN_CONVERTED_DOT_K where 16-bit
    rows go through ``tl.dot`` (``rows_dot``: more than one row), on every device alike."""
    if rows_dot and dtype in ("float16", "bfloat16"):
        return max(block_k, MIN_CONVERTED_DOT_K)
    return block_k


def _groups_in_tile(weight: QuantizedWeight, k: int, block_k: int) -> int:
    """How many whole groups of scales a K tile of ``block_k`` inputs holds (1 also when the tile lies inside
    one group), so the kernel reads them once per group; 0 when the groups do not line up with the tiles
    (act-order, or a group size neither dividing nor divided by the tile) and are read per input."""
    group_size = weight.group_size
    if weight.g_idx is not None:
        return 0
    if group_size >= k or group_size % block_k == 0:
        return 1
    return block_k // group_size if block_k % group_size == 0 else 0


def _weight_strides(weight: QuantizedWeight) -> tuple:
    """(q_sk, q_sn, z_sg, z_sn): the packed values' strides along K and N (int4 words are (K / 8, N), int8 and
    fp8 values (N, K)) and the zero points' by group and output (0, 0 where there are none)."""
    q = weight.qweight
    q_sk, q_sn = (q.stride(0), q.stride(1)) if weight.format == "int4" else (q.stride(1), q.stride(0))
    return (q_sk, q_sn, *(weight.zeros.stride() if weight.zeros is not None else (0, 0)))


def whole_words(weight: QuantizedWeight) -> bool:
    """Whether ``weight`` is int4 whose words each lie in one group (no act-order, groups a multiple of 8):
    ``int4_gemv`` and ``int4_gemm`` read it, its nibbles converted by their bits (``kernels/quant.py``)."""
    return weight.format == "int4" and weight.g_idx is None and weight.group_size % 8 == 0


def weight_slots(weight: QuantizedWeight) -> dict:
    """``weight``'s parts as the kernels' slots q, scales, zeros and g_idx; the scales stand in for the parts
    it lacks, pointers a constexpr leaves unread."""
    placeholder = weight.scales
    return {"q": weight.qweight, "scales": weight.scales,
            "zeros": weight.zeros if weight.zeros is not None else placeholder,
            "g_idx": weight.g_idx if weight.g_idx is not None else placeholder}


def dequantizing_flags(dtype, weight: QuantizedWeight, out_dtype, interpreted: bool, index_64: bool, dev) -> dict:
    """The constexprs every product that dequantizes ``weight``'s tiles against rows of ``dtype`` takes: the
    weight's format, its scales' and g_idx, the dot's operand type and precision (bfloat16 rows widened
    where the interpreter takes them), the output's encoding."""
    decode_bf16 = dtype.name == "bfloat16" and interpreted
    conversion = conversion_flags(get_dtype("float32"), out_dtype, dev)
    return dict(WEIGHT=_WEIGHT_FORMATS[weight.format], SCALE_FORMAT=load_format(weight.scales.dtype),
                HAS_G_IDX=weight.g_idx is not None, DOT=get_dtype("float32").triton if decode_bf16 else dtype.triton,
                PRECISION=_dot_precision(dtype), DECODE_BF16=decode_bf16, DST_FORMAT=conversion["DST_FORMAT"],
                VIA_F32=conversion["VIA_F32"], INDEX_64=index_64, INTERPRETED=interpreted)


def _launches(x, weight: QuantizedWeight, bias, out, m: int, n: int, k: int):
    """``run(x, weight, bias, out)`` for (m, k) rows laid out as ``x`` and a weight laid out as ``weight``,
    with its tuned settings."""
    dev = x.device
    facts = backend_for(dev).facts
    interpreted = bool(facts["kernels"].get("interpreted"))
    has_bias = bias is not None
    q = weight.qweight
    q_sk, q_sn, z_sg, z_sn = _weight_strides(weight)
    index_64 = needs_index_64(*(t for t in (x, out, q, weight.scales, weight.zeros, bias) if t is not None))
    flags = dict(dequantizing_flags(x.dtype, weight, out.dtype, interpreted, index_64, dev), HAS_BIAS=has_bias,
                 BIAS_FORMAT=float_format(bias.dtype) if has_bias else FORMAT_NATIVE.value)
    common = [weight.group_size, weight.scale_block_n, x.stride(0), x.stride(1), q_sk, q_sn, *weight.scales.stride(),
              z_sg, z_sn, bias.stride(0) if has_bias else 0, *out.stride()]
    decode = m <= GEMV_MAX_ROWS
    key = _launch_key(facts, x, weight, m)
    whole = whole_words(weight)
    int4_common = common[2:]
    int4_flags = {name: value for name, value in flags.items() if name not in ("WEIGHT", "HAS_G_IDX")}
    int4_flags.update(INLINE_ASM=inline_nibbles(facts, x.dtype.name), GROUP_SIZE=weight.group_size)

    def tensors_of(x, weight, bias, out, split=None):
        """The launch's slots; ``split``: a GEMV's partial and counters slots (``split_slots``)."""
        return {"x": x, **weight_slots(weight), "bias": bias if has_bias else out, "out": out,
                **(split or {"partial": out})}

    def gemv_for(config):
        block_k, splits = _dot_block_k(config["BLOCK_K"], x.dtype.name, m > 1), config["SPLITS"]
        k_per_split = cdiv(cdiv(k, splits), block_k) * block_k
        splits = max(1, cdiv(k, k_per_split))
        combined = combines_in_launch(config, splits, n)
        shape = dict(BLOCK_M=1 if m == 1 else GEMV_MAX_ROWS, BLOCK_N=config["BLOCK_N"], BLOCK_K=block_k,
                     SPLIT=splits > 1, COMBINE=combined, **launch_settings(config))
        if whole:
            main = PlannedLaunch(
                K.int4_gemv, (cdiv(n, config["BLOCK_N"]), splits),
                [Slot("x"), Slot("q"), Slot("scales"), Slot("zeros"), Slot("bias"), Slot("out"), Slot("partial"),
                 Slot("counters"), m, n, k, k_per_split, *int4_common],
                dict(shape, ONE_GROUP=_groups_in_tile(weight, k, block_k) == 1, PDL=dependent_launch(dev),
                     EVEN_K=k % k_per_split == 0, SWAPPED=bool(config.get("SWAPPED")), **int4_flags))
        else:
            main = PlannedLaunch(
                K.quantized_gemv, (cdiv(n, config["BLOCK_N"]), splits),
                [Slot("x"), Slot("q"), Slot("scales"), Slot("zeros"), Slot("g_idx"), Slot("bias"), Slot("out"),
                 Slot("partial"), Slot("counters"), m, n, k, k_per_split, *common],
                dict(shape, GROUPS_IN_TILE=_groups_in_tile(weight, k, block_k), **flags))
        combine = combine_launch(config, splits, m, n, 1.0, 1.0, (0, common[-3]), out.stride(), has_bias, False, flags,
                                 dev)
        float32 = get_dtype("float32")

        def run(x, weight, bias, out):
            tensors = tensors_of(x, weight, bias, out, split_slots(splits, combined, m, n, float32, dev, out))
            main(dev, tensors)
            if combine is not None:
                combine(dev, tensors)
        return run

    def gemm_for(config):
        grid = (cdiv(m, config["BLOCK_M"]) * cdiv(n, config["BLOCK_N"]),)
        block_k = _dot_block_k(config["BLOCK_K"], x.dtype.name, True)
        shape = dict(BLOCK_M=config["BLOCK_M"], BLOCK_N=config["BLOCK_N"], BLOCK_K=block_k, GROUP_M=GROUP_M,
                     num_warps=config["num_warps"], num_stages=config["num_stages"])
        if whole:
            launch = PlannedLaunch(
                K.int4_gemm, grid, [Slot("x"), Slot("q"), Slot("scales"), Slot("zeros"), Slot("bias"), Slot("out"),
                                    m, n, k, *int4_common],
                dict(shape, ONE_GROUP=_groups_in_tile(weight, k, block_k) == 1, EVEN_K=k % block_k == 0,
                     **int4_flags))
        else:
            launch = PlannedLaunch(
                K.quantized_gemm, grid, [Slot("x"), Slot("q"), Slot("scales"), Slot("zeros"), Slot("g_idx"),
                                         Slot("bias"), Slot("out"), m, n, k, *common],
                dict(shape, GROUPS_IN_TILE=_groups_in_tile(weight, k, block_k), **flags))
        return lambda x, weight, bias, out: launch(dev, tensors_of(x, weight, bias, out))

    launches_for = gemv_for if decode else gemm_for
    candidates = ((lambda: decode_candidates(facts, m, n, k, weight.format, weight.group_size, whole))
                  if decode else (lambda: gemm_candidates(facts, m, n, k, whole)))
    config = tuning.choose_timed(key, facts, candidates,
                                 lambda config: functools.partial(launches_for(config), x, weight, bias, out))
    return launches_for(config)


def _dequantized_launches(x, weight: QuantizedWeight, bias, out, m: int, n: int, k: int):
    """``run(x, weight, bias, out)`` for 16-bit rows past ``IN_LOOP_MAX_ROWS``: ``dequantize_weight`` writes the
    whole (n, k) weight in the rows' type into a workspace, rounded as ``quantized_gemm`` rounds its tiles, then
    matmul's planned product multiplies it as ``linear`` multiplies a 16-bit weight (tuned under that key)."""
    dev = x.device
    dtype = x.dtype
    facts = backend_for(dev).facts
    interpreted = bool(facts["kernels"].get("interpreted"))
    conversion = conversion_flags(get_dtype("float32"), dtype, dev)
    q = weight.qweight
    q_sk, q_sn, z_sg, z_sn = _weight_strides(weight)
    has_g_idx = weight.g_idx is not None
    if interpreted:
        block_n = _clamp_block(_INTERPRETED_BLOCK_N, _INTERPRETED_BLOCK_N, n)
        block_k, warps = _clamp_block(_INTERPRETED_BLOCK_K, _INTERPRETED_BLOCK_K, k), 4
    else:
        block_n, block_k, warps = _DEQUANTIZE_TILE
    block_k = max(block_k, 8)  # whole int4 words
    index_64 = needs_index_64(*(t for t in (q, weight.scales, weight.zeros) if t is not None), count=n * k)
    dequantize = PlannedLaunch(
        K.dequantize_weight, (cdiv(k, block_k), cdiv(n, block_n)),
        [Slot("q"), Slot("scales"), Slot("zeros"), Slot("g_idx"), Slot("dequantized"), n, k, weight.group_size,
         weight.scale_block_n, q_sk, q_sn, *weight.scales.stride(), z_sg, z_sn, k],
        dict(BLOCK_N=block_n, BLOCK_K=block_k, WEIGHT=_WEIGHT_FORMATS[weight.format],
             SCALE_FORMAT=load_format(weight.scales.dtype), HAS_G_IDX=has_g_idx,
             GROUPS_IN_TILE=_groups_in_tile(weight, k, block_k), DST_FORMAT=conversion["DST_FORMAT"],
             VIA_F32=conversion["VIA_F32"], INDEX_64=index_64, num_warps=warps))

    def dequantized_weight(weight):
        dequantized = scratch_tensor((n, k), dtype, dev)
        dequantize(dev, {**weight_slots(weight), "dequantized": dequantized})
        return dequantized

    operands = _dequantized_operands(x, weight, bias, dequantized_weight(weight))
    product = planned_product("linear", *operands[:2], dtype, operands[2], 1, 0 if bias is None else 1)
    (b_shape, b_strides), bias_layout = ((t.shape, t.stride()) if t is not None else (None, None)
                                         for t in operands[1:])

    def run(x, weight, bias, out):
        b = dequantized_weight(weight)._view(b_shape, b_strides)
        product(x, b, None if bias is None else bias._view(*bias_layout), out)
    return run


# the most inputs a row's whole-row rounding (``fp8_rows_whole``) holds in one tile: 32 a thread at 16 warps
FP8_ROWS_WHOLE_MAX = 16384


def _fp8_rows_launch(x, m: int, k: int, k_padded: int, blocks: int, scaling, given, interpreted: bool):
    """The launch rounding ``x``'s m rows to e4m3 in ``blocks`` groups each: the whole row in one tile where it
    fits ``FP8_ROWS_WHOLE_MAX`` (read once, its loads all in flight), else a program a group looping over it."""
    group_k = k_padded // blocks
    groups, block = next_pow2(blocks), next_pow2(group_k)
    decode_bf16 = x.dtype.name == "bfloat16" and interpreted
    if groups * block <= FP8_ROWS_WHOLE_MAX:
        return PlannedLaunch(K.fp8_rows_whole, (m,),
                             [Slot("x"), Slot("a"), Slot("row_scales"), given, k, k_padded, group_k, blocks,
                              *x.stride()],
                             dict(GROUPS=groups, BLOCK=block, SCALING=scaling.value, DECODE_BF16=decode_bf16,
                                  INTERPRETED=interpreted, num_warps=max(4, min(16, groups * block // 1024))))
    return PlannedLaunch(K.fp8_rows, (m, blocks),
                         [Slot("x"), Slot("a"), Slot("row_scales"), given, k, k_padded, group_k, *x.stride()],
                         dict(BLOCK=min(1024, block), SCALING=scaling.value, DECODE_BF16=decode_bf16,
                              INTERPRETED=interpreted, num_warps=4))


def _fp8_launches(x, weight: QuantizedWeight, bias, out, m: int, n: int, k: int):
    """``run(x, weight, bias, out)`` for ``fp8_activations``: ``fp8_rows`` rounds the rows to e4m3 (padded
    with zeros to whole K tiles; a scale per row, or per 1 x 128 block against block-scaled weights), then
    ``fp8_gemm`` (or ``fp8_block_gemm``; or ``fp8_gemm_tiles`` for either, with int32 indices) multiplies on the
    float8 matrix units, tuned per key."""
    dev = x.device
    facts = backend_for(dev).facts
    interpreted = bool(facts["kernels"].get("interpreted"))
    has_bias = bias is not None
    conversion = conversion_flags(get_dtype("float32"), out.dtype, dev)
    k_padded = cdiv(k, _FP8_K_ALIGN) * _FP8_K_ALIGN
    blocks = _row_blocks(weight)
    group_k = k_padded // blocks
    fp8, float32 = get_dtype("float8_e4m3fn"), get_dtype("float32")
    q = weight.qweight
    index_64 = needs_index_64(x, out, q, count=m * k_padded)
    scaling, given = ((K.SCALE_STATIC, weight.activation_scale) if weight.activation_scale is not None
                      else (K.SCALE_BOUNDED, weight.activation_scale_ub) if weight.activation_scale_ub is not None
                      else (K.SCALE_DYNAMIC, 0.0))
    rows = _fp8_rows_launch(x, m, k, k_padded, blocks, scaling, given, interpreted)
    flags = dict(SCALE_FORMAT=load_format(weight.scales.dtype), HAS_BIAS=has_bias,
                 BIAS_FORMAT=float_format(bias.dtype) if has_bias else FORMAT_NATIVE.value,
                 DST_FORMAT=conversion["DST_FORMAT"], VIA_F32=conversion["VIA_F32"], INDEX_64=index_64,
                 INTERPRETED=interpreted)
    tail = [bias.stride(0) if has_bias else 0, *out.stride()]
    tensors = [Slot("a"), Slot("q"), Slot("row_scales"), Slot("scales"), Slot("bias"), Slot("out"), m, n, k, k_padded]
    # the weight through a tensor descriptor: K contiguous, its rows 16-byte aligned (the bases are checked at a call)
    described = q.stride(1) == 1 and q.stride(0) % 16 == 0

    def tiles_for(config, shape):
        """``fp8_gemm_tiles`` with ``config``'s flags (through pointers where the weight's layout or a call's
        addresses keep descriptors out)."""
        tiles = cdiv(m, config["BLOCK_M"]) * cdiv(n, config["BLOCK_N"])
        programs = min(tiles, multiprocessors(dev)) if config.get("PERSISTENT") else tiles
        arguments = [*tensors, group_k, weight.scale_block_n, q.stride(1), q.stride(0),
                     *(weight.scales.stride() if blocks > 1 else (0, weight.scales.stride(1))), *tail, programs]

        def planned(tma):
            return PlannedLaunch(K.fp8_gemm_tiles, (programs,), arguments,
                                 dict(shape, TMA=tma, FLATTEN=bool(config.get("FLATTEN")), BLOCKED=blocks > 1,
                                      **{name: value for name, value in flags.items() if name != "INDEX_64"}))
        tma = bool(config.get("TMA")) and described
        launch = planned(tma)
        fallback = planned(False) if tma else None

        def product(dev, tensors):
            if fallback is not None and (tensors["a"].data_ptr() | tensors["q"].data_ptr()) & 15:
                fallback(dev, tensors)
            else:
                launch(dev, tensors)
        return product

    def launches_for(config):
        block_k = config["BLOCK_K"]
        # the K loop runs to k_padded: a weight tile past K (K a multiple of a 64-input tile, not of 128) must
        # read the weight's last input in place of inputs it lacks, as a ragged K's does
        shape = dict(BLOCK_M=config["BLOCK_M"], BLOCK_N=config["BLOCK_N"], BLOCK_K=block_k, GROUP_M=GROUP_M,
                     EVEN_K=k == k_padded, num_warps=config["num_warps"], num_stages=config["num_stages"])
        grid = (cdiv(m, config["BLOCK_M"]) * cdiv(n, config["BLOCK_N"]),)
        if any(config.get(name) for name in _FP8_TILE_FLAGS) and not index_64:
            product = tiles_for(config, shape)
        elif blocks == 1:
            product = PlannedLaunch(K.fp8_gemm, grid, [*tensors, weight.scale_block_n, q.stride(1), q.stride(0),
                                                       weight.scales.stride(1), *tail], dict(shape, **flags))
        else:
            product = PlannedLaunch(K.fp8_block_gemm, grid, [*tensors, group_k, weight.scale_block_n, q.stride(1),
                                                             q.stride(0), *weight.scales.stride(), *tail],
                                    dict(shape, **flags))

        def run(x, weight, bias, out):
            a = scratch_tensor((m, k_padded), fp8, dev)
            row_scales = scratch_tensor((m, blocks), float32, dev)
            tensors = {"x": x, "a": a, "row_scales": row_scales, "q": weight.qweight, "scales": weight.scales,
                       "bias": bias if has_bias else out, "out": out}
            rows(dev, tensors)
            product(dev, tensors)
        return run

    key = _launch_key(facts, x, weight, m, True)
    config = tuning.choose_timed(key, facts, lambda: fp8_candidates(facts, m, n, k, group_k, tiles=not index_64,
                                                                       blocked=blocks > 1),
                                 lambda config: functools.partial(launches_for(config), x, weight, bias, out))
    return launches_for(config)


def fp8_candidates(facts: dict, m: int, n: int, k: int, group_k: int | None = None, tiles: bool = True,
                   blocked: bool = False) -> list[dict]:
    """Settings worth timing for ``fp8_gemm`` (or, ``blocked``, ``fp8_block_gemm``, whose K tiles divide its
    ``group_k`` inputs a scale): the float GEMM's large tiles with K tiles of 64 or 128 (the float8 matrix unit
    takes K in steps of 32; the rows are padded to 128); with ``tiles`` (int32 indices) also ``fp8_gemm_tiles``'
    forms, through descriptors where the device has them. Every setting's pipeline stages fit the facts' shared
    memory."""
    if facts["kernels"].get("interpreted"):
        return [dict(BLOCK_M=_clamp_block(_INTERPRETED_BLOCK_M, _INTERPRETED_BLOCK_M, m),
                     BLOCK_N=_clamp_block(_INTERPRETED_BLOCK_N, _INTERPRETED_BLOCK_N, n), BLOCK_K=_FP8_K_ALIGN,
                     num_stages=1, num_warps=4)]
    limits = facts["tiles"]
    shared = facts.get("shared_memory_per_block_bytes")
    shapes = [(*shape, {}) for shape in _FP8_GEMM_SHAPES]
    if tiles:
        tma = _has_tma(facts)
        # a block-scaled walk holds each K tile's product beside the sum: its forms keep both within 64 float32
        # registers a thread each (ptxas for sm_90 spills hundreds of bytes past that)
        shapes += [shape for shape in _FP8_TILE_VARIANTS if (tma or not shape[5].get("TMA"))
                   and (not blocked or shape[0] * shape[1] <= 64 * 32 * shape[4])]
    out = []
    for bm, bn, bk, stages, warps, flags in shapes:
        if group_k is not None and group_k % bk:
            continue
        config = dict(BLOCK_M=_clamp_block(bm, limits["max_block_m"], m),
                      BLOCK_N=_clamp_block(bn, limits["max_block_n"], n), BLOCK_K=bk,
                      num_stages=min(stages, limits["max_stages"]), num_warps=min(warps, limits["max_warps"]),
                      **{name: True for name in _FP8_TILE_FLAGS if flags.get(name)})
        # one byte an element: each stage holds a BLOCK_M x BLOCK_K and a BLOCK_N x BLOCK_K tile; a flattened walk
        # also stages the output tile (at most 2 bytes an element, as sm_90 compiles them)
        staged = (config["BLOCK_M"] + config["BLOCK_N"]) * bk * config["num_stages"]
        if config.get("FLATTEN"):
            staged += 2 * config["BLOCK_M"] * config["BLOCK_N"]
        if shared and staged > shared:
            continue
        out.append(config)
    return tuning.distinct_candidates(out)


# ---- samples ---------------------------------------------------------------------------------------

def _e4m3_rows(x: np.ndarray, weight: QuantizedWeight) -> np.ndarray:
    """The rows of float32 ``x`` as ``fp8_rows`` rounds them against ``weight``, as float64: a float32 scale for
    each row, or each of its 1 x 128 blocks against block-scaled weights (the weight's ``activation_scale``, or
    the largest magnitude, clamped at its ``activation_scale_ub``, over 448), x / scale rounded to e4m3 to
    nearest even (saturating at 448), times the scale."""
    x = x.astype(np.float32)
    rows, k = x.shape
    blocks = _row_blocks(weight)
    width = k if blocks == 1 else weight.group_size
    padded = np.zeros((rows, blocks * width), np.float32)
    padded[:, :k] = x
    grouped = padded.reshape(rows, blocks, width)
    largest = np.abs(grouped).max(axis=-1, keepdims=True)
    if weight.activation_scale_ub is not None:
        largest = np.minimum(largest, np.float32(weight.activation_scale_ub))
    scales = np.maximum(largest, np.finfo(np.float32).tiny) / np.float32(FP8_MAX)
    if weight.activation_scale is not None:
        scales = np.full_like(scales, weight.activation_scale)
    rounded = np.clip(grouped / scales, -FP8_MAX, FP8_MAX).astype(ml_dtypes.float8_e4m3fn)
    return (rounded.astype(np.float64) * scales.astype(np.float64)).reshape(rows, -1)[:, :k]


def _quantized_reference(x, w, bias=None, fp8_activations=False):
    rows = _e4m3_rows(x, w) if fp8_activations else x
    return rows @ w.dequantize().T.astype(np.float64) + (0 if bias is None else bias)


def _quantized_samples(op):
    """A fixed (8, 16) weight quantized per format on the host (a QuantizedWeight, not an operand: it is made
    here, on the CPU), applied to a few rows; the reference applies its dequantized weight (to the rows rounded
    to e4m3 as ``fp8_rows`` rounds them, for ``fp8_activations``: per row, with a bound on the rows' scales
    under the normal rows' largest magnitudes, by a static scale, and in 1 x 128 blocks against a (8, 200)
    weight's 128 x 128 blocks, the second ragged)."""
    weight = np.linspace(-1.0, 1.0, 8 * 16, dtype=np.float32).reshape(8, 16)
    int8, fp8 = (QuantizedWeight.quantize(weight, format) for format in ("int8", "fp8"))
    int4 = QuantizedWeight.quantize(weight, "int4", group_size=8)
    q, scales = quantize_fp8(weight, "channel")
    bounded = QuantizedWeight.fp8(q, scales, activation_scale_ub=1.0)
    static = QuantizedWeight.fp8(q, scales, activation_scale=1.5 / FP8_MAX)
    blocked = QuantizedWeight.quantize(np.linspace(-1.0, 1.0, 8 * 200, dtype=np.float32).reshape(8, 200), "fp8",
                                       fp8_scales="block")
    return Samples((sample(operand(2, 16), int8), sample(operand(3, 16), int4, operand(8)), sample(operand(1, 16), fp8),
                    sample(operand(0, 16), int8), sample(operand(3, 16), fp8, operand(8), fp8_activations=True),
                    sample(operand(3, 16), bounded, fp8_activations=True),
                    sample(operand(3, 16), static, fp8_activations=True),
                    sample(operand(2, 200), blocked, operand(8), fp8_activations=True)),
                   _quantized_reference)


family_samples("quantized", lambda op: _quantized_samples(op) if op.name == "quantized_linear" else None)
