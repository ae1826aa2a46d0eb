"""torch.linalg's functions composed of registry ops: matrix_power, tensorinv, tensorsolve, multi_dot,
vander, vecdot, diagonal, matrix_exp, and the matrix norms (linalg.matrix_norm, linalg.norm) but for those
of singular values (ord 2, -2, 'nuc'). Their intermediates are the op's temporaries."""
from __future__ import annotations

import builtins
import math

import numpy as np

from .. import shape as S
from ..allocation import scratch_scope
from ..dtypes import get_dtype
from ..tensor import Tensor
from .linalg_lu import _check_float, _check_matrices, _cubic_rules, _type_name
from .registry import Cost, TensorMeta, family_samples, get, nbytes, op_impl, register, workspace_bytes
from .samples import Samples, by_name, operand, sample
from .views import view_op

_F64 = get_dtype("float64")
_I64 = get_dtype("int64")


def _meta_tensor(x) -> Tensor:
    return Tensor._meta(tuple(x.shape), x.dtype)


def _product_for(dtype):
    """The matrix product for ``dtype``: ``matmul``, or for float64 (which it does not take) the small-matrix
    product of ``linalg_lu``."""
    return op_impl("linalg.matrix_product") if dtype is _F64 else op_impl("matmul")


# ---- matrix_power, tensorinv, tensorsolve --------------------------------------------------------------

def _matrix_power_meta(A, n):
    if len(A.shape) < 2:
        raise RuntimeError("linalg.matrix_power: The input tensor A must have at least 2 dimensions.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.matrix_power: A must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")
    if n < 0:
        _check_float(A.dtype, "linalg.inv")
    return TensorMeta(tuple(A.shape), A.dtype)


@register("linalg.matrix_power", family="linalg",
          aten=["aten::linalg_matrix_power.default", "aten::matrix_power.default"],
          api=("matrix_power",), methods=("matrix_power",),
          **_cubic_rules(lambda a: _matrix_power_meta(a.A, a.n)))
def matrix_power(A: Tensor, n: int) -> Tensor:
    """A^n by repeated squaring (the bits of n, lowest first); n = 0 gives the identity, n < 0 powers A^-1."""
    _matrix_power_meta(A, n)
    if n == 0:
        return op_impl("eye")(A.shape[-1], dtype=A.dtype, device=A.device).expand(A.shape).clone()
    with scratch_scope():
        base = op_impl("linalg.inv")(A) if n < 0 else A
    n = abs(n)
    if n == 1:
        return base.clone()
    product = _product_for(A.dtype)
    square = result = None
    while n:
        square = base if square is None else product(square, square)
        if n % 2:
            result = square if result is None else product(result, square)
        n //= 2
    return result


def _tensorinv_meta(A, ind):
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    shape = tuple(A.shape)
    rows, cols = S.numel(shape[:ind]), S.numel(shape[ind:])
    if rows != cols:
        raise RuntimeError("Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {cols} != {rows}")
    _check_float(A.dtype, "linalg.inv")
    return TensorMeta(shape[ind:] + shape[:ind], A.dtype)


@register("linalg.tensorinv", family="linalg", aten=["aten::linalg_tensorinv.default"], api=(),
          **_cubic_rules(lambda a: _tensorinv_meta(a.A, a.ind)))
def tensorinv(A: Tensor, ind: int = 2) -> Tensor:
    """The inverse of A seen as a matrix of prod(shape[:ind]) rows, shaped shape[ind:] + shape[:ind]."""
    meta = _tensorinv_meta(A, ind)
    rows = S.numel(tuple(A.shape[:ind]))
    return op_impl("linalg.inv")(A.reshape(rows, rows)).reshape(meta.shape)


def _tensorsolve_parts(A, B, dims):
    shape = tuple(A.shape)
    if dims is not None:
        moved = [S.wrap_dim(d, len(shape)) for d in dims]
        shape = tuple(n for i, n in enumerate(shape) if i not in moved) + tuple(shape[d] for d in moved)
    result = shape[len(B.shape):]
    rows = S.numel(shape[:len(B.shape)])
    if S.numel(result) != rows:
        raise RuntimeError("Expected self to satisfy the requirement prod(self.shape[other.ndim:]) == "
                           f"prod(self.shape[:other.ndim]), but got {S.numel(result)} != {rows}")
    return result, rows


def _tensorsolve_meta(A, B, dims):
    result, _ = _tensorsolve_parts(A, B, dims)
    _check_float(A.dtype, "linalg.solve")
    return TensorMeta(result, A.dtype)


@register("linalg.tensorsolve", family="linalg", aten=["aten::linalg_tensorsolve.default"],
          api=(), **_cubic_rules(lambda a: _tensorsolve_meta(a.A, a.B, a.dims)))
def tensorsolve(A: Tensor, B: Tensor, dims=None) -> Tensor:
    """X with tensordot(A, X, X.ndim) = B: A's dims ``dims`` moved last, then a square solve."""
    result, rows = _tensorsolve_parts(A, B, dims)
    if dims is not None:
        A = A.movedim(tuple(dims), tuple(range(A.ndim - len(dims), A.ndim)))
    return op_impl("linalg.solve")(A.reshape(rows, rows), B.reshape(rows)).reshape(result)


# ---- multi_dot -------------------------------------------------------------------------------------------

def _chain(tensors):
    """The operands as matrices (a first 1-D one a row, a last 1-D one a column), checked as torch does."""
    tensors = list(tensors)
    if len(tensors) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    for i, t in enumerate(tensors):
        where = "the first tensor" if i == 0 else "the last tensor" if i == len(tensors) - 1 else f"tensor {i}"
        allowed = (1, 2) if i in (0, len(tensors) - 1) else (2,)
        if len(t.shape) not in allowed:
            raise RuntimeError(f"multi_dot(): {where} must be {'1D or 2D' if len(allowed) == 2 else '2D'} but got "
                               f"{len(t.shape)}D")
        if t.dtype is not tensors[0].dtype:
            raise RuntimeError(f"multi_dot(): all tensors must have be the same dtype but tensor 0 is "
                               f"{_type_name(tensors[0].dtype)} and tensor {i} is {_type_name(t.dtype)}")
    shapes = [tuple(t.shape) for t in tensors]
    if len(shapes[0]) == 1:
        shapes[0] = (1,) + shapes[0]
    if len(shapes[-1]) == 1:
        shapes[-1] = shapes[-1] + (1,)
    for i in range(1, len(shapes)):
        if shapes[i - 1][1] != shapes[i][0]:
            raise RuntimeError(f"multi_dot(): tensors {i - 1} and {i} with shapes {list(tensors[i - 1].shape)} and "
                               f"{list(tensors[i].shape)} cannot be multiplied")
    return shapes


def _multi_dot_meta(tensors):
    shapes = _chain(tensors)
    out = tuple(n for n, vector in ((shapes[0][0], len(tensors[0].shape) == 1),
                                    (shapes[-1][1], len(tensors[-1].shape) == 1)) if not vector)
    return TensorMeta(out, tensors[0].dtype)


def _multi_dot_cost(tensors):
    shapes = _chain(tensors)
    out = _multi_dot_meta(tensors)
    flops = 2 * sum(shapes[0][0] * s[0] * s[1] for s in shapes[1:])
    return Cost(flops=flops, bytes_read=sum(nbytes(t) for t in tensors), bytes_written=nbytes(out),
                workspace=len(shapes) * nbytes(TensorMeta((max(s[0] for s in shapes), max(s[1] for s in shapes)),
                                                          out.dtype)))


def _cheapest_order(shapes):
    """The split of every chain i..j that multiplies it in the fewest scalar products (matrix-chain order)."""
    sizes = [s[0] for s in shapes] + [shapes[-1][1]]
    count = len(shapes)
    cost = [[0] * count for _ in range(count)]
    split = [[0] * count for _ in range(count)]
    for length in range(1, count):
        for i in range(count - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                q = cost[i][k] + cost[k + 1][j] + sizes[i] * sizes[k + 1] * sizes[j + 1]
                if q < cost[i][j]:
                    cost[i][j], split[i][j] = q, k
    return split


@register("linalg.multi_dot", family="linalg", aten=["aten::linalg_multi_dot.default"],
          meta=lambda a: _multi_dot_meta(a.tensors), cost=lambda a: _multi_dot_cost(a.tensors), bound=True, api=())
def multi_dot(tensors) -> Tensor:
    """The product of a chain of matrices, in the order of fewest scalar products; a first (last) 1-D operand
    is a row (column) vector, its dim dropped from the result."""
    tensors = list(tensors)
    meta = _multi_dot_meta(tensors)
    shapes = _chain(tensors)
    matrices = [t.reshape(s) for t, s in zip(tensors, shapes)]
    split = _cheapest_order(shapes)
    matmul = _product_for(tensors[0].dtype)

    def product(i, j):
        if i == j:
            return matrices[i]
        return matmul(product(i, split[i][j]), product(split[i][j] + 1, j))
    with scratch_scope():
        chained = product(0, len(matrices) - 1)
    return chained.reshape(meta.shape)


# ---- vander, vecdot, diagonal ---------------------------------------------------------------------------

def _vander_meta(x, N):
    if x.dtype.name == "bool" or x.dtype.storage_only:
        raise RuntimeError(f"linalg.vander supports floating point, complex, and integer tensors, but got "
                           f"{_type_name(x.dtype)}")
    shape = tuple(x.shape) or (1,)  # a 0-d x is one point
    n = shape[-1] if N is None else N
    if n <= 1:
        raise RuntimeError("N must be greater than 1.")
    return TensorMeta(shape + (n,), x.dtype)


def _vander_cost(x, N):
    out = _vander_meta(x, N)
    return Cost(flops=S.numel(out.shape), bytes_read=nbytes(x), bytes_written=nbytes(out))


@register("linalg.vander", family="linalg", aten=["aten::linalg_vander.default"],
          meta=lambda a: _vander_meta(a.x, a.N), cost=lambda a: _vander_cost(a.x, a.N), bound=True, api=())
def vander(x: Tensor, *, N: int | None = None) -> Tensor:
    """The Vandermonde matrix of x's last dim: column j holds x^j, j < N (default len(x)); a running product."""
    meta = _vander_meta(x, N)
    with scratch_scope():
        powers = op_impl("ones")(meta.shape, dtype=x.dtype, device=x.device)
        powers[..., 1:] = x.reshape(*meta.shape[:-1], 1)
    return powers.cumprod(-1, dtype=x.dtype)


def _vecdot_meta(x, y, dim):
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        raise RuntimeError(f"linalg.vecdot: Expected a floating point or complex tensor as input. Got "
                           f"{_type_name(x.dtype)}")
    if x.dtype is not y.dtype:
        raise RuntimeError(f"linalg.vecdot: Expected x and y to have the same dtype, but found x of type "
                           f"{_type_name(x.dtype)} and y of type {_type_name(y.dtype)} instead")
    shape = S.broadcast_shapes(tuple(x.shape), tuple(y.shape))
    d = S.wrap_dim(dim, len(shape))
    return TensorMeta(tuple(n for i, n in enumerate(shape) if i != d), x.dtype)


@register("linalg.vecdot", family="linalg", aten=["aten::linalg_vecdot.default"],
          meta=lambda a: _vecdot_meta(a.x, a.y, a.dim),
          cost=lambda a: Cost(flops=2 * S.numel(a.x.shape), bytes_read=nbytes(a.x) + nbytes(a.y),
                              bytes_written=nbytes(_vecdot_meta(a.x, a.y, a.dim))), bound=True, api=())
def vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
    """sum(conj(x) * y) along ``dim``, x and y broadcast."""
    _vecdot_meta(x, y, dim)
    with scratch_scope():
        products = (x.conj() if x.dtype.is_complex else x) * y
    return products.sum(dim)


@view_op("linalg.diagonal", ["aten::linalg_diagonal.default"], api=())
def linalg_diagonal(A: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """``diagonal`` with the last two dims by default: a view of each matrix's diagonal."""
    return op_impl("diagonal")(A, offset, dim1, dim2)


# ---- matrix_exp ---------------------------------------------------------------------------------------------

# The [13/13] Pade approximant of exp (numerator coefficients; the denominator's alternate in sign) and the
# largest 1-norm it serves to float64 accuracy (Higham, "The scaling and squaring method for the matrix
# exponential revisited", 2005); larger matrices are halved s times and the result squared s times.
_PADE_13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0, 129060195264000.0,
            10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0, 40840800.0, 960960.0, 16380.0, 182.0,
            1.0)
_PADE_13_NORM = 5.371920351148152


def _matrix_exp_meta(A):
    if len(A.shape) < 2 or A.shape[-1] != A.shape[-2]:
        _check_matrices(A, "linalg.matrix_exp")
    if not (A.dtype.is_floating_point or A.dtype.is_complex):
        raise RuntimeError(f"linalg.matrix_exp: Expected a floating point or complex tensor as input. Got "
                           f"{_type_name(A.dtype)}")
    if A.dtype.is_complex:
        raise NotImplementedError(f"linalg.matrix_exp: complex matrices are not supported (got {A.dtype.name})")
    return TensorMeta(tuple(A.shape), A.dtype)


@register("matrix_exp", family="linalg", aten=["aten::linalg_matrix_exp.default", "aten::matrix_exp.default"],
          methods=("matrix_exp",), **_cubic_rules(lambda a: _matrix_exp_meta(a.A)))
def matrix_exp(A: Tensor) -> Tensor:
    """e^A by scaling and squaring around the [13/13] Pade approximant, in float64 whatever A's dtype."""
    _matrix_exp_meta(A)
    if A.numel() == 0:
        return A.clone()
    matmul, n = op_impl("linalg.matrix_product"), A.shape[-1]
    with scratch_scope():
        X = A.to(_F64)
        norm = X.abs().sum(-2).amax().item()
        halvings = builtins.max(0, math.ceil(math.log2(norm / _PADE_13_NORM))) if norm > _PADE_13_NORM else 0
        if halvings:
            X = X / 2.0 ** halvings
        b = _PADE_13
        identity = op_impl("eye")(n, dtype=_F64, device=A.device)
        X2 = matmul(X, X)
        X4 = matmul(X2, X2)
        X6 = matmul(X4, X2)
        odd = matmul(X, matmul(X6, X6 * b[13] + X4 * b[11] + X2 * b[9]) + X6 * b[7] + X4 * b[5] + X2 * b[3]
                     + identity * b[1])
        even = matmul(X6, X6 * b[12] + X4 * b[10] + X2 * b[8]) + X6 * b[6] + X4 * b[4] + X2 * b[2] + identity * b[0]
        result = op_impl("linalg.solve")(even - odd, even + odd)
        for _ in range(halvings):
            result = matmul(result, result)
    return result.to(A.dtype)


# ---- matrix norms --------------------------------------------------------------------------------------------

_SINGULAR_VALUE_ORDS = (2, -2, "nuc")


def _matrix_norm_dims(A, dim, op):
    if len(dim) != 2:
        raise RuntimeError(f"{op}: dim must be a 2-tuple. Got {' '.join(str(d) for d in dim)}")
    if len(A.shape) < 2:
        raise RuntimeError(f"{op}: The input tensor A must have at least 2 dimensions.")
    rows, cols = (S.wrap_dim(d, len(A.shape)) for d in dim)
    if rows == cols:
        raise RuntimeError(f"{op}: dims must be different. Got ({dim[0]}, {dim[1]})")
    return rows, cols


def _matrix_norm_meta(A, ord, dim, keepdim, dtype, op):
    rows, cols = _matrix_norm_dims(A, tuple(dim), op)
    if not (A.dtype.is_floating_point or A.dtype.is_complex):
        raise RuntimeError(f"{op}: Expected a floating point or complex tensor as input. Got {_type_name(A.dtype)}")
    if A.dtype.is_complex:
        raise NotImplementedError(f"{op}: complex matrices are not supported (got {A.dtype.name})")
    if ord not in ("fro", math.inf, -math.inf, 1, -1, *_SINGULAR_VALUE_ORDS):
        raise RuntimeError(f"{op}: Order {ord} not supported.")
    if ord in _SINGULAR_VALUE_ORDS:
        # the singular values' own refusals (16-bit floats, matrices past the kernels' tile)
        get("linalg.svdvals").meta(TensorMeta((A.shape[rows], A.shape[cols]), A.dtype if dtype is None else
                                              get_dtype(dtype)))
    shape = tuple(1 if i in (rows, cols) else n for i, n in enumerate(A.shape) if keepdim or i not in (rows, cols))
    return TensorMeta(shape, A.dtype if dtype is None else get_dtype(dtype))


def _matrix_norm(A: Tensor, ord, dim, keepdim: bool, dtype) -> Tensor:
    rows, cols = _matrix_norm_dims(A, tuple(dim), "linalg.matrix_norm")
    if ord == "fro":
        return op_impl("linalg.vector_norm")(A, 2, (rows, cols), keepdim, dtype=dtype)
    if ord in _SINGULAR_VALUE_ORDS:
        return _singular_value_norm(A, ord, rows, cols, keepdim, dtype)
    with scratch_scope():
        x = A if dtype is None else A.to(dtype)
        # the largest absolute row sum (ord inf) or column sum (ord 1); -inf and -1 take the smallest
        summed, kept = (cols, rows) if abs(ord) == math.inf else (rows, cols)
        sums = x.abs().sum(summed, keepdim=True)
    extreme = sums.amax(kept, keepdim=True) if ord > 0 else sums.amin(kept, keepdim=True)
    return extreme if keepdim else extreme.squeeze((rows, cols))


def _matrix_norm_cost(A, ord, dim, keepdim, dtype):
    out = _matrix_norm_meta(A, ord, dim, keepdim, dtype, "linalg.matrix_norm")
    if ord not in _SINGULAR_VALUE_ORDS:
        return Cost(flops=2 * S.numel(A.shape), bytes_read=nbytes(A), bytes_written=nbytes(out))
    rows, cols = _matrix_norm_dims(A, tuple(dim), "linalg.matrix_norm")
    matrices = TensorMeta(tuple(n for i, n in enumerate(A.shape) if i not in (rows, cols)) +
                          (A.shape[rows], A.shape[cols]), out.dtype)
    values = get("linalg.svdvals").cost(matrices)
    return Cost(flops=values.flops, bytes_read=nbytes(A), bytes_written=nbytes(out),
                workspace=values.workspace + workspace_bytes(nbytes(matrices), nbytes(out)))


def _singular_value_norm(A: Tensor, ord, rows: int, cols: int, keepdim: bool, dtype) -> Tensor:
    """The largest (2) or smallest (-2) singular value, or their sum ('nuc'); 0 for an empty matrix."""
    with scratch_scope():
        x = A if dtype is None else A.to(dtype)
        values = op_impl("linalg.svdvals")(x.movedim((rows, cols), (-2, -1)))
    if ord == "nuc" or values.shape[-1] == 0:
        result = values.sum(-1)
    else:
        result = values.amax(-1) if ord == 2 else values.amin(-1)
    return result.reshape(tuple(1 if i in (rows, cols) else n for i, n in enumerate(A.shape))) if keepdim else result


@register("linalg.matrix_norm", family="linalg", aten=["aten::linalg_matrix_norm.default",
                                                       "aten::linalg_matrix_norm.str_ord"],
          meta=lambda a: _matrix_norm_meta(a.A, a.ord, a.dim, a.keepdim, a.dtype, "linalg.matrix_norm"),
          cost=lambda a: _matrix_norm_cost(a.A, a.ord, a.dim, a.keepdim, a.dtype), bound=True, api=())
def matrix_norm(A: Tensor, ord="fro", dim=(-2, -1), keepdim: bool = False, *, dtype=None) -> Tensor:
    """The matrix norm of the dims ``dim``: 'fro', the largest (inf, 1) or smallest (-inf, -1) absolute row
    (inf) or column (1) sum, or of the singular values the largest (2), smallest (-2) or their sum ('nuc')."""
    _matrix_norm_meta(A, ord, dim, keepdim, dtype, "linalg.matrix_norm")
    return _matrix_norm(A, ord, dim, keepdim, dtype)


def _norm_plan(A, ord, dim):
    """('vector' or 'matrix', ord, dim) that linalg.norm computes."""
    if dim is not None:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        if len(dims) == 1:
            return "vector", 2 if ord is None else ord, dims
        if len(dims) == 2:
            return "matrix", "fro" if ord is None else ord, dims
        raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. Got {list(dims)}")
    if ord is None:
        return "vector", 2, None
    if len(A.shape) not in (1, 2):
        raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got "
                           f"{len(A.shape)}D.")
    # a string ord names a matrix norm: a 1-D A is then refused as matrix_norm refuses it
    return ("vector", ord, None) if len(A.shape) == 1 and not isinstance(ord, str) else ("matrix", ord, (-2, -1))


def _norm_meta(A, ord, dim, keepdim, dtype):
    kind, order, dims = _norm_plan(A, ord, dim)
    if kind == "matrix":
        return _matrix_norm_meta(A, order, dims, keepdim, dtype, "linalg.norm")
    if isinstance(order, str):
        raise RuntimeError(f"linalg.norm: ord={order} is only supported for matrices")
    return get("linalg.vector_norm").meta(A, order, dims, keepdim, dtype=dtype)


def _norm_cost(A, ord, dim, keepdim, dtype):
    kind, order, dims = _norm_plan(A, ord, dim)
    if kind == "matrix":
        return _matrix_norm_cost(A, order, dims, keepdim, dtype)
    return Cost(flops=2 * S.numel(A.shape), bytes_read=nbytes(A),
                bytes_written=nbytes(_norm_meta(A, ord, dim, keepdim, dtype)))


@register("linalg.norm", family="linalg", aten=["aten::linalg_norm.default", "aten::linalg_norm.ord_str"],
          meta=lambda a: _norm_meta(a.A, a.ord, a.dim, a.keepdim, a.dtype),
          cost=lambda a: _norm_cost(a.A, a.ord, a.dim, a.keepdim, a.dtype), bound=True, api=())
def norm(A: Tensor, ord=None, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """A vector norm (``dim`` one dim, or None with ord None or a 1-D A) or a matrix norm (two dims, or a
    2-D A with ``ord``), as ``linalg.vector_norm`` and ``linalg.matrix_norm`` compute them."""
    _norm_meta(A, ord, dim, keepdim, dtype)
    kind, order, dims = _norm_plan(A, ord, dim)
    if kind == "matrix":
        return _matrix_norm(A, order, dims, keepdim, dtype)
    return op_impl("linalg.vector_norm")(A, order, dims, keepdim, dtype=dtype)


# ---- samples ---------------------------------------------------------------------------------------

def _matrix_norm_reference(A, ord="fro", dim=(-2, -1), keepdim=False, dtype=None):
    return np.linalg.norm(A, ord, axis=tuple(dim), keepdims=keepdim)


_SQUARE = operand(3, 3, values="invertible")
_SAMPLES = {
    "linalg.matrix_power": Samples((sample(_SQUARE, 2), sample(_SQUARE, 0), sample(_SQUARE, -1),
                                    sample(operand(2, 2, 2, dtype="float64"), 3)), np.linalg.matrix_power),
    "linalg.tensorinv": Samples((sample(operand(4, 2, 2, values="invertible"), 1),), lambda A, ind=2: np.linalg.tensorinv(A, ind)),
    "linalg.tensorsolve": Samples((sample(operand(2, 3, 6, values="normal"), operand(2, 3)),)),
    "linalg.multi_dot": Samples((sample([operand(2, 3), operand(3, 4), operand(4)]), sample([operand(3), operand(3, 2)])),
                                np.linalg.multi_dot),
    "linalg.vander": Samples((sample(operand(3)), sample(operand(4), N=2), sample(operand(2, 3, dtype="float64"))),
                             lambda x, N=None: np.flip(np.stack([x ** k for k in range(N or x.shape[-1])][::-1], -1), -1)),
    "linalg.vecdot": Samples((sample(operand(2, 3), operand(3)), sample(operand(3, 2, layout="transposed"), operand(3, 2), dim=0),
                              sample(operand(0, 3), operand(3))),
                             lambda x, y, dim=-1: np.sum(np.conj(x) * y, axis=dim)),
    "linalg.diagonal": Samples((sample(operand(2, 3)), sample(operand(2, 3, 3), offset=1),
                                sample(operand(3, 2, layout="transposed"), dim1=1, dim2=0)),
                               lambda A, offset=0, dim1=-2, dim2=-1: np.diagonal(A, offset, dim1, dim2)),
    "matrix_exp": Samples((sample(operand(3, 3, values="domain", domain=(-0.5, 0.5))), sample(operand(1, 1)),
                           sample(operand(2, 2, 2, dtype="float64", values="domain", domain=(-1, 1))))),
    "linalg.matrix_norm": Samples((sample(operand(2, 3)), sample(operand(3, 3), 1), sample(operand(3, 3), -math.inf),
                                   sample(operand(2, 2, 3), "fro", (0, 2), True)), _matrix_norm_reference),
    "linalg.norm": Samples((sample(operand(2, 3)), sample(operand(3), 3), sample(operand(3, 3), "fro"),
                            sample(operand(2, 3), 1, 1, True)),
                           lambda A, ord=None, dim=None, keepdim=False, dtype=None: np.linalg.norm(
                               A, ord, axis=dim, keepdims=keepdim)),
}
for _family in ("linalg", "view"):
    family_samples(_family, by_name(_SAMPLES))
