"""Sorting and search: sort, argsort, msort, topk, kthvalue, searchsorted, bucketize.

Sorts are stable and order NaN as ATen does (largest: last ascending, first descending). A row is
sorted by one program in registers when it holds at most ``SEGMENT_LIMIT`` elements. A longer row is
sorted by stable LSD radix passes over 4-bit digits of an order-preserving key, many programs a row.
A short top-k of a long row selects each segment's k first and then the row's k first among those
candidates (a bitwise search for the k-th key, no sort) and sorts only the k; otherwise its k first
come from a radix select (8-bit digits, most significant first, over chunks of the row) and are sorted
among themselves while k fits a segment, and the head of the full sort is taken beyond that. Keys are compared in the values' own precision (fp32 stays fp32), and
padding lanes sort after every real element, so a k that is not a power of two never reads them.
"""
from __future__ import annotations

from collections import namedtuple
import math

import ml_dtypes
import numpy as np

from .. import shape as S
from ..allocation import Workspace, fresh_tensor_maker, new_tensor
from ..device import backend_for, multiprocessors
from ..dtypes import get_dtype
from ..kernels import sort as K
from ..kernels import sort_warp as KW
from ..kernels.formats import FORMAT_NATIVE
from ..launch import cdiv, launch, next_pow2
from ..lowering import elementwise_block, float_format, load_format, needs_index_64
from ..promotion import result_type
from ..tensor import Tensor
from .advanced_indexing import masked_select
from .copy import cat
from .creation import ones, tensor, zeros
from .gather_scatter import gather_dim, index_select, scatter_, scatter_add_
from .plans import LaunchCall, PlanCache, PlannedLaunch, Slot, binding_run, layout_key, run_launches
from .reductions import cumsum
from .registry import OUT, Cost, TensorMeta, family_samples, nbytes, register
from .samples import Samples, by_name, operand, sample
from .selection import nonzero
from .views import movedim, narrow, reshape, squeeze

SEGMENT_LIMIT = 4096  # elements one program sorts in registers (a power of two)
SELECT_BLOCK = 2048  # elements a radix-select program reads per step
SELECT_BLOCK_INTERPRETED = 8192  # the interpreter pays per step, so it takes wider ones
SELECT_CHUNK = 2048  # elements of a row one radix-select program covers, one step: a 152k row spreads over 75
SELECT_CHUNK_INTERPRETED = 1 << 20  # the interpreter pays per program: one chunk a row
# a short top-k of a long row: each segment of the row (one program) selects its k first, then one program
# selects the row's k among those candidates, where they fit a segment; segments at least this long keep
# the candidates few. Segments up to CANDIDATE_SEGMENT_CHEAP are taken for any number of rows; longer ones
# only while their programs fit one wave over the device, the radix select (which reads the row six
# times, in eleven launches) being taken past that (benchmarks/gpu_vocab_rows.py times both for many rows)
CANDIDATE_SEGMENT_MIN = 512
CANDIDATE_SEGMENT_CHEAP = 1024
SORT_BLOCK = 256  # elements one program of a radix sort pass moves (at most 65535: kernels/sort.py)
SORT_WARPS = 2  # with SORT_BLOCK, the best of a sweep on the H200 (docs/performance.md)
SORT_WARP_ROWS = 8  # elements a lane of the warp kernels' passes takes (kernels/sort_warp.py: 32 x this a warp)
SORT_WARP_WARPS = 4  # warps a program of the warp kernels' passes
SORT_WARP_BITS = 4  # digit width of the warp passes (5, seven passes, measured slower on the H200)
SORT_WARP_HIST_BLOCKS = 2  # blocks each warp of a warp histogram program counts (2 edged 1 on the H200)
# registers a thread of the warp scatter may take: 64 (8 programs an SM) sorted 2% faster than 72 and the
# compiler's own 80 on the H200
SORT_WARP_SCATTER_REGISTERS = 64
SORT_SCAN_BLOCK = 4096  # block counts of a digit one program of the offsets scan takes (a segment)
GRID_ROWS = 65535  # rows one launch of the radix kernels takes: CUDA's limit on a grid's second dimension
_I64 = get_dtype("int64")
_I32 = get_dtype("int32")
_F32 = get_dtype("float32")

SortResult = namedtuple("sort", ["values", "indices"])
TopkResult = namedtuple("topk", ["values", "indices"])
KthvalueResult = namedtuple("kthvalue", ["values", "indices"])


def _key_kind(dt, op: str) -> dict:
    if dt.is_complex:
        raise RuntimeError(f"{op}: complex tensors have no order")
    if dt.is_floating_point:
        if dt.itemsize == 8:
            return dict(KIND=K.KEY_FLOAT64, FORMAT=FORMAT_NATIVE.value)
        return dict(KIND=K.KEY_FLOAT, FORMAT=float_format(dt))
    if dt.itemsize == 8:
        return dict(KIND=K.KEY_INT64, FORMAT=FORMAT_NATIVE.value)
    if dt.kind == "int":
        return dict(KIND=K.KEY_SIGNED, FORMAT=FORMAT_NATIVE.value)
    return dict(KIND=K.KEY_UNSIGNED, FORMAT=load_format(dt))


def _rows(x: Tensor, dim: int):
    """``x`` with ``dim`` moved last, contiguous, as (rows, n); and the moved shape."""
    if x.ndim == 0:
        x = reshape(x, (1,))
        dim = 0
    d = S.wrap_dim(dim, x.ndim)
    moved = (x if d == x.ndim - 1 else movedim(x, d, -1)).contiguous()
    n = moved.shape[-1]
    rows = moved if moved.ndim == 2 or not moved.numel() else reshape(moved, (-1, n))
    return rows, tuple(moved.shape), d


def _power_of_2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


_select_plans = PlanCache()


def _select_rows(rows: Tensor, k: int, descending: bool, op: str):
    """The first ``k`` of each row in sorted order: (values, int64 positions), each (rows, k)."""
    count, n = rows.shape
    dev = rows.device
    if count > GRID_ROWS and n > SEGMENT_LIMIT:
        # the radix kernels put rows on a grid's second dimension
        parts = [_select_rows(rows[first:first + GRID_ROWS], k, descending, op)
                 for first in range(0, count, GRID_ROWS)]
        return cat([values for values, _ in parts]), cat([indices for _, indices in parts])
    if count and n > SEGMENT_LIMIT and k > SEGMENT_LIMIT:
        # the k first are sorted by one program, so k this large sorts the whole row
        values, indices = _sort_long_rows(rows, _select_flags(rows, descending, op))
        return (values, indices) if k == n else (values[:, :k].contiguous(), indices[:, :k].contiguous())
    if not (count and k):
        return new_tensor((count, k), rows.dtype, dev), new_tensor((count, k), _I64, dev)
    key = (layout_key(rows), k, descending, op)
    plan = _select_plans.lookup(key)
    if plan is None:
        plan = _select_plans.get(key, lambda: (*_plan_select(rows, k, _select_flags(rows, descending, op)),
                                               fresh_tensor_maker((count, k), rows.dtype, dev),
                                               fresh_tensor_maker((count, k), _I64, dev)))
    launches, workspace, make_values, make_indices = plan
    tensors = {"rows": rows, "values": make_values(), "indices": make_indices()}
    run_launches(dev, launches, workspace, tensors)
    return tensors["values"], tensors["indices"]


_selection_calls = PlanCache()


def _planned_selection(x: Tensor, k, dim: int, descending: bool, op: str, result_type, general):
    """A sort's (``k`` None: the whole row) or top-k's result, through the call-level plan of ``x``'s layout
    and the call's arguments: ``general(x, k, dim, descending)`` where it takes any host work past the
    launches, else one ``LaunchCall`` from ``x`` to the results, bound once compiled."""
    key = (op, layout_key(x), k, dim, descending)
    run = _selection_calls.lookup(key)
    if run is None:
        run = _selection_calls.get(key, lambda: _plan_selection(x, k, dim, descending, op, result_type, general,
                                                                key))
    return run(x)


def _plan_selection(x: Tensor, k, dim: int, descending: bool, op: str, result_type, general, key):
    """The run of ``_planned_selection``'s ``key``. Where ``dim`` is the last of a contiguous ``x``, its rows
    are ``x`` itself and the results' rows are the results (``_rows`` and ``_restore`` views), so a row that
    one program or one planned selection takes (``_select_rows``' planned case) launches from ``x`` into
    the results directly."""
    general_run = (lambda x: general(x, k, dim, descending))
    if not x.ndim or S.wrap_dim(dim, x.ndim) != x.ndim - 1 or not x.is_contiguous():
        return general_run
    shape = tuple(x.shape)
    n = shape[-1]
    count = S.numel(shape) // n if n else 0
    k = n if k is None else k
    if not (count and 0 < k <= n) or (count > GRID_ROWS and n > SEGMENT_LIMIT) or \
            (n > SEGMENT_LIMIT and k > SEGMENT_LIMIT):
        return general_run
    dev, out_shape = x.device, (*shape[:-1], k)
    rows = x._view((count, n), (n, 1))
    launches, workspace = _plan_select(rows, k, _select_flags(rows, descending, op))
    call = LaunchCall(dev, launches, workspace, "rows",
                      [(("values",), fresh_tensor_maker(out_shape, x.dtype, dev)),
                       (("indices",), fresh_tensor_maker(out_shape, _I64, dev))])
    return binding_run(_selection_calls, key, call, result_type)


def _select_flags(rows: Tensor, descending: bool, op: str) -> dict:
    return dict(DESCENDING=descending, INDEX_64=needs_index_64(count=rows.numel()), **_key_kind(rows.dtype, op))


def _plan_select(rows: Tensor, k: int, flags: dict):
    """(launches, workspace) that write ``values`` and ``indices`` from ``rows``: one program a row sorts
    a row that fits a segment; a longer row's k first come from a radix select over chunks of the row
    and are then sorted among themselves."""
    count, n = rows.shape
    if n <= SEGMENT_LIMIT:
        return [PlannedLaunch(K.sort_segments, (count, 1),
                              [Slot("rows"), Slot("rows"), Slot("indices"), Slot("values"), n, n, k],
                              dict(SEGMENT=n, LENGTH=_power_of_2(n), K_OUT=k, HAS_PERM=False, WRITE_VALUES=True,
                                   **flags))], Workspace({})
    facts = backend_for(rows.device).facts["kernels"]
    segment = candidate_segment(n, k, count, multiprocessors(rows.device) * facts["reduction_waves"])
    if segment is not None:
        return _plan_candidate_select(rows, k, segment, flags)
    launches, workspace = _plan_radix_select(rows, k, flags)
    launches.append(PlannedLaunch(K.sort_segments, (count, 1),
                                  [Slot("rows"), Slot("candidates"), Slot("indices"), Slot("values"), n, k, k],
                                  dict(SEGMENT=k, LENGTH=_power_of_2(k), K_OUT=k, HAS_PERM=True, WRITE_VALUES=True,
                                       **flags)))
    return launches, workspace


def candidate_segment(n: int, k: int, count: int = 1, programs: int | None = None) -> int | None:
    """The segment length (a power of two) of a split top-k of ``count`` rows of ``n``: the shortest from
    CANDIDATE_SEGMENT_MIN up whose segments' k first, together, fit one segment; None where none does
    (k too large for the row), for rows that are one segment, and for segments past
    CANDIDATE_SEGMENT_CHEAP whose programs outnumber ``programs`` (None: any number may)."""
    if n <= SEGMENT_LIMIT:
        return None
    segment = _power_of_2(max(CANDIDATE_SEGMENT_MIN, 2 * k))
    while segment <= SEGMENT_LIMIT and cdiv(n, segment) * k > SEGMENT_LIMIT:
        segment *= 2
    if segment > SEGMENT_LIMIT:
        return None
    if segment > CANDIDATE_SEGMENT_CHEAP and programs is not None and count * cdiv(n, segment) > programs:
        return None
    return segment


def _plan_candidate_select(rows: Tensor, k: int, segment: int, flags: dict):
    """(launches, workspace): program (row, segment) writes its segment's k first positions, in position
    order, to ``candidates`` (-1 past a short segment's end); then one program a row selects the row's k
    first among its candidates the same way and sorts only those, stably, so that equal keys stay in
    position order as in a sort of the whole row. Neither sorts a segment: a selection counts keys below
    a trial threshold once a key bit (``kernels/sort.py``, ``select_segments``)."""
    count, n = rows.shape
    segments = cdiv(n, segment)
    m = segments * k
    source, candidates = Slot("rows"), Slot("candidates")
    common = dict(K_OUT=k, K_LENGTH=_power_of_2(k), **flags)
    launches = [
        PlannedLaunch(K.select_segments, (count, segments), [source, source, candidates, source, n, n, m],
                      dict(SEGMENT=segment, LENGTH=segment, HAS_PERM=False, SORT_OUT=False,
                           num_warps=_select_warps(segment), **common)),
        PlannedLaunch(K.select_segments, (count, 1), [source, candidates, Slot("indices"), Slot("values"), n, m, k],
                      dict(SEGMENT=m, LENGTH=_power_of_2(m), HAS_PERM=True, SORT_OUT=True,
                           num_warps=_select_warps(_power_of_2(m)), **common))]
    return launches, Workspace(_candidate_pieces(count, m))


def _select_warps(length: int) -> int:
    """Warps of a selecting program over ``length`` lanes: 8 from 2048 on, since a vocabulary row's few
    programs each hold a multiprocessor alone and its bitwise search is a chain of counts over the tile."""
    return 8 if length >= 2048 else 4


def _candidate_pieces(count: int, m: int) -> dict:
    return {"candidates": ((count, m), _I64)}


def _plan_radix_select(rows: Tensor, k: int, flags: dict):
    """Launches that write to ``candidates`` (count, k, int64) the positions of each row's k first
    elements in key order, in position order (``kernels/sort.py``: two launches per 8-bit digit of the
    key, then a count and a gather), and the workspace they use."""
    count, n = rows.shape
    interpreted = backend_for(rows.device).facts["kernels"].get("interpreted", False)
    chunk = SELECT_CHUNK_INTERPRETED if interpreted else SELECT_CHUNK
    block = min(SELECT_BLOCK_INTERPRETED if interpreted else SELECT_BLOCK, chunk)
    n_chunks = cdiv(n, chunk)
    index_64 = flags["INDEX_64"]
    key = {name: flags[name] for name in ("KIND", "FORMAT", "DESCENDING")}
    source, hist, state, counts = Slot("rows"), Slot("hist"), Slot("state"), Slot("counts")
    launches = []
    for level in range(8 if flags["KIND"] >= K.KEY_FLOAT64 else 4):
        launches.append(PlannedLaunch(K.radix_histogram, (n_chunks, count),
                                      [source, hist, state, n, n, chunk, n_chunks],
                                      dict(LEVEL=level, BLOCK=block, INDEX_64=index_64, **key)))
        launches.append(PlannedLaunch(K.radix_choose, (count,), [hist, state, k, n_chunks],
                                      dict(LEVEL=level, INDEX_64=index_64)))
    launches.append(PlannedLaunch(K.radix_count, (n_chunks, count), [source, counts, state, n, n, chunk, n_chunks],
                                  dict(BLOCK=block, INDEX_64=index_64, **key)))
    launches.append(PlannedLaunch(K.radix_gather, (n_chunks, count),
                                  [source, counts, state, Slot("candidates"), n, n, k, chunk, n_chunks],
                                  dict(BLOCK=block, INDEX_64=index_64, **key)))
    workspace = Workspace(_radix_select_pieces(count, n, k, n_chunks))
    return launches, workspace


def _radix_select_pieces(count: int, n: int, k: int, n_chunks: int) -> dict:
    return {"state": ((count, 4), _I64), "candidates": ((count, k), _I64),
            "hist": ((count, n_chunks, 256), _I32), "counts": ((count, n_chunks, 2), _I32)}


def _select_workspace(x, k, dim) -> int:
    """The bytes of ``_select_rows``'s temporaries for ``x`` on any device: the split top-k's candidates
    or the radix select's state (its chunks: the fewest elements a chunk takes anywhere), whichever the
    device picks."""
    if not x.shape:
        return 0
    n = x.shape[S.wrap_dim(dim, len(x.shape))]
    count = S.numel(x.shape) // n if n else 0
    if not count or not k or n <= SEGMENT_LIMIT or k > SEGMENT_LIMIT:
        return 0
    n_chunks = cdiv(n, min(SELECT_CHUNK, SELECT_CHUNK_INTERPRETED))
    radix = Workspace.bytes_for(_radix_select_pieces(count, n, k, n_chunks))
    segment = candidate_segment(n, k)
    if segment is None:
        return radix
    return max(radix, Workspace.bytes_for(_candidate_pieces(count, cdiv(n, segment) * k)))


def _radix_shifts(dt, kind: int) -> list[int]:
    """The bit offsets of the 4-bit key digits a radix sort of ``dt`` must pass over. The others change no
    order: each is the same for every key, or follows from a higher digit that is passed over."""
    if kind >= K.KEY_FLOAT64:
        return list(range(0, 64, 4))
    if kind == K.KEY_FLOAT:
        # widened to float32, a narrower float has zeros below its mantissa; the key makes them all zeros
        # or all ones by sign (NaN: all ones), and the top digit holds the sign
        constant_bits = 23 - int(ml_dtypes.finfo(dt.numpy).nmant)
        return list(range(constant_bits // 4 * 4, 32, 4))
    width = 8 * dt.itemsize
    shifts = list(range(0, width, 4))
    if kind == K.KEY_SIGNED and width < 32:
        shifts.append(28)  # above its width the key repeats the sign, which its top digit orders
    return shifts


def _sort_long_rows(rows: Tensor, flags: dict):
    """Each row of ``rows`` (count, n > SEGMENT_LIMIT) sorted: (values, int64 positions), each (count, n),
    by stable LSD radix passes over the 4-bit digits of the key that can change the order
    (``kernels/sort.py``), or over every SORT_WARP_BITS-bit digit in the warp passes
    (``kernels/sort_warp.py``, which carry keys between passes). Between passes the positions are int32
    (int64 past 2^31 elements); the last pass writes int64 positions."""
    count, n = rows.shape
    dev = rows.device
    index_64 = flags["INDEX_64"]
    warp = _warp_passes(rows, flags)
    block = 32 * SORT_WARP_ROWS if warp else SORT_BLOCK
    n_blocks = cdiv(n, block)
    wide = _I64 if index_64 else _I32  # positions within a row, and counts of a row's elements
    key = dict(KIND=flags["KIND"], FORMAT=flags["FORMAT"], DESCENDING=flags["DESCENDING"], INDEX_64=index_64)
    digits = 1 << SORT_WARP_BITS if warp else K.RADIX.value  # digit values, one hist row each
    warp_key = dict(KIND=flags["KIND"], DESCENDING=flags["DESCENDING"], BITS=SORT_WARP_BITS, W=SORT_WARP_WARPS,
                    R=SORT_WARP_ROWS, num_warps=SORT_WARP_WARPS)
    hist = new_tensor((count, digits, n_blocks), _I32, dev)
    offsets = new_tensor((count, digits, n_blocks), wide, dev)
    totals = new_tensor((count, digits), wide, dev)
    n_segments = cdiv(n_blocks, SORT_SCAN_BLOCK)
    segment_totals = new_tensor((count, digits, n_segments), wide, dev)
    shifts = list(range(0, 32, SORT_WARP_BITS)) if warp else _radix_shifts(rows.dtype, flags["KIND"])
    # the warp passes carry int32 keys between passes (kernels/sort_warp.py)
    between = _I32 if warp else rows.dtype
    buffers = [(new_tensor((count, n), between, dev), new_tensor((count, n), wide, dev)) for _ in range(2)]
    src, src_indices = rows, None
    for step, shift in enumerate(shifts):
        last = step == len(shifts) - 1
        if warp:
            nb = SORT_WARP_WARPS * SORT_WARP_HIST_BLOCKS
            of_keys = {} if step == 0 else dict(KIND=K.KEY_UNSIGNED, DESCENDING=False)
            launch(KW.radix_histogram_warp, (cdiv(n_blocks, nb), count), dev, [src, hist, n, n_blocks, shift],
                   NB=nb, **{**warp_key, **of_keys})
        else:
            launch(K.radix_sort_histogram, (n_blocks, count), dev, [src, hist, n, n_blocks, shift], BLOCK=block,
                   num_warps=SORT_WARPS, **key)
        if n_segments > 1:
            launch(K.radix_sort_segment_totals, (digits * n_segments, count), dev,
                   [hist, segment_totals, n_blocks, n_segments], BLOCK=SORT_SCAN_BLOCK, DIGITS=digits,
                   INDEX_64=index_64)
        launch(K.radix_sort_offsets, (digits * n_segments, count), dev,
               [hist, segment_totals, offsets, totals, n_blocks, n_segments], BLOCK=SORT_SCAN_BLOCK,
               SEGMENTS=next_pow2(n_segments), DIGITS=digits, INDEX_64=index_64)
        dst, dst_indices = (new_tensor((count, n), rows.dtype, dev), new_tensor((count, n), _I64, dev)) if last \
            else buffers[step % 2]
        moved = [src, src if src_indices is None else src_indices, dst, dst_indices, offsets, totals]
        if warp:  # the warp scatter also reads the original row, for the values its last pass cannot rebuild
            launch(KW.radix_scatter_warp, (cdiv(n_blocks, SORT_WARP_WARPS), count), dev,
                   [*moved, rows, n, n_blocks, shift], FIRST=step == 0, LAST=last, NB=SORT_WARP_WARPS,
                   maxnreg=SORT_WARP_SCATTER_REGISTERS, **warp_key)
        else:
            launch(K.radix_sort_scatter, (n_blocks, count), dev, [*moved, n, n_blocks, shift],
                   HAS_INDICES=src_indices is not None, BLOCK=block, num_warps=SORT_WARPS, **key)
        src, src_indices = dst, dst_indices
    return src, src_indices


def _warp_passes(rows: Tensor, flags: dict) -> bool:
    """Whether the radix passes take the warp kernels (``kernels/sort_warp.py``): a device whose facts
    name warp votes, keys of 32-bit floats or integers, positions that fit int32."""
    facts = backend_for(rows.device).facts["kernels"]
    return bool(facts.get("warp_votes")) and rows.dtype in (_F32, _I32) and not flags["INDEX_64"] \
        and flags["KIND"] in (K.KEY_FLOAT, K.KEY_SIGNED)


def _restore(result: Tensor, moved_shape, d: int, k: int) -> Tensor:
    if not moved_shape:
        return result
    shape = (*moved_shape[:-1], k)
    out = result if tuple(result.shape) == shape else reshape(result, shape)
    return out if d == len(shape) - 1 else movedim(out, -1, d)


def _sort_meta(a):
    return TensorMeta(tuple(a.x.shape), a.x.dtype), TensorMeta(tuple(a.x.shape), _I64)


def _sort_cost(a):
    return _sorting_cost(a.x)


def _sorting_cost(x) -> Cost:
    n = S.numel(x.shape)
    return Cost(flops=n * max(1, int(math.log2(max(n, 2)))) ** 2, bytes_read=2 * nbytes(x),
                bytes_written=nbytes(x) + n * 8)


@register("sort", family="sorting", aten=["aten::sort.default", "aten::sort.stable"], meta=_sort_meta,
          cost=_sort_cost, bound=True, methods=("sort",), variants=(OUT,))
def sort(x: Tensor, dim: int = -1, descending: bool = False, stable: bool = False):
    """(values, indices) sorted along ``dim``; always stable, NaN largest."""
    if type(dim) is int and type(descending) is bool:
        return _planned_selection(x, None, dim, descending, "sort", SortResult, _sort_rows)
    return _sort_rows(x, None, dim, descending)


def _sort_rows(x: Tensor, _, dim, descending):
    """``sort`` through ``_rows`` and ``_select_rows`` (the second argument is a top-k's k, which a sort
    has not)."""
    rows, moved_shape, d = _rows(x, dim)
    n = moved_shape[-1] if moved_shape else 1
    if rows.numel() == 0:
        return SortResult(x.contiguous() if x.numel() == 0 else x, new_tensor(x.shape, _I64, x.device))
    values, indices = _select_rows(rows, n, descending, "sort")
    if x.ndim == 0:
        return SortResult(reshape(values, ()), reshape(indices, ()))
    return SortResult(_restore(values, moved_shape, d, n), _restore(indices, moved_shape, d, n))


@register("argsort", family="sorting", aten=["aten::argsort.default", "aten::argsort.stable"],
          meta=lambda a: TensorMeta(tuple(a.x.shape), _I64), cost=_sort_cost, bound=True, methods=("argsort",))
def argsort(x: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
    return sort.impl(x, dim, descending).indices


@register("msort", family="sorting", aten=["aten::msort.default"],
          meta=lambda a: TensorMeta(tuple(a.x.shape), a.x.dtype), cost=_sort_cost, bound=True, methods=("msort",))
def msort(x: Tensor) -> Tensor:
    """``sort(x, dim=0).values``."""
    return sort.impl(x, 0).values


def _written(metas) -> int:
    """The bytes of one result's metadata or of several."""
    return nbytes(metas) if isinstance(metas, TensorMeta) else sum(nbytes(m) for m in metas)


def _unique_metas(x, return_inverse, return_counts, dim) -> tuple | TensorMeta:
    """The distinct values (their count None: the values decide it), then the inverse and the counts asked
    for."""
    shape = tuple(x.shape)
    if dim is None:
        values, inverse = TensorMeta((None,), x.dtype), TensorMeta(shape, _I64)
    else:
        d = S.wrap_dim(dim, len(shape))
        values, inverse = TensorMeta(shape[:d] + (None,) + shape[d + 1:], x.dtype), TensorMeta((shape[d],), _I64)
    made = (values,) + ((inverse,) if return_inverse else ()) + ((TensorMeta((None,), _I64),) if return_counts else ())
    return made[0] if len(made) == 1 else made


def _topk_meta(a):
    shape = list(a.x.shape) or [1]
    shape[S.wrap_dim(a.dim, len(shape))] = a.k
    shape = tuple(shape) if len(a.x.shape) else ()
    return TensorMeta(shape, a.x.dtype), TensorMeta(shape, _I64)


def _selection_cost(meta):
    """topk's or kthvalue's cost rule, of bound arguments, with ``meta`` its meta rule."""
    return lambda a: Cost(bytes_read=nbytes(a.x), bytes_written=_written(meta(a)),
                          workspace=_select_workspace(a.x, a.k, a.dim))


@register("topk", family="sorting", aten=["aten::topk.default"], meta=_topk_meta, cost=_selection_cost(_topk_meta),
          bound=True, methods=("topk",))
def topk(x: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):
    """The ``k`` largest (or smallest) entries along ``dim`` and their positions, best first; NaN
    counts as the largest value, as in ATen."""
    if type(k) is int and type(dim) is int and type(largest) is bool:
        return _planned_selection(x, k, dim, largest, "topk", TopkResult, _topk_rows)
    return _topk_rows(x, k, dim, largest)


def _topk_rows(x: Tensor, k, dim, largest):
    """``topk`` through ``_rows`` and ``_select_rows``."""
    rows, moved_shape, d = _rows(x, dim)
    n = moved_shape[-1] if moved_shape else 1
    k = int(k)
    if not 0 <= k <= n:
        raise RuntimeError(f"topk: k ({k}) is out of range for a dimension of size {n}")
    values, indices = _select_rows(rows, k, largest, "topk") if rows.numel() or k == 0 else \
        (new_tensor((0, k), x.dtype, x.device), new_tensor((0, k), _I64, x.device))
    if x.ndim == 0:
        return TopkResult(reshape(values, ()), reshape(indices, ()))
    return TopkResult(_restore(values, moved_shape, d, k), _restore(indices, moved_shape, d, k))


def _kthvalue_meta(a):
    return tuple(TensorMeta(_reduced_shape(a.x.shape, a.dim, a.keepdim), dt) for dt in (a.x.dtype, _I64))


@register("kthvalue", family="sorting", aten=["aten::kthvalue.default"], meta=_kthvalue_meta,
          cost=_selection_cost(_kthvalue_meta), bound=True, methods=("kthvalue",))
def kthvalue(x: Tensor, k: int, dim: int = -1, keepdim: bool = False):
    """The ``k``-th smallest entry (1-based) along ``dim`` and its position."""
    result = topk.impl(x, k, dim, largest=False)
    if x.ndim == 0:
        return KthvalueResult(result.values, result.indices)
    d = S.wrap_dim(dim, x.ndim)
    values, indices = narrow(result.values, d, k - 1, 1), narrow(result.indices, d, k - 1, 1)
    if not keepdim:
        values, indices = squeeze(values, d), squeeze(indices, d)
    return KthvalueResult(values, indices)


def _reduced_shape(shape, dim, keepdim):
    if not len(shape):
        return ()
    d = S.wrap_dim(dim, len(shape))
    return tuple(1 if i == d else n for i, n in enumerate(shape) if keepdim or i != d)


def _positions_of(values, out_int32) -> TensorMeta:
    """searchsorted's and bucketize's result: an insertion point per value."""
    shape = tuple(values.shape) if hasattr(values, "shape") else ()
    return TensorMeta(shape, _I32 if out_int32 else _I64)


@register("searchsorted", family="sorting", aten=["aten::searchsorted.Tensor", "aten::searchsorted.Scalar"],
          meta=lambda a: _positions_of(a.values, a.out_int32),
          cost=lambda a: Cost(bytes_read=nbytes(_positions_of(a.values, False)) * 2,
                              bytes_written=nbytes(_positions_of(a.values, a.out_int32))), bound=True)
def searchsorted(sorted_sequence: Tensor, values, *, out_int32: bool = False, right: bool = False,
                 side: str | None = None, sorter=None) -> Tensor:
    """Insertion points of ``values`` in the innermost dim of the ascending ``sorted_sequence``
    (1-D, or one row per leading index of ``values``): first position with element >= value, or >
    with ``right`` (``side='right'``). With ``sorter`` (int64 indices that sort an unsorted sequence along
    its innermost dim), positions in the sorted order, as torch gives them."""
    if sorter is not None:
        if not isinstance(sorter, Tensor) or sorter.dtype.name != "int64":
            got = sorter.dtype.name if isinstance(sorter, Tensor) else type(sorter).__name__
            raise RuntimeError(f"searchsorted: sorter must be a tensor of int64 indices, got {got}")
        if tuple(sorter.shape) != tuple(sorted_sequence.shape):
            raise RuntimeError(f"searchsorted: the sequence {list(sorted_sequence.shape)} and its sorter "
                               f"{list(sorter.shape)} must have the same shape")
        # an index of the sorter out of range is caught on the device, named at the next synchronisation
        sorted_sequence = gather_dim(sorted_sequence, -1, sorter, "searchsorted (sorter)", wrap=False)
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
        if right and side == "left":
            raise RuntimeError("searchsorted: side='left' and right=True disagree")
        right = side == "right"
    scalar = not isinstance(values, Tensor)
    if scalar:
        values = tensor(values, device=sorted_sequence.device)
    common = result_type(sorted_sequence, values)
    seq = sorted_sequence.to(common).contiguous()
    vals = values.to(common).contiguous()
    if seq.ndim > 1 and tuple(seq.shape[:-1]) != tuple(vals.shape[:-1]):
        raise RuntimeError(f"searchsorted: the leading dims of the sequence {list(seq.shape[:-1])} and of the values "
                           f"{list(vals.shape[:-1])} must match")
    out = new_tensor(vals.shape, _I64, vals.device)
    n = vals.numel()
    if n:
        seq_len = seq.shape[-1] if seq.ndim else 1
        per_row = vals.shape[-1] if seq.ndim > 1 else n
        block = elementwise_block(vals.device)
        launch(K.search_sorted, (cdiv(n, block),), vals.device,
               [seq, vals, out, n, seq_len, max(per_row, 1), seq_len if seq.ndim > 1 else 0],
               RIGHT=right, STEPS=max(1, seq_len.bit_length() + 1),
               INDEX_64=needs_index_64(count=max(n, seq.numel())), BLOCK=block, **_key_kind(common, "searchsorted"))
    return out.to(_I32) if out_int32 else out


@register("bucketize", family="sorting", aten=["aten::bucketize.Tensor", "aten::bucketize.Scalar"],
          meta=lambda a: _positions_of(a.x, a.out_int32),
          cost=lambda a: Cost(bytes_read=nbytes(a.boundaries) + (nbytes(a.x) if hasattr(a.x, "shape") else 0),
                              bytes_written=nbytes(_positions_of(a.x, a.out_int32))), bound=True, methods=())
def bucketize(x, boundaries: Tensor, *, out_int32: bool = False, right: bool = False) -> Tensor:
    """The bucket of each element of ``x`` among the ascending 1-D ``boundaries``."""
    if boundaries.ndim != 1:
        raise RuntimeError(f"bucketize: boundaries must be 1-D, got {boundaries.ndim}-D")
    return searchsorted.impl(boundaries, x, out_int32=out_int32, right=right)


# ---- unique, bincount, histc ----------------------------------------------------------------------
# Their output sizes depend on the data, so each reads a count back to the host (one synchronisation
# with the device) before allocating its result.

def _unique_meta(a):
    return _unique_metas(a.x, a.return_inverse, a.return_counts, a.dim)


def _groups(ordered: Tensor):
    """For the rows of ``ordered`` (n, m) in order: whether each starts a new run of equal rows, and
    its run number (int64), and the number of runs (read back to the host)."""
    n = ordered.shape[0]
    differs = (ordered[1:] != ordered[:-1])
    differs = differs.any(1) if differs.ndim == 2 else differs
    starts = cat([ones(1, dtype=get_dtype("bool"), device=ordered.device), differs])
    run = cumsum(starts.to(_I64), 0) - 1
    return starts, run, int(run[n - 1].item()) + 1


def _lexicographic_order(rows: Tensor) -> Tensor:
    """The stable lexicographic order of the rows of ``rows`` (n, m): one stable sort per column,
    last column first."""
    order = None
    for column in reversed(range(rows.shape[1])):
        keys = rows[:, column] if order is None else index_select(rows[:, column], 0, order)
        step = argsort.impl(keys)
        order = step if order is None else index_select(order, 0, step)
    return order


def _unique_result(x: Tensor, dim, ordered_rows: Tensor, order: Tensor | None, return_inverse, return_counts,
                   moved_shape, d):
    n = ordered_rows.shape[0]
    starts, run, count = _groups(ordered_rows)
    if dim is None:
        values = masked_select(ordered_rows, starts)
    else:
        picked = index_select(ordered_rows, 0, reshape(nonzero(starts), (-1,)))
        values = movedim(reshape(picked, (count, *moved_shape[1:])), 0, d)
    results = [values]
    if return_inverse:
        inverse = run if order is None else scatter_(zeros(n, dtype=_I64, device=x.device), 0, order, run)
        results.append(reshape(inverse, tuple(x.shape)) if dim is None else inverse)
    if return_counts:
        results.append(scatter_add_(zeros(count, dtype=_I64, device=x.device), 0, run,
                                    ones(n, dtype=_I64, device=x.device)))
    return results[0] if len(results) == 1 else tuple(results)


def _slices(x: Tensor, dim, op: str):
    """``x`` flattened (dim None) or as rows of slices along ``dim`` (n, slice size); and the moved shape."""
    if dim is None:
        return reshape(x.contiguous(), (-1,)), (x.numel(),), 0
    d = S.wrap_dim(dim, x.ndim)
    if x.numel() == 0 and x.shape[d] != 0:
        # slices of no elements would all be equal: torch refuses rather than picking one
        raise RuntimeError(f"{op}: the input of shape {list(x.shape)} has a zero-size dim other than dim {d}, so its "
                           f"slices along dim {d} are empty and cannot be told apart")
    moved = movedim(x, d, 0).contiguous()
    return reshape(moved, (moved.shape[0], math.prod(moved.shape[1:]))), tuple(moved.shape), d


def _empty_unique(x: Tensor, dim, return_inverse, return_counts):
    values = new_tensor((0,), x.dtype, x.device) if dim is None else x.contiguous()
    results = [values]
    if return_inverse:
        results.append(zeros(*(x.shape if dim is None else (x.shape[S.wrap_dim(dim, x.ndim)],)), dtype=_I64,
                             device=x.device))
    if return_counts:
        results.append(zeros(0, dtype=_I64, device=x.device))
    return results[0] if len(results) == 1 else tuple(results)


@register("unique", family="sorting", aten=["aten::_unique2.default", "aten::unique_dim.default"],
          meta=_unique_meta, cost=_sort_cost, bound=True, methods=("unique",))
def unique(x: Tensor, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False, dim=None):
    """The distinct elements of ``x`` (or distinct slices along ``dim``), ascending; optionally the
    position of each input element in them (``return_inverse``) and their counts. Always sorted,
    also when ``sorted=False``. NaNs compare unequal, so each NaN is its own value (ATen's rule).
    Reads the number of distinct values back to the host."""
    if x.dtype.is_complex:
        raise RuntimeError("unique: complex tensors have no order")
    rows, moved_shape, d = _slices(x, dim, "unique")
    if rows.shape[0] == 0:
        return _empty_unique(x, dim, return_inverse, return_counts)
    if dim is None or rows.shape[1] == 1:
        ordered, order = sort.impl(rows if dim is None else rows[:, 0], 0)
        ordered = ordered if dim is None else reshape(ordered, (-1, 1))
    else:
        order = _lexicographic_order(rows)
        ordered = index_select(rows, 0, order)
    return _unique_result(x, dim, ordered, order, return_inverse, return_counts, moved_shape, d)


@register("unique_consecutive", family="sorting", aten=["aten::unique_consecutive.default"],
          meta=_unique_meta, cost=_sort_cost, bound=True, methods=("unique_consecutive",))
def unique_consecutive(x: Tensor, return_inverse: bool = False, return_counts: bool = False, dim=None):
    """``x`` with each run of equal consecutive elements (or slices along ``dim``) collapsed to one;
    optionally the run of each element and the run lengths. Reads the number of runs back to the host."""
    rows, moved_shape, d = _slices(x, dim, "unique_consecutive")
    if rows.shape[0] == 0:
        return _empty_unique(x, dim, return_inverse, return_counts)
    return _unique_result(x, dim, rows, None, return_inverse, return_counts, moved_shape, d)


def _bincount_dtype(weights):
    if weights is None:
        return _I64
    return weights.dtype if weights.dtype.name == "float32" else get_dtype("float64")


@register("bincount", family="sorting", aten=["aten::bincount.default"],
          meta=lambda a: TensorMeta((None,), _bincount_dtype(a.weights)), cost=lambda a: Cost(bytes_read=nbytes(a.x)),
          bound=True, methods=("bincount",))
def bincount(x: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """How often each value 0..max(x) occurs in the non-negative 1-D integer ``x`` (at least
    ``minlength`` bins), or the sum of ``weights`` at its occurrences (float32 weights give float32,
    others float64). The sums are taken by the deterministic scatter-add. Reads max(x) back to the host."""
    if x.ndim != 1 or not x.dtype.is_integral or x.dtype.kind == "bool":
        raise RuntimeError(f"bincount: expected a 1-D integer tensor, got {x.ndim}-D {x.dtype.name}")
    if minlength < 0:
        raise RuntimeError(f"bincount: minlength must be non-negative, got {minlength}")
    if weights is not None and tuple(weights.shape) != tuple(x.shape):
        raise RuntimeError(f"bincount: weights {list(weights.shape)} must have the shape of the input {list(x.shape)}")
    out_dtype = _bincount_dtype(weights)
    if x.numel() == 0:
        return zeros(minlength, dtype=out_dtype, device=x.device)
    lowest, highest = (int(v.item()) for v in (x.amin(), x.amax()))
    if lowest < 0:
        raise RuntimeError("bincount: the input must be non-negative")
    index = x.to(_I64)
    source = weights.to(out_dtype) if weights is not None else \
        zeros(1, dtype=_I64, device=x.device).add(1).expand(x.shape[0])
    return scatter_add_(zeros(max(highest + 1, minlength), dtype=out_dtype, device=x.device), 0, index,
                        source.contiguous())


@register("histc", family="sorting", aten=["aten::histc.default"],
          meta=lambda a: TensorMeta((int(a.bins),), a.x.dtype),
          cost=lambda a: Cost(bytes_read=nbytes(a.x), bytes_written=int(a.bins) * a.x.dtype.itemsize), bound=True,
          methods=("histc",))
def histc(x: Tensor, bins: int = 100, min: float = 0, max: float = 0) -> Tensor:
    """A histogram of ``x`` in ``bins`` equal bins over [min, max] (the data's range when min == max,
    widened by 1 on each side if that is a point); elements outside are ignored, ``max`` falls in the
    last bin. Reads the range back to the host when it comes from the data."""
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"histc: expected a floating-point tensor, got {x.dtype.name}")
    bins = int(bins)
    if bins <= 0:
        raise RuntimeError(f"histc: bins must be positive, got {bins}")
    low, high = float(min), float(max)
    if low > high:
        raise RuntimeError(f"histc: max must be larger than min, got min={low}, max={high}")
    flat = reshape(x.contiguous(), (-1,))
    if low == high and flat.numel():
        low, high = float(flat.amin().item()), float(flat.amax().item())
    if low == high:
        low, high = low - 1, high + 1
    if not (math.isfinite(low) and math.isfinite(high)):
        raise RuntimeError(f"histc: range of [{low}, {high}] is not finite")
    compute = get_dtype("float64") if x.dtype.name == "float64" else get_dtype("float32")
    values = flat.to(compute)
    inside = (values >= low) & (values <= high)
    # the bin as ATen computes it: (v - min) * bins / (max - min), the maximum in the last bin
    position = ((values - low) * bins / (high - low)).floor().to(_I64).clamp(0, bins - 1)
    counts = bincount.impl(masked_select(position, inside), minlength=bins)
    return counts.to(x.dtype)


# ---- samples ---------------------------------------------------------------------------------------

def _sort_reference(x, dim=-1, descending=False, stable=False, **ignored):
    if np.ndim(x) == 0:
        return x, np.zeros((), np.int64)
    order = np.argsort(-x if descending else x, axis=dim, kind="stable")
    return np.take_along_axis(x, order, axis=dim), order


def _topk_reference(x, k, dim=-1, largest=True, sorted=True):
    values, order = _sort_reference(x, dim, descending=largest)
    if np.ndim(x) == 0:
        return values, order
    return np.take(values, range(k), axis=dim), np.take(order, range(k), axis=dim)


def _kthvalue_reference(x, k, dim=-1, keepdim=False):
    values, order = _sort_reference(x, dim)
    if np.ndim(x) == 0:
        return values, order
    picked = [np.take(part, [k - 1], axis=dim) for part in (values, order)]
    return tuple(p if keepdim else np.squeeze(p, dim) for p in picked)


def _searchsorted_reference(sorted_sequence, values, *, out_int32=False, right=False, side=None, sorter=None):
    side = side or ("right" if right else "left")
    if sorted_sequence.ndim == 1:
        return np.searchsorted(sorted_sequence, values, side)
    return np.stack([np.searchsorted(row, v, side) for row, v in zip(sorted_sequence, values)])


# float rows: no two values tie, so the indices are unique
_ROWS = (sample(operand(2, 5)), sample(operand(5, 2, layout="transposed"), 0), sample(operand()),
         sample(operand(0, 3)), sample(operand(2, 4, dtype="float64", layout="sliced"), -1, True))
_SORTED = operand(2, 4, dtype="int64", values="index", domain=(0, 3))
_SAMPLES = {
    "sort": Samples(_ROWS, _sort_reference),
    "argsort": Samples(_ROWS, lambda *args, **kwargs: _sort_reference(*args, **kwargs)[1]),
    "msort": Samples((sample(operand(3, 2)), sample(operand(2, 3, layout="transposed")), sample(operand(0, 3))),
                     lambda x: np.sort(x, axis=0)),
    "topk": Samples((sample(operand(2, 5), 2), sample(operand(5, 2, layout="transposed"), 3, 0), sample(operand(), 1),
                     sample(operand(2, 4, dtype="float64", layout="sliced"), 2, -1, False), sample(operand(0, 3), 0)),
                    _topk_reference),
    "kthvalue": Samples((sample(operand(2, 5), 2), sample(operand(5, 2, layout="transposed"), 3, 0, True),
                         sample(operand(), 1), sample(operand(2, 4, dtype="float64", layout="sliced"), 4)),
                        _kthvalue_reference),
    "searchsorted": Samples((sample(operand(5, values="index", domain=(0, 1)), operand(2, 3)),
                             sample(operand(4, dtype="int64", values="index", domain=(0, 1)), operand(3, dtype="int64"),
                                    right=True),
                             sample(operand(3, dtype="float64", values="index", domain=(0, 1)), 0.5, out_int32=True)),
                            _searchsorted_reference),
    "bucketize": Samples((sample(operand(2, 3), operand(4, values="index", domain=(0, 1))),
                          sample(operand(3, dtype="int64"), operand(3, dtype="int64", values="index", domain=(0, 1)),
                                 right=True),
                          sample(operand(0, 3), operand(2, values="index", domain=(0, 1)))),
                         lambda x, boundaries, out_int32=False, right=False: np.searchsorted(
                             boundaries, x, "right" if right else "left")),
    "unique": Samples((sample(operand(6, dtype="int64", values="index", domain=(0, 4))),
                       sample(operand(2, 3, dtype="int64", values="index", domain=(0, 3)), return_inverse=True,
                              return_counts=True),
                       sample(operand(0, dtype="int64")),
                       sample(operand(3, 2, dtype="int64", values="index", domain=(0, 2)), dim=0)),
                      lambda x, sorted=True, return_inverse=False, return_counts=False, dim=None:
                      _unique_reference(x, return_inverse, return_counts, dim)),
    "unique_consecutive": Samples((sample(operand(6, dtype="int64", values="index", domain=(0, 2))),
                                   sample(operand(5, dtype="int64", values="index", domain=(0, 2)), return_inverse=True,
                                          return_counts=True),
                                   sample(operand(0, dtype="int64")))),
    "bincount": Samples((sample(operand(6, dtype="int64", values="index", domain=(0, 4))),
                         sample(operand(5, dtype="int64", values="index", domain=(0, 3)), operand(5), 6),
                         sample(operand(0, dtype="int64"), minlength=2)),
                        lambda x, weights=None, minlength=0: np.bincount(x, weights, minlength)),
    "histc": Samples((sample(operand(2, 5), 4, -2.0, 2.0), sample(operand(6, dtype="float64"), 3),
                      sample(operand(0, 3), 5, 0.0, 1.0)),
                     lambda x, bins=100, min=0, max=0: np.histogram(
                         x, bins, (min, max) if (min, max) != (0, 0) else (x.min(), x.max()) if x.size else (0, 1))[0]),
}
family_samples("sorting", by_name(_SAMPLES))


def _unique_reference(x, return_inverse, return_counts, dim):
    made = np.unique(x, return_inverse=return_inverse, return_counts=return_counts, axis=dim)
    if not (return_inverse or return_counts):
        return made
    if return_inverse:
        made = (made[0], np.reshape(made[1], x.shape if dim is None else (-1,))) + tuple(made[2:])
    return made
