"""``nbxtensor.linalg``: the ``torch.linalg`` functions nbxtensor implements."""
from .ops import reductions as _reductions, shape_composites as _shape_composites

vector_norm = _reductions.vector_norm.impl
cross = _shape_composites.linalg_cross.impl

__all__ = ["vector_norm", "cross"]
