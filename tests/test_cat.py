"""cat / concat / concatenate and stack, checked against NumPy."""
import numpy as np
import pytest

import nbxtensor as nbx
from tests.conftest import to_nbx


def host(t):
    return np.array(t.numpy())


def test_cat_names_and_basic_join():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(6, 15, dtype=np.float32).reshape(3, 3)
    for fn in (nbx.cat, nbx.concat, nbx.concatenate):
        out = fn([to_nbx(a), to_nbx(b)])
        assert out.dtype == nbx.float32 and out.is_contiguous()
        np.testing.assert_array_equal(host(out), np.concatenate([a, b]))
    np.testing.assert_array_equal(host(nbx.cat((to_nbx(a), to_nbx(a)), dim=1)), np.concatenate([a, a], axis=1))


@pytest.mark.parametrize("dim", [-3, -2, -1, 0, 1, 2])
def test_cat_every_dim_including_negative(dim):
    rng = np.random.default_rng(abs(dim))
    sizes = [1, 3, 2]
    arrays = []
    for n in sizes:
        shape = [2, 3, 4]
        shape[dim] = n
        arrays.append(rng.standard_normal(shape).astype(np.float32))
    out = nbx.cat([to_nbx(a) for a in arrays], dim=dim)
    np.testing.assert_array_equal(host(out), np.concatenate(arrays, axis=dim))


@pytest.mark.parametrize("dtypes,expected", [
    (("int32", "float16"), "float16"),
    (("bool", "uint8"), "uint8"),
    (("uint8", "int8"), "int16"),
    (("int64", "float32", "int8"), "float32"),
    (("float16", "bfloat16"), "float32"),
    (("float32", "complex64"), "complex64"),
    (("float64", "complex64"), "complex128"),
    (("bool", "bool"), "bool"),
])
def test_cat_promotes_dtypes(dtypes, expected):
    arrays = [np.arange(1, 5).reshape(2, 2).astype(nbx.get_dtype(d).numpy) for d in dtypes]
    out = nbx.cat([to_nbx(a) for a in arrays], dim=1)
    assert out.dtype == nbx.get_dtype(expected)
    np.testing.assert_array_equal(host(out), np.concatenate([a.astype(np.complex128) for a in arrays], axis=1))


def test_cat_of_float8_with_another_dtype_raises():
    a = to_nbx(np.zeros(2, np.float32))
    with pytest.raises(RuntimeError):
        nbx.cat([a.to(nbx.float8_e4m3fn), a])


def test_cat_size_mismatch_names_tensor_and_dimension():
    a = to_nbx(np.zeros((2, 3), np.float32))
    b = to_nbx(np.zeros((2, 4), np.float32))
    with pytest.raises(RuntimeError, match=r"dimension 0.*size 3.*size 4.*tensor number 1"):
        nbx.cat([a, b], dim=0)
    with pytest.raises(RuntimeError, match=r"tensor number 2"):
        nbx.cat([a, a, b, a], dim=0)
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        nbx.cat([a, to_nbx(np.zeros(3, np.float32))])


def test_cat_rejects_zero_dim_and_empty_list():
    with pytest.raises(RuntimeError, match="zero-dimensional tensor \\(at position 1\\)"):
        nbx.cat([to_nbx(np.zeros(2)), to_nbx(np.array(1.0))])
    with pytest.raises(ValueError):
        nbx.cat([])
    with pytest.raises(IndexError):
        nbx.cat([to_nbx(np.zeros((2, 3)))], dim=2)
    with pytest.raises(IndexError):
        nbx.cat([to_nbx(np.zeros((2, 3)))], dim=-3)


def test_cat_skips_legacy_one_dim_empty_tensors():
    """ATen skips 1-D tensors of shape (0,) whatever the other shapes are, but they still take part
    in dtype promotion."""
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    empty64 = to_nbx(np.zeros(0, np.float64))
    out = nbx.cat([empty64, to_nbx(a), to_nbx(np.zeros(0, np.float32))], dim=1)
    assert tuple(out.shape) == (2, 3) and out.dtype == nbx.float64
    np.testing.assert_array_equal(host(out), a)
    # only legacy empties: the result is an empty 1-D tensor, whatever dim says
    only = nbx.cat([empty64, to_nbx(np.zeros(0, np.int32))], dim=1)
    assert tuple(only.shape) == (0,) and only.dtype == nbx.float64


def test_cat_zero_size_inputs_that_are_not_legacy_empties():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = nbx.cat([to_nbx(np.zeros((2, 0), np.float32)), to_nbx(a), to_nbx(np.zeros((2, 0), np.float32))], dim=1)
    np.testing.assert_array_equal(host(out), a)
    out = nbx.cat([to_nbx(np.zeros((0, 3), np.float32)), to_nbx(a)], dim=0)
    np.testing.assert_array_equal(host(out), a)
    with pytest.raises(RuntimeError, match="tensor number 1"):
        nbx.cat([to_nbx(a), to_nbx(np.zeros((3, 0), np.float32))], dim=0)  # (3, 0) is not skipped
    both_empty = nbx.cat([to_nbx(np.zeros((0, 3), np.float32))] * 2, dim=1)
    assert tuple(both_empty.shape) == (0, 6)


def test_cat_of_strided_inputs_reads_their_strides():
    """Lesson: strided inputs to cat were read as if contiguous."""
    base = np.arange(48, dtype=np.float32).reshape(6, 8)
    t = to_nbx(base)
    pieces_nbx = [t.t()[:, :3], t[::2, 1::3].t(), t[1:4, 2:8:2].t()]
    pieces_np = [base.T[:, :3], base[::2, 1::3].T, base[1:4, 2:8:2].T]
    assert not any(p.is_contiguous() for p in pieces_nbx)
    cut = [p[:3] for p in pieces_np]
    out = nbx.cat([p[:3] for p in pieces_nbx], dim=1)
    np.testing.assert_array_equal(host(out), np.concatenate(cut, axis=1))
    out0 = nbx.cat([pieces_nbx[0][:2], pieces_nbx[1][:, :3], pieces_nbx[2][:, :3]], dim=0)
    np.testing.assert_array_equal(host(out0), np.concatenate([pieces_np[0][:2], pieces_np[1][:, :3],
                                                              pieces_np[2][:, :3]], axis=0))
    expanded = to_nbx(np.arange(3, dtype=np.float32)).expand(2, 3)
    np.testing.assert_array_equal(host(nbx.cat([expanded, t[:2, :3]])),
                                  np.concatenate([np.broadcast_to(np.arange(3, dtype=np.float32), (2, 3)),
                                                  base[:2, :3]]))


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_cat_complex_keeps_real_imaginary_pairs(dim):
    """Lesson: cat of a complex tensor on an inner dimension split the (re, im) pairs."""
    rng = np.random.default_rng(3)
    a = (rng.standard_normal((2, 3, 2)) + 1j * rng.standard_normal((2, 3, 2))).astype(np.complex64)
    b = (rng.standard_normal((2, 3, 2)) + 1j * rng.standard_normal((2, 3, 2))).astype(np.complex64)
    out = nbx.cat([to_nbx(a), to_nbx(b).permute(0, 1, 2)], dim=dim)
    np.testing.assert_array_equal(host(out), np.concatenate([a, b], axis=dim))
    mixed = nbx.cat([to_nbx(a), to_nbx(b.real.copy())], dim=dim)
    assert mixed.dtype == nbx.complex64
    np.testing.assert_array_equal(host(mixed), np.concatenate([a, b.real.astype(np.complex64)], axis=dim))
    transposed = nbx.cat([to_nbx(a).transpose(1, 2), to_nbx(b).transpose(1, 2)], dim=dim)
    np.testing.assert_array_equal(host(transposed), np.concatenate([a.transpose(0, 2, 1), b.transpose(0, 2, 1)],
                                                                   axis=dim))


def test_cat_single_tensor_is_a_copy():
    a = to_nbx(np.arange(4, dtype=np.int64))
    out = nbx.cat([a])
    assert out.data_ptr() != a.data_ptr()
    np.testing.assert_array_equal(host(out), np.arange(4))


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
def test_stack_dims(dim):
    arrays = [np.arange(6, dtype=np.float32).reshape(2, 3) + 10 * i for i in range(3)]
    out = nbx.stack([to_nbx(a) for a in arrays], dim=dim)
    np.testing.assert_array_equal(host(out), np.stack(arrays, axis=dim))


def test_stack_promotes_and_takes_strided_and_zero_dim_inputs():
    a = to_nbx(np.arange(6, dtype=np.int32).reshape(2, 3)).t()
    b = to_nbx(np.ones((3, 2), np.float16))
    out = nbx.stack([a, b])
    assert out.dtype == nbx.float16
    np.testing.assert_array_equal(host(out), np.stack([np.arange(6).reshape(2, 3).T, np.ones((3, 2))]))
    scalars = nbx.stack([to_nbx(np.array(1, np.int64)), to_nbx(np.array(2.5, np.float32))])
    assert scalars.dtype == nbx.float32 and host(scalars).tolist() == [1.0, 2.5]
    z = nbx.stack([to_nbx(np.zeros((0, 2), np.float32))] * 3, dim=1)
    assert tuple(z.shape) == (0, 3, 2)


def test_stack_errors():
    a = to_nbx(np.zeros((2, 3), np.float32))
    with pytest.raises(RuntimeError, match="entry 1"):
        nbx.stack([a, to_nbx(np.zeros((2, 4), np.float32))])
    with pytest.raises(RuntimeError):
        nbx.stack([])
    with pytest.raises(IndexError):
        nbx.stack([a, a], dim=3)
