"""``nbxtensor.nn.functional``: torch.nn.functional's names for the ops nbxtensor has.

The activations are rows of the pointwise table (``ops/pointwise_table.py``); each takes torch's
arguments, ``inplace=`` included where torch has it, and ``<name>_`` is the in-place form.
"""
from ..ops import pointwise_table as _table  # noqa: F401  (registers the rows)
from ..ops.pointwise import FUNCTIONAL as _FUNCTIONAL
from ..ops.normalization import FUNCTIONAL as _NORM_FUNCTIONAL
from ..ops.random import dropout as _dropout
from ..ops.registry import get as _get
from ..ops import attention as _attention
from ..ops import indexing as _indexing
from ..ops.convolution import FUNCTIONAL as _CONV_FUNCTIONAL
from ..ops.nn_composites import FUNCTIONAL as _COMPOSITE_FUNCTIONAL
from ..ops.losses import FUNCTIONAL as _LOSS_FUNCTIONAL
from ..ops.breadth_composites import FUNCTIONAL as _BREADTH_FUNCTIONAL
from ..ops.margin_losses import FUNCTIONAL as _MARGIN_LOSS_FUNCTIONAL
from ..ops.nn_more import FUNCTIONAL as _NN_MORE_FUNCTIONAL
from ..ops.mha import multi_head_attention_forward as _multi_head_attention_forward
from ..ops.ctc import ctc_loss as _ctc_loss

globals().update(_FUNCTIONAL)
globals().update(_NORM_FUNCTIONAL)
globals().update(_CONV_FUNCTIONAL)
globals().update(_COMPOSITE_FUNCTIONAL)
globals().update(_LOSS_FUNCTIONAL)
globals().update(_BREADTH_FUNCTIONAL)
globals().update(_MARGIN_LOSS_FUNCTIONAL)
globals().update(_NN_MORE_FUNCTIONAL)
multi_head_attention_forward = _multi_head_attention_forward.impl
ctc_loss = _ctc_loss.impl
sigmoid = _get("sigmoid").impl
tanh = _get("tanh").impl
linear = _get("linear").impl
dropout = _dropout.impl
scaled_dot_product_attention = _attention.scaled_dot_product_attention.impl
paged_attention = _attention.paged_attention.impl
prefill_attention = _attention.prefill_attention.impl
kv_cache_append = _attention.kv_cache_append.impl
rotary_embedding = _attention.rotary_embedding.impl
rotary_append = _attention.rotary_append.impl
_ATTENTION = ["scaled_dot_product_attention", "prefill_attention", "paged_attention", "kv_cache_append", "rotary_embedding",
              "rotary_append"]
# the gated MLP's activation(gate) * up over cat([gate, up], -1): an nbx extra, as the attention ops are
act_and_mul = _get("act_and_mul").impl
embedding = _indexing.embedding_functional  # torch's argument order: (input, weight, ...)
pad = _get("pad").impl
one_hot = _get("one_hot").impl
_VISION = [f"{kind}_pool{nd}d" for kind in ("max", "avg", "adaptive_avg", "adaptive_max", "lp") for nd in (1, 2, 3)] + [
    f"{kind}_pool{nd}d_with_indices" for kind in ("max", "adaptive_max") for nd in (1, 2, 3)] + [
    "interpolate", "pixel_shuffle", "pixel_unshuffle", "grid_sample", "affine_grid", "fold"]
globals().update({name: _get(name).impl for name in _VISION})
unfold = _get("unfold_blocks").impl  # the registry's "unfold" is Tensor.unfold, a view

__all__ = sorted([*_FUNCTIONAL, *_NORM_FUNCTIONAL, *_CONV_FUNCTIONAL, *_COMPOSITE_FUNCTIONAL, *_LOSS_FUNCTIONAL,
                  *_BREADTH_FUNCTIONAL, "sigmoid", "tanh", "dropout", "linear", "embedding", "pad", "one_hot", "unfold",
                  "act_and_mul", *_ATTENTION, *_VISION, *_MARGIN_LOSS_FUNCTIONAL, *_NN_MORE_FUNCTIONAL,
                  "multi_head_attention_forward", "ctc_loss"])
