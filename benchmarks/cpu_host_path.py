"""Host time of one call of small ops, on any machine: our Python before the launch, with every kernel
launch stubbed out (the CPU backend is told it compiles kernels, and each "compiled" kernel's run does
nothing; new tensors come from a caching allocator as on a GPU), so no kernel runs and only host work is
timed. Not a GPU figure: a GPU host adds Triton's C launcher and the driver's launch (about 7 us a
launch), so the launches a call makes are counted beside its time.

    python3 benchmarks/cpu_host_path.py [--facts hopper]

``--facts`` plans every op as on a device of that class (its facts, its largest multiprocessor count), so
the launches counted are that device's; by default the CPU's facts plan them.
"""
from __future__ import annotations

import argparse
import statistics
import time
from types import SimpleNamespace

import numpy as np

import nbxtensor as nbx
from nbxtensor import launch as launch_module
from nbxtensor.device import backend_for
from nbxtensor.device import facts as facts_files
from nbxtensor.memory import CachingAllocator


class _StubLauncher:
    """Triton's launcher as the launch path sees it: its C function, which only counts launches here."""
    global_scratch_size = profile_scratch_size = 0
    launch_cooperative_grid = launch_pdl = 0
    count = 0

    @staticmethod
    def launch(*args):
        _StubLauncher.count += 1

    def __call__(self, *args):
        _StubLauncher.count += 1


class _StubKernel:
    function = None
    packed_metadata = None
    run = _StubLauncher()


class _EverythingCompiled(dict):
    def get(self, key, default=None):
        return (_StubKernel, [], launch_module._direct_launcher(_StubKernel))


def stub_launches(facts: str | None = None) -> None:
    """Launches do nothing, and new tensors come from a caching allocator, as on a GPU; ``facts``: the
    device class whose facts plan the ops (None: the CPU's)."""
    backend = backend_for(nbx.device("cpu"))
    type(backend).compiles_kernels = property(lambda self: True)
    if facts is not None:
        chosen = facts_files.load(facts)
        type(backend).facts = property(lambda self: chosen)
        backend.properties = lambda index: SimpleNamespace(multiProcessorCount=chosen["multiprocessors_max"])
    backend.current_stream_handle = lambda index=None: 0
    backend.bind_launch = lambda compiled, grid, values, positions: _StubLauncher.launch
    launch_module._compiled = _EverythingCompiled()
    segments = []  # host memory behind the cache (some ops read a count back from a launch's output)

    def segment(nbytes):
        segments.append(np.zeros(nbytes + 256, np.uint8))
        return segments[-1].ctypes.data + (-segments[-1].ctypes.data) % 256

    cache = CachingAllocator(segment, lambda ptr: None, lambda: (1 << 40, 1 << 40))
    backend.allocate = lambda nbytes, index=None, pinned=False: cache.buffer(nbytes)
    backend.parked_buffers = lambda index: cache.parked_buffer


def host_us(fn, calls: int = 200, repeats: int = 7) -> float:
    for _ in range(50):
        fn()
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        runs.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(runs)


def launches_per_call(fn) -> int:
    """Kernel launches one call of ``fn`` makes (after its plans are made)."""
    fn()
    before = _StubLauncher.count
    fn()
    return _StubLauncher.count - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", help="plan as on a device of this class (a facts file's name, e.g. hopper)")
    stub_launches(parser.parse_args().facts)
    rng = np.random.default_rng(0)
    a = nbx.tensor(rng.standard_normal(16).astype(np.float32))
    b = nbx.tensor(rng.standard_normal(16).astype(np.float32))
    rows = nbx.tensor(rng.standard_normal((64, 256)).astype(np.float32))
    logits = nbx.tensor(rng.standard_normal((64, 152064)).astype(np.float32))
    features = nbx.tensor(rng.standard_normal((8, 64, 14, 14)).astype(np.float32))
    F = nbx.nn.functional
    weight = nbx.tensor(rng.standard_normal(256).astype(np.float32))
    q = nbx.tensor(rng.standard_normal((1, 8, 1, 64)).astype(np.float32))
    kv = nbx.tensor(rng.standard_normal((1, 8, 128, 64)).astype(np.float32))
    w = nbx.tensor(rng.standard_normal((256, 256)).astype(np.float32))
    image = nbx.tensor(rng.standard_normal((1, 64, 14, 14)).astype(np.float32)).to(nbx.bfloat16)
    conv3 = nbx.tensor(rng.standard_normal((64, 64, 3, 3)).astype(np.float32)).to(nbx.bfloat16)
    conv1 = nbx.tensor(rng.standard_normal((32, 64, 1, 1)).astype(np.float32)).to(nbx.bfloat16)
    cases = [
        ("fill_ (16 floats)", lambda: a.fill_(1.0)),
        ("copy_ (16 floats)", lambda: a.copy_(b)),
        ("clone (16 floats)", lambda: a.clone()),
        ("empty (1 MiB) + free", lambda: nbx.empty(262144)),
        ("a + b (16 floats)", lambda: a + b),
        ("a * 2.0 (16 floats)", lambda: a * 2.0),
        ("linear 64 x 256 -> 256", lambda: F.linear(rows, w)),
        ("conv2d 3x3 [1,64,14,14]", lambda: F.conv2d(image, conv3, padding=1)),
        ("conv2d 1x1 [1,64,14,14]", lambda: F.conv2d(image, conv1)),
        ("rms_norm 64 x 256", lambda: F.rms_norm(rows, (256,), weight)),
        ("sdpa decode 8 heads x 128 keys", lambda: F.scaled_dot_product_attention(q, kv, kv)),
        ("row sum 64 x 256", lambda: rows.sum(dim=-1)),
        ("x.sum(-1) 64 x 256", lambda: rows.sum(-1)),
        ("nbx.sum(x, -1) 64 x 256", lambda: nbx.sum(rows, -1)),
        ("mean (2, 3) [8,64,14,14]", lambda: features.mean((2, 3))),
        ("argmax 64 x 152064", lambda: logits.argmax(-1)),
        ("softmax 64 x 256", lambda: nbx.softmax(rows, -1)),
        ("x.softmax(-1) 64 x 256", lambda: rows.softmax(-1)),
        ("F.softmax(x, -1) 64 x 256", lambda: F.softmax(rows, -1)),
        ("softmax 64 x 152064", lambda: nbx.softmax(logits, -1)),
        ("cumsum 64 x 152064", lambda: nbx.cumsum(logits, -1)),
        ("sort 64 x 256", lambda: nbx.sort(rows)),
        ("topk k=5 of 64 x 256", lambda: nbx.topk(rows, 5)),
        ("topk k=50 of 64 x 152064", lambda: nbx.topk(logits, 50)),
    ]
    print(f"{'one call of':32s} {'host us':>8s} {'launches':>8s}")
    for name, fn in cases:
        try:
            print(f"{name:32s} {host_us(fn):8.1f} {launches_per_call(fn):8d}")
        except RuntimeError as e:  # under other facts: an op that tunes by timing, which nothing here runs
            print(f"{name:32s} {'-':>8s} {'-':>8s}  ({str(e)[:60]})")


if __name__ == "__main__":
    main()
