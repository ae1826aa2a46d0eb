"""Basic indexing (ints, slices with steps, negative indices, ``...``, ``None``) and assignment against
NumPy. Bases hold ``arange`` values, so a result's values name the base elements it covers."""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import arange_pair, storage_start, to_nbx

SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])

shapes = st.lists(st.integers(0, 4), min_size=0, max_size=5).map(tuple)


@st.composite
def basic_indices(draw, shape):
    """A valid basic index for ``shape``: in-range ints (negative too), slices with positive steps,
    ``None`` anywhere and at most one ``...``, alone or in a tuple."""
    ndim = len(shape)
    consuming = draw(st.integers(0, ndim), label="consuming")
    use_ellipsis = draw(st.booleans(), label="ellipsis")
    before = draw(st.integers(0, consuming), label="before ellipsis") if use_ellipsis else consuming
    dims = list(range(before)) + list(range(ndim - (consuming - before), ndim))
    items = []
    for position, dim in enumerate(dims):
        if use_ellipsis and position == before:
            items.append(Ellipsis)
        n = shape[dim]
        if n and draw(st.booleans(), label="int"):
            items.append(draw(st.integers(-n, n - 1), label="i"))
        else:
            bound = st.one_of(st.none(), st.integers(-n - 2, n + 2))
            items.append(slice(draw(bound, label="start"), draw(bound, label="stop"),
                               draw(st.sampled_from([None, 1, 2, 3]), label="step")))
    if use_ellipsis and before == len(dims):
        items.append(Ellipsis)
    for _ in range(draw(st.integers(0, 2), label="nones")):
        items.insert(draw(st.integers(0, len(items)), label="none at"), None)
    if len(items) == 1 and draw(st.booleans(), label="bare"):
        return items[0]
    return tuple(items)


@SETTINGS
@given(shape=shapes, data=st.data())
def test_getitem_matches_numpy(shape, data):
    array, x = arange_pair(shape)
    index = data.draw(basic_indices(shape), label="index")
    result = x[index]
    expected = array[index]
    assert tuple(result.shape) == np.shape(expected), index
    assert np.array_equal(result.numpy(), expected), index
    if result.numel():
        assert storage_start(result) == storage_start(x)  # a view, never a copy
    again = result[data.draw(basic_indices(tuple(result.shape)), label="second index")] if result.ndim else result
    assert again.numel() == 0 or storage_start(again) == storage_start(x)


@SETTINGS
@given(shape=shapes, data=st.data())
def test_setitem_scalar_matches_numpy(shape, data):
    array, x = arange_pair(shape)
    index = data.draw(basic_indices(shape), label="index")
    x[index] = -7
    array[index] = -7
    assert np.array_equal(x.numpy(), array), index


@SETTINGS
@given(shape=shapes, data=st.data())
def test_setitem_tensor_broadcasts_and_matches_numpy(shape, data):
    array, x = arange_pair(shape)
    base_view = x.permute(tuple(reversed(range(x.ndim))))  # write through a strided view of x
    base_array = array.transpose()
    index = data.draw(basic_indices(tuple(base_view.shape)), label="index")
    target_shape = np.shape(base_array[index])
    value_shape = tuple(data.draw(st.sampled_from([1, n]), label="extent") for n in target_shape)
    value_shape = value_shape[data.draw(st.integers(0, len(value_shape)), label="cut"):]
    value_shape = (1,) * data.draw(st.integers(0, 2), label="leading ones") + value_shape
    value = -1.0 - np.arange(math.prod(value_shape)).reshape(value_shape)
    base_view[index] = to_nbx(value)
    # NumPy does not drop a value's leading extent-1 dims into a 0-d target; drop them here
    base_array[index] = value.reshape(value_shape[max(0, len(value_shape) - len(target_shape)):])
    assert np.array_equal(x.numpy(), array), index


@pytest.mark.parametrize("index", [
    (Ellipsis, slice(None, None, 2)),
    (None, slice(1, None)),
    (Ellipsis, None),
    (slice(None), slice(None), slice(-2, None), slice(None)),
    (slice(None), slice(None), slice(-5, None), slice(None)),
    (-1,),
    (-3, Ellipsis, -1),
    (0, None, -1, None),
    (None, Ellipsis, None),
    (Ellipsis, None, slice(1, None, 2)),
    (slice(-100, 100),),
    (slice(2, 1),),
    (slice(None, -1, 3), 1),
    (Ellipsis,),
    (),
], ids=str)
def test_listed_index_forms_match_numpy(index):
    array, x = arange_pair((3, 4, 5, 2))
    assert np.array_equal(x[index].numpy(), array[index])
    assert tuple(x[index].shape) == array[index].shape
    x[index] = -1.0
    array[index] = -1.0
    assert np.array_equal(x.numpy(), array)


def test_index_with_numpy_and_zero_dim_integer_tensors():
    array, x = arange_pair((3, 4))
    assert np.array_equal(x[np.int64(2)].numpy(), array[2])
    assert np.array_equal(x[to_nbx(np.array(-1))].numpy(), array[-1])
    assert np.array_equal(x[1, to_nbx(np.array(2, dtype=np.int32))].numpy(), array[1, 2])
    assert np.array_equal(x[to_nbx(np.array(0)):to_nbx(np.array(2))].numpy(), array[0:2])


@pytest.mark.parametrize("index,bad,dim,size", [
    (3, 3, 0, 3), (-4, -4, 0, 3), ((0, 4), 4, 1, 4), ((Ellipsis, -5), -5, 1, 4), ((slice(None), 7), 7, 1, 4),
    ((None, 5), 5, 0, 3), ((None, 1, None, -9), -9, 1, 4),
])
def test_out_of_range_int_raises_index_error_with_index_and_size(index, bad, dim, size):
    _, x = arange_pair((3, 4))
    with pytest.raises(IndexError) as info:
        x[index]
    message = str(info.value)
    assert str(bad) in message and str(size) in message and f"dimension {dim}" in message
    with pytest.raises(IndexError):
        x[index] = 0.0


def test_select_and_narrow_normalise_negative_positions():
    array, x = arange_pair((3, 4, 5))
    assert np.array_equal(x.select(1, -1).numpy(), array[:, -1])
    assert np.array_equal(x.select(-1, -5).numpy(), array[..., 0])
    assert x.select(0, -3).storage_offset() == 0  # never before the allocation
    assert np.array_equal(x.narrow(2, -2, 2).numpy(), array[:, :, -2:])
    assert np.array_equal(x.narrow(-1, -5, 3).numpy(), array[..., :3])
    assert np.array_equal(x.narrow(0, 3, 0).numpy(), array[3:])
    with pytest.raises(IndexError):
        x.select(1, 4)
    with pytest.raises(IndexError):
        x.select(1, -5)
    with pytest.raises(IndexError):
        x.narrow(0, -4, 1)
    with pytest.raises(RuntimeError):
        x.narrow(0, 2, 2)
    with pytest.raises(IndexError):
        x.select(3, 0)


def test_negative_slice_step_raises_value_error_pointing_to_flip():
    _, x = arange_pair((3, 4))
    for index in [slice(None, None, -1), (slice(None), slice(3, 0, -2))]:
        with pytest.raises(ValueError, match="flip"):
            x[index]
    with pytest.raises(ValueError):
        x[::0]


def test_too_many_indices_and_two_ellipses_raise_index_error():
    _, x = arange_pair((3, 4))
    for index in [(0, 0, 0), (slice(None),) * 3, (0, Ellipsis, 0, 0), (Ellipsis, Ellipsis)]:
        with pytest.raises(IndexError):
            x[index]
    with pytest.raises(IndexError):
        to_nbx(np.float64(1.0))[0]
    with pytest.raises(IndexError):
        to_nbx(np.float64(1.0))[:]


def test_advanced_indices_are_not_misread_as_basic_indices():
    """Integer and boolean tensors, lists, arrays and bools are advanced indexing (a copy), never
    basic: a 0-d bool tensor is a mask, not the integer 0 or 1; floats and strings are refused."""
    array, x = arange_pair((3, 4))
    cases = [([0, 1], array[[0, 1]]), ((slice(None), [1, 2]), array[:, [1, 2]]),
             (to_nbx(np.array([0, 2])), array[[0, 2]]), (to_nbx(np.array([True, False, True])), array[[0, 2]]),
             (to_nbx(np.array(True)), array[None]), (True, array[None]), (np.array([1, 2]), array[[1, 2]]),
             ((0, to_nbx(np.array([1]))), array[0, [1]])]
    for index, expected in cases:
        result = x[index]
        assert np.array_equal(result.numpy(), expected), index
        assert result.numel() == 0 or storage_start(result) != storage_start(x)
    assert tuple(x[to_nbx(np.array(1, dtype=np.uint8))].shape) == (1, 3, 4)  # a byte tensor is a mask
    for index in [1.0, "a", to_nbx(np.array(1.0)), to_nbx(np.array([1.0]))]:
        with pytest.raises(IndexError):
            x[index]


def test_iteration_and_len():
    array, x = arange_pair((3, 2))
    rows = list(x)
    assert len(rows) == len(x) == 3
    assert [r.tolist() for r in rows] == array.tolist()
    assert [[v.item() for v in row] for row in x] == array.tolist()
    assert list(to_nbx(np.zeros((0, 2)))) == []
    assert len(x.t()) == 2 and [r.tolist() for r in x.t()] == array.T.tolist()
    with pytest.raises(TypeError):
        len(to_nbx(np.float64(1.0)))
    with pytest.raises(TypeError):
        iter(to_nbx(np.float64(1.0)))
    a, b, c = x  # unpacking uses iteration, which must end
    assert c.tolist() == array[2].tolist()


def test_bool_of_one_element_and_ambiguous_bool():
    assert bool(to_nbx(np.array([0.5]))) is True
    assert bool(to_nbx(np.array([[0.0]]))) is False
    assert bool(to_nbx(np.array(3, dtype=np.int32))) is True
    assert bool(to_nbx(np.array([False]))) is False
    _, x = arange_pair((2, 3))
    assert bool(x[1, 2]) and not bool(x[0, 0])
    for ambiguous in (x, to_nbx(np.zeros(0))):
        with pytest.raises(RuntimeError):
            bool(ambiguous)


def test_setitem_on_strided_views_stays_inside_them():
    array, x = arange_pair((4, 6))
    x[1::2, ::3] = 100.0
    array[1::2, ::3] = 100.0
    assert np.array_equal(x.numpy(), array)
    column = x.t()[2]
    column[...] = to_nbx(np.array([-1.0, -2.0, -3.0, -4.0]))
    array.T[2] = [-1.0, -2.0, -3.0, -4.0]
    assert np.array_equal(x.numpy(), array)
    window = x[1:3, 2:5]
    window[:, None, 1] = to_nbx(np.array([[7.0], [8.0]]))[:, :, None][:, 0]
    array[1:3, 3] = [7.0, 8.0]
    assert np.array_equal(x.numpy(), array)
    x[-1] = to_nbx(np.array([[9.0]]))  # leading extent-1 dims of the value are dropped, then it broadcasts
    array[-1] = 9.0
    assert np.array_equal(x.numpy(), array)
    x[0, 0] = to_nbx(np.array([[[5.0]]]))
    array[0, 0] = 5.0
    assert np.array_equal(x.numpy(), array)


def test_setitem_converts_dtypes_and_python_scalars():
    x = to_nbx(np.zeros((2, 3), dtype=np.float32))
    x[0] = to_nbx(np.array([1, 2, 3], dtype=np.int64))
    x[1, 1:] = 2
    x[1, 0] = True
    assert x.numpy().tolist() == [[1.0, 2.0, 3.0], [1.0, 2.0, 2.0]]
    ints = to_nbx(np.zeros(4, dtype=np.int32))
    ints[1::2] = 7
    ints[0] = to_nbx(np.array(2.9))
    assert ints.numpy().tolist() == [2, 7, 0, 7]
    flags = to_nbx(np.zeros(3, dtype=bool))
    flags[1] = 5
    assert flags.numpy().tolist() == [False, True, False]


def test_setitem_refuses_broadcast_targets_and_bad_value_shapes():
    _, x = arange_pair((3,))
    expanded = x.expand(2, 3)
    with pytest.raises(RuntimeError):
        expanded[...] = 1.0
    with pytest.raises(RuntimeError):
        expanded[0:2] = to_nbx(np.ones(3))
    _, y = arange_pair((2, 3))
    with pytest.raises(RuntimeError):
        y[0] = to_nbx(np.ones(2))
    with pytest.raises(RuntimeError):
        y[0] = to_nbx(np.ones((2, 3)))


def test_item_and_tolist_on_indexed_views():
    array, x = arange_pair((2, 3, 4))
    assert x[1, -1, 2].item() == array[1, -1, 2]
    assert x[..., 1].tolist() == array[..., 1].tolist()
    assert x[None, :, 1:, ::2].tolist() == array[None, :, 1:, ::2].tolist()
    assert x[1, 2, 3].tolist() == array[1, 2, 3]
    with pytest.raises(RuntimeError):
        x[0].item()
    ints = to_nbx(np.arange(6, dtype=np.int16).reshape(2, 3))
    assert isinstance(ints[1, 2].item(), int) and ints[1, 2].item() == 5


def test_setitem_from_the_same_storage():
    array, x = arange_pair((2, 3))
    x[0] = x[1]  # disjoint parts of one storage: fine
    array[0] = array[1]
    x[0, 0] = x[1, 2]
    array[0, 0] = array[1, 2]
    assert np.array_equal(x.numpy(), array)
    _, flat = arange_pair((6,))
    with pytest.raises(RuntimeError):
        flat[1:] = flat[:-1]  # partly overlapping source and target: ATen refuses, clone() first
    flat[1:] = flat[:-1].clone()
    assert flat.numpy().tolist() == [0.0, 0.0, 1.0, 2.0, 3.0, 4.0]
