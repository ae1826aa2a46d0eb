"""nn.functional breadth (issue #29) against torch as an oracle, float64 inputs so the comparison is
tight (1e-10: a few float64 roundings per step and no reduction over more than a few dozen elements)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as TF  # noqa: E402

import nbxtensor as nbx  # noqa: E402
import nbxtensor.nn.functional as F  # noqa: E402
from tests.conftest import to_nbx  # noqa: E402


def same(ours, theirs, tol=1e-10):
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=tol, atol=tol)


@pytest.fixture
def r():
    return np.random.default_rng(2929)


def both(a):
    return to_nbx(a), torch.from_numpy(np.ascontiguousarray(a))


def test_distances_and_norms(r):
    (a, ta), (b, tb) = both(r.standard_normal((2, 3, 4))), both(r.standard_normal((2, 1, 4)))
    same(F.normalize(a, p=3.0, dim=-1), TF.normalize(ta, p=3.0, dim=-1))
    same(F.cosine_similarity(a, b, dim=-1), TF.cosine_similarity(ta, tb, dim=-1))
    same(F.pairwise_distance(a, b, p=1.5, keepdim=True), TF.pairwise_distance(ta, tb, p=1.5, keepdim=True))
    for p in (0.0, 1.0, 2.0, 3.0, float("inf")):
        same(nbx.cdist(a, b, p=p), torch.cdist(ta, tb, p=p, compute_mode="donot_use_mm_for_euclid_dist"))
    (w, tw), (bias, tbias) = both(r.standard_normal(3)), both(r.standard_normal(3))
    same(F.instance_norm(a, weight=w, bias=bias), TF.instance_norm(ta, weight=tw, bias=tbias), 1e-9)
    (x, tx) = both(r.standard_normal((2, 5, 2, 3)))
    for size in (1, 2, 3, 4):
        same(F.local_response_norm(x, size, alpha=0.1, beta=0.6, k=2.0),
             TF.local_response_norm(tx, size, alpha=0.1, beta=0.6, k=2.0))


def test_activations_and_shuffle(r):
    (x, tx), (w, tw) = both(r.standard_normal((2, 3, 4))), both(r.standard_normal(3))
    same(F.prelu(x, w), TF.prelu(tx, tw))
    same(F.rrelu(x, 0.1, 0.4), TF.rrelu(tx, 0.1, 0.4))
    (y, ty) = both(r.standard_normal((2, 6, 2, 2)))
    same(F.channel_shuffle(y, 3), TF.channel_shuffle(ty, 3))


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag(r, mode):
    (w, tw) = both(r.standard_normal((6, 3)))
    (idx, tidx) = both(np.array([1, 5, 0, 2, 2, 4, 3], np.int64))
    (off, toff) = both(np.array([0, 3, 3, 6], np.int64))
    for padding_idx in (None, 2):
        same(F.embedding_bag(idx, w, off, mode=mode, padding_idx=padding_idx),
             TF.embedding_bag(tidx, tw, toff, mode=mode, padding_idx=padding_idx))
    (last, tlast) = both(np.array([0, 3, 3, 6, 7], np.int64))
    same(F.embedding_bag(idx, w, last, mode=mode, include_last_offset=True),
         TF.embedding_bag(tidx, tw, tlast, mode=mode, include_last_offset=True))
    if mode == "sum":
        (psw, tpsw) = both(r.standard_normal(7))
        same(F.embedding_bag(idx, w, off, mode=mode, per_sample_weights=psw),
             TF.embedding_bag(tidx, tw, toff, mode=mode, per_sample_weights=tpsw))


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_losses(r, reduction):
    (x, tx), (y, ty) = both(r.standard_normal((3, 4))), both(r.standard_normal((3, 4)))
    (w, tw) = both(np.abs(r.standard_normal((3, 4))))
    for name in ("mse_loss", "l1_loss"):
        same(getattr(F, name)(x, y, reduction=reduction), getattr(TF, name)(tx, ty, reduction=reduction))
        same(getattr(F, name)(x, y, reduction=reduction, weight=w),
             getattr(TF, name)(tx, ty, reduction=reduction, weight=tw))
    same(F.smooth_l1_loss(x, y, reduction=reduction, beta=0.7), TF.smooth_l1_loss(tx, ty, reduction=reduction, beta=0.7))
    same(F.huber_loss(x, y, reduction=reduction, delta=0.7), TF.huber_loss(tx, ty, reduction=reduction, delta=0.7))
    same(F.huber_loss(x, y, reduction=reduction, delta=0.7, weight=w),
         TF.huber_loss(tx, ty, reduction=reduction, delta=0.7, weight=tw))
    (p, tp) = both(r.uniform(0.05, 0.95, (3, 4)))
    (q, tq) = both(r.uniform(0, 1, (3, 4)))
    same(F.binary_cross_entropy(p, q, w, reduction=reduction), TF.binary_cross_entropy(tp, tq, tw, reduction=reduction))
    (pw, tpw) = both(np.abs(r.standard_normal(4)))
    same(F.binary_cross_entropy_with_logits(x, q, w, reduction=reduction, pos_weight=pw),
         TF.binary_cross_entropy_with_logits(tx, tq, tw, reduction=reduction, pos_weight=tpw))
    logp = F.log_softmax(x, 1)
    (t, tt) = both(np.log(r.dirichlet(np.ones(4), 3)))
    for log_target in (False, True):
        same(F.kl_div(logp, t if log_target else t.exp(), reduction=reduction, log_target=log_target),
             TF.kl_div(TF.log_softmax(tx, 1), tt if log_target else tt.exp(), reduction=reduction, log_target=log_target))


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("smoothing", [0.0, 0.3])
def test_cross_entropy_and_nll(r, reduction, smoothing):
    (x, tx) = both(r.standard_normal((3, 5, 2)))
    (t, tt) = both(np.array([[0, 4], [-100, 1], [3, 3]], np.int64))
    (w, tw) = both(np.abs(r.standard_normal(5)) + 0.1)
    for weight, tweight in ((None, None), (w, tw)):
        same(F.cross_entropy(x, t, weight, reduction=reduction, label_smoothing=smoothing),
             TF.cross_entropy(tx, tt, tweight, reduction=reduction, label_smoothing=smoothing))
        same(F.nll_loss(x, t, weight, reduction=reduction), TF.nll_loss(tx, tt, tweight, reduction=reduction))
        same(F.cross_entropy(x[:, :, :1], t[:, :1].abs() % 5, weight, ignore_index=3, reduction=reduction,
                             label_smoothing=smoothing),
             TF.cross_entropy(tx[:, :, :1], tt[:, :1].abs() % 5, tweight, ignore_index=3, reduction=reduction,
                              label_smoothing=smoothing))
    (prob, tprob) = both(r.dirichlet(np.ones(5), (3, 2)).transpose(0, 2, 1).copy())
    same(F.cross_entropy(x, prob, w, reduction=reduction, label_smoothing=smoothing),
         TF.cross_entropy(tx, tprob, tw, reduction=reduction, label_smoothing=smoothing))
