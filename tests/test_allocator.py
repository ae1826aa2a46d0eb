"""The caching allocator's bookkeeping, over a fake device (no GPU needed)."""
import random

import pytest
from hypothesis import given, settings, strategies as st

from nbxtensor.memory import CachingAllocator, OutOfMemoryError, RawOutOfMemory, parse_bytes
from nbxtensor.memory.caching import LARGE_ROUND, ROUND, SMALL_LIMIT, SMALL_SEGMENT


class FakeDevice:
    """Hands out address ranges from a fixed capacity and checks nothing is freed twice."""

    def __init__(self, capacity=1 << 30):
        self.capacity = capacity
        self.used = 0
        self.next = 1 << 40
        self.live = {}
        self.mallocs = 0

    def alloc(self, n):
        if self.used + n > self.capacity:
            raise RawOutOfMemory(n)
        ptr = self.next
        self.next += n + 4096
        self.live[ptr] = n
        self.used += n
        self.mallocs += 1
        return ptr

    def free(self, ptr):
        self.used -= self.live.pop(ptr)

    def info(self):
        return self.capacity - self.used, self.capacity


def make(capacity=1 << 30, limit=None):
    dev = FakeDevice(capacity)
    return dev, CachingAllocator(dev.alloc, dev.free, dev.info, name="fake", limit=limit)


def test_rounding_and_reuse():
    dev, alloc = make()
    a = alloc.allocate(1)
    assert a.size == ROUND and a.segment.size == SMALL_SEGMENT
    b = alloc.allocate(1000)
    assert b.size == 1024 and b.segment is a.segment  # carved from the same small segment
    alloc.free(a)
    c = alloc.allocate(100)
    assert c.ptr == a.ptr  # the cached block comes back without a device call
    assert dev.mallocs == 1


def test_large_blocks_split_and_merge():
    dev, alloc = make()
    big = alloc.allocate(64 << 20)
    alloc.free(big)
    x = alloc.allocate(8 << 20)
    y = alloc.allocate(8 << 20)
    assert dev.mallocs == 1 and x.segment is y.segment is big.segment
    alloc.free(x)
    alloc.free(y)
    assert alloc.stats.allocated == 0
    assert alloc.empty_cache() == 64 << 20  # the pieces merged back into one whole segment
    assert dev.used == 0 and alloc.stats.reserved == 0


def test_streams_do_not_share_blocks():
    dev, alloc = make()
    a = alloc.allocate(4096, stream=0)
    alloc.free(a)
    b = alloc.allocate(4096, stream=7)
    assert b.segment is not a.segment and dev.mallocs == 2


def test_stats_return_to_baseline_after_many_small_allocations():
    dev, alloc = make()
    base = alloc.stats.allocated
    blocks = []
    for i in range(10_000):
        blocks.append(alloc.allocate(64 + i % 300))
        if len(blocks) > 50:
            alloc.free(blocks.pop(0))
    for b in blocks:
        alloc.free(b)
    assert alloc.stats.allocated == base
    assert alloc.stats.peak_allocated > base
    assert dev.mallocs <= 2


def test_oom_releases_cache_retries_then_explains():
    dev, alloc = make(capacity=64 << 20)
    cached = alloc.allocate(40 << 20)
    alloc.free(cached)  # cached, still reserved on the device
    block = alloc.allocate(48 << 20)  # fits only after the cache is released
    assert alloc.stats.oom_retries == 1
    with pytest.raises(OutOfMemoryError) as info:
        alloc.allocate(128 << 20)
    text = str(info.value)
    for part in ("128.00 MiB", "free of 64.00 MiB", "live tensors", "cached", "Largest live allocations: 48.00 MiB",
                 "NBX_CUDA_MEMORY_LIMIT"):
        assert part in text
    alloc.free(block)
    assert alloc.allocate(1 << 20) is not None  # the allocator stays usable after the error


def test_limit_is_enforced():
    dev, alloc = make(limit=8 << 20)
    with pytest.raises(OutOfMemoryError, match="limit set for nbxtensor is 8.00 MiB"):
        alloc.allocate(16 << 20)
    assert alloc.allocate(4 << 20).segment.size == 4 << 20


def test_double_free_is_refused():
    _, alloc = make()
    a = alloc.allocate(10)
    alloc.free(a)
    with pytest.raises(RuntimeError, match="freed twice"):
        alloc.free(a)


def test_parse_bytes():
    assert parse_bytes("8GiB") == 8 << 30
    assert parse_bytes("512 MB") == 512_000_000
    assert parse_bytes("1073741824") == 1 << 30
    with pytest.raises(ValueError, match="memory size"):
        parse_bytes("lots")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3 * LARGE_ROUND), st.booleans(), st.integers(0, 1)), max_size=80),
       st.integers(0, 2 ** 31))
def test_random_sequences_keep_blocks_disjoint(ops, seed):
    dev, alloc = make()
    rnd = random.Random(seed)
    live = []
    for size, free_one, stream in ops:
        if free_one and live:
            alloc.free(live.pop(rnd.randrange(len(live))))
        else:
            live.append(alloc.allocate(size, stream=stream))
        spans = sorted((b.ptr, b.ptr + b.size) for b in live)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
        assert alloc.stats.allocated == sum(b.size for b in live)
        for b in live:
            assert b.segment.ptr <= b.ptr and b.ptr + b.size <= b.segment.ptr + b.segment.size
    for b in live:
        alloc.free(b)
    alloc.empty_cache()
    assert dev.used == 0 and alloc.stats.reserved == 0


def test_a_freed_small_block_is_taken_back_whole_then_merged_when_needed():
    """A freed small block waits whole for the next request of its size (no split, no merge); a request
    that finds nothing else merges the waiting blocks back, so no segment is asked for needlessly."""
    dev, alloc = make()
    quarter = SMALL_SEGMENT // 4
    blocks = [alloc.allocate(quarter) for _ in range(4)]  # the whole small segment
    assert len({b.segment.ptr for b in blocks}) == 1 and dev.mallocs == 1
    alloc.free(blocks[2])
    again = alloc.allocate(quarter - 100)  # the same rounded size: the block just freed, as it was
    assert again is blocks[2]
    for block in blocks:
        alloc.free(block)
    assert alloc.stats.allocated == 0
    whole = alloc.allocate(SMALL_LIMIT)  # half the segment at once: the waiting quarters merge first
    assert dev.mallocs == 1 and whole.ptr == blocks[0].segment.ptr
    alloc.free(whole)
    with pytest.raises(RuntimeError, match="freed twice"):
        alloc.free(whole)
    assert alloc.empty_cache() == SMALL_SEGMENT and dev.used == 0


def test_waiting_blocks_are_released_by_empty_cache():
    dev, alloc = make()
    blocks = [alloc.allocate(2048) for _ in range(4)]
    for block in blocks:
        alloc.free(block)
    with pytest.raises(RuntimeError, match="freed twice"):
        alloc.free(blocks[0])  # a waiting block is free: freeing it again is an error
    assert alloc.empty_cache() == SMALL_SEGMENT and dev.used == 0 and alloc.stats.reserved == 0


def test_buffers_free_their_block_when_collected():
    """A buffer frees its block when the last reference goes (parked by size, then handed out again as it
    was, without a device call); the fast path (``parked_buffer``) serves only a size with a parked block;
    a collection during an exception leaves the exception as it was; counters return to the baseline."""
    dev, alloc = make()
    assert alloc.parked_buffer(100, 0) is None  # nothing parked yet
    first = alloc.buffer(100)
    ptr = first.ptr
    assert (first.nbytes, first.pinned, alloc.stats.allocated, alloc.stats.allocations) == (100, False, ROUND, 1)
    del first
    assert alloc.stats.allocated == 0 and alloc.stats.frees == 1
    again = alloc.parked_buffer(200, 0)
    assert again is not None and again.ptr == ptr and again.nbytes == 200 and alloc.stats.allocated == ROUND
    assert alloc.parked_buffer(200, 0) is None and alloc.parked_buffer(200, 7) is None  # none left; other stream
    try:
        raise KeyError("in flight")
    except KeyError as error:
        del again  # collected while an exception is handled
        assert error.args == ("in flight",)
    assert alloc.stats.allocated == 0 and dev.mallocs == 1
    large = alloc.buffer(SMALL_LIMIT + 1)  # large blocks are never parked: released to their pool
    del large
    assert alloc.stats.allocated == 0 and alloc.parked_buffer(SMALL_LIMIT + 1, 0) is None
    assert alloc.empty_cache() == SMALL_SEGMENT + LARGE_ROUND and dev.used == 0
    stats = alloc.stats.as_dict()
    assert stats["allocations"] == 3 and stats["frees"] == 3 and stats["allocated"] == 0
    assert set(stats) == {"allocated", "peak_allocated", "reserved", "peak_reserved", "allocations", "frees",
                          "segments", "cache_flushes", "oom_retries"}


def test_a_buffer_outliving_its_block_does_not_free_it_twice():
    """A buffer whose block was freed by hand (a misuse) frees nothing when collected, and says nothing."""
    _, alloc = make()
    buffer = alloc.buffer(4096)
    alloc.free(buffer._block)
    del buffer
    assert alloc.stats.allocated == 0 and alloc.stats.frees == 1


def test_parked_blocks_per_size_are_bounded():
    """At most a few blocks of one (stream, size) wait parked; the rest go back to their pool."""
    _, alloc = make()
    from nbxtensor.memory.caching import _PARKED_PER_SIZE
    blocks = [alloc.allocate(4096) for _ in range(_PARKED_PER_SIZE + 3)]
    for block in blocks:
        alloc.free(block)
    assert [len(v) for v in alloc._parked.values()] == [_PARKED_PER_SIZE]
    assert sum(len(pool) for pool in alloc._pools.values()) >= 1 and alloc.stats.allocated == 0


def test_absurd_requests_get_clear_errors():
    """A request past 64 bits or past the device goes to the general path, which says what failed; a
    negative one is refused by name."""
    _, alloc = make()
    for nbytes in (1 << 70, 1 << 62):
        with pytest.raises(OutOfMemoryError, match="out of memory asking for"):
            alloc.buffer(nbytes)
    with pytest.raises(ValueError, match="negative number of bytes"):
        alloc.buffer(-5)
    assert alloc.stats.allocated == 0
