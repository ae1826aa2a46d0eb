"""The conformance fixes of ``test_conformance_defects.py`` checked against torch itself: results, dtypes
and shapes equal to torch's (integer products bit for bit, overflow wrapping included)."""
import warnings

import numpy as np
import pytest

import nbxtensor as nbx

from .conftest import to_nbx

torch = pytest.importorskip("torch")

_TORCH_DTYPES = {"int64": torch.int64, "int32": torch.int32, "int16": torch.int16, "uint8": torch.uint8}


def _pair(rng, shape, dtype, wide=False):
    info = np.iinfo(dtype)
    low, high = (info.min, info.max) if wide else (max(info.min, -60), 60)
    array = rng.integers(low, high, shape, dtype=dtype, endpoint=True)
    return to_nbx(array), torch.from_numpy(array.copy())


def _same(got, expected):
    assert got.dtype.name == str(expected.dtype).removeprefix("torch."), (got.dtype, expected.dtype)
    assert tuple(got.shape) == tuple(expected.shape)
    np.testing.assert_array_equal(got.numpy(), expected.numpy())


@pytest.mark.parametrize("dtype", sorted(_TORCH_DTYPES))
@pytest.mark.parametrize("wide", [False, True])
def test_integer_products_equal_torch(rng, dtype, wide):
    (a, ta), (b, tb) = _pair(rng, (3, 5), dtype, wide), _pair(rng, (5, 4), dtype, wide)
    (c, tc), (v, tv), (w, tw) = _pair(rng, (3, 4), dtype), _pair(rng, (5,), dtype, wide), _pair(rng, (4,), dtype)
    _same(nbx.mm(a, b), torch.mm(ta, tb))
    _same(nbx.matmul(a, v), torch.matmul(ta, tv))
    _same(nbx.mv(a, v), torch.mv(ta, tv))
    _same(nbx.dot(v, v), torch.dot(tv, tv))
    _same(nbx.vdot(v, v), torch.vdot(tv, tv))
    _same(nbx.outer(v, w), torch.outer(tv, tw))
    _same(nbx.addmm(c, a, b, beta=2, alpha=3), torch.addmm(tc, ta, tb, beta=2, alpha=3))
    _same(nbx.addmv(c[:, 0], a, v, beta=-1), torch.addmv(tc[:, 0], ta, tv, beta=-1))
    _same(nbx.addr(c, c[:, 1], w, alpha=2), torch.addr(tc, tc[:, 1], tw, alpha=2))
    _same(nbx.nn.functional.linear(b.t(), a, c[:, 0]), torch.nn.functional.linear(tb.t(), ta, tc[:, 0]))
    (a3, ta3), (b3, tb3) = _pair(rng, (2, 3, 5), dtype, wide), _pair(rng, (2, 5, 2), dtype, wide)
    _same(nbx.bmm(a3, b3), torch.bmm(ta3, tb3))
    _same(nbx.baddbmm(a3[:, :, :2], a3, b3, beta=0), torch.baddbmm(ta3[:, :, :2], ta3, tb3, beta=0))
    _same(nbx.einsum("bij,bjk->bik", a3, b3), torch.einsum("bij,bjk->bik", ta3, tb3))


def test_bool_outer_and_addr_equal_torch():
    v, w = np.array([True, False, True]), np.array([False, True])
    base = np.array([[True, False], [False, False], [False, True]])
    _same(nbx.outer(to_nbx(v), to_nbx(w)), torch.outer(torch.from_numpy(v), torch.from_numpy(w)))
    for alpha in (True, False):
        for beta in (True, False):
            _same(nbx.addr(to_nbx(base), to_nbx(v), to_nbx(w), alpha=alpha, beta=beta),
                  torch.addr(torch.from_numpy(base), torch.from_numpy(v), torch.from_numpy(w), alpha=alpha, beta=beta))


@pytest.mark.parametrize("equation, shape", [("ij->", (3, 4)), ("ij->j", (3, 4)), ("i...->...", (2, 3, 4)),
                                             ("ii->i", (3, 3)), ("ii->", (3, 3)), ("ij->ji", (3, 4)),
                                             ("iji->j", (2, 3, 2))])
@pytest.mark.parametrize("dtype", ["int32", "float32"])
def test_einsum_of_one_operand_equals_torch(rng, equation, shape, dtype):
    x = rng.integers(-9, 9, shape).astype(dtype)
    got, expected = nbx.einsum(equation, to_nbx(x)), torch.einsum(equation, torch.from_numpy(x))
    _same(got, expected)


def test_indexing_corners_equal_torch():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    index = np.array([[-1, 2], [0, -4], [-2, 3]])
    _same(nbx.take_along_dim(to_nbx(x), to_nbx(index), dim=1),
          torch.take_along_dim(torch.from_numpy(x), torch.from_numpy(index), dim=1))
    empty = np.zeros((3, 0), np.uint8)
    _same(nbx.gather(to_nbx(x), 1, to_nbx(empty)), torch.gather(torch.from_numpy(x), 1, torch.from_numpy(empty)))
    base, at, source = np.array([False, True, False]), np.array([0, 2]), np.array([True, True])
    _same(nbx.index_add(to_nbx(base), 0, to_nbx(at), to_nbx(source), alpha=False),
          torch.index_add(torch.from_numpy(base), 0, torch.from_numpy(at), torch.from_numpy(source), alpha=False))
    scalar = np.array(5.0, np.float32)
    _same(nbx.index_select(to_nbx(scalar), 0, to_nbx(np.array([0]))),
          torch.index_select(torch.from_numpy(scalar), 0, torch.tensor([0])))
    assert nbx.broadcast_shapes((5, 1), 5) == tuple(torch.broadcast_shapes((5, 1), 5))
    for got, expected in zip(nbx.unique_consecutive(to_nbx(np.zeros((2, 0), np.float32)), True, True, dim=1),
                             torch.unique_consecutive(torch.zeros(2, 0), True, True, dim=1)):
        _same(got, expected)


@pytest.mark.parametrize("op", ["var_mean", "std_mean"])
def test_empty_moments_equal_torch(op):
    got = getattr(nbx, op)(to_nbx(np.zeros((2, 0), np.float32)), 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns that no elements leave no degrees of freedom
        expected = getattr(torch, op)(torch.zeros(2, 0), 1)
    for g, e in zip(got, expected):
        assert tuple(g.shape) == tuple(e.shape)
        np.testing.assert_array_equal(np.isnan(g.numpy()), np.isnan(e.numpy()))


@pytest.mark.parametrize("amounts", [(2, -1), (-1, 2), (-2, -1, 1, -1), (1, -2, -1, 2)])
def test_circular_pad_equals_torch(amounts):
    x = np.arange(20, dtype=np.float32).reshape(1, 4, 5)
    _same(nbx.nn.functional.pad(to_nbx(x), amounts, mode="circular"),
          torch.nn.functional.pad(torch.from_numpy(x), amounts, mode="circular"))


def test_shorthand_memory_formats_equal_torch():
    values = np.arange(6, dtype=np.int8).reshape(2, 3)
    x, t = to_nbx(values).t(), torch.from_numpy(values).t()
    for memory_format, torch_format in (("contiguous_format", torch.contiguous_format),
                                        ("preserve_format", torch.preserve_format)):
        got, expected = x.float(memory_format=memory_format), t.float(memory_format=torch_format)
        assert got.stride() == expected.stride()
        np.testing.assert_array_equal(got.numpy(), expected.numpy())


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (2, 1, 4, 5), (1, 3, 1, 5), (2, 3, 1, 1), (2, 3, 2, 4, 5),
                                   (4, 1, 1, 1)])
def test_to_aliases_exactly_when_torch_does(shape):
    import itertools
    for order in itertools.permutations(range(len(shape))):
        base = np.zeros([shape[d] for d in order], np.float32)
        inverse = [order.index(d) for d in range(len(shape))]
        x, t = to_nbx(base).permute(*inverse), torch.from_numpy(base).permute(*inverse)
        assert tuple(x.shape) == tuple(t.shape) and x.stride() == t.stride()
        aliased = x.to(memory_format="contiguous_format") is x
        assert aliased == (t.to(memory_format=torch.contiguous_format) is t), (shape, order, t.stride())
