"""Memory formats: preserve_format keeps a dense input's strides, contiguous_format makes them row-major."""
import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.ops import registry

from .conftest import cpu_kernels

pytestmark = cpu_kernels


def _transposed():
    data = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    return data.transpose(0, 2, 1), nbx.tensor(data).transpose(1, 2)


@pytest.mark.parametrize("make", [
    lambda x, f: x.clone(memory_format=f),
    lambda x, f: registry.lookup("aten::_to_copy.default").impl(x, copy=True, memory_format=f),
    lambda x, f: nbx.empty_like(x, memory_format=f).copy_(x),
])
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


@pytest.mark.parametrize("call", [
    lambda x: x.clone(memory_format="channels_last"),
    lambda x: x.contiguous(memory_format="channels_last"),
    lambda x: nbx.empty_like(x, memory_format="channels_last"),
    lambda x: registry.lookup("aten::_to_copy.default").impl(x, copy=True, memory_format="channels_last"),
])
def test_channels_last_is_refused_by_name(call):
    with pytest.raises(NotImplementedError, match="channels_last.*not supported yet"):
        call(_transposed()[1])


def test_unknown_memory_format_is_refused():
    with pytest.raises(ValueError, match="unknown memory_format 'sideways'"):
        _transposed()[1].clone(memory_format="sideways")


@pytest.mark.parametrize("name", ["rand_like", "randn_like", "empty_like", "zeros_like"])
def test_like_ops_follow_the_memory_format(name):
    _, x = _transposed()
    make = getattr(nbx, name)
    assert make(x).stride() == x.stride()
    assert make(x, memory_format="contiguous_format").is_contiguous()
