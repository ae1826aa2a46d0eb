"""Matrix products of a handful of rows (decode): ``gemv`` streams the matrix once, K split over programs
when the matrix is too narrow to fill the device, the splits' partial sums added in a fixed order by the
last split of each column block to finish (or, past the arrival counters, by ``gemv_combine``).
``matmul_plans`` routes products of up to ``GEMV_MAX_ROWS`` rows here."""
from __future__ import annotations

import functools
from dataclasses import dataclass

from .. import tuning
from ..allocation import ARRIVAL_COUNTERS, arrival_counters, scratch_tensor
from ..dtypes import get_dtype
from ..kernels import matmul as K
from ..kernels import norm_epilogue as E
from ..kernels.formats import FORMAT_NATIVE
from ..launch import cdiv, dependent_launch, next_pow2
from ..lowering import float_format
from .plans import PlannedLaunch, Slot

# rows up to this many take the GEMV kernel (one 16-row tile of the matrix unit at most)
GEMV_MAX_ROWS = 16

# products under Triton's interpreter: tiles as wide as these (see gemv_candidates and
# matmul_plans.gemm_candidates)
_INTERPRETED_BLOCK_M, _INTERPRETED_BLOCK_N, _INTERPRETED_BLOCK_K = 128, 1024, 512


def _clamp_block(block: int, ceiling: int, extent: int) -> int:
    # tl.dot takes tiles of at least 16 along each dim
    return max(16, min(block, ceiling, next_pow2(extent)))


# true float32 products run on the FMA units, not the matrix unit: short K steps over large output tiles
# (BLOCK_N, BLOCK_K, SPLITS, num_warps[, settings: num_stages, where not Triton's default]); the first is what an
# untimed device uses. One row is a multiply-add over a [BLOCK_K, BLOCK_N] weight tile (no matrix unit), so
# long K tiles keep many bytes in flight; several rows go through tl.dot, with K tiles up to the same length
# (weight streaming wants bytes in flight more than square tiles), or more stages of shorter ones.
_GEMV_ONE_ROW_SHAPES = [(32, 256, 1, 4), (16, 512, 1, 4), (64, 256, 1, 8), (32, 512, 1, 8), (16, 256, 1, 4),
                        (64, 128, 1, 4), (32, 256, 2, 4), (128, 64, 1, 4), (64, 128, 4, 4),
                        # narrow column tiles: a weight of a few thousand outputs (an attention output or a
                        # down projection at batch 1) still spreads over several programs an SM
                        (8, 512, 1, 4), (8, 256, 1, 2), (4, 512, 1, 2), (16, 512, 2, 4), (8, 512, 2, 4)]
_GEMV_ROWS_SHAPES = [(64, 128, 1, 4), (128, 128, 1, 8), (64, 64, 1, 4), (32, 256, 1, 4), (64, 256, 1, 8),
                     (64, 128, 2, 4), (128, 128, 4, 8), (64, 128, 8, 4), (32, 128, 8, 4), (256, 64, 2, 8),
                     (16, 256, 1, 4), (32, 512, 1, 8), (16, 512, 1, 4),
                     # small tiles: a stage count past the GEMM ceiling fits (one that does not is skipped)
                     (64, 128, 1, 4, dict(num_stages=4)), (64, 128, 1, 4, dict(num_stages=5)),
                     (32, 256, 1, 4, dict(num_stages=4)), (64, 64, 1, 4, dict(num_stages=6)),
                     (32, 128, 1, 4, dict(num_stages=6))]
_GEMV_MAX_BLOCK_K = 512
# one row with its K loop pipelined (the kernels' LOOP_STAGES): one row takes no dot, so by default each step
# waits for its own weight tile; pipelined, the next steps' tiles stream into shared memory under it
_PIPELINED, _PIPELINED_DEEP = dict(LOOP_STAGES=3), dict(LOOP_STAGES=4)
_GEMV_ONE_ROW_PIPELINED = [(32, 256, 1, 4, _PIPELINED), (16, 512, 1, 4, _PIPELINED), (64, 256, 1, 8, _PIPELINED),
                           (8, 512, 1, 4, _PIPELINED_DEEP), (32, 256, 2, 4, _PIPELINED), (16, 512, 2, 4, _PIPELINED)]


def launch_settings(config: dict) -> dict:
    """The launch options and loop constexpr of a GEMV ``config``: its warps, its stages where it names them,
    and LOOP_STAGES (None where it pipelines nothing beyond the compiler's default)."""
    return dict(num_warps=config["num_warps"], LOOP_STAGES=config.get("LOOP_STAGES"),
                **({"num_stages": config["num_stages"]} if "num_stages" in config else {}))


def gemv_candidates(facts: dict, m: int, n: int, k: int) -> list[dict]:
    if facts["kernels"].get("interpreted"):
        # the interpreter pays per program and per operation far more than per element: few programs, each
        # reading a wide tile of the weight (a linear layer of the main job: 152 -> about 30 ms a call)
        return [dict(BLOCK_N=_clamp_block(_INTERPRETED_BLOCK_N, _INTERPRETED_BLOCK_N, n),
                     BLOCK_K=_clamp_block(_INTERPRETED_BLOCK_K, _INTERPRETED_BLOCK_K, k), SPLITS=1, num_warps=4)]
    tiles = facts["tiles"]
    configs = []
    shapes = _GEMV_ONE_ROW_SHAPES + _GEMV_ONE_ROW_PIPELINED if m == 1 else _GEMV_ROWS_SHAPES
    for bn, bk, splits, warps, *extra in shapes:
        block_k = _clamp_block(bk, _GEMV_MAX_BLOCK_K, k)
        config = dict(BLOCK_N=_clamp_block(bn, tiles["max_block_n"], n), BLOCK_K=block_k,
                      SPLITS=max(1, min(splits, cdiv(k, block_k))), num_warps=min(warps, tiles["max_warps"]),
                      **(extra[0] if extra else {}))
        configs.append(config)
    return tuning.distinct_candidates(configs)


@dataclass(frozen=True)
class ProductNorm:
    """An inference batch norm and an activation that a float product's epilogue applies to its float32
    result after alpha and the bias, before the one rounding: (y - mean) * weight / sqrt(var + eps) + shift
    for the channel of each output row (``per_row``) or column, then ``activation`` (``norm_epilogue``'s
    ACT_* code). Its four vectors, of ``dtype``, contiguous, come with each call as ``NORM_SLOTS`` order."""
    per_row: bool
    eps: float
    activation: int
    dtype: object


# a call's norm vectors, the slots of the launches whose epilogue takes them
NORM_SLOTS = ("norm_mean", "norm_var", "norm_weight", "norm_shift")


def norm_launch_parts(norm: ProductNorm | None) -> tuple[list, dict]:
    """(the norm's kernel arguments, its constexprs): its vectors' slots and eps, or None for each where there
    is no norm (constants, so no kernel parameter)."""
    if norm is None:
        return [None] * (len(NORM_SLOTS) + 1), dict(NORM=K.NORM_OFF.value, NORM_FORMAT=FORMAT_NATIVE.value,
                                                      ACTIVATION=E.ACT_NONE.value)
    return [*map(Slot, NORM_SLOTS), float(norm.eps)], dict(
        NORM=(K.NORM_ROWS if norm.per_row else K.NORM_COLUMNS).value, NORM_FORMAT=float_format(norm.dtype),
        ACTIVATION=norm.activation)


def split_k(k: int, config: dict) -> tuple[int, int]:
    """(K per split, splits) of a GEMV's ``config``: whole BLOCK_K tiles per split, no split empty."""
    block_k = config["BLOCK_K"]
    k_per_split = cdiv(cdiv(k, config["SPLITS"]), block_k) * block_k if k else block_k
    return k_per_split, max(1, cdiv(k, k_per_split))


def combines_in_launch(config: dict, splits: int, n: int) -> bool:
    """Whether a GEMV split in ``splits`` adds its partial sums in its own launch (its last split of each
    column block to finish): where its column blocks fit the arrival counters."""
    return splits > 1 and cdiv(n, config["BLOCK_N"]) <= ARRIVAL_COUNTERS


def split_slots(splits: int, combined: bool, m: int, n: int, dtype, dev, out) -> dict:
    """The "partial" and "counters" slots of a GEMV launch in ``splits`` (``combined``: as
    ``combines_in_launch`` answers): the partial sums' temporary and the stream's arrival counters where
    the launch uses them, ``out`` in their place where not."""
    if splits == 1:
        return {"partial": out, "counters": out}
    return {"partial": scratch_tensor((splits, m, n), dtype, dev),
            "counters": arrival_counters(dev) if combined else out}


def combine_launch(config, splits, m, n, alpha, beta, bias_strides, out_strides, has_bias, scaled, flags, dev,
                   norm: ProductNorm | None = None):
    """The ``gemv_combine`` launch adding a split GEMV's partials (slots partial, bias, out; the norm's where
    ``norm``), or None where there is one split or the GEMV's launch adds them (``combines_in_launch``)."""
    if splits == 1 or combines_in_launch(config, splits, n):
        return None
    combine_n = min(config["BLOCK_N"], 64)
    norm_args, norm_constexprs = norm_launch_parts(norm)
    return PlannedLaunch(
        K.gemv_combine, (cdiv(n, combine_n),),
        [Slot("partial"), Slot("bias"), Slot("out"), m, n, splits, float(alpha), float(beta), *norm_args,
         *bias_strides, *out_strides],
        dict(BLOCK_M=next_pow2(m), BLOCK_N=combine_n, HAS_BIAS=has_bias, SCALED=scaled,
             BIAS_FORMAT=flags["BIAS_FORMAT"], DST_FORMAT=flags["DST_FORMAT"], VIA_F32=flags["VIA_F32"],
             PDL=dependent_launch(dev), num_warps=config["num_warps"], **norm_constexprs))


def _gemv_launches(key, a, b, bias, out, m, n, k, alpha, beta, has_bias, scaled, flags, facts, dev, index_64,
                   norm: ProductNorm | None = None, norm_tensors: tuple = ()):
    """``run(a, b, bias, out, norm_tensors)`` for out (m x n, m <= 16) from a (m x k) and b (k x n), given here
    as 2-D strided views of the tensors ``run`` later takes (which share their first elements), and the
    config tuned under launch ``key``; ``norm`` in the epilogue, of ``norm_tensors`` (its constexprs are in
    ``flags``)."""
    norm_args = norm_launch_parts(norm)[0]
    block_m = 1 if m == 1 else GEMV_MAX_ROWS
    bias_sm, bias_sn = (bias.stride(0), bias.stride(1)) if has_bias else (0, 0)
    a_sm, a_sk, b_sk, b_sn, out_sm, out_sn = a.stride(0), a.stride(1), b.stride(0), b.stride(1), *out.stride()
    partial_dtype = get_dtype("int32" if out.dtype.kind == "int" else "float32")

    def launches_for(config):
        """``run(a, b, bias, out)`` for ``config``, its launches built once."""
        k_per_split, splits = split_k(k, config)
        combined = combines_in_launch(config, splits, n)
        main = PlannedLaunch(
            K.gemv, (cdiv(n, config["BLOCK_N"]), splits),
            [Slot("a"), Slot("b"), Slot("bias"), Slot("out"), Slot("partial"), Slot("counters"), m, n, k, k_per_split,
             float(alpha), float(beta), *norm_args, a_sm, a_sk, b_sk, b_sn, bias_sm, bias_sn, out_sm, out_sn],
            dict(BLOCK_M=block_m, BLOCK_N=config["BLOCK_N"], BLOCK_K=config["BLOCK_K"], SPLIT=splits > 1,
                 COMBINE=combined, HAS_BIAS=has_bias, SCALED=scaled, INDEX_64=index_64, PDL=dependent_launch(dev),
                 **launch_settings(config), **flags))
        combine = combine_launch(config, splits, m, n, alpha, beta, (bias_sm, bias_sn), (out_sm, out_sn), has_bias,
                                 scaled, flags, dev, norm)

        def run(a, b, bias, out, norm_tensors=()):
            tensors = {"a": a, "b": b, "bias": bias if has_bias else out, "out": out,
                       **split_slots(splits, combined, m, n, partial_dtype, dev, out),
                       **dict(zip(NORM_SLOTS, norm_tensors))}
            main(dev, tensors)
            if combine is not None:
                combine(dev, tensors)
        return run

    config = tuning.choose_timed(key, facts, lambda: gemv_candidates(facts, m, n, k),
                                 lambda config: functools.partial(launches_for(config), a, b, bias, out, norm_tensors))
    return launches_for(config)
