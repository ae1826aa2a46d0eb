"""The census: every launch key a graph's run forms, from its metadata and a device class's facts alone.

Each step's arguments are laid out as meta tensors (shapes, strides and dtypes, no memory): inputs,
weights (channels-last where the graph marks them so) and the results of ops that compute contiguous; a
pointwise op's result as TensorIterator lays it out from its operands, a convolution's channels-last when
its input or weight is (a following convolution keys that layout), a pool's, a resampling's and a batch
norm's when its input is; a view's (and a maybe-view's, such as ``reshape``) by running the op on the meta
tensors, as a real run makes it, and contiguous where it must copy. The
key rule an op declares (``register(key=)``) turns its laid-out arguments into the keys its call forms.
``shadow()`` records the keys a real run forms, to check the census against.
"""
from __future__ import annotations

import contextlib
from collections import Counter

from . import tuning
from .allocation import new_tensor
from .device import backend_for, resolve
from . import shape as S
from .ops.plans import clear_all
from .ops.convolution import conv_output_strides
from .ops.pointwise import output_strides

__all__ = ["census", "shadow"]

# ops whose result takes the format ATen suggests for their input: channels-last where the input is
_INPUT_FORMAT_FAMILIES = frozenset(("pooling", "resample"))
_INPUT_FORMAT_OPS = frozenset(("batch_norm", "native_batch_norm", "native_batch_norm_legit",
                               "native_batch_norm_no_training"))


def census(model, values: dict | None = None, facts: dict | None = None) -> Counter:
    """Launch key -> how many of ``model``'s steps form it, for symbol ``values`` (default: the values traced
    at export) on a device with ``facts`` (default: the default device's). ``model``: a loaded graph
    (``graph.load(..., weights=False)`` reads no weights)."""
    if facts is None:
        facts = backend_for(resolve(None)).facts
    values = model.trace_values() if values is None else values
    model.check_symbols(values)
    metas = model.infer(values)
    meta_device = resolve("meta")
    laid_out: dict = {}

    def layout(tensor_id):
        found = laid_out.get(tensor_id)
        if found is None:
            meta = metas[tensor_id]
            weight_format = model.tensors[tensor_id].get("memory_format")  # a weight loaded channels-last
            found = laid_out[tensor_id] = new_tensor(
                meta.shape, meta.dtype, meta_device,
                strides=S.channels_last_strides(meta.shape, weight_format) if weight_format else None)
        return found

    counts: Counter = Counter()
    for step in model.steps:
        args, kwargs = model._arguments(step, layout, values)
        if step.op.key is not None:
            counts.update(step.op.key(facts, *args, **kwargs))
        if step.op.family == "pointwise":
            _lay_out_pointwise(step, args, kwargs, metas, laid_out, meta_device)
        elif step.op.family == "convolution" and step.outputs and step.outputs[0] in metas:
            # a channels-last input or weight gives a channels-last result
            out = step.outputs[0]
            strides = conv_output_strides(tuple(metas[out].shape), args[0], args[1])
            if strides is not None:
                laid_out[out] = new_tensor(metas[out].shape, metas[out].dtype, meta_device, strides=strides)
        elif (step.op.family in _INPUT_FORMAT_FAMILIES or step.op.name in _INPUT_FORMAT_OPS) and step.outputs \
                and step.outputs[0] in metas and hasattr(args[0], "stride") \
                and S.strides_like_channels_last(args[0].shape, args[0].stride()):
            out = step.outputs[0]
            laid_out[out] = new_tensor(metas[out].shape, metas[out].dtype, meta_device,
                                       strides=S.channels_last_strides(metas[out].shape))
        elif step.op.aliases is not None:  # a view (or a maybe-view) laid out by running it on meta tensors
            try:
                produced = step.op.impl(*args, **kwargs)
            except RuntimeError:  # a copy, which a meta tensor cannot make: its result is contiguous
                continue
            results = [produced] if hasattr(produced, "shape") else list(produced)
            for out, result in zip(step.outputs, results):
                if out is not None and hasattr(result, "stride"):
                    laid_out[out] = result
    return counts


def _lay_out_pointwise(step, args, kwargs, metas, laid_out, meta_device) -> None:
    """A pointwise step's result laid out from its tensor operands' strides, broadcast to its shape."""
    out = step.outputs[0] if step.outputs else None
    if out is None or out not in metas:
        return
    shape = tuple(metas[out].shape)
    operands = [a for a in (*args, *kwargs.values()) if hasattr(a, "stride") and len(a.shape) <= len(shape)]
    if not operands:
        return
    stride_sets = []
    for operand in operands:
        lead = len(shape) - len(operand.shape)
        stride_sets.append((0,) * lead + tuple(0 if size == 1 and want != 1 else stride for size, stride, want
                                               in zip(operand.shape, operand.stride(), shape[lead:])))
    strides = output_strides(shape, stride_sets)
    if not S.is_contiguous(shape, strides):
        laid_out[out] = new_tensor(shape, metas[out].dtype, meta_device, strides=strides)


@contextlib.contextmanager
def shadow():
    """The list of launch keys a real run forms inside the block: plans made before it are forgotten, so that
    every layout the run meets is planned (and keyed) again."""
    clear_all()
    with tuning.recording() as noted:
        yield noted
