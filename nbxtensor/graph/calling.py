"""Calling a registry op with the arguments of an ATen overload.

Registry implementations take torch's Python signatures; for most overloads that is the ATen schema
too. The few that differ get an adapter here, applied alike to the meta rule, the cost rule and the
implementation so the three always see the same call."""
from __future__ import annotations

import inspect
from functools import cache

from ..dtypes import get_dtype
from ..ops.registry import OpDef, lookup


def _softmax_from_aten(args, kwargs):
    # aten::_softmax(self, dim, half_to_float): half_to_float asks for a float32 result from half input
    x, dim, *rest = args
    half_to_float = rest[0] if rest else kwargs.get("half_to_float", False)
    return (x, dim), ({"dtype": get_dtype("float32")} if half_to_float else {})


def _drop_kwargs(*names):
    def adapt(args, kwargs):
        return args, {k: v for k, v in kwargs.items() if k not in names}
    return adapt


def _positional_as_keywords(position: int, *names):
    """ATen passes these arguments by position where the implementation takes them by keyword."""
    def adapt(args, kwargs):
        return args[:position], {**dict(zip(names, args[position:])), **kwargs}
    return adapt


def _to_from_aten(*positional, always_copy=False):
    # aten::to and aten::_to_copy: the graph runs on one device with dense tensors, so of the device,
    # layout, pin_memory and non_blocking nothing matters; the dtype, a copy and the memory format do
    def adapt(args, kwargs):
        named = {**dict(zip(positional, args[1:])), **kwargs}
        return args[:1], {"dtype": named.get("dtype"), "copy": always_copy or named.get("copy", False),
                          "memory_format": named.get("memory_format")}
    return adapt


def _index_put_impl_from_aten(args, kwargs):
    # aten::_index_put_impl_(self, indices, values, accumulate, unsafe): unsafe only skips index checks
    return args[:4], {k: v for k, v in kwargs.items() if k != "unsafe"}


def _batch_norm_from_aten(args, kwargs):
    # aten::batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled);
    # torch's Python batch_norm takes the running statistics before weight and bias
    named = {**dict(zip(("input", "weight", "bias", "running_mean", "running_var", "training", "momentum", "eps",
                         "cudnn_enabled"), args)), **kwargs}
    x = named.pop("input")
    return (x, named.pop("running_mean", None), named.pop("running_var", None)), named


def _named_from_aten(*names):
    """ATen's positional arguments after ``self`` (and ``target``) passed by these names: the losses take
    torch's legacy arguments in those places, and ATen's reduction enum by name."""
    def adapt(args, kwargs):
        return args[:2], {**dict(zip(names, args[2:])), **kwargs}
    return adapt


def _instance_norm_from_aten(args, kwargs):
    # aten::instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps, cudnn)
    named = {**dict(zip(("input", "weight", "bias", "running_mean", "running_var", "use_input_stats", "momentum",
                         "eps", "cudnn_enabled"), args)), **kwargs}
    return (named.pop("input"),), named


_LOSSES = {
    "aten::mse_loss.default": ("reduction",), "aten::l1_loss.default": ("reduction",),
    "aten::smooth_l1_loss.default": ("reduction", "beta"), "aten::huber_loss.default": ("reduction", "delta"),
    "aten::kl_div.default": ("reduction",), "aten::binary_cross_entropy.default": ("weight", "reduction"),
    "aten::binary_cross_entropy_with_logits.default": ("weight", "pos_weight", "reduction"),
    "aten::nll_loss.default": ("weight", "reduction", "ignore_index"),
    "aten::nll_loss_nd.default": ("weight", "reduction", "ignore_index"),
    "aten::nll_loss2d.default": ("weight", "reduction", "ignore_index"),
    "aten::cross_entropy_loss.default": ("weight", "reduction", "ignore_index", "label_smoothing"),
}

_SCALAR_ALPHA = ("aten::add.Scalar", "aten::add.Scalar_out", "aten::add_.Scalar", "aten::sub.Scalar",
                 "aten::sub.Scalar_out", "aten::sub_.Scalar", "aten::rsub.Scalar", "aten::rsub.Scalar_out")

_ADAPTERS = {
    "aten::_softmax.default": _softmax_from_aten,
    "aten::_log_softmax.default": _softmax_from_aten,
    "aten::expand.default": _drop_kwargs("implicit"),
    "aten::_to_copy.default": _to_from_aten(always_copy=True),
    "aten::to.dtype": _to_from_aten("dtype", "non_blocking", "copy", "memory_format"),
    "aten::to.device": _to_from_aten("device", "dtype", "non_blocking", "copy", "memory_format"),
    "aten::to.dtype_layout": _to_from_aten(),
    # the contraction order einsum's path names changes no value
    "aten::einsum.default": _drop_kwargs("path"),
    "aten::_index_put_impl_.default": _index_put_impl_from_aten,
    "aten::batch_norm.default": _batch_norm_from_aten,
    "aten::instance_norm.default": _instance_norm_from_aten,
    # aten::polygamma_(self, n) where torch's Tensor.polygamma_(n) and the implementation take (n, self)
    "aten::polygamma_.default": lambda args, kwargs: ((args[1], args[0], *args[2:]), kwargs),
    **{name: _named_from_aten(*names) for name, names in _LOSSES.items()},
    **{name: _positional_as_keywords(2, "alpha") for name in _SCALAR_ALPHA},
    **{name: _positional_as_keywords(1, "alpha", "scale", "input_scale")
       for name in ("aten::elu.default", "aten::elu.out", "aten::elu_.default")},
}

# ops that make tensors from nothing need to be told where
_PLACED_FAMILIES = ("creation", "random")


@cache
def _takes_device(op: OpDef) -> bool:
    try:
        return "device" in inspect.signature(op.impl).parameters
    except (TypeError, ValueError):
        return False


def resolve(aten_name: str) -> OpDef:
    return lookup(aten_name)


def adapter(aten_name: str):
    """``adapt(args tuple, kwargs dict) -> (args, kwargs)`` from an ATen overload's arguments to the
    registry op's, or None where they are the same."""
    return _ADAPTERS.get(aten_name)


def placed(op: OpDef) -> bool:
    """Whether ``op`` makes tensors from nothing and must be told the device."""
    return op.family in _PLACED_FAMILIES and _takes_device(op)


def adapt(aten_name: str, args, kwargs):
    """Positional and keyword arguments for the registry op's rules and implementation."""
    adapt_arguments = adapter(aten_name)
    return (tuple(args), dict(kwargs)) if adapt_arguments is None else adapt_arguments(tuple(args), dict(kwargs))
