"""Sampling at grid points: ``grid_sample`` (bilinear, nearest, bicubic; zeros, border and reflection
padding; 4-d and 5-d as torch has them) over ATen's ``grid_sampler_2d`` / ``_3d``, and ``affine_grid``
over ``affine_grid_generator``. One launch of ``kernels/grid.py`` per call, planned per layout; inputs and
grids are read in place in any strides, outputs are contiguous as ATen makes them."""
from __future__ import annotations

import warnings

from .. import shape as S
from ..allocation import fresh_tensor_maker
from ..dtypes import get_dtype
from ..kernels import grid as K
from ..launch import cdiv
from ..tensor import Tensor
from .plans import PlanCache, PlannedLaunch, Slot, layout_key
from ..lowering import conversion_flags, load_format, needs_index_64
from .reductions import kernel_facts
from .registry import Cost, TensorMeta, family_samples, get, nbytes, register
from .samples import Samples, by_name, operand, sample

_F32 = get_dtype("float32")
_F64 = get_dtype("float64")
_MODES = {"bilinear": K.MODE_BILINEAR.value, "nearest": K.MODE_NEAREST.value, "bicubic": K.MODE_BICUBIC.value}
_PADDINGS = {"zeros": K.PADDING_ZEROS.value, "border": K.PADDING_BORDER.value,
             "reflection": K.PADDING_REFLECTION.value}
_TAPS = {K.MODE_BILINEAR.value: 2, K.MODE_NEAREST.value: 1, K.MODE_BICUBIC.value: 4}


def _compute_dtype(dt):
    return _F64 if dt is _F64 else _F32


def _check_float(dt, op: str) -> None:
    if not dt.is_floating_point or dt.storage_only:
        raise NotImplementedError(f"\"{op}\" not implemented for '{dt.name}'")


def _grid_meta(input, grid, interpolation_mode, padding_mode, align_corners, nd=None):
    """ATen's grid_sampler checks (check_grid_sampler_common, _2d, _3d) and the output's meta."""
    shape, gshape = tuple(input.shape), tuple(grid.shape)
    if input.dtype is not grid.dtype:
        raise RuntimeError(f"grid_sampler(): expected input and grid to have same dtype, but input has "
                           f"{input.dtype.name} and grid has {grid.dtype.name}")
    if len(shape) != len(gshape) or len(shape) not in (4, 5):
        raise RuntimeError(f"grid_sampler(): expected 4D or 5D input and grid with same number of dimensions, but "
                           f"got input with sizes {list(shape)} and grid with sizes {list(gshape)}")
    if shape[0] != gshape[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, but got input with "
                           f"sizes {list(shape)} and grid with sizes {list(gshape)}")
    if gshape[-1] != len(shape) - 2:
        raise RuntimeError(f"grid_sampler(): expected grid to have size {len(shape) - 2} in last dimension, but got "
                           f"grid with sizes {list(gshape)}")
    for d in range(2, len(shape)):
        if shape[d] == 0:
            raise RuntimeError(f"grid_sampler(): expected input to have non-empty spatial dimensions, but input has "
                               f"sizes {list(shape)} with dimension {d} being empty")
    if nd is not None and len(shape) != nd + 2:
        raise RuntimeError(f"grid_sampler(): expected {nd + 2}D input and grid with same number of dimensions, but "
                           f"got input with sizes {list(shape)} and grid with sizes {list(gshape)}")
    if int(interpolation_mode) not in _TAPS:
        raise RuntimeError(f"grid_sampler(): unknown interpolation mode {interpolation_mode}")
    if int(padding_mode) not in _PADDINGS.values():
        raise RuntimeError(f"grid_sampler(): unknown padding mode {padding_mode}")
    if len(shape) == 5 and int(interpolation_mode) == K.MODE_BICUBIC.value:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    return TensorMeta((shape[0], shape[1], *gshape[1:-1]), input.dtype)


def _grid_cost(input, grid, interpolation_mode, padding_mode, align_corners, nd=None):
    out = _grid_meta(input, grid, interpolation_mode, padding_mode, align_corners, nd)
    taps = _TAPS[int(interpolation_mode)] ** (len(out.shape) - 2)
    return Cost(flops=2 * taps * S.numel(out.shape), bytes_read=nbytes(input) + nbytes(grid),
                bytes_written=nbytes(out))


_plans = PlanCache()


def _grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners, nd=None) -> Tensor:
    key = (layout_key(input), layout_key(grid), int(interpolation_mode), int(padding_mode), bool(align_corners), nd)
    return _plans.get(key, lambda: _grid_plan(input, grid, int(interpolation_mode), int(padding_mode),
                                              bool(align_corners), nd))(input, grid)


def _grid_plan(x, grid, mode, padding, align, nd):
    meta = _grid_meta(x, grid, mode, padding, align, nd)
    dt, dev = x.dtype, x.device
    _check_float(dt, f"grid_sampler_{len(x.shape) - 2}d")
    make_out = fresh_tensor_maker(meta.shape, dt, dev)
    total = S.numel(meta.shape)
    if total == 0:
        return lambda x, grid: make_out()
    is_3d = len(x.shape) == 5
    spatial_in = tuple(x.shape)[2:] if is_3d else (1, *tuple(x.shape)[2:])
    spatial_out = meta.shape[2:] if is_3d else (1, *meta.shape[2:])
    s = tuple(x.stride())
    in_strides = s if is_3d else (s[0], s[1], 0, s[2], s[3])
    g = tuple(grid.stride())
    grid_strides = g if is_3d else (g[0], 0, g[1], g[2], g[3])
    compute = _compute_dtype(dt)
    flags = conversion_flags(compute, dt, dev)
    block = kernel_facts(dev)["elementwise_block"]
    launch = PlannedLaunch(
        K.grid_sample, (cdiv(total, block),),
        [Slot("src"), Slot("grid"), Slot("out"), total, meta.shape[1], *spatial_in, *spatial_out, *in_strides,
         *grid_strides],
        dict(MODE=mode, PADDING=padding, ALIGN=align, IS_3D=is_3d, COMPUTE=compute.triton, SRC_FORMAT=load_format(dt),
             DST_FORMAT=flags["DST_FORMAT"], VIA_F32=flags["VIA_F32"],
             INDEX_64=needs_index_64(x, grid, count=total), BLOCK=block, num_warps=4))

    def execute(x, grid):
        out = make_out()
        launch(dev, {"src": x, "grid": grid, "out": out})
        return out
    return execute


def _declare_grid_sampler(name: str, nd) -> None:
    def sampler(input: Tensor, grid: Tensor, interpolation_mode: int, padding_mode: int, align_corners: bool):
        return _grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners, nd)
    sampler.__doc__ = (f"aten::{name}: ``input`` sampled at ``grid``'s normalised points; interpolation_mode 0 "
                       "bilinear, 1 nearest, 2 bicubic; padding_mode 0 zeros, 1 border, 2 reflection.")
    def codes(a):
        return a.input, a.grid, a.interpolation_mode, a.padding_mode, a.align_corners, nd
    register(name, family="resample", aten=[f"aten::{name}.default"], meta=lambda a: _grid_meta(*codes(a)),
             cost=lambda a: _grid_cost(*codes(a)), bound=True, api=(name,))(sampler)


for _name, _nd in (("grid_sampler", None), ("grid_sampler_2d", 2), ("grid_sampler_3d", 3)):
    _declare_grid_sampler(_name, _nd)


def _sample_codes(mode, padding_mode, align_corners):
    if mode not in _MODES:
        raise ValueError("nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', but "
                         f"got: '{mode}'")
    if padding_mode not in _PADDINGS:
        raise ValueError("nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: '{padding_mode}'")
    if align_corners is None:
        warnings.warn("Default grid_sample and affine_grid behavior has changed to align_corners=False since 1.3.0. "
                      "Please specify align_corners=True if the old behavior is desired. See the documentation of "
                      "grid_sample for details.", UserWarning, stacklevel=3)
        align_corners = False
    return _MODES[mode], _PADDINGS[padding_mode], bool(align_corners)


@register("grid_sample", family="resample", functional=True, aten=["nbx::grid_sample"],
          meta=lambda a: _grid_meta(a.input, a.grid, *_sample_codes(a.mode, a.padding_mode, False)),
          cost=lambda a: _grid_cost(a.input, a.grid, *_sample_codes(a.mode, a.padding_mode, False)), bound=True,
          api=())
def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear", padding_mode: str = "zeros",
                align_corners=None) -> Tensor:
    """torch.nn.functional.grid_sample: (N, C, H, W) sampled at the (N, H', W', 2) grid's (x, y) points
    in [-1, 1] (or (N, C, D, H, W) at (N, D', H', W', 3) points); bicubic is 4-d only."""
    return _grid_sampler(input, grid, *_sample_codes(mode, padding_mode, align_corners))


# ---- affine grids -------------------------------------------------------------------------------------
def _affine_meta(theta, size, align_corners):
    size = tuple(int(s) for s in size)
    tshape = tuple(theta.shape)
    if len(size) not in (4, 5):
        raise NotImplementedError("affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
                                  f"respectively. Got size {size}.")
    nd = len(size) - 2
    if len(tshape) != 3 or tshape[1:] != (nd, nd + 1):
        raise RuntimeError(f"affine_grid_generator(): expected a batch of {nd}D affine matrices of shape "
                           f"Nx{nd}x{nd + 1} for size {size}, got {list(tshape)}")
    if tshape[0] != size[0]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: [{size[0]}, {nd + 1}] "
                           f"but got: [{tshape[0]}, {nd + 1}].")
    _check_float(theta.dtype, "affine_grid_generator")
    return TensorMeta((size[0], *size[2:], nd), theta.dtype)


def _affine_cost(theta, size, align_corners):
    out = _affine_meta(theta, size, align_corners)
    return Cost(flops=2 * (out.shape[-1] + 1) * S.numel(out.shape), bytes_read=nbytes(theta),
                bytes_written=nbytes(out))


def _affine_plan(theta, size, align):
    meta = _affine_meta(theta, size, align)
    dt, dev = theta.dtype, theta.device
    make_out = fresh_tensor_maker(meta.shape, dt, dev)
    total = S.numel(meta.shape)
    if total == 0:
        return lambda theta: make_out()
    is_3d = len(size) == 5
    d, h, w = tuple(size[2:]) if is_3d else (1, *size[2:])
    compute = _compute_dtype(dt)
    flags = conversion_flags(compute, dt, dev)
    block = kernel_facts(dev)["elementwise_block"]
    launch = PlannedLaunch(
        K.affine_grid, (cdiv(total, block),), [Slot("theta"), Slot("out"), total, d, h, w, *theta.stride()],
        dict(IS_3D=is_3d, ALIGN=align, COMPUTE=compute.triton, SRC_FORMAT=load_format(dt),
             DST_FORMAT=flags["DST_FORMAT"], VIA_F32=flags["VIA_F32"], INDEX_64=needs_index_64(count=total), BLOCK=block,
             num_warps=4))

    def execute(theta):
        out = make_out()
        launch(dev, {"theta": theta, "out": out})
        return out
    return execute


@register("affine_grid_generator", family="resample", aten=["aten::affine_grid_generator.default"],
          meta=lambda a: _affine_meta(a.theta, a.size, a.align_corners),
          cost=lambda a: _affine_cost(a.theta, a.size, a.align_corners), bound=True, api=())
def affine_grid_generator(theta: Tensor, size, align_corners: bool) -> Tensor:
    """aten::affine_grid_generator: the (N, H, W, 2) (or (N, D, H, W, 3)) grid of theta applied to the
    base grid of normalised pixel centres of ``size``."""
    size = tuple(int(s) for s in size)
    key = (layout_key(theta), size, bool(align_corners))
    return _plans.get(key, lambda: _affine_plan(theta, size, bool(align_corners)))(theta)


def _affine_checks(theta, size, align_corners):
    """F.affine_grid's own checks, before ATen's."""
    size = tuple(int(s) for s in size)
    if not theta.dtype.is_floating_point:
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype.name}")
    tshape = tuple(theta.shape)
    if len(size) == 4:
        if len(tshape) != 3 or tshape[-2:] != (2, 3):
            raise ValueError(f"Expected a batch of 2D affine matrices of shape Nx2x3 for size {size}. Got "
                             f"{list(tshape)}.")
    elif len(size) == 5:
        if len(tshape) != 3 or tshape[-2:] != (3, 4):
            raise ValueError(f"Expected a batch of 3D affine matrices of shape Nx3x4 for size {size}. Got "
                             f"{list(tshape)}.")
    else:
        raise NotImplementedError("affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
                                  f"respectively. Got size {size}.")
    if min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    if align_corners is None:
        warnings.warn("Default grid_sample and affine_grid behavior has changed to align_corners=False since 1.3.0. "
                      "Please specify align_corners=True if the old behavior is desired. See the documentation of "
                      "grid_sample for details.", UserWarning, stacklevel=3)
    return size, bool(align_corners)


@register("affine_grid", family="resample", functional=True, aten=["nbx::affine_grid"],
          meta=lambda a: _affine_meta(a.theta, *_affine_checks(a.theta, a.size, False)),
          cost=lambda a: _affine_cost(a.theta, *_affine_checks(a.theta, a.size, False)), bound=True, api=())
def affine_grid(theta: Tensor, size, align_corners=None) -> Tensor:
    """torch.nn.functional.affine_grid: the sampling grid of a batch of affine matrices theta (N, 2, 3)
    for an output of ``size`` (N, C, H, W), or (N, 3, 4) for (N, C, D, H, W)."""
    return get("affine_grid_generator").impl(theta, *_affine_checks(theta, size, align_corners))


# ---- samples ---------------------------------------------------------------------------------------

def _grid(*shape):
    return operand(*shape, values="domain", domain=(-1.1, 1.1))  # a little outside: the padding modes show


_SAMPLES = {
    "grid_sampler": Samples((sample(operand(1, 2, 3, 4), _grid(1, 2, 3, 2), 0, 0, False),
                             sample(operand(1, 1, 2, 3, 2), _grid(1, 2, 2, 2, 3), 1, 1, True))),
    "grid_sampler_2d": Samples((sample(operand(1, 2, 3, 4), _grid(1, 2, 3, 2), 0, 0, False),
                                sample(operand(2, 1, 3, 3), _grid(2, 2, 2, 2), 1, 2, True),
                                sample(operand(1, 1, 4, 4), _grid(1, 2, 2, 2), 2, 1, False))),
    "grid_sampler_3d": Samples((sample(operand(1, 1, 2, 3, 2), _grid(1, 2, 2, 2, 3), 0, 0, False),
                                sample(operand(1, 2, 2, 2, 2), _grid(1, 1, 2, 2, 3), 1, 1, True))),
    "grid_sample": Samples((sample(operand(1, 2, 3, 4), _grid(1, 2, 3, 2)),
                            sample(operand(1, 1, 3, 3), _grid(1, 2, 2, 2), "nearest", "border", True),
                            sample(operand(1, 1, 4, 4), _grid(1, 2, 2, 2), "bicubic", "reflection", False))),
    "affine_grid_generator": Samples((sample(operand(2, 2, 3), (2, 1, 3, 4), False),
                                      sample(operand(1, 3, 4), (1, 1, 2, 2, 3), True))),
    "affine_grid": Samples((sample(operand(2, 2, 3), (2, 1, 3, 4)), sample(operand(1, 3, 4), (1, 1, 2, 2, 3), True))),
}
family_samples("resample", by_name(_SAMPLES))
