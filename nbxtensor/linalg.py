"""``nbxtensor.linalg``: the ``torch.linalg`` functions nbxtensor implements."""
from .ops import reductions as _reductions

vector_norm = _reductions.vector_norm.impl

__all__ = ["vector_norm"]
