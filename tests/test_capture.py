"""Capturing launches and replaying them: a replay repeats the kernels on the same tensors, and work a
replay could not repeat marks the capture refused, naming why."""
import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.launch import capture

from .conftest import TEST_DEVICE, to_nbx


def test_a_replay_repeats_the_launches_on_the_same_tensors():
    a, b = to_nbx(np.ones(4, np.float32)), to_nbx(np.full(4, 2.0, np.float32))
    with capture() as captured:
        out = (a * b + 1).sum()
    assert captured.refused is None and len(captured.launches) == 3
    a.fill_(3.0)
    captured.replay()
    assert out.item() == 4 * 7.0


@pytest.mark.parametrize("work, reason", [
    (lambda x: x.sum().item(), "reads tensor data on the host"),
    (lambda x: x.numpy(), "reads tensor data on the host"),
    (lambda x: nbx.randn(3, device=TEST_DEVICE), "draws random numbers"),
    (lambda x: nbx.tensor([1.0, 2.0], device=TEST_DEVICE), "uploads host data"),
])
def test_work_a_replay_would_not_repeat_refuses_the_capture(work, reason):
    x = to_nbx(np.arange(4, dtype=np.float32))
    with capture() as captured:
        work(x)
    assert reason in captured.refused
    with pytest.raises(RuntimeError, match="cannot be replayed: it " + reason):
        captured.replay()


def test_captures_do_not_nest():
    with capture():
        with pytest.raises(RuntimeError, match="do not nest"):
            with capture():
                pass


def test_an_index_out_of_range_in_a_replay_is_still_reported():
    """Index checks need no host read during the capture; each replay checks again."""
    table = to_nbx(np.arange(12, dtype=np.float32).reshape(6, 2))
    indices = to_nbx(np.array([0, 5, 2], np.int64))
    with capture() as captured:
        out = nbx.embedding(table, indices)
    assert captured.refused is None
    np.testing.assert_array_equal(out.numpy(), [[0, 1], [10, 11], [4, 5]])
    indices.fill_(9)
    with pytest.raises(IndexError, match="embedding: index out of range"):
        captured.replay()
        out.numpy()


def test_launch_scratch_is_one_buffer_a_stream_and_a_recording_keeps_its_own():
    """Kernels asking for global scratch at launch share one buffer a stream (grown when a launch needs
    more); a reserved buffer serves a stream without allocating, and once detached a stream gets a new one."""
    from nbxtensor.launch import _LaunchScratch
    scratch = _LaunchScratch()
    dev = nbx.device("cpu")
    scratch.device = dev
    first = scratch(256, 128, 5).data_ptr()
    assert first % 128 == 0 and scratch(200, 128, 5).data_ptr() == first
    assert scratch(256, 128, 6).data_ptr() != first  # another stream, another buffer
    grown = scratch(4096, 128, 5).data_ptr()
    assert grown % 128 == 0
    reserved = scratch.reserve(dev, 9, 1024, 256)
    assert scratch(1000, 256, 9).data_ptr() == reserved[0]
    assert scratch.detach(dev, 9) is reserved and scratch(1000, 256, 9).data_ptr() != reserved[0]


def test_a_device_graph_recording_reserves_the_scratch_its_launches_ask_for(monkeypatch):
    """Recording cannot allocate: the capture works out the most global scratch its launches ask for
    (programs x bytes a program, from the compiled kernels), reserves it on the recording stream before
    recording starts, and keeps it with the recording."""
    import nbxtensor.launch as L
    from types import SimpleNamespace

    x = nbx.tensor(np.ones(8, np.float32), device="cpu")  # no kernel runs: a CPU tensor in any process
    compiled = SimpleNamespace(metadata=SimpleNamespace(global_scratch_size=128, global_scratch_align=128,
                                                        num_ctas=1))

    class Kernel:
        pass
    kernel = Kernel()
    recorded = L.Capture()
    recorded.launches = [(kernel, (4, 2), x.device, [x, 3], {}, ()), (kernel, (1,), x.device, [x, 3], {}, ())]
    monkeypatch.setattr(L, "_compiled", {(kernel, None, (), L._specialised([x, 3])[0]): (compiled, [], None)})
    seen = {}

    def record_graph(issue, index, prepare=None):
        prepare(41)
        seen["served"] = L._scratch.reserve(x.device, 41, 4 * 2 * 128, 128)
        return "graph"
    backend = L.backend_for(x.device)
    monkeypatch.setattr(backend, "record_graph", record_graph, raising=False)
    assert recorded.record_device_graph() is None and recorded.device_graph == "graph"
    assert recorded.scratch == [seen["served"]] and seen["served"][1] >= 4 * 2 * 128
    assert L._scratch.detach(x.device, 41) is None  # the recording holds it; stream 41's next use allocates
