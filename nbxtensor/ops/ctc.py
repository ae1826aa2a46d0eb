"""``nn.functional.ctc_loss``'s forward: the alpha recursion of each sample in a Triton kernel
(``kernels/ctc.py``), then torch's reduction. The lengths and the blank are checked on the host, as
ATen checks them."""
from __future__ import annotations

from .. import shape as S
from ..allocation import new_tensor, scratch_scope
from ..dtypes import get_dtype
from ..kernels import ctc as K
from ..launch import launch, next_pow2
from ..tensor import Tensor
from .creation import tensor
from .losses import _reduced_meta, reduction_name
from .nn_composites import temporaries
from .registry import Cost, family_samples, nbytes, op_impl, register
from .samples import Samples, by_name, operand, sample

_INT64 = get_dtype("int64")


def _lengths(values, device) -> Tensor:
    if isinstance(values, Tensor):
        return values.reshape(-1).to(_INT64)
    return tensor([int(v) for v in (values if isinstance(values, (list, tuple)) else [values])], dtype=_INT64,
                  device=device)


def _ctc_layout(log_probs, targets, input_lengths, target_lengths, blank):
    """(frames, batch, classes, batched) after the shape checks that need no data."""
    if len(log_probs.shape) not in (2, 3):
        raise RuntimeError(f"ctc_loss: expected log_probs of 2 (T, C) or 3 (T, N, C) dimensions, got "
                           f"{list(log_probs.shape)}")
    if not log_probs.dtype.is_floating_point:
        raise RuntimeError(f"ctc_loss: expected floating-point log_probs, got {log_probs.dtype.name}")
    batched = len(log_probs.shape) == 3
    frames, classes = log_probs.shape[0], log_probs.shape[-1]
    batch = log_probs.shape[1] if batched else 1
    if not 0 <= blank < classes:
        raise RuntimeError(f"ctc_loss: blank must be in label range, got blank={blank} for {classes} classes")
    if not targets.dtype.is_integral or targets.dtype.kind == "bool":
        raise RuntimeError(f"ctc_loss: expected integer targets, got {targets.dtype.name}")
    for name, lengths in (("input_lengths", input_lengths), ("target_lengths", target_lengths)):
        count = (S.numel(lengths.shape) if hasattr(lengths, "shape") else
                 len(lengths) if isinstance(lengths, (list, tuple)) else 1)
        if count != batch:
            raise RuntimeError(f"ctc_loss: {name} must have one length per sample ({batch}), got {count}")
    return frames, batch, classes, batched


def _ctc_meta(a):
    _, batch, _, batched = _ctc_layout(a.log_probs, a.targets, a.input_lengths, a.target_lengths, a.blank)
    return _reduced_meta((batch,) if batched else (), a.log_probs.dtype, reduction_name(a.reduction))


def _ctc_cost(a):
    log_probs, targets = a.log_probs, a.targets
    frames, batch, _, _ = _ctc_layout(log_probs, targets, a.input_lengths, a.target_lengths, a.blank)
    labels = 2 * (targets.shape[-1] if len(targets.shape) else 1) + 1
    wide = get_dtype("float64") if log_probs.dtype.name == "float64" else get_dtype("float32")
    return Cost(flops=12 * frames * batch * labels, bytes_read=nbytes(log_probs) + nbytes(targets),
                bytes_written=nbytes(_ctc_meta(a)),
                workspace=temporaries(1, log_probs.shape, wide) + temporaries(2, (batch, labels), wide)
                + temporaries(4, (batch,), _INT64) + temporaries(1, targets.shape, _INT64))


@register("ctc_loss", family="loss", aten=["aten::ctc_loss.IntList", "aten::ctc_loss.Tensor"], meta=_ctc_meta,
          cost=_ctc_cost, bound=True, api=(), functional=True)
def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths, target_lengths, blank: int = 0, reduction="mean",
             zero_infinity: bool = False) -> Tensor:
    """-log p(target | log_probs) summed over every CTC alignment (forward only). ``log_probs`` (T, N, C)
    or (T, C); ``targets`` (N, S) padded or 1-d concatenated; 'mean' divides each loss by its target
    length (at least 1) before averaging; ``zero_infinity`` makes impossible alignments' +inf 0."""
    reduction = reduction_name(reduction)
    frames, batch, classes, batched = _ctc_layout(log_probs, targets, input_lengths, target_lengths, blank)
    device = log_probs.device
    wide = get_dtype("float64") if log_probs.dtype.name == "float64" else get_dtype("float32")
    with scratch_scope():
        frame_counts = _lengths(input_lengths, device)
        label_counts = _lengths(target_lengths, device)
        counts = label_counts.tolist()
        if any(f < 0 or f > frames for f in frame_counts.tolist()):
            raise RuntimeError(f"ctc_loss: expected input_lengths to have values in [0, {frames}], got "
                               f"{frame_counts.tolist()}")
        padded = (len(targets.shape) == 2) if batched else False
        if padded and targets.shape[0] != batch:
            raise RuntimeError(f"ctc_loss: expected targets of {batch} rows, got {list(targets.shape)}")
        available = targets.shape[-1] if padded else S.numel(targets.shape)
        if any(c < 0 for c in counts) or (max(counts, default=0) > available if padded else sum(counts) > available):
            raise RuntimeError(f"ctc_loss: target_lengths {counts} exceed the targets given "
                               f"({list(targets.shape)})")
        flat_targets = targets.reshape(-1).to(_INT64).contiguous()
        if flat_targets.numel() and ((flat_targets < 0) | (flat_targets >= classes)).any().item():
            raise IndexError(f"ctc_loss: target class out of range for {classes} classes")
        starts = (op_impl("arange")(batch, dtype=_INT64, device=device) * targets.shape[-1] if padded
                  else label_counts.cumsum(0) - label_counts)
        probabilities = (log_probs if batched else log_probs.unsqueeze(1)).to(wide).contiguous()
        block = next_pow2(2 * max(counts, default=0) + 1)
        alpha = new_tensor((batch, 2, block), wide, device)
        losses = new_tensor((batch,), wide, device)
        launch(K.ctc_alpha, (batch,), device,
               [probabilities, flat_targets if flat_targets.numel() else frame_counts, starts.contiguous(),
                frame_counts.contiguous(), label_counts.contiguous(), alpha, losses, *probabilities.stride(),
                int(blank)], BLOCK=block)
        if zero_infinity:
            losses = op_impl("where")(losses == float("inf"), 0.0, losses)
        if reduction == "mean":
            losses = losses / label_counts.clamp_min(1).to(wide)
        losses = losses.to(log_probs.dtype)
    if reduction != "none":
        return losses.sum() if reduction == "sum" else losses.mean()
    return (losses if batched else losses.reshape(())).clone()


# ---- samples ---------------------------------------------------------------------------------------

_LOG_PROBS = operand(4, 2, 3, values="domain", domain=(-3, -0.1))
_TARGETS = operand(2, 2, dtype="int64", values="index", domain=(1, 3))
family_samples("loss", by_name({"ctc_loss": Samples((
    sample(_LOG_PROBS, _TARGETS, [4, 4], [2, 1]), sample(_LOG_PROBS, _TARGETS, [4, 3], [2, 2], reduction="sum"),
    sample(_LOG_PROBS, _TARGETS, [4, 4], [2, 1], 0, "none", True)))}))
