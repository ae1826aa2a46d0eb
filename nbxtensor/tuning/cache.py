"""Launch keys and the tuning store (spec section 5).

A launch key names a kernel, its extents put in buckets on the device facts' ladders, its dtypes and
its layout flags; it is a pure function of those, so the keys a model forms can be listed from its
graph alone. A key's setting is chosen once: on a GPU by timing the candidates the caller lists (from
the facts' ``tiles`` ceilings), then stored per device class in
``$NBX_TUNING_DIR/<facts name>.json`` (default ``~/.cache/nbxtensor/tuning``) so that later processes
reuse it. Under Triton's interpreter nothing can be timed: the first candidate is taken and nothing
is stored, unless ``certify.py`` certifies the key ahead of time.

An entry records the device class and the versions (nbxtensor, Triton, driver) that chose it; an entry of
other versions is stale: a run tunes the key again, a certification certifies it again. An entry carries
``certified`` (its setting matched a float64 reference on the key's representative shapes) and the
candidates certification refused, each with its reason.

Certified-only runs (``NBX_CERTIFIED_ONLY=1``, ``NBX_TUNING=certified-only``, ``set_certified_only`` or the
``certified_only()`` block) never tune: a key without a certified entry of these versions raises
``TuningKeyMissing`` naming the key, the op and the command that certifies it.
"""
from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import shlex
import statistics
import threading
from pathlib import Path

from .. import launch, progress
from .._version import __version__

MODE_TUNE = "tune"
MODE_CERTIFIED_ONLY = "certified-only"
_MODES = (MODE_TUNE, MODE_CERTIFIED_ONLY)
STORE_FORMAT = "nbxtensor-tuning"
STORE_VERSION = 1


# the op whose calls form a launch key, by the key's kernel (its first part)
KERNEL_OPS = {"gemm": "matmul", "gemv": "matmul", "attention": "scaled_dot_product_attention",
              "attention_decode": "scaled_dot_product_attention", "quantized_gemm": "quantized_linear",
              "quantized_gemv": "quantized_linear", "fp8_gemm": "quantized_linear",
              "fp8_block_gemm": "quantized_linear", "conv": "convolution",
              "direct_conv": "convolution", "depthwise_conv": "convolution", "gemv_rms_norm": "rms_norm_linear",
              "gemv_act_and_mul": "act_and_mul_linear", "quantized_gemv_rms_norm": "rms_norm_linear",
              "quantized_gemv_act_and_mul": "act_and_mul_linear", "gemv_layer_norm": "layer_norm_linear",
              "quantized_gemv_layer_norm": "layer_norm_linear", "grouped_gemm": "grouped_mm",
              "grouped_quantized_gemm": "grouped_quantized_linear"}


def op_of(key: str) -> str:
    """The op whose calls form ``key``."""
    kernel = key.split("|", 1)[0]
    if kernel == "attention" and ("|softcap=" in key or "|window=" in key):
        return "prefill_attention"  # caps, windows and offsets: the engine's op, not the public one
    if kernel in ("gemv_rms_norm", "quantized_gemv_rms_norm", "gemv_layer_norm", "quantized_gemv_layer_norm") \
            and "|residual=1" in key:
        return "add_" + KERNEL_OPS[kernel]
    return KERNEL_OPS.get(kernel, "(no op declares this kernel)")


class TuningKeyMissing(RuntimeError):
    """Raised in a certified-only run for a launch key without a certified entry of these versions."""

    def __init__(self, key: str, path: Path, why: str):
        self.key = key
        self.op = op_of(key)
        self.command = certify_command(key)
        super().__init__(f"certified-only run: launch key {key!r} of op {self.op} {why} in {path}; certify it "
                         f"ahead of time with: {self.command} (or nbx tune MODEL --certify for every key of a model)")


def certify_command(key: str) -> str:
    """The command line that certifies ``key`` into the store this process reads."""
    configured = os.environ.get("NBX_TUNING_DIR")
    prefix = f"NBX_TUNING_DIR={shlex.quote(configured)} " if configured else ""
    device = os.environ.get("NBX_DEVICE", "").strip()
    prefix += f"NBX_DEVICE={shlex.quote(device)} " if device else ""
    return f"{prefix}nbx tune --certify --key {shlex.quote(key)}"


_switch: list = []  # the certified-only settings of set_certified_only and open certified_only() blocks


def set_certified_only(enabled: bool | None) -> None:
    """Make every later run of this process certified-only (True), free to tune (False), or follow the
    environment again (None)."""
    _switch[:] = [] if enabled is None else [bool(enabled)]


@contextlib.contextmanager
def certified_only(enabled: bool = True):
    """Runs inside the block are certified-only (or, with ``enabled=False``, free to tune)."""
    _switch.append(bool(enabled))
    try:
        yield
    finally:
        _switch.pop()


def mode() -> str:
    """``MODE_CERTIFIED_ONLY`` or ``MODE_TUNE``: the Python switch first, then the environment."""
    if _switch:
        return MODE_CERTIFIED_ONLY if _switch[-1] else MODE_TUNE
    value = os.environ.get("NBX_TUNING", MODE_TUNE) or MODE_TUNE
    if value not in _MODES:
        raise ValueError(f"NBX_TUNING={value!r}: expected one of {', '.join(_MODES)}")
    flag = os.environ.get("NBX_CERTIFIED_ONLY", "").strip()
    if flag not in ("", "0", "1"):
        raise ValueError(f"NBX_CERTIFIED_ONLY={flag!r}: expected 1 (certified-only runs) or 0")
    return MODE_CERTIFIED_ONLY if flag == "1" else value


@functools.cache
def versions() -> dict:
    """The versions an entry made in this process records: nbxtensor's, Triton's and the GPU driver's
    (none where kernels are interpreted)."""
    import triton

    from .. import _runtime
    driver = "none"
    if _runtime.KERNEL_MODE != _runtime.INTERPRETED:
        from cuda.bindings import runtime as rt
        error, number = rt.cudaDriverGetVersion()
        driver = str(number) if int(error) == 0 else "unknown"
    return {"nbxtensor": __version__, "triton": triton.__version__, "driver": driver}


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

    def current(self, key: str) -> tuple[dict | None, str]:
        """(the usable entry of ``key`` or None, why there is none or why it is not certified)."""
        entry = self.entries().get(key)
        if entry is None:
            return None, "has no entry"
        if entry.get("versions") != versions() or entry.get("device_class") != self.facts_name:
            return None, (f"has an entry made by other versions ({_described(entry.get('versions'))}; this process: "
                          f"{_described(versions())}), which is certified again, never used")
        if entry.get("config") is None:
            return None, "has no setting: certification refused every candidate"
        return entry, "has an entry that was tuned but not certified"

    def _read(self) -> dict:
        try:
            with open(self.path) as f:
                data = json.load(f)
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            raise RuntimeError(f"tuning cache {self.path} is unreadable ({e}); delete it to tune again") from None
        entries = data.get("entries", {}) if isinstance(data, dict) else None
        if not isinstance(entries, dict) or not all(isinstance(e, dict) for e in entries.values()):
            raise RuntimeError(f"tuning cache {self.path} holds no object of entries; delete it to tune again")
        return dict(entries)

    def store(self, key: str, entry: dict) -> None:
        """Record ``entry`` (stamped with this device class and these versions) and write the file."""
        self.merge({key: {**entry, "device_class": self.facts_name, "versions": versions()}})

    def merge(self, entries: dict) -> None:
        """Record ``entries`` as they are and write the file, merged with whatever another process wrote
        meanwhile."""
        with self._lock:
            merged = self._read()
            merged.update(self._entries or {})
            merged.update(entries)
            self._entries = merged
            self.path.parent.mkdir(parents=True, exist_ok=True)
            temporary = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
            with open(temporary, "w") as f:
                json.dump({"format": STORE_FORMAT, "version": STORE_VERSION, "facts": self.facts_name,
                           "entries": merged}, f, indent=1, sort_keys=True)
            os.replace(temporary, self.path)


def _described(found) -> str:
    if not isinstance(found, dict):
        return "unrecorded"
    return ", ".join(f"{name} {found.get(name, '?')}" for name in ("nbxtensor", "triton", "driver"))


_caches: dict[tuple[str, str], TuningCache] = {}


def cache_for(facts_name: str) -> TuningCache:
    """The cache of a device class; a new one when ``NBX_TUNING_DIR`` changed."""
    key = (facts_name, os.environ.get("NBX_TUNING_DIR"))
    cache = _caches.get(key)
    if cache is None:
        cache = _caches.setdefault(key, TuningCache(facts_name))
    return cache


# the certifications in progress (``certify.py``), by (thread, launch key): each decides its key's setting
# for the calls its thread makes
certifications: dict = {}


def choose(key: str, facts_name: str, candidates, measure, *, interpreted: bool, certify=None,
           rounds: int = 1, build=None) -> dict:
    """The setting for ``key``: stored (by these versions), or (interpreted) the first candidate, or the
    fastest candidate by ``measure(config) -> milliseconds`` (a candidate that fails to build or run is
    skipped), stored. ``candidates`` is a list of settings, or a function giving it, called only when the
    key must be tuned. ``rounds`` as ``time_candidates`` takes it. ``certify(config) -> bool``, when given,
    must accept a setting before it is stored. A certified-only run takes a certified entry or raises
    ``TuningKeyMissing``. ``build(config)``, when given, issues a candidate's launches: before any is
    timed, every candidate is built that way inside ``launch.compiling_ahead``, its kernels compiled on
    a pool of threads."""
    cache = cache_for(facts_name)
    certification = certifications.get((threading.get_ident(), key)) if certifications else None
    if certification is None:
        entry, why = cache.current(key)
        if mode() == MODE_CERTIFIED_ONLY:
            if entry is None or not entry.get("certified"):
                raise TuningKeyMissing(key, cache.path, why)
            return entry["config"]
        if entry is not None:
            return entry["config"]
    if callable(candidates):
        candidates = candidates()
    if not candidates:
        raise ValueError(f"no tuning candidates for launch key {key!r}")
    if launch.compiling_ahead_active():
        # a key planned while an outer key's candidates are being built: built in its first setting, tuned
        # when the outer candidate is timed
        return candidates[0]
    if build is not None and not interpreted:
        with launch.compiling_ahead() as building:
            if building:
                for config in candidates:
                    build(config)
    if certification is not None:
        return certification.decide(candidates, measure, interpreted, rounds)
    if interpreted:
        return candidates[0]
    for ms, config in time_candidates(key, candidates, measure, rounds):
        if certify is None or certify(config):
            cache.store(key, {"config": dict(config), "ms": ms, "candidates": len(candidates),
                              "certified": certify is not None})
            return config
    raise RuntimeError(f"tuning launch key {key!r}: none of {len(candidates)} candidates ran"
                       + (" and passed certification" if certify is not None else ""))


def time_candidates(key: str, candidates, measure, rounds: int = 1) -> list:
    """(median milliseconds, config) of each candidate that ran, fastest first. With ``rounds`` > 1 every
    candidate is measured once a round, in order and then in reverse order by turns, and ranked by its
    median: with an even count of rounds a steady drift of the device's pace during tuning (heat, power)
    cancels out of every median instead of penalising the candidates measured last."""
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
    return timed
