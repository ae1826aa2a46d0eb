"""The pointwise rows of torch.special's Bessel, Airy and gamma families (bodies in
``kernels/special_bessel.py`` and ``kernels/special_gamma.py``), run by the pointwise engine like
``pointwise_table``'s. Importing this module registers them."""
from __future__ import annotations

import operator

from ..kernels import special as KS
from ..kernels import special_bessel as KB
from ..kernels import special_gamma as KG
from .pointwise import FLOAT, FLOATS, REAL, Call, Row, build_all
from .pointwise_table import table_samples
from .registry import family_samples, get, tensor_attribute
from .samples import operand, sample


def _unary_mode(mode: int):
    """The parser of a unary function whose body serves a family, ``mode`` picking this one."""
    def parse(input):
        return Call((input,), (0,), mode=mode)
    return parse


def _whole_number(name: str, value, least: int, problem: str) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{name}(): argument must be an int, not {type(value).__name__}")
    if operator.index(value) < least:
        raise RuntimeError(problem)
    return operator.index(value)


def _polygamma(n, input):
    n = _whole_number("polygamma", n, 0, "polygamma(n, x) does not support negative n.")
    return Call((input, n), (0,), mode=(KG.POLYGAMMA_HIGHER if n > 0 else KG.POLYGAMMA_DIGAMMA).value)


def _mvlgamma(input, p):
    p = _whole_number("mvlgamma", p, 1, "p has to be greater than or equal to 1")
    return Call((input,), (0,), mode=p)


def _binary_mode(mode: int):
    def parse(input, other):
        return Call((input, other), (0, 1), mode=mode)
    return parse


def _scalar_overloads(name: str) -> tuple:
    return tuple(f"aten::{name}.{overload}" for overload in ("default", "self_scalar", "other_scalar", "out",
                                                              "self_scalar_out", "other_scalar_out"))


_ORDER_1, _SECOND_KIND, _SCALED = KB.BESSEL_ORDER_1.value, KB.BESSEL_SECOND_KIND.value, KB.BESSEL_SCALED.value
# (name under torch.special, body, mode, flops)
_SPECIAL_UNARY = [
    ("airy_ai", KB.airy_ai, 0, 400),
    ("bessel_j0", KB.bessel_jy, 0, 300), ("bessel_j1", KB.bessel_jy, _ORDER_1, 300),
    ("bessel_y0", KB.bessel_jy, _SECOND_KIND, 400), ("bessel_y1", KB.bessel_jy, _SECOND_KIND | _ORDER_1, 400),
    ("modified_bessel_i0", KS.i0, 0, 300), ("modified_bessel_i1", KS.i1, 0, 300),
    ("modified_bessel_k0", KB.bessel_k, 0, 400), ("modified_bessel_k1", KB.bessel_k, _ORDER_1, 400),
    ("scaled_modified_bessel_k0", KB.bessel_k, _SCALED, 400),
    ("scaled_modified_bessel_k1", KB.bessel_k, _SCALED | _ORDER_1, 400),
    ("spherical_bessel_j0", KB.spherical_bessel_j0, 0, 20),
]

SPECIAL_NAMES = {name: "special_" + name for name, *_ in _SPECIAL_UNARY}
SPECIAL_NAMES.update({"polygamma": "polygamma", "zeta": "special_zeta", "gammainc": "igamma", "gammaincc": "igammac",
                      "multigammaln": "mvlgamma"})

TABLE = [
    *[Row("special_" + name, body, _unary_mode(mode), rule=FLOAT, accepts=REAL, flops=flops, api=(), methods=(),
          inplace=False)
      for name, body, mode, flops in _SPECIAL_UNARY],
    Row("special_zeta", KG.zeta, _binary_mode(0), rule=FLOAT, accepts=REAL,
        flops=400, api=(), methods=(), inplace=False, aten=_scalar_overloads("special_zeta")),
    # Tensor.polygamma(n) reads self as the input: bound below; so does aten::polygamma_(self, n)
    Row("polygamma", KG.polygamma, _polygamma, rule=FLOAT, accepts=REAL, flops=400, methods=(),
        adapters=(("aten::polygamma_.default", lambda args, kwargs: ((args[1], args[0], *args[2:]), kwargs)),)),
    Row("igamma", KG.incomplete_gamma, _binary_mode(KG.GAMMA_LOWER.value), rule=FLOAT, accepts=FLOATS, flops=1000),
    Row("igammac", KG.incomplete_gamma, _binary_mode(KG.GAMMA_UPPER.value), rule=FLOAT, accepts=FLOATS, flops=1000),
    Row("mvlgamma", KG.mvlgamma, _mvlgamma, rule=FLOAT, accepts=REAL, flops=40),
]

build_all(TABLE)

# no NumPy references: torch is their oracle
_OWN_SAMPLES = {
    "polygamma": (sample(0, operand(2, 3, values="positive")), sample(1, operand(3, 2, layout="transposed")),
                  sample(2, operand(values="positive")), sample(1, operand(0, 3)),
                  sample(3, operand(4, dtype="int64", layout="sliced", values="positive"))),
    "mvlgamma": (sample(operand(2, 3, values="domain", domain=(1.5, 4)), 2),
                 sample(operand(3, 2, layout="transposed", values="domain", domain=(2, 4)), 3),
                 sample(operand(0, 3), 1), sample(operand(4, dtype="float64", values="positive"), 1)),
}
# no edge values: at infinities and the largest floats torch's series give NaN or noise where ours keep the
# limits (tests/test_special_bessel.py checks those)
_ARGUMENTS = {
    **{row.name: dict(edge=False) for row in TABLE},
    "special_zeta": dict(values=(("domain", (1.5, 4)), "positive"), edge=False),
    "igamma": dict(values=("positive",), dtypes=("float32", "float64"), edge=False),
    "igammac": dict(values=("positive",), dtypes=("float32", "float64"), edge=False),
    **{name: dict(values=("positive",), edge=False) for name in (
        "special_modified_bessel_k0", "special_modified_bessel_k1", "special_scaled_modified_bessel_k0",
        "special_scaled_modified_bessel_k1", "special_bessel_y0", "special_bessel_y1")},
}
family_samples("pointwise", table_samples(TABLE, _ARGUMENTS, _OWN_SAMPLES))


def _polygamma_method(op_name: str):
    impl = get(op_name).impl

    def method(self, n):
        return impl(n, self)

    method.__name__ = op_name
    method.__doc__ = f"``{op_name}(n, self)``, torch's method order."
    return method


tensor_attribute("polygamma", _polygamma_method("polygamma"))
tensor_attribute("polygamma_", _polygamma_method("polygamma_"))
