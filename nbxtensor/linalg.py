"""``nbxtensor.linalg``: the ``torch.linalg`` functions nbxtensor implements."""
from .ops import linalg_decompositions as _decompositions
from .ops import reductions as _reductions, shape_composites as _shape_composites

vector_norm = _reductions.vector_norm.impl
cross = _shape_composites.linalg_cross.impl
qr = _decompositions.linalg_qr.impl
householder_product = _decompositions.householder_product.impl
eigh = _decompositions.eigh.impl
eigvalsh = _decompositions.eigvalsh.impl
svd = _decompositions.linalg_svd.impl
svdvals = _decompositions.svdvals.impl
pinv = _decompositions.pinv.impl
matrix_rank = _decompositions.matrix_rank.impl
lstsq = _decompositions.lstsq.impl
matrix_norm = _decompositions.matrix_norm.impl
norm = _decompositions.linalg_norm.impl
cond = _decompositions.cond.impl

__all__ = ["vector_norm", "cross", "qr", "householder_product", "eigh", "eigvalsh", "svd", "svdvals", "pinv",
           "matrix_rank", "lstsq", "matrix_norm", "norm", "cond"]
