"""View ops against NumPy. Bases hold ``arange`` values, so a view's values are the flat positions of
the base elements it covers: a view must read exactly those, and a write through it must change
exactly those (a view is a view). Everything is exact: no arithmetic happens."""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbxtensor as nbx
from tests.conftest import TEST_DEVICE, arange_pair, storage_start, to_nbx

SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])

shapes = st.lists(st.integers(0, 4), min_size=0, max_size=5).map(tuple)


def shares_storage(a, b):
    return a.numel() > 0 and b.numel() > 0 and storage_start(a) == storage_start(b)


def has_broadcast_dims(t):
    return any(stride == 0 and n > 1 for n, stride in zip(t.shape, t.stride()))


def wrap(dim, ndim):
    ndim = max(ndim, 1)
    return dim + ndim if dim < 0 else dim


# ---- random view ops: each draws arguments for the current shape; returns (name, nbx_fn, numpy_fn) ----

def draw_dim(data, ndim, extra=0):
    n = max(ndim + extra, 1)
    return data.draw(st.integers(-n, n - 1), label="dim")


def op_permute(data, shape):
    perm = tuple(data.draw(st.permutations(range(len(shape))), label="perm"))
    return f"permute{perm}", lambda t: t.permute(perm), lambda a: np.transpose(a, perm)


def op_transpose(data, shape):
    if not shape:
        return "transpose(0, -1)", lambda t: t.transpose(0, -1), lambda a: a
    a, b = draw_dim(data, len(shape)), draw_dim(data, len(shape))
    return f"transpose({a}, {b})", lambda t: t.transpose(a, b), lambda x: np.swapaxes(x, a, b)


def op_slice(data, shape):
    if not shape:
        return "[...]", lambda t: t[...], lambda a: a[...]
    d = data.draw(st.integers(0, len(shape) - 1), label="dim")
    n = shape[d]
    bound = st.one_of(st.none(), st.integers(-n - 2, n + 2))
    index = (slice(None),) * d + (slice(data.draw(bound, label="start"), data.draw(bound, label="stop"),
                                        data.draw(st.integers(1, 3), label="step")),)
    return f"[{index}]", lambda t: t[index], lambda a: a[index]


def op_select(data, shape):
    if not shape or 0 in shape:
        return op_slice(data, shape)
    d = draw_dim(data, len(shape))
    n = shape[d]
    i = data.draw(st.integers(-n, n - 1), label="index")
    index = (slice(None),) * wrap(d, len(shape)) + (i,)
    return f"select({d}, {i})", lambda t: t.select(d, i), lambda a: a[index]


def op_narrow(data, shape):
    if not shape:
        return op_slice(data, shape)
    d = draw_dim(data, len(shape))
    n = shape[wrap(d, len(shape))]
    start = data.draw(st.integers(-n, n), label="start")
    length = data.draw(st.integers(0, n - (start % n if n and start < 0 else start)), label="length")
    begin = start + n if start < 0 else start
    index = (slice(None),) * wrap(d, len(shape)) + (slice(begin, begin + length),)
    return f"narrow({d}, {start}, {length})", lambda t: t.narrow(d, start, length), lambda a: a[index]


def op_unsqueeze(data, shape):
    d = draw_dim(data, len(shape), extra=1)
    return f"unsqueeze({d})", lambda t: t.unsqueeze(d), lambda a: np.expand_dims(a, d)


def op_squeeze(data, shape):
    if data.draw(st.booleans(), label="all") or not shape:
        return "squeeze()", lambda t: t.squeeze(), lambda a: np.squeeze(a)
    d = draw_dim(data, len(shape))
    keep = shape[wrap(d, len(shape))] != 1
    return f"squeeze({d})", lambda t: t.squeeze(d), lambda a: a if keep else np.squeeze(a, d)


def op_expand(data, shape):
    lead = data.draw(st.lists(st.integers(1, 3), max_size=2), label="lead")
    sizes = [data.draw(st.sampled_from([-1, 0, 1, 3]), label="size") if s == 1 else -1 for s in shape]
    target = tuple(lead + sizes)
    resolved = tuple(lead + [s if n == -1 else n for s, n in zip(shape, sizes)])
    return f"expand{target}", lambda t: t.expand(target), lambda a: np.broadcast_to(a, resolved)


def op_movedim(data, shape):
    if not shape:
        return op_permute(data, shape)
    k = data.draw(st.integers(1, len(shape)), label="count")
    src = data.draw(st.permutations(range(len(shape))), label="src")[:k]
    dst = data.draw(st.permutations(range(-len(shape), 0)), label="dst")[:k]
    return (f"movedim({src}, {dst})", lambda t: t.movedim(tuple(src), tuple(dst)),
            lambda a: np.moveaxis(a, src, dst))


def op_unfold(data, shape):
    if not shape:
        return "unfold(0, 1, 1)", lambda t: t.unfold(0, 1, 1), lambda a: a.reshape(1)
    d = draw_dim(data, len(shape))
    axis = wrap(d, len(shape))
    size = data.draw(st.integers(0, shape[axis]), label="size")
    step = data.draw(st.integers(1, 3), label="step")

    def reference(a):
        windows = np.lib.stride_tricks.sliding_window_view(a, size, axis=axis)
        return windows[(slice(None),) * axis + (slice(None, None, step),)]
    return f"unfold({d}, {size}, {step})", lambda t: t.unfold(d, size, step), reference


def op_reshape(data, shape):
    """reshape / flatten / view(-1)-like reshapes: a view or a copy, the values are NumPy's either way."""
    count = math.prod(shape)
    if count and data.draw(st.booleans(), label="flatten"):
        a, b = sorted((data.draw(st.integers(0, max(len(shape) - 1, 0)), label="a"),
                       data.draw(st.integers(0, max(len(shape) - 1, 0)), label="b")))
        merged = shape[:a] + (math.prod(shape[a:b + 1]),) + shape[b + 1:] if shape else (1,)
        return f"flatten({a}, {b})", lambda t: t.flatten(a, b), lambda x: x.reshape(merged)
    target = tuple(reversed(shape)) if data.draw(st.booleans(), label="reverse") else (count,)
    return f"reshape{target}", lambda t: t.reshape(target), lambda a: a.reshape(target)


def op_transposes(data, shape):
    if len(shape) == 2 and data.draw(st.booleans(), label="t"):
        return "t()", lambda t: t.t(), lambda a: a.T
    if len(shape) >= 2 and data.draw(st.booleans(), label="mT"):
        return "mT", lambda t: t.mT, lambda a: np.swapaxes(a, -1, -2)
    return "T", lambda t: t.permute(tuple(range(t.ndim - 1, -1, -1))), lambda a: a.T


VIEW_OPS = [op_permute, op_transpose, op_slice, op_select, op_narrow, op_unsqueeze, op_squeeze, op_expand,
            op_movedim, op_unfold, op_transposes]


def run_chain(data, shape, ops, max_steps=4):
    array, base = arange_pair(shape)
    view, expected, names = base, array, []
    for _ in range(data.draw(st.integers(1, max_steps), label="steps")):
        name, fn, reference = data.draw(st.sampled_from(ops), label="op")(data, tuple(view.shape))
        names.append(name)
        view, expected = fn(view), reference(expected)
        assert tuple(view.shape) == expected.shape, " -> ".join(names)
    return base, view, expected, " -> ".join(names)


def check_writes_land_in_base(base, view, what):
    """Fill ``view`` with -1 and check the base changed exactly where the view's elements live."""
    positions = view.numpy().astype(np.int64).reshape(-1)  # arange values: the flat base positions
    view.fill_(-1)  # ATen's fill_ accepts broadcast views too: one value, written once or many times
    expected = np.arange(base.numel(), dtype=np.float64)
    expected[positions] = -1
    assert np.array_equal(base.numpy().reshape(-1), expected), what


@SETTINGS
@given(shape=shapes, data=st.data())
def test_view_chain_values_match_numpy_and_writes_reach_the_base(shape, data):
    base, view, expected, what = run_chain(data, shape, VIEW_OPS)
    assert np.array_equal(view.numpy(), expected), what
    assert np.array_equal(view.contiguous().numpy(), expected), what
    if view.numel():
        assert shares_storage(view, base), what
    check_writes_land_in_base(base, view, what)


@SETTINGS
@given(shape=shapes, data=st.data())
def test_view_chain_with_reshapes_matches_numpy(shape, data):
    base, view, expected, what = run_chain(data, shape, VIEW_OPS + [op_reshape] * 3, max_steps=5)
    assert np.array_equal(view.numpy(), expected), what
    assert np.array_equal(view.clone().numpy(), expected), what
    if shares_storage(view, base):
        check_writes_land_in_base(base, view, what)


@SETTINGS
@given(shape=shapes, data=st.data())
def test_setitem_tensor_through_a_view_writes_only_the_view(shape, data):
    base, view, expected, what = run_chain(data, shape, [op for op in VIEW_OPS if op is not op_expand])
    positions = view.numpy().astype(np.int64)
    if len(np.unique(positions)) != positions.size:
        return  # overlapping windows (unfold): the written value is not defined
    source_shape = tuple(data.draw(st.sampled_from([1, n]), label="src extent") for n in view.shape)
    source_shape = source_shape[data.draw(st.integers(0, len(source_shape)), label="src rank cut"):]
    source = -1.0 - np.arange(math.prod(source_shape)).reshape(source_shape)
    view[...] = to_nbx(source)
    wanted = np.arange(base.numel(), dtype=np.float64)
    wanted[positions.reshape(-1)] = np.broadcast_to(source, positions.shape).reshape(-1)
    assert np.array_equal(base.numpy().reshape(-1), wanted), what


@SETTINGS
@given(shape=shapes, data=st.data())
def test_transpose_then_reshape_matches_numpy(shape, data):
    array, x = arange_pair(shape)
    a, b = draw_dim(data, len(shape)), draw_dim(data, len(shape))
    transposed = x.transpose(a, b)
    expected = np.swapaxes(array, a, b) if shape else array
    target = random_shape(data, math.prod(shape))
    assert np.array_equal(transposed.reshape(target).numpy(), expected.reshape(target))
    assert np.array_equal(transposed.flatten().numpy(), expected.reshape(-1))


def random_shape(data, count):
    if count == 0:
        return (0,) + tuple(data.draw(st.lists(st.integers(1, 3), max_size=2), label="zero shape"))
    shape = [1] * data.draw(st.integers(1, 4), label="rank")
    for p in (2, 3):
        while count % p == 0:
            count //= p
            shape[data.draw(st.integers(0, len(shape) - 1), label="factor at")] *= p
    shape[0] *= count
    if data.draw(st.booleans(), label="infer"):
        shape[data.draw(st.integers(0, len(shape) - 1), label="infer at")] = -1
    return tuple(shape)


# ---- ATen's view rule ---------------------------------------------------------------------------

@pytest.mark.parametrize("build", [
    lambda t: t.reshape(3, 4).t(),
    lambda t: t.reshape(3, 4).transpose(0, 1).unsqueeze(0),
    lambda t: t.reshape(4, 3)[:, ::2],
    lambda t: t.reshape(3, 4)[:, 1:3],
    lambda t: t.reshape(3, 1, 4).expand(3, 2, 4),
    lambda t: t[:4].expand(2, 4),
], ids=["transposed", "transposed-unsqueezed", "stepped", "narrowed", "expanded", "expanded-new-dim"])
def test_view_raises_when_the_strides_do_not_allow_it(build):
    array, x = arange_pair((12,))
    y = build(x)
    with pytest.raises(RuntimeError) as info:
        y.view(-1)
    assert str(tuple(y.shape)) in str(info.value) and str(y.stride()) in str(info.value)
    copied = y.reshape(-1)
    assert not shares_storage(copied, x)
    assert np.array_equal(copied.numpy(), y.numpy().reshape(-1))
    copied.fill_(-5)
    assert np.array_equal(x.numpy(), array)  # writes to the copy stay in the copy


@pytest.mark.parametrize("build,target", [
    (lambda t: t, (4, 6)),
    (lambda t: t.reshape(2, 3, 4)[1:], (3, 4)),
    (lambda t: t.reshape(2, 3, 4)[:, 1:], (2, 8)),
    (lambda t: t.reshape(2, 3, 4)[:, :, 1:3], (2, 3, 2, 1)),
    (lambda t: t.reshape(2, 3, 4).permute(2, 0, 1), (4, 6)),
    (lambda t: t.reshape(2, 3, 4)[:, 1:2].expand(2, 5, 4)[:, :1], (2, 4)),
    (lambda t: t.reshape(2, 3, 4)[::2, ::2], (2, 4)),
    (lambda t: t.reshape(2, 3, 4)[0].t(), (2, 2, 3)),
], ids=range(8))
def test_view_and_reshape_share_memory_when_strides_allow(build, target):
    array, x = arange_pair((24,))
    y = build(x)
    viewed, reshaped = y.view(target), y.reshape(target)
    for result in (viewed, reshaped):
        assert shares_storage(result, x)
        assert np.array_equal(result.numpy(), y.numpy().reshape(target))
    reshaped.fill_(-1)
    assert np.array_equal(y.numpy(), np.full(y.shape, -1.0))
    assert (x.numpy() == -1).sum() == y.numel()


def test_flatten_returns_a_view_of_a_contiguous_run_and_copies_otherwise():
    array, x = arange_pair((2, 3, 4))
    inner = x[:, 1:].flatten(1)  # (2, 8): the last two dims stay one contiguous run
    assert shares_storage(inner, x) and inner.stride() == (12, 1)
    inner.fill_(-1)
    assert np.array_equal(x.numpy()[:, 1:], np.full((2, 2, 4), -1.0))
    assert np.array_equal(x.numpy()[:, 0], array[:, 0])
    outer = x.transpose(0, 2).flatten()
    assert not shares_storage(outer, x)
    assert np.array_equal(outer.numpy(), x.numpy().transpose(2, 1, 0).reshape(-1))
    assert x.flatten(1, 1) is x or shares_storage(x.flatten(1, 1), x)
    zero_d = to_nbx(np.float64(7.0))
    assert zero_d.flatten().shape == (1,) and zero_d.flatten().tolist() == [7.0]
    with pytest.raises(RuntimeError):
        x.flatten(2, 1)


def test_view_infers_minus_one_and_rejects_bad_shapes():
    _, x = arange_pair((3, 4))
    assert x.view(-1, 6).shape == (2, 6)
    assert x.view(2, -1, 3).shape == (2, 2, 3)
    for bad in [(5, -1), (-1, -1), (2, 7), (-2, 6)]:
        with pytest.raises(RuntimeError):
            x.view(bad)
        with pytest.raises(RuntimeError):
            x.reshape(bad)
    empty = to_nbx(np.zeros((0, 3)))
    assert empty.view(3, 0, 1).shape == (3, 0, 1)
    with pytest.raises(RuntimeError):
        empty.view(-1, 0)


def test_expand_and_broadcast_to_read_the_same_element_repeatedly():
    array, x = arange_pair((3, 1))
    y = x.expand(2, 3, 4)
    assert y.stride() == (0, 1, 0)
    assert np.array_equal(y.numpy(), np.broadcast_to(array, (2, 3, 4)))
    assert np.array_equal(x.broadcast_to((3, 5)).numpy(), np.broadcast_to(array, (3, 5)))
    assert np.array_equal(x.expand_as(to_nbx(np.zeros((2, 3, 2)))).numpy(), np.broadcast_to(array, (2, 3, 2)))
    assert np.array_equal(y.contiguous().numpy(), np.broadcast_to(array, (2, 3, 4)))
    with pytest.raises(RuntimeError):
        x.expand(3, 2, 4)  # a non-singleton extent cannot change
    with pytest.raises(RuntimeError):
        x.expand(-1, 3, 1)  # -1 in a new leading dim
    with pytest.raises(RuntimeError):
        y[...] = 0.0  # assignment refuses to write broadcast elements (fill_ allows it, as in ATen)
    with pytest.raises(RuntimeError):
        y.copy_(to_nbx(np.zeros((2, 3, 4))))


# ---- split, chunk, unbind, movedim, unfold, as_strided ----------------------------------------

@SETTINGS
@given(shape=st.lists(st.integers(0, 5), min_size=1, max_size=3).map(tuple), data=st.data())
def test_split_chunk_unbind_match_numpy(shape, data):
    array, x = arange_pair(shape)
    d = draw_dim(data, len(shape))
    axis = wrap(d, len(shape))
    n = shape[axis]

    def pieces(sizes):
        bounds = np.cumsum([0] + sizes)
        return [array[(slice(None),) * axis + (slice(a, b),)] for a, b in zip(bounds[:-1], bounds[1:])]

    def check(parts, expected):
        assert len(parts) == len(expected)
        for part, want in zip(parts, expected):
            assert np.array_equal(part.numpy(), want)
            if part.numel():
                assert shares_storage(part, x)

    size = data.draw(st.integers(1, 4), label="split size")
    check(x.split(size, d), pieces([min(size, n - i) for i in range(0, n, size)] or [0]))
    sections = data.draw(st.lists(st.integers(0, n), max_size=3), label="sections")
    sections = sections + [n - sum(sections)] if sum(sections) <= n else [n]
    check(x.split(sections, d), pieces(sections))
    chunks = data.draw(st.integers(1, 6), label="chunks")
    step = -(-n // chunks)
    check(x.chunk(chunks, d), pieces([min(step, n - i) for i in range(0, n, step)] if n else [0] * chunks))
    check(x.unbind(d), [np.take(array, i, axis=axis) for i in range(n)])


def test_split_with_bad_sizes_raises():
    _, x = arange_pair((4, 3))
    with pytest.raises(RuntimeError):
        x.split([1, 2])
    with pytest.raises(RuntimeError):
        x.split(0)
    with pytest.raises(RuntimeError):
        x.split(-1)
    with pytest.raises(RuntimeError):
        x.chunk(0)
    with pytest.raises(RuntimeError):
        to_nbx(np.float64(1)).chunk(1)


@SETTINGS
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=5).map(tuple), data=st.data())
def test_movedim_matches_numpy_moveaxis(shape, data):
    array, x = arange_pair(shape)
    k = data.draw(st.integers(1, len(shape)), label="count")
    src = data.draw(st.permutations(range(len(shape))), label="src")[:k]
    dst = data.draw(st.permutations(range(-len(shape), 0)), label="dst")[:k]
    assert np.array_equal(x.movedim(tuple(src), tuple(dst)).numpy(), np.moveaxis(array, src, dst))
    assert np.array_equal(nbx.moveaxis(x, src[0], dst[0]).numpy(), np.moveaxis(array, src[0], dst[0]))
    with pytest.raises(RuntimeError):
        x.movedim((0, 0), (0, 1)) if len(shape) > 1 else x.movedim((0,), (0, 0))


@pytest.mark.parametrize("shape,dim,size,step", [
    ((7,), 0, 3, 2), ((7,), 0, 7, 1), ((7,), 0, 0, 1), ((3, 5), 1, 2, 3), ((3, 5), -2, 1, 1), ((2, 3, 4), 1, 3, 5),
    ((0, 4), 1, 2, 2),
])
def test_unfold_matches_sliding_windows(shape, dim, size, step):
    array, x = arange_pair(shape)
    axis = wrap(dim, len(shape))
    windows = np.lib.stride_tricks.sliding_window_view(array, size, axis=axis)
    expected = windows[(slice(None),) * axis + (slice(None, None, step),)]
    result = x.unfold(dim, size, step)
    assert np.array_equal(result.numpy(), expected)
    if result.numel():
        assert shares_storage(result, x)


def test_unfold_rejects_oversized_windows_and_bad_steps():
    _, x = arange_pair((3, 4))
    with pytest.raises(RuntimeError):
        x.unfold(1, 5, 1)
    with pytest.raises(RuntimeError):
        x.unfold(1, 2, 0)
    zero_d = to_nbx(np.float64(3.0))
    assert zero_d.unfold(0, 1, 1).tolist() == [3.0]


def test_as_strided_matches_numpy_and_stays_in_the_storage():
    array, x = arange_pair((3, 4))
    itemsize = array.itemsize
    windows = x.as_strided((2, 2, 2), (4, 1, 4), 1)
    expected = np.lib.stride_tricks.as_strided(array.reshape(-1)[1:], (2, 2, 2),
                                               (4 * itemsize, itemsize, 4 * itemsize))
    assert np.array_equal(windows.numpy(), expected)
    assert np.array_equal(x[1:].as_strided((2, 2), (1, 2)).numpy(), array.reshape(-1)[4:][[[0, 2], [1, 3]]])
    with pytest.raises(RuntimeError):
        x.as_strided((13,), (1,), 0)
    with pytest.raises(RuntimeError):
        x.as_strided((2,), (-1,), 1)
    column = x.as_strided((3,), (4,), 2)
    column.fill_(-1)
    assert np.array_equal(x.numpy()[:, 2], [-1, -1, -1])


# ---- complex and dtype views -----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_views_match_numpy_and_write_through(dtype):
    array = (np.arange(12) - 1j * np.arange(12, 24)).astype(dtype).reshape(3, 4)
    x = to_nbx(array)
    for view, reference in [(x, array), (x.t(), array.T), (x[:, 1::2], array[:, 1::2]), (x[1], array[1]),
                            (x[1, 2], array[1, 2])]:
        pairs = nbx.view_as_real(view)
        assert np.array_equal(pairs.numpy(), np.stack([reference.real, reference.imag], axis=-1))
        assert np.array_equal(view.real.numpy(), reference.real)
        assert np.array_equal(view.imag.numpy(), reference.imag)
        assert np.array_equal(nbx.view_as_complex(pairs).numpy(), reference)
    x[:, 1].real.fill_(100)
    x[0].imag.fill_(-100)
    expected = array.copy()
    expected[:, 1].real = 100
    expected[0].imag = -100
    assert np.array_equal(x.numpy(), expected)
    real = to_nbx(np.arange(6.0))
    assert real.real is real or np.array_equal(real.real.numpy(), np.arange(6.0))
    with pytest.raises(RuntimeError):
        real.imag
    with pytest.raises(RuntimeError):
        nbx.view_as_real(real)


def test_view_as_complex_requirements():
    array = np.arange(24.0).reshape(3, 4, 2)
    x = to_nbx(array)
    assert np.array_equal(nbx.view_as_complex(x).numpy(), array[..., 0] + 1j * array[..., 1])
    assert nbx.view_as_complex(x).dtype == nbx.complex128
    for bad in [x[..., :1], x.transpose(1, 2), x.reshape(-1)[1:23].reshape(11, 2), x[1, 1, 1],
                to_nbx(np.arange(4, dtype=np.int32)).reshape(2, 2)]:
        with pytest.raises(RuntimeError):
            nbx.view_as_complex(bad)


@pytest.mark.parametrize("source,target", [
    ("float32", "int32"), ("float32", "uint8"), ("int16", "float16"), ("uint8", "int32"), ("float64", "int16"),
    ("int8", "bool"), ("complex64", "float64"), ("int32", "complex64"), ("float16", "bfloat16"),
])
def test_view_dtype_reinterprets_bytes_as_numpy_does(source, target):
    raw = np.arange(96, dtype=np.uint8) * 37
    if "bool" in (source, target):
        raw %= 2  # only 0 and 1 are bools
    array = raw.view(nbx.get_dtype(source).numpy).reshape(3, -1)
    x = to_nbx(array)
    target_np = nbx.get_dtype(target).numpy
    group = max(1, np.dtype(target_np).itemsize // array.itemsize)  # source elements per target element
    for view, reference in [(x, array), (x[1:], array[1:]), (x[:, :group], array[:, :group]),
                            (x[:, group:], array[:, group:]), (x[::2], array[::2])]:
        result = view.view(getattr(nbx, target))
        assert result.dtype == getattr(nbx, target)
        assert np.array_equal(result.numpy().view(np.uint8), reference.view(target_np).view(np.uint8))
        if view.numel():
            assert shares_storage(result, x)


def test_view_dtype_rejects_layouts_it_cannot_reinterpret():
    x = to_nbx(np.arange(12, dtype=np.float32).reshape(3, 4))
    with pytest.raises(RuntimeError):
        x.t().view(nbx.int16)  # last dim not of stride 1
    with pytest.raises(RuntimeError):
        x[:, :3].view(nbx.float64)  # last extent not a multiple of 2
    with pytest.raises(RuntimeError):
        x[:, 1:3].view(nbx.float64)  # offset not a multiple of 2
    with pytest.raises(RuntimeError):
        x[0, 0].view(nbx.int16)  # 0-d with another element size
    assert x[0, 0].view(nbx.int32).item() == 0
    assert x.t().view(nbx.int32).stride() == (1, 4)  # same element size: any layout


# ---- host access on views, 0-d and empty ------------------------------------------------------------

def test_item_tolist_and_numpy_on_views_of_any_strides():
    array, x = arange_pair((3, 4, 5))
    assert x[1, 2, 3].item() == array[1, 2, 3]
    assert x[-1, -2, -3].item() == array[-1, -2, -3]
    assert x.permute(2, 0, 1)[4, 2, 1].item() == array.transpose(2, 0, 1)[4, 2, 1]
    assert x[:, 1].tolist() == array[:, 1].tolist()
    assert x.transpose(0, 2)[::2, 1:].tolist() == array.transpose(2, 1, 0)[::2, 1:].tolist()
    assert x[2, 3, 4].tolist() == array[2, 3, 4]
    for view, reference in [(x.permute(1, 2, 0), array.transpose(1, 2, 0)), (x[::2, 1::3, 1:], array[::2, 1::3, 1:]),
                            (x[:, :, 2:3].expand(3, 4, 6), np.broadcast_to(array[:, :, 2:3], (3, 4, 6))),
                            (x[1:, 2:], array[1:, 2:]), (x[0, 0, 0], array[0, 0, 0]), (x[:, 5:], array[:, 5:])]:
        assert np.array_equal(view.numpy(), reference)
        assert np.array_equal(np.asarray(view), reference)
        assert view.numpy().shape == reference.shape


def test_zero_dim_views():
    x = to_nbx(np.float64(2.5))
    assert x.view(()).item() == 2.5 and x.reshape(1, 1).tolist() == [[2.5]]
    assert x.unsqueeze(0).shape == (1,) and x.unsqueeze(-1).stride() == (1,)
    assert x.squeeze().shape == () and x.squeeze(0).shape == () and x.squeeze(-1).shape == ()
    assert x.expand(2, 3).tolist() == [[2.5] * 3] * 2
    assert x.t().shape == () and x.T.shape == () and x.permute(()).shape == ()
    assert x[...].item() == 2.5 and x[None].tolist() == [2.5] and x[None, ..., None].shape == (1, 1)
    assert x[()].item() == 2.5
    assert x.flatten().tolist() == [2.5]
    with pytest.raises(IndexError):
        x.select(0, 0)
    with pytest.raises(RuntimeError):
        x.narrow(0, 0, 1)
    with pytest.raises(IndexError):
        x.unbind()
    with pytest.raises(IndexError):
        x.unsqueeze(2)
    x[...] = 4.0
    assert x.item() == 4.0
    x.view(1)[0] = 5.0
    assert x.item() == 5.0


def test_empty_tensor_views():
    array, x = arange_pair((2, 0, 3))
    assert x.numel() == 0 and x.numpy().shape == (2, 0, 3)
    assert x.permute(2, 0, 1).shape == (3, 2, 0)
    assert x.view(0).shape == (0,) and x.view(6, 0).shape == (6, 0) and x.reshape(-1, 3).shape == (0, 3)
    assert x.flatten().shape == (0,) and x.flatten().tolist() == []
    assert x[:, :, 1:].shape == (2, 0, 2) and x[1].shape == (0, 3)
    assert x.transpose(0, 1).contiguous().shape == (0, 2, 3)
    assert x.unbind(1) == ()
    assert [p.shape for p in x.chunk(3, 1)] == [(2, 0, 3)] * 3
    assert x.expand(4, 2, 0, 3).shape == (4, 2, 0, 3)
    assert x.unsqueeze(1).shape == (2, 1, 0, 3)
    assert x.tolist() == [[], []]
    x[...] = 1.0  # nothing to write
    x.fill_(2.0)
    with pytest.raises(IndexError):
        x[0, 0]


# ---- high ranks: the copy must not drop dims past a fixed count --------------------------------------

@pytest.mark.parametrize("shape", [(2, 3, 1, 2, 2, 3), (2, 1, 2, 2, 3, 1, 2, 2), (2,) * 10],
                         ids=["6d", "8d", "10d"])
def test_high_rank_permute_then_contiguous_matches_numpy(shape):
    array, x = arange_pair(shape)
    rng = np.random.default_rng(len(shape))
    for _ in range(3):
        perm = tuple(int(p) for p in rng.permutation(len(shape)))
        result = x.permute(perm).contiguous()
        assert result.is_contiguous()
        assert np.array_equal(result.numpy(), array.transpose(perm))
    sliced = x[(slice(None, None, 2),) * 2 + (slice(None),) * (len(shape) - 2)].transpose(0, -1)
    assert np.array_equal(sliced.contiguous().numpy(), array[::2, ::2].swapaxes(0, -1))
    patches = x.permute(tuple(range(len(shape) - 1, -1, -1))).reshape(-1)
    assert np.array_equal(patches.numpy(), array.transpose().reshape(-1))


def test_high_rank_setitem_writes_only_the_view():
    array, x = arange_pair((2, 2, 3, 2, 2, 1, 2, 3))
    x[1, :, ::2, ..., 1:] = -1.0
    expected = array.copy()
    expected[1, :, ::2, ..., 1:] = -1.0
    assert np.array_equal(x.numpy(), expected)
    source = to_nbx(-np.arange(2 * 2 * 3 * 2 * 2 * 1 * 2 * 3, dtype=np.float64).reshape(array.shape))
    target = to_nbx(np.zeros(array.transpose(7, 6, 5, 4, 3, 2, 1, 0).shape))
    target.permute(7, 6, 5, 4, 3, 2, 1, 0).copy_(source)
    assert np.array_equal(target.numpy(), source.numpy().transpose(7, 6, 5, 4, 3, 2, 1, 0))


def test_views_keep_their_device():
    _, x = arange_pair((2, 3))
    for view in (x.t(), x[1], x.view(6), x.unsqueeze(0), x.expand(2, 2, 3)):
        assert str(view.device) == str(x.device)
    assert str(x.device).startswith(TEST_DEVICE)


def test_writing_into_an_empty_view_with_a_broadcast_dim_is_allowed():
    """Found by hypothesis: an empty view whose other dim has stride 0 and extent 2 (unfold of an empty
    tensor) holds no element twice; ATen writes into it (nothing to write) instead of refusing."""
    view = to_nbx(np.zeros(0, np.float32)).unsqueeze(0).unfold(0, 0, 1)
    assert view.shape == (2, 0, 0) and view.stride() == (0, 1, 0)
    view[...] = to_nbx(np.zeros((2, 0, 0), np.float32))
    view.fill_(1.0)
