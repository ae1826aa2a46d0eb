"""More of torch's breadth, each composed of registry ops: the ``*_copy`` forms of the views (the view,
then a row-major copy of it, as ATen's functionalisation emits them); the ``atleast_*d`` views and the
stacks built on them; small pointwise and reduction composites (``trace``, ``logaddexp2``, ``heaviside``,
``float_power``, ``dist`` ...), their intermediates the op's temporaries."""
from __future__ import annotations

import math

import numpy as np

from .. import shape as S
from ..allocation import scratch_scope
from ..dtypes import get_dtype
from ..promotion import result_type
from ..tensor import Tensor
from .nn_composites import _float_dtype, temporaries
from .registry import Cost, TensorMeta, VIEW, family_samples, get, nbytes, op_impl, register, samples_of
from .samples import Samples, by_name, operand, sample, unary_samples
from .views import NO_COST, view_op

_CONTIGUOUS = S.MEMORY_FORMATS["contiguous_format"]


def _meta_tensor(x) -> Tensor:
    return Tensor._meta(tuple(x.shape), x.dtype)


def _is_sequence(value) -> bool:
    """A list or tuple of tensors; a ``TensorMeta`` (a named tuple) stands for one tensor."""
    return isinstance(value, (list, tuple)) and not isinstance(value, TensorMeta)


def _tensor_list(tensors):
    return list(tensors[0]) if len(tensors) == 1 and _is_sequence(tensors[0]) else list(tensors)


def _total_bytes(meta) -> int:
    return nbytes(meta) if isinstance(meta, TensorMeta) else sum(nbytes(m) for m in meta)


# ---- the *_copy views ------------------------------------------------------------------------------

def _copied(out):
    if isinstance(out, Tensor):
        return op_impl("clone")(out, memory_format=_CONTIGUOUS)
    return tuple(_copied(o) for o in out)


def _copy_of(view_name: str | None, name: str, aten):
    """Register ``name`` as ``view_name``'s view copied to fresh row-major storage (None: the input itself)."""
    view = get(view_name) if view_name else None

    def meta(x, *args, **kwargs):
        return view.meta(x, *args, **kwargs) if view else get("clone").meta(x)

    def cost(x, *args, **kwargs):
        moved = _total_bytes(meta(x, *args, **kwargs))
        return Cost(bytes_read=moved, bytes_written=moved)

    def impl(x: Tensor, *args, **kwargs):
        return _copied(view.impl(x, *args, **kwargs) if view else x)
    impl.__doc__ = f"``{view_name or 'alias'}``'s result as a new row-major tensor that shares no storage."
    return register(name, family="copy", aten=aten, meta=meta, cost=cost)(impl)


alias_copy = _copy_of(None, "alias_copy", ["aten::alias_copy.default"])
as_strided_copy = _copy_of("as_strided", "as_strided_copy", ["aten::as_strided_copy.default"])
diagonal_copy = _copy_of("diagonal", "diagonal_copy", ["aten::diagonal_copy.default"])
expand_copy = _copy_of("expand", "expand_copy", ["aten::expand_copy.default"])
narrow_copy = _copy_of("narrow", "narrow_copy", ["aten::narrow_copy.default"])
permute_copy = _copy_of("permute", "permute_copy", ["aten::permute_copy.default"])
squeeze_copy = _copy_of("squeeze", "squeeze_copy", ["aten::squeeze_copy.default", "aten::squeeze_copy.dim",
                                                    "aten::squeeze_copy.dims"])
t_copy = _copy_of("t", "t_copy", ["aten::t_copy.default"])
transpose_copy = _copy_of("transpose", "transpose_copy", ["aten::transpose_copy.int"])
unsqueeze_copy = _copy_of("unsqueeze", "unsqueeze_copy", ["aten::unsqueeze_copy.default"])
view_copy = _copy_of("view", "view_copy", ["aten::view_copy.default", "aten::view_copy.dtype"])
unfold_copy = _copy_of("unfold", "unfold_copy", ["aten::unfold_copy.default"])
unbind_copy = _copy_of("unbind", "unbind_copy", ["aten::unbind_copy.int"])
split_with_sizes_copy = _copy_of("split_with_sizes", "split_with_sizes_copy", ["aten::split_with_sizes_copy.default"])


# ---- atleast_*d, column_stack, dstack, rot90, diagflat, unsafe_chunk/split --------------------------

def _atleast_shape(shape: tuple, n: int) -> tuple:
    if len(shape) >= n:
        return shape
    if n == 3 and len(shape) > 0:  # numpy's rule: a row (n) becomes (1, n, 1), a matrix (m, n) becomes (m, n, 1)
        return ((1,) + shape + (1,)) if len(shape) == 1 else shape + (1,)
    return (1,) * (n - len(shape)) + shape


def _atleast(n: int):
    def meta(a):
        metas = tuple(TensorMeta(_atleast_shape(tuple(t.shape), n), t.dtype) for t in _tensor_list(a.tensors))
        return metas[0] if len(a.tensors) == 1 and not _is_sequence(a.tensors[0]) else metas

    def impl(*tensors):
        views = tuple(t.reshape(_atleast_shape(tuple(t.shape), n)) for t in _tensor_list(tensors))
        return views[0] if len(tensors) == 1 and not isinstance(tensors[0], (list, tuple)) else views
    impl.__doc__ = f"Each tensor viewed with at least {n} dimensions (one tensor in, one out; several, a tuple)."
    return register(f"atleast_{n}d", family="view", aten=[f"aten::atleast_{n}d.default", f"aten::atleast_{n}d.Sequence"],
                    meta=meta, cost=lambda a: NO_COST, bound=True, aliases=VIEW)(impl)


atleast_1d, atleast_2d, atleast_3d = _atleast(1), _atleast(2), _atleast(3)


def _stack_meta(shapes, dim, dtypes):
    out = list(shapes[0])
    out[dim] = sum(s[dim] for s in shapes)
    return TensorMeta(tuple(out), result_type(*[Tensor._meta((), d) for d in dtypes]))


def _column_shape(shape):
    return (S.numel(shape), 1) if len(shape) <= 1 else tuple(shape)


def _column_stack_meta(tensors):
    return _stack_meta([_column_shape(tuple(t.shape)) for t in tensors], 1, [t.dtype for t in tensors])


def _dstack_meta(tensors):
    return _stack_meta([_atleast_shape(tuple(t.shape), 3) for t in tensors], 2, [t.dtype for t in tensors])


def _stacked_cost(stack_meta):
    """The cost rule, of bound arguments, of a stack of ``tensors`` whose result ``stack_meta`` gives."""
    return lambda a: Cost(bytes_read=sum(nbytes(t) for t in a.tensors), bytes_written=nbytes(stack_meta(a.tensors)))


@register("column_stack", family="shape", aten=["aten::column_stack.default"],
          meta=lambda a: _column_stack_meta(a.tensors), cost=_stacked_cost(_column_stack_meta), bound=True)
def column_stack(tensors) -> Tensor:
    """The tensors side by side as columns: 0-d and 1-d ones as single columns, the rest joined on dim 1."""
    return op_impl("cat")([t.reshape(_column_shape(tuple(t.shape))) for t in tensors], 1)


@register("dstack", family="shape", aten=["aten::dstack.default"], meta=lambda a: _dstack_meta(a.tensors),
          cost=_stacked_cost(_dstack_meta), bound=True)
def dstack(tensors) -> Tensor:
    """The tensors, each seen as at least 3-d (``atleast_3d``), joined along dim 2."""
    return op_impl("cat")(list(atleast_3d.impl(list(tensors))), 2)


def _rot90_dims(ndim, k, dims):
    dims = list(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {ndim}")
    d0, d1 = S.wrap_dim(dims[0], ndim), S.wrap_dim(dims[1], ndim)
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}")
    return k % 4, d0, d1


def _rot90_meta(input, k, dims):
    k, d0, d1 = _rot90_dims(len(input.shape), k, dims)
    shape = list(input.shape)
    if k % 2:
        shape[d0], shape[d1] = shape[d1], shape[d0]
    return TensorMeta(tuple(shape), input.dtype)


@register("rot90", family="shape", aten=["aten::rot90.default"], meta=lambda a: _rot90_meta(a.input, a.k, a.dims),
          cost=lambda a: Cost(bytes_read=nbytes(a.input), bytes_written=nbytes(a.input)), bound=True,
          methods=("rot90",))
def rot90(input: Tensor, k: int = 1, dims=(0, 1)) -> Tensor:
    """``input`` rotated by k quarter turns in the plane of ``dims``, from the first towards the second:
    one flip, then a transposed view of it, as a new tensor."""
    k, d0, d1 = _rot90_dims(input.ndim, k, dims)
    if k == 0:
        return input.clone()
    if k == 2:
        return op_impl("flip")(input, (d0, d1))
    return op_impl("flip")(input, (d1 if k == 1 else d0,)).transpose(d0, d1)


def _flattened(input) -> Tensor:
    return Tensor._meta((S.numel(input.shape),), input.dtype)


@register("diagflat", family="shape", aten=["aten::diagflat.default"],
          meta=lambda a: get("diag").meta(_flattened(a.input), a.offset),
          cost=lambda a: get("diag").cost(_flattened(a.input), a.offset), bound=True, methods=("diagflat",))
def diagflat(input: Tensor, offset: int = 0) -> Tensor:
    """A square matrix with the flattened input on diagonal ``offset``, zeros elsewhere."""
    return op_impl("diag")(input.reshape(-1), offset)


@view_op("unsafe_chunk", ["aten::unsafe_chunk.default"], methods=("unsafe_chunk",))
def unsafe_chunk(x: Tensor, chunks: int, dim: int = 0):
    """``chunk``: views, as torch's, whose only difference is autograd's bookkeeping."""
    return op_impl("chunk")(x, chunks, dim)


@view_op("unsafe_split", ["aten::unsafe_split.Tensor"], methods=("unsafe_split",))
def unsafe_split(x: Tensor, split_size, dim: int = 0):
    """``split``: views, as torch's, whose only difference is autograd's bookkeeping."""
    return op_impl("split")(x, split_size, dim)


# ---- identities ------------------------------------------------------------------------------------

def _same_meta(x):
    return TensorMeta(tuple(x.shape), x.dtype)


@register("positive", family="view", aten=["aten::positive.default"], meta=lambda a: _same_meta(a.x),
          cost=lambda a: NO_COST, bound=True, methods=("positive",), aliases=VIEW)
def positive(x: Tensor) -> Tensor:
    """``x`` itself (unary plus); refused for bool, as torch's."""
    if x.dtype.name == "bool":
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return x


def _identity(name: str, why: str):
    def impl(x: Tensor) -> Tensor:
        return x
    impl.__doc__ = f"``x`` itself: {why}."
    return register(name, family="view", aten=[f"aten::{name}.default"], meta=lambda a: _same_meta(a.x),
                    cost=lambda a: NO_COST, bound=True, methods=(name,), aliases=VIEW)(impl)


# conj is physical here (there is no lazy conjugate bit to resolve), and negation is too
resolve_conj = _identity("resolve_conj", "nbxtensor's conj is physical, so no tensor has a conjugate bit to resolve")
resolve_neg = _identity("resolve_neg", "nbxtensor's negation is physical, so no tensor has a negative bit to resolve")


# ---- pointwise composites --------------------------------------------------------------------------

def _unary_float_meta(x):
    return TensorMeta(tuple(x.shape), _float_dtype(x.dtype))


def _angle_op(name: str, factor: float, what: str):
    def impl(x: Tensor) -> Tensor:
        return x.to(_float_dtype(x.dtype)) * factor
    impl.__doc__ = f"``x`` {what}, integers taken as the default float dtype."
    return register(name, family="pointwise", aten=[f"aten::{name}.default"],
                    meta=lambda a: _unary_float_meta(a.x),
                    cost=lambda a: Cost(flops=S.numel(a.x.shape), bytes_read=nbytes(a.x),
                                        bytes_written=nbytes(_unary_float_meta(a.x)),
                                        workspace=temporaries(1, a.x.shape, _float_dtype(a.x.dtype))),
                    bound=True, methods=(name,))(impl)


deg2rad = _angle_op("deg2rad", math.pi / 180, "in degrees converted to radians")
rad2deg = _angle_op("rad2deg", 180 / math.pi, "in radians converted to degrees")


def _binary_meta(a, b, dtype=None):
    shape = S.broadcast_shapes(tuple(a.shape), tuple(b.shape))
    return TensorMeta(shape, dtype or _float_dtype(result_type(_meta_tensor(a), _meta_tensor(b))))


def _logaddexp2_cost(bound):
    a, b = bound.a, bound.b
    meta = _binary_meta(a, b)
    return Cost(flops=8 * S.numel(meta.shape), bytes_read=nbytes(a) + nbytes(b), bytes_written=nbytes(meta),
                workspace=temporaries(8, meta.shape, meta.dtype))


@register("logaddexp2", family="pointwise", aten=["aten::logaddexp2.default"],
          meta=lambda bound: _binary_meta(bound.a, bound.b), cost=_logaddexp2_cost, bound=True, methods=("logaddexp2",))
def logaddexp2(a: Tensor, b: Tensor) -> Tensor:
    """``log2(2**a + 2**b)`` without overflow: the larger plus log2(1 + 2**-|a - b|); equal infinities give
    themselves (their difference would be NaN)."""
    meta = _binary_meta(a, b)
    with scratch_scope():
        a, b = a.to(meta.dtype), b.to(meta.dtype)
        larger = op_impl("maximum")(a, b)
        total = larger + op_impl("log1p")(op_impl("exp2")(-(a - b).abs())) * (1 / math.log(2))
        same_infinity = (a == b) & op_impl("isinf")(a)
    return op_impl("where")(same_infinity, a, total).expand(meta.shape).contiguous()


def _heaviside_meta(input, values):
    if input.dtype is not values.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes")
    if input.dtype.is_complex:
        raise RuntimeError("heaviside is not yet implemented for complex tensors.")
    return _binary_meta(input, values, input.dtype)


def _heaviside_cost(a):
    meta = _heaviside_meta(a.input, a.values)
    return Cost(flops=2 * S.numel(meta.shape), bytes_read=nbytes(a.input) + nbytes(a.values),
                bytes_written=nbytes(meta), workspace=temporaries(2, meta.shape, meta.dtype))


@register("heaviside", family="pointwise", aten=["aten::heaviside.default"],
          meta=lambda a: _heaviside_meta(a.input, a.values), cost=_heaviside_cost, bound=True, methods=("heaviside",))
def heaviside(input: Tensor, values: Tensor) -> Tensor:
    """The step function: 0 below zero (and at NaN), 1 above, ``values`` at zero."""
    meta = _heaviside_meta(input, values)
    with scratch_scope():
        step = (input > 0).to(meta.dtype)
        at_zero = input == 0
    return op_impl("where")(at_zero, values, step).expand(meta.shape).contiguous()


def _isreal_meta(x):
    return TensorMeta(tuple(x.shape), get_dtype("bool"))


@register("isreal", family="pointwise", aten=["aten::isreal.default"], meta=lambda a: _isreal_meta(a.x),
          cost=lambda a: Cost(flops=S.numel(a.x.shape), bytes_read=nbytes(a.x), bytes_written=S.numel(a.x.shape)),
          bound=True, methods=("isreal",))
def isreal(x: Tensor) -> Tensor:
    """Whether each element has a zero imaginary part: all true for non-complex tensors."""
    if x.dtype.is_complex:
        return x.imag == 0
    return op_impl("ones")(tuple(x.shape), dtype="bool", device=x.device)


def _float_power_dtype(a, b):
    complex_ = any(isinstance(v, complex) or (isinstance(v, Tensor) or hasattr(v, "dtype")) and v.dtype.is_complex
                   for v in (a, b))
    return get_dtype("complex128" if complex_ else "float64")


def _float_power_meta(a, b):
    shapes = [tuple(v.shape) for v in (a, b) if hasattr(v, "shape")]
    return TensorMeta(S.broadcast_shapes(*shapes), _float_power_dtype(a, b))


def _float_power_cost(bound):
    meta = _float_power_meta(bound.a, bound.b)
    return Cost(flops=S.numel(meta.shape), bytes_read=sum(nbytes(v) for v in (bound.a, bound.b) if hasattr(v, "shape")),
                bytes_written=nbytes(meta), workspace=temporaries(2, meta.shape, meta.dtype))


@register("float_power", family="pointwise", aten=["aten::float_power.Tensor_Tensor", "aten::float_power.Tensor_Scalar",
                                                   "aten::float_power.Scalar"],
          meta=lambda bound: _float_power_meta(bound.a, bound.b), cost=_float_power_cost, bound=True,
          methods=("float_power",))
def float_power(a, b) -> Tensor:
    """``a ** b`` computed in double precision (float64, or complex128 where either is complex), as torch's."""
    dtype = _float_power_meta(a, b).dtype
    with scratch_scope():
        a, b = (v.to(dtype) if isinstance(v, Tensor) else v for v in (a, b))
    return op_impl("pow")(a, b)


# ---- reductions and products -----------------------------------------------------------------------

def _trace_meta(x):
    if len(x.shape) != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {len(x.shape)}")
    return get("sum").meta(Tensor._meta((min(x.shape),), x.dtype))


@register("trace", family="reduction", aten=["aten::trace.default"], meta=lambda a: _trace_meta(a.x),
          cost=lambda a: Cost(flops=min(a.x.shape), bytes_read=min(a.x.shape) * a.x.dtype.itemsize,
                              bytes_written=nbytes(_trace_meta(a.x))), bound=True, methods=("trace",))
def trace(x: Tensor) -> Tensor:
    """The sum of a matrix's main diagonal (integers summed as int64, as ``sum``)."""
    _trace_meta(x)
    return op_impl("sum")(x.diagonal())


def _inner_meta(a, b):
    if len(a.shape) == 0 or len(b.shape) == 0:
        return _binary_meta(a, b, result_type(_meta_tensor(a), _meta_tensor(b)))
    if a.shape[-1] != b.shape[-1]:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but got shapes "
                           f"{list(a.shape)} and {list(b.shape)}")
    return get("tensordot").meta(a, b, ([-1], [-1]))


def _inner_cost(bound):
    a, b = bound.a, bound.b
    return get("mul").cost(a, b) if not (len(a.shape) and len(b.shape)) else get("tensordot").cost(a, b, ([-1], [-1]))


@register("inner", family="matmul", aten=["aten::inner.default"], meta=lambda bound: _inner_meta(bound.a, bound.b),
          cost=_inner_cost, bound=True, methods=("inner",))
def inner(a: Tensor, b: Tensor) -> Tensor:
    """The sum of products over the last dimension of both (a product where either is 0-d)."""
    _inner_meta(a, b)
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    return op_impl("tensordot")(a, b, ([-1], [-1]))


def _dist_meta(a, b):
    return TensorMeta((), _binary_meta(a, b).dtype)


def _dist_cost(a, b):
    difference = _binary_meta(a, b)
    return Cost(flops=3 * S.numel(difference.shape), bytes_read=nbytes(a) + nbytes(b),
                bytes_written=nbytes(_dist_meta(a, b)), workspace=temporaries(1, difference.shape, difference.dtype))


@register("dist", family="reduction", aten=["aten::dist.default"], meta=lambda bound: _dist_meta(bound.a, bound.b),
          cost=lambda bound: _dist_cost(bound.a, bound.b), bound=True, methods=("dist",))
def dist(a: Tensor, b: Tensor, p=2) -> Tensor:
    """The p-norm of ``a - b`` over all elements."""
    with scratch_scope():
        difference = a - b
    return op_impl("linalg.vector_norm")(difference, p)


# ---- torch.nn.functional: softmin, the shrinks, the deprecated upsample aliases ---------------------

def _pointwise_cost(count: int):
    """The cost rule, of bound arguments, of ``count`` elementwise passes over ``input``."""
    def cost(a):
        input = a.input
        return Cost(flops=count * S.numel(input.shape), bytes_read=nbytes(input), bytes_written=nbytes(input),
                    workspace=temporaries(count, input.shape, input.dtype))
    return cost


def _of_input(a):
    """A meta rule of bound arguments: ``input``'s shape and dtype."""
    return _same_meta(a.input)


@register("softmin", family="normalization", functional=True, aten=["nbx::softmin"],
          meta=lambda a: get("softmax").meta(a.input, a.dim, a.dtype), cost=_pointwise_cost(2), bound=True, api=())
def softmin(input: Tensor, dim=None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """``softmax(-input)`` along ``dim``."""
    with scratch_scope():
        negated = -input
    return op_impl("softmax")(negated, dim, dtype)


@register("hardshrink", family="pointwise", aten=["aten::hardshrink.default"], meta=_of_input,
          cost=_pointwise_cost(3), bound=True, methods=("hardshrink",), api=(), functional=True)
def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """0 inside [-lambd, lambd], ``input`` elsewhere (NaN included)."""
    with scratch_scope():
        inside = (input >= -lambd) & (input <= lambd)
    return op_impl("where")(inside, 0, input).to(input.dtype)


@register("softshrink", family="pointwise", aten=["aten::softshrink.default"], meta=_of_input,
          cost=_pointwise_cost(5), bound=True, api=(), functional=True)
def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``input`` moved lambd towards zero, 0 inside [-lambd, lambd]; NaN stays NaN."""
    if lambd < 0:
        raise RuntimeError(f"lambda must be greater or equal to 0, but found to be {lambd}.")
    with scratch_scope():
        below = op_impl("where")(input < -lambd, input + lambd, input * 0)
    return op_impl("where")(input > lambd, input - lambd, below).to(input.dtype)


@register("tanhshrink", family="pointwise", aten=["nbx::tanhshrink"], meta=_of_input, cost=_pointwise_cost(2),
          bound=True, api=(), functional=True)
def tanhshrink(input: Tensor) -> Tensor:
    """``input - tanh(input)``."""
    with scratch_scope():
        squashed = op_impl("tanh")(input)
    return input - squashed


@register("upsample_nearest", family="resample", functional=True, aten=["nbx::upsample_nearest"],
          meta=lambda a: get("interpolate").meta(a.input, a.size, a.scale_factor, "nearest"),
          cost=lambda a: get("interpolate").cost(a.input, a.size, a.scale_factor, "nearest"), bound=True, api=())
def upsample_nearest(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """torch's deprecated alias: ``interpolate(mode="nearest")``."""
    return op_impl("interpolate")(input, size, scale_factor, "nearest")


@register("upsample_bilinear", family="resample", functional=True, aten=["nbx::upsample_bilinear"],
          meta=lambda a: get("interpolate").meta(a.input, a.size, a.scale_factor, "bilinear", True),
          cost=lambda a: get("interpolate").cost(a.input, a.size, a.scale_factor, "bilinear", True), bound=True,
          api=())
def upsample_bilinear(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """torch's deprecated alias: ``interpolate(mode="bilinear", align_corners=True)``."""
    return op_impl("interpolate")(input, size, scale_factor, "bilinear", True)



# ---- samples ---------------------------------------------------------------------------------------

def _copy_samples(op):
    """A ``*_copy`` op takes its view's samples and reference."""
    if not op.name.endswith("_copy") or op.impl.__doc__ is None or "row-major" not in op.impl.__doc__:
        return None
    if op.name == "alias_copy":
        return Samples(unary_samples(("float32", "int64")), np.copy)
    return samples_of(get(op.name.removesuffix("_copy")))


def _softmin_reference(x, dim=None, _stacklevel=3, dtype=None):
    shifted = np.exp(-(x - np.min(x, axis=dim, keepdims=True)))
    return shifted / np.sum(shifted, axis=dim, keepdims=True)


def _shrink(x, lambd=0.5, soft=False):
    kept = ~(np.abs(x) <= lambd)  # NaN is kept, as ATen keeps it
    return np.where(kept, x - np.sign(x) * lambd if soft else x, 0.0)


_MATRIX, _TRANSPOSED = operand(2, 3), operand(3, 2, layout="transposed")
_LISTS = (sample([_MATRIX, operand(2, 3)]), sample([operand(3), operand(3, dtype="int64")]),
          sample([operand(0, 3), operand(0, 3)]), sample([operand(2, 4, layout="sliced"), operand(2, 4)]))
_SAMPLES = {
    "atleast_1d": Samples((sample(operand()), sample(_TRANSPOSED), sample(operand(0)), sample(operand(), operand(2))),
                          lambda *xs: np.atleast_1d(*xs) if len(xs) == 1 else tuple(np.atleast_1d(*xs))),
    "atleast_2d": Samples((sample(operand()), sample(operand(3)), sample(_TRANSPOSED), sample(operand(0))),
                          np.atleast_2d),
    "atleast_3d": Samples((sample(operand()), sample(operand(3)), sample(_TRANSPOSED), sample(operand(0, 2))),
                          np.atleast_3d),
    "column_stack": Samples((sample([_MATRIX, operand(2)]), sample([operand(3), operand(3, dtype="int64")]),
                             sample([operand(0, 3), operand(0)])), np.column_stack),
    "dstack": Samples(_LISTS, np.dstack),
    "rot90": Samples((sample(_MATRIX), sample(_TRANSPOSED, 2), sample(operand(2, 3, 2), -1, (1, 2)),
                      sample(operand(0, 3), 3), sample(operand(2, 4, dtype="int64", layout="sliced"), 1, (1, 0))),
                     lambda x, k=1, dims=(0, 1): np.rot90(x, k, dims)),
    "diagflat": Samples((sample(_MATRIX), sample(operand(3), 1), sample(operand(), -1), sample(operand(0)),
                         sample(operand(2, 4, dtype="int64", layout="sliced"))),
                        lambda x, offset=0: np.diagflat(x, offset)),
    "unsafe_chunk": Samples((sample(operand(5, 2), 2), sample(_TRANSPOSED, 3, 1)), samples_of(get("chunk")).reference),
    "unsafe_split": Samples((sample(operand(5, 2), 2), sample(_TRANSPOSED, 1, 1)), samples_of(get("split")).reference),
    "positive": Samples(unary_samples(("float32", "int64")), np.positive),
    "resolve_conj": Samples(unary_samples(("float32", "complex64")), np.copy),
    "resolve_neg": Samples(unary_samples(("float32", "complex64")), np.copy),
    "deg2rad": Samples(unary_samples(("float32", "int64")), lambda x: np.deg2rad(np.asarray(x, np.float64))),
    "rad2deg": Samples(unary_samples(("float32", "int64")), lambda x: np.rad2deg(np.asarray(x, np.float64))),
    "logaddexp2": Samples((sample(_MATRIX, operand(3)), sample(_TRANSPOSED, operand(2)), sample(operand(), operand()),
                           sample(operand(0, 3), operand(3)), sample(operand(12, values="edge"), operand(12))),
                          np.logaddexp2),
    "heaviside": Samples((sample(operand(2, 3, values="index", domain=(0, 2)), operand(3)),
                          sample(_TRANSPOSED, operand(2)), sample(operand(0, 3), operand(3)),
                          sample(operand(4, dtype="int64", layout="sliced"), operand(4, dtype="int64")),
                          sample(operand(12, values="edge"), operand(12))),
                         lambda x, values: np.where(x == 0, values, x > 0)),  # as ATen: NaN is not above 0
    "isreal": Samples(unary_samples(("float32", "complex64")), np.isreal),
    "float_power": Samples((sample(operand(2, 3, values="positive"), operand(3)), sample(_TRANSPOSED, 2),
                            sample(operand(values="positive"), operand(dtype="int64")), sample(operand(0, 3), operand(3)),
                            sample(operand(4, dtype="int64", layout="sliced", values="positive"), 0.5)),
                           lambda a, b: np.power(np.asarray(a, np.float64), b)),
    "trace": Samples((sample(_MATRIX), sample(_TRANSPOSED), sample(operand(0, 3)),
                      sample(operand(2, 4, dtype="int64", layout="sliced"))), lambda x: np.asarray(np.trace(x))),
    "inner": Samples((sample(_MATRIX, operand(4, 3)), sample(operand(3), operand(3)), sample(operand(), _MATRIX),
                      sample(operand(0, 3), operand(2, 3)), sample(operand(2, 4, dtype="int64", layout="sliced"),
                                                                   operand(4, dtype="int64"))), np.inner),
    "dist": Samples((sample(_MATRIX, operand(3)), sample(_TRANSPOSED, operand(3, 2), 1), sample(operand(), operand(), 3),
                     sample(operand(0, 3), operand(3)), sample(_MATRIX, _MATRIX, math.inf)),
                    lambda a, b, p=2: np.asarray(np.max(np.abs(a - b)) if p == math.inf
                                                 else np.sum(np.abs(a - b) ** p) ** (1 / p))),
    "softmin": Samples((sample(_MATRIX, 1), sample(_TRANSPOSED, 0), sample(operand(), 0), sample(operand(0, 3), 1),
                        sample(operand(2, 4, dtype="float64", layout="sliced"), -1)), _softmin_reference),
    "hardshrink": Samples(unary_samples() + (sample(_MATRIX, 1.0),), _shrink),
    "softshrink": Samples(unary_samples() + (sample(_MATRIX, 1.0),),
                          lambda x, lambd=0.5: _shrink(x, lambd, soft=True)),
    "tanhshrink": Samples(unary_samples(), lambda x: x - np.tanh(x)),
    "upsample_nearest": Samples((sample(operand(1, 2, 3), scale_factor=2), sample(operand(1, 1, 2, 3), size=(3, 4)),
                                 sample(operand(2, 1, 3, 2, layout="transposed"), scale_factor=2))),
    "upsample_bilinear": Samples((sample(operand(1, 2, 2, 3), scale_factor=2), sample(operand(1, 1, 2, 3), size=(3, 4)),
                                  sample(operand(2, 1, 3, 2, layout="transposed"), size=(2, 2)))),
}
for _family in ("view", "shape", "pointwise", "reduction", "matmul", "normalization", "resample"):
    family_samples(_family, by_name(_SAMPLES))
family_samples("copy", _copy_samples)
