"""Device time of a callable on a CUDA GPU, through cuda-bindings events (never torch)."""
from __future__ import annotations

import statistics


def device_time_ms(fn, *, warmup: int = 2, reps: int = 10, batches: int = 3) -> float:
    """Median over ``batches`` of the mean device time of ``reps`` calls of ``fn``, timed with events
    on the current stream (where ``fn`` launches its work)."""
    from .. import cuda
    for _ in range(warmup):
        fn()
    start = cuda.Event(enable_timing=True)
    stop = cuda.Event(enable_timing=True)
    times = []
    for _ in range(batches):
        start.record()
        for _ in range(reps):
            fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / reps)
    return statistics.median(times)
