"""Matrix products: mm, bmm, matmul (torch's rank rules and batch broadcasting), addmm, baddbmm, addmv,
addr, mv, dot, vdot, outer, linear and einsum's contraction forms.

Every product is one launch of ``kernels/matmul.py``'s ``gemm`` over strided views of its operands (a
transposed weight is read in place), or, for a handful of rows against one matrix (decode), of ``gemv``,
which streams the matrix once. Settings come from the tuning cache under a launch key (``tuning/``).

dtypes: both operands share one of float32, float16, bfloat16 (accumulated in float32, returned in the
input dtype), int8 (accumulated and returned in int32), or int64, int32, int16, uint8 (summed exactly in
int64 by ``gemm_exact`` and returned in the input dtype, wrapping as torch's do); outer and addr also take
bool (logical and / or, as torch). float32 is multiplied in true float32 unless the
user opts into TF32 as torch has it: ``set_float32_matmul_precision("high")`` or
``backends.cuda.matmul.allow_tf32 = True``.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from types import SimpleNamespace

import numpy as np

from .. import shape as S
from .. import tuning
from ..device import backend_for, multiprocessors, resolve
from ..dtypes import get_dtype
from ..kernels import matmul as K
from ..kernels.copy import FORMAT_NATIVE, SMALL_FLOAT_FORMATS
from ..launch import cdiv, next_pow2
from ..lowering import needs_index_64
from ..tensor import Tensor
from .copy import Workspace, _conversion_flags, fresh_tensor_maker, new_tensor, scratch_scope, scratch_tensor
from .plans import PlanCache, PlannedLaunch, Slot, clear_all, layout_key
from .reductions import _simple_cost, _sum_dtype
from .registry import Cost, TensorMeta, family_samples, nbytes, register, workspace_bytes
from .samples import Samples, by_name, operand, sample

# batch dims (after merging) the kernel indexes directly; more are materialised first
MAX_BATCH_RANK = 4
# rows up to this many take the GEMV kernel (one 16-row tile of the matrix unit at most)
GEMV_MAX_ROWS = 16
# grid axis 1 holds batches; CUDA allows this many per launch
MAX_GRID_Y = 65535
GROUP_M = 8

# integer operands multiplied exactly (int64 sums, wrapped to their own width as torch's are); int8 takes
# the matrix unit and returns int32
_EXACT_INTEGER = ("int64", "int32", "int16", "uint8")
_SUPPORTED = ("float32", "float16", "bfloat16", "int8", *_EXACT_INTEGER)
# (BLOCK_M, BLOCK_N, BLOCK_K) of the exact integer product, clamped to the problem
_EXACT_TILE = (32, 32, 8)

# ---- float32 precision, as torch spells it ---------------------------------------------------------
_PRECISIONS = ("highest", "high", "medium")
_precision = {"float32": "highest", "planes": True}


def set_float32_matmul_precision(precision: str) -> None:
    """"highest" (default): float32 products in true float32. "high" or "medium": TF32 matrix units."""
    if precision not in _PRECISIONS:
        raise ValueError(f"set_float32_matmul_precision: expected one of {', '.join(_PRECISIONS)}, got {precision!r}")
    _precision["float32"] = precision
    clear_all()  # plans made under the other precision


def get_float32_matmul_precision() -> str:
    return _precision["float32"]


class _CudaMatmulFlags:
    """``backends.cuda.matmul``: ``allow_tf32`` is the float32 precision seen as a switch, as in torch.
    ``float32_planes`` (default True): at "highest" precision, float32 products on matrix units with
    bfloat16 run as bfloat16 products of each operand's three exact bfloat16 parts (``kernels/matmul.py``),
    as accurate as the FMA units and faster (split in the GEMM's registers or written as planes first,
    whichever the tuner timed faster); False keeps them on the FMA units."""

    @property
    def allow_tf32(self) -> bool:
        return _precision["float32"] != "highest"

    @allow_tf32.setter
    def allow_tf32(self, value: bool) -> None:
        set_float32_matmul_precision("high" if value else "highest")

    @property
    def float32_planes(self) -> bool:
        return _precision["planes"]

    @float32_planes.setter
    def float32_planes(self, value: bool) -> None:
        _precision["planes"] = bool(value)
        clear_all()


backends = SimpleNamespace(cuda=SimpleNamespace(matmul=_CudaMatmulFlags()))


def _dot_precision(dtype) -> str | None:
    if dtype.kind == "int":
        return None
    if dtype.name == "float32" and _precision["float32"] != "highest":
        return "tf32"
    return "ieee"


# ---- checks and meta rules --------------------------------------------------------------------------
def _dims(shape) -> str:
    return "x".join(str(n) for n in shape) if len(shape) else "()"


def _result_dtype(op: str, *operands, boolean: bool = False):
    """The output dtype of a product of ``operands`` (all one dtype); ``boolean``: bool operands are taken
    (torch's outer and addr take them; its sums of products do not)."""
    first = operands[0].dtype
    for other in operands[1:]:
        if other.dtype is not first:
            raise RuntimeError(f"{op}: expected all operands to have the same dtype, but got "
                               + " and ".join(o.dtype.name for o in operands))
    if boolean and first.name == "bool":
        return first
    if first.name not in _SUPPORTED:
        raise TypeError(f"{op}: {first.name} operands are not supported; matrix products take "
                        f"{', '.join(_SUPPORTED)} (convert with .to(...))")
    return get_dtype("int32") if first.name == "int8" else first


def _require_rank(op: str, name: str, x, rank: int) -> None:
    if len(x.shape) != rank:
        kind = {1: "a vector (1-D)", 2: "a matrix (2-D)", 3: "a 3-D tensor"}[rank]
        raise RuntimeError(f"{op}: {name} must be {kind}, got a {len(x.shape)}-D tensor of shape {_dims(x.shape)}")


def _require_inner(op: str, a_shape, b_shape, a_dim: int, b_dim: int) -> None:
    if a_shape[a_dim] != b_shape[b_dim]:
        raise RuntimeError(f"{op}: shapes {_dims(a_shape)} and {_dims(b_shape)} cannot be multiplied: dim {a_dim} of "
                           f"the first ({a_shape[a_dim]}) must equal dim {b_dim} of the second ({b_shape[b_dim]})")


def _matmul_shape(op: str, a_shape, b_shape) -> tuple:
    """torch.matmul's result shape for operands of these shapes (either at least 1-D)."""
    if len(a_shape) == 0 or len(b_shape) == 0:
        raise RuntimeError(f"{op}: both arguments need at least 1 dimension, got {len(a_shape)}-D and "
                           f"{len(b_shape)}-D tensors")
    a2 = (1, *a_shape) if len(a_shape) == 1 else tuple(a_shape)
    b2 = (*b_shape, 1) if len(b_shape) == 1 else tuple(b_shape)
    _require_inner(op, a_shape, b_shape, -1, 0 if len(b_shape) == 1 else -2)
    try:
        batch = S.broadcast_shapes(a2[:-2], b2[:-2])
    except (RuntimeError, ValueError):
        raise RuntimeError(f"{op}: batch dims of {_dims(a_shape)} and {_dims(b_shape)} do not broadcast "
                           f"({_dims(a2[:-2])} against {_dims(b2[:-2])})") from None
    shape = [*batch]
    if len(a_shape) > 1:
        shape.append(a2[-2])
    if len(b_shape) > 1:
        shape.append(b2[-1])
    return tuple(shape)


def _require_broadcastable(op: str, bias_shape, target) -> None:
    try:
        if S.broadcast_shapes(bias_shape, target) == tuple(target):
            return
    except (RuntimeError, ValueError):
        pass
    raise RuntimeError(f"{op}: input of shape {_dims(bias_shape)} does not broadcast to the product's "
                       f"shape {_dims(target)}")


def _product_cost(out_meta, flops, *inputs, products=()) -> Cost:
    """The cost of a product run as ``products``, each (batches, m, k, n) of one way ``_product`` may take
    it; the workspace is the most any of them takes (``_product_workspace``)."""
    return Cost(flops=flops, bytes_read=sum(nbytes(m) for m in inputs if m is not None),
                bytes_written=nbytes(out_meta),
                workspace=max((_product_workspace(out_meta.dtype, *shape) for shape in products), default=0))


def _product_workspace(dtype, batches: int, m: int, k: int, n: int) -> int:
    """The temporaries' bytes of a product of ``batches`` (m x k) by (k x n) matrices, the most any device
    takes (the rule knows none): a GEMV's split-K partials, or a float32 GEMM's bfloat16 planes (the
    widest chunk's, one buffer for all) and the chunk products they add up in. A float32 GEMM whose tuned
    form splits its tiles in registers takes none, the planes form these: a device may time either
    fastest, so the planes are declared."""
    if batches != 1 or not (m and k and n) or dtype.name in ("int64", "int16", "uint8", "bool"):
        # exact integer products (int32 results may be int8's, which a GEMV splits) take no temporaries
        return 0
    if m <= GEMV_MAX_ROWS:
        splits = max(min(shape[2], cdiv(k, _clamp_block(shape[1], _GEMV_MAX_BLOCK_K, k)))
                     for shape in (_GEMV_ONE_ROW_SHAPES if m == 1 else _GEMV_ROWS_SHAPES))
        return workspace_bytes(splits * m * n * 4) if splits > 1 else 0  # int32 or float32 partials
    if dtype.name != "float32":
        return 0
    width = _plane_chunk_width(m, n, k)
    return Workspace.bytes_for(_plane_pieces(m, n, width)) + (workspace_bytes(4 * m * n) if width < k else 0)


# ---- the launch -------------------------------------------------------------------------------------
# (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps), best-known shapes for large problems first; each is
# clamped to the facts' ceilings and to the problem, so small problems and small devices get small tiles
_GEMM_SHAPES = [
    (128, 256, 64, 3, 8), (256, 128, 64, 3, 8), (128, 256, 64, 4, 8), (128, 128, 64, 4, 8), (128, 128, 64, 3, 4),
    (128, 128, 64, 4, 4),
    (128, 64, 64, 4, 4), (64, 128, 64, 4, 4), (128, 128, 128, 3, 8), (64, 64, 64, 4, 4),
    (64, 64, 32, 4, 4), (32, 64, 64, 4, 4), (16, 128, 128, 4, 4), (32, 32, 32, 2, 4),
]


def _clamp_block(block: int, ceiling: int, extent: int) -> int:
    # tl.dot takes tiles of at least 16 along each dim
    return max(16, min(block, ceiling, next_pow2(extent)))


# true float32 products run on the FMA units, not the matrix unit: short K steps over large output tiles
_GEMM_FMA_SHAPES = [(128, 128, 16, 3, 8), (128, 64, 16, 3, 4), (64, 128, 16, 3, 4), (128, 128, 32, 2, 8),
                    (256, 64, 16, 3, 8), (64, 64, 32, 3, 4),
                    # smaller tiles for the N = 384 products of small encoders (4096 x 384: 96 tiles of
                    # 128 x 128 leave a third of 132 SMs idle); none spills registers on sm_90 (ptxas -v)
                    (64, 128, 32, 3, 4), (128, 64, 32, 3, 4), (64, 64, 16, 4, 2), (32, 128, 32, 3, 2),
                    (128, 128, 16, 4, 8)]

# Variants of ``gemm_tiles`` (one matrix, int32 indices): (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps,
# flags). PERSISTENT: one program per SM walks the tiles; TMA: operands through tensor descriptors
# (devices whose matrix unit is ``wgmma``, Hopper, or later); FLATTEN: the tile and K loops pipelined as one
# (the next tile's loads overlap this tile's epilogue); WARP_SPECIALIZE: Triton's automatic warp
# specialisation of the tile loop (not a candidate, below). Shapes as in _GEMM_SHAPES (K halved for 4-byte
# types).
_P, _T = dict(PERSISTENT=True), dict(TMA=True)
_PT = dict(PERSISTENT=True, TMA=True)
_GEMM_TILE_VARIANTS = [
    (128, 256, 64, 3, 8, _PT), (128, 256, 64, 4, 8, _PT), (128, 256, 64, 3, 8, dict(_PT, FLATTEN=True)),
    (128, 256, 64, 3, 8, _T), (256, 128, 64, 3, 8, _PT), (128, 128, 64, 4, 4, _PT),
    (128, 128, 64, 4, 4, dict(_PT, FLATTEN=True)), (128, 128, 64, 3, 4, _T), (128, 128, 64, 4, 8, _PT),
    (128, 256, 64, 3, 8, _P), (128, 128, 64, 3, 4, _P),
]
# Triton 3.6 documents automatic warp specialisation for Blackwell only; on sm_90 these compile (a
# producer warp group is added) but are unproven, so they are swept by the benchmark on request, not tuned
GEMM_WARP_SPECIALIZED = [dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=64, num_stages=3, num_warps=w, GROUP_M=GROUP_M,
                              PERSISTENT=True, TMA=True, WARP_SPECIALIZE=True) for bm, bn, w in ((128, 256, 8),
                                                                                              (128, 128, 4))]
# the same for true float32 (FMA units): persistent only (through descriptors, ptxas spills kilobytes)
_GEMM_FMA_TILE_VARIANTS = [(128, 128, 16, 3, 8, _P), (128, 64, 32, 3, 4, _P), (64, 128, 32, 3, 4, _P)]
# float32 tiles split into bfloat16 parts in registers (``PRECISION_BF16_PARTS``): the tile and its parts
# live in registers beside the accumulator, so tiles of 64 accumulator registers a thread (128 x 128 on 8
# warps, 64 x 128 on 4); ptxas for sm_90a spills none of these, and spills 40-270 bytes a thread at 128
# accumulators (128 x 256 on 8 warps, 128 x 128 on 4)
_GEMM_PARTS_SHAPES = [(128, 128, 32, 3, 8), (128, 128, 16, 4, 8), (64, 128, 32, 3, 4), (128, 64, 32, 4, 4),
                      (64, 256, 32, 3, 8), (64, 64, 32, 4, 4)]
_GEMM_PARTS_TILE_VARIANTS = [
    (128, 128, 32, 3, 8, _PT), (128, 128, 32, 4, 8, _PT), (128, 128, 32, 4, 8, dict(_PT, FLATTEN=True)),
    (64, 128, 32, 4, 4, _PT), (64, 128, 32, 4, 4, dict(_PT, FLATTEN=True)), (128, 64, 32, 4, 4, _PT),
    (64, 256, 32, 3, 8, _PT), (128, 128, 32, 3, 8, _P),
]
_TILE_FLAGS = ("PERSISTENT", "TMA", "FLATTEN", "WARP_SPECIALIZE")


# products under Triton's interpreter: tiles as wide as these (see gemm_candidates and gemv_candidates)
_INTERPRETED_BLOCK_M, _INTERPRETED_BLOCK_N, _INTERPRETED_BLOCK_K = 128, 1024, 512


def _has_tma(facts: dict) -> bool:
    return (facts.get("matrix_unit") or {}).get("instruction") in ("wgmma", "tcgen05")


def gemm_candidates(facts: dict, m: int, n: int, k: int, dtype, *, single: bool = False,
                    parts: bool = False) -> list[dict]:
    """The settings worth timing for an m x n x k product of ``dtype`` on a device with these facts;
    ``single`` (one matrix, int32 indices) adds the ``gemm_tiles`` variants (persistent, TMA); ``parts``:
    float32 tiles multiplied on the bfloat16 matrix unit as their parts (the matrix unit's tiles)."""
    if facts["kernels"].get("interpreted"):
        # as for the GEMV: the interpreter pays per program and operation, so one wide tile of the output
        # a program and long K steps (the main job's layers on the CPU: about 4x faster)
        return [dict(BLOCK_M=_clamp_block(_INTERPRETED_BLOCK_M, _INTERPRETED_BLOCK_M, m),
                     BLOCK_N=_clamp_block(_INTERPRETED_BLOCK_N, _INTERPRETED_BLOCK_N, n),
                     BLOCK_K=max(_clamp_block(_INTERPRETED_BLOCK_K, _INTERPRETED_BLOCK_K, k), 32 // dtype.itemsize),
                     num_stages=1, num_warps=1, GROUP_M=GROUP_M)]
    tiles = facts["tiles"]
    shared = facts.get("shared_memory_per_block_bytes")
    seen, out = set(), []
    fma = dtype.name == "float32" and _dot_precision(dtype) == "ieee" and not parts
    plain = _GEMM_PARTS_SHAPES if parts else _GEMM_SHAPES + (_GEMM_FMA_SHAPES if fma else [])
    variants = []
    if single and dtype.kind != "int" and not facts["kernels"].get("interpreted"):
        tma = _has_tma(facts)
        tiled = _GEMM_PARTS_TILE_VARIANTS if parts else _GEMM_FMA_TILE_VARIANTS if fma else _GEMM_TILE_VARIANTS
        variants = [s for s in tiled if tma or not s[5].get("TMA")]
        if tma and not fma and not parts:
            # on the H200 every half-precision product's best setting was a descriptor variant, the plain
            # kernel's best a few percent behind (docs/performance.md): the plain tiles that came closest stay
            # as the fallback, and a first call compiles a dozen settings rather than two dozen
            plain = _GEMM_SHAPES[:2] + [(128, 128, 64, 3, 4), (64, 128, 64, 4, 4)]
    shapes = [(*s, {}) for s in plain] + variants
    for bm, bn, bk, stages, warps, flags in shapes:
        if dtype.itemsize == 4 and bk > 32:
            bk //= 2  # float32 tiles take twice the shared memory and registers
        config = dict(BLOCK_M=_clamp_block(bm, tiles["max_block_m"], m),
                      BLOCK_N=_clamp_block(bn, tiles["max_block_n"], n),
                      # 8-bit operands multiply in K steps of 32 (the MMA shapes for int8)
                      BLOCK_K=max(_clamp_block(bk, tiles["max_block_k"], k), 32 // dtype.itemsize),
                      num_stages=min(stages, tiles["max_stages"]), num_warps=min(warps, tiles["max_warps"]),
                      GROUP_M=GROUP_M, **{f: True for f in _TILE_FLAGS if flags.get(f)})
        staged = (config["BLOCK_M"] + config["BLOCK_N"]) * config["BLOCK_K"] * dtype.itemsize * config["num_stages"]
        if shared and staged > shared:
            continue
        marker = tuple(sorted(config.items()))
        if marker not in seen:
            seen.add(marker)
            out.append(config)
    return out


# (BLOCK_N, BLOCK_K, SPLITS, num_warps[, num_stages: Triton's default when absent]); the first is what an
# untimed device uses. One row is a multiply-add over a [BLOCK_K, BLOCK_N] weight tile (no matrix unit), so
# long K tiles keep many bytes in flight; several rows go through tl.dot, with K tiles up to the same length
# (weight streaming wants bytes in flight more than square tiles), or more stages of shorter ones.
_GEMV_ONE_ROW_SHAPES = [(32, 256, 1, 4), (16, 512, 1, 4), (64, 256, 1, 8), (32, 512, 1, 8), (16, 256, 1, 4),
                        (64, 128, 1, 4), (32, 256, 2, 4), (128, 64, 1, 4), (64, 128, 4, 4)]
_GEMV_ROWS_SHAPES = [(64, 128, 1, 4), (128, 128, 1, 8), (64, 64, 1, 4), (32, 256, 1, 4), (64, 256, 1, 8),
                     (64, 128, 2, 4), (128, 128, 4, 8), (64, 128, 8, 4), (32, 128, 8, 4), (256, 64, 2, 8),
                     (16, 256, 1, 4), (32, 512, 1, 8), (16, 512, 1, 4),
                     (64, 128, 1, 4, 4), (64, 128, 1, 4, 5), (32, 256, 1, 4, 4), (64, 64, 1, 4, 6), (32, 128, 1, 4, 6)]
_GEMV_MAX_BLOCK_K = 512


def gemv_candidates(facts: dict, m: int, n: int, k: int) -> list[dict]:
    if facts["kernels"].get("interpreted"):
        # the interpreter pays per program and per operation far more than per element: few programs, each
        # reading a wide tile of the weight (a linear layer of the main job: 152 -> about 30 ms a call)
        return [dict(BLOCK_N=_clamp_block(_INTERPRETED_BLOCK_N, _INTERPRETED_BLOCK_N, n),
                     BLOCK_K=_clamp_block(_INTERPRETED_BLOCK_K, _INTERPRETED_BLOCK_K, k), SPLITS=1, num_warps=4)]
    tiles = facts["tiles"]
    seen, out = set(), []
    for bn, bk, splits, warps, *stages in _GEMV_ONE_ROW_SHAPES if m == 1 else _GEMV_ROWS_SHAPES:
        block_k = _clamp_block(bk, _GEMV_MAX_BLOCK_K, k)
        config = dict(BLOCK_N=_clamp_block(bn, tiles["max_block_n"], n), BLOCK_K=block_k,
                      SPLITS=max(1, min(splits, cdiv(k, block_k))), num_warps=min(warps, tiles["max_warps"]))
        if stages:  # small tiles: a stage count past the GEMM ceiling fits; one that does not is skipped
            config["num_stages"] = stages[0]
        marker = tuple(config.values())
        if marker not in seen:
            seen.add(marker)
            out.append(config)
    return out


def _operand_flags(dtype, out_dtype, bias, dev, facts) -> dict:
    acc = get_dtype("int32") if dtype.kind == "int" else get_dtype("float32")
    conversion = _conversion_flags(acc, out_dtype, dev)
    interpreted = bool(facts["kernels"].get("interpreted"))
    return dict(ACC=acc.triton, PRECISION=_dot_precision(dtype), INTERPRETED=interpreted,
                DECODE_BF16=dtype.name == "bfloat16" and interpreted,
                BIAS_FORMAT=SMALL_FLOAT_FORMATS.get(bias.dtype.name, FORMAT_NATIVE) if bias is not None
                else FORMAT_NATIVE,
                DST_FORMAT=conversion["DST_FORMAT"], VIA_F32=conversion["VIA_F32"])


def _gemv_launches(key, a, b, bias, out, m, n, k, alpha, beta, has_bias, scaled, flags, facts, dev, index_64):
    """``run(config, a, b, bias, out)`` for out (m x n, m <= 16) from a (m x k) and b (k x n), given here as
    2-D strided views of the tensors ``run`` later takes (which share their first elements), and the
    config tuned under launch ``key``."""
    block_m = 1 if m == 1 else GEMV_MAX_ROWS
    bias_sm, bias_sn = (bias.stride(0), bias.stride(1)) if has_bias else (0, 0)
    a_sm, a_sk, b_sk, b_sn, out_sm, out_sn = a.stride(0), a.stride(1), b.stride(0), b.stride(1), *out.stride()
    partial_dtype = get_dtype("int32" if out.dtype.kind == "int" else "float32")

    def launches_for(config):
        """``run(a, b, bias, out)`` for ``config``, its launches built once."""
        block_k, splits = config["BLOCK_K"], config["SPLITS"]
        k_per_split = cdiv(cdiv(k, splits), block_k) * block_k if k else block_k
        splits = max(1, cdiv(k, k_per_split))
        main = PlannedLaunch(
            K.gemv, (cdiv(n, config["BLOCK_N"]), splits),
            [Slot("a"), Slot("b"), Slot("bias"), Slot("out"), Slot("partial"), m, n, k, k_per_split, float(alpha),
             float(beta), a_sm, a_sk, b_sk, b_sn, bias_sm, bias_sn, out_sm, out_sn],
            dict(BLOCK_M=block_m, BLOCK_N=config["BLOCK_N"], BLOCK_K=block_k, SPLIT=splits > 1, HAS_BIAS=has_bias,
                 SCALED=scaled, INDEX_64=index_64, num_warps=config["num_warps"],
                 **({"num_stages": config["num_stages"]} if "num_stages" in config else {}), **flags))
        combine_n = min(config["BLOCK_N"], 64)
        combine = PlannedLaunch(
            K.gemv_combine, (cdiv(n, combine_n),),
            [Slot("partial"), Slot("bias"), Slot("out"), m, n, splits, float(alpha), float(beta), bias_sm, bias_sn,
             out_sm, out_sn],
            dict(BLOCK_M=next_pow2(m), BLOCK_N=combine_n, HAS_BIAS=has_bias, SCALED=scaled,
                 BIAS_FORMAT=flags["BIAS_FORMAT"], DST_FORMAT=flags["DST_FORMAT"], VIA_F32=flags["VIA_F32"],
                 num_warps=config["num_warps"])) if splits > 1 else None

        def run(a, b, bias, out):
            partial = scratch_tensor((splits, m, n), partial_dtype, dev) if combine is not None else out
            tensors = {"a": a, "b": b, "bias": bias if has_bias else out, "out": out, "partial": partial}
            main(dev, tensors)
            if combine is not None:
                combine(dev, tensors)
        return run

    config = tuning.choose_timed(key, facts, lambda: gemv_candidates(facts, m, n, k),
                                 lambda config: functools.partial(launches_for(config), a, b, bias, out))
    return launches_for(config)


_product_plans = PlanCache()


def _product(op: str, a: Tensor, b: Tensor, out_dtype, bias: Tensor | None = None, alpha=1, beta=0) -> Tensor:
    """alpha * (a @ b) + beta * bias for a (..., m, k) and b (..., k, n) whose batch dims broadcast, and
    ``bias`` broadcasting to the result; ``beta == 0`` ignores ``bias`` (NaN in it does not spread).
    ``out_dtype()`` gives the result's dtype (the op's meta rule, which checks the call): called only
    for layouts not planned yet, since the op and the operands' dtypes decide it and a planned call was
    checked."""
    key = (op, layout_key(a), layout_key(b), layout_key(bias), alpha, beta)
    plan = _product_plans.lookup(key)
    if plan is None:
        dev = a.device
        if b.device != dev or (bias is not None and bias.device != dev):
            raise RuntimeError(f"{op}: expected all tensors on one device, got {a.device} and "
                               f"{b.device if b.device != dev else bias.device}")
        dtype = out_dtype()
        plan = _product_plans.get(key, lambda: _plan_product(op, a, b, dtype, bias, alpha, beta))
    return plan(a, b, bias)


def gemm_key(facts: dict, batches: int, m: int, n: int, k: int, dtype, out_dtype, a_sk: int, b_sn: int, *,
             planes: bool = False) -> str:
    """``planes``: a float32 product on bfloat16 parts, whose candidates are its forms (``_plan_product``)."""
    flags = {"a_k_unit": a_sk == 1, "b_n_unit": b_sn == 1, **({"bf16_parts": True} if planes else {})}
    return tuning.launch_key("gemm", facts, rows={"B": batches, "M": m}, cols={"N": n, "K": k},
                             dtypes=(dtype, out_dtype), flags=flags)


def gemv_key(facts: dict, m: int, n: int, k: int, dtype, out_dtype, a_sk: int, b_sn: int) -> str:
    return tuning.launch_key("gemv", facts, rows={"M": m}, cols={"N": n, "K": k}, dtypes=(dtype, out_dtype),
                             flags={"a_k_unit": a_sk == 1, "b_n_unit": b_sn == 1})


def _product_route(a, b, out_dtype, bias, beta, facts: dict, planes: bool = True):
    """How ``_plan_product`` runs a product of operands laid out as these (tensors, or meta tensors for the
    key rules) on a device with these facts: (route, launch key or None), the route one of "empty",
    "exact" (untuned), "dense" (batch dims past ``MAX_BATCH_RANK``: contiguous copies), "gemv", "planes"
    (float32 on bfloat16 parts: split in registers or as planes in memory, as the key's setting says)
    and "gemm"."""
    m, k = a.shape[-2:]
    n = b.shape[-1]
    batch = S.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    out_shape = (*batch, m, n)
    if S.numel(out_shape) == 0:
        return "empty", None
    if a.dtype.name in _EXACT_INTEGER:
        return "exact", None
    has_bias = bias is not None and beta != 0
    bias_strides = S.broadcast_strides(bias.shape, bias.stride(), out_shape) if has_bias else (0,) * len(out_shape)
    shape_c, _ = S.coalesce(batch, S.broadcast_strides(a.shape[:-2], a.stride()[:-2], batch),
                            S.broadcast_strides(b.shape[:-2], b.stride()[:-2], batch), bias_strides[:-2],
                            S.contiguous_strides(out_shape)[:-2])
    if len(shape_c) > MAX_BATCH_RANK:
        return "dense", None
    batches = S.numel(shape_c)
    if batches == 1 and m <= GEMV_MAX_ROWS and k > 0:
        # every batch extent is 1 here, so these reshapes are views
        a2, b2 = a.reshape(m, k), b.reshape(k, n)
        return "gemv", gemv_key(facts, m, n, k, a.dtype, out_dtype, a2.stride(1), b2.stride(1))
    if planes and batches == 1 and k > 0 and _by_planes(a.dtype, facts):
        return "planes", gemm_key(facts, 1, m, n, k, a.dtype, out_dtype, a.stride(-1), b.stride(-1), planes=True)
    return "gemm", gemm_key(facts, batches, m, n, k, a.dtype, out_dtype, a.stride(-1), b.stride(-1))


def _meta(shape, dtype) -> Tensor:
    return new_tensor(shape, dtype, resolve("meta"))


def _product_keys(facts: dict, a, b, out_dtype, bias=None, alpha=1, beta=0) -> list[str]:
    """The launch keys ``_product`` forms for operands laid out as these (meta tensors will do); of a
    product on bfloat16 parts, its own and those of its planes form's GEMMs (which its tuning times)."""
    route, key = _product_route(a, b, out_dtype, bias, beta, facts)
    if route == "planes":
        return [key, *_plane_keys(facts, a, b, out_dtype, bias, alpha, beta)]
    if key is not None:
        return [key]
    if route == "dense":
        m, k = a.shape[-2:]
        n = b.shape[-1]
        batch = S.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        has_bias = bias is not None and beta != 0
        return _product_keys(facts, _meta((*batch, m, k), a.dtype), _meta((*batch, k, n), b.dtype), out_dtype,
                             _meta((*batch, m, n), bias.dtype) if has_bias else None, alpha, beta if has_bias else 0)
    return []


def _plane_keys(facts: dict, a, b, out_dtype, bias, alpha, beta) -> list[str]:
    """The launch keys of the bfloat16 GEMMs of a planes product (one a K chunk)."""
    (m, k), n = a.shape[-2:], b.shape[-1]
    has_bias = bias is not None and beta != 0
    keys = []
    for start, kc in _plane_chunks(m, n, k):
        pieces = {name: _meta(*piece) for name, piece in _plane_pieces(m, n, kc).items()}
        addend, weight = (_meta((m, n), bias.dtype), beta) if start == 0 and has_bias else \
            (None, 0) if start == 0 else (_meta((m, n), out_dtype), 1)
        keys += _product_keys(facts, pieces["a_planes"], pieces["b_planes"], out_dtype, addend, alpha, weight)
    return keys


def _plan_product(op: str, a: Tensor, b: Tensor, out_dtype, bias, alpha, beta, planes: bool = True):
    """``execute(a, b, bias) -> out`` for operands laid out as these are (tuning on them if needed);
    ``planes=False`` keeps a float32 product off bfloat16 planes (to sweep its own GEMM settings)."""
    dev = a.device
    m, k = a.shape[-2:]
    n = b.shape[-1]
    batch = S.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    out_shape = (*batch, m, n)
    facts = backend_for(dev).facts
    route, key = _product_route(a, b, out_dtype, bias, beta, facts, planes)
    if route == "empty":
        return lambda a, b, bias: new_tensor(out_shape, out_dtype, dev)
    out = new_tensor(out_shape, out_dtype, dev)
    has_bias = bias is not None and beta != 0
    exact = route == "exact"
    if exact and any(isinstance(scalar, float) for scalar in (alpha, beta)):
        raise RuntimeError(f"{op}: for integral input tensors, alpha and beta must be integers, got alpha={alpha!r} "
                           f"and beta={beta!r}")
    if out_dtype.kind == "int" and not exact and (alpha != 1 or has_bias):
        raise RuntimeError(f"{op}: alpha, beta and an added input are supported for float products only")
    scaled = alpha != 1 or (has_bias and beta != 1)
    a_bs = S.broadcast_strides(a.shape[:-2], a.stride()[:-2], batch)
    b_bs = S.broadcast_strides(b.shape[:-2], b.stride()[:-2], batch)
    if has_bias:
        bias_strides = S.broadcast_strides(bias.shape, bias.stride(), out.shape)
    else:
        bias_strides = (0,) * out.ndim
    shape_c, (a_bs, b_bs, bias_bs, out_bs) = S.coalesce(batch, a_bs, b_bs, bias_strides[:-2], out.stride()[:-2])
    if route == "dense":
        return lambda a, b, bias: _product(
            op, a.expand(*batch, m, k).contiguous(), b.expand(*batch, k, n).contiguous(), lambda: out_dtype,
            bias.expand(*out_shape).contiguous() if has_bias else None, alpha, beta if has_bias else 0)
    index_64 = needs_index_64(a, b, out, *([bias] if has_bias else []))
    if exact:
        return _exact_launches(a, b, out, m, n, k, alpha, beta, has_bias, scaled, bias_strides,
                               *_pad_batch(shape_c, a_bs, b_bs, bias_bs, out_bs), index_64)
    flags = _operand_flags(a.dtype, out_dtype, bias if has_bias else None, dev, facts)
    batches = S.numel(shape_c)
    a_sm, a_sk = a.stride()[-2:]
    b_sk, b_sn = b.stride()[-2:]
    if route == "gemv":
        bias2 = bias.expand(*out.shape).reshape(m, n) if has_bias else None
        run_gemv = _gemv_launches(key, a.reshape(m, k), b.reshape(k, n), bias2, out.view(m, n), m, n, k, alpha, beta,
                                  has_bias, scaled, flags, facts, dev, index_64)

        fresh_output = fresh_tensor_maker(out_shape, out_dtype, dev)

        def execute_gemv(a, b, bias):
            out = fresh_output()
            run_gemv(a, b, bias, out)
            return out
        return execute_gemv
    parts = route == "planes"
    if parts:
        # float32 tiles split into bfloat16 parts in the GEMM; the interpreter multiplies the parts as the
        # float32 values holding them (``kernels/matmul.py``)
        flags = dict(flags, PRECISION=K.PRECISION_BF16_PARTS.value, DECODE_BF16=flags["INTERPRETED"])
    shape_c, a_bs, b_bs, bias_bs, out_bs = _pad_batch(shape_c, a_bs, b_bs, bias_bs, out_bs)
    bias_sm, bias_sn = bias_strides[-2:]
    out_sm, out_sn = out.stride()[-2:]

    single = batches == 1 and not index_64

    def launches_for(config):
        """``run(a, b, bias, out)`` for ``config``, its launches (one per MAX_GRID_Y batches) built once."""
        if config.get("PLANES"):
            return _staged_planes(op, a, b, bias if has_bias else None, alpha, beta if has_bias else 0, out_shape)
        if single and any(config.get(f) for f in _TILE_FLAGS):
            return _tile_launches(config, dev, facts, m, n, k, float(alpha), float(beta), a.dtype, has_bias, scaled,
                                  flags, (a_sm, a_sk, b_sk, b_sn, bias_sm, bias_sn, out_sm, out_sn))
        tiles = cdiv(m, config["BLOCK_M"]) * cdiv(n, config["BLOCK_N"])
        constexprs = dict(BATCH_RANK=len(shape_c), BLOCK_M=config["BLOCK_M"], BLOCK_N=config["BLOCK_N"],
                          BLOCK_K=config["BLOCK_K"], GROUP_M=config["GROUP_M"], EVEN_K=k % config["BLOCK_K"] == 0,
                          HAS_BIAS=has_bias, SCALED=scaled, INDEX_64=index_64, num_warps=config["num_warps"],
                          num_stages=config["num_stages"], **_with_precision(flags, config))
        launches = [PlannedLaunch(K.gemm, (tiles, min(MAX_GRID_Y, batches - start)),
                                  [Slot("a"), Slot("b"), Slot("bias"), Slot("out"), m, n, k, start, float(alpha),
                                   float(beta), shape_c, a_bs, b_bs, bias_bs, out_bs, a_sm, a_sk, b_sk, b_sn, bias_sm,
                                   bias_sn, out_sm, out_sn], constexprs)
                    for start in range(0, batches, MAX_GRID_Y)]

        def run(a, b, bias, out):
            tensors = {"a": a, "b": b, "bias": bias if has_bias else out, "out": out}
            for planned in launches:
                planned(dev, tensors)
        return run

    def candidates():
        if parts:  # the one-launch form's tiles, then the planes form
            return gemm_candidates(facts, m, n, k, a.dtype, single=single, parts=True) + [dict(PLANES=True)]
        return gemm_candidates(facts, m, n, k, a.dtype, single=single)
    if _sweep is not None:
        _sweep(key, candidates, launches_for, (a, b, bias, out))
    config = tuning.choose_timed(key, facts, candidates,
                                 lambda config: functools.partial(launches_for(config), a, b, bias, out))
    run = launches_for(config)
    fresh_output = fresh_tensor_maker(out_shape, out_dtype, dev)

    def execute(a, b, bias, out=None):
        """``out``: where to write (laid out as the plan's output), else a fresh tensor."""
        out = fresh_output() if out is None else out
        run(a, b, bias, out)
        return out
    return execute


def _by_planes(dtype, facts: dict) -> bool:
    """Whether a float32 product runs on bfloat16 planes here (``_CudaMatmulFlags.float32_planes``)."""
    return (dtype.name == "float32" and _precision["float32"] == "highest" and backends.cuda.matmul.float32_planes
            and "bfloat16" in (facts.get("matrix_unit") or {}).get("dtypes", ()))


# six parts a product, in ``kernels/matmul.py``'s order (small terms first)
_A_PLANES = (K.PART_LOW, K.PART_HIGH_FINITE, K.PART_MID, K.PART_MID, K.PART_HIGH_FINITE, K.PART_HIGH)
_B_PLANES = (K.PART_HIGH_FINITE, K.PART_LOW, K.PART_MID, K.PART_HIGH_FINITE, K.PART_MID, K.PART_HIGH)
_PLANE_BLOCK = 1024
_PLANE_WORKSPACE_FLOOR = 32 << 20


def _plane_chunk_width(m: int, n: int, k: int) -> int:
    """The K chunk of a planes product: a multiple of 64 (plane rows keep descriptors' 16-byte alignment)
    such that a chunk's planes, three times the bytes of its float32 slices, fit in the larger of the
    operands' own bytes and 32 MiB."""
    budget = max(4 * (m * k + k * n), _PLANE_WORKSPACE_FLOOR)
    chunks = max(1, cdiv(12 * (m * k + k * n), budget))
    return min(k, cdiv(cdiv(k, chunks), 64) * 64)


def _plane_chunks(m: int, n: int, k: int):
    """(start, width) of each K chunk of a planes product."""
    width = _plane_chunk_width(m, n, k)
    return [(start, min(width, k - start)) for start in range(0, k, width)]


def _plane_pieces(m: int, n: int, kc: int) -> dict:
    """The ``Workspace`` pieces of the planes of a K chunk ``kc`` wide: six bfloat16 parts of each operand."""
    bfloat16 = get_dtype("bfloat16")
    return {"a_planes": ((m, 6 * kc), bfloat16), "b_planes": ((6 * kc, n), bfloat16)}


def _staged_planes(op: str, a: Tensor, b: Tensor, bias: Tensor | None, alpha, beta, out_shape: tuple):
    """``run(a, b, bias, out)`` through planes in memory (``_planes_launches``) for operands laid out as these,
    every batch extent 1 (``bias`` None when beta is 0): the planes form of a product on bfloat16 parts."""
    (m, k), n = a.shape[-2:], b.shape[-1]

    def as_matrices(a, b, bias):
        # every batch extent is 1: reshapes are views, and 2-D operands need none
        return (a if a.ndim == 2 else a.reshape(m, k), b if b.ndim == 2 else b.reshape(k, n),
                None if bias is None else bias if bias.shape == (m, n) else bias.expand(*out_shape).reshape(m, n))
    run_planes = _planes_launches(op, *as_matrices(a, b, bias), alpha, beta, a.device)

    def run(a, b, bias, out):
        run_planes(*as_matrices(a, b, bias if beta != 0 else None), out if out.ndim == 2 else out.view(m, n))
    return run


def _planes_launches(op: str, a: Tensor, b: Tensor, bias: Tensor | None, alpha, beta, dev):
    """``run(a, b, bias, out)`` for a float32 m x k by k x n product laid out as these 2-D views are
    (``bias`` m x n, or None when beta is 0), through bfloat16 planes, K in chunks (``_plane_chunk_width``),
    each chunk's product added to the last through the GEMM's epilogue. Launches and the chunks' products
    are planned here. A call takes one buffer for every chunk's planes (the chunks run one after another)
    and, past one chunk, one m x n temporary: the chunks' products alternate between it and the output, so
    that the last lands in the output."""
    (m, k), n = a.shape, b.shape[1]
    float32 = get_dtype("float32")
    steps = []
    for start, kc in _plane_chunks(m, n, k):
        # both operands' planes in one allocation a call
        workspace = Workspace(_plane_pieces(m, n, kc))
        planes: dict = {}
        workspace.allocate(dev, planes)
        splits = [
            PlannedLaunch(K.split_bf16_planes, (cdiv(rows * cols, _PLANE_BLOCK),),
                          [Slot(name), Slot(f"{name}_planes"), rows, cols, *x.stride(), split.stride(0), step],
                          dict({f"P{j}": part for j, part in enumerate(parts)}, BLOCK=_PLANE_BLOCK,
                               INDEX_64=needs_index_64(x, split)))
            for name, x, split, rows, cols, step, parts in (("a", a, planes["a_planes"], m, kc, kc, _A_PLANES),
                                                            ("b", b, planes["b_planes"], kc, n, kc * n, _B_PLANES))]
        addend, weight = (bias, beta) if start == 0 else (new_tensor((m, n), float32, dev), 1)
        product = _plan_product(op, planes["a_planes"], planes["b_planes"], float32, addend if weight != 0 else None,
                                alpha, weight)
        steps.append((start, kc, splits, workspace, product, weight))

    planes_bytes = max(workspace.nbytes for _, _, _, workspace, _, _ in steps)
    uint8 = get_dtype("uint8")

    def run(a, b, bias, out):
        buffer = scratch_tensor((planes_bytes,), uint8, dev)
        spare = scratch_tensor((m, n), float32, dev) if len(steps) > 1 else None
        last = None
        for index, (start, kc, splits, workspace, product, weight) in enumerate(steps):
            whole = not start and kc == k
            tensors = {"a": a if whole else a[:, start:start + kc], "b": b if whole else b[start:start + kc]}
            workspace.carve(buffer, tensors)
            for planned in splits:
                planned(dev, tensors)
            addend = (bias if weight != 0 else None) if last is None else last
            # an even number of chunks still to come after this one: this one writes the output
            last = product(tensors["a_planes"], tensors["b_planes"], addend,
                           out if (len(steps) - 1 - index) % 2 == 0 else spare)
    return run


def _with_precision(flags: dict, config: dict) -> dict:
    """The operand flags, with the dot precision a config may name (benchmark sweeps of emulated float32
    only: tuning candidates never name one, so float32 stays true float32 unless the user opts out)."""
    return dict(flags, PRECISION=config["PRECISION"]) if "PRECISION" in config else flags


def _tma_layout(dtype, a_sm, a_sk, b_sk, b_sn):
    """Whether tensor descriptors can read a and b laid out with these strides (the last dim contiguous,
    the other stride a multiple of 16 bytes), and whether b is read K-major; (False, False) when not."""
    def aligned(stride):
        return (stride * dtype.itemsize) % 16 == 0 and stride > 0
    if a_sk != 1 or not aligned(a_sm):
        return False, False
    if b_sk == 1 and aligned(b_sn):
        return True, True
    if b_sn == 1 and aligned(b_sk):
        return True, False
    return False, False


def _exact_launches(a, b, out, m, n, k, alpha, beta, has_bias, scaled, bias_strides, shape_c, a_bs, b_bs, bias_bs,
                    out_bs, index_64):
    """``execute(a, b, bias) -> out`` through ``gemm_exact``: integer products summed exactly in int64 (the
    matrix unit takes no int64 operands, and int32 ones on few targets), one launch per MAX_GRID_Y batches.
    Its tiles are fixed (a tile's K x int64 partial products live in registers), not tuned."""
    dev = a.device
    batches = S.numel(shape_c)
    block_m, block_n, block_k = (max(2, min(limit, next_pow2(extent)))
                                 for limit, extent in zip(_EXACT_TILE, (m, n, k)))
    tiles = cdiv(m, block_m) * cdiv(n, block_n)
    constexprs = dict(BATCH_RANK=len(shape_c), BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, HAS_BIAS=has_bias,
                      SCALED=scaled, INDEX_64=index_64, INTERPRETED=bool(backend_for(dev).facts["kernels"].get(
                          "interpreted")), num_warps=4)
    (a_sm, a_sk), (b_sk, b_sn) = a.stride()[-2:], b.stride()[-2:]
    launches = [PlannedLaunch(K.gemm_exact, (tiles, min(MAX_GRID_Y, batches - start)),
                              [Slot("a"), Slot("b"), Slot("bias"), Slot("out"), m, n, k, start, int(alpha), int(beta),
                               shape_c, a_bs, b_bs, bias_bs, out_bs, a_sm, a_sk, b_sk, b_sn, *bias_strides[-2:],
                               *out.stride()[-2:]], constexprs)
                for start in range(0, batches, MAX_GRID_Y)]
    fresh_output = fresh_tensor_maker(out.shape, out.dtype, dev)

    def execute(a, b, bias):
        out = fresh_output()
        tensors = {"a": a, "b": b, "bias": bias if has_bias else out, "out": out}
        for planned in launches:
            planned(dev, tensors)
        return out
    return execute


def _tile_launches(config, dev, facts, m, n, k, alpha, beta, dtype, has_bias, scaled, flags, strides):
    """``run(a, b, bias, out)`` through ``gemm_tiles`` for one matrix. A TMA config whose operands cannot
    be read by descriptors (strides here, or an address off 16 bytes at a call) reads through pointers."""
    a_sm, a_sk, b_sk, b_sn, bias_sm, bias_sn, out_sm, out_sn = strides
    tiles = cdiv(m, config["BLOCK_M"]) * cdiv(n, config["BLOCK_N"])
    programs = min(tiles, multiprocessors(dev)) if config.get("PERSISTENT") else tiles
    tma, b_k_major = _tma_layout(dtype, a_sm, a_sk, b_sk, b_sn) if config.get("TMA") else (False, False)

    def planned(use_tma):
        constexprs = dict(BLOCK_M=config["BLOCK_M"], BLOCK_N=config["BLOCK_N"], BLOCK_K=config["BLOCK_K"],
                          GROUP_M=config["GROUP_M"], TMA=use_tma, B_K_MAJOR=use_tma and b_k_major,
                          FLATTEN=bool(config.get("FLATTEN")), WARP_SPECIALIZE=bool(config.get("WARP_SPECIALIZE")),
                          EVEN_K=k % config["BLOCK_K"] == 0, HAS_BIAS=has_bias, SCALED=scaled,
                          num_warps=config["num_warps"], num_stages=config["num_stages"],
                          **_with_precision(flags, config))
        return PlannedLaunch(K.gemm_tiles, (programs,),
                             [Slot("a"), Slot("b"), Slot("bias"), Slot("out"), m, n, k, programs, alpha, beta,
                              a_sm, a_sk, b_sk, b_sn, bias_sm, bias_sn, out_sm, out_sn], constexprs)
    launch = planned(tma)
    fallback = planned(False) if tma else None

    def run(a, b, bias, out):
        tensors = {"a": a, "b": b, "bias": bias if has_bias else out, "out": out}
        if fallback is not None and (a.data_ptr() | b.data_ptr()) & 15:
            fallback(dev, tensors)
            return
        launch(dev, tensors)
    return run


# set by ``gemm_sweep`` while it plans a product: called with (key, candidates, launches_for, operands)
_sweep = None


class _Observed(Exception):
    """Stops ``_plan_product`` once ``gemm_sweep`` has what it needs (before any tuning)."""


def gemm_sweep(op: str, a: Tensor, b: Tensor, bias: Tensor | None = None, alpha=1, beta=0, *, configs=None,
               extra=(), check=None, timed: bool = True) -> dict:
    """The GEMM settings of the launch key of ``a @ b`` (2-D or batched, as ``_product`` takes them), each
    run on the device: {"key", "candidates" (the tuner's), "chosen" (the cached setting, if tuned), "rows":
    [{"config", "extra", "ms" (None when it failed to build or run, or untimed), "error", "check"}] fastest
    first}. ``configs`` replaces the tuner's candidates; ``extra`` settings are run too (e.g. a
    ``PRECISION`` of emulated float32, which no tuning candidate names); ``check(out)`` is called on each
    setting's output; ``timed=False`` runs each once (to compile it). Nothing is tuned or stored."""
    global _sweep
    from ..tuning.timing import device_time_ms
    found = {}

    def observe(key, candidates, launches_for, operands):
        found.update(key=key, candidates=candidates(), launches_for=launches_for, operands=operands)
        raise _Observed
    _sweep = observe
    try:
        out_dtype = get_dtype("int32") if a.dtype.name == "int8" else a.dtype
        _plan_product(op, a, b, out_dtype, bias, alpha, beta, planes=False)
    except _Observed:
        pass
    finally:
        _sweep = None
    if not found:
        raise RuntimeError(f"{op}: no GEMM launch for shapes {_dims(a.shape)} and {_dims(b.shape)} (GEMV rows?)")
    rows = []
    chosen = found["candidates"] if configs is None else configs
    for config, is_extra in [(dict(c), False) for c in chosen] + [(dict(c), True) for c in extra]:
        row = dict(config=config, extra=is_extra, ms=None, error=None, check=None)
        try:
            run = found["launches_for"](config)
            if timed:
                row["ms"] = float(device_time_ms(lambda: run(*found["operands"])))
            else:
                run(*found["operands"])
            if check is not None:
                row["check"] = check(found["operands"][3])
        except Exception as e:  # noqa: BLE001  (a setting that does not build or fit is reported, not fatal)
            text = str(e).strip().splitlines()
            row["error"] = f"{type(e).__name__}: {text[-1][:200] if text else ''}"
        rows.append(row)
    rows.sort(key=lambda r: (r["ms"] is None, r["ms"] or 0.0))
    entry = tuning.entries(a.device).get(found["key"])
    return dict(key=found["key"], candidates=found["candidates"], chosen=None if entry is None else entry["config"],
                rows=rows)


def _pad_batch(shape, *stride_sets):
    if shape:
        return (tuple(shape), *(tuple(s) for s in stride_sets))
    return ((1,), *((0,) for _ in stride_sets))


def _bias_meta(op: str, bias, out_meta) -> None:
    if bias.dtype is not out_meta.dtype:
        raise RuntimeError(f"{op}: expected input to have the operands' dtype {out_meta.dtype.name}, "
                           f"got {bias.dtype.name}")
    _require_broadcastable(op, tuple(bias.shape), tuple(out_meta.shape))


def _flops(*extents) -> int:
    return 2 * math.prod(extents)


# ---- mm, bmm, matmul ---------------------------------------------------------------------------------
def _mm_meta(input, mat2):
    _require_rank("mm", "self", input, 2)
    _require_rank("mm", "mat2", mat2, 2)
    dtype = _result_dtype("mm", input, mat2)
    _require_inner("mm", tuple(input.shape), tuple(mat2.shape), -1, -2)
    return TensorMeta((input.shape[0], mat2.shape[1]), dtype)


def _mm_cost(input, mat2):
    out = _mm_meta(input, mat2)
    return _product_cost(out, _flops(*input.shape, mat2.shape[1]), input, mat2,
                         products=[(1, *input.shape, mat2.shape[1])])


def _mm_key(facts, input, mat2):
    return _product_keys(facts, input, mat2, _mm_meta(input, mat2).dtype)


@register("mm", family="matmul", aten=["aten::mm.default"], meta=_mm_meta, cost=_mm_cost, methods=("mm",),
          key=_mm_key)
def mm(input: Tensor, mat2: Tensor) -> Tensor:
    """Matrix product of two matrices."""
    return _product("mm", input, mat2, lambda: _mm_meta(input, mat2).dtype)


def _bmm_meta(input, mat2):
    _require_rank("bmm", "self", input, 3)
    _require_rank("bmm", "mat2", mat2, 3)
    dtype = _result_dtype("bmm", input, mat2)
    if input.shape[0] != mat2.shape[0]:
        raise RuntimeError(f"bmm: batch sizes differ: dim 0 of {_dims(input.shape)} ({input.shape[0]}) must equal "
                           f"dim 0 of {_dims(mat2.shape)} ({mat2.shape[0]})")
    _require_inner("bmm", tuple(input.shape), tuple(mat2.shape), -1, -2)
    return TensorMeta((input.shape[0], input.shape[1], mat2.shape[2]), dtype)


def _bmm_cost(input, mat2):
    out = _bmm_meta(input, mat2)
    return _product_cost(out, _flops(*input.shape, mat2.shape[2]), input, mat2,
                         products=[(*input.shape, mat2.shape[2])])


def _bmm_key(facts, input, mat2):
    return _product_keys(facts, input, mat2, _bmm_meta(input, mat2).dtype)


@register("bmm", family="matmul", aten=["aten::bmm.default"], meta=_bmm_meta, cost=_bmm_cost, methods=("bmm",),
          key=_bmm_key)
def bmm(input: Tensor, mat2: Tensor) -> Tensor:
    """Batched matrix product of two 3-D tensors with the same batch size."""
    return _product("bmm", input, mat2, lambda: _bmm_meta(input, mat2).dtype)


def _matmul_meta(input, other):
    dtype = _result_dtype("matmul", input, other)
    return TensorMeta(_matmul_shape("matmul", tuple(input.shape), tuple(other.shape)), dtype)


def _matmul_cost(input, other):
    out = _matmul_meta(input, other)
    k = input.shape[-1]
    return _product_cost(out, 2 * S.numel(out.shape) * k, input, other,
                         products=_matmul_products(input.shape, other.shape))


def _matmul_products(a_shape, b_shape) -> list:
    """The (batches, m, k, n) ways ``_matmul`` may run a product of operands of these shapes: as one tall
    product when a batched left operand's rows merge, else batch by batch."""
    a = (1, *a_shape) if len(a_shape) == 1 else tuple(a_shape)
    b = (*b_shape, 1) if len(b_shape) == 1 else tuple(b_shape)
    batches = S.numel(S.broadcast_shapes(a[:-2], b[:-2]))
    ways = [(batches, a[-2], a[-1], b[-1])]
    if len(b) == 2 and len(a) > 2:
        ways.append((1, S.numel(a[:-1]), a[-1], b[-1]))
    return ways


def _fold_rows(x: Tensor) -> Tensor | None:
    """``x`` (..., k) as one (rows, k) matrix view, when its leading dims merge without a copy."""
    lead, (strides,) = S.coalesce(x.shape[:-1], x.stride()[:-1])
    if len(lead) > 1:
        return None
    rows = S.numel(x.shape[:-1])
    return x.as_strided((rows, x.shape[-1]), (strides[0] if lead else 0, x.stride(-1)))


def _matmul(op: str, a: Tensor, b: Tensor, out_dtype, bias=None, alpha=1, beta=0) -> Tensor:
    """torch.matmul's rank rules: vectors gain a dim that the result drops; batch dims broadcast; a batched
    left operand against one matrix becomes one tall product when its rows merge. ``out_dtype()`` gives
    the result's dtype, as for ``_product``: called for layouts not planned yet only."""
    key = (op, layout_key(a), layout_key(b), layout_key(bias), alpha, beta)
    plan = _matmul_plans.lookup(key)
    if plan is None:
        dtype = out_dtype()
        out_shape = tuple(_matmul_shape(op, tuple(a.shape), tuple(b.shape)))
        plan = _matmul_plans.get(key, lambda: functools.partial(_ranked_product, op, out_shape, lambda: dtype))
    return plan(a, b, bias, alpha, beta)


_matmul_plans = PlanCache()


def _ranked_product(op: str, out_shape: tuple, out_dtype, a: Tensor, b: Tensor, bias, alpha, beta) -> Tensor:
    """``_matmul`` for a call whose result shape is known (``out_shape``)."""
    a2, b2, bias2 = _ranked_operands(a, b, bias, beta, out_shape)
    return _product(op, a2, b2, out_dtype, bias2, alpha, beta).view(out_shape)


def _ranked_operands(a, b, bias, beta, out_shape: tuple) -> tuple:
    """The operands ``_ranked_product`` hands ``_product`` (views of these): vectors as matrices, a batched left
    operand's rows folded into one matrix against a matrix where they merge."""
    a2 = a.unsqueeze(0) if a.ndim == 1 else a
    b2 = b.unsqueeze(-1) if b.ndim == 1 else b
    if b2.ndim == 2 and a2.ndim > 2:
        folded = _fold_rows(a2)
        if folded is not None:
            flat_bias = None
            if bias is not None and beta != 0:
                flat_bias = _fold_rows(bias.expand(*a2.shape[:-1], b2.shape[-1]))
            if bias is None or beta == 0 or flat_bias is not None:
                return folded, b2, flat_bias
    if bias is not None and beta != 0:
        bias = bias.expand(*out_shape)
        if a.ndim == 1:
            bias = bias.unsqueeze(-2)
        if b.ndim == 1:
            bias = bias.unsqueeze(-1)
    return a2, b2, bias


def _matmul_keys(facts: dict, op: str, a, b, out_dtype, bias=None, alpha=1, beta=0) -> list[str]:
    """The launch keys ``_matmul`` forms for operands laid out as these."""
    out_shape = tuple(_matmul_shape(op, tuple(a.shape), tuple(b.shape)))
    a2, b2, bias2 = _ranked_operands(a, b, bias, beta, out_shape)
    return _product_keys(facts, a2, b2, out_dtype, bias2, alpha, beta)


def _matmul_key(facts, input, other):
    return _matmul_keys(facts, "matmul", input, other, _matmul_meta(input, other).dtype)


@register("matmul", family="matmul", aten=["aten::matmul.default"], meta=_matmul_meta, cost=_matmul_cost,
          methods=("matmul", "__matmul__"), key=_matmul_key)
def matmul(input: Tensor, other: Tensor) -> Tensor:
    """torch.matmul: dot, matrix-vector, matrix and batched products by rank, batch dims broadcasting."""
    return _matmul("matmul", input, other, lambda: _matmul_meta(input, other).dtype)


def _rmatmul(self: Tensor, other: Tensor) -> Tensor:
    return matmul.impl(other, self)


Tensor.__rmatmul__ = _rmatmul


# ---- with an added input: addmm, baddbmm, addmv, addr -----------------------------------------------
def _addmm_meta(input, mat1, mat2, *, beta=1, alpha=1):
    out = _mm_meta(mat1, mat2)
    _bias_meta("addmm", input, out)
    return out


def _addmm_cost(input, mat1, mat2, *, beta=1, alpha=1):
    out = _addmm_meta(input, mat1, mat2)
    return _product_cost(out, _flops(*mat1.shape, mat2.shape[1]), input, mat1, mat2,
                         products=[(1, *mat1.shape, mat2.shape[1])])


def _addmm_key(facts, input, mat1, mat2, *, beta=1, alpha=1):
    return _product_keys(facts, mat1, mat2, _addmm_meta(input, mat1, mat2).dtype, input, alpha, beta)


@register("addmm", family="matmul", aten=["aten::addmm.default"], meta=_addmm_meta, cost=_addmm_cost,
          methods=("addmm",), key=_addmm_key)
def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """beta * input + alpha * (mat1 @ mat2), input broadcasting to the product; beta=0 ignores input."""
    return _product("addmm", mat1, mat2, lambda: _addmm_meta(input, mat1, mat2).dtype, input, alpha, beta)


def _baddbmm_meta(input, batch1, batch2, *, beta=1, alpha=1):
    out = _bmm_meta(batch1, batch2)
    _bias_meta("baddbmm", input, out)
    return out


def _baddbmm_cost(input, batch1, batch2, *, beta=1, alpha=1):
    out = _baddbmm_meta(input, batch1, batch2)
    return _product_cost(out, _flops(*batch1.shape, batch2.shape[2]), input, batch1, batch2,
                         products=[(*batch1.shape, batch2.shape[2])])


def _baddbmm_key(facts, input, batch1, batch2, *, beta=1, alpha=1):
    return _product_keys(facts, batch1, batch2, _baddbmm_meta(input, batch1, batch2).dtype, input, alpha, beta)


@register("baddbmm", family="matmul", aten=["aten::baddbmm.default"], meta=_baddbmm_meta, cost=_baddbmm_cost,
          methods=("baddbmm",), key=_baddbmm_key)
def baddbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """beta * input + alpha * bmm(batch1, batch2)."""
    return _product("baddbmm", batch1, batch2, lambda: _baddbmm_meta(input, batch1, batch2).dtype, input, alpha,
                    beta)


def _mv_meta(input, vec):
    _require_rank("mv", "self", input, 2)
    _require_rank("mv", "vec", vec, 1)
    dtype = _result_dtype("mv", input, vec)
    _require_inner("mv", tuple(input.shape), tuple(vec.shape), -1, 0)
    return TensorMeta((input.shape[0],), dtype)


def _mv_cost(input, vec):
    return _product_cost(_mv_meta(input, vec), _flops(*input.shape), input, vec, products=[(1, *input.shape, 1)])


def _mv_key(facts, input, vec):
    return _matmul_keys(facts, "mv", input, vec, _mv_meta(input, vec).dtype)


@register("mv", family="matmul", aten=["aten::mv.default"], meta=_mv_meta, cost=_mv_cost, methods=("mv",),
          key=_mv_key)
def mv(input: Tensor, vec: Tensor) -> Tensor:
    """Matrix times vector."""
    return _matmul("mv", input, vec, lambda: _mv_meta(input, vec).dtype)


def _addmv_meta(input, mat, vec, *, beta=1, alpha=1):
    out = _mv_meta(mat, vec)
    _bias_meta("addmv", input, out)
    return out


def _addmv_cost(input, mat, vec, *, beta=1, alpha=1):
    return _product_cost(_addmv_meta(input, mat, vec), _flops(*mat.shape), input, mat, vec,
                         products=[(1, *mat.shape, 1)])


def _addmv_key(facts, input, mat, vec, *, beta=1, alpha=1):
    return _matmul_keys(facts, "addmv", mat, vec, _addmv_meta(input, mat, vec).dtype, input, alpha, beta)


@register("addmv", family="matmul", aten=["aten::addmv.default"], meta=_addmv_meta, cost=_addmv_cost,
          methods=("addmv",), key=_addmv_key)
def addmv(input: Tensor, mat: Tensor, vec: Tensor, *, beta=1, alpha=1) -> Tensor:
    """beta * input + alpha * (mat @ vec)."""
    return _matmul("addmv", mat, vec, lambda: _addmv_meta(input, mat, vec).dtype, input, alpha, beta)


def _outer_meta(input, vec2):
    _require_rank("outer", "self", input, 1)
    _require_rank("outer", "vec2", vec2, 1)
    return TensorMeta((input.shape[0], vec2.shape[0]), _result_dtype("outer", input, vec2, boolean=True))


def _outer_cost(input, vec2):
    out = _outer_meta(input, vec2)
    return _product_cost(out, S.numel(out.shape), input, vec2, products=[(1, input.shape[0], 1, vec2.shape[0])])


def _outer_key(facts, input, vec2):
    dtype = _outer_meta(input, vec2).dtype
    return [] if dtype.name == "bool" else _product_keys(facts, input.unsqueeze(1), vec2.unsqueeze(0), dtype)


@register("outer", family="matmul", aten=["aten::outer.default"], meta=_outer_meta, cost=_outer_cost,
          api=("outer", "ger"), methods=("outer", "ger"), key=_outer_key)
def outer(input: Tensor, vec2: Tensor) -> Tensor:
    """Outer product of two vectors (a product with an inner extent of 1)."""
    dtype = _outer_meta(input, vec2).dtype
    if dtype.name == "bool":
        return input.unsqueeze(1).logical_and(vec2.unsqueeze(0))
    return _product("outer", input.unsqueeze(1), vec2.unsqueeze(0), lambda: dtype)


def _addr_meta(input, vec1, vec2, *, beta=1, alpha=1):
    out = _outer_meta(vec1, vec2)
    _bias_meta("addr", input, out)
    return out


def _addr_cost(input, vec1, vec2, *, beta=1, alpha=1):
    out = _addr_meta(input, vec1, vec2)
    cost = _product_cost(out, 2 * S.numel(out.shape), input, vec1, vec2,
                         products=[(1, vec1.shape[0], 1, vec2.shape[0])])
    if out.dtype.name == "bool" and beta:
        # the outer product, a temporary before it is or-ed with the input
        return dataclasses.replace(cost, workspace=workspace_bytes(nbytes(out)))
    return cost


def _addr_key(facts, input, vec1, vec2, *, beta=1, alpha=1):
    dtype = _addr_meta(input, vec1, vec2).dtype
    if dtype.name == "bool":
        return []
    return _product_keys(facts, vec1.unsqueeze(1), vec2.unsqueeze(0), dtype, input, alpha, beta)


@register("addr", family="matmul", aten=["aten::addr.default"], meta=_addr_meta, cost=_addr_cost,
          methods=("addr",), key=_addr_key)
def addr(input: Tensor, vec1: Tensor, vec2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """beta * input + alpha * outer(vec1, vec2)."""
    out = _addr_meta(input, vec1, vec2)
    if out.dtype.name == "bool":
        return _boolean_addr(input, vec1, vec2, beta, alpha, out.shape)
    return _product("addr", vec1.unsqueeze(1), vec2.unsqueeze(0), lambda: out.dtype, input, alpha, beta)


def _boolean_addr(input, vec1, vec2, beta, alpha, shape) -> Tensor:
    """torch's addr of bool tensors: (beta and input) or (alpha and outer(vec1, vec2))."""
    if any(isinstance(scalar, float) for scalar in (alpha, beta)):
        raise RuntimeError(f"addr: for bool input tensors, alpha and beta must be booleans, got alpha={alpha!r} "
                           f"and beta={beta!r}")
    def product():
        if alpha:
            return vec1.unsqueeze(1).logical_and(vec2.unsqueeze(0))
        return new_tensor(tuple(shape), vec1.dtype, vec1.device).fill_(False)
    if not beta:
        return product()
    with scratch_scope():  # declared by ``_addr_cost``
        term = product()
    return term.logical_or(input)


def _dot_meta_for(op):
    def meta(input, other):
        _require_rank(op, "self", input, 1)
        _require_rank(op, "other", other, 1)
        dtype = _result_dtype(op, input, other)
        if input.shape[0] != other.shape[0]:
            raise RuntimeError(f"{op}: expected both vectors to have the same number of elements, but got "
                               f"{input.shape[0]} and {other.shape[0]} (shapes {_dims(input.shape)} and "
                               f"{_dims(other.shape)})")
        return TensorMeta((), dtype)
    return meta


def _dot_key_for(op):
    meta = _dot_meta_for(op)
    return lambda facts, input, other: _matmul_keys(facts, op, input, other, meta(input, other).dtype)


def _dot_cost_for(op):
    meta = _dot_meta_for(op)

    def cost(input, other):
        return _product_cost(meta(input, other), _flops(input.shape[0]), input, other,
                             products=[(1, 1, input.shape[0], 1)])
    return cost


@register("dot", family="matmul", aten=["aten::dot.default"], meta=_dot_meta_for("dot"), cost=_dot_cost_for("dot"),
          methods=("dot",), key=_dot_key_for("dot"))
def dot(input: Tensor, other: Tensor) -> Tensor:
    """Inner product of two vectors of equal length; a 0-d tensor."""
    return _matmul("dot", input, other, lambda: _dot_meta_for("dot")(input, other).dtype)


@register("vdot", family="matmul", aten=["aten::vdot.default"], meta=_dot_meta_for("vdot"),
          cost=_dot_cost_for("vdot"), methods=("vdot",), key=_dot_key_for("vdot"))
def vdot(input: Tensor, other: Tensor) -> Tensor:
    """Inner product conjugating the first vector; the same as dot for the real dtypes supported."""
    return _matmul("vdot", input, other, lambda: _dot_meta_for("vdot")(input, other).dtype)


# ---- linear ------------------------------------------------------------------------------------------
def _linear_meta(input, weight, bias=None):
    _require_rank("linear", "weight", weight, 2)
    if len(input.shape) == 0:
        raise RuntimeError("linear: input must have at least 1 dimension, got a 0-D tensor")
    dtype = _result_dtype("linear", input, weight)
    if input.shape[-1] != weight.shape[1]:
        raise RuntimeError(f"linear: input of shape {_dims(input.shape)} and weight of shape "
                           f"{_dims(weight.shape)} cannot be multiplied: dim -1 of the input ({input.shape[-1]}) "
                           f"must equal dim 1 of the weight ({weight.shape[1]})")
    out = TensorMeta((*input.shape[:-1], weight.shape[0]), dtype)
    if bias is not None:
        _bias_meta("linear", bias, out)
    return out


def _linear_cost(input, weight, bias=None):
    out = _linear_meta(input, weight, bias)
    rows = S.numel(out.shape[:-1])
    return _product_cost(out, 2 * S.numel(out.shape) * weight.shape[1], input, weight, bias,
                         products=[(1, rows, weight.shape[1], weight.shape[0]),
                                   *_matmul_products(input.shape, tuple(weight.shape[::-1]))])


def _linear_operands(input, weight, bias):
    """(rows, weight transposed, bias over those rows): the matrices ``_plan_linear`` multiplies, views of
    these; None where the input's rows (or the bias over them) do not fold into one matrix."""
    rows = _fold_rows(input) if input.ndim >= 2 else None
    if rows is None:
        return None
    flat_bias = None if bias is None else _fold_rows(bias.expand(*input.shape[:-1], weight.shape[0]))
    if bias is not None and flat_bias is None:
        return None
    return rows, weight.transpose(0, 1), flat_bias


def _linear_key(facts, input, weight, bias=None):
    dtype = _linear_meta(input, weight, bias).dtype
    beta = 0 if bias is None else 1
    folded = _linear_operands(input, weight, bias)
    if folded is None:
        return _matmul_keys(facts, "linear", input, weight.transpose(0, 1), dtype, bias, 1, beta)
    return _product_keys(facts, *folded[:2], dtype, folded[2], 1, beta)


@register("linear", family="matmul", aten=["aten::linear.default"], meta=_linear_meta, cost=_linear_cost, api=(),
          key=_linear_key)
def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """input @ weight.T + bias, with the (out_features, in_features) weight read in place, transposed."""
    key = (layout_key(input), layout_key(weight), layout_key(bias))
    plan = _linear_plans.lookup(key)
    if plan is None:
        plan = _plan_linear(input, weight, bias)
        _linear_plans.put(key, plan)
    return plan(input, weight, bias)


_linear_plans = PlanCache()


def _plan_linear(input: Tensor, weight: Tensor, bias: Tensor | None):
    """``execute(input, weight, bias)`` for operands laid out as these are. A decode step calls linear
    with the same layouts every time, so the views it multiplies (the input's rows as one matrix, the
    weight transposed, the bias over those rows) are worked out once and rebuilt from their strides."""
    dtype = _linear_meta(input, weight, bias).dtype
    beta = 0 if bias is None else 1
    folded = _linear_operands(input, weight, bias)
    if folded is None or len({t.device for t in (input, weight, bias) if t is not None}) > 1:
        return lambda input, weight, bias: _matmul("linear", input, weight.transpose(0, 1), lambda: dtype, bias, 1,
                                                   beta)
    rows, weight_t, flat_bias = folded
    product = _product_plans.get(
        ("linear", layout_key(rows), layout_key(weight_t), layout_key(flat_bias), 1, beta),
        lambda: _plan_product("linear", rows, weight_t, dtype, flat_bias, 1, beta))
    rows_shape, rows_strides = rows.shape, rows.stride()
    weight_t_shape, weight_t_strides = weight_t.shape, weight_t.stride()
    bias_shape, bias_strides = (None, None) if flat_bias is None else (flat_bias.shape, flat_bias.stride())
    out_shape = (*input.shape[:-1], weight.shape[0])
    out_strides = S.contiguous_strides(out_shape)

    def execute(input, weight, bias):
        out = product(input._view(rows_shape, rows_strides), weight._view(weight_t_shape, weight_t_strides),
                      None if bias is None else bias._view(bias_shape, bias_strides))
        return out._view(out_shape, out_strides)
    return execute


# ---- einsum ------------------------------------------------------------------------------------------
class _Contraction:
    """A parsed einsum equation of one or two operands, in the forms inference graphs use: one operand's
    diagonals (a repeated index), sums (an index left out of the output) and permutation, or a batched
    contraction of two (every index names one dim of each operand it is in, and an index of one operand
    only is kept in the output)."""

    def __init__(self, equation: str, shapes):
        self.equation = equation
        text = equation.replace(" ", "")
        if len(shapes) not in (1, 2):
            self._unsupported(f"{len(shapes)} operands (one or two are supported)")
        lhs, arrow, out = text.partition("->")
        terms = lhs.split(",")
        if len(terms) != len(shapes):
            raise RuntimeError(f"einsum {equation!r}: {len(terms)} operand terms for {len(shapes)} operands")
        spare = iter(sorted(set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") - set(text)))
        ellipsis_rank = max(len(s) - len(t.replace("...", "")) for t, s in zip(terms, shapes) if "..." in t) \
            if "..." in lhs else 0
        ellipsis = "".join(next(spare) for _ in range(ellipsis_rank))
        self.terms = []
        for term, shape in zip(terms, shapes):
            own = len(shape) - len(term.replace("...", ""))
            letters = term.replace("...", ellipsis[ellipsis_rank - own:]) if "..." in term else term
            if len(letters) != len(shape) or not letters.isalpha():
                raise RuntimeError(f"einsum {equation!r}: term {term!r} does not match an operand of shape "
                                   f"{_dims(shape)}")
            if len(set(letters)) != len(letters) and len(shapes) == 2:
                self._unsupported(f"repeated index in {term!r} (diagonals)")
            self.terms.append(letters)
        if arrow:
            self.out = out.replace("...", ellipsis)
        else:
            counts = {c: sum(t.count(c) for t in self.terms) for c in set("".join(self.terms))}
            self.out = ellipsis + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ellipsis))
        self.sizes = {}
        for letters, shape in zip(self.terms, shapes):
            for c, n in zip(letters, shape):
                if self.sizes.setdefault(c, n) != n:
                    raise RuntimeError(f"einsum {equation!r}: index {c!r} is {self.sizes[c]} in one operand and "
                                       f"{n} in another (shapes {', '.join(_dims(s) for s in shapes)})")
        if len(set(self.out)) != len(self.out) or any(c not in self.sizes for c in self.out):
            raise RuntimeError(f"einsum {equation!r}: the output names an index twice or one no operand has")
        everywhere = set("".join(self.terms))
        if len(self.terms) == 1:
            self._plan_single(self.terms[0])
        if len(self.terms) == 2:
            a, b = self.terms
            for c in everywhere:
                if (c in a) != (c in b) and c not in self.out:
                    self._unsupported(f"index {c!r} is summed over in one operand only")
            self.batch = [c for c in self.out if c in a and c in b]
            self.left = [c for c in a if c not in b]
            self.right = [c for c in b if c not in a]
            self.contracted = [c for c in a if c in b and c not in self.out]

    def _plan_single(self, letters: str) -> None:
        """One operand's steps: ``diagonals``, the (dim1, dim2) pairs taken in turn (each diagonal becomes
        the last dim, as ``diagonal`` puts it), leaving ``diagonal_letters``; ``summed``, the dims of those
        summed over; ``order``, the remaining dims' positions in the output's order."""
        self.diagonals = []
        letters = list(letters)
        for c in dict.fromkeys(letters):
            while letters.count(c) > 1:
                first = letters.index(c)
                second = letters.index(c, first + 1)
                self.diagonals.append((first, second))
                letters = [x for i, x in enumerate(letters) if i not in (first, second)] + [c]
        self.diagonal_letters = "".join(letters)
        self.summed = [i for i, c in enumerate(letters) if c not in self.out]
        kept = [c for c in letters if c in self.out]
        self.order = [kept.index(c) for c in self.out]

    @property
    def diagonal_shape(self) -> tuple:
        return tuple(self.sizes[c] for c in self.diagonal_letters)

    def _unsupported(self, what: str):
        raise NotImplementedError(f"einsum {self.equation!r}: {what} is not supported; einsum takes one operand "
                                  "(diagonals, sums, permutations) and batched contractions of two")

    @property
    def out_shape(self) -> tuple:
        return tuple(self.sizes[c] for c in self.out)


_sum_cost = _simple_cost("sum")


def _einsum_operands(operands):
    # a list of operands, not one operand's metadata (a TensorMeta is a tuple too)
    listed = len(operands) == 1 and isinstance(operands[0], (list, tuple)) and not hasattr(operands[0], "shape")
    return tuple(operands[0]) if listed else operands


def _einsum_meta(equation, *operands):
    operands = _einsum_operands(operands)
    plan = _Contraction(equation, [tuple(o.shape) for o in operands])
    if len(operands) == 2:
        dtype = _result_dtype("einsum", *operands)
    else:
        dtype = _sum_dtype(operands[0].dtype, None) if plan.summed else operands[0].dtype
    return TensorMeta(plan.out_shape, dtype)


def _einsum_cost(equation, *operands):
    operands = _einsum_operands(operands)
    plan = _Contraction(equation, [tuple(o.shape) for o in operands])
    out = _einsum_meta(equation, *operands)
    if len(operands) == 1:
        # diagonals and permutations are views; sums cost what sum does over the diagonal view
        if not plan.summed:
            return Cost()
        return _sum_cost(TensorMeta(plan.diagonal_shape, operands[0].dtype), plan.summed)
    flops = 2 * S.numel(out.shape) * math.prod(plan.sizes[c] for c in plan.contracted)
    sizes = [math.prod(plan.sizes[c] for c in part) for part in (plan.batch, plan.left, plan.contracted, plan.right)]
    return _product_cost(out, flops, *operands, products=[tuple(sizes)])


def _contraction_operands(plan: _Contraction, a, b) -> tuple:
    """(batch..., m, k) and (batch..., k, n): the operands of a contraction of two as one product."""
    ta, tb = plan.terms
    size = plan.sizes
    batch_shape = [size[c] for c in plan.batch]
    m = math.prod(size[c] for c in plan.left)
    k = math.prod(size[c] for c in plan.contracted)
    n = math.prod(size[c] for c in plan.right)
    a3 = _reshaped(a.permute(*[ta.index(c) for c in (*plan.batch, *plan.left, *plan.contracted)]), (*batch_shape, m, k))
    b3 = _reshaped(b.permute(*[tb.index(c) for c in (*plan.batch, *plan.contracted, *plan.right)]), (*batch_shape, k, n))
    return a3, b3


def _reshaped(x, shape: tuple):
    """``x.reshape(shape)``; of a meta tensor no view serves, the layout of the copy a real one gets."""
    if x.device.type == "meta" and S.view_strides(tuple(x.shape), tuple(x.stride()), shape) is None:
        return _meta(shape, x.dtype)
    return x.reshape(*shape)


def _einsum_key(facts, equation, *operands):
    operands = _einsum_operands(operands)
    if len(operands) == 1:
        return []  # views and a sum
    out_meta = _einsum_meta(equation, *operands)
    plan = _Contraction(equation, [tuple(o.shape) for o in operands])
    return _product_keys(facts, *_contraction_operands(plan, *operands), out_meta.dtype)


@register("einsum", family="matmul", aten=["aten::einsum.default"], meta=_einsum_meta, cost=_einsum_cost,
          key=_einsum_key)
def einsum(equation: str, *operands) -> Tensor:
    """torch.einsum for one operand (diagonal views, a sum over the indices the output leaves out, a
    permutation) or a batched contraction of two, as one product (operands are permuted views, merged into
    matrices where their strides allow)."""
    operands = _einsum_operands(operands)
    out_meta = _einsum_meta(equation, *operands)
    plan = _Contraction(equation, [tuple(o.shape) for o in operands])
    if len(operands) == 1:
        (x,) = operands
        for first, second in plan.diagonals:
            x = x.diagonal(0, first, second)
        if plan.summed:
            x = x.sum(plan.summed)
        return x.permute(*plan.order) if plan.order else x
    product = _product("einsum", *_contraction_operands(plan, *operands), lambda: out_meta.dtype)
    size = plan.sizes
    order = [*plan.batch, *plan.left, *plan.right]
    full = product.view(tuple(size[c] for c in order))
    return full.permute(tuple(order.index(c) for c in plan.out))  # () for a 0-d result


# ---- samples ---------------------------------------------------------------------------------------

def _products():
    """The samples of the products: float32 and a transposed operand, bfloat16, 0-size K and M, int64."""
    def affine(product):
        return lambda x, a, b, *, beta=1, alpha=1: beta * x + alpha * product(a, b)

    bf16 = dict(dtype="bfloat16")
    return {
        "mm": Samples((sample(operand(2, 3), operand(3, 4)), sample(operand(3, 2, layout="transposed"), operand(2, 4)),
                       sample(operand(2, 3, **bf16), operand(3, 2, **bf16)), sample(operand(2, 0), operand(0, 3)),
                       sample(operand(0, 3), operand(3, 2)), sample(operand(2, 3, dtype="int64"), operand(3, 2, dtype="int64"))),
                      np.matmul),
        "bmm": Samples((sample(operand(2, 2, 3), operand(2, 3, 4)), sample(operand(2, 3, 2, layout="transposed"), operand(2, 2, 3)),
                        sample(operand(1, 2, 3, **bf16), operand(1, 3, 2, **bf16)), sample(operand(0, 2, 3), operand(0, 3, 1))),
                       np.matmul),
        "matmul": Samples((sample(operand(2, 3), operand(3, 4)), sample(operand(3), operand(3)), sample(operand(3), operand(3, 2)),
                           sample(operand(2, 2, 3), operand(3, 2, layout="transposed")),
                           sample(operand(2, 3, **bf16), operand(3, **bf16)), sample(operand(0, 3), operand(3, 2))), np.matmul),
        "addmm": Samples((sample(operand(2, 4), operand(2, 3), operand(3, 4)),
                          sample(operand(4), operand(3, 2, layout="transposed"), operand(2, 4), beta=0.5, alpha=2),
                          sample(operand(2, 2, **bf16), operand(2, 3, **bf16), operand(3, 2, **bf16)),
                          sample(operand(2, 3), operand(2, 0), operand(0, 3))), affine(np.matmul)),
        "baddbmm": Samples((sample(operand(2, 2, 4), operand(2, 2, 3), operand(2, 3, 4)),
                            sample(operand(2, 1), operand(1, 2, 3), operand(1, 3, 1), beta=0.0, alpha=1.5)),
                           affine(np.matmul)),
        "mv": Samples((sample(operand(2, 3), operand(3)), sample(operand(3, 2, layout="transposed"), operand(2)),
                       sample(operand(0, 3), operand(3)), sample(operand(2, 3, dtype="int64"), operand(3, dtype="int64"))),
                      np.matmul),
        "addmv": Samples((sample(operand(2), operand(2, 3), operand(3)), sample(operand(), operand(3, 2, layout="transposed"),
                                                                              operand(2), beta=2, alpha=0.5)),
                         affine(np.matmul)),
        "outer": Samples((sample(operand(2), operand(3)), sample(operand(0), operand(3)),
                          sample(operand(2, dtype="int64"), operand(3, dtype="int64"))), np.outer),
        "addr": Samples((sample(operand(2, 3), operand(2), operand(3)), sample(operand(3), operand(2), operand(3), alpha=2)),
                        affine(np.outer)),
        "dot": Samples((sample(operand(3), operand(3)), sample(operand(0), operand(0)),
                        sample(operand(4, dtype="int64", layout="sliced"), operand(4, dtype="int64"))),
                       lambda a, b: np.asarray(np.dot(a, b))),
        "vdot": Samples((sample(operand(3), operand(3)), sample(operand(3, dtype="bfloat16"), operand(3, dtype="bfloat16"))),
                        lambda a, b: np.asarray(np.vdot(a, b))),
        "linear": Samples((sample(operand(2, 3), operand(4, 3), operand(4)), sample(operand(3), operand(2, 3)),
                           sample(operand(2, 2, 3, **bf16), operand(2, 3, **bf16), operand(2, **bf16)),
                           sample(operand(0, 3), operand(4, 3))),
                          lambda x, w, b=None: x @ w.T + (0 if b is None else b)),
        "einsum": Samples((sample("ij,jk->ik", operand(2, 3), operand(3, 4)), sample("bij->bji", operand(2, 2, 3)),
                           sample("i,i", operand(3), operand(3)), sample("ii->i", operand(3, 3)),
                           sample("ij,kj->ik", [operand(2, 3), operand(4, 3)])),
                          lambda equation, *operands: np.einsum(equation, *(operands[0] if len(operands) == 1 and
                                                                            isinstance(operands[0], list) else operands))),
    }


family_samples("matmul", by_name(_products()))
