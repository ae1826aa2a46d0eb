"""Programmatic dependent launch: the ``PDL`` constexpr of the decode step's kernels follows the device's
facts and ``NBX_PDL``, and a launch carries the attribute exactly when its ``PDL`` is true (the PTX side,
that such a kernel waits first, is ``tests/test_compile_check.py``'s)."""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor import launch
from nbxtensor.device import backend_for
from nbxtensor.ops import attention, matmul_gemv, matmul_prologue, normalization, plans
from nbxtensor.ops.normalization import add_rms_norm, rms_norm

from .conftest import TEST_DEVICE

F = nbx.nn.functional


def _backend(compiles: bool, **kernel_facts):
    return SimpleNamespace(compiles_kernels=compiles, facts={"kernels": kernel_facts})


@pytest.mark.parametrize("switch_on, compiles, claims, expected", [
    (True, True, True, True),
    (False, True, True, False),   # NBX_PDL off
    (True, False, True, False),   # the interpreter
    (True, True, False, False),   # a class whose facts do not claim it
])
def test_dependent_launch_needs_the_switch_the_facts_and_compiled_kernels(monkeypatch, switch_on, compiles, claims,
                                                                          expected):
    facts = {"programmatic_dependent_launch": True} if claims else {}
    monkeypatch.setattr(launch, "backend_for", lambda device: _backend(compiles, **facts))
    monkeypatch.setattr(launch, "_PDL_ON", switch_on)
    assert launch.dependent_launch(nbx.device("cuda")) is expected


def test_the_interpreter_never_takes_it_even_where_facts_and_switch_say_so(monkeypatch, set_kernel_facts):
    monkeypatch.setattr(launch, "_PDL_ON", True)
    set_kernel_facts(programmatic_dependent_launch=True)
    cpu = nbx.device("cpu")
    assert not backend_for(cpu).compiles_kernels
    assert launch.dependent_launch(cpu) is False


class _Kernel:
    """Stands for a jitted kernel on a compiling backend: ``kernel[grid](*args, **options)`` is recorded."""
    arg_names = ["x", "BLOCK", "PDL"]

    def __init__(self):
        self.calls = []

    def __getitem__(self, grid):
        def compile_and_run(*args, **options):
            self.calls.append(options)
            return SimpleNamespace()  # no Triton launcher: later launches would go through ``run``
        return compile_and_run


@pytest.mark.parametrize("pdl", [True, False])
def test_a_launch_carries_the_attribute_exactly_when_its_pdl_constexpr_is_true(monkeypatch, pdl):
    monkeypatch.setattr(launch, "backend_for", lambda device: _backend(True))
    monkeypatch.setattr(launch, "_compiled", {})
    monkeypatch.setattr(launch, "_use_scratch", lambda device: None)
    kernel = _Kernel()
    launch.launch(kernel, (1,), SimpleNamespace(type="cuda", index=0), [7], BLOCK=4, PDL=pdl)
    assert kernel.calls == [{"BLOCK": 4, "PDL": pdl, "launch_pdl": pdl}]


def test_a_kernel_without_the_constexpr_never_carries_it(monkeypatch):
    monkeypatch.setattr(launch, "backend_for", lambda device: _backend(True))
    monkeypatch.setattr(launch, "_compiled", {})
    monkeypatch.setattr(launch, "_use_scratch", lambda device: None)
    kernel = _Kernel()
    kernel.arg_names = ["x", "BLOCK"]
    launch.launch(kernel, (1,), SimpleNamespace(type="cuda", index=0), [7], BLOCK=4)
    assert kernel.calls == [{"BLOCK": 4, "launch_pdl": False}]


DECODE_STEP_KERNELS = {"gemv", "gemv_combine", "norm_rows", "pointwise", "rotary_append", "decode_partial",
                       "decode_combine", "gemv_prologue"}


def split_products_in_two(candidates):
    """``matmul_gemv.gemv_candidates`` with K in two splits: a product's partials, then their combine."""
    return lambda facts, m, n, k: [dict(c, SPLITS=2, BLOCK_K=16) for c in candidates(facts, m, n, k)]


@contextlib.contextmanager
def counters_outnumbered():
    """Products planned inside plan as where their column blocks outnumber the arrival counters: a split's
    parts are added by a second launch."""
    kept = matmul_gemv.ARRIVAL_COUNTERS
    matmul_gemv.ARRIVAL_COUNTERS = 0
    try:
        yield
    finally:
        matmul_gemv.ARRIVAL_COUNTERS = kept


def run_decode_step_ops(rng, device=TEST_DEVICE) -> None:
    """Each op of a decode step once, on tiny operands: a product (planned as where its column blocks
    outnumber the arrival counters: its splits added by a second launch), the residual add with its norm
    and a norm alone, the gated activation, rotary embedding with the cache append, paged attention, and the
    products with a norm (after an add, or alone) or the gated activation in their prologue (their splits
    added by the last to finish)."""
    def f32(*shape):
        return nbx.tensor(rng.standard_normal(shape).astype(np.float32), device=device)

    def ints(*values):
        return nbx.tensor(np.array(values, np.int32), device=device)
    caches = f32(20, 4, 2, 16), f32(20, 4, 2, 16)  # 17 pages of 4 keys: 68 keys, in two splits
    with counters_outnumbered():
        F.linear(f32(1, 64), f32(32, 64))
    h, _ = add_rms_norm(f32(1, 32), f32(1, 32), (32,), f32(32), 1e-6)
    rms_norm(h, (32,), f32(32), 1e-6)
    F.act_and_mul(f32(1, 64), activation="silu")
    q, _ = F.rotary_append(f32(1, 4, 16), f32(1, 2, 16), f32(1, 2, 16), f32(8, 8), f32(8, 8), ints([5]), *caches,
                           ints(5))
    F.paged_attention(q, *caches, ints(list(range(17))), ints(66))
    matmul_prologue.rms_norm_linear(f32(1, 32), f32(32), f32(16, 32), None, 1e-6)
    matmul_prologue.add_rms_norm_linear(f32(1, 32), f32(1, 32), f32(32), f32(16, 32), None, 1e-6)
    matmul_prologue.act_and_mul_linear(f32(1, 64), f32(16, 32), activation="silu")


def test_the_decode_step_ops_set_pdl_from_dependent_launch(monkeypatch, rng):
    """Every decode-step kernel's ``PDL`` is what ``dependent_launch`` answered for the op's device. The
    stand-in answers 0: false, so the kernels run as they would with it off, yet unlike the False of a
    launch that ignored it."""
    asked = []

    def answer(device):
        asked.append(device.type)
        return 0
    for module in (launch, matmul_gemv, matmul_prologue, normalization, attention):
        monkeypatch.setattr(module, "dependent_launch", answer)
    for module in (matmul_gemv, matmul_prologue):
        monkeypatch.setattr(module, "gemv_candidates", split_products_in_two(matmul_gemv.gemv_candidates))
    plans.clear_all()  # plans keep the constexprs they were made with
    try:
        # planned (and, on a GPU, tuned: candidates timed after a fill of L2) outside the capture, as a
        # decode step is before its capture
        run_decode_step_ops(rng)
        with launch.capture() as recorded:
            run_decode_step_ops(rng)
    finally:
        plans.clear_all()
    pdl = {(kernel.fn.__name__, type(constexprs["PDL"]), constexprs["PDL"])
           for kernel, _, _, _, constexprs, _ in recorded.launches}
    assert pdl == {(name, int, 0) for name in DECODE_STEP_KERNELS}
    assert set(asked) == {nbx.device(TEST_DEVICE).type}


def test_nbx_pdl_takes_0_or_1_only():
    env = dict(os.environ, NBX_PDL="yes", NBX_DEVICE="cpu")
    result = subprocess.run([sys.executable, "-c", "import nbxtensor"], capture_output=True, text=True, env=env,
                            timeout=300)
    assert result.returncode != 0
    assert "NBX_PDL must be 0 or 1, got 'yes'" in result.stderr


def test_a_constexpr_left_to_its_default_is_passed_to_later_compiled_launches(monkeypatch):
    """A launch may leave a constexpr with a default out (softmax's long rows leave WARP_ROWS): its first,
    compiling launch records the default among the values later launches pass, where it once raised KeyError
    on the GPU alone."""
    monkeypatch.setattr(launch, "backend_for", lambda device: _backend(True))
    monkeypatch.setattr(launch, "_compiled", {})
    monkeypatch.setattr(launch, "_use_scratch", lambda device: None)
    monkeypatch.setattr(launch, "_direct_launcher", lambda compiled: None)
    kernel = _Kernel()
    kernel.arg_names = ["x", "BLOCK", "WARP_ROWS"]
    kernel.params = [SimpleNamespace(name="x", has_default=False, default=None),
                     SimpleNamespace(name="BLOCK", has_default=False, default=None),
                     SimpleNamespace(name="WARP_ROWS", has_default=True, default=False)]
    launch.launch(kernel, (1,), SimpleNamespace(type="cuda", index=0), [7], BLOCK=4)
    ((_, values, _),) = launch._compiled.values()
    assert values == [4, False]
    kernel.arg_names.append("STAGES")
    kernel.params.append(SimpleNamespace(name="STAGES", has_default=False, default=None))
    with pytest.raises(TypeError, match="launched without constexpr STAGES, which has no default"):
        launch.launch(kernel, (2,), SimpleNamespace(type="cuda", index=0), [7], BLOCK=8)
