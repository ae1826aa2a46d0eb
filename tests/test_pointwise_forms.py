"""Pointwise ops: operators, in-place and out= forms, output layout, strided and broadcast inputs
(hypothesis), scalars and 0-d tensors, error messages, and the registry's meta and cost rules."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbxtensor as nbx
from nbxtensor.ops import registry
from nbxtensor.ops.pointwise import output_strides
from nbxtensor.ops.registry import TensorMeta
from tests.conftest import examples, to_nbx
from tests.test_copy import apply_plan, view_plan


def host(t):
    return np.array(t.numpy())


# ---- operators ----------------------------------------------------------------------------------

def test_operators_and_reflected_forms():
    a = to_nbx(np.array([6, -7, 8], np.int64))
    b = to_nbx(np.array([4, 2, -3], np.int64))
    av, bv = np.array([6, -7, 8]), np.array([4, 2, -3])
    cases = [
        (a + b, av + bv), (a - b, av - bv), (a * b, av * bv), (a // b, av // bv), (a % b, av % bv),
        (a & b, av & bv), (a | b, av | bv), (a ^ b, av ^ bv), (a << 2, av << 2), (a >> 1, av >> 1),
        (-a, -av), (abs(a), np.abs(av)), (~a, ~av), (+a, av),
        (10 + a, 10 + av), (10 - a, 10 - av), (3 * a, 3 * av), (100 // b, 100 // bv), (100 % b, 100 % bv),
        (2 ** a[:1], 2 ** av[:1]), (a ** 2, av ** 2), (1 << b[:2], 1 << bv[:2]), (5 & a, 5 & av),
        (a == b, av == bv), (a != 6, av != 6), (a < b, av < bv), (a <= 6, av <= 6), (a > b, av > bv),
        (a >= 8, av >= 8), (1 / b, 1 / bv), (a / b, av / bv),
    ]
    for got, expected in cases:
        np.testing.assert_allclose(host(got), expected, rtol=1e-6)
    assert (a / b).dtype is nbx.float32


def test_eq_keeps_tensors_hashable_and_handles_foreign_objects():
    a = to_nbx(np.array([1.0]))
    assert len({a, a}) == 1
    assert (a == None) is False  # noqa: E711
    assert (a == "x") is False
    with pytest.raises(TypeError):
        a + "x"


def test_inplace_operators_write_into_self():
    x = to_nbx(np.array([1.0, 2.0, 3.0], np.float32))
    alias = x
    x += 1
    x *= to_nbx(np.array([2.0], np.float32))
    x -= 0.5
    x /= 2
    x **= 2
    assert x is alias
    np.testing.assert_allclose(host(x), (((np.array([1, 2, 3]) + 1) * 2 - 0.5) / 2) ** 2)
    i = to_nbx(np.array([7, 8], np.int32))
    i //= 2
    i %= 3
    i <<= 1
    i |= 1
    assert i.tolist() == [1, 3] and i.dtype is nbx.int32


def test_inplace_on_a_strided_view_writes_only_the_view():
    base = to_nbx(np.arange(12, dtype=np.float32).reshape(3, 4))
    view = base[:, 1::2]
    view.add_(100)
    expected = np.arange(12, dtype=np.float32).reshape(3, 4)
    expected[:, 1::2] += 100
    np.testing.assert_array_equal(host(base), expected)
    base.T.mul_(2)
    np.testing.assert_array_equal(host(base), expected * 2)


def test_inplace_cast_rules_name_the_dtypes():
    ints = to_nbx(np.array([1, 2], np.int64))
    with pytest.raises(RuntimeError, match="result type float32 can't be cast to the desired output type int64"):
        ints.add_(1.5)
    with pytest.raises(RuntimeError, match="float32 can't be cast to the desired output type int64"):
        ints.div_(2)
    halves = to_nbx(np.array([1, 2], np.float16))
    halves.add_(to_nbx(np.array([0.5], np.float32)))  # float32 into float16 is a same-kind cast: allowed
    assert halves.tolist() == [1.5, 2.5] and halves.dtype is nbx.float16
    flags = to_nbx(np.array([True, False]))
    with pytest.raises(RuntimeError, match="int64 can't be cast to the desired output type bool"):
        flags.add_(1)
    lt = to_nbx(np.array([1.0, 5.0], np.float32))
    lt.lt_(2)  # a bool result goes into any dtype
    assert lt.tolist() == [1.0, 0.0]


def test_inplace_shape_and_overlap_errors():
    x = to_nbx(np.zeros((1, 2), np.float32))
    with pytest.raises(RuntimeError, match=r"output with shape \(1, 2\) doesn't match the broadcast shape \(2, 2\)"):
        x.add_(to_nbx(np.zeros((2, 1), np.float32)))
    expanded = to_nbx(np.zeros((1, 3), np.float32)).expand(2, 3)
    with pytest.raises(RuntimeError, match="more than one element"):
        expanded.add_(1)
    y = to_nbx(np.arange(6, dtype=np.float32))
    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        y[1:].add_(y[:-1])
    y.add_(y)  # the same elements, read then written: allowed
    assert y.tolist() == [0, 2, 4, 6, 8, 10]


def test_out_argument():
    a = to_nbx(np.array([1, 2], np.int64))
    out = nbx.empty(2, dtype=nbx.int8)
    result = nbx.add(a, a, out=out)
    assert result is out and out.tolist() == [2, 4]
    with pytest.raises(RuntimeError, match="float32 can't be cast to the desired output type int64"):
        nbx.div(a, a, out=nbx.empty(2, dtype=nbx.int64))
    with pytest.raises(RuntimeError, match=r"output with shape \(3,\) doesn't match the broadcast shape \(2,\)"):
        nbx.add(a, a, out=nbx.empty(3, dtype=nbx.int64))
    empty = nbx.empty(0, dtype=nbx.float32)
    nbx.mul(a, 1.5, out=empty)  # an empty out is resized, as ATen does
    assert tuple(empty.shape) == (2,) and empty.tolist() == [1.5, 3.0]
    flags = nbx.empty(2, dtype=nbx.float32)
    nbx.gt(a, 1, out=flags)
    assert flags.tolist() == [0.0, 1.0]


# ---- promotion with scalars and 0-d tensors -----------------------------------------------------

@pytest.mark.parametrize("tensor_dtype,scalar,expected", [
    ("int64", 2, "int64"), ("int64", 2.5, "float32"), ("int8", 2, "int8"), ("float16", 2.5, "float16"),
    ("bfloat16", 2, "bfloat16"), ("uint8", -1, "uint8"), ("bool", 2, "int64"), ("bool", True, "bool"),
    ("float32", 1j, "complex64"), ("int32", 1.0, "float32"),
])
def test_weak_scalar_promotion(tensor_dtype, scalar, expected):
    t = to_nbx(np.array([1, 0], dtype=nbx.get_dtype(tensor_dtype).numpy))
    assert (t + scalar).dtype.name == expected


def test_zero_dim_tensor_operands():
    x = to_nbx(np.array([1.0, 2.0], np.float16))
    zero_d = to_nbx(np.array(3.0, np.float64))
    out = x * zero_d
    assert out.dtype is nbx.float16 and out.tolist() == [3.0, 6.0]
    ints = to_nbx(np.array([1, 2], np.int32))
    assert (ints + to_nbx(np.array(5, np.int64))).dtype is nbx.int32
    assert (ints + to_nbx(np.array(0.5, np.float64))).dtype is nbx.float64  # a 0-d tensor keeps its own dtype
    assert (zero_d + zero_d).shape == ()


def test_host_scalar_tensor_joins_as_a_scalar():
    x = to_nbx(np.array([1.0, 2.0], np.float32))
    on_host = nbx.tensor(np.array(2.0, np.float32))
    assert (x * on_host).tolist() == [2.0, 4.0]


def test_fp16_scalar_computes_in_fp32_and_rounds_once():
    x = to_nbx(np.array([1.0, 1000.0], np.float16))
    # 1000 + 0.3 rounds once to the nearest float16 (the spacing there is 0.5)
    assert (x + 0.3).tolist() == [1.2998046875, 1000.5]
    y = to_nbx(np.array([2049.0], np.float32)).half()
    assert y.tolist() == [2048.0]


# ---- layouts, strides, broadcasting ---------------------------------------------------------------

def test_output_layout_follows_operands():
    base = to_nbx(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    permuted = base.permute(2, 0, 1)
    out = permuted + 1
    assert out.stride() == permuted.stride()  # a dense permuted input keeps its layout
    np.testing.assert_array_equal(host(out), host(permuted) + 1)
    assert (permuted + permuted.contiguous()).stride() == permuted.stride()  # the first operand decides
    assert (permuted.contiguous() + permuted).is_contiguous()
    sliced = base[:, :, ::2]
    assert (sliced * 2).is_contiguous()  # not dense: ordered by strides, which here is row-major


def test_output_strides_rule():
    assert output_strides((2, 3), [(3, 1), (0, 1)]) == (3, 1)
    assert output_strides((2, 3), [(1, 2), (0, 1)]) == (1, 2)
    assert output_strides((4, 3), [(0, 0), (1, 4)]) == (1, 4)


def test_rank_beyond_kernel_limit_and_zero_size():
    shape = (2, 1, 3, 2, 1, 2, 3, 2, 2, 3)
    a = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    t = to_nbx(a).permute(9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
    b = to_nbx(a[..., :1]).permute(9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
    np.testing.assert_array_equal(host(t - b), a.transpose(9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
                                  - a[..., :1].transpose(9, 8, 7, 6, 5, 4, 3, 2, 1, 0))
    empty = to_nbx(np.zeros((0, 3), np.float32))
    assert tuple((empty + to_nbx(np.ones(3, np.float32))).shape) == (0, 3)


def test_bad_shapes_name_the_shapes():
    with pytest.raises(RuntimeError, match=r"shapes \(2, 3\) and \(4,\) cannot be broadcast"):
        to_nbx(np.zeros((2, 3))) + to_nbx(np.zeros(4))
    with pytest.raises(RuntimeError, match=r"\(2, 3\).*\(2,\).*\(3, 1\)"):
        nbx.where(to_nbx(np.zeros((2, 3), bool)), to_nbx(np.zeros(2)), to_nbx(np.zeros((3, 1))))


_DTYPES = ["float32", "float16", "bfloat16", "int32", "int8", "uint8", "bool", "float64"]


@st.composite
def strided_pair(draw):
    """Two operands of one broadcast shape: random views (permuted, sliced, stepped) with some dims
    of extent 1 in the second, and independent dtypes."""
    rank = draw(st.integers(0, 4))
    shape = tuple(draw(st.integers(1, 4)) for _ in range(rank))
    second = tuple(1 if draw(st.booleans()) else n for n in shape)
    second = second[draw(st.integers(0, rank)):]
    plans = [view_plan(draw, s) for s in (shape, second)]
    dtypes = [draw(st.sampled_from(_DTYPES)) for _ in range(2)]
    op = draw(st.sampled_from(["add", "mul", "maximum", "where", "lt", "addcmul"]))
    return plans, dtypes, op


def _reference(op, a, b):
    if op == "add":
        return a + b
    if op == "mul":
        return a * b
    if op == "maximum":
        return np.maximum(a, b)
    if op == "lt":
        return a < b
    if op == "where":
        return np.where(a != 0, b, a)
    return a + b * a


def _values(shape, dtype, rng):
    values = rng.integers(0, 4, size=shape)
    return values.astype(bool) if dtype == "bool" else values.astype(nbx.get_dtype(dtype).numpy)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(strided_pair())
def test_hypothesis_strided_broadcast_dtypes(case):
    plans, dtypes, op = case
    rng = np.random.default_rng(0)
    arrays, tensors = [], []
    for (base_shape, slices, perm_back), dt in zip(plans, dtypes):
        base = _values(base_shape, dt, rng)
        arrays.append(apply_plan(base, slices, perm_back))
        tensors.append(apply_plan(to_nbx(base), slices, perm_back))
    a, b = tensors
    if op == "where":
        got = nbx.where(a != 0, b, a)
    elif op == "addcmul":
        got = nbx.addcmul(a, b, a)
    else:
        got = getattr(nbx, op)(a, b)
    result = nbx.result_type(a, b)
    if op == "lt":
        result = nbx.bool
    # small integers: every dtype holds every result exactly, except sums that overflow int8/uint8 (none do)
    expected = _reference(op, arrays[0].astype(np.float64), arrays[1].astype(np.float64))
    if result.kind == "bool":
        expected = expected != 0
    assert got.dtype is result
    assert tuple(got.shape) == expected.shape
    np.testing.assert_array_equal(host(got).astype(np.float64), expected.astype(np.float64))


# ---- registry -------------------------------------------------------------------------------------

def test_every_table_op_is_registered_with_aten_names():
    from nbxtensor.ops.pointwise_table import TABLE
    names = {op.name for op in registry.all_ops() if op.family == "pointwise"}
    for row in TABLE:
        assert row.name in names
    assert registry.lookup("aten::add.Tensor").name == "add"
    assert registry.lookup("aten::add_.Tensor").name == "add_"
    assert registry.lookup("aten::__lshift__.Scalar").name == "bitwise_left_shift"
    assert registry.lookup("aten::gelu").name == "gelu"


def test_meta_and_cost_rules():
    add = registry.get("add")
    a, b = TensorMeta((4, 1), nbx.bfloat16), TensorMeta((3,), nbx.float32)
    assert add.meta(a, b) == TensorMeta((4, 3), nbx.float32)
    assert add.meta(a, 2.5) == TensorMeta((4, 1), nbx.bfloat16)
    cost = add.cost(a, b)
    assert cost.bytes_read == 4 * 2 + 3 * 4 and cost.bytes_written == 12 * 4 and cost.flops == 12
    assert registry.get("sqrt").meta(TensorMeta((5,), nbx.int64)) == TensorMeta((5,), nbx.float32)
    assert registry.get("eq").meta(a, b).dtype is nbx.bool
    assert registry.get("glu").meta(TensorMeta((2, 6), nbx.float32)) == TensorMeta((2, 3), nbx.float32)
    assert registry.get("tanh").cost(TensorMeta((10,), nbx.float32)).flops == 200
    x = to_nbx(np.ones((4, 1), np.float32))
    assert tuple(add(x, to_nbx(np.ones(3, np.float32))).shape) == add.meta(x, TensorMeta((3,), nbx.float32)).shape


def test_functional_namespace():
    import nbxtensor.nn.functional as F
    for name in ("relu", "relu_", "relu6", "leaky_relu", "elu", "celu", "selu", "gelu", "silu", "mish", "softplus",
                 "softsign", "hardsigmoid", "hardswish", "hardtanh", "threshold", "logsigmoid", "glu", "sigmoid",
                 "tanh"):
        assert callable(getattr(F, name)), name
    x = to_nbx(np.array([-1.0, 2.0], np.float32))
    y = F.relu(x, inplace=True)
    assert y is x and x.tolist() == [0.0, 2.0]
    z = to_nbx(np.array([-1.0, 2.0], np.float32))
    assert F.leaky_relu(z, 0.5, True) is z and z.tolist() == [-0.5, 2.0]
    assert nbx.relu_ is not None and to_nbx(np.array([-3.0])).relu().tolist() == [0.0]


def test_masked_fill_reads_a_device_value_tensor_without_a_sync(monkeypatch):
    x = to_nbx(np.arange(6, dtype=np.float32).reshape(2, 3))
    mask = to_nbx(np.array([True, False, True]))
    value = to_nbx(np.array(-1.5, np.float64))

    def no_sync(self):
        raise AssertionError("item() would wait for the device")

    monkeypatch.setattr(nbx.Tensor, "item", no_sync)
    for _ in range(2):  # the first call plans, the second runs the plan
        filled = x.masked_fill(mask, value)
        np.testing.assert_array_equal(host(filled), np.where([True, False, True], -1.5, np.arange(6).reshape(2, 3)))
    x.t().masked_fill_(mask.reshape(3, 1), value)
    np.testing.assert_array_equal(host(x), np.where([[True], [False], [True]], -1.5, np.arange(6).reshape(2, 3).T).T)


def test_masked_fill_meta_cost_and_names():
    assert registry.lookup("aten::masked_fill.Tensor").name == "masked_fill"
    assert registry.lookup("aten::masked_fill_.Scalar").name == "masked_fill_"
    meta = registry.get("masked_fill").meta(TensorMeta((2, 1), nbx.float16), TensorMeta((3,), nbx.bool), 0.5)
    assert meta == TensorMeta((2, 3), nbx.float16)
    cost = registry.get("masked_fill").cost(TensorMeta((2, 3), nbx.float32), TensorMeta((3,), nbx.bool), 0.5)
    assert cost.bytes_read == 2 * 3 * 4 + 3 and cost.bytes_written == 2 * 3 * 4
    assert not hasattr(nbx, "masked_fill_") and hasattr(nbx.Tensor, "masked_fill_")
