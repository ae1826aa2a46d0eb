"""Matrix-product kernels: a tiled, batched, strided GEMM, a weight-streaming GEMV for decode rows, and
a GEMM on the FMA units in a 64-bit type (``gemm_wide``: int64 sums of elementwise products, exact, for the
integer dtypes the matrix unit does not take; float64 ones for float64).

The first two read their operands through arbitrary strides (a transposed weight is read in place), accumulate in
float32 (int32 for int8 inputs), and apply the ``alpha * (a @ b) + beta * bias`` epilogue of addmm and
its relatives before converting to the output type as ``kernels/copy.py`` converts. The GEMMs also take
float32 products on bfloat16 matrix units (``PRECISION_BF16_PARTS``, at the end of this file). With ``NORM``
the floating-point GEMMs' and GEMV's epilogue then applies an inference batch norm and an activation per
output row or column (``norm_epilogue.py``: a 1x1 convolution as a product, output channels its rows or
columns), still before the one rounding; its vectors ``norm_*`` and ``eps`` are None, so no parameter,
where NORM is off.
"""
import triton
import triton.language as tl

from .common import last_to_arrive, strided_offset
from .formats import decode, encode
from .dependent_launch import await_predecessors
from .norm_epilogue import activated, norm_parameters

# a batch norm in the epilogue: none, or one a row or a column of the output
NORM_OFF = tl.constexpr(0)
NORM_ROWS = tl.constexpr(1)
NORM_COLUMNS = tl.constexpr(2)


@triton.jit
def _batch_offsets(batch, shape, a_strides, b_strides, bias_strides, out_strides, RANK: tl.constexpr):
    """Element offsets of batch ``batch`` (a flat index over ``shape``) in the four operands."""
    return (strided_offset(batch, shape, a_strides, RANK), strided_offset(batch, shape, b_strides, RANK),
            strided_offset(batch, shape, bias_strides, RANK), strided_offset(batch, shape, out_strides, RANK))


@triton.jit
def _operand(x, DECODE_BF16: tl.constexpr):
    """Tiles as ``tl.dot`` takes them. Triton's interpreter has no bfloat16 arithmetic, so there bfloat16
    tiles are widened to float32 first; the products are exact either way (8-bit mantissas)."""
    if DECODE_BF16:
        return decode(x, 1)
    else:
        return x


@triton.jit
def _dot(a_tile, b_tile, acc, ACC: tl.constexpr, PRECISION: tl.constexpr, DECODE_BF16: tl.constexpr):
    """acc plus a_tile @ b_tile as PRECISION asks: one ``tl.dot``, or for ``PRECISION_BF16_PARTS`` the six
    products of the float32 tiles' bfloat16 parts."""
    if PRECISION == PRECISION_BF16_PARTS:
        return _parts_dot(a_tile, b_tile, acc, DECODE_BF16)
    else:
        return tl.dot(_operand(a_tile, DECODE_BF16), _operand(b_tile, DECODE_BF16), acc, input_precision=PRECISION,
                      out_dtype=ACC)


@triton.jit
def _epilogue(acc, bias_ptr, bias_off, bias_sm, bias_sn, rm, rn, mask, alpha, beta, out_ptr, out_off,
              out_sm, out_sn, HAS_BIAS: tl.constexpr, SCALED: tl.constexpr, BIAS_FORMAT: tl.constexpr,
              DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr, norm_mean=None, norm_var=None, norm_weight=None,
              norm_shift=None, eps=None, M=None, N=None, NORM: tl.constexpr = NORM_OFF,
              NORM_FORMAT: tl.constexpr = 0, ACTIVATION: tl.constexpr = 0):
    """``alpha * acc + beta * bias`` (as far as the flags ask), then with NORM the batch norm of output rows
    ``rm`` (of M) or columns ``rn`` (of N) and ACTIVATION, stored in the output's type."""
    if SCALED:
        acc = acc * alpha
    if HAS_BIAS:
        bias = tl.load(bias_ptr + bias_off + rm[:, None] * bias_sm + rn[None, :] * bias_sn, mask=mask, other=0)
        bias = decode(bias, BIAS_FORMAT).to(acc.dtype)
        if SCALED:
            bias = bias * beta
        acc = acc + bias
    if NORM == NORM_ROWS:
        n_mean, n_scale, n_shift = norm_parameters(rm, rm < M, norm_mean, norm_var, norm_weight, norm_shift, eps,
                                                   NORM_FORMAT)
        acc = activated((acc - n_mean[:, None]) * n_scale[:, None] + n_shift[:, None], ACTIVATION)
    elif NORM == NORM_COLUMNS:
        n_mean, n_scale, n_shift = norm_parameters(rn, rn < N, norm_mean, norm_var, norm_weight, norm_shift, eps,
                                                   NORM_FORMAT)
        acc = activated((acc - n_mean[None, :]) * n_scale[None, :] + n_shift[None, :], ACTIVATION)
    value = encode(acc, out_ptr.dtype.element_ty, DST_FORMAT, VIA_F32, False)
    tl.store(out_ptr + out_off + rm[:, None] * out_sm + rn[None, :] * out_sn, value, mask=mask)


@triton.jit
def _gemm_step(acc, a_ptrs, b_ptrs, left, rk, EVEN_K: tl.constexpr, ACC: tl.constexpr, PRECISION: tl.constexpr,
               DECODE_BF16: tl.constexpr):
    """acc plus the product of the next K tile (``left`` elements of K remain)."""
    if EVEN_K:
        a_tile = tl.load(a_ptrs)
        b_tile = tl.load(b_ptrs)
    else:
        a_tile = tl.load(a_ptrs, mask=rk[None, :] < left, other=0)
        b_tile = tl.load(b_ptrs, mask=rk[:, None] < left, other=0)
    return _dot(a_tile, b_tile, acc, ACC, PRECISION, DECODE_BF16)


@triton.jit
def _k_loop(acc, a_ptrs, b_ptrs, K, rk, a_sk, b_sk, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr, ACC: tl.constexpr,
            PRECISION: tl.constexpr, DECODE_BF16: tl.constexpr, INTERPRETED: tl.constexpr):
    """acc plus the product over K of the tiles ``a_ptrs`` and ``b_ptrs`` point at, BLOCK_K at a time."""
    k_tiles = tl.cdiv(K, BLOCK_K)
    if INTERPRETED:
        # Triton's interpreter cannot iterate a range over runtime bounds (NumPy 2); a GPU needs the
        # for loop, which is what it software-pipelines over num_stages
        k = 0
        while k < k_tiles:
            acc = _gemm_step(acc, a_ptrs, b_ptrs, K - k * BLOCK_K, rk, EVEN_K, ACC, PRECISION, DECODE_BF16)
            a_ptrs += BLOCK_K * a_sk
            b_ptrs += BLOCK_K * b_sk
            k += 1
    else:
        for k in range(0, k_tiles):
            acc = _gemm_step(acc, a_ptrs, b_ptrs, K - k * BLOCK_K, rk, EVEN_K, ACC, PRECISION, DECODE_BF16)
            a_ptrs += BLOCK_K * a_sk
            b_ptrs += BLOCK_K * b_sk
    return acc


@triton.jit
def _grouped_tile(tile, tiles_m, tiles_n, GROUP_M: tl.constexpr):
    """(row, column) of output tile ``tile`` when GROUP_M rows of tiles are walked column by column, so
    that tiles worked on together share panels of a and b in L2."""
    per_group = GROUP_M * tiles_n
    first_m = (tile // per_group) * GROUP_M
    group_rows = min(tiles_m - first_m, GROUP_M)
    return first_m + (tile % per_group) % group_rows, (tile % per_group) // group_rows


@triton.jit
def _tile_indices(tile_m, tile_n, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  INDEX_64: tl.constexpr, EVEN_M: tl.constexpr = False, EVEN_N: tl.constexpr = False):
    """Rows, columns and K offsets of output tile (tile_m, tile_n), and the rows and columns to load: those
    past the edge read row 0 / column 0 instead of masking (their results are never stored, and the loads
    stay unmasked along M and N). EVEN_M / EVEN_N: M / N is a multiple of its block, so no tile has an edge
    and the rows / columns load as they are: a ``where`` hides their contiguity from Triton, and a b whose
    columns are contiguous then loads element by element, with no asynchronous copies to pipeline its K loop."""
    rm = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    if INDEX_64:
        rm = rm.to(tl.int64)
        rn = rn.to(tl.int64)
        rk = rk.to(tl.int64)
    rm_load = rm
    if not EVEN_M:
        rm_load = tl.where(rm < M, rm, 0)
    rn_load = rn
    if not EVEN_N:
        rn_load = tl.where(rn < N, rn, 0)
    return rm, rn, rk, rm_load, rn_load


@triton.jit
def _batch_tile(a, b, batch, tile_m, tile_n, M, N, K, k_start, k_length, batch_shape, a_batch_strides,
                b_batch_strides, bias_batch_strides, out_batch_strides, a_sm, a_sk, b_sk, b_sn,
                BATCH_RANK: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                EVEN_K: tl.constexpr, EVEN_M: tl.constexpr, EVEN_N: tl.constexpr, ACC: tl.constexpr,
                PRECISION: tl.constexpr, DECODE_BF16: tl.constexpr, INDEX_64: tl.constexpr, INTERPRETED: tl.constexpr):
    """Output tile (tile_m, tile_n) of matrix ``batch``, summed over K elements [k_start, k_start +
    k_length): (acc, rows, columns, the output's mask, the bias's and the output's batch offsets)."""
    off_a, off_b, off_bias, off_out = _batch_offsets(batch, batch_shape, a_batch_strides, b_batch_strides,
                                                     bias_batch_strides, out_batch_strides, BATCH_RANK)
    rm, rn, rk, rm_load, rn_load = _tile_indices(tile_m, tile_n, M, N, BLOCK_M, BLOCK_N, BLOCK_K, INDEX_64, EVEN_M,
                                                 EVEN_N)
    a_ptrs = a + off_a + rm_load[:, None] * a_sm + (rk + k_start)[None, :] * a_sk
    b_ptrs = b + off_b + (rk + k_start)[:, None] * b_sk + rn_load[None, :] * b_sn
    acc = _k_loop(tl.zeros((BLOCK_M, BLOCK_N), dtype=ACC), a_ptrs, b_ptrs, k_length, rk, a_sk, b_sk, BLOCK_K, EVEN_K,
                  ACC, PRECISION, DECODE_BF16, INTERPRETED)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    return acc, rm, rn, mask, off_bias, off_out


@triton.jit
def gemm(a, b, bias, out, partial, M, N, K, k_per_split, batch_start, alpha, beta,
         norm_mean, norm_var, norm_weight, norm_shift, eps,
         batch_shape, a_batch_strides, b_batch_strides, bias_batch_strides, out_batch_strides,
         a_sm, a_sk, b_sk, b_sn, bias_sm, bias_sn, out_sm, out_sn,
         BATCH_RANK: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
         GROUP_M: tl.constexpr, EVEN_K: tl.constexpr, EVEN_M: tl.constexpr, EVEN_N: tl.constexpr,
         SPLIT: tl.constexpr, ACC: tl.constexpr, PRECISION: tl.constexpr, DECODE_BF16: tl.constexpr,
         HAS_BIAS: tl.constexpr, SCALED: tl.constexpr, BIAS_FORMAT: tl.constexpr, DST_FORMAT: tl.constexpr,
         VIA_F32: tl.constexpr, INDEX_64: tl.constexpr, INTERPRETED: tl.constexpr, NORM: tl.constexpr,
         NORM_FORMAT: tl.constexpr, ACTIVATION: tl.constexpr):
    """out[batch] = alpha * a[batch] @ b[batch] + beta * bias[batch] (then NORM's); one BLOCK_M x BLOCK_N tile per
    program (axis 0), one batch per program row (axis 1, offset by ``batch_start``). SPLIT (one matrix):
    program (i, 0, s) multiplies the K piece [s * k_per_split, (s + 1) * k_per_split) and writes its float32
    sums to ``partial`` (split, M, N), which ``gemv_combine`` adds in split order (no atomics: the bits do
    not depend on scheduling)."""
    pid = tl.program_id(0)
    batch = tl.program_id(1) + batch_start
    if INDEX_64:
        batch = batch.to(tl.int64)
    # GROUP_M rows of tiles are walked column by column, so the programs running together share
    # panels of a and b in L2
    tile_m, tile_n = _grouped_tile(pid, tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    if SPLIT:
        k_start = tl.program_id(2) * k_per_split
        k_length = tl.minimum(K - k_start, k_per_split)
    else:
        k_start = 0
        k_length = K
    acc, rm, rn, mask, off_bias, off_out = _batch_tile(
        a, b, batch, tile_m, tile_n, M, N, K, k_start, k_length, batch_shape, a_batch_strides, b_batch_strides,
        bias_batch_strides, out_batch_strides, a_sm, a_sk, b_sk, b_sn, BATCH_RANK, BLOCK_M, BLOCK_N, BLOCK_K, EVEN_K,
        EVEN_M, EVEN_N, ACC, PRECISION, DECODE_BF16, INDEX_64, INTERPRETED)
    if SPLIT:
        tl.store(partial + (tl.program_id(2) * M + rm[:, None]) * N + rn[None, :], acc, mask=mask)
    else:
        _epilogue(acc, bias, off_bias, bias_sm, bias_sn, rm, rn, mask, alpha, beta, out, off_out, out_sm, out_sn,
                  HAS_BIAS, SCALED, BIAS_FORMAT, DST_FORMAT, VIA_F32, norm_mean, norm_var, norm_weight, norm_shift,
                  eps, M, N, NORM, NORM_FORMAT, ACTIVATION)


@triton.jit
def _batch_item(a, b, bias, out, item, tiles_m, tiles_n, M, N, K, alpha, beta, norm_mean, norm_var, norm_weight,
                norm_shift, eps, batch_shape, a_batch_strides,
                b_batch_strides, bias_batch_strides, out_batch_strides, a_sm, a_sk, b_sk, b_sn, bias_sm, bias_sn,
                out_sm, out_sn, BATCH_RANK: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr, EVEN_M: tl.constexpr,
                EVEN_N: tl.constexpr, ACC: tl.constexpr, PRECISION: tl.constexpr, DECODE_BF16: tl.constexpr,
                HAS_BIAS: tl.constexpr, SCALED: tl.constexpr, BIAS_FORMAT: tl.constexpr, DST_FORMAT: tl.constexpr,
                VIA_F32: tl.constexpr, INDEX_64: tl.constexpr, INTERPRETED: tl.constexpr, NORM: tl.constexpr,
                NORM_FORMAT: tl.constexpr, ACTIVATION: tl.constexpr):
    """Work item ``item`` of ``gemm_batches``: output tile item % tiles (in ``gemm``'s grouped order) of
    matrix item // tiles, its product and epilogue."""
    tiles = tiles_m * tiles_n
    batch = item // tiles
    if INDEX_64:
        batch = batch.to(tl.int64)
    tile_m, tile_n = _grouped_tile(item % tiles, tiles_m, tiles_n, GROUP_M)
    acc, rm, rn, mask, off_bias, off_out = _batch_tile(
        a, b, batch, tile_m, tile_n, M, N, K, 0, K, batch_shape, a_batch_strides, b_batch_strides, bias_batch_strides,
        out_batch_strides, a_sm, a_sk, b_sk, b_sn, BATCH_RANK, BLOCK_M, BLOCK_N, BLOCK_K, EVEN_K, EVEN_M, EVEN_N, ACC,
        PRECISION, DECODE_BF16, INDEX_64, INTERPRETED)
    _epilogue(acc, bias, off_bias, bias_sm, bias_sn, rm, rn, mask, alpha, beta, out, off_out, out_sm, out_sn,
              HAS_BIAS, SCALED, BIAS_FORMAT, DST_FORMAT, VIA_F32, norm_mean, norm_var, norm_weight, norm_shift, eps, M,
              N, NORM, NORM_FORMAT, ACTIVATION)


@triton.jit
def gemm_batches(a, b, bias, out, M, N, K, batches, programs, alpha, beta,
                 norm_mean, norm_var, norm_weight, norm_shift, eps,
                 batch_shape, a_batch_strides, b_batch_strides, bias_batch_strides, out_batch_strides,
                 a_sm, a_sk, b_sk, b_sn, bias_sm, bias_sn, out_sm, out_sn,
                 BATCH_RANK: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                 GROUP_M: tl.constexpr, EVEN_K: tl.constexpr, EVEN_M: tl.constexpr, EVEN_N: tl.constexpr,
                 FLATTEN: tl.constexpr, ACC: tl.constexpr, PRECISION: tl.constexpr, DECODE_BF16: tl.constexpr,
                 HAS_BIAS: tl.constexpr, SCALED: tl.constexpr, BIAS_FORMAT: tl.constexpr, DST_FORMAT: tl.constexpr,
                 VIA_F32: tl.constexpr, INDEX_64: tl.constexpr, INTERPRETED: tl.constexpr, NORM: tl.constexpr,
                 NORM_FORMAT: tl.constexpr, ACTIVATION: tl.constexpr):
    """``gemm``'s product of ``batches`` matrices on a persistent grid: ``programs`` programs walk the
    (matrix, tile) items matrix by matrix, program p taking items p, p + programs, ... A batch of small
    matrices (attention's, one or two K steps a tile) then pays a program's start and drain once per
    program rather than once per tile, and with FLATTEN the pipeliner issues a program's next tile's loads
    while its last tile's epilogue runs. Every tile sums its K steps in ``gemm``'s order: the same bits. Items
    count in 32 bits: 2^31 tiles would be terabytes of output."""
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    items = tiles_m * tiles_n * batches
    if INTERPRETED:
        item = tl.program_id(0)
        while item < items:
            _batch_item(a, b, bias, out, item, tiles_m, tiles_n, M, N, K, alpha, beta, norm_mean, norm_var,
                        norm_weight, norm_shift, eps, batch_shape, a_batch_strides, b_batch_strides,
                        bias_batch_strides, out_batch_strides, a_sm, a_sk, b_sk, b_sn, bias_sm, bias_sn, out_sm,
                        out_sn, BATCH_RANK, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, EVEN_K, EVEN_M, EVEN_N, ACC,
                        PRECISION, DECODE_BF16, HAS_BIAS, SCALED, BIAS_FORMAT, DST_FORMAT, VIA_F32, INDEX_64,
                        INTERPRETED, NORM, NORM_FORMAT, ACTIVATION)
            item += programs
    else:
        for item in tl.range(tl.program_id(0), items, programs, flatten=FLATTEN):
            _batch_item(a, b, bias, out, item, tiles_m, tiles_n, M, N, K, alpha, beta, norm_mean, norm_var,
                        norm_weight, norm_shift, eps, batch_shape, a_batch_strides, b_batch_strides,
                        bias_batch_strides, out_batch_strides, a_sm, a_sk, b_sk, b_sn, bias_sm, bias_sn, out_sm,
                        out_sn, BATCH_RANK, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, EVEN_K, EVEN_M, EVEN_N, ACC,
                        PRECISION, DECODE_BF16, HAS_BIAS, SCALED, BIAS_FORMAT, DST_FORMAT, VIA_F32, INDEX_64,
                        INTERPRETED, NORM, NORM_FORMAT, ACTIVATION)


@triton.jit
def _wide_step(acc, a, b, off_a, off_b, rm_load, rn_load, rk, left, a_sm, a_sk, b_sk, b_sn):
    """acc plus the product of the next K tile (``left`` elements of K remain) in acc's 64-bit type: each
    output is a sum of elementwise products over the tile, with no matrix unit (it takes no int64 operands,
    and float64 ones on few GPUs)."""
    a_tile = tl.load(a + off_a + rm_load[:, None] * a_sm + rk[None, :] * a_sk, mask=rk[None, :] < left, other=0)
    b_tile = tl.load(b + off_b + rk[:, None] * b_sk + rn_load[None, :] * b_sn, mask=rk[:, None] < left, other=0)
    products = a_tile.to(acc.dtype)[:, :, None] * b_tile.to(acc.dtype)[None, :, :]
    return acc + tl.sum(products, axis=1)


@triton.jit
def _wide_scalar(value, FLOAT: tl.constexpr):
    """alpha or beta as ``gemm_wide`` takes it: an integer, or with FLOAT a float64's bits (a Python float
    argument would reach the kernel as float32)."""
    if FLOAT:
        return tl.full((1, 1), value, tl.int64).to(tl.float64, bitcast=True)
    else:
        return value


@triton.jit
def gemm_wide(a, b, bias, out, M, N, K, batch_start, alpha, beta,
              batch_shape, a_batch_strides, b_batch_strides, bias_batch_strides, out_batch_strides,
              a_sm, a_sk, b_sk, b_sn, bias_sm, bias_sn, out_sm, out_sn,
              BATCH_RANK: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
              HAS_BIAS: tl.constexpr, SCALED: tl.constexpr, INDEX_64: tl.constexpr, INTERPRETED: tl.constexpr,
              FLOAT: tl.constexpr = False):
    """out[batch] = alpha * a[batch] @ b[batch] + beta * bias[batch] on the FMA units: integer operands
    accumulated in int64 and wrapped to the output's width as torch's integer products are, or with FLOAT
    float64 ones in float64 (alpha and beta as their bits); tiles and grid as ``gemm``."""
    pid = tl.program_id(0)
    batch = tl.program_id(1) + batch_start
    if INDEX_64:
        batch = batch.to(tl.int64)
    tiles_n = tl.cdiv(N, BLOCK_N)
    off_a, off_b, off_bias, off_out = _batch_offsets(batch, batch_shape, a_batch_strides, b_batch_strides,
                                                     bias_batch_strides, out_batch_strides, BATCH_RANK)
    rm, rn, rk, rm_load, rn_load = _tile_indices(pid // tiles_n, pid % tiles_n, M, N, BLOCK_M, BLOCK_N, BLOCK_K,
                                                 INDEX_64)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float64 if FLOAT else tl.int64)
    k_tiles = tl.cdiv(K, BLOCK_K)
    if INTERPRETED:
        k = 0
        while k < k_tiles:
            acc = _wide_step(acc, a, b, off_a, off_b, rm_load, rn_load, rk + k * BLOCK_K, K, a_sm, a_sk, b_sk, b_sn)
            k += 1
    else:
        for k in range(0, k_tiles):
            acc = _wide_step(acc, a, b, off_a, off_b, rm_load, rn_load, rk + k * BLOCK_K, K, a_sm, a_sk, b_sk, b_sn)
    if SCALED:
        acc = acc * _wide_scalar(alpha, FLOAT)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    if HAS_BIAS:
        bias_tile = tl.load(bias + off_bias + rm[:, None] * bias_sm + rn[None, :] * bias_sn, mask=mask, other=0)
        bias_tile = bias_tile.to(acc.dtype)
        if SCALED:
            bias_tile = bias_tile * _wide_scalar(beta, FLOAT)
        acc = acc + bias_tile
    tl.store(out + off_out + rm[:, None] * out_sm + rn[None, :] * out_sn, acc.to(out.dtype.element_ty), mask=mask)


@triton.jit
def _tile_product(a, b, a_desc, b_desc, off_m, off_n, M, N, k_start, k_length, a_sm, a_sk, b_sk, b_sn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, TMA: tl.constexpr,
                  B_K_MAJOR: tl.constexpr, EVEN_K: tl.constexpr, ACC: tl.constexpr, PRECISION: tl.constexpr,
                  DECODE_BF16: tl.constexpr, INTERPRETED: tl.constexpr):
    """The float32 (int32) BLOCK_M x BLOCK_N tile at (off_m, off_n) of a @ b over K's [k_start, k_start +
    k_length). With TMA, tiles come through the tensor descriptors (the copy engine fills shared memory;
    out-of-bounds elements read as zeros, so nothing is masked); otherwise through pointers as in ``gemm``."""
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=ACC)
    k_tiles = tl.cdiv(k_length, BLOCK_K)
    if TMA:
        if INTERPRETED:
            k = 0
            while k < k_tiles:
                acc = _tma_step(acc, a_desc, b_desc, off_m, off_n, k_start + k * BLOCK_K, B_K_MAJOR, ACC,
                                PRECISION, DECODE_BF16)
                k += 1
        else:
            for k in range(0, k_tiles):
                acc = _tma_step(acc, a_desc, b_desc, off_m, off_n, k_start + k * BLOCK_K, B_K_MAJOR, ACC,
                                PRECISION, DECODE_BF16)
    else:
        rm = off_m + tl.arange(0, BLOCK_M)
        rn = off_n + tl.arange(0, BLOCK_N)
        rk = tl.arange(0, BLOCK_K)
        a_ptrs = a + tl.where(rm < M, rm, 0)[:, None] * a_sm + (k_start + rk)[None, :] * a_sk
        b_ptrs = b + (k_start + rk)[:, None] * b_sk + tl.where(rn < N, rn, 0)[None, :] * b_sn
        acc = _k_loop(acc, a_ptrs, b_ptrs, k_length, rk, a_sk, b_sk, BLOCK_K, EVEN_K, ACC, PRECISION, DECODE_BF16,
                      INTERPRETED)
    return acc


@triton.jit
def _tma_step(acc, a_desc, b_desc, off_m, off_n, off_k, B_K_MAJOR: tl.constexpr, ACC: tl.constexpr,
              PRECISION: tl.constexpr, DECODE_BF16: tl.constexpr):
    a_tile = a_desc.load([off_m, off_k])
    if B_K_MAJOR:
        # b is read as the (N, K) matrix it is stored as (a linear layer's weight) and transposed in place
        b_tile = tl.trans(b_desc.load([off_n, off_k]))
    else:
        b_tile = b_desc.load([off_k, off_n])
    return _dot(a_tile, b_tile, acc, ACC, PRECISION, DECODE_BF16)


@triton.jit
def _output_tile(a, b, bias, out, a_desc, b_desc, tile, tiles_m, tiles_n, M, N, K, alpha, beta, norm_mean, norm_var,
                 norm_weight, norm_shift, eps, a_sm, a_sk, b_sk, b_sn, bias_sm, bias_sn, out_sm, out_sn,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                 TMA: tl.constexpr, B_K_MAJOR: tl.constexpr, EVEN_K: tl.constexpr, ACC: tl.constexpr,
                 PRECISION: tl.constexpr, DECODE_BF16: tl.constexpr, HAS_BIAS: tl.constexpr, SCALED: tl.constexpr,
                 BIAS_FORMAT: tl.constexpr, DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr,
                 INTERPRETED: tl.constexpr, NORM: tl.constexpr, NORM_FORMAT: tl.constexpr, ACTIVATION: tl.constexpr):
    """Output tile ``tile`` of ``gemm_tiles`` (in grouped order): its product and epilogue."""
    tile_m, tile_n = _grouped_tile(tile, tiles_m, tiles_n, GROUP_M)
    acc = _tile_product(a, b, a_desc, b_desc, tile_m * BLOCK_M, tile_n * BLOCK_N, M, N, 0, K, a_sm, a_sk, b_sk,
                        b_sn, BLOCK_M, BLOCK_N, BLOCK_K, TMA, B_K_MAJOR, EVEN_K, ACC, PRECISION, DECODE_BF16,
                        INTERPRETED)
    rm = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    _epilogue(acc, bias, 0, bias_sm, bias_sn, rm, rn, mask, alpha, beta, out, 0, out_sm, out_sn, HAS_BIAS, SCALED,
              BIAS_FORMAT, DST_FORMAT, VIA_F32, norm_mean, norm_var, norm_weight, norm_shift, eps, M, N, NORM,
              NORM_FORMAT, ACTIVATION)


@triton.jit
def _split_piece(a, b, bias, out, partial, counters, a_desc, b_desc, unit, whole_tiles, splits, k_per_split,
                 tiles_m, tiles_n, M, N, K, alpha, beta, norm_mean, norm_var, norm_weight, norm_shift, eps, a_sm, a_sk,
                 b_sk, b_sn, bias_sm, bias_sn, out_sm, out_sn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, TMA: tl.constexpr, B_K_MAJOR: tl.constexpr,
                 EVEN_K: tl.constexpr, ACC: tl.constexpr, PRECISION: tl.constexpr, DECODE_BF16: tl.constexpr,
                 HAS_BIAS: tl.constexpr, SCALED: tl.constexpr, BIAS_FORMAT: tl.constexpr, DST_FORMAT: tl.constexpr,
                 VIA_F32: tl.constexpr, INTERPRETED: tl.constexpr, NORM: tl.constexpr, NORM_FORMAT: tl.constexpr,
                 ACTIVATION: tl.constexpr):
    """Split unit ``unit`` of ``gemm_tiles``: K piece ``unit % splits`` of tile ``whole_tiles + unit // splits``,
    its float32 sums written to ``partial`` (one BLOCK_M x BLOCK_N block a unit). The piece that arrives last
    at its tile's counter (an integer count, the kernel's only atomic) adds the tile's blocks in piece order
    and applies the epilogue, so the bits depend on the split alone, never on which piece ends last; it
    leaves the counter at zero for the next launch. It adds a quarter of the rows at a time: a whole tile's
    sum beside the block being added outgrows the registers (ptxas spills kilobytes at 128 x 128)."""
    slot = unit // splits
    k_start = (unit % splits) * k_per_split
    tile_m, tile_n = _grouped_tile(whole_tiles + slot, tiles_m, tiles_n, GROUP_M)
    acc = _tile_product(a, b, a_desc, b_desc, tile_m * BLOCK_M, tile_n * BLOCK_N, M, N, k_start,
                        tl.minimum(K - k_start, k_per_split), a_sm, a_sk, b_sk, b_sn, BLOCK_M, BLOCK_N, BLOCK_K, TMA,
                        B_K_MAJOR, EVEN_K, ACC, PRECISION, DECODE_BF16, INTERPRETED)
    columns = tl.arange(0, BLOCK_N)
    tl.store(partial + unit * (BLOCK_M * BLOCK_N) + tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + columns[None, :], acc)
    if last_to_arrive(counters, slot, splits):
        blocks = partial + slot * splits * (BLOCK_M * BLOCK_N)
        rn = tile_n * BLOCK_N + columns
        for quarter in tl.static_range(4):
            rows = quarter * (BLOCK_M // 4) + tl.arange(0, BLOCK_M // 4)
            total = tl.zeros((BLOCK_M // 4, BLOCK_N), dtype=ACC)
            if INTERPRETED:
                piece = 0
                while piece < splits:
                    total += tl.load(blocks + piece * (BLOCK_M * BLOCK_N) + rows[:, None] * BLOCK_N + columns[None, :])
                    piece += 1
            else:
                for piece in range(0, splits):
                    # from L2: the other pieces were written by other multiprocessors
                    total += tl.load(blocks + piece * (BLOCK_M * BLOCK_N) + rows[:, None] * BLOCK_N + columns[None, :],
                                     cache_modifier=".cg")
            rm = tile_m * BLOCK_M + rows
            mask = (rm[:, None] < M) & (rn[None, :] < N)
            _epilogue(total, bias, 0, bias_sm, bias_sn, rm, rn, mask, alpha, beta, out, 0, out_sm, out_sn, HAS_BIAS,
                      SCALED, BIAS_FORMAT, DST_FORMAT, VIA_F32, norm_mean, norm_var, norm_weight, norm_shift, eps, M,
                      N, NORM, NORM_FORMAT, ACTIVATION)


@triton.jit
def gemm_tiles(a, b, bias, out, partial, counters, M, N, K, programs, whole_tiles, splits, k_per_split, alpha, beta,
               norm_mean, norm_var, norm_weight, norm_shift, eps, a_sm, a_sk, b_sk, b_sn, bias_sm, bias_sn, out_sm,
               out_sn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
               TMA: tl.constexpr, B_K_MAJOR: tl.constexpr, FLATTEN: tl.constexpr, WARP_SPECIALIZE: tl.constexpr,
               SPLIT: tl.constexpr, EVEN_K: tl.constexpr, ACC: tl.constexpr, PRECISION: tl.constexpr,
               DECODE_BF16: tl.constexpr, HAS_BIAS: tl.constexpr, SCALED: tl.constexpr, BIAS_FORMAT: tl.constexpr,
               DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr, INTERPRETED: tl.constexpr, NORM: tl.constexpr,
               NORM_FORMAT: tl.constexpr, ACTIVATION: tl.constexpr):
    """out = alpha * a @ b + beta * bias (then NORM's) for one matrix (no batch): ``programs`` programs (the
    grid) walk the output tiles in ``gemm``'s grouped order, program p taking tiles p, p + programs, ... With a
    grid of one program per SM (persistent), the loads of a program's next tile are issued while its last tile's
    epilogue runs (FLATTEN lets the pipeliner overlap them); with one program per tile, each takes one.

    SPLIT: only the first ``whole_tiles`` tiles are taken whole; each later tile is cut into ``splits`` K
    pieces of ``k_per_split`` (whole K steps), units that continue the programs' walk after the whole tiles
    (``_split_piece``: float32 blocks in ``partial``, one int32 counter a split tile in ``counters``, zero
    on entry and left zero). A last wave of tiles that would leave SMs idle is spread over them as pieces,
    in the same launch.

    TMA: a and b are read through device-side tensor descriptors (Hopper's copy engine), which need a
    (.., K) row-major a (``a_sk == 1``), b either K-major (``b_sk == 1``, B_K_MAJOR) or N-major
    (``b_sn == 1``), 16-byte aligned bases and row strides; the caller checks. Indices fit in int32."""
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    if TMA:
        a_desc = tl.make_tensor_descriptor(a, shape=[M, K], strides=[a_sm, 1], block_shape=[BLOCK_M, BLOCK_K])
        if B_K_MAJOR:
            b_desc = tl.make_tensor_descriptor(b, shape=[N, K], strides=[b_sn, 1], block_shape=[BLOCK_N, BLOCK_K])
        else:
            b_desc = tl.make_tensor_descriptor(b, shape=[K, N], strides=[b_sk, 1], block_shape=[BLOCK_K, BLOCK_N])
    else:
        a_desc = a
        b_desc = b
    if INTERPRETED:
        tile = pid
        while tile < whole_tiles:
            _output_tile(a, b, bias, out, a_desc, b_desc, tile, tiles_m, tiles_n, M, N, K, alpha, beta, norm_mean,
                         norm_var, norm_weight, norm_shift, eps, a_sm, a_sk, b_sk, b_sn, bias_sm, bias_sn, out_sm,
                         out_sn, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, TMA, B_K_MAJOR, EVEN_K, ACC, PRECISION,
                         DECODE_BF16, HAS_BIAS, SCALED, BIAS_FORMAT, DST_FORMAT, VIA_F32, INTERPRETED, NORM,
                         NORM_FORMAT, ACTIVATION)
            tile += programs
    else:
        for tile in tl.range(pid, whole_tiles, programs, flatten=FLATTEN, warp_specialize=WARP_SPECIALIZE):
            _output_tile(a, b, bias, out, a_desc, b_desc, tile, tiles_m, tiles_n, M, N, K, alpha, beta, norm_mean,
                         norm_var, norm_weight, norm_shift, eps, a_sm, a_sk, b_sk, b_sn, bias_sm, bias_sn, out_sm,
                         out_sn, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, TMA, B_K_MAJOR, EVEN_K, ACC, PRECISION,
                         DECODE_BF16, HAS_BIAS, SCALED, BIAS_FORMAT, DST_FORMAT, VIA_F32, INTERPRETED, NORM,
                         NORM_FORMAT, ACTIVATION)
    if SPLIT:
        units = (tiles_m * tiles_n - whole_tiles) * splits
        # the walk goes on where the whole tiles left off: this program's first unit
        first = (pid + programs - whole_tiles % programs) % programs
        if INTERPRETED:
            unit = first
            while unit < units:
                _split_piece(a, b, bias, out, partial, counters, a_desc, b_desc, unit, whole_tiles, splits,
                             k_per_split, tiles_m, tiles_n, M, N, K, alpha, beta, norm_mean, norm_var, norm_weight,
                             norm_shift, eps, a_sm, a_sk, b_sk, b_sn, bias_sm, bias_sn, out_sm, out_sn, BLOCK_M,
                             BLOCK_N, BLOCK_K, GROUP_M, TMA, B_K_MAJOR, EVEN_K, ACC, PRECISION, DECODE_BF16, HAS_BIAS,
                             SCALED, BIAS_FORMAT, DST_FORMAT, VIA_F32, INTERPRETED, NORM, NORM_FORMAT, ACTIVATION)
                unit += programs
        else:
            for unit in tl.range(first, units, programs):
                _split_piece(a, b, bias, out, partial, counters, a_desc, b_desc, unit, whole_tiles, splits,
                             k_per_split, tiles_m, tiles_n, M, N, K, alpha, beta, norm_mean, norm_var, norm_weight,
                             norm_shift, eps, a_sm, a_sk, b_sk, b_sn, bias_sm, bias_sn, out_sm, out_sn, BLOCK_M,
                             BLOCK_N, BLOCK_K, GROUP_M, TMA, B_K_MAJOR, EVEN_K, ACC, PRECISION, DECODE_BF16, HAS_BIAS,
                             SCALED, BIAS_FORMAT, DST_FORMAT, VIA_F32, INTERPRETED, NORM, NORM_FORMAT, ACTIVATION)


@triton.jit
def _gemv_step(acc, x, w, rm_load, rn_load, kk, k_stop, x_sm, x_sk, w_sk, w_sn, BLOCK_M: tl.constexpr,
               ACC: tl.constexpr, PRECISION: tl.constexpr, DECODE_BF16: tl.constexpr):
    """acc plus the rows' products with the weight rows ``kk`` (those below ``k_stop``)."""
    k_mask = kk < k_stop
    w_tile = _operand(tl.load(w + kk[:, None] * w_sk + rn_load[None, :] * w_sn, mask=k_mask[:, None], other=0),
                      DECODE_BF16)
    if BLOCK_M == 1:
        # one row: products gather in a [BLOCK_K, BLOCK_N] accumulator, summed over K once at the end
        # (a sum per step would exchange values between threads every step); no matrix unit needed
        x_row = _operand(tl.load(x + kk * x_sk, mask=k_mask, other=0), DECODE_BF16)
        return acc + x_row.to(ACC)[:, None] * w_tile.to(ACC)
    else:
        x_tile = tl.load(x + rm_load[:, None] * x_sm + kk[None, :] * x_sk, mask=k_mask[None, :], other=0)
        return tl.dot(_operand(x_tile, DECODE_BF16), w_tile, acc, input_precision=PRECISION, out_dtype=ACC)


@triton.jit
def _gemv_program(M, N, K, k_per_split, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  ACC: tl.constexpr, INDEX_64: tl.constexpr):
    """A GEMV program's place: (split, rows, columns, K lanes, its K range, rows and columns clamped for
    loads, a zero accumulator). One row accumulates [BLOCK_K, BLOCK_N] products, summed over K at the end;
    several rows accumulate [BLOCK_M, BLOCK_N] from the matrix unit."""
    pid_n = tl.program_id(0)
    split = tl.program_id(1)
    rm = tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    if INDEX_64:
        rn = rn.to(tl.int64)
        rk = rk.to(tl.int64)
    k_start = split * k_per_split
    k_stop = tl.minimum(K, k_start + k_per_split)
    rn_load = tl.where(rn < N, rn, 0)
    rm_load = tl.where(rm < M, rm, 0)
    if BLOCK_M == 1:
        acc = tl.zeros((BLOCK_K, BLOCK_N), dtype=ACC)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=ACC)
    return split, rm, rn, rk, k_start, k_stop, rm_load, rn_load, acc


@triton.jit
def _gemv_write(acc, rm, rn, M, N, partial, split, bias, bias_sm, bias_sn, alpha, beta, out, out_sm, out_sn,
                BLOCK_M: tl.constexpr, SPLIT: tl.constexpr, HAS_BIAS: tl.constexpr, SCALED: tl.constexpr,
                BIAS_FORMAT: tl.constexpr, DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr, norm_mean=None,
                norm_var=None, norm_weight=None, norm_shift=None, eps=None, NORM: tl.constexpr = NORM_OFF,
                NORM_FORMAT: tl.constexpr = 0, ACTIVATION: tl.constexpr = 0, counters=None,
                COMBINE: tl.constexpr = False):
    """A GEMV program's (BLOCK_M, BLOCK_N) result from its accumulator (one row's lanes summed), written
    as its split's float32 partial sums, or through the epilogue to ``out``. COMBINE (with SPLIT): the last
    split of a column block to finish (counter ``program_id(0)`` of ``counters``) adds the block's partial
    sums as ``gemv_combine`` does and applies the epilogue."""
    if BLOCK_M == 1:
        rows = tl.sum(acc, axis=0)[None, :]
    else:
        rows = acc
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    if SPLIT:
        tl.store(partial + (split * M + rm[:, None]) * N + rn[None, :], rows, mask=mask)
        if COMBINE:
            splits = tl.num_programs(1)
            if last_to_arrive(counters, tl.program_id(0), splits):
                total = _split_sums(partial, rm, rn, M, N, splits, mask, rows.dtype, ".cg")
                _epilogue(total, bias, 0, bias_sm, bias_sn, rm, rn, mask, alpha, beta, out, 0, out_sm, out_sn,
                          HAS_BIAS, SCALED, BIAS_FORMAT, DST_FORMAT, VIA_F32, norm_mean, norm_var, norm_weight,
                          norm_shift, eps, M, N, NORM, NORM_FORMAT, ACTIVATION)
    else:
        _epilogue(rows, bias, 0, bias_sm, bias_sn, rm, rn, mask, alpha, beta, out, 0, out_sm, out_sn,
                  HAS_BIAS, SCALED, BIAS_FORMAT, DST_FORMAT, VIA_F32, norm_mean, norm_var, norm_weight, norm_shift,
                  eps, M, N, NORM, NORM_FORMAT, ACTIVATION)


@triton.jit
def _split_sums(partial, rm, rn, M, N, splits, mask, ACC: tl.constexpr, CACHE: tl.constexpr):
    """The (rm, rn) block of the splits' partial sums (split, M, N) added in split order (loaded with the
    cache modifier CACHE): the same bits whatever program adds them."""
    acc = tl.zeros((rm.shape[0], rn.shape[0]), dtype=ACC)
    s = 0
    while s < splits:
        acc += tl.load(partial + (s * M + rm[:, None]) * N + rn[None, :], mask=mask, other=0, cache_modifier=CACHE)
        s += 1
    return acc


@triton.jit
def gemv(x, w, bias, out, partial, counters, M, N, K, k_per_split, alpha, beta, norm_mean, norm_var, norm_weight,
         norm_shift, eps, x_sm, x_sk, w_sk, w_sn, bias_sm, bias_sn, out_sm, out_sn,
         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT: tl.constexpr,
         COMBINE: tl.constexpr,
         ACC: tl.constexpr, PRECISION: tl.constexpr, DECODE_BF16: tl.constexpr, HAS_BIAS: tl.constexpr,
         SCALED: tl.constexpr, BIAS_FORMAT: tl.constexpr, DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr,
         INDEX_64: tl.constexpr, INTERPRETED: tl.constexpr, PDL: tl.constexpr, NORM: tl.constexpr,
         NORM_FORMAT: tl.constexpr, ACTIVATION: tl.constexpr, LOOP_STAGES: tl.constexpr):
    """Rows of ``x`` (M of them, M <= BLOCK_M <= 16) times the K x N weight ``w``, which is streamed once:
    program (i, s) reads columns [i * BLOCK_N, ...) of the rows in split s of K. With SPLIT, each program
    writes its float32 partial sums to ``partial`` (split, M, N), which the last split of each column block
    to finish (COMBINE, ``_gemv_write``) or ``gemv_combine`` adds in split order (results do not depend on
    scheduling). LOOP_STAGES (None: the compiler's default): the K loop pipelined into this many stages, each
    step's loads copied ahead into shared memory; by default only a dot's operands are, so one row (no dot)
    waits for each step's weight tile in turn."""
    await_predecessors(PDL)
    split, rm, rn, rk, k_start, k_stop, rm_load, rn_load, acc = _gemv_program(M, N, K, k_per_split, BLOCK_M, BLOCK_N,
                                                                              BLOCK_K, ACC, INDEX_64)
    if INTERPRETED:
        k0 = 0
        while k0 < k_per_split:
            acc = _gemv_step(acc, x, w, rm_load, rn_load, k_start + k0 + rk, k_stop, x_sm, x_sk, w_sk, w_sn,
                             BLOCK_M, ACC, PRECISION, DECODE_BF16)
            k0 += BLOCK_K
    else:
        for k0 in tl.range(0, k_per_split, BLOCK_K, num_stages=LOOP_STAGES):
            acc = _gemv_step(acc, x, w, rm_load, rn_load, k_start + k0 + rk, k_stop, x_sm, x_sk, w_sk, w_sn,
                             BLOCK_M, ACC, PRECISION, DECODE_BF16)
    _gemv_write(acc, rm, rn, M, N, partial, split, bias, bias_sm, bias_sn, alpha, beta, out, out_sm, out_sn,
                BLOCK_M, SPLIT, HAS_BIAS, SCALED, BIAS_FORMAT, DST_FORMAT, VIA_F32, norm_mean, norm_var, norm_weight,
                norm_shift, eps, NORM, NORM_FORMAT, ACTIVATION, counters, COMBINE)


@triton.jit
def gemv_combine(partial, bias, out, M, N, splits, alpha, beta, norm_mean, norm_var, norm_weight, norm_shift, eps,
                 bias_sm, bias_sn, out_sm, out_sn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 HAS_BIAS: tl.constexpr, SCALED: tl.constexpr, BIAS_FORMAT: tl.constexpr, DST_FORMAT: tl.constexpr,
                 VIA_F32: tl.constexpr, PDL: tl.constexpr, NORM: tl.constexpr, NORM_FORMAT: tl.constexpr,
                 ACTIVATION: tl.constexpr):
    """Sums ``gemv``'s (or a split ``gemm``'s) partials over the splits, in split order, then applies the
    epilogue: columns by axis 0, rows by axis 1 (one row block for a GEMV)."""
    await_predecessors(PDL)
    rm = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    acc = _split_sums(partial, rm, rn, M, N, splits, mask, partial.dtype.element_ty, "")
    _epilogue(acc, bias, 0, bias_sm, bias_sn, rm, rn, mask, alpha, beta, out, 0, out_sm, out_sn,
              HAS_BIAS, SCALED, BIAS_FORMAT, DST_FORMAT, VIA_F32, norm_mean, norm_var, norm_weight, norm_shift, eps, M,
              N, NORM, NORM_FORMAT, ACTIVATION)


@triton.jit
def _running_max(x, y):
    return tl.maximum(x, y)


@triton.jit
def _row_ends(offs, lanes, experts, total_rows, SHIFT: tl.constexpr):
    """Each lane's group end (SHIFT 0) or start (SHIFT 1) among the ``experts`` groups of ``offs`` and the
    one after them (the rows past the last end): every end clamped to [0, total_rows] and raised to the
    largest before it, so that any ``offs`` gives ordered row ranges inside the rows."""
    source = lanes - SHIFT
    taken = (source >= 0) & (source < experts)
    ends = tl.load(offs + source, mask=taken, other=0)
    ends = tl.where(source < 0, 0, tl.where(taken, ends, total_rows))
    return tl.associative_scan(tl.minimum(tl.maximum(ends, 0), total_rows), 0, _running_max)


@triton.jit
def grouped_tile_indices(offs, experts, total_rows, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         BLOCK_K: tl.constexpr, BLOCK_E: tl.constexpr, INDEX_64: tl.constexpr,
                         EVEN_N: tl.constexpr = False):
    """The tile program (slot ``tl.program_id(0)``, ``tl.program_id(1)``) of a grouped product takes: (group,
    rows, rows to load, columns, columns to load, K offsets, expert, the group's row end). The groups' tiles
    are counted from ``offs`` (``_row_ends``) and numbered one after another; a group of ``experts`` is the
    rows past the last end, and a slot past every tile gets a group above it. Rows past the group's end load
    its last row, columns past N column 0 (never stored; with EVEN_N, N a multiple of BLOCK_N, there are none
    and the columns load as they are, as ``_tile_indices`` says why); the expert of the group past the experts
    is the last one (it multiplies nothing)."""
    slot = tl.program_id(0)
    lanes = tl.arange(0, BLOCK_E)
    ends = _row_ends(offs, lanes, experts, total_rows, 0)
    starts = _row_ends(offs, lanes, experts, total_rows, 1)
    tiles = (ends - starts + BLOCK_M - 1) // BLOCK_M
    tiles_through = tl.cumsum(tiles, 0)
    group = tl.sum((tiles_through <= slot).to(tl.int32), 0)
    mine = lanes == group
    first_tile = tl.sum(tl.where(mine, tiles_through - tiles, 0), 0)
    row_end = tl.sum(tl.where(mine, ends, 0), 0)
    rm = tl.sum(tl.where(mine, starts, 0), 0) + (slot - first_tile) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    expert = tl.minimum(group, experts - 1)
    if INDEX_64:
        rm = rm.to(tl.int64)
        rn = rn.to(tl.int64)
        rk = rk.to(tl.int64)
        expert = expert.to(tl.int64)
    rn_load = rn
    if not EVEN_N:
        rn_load = tl.where(rn < N, rn, 0)
    return group, rm, tl.where(rm < row_end, rm, row_end - 1), rn, rn_load, rk, expert, row_end


@triton.jit
def grouped_gemm(a, b, offs, out, total_rows, N, K, experts, a_sm, a_sk, b_se, b_sk, b_sn, out_sm, out_sn,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_E: tl.constexpr,
                 EVEN_K: tl.constexpr, ACC: tl.constexpr, PRECISION: tl.constexpr, DECODE_BF16: tl.constexpr,
                 DST_FORMAT: tl.constexpr, VIA_F32: tl.constexpr, INDEX_64: tl.constexpr,
                 INTERPRETED: tl.constexpr, EVEN_N: tl.constexpr):
    """out[rows of group e] = a[rows of group e] @ b[e]: group e's rows run from the end of group e - 1 to
    ``offs[e]`` (ends clamped to the rows and made non-decreasing here, whatever ``offs`` holds), and a group
    after the last expert takes the rows past its end, written as zeros. Program (slot, n) takes one
    BLOCK_M-row tile of one group and columns [n * BLOCK_N, ...): the groups' tiles are counted from
    ``offs`` on the device and numbered one after another, so the grid (cdiv(total_rows, BLOCK_M) +
    ``experts`` slots, enough for any ``offs``) is fixed by the shapes alone and a slot past the last tile,
    or of an expert with no rows, exits at once."""
    group, rm, rm_load, rn, rn_load, rk, expert, row_end = grouped_tile_indices(
        offs, experts, total_rows, N, BLOCK_M, BLOCK_N, BLOCK_K, BLOCK_E, INDEX_64, EVEN_N)
    if group <= experts:
        a_ptrs = a + rm_load[:, None] * a_sm + rk[None, :] * a_sk
        b_ptrs = b + expert * b_se + rk[:, None] * b_sk + rn_load[None, :] * b_sn
        # the group past the experts multiplies nothing: its rows stay zero
        acc = _k_loop(tl.zeros((BLOCK_M, BLOCK_N), dtype=ACC), a_ptrs, b_ptrs, tl.where(group < experts, K, 0), rk,
                      a_sk, b_sk, BLOCK_K, EVEN_K, ACC, PRECISION, DECODE_BF16, INTERPRETED)
        mask = (rm[:, None] < row_end) & (rn[None, :] < N)
        value = encode(acc, out.dtype.element_ty, DST_FORMAT, VIA_F32, False)
        tl.store(out + rm[:, None] * out_sm + rn[None, :] * out_sn, value, mask=mask)


# float32 products on bfloat16 matrix units: each operand is split into three bfloat16 parts whose sum is
# it exactly (x = high + mid + low: 8 significant bits each, by truncation, so no part overflows), and the
# product is the sum of the six part products larger than float32's rounding, accumulated in float32.
# Two forms compute that sum. Planes: the parts are stacked along K, so one bfloat16 GEMM of K' = 6K
# computes it after ``split_bf16_planes`` wrote each operand's planes:
#     a planes  low   high* mid  mid   high* high
#     b planes  high* low   mid  high* mid   high
# small terms first. Parts in registers (``PRECISION_BF16_PARTS``): ``gemm`` and ``gemm_tiles`` load float32
# tiles and split them as they go, adding the six products of each K tile in the same order (one launch,
# no planes in memory). ``high*`` is ``high`` of a finite value and 0 of inf or NaN, which reach the result
# only through high x high, as IEEE arithmetic would carry them (inf * x, NaN).
PART_HIGH = tl.constexpr(0)
PART_HIGH_FINITE = tl.constexpr(1)
PART_MID = tl.constexpr(2)
PART_LOW = tl.constexpr(3)
# the PRECISION of a float32 GEMM on its tiles' bfloat16 parts (a name Triton's own precisions do not use)
PRECISION_BF16_PARTS = tl.constexpr("bf16_parts")


@triton.jit
def _truncated(x):
    """``x`` (float32) with the low 16 bits of its encoding cleared: its bfloat16 truncation, as float32."""
    return (x.to(tl.uint32, bitcast=True) & 0xFFFF0000).to(tl.float32, bitcast=True)


@triton.jit
def _split_parts(x):
    """(high, high*, mid, low) of float32 ``x``, each a bfloat16 value held in float32."""
    finite = tl.abs(x) < float("inf")
    # a NaN whose payload sits in the low bits would truncate to inf: it becomes the quiet NaN
    high = tl.where(x != x, float("nan"), _truncated(x))
    rest = tl.where(finite, x - high, 0.0)
    mid = _truncated(rest)
    return high, tl.where(finite, high, 0.0), mid, rest - mid


@triton.jit
def _matrix_part(x, DECODE_BF16: tl.constexpr):
    """A part as ``tl.dot`` takes it: bfloat16 (exact: the value has 8 significant bits), or under the
    interpreter, which has no bfloat16 arithmetic, the float32 holding it (its products are as exact)."""
    if DECODE_BF16:
        return x
    else:
        return x.to(tl.bfloat16)


@triton.jit
def _parts_dot(a_tile, b_tile, acc, DECODE_BF16: tl.constexpr):
    """acc plus the float32 tiles' product as the six products of their parts, small terms first."""
    a_high, a_high_finite, a_mid, a_low = _split_parts(a_tile.to(tl.float32))
    b_high, b_high_finite, b_mid, b_low = _split_parts(b_tile.to(tl.float32))
    a_high, a_high_finite = _matrix_part(a_high, DECODE_BF16), _matrix_part(a_high_finite, DECODE_BF16)
    a_mid, a_low = _matrix_part(a_mid, DECODE_BF16), _matrix_part(a_low, DECODE_BF16)
    b_high, b_high_finite = _matrix_part(b_high, DECODE_BF16), _matrix_part(b_high_finite, DECODE_BF16)
    b_mid, b_low = _matrix_part(b_mid, DECODE_BF16), _matrix_part(b_low, DECODE_BF16)
    acc = tl.dot(a_low, b_high_finite, acc, input_precision="ieee", out_dtype=tl.float32)
    acc = tl.dot(a_high_finite, b_low, acc, input_precision="ieee", out_dtype=tl.float32)
    acc = tl.dot(a_mid, b_mid, acc, input_precision="ieee", out_dtype=tl.float32)
    acc = tl.dot(a_mid, b_high_finite, acc, input_precision="ieee", out_dtype=tl.float32)
    acc = tl.dot(a_high_finite, b_mid, acc, input_precision="ieee", out_dtype=tl.float32)
    return tl.dot(a_high, b_high, acc, input_precision="ieee", out_dtype=tl.float32)


@triton.jit
def _part_bits(part, high, high_finite, mid, low):
    if part == PART_HIGH:
        value = high
    elif part == PART_HIGH_FINITE:
        value = high_finite
    elif part == PART_MID:
        value = mid
    else:
        value = low
    # every part is a bfloat16 value held in float32: its top 16 bits are its bfloat16 encoding (taken
    # as bits: the interpreter's own conversion would truncate, and a GPU's round, the same exact value)
    return (value.to(tl.uint32, bitcast=True) >> 16).to(tl.uint16).to(tl.bfloat16, bitcast=True)


@triton.jit
def split_bf16_planes(x, planes, rows, cols, x_sr, x_sc, planes_sr, plane_step, P0: tl.constexpr,
                      P1: tl.constexpr, P2: tl.constexpr, P3: tl.constexpr, P4: tl.constexpr, P5: tl.constexpr,
                      BLOCK: tl.constexpr, INDEX_64: tl.constexpr):
    """The rows x cols float32 matrix ``x`` (strided) as six bfloat16 planes in ``planes``: element (r, c)
    of plane j at r * planes_sr + c + j * plane_step, plane j holding part Pj."""
    if INDEX_64:
        idx = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    else:
        idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    valid = idx < rows * cols
    r = idx // cols
    c = idx - r * cols
    high, high_finite, mid, low = _split_parts(tl.load(x + r * x_sr + c * x_sc, mask=valid, other=0.0).to(tl.float32))
    base = planes + r * planes_sr + c
    tl.store(base, _part_bits(P0, high, high_finite, mid, low), mask=valid)
    tl.store(base + plane_step, _part_bits(P1, high, high_finite, mid, low), mask=valid)
    tl.store(base + 2 * plane_step, _part_bits(P2, high, high_finite, mid, low), mask=valid)
    tl.store(base + 3 * plane_step, _part_bits(P3, high, high_finite, mid, low), mask=valid)
    tl.store(base + 4 * plane_step, _part_bits(P4, high, high_finite, mid, low), mask=valid)
    tl.store(base + 5 * plane_step, _part_bits(P5, high, high_finite, mid, low), mask=valid)
