"""softmax, log_softmax and the normalisations (layer, RMS, group, batch in inference form, and the
fused residual-add forms), each one launch (two for rows too long to hold in registers)."""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from .. import shape as S
from ..allocation import Workspace, fresh_tensor_maker, new_tensor, scratch_scope
from ..device.facts import all_facts
from ..dtypes import get_dtype
from ..kernels import norm as N
from ..kernels.formats import FORMAT_NATIVE
from ..launch import cdiv, dependent_launch, launch, next_pow2
from ..lowering import conversion_flags, float_format, needs_index_64
from ..tensor import Tensor
from .plans import LaunchCall, PlanCache, PlannedLaunch, Slot, binding_run, layout_key, run_launches
from .reductions import (_exactly_widens, _source, compute_dtype, device_programs, dim_key, kernel_facts,
                         occupying_block_rows, tile_for)
from .registry import Cost, TensorMeta, family_samples, get, nbytes, register, workspace_bytes
from .samples import Samples, by_name, operand, sample


def _float_out(x, dtype, op: str):
    from ..dtypes import get_dtype
    out = x.dtype if dtype is None else get_dtype(dtype)
    if not out.is_floating_point or out.storage_only:
        raise TypeError(f"{op}: expected a floating-point tensor (or dtype=), got {out.name}")
    return out


# ---- how rows reach the row kernels ----------------------------------------------------------------
# The row kernels promise the compiler what makes a row's sums independent of its batch (see
# kernels/norm.py): 16-byte aligned pointers, and row starts aligned to ROW_ALIGN elements.
POINTER_ALIGNMENT = 16


def row_align(length: int, dtype, unit_stride: bool) -> int:
    """ROW_ALIGN for rows of ``length`` elements of ``dtype``: a 16-byte vector's worth when the row is
    unit-stride and holds whole vectors, else 1. It depends on nothing that batching changes."""
    vector = max(1, POINTER_ALIGNMENT // dtype.itemsize)
    return vector if unit_stride and length % vector == 0 else 1


def _rows_start_aligned(shape, strides, align: int) -> bool:
    return all(stride % align == 0 for size, stride in zip(shape, strides) if size > 1)


def _misaligned(*tensors) -> bool:
    for t in tensors:  # a loop, not any() over a generator: this runs on every call of a planned norm
        if t is not None and t.data_ptr() % POINTER_ALIGNMENT:
            return True
    return False


def _dense_copy(t):
    """A dense copy for a kernel whose operand's layout does not suit it: an op's temporary, which its cost
    rule does not declare (only the layout, not the metadata, asks for it)."""
    if t is None:
        return None
    with scratch_scope():
        return t.clone(memory_format="contiguous_format")


# ---- softmax ---------------------------------------------------------------------------------------
def _softmax_result(x, dim, dtype) -> TensorMeta:
    if dim is None:
        raise TypeError("softmax: dim is required (the implicit choice of dim is deprecated in torch)")
    S.wrap_dim(dim, len(x.shape))
    return TensorMeta(tuple(x.shape), _float_out(x, dtype, "softmax"))


def _softmax_meta(a):
    return _softmax_result(a.x, a.dim, a.dtype)


def _softmax_cost(a):
    out = _softmax_result(a.x, a.dim, a.dtype)
    return Cost(flops=4 * S.numel(a.x.shape), bytes_read=nbytes(a.x), bytes_written=nbytes(out),
                workspace=_softmax_workspace(a.x, a.dim, out.dtype))


def _softmax_workspace(x, dim, out_dtype) -> int:
    """The temporaries of ``_plan_softmax``, the most any device takes: the input converted to ``out_dtype``
    where loading cannot widen it exactly, and a long row's per-chunk partials."""
    converted = out_dtype is not x.dtype and not _exactly_widens(x.dtype, out_dtype)
    total = workspace_bytes(S.numel(x.shape) * out_dtype.itemsize) if converted else 0
    length = x.shape[S.wrap_dim(dim, len(x.shape))] if x.shape else 1
    rows = S.numel(x.shape) // length if length else 0
    compute = compute_dtype(out_dtype)
    partials = [Workspace.bytes_for(_softmax_partials(rows * _softmax_split(length, facts["kernels"])[1], compute))
                for facts in all_facts() if length > facts["kernels"]["softmax_resident_max"]]
    return total + max(partials, default=0)


def _softmax_partials(count: int, compute) -> dict:
    """A long row's temporaries: per chunk, its maximum and its sum of exponentials."""
    return {name: ((count,), compute) for name in ("top", "total")}


def _softmax_split(length: int, facts: dict) -> tuple[int, int]:
    """(chunk length, chunk count) of a row: one chunk up to ``softmax_resident_max`` (held in registers),
    past it chunks of one block of a split row's widest tile (``reduction_split_block``, or half the row
    where that is shorter), longer where a row would take more than about ``reduction_split_chunks`` of
    them. Every program of the normalising sweep combines all of its row's chunk states, so they stay
    few, and a program of either pass loads its chunk at once. A function of the length and the device
    class alone: a row's bits do not depend on its batch."""
    if length <= facts["softmax_resident_max"]:
        return max(length, 1), 1
    block = min(facts["reduction_split_block"], next_pow2(cdiv(length, 2)))
    chunk = max(next_pow2(cdiv(length, facts["reduction_split_chunks"])), block)
    return chunk, cdiv(length, chunk)


_softmax_plans = PlanCache()


def _run_softmax(x: Tensor, dim, dtype, log: bool) -> Tensor:
    key = (layout_key(x), dim_key(dim), dtype, log)
    execute = _softmax_plans.lookup(key)
    if execute is None:
        execute = _softmax_plans.get(key, lambda: _plan_softmax(x, dim, dtype, log, key))
    return execute(x)


def _plan_softmax(x: Tensor, dim, dtype, log: bool, key):
    """``execute(x) -> out`` for inputs laid out as ``x`` is: the entry of ``key`` in ``_softmax_plans``."""
    meta = _softmax_result(x, dim, dtype)
    src, as_dtype = _source(x, meta.dtype)
    convert = src is not x
    compute = compute_dtype(as_dtype)
    dev, shape = x.device, tuple(x.shape)
    if x.numel() == 0:
        return lambda x: new_tensor(shape, meta.dtype, dev)
    out = new_tensor(shape, meta.dtype, dev)
    d = S.wrap_dim(dim, x.ndim)
    if x.ndim == 0:
        src, view, d = src._view((1,), (1,)), out._view((1,), (1,)), 0
    else:
        view = out
    kept = [i for i in range(src.ndim) if i != d]
    row_shape, (src_strides, dst_strides) = S.coalesce([src.shape[i] for i in kept], [src.stride(i) for i in kept],
                                                       [view.stride(i) for i in kept])
    if len(row_shape) > 8:
        return lambda x: _run_softmax(x.contiguous(), dim, dtype, log)
    n_rows = S.numel(row_shape)
    row_shape, src_strides, dst_strides = (row_shape, src_strides, dst_strides) if row_shape else ((1,), (0,), (0,))
    row_shape, src_strides, dst_strides = tuple(row_shape), tuple(src_strides), tuple(dst_strides)
    length = src.shape[d]
    unit, dst_unit = src.stride(d) == 1, view.stride(d) == 1
    align = row_align(length, src.dtype, unit)
    if not _rows_start_aligned(row_shape, src_strides, align):
        return lambda x: _run_softmax(_dense_copy(x), dim, dtype, log)
    facts = kernel_facts(dev)
    flags = conversion_flags(compute, meta.dtype, dev)
    index_64 = needs_index_64(src, view)
    common = dict(LOG=log, ROW_RANK=len(row_shape), RED_UNIT=unit, COMPUTE=compute.triton,
                  SRC_FORMAT=float_format(src.dtype), DST_FORMAT=flags["DST_FORMAT"], VIA_F32=flags["VIA_F32"],
                  FLOAT_TO_INT=False, INDEX_64=index_64, ROW_ALIGN=align, DST_UNIT=dst_unit,
                  DST_ALIGN=row_align(length, meta.dtype, dst_unit))
    source, result = Slot("src"), Slot("out")
    temporaries = {}
    if length <= facts["softmax_resident_max"]:
        block_r = next_pow2(length)
        # unit-stride rows of up to 1024 that one warp's vector loads do not cover: a warp each
        # (``softmax_warp_rows`` of them a program) where the device class says so, loaded element by element
        # (vector loads would have Triton lay the warps along the row again)
        warp_rows = facts.get("softmax_warp_rows", 0) if unit and 32 * align < block_r <= 1024 else 0
        if warp_rows:
            block_rows = warps = warp_rows
            common.update(ROW_ALIGN=1, DST_ALIGN=1)
        else:
            block_rows = max(1, facts["reduction_tile"] // block_r)
            # at most 32 of the tile's elements a thread: a row of 16384 on 8 warps takes all 255 registers
            # (ptxas, sm_90a), on 16 about 120
            warps = max(1, min(facts["reduction_warps"], block_rows * block_r // 256), block_rows * block_r // 1024)
        launches = [PlannedLaunch(
            N.softmax_rows, (cdiv(n_rows, block_rows),),
            [source, result, result, result, n_rows, 0, length, length, 1, row_shape, src_strides, dst_strides,
             src.stride(d), view.stride(d)],
            dict(RESIDENT=True, BLOCK_ROWS=block_rows, BLOCK_R=block_r, CHUNKS=1, CHUNK_BITS=0, STATS=False,
                 ONE_STEP=False, WARP_ROWS=warp_rows > 0, num_warps=warps, **common))]
    else:
        # a long row: (max, sum of exp) per chunk, then a normalising sweep of the same chunks
        chunk, n_chunks = _softmax_split(length, facts)
        block_rows, block_r, warps = tile_for(chunk, facts, split=True)
        # the chunk states add in the tile's order, so the first pass's tile is a function of the length
        # alone; the sweep combines them exactly and may take fewer rows a program
        stats_rows, stats_warps = block_rows, warps
        block_rows = occupying_block_rows(min(block_rows, next_pow2(n_rows)), n_rows,
                                          cdiv(device_programs(dev, facts), n_chunks))
        warps = max(1, min(facts["reduction_warps"], block_rows * block_r // 256))
        temporaries = _softmax_partials(n_rows * n_chunks, compute)
        top, total = Slot("top"), Slot("total")
        chunks = next_pow2(n_chunks)
        launches = [
            PlannedLaunch(
                N.softmax_rows, (cdiv(n_rows, rows_a_program), n_chunks),
                [source, result, top, total, n_rows, 0, length, chunk, n_chunks, row_shape, src_strides, dst_strides,
                 src.stride(d), view.stride(d)],
                dict(RESIDENT=False, BLOCK_ROWS=rows_a_program, BLOCK_R=block_r, CHUNKS=chunks,
                     CHUNK_BITS=chunks.bit_length() - 1, STATS=stats, ONE_STEP=chunk <= block_r,
                     num_warps=program_warps, **common))
            for stats, rows_a_program, program_warps in ((True, stats_rows, stats_warps), (False, block_rows, warps))]

    workspace = Workspace(temporaries)
    fresh_output = fresh_tensor_maker(shape, meta.dtype, dev)

    if not convert:
        call = LaunchCall(dev, launches, workspace, "src", [(("out",), fresh_output)])

        def execute_in_place(x):
            if _misaligned(x):
                return _run_softmax(_dense_copy(x), dim, dtype, log)
            return call(x)[0]
        return binding_run(_softmax_plans, key, call, 0, execute_in_place)

    def execute(x):
        out = fresh_output()
        run_launches(dev, launches, workspace, {"src": x.to(as_dtype), "out": out})
        return out
    return execute


def _softmax_from_aten(args, kwargs):
    # aten::_softmax(self, dim, half_to_float): half_to_float asks for a float32 result from half input
    x, dim, *rest = args
    half_to_float = rest[0] if rest else kwargs.get("half_to_float", False)
    return (x, dim), ({"dtype": get_dtype("float32")} if half_to_float else {})


@register("softmax", family="normalization", aten=["aten::_softmax.default", "aten::softmax.int"],
          meta=_softmax_meta, cost=_softmax_cost, bound=True, methods=("softmax",), functional=True,
          adapters={"aten::_softmax.default": _softmax_from_aten})
def softmax(x: Tensor, dim=None, dtype=None, _stacklevel: int = 3) -> Tensor:
    """exp(x - max) / sum(exp(x - max)) along ``dim``, in float32 for half precision (float64 for
    float64); a row of -inf gives NaN, as in torch."""
    return _run_softmax(x, dim, dtype, False)


@register("log_softmax", family="normalization", aten=["aten::_log_softmax.default", "aten::log_softmax.int"],
          meta=_softmax_meta, cost=_softmax_cost, bound=True, methods=("log_softmax",), functional=True,
          adapters={"aten::_log_softmax.default": _softmax_from_aten})
def log_softmax(x: Tensor, dim=None, dtype=None, _stacklevel: int = 3) -> Tensor:
    """x - max - log(sum(exp(x - max))) along ``dim``."""
    return _run_softmax(x, dim, dtype, True)


# ---- layer norm, rms norm, group norm -------------------------------------------------------------
def _normalized_length(x, normalized_shape, op: str) -> int:
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    dims = tuple(x.shape)  # a plain tuple slices without making a Size
    if not shape or len(shape) > len(dims) or dims[len(dims) - len(shape):] != shape:
        raise S.ShapeError(f"{op}: normalized_shape {list(shape)} must be the trailing dims of the input, whose "
                           f"shape is {list(x.shape)}")
    return math.prod(shape)


def _as_rows(t: Tensor, n_rows: int, length: int) -> Tensor:
    """``t`` as [n_rows, length] whose row elements are adjacent (a view when strides allow, else a
    temporary copy, as ``_dense_copy``)."""
    with scratch_scope():
        rows = t.reshape(n_rows, length)
        if length > 1 and rows.stride(1) != 1:
            rows = rows.contiguous()
    return rows


def _param(p, length: int, what: str, op: str):
    if p is None:
        return None
    if p.numel() != length:
        raise S.ShapeError(f"{op}: {what} has {p.numel()} elements, expected {length}")
    return p.reshape(length).contiguous()


_norm_plans = PlanCache()


def _run_norm(x, length, *, rms, weight, bias, eps, residual=None, groups=1, group_channels=1, spatial=1,
              per_channel=False, op="layer_norm", round_normed=False):
    options = dict(rms=rms, eps=eps, groups=groups, group_channels=group_channels, spatial=spatial,
                   per_channel=per_channel, op=op, round_normed=round_normed)
    key = (layout_key(x), length, layout_key(weight), layout_key(bias), layout_key(residual), *options.values())
    return _norm_plans.get(key, lambda: _plan_norm(x, length, weight, bias, residual, **options))(
        x, weight, bias, residual)


def _dense_order(x, length, residual) -> tuple[int, ...] | None:
    """The order of ``x``'s dims (outermost first) in which it is contiguous, where that is not their own order
    and keeps the normalised trailing dims (``length`` elements) innermost, and ``residual`` (if any) is laid out
    alike: an RMS norm of such a tensor (a head-wise norm of a transposed view) keeps its layout, as the
    pointwise ops transformers' RMSNorm is written in do (a graph exported from them views the result so).
    None otherwise."""
    shape, strides = tuple(x.shape), tuple(x.stride())
    if residual is not None and tuple(residual.stride()) != strides:
        return None
    order = tuple(sorted(range(len(shape)), key=lambda d: -strides[d]))
    trailing = 0
    while trailing < len(shape) and math.prod(shape[len(shape) - trailing:]) < length:
        trailing += 1
    innermost = tuple(range(len(shape) - trailing, len(shape)))
    if (order == tuple(range(len(shape))) or order[len(order) - trailing:] != innermost
            or not S.is_contiguous(tuple(shape[d] for d in order), tuple(strides[d] for d in order))):
        return None
    return order


def _plan_norm(x, length, weight, bias, residual, *, rms, eps, groups, group_channels, spatial, per_channel, op,
               round_normed):
    """``execute(x, weight, bias, residual) -> (out, residual sum or None)`` for operands laid out as these."""
    if x.dtype.is_complex or not x.dtype.is_floating_point or x.dtype.storage_only:
        raise TypeError(f"{op}: expected a floating-point input, got {x.dtype.name}")
    order = _dense_order(x, length, residual) if rms and groups == 1 else None
    if order is not None and x.numel():
        shape = tuple(x.shape)
        inner_shape = tuple(shape[d] for d in order)
        inverse = tuple(order.index(d) for d in range(len(order)))
        out_strides = tuple(S.contiguous_strides(inner_shape)[i] for i in inverse)

        def inner_view(t):
            return None if t is None else t._view(inner_shape, tuple(t.stride(d) for d in order))
        inner = _plan_norm(inner_view(x), length, weight, bias, inner_view(residual), rms=rms, eps=eps, groups=groups,
                           group_channels=group_channels, spatial=spatial, per_channel=per_channel, op=op,
                           round_normed=round_normed)

        def in_layout(x, weight, bias, residual):
            out, res_out = inner(inner_view(x), weight, bias, inner_view(residual))
            return out._view(shape, out_strides), None if res_out is None else res_out._view(shape, out_strides)
        return in_layout
    dev, shape, dtype = x.device, tuple(x.shape), x.dtype
    n_rows = x.numel() // length if length else 0
    if x.numel() == 0:
        return lambda x, weight, bias, residual: (
            new_tensor(shape, dtype, dev), new_tensor(shape, dtype, dev) if residual is not None else None)
    if residual is not None and tuple(residual.shape) != shape:
        raise S.ShapeError(f"{op}: residual shape {list(residual.shape)} differs from input {list(x.shape)}")
    affine_length = groups * group_channels if per_channel else length
    ones_weight = weight is None and bias is not None

    def operands(x, weight, bias, residual):
        """The kernel's operands: rows of x and residual (views, or copies where strides need them), and
        the affine parameters as flat contiguous vectors."""
        if ones_weight:
            from .creation import ones
            with scratch_scope():  # declared by the cost rule (``_norm_cost``)
                weight = ones(affine_length, dtype=bias.dtype, device=dev)
        return (_as_rows(x, n_rows, length), _as_rows(residual, n_rows, length) if residual is not None else None,
                _param(weight, affine_length, "weight", op), _param(bias, affine_length, "bias", op))
    rows, res_rows, weight_v, bias_v = operands(x, weight, bias, residual)
    # where every operand is a view of what the caller passed, a call passes those tensors unchanged
    views = (not ones_weight and rows._storage is x._storage and (residual is None or res_rows._storage is residual._storage)
             and (weight is None or weight_v._storage is weight._storage)
             and (bias is None or bias_v._storage is bias._storage))
    options = dict(rms=rms, eps=eps, groups=groups, group_channels=group_channels, spatial=spatial,
                   per_channel=per_channel, op=op, round_normed=round_normed)

    def from_dense_copies(x, weight, bias, residual):
        return _run_norm(_dense_copy(x), length, weight=_dense_copy(weight), bias=_dense_copy(bias),
                         residual=_dense_copy(residual), **options)
    align = row_align(length, dtype, True)
    if not all(_rows_start_aligned((n_rows,), (t.stride(0),), align) for t in (rows, res_rows) if t is not None):
        return from_dense_copies
    compute = compute_dtype(dtype)
    facts = kernel_facts(dev)
    resident = length <= facts["row_resident_max"]
    if resident:
        block_r = next_pow2(length)
        block_rows = max(1, facts["reduction_tile"] // block_r)
        warps = max(1, min(facts["reduction_warps"], block_rows * block_r // 256))
    else:
        block_rows, block_r, warps = tile_for(length, facts, split=True)  # long rows, few of them
    flags = conversion_flags(compute, dtype, dev)
    rows_slot, out_slot = Slot("rows"), Slot("out")
    has_residual, has_weight, has_bias = residual is not None, weight_v is not None, bias_v is not None
    launch = PlannedLaunch(
        N.norm_rows, (cdiv(n_rows, block_rows),),
        [rows_slot, Slot("res_rows") if has_residual else rows_slot, Slot("res_out") if has_residual else out_slot,
         Slot("weight") if has_weight else rows_slot, Slot("bias") if has_bias else rows_slot, out_slot,
         n_rows, 0, length, float(eps), groups, group_channels, spatial,
         (n_rows,), (rows.stride(0),), (res_rows.stride(0) if has_residual else 0,)],
        dict(RMS=rms, AFFINE=0 if not has_weight else (2 if per_channel else 1), HAS_BIAS=has_bias,
             HAS_RESIDUAL=has_residual, ROW_RANK=1, RESIDENT=resident, COMPUTE=compute.triton,
             SRC_FORMAT=float_format(dtype),
             RES_FORMAT=float_format(residual.dtype) if has_residual else FORMAT_NATIVE.value,
             H_FORMAT=flags["DST_FORMAT"], H_VIA_F32=flags["VIA_F32"],
             W_FORMAT=float_format(weight_v.dtype) if has_weight else FORMAT_NATIVE.value,
             B_FORMAT=float_format(bias_v.dtype) if has_bias else FORMAT_NATIVE.value,
             DST_FORMAT=flags["DST_FORMAT"], VIA_F32=flags["VIA_F32"],
             INDEX_64=needs_index_64(x, rows), ROW_ALIGN=align,
             BLOCK_ROWS=block_rows, BLOCK_R=block_r, LANE_BITS=block_r.bit_length() - 1, PDL=dependent_launch(dev),
             ROUND_NORMED=round_normed and dtype.itemsize < 4, num_warps=warps))

    fresh_output = fresh_tensor_maker(shape, dtype, dev)

    def execute(x, weight, bias, residual):
        if _misaligned(x, residual, weight, bias):  # a view's pointer is its base's; a copy's is aligned
            return from_dense_copies(x, weight, bias, residual)
        if not views:
            x, residual, weight, bias = operands(x, weight, bias, residual)
        out = fresh_output()
        res_out = fresh_output() if has_residual else None
        launch(dev, {"rows": x, "res_rows": residual, "weight": weight, "bias": bias, "out": out,
                     "res_out": res_out})
        return out, res_out
    return execute


def _norm_cost(x, *params, outputs=1, weight=None, bias=None):
    """``weight`` and ``bias``: the affine ones; a bias without a weight takes a temporary weight of ones."""
    read = nbytes(x) + sum(nbytes(p) for p in (*params, weight, bias) if p is not None)
    return Cost(flops=5 * S.numel(x.shape), bytes_read=read, bytes_written=outputs * nbytes(x),
                workspace=workspace_bytes(nbytes(bias)) if weight is None and bias is not None else 0)


def _normalized_like_input(x, normalized_shape, op: str) -> TensorMeta:
    _normalized_length(x, normalized_shape, op)
    return TensorMeta(tuple(x.shape), x.dtype)


def _layer_norm_meta(a):
    return _normalized_like_input(a.x, a.normalized_shape, "layer_norm")


def _layer_norm_cost(a):
    return _norm_cost(a.x, weight=a.weight, bias=a.bias)


@register("layer_norm", family="normalization", aten=["aten::layer_norm.default"], meta=_layer_norm_meta,
          cost=_layer_norm_cost, bound=True, functional=True)
def layer_norm(x: Tensor, normalized_shape, weight=None, bias=None, eps: float = 1e-5, cudnn_enable=True) -> Tensor:
    """(x - mean) / sqrt(var + eps) * weight + bias over the trailing ``normalized_shape`` dims
    (biased variance, computed in float32 for half precision)."""
    length = _normalized_length(x, normalized_shape, "layer_norm")
    return _run_norm(x, length, rms=False, weight=weight, bias=bias, eps=eps)[0]


_MACHINE_EPS: dict = {}  # dtype -> its machine epsilon, the default eps of rms_norm


def _rms_eps(x, eps):
    if eps is not None:
        return eps
    dtype = x.dtype
    found = _MACHINE_EPS.get(dtype)
    if found is None:
        found = _MACHINE_EPS[dtype] = float(ml_dtypes.finfo(dtype.numpy).eps)
    return found


def _rms_norm_meta(a):
    return _normalized_like_input(a.x, a.normalized_shape, "rms_norm")


def _rms_norm_cost(a):
    return _norm_cost(a.x, a.weight)


@register("rms_norm", family="normalization", aten=["aten::rms_norm.default"], meta=_rms_norm_meta,
          cost=_rms_norm_cost, bound=True, functional=True)
def rms_norm(x: Tensor, normalized_shape, weight=None, eps=None) -> Tensor:
    """x / sqrt(mean(x^2) + eps) * weight; ``eps`` defaults to the dtype's machine epsilon, as torch."""
    length = _normalized_length(x, normalized_shape, "rms_norm")
    return _run_norm(x, length, rms=True, weight=weight, bias=None, eps=_rms_eps(x, eps), op="rms_norm")[0]


@register("rounded_rms_norm", family="normalization", aten=["nbx::rms_norm"], meta=_rms_norm_meta,
          cost=_rms_norm_cost, bound=True, api=())
def rounded_rms_norm(x: Tensor, normalized_shape, weight=None, eps=None, round_normed: bool = False) -> Tensor:
    """``rms_norm``; with ``round_normed``, the normalised value is rounded to x's dtype before the weight
    multiplies it, as transformers' RMSNorm computes ``weight * normed.to(dtype)`` (graph fusion's target)."""
    length = _normalized_length(x, normalized_shape, "rms_norm")
    return _run_norm(x, length, rms=True, weight=weight, bias=None, eps=_rms_eps(x, eps), op="rms_norm",
                     round_normed=round_normed)[0]


def _add_rms_norm_meta(a):
    meta = _normalized_like_input(a.x, a.normalized_shape, "rms_norm")
    return (meta, meta)


def _add_rms_norm_cost(a):
    return _norm_cost(a.x, a.residual, a.weight, outputs=2)


@register("add_rms_norm", family="normalization", aten=["nbx::add_rms_norm"], meta=_add_rms_norm_meta,
          cost=_add_rms_norm_cost, bound=True, api=(), functional=True)
def add_rms_norm(x: Tensor, residual: Tensor, normalized_shape, weight=None, eps=None, round_normed: bool = False):
    """(rms_norm(x + residual), x + residual) in one pass; the sum is rounded to x's dtype before it
    is normalised, exactly as the unfused ``rms_norm(x + residual)`` would see it. ``round_normed``: as
    ``rounded_rms_norm``."""
    length = _normalized_length(x, normalized_shape, "add_rms_norm")
    return _run_norm(x, length, rms=True, weight=weight, bias=None, eps=_rms_eps(x, eps), residual=residual,
                     op="add_rms_norm", round_normed=round_normed)


def _add_layer_norm_meta(a):
    meta = _normalized_like_input(a.x, a.normalized_shape, "layer_norm")
    return (meta, meta)


def _add_layer_norm_cost(a):
    return _norm_cost(a.x, a.residual, outputs=2, weight=a.weight, bias=a.bias)


@register("add_layer_norm", family="normalization", aten=["nbx::add_layer_norm"], meta=_add_layer_norm_meta,
          cost=_add_layer_norm_cost, bound=True, api=(), functional=True)
def add_layer_norm(x: Tensor, residual: Tensor, normalized_shape, weight=None, bias=None, eps: float = 1e-5):
    """(layer_norm(x + residual), x + residual) in one pass, the sum rounded to x's dtype first."""
    length = _normalized_length(x, normalized_shape, "add_layer_norm")
    return _run_norm(x, length, rms=False, weight=weight, bias=bias, eps=eps, residual=residual,
                     op="add_layer_norm")


def _check_groups(x, num_groups) -> TensorMeta:
    if len(x.shape) < 2:
        raise S.ShapeError(f"group_norm expects an input of at least 2 dims (N, C, ...), got {list(x.shape)}")
    if num_groups <= 0 or x.shape[1] % num_groups:
        raise S.ShapeError(f"group_norm: {x.shape[1]} channels do not split into {num_groups} groups")
    return TensorMeta(tuple(x.shape), x.dtype)


def _group_norm_meta(a):
    return _check_groups(a.x, a.num_groups)


def _affine_norm_cost(a):
    return _norm_cost(a.x, weight=a.weight, bias=a.bias)


@register("group_norm", family="normalization", aten=["aten::group_norm.default"], meta=_group_norm_meta,
          cost=_affine_norm_cost, bound=True, functional=True)
def group_norm(x: Tensor, num_groups: int, weight=None, bias=None, eps: float = 1e-5, cudnn_enabled=True) -> Tensor:
    """Normalise each (sample, group of channels) over its channels and positions, then scale and
    shift per channel."""
    _check_groups(x, num_groups)
    channels = x.shape[1]
    spatial = S.numel(x.shape[2:])
    group_channels = channels // num_groups
    length = group_channels * spatial
    return _run_norm(x, length, rms=False, weight=weight, bias=bias, eps=eps, groups=num_groups,
                     group_channels=group_channels, spatial=spatial, per_channel=True, op="group_norm")[0]


def _check_channels(x) -> TensorMeta:
    if len(x.shape) < 2:
        raise S.ShapeError(f"batch_norm expects an input of at least 2 dims (N, C, ...), got {list(x.shape)}")
    return TensorMeta(tuple(x.shape), x.dtype)


def _batch_norm_meta(a):
    return _check_channels(a.x)


def _batch_norm_cost(a):
    return _norm_cost(a.x, a.running_mean, a.running_var, weight=a.weight, bias=a.bias)


_BATCH_NORM_PARAMETER_DTYPES = frozenset(("float16", "bfloat16", "float32", "float64"))


def _batch_norm_from_aten(args, kwargs):
    # aten::batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled);
    # torch's Python batch_norm takes the running statistics before weight and bias
    named = {**dict(zip(("input", "weight", "bias", "running_mean", "running_var", "training", "momentum", "eps",
                         "cudnn_enabled"), args)), **kwargs}
    x = named.pop("input")
    return (x, named.pop("running_mean", None), named.pop("running_var", None)), named


@register("batch_norm", family="normalization", aten=["aten::batch_norm.default"], meta=_batch_norm_meta,
          cost=_batch_norm_cost, bound=True, functional=True,
          adapters={"aten::batch_norm.default": _batch_norm_from_aten})
def batch_norm(x: Tensor, running_mean, running_var, weight=None, bias=None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5, cudnn_enabled=True) -> Tensor:
    """Inference batch norm: (x - running_mean) / sqrt(running_var + eps) * weight + bias per channel."""
    _check_channels(x)
    if training:
        raise NotImplementedError("batch_norm: training mode (batch statistics and running-stat updates) is not "
                                  "supported by this inference library; pass training=False with running stats")
    if running_mean is None or running_var is None:
        raise RuntimeError("batch_norm: running_mean and running_var must be defined in evaluation mode")
    if not x.dtype.is_floating_point or x.dtype.storage_only:
        raise TypeError(f"batch_norm: expected a floating-point input, got {x.dtype.name}")
    channels = x.shape[1]
    compute = compute_dtype(x.dtype)
    params = [_param(p, channels, name, "batch_norm") for p, name in
              ((running_mean, "running_mean"), (running_var, "running_var"), (weight, "weight"), (bias, "bias"))]
    # the kernel widens half and single precision parameters in registers (no conversion launches)
    params = [p if p is None or p.dtype.name in _BATCH_NORM_PARAMETER_DTYPES else p.to(dtype=compute)
              for p in params]
    # the output's layout is ATen's suggested memory format of the input: a channels-last input keeps
    # its layout and is read in place, the channel then varying fastest
    channels_last = S.strides_like_channels_last(x.shape, x.stride())
    layout = ("channels_last_3d" if len(x.shape) == 5 else "channels_last") if channels_last else "contiguous_format"
    out = new_tensor(x.shape, x.dtype, x.device, S.channels_last_strides(x.shape, layout) if channels_last else None)
    n = x.numel()
    if n == 0:
        return out
    src = x.contiguous(memory_format=layout)
    block = kernel_facts(x.device)["elementwise_block"]
    flags = conversion_flags(compute, x.dtype, x.device)
    mean_, var_, w, b = params
    launch(N.batch_norm_inference, (cdiv(n, block),), x.device,
           [src, out, mean_, var_, w if w is not None else mean_, b if b is not None else mean_, n, channels,
            1 if channels_last else S.numel(x.shape[2:]), float(eps)],
           HAS_WEIGHT=w is not None, HAS_BIAS=b is not None, COMPUTE=compute.triton, SRC_FORMAT=float_format(x.dtype),
           MEAN_FORMAT=float_format(mean_.dtype), VAR_FORMAT=float_format(var_.dtype),
           W_FORMAT=float_format((w if w is not None else mean_).dtype),
           B_FORMAT=float_format((b if b is not None else mean_).dtype), DST_FORMAT=flags["DST_FORMAT"],
           VIA_F32=flags["VIA_F32"], INDEX_64=needs_index_64(count=n), BLOCK=block)
    return out


def _native_group_norm_meta(a):
    _check_groups(a.x, a.group)
    statistics = TensorMeta((a.N, a.group), a.x.dtype)
    return TensorMeta(tuple(a.x.shape), a.x.dtype), statistics, statistics


def _native_group_norm_cost(a):
    norm = _norm_cost(a.x, a.weight, a.bias)
    statistic = a.N * a.group * a.x.dtype.itemsize
    # the statistics' pass: var_mean's own temporaries, the variance and the variance plus eps
    moments = get("var_mean").cost(TensorMeta((a.N, a.group, S.numel(a.x.shape) // max(a.N * a.group, 1)),
                                              a.x.dtype), dim=-1, correction=0)
    return Cost(flops=norm.flops + 3 * S.numel(a.x.shape), bytes_read=norm.bytes_read + nbytes(a.x),
                bytes_written=norm.bytes_written + 2 * statistic,
                workspace=norm.workspace + moments.workspace + workspace_bytes(statistic, statistic))


@register("native_group_norm", family="normalization", aten=["aten::native_group_norm.default"],
          meta=_native_group_norm_meta, cost=_native_group_norm_cost, bound=True)
def native_group_norm(x: Tensor, weight, bias, N: int, C: int, HxW: int, group: int, eps: float):
    """What torch.export makes of ``group_norm``: (out, mean, rstd), with the mean and 1/std of each
    (sample, group) that training keeps for the backward pass, computed here in a second pass over x."""
    out = group_norm.impl(x, group, weight, bias, eps)
    var, mean = get("var_mean").impl(x.reshape(N, group, -1), dim=-1, correction=0)
    return out, mean, get("rsqrt").impl(get("add").impl(var, eps))


def _native_batch_norm_no_training_meta(a):
    empty = TensorMeta((0,), a.x.dtype)
    return _check_channels(a.x), empty, empty


@register("native_batch_norm_no_training", family="normalization",
          aten=["aten::_native_batch_norm_legit_no_training.default"], meta=_native_batch_norm_no_training_meta,
          cost=_batch_norm_cost, bound=True, api=())
def native_batch_norm_no_training(x: Tensor, weight, bias, running_mean, running_var, momentum: float, eps: float):
    """What torch.export makes of an inference ``batch_norm``: (out, save_mean, save_invstd), the last two
    empty as ATen's are (no batch statistics are taken)."""
    out = batch_norm.impl(x, running_mean, running_var, weight, bias, False, momentum, eps)
    return out, new_tensor((0,), x.dtype, x.device), new_tensor((0,), x.dtype, x.device)


# nbxtensor.nn.functional's names for these ops


# ---- samples ---------------------------------------------------------------------------------------

def _softmax_reference(x, dim=None, dtype=None, _stacklevel=3):
    shifted = np.exp(x - np.max(x, axis=dim, keepdims=True))
    return shifted / np.sum(shifted, axis=dim, keepdims=True)


def _layer_norm_reference(x, normalized_shape, weight=None, bias=None, eps=1e-5, *ignored):
    axes = tuple(range(-len(normalized_shape), 0))
    normed = (x - x.mean(axis=axes, keepdims=True)) / np.sqrt(x.var(axis=axes, keepdims=True) + eps)
    return normed * (1 if weight is None else weight) + (0 if bias is None else bias)


def _rms_norm_reference(x, normalized_shape, weight=None, eps=None):
    axes = tuple(range(-len(normalized_shape), 0))
    eps = np.finfo(np.float32).eps if eps is None else eps
    return x / np.sqrt(np.mean(x * x, axis=axes, keepdims=True) + eps) * (1 if weight is None else weight)


def _channels(values, ndim):
    """A per-channel vector shaped to broadcast along dim 1 of an ``ndim``-d input."""
    return np.reshape(values, (-1,) + (1,) * (ndim - 2))


def _group_norm_reference(x, num_groups, weight=None, bias=None, eps=1e-5, *ignored):
    grouped = np.reshape(x, (x.shape[0], num_groups, -1))
    normed = (grouped - grouped.mean(-1, keepdims=True)) / np.sqrt(grouped.var(-1, keepdims=True) + eps)
    normed = np.reshape(normed, x.shape)
    return normed * (1 if weight is None else _channels(weight, x.ndim)) + (0 if bias is None else _channels(bias, x.ndim))


def _batch_norm_reference(x, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1,
                          eps=1e-5, *ignored):
    normed = (x - _channels(running_mean, x.ndim)) / np.sqrt(_channels(running_var, x.ndim) + eps)
    return normed * (1 if weight is None else _channels(weight, x.ndim)) + (0 if bias is None else _channels(bias, x.ndim))


_ROWS = operand(2, 4)
_SAMPLES = {
    "softmax": Samples((sample(_ROWS, 1), sample(operand(4, 2, layout="transposed"), 0), sample(operand(), 0),
                        sample(operand(0, 3), 1), sample(operand(2, 4, dtype="bfloat16", layout="sliced"), -1),
                        sample(_ROWS, 1, dtype=get_dtype("float64"))), _softmax_reference),
    "log_softmax": Samples((sample(_ROWS, 1), sample(operand(4, 2, layout="transposed"), 0), sample(operand(0, 3), 1),
                            sample(operand(2, 4, dtype="bfloat16", layout="sliced"), -1)),
                           lambda x, dim=None, *ignored: np.log(_softmax_reference(x, dim))),
    "layer_norm": Samples((sample(_ROWS, (4,)), sample(_ROWS, (4,), operand(4), operand(4)),
                           sample(operand(2, 3, 2, layout="transposed"), (3, 2)), sample(operand(0, 4), (4,)),
                           sample(operand(2, 4, dtype="bfloat16"), [4], operand(4, dtype="bfloat16"))),
                          _layer_norm_reference),
    "rms_norm": Samples((sample(_ROWS, (4,)), sample(_ROWS, (4,), operand(4), 1e-6), sample(operand(0, 4), (4,)),
                         sample(operand(2, 4, dtype="bfloat16", layout="sliced"), [4], operand(4, dtype="bfloat16"))),
                        _rms_norm_reference),
    "rounded_rms_norm": Samples((sample(_ROWS, (4,), operand(4)), sample(operand(2, 4, dtype="bfloat16"), (4,),
                                                                          operand(4, dtype="bfloat16"), 1e-6, True))),
    "add_rms_norm": Samples((sample(_ROWS, _ROWS, (4,), operand(4)), sample(operand(2, 4, dtype="bfloat16"),
                                                                             operand(2, 4, dtype="bfloat16"), (4,)))),
    "add_layer_norm": Samples((sample(_ROWS, _ROWS, (4,), operand(4), operand(4)), sample(operand(2, 4), operand(2, 4), (4,)))),
    "group_norm": Samples((sample(operand(2, 4, 3), 2), sample(operand(2, 4, 3), 4, operand(4), operand(4)),
                           sample(operand(1, 2, 2, 2, dtype="bfloat16"), 1)), _group_norm_reference),
    "batch_norm": Samples((sample(operand(2, 3, 2), operand(3), operand(3, values="positive")),
                           sample(operand(2, 3), operand(3), operand(3, values="positive"), operand(3), operand(3))),
                          _batch_norm_reference),
    "native_group_norm": Samples((sample(operand(2, 4, 3), operand(4), operand(4), 2, 4, 3, 2, 1e-5),)),
    "native_batch_norm_no_training": Samples((sample(operand(2, 3, 2), operand(3), operand(3), operand(3),
                                                     operand(3, values="positive"), 0.1, 1e-5),)),
}
family_samples("normalization", by_name(_SAMPLES))
