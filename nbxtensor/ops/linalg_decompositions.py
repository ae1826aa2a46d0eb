"""QR (LAPACK's compact Householder form and what applies it), the symmetric eigensolver and the SVD of
small batched matrices (``kernels/linalg_qr.py``: one program per matrix, checked as ``linalg_lu`` checks
its matrices, up to its ``MAX_MATRIX_SIZE`` a side), and the composites built on singular values: pinv,
matrix_rank, lstsq, cond. Products in float64 go through ``linalg.matrix_product`` (``matmul`` takes no
float64)."""
from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from .. import shape as S
from ..allocation import new_tensor, scratch_scope
from ..dtypes import get_dtype
from ..kernels import linalg_qr as K
from ..launch import launch, next_pow2
from ..lowering import needs_index_64
from ..tensor import Tensor
from .linalg_lu import _check_matrices, _check_same_dtype, _check_size
from .nn_composites import temporaries
from .registry import Cost, TensorMeta, family_samples, get, nbytes, register
from .samples import Sample, Samples, by_name, operand, sample

# Flops per element of one Jacobi sweep's rotations, times a typical sweep count: a cost estimate.
_JACOBI_FLOPS = 6 * 10

_F64 = get_dtype("float64")
_I64 = get_dtype("int64")
_EPSILON = {"float32": 1.1920928955078125e-07, "float64": 2.220446049250313e-16}

geqrf_result = namedtuple("geqrf", ["a", "tau"])
linalg_qr_result = namedtuple("linalg_qr", ["Q", "R"])
qr_result = namedtuple("qr", ["Q", "R"])
linalg_eigh_result = namedtuple("linalg_eigh", ["eigenvalues", "eigenvectors"])
linalg_svd_result = namedtuple("linalg_svd", ["U", "S", "Vh"])
svd_result = namedtuple("svd", ["U", "S", "V"])
linalg_lstsq_result = namedtuple("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])


def _op(name):
    return get(name).impl


# ---- checks ---------------------------------------------------------------------------------------------

def _check_matrix(x, op: str, name: str = "A", square: bool = False) -> None:
    _check_matrices(x, op, square, name)
    _check_size(x, op)


def _factor_cost(x, outputs, factor: int = 4, workspace: int = 0) -> Cost:
    batch = S.numel(x.shape[:-2])
    side = max(x.shape[-2:], default=0)
    return Cost(flops=factor * batch * side ** 3, bytes_read=nbytes(x),
                bytes_written=sum(nbytes(o) for o in outputs), workspace=workspace)


def _block(*sides) -> int:
    return next_pow2(max(1, *sides))


def _batched(x: Tensor) -> Tensor:
    """``x`` as a contiguous (batch, rows, cols) tensor."""
    return x.contiguous().reshape((S.numel(x.shape[:-2]),) + tuple(x.shape[-2:]))


# ---- QR ---------------------------------------------------------------------------------------------------

def _geqrf_meta(a):
    input = a.input
    _check_matrix(input, "geqrf")
    m, n = input.shape[-2:]
    return TensorMeta(tuple(input.shape), input.dtype), TensorMeta(tuple(input.shape[:-2]) + (min(m, n),),
                                                                     input.dtype)


@register("geqrf", family="linalg", aten=["aten::geqrf.default"], meta=_geqrf_meta,
          cost=lambda a: _factor_cost(a.input, _geqrf_meta(a), 2, temporaries(1, a.input.shape, a.input.dtype)),
          bound=True, methods=("geqrf",))
def geqrf(input: Tensor):
    """Householder QR in LAPACK's compact form: R on and above the diagonal of ``a``, each reflector's
    vector below it (its leading 1 implicit), their scalars in ``tau``."""
    a_meta, tau_meta = geqrf.meta(input)
    a = new_tensor(a_meta.shape, a_meta.dtype, input.device)
    tau = new_tensor(tau_meta.shape, tau_meta.dtype, input.device)
    m, n = input.shape[-2:]
    if a.numel():
        with scratch_scope():
            x = _batched(input)
        launch(K.geqrf, (x.shape[0],), input.device, [x, m * n, n, 1, m, n, min(m, n), a, tau],
               INDEX_64=needs_index_64(x), BLOCK=_block(m, n))
    return geqrf_result(a, tau)


def _apply_reflectors(reflectors: Tensor, tau: Tensor, other, out_shape, left: bool, descending: bool) -> Tensor:
    """The first tau.shape[-1] reflectors of compact ``reflectors`` applied to ``other`` (the identity's
    first out_shape[-1] columns when None) from the left or right; shapes already checked."""
    out = new_tensor(out_shape, reflectors.dtype, reflectors.device)
    if out.numel() == 0:
        return out
    v_rows, v_cols = reflectors.shape[-2:]
    k = tau.shape[-1]
    out_rows, out_cols = out_shape[-2:]
    with scratch_scope():
        v = _batched(reflectors)
        taus = tau.contiguous().reshape(S.numel(tau.shape[:-1]), k)
        c = _batched(other) if other is not None else out
    strides = [v_cols, 1] if left else [1, v_cols]
    launch(K.apply_householder, (v.shape[0],), reflectors.device,
           [v, v_rows * v_cols, *strides, v_rows if left else v_cols, v_cols if left else v_rows, taus, k, k,
            c, out_rows * out_cols, out_cols, 1, out, out_rows, out_cols],
           LEFT=left, DESCENDING=descending, IDENTITY=other is None, INDEX_64=needs_index_64(v, c, out),
           BLOCK=_block(v_rows, v_cols, out_rows, out_cols))
    return out


def _householder_meta(a):
    input, tau, op = a.input, a.tau, "torch.linalg.householder_product"
    _check_matrix(input, op, "input")
    _check_same_dtype(input, tau, op, ("input", "tau"))
    if input.shape[-2] < input.shape[-1]:
        raise RuntimeError(f"{op}: input.shape[-2] must be greater than or equal to input.shape[-1]")
    if len(tau.shape) != len(input.shape) - 1 or tuple(tau.shape[:-1]) != tuple(input.shape[:-2]):
        raise RuntimeError(f"{op}: Expected batch dimensions of tau to be equal to input.shape[:-2], but got "
                           f"tau of shape {tuple(tau.shape)} for input of shape {tuple(input.shape)}")
    if tau.shape[-1] > input.shape[-1]:
        raise RuntimeError(f"{op}: input.shape[-1] must be greater than or equal to tau.shape[-1]")
    return TensorMeta(tuple(input.shape), input.dtype)


@register("linalg.householder_product", family="linalg", aten=["aten::linalg_householder_product.default"],
          meta=_householder_meta, cost=lambda a: _factor_cost(
              a.input, [_householder_meta(a)], 2, temporaries(2, a.input.shape, a.input.dtype)),
          bound=True, api=("orgqr",), methods=("orgqr",))
def householder_product(input: Tensor, tau: Tensor) -> Tensor:
    """The first n columns of H_1 ... H_k (n = input.shape[-1], k = tau.shape[-1]) for the reflectors in
    compact form below the diagonal of ``input``'s columns."""
    meta = householder_product.meta(input, tau)
    return _apply_reflectors(input, tau, None, meta.shape, left=True, descending=True)


def _ormqr_meta(a):
    input, tau, other, left, op = a.input, a.tau, a.other, a.left, "torch.ormqr"
    _check_matrix(input, op, "input")
    _check_matrix(other, op, "other")
    _check_same_dtype(input, tau, op, ("input", "tau"))
    _check_same_dtype(input, other, op, ("input", "other"))
    if len(other.shape) != len(input.shape) or tuple(other.shape[:-2]) != tuple(input.shape[:-2]):
        raise RuntimeError(f"{op}: Expected batch dimensions of other to be equal to input.shape[:-2], but got "
                           f"other of shape {tuple(other.shape)} for input of shape {tuple(input.shape)}")
    if len(tau.shape) != len(input.shape) - 1 or tuple(tau.shape[:-1]) != tuple(input.shape[:-2]):
        raise RuntimeError(f"{op}: Expected batch dimensions of tau to be equal to input.shape[:-2], but got "
                           f"tau of shape {tuple(tau.shape)} for input of shape {tuple(input.shape)}")
    if tau.shape[-1] > input.shape[-1]:
        raise RuntimeError(f"{op}: input.shape[-1] must be greater than or equal to tau.shape[-1]")
    side = -2 if left else -1
    if other.shape[side] != input.shape[-2]:
        raise RuntimeError(f"{op}: other.shape[{side}] must be equal to input.shape[-2] ({input.shape[-2]}) "
                           f"when left={left}; got {other.shape[side]}")
    if tau.shape[-1] > input.shape[-2]:
        raise RuntimeError(f"{op}: input.shape[-2] must be greater than or equal to tau.shape[-1]")
    return TensorMeta(tuple(other.shape), other.dtype)


@register("ormqr", family="linalg", aten=["aten::ormqr.default"], meta=_ormqr_meta,
          cost=lambda a: _factor_cost(a.other, [_ormqr_meta(a)], 2, temporaries(3, a.other.shape, a.other.dtype)),
          bound=True, methods=("ormqr",))
def ormqr(input: Tensor, tau: Tensor, other: Tensor, left: bool = True, transpose: bool = False) -> Tensor:
    """Q other (``left``) or other Q, Q^T for Q when ``transpose``, Q the product of the compact
    reflectors of ``input`` and ``tau`` (``geqrf``'s outputs)."""
    meta = ormqr.meta(input, tau, other, left, transpose)
    # Q = H_1 ... H_k: Q C and C Q^T apply H_k first
    return _apply_reflectors(input, tau, other, meta.shape, left=left, descending=left != transpose)


_QR_MODES = ("reduced", "complete", "r")


def _qr_metas(A, mode):
    if mode not in _QR_MODES:
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), "
                           "'r', or 'complete'")
    _check_matrix(A, "linalg.qr")
    m, n = A.shape[-2:]
    batch = tuple(A.shape[:-2])
    r_rows = m if mode == "complete" else min(m, n)
    q_shape = (0,) if mode == "r" else batch + (m, m if mode == "complete" else min(m, n))
    return TensorMeta(q_shape, A.dtype), TensorMeta(batch + (r_rows, n), A.dtype)


@register("linalg.qr", family="linalg", aten=["aten::linalg_qr.default"], meta=lambda a: _qr_metas(a.A, a.mode),
          cost=lambda a: _factor_cost(a.A, _qr_metas(a.A, a.mode), 4, temporaries(3, a.A.shape, a.A.dtype)),
          bound=True, api=())
def linalg_qr(A: Tensor, mode: str = "reduced"):
    """A = Q R, Q with orthonormal columns (m x k, or m x m when ``mode`` is 'complete'), R upper
    triangular with LAPACK's signs; mode 'r' returns an empty Q."""
    q_meta, r_meta = _qr_metas(A, mode)
    with scratch_scope():
        a, tau = geqrf(A)
    r = a.narrow(-2, 0, r_meta.shape[-2]).triu()
    q = new_tensor(q_meta.shape, A.dtype, A.device) if mode == "r" else \
        _apply_reflectors(a, tau, None, q_meta.shape, left=True, descending=True)
    return linalg_qr_result(q, r)


@register("qr", family="linalg", aten=["aten::qr.default"],
          meta=lambda a: _qr_metas(a.input, "reduced" if a.some else "complete"),
          cost=lambda a: get("linalg.qr").cost(a.input, "reduced" if a.some else "complete"), bound=True,
          methods=("qr",))
def qr(input: Tensor, some: bool = True):
    """``linalg.qr`` with mode 'reduced' (``some``) or 'complete'."""
    return qr_result(*linalg_qr(input, "reduced" if some else "complete"))


# ---- symmetric eigenproblem -------------------------------------------------------------------------------

def _eigh_metas(A, UPLO, vectors: bool, op: str):
    if UPLO not in ("L", "U", "l", "u"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    _check_matrix(A, op, square=True)
    values = TensorMeta(tuple(A.shape[:-1]), A.dtype)
    return (values, TensorMeta(tuple(A.shape), A.dtype)) if vectors else values


def _eigh_rules(op: str, vectors: bool) -> dict:
    """The meta and cost rules, of bound arguments."""
    def meta(a):
        return _eigh_metas(a.A, a.UPLO, vectors, op)

    def cost(a):
        outputs = meta(a)
        return _factor_cost(a.A, outputs if vectors else [outputs], _JACOBI_FLOPS, temporaries(1, a.A.shape, a.A.dtype))
    return {"meta": meta, "cost": cost}


def _eigh(A: Tensor, UPLO: str, vectors: bool, op: str):
    _eigh_metas(A, UPLO, vectors, op)
    n = A.shape[-1]
    values = new_tensor(tuple(A.shape[:-1]), A.dtype, A.device)
    vectors_out = new_tensor(tuple(A.shape) if vectors else (0,), A.dtype, A.device)
    if values.numel():
        with scratch_scope():
            x = _batched(A)
        launch(K.eigh, (x.shape[0],), A.device, [x, n * n, n, 1, n, values, vectors_out],
               LOWER=UPLO in ("L", "l"), VECTORS=vectors, INDEX_64=needs_index_64(x), BLOCK=_block(n))
    return values, vectors_out


@register("linalg.eigh", family="linalg", aten=["aten::linalg_eigh.default"],
          **_eigh_rules("linalg.eigh", True), bound=True, api=())
def eigh(A: Tensor, UPLO: str = "L"):
    """Eigenvalues in ascending order and orthonormal eigenvectors (columns) of symmetric A, read from
    its lower ('L') or upper ('U') triangle."""
    return linalg_eigh_result(*_eigh(A, UPLO, True, "linalg.eigh"))


@register("linalg.eigvalsh", family="linalg", aten=["aten::linalg_eigvalsh.default"],
          **_eigh_rules("linalg.eigvalsh", False), bound=True, api=())
def eigvalsh(A: Tensor, UPLO: str = "L") -> Tensor:
    """``linalg.eigh``'s eigenvalues alone."""
    return _eigh(A, UPLO, False, "linalg.eigvalsh")[0]


# ---- SVD ----------------------------------------------------------------------------------------------------

def _svd_shapes(A, full_matrices: bool):
    m, n = A.shape[-2:]
    k = min(m, n)
    batch = tuple(A.shape[:-2])
    return batch + (m, m if full_matrices else k), batch + (k,), batch + (n if full_matrices else k, n)


def _svd_metas(A, full_matrices, driver):
    _check_matrix(A, "linalg.svd")
    if driver is not None:
        raise RuntimeError("torch.linalg.svd: keyword argument `driver=` is only supported on CUDA inputs with "
                           "cuSOLVER backend.")
    return tuple(TensorMeta(shape, A.dtype) for shape in _svd_shapes(A, full_matrices))


def _svd_meta(a):
    return _svd_metas(a.A, a.full_matrices, a.driver)


def _svd_cost(a):
    return _factor_cost(a.A, _svd_meta(a), _JACOBI_FLOPS, temporaries(1, a.A.shape, a.A.dtype))


def _svd(A: Tensor, full_matrices: bool, vectors: bool):
    """(U, S, Vh) of each matrix of A; U and Vh empty unless ``vectors``."""
    u_shape, s_shape, vh_shape = _svd_shapes(A, full_matrices)
    m, n = A.shape[-2:]
    s = new_tensor(s_shape, A.dtype, A.device)
    u = new_tensor(u_shape if vectors else (0,), A.dtype, A.device)
    vh = new_tensor(vh_shape if vectors else (0,), A.dtype, A.device)
    batch = S.numel(A.shape[:-2])
    if batch == 0 or (s.numel() == 0 and not vectors):
        return u, s, vh
    with scratch_scope():
        x = _batched(A)
    # the kernel factors a tall matrix: a wide one is factored transposed, its U and V exchanged
    tall = m >= n
    rows, cols = (m, n) if tall else (n, m)
    u_cols = (u_shape[-1] if tall else vh_shape[-2]) if vectors else 0
    # U's strides, then V's, each as the kernel's (row, column) strides: Vh is V transposed
    if tall:
        left, right = [u, u_shape[-1], 1], [vh, 1, vh_shape[-1]]
    else:
        left, right = [vh, 1, vh_shape[-1]], [u, u_shape[-1], 1]
    a_strides = [n, 1] if tall else [1, n]
    launch(K.svd, (batch,), A.device, [x, m * n, *a_strides, rows, cols, s, *left, u_cols, *right],
           VECTORS=vectors, INDEX_64=needs_index_64(x, u, vh), BLOCK=_block(m, n))
    return u, s, vh


@register("linalg.svd", family="linalg", aten=["aten::linalg_svd.default"], meta=_svd_meta, cost=_svd_cost,
          bound=True, api=())
def linalg_svd(A: Tensor, full_matrices: bool = True, *, driver=None):
    """A = U diag(S) Vh, S descending; U m x m and Vh n x n when ``full_matrices``, else k = min(m, n)
    of each."""
    _svd_metas(A, full_matrices, driver)
    return linalg_svd_result(*_svd(A, full_matrices, True))


def _svdvals_meta(a):
    return _svd_metas(a.A, False, a.driver)[1]


@register("linalg.svdvals", family="linalg", aten=["aten::linalg_svdvals.default"], meta=_svdvals_meta,
          cost=lambda a: _factor_cost(a.A, [_svdvals_meta(a)], _JACOBI_FLOPS, temporaries(1, a.A.shape, a.A.dtype)),
          bound=True, api=())
def svdvals(A: Tensor, *, driver=None) -> Tensor:
    """The singular values of each matrix, descending."""
    _svd_metas(A, False, driver)
    return _svd(A, False, False)[1]


def _old_svd_metas(input, some, compute_uv):
    u, s, vh = _svd_metas(input, not some or not compute_uv, None)
    return u, s, TensorMeta(tuple(vh.shape[:-2]) + (vh.shape[-1], vh.shape[-2]), vh.dtype)


@register("svd", family="linalg", aten=["aten::svd.default"],
          meta=lambda a: _old_svd_metas(a.input, a.some, a.compute_uv),
          cost=lambda a: _factor_cost(a.input, _old_svd_metas(a.input, a.some, a.compute_uv), _JACOBI_FLOPS,
                                      temporaries(1, a.input.shape, a.input.dtype)),
          bound=True, methods=("svd",))
def svd(input: Tensor, some: bool = True, compute_uv: bool = True):
    """``linalg.svd`` returning V rather than Vh (reduced when ``some``); without ``compute_uv``, U and V
    are zeros of shapes (m, m) and (n, n)."""
    u_meta, _, v_meta = _old_svd_metas(input, some, compute_uv)
    if not compute_uv:
        s = _svd(input, False, False)[1]
        return svd_result(_op("zeros")(u_meta.shape, dtype=input.dtype, device=input.device), s,
                          _op("zeros")(v_meta.shape, dtype=input.dtype, device=input.device))
    u, s, vh = _svd(input, not some, True)
    return svd_result(u, s, vh.transpose(-2, -1))


# ---- built on singular values -----------------------------------------------------------------------------

def _tolerance(s_max, atol, rtol, default_rtol):
    """max(atol, rtol * s_max) as torch forms it: rtol defaults to ``default_rtol`` unless atol is given
    and positive; ``s_max`` keeps a trailing dim of 1."""
    if rtol is None:
        if atol is None:
            rtol = default_rtol
        elif isinstance(atol, Tensor):
            rtol = _op("where")(atol > 0, 0.0, default_rtol)
        else:
            rtol = 0.0 if atol > 0 else default_rtol
    if isinstance(rtol, Tensor):
        rtol = rtol.unsqueeze(-1)
    tolerance = s_max * rtol
    if atol is None:
        return tolerance
    return _op("maximum")(tolerance, atol.unsqueeze(-1) if isinstance(atol, Tensor) else
                          _op("full_like")(tolerance, atol))


def _default_rtol(A) -> float:
    return _EPSILON[A.dtype.name] * max(A.shape[-2:])


def _check_tolerances(A, atol, rtol, op):
    for name, value in (("atol", atol), ("rtol", rtol)):
        if isinstance(value, Tensor) and value.dtype.is_complex:
            raise RuntimeError(f"{op}: {name} tensor of complex type is not supported.")


def _pinv_result(A, hermitian, atol, rtol):
    _check_matrix(A, "linalg.pinv", square=hermitian)
    _check_tolerances(A, atol, rtol, "linalg.pinv")
    return TensorMeta(tuple(A.shape[:-2]) + (A.shape[-1], A.shape[-2]), A.dtype)


def _spectral_workspace(A, count=6) -> int:
    return temporaries(count, tuple(A.shape[:-2]) + (max(A.shape[-2:]),) * 2, _F64)


@register("linalg.pinv", family="linalg", aten=["aten::linalg_pinv.atol_rtol_tensor",
                                                "aten::linalg_pinv.atol_rtol_float", "aten::linalg_pinv.default"],
          meta=lambda a: _pinv_result(a.A, a.hermitian, a.atol, a.rtol),
          cost=lambda a: _factor_cost(a.A, [_pinv_result(a.A, a.hermitian, a.atol, a.rtol)], _JACOBI_FLOPS,
                                      _spectral_workspace(a.A)),
          bound=True, api=())
def pinv(A: Tensor, rcond=None, hermitian: bool = False, *, atol=None, rtol=None) -> Tensor:
    """The pseudoinverse from the SVD (from eigh when ``hermitian``), in float64: singular values at or
    below max(atol, rtol * largest) count as zero. ``rcond`` (torch's older spelling) is rtol with atol 0."""
    meta = _pinv_result(A, hermitian, atol, rtol)
    if rcond is not None:
        atol, rtol = 0.0, rcond
    if S.numel(meta.shape) == 0:
        return _op("zeros")(meta.shape, dtype=A.dtype, device=A.device)
    with scratch_scope():
        wide = A.to(_F64)
        if hermitian:
            values, vectors = eigh(wide)
            magnitudes = values.abs()
            left, right = vectors, vectors.transpose(-2, -1)
        else:
            u, magnitudes, vh = _svd(wide, False, True)
            left, right = u, vh
            values = magnitudes
        tolerance = _tolerance(magnitudes.amax(-1, keepdim=True), atol, rtol, _default_rtol(A))
        inverted = _op("where")(magnitudes > tolerance, values.reciprocal(), 0.0)
        # pinv = V diag(1 / s) U^T
        product = _op("linalg.matrix_product")(right.transpose(-2, -1) * inverted.unsqueeze(-2),
                                               left.transpose(-2, -1))
    return product.to(A.dtype)


@register("pinverse", family="linalg", aten=["aten::pinverse.default"],
          meta=lambda a: _pinv_result(a.input, False, None, None),
          cost=lambda a: get("linalg.pinv").cost(a.input, a.rcond), bound=True, methods=("pinverse",))
def pinverse(input: Tensor, rcond: float = 1e-15) -> Tensor:
    """``linalg.pinv`` with rtol ``rcond`` and atol 0."""
    return pinv(input, rcond)


def _matrix_rank_result(A, hermitian, atol, rtol):
    _check_matrix(A, "linalg.matrix_rank", square=hermitian)
    _check_tolerances(A, atol, rtol, "linalg.matrix_rank")
    return TensorMeta(tuple(A.shape[:-2]), _I64)


@register("linalg.matrix_rank", family="linalg", aten=["aten::linalg_matrix_rank.atol_rtol_tensor",
                                                         "aten::linalg_matrix_rank.atol_rtol_float",
                                                         "aten::linalg_matrix_rank.default"],
          meta=lambda a: _matrix_rank_result(a.A, a.hermitian, a.atol, a.rtol),
          cost=lambda a: _factor_cost(a.A, [_matrix_rank_result(a.A, a.hermitian, a.atol, a.rtol)], _JACOBI_FLOPS,
                                      _spectral_workspace(a.A, 3)),
          bound=True, api=())
def matrix_rank(A: Tensor, tol=None, hermitian: bool = False, *, atol=None, rtol=None) -> Tensor:
    """The number of singular values (|eigenvalues| when ``hermitian``) above max(atol, rtol * largest);
    ``tol`` (torch's older spelling) is atol with rtol 0."""
    meta = _matrix_rank_result(A, hermitian, atol, rtol)
    if tol is not None:
        atol, rtol = tol, 0.0
    if A.shape[-1] == 0 or A.shape[-2] == 0:
        return _op("zeros")(meta.shape, dtype=_I64, device=A.device)
    with scratch_scope():
        magnitudes = eigvalsh(A).abs() if hermitian else svdvals(A)
        tolerance = _tolerance(magnitudes.amax(-1, keepdim=True), atol, rtol, _default_rtol(A))
    return (magnitudes > tolerance).sum(-1)


_LSTSQ_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def _lstsq_metas(A, B, driver):
    op = "torch.linalg.lstsq"
    if driver is not None and driver not in _LSTSQ_DRIVERS:
        raise RuntimeError(f"{op}: parameter `driver` should be one of ('gels', 'gelsy', 'gelsd', 'gelss')")
    if len(A.shape) < 2:
        raise RuntimeError(f"{op}: input must have at least 2 dimensions.")
    if len(B.shape) < 1:
        raise RuntimeError(f"{op}: other must have at least 1 dimension.")
    _check_matrix(A, op, "input")
    _check_same_dtype(A, B, op, ("input", "other"))
    vector = len(B.shape) == len(A.shape) - 1
    if (B.shape[-1] if vector else B.shape[-2]) != A.shape[-2]:
        raise RuntimeError(f"{op}: input.size(-2) should match other.size(-{1 if vector else 2})")
    m, n = A.shape[-2:]
    batch = S.broadcast_shapes(tuple(A.shape[:-2]), tuple(B.shape[:-1] if vector else B.shape[:-2]))
    columns = () if vector else (B.shape[-1],)
    driver = driver or "gelsy"
    # a vector right-hand side keeps a trailing 1 in its residuals, as torch's does
    residuals = batch + (columns or (1,)) if driver != "gelsy" and m > n else (0,)
    rank = batch if driver != "gels" else (0,)
    values = batch + (min(m, n),) if driver in ("gelsd", "gelss") else (0,)
    return (TensorMeta(batch + (n,) + columns, A.dtype), TensorMeta(residuals, A.dtype), TensorMeta(rank, _I64),
            TensorMeta(values, A.dtype))


@register("linalg.lstsq", family="linalg", aten=["aten::linalg_lstsq.default"],
          meta=lambda a: _lstsq_metas(a.A, a.B, a.driver),
          cost=lambda a: _factor_cost(a.A, _lstsq_metas(a.A, a.B, a.driver), _JACOBI_FLOPS,
                                      _spectral_workspace(a.A, 8)),
          bound=True, api=())
def lstsq(A: Tensor, B: Tensor, rcond=None, *, driver=None):
    """The least-squares solution of A X = B of least norm, from the SVD in float64: singular values at
    or below rcond * largest (default eps * max(m, n)) count as zero. Outputs as torch's driver gives them
    (default 'gelsy'): residuals (the squared column norms of A X - B) where m > n, every A has full rank
    and the driver is not 'gelsy'; the rank but for 'gels'; singular values for 'gelsd' and 'gelss'."""
    x_meta, residuals_meta, rank_meta, values_meta = _lstsq_metas(A, B, driver)
    vector = len(B.shape) == len(A.shape) - 1
    m, n = A.shape[-2:]
    batch = tuple(x_meta.shape[:-1 if vector else -2])
    with scratch_scope():
        a = A.to(_F64).expand(batch + (m, n))
        b = B.to(_F64).unsqueeze(-1) if vector else B.to(_F64)
        b = b.expand(batch + (m, b.shape[-1]))
        if min(m, n) == 0:
            solution = _op("zeros")(batch + (n, b.shape[-1]), dtype=_F64, device=A.device)
            values = _op("zeros")(batch + (0,), dtype=_F64, device=A.device)
            rank = _op("zeros")(batch, dtype=_I64, device=A.device)
        else:
            u, values, vh = _svd(a, False, True)
            tolerance = values.amax(-1, keepdim=True) * (_default_rtol(A) if rcond is None or rcond < 0 else rcond)
            kept = values > tolerance
            inverted = _op("where")(kept, values.reciprocal(), 0.0)
            product = _op("linalg.matrix_product")
            solution = product(vh.transpose(-2, -1) * inverted.unsqueeze(-2), product(u.transpose(-2, -1), b))
            rank = kept.sum(-1)
        residuals = None
        if residuals_meta.shape != (0,):
            if bool((rank == n).all()):
                residuals = (_op("linalg.matrix_product")(a, solution) - b).square().sum(-2)
                residuals = residuals.reshape(residuals_meta.shape)
        x = solution.reshape(x_meta.shape) if vector else solution
    empty = _op("zeros")((0,), dtype=A.dtype, device=A.device)
    return linalg_lstsq_result(
        x.to(A.dtype), empty if residuals is None else residuals.to(A.dtype),
        rank if rank_meta.shape != (0,) else _op("zeros")((0,), dtype=_I64, device=A.device),
        values.to(A.dtype) if values_meta.shape != (0,) else empty)


# ---- cond -------------------------------------------------------------------------------------------------

_SPECTRAL_COND_ORDERS = (None, 2, -2)
_NORM_COND_ORDERS = ("fro", "nuc", math.inf, -math.inf, 1, -1)


def _cond_result(A, p):
    if p not in _SPECTRAL_COND_ORDERS + _NORM_COND_ORDERS:
        raise RuntimeError(f"linalg.cond got an invalid norm type: {p}")
    # the orders other than 2 and -2 take the inverse: square matrices only
    _check_matrix(A, "linalg.cond", square=p not in _SPECTRAL_COND_ORDERS)
    return TensorMeta(tuple(A.shape[:-2]), A.dtype)


@register("linalg.cond", family="linalg", aten=["aten::linalg_cond.default", "aten::linalg_cond.p_str"],
          meta=lambda a: _cond_result(a.A, a.p),
          cost=lambda a: _factor_cost(a.A, [_cond_result(a.A, a.p)], _JACOBI_FLOPS, _spectral_workspace(a.A, 3)),
          bound=True, api=())
def cond(A: Tensor, p=None) -> Tensor:
    """The condition number: the largest over the smallest singular value (p None or 2), or its inverse
    (-2); for the other orders, the norm of A times the norm of its inverse (inf where A is singular)."""
    meta = _cond_result(A, p)
    if min(A.shape[-2:]) == 0:  # torch's condition number of an empty matrix
        return _op("zeros")(meta.shape, dtype=A.dtype, device=A.device)
    if p in _NORM_COND_ORDERS:
        with scratch_scope():
            inverse, info = _op("linalg.inv_ex")(A)
            norm = _op("linalg.matrix_norm")
            product = norm(A, p) * norm(inverse, p)
        return _op("where")(info > 0, math.inf, product)
    with scratch_scope():
        values = svdvals(A)
        largest, smallest = values.amax(-1), values.amin(-1)
    return smallest / largest if p == -2 else largest / smallest


# ---- samples ---------------------------------------------------------------------------------------

# vectors (eigen-, singular, Householder) are unique up to signs and rotations: their samples compare shapes
# and dtypes; the values they give are compared in their own tests and through the ops built on them
_VECTORS = dict(compare="metadata")
_MATRICES = (sample(operand(3, 2), **_VECTORS), sample(operand(2, 3, dtype="float64"), **_VECTORS),
             sample(operand(2, 3, 3, layout="transposed"), **_VECTORS))
_SYMMETRIC = (sample(operand(3, 3, values="spd")), sample(operand(2, 2, 2, dtype="float64", values="spd")))
_SAMPLES = {
    "geqrf": Samples(_MATRICES),
    "linalg.householder_product": Samples((sample(operand(3, 2), operand(2)), sample(operand(2, 3, 3, dtype="float64"),
                                                                                    operand(2, 2, dtype="float64")))),
    "ormqr": Samples((sample(operand(3, 2), operand(2), operand(3, 2)), sample(operand(3, 3), operand(2), operand(2, 3),
                                                                          False, True))),
    "linalg.qr": Samples(_MATRICES + (sample(operand(3, 2), "complete", **_VECTORS),)),
    "qr": Samples(_MATRICES + (sample(operand(3, 2), False, **_VECTORS),)),
    "linalg.eigh": Samples(tuple(Sample(case.args, case.kwargs, "metadata") for case in _SYMMETRIC)),
    "linalg.eigvalsh": Samples(_SYMMETRIC + (sample(operand(3, 3, values="spd"), "U"),),
                               lambda A, UPLO="L": np.linalg.eigvalsh(A, UPLO)),
    "linalg.svd": Samples(_MATRICES + (sample(operand(2, 3), False, **_VECTORS),)),
    "linalg.svdvals": Samples((sample(operand(3, 2)), sample(operand(2, 3, dtype="float64")),
                               sample(operand(2, 3, 3, layout="transposed"))), lambda A, driver=None: np.linalg.svd(
                                   A, compute_uv=False)),
    "svd": Samples(_MATRICES + (sample(operand(2, 3), compute_uv=False, **_VECTORS),)),
    "linalg.pinv": Samples((sample(operand(3, 2)), sample(operand(2, 3, dtype="float64")),
                            sample(operand(3, 3, values="spd"), hermitian=True)),
                           lambda A, rcond=None, hermitian=False, **ignored: np.linalg.pinv(A, hermitian=hermitian)),
    "pinverse": Samples((sample(operand(3, 2)), sample(operand(2, 3, dtype="float64"))), lambda A, rcond=1e-15: np.linalg.pinv(A)),
    "linalg.matrix_rank": Samples((sample(operand(3, 2)), sample(operand(3, 3, values="spd"), hermitian=True)),
                                  lambda A, tol=None, hermitian=False, **ignored: np.asarray(np.linalg.matrix_rank(
                                      A, hermitian=hermitian))),
    "linalg.lstsq": Samples((sample(operand(4, 2), operand(4, 1), **_VECTORS),
                             sample(operand(3, 3, values="invertible", dtype="float64"), operand(3, 2, dtype="float64"),
                                    **_VECTORS))),
    "linalg.cond": Samples((sample(operand(3, 3, values="invertible")), sample(operand(3, 2)),
                            sample(operand(3, 3, values="invertible", dtype="float64"), "fro")),
                           lambda A, p=None: np.linalg.cond(A, p)),
}
family_samples("linalg", by_name(_SAMPLES))
