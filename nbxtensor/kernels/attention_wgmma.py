"""Fused attention forward for GPUs whose matrix unit is Hopper's asynchronous wgmma, in Gluon (Triton's
layout-explicit dialect). Triton's compiler waits for a score product right after issuing it, so the
softmax of a tile and the matrix unit take turns; here each step issues the scores of tile j and the
value product of tile j - 1 together, waits for the scores alone, and computes tile j's softmax while the
value product runs. Keys and values stream into shared memory through asynchronous copies, STAGES tiles
ahead.

``attention_forward_wgmma_ws`` is its warp-specialised form: a program of 128 query rows is two computing
warpgroups of 64 and a warp that loads, by tensor-memory copies arriving on mbarriers. The warpgroups meet
only through the ring's barriers (a slot is refilled once both have read it), not at a barrier of the
whole program each step, so one's softmax runs while the other's products do; and each key and value
tile crosses from L2 once for 128 rows instead of 64.

Served: 16-bit queries, keys and values with head dim 64 or 128, no user mask, a positive scale, unit
stride along the head dim and 32-bit offsets (the warp-specialised form also rows on 16 bytes);
``ops/attention.py`` takes every other case to the portable kernel in ``attention.py``. Scores are in
base 2 as there, with the scale folded into the exponent.
"""
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                            warpgroup_mma_wait)


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
def _program_tile(heads_per_kv, CAUSAL: gl.constexpr):
    """(query tile, head, batch, key-value head) of this program: causal tiles in reverse order, so that the
    longest rows start first, as ``attention.attention_forward``'s."""
    if CAUSAL:
        tile_m = gl.num_programs(0) - 1 - gl.program_id(0)
    else:
        tile_m = gl.program_id(0)
    head = gl.program_id(1)
    return tile_m, head, gl.program_id(2), head // heads_per_kv


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
def _first_softmax(s, qk_scale):
    """(p, row max, row sum) of the first tile's scores, in base 2."""
    m_i = gl.max(s, 1) * qk_scale
    p = gl.exp2(s * qk_scale - m_i[:, None])
    return p, m_i, gl.sum(p, 1)


@gluon.jit
def _online_softmax(s, m_i, l_i, qk_scale):
    """A later tile's p, the running row max and sum updated to include it, and alpha, the factor by which
    what was accumulated before it is rescaled."""
    m_new = gl.maximum(m_i, gl.max(s, 1) * qk_scale)
    alpha = gl.exp2(m_i - m_new)
    p = gl.exp2(s * qk_scale - m_new[:, None])
    return p, m_new, l_i * alpha + gl.sum(p, 1), alpha


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

    tile_m, head, batch, kv_head = _program_tile(heads_per_kv, CAUSAL)
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
    p, m_i, l_i = _first_softmax(s, qk_scale)
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
        p, m_i, l_i, alpha = _online_softmax(s, m_i, l_i, qk_scale)
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



@gluon.jit
def _ws_loads(q_desc, k_desc, v_desc, rings, q_row, n_tiles, BLOCK_N: gl.constexpr, STAGES: gl.constexpr):
    """The loading warp: each warpgroup's queries once, then keys and values tile by tile through the
    ring, a slot refilled once both warpgroups have arrived on its empty barrier."""
    q_smem, k_smem, v_smem, q_ready, k_ready, v_ready, k_empty, v_empty = rings
    HALF_M: gl.constexpr = q_desc.block_type.shape[0]
    for half in gl.static_range(2):
        mbarrier.expect(q_ready.index(half), q_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(q_desc, [q_row + half * HALF_M, 0], q_ready.index(half), q_smem.index(half))
    for j in range(n_tiles):
        slot = j % STAGES
        phase = (j // STAGES) & 1
        # a barrier starts as if phase 1 had completed, so the first pass through the ring does not wait
        mbarrier.wait(k_empty.index(slot), phase ^ 1)
        mbarrier.expect(k_ready.index(slot), k_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(k_desc, [j * BLOCK_N, 0], k_ready.index(slot), k_smem.index(slot))
        mbarrier.wait(v_empty.index(slot), phase ^ 1)
        mbarrier.expect(v_ready.index(slot), v_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(v_desc, [j * BLOCK_N, 0], v_ready.index(slot), v_smem.index(slot))


@gluon.jit
def _ws_compute(rings, out_base, out_sl, tile_m, L, S, qk_scale, HALF: gl.constexpr, HEAD_DIM: gl.constexpr,
                BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr, CAUSAL: gl.constexpr):
    """One computing warpgroup: the rows HALF * BLOCK_M / 2 onwards of the program's query tile, with the
    loop of ``attention_forward_wgmma`` waiting on the ring's barriers instead of the whole program's.
    Under CAUSAL the first half needs one key tile fewer than the loads bring (at most that, for BLOCK_N
    >= BLOCK_M / 2); that tile's slot is never refilled, so skipping it leaves the ring consistent."""
    q_smem, k_smem, v_smem, q_ready, k_ready, v_ready, k_empty, v_empty = rings
    HALF_M: gl.constexpr = BLOCK_M // 2
    dtype: gl.constexpr = q_smem.dtype
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    out_rows_layout: gl.constexpr = gl.SliceLayout(1, o_layout)
    # in units of half tiles, as _visible_scores counts them
    part = tile_m * 2 + HALF
    if CAUSAL:
        n_tiles = gl.cdiv(gl.minimum(S, (part + 1) * HALF_M), BLOCK_N)
    else:
        n_tiles = gl.cdiv(S, BLOCK_N)

    mbarrier.wait(q_ready.index(HALF), 0)
    queries = q_smem.index(HALF).load(gl.DotOperandLayout(operand_index=0, parent=s_layout, k_width=2))
    zeros = gl.zeros([HALF_M, BLOCK_N], gl.float32, s_layout)
    mbarrier.wait(k_ready.index(0), 0)
    s = warpgroup_mma(queries, k_smem.index(0).permute((1, 0)), zeros, use_acc=False)
    mbarrier.arrive(k_empty.index(0), count=1)
    s = _visible_scores(s, part, 0, S, HALF_M, BLOCK_N, CAUSAL, s_layout)
    p, m_i, l_i = _first_softmax(s, qk_scale)
    p_prev = gl.convert_layout(p.to(dtype), p_layout)
    acc = gl.zeros([HALF_M, HEAD_DIM], gl.float32, o_layout)

    for j in range(1, n_tiles):
        slot = j % STAGES
        prev = (j - 1) % STAGES
        mbarrier.wait(k_ready.index(slot), (j // STAGES) & 1)
        mbarrier.wait(v_ready.index(prev), ((j - 1) // STAGES) & 1)
        s = warpgroup_mma(queries, k_smem.index(slot).permute((1, 0)), zeros, use_acc=False, is_async=True)
        acc = warpgroup_mma(p_prev, v_smem.index(prev), acc, is_async=True)
        s = warpgroup_mma_wait(num_outstanding=1, deps=(s, ))
        mbarrier.arrive(k_empty.index(slot), count=1)
        s = _visible_scores(s, part, j * BLOCK_N, S, HALF_M, BLOCK_N, CAUSAL, s_layout)
        p, m_i, l_i, alpha = _online_softmax(s, m_i, l_i, qk_scale)
        acc, p_prev = warpgroup_mma_wait(num_outstanding=0, deps=(acc, p_prev))
        mbarrier.arrive(v_empty.index(prev), count=1)
        acc = acc * gl.convert_layout(alpha, out_rows_layout)[:, None]
        p_prev = gl.convert_layout(p.to(dtype), p_layout)

    last = (n_tiles - 1) % STAGES
    mbarrier.wait(v_ready.index(last), ((n_tiles - 1) // STAGES) & 1)
    acc = warpgroup_mma(p_prev, v_smem.index(last), acc)
    mbarrier.arrive(v_empty.index(last), count=1)

    result = acc / gl.convert_layout(l_i, out_rows_layout)[:, None]
    store_layout: gl.constexpr = _copy_layout(HEAD_DIM, 4)
    result = gl.convert_layout(result.to(out_base.dtype.element_ty), store_layout)
    rows = part * HALF_M + gl.arange(0, HALF_M, layout=gl.SliceLayout(1, store_layout))
    dims = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, store_layout))
    gl.store(out_base + rows[:, None] * out_sl + dims[None, :], result, mask=(rows < L)[:, None])


@gluon.jit
def attention_forward_wgmma_ws(q, k, v, out, L, S, heads_per_kv, qk_scale,
                               q_sb, q_sh, q_sl, k_sb, k_sh, k_sn, v_sb, v_sh, v_sn, out_sb, out_sh, out_sl,
                               HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                               STAGES: gl.constexpr, CAUSAL: gl.constexpr, num_warps: gl.constexpr):
    """``attention_forward_wgmma`` over 128-row query tiles shared by two computing warpgroups (the
    default partition, num_warps = 4, and a worker) and a loading warp: tensor-memory copies of whole
    tiles arrive on mbarriers, so one warpgroup's softmax runs while the other's products do, and each
    key and value tile crosses from L2 once for 128 query rows."""
    dtype: gl.constexpr = q.dtype.element_ty
    HALF_M: gl.constexpr = BLOCK_M // 2
    tile_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
    tile_m, head, batch, kv_head = _program_tile(heads_per_kv, CAUSAL)
    if CAUSAL:
        n_tiles = gl.cdiv(gl.minimum(S, (tile_m + 1) * BLOCK_M), BLOCK_N)
    else:
        n_tiles = gl.cdiv(S, BLOCK_N)
    # rows past the last arrive as zeros
    q_desc = tma.make_tensor_descriptor(q + batch * q_sb + head * q_sh, [L, HEAD_DIM], [q_sl, 1],
                                        [HALF_M, HEAD_DIM], tile_layout)
    k_desc = tma.make_tensor_descriptor(k + batch * k_sb + kv_head * k_sh, [S, HEAD_DIM], [k_sn, 1],
                                        [BLOCK_N, HEAD_DIM], tile_layout)
    v_desc = tma.make_tensor_descriptor(v + batch * v_sb + kv_head * v_sh, [S, HEAD_DIM], [v_sn, 1],
                                        [BLOCK_N, HEAD_DIM], tile_layout)

    q_smem = gl.allocate_shared_memory(dtype, [2, HALF_M, HEAD_DIM], tile_layout)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], tile_layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], tile_layout)
    q_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for half in gl.static_range(2):
        mbarrier.init(q_ready.index(half), count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        # one arrival from each computing warpgroup
        mbarrier.init(k_empty.index(i), count=2)
        mbarrier.init(v_empty.index(i), count=2)

    out_base = out + batch * out_sb + head * out_sh
    rings = (q_smem, k_smem, v_smem, q_ready, k_ready, v_ready, k_empty, v_empty)
    gl.warp_specialize([
        (_ws_compute, (rings, out_base, out_sl, tile_m, L, S, qk_scale, 0, HEAD_DIM, BLOCK_M, BLOCK_N, STAGES,
                       CAUSAL)),
        (_ws_compute, (rings, out_base, out_sl, tile_m, L, S, qk_scale, 1, HEAD_DIM, BLOCK_M, BLOCK_N, STAGES,
                       CAUSAL)),
        (_ws_loads, (q_desc, k_desc, v_desc, rings, tile_m * BLOCK_M, n_tiles, BLOCK_N, STAGES)),
    ], [4, 1], [240, 24])
