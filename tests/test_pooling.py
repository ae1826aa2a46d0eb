"""Pooling against NumPy float64 loop references written from torch's definitions.

Tolerances: max pooling and its indices are exact (it selects an element). Average pooling sums at most
27 elements in float32: within 27 eps32 relative of the exact mean of the float32 inputs; half-precision
outputs add one rounding of their own dtype.
"""
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import nbxtensor as nbx

from .conftest import to_nbx

F = nbx.nn.functional
EPS = {"float32": 2.0 ** -23, "float16": 2.0 ** -10, "bfloat16": 2.0 ** -7, "float64": 2.0 ** -52}


def out_size(i, k, s, p, d, ceil):
    o = (i + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil else 0)) // s + 1
    if ceil and (o - 1) * s >= i + p:
        o -= 1
    return o


def ref_pool(a, k, s, p, d, ceil, kind, count_pad=True, divisor=None):
    """(values, indices) of pooling the last len(k) dims of a float64 array, one window at a time."""
    nd = len(k)
    spatial = a.shape[-nd:]
    outs = [out_size(i, kk, ss, pp, dd, ceil) for i, kk, ss, pp, dd in zip(spatial, k, s, p, d)]
    lead = a.shape[:-nd]
    values = np.zeros(lead + tuple(outs))
    indices = np.zeros(lead + tuple(outs), dtype=np.int64)
    for lead_idx in itertools.product(*map(range, lead)):
        plane = a[lead_idx]
        for o in itertools.product(*map(range, outs)):
            starts = [oo * ss - pp for oo, ss, pp in zip(o, s, p)]
            best, best_at, total, count = None, None, 0.0, 0
            for kk in itertools.product(*map(range, k)):
                pos = [st_ + q * dd for st_, q, dd in zip(starts, kk, d)]
                if not all(0 <= q < n for q, n in zip(pos, spatial)):
                    continue
                v = plane[tuple(pos)]
                flat = int(np.ravel_multi_index(pos, spatial))
                if best is None or v > best or math.isnan(v):
                    best, best_at = v, flat
                total += v
                count += 1
            if kind == "max":
                values[lead_idx + o], indices[lead_idx + o] = best, best_at
            else:
                ends = [min(st_ + kk, n + pp) for st_, kk, n, pp in zip(starts, k, spatial, p)]
                size = math.prod(e - b for e, b in zip(ends, starts))
                values[lead_idx + o] = total / (divisor or (size if count_pad else count))
    return values, indices


def ref_adaptive(a, sizes, kind):
    nd = len(sizes)
    spatial = a.shape[-nd:]
    lead = a.shape[:-nd]
    values = np.zeros(lead + tuple(sizes))
    indices = np.zeros(lead + tuple(sizes), dtype=np.int64)
    for lead_idx in itertools.product(*map(range, lead)):
        plane = a[lead_idx]
        for o in itertools.product(*map(range, sizes)):
            ranges = [range((oo * n) // m, -(-((oo + 1) * n) // m)) for oo, n, m in zip(o, spatial, sizes)]
            cells = [(plane[pos], int(np.ravel_multi_index(pos, spatial))) for pos in itertools.product(*ranges)]
            if kind == "max":
                best = cells[0]
                for cell in cells[1:]:
                    if cell[0] > best[0] or math.isnan(cell[0]):
                        best = cell
                values[lead_idx + o], indices[lead_idx + o] = best
            else:
                values[lead_idx + o] = sum(v for v, _ in cells) / len(cells)
    return values, indices


def channels_last(array):
    """A channels-last tensor (4-D or 5-D) holding ``array``: the NumPy array moved channels-last, then viewed."""
    order = (0, *range(2, array.ndim), 1)
    back = (0, array.ndim - 1, *range(1, array.ndim - 1))
    return to_nbx(np.ascontiguousarray(array.transpose(order))).permute(*back)


def as_tensor(a, layout):
    return channels_last(a) if layout == "channels_last" else to_nbx(a)


CASES = [  # (shape, kernel, stride, padding, dilation, ceil_mode)
    ((2, 3, 9), (3,), (2,), (1,), (1,), False),
    ((1, 2, 8), (2,), (3,), (0,), (2,), True),
    ((2, 3, 7, 6), (3, 2), (2, 1), (1, 1), (1, 2), False),
    ((1, 2, 7, 7), (3, 3), (2, 2), (1, 0), (1, 1), True),
    ((1, 2, 5, 6), (2, 2), (2, 2), (0, 0), (1, 1), True),
    ((1, 2, 4, 5, 4), (2, 3, 2), (2, 2, 1), (1, 1, 0), (1, 1, 2), True),
]


@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
@pytest.mark.parametrize("shape, k, s, p, d, ceil", CASES)
def test_max_pool(rng, shape, k, s, p, d, ceil, layout):
    if layout == "channels_last" and len(shape) == 3:
        pytest.skip("channels-last is 4-D and 5-D")
    a = rng.standard_normal(shape).astype(np.float32)
    a.flat[::5] = a.flat[1]  # ties: the first is taken
    nd = len(k)
    values, indices = getattr(F, f"max_pool{nd}d")(as_tensor(a, layout), k, s, p, d, ceil, return_indices=True)
    ref_values, ref_indices = ref_pool(a.astype(np.float64), k, s, p, d, ceil, "max")
    np.testing.assert_array_equal(values.numpy(), ref_values.astype(np.float32))
    np.testing.assert_array_equal(indices.numpy(), ref_indices)
    assert indices.dtype == nbx.int64
    if layout == "channels_last":
        assert values.stride()[1] == 1 and indices.stride() == values.stride()


@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
@pytest.mark.parametrize("count_pad, divisor", [(True, None), (False, None), (True, 5)])
@pytest.mark.parametrize("shape, k, s, p, d, ceil", [c for c in CASES if all(x == 1 for x in c[4])])
def test_avg_pool(rng, shape, k, s, p, d, ceil, count_pad, divisor, layout):
    if layout == "channels_last" and len(shape) == 3:
        pytest.skip("channels-last is 4-D and 5-D")
    nd = len(k)
    if nd == 1 and divisor:
        pytest.skip("avg_pool1d has no divisor_override")
    a = rng.standard_normal(shape).astype(np.float32)
    extra = (divisor,) if nd > 1 else ()
    out = getattr(F, f"avg_pool{nd}d")(as_tensor(a, layout), k, s, p, ceil, count_pad, *extra)
    ref, _ = ref_pool(a.astype(np.float64), k, s, p, (1,) * nd, ceil, "avg", count_pad, divisor)
    np.testing.assert_allclose(out.numpy(), ref, rtol=0, atol=27 * EPS["float32"] * 4)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64", "int32", "uint8"])
def test_max_pool_dtypes(rng, dtype):
    dt = nbx.get_dtype(dtype)
    a = (rng.standard_normal((2, 3, 6, 5)) * 20).astype(np.float32)
    a = a.astype(dt.numpy) if dt.is_floating_point else np.abs(a).astype(dt.numpy)
    values, indices = F.max_pool2d(to_nbx(a), 3, 2, 1, return_indices=True)
    ref_values, ref_indices = ref_pool(a.astype(np.float64), (3, 3), (2, 2), (1, 1), (1, 1), False, "max")
    assert values.dtype is dt
    np.testing.assert_array_equal(values.numpy().astype(np.float64), ref_values)
    np.testing.assert_array_equal(indices.numpy(), ref_indices)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_avg_pool_half(rng, dtype):
    dt = nbx.get_dtype(dtype)
    a = rng.standard_normal((2, 3, 6, 5)).astype(dt.numpy)
    out = F.avg_pool2d(to_nbx(a), 3, 2, 1)
    ref, _ = ref_pool(a.astype(np.float64), (3, 3), (2, 2), (1, 1), (1, 1), False, "avg")
    np.testing.assert_allclose(out.numpy().astype(np.float64), ref, rtol=2 * EPS[dtype], atol=2 * EPS[dtype])


@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int8", "uint8", "int64"])
@pytest.mark.parametrize("dilation", [1, 2])
def test_max_pool_values_only(rng, dtype, dilation, layout):
    """Without indices a maximum is one max a tap: from the dtype's least value, a NaN kept (unit
    dilation reads clamped taps, others masked ones that must not read padding as zero)."""
    dt = nbx.get_dtype(dtype)
    a = rng.standard_normal((1, 3, 7, 8)) * 40
    a = a - 60 if dt.kind == "int" else a  # all negative: padding read as 0 would win
    a = (a if dt.is_floating_point else np.clip(a, -128 if dt.kind == "int" else 0, 255)).astype(dt.numpy)
    if dt.is_floating_point:
        a[0, 1, 3, 4] = np.nan
    if dtype == "int8":
        a[0, 2] = -128  # every window at the type's least value
    out = F.max_pool2d(as_tensor(a, layout), 3, 2, 1, dilation)
    ref, _ = ref_pool(a.astype(np.float64), (3, 3), (2, 2), (1, 1), (dilation, dilation), False, "max")
    np.testing.assert_array_equal(out.numpy().astype(np.float64), ref)


def test_max_pool_nan_wins(rng):
    a = rng.standard_normal((1, 1, 4, 4)).astype(np.float32)
    a[0, 0, 0, 1] = np.nan
    a[0, 0, 1, 0] = np.nan
    values, indices = F.max_pool2d(to_nbx(a), 2, return_indices=True)
    assert np.isnan(values.numpy()[0, 0, 0, 0]) and indices.numpy()[0, 0, 0, 0] == 4  # the last NaN, as ATen
    assert not np.isnan(values.numpy()[0, 0, 1, 1])


@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
@pytest.mark.parametrize("shape, sizes", [((2, 3, 7), (3,)), ((1, 2, 7, 5), (3, 2)), ((1, 2, 7, 5), (1, 1)),
                                          ((1, 2, 5, 4, 3), (2, 3, 2)), ((1, 2, 3, 3), (5, 4))])
def test_adaptive_pools(rng, shape, sizes, layout):
    if layout == "channels_last" and len(shape) == 3:
        pytest.skip("channels-last is 4-D and 5-D")
    nd = len(sizes)
    a = rng.standard_normal(shape).astype(np.float32)
    x = as_tensor(a, layout)
    ref_avg, _ = ref_adaptive(a.astype(np.float64), sizes, "avg")
    np.testing.assert_allclose(getattr(F, f"adaptive_avg_pool{nd}d")(x, sizes).numpy(), ref_avg, rtol=0,
                               atol=35 * EPS["float32"] * 4)
    values, indices = getattr(F, f"adaptive_max_pool{nd}d")(x, sizes, return_indices=True)
    ref_values, ref_indices = ref_adaptive(a.astype(np.float64), sizes, "max")
    np.testing.assert_array_equal(values.numpy(), ref_values.astype(np.float32))
    np.testing.assert_array_equal(indices.numpy(), ref_indices)


def test_unbatched_and_none_sizes(rng):
    a = rng.standard_normal((3, 6, 5)).astype(np.float32)
    out = F.max_pool2d(to_nbx(a), 2)
    ref, _ = ref_pool(a.astype(np.float64), (2, 2), (2, 2), (0, 0), (1, 1), False, "max")
    np.testing.assert_array_equal(out.numpy(), ref.astype(np.float32))
    assert F.adaptive_avg_pool2d(to_nbx(a), (None, 2)).shape == (3, 6, 2)


@settings(max_examples=15, deadline=None)
@given(h=st.integers(1, 7), w=st.integers(1, 7), k=st.integers(1, 3), s=st.integers(1, 3), ceil=st.booleans(),
       data=st.data())
def test_max_pool_property(h, w, k, s, ceil, data):
    p = data.draw(st.integers(0, k // 2))
    if out_size(h, k, s, p, 1, ceil) <= 0 or out_size(w, k, s, p, 1, ceil) <= 0:
        return
    a = np.random.default_rng(h * 100 + w).standard_normal((1, 2, h, w)).astype(np.float32)
    values, indices = F.max_pool2d(to_nbx(a), k, s, p, 1, ceil, return_indices=True)
    ref_values, ref_indices = ref_pool(a.astype(np.float64), (k, k), (s, s), (p, p), (1, 1), ceil, "max")
    np.testing.assert_array_equal(values.numpy(), ref_values.astype(np.float32))
    np.testing.assert_array_equal(indices.numpy(), ref_indices)


@pytest.mark.parametrize("call, message", [
    (lambda x: F.max_pool2d(x, 3, padding=2), "pad should be at most half of effective kernel size"),
    (lambda x: F.max_pool2d(x, 5), "Output size is too small"),
    (lambda x: F.max_pool2d(x, 2, stride=0), "stride should not be zero"),
    (lambda x: F.max_pool2d(x, 2, dilation=0), "dilation should be greater than zero"),
    (lambda x: F.max_pool2d(x, (2, 2, 2)), "kernel_size must either be a single int, or a tuple of two ints"),
    (lambda x: F.max_pool2d(x.reshape(8, 4)[:4], 2), "Expected 3D or 4D"),
    (lambda x: F.avg_pool2d(x, 0), "kernel size should be greater than zero"),
    (lambda x: F.avg_pool2d(x, 2, divisor_override=0), "divisor must be not zero"),
    (lambda x: F.adaptive_avg_pool2d(x[0, 0], 2), "Expected 3D or 4D tensor"),
    (lambda x: F.adaptive_max_pool2d(x[:, :, :0], 2), "non-zero size for non-batch dimensions"),
    (lambda x: F.avg_pool2d(x.to(nbx.int32), 2), "not implemented for 'int32'"),
    (lambda x: F.max_pool2d(x > 0, 2), "not implemented for 'bool'"),
])
def test_errors(call, message):
    x = to_nbx(np.zeros((1, 2, 4, 4), np.float32))
    with pytest.raises((RuntimeError, NotImplementedError), match=message):
        call(x)


def test_a_refused_dtype_is_refused_on_every_call():
    """The dtype is checked where a call's plan is made (its key holds the dtype): a refused dtype makes no
    plan, so a second call is refused again, also after a float call of the same shape made one."""
    x = to_nbx(np.zeros((1, 2, 4, 4), np.float32))
    F.max_pool2d(x, 2)
    F.adaptive_avg_pool2d(x, 1)
    for _ in range(2):
        with pytest.raises(NotImplementedError, match="not implemented for 'bool'"):
            F.max_pool2d(x > 0, 2)
        with pytest.raises(NotImplementedError, match="not implemented for 'int32'"):
            F.avg_pool2d(x.to(nbx.int32), 2)
        with pytest.raises(NotImplementedError, match="not implemented for 'int64'"):
            F.adaptive_avg_pool2d(x.to(nbx.int64), 1)


def test_division_magic():
    """The multiply-shift divisions the tiled kernels split row indices with: exact for every divisor and
    numerator below 2**31, the numerators near a multiple and at the ends."""
    from nbxtensor.lowering import division_magic
    rng = np.random.default_rng(7)
    divisors = [*range(1, 300), *(1 << k for k in range(31)), *((1 << k) + 1 for k in range(31)),
                *rng.integers(2, 2 ** 31, 300).tolist(), 2 ** 31 - 1]
    for d in divisors:
        magic, shift = division_magic(d)
        assert -2 ** 31 <= magic < 2 ** 31
        numerators = {0, 1, d - 1, d, d + 1, 2 ** 31 - 1, (2 ** 31 - 1) // d * d, (2 ** 31 - 1) // d * d - 1}
        for n in numerators | set(rng.integers(0, 2 ** 31, 20).tolist()):
            if 0 <= n < 2 ** 31:
                assert (n * (magic % 2 ** 32)) >> shift == n // d, (d, n)


def strided(a):
    """A tensor holding ``a`` whose rows are read with a stride of 2 (the odd columns of a wider array)."""
    wide = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
    wide[..., 1::2] = a
    return to_nbx(wide)[..., 1::2]


# a pool's output rows not a multiple of a tile's columns (38, 4, 3 wide) nor its rows, channels-last
# pixels of 3 channels (a thread takes a pixel's) and of 130 (past the widest tile: several column blocks),
# a batch of 1, a strided input
TILE_SHAPES = [(1, 3, 9, 75), (2, 5, 7, 8), (1, 130, 5, 6), (1, 2, 3, 5, 33)]


@pytest.mark.parametrize("block", [64, 512])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "strided"])
@pytest.mark.parametrize("shape", TILE_SHAPES)
def test_pool_tiles(rng, set_kernel_facts, block, layout, shape):
    """Programs of ``block`` output elements, so a launch takes many tiles, some partial."""
    set_kernel_facts(elementwise_block=block)
    a = rng.standard_normal(shape).astype(np.float32)
    a.flat[::7] = a.flat[3]  # ties: the first is taken
    x = strided(a) if layout == "strided" else as_tensor(a, layout)
    nd = len(shape) - 2
    k, s, p = (3,) * nd, (2,) * nd, (1,) * nd
    values, indices = getattr(F, f"max_pool{nd}d")(x, k, s, p, 1, False, return_indices=True)
    ref_values, ref_indices = ref_pool(a.astype(np.float64), k, s, p, (1,) * nd, False, "max")
    np.testing.assert_array_equal(values.numpy(), ref_values.astype(np.float32))
    np.testing.assert_array_equal(indices.numpy(), ref_indices)
    np.testing.assert_array_equal(getattr(F, f"max_pool{nd}d")(x, k, s, p).numpy(), ref_values.astype(np.float32))
    out = getattr(F, f"avg_pool{nd}d")(x, k, s, p, False, False)
    ref, _ = ref_pool(a.astype(np.float64), k, s, p, (1,) * nd, False, "avg", False)
    np.testing.assert_allclose(out.numpy(), ref, rtol=0, atol=27 * EPS["float32"] * 4)
    sizes = (2, 3, 7)[-nd:]
    values, indices = getattr(F, f"adaptive_max_pool{nd}d")(x, sizes, return_indices=True)
    ref_values, ref_indices = ref_adaptive(a.astype(np.float64), sizes, "max")
    np.testing.assert_array_equal(values.numpy(), ref_values.astype(np.float32))
    np.testing.assert_array_equal(indices.numpy(), ref_indices)
    ref_avg, _ = ref_adaptive(a.astype(np.float64), sizes, "avg")  # at most 36 inputs summed in float32
    np.testing.assert_allclose(getattr(F, f"adaptive_avg_pool{nd}d")(x, sizes).numpy(), ref_avg, rtol=0,
                               atol=36 * EPS["float32"] * 4)


@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
def test_pool_tiles_in_64_bits(rng, monkeypatch, set_kernel_facts, layout):
    """The launches' 64-bit index form (asked for on a small input: one past 2**31 elements cannot be made
    here) divides row indices by plain division: the same values as the 32-bit form's multiply-shift."""
    from nbxtensor.ops import pooling
    x = as_tensor(rng.standard_normal((2, 3, 9, 37)).astype(np.float32), layout)
    def run():
        return [t.numpy() for t in (*F.max_pool2d(x, 3, 2, 1, return_indices=True), F.max_pool2d(x, 3, 2, 1),
                                    F.avg_pool2d(x, 3, 2, 1), *F.adaptive_max_pool2d(x, (4, 6), return_indices=True),
                                    F.adaptive_avg_pool2d(x, (4, 6)))]
    narrow = run()
    monkeypatch.setattr(pooling, "needs_index_64", lambda *operands, **kwargs: True)
    set_kernel_facts(elementwise_block=64)  # forgets the 32-bit plans
    for got, want in zip(run(), narrow):
        np.testing.assert_array_equal(got, want)
