"""Uploads from pageable host memory staged through pinned buffers in turn (``device.cuda.staged_copy``),
checked on the host with a copy engine that runs late: each queued copy happens only when its stage is
waited for or at the end, so refilling a stage before its copy ran would corrupt the result."""
import ctypes

import numpy as np
import pytest

from nbxtensor.device.cuda import staged_copy


class LateCopyEngine:
    """Queued copies run only when waited for (or at ``finish``), as late as a real engine may run them."""

    def __init__(self):
        self.queued = []  # (slot, dst, src, size, bytes the source held when queued)
        self.waits = 0

    def copy_async(self, dst, src, size):
        self.queued.append([None, dst, src, size, ctypes.string_at(src, size)])

    def record(self, slot):
        self.queued[-1][0] = slot

    def wait(self, slot):
        self.waits += 1
        self._run(lambda queued_slot: queued_slot == slot)

    def finish(self):
        self._run(lambda queued_slot: True)

    def _run(self, chosen):
        for copy in [c for c in self.queued if chosen(c[0])]:
            slot, dst, src, size, held = copy
            assert ctypes.string_at(src, size) == held, "a stage was refilled before its copy ran"
            ctypes.memmove(dst, src, size)
            self.queued.remove(copy)


@pytest.mark.parametrize("nbytes", [1, 4096, 4097, 3 * 4096 + 5, 10 * 4096])
def test_staged_copy_moves_every_byte_and_never_refills_a_busy_stage(nbytes):
    source = np.random.default_rng(nbytes).integers(0, 256, nbytes, dtype=np.uint8)
    destination = np.zeros(nbytes, np.uint8)
    stages = [np.zeros(4096, np.uint8) for _ in range(2)]
    engine = LateCopyEngine()
    staged_copy(destination.ctypes.data, source.ctypes.data, nbytes, [s.ctypes.data for s in stages], 4096,
                engine.copy_async, engine.record, engine.wait)
    engine.finish()
    np.testing.assert_array_equal(destination, source)
    assert engine.waits == max(0, -(-nbytes // 4096) - 2)  # a stage is waited for only before its reuse
