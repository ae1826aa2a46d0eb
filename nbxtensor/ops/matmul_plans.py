"""How matrix products run: the route a product's layouts take (``_product_route``: empty, exact integer,
dense copies, GEMV, float32 on bfloat16 parts, GEMM), its launch keys, tuning candidates and the plan that
runs it (``_plan_product``, kept per layout by ``_product``), and the float32 precision switches as torch
spells them. The ops themselves, their checks and rules are ``matmul.py``'s; GEMV is ``matmul_gemv.py``'s."""
from __future__ import annotations

import functools
from types import SimpleNamespace

from .. import shape as S
from .. import tuning
from ..device import backend_for, multiprocessors, resolve
from ..dtypes import get_dtype
from ..kernels import matmul as K
from ..kernels.formats import FORMAT_NATIVE
from ..launch import cdiv, next_pow2
from ..allocation import Workspace, arrival_counters, fresh_tensor_maker, new_tensor, scratch_tensor
from ..lowering import conversion_flags, encode_scalar, float_format, needs_index_64
from ..tensor import Tensor
from .matmul_gemv import (_GEMV_MAX_BLOCK_K, _GEMV_ONE_ROW_SHAPES, _GEMV_ROWS_SHAPES, _INTERPRETED_BLOCK_K,
                          _INTERPRETED_BLOCK_M, _INTERPRETED_BLOCK_N, GEMV_MAX_ROWS, NORM_SLOTS, ProductNorm,
                          _clamp_block, _gemv_launches, norm_launch_parts)
from .plans import PlanCache, PlannedLaunch, Slot, clear_all, layout_key
from .registry import workspace_bytes

# batch dims (after merging) the kernel indexes directly; more are materialised first
MAX_BATCH_RANK = 4
# grid axis 1 holds batches; CUDA allows this many per launch
MAX_GRID_Y = 65535
GROUP_M = 8

# integer operands multiplied exactly (int64 sums, wrapped to their own width as torch's are); int8 takes
# the matrix unit and returns int32
_EXACT_INTEGER = ("int64", "int32", "int16", "uint8")
# operands multiplied on the FMA units in a 64-bit type (``gemm_wide``): those integers, and float64
_WIDE = (*_EXACT_INTEGER, "float64")
# (BLOCK_M, BLOCK_N, BLOCK_K) of the wide product, clamped to the problem
_WIDE_TILE = (32, 32, 8)

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


# ``tl.dot``'s precision of true float32 (on the FMA units), and of half-precision inputs
IEEE = "ieee"


def _dot_precision(dtype) -> str | None:
    if dtype.kind == "int":
        return None
    if dtype.name == "float32" and _precision["float32"] != "highest":
        return "tf32"
    return IEEE


def _product_workspace(dtype, batches: int, m: int, k: int, n: int) -> int:
    """The temporaries' bytes of a product of ``batches`` (m x k) by (k x n) matrices, the most any device
    takes (the rule knows none): a GEMV's or a half-precision GEMM's split-K partials, or a float32 GEMM's
    bfloat16 planes (the widest chunk's, one buffer for all) and the chunk products they add up in. A
    float32 GEMM whose tuned form splits its tiles in registers takes none, the planes form these: a device
    may time either fastest, so the planes are declared."""
    if batches != 1 or not (m and k and n) or dtype.name in ("int64", "int16", "uint8", "bool"):
        # exact integer products (int32 results may be int8's, which a GEMV splits) take no temporaries
        return 0
    if m <= GEMV_MAX_ROWS:
        splits = max(min(shape[2], cdiv(k, _clamp_block(shape[1], _GEMV_MAX_BLOCK_K, k)))
                     for shape in (_GEMV_ONE_ROW_SHAPES if m == 1 else _GEMV_ROWS_SHAPES))
        return workspace_bytes(splits * m * n * 4) if splits > 1 else 0  # int32 or float32 partials
    if dtype.name != "float32":
        # a half-precision GEMM's split-K partials, where a device with more SMs than its output's tiles
        # may split it, or split the tiles of a last wave that leaves SMs idle (``_wave_split``, within this)
        splits = split_max(m, n, k, dtype.itemsize) if dtype.kind == "float" and dtype.itemsize == 2 else 1
        return workspace_bytes(splits * m * n * 4) if splits > 1 else 0
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
# the same for a batch of small matrices (attention's scores and context, 64 to 512 a side): smaller
# tiles, so that a dozen outputs of 128 x 64 still spread over every SM
_GEMM_PARTS_BATCH_SHAPES = [(64, 64, 32, 3, 4), (64, 32, 32, 3, 4), (32, 64, 32, 3, 4), (32, 32, 32, 2, 4),
                            (16, 32, 32, 2, 2)]
# persistent forms of a batch's tiles (``gemm_batches``): (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps,
# flags), PROGRAMS_PER_SM programs a SM walking the (matrix, tile) items, as many as sm_90's registers hold
# beside each other (ptxas: 150-215 registers a thread for the parts' tiles, none spilled; 64 x 128 at K steps
# of 32 spills on 4 warps, so it steps by 16). At attention's K = 64 a tile is two K steps of 32: a program a
# tile spends as long starting and storing as multiplying, where a persistent one (FLATTEN) loads its next
# tile while storing the last
_BATCH_PERSISTENT = [(128, 128, 32, 3, 8, dict(PROGRAMS_PER_SM=1, FLATTEN=True)),
                     (128, 128, 16, 4, 8, dict(PROGRAMS_PER_SM=1, FLATTEN=True)),
                     (128, 128, 16, 4, 8, dict(PROGRAMS_PER_SM=1)),
                     (64, 128, 16, 4, 4, dict(PROGRAMS_PER_SM=2, FLATTEN=True)),
                     (128, 64, 16, 4, 4, dict(PROGRAMS_PER_SM=2, FLATTEN=True)),
                     (64, 64, 32, 3, 4, dict(PROGRAMS_PER_SM=2, FLATTEN=True)),
                     (64, 64, 16, 4, 4, dict(PROGRAMS_PER_SM=3, FLATTEN=True))]
# the same for true float32 (FMA units): 240-255 registers a thread, none spilled
_BATCH_PERSISTENT_FMA = [(128, 128, 16, 3, 8, dict(PROGRAMS_PER_SM=1, FLATTEN=True)),
                         (64, 128, 16, 3, 4, dict(PROGRAMS_PER_SM=2, FLATTEN=True)),
                         (128, 64, 32, 3, 4, dict(PROGRAMS_PER_SM=2)),
                         (64, 64, 32, 3, 4, dict(PROGRAMS_PER_SM=2, FLATTEN=True))]
_GEMM_PARTS_TILE_VARIANTS = [
    (128, 128, 32, 3, 8, _PT), (128, 128, 32, 4, 8, _PT), (128, 128, 32, 4, 8, dict(_PT, FLATTEN=True)),
    (64, 128, 32, 4, 4, _PT), (64, 128, 32, 4, 4, dict(_PT, FLATTEN=True)), (128, 64, 32, 4, 4, _PT),
    (64, 256, 32, 3, 8, _PT), (128, 128, 32, 3, 8, _P),
]
_TILE_FLAGS = ("PERSISTENT", "TMA", "FLATTEN", "WARP_SPECIALIZE")

# A half-precision matrix whose output has fewer 128 x 128 tiles than the device has SMs (a short-M prefill
# chunk against a wide weight: 128 x 4096 is 32 tiles) leaves SMs idle however its weight streams: narrow
# tiles, and split-K (``SPLITS``: the K pieces along grid axis 2, float32 partials summed in split order by
# ``gemv_combine``), each shape split so that its programs fill one or two waves of the SMs
_GEMM_STARVED_SHAPES = [(128, 64, 64, 4, 4, {}), (64, 64, 64, 4, 4, {}), (128, 32, 64, 4, 4, {}),
                        (128, 64, 64, 4, 4, _PT), (64, 64, 64, 4, 4, _PT)]
_GEMM_SPLIT_SHAPES = [(128, 128, 64, 4, 4), (128, 128, 64, 3, 8), (128, 256, 64, 3, 8), (64, 128, 64, 4, 4)]
_SPLIT_MAX = 8
_SPLIT_MIN_K = 256  # the shortest K piece: four 64-deep steps


def split_max(m: int, n: int, k: int, itemsize: int) -> int:
    """The most K pieces an m x n x k product splits into on any device: partials, written and read once,
    move at most half the operands' bytes, and each piece is at least ``_SPLIT_MIN_K`` deep."""
    return max(1, min(_SPLIT_MAX, (m * k + k * n) * itemsize // (16 * m * n), k // _SPLIT_MIN_K))


def _starved_shapes(facts: dict, m: int, n: int, k: int, dtype) -> list:
    """``_GEMM_STARVED_SHAPES`` and the split shapes of a product whose output starves the SMs, else none."""
    programs = facts.get("multiprocessors_max", 0)
    if cdiv(m, 128) * cdiv(n, 128) >= programs:
        return []
    most = split_max(m, n, k, dtype.itemsize)
    splits = [(shape, min(most, waves * programs // (cdiv(m, shape[0]) * cdiv(n, shape[1]))))
              for shape in _GEMM_SPLIT_SHAPES for waves in (1, 2)]
    return _GEMM_STARVED_SHAPES + [(*shape, dict(SPLITS=count)) for shape, count in splits if count > 1]


# ``gemm_tiles`` settings that split the last wave (SPLITS: at most that many K pieces a tile): a product whose
# tiles leave the SMs a last wave less than half full (128 x 37888: 296 tiles of 128 x 128 are 2.24 waves on
# 132 SMs; 128 x 4096: 32 tiles, a quarter of one) takes the tiles of its full waves whole and cuts each tile
# of the last into K pieces that fill the SMs, summed by the tile's last-arriving piece in the same launch
# (``gemm_tiles``' SPLIT), where the split ``gemm`` above needs a second launch to add them
# (with descriptors, FLATTEN also overlaps a program's whole tiles as in _GEMM_TILE_VARIANTS)
_GEMM_WAVE_SPLIT_SHAPES = [(128, 128, 64, 4, 4, {}), (128, 128, 64, 4, 4, dict(FLATTEN=True)),
                           (128, 128, 64, 3, 8, {}), (128, 256, 64, 3, 8, {}), (64, 128, 64, 4, 4, {}),
                           (128, 64, 64, 4, 4, {})]


def _wave_split(config: dict, tiles: int, programs: int, m: int, n: int, k: int, itemsize: int) -> tuple:
    """(whole tiles, K pieces of each later tile, the pieces' depth) of a ``gemm_tiles`` setting with
    ``SPLITS`` over ``tiles`` tiles on ``programs`` SMs: the tiles past the last full wave each cut into
    as many pieces as fill one wave, at most ``SPLITS``, whole K steps each, their float32 blocks within the
    partials the cost rule declares (``split_max`` outputs' worth, half precision only); (tiles, 1, k)
    where nothing is split."""
    tail = tiles % programs
    most = split_max(m, n, k, itemsize) if itemsize == 2 else 1
    block_k = config["BLOCK_K"]
    if tail and most > 1:
        splits = min(config.get("SPLITS", 1), programs // tail,
                     most * m * n // (tail * config["BLOCK_M"] * config["BLOCK_N"]), cdiv(k, block_k))
        if splits > 1:
            depth = cdiv(cdiv(k, splits), block_k) * block_k
            if cdiv(k, depth) > 1:
                return tiles - tail, cdiv(k, depth), depth
    return tiles, 1, k


def _wave_split_shapes(facts: dict, m: int, n: int, k: int, dtype) -> list:
    """``_GEMM_WAVE_SPLIT_SHAPES`` whose tiles of this product leave a last wave to split, each with the
    pieces that fill it on a device of these facts (through descriptors where it has them)."""
    programs = facts.get("multiprocessors_max", 0)
    tma = _has_tma(facts)
    shapes = []
    for *shape, extra in _GEMM_WAVE_SPLIT_SHAPES:
        config = dict(BLOCK_M=shape[0], BLOCK_N=shape[1], BLOCK_K=shape[2], SPLITS=_SPLIT_MAX)
        tiles = cdiv(m, shape[0]) * cdiv(n, shape[1])
        splits = _wave_split(config, tiles, programs, m, n, k, dtype.itemsize)[1] if programs else 1
        if splits > 1 and (tma or not extra):
            shapes.append((*shape, dict(_PT if tma else _P, **extra, SPLITS=splits)))
    return shapes


def _has_tma(facts: dict) -> bool:
    return (facts.get("matrix_unit") or {}).get("instruction") in ("wgmma", "tcgen05")


def gemm_candidates(facts: dict, m: int, n: int, k: int, dtype, *, single: bool = False,
                    parts: bool = False, batches: int = 1) -> list[dict]:
    """The settings worth timing for an m x n x k product of ``dtype`` on a device with these facts;
    ``single`` (one matrix, int32 indices) adds the ``gemm_tiles`` variants (persistent, TMA); ``parts``:
    float32 tiles multiplied on the bfloat16 matrix unit as their parts (the matrix unit's tiles), with
    smaller ones for a batch of ``batches`` > 1 matrices. A float32 batch also takes ``gemm_batches``'s
    persistent forms (``PROGRAMS_PER_SM``)."""
    if facts["kernels"].get("interpreted"):
        # as for the GEMV: the interpreter pays per program and operation, so one wide tile of the output
        # a program and long K steps (the main job's layers on the CPU: about 4x faster)
        return [dict(BLOCK_M=_clamp_block(_INTERPRETED_BLOCK_M, _INTERPRETED_BLOCK_M, m),
                     BLOCK_N=_clamp_block(_INTERPRETED_BLOCK_N, _INTERPRETED_BLOCK_N, n),
                     BLOCK_K=max(_clamp_block(_INTERPRETED_BLOCK_K, _INTERPRETED_BLOCK_K, k), 32 // dtype.itemsize),
                     num_stages=1, num_warps=1, GROUP_M=GROUP_M)]
    tiles = facts["tiles"]
    shared = facts.get("shared_memory_per_block_bytes")
    out = []
    fma = dtype.name == "float32" and _dot_precision(dtype) == IEEE and not parts
    if parts:
        plain = _GEMM_PARTS_SHAPES + (_GEMM_PARTS_BATCH_SHAPES if batches > 1 else [])
    else:
        plain = _GEMM_SHAPES + (_GEMM_FMA_SHAPES if fma else [])
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
        if dtype.itemsize == 2:
            variants += [s for s in _starved_shapes(facts, m, n, k, dtype) if tma or not s[5].get("TMA")]
            variants += _wave_split_shapes(facts, m, n, k, dtype)
    if batches > 1 and (parts or fma):
        variants += _BATCH_PERSISTENT if parts else _BATCH_PERSISTENT_FMA
    shapes = [(*s, {}) for s in plain] + variants
    for bm, bn, bk, stages, warps, flags in shapes:
        if dtype.itemsize == 4 and bk > 32:
            bk //= 2  # float32 tiles take twice the shared memory and registers
        config = dict(BLOCK_M=_clamp_block(bm, tiles["max_block_m"], m),
                      BLOCK_N=_clamp_block(bn, tiles["max_block_n"], n),
                      # 8-bit operands multiply in K steps of 32 (the MMA shapes for int8)
                      BLOCK_K=max(_clamp_block(bk, tiles["max_block_k"], k), 32 // dtype.itemsize),
                      num_stages=min(stages, tiles["max_stages"]), num_warps=min(warps, tiles["max_warps"]),
                      GROUP_M=GROUP_M, **{f: True for f in _TILE_FLAGS if flags.get(f)},
                      **{f: flags[f] for f in ("SPLITS", "PROGRAMS_PER_SM") if f in flags})
        staged = (config["BLOCK_M"] + config["BLOCK_N"]) * config["BLOCK_K"] * dtype.itemsize * config["num_stages"]
        if not shared or staged <= shared:
            out.append(config)
    return tuning.distinct_candidates(out)


def _operand_flags(dtype, out_dtype, bias, dev, facts) -> dict:
    acc = get_dtype("int32") if dtype.kind == "int" else get_dtype("float32")
    conversion = conversion_flags(acc, out_dtype, dev)
    interpreted = bool(facts["kernels"].get("interpreted"))
    return dict(ACC=acc.triton, PRECISION=_dot_precision(dtype), INTERPRETED=interpreted,
                DECODE_BF16=dtype.name == "bfloat16" and interpreted,
                BIAS_FORMAT=float_format(bias.dtype) if bias is not None
                else FORMAT_NATIVE.value,
                DST_FORMAT=conversion["DST_FORMAT"], VIA_F32=conversion["VIA_F32"])


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


def planned_product(op: str, a: Tensor, b: Tensor, out_dtype, bias: Tensor | None = None, alpha=1, beta=0,
                    norm: ProductNorm | None = None, norm_tensors: tuple = ()):
    """``execute(a, b, bias, out=None, norm_tensors=()) -> out``: ``_product``'s plan for operands laid out as
    these (made, and tuned, the first time), for an op that lays its own views on each call's tensors and runs
    the plan directly; ``norm``: a batch norm and activation in its epilogue, of vectors laid out as
    ``norm_tensors`` (running mean, running variance, weight, bias), which each call passes."""
    return _product_plans.get((op, layout_key(a), layout_key(b), layout_key(bias), alpha, beta, norm,
                               *map(layout_key, norm_tensors)),
                              lambda: _plan_product(op, a, b, out_dtype, bias, alpha, beta, norm=norm,
                                                    norm_tensors=norm_tensors))


def product_keys(facts: dict, a, b, out_dtype, bias=None, alpha=1, beta=0) -> list[str]:
    """The launch keys of ``planned_product``'s plan for operands laid out as these (meta tensors will do)."""
    return _product_keys(facts, a, b, out_dtype, bias, alpha, beta)


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
    "wide" (untuned, ``gemm_wide``), "dense" (batch dims past ``MAX_BATCH_RANK``: contiguous copies), "gemv", "planes"
    (float32 on bfloat16 parts: split in registers or as planes in memory, or for a batch of matrices
    split in registers or true float32, as the key's setting says) and "gemm"."""
    m, k = a.shape[-2:]
    n = b.shape[-1]
    batch = S.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    out_shape = (*batch, m, n)
    if S.numel(out_shape) == 0:
        return "empty", None
    if a.dtype.name in _WIDE:
        return "wide", None
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
    if planes and k > 0 and _by_planes(a.dtype, facts):
        return "planes", gemm_key(facts, batches, m, n, k, a.dtype, out_dtype, a.stride(-1), b.stride(-1),
                                  planes=True)
    return "gemm", gemm_key(facts, batches, m, n, k, a.dtype, out_dtype, a.stride(-1), b.stride(-1))


def _meta(shape, dtype) -> Tensor:
    return new_tensor(shape, dtype, resolve("meta"))


def _product_keys(facts: dict, a, b, out_dtype, bias=None, alpha=1, beta=0) -> list[str]:
    """The launch keys ``_product`` forms for operands laid out as these (meta tensors will do); of a
    product on bfloat16 parts, its own and those of its planes form's GEMMs (which its tuning times)."""
    route, key = _product_route(a, b, out_dtype, bias, beta, facts)
    if route == "planes" and _batch_count(a, b) == 1:
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


def _batch_count(a, b) -> int:
    """The matrices a product of these operands multiplies (its broadcast batch)."""
    return S.numel(S.broadcast_shapes(a.shape[:-2], b.shape[:-2]))


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


def _plan_product(op: str, a: Tensor, b: Tensor, out_dtype, bias, alpha, beta, planes: bool = True,
                  norm: ProductNorm | None = None, norm_tensors: tuple = ()):
    """``execute(a, b, bias, out=None, norm_tensors=()) -> out`` for operands laid out as these are (tuning on
    them if needed); ``planes=False`` keeps a float32 product off bfloat16 planes (to sweep its own GEMM
    settings); ``norm``: the batch norm its epilogue applies, of vectors laid out as ``norm_tensors``. Every
    route of a float product takes it where the result is written: the GEMM's, the GEMV's, a split's sum
    (``gemv_combine``), a wave split's last-arriving piece, a batch's persistent programs and the last K chunk
    of a planes product."""
    dev = a.device
    m, k = a.shape[-2:]
    n = b.shape[-1]
    batch = S.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    out_shape = (*batch, m, n)
    facts = backend_for(dev).facts
    route, key = _product_route(a, b, out_dtype, bias, beta, facts, planes)
    if route == "empty":
        return lambda a, b, bias, out=None, norm_tensors=(): new_tensor(out_shape, out_dtype, dev)
    if norm is not None and route in ("wide", "dense"):
        raise RuntimeError(f"{op}: a product routed {route!r} takes no batch norm in its epilogue")
    out = new_tensor(out_shape, out_dtype, dev)
    has_bias = bias is not None and beta != 0
    wide = route == "wide"
    if wide and out_dtype.kind != "float" and any(isinstance(scalar, float) for scalar in (alpha, beta)):
        raise RuntimeError(f"{op}: for integral input tensors, alpha and beta must be integers, got alpha={alpha!r} "
                           f"and beta={beta!r}")
    if out_dtype.kind == "int" and not wide and (alpha != 1 or has_bias):
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
        def dense(a, b, bias, out=None, norm_tensors=()):
            product = _product(op, a.expand(*batch, m, k).contiguous(), b.expand(*batch, k, n).contiguous(),
                               lambda: out_dtype, bias.expand(*out_shape).contiguous() if has_bias else None, alpha,
                               beta if has_bias else 0)
            return product if out is None else out.copy_(product)
        return dense
    index_64 = needs_index_64(a, b, out, *([bias] if has_bias else []))
    if wide:
        return _wide_launches(a, b, out, m, n, k, alpha, beta, has_bias, scaled, bias_strides,
                              *_pad_batch(shape_c, a_bs, b_bs, bias_bs, out_bs), index_64)
    norm_args, norm_constexprs = norm_launch_parts(norm)
    flags = dict(_operand_flags(a.dtype, out_dtype, bias if has_bias else None, dev, facts), **norm_constexprs)
    batches = S.numel(shape_c)
    a_sm, a_sk = a.stride()[-2:]
    b_sk, b_sn = b.stride()[-2:]
    if route == "gemv":
        bias2 = bias.expand(*out.shape).reshape(m, n) if has_bias else None
        run_gemv = _gemv_launches(key, a.reshape(m, k), b.reshape(k, n), bias2, out.view(m, n), m, n, k, alpha, beta,
                                  has_bias, scaled, flags, facts, dev, index_64, norm, norm_tensors)
        return _executing(run_gemv, out_shape, out_dtype, dev)
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
        """``run(a, b, bias, out, norm_tensors=())`` for ``config``, its launches (one per MAX_GRID_Y batches)
        built once."""
        if config.get("PLANES"):
            return _staged_planes(op, a, b, bias if has_bias else None, alpha, beta if has_bias else 0, out_shape,
                                  norm, norm_tensors)
        if single and any(config.get(f) for f in _TILE_FLAGS):
            return _tile_launches(config, dev, facts, m, n, k, float(alpha), float(beta), a.dtype, has_bias, scaled,
                                  flags, (a_sm, a_sk, b_sk, b_sn, bias_sm, bias_sn, out_sm, out_sn), norm_args)
        if config.get("PROGRAMS_PER_SM"):
            return _batch_launches(config, dev, m, n, k, float(alpha), float(beta), has_bias, scaled,
                                   _with_precision(flags, config, a.dtype), index_64,
                                   (shape_c, a_bs, b_bs, bias_bs, out_bs),
                                   (a_sm, a_sk, b_sk, b_sn, bias_sm, bias_sn, out_sm, out_sn), norm_args)
        splits = _split_count(config, m, n, k, a.dtype) if single else 1
        if splits > 1:
            return _split_launches(config, splits, dev, m, n, k, float(alpha), float(beta), has_bias, scaled,
                                   _with_precision(flags, config, a.dtype),
                                   (a_sm, a_sk, b_sk, b_sn, bias_sm, bias_sn, out_sm, out_sn), norm)
        tiles = cdiv(m, config["BLOCK_M"]) * cdiv(n, config["BLOCK_N"])
        constexprs = dict(BATCH_RANK=len(shape_c), BLOCK_M=config["BLOCK_M"], BLOCK_N=config["BLOCK_N"],
                          BLOCK_K=config["BLOCK_K"], GROUP_M=config["GROUP_M"], EVEN_K=k % config["BLOCK_K"] == 0,
                          **_even_edges(config, m, n), SPLIT=False, HAS_BIAS=has_bias, SCALED=scaled, INDEX_64=index_64,
                          num_warps=config["num_warps"], num_stages=config["num_stages"],
                          **_with_precision(flags, config, a.dtype))
        launches = [PlannedLaunch(K.gemm, (tiles, min(MAX_GRID_Y, batches - start)),
                                  [Slot("a"), Slot("b"), Slot("bias"), Slot("out"), Slot("out"), m, n, k, k, start,
                                   float(alpha), float(beta), *norm_args, shape_c, a_bs, b_bs, bias_bs, out_bs, a_sm,
                                   a_sk, b_sk, b_sn, bias_sm, bias_sn, out_sm, out_sn], constexprs)
                    for start in range(0, batches, MAX_GRID_Y)]

        def run(a, b, bias, out, norm_tensors=()):
            tensors = {"a": a, "b": b, "bias": bias if has_bias else out, "out": out,
                       **dict(zip(NORM_SLOTS, norm_tensors))}
            for planned in launches:
                planned(dev, tensors)
        return run

    def candidates():
        if not parts:
            return gemm_candidates(facts, m, n, k, a.dtype, single=single, batches=batches)
        registers = gemm_candidates(facts, m, n, k, a.dtype, single=single, parts=True, batches=batches)
        if batches == 1:  # the one-launch form's tiles, then the planes form
            return registers + [dict(PLANES=True)]
        # a batch of small matrices (attention's scores and context) has no planes form (planes per matrix
        # are launches and passes its short K cannot repay); true float32 on the FMA units, as accurate,
        # may be faster there
        return registers + [dict(config, PRECISION=IEEE)
                            for config in gemm_candidates(facts, m, n, k, a.dtype, batches=batches)]
    config = tuning.choose_timed(key, facts, candidates,
                                 lambda config: functools.partial(launches_for(config), a, b, bias, out, norm_tensors))
    return _executing(launches_for(config), out_shape, out_dtype, dev)


def _executing(run, out_shape, out_dtype, dev):
    """A product plan's call: ``run(a, b, bias, out, norm_tensors)``'s launches into ``out`` (laid out as the
    plan's output), else into a fresh tensor, which it returns."""
    fresh_output = fresh_tensor_maker(out_shape, out_dtype, dev)

    def execute(a, b, bias, out=None, norm_tensors=()):
        out = fresh_output() if out is None else out
        run(a, b, bias, out, norm_tensors)
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


def _staged_planes(op: str, a: Tensor, b: Tensor, bias: Tensor | None, alpha, beta, out_shape: tuple,
                   norm: ProductNorm | None = None, norm_tensors: tuple = ()):
    """``run(a, b, bias, out, norm_tensors=())`` through planes in memory (``_planes_launches``) for operands
    laid out as these, every batch extent 1 (``bias`` None when beta is 0): the planes form of a product on
    bfloat16 parts."""
    (m, k), n = a.shape[-2:], b.shape[-1]

    def as_matrices(a, b, bias):
        # every batch extent is 1: reshapes are views, and 2-D operands need none
        return (a if a.ndim == 2 else a.reshape(m, k), b if b.ndim == 2 else b.reshape(k, n),
                None if bias is None else bias if bias.shape == (m, n) else bias.expand(*out_shape).reshape(m, n))
    run_planes = _planes_launches(op, *as_matrices(a, b, bias), alpha, beta, a.device, norm, norm_tensors)

    def run(a, b, bias, out, norm_tensors=()):
        run_planes(*as_matrices(a, b, bias if beta != 0 else None), out if out.ndim == 2 else out.view(m, n),
                   norm_tensors)
    return run


def _planes_launches(op: str, a: Tensor, b: Tensor, bias: Tensor | None, alpha, beta, dev,
                     norm: ProductNorm | None = None, norm_tensors: tuple = ()):
    """``run(a, b, bias, out, norm_tensors=())`` for a float32 m x k by k x n product laid out as these 2-D
    views are (``bias`` m x n, or None when beta is 0), through bfloat16 planes, K in chunks
    (``_plane_chunk_width``), each chunk's product added to the last through the GEMM's epilogue, the last
    chunk's also applying ``norm``. Launches and the chunks' products are planned here. A call takes one
    buffer for every chunk's planes (the chunks run one after another) and, past one chunk, one m x n
    temporary: the chunks' products alternate between it and the output, so that the last lands in the
    output."""
    (m, k), n = a.shape, b.shape[1]
    float32 = get_dtype("float32")
    steps = []
    chunks = _plane_chunks(m, n, k)
    for start, kc in chunks:
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
        last_chunk = start == chunks[-1][0]
        product = _plan_product(op, planes["a_planes"], planes["b_planes"], float32, addend if weight != 0 else None,
                                alpha, weight, norm=norm if last_chunk else None,
                                norm_tensors=norm_tensors if last_chunk else ())
        steps.append((start, kc, splits, workspace, product, weight))

    planes_bytes = max(workspace.nbytes for _, _, _, workspace, _, _ in steps)
    uint8 = get_dtype("uint8")

    def run(a, b, bias, out, norm_tensors=()):
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
                           out if (len(steps) - 1 - index) % 2 == 0 else spare,
                           norm_tensors if index == len(steps) - 1 else ())
    return run


def _even_edges(config: dict, m: int, n: int) -> dict:
    """``gemm``'s EVEN_M / EVEN_N: whether m and n are multiples of the setting's blocks (no tile has an edge to
    guard, so its rows and columns load as they are, contiguous where the operand is)."""
    return dict(EVEN_M=m % config["BLOCK_M"] == 0, EVEN_N=n % config["BLOCK_N"] == 0)


def _with_precision(flags: dict, config: dict, dtype) -> dict:
    """The operand flags, with the dot precision a config may name: ``IEEE`` (true float32, a candidate of a
    batch's key on bfloat16 parts) or, in benchmark sweeps only, emulated float32 (no tuning candidate
    names one, so float32 stays as accurate as float32 unless the user opts out)."""
    if "PRECISION" not in config:
        return flags
    precision = config["PRECISION"]
    # the interpreter widens bfloat16 tiles and parts to float32 for its dots; float32 tiles go in as they are
    widened = flags["INTERPRETED"] and (dtype.name == "bfloat16" or precision == K.PRECISION_BF16_PARTS.value)
    return dict(flags, PRECISION=precision, DECODE_BF16=widened)


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


def _wide_launches(a, b, out, m, n, k, alpha, beta, has_bias, scaled, bias_strides, shape_c, a_bs, b_bs, bias_bs,
                   out_bs, index_64):
    """``execute(a, b, bias, out=None, norm_tensors=()) -> out`` (a fresh one unless given; no norm) through
    ``gemm_wide``: integer products summed exactly in int64 (the
    matrix unit takes no int64 operands, and int32 ones on few targets), float64 ones in float64 (alpha and
    beta passed as their bits), one launch per MAX_GRID_Y batches. Its tiles are fixed (a tile's K x 64-bit
    partial products live in registers), not tuned."""
    dev = a.device
    batches = S.numel(shape_c)
    block_m, block_n, block_k = (max(2, min(limit, next_pow2(extent)))
                                 for limit, extent in zip(_WIDE_TILE, (m, n, k)))
    tiles = cdiv(m, block_m) * cdiv(n, block_n)
    floating = out.dtype.kind == "float"
    constexprs = dict(BATCH_RANK=len(shape_c), BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, HAS_BIAS=has_bias,
                      SCALED=scaled, INDEX_64=index_64, INTERPRETED=bool(backend_for(dev).facts["kernels"].get(
                          "interpreted")), FLOAT=floating, num_warps=4)
    (a_sm, a_sk), (b_sk, b_sn) = a.stride()[-2:], b.stride()[-2:]
    alpha, beta = (encode_scalar(x, out.dtype) if floating else int(x) for x in (alpha, beta))
    launches = [PlannedLaunch(K.gemm_wide, (tiles, min(MAX_GRID_Y, batches - start)),
                              [Slot("a"), Slot("b"), Slot("bias"), Slot("out"), m, n, k, start, alpha, beta,
                               shape_c, a_bs, b_bs, bias_bs, out_bs, a_sm, a_sk, b_sk, b_sn, *bias_strides[-2:],
                               *out.stride()[-2:]], constexprs)
                for start in range(0, batches, MAX_GRID_Y)]
    fresh_output = fresh_tensor_maker(out.shape, out.dtype, dev)

    def execute(a, b, bias, out=None, norm_tensors=()):
        out = fresh_output() if out is None else out
        tensors = {"a": a, "b": b, "bias": bias if has_bias else out, "out": out}
        for planned in launches:
            planned(dev, tensors)
        return out
    return execute


# the tile of ``gemv_combine`` summing a split GEMM's partials
_COMBINE_BLOCK_M, _COMBINE_BLOCK_N = 32, 64


def _split_count(config: dict, m: int, n: int, k: int, dtype) -> int:
    """The K pieces a setting splits an m x n x k product into: its ``SPLITS``, chosen on its key's largest
    shape, at most ``split_max`` of this one (the partials the cost rule declares), half precision only."""
    return min(config.get("SPLITS", 1), split_max(m, n, k, dtype.itemsize)) if dtype.itemsize == 2 else 1


def _split_launches(config, splits, dev, m, n, k, alpha, beta, has_bias, scaled, flags, strides, norm=None):
    """``run(a, b, bias, out, norm_tensors=())`` for one matrix with K split in ``splits`` pieces (whole K
    steps each): ``gemm`` writes each piece's float32 sums to a (splits, m, n) temporary, ``gemv_combine``
    adds them in split order and applies the epilogue (``norm`` too)."""
    a_sm, a_sk, b_sk, b_sn, bias_sm, bias_sn, out_sm, out_sn = strides
    # the pieces store partials, which take no epilogue
    no_norm_args, no_norm_constexprs = norm_launch_parts(None)
    block_k = config["BLOCK_K"]
    k_per_split = cdiv(cdiv(k, splits), block_k) * block_k
    splits = cdiv(k, k_per_split)
    tiles = cdiv(m, config["BLOCK_M"]) * cdiv(n, config["BLOCK_N"])
    main = PlannedLaunch(
        K.gemm, (tiles, 1, splits),
        [Slot("a"), Slot("b"), Slot("bias"), Slot("out"), Slot("partial"), m, n, k, k_per_split, 0, alpha, beta,
         *no_norm_args, (1,), (0,), (0,), (0,), (0,), a_sm, a_sk, b_sk, b_sn, bias_sm, bias_sn, out_sm, out_sn],
        dict(BATCH_RANK=1, BLOCK_M=config["BLOCK_M"], BLOCK_N=config["BLOCK_N"], BLOCK_K=block_k,
             GROUP_M=config["GROUP_M"], EVEN_K=k % block_k == 0, **_even_edges(config, m, n), SPLIT=True,
             HAS_BIAS=has_bias, SCALED=scaled,
             INDEX_64=False, num_warps=config["num_warps"], num_stages=config["num_stages"],
             **dict(flags, **no_norm_constexprs)))
    norm_args, norm_constexprs = norm_launch_parts(norm)
    combine = PlannedLaunch(
        K.gemv_combine, (cdiv(n, _COMBINE_BLOCK_N), cdiv(m, _COMBINE_BLOCK_M)),
        [Slot("partial"), Slot("bias"), Slot("out"), m, n, splits, alpha, beta, *norm_args, bias_sm, bias_sn, out_sm,
         out_sn],
        dict(BLOCK_M=_COMBINE_BLOCK_M, BLOCK_N=_COMBINE_BLOCK_N, HAS_BIAS=has_bias, SCALED=scaled,
             BIAS_FORMAT=flags["BIAS_FORMAT"], DST_FORMAT=flags["DST_FORMAT"], VIA_F32=flags["VIA_F32"], PDL=False,
             num_warps=4, **norm_constexprs))
    float32 = get_dtype("float32")

    def run(a, b, bias, out, norm_tensors=()):
        tensors = {"a": a, "b": b, "bias": bias if has_bias else out, "out": out,
                   "partial": scratch_tensor((splits, m, n), float32, dev), **dict(zip(NORM_SLOTS, norm_tensors))}
        main(dev, tensors)
        combine(dev, tensors)
    return run


def _batch_launches(config, dev, m, n, k, alpha, beta, has_bias, scaled, flags, index_64, batch_strides, strides,
                    norm_args):
    """``run(a, b, bias, out, norm_tensors=())`` for a batch of matrices through ``gemm_batches``:
    ``PROGRAMS_PER_SM`` programs a SM (at most one an item) walking the (matrix, tile) items."""
    shape_c, a_bs, b_bs, bias_bs, out_bs = batch_strides
    items = S.numel(shape_c) * cdiv(m, config["BLOCK_M"]) * cdiv(n, config["BLOCK_N"])
    programs = min(items, config["PROGRAMS_PER_SM"] * multiprocessors(dev))
    launch = PlannedLaunch(
        K.gemm_batches, (programs,),
        [Slot("a"), Slot("b"), Slot("bias"), Slot("out"), m, n, k, S.numel(shape_c), programs, alpha, beta,
         *norm_args, shape_c, a_bs, b_bs, bias_bs, out_bs, *strides],
        dict(BATCH_RANK=len(shape_c), BLOCK_M=config["BLOCK_M"], BLOCK_N=config["BLOCK_N"], BLOCK_K=config["BLOCK_K"],
             GROUP_M=config["GROUP_M"], EVEN_K=k % config["BLOCK_K"] == 0, **_even_edges(config, m, n),
             FLATTEN=bool(config.get("FLATTEN")),
             HAS_BIAS=has_bias, SCALED=scaled, INDEX_64=index_64, num_warps=config["num_warps"],
             num_stages=config["num_stages"], **flags))

    def run(a, b, bias, out, norm_tensors=()):
        launch(dev, {"a": a, "b": b, "bias": bias if has_bias else out, "out": out,
                     **dict(zip(NORM_SLOTS, norm_tensors))})
    return run


def _tile_launches(config, dev, facts, m, n, k, alpha, beta, dtype, has_bias, scaled, flags, strides, norm_args):
    """``run(a, b, bias, out, norm_tensors=())`` through ``gemm_tiles`` for one matrix. A TMA config whose
    operands cannot be read by descriptors (strides here, or an address off 16 bytes at a call) reads through
    pointers. A ``SPLITS`` config splits the tiles of the last wave (``_wave_split``), their pieces' float32
    blocks in a temporary."""
    a_sm, a_sk, b_sk, b_sn, bias_sm, bias_sn, out_sm, out_sn = strides
    tiles = cdiv(m, config["BLOCK_M"]) * cdiv(n, config["BLOCK_N"])
    sms = multiprocessors(dev)
    whole, splits, depth = _wave_split(config, tiles, sms, m, n, k, dtype.itemsize) if config.get("SPLITS") \
        else (tiles, 1, k)
    units = whole + (tiles - whole) * splits
    programs = min(units, sms) if config.get("PERSISTENT") else units
    tma, b_k_major = _tma_layout(dtype, a_sm, a_sk, b_sk, b_sn) if config.get("TMA") else (False, False)

    def planned(use_tma):
        constexprs = dict(BLOCK_M=config["BLOCK_M"], BLOCK_N=config["BLOCK_N"], BLOCK_K=config["BLOCK_K"],
                          GROUP_M=config["GROUP_M"], TMA=use_tma, B_K_MAJOR=use_tma and b_k_major,
                          FLATTEN=bool(config.get("FLATTEN")), WARP_SPECIALIZE=bool(config.get("WARP_SPECIALIZE")),
                          SPLIT=splits > 1, EVEN_K=k % config["BLOCK_K"] == 0, HAS_BIAS=has_bias, SCALED=scaled,
                          num_warps=config["num_warps"], num_stages=config["num_stages"],
                          **_with_precision(flags, config, dtype))
        return PlannedLaunch(K.gemm_tiles, (programs,),
                             [Slot("a"), Slot("b"), Slot("bias"), Slot("out"), Slot("partial"), Slot("counters"), m,
                              n, k, programs, whole, splits, depth, alpha, beta, *norm_args, a_sm, a_sk, b_sk, b_sn,
                              bias_sm, bias_sn, out_sm, out_sn], constexprs)
    launch = planned(tma)
    fallback = planned(False) if tma else None
    partial_shape = ((tiles - whole) * splits * config["BLOCK_M"] * config["BLOCK_N"],)
    float32 = get_dtype("float32")

    def run(a, b, bias, out, norm_tensors=()):
        tensors = {"a": a, "b": b, "bias": bias if has_bias else out, "out": out, "partial": out, "counters": out,
                   **dict(zip(NORM_SLOTS, norm_tensors))}
        if splits > 1:
            tensors.update(partial=scratch_tensor(partial_shape, float32, dev), counters=arrival_counters(dev))
        if fallback is not None and (a.data_ptr() | b.data_ptr()) & 15:
            fallback(dev, tensors)
            return
        launch(dev, tensors)
    return run


def _pad_batch(shape, *stride_sets):
    if shape:
        return (tuple(shape), *(tuple(s) for s in stride_sets))
    return ((1,), *((0,) for _ in stride_sets))
