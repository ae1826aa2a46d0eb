"""``nn.functional.multi_head_attention_forward``, nn.MultiheadAttention's forward, composed of registry
ops: the in-projections (``linear``), the optional key/value biases and zero attention column, the masks
made additive, attention (``scaled_dot_product_attention``, or an explicit softmax where the weights are
returned) and the out-projection. Inference only: dropout is refused unless ``dropout_p`` is 0 or
``training`` is False."""
from __future__ import annotations

import math

from ..allocation import scratch_scope
from ..tensor import Tensor
from .nn_composites import temporaries
from .registry import Cost, TensorMeta, arguments_binder, family_samples, get, nbytes, op_impl, register
from .samples import Samples, by_name, operand, sample


def _check_mask(mask, name: str, expected: tuple, alternatives: str) -> None:
    if mask is None:
        return
    if not (mask.dtype.is_floating_point or mask.dtype.kind == "bool"):
        raise AssertionError(f"only bool and floating types of {name} are supported, got {mask.dtype.name}")
    if tuple(mask.shape) not in expected:
        raise RuntimeError(f"The shape of {name} is {list(mask.shape)}, but should be {alternatives}.")


def _geometry(query, key, value, embed_dim_to_check, num_heads, key_padding_mask, attn_mask):
    """(batched, target length, batch, embed dim, source length) after torch's shape checks."""
    if len(query.shape) not in (2, 3):
        raise AssertionError(f"query should be unbatched 2D or batched 3D tensor but received {len(query.shape)}-D "
                             "query tensor")
    batched = len(query.shape) == 3
    if len(key.shape) != len(query.shape) or len(value.shape) != len(query.shape):
        raise AssertionError(f"For {'batched' if batched else 'unbatched'} {len(query.shape)}-D `query`, expected "
                             f"`key` and `value` to be {len(query.shape)}-D but found {len(key.shape)}-D and "
                             f"{len(value.shape)}-D tensors respectively")
    tgt_len, bsz, embed = (query.shape if batched else (query.shape[0], 1, query.shape[1]))
    src_len = key.shape[0]
    if embed != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed}")
    if num_heads <= 0 or embed % num_heads:
        raise AssertionError(f"embed_dim {embed} not divisible by num_heads {num_heads}")
    if tuple(key.shape[:-1]) != tuple(value.shape[:-1]):
        raise AssertionError(f"key's sequence and batch dims {list(key.shape[:-1])} do not match value's "
                             f"{list(value.shape[:-1])}")
    if batched and key.shape[1] != bsz:
        raise AssertionError(f"key's batch size {key.shape[1]} does not match query's {bsz}")
    _check_mask(key_padding_mask, "key_padding_mask", ((bsz, src_len),) if batched else ((src_len,),),
                f"{[bsz, src_len] if batched else [src_len]}")
    _check_mask(attn_mask, "attn_mask", ((tgt_len, src_len), (bsz * num_heads, tgt_len, src_len)),
                f"{[tgt_len, src_len]} or {[bsz * num_heads, tgt_len, src_len]}")
    return batched, tgt_len, bsz, embed, src_len


def _additive(mask, dtype):
    """A mask as torch's canonical float form: a bool one -inf where True, a float one as given."""
    if mask is None or mask.dtype.is_floating_point:
        return mask
    return op_impl("where")(mask, float("-inf"), 0.0).to(dtype)


def _key_count(a, src_len: int) -> int:
    """The keys attended: the source's (or ``static_k``'s), plus bias_k's and the zero attention's."""
    keys = a.static_k.shape[1] if a.static_k is not None else src_len + (a.bias_k is not None)
    return keys + bool(a.add_zero_attn)


def _mha_meta(a):
    batched, tgt_len, bsz, embed, src_len = _geometry(a.query, a.key, a.value, a.embed_dim_to_check,
                                                      a.num_heads, a.key_padding_mask, a.attn_mask)
    out = TensorMeta(tuple(a.query.shape), a.query.dtype)
    if not a.need_weights:
        return out, None
    weights = (bsz,) + (() if a.average_attn_weights else (a.num_heads,)) + (tgt_len, _key_count(a, src_len))
    return out, TensorMeta(weights if batched else weights[1:], a.query.dtype)


def _mha_cost(a):
    query = a.query
    batched, tgt_len, bsz, embed, src_len = _geometry(query, a.key, a.value, a.embed_dim_to_check,
                                                      a.num_heads, a.key_padding_mask, a.attn_mask)
    keys = _key_count(a, src_len)
    projections = 2 * embed * embed * (2 * tgt_len + 2 * keys) * bsz
    attention = 4 * bsz * tgt_len * keys * embed
    scores = (bsz * a.num_heads, tgt_len, keys)
    return Cost(flops=projections + attention, bytes_read=nbytes(query) + nbytes(a.key) + nbytes(a.value)
                + 4 * embed * embed * query.dtype.itemsize,
                bytes_written=sum(nbytes(m) for m in _mha_meta(a) if m is not None),
                workspace=temporaries(6, (keys * bsz, embed), query.dtype) + temporaries(3, scores, query.dtype))


def _multi_head_attention_forward(query: Tensor, key: Tensor, value: Tensor, embed_dim_to_check: int, num_heads: int,
                                 in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn: bool, dropout_p: float,
                                 out_proj_weight: Tensor, out_proj_bias, training: bool = True,
                                 key_padding_mask=None, need_weights: bool = True, attn_mask=None,
                                 use_separate_proj_weight: bool = False, q_proj_weight=None, k_proj_weight=None,
                                 v_proj_weight=None, static_k=None, static_v=None, average_attn_weights: bool = True,
                                 is_causal: bool = False):
    """(attn_output, attn_output_weights or None) as torch's: query (L, N, E) or unbatched (L, E), key and
    value (S, N, E) or (S, E); the weights (averaged over the heads unless ``average_attn_weights`` is
    False) are returned where ``need_weights``."""
    batched, tgt_len, bsz, embed, _ = _geometry(query, key, value, embed_dim_to_check, num_heads,
                                                key_padding_mask, attn_mask)
    if training and dropout_p > 0:
        raise NotImplementedError(f"multi_head_attention_forward: dropout_p={dropout_p} with training=True is not "
                                  "supported (attention here is inference only); pass training=False or dropout_p=0")
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer module "
                           "method `generate_square_subsequent_mask` to create this mask.")
    if (bias_k is None) != (bias_v is None):
        raise AssertionError(f"bias_{'k' if bias_v is None else 'v'} is set but bias_{'v' if bias_v is None else 'k'} "
                             "is None")
    if bias_k is not None and (static_k is not None or static_v is not None):
        raise AssertionError("bias cannot be added to static key or value.")
    linear, cat, pad = op_impl("linear"), op_impl("cat"), op_impl("pad")
    head_dim = embed // num_heads
    heads = bsz * num_heads
    dtype = query.dtype
    with scratch_scope():
        if not batched:
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        padding = _additive(key_padding_mask, dtype)
        mask = None if is_causal and padding is None and not need_weights else _additive(attn_mask, dtype)
        causal = is_causal and mask is None
        if use_separate_proj_weight:
            if q_proj_weight is None or k_proj_weight is None or v_proj_weight is None:
                raise AssertionError("use_separate_proj_weight is True but q_proj_weight, k_proj_weight or "
                                     "v_proj_weight is None")
            weights = (q_proj_weight, k_proj_weight, v_proj_weight)
        else:
            if in_proj_weight is None:
                raise AssertionError("use_separate_proj_weight is False but in_proj_weight is None")
            weights = in_proj_weight.chunk(3)
        biases = in_proj_bias.chunk(3) if in_proj_bias is not None else (None, None, None)
        q = linear(query, weights[0], biases[0])
        k = linear(key, weights[1], biases[1])
        v = linear(value, weights[2], biases[2])
        if mask is not None and mask.ndim == 2:
            mask = mask.unsqueeze(0)
        if bias_k is not None:
            k = cat([k, bias_k.reshape(1, 1, -1).expand(1, bsz, embed)])
            v = cat([v, bias_v.reshape(1, 1, -1).expand(1, bsz, embed)])
            mask = pad(mask, (0, 1)) if mask is not None else None
            padding = pad(padding, (0, 1)) if padding is not None else None
        q = q.reshape(tgt_len, heads, head_dim).transpose(0, 1)
        k = static_k if static_k is not None else k.reshape(k.shape[0], heads, head_dim).transpose(0, 1)
        v = static_v if static_v is not None else v.reshape(v.shape[0], heads, head_dim).transpose(0, 1)
        if add_zero_attn:
            zeros = op_impl("zeros")((heads, 1, head_dim), dtype=k.dtype, device=k.device)
            k, v = cat([k, zeros], 1), cat([v, zeros], 1)
            mask = pad(mask, (0, 1)) if mask is not None else None
            padding = pad(padding, (0, 1)) if padding is not None else None
        src_len = k.shape[1]
        if padding is not None:
            padding = padding.reshape(bsz, 1, 1, src_len).expand(bsz, num_heads, 1, src_len).reshape(heads, 1, src_len)
            mask = padding if mask is None else mask + padding
        if need_weights:
            scaled = q * math.sqrt(1.0 / head_dim)
            keys_t = k.transpose(-2, -1)
            scores = (op_impl("baddbmm")(mask.expand(heads, tgt_len, src_len), scaled, keys_t) if mask is not None
                      else scaled.matmul(keys_t))
            probabilities = scores.softmax(-1)
            attended = probabilities.matmul(v)
        else:
            if mask is not None:
                mask = mask.unsqueeze(0) if mask.shape[0] == 1 else mask.reshape(bsz, num_heads, -1, src_len)
            attended = op_impl("scaled_dot_product_attention")(
                q.reshape(bsz, num_heads, tgt_len, head_dim), k.reshape(bsz, num_heads, src_len, head_dim),
                v.reshape(bsz, num_heads, src_len, head_dim), mask, 0.0, causal)
            attended = attended.permute(2, 0, 1, 3)
        merged = (attended.transpose(0, 1) if need_weights else attended).reshape(tgt_len * bsz, embed)
    out = linear(merged, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, -1)
    if not batched:
        out = out.squeeze(1)
    if not need_weights:
        return out, None
    per_head = probabilities.reshape(bsz, num_heads, tgt_len, src_len)
    averaged = per_head.mean(1) if average_attn_weights else per_head.clone()
    return out, averaged if batched else averaged.squeeze(0)


def _mha_key(facts, *args, **kwargs):
    """The launch keys of the four projections (``linear``) and of the attention: its explicit products
    where the weights are returned, else ``scaled_dot_product_attention``."""
    a = _bind_arguments(*args, **kwargs)
    query = a.query
    batched, tgt_len, bsz, embed, src_len = _geometry(query, a.key, a.value, a.embed_dim_to_check,
                                                      a.num_heads, a.key_padding_mask, a.attn_mask)
    dtype, heads, head_dim = query.dtype, a.num_heads, embed // a.num_heads
    keys = _key_count(a, src_len)
    bias = None if a.in_proj_bias is None else Tensor._meta((embed,), a.in_proj_bias.dtype)
    out_bias = None if a.out_proj_bias is None else Tensor._meta((embed,), a.out_proj_bias.dtype)
    weight = Tensor._meta((embed, embed), dtype)
    linear_key = get("linear").key
    found = [key for length in (tgt_len, src_len, src_len)
             for key in linear_key(facts, Tensor._meta((length, bsz, embed), dtype), weight, bias)]
    found += linear_key(facts, Tensor._meta((tgt_len * bsz, embed), dtype), weight, out_bias)
    if a.need_weights:
        scores = (Tensor._meta((bsz * heads, tgt_len, head_dim), dtype), Tensor._meta((bsz * heads, head_dim, keys),
                                                                                     dtype))
        masked = a.attn_mask is not None or a.key_padding_mask is not None
        found += (get("baddbmm").key(facts, Tensor._meta((bsz * heads, tgt_len, keys), dtype), *scores) if masked
                  else get("matmul").key(facts, *scores))
        found += get("matmul").key(facts, Tensor._meta((bsz * heads, tgt_len, keys), dtype),
                                   Tensor._meta((bsz * heads, keys, head_dim), dtype))
    else:
        side = Tensor._meta((bsz, heads, keys, head_dim), dtype)
        masked = a.attn_mask is not None or a.key_padding_mask is not None
        mask = Tensor._meta((bsz, heads, tgt_len, keys), dtype) if masked else None
        queries = Tensor._meta((bsz, heads, tgt_len, head_dim), dtype)
        found += get("scaled_dot_product_attention").key(facts, queries, side, side, mask, 0.0,
                                                          a.is_causal and not masked)
    return found


# the key rule binds its arguments as the registry binds the meta and cost rules' (``bound=True``)
_bind_arguments = arguments_binder("multi_head_attention_forward", _multi_head_attention_forward)
multi_head_attention_forward = register(
    "multi_head_attention_forward", family="attention", aten=["nbx::multi_head_attention_forward"], meta=_mha_meta,
    cost=_mha_cost, bound=True, api=(), key=_mha_key, functional=True)(_multi_head_attention_forward)


# ---- samples ---------------------------------------------------------------------------------------

def _mha_sample(*, need_weights=True, average_attn_weights=True, mask=None):
    """Two heads over 4 dims: queries (3, 1, 4), keys and values (2, 1, 4), packed projections with biases."""
    return sample(operand(3, 1, 4), operand(2, 1, 4), operand(2, 1, 4), 4, 2, operand(12, 4), operand(12), None, None,
                  False, 0.0, operand(4, 4), operand(4), False, need_weights=need_weights,
                  average_attn_weights=average_attn_weights, attn_mask=mask)


family_samples("attention", by_name({"multi_head_attention_forward": Samples((
    _mha_sample(), _mha_sample(average_attn_weights=False), _mha_sample(mask=operand(3, 2, dtype="bool", values="edge"))))}))
