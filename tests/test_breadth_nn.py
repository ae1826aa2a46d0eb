"""nn.functional breadth (issue #29): distances, normalisations, prelu/rrelu, channel dropout and
shuffle, embedding_bag and the losses, against NumPy float64 references written here.

Tolerances: inputs are float32 and every result is a short chain of float32 operations and at most one
reduction over a handful of elements, so a relative error of a few float32 ulps per operation bounds it;
rtol=1e-5, atol=1e-6 leaves room for ten such steps. float64 inputs are checked at 1e-12."""
import math

import numpy as np
import pytest

import nbxtensor as nbx
import nbxtensor.nn.functional as F
from nbxtensor.ops import registry
from tests.conftest import to_nbx

RTOL, ATOL = 1e-5, 1e-6


def close(actual, expected, rtol=RTOL, atol=ATOL):
    np.testing.assert_allclose(np.asarray(actual.numpy(), dtype=np.float64), expected, rtol=rtol, atol=atol)


@pytest.fixture
def r():
    return np.random.default_rng(29)


def f32(r, *shape):
    return r.standard_normal(shape).astype(np.float32)


# ---- normalize, distances -----------------------------------------------------------------------

@pytest.mark.parametrize("p,dim", [(2.0, 1), (1.0, -1), (3.0, 0), (float("inf"), 1)])
def test_normalize(r, p, dim):
    x = f32(r, 2, 3, 4)
    x64 = x.astype(np.float64)
    norm = np.linalg.norm(np.moveaxis(x64, dim, -1), ord=p, axis=-1, keepdims=True)
    expected = x64 / np.moveaxis(np.maximum(norm, 1e-12), -1, dim)
    close(F.normalize(to_nbx(x), p=p, dim=dim), expected)


def test_normalize_eps_and_out(r):
    x = np.zeros((2, 3), np.float32)
    close(F.normalize(to_nbx(x)), np.zeros((2, 3)))
    out = nbx.empty(2, 3)
    y = f32(r, 2, 3)
    F.normalize(to_nbx(y), out=out)
    close(out, y / np.linalg.norm(y.astype(np.float64), axis=1, keepdims=True))
    with pytest.raises(IndexError):
        F.normalize(to_nbx(y), dim=2)


def test_cosine_similarity_broadcast(r):
    a, b = f32(r, 3, 4), f32(r, 1, 4)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    expected = (a64 * b64).sum(1) / np.linalg.norm(a64, axis=1) / np.linalg.norm(b64, axis=1)
    close(F.cosine_similarity(to_nbx(a), to_nbx(b)), expected)
    close(F.cosine_similarity(to_nbx(a), to_nbx(b), dim=-1), expected)
    # a zero vector: the eps floor makes the similarity 0, not NaN
    close(F.cosine_similarity(to_nbx(np.zeros((2, 3), np.float32)), to_nbx(f32(r, 2, 3))), np.zeros(2))
    with pytest.raises(RuntimeError):
        F.cosine_similarity(to_nbx(a), to_nbx(f32(r, 2, 4)))


def test_pairwise_distance(r):
    a, b = f32(r, 3, 5), f32(r, 3, 5)
    d = a.astype(np.float64) - b + 1e-6
    close(F.pairwise_distance(to_nbx(a), to_nbx(b)), np.sqrt((d * d).sum(-1)))
    close(F.pairwise_distance(to_nbx(a), to_nbx(b), p=1.0, keepdim=True), np.abs(d).sum(-1, keepdims=True))
    close(F.pairwise_distance(to_nbx(a[0]), to_nbx(b[0])), np.sqrt((d[0] * d[0]).sum()))


@pytest.mark.parametrize("p", [2.0, 1.0, 0.0, float("inf"), 1.5])
def test_cdist(r, p):
    a, b = f32(r, 2, 3, 4), f32(r, 1, 5, 4)
    diff = np.abs(a.astype(np.float64)[:, :, None, :] - b[:, None, :, :])
    if p == 0:
        expected = (diff != 0).sum(-1)
    elif math.isinf(p):
        expected = diff.max(-1)
    else:
        expected = (diff ** p).sum(-1) ** (1 / p)
    out = nbx.cdist(to_nbx(a), to_nbx(b), p=p)
    assert tuple(out.shape) == (2, 3, 5)
    close(out, expected)


def test_cdist_small_distances_do_not_cancel():
    # the matrix-product form would give sqrt(|a|^2 + |b|^2 - 2ab) = 0 or garbage here in float32
    a = np.array([[1000.0, 1000.0]], np.float32)
    b = np.array([[1000.0, 1000.001]], np.float32)
    expected = np.abs(b.astype(np.float64) - a).max()
    close(nbx.cdist(to_nbx(a), to_nbx(b), compute_mode="use_mm_for_euclid_dist"), [[expected]], rtol=1e-6)


def test_cdist_errors(r):
    with pytest.raises(RuntimeError, match="same number of columns"):
        nbx.cdist(to_nbx(f32(r, 2, 3)), to_nbx(f32(r, 2, 4)))
    with pytest.raises(RuntimeError, match="at least 2D"):
        nbx.cdist(to_nbx(f32(r, 3)), to_nbx(f32(r, 2, 3)))
    with pytest.raises(RuntimeError, match="floating-point"):
        nbx.cdist(to_nbx(np.ones((2, 3), np.int64)), to_nbx(np.ones((2, 3), np.int64)))
    with pytest.raises(RuntimeError, match="non-negative"):
        nbx.cdist(to_nbx(f32(r, 2, 3)), to_nbx(f32(r, 2, 3)), p=-1)
    with pytest.raises(ValueError, match="compute_mode"):
        nbx.cdist(to_nbx(f32(r, 2, 3)), to_nbx(f32(r, 2, 3)), compute_mode="fast")
    assert tuple(nbx.cdist(to_nbx(f32(r, 0, 3)), to_nbx(f32(r, 2, 3))).shape) == (0, 2)


# ---- instance norm, local response norm -----------------------------------------------------------

def test_instance_norm(r):
    x = f32(r, 2, 3, 5)
    w, b = f32(r, 3), f32(r, 3)
    x64 = x.astype(np.float64)
    mean, var = x64.mean(-1, keepdims=True), x64.var(-1, keepdims=True)
    normed = (x64 - mean) / np.sqrt(var + 1e-5)
    close(F.instance_norm(to_nbx(x)), normed, rtol=1e-4, atol=1e-5)
    close(F.instance_norm(to_nbx(x), weight=to_nbx(w), bias=to_nbx(b)), normed * w[:, None] + b[:, None],
          rtol=1e-4, atol=1e-5)
    rm, rv = f32(r, 3), np.abs(f32(r, 3)) + 0.5
    close(F.instance_norm(to_nbx(x), to_nbx(rm), to_nbx(rv), use_input_stats=False),
          (x64 - rm[:, None]) / np.sqrt(rv[:, None] + 1e-5))
    with pytest.raises(NotImplementedError, match="running_mean"):
        F.instance_norm(to_nbx(x), to_nbx(rm), to_nbx(rv))
    with pytest.raises(ValueError, match="more than 1 spatial element"):
        F.instance_norm(to_nbx(f32(r, 2, 3, 1)))


@pytest.mark.parametrize("size", [1, 2, 3])
def test_local_response_norm(r, size):
    x = f32(r, 2, 4, 3)
    x64 = x.astype(np.float64)
    padded = np.pad(x64 * x64, ((0, 0), (size // 2, (size - 1) // 2), (0, 0)))
    window = np.stack([padded[:, c:c + size].sum(1) for c in range(4)], 1) / size
    expected = x64 / (1.0 + 1e-2 * window) ** 0.75
    close(F.local_response_norm(to_nbx(x), size, alpha=1e-2), expected)
    with pytest.raises(ValueError, match="3D or higher"):
        F.local_response_norm(to_nbx(f32(r, 2, 3)), 2)


# ---- prelu, rrelu ----------------------------------------------------------------------------------

def test_prelu(r):
    x = f32(r, 2, 3, 4)
    w = np.array([0.1, -0.2, 0.3], np.float32)
    close(F.prelu(to_nbx(x), to_nbx(w)), np.where(x > 0, x, w[:, None] * x.astype(np.float64)))
    close(F.prelu(to_nbx(x), to_nbx(w[:1])), np.where(x > 0, x, 0.1 * x.astype(np.float64)))
    close(F.prelu(to_nbx(x[0, 0, 0]), to_nbx(w[:1])), np.where(x[0, 0, 0] > 0, x[0, 0, 0], 0.1 * x[0, 0, 0]))
    with pytest.raises(RuntimeError, match="Mismatch of parameter numbers and input channel size"):
        F.prelu(to_nbx(x), to_nbx(f32(r, 4)))
    with pytest.raises(RuntimeError, match="Not allow zero-dim"):
        F.prelu(to_nbx(x[0, 0, 0]), to_nbx(w))


def test_rrelu(r):
    x = f32(r, 3, 4)
    slope = (1 / 8 + 1 / 3) / 2
    close(F.rrelu(to_nbx(x)), np.where(x > 0, x, slope * x.astype(np.float64)))
    y = F.rrelu(to_nbx(x), 0.1, 0.3, training=True).numpy()
    neg = x < 0
    assert np.array_equal(y[~neg], x[~neg])
    ratio = y[neg] / x[neg]
    assert np.all((ratio >= 0.1 - 1e-6) & (ratio <= 0.3 + 1e-6))
    t = to_nbx(x)
    assert F.rrelu_(t) is t
    with pytest.raises(RuntimeError, match="Lower bound"):
        F.rrelu(to_nbx(x), 0.5, 0.1)


# ---- channel dropout, channel shuffle ------------------------------------------------------------------

@pytest.mark.parametrize("nd,shape", [(1, (2, 3, 4)), (1, (3, 4)), (2, (2, 3, 2, 2)), (3, (2, 3, 2, 2, 1)),
                                      (3, (3, 2, 2, 1))])
def test_channel_dropout(nd, shape):
    fn = getattr(F, f"dropout{nd}d")
    x = to_nbx(np.ones(shape, np.float32))
    assert fn(x, 0.5, training=False) is x
    y = fn(x, 0.5).numpy()
    lead = len(shape) - nd
    per_channel = y.reshape(shape[:lead] + (-1,))
    # a whole channel is dropped or kept, the kept ones scaled by 1 / (1 - p)
    assert np.all(per_channel.min(-1) == per_channel.max(-1))
    assert set(np.unique(per_channel)) <= {0.0, 2.0}
    assert np.all(fn(x, 1.0).numpy() == 0)
    with pytest.raises(ValueError, match="between 0 and 1"):
        fn(x, 1.5)


def test_dropout_nd_rank_errors():
    with pytest.raises(RuntimeError, match="Expected 2D or 3D input"):
        F.dropout1d(nbx.ones(2, 3, 4, 5))
    with pytest.raises(RuntimeError, match="Expected 4D or 5D input"):
        F.dropout3d(nbx.ones(2, 3, 4))


def test_channel_shuffle(r):
    x = f32(r, 2, 6, 2)
    expected = x.reshape(2, 3, 2, 2).transpose(0, 2, 1, 3).reshape(2, 6, 2)
    assert np.array_equal(F.channel_shuffle(to_nbx(x), 3).numpy(), expected)
    assert np.array_equal(nbx.channel_shuffle(to_nbx(x), 2).numpy(),
                          x.reshape(2, 2, 3, 2).transpose(0, 2, 1, 3).reshape(2, 6, 2))
    with pytest.raises(RuntimeError, match="divisible by groups"):
        F.channel_shuffle(to_nbx(x), 4)
    with pytest.raises(RuntimeError, match="at least 3 dimensions"):
        F.channel_shuffle(to_nbx(x[0]), 2)


# ---- embedding_bag ------------------------------------------------------------------------------------

def _bags_reference(weight, bags, mode, weights=None):
    out = np.zeros((len(bags), weight.shape[1]))
    for i, bag in enumerate(bags):
        if not bag:
            continue
        rows = weight[bag].astype(np.float64)
        if weights is not None:
            rows = rows * np.asarray(weights[i])[:, None]
        out[i] = {"sum": rows.sum(0), "mean": rows.mean(0), "max": rows.max(0)}[mode]
    return out


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_offsets(r, mode):
    weight = f32(r, 5, 3)
    idx = np.array([0, 2, 4, 1, 1, 3], np.int64)
    offsets = np.array([0, 2, 2, 5], np.int64)  # the second bag is empty
    bags = [[0, 2], [], [4, 1, 1], [3]]
    close(F.embedding_bag(to_nbx(idx), to_nbx(weight), to_nbx(offsets), mode=mode), _bags_reference(weight, bags, mode))
    # include_last_offset: offsets end with the input's length
    last = np.array([0, 2, 2, 5, 6], np.int64)
    close(F.embedding_bag(to_nbx(idx), to_nbx(weight), to_nbx(last), mode=mode, include_last_offset=True),
          _bags_reference(weight, bags, mode))
    # padding_idx takes no part (a bag of padding only is empty)
    close(F.embedding_bag(to_nbx(idx), to_nbx(weight), to_nbx(offsets), mode=mode, padding_idx=1),
          _bags_reference(weight, [[0, 2], [], [4], [3]], mode))


def test_embedding_bag_2d_and_weights(r):
    weight = f32(r, 4, 2)
    idx = np.array([[0, 1, 3], [2, 2, 0]], np.int64)
    close(F.embedding_bag(to_nbx(idx), to_nbx(weight)), _bags_reference(weight, idx.tolist(), "mean"))
    psw = f32(r, 2, 3)
    close(F.embedding_bag(to_nbx(idx), to_nbx(weight), mode="sum", per_sample_weights=to_nbx(psw)),
          _bags_reference(weight, idx.tolist(), "sum", psw))
    with pytest.raises(NotImplementedError, match="only supported for mode='sum'"):
        F.embedding_bag(to_nbx(idx), to_nbx(weight), per_sample_weights=to_nbx(psw))
    with pytest.raises(ValueError, match="offsets has to be None"):
        F.embedding_bag(to_nbx(idx), to_nbx(weight), to_nbx(np.array([0], np.int64)))
    with pytest.raises(ValueError, match="offsets has to be a 1D Tensor but got None"):
        F.embedding_bag(to_nbx(idx[0]), to_nbx(weight))
    # the CPU names the index ("out of bounds") at once; a GPU reports it at the next synchronisation
    with pytest.raises(IndexError, match="out of bounds|out of range"):
        F.embedding_bag(to_nbx(np.array([[7]], np.int64)), to_nbx(weight)).numpy()


# ---- losses ------------------------------------------------------------------------------------------

def _reduce(loss, reduction):
    return {"none": loss, "sum": loss.sum(), "mean": loss.mean()}[reduction]


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_pointwise_losses(r, reduction):
    x, y = f32(r, 3, 4), f32(r, 3, 4)
    d = x.astype(np.float64) - y
    a = np.abs(d)
    cases = {
        "mse_loss": d * d,
        "l1_loss": a,
        "smooth_l1_loss": np.where(a < 1, 0.5 * d * d, a - 0.5),
        "huber_loss": np.where(a < 1, 0.5 * d * d, a - 0.5),
    }
    for name, loss in cases.items():
        close(getattr(F, name)(to_nbx(x), to_nbx(y), reduction=reduction), _reduce(loss, reduction))
    close(F.smooth_l1_loss(to_nbx(x), to_nbx(y), reduction=reduction, beta=0.5),
          _reduce(np.where(a < 0.5, d * d, a - 0.25), reduction))
    close(F.huber_loss(to_nbx(x), to_nbx(y), reduction, 0.5),
          _reduce(np.where(a < 0.5, 0.5 * d * d, 0.5 * (a - 0.25)), reduction))


def test_pointwise_loss_weight_legacy_and_errors(r):
    x, y, w = f32(r, 2, 3), f32(r, 2, 3), np.abs(f32(r, 2, 3))
    d = x.astype(np.float64) - y
    close(F.mse_loss(to_nbx(x), to_nbx(y), weight=to_nbx(w)), (d * d * w).sum() / w.sum())
    close(F.huber_loss(to_nbx(x), to_nbx(y), weight=to_nbx(w)),
          (np.where(np.abs(d) < 1, 0.5 * d * d, np.abs(d) - 0.5) * w).mean())
    close(F.l1_loss(to_nbx(x), to_nbx(y), size_average=False), np.abs(d).sum())
    close(F.l1_loss(to_nbx(x), to_nbx(y), reduce=False), np.abs(d))
    close(F.mse_loss(to_nbx(x), to_nbx(y), reduction=2), (d * d).sum())  # ATen's enum
    with pytest.warns(UserWarning, match="different to the input size"):
        close(F.mse_loss(to_nbx(x), to_nbx(y[:1])), ((x.astype(np.float64) - y[:1]) ** 2).mean())
    with pytest.raises(ValueError, match="is not a valid value for reduction"):
        F.mse_loss(to_nbx(x), to_nbx(y), reduction="avg")
    with pytest.raises(ValueError, match="Weights and input must have the same size"):
        F.l1_loss(to_nbx(x), to_nbx(y), weight=to_nbx(w[0]))
    with pytest.raises(RuntimeError, match="non-positive values for delta"):
        F.huber_loss(to_nbx(x), to_nbx(y), delta=0.0)
    with pytest.raises(RuntimeError, match="negative values for beta"):
        F.smooth_l1_loss(to_nbx(x), to_nbx(y), beta=-1.0)
    close(F.mse_loss(to_nbx(x[:0]), to_nbx(y[:0]), reduction="sum"), 0.0)
    assert math.isnan(F.mse_loss(to_nbx(x[:0]), to_nbx(y[:0])).item())


def test_pointwise_losses_refuse_arguments_they_do_not_take(r):
    # torch's signatures: smooth_l1_loss takes no weight, and no loss takes a keyword it does not name
    x, y = to_nbx(f32(r, 2, 3)), to_nbx(f32(r, 2, 3))
    with pytest.raises(TypeError, match="weight"):
        F.smooth_l1_loss(x, y, weight=x)
    with pytest.raises(TypeError, match="delt"):
        F.mse_loss(x, y, delt=0.5)
    with pytest.raises(TypeError, match="size_average"):
        F.huber_loss(x, y, size_average=False)
    assert registry.get("huber_loss").meta(x, y, "sum", 0.5).shape == ()


@pytest.mark.parametrize("reduction", ["none", "mean", "sum", "batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(r, reduction, log_target):
    x = np.log(np.random.default_rng(1).dirichlet(np.ones(4), 3)).astype(np.float32)
    t = np.random.default_rng(2).dirichlet(np.ones(4), 3).astype(np.float32)
    t[0, 0] = 0
    t64 = t.astype(np.float64)
    if log_target:
        tl = np.log(t64 + 1e-3).astype(np.float32)
        loss = np.exp(tl.astype(np.float64)) * (tl.astype(np.float64) - x)
        target = tl
    else:
        loss = np.where(t64 == 0, 0, t64 * np.log(np.where(t64 == 0, 1, t64))) - t64 * x
        target = t
    expected = loss.sum() / 3 if reduction == "batchmean" else _reduce(loss, reduction)
    close(F.kl_div(to_nbx(x), to_nbx(target), reduction=reduction, log_target=log_target), expected)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_binary_cross_entropy(r, reduction):
    p = np.random.default_rng(3).uniform(0.01, 0.99, (2, 3)).astype(np.float32)
    p[0, 0] = 0.0  # log(0) is clamped at -100, as torch's
    t = np.random.default_rng(4).uniform(0, 1, (2, 3)).astype(np.float32)
    w = np.abs(f32(r, 3))
    p64 = p.astype(np.float64)
    with np.errstate(divide="ignore"):
        loss = -(t * np.maximum(np.log(p64), -100) + (1 - t.astype(np.float64)) * np.maximum(np.log1p(-p64), -100))
    close(F.binary_cross_entropy(to_nbx(p), to_nbx(t), reduction=reduction), _reduce(loss, reduction))
    close(F.binary_cross_entropy(to_nbx(p), to_nbx(t), to_nbx(w), reduction=reduction), _reduce(loss * w, reduction))
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        F.binary_cross_entropy(to_nbx(p + 1), to_nbx(t))
    with pytest.raises(ValueError, match="different to the input size"):
        F.binary_cross_entropy(to_nbx(p), to_nbx(t[0]))


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_binary_cross_entropy_with_logits(r, reduction):
    x = (f32(r, 2, 3) * 10).astype(np.float32)
    x[0, 0] = 80.0  # exp overflows a naive form
    t = np.random.default_rng(5).uniform(0, 1, (2, 3)).astype(np.float32)
    pw, w = np.abs(f32(r, 3)), np.abs(f32(r, 2, 3))
    x64 = x.astype(np.float64)
    log_sig = -np.logaddexp(0, -x64)
    loss = (1 - t) * x64 - log_sig * ((pw - 1) * t + 1)
    close(F.binary_cross_entropy_with_logits(to_nbx(x), to_nbx(t), to_nbx(w), reduction=reduction,
                                             pos_weight=to_nbx(pw)), _reduce(loss * w, reduction), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="must be the same as input size"):
        F.binary_cross_entropy_with_logits(to_nbx(x), to_nbx(t[:1]))


def _log_softmax(x, axis):
    x = x.astype(np.float64)
    m = x.max(axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis, keepdims=True))


def _nll_reference(logp, target, weight, ignore_index, reduction):
    logp = np.moveaxis(logp, 1, -1) if logp.ndim > 1 else logp[None]
    target = np.asarray(target).reshape(logp.shape[:-1])
    w = np.ones(logp.shape[-1]) if weight is None else weight.astype(np.float64)
    keep = target != ignore_index
    safe = np.where(keep, target, 0)
    picked = np.take_along_axis(logp, safe[..., None], -1)[..., 0]
    sw = np.where(keep, w[safe], 0)
    loss = -picked * sw
    if reduction == "none":
        return loss if logp.ndim > 1 and np.ndim(target) else loss.reshape(())
    return loss.sum() if reduction == "sum" else loss.sum() / sw.sum()


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss(r, reduction, weighted):
    x = f32(r, 3, 4, 2)
    t = np.array([[0, 3], [-100, 1], [2, 2]], np.int64)
    w = np.abs(f32(r, 4)) if weighted else None
    got = F.nll_loss(to_nbx(x), to_nbx(t), None if w is None else to_nbx(w), reduction=reduction)
    close(got, _nll_reference(x.astype(np.float64), t, w, -100, reduction))
    x2 = f32(r, 3, 4)
    close(F.nll_loss(to_nbx(x2), to_nbx(t[:, 1]), ignore_index=1, reduction=reduction),
          _nll_reference(x2.astype(np.float64), t[:, 1], None, 1, reduction))


def test_nll_loss_errors(r):
    x = f32(r, 3, 4)
    with pytest.raises(ValueError, match="Expected input batch_size"):
        F.nll_loss(to_nbx(x), to_nbx(np.array([0, 1], np.int64)))
    with pytest.raises(RuntimeError, match="weight tensor should be defined either for all 4 classes"):
        F.nll_loss(to_nbx(x), to_nbx(np.array([0, 1, 2], np.int64)), to_nbx(f32(r, 3)))
    with pytest.raises(RuntimeError, match="integer dtype"):
        F.nll_loss(to_nbx(x), to_nbx(np.array([0, 1, 2], np.float32)))
    with pytest.raises(IndexError, match="out of bounds|out of range"):  # as embedding_bag's, either device
        F.nll_loss(to_nbx(x), to_nbx(np.array([0, 9, 2], np.int64))).item()


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_indices(r, reduction, smoothing, weighted):
    x = f32(r, 3, 4, 2)
    t = np.array([[0, 3], [-100, 1], [2, 2]], np.int64)
    w = np.abs(f32(r, 4)) + 0.1 if weighted else None
    logp = _log_softmax(x, 1)
    nll = _nll_reference(logp, t, w, -100, reduction)
    if smoothing:
        wv = np.ones(4) if w is None else w.astype(np.float64)
        smooth = np.where(t == -100, 0, -(logp * wv[None, :, None]).sum(1))
        keep = t != -100
        if reduction == "none":
            s = smooth
        elif reduction == "sum":
            s = smooth.sum()
        else:
            s = smooth.sum() / np.where(keep, wv[np.where(keep, t, 0)], 0).sum()
        expected = (1 - smoothing) * nll + s * smoothing / 4
    else:
        expected = nll
    got = F.cross_entropy(to_nbx(x), to_nbx(t), None if w is None else to_nbx(w), reduction=reduction,
                          label_smoothing=smoothing)
    close(got, expected)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_cross_entropy_probabilities(r, reduction):
    x = f32(r, 3, 4)
    t = np.random.default_rng(6).dirichlet(np.ones(4), 3).astype(np.float32)
    w = np.abs(f32(r, 4))
    logp = _log_softmax(x, 1)
    target = t * 0.9 + 0.1 / 4
    loss = -(logp * target * w).sum(1)
    expected = {"none": loss, "sum": loss.sum(), "mean": loss.sum() / 3}[reduction]
    close(F.cross_entropy(to_nbx(x), to_nbx(t), to_nbx(w), reduction=reduction, label_smoothing=0.1), expected)


def test_cross_entropy_unbatched_and_errors(r):
    x = f32(r, 5)
    close(F.cross_entropy(to_nbx(x), to_nbx(np.array(3, np.int64))), -_log_softmax(x, 0)[3])
    with pytest.raises(RuntimeError, match="label_smoothing must be between 0.0 and 1.0"):
        F.cross_entropy(to_nbx(x), to_nbx(np.array(3, np.int64)), label_smoothing=1.5)
    with pytest.raises(ValueError, match="Expected input batch_size"):
        F.cross_entropy(to_nbx(f32(r, 2, 5)), to_nbx(np.array([1, 2, 3], np.int64)))


def test_float64_losses(r):
    x, y = r.standard_normal((2, 3)), r.standard_normal((2, 3))
    close(F.mse_loss(to_nbx(x), to_nbx(y)), ((x - y) ** 2).mean(), rtol=1e-12, atol=1e-14)
    t = np.array([0, 2], np.int64)
    close(F.cross_entropy(to_nbx(x), to_nbx(t)), -_log_softmax(x, 1)[[0, 1], t].mean(), rtol=1e-12, atol=1e-14)


# ---- the registry ------------------------------------------------------------------------------------

NEW_OPS = ["normalize", "cosine_similarity", "pairwise_distance", "cdist", "instance_norm", "local_response_norm",
           "prelu", "rrelu", "dropout1d", "dropout2d", "dropout3d", "channel_shuffle", "embedding_bag", "mse_loss",
           "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div", "binary_cross_entropy",
           "binary_cross_entropy_with_logits", "nll_loss", "cross_entropy"]


def test_meta_and_cost_agree_with_results(r):
    """Each op's meta rule predicts its result's shape and dtype from metadata; its cost is positive."""
    x, y = f32(r, 2, 3, 4), f32(r, 2, 3, 4)
    t = np.array([[0, 1, 2, 1], [2, 2, 0, 1]], np.int64)
    cases = {
        "normalize": (x,), "cosine_similarity": (x, y), "pairwise_distance": (x, y), "cdist": (x, y),
        "instance_norm": (x,), "local_response_norm": (x, 2), "prelu": (x, np.ones(3, np.float32)), "rrelu": (x,),
        "dropout2d": (x, 0.5, False), "channel_shuffle": (x, 3), "mse_loss": (x, y), "l1_loss": (x, y),
        "smooth_l1_loss": (x, y), "huber_loss": (x, y), "kl_div": (x, y), "binary_cross_entropy_with_logits": (x, y),
        "nll_loss": (x, t), "cross_entropy": (x, t),
        "embedding_bag": (np.array([[0, 1]], np.int64), x[0]),
    }
    for name, args in cases.items():
        op = registry.get(name)
        tensors = [to_nbx(a) if isinstance(a, np.ndarray) else a for a in args]
        out = op.impl(*tensors)
        meta = op.meta(*tensors)
        assert (tuple(meta.shape), meta.dtype) == (tuple(out.shape), out.dtype), name
        assert op.cost(*tensors).bytes_read > 0, name
    for name in NEW_OPS:
        assert registry.get(name).family


def test_aten_calls_through_the_graph_adapters(r):
    """A graph calls the losses with ATen's arguments: the reduction enum where torch's legacy arguments sit."""
    from nbxtensor.graph.calling import adapter
    x, y = f32(r, 3, 4), f32(r, 3, 4)
    t = np.array([0, 1, 3], np.int64)
    calls = [("aten::nll_loss.default", (to_nbx(x), to_nbx(t), None, 2, 1),
              _nll_reference(x.astype(np.float64), t, None, 1, "sum")),
             ("aten::mse_loss.default", (to_nbx(x), to_nbx(y), 0), (x.astype(np.float64) - y) ** 2),
             ("aten::cross_entropy_loss.default", (to_nbx(x), to_nbx(t), None, 1, -100, 0.0),
              -_log_softmax(x, 1)[[0, 1, 2], t].mean())]
    for name, args, expected in calls:
        op = registry.lookup(name)
        a, k = adapter(name)(args, {})
        out = op.impl(*a, **k)
        assert tuple(op.meta(*a, **k).shape) == tuple(out.shape)
        close(out, expected)
    a, k = adapter("aten::instance_norm.default")((to_nbx(x[None]), None, None, None, None, True, 0.1, 1e-5, False), {})
    x64 = x.astype(np.float64)
    close(registry.lookup("aten::instance_norm.default").impl(*a, **k),
          ((x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5))[None], rtol=1e-4, atol=1e-5)
