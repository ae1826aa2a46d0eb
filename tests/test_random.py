"""Seeded random streams: distributions (Kolmogorov-Smirnov and chi-square through SciPy, moment
bounds of five standard errors elsewhere), reproducibility from a seed, independence of launch
order, half-precision outputs, and the sampling ops built on the streams.

Every draw uses a fixed seed, so each statistical test is deterministic; the thresholds (p > 1e-4,
five standard errors) say how unlikely a failure of a correct generator would have been."""
import numpy as np
import pytest

import nbxtensor as nbx
from tests.conftest import TEST_DEVICE, to_nbx

stats = pytest.importorskip("scipy.stats")
N = 20000


def gen(seed=0):
    return nbx.Generator(device=TEST_DEVICE).manual_seed(seed)


@pytest.mark.parametrize("dtype", [nbx.float32, nbx.float64])
def test_rand_and_randn_follow_their_distributions(dtype):
    g = gen(1)
    uniform = nbx.rand(N, generator=g, dtype=dtype, device=TEST_DEVICE).numpy()
    normal = nbx.randn(N, generator=g, dtype=dtype, device=TEST_DEVICE).numpy()
    assert uniform.dtype == normal.dtype == dtype.numpy
    assert uniform.min() >= 0 and uniform.max() < 1
    assert stats.kstest(uniform, "uniform").pvalue > 1e-4
    assert stats.kstest(normal, "norm").pvalue > 1e-4


def test_float64_uniforms_have_more_than_float32_resolution():
    values = nbx.rand(1000, generator=gen(2), dtype=nbx.float64, device=TEST_DEVICE).numpy()
    assert np.any(values * 2 ** 24 != np.floor(values * 2 ** 24))


def test_in_place_fills_follow_their_distributions():
    g = gen(3)
    x = nbx.empty(N, device=TEST_DEVICE)
    # frozen distributions' cdfs: some SciPy builds fail inside kstest(name, args=) (ndtr's arguments)
    assert stats.kstest(x.uniform_(-2, 3, generator=g).numpy(), stats.uniform(-2, 5).cdf).pvalue > 1e-4
    assert stats.kstest(x.normal_(1.5, 0.5, generator=g).numpy(), stats.norm(1.5, 0.5).cdf).pvalue > 1e-4
    assert stats.kstest(x.exponential_(2.0, generator=g).numpy(), stats.expon(0, 0.5).cdf).pvalue > 1e-4


def test_in_place_fill_of_a_strided_view_stays_inside_it():
    base = nbx.zeros(4, 6, device=TEST_DEVICE)
    view = base[:, ::2]
    view.uniform_(1, 2, generator=gen(4))
    got = base.numpy()
    assert np.all(got[:, 1::2] == 0)
    assert np.all((got[:, ::2] >= 1) & (got[:, ::2] < 2))
    assert np.array_equal(got[:, ::2], nbx.rand(4, 3, generator=gen(4), device=TEST_DEVICE).numpy() + 1)


def test_randint_is_uniform_over_its_range_and_respects_bounds():
    g = gen(5)
    values = nbx.randint(-3, 4, (N,), generator=g, device=TEST_DEVICE).numpy()
    assert values.dtype == np.int64 and values.min() == -3 and values.max() == 3
    assert stats.chisquare(np.bincount(values + 3)).pvalue > 1e-4
    wide = nbx.randint(2 ** 40, size=(N,), generator=g, device=TEST_DEVICE).numpy()
    assert wide.min() >= 0 and wide.max() < 2 ** 40 and wide.max() > 2 ** 39
    assert stats.kstest(wide / 2 ** 40, "uniform").pvalue > 1e-4
    small = nbx.randint(10, (3, 4), generator=g, dtype=nbx.uint8, device=TEST_DEVICE)
    assert small.dtype == nbx.uint8 and small.numpy().max() < 10
    like = nbx.randint_like(small, 5, 7, generator=g)
    assert like.dtype == nbx.uint8 and set(np.unique(like.numpy())) <= {5, 6}
    with pytest.raises(RuntimeError):
        nbx.randint(3, 3, (2,))
    with pytest.raises(RuntimeError):
        nbx.randint(0, 300, (2,), dtype=nbx.uint8)


@pytest.mark.parametrize("dtype,digits", [(nbx.float16, 11), (nbx.bfloat16, 8)])
def test_half_precision_outputs(dtype, digits):
    g = gen(6)
    uniform = nbx.rand(4000, generator=g, dtype=dtype, device=TEST_DEVICE)
    assert uniform.dtype == dtype
    u = uniform.numpy().astype(np.float64)
    # drawn on the type's own grid, so rounding never reaches 1
    assert u.min() >= 0 and u.max() < 1 and np.array_equal(u * 2 ** digits, np.floor(u * 2 ** digits))
    assert abs(u.mean() - 0.5) < 5 * np.sqrt(1 / 12 / u.size)
    normal = nbx.randn_like(uniform, generator=g).numpy().astype(np.float64)
    assert abs(normal.mean()) < 5 / np.sqrt(normal.size)
    assert abs(normal.var() - 1) < 5 * np.sqrt(2 / normal.size)


def test_a_seed_reproduces_a_run_and_different_seeds_differ():
    def run(seed):
        g = gen(seed)
        return [nbx.rand(7, generator=g, device=TEST_DEVICE).numpy(),
                nbx.randn(3, 5, generator=g, device=TEST_DEVICE).numpy(),
                nbx.randint(100, (9,), generator=g, device=TEST_DEVICE).numpy()]
    first, again, other = run(11), run(11), run(12)
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    assert not np.array_equal(first[0], other[0]) and not np.array_equal(first[1], other[1])
    nbx.manual_seed(11)
    global_first = nbx.rand(7, device=TEST_DEVICE).numpy()
    nbx.manual_seed(11)
    assert np.array_equal(global_first, nbx.rand(7, device=TEST_DEVICE).numpy())
    assert nbx.initial_seed() == 11


def test_offsets_advance_by_words_rounded_to_four_and_order_of_draws_does_not_matter():
    g = gen(21)
    a = nbx.rand(5, generator=g, device=TEST_DEVICE).numpy()
    assert g.get_offset() == 8
    b = nbx.randn(3, generator=g, dtype=nbx.float64, device=TEST_DEVICE).numpy()  # two words each
    assert g.get_offset() == 16
    c = nbx.rand(10, generator=g, device=TEST_DEVICE).numpy()
    # each draw is a function of (seed, offset) alone: drawn out of order from matching offsets
    assert np.array_equal(c, nbx.rand(10, generator=gen(21).set_offset(16), device=TEST_DEVICE).numpy())
    assert np.array_equal(b, nbx.randn(3, generator=gen(21).set_offset(8), dtype=nbx.float64,
                                       device=TEST_DEVICE).numpy())
    assert np.array_equal(a, nbx.rand(5, generator=gen(21), device=TEST_DEVICE).numpy())
    # and element i depends on i, not on the launch's length or grid
    long = nbx.rand(3000, generator=gen(21), device=TEST_DEVICE).numpy()
    assert np.array_equal(long[:5], a)


def test_state_round_trips_and_seed_draws_fresh_entropy():
    g = gen(31)
    nbx.rand(6, generator=g, device=TEST_DEVICE)
    state = g.get_state()
    assert state.dtype == nbx.uint8 and tuple(state.shape) == (16,)
    expected = nbx.rand(6, generator=g, device=TEST_DEVICE).numpy()
    other = nbx.Generator(device=TEST_DEVICE).set_state(state)
    assert other.initial_seed() == 31 and other.get_offset() == 8
    assert np.array_equal(nbx.rand(6, generator=other, device=TEST_DEVICE).numpy(), expected)
    assert g.seed() != gen(0).seed() or g.seed() != g.seed()
    assert nbx.Generator().manual_seed(-1).initial_seed() == 2 ** 64 - 1
    with pytest.raises(RuntimeError):
        g.set_offset(3)


def test_bernoulli_with_tensor_and_float_probabilities():
    g = gen(41)
    p = to_nbx(np.array([0.0, 1.0, 0.0, 1.0], np.float32))
    assert nbx.bernoulli(p, generator=g).tolist() == [0.0, 1.0, 0.0, 1.0]
    draws = nbx.bernoulli(nbx.zeros(N, device=TEST_DEVICE), 0.3, generator=g).numpy()
    assert set(np.unique(draws)) == {0.0, 1.0}
    assert abs(draws.mean() - 0.3) < 5 * np.sqrt(0.3 * 0.7 / N)
    half = nbx.full((N,), 0.25, dtype=nbx.bfloat16, device=TEST_DEVICE)
    assert abs(half.bernoulli(generator=g).numpy().astype(np.float64).mean() - 0.25) < 5 * np.sqrt(0.1875 / N)
    rows = nbx.zeros(2, 3, device=TEST_DEVICE).bernoulli_(to_nbx(np.array([1.0, 0.0, 1.0], np.float32)),
                                                           generator=g)
    assert rows.tolist() == [[1.0, 0.0, 1.0]] * 2


def test_multinomial_with_replacement_matches_the_weights():
    weights = np.array([1.0, 0.0, 3.0, 2.0, 4.0])
    samples = nbx.multinomial(to_nbx(weights.astype(np.float32)), N, True, generator=gen(51)).numpy()
    counts = np.bincount(samples, minlength=5)
    assert counts[1] == 0
    assert stats.chisquare(counts[[0, 2, 3, 4]], N * weights[[0, 2, 3, 4]] / weights.sum()).pvalue > 1e-4


def test_multinomial_without_replacement_never_repeats():
    g = gen(61)
    weights = np.random.default_rng(0).random((10, 20)).astype(np.float32)
    weights[:, 3] = 0
    samples = nbx.multinomial(to_nbx(weights), 19, generator=g).numpy()
    assert samples.shape == (10, 19) and samples.dtype == np.int64
    assert all(len(set(row)) == 19 and 3 not in row for row in samples)
    # the first draw follows the weights: each row's first pick among [1, 0, 3] weights
    firsts = nbx.multinomial(to_nbx(np.tile([[1.0, 0.0, 3.0]], (400, 1)).astype(np.float32)), 2, generator=g)
    counts = np.bincount(firsts.numpy()[:, 0], minlength=3)
    assert counts[1] == 0 and stats.binomtest(counts[2], 400, 0.75).pvalue > 1e-4
    with pytest.raises(RuntimeError):
        nbx.multinomial(to_nbx(weights), 21)


def test_randperm_is_a_permutation():
    for n in (0, 1, 17, 300):
        perm = nbx.randperm(n, generator=gen(n), device=TEST_DEVICE).numpy()
        assert perm.dtype == np.int64 and np.array_equal(np.sort(perm), np.arange(n))
    assert not np.array_equal(nbx.randperm(300, generator=gen(1), device=TEST_DEVICE).numpy(), np.arange(300))
    assert nbx.randperm(5, dtype=nbx.int32, device=TEST_DEVICE).dtype == nbx.int32


@pytest.mark.parametrize("dtype", [np.float32, "bfloat16"])
def test_dropout_training_masks_and_scales_and_inference_returns_the_input(dtype):
    F = nbx.nn.functional
    x = nbx.tensor(np.linspace(1, 2, N).astype(np.float32), device=TEST_DEVICE).to(getattr(nbx, str(dtype))
                                                                                  if isinstance(dtype, str) else
                                                                                  nbx.float32)
    assert F.dropout(x, 0.4, training=False) is x
    out = F.dropout(x, 0.4, generator=gen(71))
    got, source = out.numpy().astype(np.float64), x.numpy().astype(np.float64)
    kept = got != 0
    assert abs(kept.mean() - 0.6) < 5 * np.sqrt(0.24 / N)
    # kept values are scaled by 1 / (1 - p) in float32, as ATen does, then rounded to the input's type
    expected = (x.to(nbx.float32).numpy()[kept] * np.float32(1 / 0.6)).astype(x.dtype.numpy).astype(np.float64)
    assert np.array_equal(got[kept], expected)
    assert np.all(source != 0)
    same = x.clone()
    assert F.dropout(same, 0.4, inplace=True, generator=gen(71)) is same
    assert np.array_equal(same.numpy().astype(np.float64), got)
    assert np.all(F.dropout(x, 1.0).numpy() == 0)


def test_cuda_seeding_seeds_the_gpu_streams_and_is_a_no_op_without_cuda():
    nbx.cuda.manual_seed(5)
    nbx.cuda.manual_seed_all(5)
    nbx.cuda.seed()
    if not nbx.cuda.is_available():
        return  # as torch.cuda's, seeding without CUDA does nothing
    nbx.cuda.manual_seed(21)
    assert nbx.cuda.initial_seed() == 21
    first = nbx.rand(6, device="cuda").numpy()
    nbx.cuda.manual_seed_all(21)
    assert np.array_equal(first, nbx.rand(6, device="cuda").numpy())


@pytest.mark.parametrize("weights, samples, replacement, message", [
    ([[0.0, 1.0, 0.0], [1.0, 1.0, 1.0]], 2, False, "fewer categories of positive weight than the 2 samples"),
    ([0.0, 0.0, 0.0], 1, True, "weights summing to zero"),
    ([1.0, -0.5, 2.0], 1, True, "finite and non-negative"),
    ([1.0, float("inf")], 1, False, "finite and non-negative"),
    ([float("nan"), 1.0], 1, True, "finite and non-negative"),
])
def test_multinomial_refuses_weights_that_define_no_distribution(weights, samples, replacement, message):
    """As torch: never a silently wrong sample (without the check, zero-weight categories come back). The
    check stays on the device, so on a GPU it raises when the result is read."""
    with pytest.raises(RuntimeError, match=message):
        nbx.multinomial(to_nbx(np.array(weights, np.float32)), samples, replacement, generator=gen(1)).numpy()
