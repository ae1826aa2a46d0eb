"""Device time of a callable on a CUDA GPU, through cuda-bindings events (never torch)."""
from __future__ import annotations

import statistics
from .. import cuda
from ..allocation import new_tensor, outside_arena
from ..device import resolve
from ..dtypes import get_dtype

# the L2 cache size assumed where a device's facts give none: larger than any current GPU's
DEFAULT_L2_BYTES = 128 * 2 ** 20


def device_time_ms(fn, *, warmup: int = 2, reps: int = 10, batches: int = 3, flush_bytes: int = 0) -> float:
    """Median over ``batches`` of the mean device time of ``reps`` calls of ``fn``, timed with events
    on the current stream (where ``fn`` launches its work). ``flush_bytes`` > 0: each call is timed alone,
    after ``flush_bytes`` of memory are overwritten outside the timed span, so that it reads its operands
    from device memory as a model's step does (a weight read once a step), not from a warm L2 cache."""
    for _ in range(warmup):
        fn()
    flush = _flush_buffer(flush_bytes) if flush_bytes else None
    times = []
    for _ in range(batches):
        if flush is None:
            start, stop = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
            start.record()
            for _ in range(reps):
                fn()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) / reps)
            continue
        spans = [(cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)) for _ in range(reps)]
        for start, stop in spans:
            flush.zero_()
            start.record()
            fn()
            stop.record()
        spans[-1][1].synchronize()
        times.append(sum(start.elapsed_time(stop) for start, stop in spans) / reps)
    return statistics.median(times)


def _flush_buffer(nbytes: int):
    """Scratch of ``nbytes`` on the current device, made outside any graph arena (its memory goes back to
    the allocator's cache when the timing ends)."""
    with outside_arena():
        return new_tensor((nbytes,), get_dtype("uint8"), resolve("cuda"))
