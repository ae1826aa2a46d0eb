"""Promotion conformance against torch, the oracle: every dtype pair, and tensors (dimensioned and
0-d) mixed with Python scalars. Where torch raises, nbxtensor raises; where torch answers complex32
(which nbxtensor does not have), nbxtensor raises a TypeError that names it."""
import itertools

import pytest

import nbxtensor as nbx

torch = pytest.importorskip("torch")

DTYPE_NAMES = [d.name for d in nbx.all_dtypes]
SCALARS = [True, 3, 2.5, 1.5j]


def torch_dtype(name):
    return getattr(torch, name)


def nbx_operand(kind, name_or_scalar):
    """An nbx operand: a dimensioned or 0-d tensor (no kernel runs: empty only allocates), or a scalar."""
    if kind == "dim":
        return nbx.empty(2, dtype=name_or_scalar)
    if kind == "zero_dim":
        return nbx.empty((), dtype=name_or_scalar)
    return name_or_scalar


def torch_operand(kind, name_or_scalar):
    if kind == "dim":
        return torch.empty(2, dtype=torch_dtype(name_or_scalar), device="meta")
    if kind == "zero_dim":
        return torch.empty((), dtype=torch_dtype(name_or_scalar), device="meta")
    return name_or_scalar


OPERANDS = ([("dim", n) for n in DTYPE_NAMES] + [("zero_dim", n) for n in DTYPE_NAMES]
            + [("scalar", s) for s in SCALARS])


def torch_outcome(fn):
    """torch's dtype name, or 'raises' / 'complex32' (which nbxtensor must refuse)."""
    try:
        result = fn()
    except RuntimeError:
        return "raises"
    return "complex32" if result == torch.complex32 else str(result).removeprefix("torch.")


def assert_matches(expected, fn, context):
    if expected == "raises":
        with pytest.raises((TypeError, RuntimeError)):
            fn()
    elif expected == "complex32":
        with pytest.raises(TypeError, match="complex32"):
            fn()
    else:
        got = fn()
        assert got.name == expected, f"{context}: nbxtensor {got.name}, torch {expected}"


@pytest.mark.parametrize("a", DTYPE_NAMES)
def test_promote_types_matches_torch_for_every_pair(a):
    for b in DTYPE_NAMES:
        expected = torch_outcome(lambda: torch.promote_types(torch_dtype(a), torch_dtype(b)))
        assert_matches(expected, lambda: nbx.promote_types(a, b), f"promote_types({a}, {b})")


def test_mixed_float8_promotion_raises_like_torch():
    with pytest.raises(TypeError, match="float8"):
        nbx.promote_types("float8_e4m3fn", "float8_e5m2")
    with pytest.raises(RuntimeError):  # torch raises RuntimeError; ours is both kinds of error
        nbx.promote_types("float8_e5m2", "float32")
    assert nbx.promote_types("float8_e5m2", "float8_e5m2") is nbx.float8_e5m2


@pytest.mark.parametrize("first", OPERANDS, ids=lambda o: f"{o[0]}-{o[1]}")
def test_result_type_matches_torch_for_every_pair_of_operands(first):
    for second in OPERANDS:
        if first[0] == "scalar" and second[0] == "scalar":
            continue  # covered below: torch.result_type wants at least one of them as a number pair
        expected = torch_outcome(lambda: torch.result_type(torch_operand(*first), torch_operand(*second)))
        assert_matches(expected, lambda: nbx.result_type(nbx_operand(*first), nbx_operand(*second)),
                       f"result_type({first}, {second})")


@pytest.mark.parametrize("first, second", list(itertools.product(SCALARS, SCALARS)))
def test_result_type_of_two_python_scalars_matches_torch(first, second):
    expected = torch_outcome(lambda: torch.result_type(first, second))
    assert_matches(expected, lambda: nbx.result_type(first, second), f"result_type({first!r}, {second!r})")


TENSOR_OPERANDS = [o for o in OPERANDS if o[0] != "scalar"]
# torch names the common dtype when addcmul has no kernel for it
KERNEL_DTYPE_NAMES = {"'Bool'": "bool", "'Float8_e4m3fn'": "float8_e4m3fn", "'Float8_e5m2'": "float8_e5m2"}


def torch_addcmul_dtype(a, b, c):
    """The dtype ATen's three-input TensorIterator settles on (on the CPU: the meta path decomposes
    differently for float8)."""
    def as_cpu(kind, name):
        return torch.zeros(2 if kind == "dim" else (), dtype=torch_dtype(name))

    try:
        return torch.addcmul(as_cpu(*a), as_cpu(*b), as_cpu(*c)).dtype
    except RuntimeError as e:
        for quoted, name in KERNEL_DTYPE_NAMES.items():
            if str(e).endswith(f"not implemented for {quoted}"):
                return torch_dtype(name)
        raise


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
def test_result_type_of_three_tensors_matches_torch():
    """torch.result_type takes two operands; a three-input op (addcmul) shows ATen's rule over three,
    dimensioned and 0-d together."""
    checked = 0
    for a, b, c in itertools.product(TENSOR_OPERANDS, repeat=3):
        if a[0] != "dim":
            continue  # addcmul's output takes the first input's shape; a 0-d first would make every input 0-d
        expected = torch_outcome(lambda: torch_addcmul_dtype(a, b, c))
        assert_matches(expected, lambda: nbx.result_type(nbx_operand(*a), nbx_operand(*b), nbx_operand(*c)),
                       f"result_type({a}, {b}, {c})")
        checked += 1
    assert checked == len(DTYPE_NAMES) * len(TENSOR_OPERANDS) ** 2


@pytest.mark.parametrize("default", ["float64", "float16", "bfloat16"])
def test_result_type_with_another_default_dtype_matches_torch(default):
    previous_nbx, previous_torch = nbx.get_default_dtype(), torch.get_default_dtype()
    nbx.set_default_dtype(default)
    torch.set_default_dtype(torch_dtype(default))
    try:
        for first in OPERANDS:
            for scalar in SCALARS:
                expected = torch_outcome(lambda: torch.result_type(torch_operand(*first), scalar))
                assert_matches(expected, lambda: nbx.result_type(nbx_operand(*first), scalar),
                               f"default {default}: result_type({first}, {scalar!r})")
    finally:
        nbx.set_default_dtype(previous_nbx)
        torch.set_default_dtype(previous_torch)


@pytest.mark.parametrize("source", DTYPE_NAMES)
def test_can_cast_matches_torch_for_every_pair(source):
    for target in DTYPE_NAMES:
        expected = torch.can_cast(torch_dtype(source), torch_dtype(target))
        assert nbx.can_cast(source, target) == expected, f"can_cast({source}, {target})"
