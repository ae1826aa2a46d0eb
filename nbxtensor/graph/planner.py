"""The static memory planner: every intermediate's lifetime in op steps, and offsets in one arena.

A block lives from the step that defines it to the step of its last use, both inclusive: an op's
inputs and outputs are live together, so an output never lands on an input it reads. Blocks are
placed largest first, each into the smallest gap (best fit) left by the already placed blocks whose
lifetimes overlap its own, or on top of them; sizes are rounded up to the arena alignment."""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

ARENA_ALIGNMENT = 256


@dataclass(frozen=True)
class Block:
    name: str
    size: int
    first: int  # the step that defines it
    last: int  # the step of its last use

    def overlaps_in_time(self, other: "Block") -> bool:
        return self.first <= other.last and other.first <= self.last


@dataclass
class MemoryPlan:
    blocks: list[Block]
    offsets: dict[str, int]
    arena_bytes: int
    alignment: int = ARENA_ALIGNMENT
    naive_bytes: int = 0  # every block allocated separately, none reused
    live_peak_bytes: int = 0  # the most bytes live at one step: no placement can do better
    workspace_peak_bytes: int = 0
    workspace_total_bytes: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def peak_bytes(self) -> int:
        """The most bytes a run holds at once: the arena (intermediates, workspaces and the outputs)."""
        return self.arena_bytes

    def placement(self, name: str) -> tuple[int, int]:
        """``(offset, aligned size)`` of block ``name``."""
        return self.offsets[name], self._aligned_sizes[name]

    @functools.cached_property
    def _aligned_sizes(self) -> dict[str, int]:
        return {b.name: align(b.size, self.alignment) for b in self.blocks}


def align(size: int, alignment: int = ARENA_ALIGNMENT) -> int:
    return -(-size // alignment) * alignment


def place(blocks: list[Block], alignment: int = ARENA_ALIGNMENT) -> tuple[dict[str, int], int]:
    """Offsets for ``blocks`` such that no two blocks live at the same step share a byte, and the arena size."""
    offsets: dict[str, int] = {}
    placed: list[Block] = []
    arena = 0
    for block in sorted(blocks, key=lambda b: (-b.size, b.first, b.name)):
        size = align(block.size, alignment)
        if size == 0:
            offsets[block.name] = 0
            continue
        busy = sorted((offsets[p.name], offsets[p.name] + align(p.size, alignment))
                      for p in placed if align(p.size, alignment) and p.overlaps_in_time(block))
        best_offset, best_gap, cursor = None, None, 0
        for start, end in busy:
            gap = start - cursor
            if gap >= size and (best_gap is None or gap < best_gap):
                best_offset, best_gap = cursor, gap
            cursor = max(cursor, end)
        offset = cursor if best_offset is None else best_offset
        offsets[block.name] = offset
        placed.append(block)
        arena = max(arena, offset + size)
    return offsets, arena


def live_peak(blocks: list[Block], alignment: int = ARENA_ALIGNMENT) -> int:
    if not blocks:
        return 0
    steps = range(min(b.first for b in blocks), max(b.last for b in blocks) + 1)
    return max(sum(align(b.size, alignment) for b in blocks if b.first <= step <= b.last) for step in steps)


def plan(blocks: list[Block], workspaces: list[Block] = (), alignment: int = ARENA_ALIGNMENT) -> MemoryPlan:
    """Place intermediates (the graph's outputs among them) and per-op workspaces (each live for its op's
    step only) in one arena."""
    everything = list(blocks) + list(workspaces)
    offsets, arena = place(everything, alignment)
    return MemoryPlan(blocks=everything, offsets=offsets, arena_bytes=arena, alignment=alignment,
                      naive_bytes=sum(align(b.size, alignment) for b in everything),
                      live_peak_bytes=live_peak(everything, alignment),
                      workspace_peak_bytes=max((b.size for b in workspaces), default=0),
                      workspace_total_bytes=sum(b.size for b in workspaces))


def overlapping_pairs(memory_plan: MemoryPlan) -> list[tuple[str, str]]:
    """Pairs of blocks live at the same step whose byte ranges intersect; empty for a correct plan."""
    found = []
    blocks = [b for b in memory_plan.blocks if b.size]
    for i, a in enumerate(blocks):
        a_start = memory_plan.offsets[a.name]
        a_end = a_start + align(a.size, memory_plan.alignment)
        for b in blocks[i + 1:]:
            b_start = memory_plan.offsets[b.name]
            b_end = b_start + align(b.size, memory_plan.alignment)
            if a.overlaps_in_time(b) and a_start < b_end and b_start < a_end:
                found.append((a.name, b.name))
    return found
