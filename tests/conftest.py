"""Test configuration. ``NBX_TEST_DEVICE`` picks the device the suite runs on (default: the CPU, through
Triton's interpreter); on a GPU machine ``NBX_TEST_DEVICE=cuda`` runs the same tests there."""
import json
import os

import numpy as np
import pytest

import nbxtensor as nbx

TEST_DEVICE = os.environ.get("NBX_TEST_DEVICE", "cpu")

# In a process whose kernels are compiled for a GPU, CPU tensors hold data but run no kernels.
CPU_RUNS_KERNELS = nbx._runtime.KERNEL_MODE == nbx._runtime.INTERPRETED
cpu_kernels = pytest.mark.skipif(not CPU_RUNS_KERNELS, reason="CPU tensors run no kernels in a GPU-compiling process")


def examples(count: int) -> int:
    """Hypothesis examples for a property whose examples each make new kernel specialisations: ``count``
    under the interpreter, which compiles nothing; a quarter of them (at least 5) where each specialisation
    compiles for the GPU (seconds each, on a cold cache), so that a shard of the suite ends in bounded time."""
    return count if CPU_RUNS_KERNELS else max(5, count // 4)


@pytest.fixture(autouse=True)
def device_errors_raise_in_their_test():
    """An error a device reported and no synchronisation raised yet (an index out of range found on a GPU)
    fails the test that made it, not the next test to synchronise."""
    yield
    from nbxtensor.device.errors import check_device_errors
    check_device_errors()


@pytest.fixture
def device():
    return TEST_DEVICE


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture
def set_kernel_facts(monkeypatch):
    """``set_kernel_facts(name=value, ...)`` changes the test device's kernel facts for one test. Plans
    made under other facts are forgotten before and after, since plans keep what the facts decided."""
    from nbxtensor.device import backend_for
    from nbxtensor.ops.plans import clear_all
    facts = backend_for(nbx.device(TEST_DEVICE)).facts["kernels"]

    def set_facts(**values):
        clear_all()
        for name, value in values.items():
            monkeypatch.setitem(facts, name, value)
    yield set_facts
    clear_all()


@pytest.fixture
def first_candidate(monkeypatch):
    """Every tuned launch takes its first candidate, as under the interpreter, on every device: a compiling
    device would build and time each candidate (launches that a test counting them sees) and store the
    fastest, which a later test offering other candidates under the same key would be handed. Plans are
    made afresh before and after."""
    from nbxtensor import tuning
    from nbxtensor.ops.plans import clear_all

    def first(key, facts, candidates, prepare):
        return (candidates() if callable(candidates) else candidates)[0]
    monkeypatch.setattr(tuning, "choose_timed", first)
    clear_all()
    yield
    clear_all()


def to_nbx(array, device=TEST_DEVICE):
    """A tensor on the test device holding ``array``'s values (a copy)."""
    return nbx.tensor(np.asarray(array), device=device)


def arange_pair(shape, dtype=np.float64):
    """A NumPy array of 0, 1, 2, ... and the same values as a tensor: each value names its position."""
    array = np.arange(int(np.prod(shape, dtype=np.int64))).astype(dtype).reshape(shape)
    return array, to_nbx(array)


def storage_start(t):
    """Address of the first byte of ``t``'s storage: equal for two tensors exactly when they share it."""
    return t.data_ptr() - t.storage_offset() * t.element_size()


def run_in_census(model, arrays):
    """``model(*arrays)`` (a loaded graph) in a shadow run, asserting that the census of the graph for these
    input shapes named exactly the launch keys the run formed (#31: a census is what a run will tune)."""
    from nbxtensor import census
    from nbxtensor.device import backend_for
    values = model.bind([tuple(a.shape) for a in arrays])
    named = census.census(model, values, backend_for(nbx.device(TEST_DEVICE)).facts)
    with census.shadow() as formed:
        result = model(*arrays)
    assert set(formed) == set(named), (f"the run formed keys the census did not name: {set(formed) - set(named)}; "
                                       f"named but not formed: {set(named) - set(formed)}")
    return result


def matches_module(model, module, inputs, tolerance):
    """Asserts that a loaded graph's output on ``inputs`` (torch tensors), run in the census's shadow, has
    the torch module's shape and values within ``tolerance`` (relative and absolute)."""
    import torch
    with torch.no_grad():
        want = module(*inputs).numpy()
    got = run_in_census(model, [t.numpy() for t in inputs])
    got = (got[0] if isinstance(got, tuple) else got).numpy()
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance)


def exported_run(module, example, folder):
    """``module`` exported with torch.export on the one input ``example`` into ``folder`` and run from there:
    (the graph's output on ``example``, the module's, the names of the graph's ops), outputs as NumPy."""
    import torch
    from nbxtensor import graph
    from nbxtensor.export import export
    export(module, (example,), folder)
    with torch.no_grad():
        want = module(example).numpy()
    got = graph.load(folder, device=TEST_DEVICE)(example.numpy()).numpy()
    names = {op["op"] for op in json.loads((folder / "graph.json").read_text())["ops"]}
    return got, want, names


@pytest.fixture
def guarded_outputs(monkeypatch):
    """Grouped products' outputs (``grouped_mm``'s and ``grouped_quantized_linear``'s) made as the middle rows
    of a buffer whose rows before and after hold 7.0: the buffers, to check that no write left the output."""
    from nbxtensor.ops import moe as moe_ops
    made = []

    def maker(shape, dtype, dev, strides=None, scratch=False):
        rows, columns = shape

        def make():
            buffer = nbx.full((rows + 32, columns), 7.0, dtype=dtype, device=dev)
            made.append((buffer, rows))
            return buffer[16:16 + rows]
        return make
    monkeypatch.setattr(moe_ops, "fresh_tensor_maker", maker)
    moe_ops._grouped_plans.clear()
    moe_ops._grouped_quantized_plans.clear()
    yield made
    moe_ops._grouped_plans.clear()
    moe_ops._grouped_quantized_plans.clear()
