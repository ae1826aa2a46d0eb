"""Reductions, scans and softmax spread over the device: rows split into chunks that one row alone
spreads over every multiprocessor, column layouts split along the reduced axis, few rows in small
tiles, and softmax's rows past its resident length in chunks of one block, its sweep over the same.

The thresholds are device facts, set here so that tiny shapes take these paths under the interpreter
(whose device counts 3 multiprocessors). What may change bits and what may not:
- the split of a row (its chunks) is a function of its length and the device alone, so a row gives the
  same bits alone or in any batch, and run to run; float sums over different splits round differently
  (fp32 accumulation in another order) and are compared with float64 within the bound of the depth;
- the tile's row count (how few rows spread out) and the softmax sweep's never change bits;
- max, min, arg reductions and integer sums are exact whatever the split: first index among equals,
  NaN wins.
"""
import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor import allocation
from nbxtensor.device.facts import all_facts
from nbxtensor.launch import capture
from nbxtensor.ops import reductions, registry
from nbxtensor.ops.normalization import _softmax_split
from nbxtensor.ops.reductions import occupying_block_rows, split_plan
from nbxtensor.ops.registry import TensorMeta

from .conftest import to_nbx

EPS = {"float32": 2.0 ** -23, "float64": 2.0 ** -52, "float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}
# the spacing of a dtype's subnormals: the absolute error of a tiny probability rounded to it
SUBNORMAL = {"float32": 2.0 ** -149, "float64": 2.0 ** -1074, "float16": 2.0 ** -24, "bfloat16": 2.0 ** -133}
FLOATS = ["float32", "float64", "float16", "bfloat16"]
HOPPER = next(f["kernels"] for f in all_facts() if f["name"] == "hopper")
H200_SMS = 132


def sum_bound(a64, axis, dtype):
    """Wilkinson's bound for a sum of n terms accumulated in float32 (float64 for float64), plus one
    rounding of the result to ``dtype``."""
    n = a64.size // max(1, np.asarray(a64.sum(axis=axis)).size)
    acc = EPS["float64"] if dtype == "float64" else EPS["float32"]
    return n * acc * np.abs(a64).sum(axis=axis) + EPS[dtype] * np.abs(a64.sum(axis=axis)) + 1e-300


@pytest.fixture
def spread(set_kernel_facts):
    """Rows past 64 elements and columns past 16 split; a chunk is the row over the 3 multiprocessors
    (at least 16, at most 256 elements); no spreading of few rows over small tiles (``reduction_waves``
    0) until a test asks for it."""
    def set_facts(**more):
        set_kernel_facts(**{**dict(reduction_split_length=64, reduction_column_split_length=16,
                                   reduction_split_min=16, reduction_split_block=256, reduction_split_chunks=64,
                                   reduction_block=16, reduction_tile=256, row_resident_max=32,
                                   softmax_resident_max=32,
                                   reduction_waves=0), **more})
    set_facts()
    return set_facts


def test_split_plan_on_the_h200():
    """The chunks the H200 takes (132 SMs): a vocabulary row alone spreads over every SM, a very long
    row keeps about reduction_split_chunks chunks (as before), a column sum of [4096, 4096] splits in 16,
    a row of 4096 does not; no device takes more chunks than the cost rules' bound (None)."""
    assert split_plan(32000, HOPPER, H200_SMS) == (256, 125)
    assert split_plan(262144, HOPPER, H200_SMS) == (2048, 128)
    assert split_plan(1 << 20, HOPPER, H200_SMS) == (4096, 256)
    assert split_plan(1 << 30, HOPPER, H200_SMS) == (1 << 20, 1024)
    assert split_plan(4096, HOPPER, H200_SMS, column=True) == (256, 16)
    # column splits up to 4096 long make about 16 chunks (more programs, fewer steps each), longer ones as rows
    assert [split_plan(n, HOPPER, H200_SMS, column=True) for n in (1500, 2048, 6304)] == [(128, 12), (128, 16),
                                                                                          (256, 25)]
    assert split_plan(4096, HOPPER, H200_SMS) == (4096, 1)
    for facts in (f["kernels"] for f in all_facts()):
        for length in (100, 5000, 20000, 32000, 150000, 1 << 22):
            for column in (False, True):
                bound = split_plan(length, facts, column=column)[1]
                assert all(split_plan(length, facts, sms, column)[1] <= bound for sms in (1, 3, 46, 132, 1000))


def test_occupying_block_rows():
    assert occupying_block_rows(16, 64, 1) == 16
    assert occupying_block_rows(16, 64, 16) == 4
    assert occupying_block_rows(16, 64, 1000) == 1
    assert occupying_block_rows(128, 4096, 1000, floor=32) == 32


def test_cost_rules_declare_the_partials():
    """Workspace of the split paths, bounded over every device class: three partial states of at most
    8 bytes per row and chunk for reductions, one for cumsum's chunk totals, two float32 ones for
    softmax's chunks (the H200's chunks counted here are at most the bound's)."""
    f32, bf16 = nbx.float32, nbx.bfloat16
    chunks = split_plan(32000, HOPPER, H200_SMS)[1]
    assert registry.get("argmax").cost(TensorMeta((4, 32000), f32), 1).workspace >= 3 * 8 * 4 * chunks
    assert registry.get("sum").cost(TensorMeta((4096, 4096), f32), 0).workspace >= 3 * 8 * 4096 * 16
    assert registry.get("cumsum").cost(TensorMeta((8, 1 << 17), f32), 1).workspace >= \
        8 * 8 * split_plan(1 << 17, HOPPER, H200_SMS)[1]
    assert registry.get("cumsum").cost(TensorMeta((8, 100), f32), 1).workspace == 0
    assert registry.get("softmax").cost(TensorMeta((2, 131072), bf16), -1).workspace >= \
        2 * 4 * 2 * _softmax_split(131072, HOPPER)[1]


@pytest.mark.parametrize("dtype", FLOATS)
def test_column_and_multi_dim_reductions_split(rng, spread, dtype):
    """A column sum (reduced dim leading, kept dim adjacent in memory) and a mean over (N, H, W) of NCHW
    and of channels-last input: split along the reduced axis, against float64."""
    a = rng.standard_normal((150, 40)).astype(nbx.get_dtype(dtype).numpy)
    a64 = a.astype(np.float64)
    x = to_nbx(a)
    got = x.sum(0).numpy().astype(np.float64)
    assert np.all(np.abs(got - a64.sum(0)) <= sum_bound(a64, 0, dtype))
    images = rng.standard_normal((3, 5, 6, 7)).astype(nbx.get_dtype(dtype).numpy)
    i64 = images.astype(np.float64)
    for t in (to_nbx(images), to_nbx(images).contiguous(memory_format="channels_last")):
        got = t.mean((0, 2, 3)).numpy().astype(np.float64)
        assert np.all(np.abs(got - i64.mean((0, 2, 3))) <= sum_bound(i64, (0, 2, 3), dtype) / 126)


def test_short_column_splits_make_the_named_chunk_count(rng, spread):
    """With ``reduction_column_split_chunks`` (the GPU facts' 16; 4 here), a column split up to
    ``reduction_split_block`` long makes about that many chunks, of at least the column lanes: 150 rows in 4
    chunks of 64 (against 10 of 16 without it), combined in the launch; against float64, and a column alone
    pair gives the bits it has among the others (the chunks depend on the length alone)."""
    spread(reduction_column_split_chunks=4)
    a = rng.standard_normal((150, 40)).astype(np.float32)
    with capture() as captured:
        got = to_nbx(a).sum(0).numpy()
    assert [(grid[1], c["COMBINE"]) for _, grid, _, _, c, _ in captured.launches] == [(3, True)]
    a64 = a.astype(np.float64)
    assert np.all(np.abs(got - a64.sum(0)) <= sum_bound(a64, 0, "float32"))
    assert to_nbx(a[:, 6:8].copy()).sum(0).numpy().tobytes() == got[6:8].tobytes()


def test_exact_reductions_whatever_the_split(rng, spread):
    """Integer sums, extremes and arg reductions over split columns and rows: exact, ties to the first
    index across chunks, NaN wins."""
    ints = rng.integers(-1000, 1000, (200, 9)).astype(np.int32)
    assert to_nbx(ints).sum(0).tolist() == ints.astype(np.int64).sum(0).tolist()
    a = np.zeros((3, 301), np.float32)
    a[:, [40, 170, 300]] = 5  # equal maxima in different chunks
    a[2, 250] = np.nan
    x = to_nbx(a)
    assert x.argmax(1).tolist() == [40, 40, 250]
    assert x.T.argmax(0).tolist() == [40, 40, 250]  # the column layout
    assert to_nbx(-a).argmin(1).tolist() == [40, 40, 250]
    values, indices = x.max(1)
    assert indices.tolist() == [40, 40, 250] and values.numpy()[0] == 5 and np.isnan(values.numpy()[2])
    assert x.amax(1).numpy()[1] == 5 and np.isnan(x.T.amax(0).numpy()[2])


def test_spreading_few_rows_keeps_the_bits(rng, spread):
    """Few rows in smaller tiles over more programs (reduction_waves), softmax's sweep among them: the same
    bits as without, for every kind of state and both layouts."""
    a = rng.standard_normal((3, 301)).astype(np.float32)
    c = rng.standard_normal((40, 70)).astype(np.float32)
    ops = [lambda t: t.sum(1), lambda t: t.var(1), lambda t: t.logsumexp(1), lambda t: t.norm(3, 1),
           lambda t: (1 + t * 1e-3).prod(1), lambda t: t.argmax(1), lambda t: t.softmax(1), lambda t: t.cumsum(1),
           lambda t: t.T.sum(0)]

    def run_all():
        return [op(to_nbx(a)).numpy().tobytes() for op in ops] + [to_nbx(c).sum(0).numpy().tobytes(),
                                                                  to_nbx(c[:4]).sum(1).numpy().tobytes()]
    alone = run_all()
    assert run_all() == alone  # run to run
    spread(reduction_waves=64)
    assert run_all() == alone


def test_split_chunks_combine_in_their_launch(rng, spread, monkeypatch):
    """The last program of a row block's chunks to finish combines their states in the split's own launch
    (a split of a few chunks: chunks of at least 128 elements, so 2 or 3 on any device): one launch, the same
    bits as the second launch that combines them where the programs of rows outnumber the arrival counters
    (here: none), for every kind of state and both layouts, and the counters are left at zero for the next
    launch. Replayed, the capture gives the same bits again. A split of more chunks than
    ``_COMBINED_CHUNKS_MAX`` takes the second launch."""
    from nbxtensor import allocation
    from nbxtensor.ops.plans import clear_all
    from nbxtensor.ops.reductions import _COMBINED_CHUNKS_MAX
    spread(reduction_split_min=128)
    a = rng.standard_normal((3, 301)).astype(np.float32)
    c = rng.standard_normal((150, 40)).astype(np.float32)
    ints = rng.integers(-1000, 1000, (200, 9)).astype(np.int32)
    xa, xc, xi = to_nbx(a), to_nbx(c), to_nbx(ints)
    near_one = 1 + xa * 1e-3
    ops = [lambda: xa.sum(1), lambda: xa.var(1), lambda: xa.logsumexp(1), lambda: xa.norm(3, 1),
           lambda: near_one.prod(1), lambda: xa.argmax(1), lambda: xa.T.amax(0), lambda: xc.sum(0),
           lambda: xc.std(0), lambda: xi.sum(0)]

    def run_all():
        results, launches = [], []
        for op in ops:
            with capture() as captured:
                out = op()
            results.append(out.numpy().tobytes())
            launches.append([launch[0].__name__ for launch in captured.launches])
            captured.replay()
            assert out.numpy().tobytes() == results[-1]
        return results, launches
    combined, combined_launches = run_all()
    assert not allocation.arrival_counters(xa.device).numpy().any()
    for names in combined_launches:
        assert names.count("reduce_rows") == 1 and "combine_partials" not in names
    monkeypatch.setattr("nbxtensor.ops.reductions.ARRIVAL_COUNTERS", 0)
    clear_all()
    apart, apart_launches = run_all()
    assert apart == combined
    assert all(names.count("combine_partials") == 1 for names in apart_launches)
    np.testing.assert_allclose(np.frombuffer(combined[7], np.float32), c.astype(np.float64).sum(0), rtol=1e-5,
                               atol=1e-4)
    monkeypatch.undo()
    spread(reduction_split_min=16, reduction_split_block=32)  # 2000 elements: 63 chunks of 32
    clear_all()
    long = to_nbx(rng.standard_normal((2, 2000)).astype(np.float32))
    with capture() as captured:
        long.sum(1)
    assert 2000 // 32 > _COMBINED_CHUNKS_MAX
    assert [launch[0].__name__ for launch in captured.launches] == ["reduce_rows", "combine_partials"]
    clear_all()


@pytest.mark.parametrize("dtype", FLOATS)
def test_vocabulary_rows(rng, spread, dtype):
    """softmax, log_softmax, logsumexp and argmax over rows split in chunks (301 elements: chunks of 128
    over the interpreter's 3 multiprocessors), against float64; a row alone and in a batch give the same
    bits. softmax's error: the float32 sum of exp over 301 terms, then one rounding to ``dtype`` (to its
    subnormal spacing for tiny probabilities)."""
    a = (rng.standard_normal((4, 301)) * 3).astype(nbx.get_dtype(dtype).numpy)
    a64 = a.astype(np.float64)
    x = to_nbx(a)
    e = np.exp(a64 - a64.max(1, keepdims=True))
    ref = e / e.sum(1, keepdims=True)
    bound = 2 * EPS[dtype] + 301 * (EPS["float64"] if dtype == "float64" else EPS["float32"])
    got = x.softmax(1).numpy().astype(np.float64)
    assert np.all(np.abs(got - ref) <= bound * ref + SUBNORMAL[dtype])
    got_log = x.log_softmax(1).numpy().astype(np.float64)
    assert np.all(np.abs(got_log - np.log(ref)) <= bound * (1 + np.abs(np.log(ref))))
    lse = np.log(np.exp(a64).sum(1))
    assert np.all(np.abs(x.logsumexp(1).numpy().astype(np.float64) - lse) <= bound * (1 + np.abs(lse)))
    assert x.argmax(1).tolist() == a64.argmax(1).tolist()
    for op in (lambda t: t.softmax(-1), lambda t: t.sum(-1), lambda t: t.logsumexp(-1)):
        batch = op(x).numpy()
        assert op(x[2]).numpy().tobytes() == batch[2].tobytes()


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32"])
def test_cumsum_over_chunks(rng, spread, dtype):
    """cumsum of long rows (one row a program, a chunk at a time, then each chunk from the sum of the
    totals before it): integers exactly; floats within the bound of 301 float32 additions and the
    output's rounding; a row alone and in a batch give the same bits."""
    if dtype == "int32":
        ints = rng.integers(-1000, 1000, (3, 301)).astype(np.int32)
        assert to_nbx(ints).cumsum(1).tolist() == np.cumsum(ints.astype(np.int64), 1).tolist()
        return
    a = rng.standard_normal((3, 301)).astype(nbx.get_dtype(dtype).numpy)
    a64 = a.astype(np.float64)
    x = to_nbx(a)
    got = x.cumsum(1).numpy()
    exact = np.cumsum(a64, 1)
    bound = 301 * EPS["float32"] * np.cumsum(np.abs(a64), 1) + EPS[dtype] * np.abs(exact)
    assert np.all(np.abs(got.astype(np.float64) - exact) <= bound)
    assert x[1].cumsum(0).numpy().tobytes() == got[1].tobytes()
    short = x[:, :60]  # unsplit rows, in steps as wide as a split chunk's
    exact = np.cumsum(a64[:, :60], 1)
    got = short.cumsum(1).numpy()
    assert np.all(np.abs(got.astype(np.float64) - exact) <= 60 * EPS["float32"] * np.cumsum(np.abs(a64[:, :60]), 1)
                  + EPS[dtype] * np.abs(exact))
    assert short[2].cumsum(0).numpy().tobytes() == got[2].tobytes()


def test_cumsum_of_a_long_row_takes_two_launches(rng, spread):
    """Split rows (more chunks in all than multiprocessors): chunk totals, then every chunk scanned from the
    exact sum of the totals before it, in two launches and no other op; a row that is not split: one
    launch. Lengths with no convenient divisor (a prime; a vocabulary's 50257 = 29 x 1733) take the same
    plan. Against float64: the carry is the
    exact sum of float32 totals rounded once, so the bound is that of the float32 additions within the
    chunks and the totals, plus the output's rounding."""
    for length in (293, 50257 // 64):
        a = rng.standard_normal((2, length)).astype(np.float32)
        x = to_nbx(a)
        with capture() as captured:
            got = x.cumsum(1)
        assert len(captured.launches) == 2
        a64 = a.astype(np.float64)
        exact = np.cumsum(a64, 1)
        bound = length * EPS["float32"] * np.cumsum(np.abs(a64), 1) + EPS["float32"] * np.abs(exact)
        assert np.all(np.abs(got.numpy().astype(np.float64) - exact) <= bound)
        assert x[1].cumsum(0).numpy().tobytes() == got.numpy()[1].tobytes()
    short = rng.standard_normal((2, 60)).astype(np.float32)
    with capture() as captured:
        to_nbx(short).cumsum(1)
    assert len(captured.launches) == 1
    # a row of more than one step of a split chunk splits, short of the reductions' split length: its
    # steps would follow each other in one program
    spread(reduction_split_block=32)
    with capture() as captured:
        got = to_nbx(short).cumsum(1).numpy()
    assert len(captured.launches) == 2
    exact = np.cumsum(short.astype(np.float64), 1)
    assert np.all(np.abs(got - exact) <= 60 * EPS["float32"] * np.cumsum(np.abs(short.astype(np.float64)), 1)
                  + EPS["float32"] * np.abs(exact))


def test_cumsum_of_one_long_row_takes_one_launch(rng, spread, monkeypatch):
    """A split row whose chunks' programs can all run at once (293 elements in 3 chunks on the interpreter's 3
    multiprocessors) is scanned in one launch: each chunk publishes its total, waits for the flags of the chunks
    before it and adds their totals up as the second of two launches does, so the row has the bits it has in a
    batch (two launches). The row's flags and its arrival counter are zero again after every call and replay
    (the next launch on the stream finds them clear); integers exactly."""
    monkeypatch.setattr(allocation, "_arrival_counters", {})
    monkeypatch.setattr(reductions, "multiprocessors", lambda dev: 3)  # the interpreter's count on a GPU too
    a = rng.standard_normal((2, 293)).astype(np.float32)
    x = to_nbx(a)
    batch = x.cumsum(1).numpy()
    for _ in range(2):
        with capture() as captured:
            got = x[1].cumsum(0)
        assert len(captured.launches) == 1 and captured.launches[0][4]["PHASE"] == 3
        assert got.numpy().tobytes() == batch[1].tobytes()
        assert not allocation.arrival_counters(got.device).numpy().any()
    got.fill_(0.0)
    captured.replay()
    assert got.numpy().tobytes() == batch[1].tobytes()
    assert not allocation.arrival_counters(got.device).numpy().any()
    ints = rng.integers(-1000, 1000, 293).astype(np.int32)
    assert to_nbx(ints).cumsum(0).tolist() == np.cumsum(ints.astype(np.int64)).tolist()
    # four chunks on three multiprocessors: two launches, as a chunk could wait on one not yet running
    with capture() as captured:
        to_nbx(rng.standard_normal(1000).astype(np.float32)).cumsum(0)
    assert len(captured.launches) == 2


def test_softmax_splits_every_row_past_the_resident_length(rng, spread):
    """A row too long for registers but within the reductions' split length (48: resident up to 32, split
    past 64) still splits into chunks (the first launch's grid spreads the row), as a vocabulary row of
    50257 must on Hopper; chunk states with -inf or NaN combine as a whole row's would: a chunk of -inf
    adds nothing, a NaN makes the row NaN. Against float64 within 2 roundings and the float32 sum."""
    a = (rng.standard_normal((3, 48)) * 3).astype(np.float32)
    with capture() as captured:
        got = to_nbx(a).softmax(1).numpy().astype(np.float64)
    assert captured.launches[0][1][1] > 1
    e = np.exp(a.astype(np.float64) - a.max(1, keepdims=True))
    ref = e / e.sum(1, keepdims=True)
    assert np.all(np.abs(got - ref) <= (2 * EPS["float32"] + 48 * EPS["float32"]) * ref + SUBNORMAL["float32"])
    b = (rng.standard_normal((3, 301)) * 3).astype(np.float32)
    b[0, :150] = -np.inf
    b[1, 200] = np.nan
    got = to_nbx(b).softmax(1).numpy().astype(np.float64)
    e = np.exp(b[0, 150:].astype(np.float64) - b[0, 150:].max())
    assert np.all(got[0, :150] == 0)
    assert np.all(np.abs(got[0, 150:] - e / e.sum()) <= 303 * EPS["float32"] * e / e.sum() + SUBNORMAL["float32"])
    assert np.isnan(got[1]).all()
    assert to_nbx(b[2:]).softmax(1).numpy().tobytes() == got[2:].astype(np.float32).tobytes()


def test_a_scan_splits_into_chunks_no_shorter_than_its_own_floor():
    """On Hopper a cumsum row of 32000 splits into 16 chunks of 2048 (a reduction's split would make 125 of 256,
    and a one-row scan then waits on 124 totals a chunk), by its length alone; a reduction keeps its own split."""
    from nbxtensor.device.facts import load as load_facts
    from nbxtensor.ops.reductions import scan_split
    hopper = load_facts("hopper")["kernels"]
    assert scan_split(32000, hopper, 132) == (2048, 16)
    assert scan_split(256000, hopper, 132) == (2048, 125)  # long rows spread over the SMs as before
    assert split_plan(32000, hopper, 132) == (256, 125)
