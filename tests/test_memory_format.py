"""Memory formats: preserve_format keeps a dense input's strides, contiguous_format makes them row-major, and
channels_last (channels_last_3d) puts the channel dim innermost, then the spatial dims, then the batch."""
import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.ops import registry

from .conftest import cpu_kernels

pytestmark = cpu_kernels


def _transposed():
    data = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    return data.transpose(0, 2, 1), nbx.tensor(data).transpose(1, 2)


_MAKERS = [
    lambda x, f: x.clone(memory_format=f),
    lambda x, f: registry.lookup("aten::_to_copy.default").impl(x, copy=True, memory_format=f),
    lambda x, f: nbx.empty_like(x, memory_format=f).copy_(x),
]


@pytest.mark.parametrize("make", _MAKERS)
def test_contiguous_format_is_row_major_and_preserve_keeps_strides(make):
    want, x = _transposed()
    row_major = make(x, "contiguous_format")
    assert row_major.is_contiguous() and np.array_equal(row_major.numpy(), want)
    assert np.array_equal(row_major.view(2, 12).numpy(), want.reshape(2, 12))
    kept = make(x, "preserve_format")
    assert kept.stride() == x.stride() and np.array_equal(kept.numpy(), want)


def test_contiguous_of_a_transposed_tensor_with_contiguous_format():
    want, x = _transposed()
    assert np.array_equal(x.contiguous(memory_format="contiguous_format").view(2, 12).numpy(), want.reshape(2, 12))


def test_the_constants_are_the_names():
    assert nbx.channels_last == "channels_last" and nbx.channels_last_3d == "channels_last_3d"
    assert nbx.contiguous_format == "contiguous_format" and nbx.preserve_format == "preserve_format"
    assert repr(nbx.channels_last) == "nbxtensor.channels_last"


def _nchw(shape):
    return np.arange(np.prod(shape), dtype=np.float32).reshape(shape) - 7


@pytest.mark.parametrize("fmt, shape, strides", [
    (nbx.channels_last, (2, 3, 4, 5), (60, 1, 15, 3)),
    ("channels_last", (1, 2, 3, 1), (6, 1, 2, 2)),
    (nbx.channels_last_3d, (2, 3, 2, 4, 5), (120, 1, 60, 15, 3)),
])
@pytest.mark.parametrize("make", [
    *_MAKERS,
    lambda x, f: x.contiguous(memory_format=f),
    lambda x, f: x.to(memory_format=f),
    lambda x, f: x.to("float32", copy=True, memory_format=f),
    lambda x, f: nbx.zeros_like(x, memory_format=f).add_(x),
])
def test_channels_last_puts_the_channels_innermost(make, fmt, shape, strides):
    values = _nchw(shape)
    got = make(nbx.tensor(values), fmt)
    assert got.stride() == strides
    assert got.is_contiguous(memory_format=fmt) and not got.is_contiguous() or shape[1] == 1
    np.testing.assert_array_equal(got.numpy(), values)
    # the memory itself is the NHWC (NDHWC) array
    order = (0, *range(2, len(shape)), 1)
    np.testing.assert_array_equal(got.permute(*order).contiguous().view(-1).numpy(),
                                  values.transpose(order).reshape(-1))


def test_a_channels_last_tensor_is_kept_where_it_is_asked_for_again():
    x = nbx.tensor(_nchw((2, 3, 4, 5))).contiguous(memory_format=nbx.channels_last)
    assert x.contiguous(memory_format=nbx.channels_last) is x
    assert x.to(memory_format=nbx.channels_last) is x
    assert x.contiguous() is not x and x.contiguous().is_contiguous()


def test_empty_takes_a_memory_format():
    assert nbx.empty(2, 3, 4, 5, memory_format=nbx.channels_last).stride() == (60, 1, 15, 3)
    assert nbx.empty(2, 3, memory_format=nbx.contiguous_format).stride() == (3, 1)
    with pytest.raises(RuntimeError, match="unsupported memory format Preserve"):
        nbx.empty(2, 3, memory_format=nbx.preserve_format)


@pytest.mark.parametrize("shape, strides, fmt, expected", [
    ((2, 3, 4, 5), (60, 1, 15, 3), "channels_last", True),
    ((2, 3, 4, 5), (60, 20, 5, 1), "channels_last", False),
    ((2, 1, 4, 5), (20, 20, 5, 1), "channels_last", True),  # one channel: both layouts at once
    ((2, 3, 1, 1), (3, 1, 1, 1), "channels_last", True),
    ((2, 3, 4, 5), (60, 1, 15, 3), "channels_last_3d", False),  # the wrong rank never is
    ((2, 3, 2, 4, 5), (120, 1, 60, 15, 3), "channels_last_3d", True),
    ((2, 3, 4), (12, 4, 1), "channels_last", False),
])
def test_is_contiguous_in_a_memory_format(shape, strides, fmt, expected):
    x = nbx.empty(sum(s * (n - 1) for s, n in zip(strides, shape)) + 1).as_strided(shape, strides)
    assert x.is_contiguous(memory_format=fmt) is expected


def test_is_contiguous_with_preserve_format_asks_about_row_major():
    _, x = _transposed()
    assert x.contiguous().is_contiguous(memory_format=nbx.preserve_format)
    assert not x.is_contiguous(memory_format=nbx.preserve_format)


@pytest.mark.parametrize("call", [
    lambda x: x.clone(memory_format="channels_last"),
    lambda x: x.contiguous(memory_format="channels_last"),
    lambda x: x.to(memory_format="channels_last"),
    lambda x: nbx.empty_like(x, memory_format="channels_last"),
    lambda x: registry.lookup("aten::_to_copy.default").impl(x, copy=True, memory_format="channels_last"),
])
def test_channels_last_needs_rank_4(call):
    with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
        call(_transposed()[1])


def test_channels_last_3d_needs_rank_5():
    with pytest.raises(RuntimeError, match="required rank 5 tensor to use channels_last_3d format"):
        nbx.zeros(1, 2, 3, 4).contiguous(memory_format=nbx.channels_last_3d)


def test_contiguous_refuses_preserve_format():
    with pytest.raises(RuntimeError, match="preserve memory format is unsupported by the contiguous operator"):
        _transposed()[1].contiguous(memory_format=nbx.preserve_format)


def test_unknown_memory_format_is_refused():
    with pytest.raises(ValueError, match="unknown memory_format 'sideways'"):
        _transposed()[1].clone(memory_format="sideways")


@pytest.mark.parametrize("name", ["rand_like", "randn_like", "empty_like", "zeros_like"])
def test_like_ops_follow_the_memory_format(name):
    _, x = _transposed()
    make = getattr(nbx, name)
    assert make(x).stride() == x.stride()
    assert make(x, memory_format="contiguous_format").is_contiguous()
    four = nbx.zeros(2, 3, 4, 5)
    assert make(four, memory_format=nbx.channels_last).is_contiguous(memory_format=nbx.channels_last)
