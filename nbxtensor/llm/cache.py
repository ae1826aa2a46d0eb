"""The paged KV cache: per layer, key and value pages (num_blocks, block_size, kv_heads, head_dim); a
sequence owns a list of pages (its block table), taken from a free list as it grows and returned when it
ends, so sequences of any length share one budget without copying."""
from __future__ import annotations

from ..ops.creation import empty

__all__ = ["PagedKVCache", "CacheFull"]


class CacheFull(RuntimeError):
    """No free page is left for a sequence that grows."""


class PagedKVCache:
    def __init__(self, num_layers: int, tokens: int, block_size: int, kv_heads: int, head_dim: int, dtype, device):
        if tokens < 1 or block_size < 1:
            raise ValueError(f"a KV cache holds at least one token in pages of at least one, got tokens={tokens}, "
                             f"block_size={block_size}")
        self.block_size = block_size
        self.num_blocks = -(-tokens // block_size)
        shape = (self.num_blocks, block_size, kv_heads, head_dim)
        self.keys = [empty(shape, dtype=dtype, device=device) for _ in range(num_layers)]
        self.values = [empty(shape, dtype=dtype, device=device) for _ in range(num_layers)]
        self._free = list(range(self.num_blocks - 1, -1, -1))
        self._pages: dict[int, list[int]] = {}
        self._lengths: dict[int, int] = {}

    @property
    def capacity_tokens(self) -> int:
        return self.num_blocks * self.block_size

    @property
    def free_tokens(self) -> int:
        return len(self._free) * self.block_size

    def length(self, sequence: int) -> int:
        return self._lengths[sequence]

    def extend(self, sequence: int, count: int) -> list[int]:
        """The cache slots (page * block_size + offset) of ``count`` more tokens of ``sequence`` (a new one
        starts empty), taking pages as needed."""
        pages = self._pages.setdefault(sequence, [])
        start = self._lengths.get(sequence, 0)
        needed = -(-(start + count) // self.block_size) - len(pages)
        if needed > len(self._free):
            if not pages:
                del self._pages[sequence]
            raise CacheFull(f"the KV cache has {self.free_tokens} free tokens of {self.capacity_tokens}; "
                            f"sequence {sequence} needs {count} more at length {start}")
        pages.extend(self._free.pop() for _ in range(needed))
        self._lengths[sequence] = start + count
        return [pages[t // self.block_size] * self.block_size + t % self.block_size
                for t in range(start, start + count)]

    def block_table(self, sequences: list[int]) -> list[list[int]]:
        """Each sequence's pages, padded to the longest with page 0 (never read past a sequence's length)."""
        widest = max(len(self._pages[s]) for s in sequences)
        return [self._pages[s] + [0] * (widest - len(self._pages[s])) for s in sequences]

    def release(self, sequence: int) -> None:
        """Return ``sequence``'s pages to the free list."""
        self._free.extend(reversed(self._pages.pop(sequence, [])))
        self._lengths.pop(sequence, None)
