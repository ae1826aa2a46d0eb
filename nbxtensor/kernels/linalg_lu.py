"""Dense factorisations of small matrices: LU with partial pivoting, Cholesky, and the triangular solves
built on them. One program takes one matrix, held whole as a [BLOCK, BLOCK] tile in COMPUTE precision
(float64 for float32 and float64 inputs), and steps through its columns in a loop; a column or row of the
tile is taken out by a masked sum. Every matrix is addressed through (batch, row, column) strides, so a
transposed operand or result is the same kernel with its strides swapped."""
import triton
import triton.language as tl


@triton.jit
def _column(tile, cols, j):
    return tl.sum(tl.where(cols[None, :] == j, tile, 0.0), 1)


@triton.jit
def _row(tile, rows, j):
    return tl.sum(tl.where(rows[:, None] == j, tile, 0.0), 0)


@triton.jit
def _load_tile(src, batch, row_stride, col_stride, m, n, rows, cols, COMPUTE: tl.constexpr):
    inside = (rows[:, None] < m) & (cols[None, :] < n)
    tile = tl.load(src + batch + rows[:, None] * row_stride + cols[None, :] * col_stride, mask=inside, other=0)
    return tile.to(COMPUTE)


@triton.jit
def lu_factor(src, s_batch, s_row, s_col, lu, l_batch, l_row, l_col, pivots, info, det, sign, logabs, m, n, steps,
              PIVOT: tl.constexpr, COMPUTE: tl.constexpr, BLOCK: tl.constexpr):
    """P A = L U of an m x n matrix (LAPACK's getrf) in steps = min(m, n): at step k the row holding the
    largest |value| of column k at or below the diagonal (the first of equal ones) swaps with row k;
    without PIVOT, none does. Writes LU (L's unit diagonal implied), the 1-based pivots, info (the 1-based
    index of the first zero pivot, else 0), the determinant, and its sign and log |.| (sign 0 where a pivot
    is zero)."""
    program = tl.program_id(0).to(tl.int64)
    rows = tl.arange(0, BLOCK)
    cols = tl.arange(0, BLOCK)
    a = _load_tile(src, program * s_batch, s_row, s_col, m, n, rows, cols, COMPUTE)
    chosen = tl.zeros([BLOCK], tl.int32)
    first_zero = tl.zeros([], tl.int32)
    flips = tl.zeros([], tl.int32)
    log_total = tl.zeros([], COMPUTE)
    product = tl.zeros([], COMPUTE) + 1.0
    k = 0
    while k < steps:  # a while loop: the interpreter cannot take a runtime bound in range()
        magnitude = tl.abs(_column(a, cols, k))
        # as LAPACK's idamax: NaN below the diagonal is passed over, NaN on it is kept as the pivot
        candidates = tl.where((rows >= k) & (rows < m) & (magnitude == magnitude), magnitude, -1.0)
        largest = tl.max(candidates, 0)
        p = tl.min(tl.where(rows >= k, tl.where(candidates == largest, rows, BLOCK), BLOCK), 0)
        on_diagonal = tl.sum(tl.where(rows == k, magnitude, 0.0), 0)
        p = tl.where(on_diagonal != on_diagonal, k, p)
        if not PIVOT:
            p = tl.zeros([], tl.int32) + k
        row_k = _row(a, rows, k)
        row_p = _row(a, rows, p)
        a = tl.where(rows[:, None] == k, row_p[None, :], tl.where(rows[:, None] == p, row_k[None, :], a))
        column = _column(a, cols, k)
        pivot = tl.sum(tl.where(rows == k, column, 0.0), 0)
        nonzero = pivot != 0
        multipliers = tl.where(rows > k, tl.where(nonzero, column / tl.where(nonzero, pivot, 1.0), 0.0), 0.0)
        trailing = tl.where(cols > k, row_p, 0.0)
        a = a - multipliers[:, None] * trailing[None, :]
        a = tl.where((cols[None, :] == k) & (rows[:, None] > k), multipliers[:, None], a)
        chosen = tl.where(rows == k, p + 1, chosen)
        first_zero = tl.where((first_zero == 0) & (pivot == 0), k + 1, first_zero)
        flips += (p != k).to(tl.int32) + (pivot < 0).to(tl.int32)
        log_total += tl.log(tl.abs(pivot))
        product = tl.where(p != k, -product, product) * pivot
        k += 1
    inside = (rows[:, None] < m) & (cols[None, :] < n)
    tl.store(lu + program * l_batch + rows[:, None] * l_row + cols[None, :] * l_col, a.to(lu.dtype.element_ty),
             mask=inside)
    tl.store(pivots + program * steps + rows, chosen, mask=rows < steps)
    tl.store(info + program, first_zero)
    determinant_sign = tl.where(first_zero != 0, 0.0, tl.where(flips % 2 == 1, -1.0, 1.0))
    tl.store(det + program, product.to(det.dtype.element_ty))
    tl.store(sign + program, determinant_sign.to(sign.dtype.element_ty))
    tl.store(logabs + program, log_total.to(logabs.dtype.element_ty))


@triton.jit
def pivot_permutation(pivots, perm, m, steps, BLOCK: tl.constexpr):
    """The row order LAPACK's pivots (row k swapped with row pivots[k] - 1, in turn) make of 0..m-1:
    row i of P^T A is row perm[i] of A."""
    program = tl.program_id(0).to(tl.int64)
    rows = tl.arange(0, BLOCK)
    order = rows
    k = 0
    while k < steps:
        p = tl.load(pivots + program * steps + k) - 1
        at_k = tl.sum(tl.where(rows == k, order, 0), 0)
        at_p = tl.sum(tl.where(rows == p, order, 0), 0)
        order = tl.where(rows == k, at_p, tl.where(rows == p, at_k, order))
        k += 1
    tl.store(perm + program * m + rows, order, mask=rows < m)


@triton.jit
def cholesky(src, s_batch, s_row, s_col, dst, d_batch, d_row, d_col, info, n,
             COMPUTE: tl.constexpr, BLOCK: tl.constexpr):
    """A = L L^T from A's lower triangle (LAPACK's potrf): zeros above the diagonal; info is the order of
    the first leading minor that is not positive-definite (the factorisation stops there), else 0."""
    program = tl.program_id(0).to(tl.int64)
    rows = tl.arange(0, BLOCK)
    cols = tl.arange(0, BLOCK)
    lower = cols[None, :] <= rows[:, None]
    a = tl.where(lower, _load_tile(src, program * s_batch, s_row, s_col, n, n, rows, cols, COMPUTE), 0.0)
    failed = tl.zeros([], tl.int32)
    j = 0
    while j < n:
        column = _column(a, cols, j)
        pivot = tl.sum(tl.where(rows == j, column, 0.0), 0)
        going = (failed == 0) & (pivot > 0)  # a NaN pivot fails too
        failed = tl.where((failed == 0) & ~(pivot > 0), j + 1, failed)
        scaled = tl.where(rows >= j, column / tl.sqrt(tl.where(going, pivot, 1.0)), 0.0)
        updated = tl.where(cols[None, :] == j, scaled[:, None],
                           tl.where(lower & (cols[None, :] > j), a - scaled[:, None] * scaled[None, :], a))
        a = tl.where(going, updated, a)
        j += 1
    inside = (rows[:, None] < n) & (cols[None, :] < n)
    tl.store(dst + program * d_batch + rows[:, None] * d_row + cols[None, :] * d_col, a.to(dst.dtype.element_ty),
             mask=inside)
    tl.store(info + program, failed)


@triton.jit
def _substitute(tile, solution, rows, cols, j, UNIT: tl.constexpr, BELOW: tl.constexpr):
    """Fix row j of the solution and remove it from the rows after it (BELOW) or before it."""
    column = _column(tile, cols, j)
    value = _row(solution, rows, j)
    if not UNIT:
        value = value / tl.sum(tl.where(rows == j, column, 0.0), 0)
    if BELOW:
        rest = rows > j
    else:
        rest = rows < j
    return tl.where(rows[:, None] == j, value[None, :],
                    tl.where(rest[:, None], solution - column[:, None] * value[None, :], solution))


@triton.jit
def triangular_solve(a, a_batch, a_row, a_col, b, b_batch, b_row, b_col, x, x_batch, x_row, x_col, perm, n, k,
                     LOWER: tl.constexpr, UPPER: tl.constexpr, GATHER: tl.constexpr, SCATTER: tl.constexpr,
                     COMPUTE: tl.constexpr, BLOCK: tl.constexpr, BLOCK_K: tl.constexpr):
    """X from A X = B for the n x n tile of A and columns [chunk * BLOCK_K, ...) of the n x k B: forward
    substitution with A's lower triangle (LOWER: 1, or 2 with a unit diagonal), then back substitution with
    its upper triangle (UPPER likewise); 0 skips a pass. GATHER reads row i of B from row perm[i]; SCATTER
    writes row i of X to row perm[i]."""
    program = tl.program_id(0).to(tl.int64)
    rows = tl.arange(0, BLOCK)
    cols = tl.arange(0, BLOCK)
    rhs = tl.program_id(1) * BLOCK_K + tl.arange(0, BLOCK_K)
    tile = _load_tile(a, program * a_batch, a_row, a_col, n, n, rows, cols, COMPUTE)
    source_rows = rows
    if GATHER:
        source_rows = tl.load(perm + program * n + rows, mask=rows < n, other=0)
    inside = (rows[:, None] < n) & (rhs[None, :] < k)
    solution = tl.load(b + program * b_batch + source_rows[:, None] * b_row + rhs[None, :] * b_col, mask=inside,
                       other=0).to(COMPUTE)
    if LOWER != 0:
        j = 0
        while j < n:
            solution = _substitute(tile, solution, rows, cols, j, LOWER == 2, True)
            j += 1
    if UPPER != 0:
        j = n - 1
        while j >= 0:
            solution = _substitute(tile, solution, rows, cols, j, UPPER == 2, False)
            j -= 1
    target_rows = rows
    if SCATTER:
        target_rows = tl.load(perm + program * n + rows, mask=rows < n, other=0)
    tl.store(x + program * x_batch + target_rows[:, None] * x_row + rhs[None, :] * x_col,
             solution.to(x.dtype.element_ty), mask=inside)


@triton.jit
def matrix_product(a, a_batch, a_row, a_col, b, b_batch, b_row, b_col, c, c_batch, c_row, c_col, m, inner, n,
                   COMPUTE: tl.constexpr, BLOCK: tl.constexpr):
    """C = A B for an m x inner A and an inner x n B: a sum of the outer products of A's columns and B's rows,
    in COMPUTE precision."""
    program = tl.program_id(0).to(tl.int64)
    rows = tl.arange(0, BLOCK)
    cols = tl.arange(0, BLOCK)
    left = _load_tile(a, program * a_batch, a_row, a_col, m, inner, rows, cols, COMPUTE)
    right = _load_tile(b, program * b_batch, b_row, b_col, inner, n, rows, cols, COMPUTE)
    total = tl.zeros([BLOCK, BLOCK], COMPUTE)
    j = 0
    while j < inner:
        total += _column(left, cols, j)[:, None] * _row(right, rows, j)[None, :]
        j += 1
    tl.store(c + program * c_batch + rows[:, None] * c_row + cols[None, :] * c_col, total.to(c.dtype.element_ty),
             mask=(rows[:, None] < m) & (cols[None, :] < n))
