"""What the index families (``selection``, ``advanced_indexing``, ``gather_scatter``) share.

Every index read from memory is checked on the device: an out-of-range index is never followed, and
the kernel stores its op's code in the device's status buffer (``device/errors.py``), which the host
reads at its next synchronisation with the device; the host then names the first bad index as torch does.
"""
from __future__ import annotations

import triton.language as tl

from ..allocation import new_tensor, outside_arena
from ..device.errors import after_checked_launch, error_code, status_buffer
from ..dtypes import get_dtype
from ..kernels.formats import FORMAT_BOOL, FORMAT_NATIVE, SMALL_FLOAT_FORMATS
from ..tensor import Tensor
from .copy import copy_, fill_
from .registry import get
from .views import view_as_real

_I32 = get_dtype("int32")


# ---- the device-side error status ------------------------------------------------------------

def report_on_device(flag: Tensor, op: str, error: type, message: str) -> None:
    """Make ``flag`` (a 0-d bool on the device) being true an error of ``op``, raised with ``message`` at
    the next check of the device's status (at once on the CPU), without reading it now."""
    dev = flag.device
    status = index_status(dev)
    copy_(status, get("where").impl(flag, error_code(op, (error, message)), status))
    after_checked_launch(dev)


def index_status(dev) -> Tensor:
    """The device's status buffer (int32, one element) that index-reading kernels store an error code into."""
    return status_buffer(dev, lambda: _zero_status(dev))


def _zero_status(dev) -> Tensor:
    with outside_arena():  # the device's for good, not a graph step's
        return fill_(new_tensor((1,), _I32, dev), 0)


def out_of_range_message(op: str, index: Tensor, size: int, dim: int, wrap: bool) -> str | None:
    """torch's message for the first entry of ``index`` (on a device the host reads) outside a dim of
    ``size``, or None when every entry is in range."""
    values = index.numpy()
    bad = (values < (-size if wrap else 0)) | (values >= size)
    if not bad.any():
        return None
    prefix = "" if op == "index" else f"{op}: "
    return f"{prefix}index {int(values[bad].flat[0])} is out of bounds for dimension {dim} with size {size}"


def read_modify_write_flags(dt) -> dict:
    """How a read-modify-write kernel computes in ``dt``: half types in float32, bool as int32
    stored back as 0/1, the rest natively; rounding on the store as the copy kernel rounds."""
    if dt.kind == "bool":
        return dict(COMPUTE=tl.int32, FORMAT=FORMAT_BOOL.value, VIA_F32=False)
    if dt.name == "float16":
        return dict(COMPUTE=tl.float32, FORMAT=FORMAT_NATIVE.value, VIA_F32=True)
    if dt.name in SMALL_FLOAT_FORMATS:
        return dict(COMPUTE=tl.float32, FORMAT=SMALL_FLOAT_FORMATS[dt.name], VIA_F32=False)
    return dict(COMPUTE=dt.triton, FORMAT=FORMAT_NATIVE.value, VIA_F32=False)


# ---- operands of the index kernels ------------------------------------------------------------

def check_index_dtype(t: Tensor, op: str) -> None:
    if t.dtype.kind not in ("int", "uint") or t.dtype.name == "uint8":
        raise IndexError(f"{op}: indices must be an int64 or int32 tensor, got {t.dtype.name}")


def on_device(t: Tensor, dev) -> Tensor:
    """``t`` (indices, a mask, values) on ``dev``, the indexed tensor's device."""
    return t if t.device == dev else t.to(dev)


def real_pairs(t: Tensor) -> Tensor:
    """A complex tensor as its (re, im) components, a trailing dim of 2."""
    return view_as_real(t) if t.dtype.is_complex else t

