"""The table of pointwise ops: one ``Row`` per op, with the parser that reads its torch signature.

A parser returns a ``Call``: the operand slots in the order the kernel body takes them, which of
them decide the dtype by promotion, and the body's constexpr mode. Parsers only look at ``shape``
and ``dtype``, so meta and cost rules run them on metadata. Importing this module registers every
row (``pointwise.build_all``) and gives Tensor its operators.
"""
from __future__ import annotations

import ml_dtypes

from .. import shape as S
from ..kernels import pointwise as K
from ..kernels import special as KS
from ..lowering import constant_bits
from ..tensor import Tensor
from .aten_calls import positional_as_keywords
from .pointwise import (COMPARE, COMPARE_FLOAT, FLOAT, FLOATS, INTEGERS, INTEGERS_NO_BOOL, NO_BOOL,
                        OVERLOADS_TENSOR_SCALAR, OVERLOADS_TENSOR_SCALAR_OUT, PROMOTE, REAL,
                        SELECT_COMPONENTWISE, Call, Row, _is_scalar, _is_tensor, _python_scalar, build_all)
from .registry import TensorMeta, get, tensor_attribute
from .views import narrow

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


# ---- parsers ------------------------------------------------------------------------------------

def _unary(input):
    return Call((input,), (0,))


def _round_toward(direction: int):
    """The parser of floor, ceil or trunc: one kernel body, the direction as its mode."""
    def parse(input):
        return Call((input,), (0,), mode=direction)
    return parse


def _binary(input, other):
    return Call((input, other), (0, 1))


def _activation(input, inplace=False):
    return Call((input,), (0,), inplace=inplace)


def _with_alpha(input, other, *, alpha=1):
    if _is_scalar(alpha) and alpha == 1 and not isinstance(alpha, bool):
        return Call((input, other), (0, 1))
    return Call((input, other, alpha), (0, 1), mode=1)


def _rsub(input, other, *, alpha=1):
    return _with_alpha(other, input, alpha=alpha)


def _check_alpha(call, common):
    if len(call.slots) > 2 and common.is_integral and isinstance(call.slots[2], float):
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")


def _check_sub(call, common):
    if common.kind == "bool":
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
                           "`logical_xor()` operator instead.")
    _check_alpha(call, common)


_ROUNDING_MODES = {None: K.DIV_TRUE, "trunc": K.DIV_TRUNC, "floor": K.DIV_FLOOR}


def _div(input, other, *, rounding_mode=None):
    if rounding_mode not in _ROUNDING_MODES:
        raise ValueError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                         f"{rounding_mode!r}")
    mode = _ROUNDING_MODES[rounding_mode]
    return Call((input, other), (0, 1), mode=mode, rule=FLOAT if mode == K.DIV_TRUE else PROMOTE)


def _check_div(call, common):
    if call.mode != K.DIV_TRUE and common.is_complex:
        raise RuntimeError("div with a rounding mode is not supported for complex inputs")


def _floor_divide(input, other):
    return Call((input, other), (0, 1), mode=K.DIV_FLOOR)


_POW_MODES = {2: K.POW_SQUARE, 3: K.POW_CUBE, 0.5: K.POW_SQRT, -0.5: K.POW_RSQRT, -1: K.POW_RECIPROCAL,
              -2: K.POW_RECIPROCAL_SQUARE, 0: K.POW_ZERO}


def _pow(input, exponent):
    mode = K.POW_GENERAL
    if _is_scalar(exponent) and not isinstance(exponent, (bool, complex)) and _is_tensor(input):
        mode = _POW_MODES.get(float(exponent), K.POW_GENERAL)
    return Call((input, exponent), (0, 1), mode=mode)


def _check_pow(call, common):
    exponent = call.slots[1]
    if common.kind == "bool" and _is_tensor(exponent):  # as ATen: only a scalar exponent of a bool base
        raise NotImplementedError("pow is not implemented for bool tensors")
    if (common.is_integral and isinstance(exponent, int) and not isinstance(exponent, bool) and exponent < 0
            and _is_tensor(call.slots[0])):
        raise RuntimeError("Integers to negative integer powers are not allowed.")


def _square(input):
    # ATen's square is pow(input, 2): a bool input promotes with the integer 2 to int64
    return Call((input, 2), (0, 1))


def _round(input, *, decimals=0):
    if decimals == 0:
        return Call((input,), (0,))
    return Call((input, 10.0 ** abs(decimals)), (0,), mode=1 if decimals > 0 else 2)


def _check_round(call, common):
    if call.mode != 0 and not common.is_floating_point:
        raise NotImplementedError(f"round with decimals is not implemented for {common.name} tensors")


def _logit(input, eps=None):
    if eps is None:
        return Call((input,), (0,))
    return Call((input, eps), (0,), mode=1)


def _relu6(input, inplace=False):
    return Call((input, 0, 6), (0,), inplace=inplace)


def _hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    return Call((input, min_val, max_val), (0,), inplace=inplace)


def _leaky_relu(input, negative_slope=0.01, inplace=False):
    return Call((input, negative_slope), (0,), inplace=inplace)


def _elu(input, alpha=1.0, inplace=False, *, scale=1.0, input_scale=1.0):
    # scale and input_scale are ATen's (selu and celu are elu with them set); torch's Python elu lacks them
    return Call((input, alpha, scale, input_scale), (0,), inplace=inplace)


def _celu(input, alpha=1.0, inplace=False):
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: celu's alpha must not be 0")
    return Call((input, alpha, 1.0, 1.0 / alpha), (0,), inplace=inplace)


def _selu(input, inplace=False):
    return Call((input, SELU_ALPHA, SELU_SCALE, 1.0), (0,), inplace=inplace)


_GELU_APPROXIMATIONS = {"none": 0, "tanh": 1}


def _gelu(input, approximate="none"):
    if approximate not in _GELU_APPROXIMATIONS:
        raise ValueError(f"approximate argument must be either none or tanh, got {approximate!r}")
    return Call((input,), (0,), mode=_GELU_APPROXIMATIONS[approximate])


def _softplus(input, beta=1.0, threshold=20.0):
    return Call((input, beta, threshold), (0,))


def _threshold(input, threshold, value, inplace=False):
    return Call((input, threshold, value), (0,), inplace=inplace)


def _glu(input, dim=-1):
    if len(input.shape) == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    d = S.wrap_dim(dim, len(input.shape))
    size = input.shape[d]
    if size % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {size}")
    half = size // 2
    if isinstance(input, Tensor):
        return Call((narrow(input, d, 0, half), narrow(input, d, half, half)), (0, 1))
    shape = list(input.shape)
    shape[d] = half
    meta = TensorMeta(tuple(shape), input.dtype)
    return Call((meta, meta), (0, 1))


_GATED_ACTIVATIONS = {"silu": K.ACT_SILU, "gelu_tanh": K.ACT_GELU_TANH, "gelu": K.ACT_GELU}
_ACTIVATION_ROUNDING = {"bfloat16": K.ACT_ROUND_BF16, "float16": K.ACT_ROUND_F16}


def _act_and_mul(input, up=None, activation="silu"):
    """activation(gate) * up for ``input`` = cat([gate, up], -1), or for gate = ``input`` and ``up`` given
    apart (broadcasting), the activation's value rounded to a half input's dtype before the product, as the
    two unfused ops round it (so the result equals theirs)."""
    if activation not in _GATED_ACTIVATIONS:
        raise ValueError(f"act_and_mul: activation must be one of {', '.join(_GATED_ACTIVATIONS)}, got "
                         f"{activation!r}")
    if up is not None and up.dtype != input.dtype:
        raise RuntimeError(f"act_and_mul: gate is {input.dtype.name} but up is {up.dtype.name}")
    mode = _GATED_ACTIVATIONS[activation] + 4 * _ACTIVATION_ROUNDING.get(input.dtype.name, K.ACT_ROUND_NONE)
    gate, up = _glu(input).slots if up is None else (input, up)
    return Call((gate, up), (0, 1), mode=mode)


def _isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    if input.dtype != other.dtype:
        raise RuntimeError(f"isclose: {input.dtype.name} did not match {other.dtype.name}")
    if rtol < 0 or atol < 0:
        raise ValueError(f"isclose: rtol and atol must be non-negative, got rtol={rtol}, atol={atol}")
    return Call((input, other, rtol, atol), (0, 1), mode=int(bool(equal_nan)))


def _where(condition, input, other):
    if _is_tensor(condition) and condition.dtype.kind != "bool":
        raise RuntimeError(f"where expected condition to be a boolean tensor, but got a tensor with dtype "
                           f"{condition.dtype.name}")
    return Call((condition, input, other), (1, 2))


def _masked_fill(input, mask, value):
    if not _is_tensor(input) or not _is_tensor(mask):
        raise TypeError(f"masked_fill expects tensors for input and mask, got {type(input).__name__} and "
                        f"{type(mask).__name__}")
    if mask.dtype.kind != "bool":
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype {mask.dtype.name}")
    if _is_tensor(value) and len(value.shape) != 0:
        raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                           f"{len(value.shape)} dimension(s).")
    # the body is where's: mask ? value : input; only the input decides the dtype
    return Call((mask, value, input), (2,))


def _check_masked_fill(call, common):
    value = call.slots[1]
    if _is_scalar(value):
        if not common.is_complex:
            constant_bits(_python_scalar(value), common)  # ATen's checked conversion: raises on overflow
    elif value.dtype.is_complex and not common.is_complex:
        # ATen accepts one whose imaginary part is 0; knowing that would wait for the device
        raise RuntimeError(f"masked_fill: a complex value tensor can't fill a {common.name} tensor; pass its real "
                           "part")


def _clamp(input, min=None, max=None):
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    slots = (input, min, max)
    return Call(slots, tuple(i for i, s in enumerate(slots) if s is not None),
                mode=(min is not None) | ((max is not None) << 1))


def _clamp_min(input, min):
    return _clamp(input, min=min)


def _clamp_max(input, max):
    return _clamp(input, max=max)


def _lerp(input, end, weight):
    for name, t in (("end", end), ("weight", weight)):
        if _is_tensor(t) and t.dtype != input.dtype:
            raise RuntimeError(f"expected dtype {input.dtype.name} for `{name}` but got dtype {t.dtype.name}")
    return Call((input, end, weight), (0, 1))


def _addcmul(input, tensor1, tensor2, *, value=1):
    return Call((input, tensor1, tensor2, value), (0, 1, 2))


def _addcdiv(input, tensor1, tensor2, *, value=1):
    if all(_is_tensor(t) and t.dtype.kind in ("bool", "int", "uint") for t in (tensor1, tensor2)):
        raise RuntimeError("Integer division with addcdiv is no longer supported, and in a future release addcdiv "
                           "will perform a true division of tensor1 and tensor2. Use addcmul with 1 / tensor2, or "
                           "div with rounding_mode='trunc' or 'floor'.")
    return Call((input, tensor1, tensor2, value), (0, 1, 2))


def _nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    if input.dtype.kind != "float":
        return Call((input, 0, 0, 0), (0,))
    largest = float(ml_dtypes.finfo(input.dtype.numpy).max)
    return Call((input, 0.0 if nan is None else nan, largest if posinf is None else posinf,
                 -largest if neginf is None else neginf), (0,))


def _to_real(common):
    return common.to_real()


def _refuse_bool(message):
    def check(call, common):
        if common.kind == "bool":
            raise RuntimeError(message)
    return check


_NEG_BOOL = ("Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, "
             "use the `~` or `logical_not()` operator instead.")


# ---- the table ----------------------------------------------------------------------------------

def _by_keyword(overloads, position, *names):
    """ATen passes these arguments by position where the row's parser takes them by keyword."""
    return tuple((overload, positional_as_keywords(position, *names)) for overload in overloads)


def _unary_float(name, flops=20, **extra):
    """A unary math op computed in floating point (integer and bool inputs give the default float)."""
    return Row(name, getattr(K, name), _unary, rule=FLOAT, flops=flops, **extra)


def _arc(name):
    return ("arc" + name[1:],) if name[0] == "a" else ()


_ALIASED_UNARY = ["asin", "acos", "atan", "asinh", "acosh", "atanh"]

TABLE = [
    Row("abs", K.abs_, _unary, accepts=NO_BOOL, api=("abs", "absolute"), methods=("abs", "absolute"),
        inplace_api=("abs_",), complex_body=K.complex_abs, result=_to_real),
    Row("neg", K.neg, _unary, api=("neg", "negative"), methods=("neg", "negative"),
        inplace_api=("neg_", "negative_"), complex_body=K.complex_neg, check=_refuse_bool(_NEG_BOOL)),
    Row("sign", K.sign, _unary, accepts=REAL),
    Row("sgn", K.sign, _unary, complex_body=K.complex_sgn),
    Row("exp", K.exp, _unary, rule=FLOAT, flops=20, inplace_api=("exp_",), complex_body=K.complex_exp),
    *[_unary_float(n, inplace_api=(n + "_",), functional=(n,) if n in ("tanh", "sigmoid") else ())
      for n in ("exp2", "expm1", "log", "log2", "log10", "log1p", "rsqrt", "sin", "cos", "tan", "sinh", "cosh", "tanh",
                "erf", "erfc", "sigmoid")],
    _unary_float("erfinv", flops=40),
    _unary_float("sqrt", flops=4, inplace_api=("sqrt_",)),
    _unary_float("reciprocal", flops=4, inplace_api=("reciprocal_",)),
    *[_unary_float(n, api=(n, *_arc(n)), methods=(n, *_arc(n)), inplace_api=(n + "_", *[a + "_" for a in _arc(n)]))
      for n in _ALIASED_UNARY],
    Row("square", K.square, _square, inplace_api=("square_",), aten=("aten::square.default", "aten::square.out",
                                                                     "aten::square_.default")),
    Row("floor", K.round_to_integer, _round_toward(K.ROUND_FLOOR), accepts=NO_BOOL, inplace_api=("floor_",)),
    Row("ceil", K.round_to_integer, _round_toward(K.ROUND_CEIL), accepts=NO_BOOL, inplace_api=("ceil_",)),
    Row("trunc", K.round_to_integer, _round_toward(K.ROUND_TRUNC), accepts=NO_BOOL, api=("trunc", "fix"),
        methods=("trunc", "fix"), inplace_api=("trunc_", "fix_")),
    Row("round", K.round_, _round, accepts=NO_BOOL, check=_check_round, inplace_api=("round_",),
        aten=("aten::round.default", "aten::round.decimals", "aten::round.out", "aten::round_.default",
              "aten::round_.decimals")),
    Row("frac", K.frac, _unary, accepts=FLOATS, inplace_api=("frac_",)),
    Row("logit", K.logit, _logit, rule=FLOAT, flops=20, inplace_api=("logit_",)),
    # activations
    Row("relu", K.relu, _activation, inplace_api=("relu_",), functional=("relu", "relu_"),
        check=_refuse_bool("Boolean inputs not supported for relu")),
    Row("relu6", K.hardtanh, _relu6, accepts=NO_BOOL, api=(), methods=(), functional=("relu6",),
        aten=("aten::relu6.default", "aten::relu6_.default")),
    Row("hardtanh", K.hardtanh, _hardtanh, accepts=NO_BOOL, api=(), methods=(), functional=("hardtanh", "hardtanh_")),
    Row("leaky_relu", K.leaky_relu, _leaky_relu, accepts=FLOATS, api=(), methods=(),
        functional=("leaky_relu", "leaky_relu_")),
    Row("elu", K.elu, _elu, accepts=FLOATS, flops=20, api=(), methods=(), functional=("elu", "elu_"),
        adapters=_by_keyword(("aten::elu.default", "aten::elu.out", "aten::elu_.default"), 1, "alpha", "scale",
                             "input_scale")),
    Row("celu", K.elu, _celu, accepts=FLOATS, flops=20, methods=(), inplace_api=("celu_",),
        functional=("celu", "celu_")),
    Row("selu", K.elu, _selu, accepts=FLOATS, flops=20, methods=(), inplace_api=("selu_",),
        functional=("selu", "selu_"), aten=("aten::selu.default", "aten::selu_.default")),
    Row("gelu", K.gelu, _gelu, accepts=FLOATS, flops=40, api=(), methods=(), inplace=False, functional=("gelu",)),
    Row("silu", K.silu, _activation, accepts=FLOATS, flops=20, api=(), methods=(), functional=("silu",)),
    Row("mish", K.mish, _activation, accepts=FLOATS, flops=60, api=(), methods=(), functional=("mish",)),
    Row("softplus", K.softplus, _softplus, accepts=FLOATS, flops=40, api=(), methods=(), inplace=False,
        functional=("softplus",)),
    # ATen has no softsign (torch composes it from abs, add and div): an nbx:: name
    Row("softsign", K.softsign, _unary, rule=FLOAT, accepts=NO_BOOL, flops=4, api=(), methods=(), inplace=False,
        functional=("softsign",), aten=("nbx::softsign",)),
    Row("hardsigmoid", K.hardsigmoid, _activation, accepts=FLOATS, flops=4, api=(), methods=(),
        functional=("hardsigmoid",)),
    Row("hardswish", K.hardswish, _activation, accepts=FLOATS, flops=5, api=(), methods=(),
        functional=("hardswish",)),
    Row("threshold", K.threshold, _threshold, accepts=NO_BOOL, methods=(), inplace_api=("threshold_",),
        functional=("threshold", "threshold_")),
    Row("logsigmoid", K.logsigmoid, _unary, accepts=FLOATS, flops=40, api=(), methods=(), inplace=False,
        functional=("logsigmoid",), aten=("aten::log_sigmoid.default", "aten::log_sigmoid.out")),
    Row("glu", K.glu, _glu, accepts=FLOATS, flops=20, api=(), methods=(), inplace=False, functional=("glu",),
        aten=("aten::glu.default", "aten::glu.out")),
    # the gated MLP's activation(gate) * up over cat([gate, up], -1): an nbx extra in nn.functional
    Row("act_and_mul", K.act_and_mul, _act_and_mul, accepts=FLOATS, flops=25, api=(), methods=(), inplace=False,
        aten=("nbx::act_and_mul",), functional=("act_and_mul",)),
    # binary arithmetic
    # ATen's Scalar overloads pass alpha by position
    Row("add", K.add, _with_alpha, check=_check_alpha, complex_body=K.complex_add, overloads=OVERLOADS_TENSOR_SCALAR,
        adapters=_by_keyword(("aten::add.Scalar", "aten::add.Scalar_out", "aten::add_.Scalar"), 2, "alpha")),
    Row("sub", K.sub, _with_alpha, check=_check_sub, api=("sub", "subtract"), methods=("sub", "subtract"),
        complex_body=K.complex_sub, overloads=OVERLOADS_TENSOR_SCALAR,
        adapters=_by_keyword(("aten::sub.Scalar", "aten::sub.Scalar_out", "aten::sub_.Scalar"), 2, "alpha")),
    Row("rsub", K.sub, _rsub, check=_check_sub, methods=(), inplace=False, complex_body=K.complex_sub,
        overloads=OVERLOADS_TENSOR_SCALAR_OUT,
        adapters=_by_keyword(("aten::rsub.Scalar", "aten::rsub.Scalar_out"), 2, "alpha")),
    Row("mul", K.mul, _binary, api=("mul", "multiply"), methods=("mul", "multiply"), complex_body=K.complex_mul,
        overloads=OVERLOADS_TENSOR_SCALAR),
    Row("div", K.div, _div, check=_check_div, api=("div", "divide", "true_divide"),
        methods=("div", "divide", "true_divide"), complex_body=K.complex_div,
        aten=("aten::div.Tensor", "aten::div.Scalar", "aten::div.Tensor_mode", "aten::div.Scalar_mode",
              "aten::div.out", "aten::div.out_mode", "aten::div_.Tensor", "aten::div_.Scalar",
              "aten::div_.Tensor_mode", "aten::div_.Scalar_mode")),
    Row("floor_divide", K.div, _floor_divide, accepts=NO_BOOL, flops=8,
        aten=("aten::floor_divide.default", "aten::floor_divide.Scalar", "aten::floor_divide.out",
              "aten::floor_divide.Scalar_out", "aten::floor_divide_.Tensor", "aten::floor_divide_.Scalar")),
    Row("remainder", K.remainder, _binary, accepts=NO_BOOL, flops=8, overloads=OVERLOADS_TENSOR_SCALAR_OUT),
    Row("fmod", K.fmod, _binary, accepts=NO_BOOL, flops=8, overloads=OVERLOADS_TENSOR_SCALAR_OUT),
    Row("pow", K.pow_, _pow, accepts=REAL, flops=20, check=_check_pow,
        aten=("aten::pow.Tensor_Tensor", "aten::pow.Tensor_Scalar", "aten::pow.Scalar", "aten::pow.Tensor_Tensor_out",
              "aten::pow_.Tensor", "aten::pow_.Scalar")),
    Row("atan2", K.atan2, _binary, rule=FLOAT, accepts=REAL, flops=20, api=("atan2", "arctan2"),
        methods=("atan2", "arctan2")),
    Row("hypot", K.hypot, _binary, rule=FLOAT, accepts=FLOATS, flops=10),
    Row("maximum", K.maximum, _binary, accepts=REAL, inplace=False),
    Row("minimum", K.minimum, _binary, accepts=REAL, inplace=False),
    Row("fmax", K.fmax, _binary, accepts=REAL, inplace=False),
    Row("fmin", K.fmin, _binary, accepts=REAL, inplace=False),
    Row("copysign", K.copysign, _binary, rule=FLOAT, accepts=REAL, overloads=OVERLOADS_TENSOR_SCALAR),
    Row("xlogy", K.xlogy, _binary, rule=FLOAT, accepts=REAL, flops=20, inplace_api=("xlogy_",),
        aten=("aten::xlogy.Tensor", "aten::xlogy.Scalar_Self", "aten::xlogy.Scalar_Other", "aten::xlogy.OutTensor",
              "aten::xlogy.OutScalar_Self", "aten::xlogy.OutScalar_Other", "aten::xlogy_.Tensor",
              "aten::xlogy_.Scalar_Other")),
    Row("logaddexp", K.logaddexp, _binary, rule=FLOAT, accepts=FLOATS, flops=40, inplace=False),
    # comparisons and logic
    Row("eq", K.eq, _binary, rule=COMPARE, complex_body=K.complex_eq, complex_mode=0,
        overloads=OVERLOADS_TENSOR_SCALAR_OUT),
    Row("ne", K.ne, _binary, rule=COMPARE, api=("ne", "not_equal"), methods=("ne", "not_equal"),
        complex_body=K.complex_eq, complex_mode=1, overloads=OVERLOADS_TENSOR_SCALAR_OUT),
    Row("lt", K.lt, _binary, rule=COMPARE, accepts=REAL, api=("lt", "less"), methods=("lt", "less"),
        overloads=OVERLOADS_TENSOR_SCALAR_OUT),
    Row("le", K.le, _binary, rule=COMPARE, accepts=REAL, api=("le", "less_equal"), methods=("le", "less_equal"),
        overloads=OVERLOADS_TENSOR_SCALAR_OUT),
    Row("gt", K.gt, _binary, rule=COMPARE, accepts=REAL, api=("gt", "greater"), methods=("gt", "greater"),
        overloads=OVERLOADS_TENSOR_SCALAR_OUT),
    Row("ge", K.ge, _binary, rule=COMPARE, accepts=REAL, api=("ge", "greater_equal"),
        methods=("ge", "greater_equal"), overloads=OVERLOADS_TENSOR_SCALAR_OUT),
    Row("isclose", K.isclose, _isclose, rule=COMPARE_FLOAT, accepts=REAL, flops=8, inplace=False,
        aten=("aten::isclose.default",)),
    Row("logical_and", K.logical_and, _binary, rule=COMPARE, accepts=REAL,
        aten=("aten::logical_and.default", "aten::logical_and.out", "aten::logical_and_.default")),
    Row("logical_or", K.logical_or, _binary, rule=COMPARE, accepts=REAL,
        aten=("aten::logical_or.default", "aten::logical_or.out", "aten::logical_or_.default")),
    Row("logical_xor", K.logical_xor, _binary, rule=COMPARE, accepts=REAL,
        aten=("aten::logical_xor.default", "aten::logical_xor.out", "aten::logical_xor_.default")),
    Row("logical_not", K.logical_not, _unary, rule=COMPARE, accepts=REAL),
    Row("bitwise_and", K.bitwise_and, _binary, accepts=INTEGERS, overloads=OVERLOADS_TENSOR_SCALAR_OUT),
    Row("bitwise_or", K.bitwise_or, _binary, accepts=INTEGERS, overloads=OVERLOADS_TENSOR_SCALAR_OUT),
    Row("bitwise_xor", K.bitwise_xor, _binary, accepts=INTEGERS, overloads=OVERLOADS_TENSOR_SCALAR_OUT),
    Row("bitwise_not", K.bitwise_not, _unary, accepts=INTEGERS),
    Row("bitwise_left_shift", K.left_shift, _binary, accepts=INTEGERS_NO_BOOL,
        aten=("aten::bitwise_left_shift.Tensor", "aten::bitwise_left_shift.Tensor_Scalar",
              "aten::bitwise_left_shift.Scalar_Tensor", "aten::__lshift__.Tensor", "aten::__lshift__.Scalar",
              "aten::bitwise_left_shift_.Tensor", "aten::bitwise_left_shift_.Tensor_Scalar")),
    Row("bitwise_right_shift", K.right_shift, _binary, accepts=INTEGERS_NO_BOOL,
        aten=("aten::bitwise_right_shift.Tensor", "aten::bitwise_right_shift.Tensor_Scalar",
              "aten::bitwise_right_shift.Scalar_Tensor", "aten::__rshift__.Tensor", "aten::__rshift__.Scalar",
              "aten::bitwise_right_shift_.Tensor", "aten::bitwise_right_shift_.Tensor_Scalar")),
    # selection, clamping, ternary
    # Tensor.where(condition, other) reads self as the values where the condition holds: tensor.py
    Row("where", K.where, _where, inplace=False, complex_body=SELECT_COMPONENTWISE, methods=(),
        aten=("aten::where.self", "aten::where.ScalarSelf", "aten::where.ScalarOther", "aten::where.Scalar",
              "aten::where.self_out")),
    Row("masked_fill", K.where, _masked_fill, check=_check_masked_fill, flops=1,
        complex_body=SELECT_COMPONENTWISE,
        aten=("aten::masked_fill.Scalar", "aten::masked_fill.Tensor", "aten::masked_fill.Scalar_out",
              "aten::masked_fill.Tensor_out", "aten::masked_fill_.Scalar", "aten::masked_fill_.Tensor")),
    Row("clamp", K.clamp, _clamp, accepts=REAL, api=("clamp", "clip"), methods=("clamp", "clip"),
        inplace_api=("clamp_", "clip_"),
        aten=("aten::clamp.default", "aten::clamp.Tensor", "aten::clamp.out", "aten::clamp.Tensor_out",
              "aten::clip.default", "aten::clip.Tensor", "aten::clamp_.default", "aten::clamp_.Tensor",
              "aten::clip_.default", "aten::clip_.Tensor")),
    Row("clamp_min", K.clamp, _clamp_min, accepts=REAL, inplace_api=("clamp_min_",),
        aten=("aten::clamp_min.default", "aten::clamp_min.Tensor", "aten::clamp_min_.default",
              "aten::clamp_min_.Tensor")),
    Row("clamp_max", K.clamp, _clamp_max, accepts=REAL, inplace_api=("clamp_max_",),
        aten=("aten::clamp_max.default", "aten::clamp_max.Tensor", "aten::clamp_max_.default",
              "aten::clamp_max_.Tensor")),
    Row("lerp", K.lerp, _lerp, accepts=FLOATS, flops=4,
        aten=("aten::lerp.Scalar", "aten::lerp.Tensor", "aten::lerp.Scalar_out", "aten::lerp_.Scalar",
              "aten::lerp_.Tensor")),
    Row("addcmul", K.addcmul, _addcmul, accepts=REAL, flops=3,
        aten=("aten::addcmul.default", "aten::addcmul.out", "aten::addcmul_.default")),
    Row("addcdiv", K.addcdiv, _addcdiv, accepts=REAL, flops=3,
        aten=("aten::addcdiv.default", "aten::addcdiv.out", "aten::addcdiv_.default")),
    Row("nan_to_num", K.nan_to_num, _nan_to_num, accepts=REAL, flops=3, inplace_api=("nan_to_num_",)),
    Row("isfinite", K.isfinite, _unary, rule=COMPARE, accepts=REAL, inplace=False, aten=("aten::isfinite.default",)),
    Row("isinf", K.isinf, _unary, rule=COMPARE, accepts=REAL, inplace=False),
    Row("isnan", K.isnan, _unary, rule=COMPARE, accepts=REAL, inplace=False),
    Row("isposinf", K.isposinf, _unary, rule=COMPARE, accepts=REAL, inplace=False),
    Row("isneginf", K.isneginf, _unary, rule=COMPARE, accepts=REAL, inplace=False),
    Row("signbit", K.signbit, _unary, rule=COMPARE, accepts=REAL, inplace=False),
    # complex basics
    Row("angle", K.angle, _unary, rule=FLOAT, inplace=False, complex_body=K.complex_angle, result=_to_real),
    Row("conj", K.conj_real, _unary, inplace=False, complex_body=K.complex_conj,
        aten=("aten::conj.default", "aten::conj_physical.default"), api=("conj", "conj_physical"),
        methods=("conj", "conj_physical")),
    # torch.special: the ones torch also has at the top level keep their names there
    *[Row(n, getattr(KS, n), _unary, rule=FLOAT, accepts=REAL, flops=flops, inplace_api=(n + "_",))
      for n, flops in (("lgamma", 40), ("digamma", 80), ("i0", 300), ("sinc", 20))],
    # the rest only in nbx.special, each under ATen's ``special_`` name
    *[Row("special_" + n, getattr(KS, n), _unary, rule=FLOAT, accepts=REAL, flops=flops, api=(), methods=(),
          inplace=False)
      for n, flops in (("erfcx", 40), ("ndtr", 20), ("ndtri", 40), ("log_ndtr", 60), ("entr", 20), ("i0e", 300),
                       ("i1", 300), ("i1e", 300))],
    Row("special_xlog1py", KS.xlog1py, _binary, rule=FLOAT, accepts=REAL, flops=20, api=(), methods=(), inplace=False,
        aten=tuple(f"aten::special_xlog1py.{o}" for o in ("default", "self_scalar", "other_scalar", "out",
                                                         "self_scalar_out", "other_scalar_out"))),
]

build_all(TABLE)


# ---- Tensor operators ---------------------------------------------------------------------------

def _operator(op_name: str, reflected: bool = False):
    impl = get(op_name).impl

    def operator(self, other):
        if type(other) is not Tensor and not (isinstance(other, Tensor) or _is_scalar(other)):
            return NotImplemented
        return impl(other, self) if reflected else impl(self, other)

    operator.__name__ = op_name
    return operator


_OPERATORS = {
    "add": "add", "sub": "sub", "mul": "mul", "truediv": "div", "floordiv": "floor_divide", "mod": "remainder",
    "pow": "pow", "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor",
    "lshift": "bitwise_left_shift", "rshift": "bitwise_right_shift",
}
for _dunder, _op in _OPERATORS.items():
    tensor_attribute(f"__{_dunder}__", _operator(_op))
    tensor_attribute(f"__r{_dunder}__", _operator(_op, reflected=True))
    tensor_attribute(f"__i{_dunder}__", _operator(_op + "_"))
for _dunder, _op in {"eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}.items():
    tensor_attribute(f"__{_dunder}__", _operator(_op))
tensor_attribute("__hash__", object.__hash__)  # tensors stay hashable by identity, as torch's are
tensor_attribute("__neg__", get("neg").impl)
tensor_attribute("__abs__", get("abs").impl)
tensor_attribute("__invert__", get("bitwise_not").impl)
tensor_attribute("__pos__", lambda self: self)
