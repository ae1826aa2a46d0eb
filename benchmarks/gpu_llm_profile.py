"""Where a decode step's device time goes, kernel by kernel, at TinyLlama-1.1B size (see gpu_llm.py).

Runs decode steps op by op and replayed under torch's profiler (CUPTI sees every kernel in the process,
ours included), and prints per kernel name and grid: launches per step, device microseconds per step, and
the share of the step; then the step's total device time against its wall time. The weights-over-bandwidth
floor is printed beside it. NBX_PROFILE_BATCHES (default "1,32") picks the batch sizes. With OUT set, the
chrome trace of each batch's replayed steps goes to $OUT.

NBX_PDL=0/1 turns programmatic dependent launch off or on (the header says which, and whether the device
takes it). Under it a kernel starts while its predecessor runs and waits inside, so kernel times overlap:
"busy" is the time some kernel runs (their intervals' union), the step's device time either way; the
per-kernel sum then counts the waits too."""
from __future__ import annotations

import collections
import json
import os
import tempfile
import time

import nbxtensor as nbx
from nbxtensor import launch, llm

import torch  # noqa: E402  (the profiler; nbxtensor.llm never imports it)

from gpu_llm import BANDWIDTH, checkpoint

STEPS = 8


def kernel_table(trace_path: str, steps: int) -> tuple[list[tuple], float]:
    """(per kernel name and grid: launches and microseconds per step, most first; microseconds per step
    during which some kernel ran)."""
    with open(trace_path) as file:
        events = json.load(file)["traceEvents"]
    totals: dict[tuple, list] = collections.defaultdict(lambda: [0, 0.0])
    intervals = []
    for event in events:
        if event.get("cat") != "kernel":
            continue
        args = event.get("args", {})
        key = (event["name"][:60], str(args.get("grid", "")))
        totals[key][0] += 1
        totals[key][1] += float(event.get("dur", 0.0))
        intervals.append((float(event["ts"]), float(event["ts"]) + float(event.get("dur", 0.0))))
    busy, reached = 0.0, float("-inf")
    for start, end in sorted(intervals):
        busy += max(0.0, end - max(start, reached))
        reached = max(reached, end)
    rows = [(name, grid, count / steps, us / steps) for (name, grid), (count, us) in totals.items()]
    return sorted(rows, key=lambda r: -r[3]), busy / steps


def profile_steps(ours, prompts, replay: bool, label: str) -> tuple[list[tuple], float, float]:
    """Decode steps only: the prompts are prefilled (and the bucket captured) before the profile starts."""
    engine = ours.engine
    replayer = engine.replayer
    if not replay:
        engine.replayer = None
    for prompt in prompts:
        engine.add(prompt, ours.params(max_new_tokens=3 * STEPS + 4))
    for _ in range(3):
        engine.step()
    nbx.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(STEPS):
            engine.step()
        nbx.cuda.synchronize()
    path = os.path.join(os.environ.get("OUT") or tempfile.gettempdir(), f"llm_trace_{label}.json")
    prof.export_chrome_trace(path)
    nbx.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(STEPS):
        engine.step()
    wall_us = (time.perf_counter() - start) / STEPS * 1e6
    while engine.busy:
        engine.step()
    engine.replayer = replayer
    return *kernel_table(path, STEPS), wall_us


def main() -> None:
    batches = [int(b) for b in os.environ.get("NBX_PROFILE_BATCHES", "1,32").split(",")]
    with tempfile.TemporaryDirectory() as directory:
        reference = checkpoint(directory)
        weight_bytes = sum(p.numel() * p.element_size() for p in reference.parameters())
        del reference
        torch.cuda.empty_cache()
        ours = llm.load(directory, device="cuda", cache_tokens=32 * 1024)
        print(f"NBX_PDL={os.environ.get('NBX_PDL', '0')}: programmatic dependent launch "
              f"{'on' if launch.dependent_launch(nbx.device('cuda')) else 'off'}")
        prompt = list(range(1, 65))
        summary = []
        for batch in batches:
            for replay in (True, False):
                label = f"b{batch}_{'replay' if replay else 'ops'}"
                rows, busy_us, wall_us = profile_steps(ours, [prompt] * batch, replay, label)
                device_us = sum(r[3] for r in rows)
                launches = sum(r[2] for r in rows)
                print(f"\n== batch {batch}, {'replayed' if replay else 'op by op'}: {launches:.0f} launches, "
                      f"busy {busy_us:.0f} us/step, kernels' sum {device_us:.0f} us/step, wall {wall_us:.0f} us/step")
                print("us/step | share | launches/step | kernel | grid")
                for name, grid, count, us in rows[:30]:
                    print(f"{us:8.1f} | {100 * us / device_us:5.1f}% | {count:6.2f} | {name} | {grid}")
                summary.append((label, launches, busy_us, device_us, wall_us))
        floor_us = weight_bytes / BANDWIDTH * 1e6
        print(f"\nweights {weight_bytes / 2**30:.2f} GiB, floor {floor_us:.0f} us/step")
        print("case | launches/step | busy us/step | kernels' sum us/step | wall us/step")
        for row in summary:
            print(" | ".join(f"{v:.0f}" if isinstance(v, float) else str(v) for v in row))


if __name__ == "__main__":
    main()
