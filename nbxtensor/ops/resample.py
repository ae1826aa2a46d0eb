"""Resampling: ``interpolate`` and the ``upsample_*`` ops torch dispatches it to (nearest, nearest-exact,
linear, bilinear, bicubic, trilinear; area is adaptive average pooling), and ``pixel_shuffle`` /
``pixel_unshuffle``. Source coordinates follow ATen's arithmetic in float32: the scale of a dim is
1/scale_factor where the caller gave one (and did not ask to recompute it), else input/output, or
(input-1)/(output-1) with align_corners. One launch of ``kernels/resample.py`` per call, planned per
layout; channels-last inputs give channels-last outputs, as ATen suggests."""
from __future__ import annotations

import math

import numpy as np

from .. import shape as S
from ..allocation import fresh_tensor_maker, new_tensor
from ..dtypes import get_dtype
from ..kernels import resample as K
from ..launch import cdiv
from ..lowering import conversion_flags, load_format, needs_index_64
from ..tensor import Tensor
from .copy import copy_
from .plans import PlanCache, PlannedLaunch, Slot, key_argument, layout_key, one_launch_run
from .pooling import output_tile_plan, tile_block
from .reductions import kernel_facts
from .registry import Cost, TensorMeta, family_samples, get, nbytes, register
from .samples import Samples, by_name, operand, sample

_F32 = get_dtype("float32")
_KERNEL_MODES = {"nearest": K.MODE_NEAREST.value, "nearest-exact": K.MODE_NEAREST_EXACT.value,
                 "linear": K.MODE_LINEAR.value, "cubic": K.MODE_CUBIC.value, "linear-aa": K.MODE_LINEAR_AA.value,
                 "cubic-aa": K.MODE_CUBIC_AA.value}
_TAPS = {K.MODE_NEAREST.value: 1, K.MODE_NEAREST_EXACT.value: 1, K.MODE_LINEAR.value: 2, K.MODE_CUBIC.value: 4,
         K.MODE_LINEAR_AA.value: 2, K.MODE_CUBIC_AA.value: 4}
_ANTIALIASED = (K.MODE_LINEAR_AA.value, K.MODE_CUBIC_AA.value)


def _aa_support(scale: float, taps: int) -> tuple:
    """(support, 1 / filter stretch, most taps) of an antialiased dim (ATen's _compute_index_ranges_weights):
    downsampling by ``scale`` stretches the filter by it."""
    if scale >= 1.0:
        support = _f32(taps * 0.5 * scale)
        return support, _f32(1.0 / scale), math.ceil(support) * 2 + 1
    return taps * 0.5, 1.0, math.ceil(taps * 0.5) * 2 + 1


def _f32(value) -> float:
    return float(np.float32(value))


def _kernel_scale(size_in: int, size_out: int, scale, align_corners: bool) -> float:
    """The float32 scale ATen computes a dim's source coordinates with (area_pixel_compute_scale)."""
    if align_corners:
        return _f32(np.float32(size_in - 1) / np.float32(size_out - 1)) if size_out > 1 else 0.0
    if scale is not None and scale > 0:
        return _f32(1.0 / scale)
    return _f32(np.float32(size_in) / np.float32(size_out))


def _check_sizes(op: str, spatial_in, spatial_out) -> None:
    if any(s <= 0 for s in (*spatial_in, *spatial_out)):
        names = ("D", "H", "W")[3 - len(spatial_in):]
        given = ", ".join(f"{n}: {s}" for n, s in zip(names, spatial_in))
        wanted = ", ".join(f"{n}: {s}" for n, s in zip(names, spatial_out))
        raise RuntimeError(f"Input and output sizes should be greater than 0, but got input ({given}) output ({wanted})")


def _output_sizes(x, nd: int, output_size, scales, op: str) -> tuple:
    shape = tuple(x.shape)
    if len(shape) != nd + 2:
        raise S.ShapeError(f"{op}: expected a {nd + 2}-D input (N, C and {nd} spatial dims), got shape {list(shape)}")
    if output_size is not None:
        sizes = tuple(int(s) for s in output_size)
        if len(sizes) != nd:
            raise RuntimeError(f"{op}: it is expected output_size equals to {nd}, but got size {len(sizes)}")
    else:
        if scales is None or len(scales) != nd or any(s is None for s in scales):
            raise RuntimeError(f"{op}: must specify exactly one of output_size and scale_factors")
        sizes = tuple(int(math.floor(i * float(s))) for i, s in zip(shape[2:], scales))
    _check_sizes(op, shape[2:], sizes)
    return sizes


_plans = PlanCache()


def _resample(x, nd: int, output_size, scales, mode: str, align_corners: bool, op: str) -> Tensor:
    """``x`` (N, C and ``nd`` spatial dims) resampled to ``output_size`` (None: from ``scales``, as the
    .vec overloads do); ``scales`` (per dim, None each where not given) set the source coordinates."""
    return _planned(_resample_key(x, nd, output_size, scales, mode, align_corners, op), x)


def _resample_key(x, nd, output_size, scales, mode, align_corners, op) -> tuple:
    """The key of ``x``'s plan in ``_plans``: its layout, then ``_plan``'s arguments after the input."""
    return (layout_key(x), nd, None if output_size is None else tuple(output_size),
            None if scales is None else tuple(scales), mode, bool(align_corners), op)


def _planned(key, x) -> Tensor:
    """The call of ``x`` through the plan ``key`` names (made the first time, then bound once its launch is)."""
    return _plans.get(key, lambda: _plan(key, x, *key[1:]))(x)


def _plan(key, x, nd, output_size, scales, mode, align_corners, op):
    kernel_mode = _KERNEL_MODES[mode]
    dt = x.dtype
    nearest = kernel_mode in (K.MODE_NEAREST.value, K.MODE_NEAREST_EXACT.value)
    if dt.kind == "bool" or dt.is_complex or dt.storage_only or (not dt.is_floating_point and dt.name != "uint8") or (
            not nearest and not dt.is_floating_point):
        raise NotImplementedError(f"\"{op}\" not implemented for '{dt.name}'")
    sizes = _output_sizes(x, nd, output_size, scales, op)
    per_dim = scales if scales is not None else (None,) * nd
    dev = x.device
    out_shape = (*tuple(x.shape)[:2], *sizes)
    strides = S.channels_last_strides(out_shape) if S.strides_like_channels_last(x.shape, x.stride()) else None
    make_out = fresh_tensor_maker(out_shape, dt, dev, strides)
    total = S.numel(out_shape)
    if total == 0:
        return lambda x: make_out()
    lift = 3 - nd
    spatial_in = (1,) * lift + tuple(x.shape)[2:]
    spatial_out = (1,) * lift + sizes
    kernel_scales = (1.0,) * lift + tuple(
        _kernel_scale(i, o, s, align_corners and not nearest) for i, o, s in zip(spatial_in[lift:], sizes, per_dim))
    in_strides = tuple(x.stride())
    out_strides = strides or S.contiguous_strides(out_shape)
    flags = conversion_flags(_F32, dt, dev)
    facts = kernel_facts(dev)
    block = facts["elementwise_block"]
    if kernel_mode in _ANTIALIASED:
        (sh, sw), taps = kernel_scales[1:], _TAPS[kernel_mode]
        (support_h, inv_h, max_h), (support_w, inv_w, max_w) = _aa_support(sh, taps), _aa_support(sw, taps)
        launch = PlannedLaunch(
            K.resample_aa, (cdiv(total, block),),
            [Slot("src"), Slot("out"), total, out_shape[1], *spatial_in[1:], *spatial_out[1:], *in_strides,
             *out_strides, sh, sw, support_h, support_w, inv_h, inv_w],
            dict(MAX_H=max_h, MAX_W=max_w, CUBIC=kernel_mode == K.MODE_CUBIC_AA.value,
                 CHANNELS_LAST=strides is not None, SRC_FORMAT=load_format(dt), DST_FORMAT=flags["DST_FORMAT"],
                 VIA_F32=flags["VIA_F32"], INDEX_64=needs_index_64(x, count=total), BLOCK=block, num_warps=4))
    else:
        grid, lines, col_blocks, magic, tile = output_tile_plan(tile_block(dev, total), out_shape[0], out_shape[1],
                                                                spatial_out, strides is not None)
        launch = PlannedLaunch(
            K.resample, grid,
            [Slot("src"), Slot("out"), lines, out_shape[1], *spatial_in, *spatial_out, col_blocks, magic,
             in_strides[0], in_strides[1], *(0,) * lift, *in_strides[2:], *kernel_scales],
            dict(MODE=kernel_mode, ALIGN_CORNERS=align_corners and not nearest, RESAMPLE_D=nd == 3,
                 RESAMPLE_H=nd >= 2, RESAMPLE_W=True, CHANNELS_LAST=strides is not None, SRC_FORMAT=load_format(dt),
                 DST_FORMAT=flags["DST_FORMAT"], VIA_F32=flags["VIA_F32"], FLOAT_TO_INT=False,
                 INDEX_64=needs_index_64(x, count=total), **tile, num_warps=4))

    return one_launch_run(_plans, key, dev, launch, "src", [(("out",), make_out)], 0)


def _split_scales(nd, rest):
    """The scales of a call of either overload: .vec passes one sequence (or None) of scale factors, the
    default overload one float (or None) per dim."""
    if len(rest) == 1 and (rest[0] is None or isinstance(rest[0], (list, tuple))):
        return None if rest[0] is None else tuple(rest[0])
    scales = tuple(rest) + (None,) * (nd - len(rest))
    return None if all(s is None for s in scales) else scales


def _resample_rules(nd, kernel_mode) -> dict:
    """``register``'s meta and cost rules (of bound arguments) of an upsample op of ``nd`` spatial dims."""
    def meta(a):
        x = a.input
        sizes = _output_sizes(x, nd, a.output_size, _given_scales(nd, a.scales, a.scale_keywords), "upsample")
        return TensorMeta((*tuple(x.shape)[:2], *sizes), x.dtype)

    def cost(a):
        x, out = a.input, meta(a)
        window = _TAPS[kernel_mode] ** nd
        if kernel_mode in _ANTIALIASED:  # the filter widens with the downsampling ratio
            window = math.prod(_aa_support(i / o, _TAPS[kernel_mode])[2] for i, o in zip(x.shape[2:], out.shape[2:]))
        return Cost(flops=2 * window * S.numel(out.shape), bytes_read=nbytes(x), bytes_written=nbytes(out))
    return {"meta": meta, "cost": cost, "bound": True}


# (ATen base name, interpolate's mode, kernel mode, spatial dims, whether it takes align_corners)
_UPSAMPLE_OPS = [
    ("upsample_nearest1d", "nearest", 1, False), ("upsample_nearest2d", "nearest", 2, False),
    ("upsample_nearest3d", "nearest", 3, False), ("_upsample_nearest_exact1d", "nearest-exact", 1, False),
    ("_upsample_nearest_exact2d", "nearest-exact", 2, False), ("_upsample_nearest_exact3d", "nearest-exact", 3, False),
    ("upsample_linear1d", "linear", 1, True), ("upsample_bilinear2d", "linear", 2, True),
    ("upsample_trilinear3d", "linear", 3, True), ("upsample_bicubic2d", "cubic", 2, True),
    ("_upsample_bilinear2d_aa", "linear-aa", 2, True), ("_upsample_bicubic2d_aa", "cubic-aa", 2, True),
]


# the upsample ops that torch's OpInfos call by their ATen names
_TOP_LEVEL = ("_upsample_bilinear2d_aa",)
# the default overloads' keyword names of their per-dim scales
_SCALE_NAMES = {1: ("scales",), 2: ("scales_h", "scales_w"), 3: ("scales_d", "scales_h", "scales_w")}


def _given_scales(nd: int, positional: tuple, keywords: dict):
    """The scales of a call passing them by position, as .vec's ``scale_factors=`` or as the default
    overload's ``scales_h=`` and so on."""
    unknown = set(keywords) - {"scale_factors", *_SCALE_NAMES[nd]}
    if unknown:
        raise TypeError(f"unexpected keyword arguments: {', '.join(sorted(unknown))}")
    if "scale_factors" in keywords:
        return _split_scales(nd, (keywords["scale_factors"],))
    named = tuple(keywords.get(k) for k in _SCALE_NAMES[nd])
    return _split_scales(nd, positional or (named if any(s is not None for s in named) else (None,)))


def _declare_upsample(name: str, mode: str, nd: int, has_align: bool) -> None:
    op = name.lstrip("_")
    if has_align:
        def upsample(input: Tensor, output_size, align_corners, *scales, **scale_keywords):
            return _resample(input, nd, output_size, _given_scales(nd, scales, scale_keywords), mode, align_corners,
                             op)
    else:
        def upsample(input: Tensor, output_size, *scales, **scale_keywords):
            return _resample(input, nd, output_size, _given_scales(nd, scales, scale_keywords), mode, False, op)
    upsample.__doc__ = (f"aten::{name} (either overload: .vec's scale_factors sequence, or one scale per dim): "
                        f"{mode} resampling of the {nd} spatial dims.")
    register(op, family="resample", aten=[f"aten::{name}.default", f"aten::{name}.vec"],
             api=(name,) if name in _TOP_LEVEL else (), **_resample_rules(nd, _KERNEL_MODES[mode]))(upsample)


for _row in _UPSAMPLE_OPS:
    _declare_upsample(*_row)

_INTERPOLATING = ("linear", "bilinear", "bicubic", "trilinear")
_BY_MODE = {("nearest", 1): "upsample_nearest1d", ("nearest", 2): "upsample_nearest2d",
            ("nearest", 3): "upsample_nearest3d", ("nearest-exact", 1): "upsample_nearest_exact1d",
            ("nearest-exact", 2): "upsample_nearest_exact2d", ("nearest-exact", 3): "upsample_nearest_exact3d",
            ("linear", 1): "upsample_linear1d", ("bilinear", 2): "upsample_bilinear2d",
            ("trilinear", 3): "upsample_trilinear3d", ("bicubic", 2): "upsample_bicubic2d",
            ("area", 1): "adaptive_avg_pool1d", ("area", 2): "adaptive_avg_pool2d",
            ("area", 3): "adaptive_avg_pool3d"}
_NEEDS = {"linear": 3, "bilinear": 4, "bicubic": 4, "trilinear": 5}


def _interpolate_plan(x, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias):
    """(registry op name, output size or None, scale factors or None, align_corners) as F.interpolate
    dispatches, with its checks."""
    nd = len(x.shape) - 2
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: "
                             "linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    spatial = list(x.shape[2:])
    output_size = scale_factors = None
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        if isinstance(size, (list, tuple)):
            if len(size) != nd:
                raise ValueError(f"Input and output must have the same number of spatial dimensions, but got input "
                                 f"with spatial dimensions of {spatial} and output size of {size}. Please provide "
                                 "input tensor in (N, C, d1, d2, ...,dK) format and output size in (o1, o2, ...,oK) "
                                 "format.")
            output_size = [int(s) for s in size]
        else:
            output_size = [int(size)] * nd
    elif scale_factor is not None:
        if isinstance(scale_factor, (list, tuple)):
            if len(scale_factor) != nd:
                raise ValueError(f"Input and scale_factor must have the same number of spatial dimensions, but got "
                                 f"input with spatial dimensions of {spatial} and scale_factor of shape "
                                 f"{scale_factor}. Please provide input tensor in (N, C, d1, d2, ...,dK) format and "
                                 "scale_factor in (s1, s2, ...,sK) format.")
            scale_factors = [float(s) for s in scale_factor]
        else:
            scale_factors = [float(scale_factor)] * nd
    else:
        raise ValueError("either size or scale_factor should be defined")
    if recompute_scale_factor is not None and recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    if mode == "area" and output_size is None:
        recompute_scale_factor = True
    if recompute_scale_factor is not None and recompute_scale_factor:
        output_size = [int(math.floor(float(i) * s)) for i, s in zip(spatial, scale_factors)]
        scale_factors = None
    if antialias and not (mode in ("bilinear", "bicubic") and len(x.shape) == 4):
        raise ValueError("Anti-alias option is restricted to bilinear and bicubic modes and requires a 4-D tensor as "
                         "input")
    if mode in _NEEDS and len(x.shape) != _NEEDS[mode]:
        raise NotImplementedError(f"Got {len(x.shape)}D input, but {mode} mode needs {_NEEDS[mode]}D input")
    name = _BY_MODE.get((mode, nd))
    if name is None:
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {len(x.shape)}D) "
                                  "for the modes: nearest | linear | bilinear | bicubic | trilinear | area | "
                                  f"nearest-exact (got {mode})")
    return f"{name}_aa" if antialias else name, output_size, scale_factors, align_corners


def _call_planned(x, name, output_size, scale_factors, align_corners):
    op = get(name)
    if name.startswith("adaptive"):
        return op, (x, output_size)
    if "linear" in name or "cubic" in name:
        return op, (x, output_size, align_corners, scale_factors)
    return op, (x, output_size, scale_factors)


def _interpolate_call(a) -> tuple:
    """(the op interpolate calls, its arguments) for the bound arguments ``a``."""
    return _call_planned(a.input, *_interpolate_plan(a.input, a.size, a.scale_factor, a.mode, a.align_corners,
                                                     a.recompute_scale_factor, a.antialias))


def _interpolate_meta(a):
    op, call = _interpolate_call(a)
    return op.meta(*call)


def _interpolate_cost(a):
    op, call = _interpolate_call(a)
    return op.cost(*call)


# each upsample op's (mode, spatial dims, whether it takes align_corners), by its registry name
_UPSAMPLE_MODES = {name.lstrip("_"): (mode, nd, has_align) for name, mode, nd, has_align in _UPSAMPLE_OPS}
# interpolate's arguments (with the input's layout) -> the key of the upsample op's plan in ``_plans``
_interpolations = PlanCache()


@register("interpolate", family="resample", aten=["nbx::interpolate"], meta=_interpolate_meta, cost=_interpolate_cost,
          bound=True, api=(), functional=True)
def interpolate(input: Tensor, size=None, scale_factor=None, mode: str = "nearest", align_corners=None,
                recompute_scale_factor=None, antialias: bool = False) -> Tensor:
    """torch.nn.functional.interpolate: the ``upsample_*`` op (or, for 'area', adaptive average pooling)
    that torch dispatches to, with torch's output sizes and source coordinates. A repeated call goes
    straight to its upsample op's plan."""
    try:
        key = (layout_key(input), key_argument(size), key_argument(scale_factor), mode, align_corners,
               recompute_scale_factor, antialias)
        planned = _interpolations.lookup(key)
    except TypeError:  # an argument that does not hash: dispatched alone
        key = planned = None
    if planned is not None:
        return _planned(planned, input)
    name, output_size, scale_factors, align = _interpolate_plan(input, size, scale_factor, mode, align_corners,
                                                                 recompute_scale_factor, antialias)
    op, call = _call_planned(input, name, output_size, scale_factors, align)
    upsampling = _UPSAMPLE_MODES.get(name)
    if key is not None and upsampling is not None:  # 'area' is adaptive pooling, which plans by itself
        kernel_mode, nd, has_align = upsampling
        _interpolations.put(key, _resample_key(input, nd, output_size, _split_scales(nd, (scale_factors,)),
                                               kernel_mode, has_align and align, name))
    return op.impl(*call)


# ---- pixel shuffle ------------------------------------------------------------------------------------
def _shuffle_meta(x, factor, unshuffle: bool):
    op = "pixel_unshuffle" if unshuffle else "pixel_shuffle"
    shape = tuple(x.shape)
    if len(shape) < 3:
        raise S.ShapeError(f"{op} expects input to have at least 3 dimensions, but got input with {len(shape)} "
                           "dimension(s)")
    if factor <= 0:
        raise RuntimeError(f"{op} expects a positive {'downscale' if unshuffle else 'upscale'}_factor, but got "
                           f"{factor}")
    *batch, c, h, w = shape
    if unshuffle:
        if h % factor:
            raise RuntimeError(f"pixel_unshuffle expects height to be divisible by downscale_factor, but "
                               f"input.size(-2)={h} is not divisible by {factor}")
        if w % factor:
            raise RuntimeError(f"pixel_unshuffle expects width to be divisible by downscale_factor, but "
                               f"input.size(-1)={w} is not divisible by {factor}")
        return TensorMeta((*batch, c * factor * factor, h // factor, w // factor), x.dtype)
    if c % (factor * factor):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                           f"upscale_factor, but input.size(-3)={c} is not divisible by {factor * factor}")
    return TensorMeta((*batch, c // (factor * factor), h * factor, w * factor), x.dtype)


def _shuffle_cost(a):
    return Cost(bytes_read=nbytes(a.input), bytes_written=nbytes(a.input))


def _shuffle(x, factor, unshuffle):
    meta = _shuffle_meta(x, factor, unshuffle)
    *batch, c, h, w = tuple(x.shape)
    r, nb = factor, len(batch)
    if unshuffle:  # (.., c, h/r, r, w/r, r) -> (.., c, r, r, h/r, w/r)
        view = x.reshape(*batch, c, h // r, r, w // r, r).permute(*range(nb), nb, nb + 2, nb + 4, nb + 1, nb + 3)
    else:  # (.., c/r², r, r, h, w) -> (.., c/r², h, r, w, r)
        view = x.reshape(*batch, c // (r * r), r, r, h, w).permute(*range(nb), nb, nb + 3, nb + 1, nb + 4, nb + 2)
    out = new_tensor(meta.shape, x.dtype, x.device)
    copy_(out.reshape(view.shape), view)
    return out


@register("pixel_shuffle", family="resample", functional=True, aten=["aten::pixel_shuffle.default"],
          meta=lambda a: _shuffle_meta(a.input, a.upscale_factor, False), cost=_shuffle_cost, bound=True,
          api=("pixel_shuffle",))
def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """(*, C*r², H, W) -> (*, C, H*r, W*r): each group of r² channels becomes an r x r block."""
    return _shuffle(input, int(upscale_factor), False)


@register("pixel_unshuffle", family="resample", functional=True, aten=["aten::pixel_unshuffle.default"],
          meta=lambda a: _shuffle_meta(a.input, a.downscale_factor, True), cost=_shuffle_cost, bound=True,
          api=("pixel_unshuffle",))
def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """(*, C, H*r, W*r) -> (*, C*r², H, W), the inverse of pixel_shuffle."""
    return _shuffle(input, int(downscale_factor), True)


# ---- samples ---------------------------------------------------------------------------------------

def _upsample_samples(op):
    """The samples of ``upsample_<mode><n>d``: sizes given, and scales given in ATen's order."""
    if not op.name.startswith("upsample_") or not op.name.rstrip("a_")[-2:-1].isdigit():
        return None
    n = int(op.name.rstrip("a_")[-2])
    linear = any(mode in op.name for mode in ("linear", "cubic"))
    corners = (False,) if linear else ()
    spatial = (2, 3, 2)[:n]
    return Samples((sample(operand(1, 2, *spatial), (4, 5, 3)[:n], *corners),
                    sample(operand(1, 2, *spatial, layout="transposed"), (3,) * n, *((True,) if linear else ())),
                    sample(operand(2, 1, *spatial, dtype="bfloat16"), (5, 4, 4)[:n], *corners)))


_SAMPLES = {
    "interpolate": Samples((sample(operand(1, 2, 3), scale_factor=2), sample(operand(1, 1, 2, 3), size=(3, 5), mode="bilinear"),
                            sample(operand(1, 1, 2, 3), size=(4, 4), mode="bicubic", align_corners=True),
                            sample(operand(1, 2, 2, 2, 2), scale_factor=1.5, mode="trilinear"),
                            sample(operand(1, 1, 4, 4), size=(2, 3), mode="area"),
                            sample(operand(1, 1, 3, 3), size=(5, 2), mode="nearest-exact"),
                            sample(operand(1, 1, 4, 4), size=(2, 2), mode="bilinear", antialias=True))),
    "pixel_shuffle": Samples((sample(operand(1, 4, 2, 3), 2), sample(operand(8, 1, 1), 2), sample(operand(0, 4, 1, 1), 2))),
    "pixel_unshuffle": Samples((sample(operand(1, 1, 4, 2), 2), sample(operand(2, 2, 2), 2))),
}
family_samples("resample", _upsample_samples)
family_samples("resample", by_name(_SAMPLES))
