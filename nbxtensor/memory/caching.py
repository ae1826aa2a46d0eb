"""A caching allocator over a device's raw allocation calls.

Raw allocations (``cudaMalloc``) are slow and synchronising, so freed blocks stay cached and are
reused. Requests are rounded to 512 bytes. Small requests (up to 1 MiB) are carved from 2 MiB
segments; large ones get segments rounded to 2 MiB, and a cached block larger than needed is split
when the remainder is worth keeping. Neighbouring free blocks of one segment merge again. Each stream
has its own pools, so a block freed by work on one stream is only reused by that stream. When the
device refuses a segment, the cache is released and the request retried once before
``OutOfMemoryError`` explains what was asked, what is free and what to do.

Threads: the parked blocks' hot path is C, which runs whole under the GIL; the pools and segments are
Python, kept under the allocator's lock.
"""
from __future__ import annotations

import bisect
import os
import re
import threading
from dataclasses import dataclass, field

from .. import native

ROUND = 512
SMALL_LIMIT = 1 << 20
SMALL_SEGMENT = 2 << 20
LARGE_ROUND = 2 << 20
MIN_LARGE_SPLIT = 1 << 20
_PARKED_PER_SIZE = 8


class RawOutOfMemory(Exception):
    """Raised by a raw allocation function when the device has no room."""


class OutOfMemoryError(RuntimeError):
    """The device could not provide the memory asked for, even after releasing the cache."""


def _fmt(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"


def parse_bytes(text: str) -> int:
    """``"8GiB"``, ``"512 MB"``, ``"1073741824"`` to a byte count."""
    m = re.fullmatch(r"\s*([0-9.]+)\s*([kmgt]?i?b?)?\s*", text.lower())
    if not m:
        raise ValueError(f"cannot read a memory size from {text!r}; write e.g. 8GiB, 512MB or 1073741824")
    scale = {"": 1, "b": 1, "k": 1e3, "kb": 1e3, "kib": 2 ** 10, "ki": 2 ** 10, "m": 1e6, "mb": 1e6,
             "mib": 2 ** 20, "mi": 2 ** 20, "g": 1e9, "gb": 1e9, "gib": 2 ** 30, "gi": 2 ** 30,
             "t": 1e12, "tb": 1e12, "tib": 2 ** 40, "ti": 2 ** 40}[m.group(2) or ""]
    return int(float(m.group(1)) * scale)


@dataclass(eq=False)
class Segment:
    ptr: int
    size: int
    stream: int
    small: bool


@dataclass(eq=False)
class Block:
    ptr: int
    size: int
    segment: Segment
    requested: int = 0
    free: bool = True
    prev: "Block | None" = field(default=None, repr=False)
    next: "Block | None" = field(default=None, repr=False)


class CachingAllocator:
    def __init__(self, raw_alloc, raw_free, mem_info, name: str = "device", limit: int | None = None):
        """``raw_alloc(nbytes) -> ptr`` (raising RawOutOfMemory), ``raw_free(ptr)``,
        ``mem_info() -> (free, total)``."""
        self._raw_alloc = raw_alloc
        self._raw_free = raw_free
        self._mem_info = mem_info
        self.name = name
        self.limit = limit
        self._pools: dict[tuple[int, bool], list[tuple[int, int, Block]]] = {}
        self._segments: dict[int, Segment] = {}
        # over the pools and segments; re-entrant: an allocation may merge parked blocks or empty the
        # cache, and a buffer collected while the lock is held frees its block in the same thread
        self._lock = threading.RLock()
        # The hot path runs in C (``nbxtensor/native/block_cache.c``): small blocks just freed are parked
        # whole by (stream, size), and the next request of that size takes one back without a split and a
        # merge (most requests repeat a recent size); they join the pools when a request finds nothing
        # else, and before the cache is emptied. It keeps the live blocks and the counters too.
        self._parking = native.module("block_cache").Parking(self._release, _PARKED_PER_SIZE, ROUND, SMALL_LIMIT)
        self.stats = self._parking.stats
        self._live: dict[int, Block] = self._parking.live
        self._parked: dict[tuple[int, int], list[Block]] = self._parking.parked
        # (nbytes, stream) -> a buffer over a parked block, or None (then ``buffer``): for callers that
        # allocate the same size call after call
        self.parked_buffer = self._parking.buffer

    @staticmethod
    def round_size(nbytes: int) -> int:
        return max(ROUND, -(-nbytes // ROUND) * ROUND)

    def allocate(self, nbytes: int, stream: int = 0) -> Block:
        block = self._parking.take(nbytes, stream)
        return block if block is not None else self._allocate_unparked(nbytes, stream)

    def _allocate_unparked(self, nbytes: int, stream: int) -> Block:
        """``allocate`` when no parked block serves the request: from the pools, or a new segment."""
        if nbytes < 0:
            raise ValueError(f"cannot allocate a negative number of bytes ({nbytes})")
        size = self.round_size(nbytes)
        small = size <= SMALL_LIMIT
        with self._lock:
            block = self._take_cached(size, stream, small)
            if block is None and any(self._parked.values()):
                self._merge_parked()
                block = self._take_cached(size, stream, small)
            if block is None:
                block = self._new_segment_block(size, stream, small, nbytes)
            self._split(block, size, small)
            block.free = False
            self._parking.checkout(block, nbytes)
        return block

    def buffer(self, nbytes: int, stream: int = 0):
        """``allocate`` as a device buffer that frees its block when collected."""
        made = self._parking.buffer(nbytes, stream)
        return made if made is not None else self._parking.wrap(self._allocate_unparked(nbytes, stream), nbytes)

    def free(self, block: Block) -> None:
        """Give back a block ``allocate`` handed out: parked, or released to its pool."""
        self._parking.free(block)

    def _release(self, block: Block) -> None:
        """Return a block to its stream's pool as free, merged with free neighbours."""
        with self._lock:
            block.free = True
            for neighbour in (block.prev, block.next):
                if neighbour is not None and neighbour.free:
                    self._unpool(neighbour)
                    block = self._merge(block, neighbour)
            self._pool(block)

    def _merge_parked(self) -> None:
        # emptied in place (the parking keeps these lists), a pop at a time: other threads take from them
        for blocks in list(self._parked.values()):
            while True:
                try:
                    block = blocks.pop()
                except IndexError:
                    break
                self._release(block)

    def empty_cache(self) -> int:
        """Give every wholly free segment back to the device; returns the bytes released."""
        with self._lock:
            self._merge_parked()
            released = 0
            for key, pool in list(self._pools.items()):
                keep = []
                for entry in pool:
                    block = entry[2]
                    if block.prev is None and block.next is None and block.size == block.segment.size:
                        self._raw_free(block.segment.ptr)
                        del self._segments[block.segment.ptr]
                        released += block.size
                    else:
                        keep.append(entry)
                self._pools[key] = keep
            self.stats.reserved -= released
            self.stats.segments = len(self._segments)
            self.stats.cache_flushes += 1
        return released

    def reset_peak(self) -> None:
        self.stats.peak_allocated = self.stats.allocated
        self.stats.peak_reserved = self.stats.reserved

    def largest_live(self, count: int = 5) -> list[int]:
        return sorted((b.requested for b in list(self._live.values())), reverse=True)[:count]

    # ---- internals ----------------------------------------------------------------------------
    def _pool(self, block: Block) -> None:
        pool = self._pools.setdefault((block.segment.stream, block.segment.small), [])
        bisect.insort(pool, (block.size, block.ptr, block))

    def _unpool(self, block: Block) -> None:
        pool = self._pools[(block.segment.stream, block.segment.small)]
        i = bisect.bisect_left(pool, (block.size, block.ptr))
        assert pool[i][2] is block
        del pool[i]

    def _take_cached(self, size: int, stream: int, small: bool) -> Block | None:
        pool = self._pools.get((stream, small))
        if not pool:
            return None
        i = bisect.bisect_left(pool, (size, -1))
        if i == len(pool):
            return None
        return pool.pop(i)[2]

    def _split(self, block: Block, size: int, small: bool) -> None:
        rest = block.size - size
        if rest >= (ROUND if small else MIN_LARGE_SPLIT):
            tail = Block(block.ptr + size, rest, block.segment, prev=block, next=block.next)
            if block.next is not None:
                block.next.prev = tail
            block.next = tail
            block.size = size
            self._pool(tail)

    @staticmethod
    def _merge(a: Block, b: Block) -> Block:
        first, second = (a, b) if a.ptr < b.ptr else (b, a)
        first.size += second.size
        first.next = second.next
        if second.next is not None:
            second.next.prev = first
        return first

    def _new_segment_block(self, size: int, stream: int, small: bool, requested: int) -> Block:
        seg_size = SMALL_SEGMENT if small else -(-size // LARGE_ROUND) * LARGE_ROUND
        ptr = self._raw_segment(seg_size, requested)
        segment = Segment(ptr, seg_size, stream, small)
        self._segments[ptr] = segment
        s = self.stats
        s.reserved += seg_size
        s.peak_reserved = max(s.peak_reserved, s.reserved)
        s.segments = len(self._segments)
        return Block(ptr, seg_size, segment)

    def _raw_segment(self, seg_size: int, requested: int) -> int:
        for attempt in range(2):
            over_limit = self.limit is not None and self.stats.reserved + seg_size > self.limit
            if not over_limit:
                try:
                    return self._raw_alloc(seg_size)
                except RawOutOfMemory:
                    pass
            if attempt == 0:
                self.stats.oom_retries += 1
                self.empty_cache()
        raise self._oom_error(requested, seg_size)

    def _oom_error(self, requested: int, seg_size: int) -> OutOfMemoryError:
        try:
            free, total = self._mem_info()
            device_line = f"{_fmt(free)} free of {_fmt(total)} on the device"
        except Exception as e:  # noqa: BLE001  (the error message must not fail while reporting)
            device_line = f"device free/total unknown ({e})"
        live = ", ".join(_fmt(n) for n in self.largest_live()) or "none"
        limit = f"; the limit set for nbxtensor is {_fmt(self.limit)}" if self.limit is not None else ""
        return OutOfMemoryError(
            f"{self.name}: out of memory asking for {_fmt(requested)} (a segment of {_fmt(seg_size)}); "
            f"{device_line}; nbxtensor holds {_fmt(self.stats.allocated)} in live tensors and "
            f"{_fmt(self.stats.reserved - self.stats.allocated)} cached (the cache was released and the "
            f"request retried){limit}. Largest live allocations: {live}. To fit: free tensors you no "
            "longer need (del them), use smaller batches or a narrower dtype, raise the limit "
            "(nbx.cuda.set_memory_limit or NBX_CUDA_MEMORY_LIMIT), or stop other processes using the GPU.")


def limit_from_environment(variable: str = "NBX_CUDA_MEMORY_LIMIT") -> int | None:
    text = os.environ.get(variable, "").strip()
    return parse_bytes(text) if text else None
