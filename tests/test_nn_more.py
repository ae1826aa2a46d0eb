"""nn.functional breadth (issue #29, the rest): the margin, embedding and likelihood losses, bilinear,
pdist, max_unpool, multi_head_attention_forward, the native_* normalisations, integer avg_pool and
local_response_norm, against NumPy float64 references written here; and their errors.

Tolerances: inputs are float32 and each result is a short chain of float32 operations with at most two
reductions over a handful of elements, so a few float32 ulps per step bound it: rtol=1e-5, atol=1e-5.
The attention reference goes through two matrix products and a softmax of scores of size ~10, each
adding a few ulps of those magnitudes: rtol=1e-4. Integer results compare exactly."""
import math

import numpy as np
import pytest

import nbxtensor as nbx
import nbxtensor.nn.functional as F
from tests.conftest import to_nbx

RTOL, ATOL = 1e-5, 1e-5


def close(actual, expected, rtol=RTOL, atol=ATOL):
    np.testing.assert_allclose(np.asarray(actual.numpy(), dtype=np.float64), expected, rtol=rtol, atol=atol)


@pytest.fixture
def r():
    return np.random.default_rng(2929)


def f32(r, *shape):
    return r.standard_normal(shape).astype(np.float32)


def reduce(loss, reduction):
    return {"none": loss, "mean": loss.mean(), "sum": loss.sum()}[reduction]


def signs(r, *shape):
    return np.where(r.random(shape) < 0.5, -1.0, 1.0).astype(np.float32)


# ---- pointwise and embedding losses --------------------------------------------------------------

@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_margin_ranking_hinge_soft_margin(r, reduction):
    x1, x2, y = f32(r, 5), f32(r, 5), signs(r, 5)
    a, b, t = (x.astype(np.float64) for x in (x1, x2, y))
    close(F.margin_ranking_loss(to_nbx(x1), to_nbx(x2), to_nbx(y), margin=0.25, reduction=reduction),
          reduce(np.maximum(0, 0.25 - t * (a - b)), reduction))
    close(F.hinge_embedding_loss(to_nbx(x1), to_nbx(y), margin=0.5, reduction=reduction),
          reduce(np.where(t == 1, a, np.maximum(0, 0.5 - a)), reduction))
    close(F.soft_margin_loss(to_nbx(x1), to_nbx(y), reduction=reduction), reduce(np.log1p(np.exp(-t * a)), reduction))


def test_margin_ranking_integers_compute_in_float():
    out = F.margin_ranking_loss(to_nbx([1, 2, 3]), to_nbx([3, 1, 0]), to_nbx([1, -1, 1]), margin=0.5,
                                reduction="none")
    assert out.dtype == nbx.float32
    close(out, [2.5, 1.5, 0.0])


@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_cosine_embedding_loss(r, reduction):
    x1, x2, y = f32(r, 4, 3), f32(r, 4, 3), signs(r, 4)
    a, b = x1.astype(np.float64), x2.astype(np.float64)
    cosine = (a * b).sum(1) / np.sqrt(((a * a).sum(1) + 1e-12) * ((b * b).sum(1) + 1e-12))
    expected = np.where(y == 1, 1 - cosine, np.maximum(0, cosine - 0.1))
    close(F.cosine_embedding_loss(to_nbx(x1), to_nbx(x2), to_nbx(y), margin=0.1, reduction=reduction),
          reduce(expected, reduction))


@pytest.mark.parametrize("log_input,full", [(True, False), (False, True), (True, True)])
def test_poisson_nll_loss(r, log_input, full):
    x = np.abs(f32(r, 6)) + 0.1
    y = np.array([0, 1, 2, 3, 5, 0.5], np.float32)
    a, t = x.astype(np.float64), y.astype(np.float64)
    loss = np.exp(a) - t * a if log_input else a - t * np.log(a + 1e-8)
    if full:
        positive = np.where(t > 0, t, 1)
        loss = loss + np.where(t > 1, t * np.log(positive) - t + 0.5 * np.log(2 * np.pi * positive), 0)
    close(F.poisson_nll_loss(to_nbx(x), to_nbx(y), log_input=log_input, full=full, reduction="none"), loss)


@pytest.mark.parametrize("var_shape", [(3, 4), (3,), (3, 1)])
def test_gaussian_nll_loss(r, var_shape):
    x, y = f32(r, 3, 4), f32(r, 3, 4)
    var = np.abs(f32(r, *var_shape)).astype(np.float32)
    var[0] = 0  # clamped up to eps
    v = np.maximum(var.astype(np.float64), 1e-6).reshape(var_shape + ((1,) if var_shape == (3,) else ()))
    expected = 0.5 * (np.log(v) + (x - y.astype(np.float64)) ** 2 / v) + 0.5 * math.log(2 * math.pi)
    close(F.gaussian_nll_loss(to_nbx(x), to_nbx(y), to_nbx(var), full=True, reduction="none"), expected, rtol=1e-4)
    close(F.gaussian_nll_loss(to_nbx(x), to_nbx(y), 0.5), (0.5 * (math.log(0.5) + (x - y.astype(np.float64)) ** 2
                                                                  / 0.5)).mean())


def test_multilabel_soft_margin_loss(r):
    x, y, w = f32(r, 3, 4), (r.random((3, 4)) < 0.5).astype(np.float32), np.abs(f32(r, 4))
    a = x.astype(np.float64)
    log_sigmoid = -np.log1p(np.exp(-a))
    log_sigmoid_neg = -np.log1p(np.exp(a))
    expected = (-(y * log_sigmoid + (1 - y) * log_sigmoid_neg) * w).sum(1) / 4
    close(F.multilabel_soft_margin_loss(to_nbx(x), to_nbx(y), weight=to_nbx(w), reduction="none"), expected)


# ---- class-index margin losses ------------------------------------------------------------------

@pytest.mark.parametrize("p", [1, 2])
def test_multi_margin_loss(r, p):
    x, target, w = f32(r, 4, 5), np.array([0, 4, 2, 2]), np.abs(f32(r, 5))
    a = x.astype(np.float64)
    expected = np.zeros(4)
    for n in range(4):
        y = target[n]
        for i in range(5):
            if i != y:
                expected[n] += w[y] * max(0.0, 1.0 - a[n, y] + a[n, i]) ** p / 5
    close(F.multi_margin_loss(to_nbx(x), to_nbx(target), p=p, weight=to_nbx(w), reduction="none"), expected)
    close(F.multi_margin_loss(to_nbx(x), to_nbx(target), p=p, weight=to_nbx(w)), expected.mean())


def test_multilabel_margin_loss(r):
    x = f32(r, 3, 4)
    target = np.array([[3, 0, -1, 1], [1, 2, 3, 0], [-1, 1, 2, 3]])
    a = x.astype(np.float64)
    expected = np.zeros(3)
    for n in range(3):
        labels = []
        for t in target[n]:
            if t < 0:
                break
            labels.append(t)
        for j in labels:
            for i in range(4):
                if i not in labels:
                    expected[n] += max(0.0, 1 - (a[n, j] - a[n, i])) / 4
    close(F.multilabel_margin_loss(to_nbx(x), to_nbx(target), reduction="none"), expected)
    close(F.multilabel_margin_loss(to_nbx(x[0]), to_nbx(target[0])), expected[0])


# ---- triplet losses -------------------------------------------------------------------------------

@pytest.mark.parametrize("swap", [False, True])
def test_triplet_margin_losses(r, swap):
    anchor, positive, negative = f32(r, 3, 4), f32(r, 3, 4), f32(r, 3, 4)

    def distance(u, v, p=2.0):
        return np.linalg.norm(u.astype(np.float64) - v + 1e-6, ord=p, axis=-1)
    to_negative = distance(anchor, negative, 1.0)
    if swap:
        to_negative = np.minimum(to_negative, distance(positive, negative, 1.0))
    expected = np.maximum(0, 1.0 + distance(anchor, positive, 1.0) - to_negative)
    a, p, n = to_nbx(anchor), to_nbx(positive), to_nbx(negative)
    close(F.triplet_margin_loss(a, p, n, p=1, swap=swap, reduction="none"), expected)
    l1 = lambda u, v: F.pairwise_distance(u, v, 1.0)  # noqa: E731  (the distance_function is any callable)
    close(F.triplet_margin_with_distance_loss(a, p, n, distance_function=l1, swap=swap, reduction="none"), expected)


# ---- loss errors ----------------------------------------------------------------------------------

def test_loss_errors(r):
    x = to_nbx(f32(r, 2, 3))
    with pytest.raises(RuntimeError, match="same dimension"):
        F.margin_ranking_loss(x, x, to_nbx(np.ones(2, np.float32)))
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        F.soft_margin_loss(x, x, reduction="average")
    with pytest.raises(RuntimeError, match="same size"):
        F.cosine_embedding_loss(x, to_nbx(f32(r, 2, 4)), to_nbx(np.ones(2, np.float32)))
    with pytest.raises(ValueError, match="only p == 1 and p == 2"):
        F.multi_margin_loss(x, to_nbx([0, 1]), p=3)
    with pytest.raises(IndexError, match="out of range"):
        F.multi_margin_loss(x, to_nbx([0, 3]))
    with pytest.raises(RuntimeError, match="inconsistent target size"):
        F.multi_margin_loss(x, to_nbx([0, 1, 2]))
    with pytest.raises(RuntimeError, match="int64"):
        F.multilabel_margin_loss(x, to_nbx(np.zeros((2, 3), np.int32)))
    with pytest.raises(IndexError, match="out of range"):
        F.multilabel_margin_loss(x, to_nbx([[0, 5, -1], [1, -1, 0]]))
    with pytest.raises(ValueError, match="negative"):
        F.gaussian_nll_loss(x, x, to_nbx(-np.ones((2, 3), np.float32)))
    with pytest.raises(ValueError, match="incorrect size"):
        F.gaussian_nll_loss(x, x, to_nbx(np.ones((3, 3), np.float32)))
    with pytest.raises(ValueError, match="margin must be greater than 0"):
        F.triplet_margin_with_distance_loss(x, x, x, margin=0)
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        F.triplet_margin_loss(x, x, to_nbx(f32(r, 3)))


# ---- bilinear, pdist, max_unpool ------------------------------------------------------------------

def test_bilinear(r):
    x1, x2, w, b = f32(r, 2, 3, 4), f32(r, 2, 3, 5), f32(r, 6, 4, 5), f32(r, 6)
    expected = np.einsum("bni,oij,bnj->bno", x1.astype(np.float64), w, x2.astype(np.float64)) + b
    close(F.bilinear(to_nbx(x1), to_nbx(x2), to_nbx(w), to_nbx(b)), expected)
    close(nbx.bilinear(to_nbx(x1[0]), to_nbx(x2[0]), to_nbx(w)), expected[0] - b)
    with pytest.raises(RuntimeError, match="input1 size does not match weight size"):
        F.bilinear(to_nbx(x1), to_nbx(x2), to_nbx(f32(r, 6, 3, 5)))
    with pytest.raises(RuntimeError, match="batch dimensions do not match"):
        F.bilinear(to_nbx(x1), to_nbx(x2[:, :2]), to_nbx(w))


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, float("inf")])
def test_pdist(r, p):
    x = f32(r, 5, 3)
    x[1] = x[0]  # a zero distance
    x64 = x.astype(np.float64)
    expected = []
    for i in range(5):
        for j in range(i + 1, 5):
            d = np.abs(x64[i] - x64[j])
            expected.append((d > 0).sum() if p == 0 else d.max() if p == float("inf") else (d ** p).sum() ** (1 / p))
    close(F.pdist(to_nbx(x), p), np.array(expected))
    assert tuple(nbx.pdist(to_nbx(x[:1])).shape) == (0,)
    with pytest.raises(RuntimeError, match="2D"):
        nbx.pdist(to_nbx(x[0]))
    with pytest.raises(RuntimeError, match="non-negative"):
        nbx.pdist(to_nbx(x), -1)


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_max_unpool_inverts_max_pool(r, nd):
    x = f32(r, 2, 3, *(4,) * nd)
    pool = getattr(F, f"max_pool{nd}d")
    pooled, indices = pool(to_nbx(x), 2, return_indices=True)
    out = getattr(F, f"max_unpool{nd}d")(pooled, indices, 2)
    flat = x.reshape(6, -1)
    expected = np.zeros_like(flat)
    for plane, picked in enumerate(indices.numpy().reshape(6, -1)):
        expected[plane, picked] = flat[plane, picked]
    np.testing.assert_array_equal(out.numpy(), expected.reshape(x.shape))
    larger = getattr(F, f"max_unpool{nd}d")(pooled, indices, 2, output_size=(5,) * nd)
    assert tuple(larger.shape) == (2, 3, *(5,) * nd)


def test_max_unpool_errors(r):
    pooled, indices = F.max_pool2d(to_nbx(f32(r, 1, 1, 4, 4)), 2, return_indices=True)
    with pytest.raises(RuntimeError, match="Expected shape of indices"):
        F.max_unpool2d(pooled, indices[..., :1], 2)
    with pytest.raises(RuntimeError, match="invalid max index"):
        F.max_unpool2d(pooled, indices + 100, 2)
    with pytest.raises(ValueError, match="invalid output_size"):
        F.max_unpool2d(pooled, indices, 2, output_size=(9, 9))
    with pytest.raises(RuntimeError, match="int64"):
        F.max_unpool2d(pooled, indices.to(nbx.int32), 2)


# ---- native normalisations ------------------------------------------------------------------------

def test_native_layer_norm(r):
    x, w, b = f32(r, 2, 3, 4), f32(r, 3, 4), f32(r, 3, 4)
    x64 = x.astype(np.float64)
    mean = x64.mean((1, 2), keepdims=True)
    rstd = 1 / np.sqrt(x64.var((1, 2), keepdims=True) + 1e-5)
    out, got_mean, got_rstd = nbx.native_layer_norm(to_nbx(x), (3, 4), to_nbx(w), to_nbx(b), 1e-5)
    close(out, (x64 - mean) * rstd * w + b)
    close(got_mean, mean)
    close(got_rstd, rstd)


def test_native_batch_norm_inference(r):
    x, w, b = f32(r, 2, 3, 4), f32(r, 3), f32(r, 3)
    mean, var = f32(r, 3), np.abs(f32(r, 3)) + 0.5
    expected = (x - mean[:, None].astype(np.float64)) / np.sqrt(var[:, None] + 1e-5) * w[:, None] + b[:, None]
    for op in (nbx.native_batch_norm, nbx._native_batch_norm_legit):
        out, save_mean, save_invstd = op(to_nbx(x), to_nbx(w), to_nbx(b), to_nbx(mean), to_nbx(var), False, 0.1, 1e-5)
        close(out, expected)
        assert tuple(save_mean.shape) == tuple(save_invstd.shape) == (0,)
        with pytest.raises(NotImplementedError, match="training=True"):
            op(to_nbx(x), to_nbx(w), to_nbx(b), to_nbx(mean), to_nbx(var), True, 0.1, 1e-5)
    with pytest.raises(NotImplementedError, match="training=True"):
        nbx._native_batch_norm_legit(to_nbx(x), None, None, True, 0.1, 1e-5)


# ---- integer average pooling, local_response_norm --------------------------------------------------

def test_avg_pool_integers_truncate():
    x = np.array([[[1, 2, 4, 7, -3, -4, 5]]])
    # the window sums' quotients rounded toward zero, as torch's integer division
    np.testing.assert_array_equal(F.avg_pool1d(to_nbx(x), 2).numpy(), [[[1, 5, -3]]])
    np.testing.assert_array_equal(F.avg_pool1d(to_nbx(x), 3, 1, 1).numpy(), [[[1, 2, 4, 2, 0, 0, 0]]])
    np.testing.assert_array_equal(F.avg_pool2d(to_nbx(x[None]), (1, 3), 1, (0, 1), divisor_override=2).numpy(),
                                  [[[[1, 3, 6, 4, 0, -1, 0]]]])
    with pytest.raises(NotImplementedError, match="int32"):  # torch averages int64 only
        F.avg_pool1d(to_nbx(x.astype(np.int32)), 2)


def test_local_response_norm_integers():
    x = np.array([[[1, 2], [3, 4], [5, 6]]])
    squares = np.pad(x.astype(np.int64) ** 2, ((0, 0), (1, 0), (0, 0)))
    window = (squares[:, :-1] + squares[:, 1:]) // 2  # the integer mean truncates, as torch's
    out = F.local_response_norm(to_nbx(x), 2, alpha=1.0, beta=0.5, k=1.0)
    assert out.dtype == nbx.float32
    close(out, x / np.sqrt(window + 1.0))


# ---- multi_head_attention_forward -----------------------------------------------------------------

def _softmax(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("need_weights", [True, False])
def test_multi_head_attention_forward(r, need_weights):
    tgt, src, batch, embed, heads = 3, 4, 2, 4, 2
    q, k, v = f32(r, tgt, batch, embed), f32(r, src, batch, embed), f32(r, src, batch, embed)
    w_in, b_in, w_out, b_out = f32(r, 3 * embed, embed), f32(r, 3 * embed), f32(r, embed, embed), f32(r, embed)
    mask = np.triu(np.ones((tgt, src), bool), 1)
    out, weights = F.multi_head_attention_forward(
        to_nbx(q), to_nbx(k), to_nbx(v), embed, heads, to_nbx(w_in), to_nbx(b_in), None, None, False, 0.0,
        to_nbx(w_out), to_nbx(b_out), training=False, need_weights=need_weights, attn_mask=to_nbx(mask))
    w64 = w_in.astype(np.float64)
    projected = [x.astype(np.float64) @ w64[i * embed:(i + 1) * embed].T + b_in[i * embed:(i + 1) * embed]
                 for i, x in enumerate((q, k, v))]
    head_dim = embed // heads
    # (batch, heads, length, head_dim)
    split = [p.reshape(p.shape[0], batch, heads, head_dim).transpose(1, 2, 0, 3) for p in projected]
    scores = split[0] @ split[1].transpose(0, 1, 3, 2) / math.sqrt(head_dim) + np.where(mask, -np.inf, 0)
    probabilities = _softmax(scores)
    attended = (probabilities @ split[2]).transpose(2, 0, 1, 3).reshape(tgt, batch, embed)
    close(out, attended @ w_out.astype(np.float64).T + b_out, rtol=1e-4, atol=1e-4)
    if need_weights:
        close(weights, probabilities.mean(1), rtol=1e-4, atol=1e-5)
    else:
        assert weights is None


def test_multi_head_attention_forward_refuses_dropout(r):
    x, w = to_nbx(f32(r, 3, 4)), to_nbx(f32(r, 12, 4))
    with pytest.raises(NotImplementedError, match="dropout_p"):
        F.multi_head_attention_forward(x, x, x, 4, 2, w, None, None, None, False, 0.5, to_nbx(f32(r, 4, 4)), None)
    with pytest.raises(AssertionError, match="not divisible"):
        F.multi_head_attention_forward(x, x, x, 4, 3, w, None, None, None, False, 0.0, to_nbx(f32(r, 4, 4)), None)


# ---- ATen forms under torch's names ---------------------------------------------------------------

def test_aten_names(r):
    x = to_nbx(f32(r, 1, 2, 6, 8))
    grid = to_nbx(np.clip(f32(r, 1, 3, 4, 2), -1, 1))
    np.testing.assert_array_equal(nbx.grid_sampler_2d(x, grid, 0, 0, False).numpy(),
                                  F.grid_sample(x, grid, align_corners=False).numpy())
    resized = F.interpolate(x, size=(3, 5), mode="bilinear", antialias=True, align_corners=False)
    for call in ({"output_size": (3, 5), "align_corners": False, "scale_factors": None},
                 {"output_size": (3, 5), "align_corners": False, "scales_h": None, "scales_w": None}):
        np.testing.assert_array_equal(nbx._upsample_bilinear2d_aa(x, **call).numpy(), resized.numpy())
    out, mean, rstd = nbx.native_group_norm(x, None, None, 1, 2, 48, 2, 1e-5)
    assert tuple(mean.shape) == tuple(rstd.shape) == (1, 2)


# ---- fractional_max_pool ---------------------------------------------------------------------------

def _fractional_starts(u, size, kernel, out):
    """ATen's window offsets, in float32 as ATen computes them for a float32 input."""
    if out == 1:
        return [size - kernel]
    alpha = np.float32(size - kernel) / np.float32(out - 1)
    starts = [int((np.float32(i) + u) * alpha) - int(u * alpha) for i in range(out - 1)]
    return starts + [size - kernel]


@pytest.mark.parametrize("nd,shape,kernel,out", [(2, (2, 3, 9, 8), (3, 2), (4, 5)), (2, (2, 7, 7), (2, 2), (3, 3)),
                                                 (3, (1, 2, 6, 5, 7), (2, 2, 3), (3, 2, 4))])
def test_fractional_max_pool_with_samples(r, nd, shape, kernel, out):
    x = f32(r, *shape)
    batched = x.reshape((-1,) * (len(shape) == nd + 1) + shape)
    planes = batched.shape[:2]
    samples = r.random((*planes, nd)).astype(np.float32)
    expected = np.zeros((*planes, *out), np.float32)
    where = np.zeros((*planes, *out), np.int64)
    for n, c in np.ndindex(*planes):
        # the 2-d pool's samples are (width, height), the 3-d one's (depth, height, width)
        order = (1, 0) if nd == 2 else (0, 1, 2)
        starts = [_fractional_starts(samples[n, c, order[d]], shape[-nd + d], kernel[d], out[d]) for d in range(nd)]
        plane = batched[n, c]
        for cell in np.ndindex(*out):
            corner = [starts[d][cell[d]] for d in range(nd)]
            window = plane[tuple(slice(s, s + k) for s, k in zip(corner, kernel))]
            local = np.unravel_index(np.argmax(window), window.shape)
            expected[(n, c, *cell)] = window[local]
            where[(n, c, *cell)] = np.ravel_multi_index(tuple(s + i for s, i in zip(corner, local)), plane.shape)
    pool = getattr(F, f"fractional_max_pool{nd}d")
    values, indices = pool(to_nbx(x), kernel, output_size=out, return_indices=True,
                           _random_samples=to_nbx(samples.reshape(*shape[:-nd], nd) if len(shape) == nd + 2
                                                  else samples))
    np.testing.assert_array_equal(values.numpy(), expected.reshape(*shape[:-nd], *out))
    np.testing.assert_array_equal(indices.numpy(), where.reshape(*shape[:-nd], *out))


def test_fractional_max_pool_draws_and_errors(r):
    x = to_nbx(f32(r, 1, 2, 8, 8))
    drawn = F.fractional_max_pool2d(x, 2, output_ratio=0.5)
    assert tuple(drawn.shape) == (1, 2, 4, 4)
    assert set(drawn.numpy().ravel()) <= set(x.numpy().ravel())
    with pytest.raises(ValueError, match="output_size or an output_ratio"):
        F.fractional_max_pool2d(x, 2)
    with pytest.raises(RuntimeError, match="too large"):
        F.fractional_max_pool2d(x, 3, output_size=7)
    with pytest.raises(RuntimeError, match="_random_samples"):
        F.fractional_max_pool2d(x, 2, output_size=4, _random_samples=to_nbx(np.zeros((1, 2, 3), np.float32)))


# ---- ctc_loss --------------------------------------------------------------------------------------

def _ctc_brute_force(log_probs, target, blank):
    """-log of the summed probability of every frame path that collapses (repeats merged, then blanks
    dropped) to ``target``: all C^T paths enumerated, so only for tiny T and C."""
    frames, classes = log_probs.shape
    total = 0.0
    for path in np.ndindex(*(classes,) * frames):
        collapsed = [c for i, c in enumerate(path) if (i == 0 or c != path[i - 1]) and c != blank]
        if collapsed == list(target):
            total += math.exp(sum(log_probs[t, c] for t, c in enumerate(path)))
    return -math.log(total) if total > 0 else math.inf


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_ctc_loss_against_all_alignments(r, reduction):
    frames, batch, classes = 5, 3, 3
    logits = r.standard_normal((frames, batch, classes))
    log_probs = (logits - np.log(np.exp(logits).sum(-1, keepdims=True))).astype(np.float32)
    targets = np.array([[1, 1, 2], [2, 1, 0], [1, 2, 1]])  # a repeated label, a short target, a full one
    input_lengths, target_lengths = [5, 4, 2], [2, 2, 3]  # the last cannot fit its labels in 2 frames
    losses = np.array([_ctc_brute_force(log_probs[:input_lengths[n], n].astype(np.float64),
                                        targets[n, :target_lengths[n]], 0) for n in range(batch)])
    got = F.ctc_loss(to_nbx(log_probs), to_nbx(targets), input_lengths, target_lengths, reduction=reduction)
    if reduction == "none":
        close(got, losses)
    zeroed = np.where(np.isinf(losses), 0, losses)
    expected = {"none": zeroed, "sum": zeroed.sum(), "mean": (zeroed / np.maximum(target_lengths, 1)).mean()}
    close(F.ctc_loss(to_nbx(log_probs), to_nbx(targets), to_nbx(input_lengths), to_nbx(target_lengths),
                     reduction=reduction, zero_infinity=True), expected[reduction])


def test_ctc_loss_concatenated_unbatched_and_errors(r):
    logits = r.standard_normal((4, 3))
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    expected = _ctc_brute_force(log_probs, [2, 0], blank=1)
    close(F.ctc_loss(to_nbx(log_probs), to_nbx([2, 0]), to_nbx(4), to_nbx(2), blank=1, reduction="none"), expected)
    batched = to_nbx(log_probs[:, None].repeat(2, 1))
    close(F.ctc_loss(batched, to_nbx([2, 0, 2]), [4, 3], [2, 1], blank=1, reduction="none"),
          [expected, _ctc_brute_force(log_probs[:3], [2], blank=1)])
    with pytest.raises(RuntimeError, match="blank must be in label range"):
        F.ctc_loss(batched, to_nbx([[1, 2]] * 2), [4, 4], [2, 2], blank=3)
    with pytest.raises(RuntimeError, match="input_lengths"):
        F.ctc_loss(batched, to_nbx([[1, 2]] * 2), [5, 4], [2, 2])
    with pytest.raises(RuntimeError, match="exceed"):
        F.ctc_loss(batched, to_nbx([[1, 2]] * 2), [4, 4], [3, 2])
    with pytest.raises(IndexError, match="out of range"):
        F.ctc_loss(batched, to_nbx([[1, 7]] * 2), [4, 4], [2, 2])
