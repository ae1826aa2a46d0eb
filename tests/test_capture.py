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
