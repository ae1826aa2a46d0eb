"""``nbxtensor.special``: torch.special's functions. Each is a row of the pointwise table
(``ops/pointwise_table.py``) or another registry op, bound here under torch.special's names."""
from .ops import pointwise_table as _table  # noqa: F401  (registers the rows)
from .ops import special_polynomials as _polynomials
from .ops import special_table as _special_table
from .ops.registry import get as _get

_NAMES = {
    # torch.special name: registry op
    "erf": "erf", "erfc": "erfc", "erfinv": "erfinv", "expit": "sigmoid", "logit": "logit", "exp2": "exp2",
    "expm1": "expm1", "log1p": "log1p", "round": "round", "sinc": "sinc", "gammaln": "lgamma", "digamma": "digamma",
    "psi": "digamma", "xlogy": "xlogy", "i0": "i0", "logsumexp": "logsumexp", "softmax": "softmax",
    "log_softmax": "log_softmax", "erfcx": "special_erfcx", "ndtr": "special_ndtr", "ndtri": "special_ndtri",
    "log_ndtr": "special_log_ndtr", "entr": "special_entr", "i0e": "special_i0e", "i1": "special_i1",
    "i1e": "special_i1e", "xlog1py": "special_xlog1py",
    **{name: "special_" + name for name in _polynomials.POLYNOMIALS},
}

_NAMES.update(_special_table.SPECIAL_NAMES)

globals().update({name: _get(op).impl for name, op in _NAMES.items()})

__all__ = sorted(_NAMES)
