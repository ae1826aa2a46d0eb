"""More of torch.nn.functional and its ATen forms, each composed of registry ops: ``bilinear``, ``pdist``,
``max_unpool{1,2,3}d``, and the normalisations that return their statistics as ATen does
(``native_layer_norm``, ``native_batch_norm``, ``_native_batch_norm_legit``: inference only, so the
training forms, which update running statistics in place, are refused)."""
from __future__ import annotations

from .. import shape as S
from ..allocation import scratch_scope
from ..dtypes import get_dtype
from ..tensor import Tensor
from .nn_composites import temporaries
from .registry import Cost, TensorMeta, family_samples, get, nbytes, op_impl, register
from .samples import Samples, by_name, operand, sample


def _statistics_dtype(dtype):
    """The dtype statistics are taken in: float32 for the half-precision floats, else the input's own."""
    return get_dtype("float32") if dtype.itemsize < 4 else dtype


# ---- bilinear ----------------------------------------------------------------------------------------

def _bilinear_meta(input1, input2, weight, bias):
    if len(input1.shape) != len(input2.shape):
        raise RuntimeError(f"bilinear(): input dimensions do not match: got {len(input1.shape)} and "
                           f"{len(input2.shape)}")
    if len(input1.shape) == 0:
        raise RuntimeError("bilinear(): inputs must have at least one dimension (the features), got 0D")
    if tuple(input1.shape[:-1]) != tuple(input2.shape[:-1]):
        raise RuntimeError(f"bilinear(): input batch dimensions do not match: got {list(input1.shape[:-1])} and "
                           f"{list(input2.shape[:-1])}")
    if len(weight.shape) != 3:
        raise RuntimeError(f"bilinear(): weight must be 3D (out, in1, in2), got {len(weight.shape)}D")
    for which, x, dim in (("input1", input1, 1), ("input2", input2, 2)):
        if x.shape[-1] != weight.shape[dim]:
            raise RuntimeError(f"bilinear(): {which} size does not match weight size: got {x.shape[-1]} but "
                               f"expected {weight.shape[dim]}")
    if bias is not None and (len(bias.shape) != 1 or bias.shape[0] != weight.shape[0]):
        raise RuntimeError(f"bilinear(): bias size does not match weight size: got {list(bias.shape)} but expected "
                           f"[{weight.shape[0]}]")
    return TensorMeta((*input1.shape[:-1], weight.shape[0]), input1.dtype)


def _bilinear_cost(a):
    input1, input2, weight, bias = a.input1, a.input2, a.weight, a.bias
    out = _bilinear_meta(input1, input2, weight, bias)
    rows = S.numel(input1.shape[:-1])
    partial = (rows, weight.shape[0] * weight.shape[2])
    return Cost(flops=2 * rows * S.numel(weight.shape) + 2 * S.numel(partial),
                bytes_read=sum(nbytes(t) for t in (input1, input2, weight, bias) if t is not None),
                bytes_written=nbytes(out), workspace=temporaries(3, partial, out.dtype))


def _bilinear_key(facts, input1, input2, weight, bias=None):
    """The launch keys of bilinear's two products: input1's rows with weight's (in1, out * in2) copy, then
    the batched one with input2."""
    out = _bilinear_meta(input1, input2, weight, bias)
    outputs, in1, in2 = weight.shape
    rows = S.numel(input1.shape[:-1])
    matmul_key = get("matmul").key
    first = matmul_key(facts, Tensor._meta((rows, in1), input1.dtype), Tensor._meta((in1, outputs * in2), weight.dtype))
    return first + matmul_key(facts, Tensor._meta((rows, outputs, in2), out.dtype),
                              Tensor._meta((rows, in2, 1), input2.dtype))


@register("bilinear", family="matmul", aten=["aten::bilinear.default"],
          meta=lambda a: _bilinear_meta(a.input1, a.input2, a.weight, a.bias), cost=_bilinear_cost, bound=True,
          key=_bilinear_key, functional=True)
def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias=None) -> Tensor:
    """out[..., o] = sum_ij input1[..., i] weight[o, i, j] input2[..., j] + bias[o]: a matrix product of
    input1 with weight's (in1, out * in2) view, then a batched one with input2 (the contraction order of
    ATen's, each product rounding once)."""
    meta = _bilinear_meta(input1, input2, weight, bias)
    outputs, in1, in2 = weight.shape
    rows = S.numel(input1.shape[:-1])
    with scratch_scope():
        partial = input1.reshape(rows, in1).matmul(weight.permute(1, 0, 2).reshape(in1, outputs * in2))
        left = partial.reshape(rows, outputs, in2)
        right = input2.reshape(rows, in2, 1)
        summed = left.matmul(right) if bias is not None else None
    out = left.matmul(right) if bias is None else summed + bias.unsqueeze(-1)
    return out.reshape(meta.shape)


# ---- pdist -------------------------------------------------------------------------------------------

def _pdist_meta(input, p):
    if len(input.shape) != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {len(input.shape)}D")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"pdist only supports floating-point dtypes, got: {input.dtype.name}")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    rows = input.shape[0]
    return TensorMeta((rows * (rows - 1) // 2,), input.dtype)


def _pdist_cost(a):
    input = a.input
    out = _pdist_meta(input, a.p)
    pairs = (input.shape[0], input.shape[0], input.shape[1])
    return Cost(flops=3 * S.numel(pairs), bytes_read=nbytes(input), bytes_written=nbytes(out),
                workspace=temporaries(2, pairs, input.dtype) + temporaries(3, out.shape, get_dtype("int64")))


@register("pdist", family="normalization", aten=["aten::pdist.default", "aten::_pdist_forward.default"],
          meta=lambda a: _pdist_meta(a.input, a.p), cost=_pdist_cost, bound=True, functional=True)
def pdist(input: Tensor, p: float = 2) -> Tensor:
    """The p-norm distance of every pair of rows i < j of an (N, M) input, in row-major pair order: cdist
    of the input with itself, its strict upper triangle gathered."""
    _pdist_meta(input, p)
    rows = input.shape[0]
    with scratch_scope():
        distances = op_impl("cdist")(input, input, p)
        upper = op_impl("triu_indices")(rows, rows, 1, device=input.device)
        flat = upper[0] * rows + upper[1]
    return distances.reshape(-1).index_select(0, flat)


# ---- max_unpool --------------------------------------------------------------------------------------

def _tuple(value, nd: int, what: str, op: str) -> tuple:
    values = (value,) * nd if isinstance(value, int) else tuple(value)
    if len(values) == 1:
        values = values * nd
    if len(values) != nd or not all(isinstance(v, int) for v in values):
        raise ValueError(f"{op}: {what} must be an int or {nd} ints, got {value!r}")
    return values


def _unpool_sizes(input, indices, nd, kernel_size, stride, padding, output_size) -> tuple:
    """The output's spatial sizes, with torch's checks of the arguments."""
    op = f"max_unpool{nd}d"
    if len(input.shape) not in (nd + 1, nd + 2):
        raise RuntimeError(f"{op}: expected a {nd + 1}D or {nd + 2}D input, got shape {list(input.shape)}")
    if tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor ({list(input.shape)}) "
                           f"but got indices tensor with shape: {list(indices.shape)}")
    if indices.dtype.name != "int64":
        raise RuntimeError(f"elements in indices should be type int64 but got: {indices.dtype.name}")
    kernel = _tuple(kernel_size, nd, "kernel_size", op)
    strides = kernel if stride is None or (not isinstance(stride, int) and len(stride) == 0) else _tuple(
        stride, nd, "stride", op)
    pads = _tuple(padding, nd, "padding", op)
    spatial = tuple(input.shape[-nd:])
    default = tuple((i - 1) * s + k - 2 * p for i, s, k, p in zip(spatial, strides, kernel, pads))
    if output_size is None:
        sizes = default
    else:
        sizes = tuple(int(v) for v in output_size)
        if len(sizes) == nd + 2:
            sizes = sizes[2:]
        if len(sizes) != nd:
            raise ValueError(f"output_size should be a sequence containing {nd} or {nd + 2} elements, but it has a "
                             f"length of '{len(sizes)}'")
        for d, (size, base, s) in enumerate(zip(sizes, default, strides)):
            if not base - s < size < base + s:
                raise ValueError(f'invalid output_size "{list(sizes)}" (dim {d} must be between {base - s} and '
                                 f'{base + s})')
    if any(size < 0 for size in sizes):
        raise ValueError(f"max_unpooling: output_size must contain non-negative spatial dimensions, but got "
                         f"{list(sizes)}")
    return sizes


def _declare_unpool(nd: int):
    name = f"max_unpool{nd}d"

    def result(input, indices, kernel_size, stride, padding, output_size):
        sizes = _unpool_sizes(input, indices, nd, kernel_size, stride, padding, output_size)
        return TensorMeta((*input.shape[:-nd], *sizes), input.dtype)

    def meta(a):
        return result(a.input, a.indices, a.kernel_size, a.stride, a.padding, a.output_size)

    def cost(a):
        out = meta(a)
        return Cost(bytes_read=nbytes(a.input) + nbytes(a.indices), bytes_written=nbytes(out),
                    workspace=temporaries(1, out.shape, out.dtype))

    def max_unpool(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
        out_meta = result(input, indices, kernel_size, stride, padding, output_size)
        plane = S.numel(out_meta.shape[-nd:])
        planes = S.numel(input.shape[:-nd])
        if indices.numel() and ((indices < 0) | (indices >= plane)).any().item():  # checked on the host, as ATen's
            raise RuntimeError(f"Found an invalid max index (output volumes are of size "
                               f"{'x'.join(str(s) for s in out_meta.shape[-nd:])})")
        if input.numel() == 0:
            return op_impl("zeros")(out_meta.shape, dtype=input.dtype, device=input.device)
        with scratch_scope():
            zeros = op_impl("zeros")((planes, plane), dtype=input.dtype, device=input.device)
        return zeros.scatter(1, indices.reshape(planes, -1), input.reshape(planes, -1)).reshape(out_meta.shape)
    max_unpool.__doc__ = (f"``nn.functional.{name}``: zeros of the pooled input's size (``output_size``, else "
                          f"from the window), each value of ``input`` put where its ``indices`` (flat in its "
                          f"{nd}-d plane, as max_pool{nd}d returns them) point.")
    max_unpool.__name__ = max_unpool.__qualname__ = name
    return register(name, family="pooling", aten=[f"nbx::{name}"], meta=meta, cost=cost, bound=True, api=(),
                    functional=True)(max_unpool)


max_unpool1d, max_unpool2d, max_unpool3d = (_declare_unpool(nd) for nd in (1, 2, 3))


# ---- fractional_max_pool -------------------------------------------------------------------------------

def _fractional_sizes(input, nd, kernel_size, output_size, output_ratio, random_samples) -> tuple:
    """(kernel, output sizes) after torch's checks of the arguments."""
    op = f"fractional_max_pool{nd}d"
    if len(input.shape) not in (nd + 1, nd + 2) or S.numel(input.shape) == 0:
        raise RuntimeError(f"{op}(): expected a non-empty {nd + 1}D or {nd + 2}D input, got shape {list(input.shape)}")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"{op}\" not implemented for '{input.dtype.name}'")
    kernel = _tuple(kernel_size, nd, "kernel_size", op)
    spatial = tuple(input.shape[-nd:])
    if output_size is not None:
        sizes = _tuple(output_size, nd, "output_size", op)
    elif output_ratio is not None:
        ratios = (output_ratio,) * nd if isinstance(output_ratio, (int, float)) else tuple(output_ratio)
        if len(ratios) != nd or not all(0 < r < 1 for r in ratios):
            raise ValueError(f"{op} requires output_ratio to be {nd} numbers in (0, 1), got {output_ratio!r}")
        sizes = tuple(int(i * r) for i, r in zip(spatial, ratios))
    else:
        raise ValueError(f"{op} requires specifying either an output_size or an output_ratio")
    for i, k, o in zip(spatial, kernel, sizes):
        if k <= 0 or o <= 0:
            raise RuntimeError(f"{op}(): kernel_size and output_size must be positive, got {list(kernel)} and "
                               f"{list(sizes)}")
        if o + k - 1 > i:
            raise RuntimeError(f"{op}(): pool size {k} too large relative to input size {i} (output size {o})")
    if random_samples is not None:
        planes = tuple(input.shape[:-nd]) if len(input.shape) == nd + 2 else (1, input.shape[0])
        if tuple(random_samples.shape) != (*planes, nd):
            raise RuntimeError(f"{op}(): expected _random_samples of shape {[*planes, nd]}, got "
                               f"{list(random_samples.shape)}")
    return kernel, sizes


def _window_starts(samples: Tensor, size: int, kernel: int, out: int) -> Tensor:
    """(N, C, out) first input positions of the windows of one dim, ATen's pseudo-random sequence
    trunc((i + u) alpha) - trunc(u alpha), alpha = (size - kernel) / (out - 1), computed in the samples'
    dtype; the last window ends at the input's end."""
    last = size - kernel
    steps = op_impl("arange")(out, dtype=samples.dtype, device=samples.device)
    if out == 1:
        return op_impl("full")((*samples.shape, 1), last, dtype=get_dtype("int64"), device=samples.device)
    alpha = op_impl("full")((), last / (out - 1), dtype=samples.dtype, device=samples.device)
    u = samples.unsqueeze(-1)
    starts = ((steps + u) * alpha).to("int64") - (u * alpha).to("int64")
    return op_impl("where")(steps == out - 1, last, starts)


def _declare_fractional(nd: int):
    name = f"fractional_max_pool{nd}d"

    def meta(a):
        input = a.input
        _, sizes = _fractional_sizes(input, nd, a.kernel_size, a.output_size, a.output_ratio, a._random_samples)
        out = TensorMeta((*input.shape[:-nd], *sizes), input.dtype)
        return (out, TensorMeta(out.shape, get_dtype("int64"))) if a.return_indices else out

    def cost(a):
        found = meta(a)
        out = found if isinstance(found, TensorMeta) else found[0]
        kernel = _tuple(a.kernel_size, nd, "kernel_size", name)
        windows = (*out.shape, S.numel(kernel))
        return Cost(flops=S.numel(windows), bytes_read=nbytes(a.input), bytes_written=nbytes(out) * 3,
                    workspace=temporaries(3, windows, get_dtype("int64")) + temporaries(1, windows, a.input.dtype))

    def fractional_max_pool(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                            return_indices: bool = False, _random_samples=None):
        kernel, sizes = _fractional_sizes(input, nd, kernel_size, output_size, output_ratio, _random_samples)
        batched = input.ndim == nd + 2
        x = input if batched else input.unsqueeze(0)
        n, c, spatial = x.shape[0], x.shape[1], tuple(x.shape[2:])
        int64 = get_dtype("int64")
        with scratch_scope():
            samples = (_random_samples.reshape(n, c, nd).to(x.dtype) if _random_samples is not None
                       else op_impl("rand")((n, c, nd), dtype=x.dtype, device=x.device))
            flat = None
            for d in range(nd):
                # ATen's 2-d pool draws its width's sample first, the 3-d one its dims in order
                sample = samples[:, :, (1 - d) if nd == 2 else d]
                positions = (_window_starts(sample, spatial[d], kernel[d], sizes[d]).unsqueeze(-1)
                             + op_impl("arange")(kernel[d], dtype=int64, device=x.device))
                placed = [1] * (2 * nd)
                placed[d], placed[nd + d] = sizes[d], kernel[d]
                positions = positions.reshape(n, c, *placed)
                flat = positions if flat is None else flat * spatial[d] + positions
            flat = flat.reshape(n, c, *sizes, -1)
            values = x.reshape(n, c, -1).gather(2, flat.reshape(n, c, -1)).reshape(tuple(flat.shape))
            _, picked = values.max(-1, keepdim=True)
        out, indices = values.max(-1)[0], flat.gather(-1, picked).squeeze(-1)
        if not batched:
            out, indices = out.squeeze(0), indices.squeeze(0)
        return (out, indices) if return_indices else out
    fractional_max_pool.__doc__ = (
        f"``nn.functional.{name}``: the maximum over each of the {nd}-d windows at ATen's pseudo-random "
        f"offsets (the first among equal values; NaN wins), its index flat in the input's plane with "
        f"``return_indices``. ``_random_samples`` (N, C, {nd}) in [0, 1) fix the offsets; without them they "
        "are drawn from nbxtensor's generator, so they differ from torch's draws.")
    fractional_max_pool.__name__ = fractional_max_pool.__qualname__ = name
    return register(name, family="pooling", aten=[f"nbx::{name}"], meta=meta, cost=cost, bound=True, api=(),
                    functional=True)(fractional_max_pool)


fractional_max_pool2d, fractional_max_pool3d = _declare_fractional(2), _declare_fractional(3)


# ---- native_layer_norm, native_batch_norm, _native_batch_norm_legit -----------------------------------

def _native_layer_norm_meta(a):
    input = a.input
    get("layer_norm").meta(input, a.normalized_shape, a.weight, a.bias, a.eps)
    kept = len(input.shape) - len(tuple(a.normalized_shape))
    statistics = TensorMeta((*input.shape[:kept], *(1,) * (len(input.shape) - kept)), input.dtype)
    return TensorMeta(tuple(input.shape), input.dtype), statistics, statistics


def _native_layer_norm_cost(a):
    input = a.input
    norm = get("layer_norm").cost(input, a.normalized_shape, a.weight, a.bias, a.eps)
    wide = _statistics_dtype(input.dtype)
    return Cost(flops=norm.flops + 3 * S.numel(input.shape), bytes_read=norm.bytes_read + nbytes(input),
                bytes_written=norm.bytes_written + 2 * nbytes(_native_layer_norm_meta(a)[1]),
                workspace=norm.workspace + temporaries(1, input.shape, wide))


@register("native_layer_norm", family="normalization", aten=["aten::native_layer_norm.default"],
          meta=_native_layer_norm_meta, cost=_native_layer_norm_cost, bound=True)
def native_layer_norm(input: Tensor, normalized_shape, weight, bias, eps: float):
    """What torch.export makes of ``layer_norm``: (out, mean, rstd), the statistics over the normalised
    dims kept as size-1 dims, taken in float32 for half precision (a second pass over the input)."""
    out = get("layer_norm").impl(input, normalized_shape, weight, bias, eps)
    dims = tuple(range(input.ndim - len(tuple(normalized_shape)), input.ndim))
    with scratch_scope():
        var, mean = get("var_mean").impl(input.to(_statistics_dtype(input.dtype)), dim=dims, correction=0,
                                         keepdim=True)
        rstd = get("rsqrt").impl(var + eps)
    return out, _fresh(mean, input.dtype), _fresh(rstd, input.dtype)


def _fresh(statistic: Tensor, dtype) -> Tensor:
    """A statistic computed among the op's temporaries, as a result of ``dtype`` of its own."""
    return statistic.to(dtype) if statistic.dtype is not dtype else statistic.clone()


def _refuse_training(training: bool, op: str) -> None:
    if training:
        raise NotImplementedError(f"{op}: training=True (batch statistics, running-stat updates) is not supported by "
                                  "this inference library; pass training=False")


def _empty_statistics(input) -> TensorMeta:
    return TensorMeta((0,), _statistics_dtype(input.dtype))


def _native_batch_norm_meta(a):
    out = get("batch_norm").meta(a.input, a.running_mean, a.running_var, a.weight, a.bias, False, a.momentum, a.eps)
    return out, _empty_statistics(a.input), _empty_statistics(a.input)


def _native_batch_norm_cost(a):
    return get("batch_norm").cost(a.input, a.running_mean, a.running_var, a.weight, a.bias, False, a.momentum, a.eps)


def _inference_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, op: str):
    _refuse_training(training, op)
    out = get("batch_norm").impl(input, running_mean, running_var, weight, bias, False, momentum, eps)
    empty = _empty_statistics(input)
    zeros = op_impl("zeros")
    return out, zeros(empty.shape, dtype=empty.dtype, device=input.device), zeros(
        empty.shape, dtype=empty.dtype, device=input.device)


@register("native_batch_norm", family="normalization", aten=["aten::native_batch_norm.default"],
          meta=_native_batch_norm_meta, cost=_native_batch_norm_cost, bound=True)
def native_batch_norm(input: Tensor, weight, bias, running_mean, running_var, training: bool, momentum: float,
                      eps: float):
    """ATen's batch norm: (out, save_mean, save_invstd); inference (training=False) normalises with the
    running statistics and, as ATen's, returns the saved statistics empty."""
    return _inference_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,
                                 "native_batch_norm")


def _legit_arguments(rest):
    """(running_mean, running_var, training, momentum, eps) of either overload's arguments after ``bias``:
    the default one's, or .no_stats's (training, momentum, eps); without running statistics it is training,
    refused."""
    if len(rest) == 3:
        rest = (None, None, *rest)
    elif len(rest) != 5:
        raise TypeError(f"_native_batch_norm_legit() takes 6 or 8 arguments, got {3 + len(rest)}")
    if rest[0] is None:
        _refuse_training(True, "_native_batch_norm_legit")
    return rest


def _legit_meta(a):
    running_mean, running_var, _, momentum, eps = _legit_arguments(a.rest)
    out = get("batch_norm").meta(a.input, running_mean, running_var, a.weight, a.bias, False, momentum, eps)
    return out, _empty_statistics(a.input), _empty_statistics(a.input)


def _legit_cost(a):
    running_mean, running_var, _, momentum, eps = _legit_arguments(a.rest)
    return get("batch_norm").cost(a.input, running_mean, running_var, a.weight, a.bias, False, momentum, eps)


@register("native_batch_norm_legit", family="normalization",
          aten=["aten::_native_batch_norm_legit.default", "aten::_native_batch_norm_legit.no_stats"],
          meta=_legit_meta, cost=_legit_cost, bound=True, api=("_native_batch_norm_legit",))
def native_batch_norm_legit(input: Tensor, weight, bias, *rest):
    """``_native_batch_norm_legit(input, weight, bias, running_mean, running_var, training, momentum, eps)``:
    native_batch_norm's inference form (.no_stats, without running statistics, is training: refused)."""
    running_mean, running_var, training, momentum, eps = _legit_arguments(rest)
    return _inference_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,
                                 "_native_batch_norm_legit")



# ---- samples ---------------------------------------------------------------------------------------

def _unpool_samples(n: int):
    """A max_unpool<n>d whose indices are distinct positions of the output: no two writes collide."""
    return Samples((sample(operand(1, 2, *(2,) * n), operand(1, 2, *(2,) * n, dtype="int64", values="distinct",
                                                             domain=(0, 4 ** n)), 2),
                    sample(operand(2, *(2,) * n), operand(2, *(2,) * n, dtype="int64", values="distinct",
                                                          domain=(0, 5 ** n)), 2, 2, 0, (5,) * n)))


_DRAWN = dict(compare="metadata")  # random window offsets: shapes and dtypes only
_SAMPLES = {
    "bilinear": Samples((sample(operand(2, 3), operand(2, 4), operand(5, 3, 4), operand(5)),
                         sample(operand(3), operand(4), operand(2, 3, 4)))),
    "pdist": Samples((sample(operand(4, 3)), sample(operand(3, 2), 1.0), sample(operand(1, 3)))),
    "max_unpool1d": _unpool_samples(1),
    "max_unpool2d": _unpool_samples(2),
    "max_unpool3d": _unpool_samples(3),
    "fractional_max_pool2d": Samples((sample(operand(1, 2, 5, 5), 2, output_size=3, **_DRAWN),
                                      sample(operand(2, 5, 5), 2, output_ratio=0.5, return_indices=True, **_DRAWN))),
    "fractional_max_pool3d": Samples((sample(operand(1, 1, 4, 4, 4), 2, output_size=2, **_DRAWN),)),
    "native_layer_norm": Samples((sample(operand(2, 4), (4,), operand(4), operand(4), 1e-5),
                                  sample(operand(2, 3, 2), (3, 2), None, None, 1e-5))),
    "native_batch_norm": Samples((sample(operand(2, 3, 2), operand(3), operand(3), operand(3), operand(3, values="positive"),
                                         False, 0.1, 1e-5),)),
    "native_batch_norm_legit": Samples((sample(operand(2, 3, 2), operand(3), operand(3), operand(3),
                                               operand(3, values="positive"), False, 0.1, 1e-5),)),
}
for _family in ("matmul", "normalization", "pooling"):
    family_samples(_family, by_name(_SAMPLES))
