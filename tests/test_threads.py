"""Ops from several Python threads at once: every result bit for bit what the same op gives run alone, no
op raising; a capture, a graph's arena, the current stream, the caching allocator and a generator each
kept right per thread."""
import random
import sys
import threading

import numpy as np

import nbxtensor as nbx
from nbxtensor.launch import capture
from nbxtensor.memory import CachingAllocator
from nbxtensor.ops.plans import clear_all

from .conftest import to_nbx
from .test_allocator import FakeDevice

THREADS = 8
ROUNDS = 3  # each thread runs its ops this many times over


def _ops(seed: int) -> list:
    """The ops one thread runs, on its own inputs (the same layouts in every thread, so that threads make
    and look up the same plans)."""
    rng = np.random.default_rng(seed)
    a = to_nbx(rng.standard_normal((3, 4)).astype(np.float32))
    b = to_nbx(rng.standard_normal((3, 4)).astype(np.float32))
    m = to_nbx(rng.standard_normal((4, 5)).astype(np.float32))
    rows = to_nbx(rng.permutation(3).astype(np.int64))
    return [
        ("add", lambda: nbx.add(a, b)),
        ("mul", lambda: a * b),
        ("cumsum", lambda: nbx.cumsum(a, 1)),
        ("sum", lambda: a.sum(0)),
        ("softmax", lambda: nbx.softmax(a, 1)),
        ("matmul", lambda: a @ m),
        ("indexing", lambda: a[rows]),
        ("cat", lambda: nbx.cat([a, b], 0)),
        ("copy to float16", lambda: a.to(nbx.float16)),
        ("sort", lambda: nbx.sort(a, 1)[0]),
    ]


def _bits(t) -> bytes:
    return t.numpy().tobytes()


def test_ops_from_eight_threads_give_the_bits_they_give_alone():
    work = [_ops(seed) for seed in range(THREADS)]
    alone = [[_bits(op()) for _, op in ops] for ops in work]
    clear_all()  # the threads make the plans again, racing for the same layouts
    start = threading.Barrier(THREADS)
    failures = []

    def run(thread: int) -> None:
        start.wait()
        for _ in range(ROUNDS):
            for (name, op), expected in zip(work[thread], alone[thread]):
                try:
                    got = _bits(op())
                except Exception as error:  # noqa: BLE001  (every failure is reported, not the first only)
                    failures.append(f"thread {thread} {name}: raised {error!r}")
                    continue
                if got != expected:
                    failures.append(f"thread {thread} {name}: other bits than run alone")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, f"{len(failures)} of {THREADS * ROUNDS * len(work[0])} ops failed: {failures[:5]}"


def test_a_capture_records_only_its_own_threads_launches():
    """While one thread captures, another thread's launches and host reads run as usual, outside it."""
    a, b = to_nbx(np.ones(4, np.float32)), to_nbx(np.full(4, 2.0, np.float32))
    with capture() as alone:
        a * b
    opened, other_done = threading.Event(), threading.Event()

    def capturing() -> None:
        with capture() as captured:
            opened.set()
            other_done.wait(timeout=60)
            a * b
        results.append(captured)

    results = []
    thread = threading.Thread(target=capturing)
    thread.start()
    try:
        assert opened.wait(timeout=60)
        with capture():  # this thread has no capture open: it may open its own
            pass
        other = (a + b).numpy()
    finally:
        other_done.set()
        thread.join()
    captured, = results
    assert captured.refused is None
    assert len(captured.launches) == len(alone.launches)
    np.testing.assert_array_equal(other, [3.0] * 4)


def _stream_backend(monkeypatch):
    """The CUDA backend, or without a GPU one made with only the per-thread state its streams live in."""
    import nbxtensor.cuda
    from nbxtensor.device.cuda import CudaBackend
    if nbx.cuda.is_available():
        return nbx.cuda._backend()
    backend = CudaBackend.__new__(CudaBackend)
    backend._local = threading.local()
    monkeypatch.setattr(nbxtensor.cuda, "_backend", lambda: backend)
    return backend


def test_the_current_stream_is_per_thread(monkeypatch):
    _stream_backend(monkeypatch)
    mine, theirs = nbx.cuda.Stream(0, _handle=0x1000), nbx.cuda.Stream(0, _handle=0x2000)
    seen = {}

    def other_thread() -> None:
        seen["before"] = nbx.cuda.current_stream(0).cuda_stream
        with nbx.cuda.stream(theirs):
            seen["inside"] = nbx.cuda.current_stream(0).cuda_stream
            entered.set()
            leave.wait()

    entered, leave = threading.Event(), threading.Event()
    with nbx.cuda.stream(mine):
        thread = threading.Thread(target=other_thread)
        thread.start()
        entered.wait()
        assert nbx.cuda.current_stream(0) == mine  # the other thread's stream is its own
        leave.set()
        thread.join()
        assert nbx.cuda.current_stream(0) == mine
    assert seen == {"before": 0, "inside": theirs.cuda_stream}  # a new thread starts on the default stream
    assert nbx.cuda.current_stream(0) == nbx.cuda.default_stream(0)


def _allocate_from_threads(allocator, live: dict, lock, seed: int, problems: list) -> None:
    """Allocate and free large blocks (the allocator's Python path) at random, checking that no block
    handed out overlaps another live one."""
    rng = random.Random(seed)
    held = []
    try:
        for _ in range(1000):
            if held and rng.random() < 0.5:
                block = held.pop(rng.randrange(len(held)))
                with lock:
                    del live[block.ptr]
                allocator.free(block)
                continue
            nbytes = rng.choice([1100 << 10, 1500 << 10, 2 << 20, 3 << 20, 5 << 20])
            block = allocator.allocate(nbytes)
            with lock:
                if any(ptr < block.ptr + nbytes and block.ptr < ptr + size for ptr, size in live.items()):
                    problems.append(f"a block of {nbytes} bytes overlaps a live one")
                live[block.ptr] = nbytes
            held.append(block)
        for block in held:
            with lock:
                del live[block.ptr]
            allocator.free(block)
    except Exception as error:  # noqa: BLE001  (the test reports what went wrong in the thread)
        problems.append(repr(error))


def test_the_caching_allocator_hands_out_each_block_once_under_threads():
    """Over a fake device: blocks allocated and freed from eight threads never overlap, and once all are
    freed the allocator counts none live and gives every segment back."""
    lock = threading.Lock()
    device = FakeDevice(1 << 40)

    def raw_alloc(n):
        with lock:
            return device.alloc(n)

    def raw_free(ptr):
        with lock:
            device.free(ptr)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns often, inside the allocator's bookkeeping
    try:
        for attempt in range(12):
            allocator = CachingAllocator(raw_alloc, raw_free, device.info, name="fake")
            live, problems = {}, []
            threads = [threading.Thread(target=_allocate_from_threads, args=(allocator, live, lock, attempt * 8 + i,
                                                                               problems)) for i in range(THREADS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert not problems, problems[:3]
            assert allocator.stats.allocated == 0
            allocator.empty_cache()
            assert allocator.stats.reserved == 0 and device.used == 0
    finally:
        sys.setswitchinterval(interval)



def test_threads_drawing_from_one_generator_each_take_their_own_counters():
    """Every draw advances the generator's offset past the counters it takes, so no two threads' draws
    share random numbers: the offset ends at the sum of all the draws."""
    generator = nbx.Generator()
    draws, words = 20000, 4
    start = threading.Barrier(THREADS)
    counters = [[] for _ in range(THREADS)]

    def draw(thread: int) -> None:
        start.wait()
        for _ in range(draws):
            counters[thread].append(generator._take(words)[1])

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=draw, args=(i,)) for i in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    taken = [c for per_thread in counters for c in per_thread]
    assert len(set(taken)) == len(taken) == THREADS * draws
    assert generator.get_offset() == THREADS * draws * words


def test_a_graph_arena_serves_only_its_own_threads_allocations():
    """While one thread runs on an arena, another thread's op output of the very size the arena expects
    comes from the allocator, and that thread may run on an arena of its own."""
    from types import SimpleNamespace

    from nbxtensor.graph.arena import ArenaRun
    a, b = to_nbx(np.ones(4, np.float32)), to_nbx(np.full(4, 2.0, np.float32))
    planned = (a.dtype, 16, 0, 16)  # (dtype, bytes, offset, room) of a step output of four float32
    opened, other_done = threading.Event(), threading.Event()
    runs = []

    def running() -> None:
        try:
            with ArenaRun(SimpleNamespace(arena_bytes=64), a.device) as run:
                run.expect("add", [planned], ArenaRun.workspace_region(None))
                runs.append((run, run.storage))  # the run lets go of its storage when it ends
                opened.set()
                other_done.wait(timeout=60)
                runs.append(nbx.add(a, b))
        finally:
            opened.set()  # a failure in this thread shows in the checks below instead of a minute's wait

    thread = threading.Thread(target=running)
    thread.start()
    try:
        assert opened.wait(timeout=60)
        other = nbx.add(a, b)
        with ArenaRun(SimpleNamespace(arena_bytes=64), a.device):
            pass
    finally:
        other_done.set()
        thread.join()
    (run, storage), own = runs
    assert other._storage is not storage and own._storage is storage and run.served == 1
    np.testing.assert_array_equal(other.numpy(), [3.0] * 4)


def test_another_threads_plan_making_leaves_a_run_on_its_arena():
    """A thread making a plan (``outside_arena``) while another runs a graph: the run's step outputs still
    land in its arena."""
    from types import SimpleNamespace

    from nbxtensor.graph.arena import ArenaRun
    from nbxtensor.allocation import outside_arena
    a, b = to_nbx(np.ones(4, np.float32)), to_nbx(np.full(4, 2.0, np.float32))
    inside, done = threading.Event(), threading.Event()

    def planning() -> None:
        with outside_arena():
            inside.set()
            done.wait(timeout=60)

    thread = threading.Thread(target=planning)
    with ArenaRun(SimpleNamespace(arena_bytes=64), a.device) as run:
        run.expect("add", [(a.dtype, 16, 0, 16)], ArenaRun.workspace_region(None))
        thread.start()
        try:
            assert inside.wait(timeout=60)
            out = nbx.add(a, b)
            storage = run.storage
        finally:
            done.set()
            thread.join()
    assert out._storage is storage and run.served == 1
    np.testing.assert_array_equal(out.numpy(), [3.0] * 4)
