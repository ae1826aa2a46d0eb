"""Convolution: conv1d/2d/3d, their transposed forms and ``aten::convolution``, as torch spells them.

Every form runs as 3-d (unit dims for 1-d and 2-d), by one of three routes: a 1x1, stride-1, single-group
convolution is the registry's matrix product on views of its operands; a group of few channels (depthwise,
small multipliers) runs ``kernels/conv.py``'s direct kernel on the vector units; the rest its implicit
GEMM, whose tile settings are tuned under the launch key the op declares. Inputs are read in place through
their strides (NCHW or channels-last), and the output is channels-last when the input or weight is
(torch's rule). Accumulation is float32; float32 operands multiply in true
float32 unless TF32 is opted into (``set_float32_matmul_precision``).
"""
from __future__ import annotations

import functools

from .. import shape as S
from .. import tuning
from ..device import backend_for, resolve
from ..dtypes import get_dtype
from ..kernels import conv as K
from ..kernels.copy import FORMAT_NATIVE, SMALL_FLOAT_FORMATS
from ..launch import cdiv, launch, next_pow2
from ..tensor import Tensor
from .copy import _conversion_flags, new_tensor, scratch_scope
from .matmul import _dot_precision
from .plans import PlanCache, layout_key
from .registry import Cost, TensorMeta, family_samples, get, nbytes, register, workspace_bytes
from .samples import Samples, by_name, operand, sample

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
    # a forward convolution's tuned setting may copy the input and weight channels-innermost (STAGE)
    workspace = 0 if transposed else workspace_bytes(nbytes(input), nbytes(weight))
    return Cost(flops=flops, bytes_read=sum(nbytes(t) for t in (input, weight, bias) if t is not None),
                bytes_written=nbytes(out), workspace=workspace)


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
# (BLOCK_M, BLOCK_C, num_warps) of the direct kernel: wide channel tiles read channels-last rows
# contiguously, tall position tiles NCHW ones
_DIRECT_SHAPES = [(32, 64, 4), (64, 32, 4), (16, 128, 4), (128, 16, 4)]


class _Setting:
    """A convolution's geometry, as the kernels see it (everything 3-d), and its route: "matmul" (1x1,
    stride 1, one group: the registry's product on reshaped operands), "direct" or "gemm"."""

    def __init__(self, op, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
        dims, stride, padding, dilation, out_shape = _geometry(op, input, weight, bias, stride, padding, dilation,
                                                               transposed, output_padding, groups)
        self.dims, self.out_shape, self.transposed, self.groups = dims, out_shape, bool(transposed), groups
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
        self.route = ("matmul" if self._runs_as_product(input) else
                      "direct" if self.cin_g * self.cout_g <= _DIRECT_MAX_GROUP_MATRIX else "gemm")
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

    def stages(self) -> bool:
        """Whether a candidate may copy an operand channels-innermost first: forward, batched, and the input
        (or, for the implicit GEMM, the weight) not already so."""
        return (not self.transposed and self.batched
                and (self.xs[1] != 1 or (self.route == "gemm" and self.w_s_in != 1)))

    def key(self, facts, dtype) -> str:
        kernel = "direct_conv" if self.route == "direct" else "conv"
        return tuning.launch_key(kernel, facts, rows={"M": self.m}, cols={"N": self.cout_g, "K": self.cin_g},
                                 dtypes=(dtype,),
                                 flags={"window": "x".join(map(str, self.kernel)),
                                        "stride": "x".join(map(str, self.stride)), "channels_last": self.channels_last,
                                        "transposed": self.transposed, "groups": self.groups > 1})

    def candidates(self, facts, dtype) -> list[dict]:
        interpreted = bool(facts["kernels"].get("interpreted"))
        if self.route == "direct":
            if interpreted:  # few, wide programs: the interpreter pays per program and operation
                return [dict(BLOCK_M=64, BLOCK_C=min(64, next_pow2(self.cout)), num_warps=4)]
            return _staged(self, [dict(BLOCK_M=bm, BLOCK_C=min(bc, max(8, next_pow2(self.cout))), num_warps=w)
                                  for bm, bc, w in _DIRECT_SHAPES])
        k = self.cin_g * self.volume if self.flat_k else self.cin_g
        if interpreted:
            return [dict(BLOCK_M=64, BLOCK_N=max(16, min(128, next_pow2(self.cout_g))),
                         BLOCK_K=max(16, min(64, next_pow2(k))), num_stages=1, num_warps=4)]
        tiles = facts["tiles"]
        configs = []
        for bm, bn, bk, stages, warps in _GEMM_SHAPES:
            if dtype.itemsize == 4:
                bk //= 2  # float32 tiles take twice the shared memory and registers
            configs.append(dict(BLOCK_M=min(bm, tiles["max_block_m"]),
                                BLOCK_N=max(16, min(bn, tiles["max_block_n"], next_pow2(self.cout_g))),
                                BLOCK_K=max(16, min(bk, tiles["max_block_k"], next_pow2(k))),
                                num_stages=min(stages, tiles["max_stages"]), num_warps=min(warps, tiles["max_warps"])))
        return _staged(self, configs)


def _staged(setting, configs):
    """``configs`` without repeats, and again with STAGE where the setting may stage its operands."""
    configs = _unique(configs)
    return configs + [dict(c, STAGE=True) for c in configs] if setting.stages() else configs


def _channels_inner_strides(shape):
    """Contiguous strides of ``shape`` (N, C, *S) with the channels innermost, then the spatial dims from the
    last (channels-last for 4-d and 5-d)."""
    strides, step = [0] * len(shape), 1
    for d in (1, *range(len(shape) - 1, 1, -1), 0):
        strides[d] = step
        step *= max(shape[d], 1)
    return tuple(strides)


def _channels_inner(t, dims):
    """A copy of ``t`` (N, C, *S) laid out with ``_channels_inner_strides``, through the registry's copy."""
    moved = t.permute(0, *range(2, 2 + dims), 1).contiguous()
    return moved.permute(0, dims + 1, *range(1, dims + 1))


def _unique(configs):
    seen, out = set(), []
    for config in configs:
        marker = tuple(sorted(config.items()))
        if marker not in seen:
            seen.add(marker)
            out.append(config)
    return out


def _conv_key(facts, input, weight, bias=None, stride=1, padding=0, dilation=1, transposed=False, output_padding=0,
              groups=1, *, op="convolution"):
    """The launch keys a call forms: the product's for a 1x1 convolution, else the convolution kernel's."""
    setting = _Setting(op, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    if S.numel(setting.full_out) == 0:
        return []
    if setting.route != "matmul":
        return [setting.key(facts, input.dtype)]
    meta = resolve("meta")
    rows, cin, cout = setting.m, setting.cin, setting.cout
    w2 = new_tensor((cin, cout), input.dtype, meta, (1, cin))
    if setting.out_strides is not None:
        x2 = new_tensor((rows, cin), input.dtype, meta)
        if bias is None:
            return get("matmul").key(facts, x2, w2)
        return get("addmm").key(facts, new_tensor((cout,), input.dtype, meta), x2, w2)
    length = rows // setting.n
    x3 = new_tensor((setting.n, cin, length), input.dtype, meta)
    wt = new_tensor((setting.n, cout, cin), input.dtype, meta, (0, cin, 1))
    if bias is None:
        return get("matmul").key(facts, wt, x3)
    return get("baddbmm").key(facts, new_tensor((cout, 1), input.dtype, meta), wt, x3)


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


def _matmul_plan(setting):
    """``execute`` of a 1x1 convolution as the registry's product: channels-last rows (N*spatial, Cin) times
    the weight's (Cin, Cout) view give the channels-last output; a contiguous input's (N, Cin, spatial)
    batches, under the weight's (Cout, Cin), give the contiguous one."""
    rows, cin, cout, n = setting.m, setting.cin, setting.cout, setting.n
    spatial = setting.full_out[2:]

    def execute(input, weight, bias):
        w2 = weight.reshape(cout, cin)
        if setting.out_strides is not None:
            x2 = input.permute(0, *range(2, 2 + setting.dims), 1).reshape(rows, cin)
            out = get("matmul").impl(x2, w2.t()) if bias is None else get("addmm").impl(bias, x2, w2.t())
            out = out.view(n, *spatial, cout).permute(0, setting.dims + 1, *range(1, setting.dims + 1))
        else:
            x3 = input.reshape(n, cin, rows // n)
            wt = w2.unsqueeze(0).expand(n, cout, cin)
            out = (get("matmul").impl(wt, x3) if bias is None else
                   get("baddbmm").impl(bias.view(cout, 1), wt, x3)).view(setting.full_out)
        return out if setting.batched else out.view(*setting.out_shape)
    return execute


def _plan(op, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """``execute(input, weight, bias)`` for operands laid out as these are (tuning the launch if needed)."""
    setting = _Setting(op, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    if setting.route == "matmul":
        return _matmul_plan(setting)
    dev, dtype = input.device, input.dtype
    facts = backend_for(dev).facts
    interpreted = bool(facts["kernels"].get("interpreted"))
    conversion = _conversion_flags(get_dtype("float32"), dtype, dev)
    st = setting
    kd, kh, kw = st.kernel
    common = dict(KD=kd, KH=kh, KW=kw, UNROLL=st.volume * (st.cin_g if st.route == "direct" else 1)
                  <= _UNROLL_MAX_STEPS, TRANSPOSED=st.transposed, HAS_BIAS=bias is not None,
                  DECODE_BF16=dtype.name == "bfloat16" and interpreted,
                  BIAS_FORMAT=SMALL_FLOAT_FORMATS.get(dtype.name, FORMAT_NATIVE),
                  DST_FORMAT=conversion["DST_FORMAT"], VIA_F32=conversion["VIA_F32"], INTERPRETED=interpreted)
    def geometry(xs, ws):
        return [*st.out_spatial, *st.in_spatial, *st.stride, *st.padding, *st.dilation, *xs, *st.weight_strides(ws)]
    # an NCHW operand read in place gathers across channels; a STAGE candidate copies it channels-innermost
    # first (workspace the cost rule declares), and the tuner keeps whichever is faster
    staged_input = _as_3d(st.full_in, _channels_inner_strides(st.full_in), st.dims)[1]
    staged_weight = _as_3d(tuple(weight.shape), _channels_inner_strides(tuple(weight.shape)), st.dims)[1]

    def launcher(config):
        """(input, weight, bias, out) -> None issuing the launch with this tile setting."""
        stage = config.get("STAGE", False)
        stage_weight = stage and st.route == "gemm"
        args = geometry(staged_input if stage else st.xs, staged_weight if stage_weight else st.ws)
        if st.route == "direct":
            kernel = K.conv_direct
            grid = (cdiv(st.m, config["BLOCK_M"]), cdiv(st.cout, config["BLOCK_C"]))
            head = [st.m, st.cout, st.cout_g]
            constexprs = dict(common, CIN_G=st.cin_g, BLOCK_M=config["BLOCK_M"], BLOCK_C=config["BLOCK_C"],
                              num_warps=config["num_warps"])
        else:
            kernel = K.conv_implicit_gemm
            grid = (cdiv(st.m, config["BLOCK_M"]) * cdiv(st.cout_g, config["BLOCK_N"]), st.groups)
            head = [st.m, st.cout_g, st.cin_g]
            constexprs = dict(common, FLAT_K=st.flat_k, BLOCK_M=config["BLOCK_M"], BLOCK_N=config["BLOCK_N"],
                              BLOCK_K=config["BLOCK_K"], NUM_STAGES=config["num_stages"],
                              PRECISION=_dot_precision(dtype), num_warps=config["num_warps"])

        def run(input, weight, bias, out):
            with scratch_scope():
                if stage:
                    input = _channels_inner(input, st.dims)
                if stage_weight:
                    weight = _channels_inner(weight, st.dims)
            _, os_ = _as_3d(st.full_out, tuple(out.stride()), st.dims)
            launch(kernel, grid, dev, [input, weight, bias if bias is not None else out, out, *head, *args, *os_],
                   **constexprs)
        return run

    if S.numel(st.full_out) == 0:
        run = None
    else:
        probe = new_tensor(st.full_out, dtype, dev, st.out_strides)
        config = tuning.choose_timed(st.key(facts, dtype), facts, lambda: st.candidates(facts, dtype),
                                     lambda config: functools.partial(launcher(config), input, weight, bias, probe))
        run = launcher(config)

    def execute(input, weight, bias):
        out = new_tensor(st.full_out, dtype, dev, st.out_strides)
        if run is not None:
            run(input, weight, bias, out)
        return out if st.batched else out.view(*st.out_shape)
    return execute


@register("convolution", family="convolution", aten=["aten::convolution.default"], meta=_conv_meta,
          cost=_conv_cost, key=_conv_key)
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

    def key(facts, input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        _rank(name, weight, dims)
        return _conv_key(facts, input, weight, bias, stride, padding, dilation, False, 0, groups, op=name)

    def impl(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        _rank(name, weight, dims)
        return _convolution(name, input, weight, bias, stride, padding, dilation, False, 0, groups)
    impl.__doc__ = f"torch.nn.functional.{name}: a {dims}-d convolution."
    return register(name, family="convolution", aten=[f"aten::{name}.default", f"aten::{name}.padding"],
                    meta=meta, cost=cost, key=key)(impl)


def _transposed_op(name, dims):
    def meta(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        _rank(name, weight, dims)
        return _conv_meta(input, weight, bias, stride, padding, dilation, True, output_padding, groups, op=name)

    def cost(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        return _conv_cost(input, weight, bias, stride, padding, dilation, True, output_padding, groups, op=name)

    def key(facts, input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        _rank(name, weight, dims)
        return _conv_key(facts, input, weight, bias, stride, padding, dilation, True, output_padding, groups, op=name)

    def impl(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        _rank(name, weight, dims)
        return _convolution(name, input, weight, bias, stride, padding, dilation, True, output_padding, groups)
    impl.__doc__ = f"torch.nn.functional.{name}: a {dims}-d transposed convolution."
    return register(name, family="convolution", aten=[f"aten::{name}.default" if dims == 1 else f"aten::{name}.input"],
                    meta=meta, cost=cost, key=key)(impl)


def _rank(op, weight, dims):
    if len(weight.shape) != dims + 2:
        raise RuntimeError(f"{op}: expected weight to be {dims + 2}-dimensional, but got {len(weight.shape)}-D "
                           f"weight of size {list(weight.shape)}")


conv1d, conv2d, conv3d = (_forward_op(f"conv{d}d", d) for d in (1, 2, 3))
conv_transpose1d, conv_transpose2d, conv_transpose3d = (_transposed_op(f"conv_transpose{d}d", d) for d in (1, 2, 3))
FUNCTIONAL = {op.name: op.impl for op in (conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d,
                                          conv_transpose3d)}


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
                    sample(operand(1, 2, *spatial, dtype="bfloat16"), operand(*weight(2, 2, 2).shape, dtype="bfloat16"))))


_SAMPLES = {
    "convolution": Samples((sample(operand(1, 2, 4, 4), operand(3, 2, 2, 2), operand(3), (1, 1), (0, 0), (1, 1), False,
                                   (0, 0), 1),
                            sample(operand(1, 2, 4), operand(2, 3, 2), None, (2,), (1,), (1,), True, (1,), 1))),
    **{f"conv{n}d": _conv_samples(n, False) for n in (1, 2, 3)},
    **{f"conv_transpose{n}d": _conv_samples(n, True) for n in (1, 2, 3)},
}
family_samples("convolution", by_name(_SAMPLES))
