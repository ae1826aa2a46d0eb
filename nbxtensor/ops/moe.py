"""Mixture-of-experts: ``grouped_mm``, the grouped matrix product of torch's ``_grouped_mm`` (2-D rows against
a 3-D stack of matrices, row groups given by cumulative ends), and ``moe``, a mixture-of-experts block built
of registry ops.

``grouped_mm`` is one launch of ``kernels/matmul.py``'s ``grouped_gemm`` whose grid depends on the shapes
alone: each program finds its group and rows from ``offs`` on the device, so a decode step that routes its
tokens anew each time is captured and replayed like any other (nothing is read on the host). Products
accumulate in float32, float32 ones as the library's other float32 products do (bfloat16 parts in registers
where the device's matrix unit takes bfloat16 and the precision is "highest", else true float32, or TF32 when
asked for). Settings are tuned per launch key (``grouped_gemm``). ``grouped_quantized_linear`` is its form for a
stack of experts' quantized weights (``quant.stack_experts``: int4 with or without act-order, int8, fp8), one
launch of ``kernels/quant.py``'s ``grouped_quantized_gemm``, which finds its groups alike and dequantizes each
weight tile as it loads it (launch key ``grouped_quantized_gemm``).

``moe`` routes each token to its ``top_k`` experts (softmax in float32 over the router's logits, the top
``top_k``, renormalised to sum to one where asked), sorts the token-expert pairs by expert (a stable sort, so
the order is that of the tokens), runs the gated MLP of every expert as two grouped products (float or quantized) around
``act_and_mul``, and sums each token's ``top_k`` outputs weighted by its routing weights in float32, in a fixed
order (no atomics), rounding once to the input's dtype. Expert counts come from a comparison of every pair
with every expert, so no shape depends on the routing.
"""
from __future__ import annotations

import functools
from types import SimpleNamespace

import numpy as np

from .. import shape as S
from .. import tuning
from ..allocation import fresh_tensor_maker, scratch_scope
from ..device import backend_for
from ..dtypes import get_dtype
from ..kernels import matmul as K
from ..kernels import quant as QK
from ..launch import cdiv, next_pow2
from ..lowering import needs_index_64
from ..quant import QuantizedWeight, stack_experts
from ..tensor import Tensor
from .matmul_gemv import _INTERPRETED_BLOCK_K, _INTERPRETED_BLOCK_M, _INTERPRETED_BLOCK_N, _clamp_block
from .matmul_plans import _by_planes, _meta, _operand_flags
from .plans import PlanCache, PlannedLaunch, Slot, layout_key
from .quant import _dot_block_k, _groups_in_tile, dequantizing_flags, tile_candidates, weight_slots
from .pointwise_table import _GATED_ACTIVATIONS, _act_and_mul_reference
from .registry import Cost, TensorMeta, get, nbytes, op_impl, register, workspace_bytes
from .samples import Samples, operand, sample

_FLOATS = ("float32", "float16", "bfloat16")
_F32 = get_dtype("float32")
_I32 = get_dtype("int32")
_I64 = get_dtype("int64")


# ---- grouped_mm -------------------------------------------------------------------------------------
def _shape_text(x) -> str:
    return "x".join(str(n) for n in x.shape) if len(x.shape) else "()"


def _check_offs(op: str, offs, groups: int, group: str) -> None:
    if offs is None:
        raise RuntimeError(f"{op}: offs is required for a 2-D input: int32 cumulative row ends, one per {group}")
    if offs.dtype is not _I32:
        raise TypeError(f"{op}: offs must be int32, got {offs.dtype.name}")
    if tuple(offs.shape) != (groups,):
        raise RuntimeError(f"{op}: offs must hold one row end per {group}, shape ({groups},), got shape "
                           f"({', '.join(map(str, offs.shape))})")


def _grouped_meta(input, mat2, offs, bias, out_dtype) -> TensorMeta:
    if len(input.shape) != 2 or len(mat2.shape) != 3:
        raise RuntimeError(f"grouped_mm: input must be a matrix (2-D) and mat2 a stack of matrices (3-D), got a "
                           f"{len(input.shape)}-D input of shape {_shape_text(input)} and a {len(mat2.shape)}-D mat2 "
                           f"of shape {_shape_text(mat2)} (only the 2-D x 3-D form is supported)")
    if input.dtype is not mat2.dtype:
        raise RuntimeError(f"grouped_mm: input is {input.dtype.name} but mat2 is {mat2.dtype.name}; both must have "
                           f"one dtype")
    if input.dtype.name not in _FLOATS:
        raise TypeError(f"grouped_mm: {input.dtype.name} operands are not supported; it takes "
                        f"{', '.join(_FLOATS)} (convert with .to(...))")
    _check_offs("grouped_mm", offs, mat2.shape[0], "matrix of mat2")
    if input.shape[1] != mat2.shape[1]:
        raise RuntimeError(f"grouped_mm: input's rows have {input.shape[1]} elements but mat2's matrices "
                           f"{mat2.shape[1]} rows (shapes {_shape_text(input)} and {_shape_text(mat2)}): the "
                           f"contraction dims must match")
    if bias is not None:
        raise NotImplementedError("grouped_mm: bias is not supported (torch's _grouped_mm takes none either)")
    if out_dtype is not None and get_dtype(out_dtype) is not input.dtype:
        raise RuntimeError(f"grouped_mm: out_dtype {get_dtype(out_dtype).name} differs from the operands' "
                           f"{input.dtype.name}; the output takes the input's dtype")
    return TensorMeta((input.shape[0], mat2.shape[2]), input.dtype)


def _grouped_cost(a) -> Cost:
    out = _grouped_meta(a.input, a.mat2, a.offs, a.bias, a.out_dtype)
    rows, k = a.input.shape
    # every row multiplies one matrix at most; which matrices are read depends on offs, so all of mat2's
    # bytes are counted (an upper bound: a matrix with no rows is not read)
    return Cost(flops=2 * rows * k * a.mat2.shape[2], bytes_read=nbytes(a.input) + nbytes(a.mat2) + nbytes(a.offs),
                bytes_written=nbytes(out))


def grouped_key(facts: dict, rows: int, n: int, k: int, experts: int, dtype, a_sk: int, b_sn: int,
                parts: bool = False) -> str:
    """The launch key of a grouped product of ``rows`` rows of ``k`` inputs against ``experts`` k x n
    matrices; ``parts``: a float32 product on bfloat16 parts."""
    return tuning.launch_key("grouped_gemm", facts, rows={"M": rows}, cols={"N": n, "K": k, "E": experts},
                             dtypes=(dtype, dtype), flags={"a_k_unit": a_sk == 1, "b_n_unit": b_sn == 1,
                                                           **({"bf16_parts": True} if parts else {})})


def _grouped_route_key(facts: dict, input, mat2) -> str | None:
    """The key a grouped product of operands laid out as these forms on a device of ``facts`` (None: an
    empty output, which launches nothing)."""
    (rows, k), (experts, _, n) = input.shape, mat2.shape
    if not rows or not n:
        return None
    return grouped_key(facts, rows, n, k, experts, input.dtype, input.stride(1), mat2.stride(2),
                       _by_planes(input.dtype, facts))


def _grouped_key(facts, input, mat2, offs=None, bias=None, out_dtype=None) -> list[str]:
    _grouped_meta(input, mat2, offs, bias, out_dtype)
    key = _grouped_route_key(facts, input, mat2)
    return [] if key is None else [key]


# (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps): short row tiles first (a decode step's experts take a
# few rows each), clamped to the facts' ceilings and to the problem
_GROUPED_SHAPES = [(16, 64, 64, 4, 4), (16, 128, 64, 4, 4), (32, 128, 64, 4, 4), (64, 64, 64, 4, 4),
                   (64, 128, 64, 3, 4), (64, 256, 64, 3, 8), (128, 128, 64, 3, 8), (128, 256, 64, 3, 8)]
# a thread's float32 accumulators beside which a tile split into bfloat16 parts (six tiles) still fits in
# registers (``matmul_plans._GEMM_PARTS_SHAPES``)
_PARTS_ACCUMULATORS = 64


def grouped_candidates(facts: dict, rows: int, n: int, k: int, dtype, parts: bool = False) -> list[dict]:
    """The settings worth timing for a grouped product on a device with these facts."""
    if facts["kernels"].get("interpreted"):
        # the interpreter pays per program: wide tiles, the whole of a few experts' rows in one
        return [dict(BLOCK_M=_clamp_block(_INTERPRETED_BLOCK_M, _INTERPRETED_BLOCK_M, rows),
                     BLOCK_N=_clamp_block(_INTERPRETED_BLOCK_N, _INTERPRETED_BLOCK_N, n),
                     BLOCK_K=max(_clamp_block(_INTERPRETED_BLOCK_K, _INTERPRETED_BLOCK_K, k), 32 // dtype.itemsize),
                     num_stages=1, num_warps=1)]
    tiles = facts["tiles"]
    shared = facts.get("shared_memory_per_block_bytes")
    configs = []
    for bm, bn, bk, stages, warps in _GROUPED_SHAPES:
        if dtype.itemsize == 4:
            bk //= 2  # float32 tiles take twice the shared memory and registers
        config = dict(BLOCK_M=_clamp_block(bm, tiles["max_block_m"], rows),
                      BLOCK_N=_clamp_block(bn, tiles["max_block_n"], n),
                      BLOCK_K=_clamp_block(bk, tiles["max_block_k"], k),
                      num_stages=min(stages, tiles["max_stages"]), num_warps=min(warps, tiles["max_warps"]))
        if parts and config["BLOCK_M"] * config["BLOCK_N"] > _PARTS_ACCUMULATORS * 32 * config["num_warps"]:
            continue
        staged = (config["BLOCK_M"] + config["BLOCK_N"]) * config["BLOCK_K"] * dtype.itemsize * config["num_stages"]
        if not shared or staged <= shared:
            configs.append(config)
    return tuning.distinct_candidates(configs)


_grouped_plans = PlanCache()


# transformers' MoE layers export their grouped products as its own op where torch's takes no such operands
# (the CPU's, float32): the same (input, weight, offs) with int32 row ends and zeros past the last
@register("grouped_mm", family="matmul",
          aten=["aten::_grouped_mm.default", "transformers::grouped_mm_fallback.default"],
          meta=lambda a: _grouped_meta(a.input, a.mat2, a.offs, a.bias, a.out_dtype), cost=_grouped_cost, bound=True,
          key=_grouped_key, samples=lambda op: _grouped_samples())
def grouped_mm(input: Tensor, mat2: Tensor, offs: Tensor | None = None, bias=None, out_dtype=None) -> Tensor:
    """torch's ``_grouped_mm`` of a 2-D ``input`` (rows, k) and a 3-D ``mat2`` (groups, k, n): rows
    ``offs[g - 1]:offs[g]`` of ``input`` times ``mat2[g]`` (``offs``: int32 cumulative row ends, the first
    group starting at row 0). Rows past ``offs[-1]`` are zero (torch leaves them unwritten). ``offs`` is read
    on the device only, its ends clamped to the rows and made non-decreasing: no ``offs`` reads or writes out
    of bounds. Any strides: a weight stored (groups, n, k) is read in place as ``w.transpose(1, 2)``."""
    key = (layout_key(input), layout_key(mat2), layout_key(offs), bias is None, out_dtype)
    plan = _grouped_plans.lookup(key)
    if plan is None:
        _grouped_meta(input, mat2, offs, bias, out_dtype)
        if mat2.device != input.device or offs.device != input.device:
            raise RuntimeError(f"grouped_mm: expected all tensors on one device, got input on {input.device}, mat2 "
                               f"on {mat2.device} and offs on {offs.device}")
        plan = _grouped_plans.get(key, lambda: _plan_grouped(input, mat2, offs))
    return plan(input, mat2, offs)


def _plan_grouped(a: Tensor, b: Tensor, offs: Tensor):
    """``execute(a, b, offs) -> out`` for operands laid out as these (tuning on them if needed)."""
    dev = a.device
    facts = backend_for(dev).facts
    (rows, k), (experts, _, n) = a.shape, b.shape
    make_output = fresh_tensor_maker((rows, n), a.dtype, dev)
    key = _grouped_route_key(facts, a, b)
    if key is None:
        return lambda a, b, offs: make_output()
    flags = _operand_flags(a.dtype, a.dtype, None, dev, facts)
    del flags["BIAS_FORMAT"]
    parts = _by_planes(a.dtype, facts)
    if parts:
        # float32 tiles split into bfloat16 parts in registers; the interpreter multiplies the parts as the
        # float32 values holding them (``kernels/matmul.py``)
        flags = dict(flags, PRECISION=K.PRECISION_BF16_PARTS.value, DECODE_BF16=flags["INTERPRETED"])
    out = make_output()
    index_64 = needs_index_64(a, b, out)

    def launch_for(config):
        block_m = config["BLOCK_M"]
        planned = PlannedLaunch(
            K.grouped_gemm, (cdiv(rows, block_m) + experts, cdiv(n, config["BLOCK_N"])),
            [Slot("a"), Slot("b"), Slot("offs"), Slot("out"), rows, n, k, experts, *a.stride(), *b.stride(),
             *out.stride()],
            dict(BLOCK_M=block_m, BLOCK_N=config["BLOCK_N"], BLOCK_K=config["BLOCK_K"],
                 BLOCK_E=next_pow2(experts + 1), EVEN_K=k % config["BLOCK_K"] == 0,
                 EVEN_N=n % config["BLOCK_N"] == 0, INDEX_64=index_64, num_warps=config["num_warps"],
                 num_stages=config["num_stages"], **flags))

        def run(a, b, offs, out):
            planned(dev, {"a": a, "b": b, "offs": offs, "out": out})
            return out
        return run

    config = tuning.choose_timed(key, facts, lambda: grouped_candidates(facts, rows, n, k, a.dtype, parts),
                                 lambda config: functools.partial(launch_for(config), a, b, offs, out))
    run = launch_for(config)
    return lambda a, b, offs: run(a, b, offs, make_output())


def grouped_reference(a, b, offs) -> np.ndarray:
    """``grouped_mm`` in float64 NumPy, group by group: ends clamped to the rows and made non-decreasing,
    rows past the last end zero."""
    rows = a.shape[0]
    out = np.zeros((rows, b.shape[2]), np.float64)
    start = 0
    for group, end in enumerate(np.asarray(offs, np.int64)):
        end = max(start, min(max(int(end), 0), rows))
        out[start:end] = np.asarray(a[start:end], np.float64) @ np.asarray(b[group], np.float64)
        start = end
    return out


def _grouped_samples() -> Samples:
    """Row ends drawn in order, past the rows too (clamped) and short of them (zero rows after); bfloat16 and
    float16; a weight stored (groups, n, k) and read transposed; groups without rows; an empty input."""
    def ends(groups, rows):
        return operand(groups, dtype="int32", values="ascending", domain=(0, rows + 2))
    return Samples((sample(operand(7, 3), operand(3, 3, 4), ends(3, 7)),
                    sample(operand(5, 4, dtype="bfloat16"), operand(2, 4, 3, dtype="bfloat16"), ends(2, 5)),
                    sample(operand(6, 2, dtype="float16"), operand(4, 2, 5, dtype="float16", layout="transposed"),
                           ends(4, 6)),
                    sample(operand(4, 3, layout="transposed"), operand(1, 3, 2), ends(1, 4)),
                    sample(operand(0, 3), operand(2, 3, 4), ends(2, 0))),
                   lambda a, b, offs, **unused: grouped_reference(a, b, offs))


# ---- grouped_quantized_linear ------------------------------------------------------------------------
def _grouped_quantized_meta(input, weight, offs) -> TensorMeta:
    if not isinstance(weight, QuantizedWeight) or len(weight.shape) != 3:
        raise TypeError(f"grouped_quantized_linear: weight must be a stack of experts' quantized weights, a 3-D "
                        f"QuantizedWeight (experts, out_features, in_features) from quant.stack_experts, got "
                        f"{weight!r}")
    if len(input.shape) != 2:
        raise RuntimeError(f"grouped_quantized_linear: input must be a matrix (2-D), got shape {_shape_text(input)}")
    if input.dtype.name not in _FLOATS:
        raise TypeError(f"grouped_quantized_linear: {input.dtype.name} input is not supported; it takes "
                        f"{', '.join(_FLOATS)}")
    experts, n, k = weight.shape
    _check_offs("grouped_quantized_linear", offs, experts, "expert of weight")
    if input.shape[1] != k:
        raise RuntimeError(f"grouped_quantized_linear: input's rows have {input.shape[1]} elements but the experts' "
                           f"weights {k} inputs (weight shape {'x'.join(map(str, weight.shape))})")
    return TensorMeta((input.shape[0], n), input.dtype)


def _grouped_quantized_cost(a) -> Cost:
    out = _grouped_quantized_meta(a.input, a.weight, a.offs)
    rows, k = a.input.shape
    # every expert's packed weight, scales and zero points counted read: which are depends on offs (an upper
    # bound, as grouped_mm's)
    return Cost(flops=2 * rows * k * a.weight.shape[1], bytes_read=nbytes(a.input) + a.weight.nbytes + nbytes(a.offs),
                bytes_written=nbytes(out))


def grouped_quantized_key(facts: dict, rows: int, weight: QuantizedWeight, dtype) -> str:
    """The launch key of ``rows`` rows of ``dtype`` against a stack of experts' quantized ``weight``."""
    experts, n, k = weight.shape
    return tuning.launch_key("grouped_quantized_gemm", facts, rows={"M": rows}, cols={"N": n, "K": k, "E": experts},
                             dtypes=(dtype, weight.scales.dtype),
                             flags={"format": weight.format, "g_idx": weight.g_idx is not None})


def _grouped_quantized_key(facts, input, weight, offs=None) -> list[str]:
    _grouped_quantized_meta(input, weight, offs)
    rows = input.shape[0]
    return [grouped_quantized_key(facts, rows, weight, input.dtype)] if rows and weight.shape[1] else []


# (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps): short row tiles first, as grouped_mm's; the dequantized
# float32 weight tile lives in registers beside the accumulator, so tiles stay as small as quantized_gemm's
_GROUPED_QUANTIZED_SHAPES = [(16, 64, 64, 4, 4), (16, 128, 64, 4, 4), (32, 128, 64, 3, 4), (64, 64, 64, 3, 4),
                             (64, 128, 64, 3, 4), (128, 128, 64, 3, 8), (64, 128, 128, 2, 4)]


def grouped_quantized_candidates(facts: dict, rows: int, n: int, k: int) -> list[dict]:
    """The settings worth timing for a grouped quantized product on a device with these facts."""
    return tile_candidates(facts, rows, n, k, _GROUPED_QUANTIZED_SHAPES)


_grouped_quantized_plans = PlanCache()


@register("grouped_quantized_linear", family="moe", aten=["nbx::grouped_quantized_linear"],
          meta=lambda a: _grouped_quantized_meta(a.input, a.weight, a.offs), cost=_grouped_quantized_cost, bound=True,
          key=_grouped_quantized_key, samples=lambda op: _grouped_quantized_samples())
def grouped_quantized_linear(input: Tensor, weight: QuantizedWeight, offs: Tensor) -> Tensor:
    """Rows ``offs[e - 1]:offs[e]`` of the 2-D ``input`` (rows, k) times expert e's quantized weight, transposed:
    ``weight`` is a stack of experts' (n, k) weights (``quant.stack_experts``), so the result is (rows, n) in
    the input's dtype. ``offs`` as ``grouped_mm`` takes it (int32 cumulative row ends, read on the device only,
    clamped to the rows and made non-decreasing; rows past the last end are zero). Each weight tile is
    dequantized in registers as it is loaded (``kernels/quant.py``'s ``grouped_quantized_gemm``)."""
    key = (layout_key(input), weight.layout_key if type(weight) is QuantizedWeight else None, layout_key(offs))
    plan = _grouped_quantized_plans.lookup(key)
    if plan is None:
        _grouped_quantized_meta(input, weight, offs)
        if weight.device != input.device or offs.device != input.device:
            raise RuntimeError(f"grouped_quantized_linear: expected all tensors on one device, got input on "
                               f"{input.device}, weight on {weight.device} and offs on {offs.device}")
        plan = _grouped_quantized_plans.get(key, lambda: _plan_grouped_quantized(input, weight, offs))
    return plan(input, weight, offs)


def _stack_strides(weight: QuantizedWeight) -> list:
    """(q_se, q_sk, q_sn, s_se, s_sg, s_sn, z_se, z_sg, z_sn, g_se): each part's strides by expert, along K (or
    group) and along N (int4 words are (E, K / 8, N), int8 and fp8 values (E, N, K)); zeros where a part is
    absent."""
    q = weight.qweight
    q_se, q_sk, q_sn = (q.stride() if weight.format == "int4" else (q.stride(0), q.stride(2), q.stride(1)))
    zeros = weight.zeros.stride() if weight.zeros is not None else (0, 0, 0)
    return [q_se, q_sk, q_sn, *weight.scales.stride(), *zeros,
            weight.g_idx.stride(0) if weight.g_idx is not None else 0]


def _plan_grouped_quantized(x: Tensor, weight: QuantizedWeight, offs: Tensor):
    """``execute(x, weight, offs) -> out`` for operands laid out as these (tuning on them if needed)."""
    dev = x.device
    facts = backend_for(dev).facts
    interpreted = bool(facts["kernels"].get("interpreted"))
    rows, k = x.shape
    experts, n, _ = weight.shape
    make_output = fresh_tensor_maker((rows, n), x.dtype, dev)
    if not rows or not n:
        return lambda x, weight, offs: make_output()
    if weight.g_idx is not None and weight.g_idx.stride(1) != 1:
        raise RuntimeError("grouped_quantized_linear: the weight's g_idx must be contiguous along its inputs")
    out = make_output()
    index_64 = needs_index_64(*(t for t in (x, out, weight.qweight, weight.scales, weight.zeros, weight.g_idx)
                                if t is not None))
    flags = dequantizing_flags(x.dtype, weight, x.dtype, interpreted, index_64, dev)
    strides = _stack_strides(weight)

    def launch_for(config):
        block_m = config["BLOCK_M"]
        # several rows always go through tl.dot: K tiles long enough for converted 16-bit operands
        block_k = _dot_block_k(config["BLOCK_K"], x.dtype.name, True)
        planned = PlannedLaunch(
            QK.grouped_quantized_gemm, (cdiv(rows, block_m) + experts, cdiv(n, config["BLOCK_N"])),
            [Slot("x"), Slot("q"), Slot("scales"), Slot("zeros"), Slot("g_idx"), Slot("offs"), Slot("out"), rows, n,
             k, experts, weight.group_size, weight.scale_block_n, *x.stride(), *strides, *out.stride()],
            dict(BLOCK_M=block_m, BLOCK_N=config["BLOCK_N"], BLOCK_K=block_k, BLOCK_E=next_pow2(experts + 1),
                 GROUPS_IN_TILE=_groups_in_tile(weight, k, block_k), num_warps=config["num_warps"],
                 num_stages=config["num_stages"], **flags))

        def run(x, weight, offs, out):
            planned(dev, {"x": x, **weight_slots(weight), "offs": offs, "out": out})
            return out
        return run

    key = grouped_quantized_key(facts, rows, weight, x.dtype)
    config = tuning.choose_timed(key, facts, lambda: grouped_quantized_candidates(facts, rows, n, k),
                                 lambda config: functools.partial(launch_for(config), x, weight, offs, out))
    run = launch_for(config)
    return lambda x, weight, offs: run(x, weight, offs, make_output())


def _grouped_quantized_reference(x, weight, offs) -> np.ndarray:
    return grouped_reference(x, weight.dequantize().astype(np.float64).transpose(0, 2, 1), offs)


def _grouped_quantized_samples() -> Samples:
    """Three experts' (8, 16) weights quantized per format on the host (a stack, not an operand: it is made here,
    on the CPU): int4 in groups of 8, int8, fp8 per channel; row ends past the rows and short of them; an empty
    input."""
    rng = np.random.default_rng(0)
    dense = [rng.uniform(-1.0, 1.0, (8, 16)).astype(np.float32) for _ in range(3)]
    int4, int8, fp8 = (stack_experts([[QuantizedWeight.quantize(w, format, group_size=8)] for w in dense])
                       for format in ("int4", "int8", "fp8"))

    def ends(rows):
        return operand(3, dtype="int32", values="ascending", domain=(0, rows + 2))
    return Samples((sample(operand(7, 16), int4, ends(7)), sample(operand(5, 16, dtype="bfloat16"), int8, ends(5)),
                    sample(operand(6, 16, dtype="float16"), fp8, ends(6)), sample(operand(0, 16), int8, ends(0))),
                   _grouped_quantized_reference)


# ---- moe --------------------------------------------------------------------------------------------
def _moe_meta(a) -> TensorMeta:
    x, router, gate_up, down = a.input, a.router_weight, a.gate_up, a.down
    if not len(x.shape):
        raise RuntimeError("moe: input must have a hidden dim, got a 0-d tensor")
    if x.dtype.name not in _FLOATS:
        raise TypeError(f"moe: {x.dtype.name} input is not supported; it takes {', '.join(_FLOATS)}")
    for name, weight in (("router_weight", router), ("gate_up", gate_up), ("down", down)):
        # a stack of quantized experts multiplies rows of any float dtype
        if weight.dtype is not x.dtype and not isinstance(weight, QuantizedWeight):
            raise RuntimeError(f"moe: {name} is {weight.dtype.name} but input is {x.dtype.name}; all must have one "
                               f"dtype")
    hidden = x.shape[-1]
    if isinstance(router, QuantizedWeight):
        raise TypeError("moe: router_weight must be a float tensor (routers stay unquantized); gate_up and down may "
                        "be stacks of quantized experts")
    if len(router.shape) != 2 or router.shape[1] != hidden:
        raise RuntimeError(f"moe: router_weight must be (experts, {hidden}), got shape {_shape_text(router)}")
    experts = router.shape[0]
    if len(gate_up.shape) != 3 or gate_up.shape[0] != experts or gate_up.shape[2] != hidden or gate_up.shape[1] % 2:
        raise RuntimeError(f"moe: gate_up must be ({experts}, 2 * intermediate, {hidden}) (each expert's gate rows, "
                           f"then its up rows), got shape {_shape_text(gate_up)}")
    intermediate = gate_up.shape[1] // 2
    if tuple(down.shape) != (experts, hidden, intermediate):
        raise RuntimeError(f"moe: down must be ({experts}, {hidden}, {intermediate}), got shape {_shape_text(down)}")
    if type(a.top_k) is not int or not 1 <= a.top_k <= experts:
        raise ValueError(f"moe: top_k must be an integer from 1 to the {experts} experts, got {a.top_k!r}")
    if a.activation not in _GATED_ACTIVATIONS:
        raise ValueError(f"moe: activation must be one of {', '.join(_GATED_ACTIVATIONS)}, got {a.activation!r}")
    return TensorMeta(tuple(x.shape), x.dtype)


def _sort_key_dtype(experts: int):
    """The narrowest integer dtype holding every expert index: the fewer its bytes, the fewer radix passes
    sort a long prefill's token-expert pairs."""
    return get_dtype("uint8" if experts <= 256 else "int16" if experts <= 1 << 15 else "int32")


def _moe_sizes(a) -> tuple:
    """(tokens, hidden, experts, intermediate, token-expert pairs) of a call."""
    tokens = S.numel(a.input.shape[:-1])
    experts, hidden = a.router_weight.shape
    return tokens, hidden, experts, a.down.shape[2], tokens * a.top_k


def _moe_cost(a) -> Cost:
    out = _moe_meta(a)
    tokens, hidden, experts, intermediate, pairs = _moe_sizes(a)
    dtype, size = a.input.dtype, a.input.dtype.itemsize
    rows = TensorMeta((tokens, hidden), dtype)
    probabilities = TensorMeta((tokens, experts), _F32)
    selected = TensorMeta((tokens, a.top_k), _F32)
    compared = TensorMeta((pairs, experts), get_dtype("bool"))
    weighted = TensorMeta((tokens, a.top_k, hidden), _F32)
    temporaries = [tokens * hidden * size,  # the rows, where the input's do not merge into one matrix
                   tokens * experts * size, tokens * experts * 4, tokens * a.top_k * 4, tokens * a.top_k * 8,
                   *([tokens * 4, tokens * a.top_k * 4] if a.norm_topk_prob else []),
                   # the sort's keys, and the sorted keys it returns beside the order
                   *[pairs * _sort_key_dtype(experts).itemsize] * 2, experts * 8, pairs * experts, experts * 4, pairs * 8,
                   pairs * 8, pairs * hidden * size, pairs * 2 * intermediate * size, pairs * intermediate * size,
                   pairs * hidden * size, pairs * hidden * size, pairs * hidden * 4,
                   *([tokens * hidden * 4] if dtype is not _F32 else [])]
    # the ops called whose cost rules declare temporaries of their own
    nested = max(get("linear").cost(rows, a.router_weight, None).workspace,
                 get("softmax").cost(TensorMeta((tokens, experts), dtype), -1, dtype=_F32).workspace,
                 get("topk").cost(probabilities, a.top_k, -1).workspace,
                 get("sum").cost(selected, -1, keepdim=True).workspace,
                 get("sum").cost(compared, 0, dtype=_I32).workspace, get("sum").cost(weighted, 1).workspace)
    # every expert's weights are counted read: which are depends on the routing (an upper bound)
    return Cost(flops=2 * tokens * hidden * experts + 6 * pairs * hidden * intermediate + 2 * pairs * hidden,
                bytes_read=sum(t.nbytes if isinstance(t, QuantizedWeight) else nbytes(t)
                               for t in (a.input, a.router_weight, a.gate_up, a.down)),
                bytes_written=nbytes(out), workspace=workspace_bytes(*temporaries) + nested)


def _moe_key(facts, input, router_weight, gate_up, down, top_k, norm_topk_prob=False, activation="silu"):
    """The router's product's keys and the two grouped products' (on the gathered rows and the activations,
    both contiguous)."""
    hidden = input.shape[-1]
    rows = input if len(input.shape) == 2 else _meta((S.numel(input.shape[:-1]), hidden), input.dtype)
    pairs = rows.shape[0] * top_k
    ends = _meta((router_weight.shape[0],), _I32)
    return [*get("linear").key(facts, rows, router_weight, None),
            *_expert_product_key(facts, _meta((pairs, hidden), input.dtype), gate_up, ends),
            *_expert_product_key(facts, _meta((pairs, down.shape[2]), input.dtype), down, ends)]


def _expert_product_key(facts, rows, weights, ends) -> list[str]:
    if isinstance(weights, QuantizedWeight):
        return _grouped_quantized_key(facts, rows, weights, ends)
    return _grouped_key(facts, rows, weights.transpose(1, 2), ends)


def _expert_product(rows: Tensor, weights, ends: Tensor) -> Tensor:
    """Each expert's rows times its (out_features, in_features) weight, transposed: a float stack read in place
    by ``grouped_mm``, or a stack of quantized weights."""
    if isinstance(weights, QuantizedWeight):
        return grouped_quantized_linear(rows, weights, ends)
    return grouped_mm(rows, weights.transpose(1, 2), ends)


@register("moe", family="moe", aten=["nbx::moe"], meta=_moe_meta, cost=_moe_cost, bound=True, key=_moe_key,
          samples=lambda op: _moe_samples())
def moe(input: Tensor, router_weight: Tensor, gate_up: Tensor, down: Tensor, top_k: int,
        norm_topk_prob: bool = False, activation: str = "silu") -> Tensor:
    """A mixture-of-experts MLP of the rows of ``input`` (..., hidden): ``router_weight`` (experts, hidden)
    scores the experts, each row goes to its ``top_k`` likeliest (softmax in float32; their weights
    renormalised to sum to one with ``norm_topk_prob``), expert e computing ``down[e] @ act(gate) * up`` with
    [gate; up] = ``gate_up[e]`` (experts, 2 * intermediate, hidden) @ row, ``down`` (experts, hidden,
    intermediate); a row's result is the sum of its experts' outputs times their weights, in float32 (the
    weights are never rounded to a half dtype), rounded once to the input's dtype. ``gate_up`` and ``down`` may
    each be a stack of quantized experts' weights of those shapes (``quant.stack_experts``), multiplied by
    ``grouped_quantized_linear``; the router stays float."""
    _moe_meta(SimpleNamespace(input=input, router_weight=router_weight, gate_up=gate_up, down=down, top_k=top_k,
                              activation=activation))
    dev = input.device
    if any(w.device != dev for w in (router_weight, gate_up, down)):
        raise RuntimeError(f"moe: expected all tensors on one device, got input on {dev} and weights on "
                           f"{', '.join(str(w.device) for w in (router_weight, gate_up, down))}")
    hidden, experts = input.shape[-1], router_weight.shape[0]
    with scratch_scope():
        x = input.reshape(-1, hidden)
        tokens = x.shape[0]
        weights, chosen = op_impl("topk")(op_impl("softmax")(op_impl("linear")(x, router_weight), -1, dtype=_F32), top_k, -1)
        if norm_topk_prob:
            weights = weights / weights.sum(-1, keepdim=True)
        pairs = chosen.reshape(-1)
        # the end of expert e's rows in the sorted order: the pairs routed to experts 0 to e
        ends = (pairs.unsqueeze(1) <= op_impl("arange")(experts, device=dev)).sum(0, dtype=_I32)
        order = op_impl("argsort")(pairs.to(_sort_key_dtype(experts)), stable=True)
        rows = op_impl("index_select")(x, 0, order // top_k)
        activated = op_impl("act_and_mul")(_expert_product(rows, gate_up, ends), activation=activation)
        expert_out = _expert_product(activated, down, ends)
        by_pair = op_impl("empty_like")(expert_out).index_copy_(0, order, expert_out)
        weighted = by_pair.view(tokens, top_k, hidden) * weights.unsqueeze(-1)
    summed = weighted.sum(1)
    return (summed if input.dtype is _F32 else summed.to(input.dtype)).view(input.shape)


def moe_reference(x, router_weight, gate_up, down, top_k, norm_topk_prob=False, activation="silu") -> np.ndarray:
    """``moe`` in float64 NumPy, token by token and expert by expert."""
    hidden = x.shape[-1]
    rows = np.asarray(x, np.float64).reshape(-1, hidden)
    logits = rows @ np.asarray(router_weight, np.float64).T
    probabilities = np.exp(logits - logits.max(-1, keepdims=True))
    probabilities /= probabilities.sum(-1, keepdims=True)
    out = np.zeros_like(rows)
    for token, scores in enumerate(probabilities):
        chosen = np.argsort(-scores, kind="stable")[:top_k]
        weights = scores[chosen] / (scores[chosen].sum() if norm_topk_prob else 1.0)
        for expert, weight in zip(chosen, weights):
            gated = _act_and_mul_reference(np.asarray(gate_up[expert], np.float64) @ rows[token],
                                           activation=activation)
            out[token] += weight * (np.asarray(down[expert], np.float64) @ gated)
    return out.reshape(x.shape)


def _moe_samples() -> Samples:
    """Two of three experts renormalised, one of four not, every expert of three in bfloat16 (no choice a
    half-precision router's rounding could turn), tokens in two dims, gelu."""
    def experts(count, hidden, intermediate, dtype="float32"):
        return (operand(count, hidden, dtype=dtype), operand(count, 2 * intermediate, hidden, dtype=dtype),
                operand(count, hidden, intermediate, dtype=dtype))
    return Samples((sample(operand(5, 4), *experts(3, 4, 3), 2, norm_topk_prob=True),
                    sample(operand(6, 4), *experts(4, 4, 2), 1),
                    sample(operand(4, 4, dtype="bfloat16"), *experts(3, 4, 2, dtype="bfloat16"), 3),
                    sample(operand(2, 3, 4), *experts(3, 4, 3), 2, activation="gelu_tanh")),
                   moe_reference)
