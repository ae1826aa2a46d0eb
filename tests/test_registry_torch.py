"""Every ATen name the registry claims is an overload torch has, and the registry's rules take its arguments."""
import inspect

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import nbxtensor as nbx  # noqa: E402
from nbxtensor.graph import calling  # noqa: E402
from nbxtensor.ops import registry  # noqa: E402

# the graph runs on one device with dense tensors: the exporter drops these
_DROPPED = frozenset(("device", "layout", "pin_memory"))


def _schemas() -> dict:
    return {f"{s.name}.{s.overload_name or 'default'}": s for s in torch._C._jit_get_all_schemas()}


def _claimed() -> list[tuple[registry.OpDef, str]]:
    return [(op, name) for op in registry.all_ops() for name in op.aten if name.startswith("aten::")]


def test_every_aten_name_is_a_torch_overload():
    schemas = _schemas()
    wrong = sorted(f"{name} ({op.name})" for op, name in _claimed() if name not in schemas)
    assert not wrong, f"{len(wrong)} registry ATen names that torch does not have: {', '.join(wrong)}"


@pytest.mark.parametrize("aten_name, op_name", [
    ("aten::minimum.default", "minimum"), ("aten::maximum.default", "maximum"), ("aten::atan2.default", "atan2"),
    ("aten::floor_divide.default", "floor_divide"), ("aten::threshold.default", "threshold"),
    ("aten::add.Tensor", "add"), ("aten::eq.Scalar", "eq"), ("aten::remainder.Tensor_out", "remainder"),
])
def test_real_overloads_reach_the_registry(aten_name, op_name):
    assert registry.lookup(aten_name).name == op_name


def test_rules_and_implementation_take_the_schema_arguments():
    """A call as ATen writes it (every positional argument, every keyword-only one the exporter keeps),
    through the graph's adapter, binds to the op's implementation, meta rule and cost rule."""
    schemas = _schemas()
    refused = []
    for op, name in _claimed():
        schema = schemas[name]
        args = tuple(object() for a in schema.arguments if not a.kwarg_only)
        kwargs = {a.name: object() for a in schema.arguments if a.kwarg_only and a.name not in _DROPPED}
        args, kwargs = calling.adapt(name, args, kwargs)
        for rule in ("impl", "meta", "cost"):
            try:
                signature = inspect.signature(getattr(op, rule))
            except ValueError:  # a builtin without a signature
                continue
            try:
                signature.bind(*args, **kwargs)
            except TypeError as error:
                refused.append(f"{name} {rule}: {error}")
    assert not refused, "\n".join(refused)


def test_aten_elu_scale_arguments_reach_the_kernel():
    import numpy as np

    import nbxtensor as nbx
    x = np.linspace(-3, 3, 13, dtype=np.float32)
    op = registry.lookup("aten::elu.default")
    args, kwargs = calling.adapt("aten::elu.default", (nbx.tensor(x), 0.5, 2.0, 1.5), {})
    got = op.impl(*args, **kwargs).numpy()
    x64 = x.astype(np.float64)
    want = 2.0 * np.where(x64 > 0, x64, 0.5 * (np.exp(1.5 * x64) - 1))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _frexp_outcome(frexp, x, out):
    """(mantissa, exponent) as lists, or the kind of error."""
    try:
        result = frexp(x, out=out)
    except RuntimeError:
        return "refused"
    return [result[0].tolist(), result[1].tolist()]


@pytest.mark.parametrize("mantissa_dtype, exponent_dtype, size", [
    ("float32", "int32", 2), ("float32", "int32", 0), ("float32", "int64", 2), ("float32", "int16", 2),
    ("float64", "int32", 2), ("bfloat16", "int32", 2)])
def test_frexp_out_takes_the_dtypes_torch_takes(mantissa_dtype, exponent_dtype, size):
    x = np.array([1.5, -3.0], np.float32)
    nbx_out = tuple(nbx.empty((size,), dtype=getattr(nbx, d)) for d in (mantissa_dtype, exponent_dtype))
    torch_out = tuple(torch.empty(size, dtype=getattr(torch, d)) for d in (mantissa_dtype, exponent_dtype))
    assert _frexp_outcome(nbx.frexp, nbx.tensor(x), nbx_out) == _frexp_outcome(torch.frexp, torch.tensor(x),
                                                                               torch_out)
