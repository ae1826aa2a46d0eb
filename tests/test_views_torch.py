"""View conformance against torch, the oracle: after every view op of a random chain, nbxtensor's
shape, strides and storage offset equal torch's, and where torch raises nbxtensor raises the same
exception type. ``view`` succeeds exactly when torch's does; ``reshape``/``flatten`` return a view
exactly when torch's do."""
import math
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbxtensor as nbx
from tests.conftest import storage_start, to_nbx

torch = pytest.importorskip("torch")

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

shapes = st.lists(st.integers(0, 4), min_size=0, max_size=5).map(tuple)


def base_pair(shape, dtype="float32"):
    """The same values as a torch tensor and an nbx tensor."""
    return torch_and_nbx(np.arange(math.prod(shape)).astype(dtype).reshape(shape))


def torch_and_nbx(array):
    """Contiguous copies of ``array`` (torch.from_numpy would keep NumPy's strides of empty arrays)."""
    theirs = torch.empty(array.shape, dtype=getattr(torch, array.dtype.name)).copy_(torch.from_numpy(array))
    mine = to_nbx(array)
    assert_same_layout(mine, theirs, "base")
    return theirs, mine


def outcome(fn, t):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns about .T on other than 2 dims
        try:
            return fn(t), None
        except Exception as e:  # noqa: BLE001  (the type is what is compared)
            return None, e


def assert_same_layout(mine, theirs, what):
    assert tuple(mine.shape) == tuple(theirs.shape), what
    assert tuple(mine.stride()) == tuple(theirs.stride()), what
    assert mine.storage_offset() == theirs.storage_offset(), what


def apply_both(fn, mine, theirs, what):
    """Run ``fn`` on both; returns both results, or None when both raised the same kind of error."""
    theirs_out, theirs_err = outcome(fn, theirs)
    mine_out, mine_err = outcome(fn, mine)
    if theirs_err is not None:
        assert mine_err is not None, f"{what}: torch raised {theirs_err!r}, nbxtensor did not"
        assert isinstance(mine_err, type(theirs_err)), f"{what}: torch raised {theirs_err!r}, nbx {mine_err!r}"
        return None
    assert mine_err is None, f"{what}: nbxtensor raised {mine_err!r}, torch did not"
    return mine_out, theirs_out


# ---- random view ops: each draws its arguments from the current shape and returns (name, fn) -------

def draw_dim(data, ndim, extra=0):
    n = max(ndim + extra, 1)
    return data.draw(st.integers(-n, n - 1), label="dim")


def op_permute(data, shape):
    perm = data.draw(st.permutations(range(len(shape))), label="perm")
    return f"permute{tuple(perm)}", lambda t: t.permute(tuple(perm))


def op_transpose(data, shape):
    a, b = draw_dim(data, len(shape)), draw_dim(data, len(shape))
    return f"transpose({a}, {b})", lambda t: t.transpose(a, b)


def op_slice(data, shape):
    if not shape:
        return "[...]", lambda t: t[...]
    d = data.draw(st.integers(0, len(shape) - 1), label="dim")
    n = shape[d]
    bound = st.one_of(st.none(), st.integers(-n - 2, n + 2))
    start, stop = data.draw(bound, label="start"), data.draw(bound, label="stop")
    step = data.draw(st.integers(1, 3), label="step")
    index = (slice(None),) * d + (slice(start, stop, step),)
    return f"[{index}]", lambda t: t[index]


def op_select(data, shape):
    d = draw_dim(data, len(shape))
    n = shape[d] if shape else 0
    i = data.draw(st.integers(-n - 1, n), label="index")
    return f"select({d}, {i})", lambda t: t.select(d, i)


def op_narrow(data, shape):
    d = draw_dim(data, len(shape))
    n = shape[d] if shape else 0
    start = data.draw(st.integers(-n - 1, n + 1), label="start")
    length = data.draw(st.integers(0, n + 1), label="length")
    return f"narrow({d}, {start}, {length})", lambda t: t.narrow(d, start, length)


def op_unsqueeze(data, shape):
    d = draw_dim(data, len(shape), extra=1)
    return f"unsqueeze({d})", lambda t: t.unsqueeze(d)


def op_squeeze(data, shape):
    how = data.draw(st.sampled_from(["all", "dim", "dims"]), label="squeeze")
    if how == "all":
        return "squeeze()", lambda t: t.squeeze()
    if how == "dim":
        d = draw_dim(data, len(shape))
        return f"squeeze({d})", lambda t: t.squeeze(d)
    dims = tuple(data.draw(st.sets(st.integers(0, max(len(shape), 1) - 1), max_size=3), label="dims"))
    return f"squeeze({dims})", lambda t: t.squeeze(dims)


def op_expand(data, shape):
    lead = data.draw(st.lists(st.integers(1, 3), max_size=2), label="lead")
    sizes = [data.draw(st.sampled_from([-1, 0, 2, 3]), label="size") if s == 1 else
             data.draw(st.sampled_from([-1, s]), label="size") for s in shape]
    target = tuple(lead + sizes)
    return f"expand{target}", lambda t: t.expand(target)


def op_flatten(data, shape):
    a, b = draw_dim(data, len(shape)), draw_dim(data, len(shape))
    return f"flatten({a}, {b})", lambda t: t.flatten(a, b)


def op_unflatten(data, shape):
    if not shape:
        return "unflatten(0, (1,))", lambda t: t.unflatten(0, (1,))
    d = data.draw(st.integers(0, len(shape) - 1), label="dim")
    sizes = random_shape(data, shape[d], max_rank=3)
    return f"unflatten({d}, {sizes})", lambda t: t.unflatten(d, sizes)


def op_movedim(data, shape):
    k = data.draw(st.integers(1, max(len(shape), 1)), label="count")
    src = tuple(data.draw(st.lists(st.integers(0, max(len(shape), 1) - 1), min_size=k, max_size=k), label="src"))
    dst = tuple(data.draw(st.lists(st.integers(0, max(len(shape), 1) - 1), min_size=k, max_size=k), label="dst"))
    if k == 1 and data.draw(st.booleans(), label="int form"):
        return f"movedim({src[0]}, {dst[0]})", lambda t: t.movedim(src[0], dst[0])
    return f"movedim({src}, {dst})", lambda t: t.movedim(src, dst)


def op_unfold(data, shape):
    d = draw_dim(data, len(shape))
    n = shape[d] if shape else 1
    size = data.draw(st.integers(0, n + 1), label="size")
    step = data.draw(st.integers(1, 3), label="step")
    return f"unfold({d}, {size}, {step})", lambda t: t.unfold(d, size, step)


def op_transposes(data, shape):
    which = data.draw(st.sampled_from(["t", "T", "mT"]), label="which")
    return which, {"t": lambda t: t.t(), "T": lambda t: t.T, "mT": lambda t: t.mT}[which]


def op_index(data, shape):
    """A basic index mixing ints (negative too), slices with steps, None and one ``...``."""
    items = []
    remaining = len(shape)
    dim = 0
    ellipsis_at = data.draw(st.one_of(st.none(), st.integers(0, 3)), label="ellipsis at")
    for position in range(data.draw(st.integers(0, 4), label="items")):
        if position == ellipsis_at:
            items.append(Ellipsis)
            dim = None
            continue
        kind = data.draw(st.sampled_from(["int", "slice", "none"]), label="kind")
        if kind == "none" or remaining == 0:
            items.append(None)
        elif kind == "int":
            n = shape[dim] if dim is not None else 2
            items.append(data.draw(st.integers(-n, max(n - 1, 0)), label="int"))
            remaining -= 1
        else:
            items.append(slice(data.draw(st.one_of(st.none(), st.integers(-4, 4)), label="start"),
                               data.draw(st.one_of(st.none(), st.integers(-4, 4)), label="stop"),
                               data.draw(st.sampled_from([None, 1, 2, 3]), label="step")))
            remaining -= 1
        if dim is not None and kind != "none" and items[-1] is not None:
            dim += 1
    index = tuple(items)
    return f"[{index}]", lambda t: t[index]


def op_split_family(data, shape):
    which = data.draw(st.sampled_from(["split", "split_sizes", "chunk", "unbind"]), label="which")
    d = draw_dim(data, len(shape))
    n = shape[d] if shape else 0
    pick = data.draw(st.integers(0, 5), label="pick")

    def nth(parts):
        return parts[pick % len(parts)] if parts else parts[0]

    if which == "split":
        size = data.draw(st.integers(0, 3), label="size")
        return f"split({size}, {d})[{pick}]", lambda t: nth(t.split(size, d))
    if which == "split_sizes":
        sizes = data.draw(st.lists(st.integers(0, n), max_size=3), label="sizes")
        if data.draw(st.booleans(), label="fit"):
            sizes = sizes + [n - sum(sizes)] if n >= sum(sizes) else [n]
        return f"split({sizes}, {d})[{pick}]", lambda t: nth(t.split(sizes, d))
    if which == "chunk":
        chunks = data.draw(st.integers(0, 4), label="chunks")
        return f"chunk({chunks}, {d})[{pick}]", lambda t: nth(t.chunk(chunks, d))
    return f"unbind({d})[{pick}]", lambda t: nth(t.unbind(d))


VIEW_OPS = [op_permute, op_transpose, op_slice, op_select, op_narrow, op_unsqueeze, op_squeeze, op_expand,
            op_flatten, op_unflatten, op_movedim, op_unfold, op_transposes, op_index, op_split_family]


def random_shape(data, count, max_rank=5):
    """A shape holding ``count`` elements, perhaps with one ``-1``."""
    if count == 0:
        rank = data.draw(st.integers(1, max_rank), label="rank")
        shape = data.draw(st.lists(st.integers(0, 3), min_size=rank, max_size=rank), label="zero shape")
        shape[data.draw(st.integers(0, rank - 1), label="zero at")] = 0
    else:
        factors = [p for p in (2, 3, 5, 7) for _ in range(_multiplicity(count, p))]
        rest = count // math.prod(factors)
        if rest > 1:
            factors.append(rest)
        rank = data.draw(st.integers(1 if factors else 0, max_rank), label="rank")
        shape = [1] * rank
        for f in factors:
            shape[data.draw(st.integers(0, rank - 1), label="factor at")] *= f
    if shape and data.draw(st.booleans(), label="infer"):
        shape[data.draw(st.integers(0, len(shape) - 1), label="infer at")] = -1
    return tuple(shape)


def _multiplicity(n, p):
    k = 0
    while n % p == 0:
        n //= p
        k += 1
    return k


@SETTINGS
@given(shape=shapes, data=st.data())
def test_view_chain_layout_matches_torch(shape, data):
    theirs, mine = base_pair(shape)
    steps = []
    for _ in range(data.draw(st.integers(1, 4), label="steps")):
        what, fn = data.draw(st.sampled_from(VIEW_OPS), label="op")(data, tuple(mine.shape))
        steps.append(what)
        both = apply_both(fn, mine, theirs, " -> ".join(steps))
        if both is None:
            return
        mine, theirs = both
        assert_same_layout(mine, theirs, " -> ".join(steps))
    assert np.array_equal(mine.numpy(), theirs.numpy()), " -> ".join(steps)


def layouts(data, shape):
    """A tensor pair of ``shape`` values laid out by a random permutation, step slicing or expansion."""
    theirs, mine = base_pair(shape)
    for _ in range(data.draw(st.integers(0, 3), label="layout steps")):
        op = data.draw(st.sampled_from([op_permute, op_slice, op_expand, op_unsqueeze, op_transpose]), label="op")
        what, fn = op(data, tuple(mine.shape))
        both = apply_both(fn, mine, theirs, what)
        if both is not None:
            mine, theirs = both
    return mine, theirs


@SETTINGS
@given(shape=shapes, data=st.data())
def test_view_and_reshape_follow_atens_rule(shape, data):
    mine, theirs = layouts(data, shape)
    target = random_shape(data, mine.numel())
    what = f"{tuple(mine.shape)} strides {mine.stride()} to {target}"
    viewed = apply_both(lambda t: t.view(target), mine, theirs, f"view {what}")
    if viewed is not None:
        assert_same_layout(*viewed, f"view {what}")
    reshaped = apply_both(lambda t: t.reshape(target), mine, theirs, f"reshape {what}")
    if reshaped is None:
        return
    assert_same_layout(*reshaped, f"reshape {what}")
    assert np.array_equal(reshaped[0].numpy(), reshaped[1].numpy())
    if mine.numel():
        torch_made_view = storage_start(reshaped[1]) == storage_start(theirs)
        assert (storage_start(reshaped[0]) == storage_start(mine)) == torch_made_view, what
        assert torch_made_view == (viewed is not None), what


@SETTINGS
@given(shape=shapes, data=st.data())
def test_flatten_is_a_view_exactly_when_torchs_is(shape, data):
    mine, theirs = layouts(data, shape)
    a, b = draw_dim(data, mine.ndim), draw_dim(data, mine.ndim)
    result = apply_both(lambda t: t.flatten(a, b), mine, theirs, f"flatten({a}, {b})")
    if result is None or not mine.numel():
        return
    assert_same_layout(*result, "flatten")
    assert (storage_start(result[0]) == storage_start(mine)) == (storage_start(result[1]) == storage_start(theirs))


@pytest.mark.parametrize("build", [
    lambda t: t.reshape(3, 4).t(),
    lambda t: t.reshape(4, 3)[:, ::2],
    lambda t: t.reshape(3, 4)[:, 1:3],
    lambda t: t.reshape(3, 1, 4).expand(3, 2, 4),
    lambda t: t.reshape(3, 4).permute(1, 0).unsqueeze(0),
], ids=["transposed", "stepped", "narrowed", "expanded", "transposed-unsqueezed"])
def test_view_of_non_viewable_layout_raises_naming_shape_and_strides(build):
    theirs, mine = base_pair((12,))
    theirs, mine = build(theirs), build(mine)
    with pytest.raises(RuntimeError):
        theirs.view(-1)
    with pytest.raises(RuntimeError) as info:
        mine.view(-1)
    message = str(info.value)
    assert str(tuple(mine.shape)) in message and str(mine.stride()) in message
    flat = mine.reshape(-1)
    assert storage_start(flat) != storage_start(mine)  # reshape had to copy
    assert np.array_equal(flat.numpy(), theirs.reshape(-1).numpy())


@pytest.mark.parametrize("bad", [(5, -1), (-1, -1), (2, 7), (0, -1), (-2, 6)])
def test_view_with_impossible_shape_raises_runtime_error(bad):
    theirs, mine = base_pair((3, 4))
    with pytest.raises(RuntimeError):
        theirs.view(bad)
    with pytest.raises(RuntimeError):
        mine.view(bad)
    with pytest.raises(RuntimeError):
        mine.reshape(bad)


DTYPE_PAIRS = [("float32", "int32"), ("float32", "int16"), ("float32", "uint8"), ("float32", "float64"),
               ("int8", "int32"), ("float64", "int16"), ("int16", "bool"), ("float32", "complex64"),
               ("complex64", "float32"), ("complex128", "float16"), ("uint8", "int64"), ("float16", "bfloat16")]


@pytest.mark.parametrize("source,target", DTYPE_PAIRS)
@SETTINGS
@given(data=st.data())
def test_view_dtype_matches_torch(source, target, data):
    shape = data.draw(st.lists(st.integers(0, 4), min_size=0, max_size=3).map(tuple), label="shape")
    raw = np.arange(max(math.prod(shape), 1) * 16, dtype=np.uint8) * 37
    if "bool" in (source, target):
        raw %= 2  # torch normalises bools on a copy; keep every byte a valid bool
    array = raw.view(nbx.get_dtype(source).numpy)[: math.prod(shape)].reshape(shape)
    theirs, mine = torch_and_nbx(array)
    what, fn = data.draw(st.sampled_from([op_permute, op_slice, op_narrow, op_unsqueeze]), label="op")(data, shape)
    both = apply_both(fn, mine, theirs, what)
    if both is None:
        return
    mine, theirs = both
    result = apply_both(lambda t: t.view(getattr(torch if isinstance(t, torch.Tensor) else nbx, target)),
                        mine, theirs, f"{what}.view({target})")
    if result is None:
        return
    assert_same_layout(*result, f"{what}.view({target})")
    assert result[0].dtype.name == target
    mine_bytes = np.ascontiguousarray(result[0].numpy()).reshape(-1).view(np.uint8)
    assert np.array_equal(mine_bytes, result[1].clone(memory_format=torch.contiguous_format).reshape(-1).view(torch.uint8).numpy())


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@SETTINGS
@given(shape=shapes, data=st.data())
def test_complex_views_match_torch(dtype, shape, data):
    array = (np.arange(math.prod(shape)) + 1j * -np.arange(math.prod(shape))).astype(dtype).reshape(shape)
    theirs, mine = torch_and_nbx(array)
    what, fn = data.draw(st.sampled_from([op_permute, op_slice, op_select, op_unsqueeze]), label="op")(data, shape)
    both = apply_both(fn, mine, theirs, what)
    if both is None:
        return
    mine, theirs = both
    for name, view_fn in [("view_as_real", lambda t: (nbx if isinstance(t, nbx.Tensor) else torch).view_as_real(t)),
                          ("real", lambda t: t.real), ("imag", lambda t: t.imag)]:
        result = apply_both(view_fn, mine, theirs, f"{what}.{name}")
        assert result is not None
        assert_same_layout(*result, f"{what}.{name}")
        assert np.array_equal(result[0].numpy(), result[1].numpy())
    pairs = apply_both(lambda t: (nbx if isinstance(t, nbx.Tensor) else torch).view_as_real(t), mine, theirs, what)
    back = apply_both(lambda t: (nbx if isinstance(t, nbx.Tensor) else torch).view_as_complex(t), *pairs,
                      f"{what}.view_as_real.view_as_complex")
    assert_same_layout(*back, "view_as_complex")


@pytest.mark.parametrize("build", [
    lambda t: t,
    lambda t: t[..., :1],
    lambda t: t[:, :, ::2],
    lambda t: t.transpose(0, 1),
    lambda t: t[1:],
    lambda t: t.flatten()[1:].unflatten(0, (1, 23)),
    lambda t: t.to(dtype=t.dtype),
    lambda t: t[0, 0, 0],
], ids=["contiguous", "width-1", "stepped", "transposed", "offset", "odd-offset", "same", "0-d"])
def test_view_as_complex_accepts_and_rejects_as_torch(build):
    theirs, mine = base_pair((2, 3, 4))

    def fn(t):
        lib = nbx if isinstance(t, nbx.Tensor) else torch
        return lib.view_as_complex(build(t))

    result = apply_both(fn, mine, theirs, "view_as_complex")
    if result is not None:
        assert_same_layout(*result, "view_as_complex")
        assert np.array_equal(result[0].numpy(), result[1].numpy())


@pytest.mark.parametrize("shape,size,stride,offset", [
    ((3, 4), (2, 2), (1, 2), None),
    ((3, 4), (4, 3), (1, 4), 0),
    ((3, 4), (2, 3), (0, 1), 5),
    ((3, 4), (13,), (1,), 0),
    ((3, 4), (2,), (-1,), 0),
    ((3, 4), (0, 5), (100, 100), 0),
    ((3, 4), (6,), (2,), 1),
])
def test_as_strided_matches_torch(shape, size, stride, offset):
    theirs, mine = base_pair(shape)
    result = apply_both(lambda t: t[1:].as_strided(size, stride, offset), mine, theirs, "as_strided")
    if result is not None:
        assert_same_layout(*result, "as_strided")
        assert np.array_equal(result[0].numpy(), result[1].numpy())


@pytest.mark.parametrize("index", [
    (None, slice(1, None)), (Ellipsis, None), (None, 0), (Ellipsis, None, slice(1, None)),
    (slice(None), None, slice(None, None, 2)), (None, None, Ellipsis, None), (0, None, -1, None),
    (slice(None), slice(None), slice(-2, None), slice(None)), (-1,), (Ellipsis,), (),
], ids=str)
def test_basic_index_layout_matches_torch(index):
    theirs, mine = base_pair((3, 4, 5, 2))
    theirs, mine = theirs.permute(1, 0, 3, 2)[:, 1:], mine.permute(1, 0, 3, 2)[:, 1:]
    result = apply_both(lambda t: t[index], mine, theirs, str(index))
    assert_same_layout(*result, str(index))


@pytest.mark.parametrize("fn", [
    lambda t: t.expand(1, 3),
    lambda t: t.expand(2, 1, 3),
    lambda t: t.expand(1, 1, 2, 1, 3),
    lambda t: t[:0].expand(1, 0),
    lambda t: t[0].expand(1, 1),
    lambda t: t[0].expand(2, 1),
    lambda t: t.unsqueeze(1).expand(1, 3, 0),
    lambda t: t.broadcast_to((1, 2, 3)),
], ids=range(8))
def test_expand_strides_of_new_dims_match_torch(fn):
    theirs, mine = base_pair((3,))
    assert_same_layout(*apply_both(fn, mine, theirs, "expand"), "expand")


@pytest.mark.parametrize("fn", [
    lambda t: t.flatten(),
    lambda t: t.flatten(0, 0),
    lambda t: t.flatten(-1, -1),
    lambda t: t.flatten(1),
    lambda t: t.unflatten(0, (1,)),
    lambda t: t.chunk(2),
    lambda t: t.split(1),
    lambda t: t.unbind(),
    lambda t: t.squeeze(0),
    lambda t: t.unsqueeze(-1),
    lambda t: t.unfold(0, 1, 1),
    lambda t: t.unfold(0, 0, 2),
    lambda t: t.unfold(0, 2, 1),
    lambda t: t.view(1, 1),
    lambda t: t.reshape(-1),
    lambda t: t.expand(2, 3),
    lambda t: t.transpose(0, -1),
    lambda t: t.permute(),
    lambda t: t.permute(()),
    lambda t: t.expand(()),
    lambda t: t.expand(),
    lambda t: t.view(),
    lambda t: t.view(()),
    lambda t: t.reshape(),
    lambda t: t.movedim((), ()),
    lambda t: t.movedim(0, -1),
    lambda t: t.movedim(0, 0),
    lambda t: t.t(),
    lambda t: t.narrow(0, 0, 1),
    lambda t: t.select(0, 0),
    lambda t: t[None],
    lambda t: t[..., None],
], ids=range(32))
def test_zero_dim_views_match_torch(fn):
    theirs, mine = base_pair(())
    result = apply_both(fn, mine, theirs, "0-d")
    if result is None:
        return
    if isinstance(result[1], tuple):
        assert len(result[0]) == len(result[1])
        for a, b in zip(*result):
            assert_same_layout(a, b, "0-d")
    else:
        assert_same_layout(*result, "0-d")


@pytest.mark.parametrize("fn", [
    lambda t: t.split(0),
    lambda t: t.split(-1),
    lambda t: t.split([0, 0]),
    lambda t: t.split([1, -1]),
    lambda t: t.chunk(3),
    lambda t: t.chunk(3, 1),
    lambda t: t.unbind(1),
    lambda t: t.split(2, 1),
    lambda t: t.split([2, 1], 1),
], ids=range(9))
def test_split_family_on_empty_and_edge_sizes_matches_torch(fn):
    for shape in [(0, 3), (2, 3)]:
        theirs, mine = base_pair(shape)
        result = apply_both(fn, mine, theirs, f"{shape}")
        if result is None:
            continue
        assert len(result[0]) == len(result[1])
        for a, b in zip(*result):
            assert_same_layout(a, b, f"{shape}")
