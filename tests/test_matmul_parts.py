"""Float32 products on bfloat16 parts split in the GEMM's registers (one launch), against NumPy float64.

The parts of each operand sum to it exactly and the three part products left out are below 2^-24 of
the product, so the error is float32's accumulation: at most about 2K roundings of 2^-24 relative to
sum |a||b| (``test_matmul.assert_product_close``). Non-finite values must come out as the planes form
gives them, which is IEEE float32's pattern of NaN and inf.
"""
import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.device.facts import load as load_facts
from nbxtensor.kernels import matmul as K
from nbxtensor.ops import matmul as MM
from nbxtensor.ops import matmul_plans as MP
from nbxtensor.ops.plans import clear_all
from nbxtensor.ops.registry import TensorMeta, get

from .conftest import TEST_DEVICE, to_nbx
from .test_matmul import (TILE_VARIANTS, _f64, _inputs, _launched_kernels, _launched_precisions, _tile_config,
                          assert_product_close)

PARTS = K.PRECISION_BF16_PARTS.value


def _on_parts(monkeypatch):
    monkeypatch.setattr(MP, "_by_planes",
                        lambda dtype, facts: dtype.name == "float32" and MM.backends.cuda.matmul.float32_planes)


@pytest.fixture
def on_parts(monkeypatch):
    """Float32 products on bfloat16 parts whatever the device (the CPU's facts name no matrix unit)."""
    _on_parts(monkeypatch)
    clear_all()
    yield
    clear_all()


@pytest.fixture
def parts_in_registers(on_parts, first_candidate):
    """``on_parts``, in the first candidate on every device: the form that splits tiles in registers."""


def _planes_in_memory(monkeypatch):
    """From here on, float32 products on parts take the planes form (the one candidate left)."""
    listed = MM.gemm_candidates
    monkeypatch.setattr(MP, "gemm_candidates",
                        lambda *args, parts=False, **kwargs: [] if parts else listed(*args, **kwargs))
    clear_all()


def test_a_product_is_one_launch(rng, parts_in_registers, monkeypatch):
    kernels = _launched_kernels(monkeypatch)
    precisions = _launched_precisions(monkeypatch)
    x, weight, bias = (_inputs(rng, shape, "float32") for shape in ((24, 40), (12, 40), (12,)))
    got = nbx.nn.functional.linear(x, weight, bias)
    assert kernels == [K.gemm] and precisions == [PARTS]
    assert_product_close(got, _f64(x), _f64(weight).T, 40, "float32", bias_scale=(_f64(bias),))


# ragged extents: none a power of two, K past one interpreted K tile (512) with a remainder, N of 1 and 3
@pytest.mark.parametrize("m,k,n", [(17, 3, 29), (33, 130, 7), (20, 600, 9), (19, 77, 1), (65, 64, 100)])
def test_ragged_products_match_float64(rng, parts_in_registers, m, k, n):
    a, b = _inputs(rng, (m, k), "float32"), _inputs(rng, (k, n), "float32")
    assert_product_close(nbx.mm(a, b), _f64(a), _f64(b), k, "float32")


@pytest.mark.parametrize("layout", ["a_transposed", "b_transposed", "both_transposed", "strided_slices",
                                    "batch_of_one"])
def test_strided_and_transposed_operands_are_read_in_place(rng, parts_in_registers, layout):
    m, k, n = 21, 37, 18
    if layout == "a_transposed":
        a, b = _inputs(rng, (k, m), "float32").transpose(0, 1), _inputs(rng, (k, n), "float32")
    elif layout == "b_transposed":
        a, b = _inputs(rng, (m, k), "float32"), _inputs(rng, (n, k), "float32").transpose(0, 1)
    elif layout == "both_transposed":
        a, b = _inputs(rng, (k, m), "float32").transpose(0, 1), _inputs(rng, (n, k), "float32").transpose(0, 1)
    elif layout == "strided_slices":
        a, b = _inputs(rng, (2 * m, 3 * k), "float32")[::2, ::3], _inputs(rng, (k, 2 * n), "float32")[:, 1::2]
    else:
        a, b = _inputs(rng, (1, m, k), "float32"), _inputs(rng, (1, k, n), "float32")
    got = a @ b
    assert_product_close(got.reshape(m, n), _f64(a).reshape(m, k), _f64(b).reshape(k, n), k, "float32")


@pytest.mark.parametrize("bias_shape", [(18,), (21, 1), (21, 18)])
def test_alpha_beta_and_a_broadcast_bias_apply_once(rng, parts_in_registers, bias_shape):
    a, b, bias = (_inputs(rng, shape, "float32") for shape in ((21, 45), (45, 18), bias_shape))
    got = nbx.addmm(bias, a, b, beta=0.5, alpha=-2.0)
    assert_product_close(got, -2.0 * _f64(a), _f64(b), 45, "float32", bias_scale=(0.5 * _f64(bias),))
    batched = nbx.baddbmm(bias, a.unsqueeze(0), b.unsqueeze(0), beta=0.5, alpha=-2.0)
    np.testing.assert_array_equal(batched.numpy()[0], got.numpy())  # a batch of one is the same launch


@pytest.mark.parametrize("variant", [{}, *TILE_VARIANTS], ids=lambda v: "+".join(sorted(v)) or "gemm")
def test_gpu_tiles_split_every_k_step(rng, parts_in_registers, monkeypatch, variant):
    """16-wide tiles as GPU settings take them (the interpreter's one wide tile otherwise): several K steps
    with a ragged last one, several tiles a program, descriptors and pointers, a bias with alpha and beta."""
    monkeypatch.setattr(MP, "gemm_candidates", lambda *args, parts=False, **kwargs: [_tile_config(variant)])
    precisions = _launched_precisions(monkeypatch)
    x, b, bias = (_inputs(rng, shape, "float32") for shape in ((70, 40), (40, 24), (24,)))
    assert_product_close(nbx.addmm(bias, x, b, beta=0.5, alpha=2.0), 2 * _f64(x), _f64(b), 40, "float32",
                         bias_scale=(0.5 * _f64(bias),))
    odd, weight = _inputs(rng, (33, 45), "float32"), _inputs(rng, (19, 45), "float32")
    assert_product_close(nbx.nn.functional.linear(odd, weight), _f64(odd), _f64(weight).T, 45, "float32")
    assert precisions == [PARTS, PARTS]


def test_beta_zero_ignores_nan_in_the_added_input(rng, parts_in_registers):
    a, b = _inputs(rng, (20, 30), "float32"), _inputs(rng, (30, 10), "float32")
    bias = to_nbx(np.full((20, 10), np.nan, np.float32))
    assert_product_close(nbx.addmm(bias, a, b, beta=0), _f64(a), _f64(b), 30, "float32")


_SPECIAL_A = np.array([[np.inf, 1.0, 0.0], [1.0, np.nan, 2.0], [3.4e38, 1.0, 1.0], [1.0, 2.0, 3.0],
                       [-np.inf, 0.0, 1.0], [1e-40, 1.1754944e-38, -7.0e-20]] * 4, np.float32)  # 24 rows: no GEMV
_SPECIAL_B = np.array([[1.0, 0.0, 1.5], [2.0, 1.0, -1.0], [1.0, 1.0, 1.0]], np.float32)


def test_non_finite_values_come_out_as_the_planes_form_gives_them(parts_in_registers, monkeypatch):
    """inf times a finite value stays inf, NaN spreads, inf * 0 is NaN, values past bfloat16's largest
    split without overflow, subnormals keep their parts: the same as the planes form, and float32's."""
    registers = (to_nbx(_SPECIAL_A) @ to_nbx(_SPECIAL_B)).numpy()
    _planes_in_memory(monkeypatch)
    kernels = _launched_kernels(monkeypatch)
    memory = (to_nbx(_SPECIAL_A) @ to_nbx(_SPECIAL_B)).numpy()
    assert K.split_bf16_planes in kernels
    with np.errstate(all="ignore"):
        expected = _SPECIAL_A @ _SPECIAL_B
    for got in (registers, memory):
        np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
        np.testing.assert_array_equal(np.isposinf(got), np.isposinf(expected))
        np.testing.assert_array_equal(np.isneginf(got), np.isneginf(expected))
    finite = np.isfinite(expected)
    np.testing.assert_allclose(registers[finite], expected[finite], rtol=1e-6, atol=1e-37)
    np.testing.assert_allclose(registers[finite], memory[finite], rtol=1e-6, atol=1e-37)


def test_bad_operands_are_refused_as_on_other_routes(rng, parts_in_registers):
    a = _inputs(rng, (20, 30), "float32")
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        nbx.mm(a, _inputs(rng, (31, 5), "float32"))
    with pytest.raises(RuntimeError, match="same dtype"):
        nbx.mm(a, _inputs(rng, (30, 5), "float16"))
    with pytest.raises(RuntimeError, match="does not broadcast"):
        nbx.addmm(_inputs(rng, (7,), "float32"), a, _inputs(rng, (30, 5), "float32"))


def test_the_tuner_times_both_forms_under_one_key_on_a_gpu():
    """On Hopper a float32 product's key (flagged bf16_parts) lists matrix-unit tiles for the parts
    (descriptor variants among them) and, last, the planes form; a graph's census lists that
    key and the planes form's bfloat16 GEMM keys, which timing that form tunes."""
    hopper = load_facts("hopper")
    x, weight = TensorMeta((4096, 384), nbx.float32), TensorMeta((384, 384), nbx.float32)
    keys = get("linear").key(hopper, MP._meta(x.shape, x.dtype), MP._meta(weight.shape, weight.dtype))
    assert keys[0].startswith("gemm|B=1|M=4096|N=") and keys[0].endswith("|float32,float32|a_k_unit=1|b_n_unit=0"
                                                                          "|bf16_parts=1")
    assert len(keys) == 2 and "|bfloat16,float32|" in keys[1]
    parts = MM.gemm_candidates(hopper, 4096, 384, 384, nbx.float32, single=True, parts=True)
    fma = MM.gemm_candidates(hopper, 4096, 384, 384, nbx.float32, single=True)
    assert any(c.get("TMA") for c in parts) and not any(c.get("TMA") for c in fma)
    # at most 64 accumulator registers a thread: the tiles and their parts fit beside them unspilled
    assert all(c["BLOCK_M"] * c["BLOCK_N"] <= 64 * 32 * c["num_warps"] for c in parts)
    cpu = load_facts("cpu")
    assert len(MM.gemm_candidates(cpu, 4096, 384, 384, nbx.float32, parts=True)) == 1  # the interpreter's one


def test_a_device_that_times_the_planes_form_fastest_runs_it(rng, parts_in_registers, monkeypatch):
    """Whichever form the tuner returns is what runs: the planes form's three launches, or the one GEMM."""
    chosen = []

    def choose_planes(key, facts, candidates, prepare):
        listed = candidates()
        chosen.append((key, listed))
        return listed[-1] if "bf16_parts" in key else listed[0]
    monkeypatch.setattr(MP.tuning, "choose_timed", choose_planes)
    kernels = _launched_kernels(monkeypatch)
    a, b = _inputs(rng, (20, 30), "float32"), _inputs(rng, (30, 10), "float32")
    assert_product_close(a @ b, _f64(a), _f64(b), 30, "float32")
    assert chosen[0][1][-1] == {"PLANES": True} and "bf16_parts=1" in chosen[0][0]
    assert kernels == [K.split_bf16_planes, K.split_bf16_planes, K.gemm]


# ---- a batch of matrices: parts split in registers or true float32, one launch either way ------------------
IEEE = MP.IEEE


def _choosing(monkeypatch, precision, **tiles):
    """Tuning picks the first candidate of ``precision`` (``tiles`` replacing its tile sides); returns the
    (key, candidates) of every choice asked for."""
    asked = []

    def choose(key, facts, candidates, prepare):
        listed = candidates()
        asked.append((key, listed))
        if "bf16_parts" not in key:
            return listed[0]
        chosen = next(c for c in listed if c.get("PRECISION", PARTS) == precision and not c.get("PLANES"))
        return dict(chosen, **tiles)
    monkeypatch.setattr(MP.tuning, "choose_timed", choose)
    return asked


def _attention_operands(rng):
    """Scores of (batch 2, heads 3) queries and keys laid out as (batch, sequence, heads, dim) are: batch
    strides that are not the matrices' size, and keys read transposed."""
    q = _inputs(rng, (2, 19, 3, 24), "float32").permute(0, 2, 1, 3)
    k = _inputs(rng, (2, 21, 3, 24), "float32").permute(0, 2, 3, 1)
    return q, k


@pytest.mark.parametrize("precision", [PARTS, IEEE])
@pytest.mark.parametrize("tiles", [{}, dict(BLOCK_M=16, BLOCK_N=16, BLOCK_K=16)], ids=["interpreter", "16-wide"])
def test_a_batch_is_one_launch_in_either_precision(rng, parts_in_registers, monkeypatch, precision, tiles):
    """Odd extents, several tiles and K steps (16-wide tiles, ragged edges), batch strides of a heads view,
    a strided and a broadcast batch, and baddbmm's bias: each one launch of the batched GEMM, as accurate
    as float32 (``assert_product_close``) in either precision."""
    asked = _choosing(monkeypatch, precision, **tiles)
    kernels = _launched_kernels(monkeypatch)
    precisions = _launched_precisions(monkeypatch)
    a, b = _inputs(rng, (5, 33, 20), "float32"), _inputs(rng, (5, 20, 17), "float32")
    assert_product_close(nbx.bmm(a, b), _f64(a), _f64(b), 20, "float32")
    q, k = _attention_operands(rng)
    assert_product_close(q @ k, _f64(q), _f64(k), 24, "float32")
    x, y = _inputs(rng, (8, 21, 40), "float32")[::2], _inputs(rng, (4, 40, 13), "float32")
    assert_product_close(nbx.bmm(x, y), _f64(x), _f64(y), 40, "float32")
    u, v = _inputs(rng, (3, 1, 18, 35), "float32"), _inputs(rng, (1, 2, 35, 22), "float32")
    assert_product_close(u @ v, _f64(u), _f64(v), 35, "float32")
    bias = _inputs(rng, (1, 17), "float32")
    got = nbx.baddbmm(bias, a, b, beta=0.5, alpha=-2.0)
    assert_product_close(got, -2.0 * _f64(a), _f64(b), 20, "float32", bias_scale=(0.5 * _f64(bias),))
    assert kernels == [K.gemm] * 5 and precisions == [precision] * 5
    assert all("|bf16_parts=1" in key and "B=1|" not in key for key, _ in asked)


def test_a_batch_lists_both_precisions_and_no_planes_form(rng, parts_in_registers, monkeypatch):
    """The key of a batch on parts lists the register split's tiles first (the interpreter's choice), then
    true float32's; a batch has no planes form (planes are per matrix)."""
    asked = _choosing(monkeypatch, PARTS)
    a, b = _inputs(rng, (3, 20, 30), "float32"), _inputs(rng, (3, 30, 10), "float32")
    nbx.bmm(a, b)
    ((key, listed),) = asked
    assert key.startswith("gemm|B=4|") and key.endswith("|bf16_parts=1")
    precisions = [c.get("PRECISION", PARTS) for c in listed]
    assert precisions[0] == PARTS and IEEE in precisions and precisions == sorted(precisions, key=[PARTS, IEEE].index)
    assert not any(c.get("PLANES") for c in listed)


def test_a_batch_gives_the_same_bits_every_call(rng, parts_in_registers):
    a, b = _inputs(rng, (6, 40, 24), "float32"), _inputs(rng, (6, 24, 36), "float32")
    first = nbx.bmm(a, b).numpy()
    clear_all()
    np.testing.assert_array_equal(nbx.bmm(a, b).numpy(), first)
    np.testing.assert_array_equal(nbx.bmm(a, b).numpy(), first)


_ATTENTION_BATCHES = [(12, 128, 128, 64), (12, 128, 64, 128), (48, 512, 64, 512), (384, 197, 64, 197)]


@pytest.mark.parametrize("batches,m,n,k", _ATTENTION_BATCHES)
def test_attention_sized_batches_on_hopper_time_parts_and_true_float32(batches, m, n, k):
    """On Hopper a float32 batch's key is flagged bf16_parts (its census the one key); its candidates are
    the register split's tiles, small enough that some fill every SM with a dozen 128 x 128 outputs and
    none holds more than 64 accumulators a thread, then true float32's tiles."""
    hopper = load_facts("hopper")
    a, b = MP._meta((batches, m, k), nbx.float32), MP._meta((batches, k, n), nbx.float32)
    route, key = MP._product_route(a, b, nbx.float32, None, 0, hopper)
    assert route == "planes" and key.endswith("|bf16_parts=1") and get("bmm").key(hopper, a, b) == [key]
    parts = MM.gemm_candidates(hopper, m, n, k, nbx.float32, parts=True, batches=batches)
    assert all(c["BLOCK_M"] * c["BLOCK_N"] <= 64 * 32 * c["num_warps"] for c in parts)
    most = max(batches * -(-m // c["BLOCK_M"]) * -(-n // c["BLOCK_N"]) for c in parts)
    assert most >= hopper["multiprocessors_max"]
    assert len(MM.gemm_candidates(hopper, m, n, k, nbx.float32, parts=True)) < len(parts)  # one matrix: as before


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_batches_keep_their_key_and_tiles(dtype):
    hopper = load_facts("hopper")
    a, b = MP._meta((12, 128, 64), getattr(nbx, dtype)), MP._meta((12, 64, 128), getattr(nbx, dtype))
    route, key = MP._product_route(a, b, getattr(nbx, dtype), None, 0, hopper)
    assert route == "gemm" and "bf16_parts" not in key


def test_a_batch_without_planes_or_at_high_precision_stays_off_parts():
    hopper = load_facts("hopper")
    a, b = MP._meta((12, 128, 64), nbx.float32), MP._meta((12, 64, 128), nbx.float32)
    try:
        MM.backends.cuda.matmul.float32_planes = False
        assert MP._product_route(a, b, nbx.float32, None, 0, hopper)[0] == "gemm"
    finally:
        MM.backends.cuda.matmul.float32_planes = True
    try:
        MM.set_float32_matmul_precision("high")
        assert MP._product_route(a, b, nbx.float32, None, 0, hopper)[0] == "gemm"
    finally:
        MM.set_float32_matmul_precision("highest")


@pytest.mark.skipif(TEST_DEVICE != "cpu", reason="certifies the CPU's device class")
def test_a_batch_key_on_parts_certifies_both_precisions(on_parts, monkeypatch, tmp_path):
    """Certification rebuilds a batch from the key and holds every candidate, parts and true float32, to the
    float32 products' bound."""
    from nbxtensor import certify, tuning
    monkeypatch.setenv("NBX_TUNING_DIR", str(tmp_path))
    key = "gemm|B=4|M=32|N=16|K=64|float32,float32|a_k_unit=1|b_n_unit=1|bf16_parts=1"
    report = certify.certify_key(key, "cpu")
    assert report["status"] == "certified" and report["refused"] == []
    entry = tuning.entries("cpu")[key]
    assert entry["candidates"] == 2 and [list(s)[0] for s in entry["shapes"]] == [4, 3]


@pytest.mark.parametrize("precision", [PARTS, IEEE])
@pytest.mark.parametrize("flatten", [False, True], ids=["loop", "flattened"])
def test_a_persistent_batch_gives_the_one_program_a_tile_bits(rng, parts_in_registers, monkeypatch, precision,
                                                              flatten):
    """``gemm_batches``: a few programs (three under the interpreter) walk every (matrix, tile) item of a
    batch, 16-wide tiles with ragged edges and K steps, of a heads view, a strided, a broadcast batch and
    baddbmm's bias; each item sums its K steps as ``gemm``'s program a tile does, so the bits are
    ``gemm``'s, in either precision."""
    tiles = dict(BLOCK_M=16, BLOCK_N=16, BLOCK_K=16)
    _choosing(monkeypatch, precision, **tiles)
    kernels = _launched_kernels(monkeypatch)
    a, b = _inputs(rng, (5, 33, 20), "float32"), _inputs(rng, (5, 20, 17), "float32")
    q, k = _attention_operands(rng)
    x, y = _inputs(rng, (8, 21, 40), "float32")[::2], _inputs(rng, (4, 40, 13), "float32")
    u, v = _inputs(rng, (3, 1, 18, 35), "float32"), _inputs(rng, (1, 2, 35, 22), "float32")
    bias = _inputs(rng, (1, 17), "float32")

    def products():
        return [nbx.bmm(a, b), q @ k, nbx.bmm(x, y), u @ v, nbx.baddbmm(bias, a, b, beta=0.5, alpha=-2.0)]
    one_a_tile = products()
    assert kernels == [K.gemm] * 5
    clear_all()
    _choosing(monkeypatch, precision, **tiles, PROGRAMS_PER_SM=1, **({"FLATTEN": True} if flatten else {}))
    kernels.clear()
    walked = products()
    assert kernels == [K.gemm_batches] * 5
    for got, expected in zip(walked, one_a_tile):
        np.testing.assert_array_equal(got.numpy(), expected.numpy())
    assert_product_close(walked[1], _f64(q), _f64(k), 24, "float32")
    assert_product_close(walked[4], -2.0 * _f64(a), _f64(b), 20, "float32", bias_scale=(0.5 * _f64(bias),))


def test_attention_sized_float32_batches_list_persistent_forms():
    """A float32 batch's key on Hopper lists ``gemm_batches``'s persistent forms in both precisions (one
    matrix and half precision do not), each tile's staged K steps within a block's shared memory."""
    hopper = load_facts("hopper")
    for parts in (True, False):
        listed = MM.gemm_candidates(hopper, 512, 64, 512, nbx.float32, parts=parts, batches=48)
        persistent = [c for c in listed if c.get("PROGRAMS_PER_SM")]
        assert persistent and all(c["BLOCK_K"] in (16, 32) for c in persistent)
        assert not any(c.get("PROGRAMS_PER_SM") for c in MM.gemm_candidates(hopper, 512, 64, 512, nbx.float32,
                                                                           parts=parts))
    assert not any(c.get("PROGRAMS_PER_SM") for c in MM.gemm_candidates(hopper, 512, 64, 512, nbx.bfloat16,
                                                                       batches=48))
