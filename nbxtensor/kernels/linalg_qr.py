"""Small dense factorisations, one program per matrix of a batch, the matrix held as one [BLOCK, BLOCK]
tile in float64 whatever the input's float type (stores round once to the output's).

Householder QR keeps LAPACK's compact form: column j of the factored tile holds R above and on the
diagonal and, below it, reflector j's vector v (its first element an implicit 1); H_j = I - tau_j v v^T,
and beta (R's diagonal) is -sign(alpha) * ||x||, so R's signs are LAPACK's. The symmetric eigensolver
is cyclic two-sided Jacobi; the SVD is one-sided (Hestenes) Jacobi on the columns, followed by a
Householder QR of the rotated (now orthogonal) columns, which gives U complete to a square orthonormal
matrix whatever the rank. Jacobi sweeps are bounded by ``MAX_SWEEPS``; a matrix holding NaN or inf
gives NaN throughout.
"""
import triton
import triton.language as tl

# Past this many sweeps a Jacobi iteration stops (float64 converges in well under half of them); a
# NaN's comparisons fail, which stops it at once.
MAX_SWEEPS = tl.constexpr(40)
# Rotations stop once the off-diagonal part is this small relative to the whole (float64's epsilon).
_TOLERANCE = tl.constexpr(2.220446049250313e-16)
# Past this |theta| its square overflows: tan of the rotation angle is then 1 / (2 theta).
_THETA_LARGE = tl.constexpr(1e150)
_INF = tl.constexpr(float("inf"))


@triton.jit
def _batch_index(INDEX_64: tl.constexpr):
    """This program's matrix, wide enough for the offsets it reaches."""
    if INDEX_64:
        return tl.program_id(0).to(tl.int64)
    return tl.program_id(0)


@triton.jit
def _load_tile(ptr, stride_r, stride_c, n_rows, n_cols, rows, cols):
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    return tl.load(ptr + rows[:, None] * stride_r + cols[None, :] * stride_c, mask=mask, other=0.0).to(tl.float64)


@triton.jit
def _store_tile(ptr, stride_r, stride_c, n_rows, n_cols, rows, cols, tile):
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    tl.store(ptr + rows[:, None] * stride_r + cols[None, :] * stride_c, tile, mask=mask)


@triton.jit
def _column(tile, j, cols):
    """Column j of ``tile``, as a vector along its rows."""
    return tl.sum(tl.where(cols[None, :] == j, tile, 0.0), axis=1)


@triton.jit
def _row(tile, i, rows):
    """Row i of ``tile``, as a vector along its columns."""
    return tl.sum(tl.where(rows[:, None] == i, tile, 0.0), axis=0)


@triton.jit
def _pick(vector, i, index):
    return tl.sum(tl.where(index == i, vector, 0.0), axis=0)


@triton.jit
def _eye(rows, cols, n_cols):
    return tl.where((rows[:, None] == cols[None, :]) & (cols[None, :] < n_cols), 1.0, 0.0).to(tl.float64)


@triton.jit
def _nan_like(x):
    """NaN in x's shape, made at run time: a NaN global never equals itself, which Triton would take for a
    changed global."""
    infinite = tl.full(x.shape, _INF, tl.float64)
    return infinite - infinite


@triton.jit
def _all_finite(tile):
    return tl.sum(tl.sum(tl.where(tile - tile == 0.0, 0, 1), axis=1), axis=0) == 0


@triton.jit
def _householder_qr(a, rows, cols, m, k):
    """(the compact factorisation of the m-row matrix in ``a``, k = min(m, n), tau along the columns)."""
    tau = tl.zeros([a.shape[1]], dtype=tl.float64)
    # while loops throughout: the interpreter takes no runtime bound in range()
    j = 0
    while j < k:
        x = _column(a, j, cols)
        alpha = _pick(x, j, rows)
        below = (rows > j) & (rows < m)
        x_norm = tl.sqrt(tl.sum(tl.where(below, x * x, 0.0), axis=0))
        reflect = x_norm != 0.0
        # beta = -sign(alpha) * ||(alpha, x)||, the sign of +0 taken as positive; tau 0 (H = I) when x is 0
        length = tl.sqrt(alpha * alpha + x_norm * x_norm)
        beta = tl.where(reflect, tl.where(alpha >= 0.0, -length, length), alpha)
        safe_beta = tl.where(reflect, beta, 1.0)
        tau_j = tl.where(reflect, (beta - alpha) / safe_beta, 0.0)
        scale = tl.where(reflect, 1.0 / (alpha - safe_beta), 0.0)
        v = tl.where(below, x * scale, tl.where(rows == j, 1.0, 0.0))
        w = tl.sum(v[:, None] * a, axis=0)
        a = tl.where(cols[None, :] > j, a - tau_j * v[:, None] * w[None, :], a)
        a = tl.where(cols[None, :] == j, tl.where(rows[:, None] == j, beta, tl.where(below[:, None], v[:, None],
                                                                                    a)), a)
        tau = tl.where(cols == j, tau_j, tau)
        j += 1
    return a, tau


@triton.jit
def _apply_left(c, reflectors, tau, k, rows, cols, DESCENDING: tl.constexpr):
    """The first k reflectors applied to c from the left, H_k first (Q c) when ``DESCENDING``, else H_1
    first (Q^T c); their vectors below the diagonal of ``reflectors``' columns, tau along its columns."""
    step = 0
    while step < k:
        i = step
        if DESCENDING:
            i = k - 1 - step
        v = tl.where(rows > i, _column(reflectors, i, cols), tl.where(rows == i, 1.0, 0.0))
        tau_i = _pick(tau, i, cols)
        w = tl.sum(v[:, None] * c, axis=0)
        c = c - tau_i * v[:, None] * w[None, :]
        step += 1
    return c


@triton.jit
def _apply_right(c, reflectors_t, tau, k, rows, cols, DESCENDING: tl.constexpr):
    """The first k reflectors applied to c from the right, H_k first (c Q^T) when ``DESCENDING``, else H_1
    first (c Q); their vectors right of the diagonal of ``reflectors_t``'s rows (the reflectors
    transposed), tau along its columns."""
    step = 0
    while step < k:
        i = step
        if DESCENDING:
            i = k - 1 - step
        v = tl.where(cols > i, _row(reflectors_t, i, rows), tl.where(cols == i, 1.0, 0.0))
        tau_i = _pick(tau, i, cols)
        w = tl.sum(c * v[None, :], axis=1)
        c = c - tau_i * w[:, None] * v[None, :]
        step += 1
    return c


@triton.jit
def geqrf(a_ptr, a_batch, a_r, a_c, m, n, k, out_ptr, tau_ptr, INDEX_64: tl.constexpr, BLOCK: tl.constexpr):
    """Householder QR of each m x n matrix (k = min(m, n)), in LAPACK's compact form (contiguous out,
    tau)."""
    batch = _batch_index(INDEX_64)
    rows = tl.arange(0, BLOCK)
    cols = tl.arange(0, BLOCK)
    a = _load_tile(a_ptr + batch * a_batch, a_r, a_c, m, n, rows, cols)
    a, tau = _householder_qr(a, rows, cols, m, k)
    _store_tile(out_ptr + batch * m * n, n, 1, m, n, rows, cols, a)
    tl.store(tau_ptr + batch * k + cols, tau, mask=cols < k)


@triton.jit
def apply_householder(v_ptr, v_batch, v_r, v_c, v_rows, v_cols, tau_ptr, tau_batch, k,
                      c_ptr, c_batch, c_r, c_c, out_ptr, out_rows, out_cols,
                      LEFT: tl.constexpr, DESCENDING: tl.constexpr, IDENTITY: tl.constexpr, INDEX_64: tl.constexpr,
                      BLOCK: tl.constexpr):
    """out = (the first k reflectors applied to c from the left (``LEFT``) or right, in ``DESCENDING``
    order or not: see ``_apply_left``, ``_apply_right``); c is the identity's first out_cols columns when
    ``IDENTITY``. For a right product, the strides given for the reflectors are those of their transpose."""
    batch = _batch_index(INDEX_64)
    rows = tl.arange(0, BLOCK)
    cols = tl.arange(0, BLOCK)
    reflectors = _load_tile(v_ptr + batch * v_batch, v_r, v_c, v_rows, v_cols, rows, cols)
    tau = tl.load(tau_ptr + batch * tau_batch + cols, mask=cols < k, other=0.0).to(tl.float64)
    if IDENTITY:
        c = _eye(rows, cols, out_cols)
    else:
        c = _load_tile(c_ptr + batch * c_batch, c_r, c_c, out_rows, out_cols, rows, cols)
    if LEFT:
        c = _apply_left(c, reflectors, tau, k, rows, cols, DESCENDING)
    else:
        c = _apply_right(c, reflectors, tau, k, rows, cols, DESCENDING)
    _store_tile(out_ptr + batch * out_rows * out_cols, out_cols, 1, out_rows, out_cols, rows, cols, c)


@triton.jit
def _rotate_columns(tile, p, q, c, s, cols):
    """tile's columns p, q as (c col_p - s col_q, s col_p + c col_q)."""
    col_p = _column(tile, p, cols)
    col_q = _column(tile, q, cols)
    tile = tl.where(cols[None, :] == p, (c * col_p - s * col_q)[:, None], tile)
    return tl.where(cols[None, :] == q, (s * col_p + c * col_q)[:, None], tile)


@triton.jit
def _rotate_rows(tile, p, q, c, s, rows):
    row_p = _row(tile, p, rows)
    row_q = _row(tile, q, rows)
    tile = tl.where(rows[:, None] == p, (c * row_p - s * row_q)[None, :], tile)
    return tl.where(rows[:, None] == q, (s * row_p + c * row_q)[None, :], tile)


@triton.jit
def _jacobi_tangent(off, diagonal_gap):
    """tan of the rotation zeroing ``off`` between two entries ``diagonal_gap`` apart (the smaller angle);
    0 where ``off`` is 0."""
    zero = off == 0.0
    theta = diagonal_gap / (2.0 * tl.where(zero, 1.0, off))
    magnitude = tl.abs(theta)
    t = tl.where(magnitude > _THETA_LARGE, 0.5 / tl.where(magnitude > _THETA_LARGE, theta, 1.0),
                 tl.where(theta >= 0.0, 1.0, -1.0) / (magnitude + tl.sqrt(1.0 + theta * theta)))
    return tl.where(zero, 0.0, t)


@triton.jit
def _off_diagonal(a, rows, cols):
    """(sum of squares off the diagonal, sum of squares of all)."""
    squares = a * a
    whole = tl.sum(tl.sum(squares, axis=1), axis=0)
    off = tl.sum(tl.sum(tl.where(rows[:, None] == cols[None, :], 0.0, squares), axis=1), axis=0)
    return off, whole


@triton.jit
def eigh(a_ptr, a_batch, a_r, a_c, n, w_ptr, v_ptr, LOWER: tl.constexpr, VECTORS: tl.constexpr,
         INDEX_64: tl.constexpr, BLOCK: tl.constexpr):
    """Eigenvalues (ascending, contiguous w) and eigenvectors (columns of contiguous v) of each n x n
    symmetric matrix, read from its lower (``LOWER``) or upper triangle."""
    batch = _batch_index(INDEX_64)
    rows = tl.arange(0, BLOCK)
    cols = tl.arange(0, BLOCK)
    base = a_ptr + batch * a_batch
    a = _load_tile(base, a_r, a_c, n, n, rows, cols)
    mirrored = _load_tile(base, a_c, a_r, n, n, rows, cols)
    if LOWER:
        a = tl.where(rows[:, None] >= cols[None, :], a, mirrored)
    else:
        a = tl.where(rows[:, None] <= cols[None, :], a, mirrored)
    finite = _all_finite(a)
    vectors = _eye(rows, cols, n)
    off, whole = _off_diagonal(a, rows, cols)
    sweep = 0
    while (sweep < MAX_SWEEPS) & (off > _TOLERANCE * _TOLERANCE * whole):
        p = 0
        while p < n - 1:
            q = p + 1
            while q < n:
                row_p = _row(a, p, rows)
                row_q = _row(a, q, rows)
                a_pq = _pick(row_p, q, cols)
                t = _jacobi_tangent(a_pq, _pick(row_q, q, cols) - _pick(row_p, p, cols))
                c = 1.0 / tl.sqrt(1.0 + t * t)
                s = t * c
                a = _rotate_rows(_rotate_columns(a, p, q, c, s, cols), p, q, c, s, rows)
                if VECTORS:
                    vectors = _rotate_columns(vectors, p, q, c, s, cols)
                q += 1
            p += 1
        off, whole = _off_diagonal(a, rows, cols)
        sweep += 1
    on_diagonal = rows[:, None] == cols[None, :]
    values_by_row = tl.sum(tl.where(on_diagonal, a, 0.0), axis=1)
    values = tl.sum(tl.where(on_diagonal, a, 0.0), axis=0)
    # the rank of each value among the n (ties in index order) is where it and its vector go
    before = (values_by_row[:, None] < values[None, :]) | (
        (values_by_row[:, None] == values[None, :]) & (rows[:, None] < cols[None, :]))
    rank = tl.sum(tl.where(before & (rows[:, None] < n), 1, 0), axis=0)
    rank = tl.where(finite, rank, cols)
    values = tl.where(finite, values, _nan_like(values))
    tl.store(w_ptr + batch * n + rank, values, mask=cols < n)
    if VECTORS:
        vectors = tl.where(finite, vectors, _nan_like(vectors))
        tl.store(v_ptr + batch * n * n + rows[:, None] * n + rank[None, :], vectors,
                 mask=(rows[:, None] < n) & (cols[None, :] < n))


@triton.jit
def svd(a_ptr, a_batch, a_r, a_c, m, n, s_ptr, u_ptr, u_r, u_c, u_cols, v_ptr, v_r, v_c,
        VECTORS: tl.constexpr, INDEX_64: tl.constexpr, BLOCK: tl.constexpr):
    """Singular values (descending, contiguous s) of each m x n matrix, m >= n; with ``VECTORS``, U's
    first u_cols columns (at u_ptr, batch stride m * u_cols) and V (n x n at v_ptr, batch stride n * n):
    A = U diag(s) V^T."""
    batch = _batch_index(INDEX_64)
    rows = tl.arange(0, BLOCK)
    cols = tl.arange(0, BLOCK)
    a = _load_tile(a_ptr + batch * a_batch, a_r, a_c, m, n, rows, cols)
    finite = _all_finite(a)
    vectors = _eye(rows, cols, n)
    rotated = 1
    sweep = 0
    while (sweep < MAX_SWEEPS) & (rotated > 0):
        rotated = 0
        p = 0
        while p < n - 1:
            q = p + 1
            while q < n:
                col_p = _column(a, p, cols)
                col_q = _column(a, q, cols)
                alpha = tl.sum(col_p * col_p, axis=0)
                beta = tl.sum(col_q * col_q, axis=0)
                gamma = tl.sum(col_p * col_q, axis=0)
                # columns orthogonal to working precision are left alone, which ends the iteration
                rotate = tl.abs(gamma) > _TOLERANCE * tl.sqrt(alpha * beta)
                t = _jacobi_tangent(tl.where(rotate, gamma, 0.0), beta - alpha)
                c = 1.0 / tl.sqrt(1.0 + t * t)
                s = t * c
                a = _rotate_columns(a, p, q, c, s, cols)
                if VECTORS:
                    vectors = _rotate_columns(vectors, p, q, c, s, cols)
                rotated += tl.where(rotate, 1, 0)
                q += 1
            p += 1
        sweep += 1
    norms = tl.sqrt(tl.sum(a * a, axis=0))
    # the same norms along the rows, picked (exact) rather than summed again: a GPU sums a transposed tile
    # in another order, and a norm that exceeds its own copy by an ulp counts itself when ranked
    norms_by_row = tl.sum(tl.where(rows[:, None] == cols[None, :], norms[None, :], 0.0), axis=1)
    before = (norms_by_row[:, None] > norms[None, :]) | (
        (norms_by_row[:, None] == norms[None, :]) & (rows[:, None] < cols[None, :]))
    rank = tl.sum(tl.where(before & (rows[:, None] < n), 1, 0), axis=0)
    rank = tl.where(finite, rank, cols)
    tl.store(s_ptr + batch * n + rank, tl.where(finite, norms, _nan_like(norms)), mask=cols < n)
    if VECTORS:
        ordered = tl.zeros([BLOCK, BLOCK], dtype=tl.float64)
        ordered_vectors = tl.zeros([BLOCK, BLOCK], dtype=tl.float64)
        j = 0
        while j < n:
            destination = tl.sum(tl.where(cols == j, rank, 0), axis=0)
            ordered = tl.where(cols[None, :] == destination, _column(a, j, cols)[:, None], ordered)
            ordered_vectors = tl.where(cols[None, :] == destination, _column(vectors, j, cols)[:, None],
                                       ordered_vectors)
            j += 1
        # the ordered columns are orthogonal: their QR has R diagonal (up to rounding), R_jj = +-s_j
        factored, tau = _householder_qr(ordered, rows, cols, m, n)
        u = _apply_left(_eye(rows, cols, u_cols), factored, tau, n, rows, cols, DESCENDING=True)
        signs = tl.sum(tl.where(rows[:, None] == cols[None, :], factored, 0.0), axis=0)
        u = tl.where((cols[None, :] < n) & (signs[None, :] < 0.0), -u, u)
        u = tl.where(finite, u, _nan_like(u))
        ordered_vectors = tl.where(finite, ordered_vectors, _nan_like(ordered_vectors))
        _store_tile(u_ptr + batch * m * u_cols, u_r, u_c, m, u_cols, rows, cols, u)
        _store_tile(v_ptr + batch * n * n, v_r, v_c, n, n, rows, cols, ordered_vectors)
