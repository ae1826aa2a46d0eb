"""Attention: scaled_dot_product_attention (torch's signature and semantics, one fused launch), decode
attention for one query token (split over the keys, combined in a fixed order), attention over a paged KV
cache, the cache append that fills its pages, and rotary position embeddings.

Everything accumulates in float32 and returns the query's dtype. A query row that sees no key (a fully
masked row) returns zeros, as torch does. Grouped-query heads read their shared K/V head in place:
query head h uses key head h // (H_q // H_kv), nothing is expanded in memory.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from .. import shape as S
from .. import tuning
from ..allocation import Workspace, fresh_tensor_maker, new_tensor, scratch_scope, workspace_bytes
from ..device import backend_for, resolve
from ..dtypes import get_dtype
from ..kernels import attention as K
from ..kernels import attention_wgmma as KW
from ..kernels.formats import FORMAT_BFLOAT16, FORMAT_NATIVE
from ..kernels.matmul import PRECISION_BF16_PARTS
from ..launch import cdiv, dependent_launch, launch, next_pow2
from ..lowering import conversion_flags, float_format, needs_index_64
from ..tensor import Tensor
from . import matmul_plans
from .matmul_plans import IEEE, _dot_precision
from .plans import PlanCache, PlannedLaunch, Slot, layout_key, run_launches
from .registry import Cost, TensorMeta, family_samples, get, nbytes, register
from .samples import Samples, by_name, operand, sample

_FLOAT_DTYPES = ("float32", "float16", "bfloat16")
# scaled_dot_product_attention also takes float64, through the product form alone (``_product_form``)
_SDPA_DTYPES = (*_FLOAT_DTYPES, "float64")
MAX_HEAD_DIM = 256
MAX_GRID_YZ = 65535
# decode splits the keys of a sequence into about this many parts (fewer for short sequences); a function
# of the key count, the device class and the model's kv heads, never of the batch, so a sequence's result
# does not depend on the batch it is in
_DECODE_SPLITS = {True: 4, False: 16}
_DECODE_MOST_SPLITS = 64
# splits past the default keep at least this many keys each: at batch 64 and 4096 keys, 64 splits of 64
# keys (32768 programs and their partials) ran 16% slower than 16 splits
_DECODE_SPLIT_KEYS = 256
# and every split at least this many (a short sequence takes fewer than the default, down to one): at batch
# 64, 128 keys in 16 splits of 8 ran at 0.71x torch, in one split at 1.0x (H100)
_DECODE_SPLIT_MIN_KEYS = 128


def _dims(shape) -> str:
    return "(" + ", ".join(str(n) for n in shape) + ")"


# ---- checks and meta ------------------------------------------------------------------------------------
def _check_operands(op: str, query, key, value, max_head_dim: int | None = MAX_HEAD_DIM, dtypes=_FLOAT_DTYPES):
    for name, t in (("query", query), ("key", key), ("value", value)):
        if len(t.shape) < 2:
            raise RuntimeError(f"{op}: {name} must have at least 2 dims (..., length, dim), got shape "
                               f"{_dims(t.shape)}")
        if t.dtype.name not in dtypes:
            raise TypeError(f"{op}: {name} is {t.dtype.name}; attention takes {', '.join(dtypes)}")
    if not (query.dtype is key.dtype is value.dtype):
        raise RuntimeError(f"{op}: query, key and value must share a dtype, got {query.dtype.name}, "
                           f"{key.dtype.name} and {value.dtype.name}")
    if query.shape[-1] != key.shape[-1]:
        raise RuntimeError(f"{op}: query {_dims(query.shape)} and key {_dims(key.shape)} differ in their last "
                           f"dim (head dim {query.shape[-1]} vs {key.shape[-1]})")
    if key.shape[-2] != value.shape[-2]:
        raise RuntimeError(f"{op}: key {_dims(key.shape)} and value {_dims(value.shape)} differ in length "
                           f"(dim -2: {key.shape[-2]} vs {value.shape[-2]})")
    for name, t in (("query/key", key), ("value", value)):
        if max_head_dim is not None and (t.shape[-1] > max_head_dim or query.shape[-1] > max_head_dim):
            raise RuntimeError(f"{op}: head dims up to {max_head_dim} are supported, got {name} "
                               f"{_dims(t.shape)}")


def _kv_lead(op: str, query, key, value, enable_gqa: bool) -> tuple:
    """The leading dims K and V are read with (query's, except the head count under GQA); raises when
    they do not fit the query's."""
    q_lead = tuple(query.shape[:-2])
    for name, t in (("key", key), ("value", value)):
        lead = tuple(t.shape[:-2])
        if enable_gqa and len(q_lead) >= 1 and len(lead) >= 1:
            target = (*q_lead[:-1], lead[-1])
        else:
            target = q_lead
        try:
            fits = len(lead) <= len(target) and S.broadcast_shapes(lead, target) == target
        except (RuntimeError, ValueError):
            fits = False
        if not fits:
            raise RuntimeError(f"{op}: {name} {_dims(t.shape)} does not fit query {_dims(query.shape)}: leading "
                               f"dims {_dims(lead)} must broadcast to {_dims(target)}")
    if enable_gqa and len(q_lead) >= 1:
        q_heads = q_lead[-1]
        k_heads, v_heads = (key.shape[-3] if len(key.shape) >= 3 else 1), (value.shape[-3] if len(value.shape) >= 3
                                                                             else 1)
        if k_heads != v_heads:
            raise RuntimeError(f"{op}: key {_dims(key.shape)} and value {_dims(value.shape)} must have the same "
                               f"number of heads (dim -3)")
        if q_heads % k_heads:
            raise RuntimeError(f"{op}: enable_gqa needs the query's head count to be a multiple of the key's, got "
                               f"query {_dims(query.shape)} ({q_heads} heads) and key {_dims(key.shape)} "
                               f"({k_heads} heads)")
    return q_lead


def _check_mask(op: str, attn_mask, query, key):
    if attn_mask is None:
        return
    if attn_mask.dtype.name != "bool" and attn_mask.dtype is not query.dtype:
        raise TypeError(f"{op}: attn_mask must be bool or the query's dtype {query.dtype.name}, got "
                        f"{attn_mask.dtype.name}")
    target = (*query.shape[:-1], key.shape[-2])
    try:
        fits = len(attn_mask.shape) <= len(target) and S.broadcast_shapes(tuple(attn_mask.shape), target) == target
    except (RuntimeError, ValueError):
        fits = False
    if not fits:
        raise RuntimeError(f"{op}: attn_mask {_dims(attn_mask.shape)} does not broadcast to the scores' shape "
                           f"{_dims(target)}")


def _sdpa_result(query, key, value, attn_mask, enable_gqa) -> TensorMeta:
    op = "scaled_dot_product_attention"
    # wider heads and float64 take the product form
    _check_operands(op, query, key, value, max_head_dim=None, dtypes=_SDPA_DTYPES)
    _kv_lead(op, query, key, value, enable_gqa)
    _check_mask(op, attn_mask, query, key)
    return TensorMeta((*query.shape[:-1], value.shape[-1]), query.dtype)


def _sdpa_meta(a):
    return _sdpa_result(a.query, a.key, a.value, a.attn_mask, a.enable_gqa)


def _product_form(query, value) -> bool:
    """Whether head dims pass the kernels' MAX_HEAD_DIM (the SD VAE's one 512-wide head) or the operands are
    float64, which no attention kernel takes: such attention materialises its scores, as torch's math backend
    does, through the registry's products and softmax."""
    return max(query.shape[-1], value.shape[-1]) > MAX_HEAD_DIM or query.dtype.name == "float64"


def _kv_heads(t) -> int:
    return t.shape[-3] if len(t.shape) >= 3 else 1


def _product_form_groups(query, key, enable_gqa: bool) -> int:
    """How many query heads share a key head in the product form: past 1 its key and value heads are
    repeated to the query's (``repeat_interleave``), as torch's math backend does under enable_gqa."""
    return _kv_heads(query) // _kv_heads(key) if enable_gqa and len(query.shape) >= 3 and len(key.shape) >= 3 else 1


def _repeated_heads(t, groups: int) -> TensorMeta:
    """The meta of ``t`` with each head repeated ``groups`` times (dim -3)."""
    return TensorMeta((*t.shape[:-3], t.shape[-3] * groups, *t.shape[-2:]), t.dtype)


def _product_form_temporaries(query, key, value, groups: int) -> list:
    """The product form's two products, as pairs of operand metas, and the metas of its temporaries:
    the repeated key and value heads (``groups`` past 1), the scaled query, the scores, the masked scores,
    the weights, and the product before it takes the output's layout."""
    repeated = [_repeated_heads(key, groups), _repeated_heads(value, groups)] if groups > 1 else []
    if repeated:
        key, value = repeated
    meta = _sdpa_result(query, key, value, None, False)
    scores = TensorMeta((*query.shape[:-1], key.shape[-2]), query.dtype)
    key_t = TensorMeta((*key.shape[:-2], key.shape[-1], key.shape[-2]), key.dtype)
    return ([(query, key_t), (scores, value)],
            [*repeated, TensorMeta(tuple(query.shape), query.dtype), scores, scores, scores, meta])


def _sdpa_cost(a):
    query, key, value, attn_mask, is_causal = a.query, a.key, a.value, a.attn_mask, a.is_causal
    out = _sdpa_meta(a)
    if _product_form(query, value):
        groups = _product_form_groups(query, key, a.enable_gqa)
        products, temporaries = _product_form_temporaries(query, key, value, groups)
        # the bools of the mask made (ones, tril, not) or the given one negated
        masks = ([query.shape[-2] * key.shape[-2]] * 3 if is_causal else
                 [S.numel(attn_mask.shape)] if attn_mask is not None and attn_mask.dtype.name == "bool" else [])
        costs = [get("matmul").cost(x, y) for x, y in products]
        scores = products[1][0]
        return Cost(flops=sum(c.flops for c in costs) + 5 * S.numel(scores.shape),
                    bytes_read=sum(c.bytes_read for c in costs), bytes_written=nbytes(out),
                    workspace=workspace_bytes(*(nbytes(t) for t in temporaries), *masks)
                    + sum(c.workspace for c in costs))
    rows = S.numel(query.shape[:-1])  # B * H * L
    keys = key.shape[-2]
    flops = 2 * rows * keys * (query.shape[-1] + value.shape[-1])  # 4 B H L S E when E == Ev
    if is_causal:
        flops //= 2
    read = nbytes(query) + nbytes(key) + nbytes(value) + (nbytes(attn_mask) if attn_mask is not None else 0)
    return Cost(flops=flops, bytes_read=read, bytes_written=nbytes(out),
                workspace=_decode_workspace(query, keys, value.shape[-1], is_causal) if query.shape[-2] == 1 else 0)


def _decode_workspace(query, keys: int, value_dim: int, causal: bool) -> int:
    """The most bytes the split-K partials of ``_decode`` take on any device (the rule knows none): the
    splits, at most the largest target of any setting, and at most one per 16 keys (the smallest tile)."""
    keys = 1 if causal else keys
    if not keys or not S.numel(query.shape):
        return 0
    target = max(*_DECODE_SPLITS.values(), _DECODE_MOST_SPLITS, *(shape[1] for shape in _DECODE_SHAPES))
    splits = min(target, cdiv(keys, 16))
    rows = S.numel(query.shape[:-1])  # batch x heads: one query row each
    f32 = get_dtype("float32")
    return Workspace.bytes_for(_decode_partials(rows, splits, max(16, next_pow2(value_dim)), f32))


def _decode_partials(rows: int, splits: int, block_dv: int, f32) -> dict:
    """The decode's temporaries for ``rows`` (batch x heads) query rows: per split, an accumulator and the
    softmax's running max and sum."""
    return {"part_acc": ((rows, splits, block_dv), f32), "part_max": ((rows, splits), f32),
            "part_sum": ((rows, splits), f32)}


# ---- layout helpers --------------------------------------------------------------------------------------
def _as_4d(t: Tensor) -> Tensor:
    """(B, H, L, E): leading dims merged into B (a view up to rank 4), missing ones added as 1."""
    while t.ndim < 4:
        t = t.unsqueeze(0)
    if t.ndim > 4:
        if t.device.type == "meta" and not _merges(tuple(t.shape), tuple(t.stride())):
            return new_tensor((S.numel(t.shape[:-3]), *t.shape[-3:]), t.dtype, t.device)  # a copy's layout
        t = t.reshape(-1, *t.shape[-3:])
    return t


def _merges(shape, strides) -> bool:
    """Whether ``_as_4d`` views a tensor of this layout rather than copying it (its leading dims merge)."""
    return len(shape) <= 4 or S.view_strides(shape, strides, (S.numel(shape[:-3]), *shape[-3:])) is not None


def _in_format(dtype, facts) -> int:
    """How kernels read q/k/v: through bfloat16's bits where the interpreter has no bfloat16 arithmetic."""
    interpreted = bool(facts["kernels"].get("interpreted"))
    return FORMAT_BFLOAT16.value if dtype.name == "bfloat16" and interpreted else FORMAT_NATIVE.value


def _mask_setup(attn_mask, scores_shape):
    """(mask tensor or None, kind, element format, its (B, H, L, S) strides with 0 where broadcast)."""
    if attn_mask is None:
        return None, K.MASK_NONE, FORMAT_NATIVE.value, (0, 0, 0, 0)
    full = _as_4d(attn_mask.expand(*scores_shape))
    kind = K.MASK_BOOL if attn_mask.dtype.name == "bool" else K.MASK_ADDITIVE
    return full, kind, float_format(attn_mask.dtype), tuple(full.stride())


# ---- prefill: one fused launch ---------------------------------------------------------------------------
# (BLOCK_M, BLOCK_N, num_warps, num_stages) per head-dim bound, best-known first; float32 halves BLOCK_N
_FORWARD_SHAPES = {
    64: [(128, 64, 4, 3), (128, 128, 8, 3), (64, 64, 4, 3), (128, 32, 4, 4)],
    # the last three (sm_90, compile-checked): 128 x 64 in 4 stages (160 KB of shared memory) or 2 (96 KB, 169
    # registers a thread), and 64 x 64 in 2 stages, small enough (80 KB) for two programs an SM
    128: [(128, 64, 8, 3), (128, 128, 8, 2), (128, 128, 8, 3), (64, 64, 4, 3), (128, 32, 4, 4), (128, 64, 8, 4),
          (128, 64, 8, 2), (64, 64, 4, 2)],
    256: [(64, 32, 4, 2), (64, 64, 8, 2), (128, 32, 8, 2), (32, 32, 4, 2)],
}

# float32 at "highest" precision multiplies on the FMA units, whose dots take tiles of any side: these
# short query tiles (not halved) let a short sequence's few heads spread over the SMs (128 queries of 12
# heads: 12 programs of 128 rows, 96 of 16)
_FORWARD_FMA_SHAPES = {64: [(32, 32, 2, 2), (16, 32, 1, 2), (32, 64, 4, 2)], 128: [(32, 32, 4, 2), (16, 32, 2, 2)],
                       256: [(16, 32, 4, 2)]}

# float32 at "highest" precision on bfloat16 matrix units (``PRECISION_BF16_PARTS``), where the facts list
# them: each product's tiles split into their bfloat16 parts in registers beside the float32 tiles, the
# scores and the accumulator. sm_90 resources (ptxas): at head dim 64, 128 x 64 on 8 warps in 2 stages 128 KB
# of shared memory and 233 registers a thread, 128 x 32 96 KB and 195, 64 x 32 on 4 warps 64 KB (80 KB in 3
# stages) and 200-208, none spilling, where 64 x 64 on 4 or 8 warps and 128 x 32 on 4 spill 70-500 bytes;
# at head dim 128, 128 x 32 on 8 warps 196 KB in 2 stages (160 KB in one), 64 x 32 on 8 warps spills 150
# bytes. Head dim 256 spills kilobytes in every tile that fits: it stays on the FMA units.
_FORWARD_PARTS_SHAPES = {64: [(128, 64, 8, 2), (128, 32, 8, 2), (64, 32, 4, 2), (64, 32, 4, 3), (128, 64, 8, 1)],
                         128: [(128, 32, 8, 2), (128, 32, 8, 1), (64, 32, 8, 2)],
                         256: []}
PARTS = PRECISION_BF16_PARTS.value


# under Triton's interpreter, which pays per program and per operation rather than per element: all keys in
# one tile up to this many, and a program's score tile (its heads' query rows x their keys) up to this many
# elements; longer key runs take the key-tiled kernel in tiles of these sides
_INTERPRETED_MAX_KEYS = 1024
_INTERPRETED_SCORE_ELEMENTS = 1 << 18
_INTERPRETED_BLOCK_M, _INTERPRETED_BLOCK_N = 128, 1024


def interpreted_forward_config(length: int, keys: int, heads: int) -> dict:
    """The interpreter's one setting: as many query heads a program as the score tile holds (a power of
    two, the rows of the heads past the last masked), every query row of a head and all its keys in one
    tile (``attention_forward_heads``); or, past ``_INTERPRETED_MAX_KEYS`` keys, one head a program in
    tiles as wide as the interpreter's bounds (``attention_forward``)."""
    block_n = max(16, next_pow2(keys))
    if block_n > _INTERPRETED_MAX_KEYS:
        return dict(BLOCK_M=max(16, min(_INTERPRETED_BLOCK_M, next_pow2(length))),
                    BLOCK_N=_INTERPRETED_BLOCK_N, num_warps=1, num_stages=1)
    block_m = max(16, min(next_pow2(length), _INTERPRETED_SCORE_ELEMENTS // block_n))
    group = 1
    while group < heads and (2 * group) ** 2 * block_m * block_n <= _INTERPRETED_SCORE_ELEMENTS:
        group *= 2
    return dict(BLOCK_M=block_m, BLOCK_N=block_n, HEADS=group, num_warps=1, num_stages=1)


def forward_candidates(facts: dict, length: int, keys: int, head_dim: int, dtype, heads: int = 1) -> list[dict]:
    """The forward's settings to time. Float32 on bfloat16 parts (``_by_planes``): the true-float32 settings,
    then the parts' (``PRECISION``); under the interpreter, which runs the first, the parts' one."""
    parts = matmul_plans._by_planes(dtype, facts)
    if facts["kernels"].get("interpreted"):
        config = interpreted_forward_config(length, keys, heads)
        return [dict(config, PRECISION=PARTS) if parts else config]
    tiles = facts["tiles"]
    bound = 64 if head_dim <= 64 else 128 if head_dim <= 128 else 256
    seen, out = set(), []
    # float32 tiles take twice the registers and shared memory: their key tiles are halved
    shapes = [(bm, max(16, bn // 2) if dtype.itemsize == 4 else bn, warps, stages, {})
              for bm, bn, warps, stages in _FORWARD_SHAPES[bound]]
    if dtype.itemsize == 4 and _dot_precision(dtype) == IEEE:
        shapes += [(*shape, {}) for shape in _FORWARD_FMA_SHAPES[bound]]
    if parts:
        shapes += [(*shape, {"PRECISION": PARTS}) for shape in _FORWARD_PARTS_SHAPES[bound]]
    for bm, bn, warps, stages, precision in shapes:
        config = dict(BLOCK_M=max(16, min(bm, tiles["max_block_m"], next_pow2(length))),
                      BLOCK_N=max(16, min(bn, tiles["max_block_n"], next_pow2(keys))),
                      num_warps=min(warps, tiles["max_warps"]), num_stages=min(stages, tiles["max_stages"]),
                      **precision)
        marker = tuple(config.values())
        if marker not in seen:
            seen.add(marker)
            out.append(config)
    return out


# kernels/attention_wgmma.py on Hopper's asynchronous matrix unit: (BLOCK_M, BLOCK_N, num_warps, STAGES,
# Q_IN_REGISTERS) per head dim. sm_90 resources at head dim 128: 64 x 64 in 3 stages 112 KB of shared memory
# (two programs an SM) and 164 registers a thread, 200 with the queries in registers; 128 x 64 in 3 stages
# 128 KB and 199 with them
_WGMMA_SHAPES = {
    64: [(64, 64, 4, 3, False), (64, 64, 4, 3, True), (128, 64, 8, 3, False), (128, 128, 8, 2, False)],
    128: [(64, 64, 4, 3, False), (64, 64, 4, 2, False), (64, 64, 4, 3, True), (64, 64, 4, 2, True),
          (128, 64, 8, 3, True)],
}

# its warp-specialised form (``attention_forward_wgmma_ws``): 128-row tiles shared by two computing
# warpgroups and a loading warp, one program an SM; (BLOCK_N, STAGES) per head dim. At head dim 128,
# 64-key tiles in 2 stages take 115 KB of shared memory, 128-key tiles in 2 stages 180 KB. Registers: 168
# a thread at launch (12 warps), re-divided as 240 for each computing warpgroup and 24 for the loader.
# On the H200 128 x 128 led at head dim 128 (10-14% ahead of the pointer kernels) and trailed by 40% at
# head dim 64, S 1024, where one setting stays for longer sequences.
# Taking turns between the warpgroups to issue their products (FlashAttention 3's ping-pong, through two
# more mbarriers) measured within 1% of letting them run free, and was dropped.
_WGMMA_WS_SHAPES = {64: [(128, 2)], 128: [(128, 2), (64, 4), (64, 2)]}
_WGMMA_WS_REGISTERS = 168


# the Gluon forwards by a setting's KERNEL: the kernel, and the settings it takes beyond the common ones
_GLUON_FORWARDS = {"wgmma": (KW.attention_forward_wgmma, ("Q_IN_REGISTERS",)),
                   "wgmma_ws": (KW.attention_forward_wgmma_ws, ("maxnreg",))}


def _starts_aligned(*tensors) -> bool:
    return all(t.data_ptr() % 16 == 0 for t in tensors)


def _rows_aligned(*tensors) -> bool:
    """Whether tensor-memory copies can read these (B, H, rows, dim) views: every row starting on 16
    bytes, so each start and each stride but the last a multiple of 8 16-bit elements."""
    return _starts_aligned(*tensors) and all(st % 8 == 0 for t in tensors for st in t.stride()[:3])


def wgmma_candidates(facts: dict, q, k, v, out, mask, scale: float, index_64: bool) -> list[dict]:
    """Settings of the wgmma forward kernel where it serves these operands (see its module), else none."""
    if (facts.get("matrix_unit", {}).get("instruction") != "wgmma" or facts["kernels"].get("interpreted")
            or q.dtype.name not in ("bfloat16", "float16") or mask is not None or not scale > 0 or index_64
            or q.shape[3] != v.shape[3] or q.shape[3] not in _WGMMA_SHAPES
            or any(t.stride(3) != 1 for t in (q, k, v, out))):
        return []
    out = [dict(KERNEL="wgmma", BLOCK_M=bm, BLOCK_N=bn, num_warps=warps, STAGES=stages, Q_IN_REGISTERS=in_registers)
           for bm, bn, warps, stages, in_registers in _WGMMA_SHAPES[q.shape[3]]]
    if _rows_aligned(q, k, v):
        out += [dict(KERNEL="wgmma_ws", BLOCK_M=128, BLOCK_N=bn, num_warps=4, STAGES=stages,
                     maxnreg=_WGMMA_WS_REGISTERS) for bn, stages in _WGMMA_WS_SHAPES[q.shape[3]]]
    return out


def _common_flags(dtype, out_dtype, dev, facts) -> dict:
    conversion = conversion_flags(get_dtype("float32"), out_dtype, dev)
    return dict(IN_FORMAT=_in_format(dtype, facts), PRECISION=_dot_precision(dtype),
                DST_FORMAT=conversion["DST_FORMAT"], VIA_F32=conversion["VIA_F32"],
                INTERPRETED=bool(facts["kernels"].get("interpreted")))


def _prefill_key(q, k, v, mask, mask_kind, out, scale, causal, facts, softcap=None, q_offset=0, window=None):
    """(launch key, wgmma settings) of ``_prefill`` for (B, H, L, E) operands laid out as these (tensors or
    meta tensors, whose starts count as aligned)."""
    L, E = q.shape[2:]
    index_64 = needs_index_64(q, k, v, out, *([mask] if mask is not None else []))
    # the wgmma kernels know neither caps nor windows nor offsets
    plain = softcap is None and window is None and not q_offset
    wgmma = wgmma_candidates(facts, q, k, v, out, mask, scale, index_64) if plain else []
    # the key names whether the wgmma kernels serve these operands (1: the pointer form, 2: the warp-
    # specialised one too) and whether float32 may multiply on bfloat16 parts, so a setting chosen for them
    # is never handed to operands or a precision they do not serve
    kernels = 0 if not wgmma else 2 if any(c["KERNEL"] == "wgmma_ws" for c in wgmma) else 1
    key = tuning.launch_key("attention", facts, rows={"L": L}, cols={"S": k.shape[2], "E": E}, dtypes=(q.dtype,),
                            flags={"causal": causal, "mask": mask_kind, **({"wgmma": kernels} if wgmma else {}),
                                   **({} if plain else {"softcap": softcap is not None, "window": window is not None}),
                                   **({"bf16_parts": True} if matmul_plans._by_planes(q.dtype, facts) else {})})
    return key, wgmma


def _decode_key(q, mask_kind, heads_per_kv: int, keys: int, value_dim: int, facts) -> str:
    """The launch key of dense decode: ``q`` (B, H_q, E), keyed without the batch."""
    return tuning.launch_key("attention_decode", facts, cols={"S": keys, "E": max(q.shape[2], value_dim)},
                             rows={"G": heads_per_kv}, dtypes=(q.dtype,), flags={"mask": mask_kind})


def _prefill(q, k, v, mask, mask_kind, mask_format, mask_strides, out, heads_per_kv, scale, causal, dev, facts,
             softcap=None, q_offset=0, window=None):
    """The fused forward launch for (B, H, L, E) views, tuned on these tensors; returns (launches,
    temporaries) over the slots q, k, v, mask, out. ``softcap``, ``q_offset`` and ``window`` as
    ``prefill_attention`` takes them (None, 0, None: plain attention)."""
    B, H, L, E = q.shape
    keys, value_dim = k.shape[2], v.shape[3]
    flags = _common_flags(q.dtype, out.dtype, dev, facts)
    index_64 = needs_index_64(q, k, v, out, *([mask] if mask is not None else []))
    key, wgmma = _prefill_key(q, k, v, mask, mask_kind, out, scale, causal, facts, softcap, q_offset, window)

    # without a user mask or a cap and with a positive scale, inner tiles fold the scale into the softmax's
    # exponent
    fold_scale = mask_kind == K.MASK_NONE and scale > 0 and softcap is None
    options = dict(SOFTCAP=softcap is not None, WINDOW=window is not None)

    def planned(config):
        flags_of = dict(flags, PRECISION=config["PRECISION"]) if "PRECISION" in config else flags
        gluon = _GLUON_FORWARDS.get(config.get("KERNEL"))
        if gluon is not None:
            kernel, own_settings = gluon
            return PlannedLaunch(
                kernel, (cdiv(L, config["BLOCK_M"]), H, B),
                [Slot("q"), Slot("k"), Slot("v"), Slot("out"), L, keys, heads_per_kv, scale * K.LOG2_E,
                 *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *out.stride()[:3]],
                dict(HEAD_DIM=E, BLOCK_M=config["BLOCK_M"], BLOCK_N=config["BLOCK_N"], STAGES=config["STAGES"],
                     CAUSAL=causal, num_warps=config["num_warps"], **{name: config[name] for name in own_settings}))
        args = [Slot("q"), Slot("k"), Slot("v"), Slot("mask" if mask is not None else "q"), Slot("out"), L, keys,
                heads_per_kv, scale * K.LOG2_E, (softcap or 1.0) * K.LOG2_E, q_offset, window or 0, *q.stride(),
                *k.stride(), *v.stride(), *mask_strides, *out.stride()]
        if "HEADS" in config:
            return PlannedLaunch(
                K.attention_forward_heads, (cdiv(L, config["BLOCK_M"]), cdiv(H, config["HEADS"]), B), args,
                dict(HEAD_DIM=E, VALUE_DIM=value_dim, BLOCK_M=config["BLOCK_M"], BLOCK_N=config["BLOCK_N"],
                     BLOCK_D=max(16, next_pow2(E)), BLOCK_DV=max(16, next_pow2(value_dim)), CAUSAL=causal,
                     MASK_KIND=mask_kind, MASK_FORMAT=mask_format, INDEX_64=index_64, HEADS=config["HEADS"],
                     HEAD_COUNT=H, **options,
                     **{name: value for name, value in flags_of.items() if name != "INTERPRETED"}))
        return PlannedLaunch(
            K.attention_forward, (cdiv(L, config["BLOCK_M"]), H, B), args,
            dict(HEAD_DIM=E, VALUE_DIM=value_dim, BLOCK_M=config["BLOCK_M"], BLOCK_N=config["BLOCK_N"],
                 BLOCK_D=max(16, next_pow2(E)), BLOCK_DV=max(16, next_pow2(value_dim)), CAUSAL=causal,
                 MASK_KIND=mask_kind, MASK_FORMAT=mask_format, INDEX_64=index_64, num_warps=config["num_warps"],
                 num_stages=config["num_stages"], FOLD_SCALE=fold_scale, **options, **flags_of))
    tensors = {"q": q, "k": k, "v": v, "mask": mask, "out": out}
    config = tuning.choose_timed(key, facts,
                                 lambda: forward_candidates(facts, L, keys, max(E, value_dim), q.dtype, H) + wgmma,
                                 lambda config: functools.partial(planned(config), dev, tensors))
    return [planned(config)], Workspace({})


# ---- decode: split over the keys, then a fixed-order combine ---------------------------------------------
# (BLOCK_N, splits, num_warps, num_stages) of dense decode on a compiling device, the first the untuned
# plan; "splits" is the target count before rounding to whole key tiles. 64-key tiles in 3 stages take 70 KB
# of shared memory (3 programs an SM), in 2 stages about 40 KB; 128-key tiles in 3 stages 136 KB.
_DECODE_SHAPES = [(64, 16, 4, 3), (64, 32, 4, 3), (64, 16, 4, 2), (64, 32, 4, 2), (64, 8, 4, 4), (128, 16, 4, 3),
                  (128, 8, 8, 3), (32, 32, 4, 4)]


def filling_splits(kv_heads: int, keys: int, facts: dict) -> int:
    """The split target that gives one sequence about two waves of programs (kv heads x splits) on a
    device of these facts, from 16 to ``_DECODE_MOST_SPLITS``, past 16 only as far as each split keeps
    ``_DECODE_SPLIT_KEYS`` of the ``keys``, and below 16 where a split would keep fewer than
    ``_DECODE_SPLIT_MIN_KEYS``: a batch of one long sequence (a chat's decode) over 4 or 8 kv heads at 16
    splits leaves half the SMs or more idle, while a large batch is slowed by short splits."""
    programs = 2 * facts.get("multiprocessors_max", 0)
    filling = min(_DECODE_MOST_SPLITS, next_pow2(cdiv(programs, max(kv_heads, 1))))
    splits = max(_DECODE_SPLITS[False], min(filling, keys // _DECODE_SPLIT_KEYS))
    return max(1, min(splits, keys // _DECODE_SPLIT_MIN_KEYS))


def decode_candidates(keys: int, head_dim: int, facts: dict, kv_heads: int) -> list[dict]:
    """Decode settings to time, the first the untuned plan (paged decode's): under the interpreter the fixed
    plan alone; on a compiling device first the split that fills it for ``kv_heads`` heads (past head dim 128
    that alone), then ``_DECODE_SHAPES``."""
    interpreted = bool(facts["kernels"].get("interpreted"))
    default = dict(BLOCK_N=64 if head_dim <= 128 else 32,
                   SPLITS=_DECODE_SPLITS[True] if interpreted else filling_splits(kv_heads, keys, facts), num_warps=4,
                   num_stages=None)
    if interpreted or head_dim > 128:
        return [default]
    filling = (_DECODE_SHAPES[0][0], default["SPLITS"], *_DECODE_SHAPES[0][2:])
    tiles, seen, out = facts["tiles"], set(), []
    for block_n, splits, warps, stages in [filling, *_DECODE_SHAPES]:
        config = dict(BLOCK_N=block_n, SPLITS=splits, num_warps=min(warps, tiles["max_warps"]),
                      num_stages=min(stages, tiles["max_stages"]))
        marker = decode_plan(keys, facts, config) + (config["num_warps"], config["num_stages"])
        if marker not in seen:
            seen.add(marker)
            out.append(config)
    return out


def decode_plan(keys: int, facts: dict, config: dict) -> tuple[int, int, int]:
    """(BLOCK_N, keys per split, splits) for ``keys`` keys under a ``decode_candidates`` setting: a function
    of the key count, the device class and the setting (tuned per key-count bucket, never per batch), so
    the order of every floating-point operation is too, whatever batch a sequence is in."""
    block_n, target = config["BLOCK_N"], config["SPLITS"]
    block_n = max(16, min(block_n, facts["tiles"]["max_block_n"], next_pow2(max(keys, 1))))
    per_split = max(block_n, cdiv(cdiv(max(keys, 1), target), block_n) * block_n)
    return block_n, per_split, max(1, cdiv(keys, per_split))


def _decode(q, k, v, mask, mask_kind, mask_format, mask_strides, out, heads_per_kv, scale, keys, dev, facts,
            paged=None, tuned=None, softcap=None, window=None):
    """Attention of one query row per (batch, head). ``q`` (B, H_q, E) and ``out`` (B, H_q, Ev) as strided
    views; dense ``k``/``v`` (B, H_kv, S, E); paged ones (pages, slots, H_kv, E) with ``paged`` =
    (block_table, seq_lens) and ``keys`` the capacity of a table row. Returns (launches, temporaries)
    over the slots q, k, v, mask, out, table, lens and the temporaries' names. Dense decode is tuned
    over ``decode_candidates`` unless ``tuned`` gives the setting; paged decode keeps the first.
    ``softcap`` and ``window`` as ``paged_attention`` takes them."""
    B, H_q, E = q.shape
    value_dim = out.shape[2]
    head_dim = max(E, value_dim)
    groups = H_q // heads_per_kv
    if paged is None and tuned is None:
        # timed on these tensors (the partials are temporaries)
        key = _decode_key(q, mask_kind, heads_per_kv, keys, value_dim, facts)

        def prepare(config):
            launches, temporaries = _decode(q, k, v, mask, mask_kind, mask_format, mask_strides, out, heads_per_kv,
                                            scale, keys, dev, facts, tuned=config)
            return functools.partial(run_launches, dev, launches, temporaries,
                                     {"q": q, "k": k, "v": v, "mask": mask, "out": out})
        tuned = tuning.choose_timed(key, facts, lambda: decode_candidates(keys, head_dim, facts, groups), prepare)
    config = tuned or decode_candidates(keys, head_dim, facts, groups)[0]
    block_n, per_split, splits = decode_plan(keys, facts, config)
    stages = {} if config.get("num_stages") is None else {"num_stages": config["num_stages"]}
    block_dv = max(16, next_pow2(value_dim))
    flags = _common_flags(q.dtype, out.dtype, dev, facts)
    combine_flags = dict(DST_FORMAT=flags["DST_FORMAT"], VIA_F32=flags["VIA_F32"])
    del flags["DST_FORMAT"], flags["VIA_F32"]
    f32 = get_dtype("float32")
    temporaries = _decode_partials(B * H_q, splits, block_dv, f32)
    if paged is None:
        table, lens, table_sb = Slot("q"), Slot("q"), 0
        # dense: (batch, head, key, dim)
        k_args, v_args = tuple(k.stride()), tuple(v.stride())
    else:
        table, lens = Slot("table"), Slot("lens")
        table_sb = paged[0].stride(0)
        # paged: (page, slot, head, dim) passed as (page, head, slot, dim) to match the kernel's order
        k_args = (k.stride(0), k.stride(2), k.stride(1), k.stride(3))
        v_args = (v.stride(0), v.stride(2), v.stride(1), v.stride(3))
    partial_elements = B * H_q * splits * block_dv
    index_64 = needs_index_64(q, k, v, out, *([mask] if mask is not None else []), count=partial_elements)
    part_acc, part_max, part_sum = Slot("part_acc"), Slot("part_max"), Slot("part_sum")
    whole = splits == 1  # one split: its state is the output, no partials and no combine
    launches = [
        PlannedLaunch(
            K.decode_partial, (groups, splits, B),
            [Slot("q"), Slot("k"), Slot("v"), Slot("mask" if mask is not None else "q"), table, lens,
             *((Slot("out"),) * 3 if whole else (part_acc, part_max, part_sum)), Slot("out"), keys, heads_per_kv,
             H_q, per_split, splits, scale * K.LOG2_E, (softcap or 1.0) * K.LOG2_E, window or 0,
             k.shape[1] if paged is not None else 1, *q.stride(), *k_args, *v_args, mask_strides[0], mask_strides[1],
             mask_strides[3], table_sb, *out.stride()],
            dict(HEAD_DIM=E, VALUE_DIM=value_dim, BLOCK_G=max(16, next_pow2(heads_per_kv)), BLOCK_N=block_n,
                 BLOCK_D=max(16, next_pow2(E)), BLOCK_DV=block_dv, PAGED=paged is not None, MASK_KIND=mask_kind,
                 MASK_FORMAT=mask_format, INDEX_64=index_64, PDL=dependent_launch(dev), num_warps=config["num_warps"],
                 WHOLE=whole, SOFTCAP=softcap is not None, WINDOW=window is not None, **stages, **flags,
                 **combine_flags))]
    if not whole:
        launches.append(PlannedLaunch(
            K.decode_combine, (H_q, B),
            [part_acc, part_max, part_sum, Slot("out"), H_q, splits, *out.stride()],
            dict(VALUE_DIM=value_dim, BLOCK_DV=block_dv, BLOCK_S=next_pow2(splits), PDL=dependent_launch(dev),
                 num_warps=2, **combine_flags)))
    return launches, Workspace({} if whole else temporaries)


# ---- the entry point -------------------------------------------------------------------------------------
def _aten_output_strides(query: Tensor, shape):
    """ATen's fused attention lays its output out in the query's dim order (a query viewed from
    (B, L, H, E) and transposed gives an output whose transpose back is contiguous). Exported graphs
    rely on it: the view after that transpose traces with no copy in between."""
    if tuple(query.shape) != tuple(shape):
        return None
    return S.dense_strides_like(query.shape, query.stride())


def _sdpa_output_strides(query, shape):
    strides = _aten_output_strides(query, shape)
    # the kernels write a (B, H, L, Ev) view of the output, which a layout whose leading dims do not merge has not
    return strides if strides is not None and _merges(shape, strides) else None


def _sdpa_operands(query, key, value, attn_mask, is_causal, enable_gqa):
    """(query heads per key head, ``operands_4d(query, key, value, attn_mask)``: the (B, H, L, E) views the
    kernels read, copies where leading dims cannot merge) for operands of these shapes."""
    L, E = query.shape[-2:]
    keys = key.shape[-2]
    q_lead = tuple(query.shape[:-2])
    q_heads = q_lead[-1] if q_lead else 1
    if enable_gqa and q_lead:
        kv_heads = key.shape[-3] if key.ndim >= 3 else 1
        kv_lead = (*q_lead[:-1], kv_heads)
        heads_per_kv = q_heads // kv_heads
    else:
        kv_lead, heads_per_kv = q_lead, 1
    scores_shape = (*query.shape[:-1], keys)

    def operands_4d(query, key, value, attn_mask):
        k4 = _as_4d(key.expand(*kv_lead, keys, E))
        v4 = _as_4d(value.expand(*kv_lead, keys, value.shape[-1]))
        if is_causal and L == 1:
            # top-left alignment: the only query row sees key 0 alone
            k4, v4 = k4[:, :, :1], v4[:, :, :1]
        return _as_4d(query), k4, v4, _mask_setup(attn_mask, scores_shape)[0]
    return heads_per_kv, operands_4d


def _sdpa_key(facts, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
              enable_gqa=False):
    meta = _sdpa_result(query, key, value, attn_mask, enable_gqa)
    keys = key.shape[-2]
    if not S.numel(meta.shape) or not keys:
        return []
    if _product_form(query, value):
        from .pointwise import output_strides
        dev = resolve("meta")
        # the operands as ``_product_form_attention`` makes them: the scaled query laid out as pointwise ops
        # lay it, the key's transposed view, the weights contiguous, the value as given (key and value
        # heads repeated, contiguous, under grouped-query heads)
        groups = _product_form_groups(query, key, enable_gqa)
        if groups > 1:
            key, value = (new_tensor(_repeated_heads(t, groups).shape, t.dtype, dev) for t in (key, value))
        scaled = new_tensor(query.shape, query.dtype, dev, output_strides(tuple(query.shape), [query.stride()]))
        weights = new_tensor((*query.shape[:-1], keys), query.dtype, dev)
        matmul_key = get("matmul").key
        return [*matmul_key(facts, scaled, key.transpose(-2, -1)), *matmul_key(facts, weights, value)]
    L, E = query.shape[-2:]
    scale = 1.0 / math.sqrt(E) if scale is None else float(scale)
    heads_per_kv, operands_4d = _sdpa_operands(query, key, value, attn_mask, is_causal, enable_gqa)
    q4, k4, v4, mask = operands_4d(query, key, value, attn_mask)
    out4 = _as_4d(new_tensor(meta.shape, meta.dtype, resolve("meta"), _sdpa_output_strides(query, meta.shape)))
    kind = _mask_setup(attn_mask, (*query.shape[:-1], keys))[1]
    if L == 1:
        return [_decode_key(q4[:, :, 0], kind, heads_per_kv, 1 if is_causal else keys, value.shape[-1], facts)]
    return [_prefill_key(q4, k4, v4, mask, kind, out4, scale, is_causal, facts)[0]]


@register("scaled_dot_product_attention", family="attention", aten=["aten::scaled_dot_product_attention.default"],
          meta=_sdpa_meta, cost=_sdpa_cost, bound=True, api=(), key=_sdpa_key, functional=True)
def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None,
                                 dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> Tensor:
    """softmax(query @ key^T * scale + mask) @ value over (..., L, E) x (..., S, E) x (..., S, Ev), as
    torch.nn.functional.scaled_dot_product_attention: ``is_causal`` lets query i see keys j <= i (top-left
    aligned), a bool ``attn_mask`` marks what may be attended (True), a float one is added to the scores;
    ``scale`` defaults to 1/sqrt(E); ``enable_gqa`` maps query head h to key head h // (H_q // H_kv).
    Inference only: ``dropout_p`` must be 0. One query row (L == 1) takes the split-K decode kernel."""
    op = "scaled_dot_product_attention"
    if dropout_p and dropout_p > 0:
        raise NotImplementedError(f"{op}: dropout_p={dropout_p} is not supported (attention here is inference "
                                  f"only); pass dropout_p=0.0, or apply nn.functional.dropout to the weights of an "
                                  f"explicit softmax")
    plan_key = (layout_key(query), layout_key(key), layout_key(value), layout_key(attn_mask), is_causal, scale,
                enable_gqa)
    execute = _attention_plans.lookup(plan_key)
    if execute is None:
        execute = _attention_plans.get(plan_key, lambda: _plan_sdpa(query, key, value, attn_mask, is_causal, scale,
                                                                    enable_gqa))
    return execute(query, key, value, attn_mask)


_attention_plans = PlanCache()


def _plan_sdpa(query, key, value, attn_mask, is_causal, scale, enable_gqa):
    """``execute(query, key, value, attn_mask) -> out`` for operands laid out as these."""
    op = "scaled_dot_product_attention"
    meta = _sdpa_result(query, key, value, attn_mask, enable_gqa)
    dev = query.device
    for name, t in (("key", key), ("value", value), ("attn_mask", attn_mask)):
        if t is not None and t.device != dev:
            raise RuntimeError(f"{op}: expected all tensors on {dev}, got {name} on {t.device}")
    out_strides = _sdpa_output_strides(query, meta.shape)
    out = new_tensor(meta.shape, meta.dtype, dev, out_strides)
    fresh_output = fresh_tensor_maker(meta.shape, meta.dtype, dev, out_strides)
    keys = key.shape[-2]
    if out.numel() == 0:
        return lambda query, key, value, attn_mask: fresh_output()
    if keys == 0:
        from .creation import zeros
        return lambda query, key, value, attn_mask: zeros(meta.shape, dtype=meta.dtype, device=dev)
    L, E = query.shape[-2:]
    scale = 1.0 / math.sqrt(E) if scale is None else float(scale)
    if _product_form(query, value):
        return _product_form_attention(L, keys, dev, is_causal, scale, fresh_output,
                                       _product_form_groups(query, key, enable_gqa))
    heads_per_kv, operands_4d = _sdpa_operands(query, key, value, attn_mask, is_causal, enable_gqa)
    q4, k4, v4, mask = operands_4d(query, key, value, attn_mask)
    out4 = _as_4d(out)
    facts = backend_for(dev).facts
    _, kind, mask_format, mask_strides = _mask_setup(attn_mask, (*query.shape[:-1], keys))
    if L == 1:
        launches, temporaries = _decode(q4[:, :, 0], k4, v4, mask, kind, mask_format, mask_strides, out4[:, :, 0],
                                        heads_per_kv, scale, 1 if is_causal else keys, dev, facts)
    else:
        launches, temporaries = _prefill(q4, k4, v4, mask, kind, mask_format, mask_strides, out4, heads_per_kv,
                                         scale, is_causal, dev, facts)
    # the 4-D views (and the mask's) start where the operands do, unless merging dims needed a copy: then
    # each call copies its operands to the layout planned here
    views = all(view is None or view.data_ptr() == t.data_ptr()
                for view, t in ((q4, query), (k4, key), (v4, value), (mask, attn_mask)))
    # a plan that copies by tensor-memory descriptors holds only for operands whose starts are aligned too;
    # misaligned ones, which the layout key does not tell apart, take a second plan made at the first of them
    descriptors = any(launch.kernel is KW.attention_forward_wgmma_ws for launch in launches)
    misaligned = []

    def execute(query, key, value, attn_mask):
        if views:
            q4, k4, v4, mask = query, key, value, attn_mask
        else:
            q4, k4, v4, mask = operands_4d(query, key, value, attn_mask)
        if descriptors and not _starts_aligned(q4, k4, v4):
            if not misaligned:
                misaligned.append(_plan_sdpa(query, key, value, attn_mask, is_causal, scale, enable_gqa))
            return misaligned[0](query, key, value, attn_mask)
        out = fresh_output()
        run_launches(dev, launches, temporaries, {"q": q4, "k": k4, "v": v4, "mask": mask, "out": out})
        return out
    return execute


def _product_form_attention(length: int, keys: int, dev, is_causal: bool, scale: float, fresh_output,
                            groups: int):
    """``execute(query, key, value, attn_mask) -> out`` of attention in the product form (``_product_form``):
    softmax(query * scale @ key^T + mask) @ value through the registry's ops, the scores materialised
    (``_product_form_temporaries``, declared as workspace) and the weights computed as softmax computes them
    (float32 for 16-bit scores, float64 for float64); key and value heads repeated ``groups`` times each."""
    def execute(query, key, value, attn_mask):
        with scratch_scope():
            if groups > 1:
                key, value = (get("repeat_interleave").impl(t, groups, -3) for t in (key, value))
            scores = get("matmul").impl(get("mul").impl(query, scale), key.transpose(-2, -1))
            if is_causal:  # top-left aligned: query i sees keys j <= i
                allowed = get("tril").impl(get("ones").impl((length, keys), dtype="bool", device=dev))
                scores = get("masked_fill").impl(scores, get("logical_not").impl(allowed), -math.inf)
            elif attn_mask is not None and attn_mask.dtype.name == "bool":
                scores = get("masked_fill").impl(scores, get("logical_not").impl(attn_mask), -math.inf)
            elif attn_mask is not None:
                scores = get("add").impl(scores, attn_mask)
            result = get("matmul").impl(get("softmax").impl(scores, -1), value)
        return get("copy_").impl(fresh_output(), result)
    return execute


# ---- causal prefill with a cap, a window and a query offset ---------------------------------------------
def _causal_result(query, key, value, softcap, window, query_offset) -> TensorMeta:
    op = "prefill_attention"
    _check_options(op, softcap, window)
    if len(query.shape) != 3 or len(key.shape) != 3 or len(value.shape) != 3:
        raise RuntimeError(f"{op}: query, key and value must be (heads, length, dim), got {_dims(query.shape)}, "
                           f"{_dims(key.shape)} and {_dims(value.shape)}")
    _check_operands(op, query, key, value)
    _kv_lead(op, query, key, value, True)
    if type(query_offset) is not int or query_offset < 0 or query_offset + query.shape[1] != key.shape[1]:
        raise RuntimeError(f"{op}: query_offset {query_offset!r} plus the query's {query.shape[1]} positions must "
                           f"be the key's length {key.shape[1]} (the queries are the sequence's last positions)")
    return TensorMeta((*query.shape[:2], value.shape[-1]), query.dtype)


def _causal_meta(a):
    return _causal_result(a.query, a.key, a.value, a.softcap, a.window, a.query_offset)


def _causal_cost(a):
    query, key, value = a.query, a.key, a.value
    out = _causal_meta(a)
    H, L, E = query.shape
    seen = min(key.shape[1], a.window or key.shape[1])  # keys a query sees, at most
    return Cost(flops=2 * H * L * seen * (E + value.shape[-1]),
                bytes_read=nbytes(query) + nbytes(key) + nbytes(value), bytes_written=nbytes(out))


def _causal_key(facts, query, key, value, scale=None, softcap=None, window=None, query_offset=0):
    meta = _causal_result(query, key, value, softcap, window, query_offset)
    if not S.numel(meta.shape):
        return []
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    out = new_tensor(meta.shape, meta.dtype, resolve("meta"))
    q4, k4, v4, out4 = (t.unsqueeze(0) for t in (query, key, value, out))
    return [_prefill_key(q4, k4, v4, None, K.MASK_NONE, out4, scale, True, facts,
                         None if softcap is None else float(softcap), query_offset, window)[0]]


@register("prefill_attention", family="attention", functional=True, aten=["nbx::prefill_attention"], meta=_causal_meta,
          cost=_causal_cost, bound=True, api=(), key=_causal_key)
def prefill_attention(query: Tensor, key: Tensor, value: Tensor, scale: float | None = None,
                      softcap: float | None = None, window: int | None = None, query_offset: int = 0) -> Tensor:
    """Causal attention of a sequence's last positions: ``query`` (H_q, L, E) are positions
    ``query_offset`` to ``query_offset + L - 1`` of a sequence whose keys and values ``key``/``value``
    (H_kv, query_offset + L, E) hold every position so far; query head h reads key head h // (H_q // H_kv).
    The query at position p sees keys j <= p, and with ``window`` only j > p - window; ``softcap`` caps each
    scaled score s at softcap * tanh(s / softcap) before the softmax. Returns (H_q, L, Ev)."""
    plan_key = ("prefill", layout_key(query), layout_key(key), layout_key(value), scale, softcap, type(window), window,
                type(query_offset), query_offset)
    execute = _attention_plans.get(plan_key, lambda: _plan_prefill(query, key, value, scale, softcap, window,
                                                                   query_offset))
    return execute(query, key, value)


def _plan_prefill(query, key, value, scale, softcap, window, query_offset):
    """``execute(query, key, value) -> out`` for ``prefill_attention``'s operands laid out as these (its
    launches are tuned on these tensors and an output made here)."""
    meta = _causal_result(query, key, value, softcap, window, query_offset)
    dev = query.device
    for name, t in (("key", key), ("value", value)):
        if t.device != dev:
            raise RuntimeError(f"prefill_attention: expected all tensors on {dev}, got {name} on {t.device}")
    fresh_output = fresh_tensor_maker(meta.shape, meta.dtype, dev)
    if not S.numel(meta.shape):
        return lambda query, key, value: fresh_output()
    out = fresh_output()
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    q4, k4, v4, out4 = (t.unsqueeze(0) for t in (query, key, value, out))
    launches, temporaries = _prefill(q4, k4, v4, None, K.MASK_NONE, FORMAT_NATIVE.value, (0, 0, 0, 0), out4,
                                     query.shape[0] // key.shape[0], scale, True, dev, backend_for(dev).facts,
                                     softcap=None if softcap is None else float(softcap), q_offset=query_offset,
                                     window=window)

    def execute(query, key, value):
        out = fresh_output()
        # the 4-D views the launches were planned on start where these tensors do
        run_launches(dev, launches, temporaries, {"q": query, "k": key, "v": value, "mask": None, "out": out})
        return out
    return execute


# ---- paged attention and its cache append ----------------------------------------------------------------
def _check_options(op: str, softcap, window):
    if softcap is not None and not (isinstance(softcap, (int, float)) and softcap > 0 and math.isfinite(softcap)):
        raise ValueError(f"{op}: softcap must be a positive finite number or None, got {softcap!r}")
    if window is not None and (type(window) is not int or window < 1):
        raise ValueError(f"{op}: window must be an integer >= 1 or None, got {window!r}")


def _paged_result(query, key_cache, value_cache, block_table, seq_lens, softcap, window) -> TensorMeta:
    op = "paged_attention"
    _check_options(op, softcap, window)
    if len(query.shape) != 3:
        raise RuntimeError(f"{op}: query must be (batch, heads, dim), got shape {_dims(query.shape)}")
    for name, t in (("key_cache", key_cache), ("value_cache", value_cache)):
        if len(t.shape) != 4:
            raise RuntimeError(f"{op}: {name} must be (num_blocks, block_size, kv_heads, dim), got shape "
                               f"{_dims(t.shape)}")
    _check_operands(op, query, key_cache, value_cache)
    if tuple(key_cache.shape[:3]) != tuple(value_cache.shape[:3]):
        raise RuntimeError(f"{op}: key_cache {_dims(key_cache.shape)} and value_cache {_dims(value_cache.shape)} "
                           f"must agree in (num_blocks, block_size, kv_heads)")
    if query.shape[1] % key_cache.shape[2]:
        raise RuntimeError(f"{op}: query heads ({query.shape[1]}, query {_dims(query.shape)}) must be a multiple "
                           f"of the cache's kv heads ({key_cache.shape[2]}, key_cache {_dims(key_cache.shape)})")
    if len(block_table.shape) != 2 or block_table.shape[0] != query.shape[0] or block_table.dtype.kind != "int":
        raise RuntimeError(f"{op}: block_table must be an integer (batch, max_blocks) tensor with batch "
                           f"{query.shape[0]}, got {block_table.dtype.name} {_dims(block_table.shape)}")
    if tuple(seq_lens.shape) != (query.shape[0],) or seq_lens.dtype.kind != "int":
        raise RuntimeError(f"{op}: seq_lens must be an integer ({query.shape[0]},) tensor, got "
                           f"{seq_lens.dtype.name} {_dims(seq_lens.shape)}")
    return TensorMeta((*query.shape[:2], value_cache.shape[-1]), query.dtype)


def _paged_meta(a):
    return _paged_result(a.query, a.key_cache, a.value_cache, a.block_table, a.seq_lens, a.softcap, a.window)


def _paged_cost(a):
    query, key_cache, value_cache, block_table = a.query, a.key_cache, a.value_cache, a.block_table
    out = _paged_meta(a)
    B, H_q, E = query.shape
    capacity = block_table.shape[1] * key_cache.shape[1]
    kv_heads = key_cache.shape[2]
    # at most a full table row of keys per sequence: an upper bound, the lengths live on the device
    kv_bytes = B * capacity * kv_heads * (E + value_cache.shape[-1]) * key_cache.dtype.itemsize
    return Cost(flops=2 * B * H_q * capacity * (E + value_cache.shape[-1]),
                bytes_read=nbytes(query) + kv_bytes + nbytes(block_table) + nbytes(a.seq_lens),
                bytes_written=nbytes(out), workspace=_decode_workspace(query, capacity, value_cache.shape[-1], False))


def _paged_key(facts, *args, **kwargs):
    return []  # paged decode keeps the first setting (``_decode``): nothing is tuned


@register("paged_attention", family="attention", aten=["nbx::paged_attention"], meta=_paged_meta, cost=_paged_cost,
          bound=True, api=(),
          key=_paged_key, functional=True)
def paged_attention(query: Tensor, key_cache: Tensor, value_cache: Tensor, block_table: Tensor, seq_lens: Tensor,
                    scale: float | None = None, softcap: float | None = None, window: int | None = None) -> Tensor:
    """Decode attention of one query token per sequence over a paged KV cache: ``query`` (B, H_q, E);
    ``key_cache``/``value_cache`` (num_blocks, block_size, H_kv, E); sequence b's key j lives in page
    ``block_table[b, j // block_size]`` at slot ``j % block_size``, for j < ``seq_lens[b]``. H_q may be a
    multiple of H_kv (grouped-query heads). ``softcap`` caps each scaled score s at softcap * tanh(s /
    softcap); ``window`` lets the query see only the last ``window`` keys of its sequence. Returns
    (B, H_q, Ev); a sequence of length 0 gives zeros."""
    plan_key = ("paged", layout_key(query), layout_key(key_cache), layout_key(value_cache), layout_key(block_table),
                layout_key(seq_lens), scale, type(softcap), softcap, type(window), window)
    execute = _attention_plans.get(plan_key, lambda: _plan_paged(query, key_cache, value_cache, block_table, seq_lens,
                                                                 scale, softcap, window))
    return execute(query, key_cache, value_cache, block_table, seq_lens)


def _plan_paged(query, key_cache, value_cache, block_table, seq_lens, scale, softcap, window):
    """``execute(query, key_cache, value_cache, block_table, seq_lens) -> out`` for ``paged_attention``'s
    operands laid out as these: what the launches read of the tables' values, they read at each call."""
    meta = _paged_result(query, key_cache, value_cache, block_table, seq_lens, softcap, window)
    dev = query.device
    fresh_output = fresh_tensor_maker(meta.shape, meta.dtype, dev)
    if not S.numel(meta.shape):
        return lambda query, key_cache, value_cache, block_table, seq_lens: fresh_output()
    E = query.shape[-1]
    scale = 1.0 / math.sqrt(E) if scale is None else float(scale)
    capacity = block_table.shape[1] * key_cache.shape[1]
    facts = backend_for(dev).facts
    launches, temporaries = _decode(query, key_cache, value_cache, None, K.MASK_NONE, FORMAT_NATIVE.value, (0, 0, 0, 0),
                                    fresh_output(), query.shape[1] // key_cache.shape[2], scale, capacity, dev, facts,
                                    paged=(block_table, seq_lens), softcap=softcap, window=window)

    def execute(query, key_cache, value_cache, block_table, seq_lens):
        out = fresh_output()
        run_launches(dev, launches, temporaries, {"q": query, "k": key_cache, "v": value_cache, "out": out,
                                                  "table": block_table, "lens": seq_lens})
        return out
    return execute


def _check_append(key, value, key_cache, value_cache, slot_mapping) -> None:
    op = "kv_cache_append"
    for name, rows, cache in (("key", key, key_cache), ("value", value, value_cache)):
        if len(rows.shape) != 3 or len(cache.shape) != 4 or tuple(rows.shape[1:]) != tuple(cache.shape[2:]):
            raise RuntimeError(f"{op}: {name} (tokens, kv_heads, dim) {_dims(rows.shape)} does not fit its cache "
                               f"(num_blocks, block_size, kv_heads, dim) {_dims(cache.shape)}")
        if rows.dtype is not cache.dtype:
            raise RuntimeError(f"{op}: {name} is {rows.dtype.name} but its cache is {cache.dtype.name}")
    if key.shape[0] != value.shape[0] or tuple(slot_mapping.shape) != (key.shape[0],) \
            or slot_mapping.dtype.kind != "int":
        raise RuntimeError(f"{op}: key {_dims(key.shape)}, value {_dims(value.shape)} and an integer slot_mapping "
                           f"{_dims(slot_mapping.shape)} must have the same number of tokens")


def _append_meta(a):
    """None, as the op returns: it writes its caches in place."""
    _check_append(a.key, a.value, a.key_cache, a.value_cache, a.slot_mapping)


def _append_cost(a):
    _check_append(a.key, a.value, a.key_cache, a.value_cache, a.slot_mapping)
    return Cost(bytes_read=nbytes(a.key) + nbytes(a.value) + nbytes(a.slot_mapping),
                bytes_written=nbytes(a.key) + nbytes(a.value))


@register("kv_cache_append", family="attention", aten=["nbx::kv_cache_append"], meta=_append_meta, cost=_append_cost,
          bound=True, api=(), functional=True)
def kv_cache_append(key: Tensor, value: Tensor, key_cache: Tensor, value_cache: Tensor,
                    slot_mapping: Tensor) -> None:
    """Writes token t's rows ``key[t]``/``value[t]`` (kv_heads, dim) into the caches at slot
    ``slot_mapping[t]``: page ``slot // block_size``, offset ``slot % block_size``. A negative slot skips
    the token (padding). In place; slots are not checked against the cache's size."""
    _check_append(key, value, key_cache, value_cache, slot_mapping)
    tokens, heads = key.shape[:2]
    if tokens == 0 or heads == 0:
        return
    block_size = key_cache.shape[1]
    for rows, cache in ((key, key_cache), (value, value_cache)):
        dim = rows.shape[2]
        block_d = next_pow2(dim)
        block_t = max(1, min(64, 4096 // block_d))
        launch(K.cache_append, (cdiv(tokens, block_t), heads), rows.device,
               [rows, cache, slot_mapping, tokens, heads, block_size, *rows.stride(), *cache.stride()],
               DIM=dim, BLOCK_T=block_t, BLOCK_D=block_d, INDEX_64=needs_index_64(rows, cache),
               num_warps=4)


# ---- rotary position embedding ---------------------------------------------------------------------------
def _rotary_result(x, cos, sin, positions) -> TensorMeta:
    op = "rotary_embedding"
    if len(x.shape) < 2 or x.dtype.name not in _FLOAT_DTYPES:
        raise RuntimeError(f"{op}: x must be a float tensor (..., length, dim), got {x.dtype.name} "
                           f"{_dims(x.shape)}")
    if len(cos.shape) != 2 or tuple(cos.shape) != tuple(sin.shape) or cos.dtype is not sin.dtype:
        raise RuntimeError(f"{op}: cos and sin must both be (positions, rotary_dim / 2) of one dtype, got "
                           f"{cos.dtype.name} {_dims(cos.shape)} and {sin.dtype.name} {_dims(sin.shape)}")
    if 2 * cos.shape[1] > x.shape[-1]:
        raise RuntimeError(f"{op}: cos {_dims(cos.shape)} rotates {2 * cos.shape[1]} dims but x {_dims(x.shape)} "
                           f"has {x.shape[-1]}")
    if positions is not None and not isinstance(positions, int):
        try:
            fits = S.broadcast_shapes(tuple(positions.shape), tuple(x.shape[:-1])) == tuple(x.shape[:-1])
        except (RuntimeError, ValueError):
            fits = False
        if not fits or positions.dtype.kind != "int":
            raise RuntimeError(f"{op}: positions must be integers broadcasting to x's rows {_dims(x.shape[:-1])}, "
                               f"got {positions.dtype.name} {_dims(positions.shape)}")
    return TensorMeta(tuple(x.shape), x.dtype)


def _rotary_meta(a):
    return _rotary_result(a.x, a.cos, a.sin, a.positions)


def _rotary_cost(a):
    return Cost(flops=3 * S.numel(a.x.shape), bytes_read=nbytes(a.x), bytes_written=nbytes(_rotary_meta(a)))


@register("rotary_embedding", family="attention", aten=["nbx::rotary_embedding"], meta=_rotary_meta, cost=_rotary_cost,
          bound=True, api=(), functional=True)
def rotary_embedding(x: Tensor, cos: Tensor, sin: Tensor, positions=None, interleaved: bool = False) -> Tensor:
    """Rotary position embedding of ``x`` (..., L, E): pair i of a row at position p turns by the angle whose
    cosine and sine are ``cos[p, i]`` and ``sin[p, i]`` (tables (max_positions, R / 2), R <= E; dims past R
    pass through). Rotate-half pairs dims (i, i + R/2); ``interleaved`` pairs (2i, 2i + 1). ``positions``:
    None (row l of the L axis at position l), an int offset (l + offset), or an integer tensor broadcasting
    to x.shape[:-1] (any layout: (L,) for (..., L, E), (B, L, 1) for (B, L, H, E) ...). Positions are not
    checked against the table's length."""
    _rotary_result(x, cos, sin, positions)
    from .creation import arange
    out = new_tensor(x.shape, x.dtype, x.device)
    if x.numel() == 0:
        return out
    L, E = x.shape[-2:]
    if positions is None or isinstance(positions, int):
        offset = positions or 0
        if offset + L > cos.shape[0]:
            raise RuntimeError(f"rotary_embedding: positions {offset} to {offset + L - 1} are past the table's "
                               f"{cos.shape[0]} rows")
        positions = arange(offset, offset + L, dtype=get_dtype("int32"), device=x.device)
    rows_shape = tuple(x.shape[:-1])
    pos_rows = positions.expand(*rows_shape).contiguous().reshape(-1)
    x_rows = x.reshape(-1, E)
    out_rows = out.view(-1, E)
    n_rows = x_rows.shape[0]
    half = cos.shape[1]
    if cos.stride() != sin.stride():
        cos, sin = cos.contiguous(), sin.contiguous()
    if half == 0:
        out.copy_(x)
        return out
    block_half = next_pow2(half)
    block_rows = max(1, min(64, 4096 // block_half))
    conversion = conversion_flags(get_dtype("float32"), x.dtype, x.device)
    index_64 = needs_index_64(x_rows, out_rows, cos)
    launch(K.rotary, (cdiv(n_rows, block_rows),), x.device,
           [x_rows, out_rows, cos, sin, pos_rows, n_rows, x_rows.stride(0), out_rows.stride(0), pos_rows.stride(0),
            x_rows.stride(1), out_rows.stride(1), cos.stride(0), cos.stride(1)],
           HALF=half, DIM=E, BLOCK_ROWS=block_rows, BLOCK_HALF=block_half,
           BLOCK_REST=next_pow2(max(1, E - 2 * half)), INTERLEAVED=bool(interleaved),
           IN_FORMAT=float_format(x.dtype),
           TRIG_FORMAT=float_format(cos.dtype), DST_FORMAT=conversion["DST_FORMAT"],
           VIA_F32=conversion["VIA_F32"], INDEX_64=index_64, num_warps=4)
    return out


def _rotary_append_result(q, k, v, cos, sin, positions, key_cache, value_cache, slots) -> tuple:
    op = "rotary_append"
    if len(q.shape) != 3 or q.dtype.name not in _FLOAT_DTYPES:
        raise RuntimeError(f"{op}: q must be a float tensor (tokens, heads, dim), got {q.dtype.name} {_dims(q.shape)}")
    tokens, _, dim = q.shape
    for name, t in (("k", k), ("v", v)):
        if len(t.shape) != 3 or t.shape[0] != tokens or t.shape[2] != dim or t.dtype is not q.dtype:
            raise RuntimeError(f"{op}: {name} must be {q.dtype.name} (tokens, kv_heads, dim) with q's tokens and "
                               f"dim {_dims((tokens, dim))}, got {t.dtype.name} {_dims(t.shape)}")
    if tuple(k.shape) != tuple(v.shape):
        raise RuntimeError(f"{op}: k {_dims(k.shape)} and v {_dims(v.shape)} differ")
    for name, cache in (("key_cache", key_cache), ("value_cache", value_cache)):
        if len(cache.shape) != 4 or tuple(cache.shape[2:]) != tuple(k.shape[1:]) or cache.dtype is not q.dtype:
            raise RuntimeError(f"{op}: {name} must be {q.dtype.name} (num_blocks, block_size, kv_heads, dim) with "
                               f"k's heads and dim {_dims(k.shape[1:])}, got {cache.dtype.name} {_dims(cache.shape)}")
    if len(cos.shape) != 2 or tuple(cos.shape) != tuple(sin.shape) or cos.dtype is not sin.dtype \
            or not 1 <= 2 * cos.shape[1] <= dim:
        raise RuntimeError(f"{op}: cos and sin must both be (positions, rotary_dim / 2) of one dtype with "
                           f"rotary_dim at most q's dim {dim}, got {cos.dtype.name} {_dims(cos.shape)} and "
                           f"{sin.dtype.name} {_dims(sin.shape)}")
    for name, t in (("positions", positions), ("slots", slots)):
        if t.dtype.kind != "int" or S.numel(t.shape) != tokens or (len(t.shape) and t.shape[0] != tokens):
            raise RuntimeError(f"{op}: {name} must be integers, one per token ({tokens}), got {t.dtype.name} "
                               f"{_dims(t.shape)}")
    return (TensorMeta(tuple(q.shape), q.dtype), TensorMeta(tuple(k.shape), k.dtype))


def _rotary_append_meta(a):
    return _rotary_append_result(a.q, a.k, a.v, a.cos, a.sin, a.positions, a.key_cache, a.value_cache, a.slots)


def _rotary_append_cost(a):
    q_out, k_out = _rotary_append_meta(a)
    return Cost(flops=3 * (S.numel(a.q.shape) + S.numel(a.k.shape)),
                bytes_read=nbytes(a.q) + nbytes(a.k) + nbytes(a.v) + nbytes(a.positions) + nbytes(a.slots),
                bytes_written=nbytes(q_out) + 2 * nbytes(k_out) + nbytes(a.v))


@register("rotary_append", family="attention", functional=True, aten=["nbx::rotary_append"], meta=_rotary_append_meta,
          cost=_rotary_append_cost, bound=True, api=())
def rotary_append(q: Tensor, k: Tensor, v: Tensor, cos: Tensor, sin: Tensor, positions: Tensor, key_cache: Tensor,
                  value_cache: Tensor, slots: Tensor) -> tuple[Tensor, Tensor]:
    """A decoder layer's attention inputs in one launch: (rotary_embedding(q), rotary_embedding(k)) at each
    token's position (rotate-half pairs, tables (max_positions, R / 2), dims past R kept), the rotated keys
    and the values ``v`` written into the paged caches at ``slots`` as ``kv_cache_append`` writes them
    (a negative slot skips the token). q (tokens, heads, dim); k and v (tokens, kv_heads, dim), views of one
    projection's output welcome; ``positions`` and ``slots`` one integer per token. Positions and slots are
    not checked against the tables and the caches."""
    q_meta, k_meta = _rotary_append_result(q, k, v, cos, sin, positions, key_cache, value_cache, slots)
    q_out = new_tensor(q_meta.shape, q.dtype, q.device)
    k_out = new_tensor(k_meta.shape, k.dtype, k.device)
    tokens, q_heads, dim = q.shape
    kv_heads = k.shape[1]
    if tokens == 0 or q_heads + kv_heads == 0 or dim == 0:
        return q_out, k_out
    q, k, v = (t if t.stride(2) == 1 else t.contiguous() for t in (q, k, v))
    if cos.stride(1) != 1 or cos.stride() != sin.stride():
        cos, sin = cos.contiguous(), sin.contiguous()
    positions = positions.reshape(tokens)
    if key_cache.stride(3) != 1 or value_cache.stride(3) != 1:
        raise RuntimeError(f"rotary_append: the caches' last dim must be unit-strided, got strides "
                           f"{key_cache.stride()} and {value_cache.stride()}")
    half = cos.shape[1]
    block_t = max(1, min(64, 4096 // next_pow2(dim)))
    conversion = conversion_flags(get_dtype("float32"), q.dtype, q.device)
    launch(K.rotary_append, (cdiv(tokens, block_t), q_heads + kv_heads), q.device,
           [q, k, v, q_out, k_out, key_cache, value_cache, cos, sin, positions, slots, tokens, q_heads,
            key_cache.shape[1], q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
            q_out.stride(0), q_out.stride(1), k_out.stride(0), k_out.stride(1), *key_cache.stride()[:3],
            *value_cache.stride()[:3], positions.stride(0), cos.stride(0)],
           HALF=half, DIM=dim, BLOCK_T=block_t, BLOCK_HALF=next_pow2(half),
           BLOCK_REST=next_pow2(max(1, dim - 2 * half)), BLOCK_D=next_pow2(dim),
           IN_FORMAT=float_format(q.dtype),
           TRIG_FORMAT=float_format(cos.dtype), DST_FORMAT=conversion["DST_FORMAT"],
           VIA_F32=conversion["VIA_F32"], INDEX_64=needs_index_64(q, k, v, key_cache, value_cache, cos),
           PDL=dependent_launch(q.device), num_warps=4)
    return q_out, k_out


def _rotate_half_result(x, cos, sin) -> TensorMeta:
    op = "rotate_half_embedding"
    if not 1 <= len(x.shape) <= 4 or x.dtype.name not in _FLOAT_DTYPES or x.shape[-1] % 2:
        raise RuntimeError(f"{op}: x must be a float tensor of 1 to 4 dims whose last is even, got {x.dtype.name} "
                           f"{_dims(x.shape)}")
    for name, t in (("cos", cos), ("sin", sin)):
        try:
            fits = S.broadcast_shapes(tuple(t.shape), tuple(x.shape)) == tuple(x.shape)
        except (RuntimeError, ValueError):
            fits = False
        if not fits or t.dtype is not x.dtype:
            raise RuntimeError(f"{op}: {name} must be {x.dtype.name} and broadcast to x {_dims(x.shape)}, got "
                               f"{t.dtype.name} {_dims(t.shape)}")
    return TensorMeta(tuple(x.shape), x.dtype)


def _rotate_half_meta(a):
    return _rotate_half_result(a.x, a.cos, a.sin)


def _rotate_half_cost(a):
    return Cost(flops=3 * S.numel(a.x.shape), bytes_read=nbytes(a.x) + nbytes(a.cos) + nbytes(a.sin),
                bytes_written=nbytes(_rotate_half_meta(a)))


def _broadcast_strides_4d(t: Tensor, shape) -> tuple:
    """The strides of ``t`` broadcast to the 4-dim ``shape`` (zero along broadcast dims)."""
    strides = [0] * (4 - t.ndim) + list(t.stride())
    sizes = [1] * (4 - t.ndim) + list(t.shape)
    return tuple(0 if size == 1 and want != 1 else stride for size, want, stride in zip(sizes, shape, strides))


@register("rotate_half_embedding", family="attention", aten=["nbx::rotate_half_embedding"], meta=_rotate_half_meta,
          cost=_rotate_half_cost, bound=True, api=())
def rotate_half_embedding(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """``x * cos + rotate_half(x) * sin`` with rotate_half(x) = cat(-x2, x1) of x's halves along its last dim,
    as transformers' ``apply_rotary_pos_emb`` writes it: ``cos`` and ``sin`` broadcast to x (any layout).
    Computed in float32 with one rounding, where the unfused ops round after every product and the sum
    (graph fusion's target). The result is laid out as that sum of products would be (``output_strides``):
    a permuted x gives a permuted result, as the ops that follow in transformers expect."""
    key = ("rotate_half", layout_key(x), layout_key(cos), layout_key(sin))
    return _attention_plans.get(key, lambda: _plan_rotate_half(x, cos, sin))(x, cos, sin)


def _plan_rotate_half(x: Tensor, cos: Tensor, sin: Tensor):
    """``execute(x, cos, sin) -> out`` for operands laid out as these are."""
    from .pointwise import output_strides
    meta = _rotate_half_result(x, cos, sin)
    shape = (1,) * (4 - x.ndim) + tuple(x.shape)
    xs, cs, ss = _broadcast_strides_4d(x, shape), _broadcast_strides_4d(cos, shape), _broadcast_strides_4d(sin, shape)
    by_cos = output_strides(meta.shape, [xs[4 - x.ndim:], cs[4 - x.ndim:]])
    by_sin = output_strides(meta.shape, [S.contiguous_strides(meta.shape), ss[4 - x.ndim:]])
    strides = output_strides(meta.shape, [by_cos, by_sin])
    make_out = fresh_tensor_maker(meta.shape, x.dtype, x.device, strides=strides)
    if x.numel() == 0:
        return lambda x, cos, sin: make_out()
    rows, half = shape[0] * shape[1] * shape[2], shape[3] // 2
    block_half = next_pow2(half)
    block_rows = max(1, min(64, 4096 // block_half))
    conversion = conversion_flags(get_dtype("float32"), x.dtype, x.device)
    planned = PlannedLaunch(
        K.rotate_half_rows, (cdiv(rows, block_rows),),
        [Slot("x"), Slot("cos"), Slot("sin"), Slot("out"), rows, shape[1], shape[2], *xs, *cs, *ss,
         *(0,) * (4 - x.ndim), *strides],
        dict(HALF=half, BLOCK_ROWS=block_rows, BLOCK_HALF=block_half,
             IN_FORMAT=float_format(x.dtype), DST_FORMAT=conversion["DST_FORMAT"],
             VIA_F32=conversion["VIA_F32"], INDEX_64=needs_index_64(x, cos, sin, (meta.shape, strides)), num_warps=4))
    device = x.device

    def execute(x, cos, sin):
        out = make_out()
        planned(device, {"x": x, "cos": cos, "sin": sin, "out": out})
        return out
    return execute


# ---- samples ---------------------------------------------------------------------------------------

def _sdpa_reference(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    groups = query.shape[-3] // key.shape[-3] if enable_gqa else 1
    key, value = np.repeat(key, groups, axis=-3), np.repeat(value, groups, axis=-3)
    scores = query @ np.swapaxes(key, -1, -2) * (1 / np.sqrt(query.shape[-1]) if scale is None else scale)
    if is_causal:
        scores = np.where(np.tril(np.ones(scores.shape[-2:], bool)), scores, -np.inf)
    if attn_mask is not None:
        scores = np.where(attn_mask, scores, -np.inf) if attn_mask.dtype == bool else scores + attn_mask
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return weights / weights.sum(axis=-1, keepdims=True) @ value


def _rotate_half_reference(x, cos, sin):
    half = x.shape[-1] // 2
    return x * cos + np.concatenate([-x[..., half:], x[..., :half]], -1) * sin


_POSITIONS = operand(3, dtype="int64", values="index", domain=(0, 4))
_SLOTS = operand(3, dtype="int64", values="distinct", domain=(0, 8))
_CACHE = operand(2, 4, 1, 4)  # two pages of four slots, one head of four dims
_SAMPLES = {
    "scaled_dot_product_attention": Samples((
        sample(operand(1, 2, 3, 4), operand(1, 2, 5, 4), operand(1, 2, 5, 4)),
        sample(operand(2, 3, 4), operand(2, 3, 4), operand(2, 3, 4), is_causal=True),
        sample(operand(1, 2, 3, 4), operand(1, 2, 3, 4), operand(1, 2, 3, 4), operand(3, 3, dtype="bool", values="edge")),
        sample(operand(1, 4, 2, 4, dtype="bfloat16"), operand(1, 2, 2, 4, dtype="bfloat16"),
               operand(1, 2, 2, 4, dtype="bfloat16"), scale=0.5, enable_gqa=True),
        sample(operand(1, 1, 2, 4), operand(1, 1, 3, 4), operand(1, 1, 3, 4), operand(2, 3)),
        sample(operand(1, 4, 3, 4, dtype="float64"), operand(1, 2, 5, 4, dtype="float64"),
               operand(1, 2, 5, 4, dtype="float64"), is_causal=True, enable_gqa=True)), _sdpa_reference),
    "prefill_attention": Samples((sample(operand(2, 3, 4), operand(2, 3, 4), operand(2, 3, 4)),
                                  sample(operand(4, 2, 4), operand(2, 5, 4), operand(2, 5, 4), None, 5.0, 2, 3),
                                  sample(operand(2, 3, 4, dtype="bfloat16"), operand(2, 3, 4, dtype="bfloat16"),
                                         operand(2, 3, 4, dtype="bfloat16"), 0.25))),
    "paged_attention": Samples((sample(operand(2, 2, 4), operand(3, 4, 1, 4), operand(3, 4, 1, 4),
                                       operand(2, 2, dtype="int32", values="index", domain=(0, 3)),
                                       operand(2, dtype="int32", values="index", domain=(0, 9))),
                                sample(operand(1, 1, 4), operand(2, 4, 1, 4), operand(2, 4, 1, 4),
                                       operand(1, 2, dtype="int32", values="distinct", domain=(0, 2)),
                                       operand(1, dtype="int32", values="index", domain=(1, 9)), None, 3.0, 2))),
    "kv_cache_append": Samples((sample(operand(3, 1, 4), operand(3, 1, 4), _CACHE, _CACHE, _SLOTS),)),
    "rotary_embedding": Samples((sample(operand(3, 4), operand(4, 2), operand(4, 2)),
                                 sample(operand(2, 3, 4), operand(6, 2), operand(6, 2), 2),
                                 sample(operand(3, 2, 4), operand(4, 1), operand(4, 1),
                                        operand(3, 1, dtype="int64", values="index", domain=(0, 4))),
                                 sample(operand(3, 4, dtype="bfloat16"), operand(4, 2), operand(4, 2), interleaved=True))),
    "rotary_append": Samples((sample(operand(3, 2, 4), operand(3, 1, 4), operand(3, 1, 4), operand(4, 2), operand(4, 2),
                                     _POSITIONS, _CACHE, _CACHE, _SLOTS),)),
    "rotate_half_embedding": Samples((sample(operand(2, 3, 4), operand(3, 4), operand(3, 4)),
                                      sample(operand(3, 2, 4, layout="transposed"), operand(3, 2, 4), operand(3, 2, 4)),
                                      sample(operand(2, 4, dtype="bfloat16"), operand(2, 4, dtype="bfloat16"),
                                             operand(2, 4, dtype="bfloat16"))), _rotate_half_reference),
}
family_samples("attention", by_name(_SAMPLES))
