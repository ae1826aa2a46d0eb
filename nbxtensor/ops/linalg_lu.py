"""torch.linalg's LU and Cholesky family over ``kernels/linalg_lu.py``: the factorisations, the determinants,
inverses and solves built on them, and the composites of registry ops around them (matrix_power,
tensorinv, tensorsolve, multi_dot, vander, vecdot, matrix_exp, the matrix norms).

Matrices are small: one program holds a whole matrix, at most ``MAX_MATRIX_SIZE`` rows and columns, and
computes in float64 (float32 results are rounded once from it, closer to exact than LAPACK's float32).
Batches of any leading dims broadcast as torch's do; a singular matrix gives what torch gives (an error
naming the zero pivot, an ``info`` tensor from the ``_ex`` forms, a zero determinant)."""
from __future__ import annotations

import builtins
import math
from collections import namedtuple

import numpy as np

from .. import shape as S
from ..allocation import new_tensor, scratch_scope
from ..dtypes import get_dtype
from ..kernels import linalg_lu as K
from ..launch import cdiv, launch, next_pow2
from ..tensor import _TENSOR_TYPE_NAMES, Tensor
from .nn_composites import temporaries
from .registry import Cost, TensorMeta, family_samples, get, nbytes, register
from .samples import Samples, by_name, operand, sample

# The largest matrix one program holds: a [64, 64] float64 tile is 32 KiB of registers.
MAX_MATRIX_SIZE = 64
# Columns of a right-hand side one program solves for.
_RHS_BLOCK = 32

_F64 = get_dtype("float64")
_I32 = get_dtype("int32")
_SOLVED = (get_dtype("float32"), _F64)

lu_factor_result = namedtuple("linalg_lu_factor", ["LU", "pivots"])
lu_factor_ex_result = namedtuple("linalg_lu_factor_ex", ["LU", "pivots", "info"])
lu_result = namedtuple("linalg_lu", ["P", "L", "U"])
lu_unpack_result = namedtuple("lu_unpack", ["P", "L", "U"])
slogdet_result = namedtuple("linalg_slogdet", ["sign", "logabsdet"])
inv_ex_result = namedtuple("linalg_inv_ex", ["inverse", "info"])
solve_ex_result = namedtuple("linalg_solve_ex", ["result", "info"])
triangular_solve_result = namedtuple("triangular_solve", ["solution", "cloned_coefficient"])
cholesky_ex_result = namedtuple("linalg_cholesky_ex", ["L", "info"])


class LinAlgError(RuntimeError):
    """A matrix the operation cannot take: singular, or not positive-definite."""


def _op(name):
    return get(name).impl


# ---- checks on metadata ------------------------------------------------------------------------------

def _type_name(dtype) -> str:
    return _TENSOR_TYPE_NAMES.get(dtype.name, dtype.name)


def _check_float(dtype, op: str) -> None:
    """torch's linalg refusals: integers, then the 16-bit floats; complex matrices are not computed here."""
    if not (dtype.is_floating_point or dtype.is_complex) or dtype.storage_only:
        raise RuntimeError(f"{op}: Expected a floating point or complex tensor as input. Got {_type_name(dtype)}")
    if dtype.is_complex:
        raise NotImplementedError(f"{op}: complex matrices are not supported (got {dtype.name})")
    if dtype not in _SOLVED:
        raise RuntimeError(f"{op}: Low precision dtypes not supported. Got {_type_name(dtype)}")


def _check_matrices(x, op: str, square: bool = True, name: str = "A") -> None:
    if len(x.shape) < 2:
        raise RuntimeError(f"{op}: The input tensor {name} must have at least 2 dimensions.")
    if square and x.shape[-1] != x.shape[-2]:
        raise RuntimeError(f"{op}: {name} must be batches of square matrices, but they are {x.shape[-2]} by "
                           f"{x.shape[-1]} matrices")
    _check_float(x.dtype, op)


def _check_same_dtype(a, b, op: str, names=("A", "B")) -> None:
    if a.dtype is not b.dtype:
        raise RuntimeError(f"{op}: Expected {names[0]} and {names[1]} to have the same dtype, but found "
                           f"{names[0]} of type {_type_name(a.dtype)} and {names[1]} of type "
                           f"{_type_name(b.dtype)} instead")


def _check_size(x, op: str) -> None:
    if builtins.max(x.shape[-2:]) > MAX_MATRIX_SIZE:
        raise NotImplementedError(f"{op}: matrices of at most {MAX_MATRIX_SIZE} rows and columns are supported "
                                  f"(one program holds a matrix), got {x.shape[-2]} by {x.shape[-1]}")


def _batch(a, b) -> tuple:
    return S.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]))


def _cubic_cost(*metas, outputs=()) -> Cost:
    """Cost of an O(n^3) factorisation or solve per matrix of the first input: reads its inputs, writes its
    outputs; its temporaries are a few float64 copies of the matrices and their row orders."""
    shape = tuple(metas[0].shape)
    size = builtins.max(shape[-2:], default=1)
    outputs = (outputs,) if isinstance(outputs, TensorMeta) else tuple(outputs)  # a TensorMeta is one output
    return Cost(flops=2 * S.numel(shape[:-2]) * size ** 3, bytes_read=sum(nbytes(m) for m in metas),
                bytes_written=sum(nbytes(o) for o in outputs),
                workspace=temporaries(3, shape, _F64) + temporaries(2, shape[:-1], _I32))


def _cubic_rules(meta) -> dict:
    """``register``'s meta and cost rules of an op whose work is cubic in its first tensor argument's
    matrices, ``meta`` its meta rule: both of bound arguments, the cost reading every tensor argument."""
    def cost(a):
        tensors = [value for value in vars(a).values() if hasattr(value, "shape")] or [TensorMeta((1,), _F64)]
        return _cubic_cost(*tensors, outputs=meta(a))
    return {"meta": meta, "cost": cost, "bound": True}


def _of_A(meta):
    """A meta rule of bound arguments that reads the matrices ``A`` alone, from ``meta(A)``."""
    return lambda a: meta(a.A)


# ---- launches ------------------------------------------------------------------------------------------

def _block(*sizes) -> int:
    return builtins.max(4, next_pow2(builtins.max(1, *sizes)))


def _flat(x: Tensor, batch: tuple) -> Tensor:
    """``x`` broadcast to ``batch`` and seen as (count, rows, cols), a view wherever strides allow."""
    return x.expand(*batch, *x.shape[-2:]).reshape(S.numel(batch), *x.shape[-2:])


def _factor(A: Tensor, pivot: bool = True):
    """(LU, pivots, info, det, sign, logabs) of every matrix of A, in A's batch shape."""
    *batch, m, n = A.shape
    batch = tuple(batch)
    dev = A.device
    LU = new_tensor(A.shape, A.dtype, dev)
    pivots = new_tensor((*batch, builtins.min(m, n)), _I32, dev)
    info = new_tensor(batch, _I32, dev)
    det, sign, logabs = (new_tensor(batch, A.dtype, dev) for _ in range(3))
    count = S.numel(batch)
    if count:
        source, target = _flat(A, batch), LU.reshape(count, m, n)
        launch(K.lu_factor, (count,), dev, [source, *source.stride(), target, *target.stride(), pivots, info, det,
                                            sign, logabs, m, n, builtins.min(m, n)],
               PIVOT=pivot, COMPUTE=_F64.triton, BLOCK=_block(m, n))
    return LU, pivots, info, det, sign, logabs


def _permutation(pivots: Tensor, m: int, op: str) -> Tensor:
    """The int32 (count, m) row order that LAPACK-style ``pivots`` (..., k) describe."""
    steps = pivots.shape[-1]
    count = S.numel(pivots.shape[:-1])
    if pivots.numel() and ((pivots < 1) | (pivots > m)).any().item():
        raise RuntimeError(f"pivots passed to {op} must be between 1 and LU.size(-2) inclusive. Did you properly "
                           "pass the result of lu_factor?")
    order = new_tensor((count, m), _I32, pivots.device)
    if count:
        flat = pivots.reshape(count, steps).contiguous()
        launch(K.pivot_permutation, (count,), pivots.device, [flat, order, m, steps], BLOCK=_block(m))
    return order


def _substitute(A: Tensor, B: Tensor, out: Tensor, lower: int, upper: int, perm=None, gather=False,
                scatter=False) -> Tensor:
    """Solve A X = B into ``out`` for (count, n, n) A and (count, n, k) B and ``out`` of any strides: a
    forward pass with A's lower triangle and a back pass with its upper (0: skip, 1: its diagonal, 2: a
    unit diagonal); ``perm`` reorders the rows of B (gather) or of X (scatter)."""
    count, n, k = B.shape
    if count and n and k:
        launch(K.triangular_solve, (count, cdiv(k, _RHS_BLOCK)), B.device,
               [A, *A.stride(), B, *B.stride(), out, *out.stride(), B if perm is None else perm, n, k],
               LOWER=lower, UPPER=upper, GATHER=gather, SCATTER=scatter, COMPUTE=_F64.triton, BLOCK=_block(n),
               BLOCK_K=builtins.min(_RHS_BLOCK, next_pow2(k)))
    return out


def _raise_on(info: Tensor, message) -> None:
    """Raise LinAlgError(message(batch index or None, info value)) for the first nonzero ``info``."""
    if not info.numel() or not (info != 0).any().item():
        return
    flat = info.reshape(-1)
    index = int((flat != 0).to("int64").argmax().item())
    where = index if info.ndim else None
    raise LinAlgError(message(where, int(flat[index].item())))


def _batch_prefix(op: str, where) -> str:
    return f"{op}: " if where is None else f"{op}: (Batch element {where}): "


# ---- LU -------------------------------------------------------------------------------------------------

def _lu_factor_meta(A, op: str):
    if len(A.shape) < 2:
        raise RuntimeError(f"torch.{op}: Expected tensor with 2 or more dimensions. Got size: {list(A.shape)} "
                           "instead")
    _check_float(A.dtype, op)
    batch = tuple(A.shape[:-2])
    return (TensorMeta(tuple(A.shape), A.dtype), TensorMeta(batch + (builtins.min(A.shape[-2:]),), _I32),
            TensorMeta(batch, _I32))


def _lu_factor_checked(A: Tensor, pivot: bool, check_errors: bool, op: str):
    _lu_factor_meta(A, op)
    _check_size(A, op)
    LU, pivots, info, *_ = _factor(A, pivot)
    if check_errors:
        _raise_on(info, lambda where, k: f"{_batch_prefix('torch.' + op, where)}U[{k},{k}] is zero and using it "
                  "on lu_solve would result in a division by zero. If you still want to perform the factorization, "
                  "consider calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")
    return LU, pivots, info


@register("linalg.lu_factor_ex", family="linalg", aten=["aten::linalg_lu_factor_ex.default"],
          api=(), **_cubic_rules(lambda a: _lu_factor_meta(a.A, "linalg.lu_factor_ex")))
def lu_factor_ex(A: Tensor, *, pivot: bool = True, check_errors: bool = False):
    """P A = L U with partial pivoting, packed as LAPACK's getrf packs it: (LU, 1-based int32 pivots, info)."""
    return lu_factor_ex_result(*_lu_factor_checked(A, pivot, check_errors, "linalg.lu_factor_ex"))


@register("linalg.lu_factor", family="linalg", aten=["aten::linalg_lu_factor.default"], api=(),
          **_cubic_rules(lambda a: _lu_factor_meta(a.A, "linalg.lu_factor")[:2]))
def lu_factor(A: Tensor, *, pivot: bool = True):
    """``lu_factor_ex`` raising where a pivot is zero."""
    return lu_factor_result(*_lu_factor_checked(A, pivot, True, "linalg.lu_factor")[:2])


def _lu_meta(a):
    out = _lu_factor_meta(a.A, "lu")
    return out if a.get_infos else out[:2]


@register("lu", family="linalg", aten=["aten::_lu_with_info.default"], methods=("lu",), **_cubic_rules(_lu_meta))
def lu(A: Tensor, pivot: bool = True, get_infos: bool = False):
    """torch.lu: ``linalg.lu_factor_ex``'s (LU, pivots) and, with ``get_infos``, its info."""
    LU, pivots, info = _lu_factor_checked(A, pivot, not get_infos, "lu")
    return (LU, pivots, info) if get_infos else (LU, pivots)


def _unpack_meta(LU_data, LU_pivots, unpack_data: bool, unpack_pivots: bool):
    if len(LU_data.shape) < 2:
        raise RuntimeError("torch.lu_unpack: Expected tensor with 2 or more dimensions. Got size: "
                           f"{list(LU_data.shape)} instead")
    m, n = LU_data.shape[-2:]
    k = builtins.min(m, n)
    if unpack_pivots:
        if LU_pivots.dtype is not _I32:
            raise RuntimeError("torch.lu_unpack: LU_pivots is expected to be a contiguous tensor of torch.int32 "
                               f"dtype. Note: this function is intended to be used with the output produced by "
                               f"torch.linalg.lu_factor, got {LU_pivots.dtype.name}")
        if tuple(LU_pivots.shape) != tuple(LU_data.shape[:-2]) + (k,):
            raise RuntimeError(f"torch.lu_unpack: Expected LU_pivots of shape {list(LU_data.shape[:-2]) + [k]}, "
                               f"got {list(LU_pivots.shape)}")
    batch = tuple(LU_data.shape[:-2])
    dt = LU_data.dtype
    return (TensorMeta(batch + (m, m) if unpack_pivots else (0,), dt),
            TensorMeta(batch + (m, k) if unpack_data else (0,), dt),
            TensorMeta(batch + (k, n) if unpack_data else (0,), dt))


def _permutation_matrix(order: Tensor, batch: tuple, m: int, dtype) -> Tensor:
    """P with P[perm[c], c] = 1, so that A = P L U."""
    rows = _op("arange")(m, dtype=_I32, device=order.device).reshape(m, 1)
    return (rows == order.reshape(*batch, 1, m)).to(dtype)


def _unpack(LU: Tensor, pivots: Tensor, unpack_data: bool, unpack_pivots: bool, op: str):
    _unpack_meta(LU, pivots, unpack_data, unpack_pivots)
    m, n = LU.shape[-2:]
    k = builtins.min(m, n)
    batch = tuple(LU.shape[:-2])
    empty = _op("empty")((0,), dtype=LU.dtype, device=LU.device)
    P = L = U = empty
    if unpack_pivots:
        with scratch_scope():
            order = _permutation(pivots, m, op)
        P = _permutation_matrix(order, batch, m, LU.dtype)
    if unpack_data:
        eye = _op("eye")(m, k, dtype=LU.dtype, device=LU.device)
        L = LU[..., :, :k].tril(-1) + eye
        U = LU[..., :k, :].triu()
    return P, L, U


@register("lu_unpack", family="linalg", aten=["aten::lu_unpack.default"], **_cubic_rules(
    lambda a: _unpack_meta(a.LU_data, a.LU_pivots, a.unpack_data, a.unpack_pivots)))
def lu_unpack(LU_data: Tensor, LU_pivots: Tensor, unpack_data: bool = True, unpack_pivots: bool = True):
    """(P, L, U) from ``lu_factor``'s packed form; what is not unpacked is an empty tensor."""
    return lu_unpack_result(*_unpack(LU_data, LU_pivots, unpack_data, unpack_pivots, "lu_unpack"))


def _linalg_lu_meta(A):
    _lu_factor_meta(A, "linalg.lu")
    m, n = A.shape[-2:]
    k = builtins.min(m, n)
    batch = tuple(A.shape[:-2])
    return (TensorMeta(batch + (m, m), A.dtype), TensorMeta(batch + (m, k), A.dtype),
            TensorMeta(batch + (k, n), A.dtype))


@register("linalg.lu", family="linalg", aten=["aten::linalg_lu.default"], api=(),
          **_cubic_rules(_of_A(_linalg_lu_meta)))
def linalg_lu(A: Tensor, *, pivot: bool = True):
    """A = P L U, each factor its own tensor (L unit lower trapezoidal, U upper trapezoidal)."""
    with scratch_scope():
        LU, pivots, _ = _lu_factor_checked(A, pivot, False, "linalg.lu")
    return lu_result(*_unpack(LU, pivots, True, True, "linalg.lu"))


def _lu_solve_meta(LU, pivots, B, left: bool):
    op = "linalg.lu_solve"
    _check_matrices(LU, op, name="LU")
    if len(B.shape) < 2:
        raise RuntimeError(f"{op}: The input tensor B must have at least 2 dimensions.")
    _check_same_dtype(LU, B, op, ("LU", "B"))
    n = LU.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        equation = "AX = B" if left else "XA = B"
        raise RuntimeError(f"{op}: Incompatible shapes of A and B for the equation {equation} ({n}x{n} and "
                           f"{B.shape[-2]}x{B.shape[-1]})")
    if tuple(pivots.shape) != tuple(LU.shape[:-1]):
        raise RuntimeError(f"{op}: Expected pivots of shape {list(LU.shape[:-1])}, got {list(pivots.shape)}")
    if pivots.dtype is not _I32:
        raise RuntimeError(f"{op}: pivots should be a tensor of dtype int32, got {pivots.dtype.name}")
    return TensorMeta(_batch(LU, B) + tuple(B.shape[-2:]), B.dtype)


def _solve_factored(LU: Tensor, order: Tensor, B: Tensor, batch: tuple, left: bool, adjoint: bool) -> Tensor:
    """X from A X = B (or X A = B) for A = P L U packed in LU, ``order`` its (count, n) row order."""
    rows, cols = B.shape[-2:]
    out = new_tensor(batch + (rows, cols), B.dtype, B.device)
    count = S.numel(batch)
    factors = _flat(LU, batch)
    B_flat, X_flat = _flat(B, batch), out.reshape(count, rows, cols)
    if not left:  # X A = B is A^T X^T = B^T
        adjoint = not adjoint
        B_flat, X_flat = B_flat.transpose(1, 2), X_flat.transpose(1, 2)
    if adjoint:  # A^T = U^T L^T P^T: U^T (lower) then L^T (unit upper), then rows back through P
        _substitute(factors.transpose(1, 2), B_flat, X_flat, 1, 2, order, scatter=True)
    else:  # P^T B, then L (unit lower), then U
        _substitute(factors, B_flat, X_flat, 2, 1, order, gather=True)
    return out


@register("linalg.lu_solve", family="linalg", aten=["aten::linalg_lu_solve.default"], api=(),
          **_cubic_rules(lambda a: _lu_solve_meta(a.LU, a.pivots, a.B, a.left)))
def linalg_lu_solve(LU: Tensor, pivots: Tensor, B: Tensor, *, left: bool = True, adjoint: bool = False) -> Tensor:
    """X with A X = B (``left``) or X A = B, A^H for A with ``adjoint``, from A's ``lu_factor``."""
    meta = _lu_solve_meta(LU, pivots, B, left)
    _check_size(LU, "linalg.lu_solve")
    batch = meta.shape[:-2]
    with scratch_scope():
        order = _permutation(pivots.expand(*batch, LU.shape[-1]), LU.shape[-1], "lu_solve")
    return _solve_factored(LU, order, B, batch, left, adjoint)


@register("lu_solve", family="linalg", aten=["aten::lu_solve.default"], methods=("lu_solve",),
          **_cubic_rules(lambda a: _lu_solve_meta(a.LU_data, a.LU_pivots, a.b, True)))
def lu_solve(b: Tensor, LU_data: Tensor, LU_pivots: Tensor) -> Tensor:
    """torch.lu_solve: ``linalg.lu_solve(LU_data, LU_pivots, b)``."""
    return linalg_lu_solve.impl(LU_data, LU_pivots, b)


# ---- determinants ------------------------------------------------------------------------------------

def _det_meta_for(op: str, parts: int = 1):
    def meta(A):
        _check_matrices(A, op)
        out = TensorMeta(tuple(A.shape[:-2]), A.dtype)
        return out if parts == 1 else (out,) * parts
    return meta


def _determinants(A: Tensor, op: str):
    """(det, sign, log |det|) of A's matrices."""
    _check_size(A, op)
    return _factor(A)[3:]


@register("linalg.det", family="linalg", aten=["aten::linalg_det.default", "aten::det.default"],
          api=("det",), methods=("det",), **_cubic_rules(_of_A(_det_meta_for("linalg.det"))))
def det(A: Tensor) -> Tensor:
    """The determinant: the product of LU's pivots, signed by its row swaps, taken in float64."""
    _det_meta_for("linalg.det")(A)
    return _determinants(A, "linalg.det")[0]


@register("linalg.slogdet", family="linalg", aten=["aten::linalg_slogdet.default", "aten::slogdet.default"],
          **_cubic_rules(_of_A(_det_meta_for("linalg.slogdet", 2))),
          api=("slogdet",), methods=("slogdet",))
def slogdet(A: Tensor):
    """(sign, log |det|): sign 0 and -inf for a singular matrix."""
    _det_meta_for("linalg.slogdet", 2)(A)
    return slogdet_result(*_determinants(A, "linalg.slogdet")[1:])


@register("logdet", family="linalg", aten=["aten::logdet.default"], methods=("logdet",),
          **_cubic_rules(_of_A(_det_meta_for("logdet"))))
def logdet(A: Tensor) -> Tensor:
    """log det A: NaN for a negative determinant, -inf for a zero one."""
    _det_meta_for("logdet")(A)
    with scratch_scope():
        _, sign, logabs = _determinants(A, "logdet")
    return _op("where")(sign < 0, math.nan, logabs)


# ---- inverses and solves -----------------------------------------------------------------------------

def _inv_meta(A):
    _check_matrices(A, "linalg.inv")
    return TensorMeta(tuple(A.shape), A.dtype), TensorMeta(tuple(A.shape[:-2]), _I32)


def _singular_inverse(where, k):
    return (f"{_batch_prefix('linalg.inv', where)}The diagonal element {k} is zero, the inversion could not be "
            "completed because the input matrix is singular.")


def _inverse(A: Tensor, op: str):
    """(A^-1, info) by LU: the solve of A X = I."""
    _inv_meta(A)
    _check_size(A, op)
    n = A.shape[-1]
    batch = tuple(A.shape[:-2])
    with scratch_scope():
        LU, pivots, info, *_ = _factor(A)
        order = _permutation(pivots, n, op)
        identity = _op("eye")(n, dtype=A.dtype, device=A.device)
    return _solve_factored(LU, order, identity, batch, True, False), info


@register("linalg.inv_ex", family="linalg", aten=["aten::linalg_inv_ex.default"], api=(),
          **_cubic_rules(_of_A(_inv_meta)))
def inv_ex(A: Tensor, *, check_errors: bool = False):
    """(A^-1, info): info is the 1-based index of the first zero pivot of A's LU (the inverse then holds
    infinities or NaN), else 0."""
    inverse, info = _inverse(A, "linalg.inv_ex")
    if check_errors:
        _raise_on(info, _singular_inverse)
    return inv_ex_result(inverse, info)


def _inv_plain_meta(A):
    return _inv_meta(A)[0]


@register("linalg.inv", family="linalg", aten=["aten::linalg_inv.default", "aten::inverse.default"],
          api=("inverse",), methods=("inverse",), **_cubic_rules(_of_A(_inv_plain_meta)))
def inv(A: Tensor) -> Tensor:
    """A^-1; a singular matrix raises LinAlgError naming its zero pivot."""
    inverse, info = _inverse(A, "linalg.inv")
    _raise_on(info, _singular_inverse)
    return inverse


def _is_vector_rhs(A, B) -> bool:
    """torch's rule: B is a vector (or a batch of them) when 1-D, or when its shape is A's without the last dim."""
    return len(B.shape) == 1 or (len(B.shape) == len(A.shape) - 1 and tuple(B.shape) == tuple(A.shape[:-1]))


def _solve_meta(A, B, left: bool, op: str):
    _check_matrices(A, op)
    _check_same_dtype(A, B, op)
    vector = _is_vector_rhs(A, B)
    B_shape = tuple(B.shape) + (1,) if vector else tuple(B.shape)
    if len(B_shape) < 2:
        raise RuntimeError(f"{op}: The input tensor B must have at least 1 dimension.")
    n = A.shape[-1]
    if (B_shape[-2] if left else B_shape[-1]) != n:
        equation = "AX = B" if left else "XA = B"
        raise RuntimeError(f"{op}: Incompatible shapes of A and B for the equation {equation} ({n}x{n} and "
                           f"{B_shape[-2]}x{B_shape[-1]})")
    batch = S.broadcast_shapes(tuple(A.shape[:-2]), B_shape[:-2])
    out = batch + (B_shape[-2],) if vector else batch + B_shape[-2:]
    return TensorMeta(out, A.dtype), TensorMeta(batch, _I32)


def _solve(A: Tensor, B: Tensor, left: bool, op: str):
    meta = _solve_meta(A, B, left, op)
    _check_size(A, op)
    vector = _is_vector_rhs(A, B)
    rhs = B.unsqueeze(-1) if vector else B
    batch = meta[1].shape
    n = A.shape[-1]
    with scratch_scope():
        LU, pivots, info, *_ = _factor(A.expand(*batch, n, n))
        order = _permutation(pivots, n, op)
    X = _solve_factored(LU, order, rhs, batch, left, False)
    return (X.squeeze(-1) if vector else X), info


def _singular_solve(where, k):
    return f"{_batch_prefix('torch.linalg.solve', where)}The solver failed because the input matrix is singular."


@register("linalg.solve_ex", family="linalg", aten=["aten::linalg_solve_ex.default"], api=(),
          **_cubic_rules(lambda a: _solve_meta(a.A, a.B, a.left, "linalg.solve_ex")))
def solve_ex(A: Tensor, B: Tensor, *, left: bool = True, check_errors: bool = False):
    """(X, info) with A X = B (or X A = B), by LU with partial pivoting; info as ``lu_factor_ex``'s."""
    X, info = _solve(A, B, left, "linalg.solve_ex")
    if check_errors:
        _raise_on(info, _singular_solve)
    return solve_ex_result(X, info)


@register("linalg.solve", family="linalg", aten=["aten::linalg_solve.default"], api=(),
          **_cubic_rules(lambda a: _solve_meta(a.A, a.B, a.left, "linalg.solve")[0]))
def solve(A: Tensor, B: Tensor, *, left: bool = True) -> Tensor:
    """X with A X = B (or X A = B); a singular A raises LinAlgError."""
    X, info = _solve(A, B, left, "linalg.solve")
    _raise_on(info, _singular_solve)
    return X


# ---- triangular solves --------------------------------------------------------------------------------

def _triangular_meta(A, B, op: str, left: bool = True):
    for name, x in (("A", A), ("B", B)):
        if len(x.shape) < 2:
            raise RuntimeError(f"{op}: The input tensor {name} must have at least 2 dimensions.")
    _check_matrices(A, op)
    _check_same_dtype(A, B, op)
    n = A.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        equation = "AX = B" if left else "XA = B"
        raise RuntimeError(f"{op}: Incompatible shapes of A and B for the equation {equation} ({n}x{n} and "
                           f"{B.shape[-2]}x{B.shape[-1]})")
    return _batch(A, B)


def _triangular(A: Tensor, B: Tensor, batch: tuple, upper: bool, left: bool, transpose: bool, unit: bool) -> Tensor:
    """X with op(A) X = B (``left``) or X op(A) = B, op(A) = A^T with ``transpose``, A triangular."""
    rows, cols = B.shape[-2:]
    out = new_tensor(batch + (rows, cols), B.dtype, B.device)
    coefficients, rhs, X = _flat(A, batch), _flat(B, batch), out.reshape(S.numel(batch), rows, cols)
    if not left:  # X A = B is A^T X^T = B^T
        transpose = not transpose
        rhs, X = rhs.transpose(1, 2), X.transpose(1, 2)
    if transpose:
        coefficients, upper = coefficients.transpose(1, 2), not upper
    diagonal = 2 if unit else 1
    _substitute(coefficients, rhs, X, 0 if upper else diagonal, diagonal if upper else 0)
    return out


def _solve_triangular_meta(A, B, left: bool):
    batch = _triangular_meta(A, B, "linalg.solve_triangular", left)
    return TensorMeta(batch + tuple(B.shape[-2:]), B.dtype)


@register("linalg.solve_triangular", family="linalg", aten=["aten::linalg_solve_triangular.default"],
          api=(), **_cubic_rules(lambda a: _solve_triangular_meta(a.A, a.B, a.left)))
def solve_triangular(A: Tensor, B: Tensor, *, upper: bool, left: bool = True, unitriangular: bool = False) -> Tensor:
    """X with A X = B (or X A = B) for A upper or lower triangular (the other triangle is not read), its
    diagonal taken as ones with ``unitriangular``. A zero on the diagonal gives infinities or NaN."""
    batch = _solve_triangular_meta(A, B, left).shape[:-2]
    _check_size(A, "linalg.solve_triangular")
    return _triangular(A, B, batch, upper, left, False, unitriangular)


def _triangular_solve_meta(b, A):
    if b.dtype is not A.dtype:
        raise RuntimeError(f"Expected b and A to have the same dtype, but found b of type {_type_name(b.dtype)} "
                           f"and A of type {_type_name(A.dtype)} instead.")
    batch = _triangular_meta(A, b, "triangular_solve")
    return TensorMeta(batch + tuple(b.shape[-2:]), b.dtype), TensorMeta(batch + tuple(A.shape[-2:]), A.dtype)


@register("triangular_solve", family="linalg", aten=["aten::triangular_solve.default"],
          methods=("triangular_solve",), **_cubic_rules(lambda a: _triangular_solve_meta(a.b, a.A)))
def triangular_solve(b: Tensor, A: Tensor, upper: bool = True, transpose: bool = False,
                     unitriangular: bool = False):
    """torch.triangular_solve: (X with op(A) X = b, A broadcast and copied)."""
    meta = _triangular_solve_meta(b, A)
    _check_size(A, "triangular_solve")
    batch = meta[0].shape[:-2]
    solution = _triangular(A, b, batch, upper, True, transpose, unitriangular)
    return triangular_solve_result(solution, A.expand(meta[1].shape).contiguous().clone())


# ---- Cholesky ------------------------------------------------------------------------------------------

def _cholesky_meta_for(op: str, with_info: bool):
    def meta(A):
        _check_matrices(A, op)
        out = TensorMeta(tuple(A.shape), A.dtype)
        return (out, TensorMeta(tuple(A.shape[:-2]), _I32)) if with_info else out
    return meta


def _factor_cholesky(A: Tensor, upper: bool, op: str):
    """(L, or U = L^T with ``upper``, info) for A's lower (or upper) triangle."""
    _check_matrices(A, op)
    _check_size(A, op)
    n = A.shape[-1]
    batch = tuple(A.shape[:-2])
    count = S.numel(batch)
    out = new_tensor(A.shape, A.dtype, A.device)
    info = new_tensor(batch, _I32, A.device)
    if count:
        source, target = _flat(A, batch), out.reshape(count, n, n)
        if upper:  # U^T U = A: U^T is the factor of A^T's lower triangle, A's upper one
            source, target = source.transpose(1, 2), target.transpose(1, 2)
        launch(K.cholesky, (count,), A.device, [source, *source.stride(), target, *target.stride(), info, n],
               COMPUTE=_F64.triton, BLOCK=_block(n))
    return out, info


def _not_positive_definite(op: str):
    def message(where, k):
        return (f"{_batch_prefix(op, where)}The factorization could not be completed because the input is not "
                f"positive-definite (the leading minor of order {k} is not positive-definite).")
    return message


@register("linalg.cholesky_ex", family="linalg", aten=["aten::linalg_cholesky_ex.default"],
          api=(), **_cubic_rules(_of_A(_cholesky_meta_for("linalg.cholesky_ex", True))))
def cholesky_ex(A: Tensor, *, upper: bool = False, check_errors: bool = False):
    """(L, info) with A = L L^T (or U^T U with ``upper``) from A's lower (upper) triangle; info is the order
    of the first leading minor that is not positive-definite, else 0."""
    L, info = _factor_cholesky(A, upper, "linalg.cholesky_ex")
    if check_errors:
        _raise_on(info, _not_positive_definite("linalg.cholesky_ex"))
    return cholesky_ex_result(L, info)


def _cholesky_checked(A: Tensor, upper: bool, op: str) -> Tensor:
    L, info = _factor_cholesky(A, upper, op)
    _raise_on(info, _not_positive_definite(op))
    return L


@register("linalg.cholesky", family="linalg", aten=["aten::linalg_cholesky.default"],
          api=(), **_cubic_rules(_of_A(_cholesky_meta_for("linalg.cholesky", False))))
def linalg_cholesky(A: Tensor, *, upper: bool = False) -> Tensor:
    """L with A = L L^T (U with A = U^T U for ``upper``); raises LinAlgError unless A is positive-definite."""
    return _cholesky_checked(A, upper, "linalg.cholesky")


@register("cholesky", family="linalg", aten=["aten::cholesky.default"], methods=("cholesky",),
          **_cubic_rules(_of_A(_cholesky_meta_for("cholesky", False))))
def cholesky(A: Tensor, upper: bool = False) -> Tensor:
    """torch.cholesky: ``linalg.cholesky(A, upper=upper)``."""
    return _cholesky_checked(A, upper, "cholesky")


def _cholesky_solve_meta(B, L):
    batch = _triangular_meta(L, B, "cholesky_solve")
    return TensorMeta(batch + tuple(B.shape[-2:]), B.dtype)


def _cholesky_solved(B: Tensor, L: Tensor, upper: bool, batch: tuple, op: str) -> Tensor:
    """X with A X = B, A = L L^T (or U^T U): a forward pass with L, a back pass with L^T."""
    _check_size(L, op)
    rows, cols = B.shape[-2:]
    out = new_tensor(batch + (rows, cols), B.dtype, B.device)
    count = S.numel(batch)
    lower = _flat(L, batch)
    if upper:
        lower = lower.transpose(1, 2)
    with scratch_scope():
        middle = new_tensor((count, rows, cols), _F64, B.device)  # kept in float64 between the passes
        _substitute(lower, _flat(B, batch), middle, 1, 0)
    _substitute(lower.transpose(1, 2), middle, out.reshape(count, rows, cols), 0, 1)
    return out


@register("cholesky_solve", family="linalg", aten=["aten::cholesky_solve.default"], methods=("cholesky_solve",),
          **_cubic_rules(lambda a: _cholesky_solve_meta(a.B, a.L)))
def cholesky_solve(B: Tensor, L: Tensor, upper: bool = False) -> Tensor:
    """X with A X = B from A's Cholesky factor L (A = L L^T), or U (A = U^T U) with ``upper``."""
    batch = _cholesky_solve_meta(B, L).shape[:-2]
    return _cholesky_solved(B, L, upper, batch, "cholesky_solve")


def _cholesky_inverse_meta(L):
    _check_matrices(L, "cholesky_inverse")
    return TensorMeta(tuple(L.shape), L.dtype)


@register("cholesky_inverse", family="linalg", aten=["aten::cholesky_inverse.default"],
          methods=("cholesky_inverse",), **_cubic_rules(lambda a: _cholesky_inverse_meta(a.L)))
def cholesky_inverse(L: Tensor, upper: bool = False) -> Tensor:
    """A^-1 from A's Cholesky factor L (or U with ``upper``)."""
    _cholesky_inverse_meta(L)
    identity = _op("eye")(L.shape[-1], dtype=L.dtype, device=L.device)
    return _cholesky_solved(identity, L, upper, tuple(L.shape[:-2]), "cholesky_inverse")


# ---- products of small matrices ----------------------------------------------------------------------------

def _matrix_product_meta(A, B):
    _check_matrices(A, "linalg.matrix_product", square=False)
    _check_same_dtype(A, B, "linalg.matrix_product")
    if A.shape[-1] != B.shape[-2]:
        raise RuntimeError(f"linalg.matrix_product: A ({A.shape[-2]}x{A.shape[-1]}) and B ({B.shape[-2]}x"
                           f"{B.shape[-1]}) cannot be multiplied")
    return TensorMeta(_batch(A, B) + (A.shape[-2], B.shape[-1]), A.dtype)


@register("linalg.matrix_product", family="linalg", aten=["nbx::linalg_matrix_product"],
          api=(), **_cubic_rules(lambda a: _matrix_product_meta(a.A, a.B)))
def matrix_product(A: Tensor, B: Tensor) -> Tensor:
    """A @ B for batches of small matrices (float32 or float64), accumulated in float64: the products that
    linalg's float64 composites (matrix_exp) need, where ``matmul`` takes no float64."""
    meta = _matrix_product_meta(A, B)
    _check_size(A, "linalg.matrix_product")
    _check_size(B, "linalg.matrix_product")
    batch = meta.shape[:-2]
    m, inner, n = A.shape[-2], A.shape[-1], B.shape[-1]
    out = new_tensor(meta.shape, A.dtype, A.device)
    count = S.numel(batch)
    if count and m and n:
        left, right, target = _flat(A, batch), _flat(B, batch), out.reshape(count, m, n)
        launch(K.matrix_product, (count,), A.device, [left, *left.stride(), right, *right.stride(), target,
                                                      *target.stride(), m, inner, n],
               COMPUTE=_F64.triton, BLOCK=_block(m, inner, n))
    return out


# ---- samples ---------------------------------------------------------------------------------------

def _square(*batch_and_n, values="invertible", **kwargs):
    n = batch_and_n[-1]
    return operand(*batch_and_n, n, values=values, **kwargs)


def _triangular_solve(A, B, *, upper, left=True, unitriangular=False):
    triangle = np.triu(A) if upper else np.tril(A)
    if unitriangular:
        triangle = triangle - np.diag(np.diagonal(triangle)) + np.eye(A.shape[-1])
    return np.linalg.solve(triangle, B) if left else np.swapaxes(
        np.linalg.solve(np.swapaxes(triangle, -1, -2), np.swapaxes(B, -1, -2)), -1, -2)


# invertible float32 and float64 matrices (LU in float64 inside), a batch, a transposed one, 0-size batches
_SQUARE = (sample(_square(3)), sample(_square(2, 2, dtype="float64")), sample(_square(3, layout="transposed")),
           sample(_square(0, 2)))
_SPD = (sample(_square(3, values="spd")), sample(_square(2, 2, values="spd", dtype="float64")),
        sample(_square(0, 2, values="spd")))
_SYSTEMS = (sample(_square(3), operand(3, 2)), sample(_square(2, 2, dtype="float64"), operand(2, 2, 1, dtype="float64")),
            sample(_square(3, layout="transposed"), operand(3)), sample(_square(0, 2), operand(0, 2, 1)))
_SAMPLES = {
    "linalg.lu_factor_ex": Samples(_SQUARE),
    "linalg.lu_factor": Samples(_SQUARE),
    "lu": Samples(_SQUARE),
    "linalg.lu": Samples(_SQUARE),
    "lu_unpack": Samples((sample(_square(3), operand(3, dtype="int32", values="index", domain=(1, 4))),)),
    "linalg.lu_solve": Samples((sample(_square(3), operand(3, dtype="int32", values="index", domain=(1, 4)), operand(3, 2)),)),
    "lu_solve": Samples((sample(operand(3, 2), _square(3), operand(3, dtype="int32", values="index", domain=(1, 4))),)),
    "linalg.det": Samples(_SQUARE, np.linalg.det),
    "linalg.slogdet": Samples(_SQUARE, lambda A: tuple(np.linalg.slogdet(A))),
    "logdet": Samples(_SPD, lambda A: np.linalg.slogdet(A)[1]),
    "linalg.inv_ex": Samples(_SQUARE, lambda A, **ignored: (np.linalg.inv(A), np.zeros(A.shape[:-2], np.int32))),
    "linalg.inv": Samples(_SQUARE, np.linalg.inv),
    "linalg.solve_ex": Samples(_SYSTEMS),
    "linalg.solve": Samples(_SYSTEMS, lambda A, B, left=True: np.linalg.solve(A, B) if B.ndim == A.ndim
                            else np.linalg.solve(A, B[..., None])[..., 0]),
    "linalg.solve_triangular": Samples((sample(_square(3), operand(3, 2), upper=True),
                                        sample(_square(2, 2, dtype="float64"), operand(2, 2, 2, dtype="float64"), upper=False),
                                        sample(_square(3, layout="transposed"), operand(2, 3), upper=False, left=False),
                                        sample(_square(3), operand(3, 1), upper=True, unitriangular=True)),
                                       _triangular_solve),
    "triangular_solve": Samples((sample(operand(3, 2), _square(3)), sample(operand(3, 1), _square(3), False, True))),
    "linalg.cholesky_ex": Samples(_SPD, lambda A, upper=False, **ignored: (
        np.swapaxes(np.linalg.cholesky(A), -1, -2) if upper else np.linalg.cholesky(A), np.zeros(A.shape[:-2], np.int32))),
    "linalg.cholesky": Samples(_SPD + (sample(_square(3, values="spd"), upper=True),),
                               lambda A, upper=False: np.swapaxes(np.linalg.cholesky(A), -1, -2) if upper
                               else np.linalg.cholesky(A)),
    "cholesky": Samples(_SPD, lambda A, upper=False: np.linalg.cholesky(A)),
    "cholesky_solve": Samples((sample(operand(3, 2), _square(3, values="spd")),),),
    "cholesky_inverse": Samples((sample(_square(3, values="spd")),)),
    "linalg.matrix_product": Samples((sample(operand(2, 3, dtype="float64"), operand(3, 2, dtype="float64")),
                                      sample(operand(2, 2, 3, dtype="float64"), operand(3, 2, dtype="float64"))), np.matmul),
}
family_samples("linalg", by_name(_SAMPLES))
