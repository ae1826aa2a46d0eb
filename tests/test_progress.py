"""Progress lines: drawn on a terminal once work has lasted the delay, quiet otherwise; and the long
paths (weight loading, safetensors loads, tuning) report through them."""
import io
import sys
import threading
import time

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor import graph, progress
from nbxtensor.io import safetensors
from nbxtensor.tuning import cache as tuning_cache

from .conftest import cpu_kernels
from .doc_blocks import graph_format_example, write_graph_example


class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture
def terminal(monkeypatch):
    """A function that makes stderr a terminal, with a short delay and interval so that tests need not
    wait. Called in the test: pytest's capture puts its own stderr back after a fixture's set-up."""
    monkeypatch.delenv("NBX_PROGRESS", raising=False)
    monkeypatch.setattr(progress, "DELAY_S", 0.05)
    monkeypatch.setattr(progress, "INTERVAL_S", 0.01)

    def as_terminal():
        stream = Terminal()
        monkeypatch.setattr(sys, "stderr", stream)
        return stream
    return as_terminal


def _wait_for(condition, seconds=5.0):
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert condition()


def test_a_long_task_draws_one_line_with_carriage_returns_and_clears_it(terminal):
    stream = terminal()
    with progress.task("loading weights", total=4 * 2 ** 20, unit="bytes") as shown:
        shown.advance(2 ** 20)
        _wait_for(lambda: "25%" in stream.getvalue())
        shown.advance(2 ** 20)
        _wait_for(lambda: "50%" in stream.getvalue())
    text = stream.getvalue()
    assert "\n" not in text and text.startswith("\r") and text.endswith("\r\033[K")
    assert "loading weights  25% [#####               ] 1.0 MiB/4.0 MiB" in text


def test_work_of_unknown_size_shows_its_label_and_elapsed_time(terminal):
    stream = terminal()
    with progress.task("exporting") as shown:
        _wait_for(lambda: "exporting ... " in stream.getvalue())
        shown.label = "writing"
        _wait_for(lambda: "writing ... " in stream.getvalue())


def test_work_shorter_than_the_delay_prints_nothing(terminal, monkeypatch):
    stream = terminal()
    monkeypatch.setattr(progress, "DELAY_S", 30.0)
    with progress.task("quick", total=2) as shown:
        shown.advance(2)
    assert stream.getvalue() == ""


def test_nbx_progress_0_keeps_a_terminal_quiet_and_starts_no_thread(terminal, monkeypatch):
    stream = terminal()
    monkeypatch.setenv("NBX_PROGRESS", "0")
    threads = threading.active_count()
    with progress.task("quiet"):
        assert threading.active_count() == threads
        time.sleep(0.1)
    assert stream.getvalue() == ""


def test_without_a_terminal_nothing_is_drawn_and_no_thread_starts(monkeypatch):
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    threads = threading.active_count()
    with progress.task("piped") as shown:
        assert threading.active_count() == threads
        shown.advance()
        time.sleep(0.05)
    assert stream.getvalue() == "" and not progress.enabled()


def test_the_innermost_task_is_drawn(terminal):
    stream = terminal()
    with progress.task("outer"):
        _wait_for(lambda: "outer ... " in stream.getvalue())
        with progress.task("inner"):
            _wait_for(lambda: "inner ... " in stream.getvalue())
            drawn = len(stream.getvalue())
            time.sleep(0.05)
            assert "outer" not in stream.getvalue()[drawn:]
        _wait_for(lambda: "outer ... " in stream.getvalue()[drawn:])


def test_track_yields_every_item_and_advances_by_its_size(monkeypatch):
    made = []
    real = progress.Task

    def recording(*args):
        made.append(real(*args))
        return made[-1]
    monkeypatch.setattr(progress, "Task", recording)
    assert list(progress.track(["ab", "c"], "items", size=len, total=3)) == ["ab", "c"]
    assert list(progress.track([1, 2, 3], "counted")) == [1, 2, 3]
    assert [(task.label, task.total, task.done) for task in made] == [("items", 3, 3), ("counted", 3, 3)]


@pytest.fixture
def recorded_tasks(monkeypatch):
    """Every task the library starts, as (label, total, done) when it ended."""
    ended = []

    class Recording(progress.Task):
        def __exit__(self, *exc_info):
            ended.append((self.label, self.total, self.done))
            return super().__exit__(*exc_info)
    monkeypatch.setattr(progress, "task", lambda label, total=None, unit=None: Recording(label, total, unit))
    monkeypatch.setattr(progress, "Task", Recording)
    return ended


@cpu_kernels
def test_loading_a_graph_reports_every_weight_byte(tmp_path, recorded_tasks):
    write_graph_example(graph_format_example(), tmp_path)
    graph.load(tmp_path, device="cpu")
    assert recorded_tasks == [("loading weights", 16 * 8 * 4, 16 * 8 * 4)]  # fc.weight, float32 [16, 8]


def test_safetensors_loads_report_every_tensor_byte(tmp_path, recorded_tasks):
    tensors = {"a": nbx.from_numpy(np.zeros((3, 5), np.float32)), "b": nbx.from_numpy(np.zeros(7, np.int8))}
    safetensors.save_file(tensors, tmp_path / "t.safetensors")
    assert set(safetensors.load_file(tmp_path / "t.safetensors", device="cpu")) == {"a", "b"}
    assert set(safetensors.load(safetensors.save(tensors), device="cpu")) == {"a", "b"}
    assert recorded_tasks == [("loading tensors", 67, 67)] * 2


def test_tuning_reports_each_timed_candidate(tmp_path, monkeypatch, recorded_tasks):
    monkeypatch.setenv("NBX_TUNING_DIR", str(tmp_path))
    timings = {"a": 2.0, "b": 1.0, "c": float("nan")}  # c fails: its later rounds are not timed
    config = tuning_cache.choose("gemm|M=16", "test-class", [{"t": "a"}, {"t": "b"}, {"t": "c"}],
                                 lambda candidate: timings[candidate["t"]], interpreted=False, rounds=4)
    assert config == {"t": "b"}
    assert recorded_tasks == [("tuning gemm|M=16", 12, 12)]
