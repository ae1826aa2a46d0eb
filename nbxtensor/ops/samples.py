"""Sample inputs of registry ops, as descriptions: what each operand is (shape, dtype, layout, the kind of
values it holds) and the other arguments, never the values themselves. Tests materialise them on their
device with a seeded generator and derive generic checks from them for every op (``tests/test_samples.py``).

An op declares its samples with ``register(samples=)`` or through its family's default
(``registry.family_samples``): a function of the op returning ``Samples``, or None where it has none. A
``reference`` computes the op in NumPy float64 from the operands' values; ops without one are compared
with torch where it is installed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

__all__ = ["Operand", "Sample", "Samples", "LAYOUTS", "VALUES", "VALUES_COMPARED", "operand", "index_operand", "sample",
           "unary_samples", "operands_of", "by_name", "reduction_samples", "scan_samples", "numpy_axis"]

# how an operand's elements lie in memory: ``transposed`` swaps its last two dims' strides, ``sliced`` takes
# every other element of its last dim, ``broadcast`` repeats its first dim with stride 0
LAYOUTS = ("contiguous", "transposed", "sliced", "broadcast")
# what values an operand holds: ``normal`` standard normal (small integers for integer dtypes, both for
# bool), ``positive`` in [0.5, 3] (1 to 5 for integers), ``domain`` uniform in ``domain``, ``edge`` ±0, ±inf,
# nan, ±1, the dtype's extremes and tiny values cycled (integers: their extremes, 0 and ±1), ``index``
# integers in [``domain[0]``, ``domain[1]``), ``distinct`` such integers no two alike (indices whose writes
# never collide), ``ascending`` such integers in non-decreasing order (cumulative ends), ``unit`` in (0, 1);
# square matrices in the last two dims: ``invertible`` (normal plus n on the diagonal), ``spd`` (symmetric
# positive definite: a Gram matrix plus n on the diagonal)
VALUES = ("normal", "positive", "domain", "edge", "index", "distinct", "ascending", "unit", "invertible", "spd")
# how a sample's results are compared: ``values`` elementwise with the oracle; ``metadata`` only shapes and
# dtypes (random draws, results that are not unique)
VALUES_COMPARED = ("values", "metadata")


@dataclass(frozen=True)
class Operand:
    shape: tuple
    dtype: str = "float32"
    layout: str = "contiguous"
    values: str = "normal"
    domain: tuple | None = None

    def __post_init__(self):
        if self.layout not in LAYOUTS:
            raise ValueError(f"operand layout {self.layout!r} is none of {LAYOUTS}")
        if self.values not in VALUES:
            raise ValueError(f"operand values {self.values!r} are none of {VALUES}")
        if self.layout == "transposed" and len(self.shape) < 2:
            raise ValueError(f"a transposed operand needs two dims, not shape {self.shape}")
        if self.layout in ("sliced", "broadcast") and not self.shape:
            raise ValueError(f"a {self.layout} operand needs a dim")


@dataclass(frozen=True)
class Sample:
    args: tuple
    kwargs: dict = field(default_factory=dict)
    compare: str = "values"

    def __post_init__(self):
        if self.compare not in VALUES_COMPARED:
            raise ValueError(f"sample comparison {self.compare!r} is none of {VALUES_COMPARED}")


@dataclass(frozen=True)
class Samples:
    cases: tuple
    # reference(*args, **kwargs) with operands as NumPy arrays (floating ones as float64) -> the result(s)
    reference: Callable | None = None


def operand(*shape, dtype="float32", layout="contiguous", values="normal", domain=None) -> Operand:
    return Operand(tuple(shape), dtype, layout, values, domain)


def index_operand(count: int, *shape, distinct=False) -> Operand:
    """An int64 index operand of ``shape`` into a dim of ``count``; ``distinct``: no two alike."""
    return operand(*shape, dtype="int64", values="distinct" if distinct else "index", domain=(0, count))


def sample(*args, compare="values", **kwargs) -> Sample:
    return Sample(tuple(args), kwargs, compare)


def unary_samples(dtypes=("float32", "bfloat16"), values="normal", domain=None, edge=True, **kwargs) -> tuple:
    """The samples of an op of one tensor: a matrix, the same transposed, a 0-d and a 0-size operand in the
    first dtype, a sliced vector in the second, and edge values (``edge``)."""
    first, second = dtypes[0], dtypes[-1]
    described = dict(values=values, domain=domain)
    cases = [sample(operand(2, 3, dtype=first, **described), **kwargs),
             sample(operand(3, 2, dtype=first, layout="transposed", **described), **kwargs),
             sample(operand(dtype=first, **described), **kwargs),
             sample(operand(0, 3, dtype=first, **described), **kwargs),
             sample(operand(4, dtype=second, layout="sliced", **described), **kwargs)]
    if edge:
        cases.append(sample(operand(12, dtype=first, values="edge"), **kwargs))
    return tuple(cases)


def operands_of(value) -> list:
    """The operands in ``value`` (a sample's argument), in nested lists and tuples too."""
    if isinstance(value, Operand):
        return [value]
    if isinstance(value, (list, tuple)):
        return [found for item in value for found in operands_of(item)]
    if isinstance(value, dict):
        return [found for item in value.values() for found in operands_of(item)]
    return []


def by_name(table: dict) -> Callable:
    """A family default serving the ops named in ``table`` (op name: ``Samples``)."""
    def samples(op):
        return table.get(op.name)
    return samples


def reduction_samples(dtypes=("float32", "int64"), values="normal", dim_required=False, keepdim=True,
                      several_dims=True, **kwargs) -> tuple:
    """The samples of a reduction ``op(input, dim=, keepdim=)``: over everything (unless ``dim_required``),
    a transposed matrix along its rows, two dims (one where not ``several_dims``) kept (where it has
    ``keepdim``), a 0-d input, a 0-size input along a non-empty dim, a sliced input in the second dtype;
    ``kwargs`` added to each."""
    first, second = dtypes[0], dtypes[-1]
    kept = dict(keepdim=True) if keepdim else {}
    cases = [sample(operand(3, 2, dtype=first, layout="transposed", values=values), dim=1, **kwargs),
             sample(operand(2, 3, 2, dtype=first, values=values), dim=(0, 2) if several_dims else 2, **kept,
                    **kwargs),
             sample(operand(dtype=first, values=values), dim=0, **kwargs),
             sample(operand(0, 3, dtype=first, values=values), dim=1, **kwargs),
             sample(operand(2, 4, dtype=second, layout="sliced", values=values), dim=0, **kwargs)]
    if not dim_required:
        cases.insert(0, sample(operand(2, 3, dtype=first, values=values), **kwargs))
    return tuple(cases)


def scan_samples(dtypes=("float32", "int64"), values="normal") -> tuple:
    """The samples of a scan ``op(input, dim)``."""
    first, second = dtypes[0], dtypes[-1]
    return (sample(operand(2, 3, dtype=first, values=values), 1),
            sample(operand(3, 2, dtype=first, layout="transposed", values=values), 0),
            sample(operand(dtype=first, values=values), 0),
            sample(operand(0, 3, dtype=first, values=values), 1),
            sample(operand(2, 4, dtype=second, layout="sliced", values=values), -1))


def numpy_axis(dim):
    """A torch ``dim`` (None, (), an int or a sequence) as NumPy's ``axis``: every dim for None and ()."""
    if dim is None or (isinstance(dim, (tuple, list)) and not dim):
        return None
    return tuple(dim) if isinstance(dim, (tuple, list)) else dim
