"""torch.special's orthogonal polynomials and the integer and float-bits pointwise ops (gcd, lcm,
nextafter, ldexp) as rows of a pointwise table of their own (see ``pointwise``), and frexp, whose two
outputs take a kernel of their own. Bodies: ``kernels/special_polynomials.py``."""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from .. import shape as S
from ..allocation import new_tensor
from ..dtypes import get_dtype
from ..kernels import special_polynomials as KP
from ..launch import cdiv, launch
from ..lowering import elementwise_block, needs_index_64
from ..promotion import result_type
from ..tensor import Tensor
from .pointwise import FLOAT, FLOATS, INTEGERS_NO_BOOL, REAL, Call, Row, build_all
from .pointwise_table import _binary, table_samples
from .registry import OUT_EXACT, Cost, TensorMeta, family_samples, nbytes, register
from .samples import Samples, unary_samples

# torch.special's name: the kernel body's family (its MODE)
POLYNOMIALS = {
    "chebyshev_polynomial_t": KP.CHEBYSHEV_T, "chebyshev_polynomial_u": KP.CHEBYSHEV_U,
    "chebyshev_polynomial_v": KP.CHEBYSHEV_V, "chebyshev_polynomial_w": KP.CHEBYSHEV_W,
    **{f"shifted_chebyshev_polynomial_{kind}": KP.SHIFTED + family
       for kind, family in zip("tuvw", (KP.CHEBYSHEV_T, KP.CHEBYSHEV_U, KP.CHEBYSHEV_V, KP.CHEBYSHEV_W))},
    "hermite_polynomial_h": KP.HERMITE_H, "hermite_polynomial_he": KP.HERMITE_HE,
    "laguerre_polynomial_l": KP.LAGUERRE_L, "legendre_polynomial_p": KP.LEGENDRE_P,
}
# ATen's overloads of each polynomial: tensor or scalar x and n
_POLYNOMIAL_OVERLOADS = ("default", "x_scalar", "n_scalar", "out", "x_scalar_out", "n_scalar_out")


def _polynomial(family):
    """The parser of one family: ``(input, n)``, the family as the body's mode."""
    def parse(input, n):
        return Call((input, n), (0, 1), mode=int(family))
    return parse


_NEXT_MODES = {"bfloat16": KP.NEXT_BFLOAT16, "float16": KP.NEXT_FLOAT16}


def _nextafter(input, other):
    common = result_type(input, other)
    return Call((input, other), (0, 1), mode=int(_NEXT_MODES.get(common.name, KP.NEXT_NATIVE)))


TABLE = [
    *[Row("special_" + name, KP.orthogonal_polynomial, _polynomial(family), rule=FLOAT, accepts=REAL, flops=40,
          api=(), methods=(), inplace=False, aten=tuple(f"aten::special_{name}.{o}" for o in _POLYNOMIAL_OVERLOADS))
      for name, family in POLYNOMIALS.items()],
    Row("gcd", KP.gcd, _binary, accepts=INTEGERS_NO_BOOL, flops=100, inplace_api=("gcd_",)),
    Row("lcm", KP.lcm, _binary, accepts=INTEGERS_NO_BOOL, flops=100, inplace_api=("lcm_",)),
    Row("nextafter", KP.nextafter, _nextafter, accepts=FLOATS, flops=4),
    Row("ldexp", KP.ldexp, _binary, rule=FLOAT, accepts=REAL, flops=20, inplace_api=("ldexp_",),
        aten=("aten::ldexp.Tensor", "aten::ldexp.out", "aten::ldexp_.default")),
]

build_all(TABLE)

_REFERENCES = {"gcd": np.gcd, "lcm": np.lcm, "ldexp": lambda x, exponent: x * 2.0 ** exponent}
# the degree n as whole numbers, in the float dtype or as int64; the rest compared with torch
_ARGUMENTS = {name: dict(values=("normal", ("index", (0, 5)))) for name in ("special_" + family for family in POLYNOMIALS)}
_ARGUMENTS["ldexp"] = dict(values=("normal", ("domain", (-4, 4))))
family_samples("pointwise", table_samples(TABLE, _ARGUMENTS, references=_REFERENCES))


# ---- frexp ----------------------------------------------------------------------------------------

FrexpResult = namedtuple("frexp", ["mantissa", "exponent"])
# per compute dtype: the bits' integer type, fraction bits, exponent mask, bias, and the power of two that
# lifts every subnormal into the normal range
_FREXP_FORMATS = {"float32": ("int32", 23, 0xFF, 127, 24), "float64": ("int64", 52, 0x7FF, 1023, 54)}


def _frexp_metas(input):
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"torch.frexp() only supports floating-point dtypes, got {input.dtype.name}")
    shape = tuple(input.shape)
    return TensorMeta(shape, input.dtype), TensorMeta(shape, get_dtype("int32"))


def _frexp_cost(a):
    mantissa, exponent = _frexp_metas(a.input)
    return Cost(flops=8 * S.numel(mantissa.shape), bytes_read=nbytes(a.input),
                bytes_written=nbytes(mantissa) + nbytes(exponent))


def _frexp_reference(input):
    mantissa, exponent = np.frexp(input)
    return mantissa, exponent.astype(np.int32)


# out= as torch takes it: a (mantissa, exponent) pair of exactly the result's dtypes, the exponent int32
@register("frexp", family="pointwise", aten=["aten::frexp.Tensor"], meta=lambda a: _frexp_metas(a.input),
          cost=_frexp_cost, bound=True, methods=("frexp",), variants=(OUT_EXACT,),
          samples=lambda op: Samples(unary_samples(dtypes=("float32", "float64")), _frexp_reference))
def frexp(input: Tensor):
    """(mantissa, exponent) with input = mantissa * 2^exponent, |mantissa| in [0.5, 1) and the exponent
    int32; a half input is split in float32, where its mantissa is exact."""
    metas = _frexp_metas(input)
    compute = get_dtype("float64") if input.dtype.name == "float64" else get_dtype("float32")
    source = input.contiguous().to(compute)
    mantissa = new_tensor(metas[0].shape, compute, input.device)
    exponent = new_tensor(metas[1].shape, metas[1].dtype, input.device)
    n = source.numel()
    if n:
        import triton.language as tl
        bits, fraction_bits, exponent_mask, bias, subnormal_shift = _FREXP_FORMATS[compute.name]
        block = elementwise_block(input.device)
        launch(KP.frexp_kernel, (cdiv(n, block),), input.device, [source, mantissa, exponent, n],
               COMPUTE=compute.triton, BITS=getattr(tl, bits), FRACTION_BITS=fraction_bits,
               EXPONENT_MASK=exponent_mask, BIAS=bias, SUBNORMAL_SHIFT=subnormal_shift,
               INDEX_64=needs_index_64(count=n), BLOCK=block)
    return FrexpResult(mantissa.to(input.dtype), exponent)
