"""nbx.linalg's LU and Cholesky family and the composites on them, against NumPy float64 references (a
partial-pivoting LU written here, np.linalg otherwise): batches, broadcasting, 0-size matrices, singular
ones and the errors. The kernels compute in float64 and round once, so a float32 result is within a few
float32 ulps of the float64 answer for the well-conditioned matrices used (diagonally weighted, condition
numbers below 10); float64 results are within a few float64 ulps times the condition number."""
import math

import numpy as np
import pytest

import nbxtensor as nbx

from .conftest import cpu_kernels

pytestmark = cpu_kernels
LA = nbx.linalg
F32 = dict(rtol=4e-6, atol=1e-6)  # a handful of float32 ulps: one rounding of a float64 result, cond < 10
F64 = dict(rtol=1e-12, atol=1e-13)


def well_conditioned(rng, *shape, dtype=np.float32):
    n = shape[-1]
    return (rng.uniform(-1, 1, shape) + 2 * n * np.eye(n) * rng.choice([-1, 1], shape[:-1])[..., None]).astype(dtype)


def reference_lu(a):
    """LAPACK's getrf in float64: at step k the first row holding the largest |value| of column k."""
    lu = a.astype(np.float64).copy()
    m, n = lu.shape
    pivots = []
    for k in range(min(m, n)):
        p = k + int(np.argmax(np.abs(lu[k:, k])))
        pivots.append(p + 1)
        lu[[k, p]] = lu[[p, k]]
        if lu[k, k] != 0:
            lu[k + 1:, k] /= lu[k, k]
            lu[k + 1:, k + 1:] -= np.outer(lu[k + 1:, k], lu[k, k + 1:])
    return lu, np.array(pivots, np.int32)


@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 5), (5, 3), (2, 1, 3, 3)])
def test_lu_factor_matches_partial_pivoting(shape):
    a = np.random.default_rng(0).uniform(-3, 3, shape).astype(np.float32)
    LU, pivots, info = LA.lu_factor_ex(nbx.tensor(a))
    assert LU.dtype is nbx.float32 and pivots.dtype is nbx.int32 and info.dtype is nbx.int32
    flat = a.reshape(-1, *shape[-2:])
    for got_lu, got_piv, matrix in zip(LU.numpy().reshape(flat.shape), pivots.numpy().reshape(len(flat), -1), flat):
        want_lu, want_piv = reference_lu(matrix)
        np.testing.assert_array_equal(got_piv, want_piv)
        np.testing.assert_allclose(got_lu, want_lu, rtol=1e-5, atol=1e-6)  # entries up to 3: float32 rounding
    assert not info.numpy().any()


def test_lu_pivot_ties_take_the_first_row_and_a_zero_pivot_sets_info():
    LU, pivots, info = LA.lu_factor_ex(nbx.tensor([[1.0, 2.0], [-1.0, 3.0]]))
    assert pivots.tolist() == [1, 2] and info.item() == 0
    LU, pivots, info = LA.lu_factor_ex(nbx.tensor([[1.0, 2.0], [2.0, 4.0]]))
    assert pivots.tolist() == [2, 2] and info.item() == 2
    with pytest.raises(RuntimeError, match=r"U\[2,2\] is zero"):
        LA.lu_factor(nbx.tensor([[1.0, 2.0], [2.0, 4.0]]))
    LU, pivots, info = nbx.lu(nbx.tensor([[1.0, 2.0], [2.0, 4.0]]), get_infos=True)
    assert info.item() == 2
    # LAPACK's idamax keeps a NaN on the diagonal as the pivot and passes over one below it
    assert LA.lu_factor_ex(nbx.tensor([[math.nan, 1.0], [2.0, 3.0]])).pivots.tolist() == [1, 2]
    assert LA.lu_factor_ex(nbx.tensor([[1.0, 2.0], [math.nan, 3.0]])).pivots.tolist() == [1, 2]
    assert math.isnan(LA.det(nbx.tensor([[1.0, 2.0], [math.nan, 3.0]])).item())


def test_lu_and_lu_unpack_reconstruct():
    a = np.random.default_rng(1).uniform(-2, 2, (2, 4, 3)).astype(np.float32)
    P, L, U = LA.lu(nbx.tensor(a))
    assert (P.shape, L.shape, U.shape) == ((2, 4, 4), (2, 4, 3), (2, 3, 3))
    np.testing.assert_allclose(P.numpy() @ L.numpy() @ U.numpy(), a, rtol=1e-5, atol=1e-6)
    LU, pivots = LA.lu_factor(nbx.tensor(a))
    P2, L2, U2 = nbx.lu_unpack(LU, pivots)
    np.testing.assert_array_equal(P2.numpy(), P.numpy())
    np.testing.assert_array_equal(np.tril(L2.numpy(), -1), np.tril(L.numpy(), -1))
    empty_p, _, _ = nbx.lu_unpack(LU, pivots, unpack_pivots=False)
    assert empty_p.shape == (0,)
    with pytest.raises(RuntimeError, match="between 1 and LU.size"):
        nbx.lu_unpack(LU, nbx.tensor([[1, 9, 3], [1, 2, 3]], dtype=nbx.int32))


def test_det_slogdet_logdet():
    rng = np.random.default_rng(2)
    a = rng.uniform(-2, 2, (3, 4, 4))
    for dtype, tol in ((np.float32, F32), (np.float64, F64)):
        x = nbx.tensor(a.astype(dtype))
        want = np.linalg.det(a.astype(dtype).astype(np.float64))
        np.testing.assert_allclose(LA.det(x).numpy(), want, **tol)
        sign, logabs = LA.slogdet(x)
        np.testing.assert_array_equal(sign.numpy(), np.sign(want))
        np.testing.assert_allclose(logabs.numpy(), np.log(np.abs(want)), **tol)
        logdet = nbx.logdet(x).numpy()
        np.testing.assert_allclose(logdet[want > 0], np.log(want[want > 0]), **tol)
        assert np.isnan(logdet[want < 0]).all()
    singular = nbx.tensor([[1.0, 2.0], [2.0, 4.0]])
    assert LA.det(singular).item() == 0 and nbx.logdet(singular).item() == -math.inf
    assert LA.slogdet(singular).sign.item() == 0
    assert LA.det(nbx.zeros(0, 0)).item() == 1 and LA.det(nbx.zeros(2, 0, 0)).tolist() == [1, 1]


def test_inv_and_inv_ex():
    rng = np.random.default_rng(3)
    a = well_conditioned(rng, 2, 3, 5, 5)
    got = LA.inv(nbx.tensor(a))
    np.testing.assert_allclose(got.numpy(), np.linalg.inv(a.astype(np.float64)), **F32)
    np.testing.assert_allclose(nbx.tensor(a).inverse().numpy(), got.numpy())
    assert LA.inv(nbx.zeros(0, 4, 4)).shape == (0, 4, 4) and LA.inv(nbx.zeros(0, 0)).shape == (0, 0)
    singular = nbx.tensor([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 2.0], [2.0, 4.0]]])
    with pytest.raises(LA.LinAlgError, match=r"linalg.inv: \(Batch element 1\): The diagonal element 2 is zero"):
        LA.inv(singular)
    inverse, info = LA.inv_ex(singular)
    assert info.tolist() == [0, 2] and not np.isfinite(inverse.numpy()[1]).all()


def test_solve_broadcasts_and_takes_vectors():
    rng = np.random.default_rng(4)
    a = well_conditioned(rng, 2, 1, 4, 4)
    b = rng.uniform(-1, 1, (3, 4, 2)).astype(np.float32)
    want = np.linalg.solve(a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(LA.solve(nbx.tensor(a), nbx.tensor(b)).numpy(), want, **F32)
    vector = b[0, :, 0]
    got = LA.solve(nbx.tensor(a[0, 0]), nbx.tensor(vector))
    np.testing.assert_allclose(got.numpy(), np.linalg.solve(a[0, 0].astype(np.float64), vector), **F32)
    right = b.transpose(0, 2, 1)  # X A = B
    want_right = np.linalg.solve(a.astype(np.float64).swapaxes(-1, -2), right.astype(np.float64).swapaxes(-1, -2))
    got = LA.solve(nbx.tensor(a), nbx.tensor(right), left=False)
    np.testing.assert_allclose(got.numpy(), want_right.swapaxes(-1, -2), **F32)
    result, info = LA.solve_ex(nbx.tensor([[1.0, 2.0], [2.0, 4.0]]), nbx.tensor([1.0, 1.0]))
    assert info.item() == 2
    with pytest.raises(LA.LinAlgError, match="input matrix is singular"):
        LA.solve(nbx.tensor([[1.0, 2.0], [2.0, 4.0]]), nbx.tensor([1.0, 1.0]))
    with pytest.raises(RuntimeError, match="Incompatible shapes"):
        LA.solve(nbx.tensor(a), nbx.tensor(b[:, :3]))


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [True, False])
def test_lu_solve(left, adjoint):
    rng = np.random.default_rng(5)
    a = well_conditioned(rng, 2, 4, 4, dtype=np.float64)
    b = rng.uniform(-1, 1, (2, 4, 3) if left else (2, 3, 4))
    LU, pivots = LA.lu_factor(nbx.tensor(a))
    got = LA.lu_solve(LU, pivots, nbx.tensor(b), left=left, adjoint=adjoint).numpy()
    op_a = a.swapaxes(-1, -2) if adjoint else a
    if left:
        want = np.linalg.solve(op_a, b)
    else:  # X A = B is A^T X^T = B^T
        want = np.linalg.solve(op_a.swapaxes(-1, -2), b.swapaxes(-1, -2)).swapaxes(-1, -2)
    np.testing.assert_allclose(got, want, **F64)
    if left and not adjoint:
        np.testing.assert_allclose(nbx.lu_solve(nbx.tensor(b), LU, pivots).numpy(), want, **F64)


@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unit", [True, False])
def test_solve_triangular(upper, left, unit):
    rng = np.random.default_rng(6)
    a = well_conditioned(rng, 2, 4, 4, dtype=np.float64)
    b = rng.uniform(-1, 1, (2, 4, 3) if left else (2, 3, 4))
    triangle = np.triu(a) if upper else np.tril(a)
    if unit:
        triangle[..., range(4), range(4)] = 1
    want = np.linalg.solve(triangle, b) if left else np.linalg.solve(triangle.swapaxes(-1, -2),
                                                                     b.swapaxes(-1, -2)).swapaxes(-1, -2)
    # the other triangle (and, with unit, the diagonal) of a is not read
    got = LA.solve_triangular(nbx.tensor(a), nbx.tensor(b), upper=upper, left=left, unitriangular=unit)
    np.testing.assert_allclose(got.numpy(), want, **F64)


def test_triangular_solve_transposes_and_copies_the_coefficients():
    rng = np.random.default_rng(7)
    a = well_conditioned(rng, 3, 3, dtype=np.float64)
    b = rng.uniform(-1, 1, (2, 3, 2))
    solution, coefficients = nbx.triangular_solve(nbx.tensor(b), nbx.tensor(a), upper=False, transpose=True)
    np.testing.assert_allclose(solution.numpy(), np.linalg.solve(np.tril(a).T, b), **F64)
    assert coefficients.shape == (2, 3, 3)
    np.testing.assert_array_equal(coefficients.numpy()[1], a)
    with pytest.raises(RuntimeError, match="same dtype"):
        nbx.triangular_solve(nbx.tensor(b.astype(np.float32)), nbx.tensor(a))


def test_cholesky_family():
    rng = np.random.default_rng(8)
    m = rng.uniform(-1, 1, (2, 4, 4))
    spd = m @ m.swapaxes(-1, -2) + 4 * np.eye(4)
    lower = np.linalg.cholesky(spd)
    x = nbx.tensor(spd.astype(np.float32))
    np.testing.assert_allclose(LA.cholesky(x).numpy(), lower, **F32)
    np.testing.assert_allclose(LA.cholesky(x, upper=True).numpy(), lower.swapaxes(-1, -2), **F32)
    np.testing.assert_allclose(nbx.cholesky(x).numpy(), lower, **F32)
    b = rng.uniform(-1, 1, (2, 4, 3))
    factor = nbx.tensor(lower)
    np.testing.assert_allclose(nbx.cholesky_solve(nbx.tensor(b), factor).numpy(), np.linalg.solve(spd, b), **F64)
    np.testing.assert_allclose(nbx.cholesky_solve(nbx.tensor(b), factor.mT.contiguous(), upper=True).numpy(),
                               np.linalg.solve(spd, b), **F64)
    np.testing.assert_allclose(nbx.cholesky_inverse(factor).numpy(), np.linalg.inv(spd), **F64)
    not_definite = nbx.tensor([[[4.0, 0.0], [0.0, 1.0]], [[1.0, 2.0], [2.0, 1.0]]])
    L, info = LA.cholesky_ex(not_definite)
    assert info.tolist() == [0, 2]
    with pytest.raises(LA.LinAlgError, match=r"\(Batch element 1\).*leading minor of order 2 is not positive"):
        LA.cholesky(not_definite)
    assert LA.cholesky(nbx.zeros(0, 0)).shape == (0, 0)


def test_matrix_power_tensorinv_tensorsolve():
    rng = np.random.default_rng(9)
    a = well_conditioned(rng, 2, 3, 3, dtype=np.float64)
    for n in (0, 1, 2, 5, -3):
        np.testing.assert_allclose(LA.matrix_power(nbx.tensor(a), n).numpy(), np.linalg.matrix_power(a, n),
                                   rtol=1e-12, atol=1e-12)
    ints = np.array([[1, 2], [3, 4]])
    np.testing.assert_array_equal(nbx.tensor(ints).matrix_power(3).numpy(), np.linalg.matrix_power(ints, 3))
    t = well_conditioned(rng, 6, 6, dtype=np.float64).reshape(2, 3, 6)
    np.testing.assert_allclose(LA.tensorinv(nbx.tensor(t), ind=2).numpy(), np.linalg.tensorinv(t, ind=2), **F64)
    rhs = rng.uniform(-1, 1, (2, 3))
    np.testing.assert_allclose(LA.tensorsolve(nbx.tensor(t), nbx.tensor(rhs)).numpy(), np.linalg.tensorsolve(t, rhs),
                               **F64)
    with pytest.raises(RuntimeError, match="strictly positive"):
        LA.tensorinv(nbx.tensor(t), ind=0)


def test_multi_dot_vander_vecdot_diagonal():
    rng = np.random.default_rng(10)
    shapes = [(3,), (3, 5), (5, 2), (2, 4), (4,)]
    arrays = [rng.integers(-3, 4, s) for s in shapes]
    got = LA.multi_dot([nbx.tensor(x) for x in arrays])
    assert got.shape == () and got.item() == np.linalg.multi_dot(arrays)
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        LA.multi_dot([nbx.ones(2, 3), nbx.ones(2, 3)])
    x = np.array([2, -3, 5])
    np.testing.assert_array_equal(LA.vander(nbx.tensor(x), N=4).numpy(), np.vander(x, 4, increasing=True))
    with pytest.raises(RuntimeError, match="N must be greater than 1"):
        LA.vander(nbx.tensor(x), N=1)
    u, v = rng.uniform(-1, 1, (2, 3, 4)), rng.uniform(-1, 1, (4,))
    np.testing.assert_allclose(LA.vecdot(nbx.tensor(u), nbx.tensor(v)).numpy(), u @ v, **F64)
    with pytest.raises(RuntimeError, match="floating point"):
        LA.vecdot(nbx.tensor(x), nbx.tensor(x))
    m = rng.uniform(-1, 1, (2, 3, 4))
    np.testing.assert_array_equal(LA.diagonal(nbx.tensor(m), offset=1).numpy(), np.diagonal(m, 1, -2, -1))


def reference_expm(a):
    """exp(A) by its Taylor series after halving A until its norm is below 1/2, then squaring back."""
    halvings = max(0, int(np.ceil(np.log2(max(np.abs(a).sum(-2).max(), 1e-300) / 0.5))))
    x = a / 2.0 ** halvings
    term, total = np.eye(len(a)), np.eye(len(a))
    for k in range(1, 30):
        term = term @ x / k
        total = total + term
    for _ in range(halvings):
        total = total @ total
    return total


def test_matrix_exp():
    rng = np.random.default_rng(11)
    a = rng.uniform(-3, 3, (2, 4, 4))
    want = np.stack([reference_expm(m) for m in a])
    np.testing.assert_allclose(nbx.matrix_exp(nbx.tensor(a)).numpy(), want, rtol=1e-10)
    np.testing.assert_allclose(LA.matrix_exp(nbx.tensor(a.astype(np.float32))).numpy(), want, rtol=4e-6, atol=1e-5)
    assert nbx.matrix_exp(nbx.zeros(0, 3, 3)).shape == (0, 3, 3)
    with pytest.raises(RuntimeError, match="floating point"):
        nbx.matrix_exp(nbx.ones(2, 2, dtype=nbx.int64))


def test_matrix_norms():
    a = np.random.default_rng(12).uniform(-2, 2, (2, 3, 4)).astype(np.float32)
    x = nbx.tensor(a)
    for ord in ("fro", math.inf, -math.inf, 1, -1):
        want = np.stack([np.linalg.norm(m.astype(np.float64), ord) for m in a])
        np.testing.assert_allclose(LA.matrix_norm(x, ord).numpy(), want, **F32)
        assert LA.matrix_norm(x, ord, keepdim=True).shape == (2, 1, 1)
    np.testing.assert_allclose(LA.norm(x[0], 1).numpy(), np.linalg.norm(a[0].astype(np.float64), 1), **F32)
    np.testing.assert_allclose(LA.norm(x).numpy(), np.linalg.norm(a.astype(np.float64)), **F32)
    np.testing.assert_allclose(LA.norm(x, 3, dim=2).numpy(), np.linalg.norm(a.astype(np.float64), 3, axis=2), **F32)
    for ord in (2, -2, "nuc"):
        with pytest.raises(NotImplementedError, match="singular values"):
            LA.matrix_norm(x, ord)
    with pytest.raises(RuntimeError, match="Order 3 not supported"):
        LA.matrix_norm(x, 3)
    with pytest.raises(RuntimeError, match="must be 1D or 2D"):
        LA.norm(x, 1)


def test_refusals():
    with pytest.raises(RuntimeError, match="Expected a floating point or complex tensor as input. Got Long"):
        LA.inv(nbx.ones(2, 2, dtype=nbx.int64))
    with pytest.raises(RuntimeError, match="Low precision dtypes not supported. Got BFloat16"):
        LA.det(nbx.ones(2, 2, dtype=nbx.bfloat16))
    with pytest.raises(RuntimeError, match="must be batches of square matrices, but they are 2 by 3"):
        LA.inv(nbx.ones(2, 3))
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        LA.cholesky(nbx.ones(3))
    with pytest.raises(NotImplementedError, match="at most 64 rows and columns"):
        LA.solve(nbx.ones(65, 65), nbx.ones(65))
