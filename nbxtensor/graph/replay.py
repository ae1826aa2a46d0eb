"""Replay of a graph's launches.

The first call for a set of input layouts runs the graph normally on private copies of the inputs
while every launch is captured (``launch.capture``); the capture holds the tensors it launched on, so
every intermediate keeps its address. The next call records the launches into a device graph where the
device has them (a CUDA graph: one launch replays them all), copies its inputs into those private
buffers and replays, skipping the ops' Python; its outputs are checked byte for byte against the normal
path once, before any replay is trusted. A run that cannot be replayed (it reads
data on the host, draws random numbers, uploads host data, or the first replay differed) takes the
normal path from then on, for those layouts, and the reason is logged once.
"""
from __future__ import annotations

import logging

import numpy as np

from ..launch import Capture, capture
from ..tensor import Tensor

log = logging.getLogger("nbxtensor.graph")
_MAX_CAPTURES = 8  # layouts kept per graph; past that, the oldest capture is dropped


class _Captured:
    __slots__ = ("inputs", "outputs", "recorded", "verified")

    def __init__(self, inputs: list[Tensor], outputs: tuple, recorded: Capture):
        self.inputs, self.outputs, self.recorded, self.verified = inputs, outputs, recorded, False


class Replayer:
    """``replayer(*inputs)`` returns what ``graph(*inputs)`` returns (fresh tensors), by replay when it can."""

    def __init__(self, graph):
        self.graph = graph
        self._captured: dict = {}
        self._refused: dict = {}  # layouts -> reason

    def reason(self, *inputs) -> str | None:
        """Why the layouts of ``inputs`` run the normal path, or None (they replay, or are not seen yet)."""
        return self._refused.get(self._key(self._tensors(inputs)))

    def __call__(self, *inputs):
        tensors = self._tensors(inputs)
        key = self._key(tensors)
        if key in self._refused:
            return self.graph(*tensors)
        captured = self._captured.get(key)
        if captured is None:
            return self._capture(key, tensors)
        for private, given in zip(captured.inputs, tensors):
            private.copy_(given)
        if not captured.verified:
            # the capture's run compiled every kernel, so the launches can now go into a device graph
            why_not = captured.recorded.record_device_graph()
            if why_not is not None:
                log.info("%s: inputs %s replay launch by launch: %s", self.graph.path, _describe(key), why_not)
        captured.recorded.replay()
        results = tuple(out.clone() for out in captured.outputs)
        if not captured.verified:
            expected = self.graph(*tensors)
            expected = expected if isinstance(expected, tuple) else (expected,)
            if any(_bits(r) != _bits(e) for r, e in zip(results, expected)):
                self._refuse(key, "its first replay differed from the normal path")
                return expected[0] if len(expected) == 1 else expected
            captured.verified = True
        return results[0] if len(results) == 1 else results

    def _capture(self, key, tensors):
        private = [t.clone() for t in tensors]
        with capture() as recorded:
            outputs = self.graph(*private)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        if recorded.refused is not None:
            self._refuse(key, recorded.refused)
        else:
            if len(self._captured) >= _MAX_CAPTURES:
                del self._captured[next(iter(self._captured))]
            self._captured[key] = _Captured(private, outputs, recorded)
        results = tuple(out.clone() for out in outputs)
        return results[0] if len(results) == 1 else results

    def _refuse(self, key, reason: str) -> None:
        self._captured.pop(key, None)
        self._refused[key] = reason
        log.warning("%s: inputs %s run without replay: the run %s", self.graph.path, _describe(key), reason)

    def _tensors(self, inputs) -> list[Tensor]:
        return [self.graph._as_input(tensor_id, value) for tensor_id, value in zip(self.graph.inputs, inputs)]

    @staticmethod
    def _key(tensors) -> tuple:
        return tuple((t.dtype, t.shape, t.stride(), t.device) for t in tensors)


def _bits(t: Tensor) -> bytes:
    return np.ascontiguousarray(t.numpy()).tobytes()


def _describe(key) -> str:
    return ", ".join(f"{dtype.name}{list(shape)}" for dtype, shape, _, _ in key)
