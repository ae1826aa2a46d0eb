"""Conformance defects found by running PyTorch's OpInfo samples against nbxtensor, each checked against a
NumPy reference (integer products in int64 NumPy, wrapped to the operands' width as torch wraps them)."""
import json

import numpy as np
import pytest

import nbxtensor as nbx

from .conftest import TEST_DEVICE, cpu_kernels, to_nbx
from .test_compile_check import _check, _record


# ---- integer matrix products: exact, in the operands' dtype, wrapping on overflow ----------------------
def _ints(rng, shape, dtype):
    low = 0 if dtype == "uint8" else -50
    return rng.integers(low, 50, shape).astype(dtype)


def _wrapped(product, dtype):
    """An int64 NumPy product (itself wrapped mod 2^64) reduced to ``dtype``'s width."""
    return product.astype(np.int64).astype(dtype)


@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "uint8"])
def test_integer_mm_bmm_matmul_are_exact(rng, dtype):
    a, b = _ints(rng, (5, 9), dtype), _ints(rng, (9, 3), dtype)
    wide = a.astype(np.int64) @ b.astype(np.int64)
    for result in (nbx.mm(to_nbx(a), to_nbx(b)), nbx.matmul(to_nbx(a), to_nbx(b)),
                   nbx.einsum("ij,jk->ik", to_nbx(a), to_nbx(b))):
        assert result.dtype.name == dtype
        np.testing.assert_array_equal(result.numpy(), _wrapped(wide, dtype))
    a3, b3 = _ints(rng, (2, 3, 4), dtype), _ints(rng, (2, 4, 2), dtype)
    np.testing.assert_array_equal(nbx.bmm(to_nbx(a3), to_nbx(b3)).numpy(),
                                  _wrapped(a3.astype(np.int64) @ b3.astype(np.int64), dtype))


def test_integer_products_wrap_as_torch_does():
    big = np.array([[2 ** 62 + 3, 2 ** 40 + 1], [-(2 ** 61), 7]], np.int64)
    wide = np.array([[sum(int(big[i, j]) * int(big[j, c]) for j in range(2)) for c in range(2)] for i in range(2)])
    expected = ((wide + 2 ** 63) % 2 ** 64 - 2 ** 63).astype(np.int64)
    np.testing.assert_array_equal(nbx.mm(to_nbx(big), to_nbx(big)).numpy(), expected)
    small = np.full((3, 40), 2 ** 15 + 1, np.int32)
    wide32 = small.astype(np.int64) @ small.T.astype(np.int64)
    np.testing.assert_array_equal(nbx.mm(to_nbx(small), to_nbx(small.T.copy())).numpy(), wide32.astype(np.int32))


@pytest.mark.parametrize("dtype", ["int64", "int32"])
def test_integer_vector_products(rng, dtype):
    m, v, w = _ints(rng, (4, 6), dtype), _ints(rng, (6,), dtype), _ints(rng, (4,), dtype)
    i64 = np.int64
    np.testing.assert_array_equal(nbx.mv(to_nbx(m), to_nbx(v)).numpy(), m.astype(i64) @ v.astype(i64))
    for op in (nbx.dot, nbx.vdot):
        result = op(to_nbx(v), to_nbx(v))
        assert result.shape == () and result.dtype.name == dtype
        assert int(result.numpy()) == int(v.astype(i64) @ v.astype(i64))
    np.testing.assert_array_equal(nbx.outer(to_nbx(w), to_nbx(v)).numpy(), np.outer(w, v))


@pytest.mark.parametrize("dtype", ["int64", "int32"])
def test_integer_products_with_alpha_beta_and_input(rng, dtype):
    i64 = np.int64
    a, b, c = _ints(rng, (3, 5), dtype), _ints(rng, (5, 4), dtype), _ints(rng, (3, 4), dtype)
    got = nbx.addmm(to_nbx(c), to_nbx(a), to_nbx(b), beta=3, alpha=-2).numpy()
    np.testing.assert_array_equal(got, 3 * c.astype(i64) - 2 * (a.astype(i64) @ b.astype(i64)))
    bias_row = _ints(rng, (4,), dtype)
    np.testing.assert_array_equal(nbx.addmm(to_nbx(bias_row), to_nbx(a), to_nbx(b)).numpy(),
                                  bias_row + a.astype(i64) @ b.astype(i64))
    v = _ints(rng, (5,), dtype)
    np.testing.assert_array_equal(nbx.addmv(to_nbx(c[:, 0].copy()), to_nbx(a), to_nbx(v), beta=2).numpy(),
                                  2 * c[:, 0].astype(i64) + a.astype(i64) @ v.astype(i64))
    x, y = _ints(rng, (3,), dtype), _ints(rng, (4,), dtype)
    np.testing.assert_array_equal(nbx.addr(to_nbx(c), to_nbx(x), to_nbx(y), alpha=5).numpy(),
                                  c + 5 * np.outer(x.astype(i64), y.astype(i64)))
    a3, b3, c3 = _ints(rng, (2, 3, 5), dtype), _ints(rng, (2, 5, 2), dtype), _ints(rng, (2, 3, 2), dtype)
    np.testing.assert_array_equal(nbx.baddbmm(to_nbx(c3), to_nbx(a3), to_nbx(b3), beta=0).numpy(),
                                  a3.astype(i64) @ b3.astype(i64))
    weight, bias = _ints(rng, (4, 5), dtype), _ints(rng, (4,), dtype)
    got = nbx.nn.functional.linear(to_nbx(a), to_nbx(weight), to_nbx(bias))
    assert got.dtype.name == dtype
    np.testing.assert_array_equal(got.numpy(), a.astype(i64) @ weight.T.astype(i64) + bias)


def test_integer_product_with_empty_inner_dim_is_zeros_plus_input():
    a, b, c = np.zeros((2, 0), np.int64), np.zeros((0, 3), np.int64), np.arange(6, dtype=np.int64).reshape(2, 3)
    np.testing.assert_array_equal(nbx.addmm(to_nbx(c), to_nbx(a), to_nbx(b)).numpy(), c)


def test_integer_products_refuse_float_scalars():
    a = to_nbx(np.ones((2, 2), np.int64))
    with pytest.raises(RuntimeError, match="alpha and beta must be integers"):
        nbx.addmm(a, a, a, alpha=0.5)


def test_bool_outer_and_addr_follow_logical_rules():
    v, w = np.array([True, False, True]), np.array([False, True])
    base = np.array([[True, False], [False, False], [False, True]])
    np.testing.assert_array_equal(nbx.outer(to_nbx(v), to_nbx(w)).numpy(), np.logical_and.outer(v, w))
    for alpha in (True, False):
        for beta in (True, False):
            got = nbx.addr(to_nbx(base), to_nbx(v), to_nbx(w), alpha=alpha, beta=beta)
            assert got.dtype.name == "bool"
            expected = (beta & base) | (alpha & np.logical_and.outer(v, w))
            np.testing.assert_array_equal(got.numpy(), expected)


def test_bool_sums_of_products_are_refused_as_torch_refuses_them():
    x = to_nbx(np.ones((2, 2), bool))
    with pytest.raises(TypeError, match="bool operands are not supported"):
        nbx.mm(x, x)


# ---- einsum of one operand: diagonals, sums, permutations -------------------------------------------------
@pytest.mark.parametrize("equation, shape", [
    ("i->", (5,)), ("ij->i", (3, 4)), ("ij->j", (3, 4)), ("i...->...", (2, 3, 4)), ("...i->...", (2, 3, 4)),
    ("ii->i", (3, 3)), ("ii->", (3, 3)), ("ii", (3, 3)), ("ij->ji", (3, 4)), ("ijk->kj", (2, 3, 4)),
    ("iji->j", (2, 3, 2)), ("iij->ji", (2, 2, 3)), ("i->", (0,)),
])
def test_einsum_of_one_operand(rng, equation, shape):
    x = rng.standard_normal(shape).astype(np.float32)
    got = nbx.einsum(equation, to_nbx(x))
    expected = np.einsum(equation, x.astype(np.float64))
    assert tuple(got.shape) == expected.shape and got.dtype.name == "float32"
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_einsum_of_one_operand_sums_integers_to_int64_as_sum_does():
    x = np.arange(9, dtype=np.int32).reshape(3, 3)
    trace = nbx.einsum("ii->", to_nbx(x))
    assert trace.dtype.name == "int64" and int(trace.numpy()) == 12
    diagonal = nbx.einsum("ii->i", to_nbx(x))
    assert diagonal.dtype.name == "int32"
    np.testing.assert_array_equal(diagonal.numpy(), [0, 4, 8])


def test_einsum_of_one_operand_declares_a_cost():
    from nbxtensor.ops import registry
    from nbxtensor.ops.registry import TensorMeta
    x = TensorMeta((3, 3), nbx.float32)
    op = registry.get("einsum")
    assert op.cost("ij->i", x).bytes_read == 36
    assert op.meta("ii->", x).shape == ()


def test_einsum_repeated_index_of_unequal_extents_is_refused():
    with pytest.raises(RuntimeError, match="index 'i' is 2"):
        nbx.einsum("ii->i", to_nbx(np.zeros((2, 3), np.float32)))


# ---- indexing and shape corners ---------------------------------------------------------------------
def test_take_along_dim_wraps_negative_indices_along_dim():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    index = np.array([[-1], [0], [-4]])
    got = nbx.take_along_dim(to_nbx(x), to_nbx(index), dim=1)
    np.testing.assert_array_equal(got.numpy(), np.take_along_axis(x, index % 4, axis=1))
    got = nbx.take_along_dim(to_nbx(x), to_nbx(np.array([[-3, 2, -1, 0]])), dim=0)
    np.testing.assert_array_equal(got.numpy(), x[[0, 2, 2, 0], [0, 1, 2, 3]][None])


def test_take_along_dim_still_refuses_indices_past_either_end():
    x = to_nbx(np.zeros((2, 3), np.float32))
    for bad in (-4, 3):
        # a device the host cannot read reports it at the next synchronisation, naming only the op
        message = (rf"take_along_dim: index {bad} is out of bounds for dimension 1 with size 3" if TEST_DEVICE == "cpu"
                   else "take_along_dim: index out of range")
        with pytest.raises(IndexError, match=message):
            nbx.take_along_dim(x, to_nbx(np.array([[bad], [0]])), dim=1).numpy()


def test_gather_and_scatter_take_an_empty_index_of_any_dtype():
    x = to_nbx(np.arange(6, dtype=np.float32).reshape(2, 3))
    empty = to_nbx(np.zeros((2, 0), np.uint8))
    assert tuple(nbx.gather(x, 1, empty).shape) == (2, 0)
    np.testing.assert_array_equal(x.scatter(1, empty, to_nbx(np.zeros((2, 0), np.float32))).numpy(), x.numpy())
    with pytest.raises(IndexError, match="int64 or int32"):
        nbx.gather(x, 1, to_nbx(np.zeros((2, 1), np.uint8)))


def test_index_add_on_bool_with_a_bool_alpha():
    base = np.array([False, True, False])
    index, source = np.array([0, 2]), np.array([True, True])
    for alpha in (False, True):
        got = nbx.index_add(to_nbx(base), 0, to_nbx(index), to_nbx(source), alpha=alpha)
        assert got.dtype.name == "bool"
        np.testing.assert_array_equal(got.numpy(), [alpha, True, alpha])


@pytest.mark.parametrize("shape, dim", [((2, 0), 1), ((0, 3), 0)])
def test_unique_consecutive_over_a_zero_size_dim(shape, dim):
    x = to_nbx(np.zeros(shape, np.float32))
    values, inverse, counts = nbx.unique_consecutive(x, return_inverse=True, return_counts=True, dim=dim)
    assert tuple(values.shape) == shape
    assert tuple(inverse.shape) == (0,) and tuple(counts.shape) == (0,)


@pytest.mark.parametrize("op", ["unique", "unique_consecutive"])
def test_unique_of_empty_slices_along_a_nonzero_dim_is_refused(op):
    with pytest.raises(RuntimeError, match=f"{op}: the input of shape \\[0, 3\\] has a zero-size dim"):
        getattr(nbx, op)(to_nbx(np.zeros((0, 3), np.float32)), dim=1)


def test_index_select_of_a_0d_tensor_is_0d():
    x = to_nbx(np.array(5.0, np.float32))
    for index in (np.array([0]), np.array(0)):
        got = nbx.index_select(x, 0, to_nbx(index))
        assert tuple(got.shape) == () and float(got.numpy()) == 5.0
    assert nbx.ops.registry.get("index_select").meta(x, 0, to_nbx(np.array([0]))).shape == ()
    with pytest.raises(IndexError, match="exactly 1 value, got 2"):
        nbx.index_select(x, 0, to_nbx(np.array([0, 0])))


def test_broadcast_shapes_takes_ints_as_one_dim_shapes():
    assert nbx.broadcast_shapes((5, 1), 5) == (5, 5)
    assert nbx.broadcast_shapes(3) == (3,)
    assert nbx.broadcast_shapes([2, 1], [3]) == (2, 3)
    with pytest.raises(RuntimeError, match="cannot be broadcast"):
        nbx.broadcast_shapes((5,), 3)


# ---- moments of no elements ------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["var_mean", "std_mean"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_moments_of_an_empty_reduction_have_a_nan_mean(op, dtype):
    x = to_nbx(np.zeros((3, 0), np.float32)).to(dtype)
    spread, mean = getattr(nbx, op)(x, 1)
    assert mean.dtype.name == dtype and tuple(mean.shape) == (3,)
    assert np.isnan(spread.to("float32").numpy()).all() and np.isnan(mean.to("float32").numpy()).all()
    spread, mean = getattr(nbx, op)(x)
    assert np.isnan(float(mean.to("float32").numpy()))


def test_moments_of_elements_keep_their_mean():
    x = np.array([[1.0, 2.0, 4.0], [0.0, 0.0, 0.0]], np.float32)
    variance, mean = nbx.var_mean(to_nbx(x), 1)
    np.testing.assert_allclose(mean.numpy(), x.mean(1), rtol=1e-6)
    np.testing.assert_allclose(variance.numpy(), x.astype(np.float64).var(1, ddof=1), rtol=1e-6)


# ---- circular padding with negative amounts ---------------------------------------------------------------
def _circular_reference(row, before, after):
    """torch's rule: crop the negative amounts first, then wrap the positive ones around what is left."""
    kept = row[max(0, -before):len(row) - max(0, -after)]
    return np.concatenate([kept[len(kept) - max(0, before):], kept, kept[:max(0, after)]])


@pytest.mark.parametrize("amounts", [(2, -1), (-1, 2), (-2, -1), (-3, 3), (3, -3), (1, 1), (-1, -1)])
def test_circular_pad_crops_before_it_wraps(amounts):
    x = np.arange(6, dtype=np.float32).reshape(1, 1, 6)
    got = nbx.nn.functional.pad(to_nbx(x), amounts, mode="circular")
    np.testing.assert_array_equal(got.numpy().ravel(), _circular_reference(x.ravel(), *amounts))


def test_circular_pad_of_two_dims_with_cropping():
    x = np.arange(20, dtype=np.float32).reshape(1, 4, 5)
    got = nbx.nn.functional.pad(to_nbx(x), (-2, 1, 1, -1), mode="circular").numpy()
    rows = np.stack([_circular_reference(r, -2, 1) for r in x[0]])
    expected = np.stack([_circular_reference(c, 1, -1) for c in rows.T]).T
    np.testing.assert_array_equal(got[0], expected)


def test_circular_pad_wider_than_the_cropped_dim_is_refused():
    with pytest.raises(RuntimeError, match="at most the size 3 of dim 2 after cropping"):
        nbx.nn.functional.pad(to_nbx(np.zeros((1, 1, 6), np.float32)), (4, -3), mode="circular")


# ---- complex32 ---------------------------------------------------------------------------------------------
def test_view_as_complex_of_float16_names_complex32_as_unsupported():
    x = to_nbx(np.zeros((3, 2), np.float16))
    with pytest.raises(TypeError, match="complex32.*not support"):
        nbx.view_as_complex(x)
    with pytest.raises(TypeError, match="complex32"):
        nbx.ops.registry.get("view_as_complex").meta(x)


# ---- memory_format on Tensor.to and the dtype shorthands ------------------------------------------------
_SHORTHANDS = {"float": "float32", "half": "float16", "bfloat16": "bfloat16", "double": "float64", "int": "int32",
               "long": "int64", "short": "int16", "char": "int8", "byte": "uint8", "bool": "bool",
               "cfloat": "complex64", "cdouble": "complex128"}


def _transposed_int8():
    values = np.arange(6, dtype=np.int8).reshape(2, 3)
    return values.T, to_nbx(values).t()


@pytest.mark.parametrize("name", sorted(_SHORTHANDS))
def test_dtype_shorthands_take_a_memory_format(name):
    want, x = _transposed_int8()
    converts = _SHORTHANDS[name] != "int8"  # char() of int8 changes nothing: x itself, as in torch
    for memory_format, contiguous in (("contiguous_format", True), ("preserve_format", False), (None, False)):
        got = getattr(x, name)(memory_format=memory_format)
        assert got.dtype.name == _SHORTHANDS[name]
        assert got.is_contiguous() == (contiguous and converts) and (got is x) == (not converts)
        np.testing.assert_array_equal(got.numpy(), want.astype(got.numpy().dtype))


def test_to_takes_a_memory_format():
    want, x = _transposed_int8()
    got = x.to("float32", memory_format="contiguous_format")
    assert got.is_contiguous() and got.stride() == (2, 1)
    np.testing.assert_array_equal(got.numpy(), want.astype(np.float32))
    kept = x.to(dtype="float32", memory_format="preserve_format")
    assert kept.stride() == (1, 3)
    assert x.to(x.device, memory_format="preserve_format") is x


def test_to_and_shorthands_take_channels_last_and_name_the_formats_they_refuse():
    values = np.arange(8, dtype=np.float32).reshape(1, 2, 2, 2)
    x = to_nbx(values)
    for got in (x.half(memory_format="channels_last"), x.to("float16", memory_format="channels_last")):
        assert got.stride() == (8, 1, 4, 2) and got.dtype.name == "float16"
        np.testing.assert_array_equal(got.numpy(), values.astype(np.float16))
    with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
        to_nbx(np.zeros((2, 2), np.float32)).half(memory_format="channels_last")
    with pytest.raises(ValueError, match="unknown memory_format 'sideways'"):
        x.float(memory_format="sideways")


# ---- the new kernel code compiles for the GPU --------------------------------------------------------------
@cpu_kernels
def test_exact_integer_products_and_empty_moments_compile_for_hopper(tmp_path):
    records = _record(tmp_path, """
        import numpy as np
        import nbxtensor as nbx
        a = nbx.tensor(np.arange(40 * 40, dtype=np.int64).reshape(40, 40) % 7)
        nbx.addmm(a, a, a, beta=2, alpha=3).numpy()
        small = nbx.tensor(np.ones((3, 5), np.uint8))
        nbx.bmm(small.unsqueeze(0), small.t().unsqueeze(0)).numpy()
        nbx.var_mean(nbx.zeros(3, 0), 1)
        nbx.std_mean(nbx.zeros(3, 4), 1)
    """)
    kernels = {json.loads(line)["kernel"] for line in records.read_text().splitlines()}
    assert {"gemm_wide", "reduce_rows"} <= kernels
    result = _check(records, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 failed" in result.stdout


# ---- the new paths in a graph run stay on the memory their cost rules declare ----------------------------
@cpu_kernels
def test_new_product_paths_run_on_their_declared_memory(tmp_path, monkeypatch):
    from nbxtensor import graph
    from nbxtensor.graph import arena

    from .test_graph_arena import _Builder
    monkeypatch.setattr(arena, "strict", True)
    g = _Builder({})
    base, v, w = g.input("base", [3, 2], "bool"), g.input("v", [3], "bool"), g.input("w", [2], "bool")
    a, x = g.input("a", [3, 4], "int64"), g.input("x", [3, 3], "float32")
    either = g.op("aten::addr.default", [base, v, w], [3, 2], "bool")
    product = g.op("aten::mm.default", [a, g.op("aten::t.default", [a], [4, 3], "int64")], [3, 3], "int64")
    rows = g.op("aten::einsum.default", ["ij->i", [x]], [3])
    trace = g.op("aten::einsum.default", ["ii->", [x]], [])
    model = graph.load(g.write(tmp_path, [base, v, w, a, x], [either, product, rows, trace]), device="cpu")
    base_value, v_value, w_value = np.array([[True, False], [False, False], [False, True]]), \
        np.array([True, False, True]), np.array([False, True])
    a_value = np.arange(12, dtype=np.int64).reshape(3, 4) - 5
    x_value = np.arange(9, dtype=np.float32).reshape(3, 3)
    got = model(base_value, v_value, w_value, a_value, x_value)
    np.testing.assert_array_equal(got[0].numpy(), base_value | np.logical_and.outer(v_value, w_value))
    np.testing.assert_array_equal(got[1].numpy(), a_value @ a_value.T)
    np.testing.assert_allclose(got[2].numpy(), x_value.sum(1))
    assert float(got[3].numpy()) == np.trace(x_value)


def test_to_a_memory_format_aliases_when_it_is_the_one_suggested_for_the_strides():
    # as ATen: contiguous_format is what a tensor not laid out channels_last suggests, contiguous or not
    transposed = to_nbx(np.arange(6, dtype=np.float32).reshape(2, 3)).t()
    assert transposed.to(memory_format="contiguous_format") is transposed
    assert transposed.float(memory_format="contiguous_format") is transposed
    channels_last = to_nbx(np.arange(120, dtype=np.float32).reshape(2, 4, 5, 3)).permute(0, 3, 1, 2)
    copied = channels_last.to(memory_format="contiguous_format")
    assert copied is not channels_last and copied.is_contiguous()
    np.testing.assert_array_equal(copied.numpy(), channels_last.numpy())
    # one channel: contiguous, yet its strides read as channels_last, so ATen copies too
    one_channel = to_nbx(np.zeros((2, 4, 5, 1), np.float32)).permute(0, 3, 1, 2)
    assert one_channel.is_contiguous() and one_channel.to(memory_format="contiguous_format") is not one_channel


@pytest.mark.parametrize("shape, strides, expected", [
    ((2, 3, 4, 5), (60, 1, 15, 3), True), ((2, 3, 4, 5), (60, 20, 5, 1), False), ((2, 3), (1, 2), False),
    ((2, 3, 4, 5, 6), (360, 1, 90, 18, 3), True), ((2, 1, 4, 5), (20, 1, 5, 1), True),
    ((2, 3, 4, 5), (60, 0, 15, 3), False), ((2, 3, 0, 5), (0, 1, 15, 3), False), ((4, 1, 1, 1), (1, 1, 1, 1), False),
])
def test_strides_like_channels_last(shape, strides, expected):
    from nbxtensor import shape as S
    assert S.strides_like_channels_last(shape, strides) is expected


def test_to_takes_non_blocking_and_copy_positionally():
    # torch's signature is to(device, dtype, non_blocking, copy): bools are flags, never a device index
    t = to_nbx(np.arange(4, dtype=np.float32))
    moved = t.to(TEST_DEVICE, nbx.float64, True, False)
    assert moved.dtype == nbx.float64 and moved.tolist() == [0, 1, 2, 3]
    assert t.to(nbx.float32, True).data_ptr() == t.data_ptr()
    assert t.to(nbx.float32, False, True).data_ptr() != t.data_ptr()
