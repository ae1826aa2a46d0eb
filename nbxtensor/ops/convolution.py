"""Convolution: conv1d/2d/3d, their transposed forms and ``aten::convolution``, as torch spells them.

Every form runs as 3-d (unit dims for 1-d and 2-d), by one of three routes: a 1x1, stride-1, single-group
convolution is the registry's matrix product on views of its operands (unless it forms too few output tiles
for the device, below); a group of few channels (depthwise, small multipliers) runs ``kernels/conv.py``'s
direct kernel on the vector units (by output planes, where an NCHW input's rows are read in runs; a
depthwise convolution of a channels-last input also by tiles of a plane times a channel block, its
channels loaded as vectors); the rest its implicit GEMM, whose tile settings are tuned under the launch
key the op declares. A convolution whose output forms fewer tiles than ``split_below_programs``
(twice the device class's multiprocessors) also gets candidates with smaller tiles and ones that split the
reduction among programs, their float32 partials (a workspace the cost rule declares) added in a fixed order
by a second launch. A plan binds its launches once per layout, so a repeated call allocates its output and
launches. Inputs are read in place through their strides (NCHW or channels-last), and the output is
channels-last when the input or weight is (torch's rule). Accumulation is float32; float32 operands
multiply in true float32 unless TF32 is opted into (``set_float32_matmul_precision``). float64 operands sum in
float64: a 1x1 convolution through the product (its float64 form), any other on the direct kernel.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

from .. import shape as S
from .. import tuning
from ..allocation import Workspace, fresh_tensor_maker, new_tensor, scratch_scope, workspace_bytes
from ..device import backend_for, resolve
from ..dtypes import get_dtype
from ..kernels import conv as K
from ..kernels import norm_epilogue as E
from ..launch import cdiv, next_pow2
from ..lowering import conversion_flags, float_format, needs_index_64
from ..tensor import Tensor
from .matmul_gemv import ProductNorm
from .matmul_plans import _dot_precision, _product_workspace, planned_product, product_keys
from .plans import PlanCache, PlannedLaunch, Slot, key_argument, layout_key
from .registry import Cost, TensorMeta, family_samples, nbytes, register
from .samples import Samples, by_name, operand, sample

_FLOATS = ("float32", "float16", "bfloat16", "float64")


def _tuple(op, name, value, dims):
    if isinstance(value, int):
        return (value,) * dims
    value = tuple(value)
    if len(value) == 1:
        return value * dims
    if len(value) != dims:
        raise RuntimeError(f"{op}: expected {name} to be a single integer value or a list of {dims} values to "
                           f"match the convolution dimensions, but got {name}={list(value)}")
    return value


def _geometry(op, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """(dims, stride, padding, dilation, output_padding, output shape) as torch checks and computes them."""
    wr = len(weight.shape)
    if wr < 3 or wr > 5:
        raise RuntimeError(f"{op}: weight should have at least three dimensions and at most five, "
                           f"got {wr}-D weight of size {list(weight.shape)}")
    dims = wr - 2
    if len(input.shape) not in (dims + 1, dims + 2):
        raise RuntimeError(f"{op}: Expected {dims + 1}D (unbatched) or {dims + 2}D (batched) input to {op}, "
                           f"but got input of size: {list(input.shape)}")
    if input.dtype is not weight.dtype or (bias is not None and bias.dtype is not input.dtype):
        raise RuntimeError(f"{op}: Input type ({input.dtype.name}) and weight type ({weight.dtype.name}) should "
                           "be the same" + ("" if bias is None else f", and bias type ({bias.dtype.name})"))
    if input.dtype.name not in _FLOATS:
        raise TypeError(f"{op}: {input.dtype.name} is not supported; convolutions take {', '.join(_FLOATS)}")
    if groups < 1:
        raise RuntimeError(f"{op}: non-positive groups is not supported, got groups={groups}")
    shape = tuple(input.shape) if len(input.shape) == dims + 2 else (1, *input.shape)
    stride = _tuple(op, "stride", stride, dims)
    dilation = _tuple(op, "dilation", dilation, dims)
    output_padding = _tuple(op, "output_padding", output_padding, dims)
    if any(s <= 0 for s in stride):
        raise RuntimeError(f"{op}: non-positive stride is not supported, got stride={list(stride)}")
    if any(d <= 0 for d in dilation):
        raise RuntimeError(f"{op}: dilation should be greater than zero, got dilation={list(dilation)}")
    ks = tuple(weight.shape[2:])
    padding_after = None
    if isinstance(padding, str):
        if padding == "valid":
            padding = (0,) * dims
        elif padding == "same":
            if transposed:
                raise RuntimeError(f"{op}: padding='same' is not supported for transposed convolutions")
            if any(s != 1 for s in stride):
                raise RuntimeError(f"{op}: padding='same' is not supported for strided convolutions")
            # an odd total puts the extra row after the input, as torch does; the kernel reads zeros
            # past the input's end, so only the output size sees the asymmetry
            total = [d * (k - 1) for d, k in zip(dilation, ks)]
            padding = tuple(t // 2 for t in total)
            padding_after = tuple(t - t // 2 for t in total)
        else:
            raise ValueError(f"{op}: Invalid padding string {padding!r}, should be one of {{'valid', 'same'}}")
    padding = _tuple(op, "padding", padding, dims)
    if any(p < 0 for p in padding):
        raise RuntimeError(f"{op}: negative padding is not supported, got padding={list(padding)}")
    if padding_after is None:
        padding_after = padding
    cin = shape[1]
    if transposed:
        if weight.shape[0] != cin:
            raise RuntimeError(f"{op}: Given transposed=1, weight of size {list(weight.shape)}, expected input"
                               f"{list(shape)} to have {weight.shape[0]} channels, but got {cin} channels instead")
        if cin % groups:
            raise RuntimeError(f"{op}: in_channels ({cin}) must be divisible by groups ({groups})")
        cout = weight.shape[1] * groups
        if any(op_ >= max(s, d) for op_, s, d in zip(output_padding, stride, dilation)):
            raise RuntimeError(f"{op}: output padding must be smaller than either stride or dilation, got "
                               f"output_padding={list(output_padding)}, stride={list(stride)}, "
                               f"dilation={list(dilation)}")
        spatial = tuple((i - 1) * s - 2 * p + d * (k - 1) + op_ + 1
                        for i, s, p, d, k, op_ in zip(shape[2:], stride, padding, dilation, ks, output_padding))
    else:
        if weight.shape[0] % groups:
            raise RuntimeError(f"{op}: Given groups={groups}, expected weight to be divisible by {groups} at "
                               f"dimension 0, but got weight of size {list(weight.shape)} instead")
        if weight.shape[1] * groups != cin:
            raise RuntimeError(f"{op}: Given groups={groups}, weight of size {list(weight.shape)}, expected input"
                               f"{list(shape)} to have {weight.shape[1] * groups} channels, but got {cin} "
                               "channels instead")
        cout = weight.shape[0]
        padded = tuple(i + p + q for i, p, q in zip(shape[2:], padding, padding_after))
        eff = tuple(d * (k - 1) + 1 for d, k in zip(dilation, ks))
        if any(e > q for e, q in zip(eff, padded)):
            raise RuntimeError(f"{op}: Calculated padded input size per channel: ({' x '.join(map(str, padded))})."
                               f" Kernel size: ({' x '.join(map(str, eff))}). Kernel size can't be greater than "
                               "actual input size")
        spatial = tuple((q - e) // s + 1 for q, e, s in zip(padded, eff, stride))
    if any(o <= 0 for o in spatial):
        raise RuntimeError(f"{op}: Given input size per channel: ({' x '.join(map(str, shape[2:]))}). Calculated "
                           f"output size per channel: ({' x '.join(map(str, spatial))}). Output size is too small")
    if bias is not None and tuple(bias.shape) != (cout,):
        raise RuntimeError(f"{op}: Given weight of size {list(weight.shape)}, expected bias to be 1-dimensional "
                           f"with {cout} elements, but got bias of size {list(bias.shape)} instead")
    out_shape = (shape[0], cout, *spatial)
    if len(input.shape) == dims + 1:
        out_shape = out_shape[1:]
    return dims, stride, padding, dilation, out_shape


def _conv_result(op, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups) -> TensorMeta:
    out_shape = _geometry(op, input, weight, bias, stride, padding, dilation, transposed, output_padding,
                          groups)[-1]
    return TensorMeta(out_shape, input.dtype)


def _conv_rules(convolution_arguments) -> dict:
    """``register``'s meta and cost rules of a convolution op, of bound arguments:
    ``convolution_arguments(a)`` gives ``_conv_result``'s arguments (op first) from the op's."""
    return {"meta": lambda a: _conv_result(*convolution_arguments(a)),
            "cost": lambda a: _conv_estimate(*convolution_arguments(a)), "bound": True}


def _conv_estimate(op, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups) -> Cost:
    _, stride, padding, _, out_shape = _geometry(op, input, weight, bias, stride, padding, dilation, transposed,
                                                 output_padding, groups)
    out = TensorMeta(out_shape, input.dtype)
    kernel_volume = S.numel(weight.shape[2:])
    if transposed:
        # each input element meets every kernel position of Cout/groups output channels
        flops = 2 * S.numel(input.shape) * weight.shape[1] * kernel_volume
    else:
        flops = 2 * S.numel(out.shape) * weight.shape[1] * kernel_volume
    # a tuned setting may copy a forward convolution's input and weight channels-innermost (STAGE; the weight
    # alone: STAGE_WEIGHT, less) or split the reduction (float32 partials), never both: the most any device's
    # setting takes
    out_elements = S.numel(out.shape)
    cout = out.shape[-len(weight.shape) + 1]  # channels precede the spatial dims, batched or not
    forms = [_workspace_pieces(input.dtype, S.numel(input.shape), S.numel(weight.shape),
                               out_elements // cout if out_elements else 0, cout, staged, staged, splits)
             for staged, splits in ((not transposed, 1), (False, _split_cap(out_elements)))]
    workspace = max(Workspace.bytes_for(pieces) for pieces in forms)
    if not transposed and groups == 1 and kernel_volume == 1 and set(stride) == {1} and not any(padding):
        # the product's route: its own temporaries, in either layout's form (channels-last rows, or the
        # NCHW batch of weight x input matrices)
        batch = out.shape[0] if len(out.shape) == len(weight.shape) else 1
        length = out_elements // (cout * batch) if out_elements else 0
        workspace = max(workspace, _product_workspace(input.dtype, 1, batch * length, weight.shape[1], cout),
                        _product_workspace(input.dtype, batch, cout, weight.shape[1], length))
    return Cost(flops=flops, bytes_read=sum(nbytes(t) for t in (input, weight, bias) if t is not None),
                bytes_written=nbytes(out), workspace=workspace)


def _workspace_pieces(dtype, input_elements, weight_elements, positions, cout, staged_input, staged_weight,
                      splits) -> dict:
    """A plan's temporaries: the staged input and weight where staged, the partials of ``splits`` > 1."""
    pieces = {"x_staged": ((input_elements,), dtype)} if staged_input else {}
    if staged_weight:
        pieces["w_staged"] = ((weight_elements,), dtype)
    if splits > 1:
        pieces["partial"] = ((splits, positions, cout), get_dtype("float32"))
    return pieces


def _as_3d(shape, strides, dims):
    """(shape, strides) of a batched N-d tensor as 5-d, unit dims of stride 0 in front of the spatial ones."""
    pad = 3 - dims
    return (*shape[:2], *(1,) * pad, *shape[2:]), (*strides[:2], *(0,) * pad, *strides[2:])


def conv_output_strides(out_shape, input, weight):
    """Channels-last strides when the input or the weight is channels-last (4-D or 5-D), else contiguous."""
    if len(out_shape) in (4, 5) and (S.strides_like_channels_last(input.shape, input.stride())
                                     or S.strides_like_channels_last(weight.shape, weight.stride())):
        return S.channels_last_strides(out_shape)
    return None


# a group's matrix at most this many (input x output channels) goes to the direct kernel: an MMA tile at
# least 16 wide in K and N would be mostly masked (depthwise, channel multipliers up to 64)
_DIRECT_MAX_GROUP_MATRIX = 64
# loop steps unrolled (kernel positions, times a group's input channels in the direct kernel) up to this
# many, ConvNeXt's 7x7 depthwise window included; beyond, a counted loop keeps compiles short
_UNROLL_MAX_STEPS = 64
# fewer input channels a group than the smallest K tile: K tiles span channels x kernel positions
_FLAT_K_BELOW = 16
# (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps) of the implicit GEMM, timed per launch key; few, since
# a first call compiles each (an unrolled window makes long compiles)
_GEMM_SHAPES = [(128, 128, 64, 3, 8), (128, 64, 64, 3, 4), (64, 128, 64, 3, 4), (64, 64, 32, 4, 4)]
# tiles of few output positions, for convolutions that form few output tiles (late stages at batch 1)
_FEW_TILE_SHAPES = [(64, 64, 64, 3, 4), (32, 64, 64, 3, 4)]
# tiles whose reduction may be split among programs, where the output forms few of them; never staged (the
# copies would cost more than a starved convolution), and few, since a first call compiles each
_SPLIT_SHAPES = [(128, 64, 64, 3, 4), (64, 64, 64, 3, 4), (32, 64, 64, 3, 4)]
# tiles of the one-loop form (STEPPED): a group of at most a few K tiles of channels leaves each kernel
# position's channel loop too short to pipeline, the one loop over all steps does not; this form (split or
# not) may also load an NCHW input's tiles positions innermost (POSITIONS_INNER)
_STEPPED_SHAPES = [(128, 128, 64, 3, 8), (128, 64, 64, 4, 4)]
# programs a multiprocessor for a split's target: two resident ones hide each other's latency
_SPLIT_PROGRAMS_PER_MULTIPROCESSOR = 2
_SPLIT_MAX = 16
# float32 partials at most this many elements (16 MiB): a split pays off only for small outputs
_PARTIAL_MAX_ELEMENTS = 1 << 22
# the largest tile, by which a convolution counts as starved of programs
_LARGEST_TILE = 128 * 128
# (BLOCK_M, BLOCK_C, num_warps) of the direct kernel: wide channel tiles read channels-last rows
# contiguously, tall position tiles NCHW ones
_DIRECT_SHAPES = [(32, 64, 4), (64, 32, 4), (16, 128, 4), (128, 16, 4)]
# (output elements a tile, num_warps) of the direct kernel by output planes (PLANES), for inputs whose columns
# are adjacent in memory (NCHW): a tile is up to 64 columns wide and as many rows as make up its elements
_PLANE_TILES = [(512, 4), (1024, 4), (2048, 8)]
_PLANE_MAX_WIDTH = 64
# (BLOCK_H, BLOCK_W, BLOCK_C, num_warps) of the depthwise kernel for inputs whose channels are adjacent
# (CHANNELS_INNER): rows x columns of a plane times a channel block; large tiles for large planes and
# batches, small ones so that a late stage at batch 1 still forms a program or more a multiprocessor
_CHANNELS_INNER_TILES = [(4, 8, 64, 4), (8, 8, 32, 4), (2, 16, 64, 4), (4, 16, 64, 8), (8, 16, 32, 8),
                         (2, 8, 32, 2), (1, 8, 32, 1)]
# tiles (of the list above) also tried with the window's rows a loop (ROWS_LOOPED: less code, fewer loads
# in flight), their weight staged
_CHANNELS_INNER_ROWS_LOOPED = [(4, 8, 64, 4), (8, 8, 32, 4)]
# (BLOCK_H, BLOCK_W, BLOCK_C, num_warps) of the kernel's SLIDING form (width stride and dilation 1): BLOCK_W
# output columns, any count, each a BLOCK_H x BLOCK_C float32 tile whose lanes hold one vector of channels
# (BLOCK_H x BLOCK_C / 8 lanes): each input column a window row reaches is loaded and widened once for all
# the columns, not once a tap. Few lanes a program, so that small planes of many channels still make
# programs for every multiprocessor; four columns keep a 7x7 window's accumulators, weights and inputs
# within the registers (sm_90: 118 a thread, no spills), seven (which divide ConvNeXt's 56, 28, 14 and 7)
# spill a few (255 a thread)
_CHANNELS_INNER_SLIDING = [(8, 4, 64, 2), (4, 4, 64, 1), (16, 4, 32, 2), (2, 4, 128, 1), (4, 7, 64, 1)]
# the interpreter's one setting: a few rows and two channel blocks of small channel counts
_CHANNELS_INNER_INTERPRETED = (4, 8, 16, 4)
# elements a thread at least holds: one 16-byte vector of 16-bit channels
_CHANNELS_INNER_THREAD_ELEMENTS = 8


def split_below_programs(facts) -> int:
    """Output tiles (of the largest tile) below which a convolution is starved of programs on a device of
    these facts and its candidates split the reduction: twice the class's largest multiprocessor count (none
    where the facts name no count, as the CPU's)."""
    return _SPLIT_PROGRAMS_PER_MULTIPROCESSOR * facts.get("multiprocessors_max", 0)


def _split_cap(out_elements: int) -> int:
    """The most splits an output of this many elements takes (its partials bounded by _PARTIAL_MAX_ELEMENTS)."""
    return min(_SPLIT_MAX, _PARTIAL_MAX_ELEMENTS // max(out_elements, 1))


class _Setting:
    """A convolution's geometry, as the kernels see it (everything 3-d), and its route: "matmul" (1x1,
    stride 1, one group: the registry's product on reshaped operands), "direct" or "gemm". ``facts``: the
    device's, which say whether the output forms too few tiles (``starved``); none: not starved."""

    def __init__(self, op, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups,
                 facts=None):
        dims, stride, padding, dilation, out_shape = _geometry(op, input, weight, bias, stride, padding, dilation,
                                                               transposed, output_padding, groups)
        self.op, self.dims, self.out_shape = op, dims, out_shape
        self.transposed, self.groups = bool(transposed), groups
        self.batched = len(input.shape) == dims + 2
        in_shape = tuple(input.shape) if self.batched else (1, *input.shape)
        in_strides = tuple(input.stride()) if self.batched else (0, *input.stride())
        self.full_out = out_shape if self.batched else (1, *out_shape)
        self.out_strides = conv_output_strides(self.full_out, input, weight) if self.batched else None
        self.full_in = in_shape
        (self.n, self.cin, *self.in_spatial), self.xs = _as_3d(in_shape, in_strides, dims)
        (_, _, *self.kernel), self.ws = _as_3d(tuple(weight.shape), tuple(weight.stride()), dims)
        pad3 = (1,) * (3 - dims)
        self.stride, self.dilation = (*pad3, *stride), (*pad3, *dilation)
        self.padding = (*(0,) * (3 - dims), *padding)
        self.out_spatial = _as_3d(self.full_out, self.full_out, dims)[0][2:]
        self.m = self.n * S.numel(self.out_spatial)
        self.cout = self.full_out[1]
        self.cin_g, self.cout_g = self.cin // groups, self.cout // groups
        self.w_s_in = self.weight_strides(self.ws)[1]
        self.volume = S.numel(self.kernel)
        self.channels_last = self.xs[1] == 1 and self.cin > 1
        # float64 sums in float64: the product (float64 on the FMA units) or the direct kernel, its only form
        self.wide = input.dtype.name == "float64"
        # a channel a group, read channels-innermost: the depthwise kernel's vector loads apply
        self.depthwise_channels_inner = (not self.transposed and self.channels_last and self.cin_g == 1
                                         and self.cout_g == 1 and not self.wide)
        self.split_cap = _split_cap(self.m * self.cout)
        self.starved = (facts is not None and self.split_cap > 1 and
                        self.m * self.cout < split_below_programs(facts) * _LARGEST_TILE)
        direct = self.cin_g * self.cout_g <= _DIRECT_MAX_GROUP_MATRIX or self.wide
        self.route = ("matmul" if not self.starved and self._runs_as_product(input) else
                      "direct" if direct else "gemm")
        self.flat_k = self.route == "gemm" and self.cin_g < _FLAT_K_BELOW

    def _runs_as_product(self, input) -> bool:
        """Whether this is a 1x1, stride-1, single-group convolution whose input reshapes, as a view, to the
        product operand that gives the output's layout (channels-last rows, or contiguous batches)."""
        if (self.transposed or self.groups != 1 or self.volume != 1 or any(s != 1 for s in self.stride)
                or any(self.padding) or S.numel(self.full_out) == 0):
            return False
        shape, strides = tuple(input.shape), tuple(input.stride())
        if self.out_strides is not None:
            return strides == S.channels_last_strides(shape)
        return S.is_contiguous(shape, strides)

    def weight_strides(self, ws):
        """The weight's (output channel, input channel) strides, its step from one group to the next and its
        kernel-position strides, for 3-d weight strides ``ws``."""
        if self.transposed:
            return ws[1], ws[0], self.cin_g * ws[0], *ws[2:]
        return ws[0], ws[1], self.cout_g * ws[0], *ws[2:]

    def plane_tiles(self) -> list[tuple[int, int, int]]:
        """(BLOCK_H, BLOCK_W, num_warps) of the plane kernel's candidates: a forward direct convolution whose
        input columns are adjacent in memory (NCHW, or any layout whose last spatial stride is 1 and whose
        channels are not); none otherwise."""
        if self.transposed or self.xs[4] != 1 or self.xs[1] == 1 or self.wide:
            return []
        oh, ow = self.out_spatial[1:]
        width = min(_PLANE_MAX_WIDTH, next_pow2(ow))
        shapes = []
        for elements, warps in _PLANE_TILES:
            height = max(1, min(next_pow2(oh), elements // width))
            shapes.append((height, width, max(1, min(warps, height * width // 128))))
        return list(dict.fromkeys(shapes))

    def channels_inner_tiles(self, tiles=None) -> list[tuple[int, int, int, int]]:
        """(BLOCK_H, BLOCK_W, BLOCK_C, num_warps) of the depthwise kernel's candidates (of ``tiles``, by
        default ``_CHANNELS_INNER_TILES``), fitted to the output: a tile no wider or taller than the plane
        (a short side's positions moved to the other), no more channels than the convolution has, and at
        least one vector of elements a thread."""
        oh, ow = (next_pow2(extent) for extent in self.out_spatial[1:])
        shapes = []
        for bh, bw, bc, warps in tiles or _CHANNELS_INNER_TILES:
            positions = bh * bw
            height = min(bh, oh)
            width = min(ow, positions // height)
            height = min(oh, positions // width)
            block_c = min(bc, next_pow2(self.cout))
            elements = height * width * block_c
            shapes.append((height, width, block_c,
                           max(1, min(warps, elements // (32 * _CHANNELS_INNER_THREAD_ELEMENTS)))))
        return list(dict.fromkeys(shapes))

    def sliding_tiles(self) -> list[tuple[int, int, int, int]]:
        """(BLOCK_H, BLOCK_W, BLOCK_C, num_warps) of the depthwise kernel's SLIDING candidates, fitted to the
        output (no taller than the plane's rows, no more columns than it has, no more channels than the
        convolution), with no more lanes than a column tile has vectors; none unless the width's stride and
        dilation are 1 and the window is unrolled."""
        if self.stride[2] != 1 or self.dilation[2] != 1 or self.volume > _UNROLL_MAX_STEPS:
            return []
        oh, ow = self.out_spatial[1:]
        shapes = []
        for bh, bw, bc, warps in _CHANNELS_INNER_SLIDING:
            height, block_c = min(bh, next_pow2(oh)), min(bc, next_pow2(self.cout))
            vectors = height * block_c // _CHANNELS_INNER_THREAD_ELEMENTS
            shapes.append((height, min(bw, ow), block_c, max(1, min(warps, vectors // 32))))
        return list(dict.fromkeys(shapes))

    def stages(self) -> bool:
        """Whether a candidate may copy an operand channels-innermost first: forward, batched, and the input
        (or, for the implicit GEMM, the weight) not already so."""
        return (not self.transposed and self.batched and not self.wide
                and (self.xs[1] != 1 or (self.route == "gemm" and self.w_s_in != 1)))

    def key(self, facts, dtype) -> str:
        """The launch key: ``conv`` (the implicit GEMM), ``direct_conv`` (the direct kernel), or for a depthwise
        convolution read channels-innermost ``depthwise_conv``, whose candidates add the channels-inner kernel's
        (a grouped shape of the same buckets has its own key, so neither takes the other's setting), and whose
        N is the channel count, not a group's one output channel: the same output positions over 4x the
        channels (ConvNeXt's later stages at 4x the batch) are another shape for its tiles."""
        kernel = ("depthwise_conv" if self.depthwise_channels_inner else "direct_conv" if self.route == "direct"
                  else "conv")
        n = self.cout if self.depthwise_channels_inner else self.cout_g
        return tuning.launch_key(kernel, facts, rows={"M": self.m}, cols={"N": n, "K": self.cin_g},
                                 dtypes=(dtype,),
                                 flags={"window": "x".join(map(str, self.kernel)),
                                        "stride": "x".join(map(str, self.stride)), "channels_last": self.channels_last,
                                        "transposed": self.transposed, "groups": self.groups > 1})

    def reduction_steps(self, block_k: int) -> int:
        """The implicit GEMM's reduction steps with K tiles of ``block_k``: channel tiles times kernel
        positions, or flat K tiles."""
        if self.flat_k:
            return cdiv(self.cin_g * self.volume, block_k)
        return cdiv(self.cin_g, block_k) * self.volume

    def splits(self, config, target_programs: int) -> int:
        """Splits of the reduction for ``config`` that bring its programs near ``target_programs``."""
        tiles = cdiv(self.m, config["BLOCK_M"]) * cdiv(self.cout_g, config["BLOCK_N"]) * self.groups
        return max(1, min(self.split_cap, self.reduction_steps(config["BLOCK_K"]), cdiv(target_programs, tiles)))

    def split_steps(self, config) -> tuple[int, int]:
        """(splits, reduction steps a split) of ``config`` for this shape: a setting tuned on another shape of
        its key may ask for more splits than this one's steps or partials allow, and none is left empty."""
        steps = self.reduction_steps(config["BLOCK_K"])
        wanted = 1 if config.get("STAGE") else min(config.get("SPLITS", 1), self.split_cap, steps)
        if wanted <= 1:
            return 1, steps
        per_split = cdiv(steps, wanted)
        return cdiv(steps, per_split), per_split

    def candidates(self, facts, dtype) -> list[dict]:
        interpreted = bool(facts["kernels"].get("interpreted"))
        if self.route == "direct":
            if interpreted:  # few, wide programs: the interpreter pays per program and operation
                if self.depthwise_channels_inner:
                    return self.channels_inner_candidates([_CHANNELS_INNER_INTERPRETED])[:1]
                return [dict(BLOCK_M=64, BLOCK_C=min(64, next_pow2(self.cout)), num_warps=4)]
            return _staged(self, [dict(BLOCK_M=bm, BLOCK_C=min(bc, max(8, next_pow2(self.cout))), num_warps=w)
                                  for bm, bc, w in _DIRECT_SHAPES]) + [
                dict(PLANES=True, BLOCK_H=bh, BLOCK_W=bw, num_warps=w) for bh, bw, w in self.plane_tiles()] + (
                self.channels_inner_candidates() if self.depthwise_channels_inner else [])
        k = self.cin_g * self.volume if self.flat_k else self.cin_g
        target = split_below_programs(facts)
        if interpreted:
            config = dict(BLOCK_M=64, BLOCK_N=max(16, min(128, next_pow2(self.cout_g))),
                          BLOCK_K=max(16, min(64, next_pow2(k))), num_stages=1, num_warps=4)
            splits = self.splits(config, target) if self.starved else 1
            return [dict(config, SPLITS=splits) if splits > 1 else config]
        tiles = facts["tiles"]

        def config_of(bm, bn, bk, stages, warps):
            if dtype.itemsize == 4:
                bk //= 2  # float32 tiles take twice the shared memory and registers
            return dict(BLOCK_M=min(bm, tiles["max_block_m"]),
                        BLOCK_N=max(16, min(bn, tiles["max_block_n"], next_pow2(self.cout_g))),
                        BLOCK_K=max(16, min(bk, tiles["max_block_k"], next_pow2(k))),
                        num_stages=min(stages, tiles["max_stages"]), num_warps=min(warps, tiles["max_warps"]))
        stepped = [dict(config_of(*shape), STEPPED=True) for shape in _STEPPED_SHAPES]
        configs = _staged(self, [config_of(*shape) for shape in
                                 _GEMM_SHAPES + (_FEW_TILE_SHAPES if self.starved else [])] + stepped)
        if self.starved:
            for config in map(lambda shape: config_of(*shape), _SPLIT_SHAPES):
                splits = self.splits(config, target)
                if splits > 1:
                    stepped.append(dict(config, SPLITS=splits))
                    configs.append(stepped[-1])
        if self.xs[1] != 1 and not self.flat_k and dtype.itemsize == 2:
            # an NCHW input read in place, positions innermost (the matrix unit takes such 16-bit tiles); and,
            # forward and unsplit, with only the (small) weight staged, so that its tiles are copied
            # asynchronously, and the input's gathered one step ahead
            configs += [dict(config, POSITIONS_INNER=True) for config in stepped]
            if not self.transposed:
                configs += [dict(config, POSITIONS_INNER=True, PREFETCH=True, STAGE_WEIGHT=True)
                            for config in stepped if "SPLITS" not in config]
        return tuning.distinct_candidates(configs)

    def channels_inner_candidates(self, tiles=None) -> list[dict]:
        """The depthwise kernel's settings for ``channels_inner_tiles(tiles)``, each with the weight read in
        place (a tap's channels a window apart) and, where they are not adjacent already, staged
        channels-innermost first (STAGE_WEIGHT: a tap's channel block one run); by default also those of
        ``_CHANNELS_INNER_ROWS_LOOPED`` with the window's rows a loop and the SLIDING ones (``sliding_tiles``)."""
        def settings(fitted, **flags):
            return [dict(CHANNELS_INNER=True, BLOCK_H=bh, BLOCK_W=bw, BLOCK_C=bc, num_warps=w, **flags)
                    for bh, bw, bc, w in fitted]
        stage = {} if self.ws[0] == 1 else {"STAGE_WEIGHT": True}
        configs = settings(self.channels_inner_tiles(tiles))
        if stage:
            configs += settings(self.channels_inner_tiles(tiles), **stage)
        if tiles is None:
            configs += settings(self.channels_inner_tiles(_CHANNELS_INNER_ROWS_LOOPED), ROWS_LOOPED=True, **stage)
            # staged where a tap's weights lie a window apart: read in place, their scalar loads take a layout
            # the compiler moves through shared memory, a barrier a tap (sm_90)
            configs += settings(self.sliding_tiles(), SLIDING=True, **stage)
        return tuning.distinct_candidates(configs)


def _staged(setting, configs):
    """``configs`` without repeats, and again with STAGE where the setting may stage its operands."""
    configs = tuning.distinct_candidates(configs)
    return configs + [dict(c, STAGE=True) for c in configs] if setting.stages() else configs


def _channels_inner_strides(shape):
    """Contiguous strides of ``shape`` (N, C, *S) with the channels innermost, then the spatial dims from the
    last (channels-last for 4-d and 5-d)."""
    strides, step = [0] * len(shape), 1
    for d in (1, *range(len(shape) - 1, 1, -1), 0):
        strides[d] = step
        step *= max(shape[d], 1)
    return tuple(strides)


def _channels_inner_launches(st, config, common, x_slot, bias_slot, bias_args, out_slot, out_strides_3d, input,
                             out_strides):
    """(the launches, whether the weight is staged) of a CHANNELS_INNER ``config``: the depthwise kernel's,
    its weight read in place, or first staged channels-innermost (``_stage_launch`` of it as (1, C, *window),
    into the workspace's ``w_staged``) so that a tap's channel block is one run."""
    stage_weight = bool(config.get("STAGE_WEIGHT")) and st.ws[0] != 1
    stagers = []
    if stage_weight:  # staged as (1, C, *window)
        _, w_sc, *w_window = _channels_inner_strides((1, st.cout, *st.kernel))
        stagers.append(_stage_launch((1, st.cout, *st.kernel), (0, st.ws[0], *st.ws[2:]), Slot("w"),
                                     Slot("w_staged")))
    else:  # (C, 1, *window)
        w_sc, _, *w_window = st.ws
    block_h, block_w, block_c = config["BLOCK_H"], config["BLOCK_W"], config["BLOCK_C"]
    # a key records no dilation: a SLIDING setting tuned at unit width dilation, handed a dilated width, runs
    # as the tile form (its columns a power of two)
    sliding = bool(config.get("SLIDING")) and st.stride[2] == 1 and st.dilation[2] == 1
    if config.get("SLIDING") and not sliding:
        block_w = next_pow2(block_w)
    tiles = cdiv(st.out_spatial[1], block_h) * cdiv(st.out_spatial[2], block_w)
    constexprs = {k: common[k] for k in ("KD", "KH", "KW", "HAS_BIAS", "DECODE_BF16", "BIAS_FORMAT", "DST_FORMAT",
                                         "VIA_F32", "NORM", "NORM_FORMAT", "ACTIVATION")}
    launch = PlannedLaunch(
        K.conv_depthwise_channels_inner, (st.n * st.out_spatial[0] * tiles, cdiv(st.cout, block_c)),
        [x_slot, Slot("w_staged" if stage_weight else "w"), bias_slot, out_slot, *bias_args, st.cout, *st.out_spatial,
         *st.in_spatial, *st.stride, *st.padding, *st.dilation, *st.xs, w_sc, *w_window, *out_strides_3d],
        dict(constexprs, UNROLL=st.volume <= _UNROLL_MAX_STEPS and not config.get("ROWS_LOOPED"),
             UNROLL_COLUMNS=st.kernel[2] <= _UNROLL_MAX_STEPS, SLIDING=sliding, BLOCK_H=block_h, BLOCK_W=block_w,
             BLOCK_C=block_c,
             EVEN_C=st.cout % block_c == 0, BF16=input.dtype.name == "bfloat16",
             INDEX_64=needs_index_64(input, (st.full_out, out_strides)), num_warps=config["num_warps"]))
    return stagers + [launch], stage_weight


def _stage_launch(shape, strides, source: Slot, target: Slot) -> PlannedLaunch:
    """The launch copying an (B, R, *spatial) operand of these (3-d) ``shape`` and ``strides`` into a dense
    buffer with R innermost (``_channels_inner_strides``'s layout), its spatial dims merged where they are
    contiguous so that positions are read in runs."""
    (b, r, *spatial), (s_b, s_r, *spatial_strides) = shape, strides
    merged, (merged_strides,) = S.coalesce(spatial, spatial_strides)
    # merged dims first, unit ones after: a dense operand's positions are then one run whose unit extents
    # the compiler folds (an argument equal to 1 is a constant), so its loads see the run
    pad = 3 - len(merged)
    (_, ph, pw), (s_d, s_h, s_w) = merged + (1,) * pad, merged_strides + (0,) * pad
    positions = S.numel(spatial)
    block_r, block_p = min(64, max(16, next_pow2(r))), min(64, max(16, next_pow2(positions)))
    dense = (tuple(shape), _channels_inner_strides(tuple(shape)))
    return PlannedLaunch(K.conv_stage_channels_inner, (b * cdiv(r, block_r) * cdiv(positions, block_p),),
                         [source, target, r, positions, ph, pw, s_b, s_r, s_d, s_h, s_w],
                         dict(BLOCK_R=block_r, BLOCK_P=block_p,
                              INDEX_64=needs_index_64((tuple(shape), tuple(strides)), dense), num_warps=4))


def _conv_key(facts, input, weight, bias=None, stride=1, padding=0, dilation=1, transposed=False, output_padding=0,
              groups=1, *, op="convolution"):
    """The launch keys a call forms: the product's for a 1x1 convolution, else the convolution kernel's."""
    setting = _Setting(op, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, facts)
    if S.numel(setting.full_out) == 0:
        return []
    if setting.route != "matmul":
        return [setting.key(facts, input.dtype)]
    meta = resolve("meta")
    views = _ProductViews(setting, bias)
    a, b, addend = views.of(*(None if t is None else new_tensor(t.shape, t.dtype, meta, t.stride())
                              for t in (input, weight, bias)))
    return product_keys(facts, a, b, input.dtype, addend, 1, views.beta)


_plans = PlanCache()


# the activations a fused batch norm may take: their codes in the kernels' epilogues
ACTIVATIONS = {"none": E.ACT_NONE.value, "relu": E.ACT_RELU.value, "silu": E.ACT_SILU.value,
               "relu6": E.ACT_RELU6.value, "hardswish": E.ACT_HARDSWISH.value}
_NORM_CONSTEXPRS = ("NORM", "NORM_FORMAT", "ACTIVATION")
_NORM_TENSORS = ("norm_mean", "norm_var", "norm_weight", "norm_bias")


@dataclass(frozen=True)
class _NormEpilogue:
    """An inference batch norm (its running statistics, weight and bias of ``dtype``) and an activation
    applied to a convolution's float32 result before its rounding."""
    eps: float
    activation: str
    dtype: object


def _convolution(op, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups,
                 norm: _NormEpilogue | None = None, norm_tensors: tuple = (), check=None):
    """The convolution through its plan for these layouts; ``check()``, where given, validates the call before
    a plan is made (a planned layout has passed it)."""
    key = (op, layout_key(input), layout_key(weight), layout_key(bias), key_argument(stride), key_argument(padding),
           key_argument(dilation), bool(transposed), key_argument(output_padding), groups, norm,
           *map(layout_key, norm_tensors))
    plan = _plans.lookup(key)
    if plan is None:  # layout keys name the device, so the operands of a planned call share one
        if check is not None:
            check()
        for t in (weight, bias, *norm_tensors):
            if t is not None and t.device != input.device:
                raise RuntimeError(f"{op}: expected all tensors on one device, got {input.device} and {t.device}")
        plan = _plans.get(key, lambda: _plan(op, input, weight, bias, stride, padding, dilation, transposed,
                                             output_padding, groups, norm, norm_tensors))
    return plan(input, weight, bias, norm_tensors)


class _ProductViews:
    """A 1x1 convolution as a product of views of its operands: channels-last rows (N*spatial, Cin) times
    the weight's (Cin, Cout) give the channels-last output; the weight's (Cout, Cin) over a contiguous
    input's (N, Cin, spatial) batches give the contiguous one. The views are (shape, strides) pairs, worked
    out once and laid on each call's tensors."""

    def __init__(self, setting, bias):
        rows, cin, cout, n = setting.m, setting.cin, setting.cout, setting.n
        ws = setting.ws
        if setting.out_strides is not None:
            self.input_first = True
            self.x = ((rows, cin), (cin, 1))
            self.w = ((cin, cout), (ws[1], ws[0]))
            self.bias = None if bias is None else ((cout,), tuple(bias.stride()))
        else:
            length = rows // n
            self.input_first = False
            self.x = ((n, cin, length), (cin * length, length, 1))
            self.w = ((n, cout, cin), (0, ws[0], ws[1]))
            self.bias = None if bias is None else ((cout, 1), (bias.stride(0), 1))
        self.beta = 0 if bias is None else 1
        out_strides = setting.out_strides or S.contiguous_strides(setting.full_out)
        self.out = (setting.out_shape, out_strides if setting.batched else out_strides[1:])

    def of(self, input, weight, bias):
        """(a, b, addend) of the product for these operands."""
        x, w = input._view(*self.x), weight._view(*self.w)
        addend = None if bias is None else bias._view(*self.bias)
        return (x, w, addend) if self.input_first else (w, x, addend)


def _matmul_plan(setting, input, weight, bias, norm: _NormEpilogue | None = None, norm_tensors: tuple = ()):
    """``execute`` of a 1x1 convolution as the registry's product, its plan made once for these layouts; with
    ``norm`` in the product's epilogue, one an output channel: a row of the NCHW form's matrices, a column of
    the channels-last one's."""
    views = _ProductViews(setting, bias)
    a, b, addend = views.of(input, weight, bias)
    product_norm = None if norm is None else ProductNorm(per_row=not views.input_first, eps=float(norm.eps),
                                                         activation=ACTIVATIONS[norm.activation], dtype=norm.dtype)
    product = planned_product(setting.op, a, b, input.dtype, addend, 1, views.beta, product_norm, norm_tensors)
    out_shape, out_strides = views.out

    def execute(input, weight, bias, norm_tensors=()):
        return product(*views.of(input, weight, bias), None, norm_tensors)._view(out_shape, out_strides)
    return execute


def _plan(op, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, norm=None,
          norm_tensors=()):
    """``execute(input, weight, bias, norm_tensors)`` for operands laid out as these are (tuning the launch if
    needed); ``norm``: the batch norm and activation its epilogue applies, of ``norm_tensors`` (running mean,
    running variance, weight, bias)."""
    dev, dtype = input.device, input.dtype
    facts = backend_for(dev).facts
    st = _Setting(op, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, facts)
    if st.route == "matmul":
        return _matmul_plan(st, input, weight, bias, norm, norm_tensors)
    fresh_output = fresh_tensor_maker(st.full_out, dtype, dev, st.out_strides)
    out_strides = st.out_strides or S.contiguous_strides(st.full_out)
    result_strides = out_strides if st.batched else out_strides[1:]
    if S.numel(st.full_out) == 0:
        return lambda input, weight, bias, norm_tensors=(): fresh_output()._view(st.out_shape, result_strides)
    interpreted = bool(facts["kernels"].get("interpreted"))
    acc = get_dtype("float64" if st.wide else "float32")
    conversion = conversion_flags(acc, dtype, dev)
    kd, kh, kw = st.kernel
    bias_format = float_format(dtype)
    common = dict(KD=kd, KH=kh, KW=kw, UNROLL=st.volume * (st.cin_g if st.route == "direct" else 1)
                  <= _UNROLL_MAX_STEPS, TRANSPOSED=st.transposed, HAS_BIAS=bias is not None,
                  DECODE_BF16=dtype.name == "bfloat16" and interpreted, BIAS_FORMAT=bias_format,
                  DST_FORMAT=conversion["DST_FORMAT"], VIA_F32=conversion["VIA_F32"], INTERPRETED=interpreted,
                  NORM=norm is not None, NORM_FORMAT=float_format(norm.dtype if norm else dtype),
                  ACTIVATION=ACTIVATIONS[norm.activation if norm else "none"])
    plane_common = {k: v for k, v in common.items() if k not in ("TRANSPOSED", "INTERPRETED")}
    os_ = _as_3d(st.full_out, out_strides, st.dims)[1]

    def geometry(xs, ws):
        return [*st.out_spatial, *st.in_spatial, *st.stride, *st.padding, *st.dilation, *xs, *st.weight_strides(ws)]
    # an NCHW operand read in place gathers across channels; a STAGE candidate copies it channels-innermost
    # first (workspace the cost rule declares), and the tuner keeps whichever is faster
    staged_in_strides = _channels_inner_strides(st.full_in)
    staged_w_strides = _channels_inner_strides(tuple(weight.shape))
    out_slot = Slot("out")
    bias_slot = Slot("bias") if bias is not None else out_slot
    bias_stride = bias.stride(0) if bias is not None else 1
    # the bias's stride, then the norm's four vectors (the output's place where there is none) and its eps
    norm_slots = [Slot(name) for name in _NORM_TENSORS] if norm is not None else [out_slot] * len(_NORM_TENSORS)
    bias_args = [bias_stride, *norm_slots, float(norm.eps) if norm is not None else 0.0]

    def launcher(config):
        """(input, weight, bias, out) -> None issuing the launches of this tile setting."""
        stage = config.get("STAGE", False)
        stage_input = stage and st.xs[1] != 1
        stage_weight = (stage or config.get("STAGE_WEIGHT", False)) and st.route == "gemm" and st.w_s_in != 1
        stagers = []
        if stage_input:
            stagers.append(_stage_launch((st.n, st.cin, *st.in_spatial), st.xs, Slot("x"), Slot("x_staged")))
        if stage_weight:
            stagers.append(_stage_launch((st.cout, st.cin_g, *st.kernel), st.ws, Slot("w"), Slot("w_staged")))
        x_slot, w_slot = Slot("x_staged" if stage_input else "x"), Slot("w_staged" if stage_weight else "w")
        args = geometry(_as_3d(st.full_in, staged_in_strides, st.dims)[1] if stage_input else st.xs,
                        _as_3d(tuple(weight.shape), staged_w_strides, st.dims)[1] if stage_weight else st.ws)
        splits = 1
        if config.get("CHANNELS_INNER"):
            launches, stage_weight = _channels_inner_launches(st, config, common, x_slot, bias_slot, bias_args,
                                                              out_slot, os_, input, out_strides)
        elif config.get("PLANES"):
            tiles = cdiv(st.out_spatial[1], config["BLOCK_H"]) * cdiv(st.out_spatial[2], config["BLOCK_W"])
            launches = [PlannedLaunch(
                K.conv_direct_planes, (st.n * st.cout * st.out_spatial[0] * tiles,),
                [x_slot, w_slot, bias_slot, out_slot, *bias_args, st.cout, st.cout_g, *args, *os_],
                dict(plane_common, CIN_G=st.cin_g, BLOCK_H=config["BLOCK_H"], BLOCK_W=config["BLOCK_W"],
                     num_warps=config["num_warps"]))]
        elif st.route == "direct":
            launches = [PlannedLaunch(
                K.conv_direct, (cdiv(st.m, config["BLOCK_M"]), cdiv(st.cout, config["BLOCK_C"])),
                [x_slot, w_slot, bias_slot, out_slot, *bias_args, st.m, st.cout, st.cout_g, *args, *os_],
                dict(common, CIN_G=st.cin_g, BLOCK_M=config["BLOCK_M"], BLOCK_C=config["BLOCK_C"],
                     ACC=acc.triton, num_warps=config["num_warps"]))]
        else:
            splits, per_split = st.split_steps(config)
            tiles = cdiv(st.m, config["BLOCK_M"]) * cdiv(st.cout_g, config["BLOCK_N"])
            launches = [PlannedLaunch(
                K.conv_implicit_gemm, (tiles, st.groups, splits),
                [x_slot, w_slot, bias_slot, out_slot, Slot("partial") if splits > 1 else out_slot, *bias_args, st.m,
                 st.cout_g, st.cin_g, per_split, *args, *os_],
                dict(common, FLAT_K=st.flat_k, BLOCK_M=config["BLOCK_M"], BLOCK_N=config["BLOCK_N"],
                     BLOCK_K=config["BLOCK_K"], NUM_STAGES=config["num_stages"],
                     STEPPED=splits > 1 or bool(config.get("STEPPED")), SPLIT=splits > 1,
                     POSITIONS_INNER=bool(config.get("POSITIONS_INNER")),
                     PREFETCH=bool(config.get("PREFETCH")) and not (st.flat_k or st.transposed),
                     PRECISION=_dot_precision(dtype), num_warps=config["num_warps"]))]
            if splits > 1:
                block_c = min(64, next_pow2(st.cout))
                launches.append(PlannedLaunch(
                    K.conv_split_sum, (cdiv(st.m, 64), cdiv(st.cout, block_c)),
                    [Slot("partial"), bias_slot, out_slot, *bias_args, st.m, st.cout, *st.out_spatial, *os_],
                    dict(SPLITS=splits, BLOCK_M=64, BLOCK_C=block_c, HAS_BIAS=bias is not None,
                         BIAS_FORMAT=bias_format, DST_FORMAT=conversion["DST_FORMAT"], VIA_F32=conversion["VIA_F32"],
                         **{k: common[k] for k in _NORM_CONSTEXPRS}, num_warps=4)))
        workspace = Workspace(_workspace_pieces(dtype, S.numel(st.full_in), S.numel(weight.shape), st.m, st.cout,
                                                stage_input, stage_weight, splits))

        def run(input, weight, bias, out, norm_tensors=()):
            tensors = {"x": input, "w": weight, "bias": bias, "out": out, **dict(zip(_NORM_TENSORS, norm_tensors))}
            workspace.allocate(dev, tensors)
            for planned in stagers + launches:
                planned(dev, tensors)
        return run

    probe = fresh_output()
    config = tuning.choose_timed(st.key(facts, dtype), facts, lambda: st.candidates(facts, dtype),
                                 lambda config: functools.partial(launcher(config), input, weight, bias, probe,
                                                                  norm_tensors))
    run = launcher(config)

    def execute(input, weight, bias, norm_tensors=()):
        out = fresh_output()
        run(input, weight, bias, out, norm_tensors)
        return out if st.batched else out._view(st.out_shape, result_strides)
    return execute


@register("convolution", family="convolution", aten=["aten::convolution.default"], key=_conv_key, **_conv_rules(
    lambda a: ("convolution", a.input, a.weight, a.bias, a.stride, a.padding, a.dilation, a.transposed,
               a.output_padding, a.groups)))
def convolution(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1,
                transposed: bool = False, output_padding=0, groups: int = 1) -> Tensor:
    """ATen's convolution: forward or transposed, any of 1-3 spatial dims."""
    return _convolution("convolution", input, weight, bias, stride, padding, dilation, transposed,
                        output_padding, groups)


def _forward_op(name, dims):
    def convolution_arguments(a):
        _rank(name, a.weight, dims)
        return name, a.input, a.weight, a.bias, a.stride, a.padding, a.dilation, False, 0, a.groups

    def key(facts, input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        _rank(name, weight, dims)
        return _conv_key(facts, input, weight, bias, stride, padding, dilation, False, 0, groups, op=name)

    def impl(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        _rank(name, weight, dims)
        return _convolution(name, input, weight, bias, stride, padding, dilation, False, 0, groups)
    impl.__doc__ = f"torch.nn.functional.{name}: a {dims}-d convolution."
    return register(name, family="convolution", aten=[f"aten::{name}.default", f"aten::{name}.padding"], key=key,
                    functional=True, **_conv_rules(convolution_arguments))(impl)


def _transposed_op(name, dims):
    def convolution_arguments(a):
        _rank(name, a.weight, dims)
        return name, a.input, a.weight, a.bias, a.stride, a.padding, a.dilation, True, a.output_padding, a.groups

    def key(facts, input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        _rank(name, weight, dims)
        return _conv_key(facts, input, weight, bias, stride, padding, dilation, True, output_padding, groups, op=name)

    def impl(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        _rank(name, weight, dims)
        return _convolution(name, input, weight, bias, stride, padding, dilation, True, output_padding, groups)
    impl.__doc__ = f"torch.nn.functional.{name}: a {dims}-d transposed convolution."
    return register(name, family="convolution", aten=[f"aten::{name}.default" if dims == 1 else f"aten::{name}.input"],
                    key=key, functional=True, **_conv_rules(convolution_arguments))(impl)


def _rank(op, weight, dims):
    if len(weight.shape) != dims + 2:
        raise RuntimeError(f"{op}: expected weight to be {dims + 2}-dimensional, but got {len(weight.shape)}-D "
                           f"weight of size {list(weight.shape)}")


conv1d, conv2d, conv3d = (_forward_op(f"conv{d}d", d) for d in (1, 2, 3))
conv_transpose1d, conv_transpose2d, conv_transpose3d = (_transposed_op(f"conv_transpose{d}d", d) for d in (1, 2, 3))


# ---- a convolution with an inference batch norm and an activation in its epilogue --------------------

_NORMED = "convolution_batch_norm"
_NORM_DTYPES = ("float32", "float16", "bfloat16")


def _normed_result(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, norm_weight,
                   norm_bias, running_mean, running_var, eps, activation) -> TensorMeta:
    """The fused op's result, its norm's arguments checked: four vectors of one float dtype, one value an
    output channel, and a known activation."""
    out = _conv_result(_NORMED, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    if len(input.shape) != len(weight.shape):
        raise RuntimeError(f"{_NORMED}: expected a batched input (N, C, ...), got size {list(input.shape)}: a batch "
                           "norm's channels are dim 1")
    channels = out.shape[1]
    vectors = {"running_mean": running_mean, "running_var": running_var, "norm_weight": norm_weight,
               "norm_bias": norm_bias}
    for name, vector in vectors.items():
        if vector is None:
            raise RuntimeError(f"{_NORMED}: {name} is required (the norm in the epilogue is an affine one with "
                               "running statistics)")
        if tuple(vector.shape) != (channels,):
            raise RuntimeError(f"{_NORMED}: expected {name} of size [{channels}] (the output's channels), got "
                               f"{list(vector.shape)}")
    if input.dtype.name not in _NORM_DTYPES:
        raise TypeError(f"{_NORMED}: {input.dtype.name} is not supported (the epilogue computes in float32); "
                        f"the fused op takes {', '.join(_NORM_DTYPES)}")
    dtypes = {vector.dtype.name for vector in vectors.values()}
    if len(dtypes) != 1 or not dtypes <= set(_NORM_DTYPES):
        raise TypeError(f"{_NORMED}: the norm's vectors must share one dtype of {', '.join(_NORM_DTYPES)}, got "
                        f"{', '.join(sorted(dtypes))}")
    if activation not in ACTIVATIONS:
        raise ValueError(f"{_NORMED}: unknown activation {activation!r}; one of {', '.join(ACTIVATIONS)}")
    if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not eps >= 0:
        raise ValueError(f"{_NORMED}: eps must be a non-negative number, got {eps!r}")
    return out


def _normed_meta(a) -> TensorMeta:
    return _normed_result(a.input, a.weight, a.bias, a.stride, a.padding, a.dilation, a.transposed,
                          a.output_padding, a.groups, a.norm_weight, a.norm_bias, a.running_mean, a.running_var,
                          a.eps, a.activation)


def _convolution_arguments(a) -> tuple:
    return (_NORMED, a.input, a.weight, a.bias, a.stride, a.padding, a.dilation, a.transposed, a.output_padding,
            a.groups)


def _normed_cost(a) -> Cost:
    out = _normed_meta(a)
    convolution = _conv_estimate(*_convolution_arguments(a))
    vectors = (a.running_mean, a.running_var, a.norm_weight, a.norm_bias)
    # per output element: the norm's subtraction and multiply-add, and the activation's few operations; every
    # route applies them in its epilogue, so they take no temporary but the copies of strided vectors
    elements = S.numel(out.shape)
    copies = sum(workspace_bytes(nbytes(vector)) for vector in vectors if not _adjacent(vector))
    return Cost(flops=convolution.flops + 8 * elements,
                bytes_read=convolution.bytes_read + sum(nbytes(vector) for vector in vectors),
                bytes_written=convolution.bytes_written, workspace=convolution.workspace + copies)


def _adjacent(vector) -> bool:
    """Whether a norm vector's elements are adjacent, as the epilogues read them (a shape alone, as a graph's
    plan describes a value: laid out densely)."""
    strides = getattr(vector, "stride", None)
    return strides is None or S.is_contiguous(tuple(vector.shape), tuple(strides()))


def _normed_key(facts, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, *norm,
                **options):
    """The convolution's launch keys: its epilogue changes no tile setting."""
    return _conv_key(facts, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups,
                     op=_NORMED)


@register(_NORMED, family="convolution", aten=[f"nbx::{_NORMED}"], meta=_normed_meta, cost=_normed_cost,
          bound=True, key=_normed_key, api=())
def convolution_batch_norm(input: Tensor, weight: Tensor, bias, stride, padding, dilation, transposed: bool,
                           output_padding, groups: int, norm_weight: Tensor, norm_bias: Tensor, running_mean: Tensor,
                           running_var: Tensor, eps: float, activation: str = "none") -> Tensor:
    """``activation(batch_norm(convolution(...)))`` with the norm's running statistics (inference), computed
    in float32 in the convolution's epilogue and rounded once to the input's dtype (``graph/fuse.py`` makes
    it of a graph's chain), the 1x1 route's included: the product's epilogue. ``activation``: none, relu, silu,
    relu6 or hardswish."""
    vectors = (running_mean, running_var, norm_weight, norm_bias)
    if not all(vector is None or _adjacent(vector) for vector in vectors):
        with scratch_scope():  # the epilogues read a vector's channels adjacent: a strided one is copied first
            vectors = tuple(vector if vector is None or _adjacent(vector) else vector.contiguous()
                            for vector in vectors)
    norm = _NormEpilogue(eps, activation, None if running_mean is None else running_mean.dtype)
    return _convolution(_NORMED, input, weight, bias, stride, padding, dilation, transposed, output_padding,
                        groups, norm, vectors, lambda: _normed_result(
                            input, weight, bias, stride, padding, dilation, transposed, output_padding, groups,
                            norm_weight, norm_bias, running_mean, running_var, eps, activation))


# ---- samples ---------------------------------------------------------------------------------------

def _conv_samples(n: int, transposed: bool):
    """Tiny convolutions of ``n`` spatial dims: plain with a bias, strided and padded, grouped, bfloat16."""
    spatial = (4,) * n
    weight = (lambda c_in, c_out, k: operand(c_in, c_out, *(k,) * n)) if transposed else (
        lambda c_in, c_out, k: operand(c_out, c_in, *(k,) * n))
    extra = (0,) if transposed else (1,)  # before groups: conv_transpose's output_padding, conv's dilation
    return Samples((sample(operand(1, 2, *spatial), weight(2, 3, 2), operand(3)),
                    sample(operand(1, 2, *spatial), weight(2, 2, 3), None, 2, 1),
                    sample(operand(2, 4, *spatial), weight(4, 2, 1) if transposed else operand(4, 2, *(1,) * n),
                           None, 1, 0, *extra, 2),
                    sample(operand(1, 2, *spatial, dtype="bfloat16"),
                           operand(*weight(2, 2, 2).shape, dtype="bfloat16")),
                    sample(operand(1, 2, *spatial, dtype="float64"), operand(*weight(2, 3, 2).shape, dtype="float64"),
                           operand(3, dtype="float64"), 1, 1)))


_SAMPLES = {
    "convolution": Samples((sample(operand(1, 2, 4, 4), operand(3, 2, 2, 2), operand(3), (1, 1), (0, 0), (1, 1), False,
                                   (0, 0), 1),
                            sample(operand(1, 2, 4), operand(2, 3, 2), None, (2,), (1,), (1,), True, (1,), 1))),
    **{f"conv{n}d": _conv_samples(n, False) for n in (1, 2, 3)},
    **{f"conv_transpose{n}d": _conv_samples(n, True) for n in (1, 2, 3)},
    # the norm's vectors: weight, bias, running mean, running variance (positive)
    _NORMED: Samples((sample(operand(1, 2, 4, 4), operand(3, 2, 2, 2), operand(3), (1, 1), (0, 0), (1, 1), False, (0, 0),
                             1, operand(3), operand(3), operand(3), operand(3, values="positive"), 1e-5,
                             activation="relu"),
                      sample(operand(2, 4, 3, 3), operand(4, 4, 1, 1), None, (1, 1), (0, 0), (1, 1), False, (0, 0), 1,
                             operand(4), operand(4), operand(4), operand(4, values="positive"), 1e-3,
                             activation="silu"),
                      sample(operand(1, 2, 5), operand(2, 3, 2), None, (2,), (1,), (1,), True, (1,), 1, operand(3),
                             operand(3), operand(3), operand(3, values="positive"), 1e-5))),
}
family_samples("convolution", by_name(_SAMPLES))
