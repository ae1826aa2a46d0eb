"""Quantized decoders: reading a quantized checkpoint's tensors as the config's ``quantization_config``
describes them, quantizing a float checkpoint's linear layers on load, and writing a quantized checkpoint.

Read: ``gptq`` (4 bits, ``checkpoint_format`` gptq or gptq_v2, act-order through ``g_idx``), ``awq`` (4 bits,
GEMM packing, zero points), ``fp8`` (e4m3 weights with ``weight_scale_inv`` per 128 x 128 block; dynamic
activations, rounded per 1 x 128 block where ``fp8_activations`` asks), ``fbgemm_fp8`` (e4m3 with a per-channel
``weight_scale``; activations quantized per row at run time, their scales clamped at ``activation_scale_ub``,
which ``fp8_activations_of`` follows where the device can), ``compressed-tensors`` (``float-quantized`` e4m3
weights with ``weight_scale`` per tensor, channel or 128 x 128 block, and activations none or dynamic: per
token, or per 128-input group against block weights, or static: an ``input_scale`` a layer; weight-only unless
``fp8_activations`` is asked for) and ``nbx`` (what ``write_quantized`` writes for int8: int8 ``weight`` and a
per-channel ``weight_scale``).
A mixture of experts' experts and shared expert are quantized like the other projections (``QUANTIZABLE``;
routers stay float), and the model stacks the experts (``quant.stack_experts``). Any other method is refused by
name. A quantized layer's tensors are checked against each other (shapes,
dtypes, group indices) before anything reads them.

Written: int4 as AWQ (GEMM packing), int8 as ``nbx``, fp8 as ``fbgemm_fp8``: checkpoints other readers of
those formats also load (but ``nbx``)."""
from __future__ import annotations

import json
import os
import re
import shutil

import numpy as np

from .. import shape as S
from ..io.safetensors import save_file
from ..nn import functional as F
from ..ops.creation import tensor
from ..ops.matmul_gemv import GEMV_MAX_ROWS
from ..ops.quant import fp8_matrix_units, quantized_linear, takes_fp8_activations
from ..quant import (AWQ_ORDER, FORMATS, QuantizationError, QuantizedWeight, pack_int4_columns, quantize_fp8,
                     quantize_int4, quantize_int8)
from . import checkpoint
from .checkpoint import CheckpointError

__all__ = ["linear", "quantization_of", "load_weights", "fp8_activations_of", "write_quantized", "QUANTIZABLE"]

READ_METHODS = ("gptq", "awq", "fp8", "fbgemm_fp8", "compressed-tensors", "nbx")
# the decoder's linear layers, the weights quantized on load: attention and MLP projections, and a mixture of
# experts' experts (Mixtral's w1, w3 and w2) and shared expert (embeddings, norms, the LM head, routers and the
# shared expert's gate stay float); under a multimodal checkpoint's text-decoder prefix too (its vision tower
# stays float)
QUANTIZABLE = re.compile(rf"(?:{'|'.join(map(re.escape, checkpoint.TEXT_PREFIXES))})"
                         r"model\.layers\.\d+\.(self_attn\.(q|k|v|o|qkv)_proj|mlp\.(gate|up|down|gate_up)_proj"
                         r"|(mlp|block_sparse_moe)\.experts\.\d+\.(gate_proj|up_proj|down_proj|w1|w2|w3)"
                         r"|mlp\.shared_expert\.(gate|up|down)_proj)\.weight")
DEFAULT_GROUP_SIZE = 128
# fbgemm_fp8's bound on activation scales where its config gives none (transformers' FbgemmFp8Config default)
DEFAULT_ACTIVATION_SCALE_UB = 1200.0
# methods whose float8 rows are on by default (where the device can): fbgemm_fp8's per-row dynamic activations.
# ``fp8`` (1 x 128 blocks against 128 x 128 weight blocks) and compressed-tensors' dynamic schemes keep the
# weight-only products unless ``fp8_activations`` asks for float8 rows
DYNAMIC_ROW_ACTIVATIONS = ("fbgemm_fp8",)


def linear(x, weight, bias=None, fp8_activations: bool = False):
    """``x @ weight.T + bias`` for a float or a quantized weight. ``fp8_activations``: more rows than a GEMV
    takes are rounded to e4m3 (a scale each) and multiplied on the float8 matrix units; fewer keep the
    weight-only product, which streams the weight once either way."""
    if isinstance(weight, QuantizedWeight):
        rows = S.numel(x.shape[:-1])
        return quantized_linear(x, weight, bias, fp8_activations and rows > GEMV_MAX_ROWS)
    return F.linear(x, weight, bias)


def fp8_activations_of(spec: dict | None, requested, weights: dict, facts: dict, directory: str) -> bool:
    """Whether the model's prefill-sized products take float8 rows (``linear``'s ``fp8_activations``): as
    ``requested`` (True or False), or when None, where the checkpoint's method quantizes activations per row
    at run time (``DYNAMIC_ROW_ACTIVATIONS``), the device (of ``facts``) has float8 matrix units and every
    quantized weight is fp8. Requested where one of those fails, it is refused by name."""
    if requested is not None and type(requested) is not bool:
        raise TypeError(f"fp8_activations must be True, False or None (the checkpoint decides), got {requested!r}")
    quantized = {name: w for name, w in weights.items() if isinstance(w, QuantizedWeight)}
    refused = next((name for name, w in quantized.items() if not takes_fp8_activations(w)), None)
    if requested is None:
        return (spec is not None and spec["method"] in DYNAMIC_ROW_ACTIVATIONS and bool(quantized) and refused is None
                and fp8_matrix_units(facts))
    if not requested:
        return False
    if not fp8_matrix_units(facts):
        raise ValueError(f"fp8_activations needs float8 matrix units, which {facts['name']} devices lack")
    if not quantized:
        raise ValueError(f"fp8_activations multiplies float8 rows by fp8 weights; {directory} has float weights "
                         f"(quantize='fp8' rounds them on load)")
    if refused is not None:
        raise ValueError(f"fp8_activations takes fp8 weights (scales per tensor, channel or 128 x 128 block); "
                         f"{refused} is {quantized[refused]!r}")
    return True


def _refuse(directory: str, message: str):
    raise CheckpointError(f"{directory}: quantization_config: {message}")


def quantization_of(config: dict, directory: str) -> dict | None:
    """The checkpoint's ``quantization_config``, checked (None when there is none): {"method", and the
    method's settings as ``_modules`` reads them}."""
    spec = config.get("quantization_config")
    if spec is None:
        return None
    if not isinstance(spec, dict) or not isinstance(spec.get("quant_method"), str):
        _refuse(directory, "expected an object with a quant_method string")
    method = spec["quant_method"]
    if method not in READ_METHODS:
        _refuse(directory, f"quant_method {method!r} is not supported (supported: {', '.join(READ_METHODS)})")
    if method in ("gptq", "awq"):
        if spec.get("bits") != 4:
            _refuse(directory, f"{method} with bits={spec.get('bits')!r} is not supported (4 bits are)")
        group_size = spec.get("group_size", DEFAULT_GROUP_SIZE)
        if type(group_size) is not int or not (group_size == -1 or group_size > 0):
            _refuse(directory, f"group_size must be -1 or a positive integer, got {group_size!r}")
        out = {"method": method, "group_size": group_size}
        if method == "gptq":
            form = spec.get("checkpoint_format", "gptq")
            if form not in ("gptq", "gptq_v2"):
                _refuse(directory, f"gptq checkpoint_format {form!r} is not supported (gptq and gptq_v2 are)")
            out["zero_offset"] = 1 if form == "gptq" else 0
        else:
            version = str(spec.get("version", "gemm")).lower()
            if version != "gemm":
                _refuse(directory, f"awq version {version!r} is not supported (gemm is)")
            if spec.get("zero_point", True) is not True:
                _refuse(directory, "awq without zero points is not supported")
        return out
    if method == "fp8":
        if spec.get("activation_scheme", "dynamic") != "dynamic":
            _refuse(directory, f"fp8 activation_scheme {spec.get('activation_scheme')!r} is not supported (dynamic "
                               f"is: weights alone are quantized)")
        if list(spec.get("weight_block_size") or []) != [128, 128]:
            _refuse(directory, f"fp8 weight_block_size {spec.get('weight_block_size')!r} is not supported ([128, 128] "
                               f"is)")
    if method == "fbgemm_fp8":
        bound = spec.get("activation_scale_ub", DEFAULT_ACTIVATION_SCALE_UB)
        if isinstance(bound, bool) or not isinstance(bound, (int, float)) or not 0 < bound < float("inf"):
            _refuse(directory, f"fbgemm_fp8 activation_scale_ub must be a positive finite number, got {bound!r}")
        return {"method": method, "activation_scale_ub": float(bound)}
    if method == "compressed-tensors":
        return _compressed_tensors(spec, directory)
    if method == "nbx" and spec.get("format") != "int8":
        _refuse(directory, f"nbx format {spec.get('format')!r} is not supported (int8 is)")
    return {"method": method}


# compressed-tensors' weight strategies read (e4m3 values times ``weight_scale``), and the dynamic activation
# strategy each pairs with for ``fp8_activations`` (the rows' scales as ``quantized_linear`` forms them); static
# activations are one scale per layer (strategy tensor, its ``input_scale``) against any of them
_COMPRESSED_WEIGHTS = ("tensor", "channel", "block")
_COMPRESSED_ACTIVATIONS = {"tensor": "token", "channel": "token", "block": "group"}


def _compressed_tensors(spec: dict, directory: str) -> dict:
    """A compressed-tensors ``quantization_config`` of float8 weights, with no input activations (weight-only),
    dynamic ones that pair with the weights' scales (``_COMPRESSED_ACTIVATIONS``) or static ones per tensor:
    {"method", "weights": the weights' scale strategy, "static": whether each layer has an ``input_scale``}.
    Other schemes (integer or 4-bit weights, float8 key/value caches) are refused by name."""
    form = spec.get("format")
    if form != "float-quantized":
        _refuse(directory, f"compressed-tensors format {form!r} is not supported (float-quantized is: float8 weights)")
    if spec.get("kv_cache_scheme") is not None:
        _refuse(directory, "compressed-tensors kv_cache_scheme (float8 key and value caches) is not supported")
    groups = spec.get("config_groups")
    if not isinstance(groups, dict) or not groups or not all(isinstance(g, dict) for g in groups.values()):
        _refuse(directory, "compressed-tensors config_groups: expected an object of one or more schemes")
    schemes = {json.dumps([g.get("weights"), g.get("input_activations"), g.get("output_activations")],
                          sort_keys=True) for g in groups.values()}
    if len(schemes) != 1:
        _refuse(directory, "compressed-tensors config_groups with different schemes are not supported (one scheme "
                           "for every quantized layer is)")
    group = next(iter(groups.values()))
    if group.get("output_activations") is not None:
        _refuse(directory, "compressed-tensors output_activations are not supported")
    weights = group.get("weights")
    strategy = weights.get("strategy") if isinstance(weights, dict) else None
    if (not isinstance(weights, dict) or weights.get("num_bits") != 8 or weights.get("type") != "float"
            or weights.get("symmetric", True) is not True or weights.get("dynamic", False) is not False
            or strategy not in _COMPRESSED_WEIGHTS
            or strategy == "block" and list(weights.get("block_structure") or []) != [128, 128]):
        _refuse(directory, f"compressed-tensors weights {weights!r} are not supported (8-bit float, symmetric, "
                           f"static, per tensor, channel or [128, 128] block are)")
    activations = group.get("input_activations")
    if activations is None:
        return {"method": "compressed-tensors", "weights": strategy, "static": False}
    if (not isinstance(activations, dict) or activations.get("num_bits") != 8 or activations.get("type") != "float"
            or activations.get("symmetric", True) is not True):
        _refuse(directory, f"compressed-tensors input_activations {activations!r} are not supported (8-bit float, "
                           f"symmetric are)")
    if activations.get("dynamic") is False:
        if activations.get("strategy") != "tensor":
            _refuse(directory, f"compressed-tensors static input_activations with strategy "
                               f"{activations.get('strategy')!r} are not supported (tensor is: one input_scale a "
                               f"layer)")
        return {"method": "compressed-tensors", "weights": strategy, "static": True}
    if activations.get("dynamic") is not True:
        _refuse(directory, f"compressed-tensors input_activations dynamic {activations.get('dynamic')!r} is not "
                           f"supported (true or false is)")
    wanted = _COMPRESSED_ACTIVATIONS[strategy]
    if activations.get("strategy") != wanted or wanted == "group" and activations.get("group_size") != 128:
        _refuse(directory, f"compressed-tensors dynamic input_activations with strategy "
                           f"{activations.get('strategy')!r} against weights per {strategy} are not supported "
                           f"({wanted}{' of 128 inputs' if wanted == 'group' else ''} is)")
    return {"method": "compressed-tensors", "weights": strategy, "static": False}


# the tensors of one quantized linear module, by method: (suffixes, optional suffixes)
_PARTS = {"gptq": (("qweight", "qzeros", "scales"), ("g_idx",)), "awq": (("qweight", "qzeros", "scales"), ()),
          "fp8": (("weight", "weight_scale_inv"), ()), "fbgemm_fp8": (("weight", "weight_scale"), ()),
          "compressed-tensors": (("weight", "weight_scale"), ("input_scale",)), "nbx": (("weight", "weight_scale"), ())}


def _module_parts(names, method: str) -> dict:
    """module prefix -> {suffix: tensor name} for the quantized modules among ``names``."""
    required, optional = _PARTS[method]
    marker = required[-1] if method in ("gptq", "awq") else required[1]
    modules = {}
    for name in names:
        if name.endswith("." + marker):
            prefix = name[:-len(marker) - 1]
            modules[prefix] = {s: f"{prefix}.{s}" for s in (*required, *optional) if f"{prefix}.{s}" in names}
            missing = [s for s in required if s not in modules[prefix]]
            if missing:
                raise CheckpointError(f"quantized module {prefix} lacks {', '.join(missing)}")
    return modules


def _quantized(method: str, spec: dict, parts: dict, device, dtype) -> QuantizedWeight:
    host = {suffix: tensor.numpy() for suffix, tensor in parts.items()}
    if method == "gptq":
        return QuantizedWeight.gptq(host["qweight"], host["qzeros"], host["scales"], host.get("g_idx"),
                                    group_size=spec["group_size"], zero_offset=spec["zero_offset"], device=device,
                                    dtype=dtype)
    if method == "awq":
        return QuantizedWeight.awq(host["qweight"], host["qzeros"], host["scales"], group_size=spec["group_size"],
                                   device=device, dtype=dtype)
    if method == "fp8":
        return QuantizedWeight.fp8(host["weight"], host["weight_scale_inv"], device=device, dtype=dtype)
    if method == "fbgemm_fp8":
        return QuantizedWeight.fp8(host["weight"], host["weight_scale"], device=device, dtype=dtype,
                                   activation_scale_ub=spec["activation_scale_ub"])
    if method == "compressed-tensors":
        if spec["static"] != ("input_scale" in host):
            raise QuantizationError("input_scale: static input_activations give every quantized layer one; a layer "
                                    "has none" if spec["static"] else "input_scale: a layer has one, but the "
                                    "quantization_config's input_activations are not static")
        return QuantizedWeight.fp8(host["weight"], host["weight_scale"], activation_scale=host.get("input_scale"),
                                   device=device, dtype=dtype)
    return QuantizedWeight.int8(host["weight"], host["weight_scale"], device=device, dtype=dtype)


def requested_rounding(directory: str, spec: dict | None, quantize) -> tuple[str | None, int]:
    """(format, group size) of ``quantize`` as ``load_weights`` takes it (a format name, or {"format": ...,
    "group_size": ...}), checked against the checkpoint's own quantization ``spec``."""
    group_size = DEFAULT_GROUP_SIZE
    if isinstance(quantize, dict):
        quantize, group_size = quantize.get("format"), quantize.get("group_size", DEFAULT_GROUP_SIZE)
    if quantize is not None and quantize not in FORMATS:
        raise ValueError(f"quantize must be one of {', '.join(FORMATS)}, got {quantize!r}")
    if spec is not None and quantize is not None:
        raise CheckpointError(f"{directory}: the checkpoint is already quantized ({spec['method']}); quantize= "
                              f"applies to float checkpoints")
    return quantize, group_size


def load_weights(directory: str, device, dtype, wanted, quantize=None, names: checkpoint.WeightNames | None = None,
                 layout=None) -> dict:
    """The checkpoint's tensors named by ``wanted``: float ones in ``dtype`` on ``device``, quantized linear
    layers as ``QuantizedWeight`` under their ``.weight`` names. ``quantize`` (int4, int8 or fp8, or
    {"format": ..., "group_size": ...}) rounds a float checkpoint's linear layers to nearest (int4 in groups
    of ``group_size`` inputs, 128 unless given; int8 and fp8 per channel). ``names``, ``layout``: as
    ``checkpoint.load_weights`` takes them (the weights read under Llama's names, rounded after reordering)."""
    spec = quantization_of(checkpoint.read_json(directory, checkpoint.CONFIG_FILE), directory)
    quantize, group_size = requested_rounding(directory, spec, quantize)
    if spec is None and quantize is None:
        raw = checkpoint.load_weights(directory, device, wanted, names, layout)
        return {name: w if w.dtype is dtype else w.to(dtype) for name, w in raw.items()}
    if spec is not None and names is not None and names.reorders:
        raise CheckpointError(f"{directory}: a quantized checkpoint of this family is not supported (its fused or "
                              f"transposed weights are reordered as they are read, which packed ones cannot be); "
                              f"quantize its float checkpoint on load instead")
    # quantized tensors are repacked (or rounded) on the host, then uploaded
    raw = checkpoint.load_weights(directory, "cpu", wanted, names, layout)
    weights = {}
    try:
        if spec is not None:
            for prefix, parts in _module_parts(raw, spec["method"]).items():
                weights[prefix + ".weight"] = _quantized(spec["method"], spec, {s: raw.pop(n) for s, n in parts.items()},
                                                         device, dtype)
        else:
            for name in [n for n in raw if QUANTIZABLE.fullmatch(n)]:
                weights[name] = QuantizedWeight.quantize(raw.pop(name).to(dtype).numpy(), quantize,
                                                         group_size=group_size, device=device, dtype=dtype.name)
    except QuantizationError as error:
        raise CheckpointError(f"{directory}: {error}") from None
    for name, w in raw.items():
        if w.dtype.storage_only or w.dtype.kind != "float":
            raise CheckpointError(f"{directory}: tensor {name} ({w.dtype.name}) belongs to no quantized module")
        weights[name] = w.to(device).to(dtype)
    return weights


def write_quantized(directory, out, format: str, group_size: int = DEFAULT_GROUP_SIZE) -> dict:
    """A copy of the float checkpoint ``directory`` in ``out`` with its decoder's linear layers rounded to
    nearest: int4 (AWQ's GEMM packing, groups of ``group_size``), int8 (``nbx``) or fp8 (``fbgemm_fp8``, per
    channel). Other files are copied as they are. Returns the ``quantization_config`` written."""
    directory, out = os.fspath(directory), os.fspath(out)
    if format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {format!r}")
    config = checkpoint.read_json(directory, checkpoint.CONFIG_FILE)
    if quantization_of(config, directory) is not None:
        raise CheckpointError(f"{directory}: the checkpoint is already quantized")
    if os.path.abspath(out) == os.path.abspath(directory):
        raise ValueError("the quantized checkpoint must go to another directory")
    architectures = config.get("architectures")
    names = next((checkpoint.WEIGHT_NAMES[a] for a in architectures if a in checkpoint.WEIGHT_NAMES), None) \
        if isinstance(architectures, list) else None
    if names is not None and names.reorders:
        raise CheckpointError(f"{directory}: {architectures[0]} checkpoints cannot be written quantized (their fused "
                              f"or transposed weights are reordered as they are read); quantize them on load instead")
    raw = checkpoint.load_weights(directory, "cpu", lambda name: True)
    tensors = {}
    for name, w in raw.items():
        if not QUANTIZABLE.fullmatch(name if names is None else names.rename(name) or ""):
            tensors[name] = w
            continue
        prefix = name[:-len(".weight")]
        host = w.numpy()
        if format == "int4":
            n = host.shape[0]
            if n % 8:
                raise CheckpointError(f"{name}: AWQ packs 8 outputs a word; {n} outputs do not fill whole words")
            q, scales, zeros = quantize_int4(host, group_size, "float16")
            parts = {"qweight": pack_int4_columns(q, AWQ_ORDER), "qzeros": pack_int4_columns(zeros, AWQ_ORDER),
                     "scales": scales}
        elif format == "int8":
            q, scales = quantize_int8(host, "float32")
            parts = {"weight": q, "weight_scale": scales[:, None]}
        else:
            q, scales = quantize_fp8(host, "channel", "float32")
            parts = {"weight": q, "weight_scale": scales[:, None]}
        for suffix, array in parts.items():
            tensors[f"{prefix}.{suffix}"] = tensor(np.ascontiguousarray(array), device="cpu")
    spec = ({"quant_method": "awq", "bits": 4, "group_size": group_size, "zero_point": True, "version": "gemm"}
            if format == "int4" else {"quant_method": "nbx", "format": "int8"} if format == "int8"
            else {"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0})
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(directory):
        source = os.path.join(directory, name)
        if (name.endswith(".safetensors") or name in (checkpoint.INDEX_FILE, checkpoint.CONFIG_FILE)
                or not os.path.isfile(source)):
            continue
        shutil.copyfile(source, os.path.join(out, name))
    save_file(tensors, os.path.join(out, checkpoint.SINGLE_WEIGHTS_FILE))
    with open(os.path.join(out, checkpoint.CONFIG_FILE), "w") as file:
        json.dump({**config, "quantization_config": spec}, file, indent=2)
    return spec

