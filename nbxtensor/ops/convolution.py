"""Convolution: conv1d/2d/3d, their transposed forms and ``aten::convolution``, as torch spells them.

Every form is one launch of ``kernels/conv.py``'s implicit GEMM, 1-d and 2-d run as 3-d with unit dims;
inputs are read in place through their strides (NCHW or channels-last), and the output is channels-last
when the input or weight is (torch's rule). Accumulation is float32; float32 operands multiply in true
float32 unless TF32 is opted into (``set_float32_matmul_precision``).
"""
from __future__ import annotations

from .. import shape as S
from ..device import backend_for
from ..dtypes import get_dtype
from ..kernels import conv as K
from ..kernels.copy import FORMAT_NATIVE, SMALL_FLOAT_FORMATS
from ..launch import cdiv, launch, next_pow2
from ..tensor import Tensor
from .copy import _conversion_flags, new_tensor
from .matmul import _dot_precision
from .plans import PlanCache, layout_key
from .registry import Cost, TensorMeta, nbytes, register

_FLOATS = ("float32", "float16", "bfloat16")


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


def _conv_meta(input, weight, bias=None, stride=1, padding=0, dilation=1, transposed=False, output_padding=0,
               groups=1, *, op="convolution"):
    out_shape = _geometry(op, input, weight, bias, stride, padding, dilation, transposed, output_padding,
                          groups)[-1]
    return TensorMeta(out_shape, input.dtype)


def _conv_cost(input, weight, bias=None, stride=1, padding=0, dilation=1, transposed=False, output_padding=0,
               groups=1, *, op="convolution"):
    out = _conv_meta(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, op=op)
    kernel_volume = S.numel(weight.shape[2:])
    if transposed:
        # each input element meets every kernel position of Cout/groups output channels
        flops = 2 * S.numel(input.shape) * weight.shape[1] * kernel_volume
    else:
        flops = 2 * S.numel(out.shape) * weight.shape[1] * kernel_volume
    return Cost(flops=flops, bytes_read=sum(nbytes(t) for t in (input, weight, bias) if t is not None),
                bytes_written=nbytes(out), workspace=0)


def _as_3d(shape, strides, dims):
    """(shape, strides) of a batched N-d tensor as 5-d, unit dims of stride 0 in front of the spatial ones."""
    pad = 3 - dims
    return (*shape[:2], *(1,) * pad, *shape[2:]), (*strides[:2], *(0,) * pad, *strides[2:])


def _output_strides(out_shape, input, weight):
    """Channels-last strides when the input or the weight is channels-last (4-D or 5-D), else contiguous."""
    if len(out_shape) in (4, 5) and (S.strides_like_channels_last(input.shape, input.stride())
                                     or S.strides_like_channels_last(weight.shape, weight.stride())):
        return S.channels_last_strides(out_shape)
    return None


_plans = PlanCache()


def _convolution(op, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    for t in (weight, bias):
        if t is not None and t.device != input.device:
            raise RuntimeError(f"{op}: expected all tensors on one device, got {input.device} and {t.device}")
    key = (op, layout_key(input), layout_key(weight), layout_key(bias), stride if isinstance(stride, (int, str))
           else tuple(stride), padding if isinstance(padding, (int, str)) else tuple(padding),
           dilation if isinstance(dilation, int) else tuple(dilation), bool(transposed),
           output_padding if isinstance(output_padding, int) else tuple(output_padding), groups)
    return _plans.get(key, lambda: _plan(op, input, weight, bias, stride, padding, dilation, transposed,
                                         output_padding, groups))(input, weight, bias)


def _plan(op, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """``execute(input, weight, bias)`` for operands laid out as these are."""
    dims, stride, padding, dilation, out_shape = _geometry(op, input, weight, bias, stride, padding, dilation,
                                                           transposed, output_padding, groups)
    dev, dtype = input.device, input.dtype
    batched = len(input.shape) == dims + 2
    in_shape = tuple(input.shape) if batched else (1, *input.shape)
    in_strides = tuple(input.stride()) if batched else (0, *input.stride())
    full_out = out_shape if batched else (1, *out_shape)
    out_strides = _output_strides(full_out, input, weight) if batched else None
    (n, cin, id_, ih, iw), xs = _as_3d(in_shape, in_strides, dims)
    (_, _, kd, kh, kw), ws = _as_3d(tuple(weight.shape), tuple(weight.stride()), dims)
    pad3 = (1,) * (3 - dims)
    sd, sh, sw = (*pad3, *stride)
    pd, ph, pw = (*(0,) * (3 - dims), *padding)
    dd, dh, dw = (*pad3, *dilation)
    cout = full_out[1]
    cin_g, cout_g = cin // groups, cout // groups
    # the weight's (output channel, input channel) strides, and its step from one group to the next
    if transposed:
        w_s_out, w_s_in, w_sg = ws[1], ws[0], cin_g * ws[0]
    else:
        w_s_out, w_s_in, w_sg = ws[0], ws[1], cout_g * ws[0]
    facts = backend_for(dev).facts
    interpreted = bool(facts["kernels"].get("interpreted"))
    conversion = _conversion_flags(get_dtype("float32"), dtype, dev)
    block_m = 64 if interpreted else 128
    block_n = max(16, min(128, next_pow2(cout_g)))
    block_k = max(16, min(64 if dtype.itemsize == 2 else 32, next_pow2(cin_g)))

    def execute(input, weight, bias):
        out = new_tensor(full_out, dtype, dev, out_strides)
        if S.numel(full_out) == 0:
            return out if batched else out.view(*out_shape)
        _, os_ = _as_3d(full_out, tuple(out.stride()), dims)
        od, oh, ow = _as_3d(full_out, full_out, dims)[0][2:]
        m = n * od * oh * ow
        launch(K.conv_implicit_gemm, (cdiv(m, block_m) * cdiv(cout_g, block_n), groups), dev,
               [input, weight, bias if bias is not None else out, out, m, cout_g, cin_g, od, oh, ow, id_, ih, iw,
                kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw, xs[0], xs[1], xs[2], xs[3], xs[4],
                w_s_out, w_s_in, w_sg, ws[2], ws[3], ws[4], *os_],
               BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, TRANSPOSED=bool(transposed),
               HAS_BIAS=bias is not None, PRECISION=_dot_precision(dtype),
               DECODE_BF16=dtype.name == "bfloat16" and interpreted,
               BIAS_FORMAT=SMALL_FLOAT_FORMATS.get(dtype.name, FORMAT_NATIVE),
               DST_FORMAT=conversion["DST_FORMAT"], VIA_F32=conversion["VIA_F32"], INTERPRETED=interpreted,
               num_warps=4)
        return out if batched else out.view(*out_shape)
    return execute


@register("convolution", family="convolution", aten=["aten::convolution.default"], meta=_conv_meta,
          cost=_conv_cost)
def convolution(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1,
                transposed: bool = False, output_padding=0, groups: int = 1) -> Tensor:
    """ATen's convolution: forward or transposed, any of 1-3 spatial dims."""
    return _convolution("convolution", input, weight, bias, stride, padding, dilation, transposed,
                        output_padding, groups)


def _forward_op(name, dims):
    def meta(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        _rank(name, weight, dims)
        return _conv_meta(input, weight, bias, stride, padding, dilation, False, 0, groups, op=name)

    def cost(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        return _conv_cost(input, weight, bias, stride, padding, dilation, False, 0, groups, op=name)

    def impl(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        _rank(name, weight, dims)
        return _convolution(name, input, weight, bias, stride, padding, dilation, False, 0, groups)
    impl.__doc__ = f"torch.nn.functional.{name}: a {dims}-d convolution."
    return register(name, family="convolution", aten=[f"aten::{name}.default", f"aten::{name}.padding"],
                    meta=meta, cost=cost)(impl)


def _transposed_op(name, dims):
    def meta(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        _rank(name, weight, dims)
        return _conv_meta(input, weight, bias, stride, padding, dilation, True, output_padding, groups, op=name)

    def cost(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        return _conv_cost(input, weight, bias, stride, padding, dilation, True, output_padding, groups, op=name)

    def impl(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        _rank(name, weight, dims)
        return _convolution(name, input, weight, bias, stride, padding, dilation, True, output_padding, groups)
    impl.__doc__ = f"torch.nn.functional.{name}: a {dims}-d transposed convolution."
    return register(name, family="convolution", aten=[f"aten::{name}.default" if dims == 1 else f"aten::{name}.input"], meta=meta, cost=cost)(impl)


def _rank(op, weight, dims):
    if len(weight.shape) != dims + 2:
        raise RuntimeError(f"{op}: expected weight to be {dims + 2}-dimensional, but got {len(weight.shape)}-D "
                           f"weight of size {list(weight.shape)}")


conv1d, conv2d, conv3d = (_forward_op(f"conv{d}d", d) for d in (1, 2, 3))
conv_transpose1d, conv_transpose2d, conv_transpose3d = (_transposed_op(f"conv_transpose{d}d", d) for d in (1, 2, 3))
FUNCTIONAL = {op.name: op.impl for op in (conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d,
                                          conv_transpose3d)}
