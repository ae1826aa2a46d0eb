"""``nbxtensor.linalg``: the ``torch.linalg`` functions nbxtensor implements."""
from .ops import reductions as _reductions, shape_composites as _shape_composites
from .ops import linalg_composites as _linalg_composites, linalg_lu as _linalg_lu  # noqa: F401  (register the ops)
from .ops.matmul import matmul as _matmul
from .ops.registry import get as _get

vector_norm = _reductions.vector_norm.impl
cross = _shape_composites.linalg_cross.impl
LinAlgError = _linalg_lu.LinAlgError
matmul = _matmul.impl

_NAMES = {
    # torch.linalg name: registry op
    "lu_factor": "linalg.lu_factor", "lu_factor_ex": "linalg.lu_factor_ex", "lu": "linalg.lu",
    "lu_solve": "linalg.lu_solve", "det": "linalg.det", "slogdet": "linalg.slogdet", "inv": "linalg.inv",
    "inv_ex": "linalg.inv_ex", "solve": "linalg.solve", "solve_ex": "linalg.solve_ex",
    "solve_triangular": "linalg.solve_triangular", "cholesky": "linalg.cholesky", "cholesky_ex": "linalg.cholesky_ex",
    "matrix_power": "linalg.matrix_power", "tensorinv": "linalg.tensorinv", "tensorsolve": "linalg.tensorsolve",
    "multi_dot": "linalg.multi_dot", "vander": "linalg.vander", "vecdot": "linalg.vecdot",
    "diagonal": "linalg.diagonal", "matrix_exp": "matrix_exp", "matrix_norm": "linalg.matrix_norm",
    "norm": "linalg.norm",
}

globals().update({name: _get(op).impl for name, op in _NAMES.items()})

__all__ = sorted(["vector_norm", "cross", "LinAlgError", "matmul", *_NAMES])
