"""More of torch's breadth, each composed of registry ops: the ``*_copy`` forms of the views (the view,
then a row-major copy of it, as ATen's functionalisation emits them)."""
from __future__ import annotations

from .. import shape as S
from ..tensor import Tensor
from .registry import Cost, get, nbytes, register

_CONTIGUOUS = S.MEMORY_FORMATS["contiguous_format"]


def _op(name):
    return get(name).impl


def _total_bytes(meta) -> int:
    return nbytes(meta) if not isinstance(meta, tuple) else sum(nbytes(m) for m in meta)


# ---- the *_copy views ------------------------------------------------------------------------------

def _copied(out):
    if isinstance(out, Tensor):
        return _op("clone")(out, memory_format=_CONTIGUOUS)
    return tuple(_copied(o) for o in out)


def _copy_of(view_name: str | None, name: str, aten):
    """Register ``name`` as ``view_name``'s view copied to fresh row-major storage (None: the input itself)."""
    view = get(view_name) if view_name else None

    def meta(x, *args, **kwargs):
        return view.meta(x, *args, **kwargs) if view else get("clone").meta(x)

    def cost(x, *args, **kwargs):
        moved = _total_bytes(meta(x, *args, **kwargs))
        return Cost(bytes_read=moved, bytes_written=moved)

    def impl(x: Tensor, *args, **kwargs):
        return _copied(view.impl(x, *args, **kwargs) if view else x)
    impl.__doc__ = f"``{view_name or 'alias'}``'s result as a new row-major tensor that shares no storage."
    return register(name, family="copy", aten=aten, meta=meta, cost=cost)(impl)


alias_copy = _copy_of(None, "alias_copy", ["aten::alias_copy.default"])
as_strided_copy = _copy_of("as_strided", "as_strided_copy", ["aten::as_strided_copy.default"])
diagonal_copy = _copy_of("diagonal", "diagonal_copy", ["aten::diagonal_copy.default"])
expand_copy = _copy_of("expand", "expand_copy", ["aten::expand_copy.default"])
narrow_copy = _copy_of("narrow", "narrow_copy", ["aten::narrow_copy.default"])
permute_copy = _copy_of("permute", "permute_copy", ["aten::permute_copy.default"])
squeeze_copy = _copy_of("squeeze", "squeeze_copy", ["aten::squeeze_copy.default", "aten::squeeze_copy.dim",
                                                    "aten::squeeze_copy.dims"])
t_copy = _copy_of("t", "t_copy", ["aten::t_copy.default"])
transpose_copy = _copy_of("transpose", "transpose_copy", ["aten::transpose_copy.int"])
unsqueeze_copy = _copy_of("unsqueeze", "unsqueeze_copy", ["aten::unsqueeze_copy.default"])
view_copy = _copy_of("view", "view_copy", ["aten::view_copy.default", "aten::view_copy.dtype"])
unfold_copy = _copy_of("unfold", "unfold_copy", ["aten::unfold_copy.default"])
unbind_copy = _copy_of("unbind", "unbind_copy", ["aten::unbind_copy.int"])
split_with_sizes_copy = _copy_of("split_with_sizes", "split_with_sizes_copy", ["aten::split_with_sizes_copy.default"])
