"""The static memory planner: no two blocks live at the same step share a byte."""
from hypothesis import given, settings, strategies as st

from nbxtensor.graph.planner import ARENA_ALIGNMENT, Block, align, live_peak, overlapping_pairs, plan


@st.composite
def lifetimes(draw):
    count = draw(st.integers(0, 40))
    blocks = []
    for index in range(count):
        first = draw(st.integers(0, 30))
        length = draw(st.integers(0, 10))
        size = draw(st.one_of(st.just(0), st.integers(1, 5000)))
        blocks.append(Block(f"t{index}", size, first, first + length))
    return blocks


@settings(max_examples=300, deadline=None)
@given(lifetimes())
def test_no_two_live_blocks_overlap(blocks):
    memory_plan = plan(blocks)
    assert overlapping_pairs(memory_plan) == []
    assert all(offset % ARENA_ALIGNMENT == 0 for offset in memory_plan.offsets.values())
    assert live_peak(blocks) <= memory_plan.arena_bytes <= memory_plan.naive_bytes
    for block in blocks:
        assert memory_plan.offsets[block.name] + align(block.size) <= memory_plan.arena_bytes


def test_disjoint_lifetimes_share_memory():
    blocks = [Block("a", 1000, 0, 1), Block("b", 1000, 2, 3), Block("c", 300, 1, 2)]
    memory_plan = plan(blocks)
    assert memory_plan.offsets["a"] == memory_plan.offsets["b"]
    assert memory_plan.arena_bytes == align(1000) + align(300) < memory_plan.naive_bytes


def test_workspace_lives_only_during_its_step():
    memory_plan = plan([Block("a", 512, 0, 0), Block("b", 512, 2, 2)], [Block("op#workspace", 512, 1, 1)])
    assert memory_plan.arena_bytes == 512 and memory_plan.workspace_peak_bytes == 512
