"""Loading and running graph directories written by hand (no torch): validation errors, symbol binding,
execution against NumPy, and that the runtime imports no torch."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor import graph
from nbxtensor.graph import GraphError
from nbxtensor.io import save_file

from .conftest import TEST_DEVICE, cpu_kernels


def _mlp_document():
    return {
        "format": "nbxtensor.graph", "version": 1,
        "symbols": {"s0": {"min": 1, "max": 8, "trace": 2}},
        "inputs": ["input::x"], "outputs": ["relu"],
        "tensors": {
            "input::x": {"shape": ["s0", 4], "dtype": "float32"},
            "param::fc.weight": {"shape": [3, 4], "dtype": "float32", "weight": "fc.weight"},
            "param::fc.bias": {"shape": [3], "dtype": "float32", "weight": "fc.bias"},
            "const::shift": {"shape": [], "dtype": "float32",
                             "data": nbx.graph.format.encode_constant(np.array(0.25, np.float32))},
            "linear": {"shape": ["s0", 3], "dtype": "float32"},
            "sub": {"shape": ["s0", 3], "dtype": "float32"},
            "relu": {"shape": ["s0", 3], "dtype": "float32"},
        },
        "ops": [
            {"id": "linear", "op": "aten::linear.default", "kwargs": {}, "outputs": ["linear"],
             "args": [{"tensor": "input::x"}, {"tensor": "param::fc.weight"}, {"tensor": "param::fc.bias"}]},
            {"id": "sub", "op": "aten::sub.Tensor", "args": [{"tensor": "linear"}, {"tensor": "const::shift"}],
             "kwargs": {}, "outputs": ["sub"]},
            {"id": "relu", "op": "aten::relu.default", "args": [{"tensor": "sub"}], "kwargs": {}, "outputs": ["relu"]},
        ],
    }


WEIGHT = np.arange(12, dtype=np.float32).reshape(3, 4) / 10 - 0.5
BIAS = np.array([0.1, -0.2, 0.3], np.float32)


def _write(directory, document=None, weights=None):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "graph.json"), "w") as file:
        json.dump(_mlp_document() if document is None else document, file)
    weights = {"fc.weight": WEIGHT, "fc.bias": BIAS} if weights is None else weights
    save_file({k: nbx.tensor(v) for k, v in weights.items()}, os.path.join(directory, "model.safetensors"))
    return directory


def _reference(x):
    return np.maximum(x @ WEIGHT.T + BIAS - 0.25, 0)


@cpu_kernels
@pytest.mark.parametrize("batch", [1, 5])
def test_runs_with_a_dynamic_batch(tmp_path, batch):
    model = graph.load(_write(tmp_path), device=TEST_DEVICE)
    x = np.random.default_rng(batch).standard_normal((batch, 4)).astype(np.float32)
    out = model(nbx.tensor(x, device=TEST_DEVICE))
    np.testing.assert_allclose(out.cpu().numpy(), _reference(x), rtol=1e-5, atol=1e-6)


def test_symbol_out_of_range(tmp_path):
    model = graph.load(_write(tmp_path))
    with pytest.raises(GraphError, match=r"symbol 's0' = 9 is outside its range \[1, 8\]"):
        model(np.zeros((9, 4), np.float32))
    with pytest.raises(GraphError, match="input 'input::x' must have shape"):
        model(np.zeros((2, 5), np.float32))


def test_unknown_format_version(tmp_path):
    document = _mlp_document()
    document["version"] = 99
    with pytest.raises(GraphError, match="nbxtensor.graph version 99 is unknown"):
        graph.load(_write(tmp_path, document))
    document["format"] = "onnx"
    with pytest.raises(GraphError, match="format 'onnx' is not 'nbxtensor.graph'"):
        graph.load(_write(tmp_path, document))


def test_unknown_op_names_the_op_its_node_and_the_families(tmp_path):
    document = _mlp_document()
    document["ops"][2]["op"] = "aten::frobnicate.default"
    with pytest.raises(GraphError) as error:
        graph.load(_write(tmp_path, document))
    message = str(error.value)
    assert "graph.json" in message and "'relu'" in message and "aten::frobnicate.default" in message
    assert "families that exist" in message and "pointwise" in message


def test_missing_weight(tmp_path):
    with pytest.raises(GraphError, match="weight 'fc.bias' is in no safetensors file"):
        graph.load(_write(tmp_path, weights={"fc.weight": WEIGHT}))


def test_wrong_weight_shape(tmp_path):
    with pytest.raises(GraphError, match=r"model.safetensors: weight 'fc.weight' .* is float32\[4, 3\]"):
        graph.load(_write(tmp_path, weights={"fc.weight": WEIGHT.T.copy(), "fc.bias": BIAS}))


def test_missing_tensor_reference(tmp_path):
    document = _mlp_document()
    document["ops"][1]["args"][0] = {"tensor": "nowhere"}
    with pytest.raises(GraphError, match="op 'sub' .*reads tensor 'nowhere', which is not among the tensors"):
        graph.load(_write(tmp_path, document))


def test_ambiguous_argument_is_refused(tmp_path):
    document = _mlp_document()
    document["ops"][1]["args"].append({"what": 1})
    with pytest.raises(GraphError, match="not an encoded argument"):
        graph.load(_write(tmp_path, document))


def test_plan_reports_the_arena(tmp_path):
    model = graph.load(_write(tmp_path))
    memory_plan = model.plan({"s0": 8})
    assert graph.overlapping_pairs(memory_plan) == []
    assert memory_plan.arena_bytes <= memory_plan.naive_bytes
    # the output has its place in the arena, which is the whole peak
    assert {b.name for b in memory_plan.blocks} == {"linear", "sub", "relu"}
    assert memory_plan.peak_bytes == memory_plan.arena_bytes


@cpu_kernels
def test_loading_and_running_imports_no_torch(tmp_path):
    directory = _write(tmp_path)
    script = (
        "import sys, numpy as np\n"
        "from nbxtensor import graph\n"
        f"model = graph.load({str(directory)!r})\n"
        "model(np.ones((2, 4), np.float32))\n"
        "model.plan()\n"
        "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if m.startswith('torch'))\n"
    )
    env = {**os.environ, "NBX_DEVICE": "cpu"}
    subprocess.run([sys.executable, "-c", script], check=True, env=env, timeout=120)


def test_replay_repeats_the_captured_launches_and_checks_itself(tmp_path, caplog):
    """First call captures, the second replays (checked byte for byte against the normal path), later
    ones replay on new inputs; another batch size is captured separately."""
    g = graph.load(_write(tmp_path / "mlp"), device=TEST_DEVICE)
    rng = np.random.default_rng(5)
    for batch in (3, 3, 3, 5, 5, 3):
        x = rng.standard_normal((batch, 4)).astype(np.float32)
        # float32 products of length 4: well inside 1e-5
        np.testing.assert_allclose(g.replay(x).numpy(), _reference(x), rtol=1e-5, atol=1e-6)
    replayer = g._replayer
    assert len(replayer._captured) == 2 and all(c.verified for c in replayer._captured.values())
    assert replayer.reason(np.zeros((3, 4), np.float32)) is None
    assert not [r for r in caplog.records if r.name == "nbxtensor.graph"]
    # on CUDA each capture became a CUDA graph, replayed by one launch
    on_cuda = str(TEST_DEVICE).startswith("cuda")
    assert all((c.recorded.device_graph is not None) == on_cuda for c in replayer._captured.values())


@cpu_kernels
@pytest.mark.parametrize("recording_fails", [False, True])
def test_replays_launch_the_device_graph_once_recorded(tmp_path, caplog, monkeypatch, recording_fails):
    """Where the device records graphs, the second call records the captured launches into one (after
    the capture's run compiled every kernel) and each replay is one launch of it; a recording that fails
    leaves replays launch by launch, says why once, and the results stay right."""
    from nbxtensor.device import backend_for

    class RecordedGraph:
        launches = 0

        def __init__(self, issue):
            self.issue = issue

        def launch(self):
            RecordedGraph.launches += 1
            self.issue()

    def record_graph(issue, index, prepare=None):
        if recording_fails:
            raise RuntimeError("cudaStreamBeginCapture failed")
        return RecordedGraph(issue)

    monkeypatch.setattr(backend_for(nbx.device("cpu")), "record_graph", record_graph)
    g = graph.load(_write(tmp_path / "mlp"), device="cpu")
    rng = np.random.default_rng(6)
    with caplog.at_level("INFO", logger="nbxtensor.graph"):
        for _ in range(4):
            x = rng.standard_normal((3, 4)).astype(np.float32)
            np.testing.assert_allclose(g.replay(x).numpy(), _reference(x), rtol=1e-5, atol=1e-6)
    (captured,) = g._replayer._captured.values()
    assert captured.verified
    messages = [r.getMessage() for r in caplog.records if r.name == "nbxtensor.graph"]
    if recording_fails:
        assert captured.recorded.device_graph is None and RecordedGraph.launches == 0
        assert len(messages) == 1 and "launch by launch" in messages[0] and "BeginCapture" in messages[0]
    else:
        assert isinstance(captured.recorded.device_graph, RecordedGraph)
        assert RecordedGraph.launches == 3 and messages == []


def test_a_run_with_random_draws_is_not_replayed_and_says_why_once(tmp_path, caplog):
    document = _mlp_document()
    document["tensors"]["noise"] = {"shape": ["s0", 3], "dtype": "float32"}
    document["ops"].append({"id": "noise", "op": "aten::rand_like.default", "args": [{"tensor": "relu"}],
                            "kwargs": {}, "outputs": ["noise"]})
    document["outputs"] = ["relu", "noise"]
    g = graph.load(_write(tmp_path / "noisy", document), device=TEST_DEVICE)
    x = np.ones((2, 4), np.float32)
    with caplog.at_level("WARNING", logger="nbxtensor.graph"):
        first, second, third = (g.replay(x)[1].numpy() for _ in range(3))
    assert not np.array_equal(first, second) and not np.array_equal(second, third)  # fresh draws each run
    assert "draws random numbers" in g._replayer.reason(x)
    assert len([r for r in caplog.records if r.name == "nbxtensor.graph"]) == 1


def _chain_document():
    """relu, then contiguous of an already contiguous tensor (which returns its input: the same memory
    under a new name), then two more ops, so the arena must keep the aliased value alive or move it."""
    t = {"shape": ["s0", 4], "dtype": "float32"}
    return {
        "format": "nbxtensor.graph", "version": 1, "symbols": {"s0": {"min": 1, "max": 8, "trace": 2}},
        "inputs": ["input::x"], "outputs": ["out"],
        "tensors": {"input::x": t, "relu": t, "same": t, "neg": t, "out": t},
        "ops": [
            {"id": "relu", "op": "aten::relu.default", "args": [{"tensor": "input::x"}], "kwargs": {},
             "outputs": ["relu"]},
            {"id": "same", "op": "aten::contiguous.default", "args": [{"tensor": "relu"}], "kwargs": {},
             "outputs": ["same"]},
            {"id": "neg", "op": "aten::neg.default", "args": [{"tensor": "same"}], "kwargs": {}, "outputs": ["neg"]},
            {"id": "out", "op": "aten::mul.Tensor", "args": [{"tensor": "neg"}, {"tensor": "same"}], "kwargs": {},
             "outputs": ["out"]},
        ],
    }


def test_intermediates_and_outputs_live_in_the_planned_arena(tmp_path):
    g = graph.load(_write(tmp_path / "mlp"), device=TEST_DEVICE)
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    first = g(x)
    assert g.last_run.served == 3  # linear, sub and relu, the graph's output
    kept = first.numpy().copy()
    g(x * 2)  # a second run reuses nothing the first one returned
    np.testing.assert_array_equal(first.numpy(), kept)
    np.testing.assert_allclose(kept, _reference(x), rtol=1e-5, atol=1e-6)


def test_a_value_an_op_returned_unchanged_is_moved_into_its_own_place(tmp_path):
    g = graph.load(_write(tmp_path / "chain", _chain_document(), weights={}), device=TEST_DEVICE)
    x = np.linspace(-2, 2, 8, dtype=np.float32).reshape(2, 4)
    got = g(x).numpy()
    relu = np.maximum(x, 0)
    np.testing.assert_array_equal(got, -relu * relu)
    assert g.last_run.copied == 1


def test_a_replay_reads_each_calls_inputs_including_a_0d_step_scalar(tmp_path):
    """A per-step scalar (a timestep, say) passed as a 0-d tensor is read from its buffer on every replay,
    never baked into the launches; stale inputs would repeat the first call's answer."""
    t = {"shape": ["s0", 4], "dtype": "float32"}
    document = {
        "format": "nbxtensor.graph", "version": 1, "symbols": {"s0": {"min": 1, "max": 8, "trace": 2}},
        "inputs": ["input::x", "input::step"], "outputs": ["out"],
        "tensors": {"input::x": t, "input::step": {"shape": [], "dtype": "float32"}, "out": t},
        "ops": [{"id": "out", "op": "aten::mul.Tensor", "args": [{"tensor": "input::x"}, {"tensor": "input::step"}],
                 "kwargs": {}, "outputs": ["out"]}],
    }
    g = graph.load(_write(tmp_path / "step", document, weights={}), device=TEST_DEVICE)
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    for step in (1.0, 2.0, 3.0, 4.0):
        np.testing.assert_array_equal(g.replay(x, np.array(step, np.float32)).numpy(), x * step)
    reason = g._replayer.reason(x, np.array(0.0, np.float32))
    assert reason is None or "reads tensor data on the host" in reason


def test_cpu_weights_off_the_kernels_alignment_are_copied_once_at_load(tmp_path):
    """A safetensors file lays tensors out back to back, so a weight viewing the mapped file may start
    off the 16 bytes kernels specialise on, and every op would copy it first: the graph's weights start
    on them, and the graph runs the same."""
    from nbxtensor.io import safe_open
    weights = {"fc.bias": BIAS, "fc.weight": WEIGHT}  # 12 bytes of bias put the weight off 16 bytes
    directory = _write(tmp_path, weights=weights)
    with safe_open(os.path.join(directory, "model.safetensors"), device="cpu", mmap=True) as file:
        assert any(file.get_tensor(name).data_ptr() % 16 for name in weights)
    model = graph.load(directory, device="cpu")
    assert all(w.data_ptr() % 16 == 0 for w in model.weights.values())
    np.testing.assert_array_equal(model.weights["param::fc.weight"].numpy(), WEIGHT)
    np.testing.assert_array_equal(model.weights["param::fc.bias"].numpy(), BIAS)


@cpu_kernels
def test_arguments_are_bound_once_per_set_of_symbol_values(tmp_path, monkeypatch):
    model = graph.load(_write(tmp_path / "m"), device=TEST_DEVICE)
    rng = np.random.default_rng(0)
    first = rng.standard_normal((2, 4)).astype(np.float32)
    np.testing.assert_allclose(model(first).numpy(), _reference(first), rtol=1e-5, atol=1e-6)
    decoded = []
    arguments = model._arguments
    monkeypatch.setattr(model, "_arguments", lambda *a: decoded.append(a[0].id) or arguments(*a))
    # the same shapes, new values: nothing is decoded again, and the new values are the ones read
    again = rng.standard_normal((2, 4)).astype(np.float32)
    np.testing.assert_allclose(model(again).numpy(), _reference(again), rtol=1e-5, atol=1e-6)
    assert decoded == []
    other = rng.standard_normal((5, 4)).astype(np.float32)  # new symbol values: bound for them, once
    np.testing.assert_allclose(model(other).numpy(), _reference(other), rtol=1e-5, atol=1e-6)
    assert sorted(set(decoded)) == ["linear", "relu", "sub"]
    decoded.clear()
    model(other)
    assert decoded == []


def _cache_document(append_outputs):
    cache = {"shape": [3, 2, 1, 4], "dtype": "float32"}
    return {
        "format": "nbxtensor.graph", "version": 1, "symbols": {},
        "inputs": ["input::k", "input::v", "input::key_cache", "input::value_cache", "input::slots", "input::q",
                   "input::table", "input::lens"],
        "outputs": ["attended"],
        "tensors": {
            "input::k": {"shape": [2, 1, 4], "dtype": "float32"}, "input::v": {"shape": [2, 1, 4], "dtype": "float32"},
            "input::key_cache": cache, "input::value_cache": cache,
            "input::slots": {"shape": [2], "dtype": "int64"}, "input::q": {"shape": [1, 1, 4], "dtype": "float32"},
            "input::table": {"shape": [1, 3], "dtype": "int32"}, "input::lens": {"shape": [1], "dtype": "int32"},
            "appended": cache, "attended": {"shape": [1, 1, 4], "dtype": "float32"},
        },
        "ops": [
            {"id": "append", "op": "nbx::kv_cache_append", "kwargs": {}, "outputs": append_outputs,
             "args": [{"tensor": f"input::{name}"} for name in ("k", "v", "key_cache", "value_cache", "slots")]},
            {"id": "attend", "op": "nbx::paged_attention", "kwargs": {}, "outputs": ["attended"],
             "args": [{"tensor": f"input::{name}"} for name in ("q", "key_cache", "value_cache", "table", "lens")]},
        ],
    }


@cpu_kernels
def test_a_step_writing_its_operands_in_place_lists_its_one_output_unused(tmp_path):
    rng = np.random.default_rng(0)
    k, v, q = (rng.standard_normal(shape).astype(np.float32) for shape in ((2, 1, 4), (2, 1, 4), (1, 1, 4)))
    key_cache, value_cache = nbx.zeros((3, 2, 1, 4), device=TEST_DEVICE), nbx.zeros((3, 2, 1, 4), device=TEST_DEVICE)
    model = graph.load(_write(tmp_path / "ok", _cache_document([None])), device=TEST_DEVICE)
    # the two tokens land in page 1's slots 2 and 3; the sequence reads exactly them
    attended = model(k, v, key_cache, value_cache, np.array([2, 3]), q, np.array([[1, 0, 2]], np.int32),
                     np.array([2], np.int32)).numpy().astype(np.float64)
    np.testing.assert_array_equal(key_cache.numpy()[1], k)
    np.testing.assert_array_equal(value_cache.numpy()[1], v)
    scores = k[:, 0].astype(np.float64) @ q[0, 0] / 2.0
    weights = np.exp(scores - scores.max())
    # float32 attention over two keys: a few float32 roundings of O(1) values
    np.testing.assert_allclose(attended[0, 0], weights @ v[:, 0] / weights.sum(), rtol=1e-5, atol=1e-6)
    with pytest.raises(GraphError, match="returns nothing"):
        graph.load(_write(tmp_path / "named", _cache_document(["appended"])), device=TEST_DEVICE).infer({})
