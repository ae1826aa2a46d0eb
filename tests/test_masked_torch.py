"""nbx.masked against torch.masked itself on the edge cases its documentation names: fully masked-out
slices, broadcast and non-bool masks, integer identities, empty dims, 0-d inputs, dtype= and keepdim; and
the calls torch refuses, which nbx.masked refuses too. Values compare as test_opinfo compares them
(float32 within torch.testing's default rtol 1.3e-6, atol 1e-5; integers exactly; NaN where torch's is)."""
import math

import numpy as np
import pytest

import nbxtensor as nbx

from .conftest import cpu_kernels
from .test_opinfo import compare, to_nbx

torch = pytest.importorskip("torch")

_rng = np.random.default_rng(29)
X = torch.tensor(_rng.standard_normal((3, 4)), dtype=torch.float32)
INTS = torch.tensor(_rng.integers(-9, 9, (3, 4)))
MASK = torch.tensor([[True, False, True, True], [False] * 4, [False, True, False, True]])
COLUMNS = torch.tensor([True, False, True, False])
EMPTY = torch.zeros((2, 0))

CASES = [
    # torch.masked name, args, kwargs
    *[(name, (X, 1), {"mask": MASK}) for name in ("sum", "prod", "amax", "amin", "argmax", "argmin", "mean",
                                                  "logsumexp", "var", "std", "median", "cumsum", "cumprod",
                                                  "softmax", "log_softmax", "softmin")],
    *[(name, (X,), {"mask": COLUMNS}) for name in ("sum", "amax", "mean", "var", "std", "logsumexp")],
    *[(name, (X, 0), {"mask": MASK.to(torch.int64), "keepdim": True})
      for name in ("sum", "amin", "argmax", "mean", "std")],
    *[(name, (INTS, 1), {"mask": MASK}) for name in ("sum", "prod", "amax", "amin", "argmax", "argmin", "var",
                                                     "std", "cumsum", "cumprod", "logsumexp", "mean", "median")],
    ("median", (INTS, 0), {"mask": MASK | COLUMNS}),
    ("sum", (X, 1), {"mask": MASK, "dtype": torch.float64}),
    ("amax", (X, 1), {"mask": MASK, "dtype": torch.float64}),
    ("argmin", (X,), {"mask": MASK, "dtype": torch.int64}),
    ("mean", (INTS, 1), {"mask": MASK, "dtype": torch.float32}),
    ("var", (X, 1), {"mask": MASK, "unbiased": False}),
    ("std", (X, (0, 1)), {"mask": MASK, "correction": 2, "keepdim": True}),
    ("var", (X, 1, True), {"mask": MASK, "correction": 1}),
    ("softmax", (X, 0), {"mask": MASK, "dtype": torch.float64}),
    ("median", (X, 1), {"mask": MASK, "dtype": torch.float64}),
    ("norm", (X, 2.0, 1), {"mask": MASK}),
    ("norm", (X, -math.inf, 1), {"mask": MASK}),
    ("norm", (X, 0.0), {"mask": MASK}),
    ("norm", (INTS.float(), 1.0, 0), {"mask": MASK, "keepdim": True}),
    ("norm", (INTS, -math.inf), {"mask": MASK}),
    ("normalize", (X, 2.0, 1), {"mask": MASK}),
    ("normalize", (X, 1.0, 0), {"mask": COLUMNS, "eps": 0.5}),
    ("logaddexp", (X, X.flip(0)), {"input_mask": MASK, "other_mask": MASK.flip(1)}),
    ("logaddexp", (X, X.flip(0)), {"input_mask": COLUMNS, "dtype": torch.float64}),
    *[(name, (EMPTY, 1), {}) for name in ("sum", "prod", "mean", "var", "norm", "logsumexp", "amax", "median")],
    *[(name, (X[0, 0],), {"mask": torch.tensor(False)}) for name in ("sum", "amax", "argmax", "mean", "norm")],
    ("amax", (MASK, 1), {"mask": MASK}),
    ("sum", (X,), {"mask": MASK[None]}),
    ("sum", (X,), {"mask": torch.ones(3, dtype=torch.bool)}),
    ("mean", (X, (1, -1)), {"mask": MASK}),
    ("sum", (X, 2), {"mask": MASK}),
]


@cpu_kernels
@pytest.mark.parametrize("name,args,kwargs", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_matches_torch_masked(name, args, kwargs):
    try:
        expected = getattr(torch.masked, name)(*args, **kwargs)
    except Exception:
        expected = None
    ours_args, ours_kwargs = to_nbx([list(args), kwargs])
    if expected is None:
        with pytest.raises((ValueError, TypeError, IndexError, RuntimeError)):  # a named refusal, not a crash
            getattr(nbx.masked, name)(*ours_args, **ours_kwargs)
        return
    problem = compare(getattr(nbx.masked, name)(*ours_args, **ours_kwargs), expected)
    assert problem is None, problem
