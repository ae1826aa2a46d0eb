"""torch.nn.functional's distances, normalisations, activations with a parameter, channel dropout,
channel shuffle and embedding_bag: each ATen's own composite of registry ops, the intermediates taken as
the op's temporaries (``scratch_scope``) and declared by its cost rule."""

from __future__ import annotations

import numpy as np

from .. import shape as S
from ..allocation import new_tensor, scratch_scope
from ..dtypes import get_dtype
from ..promotion import get_default_dtype, promote_types, result_type
from ..tensor import Tensor
from .registry import Cost, INPLACE, OUT, TensorMeta, family_samples, get, nbytes, op_impl, register, workspace_bytes
from .samples import Samples, by_name, operand, sample

_F32 = get_dtype("float32")


def _float_dtype(*dtypes):
    """The dtype a float computation over these inputs gives: their promotion, integers to the default."""
    common = dtypes[0]
    for dt in dtypes[1:]:
        common = promote_types(common, dt)
    return common if common.is_floating_point or common.is_complex else get_default_dtype()


def temporaries(count: int, shape, dtype) -> int:
    """Workspace of ``count`` temporaries of ``shape`` and ``dtype``, each allocated on its own."""
    return workspace_bytes(*[S.numel(shape) * dtype.itemsize] * count)


def _check_float(x, op: str) -> None:
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        raise RuntimeError(f"{op}: expected a floating-point input, got {x.dtype.name}")


# ---- normalize, distances ---------------------------------------------------------------------

def _normalize_meta(a):
    S.wrap_dim(a.dim, len(a.input.shape))
    return TensorMeta(tuple(a.input.shape), a.input.dtype)


def _normalize_cost(a):
    x = a.input
    return Cost(flops=4 * S.numel(x.shape), bytes_read=2 * nbytes(x), bytes_written=nbytes(x),
                workspace=temporaries(2, x.shape, x.dtype))


@register("normalize", family="normalization", aten=["nbx::normalize"], meta=_normalize_meta, cost=_normalize_cost,
          bound=True, api=(), functional=True, variants=(OUT,))
def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
    """``input / max(||input||_p, eps)`` along ``dim``."""
    S.wrap_dim(dim, input.ndim)
    with scratch_scope():
        denom = op_impl("linalg.vector_norm")(input, p, dim, True).clamp_min(eps)
    return input / denom


def _broadcast_pair(x1, x2):
    shape = S.broadcast_shapes(tuple(x1.shape), tuple(x2.shape))
    return shape, _float_dtype(x1.dtype, x2.dtype)


def _cosine_meta(x1, x2, dim) -> TensorMeta:
    shape, dtype = _broadcast_pair(x1, x2)
    d = S.wrap_dim(dim, len(shape))
    return TensorMeta(tuple(n for i, n in enumerate(shape) if i != d), dtype)


def _cosine_cost(a):
    shape, dtype = _broadcast_pair(a.x1, a.x2)
    return Cost(flops=8 * S.numel(shape), bytes_read=nbytes(a.x1) + nbytes(a.x2),
                bytes_written=nbytes(_cosine_meta(a.x1, a.x2, a.dim)), workspace=temporaries(5, shape, dtype))


@register("cosine_similarity", family="normalization", functional=True, aten=["aten::cosine_similarity.default"],
          meta=lambda a: _cosine_meta(a.x1, a.x2, a.dim), cost=_cosine_cost, bound=True)
def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """sum(x1 / max(||x1||, eps) * x2 / max(||x2||, eps)) along ``dim``, after broadcasting: each
    operand divided by its own norm first, as ATen does, so large values do not overflow a product."""
    meta = _cosine_meta(x1, x2, dim)
    shape = S.broadcast_shapes(tuple(x1.shape), tuple(x2.shape))
    with scratch_scope():
        a = x1.expand(shape).to(meta.dtype)
        b = x2.expand(shape).to(meta.dtype)
        a = a / op_impl("linalg.vector_norm")(a, 2, dim, True).clamp_min(eps)
        b = b / op_impl("linalg.vector_norm")(b, 2, dim, True).clamp_min(eps)
        product = a * b
    return product.sum(dim)


def _pairwise_meta(x1, x2, keepdim) -> TensorMeta:
    shape, dtype = _broadcast_pair(x1, x2)
    if not shape:
        return TensorMeta((), dtype)
    return TensorMeta(tuple(shape[:-1]) + ((1,) if keepdim else ()), dtype)


def _pairwise_cost(a):
    shape, dtype = _broadcast_pair(a.x1, a.x2)
    return Cost(flops=4 * S.numel(shape), bytes_read=nbytes(a.x1) + nbytes(a.x2),
                bytes_written=nbytes(_pairwise_meta(a.x1, a.x2, a.keepdim)), workspace=temporaries(2, shape, dtype))


@register("pairwise_distance", family="normalization", functional=True, aten=["aten::pairwise_distance.default"],
          meta=lambda a: _pairwise_meta(a.x1, a.x2, a.keepdim), cost=_pairwise_cost, bound=True)
def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> Tensor:
    """||x1 - x2 + eps||_p over the last dim (ATen's definition: eps is added to the difference)."""
    meta = _pairwise_meta(x1, x2, keepdim)
    with scratch_scope():
        difference = (x1 - x2).to(meta.dtype) + eps
    return op_impl("linalg.vector_norm")(difference, p, -1 if difference.ndim else None, keepdim and difference.ndim > 0)


_CDIST_MODES = {"use_mm_for_euclid_dist_if_necessary": 0, "use_mm_for_euclid_dist": 1,
                "donot_use_mm_for_euclid_dist": 2, None: 0, 0: 0, 1: 1, 2: 2}


def _cdist_meta(x1, x2, p, compute_mode) -> TensorMeta:
    for name, x in (("X1", x1), ("X2", x2)):
        if not x.dtype.is_floating_point:
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: {x.dtype.name}")
        if len(x.shape) < 2:
            raise RuntimeError(f"cdist only supports at least 2D tensors, {name} got: {len(x.shape)}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    if compute_mode not in _CDIST_MODES:
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    if x1.dtype is not x2.dtype:
        raise RuntimeError(f"cdist: X1 and X2 must have the same dtype, got {x1.dtype.name} and {x2.dtype.name}")
    batch = S.broadcast_shapes(tuple(x1.shape[:-2]), tuple(x2.shape[:-2]))
    return TensorMeta((*batch, x1.shape[-2], x2.shape[-2]), x1.dtype)


def _cdist_cost(a):
    out = _cdist_meta(a.x1, a.x2, a.p, a.compute_mode)
    pairs = (*out.shape, a.x1.shape[-1])
    return Cost(flops=3 * S.numel(pairs), bytes_read=nbytes(a.x1) + nbytes(a.x2), bytes_written=nbytes(out),
                workspace=temporaries(1, pairs, out.dtype))


@register("cdist", family="normalization", aten=["aten::cdist.default", "aten::_cdist_forward.default"],
          meta=lambda a: _cdist_meta(a.x1, a.x2, a.p, a.compute_mode), cost=_cdist_cost, bound=True)
def cdist(x1: Tensor, x2: Tensor, p: float = 2.0, compute_mode="use_mm_for_euclid_dist_if_necessary") -> Tensor:
    """The p-norm distance between each row of ``x1`` and each row of ``x2``, per batch. Always from the
    differences (torch's exact path): the matrix-product form |a|^2 + |b|^2 - 2ab that torch may take
    for p = 2 loses the small distances to cancellation, so every compute_mode gives these values."""
    _cdist_meta(x1, x2, p, compute_mode)
    with scratch_scope():
        difference = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    return op_impl("linalg.vector_norm")(difference, p, -1)


# ---- instance and local response norm ------------------------------------------------------------

def _instance_norm_meta(input) -> TensorMeta:
    if len(input.shape) < 2:
        raise RuntimeError(f"instance_norm expects an input of at least 2 dims (N, C, ...), got {list(input.shape)}")
    return TensorMeta(tuple(input.shape), input.dtype)


def _instance_norm_cost(a):
    x = a.input
    params = sum(nbytes(t) for t in (a.running_mean, a.running_var, a.weight, a.bias) if t is not None)
    return Cost(flops=8 * S.numel(x.shape), bytes_read=nbytes(x) + params, bytes_written=nbytes(x),
                workspace=temporaries(1, x.shape, x.dtype))


def _instance_norm_from_aten(args, kwargs):
    # aten::instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps, cudnn)
    named = {**dict(zip(("input", "weight", "bias", "running_mean", "running_var", "use_input_stats", "momentum",
                         "eps", "cudnn_enabled"), args)), **kwargs}
    return (named.pop("input"),), named


@register("instance_norm", family="normalization", aten=["aten::instance_norm.default"],
          meta=lambda a: _instance_norm_meta(a.input), cost=_instance_norm_cost, bound=True, api=(), functional=True,
          adapters={"aten::instance_norm.default": _instance_norm_from_aten})
def instance_norm(input: Tensor, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats: bool = True, momentum: float = 0.1, eps: float = 1e-5, cudnn_enabled=True) -> Tensor:
    """Each (sample, channel) normalised over its positions (group norm with a group a channel), or with
    the running statistics when ``use_input_stats`` is False (inference batch norm)."""
    _instance_norm_meta(input)
    if not use_input_stats:
        return op_impl("batch_norm")(input, running_mean, running_var, weight, bias, False, momentum, eps)
    if running_mean is not None or running_var is not None:
        raise NotImplementedError("instance_norm: updating running_mean and running_var from the input's statistics "
                                  "is training; pass use_input_stats=False to normalise with them, or leave them None")
    if S.numel(input.shape[2:]) <= 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input size {list(input.shape)}")
    return op_impl("group_norm")(input, input.shape[1], weight, bias, eps)


def _lrn_meta(input, size) -> TensorMeta:
    if len(input.shape) < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {len(input.shape)} dimensions)")
    if size <= 0:
        raise ValueError(f"local_response_norm: size must be positive, got {size}")
    return TensorMeta(tuple(input.shape), _float_dtype(input.dtype))


def _lrn_cost(a):
    input, size = a.input, a.size
    padded = (input.shape[0], input.shape[1] + size - 1, *input.shape[2:])
    return Cost(flops=(size + 30) * S.numel(input.shape), bytes_read=nbytes(input), bytes_written=nbytes(input),
                workspace=temporaries(1, padded, input.dtype) + temporaries(2, input.shape, input.dtype))


@register("local_response_norm", family="normalization", aten=["nbx::local_response_norm"],
          meta=lambda a: _lrn_meta(a.input, a.size), cost=_lrn_cost, bound=True, api=(), functional=True)
def local_response_norm(input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> Tensor:
    """input / (k + alpha * mean of input^2 over ``size`` neighbouring channels) ^ beta, the window
    zero-padded by size // 2 before and (size - 1) // 2 after, as torch's."""
    _lrn_meta(input, size)
    if input.numel() == 0:
        return input.clone()
    with scratch_scope():
        padded = op_impl("pad")(input * input, (0, 0) * (input.ndim - 2) + (size // 2, (size - 1) // 2))
        windows = padded.unfold(1, size, 1)
        # torch averages through avg_pool, whose integer mean truncates the sum's quotient
        window = windows.mean(-1) if input.dtype.is_floating_point else windows.sum(-1).div(size, rounding_mode="trunc")
        denom = (window * alpha + k).pow(beta)
    return input / denom


# ---- prelu, rrelu --------------------------------------------------------------------------------

def _prelu_meta(input, weight):
    if len(weight.shape) > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = {len(weight.shape)}")
    count = S.numel(weight.shape)
    if count != 1:
        if len(input.shape) == 0:
            raise RuntimeError("Not allow zero-dim input tensor.")
        channels = input.shape[1] if len(input.shape) > 1 else 1
        if channels != count:
            raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found parameter numbers = "
                               f"{count} and channel size = {channels}.")
    return TensorMeta(tuple(input.shape), result_type(Tensor._meta(input.shape, input.dtype),
                                                      Tensor._meta(weight.shape, weight.dtype)))


def _prelu_cost(a):
    input, weight = a.input, a.weight
    return Cost(flops=2 * S.numel(input.shape), bytes_read=nbytes(input) + nbytes(weight),
                bytes_written=nbytes(_prelu_meta(input, weight)), workspace=temporaries(2, input.shape, input.dtype))


@register("prelu", family="pointwise", functional=True, aten=["aten::prelu.default", "aten::_prelu_kernel.default"],
          meta=lambda a: _prelu_meta(a.input, a.weight), cost=_prelu_cost, bound=True, methods=("prelu",))
def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """x where x > 0, weight * x elsewhere; a weight per channel (dim 1) or one for all."""
    _prelu_meta(input, weight)
    if S.numel(weight.shape) != 1 and input.ndim > 1:
        weight = weight.reshape((-1,) + (1,) * (input.ndim - 2))
    elif weight.ndim:
        weight = weight.reshape(())
    with scratch_scope():
        positive = input > 0
        scaled = weight * input
    return op_impl("where")(positive, input, scaled)


def _check_rrelu(input, lower, upper) -> TensorMeta:
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"rrelu: expected a floating-point input, got {input.dtype.name}")
    if lower > upper:
        raise RuntimeError(f"Lower bound should be less than or equal to the upper bound, got lower={lower} and "
                           f"upper={upper}")
    return TensorMeta(tuple(input.shape), input.dtype)


def _rrelu_meta(a):
    return _check_rrelu(a.input, a.lower, a.upper)


def _rrelu_cost(a):
    input = a.input
    return Cost(flops=3 * S.numel(input.shape), bytes_read=nbytes(input), bytes_written=nbytes(input),
                workspace=temporaries(2, input.shape, input.dtype) if a.training else 0)


@register("rrelu", family="random", aten=["aten::rrelu.default"], meta=_rrelu_meta, cost=_rrelu_cost, bound=True,
          methods=("rrelu",), functional=True, variants=(INPLACE,))
def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
          inplace: bool = False, generator=None) -> Tensor:
    """Leaky ReLU with the slope (lower + upper) / 2 in evaluation; in training each non-positive element
    takes a slope drawn uniformly from [lower, upper]."""
    _check_rrelu(input, lower, upper)
    if not training:
        return get("leaky_relu").impl(input, (lower + upper) / 2, inplace)
    with scratch_scope():
        slopes = new_tensor(input.shape, input.dtype, input.device).uniform_(lower, upper, generator=generator)
        scaled = input * slopes
    result = op_impl("where")(input > 0, input, scaled)
    return input.copy_(result) if inplace else result


# ---- channel dropout, channel shuffle ------------------------------------------------------------

def _feature_dropout(input: Tensor, p: float, training: bool, inplace: bool, batched: bool, op: str) -> Tensor:
    if not 0 <= p <= 1:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0:
        return input
    _check_float(input, op)
    if p == 1:
        return input.zero_() if inplace else input.new_zeros(input.shape)
    lead = 2 if batched else 1
    with scratch_scope():
        keep = new_tensor(tuple(input.shape[:lead]) + (1,) * (input.ndim - lead), input.dtype, input.device)
        keep.bernoulli_(1 - p).div_(1 - p)
    return input.mul_(keep) if inplace else input * keep


def _dropout_nd(nd: int):
    name = f"dropout{nd}d"

    def batched(input) -> bool:
        ndim = len(input.shape)
        if nd == 1 and ndim not in (2, 3):
            raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {ndim}D input. Note that "
                               "dropout1d exists to provide channel-wise dropout on inputs with 1 spatial dimension, "
                               "a channel dimension, and an optional batch dimension (i.e. 2D or 3D inputs).")
        if nd == 3 and ndim not in (4, 5):
            raise RuntimeError(f"dropout3d: Expected 4D or 5D input, but received a {ndim}D input. dropout3d exists "
                               "to provide channel-wise dropout on inputs with 3 spatial dimensions, a channel "
                               "dimension, and an optional batch dimension (i.e. 4D or 5D inputs).")
        if nd == 2 and ndim < 2:
            raise RuntimeError(f"dropout2d: Expected at least a 2D input (channels and positions), got {ndim}D")
        # dropout2d takes a 3D input as a batch of channels with one spatial dimension, as torch's does
        return ndim != nd + 1 or nd == 2

    def meta(a):
        batched(a.input)
        return TensorMeta(tuple(a.input.shape), a.input.dtype)

    def cost(a):
        input = a.input
        lead = S.numel(input.shape[:2])
        return Cost(flops=S.numel(input.shape), bytes_read=nbytes(input), bytes_written=nbytes(input),
                    workspace=workspace_bytes(lead * input.dtype.itemsize) if a.training else 0)

    def impl(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
        return _feature_dropout(input, p, training, inplace, batched(input), name)
    impl.__doc__ = (f"``nn.functional.{name}``: in training, zero whole channels with probability ``p`` and scale "
                    "the rest by 1 / (1 - p); otherwise (inference) return ``input`` itself.")
    return register(name, family="random", aten=[f"nbx::{name}"], meta=meta, cost=cost, bound=True, api=(),
                    functional=True)(impl)


dropout1d, dropout2d, dropout3d = (_dropout_nd(nd) for nd in (1, 2, 3))


@register("feature_dropout", family="random", aten=["aten::feature_dropout.default"],
          meta=lambda a: TensorMeta(tuple(a.input.shape), a.input.dtype),
          cost=lambda a: Cost(bytes_read=nbytes(a.input), bytes_written=nbytes(a.input)), bound=True)
def feature_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """ATen's channel dropout: whole (sample, channel) slices zeroed in training."""
    return _feature_dropout(input, p, train, False, True, "feature_dropout")


def _shuffle_meta(input, groups):
    if len(input.shape) < 3:
        raise RuntimeError(f"channel_shuffle expects input to have at least 3 dimensions, but got input with sizes "
                           f"{list(input.shape)}")
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{groups}")
    if input.shape[1] % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {input.shape[1]} channels and "
                           f"{groups} groups.")
    return TensorMeta(tuple(input.shape), input.dtype)


@register("channel_shuffle", family="shape", functional=True, aten=["aten::channel_shuffle.default",
                                                    "aten::native_channel_shuffle.default"],
          meta=lambda a: _shuffle_meta(a.input, a.groups),
          cost=lambda a: Cost(bytes_read=nbytes(a.input), bytes_written=nbytes(a.input)), bound=True,
          api=("channel_shuffle", "native_channel_shuffle"))
def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """Channels (n, C) read as (n, groups, C / groups) and written transposed: one copy."""
    _shuffle_meta(input, groups)
    n, c = input.shape[:2]
    grouped = input.reshape((n, groups, c // groups, *input.shape[2:]))
    return grouped.transpose(1, 2).contiguous().reshape(tuple(input.shape))


# ---- embedding_bag -------------------------------------------------------------------------------

_BAG_MODES = ("sum", "mean", "max")


def _bag_count(input, offsets, include_last_offset) -> int:
    if len(input.shape) == 2:
        return input.shape[0]
    return offsets.shape[0] - (1 if include_last_offset else 0)


def _embedding_bag_result(input, weight, offsets, mode, per_sample_weights, include_last_offset):
    if input.dtype.name not in ("int32", "int64"):
        raise RuntimeError(f"embedding_bag: expected input of dtype int64 or int32, got {input.dtype.name}")
    if len(weight.shape) != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension {len(weight.shape)}")
    if mode not in _BAG_MODES:
        raise ValueError(f"mode has to be one of sum, mean or max, got {mode!r}")
    if per_sample_weights is not None:
        if mode != "sum":
            raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                      f"supported for mode='sum' (got mode='{mode}'). Please open a feature request "
                                      "on GitHub.")
        if tuple(per_sample_weights.shape) != tuple(input.shape):
            raise ValueError(f"embedding_bag: If per_sample_weights ({tuple(per_sample_weights.shape)}) is not None, "
                             f"then it must have the same shape as the input ({tuple(input.shape)})")
    if len(input.shape) == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is a mini-batch of "
                             "fixed length sequences. However, found offsets of type Tensor")
    elif len(input.shape) == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if len(offsets.shape) != 1:
            raise ValueError("offsets has to be a 1D Tensor")
        if offsets.dtype.name not in ("int32", "int64"):
            raise RuntimeError(f"embedding_bag: expected offsets of dtype int64 or int32, got {offsets.dtype.name}")
        if include_last_offset and offsets.shape[0] < 1:
            raise RuntimeError("include_last_offset: number of offsets should be at least 1")
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {len(input.shape)}")
    return TensorMeta((_bag_count(input, offsets, include_last_offset), weight.shape[1]), weight.dtype)


def _embedding_bag_meta(a):
    return _embedding_bag_result(a.input, a.weight, a.offsets, a.mode, a.per_sample_weights, a.include_last_offset)


def _embedding_bag_cost(a):
    input, weight = a.input, a.weight
    out = _embedding_bag_meta(a)
    count = S.numel(input.shape)
    rows = count * weight.shape[1]
    wide = max(weight.dtype.itemsize, 4)  # sums of half-precision rows accumulate in float32
    return Cost(flops=2 * rows, bytes_read=rows * weight.dtype.itemsize + nbytes(input), bytes_written=nbytes(out),
                workspace=workspace_bytes(*[count * 8] * 6, rows * weight.dtype.itemsize, rows * wide, rows * wide,
                                          rows * 8, *[(out.shape[0] + 1) * weight.shape[1] * wide] * 2,
                                          *[(out.shape[0] + 1) * wide] * 2))


@register("embedding_bag", family="indexing", functional=True, aten=["nbx::embedding_bag"], meta=_embedding_bag_meta,
          cost=_embedding_bag_cost, bound=True, api=())
def embedding_bag(input: Tensor, weight: Tensor, offsets=None, max_norm=None, norm_type: float = 2,
                  scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights=None, include_last_offset: bool = False, padding_idx=None) -> Tensor:
    """Sums, means or maxima of bags of embedding rows: the rows of a 2-D ``input``, or the runs of a 1-D
    ``input`` that ``offsets`` start. An empty bag gives zeros; ``padding_idx`` entries take no part."""
    meta = _embedding_bag_result(input, weight, offsets, mode, per_sample_weights, include_last_offset)
    if max_norm is not None:
        raise NotImplementedError("embedding_bag: max_norm rewrites rows of weight in place; renormalise the weight "
                                  "once (nbx.renorm) and call without max_norm")
    bags, width = meta.shape
    if padding_idx is not None:
        rows = weight.shape[0]
        if not -rows <= padding_idx < rows:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx %= rows
    with scratch_scope():
        flat = input.reshape(-1).to("int64")
        count = flat.shape[0]
        positions = op_impl("arange")(count, dtype="int64", device=input.device)
        if input.ndim == 2:
            bag = positions // max(input.shape[1], 1)
        else:
            starts = offsets.to("int64")
            if not include_last_offset:
                # a position past every offset still belongs to the last bag; the sentinel keeps it there
                starts = op_impl("cat")([starts, starts.new_full((1,), count + 1)])
            bag = op_impl("searchsorted")(starts, positions, right=True) - 1
            # positions before offsets[0] or from the last offset on (include_last_offset) go to no bag
            bag = op_impl("where")((bag < 0) | (bag >= bags), bags, bag)
        if padding_idx is not None:
            bag = op_impl("where")(flat == padding_idx, bags, bag)
        gathered = op_impl("index_select")(weight, 0, flat)
        if mode == "max":
            target = weight.new_zeros((bags + 1, width))
            filled = op_impl("scatter_reduce")(target, 0, bag.unsqueeze(1).expand(count, width), gathered, "amax",
                                          include_self=False)
        else:
            # half-precision sums accumulate in float32 and round once at the end
            wide = _F32 if weight.dtype.is_floating_point and weight.dtype.itemsize < 4 else weight.dtype
            gathered = gathered.to(wide)
            if per_sample_weights is not None:
                gathered = gathered * per_sample_weights.reshape(-1, 1).to(wide)
            filled = op_impl("zeros")((bags + 1, width), dtype=wide, device=weight.device).index_add_(0, bag, gathered)
            if mode == "mean":
                sizes = filled.new_zeros((bags + 1,)).index_add_(0, bag, filled.new_ones((count,)))
                filled = filled / sizes.clamp_min(1).unsqueeze(1)
    kept = filled[:bags]
    return kept.to(weight.dtype) if kept.dtype is not weight.dtype else kept.clone()



# ---- samples ---------------------------------------------------------------------------------------

_DRAWN = dict(compare="metadata")  # random draws: shapes and dtypes only
_SAMPLES = {
    "normalize": Samples((sample(operand(2, 3)), sample(operand(3, 2, layout="transposed"), 1.0, 0),
                          sample(operand(0, 3)), sample(operand(2, 4, dtype="bfloat16"), 3.0, -1))),
    "cosine_similarity": Samples((sample(operand(2, 3), operand(2, 3)), sample(operand(3, 2, layout="transposed"), operand(3, 2), 0),
                                  sample(operand(2, 3), operand(3)))),
    "pairwise_distance": Samples((sample(operand(2, 3), operand(2, 3)), sample(operand(2, 3), operand(3), 1.0, keepdim=True),
                                  sample(operand(3), operand(3), 3.0))),
    "cdist": Samples((sample(operand(2, 3), operand(4, 3)), sample(operand(2, 2, 3), operand(2, 3, 3), 1.0),
                      sample(operand(3, 2, layout="transposed"), operand(1, 2), 0.0))),
    "instance_norm": Samples((sample(operand(2, 3, 4)), sample(operand(1, 2, 2, 3), weight=operand(2), bias=operand(2)))),
    "local_response_norm": Samples((sample(operand(1, 4, 3), 2), sample(operand(2, 3, 2, 2), 3, 1e-3, 0.5, 2.0))),
    "prelu": Samples((sample(operand(2, 3, 2), operand(3)), sample(operand(2, 3), operand(1)),
                      sample(operand(12, values="edge"), operand(1))),
                     lambda x, weight: np.where(x >= 0, x, x * np.reshape(weight, (-1,) + (1,) * max(x.ndim - 2, 0))
                                                if x.ndim > 1 else x * weight)),
    "rrelu": Samples((sample(operand(2, 3)), sample(operand(2, 3), 0.1, 0.3, True, **_DRAWN))),
    "rrelu_": Samples((sample(operand(2, 3)), sample(operand(2, 3), 0.1, 0.3, True, **_DRAWN))),
    "dropout1d": Samples((sample(operand(2, 3, 4), 0.5, **_DRAWN), sample(operand(2, 3, 4), 0.5, False))),
    "dropout2d": Samples((sample(operand(2, 3, 2, 2), 0.5, **_DRAWN), sample(operand(2, 3, 2, 2), 0.5, False))),
    "dropout3d": Samples((sample(operand(1, 2, 2, 2, 2), 0.5, **_DRAWN), sample(operand(1, 2, 2, 2, 2), 0.5, False))),
    "feature_dropout": Samples((sample(operand(2, 3, 2), 0.5, True, **_DRAWN), sample(operand(2, 3, 2), 0.5, False))),
    "channel_shuffle": Samples((sample(operand(1, 4, 2), 2), sample(operand(2, 6, 1, 1), 3)),
                               lambda x, groups: np.reshape(np.swapaxes(np.reshape(
                                   x, (x.shape[0], groups, -1) + x.shape[2:]), 1, 2), x.shape)),
    "embedding_bag": Samples((sample(operand(2, 3, dtype="int64", values="index", domain=(0, 5)), operand(5, 2)),
                              sample(operand(2, 4, dtype="int64", values="index", domain=(0, 5)), operand(5, 2), mode="sum"),
                              sample(operand(2, 2, dtype="int64", values="index", domain=(0, 4)), operand(4, 3), mode="max"))),
}
for _family in ("normalization", "pointwise", "random", "shape", "indexing"):
    family_samples(_family, by_name(_SAMPLES))
