"""Which elements: nonzero, argwhere and ``torch.where(condition)``, whose result's length depends on the
data (so they wait for the device), and ``Tensor.where``. Boolean-mask indexing builds on ``nonzero``
(``advanced_indexing``)."""
from __future__ import annotations

import numpy as np

from .. import shape as S
from ..allocation import new_tensor
from ..dtypes import get_dtype
from ..kernels import indexing as K
from ..launch import cdiv, launch
from ..lowering import elementwise_block, needs_index_64
from ..tensor import Tensor
from .copy import copy_
from .registry import Cost, TensorMeta, family_samples, get, nbytes, register, tensor_attribute
from .samples import Samples, by_name, operand, sample
from .views import select, view_as_real

_I64 = get_dtype("int64")
_I32 = get_dtype("int32")
_BOOL = get_dtype("bool")


def _nonzero_result(x, as_tuple):
    if as_tuple:
        return tuple(TensorMeta((None,), _I64) for _ in range(max(len(x.shape), 1)))
    return TensorMeta((None, len(x.shape)), _I64)


@register("nonzero", family="indexing", aten=["aten::nonzero.default"], meta=lambda a: _nonzero_result(a.x, a.as_tuple),
          cost=lambda a: Cost(bytes_read=nbytes(a.x), bytes_written=S.numel(a.x.shape) * 8 * len(a.x.shape)),
          bound=True, methods=("nonzero",))
def nonzero(x: Tensor, *, as_tuple: bool = False):
    """Coordinates of the nonzero elements, one row each in row-major order ((count, ndim) int64),
    or one vector per dim with ``as_tuple``. The count depends on the data, so this waits for the
    device: a count per block, their running sum on the device (only the total is read back), then a
    compaction."""
    if x.dtype.is_complex:
        pairs = view_as_real(x)
        flags = new_tensor(x.shape, _BOOL, x.device)
        copy_(flags, pairs[..., 0])
        flags.masked_fill_(_as_flags(pairs[..., 1]), True)
        return nonzero.impl(flags, as_tuple=as_tuple)
    dev = x.device
    n = x.numel()
    rank = x.ndim
    shape, strides = (tuple(x.shape), x.stride()) if rank else ((1,), (0,))
    block = min(elementwise_block(dev), 4096)
    blocks = cdiv(n, block)
    if n == 0:
        out = new_tensor((0, rank), _I64, dev)
    else:
        counts = new_tensor((blocks,), _I32, dev)
        index_64 = needs_index_64((shape, strides), count=n)
        launch(K.nonzero_count, (blocks,), dev, [x, counts, n, shape, strides],
               RANK=len(shape), INDEX_64=index_64, BLOCK=block)
        ends = get("cumsum").impl(counts, 0)  # int64: where each block's rows end
        total = int(select(ends, 0, blocks - 1).item())
        out = new_tensor((total, len(shape)), _I64, dev)
        if total:
            launch(K.nonzero_write, (blocks,), dev, [x, counts, ends, out, n, shape, strides],
                   RANK=len(shape), INDEX_64=index_64, BLOCK=block)
        if rank == 0:
            out = out._view((total, 0), (1, 1))
    if as_tuple:
        if rank == 0:
            return (new_tensor((out.shape[0],), _I64, dev).fill_(0),)
        return tuple(select(out, 1, d) for d in range(rank))
    return out


def _as_flags(t: Tensor) -> Tensor:
    flags = new_tensor(t.shape, _BOOL, t.device)
    return copy_(flags, t)


@register("argwhere", family="indexing", aten=["aten::argwhere.default"], meta=lambda a: _nonzero_result(a.x, False),
          cost=lambda a: Cost(bytes_read=nbytes(a.x)), bound=True, methods=("argwhere",))
def argwhere(x: Tensor) -> Tensor:
    return nonzero.impl(x)


@register("where_condition", family="indexing", aten=["aten::where.default"],
          meta=lambda a: _nonzero_result(a.condition, True),
          cost=lambda a: Cost(bytes_read=nbytes(a.condition)), bound=True, api=())
def where_condition(condition: Tensor):
    """``torch.where(condition)``: ``nonzero(condition, as_tuple=True)``."""
    return nonzero.impl(condition, as_tuple=True)


def where_method(self: Tensor, condition, other) -> Tensor:
    """``self`` where ``condition`` holds, else ``other`` (torch's method order)."""
    return get("where").impl(condition, self, other)


tensor_attribute("where", where_method)


# ---- samples ---------------------------------------------------------------------------------------

_SAMPLES = {
    "nonzero": Samples((sample(operand(2, 3, dtype="int64", values="index", domain=(0, 2))),
                        sample(operand(4, dtype="bool"), as_tuple=True), sample(operand(0, 3)), sample(operand(dtype="bool"))),
                       lambda x, as_tuple=False: tuple(np.nonzero(x)) if as_tuple else np.argwhere(x)),
    "argwhere": Samples((sample(operand(2, 3, dtype="int64", values="index", domain=(0, 2))), sample(operand(4, dtype="bool")),
                         sample(operand(0, 3))), np.argwhere),
    "where_condition": Samples((sample(operand(2, 3, dtype="bool")), sample(operand(4, dtype="int64", values="index",
                                                                                  domain=(0, 2)))),
                               lambda condition: tuple(np.nonzero(condition))),
}
family_samples("indexing", by_name(_SAMPLES))
