"""``nbxtensor.tuning``: launch keys and the per-device-class store of tuned kernel settings.

``entries(device)`` shows what a device class has stored, ``cache_path(device)`` where, and ``mode()``
whether tuning may happen during a run (``NBX_CERTIFIED_ONLY=1``, ``NBX_TUNING=certified-only``,
``set_certified_only(True)`` or a ``certified_only()`` block say it may not); ``export_store`` and
``import_store`` move the store through one file (``store.py``). Tuning and certifying ahead of time runs ops,
so it lives above them, in ``nbxtensor.certify``.
"""
from __future__ import annotations

from .cache import (MODE_CERTIFIED_ONLY, MODE_TUNE, TuningCache, TuningKeyMissing, bucket, cache_for,
                    certified_only, certify_command, choose, launch_key, mode, recording, set_certified_only,
                    tuning_dir, versions)
from .store import StoreFileError, export_store, import_store
from .cache import cache_path as _cache_path_of
from ..device import backend_for, default_device, resolve


def _facts(device=None) -> dict:
    return backend_for(resolve(device) if device is not None else default_device()).facts


TIMING_ROUNDS = 4  # interleaved measurements of each candidate, an even count (``choose``)


def choose_timed(key: str, facts: dict, candidates, prepare) -> dict:
    """``choose`` for a kernel family whose ``prepare(config)`` plans its launches and returns a function
    that issues them: candidates are timed on the device the facts describe, each planned once, so that
    the timed calls are paced by the device rather than by planning, over ``TIMING_ROUNDS`` interleaved
    rounds. Every candidate's kernels are compiled at once first (``launch.compiling_ahead``); a candidate
    is planned again for its timing, so that keys it plans inside itself are tuned then, not while
    building."""
    prepared = {}

    def measure(config):
        from .timing import DEFAULT_L2_BYTES, device_time_ms
        if id(config) not in prepared:
            prepared[id(config)] = prepare(config)
        # twice the L2 cache overwritten before each call: a model's weights stream from device memory
        return device_time_ms(prepared[id(config)], reps=8, batches=1,
                              flush_bytes=2 * facts.get("l2_cache_bytes", DEFAULT_L2_BYTES))

    def build(config):
        try:
            prepare(config)()
        except Exception:  # noqa: BLE001  (a candidate that cannot be built is skipped when it is timed)
            pass
    return choose(key, facts["name"], candidates, measure, interpreted=bool(facts["kernels"].get("interpreted")),
                  rounds=TIMING_ROUNDS, build=build)


def distinct_candidates(configs) -> list[dict]:
    """``configs`` in order without repeats: clamping to a small shape or a device's ceilings makes
    different table rows the same setting, which would be built and timed twice."""
    firsts = {}
    for config in configs:
        firsts.setdefault(tuple(sorted(config.items())), config)
    return list(firsts.values())


def cache_path(device=None):
    """The file holding ``device``'s (default: the default device's) device class settings."""
    return _cache_path_of(_facts(device)["name"])


def entries(device=None) -> dict:
    """Launch key -> {config, ms, candidates, certified, refused, shapes, device_class, versions} for
    ``device``'s device class (a copy)."""
    return {k: dict(v) for k, v in cache_for(_facts(device)["name"]).entries().items()}


__all__ = ["MODE_CERTIFIED_ONLY", "MODE_TUNE", "TuningCache", "TuningKeyMissing", "bucket", "cache_for",
           "TIMING_ROUNDS", "cache_path", "choose", "choose_timed", "distinct_candidates", "entries", "launch_key", "mode", "recording",
           "tuning_dir", "certified_only", "set_certified_only", "certify_command", "versions",
           "StoreFileError", "export_store", "import_store"]
