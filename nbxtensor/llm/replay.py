"""Decode steps captured once per batch-size bucket and replayed.

A step's inputs (token ids, positions, cache slots, block tables, lengths) live in buffers kept per bucket:
a bucket is a batch size and a block-table width, both rounded up to a power of two, so every step of a
bucket launches the same kernels on the same addresses, and a short context does not pay for attention
over the whole table. The first step of a bucket runs op by op on those buffers (compiling every
kernel) while its launches are captured; the next records them as a device graph where the device has
graphs (a CUDA graph, one launch a step) and replays, after checking its first replay's logits byte for
byte against the op-by-op step. A bucket whose capture is refused, or whose first replay differs, decodes
op by op from then on, with the reason logged once.

A verified bucket can also run a step ahead (``DecodeReplayer.ahead``): its tokens are the previous
step's choice, still on the device, and its inputs travel from page-locked memory without waiting for
the device, so the host launches step t + 1 before it reads step t's tokens and the device never waits
for the host between steps (``TokenReadback`` brings the choices back the same way)."""
from __future__ import annotations

import logging

import numpy as np

from .. import cuda as _cuda
from ..allocation import new_tensor
from ..device import backend_for, device as _device
from ..dtypes import get_dtype
from ..launch import capture
from ..ops.creation import tensor as make_tensor
from .cache import PagedKVCache

log = logging.getLogger("nbxtensor.llm")

__all__ = ["DecodeReplayer", "TokenReadback", "BATCH_BUCKETS"]

BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class _HostPair:
    """Two host buffers of ``count`` ``dtype`` elements used in turn, page-locked where the device is a GPU
    (its copies to and from them then need no wait). A buffer is handed out again two uses later: by then
    the engine has waited for the step between, and so for the copy that used it."""

    def __init__(self, count: int, dtype, device):
        pinned = device.type == "cuda"
        self.buffers = [new_tensor((count,), dtype, _device("cpu"), pinned=pinned) for _ in range(2)]
        self.turn = 0

    def next(self):
        self.turn ^= 1
        return self.buffers[self.turn]


class _Bucket:
    __slots__ = ("packed", "inputs", "logits", "recorded", "verified", "staging")

    def __init__(self, packed, inputs, logits, recorded):
        self.packed, self.inputs, self.logits, self.recorded, self.verified = packed, inputs, logits, recorded, False
        self.staging = None


def _packed(arrays: dict) -> np.ndarray:
    """A step's int32 input arrays one after another: one upload a step fills every input buffer."""
    return np.concatenate([np.asarray(a, np.int32).ravel() for a in arrays.values()])


class DecodeReplayer:
    """``replayer(cache, sequences, tokens)`` gives what ``model.decode`` gives, by replay when it can. A
    replayed step's logits are the bucket's own buffer: read them before the next step."""

    def __init__(self, model, cache: PagedKVCache):
        self.model, self.cache = model, cache
        self.widest = -(-model.config.max_positions // cache.block_size)
        self._buckets: dict[tuple[int, int], _Bucket] = {}
        self.refused: dict[tuple[int, int], str] = {}

    def _key(self, sequences: list[int]) -> tuple:
        rows = next((b for b in BATCH_BUCKETS if b >= len(sequences)), None)
        # pages the longest sequence holds after this step
        pages = max(-(-(self.cache.length(s) + 1) // self.cache.block_size) for s in sequences)
        return rows, min(self.widest, 1 << (pages - 1).bit_length())

    def __call__(self, sequences: list[int], tokens):
        count = len(sequences)
        key = self._key(sequences)
        if key[0] is None or key in self.refused:
            return self.model.decode(self.cache, sequences, tokens)
        arrays = self.model.decode_inputs(self.cache, sequences, tokens, *key)
        bucket = self._buckets.get(key)
        if bucket is None:
            return self._capture(key, arrays)[:count]
        device = self.model.device
        backend_for(device).upload(bucket.packed.data_ptr(), _packed(arrays).view(np.uint8), device.index)
        if not bucket.verified:
            why_not = bucket.recorded.record_device_graph()
            if why_not is not None:
                log.info("decode bucket %s replays launch by launch: %s", key, why_not)
        bucket.recorded.replay()
        # the engine reads these rows before the next step replays over them
        logits = bucket.logits
        if not bucket.verified:
            # the op-by-op step on the same inputs writes the same cache slots with the same values
            expected = self.model.decode_from(self.cache, bucket.inputs)
            if _bits(expected) != _bits(logits):
                self._refuse(key, "its first replay differed from the op-by-op step")
                return expected[:count]
            bucket.verified = True
        return logits[:count]

    def ahead(self, sequences: list[int], fed):
        """The logits of a step of ``sequences`` whose tokens are ``fed`` (a device tensor of one token a
        sequence, the previous step's choice), launched without waiting for the device; None, with nothing
        changed, where the step's bucket has no verified replay yet (the caller then steps as usual)."""
        count = len(sequences)
        key = self._key(sequences)
        bucket = self._buckets.get(key)
        if bucket is None or not bucket.verified:
            return None
        arrays = self.model.decode_inputs(self.cache, sequences, [0] * count, *key)
        if bucket.staging is None:
            bucket.staging = _HostPair(bucket.packed.numel(), get_dtype("int32"), self.model.device)
        host = bucket.staging.next()
        host.numpy()[...] = _packed(arrays)
        bucket.packed.copy_(host, non_blocking=True)
        bucket.inputs["tokens"][:count].copy_(fed)
        bucket.recorded.replay()
        return bucket.logits[:count]

    def _capture(self, key: tuple[int, int], arrays: dict):
        packed = make_tensor(_packed(arrays), device=self.model.device)
        inputs, start = {}, 0
        for name, array in arrays.items():
            inputs[name] = packed[start:start + array.size].view(array.shape)
            start += array.size
        self.model.decode_from(self.cache, inputs)  # compiles and plans every kernel outside the capture
        with capture() as recorded:
            logits = self.model.decode_from(self.cache, inputs)
        if recorded.refused is not None:
            self._refuse(key, recorded.refused)
        else:
            self._buckets[key] = _Bucket(packed, inputs, logits, recorded)
        return logits.clone()

    def _refuse(self, key: tuple[int, int], reason: str) -> None:
        self._buckets.pop(key, None)
        self.refused[key] = reason
        log.warning("decode bucket %s (batch, table width) runs op by op: %s", key, reason)


def _bits(t) -> bytes:
    return np.ascontiguousarray(t.numpy()).tobytes()


class TokenReadback:
    """A step's chosen tokens brought to the host without stopping the host: ``start(chosen)`` queues the
    copy and returns ``tokens()``, which waits for it (and so for the step) and gives the list."""

    def __init__(self, device, rows: int = BATCH_BUCKETS[-1]):
        self.device = device
        self.host = _HostPair(rows, get_dtype("int64"), device)
        # one event a host buffer, used in the same turns (none on a host device, whose copies are done)
        self.events = [_cuda.Event(), _cuda.Event()] if device.type == "cuda" else None

    def start(self, chosen):
        count = chosen.shape[0]
        host = self.host.next()
        host[:count].copy_(chosen, non_blocking=True)
        done = None
        if self.events is not None:
            done = self.events[self.host.turn]
            done.record()

        def tokens() -> list[int]:
            if done is not None:
                done.synchronize()
            return host.numpy()[:count].tolist()
        return tokens
