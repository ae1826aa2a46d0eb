"""Convolution against a NumPy float64 reference written here (direct loops over kernel positions).

Tolerances: float32 accumulates in float32 over K = Cin/groups * kernel volume (at most a few dozen
terms here), so about K * 2^-24 relative to the sum of |products|; float16 and bfloat16 inputs are
exact in float32, accumulate in float32 and round once to the output type (half an ulp: 2^-11 and 2^-8).
"""
import numpy as np
import pytest

import nbxtensor as nbx
import nbxtensor.nn.functional as F
from tests.conftest import TEST_DEVICE, examples


def _to(a, dtype="float32"):
    return nbx.tensor(a, device=TEST_DEVICE).to(dtype)


def reference(x, w, b, stride, padding, dilation, groups, transposed=False, output_padding=0):
    """float64 convolution of batched x (N, C, *S) by w, by loops over kernel positions."""
    x = x.astype(np.float64)
    w = w.astype(np.float64)
    dims = x.ndim - 2
    st, pd, dl, op = ((v,) * dims if isinstance(v, int) else tuple(v) for v in (stride, padding, dilation,
                                                                               output_padding))
    n, cin = x.shape[:2]
    ks = w.shape[2:]
    if transposed:
        cout = w.shape[1] * groups
        out_sp = [(i - 1) * s - 2 * p + d * (k - 1) + o + 1 for i, s, p, d, k, o in zip(x.shape[2:], st, pd, dl, ks, op)]
        full = [(i - 1) * s + d * (k - 1) + 1 + o for i, s, d, k, o in zip(x.shape[2:], st, dl, ks, op)]
        big = np.zeros((n, cout, *[f + p for f, p in zip(full, pd)]))
        cig, cog = cin // groups, cout // groups
        for g in range(groups):
            for kpos in np.ndindex(*ks):
                wk = w[g * cig:(g + 1) * cig, :, *kpos]  # (cig, cog)
                contrib = np.einsum("nc...,co->no...", x[:, g * cig:(g + 1) * cig], wk)
                idx = tuple(slice(kk * d, kk * d + (i - 1) * s + 1, s) for kk, d, i, s in zip(kpos, dl, x.shape[2:], st))
                big[(slice(None), slice(g * cog, (g + 1) * cog), *idx)] += contrib
        out = big[(slice(None), slice(None), *[slice(p, p + o) for p, o in zip(pd, out_sp)])]
    else:
        cout = w.shape[0]
        xp = np.pad(x, [(0, 0), (0, 0), *[(p, p) for p in pd]])
        out_sp = [(i + 2 * p - d * (k - 1) - 1) // s + 1 for i, p, d, k, s in zip(x.shape[2:], pd, dl, ks, st)]
        out = np.zeros((n, cout, *out_sp))
        cig, cog = cin // groups, cout // groups
        for g in range(groups):
            for kpos in np.ndindex(*ks):
                idx = tuple(slice(kk * d, kk * d + (o - 1) * s + 1, s) for kk, d, o, s in zip(kpos, dl, out_sp, st))
                patch = xp[(slice(None), slice(g * cig, (g + 1) * cig), *idx)]
                out[:, g * cog:(g + 1) * cog] += np.einsum("nc...,oc->no...", patch, w[g * cog:(g + 1) * cog, :, *kpos])
    if b is not None:
        out += b.astype(np.float64).reshape(1, -1, *(1,) * dims)
    return out


_TOL = {"float32": 2e-6, "float16": 2e-3, "bfloat16": 1.6e-2}


def _check(got, want, dtype, k_terms):
    got = got.to("float32").numpy().astype(np.float64)
    scale = np.abs(want).max() + 1
    assert got.shape == want.shape
    tol = _TOL[dtype] * (k_terms if dtype == "float32" else 1)
    np.testing.assert_allclose(got, want, atol=tol * scale, rtol=_TOL[dtype])


def _rounded(a, dtype):
    return _to(a, dtype).to("float32").numpy()


FORWARD = [
    # (x shape, w shape, stride, padding, dilation, groups)
    ((2, 3, 9), (4, 3, 3), 1, 0, 1, 1),
    ((1, 4, 11), (6, 2, 3), 2, 1, 2, 2),
    ((2, 4, 7, 6), (6, 2, 3, 2), 2, 1, (1, 2), 2),
    ((1, 3, 5, 8), (5, 3, 1, 1), 1, 0, 1, 1),
    ((1, 4, 6, 5), (8, 1, 3, 3), 1, 1, 1, 4),  # depthwise, multiplier 2
    ((1, 2, 4, 5, 3), (3, 2, 2, 3, 2), (1, 2, 1), (1, 0, 1), 1, 1),
]


@pytest.mark.parametrize("case", FORWARD)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_forward(case, dtype, rng):
    xs, wsh, stride, padding, dilation, groups = case
    x = _rounded(rng.standard_normal(xs), dtype)
    w = _rounded(rng.standard_normal(wsh), dtype)
    b = _rounded(rng.standard_normal(wsh[0]), dtype)
    op = getattr(F, f"conv{len(xs) - 2}d")
    got = op(_to(x, dtype), _to(w, dtype), _to(b, dtype), stride=stride, padding=padding, dilation=dilation,
             groups=groups)
    _check(got, reference(x, w, b, stride, padding, dilation, groups), dtype, int(np.prod(wsh[1:])))


TRANSPOSED = [
    ((1, 4, 5), (4, 3, 3), 2, 1, 1, 1, 1),
    ((2, 4, 3, 4), (4, 2, 3, 2), 2, (1, 0), 1, 2, (1, 0)),
    ((1, 2, 3, 3), (2, 3, 2, 2), 1, 0, 2, 1, 1),
    ((1, 2, 2, 3, 2), (2, 2, 2, 2, 3), 2, 0, 1, 1, 0),
]


@pytest.mark.parametrize("case", TRANSPOSED)
def test_transposed(case, rng):
    xs, wsh, stride, padding, dilation, groups, output_padding = case
    x, w = rng.standard_normal(xs).astype(np.float32), rng.standard_normal(wsh).astype(np.float32)
    b = rng.standard_normal(wsh[1] * groups).astype(np.float32)
    op = getattr(F, f"conv_transpose{len(xs) - 2}d")
    got = op(_to(x), _to(w), _to(b), stride=stride, padding=padding, output_padding=output_padding, groups=groups,
             dilation=dilation)
    _check(got, reference(x, w, b, stride, padding, dilation, groups, True, output_padding), "float32",
           int(np.prod(wsh[1:])) * xs[1])


@pytest.mark.parametrize("case", FORWARD + [((1, 80, 4, 4), (3, 80, 3, 3), 1, 1, 1, 1)] + [
    (*case, True) for case in TRANSPOSED])
def test_float64_sums_in_float64(case, rng):
    """float64 convolutions (the direct kernel, a group of 80 channels past its unrolled ones included, and
    the 1x1 product), forward and transposed, channels-last too: each output a float64 sum of its window's
    k terms, so within k float64 roundings of the sum of the terms' magnitudes (the same reference on |x|,
    |w| and |b|)."""
    transposed = len(case) == 8
    xs, wsh, stride, padding, dilation, groups, *extra = case
    output_padding = extra[0] if transposed else 0
    x, w = rng.standard_normal(xs), rng.standard_normal(wsh)
    b = rng.standard_normal(wsh[1] * groups if transposed else wsh[0])
    name = f"conv_transpose{len(xs) - 2}d" if transposed else f"conv{len(xs) - 2}d"
    options = dict(output_padding=output_padding) if transposed else {}
    want = reference(x, w, b, stride, padding, dilation, groups, transposed, output_padding)
    magnitude = reference(np.abs(x), np.abs(w), np.abs(b), stride, padding, dilation, groups, transposed,
                          output_padding)
    terms = int(np.prod(wsh[1:])) * (xs[1] if transposed else 1) + 1
    inputs = [_to(x, "float64")]
    if len(xs) == 4:
        inputs.append(inputs[0].contiguous(memory_format=nbx.channels_last))
    for x_in in inputs:
        got = getattr(F, name)(x_in, _to(w, "float64"), _to(b, "float64"), stride=stride, padding=padding,
                               dilation=dilation, groups=groups, **options)
        assert got.dtype == nbx.float64 and got.shape == want.shape
        assert np.all(np.abs(got.numpy() - want) <= terms * 2.0 ** -52 * magnitude)


def test_channels_last_in_place_and_out(rng):
    x = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    xl = _to(np.ascontiguousarray(x.transpose(0, 2, 3, 1))).permute(0, 3, 1, 2)
    got = F.conv2d(xl, _to(w), None, padding=1)
    assert got.stride()[1] == 1  # channels-last in, channels-last out (torch's rule)
    _check(got, reference(x, w, None, 1, 1, 1, 1), "float32", 27)


def test_same_valid_unbatched_and_aten(rng):
    x = rng.standard_normal((3, 8)).astype(np.float32)
    w = rng.standard_normal((2, 3, 5)).astype(np.float32)
    got = F.conv1d(_to(x), _to(w), padding="same", dilation=1)
    _check(got, reference(x[None], w, None, 1, 2, 1, 1)[0], "float32", 15)
    got = F.conv1d(_to(x), _to(w), padding="valid")
    _check(got, reference(x[None], w, None, 1, 0, 1, 1)[0], "float32", 15)
    got = nbx.convolution(_to(x[None]), _to(w), None, [1], [2], [1], False, [0], 1)
    _check(got, reference(x[None], w, None, 1, 2, 1, 1), "float32", 15)


@pytest.mark.parametrize("dims, ks, dilation", [(1, (4,), (1,)), (2, (2, 3), (3, 1)), (2, (4, 4), (2, 1)),
                                               (3, (2, 1, 2), (1, 1, 2))])
def test_same_padding_with_an_odd_total_pads_more_after(rng, dims, ks, dilation):
    """torch's rule: the total d*(k-1) is split with its extra element after the input."""
    x = rng.standard_normal((2, 3, *(5, 6, 4)[:dims])).astype(np.float32)
    w = rng.standard_normal((4, 3, *ks)).astype(np.float32)
    got = getattr(F, f"conv{dims}d")(_to(x), _to(w), padding="same", dilation=dilation)
    total = [d * (k - 1) for d, k in zip(dilation, ks)]
    padded = np.pad(x, ((0, 0), (0, 0), *((t // 2, t - t // 2) for t in total)))
    want = reference(padded, w, None, 1, 0, dilation, 1)
    assert want.shape[2:] == x.shape[2:]
    _check(got, want, "float32", 3 * int(np.prod(ks)))


@pytest.mark.parametrize("mode, numpy_mode", [("reflect", "reflect"), ("replicate", "edge"), ("circular", "wrap")])
@pytest.mark.parametrize("dims", [1, 2, 3])
def test_padding_modes_as_the_modules_apply_them(rng, mode, numpy_mode, dims):
    """torch.nn.Conv*d(padding_mode=...) pads with F.pad in that mode, then convolves unpadded."""
    x = rng.standard_normal((1, 2, *(5, 4, 3)[:dims])).astype(np.float32)
    w = rng.standard_normal((3, 2, *(3,) * dims)).astype(np.float32)
    amounts = (1, 2) * dims
    padded = F.pad(_to(x), amounts, mode=mode)
    np.testing.assert_array_equal(padded.numpy(), np.pad(x, ((0, 0), (0, 0), *((1, 2),) * dims), mode=numpy_mode))
    got = getattr(F, f"conv{dims}d")(padded, _to(w))
    want = reference(np.pad(x, ((0, 0), (0, 0), *((1, 2),) * dims), mode=numpy_mode), w, None, 1, 0, 1, 1)
    _check(got, want, "float32", 2 * 3 ** dims)


@pytest.mark.parametrize("call, message", [
    (lambda: F.conv2d(_to(np.zeros((1, 3, 5, 5))), _to(np.zeros((4, 2, 3, 3))), groups=2), "to have 4 channels"),
    (lambda: F.conv2d(_to(np.zeros((1, 3, 2, 2))), _to(np.zeros((4, 3, 3, 3)))), "Kernel size can't be greater"),
    (lambda: F.conv2d(_to(np.zeros((1, 3, 5, 5))), _to(np.zeros((4, 3, 3))).reshape(4, 3, 3)), "4-dimensional"),
    (lambda: F.conv2d(_to(np.zeros((1, 3, 5, 5))), _to(np.zeros((4, 3, 3, 3)), "float16")), "should be the same"),
    (lambda: F.conv_transpose1d(_to(np.zeros((1, 2, 1))), _to(np.zeros((2, 1, 1))), padding=1), "too small"),
    (lambda: F.conv2d(_to(np.zeros((1, 3, 5, 5))), _to(np.zeros((3, 3, 3, 3))), groups=2), "divisible"),
    (lambda: F.conv_transpose2d(_to(np.zeros((1, 3, 5, 5))), _to(np.zeros((3, 2, 3, 3))), groups=2),
     r"in_channels \(3\) must be divisible by groups \(2\)"),
    (lambda: nbx.convolution(_to(np.zeros((1, 3, 5))), _to(np.zeros((4, 3))), None, [1], [0], [1], False, [0], 1),
     "at least three dimensions"),
    (lambda: F.conv1d(_to(np.zeros((1, 3, 5))), _to(np.zeros((4, 3, 3))), stride=0), "non-positive stride"),
    (lambda: F.conv1d(_to(np.zeros((1, 3, 5))), _to(np.zeros((4, 3, 3))), padding=-1), "negative padding"),
    (lambda: F.conv1d(_to(np.zeros((1, 3, 5))), _to(np.zeros((4, 3, 3))), padding="same", stride=2),
     "not supported for strided"),
    (lambda: F.conv1d(_to(np.zeros((1, 3, 5))), _to(np.zeros((4, 3, 3))), groups=0), "non-positive groups"),
])
def test_errors(call, message):
    with pytest.raises(RuntimeError, match=message):
        call()


from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=examples(15), deadline=None)
@given(n=st.integers(1, 2), groups=st.integers(1, 2), cig=st.integers(1, 3), cog=st.integers(1, 3),
       size=st.integers(3, 7), k=st.integers(1, 3), stride=st.integers(1, 3), padding=st.integers(0, 2),
       dilation=st.integers(1, 2), transposed=st.booleans())
def test_conv1d_shapes_property(n, groups, cig, cog, size, k, stride, padding, dilation, transposed):
    rng = np.random.default_rng(size * 7 + k)
    x = rng.standard_normal((n, cig * groups, size)).astype(np.float32)
    if transposed:
        out_padding = stride - 1 if stride > 1 else 0
        if (size - 1) * stride - 2 * padding + dilation * (k - 1) + out_padding + 1 <= 0:
            return
        w = rng.standard_normal((cig * groups, cog, k)).astype(np.float32)
        got = F.conv_transpose1d(_to(x), _to(w), stride=stride, padding=padding, output_padding=out_padding,
                                 groups=groups, dilation=dilation)
        want = reference(x, w, None, stride, padding, dilation, groups, True, out_padding)
    else:
        if size + 2 * padding < dilation * (k - 1) + 1:
            return
        w = rng.standard_normal((cog * groups, cig, k)).astype(np.float32)
        got = F.conv1d(_to(x), _to(w), stride=stride, padding=padding, dilation=dilation, groups=groups)
        want = reference(x, w, None, stride, padding, dilation, groups)
    _check(got, want, "float32", cig * k * 3)
