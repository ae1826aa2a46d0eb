"""``nbxtensor.masked``: torch.masked's reductions and normalizations (``ops/masked.py``), bound here under
torch.masked's names."""
from .ops import masked as _masked  # noqa: F401  (registers the ops)
from .ops.registry import get as _get

_NAMES = ("sum", "prod", "cumsum", "cumprod", "amax", "amin", "argmax", "argmin", "mean", "median", "logsumexp",
          "logaddexp", "norm", "var", "std", "softmax", "log_softmax", "softmin", "normalize")

globals().update({name: _get(f"masked.{name}").impl for name in _NAMES})

__all__ = sorted(_NAMES)
