"""Seeded random streams and the ops that draw from them.

A ``Generator`` is a (seed, offset) pair on the host. A draw of ``n`` elements reads the Philox
counters from offset / 4 on (``kernels/random.py``), and advances the offset by the number of
32-bit words it consumed rounded up to a multiple of 4, before the kernel runs and without waiting
for the device. So a run is reproducible from its seed, and element ``i`` of a draw depends only
on (seed, offset, i): drawing ``a`` then ``b`` gives the same values as drawing each from a
generator set to the matching offset.
"""
from __future__ import annotations

import os
import threading

import numpy as np

from .. import shape as S
from ..allocation import new_tensor
from ..device import device as _device
from ..device import resolve
from ..dtypes import get_dtype
from ..grad_mode import refuse_requires_grad
from ..kernels import random as K
from ..kernels.formats import FORMAT_NATIVE
from ..launch import cdiv, launch, refuse_capture
from ..lowering import conversion_flags, elementwise_block, encode_scalar, float_format, needs_index_64
from ..promotion import get_default_dtype
from ..tensor import Tensor
from .copy import copy_, fill_
from .creation import like_tensor, tensor
from .index_common import report_on_device
from .reductions import cumsum
from .registry import Cost, TensorMeta, family_samples, nbytes, register
from .samples import Samples, by_name, operand, sample
from .sorting import argsort, searchsorted, topk
from .views import expand, reshape

_I64 = get_dtype("int64")
_F32 = get_dtype("float32")
_F64 = get_dtype("float64")
_U64_MOD = 2 ** 64
DEFAULT_SEED = 67280421310721  # ATen's default, so an unseeded run starts from a known state


class Generator:
    """A seeded random stream for one device type: ``manual_seed``, ``seed``, ``initial_seed``,
    ``get_state``/``set_state`` (16 bytes: seed and offset, little-endian uint64) and the offset
    (``get_offset``/``set_offset``, in 32-bit words, a multiple of 4)."""

    def __init__(self, device=None):
        self.device = resolve(device) if device is not None else _device("cpu")
        self._seed = DEFAULT_SEED
        self._offset = 0
        self._lock = threading.Lock()  # threads drawing at once each take their own counters

    def manual_seed(self, seed) -> "Generator":
        seed = int(seed)
        if not -2 ** 63 <= seed < _U64_MOD:
            raise RuntimeError(f"manual_seed: seed must be within [-2^63, 2^64), got {seed}")
        with self._lock:
            self._seed = seed % _U64_MOD
            self._offset = 0
        return self

    def seed(self) -> int:
        """Seed from the operating system's entropy; returns the new seed."""
        self.manual_seed(int.from_bytes(os.urandom(8), "little") >> 1)
        return self._seed

    def initial_seed(self) -> int:
        return self._seed

    def get_offset(self) -> int:
        return self._offset

    def set_offset(self, offset: int) -> "Generator":
        offset = int(offset)
        if offset < 0 or offset % 4:
            raise RuntimeError(f"set_offset: the offset must be a non-negative multiple of 4, got {offset}")
        self._offset = offset
        return self

    def get_state(self) -> Tensor:
        raw = np.array([self._seed, self._offset], dtype=np.uint64).view(np.uint8)
        return tensor(raw)

    def set_state(self, state) -> "Generator":
        raw = np.ascontiguousarray(state.numpy() if isinstance(state, Tensor) else np.asarray(state)).reshape(-1)
        if raw.dtype != np.uint8 or raw.size != 16:
            raise RuntimeError(f"set_state: expected 16 uint8 values (seed and offset), got {raw.size} of {raw.dtype}")
        seed, offset = (int(v) for v in raw.view(np.uint64))
        self._seed = seed
        return self.set_offset(offset)

    def _take(self, words: int) -> tuple[int, int]:
        """(seed as int64 bits, first counter) for a draw of ``words`` 32-bit words; advances the offset."""
        refuse_capture("draws random numbers (a replay would draw the same ones again)")
        with self._lock:
            counter = self._offset // 4
            self._offset += 4 * cdiv(words, 4)
            seed = self._seed
        return (seed - _U64_MOD if seed >= 2 ** 63 else seed), counter

    def __repr__(self) -> str:
        return f"Generator(device={self.device}, seed={self._seed}, offset={self._offset})"


_defaults: dict = {}
_default_seed = DEFAULT_SEED  # what nbx.manual_seed last set: default generators created later start there


def default_generator_for(dev) -> Generator:
    """The default generator of ``dev``'s device (one per CPU, one per GPU index)."""
    dev = resolve(dev)
    gen = _defaults.get(dev)
    if gen is None:  # threads racing here all get the generator published first
        gen = _defaults.setdefault(dev, Generator(dev).manual_seed(_default_seed))
    return gen


default_generator = default_generator_for("cpu")


def manual_seed(seed) -> Generator:
    """Seed every default generator (those created later start from ``seed`` too); returns the CPU's."""
    global _default_seed
    for gen in list(_defaults.values()):
        gen.manual_seed(seed)
    _default_seed = default_generator.initial_seed()
    return default_generator


def seed() -> int:
    """Seed every default generator from the operating system's entropy; returns the seed."""
    value = default_generator.seed()
    manual_seed(value)
    return value


def initial_seed() -> int:
    return default_generator.initial_seed()


def get_rng_state() -> Tensor:
    return default_generator.get_state()


def set_rng_state(state) -> None:
    default_generator.set_state(state)


def _generator(generator, dev) -> Generator:
    if generator is None:
        return default_generator_for(dev)
    if generator.device.type != dev.type:
        raise RuntimeError(f"a {generator.device.type} generator cannot draw for a tensor on {dev}")
    return generator


# ---- the launch --------------------------------------------------------------------------------

def _digits(dt) -> int:
    """Significant bits of a uniform drawn for ``dt``: the type's own, at most float32's."""
    return {"float16": 11, "bfloat16": 8}.get(dt.name, 24)


def _draw(out: Tensor, mode: int, generator, *, a=0.0, b=0.0, int_low=0, int_range=1, src: Tensor | None = None,
          digits: int | None = None) -> Tensor:
    """Fill ``out`` with draws of ``mode``, through a contiguous buffer when ``out`` is strided."""
    n = out.numel()
    if n == 0 or out.is_meta:  # nothing to draw: the generator stays where it is
        return out
    dev = out.device
    gen = _generator(generator, dev)
    target = out if out.is_contiguous() else new_tensor(out.shape, out.dtype, dev)
    if mode == K.MODE_RANDINT.value:
        compute = _I64
        wide = int_range >= 2 ** 32
    else:
        compute = _F64 if out.dtype is _F64 or (src is not None and src.dtype is _F64) else _F32
        wide = compute is _F64
    per_counter = 2 if wide else 4
    seed, counter = gen._take(n * (4 // per_counter))
    groups = cdiv(n, per_counter)
    block = elementwise_block(dev)
    flags = conversion_flags(compute, out.dtype, dev)
    src_format = float_format(src.dtype) if src is not None else FORMAT_NATIVE.value
    launch(K.random_fill, (cdiv(groups, block),), dev,
           [target, src if src is not None else target, n, seed, counter, encode_scalar(float(a), _F64),
            encode_scalar(float(b), _F64), int(int_low), int(int_range)],
           MODE=mode, PER_COUNTER=per_counter, DIGITS=digits or 24, COMPUTE=compute.triton, SRC_FORMAT=src_format,
           OUT_FORMAT=flags["DST_FORMAT"], VIA_F32=flags["VIA_F32"], FLOAT_TO_INT=flags["FLOAT_TO_INT"],
           INDEX_64=needs_index_64(count=n + 4), BLOCK=block)
    if target is not out:
        copy_(out, target)
    return out


# ---- factories -----------------------------------------------------------------------------------

def _float_dtype(dtype, op: str):
    dt = get_default_dtype() if dtype is None else get_dtype(dtype)
    if not dt.is_floating_point:
        raise TypeError(f"{op}: expected a floating-point dtype, got {dt.name}")
    return dt


def _drawing_rules(meta) -> dict:
    """``register``'s meta and cost rules (of bound arguments) of an op that draws one new tensor, ``meta``
    its meta rule."""
    return {"meta": meta, "cost": lambda a: Cost(bytes_written=nbytes(meta(a))), "bound": True}


def _float_factory(name: str, mode: int, a: float, b: float, doc: str):
    def impl(*size, generator=None, dtype=None, device=None, requires_grad=False, pin_memory=False, layout=None):
        refuse_requires_grad(requires_grad, name)
        m = TensorMeta(S.normalize_shape(size), _float_dtype(dtype, name))
        out = new_tensor(m.shape, m.dtype, resolve(device), pinned=pin_memory)
        return _draw(out, mode, generator, a=a, b=b, digits=_digits(m.dtype) if mode == K.MODE_UNIFORM.value else 24)

    impl.__name__ = name
    impl.__doc__ = doc
    return register(name, family="random", aten=[f"aten::{name}.default", f"aten::{name}.generator"],
                    **_drawing_rules(lambda a: TensorMeta(S.normalize_shape(a.size), _float_dtype(a.dtype, name))))(
        impl)


rand = _float_factory("rand", K.MODE_UNIFORM.value, 0.0, 1.0, "Uniform values in [0, 1).")
randn = _float_factory("randn", K.MODE_NORMAL.value, 0.0, 1.0, "Standard normal values.")


# the rules of the *_like ops: a tensor shaped like ``x``
_LIKE_RULES = _drawing_rules(
    lambda a: TensorMeta(tuple(a.x.shape), a.x.dtype if a.dtype is None else get_dtype(a.dtype)))


@register("rand_like", family="random", aten=["aten::rand_like.default"], **_LIKE_RULES)
def rand_like(x: Tensor, *, generator=None, dtype=None, device=None, requires_grad=False, memory_format=None):
    refuse_requires_grad(requires_grad, "rand_like")
    out = like_tensor("rand_like", x, dtype, device, memory_format)
    _float_dtype(out.dtype, "rand_like")
    return _draw(out, K.MODE_UNIFORM.value, generator, a=0.0, b=1.0, digits=_digits(out.dtype))


@register("randn_like", family="random", aten=["aten::randn_like.default"], **_LIKE_RULES)
def randn_like(x: Tensor, *, generator=None, dtype=None, device=None, requires_grad=False, memory_format=None):
    refuse_requires_grad(requires_grad, "randn_like")
    out = like_tensor("randn_like", x, dtype, device, memory_format)
    _float_dtype(out.dtype, "randn_like")
    return _draw(out, K.MODE_NORMAL.value, generator, a=0.0, b=1.0)


def _randint_args(args, low, high, size):
    """(low, high, size) from torch's ``randint(high, size)`` / ``randint(low, high, size)`` forms."""
    if len(args) == 3:
        low, high, size = args
    elif len(args) == 2:
        if size is None:
            high, size = args
        else:
            low, high = args
    elif len(args) == 1:
        if high is None:
            high = args[0]
        else:
            low = args[0]
    if high is None or size is None:
        raise TypeError("randint expects randint(high, size) or randint(low, high, size)")
    return int(low), int(high), S.normalize_shape((size,))


def _integer_range(low: int, high: int, dt, op: str) -> int:
    if high <= low:
        raise RuntimeError(f"{op}: expects low < high, got low={low}, high={high}")
    if dt.is_complex:
        raise TypeError(f"{op}: complex dtypes are not supported")
    if dt.is_integral and dt.kind != "bool":
        info = np.iinfo(dt.numpy)
        if low < info.min or high - 1 > info.max:
            raise RuntimeError(f"{op}: [{low}, {high}) is out of range for {dt.name}")
    return high - low


def _randint_meta(a):
    _, _, shape = _randint_args(a.args, a.low, a.high, a.size)
    return TensorMeta(shape, _I64 if a.dtype is None else get_dtype(a.dtype))


@register("randint", family="random", aten=["aten::randint.default", "aten::randint.low", "aten::randint.generator",
                                            "aten::randint.low_generator"],
          **_drawing_rules(_randint_meta))
def randint(*args, low=0, high=None, size=None, generator=None, dtype=None, device=None, requires_grad=False,
            pin_memory=False, layout=None):
    """Integers uniform in [low, high) (int64 unless ``dtype`` says otherwise)."""
    refuse_requires_grad(requires_grad, "randint")
    low, high, shape = _randint_args(args, low, high, size)
    dt = _I64 if dtype is None else get_dtype(dtype)
    span = _integer_range(low, high, dt, "randint")
    out = new_tensor(shape, dt, resolve(device), pinned=pin_memory)
    return _draw(out, K.MODE_RANDINT.value, generator, int_low=low, int_range=span)


@register("randint_like", family="random", aten=["aten::randint_like.default", "aten::randint_like.low_dtype"],
          **_LIKE_RULES)
def randint_like(x: Tensor, low=0, high=None, *, generator=None, dtype=None, device=None, requires_grad=False,
                 memory_format=None):
    """``randint(low, high, x.shape)`` in ``x``'s dtype and device; ``randint_like(x, high)`` too."""
    refuse_requires_grad(requires_grad, "randint_like")
    if high is None:
        low, high = 0, low
    out = like_tensor("randint_like", x, dtype, device, memory_format)
    span = _integer_range(int(low), int(high), out.dtype, "randint_like")
    return _draw(out, K.MODE_RANDINT.value, generator, int_low=int(low), int_range=span)


# ---- in-place fills -------------------------------------------------------------------------------

# the rules of the in-place draws into ``x`` and of bernoulli
_FILL_RULES = _drawing_rules(lambda a: TensorMeta(tuple(a.x.shape), a.x.dtype))


def _check_float(x: Tensor, op: str) -> None:
    if not x.dtype.is_floating_point:
        raise TypeError(f"{op}: expected a floating-point tensor, got {x.dtype.name}")


@register("uniform_", family="random", aten=["aten::uniform_.default"], methods=("uniform_",), **_FILL_RULES)
def uniform_(x: Tensor, a: float = 0.0, b: float = 1.0, *, generator=None, **kwargs) -> Tensor:
    """Fill ``x`` with values uniform in [a, b) (``from``/``to`` as keywords too)."""
    a, b = float(kwargs.pop("from", a)), float(kwargs.pop("to", b))
    if kwargs:
        raise TypeError(f"uniform_: unexpected arguments {sorted(kwargs)}")
    _check_float(x, "uniform_")
    if a > b:
        raise RuntimeError(f"uniform_: expects from <= to, got from={a}, to={b}")
    return _draw(x, K.MODE_UNIFORM.value, generator, a=a, b=b, digits=_digits(x.dtype))


@register("normal_", family="random", aten=["aten::normal_.default"], methods=("normal_",), **_FILL_RULES)
def normal_(x: Tensor, mean: float = 0.0, std: float = 1.0, *, generator=None) -> Tensor:
    _check_float(x, "normal_")
    if std < 0:
        raise RuntimeError(f"normal_: expects std >= 0, got {std}")
    return _draw(x, K.MODE_NORMAL.value, generator, a=mean, b=std)


@register("exponential_", family="random", aten=["aten::exponential_.default"], methods=("exponential_",),
          **_FILL_RULES)
def exponential_(x: Tensor, lambd: float = 1.0, *, generator=None) -> Tensor:
    _check_float(x, "exponential_")
    if not lambd > 0:
        raise RuntimeError(f"exponential_: expects lambd > 0, got {lambd}")
    return _draw(x, K.MODE_EXPONENTIAL.value, generator, a=lambd)


@register("bernoulli_", family="random", aten=["aten::bernoulli_.float", "aten::bernoulli_.Tensor"],
          methods=("bernoulli_",), **_FILL_RULES)
def bernoulli_(x: Tensor, p=0.5, *, generator=None) -> Tensor:
    """Fill ``x`` with 0/1 draws, 1 with probability ``p`` (a float, or a tensor broadcast to ``x``)."""
    if isinstance(p, Tensor):
        probabilities = expand(p.to(device=x.device), tuple(x.shape)).contiguous()
        if not probabilities.dtype.is_floating_point:
            probabilities = probabilities.to(_F32)
        return _draw(x, K.MODE_BERNOULLI_TENSOR.value, generator, src=probabilities)
    if not 0 <= p <= 1:
        raise RuntimeError(f"bernoulli_: expects 0 <= p <= 1, got {p}")
    return _draw(x, K.MODE_BERNOULLI.value, generator, a=p)


@register("bernoulli", family="random", aten=["aten::bernoulli.default", "aten::bernoulli.p"], methods=("bernoulli",),
          **_FILL_RULES)
def bernoulli(x: Tensor, p=None, *, generator=None) -> Tensor:
    """0/1 draws shaped like ``x``: with probabilities ``x`` itself, or the float ``p`` for every element."""
    out = new_tensor(x.shape, x.dtype, x.device)
    if p is None:
        _check_float(x, "bernoulli")
        return bernoulli_(out, x, generator=generator)
    return bernoulli_(out, float(p), generator=generator)


# ---- sampling -------------------------------------------------------------------------------------

def _multinomial_meta(a):
    return TensorMeta((*tuple(a.x.shape)[:-1], int(a.num_samples)), _I64)


@register("multinomial", family="random", aten=["aten::multinomial.default"], meta=_multinomial_meta,
          cost=lambda a: Cost(bytes_read=nbytes(a.x), bytes_written=nbytes(_multinomial_meta(a))), bound=True,
          methods=("multinomial",))
def multinomial(x: Tensor, num_samples: int, replacement: bool = False, *, generator=None) -> Tensor:
    """Category indices drawn per row of the non-negative weights ``x`` (1-D or 2-D). With
    replacement: the inverse of the row's cumulative weights at uniform points. Without: the
    ``num_samples`` largest weight / Exp(1) keys, which picks categories in the order of sampling
    one at a time without replacement (the exponential race)."""
    if x.ndim not in (1, 2):
        raise RuntimeError(f"multinomial: expected 1-D or 2-D weights, got {x.ndim}-D")
    _check_float(x, "multinomial")
    num_samples = int(num_samples)
    categories = x.shape[-1]
    if num_samples <= 0:
        raise RuntimeError(f"multinomial: cannot sample {num_samples} <= 0 samples")
    if not replacement and num_samples > categories:
        raise RuntimeError(f"multinomial: cannot sample {num_samples} > {categories} categories without replacement")
    compute = _F64 if x.dtype is _F64 else _F32
    weights = reshape(x.to(compute), (-1, categories))
    _check_weights(weights, num_samples if not replacement else 1, replacement)
    if replacement:
        totals = cumsum(weights, -1)
        points = rand(weights.shape[0], num_samples, generator=generator, dtype=compute, device=x.device)
        points = points * totals[:, categories - 1:]
        picked = searchsorted(totals.contiguous(), points.contiguous(), right=True).clamp(max=categories - 1)
    else:
        race = exponential_(new_tensor(weights.shape, compute, x.device), generator=generator)
        picked = topk(weights / race, num_samples, -1).indices
    return picked if x.ndim == 2 else reshape(picked, (num_samples,))


def _check_weights(weights: Tensor, needed: int, replacement: bool) -> None:
    """Report, as torch does, weights that define no distribution: negative, infinite or NaN ones, or a
    row with fewer positive weights than the categories it must yield. The check stays on the device
    (no wait): it raises at the next read or synchronisation, at once on the CPU."""
    report_on_device(((weights < 0) | ~weights.isfinite()).any(), "multinomial", RuntimeError,
                     "invalid distribution: every weight must be finite and non-negative (a negative, "
                     "infinite or NaN weight was given)")
    shortage = ("has fewer categories of positive weight than the "
                f"{needed} samples asked for without replacement" if not replacement else "has weights summing to zero")
    report_on_device((weights > 0).sum(-1).amin() < needed, "multinomial", RuntimeError,
                     f"invalid distribution: a row {shortage}")


def _randperm_meta(n, dtype) -> TensorMeta:
    return TensorMeta((int(n),), _I64 if dtype is None else get_dtype(dtype))


@register("randperm", family="random", aten=["aten::randperm.default", "aten::randperm.generator"],
          **_drawing_rules(lambda a: _randperm_meta(a.n, a.dtype)))
def randperm(n: int, *, generator=None, dtype=None, device=None, requires_grad=False, pin_memory=False,
             layout=None) -> Tensor:
    """A random permutation of 0..n-1: the stable order of random 62-bit keys (ties, which need two
    equal 62-bit draws, keep their positions)."""
    refuse_requires_grad(requires_grad, "randperm")
    n = int(n)
    if n < 0:
        raise RuntimeError(f"randperm: n must be non-negative, got {n}")
    m = _randperm_meta(n, dtype)
    keys = randint(0, 2 ** 62, (n,), generator=generator, device=device)
    order = argsort(keys) if n else keys
    return order if m.dtype is _I64 else order.to(m.dtype)


# ---- dropout --------------------------------------------------------------------------------------

@register("dropout", family="random", functional=True, aten=["aten::dropout.default"],
          meta=lambda a: TensorMeta(tuple(a.x.shape), a.x.dtype),
          cost=lambda a: Cost(bytes_read=nbytes(a.x), bytes_written=nbytes(a.x)), bound=True, api=())
def dropout(x: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False, *, generator=None) -> Tensor:
    """``nn.functional.dropout``: in training, zero each element with probability ``p`` and scale the
    rest by 1 / (1 - p); otherwise (inference) return ``x`` itself."""
    if not 0 <= p <= 1:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0:
        return x
    _check_float(x, "dropout")
    out = x if inplace else new_tensor(x.shape, x.dtype, x.device)
    if p == 1:
        return fill_(out, 0)
    src = x.contiguous()
    return _draw(out, K.MODE_DROPOUT.value, generator, a=p, b=1.0 / (1.0 - p), src=src)


# ---- samples ---------------------------------------------------------------------------------------

_DRAWN = dict(compare="metadata")  # draws from the random stream, whose numbers differ from torch's
_PROBABILITIES = operand(2, 3, values="unit")
_SAMPLES = {
    "rand": Samples((sample(2, 3, **_DRAWN), sample((0, 3), dtype=get_dtype("float64"), **_DRAWN))),
    "randn": Samples((sample(2, 3, **_DRAWN), sample([4], dtype=get_dtype("bfloat16"), **_DRAWN))),
    "rand_like": Samples((sample(operand(2, 3), **_DRAWN), sample(operand(0, 3, dtype="float64"), **_DRAWN))),
    "randn_like": Samples((sample(operand(2, 3), **_DRAWN), sample(operand(3, 2, layout="transposed"), **_DRAWN))),
    "randint": Samples((sample(5, (2, 3), **_DRAWN), sample(-2, 2, (4,), dtype=get_dtype("int32"), **_DRAWN))),
    "randint_like": Samples((sample(operand(2, 3, dtype="int64"), 5, **_DRAWN), sample(operand(3), 1, 4, **_DRAWN))),
    "uniform_": Samples((sample(operand(2, 3), **_DRAWN), sample(operand(4, dtype="float64"), -1.0, 1.0, **_DRAWN))),
    "normal_": Samples((sample(operand(2, 3), **_DRAWN), sample(operand(4, dtype="bfloat16"), 1.0, 0.5, **_DRAWN))),
    "exponential_": Samples((sample(operand(2, 3), **_DRAWN), sample(operand(4, dtype="float64"), 2.0, **_DRAWN))),
    "bernoulli_": Samples((sample(operand(2, 3), **_DRAWN), sample(operand(4), operand(4, values="unit"), **_DRAWN))),
    "bernoulli": Samples((sample(_PROBABILITIES, **_DRAWN), sample(operand(4), 0.3, **_DRAWN))),
    "multinomial": Samples((sample(operand(2, 4, values="positive"), 2, **_DRAWN),
                            sample(operand(4, values="positive"), 6, True, **_DRAWN))),
    "randperm": Samples((sample(5, **_DRAWN), sample(0, **_DRAWN), sample(4, dtype=get_dtype("int32"), **_DRAWN))),
    "dropout": Samples((sample(operand(2, 3), **_DRAWN), sample(operand(2, 3), 0.5, False),
                        sample(operand(2, 3), 0.0), sample(operand(2, 3), 1.0))),
}
family_samples("random", by_name(_SAMPLES))
