"""Launch keys and the tuning cache (spec section 5).

A launch key names a kernel, its extents put in buckets on the device facts' ladders, its dtypes and
its layout flags; it is a pure function of those, so the keys a model forms can be listed from its
graph alone. A key's setting is chosen once: on a GPU by timing the candidates the caller lists (from
the facts' ``tiles`` ceilings), then stored per device class in
``$NBX_TUNING_DIR/<facts name>.json`` (default ``~/.cache/nbxtensor/tuning``) so that later processes
reuse it. Under Triton's interpreter nothing can be timed: the first candidate is taken and nothing
is stored.

``NBX_TUNING=certified-only`` forbids tuning during a run: a key missing from the cache raises
``TuningKeyMissing`` naming it. An entry carries ``certified`` (whether its setting was checked against
a float64 reference); ``choose`` takes a ``certify`` hook so that check can run before storing.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import statistics
import threading
from pathlib import Path

from .. import progress

MODE_TUNE = "tune"
MODE_CERTIFIED_ONLY = "certified-only"
_MODES = (MODE_TUNE, MODE_CERTIFIED_ONLY)


class TuningKeyMissing(RuntimeError):
    """Raised in certified-only mode for a launch key the cache does not hold."""

    def __init__(self, key: str, path: Path):
        self.key = key
        super().__init__(f"NBX_TUNING=certified-only: no tuned setting for launch key {key!r} in {path}; "
                         "tune it ahead of time (run once without NBX_TUNING=certified-only) and keep the cache")


def mode() -> str:
    value = os.environ.get("NBX_TUNING", MODE_TUNE) or MODE_TUNE
    if value not in _MODES:
        raise ValueError(f"NBX_TUNING={value!r}: expected one of {', '.join(_MODES)}")
    return value


def tuning_dir() -> Path:
    configured = os.environ.get("NBX_TUNING_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "nbxtensor" / "tuning"


def cache_path(facts_name: str) -> Path:
    return tuning_dir() / f"{facts_name}.json"


def bucket(extent: int, ladder) -> int:
    """The rung at or above ``extent``; past the top rung, the next power of two (so huge extents still
    fall into few buckets)."""
    for rung in ladder:
        if extent <= rung:
            return int(rung)
    return 1 << max(0, (int(extent) - 1).bit_length())


def launch_key(kernel: str, facts: dict, *, rows: dict | None = None, cols: dict | None = None,
               dtypes=(), flags: dict | None = None) -> str:
    """The key of one launch: ``rows`` extents go on the ``rows`` ladder, ``cols`` on the ``cols`` ladder.
    A string, so it is readable in the cache file and in error messages."""
    ladders = facts["ladders"]
    parts = [kernel]
    parts += [f"{name}={bucket(v, ladders['rows'])}" for name, v in (rows or {}).items()]
    parts += [f"{name}={bucket(v, ladders['cols'])}" for name, v in (cols or {}).items()]
    parts.append(",".join(getattr(d, "name", str(d)) for d in dtypes))
    parts += [f"{name}={int(v) if isinstance(v, bool) else v}" for name, v in (flags or {}).items()]
    key = "|".join(parts)
    for noted in _recorders:
        noted.append(key)
    return key


# the lists of the ``recording()`` blocks open now, in any thread
_recorders: list[list] = []


@contextlib.contextmanager
def recording():
    """A list of every launch key formed while the block runs, in the order formed. Keys are formed when a
    layout is planned: a plan made before the block forms none inside it (``ops.plans.clear_all()``
    first, to record every key a run forms)."""
    noted: list = []
    _recorders.append(noted)
    try:
        yield noted
    finally:
        _recorders.remove(noted)


class TuningCache:
    """The settings chosen on one device class, in memory and on disk."""

    def __init__(self, facts_name: str):
        self.facts_name = facts_name
        self.path = cache_path(facts_name)
        self._entries: dict | None = None
        self._lock = threading.Lock()

    def entries(self) -> dict:
        entries = self._entries
        if entries is None:
            with self._lock:  # read once: a second read could replace entries another thread just stored
                if self._entries is None:
                    self._entries = self._read()
                entries = self._entries
        return entries

    def _read(self) -> dict:
        try:
            with open(self.path) as f:
                data = json.load(f)
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            raise RuntimeError(f"tuning cache {self.path} is unreadable ({e}); delete it to tune again") from None
        return dict(data.get("entries", {}))

    def store(self, key: str, entry: dict) -> None:
        """Record ``entry`` and write the file, merged with whatever another process wrote meanwhile."""
        with self._lock:
            merged = self._read()
            merged.update(self._entries or {})
            merged[key] = entry
            self._entries = merged
            self.path.parent.mkdir(parents=True, exist_ok=True)
            temporary = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
            with open(temporary, "w") as f:
                json.dump({"facts": self.facts_name, "entries": merged}, f, indent=1, sort_keys=True)
            os.replace(temporary, self.path)


_caches: dict[tuple[str, str], TuningCache] = {}


def cache_for(facts_name: str) -> TuningCache:
    """The cache of a device class; a new one when ``NBX_TUNING_DIR`` changed."""
    key = (facts_name, os.environ.get("NBX_TUNING_DIR"))
    cache = _caches.get(key)
    if cache is None:
        cache = _caches.setdefault(key, TuningCache(facts_name))
    return cache


def choose(key: str, facts_name: str, candidates, measure, *, interpreted: bool, certify=None,
           rounds: int = 1) -> dict:
    """The setting for ``key``: cached, or (interpreted) the first candidate, or the fastest candidate by
    ``measure(config) -> milliseconds`` (a candidate that fails to build or run is skipped), stored.
    ``candidates`` is a list of settings, or a function giving it, called only when the key must be
    tuned. With ``rounds`` > 1 every candidate is measured once a round, in order and then in reverse
    order by turns, and ranked by its median: with an even count of rounds a steady drift of the
    device's pace during tuning (heat, power) cancels out of every median instead of penalising the
    candidates measured last. ``certify(config) -> bool``, when given, must accept a setting before it
    is stored."""
    if not interpreted:
        entry = cache_for(facts_name).entries().get(key)
        if entry is not None:
            return entry["config"]
    if callable(candidates):
        candidates = candidates()
    if not candidates:
        raise ValueError(f"no tuning candidates for launch key {key!r}")
    if interpreted:
        return candidates[0]
    cache = cache_for(facts_name)
    if mode() == MODE_CERTIFIED_ONLY:
        raise TuningKeyMissing(key, cache.path)
    times = {i: [] for i in range(len(candidates))}
    with progress.task(f"tuning {key}", total=rounds * len(candidates)) as shown:
        for turn in range(rounds):
            for i in (list(times) if turn % 2 == 0 else list(times)[::-1]):
                try:
                    ms = float(measure(candidates[i]))
                except Exception:  # noqa: BLE001  (a candidate too large for the device is just not a choice)
                    ms = math.nan
                if math.isfinite(ms):
                    times[i].append(ms)
                    shown.advance()
                else:
                    del times[i]
                    shown.advance(rounds - turn)  # its later rounds are skipped
    timed = [(statistics.median(times[i]), candidates[i]) for i in times]
    timed.sort(key=lambda t: t[0])
    for ms, config in timed:
        if certify is None or certify(config):
            cache.store(key, {"config": dict(config), "ms": ms, "candidates": len(candidates),
                              "certified": certify is not None})
            return config
    raise RuntimeError(f"tuning launch key {key!r}: none of {len(candidates)} candidates ran"
                       + (" and passed certification" if certify is not None else ""))
