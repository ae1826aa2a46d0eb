"""Pooling: max (with indices), average and adaptive average and max, in 1-D, 2-D and 3-D, as torch has
them; lp_pool from average pooling. Every form is one launch of ``kernels/pool.py``'s window kernel over
(N, C, D, H, W), 1-d and 2-d inputs seen with unit dims, read in place in either memory format; the
output is channels-last where the input's strides are (ATen's suggest_memory_format), else contiguous,
and the indices have the output's layout."""
from __future__ import annotations

import math

from .. import shape as S
from ..allocation import fresh_tensor_maker
from ..dtypes import get_dtype
from ..kernels import pool as K
from ..launch import cdiv, next_pow2, spread_block
from ..lowering import conversion_flags, division_magic, load_format, needs_index_64
from ..tensor import Tensor
from .plans import PlanCache, PlannedLaunch, Slot, key_argument, layout_key, one_launch_run
from .reductions import kernel_facts
from .registry import Cost, TensorMeta, family_samples, get, nbytes, register, workspace_bytes
from .samples import Samples, operand, sample

_INT64 = get_dtype("int64")
_PAIR_WORDS = {1: "a single int", 2: "a tuple of two ints", 3: "a tuple of three ints"}


def _ints(value, nd: int, what: str, op: str, allow_empty: bool = False) -> tuple | None:
    """``value`` (an int, or a sequence of 1 or ``nd`` ints) as ``nd`` ints; None for an empty sequence
    where ``allow_empty`` (a stride omitted)."""
    if isinstance(value, int):
        return (value,) * nd
    value = tuple(int(v) for v in value)
    if allow_empty and not value:
        return None
    if len(value) == 1:
        return value * nd
    if len(value) != nd:
        omitted = "be omitted, " if allow_empty else ""
        raise RuntimeError(f"{op}: {what} must either {omitted}be a single int, or {_PAIR_WORDS[nd]}")
    return value


def pooled_size(size: int, kernel: int, stride: int, pad: int, dilation: int, ceil_mode: bool) -> int:
    """ATen's pooling_output_shape: with ceil_mode a last window may hang over the end, but must start
    inside the input or its left padding."""
    span = size + 2 * pad - dilation * (kernel - 1) - 1 + (stride - 1 if ceil_mode else 0)
    out = span // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


class _Geometry:
    """The (N, C, D, H, W) view of a pooling call: spatial dims padded to three at the front."""

    def __init__(self, x, nd: int, op: str, adaptive: bool):
        shape = tuple(x.shape)
        if len(shape) not in (nd + 1, nd + 2):
            if adaptive:
                raise S.ShapeError(f"{op}(): Expected {nd + 1}D or {nd + 2}D tensor, but got {list(shape)}")
            raise S.ShapeError(f"{op}: Expected {nd + 1}D or {nd + 2}D (batch mode) tensor with optional 0 dim batch "
                               f"size for input, but got: {list(shape)}")
        self.batched = len(shape) == nd + 2
        for d in range(1 if self.batched else 0, len(shape)):
            if shape[d] == 0:
                raise S.ShapeError(f"{op}(): Expected input to have non-zero size for non-batch dimensions, but input "
                                   f"has sizes {list(shape)} with dimension {d} being empty")
        self.nd = nd
        self.n = shape[0] if self.batched else 1
        self.c = shape[-nd - 1]
        self.spatial = (1,) * (3 - nd) + shape[-nd:]


def _planes(strides, geometry: _Geometry) -> tuple:
    """(n, c, d, h, w) strides of a tensor of these strides seen as the geometry's 5-d tensor."""
    strides = tuple(strides)
    nd = geometry.nd
    spatial = (0,) * (3 - nd) + strides[-nd:]
    return ((strides[0] if geometry.batched else 0), strides[-nd - 1], *spatial)


def _output_strides(x, out_shape) -> tuple | None:
    """Channels-last strides for the output where ATen suggests that format for ``x``, else None (contiguous)."""
    if S.strides_like_channels_last(x.shape, x.stride()):
        return S.channels_last_strides(out_shape)
    return None


def _check_dtype(x, op: str, integers: bool) -> None:
    dt = x.dtype
    if dt.kind == "bool" or dt.is_complex or dt.storage_only or (not integers and not dt.is_floating_point):
        raise NotImplementedError(f"\"{op}\" not implemented for '{dt.name}'")


# ---- window geometry -----------------------------------------------------------------------------------
def _window_args(x, nd, kernel_size, stride, padding, dilation, ceil_mode, op, average: bool):
    """(geometry, output spatial sizes, kernel, stride, padding, dilation), checked as ATen checks."""
    kernel = _ints(kernel_size, nd, "kernel_size", op)
    strides = _ints(() if stride is None else stride, nd, "stride", op, allow_empty=True) or kernel
    pads = _ints(padding, nd, "padding", op)
    dilations = _ints(dilation, nd, "dilation", op)
    if any(k <= 0 for k in kernel):
        raise RuntimeError(f"{op}: kernel size should be greater than zero, but got {list(kernel)}")
    if any(s == 0 for s in strides):
        raise RuntimeError("stride should not be zero")
    if any(s < 0 for s in strides):
        raise RuntimeError(f"{op}: stride should be greater than zero, but got {list(strides)}")
    if any(d <= 0 for d in dilations):
        raise RuntimeError(f"dilation should be greater than zero, but got dilation {list(dilations)}")
    for k, p, d in zip(kernel, pads, dilations):
        if p < 0 or p > ((k - 1) * d + 1) // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={p}, "
                               f"kernel_size={k} and dilation={d}")
    g = _Geometry(x, nd, op, adaptive=False)
    inner = g.spatial[3 - nd:]
    out = tuple(pooled_size(i, k, s, p, d, ceil_mode)
                for i, k, s, p, d in zip(inner, kernel, strides, pads, dilations))
    if any(o <= 0 for o in out):
        given = "x".join(str(v) for v in (g.c, *inner))
        calculated = "x".join(str(v) for v in (g.c, *out))
        raise RuntimeError(f"Given input size: ({given}). Calculated output size: ({calculated}). "
                           "Output size is too small")
    return g, out, kernel, strides, pads, dilations


def _out_shape(x, g: _Geometry, spatial_out) -> tuple:
    return (*tuple(x.shape)[:len(x.shape) - g.nd], *spatial_out)


# the widest output tile: wider output rows (more channels, channels-last) take several column blocks
_TILE_COLUMNS = 128
_MIN_TILE_BLOCK = 256
# a warp's threads; the most column steps a window's program takes along NCDHW rows
_WARP = 32
_WINDOW_COL_STEPS = 4
# channels-last rows of fewer channels than this are no vector loads (Triton vectorises along a dim whose
# stride it knows divides by 16): a thread takes all of a pixel's
_VECTOR_CHANNELS = 16
# the most loads a thread's unrolled window issues (taps times the elements it holds): a window's loops
# are unrolled up to this, its loads all in flight at once (an adaptive window's longest extent, its taps
# past the window's end masked or clamped); a wider window, or an interpreted block's many elements a
# thread, keeps them loops (ptxas takes minutes over thousands of unrolled loads)
_UNROLLED_LOADS = 512
# a window program's warps
_WARPS = 4


def tile_block(dev, total: int) -> int:
    """Output elements a program of a tiled kernel takes: the facts' elementwise block, halved (to
    ``_MIN_TILE_BLOCK`` at least) on a compiling device while ``total`` gives fewer than two programs a
    multiprocessor, so that a small output still spreads over the device."""
    facts = kernel_facts(dev)
    if facts.get("interpreted"):
        return facts["elementwise_block"]
    return spread_block(facts["elementwise_block"], _MIN_TILE_BLOCK, total, dev)


def output_tile_plan(block: int, n: int, c: int, spatial_out, channels_last: bool, col_steps: int = 1) -> tuple:
    """(grid, the kernel's ``lines``, ``col_blocks`` and ``magic`` arguments, its BLOCK_ROWS, BLOCK_COLS,
    COL_STEPS and EVEN_COLS) of a kernel taking ``kernels/common.output_tile``'s tiles, COL_STEPS side by
    side, of about ``block`` elements a program over an (n, c, *spatial_out) output: rows by columns in
    NCDHW order, pixels by channels in channels-last. A thread holds one column of several rows (it
    shares their column's work), and shares its row's (pixel's) work among the columns it holds: up to
    ``col_steps`` where a warp spans 32 columns of an NCDHW row wider than that (for a kernel whose rows
    cost more than its columns), each of a pixel's channels where they are too few for vector loads
    (channels-last, under 16), a vector of channels where they are (multiples of 16)."""
    od, oh, ow = spatial_out
    lines, across = (n * od * oh * ow, c) if channels_last else (n * c * od * oh, ow)
    if channels_last and across < _VECTOR_CHANNELS:
        columns, steps = 1, across
    elif not channels_last and across > _WARP and col_steps > 1:
        columns = _WARP
        steps = min(range(col_steps, 0, -1), key=lambda s: cdiv(across, _WARP * s) * _WARP * s - across)
    else:  # a power of two from a warp's width up, the fewest padded columns, the widest of equals
        widest = min(next_pow2(across), _TILE_COLUMNS, block)
        widths = [widest >> k for k in range(widest.bit_length()) if widest >> k >= min(_WARP, widest)]
        columns, steps = min(widths, key=lambda width: (cdiv(across, width) * width, -width)), 1
    rows = max(1, block // (columns * steps))
    rows = 1 << (rows.bit_length() - 1)
    col_blocks = cdiv(across, columns * steps)
    magic = sum((division_magic(d) for d in ((ow, oh, od) if channels_last else (oh, od, c))), ())
    return ((cdiv(lines, rows) * col_blocks,), lines, col_blocks, magic,
            dict(BLOCK_ROWS=rows, BLOCK_COLS=columns, COL_STEPS=steps, EVEN_COLS=across % (columns * steps) == 0))


_plans = PlanCache()


def _run(x, key, make, op: str, integers: bool):
    """The call of ``x`` through the plan of its layout and ``key`` (the op and its arguments), made the first
    time by ``make(full_key)``, after ``x``'s dtype is checked (``_check_dtype``: the layout in the key holds
    the dtype, so a repeated call skips the check); once its launch is bound, the plan is its bound form
    (``plans.binding_run``)."""
    full_key = (layout_key(x), *key)
    run = _plans.lookup(full_key)
    if run is None:
        _check_dtype(x, op, integers)
        run = _plans.get(full_key, lambda: make(full_key))
    return run(x)


def _least_value(dtype):
    """Where a maximum of ``dtype`` elements starts: -inf, or the integer type's least value."""
    if dtype.is_floating_point:
        return float("-inf")
    return 0 if dtype.kind == "uint" else -(1 << (dtype.bits - 1))


def _plan(key, x, g: _Geometry, out_spatial, *, kind, adaptive, kernel=(1, 1, 1), stride=(1, 1, 1),
          pad=(0, 0, 0), dilation=(1, 1, 1), count_pad=True, divisor=None, with_indices=False):
    """``execute(x) -> out`` or ``(out, indices)`` for inputs laid out as ``x``, the plan ``key`` names in
    ``_plans``; sizes are 3-d."""
    dev, dtype = x.device, x.dtype
    out_shape = _out_shape(x, g, out_spatial[3 - g.nd:])
    strides = _output_strides(x, out_shape)
    make_out = fresh_tensor_maker(out_shape, dtype, dev, strides)
    make_indices = fresh_tensor_maker(out_shape, _INT64, dev, strides) if with_indices else None
    total = S.numel(out_shape)
    if total == 0:
        return lambda x: (make_out(), make_indices()) if with_indices else make_out()
    compute = get_dtype("float64") if dtype.name == "float64" else (
        dtype if not dtype.is_floating_point else get_dtype("float32"))
    flags = conversion_flags(compute, dtype, dev)
    block = tile_block(dev, total)
    channels_last = strides is not None
    if adaptive:  # the longest window of each dim: ceil(I/O) + 1 covers every [floor(o*I/O), ceil((o+1)*I/O))
        kernel = tuple(min(i, -(-i // o) + 1) for i, o in zip(g.spatial, out_spatial))
    grid, lines, col_blocks, magic, tile = output_tile_plan(block, g.n, g.c, out_spatial, channels_last,
                                                            _WINDOW_COL_STEPS)
    src_slot, out_slot = Slot("src"), Slot("out")
    launch = PlannedLaunch(
        K.pool_window, grid,
        [src_slot, out_slot, Slot("indices") if with_indices else out_slot, lines, g.c, *g.spatial, *out_spatial,
         col_blocks, magic, *_planes(x.stride(), g), *stride, *pad, *dilation,
         1 if divisor is None else int(divisor)],
        dict(KD=kernel[0], KH=kernel[1], KW=kernel[2], KIND=kind, ADAPTIVE=adaptive,
             CLAMPED=kind == K.KIND_MAX and dilation == (1, 1, 1),
             UNROLL=math.prod(kernel) * block // (_WARP * _WARPS) <= _UNROLLED_LOADS, LOWEST=_least_value(dtype),
             COUNT_PAD=count_pad, HAS_DIVISOR=divisor is not None, INTEGER=not dtype.is_floating_point,
             WITH_INDICES=with_indices, CHANNELS_LAST=channels_last, COMPUTE=compute.triton,
             SRC_FORMAT=load_format(dtype), DST_FORMAT=flags["DST_FORMAT"], VIA_F32=flags["VIA_F32"],
             INDEX_64=needs_index_64(x, count=total * 8), **tile, num_warps=_WARPS))

    outputs = [(("out",), make_out)] + ([(("indices",), make_indices)] if with_indices else [])
    return one_launch_run(_plans, key, dev, launch, "src", outputs, _both if with_indices else 0)


def _both(values, indices):
    return values, indices


# ---- max and average pooling --------------------------------------------------------------------------
def _max_pool(x, nd, kernel_size, stride, padding, dilation, ceil_mode, with_indices, op):
    key = (op, nd, key_argument(kernel_size), key_argument(stride), key_argument(padding), key_argument(dilation),
           bool(ceil_mode), with_indices)

    def make(full_key):
        g, out, kernel, strides, pads, dilations = _window_args(x, nd, kernel_size, stride, padding, dilation,
                                                                ceil_mode, op, average=False)
        lift = (1,) * (3 - nd)
        return _plan(full_key, x, g, lift + out, kind=K.KIND_MAX, adaptive=False, kernel=lift + kernel,
                     stride=lift + strides, pad=(0,) * (3 - nd) + pads, dilation=lift + dilations,
                     with_indices=with_indices)
    return _run(x, key, make, op, integers=True)


def _avg_pool(x, nd, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, op):
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    key = (op, nd, key_argument(kernel_size), key_argument(stride), key_argument(padding), bool(ceil_mode),
           bool(count_include_pad), divisor_override)

    def make(full_key):
        g, out, kernel, strides, pads, _ = _window_args(x, nd, kernel_size, stride, padding, 1, ceil_mode, op,
                                                        average=True)
        lift = (1,) * (3 - nd)
        return _plan(full_key, x, g, lift + out, kind=K.KIND_AVG, adaptive=False, kernel=lift + kernel,
                     stride=lift + strides, pad=(0,) * (3 - nd) + pads, count_pad=bool(count_include_pad),
                     divisor=divisor_override)
    # torch averages int64, no narrower integer
    return _run(x, key, make, op, integers=x.dtype.name == "int64")


def _with_indices(a, indices) -> bool:
    """Whether a pool returns indices: ``indices``, or the call's ``return_indices`` where it is None."""
    return bool(a.return_indices) if indices is None else indices


def _window_rules(nd, indices, average=False) -> dict:
    """The meta and cost rules of a window pool, of bound arguments; ``indices`` as ``_with_indices``."""
    op = f"{'avg' if average else 'max'}_pool{nd}d"

    def meta(a):
        x = a.input
        g, out, *_ = _window_args(x, nd, a.kernel_size, a.stride, a.padding, 1 if average else a.dilation,
                                  a.ceil_mode, op, average)
        values = TensorMeta(_out_shape(x, g, out), x.dtype)
        return (values, TensorMeta(values.shape, _INT64)) if _with_indices(a, indices) else values

    def cost(a):
        out, with_indices = meta(a), _with_indices(a, indices)
        values = out[0] if with_indices else out
        window = math.prod(_ints(a.kernel_size, nd, "kernel_size", "pool"))
        written = nbytes(values) + (nbytes(out[1]) if with_indices else 0)
        return Cost(flops=S.numel(values.shape) * window, bytes_read=nbytes(a.input), bytes_written=written)
    return {"meta": meta, "cost": cost}


def _declare_window_pools(nd: int) -> None:
    name = f"max_pool{nd}d"

    def max_pool_with_indices(input: Tensor, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
        return _max_pool(input, nd, kernel_size, stride, padding, dilation, ceil_mode, True, name)
    max_pool_with_indices.__doc__ = f"({name} values, int64 indices into each input plane), as aten::{name}_with_indices."
    register(f"{name}_with_indices", family="pooling", aten=[f"aten::{name}_with_indices.default"],
             **_window_rules(nd, True), bound=True, api=(), functional=True)(max_pool_with_indices)

    def max_pool(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                 return_indices=False):
        return _max_pool(input, nd, kernel_size, stride, padding, dilation, ceil_mode, bool(return_indices), name)
    max_pool.__doc__ = (f"torch.nn.functional.{name}: the largest element of each window (a NaN wins; of equal "
                        "values the first), with its index in the input plane for return_indices.")
    register(name, family="pooling", aten=[f"aten::{name}.default"], **_window_rules(nd, None), bound=True, api=(),
             functional=True)(max_pool)

    avg = f"avg_pool{nd}d"
    if nd == 1:
        def avg_pool(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
            return _avg_pool(input, nd, kernel_size, stride, padding, ceil_mode, count_include_pad, None, avg)
    else:
        def avg_pool(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                     divisor_override=None):
            return _avg_pool(input, nd, kernel_size, stride, padding, ceil_mode, count_include_pad,
                             divisor_override, avg)
    avg_pool.__doc__ = (f"torch.nn.functional.{avg}: the mean of each window, over its size clipped to the padded "
                        "input (count_include_pad) or over the elements inside the input; divisor_override "
                        "replaces the divisor.")
    register(avg, family="pooling", aten=[f"aten::{avg}.default"], **_window_rules(nd, False, average=True),
             bound=True, api=(), functional=True)(avg_pool)


# ---- adaptive pooling -----------------------------------------------------------------------------------
def _adaptive_sizes(x, nd, output_size, op):
    g = _Geometry(x, nd, op, adaptive=True)
    if isinstance(output_size, int):
        sizes = (output_size,) * nd
    else:
        sizes = tuple(output_size)
        if len(sizes) == 1 and nd > 1:
            sizes = sizes * nd
        if len(sizes) != nd:
            raise RuntimeError(f"{op}: output_size must be {nd}")
    inner = g.spatial[3 - nd:]
    sizes = tuple(i if s is None else int(s) for s, i in zip(sizes, inner))
    if any(s < 0 for s in sizes):
        raise RuntimeError(f"{op}: elements of output_size must be greater than or equal to 0 but received "
                           f"{list(sizes)}")
    return g, sizes


def _adaptive(x, nd, output_size, kind, with_indices, op):
    key = (op, nd, key_argument(output_size), kind, with_indices)

    def make(full_key):
        g, sizes = _adaptive_sizes(x, nd, output_size, op)
        return _plan(full_key, x, g, (1,) * (3 - nd) + sizes, kind=kind, adaptive=True, with_indices=with_indices)
    return _run(x, key, make, op, integers=False)


def _adaptive_rules(nd, indices) -> dict:
    """The meta and cost rules of an adaptive pool, of bound arguments; ``indices`` as ``_with_indices``."""
    def meta(a):
        g, sizes = _adaptive_sizes(a.input, nd, a.output_size, "adaptive_pool")
        values = TensorMeta(_out_shape(a.input, g, sizes), a.input.dtype)
        return (values, TensorMeta(values.shape, _INT64)) if _with_indices(a, indices) else values

    def cost(a):
        out, with_indices = meta(a), _with_indices(a, indices)
        values = out[0] if with_indices else out
        written = nbytes(values) + (nbytes(out[1]) if with_indices else 0)
        return Cost(flops=S.numel(a.input.shape), bytes_read=nbytes(a.input), bytes_written=written)
    return {"meta": meta, "cost": cost}


def _declare_adaptive_pools(nd: int) -> None:
    avg = f"adaptive_avg_pool{nd}d"
    aten = [f"aten::{avg}.default"] + ([f"aten::_{avg}.default"] if nd > 1 else [])

    def adaptive_avg_pool(input: Tensor, output_size):
        return _adaptive(input, nd, output_size, K.KIND_AVG, False, avg)
    adaptive_avg_pool.__doc__ = (f"torch.nn.functional.{avg}: output cell o of a dim of I inputs and O outputs is "
                                 "the mean over [floor(o*I/O), ceil((o+1)*I/O)); None in output_size keeps a size.")
    register(avg, family="pooling", aten=aten, **_adaptive_rules(nd, False), bound=True, api=(),
             functional=True)(adaptive_avg_pool)

    mx = f"adaptive_max_pool{nd}d"

    def adaptive_max_pool_with_indices(input: Tensor, output_size):
        return _adaptive(input, nd, output_size, K.KIND_MAX, True, mx)
    adaptive_max_pool_with_indices.__doc__ = f"(values, int64 indices) of {mx}, as aten::{mx}."
    register(f"{mx}_with_indices", family="pooling", aten=[f"aten::{mx}.default"], **_adaptive_rules(nd, True),
             bound=True, api=(), functional=True)(adaptive_max_pool_with_indices)

    def adaptive_max_pool(input: Tensor, output_size, return_indices=False):
        return _adaptive(input, nd, output_size, K.KIND_MAX, bool(return_indices), mx)
    adaptive_max_pool.__doc__ = (f"torch.nn.functional.{mx}: the largest element of each adaptive window (a NaN "
                                 "wins; of equal values the first), with its input-plane index for return_indices.")
    register(mx, family="pooling", aten=[f"nbx::{mx}"], **_adaptive_rules(nd, None), bound=True, api=(),
             functional=True)(adaptive_max_pool)


for _nd in (1, 2, 3):
    _declare_window_pools(_nd)
    _declare_adaptive_pools(_nd)


# ---- power-average pooling ---------------------------------------------------------------------------
def _lp_parts(nd, kernel_size, stride, ceil_mode):
    """(the avg_pool op, its arguments after the input, the window's element count) as F.lp_pool calls them."""
    op = f"lp_pool{nd}d"
    window = math.prod(_ints(kernel_size, nd, "kernel_size", op))
    return get(f"avg_pool{nd}d"), (kernel_size, stride, 0, bool(ceil_mode)), window


def _declare_lp_pool(nd: int) -> None:
    name = f"lp_pool{nd}d"

    def lp_pool(input: Tensor, norm_type, kernel_size, stride=None, ceil_mode=False):
        avg, args, window = _lp_parts(nd, kernel_size, stride, ceil_mode)
        out = avg.impl(input.pow(norm_type), *args)
        # torch's formula: sign * relu(abs) keeps a negative mean of odd powers negative before the root
        return (get("sign").impl(out) * get("relu").impl(out.abs())).mul(window).pow(1.0 / norm_type)
    lp_pool.__doc__ = (f"torch.nn.functional.{name}: (sum over each window of x^p)^(1/p), as torch composes it "
                       "from average pooling of x^p (no padding; ceil_mode as avg_pool).")

    def meta(a):
        avg, args, _ = _lp_parts(nd, a.kernel_size, a.stride, a.ceil_mode)
        return avg.meta(TensorMeta(tuple(a.input.shape), a.input.dtype), *args)

    def cost(a):
        input = a.input
        avg, args, _ = _lp_parts(nd, a.kernel_size, a.stride, a.ceil_mode)
        powered = TensorMeta(tuple(input.shape), input.dtype)
        out = avg.meta(powered, *args)
        pooled = avg.cost(powered, *args)
        # x^p, then sign, abs, relu, their product, the scaling and the root over the pooled size
        temps = workspace_bytes(nbytes(powered), *(nbytes(out),) * 5)
        return Cost(flops=S.numel(input.shape) + pooled.flops + 6 * S.numel(out.shape),
                    bytes_read=nbytes(input) + pooled.bytes_read + 9 * nbytes(out),
                    bytes_written=nbytes(powered) + pooled.bytes_written + 6 * nbytes(out), workspace=temps)
    register(name, family="pooling", aten=[f"nbx::{name}"], meta=meta, cost=cost, bound=True, api=(),
             functional=True)(lp_pool)


for _nd in (1, 2, 3):
    _declare_lp_pool(_nd)


# ---- samples ---------------------------------------------------------------------------------------

def _pooling_samples(op):
    """The samples of ``<kind>_pool<n>d`` (and its ``_with_indices`` form): an input of one batch and two
    channels, n spatial dims of 5 (a transposed one, a bfloat16 one, an unbatched one), windows of 2 or 3."""
    name = op.name.removesuffix("_with_indices")
    if "_pool" not in name or not name[-2:-1].isdigit():
        return None
    n, kind = int(name[-2]), name.rsplit("_pool", 1)[0]
    if kind not in ("max", "avg", "lp", "adaptive_max", "adaptive_avg"):
        return None
    spatial = (5,) * n
    plain, transposed = operand(1, 2, *spatial), operand(1, 2, *spatial, layout="transposed")
    unbatched, half = operand(2, *spatial), operand(1, 2, *spatial, dtype="bfloat16")
    if kind == "lp":
        return Samples((sample(plain, 2.0, 2), sample(transposed, 1.0, 3, 2), sample(half, 2.0, 2, ceil_mode=True)))
    if kind.startswith("adaptive"):
        return Samples((sample(plain, 2), sample(transposed, (3,) * n), sample(unbatched, 1), sample(half, 4)))
    windows = (sample(plain, 2), sample(transposed, 3, 2, 1), sample(unbatched, 2, 1), sample(half, 3, 2, 0, ceil_mode=True))
    if kind == "max" and not op.name.endswith("_with_indices"):
        windows += (sample(plain, 3, 2, 1, 2), sample(plain, 2, return_indices=True))
    if kind == "avg":
        windows += (sample(plain, 3, 2, 1, count_include_pad=False),)
    return Samples(windows)


family_samples("pooling", _pooling_samples)
