"""Errors that kernels find on the device: a kernel that reads indices never follows one out of range,
and stores its op's code in the device's int32 status buffer instead. The host reads that buffer at its
next synchronisation with the device (``numpy()``, ``item()``, ``tolist()``, ``nbx.cuda.synchronize()``)
and raises the error naming the op; on a device the host reads directly, right after the launch. Below
the tensors and the ops: the buffer is whatever the ops made it (anything with ``data_ptr()`` and
``numpy()``)."""
from __future__ import annotations

import numpy as np

from ..launch import current_capture
from . import backend_for

_OP_CODES: dict = {}
_OP_NAMES: dict[int, str] = {}
_REPORTS: dict[int, tuple[type, str]] = {}  # code -> (exception, message) of a check other than bounds
_status_buffers: dict = {}
_pending: set = set()


def error_code(op: str, report: tuple[type, str] | None = None) -> int:
    """The code a kernel stores for ``op``: an index out of range, or with ``report`` (exception, message)
    a check of its own."""
    key = op if report is None else (op, report)
    if key not in _OP_CODES:
        code = _OP_CODES[key] = len(_OP_CODES) + 1
        _OP_NAMES[code] = op
        if report is not None:
            _REPORTS[code] = report
    return _OP_CODES[key]


def status_buffer(dev, make):
    """``dev``'s status buffer, made by ``make()`` (one int32 zero on ``dev``) the first time."""
    buffer = _status_buffers.get(dev)
    if buffer is None:
        buffer = _status_buffers[dev] = make()
    return buffer


def after_checked_launch(dev, out_of_range=None) -> None:
    """Check ``dev``'s status after a launch that reads indices, at once where the host reads the
    device's memory (there ``out_of_range()``, when given, names the offending index), else at the
    next synchronisation."""
    captured = current_capture()
    if captured is not None:
        # reading the status now would end the capture's use; a replay checks after its launches
        captured.after.append(lambda: after_checked_launch(dev))
        _pending.add(dev)
    elif backend_for(dev).host_addressable:
        check_device_errors(dev, out_of_range)
    else:
        _pending.add(dev)


def check_device_errors(dev=None, out_of_range=None) -> None:
    """Raise the error reported on ``dev`` (every device when None) since the last check (an index out
    of range, or a check an op reported), and clear it. Reading the status waits for the device.
    ``out_of_range()`` gives the message for an index out of range, when it can name the index."""
    devices = [dev] if dev is not None else list(_pending)
    for d in devices:
        buffer = _status_buffers.get(d)
        if buffer is None:
            continue
        if not backend_for(d).host_addressable:
            if d not in _pending:
                continue
            _pending.discard(d)
            raw = backend_for(d).download(buffer.data_ptr(), 4, d.index)
            code = int(raw.view(np.int32)[0])
        else:
            code = int(buffer.numpy()[0])
        if code:
            backend_for(d).upload(buffer.data_ptr(), np.zeros(1, np.int32).view(np.uint8), d.index)
            op = _OP_NAMES.get(code, "an indexing op")
            if code in _REPORTS:
                error, message = _REPORTS[code]
                raise error(f"{op}: {message} (found on {d})")
            named = out_of_range() if out_of_range is not None else None
            raise IndexError(named or f"{op}: index out of range (found on {d}); out-of-range indices were not "
                             "followed, and the elements they address in the result are unspecified")
