"""One line of progress on stderr for work that takes a while: loading weights, exporting, tuning, a long run.

A line is drawn only when stderr is a terminal, once the work has lasted ``DELAY_S`` seconds, and never
with ``NBX_PROGRESS=0``. It is redrawn with ``\\r`` every ``INTERVAL_S`` by a thread of the task's own,
so work that reports no steps (a compile, torch.export) still shows its elapsed time, and it is cleared
when the work ends. Of nested tasks the innermost is drawn. Where no line can be shown a task is a
counter: no thread, no output."""
from __future__ import annotations

import os
import shutil
import sys
import threading
import time

DELAY_S = 2.0
INTERVAL_S = 0.2
_BAR_WIDTH = 20
_CLEAR_LINE = "\r\033[K"

_lock = threading.Lock()  # guards _shown and every write of a line
_shown: list["Task"] = []  # the tasks that may draw, innermost last


def enabled(stream=None) -> bool:
    """Whether progress can be shown on ``stream`` (default: stderr): a terminal, and NBX_PROGRESS is not 0."""
    if os.environ.get("NBX_PROGRESS", "").strip() == "0":
        return False
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False


def _amount(value: float, unit: str | None) -> str:
    if unit != "bytes":
        return f"{value:g}"
    for scale, suffix in ((2 ** 30, "GiB"), (2 ** 20, "MiB"), (2 ** 10, "KiB")):
        if value >= scale:
            return f"{value / scale:.1f} {suffix}"
    return f"{value:g} B"


class Task:
    """Work named ``label``, of ``total`` units (``unit="bytes"`` prints sizes) when that is known; use as
    a context manager and call ``advance`` as units are done. ``label`` may be changed as the work moves
    from one stage to the next."""

    def __init__(self, label: str, total: float | None = None, unit: str | None = None):
        self.label, self.total, self.unit = label, total, unit
        self.done = 0
        self._stream = None
        self._started = 0.0
        self._finished = threading.Event()
        self._drawn = False
        self._thread: threading.Thread | None = None

    def advance(self, amount: float = 1) -> None:
        self.done += amount

    def __enter__(self) -> "Task":
        self._started = time.monotonic()
        if enabled():
            self._stream = sys.stderr
            with _lock:
                _shown.append(self)
            self._thread = threading.Thread(target=self._redraw, name="nbxtensor-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        if self._thread is None:
            return
        self._finished.set()
        self._thread.join()
        with _lock:
            _shown.remove(self)
            if self._drawn:
                self._write(_CLEAR_LINE)

    def line(self, width: int) -> str:
        """The line as drawn now, at most ``width`` characters."""
        elapsed = f"{time.monotonic() - self._started:.1f} s"
        if self.total:
            fraction = min(max(self.done / self.total, 0.0), 1.0)
            filled = round(fraction * _BAR_WIDTH)
            text = (f"{self.label} {fraction:4.0%} [{'#' * filled}{' ' * (_BAR_WIDTH - filled)}] "
                    f"{_amount(self.done, self.unit)}/{_amount(self.total, self.unit)} {elapsed}")
        else:
            text = f"{self.label} ... {elapsed}"
        return text[:max(width, 1)]

    def _redraw(self) -> None:
        wait = max(DELAY_S - (time.monotonic() - self._started), 0.0)
        while not self._finished.wait(wait):
            wait = INTERVAL_S
            with _lock:
                if _shown and _shown[-1] is self:
                    self._write(_CLEAR_LINE + self.line(shutil.get_terminal_size().columns - 1))
                    self._drawn = True
                    for outer in _shown[:-1]:  # this line replaced theirs
                        outer._drawn = False

    def _write(self, text: str) -> None:
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError):  # the terminal went away: progress is not worth an error
            pass


def task(label: str, total: float | None = None, unit: str | None = None) -> Task:
    """A ``Task``: ``with progress.task("loading weights", total=size, unit="bytes") as shown: ...``."""
    return Task(label, total, unit)


def track(items, label: str, *, total: float | None = None, size=None, unit: str | None = None):
    """Yield each of ``items`` under a ``Task``, advancing by ``size(item)`` (default 1) once it is done;
    ``total`` defaults to ``len(items)`` when ``size`` is not given."""
    if total is None and size is None and hasattr(items, "__len__"):
        total = len(items)
    with Task(label, total, unit) as shown:
        for item in items:
            yield item
            shown.advance(1 if size is None else size(item))
