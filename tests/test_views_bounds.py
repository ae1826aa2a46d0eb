"""Views never reach outside their storage: ``as_strided``, the view taking geometry from its caller,
refuses negative sizes and storage offsets and any element beyond either end of the storage, and
agrees with NumPy's ``as_strided`` on every geometry it accepts."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbxtensor as nbx
from nbxtensor.shape import ShapeError
from tests.conftest import to_nbx

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _storage_pair(count: int):
    array = np.arange(count, dtype=np.int32)
    return array, to_nbx(array)


@pytest.mark.parametrize("size, stride, offset, problem", [
    ((2, 2), (1, 1), -1, "storage offset -1 is negative"),
    ((2,), (1,), -(1 << 40), "negative"),
    ((-2, -2), (1, 1), 0, "negative extent"),
    ((-1,), (1,), 0, "negative extent"),
    ((2,), (1,), 11, "out of bounds for a storage of 48 bytes"),
    ((13,), (1,), 0, "out of bounds"),
    ((2, 2), (1 << 40, 1), 0, "out of bounds"),
])
def test_as_strided_refuses_geometry_outside_the_storage(size, stride, offset, problem):
    _, x = _storage_pair(12)
    with pytest.raises(ShapeError, match=problem) as refused:
        x.as_strided(size, stride, offset)
    assert isinstance(refused.value, RuntimeError) and isinstance(refused.value, ValueError)


def test_as_strided_accepts_the_whole_storage_and_empty_views_anywhere():
    array, x = _storage_pair(12)
    assert x.as_strided((12,), (1,), 0).tolist() == array.tolist()
    assert x.as_strided((1,), (1,), 11).tolist() == [11]
    assert x.as_strided((3, 0), (100, 1), 50).shape == (3, 0)  # reads nothing, as ATen allows
    assert x.as_strided((), (), 11).item() == 11


def test_as_strided_offsets_count_from_the_storage_not_the_view():
    array, x = _storage_pair(12)
    tail = x[8:]
    assert tail.as_strided((2,), (1,), 0).tolist() == [0, 1]
    with pytest.raises(ShapeError):
        tail.as_strided((5,), (1,))  # the view's own offset 8, and 5 elements, pass the end


def test_meta_tensors_check_signs_only():
    x = nbx.Tensor._meta((4,), "float32")
    assert x.as_strided((100,), (1,), 7).shape == (100,)
    with pytest.raises(ShapeError):
        x.as_strided((2,), (1,), -1)
    with pytest.raises(ShapeError):
        x.as_strided((-2,), (1,), 0)


def _in_bounds(count, size, stride, offset) -> bool:
    if offset < 0 or any(n < 0 for n in size):
        return False
    if 0 in size:
        return True
    return offset + sum((n - 1) * s for n, s in zip(size, stride)) < count


@SETTINGS
@given(count=st.integers(0, 16), data=st.data())
def test_as_strided_matches_numpy_inside_and_refuses_outside(count, data):
    rank = data.draw(st.integers(0, 3), label="rank")
    size = tuple(data.draw(st.lists(st.integers(-1, 4), min_size=rank, max_size=rank), label="size"))
    stride = tuple(data.draw(st.lists(st.integers(0, 6), min_size=rank, max_size=rank), label="stride"))
    offset = data.draw(st.integers(-2, count + 2), label="offset")
    array, x = _storage_pair(count)
    if not _in_bounds(count, size, stride, offset):
        with pytest.raises(ShapeError):
            x.as_strided(size, stride, offset)
        return
    view = x.as_strided(size, stride, offset)
    assert view.shape == size and view.stride() == stride and view.storage_offset() == offset
    if 0 in size:
        assert view.numel() == 0
        return
    itemsize = array.itemsize
    expected = np.lib.stride_tricks.as_strided(array[offset:], size, tuple(s * itemsize for s in stride))
    np.testing.assert_array_equal(view.numpy(), expected)
    np.testing.assert_array_equal(view.contiguous().numpy(), expected)


def _byte_reach(t):
    """(first byte, one past the last byte) a non-empty view reads, from its own metadata."""
    low = high = t.storage_offset()
    for n, s in zip(t.shape, t.stride()):
        low, high = (low + (n - 1) * s, high) if s < 0 else (low, high + (n - 1) * s)
    return low * t.element_size(), (high + 1) * t.element_size()


def _draw_view(t, data):
    """One view op of ``t`` with drawn arguments (some invalid: those raise, and the test goes on)."""
    dim = data.draw(st.integers(-max(t.ndim, 1), max(t.ndim, 1) - 1), label="dim")
    a, b = data.draw(st.integers(-5, 5), label="a"), data.draw(st.integers(-5, 5), label="b")
    step = data.draw(st.integers(1, 3), label="step")
    ops = [
        lambda: t[a],
        lambda: t[a:b:step],
        lambda: t[..., a:b:step, None],
        lambda: t.select(dim, a),
        lambda: t.narrow(dim, a, abs(b)),
        lambda: t.unfold(dim, abs(a), step),
        lambda: t.expand(2, *t.shape),
        lambda: t.reshape(-1),
        lambda: t.view(*reversed(t.shape)),
        lambda: t.permute(*reversed(range(t.ndim))),
        lambda: t.unsqueeze(dim),
        lambda: t.squeeze(),
        lambda: t.diagonal(a),
        lambda: t.view(nbx.int16),
        lambda: t.view(nbx.int64),
        lambda: t.split(step, dim)[-1],
        lambda: t.movedim(dim, 0),
    ]
    try:
        return ops[data.draw(st.integers(0, len(ops) - 1), label="op")]()
    except (IndexError, RuntimeError, ValueError, TypeError):
        return t


@SETTINGS
@given(shape=st.lists(st.integers(0, 4), min_size=1, max_size=3).map(tuple), data=st.data())
def test_derived_views_stay_inside_the_storage(shape, data):
    """Only as_strided checks geometry: every other view op derives its own from an in-bounds tensor
    and so stays inside the storage, whatever the chain of views."""
    count = int(np.prod(shape))
    x = to_nbx(np.arange(count, dtype=np.int32)).reshape(shape)
    for _ in range(4):
        x = _draw_view(x, data)  # a reshape may copy: the bound is the storage x has now
        assert x.storage_offset() >= 0 and all(n >= 0 for n in x.shape)
        if x.numel():
            first, end = _byte_reach(x)
            assert 0 <= first and end <= x._storage.nbytes
