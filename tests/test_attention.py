"""scaled_dot_product_attention, decode, paged attention, the KV-cache append and rotary embeddings
against NumPy float64 references written here.

Tolerances: float32 attention is a softmax-weighted mean of float32 products over S <= 64 keys, each
score off by about E * 2^-24 relative; outputs are O(1), so 2e-5 absolute leaves room for exp2 and the
online rescaling. bfloat16 inputs are rounded before the reference sees them, so what remains is the
output's rounding (2^-8 relative) and, on a GPU, the probabilities rounded to bfloat16 before P @ V
(another 2^-8 per term): 2e-2 absolute. float16 keeps 3 more mantissa bits: 4e-3.
"""
import ml_dtypes
import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.device import backend_for
from tests.conftest import TEST_DEVICE, to_nbx

F = nbx.nn.functional
TOL = {"float32": 2e-5, "bfloat16": 2e-2, "float16": 4e-3}
NUMPY_TYPE = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}


def reference(q, k, v, mask=None, causal=False, scale=None):
    """softmax(q k^T scale + mask) v in float64; K/V heads repeat to the query's (grouped-query heads);
    a row with no visible key is zero, as torch returns."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    if q.ndim >= 3 and k.shape[-3] != q.shape[-3]:
        k = np.repeat(k, q.shape[-3] // k.shape[-3], axis=-3)
        v = np.repeat(v, q.shape[-3] // v.shape[-3], axis=-3)
    scores = q @ np.swapaxes(k, -1, -2) * (1 / np.sqrt(q.shape[-1]) if scale is None else scale)
    if causal:
        length, keys = scores.shape[-2:]
        scores = np.where(np.tril(np.ones((length, keys), bool)), scores, -np.inf)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf) if mask.dtype == bool else scores + np.asarray(mask, np.float64)
    top = scores.max(-1, keepdims=True)
    weights = np.exp(scores - np.where(np.isfinite(top), top, 0))
    total = weights.sum(-1, keepdims=True)
    return np.where(total > 0, (weights / np.where(total > 0, total, 1)) @ v, 0.0)


def _inputs(rng, q_shape, k_shape, v_shape, dtype="float32"):
    cast = NUMPY_TYPE[dtype]
    return [rng.standard_normal(s).astype(np.float32).astype(cast) for s in (q_shape, k_shape, v_shape)]


def _sdpa(q, k, v, mask=None, **kwargs):
    return F.scaled_dot_product_attention(to_nbx(q), to_nbx(k), to_nbx(v),
                                          attn_mask=None if mask is None else to_nbx(mask), **kwargs)


def _close(out, expected, dtype="float32"):
    got = np.asarray(out.numpy(), dtype=np.float64)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, atol=TOL[dtype], rtol=TOL[dtype])


def _mask(rng, kind, shape):
    if kind == "bool":
        mask = rng.random(shape) < 0.7
        mask[..., 0] = True  # every row sees a key; fully masked rows have their own test
        return mask
    if kind == "additive":
        return rng.standard_normal(shape).astype(np.float32)
    return None


def _float32_on_parts(monkeypatch):
    """Float32 attention on bfloat16 parts whatever the device (the CPU's facts name no matrix unit)."""
    from nbxtensor.ops import matmul_plans
    monkeypatch.setattr(matmul_plans, "_by_planes", lambda dtype, facts: dtype.name == "float32"
                        and matmul_plans.backends.cuda.matmul.float32_planes)


def _launched_precisions(monkeypatch) -> list:
    """The ``PRECISION`` of the planned launches made from here on, in order."""
    from nbxtensor.ops import plans
    precisions, real = [], plans.launch_slots

    def noted(kernel, grid, device, args, positions, values, constexprs, *rest):
        precisions.append(constexprs.get("PRECISION"))
        return real(kernel, grid, device, args, positions, values, constexprs, *rest)
    monkeypatch.setattr(plans, "launch_slots", noted)
    return precisions


# Float32 on bfloat16 parts holds float32's tolerance: each part product is exact in float32 (8 x 8
# significant bits), and the three products left out (mid x low twice, low x low) come to less than 2^-21 of
# |q_i k_i| (or |p_j v_j|) per term, below the float32 accumulation's rounding over E (or S) terms that TOL
# already allows for
@pytest.fixture(params=["interpreter's", "key-tiled", "interpreter's on parts", "key-tiled on parts"])
def forward_kernel(request, monkeypatch):
    """On the CPU, the prefill runs the interpreter's own kernel (heads grouped, all keys in one tile) and
    again the key-tiled kernel a GPU runs, in 16 x 16 tiles so that its online softmax takes several steps;
    each again with float32 on bfloat16 parts (the interpreter takes that form first); elsewhere the
    device's own choice, once."""
    from nbxtensor.ops import attention as attention_ops
    if request.param != "interpreter's" and TEST_DEVICE != "cpu":
        pytest.skip("the kernel and its precision are the device's own choice off the CPU")
    if request.param.startswith("key-tiled"):
        monkeypatch.setattr(attention_ops, "interpreted_forward_config",
                            lambda length, keys, heads: dict(BLOCK_M=16, BLOCK_N=16, num_warps=1, num_stages=1))
    if request.param.endswith("on parts"):
        _float32_on_parts(monkeypatch)
    attention_ops._attention_plans.clear()
    yield request.param
    attention_ops._attention_plans.clear()


@pytest.mark.parametrize("head_dim", [16, 64, 80, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("mask_kind", [None, "bool", "additive"])
def test_head_dims_causal_and_masks(rng, head_dim, causal, mask_kind, forward_kernel):
    length, keys = (19, 23) if head_dim <= 80 else (9, 11)
    q, k, v = _inputs(rng, (2, 2, length, head_dim), (2, 2, keys, head_dim), (2, 2, keys, head_dim))
    mask = _mask(rng, mask_kind, (2, 2, length, keys))
    out = _sdpa(q, k, v, mask, is_causal=causal)
    _close(out, reference(q, k, v, mask, causal))


@pytest.mark.parametrize("ratio", [1, 4, 8])
@pytest.mark.parametrize("length", [1, 17])
def test_grouped_query_heads(rng, ratio, length, forward_kernel):
    kv_heads = 2
    q, k, v = _inputs(rng, (2, kv_heads * ratio, length, 32), (2, kv_heads, 21, 32), (2, kv_heads, 21, 32))
    _close(_sdpa(q, k, v, enable_gqa=True), reference(q, k, v))
    _close(_sdpa(q, k, v, enable_gqa=True, is_causal=True), reference(q, k, v, causal=True))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("causal", [False, True])
def test_half_precision(rng, dtype, causal):
    q, k, v = _inputs(rng, (1, 2, 20, 64), (1, 2, 37, 64), (1, 2, 37, 64), dtype)
    mask = _mask(rng, "additive", (20, 37)).astype(NUMPY_TYPE[dtype])
    out = _sdpa(q, k, v, mask, is_causal=causal)
    assert out.dtype.name == dtype
    _close(out, reference(q, k, v, mask, causal), dtype)


# (batch, heads, queries, keys, head dim): one group of 16 heads' tiles for 12 heads (the MiniLM of `nbx demo`),
# two groups of 4 for 5 heads, and single heads in two query tiles of 256 rows
@pytest.mark.parametrize("shape, groups, query_tiles", [((2, 12, 12, 12, 32), 1, 1), ((1, 5, 100, 100, 16), 2, 1),
                                                        ((1, 3, 300, 600, 16), 3, 2)])
@pytest.mark.parametrize("causal", [False, True])
def test_heads_grouped_under_the_interpreter(rng, shape, groups, query_tiles, causal):
    """The interpreter's kernel stacks a program's heads into one block-diagonal problem: a head count
    that is not a power of two (the group's last rows and columns are heads past the last), several
    groups, several query tiles, and a mask of its own per head must all give each head its own answer."""
    from nbxtensor.ops.attention import interpreted_forward_config
    batch, heads, length, keys, dim = shape
    q, k, v = _inputs(rng, (batch, heads, length, dim), (batch, heads, keys, dim), (batch, heads, keys, dim))
    mask = _mask(rng, "bool", (batch, heads, length, keys))
    _close(_sdpa(q, k, v, is_causal=causal), reference(q, k, v, causal=causal))
    _close(_sdpa(q, k, v, mask, is_causal=causal), reference(q, k, v, mask, causal))
    config = interpreted_forward_config(length, keys, heads)
    assert config["BLOCK_N"] >= keys
    assert (-(-heads // config["HEADS"]), -(-length // config["BLOCK_M"])) == (groups, query_tiles)


def test_causal_with_more_keys_than_queries_is_top_left(rng):
    q, k, v = _inputs(rng, (1, 1, 3, 16), (1, 1, 8, 16), (1, 1, 8, 16))
    _close(_sdpa(q, k, v, is_causal=True), reference(q, k, v, causal=True))
    # one query row sees key 0 only
    _close(_sdpa(q[:, :, :1], k, v, is_causal=True), reference(q[:, :, :1], k, v, causal=True))


def test_three_d_inputs_scale_and_value_dim(rng):
    q, k, v = _inputs(rng, (3, 10, 24), (3, 13, 24), (3, 13, 40))
    out = _sdpa(q, k, v, scale=0.3)
    assert tuple(out.shape) == (3, 10, 40)
    _close(out, reference(q, k, v, scale=0.3))


def test_strided_inputs(rng):
    # (B, L, H, E) storage read as (B, H, L, E), the layout a fused QKV projection leaves
    q, k, v = _inputs(rng, (2, 11, 3, 32), (2, 14, 3, 32), (2, 14, 3, 32))
    tq, tk, tv = (to_nbx(a).transpose(1, 2) for a in (q, k, v))
    out = F.scaled_dot_product_attention(tq, tk, tv)
    _close(out, reference(*(a.transpose(0, 2, 1, 3) for a in (q, k, v))))


@pytest.mark.parametrize("length", [5, 1])
@pytest.mark.parametrize("masked", [False, True])
def test_leading_dims_that_cannot_merge_are_copied_by_a_plan_made_once(rng, monkeypatch, length, masked):
    """Rank-5 operands made by ``.transpose(0, 1)`` have leading dims no view merges into the kernels' batch
    dim: each call copies them to the planned layout, and the output is laid out so that it can be viewed
    (a view that copied would lose what the kernel writes). Planned once, however many calls."""
    from nbxtensor.ops import attention as attention_ops
    plans = []
    make = attention_ops._plan_sdpa
    monkeypatch.setattr(attention_ops, "_plan_sdpa", lambda *args: plans.append(1) or make(*args))
    attention_ops._attention_plans.clear()
    q, k, v = _inputs(rng, (3, 2, 2, length, 16), (3, 2, 2, 7, 16), (3, 2, 2, 7, 16))
    mask = _mask(rng, "bool", (3, 2, 1, length, 7)) if masked else None
    swap = (1, 0, 2, 3, 4)
    expected = reference(*(a.transpose(swap) for a in (q, k, v)), None if mask is None else mask.transpose(swap),
                         causal=length == 1)
    for _ in range(2):
        operands = [to_nbx(a).transpose(0, 1) for a in (q, k, v)]
        out = F.scaled_dot_product_attention(
            *operands, attn_mask=None if mask is None else to_nbx(mask).transpose(0, 1), is_causal=length == 1)
        _close(out, expected)
    attention_ops._attention_plans.clear()
    assert len(plans) == 1


@pytest.mark.parametrize("mask_shape", [(23,), (9, 23), (2, 1, 9, 23), (1, 3, 1, 23)])
@pytest.mark.parametrize("kind", ["bool", "additive"])
def test_masks_broadcast(rng, mask_shape, kind):
    q, k, v = _inputs(rng, (2, 3, 9, 16), (2, 3, 23, 16), (2, 3, 23, 16))
    mask = _mask(rng, kind, mask_shape)
    _close(_sdpa(q, k, v, mask), reference(q, k, v, mask))


def test_fully_masked_rows_are_zero(rng):
    q, k, v = _inputs(rng, (1, 2, 4, 16), (1, 2, 6, 16), (1, 2, 6, 16))
    mask = np.ones((4, 6), bool)
    mask[1] = False
    out = _sdpa(q, k, v, mask).numpy()
    assert np.all(out[:, :, 1] == 0)
    _close(_sdpa(q, k, v, mask), reference(q, k, v, mask))
    additive = np.where(mask, 0.0, -np.inf).astype(np.float32)
    _close(_sdpa(q, k, v, additive), reference(q, k, v, mask))
    # one query row, decode path
    _close(_sdpa(q[:, :, 1:2], k, v, mask[1:2]), reference(q[:, :, 1:2], k, v, mask[1:2]))


def _wgmma_device():
    from nbxtensor.device import backend_for
    facts = backend_for(nbx.device(TEST_DEVICE)).facts
    return facts.get("matrix_unit", {}).get("instruction") == "wgmma" and not facts["kernels"].get("interpreted")


def _wgmma_settings():
    from nbxtensor.ops.attention import _WGMMA_WS_REGISTERS, _WGMMA_SHAPES, _WGMMA_WS_SHAPES
    return [(head_dim, dict(KERNEL="wgmma", BLOCK_M=bm, BLOCK_N=bn, num_warps=warps, STAGES=stages,
                            Q_IN_REGISTERS=in_registers))
            for head_dim, shapes in _WGMMA_SHAPES.items() for bm, bn, warps, stages, in_registers in shapes] + [
        (head_dim, dict(KERNEL="wgmma_ws", BLOCK_M=128, BLOCK_N=bn, num_warps=4, STAGES=stages,
                        maxnreg=_WGMMA_WS_REGISTERS))
        for head_dim, shapes in _WGMMA_WS_SHAPES.items() for bn, stages in shapes]


@pytest.mark.skipif(not _wgmma_device(), reason="the wgmma forward kernel runs on Hopper GPUs only")
@pytest.mark.parametrize("head_dim, setting", _wgmma_settings())
@pytest.mark.parametrize("causal", [False, True])
def test_wgmma_forward_every_setting(rng, monkeypatch, head_dim, setting, causal):
    """Each setting of kernels/attention_wgmma.py, forced: queries and keys that end inside a tile (70, 200
    rows; 300 keys), grouped-query heads, keys past the queries under causality; bfloat16, float16 once."""
    from nbxtensor.ops import attention as attention_ops
    from nbxtensor.ops.plans import clear_all
    chosen = []

    def forced(key, facts, candidates, prepare):
        offered = candidates()
        assert setting in offered, (setting, offered)
        chosen.append(setting)
        return setting
    monkeypatch.setattr(attention_ops.tuning, "choose_timed", forced)
    clear_all()
    try:
        for dtype, (length, keys) in (("bfloat16", (70, 70)), ("bfloat16", (200, 300)), ("float16", (129, 200))):
            if dtype == "float16" and setting["KERNEL"] == "wgmma" and setting["BLOCK_M"] != 64:
                continue
            q, k, v = _inputs(rng, (2, 4, length, head_dim), (2, 2, keys, head_dim), (2, 2, keys, head_dim), dtype)
            out = _sdpa(q, k, v, is_causal=causal, enable_gqa=True)
            assert out.dtype.name == dtype
            _close(out, reference(q, k, v, causal=causal), dtype)
    finally:
        clear_all()
    assert chosen


@pytest.mark.skipif(not _wgmma_device(), reason="the wgmma forward kernels run on Hopper GPUs only")
def test_a_plan_made_for_aligned_operands_serves_misaligned_ones(rng, monkeypatch):
    """The warp-specialised kernel copies by tensor-memory descriptors, which fault on a start that is not
    16-byte aligned: operands of the same layout starting 2 bytes on must be planned again, without it."""
    from nbxtensor.ops import attention as attention_ops
    from nbxtensor.ops.plans import clear_all
    kernels = []

    def forced(key, facts, candidates, prepare):
        offered = candidates()
        ws = [c for c in offered if c.get("KERNEL") == "wgmma_ws"]
        kernels.append(bool(ws))
        return (ws or offered)[0]
    monkeypatch.setattr(attention_ops.tuning, "choose_timed", forced)
    clear_all()
    try:
        shape = (1, 2, 130, 64)
        q, k, v = _inputs(rng, shape, shape, shape, "bfloat16")
        _close(_sdpa(q, k, v), reference(q, k, v), "bfloat16")
        shifted = [to_nbx(np.concatenate([np.zeros(1, t.dtype), t.ravel()]))[1:].view(shape) for t in (q, k, v)]
        out = F.scaled_dot_product_attention(*shifted)
        _close(out, reference(q, k, v), "bfloat16")
    finally:
        clear_all()
    assert kernels == [True, False]


def test_wgmma_kernel_is_offered_only_where_it_serves(monkeypatch):
    """The wgmma settings join the tuner's candidates for 16-bit operands of head dim 64 or 128 with unit
    head-dim strides, no mask and a positive scale, on a device whose matrix unit is wgmma; never on others."""
    from nbxtensor.ops.attention import wgmma_candidates
    facts = {"matrix_unit": {"instruction": "wgmma"}, "kernels": {}}
    q = nbx.zeros((1, 2, 8, 128), dtype=nbx.bfloat16, device=TEST_DEVICE)
    assert len(wgmma_candidates(facts, q, q, q, q, None, 0.1, False)) >= 2
    # the warp-specialised settings need rows on 16 bytes: not 2 bytes on, nor 132 elements apart
    assert any(c["KERNEL"] == "wgmma_ws" for c in wgmma_candidates(facts, q, q, q, q, None, 0.1, False))
    shifted = nbx.zeros((2 * 8 * 128 + 1,), dtype=nbx.bfloat16, device=TEST_DEVICE)[1:].view(1, 2, 8, 128)
    padded = nbx.zeros((1, 2, 8, 132), dtype=nbx.bfloat16, device=TEST_DEVICE)[..., :128]
    for unaligned in (shifted, padded):
        offered = wgmma_candidates(facts, unaligned, q, q, q, None, 0.1, False)
        assert offered and not any(c["KERNEL"] == "wgmma_ws" for c in offered)
    for changed in (dict(facts={"matrix_unit": {"instruction": "mma"}, "kernels": {}}),
                    dict(facts={"matrix_unit": {"instruction": "wgmma"}, "kernels": {"interpreted": True}}),
                    dict(q=q.float()), dict(q=nbx.zeros((1, 2, 8, 80), dtype=nbx.bfloat16, device=TEST_DEVICE)),
                    dict(q=nbx.zeros((1, 2, 128, 8), dtype=nbx.bfloat16, device=TEST_DEVICE).transpose(2, 3)),
                    dict(mask=q), dict(scale=-0.1), dict(index_64=True)):
        args = dict(facts=facts, q=q, mask=None, scale=0.1, index_64=False) | changed
        assert wgmma_candidates(args["facts"], args["q"], q, q, q, args["mask"], args["scale"],
                                args["index_64"]) == [], changed


def test_float32_on_hopper_offers_query_tiles_that_spread_a_short_sequence():
    """True float32 (FMA dots, any tile side) adds short query tiles: 128 causal queries of 12 heads, 12
    programs in 128-row tiles, reach 96 in 16-row ones. Half precision and TF32 keep their tiles."""
    from nbxtensor.device.facts import load as load_facts
    from nbxtensor.ops import matmul as matmul_ops
    from nbxtensor.ops.attention import forward_candidates
    hopper = load_facts("hopper")
    float32 = forward_candidates(hopper, 128, 128, 64, nbx.float32, 12)
    assert max(12 * -(-128 // c["BLOCK_M"]) for c in float32) >= 96
    assert min(c["BLOCK_M"] for c in forward_candidates(hopper, 128, 128, 64, nbx.bfloat16, 12)) == 64
    try:
        matmul_ops.set_float32_matmul_precision("high")
        assert min(c["BLOCK_M"] for c in forward_candidates(hopper, 128, 128, 64, nbx.float32, 12)) == 64
    finally:
        matmul_ops.set_float32_matmul_precision("highest")


def _hopper_parts_settings():
    from nbxtensor.ops.attention import _FORWARD_PARTS_SHAPES
    return [(bound, dict(BLOCK_M=bm, BLOCK_N=bn, num_warps=warps, num_stages=stages))
            for bound, shapes in _FORWARD_PARTS_SHAPES.items() for bm, bn, warps, stages in shapes]


def test_float32_on_hopper_times_parts_beside_true_float32(monkeypatch):
    """Where the facts list bfloat16 matrix units, a float32 key is flagged bf16_parts and lists the
    true-float32 settings first (the untuned choice stays), then the parts' (``PRECISION``); half precision,
    TF32 and ``float32_planes = False`` keep their keys and settings."""
    from nbxtensor.device.facts import load as load_facts
    from nbxtensor.ops import matmul as matmul_ops
    from nbxtensor.ops.attention import PARTS, _prefill_key, forward_candidates
    hopper = load_facts("hopper")
    offered = forward_candidates(hopper, 512, 512, 64, nbx.float32, 12)
    precisions = [c.get("PRECISION") for c in offered]
    assert precisions[0] is None and PARTS in precisions
    assert precisions == sorted(precisions, key=lambda p: p == PARTS)
    meta = nbx.empty((4, 12, 512, 64), dtype=nbx.float32, device="meta")
    key = _prefill_key(meta, meta, meta, None, 0, meta, 0.125, False, hopper)[0]
    assert key.endswith("|bf16_parts=1")
    assert "bf16_parts" not in _prefill_key(meta.bfloat16(), meta.bfloat16(), meta.bfloat16(), None, 0,
                                            meta.bfloat16(), 0.125, False, hopper)[0]
    assert PARTS not in [c.get("PRECISION") for c in forward_candidates(hopper, 512, 512, 64, nbx.bfloat16, 12)]
    for switch in ("high", "off"):
        try:
            if switch == "high":
                matmul_ops.set_float32_matmul_precision("high")
            else:
                matmul_ops.backends.cuda.matmul.float32_planes = False
            assert "bf16_parts" not in _prefill_key(meta, meta, meta, None, 0, meta, 0.125, False, hopper)[0]
            assert PARTS not in [c.get("PRECISION") for c in forward_candidates(hopper, 512, 512, 64, nbx.float32)]
        finally:
            matmul_ops.set_float32_matmul_precision("highest")
            matmul_ops.backends.cuda.matmul.float32_planes = True
    # the CPU's facts list no matrix unit: its keys and its one setting are as before
    cpu = load_facts("cpu")
    assert "bf16_parts" not in _prefill_key(meta, meta, meta, None, 0, meta, 0.125, False, cpu)[0]
    assert "PRECISION" not in forward_candidates(cpu, 512, 512, 64, nbx.float32, 12)[0]


@pytest.mark.skipif(TEST_DEVICE != "cpu", reason="forces a GPU setting on the interpreter")
@pytest.mark.parametrize("bound, setting", _hopper_parts_settings())
def test_each_gpu_setting_on_parts(rng, monkeypatch, bound, setting):
    """Each setting of float32 on parts a GPU times, forced on the interpreter (and so recorded for the
    compile check): queries and keys ending inside their tiles, causal and not, grouped-query heads, a
    head dim short of its bound."""
    from nbxtensor.ops import attention as attention_ops
    from nbxtensor.ops.attention import PARTS
    _float32_on_parts(monkeypatch)
    monkeypatch.setattr(attention_ops, "interpreted_forward_config",
                        lambda length, keys, heads: dict(setting, PRECISION=PARTS))
    precisions = _launched_precisions(monkeypatch)
    attention_ops._attention_plans.clear()
    head_dim = {64: 40, 128: 128}[bound]
    try:
        q, k, v = _inputs(rng, (1, 4, 45, head_dim), (1, 2, 70, head_dim), (1, 2, 70, head_dim))
        for causal in (False, True):
            _close(_sdpa(q, k, v, is_causal=causal, enable_gqa=True), reference(q, k, v, causal=causal))
    finally:
        attention_ops._attention_plans.clear()
    assert precisions == [PARTS, PARTS]


def test_the_parts_form_is_what_runs(rng, monkeypatch):
    """The forced parts form launches with its PRECISION, and its results differ in the last bits from
    true float32's (another order of roundings), both within float32's tolerance of the reference."""
    from nbxtensor.ops import attention as attention_ops
    from nbxtensor.ops.attention import PARTS
    def first_of(precision):
        """Tuning takes the first setting of ``precision`` (None: true float32) on every device, where a GPU
        would time them all (its launches counted) and keep the fastest, of either precision."""
        monkeypatch.setattr(attention_ops.tuning, "choose_timed", lambda key, facts, candidates, prepare: next(
            c for c in (candidates() if callable(candidates) else candidates) if c.get("PRECISION") == precision))
    q, k, v = _inputs(rng, (2, 3, 33, 48), (2, 3, 33, 48), (2, 3, 33, 48))
    mask = _mask(rng, "additive", (33, 33))
    attention_ops._attention_plans.clear()
    first_of(None)
    true_float32 = _sdpa(q, k, v, mask).numpy()
    _float32_on_parts(monkeypatch)
    first_of(PARTS)
    precisions = _launched_precisions(monkeypatch)
    attention_ops._attention_plans.clear()
    try:
        parts = _sdpa(q, k, v, mask).numpy()
    finally:
        attention_ops._attention_plans.clear()
    assert precisions == [PARTS]
    assert not np.array_equal(parts, true_float32)
    for out in (parts, true_float32):
        np.testing.assert_allclose(out, reference(q, k, v, mask), atol=TOL["float32"], rtol=TOL["float32"])


@pytest.mark.skipif(TEST_DEVICE != "cpu", reason="forces a GPU setting on the interpreter")
@pytest.mark.parametrize("block_m,block_n", [(16, 32), (32, 64)])
def test_short_query_tiles_against_longer_key_tiles(rng, monkeypatch, block_m, block_n):
    """Query tiles shorter than key tiles (the float32 FMA settings): a causal tile's mask starts inside a
    key tile, and queries and keys end inside their tiles."""
    from nbxtensor.ops import attention as attention_ops
    monkeypatch.setattr(attention_ops, "interpreted_forward_config",
                        lambda length, keys, heads: dict(BLOCK_M=block_m, BLOCK_N=block_n, num_warps=1,
                                                         num_stages=1))
    attention_ops._attention_plans.clear()
    try:
        q, k, v = _inputs(rng, (1, 3, 45, 64), (1, 3, 45, 64), (1, 3, 45, 64))
        for causal in (False, True):
            _close(_sdpa(q, k, v, is_causal=causal), reference(q, k, v, causal=causal))
    finally:
        attention_ops._attention_plans.clear()


# ---- decode --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("head_dim,ratio", [(64, 1), (128, 4), (80, 8)])
def test_decode_matches_dense_path(rng, head_dim, ratio):
    """One query row takes the split-K kernel; its rows agree with the prefill kernel's first row."""
    q, k, v = _inputs(rng, (2, 2 * ratio, 2, head_dim), (2, 2, 150, head_dim), (2, 2, 150, head_dim))
    dense = _sdpa(q, k, v, enable_gqa=True).numpy()[:, :, :1]
    decoded = _sdpa(q[:, :, :1], k, v, enable_gqa=True).numpy()
    np.testing.assert_allclose(decoded, dense, atol=2e-5, rtol=2e-5)
    _close(_sdpa(q[:, :, :1], k, v, enable_gqa=True), reference(q[:, :, :1], k, v))


def test_decode_with_mask(rng):
    q, k, v = _inputs(rng, (2, 4, 1, 32), (2, 4, 70, 32), (2, 4, 70, 32))
    for kind in ("bool", "additive"):
        mask = _mask(rng, kind, (2, 1, 1, 70))
        _close(_sdpa(q, k, v, mask), reference(q, k, v, mask))


def test_decode_is_deterministic(rng):
    q, k, v = _inputs(rng, (2, 8, 1, 64), (2, 2, 300, 64), (2, 2, 300, 64), "bfloat16")
    first = _sdpa(q, k, v, enable_gqa=True).numpy()
    second = _sdpa(q, k, v, enable_gqa=True).numpy()
    assert first.tobytes() == second.tobytes()
    _close(_sdpa(q, k, v, enable_gqa=True), reference(q, k, v), "bfloat16")


# ---- paged attention and the cache append ---------------------------------------------------------------
def _paged_setup(rng, seq_lens, kv_heads=2, head_dim=32, block_size=8, dtype="float32"):
    batch = len(seq_lens)
    max_blocks = max(1, -(-max(seq_lens) // block_size))
    num_blocks = batch * max_blocks + 3
    cast = NUMPY_TYPE[dtype]
    key_cache = rng.standard_normal((num_blocks, block_size, kv_heads, head_dim)).astype(np.float32).astype(cast)
    value_cache = rng.standard_normal((num_blocks, block_size, kv_heads, head_dim)).astype(np.float32).astype(cast)
    table = rng.permutation(num_blocks)[:batch * max_blocks].reshape(batch, max_blocks).astype(np.int32)
    return key_cache, value_cache, table


def _gather(cache, table_row, length):
    """(kv_heads, length, dim): the sequence's keys in order."""
    block_size = cache.shape[1]
    rows = [cache[table_row[j // block_size], j % block_size] for j in range(length)]
    return np.stack(rows, axis=1) if rows else np.zeros((cache.shape[2], 0, cache.shape[3]), cache.dtype)


@pytest.mark.parametrize("ratio", [1, 4])
def test_paged_attention_matches_dense(rng, ratio):
    seq_lens = [37, 8, 1, 60]
    key_cache, value_cache, table = _paged_setup(rng, seq_lens)
    q = rng.standard_normal((len(seq_lens), 2 * ratio, 32)).astype(np.float32)
    out = F.paged_attention(to_nbx(q), to_nbx(key_cache), to_nbx(value_cache), to_nbx(table),
                            to_nbx(np.array(seq_lens, np.int32))).numpy()
    for b, length in enumerate(seq_lens):
        k, v = _gather(key_cache, table[b], length), _gather(value_cache, table[b], length)
        dense = _sdpa(q[b][:, None], k, v, enable_gqa=True).numpy()[:, 0]
        np.testing.assert_allclose(out[b], dense, atol=2e-5, rtol=2e-5)
        np.testing.assert_allclose(out[b], reference(q[b][:, None], k, v)[:, 0], atol=2e-5, rtol=2e-5)


def test_paged_attention_empty_sequence_and_bf16(rng):
    seq_lens = [0, 19]
    key_cache, value_cache, table = _paged_setup(rng, seq_lens, dtype="bfloat16")
    q = rng.standard_normal((2, 2, 32)).astype(ml_dtypes.bfloat16)
    args = (to_nbx(q), to_nbx(key_cache), to_nbx(value_cache), to_nbx(table), to_nbx(np.array(seq_lens, np.int64)))
    out = F.paged_attention(*args).numpy().astype(np.float64)
    assert np.all(out[0] == 0)
    k, v = _gather(key_cache, table[1], 19), _gather(value_cache, table[1], 19)
    np.testing.assert_allclose(out[1], reference(q[1][:, None], k, v)[:, 0], atol=2e-2, rtol=2e-2)
    assert F.paged_attention(*args).numpy().tobytes() == F.paged_attention(*args).numpy().tobytes()


def test_decode_split_fills_the_device_by_kv_heads_never_by_batch():
    """On a compiling device the untuned decode plan (paged decode's) splits a sequence's keys so that its
    kv heads x splits give about two waves of programs: one sequence over 4 kv heads at 32k keys takes 64
    splits (16 left 64 programs for 132 SMs), many heads keep 16, past 16 a split keeps 256 keys (8k
    keys: 32; 4k: 16, as large batches run fastest) and below it 128 (128 keys: one split; 1500: 11); the
    batch never enters."""
    from nbxtensor.device.facts import load
    from nbxtensor.ops.attention import decode_candidates, decode_plan, filling_splits
    hopper = load("hopper")
    assert [filling_splits(heads, 32768, hopper) for heads in (1, 4, 8, 12, 32, 64)] == [64, 64, 64, 32, 16, 16]
    assert [filling_splits(1, keys, hopper) for keys in (100, 128, 1024, 1500, 2048, 4096, 8192, 16384)] == \
        [1, 1, 8, 11, 16, 16, 32, 64]
    first = decode_candidates(32768, 128, hopper, 4)[0]
    assert decode_plan(32768, hopper, first) == (64, 512, 64)
    assert decode_candidates(4096, 256, hopper, 8) == [dict(BLOCK_N=32, SPLITS=16, num_warps=4, num_stages=None)]


def test_paged_attention_at_the_most_splits_matches_and_is_batch_invariant(rng, monkeypatch):
    """Paged decode at ``_DECODE_MOST_SPLITS`` key splits (forced: the interpreter plans 4) matches the
    float64 reference, and a sequence's row has the same bits alone as in a batch."""
    from nbxtensor.ops import attention as attention_ops
    most = attention_ops._DECODE_MOST_SPLITS
    monkeypatch.setattr(attention_ops, "decode_candidates", lambda keys, head_dim, facts, kv_heads: [
        dict(BLOCK_N=16, SPLITS=most, num_warps=4, num_stages=None)])
    attention_ops._attention_plans.clear()
    seq_lens = [1024, 700, 3]
    key_cache, value_cache, table = _paged_setup(rng, seq_lens, block_size=16)
    q = rng.standard_normal((len(seq_lens), 8, 32)).astype(np.float32)
    lens = np.array(seq_lens, np.int32)
    out = F.paged_attention(to_nbx(q), to_nbx(key_cache), to_nbx(value_cache), to_nbx(table), to_nbx(lens)).numpy()
    facts = backend_for(nbx.device("cpu")).facts
    assert attention_ops.decode_plan(table.shape[1] * 16, facts, dict(BLOCK_N=16, SPLITS=most)) == (16, 16, most)
    for b, length in enumerate(seq_lens):
        k, v = _gather(key_cache, table[b], length), _gather(value_cache, table[b], length)
        # float32 softmax over up to 1024 keys, split in 64 partial sums combined in float32
        np.testing.assert_allclose(out[b], reference(q[b][:, None], k, v)[:, 0], atol=3e-5, rtol=3e-5)
    alone = F.paged_attention(to_nbx(q[1:2]), to_nbx(key_cache), to_nbx(value_cache), to_nbx(table[1:2]),
                              to_nbx(lens[1:2])).numpy()
    assert alone.tobytes() == out[1:2].tobytes()


def test_kv_cache_append_then_attend(rng):
    block_size, kv_heads, head_dim = 4, 2, 16
    key_cache = np.zeros((6, block_size, kv_heads, head_dim), np.float32)
    value_cache = np.zeros_like(key_cache)
    keys = rng.standard_normal((5, kv_heads, head_dim)).astype(np.float32)
    values = rng.standard_normal((5, kv_heads, head_dim)).astype(np.float32)
    slots = np.array([9, 10, -1, 3, 23], np.int32)  # -1: a padding token, skipped
    kc, vc = to_nbx(key_cache), to_nbx(value_cache)
    F.kv_cache_append(to_nbx(keys), to_nbx(values), kc, vc, to_nbx(slots))
    expected_k, expected_v = key_cache.copy(), value_cache.copy()
    for t, slot in enumerate(slots):
        if slot >= 0:
            expected_k[slot // block_size, slot % block_size] = keys[t]
            expected_v[slot // block_size, slot % block_size] = values[t]
    np.testing.assert_array_equal(kc.numpy(), expected_k)
    np.testing.assert_array_equal(vc.numpy(), expected_v)
    # a sequence whose pages are 2 then 0: positions 0..5 are slots 8, 9, 10, 11, 0, 1
    table = np.array([[2, 0]], np.int32)
    q = rng.standard_normal((1, 2, head_dim)).astype(np.float32)
    out = F.paged_attention(to_nbx(q), kc, vc, to_nbx(table), to_nbx(np.array([6], np.int32))).numpy()
    k, v = _gather(expected_k, table[0], 6), _gather(expected_v, table[0], 6)
    np.testing.assert_allclose(out[0], reference(q[0][:, None], k, v)[:, 0], atol=2e-5, rtol=2e-5)


# ---- rotary embedding ----------------------------------------------------------------------------------
def _rotary_reference(x, cos, sin, positions, interleaved):
    x = np.asarray(x, np.float64)
    half = cos.shape[1]
    c = np.asarray(cos, np.float64)[positions]
    s = np.asarray(sin, np.float64)[positions]
    out = x.copy()
    if interleaved:
        x1, x2 = x[..., 0:2 * half:2], x[..., 1:2 * half:2]
        out[..., 0:2 * half:2], out[..., 1:2 * half:2] = x1 * c - x2 * s, x2 * c + x1 * s
    else:
        x1, x2 = x[..., :half], x[..., half:2 * half]
        out[..., :half], out[..., half:2 * half] = x1 * c - x2 * s, x2 * c + x1 * s
    return out


def _tables(max_positions, half):
    angles = np.arange(max_positions)[:, None] * (10000.0 ** (-np.arange(half) / half))[None, :]
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("head_dim,rotary_dim", [(64, 64), (80, 32)])
def test_rotary_forms_and_offsets(rng, interleaved, head_dim, rotary_dim):
    cos, sin = _tables(40, rotary_dim // 2)
    x = rng.standard_normal((2, 3, 7, head_dim)).astype(np.float32)
    positions = np.arange(7)
    out = F.rotary_embedding(to_nbx(x), to_nbx(cos), to_nbx(sin), interleaved=interleaved)
    np.testing.assert_allclose(out.numpy(), _rotary_reference(x, cos, sin, positions, interleaved),
                               atol=1e-6, rtol=1e-6)
    shifted = F.rotary_embedding(to_nbx(x), to_nbx(cos), to_nbx(sin), positions=5, interleaved=interleaved)
    np.testing.assert_allclose(shifted.numpy(), _rotary_reference(x, cos, sin, positions + 5, interleaved),
                               atol=1e-6, rtol=1e-6)
    # per-sequence positions in a (B, L, H, E) layout
    tokens = rng.standard_normal((2, 7, 3, head_dim)).astype(np.float32)
    per_token = rng.integers(0, 40, (2, 7, 1)).astype(np.int64)
    out = F.rotary_embedding(to_nbx(tokens), to_nbx(cos), to_nbx(sin), positions=to_nbx(per_token),
                             interleaved=interleaved)
    np.testing.assert_allclose(out.numpy(), _rotary_reference(tokens, cos, sin, per_token, interleaved),
                               atol=1e-6, rtol=1e-6)


def test_rotary_bf16(rng):
    cos, sin = _tables(16, 8)
    x = rng.standard_normal((4, 16)).astype(ml_dtypes.bfloat16)
    out = F.rotary_embedding(to_nbx(x), to_nbx(cos), to_nbx(sin))
    assert out.dtype.name == "bfloat16"
    expected = _rotary_reference(x, cos, sin, np.arange(4), False)
    np.testing.assert_allclose(out.numpy().astype(np.float64), expected, atol=2 ** -7, rtol=2 ** -7)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_rotary_append_rotates_and_fills_the_caches(rng, dtype):
    """One launch gives rotary_embedding's q and k and kv_cache_append's caches, for q, k and v taken as
    views of one projection's output (rows strided by the whole width) and a partial rotary dim."""
    tokens, q_heads, kv_heads, head_dim, rotary_dim, block_size = 5, 4, 2, 16, 8, 4
    numpy_type = NUMPY_TYPE[dtype]
    cos, sin = _tables(40, rotary_dim // 2)
    qkv = rng.standard_normal((tokens, (q_heads + 2 * kv_heads) * head_dim)).astype(numpy_type)
    q_np = qkv[:, :q_heads * head_dim].reshape(tokens, q_heads, head_dim)
    k_np = qkv[:, q_heads * head_dim:(q_heads + kv_heads) * head_dim].reshape(tokens, kv_heads, head_dim)
    v_np = qkv[:, (q_heads + kv_heads) * head_dim:].reshape(tokens, kv_heads, head_dim)
    positions = np.array([[3], [17], [0], [39], [8]], np.int32)
    slots = np.array([9, 10, -1, 3, 23], np.int32)  # -1: a padding token, its cache rows untouched
    fill = np.full((6, block_size, kv_heads, head_dim), 7, numpy_type)
    key_cache, value_cache = to_nbx(fill), to_nbx(fill.copy())
    qkv_t = to_nbx(qkv)
    q_width, kv_width = q_heads * head_dim, kv_heads * head_dim
    views = (qkv_t[:, :q_width].view(tokens, q_heads, head_dim),
             qkv_t[:, q_width:q_width + kv_width].view(tokens, kv_heads, head_dim),
             qkv_t[:, q_width + kv_width:].view(tokens, kv_heads, head_dim))
    q_out, k_out = F.rotary_append(*views, to_nbx(cos), to_nbx(sin), to_nbx(positions), key_cache, value_cache,
                                   to_nbx(slots))
    # float32: a product and a sum of float32 values, a few ulp from float64; bfloat16: one rounding of the
    # float32 value, half an ulp (2^-8 relative) plus that
    tolerance = 1e-6 if dtype == "float32" else 2 ** -7
    expected_q = _rotary_reference(q_np, cos, sin, positions[:, 0, None], False)
    expected_k = _rotary_reference(k_np, cos, sin, positions[:, 0, None], False)
    np.testing.assert_allclose(q_out.numpy().astype(np.float64), expected_q, atol=tolerance, rtol=tolerance)
    np.testing.assert_allclose(k_out.numpy().astype(np.float64), expected_k, atol=tolerance, rtol=tolerance)
    # the caches hold the very bits of k_out and v
    expected_keys, expected_values = fill.copy(), fill.copy()
    for t, slot in enumerate(slots):
        if slot >= 0:
            expected_keys[slot // block_size, slot % block_size] = k_out.numpy()[t]
            expected_values[slot // block_size, slot % block_size] = v_np[t]
    assert key_cache.numpy().tobytes() == expected_keys.tobytes()
    assert value_cache.numpy().tobytes() == expected_values.tobytes()
    # as the separate ops compute it
    alone = F.rotary_embedding(to_nbx(np.ascontiguousarray(q_np)), to_nbx(cos), to_nbx(sin),
                               positions=to_nbx(positions.reshape(tokens, 1)))
    assert alone.numpy().tobytes() == q_out.numpy().tobytes()


def test_rotary_append_refuses_what_does_not_fit(rng):
    cos, sin = _tables(8, 4)
    q = to_nbx(rng.standard_normal((3, 4, 8)).astype(np.float32))
    k = to_nbx(rng.standard_normal((3, 2, 8)).astype(np.float32))
    cache = to_nbx(np.zeros((2, 4, 2, 8), np.float32))
    slots, positions = to_nbx(np.arange(3, dtype=np.int32)), to_nbx(np.arange(3, dtype=np.int32))
    tables = (to_nbx(cos), to_nbx(sin))
    with pytest.raises(RuntimeError, match=r"rotary_append: key_cache must be float32.*\(2, 4, 3, 8\)"):
        F.rotary_append(q, k, k, *tables, positions, to_nbx(np.zeros((2, 4, 3, 8), np.float32)), cache, slots)
    with pytest.raises(RuntimeError, match=r"rotary_append: k must be float32 \(tokens, kv_heads, dim\)"):
        F.rotary_append(q, k.half(), k, *tables, positions, cache, cache, slots)
    with pytest.raises(RuntimeError, match=r"rotary_append: slots must be integers, one per token \(3\)"):
        F.rotary_append(q, k, k, *tables, positions, cache, cache, to_nbx(np.arange(4, dtype=np.int32)))
    with pytest.raises(RuntimeError, match=r"rotary_dim at most q's dim 8"):
        F.rotary_append(q, k, k, *_tables_as_nbx(8, 5), positions, cache, cache, slots)


def _tables_as_nbx(max_positions, half):
    return tuple(to_nbx(t) for t in _tables(max_positions, half))


# ---- errors and registry ---------------------------------------------------------------------------------
def test_error_paths(rng):
    q, k, v = _inputs(rng, (1, 6, 4, 16), (1, 4, 5, 16), (1, 4, 5, 16))
    with pytest.raises(NotImplementedError, match="dropout_p"):
        _sdpa(q, q, q, dropout_p=0.1)
    with pytest.raises(RuntimeError, match=r"multiple.*\(1, 6, 4, 16\).*\(1, 4, 5, 16\)"):
        _sdpa(q, k, v, enable_gqa=True)
    with pytest.raises(RuntimeError, match=r"\(1, 4, 5, 16\)"):
        _sdpa(q, k, v)
    with pytest.raises(RuntimeError, match=r"head dim 16 vs 8"):
        _sdpa(q, q[..., :8], q)
    with pytest.raises(RuntimeError, match=r"differ in length"):
        _sdpa(q, k, v[:, :, :3])
    with pytest.raises(RuntimeError, match=r"attn_mask \(3, 5\)"):
        _sdpa(q[:, :4], k, v, np.ones((3, 5), bool))
    with pytest.raises(RuntimeError, match="share a dtype"):
        _sdpa(q, q.astype(np.float16), q)
    with pytest.raises(RuntimeError, match="multiple"):
        F.paged_attention(to_nbx(q[0, :3, :3]), *(to_nbx(np.zeros((2, 4, 2, 16), np.float32)),) * 2,
                          to_nbx(np.zeros((3, 1), np.int32)), to_nbx(np.zeros(3, np.int32)))


def test_registry_meta_and_cost():
    from nbxtensor.ops.registry import TensorMeta, lookup
    op = lookup("aten::scaled_dot_product_attention.default")
    f32 = nbx.float32
    q, k, v = TensorMeta((2, 8, 128, 64), f32), TensorMeta((2, 2, 256, 64), f32), TensorMeta((2, 2, 256, 48), f32)
    assert tuple(op.meta(q, k, v, enable_gqa=True).shape) == (2, 8, 128, 48)
    square = TensorMeta((2, 8, 256, 64), f32)
    assert op.cost(square, square, square).flops == 4 * 2 * 8 * 256 * 256 * 64


def test_decode_in_one_split_writes_its_output_in_one_launch(rng, monkeypatch):
    """A decode whose keys take one split normalises its state into the output itself: one launch, no
    partials, paged (an empty sequence among them) and dense, against the float64 reference; a sequence's
    row has the same bits alone as in a batch."""
    from nbxtensor.launch import capture
    from nbxtensor.ops import attention as attention_ops
    monkeypatch.setattr(attention_ops, "decode_candidates", lambda keys, head_dim, facts, kv_heads: [
        dict(BLOCK_N=64, SPLITS=1, num_warps=4, num_stages=None)])
    attention_ops._attention_plans.clear()
    seq_lens = [50, 0, 37]
    key_cache, value_cache, table = _paged_setup(rng, seq_lens, block_size=16)
    q = rng.standard_normal((3, 8, 32)).astype(np.float32)
    lens = np.array(seq_lens, np.int32)
    operands = (to_nbx(q), to_nbx(key_cache), to_nbx(value_cache), to_nbx(table), to_nbx(lens))
    F.paged_attention(*operands)
    with capture() as recorded:
        out = F.paged_attention(*operands).numpy()
    assert [launch[0].__name__ for launch in recorded.launches] == ["decode_partial"]
    assert np.all(out[1] == 0)
    for b in (0, 2):
        k, v = _gather(key_cache, table[b], seq_lens[b]), _gather(value_cache, table[b], seq_lens[b])
        np.testing.assert_allclose(out[b], reference(q[b][:, None], k, v)[:, 0], atol=2e-5, rtol=2e-5)
    alone = F.paged_attention(to_nbx(q[2:]), to_nbx(key_cache), to_nbx(value_cache), to_nbx(table[2:]),
                              to_nbx(lens[2:])).numpy()
    assert alone.tobytes() == out[2:].tobytes()
    qd, kd, vd = _inputs(rng, (2, 8, 1, 32), (2, 2, 40, 32), (2, 2, 40, 32))
    with capture() as recorded:
        dense = _sdpa(qd, kd, vd, enable_gqa=True)
    assert [launch[0].__name__ for launch in recorded.launches] == ["decode_partial"]
    _close(dense, reference(qd, kd, vd))
    attention_ops._attention_plans.clear()


def test_decode_temporaries_share_one_allocation_in_aligned_pieces():
    """A decode step's partial results are carved from one buffer: every piece 16-byte aligned, none
    overlapping, each with its own shape and dtype."""
    from nbxtensor.allocation import Workspace
    f32, f16 = nbx.float32, nbx.float16
    workspace = Workspace({"a": ((3, 5), f32), "b": ((7,), f16), "c": ((2, 2), f32)})
    tensors = {}
    workspace.allocate(nbx.device(TEST_DEVICE), tensors)
    spans = sorted((t.data_ptr(), t.data_ptr() + t.nbytes) for t in tensors.values())
    assert all(start % 16 == 0 for start, _ in spans) and all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    assert len({t._storage for t in tensors.values()}) == 1
    assert [(tuple(t.shape), t.dtype) for t in tensors.values()] == [((3, 5), f32), ((7,), f16), ((2, 2), f32)]
    tensors["b"].fill_(2.0)
    assert tensors["b"].numpy().tolist() == [2.0] * 7


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_rotate_half_embedding_of_a_permuted_input(rng, dtype):
    """x * cos + rotate_half(x) * sin against float64, x a permuted view (B, H, S, D) as transformers has it
    and cos, sin (B, 1, S, D) broadcast over heads; halves of cos need not match. Tolerance: one rounding
    of the output's dtype on values of a few units, from float32 arithmetic on exact inputs."""
    from nbxtensor.ops.attention import rotate_half_embedding
    npdt = nbx.get_dtype(dtype).numpy
    x = rng.standard_normal((2, 5, 3, 8)).astype(npdt)  # (B, S, H, D)
    cos, sin = (rng.standard_normal((2, 1, 5, 8)).astype(npdt) for _ in range(2))
    got = rotate_half_embedding(to_nbx(x).permute(0, 2, 1, 3), to_nbx(cos), to_nbx(sin))
    assert tuple(got.shape) == (2, 3, 5, 8) and got.stride() == (120, 8, 24, 1)  # laid out as x, as torch would
    x64, c64, s64 = (a.astype(np.float64) for a in (x.transpose(0, 2, 1, 3), cos, sin))
    rotated = np.concatenate([-x64[..., 4:], x64[..., :4]], -1)
    tol = 4 * (2.0 ** -7 if dtype == "bfloat16" else 2.0 ** -22)
    np.testing.assert_allclose(got.numpy().astype(np.float64), x64 * c64 + rotated * s64, rtol=tol, atol=tol)
    with pytest.raises(RuntimeError, match="cos must be"):
        rotate_half_embedding(to_nbx(x), to_nbx(cos[:, :, :4]), to_nbx(sin))


# ---- soft-capped and windowed attention (Gemma 2, Mistral), causal prefill from an offset ---------------
def capped_reference(q, k, v, softcap=None, window=None, query_offset=0):
    """Causal attention of queries at positions query_offset + i in float64: scores capped at
    softcap * tanh(s / softcap), keys j <= p seen, and j > p - window with a window."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    k = np.repeat(k, q.shape[0] // k.shape[0], axis=0)
    v = np.repeat(v, q.shape[0] // v.shape[0], axis=0)
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if softcap is not None:
        scores = softcap * np.tanh(scores / softcap)
    position = query_offset + np.arange(q.shape[1])[:, None]
    key = np.arange(k.shape[1])[None, :]
    seen = (key <= position) & ((key > position - window) if window is not None else True)
    scores = np.where(seen, scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    return weights / weights.sum(-1, keepdims=True) @ v


@pytest.mark.parametrize("softcap, window, query_offset", [(None, None, 0), (0.5, None, 0), (None, 5, 0),
                                                           (0.5, 5, 0), (None, None, 13), (0.8, 7, 13)])
def test_prefill_attention_caps_windows_and_offsets(rng, softcap, window, query_offset, forward_kernel):
    """A cap of 0.5 bounds scores of size ~1 hard, so an uncapped kernel misses the reference by far more
    than the float32 tolerance; windows of 5 and 7 cut across 16-key tiles of the key-tiled kernel."""
    length = 19
    keys = query_offset + length
    q, k, v = _inputs(rng, (4, length, 32), (2, keys, 32), (2, keys, 32))
    out = F.prefill_attention(to_nbx(q), to_nbx(k), to_nbx(v), softcap=softcap, window=window,
                              query_offset=query_offset)
    _close(out, capped_reference(q, k, v, softcap, window, query_offset))


@pytest.mark.parametrize("softcap, window", [(None, 5), (0.5, None), (0.5, 12)])
def test_paged_attention_caps_and_windows(rng, softcap, window):
    seq_lens = [37, 8, 1, 60]
    key_cache, value_cache, table = _paged_setup(rng, seq_lens)
    q = rng.standard_normal((len(seq_lens), 4, 32)).astype(np.float32)
    out = F.paged_attention(to_nbx(q), to_nbx(key_cache), to_nbx(value_cache), to_nbx(table),
                            to_nbx(np.array(seq_lens, np.int32)), softcap=softcap, window=window).numpy()
    for b, length in enumerate(seq_lens):
        k, v = _gather(key_cache, table[b], length), _gather(value_cache, table[b], length)
        expected = capped_reference(q[b][:, None], k, v, softcap, window, length - 1)[:, 0]
        np.testing.assert_allclose(out[b], expected, atol=2e-5, rtol=2e-5)


def test_prefill_and_paged_attention_plan_once_per_layout(rng, monkeypatch):
    """A repeated call of either op with operands of one layout goes to its plan (its meta rule and launch
    planning run once) and reads that call's operands and table values."""
    from nbxtensor.ops import attention as attention_ops
    planned = []
    for name in ("_plan_prefill", "_plan_paged"):
        make = getattr(attention_ops, name)
        monkeypatch.setattr(attention_ops, name, lambda *args, _make=make, _name=name: planned.append(_name)
                            or _make(*args))
    attention_ops._attention_plans.clear()
    for _ in range(2):
        q, k, v = _inputs(rng, (4, 6, 32), (2, 9, 32), (2, 9, 32))
        out = F.prefill_attention(to_nbx(q), to_nbx(k), to_nbx(v), softcap=0.5, window=5, query_offset=3)
        _close(out, capped_reference(q, k, v, 0.5, 5, 3))
        seq_lens = [int(n) for n in rng.integers(1, 30, 3)]
        key_cache, value_cache, table = _paged_setup(rng, [29, 29, 29])
        query = rng.standard_normal((3, 4, 32)).astype(np.float32)
        paged = F.paged_attention(to_nbx(query), to_nbx(key_cache), to_nbx(value_cache), to_nbx(table),
                                  to_nbx(np.array(seq_lens, np.int32))).numpy()
        for b, length in enumerate(seq_lens):
            keys, values = _gather(key_cache, table[b], length), _gather(value_cache, table[b], length)
            # float32 softmax over at most 29 keys and 32-long dot products
            np.testing.assert_allclose(paged[b], reference(query[b][:, None], keys, values)[:, 0], atol=2e-5,
                                       rtol=2e-5)
    assert planned == ["_plan_prefill", "_plan_paged"]


def test_cap_window_and_offset_errors(rng):
    q, k, v = (to_nbx(a) for a in _inputs(rng, (2, 3, 16), (2, 5, 16), (2, 5, 16)))
    with pytest.raises(RuntimeError, match="query_offset 0 plus the query's 3 positions must be the key's length 5"):
        F.prefill_attention(q, k, v)
    with pytest.raises(ValueError, match="softcap must be a positive"):
        F.prefill_attention(q, k, v, softcap=0.0, query_offset=2)
    with pytest.raises(ValueError, match="window must be an integer"):
        F.prefill_attention(q, k, v, window=0, query_offset=2)


@pytest.mark.parametrize("causal, mask_kind", [(False, None), (True, None), (False, "bool"), (False, "additive")])
def test_float64_attention_takes_the_product_form(rng, causal, mask_kind):
    """float64 query, key and value (no kernel takes them) run as softmax(q k^T scale + mask) v through the
    float64 products and softmax: against the float64 reference within a few ulps of the scores' scale (two
    products of K = 24 and 40 terms, a softmax over 40), where a float32 pass would miss by ~1e-7. The result
    stays float64; under enable_gqa the key and value heads repeat to the query's."""
    q, k, v = (rng.standard_normal(s) for s in ((2, 3, 17, 24), (2, 3, 40, 24), (2, 3, 40, 24)))
    mask = None
    if mask_kind == "bool":
        mask = rng.random((17, 40)) < 0.7
        mask[:, 0] = True
    elif mask_kind == "additive":
        mask = rng.standard_normal((2, 1, 17, 40))
    out = _sdpa(q, k, v, mask, is_causal=causal, scale=0.3)
    assert out.dtype is nbx.float64
    want = reference(q, k, v, mask, causal=causal, scale=0.3)
    np.testing.assert_allclose(out.numpy(), want, atol=1e-13, rtol=1e-12)
    grouped = _sdpa(q, k[:, :1], v[:, :1], mask, is_causal=causal, scale=0.3, enable_gqa=True)
    np.testing.assert_allclose(grouped.numpy(), reference(q, k[:, :1], v[:, :1], mask, causal=causal, scale=0.3),
                               atol=1e-13, rtol=1e-12)
    # keys of rank 2 broadcast over the query's heads, enable_gqa or not
    shared = _sdpa(q[0], k[0, 0], v[0, 0], enable_gqa=True)
    np.testing.assert_allclose(shared.numpy(), reference(q[0], k[0, :1], v[0, :1]), atol=1e-13, rtol=1e-12)


def test_grouped_query_heads_in_the_product_form(rng):
    """Heads past 256 under enable_gqa (refused before): the key and value heads repeat to the query's,
    as torch's math backend does; the cost rule declares the repeated heads among its temporaries and the
    key rule names the two products' keys."""
    from nbxtensor.ops.registry import TensorMeta, get
    q, k, v = _inputs(rng, (1, 4, 9, 264), (1, 2, 11, 264), (1, 2, 11, 264))
    out = _sdpa(q, k, v, enable_gqa=True)
    _close(out, reference(q, k, v), "float32")
    metas = [TensorMeta(t.shape, nbx.float32) for t in (q, k, v)]
    sdpa = get("scaled_dot_product_attention")
    repeated = 2 * 4 * 11 * 264 * 4
    assert sdpa.cost(*metas, enable_gqa=True).workspace >= sdpa.cost(*metas[:1], *(
        TensorMeta((1, 4, 11, 264), nbx.float32) for _ in range(2))).workspace + repeated
    on_meta = [nbx.empty(t.shape, dtype=nbx.float32, device="meta") for t in (q, k, v)]
    assert len(sdpa.key(backend_for(nbx.device("cpu")).facts, *on_meta, enable_gqa=True)) == 2
