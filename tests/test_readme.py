"""Every example in README.md and docs/*.md runs: each Python block executes and prints, the graph
document of docs/graph-format.md loads and runs, and every ``nbx`` command of a shell block parses.
Blocks marked ``<!-- not run by the tests: REASON -->`` are skipped with that reason."""
import json

import numpy as np
import pytest

from nbxtensor import get_dtype, graph
from nbxtensor.cli import parser

from .conftest import cpu_kernels
from .doc_blocks import all_blocks, blocks_of, graph_format_example, nbx_commands, write_graph_example

PYTHON_BLOCKS = all_blocks("python")
SHELL_BLOCKS = all_blocks("bash") + all_blocks("sh") + all_blocks("shell")
JSON_BLOCKS = all_blocks("json")


def _skip_marked(block):
    if block.skip_reason:
        pytest.skip(f"{block}: {block.skip_reason}")


def test_the_documents_have_examples():
    assert PYTHON_BLOCKS and SHELL_BLOCKS and JSON_BLOCKS
    assert any(nbx_commands(block.text) for block in SHELL_BLOCKS)


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=str)
def test_python_example_runs(block, capsys):
    _skip_marked(block)
    exec(compile(block.text, str(block), "exec"), {})
    assert capsys.readouterr().out


@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=str)
def test_nbx_commands_in_shell_examples_parse(block):
    _skip_marked(block)
    for arguments in nbx_commands(block.text):
        try:
            parser().parse_args(arguments)
        except SystemExit:
            pytest.fail(f"{block}: nbx {' '.join(arguments)} does not parse")


@cpu_kernels
@pytest.mark.parametrize("block", JSON_BLOCKS, ids=str)
def test_graph_documents_load_and_run_with_weights_of_their_shapes(block, tmp_path):
    _skip_marked(block)
    document = json.loads(block.text)
    if document.get("format") != "nbxtensor.graph":
        pytest.skip(f"{block}: not a graph document")
    write_graph_example(document, tmp_path)
    model = graph.load(tmp_path, device="cpu")
    rng = np.random.default_rng(0)
    inputs = []
    for tensor_id in model.inputs:
        entry = model.tensors[tensor_id]
        shape = [document["symbols"][d]["trace"] if isinstance(d, str) else d for d in entry["shape"]]
        inputs.append(rng.standard_normal(shape).astype(get_dtype(entry["dtype"]).numpy))
    results = model(*inputs)
    for result in results if isinstance(results, tuple) else (results,):
        assert np.isfinite(result.numpy()).all()


@cpu_kernels
def test_graph_format_example_loads_and_runs(tmp_path):
    document = graph_format_example()
    weights = write_graph_example(document, tmp_path)
    model = graph.load(tmp_path, device="cpu")
    batch = document["symbols"]["s0"]["trace"]
    x = np.random.default_rng(1).standard_normal((batch, 8)).astype(np.float32)
    # the example's ops: linear by fc.weight, then times the constant 0.25
    want = (x.astype(np.float64) @ weights["fc.weight"].astype(np.float64).T) * 0.25
    np.testing.assert_allclose(model(x).numpy(), want, rtol=1e-5, atol=1e-5)


def test_a_marked_block_is_skipped_with_its_reason():
    text = ("Intro\n\n<!-- not run by the tests: needs a GPU -->\n```python\nprint(1)\n```\n\n"
            "```python\nprint(2)\n```\n")
    marked, plain = blocks_of(text, "example.md")
    assert (marked.skip_reason, marked.line, marked.text) == ("needs a GPU", 4, "print(1)\n")
    assert plain.skip_reason is None and plain.text == "print(2)\n"


def test_nbx_commands_are_found_after_environment_and_between_others():
    shell = ("pip install x && NBX_DEVICE=cpu nbx demo --device cpu  # a comment\n"
             "python3 -m pytest -q; nbx plan model_dir --dim batch=8\n")
    assert nbx_commands(shell) == [["demo", "--device", "cpu"], ["plan", "model_dir", "--dim", "batch=8"]]
