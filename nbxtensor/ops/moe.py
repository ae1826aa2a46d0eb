"""Mixture-of-experts: ``grouped_mm``, the grouped matrix product of torch's ``_grouped_mm`` (2-D rows against
a 3-D stack of matrices, row groups given by cumulative ends), and ``moe``, a mixture-of-experts block built
of registry ops.

``grouped_mm`` is one launch of ``kernels/matmul.py``'s ``grouped_gemm`` whose grid depends on the shapes
alone: each program finds its group and rows from ``offs`` on the device, so a decode step that routes its
tokens anew each time is captured and replayed like any other (nothing is read on the host). Products
accumulate in float32, float32 ones as the library's other float32 products do (bfloat16 parts in registers
where the device's matrix unit takes bfloat16 and the precision is "highest", else true float32, or TF32 when
asked for). Settings are tuned per launch key (``grouped_gemm``).

``moe`` routes each token to its ``top_k`` experts (softmax in float32 over the router's logits, the top
``top_k``, renormalised to sum to one where asked), sorts the token-expert pairs by expert (a stable sort, so
the order is that of the tokens), runs the gated MLP of every expert as two grouped products around
``act_and_mul``, and sums each token's ``top_k`` outputs weighted by its routing weights in float32, in a fixed
order (no atomics), rounding once to the input's dtype. Expert counts come from a comparison of every pair
with every expert, so no shape depends on the routing.
"""
from __future__ import annotations

import functools

import numpy as np

from .. import shape as S
from .. import tuning
from ..allocation import fresh_tensor_maker, scratch_scope
from ..device import backend_for
from ..dtypes import get_dtype
from ..kernels import matmul as K
from ..launch import cdiv, next_pow2
from ..tensor import Tensor
from .matmul_gemv import _INTERPRETED_BLOCK_K, _INTERPRETED_BLOCK_M, _INTERPRETED_BLOCK_N, _clamp_block
from .matmul_plans import _by_planes, _operand_flags
from ..lowering import needs_index_64
from .plans import PlanCache, PlannedLaunch, Slot, layout_key
from .pointwise_table import _GATED_ACTIVATIONS, _act_and_mul_reference
from .registry import Cost, TensorMeta, get, nbytes, register, workspace_bytes
from .samples import Samples, operand, sample

_FLOATS = ("float32", "float16", "bfloat16")
_F32 = get_dtype("float32")
_I32 = get_dtype("int32")
_I64 = get_dtype("int64")


# ---- grouped_mm -------------------------------------------------------------------------------------
def _shape_text(x) -> str:
    return "x".join(str(n) for n in x.shape) if len(x.shape) else "()"


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
    if offs is None:
        raise RuntimeError("grouped_mm: offs is required for a 2-D input: int32 cumulative row ends, one per "
                           "matrix of mat2")
    if offs.dtype is not _I32:
        raise TypeError(f"grouped_mm: offs must be int32, got {offs.dtype.name}")
    if tuple(offs.shape) != (mat2.shape[0],):
        raise RuntimeError(f"grouped_mm: offs must hold one row end per matrix of mat2, shape ({mat2.shape[0]},), "
                           f"got shape ({', '.join(map(str, offs.shape))})")
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


@register("grouped_mm", family="matmul", aten=["aten::_grouped_mm.default"],
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
                 BLOCK_E=next_pow2(experts + 1), EVEN_K=k % config["BLOCK_K"] == 0, INDEX_64=index_64,
                 num_warps=config["num_warps"], num_stages=config["num_stages"], **flags))

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
