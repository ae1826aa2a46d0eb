"""Host time of a graph's normal path per step, on any machine, with every kernel launch stubbed out
(``cpu_host_path.stub_launches``): for a tiny Llama exported from transformers (needs torch to export;
the run itself does not), fused as ``graph.load`` fuses it and unfused,
- the executor's own cost: each step's implementation replaced by one that returns what it returned in
  a real run, so only the executor's work is timed (binding arguments, the arena, checking results);
- the whole normal path: the ops' host work (their plans, the launch path) included.
Not a GPU figure: a GPU host adds Triton's C launcher and the driver's launch.

    python3 benchmarks/cpu_graph_host.py
"""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from cpu_host_path import stub_launches  # noqa: E402

from nbxtensor import graph  # noqa: E402


def per_step_us(model, inputs, calls: int = 20, repeats: int = 5) -> float:
    """Median host microseconds per step of ``model(*inputs)``."""
    model(*inputs)
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            model(*inputs)
        runs.append((time.perf_counter() - start) / calls / len(model.steps) * 1e6)
    return statistics.median(runs)


def executor_us_per_step(model, inputs, calls: int = 20, repeats: int = 5) -> float:
    """The executor's own host microseconds per step: ``per_step_us`` with every step's implementation
    returning its result of one real run, for the shapes of ``inputs``."""
    model(*inputs)
    values = model.bind([tuple(np.shape(t)) for t in inputs])
    plan, base, input_slots, runs, output_slots = model._runs(values)
    recorded = {}

    def recording(step, impl):
        def run(*args, **kwargs):
            recorded[step.id] = impl(*args, **kwargs)
            return recorded[step.id]
        return run
    model._prepared[tuple(sorted(values.items()))] = (
        plan, base, input_slots, [(r[0], recording(r[0], r[1]), *r[2:]) for r in runs], output_slots)
    model(*inputs)
    model._prepared[tuple(sorted(values.items()))] = (
        plan, base, input_slots, [(r[0], lambda *a, _r=recorded[r[0].id], **k: _r, *r[2:]) for r in runs],
        output_slots)
    try:
        return per_step_us(model, inputs, calls, repeats)
    finally:
        model._prepared.clear()


def tiny_llama(out_dir: str) -> str:
    import torch
    import transformers

    from nbxtensor.export import export
    from nbxtensor.export.checkpoint import TokenModel

    torch.manual_seed(0)
    config = transformers.LlamaConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, intermediate_size=128, vocab_size=256,
                                      max_position_embeddings=64)
    module = TokenModel(transformers.LlamaForCausalLM(config).eval(), "logits")
    return export(module, (torch.randint(0, 256, (1, 16)),), out_dir)


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        directory = tiny_llama(os.path.join(scratch, "llama"))
        stub_launches()
        ids = np.random.default_rng(0).integers(0, 256, (1, 16))
        print(f"{'tiny Llama, 2 layers':24s} {'steps':>6s} {'executor us/step':>17s} {'normal path us/step':>20s}")
        for name, fuse in (("fused", True), ("unfused", False)):
            model = graph.load(directory, fuse=fuse)
            own, whole = executor_us_per_step(model, (ids,)), per_step_us(model, (ids,))
            print(f"{name:24s} {len(model.steps):6d} {own:17.2f} {whole:20.2f}")


if __name__ == "__main__":
    main()
