"""grid_sample and affine_grid against NumPy float64 loops written from the definitions: unnormalise,
pad (clip, or mirror about the edges then clip), then gather nearest / bilinear / bicubic (A = -0.75)
taps, a tap outside the input reading 0. The kernel computes in float32: a bilinear result is a sum of
at most 8 products of weights <= 1 and bicubic of 16 with weights summing to 1 in magnitude below 2,
so a few hundred eps32 of the data scale covers coordinate rounding as well; nearest picks are exact
except where a coordinate lies within rounding of a tie, which the random grids avoid."""
import numpy as np
import pytest

import nbxtensor as nbx

from .conftest import to_nbx

F = nbx.nn.functional
A = -0.75


def unnormalize(g, size, align):
    return (g + 1) / 2 * (size - 1) if align else ((g + 1) * size - 1) / 2


def reflect(x, lo2, hi2):
    if lo2 == hi2:
        return 0.0
    lo, span = lo2 / 2, (hi2 - lo2) / 2
    x = abs(x - lo)
    flips, extra = divmod(x, span)
    return extra + lo if int(flips) % 2 == 0 else span - extra + lo


def pad(x, size, padding, align):
    if padding == "border":
        return min(max(x, 0), size - 1)
    if padding == "reflection":
        x = reflect(x, 0, 2 * (size - 1)) if align else reflect(x, -1, 2 * size - 1)
        return min(max(x, 0), size - 1)
    return x


def tap(plane, idx):
    if all(0 <= i < s for i, s in zip(idx, plane.shape)):
        return plane[tuple(idx)]
    return 0.0


def cubic(t):
    def near(s):
        return ((A + 2) * s - (A + 3)) * s * s + 1

    def far(s):
        return ((A * s - 5 * A) * s + 8 * A) * s - 4 * A
    return far(t + 1), near(t), near(1 - t), far(2 - t)


def ref_grid_sample(x, grid, mode, padding, align):
    x, grid = x.astype(np.float64), grid.astype(np.float64)
    n, c = x.shape[:2]
    spatial = x.shape[2:]
    out = np.zeros((n, c, *grid.shape[1:-1]))
    for b in range(n):
        for pos in np.ndindex(*grid.shape[1:-1]):
            point = grid[(b, *pos)][::-1]  # (z,) y, x
            coords = [unnormalize(g, s, align) for g, s in zip(point, spatial)]
            for ch in range(c):
                plane = x[b, ch]
                if mode == "bicubic":
                    (y, xx), (h, w) = coords, spatial
                    y0, x0 = np.floor(y), np.floor(xx)
                    wy, wx = cubic(y - y0), cubic(xx - x0)
                    value = 0.0
                    for i in range(4):
                        yy = pad(y0 - 1 + i, h, padding, align)
                        for j in range(4):
                            xj = pad(x0 - 1 + j, w, padding, align)
                            value += wy[i] * wx[j] * tap(plane, (int(yy), int(xj)))
                else:
                    at = [pad(v, s, padding, align) for v, s in zip(coords, spatial)]
                    if mode == "nearest":
                        value = tap(plane, [int(np.rint(v)) for v in at])
                    else:
                        low = [np.floor(v) for v in at]
                        value = 0.0
                        for corner in np.ndindex(*(2,) * len(at)):
                            weight = np.prod([(v - lo) if k else (lo + 1 - v) for v, lo, k in zip(at, low, corner)])
                            value += weight * tap(plane, [int(lo) + k for lo, k in zip(low, corner)])
                out[(b, ch, *pos)] = value
    return out


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_grid_sample_2d(rng, mode, padding, align):
    x = rng.standard_normal((2, 2, 4, 5)).astype(np.float32)
    grid = rng.uniform(-1.4, 1.4, (2, 3, 4, 2)).astype(np.float32)
    out = F.grid_sample(to_nbx(x), to_nbx(grid), mode=mode, padding_mode=padding, align_corners=align)
    ref = ref_grid_sample(x, grid, mode, padding, align)
    assert out.shape == ref.shape and out.dtype == nbx.float32
    np.testing.assert_allclose(out.numpy(), ref, rtol=0, atol=256 * 2.0 ** -23 * np.abs(x).max())


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_grid_sample_3d(rng, mode, padding, align):
    x = rng.standard_normal((1, 2, 3, 4, 3)).astype(np.float32)
    grid = rng.uniform(-1.4, 1.4, (1, 2, 2, 3, 3)).astype(np.float32)
    out = F.grid_sample(to_nbx(x), to_nbx(grid), mode=mode, padding_mode=padding, align_corners=align)
    ref = ref_grid_sample(x, grid, mode, padding, align)
    np.testing.assert_allclose(out.numpy(), ref, rtol=0, atol=256 * 2.0 ** -23 * np.abs(x).max())


def test_grid_sample_strided_and_double(rng):
    x = rng.standard_normal((1, 4, 5, 2))
    grid = rng.uniform(-1, 1, (1, 2, 3, 2))
    source = to_nbx(x).permute(0, 3, 1, 2)  # (1, 2, 4, 5) read in place
    out = F.grid_sample(source, to_nbx(grid).transpose(1, 2), align_corners=False)
    ref = ref_grid_sample(x.transpose(0, 3, 1, 2), grid.transpose(0, 2, 1, 3), "bilinear", "zeros", False)
    assert out.dtype == nbx.float64
    np.testing.assert_allclose(out.numpy(), ref, rtol=0, atol=1e-12)  # float64 throughout


def test_grid_sample_half(rng):
    x = rng.standard_normal((1, 2, 4, 4)).astype(np.float16)
    grid = rng.uniform(-1, 1, (1, 3, 3, 2)).astype(np.float16)
    out = F.grid_sample(to_nbx(x), to_nbx(grid), align_corners=True)
    ref = ref_grid_sample(x, grid, "bilinear", "zeros", True)
    assert out.dtype == nbx.float16
    np.testing.assert_allclose(out.numpy().astype(np.float64), ref, rtol=0, atol=4 * 2.0 ** -10 * np.abs(x).max())


def ref_affine_grid(theta, size, align):
    def base(steps):
        if steps <= 1:
            return np.zeros(1)
        r = np.linspace(-1, 1, steps)
        return r if align else r * (steps - 1) / steps
    axes = [base(s) for s in size[2:]]
    out = np.zeros((size[0], *size[2:], len(axes)))
    for b in range(size[0]):
        for pos in np.ndindex(*size[2:]):
            point = np.array([axes[d][pos[d]] for d in range(len(axes))][::-1] + [1.0])  # x, y, (z,) 1
            out[(b, *pos)] = theta[b] @ point
    return out


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("size", [(2, 3, 4, 5), (1, 1, 2, 3, 4), (1, 1, 1, 3)])
def test_affine_grid(rng, size, align):
    nd = len(size) - 2
    theta = rng.standard_normal((size[0], nd, nd + 1)).astype(np.float32)
    out = F.affine_grid(to_nbx(theta), size, align_corners=align)
    # a sum of nd + 1 float32 products of unit-scale terms
    np.testing.assert_allclose(out.numpy(), ref_affine_grid(theta.astype(np.float64), size, align), rtol=0,
                               atol=8 * 2.0 ** -23 * np.abs(theta).sum(-1).max())


def test_affine_grid_feeds_grid_sample(rng):
    """The identity transform with align_corners samples every pixel centre: the input comes back."""
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    theta = np.tile(np.eye(2, 3, dtype=np.float32), (2, 1, 1))
    grid = F.affine_grid(to_nbx(theta), (2, 3, 4, 5), align_corners=False)
    out = F.grid_sample(to_nbx(x), grid, align_corners=False)
    np.testing.assert_allclose(out.numpy(), x, rtol=0, atol=1e-6)


@pytest.mark.parametrize("call, error, message", [
    (lambda x, g: F.grid_sample(x, g, mode="x"), ValueError, "expected mode to be 'bilinear'"),
    (lambda x, g: F.grid_sample(x, g, padding_mode="x"), ValueError, "expected padding_mode to be 'zeros'"),
    (lambda x, g: F.grid_sample(to_nbx(np.zeros((1, 2, 3, 3, 3), np.float32)),
                                to_nbx(np.zeros((1, 2, 2, 2, 3), np.float32)), mode="bicubic", align_corners=False),
     RuntimeError, "bicubic interpolation only supports 4D input"),
    (lambda x, g: F.grid_sample(x, g.to(nbx.float64), align_corners=False), RuntimeError, "same dtype"),
    (lambda x, g: F.grid_sample(x, g[0], align_corners=False), RuntimeError, "4D or 5D input and grid"),
    (lambda x, g: F.grid_sample(x, g.expand(2, 3, 3, 2), align_corners=False), RuntimeError, "same batch size"),
    (lambda x, g: F.grid_sample(x, g[..., :1], align_corners=False), RuntimeError, "size 2 in last dimension"),
    (lambda x, g: F.grid_sample(x[:, :, :0], g, align_corners=False), RuntimeError, "non-empty spatial"),
    (lambda x, g: F.grid_sample(x.to(nbx.int64), g.to(nbx.int64), align_corners=False), NotImplementedError,
     "int64"),
    (lambda x, g: F.affine_grid(to_nbx(np.zeros((1, 2, 3), np.int64)), (1, 1, 2, 2), align_corners=False),
     ValueError, "floating point type"),
    (lambda x, g: F.affine_grid(to_nbx(np.zeros((1, 3, 3), np.float32)), (1, 1, 2, 2), align_corners=False),
     ValueError, "Nx2x3"),
    (lambda x, g: F.affine_grid(to_nbx(np.zeros((1, 2, 3), np.float32)), (1, 1, 2, 2, 2), align_corners=False),
     ValueError, "Nx3x4"),
    (lambda x, g: F.affine_grid(to_nbx(np.zeros((1, 2, 3), np.float32)), (1, 1, 2), align_corners=False),
     NotImplementedError, "only supports 4D and 5D sizes"),
    (lambda x, g: F.affine_grid(to_nbx(np.zeros((1, 2, 3), np.float32)), (1, 1, 0, 2), align_corners=False),
     ValueError, "non-zero, positive output size"),
    (lambda x, g: F.affine_grid(to_nbx(np.zeros((2, 2, 3), np.float32)), (1, 1, 2, 2), align_corners=False),
     RuntimeError, "first two dimensions of batch2"),
])
def test_errors(call, error, message):
    x = to_nbx(np.zeros((1, 2, 4, 4), np.float32))
    g = to_nbx(np.zeros((1, 3, 3, 2), np.float32))
    with pytest.raises(error, match=message):
        call(x, g)


def test_default_align_corners_warns():
    x = to_nbx(np.zeros((1, 1, 2, 2), np.float32))
    with pytest.warns(UserWarning, match="align_corners=False"):
        F.grid_sample(x, to_nbx(np.zeros((1, 1, 1, 2), np.float32)))
