"""The table of pointwise ops: one ``Row`` per op, with the parser that reads its torch signature.

A parser returns a ``Call``: the operand slots in the order the kernel body takes them, which of
them decide the dtype by promotion, and the body's constexpr mode. Parsers only look at ``shape``
and ``dtype``, so meta and cost rules run them on metadata. Importing this module registers every
row (``pointwise.build_all``) and gives Tensor its operators.
"""
from __future__ import annotations

import inspect
import math
from typing import Callable

import ml_dtypes
import numpy as np

from .. import shape as S
from ..dtypes import get_dtype
from ..kernels import pointwise as K
from ..kernels import special as KS
from ..lowering import encode_scalar
from ..tensor import Tensor
from .aten_calls import positional_as_keywords
from .pointwise import (COMPARE, COMPARE_FLOAT, FLOAT, FLOATS, INTEGERS, INTEGERS_NO_BOOL, NO_BOOL,
                        OVERLOADS_TENSOR_SCALAR, OVERLOADS_TENSOR_SCALAR_OUT, PROMOTE, REAL, SELECT_COMPONENTWISE, Call,
                        Row, _is_scalar, _is_tensor, _python_scalar, build_all)
from .registry import TensorMeta, family_samples, get, tensor_attribute
from .samples import Operand, Samples, operand, sample
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
    return Call((input, other, alpha), (0, 1), mode=K.ALPHA_GIVEN.value)


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


_ROUNDING_MODES = {None: K.DIV_TRUE.value, "trunc": K.DIV_TRUNC.value, "floor": K.DIV_FLOOR.value}


def _div(input, other, *, rounding_mode=None):
    if rounding_mode not in _ROUNDING_MODES:
        raise ValueError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                         f"{rounding_mode!r}")
    mode = _ROUNDING_MODES[rounding_mode]
    return Call((input, other), (0, 1), mode=mode, rule=FLOAT if mode == K.DIV_TRUE.value else PROMOTE)


def _check_div(call, common):
    if call.mode != K.DIV_TRUE.value and common.is_complex:
        raise RuntimeError("div with a rounding mode is not supported for complex inputs")


def _floor_divide(input, other):
    return Call((input, other), (0, 1), mode=K.DIV_FLOOR.value)


_POW_MODES = {exponent: mode.value for exponent, mode in (
    (2, K.POW_SQUARE), (3, K.POW_CUBE), (0.5, K.POW_SQRT), (-0.5, K.POW_RSQRT), (-1, K.POW_RECIPROCAL),
    (-2, K.POW_RECIPROCAL_SQUARE), (0, K.POW_ZERO))}


def _pow(input, exponent):
    mode = K.POW_GENERAL.value
    if _is_scalar(exponent) and not isinstance(exponent, (bool, complex)) and _is_tensor(input):
        mode = _POW_MODES.get(float(exponent), K.POW_GENERAL.value)
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
    return Call((input, 10.0 ** abs(decimals)), (0,),
                mode=(K.ROUND_DECIMALS_POSITIVE if decimals > 0 else K.ROUND_DECIMALS_NEGATIVE).value)


def _check_round(call, common):
    if call.mode != K.ROUND_DECIMALS_NONE.value and not common.is_floating_point:
        raise NotImplementedError(f"round with decimals is not implemented for {common.name} tensors")


def _logit(input, eps=None):
    if eps is None:
        return Call((input,), (0,))
    return Call((input, eps), (0,), mode=K.LOGIT_CLAMPED.value)


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


_GELU_APPROXIMATIONS = {"none": K.GELU_ERF.value, "tanh": K.GELU_TANH.value}


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


_GATED_ACTIVATIONS = {"silu": K.ACT_SILU.value, "gelu_tanh": K.ACT_GELU_TANH.value, "gelu": K.ACT_GELU.value}
_ACTIVATION_ROUNDING = {"bfloat16": K.ACT_ROUND_BF16.value, "float16": K.ACT_ROUND_F16.value}


def _act_and_mul(input, up=None, activation="silu"):
    """activation(gate) * up for ``input`` = cat([gate, up], -1), or for gate = ``input`` and ``up`` given
    apart (broadcasting), the activation's value rounded to a half input's dtype before the product, as the
    two unfused ops round it (so the result equals theirs)."""
    if activation not in _GATED_ACTIVATIONS:
        raise ValueError(f"act_and_mul: activation must be one of {', '.join(_GATED_ACTIVATIONS)}, got "
                         f"{activation!r}")
    if up is not None and up.dtype != input.dtype:
        raise RuntimeError(f"act_and_mul: gate is {input.dtype.name} but up is {up.dtype.name}")
    rounding = _ACTIVATION_ROUNDING.get(input.dtype.name, K.ACT_ROUND_NONE.value)
    mode = _GATED_ACTIVATIONS[activation] + K.ACT_KINDS.value * rounding
    gate, up = _glu(input).slots if up is None else (input, up)
    return Call((gate, up), (0, 1), mode=mode)


def _isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    if input.dtype != other.dtype:
        raise RuntimeError(f"isclose: {input.dtype.name} did not match {other.dtype.name}")
    if rtol < 0 or atol < 0:
        raise ValueError(f"isclose: rtol and atol must be non-negative, got rtol={rtol}, atol={atol}")
    return Call((input, other, rtol, atol), (0, 1),
                mode=(K.ISCLOSE_NAN_EQUAL if equal_nan else K.ISCLOSE_NAN_UNEQUAL).value)


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
            encode_scalar(_python_scalar(value), common)  # ATen's checked conversion: raises on overflow
    elif value.dtype.is_complex and not common.is_complex:
        # ATen accepts one whose imaginary part is 0; knowing that would wait for the device
        raise RuntimeError(f"masked_fill: a complex value tensor can't fill a {common.name} tensor; pass its real "
                           "part")


def _clamp(input, min=None, max=None):
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    slots = (input, min, max)
    return Call(slots, tuple(i for i, s in enumerate(slots) if s is not None),
                mode=(K.CLAMP_MIN.value if min is not None else 0) | (K.CLAMP_MAX.value if max is not None else 0))


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
    Row("floor", K.round_to_integer, _round_toward(K.ROUND_FLOOR.value), accepts=NO_BOOL, inplace_api=("floor_",)),
    Row("ceil", K.round_to_integer, _round_toward(K.ROUND_CEIL.value), accepts=NO_BOOL, inplace_api=("ceil_",)),
    Row("trunc", K.round_to_integer, _round_toward(K.ROUND_TRUNC.value), accepts=NO_BOOL, api=("trunc", "fix"),
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
    Row("eq", K.eq, _binary, rule=COMPARE, complex_body=K.complex_eq, complex_mode=K.COMPLEX_EQ.value,
        overloads=OVERLOADS_TENSOR_SCALAR_OUT),
    Row("ne", K.ne, _binary, rule=COMPARE, api=("ne", "not_equal"), methods=("ne", "not_equal"),
        complex_body=K.complex_eq, complex_mode=K.COMPLEX_NE.value, overloads=OVERLOADS_TENSOR_SCALAR_OUT),
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


# ---- samples ------------------------------------------------------------------------------------
# Each row's samples follow from its parser (how many tensors it takes) and the dtypes it accepts;
# ``ROW_SAMPLES`` names the values a row's operands need where any will not do, and the arguments its
# samples add. NumPy float64 references are named in ``REFERENCES``.

_FIRST_DTYPES = {FLOATS: ("float32", "bfloat16"), INTEGERS: ("int32", "bool"), INTEGERS_NO_BOOL: ("int32", "int64")}


def _operand_count(parse) -> int:
    """The tensors a parser takes: its parameters with no default."""
    return sum(1 for p in inspect.signature(parse).parameters.values()
               if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


def row_samples(row: Row, reference=None, values=("normal",), extra=(), kwargs=None, edge=True, dtypes=None,
                scalars=()) -> Samples:
    """The samples of a table row: its operands as matrices, one transposed against a broadcast row, as 0-d
    and 0-size operands, in its second dtype sliced against one broadcast with stride 0, and as edge
    values; ``values`` gives each operand's kind of values (the last repeated), ``extra`` more samples,
    ``dtypes`` the two dtypes where the accepted ones do not decide them, ``scalars`` the parser's last
    arguments when they are numbers."""
    count = _operand_count(row.parse) - len(scalars)
    kinds = [values[min(i, len(values) - 1)] for i in range(count)]
    first, second = dtypes or _FIRST_DTYPES.get(row.accepts, ("float32", "int64"))
    kwargs = kwargs or {}

    def operands(shape_of, dtype, layout_of=lambda i: "contiguous"):
        made = []
        for i, kind in enumerate(kinds):
            described = kind if isinstance(kind, tuple) else (kind, None)
            value_kind = described[0]
            domain = described[1]
            if i > 0 and dtype in ("int32", "int64"):  # an integer divisor, shift or power: never 0 or negative
                value_kind = "positive" if value_kind in ("normal", "edge") else value_kind
                domain = domain and (max(domain[0], 0), domain[1])
            made.append(operand(*shape_of(i), dtype=dtype, layout=layout_of(i), values=value_kind, domain=domain))
        return made + list(scalars)

    cases = [
        sample(*operands(lambda i: (2, 3), first), **kwargs),
        sample(*operands(lambda i: (3, 2) if i == 0 else (2,), first,
                         lambda i: "transposed" if i == 0 else "contiguous"), **kwargs),
        sample(*operands(lambda i: (), first), **kwargs),
        sample(*operands(lambda i: (0, 3) if i == 0 else (3,), first), **kwargs),
        sample(*operands(lambda i: (2, 4), second, lambda i: "sliced" if i == 0 else "broadcast"), **kwargs),
    ]
    if edge and first.startswith("float"):
        cases.append(sample(*[operand(12, dtype=first, values="edge" if i == 0 else "normal")
                              for i in range(count)], *scalars, **kwargs))
    return Samples(tuple(cases) + tuple(extra), reference)


def _gelu_reference(x, approximate="none"):
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


def _softplus_reference(x, beta=1.0, threshold=20.0):
    with np.errstate(over="ignore"):
        return np.where(x * beta > threshold, x, np.log1p(np.exp(x * beta)) / beta)


def _with_alpha_reference(combine):
    def reference(x, y, alpha=1):
        return combine(x, alpha * y if alpha != 1 else y)
    return reference


def _div_reference(x, y, rounding_mode=None):
    if rounding_mode is None:
        return np.true_divide(x, y)
    quotient = np.true_divide(x, y) if rounding_mode == "trunc" else np.floor_divide(x, y)
    if rounding_mode == "trunc":
        return np.trunc(quotient) if np.asarray(quotient).dtype.kind == "f" else np.asarray(x) // np.asarray(y)
    return quotient


def _elu_reference(alpha=1.0, scale=1.0, input_scale=1.0):
    def reference(x, *args, **kwargs):
        return scale * np.where(x > 0, x, alpha * np.expm1(x * input_scale))
    return reference


def _act_and_mul_reference(x, up=None, activation="silu"):
    gate, up = (x[..., :x.shape[-1] // 2], x[..., x.shape[-1] // 2:]) if up is None else (x, up)
    activated = {"silu": lambda g: g / (1 + np.exp(-g)), "gelu": _gelu_reference,
                 "gelu_tanh": lambda g: _gelu_reference(g, "tanh")}[activation](gate)
    return activated * up


def _clamp_reference(x, min=None, max=None):
    result = x
    if min is not None:
        result = np.where(np.isnan(result), result, np.maximum(result, min))
    if max is not None:
        result = np.where(np.isnan(result), result, np.minimum(result, max))
    return result


def _nan_to_num_reference(x, nan=0.0, posinf=None, neginf=None):
    return np.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf)


_erf = np.vectorize(math.erf, otypes=[np.float64])
_erfc = np.vectorize(math.erfc, otypes=[np.float64])
_lgamma = np.vectorize(lambda v: v if np.isnan(v) else math.lgamma(v) if np.isfinite(v) and not (v <= 0 and v == int(v))
                       else np.inf, otypes=[np.float64])


def _erfinv(y):
    """erf's inverse by Newton's method from 0 (erf is concave past 0: the steps rise to the root monotonically);
    ±1 give ±inf, values past them NaN."""
    y = np.asarray(y, np.float64)
    inside = np.abs(y) < 1
    target = np.where(inside, y, 0.0)
    x = np.zeros_like(target)
    for _ in range(100):
        x = x - (_erf(x) - target) / (2 / math.sqrt(math.pi) * np.exp(-x * x))
    return np.where(inside, x, np.where(np.abs(y) == 1, np.copysign(np.inf, y), np.nan))


def _erfcx(x):
    """exp(x^2) erfc(x); past 25 (where erfc underflows) its asymptotic series, exact in float64 there."""
    far = np.where(x > 25, x, 30.0)
    series = (1 - 1 / (2 * far ** 2) + 3 / (4 * far ** 4)) / (far * math.sqrt(math.pi))
    near = np.where(x > 25, 0.0, x)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.where(x > 25, series, np.exp(near * near) * _erfc(near))


def _i0e(x):
    """exp(-|x|) I0(x); past where I0 overflows, its asymptotic series (three terms: exact in float64 there)."""
    large = np.abs(x) > 700
    far = np.where(large, np.abs(x), 1.0)
    series = (1 + 1 / (8 * far) + 9 / (128 * far ** 2)) / np.sqrt(2 * np.pi * far)
    return np.where(large, series, np.i0(np.where(large, 0.0, x)) * np.exp(-np.abs(np.where(large, 0.0, x))))


def _shift(direction):
    def reference(x, y):
        bits = np.iinfo(np.asarray(x).dtype).bits
        shifted = np.left_shift(x, y) if direction < 0 else np.right_shift(x, y)
        return np.where(np.asarray(y) >= bits, 0 if direction < 0 else np.where(np.asarray(x) < 0, -1, 0), shifted)
    return reference


def _float_input(function):
    """``function`` on its input widened to float64: integer inputs of a float op give floats."""
    def reference(x, *args, **kwargs):
        return function(np.asarray(x, np.float64), *args, **kwargs)
    return reference


REFERENCES = {
    # as ATen: the sign of NaN is 0
    "abs": np.abs, "neg": np.negative, "sign": lambda x: np.where(np.isnan(x), 0, np.sign(x)),
    "sgn": lambda x: np.where(np.isnan(x), 0, np.sign(x)), "square": np.square,
    "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "frac": lambda x: x - np.trunc(x),
    "round": lambda x, decimals=0: np.round(x, decimals),
    **{name: _float_input(function) for name, function in {
        "exp": np.exp, "exp2": np.exp2, "expm1": np.expm1, "log": np.log, "log2": np.log2, "log10": np.log10,
        "log1p": np.log1p, "rsqrt": lambda x: 1 / np.sqrt(x), "sin": np.sin, "cos": np.cos, "tan": np.tan,
        "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "erf": _erf, "erfc": _erfc,
        "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "sqrt": np.sqrt, "reciprocal": lambda x: 1 / x,
        "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "asinh": np.arcsinh, "acosh": np.arccosh,
        "atanh": np.arctanh, "logit": lambda x, eps=None: np.log(x / (1 - x)), "softsign": lambda x: x / (1 + np.abs(x)),
        "lgamma": _lgamma, "i0": np.i0, "sinc": np.sinc, "angle": lambda x: np.where(np.isnan(x), np.nan, np.where(x < 0, np.pi, 0.0)),
    }.items()},
    "relu": lambda x: np.maximum(x, 0), "relu6": lambda x: np.clip(x, 0, 6),
    "hardtanh": lambda x, min_val=-1.0, max_val=1.0: np.clip(x, min_val, max_val),
    "leaky_relu": lambda x, negative_slope=0.01: np.where(x > 0, x, negative_slope * x),
    "elu": lambda x, alpha=1.0: _elu_reference(alpha)(x),
    "celu": lambda x, alpha=1.0: _elu_reference(alpha, 1.0, 1 / alpha)(x),
    "selu": _elu_reference(SELU_ALPHA, SELU_SCALE),
    "gelu": _gelu_reference, "silu": lambda x: x / (1 + np.exp(-x)), "mish": lambda x: x * np.tanh(np.logaddexp(0, x)),
    "softplus": _softplus_reference, "hardsigmoid": lambda x: np.clip(x + 3, 0, 6) / 6,
    "hardswish": lambda x: x * np.clip(x + 3, 0, 6) / 6,
    "threshold": lambda x, threshold, value: np.where(x <= threshold, value, x),
    "logsigmoid": lambda x: -np.logaddexp(0, -x),
    "glu": lambda x, dim=-1: np.split(x, 2, dim)[0] / (1 + np.exp(-np.split(x, 2, dim)[1])),
    "act_and_mul": _act_and_mul_reference,
    "add": _with_alpha_reference(np.add), "sub": _with_alpha_reference(np.subtract),
    "rsub": lambda x, y, alpha=1: y - alpha * x if alpha != 1 else y - x, "mul": np.multiply, "div": _div_reference,
    "floor_divide": np.floor_divide, "remainder": np.remainder, "fmod": np.fmod, "pow": np.power,
    "atan2": _float_input(np.arctan2), "hypot": np.hypot, "maximum": np.maximum, "minimum": np.minimum,
    "fmax": np.fmax, "fmin": np.fmin, "copysign": _float_input(np.copysign), "logaddexp": np.logaddexp,
    "xlogy": _float_input(lambda x, y: np.where(x == 0, np.where(np.isnan(y), np.nan, 0.0), x * np.log(y))),
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
    "isclose": np.isclose, "logical_and": np.logical_and, "logical_or": np.logical_or,
    "logical_xor": np.logical_xor, "logical_not": np.logical_not,
    "bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
    "bitwise_not": np.invert, "bitwise_left_shift": _shift(-1), "bitwise_right_shift": _shift(1),
    "where": np.where, "masked_fill": lambda x, mask, value: np.where(mask, value, x),
    "clamp": _clamp_reference, "clamp_min": lambda x, min: _clamp_reference(x, min=min),
    "clamp_max": lambda x, max: _clamp_reference(x, max=max),
    "lerp": lambda x, end, weight: x + weight * (end - x),
    "addcmul": lambda x, a, b, value=1: x + value * a * b, "addcdiv": lambda x, a, b, value=1: x + value * a / b,
    "nan_to_num": _nan_to_num_reference, "isfinite": np.isfinite, "isinf": np.isinf, "isnan": np.isnan,
    "isposinf": np.isposinf, "isneginf": np.isneginf, "signbit": np.signbit, "conj": np.conj,
    "special_entr": _float_input(lambda x: np.where(x > 0, -x * np.log(np.where(x > 0, x, 1)),
                                                    np.where(x == 0, 0.0, np.where(np.isnan(x), x, -np.inf)))),
    "special_ndtr": _float_input(lambda x: 0.5 * _erfc(-x / math.sqrt(2))),
    "special_i0e": _float_input(_i0e),
    "erfinv": _float_input(_erfinv), "special_erfcx": _float_input(_erfcx),
    "special_ndtri": _float_input(lambda p: math.sqrt(2) * _erfinv(2 * p - 1)),
    "special_log_ndtr": _float_input(lambda x: np.log(0.5 * _erfc(-x / math.sqrt(2)))),
    "special_xlog1py": _float_input(lambda x, y: np.where(x == 0, np.where(np.isnan(y), np.nan, 0.0),
                                                          x * np.log1p(y))),
}

# row name: row_samples' arguments, where the defaults do not fit
_DOMAINS = {
    "log": (0.01, 10), "log2": (0.01, 10), "log10": (0.01, 10), "log1p": (-0.9, 5), "sqrt": (0, 10),
    "rsqrt": (0.01, 10), "asin": (-0.99, 0.99), "acos": (-0.99, 0.99), "acosh": (1, 5), "atanh": (-0.9, 0.9),
    "logit": (0.05, 0.95), "erfinv": (-0.99, 0.99), "tan": (-1.2, 1.2), "reciprocal": (0.5, 3),
    "lgamma": (0.1, 5), "digamma": (0.1, 5), "special_ndtri": (0.05, 0.95), "special_entr": (0, 3),
}
ROW_SAMPLES = {
    **{name: dict(values=(("domain", domain),)) for name, domain in _DOMAINS.items()},
    "round": dict(extra=(sample(operand(2, 3), decimals=2),)),
    "threshold": dict(scalars=(0.5, -2.0)),
    # float32 intermediates overflow at the dtype's largest values, as ATen's do: edge values would compare
    # ATen's rounding with float64's
    "hardswish": dict(edge=False), "sinc": dict(edge=False),
    # torch's gelu is NaN at inf and overflows at the largest floats, where ours keeps the limits
    "gelu": dict(edge=False),
    # the reference's erfinv(2p - 1) loses a p below 1e-16 to rounding
    "special_ndtri": dict(values=(("domain", _DOMAINS["special_ndtri"]),), edge=False),
    "nan_to_num": dict(kwargs=dict(nan=0.5, posinf=100.0, neginf=-100.0), extra=(sample(operand(2, 3)),)),
    "div": dict(values=("normal", "positive"), extra=(sample(operand(2, 3), operand(3, values="positive"),
                                                             rounding_mode="floor"),
                                                      sample(operand(2, 3), 2.5, rounding_mode="trunc"))),
    "add": dict(extra=(sample(operand(2, 3), operand(3), alpha=2), sample(operand(2, 3, dtype="int64"), 3))),
    "sub": dict(extra=(sample(operand(2, 3), 1.5, alpha=2),)),
    "floor_divide": dict(values=("normal", "positive")), "remainder": dict(values=("normal", "positive")),
    "fmod": dict(values=("normal", "positive")),
    "pow": dict(values=("positive", ("domain", (-2, 2))), extra=(sample(operand(2, 3), 2), sample(operand(2, 3), 0.5))),
    "xlogy": dict(values=("normal", "positive")), "special_xlog1py": dict(values=("normal", "positive")),
    "bitwise_left_shift": dict(values=("normal", ("index", (0, 5)))),
    "bitwise_right_shift": dict(values=("normal", ("index", (0, 5)))),
    "clamp": dict(kwargs=dict(min=-0.5, max=0.5), extra=(sample(operand(2, 3), operand(3), operand(3)),)),
    "addcdiv": dict(values=("normal", "normal", "positive"), dtypes=("float32", "float64")),
    "isclose": dict(extra=(sample(operand(2, 3), operand(2, 3), equal_nan=True),)),
    "where": dict(edge=False),
    "masked_fill": dict(edge=False),
}
# rows whose operands differ in kind beyond their values: samples of their own
_OWN_SAMPLES = {
    "glu": (sample(operand(2, 4)), sample(operand(4, 2, layout="transposed"), 0), sample(operand(0, 4)),
            sample(operand(3, 4, dtype="bfloat16", layout="sliced")), sample(operand(2, 6, values="edge"))),
    "act_and_mul": (sample(operand(2, 4)), sample(operand(3, 2, layout="transposed"), operand(2)),
                    sample(operand(0, 4)), sample(operand(2, 4, dtype="bfloat16"), activation="gelu_tanh"),
                    sample(operand(2, 4, layout="sliced"), operand(2, 4, layout="broadcast"), activation="gelu")),
    "where": (sample(operand(2, 3, dtype="bool"), operand(2, 3), operand(3)),
              sample(operand(3, 2, dtype="bool", layout="transposed"), operand(3, 2), 0.5),
              sample(operand(dtype="bool"), operand(0, 3), operand(3)),
              sample(operand(2, 4, dtype="bool", layout="broadcast"), operand(2, 4, dtype="int64"),
                     operand(2, 4, dtype="int64", layout="sliced"))),
    "masked_fill": (sample(operand(2, 3), operand(2, 3, dtype="bool"), 1.5),
                    sample(operand(3, 2, layout="transposed"), operand(2, dtype="bool"), -np.inf),
                    sample(operand(0, 3), operand(3, dtype="bool"), 0.0),
                    sample(operand(2, 4, dtype="int64"), operand(2, 4, dtype="bool", layout="sliced"),
                           operand(dtype="int64"))),
    "lerp": (sample(operand(2, 3), operand(2, 3), operand(3, values="unit")),
             sample(operand(3, 2, layout="transposed"), operand(2), 0.25),
             sample(operand(0, 3), operand(3), 0.5),
             sample(operand(2, 4, dtype="bfloat16", layout="sliced"), operand(2, 4, dtype="bfloat16"), 0.75)),
}


def _as_meta(value):
    return TensorMeta(value.shape, get_dtype(value.dtype)) if isinstance(value, Operand) else value


def _fits_in_place(functional, case) -> bool:
    """Whether the functional result of ``case`` has its first operand's shape and a dtype it can hold (the
    first operand is the one written in place)."""
    first = next((a for a in case.args if isinstance(a, Operand)), None)
    if first is None:
        return False
    result = functional.meta(*map(_as_meta, case.args), **{k: _as_meta(v) for k, v in case.kwargs.items()})
    return tuple(result.shape) == first.shape and result.dtype.name in (first.dtype, "bool")


def table_samples(table, arguments=None, own=None, references=None) -> Callable:
    """The family default of the pointwise ops of ``table`` (and their in-place forms): ``row_samples`` with
    ``arguments[name]``, or the samples ``own[name]``; references from ``references``."""
    rows = {row.name: row for row in table}
    arguments, own, references = arguments or {}, own or {}, references or {}

    def samples(op):
        row = rows.get(op.name) or rows.get(op.name.removesuffix("_"))
        if row is None:
            return None
        made = Samples(own[row.name], references.get(row.name)) if row.name in own else \
            row_samples(row, references.get(row.name), **arguments.get(row.name, {}))
        if op.name == row.name:
            return made
        # in place, the first operand holds the result: only samples whose result fits it
        fits = [case for case in made.cases if _fits_in_place(get(row.name), case)]
        return Samples(tuple(fits), made.reference)
    return samples


family_samples("pointwise", table_samples(TABLE, ROW_SAMPLES, _OWN_SAMPLES, REFERENCES))
