"""``nbxtensor.linalg``: the ``torch.linalg`` functions nbxtensor implements."""
from .ops import linalg_decompositions as _linalg_decompositions  # noqa: F401  (registers the ops named below)
from .ops import reductions as _reductions, shape_composites as _shape_composites
from .ops.registry import get as _get

vector_norm = _reductions.vector_norm.impl
cross = _shape_composites.linalg_cross.impl

_NAMES = {
    # torch.linalg name: registry op
    "qr": "linalg.qr", "householder_product": "linalg.householder_product", "eigh": "linalg.eigh",
    "eigvalsh": "linalg.eigvalsh", "svd": "linalg.svd", "svdvals": "linalg.svdvals", "pinv": "linalg.pinv",
    "matrix_rank": "linalg.matrix_rank", "lstsq": "linalg.lstsq", "matrix_norm": "linalg.matrix_norm",
    "norm": "linalg.norm", "cond": "linalg.cond",
}

globals().update({name: _get(op).impl for name, op in _NAMES.items()})

__all__ = sorted(["vector_norm", "cross", *_NAMES])
