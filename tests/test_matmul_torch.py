"""Matrix products against torch on the same inputs (CPU, float32 and bfloat16 inputs compared in float64)."""
import numpy as np
import pytest

import nbxtensor as nbx

from .conftest import to_nbx

torch = pytest.importorskip("torch")


def _pair(rng, shape):
    x = rng.standard_normal(shape).astype(np.float32)
    return to_nbx(x), torch.from_numpy(x)


CASES = [
    ("matmul", lambda t, a, b, c: t.matmul(a, b), [(2, 1, 5, 7), (3, 7, 4)]),
    ("matmul vec", lambda t, a, b, c: t.matmul(a, b), [(3, 5, 7), (7,)]),
    ("bmm", lambda t, a, b, c: t.bmm(a, b), [(3, 5, 7), (3, 7, 4)]),
    ("addmm", lambda t, a, b, c: t.addmm(c, a, b, beta=0.5, alpha=2.0), [(5, 7), (7, 4), (4,)]),
    ("baddbmm", lambda t, a, b, c: t.baddbmm(c, a, b, beta=1.5, alpha=-1.0), [(2, 5, 7), (2, 7, 4), (2, 5, 4)]),
    ("linear", lambda t, a, b, c: t.nn.functional.linear(a, b, c), [(2, 3, 7), (4, 7), (4,)]),
    ("einsum", lambda t, a, b, c: t.einsum("bhqd,bhkd->bhqk", a, b), [(2, 3, 5, 8), (2, 3, 6, 8)]),
]


@pytest.mark.parametrize("name,fn,shapes", CASES, ids=[c[0] for c in CASES])
def test_conforms_to_torch(rng, name, fn, shapes):
    pairs = [_pair(rng, s) for s in shapes] + [(None, None)] * (3 - len(shapes))
    ours = fn(nbx, *[p[0] for p in pairs])
    theirs = fn(torch, *[p[1] for p in pairs])
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-5)


def test_bfloat16_rounds_like_torch(rng):
    a, ta = _pair(rng, (8, 40))
    b, tb = _pair(rng, (40, 6))
    ours = nbx.mm(a.to("bfloat16"), b.to("bfloat16")).to("float32").numpy()
    theirs = torch.mm(ta.bfloat16(), tb.bfloat16()).float().numpy()
    # both accumulate in float32 and round once to bfloat16: at most one bfloat16 ulp apart
    np.testing.assert_allclose(ours, theirs, rtol=2 ** -7, atol=1e-6)
