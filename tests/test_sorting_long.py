"""Rows longer than one sorting segment: stable radix passes over many blocks of a row (sort) and a
radix select over many chunks (topk). Checked exactly against NumPy's stable argsort, with ties, NaN
and -0.0, both directions, and through the ops that used to be capped by the segment length (topk,
randperm, unique, multinomial). A shrunken segment and block make many programs per row cheap to
exercise."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbxtensor as nbx
from nbxtensor.device import backend_for
from nbxtensor.ops import sorting
from tests.conftest import TEST_DEVICE, to_nbx
from tests.test_sorting import stable_argsort


def awkward(n, dtype, seed):
    """Many ties; floats also hold NaN, -0.0, 0.0 and infinities."""
    rng = np.random.default_rng(seed)
    if dtype == "bfloat16" or np.issubdtype(dtype, np.floating):
        a = (rng.integers(-40, 40, size=n) / 4).astype(np.float32 if dtype == "bfloat16" else dtype)
        specials = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf], a.dtype)
        flat = a.reshape(-1)
        spots = rng.choice(flat.size, size=flat.size // 10, replace=False)
        flat[spots] = specials[rng.integers(0, len(specials), size=len(spots))]
        return a
    return rng.integers(-60, 60, size=n).astype(dtype)


def with_nan_payloads(a):
    """``a`` (float32) with NaNs of both signs and several payloads every 97 elements."""
    for start, bits in enumerate((0xFFC00000, 0x7F800001, 0xFFFFFFFF)):
        a.reshape(-1).view(np.uint32)[start::97] = bits
    return a


def check_sort(a, dim, descending, tensor=None):
    values, indices = nbx.sort(to_nbx(a) if tensor is None else tensor, dim=dim, descending=descending)
    order = stable_argsort(a, dim, descending)
    assert np.array_equal(indices.numpy(), order)
    expected = np.take_along_axis(a, order, dim)
    got = values.numpy() if tensor is None else values.to(nbx.float32).numpy()
    assert np.array_equal(got, expected, equal_nan=np.issubdtype(a.dtype, np.floating))
    # -0.0 and 0.0 tie, and so do all NaNs: each keeps its own bits where it lands (a NaN's, unless the
    # values came through a conversion, which may rewrite a NaN's payload)
    if tensor is None:
        assert np.array_equal(got.view(f"u{got.itemsize}"), expected.view(f"u{expected.itemsize}"))
    else:
        assert np.array_equal(np.signbit(got[got == got]), np.signbit(expected[expected == expected]))


@pytest.mark.parametrize("n", [5000, 9000])
@pytest.mark.parametrize("descending", [False, True])
def test_long_float32_rows_sort_stably(n, descending):
    check_sort(with_nan_payloads(awkward(n, np.float32, n)), 0, descending)


def test_twenty_thousand_elements_and_argsort():
    a = awkward(20000, np.float32, 3)
    check_sort(a, -1, False)
    assert np.array_equal(nbx.argsort(to_nbx(a), descending=True).numpy(), stable_argsort(a, 0, True))


@pytest.mark.parametrize("descending", [False, True])
def test_long_int64_rows_sort_stably(descending):
    check_sort(awkward(9000, np.int64, 5), 0, descending)


def test_long_bfloat16_rows_sort_stably():
    a = awkward(5000, "bfloat16", 6)  # quarters fit bf16 exactly, so the float32 reference is the same order
    check_sort(a, 0, True, tensor=to_nbx(a).to(nbx.bfloat16))


def record_launches(monkeypatch) -> dict:
    """Kernel name -> the constexpr sets of each of its launches from the sorting ops, in order."""
    seen = {}
    real_launch = sorting.launch

    def recording_launch(kernel, grid, device, args, **constexprs):
        seen.setdefault(kernel.fn.__name__, []).append(tuple(sorted(constexprs.items())))
        real_launch(kernel, grid, device, args, **constexprs)
    monkeypatch.setattr(sorting, "launch", recording_launch)
    return seen


@pytest.mark.parametrize("dtype,shape,passes", [
    ("float64", (1, 600), 16), ("int32", (3, 600), 8), ("uint8", (2, 600), 2), ("int8", (2, 600), 3),
    ("int16", (1, 600), 5), ("float16", (2, 600), 5), ("bfloat16", (1, 600), 4), ("bool", (2, 600), 2)])
def test_radix_passes_over_many_blocks_of_a_row(monkeypatch, dtype, shape, passes):
    """Rows past a segment sort by radix passes; 600 elements in blocks of 128 (the last one short) make
    every pass join five programs' elements per row; the scan of a digit's block counts takes two steps
    of four. A pass runs for each 4-bit digit that can change the order: all sixteen of a 64-bit key,
    and of a narrower type's widened key only those below its width (and the sign's, for signed
    integers) or, for floats, those that reach its mantissa."""
    monkeypatch.setattr(sorting, "SEGMENT_LIMIT", 64)
    monkeypatch.setattr(sorting, "SORT_BLOCK", 128)
    monkeypatch.setattr(sorting, "SORT_SCAN_BLOCK", 4)
    launches = record_launches(monkeypatch)
    rng = np.random.default_rng(7)
    if dtype == "uint8":
        a = rng.integers(0, 5, size=shape).astype(np.uint8)
    elif dtype == "bool":
        a = rng.integers(0, 2, size=shape).astype(bool)
    else:
        a = awkward(shape, dtype if dtype == "bfloat16" else np.dtype(dtype), 7)
    tensor = to_nbx(a).to(nbx.bfloat16) if dtype == "bfloat16" else None
    check_sort(a, 1, False, tensor=tensor)
    if "radix_scatter_warp" in launches:  # a device with warp votes: every digit of a 32-bit key, of its width
        passes = -(-32 // sorting.SORT_WARP_BITS)
    assert sum(len(launches.get(name, [])) for name in ("radix_sort_scatter", "radix_scatter_warp")) == passes
    check_sort(a, 1, True, tensor=tensor)


@pytest.mark.skipif(not backend_for(nbx.device(TEST_DEVICE)).facts["kernels"].get("warp_votes"),
                    reason="the warp radix kernels need a device with warp votes (CUDA)")
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("bits,hist_blocks", [(4, 1), (5, 2), (5, 4)])
def test_warp_radix_passes_sort_32_bit_keys(monkeypatch, dtype, descending, bits, hist_blocks):
    """On a device with warp votes, 32-bit keys take the Gluon passes (``kernels/sort_warp.py``): ranks
    from ballots, one warp a block, in digits of 4 or 5 bits (the last pass of 5-bit digits has two),
    histogram programs of several blocks a warp, scatter programs reordering four blocks together.
    Several rows of 70 blocks (the last scatter program's tile two blocks and a short one), ties, NaN
    and -0.0, and a row of one value (every element one digit in every pass)."""
    monkeypatch.setattr(sorting, "SEGMENT_LIMIT", 64)
    monkeypatch.setattr(sorting, "SORT_WARP_BITS", bits)
    monkeypatch.setattr(sorting, "SORT_WARP_HIST_BLOCKS", hist_blocks)
    launches = record_launches(monkeypatch)
    a = awkward((3, 70 * 32 * sorting.SORT_WARP_ROWS - 5), np.dtype(dtype), 31)
    a[1] = a[1, 0]
    if dtype == np.float32:  # the passes carry keys, which fold NaNs and zeros
        with_nan_payloads(a[2])
    check_sort(a, 1, descending)
    assert len(launches["radix_scatter_warp"]) == -(-32 // bits) and "radix_sort_scatter" not in launches


@pytest.mark.parametrize("dtype,index_64,expected", [
    ("float32", False, True), ("int32", False, True), ("float32", True, False), ("float64", False, False),
    ("int64", False, False), ("bfloat16", False, False), ("uint8", False, False), ("bool", False, False)])
def test_warp_passes_take_32_bit_floats_and_signed_ints(monkeypatch, dtype, index_64, expected):
    """Which long sorts the warp passes take on a device whose facts name warp votes (here any device,
    its facts patched): float32 and int32 keys with int32 positions; everything else keeps the portable
    passes, and a device without the fact takes none."""
    rows = to_nbx(np.zeros((1, 8), dtype=bool if dtype == "bool" else np.float32)).to(getattr(nbx, dtype))
    flags = dict(sorting._select_flags(rows, False, "sort"), INDEX_64=index_64)
    kernels = backend_for(rows.device).facts["kernels"]
    monkeypatch.setitem(kernels, "warp_votes", True)
    assert sorting._warp_passes(rows, flags) is expected
    monkeypatch.setitem(kernels, "warp_votes", False)
    assert not sorting._warp_passes(rows, flags)


def test_every_radix_pass_launches_the_same_kernels(monkeypatch):
    """A pass's bit offset is an argument, not a constexpr: sixteen passes of a 64-bit key compiled 32
    kernels for one sort (a GPU test ran out of time compiling them)."""
    monkeypatch.setattr(sorting, "SEGMENT_LIMIT", 64)
    monkeypatch.setattr(sorting, "SORT_BLOCK", 128)
    launches = record_launches(monkeypatch)
    check_sort(awkward((1, 300), np.float64, 3), 1, False)
    assert len(set(launches["radix_sort_histogram"])) == 1 and len(set(launches["radix_sort_offsets"])) == 1
    assert len(set(launches["radix_sort_scatter"])) == 2  # the first pass makes the positions, the rest carry them


def test_multiple_rows_and_a_leading_dim(monkeypatch):
    monkeypatch.setattr(sorting, "SEGMENT_LIMIT", 64)
    a = awkward((200, 2, 2), np.float32, 8)
    check_sort(a, 0, False)
    check_sort(a, 0, True)
    assert np.array_equal(nbx.msort(to_nbx(a)).numpy(), np.take_along_axis(a, stable_argsort(a, 0, False), 0),
                          equal_nan=True)


def test_radix_select_starts_from_dirty_memory(monkeypatch):
    """The select's state is written by its first level, not zeroed before: its workspace comes straight
    from the allocator, here from blocks just filled with ones and freed."""
    monkeypatch.setattr(sorting, "SEGMENT_LIMIT", 64)
    monkeypatch.setattr(sorting, "SELECT_CHUNK_INTERPRETED", 256)
    monkeypatch.setattr(sorting, "SELECT_BLOCK_INTERPRETED", 128)
    a = awkward((3, 700), np.float32, 12)
    for k, largest in ((5, True), (30, False)):
        for _ in range(2):
            junk = [nbx.full((size,), -1, dtype=nbx.int64, device=TEST_DEVICE) for size in (64, 512, 4096, 32768)]
            del junk
            result = nbx.topk(to_nbx(a), k, dim=1, largest=largest)
            assert np.array_equal(result.indices.numpy(), stable_argsort(a, 1, largest)[:, :k])


def test_long_topk_and_kthvalue(monkeypatch):
    monkeypatch.setattr(sorting, "SEGMENT_LIMIT", 64)
    a = awkward((1, 300), np.float32, 9)
    for k, largest in ((20, True), (40, False), (299, True), (300, False)):
        result = nbx.topk(to_nbx(a), k, largest=largest)
        order = stable_argsort(a, 1, largest)[:, :k]
        assert np.array_equal(result.indices.numpy(), order)
    values, _ = nbx.kthvalue(to_nbx(a), 200)
    assert np.array_equal(values.numpy(), np.sort(a, 1)[:, 199], equal_nan=True)


def test_randperm_unique_and_multinomial_past_a_segment():
    n = 6000
    perm = nbx.randperm(n, generator=nbx.Generator(device=TEST_DEVICE).manual_seed(1), device=TEST_DEVICE).numpy()
    assert np.array_equal(np.sort(perm), np.arange(n))
    a = np.random.default_rng(10).integers(-300, 300, size=n)
    assert np.array_equal(nbx.unique(to_nbx(a)).numpy(), np.unique(a))
    weights = np.random.default_rng(11).random(n).astype(np.float32)
    picked = nbx.multinomial(to_nbx(weights), 3000, generator=nbx.Generator(device=TEST_DEVICE).manual_seed(2)).numpy()
    assert len(set(picked.tolist())) == 3000 and picked.min() >= 0 and picked.max() < n


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.integers(1, 3), n=st.integers(65, 300), dtype=st.sampled_from(["float32", "int64", "uint8"]),
       descending=st.booleans(), k=st.integers(1, 64), seed=st.integers(0, 2 ** 16))
def test_radix_sort_and_select_match_a_stable_argsort(monkeypatch, rows, n, dtype, descending, k, seed):
    """Any row count and length past the segment, blocks and chunks of 32 (the last one short), and k:
    sort and topk give NumPy's stable order exactly."""
    monkeypatch.setattr(sorting, "SEGMENT_LIMIT", 64)
    monkeypatch.setattr(sorting, "SORT_BLOCK", 32)
    monkeypatch.setattr(sorting, "SORT_SCAN_BLOCK", 4)
    monkeypatch.setattr(sorting, "SELECT_CHUNK_INTERPRETED", 32)
    monkeypatch.setattr(sorting, "SELECT_BLOCK_INTERPRETED", 32)
    a = awkward((rows, n), np.dtype(dtype), seed) if dtype != "uint8" else \
        np.random.default_rng(seed).integers(0, 7, size=(rows, n)).astype(np.uint8)
    check_sort(a, 1, descending)
    top = nbx.topk(to_nbx(a), k, dim=1, largest=descending)
    assert np.array_equal(top.indices.numpy(), stable_argsort(a, 1, descending)[:, :k])



def small_blocks(monkeypatch, block=16):
    """Radix sorts past 64 elements, in blocks of ``block``; the scan of block counts four a step."""
    monkeypatch.setattr(sorting, "SEGMENT_LIMIT", 64)
    monkeypatch.setattr(sorting, "SORT_BLOCK", block)
    monkeypatch.setattr(sorting, "SORT_SCAN_BLOCK", 4)


@pytest.mark.parametrize("descending", [False, True])
def test_equal_digits_across_many_blocks_keep_their_order(monkeypatch, descending):
    """Three values whose low digits are all equal (3) and high digits 0, 1, 2, over 38 blocks of 16: in
    each pass every digit's elements spread across every block, and equal keys keep their order across
    blocks."""
    small_blocks(monkeypatch)
    a = np.random.default_rng(20).choice(np.array([3, 19, 35], np.uint8), size=(1, 600))
    check_sort(a, 1, descending)


def test_several_rows_of_many_blocks(monkeypatch):
    """Each row's block counts and digit totals stay its own (rows of 137 end in a short block)."""
    small_blocks(monkeypatch)
    a = np.random.default_rng(21).integers(-4, 4, size=(5, 137)).astype(np.int8)
    a[3] = 2  # one row of a single value
    check_sort(a, 1, False)
    check_sort(a, 1, True)


@pytest.mark.parametrize("descending", [False, True])
def test_int64_keys_over_many_blocks(monkeypatch, descending):
    """Sixteen passes: every digit position of a 64-bit key, low word then high."""
    small_blocks(monkeypatch, block=32)
    rng = np.random.default_rng(22)
    a = rng.integers(-2 ** 62, 2 ** 62, size=(2, 100)) >> rng.integers(0, 62, size=(2, 100))
    a[:, ::7] = a[0, 0]  # ties
    check_sort(a, 1, descending)


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_rows_past_two_to_the_31_count_in_int64(monkeypatch, dtype):
    """INDEX_64 (sorts of 2^31 elements or more, too big for a test) takes positions, counts and
    addresses as int64: forced on small rows, the sort must not change."""
    small_blocks(monkeypatch, block=32)
    a = awkward((2, 100), np.dtype(dtype), 23)
    rows = to_nbx(a)
    for descending in (False, True):
        flags = dict(sorting._select_flags(rows, descending, "sort"), INDEX_64=True)
        values, indices = sorting._sort_long_rows(rows, flags)
        order = stable_argsort(a, 1, descending)
        assert np.array_equal(indices.numpy(), order)
        assert np.array_equal(values.numpy(), np.take_along_axis(a, order, 1), equal_nan=True)


def test_more_long_rows_than_a_grid_dimension_takes_go_in_groups(monkeypatch):
    """The radix kernels put rows on a grid's second dimension (at most 65535 on CUDA): more long rows
    than that are sorted and selected a group at a time (groups of two here, the last one short)."""
    from nbxtensor.ops import plans
    small_blocks(monkeypatch)
    monkeypatch.setattr(sorting, "GRID_ROWS", 2)
    monkeypatch.setattr(sorting, "SELECT_CHUNK_INTERPRETED", 32)
    monkeypatch.setattr(sorting, "SELECT_BLOCK_INTERPRETED", 32)
    grids = []
    for module, name in ((sorting, "launch"), (plans, "launch_slots")):
        def recording(kernel, grid, *args, _real=getattr(module, name), **kwargs):
            grids.append((kernel.fn.__name__, tuple(grid)))
            return _real(kernel, grid, *args, **kwargs)
        monkeypatch.setattr(module, name, recording)
    a = awkward((5, 90), np.dtype(np.float32), 25)
    check_sort(a, 1, False)
    top = nbx.topk(to_nbx(a), 7, dim=1)
    assert np.array_equal(top.indices.numpy(), stable_argsort(a, 1, True)[:, :7])
    radix = [grid for kernel, grid in grids if kernel.startswith("radix_") and kernel != "radix_choose"]
    kernels = {kernel for kernel, _ in grids}
    assert "radix_gather" in kernels and kernels & {"radix_sort_scatter", "radix_scatter_warp"}
    assert radix and all(grid[1] <= 2 for grid in radix)
