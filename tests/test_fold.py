"""F.unfold / F.fold (im2col / col2im) against NumPy float64 loops over blocks and kernel positions, and
Tensor.unfold as a view. unfold copies elements, so it is exact; fold sums at most KH * KW float32 terms
per pixel, within KH * KW eps32 of the float64 sum."""
import numpy as np
import pytest

import nbxtensor as nbx

from .conftest import to_nbx

F = nbx.nn.functional
EPS32 = 2.0 ** -23


def blocks(size, k, d, p, s):
    return [(size[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2)]


def ref_unfold(x, k, d, p, s):
    n, c, h, w = x.shape
    oh, ow = blocks((h, w), k, d, p, s)
    out = np.zeros((n, c * k[0] * k[1], oh * ow), x.dtype)
    for b, ch, i, j, bh, bw in np.ndindex(n, c, k[0], k[1], oh, ow):
        y, xx = bh * s[0] - p[0] + i * d[0], bw * s[1] - p[1] + j * d[1]
        if 0 <= y < h and 0 <= xx < w:
            out[b, (ch * k[0] + i) * k[1] + j, bh * ow + bw] = x[b, ch, y, xx]
    return out


def ref_fold(cols, size, k, d, p, s):
    n, rows, _ = cols.shape
    c = rows // (k[0] * k[1])
    oh, ow = blocks(size, k, d, p, s)
    out = np.zeros((n, c, *size))
    for b, ch, i, j, bh, bw in np.ndindex(n, c, k[0], k[1], oh, ow):
        y, xx = bh * s[0] - p[0] + i * d[0], bw * s[1] - p[1] + j * d[1]
        if 0 <= y < size[0] and 0 <= xx < size[1]:
            out[b, ch, y, xx] += cols[b, (ch * k[0] + i) * k[1] + j, bh * ow + bw]
    return out


GEOMETRIES = [((2, 3), (1, 1), (0, 0), (1, 1)), ((3, 3), (1, 1), (1, 1), (2, 2)), ((2, 2), (2, 1), (1, 0), (1, 2)),
              ((3, 2), (1, 2), (1, 1), (2, 1))]


@pytest.mark.parametrize("k, d, p, s", GEOMETRIES)
def test_unfold(rng, k, d, p, s):
    x = rng.standard_normal((2, 3, 6, 7)).astype(np.float32)
    out = F.unfold(to_nbx(x), k, dilation=d, padding=p, stride=s)
    np.testing.assert_array_equal(out.numpy(), ref_unfold(x, k, d, p, s))


def test_unfold_unbatched_strided(rng):
    x = rng.standard_normal((5, 6, 3)).astype(np.float32)
    out = F.unfold(to_nbx(x).permute(2, 0, 1), 2, padding=1)  # (3, 5, 6) read in place
    np.testing.assert_array_equal(out.numpy(), ref_unfold(x.transpose(2, 0, 1)[None], (2, 2), (1, 1), (1, 1),
                                                          (1, 1))[0])


@pytest.mark.parametrize("k, d, p, s", GEOMETRIES)
def test_fold(rng, k, d, p, s):
    size = (6, 7)
    oh, ow = blocks(size, k, d, p, s)
    cols = rng.standard_normal((2, 2 * k[0] * k[1], oh * ow)).astype(np.float32)
    out = F.fold(to_nbx(cols), size, k, dilation=d, padding=p, stride=s)
    np.testing.assert_allclose(out.numpy(), ref_fold(cols.astype(np.float64), size, k, d, p, s), rtol=0,
                               atol=k[0] * k[1] * EPS32 * np.abs(cols).max())


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
def test_fold_dtypes(rng, dtype):
    dt = nbx.get_dtype(dtype)
    cols = rng.standard_normal((1, 4, 9)).astype(dt.numpy)
    out = F.fold(to_nbx(cols)[0], (4, 4), 2)  # unbatched (C * k, L)
    ref = ref_fold(cols.astype(np.float64), (4, 4), (2, 2), (1, 1), (0, 0), (1, 1))[0]
    assert out.dtype == dt and out.shape == (1, 4, 4)
    eps = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7, "float64": 2.0 ** -50}[dtype]
    # summed in float32 (float64 for float64) and rounded once
    np.testing.assert_allclose(out.numpy().astype(np.float64), ref, rtol=eps, atol=4 * max(eps, EPS32))


def test_fold_inverts_unfold_without_overlap(rng):
    x = rng.standard_normal((1, 2, 4, 6)).astype(np.float32)
    cols = F.unfold(to_nbx(x), 2, stride=2)
    np.testing.assert_array_equal(F.fold(cols, (4, 6), 2, stride=2).numpy(), x)


def test_tensor_unfold_is_a_view(rng):
    a = rng.standard_normal((3, 7)).astype(np.float32)
    x = to_nbx(a)
    v = x.unfold(1, 3, 2)
    assert v.shape == (3, 3, 3) and v.stride() == (7, 2, 1)
    np.testing.assert_array_equal(v.numpy(), np.stack([a[:, i:i + 3] for i in range(0, 5, 2)], 1))


@pytest.mark.parametrize("call, message", [
    (lambda x: F.unfold(x, (2, 2, 2)), "kernel_size equals to 2"),
    (lambda x: F.unfold(x, 5), "calculated shape of the array of sliding blocks as \\(0, 0\\)"),
    (lambda x: F.unfold(x, 0), "kernel size should be greater than zero"),
    (lambda x: F.unfold(x, 2, stride=0), "stride should be greater than zero"),
    (lambda x: F.unfold(x, 2, dilation=0), "dilation should be greater than zero"),
    (lambda x: F.unfold(x, 2, padding=-1), "padding should be non-negative"),
    (lambda x: F.unfold(x[:, :0], 2), "Expected 3D or 4D"),
    (lambda x: F.fold(x, (3, 3), 2), "Expected 2D or 3D"),
    (lambda x: F.fold(x[0, 0, :3], (3, 3), 2), "divisible by the product of kernel_size"),
    (lambda x: F.fold(x[0, 0, :, :3], (3, 3), 2), "number of sliding blocks 2 \\* 2 = 4, but got input.size\\(2\\)=3"),
])
def test_errors(call, message):
    x = to_nbx(np.zeros((1, 4, 4, 4), np.float32))
    with pytest.raises(RuntimeError, match=message):
        call(x)


def test_integer_refused():
    with pytest.raises(NotImplementedError, match="int64"):
        F.unfold(to_nbx(np.zeros((1, 1, 3, 3), np.int64)), 2)
    with pytest.raises(NotImplementedError, match="bool"):
        F.fold(to_nbx(np.zeros((1, 4, 4), bool)), 3, 2)


def test_unfold_copies_bools(rng):
    """unfold only moves elements: bools pass (as torch's im2col takes them), blocks past the edge read False."""
    x = rng.random((2, 3, 5, 4)) > 0.5
    got = F.unfold(to_nbx(x), 2, padding=1, stride=2)
    assert got.dtype.name == "bool"
    np.testing.assert_array_equal(got.numpy(), ref_unfold(x.astype(np.float64), (2, 2), (1, 1), (1, 1), (2, 2)) != 0)
