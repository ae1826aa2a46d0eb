"""The one decision of 64-bit index arithmetic (``nbxtensor.lowering.needs_index_64``), at its boundary,
from layouts alone: meta tensors and (shape, strides) pairs, nothing allocated."""
import pathlib
import re

import pytest

import nbxtensor as nbx
from nbxtensor.lowering import INT32_LIMIT, needs_index_64

LAST_32 = 2 ** 31 - 1  # the largest offset int32 holds


def _reaching(offset: int):
    """A meta tensor of two elements whose second sits ``offset`` elements past its first."""
    return nbx.empty((2, 2), device="meta").as_strided((2,), (offset,))


def test_the_limit_is_the_first_value_int32_cannot_hold():
    assert INT32_LIMIT == LAST_32 + 1 == 2 ** 31


@pytest.mark.parametrize("offset,wide", [(LAST_32, False), (LAST_32 + 1, True)])
def test_a_tensor_whose_last_offset_is_past_int32_needs_64_bits(offset, wide):
    assert needs_index_64(_reaching(offset)) is wide
    assert needs_index_64(((2,), (offset,))) is wide
    # one narrow operand beside it decides nothing
    assert needs_index_64(_reaching(1), _reaching(offset)) is wide


@pytest.mark.parametrize("count,wide", [(LAST_32, False), (LAST_32 + 1, True)])
def test_element_counts_past_int32_need_64_bits(count, wide):
    assert needs_index_64(count=count) is wide
    # a broadcast layout counts its elements though it reaches no offset
    assert needs_index_64(((count,), (0,))) is wide
    big = nbx.empty((1,), device="meta").expand(count)
    assert needs_index_64(big) is wide


@pytest.mark.parametrize("offset,wide", [(LAST_32 - 1, False), (LAST_32, True)])
def test_elements_addressed_past_the_last_offset_count(offset, wide):
    # a complex pair's imaginary part sits one element past the offset its strides reach
    assert needs_index_64(((2,), (offset,)), reach=1) is wide


def test_empty_and_zero_dim_layouts_are_narrow():
    assert not needs_index_64(((0, 5), (2 ** 40, 1)), ((), ()))
    assert not needs_index_64()


def test_no_module_decides_on_its_own():
    """Every op asks ``needs_index_64``: no other module spells the limit."""
    root = pathlib.Path(nbx.__file__).parent
    limit = re.compile(r"2 \*\* 31|1 << 31|2\*\*31|_INT32_LIMIT|def _(needs_)?index_64")
    found = [f"{p.relative_to(root)}:{n}" for p in root.rglob("*.py") if p.name != "lowering.py"
             for n, line in enumerate(p.read_text().splitlines(), 1) if limit.search(line)]
    assert found == []
