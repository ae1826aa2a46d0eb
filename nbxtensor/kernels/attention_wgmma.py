"""Fused attention forward for GPUs whose matrix unit is Hopper's asynchronous wgmma, in Gluon (Triton's
layout-explicit dialect). Triton's compiler waits for a score product right after issuing it, so the
softmax of a tile and the matrix unit take turns; here each step issues the scores of tile j and the
value product of tile j - 1 together, waits for the scores alone, and computes tile j's softmax while the
value product runs. Keys and values stream into shared memory through asynchronous copies, STAGES tiles
ahead.

Served: 16-bit queries, keys and values with head dim 64 or 128, no user mask, a positive scale, unit
stride along the head dim and 32-bit offsets; ``ops/attention.py`` takes every other case to the portable
kernel in ``attention.py``. Scores are in base 2 as there, with the scale folded into the exponent.
"""
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, warpgroup_mma, warpgroup_mma_wait


@gluon.constexpr_function
def _copy_layout(cols, num_warps):
    """Rows of ``cols`` 16-bit elements, 16 bytes a thread, a warp's lanes along the row first."""
    lanes_along = min(32, cols // 8)
    return gl.BlockedLayout([1, 8], [32 // lanes_along, lanes_along], [num_warps, 1], [1, 0])


@gluon.jit
def _copy_rows(smem, base, first, rows_total, row_stride, ROWS: gl.constexpr, HEAD_DIM: gl.constexpr,
               layout: gl.constexpr):
    """Start copying rows ``first`` .. ``first + ROWS`` of a (rows, HEAD_DIM) matrix into ``smem``; rows
    from ``rows_total`` on arrive as zeros."""
    rows = first + gl.arange(0, ROWS, layout=gl.SliceLayout(1, layout))
    dims = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, layout))
    async_copy.async_copy_global_to_shared(smem, base + rows[:, None] * row_stride + dims[None, :],
                                           mask=(rows < rows_total)[:, None])


@gluon.jit
def _visible_scores(s, tile_m, start_n, S, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr,
                    layout: gl.constexpr):
    """Scores of the key tile at ``start_n`` with keys past the last (or, CAUSAL, past the query's own
    position) set to -inf; a tile wholly inside is returned as it is, behind one run-time branch."""
    edge = start_n + BLOCK_N > S
    if CAUSAL:
        edge = edge | (start_n + BLOCK_N > tile_m * BLOCK_M + 1)
    if edge:
        rows = tile_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, layout))
        cols = start_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, layout))
        allowed = (cols < S)[None, :]
        if CAUSAL:
            allowed = allowed & (cols[None, :] <= rows[:, None])
        s = gl.where(allowed, s, float("-inf"))
    return s


@gluon.jit
def attention_forward_wgmma(q, k, v, out, L, S, heads_per_kv, qk_scale,
                            q_sb, q_sh, q_sl, k_sb, k_sh, k_sn, v_sb, v_sh, v_sn, out_sb, out_sh, out_sl,
                            HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                            STAGES: gl.constexpr, CAUSAL: gl.constexpr, Q_IN_REGISTERS: gl.constexpr,
                            num_warps: gl.constexpr):
    """out[b, h, i] = softmax_j(q[b, h, i] . k[b, h // heads_per_kv, j] * scale) v[...] (``qk_scale`` is
    scale * log2(e)); grid and tile order as ``attention.attention_forward``."""
    dtype: gl.constexpr = q.dtype.element_ty
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    copy_layout: gl.constexpr = _copy_layout(HEAD_DIM, num_warps)
    tile_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
    out_rows_layout: gl.constexpr = gl.SliceLayout(1, o_layout)

    if CAUSAL:
        tile_m = gl.num_programs(0) - 1 - gl.program_id(0)
    else:
        tile_m = gl.program_id(0)
    head = gl.program_id(1)
    batch = gl.program_id(2)
    kv_head = head // heads_per_kv
    k_base = k + batch * k_sb + kv_head * k_sh
    v_base = v + batch * v_sb + kv_head * v_sh
    if CAUSAL:
        stop = gl.minimum(S, (tile_m + 1) * BLOCK_M)
    else:
        stop = S
    n_tiles = gl.cdiv(stop, BLOCK_N)

    q_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, HEAD_DIM], tile_layout)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], tile_layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], tile_layout)

    # copy groups go out as q, k0, v0, k1, v1, ...: tile t's keys, then its values; up to STAGES of each
    # in flight. Step j's wait leaves the 2 (STAGES - 2) groups after k_j pending.
    _copy_rows(q_smem, q + batch * q_sb + head * q_sh, tile_m * BLOCK_M, L, q_sl, BLOCK_M, HEAD_DIM, copy_layout)
    async_copy.commit_group()
    _copy_rows(k_smem.index(0), k_base, 0, stop, k_sn, BLOCK_N, HEAD_DIM, copy_layout)
    async_copy.commit_group()
    for t in gl.static_range(1, STAGES):
        if t - 1 < n_tiles:
            _copy_rows(v_smem.index(t - 1), v_base, (t - 1) * BLOCK_N, stop, v_sn, BLOCK_N, HEAD_DIM, copy_layout)
        async_copy.commit_group()
        if t < n_tiles:
            _copy_rows(k_smem.index(t), k_base, t * BLOCK_N, stop, k_sn, BLOCK_N, HEAD_DIM, copy_layout)
        async_copy.commit_group()

    async_copy.wait_group(2 * (STAGES - 1))
    fence_async_shared()
    gl.thread_barrier()
    zeros = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)
    if Q_IN_REGISTERS:
        # the score products read the queries from registers, sparing shared memory a read of them a tile
        queries = q_smem.load(gl.DotOperandLayout(operand_index=0, parent=s_layout, k_width=2))
    else:
        queries = q_smem
    s = warpgroup_mma(queries, k_smem.index(0).permute((1, 0)), zeros, use_acc=False)
    s = _visible_scores(s, tile_m, 0, S, BLOCK_M, BLOCK_N, CAUSAL, s_layout)
    m_i = gl.max(s, 1) * qk_scale
    p = gl.exp2(s * qk_scale - m_i[:, None])
    l_i = gl.sum(p, 1)
    p_prev = gl.convert_layout(p.to(dtype), p_layout)
    acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, o_layout)

    for j in range(1, n_tiles):
        # no proxy fence between these copies and the products that read them, as in Triton's own
        # pipelined loops (the fence cost a MEMBAR.ALL.CTA a step); the one above covers the queries
        async_copy.wait_group(2 * (STAGES - 2))
        gl.thread_barrier()
        # every thread is past step j - 1: k_{j-1}'s and v_{j-2}'s slots are free
        refill = j + STAGES - 2
        if refill < n_tiles:
            _copy_rows(v_smem.index(refill % STAGES), v_base, refill * BLOCK_N, stop, v_sn, BLOCK_N, HEAD_DIM,
                       copy_layout)
        async_copy.commit_group()
        if refill + 1 < n_tiles:
            _copy_rows(k_smem.index((refill + 1) % STAGES), k_base, (refill + 1) * BLOCK_N, stop, k_sn, BLOCK_N,
                       HEAD_DIM, copy_layout)
        async_copy.commit_group()

        s = warpgroup_mma(queries, k_smem.index(j % STAGES).permute((1, 0)), zeros, use_acc=False, is_async=True)
        acc = warpgroup_mma(p_prev, v_smem.index((j - 1) % STAGES), acc, is_async=True)
        s = warpgroup_mma_wait(num_outstanding=1, deps=(s, ))
        s = _visible_scores(s, tile_m, j * BLOCK_N, S, BLOCK_M, BLOCK_N, CAUSAL, s_layout)
        m_new = gl.maximum(m_i, gl.max(s, 1) * qk_scale)
        alpha = gl.exp2(m_i - m_new)
        p = gl.exp2(s * qk_scale - m_new[:, None])
        l_i = l_i * alpha + gl.sum(p, 1)
        m_i = m_new
        acc, p_prev = warpgroup_mma_wait(num_outstanding=0, deps=(acc, p_prev))
        acc = acc * gl.convert_layout(alpha, out_rows_layout)[:, None]
        p_prev = gl.convert_layout(p.to(dtype), p_layout)

    async_copy.wait_group(0)
    gl.thread_barrier()
    acc = warpgroup_mma(p_prev, v_smem.index((n_tiles - 1) % STAGES), acc)

    result = acc / gl.convert_layout(l_i, out_rows_layout)[:, None]
    # stored in the copy layout: 16 bytes a thread along each row
    result = gl.convert_layout(result.to(out.dtype.element_ty), copy_layout)
    rows = tile_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, copy_layout))
    dims = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, copy_layout))
    gl.store(out + batch * out_sb + head * out_sh + rows[:, None] * out_sl + dims[None, :], result,
             mask=(rows < L)[:, None])
