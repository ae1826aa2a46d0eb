"""Matrix products: mm, bmm, matmul (torch's rank rules and batch broadcasting), addmm, baddbmm, addmv,
addr, mv, dot, vdot, outer, linear and einsum's contraction forms.

Every product is one launch of ``kernels/matmul.py``'s ``gemm`` over strided views of its operands (a
transposed weight is read in place), or, for a handful of rows against one matrix (decode), of ``gemv``,
which streams the matrix once. Settings come from the tuning cache under a launch key (``tuning/``).

dtypes: both operands share one of float32, float16, bfloat16 (accumulated in float32, returned in the
input dtype), int8 (accumulated and returned in int32), int64, int32, int16, uint8 (summed exactly in
int64 by ``gemm_wide`` and returned in the input dtype, wrapping as torch's do) or float64 (summed in
float64 by ``gemm_wide``, on the FMA units); outer and addr also take
bool (logical and / or, as torch). float32 is multiplied in true float32 unless the
user opts into TF32 as torch has it: ``set_float32_matmul_precision("high")`` or
``backends.cuda.matmul.allow_tf32 = True``.
"""
from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from .. import shape as S
from ..allocation import new_tensor, scratch_scope
from ..dtypes import get_dtype
from ..tensor import Tensor
from .aten_calls import drop_keywords
from .matmul_gemv import GEMV_MAX_ROWS, gemv_candidates  # noqa: F401  (the family's public names, kept here)
from .matmul_plans import (_WIDE, GEMM_WARP_SPECIALIZED, GROUP_M, MAX_BATCH_RANK, MAX_GRID_Y,  # noqa: F401
                           _meta, _plan_product, _product, _product_keys, _product_plans, _product_workspace, backends,
                           gemm_candidates, gemm_key, gemv_key, get_float32_matmul_precision, planned_product,
                           product_keys, set_float32_matmul_precision)
from .plans import PlanCache, layout_key
from .reductions import _sum_dtype
from .registry import Cost, TensorMeta, family_samples, get, nbytes, register, tensor_attribute, workspace_bytes
from .samples import Samples, by_name, operand, sample

_SUPPORTED = ("float32", "float16", "bfloat16", "int8", *_WIDE)


# ---- checks and meta rules --------------------------------------------------------------------------
def _dims(shape) -> str:
    return "x".join(str(n) for n in shape) if len(shape) else "()"


def _result_dtype(op: str, *operands, boolean: bool = False):
    """The output dtype of a product of ``operands`` (all one dtype); ``boolean``: bool operands are taken
    (torch's outer and addr take them; its sums of products do not)."""
    first = operands[0].dtype
    for other in operands[1:]:
        if other.dtype is not first:
            raise RuntimeError(f"{op}: expected all operands to have the same dtype, but got "
                               + " and ".join(o.dtype.name for o in operands))
    if boolean and first.name == "bool":
        return first
    if first.name not in _SUPPORTED:
        raise TypeError(f"{op}: {first.name} operands are not supported; matrix products take "
                        f"{', '.join(_SUPPORTED)} (convert with .to(...))")
    return get_dtype("int32") if first.name == "int8" else first


def _require_rank(op: str, name: str, x, rank: int) -> None:
    if len(x.shape) != rank:
        kind = {1: "a vector (1-D)", 2: "a matrix (2-D)", 3: "a 3-D tensor"}[rank]
        raise RuntimeError(f"{op}: {name} must be {kind}, got a {len(x.shape)}-D tensor of shape {_dims(x.shape)}")


def _require_inner(op: str, a_shape, b_shape, a_dim: int, b_dim: int) -> None:
    if a_shape[a_dim] != b_shape[b_dim]:
        raise RuntimeError(f"{op}: shapes {_dims(a_shape)} and {_dims(b_shape)} cannot be multiplied: dim {a_dim} of "
                           f"the first ({a_shape[a_dim]}) must equal dim {b_dim} of the second ({b_shape[b_dim]})")


def _matmul_shape(op: str, a_shape, b_shape) -> tuple:
    """torch.matmul's result shape for operands of these shapes (either at least 1-D)."""
    if len(a_shape) == 0 or len(b_shape) == 0:
        raise RuntimeError(f"{op}: both arguments need at least 1 dimension, got {len(a_shape)}-D and "
                           f"{len(b_shape)}-D tensors")
    a2 = (1, *a_shape) if len(a_shape) == 1 else tuple(a_shape)
    b2 = (*b_shape, 1) if len(b_shape) == 1 else tuple(b_shape)
    _require_inner(op, a_shape, b_shape, -1, 0 if len(b_shape) == 1 else -2)
    try:
        batch = S.broadcast_shapes(a2[:-2], b2[:-2])
    except (RuntimeError, ValueError):
        raise RuntimeError(f"{op}: batch dims of {_dims(a_shape)} and {_dims(b_shape)} do not broadcast "
                           f"({_dims(a2[:-2])} against {_dims(b2[:-2])})") from None
    shape = [*batch]
    if len(a_shape) > 1:
        shape.append(a2[-2])
    if len(b_shape) > 1:
        shape.append(b2[-1])
    return tuple(shape)


def _require_broadcastable(op: str, bias_shape, target) -> None:
    try:
        if S.broadcast_shapes(bias_shape, target) == tuple(target):
            return
    except (RuntimeError, ValueError):
        pass
    raise RuntimeError(f"{op}: input of shape {_dims(bias_shape)} does not broadcast to the product's "
                       f"shape {_dims(target)}")


def _product_cost(out_meta, flops, *inputs, products=()) -> Cost:
    """The cost of a product run as ``products``, each (batches, m, k, n) of one way ``_product`` may take
    it; the workspace is the most any of them takes (``_product_workspace``)."""
    return Cost(flops=flops, bytes_read=sum(nbytes(m) for m in inputs if m is not None),
                bytes_written=nbytes(out_meta),
                workspace=max((_product_workspace(out_meta.dtype, *shape) for shape in products), default=0))


def _bias_meta(op: str, bias, out_meta) -> None:
    if bias.dtype is not out_meta.dtype:
        raise RuntimeError(f"{op}: expected input to have the operands' dtype {out_meta.dtype.name}, "
                           f"got {bias.dtype.name}")
    _require_broadcastable(op, tuple(bias.shape), tuple(out_meta.shape))


def _flops(*extents) -> int:
    return 2 * math.prod(extents)


# ---- mm, bmm, matmul ---------------------------------------------------------------------------------
def _mm_meta(input, mat2):
    _require_rank("mm", "self", input, 2)
    _require_rank("mm", "mat2", mat2, 2)
    dtype = _result_dtype("mm", input, mat2)
    _require_inner("mm", tuple(input.shape), tuple(mat2.shape), -1, -2)
    return TensorMeta((input.shape[0], mat2.shape[1]), dtype)


def _mm_cost(input, mat2):
    out = _mm_meta(input, mat2)
    return _product_cost(out, _flops(*input.shape, mat2.shape[1]), input, mat2,
                         products=[(1, *input.shape, mat2.shape[1])])


def _mm_key(facts, input, mat2):
    return _product_keys(facts, input, mat2, _mm_meta(input, mat2).dtype)


@register("mm", family="matmul", aten=["aten::mm.default"], meta=lambda a: _mm_meta(a.input, a.mat2),
          cost=lambda a: _mm_cost(a.input, a.mat2), bound=True, methods=("mm",), key=_mm_key)
def mm(input: Tensor, mat2: Tensor) -> Tensor:
    """Matrix product of two matrices."""
    return _product("mm", input, mat2, lambda: _mm_meta(input, mat2).dtype)


def _bmm_meta(input, mat2):
    _require_rank("bmm", "self", input, 3)
    _require_rank("bmm", "mat2", mat2, 3)
    dtype = _result_dtype("bmm", input, mat2)
    if input.shape[0] != mat2.shape[0]:
        raise RuntimeError(f"bmm: batch sizes differ: dim 0 of {_dims(input.shape)} ({input.shape[0]}) must equal "
                           f"dim 0 of {_dims(mat2.shape)} ({mat2.shape[0]})")
    _require_inner("bmm", tuple(input.shape), tuple(mat2.shape), -1, -2)
    return TensorMeta((input.shape[0], input.shape[1], mat2.shape[2]), dtype)


def _bmm_cost(input, mat2):
    out = _bmm_meta(input, mat2)
    return _product_cost(out, _flops(*input.shape, mat2.shape[2]), input, mat2,
                         products=[(*input.shape, mat2.shape[2])])


def _bmm_key(facts, input, mat2):
    return _product_keys(facts, input, mat2, _bmm_meta(input, mat2).dtype)


@register("bmm", family="matmul", aten=["aten::bmm.default"], meta=lambda a: _bmm_meta(a.input, a.mat2),
          cost=lambda a: _bmm_cost(a.input, a.mat2), bound=True, methods=("bmm",), key=_bmm_key)
def bmm(input: Tensor, mat2: Tensor) -> Tensor:
    """Batched matrix product of two 3-D tensors with the same batch size."""
    return _product("bmm", input, mat2, lambda: _bmm_meta(input, mat2).dtype)


def _matmul_meta(input, other):
    dtype = _result_dtype("matmul", input, other)
    return TensorMeta(_matmul_shape("matmul", tuple(input.shape), tuple(other.shape)), dtype)


def _matmul_cost(input, other):
    out = _matmul_meta(input, other)
    k = input.shape[-1]
    return _product_cost(out, 2 * S.numel(out.shape) * k, input, other,
                         products=_matmul_products(input.shape, other.shape))


def _matmul_products(a_shape, b_shape) -> list:
    """The (batches, m, k, n) ways ``_matmul`` may run a product of operands of these shapes: as one tall
    product when a batched left operand's rows merge, else batch by batch."""
    a = (1, *a_shape) if len(a_shape) == 1 else tuple(a_shape)
    b = (*b_shape, 1) if len(b_shape) == 1 else tuple(b_shape)
    batches = S.numel(S.broadcast_shapes(a[:-2], b[:-2]))
    ways = [(batches, a[-2], a[-1], b[-1])]
    if len(b) == 2 and len(a) > 2:
        ways.append((1, S.numel(a[:-1]), a[-1], b[-1]))
    return ways


def _fold_rows(x: Tensor) -> Tensor | None:
    """``x`` (..., k) as one (rows, k) matrix view, when its leading dims merge without a copy."""
    lead, (strides,) = S.coalesce(x.shape[:-1], x.stride()[:-1])
    if len(lead) > 1:
        return None
    rows = S.numel(x.shape[:-1])
    return x.as_strided((rows, x.shape[-1]), (strides[0] if lead else 0, x.stride(-1)))


def _matmul(op: str, a: Tensor, b: Tensor, out_dtype, bias=None, alpha=1, beta=0) -> Tensor:
    """torch.matmul's rank rules: vectors gain a dim that the result drops; batch dims broadcast; a batched
    left operand against one matrix becomes one tall product when its rows merge. ``out_dtype()`` gives
    the result's dtype, as for ``_product``: called for layouts not planned yet only."""
    key = (op, layout_key(a), layout_key(b), layout_key(bias), alpha, beta)
    plan = _matmul_plans.lookup(key)
    if plan is None:
        dtype = out_dtype()
        out_shape = tuple(_matmul_shape(op, tuple(a.shape), tuple(b.shape)))
        plan = _matmul_plans.get(key, lambda: functools.partial(_ranked_product, op, out_shape, lambda: dtype))
    return plan(a, b, bias, alpha, beta)


_matmul_plans = PlanCache()


def _ranked_product(op: str, out_shape: tuple, out_dtype, a: Tensor, b: Tensor, bias, alpha, beta) -> Tensor:
    """``_matmul`` for a call whose result shape is known (``out_shape``)."""
    a2, b2, bias2 = _ranked_operands(a, b, bias, beta, out_shape)
    return _product(op, a2, b2, out_dtype, bias2, alpha, beta).view(out_shape)


def _ranked_operands(a, b, bias, beta, out_shape: tuple) -> tuple:
    """The operands ``_ranked_product`` hands ``_product`` (views of these): vectors as matrices, a batched left
    operand's rows folded into one matrix against a matrix where they merge."""
    a2 = a.unsqueeze(0) if a.ndim == 1 else a
    b2 = b.unsqueeze(-1) if b.ndim == 1 else b
    if b2.ndim == 2 and a2.ndim > 2:
        folded = _fold_rows(a2)
        if folded is not None:
            flat_bias = None
            if bias is not None and beta != 0:
                flat_bias = _fold_rows(bias.expand(*a2.shape[:-1], b2.shape[-1]))
            if bias is None or beta == 0 or flat_bias is not None:
                return folded, b2, flat_bias
    if bias is not None and beta != 0:
        bias = bias.expand(*out_shape)
        if a.ndim == 1:
            bias = bias.unsqueeze(-2)
        if b.ndim == 1:
            bias = bias.unsqueeze(-1)
    return a2, b2, bias


def _matmul_keys(facts: dict, op: str, a, b, out_dtype, bias=None, alpha=1, beta=0) -> list[str]:
    """The launch keys ``_matmul`` forms for operands laid out as these."""
    out_shape = tuple(_matmul_shape(op, tuple(a.shape), tuple(b.shape)))
    a2, b2, bias2 = _ranked_operands(a, b, bias, beta, out_shape)
    return _product_keys(facts, a2, b2, out_dtype, bias2, alpha, beta)


def _matmul_key(facts, input, other):
    return _matmul_keys(facts, "matmul", input, other, _matmul_meta(input, other).dtype)


@register("matmul", family="matmul", aten=["aten::matmul.default"], meta=lambda a: _matmul_meta(a.input, a.other),
          cost=lambda a: _matmul_cost(a.input, a.other), bound=True, methods=("matmul", "__matmul__"), key=_matmul_key)
def matmul(input: Tensor, other: Tensor) -> Tensor:
    """torch.matmul: dot, matrix-vector, matrix and batched products by rank, batch dims broadcasting."""
    return _matmul("matmul", input, other, lambda: _matmul_meta(input, other).dtype)


def _rmatmul(self: Tensor, other: Tensor) -> Tensor:
    return matmul.impl(other, self)


tensor_attribute("__rmatmul__", _rmatmul)


# ---- with an added input: addmm, baddbmm, addmv, addr -----------------------------------------------
def _addmm_meta(input, mat1, mat2):
    out = _mm_meta(mat1, mat2)
    _bias_meta("addmm", input, out)
    return out


def _addmm_cost(a):
    mat1, mat2 = a.mat1, a.mat2
    return _product_cost(_addmm_meta(a.input, mat1, mat2), _flops(*mat1.shape, mat2.shape[1]), a.input, mat1, mat2,
                         products=[(1, *mat1.shape, mat2.shape[1])])


def _addmm_key(facts, input, mat1, mat2, *, beta=1, alpha=1):
    return _product_keys(facts, mat1, mat2, _addmm_meta(input, mat1, mat2).dtype, input, alpha, beta)


@register("addmm", family="matmul", aten=["aten::addmm.default"], meta=lambda a: _addmm_meta(a.input, a.mat1, a.mat2),
          cost=_addmm_cost, bound=True, methods=("addmm",), key=_addmm_key)
def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """beta * input + alpha * (mat1 @ mat2), input broadcasting to the product; beta=0 ignores input."""
    return _product("addmm", mat1, mat2, lambda: _addmm_meta(input, mat1, mat2).dtype, input, alpha, beta)


def _baddbmm_meta(input, batch1, batch2):
    out = _bmm_meta(batch1, batch2)
    _bias_meta("baddbmm", input, out)
    return out


def _baddbmm_cost(a):
    batch1, batch2 = a.batch1, a.batch2
    return _product_cost(_baddbmm_meta(a.input, batch1, batch2), _flops(*batch1.shape, batch2.shape[2]), a.input,
                         batch1, batch2, products=[(*batch1.shape, batch2.shape[2])])


def _baddbmm_key(facts, input, batch1, batch2, *, beta=1, alpha=1):
    return _product_keys(facts, batch1, batch2, _baddbmm_meta(input, batch1, batch2).dtype, input, alpha, beta)


@register("baddbmm", family="matmul", aten=["aten::baddbmm.default"],
          meta=lambda a: _baddbmm_meta(a.input, a.batch1, a.batch2), cost=_baddbmm_cost, bound=True,
          methods=("baddbmm",), key=_baddbmm_key)
def baddbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """beta * input + alpha * bmm(batch1, batch2)."""
    return _product("baddbmm", batch1, batch2, lambda: _baddbmm_meta(input, batch1, batch2).dtype, input, alpha,
                    beta)


def _mv_meta(input, vec):
    _require_rank("mv", "self", input, 2)
    _require_rank("mv", "vec", vec, 1)
    dtype = _result_dtype("mv", input, vec)
    _require_inner("mv", tuple(input.shape), tuple(vec.shape), -1, 0)
    return TensorMeta((input.shape[0],), dtype)


def _mv_cost(input, vec):
    return _product_cost(_mv_meta(input, vec), _flops(*input.shape), input, vec, products=[(1, *input.shape, 1)])


def _mv_key(facts, input, vec):
    return _matmul_keys(facts, "mv", input, vec, _mv_meta(input, vec).dtype)


@register("mv", family="matmul", aten=["aten::mv.default"], meta=lambda a: _mv_meta(a.input, a.vec),
          cost=lambda a: _mv_cost(a.input, a.vec), bound=True, methods=("mv",), key=_mv_key)
def mv(input: Tensor, vec: Tensor) -> Tensor:
    """Matrix times vector."""
    return _matmul("mv", input, vec, lambda: _mv_meta(input, vec).dtype)


def _addmv_meta(input, mat, vec):
    out = _mv_meta(mat, vec)
    _bias_meta("addmv", input, out)
    return out


def _addmv_cost(a):
    return _product_cost(_addmv_meta(a.input, a.mat, a.vec), _flops(*a.mat.shape), a.input, a.mat, a.vec,
                         products=[(1, *a.mat.shape, 1)])


def _addmv_key(facts, input, mat, vec, *, beta=1, alpha=1):
    return _matmul_keys(facts, "addmv", mat, vec, _addmv_meta(input, mat, vec).dtype, input, alpha, beta)


@register("addmv", family="matmul", aten=["aten::addmv.default"], meta=lambda a: _addmv_meta(a.input, a.mat, a.vec),
          cost=_addmv_cost, bound=True, methods=("addmv",), key=_addmv_key)
def addmv(input: Tensor, mat: Tensor, vec: Tensor, *, beta=1, alpha=1) -> Tensor:
    """beta * input + alpha * (mat @ vec)."""
    return _matmul("addmv", mat, vec, lambda: _addmv_meta(input, mat, vec).dtype, input, alpha, beta)


def _outer_meta(input, vec2):
    _require_rank("outer", "self", input, 1)
    _require_rank("outer", "vec2", vec2, 1)
    return TensorMeta((input.shape[0], vec2.shape[0]), _result_dtype("outer", input, vec2, boolean=True))


def _outer_cost(input, vec2):
    out = _outer_meta(input, vec2)
    return _product_cost(out, S.numel(out.shape), input, vec2, products=[(1, input.shape[0], 1, vec2.shape[0])])


def _outer_key(facts, input, vec2):
    dtype = _outer_meta(input, vec2).dtype
    return [] if dtype.name == "bool" else _product_keys(facts, input.unsqueeze(1), vec2.unsqueeze(0), dtype)


_checked_dtypes = PlanCache()


def _checked_dtype(op: str, meta, *operands):
    """The result dtype of ``op`` for operands laid out as these: from its meta rule (which checks the
    call) for a layout not seen yet, else as the rule gave it then."""
    key = (op, *[layout_key(t) for t in operands]) if all(type(t) is Tensor for t in operands) else None
    dtype = _checked_dtypes.lookup(key)
    if dtype is None:
        dtype = meta(*operands).dtype
        if key is not None:
            _checked_dtypes.put(key, dtype)
    return dtype


@register("outer", family="matmul", aten=["aten::outer.default"], meta=lambda a: _outer_meta(a.input, a.vec2),
          cost=lambda a: _outer_cost(a.input, a.vec2), bound=True, api=("outer", "ger"), methods=("outer", "ger"),
          key=_outer_key)
def outer(input: Tensor, vec2: Tensor) -> Tensor:
    """Outer product of two vectors (a product with an inner extent of 1)."""
    dtype = _checked_dtype("outer", _outer_meta, input, vec2)
    if dtype.name == "bool":
        return input.unsqueeze(1).logical_and(vec2.unsqueeze(0))
    return _product("outer", input.unsqueeze(1), vec2.unsqueeze(0), lambda: dtype)


def _addr_meta(input, vec1, vec2):
    out = _outer_meta(vec1, vec2)
    _bias_meta("addr", input, out)
    return out


def _addr_cost(a):
    vec1, vec2 = a.vec1, a.vec2
    out = _addr_meta(a.input, vec1, vec2)
    cost = _product_cost(out, 2 * S.numel(out.shape), a.input, vec1, vec2,
                         products=[(1, vec1.shape[0], 1, vec2.shape[0])])
    if out.dtype.name == "bool" and a.beta:
        # the outer product, a temporary before it is or-ed with the input
        return dataclasses.replace(cost, workspace=workspace_bytes(nbytes(out)))
    return cost


def _addr_key(facts, input, vec1, vec2, *, beta=1, alpha=1):
    dtype = _addr_meta(input, vec1, vec2).dtype
    if dtype.name == "bool":
        return []
    return _product_keys(facts, vec1.unsqueeze(1), vec2.unsqueeze(0), dtype, input, alpha, beta)


@register("addr", family="matmul", aten=["aten::addr.default"], meta=lambda a: _addr_meta(a.input, a.vec1, a.vec2),
          cost=_addr_cost, bound=True, methods=("addr",), key=_addr_key)
def addr(input: Tensor, vec1: Tensor, vec2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """beta * input + alpha * outer(vec1, vec2)."""
    dtype = _checked_dtype("addr", _addr_meta, input, vec1, vec2)
    if dtype.name == "bool":
        return _boolean_addr(input, vec1, vec2, beta, alpha, (vec1.shape[0], vec2.shape[0]))
    return _product("addr", vec1.unsqueeze(1), vec2.unsqueeze(0), lambda: dtype, input, alpha, beta)


def _boolean_addr(input, vec1, vec2, beta, alpha, shape) -> Tensor:
    """torch's addr of bool tensors: (beta and input) or (alpha and outer(vec1, vec2))."""
    if any(isinstance(scalar, float) for scalar in (alpha, beta)):
        raise RuntimeError(f"addr: for bool input tensors, alpha and beta must be booleans, got alpha={alpha!r} "
                           f"and beta={beta!r}")
    def product():
        if alpha:
            return vec1.unsqueeze(1).logical_and(vec2.unsqueeze(0))
        return new_tensor(tuple(shape), vec1.dtype, vec1.device).fill_(False)
    if not beta:
        return product()
    with scratch_scope():  # declared by ``_addr_cost``
        term = product()
    return term.logical_or(input)


def _dot_meta_for(op):
    def meta(input, other):
        _require_rank(op, "self", input, 1)
        _require_rank(op, "other", other, 1)
        dtype = _result_dtype(op, input, other)
        if input.shape[0] != other.shape[0]:
            raise RuntimeError(f"{op}: expected both vectors to have the same number of elements, but got "
                               f"{input.shape[0]} and {other.shape[0]} (shapes {_dims(input.shape)} and "
                               f"{_dims(other.shape)})")
        return TensorMeta((), dtype)
    return meta


def _dot_rules(op) -> dict:
    """``register``'s rules (meta and cost of bound arguments, the key rule) of ``dot`` or ``vdot``."""
    meta = _dot_meta_for(op)

    def cost(a):
        return _product_cost(meta(a.input, a.other), _flops(a.input.shape[0]), a.input, a.other,
                             products=[(1, 1, a.input.shape[0], 1)])

    def key(facts, input, other):
        return _matmul_keys(facts, op, input, other, meta(input, other).dtype)
    return {"meta": lambda a: meta(a.input, a.other), "cost": cost, "bound": True, "key": key}


@register("dot", family="matmul", aten=["aten::dot.default"], methods=("dot",), **_dot_rules("dot"))
def dot(input: Tensor, other: Tensor) -> Tensor:
    """Inner product of two vectors of equal length; a 0-d tensor."""
    return _matmul("dot", input, other, lambda: _dot_meta_for("dot")(input, other).dtype)


@register("vdot", family="matmul", aten=["aten::vdot.default"], methods=("vdot",), **_dot_rules("vdot"))
def vdot(input: Tensor, other: Tensor) -> Tensor:
    """Inner product conjugating the first vector; the same as dot for the real dtypes supported."""
    return _matmul("vdot", input, other, lambda: _dot_meta_for("vdot")(input, other).dtype)


# ---- linear ------------------------------------------------------------------------------------------
def _linear_meta(input, weight, bias):
    _require_rank("linear", "weight", weight, 2)
    if len(input.shape) == 0:
        raise RuntimeError("linear: input must have at least 1 dimension, got a 0-D tensor")
    dtype = _result_dtype("linear", input, weight)
    if input.shape[-1] != weight.shape[1]:
        raise RuntimeError(f"linear: input of shape {_dims(input.shape)} and weight of shape "
                           f"{_dims(weight.shape)} cannot be multiplied: dim -1 of the input ({input.shape[-1]}) "
                           f"must equal dim 1 of the weight ({weight.shape[1]})")
    out = TensorMeta((*input.shape[:-1], weight.shape[0]), dtype)
    if bias is not None:
        _bias_meta("linear", bias, out)
    return out


def _linear_cost(a):
    input, weight, bias = a.input, a.weight, a.bias
    out = _linear_meta(input, weight, bias)
    rows = S.numel(out.shape[:-1])
    return _product_cost(out, 2 * S.numel(out.shape) * weight.shape[1], input, weight, bias,
                         products=[(1, rows, weight.shape[1], weight.shape[0]),
                                   *_matmul_products(input.shape, tuple(weight.shape[::-1]))])


def _linear_operands(input, weight, bias):
    """(rows, weight transposed, bias over those rows): the matrices ``_plan_linear`` multiplies, views of
    these; None where the input's rows (or the bias over them) do not fold into one matrix."""
    rows = _fold_rows(input) if input.ndim >= 2 else None
    if rows is None:
        return None
    flat_bias = None if bias is None else _fold_rows(bias.expand(*input.shape[:-1], weight.shape[0]))
    if bias is not None and flat_bias is None:
        return None
    return rows, weight.transpose(0, 1), flat_bias


def _linear_key(facts, input, weight, bias=None):
    dtype = _linear_meta(input, weight, bias).dtype
    beta = 0 if bias is None else 1
    folded = _linear_operands(input, weight, bias)
    if folded is None:
        return _matmul_keys(facts, "linear", input, weight.transpose(0, 1), dtype, bias, 1, beta)
    return _product_keys(facts, *folded[:2], dtype, folded[2], 1, beta)


@register("linear", family="matmul", aten=["aten::linear.default"],
          meta=lambda a: _linear_meta(a.input, a.weight, a.bias), cost=_linear_cost, bound=True, api=(),
          key=_linear_key, functional=True)
def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """input @ weight.T + bias, with the (out_features, in_features) weight read in place, transposed."""
    key = (layout_key(input), layout_key(weight), layout_key(bias))
    plan = _linear_plans.lookup(key)
    if plan is None:
        plan = _plan_linear(input, weight, bias)
        _linear_plans.put(key, plan)
    return plan(input, weight, bias)


_linear_plans = PlanCache()


def _plan_linear(input: Tensor, weight: Tensor, bias: Tensor | None):
    """``execute(input, weight, bias)`` for operands laid out as these are. A decode step calls linear
    with the same layouts every time, so the views it multiplies (the input's rows as one matrix, the
    weight transposed, the bias over those rows) are worked out once and rebuilt from their strides."""
    dtype = _linear_meta(input, weight, bias).dtype
    beta = 0 if bias is None else 1
    folded = _linear_operands(input, weight, bias)
    if folded is None or len({t.device for t in (input, weight, bias) if t is not None}) > 1:
        return lambda input, weight, bias: _matmul("linear", input, weight.transpose(0, 1), lambda: dtype, bias, 1,
                                                   beta)
    rows, weight_t, flat_bias = folded
    product = _product_plans.get(
        ("linear", layout_key(rows), layout_key(weight_t), layout_key(flat_bias), 1, beta),
        lambda: _plan_product("linear", rows, weight_t, dtype, flat_bias, 1, beta))
    rows_shape, rows_strides = rows.shape, rows.stride()
    weight_t_shape, weight_t_strides = weight_t.shape, weight_t.stride()
    bias_shape, bias_strides = (None, None) if flat_bias is None else (flat_bias.shape, flat_bias.stride())
    out_shape = (*input.shape[:-1], weight.shape[0])
    out_strides = S.contiguous_strides(out_shape)

    def execute(input, weight, bias):
        out = product(input._view(rows_shape, rows_strides), weight._view(weight_t_shape, weight_t_strides),
                      None if bias is None else bias._view(bias_shape, bias_strides))
        return out._view(out_shape, out_strides)
    return execute


# ---- einsum ------------------------------------------------------------------------------------------
class _Contraction:
    """A parsed einsum equation of one or two operands, in the forms inference graphs use: one operand's
    diagonals (a repeated index), sums (an index left out of the output) and permutation, or a batched
    contraction of two (every index names one dim of each operand it is in, and an index of one operand
    only is kept in the output)."""

    def __init__(self, equation: str, shapes):
        self.equation = equation
        text = equation.replace(" ", "")
        if len(shapes) not in (1, 2):
            self._unsupported(f"{len(shapes)} operands (one or two are supported)")
        lhs, arrow, out = text.partition("->")
        terms = lhs.split(",")
        if len(terms) != len(shapes):
            raise RuntimeError(f"einsum {equation!r}: {len(terms)} operand terms for {len(shapes)} operands")
        spare = iter(sorted(set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") - set(text)))
        ellipsis_rank = max(len(s) - len(t.replace("...", "")) for t, s in zip(terms, shapes) if "..." in t) \
            if "..." in lhs else 0
        ellipsis = "".join(next(spare) for _ in range(ellipsis_rank))
        self.terms = []
        for term, shape in zip(terms, shapes):
            own = len(shape) - len(term.replace("...", ""))
            letters = term.replace("...", ellipsis[ellipsis_rank - own:]) if "..." in term else term
            if len(letters) != len(shape) or not letters.isalpha():
                raise RuntimeError(f"einsum {equation!r}: term {term!r} does not match an operand of shape "
                                   f"{_dims(shape)}")
            if len(set(letters)) != len(letters) and len(shapes) == 2:
                self._unsupported(f"repeated index in {term!r} (diagonals)")
            self.terms.append(letters)
        if arrow:
            self.out = out.replace("...", ellipsis)
        else:
            counts = {c: sum(t.count(c) for t in self.terms) for c in set("".join(self.terms))}
            self.out = ellipsis + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ellipsis))
        self.sizes = {}
        for letters, shape in zip(self.terms, shapes):
            for c, n in zip(letters, shape):
                if self.sizes.setdefault(c, n) != n:
                    raise RuntimeError(f"einsum {equation!r}: index {c!r} is {self.sizes[c]} in one operand and "
                                       f"{n} in another (shapes {', '.join(_dims(s) for s in shapes)})")
        if len(set(self.out)) != len(self.out) or any(c not in self.sizes for c in self.out):
            raise RuntimeError(f"einsum {equation!r}: the output names an index twice or one no operand has")
        everywhere = set("".join(self.terms))
        if len(self.terms) == 1:
            self._plan_single(self.terms[0])
        if len(self.terms) == 2:
            a, b = self.terms
            for c in everywhere:
                if (c in a) != (c in b) and c not in self.out:
                    self._unsupported(f"index {c!r} is summed over in one operand only")
            self.batch = [c for c in self.out if c in a and c in b]
            self.left = [c for c in a if c not in b]
            self.right = [c for c in b if c not in a]
            self.contracted = [c for c in a if c in b and c not in self.out]

    def _plan_single(self, letters: str) -> None:
        """One operand's steps: ``diagonals``, the (dim1, dim2) pairs taken in turn (each diagonal becomes
        the last dim, as ``diagonal`` puts it), leaving ``diagonal_letters``; ``summed``, the dims of those
        summed over; ``order``, the remaining dims' positions in the output's order."""
        self.diagonals = []
        letters = list(letters)
        for c in dict.fromkeys(letters):
            while letters.count(c) > 1:
                first = letters.index(c)
                second = letters.index(c, first + 1)
                self.diagonals.append((first, second))
                letters = [x for i, x in enumerate(letters) if i not in (first, second)] + [c]
        self.diagonal_letters = "".join(letters)
        self.summed = [i for i, c in enumerate(letters) if c not in self.out]
        kept = [c for c in letters if c in self.out]
        self.order = [kept.index(c) for c in self.out]

    @property
    def diagonal_shape(self) -> tuple:
        return tuple(self.sizes[c] for c in self.diagonal_letters)

    def _unsupported(self, what: str):
        raise NotImplementedError(f"einsum {self.equation!r}: {what} is not supported; einsum takes one operand "
                                  "(diagonals, sums, permutations) and batched contractions of two")

    @property
    def out_shape(self) -> tuple:
        return tuple(self.sizes[c] for c in self.out)


def _einsum_operands(operands):
    # a list of operands, not one operand's metadata (a TensorMeta is a tuple too)
    listed = len(operands) == 1 and isinstance(operands[0], (list, tuple)) and not hasattr(operands[0], "shape")
    return tuple(operands[0]) if listed else operands


def _einsum_meta(equation, *operands):
    operands = _einsum_operands(operands)
    plan = _Contraction(equation, [tuple(o.shape) for o in operands])
    if len(operands) == 2:
        dtype = _result_dtype("einsum", *operands)
    else:
        dtype = _sum_dtype(operands[0].dtype, None) if plan.summed else operands[0].dtype
    return TensorMeta(plan.out_shape, dtype)


def _einsum_cost(equation, *operands):
    operands = _einsum_operands(operands)
    plan = _Contraction(equation, [tuple(o.shape) for o in operands])
    out = _einsum_meta(equation, *operands)
    if len(operands) == 1:
        # diagonals and permutations are views; sums cost what sum does over the diagonal view
        if not plan.summed:
            return Cost()
        return get("sum").cost(TensorMeta(plan.diagonal_shape, operands[0].dtype), plan.summed)
    flops = 2 * S.numel(out.shape) * math.prod(plan.sizes[c] for c in plan.contracted)
    sizes = [math.prod(plan.sizes[c] for c in part) for part in (plan.batch, plan.left, plan.contracted, plan.right)]
    return _product_cost(out, flops, *operands, products=[tuple(sizes)])


def _contraction_operands(plan: _Contraction, a, b) -> tuple:
    """(batch..., m, k) and (batch..., k, n): the operands of a contraction of two as one product."""
    ta, tb = plan.terms
    size = plan.sizes
    batch_shape = [size[c] for c in plan.batch]
    m = math.prod(size[c] for c in plan.left)
    k = math.prod(size[c] for c in plan.contracted)
    n = math.prod(size[c] for c in plan.right)
    a3 = _reshaped(a.permute(*[ta.index(c) for c in (*plan.batch, *plan.left, *plan.contracted)]), (*batch_shape, m, k))
    b3 = _reshaped(b.permute(*[tb.index(c) for c in (*plan.batch, *plan.contracted, *plan.right)]), (*batch_shape, k, n))
    return a3, b3


def _reshaped(x, shape: tuple):
    """``x.reshape(shape)``; of a meta tensor no view serves, the layout of the copy a real one gets."""
    if x.device.type == "meta" and S.view_strides(tuple(x.shape), tuple(x.stride()), shape) is None:
        return _meta(shape, x.dtype)
    return x.reshape(*shape)


def _einsum_key(facts, equation, *operands):
    operands = _einsum_operands(operands)
    if len(operands) == 1:
        return []  # views and a sum
    out_meta = _einsum_meta(equation, *operands)
    plan = _Contraction(equation, [tuple(o.shape) for o in operands])
    return _product_keys(facts, *_contraction_operands(plan, *operands), out_meta.dtype)


_einsum_plans = PlanCache()  # (result dtype, parsed equation) by the equation and the operands' layouts


# the contraction order einsum's path names changes no value
@register("einsum", family="matmul", aten=["aten::einsum.default"],
          meta=lambda a: _einsum_meta(a.equation, *a.operands), cost=lambda a: _einsum_cost(a.equation, *a.operands),
          bound=True, key=_einsum_key,
          adapters={"aten::einsum.default": drop_keywords("path")})
def einsum(equation: str, *operands) -> Tensor:
    """torch.einsum for one operand (diagonal views, a sum over the indices the output leaves out, a
    permutation) or a batched contraction of two, as one product (operands are permuted views, merged into
    matrices where their strides allow)."""
    operands = _einsum_operands(operands)
    key = (equation, *[layout_key(o) for o in operands]) \
        if type(equation) is str and all(type(o) is Tensor for o in operands) else None
    planned = _einsum_plans.lookup(key)
    if planned is None:
        planned = (_einsum_meta(equation, *operands).dtype, _Contraction(equation, [tuple(o.shape) for o in operands]))
        if key is not None:
            _einsum_plans.put(key, planned)
    dtype, plan = planned
    if len(operands) == 1:
        (x,) = operands
        for first, second in plan.diagonals:
            x = x.diagonal(0, first, second)
        if plan.summed:
            x = x.sum(plan.summed)
        return x.permute(*plan.order) if plan.order else x
    product = _product("einsum", *_contraction_operands(plan, *operands), lambda: dtype)
    size = plan.sizes
    order = [*plan.batch, *plan.left, *plan.right]
    full = product.view(tuple(size[c] for c in order))
    return full.permute(tuple(order.index(c) for c in plan.out))  # () for a 0-d result


# ---- samples ---------------------------------------------------------------------------------------

def _products():
    """The samples of the products: float32 and a transposed operand, bfloat16, 0-size K and M, int64."""
    def affine(product):
        return lambda x, a, b, *, beta=1, alpha=1: beta * x + alpha * product(a, b)

    bf16 = dict(dtype="bfloat16")
    return {
        "mm": Samples((sample(operand(2, 3), operand(3, 4)), sample(operand(3, 2, layout="transposed"), operand(2, 4)),
                       sample(operand(2, 3, **bf16), operand(3, 2, **bf16)), sample(operand(2, 0), operand(0, 3)),
                       sample(operand(0, 3), operand(3, 2)), sample(operand(2, 3, dtype="int64"), operand(3, 2, dtype="int64")),
                       sample(operand(2, 3, dtype="float64"),
                              operand(3, 2, dtype="float64", layout="transposed"))),
                      np.matmul),
        "bmm": Samples((sample(operand(2, 2, 3), operand(2, 3, 4)), sample(operand(2, 3, 2, layout="transposed"), operand(2, 2, 3)),
                        sample(operand(1, 2, 3, **bf16), operand(1, 3, 2, **bf16)), sample(operand(0, 2, 3), operand(0, 3, 1))),
                       np.matmul),
        "matmul": Samples((sample(operand(2, 3), operand(3, 4)), sample(operand(3), operand(3)), sample(operand(3), operand(3, 2)),
                           sample(operand(2, 2, 3), operand(3, 2, layout="transposed")),
                           sample(operand(2, 3, **bf16), operand(3, **bf16)), sample(operand(0, 3), operand(3, 2))), np.matmul),
        "addmm": Samples((sample(operand(2, 4), operand(2, 3), operand(3, 4)),
                          sample(operand(4), operand(3, 2, layout="transposed"), operand(2, 4), beta=0.5, alpha=2),
                          sample(operand(2, 2, **bf16), operand(2, 3, **bf16), operand(3, 2, **bf16)),
                          sample(operand(2, 3), operand(2, 0), operand(0, 3)),
                          sample(operand(3, dtype="float64"), operand(2, 4, dtype="float64"),
                                 operand(4, 3, dtype="float64"), beta=0.1, alpha=-1.7)), affine(np.matmul)),
        "baddbmm": Samples((sample(operand(2, 2, 4), operand(2, 2, 3), operand(2, 3, 4)),
                            sample(operand(2, 1), operand(1, 2, 3), operand(1, 3, 1), beta=0.0, alpha=1.5)),
                           affine(np.matmul)),
        "mv": Samples((sample(operand(2, 3), operand(3)), sample(operand(3, 2, layout="transposed"), operand(2)),
                       sample(operand(0, 3), operand(3)), sample(operand(2, 3, dtype="int64"), operand(3, dtype="int64"))),
                      np.matmul),
        "addmv": Samples((sample(operand(2), operand(2, 3), operand(3)), sample(operand(), operand(3, 2, layout="transposed"),
                                                                              operand(2), beta=2, alpha=0.5)),
                         affine(np.matmul)),
        "outer": Samples((sample(operand(2), operand(3)), sample(operand(0), operand(3)),
                          sample(operand(2, dtype="int64"), operand(3, dtype="int64"))), np.outer),
        "addr": Samples((sample(operand(2, 3), operand(2), operand(3)), sample(operand(3), operand(2), operand(3), alpha=2)),
                        affine(np.outer)),
        "dot": Samples((sample(operand(3), operand(3)), sample(operand(0), operand(0)),
                        sample(operand(4, dtype="int64", layout="sliced"), operand(4, dtype="int64"))),
                       lambda a, b: np.asarray(np.dot(a, b))),
        "vdot": Samples((sample(operand(3), operand(3)), sample(operand(3, dtype="bfloat16"), operand(3, dtype="bfloat16"))),
                        lambda a, b: np.asarray(np.vdot(a, b))),
        "linear": Samples((sample(operand(2, 3), operand(4, 3), operand(4)), sample(operand(3), operand(2, 3)),
                           sample(operand(2, 2, 3, **bf16), operand(2, 3, **bf16), operand(2, **bf16)),
                           sample(operand(0, 3), operand(4, 3))),
                          lambda x, w, b=None: x @ w.T + (0 if b is None else b)),
        "einsum": Samples((sample("ij,jk->ik", operand(2, 3), operand(3, 4)), sample("bij->bji", operand(2, 2, 3)),
                           sample("i,i", operand(3), operand(3)), sample("ii->i", operand(3, 3)),
                           sample("ij,kj->ik", [operand(2, 3), operand(4, 3)])),
                          lambda equation, *operands: np.einsum(equation, *(operands[0] if len(operands) == 1 and
                                                                            isinstance(operands[0], list) else operands))),
    }


family_samples("matmul", by_name(_products()))
