"""The registry's sample descriptions (``nbxtensor/ops/samples.py``) made into tensors on the test device,
with the NumPy values they hold, for the generic tests of every op (``test_samples.py``,
``test_samples_torch.py``)."""
import zlib

import ml_dtypes
import numpy as np

import nbxtensor as nbx
from nbxtensor.ops import registry
from nbxtensor.ops.samples import Operand

from .conftest import TEST_DEVICE

_FLOAT_EDGES = (0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, "max", "-max", "tiny", "-tiny")

# rtol and atol per result dtype: a few units in the last place, for results of a short chain of roundings
# (the samples are a few elements, so no reduction is deeper than a dozen terms)
TOLERANCES = {"float64": (1e-10, 1e-10), "float32": (2e-5, 2e-5), "float16": (4e-3, 4e-3),
              "bfloat16": (3e-2, 3e-2), "complex64": (2e-5, 2e-5), "complex128": (1e-10, 1e-10)}


def numpy_dtype(name):
    return ml_dtypes.bfloat16 if name == "bfloat16" else np.dtype(name)


def _values(operand: Operand, rng) -> np.ndarray:
    """The logical values of ``operand``, in its dtype."""
    dtype = numpy_dtype(operand.dtype)
    shape, count = operand.shape, int(np.prod(operand.shape, dtype=np.int64))
    if operand.dtype == "bool":
        if operand.values == "edge":
            return (np.arange(count) % 2 == 0).reshape(shape)
        return rng.random(shape) < 0.5
    integral = np.issubdtype(dtype, np.integer)
    if operand.values == "edge":
        if integral:
            info = np.iinfo(dtype)
            edges = np.array([info.min, info.max, 0, 1, info.max - 1, 2], dtype=dtype)
            edges = np.concatenate([edges, np.array([-1, -2], dtype=dtype)]) if info.min < 0 else edges
        else:
            info = ml_dtypes.finfo(dtype)
            named = {"max": float(info.max), "-max": -float(info.max), "tiny": float(info.tiny),
                     "-tiny": -float(info.tiny)}
            edges = np.array([named.get(v, v) if isinstance(v, str) else v for v in _FLOAT_EDGES]).astype(dtype)
        return np.resize(edges, count).reshape(shape)
    if operand.values == "index":
        return rng.integers(operand.domain[0], operand.domain[1], size=shape).astype(dtype)
    if operand.values == "ascending":
        return np.sort(rng.integers(operand.domain[0], operand.domain[1], size=shape), axis=-1).astype(dtype)
    if operand.values == "distinct":
        return (operand.domain[0] + rng.permutation(operand.domain[1] - operand.domain[0])[:count]).reshape(shape).astype(dtype)
    low, high = {"normal": (-3, 3), "positive": (0.5, 3), "unit": (0.05, 0.95)}.get(operand.values, operand.domain or (-3, 3))
    if integral:
        info = np.iinfo(dtype)
        low, high = (1, 5) if operand.values == "positive" else (max(int(np.floor(low)), info.min), int(np.ceil(high)))
        return rng.integers(low, high + 1, size=shape).astype(dtype)
    if operand.values in ("invertible", "spd"):
        n = shape[-1]
        normal = rng.standard_normal(shape)
        square = normal @ np.swapaxes(normal, -1, -2) if operand.values == "spd" else normal
        return (square + n * np.eye(n)).astype(dtype)
    if operand.values == "normal":
        return rng.standard_normal(shape).astype(dtype)
    return rng.uniform(low, high, size=shape).astype(dtype)


def materialise(operand: Operand, rng):
    """(NumPy values, a tensor on the test device holding them in ``operand``'s layout)."""
    values = _values(operand, rng)
    if operand.layout == "broadcast":
        values = np.broadcast_to(values[:1], values.shape)
    tensor = _laid_out(values, operand.layout)
    return values, tensor


def _laid_out(values: np.ndarray, layout: str):
    if layout == "transposed":
        return nbx.tensor(np.ascontiguousarray(np.swapaxes(values, -1, -2)), device=TEST_DEVICE).transpose(-1, -2)
    if layout == "sliced":
        spaced = np.zeros(values.shape[:-1] + (2 * values.shape[-1],), values.dtype)
        spaced[..., ::2] = values
        return nbx.tensor(spaced, device=TEST_DEVICE)[..., ::2]
    if layout == "broadcast":
        return nbx.tensor(np.ascontiguousarray(values[:1]), device=TEST_DEVICE).expand(*values.shape)
    return nbx.tensor(np.array(values, order="C"), device=TEST_DEVICE)


def arguments(sample, op_name: str, index: int):
    """(args, kwargs) of ``sample`` as tensors and as NumPy values; seeded by the op and the sample, so a
    run is reproducible and independent of which other tests run."""
    rng = np.random.default_rng(zlib.crc32(f"{op_name}/{index}".encode()))
    return _build(sample.args, rng), {k: v for k, v in zip(sample.kwargs, _build(tuple(sample.kwargs.values()), rng))}


def _build(values, rng):
    return [_build_one(v, rng) for v in values]


def _build_one(value, rng):
    if isinstance(value, Operand):
        return materialise(value, rng)
    if isinstance(value, (list, tuple)) and any(isinstance(v, (Operand, list, tuple)) for v in value):
        pairs = [_build_one(v, rng) for v in value]
        return Pair(type(value)(p.numpy if isinstance(p, Pair) else p[0] for p in pairs),
                    type(value)(p.tensor if isinstance(p, Pair) else p[1] for p in pairs))
    return Pair(value, value)


class Pair:
    """A non-operand argument, or a list holding operands, as NumPy and as tensors."""
    def __init__(self, numpy, tensor):
        self.numpy, self.tensor = numpy, tensor


def split(built):
    """(NumPy side, tensor side) of arguments made by ``arguments``."""
    args, kwargs = built

    def side(item, which):
        if isinstance(item, Pair):
            return item.numpy if which == 0 else item.tensor
        return item[which]
    return ([side(a, 0) for a in args], {k: side(v, 0) for k, v in kwargs.items()},
            [side(a, 1) for a in args], {k: side(v, 1) for k, v in kwargs.items()})


def as_float64(values):
    """A reference's operand: floating values widened to float64 (integers and bools as they are)."""
    if isinstance(values, np.ndarray) and (values.dtype.kind == "f" or values.dtype == ml_dtypes.bfloat16):
        return values.astype(np.float64)
    if isinstance(values, (list, tuple)):
        return type(values)(as_float64(v) for v in values)
    if isinstance(values, dict):
        return {k: as_float64(v) for k, v in values.items()}
    return values


def outputs(result) -> list:
    """An op's result, or its meta rule's, as a flat list (one tensor, or tuples of them, nested or not)."""
    if isinstance(result, (tuple, list)) and not isinstance(result, registry.TensorMeta):
        return [flat for item in result for flat in outputs(item)]
    return [result]


def ops_with_samples():
    return [op for op in registry.all_ops() if registry.samples_of(op) is not None]
