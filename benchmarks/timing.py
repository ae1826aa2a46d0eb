"""Device timing for benchmarks: CUDA events through cuda-bindings, median of repeated batches."""
from __future__ import annotations

import os
import statistics
import time


def _rt():
    from cuda.bindings import runtime
    return runtime


class _EventBatches:
    """Device time of batches of calls, through one pair of CUDA events on the legacy default stream."""

    def __init__(self):
        self.rt = _rt()
        self.rt.cudaDeviceSynchronize()
        _, self.start = self.rt.cudaEventCreate()
        _, self.stop = self.rt.cudaEventCreate()

    def mean_ms(self, fn, reps: int) -> float:
        """Mean device time of one of ``reps`` calls of ``fn`` made back to back."""
        self.rt.cudaEventRecord(self.start, 0)
        for _ in range(reps):
            fn()
        self.rt.cudaEventRecord(self.stop, 0)
        self.rt.cudaEventSynchronize(self.stop)
        return self.rt.cudaEventElapsedTime(self.start, self.stop)[1] / reps

    def close(self) -> None:
        self.rt.cudaEventDestroy(self.start)
        self.rt.cudaEventDestroy(self.stop)


class _FlushedCalls:
    """Device time of single calls, each timed alone after ``flush()`` (outside the timed span) has
    overwritten the L2 cache, so that operands come from device memory as a model's step reads its
    weights: one pair of CUDA events per call, made once for up to ``reps`` calls."""

    def __init__(self, flush, reps: int):
        self.rt = _rt()
        self.flush = flush
        self.rt.cudaDeviceSynchronize()
        self.pairs = [(self.rt.cudaEventCreate()[1], self.rt.cudaEventCreate()[1]) for _ in range(reps)]

    def mean_ms(self, fn, reps: int) -> float:
        """Mean device time of ``reps`` calls of ``fn``, each after a flush."""
        for start, stop in self.pairs[:reps]:
            self.flush()
            self.rt.cudaEventRecord(start, 0)
            fn()
            self.rt.cudaEventRecord(stop, 0)
        self.rt.cudaEventSynchronize(self.pairs[reps - 1][1])
        return sum(self.rt.cudaEventElapsedTime(start, stop)[1] for start, stop in self.pairs[:reps]) / reps

    def close(self) -> None:
        for start, stop in self.pairs:
            self.rt.cudaEventDestroy(start)
            self.rt.cudaEventDestroy(stop)


def _alternating(measure, ours, theirs, rounds: int) -> tuple[float, float]:
    """Medians over ``rounds`` of ``measure(ours)`` and ``measure(theirs)``, taken in turn, each first in
    turn, so that both meet the same moments of the machine."""
    mine, other = [], []
    for r in range(rounds):
        if r % 2:
            other.append(measure(theirs))
            mine.append(measure(ours))
        else:
            mine.append(measure(ours))
            other.append(measure(theirs))
    return statistics.median(mine), statistics.median(other)


def gpu_time_ms(fn, *, warmup: int = 3, reps: int = 20, batches: int = 5) -> float:
    """Median over ``batches`` of the mean device time of ``reps`` calls of ``fn``."""
    for _ in range(warmup):
        fn()
    events = _EventBatches()
    times = [events.mean_ms(fn, reps) for _ in range(batches)]
    events.close()
    return statistics.median(times)


def gpu_pair_ms(ours, theirs, *, warmup: int = 3, reps: int = 10, rounds: int = 10,
                flush=None) -> tuple[float, float]:
    """``gpu_time_ms`` of two functions measured in alternation, batch by batch (each first in turn), so
    that a drift of the device's clocks over the run (heat, power) meets both alike: medians over
    ``rounds``. ``flush``: a callable that overwrites the L2 cache; given, every call is timed alone after
    it (operands read from device memory, not from a cache the previous call warmed)."""
    for _ in range(warmup):
        ours()
        theirs()
    events = _EventBatches() if flush is None else _FlushedCalls(flush, reps)
    result = _alternating(lambda fn: events.mean_ms(fn, reps), ours, theirs, rounds)
    events.close()
    return result


def _per_call_us(fn, reps: int) -> float:
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps * 1e6


def host_time_us(fn, *, reps: int = 200, batches: int = 11) -> float:
    """Host wall time of one call, in microseconds: the median over ``batches`` of the mean of ``reps``
    calls, after a warm-up (a median, since a host's pace drifts and a collection or an interrupt lands
    in some batches)."""
    for _ in range(50):
        fn()
    return statistics.median(_per_call_us(fn, reps) for _ in range(batches))


def host_pair_us(ours, theirs, *, reps: int = 200, rounds: int = 21) -> tuple[float, float]:
    """``host_time_us`` of two functions measured in alternation, batch by batch (each first in turn), so
    that both meet the same moments of the host: medians over ``rounds``."""
    for _ in range(50):
        ours()
        theirs()
    return _alternating(lambda fn: _per_call_us(fn, reps), ours, theirs, rounds)


def print_checks(checks, detail: str = "") -> None:
    """A benchmark's correctness checks under a heading, one line each: ok or FAIL and the check's name, then
    a check's third field, where it has one, in the format ``detail`` (e.g. "max |diff| {:.3g}")."""
    print("\nchecks:")
    for name, ok, *extra in checks:
        print(f"  {'ok  ' if ok else 'FAIL'} {name}" + (f" ({detail.format(*extra)})" if extra else ""))


def print_tuned(prefixes: tuple) -> None:
    """The setting each tuned launch key starting with one of ``prefixes`` took (which candidates won: split
    K, pipelined K loops, swapped tiles), with its timed cost."""
    import nbxtensor as nbx
    for key, entry in sorted(nbx.tuning.entries().items()):
        if key.startswith(prefixes) and entry.get("config"):
            ms = entry.get("ms")
            print(f"{key}: {entry['config']}" + (f" ({ms * 1e3:.1f} us)" if ms is not None else ""), flush=True)


def kernel_table(title, work):
    """Print where the GPU time of one call of ``work`` goes, by kernel (CUPTI, through torch's profiler,
    sees our Triton launches and torch's alike). NBX_BENCH_KERNEL_TABLES=0 skips them: a process that never
    opens a profiler session tells whether an abort at exit is the profiler's."""
    if os.environ.get("NBX_BENCH_KERNEL_TABLES") == "0":
        print(f"\n== {title}: kernel table skipped (NBX_BENCH_KERNEL_TABLES=0)")
        return
    import torch
    work()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profile:
        work()
        torch.cuda.synchronize()
    print(f"\n== {title}: GPU time by kernel")
    print(profile.key_averages().table(sort_by="cuda_time_total", row_limit=14, max_name_column_width=60))


def graph_times_ms(ours, theirs) -> tuple[float, float]:
    """Device time of one call of ``ours`` and of ``theirs`` (a torch call), each recorded into a CUDA
    graph and replayed, so that neither side's host path paces the measurement (decode steps are that
    short). NaN when our call cannot be captured."""
    import torch

    from nbxtensor.launch import capture
    ours()  # a first call tunes and compiles outside the capture, which would otherwise keep the timed trials
    with capture() as recorded:
        ours()
    if recorded.refused is not None:
        print(f"graph timing: our call cannot be replayed: it {recorded.refused}")
        return float("nan"), float("nan")
    recorded.record_device_graph()
    torch_graph = torch.cuda.CUDAGraph()
    theirs()
    torch.cuda.synchronize()
    with torch.cuda.graph(torch_graph):
        theirs()
    return gpu_pair_ms(recorded.replay, torch_graph.replay)

