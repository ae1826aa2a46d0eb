"""Quantized weights: a linear layer's (out_features, in_features) weight held as small integers or float8
values with their scales (and zero points), and the NumPy side of making them: rounding a float weight to
nearest (grouped int4, int8 per channel, float8 e4m3 per tensor, channel or 128 x 128 block), and packing
and unpacking 4-bit values as GPTQ and AWQ checkpoints store them.

A ``QuantizedWeight`` keeps one layout per format, the one ``kernels/quant.py`` reads (``nbx.quantized_linear``
multiplies by it), whatever checkpoint it came from:

- ``int4``: ``qweight`` (ceil(K / 8), N) int32, value k of column n in nibble k % 8 (low first) of word
  (k // 8, n) (GPTQ's packing); ``zeros`` (G, N) uint8 true zero points; ``scales`` (G, N); ``g_idx`` (K,)
  int32 group of each input when the groups are not consecutive runs of ``group_size`` (GPTQ's act-order).
  w[n, k] = (q[k, n] - zeros[g, n]) * scales[g, n], g = g_idx[k] or k // group_size.
- ``int8``: ``qweight`` (N, K) int8, ``scales`` (1, N): w[n, k] = q[n, k] * scales[0, n] (symmetric, per
  output channel; ``group_size`` is K).
- ``fp8``: ``qweight`` (N, K) float8_e4m3fn, ``scales`` viewed as (groups along K, groups along N):
  (1, 1) per tensor, (1, N) per channel, (ceil(K / 128), ceil(N / 128)) per 128 x 128 block;
  w[n, k] = q[n, k] * scales[k // group_size, n // scale_block_n].

A stack of E experts' weights (``stack_experts``) is one ``QuantizedWeight`` of shape (E, N, K) whose parts
have a leading expert dim: (E, ceil(K / 8), N) words, (E, G, N) scales and zero points and (E, K) ``g_idx``
for int4; (E, N, K) values and (E, 1, N), or (E, ceil(K / 128), ceil(N / 128)) block scales, for int8 and fp8.
``w[e]`` is expert e's (N, K) weight.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from .dtypes import get_dtype
from .ops.copy import cat
from .ops.creation import tensor
from .ops.plans import layout_key

__all__ = ["QuantizationError", "QuantizedWeight", "FORMATS", "quantize", "quantize_int4", "quantize_int8",
           "quantize_fp8", "pack_int4_rows", "unpack_int4_rows", "pack_int4_columns", "unpack_int4_columns",
           "AWQ_ORDER", "stack_experts"]

FORMATS = ("int4", "int8", "fp8")
FP8_MODES = ("tensor", "channel", "block")
FP8_BLOCK = 128
FP8_MAX = float(ml_dtypes.finfo(ml_dtypes.float8_e4m3fn).max)  # 448
# nibble i of an AWQ word holds column AWQ_ORDER[i] of its eight
AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)
_SEQUENTIAL = tuple(range(8))
_SCALE_DTYPES = ("float16", "bfloat16", "float32")


class QuantizationError(ValueError):
    """Quantized tensors that do not fit together (shapes, dtypes, values), or a format not supported."""


# ---- packing -----------------------------------------------------------------------------------------
def _check_nibbles(q: np.ndarray, what: str) -> np.ndarray:
    q = np.asarray(q)
    if q.dtype.kind not in "iu":
        raise QuantizationError(f"{what}: expected integer 4-bit values, got {q.dtype}")
    if q.size and (q.min() < 0 or q.max() > 15):
        raise QuantizationError(f"{what}: 4-bit values must lie in 0..15, found {q.min()}..{q.max()}")
    return q.astype(np.uint32)


def _words(nibbles: np.ndarray) -> np.ndarray:
    """(..., 8) nibbles as int32 words, nibble i at bits 4i..4i+3."""
    shifts = np.arange(8, dtype=np.uint32) * 4
    return np.bitwise_or.reduce(nibbles << shifts, axis=-1).view(np.int32)


def pack_int4_rows(q) -> np.ndarray:
    """(K, N) values 0..15 as (ceil(K / 8), N) int32: value k in nibble k % 8 of row k // 8 (GPTQ's
    qweight); rows past K are zero."""
    q = _check_nibbles(q, "pack_int4_rows")
    if q.ndim != 2:
        raise QuantizationError(f"pack_int4_rows: expected a 2-D array, got shape {q.shape}")
    k, n = q.shape
    padded = np.zeros((-(-k // 8) * 8, n), np.uint32)
    padded[:k] = q
    return np.ascontiguousarray(_words(padded.reshape(-1, 8, n).transpose(0, 2, 1)))


def unpack_int4_rows(packed, rows: int) -> np.ndarray:
    """The (rows, N) uint8 values ``pack_int4_rows`` packed."""
    packed = np.asarray(packed)
    if packed.dtype != np.int32 or packed.ndim != 2 or packed.shape[0] != -(-rows // 8):
        raise QuantizationError(f"unpack_int4_rows: expected ({-(-rows // 8)}, N) int32 words for {rows} rows, "
                                f"got {packed.shape} {packed.dtype}")
    words = packed.view(np.uint32)[:, None, :] >> (np.arange(8, dtype=np.uint32) * 4)[None, :, None]
    return (words & 0xF).astype(np.uint8).reshape(-1, packed.shape[1])[:rows]


def pack_int4_columns(q, order=_SEQUENTIAL) -> np.ndarray:
    """(R, N) values 0..15 as (R, ceil(N / 8)) int32: nibble i of word c holds column 8c + order[i]
    (GPTQ's qzeros: sequential; AWQ's qweight and qzeros: ``AWQ_ORDER``); columns past N are zero."""
    q = _check_nibbles(q, "pack_int4_columns")
    if q.ndim != 2:
        raise QuantizationError(f"pack_int4_columns: expected a 2-D array, got shape {q.shape}")
    r, n = q.shape
    padded = np.zeros((r, -(-n // 8) * 8), np.uint32)
    padded[:, :n] = q
    grouped = padded.reshape(r, -1, 8)
    return np.ascontiguousarray(_words(grouped[:, :, list(order)]))


def unpack_int4_columns(packed, columns: int, order=_SEQUENTIAL) -> np.ndarray:
    """The (R, columns) uint8 values ``pack_int4_columns`` packed with ``order``."""
    packed = np.asarray(packed)
    if packed.dtype != np.int32 or packed.ndim != 2 or packed.shape[1] != -(-columns // 8):
        raise QuantizationError(f"unpack_int4_columns: expected (R, {-(-columns // 8)}) int32 words for {columns} "
                                f"columns, got {packed.shape} {packed.dtype}")
    nibbles = (packed.view(np.uint32)[:, :, None] >> (np.arange(8, dtype=np.uint32) * 4)) & 0xF
    out = np.empty_like(nibbles)
    out[:, :, list(order)] = nibbles
    return out.astype(np.uint8).reshape(packed.shape[0], -1)[:, :columns]


# ---- rounding to nearest -----------------------------------------------------------------------------
def _float_weight(w, what: str) -> np.ndarray:
    w = np.asarray(w)
    if w.ndim != 2 or 0 in w.shape:
        raise QuantizationError(f"{what}: expected a non-empty 2-D (out_features, in_features) weight, got shape "
                                f"{w.shape}")
    if w.dtype.kind != "f" and w.dtype not in (ml_dtypes.bfloat16,):
        raise QuantizationError(f"{what}: expected a float weight, got {w.dtype}")
    w = w.astype(np.float64)
    if not np.isfinite(w).all():
        raise QuantizationError(f"{what}: the weight holds inf or NaN, which no scale represents")
    return w


def _scale_numpy_dtype(dtype: str):
    if dtype not in _SCALE_DTYPES:
        raise QuantizationError(f"scales are kept in {', '.join(_SCALE_DTYPES)}, not {dtype}")
    return ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)


def _rounded_scale(scale: np.ndarray, dtype: str) -> np.ndarray:
    """``scale`` in ``dtype``, never rounded to zero (a tiny range still gets the smallest positive
    normal scale, so that dividing by it stays finite)."""
    np_dtype = _scale_numpy_dtype(dtype)
    tiny = float(ml_dtypes.finfo(np_dtype).tiny)
    return np.maximum(scale, tiny).astype(np_dtype)


def _check_group_size(group_size, k: int) -> int:
    if group_size == -1:
        return k
    if type(group_size) is not int or group_size < 1:
        raise QuantizationError(f"group_size must be a positive integer (or -1: one group), got {group_size!r}")
    return group_size


def quantize_int4(w, group_size: int = 128, scale_dtype: str = "float16"):
    """Asymmetric 4-bit rounding to nearest of the (N, K) weight ``w`` in groups of ``group_size``
    consecutive inputs: (q (K, N) uint8, scales (G, N), zeros (G, N) uint8), G = ceil(K / group_size),
    with w ~ (q - zero) * scale; each group's range (widened to hold 0) maps onto 0..15."""
    w = _float_weight(w, "quantize_int4")
    n, k = w.shape
    group_size = _check_group_size(group_size, k)
    groups = -(-k // group_size)
    padded = np.zeros((n, groups * group_size))
    padded[:, :k] = w
    # a padded input joins its group's range as a zero, which the range holds anyway
    grouped = padded.reshape(n, groups, group_size)
    low = np.minimum(grouped.min(axis=2), 0.0)
    high = np.maximum(grouped.max(axis=2), 0.0)
    scales = _rounded_scale((high - low) / 15.0, scale_dtype)
    exact = scales.astype(np.float64)
    zeros = np.clip(np.round(-low / exact), 0, 15)
    q = np.clip(np.round(grouped / exact[:, :, None]) + zeros[:, :, None], 0, 15)
    q = q.reshape(n, -1)[:, :k]
    return q.T.astype(np.uint8), np.ascontiguousarray(scales.T), zeros.T.astype(np.uint8)


def quantize_int8(w, scale_dtype: str = "float32"):
    """Symmetric int8 rounding to nearest per output channel: (q (N, K) int8, scales (N,)), w ~ q * scale."""
    w = _float_weight(w, "quantize_int8")
    scales = _rounded_scale(np.abs(w).max(axis=1) / 127.0, scale_dtype)
    q = np.clip(np.round(w / scales.astype(np.float64)[:, None]), -127, 127)
    return q.astype(np.int8), scales


def quantize_fp8(w, mode: str = "channel", scale_dtype: str = "float32"):
    """float8 e4m3 values and the scales they multiply by (HF's ``weight_scale_inv``): (q (N, K), scales)
    with scales () per tensor, (N,) per channel or (ceil(N / 128), ceil(K / 128)) per block; each scale
    maps its part's largest magnitude onto e4m3's largest (448)."""
    w = _float_weight(w, "quantize_fp8")
    n, k = w.shape
    if mode == "tensor":
        scales = _rounded_scale(np.abs(w).max() / FP8_MAX, scale_dtype)
        expanded = np.full((n, k), float(scales))
    elif mode == "channel":
        scales = _rounded_scale(np.abs(w).max(axis=1) / FP8_MAX, scale_dtype)
        expanded = np.broadcast_to(scales.astype(np.float64)[:, None], (n, k))
    elif mode == "block":
        nb, kb = -(-n // FP8_BLOCK), -(-k // FP8_BLOCK)
        padded = np.zeros((nb * FP8_BLOCK, kb * FP8_BLOCK))
        padded[:n, :k] = np.abs(w)
        amax = padded.reshape(nb, FP8_BLOCK, kb, FP8_BLOCK).max(axis=(1, 3))
        scales = _rounded_scale(amax / FP8_MAX, scale_dtype)
        expanded = np.repeat(np.repeat(scales.astype(np.float64), FP8_BLOCK, 0), FP8_BLOCK, 1)[:n, :k]
    else:
        raise QuantizationError(f"fp8 scales are per {', '.join(FP8_MODES)}, not {mode!r}")
    q = np.clip(w / expanded, -FP8_MAX, FP8_MAX).astype(ml_dtypes.float8_e4m3fn)
    return q, scales


# ---- the weight --------------------------------------------------------------------------------------
def _host(array, what: str) -> np.ndarray:
    if isinstance(array, np.generic):
        array = np.asarray(array)
    elif hasattr(array, "numpy") and not isinstance(array, np.ndarray):
        array = array.numpy()
    if not isinstance(array, np.ndarray):
        raise QuantizationError(f"{what}: expected an array, got {type(array).__name__}")
    return array


def _positive_finite(value, what: str) -> float | None:
    """``value`` (None, or a positive finite number) as the float32 a kernel takes, as a Python float."""
    if value is None:
        return None
    if isinstance(value, (np.ndarray, np.generic)) and np.size(value) == 1:
        value = float(np.asarray(value, np.float64).reshape(()))
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise QuantizationError(f"{what}: expected a positive finite number, got {value!r}")
    return float(np.float32(value))


def _require(array: np.ndarray, what: str, shape: tuple, dtypes: tuple) -> None:
    if tuple(array.shape) != tuple(shape):
        raise QuantizationError(f"{what}: expected shape {tuple(shape)}, got {tuple(array.shape)}")
    if array.dtype.name not in dtypes:
        raise QuantizationError(f"{what}: expected dtype {' or '.join(dtypes)}, got {array.dtype.name}")


class QuantizedWeight:
    """A quantized (out_features, in_features) weight on a device, in the layout the module docstring
    gives. ``shape`` and ``dtype`` are the logical weight's (what ``dequantize`` gives), ``nbytes`` what
    it occupies. Made by the class methods ``int4``, ``gptq``, ``awq``, ``int8``, ``fp8`` and ``quantize``;
    ``w[a:b]`` is the weight of output rows a..b (a view). How ``quantized_linear`` scales the float8 rows it
    multiplies an fp8 weight by: ``activation_scale``, one fixed scale (a checkpoint's static ``input_scale``),
    else each row's largest magnitude over 448, clamped first at ``activation_scale_ub`` (fbgemm's) unless
    None."""

    __slots__ = ("format", "shape", "dtype", "qweight", "scales", "zeros", "g_idx", "group_size", "scale_block_n",
                 "activation_scale", "activation_scale_ub", "layout_key")

    def __init__(self, format: str, shape, dtype, qweight, scales, zeros, g_idx, group_size: int,
                 scale_block_n: int, activation_scale: float | None = None, activation_scale_ub: float | None = None):
        self.format, self.shape, self.dtype = format, tuple(shape), dtype
        self.qweight, self.scales, self.zeros, self.g_idx = qweight, scales, zeros, g_idx
        self.group_size, self.scale_block_n = group_size, scale_block_n
        self.activation_scale, self.activation_scale_ub = activation_scale, activation_scale_ub
        # what a plan may depend on: the format, sizes, the rows' scaling (kernel arguments) and every part's
        # layout, not the parts' values
        self.layout_key = (format, self.shape, dtype, group_size, scale_block_n, activation_scale,
                           activation_scale_ub, *(layout_key(t) for t in (qweight, scales, zeros, g_idx)))

    # -- construction from host arrays --
    @classmethod
    def int4(cls, q, scales, zeros, g_idx=None, *, group_size: int, device=None, dtype=None) -> "QuantizedWeight":
        """From (K, N) values 0..15, (G, N) scales and zero points 0..15, and optionally the (K,) group
        of each input (act-order; else input k is in group k // group_size)."""
        q = _check_nibbles(_host(q, "int4 values"), "int4 values")
        if q.ndim != 2 or 0 in q.shape:
            raise QuantizationError(f"int4 values: expected a non-empty (in_features, out_features) array, got "
                                    f"shape {q.shape}")
        k, n = q.shape
        return cls._int4_packed(pack_int4_rows(q), k, n, scales, zeros, g_idx, group_size, device, dtype)

    @classmethod
    def _int4_packed(cls, packed, k, n, scales, zeros, g_idx, group_size, device, dtype) -> "QuantizedWeight":
        group_size = _check_group_size(group_size, k)
        scales = _host(scales, "int4 scales")
        zeros = _check_nibbles(_host(zeros, "int4 zero points"), "int4 zero points").astype(np.uint8)
        groups = -(-k // group_size)
        if g_idx is not None:
            g_idx = _host(g_idx, "g_idx")
            _require(g_idx, "g_idx", (k,), ("int32", "int64"))
            groups = scales.shape[0] if scales.ndim == 2 else groups
            if k and (g_idx.min() < 0 or g_idx.max() >= groups):
                raise QuantizationError(f"g_idx: group indices must lie in 0..{groups - 1} (the scales' rows), "
                                        f"found {g_idx.min()}..{g_idx.max()}")
            if np.array_equal(g_idx, np.arange(k) // group_size):
                g_idx = None  # groups in order: the kernel computes them
            else:
                g_idx = g_idx.astype(np.int32)
        _require(scales, "int4 scales", (groups, n), _SCALE_DTYPES)
        _require(zeros, "int4 zero points", (groups, n), ("uint8",))
        parts = [tensor(a, device=device) if a is not None else None for a in (packed, scales, zeros, g_idx)]
        return cls("int4", (n, k), _logical_dtype(dtype, scales), *parts, group_size, 1)

    @classmethod
    def gptq(cls, qweight, qzeros, scales, g_idx=None, *, group_size: int, zero_offset: int = 1, device=None,
             dtype=None) -> "QuantizedWeight":
        """From a GPTQ checkpoint's 4-bit tensors: ``qweight`` (K / 8, N) int32, ``qzeros`` (G, N / 8) int32,
        ``scales`` (G, N), ``g_idx`` (K,). ``zero_offset``: what to add to the stored zero points (1 for
        the original GPTQ format, which stores zero - 1; 0 for ``gptq_v2``)."""
        qweight, qzeros = _host(qweight, "qweight"), _host(qzeros, "qzeros")
        scales = _host(scales, "scales")
        if qweight.ndim != 2 or qweight.dtype != np.int32 or 0 in qweight.shape:
            raise QuantizationError(f"qweight: expected a non-empty (in_features / 8, out_features) int32 array, got "
                                    f"{qweight.shape} {qweight.dtype}")
        k, n = qweight.shape[0] * 8, qweight.shape[1]
        if scales.ndim != 2:
            raise QuantizationError(f"scales: expected (groups, {n}), got shape {scales.shape}")
        _require(qzeros, "qzeros", (scales.shape[0], -(-n // 8)), ("int32",))
        zeros = unpack_int4_columns(qzeros, n).astype(np.int32) + zero_offset
        if zeros.size and zeros.max() > 15:
            raise QuantizationError("qzeros: a stored zero point of 15 plus the format's offset of 1 is past 4 bits")
        return cls._int4_packed(np.ascontiguousarray(qweight), k, n, scales, zeros, g_idx, group_size, device,
                                dtype)

    @classmethod
    def awq(cls, qweight, qzeros, scales, *, group_size: int, device=None, dtype=None) -> "QuantizedWeight":
        """From an AWQ (GEMM) checkpoint's tensors: ``qweight`` (K, N / 8) int32 and ``qzeros`` (G, N / 8) int32
        packed along N in ``AWQ_ORDER``, ``scales`` (G, N)."""
        qweight, qzeros, scales = _host(qweight, "qweight"), _host(qzeros, "qzeros"), _host(scales, "scales")
        if scales.ndim != 2 or 0 in scales.shape:
            raise QuantizationError(f"scales: expected a non-empty (groups, out_features) array, got {scales.shape}")
        n = scales.shape[1]
        if qweight.ndim != 2 or qweight.dtype != np.int32 or qweight.shape[1] != -(-n // 8) or not qweight.shape[0]:
            raise QuantizationError(f"qweight: expected (in_features, {-(-n // 8)}) int32 words for {n} outputs, got "
                                    f"{qweight.shape} {qweight.dtype}")
        _require(qzeros, "qzeros", (scales.shape[0], -(-n // 8)), ("int32",))
        q = unpack_int4_columns(qweight, n, AWQ_ORDER)
        return cls.int4(q, scales, unpack_int4_columns(qzeros, n, AWQ_ORDER), group_size=group_size, device=device,
                        dtype=dtype)

    @classmethod
    def int8(cls, q, scales, *, device=None, dtype=None) -> "QuantizedWeight":
        """From (N, K) int8 values and (N,) or (N, 1) per-channel scales."""
        q, scales = _host(q, "int8 weight"), _host(scales, "int8 scales")
        if q.ndim != 2 or q.dtype != np.int8 or 0 in q.shape:
            raise QuantizationError(f"int8 weight: expected a non-empty (out_features, in_features) int8 array, got "
                                    f"{q.shape} {q.dtype}")
        n, k = q.shape
        if scales.shape not in ((n,), (n, 1)):
            raise QuantizationError(f"int8 scales: expected one per output channel, shape ({n},) or ({n}, 1), got "
                                    f"{scales.shape}")
        _require(scales, "int8 scales", scales.shape, _SCALE_DTYPES)
        return cls("int8", (n, k), _logical_dtype(dtype, scales), tensor(np.ascontiguousarray(q), device=device),
                   tensor(np.ascontiguousarray(scales.reshape(1, n)), device=device), None, None, k, 1)

    @classmethod
    def fp8(cls, q, scales, *, activation_scale: float | None = None, activation_scale_ub: float | None = None,
            device=None, dtype=None) -> "QuantizedWeight":
        """From (N, K) float8_e4m3fn values and the scales they multiply by: one ((), (1,) or (1, 1)), one
        per output channel ((N,) or (N, 1)), or one per 128 x 128 block ((ceil(N / 128), ceil(K / 128))).
        ``activation_scale`` or ``activation_scale_ub`` (not both): positive finite numbers, how float8 rows
        are scaled (the class docstring)."""
        q, scales = _host(q, "fp8 weight"), _host(scales, "fp8 scales")
        if activation_scale is not None and activation_scale_ub is not None:
            raise QuantizationError("activation_scale (fixed) and activation_scale_ub (a bound on dynamic scales) "
                                    "exclude each other")
        activation_scale = _positive_finite(activation_scale, "activation_scale")
        activation_scale_ub = _positive_finite(activation_scale_ub, "activation_scale_ub")
        if q.ndim != 2 or q.dtype != ml_dtypes.float8_e4m3fn or 0 in q.shape:
            raise QuantizationError(f"fp8 weight: expected a non-empty (out_features, in_features) float8_e4m3fn "
                                    f"array, got {q.shape} {q.dtype}")
        n, k = q.shape
        _require(scales, "fp8 scales", scales.shape, _SCALE_DTYPES)
        if scales.size == 1 and scales.ndim <= 2:
            grid, group_size, block_n = scales.reshape(1, 1), k, n
        elif scales.shape in ((n,), (n, 1)):
            grid, group_size, block_n = scales.reshape(1, n), k, 1
        elif scales.shape == (-(-n // FP8_BLOCK), -(-k // FP8_BLOCK)):
            grid, group_size, block_n = None, FP8_BLOCK, FP8_BLOCK
        else:
            raise QuantizationError(f"fp8 scales: shape {scales.shape} is none of per tensor (1,), per channel "
                                    f"({n},) or per {FP8_BLOCK} x {FP8_BLOCK} block "
                                    f"({-(-n // FP8_BLOCK)}, {-(-k // FP8_BLOCK)})")
        if grid is None:
            # kept as stored, (N blocks, K blocks), and read through its transpose
            scale_tensor = tensor(np.ascontiguousarray(scales), device=device).transpose(0, 1)
        else:
            scale_tensor = tensor(np.ascontiguousarray(grid), device=device)
        return cls("fp8", (n, k), _logical_dtype(dtype, scales), tensor(np.ascontiguousarray(q), device=device),
                   scale_tensor, None, None, group_size, block_n, activation_scale, activation_scale_ub)

    @classmethod
    def quantize(cls, w, format: str, *, group_size: int = 128, fp8_scales: str = "channel", device=None,
                 dtype=None) -> "QuantizedWeight":
        """``w`` (an (N, K) array or tensor) rounded to nearest in ``format``: int4 in groups of ``group_size``
        inputs, int8 per channel, fp8 per ``fp8_scales`` (tensor, channel or block)."""
        w = _host(w, "weight")
        dtype = dtype or _dtype_name(w.dtype)
        scale_dtype = dtype if dtype in _SCALE_DTYPES else "float32"
        if format == "int4":
            q, scales, zeros = quantize_int4(w, group_size, scale_dtype)
            return cls.int4(q, scales, zeros, group_size=group_size, device=device, dtype=dtype)
        if format == "int8":
            q, scales = quantize_int8(w, scale_dtype)
            return cls.int8(q, scales, device=device, dtype=dtype)
        if format == "fp8":
            q, scales = quantize_fp8(w, fp8_scales, "float32")
            return cls.fp8(q, scales, device=device, dtype=dtype)
        raise QuantizationError(f"quantized formats are {', '.join(FORMATS)}, not {format!r}")

    # -- what it is --
    @property
    def device(self):
        return self.qweight.device

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.qweight, self.scales, self.zeros, self.g_idx)
                   if t is not None)

    def dim(self) -> int:
        return len(self.shape)

    ndim = property(dim)

    def __repr__(self) -> str:
        grouping = (f"group_size={self.group_size}" + (", act_order" if self.g_idx is not None else "")
                    if self.format == "int4" else "per channel" if self.format == "int8"
                    else {1: "per channel", self.shape[-2]: "per tensor"}.get(self.scale_block_n, "per block"))
        return (f"QuantizedWeight({self.format}, shape={self.shape}, dtype={self.dtype.name}, {grouping}, "
                f"nbytes={self.nbytes}, device={self.device})")

    def __getitem__(self, rows) -> "QuantizedWeight":
        """The weight of output rows ``rows`` (a slice of step 1), sharing this one's memory; of a stack of
        experts' weights, expert ``rows``'s (an integer)."""
        if len(self.shape) == 3:
            return self._expert(rows)
        if not isinstance(rows, slice) or rows.step not in (None, 1):
            raise TypeError(f"a QuantizedWeight is indexed by a slice of output rows, got {rows!r}")
        n, k = self.shape
        start, stop, _ = rows.indices(n)
        stop = max(start, stop)
        if self.scale_block_n not in (1, n) and (start % self.scale_block_n or (stop % self.scale_block_n and stop != n)):
            raise QuantizationError(f"rows {start}..{stop} of a weight with {self.scale_block_n}-row scale blocks must "
                                    f"start and end on a block")
        if self.format == "int4":
            qweight = self.qweight[:, start:stop]
            scales, zeros = self.scales[:, start:stop], self.zeros[:, start:stop]
        else:
            qweight = self.qweight[start:stop]
            zeros = None
            if self.scale_block_n == 1:
                scales = self.scales[:, start:stop]
            elif self.scale_block_n == n:
                scales = self.scales
            else:
                scales = self.scales[:, start // self.scale_block_n:-(-stop // self.scale_block_n)]
        block_n = self.scale_block_n if self.scale_block_n != n or n == 1 else max(stop - start, 1)
        return QuantizedWeight(self.format, (stop - start, k), self.dtype, qweight, scales, zeros, self.g_idx,
                               self.group_size, block_n, self.activation_scale, self.activation_scale_ub)

    def _expert(self, index) -> "QuantizedWeight":
        if isinstance(index, (bool, np.bool_)) or not isinstance(index, (int, np.integer)):
            raise TypeError(f"a stack of experts' QuantizedWeights is indexed by an expert (an integer), got {index!r}")
        experts = self.shape[0]
        if not -experts <= index < experts:
            raise IndexError(f"expert {index} is out of range for a stack of {experts} experts' weights")
        index = int(index) % experts
        parts = [None if t is None else t[index] for t in (self.qweight, self.scales, self.zeros, self.g_idx)]
        return QuantizedWeight(self.format, self.shape[1:], self.dtype, *parts, self.group_size, self.scale_block_n,
                               self.activation_scale, self.activation_scale_ub)

    def dequantize(self) -> np.ndarray:
        """The (N, K) float32 weight this one stands for (of a stack of experts', (E, N, K)), computed on the
        host."""
        if len(self.shape) == 3:
            return np.stack([self._expert(e).dequantize() for e in range(self.shape[0])])
        n, k = self.shape
        scales = self.scales.numpy().astype(np.float64)
        groups = (self.g_idx.numpy() if self.g_idx is not None else np.arange(k) // self.group_size)
        columns = np.arange(n) // self.scale_block_n
        expanded = scales[groups][:, columns].T  # (N, K)
        if self.format == "int4":
            q = unpack_int4_rows(self.qweight.contiguous().numpy(), k).T.astype(np.float64)
            q = q - self.zeros.numpy().astype(np.float64)[groups].T
        else:
            q = self.qweight.numpy().astype(np.float64)
        return (q * expanded).astype(np.float32)


def join_rows(weights: list) -> "QuantizedWeight | None":
    """The quantized weights stacked by output rows into one (as a float ``cat`` would stack them), or None
    where their layouts cannot share one: formats, input sizes, dtypes, group sizes or rows' scalings that differ,
    act-order (each weight has its own input permutation) or scales that are not one a group column or channel."""
    first = weights[0]
    if not all(isinstance(w, QuantizedWeight) for w in weights):
        return None
    same = {(w.format, w.shape[1], w.dtype, w.group_size, w.device, w.activation_scale, w.activation_scale_ub)
            for w in weights}
    if len(same) != 1 or any(w.g_idx is not None for w in weights):
        return None
    if first.format == "int4":
        # (K / 8, N) packed words and (groups, N) scales and zeros: output rows are columns
        parts = [cat([getattr(w, name) for w in weights], dim=1) for name in ("qweight", "scales", "zeros")]
        qweight, scales, zeros = parts
    elif all(w.scale_block_n == 1 for w in weights):
        qweight, scales, zeros = cat([w.qweight for w in weights]), cat([w.scales for w in weights], dim=1), None
    else:
        return None
    rows = sum(w.shape[0] for w in weights)
    return QuantizedWeight(first.format, (rows, first.shape[1]), first.dtype, qweight, scales, zeros, None,
                           first.group_size, first.scale_block_n, first.activation_scale, first.activation_scale_ub)


def _fp8_blocks(w: QuantizedWeight) -> bool:
    """Whether fp8 ``w``'s scales are per 128 x 128 block (a weight of one block counts as either)."""
    return w.group_size == FP8_BLOCK and w.scale_block_n == FP8_BLOCK


def stack_experts(experts: list) -> QuantizedWeight:
    """The experts' quantized weights as one (E, N, K) stack (the module docstring's layout) for
    ``nbx.grouped_quantized_linear``: ``experts[e]`` lists expert e's (N_i, K) weights, joined by output rows in
    that order (a gate projection's rows, then an up projection's). Every weight must share the format, input
    size, dtype, scales' dtype, group size and device; every expert the joined rows. Act-order int4 weights
    joined in one expert must order their inputs alike (one ``g_idx``: GPTQ sorts them by statistics of the
    input, which an expert's gate and up projections share); each expert keeps its own. fp8 scales per tensor or
    per channel become per channel; per 128 x 128 block they stay so where each joined weight but the last
    ends on a block. The stack multiplies weight-only: fp8 rows' scaling settings are not kept."""
    if not experts or not all(isinstance(joined, (list, tuple)) and joined for joined in experts):
        raise QuantizationError("stack_experts: expected a non-empty list of experts, each a non-empty list of "
                                "QuantizedWeights")
    weights = [w for joined in experts for w in joined]
    if not all(isinstance(w, QuantizedWeight) and len(w.shape) == 2 for w in weights):
        raise QuantizationError("stack_experts: every expert's weights must be 2-D QuantizedWeights, got "
                                f"{', '.join(sorted({type(w).__name__ for w in weights}))}")
    first = weights[0]
    forms = {(w.format, w.shape[1], w.dtype.name, w.scales.dtype.name, w.group_size, str(w.device)) for w in weights}
    if len(forms) != 1:
        raise QuantizationError(f"stack_experts: the experts' weights differ in format, inputs, dtype, scales' dtype, "
                                f"group size or device: {sorted(forms)}")
    rows = [[w.shape[0] for w in joined] for joined in experts]
    if any(r != rows[0] for r in rows):
        raise QuantizationError(f"stack_experts: every expert must join weights of the same rows, got {rows}")
    n, k = sum(rows[0]), first.shape[1]
    blocks = first.format == "fp8" and _fp8_blocks(first)
    if first.format == "fp8":
        if any(_fp8_blocks(w) != blocks for w in weights):
            raise QuantizationError("stack_experts: fp8 weights with 128 x 128 block scales and weights with "
                                    "scales per tensor or channel do not stack")
        if blocks and any(r % FP8_BLOCK for r in rows[0][:-1]):
            raise QuantizationError(f"stack_experts: fp8 weights with 128 x 128 block scales join only where each "
                                    f"but the last has a multiple of {FP8_BLOCK} rows, got {rows[0]}")
    orders = []
    for joined in experts:
        order = joined[0].g_idx
        if any((w.g_idx is None) != (order is None) or (order is not None and not np.array_equal(
                w.g_idx.numpy(), order.numpy())) for w in joined[1:]):
            raise QuantizationError("stack_experts: act-order int4 weights joined in one expert must share one "
                                    "g_idx (their inputs' order)")
        orders.append(order)

    def stacked(parts):
        return cat([p.unsqueeze(0) for p in parts])
    if first.format == "int4":
        qweight, scales, zeros = (stacked([cat([getattr(w, name) for w in joined], dim=1) for joined in experts])
                                  for name in ("qweight", "scales", "zeros"))
        g_idx = None
        if any(order is not None for order in orders):
            in_order = tensor((np.arange(k) // first.group_size).astype(np.int32), device=first.device)
            g_idx = stacked([in_order if order is None else order for order in orders])
        block_n = 1
    else:
        qweight = stacked([cat([w.qweight for w in joined]) for joined in experts])
        g_idx = zeros = None
        if blocks:
            scales, block_n = stacked([cat([w.scales for w in joined], dim=1) for joined in experts]), FP8_BLOCK
        else:  # one scale a channel, per-tensor ones repeated over their rows
            scales = stacked([cat([w.scales.expand(1, w.shape[0]) for w in joined], dim=1) for joined in experts])
            block_n = 1
    return QuantizedWeight(first.format, (len(experts), n, k), first.dtype, qweight, scales, zeros, g_idx,
                           first.group_size, block_n)


def _dtype_name(np_dtype) -> str:
    return "bfloat16" if np_dtype == ml_dtypes.bfloat16 else np.dtype(np_dtype).name


def _logical_dtype(dtype, scales: np.ndarray):
    return get_dtype(dtype if dtype is not None else _dtype_name(scales.dtype))


def quantize(w, format: str, **options) -> QuantizedWeight:
    """``QuantizedWeight.quantize(w, format, **options)``."""
    return QuantizedWeight.quantize(w, format, **options)
