"""Device timing for benchmarks: CUDA events through cuda-bindings, median of repeated batches."""
from __future__ import annotations

import statistics
import time


def _rt():
    from cuda.bindings import runtime
    return runtime


def gpu_time_ms(fn, *, warmup: int = 3, reps: int = 20, batches: int = 5) -> float:
    """Median over ``batches`` of the mean device time of ``reps`` calls of ``fn``."""
    rt = _rt()
    for _ in range(warmup):
        fn()
    rt.cudaDeviceSynchronize()
    _, start = rt.cudaEventCreate()
    _, stop = rt.cudaEventCreate()
    times = []
    for _ in range(batches):
        rt.cudaEventRecord(start, 0)
        for _ in range(reps):
            fn()
        rt.cudaEventRecord(stop, 0)
        rt.cudaEventSynchronize(stop)
        _, ms = rt.cudaEventElapsedTime(start, stop)
        times.append(ms / reps)
    rt.cudaEventDestroy(start)
    rt.cudaEventDestroy(stop)
    return statistics.median(times)


def host_time_us(fn, *, reps: int = 2000) -> float:
    """Mean host wall time of one call, in microseconds, after a warm-up."""
    for _ in range(50):
        fn()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps * 1e6
