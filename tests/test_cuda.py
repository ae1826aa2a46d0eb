"""CUDA-only behaviour: memory statistics, out-of-memory, streams, events and pinned memory.
These run when the suite's device is cuda (NBX_TEST_DEVICE=cuda on a GPU machine)."""
import gc

import numpy as np
import pytest

import nbxtensor as nbx

from .conftest import TEST_DEVICE

pytestmark = pytest.mark.skipif(TEST_DEVICE != "cuda" or not nbx.cuda.is_available(),
                                reason="needs NBX_TEST_DEVICE=cuda on a CUDA machine")


def test_allocated_bytes_return_to_baseline_after_many_small_ops():
    gc.collect()  # tensors of earlier tests held in reference cycles would be freed mid-loop
    nbx.cuda.synchronize()
    base = nbx.cuda.memory_allocated()
    x = nbx.ones(64, device="cuda")
    for _ in range(10_000):
        y = x.clone()
        y.fill_(2.0)
    del x, y
    gc.collect()
    assert nbx.cuda.memory_allocated() == base
    assert nbx.cuda.memory_stats()["segments"] >= 1


def test_out_of_memory_explains_and_the_process_stays_usable():
    free, total = nbx.cuda.mem_get_info()
    with pytest.raises(nbx.OutOfMemoryError) as info:
        nbx.empty(2 * total, dtype=nbx.uint8, device="cuda")
    text = str(info.value)
    assert "out of memory asking for" in text and "free of" in text and "To fit" in text
    after = nbx.ones(1024, device="cuda")
    assert after.numpy().sum() == 1024


def test_memory_limit_from_api():
    nbx.cuda.set_memory_limit(nbx.cuda.memory_reserved() + (64 << 20))
    try:
        with pytest.raises(nbx.OutOfMemoryError, match="limit set for nbxtensor"):
            nbx.empty(1 << 30, dtype=nbx.uint8, device="cuda")
    finally:
        nbx.cuda.set_memory_limit(None)


def test_peak_statistics():
    nbx.cuda.reset_peak_memory_stats()
    base = nbx.cuda.max_memory_allocated()
    x = nbx.empty(8 << 20, dtype=nbx.uint8, device="cuda")
    assert nbx.cuda.max_memory_allocated() >= base + (8 << 20)
    del x
    nbx.cuda.empty_cache()
    assert nbx.cuda.memory_reserved() >= nbx.cuda.memory_allocated()


def test_work_on_a_side_stream_and_events():
    s = nbx.cuda.Stream()
    start, end = nbx.cuda.Event(enable_timing=True), nbx.cuda.Event(enable_timing=True)
    with nbx.cuda.stream(s):
        assert nbx.cuda.current_stream() == s
        start.record()
        x = nbx.full((1 << 20,), 3.0, device="cuda")
        end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 0
    s.synchronize()
    assert float(x.numpy()[-1]) == 3.0
    assert nbx.cuda.current_stream() == nbx.cuda.default_stream()


def test_pinned_round_trip():
    host = nbx.empty(1 << 16, dtype=nbx.float32, device="cpu", pin_memory=True)
    assert host.is_pinned()
    host.numpy()[:] = np.arange(1 << 16, dtype=np.float32)
    dev = host.to("cuda")
    back = dev.to("cpu")
    assert np.array_equal(back.numpy(), np.arange(1 << 16, dtype=np.float32))
    assert nbx.from_numpy(np.ones(4, np.float32)).pin_memory().is_pinned()


def test_large_uploads_from_pageable_memory_are_staged_and_exact(tmp_path):
    """Uploads above the staging threshold go through the pinned buffers in turn: an array spanning
    several stages, a safetensors file loaded to the GPU, both byte for byte."""
    from nbxtensor.device import cuda as cuda_device
    n = 2 * cuda_device.STAGE_BYTES + 12345
    host = np.random.default_rng(0).integers(0, 256, n, dtype=np.uint8)
    assert np.array_equal(nbx.from_numpy(host).to("cuda").numpy(), host)
    weights = {"w": nbx.from_numpy(np.random.default_rng(1).standard_normal((1024, 9000)).astype(np.float32))}
    nbx.io.save_file(weights, tmp_path / "w.safetensors")
    loaded = nbx.io.load_file(tmp_path / "w.safetensors", device="cuda")
    assert loaded["w"].device.type == "cuda"
    assert np.array_equal(loaded["w"].numpy(), weights["w"].numpy())



def test_the_triton_drivers_benchmark_buffer_is_cleared_on_the_current_stream():
    """Triton's timing loop flushes the L2 cache by clearing a 256 MiB buffer the driver gives it; ours is
    device memory from the allocator, zeroed by a memset queued on the current stream."""
    import triton

    from nbxtensor.device import backend_for

    driver = triton.runtime.driver.active
    cache = driver.get_empty_cache_for_benchmark()
    assert cache.nbytes == 256 * 2 ** 20
    probe = nbx.ones(1024, dtype=nbx.int32, device="cuda")
    backend = backend_for(probe.device)
    backend.copy_raw(cache.ptr, probe.data_ptr(), probe.nbytes, probe.device.index, "d2d")
    driver.clear_cache(cache)
    nbx.cuda.synchronize()
    assert not backend.download(cache.ptr, probe.nbytes, probe.device.index).any()
