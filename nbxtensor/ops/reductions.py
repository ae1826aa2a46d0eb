"""Reductions and scans: every one is a launch of ``kernels/reduce.py``'s row kernels over a strided
view of its input (no copy), with ATen's dtype rules, empty-input rules and NaN semantics."""
from __future__ import annotations

import builtins
import math
from collections import namedtuple

import numpy as np

from .. import shape as S
from ..allocation import ARRIVAL_COUNTERS, Workspace, fresh_tensor_maker
from ..device import backend_for, multiprocessors
from ..device.facts import all_facts
from ..dtypes import get_dtype
from ..kernels import reduce as K
from ..launch import cdiv, next_pow2
from ..lowering import conversion_flags, load_format, needs_index_64
from ..promotion import get_default_dtype
from ..tensor import Tensor
from .plans import LaunchCall, PlanCache, PlannedLaunch, Slot, binding_run, layout_key, run_launches
from .registry import Cost, TensorMeta, family_samples, get, nbytes, register
from .samples import Samples, by_name, numpy_axis, operand, reduction_samples, sample, scan_samples

# kept and reduced dims, each after merging, that the kernels index directly; more are made contiguous
MAX_KERNEL_RANK = 8

max_result = namedtuple("max", ["values", "indices"])
min_result = namedtuple("min", ["values", "indices"])
aminmax_result = namedtuple("aminmax", ["min", "max"])
cummax_result = namedtuple("cummax", ["values", "indices"])
cummin_result = namedtuple("cummin", ["values", "indices"])


def _dt(name):
    return get_dtype(name)


def kernel_facts(dev) -> dict:
    return backend_for(dev).facts["kernels"]


# ---- dims and dtypes -----------------------------------------------------------------------------
def reduced_dims(ndim: int, dim, op: str) -> tuple[int, ...]:
    """The sorted dims ``dim`` names (None or an empty list: all of them), checked as ATen checks."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, int) or hasattr(dim, "__index__"):
        dims = (dim,)
    else:
        try:
            dims = tuple(dim)
        except TypeError:
            raise TypeError(f"{op}: dim must be an integer or a sequence of integers, got {dim!r}") from None
    if not dims:
        return tuple(range(ndim))
    out = []
    for d in dims:
        try:
            w = S.wrap_dim(d, ndim)
        except IndexError as e:
            raise IndexError(f"{op}: {e}") from None
        if w in out:
            raise RuntimeError(f"{op}: dim {w} appears multiple times in the list of dims")
        out.append(w)
    return tuple(sorted(d for d in out if d < ndim))


def dim_key(dim):
    """``dim`` (an int, None or a sequence of them) as part of a plan key: an int or None as itself, else each
    item with its type, since ``True == 1`` as keys and a bool dim is refused where an int one is not."""
    if dim is None or type(dim) is int:
        return dim
    if isinstance(dim, (list, tuple)):
        return tuple(map(type, dim)), tuple(dim)
    return type(dim), dim


def reduced_shape(shape, dims, keepdim: bool) -> tuple[int, ...]:
    if keepdim:
        return tuple(1 if i in dims else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in dims)


def _reduced_length(shape, dims) -> int:
    return math.prod(shape[d] for d in dims) if shape else 1


def compute_dtype(dt):
    """The type elements are accumulated in: float32 for half precision, int64 for integers and bool."""
    if dt.is_floating_point:
        return _dt("float64") if dt.itemsize == 8 else _dt("float32")
    return _dt("int64")


def _check_supported(x, op: str) -> None:
    if x.dtype.is_complex:
        raise TypeError(f"{op}: complex inputs are not supported; reduce view_as_real(x) instead")
    if x.dtype.storage_only:
        raise TypeError(f"{op}: {x.dtype.name} is a storage-only dtype; convert it to a float dtype first")


def _sum_dtype(dt, dtype):
    if dtype is not None:
        return get_dtype(dtype)
    return _dt("int64") if dt.kind in ("bool", "int", "uint") else dt


def _float_dtype(dt, dtype, op: str):
    """Output dtype of ops defined for floats only (mean, var, norm)."""
    if dtype is not None:
        dtype = get_dtype(dtype)
        if not dtype.is_floating_point:
            raise RuntimeError(f"{op}(): dtype must be a floating point dtype, got {dtype.name}")
        return dtype
    if not dt.is_floating_point:
        raise RuntimeError(f"{op}(): could not infer output dtype. Input dtype must be either a floating point "
                           f"or complex dtype. Got: {dt.name}; pass dtype= to convert it")
    return dt


def _exactly_widens(src, dst) -> bool:
    """Whether every ``src`` value converts exactly to ``dst``, so the kernel may convert on load."""
    if src is dst or src.kind == "bool":
        return True
    if src.is_floating_point and dst.is_floating_point:
        return dst.itemsize > src.itemsize or (src.itemsize == dst.itemsize == 4)
    if src.is_integral:
        return dst.name == "int64" or (dst.name == "float64" and src.itemsize <= 4)
    return False


def _source(x: Tensor, dtype):
    """The tensor the kernel reads and the dtype it treats elements as: ATen converts the input to
    ``dtype`` before reducing; exact widenings happen on load, others through a copy first."""
    if dtype is None or dtype is x.dtype:
        return x, x.dtype
    if _exactly_widens(x.dtype, dtype):
        return x, dtype
    return x.to(dtype), dtype


def _extremes(dt):
    """Lowest and highest values of compute dtype ``dt``, as kernel constants."""
    if dt.is_floating_point:
        return float("-inf"), float("inf")
    return -(2 ** 63), 2 ** 63 - 1


# ---- the launch -------------------------------------------------------------------------------------
def _geometry(x: Tensor, dims, order_matters: bool):
    """(row shape, row strides, reduced shape, reduced strides), each pair merged where strides allow.
    When the order of reduced elements does not matter, reduced dims are walked outermost stride first
    so that a transposed dense input still reads as one run."""
    kept = [d for d in range(x.ndim) if d not in dims]
    red = list(dims)
    if not order_matters:
        red.sort(key=lambda d: -x.stride(d))
    row_shape, (row_strides,) = S.coalesce([x.shape[d] for d in kept], [x.stride(d) for d in kept])
    red_shape, (red_strides,) = S.coalesce([x.shape[d] for d in red], [x.stride(d) for d in red])
    return row_shape, row_strides, red_shape, red_strides


def _pad(shape, strides):
    return (tuple(shape), tuple(strides)) if shape else ((1,), (0,))


def split_plan(length: int, facts: dict, multiprocessor_count: int | None = None,
               column: bool = False, threshold: int | None = None, floor: int | None = None) -> tuple[int, int]:
    """(chunk length, chunk count) for a row of ``length``: a function of the length and the device
    alone (its facts, its ``multiprocessor_count``; None: the most chunks any device takes), so a row is
    reduced in the same order whatever batch it is in. A row past the split length (``threshold``, the
    op's own where it splits sooner) is cut into chunks short enough that one row alone spreads over
    every multiprocessor (down to ``reduction_split_min`` elements, or the op's own ``floor``, up to
    ``reduction_split_block``), and
    into about ``reduction_split_chunks`` of them when longer. Column layouts (reduced elements strided,
    kept ones adjacent) split from a shorter length: their programs span many kept elements, so they
    are few; up to ``reduction_split_block`` they make about ``reduction_column_split_chunks`` chunks (where
    the facts name it), past it they split as rows do."""
    if threshold is None:
        threshold = facts["reduction_column_split_length" if column else "reduction_split_length"]
    if length <= threshold:
        return max(length, 1), 1
    column_chunks = facts.get("reduction_column_split_chunks")
    if column and column_chunks and length <= facts["reduction_split_block"]:
        # a column split up to a split block long makes about this many chunks: at 256 a chunk (the row
        # floor) 2048 rows of 768 columns gave 192 programs of 16 steps, too few loads in flight
        chunk = max(facts["reduction_column_lanes"], next_pow2(cdiv(length, column_chunks)))
        return chunk, cdiv(length, chunk)
    floor = facts["reduction_split_min"] if floor is None else floor
    spread = floor if multiprocessor_count is None else max(floor, next_pow2(cdiv(length, multiprocessor_count)))
    chunk = max(next_pow2(cdiv(length, facts["reduction_split_chunks"])), min(facts["reduction_split_block"], spread))
    return chunk, cdiv(length, chunk)


def scan_split_length(facts: dict) -> int:
    """cumsum splits a row that one program would walk in more than one step of a split chunk's width:
    the steps of one program follow each other, the chunks of a split row run side by side."""
    return min(facts["reduction_split_length"], facts["reduction_split_block"])


def scan_split(length: int, facts: dict, multiprocessor_count: int | None = None) -> tuple[int, int]:
    """cumsum's (chunk length, chunk count) for a row of ``length``: a reduction's split, but no chunk shorter
    than ``scan_split_min`` where the facts name it: a chunk's program waits for the totals of every chunk
    before it, so a one-row scan of many short chunks is bound by those waits, not by its bytes."""
    return split_plan(length, facts, multiprocessor_count, threshold=scan_split_length(facts),
                      floor=facts.get("scan_split_min"))


def tile_for(length: int, facts: dict, column: bool = False, split: bool = False) -> tuple[int, int, int]:
    """(BLOCK_ROWS, BLOCK_R, warps) for rows of ``length`` (``split``: long rows, or chunks of them).
    BLOCK_R is a function of the length alone: lane l sums elements l, l + BLOCK_R, ... in turn, so it
    fixes the order of the additions. BLOCK_ROWS may shrink to the rows there are; lanes combine in no
    order."""
    if column:
        limit = facts["reduction_column_lanes"]
    else:
        limit = facts["reduction_split_block" if split else "reduction_block"]
    block_r = min(next_pow2(max(length, 1)), limit)
    block_rows = max(1, facts["reduction_tile"] // block_r)
    warps = max(1, min(facts["reduction_warps"], block_rows * block_r // 256))
    return block_rows, block_r, warps


def occupying_block_rows(block_rows: int, n_rows: int, programs: int, floor: int = 1) -> int:
    """``block_rows`` halved (down to ``floor``) until ``n_rows`` make at least ``programs`` programs: rows
    reduce to the same bits whatever tile they share, so this only spreads few rows over the device."""
    while block_rows > floor and cdiv(n_rows, block_rows) < programs:
        block_rows //= 2
    return block_rows


def device_programs(dev, facts: dict) -> int:
    """Programs that fill ``dev``: ``reduction_waves`` of them per multiprocessor."""
    return multiprocessors(dev) * facts["reduction_waves"]


_reduce_plans = PlanCache()
# a split combines its chunks in its own launch up to this many: column sums of 6-8 chunks ran a fifth faster
# so, those of 33 and 47 chunks at half speed (their combine then also held too many registers)
_COMBINED_CHUNKS_MAX = 16
_COMBINE_ELEMENTS_A_THREAD = 2


def _run_reduce(x: Tensor, dims, op: int, out_shape, out_dtype, acc, compute, *, second=None, values=True,
                p: float = 0.0, correction: float = 0.0, order_matters: bool = False):
    """Launch the reduction ``op`` of ``x`` over ``dims``. Returns (out0, out1): out0 of ``out_dtype``
    (for arg ops: the values, or None), out1 the indices (arg ops) or ``second``'s dtype (None)."""
    return _reduce_plan(x, dims, op, out_shape, out_dtype, acc, compute, second=second, values=values, p=p,
                        correction=correction, order_matters=order_matters)(x)


def _reduce_plan(x: Tensor, dims, op: int, out_shape, out_dtype, acc, compute, *, second=None, values=True,
                 p: float = 0.0, correction: float = 0.0, order_matters: bool = False):
    """``_run_reduce``'s ``execute(x) -> (out0, out1)`` for tensors laid out as ``x`` is: a plan that
    resolves it once calls it directly."""
    key = (layout_key(x), tuple(dims) if isinstance(dims, list) else dims, op,
           tuple(out_shape), out_dtype, acc, compute, second, values, p, correction, order_matters)
    return _reduce_plans.get(key, lambda: _plan_reduce(x, dims, op, out_shape, out_dtype, acc, compute, second,
                                                       values, p, correction, order_matters))


def _plan_reduce(x: Tensor, dims, op, out_shape, out_dtype, acc, compute, second, values, p, correction,
                 order_matters):
    """``execute(x) -> (out0, out1)`` for tensors laid out as ``x`` is."""
    kind = K.KIND_OF[op]
    arg = kind in (K.KIND_ARGMAX, K.KIND_ARGMIN)
    dev = x.device
    out_shape = tuple(out_shape)
    int64 = _dt("int64")

    first = fresh_tensor_maker(out_shape, out_dtype, dev) if (values or not arg) else None
    second_dtype = int64 if arg else second
    other = fresh_tensor_maker(out_shape, second_dtype, dev) if second_dtype is not None else None

    def outputs():
        return first() if first is not None else None, other() if other is not None else None
    n_rows = S.numel(out_shape)
    if n_rows == 0:
        return lambda x: outputs()
    row_shape, row_strides, red_shape, red_strides = _geometry(x, dims, order_matters)
    if len(row_shape) > MAX_KERNEL_RANK or len(red_shape) > MAX_KERNEL_RANK:
        return lambda x: _run_reduce(x.contiguous(), dims, op, out_shape, out_dtype, acc, compute, second=second,
                                     values=values, p=p, correction=correction, order_matters=order_matters)
    length = S.numel(red_shape)
    facts = kernel_facts(dev)
    red_unit = len(red_shape) <= 1 and (not red_strides or red_strides[0] == 1)
    column = not red_unit and bool(row_shape) and row_strides[-1] == 1
    chunk, n_chunks = split_plan(length, facts, multiprocessors(dev), column)
    block_rows, block_r, warps = tile_for(min(chunk, length), facts, column, split=n_chunks > 1)
    programs = cdiv(device_programs(dev, facts), n_chunks)
    if column:
        # a program's kept elements stay a whole 128-byte line apart from its neighbours'
        floor = min(block_rows, max(1, 128 // x.dtype.itemsize))
        block_rows = occupying_block_rows(block_rows, row_shape[-1], cdiv(programs, S.numel(row_shape[:-1])), floor)
    else:
        block_rows = occupying_block_rows(min(block_rows, next_pow2(n_rows)), n_rows, programs)
    warps = max(1, min(facts["reduction_warps"], block_rows * block_r // 256))
    if column:
        n_inner = row_shape[-1]
        row_shape, row_strides = row_shape[:-1], row_strides[:-1]
        grid0 = cdiv(n_inner, block_rows) * S.numel(row_shape)
    else:
        n_inner = 1
        grid0 = cdiv(n_rows, block_rows)
    row_shape, row_strides = _pad(row_shape, row_strides)
    red_shape, red_strides = _pad(red_shape, red_strides)
    lowest, highest = _extremes(acc)
    if op in (K.OP_ANY, K.OP_ALL):
        lowest, highest = 0, 1
    flags = conversion_flags(acc, out_dtype, dev) if not (arg and not values) else conversion_flags(acc, acc, dev)
    common = dict(OP=op, KIND=kind, ACC=acc.triton, LOWEST=lowest, HIGHEST=highest, OUT_VALUES=values,
                  OUT_SECOND=second is not None, DST_FORMAT=flags["DST_FORMAT"], VIA_F32=flags["VIA_F32"],
                  FLOAT_TO_INT=flags["FLOAT_TO_INT"])
    split = n_chunks > 1
    # a split of a few chunks combines them in its launch (the last program of a row block to finish) unless
    # its programs of rows outnumber the arrival counters; more chunks take a second launch, spread over many
    # programs, instead of one program's serial tail (_COMBINED_CHUNKS_MAX)
    combined = 1 < n_chunks <= _COMBINED_CHUNKS_MAX and grid0 <= ARRIVAL_COUNTERS
    chunks = next_pow2(n_chunks)
    combine_rows = max(1, facts["reduction_tile"] // chunks)
    # the last program combines rows a few at a time: a tile of more than _COMBINE_ELEMENTS_A_THREAD states a
    # thread raises the whole kernel's registers (ptxas, sm_90a: 38 registers without the combine, 168 for 32
    # rows of 64 chunks on 4 warps, 40 at 2 states a thread), and with them the streaming loop's occupancy
    in_launch_rows = max(1, min(block_rows, _COMBINE_ELEMENTS_A_THREAD * 32 * warps // chunks))
    o0, o1 = Slot("out0"), Slot("out1")
    parts = (Slot("part0"), Slot("part1"), Slot("part2")) if split else (o0, o0, o0)
    launches = [PlannedLaunch(
        K.reduce_rows, (grid0, n_chunks),
        [Slot("x"), o0, o1, *parts, Slot("counters") if combined else o0, n_rows, n_inner, length, chunk, n_chunks,
         float(length), float(p), float(correction), tuple(row_shape), tuple(row_strides), tuple(red_shape),
         tuple(red_strides)],
        dict(COMPUTE=compute.triton, ROW_RANK=len(row_shape), RED_RANK=len(red_shape), RED_UNIT=red_unit,
             COLUMN=column, SPLIT=split, SRC_FORMAT=load_format(x.dtype),
             INDEX_64=needs_index_64(x), BLOCK_ROWS=block_rows, BLOCK_R=block_r,
             LANE_BITS=block_r.bit_length() - 1, COMBINE=combined, COMBINE_ROWS=in_launch_rows,
             CHUNKS=chunks, CHUNK_BITS=chunks.bit_length() - 1, num_warps=warps, **common))]
    if split and not combined:
        launches.append(PlannedLaunch(
            K.combine_partials, (cdiv(n_rows, combine_rows),),
            [*parts, o0, o1, n_rows, n_chunks, float(length), float(p), float(correction)],
            dict(BLOCK_ROWS=combine_rows, CHUNKS=chunks, CHUNK_BITS=chunks.bit_length() - 1,
                 num_warps=facts["reduction_warps"], **common)))
    parts = n_rows * n_chunks
    workspace = Workspace({"part0": ((parts,), acc), "part1": ((parts,), int64 if arg else acc),
                           "part2": ((parts,), acc)} if split else {}, counters=combined)
    # the one output written fills both output slots (and, unsplit, the partials' slots)
    if first is None or other is None:
        written = ("out0", "out1")
        returned = [(written, first), ((), None)] if first is not None else [((), None), (written, other)]
    else:
        returned = [(("out0",), first), (("out1",), other)]
    return LaunchCall(dev, launches, workspace, "x", returned)


def _reduction_cost(x, out_metas, flops_per_element: int = 1) -> Cost:
    return Cost(flops=flops_per_element * S.numel(x.shape), bytes_read=nbytes(x),
                bytes_written=builtins.sum(nbytes(m) for m in out_metas),
                workspace=_split_workspace(S.numel(x.shape), S.numel(out_metas[0].shape)))


def _reduction_rules(meta, flops_per_element: int = 1) -> dict:
    """``register``'s meta and cost rules of a reduction of ``x`` whose meta rule (of bound arguments) is
    ``meta``: the cost reads ``x`` once and writes the results."""
    def cost(a):
        out = meta(a)
        return _reduction_cost(a.x, [out] if isinstance(out, TensorMeta) else out, flops_per_element)
    return {"meta": meta, "cost": cost, "bound": True}


def _split_workspace(elements: int, rows: int) -> int:
    """The most bytes the partials of ``_plan_reduce`` take to reduce ``elements`` to ``rows`` results on any
    device and layout (the rule knows neither): three pieces of a partial per row and chunk, none past 8
    bytes."""
    if not rows:
        return 0
    length = elements // rows
    chunks = builtins.max(split_plan(length, facts["kernels"], column=column)[1]
                          for facts in all_facts() for column in (False, True))
    wide = _dt("int64")
    return Workspace.bytes_for([((rows * chunks,), wide)] * 3) if chunks > 1 else 0


# ---- sum, mean, prod and friends ----------------------------------------------------------------
def _simple_result(kind: str, x, dim, keepdim, dtype) -> TensorMeta:
    dims = reduced_dims(len(x.shape), dim, kind)
    shape = reduced_shape(x.shape, dims, keepdim)
    if kind in ("sum", "nansum", "prod"):
        return TensorMeta(shape, _sum_dtype(x.dtype, dtype))
    return TensorMeta(shape, _float_dtype(x.dtype, dtype, kind))


_simple_plans = PlanCache()


def _simple_reduction(kind: str, op: int):
    def plan(x: Tensor, dim, keepdim: bool, dtype, key):
        """``run(x)`` for tensors laid out as ``x`` is, the call's checks and dims worked out once: the
        entry of ``key`` (None: this call's alone)."""
        _check_supported(x, kind)
        out = _simple_result(kind, x, dim, keepdim, dtype)
        if kind == "nansum" and out.dtype.is_integral and x.dtype.is_floating_point:
            raise RuntimeError("nansum does not support an integer result for floating-point input")
        return binding_run(_simple_plans, key, _converting_plan(x, out, reduced_dims(x.ndim, dim, kind), op), 0)

    def impl(x: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
        key = (kind, layout_key(x), dim_key(dim), keepdim, dtype)
        try:
            run = _simple_plans.lookup(key)
        except TypeError:  # a dim that does not hash: plan it for this call only
            return plan(x, dim, keepdim, dtype, None)(x)
        if run is None:
            run = plan(x, dim, keepdim, dtype, key)
            _simple_plans.put(key, run)
        return run(x)
    impl.__name__ = kind
    return impl


_SIMPLE = {
    "sum": (K.OP_SUM, ["aten::sum.default", "aten::sum.dim_IntList"],
            "Sum over ``dim`` (all dims by default); integers and bool sum to int64."),
    "nansum": (K.OP_NANSUM, ["aten::nansum.default"], "Sum treating NaN as zero."),
    "mean": (K.OP_MEAN, ["aten::mean.default", "aten::mean.dim"], "Mean of a floating-point tensor."),
    "nanmean": (K.OP_NANMEAN, ["aten::nanmean.default"], "Mean of the elements that are not NaN."),
    "prod": (K.OP_PROD, ["aten::prod.default", "aten::prod.dim_int"], "Product; empty products are 1."),
}
for _kind, (_op, _aten, _doc) in _SIMPLE.items():
    _impl = _simple_reduction(_kind, _op)
    _impl.__doc__ = _doc
    globals()[_kind] = register(_kind, family="reduction", aten=_aten, methods=(_kind,), **_reduction_rules(
        lambda a, kind=_kind: _simple_result(kind, a.x, a.dim, a.keepdim, a.dtype)))(_impl)


# ---- amax, amin, max, min, argmax, argmin, aminmax ---------------------------------------------
def _require_elements(x, dims, op: str) -> None:
    if _reduced_length(x.shape, dims) == 0:
        where = f"reduction dim {dims[0]}" if len(dims) == 1 else "the reduced dims"
        raise IndexError(f"{op}(): Expected {where} to have non-zero size; the reduction of no elements has no "
                         "value (specify a dim whose extent is not zero)")


def _through_call_plan(key, x: Tensor, make, pick):
    """The result of a call of ``x`` through its call-level plan: ``key`` (the op's name, ``x``'s layout and
    the call's other arguments, a dim as ``dim_key`` gives it) names the plan, made the first time from
    ``make()`` (the call's checks, then ``_reduce_plan``'s or ``_scan_plan``'s execute) and returning item
    ``pick`` of its outputs or ``pick(*outputs)`` (``plans.binding_run``); a key that does not hash plans this
    call alone."""
    try:
        run = _call_plans.lookup(key)
    except TypeError:
        return binding_run(_call_plans, None, make(), pick)(x)
    if run is None:
        run = binding_run(_call_plans, key, make(), pick)
        _call_plans.put(key, run)
    return run(x)


_call_plans = PlanCache()


def _extreme_execute(x: Tensor, dims, keepdim: bool, op: int, name: str):
    _check_supported(x, name)
    _require_elements(x, dims, name)
    acc = compute_dtype(x.dtype)
    return _reduce_plan(x, dims, op, reduced_shape(x.shape, dims, keepdim), x.dtype, acc, acc)


def _extremes_of(x: Tensor, dim, keepdim: bool, op: int, name: str) -> Tensor:
    return _through_call_plan((name, layout_key(x), dim_key(dim), keepdim), x, lambda: _extreme_execute(
        x, reduced_dims(x.ndim, dim, name), keepdim, op, name), 0)


def _amax_meta(a):
    return TensorMeta(reduced_shape(a.x.shape, reduced_dims(len(a.x.shape), a.dim, "amax"), a.keepdim), a.x.dtype)


@register("amax", family="reduction", aten=["aten::amax.default"], methods=("amax",),
          **_reduction_rules(_amax_meta))
def amax(x: Tensor, dim=(), keepdim: bool = False) -> Tensor:
    """Largest element over ``dim`` (all dims by default); NaN wins."""
    return _extremes_of(x, dim, keepdim, K.OP_AMAX, "amax")


@register("amin", family="reduction", aten=["aten::amin.default"], methods=("amin",),
          **_reduction_rules(_amax_meta))
def amin(x: Tensor, dim=(), keepdim: bool = False) -> Tensor:
    """Smallest element over ``dim`` (all dims by default); NaN wins."""
    return _extremes_of(x, dim, keepdim, K.OP_AMIN, "amin")


def _arg_execute(x: Tensor, dim, keepdim: bool, op: int, name: str, values: bool):
    """``_reduce_plan``'s execute of an arg reduction (with its ``values``, or the indices alone, which
    refuse bool input) of tensors laid out as ``x``, the call's checks done."""
    if not values:
        _refuse_bool(x, name)
    _check_supported(x, name)
    if dim is None:
        dims = tuple(range(x.ndim))
        out_shape = (1,) * x.ndim if keepdim else ()
    else:
        dims = (S.wrap_dim(dim, x.ndim),) if x.ndim else ()
        out_shape = reduced_shape(x.shape, dims, keepdim)
    _require_elements(x, dims, name)
    acc = compute_dtype(x.dtype)
    return _reduce_plan(x, dims, op, out_shape, x.dtype, acc, acc, values=values, order_matters=True)


def _arg_reduce(x: Tensor, dim, keepdim: bool, op: int, name: str, values: bool, pick):
    return _through_call_plan((name, layout_key(x), dim_key(dim), keepdim), x,
                              lambda: _arg_execute(x, dim, keepdim, op, name, values), pick)


def _minmax_meta(a):
    x, dim = a.x, a.dim
    if isinstance(dim, Tensor) or (dim is not None and not isinstance(dim, int) and not hasattr(dim, "__index__")):
        raise TypeError("max/min with a second tensor is the elementwise maximum/minimum")
    if dim is None:
        return TensorMeta((), x.dtype)
    dims = (S.wrap_dim(dim, len(x.shape)),) if len(x.shape) else ()
    shape = reduced_shape(x.shape, dims, a.keepdim)
    return (TensorMeta(shape, x.dtype), TensorMeta(shape, _dt("int64")))


def _extreme_or_pair(x, dim, keepdim, name, op_values, op_arg, result_type, pairwise):
    if isinstance(dim, Tensor):
        from . import registry
        try:
            return registry.get(pairwise).impl(x, dim)
        except KeyError:
            raise NotImplementedError(f"{name}(input, other) is the elementwise {pairwise}, which needs the "
                                      "pointwise ops") from None
    if dim is None:
        _check_supported(x, name)
        if x.numel() == 0:
            raise IndexError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0. Specify "
                             "the reduction dim with the 'dim' argument.")
        return _extremes_of(x, None, False, op_values, name)
    return _arg_reduce(x, dim, keepdim, op_arg, name, True, result_type)


@register("max", family="reduction", aten=["aten::max.default", "aten::max.dim"], methods=("max",),
          **_reduction_rules(_minmax_meta))
def max_(x: Tensor, dim=None, keepdim: bool = False):
    """Largest element, or (values, indices) over ``dim`` (first index among equals, NaN wins)."""
    return _extreme_or_pair(x, dim, keepdim, "max", K.OP_AMAX, K.OP_ARGMAX, max_result, "maximum")


@register("min", family="reduction", aten=["aten::min.default", "aten::min.dim"], methods=("min",),
          **_reduction_rules(_minmax_meta))
def min_(x: Tensor, dim=None, keepdim: bool = False):
    """Smallest element, or (values, indices) over ``dim`` (first index among equals, NaN wins)."""
    return _extreme_or_pair(x, dim, keepdim, "min", K.OP_AMIN, K.OP_ARGMIN, min_result, "minimum")


def _refuse_bool(x, op: str) -> None:
    if x.dtype.kind == "bool":
        raise RuntimeError(f"{op}(): does not support bool input (as in ATen); convert it with .to(nbxtensor.uint8)")


def _argmax_meta(a):
    rank = len(a.x.shape)
    if a.dim is None:
        return TensorMeta((1,) * rank if a.keepdim else (), _dt("int64"))
    dims = (S.wrap_dim(a.dim, rank),) if rank else ()
    return TensorMeta(reduced_shape(a.x.shape, dims, a.keepdim), _dt("int64"))


@register("argmax", family="reduction", aten=["aten::argmax.default"], methods=("argmax",),
          **_reduction_rules(_argmax_meta))
def argmax(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """Index of the largest element (flattened when ``dim`` is None); the first among equals, NaN wins."""
    return _arg_reduce(x, dim, keepdim, K.OP_ARGMAX, "argmax", False, 1)


@register("argmin", family="reduction", aten=["aten::argmin.default"], methods=("argmin",),
          **_reduction_rules(_argmax_meta))
def argmin(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """Index of the smallest element (flattened when ``dim`` is None); the first among equals, NaN wins."""
    return _arg_reduce(x, dim, keepdim, K.OP_ARGMIN, "argmin", False, 1)


def _aminmax_meta(a):
    meta = TensorMeta(reduced_shape(a.x.shape, reduced_dims(len(a.x.shape), a.dim, "aminmax"), a.keepdim), a.x.dtype)
    return (meta, meta)


@register("aminmax", family="reduction", aten=["aten::aminmax.default"], methods=("aminmax",),
          **_reduction_rules(_aminmax_meta))
def aminmax(x: Tensor, *, dim=None, keepdim: bool = False):
    """(min, max) in one pass."""
    def execute():
        _check_supported(x, "aminmax")
        dims = reduced_dims(x.ndim, dim, "aminmax")
        _require_elements(x, dims, "aminmax")
        acc = compute_dtype(x.dtype)
        return _reduce_plan(x, dims, K.OP_AMINMAX, reduced_shape(x.shape, dims, keepdim), x.dtype, acc, acc,
                            second=x.dtype)
    return _through_call_plan(("aminmax", layout_key(x), dim_key(dim), keepdim), x, execute, aminmax_result)


# ---- var, std ------------------------------------------------------------------------------------
def _var_args(dim, unbiased, keepdim, correction):
    if isinstance(dim, bool):  # torch.var(x, False): the second positional argument is ``unbiased``
        dim, unbiased = None, dim
    if correction is not None and unbiased is not None:
        raise RuntimeError("var/std: pass either correction or unbiased, not both")
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    return dim, keepdim, float(correction)


def _var_result(x, dim, unbiased, keepdim, correction) -> TensorMeta:
    dim, keepdim, _ = _var_args(dim, unbiased, keepdim, correction)
    dtype = _float_dtype(x.dtype, None, "var")
    return TensorMeta(reduced_shape(x.shape, reduced_dims(len(x.shape), dim, "var"), keepdim), dtype)


def _var_meta(a):
    return _var_result(a.x, a.dim, a.unbiased, a.keepdim, a.correction)


def _var_mean_meta(a):
    meta = _var_meta(a)
    return (meta, meta)


def _moments(x, dim, unbiased, keepdim, correction, op, with_mean):
    def execute():
        _check_supported(x, "var")
        meta = _var_result(x, dim, unbiased, keepdim, correction)
        dims, _, corr = _var_args(dim, unbiased, keepdim, correction)
        acc = compute_dtype(x.dtype)
        return _reduce_plan(x, reduced_dims(x.ndim, dims, "var"), op, meta.shape, meta.dtype, acc, acc,
                            second=meta.dtype if with_mean else None, correction=corr)
    key = (op, with_mean, layout_key(x), dim_key(dim), unbiased, keepdim, correction)
    return _through_call_plan(key, x, execute, _pair if with_mean else 0)


def _pair(first, second):
    return first, second


@register("var", family="reduction", aten=["aten::var.correction", "aten::var.default", "aten::var.dim"],
          methods=("var",), **_reduction_rules(_var_meta, flops_per_element=5))
def var(x: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None) -> Tensor:
    """Variance with ``correction`` (Bessel's, 1, by default) by Welford's method, merged across lanes."""
    return _moments(x, dim, unbiased, keepdim, correction, K.OP_VAR, False)


@register("std", family="reduction", aten=["aten::std.correction", "aten::std.default", "aten::std.dim"],
          methods=("std",), **_reduction_rules(_var_meta, flops_per_element=5))
def std(x: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None) -> Tensor:
    """Standard deviation: the square root of ``var``."""
    return _moments(x, dim, unbiased, keepdim, correction, K.OP_STD, False)


@register("var_mean", family="reduction", aten=["aten::var_mean.correction"],
          **_reduction_rules(_var_mean_meta, flops_per_element=5))
def var_mean(x: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None):
    """(var, mean) in one pass."""
    return _moments(x, dim, unbiased, keepdim, correction, K.OP_VAR, True)


@register("std_mean", family="reduction", aten=["aten::std_mean.correction"],
          **_reduction_rules(_var_mean_meta, flops_per_element=5))
def std_mean(x: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None):
    """(std, mean) in one pass."""
    return _moments(x, dim, unbiased, keepdim, correction, K.OP_STD, True)


# ---- norms, logsumexp ----------------------------------------------------------------------------
def _norm_op(p):
    if p == "fro" or p == 2:
        return K.OP_NORM_2, 2.0
    if isinstance(p, str):
        raise NotImplementedError(f"norm: p={p!r} is a matrix norm; only vector norms (numbers and 'fro') exist")
    p = float(p)
    if p == 0:
        return K.OP_NORM_0, p
    if p == 1:
        return K.OP_NORM_1, p
    if p == math.inf:
        return K.OP_NORM_INF, p
    if p == -math.inf:
        return K.OP_NORM_NEG_INF, p
    return K.OP_NORM_P, p


def _vector_norm_result(x, dim, keepdim, dtype) -> TensorMeta:
    if x.dtype.is_complex:
        raise TypeError("linalg.vector_norm: complex inputs are not supported")
    out = _float_dtype(x.dtype, dtype, "linalg.vector_norm")
    return TensorMeta(reduced_shape(x.shape, reduced_dims(len(x.shape), dim, "linalg.vector_norm"), keepdim), out)


@register("linalg.vector_norm", family="reduction", aten=["aten::linalg_vector_norm.default"], api=(),
          **_reduction_rules(lambda a: _vector_norm_result(a.x, a.dim, a.keepdim, a.dtype), flops_per_element=2))
def vector_norm(x: Tensor, ord=2, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """(sum |x|^ord)^(1/ord) over ``dim``; ord 0 counts nonzeros, inf and -inf take max and min of |x|."""
    def execute():
        _check_supported(x, "linalg.vector_norm")
        meta = _vector_norm_result(x, dim, keepdim, dtype)
        op, p = _norm_op(ord)
        dims = reduced_dims(x.ndim, dim, "linalg.vector_norm")
        if (op == K.OP_NORM_INF or op == K.OP_NORM_NEG_INF or p < 0) and _reduced_length(x.shape, dims) == 0 \
                and x.numel() == 0:
            raise IndexError(f"linalg.vector_norm cannot compute the {ord} norm of an empty reduction; the "
                             "identity of max/min does not exist")
        return _converting_plan(x, meta, dims, op, p=p)
    key = ("linalg.vector_norm", layout_key(x), type(ord), ord, dim_key(dim), keepdim, dtype)
    return _through_call_plan(key, x, execute, 0)


def _converting_plan(x: Tensor, meta: TensorMeta, dims, op: int, **options):
    """``_reduce_plan``'s execute of ``op`` for tensors laid out as ``x`` is, converted to ``meta.dtype`` first
    where loading cannot widen them exactly (``_source``)."""
    acc = compute_dtype(meta.dtype)
    if _exactly_widens(x.dtype, meta.dtype):  # ``_source`` reads ``x`` itself: its plan is this layout's
        return _reduce_plan(x, dims, op, meta.shape, meta.dtype, acc, acc, **options)
    return lambda x: _run_reduce(x.to(meta.dtype), dims, op, meta.shape, meta.dtype, acc, acc, **options)


def _nuclear_dims(x, dim):
    return tuple(range(len(x.shape))) if dim is None else dim


def _norm_meta(a):
    if a.p == "nuc":
        return get("linalg.matrix_norm").meta(a.x, "nuc", _nuclear_dims(a.x, a.dim), a.keepdim, dtype=a.dtype)
    return _vector_norm_result(a.x, a.dim, a.keepdim, a.dtype)


def _norm_cost(a):
    if a.p == "nuc":
        return get("linalg.matrix_norm").cost(a.x, "nuc", _nuclear_dims(a.x, a.dim), a.keepdim, dtype=a.dtype)
    return _reduction_cost(a.x, [_norm_meta(a)], flops_per_element=2)


@register("norm", family="reduction", aten=["aten::norm.Scalar", "aten::norm.ScalarOpt_dim"], meta=_norm_meta,
          cost=_norm_cost, bound=True, methods=("norm",))
def norm(x: Tensor, p="fro", dim=None, keepdim: bool = False, dtype=None) -> Tensor:
    """``torch.norm``: ``linalg.vector_norm`` with ``p`` ('fro' is 2), but the nuclear norm ('nuc') of the
    matrices over ``dim`` (all dims when None)."""
    if p == "nuc":
        return get("linalg.matrix_norm").impl(x, "nuc", _nuclear_dims(x, dim), keepdim, dtype=dtype)
    return vector_norm(x, 2 if p is None else p, dim, keepdim, dtype=dtype)


def _lse_dtype(dt):
    return dt if dt.is_floating_point else get_default_dtype()


def _logsumexp_result(x, dim, keepdim) -> TensorMeta:
    dims = reduced_dims(len(x.shape), dim, "logsumexp")
    return TensorMeta(reduced_shape(x.shape, dims, keepdim), _lse_dtype(x.dtype))


@register("logsumexp", family="reduction", aten=["aten::logsumexp.default"], methods=("logsumexp",),
          **_reduction_rules(lambda a: _logsumexp_result(a.x, a.dim, a.keepdim), flops_per_element=3))
def logsumexp(x: Tensor, dim, keepdim: bool = False) -> Tensor:
    """log(sum(exp(x))) over ``dim`` without overflow (an online max); integers give the default float."""
    def execute():
        _check_supported(x, "logsumexp")
        meta = _logsumexp_result(x, dim, keepdim)
        return _converting_plan(x, meta, reduced_dims(x.ndim, dim, "logsumexp"), K.OP_LOGSUMEXP)
    key = ("logsumexp", layout_key(x), dim_key(dim), keepdim, get_default_dtype())
    return _through_call_plan(key, x, execute, 0)


# ---- any, all, count_nonzero ----------------------------------------------------------------------
def _logical_result(x, dim, keepdim) -> TensorMeta:
    dims = reduced_dims(len(x.shape), dim, "any")
    return TensorMeta(reduced_shape(x.shape, dims, keepdim), _dt("uint8") if x.dtype.name == "uint8" else _dt("bool"))


_LOGICAL_RULES = _reduction_rules(lambda a: _logical_result(a.x, a.dim, a.keepdim))


def _logical(x, dim, keepdim, op, name):
    def execute():
        _check_supported(x, name)
        meta = _logical_result(x, dim, keepdim)
        return _reduce_plan(x, reduced_dims(x.ndim, dim, name), op, meta.shape, meta.dtype, _dt("int32"),
                            compute_dtype(x.dtype))
    return _through_call_plan((name, layout_key(x), dim_key(dim), keepdim), x, execute, 0)


@register("any", family="reduction", aten=["aten::any.default", "aten::any.dim", "aten::any.dims"],
          methods=("any",), **_LOGICAL_RULES)
def any_(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """Whether any element is nonzero (NaN counts); uint8 input gives uint8, as in ATen."""
    return _logical(x, dim, keepdim, K.OP_ANY, "any")


@register("all", family="reduction", aten=["aten::all.default", "aten::all.dim", "aten::all.dims"],
          methods=("all",), **_LOGICAL_RULES)
def all_(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """Whether every element is nonzero; True for no elements."""
    return _logical(x, dim, keepdim, K.OP_ALL, "all")


def _count_result(x, dim) -> TensorMeta:
    return TensorMeta(reduced_shape(x.shape, reduced_dims(len(x.shape), dim, "count_nonzero"), False), _dt("int64"))


@register("count_nonzero", family="reduction", aten=["aten::count_nonzero.default", "aten::count_nonzero.dim_IntList"],
          methods=("count_nonzero",), **_reduction_rules(lambda a: _count_result(a.x, a.dim)))
def count_nonzero(x: Tensor, dim=None) -> Tensor:
    """Number of nonzero elements (int64)."""
    def execute():
        _check_supported(x, "count_nonzero")
        meta = _count_result(x, dim)
        return _reduce_plan(x, reduced_dims(x.ndim, dim, "count_nonzero"), K.OP_COUNT_NONZERO, meta.shape,
                            meta.dtype, _dt("int64"), compute_dtype(x.dtype))
    return _through_call_plan(("count_nonzero", layout_key(x), dim_key(dim)), x, execute, 0)


# ---- scans ------------------------------------------------------------------------------------------
SCAN_CUMSUM, SCAN_CUMPROD, SCAN_CUMMAX, SCAN_CUMMIN, SCAN_LOGCUMSUMEXP = range(5)


_scan_plans = PlanCache()


def _run_scan(x: Tensor, dim: int, scan: int, out_dtype, acc, compute, with_indices=False):
    """(out, indices or None): the inclusive scan ``scan`` of ``x`` along ``dim``."""
    return _scan_plan(x, dim, scan, out_dtype, acc, compute, with_indices)(x)


def _scan_plan(x: Tensor, dim: int, scan: int, out_dtype, acc, compute, with_indices=False):
    """``_run_scan``'s ``execute(x)`` for tensors laid out as ``x`` is: a plan that resolves it once calls it
    directly."""
    key = (layout_key(x), dim, scan, out_dtype, acc, compute, with_indices)
    return _scan_plans.get(key, lambda: _plan_scan(x, dim, scan, out_dtype, acc, compute, with_indices))


def _plan_scan(x: Tensor, dim: int, scan: int, out_dtype, acc, compute, with_indices):
    """``execute(x) -> (out, indices or None)`` for tensors laid out as ``x`` is."""
    dev, shape = x.device, tuple(x.shape)
    make_out = fresh_tensor_maker(shape, out_dtype, dev)
    make_indices = fresh_tensor_maker(shape, _dt("int64"), dev) if with_indices else None

    def outputs():
        return make_out(), make_indices() if with_indices else None
    if x.numel() == 0:
        return lambda x: outputs()
    scalar = x.ndim == 0
    if scalar:  # a 0-d tensor scans as one row of one
        x, d = x._view((1,), (1,)), 0
    else:
        d = dim
    out_strides = S.contiguous_strides(tuple(x.shape))
    kept = [i for i in range(x.ndim) if i != d]
    row_shape, (src_strides, dst_strides) = S.coalesce([x.shape[i] for i in kept], [x.stride(i) for i in kept],
                                                       [out_strides[i] for i in kept])
    if len(row_shape) > MAX_KERNEL_RANK:
        return lambda x: _run_scan(x.contiguous(), dim, scan, out_dtype, acc, compute, with_indices)
    length = x.shape[d]
    facts = kernel_facts(dev)
    # one program walks a row in order, so its steps are as wide as a split chunk's: a few rows of
    # thousands take a program each rather than sharing one tile of short steps
    block_rows, block_r, warps = tile_for(length, facts, split=True)
    n_rows = S.numel(row_shape)
    if facts.get("interpreted", False):
        # no layouts there, so the order of a row's sums does not follow the tile; the interpreter pays
        # for every element of a tile, masked or not
        block_rows = min(block_rows, next_pow2(n_rows))
    row_shape, src_strides = _pad(row_shape, src_strides)
    dst_strides = dst_strides if dst_strides else (0,)
    flags = conversion_flags(acc, out_dtype, dev)
    lowest, highest = _extremes(acc)
    common = dict(SCAN=scan, ACC=acc.triton, COMPUTE=compute.triton, LOWEST=lowest, HIGHEST=highest,
                  ROW_RANK=len(row_shape), SRC_FORMAT=load_format(x.dtype),
                  DST_FORMAT=flags["DST_FORMAT"], VIA_F32=flags["VIA_F32"], FLOAT_TO_INT=flags["FLOAT_TO_INT"],
                  INDEX_64=needs_index_64(x, (tuple(x.shape), out_strides)), BLOCK_ROWS=block_rows, BLOCK_R=block_r,
                  CHUNKS=1, num_warps=warps)
    src, out, indices = Slot("x"), Slot("out"), Slot("indices" if with_indices else "out")
    geometry = [tuple(row_shape), tuple(src_strides), tuple(dst_strides), x.stride(d), out_strides[d]]
    sms = multiprocessors(dev)
    chunk, n_chunks = scan_split(length, facts, sms)
    workspace = Workspace({})
    if scan != SCAN_CUMSUM or n_chunks == 1:
        launches = [PlannedLaunch(K.scan_rows, (cdiv(n_rows, block_rows),),
                                  [src, out, indices, out, out, n_rows, 0, length, length, 1, *geometry],
                                  dict(PHASE=0, **common))]
    else:
        # a long row: one program would walk it alone, so its chunks scan in parallel, each from the sum
        # of the chunks before it, which the chunk's program adds up itself from the chunk totals. Whether
        # and how a row is chunked depends on its length alone (as for the reductions' split), so a row's
        # sums do not depend on its batch. One row a program, its tile a function of the chunk alone: a few
        # long rows would leave most rows of a many-row tile masked
        block_r = min(chunk, facts["reduction_split_block"])
        chunks = next_pow2(n_chunks)
        common.update(BLOCK_ROWS=1, BLOCK_R=block_r, CHUNKS=chunks,
                      num_warps=max(1, min(facts["reduction_warps"], max(block_r, chunks) // 256)))
        grid = (n_rows, n_chunks)
        # in one launch where every chunk's program can run at once (one a multiprocessor), as each waits for
        # the totals of the chunks before it; otherwise totals first, then the scans (two launches)
        one_launch = n_rows * n_chunks <= min(sms, ARRIVAL_COUNTERS // 2)
        args = [src, out, indices, Slot("totals"), Slot("counters") if one_launch else out, n_rows, 0, length, chunk,
                n_chunks, *geometry]
        if one_launch:
            launches = [PlannedLaunch(K.scan_rows, grid, args, dict(PHASE=3, **common))]
        else:
            launches = [PlannedLaunch(K.scan_rows, grid, args, dict(PHASE=1, **common)),
                        PlannedLaunch(K.scan_rows, grid, args, dict(PHASE=2, **common))]
        workspace = Workspace({"totals": ((n_rows, n_chunks), acc)}, counters=one_launch)

    if not scalar:
        return LaunchCall(dev, launches, workspace, "x", [(("out",), make_out), (("indices",), make_indices)])

    def execute_scalar(x):
        result, result_indices = outputs()
        tensors = {"x": x._view((1,), (1,)), "out": result._view((1,), (1,))}
        if with_indices:
            tensors["indices"] = result_indices._view((1,), (1,))
        run_launches(dev, launches, workspace, tensors)
        return result, result_indices
    return execute_scalar


def _scan_result(kind: str, x, dim, dtype) -> TensorMeta:
    S.wrap_dim(dim, len(x.shape))
    if kind == "logcumsumexp":
        return TensorMeta(tuple(x.shape), _float_dtype(x.dtype, dtype, kind))
    return TensorMeta(tuple(x.shape), _sum_dtype(x.dtype, dtype))


def _scan_rules(kind: str) -> dict:
    def meta(a):
        return _scan_result(kind, a.x, a.dim, a.dtype)

    def cost(a):
        x = a.x
        out = meta(a)
        workspace = _chunked_scan_workspace(x.shape, S.wrap_dim(a.dim, len(x.shape))) if kind == "cumsum" else 0
        return Cost(flops=S.numel(x.shape), bytes_read=nbytes(x), bytes_written=nbytes(out), workspace=workspace)
    return {"meta": meta, "cost": cost, "bound": True}


def _chunked_scan_workspace(shape, dim: int) -> int:
    """The most bytes a long cumsum row's temporaries take on any device class: each chunk's total, none
    past 8 bytes."""
    length = shape[dim] if shape else 1
    if not length:
        return 0
    rows = S.numel(shape) // length
    chunks = builtins.max(scan_split(length, facts["kernels"])[1] for facts in all_facts())
    return Workspace.bytes_for([((rows * chunks,), _dt("int64"))]) if chunks > 1 else 0


_scan_calls = PlanCache()


def _scan_op(kind: str, scan: int):
    def plan(x: Tensor, dim: int, dtype, key):
        """``run(x)`` for tensors laid out as ``x`` is, the call's checks and dtypes worked out once: the entry
        of ``key`` (None: this call's alone)."""
        _check_supported(x, kind)
        out = _scan_result(kind, x, dim, dtype)
        d = S.wrap_dim(dim, x.ndim)
        acc = compute_dtype(out.dtype)
        if _exactly_widens(x.dtype, out.dtype):  # ``_source`` reads ``x`` itself: its plan is this layout's
            return binding_run(_scan_calls, key, _scan_plan(x, d, scan, out.dtype, acc, acc), 0)
        return lambda x: _run_scan(x.to(out.dtype), d, scan, out.dtype, acc, acc)[0]

    def impl(x: Tensor, dim: int, *, dtype=None) -> Tensor:
        key = (kind, layout_key(x), dim_key(dim), dtype)
        try:
            run = _scan_calls.lookup(key)
        except TypeError:  # a dim that does not hash: plan it for this call only
            return plan(x, dim, dtype, None)(x)
        if run is None:
            run = plan(x, dim, dtype, key)
            _scan_calls.put(key, run)
        return run(x)
    impl.__name__ = kind
    return impl


_SCANS = {
    "cumsum": (SCAN_CUMSUM, ["aten::cumsum.default"], "Running sum along ``dim``; integers give int64."),
    "cumprod": (SCAN_CUMPROD, ["aten::cumprod.default"], "Running product along ``dim``; integers give int64."),
    "logcumsumexp": (SCAN_LOGCUMSUMEXP, ["aten::logcumsumexp.default"], "Running logsumexp along ``dim``."),
}
for _kind, (_scan, _aten, _doc) in _SCANS.items():
    _impl = _scan_op(_kind, _scan)
    _impl.__doc__ = _doc
    globals()[_kind] = register(_kind, family="reduction", aten=_aten, methods=(_kind,), **_scan_rules(_kind))(_impl)


def _cum_extreme_meta(a):
    shape = tuple(a.x.shape)
    S.wrap_dim(a.dim, len(shape))
    return (TensorMeta(shape, a.x.dtype), TensorMeta(shape, _dt("int64")))


def _cum_extreme(x, dim, scan, name, result_type):
    def execute():
        _check_supported(x, name)
        acc = compute_dtype(x.dtype)
        return _scan_plan(x, S.wrap_dim(dim, x.ndim), scan, x.dtype, acc, acc, with_indices=True)
    return _through_call_plan((name, layout_key(x), dim_key(dim)), x, execute, result_type)


@register("cummax", family="reduction", aten=["aten::cummax.default"], methods=("cummax",),
          **_reduction_rules(_cum_extreme_meta))
def cummax(x: Tensor, dim: int):
    """(running max, its index) along ``dim``: the last index among equal maxima, NaN sticks, as ATen."""
    return _cum_extreme(x, dim, SCAN_CUMMAX, "cummax", cummax_result)


@register("cummin", family="reduction", aten=["aten::cummin.default"], methods=("cummin",),
          **_reduction_rules(_cum_extreme_meta))
def cummin(x: Tensor, dim: int):
    """(running min, its index) along ``dim``: the last index among equal minima, NaN sticks, as ATen."""
    return _cum_extreme(x, dim, SCAN_CUMMIN, "cummin", cummin_result)


# ---- samples ---------------------------------------------------------------------------------------

def _reduced(function):
    """A NumPy reference of ``op(x, dim=, keepdim=)`` from ``function(x, axis=, keepdims=)``."""
    def reference(x, dim=None, keepdim=False, **ignored):
        return function(x, axis=None if np.ndim(x) == 0 else numpy_axis(dim), keepdims=keepdim)
    return reference


def _scanned(function):
    """A NumPy reference of a scan ``op(x, dim)`` from ``function(x, axis=)`` (a 0-d input is one element)."""
    def reference(x, dim, **ignored):
        return np.reshape(function(np.atleast_1d(x), axis=dim if np.ndim(x) else 0), np.shape(x))
    return reference


def _extreme(values, indices):
    def reference(x, dim=None, keepdim=False):
        if dim is None:
            return values(x)
        axis = None if np.ndim(x) == 0 else dim
        return values(x, axis=axis, keepdims=keepdim), indices(x, axis=axis, keepdims=keepdim)
    return reference


def _arg_extreme(indices):
    def reference(x, dim=None, keepdim=False):
        if dim is None or np.ndim(x) == 0:
            return np.asarray(indices(x)).reshape((1,) * np.ndim(x) if keepdim else ())
        return indices(x, axis=dim, keepdims=keepdim)
    return reference


def _spread(statistic):
    def reference(x, dim=None, unbiased=None, keepdim=False, correction=None):
        ddof = correction if correction is not None else (0 if unbiased is False else 1)
        axis = None if np.ndim(x) == 0 else numpy_axis(dim)
        return statistic(x, axis=axis, ddof=ddof, keepdims=keepdim)
    return reference


def _vector_norm(x, ord=2, dim=None, keepdim=False, dtype=None):
    axis = None if np.ndim(x) == 0 else numpy_axis(dim)
    if ord == math.inf:
        return np.max(np.abs(x), axis=axis, keepdims=keepdim)
    return np.sum(np.abs(x) ** ord, axis=axis, keepdims=keepdim) ** (1 / ord)


def _running_extreme(replaces):
    """cummax's (``np.greater_equal``) or cummin's reference: the running extreme and the last index reaching it
    (a NaN sticks)."""
    def reference(x, dim):
        rows = np.moveaxis(np.atleast_1d(x), dim if np.ndim(x) else 0, -1)
        values, indices = rows.copy(), np.zeros(rows.shape, np.int64)
        for i in range(1, rows.shape[-1]):
            previous = values[..., i - 1]
            take = (replaces(rows[..., i], previous) | np.isnan(rows[..., i])) & ~np.isnan(previous)
            values[..., i] = np.where(take, rows[..., i], previous)
            indices[..., i] = np.where(take, i, indices[..., i - 1])
        back = (np.moveaxis(values, -1, dim if np.ndim(x) else 0), np.moveaxis(indices, -1, dim if np.ndim(x) else 0))
        return tuple(np.reshape(b, np.shape(x)) for b in back)
    return reference


_FLOATS = ("float32", "float64")
_EXTREME_SAMPLES = reduction_samples(several_dims=False)[1:]
_SAMPLES = {
    "sum": Samples(reduction_samples(), _reduced(np.sum)),
    "nansum": Samples(reduction_samples(_FLOATS) + (sample(operand(12, values="edge")),),
                      _reduced(np.nansum)),
    "mean": Samples(reduction_samples(_FLOATS), _reduced(np.mean)),
    "nanmean": Samples(reduction_samples(_FLOATS), _reduced(np.nanmean)),
    "prod": Samples(reduction_samples(), _reduced(np.prod)),
    "amax": Samples(reduction_samples() + (sample(operand(12, values="edge")),), _reduced(np.max)),
    "amin": Samples(reduction_samples() + (sample(operand(12, values="edge")),), _reduced(np.min)),
    "max": Samples((sample(operand(2, 3)),) + _EXTREME_SAMPLES, _extreme(np.max, np.argmax)),
    "min": Samples((sample(operand(2, 3)),) + _EXTREME_SAMPLES, _extreme(np.min, np.argmin)),
    "argmax": Samples(reduction_samples(several_dims=False), _arg_extreme(np.argmax)),
    "argmin": Samples(reduction_samples(several_dims=False), _arg_extreme(np.argmin)),
    "aminmax": Samples(reduction_samples(several_dims=False),
                       lambda x, dim=None, keepdim=False: (_reduced(np.min)(x, dim, keepdim),
                                                           _reduced(np.max)(x, dim, keepdim))),
    "var": Samples(reduction_samples(_FLOATS) + (sample(operand(2, 3), dim=1, correction=0),), _spread(np.var)),
    "std": Samples(reduction_samples(_FLOATS) + (sample(operand(2, 3), dim=1, unbiased=False),), _spread(np.std)),
    "var_mean": Samples(reduction_samples(_FLOATS),
                        lambda *args, **kwargs: (_spread(np.var)(*args, **kwargs),
                                                 _reduced(np.mean)(args[0], kwargs.get("dim"),
                                                                   kwargs.get("keepdim", False)))),
    "std_mean": Samples(reduction_samples(_FLOATS),
                        lambda *args, **kwargs: (_spread(np.std)(*args, **kwargs),
                                                 _reduced(np.mean)(args[0], kwargs.get("dim"),
                                                                   kwargs.get("keepdim", False)))),
    "linalg.vector_norm": Samples(reduction_samples(_FLOATS) + (sample(operand(2, 3), ord=1, dim=1),
                                                                sample(operand(2, 3), ord=math.inf)), _vector_norm),
    "norm": Samples(reduction_samples(_FLOATS) + (sample(operand(2, 3), p=1, dim=1),),
                    lambda x, p="fro", **kwargs: _vector_norm(x, 2 if p == "fro" else p, **kwargs)),
    "logsumexp": Samples(reduction_samples(_FLOATS, dim_required=True),
                         _reduced(lambda x, axis, keepdims: np.log(np.sum(np.exp(x), axis=axis, keepdims=keepdims)))),
    "any": Samples(reduction_samples(("float32", "bool"), several_dims=False), _reduced(np.any)),
    "all": Samples(reduction_samples(("bool", "int64"), several_dims=False), _reduced(np.all)),
    "count_nonzero": Samples(reduction_samples(keepdim=False),
                             lambda x, dim=None: np.asarray(np.count_nonzero(x, axis=None if np.ndim(x) == 0
                                                                              else numpy_axis(dim)))),
    "cumsum": Samples(scan_samples(), _scanned(np.cumsum)),
    "cumprod": Samples(scan_samples(), _scanned(np.cumprod)),
    "logcumsumexp": Samples(scan_samples(_FLOATS), _scanned(np.logaddexp.accumulate)),
    "cummax": Samples(scan_samples(), _running_extreme(np.greater_equal)),
    "cummin": Samples(scan_samples(), _running_extreme(np.less_equal)),
}
family_samples("reduction", by_name(_SAMPLES))
