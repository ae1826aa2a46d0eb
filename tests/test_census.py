"""The census: the launch keys a graph's run forms, derived from metadata alone, equal those a real run
forms (the shadow run); every op that tunes declares a key rule."""
from __future__ import annotations

import inspect
import os
import time
import types

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor import census as C
from nbxtensor import cli, graph
from nbxtensor.device.facts import load as load_facts
from nbxtensor.ops import registry
from tests.conftest import TEST_DEVICE
from tests.test_graph_arena import HIDDEN, _Builder, _weights

pytestmark = pytest.mark.skipif(TEST_DEVICE != "cpu", reason="the shadow run compares with the CPU's facts")


def _encoder(directory):
    """One BERT-like layer: projections, heads through permutes, attention, the output projection."""
    g = _Builder({"s": {"min": 1, "max": 64, "trace": 20}})
    x = g.input("x", [1, "s", HIDDEN])
    params = {name: g.param(name, value) for name, value in _weights(0).items()}
    heads = []
    for name in ("q", "k", "v"):
        projected = g.op("aten::linear.default", [x, params[name], params[f"{name}_bias"]], [1, "s", HIDDEN])
        split = g.op("aten::view.default", [projected, [1, {"sym": "s"}, 2, HIDDEN // 2]], [1, "s", 2, HIDDEN // 2])
        heads.append(g.op("aten::permute.default", [split, [0, 2, 1, 3]], [1, 2, "s", HIDDEN // 2]))
    attended = g.op("aten::scaled_dot_product_attention.default", heads, [1, 2, "s", HIDDEN // 2],
                    kwargs={"is_causal": True})
    back = g.op("aten::permute.default", [attended, [0, 2, 1, 3]], [1, "s", 2, HIDDEN // 2])
    merged = g.op("aten::reshape.default", [back, [1, {"sym": "s"}, HIDDEN]], [1, "s", HIDDEN])
    out = g.op("aten::linear.default", [merged, params["o"]], [1, "s", HIDDEN])
    return g.write(directory, [x], [out])


def _products(directory):
    """Products through transposed views: matmul, bmm, addmm, mv, einsum."""
    g = _Builder({"s": {"min": 1, "max": 64, "trace": 24}})
    x = g.input("x", ["s", HIDDEN])
    y = g.input("y", [3, "s", HIDDEN])
    params = {name: g.param(name, value) for name, value in _weights(1).items()}
    xt = g.op("aten::t.default", [x], [HIDDEN, "s"])
    gram = g.op("aten::mm.default", [xt, x], [HIDDEN, HIDDEN])
    scaled = g.op("aten::addmm.default", [params["q_bias"], x, params["k"]], ["s", HIDDEN])
    yt = g.op("aten::transpose.int", [y, 1, 2], [3, HIDDEN, "s"])
    batched = g.op("aten::bmm.default", [y, yt], [3, "s", "s"])
    ranked = g.op("aten::matmul.default", [y, params["v"]], [3, "s", HIDDEN])
    vector = g.op("aten::mv.default", [params["o"], params["ln_bias"]], [HIDDEN])
    contracted = g.op("aten::einsum.default", ["bsh,bth->bst", [y, ranked]], [3, "s", "s"])
    return g.write(directory, [x, y], [gram, scaled, batched, vector, contracted])


def _chain(directory, steps):
    """``steps`` linear layers with adds between them: a graph of hundreds of steps."""
    g = _Builder({"s": {"min": 1, "max": 64, "trace": 8}})
    x = g.input("x", ["s", HIDDEN])
    weight = g.param("w", _weights(2)["q"])
    for _ in range(steps // 2):
        y = g.op("aten::linear.default", [x, weight], ["s", HIDDEN])
        x = g.op("aten::add.Tensor", [x, y], ["s", HIDDEN])
    return g.write(directory, [{"tensor": "input::x"}], [x])


def _conv_block(directory):
    """A ResNet-ish block on a batch of s 6x6 RGB images: a 3x3 stem (3 input channels: the implicit GEMM's
    flat-K form), ReLU, a depthwise 3x3 (the direct kernel), a 1x1 with bias (the matrix product), the
    residual add, ReLU and a strided 3x3 downsampling (the implicit GEMM)."""
    rng = np.random.default_rng(5)
    g = _Builder({"s": {"min": 1, "max": 64, "trace": 2}})

    def conv(x, name, cout, cin, window, stride, groups, bias, side):
        weight = rng.standard_normal((cout, cin // groups, window, window)) / np.sqrt(cin // groups * window ** 2)
        args = [x, g.param(name, weight.astype(np.float32)),
                g.param(f"{name}_bias", (rng.standard_normal(cout) / 10).astype(np.float32)) if bias else None,
                [stride, stride], [window // 2, window // 2], [1, 1], groups]
        return g.op("aten::conv2d.default", args, ["s", cout, side, side])

    x = g.input("x", ["s", 3, 6, 6])
    active = g.op("aten::relu.default", [conv(x, "stem", 32, 3, 3, 1, 1, True, 6)], ["s", 32, 6, 6])
    depthwise = conv(active, "depthwise", 32, 32, 3, 1, 32, False, 6)
    pointwise = conv(depthwise, "pointwise", 32, 32, 1, 1, 1, True, 6)
    residual = g.op("aten::relu.default", [g.op("aten::add.Tensor", [active, pointwise], ["s", 32, 6, 6])],
                    ["s", 32, 6, 6])
    down = conv(residual, "down", 16, 32, 3, 2, 1, False, 3)
    return g.write(directory, [x], [down])


def _inputs(model, values):
    rng = np.random.default_rng(0)
    return [rng.standard_normal(model._shape(t, values)).astype(np.float32) for t in model.inputs]


@pytest.mark.parametrize("build", [_encoder, _products, _conv_block])
@pytest.mark.parametrize("s", [1, 20])
def test_census_equals_the_shadow_run(tmp_path, build, s):
    directory = build(str(tmp_path / "g"))
    planned = graph.load(directory, weights=False)
    keys = C.census(planned, {"s": s}, load_facts("cpu"))
    assert keys, "these graphs tune"
    model = graph.load(directory, device="cpu")
    with C.shadow() as formed:
        model(*_inputs(model, {"s": s}))
    assert set(keys) == set(formed)


def test_hopper_census_runs_here(tmp_path):
    keys = C.census(graph.load(_encoder(str(tmp_path / "g")), weights=False), {"s": 40}, load_facts("hopper"))
    kernels = {key.split("|")[0] for key in keys}
    assert kernels == {"gemm", "attention"}  # float32 on hopper: products on bfloat16 parts
    parts = [key for key in keys if key.startswith("gemm") and key.endswith("|bf16_parts=1")]
    assert parts and all("|float32,float32|" in key for key in parts)
    assert all("bfloat16,float32" in key for key in keys if key.startswith("gemm") and key not in parts)
    # four projections, each a product on parts and its planes form's GEMM (one chunk); one attention, whose
    # tuning times its float32 forward on parts too
    assert sum(keys.values()) == 4 * 2 + 1
    assert [key for key in keys if key.startswith("attention")][0].endswith("|bf16_parts=1")
    decode = C.census(graph.load(_encoder(str(tmp_path / "g")), weights=False), {"s": 1}, load_facts("hopper"))
    assert {key.split("|")[0] for key in decode} == {"gemv", "attention_decode"}


def test_census_of_hundreds_of_steps_is_quick(tmp_path):
    model = graph.load(_chain(str(tmp_path / "g"), 500), weights=False)
    assert len(model.steps) == 500
    start = time.perf_counter()
    keys = C.census(model, {"s": 8}, load_facts("hopper"))
    elapsed = time.perf_counter() - start
    assert sum(keys.values()) == 250 and len(keys) == 1
    assert elapsed < 2.0, elapsed


def _reaches_tuning(function, seen) -> bool:
    """Whether ``function``'s code, or that of the nbxtensor functions and ops it names, forms a launch key.
    Attribute names of Tensor methods that ops declare count as calls of those ops."""
    code = getattr(function, "__code__", None)
    if code is None or function in seen:
        return False
    seen.add(function)
    names, stack = set(), [code]
    while stack:
        current = stack.pop()
        names.update(current.co_names)
        stack += [c for c in current.co_consts if isinstance(c, types.CodeType)]
    if names & {"launch_key", "choose_timed", "choose"}:
        return True
    for name in names:
        target = function.__globals__.get(name)
        if isinstance(target, registry.OpDef):
            target = target.impl
        if inspect.isfunction(target) and target.__module__.startswith("nbxtensor") and _reaches_tuning(target, seen):
            return True
        by_method = _METHODS.get(name)
        if by_method is not None and _reaches_tuning(by_method.impl, seen):
            return True
    return False


_METHODS = {method: op for op in registry.all_ops() for method in op.methods}


def test_every_op_that_tunes_has_a_key_rule():
    tuned = [op.name for op in registry.all_ops() if _reaches_tuning(op.impl, set())]
    assert {"linear", "matmul", "scaled_dot_product_attention", "quantized_linear"} <= set(tuned)
    assert [name for name in tuned if registry.get(name).key is None] == []


def test_cli_census(tmp_path, capsys):
    directory = _encoder(str(tmp_path / "g"))
    assert cli.main(["census", directory, "--facts", "hopper", "--dims", "s=40"]) == 0
    printed = capsys.readouterr().out
    assert "attention|L=64|S=64" in printed and "gemm|" in printed
    assert cli.main(["census", directory, "--facts", "nonesuch"]) == 2
    assert cli.main(["census", directory, "--dims", "s=x"]) == 2
    assert cli.main(["census", directory, "--dims", "s=1000"]) == 2
    assert cli.main(["census", str(tmp_path / "missing")]) == 2
    refused = capsys.readouterr().err.strip().splitlines()
    assert len(refused) == 4 and all(line.startswith("nbx census: ") for line in refused)
