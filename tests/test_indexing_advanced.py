"""Advanced indexing (integer and boolean tensors, lists, arrays; mixed with ints, slices, None and
...) read and written, against NumPy, whose rules agree with ATen's for every index here (ATen
differs from NumPy only when an int sits between separated advanced indices; the torch file covers that)."""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbxtensor as nbx
from tests.conftest import to_nbx

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DTYPES = [np.float32, np.float64, np.int64, np.int32, np.int8, np.uint8, np.bool_, np.float16, np.complex64]


def arange_pair(shape, dtype=np.float64):
    array = np.arange(math.prod(shape)).reshape(shape)
    array = (array % 2 == 1) if dtype == np.bool_ else (array + 1j * array).astype(dtype) \
        if np.issubdtype(dtype, np.complexfloating) else array.astype(dtype)
    return array, to_nbx(array)


INDICES = [
    lambda: ([1, 0, 1, -1],),
    lambda: (slice(None), np.array([[2, 0], [1, -1]])),
    lambda: (Ellipsis, [0, 3, 3]),
    lambda: ([1, 0], slice(None), [3, -4]),  # separated: the index dims go first
    lambda: (slice(1, None), [2, 0], [1, 1]),  # adjacent: in place
    lambda: (None, [1], slice(None, None, 2), None),
    lambda: (np.array([True, False]),),
    lambda: (slice(None), np.array([True, False, True])),
    lambda: (np.array([[True, False, True], [False, False, True]]), slice(1, 3)),
    lambda: (np.array([[[True, False, True, True]] * 3] * 2),),
    lambda: ([[0], [1]], slice(None), [[0, 1, 2]]),
    lambda: (1, [0, 2], slice(None, None, 3)),
    lambda: (np.array([], dtype=np.int64),),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("make_index", INDICES, ids=range(len(INDICES)))
def test_getitem_matches_numpy(dtype, make_index):
    array, x = arange_pair((2, 3, 4), dtype)
    index = make_index()
    nbx_index = tuple(to_nbx(i) if isinstance(i, np.ndarray) and i.dtype == np.bool_ else i for i in index)
    result = x[nbx_index]
    expected = array[index]
    assert tuple(result.shape) == expected.shape, index
    assert np.array_equal(result.numpy(), expected), index


@pytest.mark.parametrize("make_index", INDICES, ids=range(len(INDICES)))
def test_setitem_scalar_and_tensor_match_numpy(make_index):
    array, x = arange_pair((2, 3, 4))
    index = make_index()
    x[index] = -5.0
    array[index] = -5.0
    assert np.array_equal(x.numpy(), array), index
    target_shape = array[index].shape
    positions = np.arange(array.size).reshape(array.shape)[index]
    if np.unique(positions).size != positions.size:
        return  # which of several values lands on a repeated position is undefined (in ATen too)
    value = -100.0 - np.arange(math.prod(target_shape)).reshape(target_shape)
    x[index] = to_nbx(value)
    array[index] = value
    assert np.array_equal(x.numpy(), array), index


def test_setitem_broadcasts_and_converts_the_value_through_a_strided_view():
    array, x = arange_pair((4, 5))
    view, view_array = x.t(), array.T
    view[[0, 4, 2]] = to_nbx(np.array([7, 8, 9, 10], dtype=np.int32))
    view_array[[0, 4, 2]] = [7, 8, 9, 10]
    assert np.array_equal(x.numpy(), array)
    view[:, [1, 3]] = to_nbx(np.array([[1.5], [2.5], [3.5], [4.5], [5.5]]))
    view_array[:, [1, 3]] = [[1.5], [2.5], [3.5], [4.5], [5.5]]
    assert np.array_equal(x.numpy(), array)


def test_index_tensors_broadcast_together_and_mismatches_raise():
    array, x = arange_pair((3, 4))
    rows, cols = np.array([[0], [2]]), np.array([1, 3, 0])
    assert np.array_equal(x[to_nbx(rows), to_nbx(cols)].numpy(), array[rows, cols])
    with pytest.raises(IndexError, match="broadcast"):
        x[[0, 1], [0, 1, 2]]
    with pytest.raises(IndexError, match="mask"):
        x[to_nbx(np.array([True, False]))]
    with pytest.raises(IndexError):
        x[[0], [0], [0]]


@SETTINGS
@given(data=st.data())
def test_random_integer_indices_match_numpy(data):
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=4)))
    array, x = arange_pair(shape)
    items = []
    for n in shape:
        kind = data.draw(st.sampled_from(["slice", "list", "int"]))
        if kind == "slice":
            items.append(slice(None, None, data.draw(st.integers(1, 2))))
        elif kind == "int":
            items.append(data.draw(st.integers(-n, n - 1)))
        else:
            items.append(data.draw(st.lists(st.integers(-n, n - 1), min_size=0, max_size=3)))
    index = tuple(items)
    lists = [i for i, item in enumerate(items) if isinstance(item, list)]
    if not lists or len({len(items[i]) for i in lists}) > 1:
        return
    positions = [i for i, item in enumerate(items) if not isinstance(item, slice)]
    if positions != list(range(positions[0], positions[0] + len(positions))):
        return  # ATen and NumPy place separated index dims differently when an int sits between them
    assert np.array_equal(x[index].numpy(), array[index]), index
    x[index] = -1.0
    array[index] = -1.0
    assert np.array_equal(x.numpy(), array), index


def test_index_put_accumulates_duplicates():
    x = to_nbx(np.zeros((3, 2), dtype=np.float32))
    rows = to_nbx(np.array([0, 2, 0, 0, 1]))
    values = to_nbx(np.arange(10, dtype=np.float32).reshape(5, 2))
    x.index_put_((rows,), values, accumulate=True)
    expected = np.zeros((3, 2), np.float32)
    np.add.at(expected, [0, 2, 0, 0, 1], np.arange(10, dtype=np.float32).reshape(5, 2))
    assert np.array_equal(x.numpy(), expected)
    ints = to_nbx(np.zeros(4, dtype=np.int8))
    ints.index_put_((to_nbx(np.array([3, 3, 3])),), to_nbx(np.array(5, dtype=np.int8)), accumulate=True)
    assert ints.tolist() == [0, 0, 0, 15]
    flags = to_nbx(np.zeros(3, dtype=np.bool_))
    flags.index_put_((to_nbx(np.array([1, 1])),), to_nbx(np.array([True, True])), accumulate=True)
    assert flags.tolist() == [False, True, False]
    halves = to_nbx(np.zeros(2, dtype=np.float16))
    out = nbx.index_put(halves, (to_nbx(np.array([0, 0, 0])),), to_nbx(np.full(3, 0.1, np.float16)), accumulate=True)
    assert out.numpy()[0] == np.float16(np.float32(np.float16(np.float32(np.float16(0.1)) * 2)) + np.float16(0.1))
    assert halves.tolist() == [0.0, 0.0]


def test_out_of_range_indices_raise_naming_the_op_and_write_nothing_outside():
    array, x = arange_pair((3, 4))
    guard = to_nbx(np.arange(20.0))
    inner = guard[4:16].reshape(3, 4)
    for bad in ([3], [-4], [0, 7]):
        with pytest.raises(IndexError, match="index"):
            inner[bad].numpy()
        with pytest.raises(IndexError, match="index_put_"):
            inner[bad] = 1.0
            guard.numpy()  # a GPU reports at the next synchronisation
        with pytest.raises(IndexError, match="index_put_"):
            inner.index_put_((to_nbx(np.array(bad)),), to_nbx(np.array(2.0)), accumulate=True)
            guard.numpy()
    assert np.array_equal(guard.numpy()[:4], np.arange(4.0)) and np.array_equal(guard.numpy()[16:], np.arange(16.0, 20))
    assert x[[2, -3]].tolist() == array[[2, -3]].tolist()  # a later op is not blamed for the old error


def test_out_of_range_is_reported_once_then_cleared():
    w = to_nbx(np.ones((4, 3)))
    with pytest.raises(IndexError, match="embedding"):
        nbx.embedding(w, to_nbx(np.array([[0, 4]]))).numpy()
    assert nbx.embedding(w, to_nbx(np.array([3]))).tolist() == [[1.0, 1.0, 1.0]]


def test_index_op_in_aten_form_and_meta():
    array, x = arange_pair((3, 4))
    from nbxtensor.ops import registry
    op = registry.lookup("aten::index.Tensor")
    idx = to_nbx(np.array([2, 0]))
    assert np.array_equal(op(x, [None, idx]).numpy(), array[:, [2, 0]])
    assert op.meta(x, [None, idx]).shape == (3, 2)
    assert op.meta(x, [idx, None, ]).shape == (2, 4)


def test_where_with_the_condition_alone_gives_the_indices():
    condition = to_nbx(np.array([[True, False], [False, True]]))
    rows, cols = nbx.where(condition)
    assert rows.tolist() == [0, 1] and cols.tolist() == [0, 1]
    picked = nbx.where(condition, to_nbx(np.ones((2, 2), np.float32)), 0.0)
    assert picked.tolist() == [[1.0, 0.0], [0.0, 1.0]]


def test_device_errors_raise_the_reported_check_once(monkeypatch):
    """``device/errors.py`` on its own: a code stored in a device's status buffer raises its op's error at
    the next check and is cleared; the buffer is made once per device by the maker the ops give."""
    from nbxtensor.device import errors

    cpu = nbx.device("cpu")
    monkeypatch.setattr(errors, "_status_buffers", {})
    made = []
    status = errors.status_buffer(cpu, lambda: made.append(1) or nbx.tensor(np.zeros(1, np.int32), device=cpu))
    assert errors.status_buffer(cpu, lambda: made.append(2)) is status and made == [1]
    status.numpy()[0] = errors.error_code("probe", (ValueError, "went wrong"))
    with pytest.raises(ValueError, match=r"probe: went wrong \(found on cpu\)"):
        errors.check_device_errors(cpu)
    assert status.numpy()[0] == 0
    errors.check_device_errors(cpu)
