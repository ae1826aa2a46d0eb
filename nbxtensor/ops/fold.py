"""Sliding blocks: ``unfold`` (im2col) and ``fold`` (col2im) as torch.nn.functional has them, over ATen's
``im2col`` / ``col2im`` with their checks; 3-d (unbatched) unfold inputs and 2-d fold inputs are seen
with a unit batch. One launch of ``kernels/fold.py`` per call, planned per layout; inputs are read in
place in any strides, outputs are contiguous."""
from __future__ import annotations

from .. import shape as S
from ..allocation import fresh_tensor_maker
from ..dtypes import get_dtype
from ..kernels import fold as K
from ..launch import cdiv
from ..tensor import Tensor
from .plans import PlanCache, PlannedLaunch, Slot, key_argument, layout_key
from ..lowering import conversion_flags, load_format, needs_index_64
from .reductions import kernel_facts
from .registry import Cost, TensorMeta, family_samples, nbytes, register
from .samples import Samples, by_name, operand, sample

_F32 = get_dtype("float32")
_F64 = get_dtype("float64")


def _pair(value, what: str) -> tuple:
    value = (int(value),) * 2 if isinstance(value, int) else tuple(int(v) for v in value)
    if len(value) == 1:
        value = value * 2
    if len(value) != 2:
        raise RuntimeError(f"It is expected {what} equals to 2, but got size {len(value)}")
    return value


def _geometry(kernel_size, dilation, padding, stride):
    """(kernel, dilation, padding, stride) pairs, checked as ATen's im2col/col2im shape checks do."""
    k, d, p, s = (_pair(kernel_size, "kernel_size"), _pair(dilation, "dilation"), _pair(padding, "padding"),
                  _pair(stride, "stride"))
    if min(k) <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got kernel_height: {k[0]} kernel_width: "
                           f"{k[1]}")
    if min(s) <= 0:
        raise RuntimeError(f"stride should be greater than zero, but got stride_height: {s[0]} stride_width: {s[1]}")
    if min(d) <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got dilation_height: {d[0]} dilation_width: "
                           f"{d[1]}")
    if min(p) < 0:
        raise RuntimeError(f"padding should be non-negative, but got pad_height: {p[0]} pad_width: {p[1]}")
    return k, d, p, s


def _blocks(size, k, d, p, s) -> tuple:
    return tuple((size[i] + 2 * p[i] - (d[i] * (k[i] - 1) + 1)) // s[i] + 1 for i in range(2))


def _check_float(dt, op: str, takes_bool: bool = False) -> None:
    if (not dt.is_floating_point or dt.storage_only) and not (takes_bool and dt.name == "bool"):
        raise NotImplementedError(f"\"{op}\" not implemented for '{dt.name}'")


def _im2col_meta(input, kernel_size, dilation, padding, stride):
    k, d, p, s = _geometry(kernel_size, dilation, padding, stride)
    shape = tuple(input.shape)
    if len(shape) not in (3, 4) or any(v == 0 for v in shape[len(shape) - 3:]):
        raise RuntimeError("Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and other non-zero "
                           f"dimensions for input, but got: {list(shape)}")
    blocks = _blocks(shape[-2:], k, d, p, s)
    if min(blocks) < 1:
        raise RuntimeError(f"Given input with spatial size ({shape[-2]}, {shape[-1]}), kernel_size=({k[0]}, {k[1]}), "
                           f"dilation=({d[0]}, {d[1]}), padding=({p[0]}, {p[1]}), calculated shape of the array of "
                           f"sliding blocks as ({blocks[0]}, {blocks[1]}), but its components must be at least one.")
    # a copy of elements: torch's im2col takes bools too (not integers)
    _check_float(input.dtype, "im2col", takes_bool=True)
    return TensorMeta((*shape[:-3], shape[-3] * k[0] * k[1], blocks[0] * blocks[1]), input.dtype)


def _col2im_meta(input, output_size, kernel_size, dilation, padding, stride):
    size = _pair(output_size, "output_size")
    k, d, p, s = _geometry(kernel_size, dilation, padding, stride)
    shape = tuple(input.shape)
    if len(shape) not in (2, 3) or any(v == 0 for v in shape[len(shape) - 2:]):
        raise RuntimeError("Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero "
                           f"dimensions for input, but got: {list(shape)}")
    rows, length = shape[-2:]
    if rows % (k[0] * k[1]):
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the product of kernel_size, but "
                           f"got input.size(1)={rows} and kernel_size=({k[0]}, {k[1]}).")
    blocks = _blocks(size, k, d, p, s)
    if blocks[0] * blocks[1] != length or min(blocks) < 1:
        raise RuntimeError(f"Given output_size=({size[0]}, {size[1]}), kernel_size=({k[0]}, {k[1]}), dilation=({d[0]}, "
                           f"{d[1]}), padding=({p[0]}, {p[1]}), stride=({s[0]}, {s[1]}), expected size of input's "
                           f"dimension 2 to match the calculated number of sliding blocks {blocks[0]} * {blocks[1]} = "
                           f"{blocks[0] * blocks[1]}, but got input.size(2)={length}.")
    _check_float(input.dtype, "col2im")
    return TensorMeta((*shape[:-2], rows // (k[0] * k[1]), *size), input.dtype)


_plans = PlanCache()


def _im2col_plan(x, kernel_size, dilation, padding, stride):
    meta = _im2col_meta(x, kernel_size, dilation, padding, stride)
    k, d, p, s = _geometry(kernel_size, dilation, padding, stride)
    dev = x.device
    make_out = fresh_tensor_maker(meta.shape, x.dtype, dev)
    total = S.numel(meta.shape)
    if total == 0:
        return lambda x: make_out()
    *_, c, h, w = tuple(x.shape)
    strides = tuple(x.stride())
    batch_stride = strides[0] if len(strides) == 4 else 0
    ow = _blocks((h, w), k, d, p, s)[1]
    block = kernel_facts(dev)["elementwise_block"]
    launch = PlannedLaunch(
        K.im2col, (cdiv(total, block),),
        [Slot("src"), Slot("out"), total, c, h, w, ow, meta.shape[-1], *k, *s, *p, *d, batch_stride, *strides[-3:]],
        dict(INDEX_64=needs_index_64(x, count=total), BLOCK=block, num_warps=4))

    def execute(x):
        out = make_out()
        launch(dev, {"src": x, "out": out})
        return out
    return execute


def _col2im_plan(x, output_size, kernel_size, dilation, padding, stride):
    meta = _col2im_meta(x, output_size, kernel_size, dilation, padding, stride)
    k, d, p, s = _geometry(kernel_size, dilation, padding, stride)
    dt, dev = x.dtype, x.device
    make_out = fresh_tensor_maker(meta.shape, dt, dev)
    total = S.numel(meta.shape)
    if total == 0:
        return lambda x: make_out()
    size = meta.shape[-2:]
    strides = tuple(x.stride())
    batch_stride = strides[0] if len(strides) == 3 else 0
    compute = _F64 if dt is _F64 else _F32
    flags = conversion_flags(compute, dt, dev)
    block = kernel_facts(dev)["elementwise_block"]
    launch = PlannedLaunch(
        K.col2im, (cdiv(total, block),),
        [Slot("src"), Slot("out"), total, meta.shape[-3], *size, *_blocks(size, k, d, p, s), *s, *p, *d,
         batch_stride, *strides[-2:]],
        dict(KH=k[0], KW=k[1], COMPUTE=compute.triton, SRC_FORMAT=load_format(dt), DST_FORMAT=flags["DST_FORMAT"],
             VIA_F32=flags["VIA_F32"], INDEX_64=needs_index_64(x, count=total), BLOCK=block, num_warps=4))

    def execute(x):
        out = make_out()
        launch(dev, {"src": x, "out": out})
        return out
    return execute


def _im2col_cost(input, kernel_size, dilation, padding, stride):
    out = _im2col_meta(input, kernel_size, dilation, padding, stride)
    return Cost(bytes_read=nbytes(out), bytes_written=nbytes(out))


def _col2im_cost(input, output_size, kernel_size, dilation, padding, stride):
    out = _col2im_meta(input, output_size, kernel_size, dilation, padding, stride)
    return Cost(flops=S.numel(input.shape), bytes_read=nbytes(input), bytes_written=nbytes(out))


# the rules of bound arguments of im2col and unfold, and of col2im and fold, which take the same parameters
_IM2COL_RULES = {"meta": lambda a: _im2col_meta(a.input, a.kernel_size, a.dilation, a.padding, a.stride),
                 "cost": lambda a: _im2col_cost(a.input, a.kernel_size, a.dilation, a.padding, a.stride), "bound": True}
_COL2IM_RULES = {
    "meta": lambda a: _col2im_meta(a.input, a.output_size, a.kernel_size, a.dilation, a.padding, a.stride),
    "cost": lambda a: _col2im_cost(a.input, a.output_size, a.kernel_size, a.dilation, a.padding, a.stride),
    "bound": True}


@register("im2col", family="resample", aten=["aten::im2col.default"], api=(), **_IM2COL_RULES)
def im2col(input: Tensor, kernel_size, dilation, padding, stride) -> Tensor:
    """aten::im2col: (N, C, H, W) -> (N, C * KH * KW, L), column l holding block l's elements (c, kh, kw)."""
    key = ("im2col", layout_key(input), *(key_argument(v) for v in (kernel_size, dilation, padding, stride)))
    return _plans.get(key, lambda: _im2col_plan(input, kernel_size, dilation, padding, stride))(input)


@register("col2im", family="resample", aten=["aten::col2im.default"], api=(), **_COL2IM_RULES)
def col2im(input: Tensor, output_size, kernel_size, dilation, padding, stride) -> Tensor:
    """aten::col2im: (N, C * KH * KW, L) -> (N, C, H, W), each block's column summed into its place."""
    key = ("col2im", layout_key(input),
           *(key_argument(v) for v in (output_size, kernel_size, dilation, padding, stride)))
    return _plans.get(key, lambda: _col2im_plan(input, output_size, kernel_size, dilation, padding, stride))(input)


@register("unfold_blocks", family="resample", aten=["nbx::unfold_blocks"],
          api=(), functional=("unfold",), **_IM2COL_RULES)
def unfold_blocks(input: Tensor, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """torch.nn.functional.unfold: the sliding blocks of a (N, C, H, W) or (C, H, W) input as columns."""
    return im2col.impl(input, kernel_size, dilation, padding, stride)


@register("fold", family="resample", functional=True, aten=["nbx::fold"],
          api=(), **_COL2IM_RULES)
def fold(input: Tensor, output_size, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """torch.nn.functional.fold: columns of sliding blocks summed into an (N, C, *output_size) tensor."""
    return col2im.impl(input, output_size, kernel_size, dilation, padding, stride)


# ---- samples ---------------------------------------------------------------------------------------

_SAMPLES = {
    "im2col": Samples((sample(operand(1, 2, 4, 4), (2, 2), (1, 1), (0, 0), (1, 1)),
                       sample(operand(1, 1, 5, 3), (3, 2), (1, 1), (1, 0), (2, 1)))),
    "col2im": Samples((sample(operand(1, 8, 9), (4, 4), (2, 2), (1, 1), (0, 0), (1, 1)),
                       sample(operand(1, 6, 6), (5, 3), (3, 2), (1, 1), (1, 0), (2, 1)))),
    "unfold_blocks": Samples((sample(operand(1, 2, 4, 4), 2), sample(operand(2, 5, 3), (3, 2), 1, (1, 0), (2, 1)))),
    "fold": Samples((sample(operand(1, 8, 9), (4, 4), 2), sample(operand(6, 6), (5, 3), (3, 2), 1, (1, 0), (2, 1)))),
}
family_samples("resample", by_name(_SAMPLES))
