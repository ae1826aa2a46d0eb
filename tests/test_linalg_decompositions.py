"""QR, the symmetric eigensolver, the SVD and what builds on them (issue #29) against NumPy float64.

The kernels compute in float64 whatever the input, so float64 results hold to a few hundred ulps of the
matrix's norm (a Jacobi sweep or Householder step per column, on matrices of side <= 6: 1e-12 relative);
float32 results are float64 results rounded once, so they hold to float32's resolution (2e-6 relative).
Factors unique only up to sign (eigenvectors, singular vectors) are checked through reconstructions and
invariants; R and the compact reflectors, whose signs follow LAPACK's, are compared with NumPy's (LAPACK's)
own."""
import json
import math

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.ops.linalg_lu import MAX_MATRIX_SIZE
from tests.conftest import cpu_kernels, to_nbx
from tests.test_compile_check import _check, _record

F64 = dict(rtol=1e-12, atol=1e-12)
F32 = dict(rtol=2e-6, atol=2e-6)


@pytest.fixture
def r():
    return np.random.default_rng(2929)


def close(actual, expected, tolerance=F64):
    np.testing.assert_allclose(np.asarray(actual.numpy(), np.float64), expected, **tolerance)


def orthonormal_columns(q, tolerance=F64):
    q = np.asarray(q, np.float64)
    np.testing.assert_allclose(np.swapaxes(q, -1, -2) @ q, np.broadcast_to(np.eye(q.shape[-1]), q.shape[:-2] +
                                                                           (q.shape[-1],) * 2), **tolerance)


def reflectors_product(h, tau, columns):
    """H_1 ... H_k's first ``columns`` columns for compact reflectors ``h`` (m x n) and ``tau``: the
    definition, H_i = I - tau_i v_i v_i^T with v_i's leading 1 implicit."""
    m = h.shape[0]
    q = np.eye(m)
    for i in range(len(tau)):
        v = np.concatenate([np.zeros(i), [1.0], h[i + 1:, i]])
        q = q @ (np.eye(m) - tau[i] * np.outer(v, v))
    return q[:, :columns]


# ---- QR -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(4, 3), (3, 5), (4, 4)])
def test_geqrf_is_lapacks_compact_form(r, shape):
    a = r.standard_normal(shape)
    h, tau = np.linalg.qr(a, mode="raw")  # LAPACK's geqrf, stored transposed
    ours, our_tau = nbx.geqrf(to_nbx(a))
    close(ours, h.T)
    close(our_tau, tau)


def test_geqrf_batched_float32_and_method(r):
    a = r.standard_normal((2, 3, 5, 3)).astype(np.float32)
    ours, tau = to_nbx(a).geqrf()
    assert ours.dtype == nbx.float32 and tuple(tau.shape) == (2, 3, 3)
    for index in np.ndindex(2, 3):
        h, expected_tau = np.linalg.qr(a[index].astype(np.float64), mode="raw")
        close(ours[index], h.T, F32)
        close(tau[index], expected_tau, F32)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4)])
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_linalg_qr_modes(r, shape, mode):
    a = r.standard_normal(shape)
    q, rr = nbx.linalg.qr(to_nbx(a), mode=mode)
    expected_r = np.linalg.qr(a, mode="complete" if mode == "complete" else "reduced")[1]
    close(rr, expected_r)
    if mode == "r":
        assert tuple(q.shape) == (0,)
        return
    m, n = shape[-2:]
    assert tuple(q.shape) == shape[:-2] + (m, m if mode == "complete" else min(m, n))
    orthonormal_columns(q.numpy())
    close(nbx.tensor(q.numpy() @ rr.numpy()), a)


def test_qr_some_and_method(r):
    a = r.standard_normal((5, 2)).astype(np.float32)
    q, rr = nbx.qr(to_nbx(a), some=False)
    assert tuple(q.shape) == (5, 5) and tuple(rr.shape) == (5, 2)
    q, rr = to_nbx(a).qr()
    assert tuple(q.shape) == (5, 2)
    close(nbx.tensor(q.numpy().astype(np.float64) @ rr.numpy()), a, F32)


def test_qr_empty_and_errors(r):
    q, rr = nbx.linalg.qr(to_nbx(np.zeros((4, 0))))
    assert tuple(q.shape) == (4, 0) and tuple(rr.shape) == (0, 0)
    q, rr = nbx.linalg.qr(to_nbx(np.zeros((0, 3, 2))))
    assert tuple(q.shape) == (0, 3, 2) and tuple(rr.shape) == (0, 2, 2)
    with pytest.raises(RuntimeError, match="unrecognized mode"):
        nbx.linalg.qr(to_nbx(np.eye(2)), mode="full")
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        nbx.linalg.qr(to_nbx(np.ones(3)))
    with pytest.raises(RuntimeError, match="Got Long"):
        nbx.linalg.qr(to_nbx(np.ones((2, 2), np.int64)))
    with pytest.raises(RuntimeError, match="Low precision"):
        nbx.linalg.qr(to_nbx(np.ones((2, 2), np.float16)))
    with pytest.raises(NotImplementedError, match=f"at most {MAX_MATRIX_SIZE} rows and columns"):
        nbx.geqrf(to_nbx(np.ones((MAX_MATRIX_SIZE + 1, 2))))


@pytest.mark.parametrize("shape, k", [((5, 3), 3), ((5, 3), 2), ((4, 4), 4)])
def test_householder_product(r, shape, k):
    h, tau = np.linalg.qr(r.standard_normal(shape), mode="raw")
    h, tau = h.T.copy(), tau[:k]
    q = nbx.linalg.householder_product(to_nbx(h), to_nbx(tau))
    close(q, reflectors_product(h, tau, shape[1]))
    close(nbx.orgqr(to_nbx(h), to_nbx(tau)), reflectors_product(h, tau, shape[1]))
    # no reflectors: the identity's first columns
    close(nbx.linalg.householder_product(to_nbx(h), to_nbx(tau[:0])), np.eye(*shape))


def test_householder_product_errors(r):
    with pytest.raises(RuntimeError, match="greater than or equal to input.shape"):
        nbx.linalg.householder_product(to_nbx(np.ones((2, 3))), to_nbx(np.ones(2)))
    with pytest.raises(RuntimeError, match="tau.shape"):
        nbx.linalg.householder_product(to_nbx(np.ones((3, 2))), to_nbx(np.ones(3)))
    with pytest.raises(RuntimeError, match="batch dimensions of tau"):
        nbx.linalg.householder_product(to_nbx(np.ones((2, 3, 2))), to_nbx(np.ones((3, 2))))
    with pytest.raises(RuntimeError, match="same dtype"):
        nbx.linalg.householder_product(to_nbx(np.ones((3, 2))), to_nbx(np.ones(2, np.float32)))


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("transpose", [True, False])
def test_ormqr(r, left, transpose):
    a = r.standard_normal((2, 5, 3))
    c = r.standard_normal((2, 5, 4) if left else (2, 4, 5))
    compact, taus = nbx.geqrf(to_nbx(a))
    ours = nbx.ormqr(compact, taus, to_nbx(c), left, transpose)
    for b in range(2):
        q = reflectors_product(compact[b].numpy(), taus[b].numpy(), 5)
        q = q.T if transpose else q
        close(ours[b], q @ c[b] if left else c[b] @ q)


def test_ormqr_errors():
    a, tau = to_nbx(np.ones((4, 2))), to_nbx(np.ones(2))
    with pytest.raises(RuntimeError, match=r"other.shape\[-2\] must be equal"):
        nbx.ormqr(a, tau, to_nbx(np.ones((3, 4))))
    with pytest.raises(RuntimeError, match=r"other.shape\[-1\] must be equal"):
        nbx.ormqr(a, tau, to_nbx(np.ones((4, 3))), left=False)


# ---- eigh -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_reads_one_triangle(r, uplo):
    a = r.standard_normal((3, 5, 5))
    symmetric = a + np.swapaxes(a, -1, -2)
    # the other triangle holds garbage: only the named one is read
    given = np.tril(symmetric) + np.triu(a, 1) if uplo == "L" else np.triu(symmetric) + np.tril(a, -1)
    values, vectors = nbx.linalg.eigh(to_nbx(given), UPLO=uplo)
    close(values, np.linalg.eigvalsh(symmetric))
    v = vectors.numpy()
    orthonormal_columns(v)
    close(nbx.tensor(v * values.numpy()[..., None, :] @ np.swapaxes(v, -1, -2)), symmetric)
    close(nbx.linalg.eigvalsh(to_nbx(given), uplo), np.linalg.eigvalsh(symmetric))


def test_eigh_float32_repeated_and_diagonal(r):
    a = r.standard_normal((4, 4))
    symmetric = (a + a.T).astype(np.float32)
    values, vectors = nbx.linalg.eigh(to_nbx(symmetric))
    assert values.dtype == nbx.float32
    close(values, np.linalg.eigvalsh(symmetric.astype(np.float64)), F32)
    orthonormal_columns(vectors.numpy(), F32)
    # a repeated eigenvalue: any orthonormal basis of its space, values ascending
    values, vectors = nbx.linalg.eigh(to_nbx(np.diag([3.0, 1.0, 3.0, -2.0])))
    close(values, [-2.0, 1.0, 3.0, 3.0])
    orthonormal_columns(vectors.numpy())


def test_eigh_empty_nan_and_errors():
    values, vectors = nbx.linalg.eigh(to_nbx(np.zeros((0, 3, 3))))
    assert tuple(values.shape) == (0, 3) and tuple(vectors.shape) == (0, 3, 3)
    values, vectors = nbx.linalg.eigh(to_nbx(np.array([[1.0, math.nan], [math.nan, 1.0]])))
    assert np.isnan(values.numpy()).all() and np.isnan(vectors.numpy()).all()
    assert np.isnan(nbx.linalg.eigvalsh(to_nbx(np.array([[math.inf, 0.0], [0.0, 1.0]]))).numpy()).all()
    with pytest.raises(RuntimeError, match="square matrices, but they are 2 by 3"):
        nbx.linalg.eigh(to_nbx(np.ones((2, 3))))
    with pytest.raises(RuntimeError, match="UPLO"):
        nbx.linalg.eigh(to_nbx(np.eye(2)), UPLO="X")
    with pytest.raises(RuntimeError, match="Got Long"):
        nbx.linalg.eigvalsh(to_nbx(np.eye(2, dtype=np.int64)))


# ---- SVD --------------------------------------------------------------------------------------------------

def check_svd(a, u, s, vh, tolerance=F64):
    u, s, vh = u.numpy().astype(np.float64), s.numpy().astype(np.float64), vh.numpy().astype(np.float64)
    k = s.shape[-1]
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), **tolerance)
    assert (np.diff(s, axis=-1) <= 0).all()
    orthonormal_columns(u, tolerance)
    orthonormal_columns(np.swapaxes(vh, -1, -2), tolerance)
    np.testing.assert_allclose(u[..., :k] * s[..., None, :] @ vh[..., :k, :], a, **tolerance)


@pytest.mark.parametrize("shape", [(5, 3), (2, 3, 5), (2, 4, 4)])
@pytest.mark.parametrize("full_matrices", [True, False])
def test_linalg_svd(r, shape, full_matrices):
    a = r.standard_normal(shape)
    u, s, vh = nbx.linalg.svd(to_nbx(a), full_matrices=full_matrices)
    m, n = shape[-2:]
    k = min(m, n)
    assert tuple(u.shape) == shape[:-2] + (m, m if full_matrices else k)
    assert tuple(vh.shape) == shape[:-2] + (n if full_matrices else k, n)
    check_svd(a, u, s, vh)


def test_each_singular_value_is_ranked_once_in_a_batch(r):
    """Many matrices, each ranking its column norms against themselves: a norm compared with a copy summed
    in another order (as a GPU sums a transposed tile) would count itself, leaving a slot unwritten."""
    a = r.standard_normal((24, 7, 4))
    u, s, vh = nbx.linalg.svd(to_nbx(a), full_matrices=False)
    check_svd(a, u, s, vh)


def test_svd_rank_deficient_float32(r):
    # rank 1 and the zero matrix: U is still completed to an orthonormal basis
    a = np.outer(r.standard_normal(4), r.standard_normal(3)).astype(np.float32)
    check_svd(a.astype(np.float64), *nbx.linalg.svd(to_nbx(a)), F32)
    check_svd(np.zeros((3, 2)), *nbx.linalg.svd(to_nbx(np.zeros((3, 2)))))


def test_svd_old_interface(r):
    a = r.standard_normal((4, 3))
    u, s, v = nbx.svd(to_nbx(a))
    assert tuple(u.shape) == (4, 3) and tuple(v.shape) == (3, 3)
    check_svd(a, u, s, nbx.tensor(v.numpy().T.copy()))
    u, s, v = to_nbx(a).svd(some=False)
    assert tuple(u.shape) == (4, 4)
    u, s, v = nbx.svd(to_nbx(a), compute_uv=False)
    assert tuple(u.shape) == (4, 4) and tuple(v.shape) == (3, 3) and not u.numpy().any() and not v.numpy().any()
    close(s, np.linalg.svd(a, compute_uv=False))


def test_svdvals_empty_nan_and_errors(r):
    a = r.standard_normal((2, 3, 6))
    close(nbx.linalg.svdvals(to_nbx(a)), np.linalg.svd(a, compute_uv=False))
    u, s, vh = nbx.linalg.svd(to_nbx(np.zeros((3, 0))))
    close(u, np.eye(3))
    assert tuple(s.shape) == (0,) and tuple(vh.shape) == (0, 0)
    assert tuple(nbx.linalg.svdvals(to_nbx(np.zeros((0, 2, 2)))).shape) == (0, 2)
    u, s, vh = nbx.linalg.svd(to_nbx(np.array([[1.0, math.nan], [0.0, 1.0]])))
    assert np.isnan(u.numpy()).all() and np.isnan(s.numpy()).all() and np.isnan(vh.numpy()).all()
    with pytest.raises(RuntimeError, match="driver"):
        nbx.linalg.svd(to_nbx(np.eye(2)), driver="gesvd")
    with pytest.raises(RuntimeError, match="Got Bool"):
        nbx.linalg.svdvals(to_nbx(np.eye(2, dtype=bool)))
    with pytest.raises(NotImplementedError, match=f"at most {MAX_MATRIX_SIZE} rows and columns"):
        nbx.linalg.svdvals(to_nbx(np.ones((2, MAX_MATRIX_SIZE + 1))))


# ---- pinv, matrix_rank, lstsq -----------------------------------------------------------------------------

def test_pinv(r):
    a = r.standard_normal((2, 4, 3))
    close(nbx.linalg.pinv(to_nbx(a)), np.linalg.pinv(a))
    close(to_nbx(a).pinverse(), np.linalg.pinv(a))
    low_rank = np.outer(r.standard_normal(4), r.standard_normal(3))
    close(nbx.linalg.pinv(to_nbx(low_rank)), np.linalg.pinv(low_rank))
    symmetric = a[0].T @ a[0] - 2 * np.eye(3)
    close(nbx.linalg.pinv(to_nbx(symmetric), hermitian=True), np.linalg.pinv(symmetric, hermitian=True))
    # every singular value below the tolerance: the zero matrix
    assert not nbx.linalg.pinv(to_nbx(a), atol=1e3).numpy().any()
    s = np.linalg.svd(a[0], compute_uv=False)
    rtol = (s[1] + s[2]) / 2 / s[0]
    close(nbx.linalg.pinv(to_nbx(a[0]), rtol=to_nbx(np.array(rtol))), np.linalg.pinv(a[0], rcond=rtol))
    assert tuple(nbx.linalg.pinv(to_nbx(np.zeros((0, 2, 3)))).shape) == (0, 3, 2)
    f32 = nbx.linalg.pinv(to_nbx(a.astype(np.float32)))
    assert f32.dtype == nbx.float32
    close(f32, np.linalg.pinv(a.astype(np.float32).astype(np.float64)), dict(rtol=1e-5, atol=1e-5))


def test_matrix_rank(r):
    a = np.stack([np.outer(r.standard_normal(4), r.standard_normal(4)), r.standard_normal((4, 4)), np.zeros((4, 4))])
    ranks = nbx.linalg.matrix_rank(to_nbx(a))
    assert ranks.dtype == nbx.int64 and ranks.numpy().tolist() == [1, 4, 0]
    symmetric = a + np.swapaxes(a, -1, -2)
    assert nbx.linalg.matrix_rank(to_nbx(symmetric), hermitian=True).numpy().tolist() == \
        np.linalg.matrix_rank(symmetric, hermitian=True).tolist()
    assert nbx.linalg.matrix_rank(to_nbx(np.diag([4.0, 2.0, 1.0])), atol=1.5).item() == 2
    assert nbx.linalg.matrix_rank(to_nbx(np.diag([4.0, 2.0, 1.0])), rtol=0.4).item() == 2
    assert tuple(nbx.linalg.matrix_rank(to_nbx(np.zeros((3, 0, 0)))).shape) == (3,)
    with pytest.raises(RuntimeError, match="square"):
        nbx.linalg.matrix_rank(to_nbx(np.ones((2, 3))), hermitian=True)


def test_lstsq(r):
    a, b = r.standard_normal((2, 5, 3)), r.standard_normal((2, 5, 2))
    solution, residuals, rank, values = nbx.linalg.lstsq(to_nbx(a), to_nbx(b))
    for i in range(2):
        expected, expected_residuals, _, expected_values = np.linalg.lstsq(a[i], b[i], rcond=None)
        close(solution[i], expected)
    # torch's default driver, gelsy: rank, no residuals or singular values
    assert tuple(residuals.shape) == (0,) and tuple(values.shape) == (0,) and rank.numpy().tolist() == [3, 3]
    solution, residuals, rank, values = nbx.linalg.lstsq(to_nbx(a), to_nbx(b), driver="gelsd")
    close(residuals, np.stack([np.linalg.lstsq(a[i], b[i], rcond=None)[1] for i in range(2)]))
    close(values, np.linalg.svd(a, compute_uv=False))
    solution, residuals, rank, values = nbx.linalg.lstsq(to_nbx(a), to_nbx(b), driver="gels")
    assert tuple(residuals.shape) == (2, 2) and tuple(rank.shape) == (0,) and tuple(values.shape) == (0,)
    # underdetermined: the least-norm solution; a vector right-hand side
    wide, rhs = r.standard_normal((2, 4)), r.standard_normal(2)
    solution = nbx.linalg.lstsq(to_nbx(wide), to_nbx(rhs)).solution
    close(solution, np.linalg.lstsq(wide, rhs, rcond=None)[0])
    # a vector right-hand side's residuals keep a trailing 1, as torch's do
    solution, residuals, _, _ = nbx.linalg.lstsq(to_nbx(a[0]), to_nbx(b[0, :, 0]), driver="gelsd")
    assert tuple(solution.shape) == (3,) and tuple(residuals.shape) == (1,)
    close(residuals, np.linalg.lstsq(a[0], b[0, :, 0], rcond=None)[1])
    # rank-deficient (gelsd): the least-norm solution, no residuals
    low_rank = np.outer(r.standard_normal(5), r.standard_normal(3))
    solution, residuals, rank, _ = nbx.linalg.lstsq(to_nbx(low_rank), to_nbx(b[0]), driver="gelsd")
    close(solution, np.linalg.lstsq(low_rank, b[0], rcond=None)[0], dict(rtol=1e-9, atol=1e-9))
    assert rank.item() == 1 and tuple(residuals.shape) == (0,)


def test_lstsq_errors():
    with pytest.raises(RuntimeError, match=r"input.size\(-2\) should match other.size\(-2\)"):
        nbx.linalg.lstsq(to_nbx(np.ones((3, 2))), to_nbx(np.ones((4, 2))))
    with pytest.raises(RuntimeError, match="driver"):
        nbx.linalg.lstsq(to_nbx(np.ones((3, 2))), to_nbx(np.ones((3, 2))), driver="gesv")
    with pytest.raises(RuntimeError, match="same dtype"):
        nbx.linalg.lstsq(to_nbx(np.ones((3, 2))), to_nbx(np.ones((3, 2), np.float32)))


# ---- norms and cond ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("order", ["fro", "nuc", math.inf, -math.inf, 1, -1, 2, -2])
def test_matrix_norm_orders(r, order):
    a = r.standard_normal((2, 3, 4))
    close(nbx.linalg.matrix_norm(to_nbx(a), order), np.linalg.norm(a, order, axis=(-2, -1)))
    ours = nbx.linalg.matrix_norm(to_nbx(a), order, dim=(0, 2), keepdim=True)
    assert tuple(ours.shape) == (1, 3, 1)
    close(ours, np.linalg.norm(a, order, axis=(0, 2), keepdims=True))


def test_linalg_norm_routes_and_norm_nuc(r):
    a = r.standard_normal((3, 4))
    close(nbx.linalg.norm(to_nbx(a)), np.linalg.norm(a))
    close(nbx.linalg.norm(to_nbx(a), 2), np.linalg.norm(a, 2))
    close(nbx.linalg.norm(to_nbx(a), 3, dim=1), np.linalg.norm(a, 3, axis=1))
    close(nbx.linalg.norm(to_nbx(a[0]), 1), np.linalg.norm(a[0], 1))
    close(nbx.norm(to_nbx(a), "nuc"), np.linalg.norm(a, "nuc"))
    close(to_nbx(a[None]).norm("nuc", dim=(1, 2)), np.linalg.norm(a[None], "nuc", axis=(1, 2)))
    with pytest.raises(RuntimeError, match="input must be 1D or 2D"):
        nbx.linalg.norm(to_nbx(a[None]), 2)
    with pytest.raises(RuntimeError, match="must be of length 1 or 2"):
        nbx.linalg.norm(to_nbx(a[None]), dim=(0, 1, 2))
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        nbx.linalg.norm(to_nbx(a[0]), "fro")
    # an empty matrix's norms are 0
    for order in (2, -2, "nuc"):
        assert nbx.linalg.matrix_norm(to_nbx(np.zeros((0, 3))), order).item() == 0
    with pytest.raises(RuntimeError, match="Order 3 not supported"):
        nbx.linalg.matrix_norm(to_nbx(a), 3)
    with pytest.raises(RuntimeError, match="dims must be different"):
        nbx.linalg.matrix_norm(to_nbx(a), dim=(1, -1))
    with pytest.raises(RuntimeError, match="Got Long"):
        nbx.linalg.matrix_norm(to_nbx(np.ones((2, 2), np.int64)))


def test_cond(r):
    a = r.standard_normal((2, 4, 4))
    close(nbx.linalg.cond(to_nbx(a)), np.linalg.cond(a), dict(rtol=1e-10, atol=0))
    close(nbx.linalg.cond(to_nbx(a), -2), np.linalg.cond(a, -2), dict(rtol=1e-10, atol=0))
    assert nbx.linalg.cond(to_nbx(np.diag([1.0, 0.0]))).item() == math.inf
    assert nbx.linalg.cond(to_nbx(np.zeros((0, 0)))).item() == 0
    for order in ("fro", "nuc", math.inf, -math.inf, 1, -1):
        close(nbx.linalg.cond(to_nbx(a), order), np.linalg.cond(a, order), dict(rtol=1e-10, atol=0))
    # singular: infinite in every order
    assert nbx.linalg.cond(to_nbx(np.diag([1.0, 0.0])), "fro").item() == math.inf
    with pytest.raises(RuntimeError, match="invalid norm type"):
        nbx.linalg.cond(to_nbx(a), 3)
    with pytest.raises(RuntimeError, match="square matrices"):
        nbx.linalg.cond(to_nbx(np.ones((2, 3))), 1)


# ---- the kernels compile, not only interpret ----------------------------------------------------------------

@cpu_kernels
def test_linalg_kernels_compile_for_hopper(tmp_path):
    # while loops with runtime bounds, loop-carried scalars and a NaN made at run time: what the
    # interpreter accepts and the GPU compiler might not
    records = _record(tmp_path, """
        import numpy as np
        import nbxtensor as nbx
        a = nbx.tensor(np.arange(12.0, dtype=np.float32).reshape(4, 3))
        compact, tau = nbx.geqrf(a)
        nbx.linalg.qr(a)
        nbx.ormqr(compact, tau, nbx.ones((3, 4)), left=False, transpose=True)
        nbx.linalg.svd(a)
        nbx.linalg.svdvals(a)
        nbx.linalg.eigh(nbx.eye(3))
        nbx.linalg.eigvalsh(nbx.eye(3, dtype=nbx.float64))
        nbx.linalg.pinv(a)
    """)
    kernels = {json.loads(line)["kernel"] for line in records.read_text().splitlines()}
    assert {"geqrf", "apply_householder", "svd", "eigh"} <= kernels
    result = _check(records, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
